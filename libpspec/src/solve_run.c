/* solve_run.c — psolve: estimating unknowns from a log (appendix B, "More on
 * Psolve"; thesis §4.2).
 *
 * Solve declarations run in order, each with its own passes over the log.
 * An unknown belongs to the first declaration whose equation contains it;
 * later declarations see its estimate as a known constant. A simple
 * `solve EQN` is solved algebraically once its aggregates are known; a
 * `solve data x : T ...` collects one data point per event or interval of T
 * (or key of a mapping) in a final pass and fits them by least squares.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"
#include "lex.h"
#include "logread.h"
#include "program.h"
#include "run-internal.h"
#include "solve.h"
#include "util.h"

/* What became of one unknown. */
typedef struct known {
    bool solved;
    double value;
    bool regression;            /* estimated by a regression: se/ci/n are meaningful */
    double se, lo, hi;
    uint64_t n;
    bool exact_fit;             /* n == number of unknowns: no standard error */
} known;

typedef struct solver {
    pspec *ps;
    ps_program *prog;
    const pspec_solve_options *opt;
    log_reader *r;
    known *k;                   /* [consts] */
    bool *solved;               /* [consts] */
    int status;
    /* the regression being collected */
    const ps_stmt *st;
    ps_linform lf;
    ps_regress *reg;
    double *row;                /* y, x1..xk */
    uint64_t skipped;
    runner *rn;
} solver;

