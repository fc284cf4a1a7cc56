/* What the checker says (pcheck -cont --json, one JSON object per line;
 * docs/man/pcheck.1): an offending interval or event becomes a failure in
 * the store with a log window and, for classes with `mail`, a notice
 * (unless it comes from a report assertion, "report":true, and the class
 * does not ask for those with notify-reports, or a silence matches it); an
 * end-of-log verdict is recorded (and becomes a failure itself when a
 * whole-log assertion failed with no offender to report); `print` output
 * and anything else go to the typescript. sqlite's JSON functions take
 * the lines apart. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmon/log.h"
#include "alerts.h"
#include "hygiene.h"
#include "session.h"
#include "store.h"
#include "text.h"

/* Columns of store_report_stmt(). */
enum {
	C_PRINT_TYPE, C_PRINT, C_SPEC, C_ASSERT, C_LINE, C_RESULT, C_KIND, C_TYPE, C_UID, C_START,
	C_END, C_TS_TYPE, C_START_TS, C_END_TS, C_METRICS, C_OFF_TYPE, C_OFFENDERS, C_METRICS_TYPE,
	C_REPORT, C_COUNT, C_WITNESS,
};

static const char *col(sqlite3_stmt *q, int c)
{
	return (const char *)sqlite3_column_text(q, c);
}

/* "R.S" -> R and S; false if malformed. */
static bool parse_pos(const char *p, uint64_t *r, uint64_t *sub)
{
	char *end;

	if (!p)
		return false;
	*r = strtoull(p, &end, 10);
	*sub = 0;
	if (*end == '.')
		*sub = strtoull(end + 1, &end, 10);
	return *end == '\0';
}

static void failure(struct session *s, struct tool *t, sqlite3_stmt *q, bool whole_log)
{
	struct tmon *tm = s->tm;
	struct tm_instance *in = s->inst;
	struct store_failure f = { 0 };
	uint64_t rs = 0, ss = 0, re = 0, se = 0, id = 0;
	double now = tm_now();
	char what[200] = "";

	f.instance_id = in->id;
	f.spec = col(q, C_SPEC);
	f.assertion = col(q, C_ASSERT);
	f.line = sqlite3_column_int(q, C_LINE);
	f.result = col(q, C_RESULT);
	f.kind = whole_log ? "assertion" : col(q, C_KIND);
	f.type = col(q, C_TYPE);
	f.uid = sqlite3_column_type(q, C_UID) == SQLITE_NULL ? -1 : sqlite3_column_int64(q, C_UID);
	f.start = col(q, C_START);
	f.end = col(q, C_END);
	f.has_ts = sqlite3_column_type(q, C_START_TS) != SQLITE_NULL;
	f.start_ts = sqlite3_column_int64(q, C_START_TS);
	f.end_ts = sqlite3_column_int64(q, C_END_TS);
	f.time = now;
	f.report = sqlite3_column_int(q, C_REPORT) != 0;
	f.silence_id = hygiene_silenced(tm, in->prog, in->machine, f.assertion, f.line, now);
	f.metrics = col(q, C_METRICS_TYPE) && !strcmp(col(q, C_METRICS_TYPE), "object")
			    ? col(q, C_METRICS) : NULL;
	if (whole_log && !f.metrics)
		f.metrics = col(q, C_WITNESS);  /* pcheck --explain: what the verdict was made of */
	if (!whole_log && parse_pos(f.start, &rs, &ss) && parse_pos(f.end, &re, &se)) {
		/* R.0 is record R; R.S (S > 0) was made up after record R, so
		 * the interval's first real record is R + 1 */
		f.start_pos = t->base + rs + (ss ? 1 : 0);
		f.end_pos = t->base + (re ? re : 1);
		if (f.start_pos > f.end_pos)
			f.start_pos = f.end_pos;
	} else {
		f.end_pos = s->scan.pos;      /* a whole-log verdict: the last records */
		f.end_ts = s->scan.last_ts;
	}
	if (f.has_ts)
		f.start_wall = session_wall(s, f.start_ts);
	if (f.end_pos)
		f.window_id = window_request(&s->ring, f.start_pos, f.end_pos, f.end_ts,
					     store_next_window_id(tm->store), now, TM_WINDOW_WAIT_S);
	if (store_add_failure(tm->store, &f, &id) < 0)
		return;
	if (f.result && !strcmp(f.result, "inconclusive"))
		return;                         /* records were lost: stored and shown apart, not counted,
						   mailed nor alerted */
	in->failures++;
	in->dirty = true;
	tm->total_failures++;
	if (f.type && f.uid >= 0)
		snprintf(what, sizeof what, "%s %s #%" PRId64, f.kind ? f.kind : "interval", f.type,
			 f.uid);
	else if (f.type && f.kind && !strcmp(f.kind, "overdue"))
		snprintf(what, sizeof what, "interval %s overdue (started at record %s)", f.type,
			 f.start ? f.start : "?");
	else if (whole_log)
		snprintf(what, sizeof what, "whole log");
	if (f.report && !s->cls.notify_reports)
		return;                         /* statistics: stored, not mailed nor alerted */
	if (f.silence_id)
		return;                         /* stored, marked silenced, not mailed nor alerted */
	if (s->cls.mail)
		notify_failure(tm, s->cls.mail, s->cls.mailgroup, in, id, f.assertion, f.line,
			       f.spec, what, f.start_ts, f.end_ts, f.metrics, now);
	if (s->cls.alertmanager)
		alerts_failure(tm, s->cls.alertmanager, s->cls.id, in, id, f.assertion, f.line,
			       f.spec, f.metrics, now);
}

