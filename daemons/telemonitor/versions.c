/* telemonctl compare PROG V1 V2 [--assert A]: which metrics of the report
 * assertions (the per-chunk statistics a spec keeps with {& c : Chunk :
 * false}) changed between two versions of a program, by how much, with a
 * 95% confidence interval, and a verdict. Each report of an instance of a
 * version is one value per metric (a triple [v,p,m] by its favoured value
 * v; mappings are left out); compare.c says whether the two samples differ.
 * The verdict reads every metric as a cost, as the users do with
 * times: one that went up is "slower", down "faster" (for a metric where
 * more is better, such as a hit ratio, read it the other way round; the
 * signed change is printed beside it).
 *
 * The same for the durations of every interval type (pcheck --summaries:
 * the checker's sketches of each duration metric, merged per version):
 * the test on the sketches' buckets, values in one bucket counted as ties,
 * so the shift is known to the sketch's 1%. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "control.h"
#include "report.h"
#include "sketch.h"
#include "store_read.h"
#include "telemonitor.h"
#include "text.h"

#define VERSIONS_SERIES_MAX 200    /* metrics compared (reports' and intervals' together) */

/* What one metric took under each version: a report assertion's metric
 * (one value per report) or an interval type's duration metric (the
 * checker's sketches, merged). */
struct series {
	bool interval;            /* an interval type's durations, not a report's metric */
	char *what;               /* the assertion's name (label, or "line N"), or the type */
	char *metric;             /* the metric's name */
	double *v[2];             /* report: values under V1 and V2 */
	size_t n[2], cap[2];      /* report: how many, allocated */
	struct sketch k[2];       /* interval: merged under V1 and V2 */
};

/* What has been gathered so far. */
struct gathered {
	struct series *s;         /* the series, in the order first met */
	size_t n, cap;            /* how many, allocated */
	int side;                 /* 0: reading V1's rows, 1: V2's */
	int rc;                   /* 0, or -ENOMEM */
};

/* The series of (interval, what, metric), added if new; NULL past
 * VERSIONS_SERIES_MAX (left out) or out of memory (g->rc set). */
static struct series *series_for(struct gathered *g, bool interval, const char *what,
				 const char *metric)
{
	struct series *s;

	for (size_t i = 0; i < g->n; i++)
		if (g->s[i].interval == interval && !strcmp(g->s[i].what, what) &&
		    !strcmp(g->s[i].metric, metric))
			return &g->s[i];
	if (g->n == VERSIONS_SERIES_MAX)
		return NULL;
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 8;
		struct series *ns = realloc(g->s, cap * sizeof *ns);
		if (!ns) {
			g->rc = -ENOMEM;
			return NULL;
		}
		g->s = ns;
		g->cap = cap;
	}
	s = &g->s[g->n];
	memset(s, 0, sizeof *s);
	s->interval = interval;
	s->what = strdup(what);
	s->metric = strdup(metric);
	if (!s->what || !s->metric) {
		free(s->what);
		free(s->metric);
		g->rc = -ENOMEM;
		return NULL;
	}
	g->n++;
	return s;
}

/* One interval summary: its sketch merged into its type's. */
static int gather_summary(void *arg, const char *type, const char *metric, const char *sketch)
{
	struct gathered *g = arg;
	struct series *s = type && metric && sketch ? series_for(g, true, type, metric) : NULL;

	if (s && sketch_add_json(&s->k[g->side], sketch, strlen(sketch)) == -ENOMEM)
		g->rc = -ENOMEM;
	return g->rc ? 1 : 0;
}

/* One value of a report's metric; the newest CMP_MAX_SAMPLES are kept. */
static void add(struct gathered *g, const char *assertion, const char *metric, double x)
{
	struct series *s = series_for(g, false, assertion, metric);
	int k = g->side;

	if (!s || s->n[k] == CMP_MAX_SAMPLES)
		return;
	if (s->n[k] == s->cap[k]) {
		size_t cap = s->cap[k] ? s->cap[k] * 2 : 16;
		double *v = realloc(s->v[k], cap * sizeof *v);
		if (!v) {
			g->rc = -ENOMEM;
			return;
		}
		s->v[k] = v;
		s->cap[k] = cap;
	}
	s->v[k][s->n[k]++] = x;
}

