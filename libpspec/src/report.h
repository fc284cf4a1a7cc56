/* report.h — what the library tells its client (private side of pspec.h). */
#ifndef PSPEC_REPORT_H
#define PSPEC_REPORT_H

#include "ast.h"
#include "pspec/pspec.h"
#include "summary.h"
#include "value.h"

/* One part of a witness: a sub-expression's source text and its value. */
typedef struct ps_witness {
    char *name;                 /* heap */
    pv value;                   /* owned */
} ps_witness;

struct pspec_report {
    pspec_report_kind kind;
    pspec_result result;
    const ps_program *prog;
    const ps_stmt *stmt;        /* ASSERT, PRINT, OFFENDER */
    const pv *elem;             /* OFFENDER, INTERVAL, EVENT: an event or interval value */
    const pv *value;            /* PRINT, VALUE */
    uint64_t offenders;         /* ASSERT */
    uint64_t lost;              /* INCONCLUSIVE ASSERT/OFFENDER/OVERDUE: records lost */
    const ps_ivtype *ivtype;    /* UNCLOSED: the interval type */
    uint64_t count;             /* UNCLOSED: intervals still open */
    const ps_witness *wit;      /* ASSERT with explain: [nwit] */
    const char *false_part;     /* ASSERT with explain: its smallest false part, when it is
                                   a conjunct of it (NULL: the whole) */
    uint32_t nwit;
    double age, within;         /* OVERDUE: how long it has been open, its bound (ticks); the
                                   start event is `elem` */
    const ps_summary *summary;  /* SUMMARY */
    int64_t from_ns, to_ns;     /* SUMMARY: its window [from, to), ns of the log's clock */
};

#endif
