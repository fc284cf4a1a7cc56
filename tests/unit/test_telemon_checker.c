/* Unit tests for what the checker says (daemons/telemonitor/checker.c):
 * an offending interval, event or overdue interval becomes one failure
 * event (failures.h) with its positions in the whole stream, its start on
 * the wall clock, its log window, what its class says and a short "what";
 * a whole-log verdict is stored and, failed with no offender, becomes a
 * failure over the last records; progress lines move `checked`; print
 * output and lines that are not reports go to the typescript. The real
 * report parser reads the lines; failures_add, the store, the window ring
 * and the typescript are stubs that record what they were given. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../daemons/telemonitor/checker.c"
#include "../../daemons/telemonitor/json.c"
#include "../../daemons/telemonitor/report.c"

#define NOW 1700000100.0

/* What the stubs were given (strings copied: the report is freed after). */
static struct {
	size_t failures;              /* failures_add calls */
	struct failure_event ev;      /* ...the last event (its strings below) */
	char what[200], kind[32], type[32], spec[64], assertion[64], metrics[128], result[32];
	size_t verdicts;              /* store_add_verdict calls */
	char verdict[32];             /* ...the last one's result */
	int64_t offenders;            /* ...its offenders */
	size_t windows;               /* window_request calls */
	uint64_t win_start, win_end;  /* ...the last one's records */
	char ts[512];                 /* the typescript */
} w;

static void copy(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "(null)");
}

int failures_add(struct tmon *tm, const struct failure_event *ev)
{
	(void)tm;
	w.failures++;
	w.ev = *ev;
	copy(w.what, sizeof w.what, ev->what);
	copy(w.kind, sizeof w.kind, ev->f.kind);
	copy(w.type, sizeof w.type, ev->f.type);
	copy(w.spec, sizeof w.spec, ev->f.spec);
	copy(w.assertion, sizeof w.assertion, ev->f.assertion);
	copy(w.metrics, sizeof w.metrics, ev->f.metrics);
	copy(w.result, sizeof w.result, ev->f.result);
	return 0;
}

int store_add_verdict(struct store *st, uint64_t instance_id, const char *spec,
		      const char *assertion, int line, const char *result, int64_t offenders,
		      double time, uint64_t from, uint64_t to, bool partial)
{
	(void)st, (void)instance_id, (void)spec, (void)assertion, (void)line, (void)time;
	(void)from, (void)to, (void)partial;
	w.verdicts++;
	copy(w.verdict, sizeof w.verdict, result);
	w.offenders = offenders;
	return 0;
}

int store_add_summary(struct store *st, uint64_t instance_id, double time, const char *type,
		      const char *metric, int64_t count, double sum, double sumsq, double min,
		      double max, const char *sketch)
{
	(void)st, (void)instance_id, (void)time, (void)type, (void)metric, (void)count;
	(void)sum, (void)sumsq, (void)min, (void)max, (void)sketch;
	return 0;
}

uint64_t store_next_window_id(struct store *st)
{
	(void)st;
	return 900;
}

uint64_t window_request(struct window_ring *r, uint64_t start_pos, uint64_t end_pos,
			int64_t end_ts, uint64_t new_id, double now, double max_wait)
{
	(void)r, (void)end_ts, (void)max_wait;
	assert_true(now == NOW);
	w.windows++;
	w.win_start = start_pos;
	w.win_end = end_pos;
	return new_id;
}

void window_release(struct window_ring *r, uint64_t upto_pos)
{
	(void)r, (void)upto_pos;
}

uint64_t ledger_pos(const struct ledger *l)
{
	(void)l;
	return 500;
}

double tm_now(void)
{
	return NOW;
}

void typescript_write(struct typescript *ts, const void *p, size_t n)
{
	size_t have = strlen(w.ts);

	(void)ts;
	if (have + n < sizeof w.ts) {
		memcpy(w.ts + have, p, n);
		w.ts[have + n] = '\0';
	}
}

