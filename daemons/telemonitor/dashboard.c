/* The web dashboard (see dashboard.h): the page with its tables rendered
 * in, the instance and failure pages, the time series its charts draw,
 * and the few static files beside it.
 *
 * index.html is a template: each marker <!--cmon:NAME--> is replaced by
 * what NAME renders (instances, failures, generated); the rest is copied
 * as is. The tables are rendered from the API's own JSON, read back with
 * json.c; the instance and failure pages likewise, with the instance's
 * row and the log window read from the store. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/http.h>

#include "control.h"
#include "dashboard.h"
#include "html.h"
#include "http.h"
#include "json.h"
#include "sketch.h"
#include "store_read.h"
#include "text.h"

#ifndef CMON_WEBDIR
#define CMON_WEBDIR "/usr/local/share/cmon/web"
#endif
#ifndef CMON_CHARTJS
#define CMON_CHARTJS "/usr/share/javascript/chart.js/chart.min.js"
#endif

#define DASH_STR_(x) #x
#define DASH_STR(x) DASH_STR_(x)   /* a number as a string literal */
#define DASH_MARK "<!--cmon:"           /* a template marker: <!--cmon:NAME--> */
#define DASH_MARK_END "-->"
#define DASH_WORDS 12                   /* words of a command the pages run */
#define DASH_FILTER_MAX 200             /* bytes of a filter's value */
#define DASH_DAY 86400.0                /* a chart's default time range, seconds */

/* What a page or a series was asked for: the id of its path, and the
 * query's parameters (a "" string or has_x false: not given). */
struct dash_req {
	struct tmon *tm;                /* the service */
	uint64_t id;                    /* /instances/ID, /failures/ID (0: none) */
	char prog[DASH_FILTER_MAX + 1]; /* prog= */
	char assertion[DASH_FILTER_MAX + 1]; /* assert= */
	char type[DASH_FILTER_MAX + 1]; /* type= (interval type) */
	char since_text[DASH_FILTER_MAX + 1]; /* since= as given */
	char until_text[DASH_FILTER_MAX + 1]; /* until= as given */
	bool has_since, has_until;      /* since, until were given */
	double since, until;            /* ...as Unix time */
	int64_t step;                   /* step= seconds (0: not given) */
	enum store_kind kind;           /* kind= (default all) */
};

/* A static file: the URL path, where it is, its content type. */
struct dash_file {
	const char *path;               /* the URL path */
	const char *name;               /* in the web directory, or NULL ... */
	const char *abs;                /* ... an absolute path */
	const char *type;               /* Content-Type */
};

static const struct dash_file files[] = {
	{ "/", "index.html", NULL, "text/html; charset=utf-8" },
	{ "/index.html", "index.html", NULL, "text/html; charset=utf-8" },
	{ "/static/dashboard.js", "dashboard.js", NULL, "text/javascript; charset=utf-8" },
	{ "/static/dashboard.css", "dashboard.css", NULL, "text/css; charset=utf-8" },
	{ "/static/chart.js", NULL, CMON_CHARTJS, "text/javascript; charset=utf-8" },
};

static const struct dash_file *file_of(const char *path)
{
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
		if (!strcmp(files[i].path, path))
			return &files[i];
	return NULL;
}

static bool has_index(const char *dir)
{
	char p[PATH_MAX];

	if (!dir || !*dir || snprintf(p, sizeof p, "%s/index.html", dir) >= (int)sizeof p)
		return false;
	return access(p, R_OK) == 0;
}

const char *dash_webdir(const char *opt)
{
	if (opt)
		return has_index(opt) ? opt : NULL;
	if (has_index(CMON_WEBDIR))
		return CMON_WEBDIR;
#ifdef CMON_WEB_SRCDIR
	if (has_index(CMON_WEB_SRCDIR))
		return CMON_WEB_SRCDIR;
#endif
	return NULL;
}

/* Read a regular file of at most DASH_FILE_MAX bytes into `b`. */
static int read_file(const char *path, struct sbuf *b, char *err, size_t errlen)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	char chunk[16384];
	ssize_t n;

	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc == -ENOENT || rc == -ENOTDIR ? -ENOENT : rc;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)DASH_FILE_MAX) {
		snprintf(err, errlen, "%s: not a regular file of at most %u bytes", path,
			 DASH_FILE_MAX);
		rc = -EFBIG;
		goto out_close;
	}
	while ((n = read(fd, chunk, sizeof chunk)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || b->len + (size_t)n > DASH_FILE_MAX) {
			snprintf(err, errlen, "%s: %s", path, n < 0 ? strerror(errno) : "too large");
			rc = n < 0 ? -EIO : -EFBIG;
			goto out_close;
		}
		sb_add(b, chunk, (size_t)n);
	}
	if (b->oom) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
	}
out_close:
	close(fd);
	return rc;
}

/* Run a telemonctl command with JSON output (the API's answer) and take
 * its text (caller frees), or NULL with `err`. */
static char *api_json(struct tmon *tm, const char *const *words, bool newest_first, char *err,
		      size_t errlen)
{
	struct ctl_request r = { .json = true, .newest_first = newest_first };
	struct evbuffer *out = evbuffer_new();
	char *argv[DASH_WORDS], *text = NULL;
	size_t len;

	if (!out) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	while (words[r.argc] && r.argc < DASH_WORDS) {
		argv[r.argc] = (char *)words[r.argc];
		r.argc++;
	}
	r.argv = argv;
	if (commands_run(tm, &r, out, err, errlen) < 0)
		goto out_free;
	len = evbuffer_get_length(out);
	text = malloc(len + 1);
	if (!text) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	evbuffer_remove(out, text, len);
	text[len] = '\0';
out_free:
	evbuffer_free(out);
	return text;
}

/* An API answer that is a JSON array of objects, taken apart. */
struct api_rows {
	char *json;               /* the answer's text */
	struct json *root;        /* its tree */
	const struct json **row;  /* its elements, [n] */
	size_t n;                 /* how many */
};

/* Run the command `words` (its JSON answer) and take its rows (`what` names
 * them in a message). 0 (free with api_rows_free), or -EIO with `err`. */
static int api_rows_get(struct tmon *tm, const char *const *words, bool newest_first,
			const char *what, struct api_rows *a, char *err, size_t errlen)
{
	char why[128];
	size_t i = 0;

	memset(a, 0, sizeof *a);
	a->json = api_json(tm, words, newest_first, err, errlen);
	if (!a->json)
		return -EIO;
	a->root = json_parse(a->json, strlen(a->json), why, sizeof why);
	if (!a->root || a->root->kind != JSON_ARRAY) {
		snprintf(err, errlen, "cannot read the %s: %s", what,
			 a->root ? "not a JSON array" : why);
		json_free(a->root);
		free(a->json);
		return -EIO;
	}
	a->row = malloc((a->root->count ? a->root->count : 1) * sizeof *a->row);
	if (!a->row) {
		snprintf(err, errlen, "out of memory");
		json_free(a->root);
		free(a->json);
		return -EIO;
	}
	for (const struct json *e = a->root->kids; e; e = e->next)
		a->row[i++] = e;
	a->n = i;
	return 0;
}

