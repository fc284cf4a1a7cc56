/* Text helpers (see text.h). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cmon/jsonstr.h"
#include "json.h"
#include "report.h"
#include "text.h"

#define RENDER_DEPTH_MAX 8        /* nesting shown before "..." */

static bool reserve(struct sbuf *b, size_t more)
{
	size_t need = b->len + more + 1, ncap;
	char *g;

	if (b->oom)
		return false;
	if (need <= b->cap)
		return true;
	ncap = b->cap ? b->cap : 256;
	while (ncap < need)
		ncap *= 2;
	g = realloc(b->s, ncap);
	if (!g) {
		b->oom = true;
		return false;
	}
	b->s = g;
	b->cap = ncap;
	return true;
}

void sb_add(struct sbuf *b, const char *p, size_t n)
{
	if (!reserve(b, n))
		return;
	memcpy(b->s + b->len, p, n);
	b->len += n;
	b->s[b->len] = '\0';
}

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static void put_sbuf(void *ctx, const char *p, size_t n)
{
	sb_add(ctx, p, n);
}

/* (the suite's one JSON string writer, cmon/jsonstr.h) */
void sb_json_str(struct sbuf *b, const char *s)
{
	cmon_json_string(s, put_sbuf, b);
}

char *sb_take(struct sbuf *b)
{
	char *s = b->s ? b->s : strdup("");

	b->s = NULL;
	b->len = b->cap = 0;
	b->oom = false;
	return s;
}

void sb_free(struct sbuf *b)
{
	free(b->s);
	b->s = NULL;
	b->len = b->cap = 0;
}

char *iso_time(double t, char *out, size_t size)
{
	time_t s = (time_t)t;
	struct tm tm;

	gmtime_r(&s, &tm);
	strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return out;
}

/* A number as the metrics have always been shown: an integer as it is,
 * other numbers with 15 significant digits and always a decimal point or
 * an exponent ("2.5", "1000.0", "1.0e+20"; "Inf"). */
static void render_number(const struct json *v, struct sbuf *b)
{
	char s[48], *e;
	int64_t i;

	if (json_int64(v, &i)) {
		sb_printf(b, "%" PRId64, i);
		return;
	}
	if (isinf(v->num)) {
		sb_printf(b, "%sInf", v->num < 0 ? "-" : "");
		return;
	}
	snprintf(s, sizeof s, "%.15g", v->num == 0 ? 0.0 : v->num);   /* no "-0" */
	if (strchr(s, '.')) {
		sb_printf(b, "%s", s);
		return;
	}
	e = strchr(s, 'e');
	if (e)
		sb_printf(b, "%.*s.0%s", (int)(e - s), s, e);
	else
		sb_printf(b, "%s.0", s);
}

static void render_value(const struct json *v, struct sbuf *b, int depth);

/* Every member of the object or array `v`, as "k -> v" or "v". */
static void render_members(const struct json *v, struct sbuf *b, int depth)
{
	bool object = v->kind == JSON_OBJECT;

	if (depth >= RENDER_DEPTH_MAX) {
		sb_add(b, "...", 3);
		return;
	}
	for (const struct json *m = v->kids; m; m = m->next) {
		if (m != v->kids)
			sb_add(b, object ? ", " : ",", object ? 2 : 1);
		if (object)
			sb_printf(b, "%s -> ", m->key);
		render_value(m, b, depth + 1);
	}
}

static void render_value(const struct json *v, struct sbuf *b, int depth)
{
	switch (v->kind) {
	case JSON_NULL:
		sb_add(b, "UNDEFINED", 9);
		break;
	case JSON_OBJECT:
		sb_add(b, "(", 1);
		render_members(v, b, depth);
		sb_add(b, ")", 1);
		break;
	case JSON_ARRAY:
		sb_add(b, "[", 1);
		render_members(v, b, depth);
		sb_add(b, "]", 1);
		break;
	case JSON_STRING:
		sb_printf(b, "\"%s\"", v->str);
		break;
	case JSON_TRUE:
		sb_add(b, "true", 4);
		break;
	case JSON_FALSE:
		sb_add(b, "false", 5);
		break;
	case JSON_NUMBER:
		render_number(v, b);
		break;
	}
}

bool metric_is_duration(const char *name)
{
	static const char *const exact[] = { "elapsed", "wait" };
	static const char *const suffix[] = { "time", "duration", "latency" };
	static const char *const other_unit[] = { "ms", "us", "sec", "secs", "s", "min" };
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
		if (!strcasecmp(name, exact[i]))
			return true;
	if (n > 3 && !strcmp(name + n - 3, "_ns"))
		return true;
	/* a name that says another unit first (Lectern's msTime, sec_time) is not
	 * in nanoseconds */
	for (size_t i = 0; i < sizeof other_unit / sizeof other_unit[0]; i++) {
		size_t k = strlen(other_unit[i]);
		if (n > k && !strncmp(name, other_unit[i], k) &&
		    ((name[k] >= 'A' && name[k] <= 'Z') || name[k] == '_'))
			return false;
	}
	for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
		size_t k = strlen(suffix[i]);
		if (n >= k && !strcasecmp(name + n - k, suffix[i]))
			return true;
	}
	return false;
}

char *fmt_ns(double ns, bool sign, char *out, size_t size)
{
	static const struct { double div; const char *name; } unit[] = {
		{ 1, "ns" }, { 1e3, "\u00b5s" }, { 1e6, "ms" }, { 1e9, "s" },
	};
	const char *plus = sign && ns > 0 ? "+" : "";
	size_t u = 0;
	double x;

	if (!isfinite(ns)) {
		snprintf(out, size, "%s%g ns", plus, ns);
		return out;
	}
	while (u + 1 < sizeof unit / sizeof unit[0] && fabs(ns) >= unit[u + 1].div * 0.99995)
		u++;
	x = ns / unit[u].div;
	if (u == 0 && x == floor(x))
		snprintf(out, size, "%s%.0f ns", plus, x);
	else
		snprintf(out, size, "%s%.*f %s", plus, fabs(x) < 9.995 ? 2 : 1, x, unit[u].name);
	return out;
}

