/* run.c — checking a specification against a log, and peval sessions.
 *
 * The evaluation strategy of the thesis (§4.3.2, Figure 4.3): constants
 * without log aggregates are evaluated once the log's tick length is known;
 * then pass k over the log computes the top-level aggregates of depth k
 * (those containing only aggregates and constants of smaller depth), after
 * which the constants of depth k can be evaluated. Almost every spec needs
 * exactly one pass. Assertions and prints are evaluated at the end.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "logread.h"
#include "program.h"
#include "run-internal.h"
#include "report.h"
#include "unparse.h"
#include "util.h"

/* ---- what an evaluation needs ------------------------------------------------------ */



void plan_mark_iv(plan *pl, const ps_ivtype *iv)
{
    if (pl->need_iv[iv->id])
        return;
    pl->need_iv[iv->id] = true;
    for (uint32_t k = 0; k < iv->naggs; k++)
        if (iv->aggs[k]->iv)
            plan_mark_iv(pl, iv->aggs[k]->iv);
}

static bool walk_child(const ps_expr *e, void *ctx)
{
    plan_walk(ctx, e);
    return false;
}

void plan_walk(plan *pl, const ps_expr *e)
{
    if (!e)
        return;
    if (e->kind == X_CONST) {
        if (!pl->const_needed[e->cst->id]) {
            pl->const_needed[e->cst->id] = true;
            plan_walk(pl, e->cst->expr);
        }
        return;
    }
    if (e->kind == X_AGG) {
        const ps_agg *a = e->agg;
        if (a->place == AGG_TOP && !pl->agg_needed[a->id]) {
            pl->agg_needed[a->id] = true;
            if (a->depth > pl->passes)
                pl->passes = a->depth;
            if (a->iv)
                plan_mark_iv(pl, a->iv);
        }
    }
    ps_expr_any_child(e, walk_child, pl);
}

void plan_init(plan *pl, ps_program *prog)
{
    pl->prog = prog;
    pl->agg_needed = ps_calloc(prog->topaggs.n + 1, sizeof(bool));
    pl->const_needed = ps_calloc(prog->consts.n + 1, sizeof(bool));
    pl->need_iv = ps_calloc(prog->ivtypes.n + 1, sizeof(bool));
    pl->passes = 0;
}

void plan_free(plan *pl)
{
    free(pl->agg_needed);
    free(pl->const_needed);
    free(pl->need_iv);
}

/* ---- running the passes -------------------------------------------------------------- */


static bool judges_loss(const ps_expr *e, void *ctx);

void runner_init(runner *rn, pspec *ps, double tick_ns)
{
    ps_program *prog = &ps->prog;
    memset(rn, 0, sizeof *rn);
    rn->ps = ps;
    rn->prog = prog;
    rn->ev.nslots = prog->nslots;
    rn->ev.slots = ps_calloc(prog->nslots + 1, sizeof(pv));
    rn->ev.consts = ps_calloc(prog->consts.n + 1, sizeof(pv));
    rn->ev.topvals = ps_calloc(prog->topaggs.n + 1, sizeof(pv));
    rn->ev.tick_ns = tick_ns > 0 ? tick_ns : 1;
    rn->offenders = ps_calloc(prog->stmts.n + 1, sizeof(uint64_t));
    rn->inconclusive = ps_calloc(prog->stmts.n + 1, sizeof(uint64_t));
    rn->unclosed = ps_calloc(prog->ivtypes.n + 1, sizeof(uint64_t));
    rn->judges_loss = ps_calloc(prog->stmts.n + 1, sizeof(bool));
    for (uint32_t i = 0; i < prog->stmts.n; i++)
        rn->judges_loss[i] = prog->stmts.v[i]->expr && judges_loss(prog->stmts.v[i]->expr, NULL);
    rn->report_for = ps_calloc(prog->topaggs.n + 1, sizeof(*rn->report_for));
}

void runner_free(runner *rn)
{
    for (uint32_t i = 0; i < rn->prog->consts.n; i++)
        pv_free(rn->ev.consts[i]);
    for (uint32_t i = 0; i < rn->prog->topaggs.n; i++)
        pv_free(rn->ev.topvals[i]);
    free(rn->ev.slots);
    free(rn->ev.consts);
    free(rn->ev.topvals);
    free(rn->offenders);
    free(rn->inconclusive);
    free(rn->unclosed);
    free(rn->judges_loss);
    free(rn->report_for);
    free(rn->fed);
    free(rn->compensate);
    ps_summaries_free(rn->summ, rn->nsumm);
    free(rn->summ_first);
}

bool runner_compensate(runner *rn, const log_header *h, bool all)
{
    ps_program *prog = rn->prog;
    bool asked = all;
    for (uint32_t i = 0; i < prog->scopes.n; i++)
        asked |= prog->scopes.v[i]->compensate;
    if (!asked)
        return true;
    if (!(h->overhead_ns > 0))
        return false;
    free(rn->compensate);
    rn->compensate = ps_calloc(prog->ivtypes.n + 1, sizeof(bool));
    for (uint32_t i = 0; i < prog->ivtypes.n; i++) {
        const ps_ivtype *t = prog->ivtypes.v[i];
        rn->compensate[i] = all || (t->scope && t->scope->compensate);
    }
    rn->comp_mean = h->overhead_ns / rn->ev.tick_ns;
    rn->comp_spread = h->overhead_spread_ns / rn->ev.tick_ns;
    return true;
}

/* Evaluate the constants of depth `depth` (all of depth 0; of larger depths
 * only the needed ones, whose aggregates have been computed). */