static void api_rows_free(struct api_rows *a)
{
	free(a->row);
	json_free(a->root);
	free(a->json);
	memset(a, 0, sizeof *a);
}

/* Member `key` of a row as text: "" when absent or null. */
static const char *col(const struct json *row, const char *key)
{
	const char *s = json_text(json_get(row, key));

	return s ? s : "";
}

/* Member `key` of a row as an integer: 0 when absent or null. */
static long long num(const struct json *row, const char *key)
{
	return (long long)json_as_int(json_get(row, key));
}

/* Member `key` of a row is there and not null. */
static bool given(const struct json *row, const char *key)
{
	const struct json *v = json_get(row, key);

	return v && v->kind != JSON_NULL;
}

/* <!--cmon:instances-->: the table of /api/v1/instances?all=1 (of the
 * program the filter names). */
static int render_instances(const struct dash_req *q, struct sbuf *b, char *err, size_t errlen)
{
	struct tmon *tm = q->tm;
	static const char *const words[] = { "instances", "all=1", "limit=" DASH_STR(DASH_INSTANCES),
					     NULL };
	struct api_rows a;
	int shown = 0;

	if (api_rows_get(tm, words, false, "instances", &a, err, errlen) < 0)
		return -EIO;
	sb_printf(b, "<table id=\"instances\">\n<thead><tr><th>ID</th><th>Program</th>"
		  "<th>Machine</th><th>PID</th><th>State</th><th>Records</th><th>Lost</th>"
		  "<th>Gaps</th><th>Loss</th><th>Failures</th><th>Seen</th><th>Ended</th>"
		  "<th>Status</th></tr></thead>\n<tbody>\n");
	for (size_t i = a.n; i-- > 0;) {       /* newest first */
		const struct json *r = a.row[i];
		long long recs = num(r, "records"), lost = num(r, "lost");
		char loss[32];
		if (*q->prog && strcmp(q->prog, col(r, "prog")))
			continue;
		snprintf(loss, sizeof loss, "%.2f%%",
			 recs + lost > 0 ? 100.0 * (double)lost / (double)(recs + lost) : 0.0);
		sb_printf(b, "<tr id=\"instance-%lld\" class=\"state-", num(r, "id"));
		html_text(b, col(r, "state"));
		sb_printf(b, "\">");
		sb_printf(b, "<td class=\"num\"><a href=\"/instances/%lld\">%lld</a></td>",
			  num(r, "id"), num(r, "id"));
		html_cell(b, NULL, col(r, "prog"));
		html_cell(b, NULL, col(r, "machine"));
		html_cell_num(b, num(r, "pid"));
		html_cell(b, "state", col(r, "state"));
		html_cell_num(b, recs);
		html_cell_num(b, lost);
		html_cell_num(b, num(r, "gaps"));
		html_cell(b, lost ? "num loss" : "num", loss);
		html_cell_num(b, num(r, "failures"));
		html_cell(b, "time", col(r, "seen"));
		html_cell(b, "time", col(r, "ended"));
		html_cell(b, NULL, col(r, "status"));
		sb_printf(b, "</tr>\n");
		shown++;
	}
	if (!shown)
		sb_printf(b, "<tr class=\"empty\"><td colspan=\"13\">no instances yet</td></tr>\n");
	sb_printf(b, "</tbody>\n</table>\n");
	api_rows_free(&a);
	return 0;
}

/* Add word "KEY=VALUE" to `words` (at *n, a NULL after it) when `value`
 * is given, its text kept in `store`. */
static void add_filter(const char **words, size_t *n, char *store, size_t size, const char *key,
		       const char *value)
{
	if (!value || !*value || *n + 1 >= DASH_WORDS)
		return;
	snprintf(store, size, "%s=%s", key, value);
	words[(*n)++] = store;
	words[*n] = NULL;
}

/* A failures (or reports) table: `id` the table's id, `kind` "failure" or
 * "report", `inst` only this instance's (0: any), filtered by `q`. */
static int failure_table(const struct dash_req *q, struct sbuf *b, const char *id,
			 const char *kind, uint64_t inst, int limit, char *err, size_t errlen)
{
	const char *words[DASH_WORDS + 1] = { "failures" };
	char w[8][DASH_FILTER_MAX + 16];
	size_t n = 1;
	struct api_rows a;
	int shown = 0;

	snprintf(w[0], sizeof w[0], "%s", kind);
	add_filter(words, &n, w[1], sizeof w[1], "kind", w[0]);
	snprintf(w[0], sizeof w[0], "%d", limit);
	add_filter(words, &n, w[2], sizeof w[2], "limit", w[0]);
	add_filter(words, &n, w[3], sizeof w[3], "prog", q->prog);
	add_filter(words, &n, w[4], sizeof w[4], "assert", q->assertion);
	if (q->has_since) {
		snprintf(w[0], sizeof w[0], "%.3f", q->since);
		add_filter(words, &n, w[5], sizeof w[5], "since", w[0]);
	}
	if (q->has_until) {
		snprintf(w[0], sizeof w[0], "%.3f", q->until);
		add_filter(words, &n, w[6], sizeof w[6], "until", w[0]);
	}
	if (inst) {
		snprintf(w[0], sizeof w[0], "%llu", (unsigned long long)inst);
		add_filter(words, &n, w[7], sizeof w[7], "instance", w[0]);
	}
	if (api_rows_get(q->tm, words, true, "failures", &a, err, errlen) < 0)
		return -EIO;
	sb_printf(b, "<table id=\"%s\" class=\"failures\">\n<thead><tr><th>ID</th>"
		  "<th>Time (UTC)</th><th>Program</th><th>Machine</th><th>PID</th>"
		  "<th>Assertion</th><th>Line</th><th>Metrics</th><th>Flags</th><th>Instance</th>"
		  "</tr></thead>\n<tbody>\n", id);
	for (size_t i = 0; i < a.n; i++) {
		const struct json *r = a.row[i], *m = json_get(r, "metrics");
		long long fid = num(r, "id");
		bool labelled = given(r, "assert");
		char *mtext = m && m->kind != JSON_NULL ? json_source_dup(m) : NULL;
		char *metrics = render_metrics(mtext);
		const char *result = col(r, "result"), *fkind = col(r, "kind");
		char flags[96];
		snprintf(flags, sizeof flags, "%s%s%s%s%s",
			 !strcmp(result, "inconclusive") ? "inconclusive " : "",
			 !strcmp(fkind, "overdue") ? "overdue " : "",
			 num(r, "report") ? "report " : "",
			 given(r, "silenced") ? "silenced " : "",
			 num(r, "acked") ? "acked" : "");
		sb_printf(b, "<tr id=\"failure-%lld\" data-id=\"%lld\" data-instance=\"%lld\""
			  " data-prog=\"", fid, fid, num(r, "instance"));
		html_text(b, col(r, "prog"));
		sb_printf(b, "\" data-assert=\"");
		html_text(b, labelled ? col(r, "assert") : "");
		sb_printf(b, "\" data-report=\"%d\">", num(r, "report") ? 1 : 0);
		sb_printf(b, "<td class=\"num\"><a href=\"/failures/%lld\">%lld</a></td>", fid, fid);
		html_cell(b, "time", col(r, "time_iso"));
		html_cell(b, NULL, col(r, "prog"));
		html_cell(b, NULL, col(r, "machine"));
		html_cell_num(b, num(r, "pid"));
		html_cell(b, labelled ? "assert" : "assert unlabelled",
			  labelled ? col(r, "assert") : "(unlabelled)");
		html_cell_num(b, num(r, "line"));
		html_cell(b, "metrics", metrics ? metrics : "");
		html_cell(b, "flags", flags);
		sb_printf(b, "<td class=\"num\"><a href=\"/instances/%lld\">%lld</a></td>",
			  num(r, "instance"), num(r, "instance"));
		sb_printf(b, "</tr>\n");
		free(metrics);
		free(mtext);
		shown++;
	}
	if (!shown)
		sb_printf(b, "<tr class=\"empty\"><td colspan=\"10\">no %ss%s</td></tr>\n", kind,
			  *q->prog || *q->assertion || q->has_since || q->has_until
			  ? " match the filters" : "");
	sb_printf(b, "</tbody>\n</table>\n");
	api_rows_free(&a);
	return 0;
}

