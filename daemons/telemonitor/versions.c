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
#include "json.h"
#include "sketch.h"
#include "store_read.h"
#include "telemonitor.h"
#include "text.h"

#define VERSIONS_SERIES_MAX 200    /* (assertion, metric) pairs compared */

/* The values one metric of one assertion took under each version. */
struct series {
	char *assertion;          /* its name (label, or "line N") */
	char *metric;             /* the metric's name */
	double *v[2];             /* values under V1 and V2 */
	size_t n[2], cap[2];      /* how many, allocated */
};

/* The durations of one interval type's metric under each version. */
struct durations {
	char *type;               /* the interval type */
	char *metric;             /* its duration metric */
	struct sketch k[2];       /* merged under V1 and V2 */
};

/* What has been gathered so far. */
struct gathered {
	struct series *s;         /* the series, in the order first met */
	size_t n;                 /* how many */
	struct durations *d;      /* interval durations, in the order first met */
	size_t nd;                /* how many */
	int side;                 /* 0: reading V1's reports, 1: V2's */
	int rc;                   /* 0, or -ENOMEM */
};

static struct durations *durations_for(struct gathered *g, const char *type, const char *metric)
{
	for (size_t i = 0; i < g->nd; i++)
		if (!strcmp(g->d[i].type, type) && !strcmp(g->d[i].metric, metric))
			return &g->d[i];
	if (g->nd == VERSIONS_SERIES_MAX)
		return NULL;
	if (!g->nd || !(g->nd & (g->nd - 1))) {
		struct durations *nd = realloc(g->d, (g->nd ? g->nd * 2 : 8) * sizeof *nd);
		if (!nd)
			return NULL;
		g->d = nd;
	}
	struct durations *d = &g->d[g->nd];
	memset(d, 0, sizeof *d);
	d->type = strdup(type);
	d->metric = strdup(metric);
	if (!d->type || !d->metric) {
		free(d->type);
		free(d->metric);
		return NULL;
	}
	g->nd++;
	return d;
}

/* One interval summary: its sketch merged into its type's. */
static int gather_summary(void *arg, const char *type, const char *metric, const char *sketch)
{
	struct gathered *g = arg;
	struct durations *d;

	if (!type || !metric || !sketch)
		return 0;
	d = durations_for(g, type, metric);
	if (!d) {
		if (g->nd < VERSIONS_SERIES_MAX)
			g->rc = -ENOMEM;
		return g->rc ? 1 : 0;
	}
	if (sketch_add_json(&d->k[g->side], sketch, strlen(sketch)) == -ENOMEM)
		g->rc = -ENOMEM;
	return g->rc ? 1 : 0;
}

static struct series *series_for(struct gathered *g, const char *assertion, const char *metric)
{
	for (size_t i = 0; i < g->n; i++)
		if (!strcmp(g->s[i].assertion, assertion) && !strcmp(g->s[i].metric, metric))
			return &g->s[i];
	if (g->n == VERSIONS_SERIES_MAX)
		return NULL;
	if (!g->n || !(g->n & (g->n - 1))) {
		struct series *ns = realloc(g->s, (g->n ? g->n * 2 : 8) * sizeof *ns);
		if (!ns)
			return NULL;
		g->s = ns;
	}
	struct series *s = &g->s[g->n];
	memset(s, 0, sizeof *s);
	s->assertion = strdup(assertion);
	s->metric = strdup(metric);
	if (!s->assertion || !s->metric) {
		free(s->assertion);
		free(s->metric);
		return NULL;
	}
	g->n++;
	return s;
}

