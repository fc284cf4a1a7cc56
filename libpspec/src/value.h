/* value.h — PSpec run-time values (private to libpspec).
 *
 * A value (`pv`) is a small tagged struct passed by value. Numbers, booleans,
 * strings and triples are plain data. Mappings, events and intervals are
 * reference-counted heap objects.
 *
 * Ownership rule (jq style): every pv_* function that takes a `pv` by value
 * CONSUMES that reference, and every returned `pv` is owned by the caller.
 * Use pv_copy() to keep a second reference and pv_free() to drop one.
 * Functions taking `const pv *` only borrow.
 * Consuming lets a mapping that nobody else holds (refs == 1) be updated in
 * place, which is what makes histograms built by `{+ x : T : k -> 1}` cheap.
 *
 * UNDEFINED is a value of every type (kind PV_UNDEF). Operations propagate it
 * unless documented otherwise. Run-time errors of the reference (division by
 * zero, a triple containing 0 as divisor, `div` of non-integers, a negative
 * triple component, a non-integral mapping key) also yield UNDEFINED.
 *
 * Semantics follow appendix A of the CMon report: Figure 8 (triple
 * arithmetic), Figure 9 (triple relations), Figure 10 (aggregate boundary
 * cases), A.9.3 (mappings).
 */
#ifndef PSPEC_VALUE_H
#define PSPEC_VALUE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "util.h"

typedef enum pv_kind {
    PV_UNDEF = 0,   /* UNDEFINED */
    PV_NUM,         /* number (a double; "longreal") */
    PV_BOOL,
    PV_STR,         /* string literal from the spec; not owned (lives as long as the spec) */
    PV_TRIPLE,      /* [v, p, m]: a measurement v within [v-m, v+p], p,m >= 0 */
    PV_MAP,         /* mapping from integral numbers to values */
    PV_EVENT,
    PV_INTERVAL,
} pv_kind;

typedef struct pv_map pv_map;
typedef struct pv_event pv_event;
typedef struct pv_interval pv_interval;

typedef struct pv_triple {
    double v, p, m;
} pv_triple;

typedef struct pv {
    uint8_t kind;               /* pv_kind */
    union {
        double num;             /* PV_NUM */
        bool b;                 /* PV_BOOL */
        const char *str;        /* PV_STR (borrowed from the spec's arena) */
        pv_triple t;            /* PV_TRIPLE */
        pv_map *map;            /* PV_MAP (refcounted) */
        pv_event *ev;           /* PV_EVENT (refcounted) */
        pv_interval *iv;        /* PV_INTERVAL (refcounted) */
    };
} pv;

/* ---- events and intervals --------------------------------------------------
 * Created by the engine; value.c only needs to count references, free them
 * and print them. `type` points at the engine's type descriptor, which is
 * any struct whose FIRST member is `const char *name` (pv_type_name reads it). */

/* Undefined attribute values are stored as this NaN. Log values are finite. */
#define PV_ATTR_UNDEF (__builtin_nan(""))
static inline bool pv_attr_defined(double a) { return a == a; }

struct pv_event {
    uint32_t refs;
    uint32_t nattr;             /* number of attribute slots in attr[] */
    const void *type;           /* engine event type descriptor */
    uint64_t pos;               /* position: record ordinal of this (real) event, or of the
                                   closest preceding real event for fabricated ones (0 = none) */
    uint32_t sub;               /* 0 for real events; 1, 2, ... for fabricated events after `pos` */
    bool timed;                 /* has a timestamp */
    uint8_t pool;               /* allocation class: attribute capacity + 1 when pooled, 0 if not */
    int64_t thread;             /* thread id (0 when unknown / fabricated) */
    int64_t ts;                 /* timestamp in ticks */
    double attr[];              /* attribute values, PV_ATTR_UNDEF when missing */
};

struct pv_interval {
    uint32_t refs;
    uint32_t nmetric;           /* number of metric slots */
    const void *type;           /* engine interval type descriptor */
    uint64_t uid;               /* unique id, assigned when the interval closes (1, 2, ...) */
    pv_event *start;            /* owned reference */
    pv_event *end;              /* owned reference */
    uint64_t lost;              /* records lost (gap markers) while it was open */
    pv metric[];                /* metric values, owned */
};

/* Name of an engine type descriptor (event or interval type). */
static inline const char *pv_type_name(const void *type)
{
    return type ? *(const char *const *)type : "?";
}

