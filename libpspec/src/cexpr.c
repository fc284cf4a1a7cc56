/* cexpr.c — compiling expressions into trees of specialised nodes.
 *
 * Every node function mirrors one fast path of eval.c's typed evaluators
 * (ev_num, ev_bool, ev_tri) for one expression kind; when its run-time
 * assumption does not hold (the binder's slot holds something else, no
 * metric accumulators are set) it calls eval.c on the source expression,
 * so results never differ. Expression kinds without a node here are always
 * handed to eval.c. Evaluation has no side effects, so a node may stop at
 * the first UNDEFINED operand where eval.c evaluates both.
 */
#include "cexpr.h"

#include <math.h>
#include <string.h>

void cx_init(cx_compiler *cc, ps_evalctx *ev)
{
    memset(cc, 0, sizeof *cc);
    cc->ev = ev;
}

void cx_free(cx_compiler *cc)
{
    ps_arena_free(&cc->arena);
}

static inline ps_type_kind tkind(const ps_expr *e)
{
    return e->type ? e->type->kind : T_ERROR;
}

static cx *node(cx_compiler *cc, const ps_expr *e)
{
    cx *c = PS_NEW(&cc->arena, cx);
    c->e = e;
    c->konst = 2;
    return c;
}

/* Bind node c to binder slot `slot` of the compiler's context. */
static void set_slot(cx_compiler *cc, cx *c, int64_t slot)
{
    c->slot = (uint32_t)slot;
    c->sp = cc->ev->slots ? &cc->ev->slots[slot] : NULL;   /* no slots: only compiled, never run */
}

/* The binder slot of an X_VAR operand, or -1. */
static int64_t var_slot(const ps_expr *e)
{
    return e->kind == X_VAR ? (int64_t)e->var->slot : -1;
}

/* A valid triple: finite, p and m not negative (x - x is NaN unless x is finite). */
static inline bool tri_ok(pv_triple t)
{
    return t.p >= 0 && t.m >= 0 && (t.v - t.v) + (t.p - t.p) + (t.m - t.m) == 0;
}

static inline bool finite_num(double x, double *out)
{
    if (!isfinite(x))
        return false;
    *out = x;
    return true;
}

/* elapsed(e, s) of A.9.11 on two timestamps [ts, 1, 0]. */
static inline bool elapsed_ts(int64_t e_ts, int64_t s_ts, pv_triple *out)
{
    pv_triple e = {(double)e_ts, 1, 0}, s = {(double)s_ts, 1, 0};
    double d = e.v - s.v;
    pv_triple r = {d, e.p + s.m, d < e.m + s.p ? d : e.m + s.p};
    if (!tri_ok(r))
        return false;
    *out = r;
    return true;
}

/* ---- numbers ---------------------------------------------------------------------- */

static bool num_fallback(const cx *c, ps_evalctx *ev, double *out)
{
    return ps_eval_num(ev, c->e, out);
}

static bool num_const(const cx *c, ps_evalctx *ev, double *out)
{
    (void)ev;
    *out = c->k;
    return true;
}

static bool num_constref(const cx *c, ps_evalctx *ev, double *out)
{
    const pv *v = ev->consts ? &ev->consts[c->index] : NULL;
    if (!v || v->kind != PV_NUM)
        return false;
    *out = v->num;
    return true;
}

static inline __attribute__((always_inline)) bool num_attr_body(const cx *c, ps_evalctx *ev, double *out)
{
    const pv *v = c->sp;
    if (PS_UNLIKELY(v->kind != PV_EVENT))
        return num_fallback(c, ev, out);
    const pv_event *be = v->ev;
    double a = c->index < be->nattr ? be->attr[c->index] : PV_ATTR_UNDEF;
    if (!pv_attr_defined(a))
        return false;
    *out = a;
    return true;
}

static bool num_attr(const cx *c, ps_evalctx *ev, double *out)
{
    return num_attr_body(c, ev, out);
}

static inline __attribute__((always_inline)) bool num_metric_body(const cx *c, ps_evalctx *ev, double *out)
{
    const pv *v = c->sp;
    if (PS_UNLIKELY(v->kind != PV_INTERVAL || c->index >= v->iv->nmetric))
        return num_fallback(c, ev, out);
    const pv *m = &v->iv->metric[c->index];
    if (m->kind != PV_NUM)
        return false;
    *out = m->num;
    return true;
}

static bool num_metric(const cx *c, ps_evalctx *ev, double *out)
{
    return num_metric_body(c, ev, out);
}