/* <!--cmon:failures-->: the newest failures (reports apart), filtered. */
static int render_failures(const struct dash_req *q, struct sbuf *b, char *err, size_t errlen)
{
	return failure_table(q, b, "failures", "failure", 0, DASH_FAILURES, err, errlen);
}

/* <!--cmon:reports-->: the newest reports of report assertions, filtered. */
static int render_reports(const struct dash_req *q, struct sbuf *b, char *err, size_t errlen)
{
	return failure_table(q, b, "reports", "report", 0, DASH_FAILURES, err, errlen);
}

/* The query string of the filters of `q` (for a series' URL), escaped
 * for an attribute, each parameter after "&amp;". */
static void filter_query(const struct dash_req *q, struct sbuf *b, bool with_assert)
{
	const char *keys[] = { "prog", "assert", "since", "until" };
	const char *vals[] = { q->prog, with_assert ? q->assertion : "", q->since_text,
			       q->until_text };

	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		char *e;
		if (!*vals[i] || !(e = evhttp_encode_uri(vals[i])))
			continue;
		sb_printf(b, "&amp;%s=", keys[i]);
		html_text(b, e);
		free(e);
	}
}

/* <!--cmon:series-->: the charts' figures; dashboard.js draws what their
 * data-src answers (the filters of the page apply). */
static int render_series(const struct dash_req *q, struct sbuf *b, char *err, size_t errlen)
{
	(void)err, (void)errlen;
	sb_printf(b, "<figure class=\"chart series\" id=\"failure-series\" data-series=\"failures\""
		  " data-src=\"/api/v1/failures/series?kind=failure");
	filter_query(q, b, true);
	sb_printf(b, "\"><h3>Failures per minute, by assertion</h3><div class=\"holder\">"
		  "<canvas></canvas></div></figure>\n");
	sb_printf(b, "<figure class=\"chart series\" id=\"duration-series\" data-series=\"durations\""
		  " data-src=\"/api/v1/durations/series?step=60");
	filter_query(q, b, false);
	sb_printf(b, "\"><h3>Interval durations per minute (p50, p90, p99)</h3><div class=\"holder\">"
		  "<canvas></canvas></div></figure>\n");
	return 0;
}

/* An <input> of the filter form. */
static void filter_input(struct sbuf *b, const char *name, const char *label, const char *value,
			 const char *hint)
{
	sb_printf(b, "<label>%s <input type=\"text\" name=\"%s\" value=\"", label, name);
	html_text(b, value);
	sb_printf(b, "\" placeholder=\"%s\"></label>\n", hint);
}

/* <!--cmon:filters-->: the filter form (GET /, so a filtered page is a
 * link to share) and the time ranges a click away. */
static int render_filters(const struct dash_req *q, struct sbuf *b, char *err, size_t errlen)
{
	static const struct { const char *label; double seconds; } ranges[] = {
		{ "last hour", 3600 }, { "last 24 h", DASH_DAY }, { "last 7 days", 7 * DASH_DAY },
	};
	double now = (double)time(NULL);

	(void)err, (void)errlen;
	sb_printf(b, "<form id=\"filters\" method=\"get\" action=\"/\">\n");
	filter_input(b, "prog", "Program", q->prog, "any");
	filter_input(b, "assert", "Assertion", q->assertion, "any");
	filter_input(b, "since", "Since", q->since_text, "2024-03-01T12:00");
	filter_input(b, "until", "Until", q->until_text, "now");
	sb_printf(b, "<button type=\"submit\">Filter</button> <a href=\"/\">clear</a>");
	for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
		char when[40], *p = evhttp_encode_uri(q->prog), *as = evhttp_encode_uri(q->assertion);
		iso_time(now - ranges[i].seconds, when, sizeof when);
		when[16] = '\0';        /* to the minute: 2024-03-01T12:00 */
		sb_printf(b, " · <a class=\"range\" href=\"/?since=%s", when);
		if (p && *p) {
			sb_printf(b, "&amp;prog=");
			html_text(b, p);
		}
		if (as && *as) {
			sb_printf(b, "&amp;assert=");
			html_text(b, as);
		}
		sb_printf(b, "\">%s</a>", ranges[i].label);
		free(p);
		free(as);
	}
	sb_printf(b, "\n</form>\n");
	return 0;
}

/* The history of one program as rows of the versions table, each after the
 * first named version with a link comparing it with the one before. */
static int render_history(struct tmon *tm, struct sbuf *b, const char *prog, char *err,
			  size_t errlen)
{
	char word[CMON_NAME_MAX + 8];
	const char *words[] = { "history", word, NULL };
	struct api_rows a;
	const char *prev = NULL;

	snprintf(word, sizeof word, "prog=%s", prog);
	if (api_rows_get(tm, words, false, "versions", &a, err, errlen) < 0)
		return -EIO;
	for (size_t i = 0; i < a.n; i++) {
		const struct json *r = a.row[i];
		bool named = given(r, "version");
		sb_printf(b, "<tr>");
		html_cell(b, NULL, prog);
		html_cell(b, named ? "version" : "version none", named ? col(r, "version") : "(none)");
		html_cell_num(b, num(r, "instances"));
		html_cell_num(b, num(r, "running"));
		html_cell(b, "time", col(r, "first_seen"));
		html_cell(b, "time", col(r, "last_seen"));
		html_cell_num(b, num(r, "records"));
		html_cell_num(b, num(r, "failures"));
		char *p = evhttp_encode_uri(prog), *v1 = prev ? evhttp_encode_uri(prev) : NULL,
		     *v2 = named ? evhttp_encode_uri(col(r, "version")) : NULL;
		if (p && v1 && v2) {
			sb_printf(b, "<td><a class=\"compare\" href=\"/api/v1/compare?prog=");
			html_text(b, p);
			sb_printf(b, "&amp;v1=");
			html_text(b, v1);
			sb_printf(b, "&amp;v2=");
			html_text(b, v2);
			sb_printf(b, "\">against ");
			html_text(b, prev);
			sb_printf(b, "</a></td>");
		} else {
			sb_printf(b, "<td></td>");
		}
		free(p);
		free(v1);
		free(v2);
		sb_printf(b, "</tr>\n");
		if (named)
			prev = col(r, "version");
	}
	api_rows_free(&a);
	return 0;
}