pv_event *pv_event_new(const void *type, uint32_t nattr);     /* refs = 1, attrs undefined */
/* An event with room for `cap` attributes, recycled from a pool of released
 * ones when possible: refs = 1, nattr = cap, every other field (attr[]
 * included) left for the caller to fill. The engine's allocator. */
pv_event *pv_event_alloc(uint32_t cap);
pv_interval *pv_interval_new(const void *type, uint32_t nmetric); /* refs = 1, metrics UNDEF */
void pv_event_release(pv_event *e);        /* NULL ok */
void pv_interval_release(pv_interval *i);  /* NULL ok */
/* Free the calling thread's lists of released events and intervals (they
 * are per thread); the public entry points call it before they return. */
void pv_pools_trim(void);

/* ---- constructors ---------------------------------------------------------- */

static inline pv pv_undef(void) { pv r = {.kind = PV_UNDEF}; return r; }
static inline pv pv_num(double x) { pv r = {.kind = PV_NUM, .num = x}; return r; }
static inline pv pv_bool(bool b) { pv r = {.kind = PV_BOOL, .b = b}; return r; }
static inline pv pv_str(const char *s) { pv r = {.kind = PV_STR, .str = s}; return r; }
/* A triple; UNDEFINED when p or m is negative or any component is not finite. */
static inline pv pv_triple_make(double v, double p, double m)
{
    /* x - x is 0 for finite x and NaN for infinities and NaN. */
    if (!(p >= 0 && m >= 0 && (v - v) + (p - p) + (m - m) == 0))
        return pv_undef();
    pv r = {.kind = PV_TRIPLE, .t = {v, p + 0.0, m + 0.0}};
    return r;
}
/* A timestamp of `ts` ticks: [ts, 1, 0]. */
pv pv_timestamp(int64_t ts);
pv pv_event_val(pv_event *e);       /* consumes the reference */
pv pv_interval_val(pv_interval *i); /* consumes the reference */

static inline bool pv_is_undef(pv v) { return v.kind == PV_UNDEF; }

/* Mappings, events and intervals all start with their `uint32_t refs`, so
 * copying and freeing plain values is an inline test. */
void pv_free_slow(pv v); /* drop a reference to a mapping, event or interval */
/* New reference to the same value. */
static inline pv pv_copy(pv v)
{
    if (v.kind >= PV_MAP)
        ++*(uint32_t *)(void *)v.map;
    return v;
}
/* Drop a reference. */
static inline void pv_free(pv v)
{
    if (v.kind >= PV_MAP)
        pv_free_slow(v);
}

/* ---- mappings ----------------------------------------------------------------
 * Keys are integral numbers (stored as doubles; -0 is 0). */

pv pv_map_empty(void);
/* i -> v: UNDEFINED when key is UNDEFINED or not integral. Triples use their
 * favoured value as key. v may be UNDEFINED (the key then maps to UNDEFINED). */
pv pv_map_single(pv key, pv v);
/* m(i): the value i maps to, or UNDEFINED. Consumes m and key. */
pv pv_map_apply(pv m, pv key);
/* mapped(m, i). UNDEFINED if m or i is UNDEFINED. */
pv pv_map_mapped(pv m, pv key);
/* Set key := v in m (m consumed, returned; copied first if shared). */
pv pv_map_set(pv m, double key, pv v);
/* Number of domain values (m borrowed; 0 for non-maps). */
uint32_t pv_map_count(const pv *m);
/* Domain values in ascending order: fills a fresh array (caller frees) and
 * returns its length. The order used by printing and by `in domain(m)`. */
uint32_t pv_map_keys_sorted(const pv *m, double **keys_out);
/* Borrowed pointer to the value of key, or NULL. */
const pv *pv_map_lookup(const pv *m, double key);

/* ---- operators --------------------------------------------------------------
 * One list, used by the checker (for typing), the evaluator and the printer.
 *   X(NAME, spelling) */
#define PV_BINOPS(X)          \
    X(ADD, "+")               \
    X(SUB, "-")               \
    X(MUL, "*")               \
    X(DIV, "/")               \
    X(IDIV, "div")            \
    X(MOD, "mod")             \
    X(EQ, "=")                \
    X(NE, "!=")               \
    X(LT, "<")                \
    X(LE, "<=")               \
    X(GT, ">")                \
    X(GE, ">=")               \
    X(AND, "&")               \
    X(OR, "|")                \
    X(IMPLIES, "=>")          \
    X(MIN, "min")             \
    X(MAX, "max")             \
    X(POWER, "power")         \
    X(LOG, "log")

typedef enum pv_binop {
#define X(name, spelling) PV_OP_##name,
    PV_BINOPS(X)
#undef X
    PV_OP__COUNT
} pv_binop;

