/* pspec.h — libpspec, the PSpec performance-specification language.
 *
 * Load a specification (parse + type-check, before any log is read), then
 * check it against a monitoring log in one pass (more only when aggregates
 * are nested). Results come back as reports through one callback; the
 * library formats them (text in the reference's notation, or JSON Lines)
 * but never prints or exits.
 *
 * Conventions: functions that act return 0 or a negative errno-style code;
 * constructors return NULL on failure; heap strings returned to the caller
 * are freed with free().
 *
 * Threads: the library keeps no global mutable state, so several threads
 * may use it at once, each with its own pspec object (and its own sessions
 * and report callbacks); they get the results one thread would. One pspec
 * object, a session made from it, or one pspec_log must not be used by two
 * threads at the same time: the caller serialises that, as with sqlite3
 * connections. A report is only valid on the thread and during the
 * callback that got it. pspec_check may start one helper thread of its own to read ahead (see
 * pspec_check_options.threads); it ends before pspec_check returns, and the
 * callbacks are always called on the caller's thread. Freed values are
 * cached per thread for reuse and released before each call returns, so a
 * thread that exits leaves nothing behind.
 */
#ifndef PSPEC_PSPEC_H
#define PSPEC_PSPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the shared library exports (it is built with -fvisibility=hidden):
 * the functions below, nothing else. */
#if defined(__GNUC__)
#define PSPEC_API __attribute__((visibility("default")))
#else
#define PSPEC_API
#endif

/* A loaded specification and everything it imports. */
typedef struct pspec pspec;

/* A diagnostic about the specification. */
typedef struct pspec_diag {
    const char *file;           /* path as given */
    unsigned line, col;         /* 1-based */
    const char *message;
} pspec_diag;

/* A new, empty program. */
PSPEC_API pspec *pspec_new(void);
PSPEC_API void pspec_free(pspec *ps);     /* NULL ok */

/* Directories searched for imported specifications (colon-separated). When
 * never set, imports are looked up in the folder of the main spec. */
PSPEC_API void pspec_set_search_path(pspec *ps, const char *colon_separated);

/* Load the main specification from a file. Returns 0, or -EINVAL when the
 * spec does not parse or type-check (see pspec_diags), or -errno when the
 * file cannot be read. */
PSPEC_API int pspec_load_file(pspec *ps, const char *path);

/* Load the main specification from memory; `path` names it in messages and
 * its folder is the default import path. Returns 0 or -EINVAL. */
PSPEC_API int pspec_load_text(pspec *ps, const char *path, const char *text, size_t len);

/* Diagnostics collected so far, and "FILE:LINE:COL: error: MESSAGE" lines
 * for all of them (heap string, "" when none). */
PSPEC_API size_t pspec_ndiags(const pspec *ps);
PSPEC_API pspec_diag pspec_diag_at(const pspec *ps, size_t i);
PSPEC_API char *pspec_diags_format(const pspec *ps);
PSPEC_API void pspec_clear_diags(pspec *ps);

/* Number of passes over the log that checking the main spec takes: 1, or
 * more when log aggregates are nested (a multi-pass log must be seekable). */
PSPEC_API unsigned pspec_passes(const pspec *ps);
/* pcheck --plan: the passes, which assertions stream in -cont, and the
 * state each interval type and log aggregate keeps, as text (heap string),
 * without reading a log. */
PSPEC_API char *pspec_plan(const pspec *ps);
/* Does a continuous check of the spec keep state that grows with the length
 * of the stream (a second pass keeps the whole log; a mapping over the whole
 * log keeps every key it ever saw)? NULL when not; else one line per cause,
 * "  FILE:LINE: {OP x : T} ...\n" (heap string). What is bounded by the
 * intervals open at one time (docs/pspec.md "A plan before running") is not
 * a cause. */
PSPEC_API char *pspec_unbounded(const pspec *ps);
/* Does the spec contain unknowns (def X = ?) that an assertion or print uses? */
PSPEC_API bool pspec_uses_unknowns(const pspec *ps);

/* ---- reports ------------------------------------------------------------------ */

typedef enum pspec_result {
    PSPEC_PASS = 0,
    PSPEC_FAIL = 1,
    PSPEC_UNDEFINED = 2,
    PSPEC_INCONCLUSIVE = 3,     /* false, but records were lost where they could have changed that */
} pspec_result;