void typescript_note(struct typescript *ts, const char *fmt, ...)
{
	size_t have = strlen(w.ts);
	va_list ap;

	(void)ts;
	va_start(ap, fmt);
	vsnprintf(w.ts + have, sizeof w.ts - have, fmt, ap);
	va_end(ap);
}

static struct tmon tm;
static struct tm_instance in;
static struct session s;
static struct tool t;

/* A session of class 3 (mail and Alertmanager) whose log ticks are
 * milliseconds, log time 1000 being NOW - 100 s; its tool's run started
 * after 100 records. */
static int setup(void **state)
{
	(void)state;
	memset(&w, 0, sizeof w);
	memset(&tm, 0, sizeof tm);
	memset(&in, 0, sizeof in);
	memset(&s, 0, sizeof s);
	memset(&t, 0, sizeof t);
	in.id = 7;
	s.tm = &tm;
	s.inst = &in;
	s.cls.id = 3;
	s.cls.mail = "ops@example.org";
	s.cls.mailgroup = 300;
	s.cls.alertmanager = "http://127.0.0.1:9093";
	s.scan.tick_ns = 1e6;
	s.scan.pos = 480;
	s.scan.last_ts = 99000;
	s.anchored = true;
	s.anchor_ts = 1000;
	s.anchor_wall = NOW - 100;
	s.state = SS_STREAMING;
	t.base = 100;
	return 0;
}

static void line(const char *text)
{
	checker_line(&s, &t, text, strlen(text));
}

static void interval_failure(void **state)
{
	(void)state;
	line("{\"spec\":\"/etc/cmon/fsread.pspec\",\"assert\":\"read at most 10 ms\",\"line\":28,"
	     "\"result\":\"fail\",\"kind\":\"interval\",\"type\":\"Read\",\"uid\":12,"
	     "\"start\":\"3.1\",\"end\":\"7.0\",\"start_ts\":21000,\"end_ts\":25000,"
	     "\"metrics\":{\"time\":4000}}");
	assert_int_equal(w.failures, 1);
	assert_string_equal(w.what, "interval Read #12");
	assert_string_equal(w.kind, "interval");
	assert_string_equal(w.assertion, "read at most 10 ms");
	assert_string_equal(w.metrics, "{\"time\":4000}");
	assert_int_equal(w.ev.f.line, 28);
	assert_int_equal(w.ev.f.uid, 12);
	/* 3.1 was made up after record 3: the interval starts at record 4 */
	assert_int_equal(w.ev.f.start_pos, 104);
	assert_int_equal(w.ev.f.end_pos, 107);
	assert_int_equal(w.win_start, 104);
	assert_int_equal(w.win_end, 107);
	assert_int_equal(w.ev.f.window_id, 900);
	assert_true(w.ev.f.start_wall == NOW - 80);     /* 20 s of log after the anchor */
	assert_true(w.ev.f.time == NOW);
	assert_int_equal(w.ev.f.instance_id, 7);
	assert_int_equal(w.ev.f.silence_id, 0);         /* failures_add's to set */
	assert_ptr_equal(w.ev.in, &in);
	assert_int_equal(w.ev.class_id, 3);
	assert_ptr_equal(w.ev.mail, s.cls.mail);
	assert_true(w.ev.mailgroup == 300);
	assert_ptr_equal(w.ev.alertmanager, s.cls.alertmanager);
	assert_false(w.ev.notify_reports);
	/* counting is failures_add's */
	assert_int_equal(in.failures, 0);
	assert_int_equal(tm.total_failures, 0);
	assert_string_equal(w.ts, "");
}

static void overdue_interval(void **state)
{
	(void)state;
	line("{\"spec\":\"/s.pspec\",\"assert\":\"a\",\"line\":3,\"result\":\"fail\","
	     "\"kind\":\"overdue\",\"type\":\"Read\",\"start\":\"9.0\",\"end\":\"12.0\"}");
	assert_int_equal(w.failures, 1);
	assert_string_equal(w.what, "interval Read overdue (started at record 9.0)");
	assert_int_equal(w.ev.f.start_pos, 109);
	assert_false(w.ev.f.has_ts);
	assert_true(w.ev.f.start_wall == 0);
}