/* <!--cmon:versions-->: the versions of the programs of the instances
 * table (telemonctl history of each), with links to compare them. */
static int render_versions(const struct dash_req *q, struct sbuf *b, char *err, size_t errlen)
{
	struct tmon *tm = q->tm;
	static const char *const words[] = { "instances", "all=1", "limit=" DASH_STR(DASH_INSTANCES),
					     NULL };
	struct api_rows a;
	const char *seen[DASH_PROGRAMS];
	size_t nseen = 0;
	int rc = 0;

	if (api_rows_get(tm, words, false, "instances", &a, err, errlen) < 0)
		return -EIO;
	sb_printf(b, "<table id=\"versions\">\n<thead><tr><th>Program</th><th>Version</th>"
		  "<th>Instances</th><th>Running</th><th>First seen</th><th>Last seen</th>"
		  "<th>Records</th><th>Failures</th><th>Compare</th></tr></thead>\n<tbody>\n");
	for (size_t i = 0; i < a.n && rc == 0 && nseen < DASH_PROGRAMS; i++) {
		const char *prog = col(a.row[i], "prog");
		bool dup = !*prog || (*q->prog && strcmp(q->prog, prog));
		for (size_t k = 0; k < nseen && !dup; k++)
			dup = !strcmp(seen[k], prog);
		if (dup)
			continue;
		seen[nseen++] = prog;
		rc = render_history(tm, b, prog, err, errlen);
	}
	if (!nseen)
		sb_printf(b, "<tr class=\"empty\"><td colspan=\"9\">no programs yet</td></tr>\n");
	sb_printf(b, "</tbody>\n</table>\n");
	api_rows_free(&a);
	return rc;
}

/* <!--cmon:generated-->: when the page was rendered. */
static int render_generated(const struct dash_req *q, struct sbuf *b, char *err, size_t errlen)
{
	char when[40];

	(void)q, (void)err, (void)errlen;
	html_text(b, iso_time((double)time(NULL), when, sizeof when));
	return 0;
}

/* The template's markers and what renders them. */
static const struct {
	const char *name;
	int (*render)(const struct dash_req *q, struct sbuf *b, char *err, size_t errlen);
} marks[] = {
	{ "filters", render_filters },
	{ "series", render_series },
	{ "instances", render_instances },
	{ "failures", render_failures },
	{ "reports", render_reports },
	{ "versions", render_versions },
	{ "generated", render_generated },
};

/* Copy the template `t`, replacing its markers. */
static int render_page(const struct dash_req *q, const char *t, struct sbuf *out, char *err,
		       size_t errlen)
{
	const char *m;

	while ((m = strstr(t, DASH_MARK)) != NULL) {
		const char *name = m + strlen(DASH_MARK), *end = strstr(name, DASH_MARK_END);
		if (!end)
			break;
		sb_add(out, t, (size_t)(m - t));
		for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++) {
			if (strlen(marks[i].name) == (size_t)(end - name) &&
			    !strncmp(marks[i].name, name, (size_t)(end - name))) {
				int rc = marks[i].render(q, out, err, errlen);
				if (rc < 0)
					return rc;
			}
		}
		t = end + strlen(DASH_MARK_END);
	}
	sb_add(out, t, strlen(t));
	if (out->oom) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

/* --- the instance page ---------------------------------------------------------- */

/* A row of a two-column table: a heading and its text. */
static void kv(struct sbuf *b, const char *key, const char *value)
{
	sb_printf(b, "<tr><th>");
	html_text(b, key);
	sb_printf(b, "</th>");
	html_cell(b, NULL, value);
	sb_printf(b, "</tr>\n");
}

static void kv_num(struct sbuf *b, const char *key, long long n)
{
	char v[32];

	snprintf(v, sizeof v, "%lld", n);
	kv(b, key, v);
}

/* The instance's row, rendered as the page's summary table. */
struct inst_found {
	struct sbuf *b;           /* the page */
	bool found;               /* it was stored */
	char prog[CMON_NAME_MAX + 1]; /* its program (for the page's chart) */
};

static int instance_found(void *arg, const struct store_instance_row *in)
{
	struct inst_found *f = arg;
	struct sbuf *b = f->b;
	char when[40];

	f->found = true;
	snprintf(f->prog, sizeof f->prog, "%s", in->prog ? in->prog : "");
	sb_printf(b, "<table id=\"instance\" class=\"kv state-");
	html_text(b, in->state);
	sb_printf(b, "\">\n");
	kv_num(b, "ID", (long long)in->id);
	kv(b, "Program", in->prog);
	kv(b, "Machine", in->machine);
	kv_num(b, "PID", in->pid);
	kv(b, "State", in->state);
	kv(b, "Version", in->version ? in->version : "(none said)");
	kv(b, "First seen (UTC)", in->has_first_seen ? iso_time(in->first_seen, when, sizeof when)
						      : "-");
	kv(b, "Ended (UTC)", in->has_ended ? iso_time(in->ended, when, sizeof when) : "-");
	kv(b, "Status", in->status ? in->status : "");
	kv(b, "Snarflog", in->endpoint ? in->endpoint : "");
	kv_num(b, "Records", in->records);
	kv_num(b, "Bytes", in->bytes);
	kv_num(b, "Lost", in->lost);
	kv_num(b, "Gaps", in->gaps);
	kv_num(b, "Skipped", in->skipped);
	kv_num(b, "Unchecked", in->unchecked);
	kv_num(b, "Failures", in->failures);
	kv_num(b, "Tool restarts", in->tool_restarts);
	sb_printf(b, "</table>\n");
	return 1;
}

/* The instance's verdicts (/api/v1/instances/ID/verdicts) as a table, with
 * a count of each result first (unclosed and inconclusive included). */
