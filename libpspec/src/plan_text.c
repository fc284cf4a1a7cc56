/* plan_text.c — pcheck --plan: what checking a specification will keep,
 * said before any log is read (the passes, which assertions stream in
 * -cont, and the state each interval type and aggregate holds, as a bound
 * in terms of open intervals and distinct mapping keys). */
#include <inttypes.h>
#include <stdlib.h>

#include "check.h"
#include "program.h"
#include "quant.h"
#include "run-internal.h"
#include "util.h"

static const char *file_of(const ps_program *prog, ps_loc loc)
{
    return prog->files.v[loc.file]->path;
}

/* "{OP x : T ...}" for an aggregate: its operator and what it ranges over. */
static void agg_text(ps_buf *b, const ps_agg *a)
{
    ps_buf_printf(b, "{%s%s %s : %s}", pv_aggop_spelling[a->op], a->op == PV_AGG_QUANT ? a->quant_text : "",
                  a->var ? a->var->name : "x",
                  a->ev ? pv_type_name(a->ev) : a->iv ? a->iv->name : "domain(...)");
}

/* What checking the whole spec needs: every statement but solve, and the
 * interval types with a deadline (they report overdue ones by themselves). */
static void plan_spec(plan *pl, const ps_program *prog)
{
    plan_init(pl, (ps_program *)prog);
    for (uint32_t i = 0; i < prog->stmts.n; i++)
        if (prog->stmts.v[i]->kind != ST_SOLVE)
            plan_walk(pl, prog->stmts.v[i]->expr);
    for (uint32_t i = 0; i < prog->ivtypes.n; i++)
        if (prog->ivtypes.v[i]->within)
            plan_mark_iv(pl, prog->ivtypes.v[i]);
}

/* The state of a continuous check that grows with the length of the stream
 * rather than with what is open at one time: one "FILE:LINE: AGGREGATE ..."
 * line per cause into b, and how many. A second pass needs the whole log
 * kept (pspec_check spools it), and a mapping over the whole log keeps a
 * key for every value the stream ever brings. Open intervals, mappings
 * inside an interval's metrics (dropped when it ends) and quantile sketches
 * (log2 levels) are bounded by what the program has open at once. */
static unsigned unbounded_causes(const ps_program *prog, const plan *pl, ps_buf *b)
{
    unsigned n = 0;

    for (uint32_t i = 0; i < prog->topaggs.n; i++) {
        const ps_agg *a = prog->topaggs.v[i];
        if (!pl->agg_needed[i])
            continue;
        if (a->depth > 1) {
            ps_buf_printf(b, "  %s:%u: ", file_of(prog, a->loc), a->loc.line);
            agg_text(b, a);
            ps_buf_printf(b, " needs another aggregate over the whole log first (pass %u of %u): "
                          "the whole log is kept in a temporary file until it ends\n",
                          a->depth, pl->passes);
            n++;
        }
        if (a->map_depth > 0) {
            ps_buf_printf(b, "  %s:%u: ", file_of(prog, a->loc), a->loc.line);
            agg_text(b, a);
            ps_buf_puts(b, " is a mapping over the whole log: one entry per distinct key, kept as long "
                           "as the log lasts\n");
            n++;
        }
    }
    return n;
}

char *pspec_unbounded(const pspec *ps)
{
    const ps_program *prog = &ps->prog;
    plan pl;
    ps_buf b = {0};

    plan_spec(&pl, prog);
    unsigned n = unbounded_causes(prog, &pl, &b);
    plan_free(&pl);
    if (n == 0) {
        ps_buf_free(&b);
        return NULL;
    }
    return ps_buf_take(&b);
}

