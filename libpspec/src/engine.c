/* engine.c — interval recognition and incremental aggregates in one pass.
 *
 * For every event of the stream, in this order (thesis Figure 4.2):
 *   1. feed it to the top-level aggregates ranging over its type;
 *   2. close the open intervals it ends (metrics computed now), each closed
 *      interval then being fed to the top-level aggregates over its type;
 *   3. feed the event, then each interval just closed, to the metric
 *      aggregates of the intervals still open (an interval only to those
 *      that started before it);
 *   4. open the intervals it starts.
 * Virtual time events are kept in a heap and emitted before the first real
 * event whose timestamp reaches theirs (A.3.4).
 */
#include "engine.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util.h"

/* ---- intrusive lists and a keyed index ------------------------------------------------ */

typedef struct open_iv open_iv;

typedef struct ixnode {
    struct ixnode *prev, *next;
    open_iv *o;
} ixnode;

typedef struct ixlist {
    ixnode *head, *tail;
} ixlist;

static void list_append(ixlist *l, ixnode *n, open_iv *o)
{
    n->o = o;
    n->next = NULL;
    n->prev = l->tail;
    if (l->tail)
        l->tail->next = n;
    else
        l->head = n;
    l->tail = n;
}

static void list_remove(ixlist *l, ixnode *n)
{
    if (n->prev)
        n->prev->next = n->next;
    else
        l->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        l->tail = n->prev;
    n->prev = n->next = NULL;
}

/* Hash map from a number to a list of open intervals; linear probing with
 * backward-shift deletion so that keys no longer open are really gone. */
typedef struct ixslot {
    double key;
    ixlist list;
    bool used;
} ixslot;

typedef struct ixmap {
    ixslot *s;
    uint32_t cap, n;
} ixmap;

static uint32_t hash_key(double k)
{
    if (k == 0)
        k = 0;  /* -0 and 0 are the same key */
    uint64_t b;
    memcpy(&b, &k, sizeof b);
    b ^= b >> 33;
    b *= 0xff51afd7ed558ccdULL;
    b ^= b >> 33;
    return (uint32_t)b;
}

static ixslot *ix_find(ixmap *m, double k)
{
    if (!m->cap)
        return NULL;
    uint32_t i = hash_key(k) & (m->cap - 1);
    for (;;) {
        ixslot *s = &m->s[i];
        if (!s->used)
            return NULL;
        if (s->key == k)
            return s;
        i = (i + 1) & (m->cap - 1);
    }
}

static ixslot *ix_insert_slot(ixmap *m, double k);

static void ix_grow(ixmap *m)
{
    ixslot *old = m->s;
    uint32_t oldcap = m->cap;
    m->cap = oldcap ? oldcap * 2 : 16;
    m->s = ps_calloc(m->cap, sizeof *m->s);
    m->n = 0;
    for (uint32_t i = 0; i < oldcap; i++) {
        if (!old[i].used)
            continue;
        ixslot *s = ix_insert_slot(m, old[i].key);
        s->list = old[i].list;
    }
    free(old);
}

static ixslot *ix_insert_slot(ixmap *m, double k)
{
    if ((m->n + 1) * 4 > m->cap * 3)
        ix_grow(m);
    uint32_t i = hash_key(k) & (m->cap - 1);
    for (;;) {
        ixslot *s = &m->s[i];
        if (!s->used) {
            s->used = true;
            s->key = k;
            s->list.head = s->list.tail = NULL;
            m->n++;
            return s;
        }
        if (s->key == k)
            return s;
        i = (i + 1) & (m->cap - 1);
    }
}

/* Remove an empty slot, shifting back the entries that follow it. */
static void ix_delete_slot(ixmap *m, ixslot *s)
{
    uint32_t mask = m->cap - 1;
    uint32_t i = (uint32_t)(s - m->s);
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->s[j].used)
            break;
        uint32_t home = hash_key(m->s[j].key) & mask;
        /* Can entry j move to i? Only if its home is not in (i, j]. */
        bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (between)
            continue;
        m->s[i] = m->s[j];
        /* The list's first/last nodes point at their neighbours, not at the
         * slot, so moving the slot keeps the list intact. */
        i = j;
    }
    m->s[i].used = false;
    m->s[i].list.head = m->s[i].list.tail = NULL;
    m->n--;
}

