/* infer.c — mining interval types from a monitoring log (see infer.h). */
#include "infer.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "logread.h"
#include "tokens.h"

/* ---- small helpers ---------------------------------------------------------------- */

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fputs("pinfer: out of memory\n", stderr);
        exit(3);
    }
    return p;
}

static bool integral(double v)
{
    return isfinite(v) && v == floor(v) && fabs(v) < 9007199254740992.0;
}

bool pi_reserved(const char *s)
{
    static const char *const words[] = {
#define X(name, spelling) spelling,
        PS_KEYWORDS(X)
#undef X
    };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcmp(s, words[i]) == 0)
            return true;
    return false;
}

/* ---- name affinity ------------------------------------------------------------------ */

static const char *const start_words[] = { "start", "begin", "enter", "open", "call", "request", "req", NULL };
static const char *const end_words[] = { "end", "stop", "finish", "exit", "done", "close", "complete",
                                         "leave", "return", "ret", "reply", "response", NULL };

/* The stem of `name` without one of `words` at its start or end (case
 * insensitive, with a '_' or '.' next to it dropped), lowercased into out.
 * False when no word was found or nothing is left. */
static bool stem(const char *name, const char *const *words, char *out, size_t cap)
{
    size_t n = strlen(name);
    if (n + 1 > cap)
        return false;
    char low[256];
    if (n >= sizeof low)
        return false;
    for (size_t i = 0; i <= n; i++)
        low[i] = (char)tolower((unsigned char)name[i]);
    for (int w = 0; words[w]; w++) {
        size_t k = strlen(words[w]);
        if (n <= k)
            continue;
        const char *rest = NULL;
        size_t rn = 0;
        if (strncmp(low, words[w], k) == 0) {
            rest = low + k;
            rn = n - k;
        } else if (strcmp(low + n - k, words[w]) == 0) {
            rest = low;
            rn = n - k;
        }
        if (!rest)
            continue;
        while (rn && (*rest == '_' || *rest == '.'))
            rest++, rn--;
        while (rn && (rest[rn - 1] == '_' || rest[rn - 1] == '.'))
            rn--;
        if (!rn)
            continue;
        memcpy(out, rest, rn);
        out[rn] = 0;
        return true;
    }
    return false;
}

/* How strongly two names say "start and end of the same thing": 3 for
 * call@X / ret@X, 2 for StartRead / EndRead or ReqStart / ReqEnd, else 0. */
static int affinity(const char *a, const char *b)
{
    if (strncmp(a, "call@", 5) == 0 && strncmp(b, "ret@", 4) == 0 && strcmp(a + 5, b + 4) == 0)
        return 3;
    char sa[256], sb[256];
    if (stem(a, start_words, sa, sizeof sa) && stem(b, end_words, sb, sizeof sb) && strcmp(sa, sb) == 0)
        return 2;
    return 0;
}

/* ---- open starts: a stack per (candidate, key value), found by a chained hash ------- */

/* An open start. */
typedef struct open_entry {
    int64_t ts;
    uint32_t below;              /* the start opened before it with the same key; free list */
    uint32_t nvals;
    uint64_t seen;               /* pass 3: bit p set when watched type p occurred inside */
    double vals[PI_MAX_ATTRS];   /* start attributes (pass 3) */
} open_entry;

/* The open starts of one (candidate, key value). */
typedef struct open_key {
    uint32_t cand;
    uint32_t next;               /* next in bucket chain, or free list */
    int64_t key;
    uint32_t top;                /* latest open start */
    uint32_t depth;              /* how many are open */
} open_key;

typedef struct open_table {
    open_entry *e;
    uint32_t ne, cape, free_e;   /* entries allocated, capacity, free list */
    open_key *k;
    uint32_t nk, capk, free_k;
    uint32_t live_k;             /* keys in use */
    uint32_t *bucket;
    uint32_t nbucket;            /* a power of 2 */
} open_table;

#define NIL UINT32_MAX

static uint32_t hkey(uint32_t cand, int64_t key)
{
    uint64_t h = ((uint64_t)cand * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)key * 0xff51afd7ed558ccdull);
    h ^= h >> 31;
    return (uint32_t)(h ^ (h >> 17));
}

static void ot_init(open_table *t)
{
    memset(t, 0, sizeof *t);
    t->free_e = t->free_k = NIL;
    t->nbucket = 1024;
    t->bucket = xcalloc(t->nbucket, sizeof *t->bucket);
    memset(t->bucket, 0xff, t->nbucket * sizeof *t->bucket);
}

static void ot_free(open_table *t)
{
    free(t->e);
    free(t->k);
    free(t->bucket);
}

static void ot_rehash(open_table *t)
{
    uint32_t nb = t->nbucket * 2;
    uint32_t *b = xcalloc(nb, sizeof *b);
    memset(b, 0xff, nb * sizeof *b);
    for (uint32_t i = 0; i < t->nbucket; i++) {
        for (uint32_t x = t->bucket[i]; x != NIL;) {
            uint32_t nx = t->k[x].next;
            uint32_t h = hkey(t->k[x].cand, t->k[x].key) & (nb - 1);
            t->k[x].next = b[h];
            b[h] = x;
            x = nx;
        }
    }
    free(t->bucket);
    t->bucket = b;
    t->nbucket = nb;
}

/* The key node of (cand, key), or NIL; *prev gets its predecessor in the chain. */
static uint32_t ot_find(const open_table *t, uint32_t cand, int64_t key, uint32_t *prev)
{
    uint32_t h = hkey(cand, key) & (t->nbucket - 1), p = NIL;
    for (uint32_t y = t->bucket[h]; y != NIL; p = y, y = t->k[y].next)
        if (t->k[y].cand == cand && t->k[y].key == key) {
            if (prev)
                *prev = p;
            return y;
        }
    return NIL;
}

