/* value.c — PSpec run-time values: reference counting, events and intervals,
 * mappings, and the operators of appendix A (Figures 8 and 9).
 *
 * Aggregate accumulators live in value_acc.c, printing in value_fmt.c; both
 * use only the interface in value.h.
 *
 * Mappings are insertion-ordered dense arrays of (key, value) plus, once they
 * outgrow MAP_SMALL keys, an open-addressing index of entry numbers (the
 * layout of CPython's dicts). There is no deletion, so the index never holds
 * tombstones. A mapping nobody else references (refs == 1) is updated in
 * place; a shared one is copied first.
 */
#include "value.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const pv_binop_spelling[PV_OP__COUNT] = {
#define X(name, spelling) [PV_OP_##name] = spelling,
    PV_BINOPS(X)
#undef X
};

/* ---- events and intervals ------------------------------------------------ */

/* Events retained by open intervals come and go once per interval: released
 * ones of small capacity are kept on free lists (linked through `type`).
 * The free lists are per thread (pspec.h, "Threads"): one thread's check
 * never touches another's, and an element released on another thread than
 * the one that made it simply joins that thread's list. pv_pools_trim
 * empties the calling thread's lists; the API's entry points call it as they
 * return, so a thread that ends after its last pspec call leaves nothing. */
enum { EV_POOL_SIZES = 16, EV_POOL_KEEP = 256 };
static _Thread_local pv_event *ev_pool[EV_POOL_SIZES];
static _Thread_local uint32_t ev_pool_n[EV_POOL_SIZES];

pv_event *pv_event_alloc(uint32_t cap)
{
    pv_event *e;
    if (cap < EV_POOL_SIZES && ev_pool[cap]) {
        e = ev_pool[cap];
        ev_pool[cap] = (pv_event *)(uintptr_t)e->type;
        ev_pool_n[cap]--;
    } else {
        e = ps_malloc(sizeof(*e) + (size_t)cap * sizeof(double));
        e->pool = cap < EV_POOL_SIZES ? (uint8_t)(cap + 1) : 0;
    }
    e->refs = 1;
    e->nattr = cap;
    return e;
}

pv_event *pv_event_new(const void *type, uint32_t nattr)
{
    pv_event *e = pv_event_alloc(nattr);
    uint8_t pool = e->pool;
    memset(e, 0, sizeof(*e));
    e->pool = pool;
    e->refs = 1;
    e->nattr = nattr;
    e->type = type;
    for (uint32_t i = 0; i < nattr; i++)
        e->attr[i] = PV_ATTR_UNDEF;
    return e;
}

/* Closed intervals come and go by the million: keep a few freed ones of each
 * small size for reuse instead of returning them to malloc. */
enum { IV_POOL_SIZES = 16, IV_POOL_KEEP = 64 };
static _Thread_local pv_interval *iv_pool[IV_POOL_SIZES];
static _Thread_local uint32_t iv_pool_n[IV_POOL_SIZES];

pv_interval *pv_interval_new(const void *type, uint32_t nmetric)
{
    pv_interval *iv;
    if (nmetric < IV_POOL_SIZES && iv_pool[nmetric]) {
        iv = iv_pool[nmetric];
        iv_pool[nmetric] = (pv_interval *)iv->start;
        iv_pool_n[nmetric]--;
        iv->uid = 0;
        iv->lost = 0;
        iv->start = iv->end = NULL;
        for (uint32_t i = 0; i < nmetric; i++)
            iv->metric[i].kind = PV_UNDEF;
    } else {
        /* calloc: every metric starts as kind 0, which is PV_UNDEF. */
        iv = ps_calloc(1, sizeof(*iv) + (size_t)nmetric * sizeof(pv));
    }
    iv->refs = 1;
    iv->nmetric = nmetric;
    iv->type = type;
    return iv;
}

void pv_event_release(pv_event *e)
{
    if (!e || --e->refs > 0)
        return;
    uint32_t c = e->pool;
    if (c && ev_pool_n[c - 1] < EV_POOL_KEEP) {
        e->type = ev_pool[c - 1];
        ev_pool[c - 1] = e;
        ev_pool_n[c - 1]++;
        return;
    }
    free(e);
}

