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

typedef struct ps_pass {
    ps_program *prog;
    ps_evalctx *ev;             /* slots, constants, earlier aggregates; results go to ev->topvals */
    const bool *need_iv;        /* per interval type id: recognise it in this pass */
    ps_agg *const *tops;        /* top-level aggregates computed in this pass */
    uint32_t ntops;
    const ps_stmt *const *report_for; /* per top: the assertion whose offenders it reports, or NULL */
    bool want_intervals;        /* call `interval` for every interval */
    bool want_events;           /* call `event` for every event of a declared type */
    /* An element for which a reporting {& ...} is false (result 1) or UNDEFINED (2). */
    void (*offender)(void *ctx, const ps_stmt *st, const pv *elem, int result);
    void (*interval)(void *ctx, const pv_interval *iv);
    void (*event)(void *ctx, const pv_event *ev);
    void *ctx;
} ps_pass;

/* Run one pass over r (from its current position). Returns 0, -EDOM when a
 * time constant (from/every/after) is not positive (message in *errmsg), or
 * a negative errno from the reader (message in *errmsg). */
int ps_engine_run(const ps_pass *p, log_reader *r, char **errmsg);

#endif