static void ix_add(ixmap *m, double k, ixnode *n, open_iv *o)
{
    list_append(&ix_insert_slot(m, k)->list, n, o);
}

static void ix_remove(ixmap *m, double k, ixnode *n)
{
    ixslot *s = ix_find(m, k);
    if (!s)
        return;
    list_remove(&s->list, n);
    if (!s->list.head)
        ix_delete_slot(m, s);
}

static void ix_free(ixmap *m)
{
    free(m->s);
    m->s = NULL;
    m->cap = m->n = 0;
}

/* ---- engine state ------------------------------------------------------------------------ */

/* A metric aggregate of an interval type, and its index of open intervals. */
typedef struct aggst {
    ps_agg *a;
    bool keyed;             /* a->elem_key / a->start_key usable */
    ixmap ix;               /* start_key value -> open intervals */
    ixlist nokey;           /* open intervals whose start_key is UNDEFINED */
} aggst;

/* Per interval type being recognised. */
typedef struct ivst {
    ps_ivtype *t;
    ixlist open;            /* all open intervals, in start order */
    uint64_t nopen;
    bool keyed_end;
    ixmap endix;            /* start_key value -> open intervals */
    aggst *aggs;            /* [t->naggs] */
    double after;           /* IVE_AFTER: duration in ticks */
    open_iv *pool;          /* closed records kept for reuse (accumulators reset) */
    uint32_t npool;
} ivst;

enum { POOL_KEEP = 256 };   /* reusable records kept per interval type */

struct open_iv {
    ixnode all;             /* in ivst.open */
    ixnode endn;            /* in ivst.endix */
    double endkey;
    pv_event *start;        /* owned */
    uint64_t start_seq;
    uint32_t naggs;
    pv_acc **accs;          /* [naggs] */
    ixnode *aggn;           /* [naggs] */
    double *aggkey;         /* [naggs] */
    uint8_t *aggkeyed;      /* [naggs]: 1 in the agg's index, 0 in its nokey list */
};

/* A metric aggregate subscribed to an event or interval type. */
typedef struct msub {
    ivst *is;
    uint32_t k;             /* index in is->aggs */
} msub;

#define VEC(type) struct { type *v; uint32_t n, cap; }
#define VPUSH(vec, x)                                                             \
    do {                                                                          \
        if ((vec).n == (vec).cap) {                                               \
            (vec).cap = (vec).cap ? (vec).cap * 2 : 4;                            \
            (vec).v = ps_realloc((vec).v, (vec).cap * sizeof *(vec).v);           \
        }                                                                         \
        (vec).v[(vec).n++] = (x);                                                 \
    } while (0)

/* What an event type triggers. */
typedef struct evdisp {
    VEC(ivst *) ends;       /* interval types it may end */
    VEC(ivst *) starts;     /* interval types it starts */
    VEC(msub) msubs;        /* metric aggregates over it */
    VEC(uint32_t) tops;     /* top-level aggregates over it (index into pass tops) */
    bool relevant;          /* anything at all, or -e output */
} evdisp;

/* What a closed interval of a type triggers. */
typedef struct ivdisp {
    VEC(msub) msubs;
    VEC(uint32_t) tops;
} ivdisp;

/* A pending virtual time event. */
typedef struct vevent {
    double ts;              /* exact time in ticks */
    uint8_t is_start;       /* ends sort before starts at the same time */
    uint64_t order;         /* FIFO among equals */
    ps_evtype *type;        /* start$I or end$I */
    open_iv *target;        /* end$I: the interval it ends */
    ivst *target_is;
    uint64_t index;         /* start$I: which tick of the chain */
} vevent;

/* An `every` chain of virtual start events. */
typedef struct chain {
    ps_evtype *type;        /* start$I */
    double from, every;     /* ticks */
} chain;

/* A closed interval waiting to be fed to aggregates. */
typedef struct closed {
    pv_interval *iv;
    uint64_t start_seq;
} closed;

typedef struct engine {
    const ps_pass *p;
    ps_program *prog;
    ps_evalctx *ev;
    pv *slots;
    uint32_t nev;
    evdisp *evd;            /* [evtypes] */
    ivdisp *ivd;            /* [ivtypes] */
    ivst **ivs;             /* [ivtypes], NULL when not recognised */
    pv_acc **topacc;        /* [ntops] */
    VEC(ps_evtype **) names;/* log name id -> NULL-terminated evtype list (empty when none) */
    uint32_t maxattr;
    VEC(vevent) heap;
    uint64_t vorder;
    VEC(chain) chains;
    VEC(closed) closed;
    uint64_t seq;           /* stream sequence number of the last event */
    uint64_t uid;           /* last interval uid */
    uint64_t pos;           /* position of the last real record */
    uint32_t sub;           /* fabricated events since that record */
    pv_event *spare;        /* reusable event buffer (refs 1 = ours alone) */
} engine;