typedef enum pspec_report_kind {
    PSPEC_REPORT_OFFENDER,      /* an event/interval for which an outermost {& ...} is false/UNDEFINED */
    PSPEC_REPORT_ASSERT,        /* an assertion's verdict (end of log) */
    PSPEC_REPORT_PRINT,         /* a print statement's value (end of log) */
    PSPEC_REPORT_INTERVAL,      /* every interval, for -v */
    PSPEC_REPORT_EVENT,         /* every event relevant to the spec, for -e */
    PSPEC_REPORT_VALUE,         /* peval: an expression's value */
    PSPEC_REPORT_UNCLOSED,      /* intervals of a type still open at end of log (end of log) */
    PSPEC_REPORT_OVERDUE,       /* an interval with a deadline (within) open longer: a failure, or
                                   INCONCLUSIVE when records were lost since it started */
    PSPEC_REPORT_SUMMARY,       /* an interval type's durations in one window of the log's clock
                                   (summaries_s) */
} pspec_report_kind;

typedef struct pspec_report pspec_report;

/* Accessors (the report is only valid during the callback). */
PSPEC_API pspec_report_kind pspec_report_kind_of(const pspec_report *r);
PSPEC_API pspec_result pspec_report_result(const pspec_report *r);
/* The assertion's (or print's) file and line; label or NULL. */
PSPEC_API const char *pspec_report_file(const pspec_report *r);
PSPEC_API unsigned pspec_report_line(const pspec_report *r);
PSPEC_API const char *pspec_report_label(const pspec_report *r);
/* ASSERT: how many offenders its outermost {& ...} reported (0 otherwise);
 * for an INCONCLUSIVE verdict, how many inconclusive ones. */
PSPEC_API uint64_t pspec_report_offenders(const pspec_report *r);
/* UNCLOSED: how many intervals of its type (pspec_report_type) were still
 * open at end of log; file and line are the interval type's declaration. */
PSPEC_API uint64_t pspec_report_count(const pspec_report *r);
/* ASSERT/OFFENDER/OVERDUE that is INCONCLUSIVE: records lost (an interval:
 * while it was open, or for one started by time, since the record before
 * its start; a whole-log assertion: in the whole log); 0 otherwise. */
PSPEC_API uint64_t pspec_report_lost(const pspec_report *r);
/* ASSERT/OFFENDER: true for a report assertion, one whose purpose is
 * statistics: {& x : T : false} over events or intervals, which fails for
 * every element so that each element's metrics are reported. */
PSPEC_API bool pspec_report_is_stats(const pspec_report *r);
/* OFFENDER/INTERVAL/EVENT: the element's type name, interval uid (0 for
 * events), event position "pos.sub", start/end timestamps in ticks. */
PSPEC_API const char *pspec_report_type(const pspec_report *r);
PSPEC_API uint64_t pspec_report_uid(const pspec_report *r);
PSPEC_API int64_t pspec_report_start_ts(const pspec_report *r);
PSPEC_API int64_t pspec_report_end_ts(const pspec_report *r);
/* OFFENDER/INTERVAL/EVENT: whether the element is an interval (else an
 * event; false when the report has none). */
PSPEC_API bool pspec_report_is_interval(const pspec_report *r);
/* OFFENDER/INTERVAL/EVENT: the position "pos.sub" of the element's first
 * record (end false) or last (end true; an event's is its own), as the JSON
 * line's "start" and "end" say it, into buf (NUL-terminated, cut to size;
 * PSPEC_POSITION_MAX is enough). Returns its length; 0 when there is no
 * element. */
#define PSPEC_POSITION_MAX 48
PSPEC_API size_t pspec_report_position(const pspec_report *r, bool end, char *buf, size_t size);
/* OFFENDER/INTERVAL/EVENT: the element's metrics (an interval's) or
 * attributes (an event's) as the JSON line's "metrics" object says them,
 * into a buffer the caller reuses, as pspec_report_format_into does.
 * Returns its length; "{}" when there is no element. */
PSPEC_API size_t pspec_report_metrics_into(const pspec_report *r, char **buf, size_t *cap);

typedef enum pspec_format {
    PSPEC_FORMAT_TEXT,          /* human-readable, the reference's value notation */
    PSPEC_FORMAT_JSON,          /* one JSON object (DESIGN.md §5 keys) */
} pspec_format;

/* The report as one line (no trailing newline); heap string. */
PSPEC_API char *pspec_report_format(const pspec_report *r, pspec_format fmt);
/* The same line into a buffer the caller reuses across reports, as getline(3)
 * does: *buf (NULL or from malloc, *cap bytes) is grown with realloc when
 * needed and updated; the line is NUL-terminated. Returns its length. The
 * caller frees *buf at the end. */
PSPEC_API size_t pspec_report_format_into(const pspec_report *r, pspec_format fmt, char **buf, size_t *cap);

typedef void (*pspec_report_fn)(void *ctx, const pspec_report *r);
/* A malformed log record was skipped (`where`: line or byte offset), or
 * (`where` 0) something about the log as a whole. */
typedef void (*pspec_warn_fn)(void *ctx, const char *logname, uint64_t where, const char *msg);

