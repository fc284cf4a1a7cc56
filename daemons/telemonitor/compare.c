/* Two-sample comparison for telemonctl compare (compare.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median_sorted(const double *v, size_t n)
{
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* U statistic of y over x (pairs with y > x, ties half) and the sum over
 * tie groups of t^3 - t, from two binned samples sorted by value (a plain
 * sample is bins of count 1). */
static void mann_whitney(const struct cmp_bin *x, size_t nx, const struct cmp_bin *y, size_t ny,
			 double n2, double *u, double *ties)
{
	size_t i = 0, j = 0;
	double rank = 1, ry = 0;

	*ties = 0;
	while (i < nx || j < ny) {
		double v = j >= ny || (i < nx && x[i].value <= y[j].value) ? x[i].value : y[j].value;
		double cx = 0, cy = 0;
		while (i < nx && x[i].value == v)
			cx += x[i++].count;
		while (j < ny && y[j].value == v)
			cy += y[j++].count;
		double t = cx + cy, mid = rank + (t - 1) / 2;
		ry += mid * cy;
		rank += t;
		*ties += t * t * t - t;
	}
	*u = ry - n2 * (n2 + 1) / 2;
}

static int cmp_bin_value(const void *a, const void *b)
{
	double x = ((const struct cmp_bin *)a)->value, y = ((const struct cmp_bin *)b)->value;

	return (x > y) - (x < y);
}

/* The value at weighted rank r (1-based) of bins sorted by value. */
static double at_rank(const struct cmp_bin *d, size_t nd, double r)
{
	double acc = 0;

	for (size_t k = 0; k < nd; k++) {
		acc += d[k].count;
		if (acc >= r)
			return d[k].value;
	}
	return d[nd - 1].value;
}

/* The test, the shift and its interval from the two binned samples (x, y
 * sorted, n1 and n2 values in all); fills out. */
static int compare_bins(const struct cmp_bin *x, size_t nx, double n1, const struct cmp_bin *y,
			size_t ny, double n2, struct cmp_result *out)
{
	const double z975 = 1.959963984540054;
	double u, ties, nn = n1 * n2, var, z;
	size_t nd = nx * ny, k = 0;
	struct cmp_bin *d;

	mann_whitney(x, nx, y, ny, n2, &u, &ties);
	var = nn / 12 * ((n1 + n2 + 1) - ties / ((n1 + n2) * (n1 + n2 - 1)));
	z = var > 0 ? (u - nn / 2 - (u > nn / 2 ? 0.5 : u < nn / 2 ? -0.5 : 0)) / sqrt(var) : 0;
	out->p = erfc(fabs(z) / sqrt(2));
	d = malloc(nd * sizeof *d);
	if (!d)
		return -ENOMEM;
	for (size_t i = 0; i < nx; i++)
		for (size_t j = 0; j < ny; j++)
			d[k++] = (struct cmp_bin){ y[j].value - x[i].value, x[i].count * y[j].count };
	qsort(d, nd, sizeof *d, cmp_bin_value);
	out->shift = (at_rank(d, nd, floor((nn + 1) / 2)) + at_rank(d, nd, ceil((nn + 1) / 2))) / 2;
	/* Moses: the C-th smallest and C-th largest differences, C from the
	 * U distribution's 2.5% point */
	double c = floor(nn / 2 - z975 * sqrt(var > 0 ? var : nn * (n1 + n2 + 1) / 12));
	if (c < 1)
		c = 1;
	out->lo = at_rank(d, nd, c);
	out->hi = at_rank(d, nd, nn - c + 1);
	free(d);
	out->direction = out->lo > 0 ? 1 : out->hi < 0 ? -1 : 0;
	return 0;
}

/* The weighted median of bins sorted by value. */
static double bins_median(const struct cmp_bin *v, size_t n, double total)
{
	return (at_rank(v, n, floor((total + 1) / 2)) + at_rank(v, n, ceil((total + 1) / 2))) / 2;
}

int cmp_samples(double *x, size_t n1, double *y, size_t n2, struct cmp_result *out)
{
	struct cmp_bin *bx, *by;
	int rc;

	memset(out, 0, sizeof *out);
	out->n1 = n1;
	out->n2 = n2;
	if (n1 < CMP_MIN_SAMPLES || n2 < CMP_MIN_SAMPLES || n1 > CMP_MAX_SAMPLES ||
	    n2 > CMP_MAX_SAMPLES)
		return -EINVAL;
	qsort(x, n1, sizeof *x, cmp_double);
	qsort(y, n2, sizeof *y, cmp_double);
	out->med1 = median_sorted(x, n1);
	out->med2 = median_sorted(y, n2);
	bx = malloc(n1 * sizeof *bx);
	by = malloc(n2 * sizeof *by);
	if (!bx || !by) {
		free(bx);
		free(by);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n1; i++)
		bx[i] = (struct cmp_bin){ x[i], 1 };
	for (size_t j = 0; j < n2; j++)
		by[j] = (struct cmp_bin){ y[j], 1 };
	rc = compare_bins(bx, n1, (double)n1, by, n2, (double)n2, out);
	free(bx);
	free(by);
	return rc;
}

int cmp_binned(const struct cmp_bin *x, size_t nx, const struct cmp_bin *y, size_t ny,
	       struct cmp_result *out)
{
	double n1 = 0, n2 = 0;

	memset(out, 0, sizeof *out);
	for (size_t i = 0; i < nx; i++)
		n1 += x[i].count;
	for (size_t j = 0; j < ny; j++)
		n2 += y[j].count;
	out->n1 = (size_t)n1;
	out->n2 = (size_t)n2;
	if (nx > CMP_MAX_BINS || ny > CMP_MAX_BINS)
		return -E2BIG;
	if (n1 < CMP_MIN_SAMPLES || n2 < CMP_MIN_SAMPLES)
		return -EINVAL;
	out->med1 = bins_median(x, nx, n1);
	out->med2 = bins_median(y, ny, n2);
	return compare_bins(x, nx, n1, y, ny, n2, out);
}