static void ot_unlink_key(open_table *t, uint32_t x, uint32_t prev)
{
    uint32_t h = hkey(t->k[x].cand, t->k[x].key) & (t->nbucket - 1);
    if (prev == NIL)
        t->bucket[h] = t->k[x].next;
    else
        t->k[prev].next = t->k[x].next;
    t->k[x].next = t->free_k;
    t->free_k = x;
    t->live_k--;
}

/* Push an open start; returns its depth (how many are now open with the
 * same candidate and key), or 0 when PI_MAX_OPEN starts are open. */
static uint32_t ot_push(open_table *t, uint32_t cand, int64_t key, int64_t ts, const double *vals, uint32_t nvals)
{
    uint32_t x;
    if (t->free_e != NIL) {
        x = t->free_e;
        t->free_e = t->e[x].below;
    } else {
        if (t->ne == PI_MAX_OPEN)
            return 0;
        if (t->ne == t->cape) {
            t->cape = t->cape ? t->cape * 2 : 1024;
            t->e = pinfer_xrealloc(t->e, (size_t)t->cape * sizeof *t->e);
        }
        x = t->ne++;
    }
    uint32_t kx = ot_find(t, cand, key, NULL);
    if (kx == NIL) {
        if (t->free_k != NIL) {
            kx = t->free_k;
            t->free_k = t->k[kx].next;
        } else {
            if (t->nk == t->capk) {
                t->capk = t->capk ? t->capk * 2 : 1024;
                t->k = pinfer_xrealloc(t->k, (size_t)t->capk * sizeof *t->k);
            }
            kx = t->nk++;
        }
        if (++t->live_k > t->nbucket)
            ot_rehash(t);
        uint32_t h = hkey(cand, key) & (t->nbucket - 1);
        t->k[kx] = (open_key){ .cand = cand, .key = key, .top = NIL, .depth = 0, .next = t->bucket[h] };
        t->bucket[h] = kx;
    }
    open_entry *e = &t->e[x];
    e->ts = ts;
    e->seen = 0;
    e->nvals = nvals < PI_MAX_ATTRS ? nvals : PI_MAX_ATTRS;
    if (vals)
        memcpy(e->vals, vals, e->nvals * sizeof *vals);
    e->below = t->k[kx].top;
    t->k[kx].top = x;
    return ++t->k[kx].depth;
}

/* Pop the most recent open start of (cand, key) into *out; *others tells
 * whether more remain open with that key. False when none is open. */
static bool ot_pop(open_table *t, uint32_t cand, int64_t key, open_entry *out, bool *others)
{
    uint32_t prev = NIL;
    uint32_t kx = ot_find(t, cand, key, &prev);
    if (kx == NIL)
        return false;
    open_key *k = &t->k[kx];
    uint32_t x = k->top;
    *out = t->e[x];
    k->top = t->e[x].below;
    *others = --k->depth > 0;
    t->e[x].below = t->free_e;
    t->free_e = x;
    if (k->depth == 0)
        ot_unlink_key(t, kx, prev);
    return true;
}

/* Mark every open start of (cand, key) as containing watched type `bit`. */
static void ot_mark(open_table *t, uint32_t cand, int64_t key, uint64_t bit)
{
    uint32_t kx = ot_find(t, cand, key, NULL);
    for (uint32_t x = kx == NIL ? NIL : t->k[kx].top; x != NIL; x = t->e[x].below)
        t->e[x].seen |= bit;
}

/* Remove the open starts of candidates given up; returns how many. */
static uint32_t ot_sweep(open_table *t, const bool *given_up)
{
    uint32_t freed = 0;
    for (uint32_t b = 0; b < t->nbucket; b++) {
        uint32_t prev = NIL;
        for (uint32_t y = t->bucket[b]; y != NIL;) {
            uint32_t next = t->k[y].next;
            if (!given_up[t->k[y].cand]) {
                prev = y;
                y = next;
                continue;
            }
            for (uint32_t x = t->k[y].top; x != NIL;) {
                uint32_t below = t->e[x].below;
                t->e[x].below = t->free_e;
                t->free_e = x;
                freed++;
                x = below;
            }
            ot_unlink_key(t, y, prev);
            y = next;
        }
    }
    return freed;
}

/* ---- candidates ---------------------------------------------------------------------- */

typedef struct cand {
    uint32_t a, b;               /* start, end type */
    int ka, kb;                  /* keys */
    uint64_t matched, ambig;
    uint32_t max_depth;
    double sumdur;
    uint32_t open;               /* starts open now */
    bool overflow;               /* given up: too many open starts */
    bool valid;
} cand;

/* Candidates by the event type that starts or ends them. */
typedef struct cand_index {
    uint32_t **start, **end;     /* per type: candidate ids */
    uint32_t *nstart, *nend;
    uint32_t ncand;
} cand_index;

static void ci_add(uint32_t **v, uint32_t *n, uint32_t id)
{
    if ((*n & (*n - 1)) == 0 || *n == 0)
        *v = pinfer_xrealloc(*v, (size_t)(*n ? *n * 2 : 1) * sizeof **v);
    (*v)[(*n)++] = id;
}

static void ci_free(cand_index *ci, uint32_t ntypes)
{
    for (uint32_t t = 0; t < ntypes; t++) {
        free(ci->start[t]);
        free(ci->end[t]);
    }
    free(ci->start);
    free(ci->end);
    free(ci->nstart);
    free(ci->nend);
}

