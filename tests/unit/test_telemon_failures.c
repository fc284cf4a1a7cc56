/* Unit tests for a failure's way into the service
 * (daemons/telemonitor/failures.c): it is looked up among the silences,
 * stored, counted, then given to the subscribers in the order they
 * subscribed; a silenced failure is still stored and counted, marked with
 * its silence, and goes to no subscriber; an inconclusive one is stored
 * only; a report assertion's goes out only when its class asks; a store
 * error stops it. The silences and the store are stubs here that record
 * what they were asked. With an Alertmanager in the class, its silences
 * (amsilences.h, stubbed) are looked up first; the failure they match is
 * marked with the Alertmanager silence's id and ours are not asked. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../daemons/telemonitor/failures.c"

/* What the stubs were asked, and what they answer. */
static struct {
	uint64_t silence;             /* hygiene_silenced's answer */
	const char *am_silence;       /* amsil_silenced's answer (NULL: none) */
	size_t am_looked_up;          /* amsil_silenced calls */
	int store_rc;                 /* store_add_failure's answer */
	uint64_t next_id;             /* ...and the id it gives */
	size_t looked_up;             /* hygiene_silenced calls */
	double looked_up_at;          /* ...the last one's `now` */
	size_t stored;                /* store_add_failure calls */
	struct store_failure row;     /* ...the last row */
	char calls[8][48];            /* subscriber calls, in order: "NAME:ID" or "NAME:adopt:FROM" */
	size_t ncalls;                /* how many */
} w;

uint64_t hygiene_silenced(struct tmon *tm, const char *prog, const char *machine,
			  const char *assertion, int line, double now)
{
	(void)tm;
	assert_string_equal(prog, "fsread");
	assert_string_equal(machine, "host1");
	assert_string_equal(assertion, "read at most 10 ms");
	assert_int_equal(line, 28);
	w.looked_up++;
	w.looked_up_at = now;
	return w.silence;
}

bool amsil_silenced(struct tmon *tm, const char *url, const struct amsil_alert *al, double now,
		    char *id, size_t idlen)
{
	(void)tm;
	assert_string_equal(url, "http://127.0.0.1:9093");
	assert_string_equal(al->prog, "fsread");
	assert_string_equal(al->machine, "host1");
	assert_int_equal(al->pid, 4242);
	assert_int_equal(al->class_id, 3);
	assert_string_equal(al->assertion, "read at most 10 ms");
	assert_int_equal(al->line, 28);
	assert_true(now == 1700000000.5);
	w.am_looked_up++;
	if (!w.am_silence)
		return false;
	snprintf(id, idlen, "%s", w.am_silence);
	return true;
}

int store_add_failure(struct store *st, const struct store_failure *f, uint64_t *id)
{
	(void)st;
	w.stored++;
	w.row = *f;
	if (w.store_rc < 0)
		return w.store_rc;
	*id = w.next_id++;
	return 0;
}

static void record(const char *name, const char *what)
{
	assert_true(w.ncalls < sizeof w.calls / sizeof w.calls[0]);
	snprintf(w.calls[w.ncalls++], sizeof w.calls[0], "%s:%s", name, what);
}

static void mail_failure(struct tmon *tm, const struct failure_event *ev)
{
	char id[24];

	(void)tm;
	snprintf(id, sizeof id, "%llu", (unsigned long long)ev->id);
	assert_string_equal(ev->what, "interval Read #12");
	assert_string_equal(ev->mail, "ops@example.org");
	record("mail", id);
}

static void mail_adopt(struct tmon *tm, const char *from)
{
	char what[40];

	(void)tm;
	snprintf(what, sizeof what, "adopt:%s", from);
	record("mail", what);
}

static void am_failure(struct tmon *tm, const struct failure_event *ev)
{
	char id[24];

	(void)tm;
	snprintf(id, sizeof id, "%llu", (unsigned long long)ev->id);
	assert_int_equal(ev->class_id, 3);
	assert_int_equal(ev->f.silence_id, 0);
	assert_null(ev->f.am_silence);
	record("am", id);
}