static int render_verdicts(const struct dash_req *q, struct sbuf *b, char *err, size_t errlen)
{
	static const char *const results[] = { "pass", "fail", "undefined", "inconclusive",
					       "unclosed" };
	char id[24];
	const char *words[] = { "verdicts", id, NULL };
	long long count[sizeof results / sizeof results[0]] = { 0 };
	struct api_rows a;

	snprintf(id, sizeof id, "%llu", (unsigned long long)q->id);
	if (api_rows_get(q->tm, words, false, "verdicts", &a, err, errlen) < 0)
		return -EIO;
	for (size_t i = 0; i < a.n; i++)
		for (size_t k = 0; k < sizeof results / sizeof results[0]; k++)
			if (!strcmp(col(a.row[i], "result"), results[k]))
				count[k]++;
	sb_printf(b, "<p id=\"verdict-counts\">");
	for (size_t k = 0; k < sizeof results / sizeof results[0]; k++)
		sb_printf(b, "%s<span class=\"verdict result-%s\" data-result=\"%s\">%s: "
			  "<b>%lld</b></span>", k ? " · " : "", results[k], results[k], results[k],
			  count[k]);
	sb_printf(b, "</p>\n<table id=\"verdicts\">\n<thead><tr><th>Line</th><th>What</th>"
		  "<th>Result</th><th>Count</th><th>Time (UTC)</th><th>Records</th></tr></thead>\n"
		  "<tbody>\n");
	for (size_t i = 0; i < a.n; i++) {
		const struct json *r = a.row[i];
		bool unclosed = !strcmp(col(r, "kind"), "unclosed");
		char what[CMON_NAME_MAX + 600], recs[64] = "";
		snprintf(what, sizeof what, "%s%s%s", unclosed ? "interval " : "assertion ",
			 unclosed ? col(r, "type") : given(r, "assert") ? col(r, "assert") : "",
			 num(r, "partial") ? " (partial)" : "");
		if (given(r, "from_record"))
			snprintf(recs, sizeof recs, "%lld-%lld", num(r, "from_record"),
				 num(r, "to_record"));
		sb_printf(b, "<tr class=\"result-");
		html_text(b, col(r, "result"));
		sb_printf(b, "\">");
		html_cell_num(b, num(r, "line"));
		html_cell(b, NULL, what);
		html_cell(b, "result", col(r, "result"));
		html_cell_num(b, num(r, "count"));
		html_cell(b, "time", col(r, "time"));
		html_cell(b, NULL, recs);
		sb_printf(b, "</tr>\n");
	}
	if (!a.n)
		sb_printf(b, "<tr class=\"empty\"><td colspan=\"6\">no verdicts yet (a checker says "
			  "them when its log ends)</td></tr>\n");
	sb_printf(b, "</tbody>\n</table>\n");
	api_rows_free(&a);
	return 0;
}

/* The head of a page the telemonitor writes whole (not from a template). */
static void page_begin(struct sbuf *b, const char *page, const char *title)
{
	sb_printf(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
		  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
		  "<title>");
	html_text(b, title);
	sb_printf(b, " · CMon telemonitor</title>\n"
		  "<link rel=\"stylesheet\" href=\"/static/dashboard.css\">\n</head>\n"
		  "<body data-page=\"%s\">\n<header>\n<p class=\"meta\"><a href=\"/\">CMon "
		  "telemonitor</a> · <a href=\"/api/v1/status\">status</a></p>\n<h1>", page);
	html_text(b, title);
	sb_printf(b, "</h1>\n</header>\n<main>\n");
}

static void page_end(struct sbuf *b)
{
	sb_printf(b, "</main>\n<script src=\"/static/chart.js\"></script>\n"
		  "<script src=\"/static/dashboard.js\"></script>\n</body>\n</html>\n");
}

/* GET /instances/ID: what is known of one instance. -ENOENT if none. */
static int page_instance(const struct dash_req *q, struct sbuf *b, char *err, size_t errlen)
{
	struct sbuf head = { 0 };
	struct inst_found f = { .b = &head };
	struct dash_req pq = *q;
	char title[64];
	int rc;

	rc = store_instance_read(q->tm->store, q->id, instance_found, &f, err, errlen);
	if (rc < 0 || !f.found) {
		sb_free(&head);
		if (rc < 0)
			return -EIO;
		snprintf(err, errlen, "no instance %llu", (unsigned long long)q->id);
		return -ENOENT;
	}
	snprintf(title, sizeof title, "Instance %llu", (unsigned long long)q->id);
	page_begin(b, "instance", title);
	sb_printf(b, "<section id=\"summary\">\n");
	sb_add(b, head.s ? head.s : "", head.len);
	sb_free(&head);
	sb_printf(b, "<p><a href=\"/?prog=");
	char *p = evhttp_encode_uri(f.prog);
	html_text(b, p ? p : "");
	free(p);
	sb_printf(b, "\">the dashboard for this program</a> · <a href=\"/api/v1/instances/%llu/"
		  "verdicts\">verdicts as JSON</a></p>\n</section>\n",
		  (unsigned long long)q->id);
	sb_printf(b, "<section id=\"verdicts-section\">\n<h2>Verdicts</h2>\n");
	rc = render_verdicts(q, b, err, errlen);
	if (rc < 0)
		return rc;
	/* the charts and tables of its program's failures, this one's rows */
	memset(&pq, 0, sizeof pq);
	pq.tm = q->tm;
	snprintf(pq.prog, sizeof pq.prog, "%s", f.prog);
	sb_printf(b, "</section>\n<section id=\"charts-section\">\n<h2>Its program over the last "
		  "24 hours</h2>\n<div class=\"charts\">\n");
	render_series(&pq, b, err, errlen);
	sb_printf(b, "</div>\n</section>\n<section id=\"failures-section\">\n<h2>Failures</h2>\n");
	memset(pq.prog, 0, sizeof pq.prog);
	rc = failure_table(&pq, b, "failures", "failure", q->id, DASH_PAGE_ROWS, err, errlen);
	if (rc < 0)
		return rc;
	sb_printf(b, "</section>\n<section id=\"reports-section\">\n<h2>Reports</h2>\n");
	rc = failure_table(&pq, b, "reports", "report", q->id, DASH_PAGE_ROWS, err, errlen);
	if (rc < 0)
		return rc;
	sb_printf(b, "</section>\n");
	page_end(b);
	return 0;
}

/* --- the failure page ------------------------------------------------------------ */

/* The log window of a failure, its lines whose time lies in [from, to]
 * (the failing interval) marked. */
struct window_page {
	struct sbuf *b;           /* the page */
	bool has_ts;              /* from, to are known */
	int64_t from, to;         /* the failing interval, log ticks */
	int marked;               /* lines marked */
	uint64_t id;              /* the failure */
};

static int window_lines(void *arg, const struct store_window_row *w)
{
	struct window_page *wp = arg;
	struct sbuf *b = wp->b;
	const char *p, *end;
	int64_t rec;

	if (!w->has_window) {
		sb_printf(b, "<p class=\"empty\">No log window was kept for this failure.</p>\n");
		return 1;
	}
	if (!w->stored) {
		sb_printf(b, "<p class=\"empty\">The log window is not stored yet: it waits for the "
			  "records after the failure.</p>\n");
		return 1;
	}
	sb_printf(b, "<p>Records %lld to %lld%s; the failing interval's lines are marked. "
		  "<a href=\"/api/v1/failures/%llu/window\">as text</a></p>\n<pre id=\"window\">",
		  (long long)w->from_rec, (long long)w->to_rec, w->truncated ? " (truncated)" : "",
		  (unsigned long long)wp->id);
	rec = w->from_rec;
	for (p = w->text; p && p < w->text + w->len; p = end + 1) {
		char *tsend;
		long long ts;
		bool hl = false, record = *p != '#' && *p != '\n';
		end = memchr(p, '\n', (size_t)(w->text + w->len - p));
		if (!end)
			end = w->text + w->len;
		ts = strtoll(p, &tsend, 10);
		if (record && tsend != p && wp->has_ts)
			hl = ts >= wp->from && ts <= wp->to;
		sb_printf(b, "<span class=\"line%s\"%s>", hl ? " failing" : "",
			  record ? "" : " data-meta=\"1\"");
		if (record)
			sb_printf(b, "<span class=\"rec\">%lld</span> ", (long long)rec++);
		html_text_n(b, p, (size_t)(end - p));
		sb_printf(b, "</span>");        /* a block each: no newline in the <pre> */
		wp->marked += hl;
	}
	sb_printf(b, "</pre>\n");
	return 1;
}