void checker_line(struct session *s, struct tool *t, const char *line, size_t len)
{
	sqlite3_stmt *q = store_report_stmt(s->tm->store);
	const char *result, *kind;

	sqlite3_bind_text(q, 1, line, (int)len, SQLITE_STATIC);
	if (sqlite3_step(q) != SQLITE_ROW) {
		/* not a report: keep it for people to read */
		typescript_write(&s->ts, line, len);
		typescript_write(&s->ts, "\n", 1);
		goto out;
	}
	result = col(q, C_RESULT);
	kind = col(q, C_KIND);
	if (col(q, C_PRINT_TYPE)) {
		const char *v = col(q, C_PRINT);
		typescript_note(&s->ts, "print: %s", v ? v : "UNDEFINED");
	} else if (col(q, C_OFF_TYPE)) {
		int64_t off = sqlite3_column_int64(q, C_OFFENDERS);
		const char *label = col(q, C_ASSERT);
		typescript_note(&s->ts, "%s:%d: assertion %s%s%s: %s (%" PRId64 " offenders)",
				col(q, C_SPEC) ? col(q, C_SPEC) : "?", sqlite3_column_int(q, C_LINE),
				label ? "\"" : "", label ? label : "(unlabelled)", label ? "\"" : "",
				result ? result : "?", off);
		store_add_verdict(s->tm->store, s->inst->id, col(q, C_SPEC), label,
				  sqlite3_column_int(q, C_LINE), result, off, tm_now());
		if (result && strcmp(result, "pass") && off == 0)
			failure(s, t, q, true);
	} else if (result && !strcmp(result, "unclosed") && col(q, C_TYPE)) {
		/* intervals whose end never came: kept with the verdicts, and said */
		int64_t n = sqlite3_column_int64(q, C_COUNT);
		typescript_note(&s->ts, "%s:%d: %" PRId64 " interval%s of type %s still open at end of "
				"log (unclosed)", col(q, C_SPEC) ? col(q, C_SPEC) : "?",
				sqlite3_column_int(q, C_LINE), n, n == 1 ? "" : "s", col(q, C_TYPE));
		store_add_verdict(s->tm->store, s->inst->id, col(q, C_SPEC), col(q, C_TYPE),
				  sqlite3_column_int(q, C_LINE), result, n, tm_now());
	} else if (result && (!strcmp(result, "fail") || !strcmp(result, "undefined") ||
			      !strcmp(result, "inconclusive")) && kind &&
		   (!strcmp(kind, "interval") || !strcmp(kind, "event") || !strcmp(kind, "overdue"))) {
		failure(s, t, q, false);
	} else {
		typescript_write(&s->ts, line, len);
		typescript_write(&s->ts, "\n", 1);
	}
out:
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
}
