/* telemonctl stats: the metrics of a periodic report assertion (the
 * report's Lectern "1-day stats": {& c : Chunk : false} fails for every
 * chunk, so every chunk's metrics are stored as a failure) gathered per
 * day. The day of a report is the UTC date its interval started, in log
 * time mapped to the wall clock (see session_wall), or the time it was
 * reported when that is unknown. Within a day, numbers are summarised
 * (count, min, mean, max, sum) and mappings are added up key by key, as
 * PSpec's + does; mappings are drawn as bar histograms. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control.h"
#include "report.h"
#include "store.h"
#include "store_read.h"
#include "text.h"

#define STATS_DAYS_MAX 3660       /* days in one answer */
#define STATS_KEYS_MAX 100000     /* keys in one aggregated mapping */
#define STATS_DEPTH_MAX 6         /* mapping nesting followed */

/* A metric (or mapping entry) aggregated over the reports of a day. */
struct agg {
	char *key;                /* metric name or mapping key */
	bool is_map;              /* a mapping: see kids */
	long n;                   /* numbers: how many were seen */
	double sum, min, max;     /* numbers: their summary */
	struct agg *kids;         /* mapping entries or metrics */
	size_t nkids;             /* how many */
	size_t cap;               /* allocated */
};

/* One day's reports. */
struct day {
	char date[16];            /* YYYY-MM-DD */
	long reports;             /* reports that day */
	struct agg root;          /* its metrics (a mapping of name -> value) */
};

static void agg_free(struct agg *a)
{
	for (size_t i = 0; i < a->nkids; i++)
		agg_free(&a->kids[i]);
	free(a->kids);
	free(a->key);
}

static struct agg *kid(struct agg *a, const char *key)
{
	for (size_t i = 0; i < a->nkids; i++)
		if (!strcmp(a->kids[i].key, key))
			return &a->kids[i];
	if (a->nkids >= STATS_KEYS_MAX)
		return NULL;
	if (a->nkids == a->cap) {
		size_t ncap = a->cap ? a->cap * 2 : 8;
		struct agg *g = realloc(a->kids, ncap * sizeof *g);
		if (!g)
			return NULL;
		a->kids = g;
		a->cap = ncap;
	}
	memset(&a->kids[a->nkids], 0, sizeof a->kids[0]);
	a->kids[a->nkids].key = strdup(key);
	if (!a->kids[a->nkids].key)
		return NULL;
	return &a->kids[a->nkids++];
}

static void add_number(struct agg *a, double v)
{
	if (a->n == 0 || v < a->min)
		a->min = v;
	if (a->n == 0 || v > a->max)
		a->max = v;
	a->sum += v;
	a->n++;
}

/* Adding a report's metrics, or a mapping's entries, to `a`; `depth` is
 * their nesting (the metrics are at 1). */
struct adding {
	struct agg *a;            /* the metrics or mapping they go into */
	int depth;                /* how deep */
};

/* One metric or mapping entry: its value (a number, boolean or triple's
 * v) added up, a mapping entry by entry. */
static int add_metric(void *arg, const struct report_metric *m)
{
	const struct adding *to = arg;
	struct adding in;
	struct agg *c = kid(to->a, m->name);

	if (!c)
		return 0;
	if (m->has_value) {
		add_number(c, m->value);
	} else if (m->kind == REPORT_METRIC_MAPPING && to->depth < STATS_DEPTH_MAX) {
		c->is_map = true;
		in = (struct adding){ c, to->depth + 1 };
		report_metrics_each(m->node, add_metric, &in);
	}
	return 0;
}

/* Add the metrics of one report (a JSON object, as stored) to the day's
 * root. Text that is not a JSON object adds nothing. */
static void add_metrics(struct agg *root, const char *metrics)
{
	struct adding to = { root, 1 };

	root->is_map = true;
	report_metrics_each_text(metrics, add_metric, &to);
}

static bool all_numeric(const struct agg *a)
{
	for (size_t i = 0; i < a->nkids; i++) {
		char *end;
		strtod(a->kids[i].key, &end);
		if (*end)
			return false;
	}
	return true;
}

static int by_number(const void *x, const void *y)
{
	double a = strtod(((const struct agg *)x)->key, NULL);
	double b = strtod(((const struct agg *)y)->key, NULL);
	return a < b ? -1 : a > b;
}

static int by_name(const void *x, const void *y)
{
	return strcmp(((const struct agg *)x)->key, ((const struct agg *)y)->key);
}

static void sort_kids(struct agg *a)
{
	if (a->nkids > 1)
		qsort(a->kids, a->nkids, sizeof a->kids[0], all_numeric(a) ? by_number : by_name);
	for (size_t i = 0; i < a->nkids; i++)
		sort_kids(&a->kids[i]);
}

/* The value of a mapping entry: its sum over the day's reports. */
static double entry_value(const struct agg *a)
{
	return a->sum;
}

