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
 *
 * Every expression evaluated per event or interval (where-clauses, keys,
 * metrics, aggregate values) is compiled once per pass (cexpr.h). Open
 * intervals are indexed by the start side of the equality in their end
 * where-clause and in their metric aggregates' where-clauses; indexes whose
 * start keys are the same expression are one index. An interval found
 * through an index satisfies that equality, so the where-clause is then
 * evaluated with it assumed true.
 */
#include "engine.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cexpr.h"
#include "check.h"
#include "util.h"

/* ---- intrusive lists and a keyed index ------------------------------------------------ */

typedef struct open_iv open_iv;

typedef struct ixnode {
    struct ixnode *prev, *next;
    open_iv *o;
    uint32_t slot;          /* in an ixmap: the index of its key's slot */
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

/* Hash map from a number to a list of open intervals, with linear probing.
 * A key whose list empties keeps its slot (the same keys, thread ids say,
 * tend to come back); such empty slots are dropped whenever the table would
 * otherwise grow, so its size stays proportional to the most keys ever open
 * at once, never to the length of the log. Slots only move in ix_add. */
typedef struct ixslot {
    double key;
    ixlist list;
    bool used;
} ixslot;

typedef struct ixmap {
    ixslot *s;
    uint32_t cap, n;        /* slots (a power of two), used slots */
    uint32_t shift;         /* 64 - log2(cap) */
    uint32_t nempty;        /* used slots with an empty list */
} ixmap;

/* The home slot of key k in a table of 2^(64 - shift) slots: Fibonacci
 * hashing of the key's bits (integral doubles differ in their high bits,
 * which the multiplication carries into the top ones kept). */
static inline uint32_t hash_slot(double k, uint32_t shift)
{
    k += 0.0;   /* -0 and 0 are the same key */
    uint64_t b;
    memcpy(&b, &k, sizeof b);
    return (uint32_t)((b * 0x9e3779b97f4a7c15ULL) >> shift);
}

static inline ixslot *ix_find(const ixmap *m, double k)
{
    if (!m->cap)
        return NULL;
    uint32_t i = hash_slot(k, m->shift);
    for (;;) {
        ixslot *s = &m->s[i];
        if (!s->used)
            return NULL;
        if (s->key == k)
            return s;
        i = (i + 1) & (m->cap - 1);
    }
}

/* Rebuild with `cap` slots, dropping the keys whose list is empty. */
static void ix_rebuild(ixmap *m, uint32_t cap)
{
    ixslot *old = m->s;
    uint32_t oldcap = m->cap;
    m->cap = cap;
    m->shift = 64 - (uint32_t)__builtin_ctz(cap);
    m->s = ps_calloc(m->cap, sizeof *m->s);
    m->n = m->nempty = 0;
    for (uint32_t i = 0; i < oldcap; i++) {
        if (!old[i].used || !old[i].list.head)
            continue;
        uint32_t j = hash_slot(old[i].key, m->shift);
        while (m->s[j].used)
            j = (j + 1) & (m->cap - 1);
        m->s[j] = old[i];   /* list nodes point at each other, not at the slot */
        for (ixnode *n = m->s[j].list.head; n; n = n->next)
            n->slot = j;
        m->n++;
    }
    free(old);
}

static void ix_add(ixmap *m, double k, ixnode *n, open_iv *o)
{
    ixslot *s = ix_find(m, k);
    if (PS_UNLIKELY(!s)) {
        if ((m->n + 1) * 4 > m->cap * 3) {
            /* Full: drop the empty keys; grow unless that frees enough. */
            uint32_t live = m->n - m->nempty;
            ix_rebuild(m, !m->cap ? 16 : (live + 1) * 8 > m->cap * 3 ? m->cap * 2 : m->cap);
        }
        uint32_t i = hash_slot(k, m->shift);
        while (m->s[i].used)
            i = (i + 1) & (m->cap - 1);
        s = &m->s[i];
        s->used = true;
        s->key = k;
        s->list.head = s->list.tail = NULL;
        m->n++;
    } else if (!s->list.head) {
        m->nempty--;
    }
    list_append(&s->list, n, o);
    n->slot = (uint32_t)(s - m->s);
}

static inline void ix_remove(ixmap *m, ixnode *n)
{
    ixslot *s = &m->s[n->slot];
    list_remove(&s->list, n);
    if (!s->list.head)
        m->nempty++;
}

static void ix_free(ixmap *m)
{
    free(m->s);
    m->s = NULL;
    m->cap = m->n = m->nempty = m->shift = 0;
}

/* ---- records per thread (perturbation compensation) ----------------------------------------- */

/* How many records a thread has written so far, and what they cost it,
 * kept only for threads that started a compensated interval still open
 * (refs): an entry whose refs fell to 0 is dropped when the table would
 * otherwise grow, so the table is bounded by the threads with such
 * intervals open at once. The cost of one record is the header's, or the
 * thread's latest overhead record's (thrcost). */
typedef struct thrent {
    int64_t thread;
    uint64_t count;         /* records of the thread since the entry was made */
    double mean, spread;    /* what one record costs the thread now, ticks */
    double sum_mean;        /* the cost of those records: sum of `mean` over them ... */
    double sum_spread;      /* ... and of `spread` */
    uint32_t epoch;         /* changes of the cost since the entry was made */
    uint32_t refs;          /* open compensated intervals started by the thread */
    bool used;
} thrent;

typedef struct thrmap {
    thrent *s;
    uint32_t cap, n;        /* slots (a power of two), used slots */
} thrmap;

static inline uint32_t thr_slot(int64_t t, uint32_t cap)
{
    return (uint32_t)(((uint64_t)t * 0x9e3779b97f4a7c15ULL) >> 32) & (cap - 1);
}

/* The cost per record of the threads the log's overhead records named
 * (thread -> mean, spread in ticks); the others cost the header's. One
 * entry per such thread, for the whole log. */
typedef struct thrcost {
    int64_t thread;
    double mean, spread;
    bool used;
} thrcost;

typedef struct costmap {
    thrcost *s;
    uint32_t cap, n;        /* slots (a power of two), used slots */
} costmap;

/* The entry of thread t, or NULL. */
static const thrcost *cost_find(const costmap *m, int64_t t)
{
    if (!m->cap)
        return NULL;
    for (uint32_t i = thr_slot(t, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (!m->s[i].used)
            return NULL;
        if (m->s[i].thread == t)
            return &m->s[i];
    }
}

/* From now on a record of thread t costs it [mean, spread]. */
static void cost_set(costmap *m, int64_t t, double mean, double spread)
{
    if ((m->n + 1) * 4 > m->cap * 3) {
        thrcost *old = m->s;
        uint32_t oldcap = m->cap;
        m->cap = m->cap ? m->cap * 2 : 16;
        m->s = ps_calloc(m->cap, sizeof *m->s);
        for (uint32_t i = 0; i < oldcap; i++) {
            if (!old[i].used)
                continue;
            uint32_t j = thr_slot(old[i].thread, m->cap);
            while (m->s[j].used)
                j = (j + 1) & (m->cap - 1);
            m->s[j] = old[i];
        }
        free(old);
    }
    uint32_t i = thr_slot(t, m->cap);
    while (m->s[i].used && m->s[i].thread != t)
        i = (i + 1) & (m->cap - 1);
    m->n += !m->s[i].used;
    m->s[i] = (thrcost){.thread = t, .mean = mean, .spread = spread, .used = true};
}

static inline thrent *thr_find(const thrmap *m, int64_t t)
{
    if (!m->cap)
        return NULL;
    for (uint32_t i = thr_slot(t, m->cap);; i = (i + 1) & (m->cap - 1)) {
        thrent *e = &m->s[i];
        if (!e->used)
            return NULL;
        if (e->thread == t)
            return e;
    }
}

/* The entry of thread t, made (with count 0, costing what `costs` or else
 * the header says) when there is none. */
static thrent *thr_get(thrmap *m, int64_t t, const costmap *costs, double mean, double spread)
{
    thrent *e = thr_find(m, t);
    if (e)
        return e;
    if ((m->n + 1) * 4 > m->cap * 3) {
        /* Full: drop the threads with nothing open; grow unless that frees enough. */
        uint32_t live = 0;
        for (uint32_t i = 0; i < m->cap; i++)
            live += m->s[i].used && m->s[i].refs > 0;
        thrent *old = m->s;
        uint32_t oldcap = m->cap;
        m->cap = !m->cap ? 16 : (live + 1) * 8 > m->cap * 3 ? m->cap * 2 : m->cap;
        m->s = ps_calloc(m->cap, sizeof *m->s);
        m->n = 0;
        for (uint32_t i = 0; i < oldcap; i++) {
            if (!old[i].used || old[i].refs == 0)
                continue;
            uint32_t j = thr_slot(old[i].thread, m->cap);
            while (m->s[j].used)
                j = (j + 1) & (m->cap - 1);
            m->s[j] = old[i];
            m->n++;
        }
        free(old);
    }
    uint32_t i = thr_slot(t, m->cap);
    while (m->s[i].used)
        i = (i + 1) & (m->cap - 1);
    e = &m->s[i];
    const thrcost *c = cost_find(costs, t);
    *e = (thrent){.thread = t, .mean = c ? c->mean : mean, .spread = c ? c->spread : spread, .used = true};
    m->n++;
    return e;
}

/* ---- engine state ------------------------------------------------------------------------ */

/* A start-key expression (depending only on s) and its index of open
 * intervals, shared by the end matching and the metric aggregates whose
 * keys are that same expression. */
typedef struct keycls {
    const ps_expr *expr;
    const cx *key;
    ixmap ix;               /* key value -> open intervals, in start order */
    ixlist nokey;           /* open intervals whose key is UNDEFINED */
} keycls;

/* An open interval's entry in one key class. */
typedef struct keyent {
    ixnode n;               /* in the class's index, or its nokey list */
    double key;             /* the start key's value, when keyed */
    bool keyed;             /* in the index */
} keyent;

/* A metric aggregate of an interval type. */
typedef struct aggst {
    ps_agg *a;
    uint32_t var_slot;      /* the aggregate's variable */
    int32_t cls;            /* key class, -1 when not keyed */
    const cx *elem_key;     /* a->elem_key */
    const cx *where;        /* a->where; NULL: true */
    const cx *where_keyed;  /* the same with the key equality true; NULL: true */
    cx_val value;           /* a->value (CX_NONE for count) */
} aggst;

/* Per interval type being recognised. */
typedef struct ivst {
    ps_ivtype *t;
    uint32_t s_slot, e_slot;
    ixlist open;            /* all open intervals, in start order (when keep_all) */
    bool keep_all;          /* keep that list: matching ends or some metric aggregate has no key */
    uint64_t nopen;
    int32_t endcls;         /* key class of the end matching, -1 when not keyed */
    const cx *end_key;      /* t->end_key */
    const cx *s_where;      /* NULL: true */
    const cx *e_where;      /* NULL: true */
    const cx *e_where_keyed;/* with the key equality true; NULL: true */
    cx_val *metrics;        /* [t->nmetric] */
    bool metrics_plain;     /* no metric can hold a counted reference (mapping, event, interval) */
    keycls *cls;            /* [ncls] */
    uint32_t ncls;
    aggst *aggs;            /* [t->naggs] */
    double after;           /* IVE_AFTER: duration in ticks */
    double within;          /* > 0: the deadline, in ticks, of an interval of this type */
    open_iv *due;           /* within: the first open interval (in start order) not yet overdue */
    open_iv *pool;          /* closed records kept for reuse (accumulators reset) */
    uint32_t npool;
    pv_interval *ivfree;    /* released intervals kept for reuse, linked through `start` */
    uint32_t nivfree;
    uint32_t *comp;         /* the duration metrics compensated (ps_pass.compensate), [ncomp] */
    uint32_t ncomp;         /* 0: this type is not compensated */
} ivst;

enum { POOL_KEEP = 256 };   /* reusable records kept per interval type */

struct open_iv {
    ixnode all;             /* in ivst.open (keep_all); in the pool, its `next` links it */
    pv_event *start;        /* owned */
    uint64_t start_seq;
    uint64_t lost_at_open;  /* engine.lost when it opened */
    uint64_t emits0;        /* compensated types: records of the start's thread before the start
                               (its thrent count); UINT64_MAX: not compensated (a fabricated start) */
    double cost0_mean;      /* ... their cost then (thrent sum_mean, sum_spread) ... */
    double cost0_spread;
    uint32_t epoch0;        /* ... and the thrent's epoch */
    uint32_t naggs, ncls;
    pv_acc **accs;          /* [naggs] */
    keyent *keys;           /* [ncls] */
};

/* A metric aggregate subscribed to an event or interval type. */
typedef struct msub {
    ivst *is;
    uint32_t k;             /* index in is->aggs */
} msub;

/* A top-level aggregate of this pass. */
typedef struct topst {
    uint32_t k;             /* index in the pass's tops */
    pv *slot;               /* the aggregate's variable */
    pv_acc *acc;
    const cx *where;        /* NULL: true */
    cx_val value;           /* a->value (CX_NONE for count) */
    const ps_stmt *report;  /* report offenders of this assertion, or NULL */
    bool sink;              /* hand elements to the pass's sink instead */
    uint8_t mode;           /* TOP_*: a common case with its own path */
    ps_fed *fed;            /* note the elements that feed it (--explain), or NULL */
} topst;

/* Common top-level aggregates, fed without the general dispatch. */
enum {
    TOP_GENERIC,            /* anything (sinks included) */
    TOP_COUNT,              /* {count x : T [where P]} */
    TOP_ALL,                /* {& x : T [where P] : boolean} */
    TOP_MEAN_TRI,           /* {mean x : T [where P] : triple} */
};

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
    VEC(topst *) tops;      /* top-level aggregates over it */
    bool relevant;          /* anything at all, or -e output */
    bool fix_exact;         /* ret@p with its `exact` attribute: 1 when the log omits it */
} evdisp;

/* What a closed interval of a type triggers. */
typedef struct ivdisp {
    VEC(msub) msubs;
    VEC(topst *) tops;
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

/* A closed interval waiting to be fed to metric aggregates. */
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
    topst *tops;            /* [ntops] */
    cx_compiler cc;         /* compiled expressions of this pass */
    VEC(ps_evtype **) names;/* log name id -> NULL-terminated evtype list (empty when none) */
    uint32_t maxattr;
    VEC(vevent) heap;
    uint64_t vorder;
    VEC(ivst *) deadlines;  /* the interval types with a deadline (within) */
    const pv_event *vstart; /* the virtual start event being processed, if any */
    double vstart_ts;       /* its exact (unrounded) time in ticks */
    VEC(chain) chains;
    VEC(closed) closed;
    uint64_t seq;           /* stream sequence number of the last event */
    uint64_t lost;          /* records the log's gap markers stood for, so far */
    uint64_t lost_recent;   /* of those, the ones since the last record: their times lie
                               between its and the next record's (docs/pspec.md "Verdicts
                               under loss"), so an interval started by a virtual event up to
                               the next record may have held them */
    uint64_t uid;           /* last interval uid */
    uint64_t pos;           /* position of the last real record */
    uint32_t sub;           /* fabricated events since that record */
    bool want_events;       /* call p->event */
    bool want_intervals;    /* call p->interval */
    pv_event *spare;        /* the last event recycled (capacity maxattr) */
    pv_event *evfree;       /* more recycled events, linked through `type` */
    uint32_t nevfree;
    bool comp;              /* some interval type is compensated: count records per thread */
    thrmap threads;         /* records per thread, for compensated intervals open */
    costmap costs;          /* cost per record of the threads overhead records named */
    /* where the pass is, between calls of ps_engine_step */
    log_reader *r;          /* the log */
    bool any;               /* a record was read */
    int64_t last_ts;        /* the last record's timestamp */
    double origin;          /* the log's zero for time-based intervals */
    double pending_gap;     /* records lost since the last record, not yet an event */
} engine;

static ps_evtype *const no_types[1] = {NULL};

/* ---- events ---------------------------------------------------------------------------- */

static inline pv_event *event_alloc(engine *g, const ps_evtype *t)
{
    pv_event *e = g->spare;
    if (PS_LIKELY(e != NULL)) {
        g->spare = NULL;
    } else if ((e = g->evfree) != NULL) {
        g->evfree = (pv_event *)(uintptr_t)e->type;
        g->nevfree--;
    } else {
        e = pv_event_alloc(g->maxattr);
    }
    e->refs = 1;
    e->type = t;
    e->nattr = t->nattr;
    e->timed = t->timed;
    return e;
}

/* Drop a reference to an event of this pass; the last one recycles it. */
static inline void event_unref(engine *g, pv_event *e)
{
    if (--e->refs > 0)
        return;
    if (!g->spare) {
        g->spare = e;
        return;
    }
    if (g->nevfree >= POOL_KEEP) {
        e->refs = 1;
        pv_event_release(e);
        return;
    }
    e->type = g->evfree;
    g->evfree = e;
    g->nevfree++;
}

/* We are done with the event we made: recycle it unless it is still held. */
static inline void event_done(engine *g, pv_event *e)
{
    event_unref(g, e);
}

/* Bind a binder's slot to event e (borrowed): only the fields a reader of
 * an event value looks at are written. */
static inline void bind_ev(pv *slot, pv_event *e)
{
    slot->kind = PV_EVENT;
    slot->ev = e;
}

/* ---- feeding values to accumulators --------------------------------------------------- */

/* Add the value of `v` to acc, unboxed when its type allows. If `report`,
 * returns the offender result for it (0 true, 1 false, 2 not a boolean). */
static inline __attribute__((always_inline)) int acc_add_value(ps_evalctx *ev, pv_acc *acc, const cx_val *v)
{
    switch (v->kind) {
    case CX_NONE:
        pv_acc_add_undef(acc);
        return 2;
    case CX_BOOL: {
        int b = cx_eval_cond(v->c, ev);
        if (b < 0) {
            pv_acc_add(acc, pv_undef());
            return 2;
        }
        pv_acc_add_bool(acc, b);
        return !b;
    }
    case CX_NUM: {
        double x;
        if (cx_eval_num(v->c, ev, &x))
            pv_acc_add_num(acc, x);
        else
            pv_acc_add(acc, pv_undef());
        return 2;
    }
    case CX_TRI: {
        pv_triple t;
        if (cx_eval_tri(v->c, ev, &t))
            pv_acc_add_triple(acc, t);
        else
            pv_acc_add(acc, pv_undef());
        return 2;
    }
    default: {
        pv x = cx_eval(v, ev);
        int r = x.kind == PV_BOOL ? !x.b : 2;
        pv_acc_add(acc, x);
        return r;
    }
    }
}

/* ---- top-level aggregates ------------------------------------------------------------- */

/* The element being fed: an event or an interval (borrowed). */
typedef struct elemref {
    uint8_t kind;           /* PV_EVENT or PV_INTERVAL */
    void *ptr;
} elemref;

static inline void bind_elem(pv *slot, elemref x)
{
    slot->kind = x.kind;
    if (x.kind == PV_EVENT)
        slot->ev = x.ptr;
    else
        slot->iv = x.ptr;
}

static inline pv elem_val(elemref x)
{
    pv v = {.kind = x.kind};
    if (x.kind == PV_EVENT)
        v.ev = x.ptr;
    else
        v.iv = x.ptr;
    return v;
}

static __attribute__((noinline, cold)) void top_report(engine *g, const topst *ts, elemref x, int result)
{
    pv v = elem_val(x);
    g->p->offender(g->p->ctx, ts->report, &v, result);
}

/* Note element x as one that fed an aggregate. */
static __attribute__((noinline, cold)) void fed_note(ps_fed *f, elemref x)
{
    if (f->n < PS_FED_MAX) {
        char *t = f->first[f->n];
        size_t size = sizeof f->first[0];
        if (x.kind == PV_EVENT) {
            const pv_event *e = x.ptr;
            snprintf(t, size, "%.20s %" PRIu64 ".%u", pv_type_name(e->type), e->pos, e->sub);
        } else {
            const pv_interval *iv = x.ptr;
            snprintf(t, size, "%.20s #%" PRIu64 " %" PRIu64 ".%u", pv_type_name(iv->type), iv->uid,
                     iv->start->pos, iv->start->sub);
        }
    }
    f->n++;
}

static __attribute__((noinline)) void top_sink(engine *g, const topst *ts, elemref x, bool undefined)
{
    pv v = elem_val(x);
    g->p->sink(g->p->ctx, ts->k, undefined ? NULL : &v);
}

/* Feed element x to top-level aggregate ts. */
static inline __attribute__((always_inline)) void feed_top(engine *g, const topst *ts, elemref x)
{
    bind_elem(ts->slot, x);
    if (ts->where) {
        int c = cx_eval_cond(ts->where, g->ev);
        if (ts->mode == TOP_COUNT && PS_LIKELY(c >= 0)) {
            ts->acc->n += (uint64_t)c;  /* counted when true, without a branch */
            return;
        }
        if (c <= 0) {
            if (c == 0)
                return;
            if (PS_UNLIKELY(ts->sink)) {
                top_sink(g, ts, x, true);
                return;
            }
            pv_acc_poison(ts->acc);
            if (ts->report)
                top_report(g, ts, x, 2);
            return;
        }
    }
    if (ts->mode == TOP_COUNT) {
        ts->acc->n++;       /* pv_acc_add_undef on a count */
        return;
    }
    if (ts->mode == TOP_ALL) {
        pv_acc *a = ts->acc;
        int b = cx_eval_cond(ts->value.c, g->ev);
        if (PS_LIKELY(b >= 0 && a->val.kind == PV_BOOL && a->n && !a->poisoned)) {
            a->n++;         /* pv_acc_add_bool on a & */
            a->val.b = a->val.b && b;
        } else if (b >= 0) {
            pv_acc_add_bool(a, b);
        } else {
            pv_acc_add_undef(a);
        }
        if (PS_UNLIKELY(ts->report && b != 1))
            top_report(g, ts, x, b == 0 ? 1 : 2);
        return;
    }
    if (ts->mode == TOP_MEAN_TRI) {
        pv_acc *a = ts->acc;
        pv_triple t;
        if (!cx_eval_tri(ts->value.c, g->ev, &t)) {
            pv_acc_add_undef(a);
        } else if (PS_LIKELY(t.p >= 0 && t.m >= 0 && (t.v - t.v) + (t.p - t.p) + (t.m - t.m) == 0 &&
                             !a->poisoned)) {
            a->n++;         /* pv_acc_add_triple on a mean: the favoured value's sum */
            a->sum += t.v;
        } else {
            pv_acc_add_triple(a, t);
        }
        return;
    }
    if (PS_UNLIKELY(ts->sink)) {
        top_sink(g, ts, x, false);
        return;
    }
    if (PS_UNLIKELY(ts->fed != NULL))
        fed_note(ts->fed, x);
    int r = acc_add_value(g->ev, ts->acc, &ts->value);
    if (PS_UNLIKELY(ts->report && r))
        top_report(g, ts, x, r);
}

/* ---- metric aggregates ------------------------------------------------------------------ */

/* Feed the element bound to as's variable to metric aggregate k of open
 * interval o, with where-clause `where`. */
static inline __attribute__((always_inline)) void feed_metric(engine *g, ivst *is, const aggst *as, uint32_t k,
                                                               open_iv *o, const cx *where)
{
    if (PS_LIKELY(!where && as->value.kind == CX_NONE)) {
        pv_acc_add_undef(o->accs[k]);     /* count: nothing to evaluate */
        return;
    }
    bind_ev(&g->slots[is->s_slot], o->start);
    if (where) {
        int c = cx_eval_cond(where, g->ev);
        if (c <= 0) {
            if (c < 0)
                pv_acc_poison(o->accs[k]);
            return;
        }
    }
    acc_add_value(g->ev, o->accs[k], &as->value);
}

/* Feed elem to metric aggregate (is, k) of every open interval it can
 * belong to: those started before `before_seq` (events: all open ones). */
static inline __attribute__((always_inline)) void feed_metric_sub(engine *g, ivst *is, uint32_t k, elemref x,
                                                                   uint64_t before_seq)
{
    if (!is->nopen)
        return;
    const aggst *as = &is->aggs[k];
    bind_elem(&g->slots[as->var_slot], x);
    if (as->cls >= 0) {
        double key;
        if (cx_eval_num(as->elem_key, g->ev, &key)) {
            keycls *kc = &is->cls[as->cls];
            ixslot *s = ix_find(&kc->ix, key);
            if (s) {
                for (ixnode *n = s->list.head; n && n->o->start_seq < before_seq; n = n->next)
                    feed_metric(g, is, as, k, n->o, as->where_keyed);
            }
            for (ixnode *n = kc->nokey.head; n && n->o->start_seq < before_seq; n = n->next)
                feed_metric(g, is, as, k, n->o, as->where);
            return;
        }
        /* An undefined key makes the where-clause undefined for every open
         * interval: fall through and let each one see it. */
    }
    if (PS_LIKELY(is->keep_all)) {
        for (ixnode *n = is->open.head; n && n->o->start_seq < before_seq; n = n->next)
            feed_metric(g, is, as, k, n->o, as->where);
        return;
    }
    /* No list of them all: every open interval is in the end index (its
     * end key is defined), one bucket at a time, each in start order. The
     * order among intervals does not matter: each has its own accumulator. */
    ixmap *m = &is->cls[is->endcls].ix;
    for (uint32_t i = 0; i < m->cap; i++) {
        if (!m->s[i].used)
            continue;
        for (ixnode *n = m->s[i].list.head; n && n->o->start_seq < before_seq; n = n->next)
            feed_metric(g, is, as, k, n->o, as->where);
    }
}

/* ---- opening and closing -------------------------------------------------------------------- */

static void heap_push(engine *g, vevent v);

/* A key usable in an index: defined, and equal to itself. */
static inline bool index_key(const cx *c, ps_evalctx *ev, double *out)
{
    return cx_eval_num(c, ev, out) && *out == *out;
}

static void open_interval(engine *g, ivst *is, pv_event *ev)
{
    ps_ivtype *t = is->t;
    bind_ev(&g->slots[is->s_slot], ev);
    if (is->s_where && cx_eval_cond(is->s_where, g->ev) != 1)
        return;
    double endkey = 0;
    /* An interval whose end key is undefined could never be closed. */
    if (is->endcls >= 0 && !index_key(is->cls[is->endcls].key, g->ev, &endkey))
        return;
    uint32_t na = t->naggs, nc = is->ncls;
    open_iv *o = is->pool;
    if (o) {
        is->pool = (open_iv *)o->all.next;
        is->npool--;
    } else {
        o = ps_malloc(sizeof *o + na * sizeof(pv_acc *) + nc * sizeof(keyent));
        memset(o, 0, sizeof *o);
        o->keys = (keyent *)(o + 1);
        o->accs = (pv_acc **)(o->keys + nc);
        o->naggs = na;
        o->ncls = nc;
        for (uint32_t k = 0; k < na; k++)
            o->accs[k] = ps_agg_acc_new(is->aggs[k].a);
    }
    o->start = ev;
    ev->refs++;
    o->start_seq = g->seq;
    /* A time-based interval starting between a gap's neighbours is
     * counted as open where the lost records were: they could have come
     * after its start time. */
    o->lost_at_open = g->lost - (ev == g->vstart ? g->lost_recent : 0);
    if (PS_UNLIKELY(is->ncomp)) {
        o->emits0 = UINT64_MAX;     /* logstart@, gap@: no writer wrote them */
        if (ev->sub == 0) {
            thrent *te = thr_get(&g->threads, ev->thread, &g->costs, g->p->comp_mean, g->p->comp_spread);
            te->refs++;
            o->emits0 = te->count;
            o->cost0_mean = te->sum_mean;
            o->cost0_spread = te->sum_spread;
            o->epoch0 = te->epoch;
        }
    }
    if (is->keep_all)
        list_append(&is->open, &o->all, o);
    if (is->within > 0 && !is->due)
        is->due = o;          /* the open list is in start order: every earlier one is overdue */
    is->nopen++;
    for (uint32_t c = 0; c < nc; c++) {
        keycls *kc = &is->cls[c];
        keyent *ke = &o->keys[c];
        if ((int32_t)c == is->endcls) {
            ke->key = endkey;
            ke->keyed = true;
        } else {
            ke->keyed = index_key(kc->key, g->ev, &ke->key);
        }
        if (ke->keyed)
            ix_add(&kc->ix, ke->key, &ke->n, o);
        else
            list_append(&kc->nokey, &ke->n, o);
    }
    if (t->end_kind == IVE_AFTER) {
        /* A.3.4: the end is at timestamp(s) + texpr, from the exact time
         * of a virtual start (its event's timestamp is rounded to a tick),
         * so consecutive chunks tile the log without sharing a record. */
        double t0 = ev == g->vstart ? g->vstart_ts : (double)ev->ts;
        vevent v = {.ts = t0 + is->after, .is_start = 0, .type = t->e_type, .target = o,
                    .target_is = is};
        heap_push(g, v);
    }
}

/* Unlink o from every index and recycle it (its start event ref is taken
 * over by the caller when keep_start). */
static void drop_open(ivst *is, open_iv *o, bool keep_start)
{
    bool keep = is->npool < POOL_KEEP;
    if (is->due == o)
        is->due = o->all.next ? o->all.next->o : NULL;
    if (is->keep_all)
        list_remove(&is->open, &o->all);
    is->nopen--;
    for (uint32_t c = 0; c < o->ncls; c++) {
        keyent *ke = &o->keys[c];
        if (ke->keyed)
            ix_remove(&is->cls[c].ix, &ke->n);
        else
            list_remove(&is->cls[c].nokey, &ke->n);
    }
    for (uint32_t k = 0; k < o->naggs; k++) {
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

/* We are done with closed interval iv: recycle it unless it is still held. */
static inline void interval_done(engine *g, pv_interval *iv)
{
    ivst *is = g->ivs[((const ps_ivtype *)iv->type)->id];
    if (iv->refs > 1 || is->nivfree >= POOL_KEEP) {
        pv_interval_release(iv);
        return;
    }
    if (!is->metrics_plain)
        for (uint32_t m = 0; m < iv->nmetric; m++)
            pv_free(iv->metric[m]);
    event_unref(g, iv->start);
    event_unref(g, iv->end);
    iv->start = (pv_event *)(void *)is->ivfree;
    is->ivfree = iv;
    is->nivfree++;
}

/* Perturbation compensation of closed interval iv (open record o): n is the
 * records its start's thread wrote from its start record on, before the
 * current record (the start's own emit ends inside the interval, and so
 * does every emit of the thread inside it); each duration metric [v, p, m]
 * becomes [v - n*mean, p + n*spread, m + n*spread]. When the thread's
 * cost changed in between (an overhead record), n*mean and n*spread are
 * the sums of what each of those records cost when it was written. */
static void compensate(engine *g, ivst *is, open_iv *o, pv_interval *iv)
{
    thrent *te = thr_find(&g->threads, o->start->thread);
    double n = (double)(te->count - o->emits0), mean, spread;
    if (te->epoch == o->epoch0) {
        mean = n * te->mean;
        spread = n * te->spread;
    } else {
        mean = te->sum_mean - o->cost0_mean;
        spread = te->sum_spread - o->cost0_spread;
    }
    te->refs--;
    for (uint32_t k = 0; k < is->ncomp; k++) {
        pv *m = &iv->metric[is->comp[k]];
        if (m->kind == PV_TRIPLE)
            *m = pv_triple_make(m->t.v - mean, m->t.p + spread, m->t.m + spread);
    }
}

/* o ends at event ev: compute its metrics and feed it to the top-level
 * aggregates over its type (Figure 4.2's step 2: closing one interval does
 * not depend on feeding another, so each is fed as it closes); keep it for
 * step 3 when metric aggregates range over its type. `bound`: s and e
 * are already bound to o's start and ev. */
static void close_interval(engine *g, ivst *is, open_iv *o, pv_event *ev, bool bound)
{
    ps_ivtype *t = is->t;
    pv_interval *iv = is->ivfree;
    if (iv) {
        is->ivfree = (pv_interval *)(void *)iv->start;
        is->nivfree--;
        iv->refs = 1;
    } else {
        iv = pv_interval_new(t, t->nmetric);
    }
    iv->start = o->start;
    iv->end = ev;
    ev->refs++;
    iv->uid = ++g->uid;
    iv->lost = g->lost - o->lost_at_open;
    if (PS_UNLIKELY(!bound)) {
        bind_ev(&g->slots[is->s_slot], o->start);
        bind_ev(&g->slots[is->e_slot], ev);
    }
    pv_acc **saved = g->ev->accs;
    g->ev->accs = o->accs;
    for (uint32_t m = 0; m < t->nmetric; m++)
        is->metrics[m].box(is->metrics[m].c, g->ev, &iv->metric[m]);
    g->ev->accs = saved;
    if (PS_UNLIKELY(is->ncomp) && o->emits0 != UINT64_MAX)
        compensate(g, is, o, iv);
    uint64_t start_seq = o->start_seq;
    drop_open(is, o, true);

    const ivdisp *id = &g->ivd[t->id];
    if (g->want_intervals)
        g->p->interval(g->p->ctx, iv);
    elemref x = {PV_INTERVAL, iv};
    for (uint32_t i = 0; i < id->tops.n; i++)
        feed_top(g, id->tops.v[i], x);
    if (id->msubs.n) {
        closed c = {iv, start_seq};
        VPUSH(g->closed, c);
    } else {
        interval_done(g, iv);
    }
}

/* Close the open intervals of `is` that ev ends (A.3.3: all of them, or for
 * a nested type the most recently started one). */
static void close_matching(engine *g, ivst *is, pv_event *ev)
{
    if (!is->nopen)
        return;
    bind_ev(&g->slots[is->e_slot], ev);
    ixlist *cands = &is->open;
    const cx *where = is->e_where;
    if (is->endcls >= 0) {
        double k;
        if (!cx_eval_num(is->end_key, g->ev, &k))
            return;
        ixslot *s = ix_find(&is->cls[is->endcls].ix, k);
        if (!s)
            return;
        cands = &s->list;
        where = is->e_where_keyed;
    }
    if (is->t->nested) {
        for (ixnode *n = cands->tail; n; n = n->prev) {
            open_iv *o = n->o;
            bind_ev(&g->slots[is->s_slot], o->start);
            if (!where || cx_eval_cond(where, g->ev) == 1) {
                close_interval(g, is, o, ev, true);
                return;
            }
        }
        return;
    }
    /* Closing unlinks only the closed interval's nodes, and never moves a
     * slot of an index, so the next node stays valid. */
    for (ixnode *n = cands->head, *next; n; n = next) {
        next = n->next;
        open_iv *o = n->o;
        bind_ev(&g->slots[is->s_slot], o->start);
        if (!where || cx_eval_cond(where, g->ev) == 1)
            close_interval(g, is, o, ev, true);
    }
}

/* ---- the event stream ------------------------------------------------------------------------- */

/* Process one event of the stream. `target`: for end$I virtual events, the
 * interval it ends. Inlined into the loop over the log's records; other
 * callers use process_event(). */
static inline __attribute__((always_inline)) void process_event_inline(engine *g, const evdisp *d, pv_event *ev,
                                                                       ivst *target_is, open_iv *target)
{
    g->seq++;
    if (g->want_events)
        g->p->event(g->p->ctx, ev);
    elemref x = {PV_EVENT, ev};
    for (uint32_t i = 0; i < d->tops.n; i++)
        feed_top(g, d->tops.v[i], x);

    if (PS_UNLIKELY(target != NULL))
        close_interval(g, target_is, target, ev, false);
    for (uint32_t i = 0; i < d->ends.n; i++)
        close_matching(g, d->ends.v[i], ev);

    for (uint32_t i = 0; i < d->msubs.n; i++)
        feed_metric_sub(g, d->msubs.v[i].is, d->msubs.v[i].k, x, UINT64_MAX);
    if (g->closed.n) {
        for (uint32_t c = 0; c < g->closed.n; c++) {
            pv_interval *iv = g->closed.v[c].iv;
            const ivdisp *id = &g->ivd[((const ps_ivtype *)iv->type)->id];
            elemref y = {PV_INTERVAL, iv};
            for (uint32_t i = 0; i < id->msubs.n; i++)
                feed_metric_sub(g, id->msubs.v[i].is, id->msubs.v[i].k, y, g->closed.v[c].start_seq);
        }
        for (uint32_t c = 0; c < g->closed.n; c++)
            interval_done(g, g->closed.v[c].iv);
        g->closed.n = 0;
    }

    for (uint32_t i = 0; i < d->starts.n; i++)
        open_interval(g, d->starts.v[i], ev);
}

static void process_event(engine *g, pv_event *ev, ivst *target_is, open_iv *target)
{
    process_event_inline(g, &g->evd[((const ps_evtype *)ev->type)->id], ev, target_is, target);
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

/* The `#time-origin T` header line: the timestamp from which virtual time
 * events count instead of the first record's (a log window cut from a
 * longer log carries its log's origin, so `every` intervals fall where
 * they fell in the whole log). Only an origin at or before the first
 * record counts. */
static bool header_origin(const log_reader *r, int64_t first_ts, double *origin)
{
    const log_header *h = log_reader_header(r);
    for (size_t i = h ? h->nfields : 0; i-- > 0;) {
        if (strcmp(h->fields[i].key, "time-origin") != 0)
            continue;
        char *end;
        errno = 0;
        long long v = strtoll(h->fields[i].value, &end, 10);
        if (errno || end == h->fields[i].value || *end || v < 0 || v > first_ts)
            return false;
        *origin = (double)v;
        return true;
    }
    return false;
}

/* The first tick of chain `c` to schedule: 0, or with an origin from the
 * header the last tick at or before the first record. */
static uint64_t first_tick(const engine *g, uint32_t c, double origin, int64_t first_ts)
{
    const chain *ch = &g->chains.v[c];
    double k = floor(((double)first_ts - origin - ch->from) / ch->every);
    return k > 0 && k < 9e18 ? (uint64_t)k : 0;
}

/* Report the intervals with a deadline that a record at time `ts` shows
 * to be open longer than it (each once, while still open), with the
 * records lost since each started. */
static void check_deadlines(engine *g, int64_t ts)
{
    for (uint32_t i = 0; i < g->deadlines.n; i++) {
        ivst *is = g->deadlines.v[i];
        while (is->due && (double)is->due->start->ts + is->within < (double)ts) {
            open_iv *o = is->due;
            is->due = o->all.next ? o->all.next->o : NULL;
            /* a record lost since its start could have been its end, in time:
             * the record before the gap was not past the deadline yet */
            g->p->overdue(g->p->ctx, is->t, o->start, (double)(ts - o->start->ts), is->within,
                          g->lost - o->lost_at_open);
        }
    }
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
        g->vstart = v.is_start ? e : NULL;
        g->vstart_ts = v.ts;
        process_event(g, e, v.target_is, v.target);
        g->vstart = NULL;
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

/* The conjunct `x = y` of where-clause w (reached through '&' only) whose
 * operands are the keys x and y, in either order; NULL if none. */
static const ps_expr *key_conjunct(const ps_expr *w, const ps_expr *x, const ps_expr *y)
{
    if (!w || w->kind != X_BINARY)
        return NULL;
    if (w->op == PV_OP_EQ && ((w->bin.a == x && w->bin.b == y) || (w->bin.a == y && w->bin.b == x)))
        return w;
    if (w->op != PV_OP_AND)
        return NULL;
    const ps_expr *k = key_conjunct(w->bin.a, x, y);
    return k ? k : key_conjunct(w->bin.b, x, y);
}

/* The key class of start key `e` in `is` (a new one when no class has the
 * same expression). */
static int32_t key_class(engine *g, ivst *is, const ps_expr *e)
{
    for (uint32_t c = 0; c < is->ncls; c++)
        if (cx_same_expr(is->cls[c].expr, e))
            return (int32_t)c;
    is->cls = ps_realloc(is->cls, (is->ncls + 1) * sizeof *is->cls);
    keycls *kc = &is->cls[is->ncls];
    memset(kc, 0, sizeof *kc);
    kc->expr = e;
    kc->key = cx_num(&g->cc, e);
    return (int32_t)is->ncls++;
}

static ivst *ivst_new(engine *g, ps_ivtype *t)
{
    cx_compiler *cc = &g->cc;
    ivst *is = ps_calloc(1, sizeof *is);
    is->t = t;
    is->s_slot = t->s->slot;
    is->e_slot = t->e->slot;
    is->s_where = cx_cond(cc, t->s_where, NULL);
    is->e_where = cx_cond(cc, t->e_where, NULL);
    is->endcls = -1;
    if (t->end_key && t->start_key) {
        is->endcls = key_class(g, is, t->start_key);
        is->end_key = cx_num(cc, t->end_key);
        is->e_where_keyed = cx_cond(cc, t->e_where, key_conjunct(t->e_where, t->end_key, t->start_key));
    }
    is->metrics = ps_calloc(t->nmetric ? t->nmetric : 1, sizeof *is->metrics);
    is->metrics_plain = true;
    for (uint32_t m = 0; m < t->nmetric; m++) {
        is->metrics[m] = cx_value(cc, t->metrics[m].expr);
        is->metrics_plain &= is->metrics[m].kind != CX_GENERIC;
    }
    /* compensated: intervals from a record to an event (a time-based end is
     * not measured, a virtual start is no record) */
    if (g->p->compensate && g->p->compensate[t->id] && t->start_kind == IVS_EVENT && t->end_kind == IVE_EVENT) {
        is->comp = ps_calloc(t->nmetric ? t->nmetric : 1, sizeof *is->comp);
        for (uint32_t m = 0; m < t->nmetric; m++)
            if (ps_metric_is_duration(t, t->metrics[m].expr))
                is->comp[is->ncomp++] = m;
        g->comp |= is->ncomp > 0;
    }
    is->keep_all = is->endcls < 0;
    is->aggs = ps_calloc(t->naggs ? t->naggs : 1, sizeof *is->aggs);
    for (uint32_t k = 0; k < t->naggs; k++) {
        ps_agg *a = t->aggs[k];
        aggst *as = &is->aggs[k];
        as->a = a;
        as->var_slot = a->var->slot;
        as->where = cx_cond(cc, a->where, NULL);
        as->value = cx_value(cc, a->value);
        as->cls = -1;
        if (a->elem_key && a->start_key) {
            as->cls = key_class(g, is, a->start_key);
            as->elem_key = cx_num(cc, a->elem_key);
            as->where_keyed = cx_cond(cc, a->where, key_conjunct(a->where, a->elem_key, a->start_key));
        } else {
            is->keep_all = true;
        }
    }
    return is;
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
    g->want_events = p->want_events && p->event;
    g->want_intervals = p->want_intervals && p->interval;
    cx_init(&g->cc, p->ev);
    g->evd = ps_calloc(prog->evtypes.n, sizeof *g->evd);
    g->ivd = ps_calloc(prog->ivtypes.n, sizeof *g->ivd);
    g->ivs = ps_calloc(prog->ivtypes.n, sizeof *g->ivs);
    g->tops = ps_calloc(p->ntops ? p->ntops : 1, sizeof *g->tops);
    for (uint32_t i = 0; i < prog->evtypes.n; i++)
        if (prog->evtypes.v[i]->nattr > g->maxattr)
            g->maxattr = prog->evtypes.v[i]->nattr;

    for (uint32_t i = 0; i < prog->ivtypes.n; i++) {
        ps_ivtype *t = prog->ivtypes.v[i];
        if (!p->need_iv[i]) {
            /* not used by this pass, but its time constants are checked
             * all the same: a spec is wrong whether or not its intervals
             * are used (pcheck.1, exit status 2) */
            double x;
            int rc = 0;
            if (t->end_kind == IVE_AFTER)
                rc = time_const(g, t->after, &x, false, "after", t, errmsg);
            if (rc == 0 && t->within && p->overdue)
                rc = time_const(g, t->within, &x, false, "within", t, errmsg);
            if (rc == 0 && t->start_kind == IVS_EVERY)
                rc = time_const(g, t->from, &x, true, "from", t, errmsg);
            if (rc == 0 && t->start_kind == IVS_EVERY)
                rc = time_const(g, t->every, &x, false, "every", t, errmsg);
            if (rc < 0)
                return rc;
            continue;
        }
        ivst *is = ivst_new(g, t);
        g->ivs[i] = is;
        if (t->end_kind == IVE_AFTER) {
            int rc = time_const(g, t->after, &is->after, false, "after", t, errmsg);
            if (rc < 0)
                return rc;
        }
        if (t->within && p->overdue) {
            int rc = time_const(g, t->within, &is->within, false, "within", t, errmsg);
            if (rc < 0)
                return rc;
            is->keep_all = true;      /* deadlines walk the open intervals in start order */
            VPUSH(g->deadlines, is);
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
        topst *ts = &g->tops[k];
        ts->k = k;
        ts->slot = &g->slots[a->var->slot];
        ts->acc = ps_agg_acc_new(a);
        ts->sink = p->is_sink && p->is_sink[k] && p->sink;
        ts->where = cx_cond(&g->cc, a->where, NULL);
        if (!ts->sink)
            ts->value = cx_value(&g->cc, a->value);
        ts->report = p->report_for && p->offender && !ts->sink ? p->report_for[k] : NULL;
        ts->mode = TOP_GENERIC;
        ts->fed = p->fed && !ts->sink ? &p->fed[a->id] : NULL;
        if (ts->fed)
            memset(ts->fed, 0, sizeof *ts->fed);   /* (the general path notes them) */
        else if (!ts->sink && a->op == PV_AGG_COUNT && ts->value.kind == CX_NONE && !ts->report)
            ts->mode = TOP_COUNT;
        else if (!ts->sink && a->op == PV_AGG_ALL && a->map_depth == 0 && ts->value.kind == CX_BOOL)
            ts->mode = TOP_ALL;
        else if (!ts->sink && a->op == PV_AGG_MEAN && a->map_depth == 0 && ts->value.kind == CX_TRI && !ts->report)
            ts->mode = TOP_MEAN_TRI;
        if (a->ev)
            VPUSH(g->evd[a->ev->id].tops, ts);
        else if (a->iv)
            VPUSH(g->ivd[a->iv->id].tops, ts);
    }
    for (uint32_t i = 0; i < prog->evtypes.n; i++) {
        evdisp *d = &g->evd[i];
        d->relevant = p->want_events || d->ends.n || d->starts.n || d->msubs.n || d->tops.n;
        d->fix_exact = prog->evtypes.v[i]->origin == EVO_RET && prog->evtypes.v[i]->nattr == 2;
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
        if (!is->keep_all) {
            ixmap *m = &is->cls[is->endcls].ix;
            for (uint32_t i = 0; i < m->cap; i++)
                while (m->s[i].used && m->s[i].list.head)
                    drop_open(is, m->s[i].list.head->o, false);
        }
        free_pool(is);
        while (is->ivfree) {
            pv_interval *iv = is->ivfree;
            is->ivfree = (pv_interval *)(void *)iv->start;
            iv->start = iv->end = NULL;
            for (uint32_t m = 0; m < iv->nmetric; m++)
                iv->metric[m] = pv_undef();
            pv_interval_release(iv);
        }
        for (uint32_t c = 0; c < is->ncls; c++)
            ix_free(&is->cls[c].ix);
        free(is->cls);
        free(is->metrics);
        free(is->aggs);
        free(is->comp);
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
        pv_acc_free(g->tops[k].acc);
    for (uint32_t i = 0; i < g->names.n; i++)
        if (g->names.v[i] != no_types)
            free(g->names.v[i]);
    free(g->names.v);
    free(g->heap.v);
    free(g->chains.v);
    free(g->deadlines.v);
    free(g->closed.v);
    free(g->threads.s);
    free(g->costs.s);
    free(g->evd);
    free(g->ivd);
    free(g->ivs);
    free(g->tops);
    if (g->spare) {
        g->spare->refs = 1;
        pv_event_release(g->spare);
    }
    while (g->evfree) {
        pv_event *e = g->evfree;
        g->evfree = (pv_event *)(uintptr_t)e->type;
        e->refs = 1;
        pv_event_release(e);
    }
    cx_free(&g->cc);
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

/* An overhead record: from here on a record of its thread costs what it
 * says (turned into ticks). Only compensating passes ask for them. */
static void thread_cost(engine *g, const log_record *rec)
{
    double mean = rec->ovh_ns / g->p->comp_tick_ns, spread = rec->ovh_spread_ns / g->p->comp_tick_ns;
    cost_set(&g->costs, rec->thread, mean, spread);
    thrent *te = thr_find(&g->threads, rec->thread);
    if (te && (te->mean != mean || te->spread != spread)) {
        te->mean = mean;
        te->spread = spread;
        te->epoch++;
    }
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

ps_engine *ps_engine_begin(const ps_pass *p, log_reader *r, char **errmsg)
{
    engine *g = ps_malloc(sizeof *g);
    int rc = setup(g, p, errmsg);
    if (rc < 0) {
        teardown(g);
        free(g);
        return NULL;
    }
    g->r = r;
    if (g->comp)
        log_reader_want_overhead(r, true);
    return g;
}

int ps_engine_step(ps_engine *g, char **errmsg)
{
    const ps_pass *p = g->p;
    log_reader *r = g->r;
    ps_evtype *logstart = ps_logstart_type(p->prog), *logend = ps_logend_type(p->prog);
    ps_evtype *gap = ps_gap_type(p->prog);
    const log_record *rec;
    int rc;
    while ((rc = log_reader_next_ref(r, &rec, errmsg)) > 0) {
        if (PS_UNLIKELY(rec->kind == LOG_REC_OVERHEAD)) {
            thread_cost(g, rec);
            continue;
        }
        if (rec->kind == LOG_REC_GAP) {
            g->pending_gap += (double)rec->gap;
            g->lost += rec->gap;      /* every interval open now may miss records */
            g->lost_recent += rec->gap;
            continue;
        }
        if (p->clock)
            p->clock(p->ctx, rec->ts);
        if (!g->any) {
            g->any = true;
            if (p->first_record)
                p->first_record(p->ctx);
            bool given = header_origin(r, rec->ts, &g->origin);
            if (!given)
                g->origin = (double)rec->ts;
            emit_fabricated(g, logstart, rec->ts, 0);
            for (uint32_t c = 0; c < g->chains.n; c++)
                schedule_chain(g, c, g->origin, given ? first_tick(g, c, g->origin, rec->ts) : 0);
        }
        if (g->deadlines.n)
            check_deadlines(g, rec->ts);
        if (g->heap.n)
            emit_virtual(g, (double)rec->ts, g->origin);
        if (g->pending_gap > 0) {
            emit_fabricated(g, gap, rec->ts, g->pending_gap);
            g->pending_gap = 0;
        }
        ps_evtype *const *types = rec->name_id < g->names.n && g->names.v[rec->name_id] ? g->names.v[rec->name_id]
                                                                                      : types_for(g, r, rec->name_id);
        for (const ps_evtype *t; (t = *types) != NULL; types++) {
            const evdisp *d = &g->evd[t->id];
            pv_event *e = event_alloc(g, t);
            e->pos = rec->pos;
            e->sub = 0;
            e->thread = rec->thread;
            e->ts = rec->ts;
            uint32_t na = t->nattr, n = rec->nvalues < na ? rec->nvalues : na;
            for (uint32_t i = 0; i < n; i++)
                e->attr[i] = rec->values[i];
            if (PS_UNLIKELY(n < na)) {
                for (uint32_t i = n; i < na; i++)
                    e->attr[i] = PV_ATTR_UNDEF;
                if (d->fix_exact && n < 2)
                    e->attr[1] = 1;     /* `exact`: our logs only carry explicit returns */
            }
            process_event_inline(g, d, e, NULL, NULL);
            event_done(g, e);
        }
        if (PS_UNLIKELY(g->comp)) {
            /* one more emit of this thread, inside its compensated intervals open */
            thrent *te = thr_find(&g->threads, rec->thread);
            if (te) {
                te->count++;
                te->sum_mean += te->mean;
                te->sum_spread += te->spread;
            }
        }
        g->pos = rec->pos;
        g->sub = 0;
        g->lost_recent = 0;
        g->last_ts = rec->ts;
    }
    if (rc < 0)
        return rc;      /* -EAGAIN: a fed reader wants more bytes; the pass goes on later */
    if (g->any) {
        if (g->pending_gap > 0)
            emit_fabricated(g, gap, g->last_ts, g->pending_gap);
        emit_fabricated(g, logend, g->last_ts, 0);
    }
    if (p->lost && *p->lost < g->lost)
        *p->lost = g->lost;
    /* Intervals ended by time (`after`) still open are chunks still
     * running, not requests that never ended. */
    for (uint32_t i = 0; p->unclosed && i < p->prog->ivtypes.n; i++) {
        const ivst *is = g->ivs[i];
        if (is && is->t->end_kind == IVE_EVENT && p->unclosed[i] < is->nopen)
            p->unclosed[i] = is->nopen;
    }
    for (uint32_t k = 0; k < p->ntops; k++) {
        pv_free(p->ev->topvals[p->tops[k]->id]);
        p->ev->topvals[p->tops[k]->id] = g->tops[k].sink ? pv_undef() : pv_acc_result(g->tops[k].acc);
    }
    return 0;
}

void ps_engine_end(ps_engine *g)
{
    if (!g)
        return;
    teardown(g);
    free(g);
}

int ps_engine_run(const ps_pass *p, log_reader *r, char **errmsg)
{
    ps_engine *g = ps_engine_begin(p, r, errmsg);
    if (!g)
        return -EDOM;
    int rc = ps_engine_step(g, errmsg);
    ps_engine_end(g);
    return rc < 0 ? rc : 0;
}