char *pspec_plan(const pspec *ps)
{
    const ps_program *prog = &ps->prog;
    plan pl;
    ps_buf b = {0};
    unsigned per_key = 0, quants = 0;

    plan_spec(&pl, prog);

    ps_buf_printf(&b, "passes over the log: %u%s\n", pl.passes ? pl.passes : 1,
                  pl.passes > 1 ? " (an aggregate over the log inside another; -cont keeps the log in a "
                                  "temporary file and reports at its end)" : "");
    ps_buf_puts(&b, "assertions:\n");
    for (uint32_t i = 0; i < prog->stmts.n; i++) {
        const ps_stmt *st = prog->stmts.v[i];
        if (st->kind != ST_ASSERT)
            continue;
        const ps_agg *a = reporting_agg(st);
        bool streams = a && pl.passes <= 1;
        ps_buf_printf(&b, "  %s:%u", file_of(prog, st->loc), st->loc.line);
        if (st->label)
            ps_buf_printf(&b, " \"%s\"", st->label);
        if (streams)
            ps_buf_printf(&b, ": streams in -cont (each failing %s is reported when it %s)\n",
                          a->ev ? pv_type_name(a->ev) : a->iv->name, a->ev ? "arrives" : "ends");
        else
            ps_buf_puts(&b, ": decided at end of log\n");
    }
    ps_buf_puts(&b, "state:\n");
    for (uint32_t i = 0; i < prog->ivtypes.n; i++) {
        const ps_ivtype *t = prog->ivtypes.v[i];
        if (!pl.need_iv[i])
            continue;
        ps_buf_printf(&b, "  interval %s (%s:%u): one record per open interval", t->name,
                      file_of(prog, t->loc), t->loc.line);
        if (t->naggs) {
            unsigned maps = 0, nq = 0;
            for (uint32_t k = 0; k < t->naggs; k++) {
                maps += t->aggs[k]->map_depth > 0;
                nq += t->aggs[k]->op == PV_AGG_QUANT;
            }
            ps_buf_printf(&b, ", with %u metric aggregate%s", t->naggs, t->naggs == 1 ? "" : "s");
            if (maps) {
                ps_buf_printf(&b, " (%u a mapping: one entry per distinct key, per open interval)", maps);
                per_key++;
            }
            if (nq) {
                ps_buf_printf(&b, " (%u a quantile: its values up to %u, then a sketch of %u entries per "
                              "level, per open interval)", nq, PS_QUANT_EXACT_MAX, PS_QUANT_SKETCH_K);
                quants++;
            }
        }
        if (t->end_kind == IVE_AFTER)
            ps_buf_puts(&b, "; ended by time, so about one open per start chain");
        else if (t->end_key)
            ps_buf_puts(&b, "; found by a hash index on its end key");
        else if (t->nested)
            ps_buf_puts(&b, "; nested: the most recent matching one ends");
        else
            ps_buf_puts(&b, "; unkeyed: an end event is tried against every open one");
        if (t->within)
            ps_buf_puts(&b, "; one open longer than its deadline (within) is reported overdue, once");
        if (t->scope && t->scope->compensate && t->start_kind == IVS_EVENT && t->end_kind == IVE_EVENT) {
            unsigned nd = 0;
            for (uint32_t m = 0; m < t->nmetric; m++)
                if (ps_metric_is_duration(t, t->metrics[m].expr))
                    ps_buf_printf(&b, "%s%s", nd++ ? ", " : "; compensated (compensate;): ", t->metrics[m].name);
            if (nd)
                ps_buf_puts(&b, " less the writer's cost per event (one record count per thread with such an "
                            "interval open)");
        }
        ps_buf_puts(&b, "\n");
    }
    for (uint32_t i = 0; i < prog->topaggs.n; i++) {
        const ps_agg *a = prog->topaggs.v[i];
        if (!pl.agg_needed[i])
            continue;
        ps_buf_printf(&b, "  aggregate ");
        agg_text(&b, a);
        ps_buf_printf(&b, " (%s:%u, pass %u): ", file_of(prog, a->loc), a->loc.line, a->depth);
        if (a->map_depth > 0) {
            ps_buf_printf(&b, "one entry per distinct key%s of its mapping\n",
                          a->map_depth > 1 ? " at each level" : "");
            per_key++;
        } else if (a->op == PV_AGG_QUANT) {
            ps_buf_printf(&b, "its values up to %u, then a sketch of %u entries per level "
                          "(log2(n / %u) + 1 levels for n values)\n",
                          PS_QUANT_EXACT_MAX, PS_QUANT_SKETCH_K, PS_QUANT_SKETCH_K);
            quants++;
        } else if (a->op == PV_AGG_THE || a->op == PV_AGG_FIRST || a->op == PV_AGG_LAST) {
            ps_buf_puts(&b, "one value\n");
        } else {
            ps_buf_puts(&b, "a few numbers\n");
        }
    }
    ps_buf_puts(&b, "memory: O(");
    bool first = true;
    for (uint32_t i = 0; i < prog->ivtypes.n; i++) {
        const ps_ivtype *t = prog->ivtypes.v[i];
        if (!pl.need_iv[i])
            continue;
        ps_buf_printf(&b, "%sopen %s", first ? "" : " + ", t->name);
        first = false;
    }
    if (per_key) {
        ps_buf_printf(&b, "%sdistinct mapping keys", first ? "" : " + ");
        first = false;
    }
    if (quants) {
        ps_buf_printf(&b, "%squantile values (up to %u per quantile, then a sketch of log2(n / %u) + 1 "
                      "levels)", first ? "" : " + ", PS_QUANT_EXACT_MAX, PS_QUANT_SKETCH_K);
        first = false;
    }
    ps_buf_printf(&b, "%s)%s\n", first ? "1" : "",
                  per_key ? "; mapping keys grow with the values the log brings" : "");
    ps_buf causes = {0};
    if (unbounded_causes(prog, &pl, &causes) == 0)
        ps_buf_puts(&b, "continuous mode (-cont): bounded by what is open at one time\n");
    else
        ps_buf_printf(&b, "continuous mode (-cont): unbounded, grows with the stream:\n%s", ps_buf_str(&causes));
    ps_buf_free(&causes);
    plan_free(&pl);
    return ps_buf_take(&b);
}