static void eval_consts(runner *rn, const plan *pl, uint32_t depth)
{
    for (uint32_t i = 0; i < rn->prog->consts.n; i++) {
        ps_const *k = rn->prog->consts.v[i];
        if (k->depth != depth || k->unknown || !k->expr)
            continue;
        if (depth > 0 && !pl->const_needed[i])
            continue;
        pv_free(rn->ev.consts[i]);
        rn->ev.consts[i] = ps_eval(&rn->ev, k->expr);
    }
}

/* Does expression e judge loss itself (an aggregate over gap@, or a
 * metric defined by one)? Then lost records are what it is about, and its
 * verdict stands. */
static bool judges_loss(const ps_expr *e, void *ctx)
{
    if (e->kind == X_AGG && e->agg->ev && e->agg->ev->origin == EVO_GAP)
        return true;
    if (e->kind == X_METRIC) {
        const ps_type *t = e->field.obj->type;
        if (t && t->kind == T_INTERVAL && t->iv && e->field.index < t->iv->nmetric &&
            judges_loss(t->iv->metrics[e->field.index].expr, ctx))
            return true;
    }
    if (e->kind == X_CONST)
        return e->cst->expr && judges_loss(e->cst->expr, ctx);
    return ps_expr_any_child(e, judges_loss, ctx);
}

static void on_offender(void *ctx, const ps_stmt *st, const pv *elem, int result)
{
    runner *rn = ctx;
    /* An interval that was open while records were lost may be wrong in
     * any of its parts (even its end): its failure is inconclusive,
     * unless the assertion judges the loss itself. */
    bool unsure = result == 1 && elem->kind == PV_INTERVAL && elem->iv->lost && !rn->judges_loss[st->id];
    if (unsure)
        rn->inconclusive[st->id]++;
    else
        rn->offenders[st->id]++;
    if (!rn->opt || !rn->opt->report)
        return;
    pspec_report r = {.kind = PSPEC_REPORT_OFFENDER,
                      .result = unsure ? PSPEC_INCONCLUSIVE : result == 1 ? PSPEC_FAIL : PSPEC_UNDEFINED,
                      .lost = unsure ? elem->iv->lost : 0,
                      .prog = rn->prog, .stmt = st, .elem = elem};
    rn->opt->report(rn->opt->ctx, &r);
}

static void on_overdue(void *ctx, const ps_ivtype *t, const pv_event *start, double age, double within,
                       uint64_t lost)
{
    runner *rn = ctx;
    /* A record lost since the start could have been the end, in time: the
     * deadline's verdict is then inconclusive (docs/pspec.md "Deadlines"). */
    if (lost)
        rn->overdue_unsure++;
    else
        rn->overdue++;
    if (!rn->opt || !rn->opt->report)
        return;
    pv v = {.kind = PV_EVENT, .ev = (pv_event *)start};
    pspec_report r = {.kind = PSPEC_REPORT_OVERDUE, .result = lost ? PSPEC_INCONCLUSIVE : PSPEC_FAIL,
                      .lost = lost, .prog = rn->prog, .ivtype = t, .elem = &v, .age = age, .within = within};
    rn->opt->report(rn->opt->ctx, &r);
}

/* Report the duration summaries of the current window that have values,
 * and start them again; the next interval summarised opens its own window. */
static void report_summaries(runner *rn)
{
    for (uint32_t i = 0; rn->summ_open && i < rn->nsumm; i++) {
        if (!rn->summ[i].count)
            continue;
        pspec_report r = {.kind = PSPEC_REPORT_SUMMARY, .prog = rn->prog, .ivtype = rn->summ[i].type,
                          .summary = &rn->summ[i], .from_ns = rn->summ_from, .to_ns = rn->summ_to};
        rn->opt->report(rn->opt->ctx, &r);
        ps_summary_reset(&rn->summ[i]);
    }
    rn->summ_open = false;
}

/* The start, in ns of the log's clock, of the summary window holding time
 * `ts` (ticks): k * summ_len, k integral, so windows line up with the
 * clock's zero whatever the first record. Exact when the tick is a whole
 * number of ns (a clock in ns since 1970 is beyond a double's precision). */
static int64_t summ_window(const runner *rn, int64_t ts)
{
    int64_t len = rn->summ_len, tick = (int64_t)rn->ev.tick_ns, t;
    if (ts >= 0 && (double)tick == rn->ev.tick_ns && !__builtin_mul_overflow(ts, tick, &t))
        return t - t % len;
    double w = floor((double)ts * rn->ev.tick_ns / (double)len) * (double)len;
    return w >= 9.2e18 ? INT64_MAX - len : w <= -9.2e18 ? INT64_MIN : (int64_t)w;
}

/* When the window [summ_from, summ_to) opens: the first timestamp, in
 * ticks, past it, so that the clock of every record need not be divided
 * (summ_window's integral path, the usual one: from 0 up to that
 * timestamp, t * tick stays below summ_to, and summ_from being a multiple
 * of the length, t - t % len is at most summ_from). 0 where that does not
 * hold: every timestamp then takes summ_window. */
static void summ_clock_ahead(runner *rn)
{
    int64_t tick = (int64_t)rn->ev.tick_ns, to;

    rn->summ_next_ts = 0;
    if (tick < 1 || (double)tick != rn->ev.tick_ns || rn->summ_from < 0 ||
        rn->summ_from % rn->summ_len || __builtin_add_overflow(rn->summ_from, rn->summ_len, &to))
        return;
    rn->summ_next_ts = to / tick + (to % tick != 0);
}

/* The log's clock reads `ts` (a record's timestamp, before the record is
 * checked): once it has passed the end of the current summary window, that
 * window is over, whether an interval closes now or not. */
static void on_clock(void *ctx, int64_t ts)
{
    runner *rn = ctx;
    if (!rn->summ_open || (ts >= 0 && ts < rn->summ_next_ts))
        return;             /* (the tick is the runner's for its whole life) */
    if (summ_window(rn, ts) > rn->summ_from)
        report_summaries(rn);
}