/* The key value of a record for key k; false when it has none. */
static bool key_of(const log_record *rec, int k, int64_t *out)
{
    if (k == PI_THREAD) {
        *out = rec->thread;
        return true;
    }
    if ((uint32_t)k >= rec->nvalues || !integral(rec->values[k]))
        return false;
    *out = (int64_t)rec->values[k];
    return true;
}

/* ---- the reader loop ------------------------------------------------------------------ */

typedef struct miner {
    pi_model *m;
    log_reader *r;
    uint32_t *type_of;           /* reader name id -> type index + 1 (0: none yet / ignored) */
    uint32_t ntype_of;
    const pi_options *opt;
} miner;

/* The type index of a record, adding the type on first sight; UINT32_MAX
 * when past PI_MAX_TYPES. */
static uint32_t type_index(miner *mi, const log_record *rec, bool add)
{
    if (rec->name_id >= mi->ntype_of) {
        uint32_t n = mi->ntype_of ? mi->ntype_of : 64;
        while (n <= rec->name_id)
            n *= 2;
        mi->type_of = pinfer_xrealloc(mi->type_of, n * sizeof *mi->type_of);
        memset(mi->type_of + mi->ntype_of, 0, (n - mi->ntype_of) * sizeof *mi->type_of);
        mi->ntype_of = n;
    }
    uint32_t t = mi->type_of[rec->name_id];
    if (t == UINT32_MAX - 1 && add)
        mi->m->types_reserved++;
    if (t == UINT32_MAX || t == UINT32_MAX - 1) {
        if (t == UINT32_MAX && add)
            mi->m->types_ignored++;
        return UINT32_MAX;
    }
    if (t)
        return t - 1;
    if (!add)
        return UINT32_MAX;
    pi_model *m = mi->m;
    if (m->ntypes == PI_MAX_TYPES || pi_reserved(rec->name)) {
        mi->type_of[rec->name_id] = pi_reserved(rec->name) ? UINT32_MAX - 1 : UINT32_MAX;
        return type_index(mi, rec, add);
    }
    m->types = pinfer_xrealloc(m->types, (m->ntypes + 1) * sizeof *m->types);
    pi_type *ty = &m->types[m->ntypes];
    memset(ty, 0, sizeof *ty);
    ty->name = strdup(rec->name);
    for (uint32_t i = 0; i < PI_MAX_ATTRS; i++)
        ty->attr[i].integral = true;
    mi->type_of[rec->name_id] = ++m->ntypes;
    return m->ntypes - 1;
}

