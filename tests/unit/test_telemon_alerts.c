/* Unit tests for Alertmanager as a receiver of failures
 * (daemons/telemonitor/alerts.c): the alert a failure becomes, labels
 * (alertname and assert: the assertion's label or "line N"; prog,
 * machine, pid, class), annotations (summary, metrics as rendered, spec
 * FILE:LINE, the telemonctl window command, failure id), startsAt the
 * failure's time, endsAt that time plus the class's resolve-after (the
 * default when unset), generatorURL when the HTTP API is known; the POST
 * is kept in the store's outbox and the open alert remembered without
 * endsAt; and an open alert whose instance has ended is POSTed again with
 * endsAt the end, and closed. The store (F2) is a stub that records what
 * it is asked; the outbox and the base floor's text are the real ones; a
 * real loop, which is never run (no POST reaches anyone). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../daemons/telemonitor/alerts.c"

#define T0 1700000000.5               /* the failure: 2023-11-14T22:13:20Z */

/* What the store stubs were asked, and what they answer. */
static struct {
	char added[8][4096];          /* store_alert_add bodies, in order */
	char added_url[8][256];       /* ...and their URLs */
	size_t nadded;                /* how many */
	uint64_t next_id;             /* the outbox row ids it hands out */
	char open_alert[4096];        /* store_alert_open: the alert object */
	char open_url[256];           /* ...its endpoint */
	char open_name[128];          /* ...its name */
	uint64_t open_failure, open_instance; /* ...its failure and instance */
	double open_ends;             /* ...its end */
	size_t nopen;                 /* store_alert_open calls */
	uint64_t closed[8];           /* store_alert_close failure ids */
	size_t nclosed;               /* how many */
	const char *ended_alert;      /* the open alert store_alerts_ended gives (NULL: none) */
	double ended_at;              /* ...its instance's end */
	size_t nlive;                 /* store_alerts_live calls */
} w;

int store_alert_add(struct store *st, const char *url, const char *body, double queued,
		    uint64_t *id)
{
	(void)st;
	(void)queued;
	assert_true(w.nadded < 8);
	snprintf(w.added[w.nadded], sizeof w.added[0], "%s", body);
	snprintf(w.added_url[w.nadded], sizeof w.added_url[0], "%s", url);
	w.nadded++;
	*id = ++w.next_id;
	return 0;
}

int store_alert_done(struct store *st, uint64_t id)
{
	(void)st, (void)id;
	return 0;
}

int store_alert_load(struct store *st, store_alert_cb cb, void *arg)
{
	(void)st, (void)cb, (void)arg;
	return 0;
}

int store_adopt_alerts(struct store *st, const char *from, store_alert_cb cb, void *arg)
{
	(void)st, (void)from, (void)cb, (void)arg;
	return 0;
}

int store_alert_open(struct store *st, uint64_t failure_id, uint64_t instance_id, const char *url,
		     const char *alert, const char *name, double ends)
{
	(void)st;
	w.nopen++;
	w.open_failure = failure_id;
	w.open_instance = instance_id;
	snprintf(w.open_url, sizeof w.open_url, "%s", url);
	snprintf(w.open_alert, sizeof w.open_alert, "%s", alert);
	snprintf(w.open_name, sizeof w.open_name, "%s", name);
	w.open_ends = ends;
	return 0;
}

int store_alert_close(struct store *st, uint64_t failure_id)
{
	(void)st;
	assert_true(w.nclosed < 8);
	w.closed[w.nclosed++] = failure_id;
	return 0;
}

int store_alerts_ended(struct store *st, double now, size_t limit, store_open_alert_cb cb,
		       void *arg)
{
	(void)st, (void)now;
	assert_int_equal(limit, ALERTS_BATCH);
	if (w.ended_alert)
		cb(arg, 17, "http://am.example:9093/api/v2/alerts", w.ended_alert, w.ended_at);
	return 0;
}

int store_alerts_live(struct store *st, size_t limit, store_open_alert_cb cb, void *arg)
{
	(void)st, (void)limit, (void)cb, (void)arg;
	w.nlive++;
	return 0;
}

bool store_degraded(const struct store *st)
{
	(void)st;
	return false;
}

double tm_now(void)
{
	return T0 + 1;
}

/* --- the service around it ------------------------------------------------------ */

static struct tmon tm;
static struct tm_instance in;

static int setup(void **state)
{
	(void)state;
	memset(&w, 0, sizeof w);
	memset(&tm, 0, sizeof tm);
	memset(&in, 0, sizeof in);
	tm.base = event_base_new();
	assert_non_null(tm.base);
	tm.store = (struct store *)&w;        /* never looked into: the stubs ignore it */
	snprintf(tm.ctl_hint, sizeof tm.ctl_hint, "telemonctl -state /var/lib/cmon");
	in.id = 5;
	in.pid = 4242;
	snprintf(in.prog, sizeof in.prog, "fsread");
	snprintf(in.machine, sizeof in.machine, "host1");
	alerts_start(&tm);
	assert_non_null(tm.alerts);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	alerts_stop(&tm);
	event_base_free(tm.base);
	return 0;
}

/* A failure of assertion `assertion` (NULL: unlabelled) at line 28. */
static struct failure_event failure(const char *assertion, double resolve_after)
{
	struct failure_event ev = { 0 };