static void num(struct sbuf *b, double v)
{
	if (v == floor(v) && fabs(v) < 1e15)
		sb_printf(b, "%.0f", v);
	else
		sb_printf(b, "%.10g", v);
}

/* --- text ------------------------------------------------------------------ */

/* A metric's number: a duration (metric_is_duration) in human units. */
static void metric_num(struct sbuf *b, const struct agg *m, double v)
{
	char s[48];

	if (metric_is_duration(m->key))
		sb_printf(b, "%s", fmt_ns(v, false, s, sizeof s));
	else
		num(b, v);
}

static void bars(struct sbuf *b, const struct agg *a, int indent, int width, bool utf8)
{
	size_t keyw = 0, valw = 0;
	double max = 0;
	char v[64];

	for (size_t i = 0; i < a->nkids; i++) {
		size_t n = strlen(a->kids[i].key);
		if (n > keyw)
			keyw = n;
		snprintf(v, sizeof v, "%.10g", entry_value(&a->kids[i]));
		if (strlen(v) > valw)
			valw = strlen(v);
		if (entry_value(&a->kids[i]) > max)
			max = entry_value(&a->kids[i]);
	}
	int avail = (width > 0 ? width : 80) - indent - (int)keyw - 4 - (int)valw;
	if (avail < 10)
		avail = 10;
	for (size_t i = 0; i < a->nkids; i++) {
		const struct agg *e = &a->kids[i];
		if (e->is_map) {
			sb_printf(b, "%*s%s:\n", indent, "", e->key);
			bars(b, e, indent + 4, width, utf8);
			continue;
		}
		double val = entry_value(e);
		int len = max > 0 && val > 0 ? (int)lround(val / max * avail) : 0;
		if (val > 0 && len == 0)
			len = 1;
		sb_printf(b, "%*s%*s | ", indent, "", (int)keyw, e->key);
		for (int k = 0; k < len; k++)
			sb_printf(b, "%s", utf8 ? "\u2588" : "#");
		sb_printf(b, " ");
		num(b, val);
		sb_printf(b, "\n");
	}
}

static void text_day(struct sbuf *b, const struct day *d, int width, bool utf8)
{
	size_t namew = 0;

	sb_printf(b, "\n== %s  (%ld report%s)\n", d->date, d->reports, d->reports == 1 ? "" : "s");
	for (size_t i = 0; i < d->root.nkids; i++)
		if (strlen(d->root.kids[i].key) > namew)
			namew = strlen(d->root.kids[i].key);
	for (size_t i = 0; i < d->root.nkids; i++) {
		const struct agg *m = &d->root.kids[i];
		if (m->is_map) {
			sb_printf(b, "  %s  (mapping, %zu key%s)\n", m->key, m->nkids,
				  m->nkids == 1 ? "" : "s");
			bars(b, m, 4, width, utf8);
		} else if (m->n == 1) {
			sb_printf(b, "  %-*s = ", (int)namew, m->key);
			metric_num(b, m, m->sum);
			sb_printf(b, "\n");
		} else if (m->n > 1) {
			sb_printf(b, "  %-*s   n %ld  min ", (int)namew, m->key, m->n);
			metric_num(b, m, m->min);
			sb_printf(b, "  mean ");
			metric_num(b, m, m->sum / (double)m->n);
			sb_printf(b, "  max ");
			metric_num(b, m, m->max);
			sb_printf(b, "  sum ");
			metric_num(b, m, m->sum);
			sb_printf(b, "\n");
		} else {
			sb_printf(b, "  %-*s = UNDEFINED\n", (int)namew, m->key);
		}
	}
}

/* --- JSON ------------------------------------------------------------------ */

static void json_entries(struct sbuf *b, const struct agg *a)
{
	sb_add(b, "{", 1);
	for (size_t i = 0; i < a->nkids; i++) {
		if (i)
			sb_add(b, ",", 1);
		sb_json_str(b, a->kids[i].key);
		sb_add(b, ":", 1);
		if (a->kids[i].is_map)
			json_entries(b, &a->kids[i]);
		else
			num(b, entry_value(&a->kids[i]));
	}
	sb_add(b, "}", 1);
}

static void json_day(struct sbuf *b, const struct day *d)
{
	sb_printf(b, "{\"day\":\"%s\",\"reports\":%ld,\"metrics\":{", d->date, d->reports);
	for (size_t i = 0; i < d->root.nkids; i++) {
		const struct agg *m = &d->root.kids[i];
		if (i)
			sb_add(b, ",", 1);
		sb_json_str(b, m->key);
		if (m->is_map) {
			sb_printf(b, ":{\"kind\":\"mapping\",\"values\":");
			json_entries(b, m);
			sb_add(b, "}", 1);
		} else if (m->n) {
			sb_printf(b, ":{\"kind\":\"number\",%s\"n\":%ld,\"min\":",
				  metric_is_duration(m->key) ? "\"unit\":\"ns\"," : "", m->n);
			num(b, m->min);
			sb_printf(b, ",\"mean\":");
			num(b, m->sum / (double)m->n);
			sb_printf(b, ",\"max\":");
			num(b, m->max);
			sb_printf(b, ",\"sum\":");
			num(b, m->sum);
			sb_add(b, "}", 1);
		} else {
			sb_printf(b, ":{\"kind\":\"undefined\"}");
		}
	}
	sb_add(b, "}}", 2);
}