void pv_interval_release(pv_interval *iv)
{
    if (!iv || --iv->refs > 0)
        return;
    for (uint32_t i = 0; i < iv->nmetric; i++)
        pv_free(iv->metric[i]);
    pv_event_release(iv->start);
    pv_event_release(iv->end);
    uint32_t n = iv->nmetric;
    if (n < IV_POOL_SIZES && iv_pool_n[n] < IV_POOL_KEEP) {
        iv->start = (pv_event *)iv_pool[n];     /* the free list's link */
        iv_pool[n] = iv;
        iv_pool_n[n]++;
        return;
    }
    free(iv);
}

void pv_pools_trim(void)
{
    for (unsigned c = 0; c < EV_POOL_SIZES; c++) {
        while (ev_pool[c]) {
            pv_event *e = ev_pool[c];
            ev_pool[c] = (pv_event *)(uintptr_t)e->type;
            free(e);
        }
        ev_pool_n[c] = 0;
    }
    for (unsigned n = 0; n < IV_POOL_SIZES; n++) {
        while (iv_pool[n]) {
            pv_interval *iv = iv_pool[n];
            iv_pool[n] = (pv_interval *)iv->start;
            free(iv);
        }
        iv_pool_n[n] = 0;
    }
}

pv pv_event_val(pv_event *e)
{
    if (!e)
        return pv_undef();
    pv r = {.kind = PV_EVENT, .ev = e};
    return r;
}

pv pv_interval_val(pv_interval *iv)
{
    if (!iv)
        return pv_undef();
    pv r = {.kind = PV_INTERVAL, .iv = iv};
    return r;
}

/* ---- triples ---------------------------------------------------------------- */

pv pv_timestamp(int64_t ts)
{
    pv r = {.kind = PV_TRIPLE, .t = {(double)ts, 1, 0}};
    return r;
}

/* A number as the triple [n,0,0]; a triple as itself. Others: false. */
static inline bool as_triple(pv a, pv_triple *t)
{
    if (a.kind == PV_TRIPLE) {
        *t = a.t;
        return true;
    }
    if (a.kind == PV_NUM) {
        t->v = a.num;
        t->p = t->m = 0;
        return true;
    }
    return false;
}

/* A triple whose range is the smallest containing f's values lo, fv, hi, with
 * favoured value fv (the endpoint rule behind every Figure 8 definition; it
 * includes fv itself so p and m can never come out negative). A NaN endpoint
 * (inf * 0 after an overflow) gives UNDEFINED: fmin/fmax would drop it. */
static pv triple_span(double fv, double lo, double hi)
{
    if (isnan(lo) || isnan(hi))
        return pv_undef();
    double top = fmax(fv, fmax(lo, hi));
    double bot = fmin(fv, fmin(lo, hi));
    return pv_triple_make(fv, top - fv, fv - bot);
}

static pv triple_mul(pv_triple t, pv_triple u)
{
    double tl = t.v - t.m, th = t.v + t.p, ul = u.v - u.m, uh = u.v + u.p;
    double a = tl * ul, b = tl * uh, c = th * ul, d = th * uh;
    double v = t.v * u.v;
    return triple_span(v, fmin(fmin(a, b), fmin(c, d)), fmax(fmax(a, b), fmax(c, d)));
}

/* t / u = t * 1/u (Figure 8), UNDEFINED when 0 lies in u's range. The endpoint
 * quotients are taken directly, which is the same range with less rounding. */
static pv triple_div(pv_triple t, pv_triple u)
{
    double ul = u.v - u.m, uh = u.v + u.p;
    if (ul <= 0 && uh >= 0)
        return pv_undef();
    double tl = t.v - t.m, th = t.v + t.p;
    double a = tl / ul, b = tl / uh, c = th / ul, d = th / uh;
    return triple_span(t.v / u.v, fmin(fmin(a, b), fmin(c, d)), fmax(fmax(a, b), fmax(c, d)));
}