	ev.f.instance_id = in.id;
	ev.f.spec = "/etc/cmon/fsread.pspec";
	ev.f.assertion = assertion;
	ev.f.line = 28;
	ev.f.result = "fail";
	ev.f.time = T0;
	ev.f.metrics = "{\"count\":3}";
	ev.in = &in;
	ev.class_id = 3;
	ev.alertmanager = "http://am.example:9093/";
	ev.resolve_after = resolve_after;
	ev.id = 17;
	return ev;
}

/* The alert of a labelled failure, with the HTTP API known. */
static void test_failure_alert(void **state)
{
	struct failure_event ev = failure("read at most 10 ms", 120);
	char *metrics = render_metrics(ev.f.metrics), want[4096], body[4096];
	struct sbuf m = { 0 };

	(void)state;
	tm.http_addr = "127.0.0.1:8080";
	tm.http_scheme = "http";
	assert_non_null(metrics);
	sb_json_str(&m, metrics);
	snprintf(want, sizeof want,
		 "{\"labels\":{\"alertname\":\"read at most 10 ms\",\"assert\":\"read at most 10 ms\","
		 "\"prog\":\"fsread\",\"machine\":\"host1\",\"pid\":\"4242\",\"class\":\"3\"},"
		 "\"annotations\":{\"summary\":\"fsread on host1 pid 4242: \\\"read at most 10 ms\\\" "
		 "failed\",\"metrics\":%s,\"spec\":\"/etc/cmon/fsread.pspec:28\","
		 "\"window\":\"telemonctl -state /var/lib/cmon window 17\",\"failure\":\"17\"},"
		 "\"startsAt\":\"2023-11-14T22:13:20Z\","
		 "\"generatorURL\":\"http://127.0.0.1:8080/api/v1/failures/17/window\"}",
		 m.s);
	alerts_failures.on_failure(&tm, &ev);

	/* remembered as open, without endsAt, until failure time + resolve-after */
	assert_int_equal(w.nopen, 1);
	assert_string_equal(w.open_alert, want);
	assert_string_equal(w.open_url, "http://am.example:9093/api/v2/alerts");
	assert_string_equal(w.open_name, "read at most 10 ms");
	assert_int_equal(w.open_failure, 17);
	assert_int_equal(w.open_instance, 5);
	assert_true(w.open_ends == T0 + 120);
	/* POSTed through the outbox, kept in the store: [alert + endsAt] */
	assert_int_equal(w.nadded, 1);
	assert_string_equal(w.added_url[0], "http://am.example:9093/api/v2/alerts");
	snprintf(body, sizeof body, "[%.*s,\"endsAt\":\"2023-11-14T22:15:20Z\"}]",
		 (int)strlen(want) - 1, want);
	assert_string_equal(w.added[0], body);
	assert_int_equal(outbox_queued(tm.alerts->outbox), 1);
	sb_free(&m);
	free(metrics);
}

/* An unlabelled assertion is "line N"; no HTTP API, no generatorURL; an
 * unset resolve-after is the default (5 min). */
static void test_unlabelled_default_resolve(void **state)
{
	struct failure_event ev = failure(NULL, 0);

	(void)state;
	alerts_failures.on_failure(&tm, &ev);
	assert_int_equal(w.nopen, 1);
	assert_string_equal(w.open_name, "line 28");
	assert_non_null(strstr(w.open_alert, "{\"labels\":{\"alertname\":\"line 28\","
					     "\"assert\":\"line 28\","));
	assert_non_null(strstr(w.open_alert, "\"summary\":\"fsread on host1 pid 4242: "
					     "\\\"line 28\\\" failed\""));
	assert_null(strstr(w.open_alert, "generatorURL"));
	assert_true(w.open_ends == T0 + RC_RESOLVE_AFTER_DEFAULT);
	assert_int_equal(w.nadded, 1);
	assert_non_null(strstr(w.added[0], ",\"endsAt\":\"2023-11-14T22:18:20Z\"}]"));
}

/* A class without an Alertmanager: nothing is sent or remembered. */
static void test_no_alertmanager(void **state)
{
	struct failure_event ev = failure("x", 0);

	(void)state;
	ev.alertmanager = NULL;
	alerts_failures.on_failure(&tm, &ev);
	assert_int_equal(w.nopen, 0);
	assert_int_equal(w.nadded, 0);
}

/* The sweep resolves the open alert of an ended instance: POSTed again
 * (through the store's outbox) with endsAt the end, and closed. */
static void test_resolve_expired(void **state)
{
	static const char alert[] = "{\"labels\":{\"alertname\":\"x\"},\"startsAt\":"
				    "\"2023-11-14T22:13:20Z\"}";

	(void)state;
	w.ended_alert = alert;
	w.ended_at = T0 + 600;
	sweep(-1, 0, tm.alerts);
	assert_int_equal(w.nclosed, 1);
	assert_int_equal(w.closed[0], 17);
	assert_int_equal(w.nadded, 1);
	assert_string_equal(w.added_url[0], "http://am.example:9093/api/v2/alerts");
	assert_string_equal(w.added[0], "[{\"labels\":{\"alertname\":\"x\"},\"startsAt\":"
					"\"2023-11-14T22:13:20Z\",\"endsAt\":\"2023-11-14T22:23:20Z\"}]");
	/* live alerts are refreshed only once ALERTS_REFRESH_S has passed */
	assert_int_equal(w.nlive, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_failure_alert, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unlabelled_default_resolve, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_alertmanager, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_expired, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
