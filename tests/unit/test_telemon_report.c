/* Unit tests for the one reader of a report's metrics
 * (report_metrics_each in daemons/telemonitor/report.c): numbers,
 * booleans as 1 and 0, triples [v, p, m] (exactly three numbers or nulls)
 * by their value v with p and m, mappings read entry by entry with the
 * same rule, null as UNDEFINED, anything else without a value but with
 * its node; the walk in the order written, stopped by the callback; text
 * that is not a JSON object refused. And report_of_offender: every
 * offender of every language test's check, taken apart in the process,
 * equals its JSON line as report_parse reads it, field for field. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include "pspec/pspec.h"
#include "../../daemons/telemonitor/json.c"
#include "../../daemons/telemonitor/report.c"

#define SEEN_MAX 32

/* What the callback was given. */
static struct {
	size_t n;                     /* calls */
	struct {
		char name[32];
		enum report_metric_kind kind;
		bool has_value;
		double value, plus, minus;
		char node[64];        /* the node's source text */
	} m[SEEN_MAX];
	size_t stop_at;               /* with it nonzero: return 7 at this call */
} seen;

static int record(void *arg, const struct report_metric *m)
{
	size_t i = seen.n++;

	(void)arg;
	assert_true(i < SEEN_MAX);
	assert_non_null(m->node);
	snprintf(seen.m[i].name, sizeof seen.m[i].name, "%s", m->name);
	seen.m[i].kind = m->kind;
	seen.m[i].has_value = m->has_value;
	seen.m[i].value = m->value;
	seen.m[i].plus = m->plus;
	seen.m[i].minus = m->minus;
	snprintf(seen.m[i].node, sizeof seen.m[i].node, "%.*s", (int)m->node->srclen, m->node->src);
	return seen.stop_at && seen.n == seen.stop_at ? 7 : 0;
}

static void forget(void)
{
	memset(&seen, 0, sizeof seen);
}

/* Call i was `name` of `kind` with (has_value, value). */
static void saw(size_t i, const char *name, enum report_metric_kind kind, bool has_value,
		double value)
{
	assert_true(i < seen.n);
	assert_string_equal(seen.m[i].name, name);
	assert_int_equal(seen.m[i].kind, kind);
	assert_int_equal(seen.m[i].has_value, has_value);
	if (has_value)
		assert_true(seen.m[i].value == value);
	else
		assert_true(isnan(seen.m[i].value));
}

/* Every kind of value, by the one rule, in the order written. */
static void kinds(void **state)
{
	const char *text =
		"{\"n\":12.5,\"t\":true,\"f\":false,\"time\":[13781143,1,2],"
		"\"inf\":[null,0,0],\"wide\":[3,null,null],\"u\":null,\"s\":\"x\","
		"\"two\":[1,2],\"four\":[1,2,3,4],\"mixed\":[1,\"a\",2],\"nested\":[[1],0,0],"
		"\"hist\":{\"3\":2}}";

	(void)state;
	forget();
	assert_int_equal(report_metrics_each_text(text, record, NULL), 0);
	assert_int_equal(seen.n, 13);
	saw(0, "n", REPORT_METRIC_NUMBER, true, 12.5);
	saw(1, "t", REPORT_METRIC_BOOLEAN, true, 1);
	saw(2, "f", REPORT_METRIC_BOOLEAN, true, 0);
	saw(3, "time", REPORT_METRIC_TRIPLE, true, 13781143);
	assert_true(seen.m[3].plus == 1 && seen.m[3].minus == 2);
	saw(4, "inf", REPORT_METRIC_TRIPLE, false, 0);
	assert_true(seen.m[4].plus == 0 && seen.m[4].minus == 0);
	saw(5, "wide", REPORT_METRIC_TRIPLE, true, 3);
	assert_true(isnan(seen.m[5].plus) && isnan(seen.m[5].minus));
	saw(6, "u", REPORT_METRIC_UNDEFINED, false, 0);
	saw(7, "s", REPORT_METRIC_OTHER, false, 0);
	saw(8, "two", REPORT_METRIC_OTHER, false, 0);
	saw(9, "four", REPORT_METRIC_OTHER, false, 0);
	saw(10, "mixed", REPORT_METRIC_OTHER, false, 0);
	saw(11, "nested", REPORT_METRIC_OTHER, false, 0);
	saw(12, "hist", REPORT_METRIC_MAPPING, false, 0);
	/* the node is the value as written, for whoever shows it */
	assert_string_equal(seen.m[3].node, "[13781143,1,2]");
	assert_string_equal(seen.m[10].node, "[1,\"a\",2]");
	assert_string_equal(seen.m[12].node, "{\"3\":2}");
	/* not a triple: p and m are 0 */
	assert_true(seen.m[0].plus == 0 && seen.m[0].minus == 0);
}