static bool num_thread(const cx *c, ps_evalctx *ev, double *out)
{
    const pv *v = c->sp;
    if (PS_UNLIKELY(v->kind != PV_EVENT))
        return num_fallback(c, ev, out);
    *out = (double)v->ev->thread;
    return true;
}

static bool num_part(const cx *c, ps_evalctx *ev, double *out)
{
    pv_triple t;
    if (!c->a->tri(c->a, ev, &t))
        return false;
    *out = c->op == 'v' ? t.v : c->op == 'p' ? t.p : t.m;
    return true;
}

static bool num_neg(const cx *c, ps_evalctx *ev, double *out)
{
    double a;
    if (!c->a->num(c->a, ev, &a))
        return false;
    *out = -a;
    return true;
}

#define NUM_ARITH(name, expr)                                           \
    static bool name(const cx *c, ps_evalctx *ev, double *out)          \
    {                                                                   \
        double a, b;                                                    \
        if (!c->a->num(c->a, ev, &a) || !c->b->num(c->b, ev, &b))       \
            return false;                                               \
        return expr;                                                    \
    }
NUM_ARITH(num_add, finite_num(a + b, out))
NUM_ARITH(num_sub, finite_num(a - b, out))
NUM_ARITH(num_mul, finite_num(a * b, out))
NUM_ARITH(num_div, b != 0 && finite_num(a / b, out))

static inline __attribute__((always_inline)) bool num_metric_agg_body(const cx *c, ps_evalctx *ev, double *out)
{
    if (PS_UNLIKELY(!ev->accs))
        return num_fallback(c, ev, out);
    return pv_acc_result_num(ev->accs[c->index], out);
}

static bool num_metric_agg(const cx *c, ps_evalctx *ev, double *out)
{
    return num_metric_agg_body(c, ev, out);
}

static cx *num_k(cx_compiler *cc, const ps_expr *e, double k)
{
    cx *c = node(cc, e);
    c->num = num_const;
    c->k = k;
    return c;
}

/* A literal number, or NULL. */
static bool literal_num(cx_compiler *cc, const ps_expr *e, double *k)
{
    if (e->kind == X_NUM) {
        *k = e->num;
        return true;
    }
    if (e->kind == X_TIMELIT) {
        *k = ps_time_ticks(cc->ev, e->time.num, e->time.unit_ns);
        return true;
    }
    return false;
}

const cx *cx_num(cx_compiler *cc, const ps_expr *e)
{
    double k;
    if (literal_num(cc, e, &k))
        return num_k(cc, e, k);
    cx *c = node(cc, e);
    c->num = num_fallback;
    switch ((ps_expr_kind)e->kind) {
    case X_CONST:
        c->num = num_constref;
        c->index = e->cst->id;
        break;
    case X_ATTR:
    case X_METRIC:
        if (var_slot(e->field.obj) >= 0) {
            c->num = e->kind == X_ATTR ? num_attr : num_metric;
            set_slot(cc, c, var_slot(e->field.obj));
            c->index = e->field.index;
        }
        break;
    case X_PART:
        c->num = num_part;
        c->a = cx_tri(cc, e->field.obj);
        c->op = e->op;
        break;
    case X_BUILTIN:
        if (e->op == B_THREAD && var_slot(e->call.args[0]) >= 0) {
            c->num = num_thread;
            set_slot(cc, c, var_slot(e->call.args[0]));
        }
        break;
    case X_NEG:
        c->num = num_neg;
        c->a = cx_num(cc, e->bin.a);
        break;
    case X_BINARY:
        switch ((pv_binop)e->op) {
        case PV_OP_ADD: c->num = num_add; break;
        case PV_OP_SUB: c->num = num_sub; break;
        case PV_OP_MUL: c->num = num_mul; break;
        case PV_OP_DIV: c->num = num_div; break;
        default: break;
        }
        if (c->num != num_fallback) {
            c->a = cx_num(cc, e->bin.a);
            c->b = cx_num(cc, e->bin.b);
        }
        break;
    case X_AGG:
        if (e->agg->place == AGG_METRIC) {
            c->num = num_metric_agg;
            c->index = e->agg->id;
        }
        break;
    default:
        break;
    }
    return c;
}

/* ---- triples ---------------------------------------------------------------------- */

static bool tri_fallback(const cx *c, ps_evalctx *ev, pv_triple *out)
{
    return ps_eval_tri(ev, c->e, out);
}