/* Pass 1: event types and their attributes. */
static int pass_types(miner *mi, char **errmsg)
{
    log_record rec;
    int rc;
    while ((rc = log_reader_next(mi->r, &rec, errmsg)) == 1) {
        if (rec.kind != LOG_REC_EVENT)
            continue;
        uint32_t t = type_index(mi, &rec, true);
        if (t == UINT32_MAX)
            continue;
        pi_type *ty = &mi->m->types[t];
        ty->count++;
        if (rec.nvalues > ty->nvalues)
            ty->nvalues = rec.nvalues;
        for (uint32_t i = 0; i < rec.nvalues && i < PI_MAX_ATTRS; i++) {
            pi_attr *a = &ty->attr[i];
            double v = rec.values[i];
            if (!isfinite(v))
                continue;
            if (a->n == 0 || v < a->min)
                a->min = v;
            if (a->n == 0 || v > a->max)
                a->max = v;
            a->n++;
            a->integral &= integral(v);
            if (a->many)
                continue;
            bool seen = false;
            for (uint32_t k = 0; k < a->nvals && !seen; k++)
                seen = a->vals[k] == v;
            if (seen)
                continue;
            if (a->nvals == PI_MAX_VALUES)
                a->many = true;
            else
                a->vals[a->nvals++] = v;
        }
    }
    return rc;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Do `matched` pairs account for (nearly) all `count` events of a type? */
static bool pairs_enough(uint64_t matched, uint64_t count)
{
    return (double)matched >= PI_MATCH_MIN * (double)count || matched + PI_UNPAIRED_SLACK >= count;
}

/* Can attribute i of A be matched with attribute j of B as a key? */
static bool keyable(const pi_attr *x, const pi_attr *y)
{
    return x->n && y->n && x->integral && y->integral && (x->many || x->nvals >= 2) &&
           fmax(x->min, y->min) <= fmin(x->max, y->max);
}

/* All candidates worth simulating: A != B, both seen min_count times, counts
 * within PI_MATCH_MIN of each other, and a key that can pair them. */
static cand *make_candidates(pi_model *m, uint64_t min_count, uint32_t *ncand)
{
    cand *c = NULL;
    uint32_t n = 0, cap = 0;
    /* tier 0: pairs whose names match; tier 1: the others */
    for (int tier = 0; tier < 2; tier++)
    for (uint32_t a = 0; a < m->ntypes; a++) {
        for (uint32_t b = 0; b < m->ntypes; b++) {
            const pi_type *A = &m->types[a], *B = &m->types[b];
            if (a == b || A->count < min_count || B->count < min_count)
                continue;
            if ((affinity(A->name, B->name) > 0) != (tier == 0))
                continue;
            if (!pairs_enough(A->count < B->count ? A->count : B->count, A->count) ||
                !pairs_enough(A->count < B->count ? A->count : B->count, B->count))
                continue;
            for (int ka = -1; ka < (int)PI_MAX_ATTRS; ka++) {
                for (int kb = -1; kb < (int)PI_MAX_ATTRS; kb++) {
                    if ((ka == PI_THREAD) != (kb == PI_THREAD))
                        continue;
                    if (ka != PI_THREAD && !keyable(&A->attr[ka], &B->attr[kb]))
                        continue;
                    if (n == PI_MAX_CANDIDATES) {
                        m->candidates_capped = true;
                        goto out;
                    }
                    if (n == cap) {
                        cap = cap ? cap * 2 : 64;
                        c = pinfer_xrealloc(c, cap * sizeof *c);
                    }
                    c[n++] = (cand){ .a = a, .b = b, .ka = ka, .kb = kb };
                }
            }
        }
    }
out:
    *ncand = n;
    return c;
}

static void index_candidates(cand_index *ci, const cand *c, uint32_t n, uint32_t ntypes)
{
    ci->start = xcalloc(ntypes, sizeof *ci->start);
    ci->end = xcalloc(ntypes, sizeof *ci->end);
    ci->nstart = xcalloc(ntypes, sizeof *ci->nstart);
    ci->nend = xcalloc(ntypes, sizeof *ci->nend);
    ci->ncand = n;
    for (uint32_t i = 0; i < n; i++) {
        ci_add(&ci->start[c[i].a], &ci->nstart[c[i].a], i);
        ci_add(&ci->end[c[i].b], &ci->nend[c[i].b], i);
    }
}

/* Pass 3: per event type, the intervals that watch it (path split). */
typedef struct watch {
    uint32_t iv;                 /* interval (candidate) id */
    uint32_t bit;                /* its watched-type index */
    int key;                     /* how the type carries the key */
} watch;

typedef struct watch_index {
    watch **w;                   /* per type */
    uint32_t *n;
} watch_index;

/* What a match callback gets. */
typedef void (*match_fn)(void *ctx, uint32_t cand, const open_entry *start, const log_record *end, bool others);

/* One pass pairing the candidates' starts and ends (ends first: an event
 * that ends one interval and starts another closes before it opens). */
static int pass_pairs(miner *mi, cand *c, const cand_index *ci, const watch_index *wi, bool keep_vals,
                      match_fn on_match, void *ctx, char **errmsg)
{
    open_table ot;
    ot_init(&ot);
    bool *given_up = xcalloc(ci->ncand, sizeof *given_up);
    uint64_t reclaimable = 0;    /* starts held by candidates given up since the last sweep */
    log_record rec;
    int rc;
    while ((rc = log_reader_next(mi->r, &rec, errmsg)) == 1) {
        if (rec.kind != LOG_REC_EVENT)
            continue;
        uint32_t t = type_index(mi, &rec, false);
        if (t == UINT32_MAX)
            continue;
        for (uint32_t i = 0; wi && i < wi->n[t]; i++) {
            const watch *w = &wi->w[t][i];
            int64_t key;
            if (key_of(&rec, w->key, &key))
                ot_mark(&ot, w->iv, key, 1ull << w->bit);
        }
        for (uint32_t i = 0; i < ci->nend[t]; i++) {
            uint32_t id = ci->end[t][i];
            int64_t key;
            open_entry s;
            bool others;
            if (c[id].overflow || !key_of(&rec, c[id].kb, &key) || !ot_pop(&ot, id, key, &s, &others))
                continue;
            c[id].open--;
            c[id].matched++;
            on_match(ctx, id, &s, &rec, others);
        }
        for (uint32_t i = 0; i < ci->nstart[t]; i++) {
            uint32_t id = ci->start[t][i];
            int64_t key;
            if (c[id].overflow || !key_of(&rec, c[id].ka, &key))
                continue;
            const double *vals = keep_vals ? rec.values : NULL;
            uint32_t nvals = keep_vals ? rec.nvalues : 0;
            uint32_t depth = ot_push(&ot, id, key, rec.ts, vals, nvals);
            /* a sweep costs the whole table: only when it frees a good part of it */
            if (depth == 0 && reclaimable >= PI_MAX_OPEN / 16) {
                ot_sweep(&ot, given_up);
                reclaimable = 0;
                depth = ot_push(&ot, id, key, rec.ts, vals, nvals);
            }
            if (depth > 0 && ((++c[id].open > PI_MAX_OPEN_PER && c[id].open > c[id].matched) || depth > PI_MAX_DEPTH))
                depth = 0;
            if (depth == 0) {
                c[id].overflow = given_up[id] = true;
                reclaimable += c[id].open;
                mi->m->overflowed++;
            } else if (depth > c[id].max_depth) {
                c[id].max_depth = depth;
            }
        }
    }
    ot_free(&ot);
    free(given_up);
    return rc;
}

static void on_candidate_match(void *ctx, uint32_t id, const open_entry *s, const log_record *e, bool others)
{
    cand *c = &((cand *)ctx)[id];
    c->ambig += others;
    c->sumdur += (double)(e->ts - s->ts);
}

/* Is candidate x a better way to pair the same two types than y? */
static bool better_key(const pi_model *m, const cand *x, const cand *y)
{
    if (x->matched != y->matched)
        return x->matched > y->matched;
    if ((x->ka == PI_THREAD) != (y->ka == PI_THREAD))
        return y->ka == PI_THREAD;      /* an attribute that names the pair says more */
    if (x->ka == PI_THREAD)
        return false;
    const pi_attr *ax = &m->types[x->a].attr[x->ka], *ay = &m->types[y->a].attr[y->ka];
    if (ax->many != ay->many)
        return ax->many;
    if (ax->nvals != ay->nvals)
        return ax->nvals > ay->nvals;
    return x->ka < y->ka || (x->ka == y->ka && x->kb < y->kb);
}

typedef struct choice {
    uint32_t best;               /* candidate id */
    int affinity;
    double quality;              /* min(matched / count(A), matched / count(B)) */
    double mean;
    bool tested;                 /* chance is set */
    chance_result chance;
} choice;

static int cmp_choice(const void *p, const void *q)
{
    const choice *x = p, *y = q;
    if (x->affinity != y->affinity)
        return y->affinity - x->affinity;
    if (x->quality != y->quality)
        return x->quality > y->quality ? -1 : 1;
    if (x->mean != y->mean)
        return x->mean > y->mean ? -1 : 1;
    return x->best < y->best ? -1 : x->best > y->best;
}

static int rewind_or_fail(log_reader *r, char **errmsg)
{
    int rc = log_reader_rewind(r);
    if (rc < 0 && !*errmsg) {
        *errmsg = strdup(strerror(-rc));
    }
    return rc;
}

/* Test for chance (chance.h) the choices from `from` on that are still in
 * line (both types unused), up to PI_TEST_BATCH of them, in one pass over
 * the log gathering each one's events by key value. */
static int test_batch(miner *mi, const cand *c, choice *ch, uint32_t from, uint32_t nch, char **errmsg)
{
    pi_model *m = mi->m;
    uint32_t who[PI_TEST_BATCH], nb = 0;
    for (uint32_t i = from; i < nch && nb < PI_TEST_BATCH; i++) {
        const cand *b = &c[ch[i].best];
        if (!ch[i].tested && !m->types[b->a].used && !m->types[b->b].used)
            who[nb++] = i;
    }
    chance_sample *smp = xcalloc(nb, sizeof *smp);
    for (uint32_t j = 0; j < nb; j++)
        chance_sample_init(&smp[j]);
    int rc = rewind_or_fail(mi->r, errmsg);
    if (rc < 0)
        goto out_free_samples;
    log_record rec;
    uint32_t full = 0;
    while (full < nb && (rc = log_reader_next(mi->r, &rec, errmsg)) == 1) {
        if (rec.kind != LOG_REC_EVENT)
            continue;
        uint32_t t = type_index(mi, &rec, false);
        if (t == UINT32_MAX)
            continue;
        for (uint32_t j = 0; j < nb; j++) {
            const cand *b = &c[ch[who[j]].best];
            int64_t key;
            if ((t == b->a || t == b->b) && !smp[j].full && key_of(&rec, t == b->b ? b->kb : b->ka, &key) &&
                !chance_add(&smp[j], key, t == b->b))
                full++;
        }
    }
    if (rc < 0)
        goto out_free_samples;
    rc = 0;
    for (uint32_t j = 0; j < nb; j++) {
        choice *x = &ch[who[j]];
        const cand *b = &c[x->best];
        uint64_t seed = chance_seed(m->types[b->a].name, m->types[b->b].name, b->ka, b->kb);
        chance_test(&smp[j], seed, PI_SHUFFLES, x->affinity ? PI_CHANCE_P_NAMED : PI_CHANCE_P, PI_CHANCE_RATIO,
                    &x->chance);
        x->tested = true;
    }
out_free_samples:
    for (uint32_t j = 0; j < nb; j++)
        chance_sample_free(&smp[j]);
    free(smp);
    return rc;
}

/* Keep one candidate per event type: best key per (A, B), then greedily the
 * pairs with the strongest names, the best pairing, the longest durations,
 * each only when it pairs better than chance (the others are listed in
 * m->dropped). Reads the log again for the test. */
static int choose(miner *mi, cand *c, uint32_t n, uint64_t min_count, char **errmsg)
{
    pi_model *m = mi->m;
    for (uint32_t i = 0; i < n; i++) {
        const pi_type *A = &m->types[c[i].a], *B = &m->types[c[i].b];
        c[i].valid = !c[i].overflow && c[i].matched >= min_count &&
                     pairs_enough(c[i].matched, A->count) && pairs_enough(c[i].matched, B->count) &&
                     (c[i].ka == PI_THREAD || (double)c[i].ambig <= PI_AMBIG_MAX * (double)c[i].matched);
    }
    /* best key per (A, B): candidates of one pair are adjacent */
    choice *ch = xcalloc(n, sizeof *ch);
    uint32_t nch = 0;
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i, best = UINT32_MAX;
        for (; j < n && c[j].a == c[i].a && c[j].b == c[i].b; j++)
            if (c[j].valid && (best == UINT32_MAX || better_key(m, &c[j], &c[best])))
                best = j;
        if (best != UINT32_MAX) {
            const cand *b = &c[best];
            double qa = (double)b->matched / (double)m->types[b->a].count;
            double qb = (double)b->matched / (double)m->types[b->b].count;
            ch[nch++] = (choice){ .best = best, .affinity = affinity(m->types[b->a].name, m->types[b->b].name),
                                  .quality = fmin(qa, qb), .mean = b->sumdur / (double)b->matched };
        }
        i = j;
    }
    qsort(ch, nch, sizeof *ch, cmp_choice);
    uint32_t passes = 0;
    int rc = 0;
    for (uint32_t i = 0; i < nch; i++) {
        cand *b = &c[ch[i].best];
        if (m->types[b->a].used || m->types[b->b].used)
            continue;
        if (!ch[i].tested && passes == PI_MAX_TEST_PASSES) {
            m->untested++;
            continue;
        }
        if (!ch[i].tested) {
            passes++;
            if ((rc = test_batch(mi, c, ch, i, nch, errmsg)) < 0)
                break;
        }
        bool by_construction = ch[i].affinity == 3 && b->ka == PI_THREAD;   /* intv@P */
        if (!ch[i].chance.kept && !by_construction) {
            m->dropped = pinfer_xrealloc(m->dropped, (m->ndropped + 1) * sizeof *m->dropped);
            m->dropped[m->ndropped++] = (pi_dropped){ .start = b->a, .end = b->b, .kstart = b->ka, .kend = b->kb,
                                                      .matched = b->matched, .chance = ch[i].chance };
            continue;
        }
        m->types[b->a].used = m->types[b->b].used = true;
        m->iv = pinfer_xrealloc(m->iv, (m->niv + 1) * sizeof *m->iv);
        pi_interval *iv = &m->iv[m->niv++];
        memset(iv, 0, sizeof *iv);
        iv->start = b->a;
        iv->end = b->b;
        iv->kstart = b->ka;
        iv->kend = b->kb;
        iv->affinity = ch[i].affinity;
        iv->max_depth = b->max_depth;
        iv->nested = b->max_depth > 1;
        iv->matched = b->matched;
        iv->chance = ch[i].chance;
        iv->reg.attr = -1;
        if (b->ka != PI_THREAD) {
            /* would the thread id have paired them as well? */
            for (uint32_t k = 0; k < n; k++)
                if (c[k].a == b->a && c[k].b == b->b && c[k].ka == PI_THREAD) {
                    iv->thread_tried = true;
                    iv->thread_too = c[k].valid ? c[k].matched : 0;
                }
        }
    }
    free(ch);
    return rc;
}