typedef struct pspec_check_options {
    bool continuous;            /* report offenders as their interval/event closes (the client
                                   flushes); everything else at end of log */
    bool want_intervals;        /* PSPEC_REPORT_INTERVAL for every interval (-v) */
    bool want_events;           /* PSPEC_REPORT_EVENT for every event (-e) */
    bool explain;               /* an ASSERT report that did not pass carries a witness: the
                                   values of the log aggregates and constants it uses */
    bool compensate;            /* compensate the durations of every interval type for the writer's
                                   cost per event (as if every spec said `compensate;`); when that is
                                   asked for (here or by a spec) but the log header lacks the cost,
                                   `warn` says so (where 0) at the first record */
    double summaries_s;         /* > 0: the log's clock is cut in windows of this many seconds,
                                   [k * N, (k + 1) * N) from its zero; once the clock passes a
                                   window's end (and at end of log), a PSPEC_REPORT_SUMMARY of each
                                   interval type's duration metrics (exactly ts(e) - ts(s)) over the
                                   intervals that closed in it: count, sum, sum of squares, min, max
                                   (ns) and a sketch; a window where none closed says nothing */
    unsigned threads;           /* 1: read and check on the caller's thread; otherwise (0, the
                                   default) a log read offline from a regular file is read and
                                   parsed ahead on a second thread when the machine has two CPUs
                                   or more (the same results, warnings in the same places) */
    pspec_report_fn report;
    pspec_warn_fn warn;
    /* Continuous mode on a non-blocking fd (NULL: not called): every
     * record read so far has been checked and what it made due reported,
     * and the check waits for more input. `records` is how many event
     * records of the log were read (as report positions count them). */
    void (*idle)(void *ctx, uint64_t records);
    void *ctx;
} pspec_check_options;

/* Exit-status meaning of a check (DESIGN.md §5). */
enum {
    PSPEC_EXIT_OK = 0,          /* every assertion held */
    PSPEC_EXIT_FAILED = 1,      /* some assertion failed or was UNDEFINED */
    PSPEC_EXIT_SPEC = 2,        /* the spec did not parse or type-check (or a time constant is bad) */
    PSPEC_EXIT_LOG = 3,         /* the log could not be read */
    PSPEC_EXIT_INCONCLUSIVE = 4,/* nothing failed or was UNDEFINED, but something was inconclusive */
};

/* Check the main specification against the log read from fd (not closed).
 * Multi-pass specs need a seekable fd. Returns one of PSPEC_EXIT_*; on
 * PSPEC_EXIT_LOG or _SPEC *errmsg gets a heap message. */
PSPEC_API int pspec_check(pspec *ps, int fd, const char *logname, const pspec_check_options *opt, char **errmsg);

/* ---- a continuous check fed by its caller ------------------------------------- */

/* The check of `pcheck -cont` when the caller holds the log's bytes (a
 * telemonitor checks many streams on one thread this way, without a pipe
 * or a process each): the caller hands the bytes over as they come, and
 * each call checks what they complete and reports, through opt->report,
 * what became due; pspec_stream_end reports the rest as pspec_check does
 * at end of log. The same reports in the same order as pspec_check with
 * opt->continuous on the same bytes, however they are cut. Only specs of
 * one pass (pspec_passes <= 1). Streams of the same pspec may be
 * interleaved on one thread. */
typedef struct pspec_stream pspec_stream;

/* NULL with a heap message when nothing is loaded or the spec needs more
 * than one pass. `opt` is copied (continuous is implied, idle unused);
 * `ps` must outlive the stream. */
PSPEC_API pspec_stream *pspec_stream_new(pspec *ps, const char *logname, const pspec_check_options *opt,
                                         char **errmsg);
/* The next bytes of the log (any cut: header, records, parts of them).
 * True while the check wants more; false once it is over (an End record,
 * a header that is not a log's): pspec_stream_end then says why. */
PSPEC_API bool pspec_stream_feed(pspec_stream *s, const void *data, size_t len);
/* Event records read so far (as report positions count them); every
 * report about them has been made. */
PSPEC_API uint64_t pspec_stream_records(const pspec_stream *s);
/* The log ended: the remaining reports, and one of PSPEC_EXIT_* (on
 * PSPEC_EXIT_LOG or _SPEC with a heap message in *errmsg). Once. */
PSPEC_API int pspec_stream_end(pspec_stream *s, char **errmsg);
PSPEC_API void pspec_stream_free(pspec_stream *s);      /* NULL ok */

/* ---- estimating unknowns (psolve) ---------------------------------------------- */

typedef struct pspec_solve_options {
    const char *const *only;    /* qualified names (spec.name) of the unknowns to solve; NULL: all */
    size_t nonly;
    /* Before the data points of a regression: the solve's line and the names
     * of the columns ("y", then the unknowns' names). */
    void (*data_header)(void *ctx, unsigned line, const char *const *names, size_t ncols);
    /* One data point of a regression: y, then the coefficient of each unknown. */
    void (*data_point)(void *ctx, unsigned line, const double *values, size_t ncols);
    /* A problem with one solve declaration or unknown ("FILE:LINE:COL: error: ...").
     * The other declarations still run. */
    void (*problem)(void *ctx, const char *message);
    pspec_warn_fn warn;         /* malformed log records */
    void *ctx;
} pspec_solve_options;