/* Add a closed interval's duration metrics to the summaries of the window
 * of its end time (a record out of order, earlier than the current
 * window, stays in it: windows only move forward). */
static void summarise(runner *rn, const pv_interval *iv)
{
    int64_t w = summ_window(rn, iv->end->ts);
    const ps_ivtype *t = iv->type;

    if (rn->summ_open && w > rn->summ_from)
        report_summaries(rn);
    if (!rn->summ_open) {
        rn->summ_from = w;
        rn->summ_to = w > INT64_MAX - rn->summ_len ? INT64_MAX : w + rn->summ_len;
        rn->summ_open = true;
        summ_clock_ahead(rn);
    }
    for (uint32_t i = rn->summ_first[t->id]; i < rn->summ_first[t->id + 1]; i++) {
        ps_summary *s = &rn->summ[i];
        const pv *m = &iv->metric[s->metric];
        if (m->kind == PV_TRIPLE)
            ps_summary_add(s, m->t.v * rn->ev.tick_ns);
        else if (m->kind == PV_NUM)
            ps_summary_add(s, m->num * rn->ev.tick_ns);
    }
}

static void on_interval(void *ctx, const pv_interval *iv)
{
    runner *rn = ctx;
    if (rn->summ)
        summarise(rn, iv);
    if (!rn->want_iv)
        return;
    pv v = {.kind = PV_INTERVAL, .iv = (pv_interval *)iv};
    pspec_report r = {.kind = PSPEC_REPORT_INTERVAL, .prog = rn->prog, .elem = &v};
    rn->opt->report(rn->opt->ctx, &r);
}

static void on_first_record(void *ctx)
{
    runner *rn = ctx;
    if (!rn->warn_uncompensated || !rn->opt || !rn->opt->warn)
        return;
    rn->warn_uncompensated = false;     /* once, however many passes */
    rn->opt->warn(rn->opt->ctx, rn->logname, 0, "compensation asked for (compensate; or --compensate), but "
                  "the log header gives no cost per event (#cmon-overhead-ns): durations are not compensated");
}

static void on_event(void *ctx, const pv_event *e)
{
    runner *rn = ctx;
    pv v = {.kind = PV_EVENT, .ev = (pv_event *)e};
    pspec_report r = {.kind = PSPEC_REPORT_EVENT, .prog = rn->prog, .elem = &v};
    rn->opt->report(rn->opt->ctx, &r);
}

/* The passes of a plan: which interval types each recognises, and the
 * aggregates of one pass (pass_fill). */
typedef struct passes {
    unsigned n;                 /* how many */
    bool *all_iv;               /* [ivtypes] when more are recognised than the plan needs */
    bool *need_iv;              /* what is recognised */
    ps_agg **tops;              /* [topaggs] the aggregates of the current pass */
    const ps_stmt **rep;        /* and the assertions reporting their offenders */
    ps_pass p;                  /* the current pass */
} passes;

static void passes_begin(passes *ps, runner *rn, const plan *pl, bool want_iv)
{
    ps_program *prog = rn->prog;
    eval_consts(rn, pl, 0);
    ps->n = pl->passes;
    /* interval types with a deadline are watched in the first pass, used
     * or not: a deadline is an assertion of its own */
    bool deadlines = false;
    for (uint32_t i = 0; i < prog->ivtypes.n; i++)
        deadlines |= prog->ivtypes.v[i]->within != NULL;
    if (ps->n == 0 && (want_iv || rn->want_ev || (deadlines && rn->opt)))
        ps->n = 1;
    if (ps->n == 0 && rn->summ)
        ps->n = 1;
    rn->want_iv = want_iv;
    ps->need_iv = pl->need_iv;
    ps->all_iv = NULL;
    if (want_iv || deadlines || rn->summ) {
        ps->all_iv = ps_malloc((prog->ivtypes.n + 1) * sizeof(bool));
        for (uint32_t i = 0; i < prog->ivtypes.n; i++)
            ps->all_iv[i] = want_iv || pl->need_iv[i] || prog->ivtypes.v[i]->within;
        for (uint32_t i = 0; i < rn->nsumm; i++)
            ps->all_iv[rn->summ[i].type->id] = true;
        ps->need_iv = ps->all_iv;
    }
    ps->tops = ps_malloc((prog->topaggs.n + 1) * sizeof *ps->tops);
    ps->rep = ps_malloc((prog->topaggs.n + 1) * sizeof *ps->rep);
}

/* Set ps->p up for pass `pass`. */
static void pass_fill(passes *ps, runner *rn, const plan *pl, unsigned pass)
{
    ps_program *prog = rn->prog;
    uint32_t n = 0;
    for (uint32_t i = 0; i < prog->topaggs.n; i++) {
        if (pl->agg_needed[i] && prog->topaggs.v[i]->depth == pass) {
            ps->tops[n] = prog->topaggs.v[i];
            ps->rep[n] = rn->report_for[i];
            n++;
        }
    }
    bool want_iv = rn->want_iv, want_ev = rn->want_ev;
    ps->p = (ps_pass){.prog = prog, .ev = &rn->ev, .need_iv = ps->need_iv, .tops = ps->tops, .ntops = n,
                      .report_for = ps->rep, .want_intervals = (want_iv || rn->summ) && pass == 1,
                      .want_events = want_ev && pass == 1, .lost = &rn->lost, .unclosed = rn->unclosed,
                      .offender = on_offender, .overdue = pass == 1 && rn->opt ? on_overdue : NULL,
                      .interval = on_interval, .event = on_event, .fed = rn->fed,
                      .compensate = rn->compensate, .comp_mean = rn->comp_mean, .comp_spread = rn->comp_spread,
                      .comp_tick_ns = rn->ev.tick_ns,
                      .first_record = rn->warn_uncompensated ? on_first_record : NULL,
                      .clock = rn->summ && pass == 1 ? on_clock : NULL, .ctx = rn};
}