/* Mapping entries read one by one, by the same rule. */
static int entries(void *arg, const struct report_metric *m)
{
	int *rc = arg;

	if (m->kind == REPORT_METRIC_MAPPING)
		*rc = report_metrics_each(m->node, record, NULL);
	return 0;
}

static void mappings(void **state)
{
	int rc = -1;

	(void)state;
	forget();
	assert_int_equal(report_metrics_each_text(
				 "{\"n\":1,\"hist\":{\"3\":2,\"5\":[4,1,1],\"7\":true,\"9\":null,"
				 "\"11\":{\"a\":1}}}",
				 entries, &rc),
			 0);
	assert_int_equal(rc, 0);
	assert_int_equal(seen.n, 5);
	saw(0, "3", REPORT_METRIC_NUMBER, true, 2);
	saw(1, "5", REPORT_METRIC_TRIPLE, true, 4);
	saw(2, "7", REPORT_METRIC_BOOLEAN, true, 1);
	saw(3, "9", REPORT_METRIC_UNDEFINED, false, 0);
	saw(4, "11", REPORT_METRIC_MAPPING, false, 0);
}

/* A nonzero return stops the walk and is returned. */
static void stopped(void **state)
{
	(void)state;
	forget();
	seen.stop_at = 2;
	assert_int_equal(report_metrics_each_text("{\"a\":1,\"b\":2,\"c\":3}", record, NULL), 7);
	assert_int_equal(seen.n, 2);
	saw(1, "b", REPORT_METRIC_NUMBER, true, 2);
}

/* Text that is not a JSON object is refused, an empty object has none. */
static void refused(void **state)
{
	static const char *const bad[] = { "[1]", "12", "\"text\"", "null", "not json", "{\"a\":1",
					   "" };

	(void)state;
	forget();
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		assert_int_equal(report_metrics_each_text(bad[i], record, NULL), -EINVAL);
	assert_int_equal(report_metrics_each_text(NULL, record, NULL), -EINVAL);
	assert_int_equal(report_metrics_each(NULL, record, NULL), -EINVAL);
	assert_int_equal(report_metrics_each_text("{}", record, NULL), 0);
	assert_int_equal(seen.n, 0);
}

/* The metrics of a parsed report line, from its tree. */
static void from_a_report(void **state)
{
	static const char line[] =
		"{\"spec\":\"s.pspec\",\"assert\":\"io\",\"line\":3,\"result\":\"fail\",\"kind\":"
		"\"interval\",\"metrics\":{\"time\":[12990,1,1],\"size\":8192,\"hit\":true}}";
	struct checker_report r;

	(void)state;
	forget();
	assert_int_equal(report_parse(line, sizeof line - 1, &r), 0);
	assert_true(r.has_metrics);
	assert_int_equal(report_metrics_each(r.metrics_tree, record, NULL), 0);
	assert_int_equal(seen.n, 3);
	saw(0, "time", REPORT_METRIC_TRIPLE, true, 12990);
	saw(1, "size", REPORT_METRIC_NUMBER, true, 8192);
	saw(2, "hit", REPORT_METRIC_BOOLEAN, true, 1);
	report_free(&r);
}

/* --- an offender taken apart in the process (report_of_offender) ---------- */

/* What the comparison saw over the language tests. */
static struct {
	unsigned offenders, intervals, events, reports, labelled, unlabelled, inconclusive,
		undefined;
	const char *what;             /* the spec being checked */
	char *scratch;                /* report_of_offender's buffer */
	size_t scratch_cap;
} cmp;

#define SAME_TEXT(field)                                                                    \
	do {                                                                                \
		if (!a.field || !b.field)                                                   \
			assert_true(!a.field == !b.field);                                  \
		else                                                                        \
			assert_string_equal(a.field, b.field);                              \
	} while (0)

/* Each offender: the struct taken apart equals its JSON line parsed,
 * field for field. */