static void inconclusive_goes_to_failures(void **state)
{
	(void)state;
	line("{\"spec\":\"/s.pspec\",\"line\":4,\"result\":\"inconclusive\",\"kind\":\"event\","
	     "\"type\":\"Open\",\"uid\":2,\"start\":\"5.0\",\"end\":\"5.0\"}");
	assert_int_equal(w.failures, 1);
	assert_string_equal(w.result, "inconclusive");
	assert_string_equal(w.what, "event Open #2");
	assert_string_equal(w.assertion, "(null)");
}

static void whole_log_verdict(void **state)
{
	(void)state;
	line("{\"spec\":\"/s.pspec\",\"assert\":\"never empty\",\"line\":5,\"result\":\"fail\","
	     "\"offenders\":0}");
	assert_int_equal(w.verdicts, 1);
	assert_string_equal(w.verdict, "fail");
	assert_int_equal(w.failures, 1);
	assert_string_equal(w.kind, "assertion");
	assert_string_equal(w.what, "whole log");
	assert_int_equal(w.ev.f.end_pos, 480);          /* the last records */
	assert_int_equal(w.ev.f.end_ts, 99000);
	assert_non_null(strstr(w.ts, "assertion \"never empty\": fail (0 offenders)"));
}

static void passed_verdict_no_failure(void **state)
{
	(void)state;
	line("{\"spec\":\"/s.pspec\",\"assert\":\"ok\",\"line\":6,\"result\":\"pass\","
	     "\"offenders\":0}");
	assert_int_equal(w.verdicts, 1);
	assert_string_equal(w.verdict, "pass");
	assert_int_equal(w.failures, 0);
}

static void offenders_verdict_no_extra_failure(void **state)
{
	(void)state;
	/* the offenders come as their own lines: the verdict adds none */
	line("{\"spec\":\"/s.pspec\",\"assert\":\"a\",\"line\":3,\"result\":\"fail\","
	     "\"offenders\":2}");
	assert_int_equal(w.verdicts, 1);
	assert_int_equal(w.offenders, 2);
	assert_int_equal(w.failures, 0);
}

static void unclosed_note(void **state)
{
	(void)state;
	line("{\"spec\":\"/s.pspec\",\"line\":8,\"note\":\"unclosed\",\"type\":\"Read\","
	     "\"count\":3}");
	assert_int_equal(w.verdicts, 1);
	assert_string_equal(w.verdict, "unclosed");
	assert_int_equal(w.offenders, 3);
	assert_int_equal(w.failures, 0);
	assert_non_null(strstr(w.ts, "3 intervals of type Read still open"));
}

static void progress_moves_checked(void **state)
{
	(void)state;
	line("{\"checked\":42}");
	assert_int_equal(t.run_checked, 42);
	assert_int_equal(w.failures, 0);
	assert_int_equal(w.verdicts, 0);
	assert_string_equal(w.ts, "");
}

static void print_and_other_lines_to_typescript(void **state)
{
	(void)state;
	line("{\"print\":\"hello\"}");
	assert_string_equal(w.ts, "print: hello");
	w.ts[0] = '\0';
	line("not json at all");
	assert_string_equal(w.ts, "not json at all\n");
	w.ts[0] = '\0';
	line("{\"spec\":\"/s.pspec\",\"line\":3,\"result\":\"pass\",\"kind\":\"interval\"}");
	assert_non_null(strstr(w.ts, "\"result\":\"pass\""));
	assert_int_equal(w.failures, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(interval_failure, setup),
		cmocka_unit_test_setup(overdue_interval, setup),
		cmocka_unit_test_setup(inconclusive_goes_to_failures, setup),
		cmocka_unit_test_setup(whole_log_verdict, setup),
		cmocka_unit_test_setup(passed_verdict_no_failure, setup),
		cmocka_unit_test_setup(offenders_verdict_no_extra_failure, setup),
		cmocka_unit_test_setup(unclosed_note, setup),
		cmocka_unit_test_setup(progress_moves_checked, setup),
		cmocka_unit_test_setup(print_and_other_lines_to_typescript, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