static void passes_end(passes *ps)
{
    free(ps->tops);
    free(ps->rep);
    free(ps->all_iv);
}

/* Run every pass the plan needs. Returns a PSPEC_EXIT_* code. */
int run_passes(runner *rn, const plan *pl, log_reader *r, bool rewind_first, bool want_iv, bool want_ev,
                      char **errmsg)
{
    passes ps;
    rn->want_ev = want_ev;
    passes_begin(&ps, rn, pl, want_iv);
    int status = PSPEC_EXIT_OK;
    for (unsigned pass = 1; pass <= ps.n; pass++) {
        if (pass > 1 || rewind_first) {
            int rc = log_reader_rewind(r);
            if (rc < 0) {
                *errmsg = ps_asprintf("this specification needs %u passes over the log, so the log must be a "
                                      "file, not a pipe", pl->passes);
                status = PSPEC_EXIT_LOG;
                break;
            }
        }
        pass_fill(&ps, rn, pl, pass);
        int rc = ps_engine_run(&ps.p, r, errmsg);
        if (rc == -EDOM) {
            status = PSPEC_EXIT_SPEC;
            break;
        }
        if (rc < 0) {
            if (!*errmsg)
                *errmsg = ps_asprintf("%s", strerror(-rc));
            status = PSPEC_EXIT_LOG;
            break;
        }
        eval_consts(rn, pl, pass);
    }
    passes_end(&ps);
    return status;
}

const ps_agg *reporting_agg(const ps_stmt *st)
{
    const ps_expr *e = st->expr;
    if (st->kind != ST_ASSERT || e->kind != X_AGG)
        return NULL;
    const ps_agg *a = e->agg;
    return (a->place == AGG_TOP && a->op == PV_AGG_ALL && (a->ev || a->iv)) ? a : NULL;
}

unsigned pspec_passes(const pspec *ps)
{
    plan pl;
    plan_init(&pl, (ps_program *)&ps->prog);
    for (uint32_t i = 0; i < ps->prog.stmts.n; i++)
        if (ps->prog.stmts.v[i]->kind != ST_SOLVE)
            plan_walk(&pl, ps->prog.stmts.v[i]->expr);
    unsigned n = pl.passes;
    plan_free(&pl);
    return n;
}

static bool uses_unknown(const ps_expr *e, void *ctx)
{
    if (e->kind == X_CONST)
        return e->cst->unknown || (e->cst->expr && uses_unknown(e->cst->expr, ctx));
    return ps_expr_any_child(e, uses_unknown, ctx);
}

bool pspec_uses_unknowns(const pspec *ps)
{
    for (uint32_t i = 0; i < ps->prog.stmts.n; i++)
        if (ps->prog.stmts.v[i]->kind != ST_SOLVE && uses_unknown(ps->prog.stmts.v[i]->expr, NULL))
            return true;
    return false;
}

static pspec_result result_of(const pv *v)
{
    if (v->kind != PV_BOOL)
        return PSPEC_UNDEFINED;
    return v->b ? PSPEC_PASS : PSPEC_FAIL;
}

/* ---- witnesses (pcheck --explain) ---- */

enum { WITNESS_MAX = 16 };

typedef struct witness_walk {
    runner *rn;
    ps_witness w[WITNESS_MAX];
    uint32_t n;
    char *texts[WITNESS_MAX];   /* strings the witness's values point to (owned) */
    uint32_t ntexts;
} witness_walk;

/* After aggregate `id`'s value (named `src`): the elements that fed it,
 * "V 1.0, V 2.0, V 3.0 and 7 more", if they were noted. */
static void witness_fed(witness_walk *ww, uint32_t id, const char *src)
{
    const ps_fed *f = ww->rn->fed ? &ww->rn->fed[id] : NULL;
    ps_buf b = {0};

    if (!f || ww->n == WITNESS_MAX)
        return;
    for (uint64_t i = 0; i < f->n && i < PS_FED_MAX; i++)
        ps_buf_printf(&b, "%s%s", i ? ", " : "", f->first[i]);
    if (f->n > PS_FED_MAX)
        ps_buf_printf(&b, " and %" PRIu64 " more", f->n - PS_FED_MAX);
    if (!f->n)
        ps_buf_puts(&b, "nothing");
    ww->texts[ww->ntexts] = ps_buf_take(&b);
    ww->w[ww->n].name = ps_asprintf("%s fed by", src);
    ww->w[ww->n].value = pv_str(ww->texts[ww->ntexts++]);
    ww->n++;
}

static bool witness_part(const ps_expr *e, void *ctx)
{
    witness_walk *ww = ctx;
    const ps_program *prog = ww->rn->prog;
    if (ww->n == WITNESS_MAX)
        return true;
    if (e->kind == X_AGG && e->agg->place == AGG_TOP) {
        char *src = ps_agg_source(prog, e->agg->loc);
        if (src) {
            for (uint32_t i = 0; i < ww->n; i++)
                if (!strcmp(ww->w[i].name, src)) {
                    free(src);
                    return false;
                }
            ww->w[ww->n].name = src;
            ww->w[ww->n].value = pv_copy(ww->rn->ev.topvals[e->agg->id]);
            ww->n++;
            witness_fed(ww, e->agg->id, src);
        }
        return false;       /* its insides are not evaluated on their own */
    }
    if (e->kind == X_CONST) {
        const char *name = e->cst->local ? e->cst->local : e->cst->name;
        for (uint32_t i = 0; i < ww->n; i++)
            if (!strcmp(ww->w[i].name, name))
                return false;
        ww->w[ww->n].name = ps_strdup(name);
        ww->w[ww->n].value = pv_copy(ww->rn->ev.consts[e->cst->id]);
        ww->n++;
        return false;
    }
    return ps_expr_any_child(e, witness_part, ctx);
}