static ps_evtype *const no_types[1] = {NULL};

/* ---- events ---------------------------------------------------------------------------- */

static pv_event *event_alloc(engine *g, const ps_evtype *t)
{
    pv_event *e = g->spare;
    if (e && e->refs == 1) {
        g->spare = NULL;
    } else {
        e = ps_malloc(sizeof *e + g->maxattr * sizeof(double));
    }
    e->refs = 1;
    e->type = t;
    e->nattr = t->nattr;
    e->timed = t->timed;
    return e;
}

/* We are done with event e: keep its buffer for the next event if nobody
 * else holds it. */
static void event_done(engine *g, pv_event *e)
{
    if (e->refs == 1 && !g->spare) {
        g->spare = e;
        return;
    }
    pv_event_release(e);
}

static inline pv ev_val(pv_event *e)
{
    pv v = {.kind = PV_EVENT, .ev = e};
    return v;
}

static inline pv iv_val(pv_interval *i)
{
    pv v = {.kind = PV_INTERVAL, .iv = i};
    return v;
}

/* ---- top-level aggregates ------------------------------------------------------------- */

/* Feed element `elem` (borrowed) to top-level aggregate k. */
static void feed_top(engine *g, uint32_t k, pv elem)
{
    const ps_agg *a = g->p->tops[k];
    pv_acc *acc = g->topacc[k];
    g->slots[a->var->slot] = elem;
    if (g->p->is_sink && g->p->is_sink[k]) {
        int c = a->where ? ps_eval_cond(g->ev, a->where) : 1;
        if (c != 0)
            g->p->sink(g->p->ctx, k, c < 0 ? NULL : &elem);
        return;
    }
    const ps_stmt *st = g->p->report_for ? g->p->report_for[k] : NULL;
    if (a->where) {
        int c = ps_eval_cond(g->ev, a->where);
        if (c < 0) {
            pv_acc_poison(acc);
            if (st && g->p->offender)
                g->p->offender(g->p->ctx, st, &elem, 2);
            return;
        }
        if (c == 0)
            return;
    }
    pv v = a->value ? ps_eval(g->ev, a->value) : pv_undef();
    if (st && g->p->offender && !(v.kind == PV_BOOL && v.b))
        g->p->offender(g->p->ctx, st, &elem, v.kind == PV_BOOL ? 1 : 2);
    pv_acc_add(acc, v);
}

/* ---- metric aggregates ------------------------------------------------------------------ */

/* Feed `elem` to metric aggregate k of open interval o. */
static void feed_metric(engine *g, ivst *is, uint32_t k, open_iv *o, pv elem)
{
    const ps_agg *a = is->aggs[k].a;
    g->slots[is->t->s->slot] = ev_val(o->start);
    g->slots[a->var->slot] = elem;
    if (a->where) {
        int c = ps_eval_cond(g->ev, a->where);
        if (c < 0) {
            pv_acc_poison(o->accs[k]);
            return;
        }
        if (c == 0)
            return;
    }
    pv_acc_add(o->accs[k], a->value ? ps_eval(g->ev, a->value) : pv_undef());
}

/* Feed elem to metric aggregate (is, k) of every open interval it can
 * belong to: those started before `before_seq` (events: all open ones). */
static void feed_metric_sub(engine *g, ivst *is, uint32_t k, pv elem, uint64_t before_seq)
{
    if (!is->nopen)
        return;
    aggst *as = &is->aggs[k];
    const ps_agg *a = as->a;
    if (as->keyed) {
        g->slots[a->var->slot] = elem;
        double key;
        if (ps_eval_num(g->ev, a->elem_key, &key)) {
            ixslot *s = ix_find(&as->ix, key);
            if (s) {
                for (ixnode *n = s->list.head, *next; n && n->o->start_seq < before_seq; n = next) {
                    next = n->next;
                    feed_metric(g, is, k, n->o, elem);
                }
            }
            for (ixnode *n = as->nokey.head, *next; n && n->o->start_seq < before_seq; n = next) {
                next = n->next;
                feed_metric(g, is, k, n->o, elem);
            }
            return;
        }
        /* An undefined key makes the where-clause undefined for every open
         * interval: fall through and let each one see it. */
    }
    for (ixnode *n = is->open.head, *next; n && n->o->start_seq < before_seq; n = next) {
        next = n->next;
        feed_metric(g, is, k, n->o, elem);
    }
}

