/* test_quant.c — quantile aggregates (quant.c): the binomial ranks of the
 * confidence interval, the nearest rank, the exact results, and the sketch
 * against exact answers (1,000,000 values from several distributions: every
 * answer within the rank error the sketch reports, and that error within
 * the bound quant.h states), plus the accumulator around it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "value.h"

/* ---- ranks of the interval -------------------------------------------------- */

/* P(B <= j), B ~ Binomial(n, p), summed directly in long double. */
static long double binom_cdf(uint64_t n, double p, int64_t j)
{
    if (j < 0)
        return 0;
    long double s = 0;
    for (uint64_t i = 0; i <= (uint64_t)j && i <= n; i++)
        s += expl(lgammal((long double)n + 1) - lgammal((long double)i + 1) - lgammal((long double)(n - i) + 1) +
                  (long double)i * logl(p) + (long double)(n - i) * log1pl(-(long double)p));
    return s;
}

typedef struct rank_case {
    const char *name;
    uint64_t n;
    double p;
    uint64_t l, u;      /* expected; l = 0 / u = n + 1: unbounded; ANY: not checked */
} rank_case;

#define ANY UINT64_MAX

static const rank_case rank_cases[] = {
    {"median of 10 (textbook X(2)..X(9))", 10, 0.5, 2, 9},
    {"median of 100", 100, 0.5, 40, 61},
    {"p90 of 100", 100, 0.9, 84, 96},
    {"median of 6: the extremes", 6, 0.5, 1, 6},
    {"median of 5: unbounded both sides", 5, 0.5, 0, 6},
    {"p99 of 367: 0.99^367 > 2.5%, no upper bound", 367, 0.99, ANY, 368},
    {"p99 of 368: the maximum bounds it", 368, 0.99, ANY, 368},
    {"p1 of 367: no lower bound", 367, 0.01, 0, ANY},
    {"p1 of 368: the minimum bounds it", 368, 0.01, 1, ANY},
    {"one value", 1, 0.5, 0, 2},
};

static void test_ranks_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < PS_ARRAY_LEN(rank_cases); i++) {
        const rank_case *c = &rank_cases[i];
        uint64_t l, u;
        ps_quant_ranks(c->n, c->p, &l, &u);
        if ((c->l != ANY && l != c->l) || (c->u != ANY && u != c->u))
            fail_msg("%s: got l=%llu u=%llu, want l=%llu u=%llu", c->name, (unsigned long long)l,
                     (unsigned long long)u, (unsigned long long)c->l, (unsigned long long)c->u);
    }
}

/* The ranks are the tightest with tails of at most 2.5% each, by direct sums. */
static void test_ranks_against_sums(void **state)
{
    (void)state;
    const uint64_t ns[] = {1, 2, 7, 20, 59, 100, 367, 1000, 5000};
    const double ps[] = {0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999};
    const long double alpha = 0.025L;
    for (size_t a = 0; a < PS_ARRAY_LEN(ns); a++) {
        for (size_t b = 0; b < PS_ARRAY_LEN(ps); b++) {
            uint64_t n = ns[a], l, u;
            double p = ps[b];
            ps_quant_ranks(n, p, &l, &u);
            /* P(X_(l) > q) = P(B <= l - 1) <= alpha < P(B <= l) */
            assert_true(binom_cdf(n, p, (int64_t)l - 1) <= alpha + 1e-12L);
            assert_true(binom_cdf(n, p, (int64_t)l) > alpha - 1e-12L);
            /* P(X_(u) < q) = P(B >= u) = 1 - P(B <= u - 1) <= alpha < P(B >= u - 1) */
            assert_true(u >= 1 && u <= n + 1);
            assert_true(1 - binom_cdf(n, p, (int64_t)u - 1) <= alpha + 1e-12L);
            assert_true(1 - binom_cdf(n, p, (int64_t)u - 2) > alpha - 1e-12L);
            uint64_t k = ps_quant_nearest_rank(n, p);
            if (l >= 1 && u <= n)
                assert_true(l <= k && k <= u);
        }
    }
}

