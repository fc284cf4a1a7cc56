/* Unit tests for mail grouping (daemons/telemonitor/digest.c): the first
 * failure of an assertion is mailed at once, later ones within the
 * grouping period go into one digest at its end, groups are per instance
 * and assertion, long digests are cut, idle groups are forgotten; what
 * waits for a digest can be put back after a restart (digest_due_at,
 * digest_restore) and a digest names its group; the "resolved" mail of a
 * pair that was mailed (digest_resolved_mail) names the program, instance
 * and assertion and why it resolved, and keeps the label as written. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../daemons/telemonitor/digest.c"

static struct digest_item item(uint64_t inst, const char *label, uint64_t id, double t)
{
	struct digest_item it = {
		.instance_id = inst, .prog = "fsread", .machine = "host1", .pid = 4242,
		.spec = "/etc/cmon/fsread.pspec", .assertion = label, .line = 28, .failure_id = id,
		.time = t, .what = "interval Read #12", .start_ts = 1000, .end_ts = 21000,
		.metrics = "time = 20000, size = 4096", .to = "ops@example.org",
		.ctl = "telemonctl -state /var/lib/telemonitor", .period = 300,
	};
	return it;
}

static void first_is_prompt_rest_digested(void **state)
{
	struct digest *d = digest_new();
	struct digest_mail m, out[8];
	struct digest_item it = item(1, "read at most 10 ms", 17, 1000);

	assert_int_equal(digest_add(d, &it, 1000, &m), 1);
	assert_string_equal(m.to, "ops@example.org");
	assert_string_equal(m.subject,
			    "[telemonitor] fsread on host1 pid 4242: \"read at most 10 ms\" failed");
	assert_non_null(strstr(m.body, "time = 20000, size = 4096"));
	assert_non_null(strstr(m.body, "telemonctl -state /var/lib/telemonitor window 17"));
	assert_non_null(strstr(m.body, "within 5 min"));
	assert_int_equal(m.count, 1);
	digest_mail_clear(&m);

	/* three more inside the period: nothing now */
	for (int i = 0; i < 3; i++) {
		it = item(1, "read at most 10 ms", 18 + i, 1010 + i);
		assert_int_equal(digest_add(d, &it, 1010 + i, &m), 0);
	}
	assert_true(digest_next_deadline(d) == 1300);
	assert_int_equal(digest_due(d, 1299, out, 8), 0);
	assert_int_equal(digest_due(d, 1300, out, 8), 1);
	assert_int_equal(out[0].count, 3);
	assert_non_null(strstr(out[0].subject, "failed 3 more times"));
	assert_non_null(strstr(out[0].body, "Failure 18 "));
	assert_non_null(strstr(out[0].body, "Failure 20 "));
	assert_null(strstr(out[0].body, "Failure 17 "));
	assert_non_null(strstr(out[0].body, "window 19"));
	digest_mail_clear(&out[0]);

	/* the group goes on for another period; a failure in it is digested */
	it = item(1, "read at most 10 ms", 30, 1400);
	assert_int_equal(digest_add(d, &it, 1400, &m), 0);
	assert_int_equal(digest_due(d, 1600, out, 8), 1);
	assert_int_equal(out[0].count, 1);
	assert_non_null(strstr(out[0].subject, "failed 1 more time"));
	digest_mail_clear(&out[0]);
	/* a quiet period ends the group; the next failure is prompt again */
	assert_int_equal(digest_due(d, 1900, out, 8), 0);
	assert_int_equal(digest_groups(d), 0);
	it = item(1, "read at most 10 ms", 40, 2000);
	assert_int_equal(digest_add(d, &it, 2000, &m), 1);
	digest_mail_clear(&m);
	digest_free(d);
}

static void groups_are_per_instance_and_assertion(void **state)
{
	struct digest *d = digest_new();
	struct digest_mail m;
	struct digest_item it;

	it = item(1, "a", 1, 0);
	assert_int_equal(digest_add(d, &it, 0, &m), 1);
	digest_mail_clear(&m);
	it = item(1, "b", 2, 1);
	assert_int_equal(digest_add(d, &it, 1, &m), 1);
	digest_mail_clear(&m);
	it = item(2, "a", 3, 2);
	assert_int_equal(digest_add(d, &it, 2, &m), 1);
	digest_mail_clear(&m);
	it = item(1, NULL, 4, 3);              /* unlabelled: named by its line */
	assert_int_equal(digest_add(d, &it, 3, &m), 1);
	assert_non_null(strstr(m.subject, "the assertion on line 28 failed"));
	digest_mail_clear(&m);
	it = item(1, "a", 5, 4);
	assert_int_equal(digest_add(d, &it, 4, &m), 0);
	assert_int_equal(digest_groups(d), 4);
	digest_free(d);
}