static int add(struct gathered *g, const char *assertion, const char *metric, double x)
{
	struct series *s = series_for(g, assertion, metric);
	int k = g->side;

	if (!s)
		return g->n == VERSIONS_SERIES_MAX ? 0 : -ENOMEM;
	if (s->n[k] == CMP_MAX_SAMPLES)
		return 0;                 /* the newest CMP_MAX_SAMPLES are kept */
	if (s->n[k] == s->cap[k]) {
		size_t cap = s->cap[k] ? s->cap[k] * 2 : 16;
		double *v = realloc(s->v[k], cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		s->v[k] = v;
		s->cap[k] = cap;
	}
	s->v[k][s->n[k]++] = x;
	return 0;
}

/* One report's metrics: its numbers, booleans and triples. */
static int gather_report(void *arg, const char *assertion, const char *metrics)
{
	struct gathered *g = arg;
	struct json *root = metrics ? json_parse(metrics, strlen(metrics), NULL, 0) : NULL;

	if (root && root->kind == JSON_OBJECT && assertion)
		for (const struct json *m = root->kids; m && !g->rc; m = m->next) {
			if (m->kind == JSON_NUMBER)
				g->rc = add(g, assertion, m->key, m->num);
			else if (m->kind == JSON_TRUE || m->kind == JSON_FALSE)
				g->rc = add(g, assertion, m->key, m->kind == JSON_TRUE);
			else if (m->kind == JSON_ARRAY && m->count == 3 && m->kids->kind == JSON_NUMBER)
				g->rc = add(g, assertion, m->key, m->kids->num);
		}
	json_free(root);
	return g->rc ? 1 : 0;
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

/* One compared metric: `kind` "report" (`what` is the assertion) or
 * "interval" (`what` is the interval type). */
static void entry(struct sbuf *b, bool json, bool first, const char *kind, const char *what,
		  const char *metric, const struct cmp_result *c, int rc)
{
	bool ok = rc == 0;
	bool report = !strcmp(kind, "report");

	if (json) {
		sb_printf(b, "%s{\"kind\":\"%s\",\"%s\":", first ? "" : ",", kind,
			  report ? "assert" : "type");
		sb_json_str(b, what);
		sb_printf(b, ",\"metric\":");
		sb_json_str(b, metric);
		sb_printf(b, ",\"n1\":%zu,\"n2\":%zu", c->n1, c->n2);
		if (ok)
			sb_printf(b, ",\"median1\":%.17g,\"median2\":%.17g,\"shift\":%.17g,"
				      "\"ci_low\":%.17g,\"ci_high\":%.17g,\"p\":%.6g",
				  c->med1, c->med2, c->shift, c->lo, c->hi, c->p);
		sb_printf(b, ",\"verdict\":\"%s\"}", verdict(c, rc));
	} else if (ok) {
		sb_printf(b, "  %s%s: %s: %zu vs %zu values, median %.6g -> %.6g, shift %+.6g "
			      "(%+.1f%%), 95%% interval [%+.6g, %+.6g] ([%+.1f%%, %+.1f%%]), "
			      "p = %.3g: %s\n",
			  report ? "" : "interval ", what, metric, c->n1, c->n2, c->med1, c->med2,
			  c->shift, pct(c->shift, c->med1), c->lo, c->hi, pct(c->lo, c->med1),
			  pct(c->hi, c->med1), c->p, verdict(c, rc));
	} else {
		sb_printf(b, "  %s%s: %s: %zu vs %zu values: too few values (at least %d each)\n",
			  report ? "" : "interval ", what, metric, c->n1, c->n2, CMP_MIN_SAMPLES);
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
		struct cmp_result c;

		if (!s->n[0] || !s->n[1])
			continue;                 /* only under one version */
		rc = cmp_samples(s->v[0], s->n[0], s->v[1], s->n[1], &c);
		if (rc == -ENOMEM) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		c.n1 = s->n[0];
		c.n2 = s->n[1];
		entry(&b, r->json, first, "report", s->assertion, s->metric, &c, rc);
		rc = 0;
		first = false;
	}
	for (size_t i = 0; i < g.nd; i++) {
		struct durations *d = &g.d[i];
		struct cmp_bin *x = NULL, *y = NULL;
		size_t nx = 0, ny = 0;
		struct cmp_result c = { 0 };

		if (!d->k[0].count || !d->k[1].count)
			continue;
		if (sketch_bins(&d->k[0], &x, &nx) < 0 || sketch_bins(&d->k[1], &y, &ny) < 0) {
			free(x);
			rc = -ENOMEM;
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		rc = cmp_binned(x, nx, y, ny, &c);
		free(x);
		free(y);
		if (rc == -ENOMEM) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		c.n1 = (size_t)d->k[0].count;
		c.n2 = (size_t)d->k[1].count;
		entry(&b, r->json, first, "interval", d->type, d->metric, &c, rc);
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
		free(g.s[i].assertion);
		free(g.s[i].metric);
		free(g.s[i].v[0]);
		free(g.s[i].v[1]);
	}
	free(g.s);
	for (size_t i = 0; i < g.nd; i++) {
		free(g.d[i].type);
		free(g.d[i].metric);
		sketch_free(&g.d[i].k[0]);
		sketch_free(&g.d[i].k[1]);
	}
	free(g.d);
	return rc;
}
