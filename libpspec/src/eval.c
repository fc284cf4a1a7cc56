/* eval.c — expression evaluation (appendix A.9). Operators propagate
 * UNDEFINED except ?, ~ and defined(). */
#include "eval.h"

#include <math.h>
#include <stdlib.h>

double ps_time_ticks(const ps_evalctx *ev, double num, double unit_ns)
{
    return unit_ns == 0 ? num : num * unit_ns / ev->tick_ns;
}

/* Borrowed event bound to a binder expression, or NULL (then evaluate). */
static inline const pv_event *bound_event(const ps_evalctx *ev, const ps_expr *e)
{
    if (e->kind == X_VAR) {
        const pv *v = &ev->slots[e->var->slot];
        return v->kind == PV_EVENT ? v->ev : NULL;
    }
    return NULL;
}

static pv triple_elapsed(int64_t e_ts, int64_t s_ts)
{
    return pv_elapsed(pv_timestamp(e_ts), pv_timestamp(s_ts));
}

/* Numbers on both sides: the common case, done without a call. */
static inline bool num_fast(pv_binop op, double a, double b, pv *out)
{
    switch (op) {
    case PV_OP_ADD: *out = pv_num(a + b); return true;
    case PV_OP_SUB: *out = pv_num(a - b); return true;
    case PV_OP_MUL: *out = pv_num(a * b); return true;
    case PV_OP_DIV: *out = b == 0 ? pv_undef() : pv_num(a / b); return true;
    case PV_OP_EQ: *out = pv_bool(a == b); return true;
    case PV_OP_NE: *out = pv_bool(a != b); return true;
    case PV_OP_LT: *out = pv_bool(a < b); return true;
    case PV_OP_LE: *out = pv_bool(a <= b); return true;
    case PV_OP_GT: *out = pv_bool(a > b); return true;
    case PV_OP_GE: *out = pv_bool(a >= b); return true;
    default: return false;
    }
}

static pv binary(pv_binop op, pv a, pv b)
{
    pv r;
    if (a.kind == PV_NUM && b.kind == PV_NUM && num_fast(op, a.num, b.num, &r))
        return r;
    return pv_binary(op, a, b);
}

static pv eval_builtin(ps_evalctx *ev, const ps_expr *e)
{
    ps_expr *const *args = e->call.args;
    switch ((ps_builtin)e->op) {
    case B_MIN: return pv_binary(PV_OP_MIN, ps_eval(ev, args[0]), ps_eval(ev, args[1]));
    case B_MAX: return pv_binary(PV_OP_MAX, ps_eval(ev, args[0]), ps_eval(ev, args[1]));
    case B_POWER: return pv_binary(PV_OP_POWER, ps_eval(ev, args[0]), ps_eval(ev, args[1]));
    case B_LOG: return pv_binary(PV_OP_LOG, ps_eval(ev, args[0]), ps_eval(ev, args[1]));
    case B_ABS: return pv_abs(ps_eval(ev, args[0]));
    case B_TRUNC: return pv_trunc(ps_eval(ev, args[0]));
    case B_DEFINED: {
        pv v = ps_eval(ev, args[0]);
        bool d = v.kind != PV_UNDEF;
        pv_free(v);
        return pv_bool(d);
    }
    case B_MAPPED: return pv_map_mapped(ps_eval(ev, args[0]), ps_eval(ev, args[1]));
    case B_THREAD:
    case B_TIMESTAMP:
    case B_TS: {
        const pv_event *be = bound_event(ev, args[0]);
        if (be)
            return e->op == B_THREAD ? pv_num((double)be->thread) : pv_timestamp(be->ts);
        pv v = ps_eval(ev, args[0]);
        pv r = pv_undef();
        if (v.kind == PV_EVENT)
            r = e->op == B_THREAD ? pv_num((double)v.ev->thread) : pv_timestamp(v.ev->ts);
        pv_free(v);
        return r;
    }
    case B_ELAPSED: {
        if (e->call.nargs == 1) {
            pv v = ps_eval(ev, args[0]);
            pv r = pv_undef();
            if (v.kind == PV_INTERVAL)
                r = triple_elapsed(v.iv->end->ts, v.iv->start->ts);
            pv_free(v);
            return r;
        }
        pv a = ps_eval(ev, args[0]), b = ps_eval(ev, args[1]);
        if (a.kind == PV_EVENT && b.kind == PV_EVENT) {
            pv r = triple_elapsed(a.ev->ts, b.ev->ts);
            pv_free(a);
            pv_free(b);
            return r;
        }
        return pv_elapsed(pv_to_triple(a), pv_to_triple(b));
    }
    default:
        return pv_undef();
    }
}

