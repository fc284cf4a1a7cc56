/* Unit tests for the one reader of a report's metrics
 * (report_metrics_each in daemons/telemonitor/report.c): numbers,
 * booleans as 1 and 0, triples [v, p, m] (exactly three numbers or nulls)
 * by their value v with p and m, mappings read entry by entry with the
 * same rule, null as UNDEFINED, anything else without a value but with
 * its node; the walk in the order written, stopped by the callback; text
 * that is not a JSON object refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kinds),
		cmocka_unit_test(mappings),
		cmocka_unit_test(stopped),
		cmocka_unit_test(refused),
		cmocka_unit_test(from_a_report),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
