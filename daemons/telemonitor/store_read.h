/* Typed reads of the store for telemonctl's commands (commands.c,
 * stats.c), the HTTP API through them, and /metrics (metrics.c). The SQL
 * behind them lives in store_read.c, with the schema's owner; no caller
 * sees a database type, so another backend can answer the same calls.
 *
 * Rows are handed to a callback, in the order each function states, as a
 * struct whose strings (and the window's text) belong to the store and
 * are valid only during the call. A NULL column is a NULL string, or a
 * `has_x` flag false (the value then 0). A callback returns 0 for the
 * next row, anything else to stop there (the function then returns 0).
 *
 * Errors: functions return 0 or a negative errno-style code; those with
 * `err` put a message there ("store: ..."). Like the queries they replace,
 * a row that cannot be read ends the rows early without an error. */
#ifndef TELEMON_STORE_READ_H
#define TELEMON_STORE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* --- instances --------------------------------------------------------------- */

/* One instance. store_metrics_instances() fills only id, class_id, prog,
 * machine, pid, state, records, lost, gaps, bytes and tool_restarts. */
struct store_instance_row {
	uint64_t id;             /* its id */
	uint64_t class_id;       /* its class (0: none) */
	const char *prog;        /* program name */
	const char *machine;     /* machine name */
	int64_t pid;             /* process id */
	const char *state;       /* inst_state_name() of its state */
	bool want;               /* someone asked to monitor it */
	int64_t records;         /* records read */
	int64_t bytes;           /* bytes read */
	int64_t lost;            /* records lost */
	int64_t gaps;            /* gaps in the stream */
	int64_t skipped;         /* records skipped */
	int64_t failures;        /* failures stored (failure_counts: pruned ones too) */
	int64_t unchecked;       /* records the checker was given but did not report on */
	int64_t tool_restarts;   /* tool restarts */
	bool has_first_seen;     /* first_seen is known */
	double first_seen;       /* when it was first seen (Unix time) */
	bool has_ended;          /* it has ended */
	double ended;            /* when it ended (Unix time) */
	const char *status;      /* last status line, or NULL */
	const char *endpoint;    /* its snarflog's endpoint, or NULL */
	const char *version;     /* the program's version (log header), or NULL */
};

/* Called for each instance row. */
typedef int (*store_instance_row_cb)(void *arg, const struct store_instance_row *row);

/* The `limit` newest instances (the running ones only unless `all`),
 * oldest first. */
int store_instances_list(struct store *st, bool all, int limit, store_instance_row_cb cb,
			 void *arg, char *err, size_t errlen);

/* Instance `id`: `cb` is called once if it is stored, else not at all. */
int store_instance_read(struct store *st, uint64_t id, store_instance_row_cb cb, void *arg,
		       char *err, size_t errlen);

/* True if instance `id` is stored (false also if the store cannot say). */
bool store_instance_exists(struct store *st, uint64_t id);

/* The instances /metrics shows: at most `limit`, running ones first, then
 * the most recently ended; by id. */
int store_metrics_instances(struct store *st, int limit, store_instance_row_cb cb, void *arg,
			    char *err, size_t errlen);

/* How many instances are stored, into *n. */
int store_instances_count(struct store *st, int64_t *n, char *err, size_t errlen);

/* Instances in one state. */
struct store_state_count {
	const char *state;       /* the state's name */
	int64_t count;           /* instances in it */
};

/* Called for each state some instance is in. */
typedef int (*store_state_count_cb)(void *arg, const struct store_state_count *row);

/* Count the instances by state (in no particular order); -EIO if the
 * store cannot say. */
int store_instances_by_state(struct store *st, store_state_count_cb cb, void *arg);

/* --- failures ---------------------------------------------------------------- */

/* Failures of assertions, reports (of report assertions), or both. */
enum store_kind {
	STORE_KIND_ALL,          /* both */
	STORE_KIND_FAILURE,      /* failures only (report false) */
	STORE_KIND_REPORT,       /* reports only */
};

