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
/* A finite number, or UNDEFINED on overflow (as value.c does). */
static inline pv finite_pv(double x)
{
    return isfinite(x) ? pv_num(x) : pv_undef();
}

static inline bool num_fast(pv_binop op, double a, double b, pv *out)
{
    switch (op) {
    case PV_OP_ADD: *out = finite_pv(a + b); return true;
    case PV_OP_SUB: *out = finite_pv(a - b); return true;
    case PV_OP_MUL: *out = finite_pv(a * b); return true;
    case PV_OP_DIV: *out = b == 0 ? pv_undef() : finite_pv(a / b); return true;
    case PV_OP_EQ: *out = pv_bool(a == b); return true;
    case PV_OP_NE: *out = pv_bool(a != b); return true;
    case PV_OP_LT: *out = pv_bool(a < b); return true;
    case PV_OP_LE: *out = pv_bool(a <= b); return true;
    case PV_OP_GT: *out = pv_bool(a > b); return true;
    case PV_OP_GE: *out = pv_bool(a >= b); return true;
    default: return false;
    }
}

/* Numbers and triples: +, - and the relations of Figures 8 and 9, inline. */
static inline bool triple_fast(pv_binop op, pv a, pv b, pv *out)
{
    pv_triple t, u;
    if (a.kind == PV_TRIPLE)
        t = a.t;
    else if (a.kind == PV_NUM)
        t = (pv_triple){a.num, 0, 0};
    else
        return false;
    if (b.kind == PV_TRIPLE)
        u = b.t;
    else if (b.kind == PV_NUM)
        u = (pv_triple){b.num, 0, 0};
    else
        return false;
    bool eq = t.v - t.m <= u.v + u.p && t.v + t.p >= u.v - u.m;
    switch (op) {
    case PV_OP_ADD: *out = pv_triple_make(t.v + u.v, t.p + u.p, t.m + u.m); return true;
    case PV_OP_SUB: *out = pv_triple_make(t.v - u.v, t.p + u.m, t.m + u.p); return true;
    case PV_OP_EQ: *out = pv_bool(eq); return true;
    case PV_OP_NE: *out = pv_bool(!eq); return true;
    case PV_OP_LT: *out = pv_bool(t.v + t.p < u.v - u.m); return true;
    case PV_OP_GT: *out = pv_bool(t.v - t.m > u.v + u.p); return true;
    case PV_OP_LE: *out = pv_bool(eq || t.v + t.p < u.v - u.m); return true;
    case PV_OP_GE: *out = pv_bool(eq || t.v - t.m > u.v + u.p); return true;
    default: return false;
    }
}

static pv binary(pv_binop op, pv a, pv b)
{
    pv r;
    if (a.kind == PV_NUM && b.kind == PV_NUM) {
        if (num_fast(op, a.num, b.num, &r))
            return r;
    } else if ((a.kind == PV_TRIPLE || b.kind == PV_TRIPLE) && triple_fast(op, a, b, &r)) {
        return r;
    }
    return pv_binary(op, a, b);
}

/* ---- typed evaluation --------------------------------------------------------------
 * Every expression's static type is known after checking, so numbers,
 * booleans and triples are evaluated without boxing them into a pv: ev_num
 * returns false for UNDEFINED, ev_bool returns 1/0/-1, ev_tri false for
 * UNDEFINED. Their results are exactly what the generic path (value.c)
 * gives; anything uncommon falls back to it. */

static bool ev_num(ps_evalctx *ev, const ps_expr *e, double *out);
static int ev_bool(ps_evalctx *ev, const ps_expr *e);
static bool ev_tri(ps_evalctx *ev, const ps_expr *e, pv_triple *out);
static pv eval_generic(ps_evalctx *ev, const ps_expr *e);

static inline bool finite_num(double x, double *out)
{
    if (!isfinite(x))
        return false;
    *out = x;
    return true;
}

static inline bool tri_ok(pv_triple t)
{
    return isfinite(t.v) && isfinite(t.p) && isfinite(t.m) && t.p >= 0 && t.m >= 0;
}