/* Figure 9. */
static pv triple_rel(pv_binop op, pv_triple t, pv_triple u)
{
    bool eq = t.v - t.m <= u.v + u.p && t.v + t.p >= u.v - u.m;
    bool lt = t.v + t.p < u.v - u.m;
    bool gt = t.v - t.m > u.v + u.p;
    switch (op) {
    case PV_OP_EQ: return pv_bool(eq);
    case PV_OP_NE: return pv_bool(!eq);
    case PV_OP_LT: return pv_bool(lt);
    case PV_OP_LE: return pv_bool(eq || lt);
    case PV_OP_GT: return pv_bool(gt);
    case PV_OP_GE: return pv_bool(eq || gt);
    default: return pv_undef();
    }
}

/* log base b of x, exact for the usual bases; NaN when undefined. */
static double log_base(double b, double x)
{
    if (!(b > 0) || b == 1 || !(x > 0))
        return NAN;
    if (b == 2)
        return log2(x);
    if (b == 10)
        return log10(x);
    return log(x) / log(b);
}

/* log(b, t): Figure 8 asks for t.v - t.m > 0. */
static pv triple_log(double b, pv_triple t)
{
    double lo = t.v - t.m;
    if (!(lo > 0))
        return pv_undef();
    return triple_span(log_base(b, t.v), log_base(b, lo), log_base(b, t.v + t.p));
}

/* power(b, t) = b^t over t's range. A base <= 0 only makes sense for a
 * zero-width exponent (the range would hold non-real values otherwise). */
static pv triple_pow_exp(double b, pv_triple t)
{
    if (!(b > 0) && (t.p != 0 || t.m != 0))
        return pv_undef();
    return triple_span(pow(b, t.v), pow(b, t.v - t.m), pow(b, t.v + t.p));
}

/* power(t, b) = t^b over t's range. Figure 8 leaves a range reaching 0 or
 * below unspecified; we answer where x^b is continuous there (integral b >= 0)
 * and give UNDEFINED otherwise. */
static pv triple_pow_base(pv_triple t, double b)
{
    double lo = t.v - t.m, hi = t.v + t.p, fv = pow(t.v, b);
    if (b == 0)
        return pv_triple_make(1, 0, 0);
    if (lo > 0 || (t.p == 0 && t.m == 0))
        return triple_span(fv, pow(lo, b), pow(hi, b));
    if (!(b >= 0) || b != trunc(b))
        return pv_undef();
    double flo = pow(lo, b), fhi = pow(hi, b);
    /* Even powers dip to 0 inside a range that straddles 0. */
    if (fmod(b, 2) == 0 && hi >= 0)
        return triple_span(fv, fmin(0, fmin(flo, fhi)), fmax(flo, fhi));
    return triple_span(fv, flo, fhi);
}

static pv triple_binary(pv_binop op, pv_triple t, pv_triple u)
{
    switch (op) {
    case PV_OP_ADD: return pv_triple_make(t.v + u.v, t.p + u.p, t.m + u.m);
    case PV_OP_SUB: return pv_triple_make(t.v - u.v, t.p + u.m, t.m + u.p);
    case PV_OP_MUL: return triple_mul(t, u);
    case PV_OP_DIV: return triple_div(t, u);
    case PV_OP_EQ:
    case PV_OP_NE:
    case PV_OP_LT:
    case PV_OP_LE:
    case PV_OP_GT:
    case PV_OP_GE: return triple_rel(op, t, u);
    case PV_OP_MIN: {
        double v = fmin(t.v, u.v);
        return pv_triple_make(v, fmin(t.v + t.p, u.v + u.p) - v, v - fmin(t.v - t.m, u.v - u.m));
    }
    case PV_OP_MAX: {
        double v = fmax(t.v, u.v);
        return pv_triple_make(v, fmax(t.v + t.p, u.v + u.p) - v, v - fmax(t.v - t.m, u.v - u.m));
    }
    default: return pv_undef();      /* div, mod, logic: not defined on triples */
    }
}

/* ---- numbers ------------------------------------------------------------------- */

static inline bool integral(double x)
{
    return isfinite(x) && x == trunc(x);
}

/* A finite result as a number, anything else (overflow, NaN) UNDEFINED. */
static inline pv num_result(double x)
{
    return isfinite(x) ? pv_num(x) : pv_undef();
}