/* The kind named `s` ("failure", "report" or "all") into *out: 0, or
 * -EINVAL (*out untouched). */
int store_kind_parse(const char *s, enum store_kind *out);

/* Which failures store_failures_list() lists. */
struct store_failure_query {
	const char *prog;        /* only this program's, or NULL */
	const char *assertion;   /* only this assertion label's, or NULL */
	bool has_since;          /* `since` applies */
	double since;            /* only those reported at or after (Unix time) */
	uint64_t instance_id;    /* only this instance's (0: any) */
	uint64_t before_id;      /* only ids below it (0: any) */
	int limit;               /* the newest `limit` of those */
	bool newest_first;       /* delivered newest first, not oldest first */
	bool has_until;          /* `until` applies */
	double until;            /* only those reported before (Unix time) */
	enum store_kind kind;    /* failures, reports or both */
};

/* One failure with its instance's names. */
struct store_failure_row {
	uint64_t id;             /* its id */
	const char *prog;        /* its instance's program */
	const char *machine;     /* its instance's machine */
	int64_t pid;             /* its instance's pid */
	const char *assertion;   /* assertion label, NULL if unlabelled */
	int line;                /* line of the assertion in the spec */
	double time;             /* when it was reported (Unix time) */
	bool has_ts;             /* start_ts is known */
	int64_t start_ts;        /* interval start, log ticks */
	int64_t end_ts;          /* interval end, log ticks (0 if unknown) */
	const char *metrics;     /* metrics as JSON object text, or NULL */
	const char *spec;        /* spec file, or NULL */
	const char *result;      /* "fail", "undefined", "inconclusive"..., or NULL */
	const char *kind;        /* "interval", "event", "assertion", "overdue"..., or NULL */
	const char *type;        /* interval or event type, or NULL */
	bool has_uid;            /* uid is known */
	int64_t uid;             /* the interval's uid */
	const char *start;       /* start position as the checker said, or NULL */
	const char *end;         /* end position, or NULL */
	uint64_t instance_id;    /* its instance */
	bool has_window;         /* it has a log window (stored or not yet) */
	bool has_start_wall;     /* start_wall is known */
	double start_wall;       /* the interval's start as wall-clock time */
	bool report;             /* from a report assertion */
	bool has_silence;        /* a silence kept it quiet */
	uint64_t silence_id;     /* ...this one of ours (0: an Alertmanager's) */
	const char *am_silence;  /* ...or this Alertmanager silence (its id), or NULL */
	bool has_acked;          /* someone acknowledged it */
	double acked;            /* ...at this time */
	const char *ack_comment; /* ...saying this, or NULL */
};

/* Called for each failure row. */
typedef int (*store_failure_row_cb)(void *arg, const struct store_failure_row *row);

/* The failures `q` asks for (see struct store_failure_query). */
int store_failures_list(struct store *st, const struct store_failure_query *q,
			store_failure_row_cb cb, void *arg, char *err, size_t errlen);

/* True if failure `id` is stored (false also if the store cannot say). */
bool store_failure_exists(struct store *st, uint64_t id);

/* A failure's log window. */
struct store_window_row {
	bool has_window;         /* the failure was given a window */
	bool stored;             /* ...and it is stored (the rest is valid) */
	int64_t from_rec;        /* first record in it */
	int64_t to_rec;          /* last record in it */
	bool truncated;          /* cut at STORE_WINDOW_MAX */
	const char *text;        /* the log text */
	size_t len;              /* its length in bytes */
};

/* Called once with the window of a failure. */
typedef int (*store_window_cb)(void *arg, const struct store_window_row *row);

/* The log window of failure `id`: -ENOENT (no message) if there is no
 * such failure; -EIO with a message if its stored text is damaged (a
 * packed window that does not unpack: wtext.h); else `cb` is called
 * once, also when it has no window. */
int store_failure_window(struct store *st, uint64_t id, store_window_cb cb, void *arg, char *err,
			 size_t errlen);

/* --- statistics (stats.c) and /metrics (metrics.c) ----------------------------- */

