/* test_solve — least squares by Givens QR and Student's t (solve.c). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "solve.h"

static void t_quantiles(void **state)
{
    (void)state;
    /* Table values of t_{0.975, df}. */
    assert_true(fabs(ps_t_quantile(0.975, 1) - 12.7062047) < 1e-5);
    assert_true(fabs(ps_t_quantile(0.975, 2) - 4.30265273) < 1e-6);
    assert_true(fabs(ps_t_quantile(0.975, 10) - 2.22813885) < 1e-6);
    assert_true(fabs(ps_t_quantile(0.975, 30) - 2.04227246) < 1e-6);
    assert_true(fabs(ps_t_quantile(0.975, 1e7) - 1.95996398) < 1e-5);
    assert_true(fabs(ps_t_quantile(0.025, 10) + 2.22813885) < 1e-6);
    assert_true(ps_t_quantile(0.5, 5) == 0);
    assert_true(isnan(ps_t_quantile(0.975, 0)));
}

/* y = 3 x + 5 exactly: estimates exact, residual variance 0, R = 1. */
static void exact_line(void **state)
{
    (void)state;
    ps_regress *r = ps_regress_new(2);
    for (int i = 0; i < 10; i++) {
        double x[2] = {i, 1};
        ps_regress_add(r, 3.0 * i + 5, x);
    }
    ps_regress_result res;
    assert_int_equal(ps_regress_solve(r, &res), 0);
    assert_true(fabs(res.beta[0] - 3) < 1e-12);
    assert_true(fabs(res.beta[1] - 5) < 1e-12);
    assert_true(res.variance == 0);     /* rounding noise is not reported */
    assert_true(res.se[0] == 0);
    assert_true(fabs(res.cor - 1) < 1e-12);
    assert_int_equal(res.n, 10);
    ps_regress_result_free(&res);
    ps_regress_free(r);
}

/* Rounding-level residuals on non-integer data are an exact fit too, but
 * a real residual of relative size 1e-9 is kept. */
static void exact_line_rounding(void **state)
{
    (void)state;
    for (int noisy = 0; noisy < 2; noisy++) {
        ps_regress *r = ps_regress_new(2);
        for (int i = 0; i < 50; i++) {
            double x[2] = {0.1 * i + 0.3, 1};
            double y = 0.7 * x[0] + 1.9 + (noisy && i == 7 ? 1e-9 : 0);
            ps_regress_add(r, y, x);
        }
        ps_regress_result res;
        assert_int_equal(ps_regress_solve(r, &res), 0);
        if (noisy)
            assert_true(res.variance > 0);
        else
            assert_true(res.variance == 0);
        ps_regress_result_free(&res);
        ps_regress_free(r);
    }
}

/* A textbook data set (x = 1..5, y = 2,4,5,4,5): slope 0.6, intercept 2.2,
 * residual variance 0.8/ (n-2)... computed by hand: SSE = 2.4, s^2 = 0.8,
 * Sxx = 10 -> se(slope) = sqrt(0.8/10) = 0.2828427. */
static void textbook(void **state)
{
    (void)state;
    double ys[] = {2, 4, 5, 4, 5};
    ps_regress *r = ps_regress_new(2);
    for (int i = 0; i < 5; i++) {
        double x[2] = {i + 1, 1};
        ps_regress_add(r, ys[i], x);
    }
    ps_regress_result res;
    assert_int_equal(ps_regress_solve(r, &res), 0);
    assert_true(fabs(res.beta[0] - 0.6) < 1e-12);
    assert_true(fabs(res.beta[1] - 2.2) < 1e-12);
    assert_true(fabs(res.variance - 0.8) < 1e-12);
    assert_true(fabs(res.se[0] - sqrt(0.08)) < 1e-12);
    /* se(intercept) = s * sqrt(1/n + mean^2 / Sxx) = sqrt(0.8 * (0.2 + 0.9)) */
    assert_true(fabs(res.se[1] - sqrt(0.88)) < 1e-12);
    double t = ps_t_quantile(0.975, 3);
    assert_true(fabs(res.lo[0] - (0.6 - t * sqrt(0.08))) < 1e-9);
    /* R^2 = 1 - SSE/SST = 1 - 2.4/6 = 0.6 */
    assert_true(fabs(res.cor - sqrt(0.6)) < 1e-12);
    ps_regress_result_free(&res);
    ps_regress_free(r);
}

/* Two slopes and an intercept with large offsets: QR keeps full accuracy
 * where the normal equations would lose it. */
static void multiple_ill_scaled(void **state)
{
    (void)state;
    ps_regress *r = ps_regress_new(3);
    for (int i = 0; i < 200; i++) {
        double a = 1e6 + i, b = (i * 7) % 13;
        double x[3] = {a, b, 1};
        ps_regress_add(r, 2.5 * a - 4 * b + 1000, x);
    }
    ps_regress_result res;
    assert_int_equal(ps_regress_solve(r, &res), 0);
    assert_true(fabs(res.beta[0] - 2.5) < 1e-8);
    assert_true(fabs(res.beta[1] + 4) < 1e-8);
    assert_true(fabs(res.beta[2] - 1000) < 1e-2);
    ps_regress_result_free(&res);
    ps_regress_free(r);
}

static void singular_and_too_few(void **state)
{
    (void)state;
    ps_regress *r = ps_regress_new(2);
    for (int i = 0; i < 5; i++) {
        double x[2] = {7, 1};      /* every x equal: slope and intercept inseparable */
        ps_regress_add(r, i, x);
    }
    ps_regress_result res;
    assert_int_equal(ps_regress_solve(r, &res), -1);
    assert_int_equal(res.status, PS_REGRESS_SINGULAR);
    ps_regress_result_free(&res);
    ps_regress_free(r);

    r = ps_regress_new(3);
    double x[3] = {1, 2, 1};
    ps_regress_add(r, 1, x);
    assert_int_equal(ps_regress_solve(r, &res), -1);
    assert_int_equal(res.status, PS_REGRESS_TOO_FEW);
    ps_regress_result_free(&res);
    ps_regress_free(r);

    /* A column of zeros is singular too. */
    r = ps_regress_new(2);
    for (int i = 0; i < 4; i++) {
        double z[2] = {0, 1};
        ps_regress_add(r, i, z);
    }
    assert_int_equal(ps_regress_solve(r, &res), -1);
    assert_int_equal(res.status, PS_REGRESS_SINGULAR);
    assert_int_equal(res.singular_col, 0);
    ps_regress_result_free(&res);
    ps_regress_free(r);
}

/* n == k: an exact fit without standard errors. */
static void exactly_determined(void **state)
{
    (void)state;
    ps_regress *r = ps_regress_new(2);
    double x1[2] = {1, 1}, x2[2] = {3, 1};
    ps_regress_add(r, 10, x1);
    ps_regress_add(r, 20, x2);
    ps_regress_result res;
    assert_int_equal(ps_regress_solve(r, &res), 0);
    assert_true(fabs(res.beta[0] - 5) < 1e-12 && fabs(res.beta[1] - 5) < 1e-12);
    assert_true(isnan(res.se[0]) && isnan(res.variance));
    ps_regress_result_free(&res);
    ps_regress_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_quantiles),
        cmocka_unit_test(exact_line),
        cmocka_unit_test(exact_line_rounding),
        cmocka_unit_test(textbook),
        cmocka_unit_test(multiple_ill_scaled),
        cmocka_unit_test(singular_and_too_few),
        cmocka_unit_test(exactly_determined),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
