/* Did a metric change between two versions of a program? Two samples (the
 * values a report assertion's metric took under version 1 and under
 * version 2: one per report, e.g. per minute) are compared without
 * assuming a distribution: the Mann-Whitney U test (normal approximation
 * with the tie correction) for whether they differ, the Hodges-Lehmann
 * estimate of the shift (the median of every difference y - x) and its 95%
 * confidence interval from the same test (Moses' interval: ordered
 * differences at the ranks the U distribution gives). A change is detected
 * when the interval excludes 0. Pure computation: no I/O. */
#ifndef TELEMON_COMPARE_H
#define TELEMON_COMPARE_H

#include <stddef.h>

#define CMP_MIN_SAMPLES 5          /* fewer values on either side: no verdict */
#define CMP_MAX_SAMPLES 500        /* values kept per side (the latest): 250,000 differences */

/* What the comparison of two samples says. */
struct cmp_result {
	size_t n1, n2;            /* sample sizes */
	double med1, med2;        /* their medians */
	double shift;             /* Hodges-Lehmann estimate of y - x */
	double lo, hi;            /* its 95% confidence interval */
	double p;                 /* two-sided p-value of the Mann-Whitney test */
	int direction;            /* +1 y is higher, -1 lower, 0 no change detected
				     (or too few values) */
};

/* Compare samples x (n1 values) and y (n2); 0, or -EINVAL with fewer than
 * CMP_MIN_SAMPLES on a side or more than CMP_MAX_SAMPLES, -ENOMEM. The
 * arrays are sorted in place. */
int cmp_samples(double *x, size_t n1, double *y, size_t n2, struct cmp_result *out);

/* One bin of a binned sample: a value and how many times it occurs. */
struct cmp_bin {
	double value;
	double count;
};

#define CMP_MAX_BINS 1500          /* bins per side (a 1% sketch of 1 ns .. 10^12 ns has ~1400) */

/* The same test and estimates for two binned samples (each sorted by
 * value, counts > 0): values in one bin are ties; the shift and its
 * interval come from the bin-pair differences weighted by their counts.
 * 0, or -EINVAL (fewer than CMP_MIN_SAMPLES values on a side), -E2BIG
 * (more than CMP_MAX_BINS bins on a side), -ENOMEM. */
int cmp_binned(const struct cmp_bin *x, size_t nx, const struct cmp_bin *y, size_t ny,
	       struct cmp_result *out);

#endif