/* ---- opening and closing -------------------------------------------------------------------- */

static void heap_push(engine *g, vevent v);

static void open_interval(engine *g, ivst *is, pv_event *ev)
{
    ps_ivtype *t = is->t;
    g->slots[t->s->slot] = ev_val(ev);
    if (t->s_where && ps_eval_cond(g->ev, t->s_where) != 1)
        return;
    double endkey = 0;
    if (is->keyed_end && !ps_eval_num(g->ev, t->start_key, &endkey))
        return;     /* the end where-clause can never be true: it would never close */
    uint32_t na = t->naggs;
    open_iv *o = is->pool;
    if (o) {
        is->pool = (open_iv *)o->all.next;
        is->npool--;
    } else {
        o = ps_malloc(sizeof *o + na * (sizeof(pv_acc *) + sizeof(ixnode) + sizeof(double) + 1));
        memset(o, 0, sizeof *o);
        o->accs = (pv_acc **)(o + 1);
        o->aggn = (ixnode *)(o->accs + na);
        o->aggkey = (double *)(o->aggn + na);
        o->aggkeyed = (uint8_t *)(o->aggkey + na);
        o->naggs = na;
        for (uint32_t k = 0; k < na; k++)
            o->accs[k] = pv_acc_new(is->aggs[k].a->op, is->aggs[k].a->map_depth);
    }
    o->start = ev;
    ev->refs++;
    o->start_seq = g->seq;
    o->endkey = endkey;
    list_append(&is->open, &o->all, o);
    is->nopen++;
    if (is->keyed_end)
        ix_add(&is->endix, endkey, &o->endn, o);
    for (uint32_t k = 0; k < na; k++) {
        aggst *as = &is->aggs[k];
        memset(&o->aggn[k], 0, sizeof o->aggn[k]);
        o->aggkeyed[k] = 0;
        if (!as->keyed)
            continue;
        double key;
        if (ps_eval_num(g->ev, as->a->start_key, &key)) {
            o->aggkey[k] = key;
            o->aggkeyed[k] = 1;
            ix_add(&as->ix, key, &o->aggn[k], o);
        } else {
            list_append(&as->nokey, &o->aggn[k], o);
        }
    }
    if (t->end_kind == IVE_AFTER) {
        vevent v = {.ts = (double)ev->ts + is->after, .is_start = 0, .type = t->e_type, .target = o,
                    .target_is = is};
        heap_push(g, v);
    }
}

/* Unlink o from every index and recycle it (its start event ref is taken
 * over by the caller when keep_start). */
static void drop_open(ivst *is, open_iv *o, bool keep_start)
{
    bool keep = is->npool < POOL_KEEP;
    list_remove(&is->open, &o->all);
    is->nopen--;
    if (is->keyed_end)
        ix_remove(&is->endix, o->endkey, &o->endn);
    for (uint32_t k = 0; k < o->naggs; k++) {
        aggst *as = &is->aggs[k];
        if (as->keyed) {
            if (o->aggkeyed[k])
                ix_remove(&as->ix, o->aggkey[k], &o->aggn[k]);
            else
                list_remove(&as->nokey, &o->aggn[k]);
        }
        if (keep)
            pv_acc_reset(o->accs[k]);
        else
            pv_acc_free(o->accs[k]);
    }
    if (!keep_start)
        pv_event_release(o->start);
    o->start = NULL;
    if (keep) {
        o->all.next = (ixnode *)is->pool;
        is->pool = o;
        is->npool++;
    } else {
        free(o);
    }
}

static void free_pool(ivst *is)
{
    while (is->pool) {
        open_iv *o = is->pool;
        is->pool = (open_iv *)o->all.next;
        for (uint32_t k = 0; k < o->naggs; k++)
            pv_acc_free(o->accs[k]);
        free(o);
    }
    is->npool = 0;
}