extern const char *const pv_binop_spelling[PV_OP__COUNT];

/* Apply a binary operator (both arguments consumed).
 *  - numbers: as in Modula-3 (div/mod need integral arguments: floor division,
 *    mod result has the sign of the divisor); log(a,b) = log base a of b;
 *    power(a,b) = a^b.
 *  - number with triple: the number becomes [n,0,0] (Figure 8), except log and
 *    power, which use the number as the base/exponent b of Figure 8.
 *  - relations on numbers/triples per Figure 9; = and != also on booleans.
 *  - & | => on booleans.
 *  - + * & | min max on two mappings: union of domains, op applied to the values
 *    of keys in both (recursively for nested mappings), others kept as they are.
 *  - any UNDEFINED argument gives UNDEFINED.
 * Ill-typed combinations (which the checker rejects) give UNDEFINED. */
pv pv_binary(pv_binop op, pv a, pv b);

pv pv_neg(pv a);        /* unary minus: numbers and triples (-t = [-v, m, p]) */
pv pv_not(pv a);        /* ! on booleans */
pv pv_abs(pv a);        /* numbers and triples (Figure 8) */
pv pv_trunc(pv a);      /* toward zero; numbers and triples (Figure 8) */
/* elapsed(e, s) on two triples (A.9.11): [e.v-s.v, e.p+s.m, min(e.v-s.v, e.m+s.p)] */
pv pv_elapsed(pv e, pv s);
/* The three components of a triple as numbers ('v', 'p' or 'm'). */
pv pv_triple_part(pv t, char which);
/* Numbers become [n,0,0]; triples are returned as they are. */
pv pv_to_triple(pv a);
/* `truthy` helper: true iff v is the boolean true. */
static inline bool pv_is_true(pv v) { return v.kind == PV_BOOL && v.b; }

/* ---- aggregate accumulators ---------------------------------------------------
 * Incremental evaluation of {op x : ... : expr}. One accumulator per aggregate
 * instance; feed it each element's value in sequence order, read the result
 * at the end. Memory is O(1) for scalars and O(domain) for mappings. */

#define PV_AGGOPS(X)        \
    X(SUM, "+")             \
    X(PROD, "*")            \
    X(ALL, "&")             \
    X(ANY, "|")             \
    X(MIN, "min")           \
    X(MAX, "max")           \
    X(MEAN, "mean")         \
    X(STDEV, "stdev")       \
    X(VAR, "var")           \
    X(THE, "the")           \
    X(LAST, "last")         \
    X(FIRST, "first")       \
    X(COUNT, "count")       \
    X(QUANT, "p")

/* PV_AGG_QUANT is the quantile aggregate {pN x : T : e} (an extension): its
 * spelling is "p" followed by N, which the accumulator keeps as a fraction
 * (pv_acc_new_quantile). It is last so that the reference's operators keep
 * their numbers. */

typedef enum pv_aggop {
#define X(name, spelling) PV_AGG_##name,
    PV_AGGOPS(X)
#undef X
    PV_AGG__COUNT
} pv_aggop;

extern const char *const pv_aggop_spelling[PV_AGG__COUNT];

typedef struct pv_acc pv_acc;
struct ps_quant;

/* An accumulator's state: value_acc.c's business. It is here only so that
 * the inline fast paths below can be inlined into the engine's loops. */
struct pv_acc {
    uint8_t op;             /* pv_aggop */
    bool poisoned;          /* result is UNDEFINED whatever comes next */
    bool first_undef;       /* per key: the first element was UNDEFINED (first) */
    bool last_undef;        /* per key: the latest element was UNDEFINED (last) */
    int depth;              /* mapping levels of the elements */
    uint64_t n;             /* elements added */
    pv val;                 /* reduction: running value; scalar the/first/last: the element */
    double sum;             /* scalar mean: running sum (mean = sum / n) */
    double wmean, m2;       /* scalar var/stdev: Welford's running mean and squared deviations */
    pv kidx;                /* per key: mapping key -> number of its child (a PV_MAP) */
    double *kkeys;          /* per key: key of each child */
    pv_acc **kids;          /* per key: child accumulators, depth - 1 */
    uint32_t nkids, capkids;
    double q;               /* quantile: the fraction N / 100 of {pN ...}, 0 < q < 1 */
    struct ps_quant *qs;    /* quantile: the values or their sketch (quant.h), owned */
};