/* One report's metrics being gathered. */
struct reporting {
	struct gathered *g;       /* where they go */
	const char *assertion;    /* the report's assertion */
};

/* One metric of a report: its value (a number, boolean or triple's v). */
static int gather_metric(void *arg, const struct report_metric *m)
{
	struct reporting *r = arg;

	if (m->has_value)
		add(r->g, r->assertion, m->name, m->value);
	return r->g->rc ? 1 : 0;
}

/* One report's metrics: its numbers, booleans and triples. */
static int gather_report(void *arg, const char *assertion, const char *metrics)
{
	struct reporting r = { .g = arg, .assertion = assertion };

	if (assertion)
		report_metrics_each_text(metrics, gather_metric, &r);
	return r.g->rc ? 1 : 0;
}

/* Compare series s: 0, or what cmp_samples / cmp_binned said. */
static int compare_series(struct series *s, struct cmp_result *c)
{
	struct cmp_bin *x = NULL, *y = NULL;
	size_t nx = 0, ny = 0;
	int rc;

	if (!s->interval) {
		rc = cmp_samples(s->v[0], s->n[0], s->v[1], s->n[1], c);
		c->n1 = s->n[0];
		c->n2 = s->n[1];
		return rc;
	}
	rc = sketch_bins(&s->k[0], &x, &nx);
	if (rc == 0)
		rc = sketch_bins(&s->k[1], &y, &ny);
	if (rc == 0)
		rc = cmp_binned(x, nx, y, ny, c);
	free(x);
	free(y);
	c->n1 = (size_t)s->k[0].count;
	c->n2 = (size_t)s->k[1].count;
	return rc;
}

static const char *verdict(const struct cmp_result *c, int rc)
{
	if (rc == -E2BIG)
		return "too spread out to compare";
	if (rc < 0)
		return "too few values";
	if (c->direction == 0)
		return "no change detected";
	return c->direction > 0 ? "slower" : "faster";
}

/* x as a percentage of base, or NAN when base is 0. */
static double pct(double x, double base)
{
	return base != 0 ? 100 * x / (base < 0 ? -base : base) : 0.0 / 0.0;
}

/* A compared value for the text: in human units when it is a duration in
 * ns, else as %.6g ("%+.6g" with sign). */
static char *value_text(double x, bool ns, bool sign, char *out, size_t size)
{
	if (ns)
		return fmt_ns(x, sign, out, size);
	snprintf(out, size, sign ? "%+.6g" : "%.6g", x);
	return out;
}