/* o ends at event ev: compute its metrics and queue it as closed. */
static void close_interval(engine *g, ivst *is, open_iv *o, pv_event *ev)
{
    ps_ivtype *t = is->t;
    pv_interval *iv = pv_interval_new(t, t->nmetric);
    iv->start = o->start;
    iv->end = ev;
    ev->refs++;
    iv->uid = ++g->uid;
    g->slots[t->s->slot] = ev_val(o->start);
    g->slots[t->e->slot] = ev_val(ev);
    pv_acc **saved = g->ev->accs;
    g->ev->accs = o->accs;
    for (uint32_t m = 0; m < t->nmetric; m++)
        iv->metric[m] = t->metrics[m].expr ? ps_eval(g->ev, t->metrics[m].expr) : pv_undef();
    g->ev->accs = saved;
    closed c = {iv, o->start_seq};
    VPUSH(g->closed, c);
    drop_open(is, o, true);
}

/* Close the open intervals of `is` that ev ends (A.3.3: all of them, or for
 * a nested type the most recently started one). */
static void close_matching(engine *g, ivst *is, pv_event *ev)
{
    if (!is->nopen)
        return;
    ps_ivtype *t = is->t;
    g->slots[t->e->slot] = ev_val(ev);
    ixlist *cands = &is->open;
    bool via_key = false;
    if (is->keyed_end) {
        double k;
        if (!ps_eval_num(g->ev, t->end_key, &k))
            return;
        ixslot *s = ix_find(&is->endix, k);
        if (!s)
            return;
        cands = &s->list;
        via_key = true;
    }
    if (t->nested) {
        for (ixnode *n = cands->tail; n; n = n->prev) {
            open_iv *o = n->o;
            g->slots[t->s->slot] = ev_val(o->start);
            if (!t->e_where || ps_eval_cond(g->ev, t->e_where) == 1) {
                close_interval(g, is, o, ev);
                return;
            }
        }
        return;
    }
    for (ixnode *n = cands->head, *next; n; n = next) {
        next = n->next;
        open_iv *o = n->o;
        g->slots[t->s->slot] = ev_val(o->start);
        if (!t->e_where || ps_eval_cond(g->ev, t->e_where) == 1) {
            /* Closing may delete the bucket (and move others): re-find the
             * next node through the list, which close does not touch. */
            if (via_key && !next) {
                close_interval(g, is, o, ev);
                return;
            }
            close_interval(g, is, o, ev);
        }
    }
}

/* ---- the event stream ------------------------------------------------------------------------- */

/* Process one event of the stream. `target`: for end$I virtual events, the
 * interval it ends. */
static void process_event(engine *g, pv_event *ev, ivst *target_is, open_iv *target)
{
    const ps_evtype *t = ev->type;
    evdisp *d = &g->evd[t->id];
    g->seq++;
    if (g->p->want_events && g->p->event)
        g->p->event(g->p->ctx, ev);
    pv elem = ev_val(ev);
    for (uint32_t i = 0; i < d->tops.n; i++)
        feed_top(g, d->tops.v[i], elem);

    g->closed.n = 0;
    if (target)
        close_interval(g, target_is, target, ev);
    for (uint32_t i = 0; i < d->ends.n; i++)
        close_matching(g, d->ends.v[i], ev);
    for (uint32_t c = 0; c < g->closed.n; c++) {
        pv_interval *iv = g->closed.v[c].iv;
        ivdisp *id = &g->ivd[((const ps_ivtype *)iv->type)->id];
        if (g->p->want_intervals && g->p->interval)
            g->p->interval(g->p->ctx, iv);
        for (uint32_t i = 0; i < id->tops.n; i++)
            feed_top(g, id->tops.v[i], iv_val(iv));
    }

    for (uint32_t i = 0; i < d->msubs.n; i++)
        feed_metric_sub(g, d->msubs.v[i].is, d->msubs.v[i].k, elem, UINT64_MAX);
    for (uint32_t c = 0; c < g->closed.n; c++) {
        pv_interval *iv = g->closed.v[c].iv;
        ivdisp *id = &g->ivd[((const ps_ivtype *)iv->type)->id];
        for (uint32_t i = 0; i < id->msubs.n; i++)
            feed_metric_sub(g, id->msubs.v[i].is, id->msubs.v[i].k, iv_val(iv), g->closed.v[c].start_seq);
    }
    for (uint32_t c = 0; c < g->closed.n; c++)
        pv_interval_release(g->closed.v[c].iv);
    g->closed.n = 0;

    for (uint32_t i = 0; i < d->starts.n; i++)
        open_interval(g, d->starts.v[i], ev);
}