/* The failure's metrics (in units), as a table. */
static void render_failure_metrics(struct sbuf *b, const struct json *r)
{
	const struct json *m = json_get(r, "metrics");
	char *mtext = m && m->kind != JSON_NULL ? json_source_dup(m) : NULL;
	char *human = render_metrics(mtext), *plain = render_metrics_plain(mtext);

	sb_printf(b, "<table id=\"metrics\" class=\"kv\">\n");
	kv(b, "Metrics", human && *human ? human : "(none)");
	kv(b, "Raw", plain && *plain ? plain : "(none)");
	sb_printf(b, "</table>\n");
	free(human);
	free(plain);
	free(mtext);
}

/* The failing interval (or event) the checker named: its witness. */
static void render_witness(struct sbuf *b, const struct json *r)
{
	char dur[48], ts[64];

	sb_printf(b, "<table id=\"witness\" class=\"kv\">\n");
	kv(b, "Kind", col(r, "kind"));
	kv(b, "Type", col(r, "type"));
	kv(b, "Interval uid", given(r, "uid") ? json_text(json_get(r, "uid")) : "-");
	kv(b, "From (checker's position)", col(r, "start"));
	kv(b, "To", col(r, "end"));
	kv(b, "Start (UTC)", given(r, "start_iso") ? col(r, "start_iso") : "-");
	if (given(r, "start_ts")) {
		snprintf(ts, sizeof ts, "%lld .. %lld", num(r, "start_ts"), num(r, "end_ts"));
		kv(b, "Log time (ticks)", ts);
		if (num(r, "end_ts") >= num(r, "start_ts"))
			kv(b, "Duration", fmt_ns((double)(num(r, "end_ts") - num(r, "start_ts")),
						 false, dur, sizeof dur));
	}
	sb_printf(b, "</table>\n");
}

/* GET /failures/ID: one failure, its metrics in units, its witness and
 * its log window. -ENOENT if none. */
static int page_failure(const struct dash_req *q, struct sbuf *b, char *err, size_t errlen)
{
	char before[40], title[64], flags[128];
	const char *words[] = { "failures", before, "limit=1", NULL };
	struct window_page wp = { .b = b, .id = q->id };
	struct api_rows a;
	const struct json *r;
	bool labelled;
	int rc;

	snprintf(before, sizeof before, "before=%llu", (unsigned long long)q->id + 1);
	if (api_rows_get(q->tm, words, true, "failure", &a, err, errlen) < 0)
		return -EIO;
	if (a.n != 1 || (uint64_t)num(a.row[0], "id") != q->id) {
		api_rows_free(&a);
		snprintf(err, errlen, "no failure %llu", (unsigned long long)q->id);
		return -ENOENT;
	}
	r = a.row[0];
	labelled = given(r, "assert");
	snprintf(title, sizeof title, "%s %llu", num(r, "report") ? "Report" : "Failure",
		 (unsigned long long)q->id);
	snprintf(flags, sizeof flags, "%s%s%s%s%s", num(r, "report") ? "report " : "failure ",
		 !strcmp(col(r, "result"), "inconclusive") ? "inconclusive " : "",
		 !strcmp(col(r, "kind"), "overdue") ? "overdue " : "",
		 given(r, "silenced") ? "silenced " : "", num(r, "acked") ? "acked" : "");
	page_begin(b, "failure", title);
	sb_printf(b, "<section id=\"summary\">\n<table id=\"failure\" class=\"kv\">\n");
	kv_num(b, "ID", num(r, "id"));
	kv(b, "Time (UTC)", col(r, "time_iso"));
	kv(b, "Assertion", labelled ? col(r, "assert") : "(unlabelled)");
	kv_num(b, "Line", num(r, "line"));
	kv(b, "Spec", col(r, "spec"));
	kv(b, "Result", col(r, "result"));
	kv(b, "Flags", flags);
	if (num(r, "acked"))
		kv(b, "Acknowledged", col(r, "ack_comment"));
	kv(b, "Program", col(r, "prog"));
	kv(b, "Machine", col(r, "machine"));
	kv_num(b, "PID", num(r, "pid"));
	sb_printf(b, "<tr><th>Instance</th><td><a href=\"/instances/%lld\">%lld</a></td></tr>\n"
		  "</table>\n</section>\n<section id=\"metrics-section\">\n<h2>Metrics</h2>\n",
		  num(r, "instance"), num(r, "instance"));
	render_failure_metrics(b, r);
	sb_printf(b, "</section>\n<section id=\"witness-section\">\n<h2>Witness</h2>\n");
	render_witness(b, r);
	sb_printf(b, "</section>\n<section id=\"window-section\">\n<h2>Log window</h2>\n");
	wp.has_ts = given(r, "start_ts");
	wp.from = num(r, "start_ts");
	wp.to = num(r, "end_ts") >= wp.from ? num(r, "end_ts") : wp.from;
	api_rows_free(&a);
	rc = store_failure_window(q->tm->store, q->id, window_lines, &wp, err, errlen);
	if (rc < 0 && rc != -ENOENT)
		return -EIO;
	sb_printf(b, "</section>\n");
	page_end(b);
	return 0;
}

/* A static file, index.html rendered with the filters of `q`. */
static int serve_file(const struct dash_req *q, const struct dash_file *f, const char *webdir,
		      struct evbuffer *body, const char **type, char *err, size_t errlen)
{
	struct sbuf text = { 0 }, page = { 0 };
	char p[PATH_MAX];
	int rc;

	if (!f) {
		snprintf(err, errlen, "no such file");
		return -ENOENT;
	}
	if (f->name) {
		if (!webdir) {
			snprintf(err, errlen, "the dashboard's files were not found "
				 "(telemonitor -web DIR)");
			return -ENOENT;
		}
		if (snprintf(p, sizeof p, "%s/%s", webdir, f->name) >= (int)sizeof p) {
			snprintf(err, errlen, "web directory path too long");
			return -ENAMETOOLONG;
		}
	} else {
		snprintf(p, sizeof p, "%s", f->abs);
	}
	rc = read_file(p, &text, err, errlen);
	if (rc < 0)
		goto out_free;
	if (!strcmp(f->name ? f->name : "", "index.html")) {
		rc = render_page(q, text.s ? text.s : "", &page, err, errlen);
		if (rc < 0)
			goto out_free;
		evbuffer_add(body, page.s ? page.s : "", page.len);
	} else {
		evbuffer_add(body, text.s ? text.s : "", text.len);
	}
	*type = f->type;
out_free:
	sb_free(&text);
	sb_free(&page);
	return rc;
}

/* --- the time series of the charts ------------------------------------------------ */

/* The time range and step of a series: since/until as given, else the
 * last 24 hours; step 60 s unless given. -EINVAL if the range holds more
 * than DASH_SERIES_BUCKETS steps or is empty. */
static int series_range(const struct dash_req *q, double *since, double *until, int64_t *step,
			char *err, size_t errlen)
{
	*until = q->has_until ? q->until : (double)time(NULL) + 1;
	*since = q->has_since ? q->since : *until - DASH_DAY;
	*step = q->step ? q->step : 60;
	if (*since >= *until) {
		snprintf(err, errlen, "since must come before until");
		return -EINVAL;
	}
	if ((*until - *since) / (double)*step > DASH_SERIES_BUCKETS) {
		snprintf(err, errlen, "more than %d steps from since to until: take a larger step",
			 DASH_SERIES_BUCKETS);
		return -EINVAL;
	}
	return 0;
}

