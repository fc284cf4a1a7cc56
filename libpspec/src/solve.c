/* solve.c — linear forms of equations, and least squares by Givens QR. */
#include "solve.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- linear forms ---------------------------------------------------------------- */

typedef struct lin {
    PS_VEC(ps_lterm) terms;
    ps_expr *cst;               /* NULL: zero */
} lin;

typedef struct lctx {
    ps_program *prog;
    const bool *solved;
    ps_diags *diags;
    bool failed;
} lctx;

static bool unknown_open(const lctx *c, const ps_const *k)
{
    return k->unknown && !(c->solved && c->solved[k->id]);
}

/* The first open unknown in e (directly or through a def), or NULL. */
typedef struct finder {
    const lctx *c;
    const ps_const *found;
} finder;

static bool find_unknown(const ps_expr *e, void *ctx)
{
    finder *f = ctx;
    if (e->kind == X_CONST) {
        if (unknown_open(f->c, e->cst)) {
            f->found = e->cst;
            return true;
        }
        return e->cst->expr && find_unknown(e->cst->expr, ctx);
    }
    return ps_expr_any_child(e, find_unknown, ctx);
}

static const ps_const *first_unknown(const lctx *c, const ps_expr *e)
{
    finder f = {c, NULL};
    if (e)
        find_unknown(e, &f);
    return f.found;
}

/* Does e depend on an unknown that has no value yet? */
static bool has_unknown(const lctx *c, const ps_expr *e)
{
    return first_unknown(c, e) != NULL;
}

static const ps_type *numeric_type(const ps_expr *a, const ps_expr *b)
{
    return (a->type->kind == T_TRIPLE || (b && b->type->kind == T_TRIPLE)) ? &ps_t_triple : &ps_t_num;
}

static ps_expr *mk(lctx *c, ps_expr_kind kind, uint8_t op, ps_expr *a, ps_expr *b, ps_loc loc)
{
    ps_expr *e = PS_NEW(&c->prog->arena, ps_expr);
    e->kind = (uint8_t)kind;
    e->op = op;
    e->loc = loc;
    e->bin.a = a;
    e->bin.b = b;
    e->type = numeric_type(a, b);
    e->log_dependent = a->log_dependent || (b && b->log_dependent);
    return e;
}

static ps_expr *num(lctx *c, double x, ps_loc loc)
{
    ps_expr *e = PS_NEW(&c->prog->arena, ps_expr);
    e->kind = X_NUM;
    e->num = x;
    e->loc = loc;
    e->type = &ps_t_num;
    return e;
}

/* a + b where NULL stands for zero. */
static ps_expr *add(lctx *c, ps_expr *a, ps_expr *b, ps_loc loc)
{
    if (!a)
        return b;
    if (!b)
        return a;
    return mk(c, X_BINARY, PV_OP_ADD, a, b, loc);
}

static ps_expr *neg(lctx *c, ps_expr *a, ps_loc loc)
{
    return a ? mk(c, X_NEG, 0, a, NULL, loc) : NULL;
}

static void lin_add_term(lctx *c, lin *l, ps_const *u, ps_expr *coef, ps_loc loc)
{
    for (uint32_t i = 0; i < l->terms.n; i++) {
        if (l->terms.v[i].unknown == u) {
            l->terms.v[i].coef = add(c, l->terms.v[i].coef, coef, loc);
            return;
        }
    }
    ps_lterm t = {u, coef};
    PS_VEC_PUSH(&c->prog->arena, l->terms, t);
}

static lin lin_of(lctx *c, ps_expr *e);

static void fail(lctx *c, ps_loc loc, const char *why, const ps_const *u)
{
    if (c->failed)
        return;
    c->failed = true;
    ps_diags_add(c->diags, loc, "the equation is not linear in its unknowns: %s%s%s", why, u ? " " : "",
                 u ? u->local : "");
}

/* Linear form of e: sums, differences, negation, and products or quotients
 * with factors free of unknowns. */