static bool tri_of_num(const cx *c, ps_evalctx *ev, pv_triple *out)
{
    double x;
    if (!c->a->num(c->a, ev, &x))
        return false;
    *out = (pv_triple){x, 0, 0};
    return true;
}

static bool tri_ts(const cx *c, ps_evalctx *ev, pv_triple *out)
{
    const pv *v = c->sp;
    if (PS_UNLIKELY(v->kind != PV_EVENT))
        return tri_fallback(c, ev, out);
    *out = (pv_triple){(double)v->ev->ts, 1, 0};
    return true;
}

static bool tri_elapsed_iv(const cx *c, ps_evalctx *ev, pv_triple *out)
{
    const pv *v = c->sp;
    if (PS_UNLIKELY(v->kind != PV_INTERVAL))
        return tri_fallback(c, ev, out);
    return elapsed_ts(v->iv->end->ts, v->iv->start->ts, out);
}

static bool tri_elapsed_ev(const cx *c, ps_evalctx *ev, pv_triple *out)
{
    const pv *a = c->sp, *b = c->sp2;
    if (PS_UNLIKELY(a->kind != PV_EVENT || b->kind != PV_EVENT))
        return tri_fallback(c, ev, out);
    return elapsed_ts(a->ev->ts, b->ev->ts, out);
}

/* ts(x) - ts(y) of two bound events: the usual duration. */
static inline __attribute__((always_inline)) bool tri_sub_ts_body(const cx *c, ps_evalctx *ev, pv_triple *out)
{
    const pv *a = c->sp, *b = c->sp2;
    if (PS_UNLIKELY(a->kind != PV_EVENT || b->kind != PV_EVENT))
        return tri_fallback(c, ev, out);
    pv_triple t = {(double)a->ev->ts, 1, 0}, u = {(double)b->ev->ts, 1, 0};
    pv_triple r = {t.v - u.v, t.p + u.m, t.m + u.p};
    if (!tri_ok(r))
        return false;
    *out = r;
    return true;
}

static bool tri_sub_ts(const cx *c, ps_evalctx *ev, pv_triple *out)
{
    return tri_sub_ts_body(c, ev, out);
}

