/* test_summary.c — the duration summaries' sketch (summary.c): its buckets
 * live in a window that grows toward the values seen (a stream keeps one
 * per duration metric, so not 2 x 4,096 counters from the start). Whatever
 * the order and spread of the values, every bucket must hold what the
 * formula of summary.h puts in it, counted on a full array here, and the
 * used range must be exactly the buckets hit; after a reset, the same again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "summary.h"

/* The bucket summary.h says x falls in (x != 0, finite). */
static int bucket_of(double x)
{
    double i = ceil(log(fabs(x)) / log(PS_SUMMARY_GAMMA)) + PS_SUMMARY_BUCKETS / 2;
    return i < 0 ? 0 : i >= PS_SUMMARY_BUCKETS ? PS_SUMMARY_BUCKETS - 1 : (int)i;
}

static ps_summary fresh(void)
{
    ps_summary s;
    memset(&s, 0, sizeof s);
    s.lo[0] = s.lo[1] = PS_SUMMARY_BUCKETS;
    s.hi[0] = s.hi[1] = -1;
    return s;
}

/* Add n values of one shape and compare with full arrays. */
static void check_values(ps_summary *s, const double *v, size_t n)
{
    static uint64_t want[2][PS_SUMMARY_BUCKETS];
    uint64_t zero = 0;
    memset(want, 0, sizeof want);
    for (size_t i = 0; i < n; i++) {
        ps_summary_add(s, v[i]);
        if (v[i] == 0)
            zero++;
        else
            want[v[i] < 0][bucket_of(v[i])]++;
    }
    assert_int_equal(s->count, n);
    assert_int_equal(s->zero, zero);
    for (int side = 0; side < 2; side++) {
        int lo = PS_SUMMARY_BUCKETS, hi = -1;
        for (int k = 0; k < PS_SUMMARY_BUCKETS; k++)
            if (want[side][k]) {
                lo = k < lo ? k : lo;
                hi = k;
            }
        assert_int_equal(s->lo[side], lo);
        assert_int_equal(s->hi[side], hi);
        for (int k = lo; k <= hi; k++)
            assert_int_equal(ps_summary_bucket(s, side, k), want[side][k]);
        if (hi >= 0)    /* the window holds the range, inside the array */
            assert_true(s->base[side] >= 0 && s->base[side] <= lo &&
                        s->base[side] + s->cap[side] > hi && s->base[side] + s->cap[side] <= PS_SUMMARY_BUCKETS);
    }
}

static void buckets_as_the_formula_says(void **state)
{
    (void)state;
    enum { N = 20000 };
    double *v = malloc(N * sizeof *v);
    srand(7);
    ps_summary s = fresh();
    /* one value, then ever further out on both sides of it, both signs,
     * zeros, and the extremes that clamp to the first and last bucket */
    for (size_t i = 0; i < N; i++) {
        double m = pow(10, (double)(rand() % 40) - 12) * (1 + rand() % 1000 / 1000.0);
        v[i] = i % 97 == 0 ? 0 : (rand() % 5 == 0 ? -m : m);
    }
    v[1] = 1e-300;
    v[2] = 1e300;
    v[3] = -1e-300;
    check_values(&s, v, N);
    /* again after a reset, a narrow spread (a stream's usual shape) */
    ps_summary_reset(&s);
    assert_int_equal(s.count, 0);
    for (size_t i = 0; i < N; i++)
        v[i] = 10e6 + rand() % 100000;
    check_values(&s, v, N);
    /* and descending: the window grows downward */
    ps_summary_reset(&s);
    for (size_t i = 0; i < 200; i++)
        v[i] = 1e9 / (double)(i + 1);
    check_values(&s, v, 200);
    free(s.b[0]);
    free(s.b[1]);
    free(v);
}

/* A side never hit keeps no counters at all. */
static void nothing_kept_for_an_unused_side(void **state)
{
    (void)state;
    ps_summary s = fresh();
    double v[3] = { 5e6, 7e6, 0 };
    check_values(&s, v, 3);
    assert_null(s.b[1]);
    assert_true(s.cap[0] <= 64);           /* (5 and 7 ms are 17 buckets apart) */
    free(s.b[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(buckets_as_the_formula_says),
        cmocka_unit_test(nothing_kept_for_an_unused_side),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