/* A new accumulator for `op`. `map_depth` is how many mapping levels the
 * element type has (0 for numbers/triples/booleans, 1 for map[num], 2 for
 * map[map[num]] ...): it decides the empty result, e.g. {+ ...} over no
 * elements is 0 at depth 0 and the empty mapping at depth >= 1. */
pv_acc *pv_acc_new(pv_aggop op, int map_depth);
/* A new quantile accumulator ({pN ...} with q = N / 100, 0 < q < 1).
 * pv_acc_new(PV_AGG_QUANT, d) is the median's. */
pv_acc *pv_acc_new_quantile(double q, int map_depth);
void pv_acc_free(pv_acc *a);                /* NULL ok */
/* Back to the empty sequence. */
static inline void pv_acc_reset(pv_acc *a);
/* Add the next element's value (consumed). For COUNT the value is ignored. */
void pv_acc_add(pv_acc *a, pv v);
/* The same for an UNDEFINED value (and for count, which ignores values), an
 * unboxed number, boolean or triple, without building a pv in the common
 * cases: exactly pv_acc_add(a, pv_undef()), pv_acc_add(a, pv_num(x)),
 * pv_acc_add(a, pv_bool(b)) and pv_acc_add(a, pv_triple_make(t.v, t.p, t.m)). */
static inline void pv_acc_add_undef(pv_acc *a);
static inline void pv_acc_add_num(pv_acc *a, double x);
static inline void pv_acc_add_bool(pv_acc *a, bool b);
static inline void pv_acc_add_triple(pv_acc *a, pv_triple t);
/* Their general cases (value_acc.c); call the inline functions instead. */
void pv_acc_reset_slow(pv_acc *a);
void pv_acc_add_num_slow(pv_acc *a, double x);
void pv_acc_add_bool_slow(pv_acc *a, bool b);
void pv_acc_add_triple_slow(pv_acc *a, pv_triple t);
/* Mark the whole aggregate UNDEFINED (a where-clause evaluated to UNDEFINED). */
void pv_acc_poison(pv_acc *a);
/* Number of elements added so far. */
uint64_t pv_acc_count(const pv_acc *a);
/* The aggregate's value for the elements added so far (accumulator unchanged):
 *  - Figure 10 boundary cases: empty + is 0, * is 1, & true, | false, count 0;
 *    empty min/max/mean/the/last/first and stdev/var of fewer than two
 *    elements are UNDEFINED (the reference's "error").
 *  - + * & | min max: left-to-right reduction with pv_binary semantics.
 *  - mean/stdev/var: over numbers, or the favoured values of triples; result is
 *    a number; var is the unbiased (n-1) estimate, stdev its square root.
 *  - quantile (pN): over numbers, or the favoured values of triples, the
 *    triple of ps_quant_result (quant.h): the nearest-rank sample quantile
 *    with a 95% order-statistic confidence interval; UNDEFINED when empty
 *    or when too few elements bound a side.
 *  - the: the single element, UNDEFINED if there are two or more.
 *  - first/last: the first/last element (which may itself be UNDEFINED).
 *  - an UNDEFINED element makes + * & | min max mean stdev var UNDEFINED.
 *  - mapping elements: the result maps every key in the union of the domains
 *    to the aggregate (same op, recursively) of the values at that key, in
 *    sequence order. */
pv pv_acc_result(const pv_acc *a);
/* pv_acc_result when it is a number (stored in *out); false otherwise. */
static inline bool pv_acc_result_num(const pv_acc *a, double *out);
bool pv_acc_result_num_slow(const pv_acc *a, double *out);

/* ---- the inline fast paths ---- */

static inline void pv_acc_reset(pv_acc *a)
{
    if (a->op == PV_AGG_COUNT) {
        /* count keeps nothing but n and the poison (value_acc.c) */
        a->n = 0;
        a->poisoned = false;
        return;
    }
    if (PS_LIKELY(a->val.kind < PV_MAP && a->kidx.kind < PV_MAP && !a->kids && !a->kkeys && !a->qs)) {
        /* Nothing owned: clear the state field by field (a struct
         * assignment becomes a slow `rep stos`). */
        a->poisoned = a->first_undef = a->last_undef = false;
        a->n = 0;
        a->val = pv_undef();
        a->sum = a->wmean = a->m2 = 0;
        a->kidx = pv_undef();
        a->nkids = a->capkids = 0;
        return;
    }
    pv_acc_reset_slow(a);
}

static inline void pv_acc_add_undef(pv_acc *a)
{
    if (PS_LIKELY(a->op == PV_AGG_COUNT)) {
        a->n++;
        return;
    }
    pv_acc_add(a, pv_undef());
}