/* ---- pass 3: statistics of the chosen intervals ------------------------------------- */

#define NSPLIT ((int)(2 * PI_MAX_ATTRS))   /* split candidates: start attributes, then end attributes */

typedef struct mom {
    double n, sx, sy, sxx, syy, sxy;
} mom;

typedef struct ivstats {
    double n, sum, sumsq, min, max;
    double gn[NSPLIT][PI_MAX_VALUES], gs[NSPLIT][PI_MAX_VALUES], gss[NSPLIT][PI_MAX_VALUES];
    bool gbad[NSPLIT];               /* a value outside the attribute's known ones, or missing */
    mom reg[NSPLIT + 1][PI_MAX_VALUES][PI_MAX_ATTRS];   /* [split or NSPLIT: none][group][x] */
    uint32_t npath;                  /* watched event types */
    uint32_t path_type[PI_MAX_PATHS];
    int path_key[PI_MAX_PATHS];
    double pn[PI_MAX_PATHS][2], ps[PI_MAX_PATHS][2], pss[PI_MAX_PATHS][2];   /* [type][inside?] */
    mom preg[PI_MAX_PATHS][2][PI_MAX_ATTRS];
} ivstats;

typedef struct stats_ctx {
    pi_model *m;
    ivstats *st;
} stats_ctx;

