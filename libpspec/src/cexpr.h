/* cexpr.h — expressions compiled for the engine's hot paths (private).
 *
 * The engine evaluates the same few expressions (where-clauses, keys,
 * metrics, aggregate values) for every event or interval. cx_* compile a
 * checked expression once per pass into a tree of nodes, each carrying a
 * function specialised for its kind and its operands' static types, working
 * on unboxed numbers, booleans and triples: an attribute of a bound event,
 * a metric of a bound interval, a relation against a constant, ... Time
 * literals are folded with the pass's tick length.
 *
 * Results are exactly those of eval.c (ps_eval_num, ps_eval_cond,
 * ps_eval_tri, ps_eval): a node for which nothing faster is known, or that
 * finds something unexpected at run time (a slot holding another kind of
 * value), evaluates its source expression with eval.c instead.
 *
 * Nodes live in the compiler's arena and are freed with it. They point into
 * the slot array of the context given to cx_init: evaluate them with that
 * context (the constants and accumulators may change, the slots may not move).
 */
#ifndef PSPEC_CEXPR_H
#define PSPEC_CEXPR_H

#include "arena.h"
#include "ast.h"
#include "eval.h"

typedef struct cx cx;

/* A compiled node. Which function is set depends on how it was compiled. */
struct cx {
    union {
        bool (*num)(const cx *c, ps_evalctx *ev, double *out);     /* false: UNDEFINED */
        int (*cond)(const cx *c, ps_evalctx *ev);                   /* 1, 0, -1 UNDEFINED */
        bool (*tri)(const cx *c, ps_evalctx *ev, pv_triple *out);  /* false: UNDEFINED */
    };
    const ps_expr *e;           /* source expression (the fallback evaluates it) */
    const cx *a, *b;            /* operands */
    double k;                   /* a constant operand */
    uint32_t slot, index;       /* a binder's slot; an attribute, metric or aggregate index */
    const pv *sp, *sp2;         /* that slot (and a second one) in the compiler's context */
    uint8_t op;                 /* pv_binop or triple part */
    int8_t konst;               /* cond nodes: 1/0/-1 when the result is constant, else 2 */
};

/* How a compiled value is boxed into a pv. */
typedef enum cx_kind { CX_NUM, CX_BOOL, CX_TRI, CX_GENERIC, CX_NONE } cx_kind;

/* An expression compiled by its static type, for a boxed result. */
typedef struct cx_val {
    const cx *c;                /* the compiled expression (its `e` is the source) */
    /* Evaluate c and store the result as ps_eval would return it (owned). */
    void (*box)(const cx *c, ps_evalctx *ev, pv *out);
    cx_kind kind;
} cx_val;

typedef struct cx_compiler {
    ps_arena arena;             /* the nodes */
    ps_evalctx *ev;             /* the pass's context: tick length for time literals */
} cx_compiler;

void cx_init(cx_compiler *cc, ps_evalctx *ev);
void cx_free(cx_compiler *cc);  /* frees every node */

/* A number-typed expression. */
const cx *cx_num(cx_compiler *cc, const ps_expr *e);
/* A number- or triple-typed expression, as a triple. */
const cx *cx_tri(cx_compiler *cc, const ps_expr *e);
/* A boolean expression. `assume` (may be NULL) is a conjunct of e (reached
 * from e through '&' only) known to be true wherever the result is used:
 * it is compiled as `true`, which does not change e's value there. Returns
 * NULL when the result is always true (nothing to evaluate). */
const cx *cx_cond(cx_compiler *cc, const ps_expr *e, const ps_expr *assume);
/* Any expression, for ps_eval-style boxed results; NULL gives CX_NONE,
 * whose value is UNDEFINED. */
cx_val cx_value(cx_compiler *cc, const ps_expr *e);

static inline bool cx_eval_num(const cx *c, ps_evalctx *ev, double *out)
{
    return c->num(c, ev, out);
}

static inline int cx_eval_cond(const cx *c, ps_evalctx *ev)
{
    return c->cond(c, ev);
}

static inline bool cx_eval_tri(const cx *c, ps_evalctx *ev, pv_triple *out)
{
    return c->tri(c, ev, out);
}

/* The value as ps_eval(ev, e) would give it (owned), e the source of v. */
static inline pv cx_eval(const cx_val *v, ps_evalctx *ev)
{
    pv r;
    v->box(v->c, ev, &r);
    return r;
}

/* Are two expressions the same computation (same structure, same binders,
 * same constants)? Used to share work between keys. */
bool cx_same_expr(const ps_expr *a, const ps_expr *b);

#endif