/* {op x in domain(m) [where p] : v}: evaluated directly, keys ascending. */
static pv eval_domain_agg(ps_evalctx *ev, const ps_agg *a)
{
    pv m = ps_eval(ev, a->domain);
    if (m.kind != PV_MAP) {
        pv_free(m);
        return pv_undef();
    }
    double *keys = NULL;
    uint32_t n = pv_map_keys_sorted(&m, &keys);
    pv_acc *acc = pv_acc_new(a->op, a->map_depth);
    pv *slot = &ev->slots[a->var->slot];
    pv saved = *slot;
    for (uint32_t i = 0; i < n; i++) {
        *slot = pv_num(keys[i]);
        if (a->where) {
            int c = ps_eval_cond(ev, a->where);
            if (c < 0) {
                pv_acc_poison(acc);
                break;
            }
            if (c == 0)
                continue;
        }
        pv_acc_add(acc, a->value ? ps_eval(ev, a->value) : pv_undef());
    }
    *slot = saved;
    free(keys);
    pv_free(m);
    pv r = pv_acc_result(acc);
    pv_acc_free(acc);
    return r;
}

static pv eval_chain(ps_evalctx *ev, const ps_expr *e)
{
    pv prev = ps_eval(ev, e->list.items[0]);
    bool undef = false, result = true;
    for (uint32_t i = 1; i < e->list.n; i++) {
        pv cur = ps_eval(ev, e->list.items[i]);
        pv r = binary((pv_binop)e->list.ops[i - 1], pv_copy(prev), pv_copy(cur));
        if (r.kind != PV_BOOL)
            undef = true;
        else
            result = result && r.b;
        pv_free(r);
        pv_free(prev);
        prev = cur;
    }
    pv_free(prev);
    return undef ? pv_undef() : pv_bool(result);
}

static pv eval_maplist(ps_evalctx *ev, const ps_expr *e)
{
    pv m = pv_map_empty();
    for (uint32_t i = 0; i < e->list.n; i++) {
        const ps_expr *it = e->list.items[i];
        pv k = ps_eval(ev, it->bin.a);
        if (k.kind == PV_TRIPLE)
            k = pv_num(k.t.v);
        if (k.kind != PV_NUM || k.num != trunc(k.num) || pv_map_lookup(&m, k.num)) {
            /* not integral, or the same domain value twice: the reference's error */
            pv_free(m);
            return pv_undef();
        }
        m = pv_map_set(m, k.num, ps_eval(ev, it->bin.b));
    }
    return m;
}