static int group_of(const pi_attr *a, const double *vals, uint32_t nvals, int i)
{
    if ((uint32_t)i >= nvals || a->many || a->nvals < 2 || !a->integral)
        return -1;
    for (uint32_t k = 0; k < a->nvals; k++)
        if (a->vals[k] == vals[i])
            return (int)k;
    return -1;
}

static void mom_add(mom *o, double x, double y)
{
    o->n++;
    o->sx += x;
    o->sy += y;
    o->sxx += x * x;
    o->syy += y * y;
    o->sxy += x * y;
}

static void on_stats_match(void *ctx, uint32_t id, const open_entry *s, const log_record *e, bool others)
{
    (void)others;
    stats_ctx *sc = ctx;
    pi_interval *iv = &sc->m->iv[id];
    ivstats *st = &sc->st[id];
    const pi_type *A = &sc->m->types[iv->start], *B = &sc->m->types[iv->end];
    double d = (double)(e->ts - s->ts);
    if (st->n == 0 || d < st->min)
        st->min = d;
    if (st->n == 0 || d > st->max)
        st->max = d;
    st->n++;
    st->sum += d;
    st->sumsq += d * d;
    int group[NSPLIT + 1];
    for (int k = 0; k < NSPLIT; k++) {
        bool end = k >= (int)PI_MAX_ATTRS;
        int i = end ? k - (int)PI_MAX_ATTRS : k;
        group[k] = end ? group_of(&B->attr[i], e->values, e->nvalues, i) : group_of(&A->attr[i], s->vals, s->nvals, i);
        if (group[k] < 0) {
            st->gbad[k] = true;
            continue;
        }
        st->gn[k][group[k]]++;
        st->gs[k][group[k]] += d;
        st->gss[k][group[k]] += d * d;
    }
    group[NSPLIT] = 0;
    for (uint32_t p = 0; p < st->npath; p++) {
        int in = (int)((s->seen >> p) & 1);
        st->pn[p][in]++;
        st->ps[p][in] += d;
        st->pss[p][in] += d * d;
    }
    for (uint32_t x = 0; x < s->nvals; x++) {
        if (!A->attr[x].many || !isfinite(s->vals[x]))
            continue;
        for (int k = 0; k <= NSPLIT; k++)
            if (group[k] >= 0)
                mom_add(&st->reg[k][group[k]][x], s->vals[x], d);
        for (uint32_t p = 0; p < st->npath; p++)
            mom_add(&st->preg[p][(s->seen >> p) & 1][x], s->vals[x], d);
    }
}

