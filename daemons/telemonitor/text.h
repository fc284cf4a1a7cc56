/* Small text helpers for output: a growing string, JSON string quoting,
 * times, and rendering the checker's JSON metrics in the notation of the
 * PSpec reference ("time = 12, hist = (3 -> 2, 5 -> 1)"), read with
 * report_metrics_each (report.h). */
#ifndef TELEMON_TEXT_H
#define TELEMON_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* A growing string; `oom` is set if an allocation failed. */
struct sbuf {
	char *s;                  /* text, NUL-terminated (NULL until something is added) */
	size_t len;               /* its length */
	size_t cap;               /* allocated */
	bool oom;                 /* an allocation failed: the text is incomplete */
};

/* Append formatted text. */
void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Append `n` bytes. */
void sb_add(struct sbuf *b, const char *p, size_t n);

/* Append `s` as a JSON string literal (quoted, escaped); NULL gives null. */
void sb_json_str(struct sbuf *b, const char *s);

/* Take the text (caller frees); the buffer is emptied. Never NULL. */
char *sb_take(struct sbuf *b);

/* Free the text. */
void sb_free(struct sbuf *b);

/* Unix time as "2024-03-01T12:00:00Z" (UTC). */
char *iso_time(double t, char *out, size_t size);

/* A text table: cells are copied; columns are aligned when printed. */
struct table {
	char **cells;             /* row-major cells */
	size_t ncols;             /* columns */
	size_t nrows;             /* rows, the header included */
	size_t cap;               /* cells allocated */
};

/* Start a table with the given header cells (NULL-terminated). */
void table_init(struct table *t, const char *const *header);

/* Add a row of t->ncols cells. */
void table_row(struct table *t, const char *const *cells);

/* Print it aligned (two spaces between columns; the last one not padded,
 * and cut to `width` columns when width > 0), then free it. */
void table_print(struct table *t, struct sbuf *out, int width);

/* Is a metric called `name` a duration in nanoseconds (log ticks)? The
 * checker marks ts(e) - ts(s) with "units":{"name":"ns"}, but the store
 * keeps only the metrics object, so here the name decides: a name ending
 * in time, duration or latency (any case: "time", "meantime",
 * "io_latency") unless it starts with another unit (Lectern's "msTime",
 * "sec_time": ms, us, sec, secs, s, min before a capital or '_'), or a name
 * ending in _ns, or elapsed or wait. */
bool metric_is_duration(const char *name);

/* Nanoseconds in a human unit: "990 ns", "254.6 µs", "13.8 ms", "2.15 s"
 * (3 or 4 significant digits); with `sign`, "+" before a positive value.
 * Returns out. */
char *fmt_ns(double ns, bool sign, char *out, size_t size);

/* The metrics JSON object `json` as "name = value, ..." (heap string, NULL
 * on ENOMEM; "" when `json` is NULL or not a JSON object); durations
 * (metric_is_duration) in human units, a triple [v, p, m] of one as
 * "13.8 ms (±1 ns)" or "13.8 ms (+2 ns -1 ns)". */
char *render_metrics(const char *json);

/* The same in PSpec's notation with raw numbers ("time = [12990,1,1]"). */
char *render_metrics_plain(const char *json);

/* The units of the metrics JSON object `json` as JSON object text: "ns"
 * for each duration (metric_is_duration), e.g. {"time":"ns"}; "{}" when
 * none or `json` is not an object. Heap string, NULL on ENOMEM. */
char *metrics_units_json(const char *json);

#endif