/* A value is certainly false. */
static bool is_false(pv v)
{
    bool f = v.kind == PV_BOOL && !v.b;

    pv_free(v);
    return f;
}

/* The smallest false part of `e`, an assertion that is false: into the
 * side of an & that is false (the first, if both are), and into the link
 * of a chain of relations that is false (the first: `a < b < c` is
 * `a < b & b < c`), built in *link; through nothing else. */
static const ps_expr *false_part(runner *rn, const ps_expr *e, ps_expr *link)
{
    for (;;) {
        if (e->kind == X_BINARY && e->op == PV_OP_AND) {
            if (is_false(ps_eval(&rn->ev, e->bin.a)))
                e = e->bin.a;
            else if (is_false(ps_eval(&rn->ev, e->bin.b)))
                e = e->bin.b;
            else
                break;
        } else if (e->kind == X_CHAIN) {
            for (uint32_t i = 0; i + 1 < e->list.n; i++) {
                *link = (ps_expr){.kind = X_BINARY, .op = e->list.ops[i], .loc = e->loc, .type = e->type,
                                  .log_dependent = e->log_dependent};
                link->bin.a = e->list.items[i];
                link->bin.b = e->list.items[i + 1];
                if (is_false(ps_eval(&rn->ev, link)))
                    return link;
            }
            break;
        } else {
            break;
        }
    }
    return e;
}

/* Add an operand of the false part, by its text, unless it is a literal,
 * an aggregate or a constant (those are listed by witness_part). */
static void witness_operand(witness_walk *ww, const ps_expr *e)
{
    if (ww->n == WITNESS_MAX || e->kind == X_NUM || e->kind == X_TIMELIT || e->kind == X_BOOL ||
        e->kind == X_STR || e->kind == X_AGG || e->kind == X_CONST)
        return;
    char *name = ps_unparse(ww->rn->prog, e);
    for (uint32_t i = 0; i < ww->n; i++)
        if (!strcmp(ww->w[i].name, name)) {
            free(name);
            return;
        }
    ww->w[ww->n].name = name;
    ww->w[ww->n].value = ps_eval(&ww->rn->ev, e);
    ww->n++;
}

/* The witness of false assertion `e`: its smallest false part (as text,
 * into *part), the values of that part's operands, then of every log
 * aggregate and constant in it. */
static void witness(runner *rn, const ps_expr *e, witness_walk *ww, char **part)
{
    ps_expr link;
    const ps_expr *f = false_part(rn, e, &link);

    *part = f != e ? ps_unparse(rn->prog, f) : NULL;
    if (f->kind == X_CHAIN)
        for (uint32_t i = 0; i < f->list.n; i++)
            witness_operand(ww, f->list.items[i]);
    else if (f->kind == X_BINARY)
        witness_operand(ww, f->bin.a), witness_operand(ww, f->bin.b);
    witness_part(f, ww);
}

/* A false assertion over a log that lost records: FAIL if some offender is
 * certain; INCONCLUSIVE if its offenders all lost records, or if it is a
 * whole-log assertion (the lost records could have changed any log
 * aggregate) — unless it judges the loss itself. */
static void verdict_under_loss(const runner *rn, const ps_stmt *st, pspec_report *rep)
{
    uint32_t i = st->id;

    if (rn->lost == 0 || rn->judges_loss[i])
        return;
    if (reporting_agg(st)) {
        if (rn->offenders[i] == 0 && rn->inconclusive[i] > 0) {
            rep->result = PSPEC_INCONCLUSIVE;
            rep->offenders = rn->inconclusive[i];
            rep->lost = rn->lost;
        }
    } else if (st->expr->log_dependent) {
        rep->result = PSPEC_INCONCLUSIVE;
        rep->lost = rn->lost;
    }
}

void ps_set_prefetch_tuning(pspec *ps, const log_prefetch_tuning *t)
{
    ps->prefetch_tuned = t != NULL;
    if (t)
        ps->prefetch = *t;
}

/* A check's runner and plan, once the log's header is read. */
static void check_setup(runner *rn, plan *pl, pspec *ps, log_reader *r, const pspec_check_options *opt,
                        const char *logname)
{
    ps_program *prog = &ps->prog;
    runner_init(rn, ps, log_reader_header(r)->tick_ns);
    rn->opt = opt;
    rn->logname = logname;
    /* said at the first record: a log without records (the telemonitor's
     * check of a class) has nothing to compensate */
    rn->warn_uncompensated = !runner_compensate(rn, log_reader_header(r), opt->compensate);
    if (opt->explain)
        rn->fed = ps_calloc(prog->topaggs.n + 1, sizeof *rn->fed);
    if (opt->summaries_s > 0 && opt->report) {
        rn->summ = ps_summaries_new(prog, &rn->nsumm, &rn->summ_first);
        rn->summ_len = llround(opt->summaries_s * 1e9);
        if (rn->summ_len < 1)
            rn->summ_len = 1;
    }
    plan_init(pl, prog);
    for (uint32_t i = 0; i < prog->stmts.n; i++) {
        ps_stmt *st = prog->stmts.v[i];
        if (st->kind == ST_SOLVE)
            continue;
        plan_walk(pl, st->expr);
        const ps_agg *a = reporting_agg(st);
        if (a && !rn->report_for[a->id])
            rn->report_for[a->id] = st;
    }
}