static void test_nearest_rank(void **state)
{
    (void)state;
    assert_int_equal(ps_quant_nearest_rank(100, 0.07), 7);
    assert_int_equal(ps_quant_nearest_rank(10, 0.5), 5);
    assert_int_equal(ps_quant_nearest_rank(1000, 0.999), 999);
    assert_int_equal(ps_quant_nearest_rank(3, 0.5), 2);
    assert_int_equal(ps_quant_nearest_rank(1, 0.01), 1);
    assert_int_equal(ps_quant_nearest_rank(1, 0.99), 1);
}

/* ---- exact results ------------------------------------------------------------ */

static void expect_result(ps_quant *q, double p, const char *want)
{
    pv r = ps_quant_result(q, p);
    ps_buf b = {0};
    pv_format(&b, &r);
    assert_string_equal(ps_buf_str(&b), want);
    ps_buf_free(&b);
    pv_free(r);
}

static void test_exact_results(void **state)
{
    (void)state;
    ps_quant *q = ps_quant_new();
    expect_result(q, 0.5, "UNDEFINED");             /* empty */
    for (int i = 0; i < 100; i++)
        ps_quant_add(q, (double)((37 * i) % 100 + 1));
    assert_true(ps_quant_exact(q));
    assert_int_equal(ps_quant_rank_error(q), 0);
    expect_result(q, 0.5, "[50,11,10]");
    expect_result(q, 0.9, "[90,6,6]");
    expect_result(q, 0.99, "UNDEFINED");            /* no upper bound */
    ps_quant_add(q, 1000);                          /* adding after a query */
    expect_result(q, 0.5, "[51,10,10]");
    ps_quant_free(q);
    ps_quant_free(NULL);
}

/* ---- the sketch against exact answers ----------------------------------------- */

static uint64_t rng_state;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double unif(void)
{
    return (double)(rng() >> 11) / 9007199254740992.0;
}

typedef double (*gen_fn)(uint64_t i);

static double g_uniform(uint64_t i) { (void)i; return unif(); }
static double g_normal(uint64_t i)
{
    (void)i;
    double s = 0;
    for (int k = 0; k < 12; k++)
        s += unif();
    return s - 6;
}
static double g_exponential(uint64_t i) { (void)i; return -log(1 - unif()) * 10; }
static double g_ascending(uint64_t i) { return (double)i; }
static double g_descending(uint64_t i) { return -(double)i; }
static double g_ties(uint64_t i) { (void)i; return (double)(rng() % 7); }

typedef struct dist_case {
    const char *name;
    gen_fn gen;
} dist_case;

static const dist_case dists[] = {
    {"uniform", g_uniform},   {"normal", g_normal},         {"exponential", g_exponential},
    {"ascending", g_ascending}, {"descending", g_descending}, {"seven values, many ties", g_ties},
};

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Number of sorted values < y and <= y. */
static void ranks_of(const double *s, uint64_t n, double y, uint64_t *below, uint64_t *upto)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        if (s[mid] < y) lo = mid + 1; else hi = mid;
    }
    *below = lo;
    hi = n;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        if (s[mid] <= y) lo = mid + 1; else hi = mid;
    }
    *upto = lo;
}