/* mean/var/stdev of a favoured value x (a->n already counts it); the mean
 * needs only the sum, var and stdev Welford's running values. */
static inline void pv_acc__stat(pv_acc *a, double x)
{
    a->sum += x;
    if (a->op == PV_AGG_MEAN)
        return;
    double delta = x - a->wmean;
    a->wmean += delta / (double)a->n;
    a->m2 += delta * (x - a->wmean);
}

static inline void pv_acc_add_num(pv_acc *a, double x)
{
    if (a->depth == 0 && !a->poisoned) {
        switch (a->op) {
        case PV_AGG_COUNT:
            a->n++;
            return;
        case PV_AGG_MEAN:
        case PV_AGG_VAR:
        case PV_AGG_STDEV:
            a->n++;
            pv_acc__stat(a, x);
            return;
        case PV_AGG_SUM:
            if (a->val.kind == PV_NUM && a->n) {
                double s = a->val.num + x;
                a->n++;
                a->val = isfinite(s) ? pv_num(s) : pv_undef();
                return;
            }
            break;
        default:
            break;
        }
    }
    pv_acc_add_num_slow(a, x);
}

static inline void pv_acc_add_bool(pv_acc *a, bool b)
{
    if (a->op == PV_AGG_COUNT) {
        a->n++;
        return;
    }
    if ((a->op == PV_AGG_ALL || a->op == PV_AGG_ANY) && a->val.kind == PV_BOOL && a->n && !a->poisoned) {
        a->n++;
        a->val.b = a->op == PV_AGG_ALL ? (a->val.b && b) : (a->val.b || b);
        return;
    }
    pv_acc_add_bool_slow(a, b);
}

static inline void pv_acc_add_triple(pv_acc *a, pv_triple t)
{
    pv v = pv_triple_make(t.v, t.p, t.m);
    if (v.kind == PV_TRIPLE && a->depth == 0 && !a->poisoned) {
        switch (a->op) {
        case PV_AGG_COUNT:
            a->n++;
            return;
        case PV_AGG_MEAN:
        case PV_AGG_VAR:
        case PV_AGG_STDEV:
            a->n++;
            pv_acc__stat(a, v.t.v);
            return;
        case PV_AGG_SUM:
            if (a->val.kind == PV_TRIPLE && a->n) {
                pv_triple u = a->val.t;
                a->n++;
                a->val = pv_triple_make(u.v + v.t.v, u.p + v.t.p, u.m + v.t.m);
                return;
            }
            break;
        default:
            break;
        }
    }
    pv_acc_add_triple_slow(a, t);
}

static inline bool pv_acc_result_num(const pv_acc *a, double *out)
{
    if (a->op == PV_AGG_COUNT && !a->poisoned) {
        *out = (double)a->n;
        return true;
    }
    return pv_acc_result_num_slow(a, out);
}

/* ---- printing -----------------------------------------------------------------
 * Text notation of the reference (DESIGN.md §5):
 *  - numbers: integral values with magnitude < 1e9 print as integers ("1024",
 *    "-3"); others with up to 10 significant digits, trailing zeros dropped,
 *    in exponent form when the decimal exponent is < -4 or >= 9, written
 *    like "3.641230271e9" / "1.5e-7" (no '+', no leading zeros);
 *    "191.4820313", "0.04".
 *  - triples "[606.2,0.04,0.04]" (no spaces), booleans "true"/"false",
 *    UNDEFINED "UNDEFINED", strings: raw at top level, quoted with escapes
 *    inside a mapping;
 *  - mappings "(k -> v, k -> v)" in ascending key order, "()" when empty;
 *  - events "<Type pos.sub>", intervals "<Type #uid>".
 * JSON (DESIGN.md §5, --json): numbers as JSON numbers (integral values exactly,
 * others with %.17g), triples [v,p,m], mappings as objects keyed by the
 * printed key ("4096"), UNDEFINED null, strings escaped, events
 * {"type":..,"pos":"12.0","ts":..}, intervals {"type":..,"uid":..}. */
void pv_format(ps_buf *out, const pv *v);
void pv_format_json(ps_buf *out, const pv *v);
void pv_format_number(ps_buf *out, double x);     /* the text notation of a number */
void pv_json_string(ps_buf *out, const char *s);  /* a JSON string literal */
void pv_format_pos(ps_buf *out, const pv_event *e); /* an event's position "POS.SUB" */

/* Structural equality of two values, for tests and for multi-element mapping
 * constructors (not the language's "=", which is Figure 9's overlap test). */
bool pv_identical(const pv *a, const pv *b);

#endif