/* A generic result as a number (false for UNDEFINED or another kind). */
static inline bool pv_as_num(pv v, double *out)
{
    bool ok = v.kind == PV_NUM;
    if (ok)
        *out = v.num;
    pv_free(v);
    return ok;
}

static bool ev_num(ps_evalctx *ev, const ps_expr *e, double *out)
{
    switch ((ps_expr_kind)e->kind) {
    case X_NUM: *out = e->num; return true;
    case X_TIMELIT: *out = ps_time_ticks(ev, e->time.num, e->time.unit_ns); return true;
    case X_CONST: {
        const pv *v = ev->consts ? &ev->consts[e->cst->id] : NULL;
        if (!v || v->kind != PV_NUM)
            return false;
        *out = v->num;
        return true;
    }
    case X_ATTR: {
        const pv_event *be = bound_event(ev, e->field.obj);
        if (be) {
            double a = e->field.index < be->nattr ? be->attr[e->field.index] : PV_ATTR_UNDEF;
            if (!pv_attr_defined(a))
                return false;
            *out = a;
            return true;
        }
        return pv_as_num(eval_generic(ev, e), out);
    }
    case X_METRIC:
        if (e->field.obj->kind == X_VAR) {
            const pv *v = &ev->slots[e->field.obj->var->slot];
            if (v->kind == PV_INTERVAL && e->field.index < v->iv->nmetric) {
                const pv *m = &v->iv->metric[e->field.index];
                if (m->kind != PV_NUM)
                    return false;
                *out = m->num;
                return true;
            }
        }
        return pv_as_num(eval_generic(ev, e), out);
    case X_PART: {
        pv_triple t;
        if (!ev_tri(ev, e->field.obj, &t))
            return false;
        *out = e->op == 'v' ? t.v : e->op == 'p' ? t.p : t.m;
        return true;
    }
    case X_BUILTIN:
        if (e->op == B_THREAD) {
            const pv_event *be = bound_event(ev, e->call.args[0]);
            if (be) {
                *out = (double)be->thread;
                return true;
            }
        }
        return pv_as_num(eval_generic(ev, e), out);
    case X_NEG: {
        double a;
        if (!ev_num(ev, e->bin.a, &a))
            return false;
        *out = -a;
        return true;
    }
    case X_BINARY: {
        double a, b;
        switch ((pv_binop)e->op) {
        case PV_OP_ADD: case PV_OP_SUB: case PV_OP_MUL: case PV_OP_DIV: {
            bool da = ev_num(ev, e->bin.a, &a), db = ev_num(ev, e->bin.b, &b);
            if (!da || !db)
                return false;
            switch ((pv_binop)e->op) {
            case PV_OP_ADD: return finite_num(a + b, out);
            case PV_OP_SUB: return finite_num(a - b, out);
            case PV_OP_MUL: return finite_num(a * b, out);
            default: return b != 0 && finite_num(a / b, out);
            }
        }
        default:
            return pv_as_num(eval_generic(ev, e), out);
        }
    }
    case X_AGG:
        if (e->agg->place == AGG_METRIC && e->agg->op == PV_AGG_COUNT && ev->accs) {
            pv_acc *acc = ev->accs[e->agg->id];
            pv r = pv_acc_result(acc);
            return pv_as_num(r, out);
        }
        return pv_as_num(eval_generic(ev, e), out);
    default:
        return pv_as_num(eval_generic(ev, e), out);
    }
}

/* Figure 9 on two triples. */
static inline int tri_rel(pv_binop op, pv_triple t, pv_triple u)
{
    bool eq = t.v - t.m <= u.v + u.p && t.v + t.p >= u.v - u.m;
    switch (op) {
    case PV_OP_EQ: return eq;
    case PV_OP_NE: return !eq;
    case PV_OP_LT: return t.v + t.p < u.v - u.m;
    case PV_OP_GT: return t.v - t.m > u.v + u.p;
    case PV_OP_LE: return eq || t.v + t.p < u.v - u.m;
    case PV_OP_GE: return eq || t.v - t.m > u.v + u.p;
    default: return -1;
    }
}

