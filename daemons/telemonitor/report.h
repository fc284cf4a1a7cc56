/* The one parser of the checker's reports: a line of pcheck --json
 * (docs/man/pcheck.1), one JSON object per line, taken apart into a typed
 * struct. checker.c decides what each report means; this only reads it.
 *
 * A field is read the way it always was: a text field is a string's text
 * or a number's literal (json_text), an integer field an integer or a
 * string's leading integer (json_as_int). A member that is absent reads as
 * NULL / 0 / false; the has_* flags tell absent (and null) from zero.
 *
 * Ownership: report_parse() fills a struct that owns its tree (and
 * report_of_offender one that owns a copy of its texts); every pointer in
 * it is valid until report_free(). Pure data: no I/O. */
#ifndef TELEMON_REPORT_H
#define TELEMON_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"

#define REPORT_NOT_A_REPORT 1     /* report_parse: the line is not a JSON object */

/* One line of the checker. */
struct checker_report {
	struct json *root;                /* the parsed line (owned) */
	bool has_print;                   /* a "print" member is there (even a null one) */
	enum json_kind print_kind;        /* with has_print: what print's value is */
	const char *print;                /* "print": its text; NULL when null */
	const char *spec;                 /* "spec": the spec file */
	const char *assertion;            /* "assert": the label; NULL when unlabelled */
	int line;                         /* "line": the assertion's line in the spec */
	const char *result;               /* "result": pass, fail, undefined, inconclusive */
	const char *note;                 /* "note": a note, not a verdict ("unclosed": intervals
					     of `type` still open at end of log, `count` of them) */
	const char *kind;                 /* "kind": interval, event, overdue (offenders) */
	const char *type;                 /* "type": the interval or event type */
	bool has_uid;                     /* "uid" is there and not null */
	int64_t uid;                      /* "uid": the interval's id (an event's "R.S": R) */
	const char *start;                /* "start": position "R.S" of the first record */
	const char *end;                  /* "end": position "R.S" of the last record */
	bool has_ts;                      /* "start_ts" is there and not null */
	enum json_kind start_ts_kind;     /* with has_ts: what start_ts's value is */
	int64_t start_ts;                 /* "start_ts": log time the interval started */
	int64_t end_ts;                   /* "end_ts": log time it ended */
	bool has_offenders;               /* an "offenders" member is there: a verdict line */
	enum json_kind offenders_kind;    /* with has_offenders: what its value is */
	int64_t offenders;                /* "offenders": how many offenders follow */
	bool report;                      /* "report": from a report assertion */
	int64_t count;                    /* "count": intervals still open (an unclosed note) */
	bool has_metrics;                 /* "metrics" is there, an object */
	const struct json *metrics_tree;  /* the "metrics" value (any kind), or NULL */
	const char *metrics;              /* with has_metrics: its source text, NUL-terminated */
	size_t metrics_len;               /* its length */
	const struct json *witness_tree;  /* the "witness" value (pcheck --explain), or NULL */
	const char *witness;              /* its text (a string's text; an object's source text);
					     NULL when absent or null */
	size_t witness_len;               /* its length */
	bool has_summary;                 /* "summary": a summary of an interval type's durations
					     (pcheck --summaries): type, metric, count and these */
	const char *metric;               /* "metric": the duration metric summarised */
	double sum, sumsq, min, max;      /* "sum", "sumsq", "min", "max" of its values (ns) */
	const char *sketch;               /* "sketch": its source text (an object), or NULL */
	size_t sketch_len;                /* its length */
	char *owned[4];                   /* copies made for the fields above (freed by report_free) */
};

/* Read the `len` bytes of `line` (no newline). 0 with `r` filled (free it
 * with report_free), REPORT_NOT_A_REPORT when the line is not a JSON
 * object (`r` is left empty: nothing to free), -ENOMEM. */
int report_parse(const char *line, size_t len, struct checker_report *r);

/* The same struct for an offender of a checker in this process (libpspec's
 * report of kind PSPEC_REPORT_OFFENDER, during its callback), field for
 * field as report_parse fills it from the report's pcheck --json line,
 * without writing and reading the line (metrics_tree is NULL: the metrics'
 * text is there). `scratch` is a buffer the caller reuses (NULL or from
 * malloc, *cap bytes). 0 with `r` filled (free it with report_free),
 * -EINVAL when it is not an offender, -ENOMEM. */
struct pspec_report;
int report_of_offender(const struct pspec_report *pr, char **scratch, size_t *cap,
		       struct checker_report *r);

/* Free what report_parse kept; `r` is emptied (an empty one is fine). */
void report_free(struct checker_report *r);

/* --- a report's metrics --------------------------------------------------------
 *
 * The one reader of a report's "metrics" object (docs/man/pcheck.1): each
 * member is a metric, its value one of PSpec's, written as JSON. One rule
 * for every reader (the mail's text, /metrics, telemonctl stats and
 * versions): a number is a number; true and false count as 1 and 0; an
 * array of exactly three elements, each a number or null, is a triple
 * [v, p, m] whose value is v (null stands for a value that is not finite);
 * an object is a mapping, keyed by the domain value, whose entries are read
 * by the same rule (report_metrics_each over its node); null is UNDEFINED.
 * Anything else (a string, any other array) has no value: its node is
 * there for whoever shows it as it is. */

/* What a metric's (or a mapping entry's) value is. */
enum report_metric_kind {
	REPORT_METRIC_UNDEFINED,          /* null: PSpec's UNDEFINED */
	REPORT_METRIC_NUMBER,             /* a number */
	REPORT_METRIC_BOOLEAN,            /* true (value 1) or false (value 0) */
	REPORT_METRIC_TRIPLE,             /* [v, p, m]: v, and its error bounds +p -m */
	REPORT_METRIC_MAPPING,            /* an object keyed by domain value: its node's members */
	REPORT_METRIC_OTHER,              /* a string or another array: no value */
};

/* One metric, or one entry of a mapping, as report_metrics_each reads it. */
struct report_metric {
	const char *name;                 /* the metric's name, or the entry's key */
	enum report_metric_kind kind;     /* what its value is */
	bool has_value;                   /* value holds a number: a number, a boolean, or a
					     triple whose v is not null */
	double value;                     /* with has_value: the (favoured) value; NAN otherwise */
	double plus, minus;               /* a triple's p and m (NAN where null); 0 otherwise */
	const struct json *node;          /* the value as written (a mapping's entries are its
					     members: read them with report_metrics_each) */
};

/* Called for each metric; a nonzero return stops the walk. */
typedef int (*report_metric_fn)(void *arg, const struct report_metric *m);

/* Call fn for each member of the metrics object (or mapping) `metrics`, in
 * the order written. 0 when all were read, fn's nonzero return when it
 * stopped, -EINVAL when `metrics` is NULL or not an object. */
int report_metrics_each(const struct json *metrics, report_metric_fn fn, void *arg);

/* The same over a metrics object's text as the store keeps it: -EINVAL
 * when `text` is NULL or not a JSON object, -ENOMEM. */
int report_metrics_each_text(const char *text, report_metric_fn fn, void *arg);

#endif