/* A fabricated event (logstart@, logend@, gap@, virtual) at `ts`. */
static pv_event *fabricate(engine *g, const ps_evtype *t, int64_t ts)
{
    pv_event *e = event_alloc(g, t);
    e->pos = g->pos;
    e->sub = ++g->sub;
    e->thread = 0;
    e->ts = ts;
    for (uint32_t i = 0; i < t->nattr; i++)
        e->attr[i] = PV_ATTR_UNDEF;
    return e;
}

/* ---- virtual time events --------------------------------------------------------------------- */

static bool vless(const vevent *a, const vevent *b)
{
    if (a->ts != b->ts)
        return a->ts < b->ts;
    if (a->is_start != b->is_start)
        return a->is_start < b->is_start;
    return a->order < b->order;
}

static void heap_push(engine *g, vevent v)
{
    v.order = ++g->vorder;
    VPUSH(g->heap, v);
    uint32_t i = g->heap.n - 1;
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!vless(&g->heap.v[i], &g->heap.v[parent]))
            break;
        vevent tmp = g->heap.v[i];
        g->heap.v[i] = g->heap.v[parent];
        g->heap.v[parent] = tmp;
        i = parent;
    }
}

static vevent heap_pop(engine *g)
{
    vevent top = g->heap.v[0];
    g->heap.v[0] = g->heap.v[--g->heap.n];
    uint32_t i = 0;
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < g->heap.n && vless(&g->heap.v[l], &g->heap.v[m]))
            m = l;
        if (r < g->heap.n && vless(&g->heap.v[r], &g->heap.v[m]))
            m = r;
        if (m == i)
            break;
        vevent tmp = g->heap.v[i];
        g->heap.v[i] = g->heap.v[m];
        g->heap.v[m] = tmp;
        i = m;
    }
    return top;
}

static void schedule_chain(engine *g, uint32_t c, double origin, uint64_t index)
{
    chain *ch = &g->chains.v[c];
    vevent v = {.ts = origin + ch->from + (double)index * ch->every, .is_start = 1, .type = ch->type,
                .index = index};
    heap_push(g, v);
}

/* Emit the virtual events due before a real event at time `ts`. */
static void emit_virtual(engine *g, double ts, double origin)
{
    while (g->heap.n && g->heap.v[0].ts <= ts) {
        vevent v = heap_pop(g);
        pv_event *e = fabricate(g, v.type, (int64_t)llround(v.ts));
        if (v.is_start) {
            for (uint32_t c = 0; c < g->chains.n; c++)
                if (g->chains.v[c].type == v.type)
                    schedule_chain(g, c, origin, v.index + 1);
        }
        process_event(g, e, v.target_is, v.target);
        event_done(g, e);
    }
}

/* ---- setup ------------------------------------------------------------------------------- */

static int time_const(engine *g, const ps_expr *e, double *out, bool allow_zero, const char *what,
                      const ps_ivtype *t, char **errmsg)
{
    if (!e) {
        *out = 0;
        return 0;
    }
    pv v = ps_eval(g->ev, e);
    bool ok = v.kind == PV_NUM && isfinite(v.num) && (v.num > 0 || (allow_zero && v.num == 0));
    if (ok)
        *out = v.num;
    pv_free(v);
    if (!ok) {
        *errmsg = ps_asprintf("%s:%u:%u: error: the '%s' time of interval '%s' must be %s",
                              g->prog->files.v[e->loc.file]->path, e->loc.line, e->loc.col, what, t->name,
                              allow_zero ? "zero or positive" : "positive");
        return -EDOM;
    }
    return 0;
}