static inline int num_rel(pv_binop op, double a, double b)
{
    switch (op) {
    case PV_OP_EQ: return a == b;
    case PV_OP_NE: return a != b;
    case PV_OP_LT: return a < b;
    case PV_OP_LE: return a <= b;
    case PV_OP_GT: return a > b;
    case PV_OP_GE: return a >= b;
    default: return -1;
    }
}

static inline bool is_rel(pv_binop op)
{
    return op == PV_OP_EQ || op == PV_OP_NE || op == PV_OP_LT || op == PV_OP_LE || op == PV_OP_GT ||
           op == PV_OP_GE;
}

/* a op b for a relation, with the operands' static types. */
static int ev_rel(ps_evalctx *ev, pv_binop op, const ps_expr *a, const ps_expr *b)
{
    ps_type_kind ta = a->type->kind, tb = b->type->kind;
    if (ta == T_NUM && tb == T_NUM) {
        double x, y;
        bool dx = ev_num(ev, a, &x), dy = ev_num(ev, b, &y);
        return dx && dy ? num_rel(op, x, y) : -1;
    }
    if ((ta == T_NUM || ta == T_TRIPLE) && (tb == T_NUM || tb == T_TRIPLE)) {
        pv_triple x, y;
        bool dx = ev_tri(ev, a, &x), dy = ev_tri(ev, b, &y);
        return dx && dy ? tri_rel(op, x, y) : -1;
    }
    if (ta == T_BOOL && tb == T_BOOL && (op == PV_OP_EQ || op == PV_OP_NE)) {
        int x = ev_bool(ev, a), y = ev_bool(ev, b);
        if (x < 0 || y < 0)
            return -1;
        return op == PV_OP_EQ ? x == y : x != y;
    }
    return -1;
}

static int pv_as_bool(pv v)
{
    int r = v.kind == PV_BOOL ? (v.b ? 1 : 0) : -1;
    pv_free(v);
    return r;
}

static int ev_bool(ps_evalctx *ev, const ps_expr *e)
{
    switch ((ps_expr_kind)e->kind) {
    case X_BOOL: return e->b;
    case X_NOT: {
        int a = ev_bool(ev, e->bin.a);
        return a < 0 ? -1 : !a;
    }
    case X_BINARY: {
        pv_binop op = (pv_binop)e->op;
        if (op == PV_OP_AND || op == PV_OP_OR || op == PV_OP_IMPLIES) {
            if (e->type->kind != T_BOOL)
                break;
            int a = ev_bool(ev, e->bin.a), b = ev_bool(ev, e->bin.b); /* both, always (A.9.10) */
            if (a < 0 || b < 0)
                return -1;
            return op == PV_OP_AND ? (a && b) : op == PV_OP_OR ? (a || b) : (!a || b);
        }
        if (is_rel(op))
            return ev_rel(ev, op, e->bin.a, e->bin.b);
        break;
    }
    case X_METRIC:
        if (e->field.obj->kind == X_VAR) {
            const pv *v = &ev->slots[e->field.obj->var->slot];
            if (v->kind == PV_INTERVAL && e->field.index < v->iv->nmetric) {
                const pv *m = &v->iv->metric[e->field.index];
                return m->kind == PV_BOOL ? m->b : -1;
            }
        }
        break;
    default:
        break;
    }
    return pv_as_bool(eval_generic(ev, e));
}

static inline pv_triple timestamp_of(int64_t ts)
{
    pv_triple t = {(double)ts, 1, 0};
    return t;
}

/* elapsed(e, s) of A.9.11 on two triples; false when it is not a duration. */
static inline bool elapsed_of(pv_triple e, pv_triple s, pv_triple *out)
{
    double d = e.v - s.v;
    pv_triple r = {d, e.p + s.m, d < e.m + s.p ? d : e.m + s.p};
    if (!tri_ok(r))
        return false;
    *out = r;
    return true;
}