static const struct failure_subscriber mail = {
	.name = "mail", .on_failure = mail_failure, .on_adopt = mail_adopt,
};
static const struct failure_subscriber am = {
	.name = "alertmanager", .on_failure = am_failure,   /* no on_adopt: skipped */
};

static struct tmon tm;
static struct tm_instance in;

static int setup(void **state)
{
	(void)state;
	memset(&w, 0, sizeof w);
	memset(&tm, 0, sizeof tm);
	memset(&in, 0, sizeof in);
	w.next_id = 41;
	snprintf(in.prog, sizeof in.prog, "fsread");
	snprintf(in.machine, sizeof in.machine, "host1");
	in.id = 7;
	in.pid = 4242;
	assert_int_equal(failures_subscribe(&tm, &mail), 0);
	assert_int_equal(failures_subscribe(&tm, &am), 0);
	return 0;
}

static struct failure_event event(void)
{
	struct failure_event ev = {
		.f = { .instance_id = 7, .spec = "/etc/cmon/fsread.pspec",
		       .assertion = "read at most 10 ms", .line = 28, .result = "fail",
		       .kind = "interval", .type = "Read", .uid = 12, .time = 1700000000.5 },
		.in = &in, .what = "interval Read #12", .class_id = 3, .mail = "ops@example.org",
		.mailgroup = 300, .alertmanager = "http://127.0.0.1:9093",
	};
	return ev;
}

static void subscribers_in_order(void **state)
{
	struct failure_event ev = event();

	(void)state;
	assert_int_equal(failures_add(&tm, &ev), 0);
	assert_int_equal(failures_add(&tm, &ev), 0);
	assert_int_equal(w.ncalls, 4);
	assert_string_equal(w.calls[0], "mail:41");
	assert_string_equal(w.calls[1], "am:41");
	assert_string_equal(w.calls[2], "mail:42");
	assert_string_equal(w.calls[3], "am:42");
	assert_int_equal(w.stored, 2);
	assert_int_equal(w.looked_up, 2);
	assert_true(w.looked_up_at == 1700000000.5);    /* the failure's time */
	assert_int_equal(in.failures, 2);
	assert_true(in.dirty);
	assert_int_equal(tm.total_failures, 2);
	assert_int_equal(ev.id, 0);                      /* the caller's event is left alone */
}

static void silenced_stored_and_marked(void **state)
{
	struct failure_event ev = event();

	(void)state;
	w.silence = 5;
	assert_int_equal(failures_add(&tm, &ev), 0);
	assert_int_equal(w.stored, 1);
	assert_int_equal(w.row.silence_id, 5);
	assert_string_equal(w.row.assertion, "read at most 10 ms");
	assert_int_equal(in.failures, 1);
	assert_int_equal(tm.total_failures, 1);
	assert_int_equal(w.ncalls, 0);
}

static void am_silenced_stored_and_marked(void **state)
{
	struct failure_event ev = event();

	(void)state;
	w.am_silence = "7d3c4f0e-5b1a-4c4e-9a55-0e3f1b2c3d4e";
	w.silence = 5;                                   /* ours are not asked */
	assert_int_equal(failures_add(&tm, &ev), 0);
	assert_int_equal(w.am_looked_up, 1);
	assert_int_equal(w.looked_up, 0);
	assert_int_equal(w.stored, 1);
	assert_string_equal(w.row.am_silence, "7d3c4f0e-5b1a-4c4e-9a55-0e3f1b2c3d4e");
	assert_int_equal(w.row.silence_id, 0);
	assert_int_equal(in.failures, 1);
	assert_int_equal(tm.total_failures, 1);
	assert_int_equal(w.ncalls, 0);
}