static inline __attribute__((always_inline)) bool tri_metric_body(const cx *c, ps_evalctx *ev, pv_triple *out)
{
    const pv *v = c->sp;
    if (PS_UNLIKELY(v->kind != PV_INTERVAL || c->index >= v->iv->nmetric))
        return tri_fallback(c, ev, out);
    const pv *m = &v->iv->metric[c->index];
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

static bool tri_metric(const cx *c, ps_evalctx *ev, pv_triple *out)
{
    return tri_metric_body(c, ev, out);
}

static bool tri_add(const cx *c, ps_evalctx *ev, pv_triple *out)
{
    pv_triple t, u;
    if (!c->a->tri(c->a, ev, &t) || !c->b->tri(c->b, ev, &u))
        return false;
    pv_triple r = {t.v + u.v, t.p + u.p, t.m + u.m};
    if (!tri_ok(r))
        return false;
    *out = r;
    return true;
}

static bool tri_sub(const cx *c, ps_evalctx *ev, pv_triple *out)
{
    pv_triple t, u;
    if (!c->a->tri(c->a, ev, &t) || !c->b->tri(c->b, ev, &u))
        return false;
    pv_triple r = {t.v - u.v, t.p + u.m, t.m + u.p};
    if (!tri_ok(r))
        return false;
    *out = r;
    return true;
}

static bool tri_neg(const cx *c, ps_evalctx *ev, pv_triple *out)
{
    pv_triple t;
    if (!c->a->tri(c->a, ev, &t))
        return false;
    *out = (pv_triple){-t.v, t.m, t.p};
    return true;
}

/* A generic result as a triple (eval.c's pv_as_tri). */
static bool as_tri(pv v, pv_triple *out)
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

static bool tri_metric_agg(const cx *c, ps_evalctx *ev, pv_triple *out)
{
    if (PS_UNLIKELY(!ev->accs))
        return tri_fallback(c, ev, out);
    return as_tri(pv_acc_result(ev->accs[c->index]), out);
}

static bool tri_constref(const cx *c, ps_evalctx *ev, pv_triple *out)
{
    if (PS_UNLIKELY(!ev->consts))
        return tri_fallback(c, ev, out);
    return as_tri(pv_copy(ev->consts[c->index]), out);
}

/* ts(x) or timestamp(x) of a binder: its slot, or -1. */
static int64_t ts_slot(const ps_expr *e)
{
    if (e->kind == X_BUILTIN && (e->op == B_TIMESTAMP || e->op == B_TS))
        return var_slot(e->call.args[0]);
    return -1;
}

const cx *cx_tri(cx_compiler *cc, const ps_expr *e)
{
    cx *c = node(cc, e);
    if (tkind(e) == T_NUM) {
        c->tri = tri_of_num;
        c->a = cx_num(cc, e);
        return c;
    }
    c->tri = tri_fallback;
    switch ((ps_expr_kind)e->kind) {
    case X_CONST:
        c->tri = tri_constref;
        c->index = e->cst->id;
        break;
    case X_BUILTIN:
        if (ts_slot(e) >= 0) {
            c->tri = tri_ts;
            set_slot(cc, c, ts_slot(e));
        } else if (e->op == B_ELAPSED && e->call.nargs == 1 && var_slot(e->call.args[0]) >= 0) {
            c->tri = tri_elapsed_iv;
            set_slot(cc, c, var_slot(e->call.args[0]));
        } else if (e->op == B_ELAPSED && e->call.nargs == 2 && var_slot(e->call.args[0]) >= 0 &&
                   var_slot(e->call.args[1]) >= 0) {
            c->tri = tri_elapsed_ev;
            set_slot(cc, c, var_slot(e->call.args[0]));
            c->sp2 = cc->ev->slots ? &cc->ev->slots[var_slot(e->call.args[1])] : NULL;
        }
        break;
    case X_METRIC:
        if (var_slot(e->field.obj) >= 0) {
            c->tri = tri_metric;
            set_slot(cc, c, var_slot(e->field.obj));
            c->index = e->field.index;
        }
        break;
    case X_BINARY:
        if (e->op == PV_OP_SUB && ts_slot(e->bin.a) >= 0 && ts_slot(e->bin.b) >= 0) {
            c->tri = tri_sub_ts;
            set_slot(cc, c, ts_slot(e->bin.a));
            c->sp2 = cc->ev->slots ? &cc->ev->slots[ts_slot(e->bin.b)] : NULL;
        } else if (e->op == PV_OP_ADD || e->op == PV_OP_SUB) {
            c->tri = e->op == PV_OP_ADD ? tri_add : tri_sub;
            c->a = cx_tri(cc, e->bin.a);
            c->b = cx_tri(cc, e->bin.b);
        }
        break;
    case X_NEG:
        c->tri = tri_neg;
        c->a = cx_tri(cc, e->bin.a);
        break;
    case X_AGG:
        if (e->agg->place == AGG_METRIC) {
            c->tri = tri_metric_agg;
            c->index = e->agg->id;
        }
        break;
    default:
        break;
    }
    return c;
}

/* ---- booleans --------------------------------------------------------------------- */

static int cond_fallback(const cx *c, ps_evalctx *ev)
{
    return ps_eval_cond(ev, c->e);
}

static int cond_const(const cx *c, ps_evalctx *ev)
{
    (void)ev;
    return c->konst;
}

static int cond_not(const cx *c, ps_evalctx *ev)
{
    int a = c->a->cond(c->a, ev);
    return a < 0 ? -1 : !a;
}

static int cond_and(const cx *c, ps_evalctx *ev)
{
    int a = c->a->cond(c->a, ev);
    if (a < 0)
        return -1;
    int b = c->b->cond(c->b, ev);
    return b < 0 ? -1 : (a && b);
}

static int cond_or(const cx *c, ps_evalctx *ev)
{
    int a = c->a->cond(c->a, ev);
    if (a < 0)
        return -1;
    int b = c->b->cond(c->b, ev);
    return b < 0 ? -1 : (a || b);
}

static int cond_implies(const cx *c, ps_evalctx *ev)
{
    int a = c->a->cond(c->a, ev);
    if (a < 0)
        return -1;
    int b = c->b->cond(c->b, ev);
    return b < 0 ? -1 : (!a || b);
}

static int cond_metric(const cx *c, ps_evalctx *ev)
{
    const pv *v = c->sp;
    if (PS_UNLIKELY(v->kind != PV_INTERVAL || c->index >= v->iv->nmetric))
        return cond_fallback(c, ev);
    const pv *m = &v->iv->metric[c->index];
    return m->kind == PV_BOOL ? m->b : -1;
}

static int as_cond(pv v)
{
    int r = v.kind == PV_BOOL ? (v.b ? 1 : 0) : -1;
    pv_free(v);
    return r;
}

static int cond_metric_agg(const cx *c, ps_evalctx *ev)
{
    if (PS_UNLIKELY(!ev->accs))
        return cond_fallback(c, ev);
    return as_cond(pv_acc_result(ev->accs[c->index]));
}

static int cond_constref(const cx *c, ps_evalctx *ev)
{
    if (PS_UNLIKELY(!ev->consts))
        return cond_fallback(c, ev);
    const pv *v = &ev->consts[c->index];
    return v->kind == PV_BOOL ? v->b : -1;
}

/* Relations on numbers: both operands, or an operand against a constant. */
#define NUM_REL(name, OP)                                               \
    static int name(const cx *c, ps_evalctx *ev)                        \
    {                                                                   \
        double a, b;                                                    \
        if (!c->a->num(c->a, ev, &a) || !c->b->num(c->b, ev, &b))       \
            return -1;                                                  \
        return a OP b;                                                  \
    }                                                                   \
    static int name##_k(const cx *c, ps_evalctx *ev)                    \
    {                                                                   \
        double a;                                                       \
        if (!c->a->num(c->a, ev, &a))                                   \
            return -1;                                                  \
        return a OP c->k;                                               \
    }
NUM_REL(num_eq, ==)
NUM_REL(num_ne, !=)
NUM_REL(num_lt, <)
NUM_REL(num_le, <=)
NUM_REL(num_gt, >)
NUM_REL(num_ge, >=)

/* The same against a constant, with the operand c->a an attribute or a
 * number metric of a bound binder, or a metric aggregate, evaluated inline. */
#define NUM_REL_FUSED(name, OP)                                         \
    static int name##_attr_k(const cx *c, ps_evalctx *ev)               \
    {                                                                   \
        double a;                                                       \
        if (!num_attr_body(c->a, ev, &a))                               \
            return -1;                                                  \
        return a OP c->k;                                               \
    }                                                                   \
    static int name##_metric_k(const cx *c, ps_evalctx *ev)             \
    {                                                                   \
        double a;                                                       \
        if (!num_metric_body(c->a, ev, &a))                             \
            return -1;                                                  \
        return a OP c->k;                                               \
    }                                                                   \
    static int name##_agg_k(const cx *c, ps_evalctx *ev)                \
    {                                                                   \
        double a;                                                       \
        if (!num_metric_agg_body(c->a, ev, &a))                         \
            return -1;                                                  \
        return a OP c->k;                                               \
    }
NUM_REL_FUSED(num_eq, ==)
NUM_REL_FUSED(num_ne, !=)
NUM_REL_FUSED(num_lt, <)
NUM_REL_FUSED(num_le, <=)
NUM_REL_FUSED(num_gt, >)
NUM_REL_FUSED(num_ge, >=)

/* Figure 9 on two triples (eval.c's tri_rel). */
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

static int tri_rel_cx(const cx *c, ps_evalctx *ev)
{
    pv_triple t, u;
    if (!c->a->tri(c->a, ev, &t) || !c->b->tri(c->b, ev, &u))
        return -1;
    return tri_rel((pv_binop)c->op, t, u);
}

/* A triple against a constant number k, i.e. the triple [k, 0, 0]; and the
 * same with the operand c->a a metric of a bound binder, inline. */
#define TRI_REL_K(name, OP)                                             \
    static int name##_k(const cx *c, ps_evalctx *ev)                    \
    {                                                                   \
        pv_triple t;                                                    \
        if (!c->a->tri(c->a, ev, &t))                                   \
            return -1;                                                  \
        return tri_rel(OP, t, (pv_triple){c->k, 0, 0});                 \
    }                                                                   \
    static int name##_metric_k(const cx *c, ps_evalctx *ev)             \
    {                                                                   \
        const cx *a = c->a;                                             \
        const pv *v = a->sp;                              \
        if (PS_LIKELY(v->kind == PV_INTERVAL && a->index < v->iv->nmetric)) { \
            const pv *m = &v->iv->metric[a->index];                     \
            if (m->kind == PV_TRIPLE)                                   \
                return tri_rel(OP, m->t, (pv_triple){c->k, 0, 0});      \
            if (m->kind == PV_NUM)                                      \
                return tri_rel(OP, (pv_triple){m->num, 0, 0}, (pv_triple){c->k, 0, 0}); \
            return -1;                                                  \
        }                                                               \
        return name##_k(c, ev);   /* c->a falls back to eval.c */       \
    }
TRI_REL_K(tri_eq, PV_OP_EQ)
TRI_REL_K(tri_ne, PV_OP_NE)
TRI_REL_K(tri_lt, PV_OP_LT)
TRI_REL_K(tri_le, PV_OP_LE)
TRI_REL_K(tri_gt, PV_OP_GT)
TRI_REL_K(tri_ge, PV_OP_GE)

static int bool_rel(const cx *c, ps_evalctx *ev)
{
    int a = c->a->cond(c->a, ev);
    if (a < 0)
        return -1;
    int b = c->b->cond(c->b, ev);
    if (b < 0)
        return -1;
    return c->op == PV_OP_EQ ? a == b : a != b;
}

static const cx *compile_cond(cx_compiler *cc, const ps_expr *e, const ps_expr *assume);

static cx *cond_k(cx_compiler *cc, const ps_expr *e, int k)
{
    cx *c = node(cc, e);
    c->cond = cond_const;
    c->konst = (int8_t)k;
    return c;
}

static bool is_rel(pv_binop op)
{
    return op == PV_OP_EQ || op == PV_OP_NE || op == PV_OP_LT || op == PV_OP_LE || op == PV_OP_GT ||
           op == PV_OP_GE;
}

/* k op x as x op' k. */
static pv_binop mirror(pv_binop op)
{
    switch (op) {
    case PV_OP_LT: return PV_OP_GT;
    case PV_OP_GT: return PV_OP_LT;
    case PV_OP_LE: return PV_OP_GE;
    case PV_OP_GE: return PV_OP_LE;
    default: return op;
    }
}

/* a op b for a relation, by the operands' static types (eval.c's ev_rel). */
static const cx *compile_rel(cx_compiler *cc, const ps_expr *e, pv_binop op, const ps_expr *a, const ps_expr *b)
{
    ps_type_kind ta = tkind(a), tb = tkind(b);
    cx *c = node(cc, e);
    c->op = (uint8_t)op;
    double k;
    if (ta == T_NUM && tb == T_NUM) {
        static int (*const both[])(const cx *, ps_evalctx *) = {
            [PV_OP_EQ] = num_eq, [PV_OP_NE] = num_ne, [PV_OP_LT] = num_lt,
            [PV_OP_LE] = num_le, [PV_OP_GT] = num_gt, [PV_OP_GE] = num_ge,
        };
        static int (*const with_k[])(const cx *, ps_evalctx *) = {
            [PV_OP_EQ] = num_eq_k, [PV_OP_NE] = num_ne_k, [PV_OP_LT] = num_lt_k,
            [PV_OP_LE] = num_le_k, [PV_OP_GT] = num_gt_k, [PV_OP_GE] = num_ge_k,
        };
        static int (*const attr_k[])(const cx *, ps_evalctx *) = {
            [PV_OP_EQ] = num_eq_attr_k, [PV_OP_NE] = num_ne_attr_k, [PV_OP_LT] = num_lt_attr_k,
            [PV_OP_LE] = num_le_attr_k, [PV_OP_GT] = num_gt_attr_k, [PV_OP_GE] = num_ge_attr_k,
        };
        static int (*const metric_k[])(const cx *, ps_evalctx *) = {
            [PV_OP_EQ] = num_eq_metric_k, [PV_OP_NE] = num_ne_metric_k, [PV_OP_LT] = num_lt_metric_k,
            [PV_OP_LE] = num_le_metric_k, [PV_OP_GT] = num_gt_metric_k, [PV_OP_GE] = num_ge_metric_k,
        };
        static int (*const agg_k[])(const cx *, ps_evalctx *) = {
            [PV_OP_EQ] = num_eq_agg_k, [PV_OP_NE] = num_ne_agg_k, [PV_OP_LT] = num_lt_agg_k,
            [PV_OP_LE] = num_le_agg_k, [PV_OP_GT] = num_gt_agg_k, [PV_OP_GE] = num_ge_agg_k,
        };
        const ps_expr *x = NULL;
        if (literal_num(cc, b, &k)) {
            x = a;
        } else if (literal_num(cc, a, &k)) {
            x = b;
            op = mirror(op);
        }
        if (x) {
            c->a = cx_num(cc, x);
            c->k = k;
            c->cond = c->a->num == num_attr         ? attr_k[op]
                      : c->a->num == num_metric     ? metric_k[op]
                      : c->a->num == num_metric_agg ? agg_k[op]
                                                    : with_k[op];
        } else {
            c->cond = both[op];
            c->a = cx_num(cc, a);
            c->b = cx_num(cc, b);
        }
        return c;
    }
    if ((ta == T_NUM || ta == T_TRIPLE) && (tb == T_NUM || tb == T_TRIPLE)) {
        static int (*const with_k[])(const cx *, ps_evalctx *) = {
            [PV_OP_EQ] = tri_eq_k, [PV_OP_NE] = tri_ne_k, [PV_OP_LT] = tri_lt_k,
            [PV_OP_LE] = tri_le_k, [PV_OP_GT] = tri_gt_k, [PV_OP_GE] = tri_ge_k,
        };
        static int (*const metric_k[])(const cx *, ps_evalctx *) = {
            [PV_OP_EQ] = tri_eq_metric_k, [PV_OP_NE] = tri_ne_metric_k, [PV_OP_LT] = tri_lt_metric_k,
            [PV_OP_LE] = tri_le_metric_k, [PV_OP_GT] = tri_gt_metric_k, [PV_OP_GE] = tri_ge_metric_k,
        };
        if (tb == T_NUM && literal_num(cc, b, &k)) {
            c->a = cx_tri(cc, a);
            c->k = k;
            c->cond = c->a->tri == tri_metric ? metric_k[op] : with_k[op];
        } else {
            c->cond = tri_rel_cx;
            c->a = cx_tri(cc, a);
            c->b = cx_tri(cc, b);
        }
        return c;
    }
    if (ta == T_BOOL && tb == T_BOOL && (op == PV_OP_EQ || op == PV_OP_NE)) {
        c->cond = bool_rel;
        c->a = compile_cond(cc, a, NULL);
        c->b = compile_cond(cc, b, NULL);
        return c;
    }
    return cond_k(cc, e, -1);
}

static const cx *compile_cond(cx_compiler *cc, const ps_expr *e, const ps_expr *assume)
{
    if (e == assume)
        return cond_k(cc, e, 1);
    switch ((ps_expr_kind)e->kind) {
    case X_BOOL:
        return cond_k(cc, e, e->b);
    case X_NOT: {
        const cx *a = compile_cond(cc, e->bin.a, NULL);
        if (a->konst != 2)
            return cond_k(cc, e, a->konst < 0 ? -1 : !a->konst);
        cx *c = node(cc, e);
        c->cond = cond_not;
        c->a = a;
        return c;
    }
    case X_BINARY: {
        pv_binop op = (pv_binop)e->op;
        if ((op == PV_OP_AND || op == PV_OP_OR || op == PV_OP_IMPLIES) && tkind(e) == T_BOOL) {
            /* Only a conjunction passes the assumption on. */
            const ps_expr *down = op == PV_OP_AND ? assume : NULL;
            const cx *a = compile_cond(cc, e->bin.a, down), *b = compile_cond(cc, e->bin.b, down);
            if (a->konst == -1)
                return a;
            if (op == PV_OP_AND && a->konst == 1)
                return b;
            if (op == PV_OP_AND && b->konst == 1)
                return a;
            cx *c = node(cc, e);
            c->cond = op == PV_OP_AND ? cond_and : op == PV_OP_OR ? cond_or : cond_implies;
            c->a = a;
            c->b = b;
            return c;
        }
        if (is_rel(op))
            return compile_rel(cc, e, op, e->bin.a, e->bin.b);
        break;
    }
    case X_METRIC:
        if (var_slot(e->field.obj) >= 0) {
            cx *c = node(cc, e);
            c->cond = cond_metric;
            set_slot(cc, c, var_slot(e->field.obj));
            c->index = e->field.index;
            return c;
        }
        break;
    case X_AGG:
        if (e->agg->place == AGG_METRIC) {
            cx *c = node(cc, e);
            c->cond = cond_metric_agg;
            c->index = e->agg->id;
            return c;
        }
        break;
    case X_CONST: {
        cx *c = node(cc, e);
        c->cond = cond_constref;
        c->index = e->cst->id;
        return c;
    }
    default:
        break;
    }
    cx *c = node(cc, e);
    c->cond = cond_fallback;
    return c;
}

const cx *cx_cond(cx_compiler *cc, const ps_expr *e, const ps_expr *assume)
{
    if (!e)
        return NULL;
    const cx *c = compile_cond(cc, e, assume);
    return c->konst == 1 ? NULL : c;
}

/* ---- boxed results ---------------------------------------------------------------- */

static void box_num(const cx *c, ps_evalctx *ev, pv *out)
{
    double x;
    *out = c->num(c, ev, &x) ? pv_num(x) : pv_undef();
}

static void box_num_attr(const cx *c, ps_evalctx *ev, pv *out)
{
    double x;
    *out = num_attr_body(c, ev, &x) ? pv_num(x) : pv_undef();
}

static void box_cond(const cx *c, ps_evalctx *ev, pv *out)
{
    int b = c->cond(c, ev);
    *out = b < 0 ? pv_undef() : pv_bool(b);
}

static void box_tri(const cx *c, ps_evalctx *ev, pv *out)
{
    pv_triple t;
    *out = c->tri(c, ev, &t) ? pv_triple_make(t.v, t.p, t.m) : pv_undef();
}

static void box_tri_sub_ts(const cx *c, ps_evalctx *ev, pv *out)
{
    pv_triple t;
    if (!tri_sub_ts_body(c, ev, &t)) {
        *out = pv_undef();
        return;
    }
    /* tri_ok held: pv_triple_make would only turn -0 into 0 in p and m. */
    out->kind = PV_TRIPLE;
    out->t = (pv_triple){t.v, t.p + 0.0, t.m + 0.0};
}

static void box_generic(const cx *c, ps_evalctx *ev, pv *out)
{
    *out = ps_eval(ev, c->e);
}

static void box_none(const cx *c, ps_evalctx *ev, pv *out)
{
    (void)c;
    (void)ev;
    *out = pv_undef();
}

cx_val cx_value(cx_compiler *cc, const ps_expr *e)
{
    cx_val v;
    if (!e) {
        v.kind = CX_NONE;
        v.c = node(cc, NULL);
        v.box = box_none;
        return v;
    }
    switch (tkind(e)) {
    case T_NUM:
        v.kind = CX_NUM;
        v.c = cx_num(cc, e);
        v.box = v.c->num == num_attr ? box_num_attr : box_num;
        break;
    case T_BOOL:
        v.kind = CX_BOOL;
        v.c = compile_cond(cc, e, NULL);
        v.box = box_cond;
        break;
    case T_TRIPLE:
        v.kind = CX_TRI;
        v.c = cx_tri(cc, e);
        v.box = v.c->tri == tri_sub_ts ? box_tri_sub_ts : box_tri;
        break;
    default:
        v.kind = CX_GENERIC;
        v.c = node(cc, e);
        v.box = box_generic;
        break;
    }
    return v;
}

/* ---- structural equality ---------------------------------------------------------- */

static bool same_list(ps_expr *const *a, ps_expr *const *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (!cx_same_expr(a[i], b[i]))
            return false;
    return true;
}

static bool same_num(double a, double b)
{
    return a == b && signbit(a) == signbit(b);
}

bool cx_same_expr(const ps_expr *a, const ps_expr *b)
{
    if (a == b)
        return true;
    if (!a || !b || a->kind != b->kind || a->op != b->op || a->type != b->type)
        return false;
    switch ((ps_expr_kind)a->kind) {
    case X_NUM: return same_num(a->num, b->num);
    case X_TIMELIT: return same_num(a->time.num, b->time.num) && same_num(a->time.unit_ns, b->time.unit_ns);
    case X_BOOL: return a->b == b->b;
    case X_STR: return strcmp(a->str, b->str) == 0;
    case X_CONST: return a->cst == b->cst;
    case X_VAR: return a->var == b->var;
    case X_ATTR:
    case X_METRIC:
    case X_PART: return a->field.index == b->field.index && cx_same_expr(a->field.obj, b->field.obj);
    case X_BUILTIN:
    case X_APPLY:
        return a->call.nargs == b->call.nargs && cx_same_expr(a->call.fn, b->call.fn) &&
               same_list(a->call.args, b->call.args, a->call.nargs);
    case X_NEG:
    case X_NOT: return cx_same_expr(a->bin.a, b->bin.a);
    case X_BINARY:
    case X_MAPONE:
    case X_IF:
    case X_ELSE: return cx_same_expr(a->bin.a, b->bin.a) && cx_same_expr(a->bin.b, b->bin.b);
    case X_CHAIN:
    case X_TRIPLE:
    case X_MAPLIST:
        if (a->list.n != b->list.n || !same_list(a->list.items, b->list.items, a->list.n))
            return false;
        if (a->kind == X_CHAIN)
            return a->list.n < 2 || memcmp(a->list.ops, b->list.ops, a->list.n - 1) == 0;
        return true;
    default: return false;     /* aggregates and unresolved names: only the same node */
    }
}
