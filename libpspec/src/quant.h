/* quant.h — the state of a quantile aggregate {pN x : T : e} (private).
 *
 * A ps_quant keeps the values it is given exactly, up to PS_QUANT_EXACT_MAX;
 * past that it turns into a deterministic compactor sketch (KLL's levels,
 * with PS_QUANT_SKETCH_K entries per level and alternating rather than
 * random halves), which counts the worst-case rank error its compactions
 * can have introduced. ps_quant_result turns either into the triple the
 * language gives: the nearest-rank sample quantile, with a distribution-free
 * PS_QUANT_CONFIDENCE interval for the population quantile from order
 * statistics, widened by the sketch's rank error.
 *
 * Ownership: a ps_quant belongs to the accumulator that made it
 * (value_acc.c); ps_quant_free releases it and everything it holds.
 */
#ifndef PSPEC_QUANT_H
#define PSPEC_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "value.h"

/* Values kept exactly per aggregate instance before switching to the sketch. */
#define PS_QUANT_EXACT_MAX 100000
/* Entries a level of the sketch compacts at (it holds up to 1.5 times this). */
#define PS_QUANT_SKETCH_K 16384
/* Confidence of the interval: P(lower <= population quantile <= upper). */
#define PS_QUANT_CONFIDENCE 0.95
/* Levels of the sketch: enough for 2^64 values at PS_QUANT_SKETCH_K. */
#define PS_QUANT_LEVELS 52

typedef struct ps_quant ps_quant;

/* An empty state (never NULL: allocation failure aborts, util.h). */
ps_quant *ps_quant_new(void);
void ps_quant_free(ps_quant *q);            /* NULL ok */
/* Add one value (finite; the caller filters). */
void ps_quant_add(ps_quant *q, double x);
/* Values added so far. */
uint64_t ps_quant_count(const ps_quant *q);
/* Whether the values are kept exactly (no sketch yet). */
bool ps_quant_exact(const ps_quant *q);
/* Worst-case rank error E of ps_quant_at: 0 while exact. */
uint64_t ps_quant_rank_error(const ps_quant *q);
/* Entries the state holds now (values, or sketch entries). */
uint64_t ps_quant_entries(const ps_quant *q);
/* The value at rank r (1 <= r <= count) in ascending order: exactly X_(r)
 * while exact; from the sketch, a value between X_(r-E) and X_(r+E)
 * (ranks clamped to 1..count). May reorder q's storage (not its contents). */
double ps_quant_at(ps_quant *q, uint64_t r);
/* Ranks of the order statistics that bound the population p-quantile
 * (0 < p < 1) of n samples: l is the largest rank with P(X_(l) > q_p) <=
 * (1-CONFIDENCE)/2 and u the smallest with P(X_(u) < q_p) <= (1-CONFIDENCE)/2,
 * both from Binomial(n, p); l = 0 when no order statistic bounds it below
 * with that confidence, u = n + 1 when none bounds it above. */
void ps_quant_ranks(uint64_t n, double p, uint64_t *l, uint64_t *u);
/* The nearest rank of the p-quantile among n values: ceil(p * n), at least 1. */
uint64_t ps_quant_nearest_rank(uint64_t n, double p);
/* The aggregate's value: [v, U - v, v - L] with v the nearest-rank
 * p-quantile and [L, U] the interval above widened by the rank error;
 * UNDEFINED when there are no values or either side is unbounded. */
pv ps_quant_result(ps_quant *q, double p);

#endif
