/* Unit tests for Alertmanager's silences in the telemonitor
 * (daemons/telemonitor/amsilences.c): what GET /api/v2/silences answers
 * is cached per Alertmanager, and a failure's alert labels are matched
 * against it as Alertmanager matches: every matcher; `=` the whole value;
 * `=~` anchored at both ends; `!=`/`!~` negated; a missing label is "";
 * expired silences dropped, pending ones not yet in force; an answer that
 * is not a list, or no answer, keeps the last known silences (logged
 * once). alerts_get() is a stub that keeps the callback; a real loop
 * holds the poll timer. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../daemons/telemonitor/json.c"
#include "../../daemons/telemonitor/amsilences.c"

#define URL "http://127.0.0.1:9093/"

/* alerts_get's calls: the URL asked and the callback to answer. */
static struct {
	char url[200];                /* the last URL asked */
	alerts_get_cb cb;             /* ...and its callback */
	void *arg;                    /* ...with this */
	size_t gets, cancels;         /* calls */
} w;

int alerts_get(struct tmon *tm, const char *url, alerts_get_cb cb, void *arg)
{
	(void)tm;
	snprintf(w.url, sizeof w.url, "%s", url);
	w.cb = cb;
	w.arg = arg;
	w.gets++;
	return 0;
}

void alerts_get_cancel(struct tmon *tm, void *arg)
{
	(void)tm;
	(void)arg;
	w.cancels++;
}

static struct tmon tm;
static struct tm_class cls;

/* Answer the pending GET with `body` (HTTP 200), or fail it (http 0). */
static void answer(long http, const char *body)
{
	assert_non_null(w.cb);
	w.cb(w.arg, http, http ? NULL : "Connection refused", body, body ? strlen(body) : 0);
}

static int setup(void **state)
{
	(void)state;
	memset(&w, 0, sizeof w);
	memset(&tm, 0, sizeof tm);
	memset(&cls, 0, sizeof cls);
	tm.base = event_base_new();
	TAILQ_INIT(&tm.classes);
	cls.alertmanager = URL;
	TAILQ_INSERT_TAIL(&tm.classes, &cls, link);
	amsil_start(&tm);
	assert_int_equal(w.gets, 1);                     /* read at once */
	assert_string_equal(w.url, "http://127.0.0.1:9093/api/v2/silences");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	amsil_stop(&tm);
	event_base_free(tm.base);
	return 0;
}

static const struct amsil_alert fsread = {
	.prog = "fsread", .machine = "ws1", .pid = 4242, .class_id = 3,
	.assertion = "read at most 10 ms", .line = 28,
};
static const double NOW = 1795917000.0;        /* 2026-11-29T01:50:00Z */

/* One silence as Alertmanager lists it, in force around NOW. */
#define SILENCE(ID, STATE, MATCHERS)                                                        \
	"{\"id\":\"" ID "\",\"status\":{\"state\":\"" STATE "\"},"                          \
	"\"startsAt\":\"2026-11-29T01:00:00.000Z\",\"endsAt\":\"2026-11-29T02:00:00.5Z\","   \
	"\"createdBy\":\"ops\",\"comment\":\"c\",\"matchers\":[" MATCHERS "]}"
#define M(NAME, VALUE, RE, EQ)                                                              \
	"{\"name\":\"" NAME "\",\"value\":\"" VALUE "\",\"isRegex\":" RE ",\"isEqual\":" EQ "}"

static bool silenced(const struct amsil_alert *al, double now, char *id)
{
	return amsil_silenced(&tm, URL, al, now, id, AMSIL_ID_MAX);
}

static void equality_and_regex_anchored(void **state)
{
	char id[AMSIL_ID_MAX] = "";

	(void)state;
	answer(200, "[" SILENCE("a", "active", M("prog", "fsread", "false", "true") ","
					     M("assert", "read.*", "true", "true")) ","
		    SILENCE("b", "active", M("assert", "read", "true", "true")) "]");
	assert_int_equal(amsil_count(&tm), 2);
	assert_true(silenced(&fsread, NOW, id));
	assert_string_equal(id, "a");
	struct amsil_alert other = fsread;
	other.prog = "fsreader";                         /* = is the whole value */
	assert_false(silenced(&other, NOW, id));         /* and "read" is anchored: not b */
	other = fsread;
	other.assertion = "read";
	other.prog = "x";
	assert_true(silenced(&other, NOW, id));
	assert_string_equal(id, "b");
	assert_false(silenced(&fsread, NOW + 3600, id)); /* ended at 02:00:00.5 */
	assert_false(amsil_silenced(&tm, "http://elsewhere:9093", &fsread, NOW, id, sizeof id));
}

