/* The web dashboard (see dashboard.h): the page with its tables rendered
 * in, and the few static files beside it.
 *
 * index.html is a template: each marker <!--cmon:NAME--> is replaced by
 * what NAME renders (instances, failures, generated); the rest is copied
 * as is. The tables are rendered from the API's own JSON, read back with
 * json.c. */
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
#include "json.h"
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

bool dash_handles(const char *path)
{
	return file_of(path) != NULL;
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
	char *argv[8], *text = NULL;
	size_t len;

	if (!out) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	while (words[r.argc] && r.argc < 8) {
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

/* <!--cmon:instances-->: the table of /api/v1/instances?all=1. */
static int render_instances(struct tmon *tm, struct sbuf *b, char *err, size_t errlen)
{
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
		snprintf(loss, sizeof loss, "%.2f%%",
			 recs + lost > 0 ? 100.0 * (double)lost / (double)(recs + lost) : 0.0);
		sb_printf(b, "<tr id=\"instance-%lld\" class=\"state-", num(r, "id"));
		html_text(b, col(r, "state"));
		sb_printf(b, "\">");
		html_cell_num(b, num(r, "id"));
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

/* <!--cmon:failures-->: the table of /api/v1/failures?limit=DASH_FAILURES. */
static int render_failures(struct tmon *tm, struct sbuf *b, char *err, size_t errlen)
{
	static const char *const words[] = { "failures", "limit=" DASH_STR(DASH_FAILURES), NULL };
	struct api_rows a;
	int shown = 0;

	if (api_rows_get(tm, words, true, "failures", &a, err, errlen) < 0)
		return -EIO;
	sb_printf(b, "<table id=\"failures\">\n<thead><tr><th>ID</th><th>Time (UTC)</th>"
		  "<th>Program</th><th>Machine</th><th>PID</th><th>Assertion</th><th>Line</th>"
		  "<th>Metrics</th><th>Flags</th><th>Log</th></tr></thead>\n<tbody>\n");
	for (size_t i = 0; i < a.n; i++) {
		const struct json *r = a.row[i], *m = json_get(r, "metrics");
		long long id = num(r, "id");
		bool labelled = given(r, "assert");
		char *mtext = m && m->kind != JSON_NULL ? json_source_dup(m) : NULL;
		char *metrics = render_metrics(mtext);
		const char *result = col(r, "result"), *kind = col(r, "kind");
		char flags[96];
		snprintf(flags, sizeof flags, "%s%s%s%s%s",
			 !strcmp(result, "inconclusive") ? "inconclusive " : "",
			 !strcmp(kind, "overdue") ? "overdue " : "",
			 num(r, "report") ? "report " : "",
			 given(r, "silenced") ? "silenced " : "",
			 num(r, "acked") ? "acked" : "");
		sb_printf(b, "<tr id=\"failure-%lld\" data-id=\"%lld\" data-instance=\"%lld\""
			  " data-prog=\"", id, id, num(r, "instance"));
		html_text(b, col(r, "prog"));
		sb_printf(b, "\" data-assert=\"");
		html_text(b, labelled ? col(r, "assert") : "");
		sb_printf(b, "\" data-report=\"%d\">", num(r, "report") ? 1 : 0);
		html_cell_num(b, id);
		html_cell(b, "time", col(r, "time_iso"));
		html_cell(b, NULL, col(r, "prog"));
		html_cell(b, NULL, col(r, "machine"));
		html_cell_num(b, num(r, "pid"));
		html_cell(b, labelled ? "assert" : "assert unlabelled",
			  labelled ? col(r, "assert") : "(unlabelled)");
		html_cell_num(b, num(r, "line"));
		html_cell(b, "metrics", metrics ? metrics : "");
		html_cell(b, "flags", flags);
		if (num(r, "window"))
			sb_printf(b, "<td><a class=\"window\" href=\"/api/v1/failures/%lld/window\">"
				  "window</a></td>", id);
		else
			sb_printf(b, "<td></td>");
		sb_printf(b, "</tr>\n");
		free(metrics);
		free(mtext);
		shown++;
	}
	if (!shown)
		sb_printf(b, "<tr class=\"empty\"><td colspan=\"10\">no failures</td></tr>\n");
	sb_printf(b, "</tbody>\n</table>\n");
	api_rows_free(&a);
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
static int render_versions(struct tmon *tm, struct sbuf *b, char *err, size_t errlen)
{
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
		bool dup = !*prog;
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
static int render_generated(struct tmon *tm, struct sbuf *b, char *err, size_t errlen)
{
	char when[40];

	(void)tm, (void)err, (void)errlen;
	html_text(b, iso_time((double)time(NULL), when, sizeof when));
	return 0;
}

/* The template's markers and what renders them. */
static const struct {
	const char *name;
	int (*render)(struct tmon *tm, struct sbuf *b, char *err, size_t errlen);
} marks[] = {
	{ "instances", render_instances },
	{ "failures", render_failures },
	{ "versions", render_versions },
	{ "generated", render_generated },
};

/* Copy the template `t`, replacing its markers. */
static int render_page(struct tmon *tm, const char *t, struct sbuf *out, char *err, size_t errlen)
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
				int rc = marks[i].render(tm, out, err, errlen);
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

int dash_serve(struct tmon *tm, const char *webdir, const char *path, struct evbuffer *body,
	       const char **type, char *err, size_t errlen)
{
	const struct dash_file *f = file_of(path);
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
		rc = render_page(tm, text.s ? text.s : "", &page, err, errlen);
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