/* After the passes (`status` is what they returned): the summaries still
 * due, the verdicts, the prints and the intervals left open. Returns the
 * check's PSPEC_EXIT_* code. */
static int check_finish(runner *rn, const pspec_check_options *opt, int status)
{
    ps_program *prog = rn->prog;
    if (rn->summ && (status == PSPEC_EXIT_OK || status == PSPEC_EXIT_FAILED))
        report_summaries(rn);          /* what closed since the last one */
    bool inconclusive = false;
    if (status == PSPEC_EXIT_OK) {
        for (uint32_t pass = 0; pass < 2; pass++) {
            for (uint32_t i = 0; i < prog->stmts.n; i++) {
                ps_stmt *st = prog->stmts.v[i];
                if ((pass == 0 && st->kind != ST_ASSERT) || (pass == 1 && st->kind != ST_PRINT))
                    continue;
                pv v = ps_eval(&rn->ev, st->expr);
                pspec_report rep = {.prog = prog, .stmt = st, .value = &v};
                if (st->kind == ST_ASSERT) {
                    rep.kind = PSPEC_REPORT_ASSERT;
                    rep.result = result_of(&v);
                    rep.offenders = rn->offenders[i];
                    if (rep.result == PSPEC_FAIL)
                        verdict_under_loss(rn, st, &rep);
                    if (rep.result == PSPEC_INCONCLUSIVE)
                        inconclusive = true;
                    else if (rep.result != PSPEC_PASS)
                        status = PSPEC_EXIT_FAILED;
                } else {
                    rep.kind = PSPEC_REPORT_PRINT;
                }
                witness_walk ww = {.rn = rn};
                char *part = NULL;
                /* (an outermost {& x : T ...} has its offenders for a witness) */
                if (st->kind == ST_ASSERT && opt->explain && rep.result != PSPEC_PASS &&
                    !reporting_agg(st)) {
                    witness(rn, st->expr, &ww, &part);
                    rep.wit = ww.w;
                    rep.nwit = ww.n;
                    rep.false_part = part;
                }
                if (opt->report)
                    opt->report(opt->ctx, &rep);
                for (uint32_t k = 0; k < ww.n; k++) {
                    free(ww.w[k].name);
                    pv_free(ww.w[k].value);
                }
                free(part);
                for (uint32_t k = 0; k < ww.ntexts; k++)
                    free(ww.texts[k]);
                pv_free(v);
            }
        }
    }
    /* never silently dropped: intervals whose end never came */
    for (uint32_t i = 0; (status == PSPEC_EXIT_OK || status == PSPEC_EXIT_FAILED) && opt->report &&
                         i < prog->ivtypes.n; i++) {
        if (!rn->unclosed[i])
            continue;
        pspec_report rep = {.kind = PSPEC_REPORT_UNCLOSED, .prog = prog, .ivtype = prog->ivtypes.v[i],
                            .count = rn->unclosed[i]};
        opt->report(opt->ctx, &rep);
    }
    if (status == PSPEC_EXIT_OK && rn->overdue)
        status = PSPEC_EXIT_FAILED;
    if (status == PSPEC_EXIT_OK && (inconclusive || rn->overdue_unsure))
        status = PSPEC_EXIT_INCONCLUSIVE;
    return status;
}

static int check(pspec *ps, int fd, const char *logname, const pspec_check_options *opt, char **errmsg)
{
    ps_program *prog = &ps->prog;
    *errmsg = NULL;
    if (!prog->main) {
        *errmsg = ps_strdup("no specification loaded");
        return PSPEC_EXIT_SPEC;
    }
    log_reader *r = log_reader_open(fd, false, logname, opt->warn, opt->ctx, errmsg);
    if (!r)
        return PSPEC_EXIT_LOG;
    log_reader_warn_once(r, true);   /* one warning per bad record, however many passes */
    if (ps->prefetch_tuned)
        log_reader_prefetch_tune(r, &ps->prefetch);
    if (!opt->continuous && opt->threads != 1 && sysconf(_SC_NPROCESSORS_ONLN) >= 2)
        log_reader_prefetch(r, true);   /* a pipe stays on this thread (-ENOTSUP) */
    if (opt->continuous && opt->idle && pspec_passes(ps) == 1)
        log_reader_on_idle(r, opt->idle, opt->ctx);   /* (more passes report at the end) */
    runner rn;
    plan pl;
    check_setup(&rn, &pl, ps, r, opt, logname);
    int status = run_passes(&rn, &pl, r, false, opt->want_intervals, opt->want_events, errmsg);
    status = check_finish(&rn, opt, status);
    plan_free(&pl);
    runner_free(&rn);
    log_reader_free(r);
    return status;
}

int pspec_check(pspec *ps, int fd, const char *logname, const pspec_check_options *opt, char **errmsg)
{
    int status = check(ps, fd, logname, opt, errmsg);
    pv_pools_trim();
    return status;
}

/* ---- a check fed by its caller ---------------------------------------------------- */

struct pspec_stream {
    pspec *ps;
    pspec_check_options opt;    /* the caller's, continuous */
    char *logname;
    ps_buf pending;             /* the bytes so far, while the header is not complete */
    log_reader *r;              /* once the header is read */
    runner rn;
    plan pl;
    passes pa;
    ps_engine *g;               /* the pass, while it goes on */
    bool over;                  /* the log ended, or the check cannot go on */
    int status;                 /* PSPEC_EXIT_* once over */
    char *err;                  /* its message, for pspec_stream_end */
};