static int setup(engine *g, const ps_pass *p, char **errmsg)
{
    ps_program *prog = p->prog;
    memset(g, 0, sizeof *g);
    g->p = p;
    g->prog = prog;
    g->ev = p->ev;
    g->slots = p->ev->slots;
    g->nev = prog->evtypes.n;
    g->evd = ps_calloc(prog->evtypes.n, sizeof *g->evd);
    g->ivd = ps_calloc(prog->ivtypes.n, sizeof *g->ivd);
    g->ivs = ps_calloc(prog->ivtypes.n, sizeof *g->ivs);
    g->topacc = ps_calloc(p->ntops ? p->ntops : 1, sizeof *g->topacc);
    for (uint32_t i = 0; i < prog->evtypes.n; i++)
        if (prog->evtypes.v[i]->nattr > g->maxattr)
            g->maxattr = prog->evtypes.v[i]->nattr;

    for (uint32_t i = 0; i < prog->ivtypes.n; i++) {
        if (!p->need_iv[i])
            continue;
        ps_ivtype *t = prog->ivtypes.v[i];
        ivst *is = ps_calloc(1, sizeof *is);
        is->t = t;
        is->keyed_end = t->end_key && t->start_key;
        is->aggs = ps_calloc(t->naggs ? t->naggs : 1, sizeof *is->aggs);
        for (uint32_t k = 0; k < t->naggs; k++) {
            is->aggs[k].a = t->aggs[k];
            is->aggs[k].keyed = t->aggs[k]->elem_key && t->aggs[k]->start_key;
        }
        g->ivs[i] = is;
        if (t->end_kind == IVE_AFTER) {
            int rc = time_const(g, t->after, &is->after, false, "after", t, errmsg);
            if (rc < 0)
                return rc;
        }
        if (t->start_kind == IVS_EVERY) {
            bool have = false;
            for (uint32_t c = 0; c < g->chains.n; c++)
                have |= g->chains.v[c].type == t->s_type;
            if (!have) {
                chain ch = {.type = t->s_type};
                int rc = time_const(g, t->from, &ch.from, true, "from", t, errmsg);
                if (rc == 0)
                    rc = time_const(g, t->every, &ch.every, false, "every", t, errmsg);
                if (rc < 0)
                    return rc;
                VPUSH(g->chains, ch);
            }
        }
        VPUSH(g->evd[t->s_type->id].starts, is);
        if (t->end_kind == IVE_EVENT)
            VPUSH(g->evd[t->e_type->id].ends, is);
    }
    for (uint32_t i = 0; i < prog->ivtypes.n; i++) {
        ivst *is = g->ivs[i];
        if (!is)
            continue;
        for (uint32_t k = 0; k < is->t->naggs; k++) {
            ps_agg *a = is->t->aggs[k];
            msub s = {is, k};
            if (a->ev)
                VPUSH(g->evd[a->ev->id].msubs, s);
            else if (a->iv && g->ivs[a->iv->id])
                VPUSH(g->ivd[a->iv->id].msubs, s);
        }
    }
    for (uint32_t k = 0; k < p->ntops; k++) {
        ps_agg *a = p->tops[k];
        g->topacc[k] = pv_acc_new(a->op, a->map_depth);
        if (a->ev)
            VPUSH(g->evd[a->ev->id].tops, k);
        else if (a->iv)
            VPUSH(g->ivd[a->iv->id].tops, k);
    }
    for (uint32_t i = 0; i < prog->evtypes.n; i++) {
        evdisp *d = &g->evd[i];
        d->relevant = p->want_events || d->ends.n || d->starts.n || d->msubs.n || d->tops.n;
    }
    return 0;
}

static void teardown(engine *g)
{
    for (uint32_t i = 0; i < g->prog->ivtypes.n; i++) {
        ivst *is = g->ivs[i];
        if (!is)
            continue;
        while (is->open.head)
            drop_open(is, is->open.head->o, false);
        free_pool(is);
        ix_free(&is->endix);
        for (uint32_t k = 0; k < is->t->naggs; k++)
            ix_free(&is->aggs[k].ix);
        free(is->aggs);
        free(is);
    }
    for (uint32_t i = 0; i < g->prog->evtypes.n; i++) {
        free(g->evd[i].ends.v);
        free(g->evd[i].starts.v);
        free(g->evd[i].msubs.v);
        free(g->evd[i].tops.v);
    }
    for (uint32_t i = 0; i < g->prog->ivtypes.n; i++) {
        free(g->ivd[i].msubs.v);
        free(g->ivd[i].tops.v);
    }
    for (uint32_t k = 0; k < g->p->ntops; k++)
        pv_acc_free(g->topacc[k]);
    for (uint32_t i = 0; i < g->names.n; i++)
        if (g->names.v[i] != no_types)
            free(g->names.v[i]);
    free(g->names.v);
    free(g->heap.v);
    free(g->chains.v);
    free(g->closed.v);
    free(g->evd);
    free(g->ivd);
    free(g->ivs);
    free(g->topacc);
    if (g->spare)
        pv_event_release(g->spare);
}