static lin lin_of(lctx *c, ps_expr *e)
{
    lin r = {0};
    if (c->failed)
        return r;
    if (!has_unknown(c, e)) {
        r.cst = e;
        return r;
    }
    switch ((ps_expr_kind)e->kind) {
    case X_CONST:
        if (unknown_open(c, e->cst)) {
            lin_add_term(c, &r, e->cst, num(c, 1, e->loc), e->loc);
            return r;
        }
        return lin_of(c, e->cst->expr);
    case X_NEG: {
        lin a = lin_of(c, e->bin.a);
        for (uint32_t i = 0; i < a.terms.n; i++)
            a.terms.v[i].coef = neg(c, a.terms.v[i].coef, e->loc);
        a.cst = neg(c, a.cst, e->loc);
        return a;
    }
    case X_BINARY:
        switch ((pv_binop)e->op) {
        case PV_OP_ADD:
        case PV_OP_SUB: {
            lin a = lin_of(c, e->bin.a), b = lin_of(c, e->bin.b);
            bool sub = e->op == PV_OP_SUB;
            for (uint32_t i = 0; i < b.terms.n; i++)
                lin_add_term(c, &a, b.terms.v[i].unknown,
                             sub ? neg(c, b.terms.v[i].coef, e->loc) : b.terms.v[i].coef, e->loc);
            a.cst = add(c, a.cst, sub ? neg(c, b.cst, e->loc) : b.cst, e->loc);
            return a;
        }
        case PV_OP_MUL: {
            bool ua = has_unknown(c, e->bin.a), ub = has_unknown(c, e->bin.b);
            if (ua && ub) {
                fail(c, e->loc, "it multiplies two expressions that contain unknowns, such as", first_unknown(c, e->bin.a));
                return r;
            }
            lin l = lin_of(c, ua ? e->bin.a : e->bin.b);
            ps_expr *f = ua ? e->bin.b : e->bin.a;
            for (uint32_t i = 0; i < l.terms.n; i++)
                l.terms.v[i].coef = mk(c, X_BINARY, PV_OP_MUL, l.terms.v[i].coef, f, e->loc);
            if (l.cst)
                l.cst = mk(c, X_BINARY, PV_OP_MUL, l.cst, f, e->loc);
            return l;
        }
        case PV_OP_DIV: {
            if (has_unknown(c, e->bin.b)) {
                fail(c, e->loc, "it divides by an expression that contains", first_unknown(c, e->bin.b));
                return r;
            }
            lin l = lin_of(c, e->bin.a);
            for (uint32_t i = 0; i < l.terms.n; i++)
                l.terms.v[i].coef = mk(c, X_BINARY, PV_OP_DIV, l.terms.v[i].coef, e->bin.b, e->loc);
            if (l.cst)
                l.cst = mk(c, X_BINARY, PV_OP_DIV, l.cst, e->bin.b, e->loc);
            return l;
        }
        default:
            break;
        }
        break;
    default:
        break;
    }
    fail(c, e->loc, "this operation is not a sum, difference, product or quotient of", first_unknown(c, e));
    return r;
}

int ps_linear_form(ps_program *prog, ps_expr *eqn, const bool *solved, ps_linform *out, ps_diags *diags)
{
    lctx c = {.prog = prog, .solved = solved, .diags = diags};
    if (eqn->kind != X_BINARY || eqn->op != PV_OP_EQ) {
        ps_diags_add(diags, eqn->loc, "a solve declaration needs an equation 'a = b'");
        return -1;
    }
    lin l = lin_of(&c, eqn->bin.a), r = lin_of(&c, eqn->bin.b);
    if (c.failed)
        return -1;
    /* Keep the unknowns on the side where they were written, so that the
     * usual `y = a * x + b` gives data points (y, x, 1) and not their negation:
     *   L = R  <=>  sum(cR - cL) U = constL - constR  (unknowns only on the right)
     *          <=>  sum(cL - cR) U = constR - constL  (otherwise) */
    if (l.terms.n == 0) {
        lin tmp = l;
        l = r;
        r = tmp;
    }
    for (uint32_t i = 0; i < r.terms.n; i++)
        lin_add_term(&c, &l, r.terms.v[i].unknown, neg(&c, r.terms.v[i].coef, eqn->loc), eqn->loc);
    ps_expr *rhs = add(&c, r.cst, neg(&c, l.cst, eqn->loc), eqn->loc);
    if (l.terms.n == 0) {
        ps_diags_add(diags, eqn->loc, "the equation contains no unknown to solve for (unknowns solved by an "
                     "earlier solve declaration count as known)");
        return -1;
    }
    out->terms = l.terms.v;
    out->nterms = l.terms.n;
    out->rhs = rhs ? rhs : num(&c, 0, eqn->loc);
    return 0;
}