/* The answer of /api/v1/failures/series being written. */
struct series_out {
	struct sbuf *b;           /* the answer */
	bool open;                /* a series is open */
	bool first;               /* no series written yet */
	char prog[DASH_FILTER_MAX + 1], name[DASH_FILTER_MAX + 1]; /* the open one's */
	bool report;              /* ...and its kind */
	int64_t total;            /* its failures */
};

static void series_close(struct series_out *o)
{
	if (o->open)
		sb_printf(o->b, "],\"total\":%lld}", (long long)o->total);
	o->open = false;
}

static int series_row(void *arg, const struct store_series_row *r)
{
	struct series_out *o = arg;
	const char *prog = r->prog ? r->prog : "", *name = r->name ? r->name : "";

	if (!o->open || strcmp(o->prog, prog) || strcmp(o->name, name) || o->report != r->report) {
		series_close(o);
		sb_printf(o->b, "%s{\"prog\":", o->first ? "" : ",");
		sb_json_str(o->b, prog);
		sb_printf(o->b, ",\"assert\":");
		sb_json_str(o->b, name);
		sb_printf(o->b, ",\"report\":%s,\"points\":[", r->report ? "true" : "false");
		snprintf(o->prog, sizeof o->prog, "%s", prog);
		snprintf(o->name, sizeof o->name, "%s", name);
		o->report = r->report;
		o->open = true;
		o->first = false;
		o->total = 0;
	} else {
		sb_add(o->b, ",", 1);
	}
	sb_printf(o->b, "[%lld,%lld]", (long long)r->bucket, (long long)r->count);
	o->total += r->count;
	return 0;
}

/* GET /api/v1/failures/series: failures per assertion and step. */
static int api_failure_series(const struct dash_req *q, struct sbuf *b, char *err, size_t errlen)
{
	static const char *const kinds[] = { "all", "failure", "report" };
	struct store_series_query sq = {
		.prog = *q->prog ? q->prog : NULL,
		.assertion = *q->assertion ? q->assertion : NULL,
		.kind = q->kind,
		.limit = DASH_SERIES_ROWS,
	};
	struct series_out o = { .b = b, .first = true };

	if (series_range(q, &sq.since, &sq.until, &sq.step, err, errlen) < 0)
		return -EINVAL;
	sb_printf(b, "{\"since\":%.3f,\"until\":%.3f,\"step\":%lld,\"kind\":\"%s\",\"series\":[",
		  sq.since, sq.until, (long long)sq.step, kinds[q->kind]);
	if (store_failure_series(q->tm->store, &sq, series_row, &o, err, errlen) < 0)
		return -EIO;
	series_close(&o);
	sb_printf(b, "]}\n");
	return 0;
}

/* The answer of /api/v1/durations/series being written: the summaries of
 * one (program, type) and bucket are merged, then their quantiles said. */
struct dur_out {
	struct sbuf *b;           /* the answer */
	int64_t step;             /* seconds per bucket */
	bool open;                /* a series is open */
	bool first;               /* no series written yet */
	bool first_point;         /* no point of the open series written yet */
	char prog[DASH_FILTER_MAX + 1], type[DASH_FILTER_MAX + 1]; /* the open one's */
	int64_t bucket;           /* the bucket being merged */
	struct sketch sk;         /* ...its summaries merged */
	int rc;                   /* -ENOMEM if memory ran out */
};

/* The value below which a fraction `p` of the bins' counts lie. */
static double bins_quantile(const struct cmp_bin *v, size_t n, double total, double p)
{
	double seen = 0;

	for (size_t i = 0; i < n; i++) {
		seen += v[i].count;
		if (seen >= p * total)
			return v[i].value;
	}
	return n ? v[n - 1].value : 0;
}

/* Say the merged bucket as a point, and empty it. */
static void dur_point(struct dur_out *o)
{
	struct cmp_bin *v = NULL;
	size_t n = 0;
	double total = 0;

	if (o->sk.count <= 0 && o->sk.zero <= 0) {
		sketch_free(&o->sk);
		return;
	}
	if (sketch_bins(&o->sk, &v, &n) < 0) {
		o->rc = -ENOMEM;
		sketch_free(&o->sk);
		return;
	}
	for (size_t i = 0; i < n; i++)
		total += v[i].count;
	sb_printf(o->b, "%s{\"t\":%lld,\"count\":%.0f,\"p50\":%.6g,\"p90\":%.6g,\"p99\":%.6g}",
		  o->first_point ? "" : ",", (long long)o->bucket, total,
		  bins_quantile(v, n, total, 0.5), bins_quantile(v, n, total, 0.9),
		  bins_quantile(v, n, total, 0.99));
	o->first_point = false;
	free(v);
	sketch_free(&o->sk);
}

static void dur_close(struct dur_out *o)
{
	if (!o->open)
		return;
	dur_point(o);
	sb_printf(o->b, "]}");
	o->open = false;
}

static int dur_row(void *arg, const struct store_duration_row *r)
{
	struct dur_out *o = arg;
	const char *prog = r->prog ? r->prog : "", *type = r->type ? r->type : "";
	int64_t bucket = (int64_t)(r->time / (double)o->step) * o->step;

	if (!o->open || strcmp(o->prog, prog) || strcmp(o->type, type)) {
		dur_close(o);
		sb_printf(o->b, "%s{\"prog\":", o->first ? "" : ",");
		sb_json_str(o->b, prog);
		sb_printf(o->b, ",\"type\":");
		sb_json_str(o->b, type);
		sb_printf(o->b, ",\"points\":[");
		snprintf(o->prog, sizeof o->prog, "%s", prog);
		snprintf(o->type, sizeof o->type, "%s", type);
		o->open = true;
		o->first = false;
		o->first_point = true;
		o->bucket = bucket;
	} else if (bucket != o->bucket) {
		dur_point(o);
		o->bucket = bucket;
	}
	/* a sketch of another gamma, or not a sketch, is left out */
	if (r->sketch && sketch_add_json(&o->sk, r->sketch, strlen(r->sketch)) == -ENOMEM)
		o->rc = -ENOMEM;
	return o->rc;
}

/* GET /api/v1/durations/series: p50, p90, p99 of interval durations per
 * program, interval type and step, from the checkers' summaries. */
static int api_duration_series(const struct dash_req *q, struct sbuf *b, char *err,
			       size_t errlen)
{
	struct dur_out o = { .b = b, .first = true };
	double since, until;
	int rc;

	if (series_range(q, &since, &until, &o.step, err, errlen) < 0)
		return -EINVAL;
	sb_printf(b, "{\"since\":%.3f,\"until\":%.3f,\"step\":%lld,\"unit\":\"ns\",\"series\":[",
		  since, until, (long long)o.step);
	rc = store_duration_rows(q->tm->store, *q->prog ? q->prog : NULL, *q->type ? q->type : NULL,
				 since, until, DASH_SERIES_ROWS, dur_row, &o, err, errlen);
	dur_close(&o);
	sketch_free(&o.sk);
	if (rc < 0 || o.rc < 0) {
		if (o.rc < 0)
			snprintf(err, errlen, "out of memory");
		return o.rc < 0 ? o.rc : -EIO;
	}
	sb_printf(b, "]}\n");
	return 0;
}