static void negation_labels_and_missing(void **state)
{
	char id[AMSIL_ID_MAX] = "";
	struct amsil_alert al = fsread;

	(void)state;
	answer(200, "[" SILENCE("neg", "active", M("machine", "ws[0-9]+", "true", "false") ","
					       M("pid", "4242", "false", "true") ","
					       M("class", "3", "false", "true") ","
					       M("alertname", "line 28", "false", "true") ","
					       M("severity", "", "false", "true")) "]");
	al.assertion = NULL;                              /* "line 28" */
	al.machine = "db1";                               /* !~ ws[0-9]+ */
	assert_true(silenced(&al, NOW, id));
	assert_string_equal(id, "neg");
	al.machine = "ws12";
	assert_false(silenced(&al, NOW, id));
	al.machine = "db1";
	al.pid = 1;
	assert_false(silenced(&al, NOW, id));
}

static void expired_pending_and_bad_patterns(void **state)
{
	char id[AMSIL_ID_MAX] = "";

	(void)state;
	answer(200, "[" SILENCE("old", "expired", M("prog", "fsread", "false", "true")) ","
		    "{\"id\":\"later\",\"status\":{\"state\":\"pending\"},"
		    "\"startsAt\":\"2026-11-29T01:55:00Z\",\"endsAt\":\"2026-11-29T03:00:00+01:00\","
		    "\"matchers\":[" M("prog", "fsread", "false", "true") "]},"
		    SILENCE("bad", "active", M("prog", "(", "true", "true")) ","
		    "{\"id\":\"nomatchers\",\"status\":{\"state\":\"active\"},\"matchers\":[]}]");
	assert_int_equal(amsil_count(&tm), 2);           /* later and bad */
	assert_false(silenced(&fsread, NOW, id));        /* later starts at 01:55 */
	assert_true(silenced(&fsread, NOW + 300, id));
	assert_string_equal(id, "later");
	assert_false(silenced(&fsread, NOW + 600, id));  /* 03:00+01:00 = 02:00Z */
}

static void unreachable_keeps_the_last(void **state)
{
	char id[AMSIL_ID_MAX] = "";

	(void)state;
	answer(200, "[" SILENCE("a", "active", M("prog", "fsread", "false", "true")) "]");
	poll_all(-1, 0, tm.amsil);                       /* the next poll */
	assert_int_equal(w.gets, 2);
	answer(0, NULL);                                 /* no answer */
	assert_true(silenced(&fsread, NOW, id));
	poll_all(-1, 0, tm.amsil);
	answer(503, "down");
	poll_all(-1, 0, tm.amsil);
	answer(200, "{\"not\":\"a list\"}");
	assert_true(silenced(&fsread, NOW, id));
	assert_string_equal(id, "a");
	poll_all(-1, 0, tm.amsil);
	answer(200, "[]");                               /* read again: none */
	assert_false(silenced(&fsread, NOW, id));
	assert_int_equal(amsil_count(&tm), 0);
}

static void one_get_at_a_time_and_sources_follow_classes(void **state)
{
	(void)state;
	poll_all(-1, 0, tm.amsil);                       /* the first is still on its way */
	assert_int_equal(w.gets, 1);
	answer(200, "[]");
	TAILQ_REMOVE(&tm.classes, &cls, link);           /* a reload removed the class */
	poll_all(-1, 0, tm.amsil);
	assert_int_equal(w.gets, 1);
	assert_int_equal(w.cancels, 1);
	assert_int_equal(tm.amsil->nsrc, 0);
}

static void url_seen(void *arg, const char *url)
{
	strcat(arg, url);
	strcat(arg, " ");
}

static void each_url_once(void **state)
{
	struct tm_class second = { .alertmanager = URL }, third = { .alertmanager = "http://b/" };
	char seen[200] = "";

	(void)state;
	TAILQ_INSERT_TAIL(&tm.classes, &second, link);
	TAILQ_INSERT_TAIL(&tm.classes, &third, link);
	amsil_each_url(&tm, url_seen, seen);
	assert_string_equal(seen, URL " http://b/ ");
	TAILQ_REMOVE(&tm.classes, &second, link);
	TAILQ_REMOVE(&tm.classes, &third, link);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(equality_and_regex_anchored, setup, teardown),
		cmocka_unit_test_setup_teardown(negation_labels_and_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(expired_pending_and_bad_patterns, setup, teardown),
		cmocka_unit_test_setup_teardown(unreachable_keeps_the_last, setup, teardown),
		cmocka_unit_test_setup_teardown(one_get_at_a_time_and_sources_follow_classes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(each_url_once, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