/* ---- regression ----------------------------------------------------------------------- */

struct ps_regress {
    uint32_t k;
    uint64_t n;
    double *R;              /* k x k upper triangular, row major */
    double *z;              /* Q^T y, first k components */
    double ssr;             /* sum of squares of the remaining components of Q^T y */
    double *colsq;          /* sum of squares of each column, for the rank test */
    double ymean, ym2;      /* Welford, for the total sum of squares */
    double *row;            /* scratch */
};

ps_regress *ps_regress_new(uint32_t k)
{
    ps_regress *r = ps_calloc(1, sizeof *r);
    r->k = k;
    r->R = ps_calloc((size_t)k * k + 1, sizeof(double));
    r->z = ps_calloc(k + 1, sizeof(double));
    r->colsq = ps_calloc(k + 1, sizeof(double));
    r->row = ps_calloc(k + 1, sizeof(double));
    return r;
}

void ps_regress_free(ps_regress *r)
{
    if (!r)
        return;
    free(r->R);
    free(r->z);
    free(r->colsq);
    free(r->row);
    free(r);
}

uint64_t ps_regress_count(const ps_regress *r) { return r->n; }

void ps_regress_add(ps_regress *r, double y, const double *x)
{
    uint32_t k = r->k;
    double *row = r->row;
    memcpy(row, x, k * sizeof(double));
    r->n++;
    double d = y - r->ymean;
    r->ymean += d / (double)r->n;
    r->ym2 += d * (y - r->ymean);
    for (uint32_t j = 0; j < k; j++)
        r->colsq[j] += x[j] * x[j];
    for (uint32_t i = 0; i < k; i++) {
        if (row[i] == 0)
            continue;
        double *Ri = r->R + (size_t)i * k;
        if (Ri[i] == 0) {
            /* No pivot in this row yet: the rotated row becomes it. */
            for (uint32_t j = i; j < k; j++)
                Ri[j] = row[j];
            r->z[i] = y;
            return;
        }
        double h = hypot(Ri[i], row[i]);
        double c = Ri[i] / h, s = row[i] / h;
        for (uint32_t j = i; j < k; j++) {
            double a = Ri[j], b = row[j];
            Ri[j] = c * a + s * b;
            row[j] = -s * a + c * b;
        }
        double a = r->z[i];
        r->z[i] = c * a + s * y;
        y = -s * a + c * y;
    }
    r->ssr += y * y;
}