static void long_digest_is_cut(void **state)
{
	struct digest *d = digest_new();
	struct digest_mail m, out[2];
	struct digest_item it = item(1, "a", 1, 0);

	assert_int_equal(digest_add(d, &it, 0, &m), 1);
	digest_mail_clear(&m);
	for (int i = 0; i < DIGEST_LIST_MAX + 50; i++) {
		it = item(1, "a", 2 + i, 1);
		assert_int_equal(digest_add(d, &it, 1, &m), 0);
	}
	assert_int_equal(digest_due(d, 301, out, 2), 1);
	assert_int_equal(out[0].count, DIGEST_LIST_MAX + 50);
	assert_non_null(strstr(out[0].body, "... and 50 more not listed"));
	digest_mail_clear(&out[0]);
	digest_free(d);
}

static void no_grouping(void **state)
{
	struct digest *d = digest_new();
	struct digest_mail m;
	struct digest_item it = item(1, "a", 1, 0);

	it.period = 0;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(digest_add(d, &it, i, &m), 1);
		digest_mail_clear(&m);
	}
	assert_int_equal(digest_groups(d), 0);
	digest_free(d);
}

static void subject_has_no_line_breaks(void **state)
{
	struct digest *d = digest_new();
	struct digest_mail m;
	struct digest_item it = item(1, "evil\r\nBcc: x@y", 1, 0);

	assert_int_equal(digest_add(d, &it, 0, &m), 1);
	assert_null(strpbrk(m.subject, "\r\n"));
	digest_mail_clear(&m);
	digest_free(d);
}

static void digest_names_its_group(void **state)
{
	struct digest *d = digest_new();
	struct digest_mail m, out[2];
	struct digest_item it = item(7, "a", 1, 100);

	assert_int_equal(digest_add(d, &it, 100, &m), 1);
	assert_int_equal(m.instance_id, 0);          /* a prompt mail has no group */
	assert_null(m.assertion);
	digest_mail_clear(&m);
	it = item(7, "a", 2, 150);
	assert_int_equal(digest_add(d, &it, 150, &m), 0);
	assert_true(digest_due_at(d, &it) == 400);
	it = item(8, "a", 3, 150);
	assert_true(digest_due_at(d, &it) == 0);     /* unknown group */
	assert_int_equal(digest_due(d, 400, out, 2), 1);
	assert_int_equal(out[0].instance_id, 7);
	assert_string_equal(out[0].assertion, "a");
	assert_int_equal(out[0].line, 28);
	digest_mail_clear(&out[0]);
	/* unlabelled: the label is "" */
	it = item(9, NULL, 4, 500);
	assert_int_equal(digest_add(d, &it, 500, &m), 1);
	digest_mail_clear(&m);
	it = item(9, NULL, 5, 501);
	assert_int_equal(digest_add(d, &it, 501, &m), 0);
	assert_int_equal(digest_due(d, 800, out, 2), 1);
	assert_string_equal(out[0].assertion, "");
	digest_mail_clear(&out[0]);
	digest_free(d);
}

static void restored_failures_join_their_digest(void **state)
{
	struct digest *d = digest_new();
	struct digest_mail m, out[2];
	struct digest_item it;

	/* after a restart: two failures were waiting for the digest due at 1300 */
	it = item(1, "read at most 10 ms", 18, 1010);
	assert_int_equal(digest_restore(d, &it, 1300), 0);
	it = item(1, "read at most 10 ms", 19, 1011);
	assert_int_equal(digest_restore(d, &it, 1300), 0);
	assert_int_equal(digest_groups(d), 1);
	assert_true(digest_next_deadline(d) == 1300);
	/* a new failure of the group before it is due joins the digest */
	it = item(1, "read at most 10 ms", 20, 1200);
	assert_int_equal(digest_add(d, &it, 1200, &m), 0);
	assert_true(digest_due_at(d, &it) == 1300);
	assert_int_equal(digest_due(d, 1299, out, 2), 0);
	assert_int_equal(digest_due(d, 1300, out, 2), 1);
	assert_int_equal(out[0].count, 3);
	assert_non_null(strstr(out[0].subject, "failed 3 more times"));
	assert_non_null(strstr(out[0].body, "Failure 18 "));
	assert_non_null(strstr(out[0].body, "Failure 19 "));
	assert_non_null(strstr(out[0].body, "Failure 20 "));
	assert_non_null(strstr(out[0].body, "within 5 min"));
	digest_mail_clear(&out[0]);
	/* the group then goes on as usual: a quiet period ends it */
	assert_int_equal(digest_due(d, 1600, out, 2), 0);
	assert_int_equal(digest_groups(d), 0);
	digest_free(d);
}

static void restored_digest_overdue_is_due_at_once(void **state)
{
	struct digest *d = digest_new();
	struct digest_mail out[2];
	struct digest_item it = item(3, "b", 40, 100);

	/* the service was down past the end of the period */
	assert_int_equal(digest_restore(d, &it, 400), 0);
	assert_true(digest_next_deadline(d) == 400);
	assert_int_equal(digest_due(d, 5000, out, 2), 1);
	assert_int_equal(out[0].count, 1);
	assert_non_null(strstr(out[0].body, "Failure 40 "));
	digest_mail_clear(&out[0]);
	digest_free(d);
}

/* 2024-03-01T00:00:00Z */
#define MARCH_1 1709251200.0

