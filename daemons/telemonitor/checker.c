/* What the checker says (pcheck -cont --json, one JSON object per line;
 * docs/man/pcheck.1): an offending interval or event becomes a failure in
 * the store with a log window and, for classes with `mail`, a notice
 * (unless it comes from a report assertion, "report":true, and the class
 * does not ask for those with notify-reports, or a silence matches it); an
 * end-of-log verdict is recorded (and becomes a failure itself when a
 * whole-log assertion failed with no offender to report); a note of
 * intervals left open ({"note":"unclosed",...}) is kept with the verdicts;
 * `print` output and anything else go to the typescript. report.c takes
 * the lines apart; failures.c takes a failure on from here (silences,
 * store, counters, mail, Alertmanager). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmon/log.h"
#include "failures.h"
#include "report.h"
#include "session.h"
#include "store.h"
#include "text.h"

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

static void failure(struct session *s, struct tool *t, const struct checker_report *r,
		    bool whole_log)
{
	struct tmon *tm = s->tm;
	struct tm_instance *in = s->inst;
	struct store_failure f = { 0 };
	struct failure_event ev = {
		.in = in, .class_id = s->cls.id, .mail = s->cls.mail,
		.mailgroup = s->cls.mailgroup, .alertmanager = s->cls.alertmanager,
		.resolve_after = s->cls.resolve_after,
		.notify_reports = s->cls.notify_reports,
	};
	uint64_t rs = 0, ss = 0, re = 0, se = 0;
	double now = tm_now();
	char what[200] = "";

	f.instance_id = in->id;
	f.spec = r->spec;
	f.assertion = r->assertion;
	f.line = r->line;
	f.result = r->result;
	f.kind = whole_log ? "assertion" : r->kind;
	f.type = r->type;
	f.uid = r->has_uid ? r->uid : -1;
	f.start = r->start;
	f.end = r->end;
	f.has_ts = r->has_ts;
	f.start_ts = r->start_ts;
	f.end_ts = r->end_ts;
	f.time = now;
	f.report = r->report;
	f.metrics = r->has_metrics ? r->metrics : NULL;
	if (whole_log && !f.metrics)
		f.metrics = r->witness;         /* pcheck --explain: what the verdict was made of */
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
	if (f.type && f.uid >= 0)
		snprintf(what, sizeof what, "%s %s #%" PRId64, f.kind ? f.kind : "interval", f.type,
			 f.uid);
	else if (f.type && f.kind && !strcmp(f.kind, "overdue"))
		snprintf(what, sizeof what, "interval %s overdue (started at record %s)", f.type,
			 f.start ? f.start : "?");
	else if (whole_log)
		snprintf(what, sizeof what, "whole log");
	/* silences, the store, the counters, then mail and Alertmanager */
	ev.f = f;
	ev.what = what;
	failures_add(tm, &ev);
}

/* {"checked":N} (pcheck --progress): every report on the first N event
 * records of the run came before this line. The instance's `checked`
 * follows, saved after the failures those reports made. */
static bool progress_line(struct session *s, struct tool *t, const char *line, size_t len)
{
	static const char head[] = "{\"checked\":";
	uint64_t n = 0;
	size_t i = sizeof head - 1;

	if (len < i + 2 || memcmp(line, head, i) != 0)
		return false;
	for (; i < len && line[i] >= '0' && line[i] <= '9'; i++)
		n = n * 10 + (uint64_t)(line[i] - '0');
	if (i + 1 != len || line[i] != '}')
		return false;
	checker_progress(s, t, n);
	return true;
}

void checker_progress(struct session *s, struct tool *t, uint64_t n)
{
	const struct ledger_file *f = t->led.f;

	t->run_checked = n;
	window_release(&s->ring, t->base + n);
	if (f) {
		uint64_t run = f->run_events < f->events ? f->run_events : f->events;
		s->inst->checked = f->events - run + (n < run ? n : run);
		s->inst->checked_dirty = true;
	}
}