pspec_stream *pspec_stream_new(pspec *ps, const char *logname, const pspec_check_options *opt, char **errmsg)
{
    *errmsg = NULL;
    if (!ps->prog.main) {
        *errmsg = ps_strdup("no specification loaded");
        return NULL;
    }
    unsigned n = pspec_passes(ps);
    if (n > 1) {
        *errmsg = ps_asprintf("this specification needs %u passes over the log, so it cannot be checked "
                              "as the log comes", n);
        return NULL;
    }
    pspec_stream *s = ps_calloc(1, sizeof *s);
    s->ps = ps;
    s->opt = *opt;
    s->opt.continuous = true;
    s->opt.idle = NULL;
    s->logname = ps_strdup(logname ? logname : "<log>");
    return s;
}

static void stream_fail(pspec_stream *s, int status, char *msg)
{
    s->over = true;
    s->status = status;
    free(s->err);
    s->err = msg ? msg : ps_strdup(strerror(EIO));
}

/* Read the header from the bytes so far (all of the log with `eof`); once
 * it is there, set the check up. */
static void stream_start(pspec_stream *s, bool eof)
{
    char *msg = NULL;
    int rc = log_reader_open_fed(&s->r, s->pending.data, s->pending.len, eof, s->logname, s->opt.warn,
                                 s->opt.ctx, &msg);
    if (rc == -EAGAIN)
        return;
    free(s->pending.data);
    s->pending = (ps_buf){0};
    if (rc < 0) {
        stream_fail(s, PSPEC_EXIT_LOG, msg);
        return;
    }
    check_setup(&s->rn, &s->pl, s->ps, s->r, &s->opt, s->logname);
    s->rn.want_ev = s->opt.want_events;
    passes_begin(&s->pa, &s->rn, &s->pl, s->opt.want_intervals);
    pass_fill(&s->pa, &s->rn, &s->pl, 1);      /* (one pass even when none is needed: the records
                                                  are read, and counted) */
    s->g = ps_engine_begin(&s->pa.p, s->r, &msg);
    if (!s->g)
        stream_fail(s, PSPEC_EXIT_SPEC, msg);
}

/* Check what the reader has; at the end of the log, the verdicts. */
static void stream_run(pspec_stream *s)
{
    char *msg = NULL;
    if (!s->g || s->over)
        return;
    int rc = ps_engine_step(s->g, &msg);
    if (rc == -EAGAIN) {
        log_reader_feed_idle(s->r);
        return;
    }
    if (rc < 0) {
        stream_fail(s, PSPEC_EXIT_LOG, msg ? msg : ps_asprintf("%s", strerror(-rc)));
        return;
    }
    free(msg);
    s->over = true;
    eval_consts(&s->rn, &s->pl, 1);
    s->status = check_finish(&s->rn, &s->opt, PSPEC_EXIT_OK);
}

bool pspec_stream_feed(pspec_stream *s, const void *data, size_t len)
{
    if (s->over)
        return false;
    if (!s->r) {
        if (len)
            ps_buf_put(&s->pending, data, len);
        stream_start(s, false);
    } else {
        log_reader_feed(s->r, data, len);
    }
    stream_run(s);
    return !s->over;
}

uint64_t pspec_stream_records(const pspec_stream *s)
{
    return s->r ? log_reader_pos(s->r) : 0;
}

int pspec_stream_end(pspec_stream *s, char **errmsg)
{
    *errmsg = NULL;
    if (!s->over) {
        if (!s->r)
            stream_start(s, true);
        else
            log_reader_feed_end(s->r);
        stream_run(s);
    }
    if (!s->over)       /* (cannot happen: at the end of a fed log the pass ends) */
        stream_fail(s, PSPEC_EXIT_LOG, ps_strdup("the log did not end"));
    if (s->err) {
        *errmsg = s->err;
        s->err = NULL;
    }
    return s->status;
}

void pspec_stream_free(pspec_stream *s)
{
    if (!s)
        return;
    ps_engine_end(s->g);
    if (s->r) {
        passes_end(&s->pa);
        plan_free(&s->pl);
        runner_free(&s->rn);
        log_reader_free(s->r);
    }
    free(s->pending.data);
    free(s->logname);
    free(s->err);
    free(s);
    pv_pools_trim();
}

/* ---- peval sessions ------------------------------------------------------------------ */

struct pspec_session {
    pspec *ps;
    log_reader *r;
    double tick_ns;
    ps_scope *scope;
    uint32_t chunks;
};

pspec_session *pspec_session_new(pspec *ps, int fd, const char *logname, pspec_warn_fn warn, void *ctx,
                                  char **errmsg)
{
    *errmsg = NULL;
    log_reader *r = NULL;
    if (fd >= 0) {
        r = log_reader_open(fd, false, logname, warn, ctx, errmsg);
        if (!r)
            return NULL;
        log_reader_warn_once(r, true);   /* one warning per bad record, however many passes */
    }
    pspec_session *s = ps_calloc(1, sizeof *s);
    s->ps = ps;
    s->r = r;
    s->tick_ns = r ? log_reader_header(r)->tick_ns : 1;
    if (ps->prog.main) {
        s->scope = ps->prog.main;
    } else {
        uint32_t f = ps_add_file(&ps->prog, "<peval>", "", 0);
        s->scope = ps_scope_new(&ps->prog, "peval", f);
        ps->prog.main = s->scope;
        ps->prog.name = "peval";
    }
    return s;
}

void pspec_session_free(pspec_session *s)
{
    if (!s)
        return;
    log_reader_free(s->r);
    free(s);
    pv_pools_trim();
}

