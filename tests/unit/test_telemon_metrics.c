/* Unit tests for /metrics (daemons/telemonitor/metrics.c): a report's
 * mapping of counts by integral key (a PSpec histogram) exported as a
 * Prometheus histogram, line for line: the buckets at each filled bin's
 * lower bound and at its key plus the bin width (the keys' greatest
 * common divisor), +Inf and _count, no _sum; bounds in seconds in
 * cmon_report_distribution_seconds when the metric's name says its keys'
 * unit (msTimes), in key units in cmon_report_distribution otherwise
 * (Lectern's lgmTimes); mappings that are not counts by integral keys
 * give no histogram; a histogram is shown whole or counted omitted. The
 * store and the service below metrics.c are stubs that are never called;
 * the report reader, JSON and text are the real ones. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../daemons/telemonitor/metrics.c"

/* --- stubs: what metrics_write reads, never reached here ----------------------- */

double tm_now(void) { return 0; }
bool reg_connected(const struct tmon *tm) { (void)tm; return false; }
void store_health(const struct store *st, struct store_health *h) { (void)st; memset(h, 0, sizeof *h); }
void notify_stats(struct tmon *tm, struct notify_stats *s) { (void)tm; memset(s, 0, sizeof *s); }
void alerts_stats(const struct tmon *tm, struct alerts_stats *s) { (void)tm; memset(s, 0, sizeof *s); }
const char *inst_state_name(enum inst_state s) { (void)s; return "listed"; }

int store_instances_by_state(struct store *st, store_state_count_cb cb, void *arg)
{
	(void)st, (void)cb, (void)arg;
	return 0;
}

int store_metrics_instances(struct store *st, int limit, store_instance_row_cb cb, void *arg,
			    char *err, size_t errlen)
{
	(void)st, (void)limit, (void)cb, (void)arg, (void)err, (void)errlen;
	return 0;
}

int store_instances_count(struct store *st, int64_t *n, char *err, size_t errlen)
{
	(void)st, (void)err, (void)errlen;
	*n = 0;
	return 0;
}

int store_summaries_after(struct store *st, uint64_t after, int limit, store_summary_row_cb cb,
			  void *arg, char *err, size_t errlen)
{
	(void)st, (void)after, (void)limit, (void)cb, (void)arg, (void)err, (void)errlen;
	return 0;
}

int store_failure_counts(struct store *st, int limit, store_failure_count_cb cb, void *arg,
			 char *err, size_t errlen)
{
	(void)st, (void)limit, (void)cb, (void)arg, (void)err, (void)errlen;
	return 0;
}

int store_newest_reports(struct store *st, int limit, store_report_row_cb cb, void *arg,
			 char *err, size_t errlen)
{
	(void)st, (void)limit, (void)cb, (void)arg, (void)err, (void)errlen;
	return 0;
}

/* --- helpers -------------------------------------------------------------------- */

#define BASE "prog=\"lectern\",assert=\"1-day stats\""

/* The families of one report's metrics `json` (base labels BASE):
 * histogram, histogram_seconds and mapping lines, as one heap string. */
static struct gather *gathered(const char *json, size_t series_before)
{
	struct gather *g = calloc(1, sizeof *g);

	assert_non_null(g);
	for (int f = 0; f < M_COUNT; f++)
		assert_non_null(g->fam[f] = evbuffer_new());
	g->series = series_before;
	report(g, BASE, json);
	return g;
}

/* The text of family `f`, NUL-terminated (valid until free_gathered). */
static const char *family(struct gather *g, enum metric_family f)
{
	evbuffer_add(g->fam[f], "", 1);
	return (const char *)evbuffer_pullup(g->fam[f], -1);
}

static void free_gathered(struct gather *g)
{
	for (int f = 0; f < M_COUNT; f++)
		evbuffer_free(g->fam[f]);
	free(g);
}

/* --- the cases ---------------------------------------------------------------------- */

/* Lectern's lgmTimes (msTime = trunc(t / 10ms) * 10: keys are lower bounds
 * of 10-ms bins): no unit in its name, so bounds in key units; the width
 * 10 is the keys' gcd. */
