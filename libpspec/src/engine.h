/* engine.h — one pass over a log (private).
 *
 * Produces the event stream (real events, logstart@/logend@/gap@, virtual
 * time events placed as appendix A.3.4 says), recognises intervals, computes
 * their metrics with incremental aggregates, and feeds events and intervals
 * to the top-level aggregates being computed in this pass (thesis ch. 4,
 * Figure 4.2). Open intervals are indexed by the equality in their end
 * where-clause, and metric aggregates by the equality in theirs, so an event
 * costs O(intervals it can affect), not O(open intervals). Memory is bounded
 * by what is open.
 */
#ifndef PSPEC_ENGINE_H
#define PSPEC_ENGINE_H

#include "ast.h"
#include "eval.h"
#include "logread.h"

/* The elements that fed a top-level aggregate (pcheck --explain): how many
 * passed its where-clause, and the first PS_FED_MAX of them by position,
 * as text ("V 3.0": an event's type and position; "Read #4 3.0": an
 * interval's type, uid and start). */
#define PS_FED_MAX 5
typedef struct ps_fed {
    uint64_t n;                         /* elements that fed it */
    char first[PS_FED_MAX][48];         /* the first of them */
} ps_fed;

typedef struct ps_pass {
    ps_program *prog;
    ps_evalctx *ev;             /* slots, constants, earlier aggregates; results go to ev->topvals */
    const bool *need_iv;        /* per interval type id: recognise it in this pass */
    ps_agg *const *tops;        /* top-level aggregates computed in this pass */
    uint32_t ntops;
    const ps_stmt *const *report_for; /* per top: the assertion whose offenders it reports, or NULL */
    bool want_intervals;        /* call `interval` for every interval */
    bool want_events;           /* call `event` for every event of a declared type */
    uint64_t *lost;             /* if not NULL: raised to the records the log's gap markers stood for */
    uint64_t *unclosed;         /* if not NULL: [ivtypes], raised to the intervals of each type ended
                                   by an event that are still open at end of log */
    /* An element for which a reporting {& ...} is false (result 1) or UNDEFINED (2). */
    void (*offender)(void *ctx, const ps_stmt *st, const pv *elem, int result);
    void (*interval)(void *ctx, const pv_interval *iv);
    /* If not NULL: an interval of type t (with `within`), started by
     * `start`, is still open `age` ticks later, longer than `within`;
     * called once per interval, when a record shows the bound passed.
     * `lost`: records lost since it started (any of them could have been
     * its end in time). */
    void (*overdue)(void *ctx, const ps_ivtype *t, const pv_event *start, double age, double within,
                    uint64_t lost);
    void (*event)(void *ctx, const pv_event *ev);
    /* Optional element sink (psolve's regressions). For each top k with
     * is_sink[k] true (is_sink may be NULL: none), the aggregate's
     * where-clause is evaluated as usual, but instead of evaluating its
     * value and accumulating it, each element that passes is handed to
     * sink(ctx, k, &elem), and an element for which the where-clause is
     * UNDEFINED is reported as sink(ctx, k, NULL). `elem` is borrowed
     * (pv_copy it to keep it); during the call the aggregate's variable is
     * bound to it in ev->slots, so the sink may evaluate expressions over
     * it with ps_eval(ev, ...). A sink aggregate reports no offenders and
     * its own value is not computed: its ev->topvals entry becomes
     * UNDEFINED. Example (solve data x : T where P : y = a * f(x)):
     *     static void point(void *ctx, uint32_t k, const pv *elem)
     *     {
     *         if (!elem) { note that the where-clause was UNDEFINED; return; }
     *         pv y = ps_eval(ev, lhs), f = ps_eval(ev, rhs_coefficient);
     *         ... add the data point (y, f) ...
     *     }
     * with tops[k] the aggregate holding x, T and P (ps_solve.range). */
    void (*sink)(void *ctx, uint32_t k, const pv *elem);
    const bool *is_sink;        /* per top: feed `sink` instead of accumulating; NULL: none */
    /* If not NULL: [top-level aggregate id], filled with the elements that
     * fed each aggregate of this pass (a little slower: every aggregate
     * takes the general path). */
    ps_fed *fed;
    /* Perturbation compensation (docs/pspec.md): if not NULL, [ivtypes]:
     * the types whose duration metrics (exactly `ts(e) - ts(s)` of their
     * own binders) are compensated. For such an interval started by a
     * record of thread T, with n = 1 + the records of T strictly between
     * its start and end records, the metric [v, p, m] becomes
     * [v - n*comp_mean, p + n*comp_spread, m + n*comp_spread]. NULL costs
     * nothing per record. */
    const bool *compensate;
    double comp_mean, comp_spread;  /* the writer's cost per event and its spread, in ticks
                                       (the header's: a thread's overhead records, in ns,
                                       replace them for its later records) */
    double comp_tick_ns;            /* ns per tick, to turn those records into ticks */
    void (*first_record)(void *ctx);    /* if not NULL: called when the first record is read */
    void (*clock)(void *ctx, int64_t ts);   /* if not NULL: the log's clock, each record's timestamp,
                                               before the record is checked */
    void *ctx;
} ps_pass;

/* Run one pass over r (from its current position). Returns 0, -EDOM when a
 * time constant (from/every/after) is not positive (message in *errmsg), or
 * a negative errno from the reader (message in *errmsg). */
int ps_engine_run(const ps_pass *p, log_reader *r, char **errmsg);

/* The same pass in steps, for a log fed by its caller (log_reader_open_fed):
 * begin (NULL with a message in *errmsg on -EDOM), then step as bytes
 * arrive, which returns -EAGAIN when the reader wants more, 0 once the log
 * ended (the pass's results are then set as ps_engine_run sets them), or a
 * negative errno from the reader; end frees it (NULL ok). `p` and `r` must
 * outlive it. */
typedef struct engine ps_engine;
ps_engine *ps_engine_begin(const ps_pass *p, log_reader *r, char **errmsg);
int ps_engine_step(ps_engine *g, char **errmsg);
void ps_engine_end(ps_engine *g);

#endif