int ps_regress_solve(const ps_regress *r, ps_regress_result *out)
{
    uint32_t k = r->k;
    memset(out, 0, sizeof *out);
    out->n = r->n;
    out->beta = ps_calloc(k + 1, sizeof(double));
    out->se = ps_calloc(k + 1, sizeof(double));
    out->lo = ps_calloc(k + 1, sizeof(double));
    out->hi = ps_calloc(k + 1, sizeof(double));
    out->variance = out->cor = NAN;
    if (r->n < k) {
        out->status = PS_REGRESS_TOO_FEW;
        return -1;
    }
    for (uint32_t i = 0; i < k; i++) {
        double rii = fabs(r->R[(size_t)i * k + i]);
        if (r->colsq[i] == 0 || rii <= 1e-9 * sqrt(r->colsq[i])) {
            out->status = PS_REGRESS_SINGULAR;
            out->singular_col = i;
            return -1;
        }
    }
    /* Back substitution: R beta = z. */
    for (uint32_t ii = k; ii-- > 0;) {
        double s = r->z[ii];
        for (uint32_t j = ii + 1; j < k; j++)
            s -= r->R[(size_t)ii * k + j] * out->beta[j];
        out->beta[ii] = s / r->R[(size_t)ii * k + ii];
    }
    uint64_t dof = r->n - k;
    /* Residuals at the level of rounding (relative 1e-14) are an exact fit:
     * report a variance of 0, not 1.2e-32. */
    double sumsq = r->ym2 + (double)r->n * r->ymean * r->ymean;
    double ssr = r->ssr <= (64 * DBL_EPSILON) * (64 * DBL_EPSILON) * sumsq ? 0 : r->ssr;
    if (r->ym2 > 0)
        out->cor = sqrt(fmax(0, 1 - ssr / r->ym2));
    if (dof == 0) {
        for (uint32_t i = 0; i < k; i++)
            out->se[i] = out->lo[i] = out->hi[i] = NAN;
        return 0;
    }
    out->variance = ssr / (double)dof;
    /* Var(beta) = variance * R^-1 R^-T: row norms of the inverse of R. */
    double *inv = ps_calloc((size_t)k * k + 1, sizeof(double));
    for (uint32_t c = 0; c < k; c++) {
        /* Column c of R^-1 solves R x = e_c. */
        for (uint32_t ii = c + 1; ii-- > 0;) {
            double s = ii == c ? 1 : 0;
            for (uint32_t j = ii + 1; j <= c; j++)
                s -= r->R[(size_t)ii * k + j] * inv[(size_t)j * k + c];
            inv[(size_t)ii * k + c] = s / r->R[(size_t)ii * k + ii];
        }
    }
    double t = ps_t_quantile(0.975, (double)dof);
    for (uint32_t i = 0; i < k; i++) {
        double s2 = 0;
        for (uint32_t j = i; j < k; j++)
            s2 += inv[(size_t)i * k + j] * inv[(size_t)i * k + j];
        out->se[i] = sqrt(out->variance * s2);
        out->lo[i] = out->beta[i] - t * out->se[i];
        out->hi[i] = out->beta[i] + t * out->se[i];
    }
    free(inv);
    return 0;
}

void ps_regress_result_free(ps_regress_result *res)
{
    free(res->beta);
    free(res->se);
    free(res->lo);
    free(res->hi);
    memset(res, 0, sizeof *res);
}

/* ---- Student's t ------------------------------------------------------------------------ */

/* Continued fraction for the incomplete beta function (modified Lentz). */
static double betacf(double a, double b, double x)
{
    const double tiny = 1e-300;
    double qab = a + b, qap = a + 1, qam = a - 1;
    double c = 1, d = 1 - qab * x / qap;
    if (fabs(d) < tiny)
        d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 300; m++) {
        int m2 = 2 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d;
        if (fabs(d) < tiny)
            d = tiny;
        c = 1 + aa / c;
        if (fabs(c) < tiny)
            c = tiny;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d;
        if (fabs(d) < tiny)
            d = tiny;
        c = 1 + aa / c;
        if (fabs(c) < tiny)
            c = tiny;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < 1e-15)
            break;
    }
    return h;
}

/* Regularized incomplete beta I_x(a, b). */
static double ibeta(double a, double b, double x)
{
    if (x <= 0)
        return 0;
    if (x >= 1)
        return 1;
    double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    double bt = exp(lbt);
    if (x < (a + 1) / (a + b + 2))
        return bt * betacf(a, b, x) / a;
    return 1 - bt * betacf(b, a, 1 - x) / b;
}

/* P(T <= t) for Student's t with df degrees of freedom. */
static double t_cdf(double t, double df)
{
    double x = df / (df + t * t);
    double tail = 0.5 * ibeta(df / 2, 0.5, x);
    return t >= 0 ? 1 - tail : tail;
}

double ps_t_quantile(double p, double df)
{
    if (!(df > 0) || !(p > 0 && p < 1))
        return NAN;
    if (p == 0.5)
        return 0;
    if (p < 0.5)
        return -ps_t_quantile(1 - p, df);
    double lo = 0, hi = 1;
    while (t_cdf(hi, df) < p && hi < 1e300)
        hi *= 2;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (t_cdf(mid, df) < p)
            lo = mid;
        else
            hi = mid;
        if (hi - lo <= 1e-12 * hi)
            break;
    }
    return 0.5 * (lo + hi);
}