pv ps_eval(ps_evalctx *ev, const ps_expr *e)
{
    switch ((ps_expr_kind)e->kind) {
    case X_NUM: return pv_num(e->num);
    case X_TIMELIT: return pv_num(ps_time_ticks(ev, e->time.num, e->time.unit_ns));
    case X_BOOL: return pv_bool(e->b);
    case X_STR: return pv_str(e->str);
    case X_CONST: return ev->consts ? pv_copy(ev->consts[e->cst->id]) : pv_undef();
    case X_VAR: return pv_copy(ev->slots[e->var->slot]);
    case X_ATTR: {
        const pv_event *be = bound_event(ev, e->field.obj);
        if (be) {
            double a = e->field.index < be->nattr ? be->attr[e->field.index] : PV_ATTR_UNDEF;
            return pv_attr_defined(a) ? pv_num(a) : pv_undef();
        }
        pv o = ps_eval(ev, e->field.obj);
        pv r = pv_undef();
        if (o.kind == PV_EVENT && e->field.index < o.ev->nattr && pv_attr_defined(o.ev->attr[e->field.index]))
            r = pv_num(o.ev->attr[e->field.index]);
        pv_free(o);
        return r;
    }
    case X_METRIC: {
        if (e->field.obj->kind == X_VAR) {
            const pv *v = &ev->slots[e->field.obj->var->slot];
            if (v->kind == PV_INTERVAL)
                return e->field.index < v->iv->nmetric ? pv_copy(v->iv->metric[e->field.index]) : pv_undef();
        }
        pv o = ps_eval(ev, e->field.obj);
        pv r = pv_undef();
        if (o.kind == PV_INTERVAL && e->field.index < o.iv->nmetric)
            r = pv_copy(o.iv->metric[e->field.index]);
        pv_free(o);
        return r;
    }
    case X_PART: return pv_triple_part(ps_eval(ev, e->field.obj), (char)e->op);
    case X_BUILTIN: return eval_builtin(ev, e);
    case X_APPLY: return pv_map_apply(ps_eval(ev, e->call.fn), ps_eval(ev, e->call.args[0]));
    case X_NEG: {
        pv a = ps_eval(ev, e->bin.a);
        return a.kind == PV_NUM ? pv_num(-a.num) : pv_neg(a);
    }
    case X_NOT: {
        pv a = ps_eval(ev, e->bin.a);
        return a.kind == PV_BOOL ? pv_bool(!a.b) : pv_not(a);
    }
    case X_BINARY: {
        pv a = ps_eval(ev, e->bin.a);
        pv b = ps_eval(ev, e->bin.b);
        return binary((pv_binop)e->op, a, b);
    }
    case X_CHAIN: return eval_chain(ev, e);
    case X_TRIPLE: {
        pv v = ps_eval(ev, e->list.items[0]), p = ps_eval(ev, e->list.items[1]), m = ps_eval(ev, e->list.items[2]);
        if (v.kind != PV_NUM || p.kind != PV_NUM || m.kind != PV_NUM)
            return pv_undef();
        return pv_triple_make(v.num, p.num, m.num);
    }
    case X_MAPONE: {
        pv k = ps_eval(ev, e->bin.a);
        return pv_map_single(k, ps_eval(ev, e->bin.b));
    }
    case X_MAPLIST: return eval_maplist(ev, e);
    case X_IF: {
        int c = ps_eval_cond(ev, e->bin.a);
        return c == 1 ? ps_eval(ev, e->bin.b) : pv_undef();
    }
    case X_ELSE: {
        pv a = ps_eval(ev, e->bin.a);
        if (a.kind != PV_UNDEF)
            return a;
        return ps_eval(ev, e->bin.b);
    }
    case X_AGG: {
        const ps_agg *a = e->agg;
        switch (a->place) {
        case AGG_TOP: return ev->topvals ? pv_copy(ev->topvals[a->id]) : pv_undef();
        case AGG_METRIC: return ev->accs ? pv_acc_result(ev->accs[a->id]) : pv_undef();
        case AGG_DOMAIN: return eval_domain_agg(ev, a);
        }
        return pv_undef();
    }
    case X_NAME:
    case X_FIELD:
    case X_CALL:
        break;  /* unresolved: the checker rejected the spec */
    }
    return pv_undef();
}

int ps_eval_cond(ps_evalctx *ev, const ps_expr *e)
{
    /* Fast path for `x.a = y.b` style comparisons of two numbers. */
    pv v = ps_eval(ev, e);
    int r = v.kind == PV_BOOL ? (v.b ? 1 : 0) : -1;
    pv_free(v);
    return r;
}
