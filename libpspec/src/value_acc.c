/* value_acc.c — incremental aggregate accumulators (A.9.13, Figure 10).
 * Uses only the interface in value.h.
 *
 * Three modes, chosen by the operator and the element type's mapping depth:
 *  - reduction (+ * & | min max): one running value folded with pv_binary,
 *    which already combines mappings key by key; an unshared running mapping
 *    is updated in place, so a histogram costs O(1) per element;
 *  - scalar (mean stdev var the first last at depth 0): O(1) state, Welford's
 *    running mean and sum of squared deviations for var/stdev;
 *  - per key (mean stdev var the first last at depth >= 1): one child
 *    accumulator of depth - 1 for every key seen, fed in sequence order.
 * count only counts. A quantile (pN) keeps its elements' favoured values in
 * a ps_quant (quant.c): exactly up to a bound, then as a sketch.
 */
#include "value.h"

#include "quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const pv_aggop_spelling[PV_AGG__COUNT] = {
#define X(name, spelling) [PV_AGG_##name] = spelling,
    PV_AGGOPS(X)
#undef X
};

/* struct pv_acc is in value.h, for the inline fast paths there. */

/* The pv_binary operator a reduction folds with. */
static const pv_binop reduce_op[PV_AGG__COUNT] = {
    [PV_AGG_SUM] = PV_OP_ADD, [PV_AGG_PROD] = PV_OP_MUL, [PV_AGG_ALL] = PV_OP_AND,
    [PV_AGG_ANY] = PV_OP_OR,  [PV_AGG_MIN] = PV_OP_MIN,  [PV_AGG_MAX] = PV_OP_MAX,
};

_Static_assert(PV_AGG_SUM == 0 && PV_AGG_MAX == 5, "reductions come first in PV_AGGOPS");

static inline bool is_reduction(const pv_acc *a)
{
    return a->op <= PV_AGG_MAX;
}

static inline bool is_per_key(const pv_acc *a)
{
    return a->depth >= 1 && !is_reduction(a) && a->op != PV_AGG_COUNT;
}

pv_acc *pv_acc_new(pv_aggop op, int map_depth)
{
    pv_acc *a = ps_calloc(1, sizeof(*a));
    a->op = (uint8_t)op;
    a->depth = map_depth < 0 ? 0 : map_depth;
    a->q = 0.5;
    return a;
}

pv_acc *pv_acc_new_quantile(double q, int map_depth)
{
    pv_acc *a = pv_acc_new(PV_AGG_QUANT, map_depth);
    a->q = q;
    return a;
}

/* Drop every element-dependent state (memory included). */
static void acc_clear(pv_acc *a)
{
    pv_free(a->val);
    pv_free(a->kidx);
    for (uint32_t i = 0; i < a->nkids; i++)
        pv_acc_free(a->kids[i]);
    free(a->kids);
    free(a->kkeys);
    ps_quant_free(a->qs);
    uint8_t op = a->op;
    int depth = a->depth;
    double q = a->q;
    memset(a, 0, sizeof(*a));
    a->op = op;
    a->depth = depth;
    a->q = q;
}

void pv_acc_free(pv_acc *a)
{
    if (!a)
        return;
    acc_clear(a);
    free(a);
}

void pv_acc_reset_slow(pv_acc *a)
{
    acc_clear(a);
}

void pv_acc_poison(pv_acc *a)
{
    uint64_t n = a->n;
    acc_clear(a);
    a->n = n;
    a->poisoned = true;
}

uint64_t pv_acc_count(const pv_acc *a)
{
    return a->n;
}

/* The child accumulator for key, created on first sight. */
static pv_acc *acc_kid(pv_acc *a, double key)
{
    if (a->kidx.kind != PV_MAP)
        a->kidx = pv_map_empty();
    const pv *slot = pv_map_lookup(&a->kidx, key);
    if (slot)
        return a->kids[(uint32_t)slot->num];
    if (a->nkids == a->capkids) {
        a->capkids = a->capkids ? 2 * a->capkids : 4;
        a->kids = ps_realloc(a->kids, a->capkids * sizeof(*a->kids));
        a->kkeys = ps_realloc(a->kkeys, a->capkids * sizeof(*a->kkeys));
    }
    uint32_t i = a->nkids++;
    a->kids[i] = pv_acc_new((pv_aggop)a->op, a->depth - 1);
    a->kids[i]->q = a->q;
    a->kkeys[i] = key;
    a->kidx = pv_map_set(a->kidx, key, pv_num(i));
    return a->kids[i];
}

