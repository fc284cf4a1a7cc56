/* summary.h — summaries of interval durations for pcheck --summaries
 * (docs/man/pcheck.1): for each interval type, each duration metric
 * (ps_metric_is_duration: exactly ts(e) - ts(s)) is summarised over the
 * intervals that closed since the last summary: count, sum, sum of
 * squares, min and max, in nanoseconds, and a relative-error sketch in the
 * manner of DDSketch, mergeable by adding counts: a value x > 0 falls in
 * bucket i = ceil(log(x) / log(PS_SUMMARY_GAMMA)), which stands for
 * 2 gamma^i / (gamma + 1), within 1% of every value in it; x < 0 in the
 * bucket of -x on the negative side; 0 is counted apart. The telemonitor
 * keeps them per program version (telemonctl compare). */
#ifndef PSPEC_SUMMARY_H
#define PSPEC_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>

#include "ast.h"
#include "value.h"

#define PS_SUMMARY_GAMMA (1.01 / 0.99)   /* 1% relative error */
#define PS_SUMMARY_BUCKETS 4096          /* per side: |x| from gamma^-2048 to gamma^2047 */

/* One duration metric of one interval type, since its last summary. */
typedef struct ps_summary {
    const ps_ivtype *type;
    uint32_t metric;            /* index in type->metrics */
    uint64_t count, zero;       /* values, and those exactly 0 */
    double sum, sumsq, min, max;
    uint64_t *b[2];             /* the counts of positive [0] and negative [1] values: bucket i
                                   (at i + 2048) is b[side][i + 2048 - base[side]], for the
                                   buckets the window [base, base + cap) holds; NULL until the
                                   first value of that side (a stream keeps one per metric, so
                                   not 2 x 32 KiB each) */
    int base[2], cap[2];
    int lo[2], hi[2];           /* the used range of each side (lo > hi: none) */
} ps_summary;

/* The count of bucket k (0..PS_SUMMARY_BUCKETS-1) of a side, lo <= k <= hi. */
static inline uint64_t ps_summary_bucket(const ps_summary *s, int side, int k)
{
    return s->b[side][k - s->base[side]];
}

/* The summaries of prog's duration metrics: *n of them (NULL when none),
 * grouped by interval type in type order; those of type i are
 * [(*first)[i], (*first)[i + 1]) (*first: heap, [ivtypes + 1]). */
ps_summary *ps_summaries_new(const ps_program *prog, uint32_t *n, uint32_t **first);
void ps_summaries_free(ps_summary *s, uint32_t n);
/* Add value x (nanoseconds). */
void ps_summary_add(ps_summary *s, double x);
/* Start again from nothing (after a summary was reported). */
void ps_summary_reset(ps_summary *s);

#endif