static struct digest_resolved resolved(const char *label)
{
	struct digest_resolved r = {
		.prog = "fsread", .machine = "host1", .pid = 4242,
		.spec = "/etc/cmon/fsread.pspec", .assertion = label, .line = 28, .failures = 3,
		.first = MARCH_1, .last = MARCH_1 + 70, .resolve_after = 300, .ended = false,
		.when = MARCH_1 + 370, .to = "ops@example.org",
		.ctl = "telemonctl -state /var/lib/telemonitor",
	};
	return r;
}

static void resolved_mail_after_quiet(void **state)
{
	struct digest_resolved r = resolved("read at most 10 ms");
	struct digest_mail m;

	assert_int_equal(digest_resolved_mail(&r, &m), 0);
	assert_string_equal(m.to, "ops@example.org");
	assert_string_equal(m.subject,
			    "[telemonitor] fsread on host1 pid 4242: \"read at most 10 ms\" resolved");
	assert_non_null(strstr(m.body, "Resolved: \"read at most 10 ms\" of program fsread on "
				       "machine host1, pid 4242 (spec /etc/cmon/fsread.pspec): "
				       "no failure for 5 min (resolve-after).\n"));
	assert_non_null(strstr(m.body, "It failed 3 times from 2024-03-01T00:00:00Z to "
				       "2024-03-01T00:01:10Z.\n"));
	assert_non_null(strstr(m.body, "All of them: telemonctl -state /var/lib/telemonitor "
				       "failures --prog fsread --assert 'read at most 10 ms'\n"));
	assert_int_equal(m.count, 0);                /* it reports no failure of its own */
	assert_int_equal(m.instance_id, 0);
	assert_null(m.assertion);
	digest_mail_clear(&m);
}

static void resolved_mail_instance_ended(void **state)
{
	struct digest_resolved r = resolved(NULL);   /* unlabelled: named by its line */
	struct digest_mail m;

	r.ended = true;
	r.failures = 1;
	r.spec = NULL;
	assert_int_equal(digest_resolved_mail(&r, &m), 0);
	assert_string_equal(m.subject, "[telemonitor] fsread on host1 pid 4242: the assertion on "
				       "line 28 resolved");
	assert_non_null(strstr(m.body, "Resolved: the assertion on line 28 of program fsread on "
				       "machine host1, pid 4242: the instance ended "
				       "(2024-03-01T00:06:10Z).\n"));
	assert_non_null(strstr(m.body, "It failed 1 time from "));
	assert_null(strstr(m.body, "(spec "));
	assert_null(strstr(m.body, "resolve-after"));
	digest_mail_clear(&m);
}

/* A plain-text mail: the label goes in as written, with nothing escaped
 * (no HTML entities, no doubled %, no backslashes); only the subject's line
 * breaks become spaces, so no header can be added through a label. */
static void resolved_mail_keeps_the_label(void **state)
{
	static const char label[] = "p99 < 10 ms & \"fast\" at 50% \\ %s";
	static const char *const escaped[] = { "&amp;", "&lt;", "&quot;", "%%", "\\\"", "\\\\" };
	struct digest_resolved r = resolved(label);
	struct digest_mail m;

	assert_int_equal(digest_resolved_mail(&r, &m), 0);
	assert_string_equal(m.subject, "[telemonitor] fsread on host1 pid 4242: "
				       "\"p99 < 10 ms & \"fast\" at 50% \\ %s\" resolved");
	assert_non_null(strstr(m.body, "Resolved: \"p99 < 10 ms & \"fast\" at 50% \\ %s\" of "));
	assert_non_null(strstr(m.body, "--assert 'p99 < 10 ms & \"fast\" at 50% \\ %s'\n"));
	for (size_t i = 0; i < sizeof escaped / sizeof escaped[0]; i++) {
		assert_null(strstr(m.subject, escaped[i]));
		assert_null(strstr(m.body, escaped[i]));
	}
	digest_mail_clear(&m);

	/* an apostrophe: the command still pastes into a shell as one word */
	r = resolved("it's slow");
	assert_int_equal(digest_resolved_mail(&r, &m), 0);
	assert_non_null(strstr(m.body, "--assert 'it'\\''s slow'\n"));
	digest_mail_clear(&m);

	r = resolved("evil\r\nBcc: x@y");
	assert_int_equal(digest_resolved_mail(&r, &m), 0);
	assert_null(strpbrk(m.subject, "\r\n"));
	assert_non_null(strstr(m.subject, "\"evil  Bcc: x@y\" resolved"));
	digest_mail_clear(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(first_is_prompt_rest_digested),
		cmocka_unit_test(groups_are_per_instance_and_assertion),
		cmocka_unit_test(long_digest_is_cut),
		cmocka_unit_test(no_grouping),
		cmocka_unit_test(subject_has_no_line_breaks),
		cmocka_unit_test(digest_names_its_group),
		cmocka_unit_test(restored_failures_join_their_digest),
		cmocka_unit_test(restored_digest_overdue_is_due_at_once),
		cmocka_unit_test(resolved_mail_after_quiet),
		cmocka_unit_test(resolved_mail_instance_ended),
		cmocka_unit_test(resolved_mail_keeps_the_label),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