/* A verdict of this run covers less than the whole log: the run started
 * past its first record (a restart of the checker, or an instance taken
 * over from another telemonitor), or the log goes on elsewhere (handed
 * over, or let go to a newer holder). */
static bool partial(const struct session *s, const struct tool *t)
{
	return t->log_base > 0 || s->inst->handover || s->inst->lease_lost ||
	       (s->state == SS_DRAINING && s->end_state != IS_ENDED && s->end_state != IS_GONE &&
		s->end_state != IS_STOPPED);
}

/* An offender: a failure, unless it is not one after all. */
static bool offender(struct session *s, struct tool *t, const struct checker_report *r)
{
	const char *result = r->result, *kind = r->kind;

	if (!(result && (!strcmp(result, "fail") || !strcmp(result, "undefined") ||
			 !strcmp(result, "inconclusive")) && kind &&
	      (!strcmp(kind, "interval") || !strcmp(kind, "event") || !strcmp(kind, "overdue"))))
		return false;
	failure(s, t, r, false);
	return true;
}

void checker_report(struct session *s, struct tool *t, const struct checker_report *r)
{
	if (!offender(s, t, r))
		typescript_note(&s->ts, "%s:%d: a report the telemonitor does not take: result %s, "
				"kind %s", r->spec ? r->spec : "?", r->line,
				r->result ? r->result : "?", r->kind ? r->kind : "?");
}

void checker_line(struct session *s, struct tool *t, const char *line, size_t len)
{
	struct checker_report r;
	const char *result;

	if (progress_line(s, t, line, len))
		return;

	if (report_parse(line, len, &r) != 0) {
		/* not a report (or no memory to read it): keep it for people to read */
		typescript_write(&s->ts, line, len);
		typescript_write(&s->ts, "\n", 1);
		return;
	}
	result = r.result;
	if (r.has_summary) {
		/* durations of an interval type since the last summary: kept for
		 * telemonctl compare */
		if (r.type && r.metric && r.count > 0)
			store_add_summary(s->tm->store, s->inst->id, tm_now(), r.type, r.metric, r.count,
					  r.sum, r.sumsq, r.min, r.max, r.sketch);
	} else if (r.has_print) {
		typescript_note(&s->ts, "print: %s", r.print ? r.print : "UNDEFINED");
	} else if (r.has_offenders) {
		const char *label = r.assertion;
		typescript_note(&s->ts, "%s:%d: assertion %s%s%s: %s (%" PRId64 " offenders)",
				r.spec ? r.spec : "?", r.line, label ? "\"" : "",
				label ? label : "(unlabelled)", label ? "\"" : "", result ? result : "?",
				r.offenders);
		store_add_verdict(s->tm->store, s->inst->id, r.spec, label, r.line, result,
				  r.offenders, tm_now(), t->log_base + 1, ledger_pos(&t->led),
				  partial(s, t));
		if (result && strcmp(result, "pass") && r.offenders == 0)
			failure(s, t, &r, true);
	} else if (r.note && !strcmp(r.note, "unclosed") && r.type) {
		/* intervals whose end never came: kept with the verdicts (as a
		 * row whose result is "unclosed"), and said */
		int64_t n = r.count;
		typescript_note(&s->ts, "%s:%d: %" PRId64 " interval%s of type %s still open at end of "
				"log (unclosed)", r.spec ? r.spec : "?", r.line, n, n == 1 ? "" : "s",
				r.type);
		store_add_verdict(s->tm->store, s->inst->id, r.spec, r.type, r.line, "unclosed", n,
				  tm_now(), t->log_base + 1, ledger_pos(&t->led), partial(s, t));
	} else if (!offender(s, t, &r)) {
		typescript_write(&s->ts, line, len);
		typescript_write(&s->ts, "\n", 1);
	}
	report_free(&r);
}