/* One compared series, with what compare_series said (rc). */
static void entry(struct sbuf *b, bool json, bool first, const struct series *s,
		  const struct cmp_result *c, int rc)
{
	const char *why = rc == -E2BIG ? "too spread out to compare (more than 1500 buckets of 1%)"
				       : "too few values (at least 5 each)";

	if (json) {
		sb_printf(b, "%s{\"kind\":\"%s\",\"%s\":", first ? "" : ",",
			  s->interval ? "interval" : "report", s->interval ? "type" : "assert");
		sb_json_str(b, s->what);
		sb_printf(b, ",\"metric\":");
		sb_json_str(b, s->metric);
		if (s->interval || metric_is_duration(s->metric))
			sb_printf(b, ",\"unit\":\"ns\"");
		sb_printf(b, ",\"n1\":%zu,\"n2\":%zu", c->n1, c->n2);
		if (rc == 0)
			sb_printf(b, ",\"median1\":%.17g,\"median2\":%.17g,\"shift\":%.17g,"
				      "\"ci_low\":%.17g,\"ci_high\":%.17g,\"p\":%.6g",
				  c->med1, c->med2, c->shift, c->lo, c->hi, c->p);
		sb_printf(b, ",\"verdict\":\"%s\"}", verdict(c, rc));
	} else if (rc == 0) {
		/* durations (interval summaries, and report metrics named so) in units */
		bool ns = s->interval || metric_is_duration(s->metric);
		char v[5][48];

		value_text(c->med1, ns, false, v[0], sizeof v[0]);
		value_text(c->med2, ns, false, v[1], sizeof v[1]);
		value_text(c->shift, ns, true, v[2], sizeof v[2]);
		value_text(c->lo, ns, true, v[3], sizeof v[3]);
		value_text(c->hi, ns, true, v[4], sizeof v[4]);
		sb_printf(b, "  %s%s: %s: %zu vs %zu values, median %s -> %s, shift %s "
			      "(%+.1f%%), 95%% interval [%s, %s] ([%+.1f%%, %+.1f%%]), "
			      "p = %.3g: %s\n",
			  s->interval ? "interval " : "", s->what, s->metric, c->n1, c->n2, v[0],
			  v[1], v[2], pct(c->shift, c->med1), v[3], v[4], pct(c->lo, c->med1),
			  pct(c->hi, c->med1), c->p, verdict(c, rc));
	} else {
		sb_printf(b, "  %s%s: %s: %zu vs %zu values: %s\n", s->interval ? "interval " : "",
			  s->what, s->metric, c->n1, c->n2, why);
	}
}

int versions_compare(struct tmon *tm, const struct ctl_request *r, const char *prog,
		     const char *v1, const char *v2, const char *assertion, struct evbuffer *out,
		     char *err, size_t errlen)
{
	struct gathered g = { 0 };
	struct sbuf b = { 0 };
	int rc = 0;
	bool first = true;

	for (g.side = 0; g.side < 2 && rc == 0; g.side++) {
		rc = store_version_reports(tm->store, prog, g.side ? v2 : v1, assertion,
					   100 * CMP_MAX_SAMPLES, gather_report, &g, err, errlen);
		if (rc == 0 && !assertion)
			rc = store_version_summaries(tm->store, prog, g.side ? v2 : v1, gather_summary,
						     &g, err, errlen);
	}
	if (rc == 0 && g.rc) {
		rc = g.rc;
		snprintf(err, errlen, "out of memory");
	}
	if (rc < 0)
		goto out;
	if (r->json) {
		sb_printf(&b, "{\"prog\":");
		sb_json_str(&b, prog);
		sb_printf(&b, ",\"v1\":");
		sb_json_str(&b, v1);
		sb_printf(&b, ",\"v2\":");
		sb_json_str(&b, v2);
		sb_printf(&b, ",\"method\":\"Mann-Whitney U; Hodges-Lehmann shift, 95%% Moses "
			      "interval\",\"metrics\":[");
	} else {
		sb_printf(&b, "%s %s -> %s (Mann-Whitney U; the shift is Hodges-Lehmann's, with its "
			      "95%% interval):\n", prog, v1, v2);
	}
	for (size_t i = 0; i < g.n; i++) {
		struct series *s = &g.s[i];
		struct cmp_result c = { 0 };

		if (s->interval ? !s->k[0].count || !s->k[1].count : !s->n[0] || !s->n[1])
			continue;                 /* only under one version */
		rc = compare_series(s, &c);
		if (rc == -ENOMEM) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		entry(&b, r->json, first, s, &c, rc);
		rc = 0;
		first = false;
	}
	if (r->json)
		sb_printf(&b, "]}\n");
	else if (first)
		sb_printf(&b, "  (no report metric or interval summary stored under both versions)\n");
	evbuffer_add(out, b.s ? b.s : "", b.len);
out:
	sb_free(&b);
	for (size_t i = 0; i < g.n; i++) {
		free(g.s[i].what);
		free(g.s[i].metric);
		free(g.s[i].v[0]);
		free(g.s[i].v[1]);
		sketch_free(&g.s[i].k[0]);
		sketch_free(&g.s[i].k[1]);
	}
	free(g.s);
	return rc;
}