/* Modula-3 DIV: floor division of integral values. fmod is exact, so
 * (a - r) / b is exact for every |a| < 2^53. */
static pv num_idiv(double a, double b)
{
    if (!integral(a) || !integral(b) || b == 0)
        return pv_undef();
    double r = fmod(a, b);
    double q = (a - r) / b;
    if (r != 0 && (r < 0) != (b < 0))
        q -= 1;
    return num_result(q + 0.0);
}

/* Modula-3 MOD: a - b * (a DIV b); the result has the sign of b. */
static pv num_mod(double a, double b)
{
    if (!integral(a) || !integral(b) || b == 0)
        return pv_undef();
    double r = fmod(a, b);
    if (r != 0 && (r < 0) != (b < 0))
        r += b;
    return pv_num(r + 0.0);
}

/* The operator table for two numbers: the evaluator's hot path. */
static inline pv num_binary(pv_binop op, double a, double b)
{
    switch (op) {
    case PV_OP_ADD: return num_result(a + b);
    case PV_OP_SUB: return num_result(a - b);
    case PV_OP_MUL: return num_result(a * b);
    case PV_OP_DIV: return b == 0 ? pv_undef() : num_result(a / b);
    case PV_OP_IDIV: return num_idiv(a, b);
    case PV_OP_MOD: return num_mod(a, b);
    case PV_OP_EQ: return pv_bool(a == b);
    case PV_OP_NE: return pv_bool(a != b);
    case PV_OP_LT: return pv_bool(a < b);
    case PV_OP_LE: return pv_bool(a <= b);
    case PV_OP_GT: return pv_bool(a > b);
    case PV_OP_GE: return pv_bool(a >= b);
    case PV_OP_MIN: return pv_num(fmin(a, b));
    case PV_OP_MAX: return pv_num(fmax(a, b));
    case PV_OP_POWER: return num_result(pow(a, b));
    case PV_OP_LOG: return num_result(log_base(a, b));
    default: return pv_undef();      /* & | => on numbers */
    }
}

static pv bool_binary(pv_binop op, bool a, bool b)
{
    switch (op) {
    case PV_OP_EQ: return pv_bool(a == b);
    case PV_OP_NE: return pv_bool(a != b);
    case PV_OP_AND: return pv_bool(a && b);
    case PV_OP_OR: return pv_bool(a || b);
    case PV_OP_IMPLIES: return pv_bool(!a || b);
    default: return pv_undef();
    }
}

/* ---- mappings: storage ------------------------------------------------------- */

#define MAP_SMALL 8     /* up to this many keys: linear search, no index */

struct pv_map {
    uint32_t refs;      /* references; in-place updates only when 1 */
    uint32_t count;     /* entries in use: 0..count-1, in insertion order */
    uint32_t cap;       /* entries allocated */
    uint32_t mask;      /* index slots - 1 (a power of two - 1); 0 = no index */
    double *keys;       /* key of each entry (integral, never -0) */
    pv *vals;           /* value of each entry (owned) */
    uint32_t *slot;     /* open-addressing index: entry number + 1, 0 = empty */
    pv inl[];           /* initial storage: cap values, then cap keys */
};

static pv_map *map_new(uint32_t cap)
{
    pv_map *m = ps_malloc(sizeof(*m) + (size_t)cap * (sizeof(pv) + sizeof(double)));
    m->refs = 1;
    m->count = 0;
    m->cap = cap;
    m->mask = 0;
    m->vals = m->inl;
    m->keys = (double *)(m->inl + cap);
    m->slot = NULL;
    return m;
}

static void map_destroy(pv_map *m)
{
    for (uint32_t i = 0; i < m->count; i++)
        pv_free(m->vals[i]);
    if (m->vals != m->inl)
        free(m->vals);          /* keys share that block */
    free(m->slot);
    free(m);
}

static inline pv map_val(pv_map *m)
{
    pv r = {.kind = PV_MAP, .map = m};
    return r;
}

/* fmix64 of MurmurHash3: integral doubles have long runs of zero bits. */
static inline uint32_t key_hash(double k)
{
    uint64_t h;
    memcpy(&h, &k, sizeof(h));
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return (uint32_t)h;
}