/* One report for the daily statistics. */
struct store_stats_row {
	double time;             /* its interval's start, or when it was reported */
	const char *metrics;     /* its metrics as JSON object text, or NULL */
};

/* Called for each report. */
typedef int (*store_stats_row_cb)(void *arg, const struct store_stats_row *row);

/* The newest `limit` failures of assertion `assertion` of program `prog`
 * (during the UTC day starting at `day_from` if `has_day`), by time. */
int store_stats_rows(struct store *st, const char *prog, const char *assertion, bool has_day,
		     double day_from, int limit, store_stats_row_cb cb, void *arg, char *err,
		     size_t errlen);

/* Failures of one assertion of one instance. An assertion is named by its
 * label, or "line N" if it has none. */
struct store_failure_count {
	uint64_t instance_id;    /* the instance */
	const char *name;        /* the assertion's name */
	int64_t count;           /* its failures, inconclusive ones not counted */
	bool report;             /* these are reports (a report assertion's), not failures */
};

/* Called for each (instance, assertion). */
typedef int (*store_failure_count_cb)(void *arg, const struct store_failure_count *row);

/* Count the failures of the instances store_metrics_instances(`limit`)
 * shows, per instance and assertion name, reports apart (by instance,
 * then name): every failure ever stored, those pruned by retention
 * included, so that the counts only grow. */
int store_failure_counts(struct store *st, int limit, store_failure_count_cb cb, void *arg,
			 char *err, size_t errlen);

/* The newest report of one assertion of one instance. */
struct store_report_row {
	uint64_t instance_id;    /* the instance */
	const char *name;        /* the assertion's name (label or "line N") */
	const char *metrics;     /* its metrics as JSON text */
};

/* Called for each (instance, assertion). */
typedef int (*store_report_row_cb)(void *arg, const struct store_report_row *row);

/* The newest failure with metrics of each assertion of the instances
 * store_metrics_instances(`limit`) shows, by instance and assertion name. */
int store_newest_reports(struct store *st, int limit, store_report_row_cb cb, void *arg,
			 char *err, size_t errlen);

/* --- versions of a program ---------------------------------------------------- */

/* The instances of one program with one version (NULL: none said). */
struct store_version_row {
	const char *version;     /* NULL: the log header named none */
	int64_t instances;       /* how many instances ran it */
	int64_t running;         /* ...of which still run */
	double first_seen;       /* the first one's start (Unix time) */
	double last_seen;        /* the last one's end, or now if one runs */
	int64_t records;         /* records of all of them */
	int64_t failures;        /* failures of all of them */
};

/* Called for each version. */
typedef int (*store_version_row_cb)(void *arg, const struct store_version_row *row);

/* The versions program `prog` ran with, the oldest first (running
 * instances count as seen at `now`). */
int store_versions_list(struct store *st, const char *prog, double now, store_version_row_cb cb,
			void *arg, char *err, size_t errlen);

/* The metrics of report failures (report assertions, "report":true) of the
 * instances of `prog` with version `version`, the newest first, at most
 * `limit`; only assertion `assertion` (its label, or "line N") unless NULL.
 * Called with the assertion's name and the metrics' JSON text. */
typedef int (*store_version_report_cb)(void *arg, const char *assertion, const char *metrics);
int store_version_reports(struct store *st, const char *prog, const char *version,
			  const char *assertion, int limit, store_version_report_cb cb, void *arg,
			  char *err, size_t errlen);

/* The interval summaries (pcheck --summaries) of the instances of `prog`
 * with version `version`: each one's type, metric and sketch text. */
typedef int (*store_version_summary_cb)(void *arg, const char *type, const char *metric,
					const char *sketch);
int store_version_summaries(struct store *st, const char *prog, const char *version,
			    store_version_summary_cb cb, void *arg, char *err, size_t errlen);

/* The interval summaries stored after summary `after_id`, oldest first, at
 * most `limit`, with their instance's program and class: for the
 * duration histograms of /metrics, which add each summary once. */