static const char help_text[] =
    "Commands end with ';'. Besides expressions, which are evaluated against the log\n"
    "and printed, you can enter:\n"
    "  def NAME = EXPR;                         a constant\n"
    "  [timed] event NAME(ATTR, ...);           an event type\n"
    "  [nested] interval NAME = s: T [where P], e: T [where P] [metrics M = EXPR, ...] end NAME;\n"
    "  interval NAME = s: [from T] every T, e: after T ... end NAME;   time-based intervals\n"
    "  interval NAME = TYPE [metrics ...] end NAME;                     a subtype\n"
    "  proc NAME[(ARG, ...)] [returns R];       call@NAME, ret@NAME and intv@NAME\n"
    "  import SPEC;                             types of SPEC.pspec, as SPEC.NAME\n"
    "  echo \"TEXT\";                             print TEXT\n"
    "  help;                                    this text\n"
    "Expressions: numbers (10 ms, 2 sec, 5 cyc ...), true, false, \"strings\", [v, p, m] triples,\n"
    "k -> v mappings, (k1 -> v1, k2 -> v2), m(k), x.field, -, * / div mod, + -, = != < <= > >=,\n"
    "!, &, |, =>, c ? a ~ b, aggregates {OP x : TYPE [where P] : EXPR} and\n"
    "{OP x in domain(M) [where P] : EXPR} with OP one of + * & | min max mean stdev var the last\n"
    "first count (count takes no ': EXPR'), and the functions min max power log elapsed abs\n"
    "trunc timestamp thread defined mapped.\n"
    "Times are in log ticks: divide by a unit to convert, e.g. elapsed(i) / 1 us.\n";

/* Evaluate one expression against the log. */
static int session_eval(pspec_session *s, const ps_expr *e, pv *out, char **errmsg)
{
    runner rn;
    runner_init(&rn, s->ps, s->tick_ns);
    if (s->r)
        runner_compensate(&rn, log_reader_header(s->r), false);
    plan pl;
    plan_init(&pl, &s->ps->prog);
    plan_walk(&pl, e);
    int status = PSPEC_EXIT_OK;
    if (pl.passes > 0 && !s->r) {
        /* a command's error, where the command is (not a log that could
         * not be read: there is none) */
        *errmsg = ps_asprintf("%s:%u:%u: error: this expression needs a log, and none was given",
                              s->ps->prog.files.v[e->loc.file]->path, e->loc.line, e->loc.col);
        status = PSPEC_EXIT_SPEC;
    } else {
        status = run_passes(&rn, &pl, s->r, true, false, false, errmsg);
    }
    if (status == PSPEC_EXIT_OK || (status != PSPEC_EXIT_LOG && status != PSPEC_EXIT_SPEC))
        *out = ps_eval(&rn.ev, e);
    plan_free(&pl);
    runner_free(&rn);
    return status;
}

static int session_run(pspec_session *s, const char *text, const char *source_name, pspec_report_fn report,
                      void (*out)(void *ctx, const char *text), void *ctx, char **errmsg)
{
    pspec *ps = s->ps;
    ps_program *prog = &ps->prog;
    *errmsg = NULL;
    uint32_t file = ps_add_file(prog, source_name ? source_name : "<input>", text, strlen(text));
    ps_items items = {0};
    ps_diag d = {0};
    if (ps_parse_commands(prog, file, &items, &d) < 0) {
        *errmsg = ps_format_diag(prog, &d);
        free(d.msg);
        return -EINVAL;
    }
    ps_checker ck = {.prog = prog, .scope = s->scope, .is_main = false, .diags = &ps->diags,
                     .import = ps_import_spec, .import_ctx = ps};
    for (uint32_t i = 0; i < items.n; i++) {
        ps_item *it = items.v[i];
        if (it->kind == IT_ECHO) {
            if (out) {
                out(ctx, it->echo);
                out(ctx, "\n");
            }
            continue;
        }
        if (it->kind == IT_HELP) {
            if (out)
                out(ctx, help_text);
            continue;
        }
        bool is_expr = it->kind == IT_EXPR || it->kind == IT_ASSERT || it->kind == IT_PRINT;
        if (is_expr)
            it->kind = IT_EXPR;
        uint32_t before = ps->diags.n;
        if (ps_check_item(&ck, it) < 0 || ps->diags.n != before) {
            ps_buf b = {0};
            for (uint32_t k = before; k < ps->diags.n; k++) {
                char *line = ps_format_diag(prog, &ps->diags.v[k]);
                ps_buf_printf(&b, "%s%s", k > before ? "\n" : "", line);
                free(line);
            }
            pspec_clear_diags(ps);
            *errmsg = ps_buf_take(&b);
            return -EINVAL;
        }
        if (!is_expr)
            continue;
        pv v = pv_undef();
        int st = session_eval(s, it->assert.expr, &v, errmsg);
        if (st == PSPEC_EXIT_LOG || st == PSPEC_EXIT_SPEC) {
            pv_free(v);
            return st == PSPEC_EXIT_LOG ? -EIO : -EINVAL;   /* (peval: exit 3, or 2) */
        }
        pspec_report rep = {.kind = PSPEC_REPORT_VALUE, .prog = prog, .value = &v};
        if (report)
            report(ctx, &rep);
        pv_free(v);
    }
    return 0;
}

int pspec_session_run(pspec_session *s, const char *text, const char *source_name, pspec_report_fn report,
                      void (*out)(void *ctx, const char *text), void *ctx, char **errmsg)
{
    int rc = session_run(s, text, source_name, report, out, ctx, errmsg);
    pv_pools_trim();
    return rc;
}

bool pspec_command_complete(const char *text)
{
    bool in_str = false, in_comment = false, any = false;
    for (const char *p = text; *p; p++) {
        char c = *p;
        if (in_comment) {
            if (c == '\n' || c == '\r')
                in_comment = false;
        } else if (in_str) {
            if (c == '\\' && p[1])
                p++;
            else if (c == '"')
                in_str = false;
        } else if (c == '%') {
            in_comment = true;
        } else if (c == '"') {
            in_str = true;
        } else if (c == ';') {
            any = true;
        } else if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            any = false;
        }
    }
    return any;
}