/* The event types interval `iv` watches for the path split: every type
 * seen min_count times but its own start and end that carries its key (the
 * thread, or an attribute at the position of the end's key or the start's). */
static void watch_types(const pi_model *m, const pi_interval *iv, ivstats *st, uint64_t min_count)
{
    const pi_attr *ka = iv->kstart == PI_THREAD ? NULL : &m->types[iv->start].attr[iv->kstart];
    for (uint32_t t = 0; t < m->ntypes && st->npath < PI_MAX_PATHS; t++) {
        const pi_type *C = &m->types[t];
        if (t == iv->start || t == iv->end || C->count < min_count)
            continue;
        int key = PI_THREAD;
        if (ka) {
            if (C->nvalues > (uint32_t)iv->kend && keyable(ka, &C->attr[iv->kend]))
                key = iv->kend;
            else if (C->nvalues > (uint32_t)iv->kstart && keyable(ka, &C->attr[iv->kstart]))
                key = iv->kstart;
            else
                continue;
        }
        st->path_type[st->npath] = t;
        st->path_key[st->npath++] = key;
    }
}

static double r2_of(const mom *o)
{
    double vx = o->n * o->sxx - o->sx * o->sx, vy = o->n * o->syy - o->sy * o->sy;
    double cxy = o->n * o->sxy - o->sx * o->sy;
    if (o->n < 4 || vx <= 1e-12 * fabs(o->n * o->sxx) || vy <= 0)
        return -1;
    return cxy * cxy / (vx * vy);
}

/* The share of the variance (total sst over n intervals) that k groups
 * explain when their means differ by ssb, adjusted for the number of groups
 * (epsilon squared: many small groups explain much by chance). */
static double explained(double ssb, double sst, double n, uint32_t k)
{
    if (n <= k || sst <= 0)
        return 0;
    double msw = (sst - ssb) / (n - k), mst = sst / (n - 1);
    return 1 - msw / mst;
}

/* Decide the split and the regression of one interval from its statistics. */
static void conclude(pi_model *m, pi_interval *iv, const ivstats *st, uint64_t min_count)
{
    const pi_type *A = &m->types[iv->start], *B = &m->types[iv->end];
    iv->mean = st->n ? st->sum / st->n : 0;
    iv->min = st->min;
    iv->max = st->max;
    double sst = st->sumsq - st->sum * st->sum / st->n;
    int best = -1;
    double best_eta = PI_SPLIT_ETA2;
    for (int k = 0; k < NSPLIT && sst > 0; k++) {
        bool end = k >= (int)PI_MAX_ATTRS;
        int i = end ? k - (int)PI_MAX_ATTRS : k;
        const pi_attr *a = end ? &B->attr[i] : &A->attr[i];
        if (st->gbad[k] || a->many || a->nvals < 2 || (!end && i == iv->kstart) || (end && i == iv->kend))
            continue;
        double ssb = 0;
        bool ok = true;
        for (uint32_t g = 0; g < a->nvals; g++) {
            if (st->gn[k][g] < (double)min_count || st->gn[k][g] < 2) {
                ok = false;
                break;
            }
            double mg = st->gs[k][g] / st->gn[k][g];
            ssb += st->gn[k][g] * (mg - iv->mean) * (mg - iv->mean);
        }
        double e2 = ok ? explained(ssb, sst, st->n, a->nvals) : 0;
        if (e2 > best_eta) {
            best_eta = e2;
            best = k;
        }
    }
    int best_path = -1;
    for (uint32_t p = 0; p < st->npath && sst > 0; p++) {
        if (st->pn[p][0] < (double)min_count || st->pn[p][1] < (double)min_count || st->pn[p][0] < 2 ||
            st->pn[p][1] < 2)
            continue;
        double ssb = 0;
        for (int g = 0; g < 2; g++) {
            double mg = st->ps[p][g] / st->pn[p][g];
            ssb += st->pn[p][g] * (mg - iv->mean) * (mg - iv->mean);
        }
        double e2 = explained(ssb, sst, st->n, 2);
        if (e2 > best_eta) {
            best_eta = e2;
            best_path = (int)p;
        }
    }
    uint32_t ng = 1;
    int rk = NSPLIT;
    iv->split.inside = -1;
    const mom(*regm)[PI_MAX_ATTRS] = st->reg[NSPLIT];
    if (best_path >= 0) {
        pi_split *sp = &iv->split;
        sp->inside = (int)st->path_type[best_path];
        sp->inside_key = st->path_key[best_path];
        m->types[sp->inside].watched = true;
        sp->ngroups = ng = 2;
        sp->eta2 = best_eta;
        for (int g = 0; g < 2; g++) {
            sp->value[g] = g;
            sp->n[g] = (uint64_t)st->pn[best_path][g];
            sp->mean[g] = st->ps[best_path][g] / st->pn[best_path][g];
        }
        regm = st->preg[best_path];
        best = -1;
    }
    if (best >= 0) {
        pi_split *sp = &iv->split;
        sp->end = best >= (int)PI_MAX_ATTRS;
        sp->attr = sp->end ? best - (int)PI_MAX_ATTRS : best;
        const pi_attr *a = sp->end ? &B->attr[sp->attr] : &A->attr[sp->attr];
        sp->ngroups = a->nvals;
        sp->eta2 = best_eta;
        for (uint32_t g = 0; g < a->nvals; g++) {
            sp->value[g] = a->vals[g];
            sp->n[g] = (uint64_t)st->gn[best][g];
            sp->mean[g] = st->gs[best][g] / st->gn[best][g];
        }
        ng = a->nvals;
        rk = best;
        regm = st->reg[rk];
    }
    /* the regression: the start attribute that best explains the durations in every group */
    double best_r2 = PI_REGRESS_R2;
    for (uint32_t x = 0; x < PI_MAX_ATTRS; x++) {
        if (!A->attr[x].many || (int)x == iv->kstart)
            continue;
        double tot = 0, w = 0;
        bool ok = true;
        for (uint32_t g = 0; g < ng && ok; g++) {
            double r2 = r2_of(&regm[g][x]);
            ok = r2 >= 0;
            tot += r2 * regm[g][x].n;
            w += regm[g][x].n;
        }
        if (!ok || w < st->n)      /* some intervals lack the attribute */
            continue;
        if (tot / w > best_r2) {
            best_r2 = tot / w;
            iv->reg.attr = (int)x;
            iv->reg.r2_all = tot / w;
            for (uint32_t g = 0; g < ng; g++) {
                const mom *o = &regm[g][x];
                iv->reg.r2[g] = r2_of(o);
                iv->reg.slope[g] = (o->n * o->sxy - o->sx * o->sy) / (o->n * o->sxx - o->sx * o->sx);
            }
        }
    }
}

