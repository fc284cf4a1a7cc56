/* compare.c: the two-sample comparison behind telemonctl compare. A planted
 * 10% shift is found in each of 20 seeded runs (30 values a side with a
 * spread of 5%, as per-minute means of a few dozen reads have), with an
 * interval that holds the true shift; no change is said in at most 2 of 20
 * runs without one (5% expected); ties, constant samples and too few
 * values. (With a spread of 20% per value, 30 values a side find a 10%
 * shift only about half the time: the test's power, not a fault.) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include <stdlib.h>
#include <string.h>

#include "../../daemons/telemonitor/compare.c"
#include "../../daemons/telemonitor/json.c"
#include "../../daemons/telemonitor/sketch.c"

static uint64_t rng;

static double uniform(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}

/* Normal(mean, sd) by Box-Muller. */
static double normal(double mean, double sd)
{
	return mean + sd * sqrt(-2 * log(uniform())) * cos(2 * M_PI * uniform());
}

static void sample(double *v, size_t n, double mean)
{
	for (size_t i = 0; i < n; i++)
		v[i] = normal(mean, 0.05 * 1000);
}

/* 20 seeded runs of 30 values a side around 1000 and around mean_y: how
 * many called a change (direction != 0), how many found y higher, and how
 * many intervals held the true shift; every estimate lies inside its own
 * interval. */
static int seeded_runs(uint64_t first_seed, double mean_y, int *higher, int *covered)
{
	double x[30], y[30];
	int called = 0;

	*higher = *covered = 0;
	for (uint64_t seed = first_seed; seed < first_seed + 20; seed++) {
		struct cmp_result c;
		rng = 0x9e3779b97f4a7c15ULL * seed;
		sample(x, 30, 1000);
		sample(y, 30, mean_y);
		assert_int_equal(cmp_samples(x, 30, y, 30, &c), 0);
		called += c.direction != 0;
		*higher += c.direction == 1;
		*covered += c.lo <= mean_y - 1000 && mean_y - 1000 <= c.hi;
		assert_true(c.lo <= c.shift && c.shift <= c.hi);
	}
	return called;
}

static void planted_shift_found(void **state)
{
	int found, covered;

	(void)state;
	seeded_runs(1, 1100, &found, &covered);
	printf("planted +10%%: found in %d of 20 runs; interval held the shift in %d\n", found,
	       covered);
	assert_int_equal(found, 20);
	assert_true(covered >= 17);
}

static void no_change_rarely_called(void **state)
{
	int higher, covered, called = seeded_runs(101, 1000, &higher, &covered);

	(void)state;
	printf("no change: a change was called in %d of 20 runs\n", called);
	assert_true(called <= 2);
}

static void exact_small_case(void **state)
{
	double x[10], y[10];
	struct cmp_result c;

	(void)state;
	for (int i = 0; i < 10; i++) {
		x[i] = i + 1;
		y[i] = i + 11;
	}
	assert_int_equal(cmp_samples(x, 10, y, 10, &c), 0);
	assert_true(c.shift == 10);
	assert_true(c.med1 == 5.5 && c.med2 == 15.5);
	assert_true(c.lo > 0 && c.hi <= 19 && c.direction == 1);
	assert_true(c.p < 0.001);
	/* and the other way round */
	assert_int_equal(cmp_samples(y, 10, x, 10, &c), 0);
	assert_true(c.shift == -10 && c.direction == -1);
}

static void ties_and_constants(void **state)
{
	double x[6] = { 5, 5, 5, 5, 5, 5 }, y[6] = { 5, 5, 5, 5, 5, 5 };
	double a[8] = { 1, 1, 2, 2, 3, 3, 4, 4 }, b[8] = { 1, 2, 2, 3, 3, 4, 4, 4 };
	struct cmp_result c;

	(void)state;
	assert_int_equal(cmp_samples(x, 6, y, 6, &c), 0);
	assert_true(c.direction == 0 && c.shift == 0 && c.p == 1);
	assert_int_equal(cmp_samples(a, 8, b, 8, &c), 0);
	assert_true(c.direction == 0 && c.p > 0.2 && c.p <= 1);
}

static void too_few(void **state)
{
	double x[4] = { 1, 2, 3, 4 }, y[10] = { 0 };
	struct cmp_result c;

	(void)state;
	assert_int_equal(cmp_samples(x, 4, y, 10, &c), -EINVAL);
	assert_int_equal(c.direction, 0);
	/* and bins too many to pair: refused, not "too few" */
	static struct cmp_bin many[CMP_MAX_BINS + 1];
	for (int i = 0; i <= CMP_MAX_BINS; i++)
		many[i] = (struct cmp_bin){ i, 1 };
	assert_int_equal(cmp_binned(many, CMP_MAX_BINS + 1, many, 10, &c), -E2BIG);
}

/* A sketch's JSON text of n values drawn around `mean` (gamma of 1% error),
 * split into `parts` texts merged one by one into k. */