struct store_summary_row {
	uint64_t id;             /* the summary (increasing) */
	const char *prog;        /* its instance's program */
	int64_t class_id;        /* ...and class (0: none) */
	const char *type;        /* the interval type */
	int64_t count;           /* intervals summed up */
	double sum;              /* the sum of their durations, ns */
	const char *sketch;      /* their sketch's JSON text (sketch.h), or NULL */
};
typedef int (*store_summary_row_cb)(void *arg, const struct store_summary_row *row);
int store_summaries_after(struct store *st, uint64_t after_id, int limit,
			  store_summary_row_cb cb, void *arg, char *err, size_t errlen);

/* --- time series (the dashboard's charts) -------------------------------------- */

/* Which failures store_failure_series() counts. */
struct store_series_query {
	const char *prog;        /* only this program's, or NULL */
	const char *assertion;   /* only this assertion label's, or NULL */
	double since, until;     /* reported in [since, until) (Unix time) */
	int64_t step;            /* seconds per bucket (> 0) */
	enum store_kind kind;    /* failures, reports or both */
	int limit;               /* rows at most */
};

/* The failures of one assertion of one program in one bucket. */
struct store_series_row {
	const char *prog;        /* the program */
	const char *name;        /* the assertion's name (label, or "line N") */
	bool report;             /* these are reports */
	int64_t bucket;          /* the bucket's start (Unix seconds, a multiple of step) */
	int64_t count;           /* failures in it */
};
typedef int (*store_series_row_cb)(void *arg, const struct store_series_row *row);

/* Count the failures `q` asks for per (program, assertion, report) and
 * bucket, counted in the store; by program, assertion, report, bucket.
 * Empty buckets have no row. */
int store_failure_series(struct store *st, const struct store_series_query *q,
			 store_series_row_cb cb, void *arg, char *err, size_t errlen);

/* One interval summary (a minute of one interval type of one instance). */
struct store_duration_row {
	const char *prog;        /* its instance's program */
	const char *type;        /* the interval type */
	double time;             /* when it was stored (Unix time) */
	const char *sketch;      /* its sketch's JSON text (sketch.h) */
};
typedef int (*store_duration_row_cb)(void *arg, const struct store_duration_row *row);

/* At most `limit` interval summaries with a sketch stored in [since,
 * until), of program `prog` and interval type `type` (NULL: any), by
 * program, type and time. */
int store_duration_rows(struct store *st, const char *prog, const char *type, double since,
			double until, int limit, store_duration_row_cb cb, void *arg, char *err,
			size_t errlen);

/* --- end-of-log verdicts ------------------------------------------------------ */

/* One end-of-log verdict of an instance's checker: an assertion's result
 * (pass, fail, undefined, inconclusive) with its offenders, or, result
 * "unclosed", the intervals of type `assertion` still open at end of log
 * (count in `offenders`). Strings may be NULL. */
struct store_verdict {
	uint64_t id;
	const char *spec;
	const char *assertion;   /* the label (NULL: none), or the interval type */
	int line;
	const char *result;
	int64_t offenders;
	double time;
	uint64_t from, to;       /* the records of the log it covers (0: unknown) */
	bool partial;            /* not the whole log (the instance changed telemonitors) */
};

/* Called for each verdict. */
typedef int (*store_verdict_row_cb)(void *arg, const struct store_verdict *v);

/* The verdicts of instance `instance_id`, in the order they were recorded. */
int store_verdicts_list(struct store *st, uint64_t instance_id, store_verdict_row_cb cb, void *arg,
			char *err, size_t errlen);

/* --- silences ---------------------------------------------------------------- */

/* Called for each silence; its strings are NULL where it matches anything. */
typedef int (*store_silence_row_cb)(void *arg, const struct store_silence *s);

/* At most `limit` silences neither removed nor ended at `now`, by id. */
int store_silences_list(struct store *st, double now, int limit, store_silence_row_cb cb,
			void *arg, char *err, size_t errlen);

#endif