/* A duration metric's value: a number or a triple [v, p, m] of numbers in
 * units; false (nothing added) for anything else. */
static bool render_duration(const struct report_metric *m, struct sbuf *b)
{
	char s[3][48];

	if (m->kind == REPORT_METRIC_NUMBER) {
		sb_printf(b, "%s", fmt_ns(m->value, false, s[0], sizeof s[0]));
		return true;
	}
	if (m->kind != REPORT_METRIC_TRIPLE || isnan(m->value) || isnan(m->plus) ||
	    isnan(m->minus))
		return false;
	fmt_ns(m->value, false, s[0], sizeof s[0]);
	fmt_ns(m->plus, false, s[1], sizeof s[1]);
	fmt_ns(m->minus, false, s[2], sizeof s[2]);
	if (m->plus == 0 && m->minus == 0)
		sb_printf(b, "%s", s[0]);
	else if (m->plus == m->minus)
		sb_printf(b, "%s (\u00b1%s)", s[0], s[1]);
	else
		sb_printf(b, "%s (+%s -%s)", s[0], s[1], s[2]);
	return true;
}

/* Rendering the metrics: the text so far, and whether in units. */
struct rendering {
	struct sbuf b;            /* "name = value, ..." */
	bool units;               /* durations in human units */
	bool first;               /* nothing rendered yet */
};

static int render_metric(void *arg, const struct report_metric *m)
{
	struct rendering *r = arg;

	if (!r->first)
		sb_add(&r->b, ", ", 2);
	r->first = false;
	sb_printf(&r->b, "%s = ", m->name);
	if (!r->units || !metric_is_duration(m->name) || !render_duration(m, &r->b))
		render_value(m->node, &r->b, 0);
	return 0;
}

static char *render(const char *json, bool units)
{
	struct rendering r = { .units = units, .first = true };

	if (report_metrics_each_text(json, render_metric, &r) < 0) {
		sb_free(&r.b);
		return strdup("");
	}
	if (r.b.oom) {
		sb_free(&r.b);
		return NULL;
	}
	return sb_take(&r.b);
}

char *render_metrics(const char *json)
{
	return render(json, true);
}

char *render_metrics_plain(const char *json)
{
	return render(json, false);
}

/* A duration's unit, as a member of the units object. */
static int unit_of(void *arg, const struct report_metric *m)
{
	struct rendering *r = arg;

	if (!metric_is_duration(m->name))
		return 0;
	if (!r->first)
		sb_add(&r->b, ",", 1);
	r->first = false;
	sb_json_str(&r->b, m->name);
	sb_add(&r->b, ":\"ns\"", 5);
	return 0;
}

char *metrics_units_json(const char *json)
{
	struct rendering r = { .first = true };

	sb_add(&r.b, "{", 1);
	report_metrics_each_text(json, unit_of, &r);
	sb_add(&r.b, "}", 1);
	if (r.b.oom) {
		sb_free(&r.b);
		return NULL;
	}
	return sb_take(&r.b);
}

void table_init(struct table *t, const char *const *header)
{
	memset(t, 0, sizeof *t);
	while (header[t->ncols])
		t->ncols++;
	table_row(t, header);
}

void table_row(struct table *t, const char *const *cells)
{
	if ((t->nrows + 1) * t->ncols > t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : t->ncols * 16;
		char **g = realloc(t->cells, ncap * sizeof *g);
		if (!g)
			return;
		t->cells = g;
		t->cap = ncap;
	}
	for (size_t i = 0; i < t->ncols; i++)
		t->cells[t->nrows * t->ncols + i] = strdup(cells[i] ? cells[i] : "");
	t->nrows++;
}

/* Display width of UTF-8 text (one column per code point). */
static size_t text_width(const char *s)
{
	size_t w = 0;

	for (; s && *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

void table_print(struct table *t, struct sbuf *out, int width)
{
	size_t *w = calloc(t->ncols, sizeof *w);

	if (!w)
		goto out;
	for (size_t r = 0; r < t->nrows; r++)
		for (size_t c = 0; c < t->ncols; c++) {
			size_t n = text_width(t->cells[r * t->ncols + c]);
			if (n > w[c])
				w[c] = n;
		}
	for (size_t r = 0; r < t->nrows; r++) {
		size_t used = 0, start = out->len;
		for (size_t c = 0; c < t->ncols; c++) {
			const char *cell = t->cells[r * t->ncols + c] ? t->cells[r * t->ncols + c] : "";
			bool last = c + 1 == t->ncols;
			sb_printf(out, "%s", cell);
			used += text_width(cell);
			if (!last)
				for (size_t k = text_width(cell); k < w[c] + 2; k++, used++)
					sb_add(out, " ", 1);
		}
		/* cut an over-long last column to the terminal width */
		if (width > 0 && used > (size_t)width && out->s) {
			size_t cols = 0, i = start;
			while (i < out->len && cols < (size_t)width - 1) {
				if (((unsigned char)out->s[i] & 0xc0) != 0x80)
					cols++;
				i++;
			}
			while (i < out->len && ((unsigned char)out->s[i] & 0xc0) == 0x80)
				i++;
			out->len = i;
			out->s[i] = '\0';
			sb_printf(out, "%s", "+");
		}
		sb_add(out, "\n", 1);
	}
out:
	for (size_t i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(w);
	memset(t, 0, sizeof *t);
}
