/* run-internal.h — planning and running passes over a log (private; shared
 * by pspec_check, peval sessions and psolve). */
#ifndef PSPEC_RUN_INTERNAL_H
#define PSPEC_RUN_INTERNAL_H

#include "ast.h"
#include "engine.h"
#include "eval.h"
#include "logread.h"
#include "pspec/pspec.h"
#include "summary.h"

/* What an evaluation needs from the log. */
typedef struct plan {
    ps_program *prog;
    bool *agg_needed;           /* [topaggs] */
    bool *const_needed;         /* [consts] */
    bool *need_iv;              /* [ivtypes] */
    unsigned passes;            /* deepest needed aggregate */
} plan;

/* Start an empty plan for prog. */
void plan_init(plan *pl, ps_program *prog);
void plan_free(plan *pl);
/* Add what evaluating e needs: its top-level aggregates (and the interval
 * types they range over), and the constants it uses, transitively. */
void plan_walk(plan *pl, const ps_expr *e);
/* Recognise interval type iv (and those its metric aggregates range over). */
void plan_mark_iv(plan *pl, const ps_ivtype *iv);

/* The state of one evaluation: constants, aggregate results, offenders. */
typedef struct runner {
    pspec *ps;
    ps_program *prog;
    ps_evalctx ev;
    const pspec_check_options *opt;
    uint64_t *offenders;        /* [stmts] certain offenders */
    uint64_t *inconclusive;     /* [stmts] offenders over intervals that lost records */
    uint64_t lost;              /* records the log's gap markers stood for */
    uint64_t *unclosed;         /* [ivtypes] intervals still open at end of log */
    bool *judges_loss;          /* [stmts] it aggregates gap@ itself: loss never makes it inconclusive */
    uint64_t overdue;           /* intervals reported open longer than their `within` */
    uint64_t overdue_unsure;    /* ... of which records were lost before the deadline passed:
                                   inconclusive, not failures */
    const ps_stmt **report_for; /* [topaggs] */
    ps_fed *fed;                /* [topaggs] the elements that fed each (--explain), or NULL */
    bool *compensate;           /* [ivtypes] compensated interval types (ps_pass.compensate), or NULL */
    double comp_mean, comp_spread;  /* the log's cost per event and its spread, in ticks */
    bool warn_uncompensated;    /* say at the first record that compensation asked for cannot be done */
    const char *logname;        /* for that warning */
    ps_summary *summ;           /* duration summaries (pspec_check_options.summaries_s), or NULL */
    uint32_t nsumm;
    uint32_t *summ_first;       /* [ivtypes + 1]: type i's summaries are [first[i], first[i + 1]) */
    int64_t summ_len;           /* the length of a summary window, ns of the log's clock */
    int64_t summ_from, summ_to; /* the current window [from, to) in ns (to = from + summ_len), where
                                   the intervals closing now are summarised */
    bool summ_open;             /* some interval was summarised in it (an empty one says nothing) */
    int64_t summ_next_ts;       /* a timestamp (ticks) from 0 below this one is still in it
                                   (summ_clock_ahead; 0: not known) */
    bool want_iv;               /* report every interval (run_passes' want_iv) */
    bool want_ev;               /* report every event (run_passes' want_ev) */
} runner;

void runner_init(runner *rn, pspec *ps, double tick_ns);
/* The outermost {& x : T ...} over events or intervals that assertion st
 * is (its offenders are reported one by one, as they close), or NULL. */
const ps_agg *reporting_agg(const ps_stmt *st);
void runner_free(runner *rn);
/* Perturbation compensation: the interval types of the specs that say
 * `compensate;` (all of them with `all`) are compensated with the writer's
 * cost per event from log header h. Returns false when compensation was
 * asked for but h gives no cost (then nothing is compensated). */
bool runner_compensate(runner *rn, const log_header *h, bool all);
/* Evaluate the constants without log aggregates, then run every pass the
 * plan needs (rewinding first when asked); each pass computes the needed
 * aggregates of its depth and then the constants that depend on them.
 * Returns a PSPEC_EXIT_* code; *errmsg on failure. */
int run_passes(runner *rn, const plan *pl, log_reader *r, bool rewind_first, bool want_iv, bool want_ev,
               char **errmsg);

#endif