/* --- routes ------------------------------------------------------------------------ */

/* The query parameters a route takes. */
enum {
	DQ_PROG = 1u << 0, DQ_ASSERT = 1u << 1, DQ_SINCE = 1u << 2, DQ_UNTIL = 1u << 3,
	DQ_STEP = 1u << 4, DQ_KIND = 1u << 5, DQ_TYPE = 1u << 6, DQ_TOKEN = 1u << 7,
};

/* A page or series the telemonitor writes: a path, or a prefix followed by
 * an id; its content type, its parameters, and what writes it. */
static const struct dash_route {
	const char *path;               /* the path, or its part before the id */
	bool id;                        /* an id follows */
	const char *type;               /* Content-Type */
	unsigned params;                /* DQ_* */
	int (*serve)(const struct dash_req *q, struct sbuf *b, char *err, size_t errlen);
} routes[] = {
	{ "/instances/", true, "text/html; charset=utf-8", 0, page_instance },
	{ "/failures/", true, "text/html; charset=utf-8", 0, page_failure },
	{ "/api/v1/failures/series", false, "application/json",
	  DQ_PROG | DQ_ASSERT | DQ_SINCE | DQ_UNTIL | DQ_STEP | DQ_KIND, api_failure_series },
	{ "/api/v1/durations/series", false, "application/json",
	  DQ_PROG | DQ_TYPE | DQ_SINCE | DQ_UNTIL | DQ_STEP, api_duration_series },
};

/* The route of `path` and its id (0 if none), or NULL. */
static const struct dash_route *route_of(const char *path, uint64_t *id)
{
	for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
		const struct dash_route *r = &routes[i];
		size_t n = strlen(r->path), digits;
		if (!r->id) {
			if (!strcmp(path, r->path)) {
				*id = 0;
				return r;
			}
			continue;
		}
		if (strncmp(path, r->path, n))
			continue;
		digits = strspn(path + n, "0123456789");
		if (!digits || digits > 18 || path[n + digits] || path[n] == '0')
			continue;
		*id = strtoull(path + n, NULL, 10);
		return r;
	}
	return NULL;
}

bool dash_handles(const char *path)
{
	uint64_t id;

	return file_of(path) != NULL || route_of(path, &id) != NULL;
}

/* One parameter of a query into `q`. 0, or -EINVAL with a message. */
static int take_param(struct dash_req *q, const char *key, const char *v, unsigned takes,
		      char *err, size_t errlen)
{
	static const struct { const char *key; unsigned bit; } known[] = {
		{ "prog", DQ_PROG }, { "assert", DQ_ASSERT }, { "since", DQ_SINCE },
		{ "until", DQ_UNTIL }, { "step", DQ_STEP }, { "kind", DQ_KIND },
		{ "type", DQ_TYPE }, { "token", DQ_TOKEN },
	};
	unsigned bit = 0;
	char *end;

	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		if (!strcmp(key, known[i].key))
			bit = known[i].bit;
	if (!(bit & takes)) {
		snprintf(err, errlen, "unknown parameter '%.60s'", key);
		return -EINVAL;
	}
	if (strlen(v) > DASH_FILTER_MAX) {
		snprintf(err, errlen, "%s: longer than %d bytes", key, DASH_FILTER_MAX);
		return -EINVAL;
	}
	switch (bit) {
	case DQ_PROG: snprintf(q->prog, sizeof q->prog, "%s", v); break;
	case DQ_ASSERT: snprintf(q->assertion, sizeof q->assertion, "%s", v); break;
	case DQ_TYPE: snprintf(q->type, sizeof q->type, "%s", v); break;
	case DQ_SINCE:
	case DQ_UNTIL:
		if (!*v)
			break;          /* an empty field of the form: not given */
		if (!http_parse_time(v, bit == DQ_SINCE ? &q->since : &q->until)) {
			snprintf(err, errlen, "%s: '%.40s' is not a time (Unix seconds, 2024-03-01, "
				 "2024-03-01T12:00:00Z or '2 hours')", key, v);
			return -EINVAL;
		}
		if (bit == DQ_SINCE) {
			q->has_since = true;
			snprintf(q->since_text, sizeof q->since_text, "%s", v);
		} else {
			q->has_until = true;
			snprintf(q->until_text, sizeof q->until_text, "%s", v);
		}
		break;
	case DQ_STEP:
		q->step = strtoll(v, &end, 10);
		if (end == v || *end || q->step < 1 || q->step > (int64_t)DASH_DAY) {
			snprintf(err, errlen, "step: expected 1 to %.0f seconds", DASH_DAY);
			return -EINVAL;
		}
		break;
	case DQ_KIND:
		if (store_kind_parse(v, &q->kind) < 0) {
			snprintf(err, errlen, "kind: '%.40s' is not failure, report or all", v);
			return -EINVAL;
		}
		break;
	}
	return 0;
}

/* What take_one() fills: the request and the parameters it may have. */
struct dash_query {
	struct dash_req *q;
	unsigned takes;
};

static int take_one(void *arg, const char *key, const char *value, char *err, size_t errlen)
{
	const struct dash_query *d = arg;

	return take_param(d->q, key, value, d->takes, err, errlen);
}

/* The query string into `q`, taking only the parameters `takes`. */
static int parse_query(struct dash_req *q, const char *query, unsigned takes, char *err,
		       size_t errlen)
{
	struct dash_query d = { .q = q, .takes = takes };

	return http_query_each(query, take_one, &d, err, errlen);
}

int dash_serve(struct tmon *tm, const char *webdir, const char *path, const char *query,
	       struct evbuffer *body, const char **type, char *err, size_t errlen)
{
	const struct dash_file *f = file_of(path);
	const struct dash_route *r = f ? NULL : route_of(path, &(uint64_t){ 0 });
	struct dash_req *q = calloc(1, sizeof *q);
	struct sbuf out = { 0 };
	int rc;

	if (!q) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	q->tm = tm;
	if (!f && !r) {
		snprintf(err, errlen, "no such file");
		rc = -ENOENT;
		goto out_free;
	}
	if (r)
		route_of(path, &q->id);
	/* the page takes the filters; the static files ignore a query */
	rc = parse_query(q, query, r ? r->params : f->name && !strcmp(f->name, "index.html")
			 ? DQ_PROG | DQ_ASSERT | DQ_SINCE | DQ_UNTIL | DQ_TOKEN : ~0u,
			 err, errlen);
	if (rc < 0)
		goto out_free;
	if (f) {
		rc = serve_file(q, f, webdir, body, type, err, errlen);
		goto out_free;
	}
	rc = r->serve(q, &out, err, errlen);
	if (rc == 0 && out.oom) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
	}
	if (rc == 0) {
		evbuffer_add(body, out.s ? out.s : "", out.len);
		*type = r->type;
	}
out_free:
	sb_free(&out);
	free(q);
	return rc;
}