/* The event types a log name maps to (relevant ones only). */
static ps_evtype *const *types_for(engine *g, log_reader *r, uint32_t name_id)
{
    while (g->names.n <= name_id)
        VPUSH(g->names, NULL);
    ps_evtype **list = g->names.v[name_id];
    if (list)
        return list;
    const char *name = log_reader_name(r, name_id);
    uint32_t n = 0;
    for (uint32_t i = 0; i < g->prog->evtypes.n; i++) {
        ps_evtype *t = g->prog->evtypes.v[i];
        if (t->logname && strcmp(t->logname, name) == 0 && g->evd[i].relevant)
            n++;
    }
    if (!n) {
        g->names.v[name_id] = (ps_evtype **)no_types;
        return no_types;
    }
    list = ps_calloc(n + 1, sizeof *list);
    n = 0;
    for (uint32_t i = 0; i < g->prog->evtypes.n; i++) {
        ps_evtype *t = g->prog->evtypes.v[i];
        if (t->logname && strcmp(t->logname, name) == 0 && g->evd[i].relevant)
            list[n++] = t;
    }
    g->names.v[name_id] = list;
    return list;
}

static void emit_fabricated(engine *g, const ps_evtype *t, int64_t ts, double gap)
{
    if (!g->evd[t->id].relevant)
        return;
    pv_event *e = fabricate(g, t, ts);
    if (t->origin == EVO_GAP && t->nattr)
        e->attr[0] = gap;
    process_event(g, e, NULL, NULL);
    event_done(g, e);
}

int ps_engine_run(const ps_pass *p, log_reader *r, char **errmsg)
{
    engine g;
    int rc = setup(&g, p, errmsg);
    if (rc < 0) {
        teardown(&g);
        return rc;
    }
    ps_evtype *logstart = ps_logstart_type(p->prog), *logend = ps_logend_type(p->prog);
    ps_evtype *gap = ps_gap_type(p->prog);
    bool any = false;
    int64_t last_ts = 0;
    double origin = 0, pending_gap = 0;
    log_record rec;
    while ((rc = log_reader_next(r, &rec, errmsg)) > 0) {
        if (rec.kind == LOG_REC_GAP) {
            pending_gap += (double)rec.gap;
            continue;
        }
        if (!any) {
            any = true;
            origin = (double)rec.ts;
            emit_fabricated(&g, logstart, rec.ts, 0);
            for (uint32_t c = 0; c < g.chains.n; c++)
                schedule_chain(&g, c, origin, 0);
        }
        if (g.heap.n)
            emit_virtual(&g, (double)rec.ts, origin);
        if (pending_gap > 0) {
            emit_fabricated(&g, gap, rec.ts, pending_gap);
            pending_gap = 0;
        }
        ps_evtype *const *types = types_for(&g, r, rec.name_id);
        for (; *types; types++) {
            const ps_evtype *t = *types;
            pv_event *e = event_alloc(&g, t);
            e->pos = rec.pos;
            e->sub = 0;
            e->thread = rec.thread;
            e->ts = rec.ts;
            uint32_t n = rec.nvalues < t->nattr ? rec.nvalues : t->nattr;
            for (uint32_t i = 0; i < n; i++)
                e->attr[i] = rec.values[i];
            for (uint32_t i = n; i < t->nattr; i++)
                e->attr[i] = PV_ATTR_UNDEF;
            if (t->origin == EVO_RET && t->nattr == 2 && n < 2)
                e->attr[1] = 1;     /* `exact`: our logs only carry explicit returns */
            process_event(&g, e, NULL, NULL);
            event_done(&g, e);
        }
        g.pos = rec.pos;
        g.sub = 0;
        last_ts = rec.ts;
    }
    if (rc == 0 && any) {
        if (pending_gap > 0)
            emit_fabricated(&g, gap, last_ts, pending_gap);
        emit_fabricated(&g, logend, last_ts, 0);
    }
    if (rc == 0) {
        for (uint32_t k = 0; k < p->ntops; k++) {
            pv_free(p->ev->topvals[p->tops[k]->id]);
            bool sink = p->is_sink && p->is_sink[k];
            p->ev->topvals[p->tops[k]->id] = sink ? pv_undef() : pv_acc_result(g.topacc[k]);
        }
    }
    teardown(&g);
    return rc < 0 ? rc : 0;
}