static void lectern_lower_bounds(void **state)
{
	struct gather *g = gathered("{\"lgmTimes\":{\"230\":2,\"270\":2,\"350\":2,\"1500\":2}}", 0);
	const char *want =
		"cmon_report_distribution_bucket{" BASE ",metric=\"lgmTimes\",le=\"230\"} 0\n"
		"cmon_report_distribution_bucket{" BASE ",metric=\"lgmTimes\",le=\"240\"} 2\n"
		"cmon_report_distribution_bucket{" BASE ",metric=\"lgmTimes\",le=\"270\"} 2\n"
		"cmon_report_distribution_bucket{" BASE ",metric=\"lgmTimes\",le=\"280\"} 4\n"
		"cmon_report_distribution_bucket{" BASE ",metric=\"lgmTimes\",le=\"350\"} 4\n"
		"cmon_report_distribution_bucket{" BASE ",metric=\"lgmTimes\",le=\"360\"} 6\n"
		"cmon_report_distribution_bucket{" BASE ",metric=\"lgmTimes\",le=\"1500\"} 6\n"
		"cmon_report_distribution_bucket{" BASE ",metric=\"lgmTimes\",le=\"1510\"} 8\n"
		"cmon_report_distribution_bucket{" BASE ",metric=\"lgmTimes\",le=\"+Inf\"} 8\n"
		"cmon_report_distribution_count{" BASE ",metric=\"lgmTimes\"} 8\n";

	(void)state;
	assert_string_equal(family(g, M_HIST), want);
	assert_string_equal(family(g, M_HIST_S), "");
	/* the gauges stay, one a key */
	assert_non_null(strstr(family(g, M_BUCKET),
			       "cmon_report_mapping{" BASE ",metric=\"lgmTimes\",key=\"1500\"} 2\n"));
	assert_int_equal(g->series, 4 + 10);
	free_gathered(g);
}

/* fsread's msTimes (trunc(r.time / 1 ms): keys are bin indexes): the name
 * says milliseconds, so bounds in seconds; neighbouring bins share a
 * bound. */
static void fsread_ms_index(void **state)
{
	struct gather *g = gathered("{\"reads\":70,\"msTimes\":{\"1\":60,\"2\":8,\"20\":2}}", 0);
	const char *want =
		"cmon_report_distribution_seconds_bucket{" BASE ",metric=\"msTimes\",le=\"0.001\"} 0\n"
		"cmon_report_distribution_seconds_bucket{" BASE ",metric=\"msTimes\",le=\"0.002\"} 60\n"
		"cmon_report_distribution_seconds_bucket{" BASE ",metric=\"msTimes\",le=\"0.003\"} 68\n"
		"cmon_report_distribution_seconds_bucket{" BASE ",metric=\"msTimes\",le=\"0.02\"} 68\n"
		"cmon_report_distribution_seconds_bucket{" BASE ",metric=\"msTimes\",le=\"0.021\"} 70\n"
		"cmon_report_distribution_seconds_bucket{" BASE ",metric=\"msTimes\",le=\"+Inf\"} 70\n"
		"cmon_report_distribution_seconds_count{" BASE ",metric=\"msTimes\"} 70\n";

	(void)state;
	assert_string_equal(family(g, M_HIST_S), want);
	assert_string_equal(family(g, M_HIST), "");
	assert_string_equal(family(g, M_REPORT), "cmon_report_metric{" BASE ",metric=\"reads\"} 70\n");
	free_gathered(g);
}

/* Keys in nanoseconds (a name that is a duration by the numbers' rule),
 * negative keys, and a lone bin 0 whose width nothing tells. */
static void units_and_signs(void **state)
{
	struct gather *g = gathered("{\"readTime\":{\"2000\":1,\"4000\":3},"
				    "\"delta\":{\"-2\":1,\"0\":1,\"4\":1},"
				    "\"usLatencies\":{\"0\":5}}", 0);
	const char *want_s =
		"cmon_report_distribution_seconds_bucket{" BASE ",metric=\"readTime\",le=\"2e-06\"} 0\n"
		"cmon_report_distribution_seconds_bucket{" BASE ",metric=\"readTime\",le=\"4e-06\"} 1\n"
		"cmon_report_distribution_seconds_bucket{" BASE ",metric=\"readTime\",le=\"6e-06\"} 4\n"
		"cmon_report_distribution_seconds_bucket{" BASE ",metric=\"readTime\",le=\"+Inf\"} 4\n"
		"cmon_report_distribution_seconds_count{" BASE ",metric=\"readTime\"} 4\n"
		"cmon_report_distribution_seconds_bucket{" BASE ",metric=\"usLatencies\",le=\"0\"} 0\n"
		"cmon_report_distribution_seconds_bucket{" BASE ",metric=\"usLatencies\",le=\"+Inf\"} 5\n"
		"cmon_report_distribution_seconds_count{" BASE ",metric=\"usLatencies\"} 5\n";
	const char *want =
		"cmon_report_distribution_bucket{" BASE ",metric=\"delta\",le=\"-2\"} 0\n"
		"cmon_report_distribution_bucket{" BASE ",metric=\"delta\",le=\"0\"} 1\n"
		"cmon_report_distribution_bucket{" BASE ",metric=\"delta\",le=\"2\"} 2\n"
		"cmon_report_distribution_bucket{" BASE ",metric=\"delta\",le=\"4\"} 2\n"
		"cmon_report_distribution_bucket{" BASE ",metric=\"delta\",le=\"6\"} 3\n"
		"cmon_report_distribution_bucket{" BASE ",metric=\"delta\",le=\"+Inf\"} 3\n"
		"cmon_report_distribution_count{" BASE ",metric=\"delta\"} 3\n";

	(void)state;
	assert_string_equal(family(g, M_HIST_S), want_s);
	assert_string_equal(family(g, M_HIST), want);
	free_gathered(g);
}