/* The entry number holding key, or -1. */
static int64_t map_find(const pv_map *m, double key)
{
    if (!m->mask) {
        for (uint32_t i = 0; i < m->count; i++)
            if (m->keys[i] == key)
                return i;
        return -1;
    }
    for (uint32_t s = key_hash(key) & m->mask;; s = (s + 1) & m->mask) {
        uint32_t e = m->slot[s];
        if (e == 0)
            return -1;
        if (m->keys[e - 1] == key)
            return e - 1;
    }
}

static void index_put(pv_map *m, uint32_t entry)
{
    uint32_t s = key_hash(m->keys[entry]) & m->mask;
    while (m->slot[s])
        s = (s + 1) & m->mask;
    m->slot[s] = entry + 1;
}

/* (Re)build the index for the current capacity: at most half full. */
static void index_rebuild(pv_map *m)
{
    uint32_t n = 16;
    while (n < 2 * (uint64_t)m->cap)
        n *= 2;
    free(m->slot);
    m->slot = ps_calloc(n, sizeof(uint32_t));
    m->mask = n - 1;
    for (uint32_t i = 0; i < m->count; i++)
        index_put(m, i);
}

static void map_grow(pv_map *m)
{
    uint32_t cap = m->cap < 4 ? 4 : m->cap * 2;
    pv *vals = ps_malloc((size_t)cap * (sizeof(pv) + sizeof(double)));
    double *keys = (double *)(vals + cap);
    memcpy(vals, m->vals, m->count * sizeof(pv));
    memcpy(keys, m->keys, m->count * sizeof(double));
    if (m->vals != m->inl)
        free(m->vals);
    m->vals = vals;
    m->keys = keys;
    m->cap = cap;
    if (cap > MAP_SMALL)
        index_rebuild(m);
}

/* Append a key known to be absent (takes v). */
static void map_append(pv_map *m, double key, pv v)
{
    if (m->count == m->cap)
        map_grow(m);
    uint32_t i = m->count++;
    m->keys[i] = key;
    m->vals[i] = v;
    if (m->mask)
        index_put(m, i);
}

/* A private copy of m (values shared by reference). */
static pv_map *map_clone(const pv_map *m)
{
    pv_map *c = map_new(m->count);
    for (uint32_t i = 0; i < m->count; i++) {
        c->keys[i] = m->keys[i];
        c->vals[i] = pv_copy(m->vals[i]);
    }
    c->count = m->count;
    if (c->cap > MAP_SMALL)
        index_rebuild(c);
    return c;
}

/* m, ready to be written: itself when unshared, else a copy (m's reference
 * is passed on to the result either way). */
static pv_map *map_own(pv_map *m)
{
    if (m->refs == 1)
        return m;
    pv_map *c = map_clone(m);
    m->refs--;                  /* cannot reach 0: it was shared */
    return c;
}

/* The mapping key a value denotes: integral numbers, or the favoured value of
 * a triple; -0 becomes 0. Consumes nothing. */
static bool key_of(pv k, double *out)
{
    double x;
    if (k.kind == PV_NUM)
        x = k.num;
    else if (k.kind == PV_TRIPLE)
        x = k.t.v;
    else
        return false;
    if (!integral(x))
        return false;
    *out = x + 0.0;
    return true;
}

/* ---- mappings: interface ------------------------------------------------------- */

pv pv_map_empty(void)
{
    return map_val(map_new(0));
}

pv pv_map_single(pv key, pv v)
{
    double k;
    bool ok = key_of(key, &k);
    pv_free(key);
    if (!ok) {
        pv_free(v);
        return pv_undef();
    }
    pv_map *m = map_new(1);
    map_append(m, k, v);
    return map_val(m);
}

pv pv_map_apply(pv m, pv key)
{
    double k;
    pv r = pv_undef();
    if (m.kind == PV_MAP && key_of(key, &k)) {
        int64_t i = map_find(m.map, k);
        if (i >= 0)
            r = pv_copy(m.map->vals[i]);
    }
    pv_free(m);
    pv_free(key);
    return r;
}

pv pv_map_mapped(pv m, pv key)
{
    double k;
    pv r = pv_undef();
    if (m.kind == PV_MAP && key_of(key, &k))
        r = pv_bool(map_find(m.map, k) >= 0);
    pv_free(m);
    pv_free(key);
    return r;
}

