/* eval.h — evaluating checked PSpec expressions (private).
 *
 * An evaluation context holds the values bound to binders (slots, borrowed),
 * the values of constants and of top-level aggregates already computed, and
 * — while an interval's metrics are being computed — that interval's metric
 * accumulators. ps_eval returns an owned value (value.h's rules).
 */
#ifndef PSPEC_EVAL_H
#define PSPEC_EVAL_H

#include "ast.h"
#include "value.h"

typedef struct ps_evalctx {
    pv *slots;              /* binder slot -> bound value (borrowed; not freed here) */
    uint32_t nslots;
    pv *consts;             /* const id -> value (owned by the run) */
    pv *topvals;            /* top-level aggregate id -> value (owned by the run) */
    pv_acc **accs;          /* metric accumulators of the interval being closed */
    double tick_ns;         /* nanoseconds per tick, for time units */
} ps_evalctx;

/* Value of `e` (owned). */
pv ps_eval(ps_evalctx *ev, const ps_expr *e);

/* A boolean expression: 1 true, 0 false, -1 UNDEFINED. */
int ps_eval_cond(ps_evalctx *ev, const ps_expr *e);

/* A number-typed expression: false when UNDEFINED. */
bool ps_eval_num(ps_evalctx *ev, const ps_expr *e, double *out);

/* A number- or triple-typed expression as a triple: false when UNDEFINED
 * (numbers n become [n,0,0]). */
bool ps_eval_tri(ps_evalctx *ev, const ps_expr *e, pv_triple *out);

/* Value of a time literal `num unit` in ticks. */
double ps_time_ticks(const ps_evalctx *ev, double num, double unit_ns);

#endif