static void ours_without_an_am_silence(void **state)
{
	struct failure_event ev = event();

	(void)state;
	w.silence = 5;                                   /* none of Alertmanager's matches */
	assert_int_equal(failures_add(&tm, &ev), 0);
	assert_int_equal(w.am_looked_up, 1);
	assert_int_equal(w.row.silence_id, 5);
	assert_null(w.row.am_silence);
	assert_int_equal(w.ncalls, 0);
	ev.alertmanager = NULL;                          /* no Alertmanager: ours alone */
	w.am_silence = "never-asked";
	assert_int_equal(failures_add(&tm, &ev), 0);
	assert_int_equal(w.am_looked_up, 1);
	assert_int_equal(w.row.silence_id, 5);
	assert_null(w.row.am_silence);
}

static void inconclusive_stored_only(void **state)
{
	struct failure_event ev = event();

	(void)state;
	ev.f.result = "inconclusive";
	assert_int_equal(failures_add(&tm, &ev), 0);
	assert_int_equal(w.stored, 1);
	assert_string_equal(w.row.result, "inconclusive");
	assert_int_equal(in.failures, 0);
	assert_false(in.dirty);
	assert_int_equal(tm.total_failures, 0);
	assert_int_equal(w.ncalls, 0);
}

static void report_delivered_only_when_asked(void **state)
{
	struct failure_event ev = event();

	(void)state;
	ev.f.report = true;
	assert_int_equal(failures_add(&tm, &ev), 0);
	assert_int_equal(w.ncalls, 0);
	assert_int_equal(in.failures, 1);
	ev.notify_reports = true;
	assert_int_equal(failures_add(&tm, &ev), 0);
	assert_int_equal(w.ncalls, 2);
	assert_string_equal(w.calls[0], "mail:42");
	assert_int_equal(in.failures, 2);
	assert_int_equal(w.stored, 2);
}

static void store_error_stops_it(void **state)
{
	struct failure_event ev = event();

	(void)state;
	w.store_rc = -EIO;
	assert_int_equal(failures_add(&tm, &ev), -EIO);
	assert_int_equal(w.stored, 1);
	assert_int_equal(in.failures, 0);
	assert_int_equal(tm.total_failures, 0);
	assert_int_equal(w.ncalls, 0);
}

static void adopt_in_order(void **state)
{
	static const struct failure_subscriber third = {
		.name = "third", .on_adopt = mail_adopt,   /* no on_failure: skipped */
	};
	struct failure_event ev = event();

	(void)state;
	assert_int_equal(failures_subscribe(&tm, &third), 0);
	failures_adopt(&tm, "node-b");
	assert_int_equal(w.ncalls, 2);
	assert_string_equal(w.calls[0], "mail:adopt:node-b");
	assert_string_equal(w.calls[1], "mail:adopt:node-b");
	assert_int_equal(failures_add(&tm, &ev), 0);
	assert_int_equal(w.ncalls, 4);
}

static void subscribers_bounded(void **state)
{
	(void)state;
	while (tm.nfailure_subs < TM_FAILURE_SUBS_MAX)
		assert_int_equal(failures_subscribe(&tm, &am), 0);
	assert_int_equal(failures_subscribe(&tm, &am), -ENOSPC);
	assert_int_equal(tm.nfailure_subs, TM_FAILURE_SUBS_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(subscribers_in_order, setup),
		cmocka_unit_test_setup(silenced_stored_and_marked, setup),
		cmocka_unit_test_setup(am_silenced_stored_and_marked, setup),
		cmocka_unit_test_setup(ours_without_an_am_silence, setup),
		cmocka_unit_test_setup(inconclusive_stored_only, setup),
		cmocka_unit_test_setup(report_delivered_only_when_asked, setup),
		cmocka_unit_test_setup(store_error_stops_it, setup),
		cmocka_unit_test_setup(adopt_in_order, setup),
		cmocka_unit_test_setup(subscribers_bounded, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
