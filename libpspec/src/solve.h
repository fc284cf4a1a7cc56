/* solve.h — the mathematics of psolve (private).
 *
 * Linear forms: an equation `L = R` is rewritten as
 *     c_1 * U_1 + ... + c_k * U_k = b
 * where the U_j are distinct unknowns not solved yet and the c_j and b are
 * expressions without such unknowns (they may use the solve's variable, log
 * aggregates and constants, including unknowns solved earlier). Products
 * and quotients by unknown-free factors, sums, differences and negation are
 * allowed; anything else that contains an unknown (U * U, 1 / U, log(U),
 * U inside an aggregate ...) is "not linear".
 *
 * Regression: least squares for y = sum_j x_j * beta_j over the data points,
 * by incremental QR (Givens rotations): O(k^2) memory whatever the number of
 * points, and numerically sound where the normal equations are not.
 */
#ifndef PSPEC_SOLVE_H
#define PSPEC_SOLVE_H

#include "ast.h"
#include "check.h"

/* One unknown's term. */
typedef struct ps_lterm {
    ps_const *unknown;
    ps_expr *coef;              /* its coefficient (never contains an unsolved unknown) */
} ps_lterm;

typedef struct ps_linform {
    ps_lterm *terms;            /* one per unknown, in order of appearance */
    uint32_t nterms;
    ps_expr *rhs;               /* b */
} ps_linform;

/* Analyse `eqn` (an X_BINARY '=' expression). `solved[i]` tells whether
 * const i has a value already (then it counts as a constant). On success
 * fills *out (expressions allocated in prog's arena) and returns 0;
 * otherwise adds a diagnostic and returns -1. */
int ps_linear_form(ps_program *prog, ps_expr *eqn, const bool *solved, ps_linform *out, ps_diags *diags);

/* ---- regression ------------------------------------------------------------------ */

typedef struct ps_regress ps_regress;

ps_regress *ps_regress_new(uint32_t k);
void ps_regress_free(ps_regress *r);
/* Add the data point y = x . beta (x has k entries). */
void ps_regress_add(ps_regress *r, double y, const double *x);
uint64_t ps_regress_count(const ps_regress *r);

typedef enum ps_regress_status {
    PS_REGRESS_OK = 0,
    PS_REGRESS_TOO_FEW,         /* fewer points than unknowns */
    PS_REGRESS_SINGULAR,        /* the x columns are linearly dependent (e.g. every x equal) */
} ps_regress_status;

typedef struct ps_regress_result {
    ps_regress_status status;
    uint32_t singular_col;      /* SINGULAR: a column that depends on the others */
    uint64_t n;                 /* data points */
    double *beta;               /* [k] estimates */
    double *se;                 /* [k] standard errors (NaN when n == k) */
    double *lo, *hi;            /* [k] 95% confidence interval (NaN when n == k) */
    double variance;            /* residual variance SS_res / (n - k) (NaN when n == k) */
    double cor;                 /* multiple correlation coefficient R = sqrt(1 - SS_res / SS_tot);
                                   NaN when the y values are all equal */
} ps_regress_result;

/* Solve; result arrays are heap-allocated (free with ps_regress_result_free). */
int ps_regress_solve(const ps_regress *r, ps_regress_result *out);
void ps_regress_result_free(ps_regress_result *res);

/* The p quantile of Student's t distribution with df degrees of freedom. */
double ps_t_quantile(double p, double df);

#endif