static void compare_offender(void *ctx, const pspec_report *pr)
{
	struct checker_report a, b;
	char *line;

	(void)ctx;
	if (pspec_report_kind_of(pr) != PSPEC_REPORT_OFFENDER) {
		assert_int_equal(report_of_offender(pr, &cmp.scratch, &cmp.scratch_cap, &a), -EINVAL);
		return;
	}
	assert_int_equal(report_of_offender(pr, &cmp.scratch, &cmp.scratch_cap, &a), 0);
	line = pspec_report_format(pr, PSPEC_FORMAT_JSON);
	assert_non_null(line);
	assert_int_equal(report_parse(line, strlen(line), &b), 0);
	if (!b.metrics) {
		print_error("%s: %s\n", cmp.what, line);
		fail();
	}
	SAME_TEXT(spec);
	SAME_TEXT(assertion);
	SAME_TEXT(result);
	SAME_TEXT(note);
	SAME_TEXT(kind);
	SAME_TEXT(type);
	SAME_TEXT(start);
	SAME_TEXT(end);
	SAME_TEXT(metrics);
	SAME_TEXT(witness);
	SAME_TEXT(print);
	assert_int_equal(a.line, b.line);
	assert_int_equal(a.has_uid, b.has_uid);
	assert_int_equal(a.uid, b.uid);
	assert_int_equal(a.has_ts, b.has_ts);
	assert_int_equal(a.start_ts_kind, b.start_ts_kind);
	assert_int_equal(a.start_ts, b.start_ts);
	assert_int_equal(a.end_ts, b.end_ts);
	assert_int_equal(a.report, b.report);
	assert_int_equal(a.has_metrics, b.has_metrics);
	assert_int_equal(a.metrics_len, b.metrics_len);
	assert_int_equal(a.has_offenders, b.has_offenders);
	assert_int_equal(a.has_print, b.has_print);
	assert_int_equal(a.has_summary, b.has_summary);
	assert_int_equal(a.count, b.count);
	cmp.offenders++;
	cmp.intervals += !strcmp(a.kind, "interval");
	cmp.events += !strcmp(a.kind, "event");
	cmp.reports += a.report;
	cmp.labelled += a.assertion != NULL;
	cmp.unlabelled += a.assertion == NULL;
	cmp.inconclusive += !strcmp(a.result, "inconclusive");
	cmp.undefined += !strcmp(a.result, "undefined");
	report_free(&a);
	report_free(&b);
	free(line);
}

/* The log a language test runs on: NAME.log, or its "% log:" directive. */
static void log_of(const char *spec, const char *name, char *log, size_t size)
{
	FILE *f = fopen(spec, "r");
	char line[512], v[256];

	snprintf(log, size, "%s/%s.log", PSPEC_LANG_DIR, name);
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		const char *l = line + strspn(line, " \t");
		if (*l == '\n' || !*l)
			continue;
		if (*l != '%')
			break;
		l += 1 + strspn(l + 1, " \t");
		if (sscanf(l, "log: %255s", v) == 1)
			snprintf(log, size, "%s/%s", PSPEC_LANG_DIR, strcmp(v, "none") ? v : "empty.log");
	}
	fclose(f);
}

/* Every offender of every language test's check (continuous, --explain,
 * as the telemonitor runs it) taken apart both ways. */
static void offenders_taken_apart(void **state)
{
	DIR *dir = opendir(PSPEC_LANG_DIR);
	struct dirent *e;

	(void)state;
	assert_non_null(dir);
	while ((e = readdir(dir))) {
		size_t n = strlen(e->d_name);
		char spec[600], name[300], log[900];
		pspec_check_options opt = {
			.continuous = true, .explain = true, .threads = 1,
			.report = compare_offender,
		};
		pspec *ps;
		char *err = NULL;
		int fd;

		if (n <= 6 || strcmp(e->d_name + n - 6, ".pspec") || n - 6 >= sizeof name)
			continue;
		snprintf(name, sizeof name, "%.*s", (int)(n - 6), e->d_name);
		snprintf(spec, sizeof spec, "%s/%s", PSPEC_LANG_DIR, e->d_name);
		log_of(spec, name, log, sizeof log);
		ps = pspec_new();
		assert_non_null(ps);
		pspec_set_search_path(ps, PSPEC_LANG_DIR);
		if (pspec_load_file(ps, spec) != 0 || (fd = open(log, O_RDONLY)) < 0) {
			pspec_free(ps);
			continue;
		}
		cmp.what = e->d_name;
		pspec_check(ps, fd, log, &opt, &err);
		free(err);
		close(fd);
		pspec_free(ps);
	}
	closedir(dir);
	free(cmp.scratch);
	print_message("%u offenders: %u intervals, %u events; %u of report assertions; %u labelled, "
		      "%u unlabelled; %u inconclusive, %u undefined\n", cmp.offenders, cmp.intervals,
		      cmp.events, cmp.reports, cmp.labelled, cmp.unlabelled, cmp.inconclusive,
		      cmp.undefined);
	assert_true(cmp.intervals >= 20 && cmp.events >= 5 && cmp.reports >= 1 &&
		    cmp.labelled >= 5 && cmp.unlabelled >= 5 && cmp.inconclusive >= 1 &&
		    cmp.undefined >= 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kinds),
		cmocka_unit_test(mappings),
		cmocka_unit_test(stopped),
		cmocka_unit_test(refused),
		cmocka_unit_test(from_a_report),
		cmocka_unit_test(offenders_taken_apart),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