static void add_per_key(pv_acc *a, pv v)
{
    if (v.kind != PV_MAP) {
        if (v.kind != PV_UNDEF)
            a->poisoned = true;         /* ill-typed element */
        else if (a->op == PV_AGG_FIRST)
            a->first_undef |= a->n == 1;
        else if (a->op == PV_AGG_LAST)
            a->last_undef = true;
        else
            a->poisoned = true;
        pv_free(v);
        return;
    }
    a->last_undef = false;
    double *keys;
    uint32_t n = pv_map_keys_sorted(&v, &keys);
    for (uint32_t i = 0; i < n; i++)
        pv_acc_add(acc_kid(a, keys[i]), pv_copy(*pv_map_lookup(&v, keys[i])));
    free(keys);
    pv_free(v);
}


/* mean/var/stdev over numbers or the favoured values of triples. */
static void add_stat(pv_acc *a, pv v)
{
    double x;
    if (v.kind == PV_NUM) {
        x = v.num;
    } else if (v.kind == PV_TRIPLE) {
        x = v.t.v;
    } else {
        pv_free(v);
        a->poisoned = true;
        return;
    }
    pv_acc__stat(a, x);
}

/* A quantile's element: a number, or a triple's favoured value. */
static void add_quant(pv_acc *a, pv v)
{
    if ((v.kind != PV_NUM && v.kind != PV_TRIPLE) || (v.kind == PV_NUM && !isfinite(v.num))) {
        pv_free(v);
        a->poisoned = true;
        return;
    }
    if (!a->qs)
        a->qs = ps_quant_new();
    ps_quant_add(a->qs, v.kind == PV_NUM ? v.num : v.t.v);
}

void pv_acc_add(pv_acc *a, pv v)
{
    a->n++;
    if (a->poisoned) {
        pv_free(v);
        return;
    }
    if (is_reduction(a)) {
        if (a->n == 1) {
            a->val = v;
        } else if (a->val.kind == PV_UNDEF) {
            pv_free(v);                 /* UNDEFINED absorbs everything */
        } else {
            a->val = pv_binary(reduce_op[a->op], a->val, v);
        }
        return;
    }
    if (a->op == PV_AGG_COUNT) {
        pv_free(v);
        return;
    }
    if (is_per_key(a)) {
        add_per_key(a, v);
        return;
    }
    switch (a->op) {
    case PV_AGG_MEAN:
    case PV_AGG_VAR:
    case PV_AGG_STDEV: add_stat(a, v); break;
    case PV_AGG_QUANT: add_quant(a, v); break;
    case PV_AGG_THE:
    case PV_AGG_FIRST:
        if (a->n == 1)
            a->val = v;
        else
            pv_free(v);
        break;
    case PV_AGG_LAST:
        pv_free(a->val);
        a->val = v;
        break;
    default: pv_free(v); break;
    }
}

/* ---- unboxed elements ----------------------------------------------------------
 * The common scalar cases of pv_acc_add without building a pv; everything
 * else goes through pv_acc_add itself. The inline folds (+ * on numbers, +
 * on triples, & | on booleans) are pv_binary's (value.c); min and max call
 * it, so that signed zeros come out the same. */

static inline pv num_or_undef(double x)
{
    return isfinite(x) ? pv_num(x) : pv_undef();
}

void pv_acc_add_num_slow(pv_acc *a, double x)
{
    if (PS_UNLIKELY(a->depth != 0)) {
        pv_acc_add(a, pv_num(x));
        return;
    }
    a->n++;
    if (a->poisoned)
        return;
    switch ((pv_aggop)a->op) {
    case PV_AGG_SUM:
    case PV_AGG_PROD:
    case PV_AGG_MIN:
    case PV_AGG_MAX:
    case PV_AGG_ALL:
    case PV_AGG_ANY:
        if (a->n == 1) {
            a->val = pv_num(x);
        } else if (a->val.kind == PV_NUM) {
            double y = a->val.num;
            switch ((pv_aggop)a->op) {
            case PV_AGG_SUM: a->val = num_or_undef(y + x); break;
            case PV_AGG_PROD: a->val = num_or_undef(y * x); break;
            case PV_AGG_ALL:
            case PV_AGG_ANY: a->val = pv_undef(); break;     /* & | on numbers */
            default: a->val = pv_binary(reduce_op[a->op], a->val, pv_num(x)); break;
            }
        } else if (a->val.kind != PV_UNDEF) {
            a->val = pv_binary(reduce_op[a->op], a->val, pv_num(x));
        }
        return;
    case PV_AGG_MEAN:
    case PV_AGG_VAR:
    case PV_AGG_STDEV: pv_acc__stat(a, x); return;
    case PV_AGG_QUANT:
        if (!isfinite(x)) {
            a->poisoned = true;
            return;
        }
        if (!a->qs)
            a->qs = ps_quant_new();
        ps_quant_add(a->qs, x);
        return;
    case PV_AGG_THE:
    case PV_AGG_FIRST:
        if (a->n == 1)
            a->val = pv_num(x);
        return;
    case PV_AGG_LAST:
        pv_free(a->val);
        a->val = pv_num(x);
        return;
    default: return;    /* count */
    }
}