static void test_sketch_against_exact(void **state)
{
    (void)state;
    const uint64_t n = 1000000;
    const double qs[] = {0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999};
    double *all = malloc(n * sizeof *all);
    assert_non_null(all);
    /* The stated bound: E <= n * levels / K, levels = ceil(log2(n / K)) + 1. */
    double levels = ceil(log2((double)n / PS_QUANT_SKETCH_K)) + 1;
    for (size_t d = 0; d < PS_ARRAY_LEN(dists); d++) {
        rng_state = 88172645463325252ull + d;
        ps_quant *q = ps_quant_new();
        for (uint64_t i = 0; i < n; i++) {
            all[i] = dists[d].gen(i);
            ps_quant_add(q, all[i]);
        }
        qsort(all, n, sizeof *all, cmp_d);
        assert_false(ps_quant_exact(q));
        assert_int_equal(ps_quant_count(q), n);
        uint64_t e = ps_quant_rank_error(q);
        if ((double)e > (double)n * levels / PS_QUANT_SKETCH_K)
            fail_msg("%s: rank error %llu over the stated bound", dists[d].name, (unsigned long long)e);
        /* The sketch holds about K per level, not the values. */
        assert_true(ps_quant_entries(q) <= (uint64_t)(2 * PS_QUANT_SKETCH_K * levels));
        for (size_t k = 0; k < PS_ARRAY_LEN(qs) + 2; k++) {
            uint64_t r = k < PS_ARRAY_LEN(qs) ? ps_quant_nearest_rank(n, qs[k]) : k == PS_ARRAY_LEN(qs) ? 1 : n;
            double y = ps_quant_at(q, r);
            uint64_t below, upto;
            ranks_of(all, n, y, &below, &upto);
            /* X_(r-E) <= y <= X_(r+E): at least r-E values are <= y, and
             * fewer than r+E are < y. */
            if (!(upto + e >= r && below < r + e))
                fail_msg("%s: rank %llu gave %g, true ranks %llu..%llu, error bound %llu", dists[d].name,
                         (unsigned long long)r, y, (unsigned long long)below + 1, (unsigned long long)upto,
                         (unsigned long long)e);
        }
        /* The result's interval contains the exact one's. */
        for (size_t k = 0; k < PS_ARRAY_LEN(qs); k++) {
            uint64_t l, u;
            ps_quant_ranks(n, qs[k], &l, &u);
            pv r = ps_quant_result(q, qs[k]);
            assert_int_equal(r.kind, PV_TRIPLE);
            assert_true(r.t.v - r.t.m <= all[l - 1]);
            assert_true(r.t.v + r.t.p >= all[u - 1]);
        }
        ps_quant_free(q);
    }
    free(all);
}

/* ---- the accumulator ------------------------------------------------------------ */

static void test_accumulator(void **state)
{
    (void)state;
    pv_acc *a = pv_acc_new_quantile(0.5, 0);
    pv r = pv_acc_result(a);
    assert_int_equal(r.kind, PV_UNDEF);             /* empty, like mean */
    for (int i = 1; i <= 6; i++)
        pv_acc_add_triple(a, (pv_triple){i, 1, 1});  /* favoured values */
    r = pv_acc_result(a);
    assert_int_equal(r.kind, PV_TRIPLE);
    assert_true(r.t.v == 3 && r.t.p == 3 && r.t.m == 2);
    pv_acc_add(a, pv_undef());                      /* an UNDEFINED element: UNDEFINED */
    r = pv_acc_result(a);
    assert_int_equal(r.kind, PV_UNDEF);
    pv_acc_reset(a);
    for (int i = 0; i < PS_QUANT_EXACT_MAX + 10; i++)  /* into the sketch, then reset */
        pv_acc_add_num(a, i);
    r = pv_acc_result(a);
    assert_int_equal(r.kind, PV_TRIPLE);
    pv_acc_reset(a);
    assert_int_equal(pv_acc_count(a), 0);
    pv_acc_add_num(a, 1);
    pv_acc_add_bool(a, true);                       /* ill-typed: UNDEFINED */
    r = pv_acc_result(a);
    assert_int_equal(r.kind, PV_UNDEF);
    pv_acc_free(a);
    assert_string_equal(pv_aggop_spelling[PV_AGG_QUANT], "p");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranks_table),
        cmocka_unit_test(test_ranks_against_sums),
        cmocka_unit_test(test_nearest_rank),
        cmocka_unit_test(test_exact_results),
        cmocka_unit_test(test_sketch_against_exact),
        cmocka_unit_test(test_accumulator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