/* ---- the whole ------------------------------------------------------------------------ */

pi_model *pi_infer(int fd, const char *logname, const pi_options *opt, char **errmsg)
{
    *errmsg = NULL;
    pi_model *m = xcalloc(1, sizeof *m);
    m->logname = logname;
    miner mi = { .m = m, .opt = opt };
    mi.r = log_reader_open(fd, false, logname, opt->warn, opt->ctx, errmsg);
    if (!mi.r)
        goto out_fail;
    log_reader_warn_once(mi.r, true);
    const log_header *h = log_reader_header(mi.r);
    m->tick_ns = h->tick_ns;
    for (size_t i = 0; i < h->nfields; i++)
        if (strcmp(h->fields[i].key, "program") == 0)
            m->program = strdup(h->fields[i].value);

    if (pass_types(&mi, errmsg) < 0)
        goto out_fail;
    m->records = log_reader_nrecords(mi.r);
    m->malformed = log_reader_nmalformed(mi.r);
    for (uint32_t t = 0; t < m->ntypes; t++)
        for (uint32_t i = 0; i < PI_MAX_ATTRS; i++)
            qsort(m->types[t].attr[i].vals, m->types[t].attr[i].nvals, sizeof(double), cmp_double);

    uint32_t nc = 0;
    cand *c = make_candidates(m, opt->min_count, &nc);
    m->candidates = nc;
    if (nc) {
        cand_index ci;
        index_candidates(&ci, c, nc, m->ntypes);
        int rc = rewind_or_fail(mi.r, errmsg);
        if (rc == 0)
            rc = pass_pairs(&mi, c, &ci, NULL, false, on_candidate_match, c, errmsg);
        ci_free(&ci, m->ntypes);
        if (rc == 0)
            rc = choose(&mi, c, nc, opt->min_count, errmsg);
        if (rc < 0) {
            free(c);
            goto out_fail;
        }
    }
    free(c);

    if (m->niv) {
        /* pass 3: the chosen intervals as candidates of their own */
        cand *k = xcalloc(m->niv, sizeof *k);
        for (uint32_t i = 0; i < m->niv; i++)
            k[i] = (cand){ .a = m->iv[i].start, .b = m->iv[i].end, .ka = m->iv[i].kstart, .kb = m->iv[i].kend };
        cand_index ci;
        index_candidates(&ci, k, m->niv, m->ntypes);
        stats_ctx sc = { m, xcalloc(m->niv, sizeof(ivstats)) };
        watch_index wi = { xcalloc(m->ntypes, sizeof *wi.w), xcalloc(m->ntypes, sizeof *wi.n) };
        for (uint32_t i = 0; i < m->niv; i++) {
            watch_types(m, &m->iv[i], &sc.st[i], opt->min_count);
            for (uint32_t p = 0; p < sc.st[i].npath; p++) {
                uint32_t t = sc.st[i].path_type[p];
                wi.w[t] = pinfer_xrealloc(wi.w[t], (wi.n[t] + 1) * sizeof **wi.w);
                wi.w[t][wi.n[t]++] = (watch){ i, p, sc.st[i].path_key[p] };
            }
        }
        int rc = rewind_or_fail(mi.r, errmsg);
        if (rc == 0)
            rc = pass_pairs(&mi, k, &ci, &wi, true, on_stats_match, &sc, errmsg);
        ci_free(&ci, m->ntypes);
        for (uint32_t t = 0; t < m->ntypes; t++)
            free(wi.w[t]);
        free(wi.w);
        free(wi.n);
        free(k);
        if (rc < 0) {
            free(sc.st);
            goto out_fail;
        }
        for (uint32_t i = 0; i < m->niv; i++)
            conclude(m, &m->iv[i], &sc.st[i], opt->min_count);
        free(sc.st);
    }
    log_reader_free(mi.r);
    free(mi.type_of);
    return m;

out_fail:
    log_reader_free(mi.r);
    free(mi.type_of);
    pi_model_free(m);
    if (!*errmsg)
        *errmsg = strdup("cannot read the log");
    return NULL;
}

void pi_model_free(pi_model *m)
{
    if (!m)
        return;
    for (uint32_t t = 0; t < m->ntypes; t++)
        free(m->types[t].name);
    for (uint32_t i = 0; i < m->niv; i++)
        free(m->iv[i].name);
    free(m->types);
    free(m->iv);
    free(m->dropped);
    free((char *)m->program);
    free(m);
}