void pv_acc_add_bool_slow(pv_acc *a, bool b)
{
    if (PS_UNLIKELY(a->depth != 0 || (a->op != PV_AGG_ALL && a->op != PV_AGG_ANY && a->op != PV_AGG_COUNT))) {
        pv_acc_add(a, pv_bool(b));
        return;
    }
    a->n++;
    if (a->poisoned || a->op == PV_AGG_COUNT)
        return;
    if (a->n == 1)
        a->val = pv_bool(b);
    else if (a->val.kind == PV_BOOL)
        a->val.b = a->op == PV_AGG_ALL ? (a->val.b && b) : (a->val.b || b);
    else if (a->val.kind != PV_UNDEF)
        a->val = pv_binary(reduce_op[a->op], a->val, pv_bool(b));
}

void pv_acc_add_triple_slow(pv_acc *a, pv_triple t)
{
    pv v = pv_triple_make(t.v, t.p, t.m);
    if (PS_UNLIKELY(a->depth != 0 || v.kind != PV_TRIPLE)) {
        pv_acc_add(a, v);
        return;
    }
    t = v.t;
    switch ((pv_aggop)a->op) {
    case PV_AGG_SUM:
    case PV_AGG_MIN:
    case PV_AGG_MAX:
        a->n++;
        if (a->poisoned)
            return;
        if (a->n == 1) {
            a->val = v;
        } else if (a->val.kind == PV_TRIPLE && a->op == PV_AGG_SUM) {
            pv_triple u = a->val.t;
            a->val = pv_triple_make(u.v + t.v, u.p + t.p, u.m + t.m);
        } else if (a->val.kind != PV_UNDEF) {
            a->val = pv_binary(reduce_op[a->op], a->val, v);
        }
        return;
    case PV_AGG_MEAN:
    case PV_AGG_VAR:
    case PV_AGG_STDEV:
        a->n++;
        if (!a->poisoned)
            pv_acc__stat(a, t.v);
        return;
    case PV_AGG_COUNT:
        a->n++;
        return;
    default:
        pv_acc_add(a, v);
        return;
    }
}

bool pv_acc_result_num_slow(const pv_acc *a, double *out)
{
    if (a->op == PV_AGG_COUNT && !a->poisoned) {
        *out = (double)a->n;
        return true;
    }
    pv r = pv_acc_result(a);
    bool ok = r.kind == PV_NUM;
    if (ok)
        *out = r.num;
    pv_free(r);
    return ok;
}

/* A finite statistic as a number; an overflowed one is UNDEFINED. */
static inline pv finite_num(double x)
{
    return isfinite(x) ? pv_num(x) : pv_undef();
}

static pv result_per_key(const pv_acc *a)
{
    if ((a->op == PV_AGG_FIRST && a->first_undef) || (a->op == PV_AGG_LAST && a->last_undef))
        return pv_undef();
    pv m = pv_map_empty();
    for (uint32_t i = 0; i < a->nkids; i++)
        m = pv_map_set(m, a->kkeys[i], pv_acc_result(a->kids[i]));
    return m;
}

pv pv_acc_result(const pv_acc *a)
{
    if (a->poisoned)
        return pv_undef();
    if (a->op == PV_AGG_COUNT)
        return pv_num((double)a->n);
    if (a->n == 0) {
        /* Figure 10. Over mappings, A.9.13 combines key by key: the result's
         * domain is the union of the elements' domains, so over no
         * elements it is the empty mapping, whatever the operator. */
        if (a->depth)
            return pv_map_empty();
        switch (a->op) {
        case PV_AGG_SUM: return pv_num(0);
        case PV_AGG_PROD: return pv_num(1);
        case PV_AGG_ALL: return pv_bool(true);
        case PV_AGG_ANY: return pv_bool(false);
        default: return pv_undef();
        }
    }
    if (is_reduction(a))
        return pv_copy(a->val);
    if (is_per_key(a))
        return result_per_key(a);
    switch (a->op) {
    case PV_AGG_MEAN: return finite_num(a->sum / (double)a->n);
    case PV_AGG_VAR: return a->n < 2 ? pv_undef() : finite_num(a->m2 / (double)(a->n - 1));
    case PV_AGG_STDEV:
        return a->n < 2 ? pv_undef() : finite_num(sqrt(a->m2 / (double)(a->n - 1)));
    case PV_AGG_QUANT: return a->qs ? ps_quant_result(a->qs, a->q) : pv_undef();
    case PV_AGG_THE: return a->n == 1 ? pv_copy(a->val) : pv_undef();
    case PV_AGG_FIRST:
    case PV_AGG_LAST: return pv_copy(a->val);
    default: return pv_undef();
    }
}