static bool pv_as_tri(pv v, pv_triple *out)
{
    bool ok = true;
    if (v.kind == PV_TRIPLE)
        *out = v.t;
    else if (v.kind == PV_NUM)
        *out = (pv_triple){v.num, 0, 0};
    else
        ok = false;
    pv_free(v);
    return ok;
}

static bool ev_tri(ps_evalctx *ev, const ps_expr *e, pv_triple *out)
{
    if (e->type->kind == T_NUM) {
        double x;
        if (!ev_num(ev, e, &x))
            return false;
        *out = (pv_triple){x, 0, 0};
        return true;
    }
    switch ((ps_expr_kind)e->kind) {
    case X_BUILTIN:
        if (e->op == B_TIMESTAMP) {
            const pv_event *be = bound_event(ev, e->call.args[0]);
            if (be) {
                *out = timestamp_of(be->ts);
                return true;
            }
        } else if (e->op == B_ELAPSED && e->call.nargs == 1 && e->call.args[0]->kind == X_VAR) {
            const pv *v = &ev->slots[e->call.args[0]->var->slot];
            if (v->kind == PV_INTERVAL)
                return elapsed_of(timestamp_of(v->iv->end->ts), timestamp_of(v->iv->start->ts), out);
        } else if (e->op == B_ELAPSED && e->call.nargs == 2) {
            const pv_event *a = bound_event(ev, e->call.args[0]), *b = bound_event(ev, e->call.args[1]);
            if (a && b)
                return elapsed_of(timestamp_of(a->ts), timestamp_of(b->ts), out);
        }
        break;
    case X_METRIC:
        if (e->field.obj->kind == X_VAR) {
            const pv *v = &ev->slots[e->field.obj->var->slot];
            if (v->kind == PV_INTERVAL && e->field.index < v->iv->nmetric) {
                const pv *m = &v->iv->metric[e->field.index];
                if (m->kind == PV_TRIPLE) {
                    *out = m->t;
                    return true;
                }
                if (m->kind == PV_NUM) {
                    *out = (pv_triple){m->num, 0, 0};
                    return true;
                }
                return false;
            }
        }
        break;
    case X_BINARY:
        if (e->op == PV_OP_ADD || e->op == PV_OP_SUB) {
            pv_triple t, u;
            bool dt = ev_tri(ev, e->bin.a, &t), du = ev_tri(ev, e->bin.b, &u);
            if (!dt || !du)
                return false;
            pv_triple r = e->op == PV_OP_ADD ? (pv_triple){t.v + u.v, t.p + u.p, t.m + u.m}
                                             : (pv_triple){t.v - u.v, t.p + u.m, t.m + u.p};
            if (!tri_ok(r))
                return false;
            *out = r;
            return true;
        }
        break;
    case X_NEG: {
        pv_triple t;
        if (!ev_tri(ev, e->bin.a, &t))
            return false;
        *out = (pv_triple){-t.v, t.m, t.p};
        return true;
    }
    default:
        break;
    }
    return pv_as_tri(eval_generic(ev, e), out);
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
    pv_acc *acc = ps_agg_acc_new(a);
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
    switch (e->type ? e->type->kind : T_ERROR) {
    case T_NUM: {
        double x;
        return ev_num(ev, e, &x) ? pv_num(x) : pv_undef();
    }
    case T_BOOL: {
        int b = ev_bool(ev, e);
        return b < 0 ? pv_undef() : pv_bool(b);
    }
    case T_TRIPLE: {
        pv_triple t;
        return ev_tri(ev, e, &t) ? pv_triple_make(t.v, t.p, t.m) : pv_undef();
    }
    default:
        return eval_generic(ev, e);
    }
}

/* Every expression kind, with values boxed. */
static pv eval_generic(ps_evalctx *ev, const ps_expr *e)
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
    return ev_bool(ev, e);
}

bool ps_eval_num(ps_evalctx *ev, const ps_expr *e, double *out)
{
    return ev_num(ev, e, out);
}

bool ps_eval_tri(ps_evalctx *ev, const ps_expr *e, pv_triple *out)
{
    return ev_tri(ev, e, out);
}