pv pv_map_set(pv m, double key, pv v)
{
    if (m.kind != PV_MAP || !integral(key)) {
        pv_free(m);
        pv_free(v);
        return pv_undef();
    }
    key += 0.0;
    pv_map *w = map_own(m.map);
    int64_t i = map_find(w, key);
    if (i >= 0) {
        pv_free(w->vals[i]);
        w->vals[i] = v;
    } else {
        map_append(w, key, v);
    }
    return map_val(w);
}

uint32_t pv_map_count(const pv *m)
{
    return m->kind == PV_MAP ? m->map->count : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

uint32_t pv_map_keys_sorted(const pv *m, double **keys_out)
{
    uint32_t n = pv_map_count(m);
    if (n == 0) {
        *keys_out = NULL;
        return 0;
    }
    double *keys = ps_malloc(n * sizeof(double));
    memcpy(keys, m->map->keys, n * sizeof(double));
    qsort(keys, n, sizeof(double), cmp_double);
    *keys_out = keys;
    return n;
}

const pv *pv_map_lookup(const pv *m, double key)
{
    if (m->kind != PV_MAP)
        return NULL;
    int64_t i = map_find(m->map, key + 0.0);
    return i >= 0 ? &m->map->vals[i] : NULL;
}

/* a op b on two mappings (both consumed): union of the domains, op applied to
 * the values of common keys, left operand's value on the left. The unshared
 * operand is updated in place; values of an unshared right operand are moved
 * rather than copied. */
static pv map_binary(pv_binop op, pv a, pv b)
{
    pv_map *dst, *src;
    bool dst_left = true;
    if (a.map->refs == 1) {
        dst = a.map;
        src = b.map;
    } else if (b.map->refs == 1) {
        dst = b.map;
        src = a.map;
        dst_left = false;
    } else {
        dst = map_own(a.map);
        src = b.map;
    }
    bool steal = src->refs == 1;
    for (uint32_t i = 0; i < src->count; i++) {
        pv sv = src->vals[i];
        if (steal)
            src->vals[i] = pv_undef();
        else
            sv = pv_copy(sv);
        int64_t j = map_find(dst, src->keys[i]);
        if (j < 0)
            map_append(dst, src->keys[i], sv);
        else if (dst_left)
            dst->vals[j] = pv_binary(op, dst->vals[j], sv);
        else
            dst->vals[j] = pv_binary(op, sv, dst->vals[j]);
    }
    pv_free(map_val(src));
    return map_val(dst);
}

/* ---- operators --------------------------------------------------------------------- */

/* pv_binary for everything but two numbers; kept out of line so the number
 * path does not pay for its stack frame. */
static __attribute__((noinline)) pv binary_general(pv_binop op, pv a, pv b)
{
    pv r = pv_undef();
    pv_triple t, u;
    if (a.kind == PV_UNDEF || b.kind == PV_UNDEF) {
        /* r stays UNDEFINED */
    } else if (a.kind == PV_BOOL && b.kind == PV_BOOL) {
        r = bool_binary(op, a.b, b.b);
    } else if (op == PV_OP_LOG) {
        /* log(num, triple): the number is the base (Figure 8). */
        if (a.kind == PV_NUM && b.kind == PV_TRIPLE)
            r = triple_log(a.num, b.t);
    } else if (op == PV_OP_POWER) {
        /* power(num, triple) and power(triple, num) (Figure 8). */
        if (a.kind == PV_NUM && b.kind == PV_TRIPLE)
            r = triple_pow_exp(a.num, b.t);
        else if (a.kind == PV_TRIPLE && b.kind == PV_NUM)
            r = triple_pow_base(a.t, b.num);
    } else if (as_triple(a, &t) && as_triple(b, &u)) {
        r = triple_binary(op, t, u);
    } else if (a.kind == PV_MAP && b.kind == PV_MAP) {
        switch (op) {
        case PV_OP_ADD:
        case PV_OP_MUL:
        case PV_OP_AND:
        case PV_OP_OR:
        case PV_OP_MIN:
        case PV_OP_MAX: return map_binary(op, a, b);
        default: break;
        }
    }
    pv_free(a);
    pv_free(b);
    return r;
}

pv pv_binary(pv_binop op, pv a, pv b)
{
    if (PS_LIKELY(a.kind == PV_NUM && b.kind == PV_NUM))
        return num_binary(op, a.num, b.num);
    return binary_general(op, a, b);
}

pv pv_neg(pv a)
{
    switch (a.kind) {
    case PV_NUM: return pv_num(-a.num);
    case PV_TRIPLE: return pv_triple_make(-a.t.v, a.t.m, a.t.p);
    default: pv_free(a); return pv_undef();
    }
}

pv pv_not(pv a)
{
    if (a.kind == PV_BOOL)
        return pv_bool(!a.b);
    pv_free(a);
    return pv_undef();
}

pv pv_abs(pv a)
{
    if (a.kind == PV_NUM)
        return pv_num(fabs(a.num));
    if (a.kind != PV_TRIPLE) {
        pv_free(a);
        return pv_undef();
    }
    pv_triple t = a.t;
    if (t.v - t.m >= 0)
        return a;
    if (t.v + t.p <= 0)
        return pv_neg(a);
    /* The range straddles 0: the least absolute value is 0. */
    double v = fabs(t.v);
    return pv_triple_make(v, fmax(t.v + t.p, t.m - t.v) - v, v);
}

pv pv_trunc(pv a)
{
    if (a.kind == PV_NUM)
        return pv_num(trunc(a.num) + 0.0);
    if (a.kind != PV_TRIPLE) {
        pv_free(a);
        return pv_undef();
    }
    pv_triple t = a.t;
    double v = trunc(t.v) + 0.0;
    return pv_triple_make(v, trunc(t.v + t.p) - v, v - trunc(t.v - t.m));
}

pv pv_elapsed(pv e, pv s)
{
    pv_triple et, st;
    if (!as_triple(e, &et) || !as_triple(s, &st)) {
        pv_free(e);
        pv_free(s);
        return pv_undef();
    }
    double d = et.v - st.v;
    /* A negative difference gives a negative m: UNDEFINED (value.h). */
    return pv_triple_make(d, et.p + st.m, fmin(d, et.m + st.p));
}

pv pv_triple_part(pv t, char which)
{
    pv_triple x;
    if (!as_triple(t, &x)) {
        pv_free(t);
        return pv_undef();
    }
    switch (which) {
    case 'v': return pv_num(x.v);
    case 'p': return pv_num(x.p);
    case 'm': return pv_num(x.m);
    default: return pv_undef();
    }
}

pv pv_to_triple(pv a)
{
    pv_triple t;
    if (as_triple(a, &t))
        return pv_triple_make(t.v, t.p, t.m);
    pv_free(a);
    return pv_undef();
}

/* ---- references and structural equality ------------------------------------------ */

void pv_free_slow(pv v)
{
    switch (v.kind) {
    case PV_MAP:
        if (--v.map->refs == 0)
            map_destroy(v.map);
        break;
    case PV_EVENT: pv_event_release(v.ev); break;
    case PV_INTERVAL: pv_interval_release(v.iv); break;
    default: break;
    }
}

bool pv_identical(const pv *a, const pv *b)
{
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case PV_UNDEF: return true;
    case PV_NUM: return a->num == b->num;
    case PV_BOOL: return a->b == b->b;
    case PV_STR: return a->str == b->str || (a->str && b->str && strcmp(a->str, b->str) == 0);
    case PV_TRIPLE: return a->t.v == b->t.v && a->t.p == b->t.p && a->t.m == b->t.m;
    case PV_EVENT: return a->ev == b->ev;
    case PV_INTERVAL: return a->iv == b->iv;
    case PV_MAP: {
        const pv_map *x = a->map, *y = b->map;
        if (x == y)
            return true;
        if (x->count != y->count)
            return false;
        for (uint32_t i = 0; i < x->count; i++) {
            int64_t j = map_find(y, x->keys[i]);
            if (j < 0 || !pv_identical(&x->vals[i], &y->vals[j]))
                return false;
        }
        return true;
    }
    default: return false;
    }
}