static void sketch_of(struct sketch *k, size_t n, double mean, int parts)
{
	const double gamma = 1.02 / 0.98;
	for (int part = 0; part < parts; part++) {
		static long counts[4000];
		char *text = malloc(200000);
		size_t len = 0;
		memset(counts, 0, sizeof counts);
		for (size_t i = 0; i < n / (size_t)parts; i++) {
			double x = normal(mean, 0.2 * mean);
			long idx = (long)ceil(log(x) / log(gamma));
			counts[idx + 2000]++;
		}
		len += (size_t)sprintf(text, "{\"gamma\":%.17g,\"zero\":0,\"pos\":{", gamma);
		bool first = true;
		for (long i = 0; i < 4000; i++)
			if (counts[i]) {
				len += (size_t)sprintf(text + len, "%s\"%ld\":%ld", first ? "" : ",",
						       i - 2000, counts[i]);
				first = false;
			}
		len += (size_t)sprintf(text + len, "}}");
		assert_int_equal(sketch_add_json(k, text, len), 0);
		free(text);
	}
}

/* Durations summarised by the checker's sketches: 20,000 intervals a side
 * in 10 summaries each, 20% spread; a 10% slowdown is found with a shift
 * within the sketch's 1% of the truth (100 us of 1 ms), none where there is
 * none; another gamma is refused. Then 20 seeded runs of each: a 10%
 * slowdown found every time, no change called at most twice. */
static void sketches_compared(void **state)
{
	struct sketch a = { 0 }, b = { 0 }, c = { 0 };
	struct cmp_bin *x, *y, *z;
	size_t nx, ny, nz;
	struct cmp_result r;

	(void)state;
	rng = 42;
	sketch_of(&a, 20000, 1e6, 10);
	sketch_of(&b, 20000, 1.1e6, 10);
	sketch_of(&c, 20000, 1e6, 10);
	assert_true(a.count == 20000 && b.count == 20000);
	assert_int_equal(sketch_bins(&a, &x, &nx), 0);
	assert_int_equal(sketch_bins(&b, &y, &ny), 0);
	assert_int_equal(sketch_bins(&c, &z, &nz), 0);
	for (size_t i = 1; i < nx; i++)
		assert_true(x[i - 1].value < x[i].value);
	assert_int_equal(cmp_binned(x, nx, y, ny, &r), 0);
	printf("sketches: shift %.0f ns [%.0f, %.0f], median %.0f -> %.0f\n", r.shift, r.lo, r.hi,
	       r.med1, r.med2);
	assert_true(r.direction == 1 && fabs(r.shift - 1e5) < 0.02e6);
	assert_true(fabs(r.med1 - 1e6) < 0.02e6);
	assert_int_equal(cmp_binned(x, nx, z, nz, &r), 0);
	assert_true(r.direction == 0);
	static const char other_gamma[] = "{\"gamma\":1.5,\"pos\":{\"1\":2}}", cut[] = "{\"gamma\":1.5,\"pos\":";
	assert_int_equal(sketch_add_json(&a, other_gamma, strlen(other_gamma)), -EINVAL);
	assert_int_equal(sketch_add_json(&a, cut, strlen(cut)), -EINVAL);
	assert_true(a.count == 20000);
	free(x);
	free(y);
	free(z);
	sketch_free(&a);
	sketch_free(&b);
	sketch_free(&c);
	int found = 0, called = 0;
	for (uint64_t seed = 1; seed <= 20; seed++) {
		struct sketch p = { 0 }, q = { 0 }, u = { 0 };
		rng = 0x9e3779b97f4a7c15ULL * (seed + 1000);
		sketch_of(&p, 2000, 1e6, 2);
		sketch_of(&q, 2000, 1.1e6, 2);
		sketch_of(&u, 2000, 1e6, 2);
		assert_int_equal(sketch_bins(&p, &x, &nx), 0);
		assert_int_equal(sketch_bins(&q, &y, &ny), 0);
		assert_int_equal(sketch_bins(&u, &z, &nz), 0);
		assert_int_equal(cmp_binned(x, nx, y, ny, &r), 0);
		found += r.direction == 1;
		assert_int_equal(cmp_binned(x, nx, z, nz, &r), 0);
		called += r.direction != 0;
		free(x);
		free(y);
		free(z);
		sketch_free(&p);
		sketch_free(&q);
		sketch_free(&u);
	}
	printf("sketches, 20 seeded runs of 2,000 a side: +10%% found %d times, no change called %d "
	       "times\n", found, called);
	assert_int_equal(found, 20);
	assert_true(called <= 2);
}

/* Plain samples and the same values as bins of count 1 agree. */
static void binned_agrees(void **state)
{
	double x[40], y[40];
	struct cmp_bin bx[40], by[40];
	struct cmp_result p, q;

	(void)state;
	rng = 7;
	sample(x, 40, 1000);
	sample(y, 40, 1040);
	for (int i = 0; i < 40; i++) {
		bx[i] = (struct cmp_bin){ round(x[i]), 1 };
		by[i] = (struct cmp_bin){ round(y[i]), 1 };
		x[i] = round(x[i]);
		y[i] = round(y[i]);
	}
	qsort(bx, 40, sizeof *bx, cmp_bin_value);
	qsort(by, 40, sizeof *by, cmp_bin_value);
	assert_int_equal(cmp_samples(x, 40, y, 40, &p), 0);
	assert_int_equal(cmp_binned(bx, 40, by, 40, &q), 0);
	assert_true(p.shift == q.shift && p.lo == q.lo && p.hi == q.hi && p.p == q.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(planted_shift_found),
		cmocka_unit_test(no_change_rarely_called),
		cmocka_unit_test(exact_small_case),
		cmocka_unit_test(ties_and_constants),
		cmocka_unit_test(too_few),
		cmocka_unit_test(sketches_compared),
		cmocka_unit_test(binned_agrees),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