/* --- the command ------------------------------------------------------------ */

static bool valid_day(const char *s, double *from)
{
	struct tm tm = { 0 };
	char *end;

	if (strlen(s) != 10)
		return false;
	end = strptime(s, "%Y-%m-%d", &tm);
	if (!end || *end)
		return false;
	*from = (double)timegm(&tm);
	return true;
}

/* The days being gathered. */
struct gather {
	struct day *days;         /* the days, in time order */
	size_t ndays;             /* days gathered */
	size_t cap;               /* days allocated */
	long total;               /* reports gathered */
	int rc;                   /* 0, or -ENOMEM */
};

/* Add one report to its day; stop at STATS_DAYS_MAX days or out of memory. */
static int gather_report(void *arg, const struct store_stats_row *row)
{
	struct gather *g = arg;
	char date[40];
	struct day *d;

	iso_time(row->time, date, sizeof date);
	date[10] = '\0';
	if (!g->ndays || strcmp(g->days[g->ndays - 1].date, date)) {
		if (g->ndays >= STATS_DAYS_MAX)
			return 1;
		if (g->ndays == g->cap) {
			size_t ncap = g->cap ? g->cap * 2 : 8;
			struct day *n = realloc(g->days, ncap * sizeof *n);
			if (!n) {
				g->rc = -ENOMEM;
				return 1;
			}
			g->days = n;
			g->cap = ncap;
		}
		memset(&g->days[g->ndays], 0, sizeof g->days[0]);
		snprintf(g->days[g->ndays].date, sizeof g->days[g->ndays].date, "%.10s", date);
		g->ndays++;
	}
	d = &g->days[g->ndays - 1];
	d->reports++;
	g->total++;
	if (row->metrics)
		add_metrics(&d->root, row->metrics);
	return 0;
}

int stats_run(struct tmon *tm, const struct ctl_request *r, const char *prog, const char *assertion,
	      const char *day, struct evbuffer *out, char *err, size_t errlen)
{
	struct gather g = { 0 };
	struct day *days;
	size_t ndays;
	struct sbuf b = { 0 };
	double from = 0;
	long total;
	int rc = 0;

	if (day && !valid_day(day, &from)) {
		snprintf(err, errlen, "--day: '%.40s' is not a date YYYY-MM-DD", day);
		return -EINVAL;
	}
	rc = store_stats_rows(tm->store, prog, assertion, day != NULL, from, CTL_LIST_MAX,
			      gather_report, &g, err, errlen);
	days = g.days;
	ndays = g.ndays;
	total = g.total;
	if (rc < 0)
		goto out;
	if (g.rc < 0) {
		rc = g.rc;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* metrics stay in the spec's order; mapping keys are sorted */
	for (size_t i = 0; i < ndays; i++)
		for (size_t k = 0; k < days[i].root.nkids; k++)
			sort_kids(&days[i].root.kids[k]);
	if (r->json) {
		sb_printf(&b, "{\"prog\":");
		sb_json_str(&b, prog);
		sb_printf(&b, ",\"assert\":");
		sb_json_str(&b, assertion);
		sb_printf(&b, ",\"days\":[");
		for (size_t i = 0; i < ndays; i++) {
			if (i)
				sb_add(&b, ",", 1);
			json_day(&b, &days[i]);
		}
		sb_printf(&b, "]}\n");
	} else if (!total) {
		sb_printf(&b, "no reports of \"%s\" for %s%s%s\n", assertion, prog,
			  day ? " on " : "", day ? day : "");
	} else {
		sb_printf(&b, "%s, \"%s\": %ld report%s on %zu day%s (UTC)\n", prog, assertion, total,
			  total == 1 ? "" : "s", ndays, ndays == 1 ? "" : "s");
		for (size_t i = 0; i < ndays; i++)
			text_day(&b, &days[i], r->width, r->utf8);
	}
	if (b.oom) {
		snprintf(err, errlen, "out of memory");
		sb_free(&b);
		rc = -ENOMEM;
		goto out;
	}
	if (b.s)
		evbuffer_add(out, b.s, b.len);
	sb_free(&b);
out:
	for (size_t i = 0; i < ndays; i++)
		agg_free(&days[i].root);
	free(days);
	return rc;
}