static void problem(solver *s, ps_loc loc, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void problem(solver *s, ps_loc loc, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = ps_vasprintf(fmt, ap);
    va_end(ap);
    ps_diag d = {loc, msg};
    char *line = ps_format_diag(s->prog, &d);
    if (s->opt->problem)
        s->opt->problem(s->opt->ctx, line);
    free(line);
    free(msg);
    if (status > s->status)
        s->status = status;
}

static bool wanted(const solver *s, const ps_const *k)
{
    if (!s->opt->only)
        return true;
    for (size_t i = 0; i < s->opt->nonly; i++)
        if (strcmp(s->opt->only[i], k->name) == 0)
            return true;
    return false;
}

/* The favoured value of a number or triple; false for anything else. */
static bool favoured(pv v, double *out)
{
    bool ok = true;
    if (v.kind == PV_NUM)
        *out = v.num;
    else if (v.kind == PV_TRIPLE)
        *out = v.t.v;
    else
        ok = false;
    pv_free(v);
    return ok && isfinite(*out);
}

/* A runner whose constants include the unknowns solved so far. */
static void start_runner(solver *s, runner *rn)
{
    runner_init(rn, s->ps, log_reader_header(s->r)->tick_ns);
    runner_compensate(rn, log_reader_header(s->r), false);   /* the specs' `compensate;` */
    for (uint32_t i = 0; i < s->prog->consts.n; i++)
        if (s->k[i].solved)
            rn->ev.consts[i] = pv_num(s->k[i].value);
}

/* The data point of one element: y, then each unknown's coefficient. */
static void sink(void *ctx, uint32_t k, const pv *elem)
{
    solver *s = ctx;
    (void)k;
    const ps_agg *range = s->st->solve->range;
    if (!elem) {
        s->skipped++;   /* the where-clause was UNDEFINED for this element */
        return;
    }
    s->rn->ev.slots[range->var->slot] = *elem;
    bool ok = favoured(ps_eval(&s->rn->ev, s->lf.rhs), &s->row[0]);
    for (uint32_t j = 0; ok && j < s->lf.nterms; j++)
        ok = favoured(ps_eval(&s->rn->ev, s->lf.terms[j].coef), &s->row[j + 1]);
    if (!ok) {
        s->skipped++;
        return;
    }
    ps_regress_add(s->reg, s->row[0], s->row + 1);
    if (s->opt->data_point)
        s->opt->data_point(s->opt->ctx, s->st->loc.line, s->row, s->lf.nterms + 1);
}

/* Bind an unknown of `var`/`cor` to a value. */
static void bind_extra(solver *s, ps_const *c, double v, const char *what, ps_loc loc)
{
    if (!c)
        return;
    if (!c->unknown) {
        problem(s, loc, PSPEC_EXIT_SPEC, "'%s' must be an unknown (declared with 'def %s = ?') to receive the %s",
                c->local, c->local, what);
        return;
    }
    if (s->k[c->id].solved) {
        problem(s, loc, PSPEC_EXIT_SPEC, "'%s' is already solved: an unknown can be solved only once", c->local);
        return;
    }
    if (isnan(v)) {
        problem(s, loc, PSPEC_EXIT_FAILED, "the %s for '%s' is not defined (too few data points, or y constant)",
                what, c->local);
        return;
    }
    s->k[c->id].solved = s->solved[c->id] = true;
    s->k[c->id].value = v;
}

/* Run one solve declaration. */
static void run_solve(solver *s, const ps_stmt *st)
{
    ps_solve *sv = st->solve;
    ps_diags diags = {0};
    int rc = ps_linear_form(s->prog, sv->eqn, s->solved, &s->lf, &diags);
    if (rc < 0) {
        for (uint32_t i = 0; i < diags.n; i++) {
            char *line = ps_format_diag(s->prog, &diags.v[i]);
            if (s->opt->problem)
                s->opt->problem(s->opt->ctx, line);
            free(line);
        }
        ps_diags_free(&diags);
        if (PSPEC_EXIT_SPEC > s->status)
            s->status = PSPEC_EXIT_SPEC;
        return;
    }
    ps_diags_free(&diags);
    bool any_wanted = false;
    for (uint32_t j = 0; j < s->lf.nterms; j++)
        any_wanted |= wanted(s, s->lf.terms[j].unknown);
    if (!any_wanted && !(sv->var_c && wanted(s, sv->var_c)) && !(sv->cor_c && wanted(s, sv->cor_c)))
        return;
    for (ps_const *const *c = (ps_const *const[]){sv->var_c, sv->cor_c}, *const *e = c + 2; c < e; c++) {
        for (uint32_t j = 0; *c && j < s->lf.nterms; j++) {
            if (s->lf.terms[j].unknown == *c) {
                problem(s, st->loc, PSPEC_EXIT_SPEC, "'%s' cannot be both in the equation and the %s of its regression",
                        (*c)->local, *c == sv->var_c ? "variance" : "correlation");
                return;
            }
        }
    }
    if (!sv->data && s->lf.nterms != 1) {
        problem(s, st->loc, PSPEC_EXIT_SPEC,
                "a solve without 'data' is solved algebraically and needs exactly one unknown, "
                "this one has %u (use 'solve data ...' for a regression)", s->lf.nterms);
        return;
    }
    runner rn;
    start_runner(s, &rn);
    s->rn = &rn;
    plan pl;
    plan_init(&pl, s->prog);
    plan_walk(&pl, s->lf.rhs);
    for (uint32_t j = 0; j < s->lf.nterms; j++)
        plan_walk(&pl, s->lf.terms[j].coef);
    ps_agg *range = sv->data ? sv->range : NULL;
    if (range) {
        plan_walk(&pl, range->where);
        plan_walk(&pl, range->domain);
        if (range->iv)
            plan_mark_iv(&pl, range->iv);
    }
    char *err = NULL;
    int st_rc = run_passes(&rn, &pl, s->r, true, false, false, &err);
    if (st_rc != PSPEC_EXIT_OK) {
        problem(s, st->loc, st_rc, "%s", err ? err : "cannot read the log");
        free(err);
        goto out;
    }
    if (!sv->data) {
        double a, b;
        const ps_lterm *t = &s->lf.terms[0];
        if (!favoured(ps_eval(&rn.ev, t->coef), &a) || !favoured(ps_eval(&rn.ev, s->lf.rhs), &b)) {
            problem(s, st->loc, PSPEC_EXIT_FAILED, "cannot solve for '%s': the equation's other terms are UNDEFINED "
                    "for this log", t->unknown->local);
            goto out;
        }
        if (a == 0) {
            problem(s, st->loc, PSPEC_EXIT_FAILED, "cannot solve for '%s': its coefficient is 0 for this log",
                    t->unknown->local);
            goto out;
        }
        known *k = &s->k[t->unknown->id];
        k->solved = s->solved[t->unknown->id] = true;
        k->value = b / a;
        goto out;
    }
    /* A regression: one data point per element of the range. */
    uint32_t kcols = s->lf.nterms;
    s->st = st;
    s->reg = ps_regress_new(kcols);
    s->row = ps_calloc(kcols + 1, sizeof(double));
    s->skipped = 0;
    if (s->opt->data_header) {
        const char **names = ps_calloc(kcols + 1, sizeof *names);
        names[0] = "y";
        for (uint32_t j = 0; j < kcols; j++)
            names[j + 1] = s->lf.terms[j].unknown->local;
        s->opt->data_header(s->opt->ctx, st->loc.line, names, kcols + 1);
        free(names);
    }
    if (range->domain) {
        pv m = ps_eval(&rn.ev, range->domain);
        double *keys = NULL;
        uint32_t n = m.kind == PV_MAP ? pv_map_keys_sorted(&m, &keys) : 0;
        for (uint32_t i = 0; i < n; i++) {
            pv key = pv_num(keys[i]);
            rn.ev.slots[range->var->slot] = key;
            if (range->where) {
                int c = ps_eval_cond(&rn.ev, range->where);
                if (c < 0) {
                    sink(s, 0, NULL);
                    continue;
                }
                if (c == 0)
                    continue;
            }
            sink(s, 0, &key);
        }
        free(keys);
        pv_free(m);
    } else {
        /* One more pass over the log, with the range as a sink. */
        int rw = log_reader_rewind(s->r);
        if (rw < 0) {
            problem(s, st->loc, PSPEC_EXIT_LOG, "the log must be a file to be read again");
            goto out_reg;
        }
        /* The range is no top-level aggregate of the program: give it the
         * spare value slot after them (the runner allocates one). */
        range->id = s->prog->topaggs.n;
        ps_agg *tops[1] = {range};
        bool is_sink[1] = {true};
        ps_pass p = {.prog = s->prog, .ev = &rn.ev, .need_iv = pl.need_iv, .tops = tops, .ntops = 1,
                     .sink = sink, .is_sink = is_sink, .compensate = rn.compensate,
                     .comp_mean = rn.comp_mean, .comp_spread = rn.comp_spread,
                     .comp_tick_ns = rn.ev.tick_ns, .ctx = s};
        int erc = ps_engine_run(&p, s->r, &err);
        if (erc < 0) {
            problem(s, st->loc, erc == -EDOM ? PSPEC_EXIT_SPEC : PSPEC_EXIT_LOG, "%s", err ? err : "cannot read the log");
            free(err);
            goto out_reg;
        }
    }
    if (s->skipped)
        problem(s, st->loc, 0, "warning: %llu data point%s skipped because a value was UNDEFINED",
                (unsigned long long)s->skipped, s->skipped == 1 ? "" : "s");
    ps_regress_result res;
    if (ps_regress_solve(s->reg, &res) < 0) {
        if (res.status == PS_REGRESS_TOO_FEW)
            problem(s, st->loc, PSPEC_EXIT_FAILED, "too few data points: %llu for %u unknown%s",
                    (unsigned long long)res.n, kcols, kcols == 1 ? "" : "s");
        else
            problem(s, st->loc, PSPEC_EXIT_FAILED, "the system is singular: the coefficient of '%s' is not "
                    "independent of the others over these %llu data points (for example, every x is equal)",
                    s->lf.terms[res.singular_col].unknown->local, (unsigned long long)res.n);
        ps_regress_result_free(&res);
        goto out_reg;
    }
    for (uint32_t j = 0; j < kcols; j++) {
        known *k = &s->k[s->lf.terms[j].unknown->id];
        k->solved = s->solved[s->lf.terms[j].unknown->id] = true;
        k->value = res.beta[j];
        k->regression = true;
        k->se = res.se[j];
        k->lo = res.lo[j];
        k->hi = res.hi[j];
        k->n = res.n;
        k->exact_fit = res.n == kcols;
    }
    bind_extra(s, sv->var_c, res.variance, "variance", st->loc);
    bind_extra(s, sv->cor_c, res.cor, "correlation coefficient", st->loc);
    ps_regress_result_free(&res);
out_reg:
    ps_regress_free(s->reg);
    s->reg = NULL;
    free(s->row);
    s->row = NULL;
out:
    plan_free(&pl);
    runner_free(&rn);
    s->rn = NULL;
}

/* ---- the revised specification ------------------------------------------------------- */

typedef struct edit {
    size_t at;          /* offset of the '?' */
    const ps_const *k;
} edit;

static int edit_cmp(const void *a, const void *b)
{
    size_t x = ((const edit *)a)->at, y = ((const edit *)b)->at;
    return x < y ? -1 : x > y;
}

static void number(ps_buf *b, double x)
{
    pv_format_number(b, x);
}

/* An uncertainty: four significant digits are plenty. */
static void approx(ps_buf *b, double x)
{
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%.4g", x);
    ps_buf_puts(b, tmp);
}

/* The main spec with `?` replaced, and a comment at the end of each line
 * that held a regression estimate. */
static char *revised(solver *s)
{
    ps_program *prog = s->prog;
    uint32_t file = prog->main->file;
    const char *text = prog->files.v[file]->text;
    edit *ed = ps_calloc(prog->consts.n + 1, sizeof *ed);
    size_t ne = 0;
    for (uint32_t i = 0; i < prog->consts.n; i++) {
        const ps_const *k = prog->consts.v[i];
        if (!k->unknown || k->qloc.file != file || k->qloc.line == 0 || !s->k[i].solved || !wanted(s, k))
            continue;
        ed[ne].at = ps_lex_offset(text, k->qloc.line, k->qloc.col);
        ed[ne].k = k;
        ne++;
    }
    qsort(ed, ne, sizeof *ed, edit_cmp);
    ps_buf out = {0}, note = {0};
    size_t pos = 0;
    size_t e = 0;
    while (text[pos]) {
        size_t end = pos;       /* the end of the line, before its line end (as the lexer counts them) */
        while (text[end] && !ps_lex_eol(text + end))
            end++;
        ps_buf_reset(&note);
        for (; e < ne && ed[e].at < end; e++) {
            ps_buf_put(&out, text + pos, ed[e].at - pos);
            const known *k = &s->k[ed[e].k->id];
            number(&out, k->value);
            pos = ed[e].at + 1;
            if (!k->regression)
                continue;
            ps_buf_printf(&note, "%s%s: ", note.len ? "; " : "", ed[e].k->local);
            if (k->exact_fit) {
                ps_buf_printf(&note, "exact fit of %llu points, no standard error", (unsigned long long)k->n);
            } else {
                ps_buf_puts(&note, "se ");
                approx(&note, k->se);
                ps_buf_puts(&note, ", 95% CI [");
                approx(&note, k->lo);
                ps_buf_puts(&note, ", ");
                approx(&note, k->hi);
                ps_buf_printf(&note, "], %llu points", (unsigned long long)k->n);
            }
        }
        ps_buf_put(&out, text + pos, end - pos);
        if (note.len) {
            ps_buf_puts(&out, "   % psolve: ");
            ps_buf_puts(&out, ps_buf_str(&note));
        }
        pos = end;
        ps_buf_put(&out, text + pos, ps_lex_eol(text + pos));     /* the line end as it was */
        pos += ps_lex_eol(text + pos);
    }
    ps_buf_free(&note);
    free(ed);
    return ps_buf_take(&out);
}

/* ---- checks before and after -------------------------------------------------------- */

/* Mark the constants (unknowns included) that e uses, directly or through
 * other constants. */
static bool mark_used(const ps_expr *e, void *ctx)
{
    bool *used = ctx;
    if (e->kind == X_CONST) {
        if (!used[e->cst->id]) {
            used[e->cst->id] = true;
            if (e->cst->expr)
                mark_used(e->cst->expr, used);
        }
        return false;
    }
    ps_expr_any_child(e, mark_used, used);
    return false;
}

static int solve(pspec *ps, int fd, const char *logname, const pspec_solve_options *opt, char **spec_out,
                 char **errmsg)
{
    ps_program *prog = &ps->prog;
    *spec_out = NULL;
    *errmsg = NULL;
    if (!prog->main) {
        *errmsg = ps_strdup("no specification loaded");
        return PSPEC_EXIT_SPEC;
    }
    for (size_t i = 0; opt->only && i < opt->nonly; i++) {
        bool found = false;
        for (uint32_t c = 0; c < prog->consts.n; c++)
            found |= prog->consts.v[c]->unknown && strcmp(prog->consts.v[c]->name, opt->only[i]) == 0;
        if (!found) {
            *errmsg = ps_asprintf("-u %s: no unknown of that name (use SPEC.NAME, e.g. %s.X)", opt->only[i],
                                  prog->name);
            return PSPEC_EXIT_SPEC;
        }
    }
    log_reader *r = log_reader_open(fd, false, logname, opt->warn, opt->ctx, errmsg);
    if (!r)
        return PSPEC_EXIT_LOG;
    log_reader_warn_once(r, true);   /* one warning per bad record, however many passes */
    solver s = {.ps = ps, .prog = prog, .opt = opt, .r = r};
    s.k = ps_calloc(prog->consts.n + 1, sizeof *s.k);
    s.solved = ps_calloc(prog->consts.n + 1, sizeof *s.solved);
    bool *in_some = ps_calloc(prog->consts.n + 1, sizeof(bool));
    for (uint32_t i = 0; i < prog->stmts.n; i++) {
        const ps_stmt *st = prog->stmts.v[i];
        if (st->kind != ST_SOLVE)
            continue;
        mark_used(st->solve->eqn, in_some);
        if (st->solve->var_c)
            in_some[st->solve->var_c->id] = true;
        if (st->solve->cor_c)
            in_some[st->solve->cor_c->id] = true;
        /* An unknown solved twice: this declaration has nothing left to solve. */
        ps_linform lf;
        ps_diags d = {0};
        if (ps_linear_form(prog, st->solve->eqn, s.solved, &lf, &d) < 0 && d.n &&
            strstr(d.v[0].msg, "no unknown to solve")) {
            problem(&s, st->loc, PSPEC_EXIT_SPEC, "every unknown of this equation is already solved by an earlier "
                    "solve declaration: an unknown can be solved only once");
            ps_diags_free(&d);
            continue;
        }
        ps_diags_free(&d);
        if (s.status == PSPEC_EXIT_LOG)
            break;
        run_solve(&s, st);
        if (s.status == PSPEC_EXIT_LOG)
            break;
    }
    /* Unknowns that an assertion or print needs but nothing solves. */
    bool *used = ps_calloc(prog->consts.n + 1, sizeof(bool));
    for (uint32_t i = 0; i < prog->stmts.n; i++)
        if (prog->stmts.v[i]->kind != ST_SOLVE)
            mark_used(prog->stmts.v[i]->expr, used);
    for (uint32_t i = 0; i < prog->consts.n; i++) {
        const ps_const *k = prog->consts.v[i];
        if (k->unknown && used[i] && !in_some[i])
            problem(&s, k->loc, PSPEC_EXIT_SPEC, "unknown '%s' is used by an assertion or print but no solve "
                    "declaration estimates it", k->local);
    }
    if (s.status != PSPEC_EXIT_LOG && s.status != PSPEC_EXIT_SPEC)
        *spec_out = revised(&s);
    int status = s.status;
    free(used);
    free(in_some);
    free(s.k);
    free(s.solved);
    log_reader_free(r);
    return status;
}

int pspec_solve(pspec *ps, int fd, const char *logname, const pspec_solve_options *opt, char **spec_out,
                char **errmsg)
{
    int rc = solve(ps, fd, logname, opt, spec_out, errmsg);
    pv_pools_trim();
    return rc;
}