/* Estimate the unknowns of the main specification from the log on fd (which
 * must be seekable: each solve declaration reads the log again). On success
 * *spec_out is the specification's text with each solved `= ?` replaced by
 * its estimate and, beside a regression's estimates, a comment with the
 * standard error, the 95% confidence interval and the number of points.
 * Returns 0 when every unknown asked for was estimated, PSPEC_EXIT_FAILED
 * when some could not be (singular system, too few points; see `problem`),
 * PSPEC_EXIT_SPEC for errors in the spec or its solve declarations (an
 * equation not linear in its unknowns, an unknown solved twice, an unknown
 * an assertion needs that nothing solves), PSPEC_EXIT_LOG when the log could
 * not be read. */
PSPEC_API int pspec_solve(pspec *ps, int fd, const char *logname, const pspec_solve_options *opt,
                          char **spec_out, char **errmsg);

/* ---- interactive use (peval) --------------------------------------------------- */

/* A session reads the log header once and evaluates commands against the
 * log (which must be seekable: the caller spools a pipe to a file). */
typedef struct pspec_session pspec_session;

PSPEC_API pspec_session *pspec_session_new(pspec *ps, int fd, const char *logname, pspec_warn_fn warn,
                                            void *ctx, char **errmsg);
PSPEC_API void pspec_session_free(pspec_session *s);
/* Run the commands in `text` (each ending in ';'): declarations are added,
 * expressions are evaluated and reported as PSPEC_REPORT_VALUE; `echo` text
 * and `help` come back through `out` as plain text. Returns 0, -EINVAL on
 * a command's error: a syntax or type error, an expression that needs a
 * log when the session has none, a bad time constant (message in *errmsg
 * as FILE:LINE:COL: error: ...), or -EIO when the log cannot be read. */
PSPEC_API int pspec_session_run(pspec_session *s, const char *text, const char *source_name,
                                pspec_report_fn report, void (*out)(void *ctx, const char *text), void *ctx,
                                char **errmsg);
/* Does `text` hold at least one complete command (ends with ';' outside
 * strings and comments)? For line-by-line input. */
PSPEC_API bool pspec_command_complete(const char *text);

/* ---- reading a log ---------------------------------------------------------- */

/* The records of a monitoring log (cmon-ascii 1 or cmon-bin 1, detected from
 * its first bytes), one at a time, as pspec_check reads them: malformed
 * records are skipped and reported through `warn`. On a pipe each record
 * is returned as soon as it is complete. */
typedef struct pspec_log pspec_log;

typedef enum pspec_log_kind {
    PSPEC_LOG_EVENT = 1,        /* an event */
    PSPEC_LOG_GAP = 2,          /* the transport dropped `gap` whole records here */
} pspec_log_kind;

typedef struct pspec_log_record {
    pspec_log_kind kind;
    const char *name;           /* EVENT: the event type's name (call@P, ret@P for procedures);
                                   NULL for a gap */
    const double *values;       /* EVENT: its attribute values, in log order */
    size_t nvalues;
    int64_t ts;                 /* EVENT: timestamp in ticks (pspec_log_tick_ns each) */
    int64_t thread;             /* EVENT: thread id */
    uint64_t pos;               /* EVENT: 1-based ordinal among the log's event records (malformed
                                   ones included); GAP: that of the event before it (0 if none) */
    uint64_t gap;               /* GAP: how many records were dropped; 0 for an event */
} pspec_log_record;

/* Open fd (the caller closes it, after pspec_log_free) and read the
 * log's header. NULL on failure, with a heap message in *errmsg. */
PSPEC_API pspec_log *pspec_log_open(int fd, const char *logname, pspec_warn_fn warn, void *ctx,
                                    char **errmsg);
PSPEC_API void pspec_log_free(pspec_log *l);    /* NULL ok */
/* Nanoseconds per tick (the header's tick-ns; 1 when not given). */
PSPEC_API double pspec_log_tick_ns(const pspec_log *l);
/* A header entry's value ("program", "machine", "pid", "tick-ns", ...), or NULL. */
PSPEC_API const char *pspec_log_header(const pspec_log *l, const char *key);
/* The next record into *rec (its pointers stay valid until the next call):
 * 1, 0 at end of log, or a negative errno-style code on a read error (heap
 * message in *errmsg). */
PSPEC_API int pspec_log_next(pspec_log *l, pspec_log_record *rec, char **errmsg);

#ifdef __cplusplus
}
#endif

#endif