/* Mappings that are not counts by integral keys: no histogram (their
 * gauges as before). */
static void not_histograms(void **state)
{
	static const char *const json[] = {
		"{\"m\":{\"1\":1.5,\"2\":1}}",        /* a mean per key */
		"{\"m\":{\"1\":[3,1,1]}}",            /* triples */
		"{\"m\":{\"1\":-1}}",                 /* not a count */
		"{\"m\":{\"1\":true}}",               /* booleans */
		"{\"m\":{\"1\":null,\"2\":1}}",       /* UNDEFINED */
		"{\"m\":{\"1.5\":1}}",                /* not integral */
		"{\"m\":{\"x\":1}}",                  /* not a number */
		"{\"m\":{\"1\":1,\"1.0\":1}}",        /* one key twice */
		"{\"m\":{\"480000\":{\"270\":2}}}",   /* a mapping of mappings */
		"{\"m\":{}}",                         /* empty */
		"{\"m\":{\"1e300\":1}}",              /* past 2^53 */
	};

	(void)state;
	for (size_t i = 0; i < sizeof json / sizeof json[0]; i++) {
		struct gather *g = gathered(json[i], 0);
		assert_string_equal(family(g, M_HIST), "");
		assert_string_equal(family(g, M_HIST_S), "");
		free_gathered(g);
	}
}

/* The name rule for keys' units. */
static void key_units(void **state)
{
	static const struct {
		const char *name;
		int64_t mul, div;
	} cases[] = {
		{ "msTimes", 1, 1000 }, { "msTime", 1, 1000 }, { "us_latency", 1, 1000000 },
		{ "nsTimes", 1, 1000000000 }, { "secWaits", 1, 1 }, { "sec_time", 1, 1 },
		{ "sDuration", 1, 1 }, { "minTimes", 60, 1 }, { "readTime", 1, 1000000000 },
		{ "latency", 1, 1000000000 }, { "read_ns", 1, 1000000000 },
		/* no unit said: not durations */
		{ "lgmTimes", 0, 0 }, { "pageTimes", 0, 0 }, { "msCount", 0, 0 },
		{ "sizes", 0, 0 }, { "applyOps", 0, 0 }, { "msec", 0, 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct key_unit u = keys_unit(cases[i].name);
		if (u.mul != cases[i].mul || u.div != cases[i].div)
			fail_msg("%s: %" PRId64 "/%" PRId64 ", want %" PRId64 "/%" PRId64,
				 cases[i].name, u.mul, u.div, cases[i].mul, cases[i].div);
	}
}

/* Shown whole or not at all: past the bound, its series are counted
 * omitted. */
static void bound_whole(void **state)
{
	struct gather *g = gathered("{\"lgmTimes\":{\"230\":2,\"270\":2}}",
				    METRICS_REPORT_SERIES_MAX - 5);

	(void)state;
	/* the two gauges fit, the histogram's 6 series do not */
	assert_string_equal(family(g, M_HIST), "");
	assert_int_equal(g->series, METRICS_REPORT_SERIES_MAX - 3);
	assert_int_equal(g->series_omitted, 6);
	free_gathered(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(lectern_lower_bounds),
		cmocka_unit_test(fsread_ms_index),
		cmocka_unit_test(units_and_signs),
		cmocka_unit_test(not_histograms),
		cmocka_unit_test(key_units),
		cmocka_unit_test(bound_whole),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
