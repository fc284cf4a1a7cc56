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
 * tie groups of t^3 - t, from the two sorted samples merged. */
static void mann_whitney(const double *x, size_t n1, const double *y, size_t n2, double *u,
			 double *ties)
{
	size_t i = 0, j = 0;
	double rank = 1, ry = 0;

	*ties = 0;
	while (i < n1 || j < n2) {
		double v = j >= n2 || (i < n1 && x[i] <= y[j]) ? x[i] : y[j];
		size_t cx = 0, cy = 0;
		while (i < n1 && x[i] == v) {
			i++;
			cx++;
		}
		while (j < n2 && y[j] == v) {
			j++;
			cy++;
		}
		double t = (double)(cx + cy), mid = rank + (t - 1) / 2;
		ry += mid * (double)cy;
		rank += t;
		*ties += t * t * t - t;
	}
	*u = ry - (double)n2 * ((double)n2 + 1) / 2;
}

int cmp_samples(double *x, size_t n1, double *y, size_t n2, struct cmp_result *out)
{
	const double z975 = 1.959963984540054;
	double u, ties, nn = (double)n1 * (double)n2, var, z, *d;
	size_t nd = n1 * n2, k = 0;

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
	mann_whitney(x, n1, y, n2, &u, &ties);
	var = nn / 12 * (((double)n1 + (double)n2 + 1) -
			 ties / (((double)n1 + (double)n2) * ((double)n1 + (double)n2 - 1)));
	z = var > 0 ? (u - nn / 2 - (u > nn / 2 ? 0.5 : u < nn / 2 ? -0.5 : 0)) / sqrt(var) : 0;
	out->p = erfc(fabs(z) / sqrt(2));
	d = malloc(nd * sizeof *d);
	if (!d)
		return -ENOMEM;
	for (size_t i = 0; i < n1; i++)
		for (size_t j = 0; j < n2; j++)
			d[k++] = y[j] - x[i];
	qsort(d, nd, sizeof *d, cmp_double);
	out->shift = median_sorted(d, nd);
	/* Moses: the C-th smallest and C-th largest differences, C from the
	 * U distribution's 2.5% point */
	double c = floor(nn / 2 - z975 * sqrt(var > 0 ? var : nn * (n1 + n2 + 1) / 12.0));
	size_t ci = c < 1 ? 0 : (size_t)c - 1;
	if (ci >= nd)
		ci = nd - 1;
	out->lo = d[ci];
	out->hi = d[nd - 1 - ci];
	free(d);
	out->direction = out->lo > 0 ? 1 : out->hi < 0 ? -1 : 0;
	return 0;
}
