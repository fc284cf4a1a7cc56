/* Silences in Alertmanager (docs/alerting.md, "One silence model"): when
 * the telemonitor has an Alertmanager (status --json "alertmanagers"),
 * `silence add|list|rm` are done there, over its API v2, and the
 * telemonitor reads them back from there (amsilences.c). CMon's glob
 * matchers become Alertmanager matchers: a pattern without * ? [ is an
 * equality, one with them a regular expression matching the same names
 * (Alertmanager anchors it at both ends). Each request waits at most
 * AM_TIMEOUT_S. An Alertmanager that cannot be reached is exit status 3,
 * one that refuses 1, as for the telemonitor itself. */
#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "telemonctl.h"

#define AM_URLS_MAX 16            /* Alertmanagers talked to */
#define AM_ANSWER_MAX (4 << 20)   /* bytes read of an answer */
#define AM_DEFAULT_COMMENT "added with telemonctl" /* Alertmanager wants a comment */

/* A growing text. */
struct buf {
	char *s;                  /* NUL-terminated, NULL until something is added */
	size_t len, size;         /* length, allocation */
	bool bad;                 /* out of memory, or past AM_ANSWER_MAX */
};

static void add(struct buf *b, const char *p, size_t n)
{
	if (b->bad)
		return;
	if (b->len + n + 1 > b->size) {
		size_t size = (b->len + n + 1) * 2;
		char *q = size > AM_ANSWER_MAX * 2 ? NULL : realloc(b->s, size);
		if (!q) {
			b->bad = true;
			return;
		}
		b->s = q;
		b->size = size;
	}
	memcpy(b->s + b->len, p, n);
	b->len += n;
	b->s[b->len] = '\0';
}

static void addstr(struct buf *b, const char *s)
{
	add(b, s, strlen(s));
}

/* `s` as a JSON string. */
static void addjson(struct buf *b, const char *s)
{
	char esc[8];

	add(b, "\"", 1);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\') {
			esc[0] = '\\';
			esc[1] = (char)ch;
			add(b, esc, 2);
		} else if (ch < 0x20) {
			snprintf(esc, sizeof esc, "\\u%04x", ch);
			add(b, esc, 6);
		} else {
			add(b, s, 1);
		}
	}
	add(b, "\"", 1);
}

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
	struct buf *b = arg;

	add(b, p, size * n);
	return b->bad ? 0 : size * n;
}

/* One request: `method` on `url` with JSON `body` (or NULL). The HTTP
 * status, the answer in `answer`; 0 when there was none (reported). */
static long am_request(const char *method, const char *url, const char *body, struct buf *answer)
{
	char error[CURL_ERROR_SIZE] = "";
	struct curl_slist *h = NULL;
	long http = 0;
	CURLcode rc;
	CURL *e = curl_easy_init();

	if (!e) {
		fprintf(stderr, "telemonctl: out of memory\n");
		return 0;
	}
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	if (body) {
		h = curl_slist_append(NULL, "Content-Type: application/json");
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
	}
	curl_easy_setopt(e, CURLOPT_TIMEOUT, AM_TIMEOUT_S);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, error);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, answer);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	rc = curl_easy_perform(e);
	if (rc == CURLE_OK)
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &http);
	else
		fprintf(stderr, "telemonctl: cannot reach the Alertmanager at %s: %s\n", url,
			*error ? error : curl_easy_strerror(rc));
	curl_slist_free_all(h);
	curl_easy_cleanup(e);
	return http;
}

/* An answer that is not 2xx: say so. EXIT_REFUSED. */
static int refused(const char *what, const char *url, long http, const struct buf *answer)
{
	size_t n = answer->s ? strcspn(answer->s, "\n") : 0;

	fprintf(stderr, "telemonctl: %s: the Alertmanager at %s answered HTTP %ld%s%.*s\n", what,
		url, http, n ? ": " : "", (int)(n > 300 ? 300 : n), n ? answer->s : "");
	return EXIT_REFUSED;
}

/* The value of option word KEY=VALUE of `c` after the first `from` words, or NULL. */
static const char *opt(const struct ctl_cmd *c, int from, const char *key)
{
	size_t k = strlen(key);

	for (int i = from; i < c->nwords; i++)
		if (!strncmp(c->words[i], key, k) && c->words[i][k] == '=')
			return c->words[i] + k + 1;
	return NULL;
}

/* A glob(7) pattern as a regular expression matching the same whole
 * names (anchored by Alertmanager): RE2 and POSIX extended alike. */
static void glob_regex(struct buf *b, const char *g)
{
	for (; *g; g++) {
		if (*g == '*') {
			addstr(b, ".*");
		} else if (*g == '?') {
			addstr(b, ".");
		} else if (*g == '[' && strchr(g + 1, ']')) {
			const char *end = g + 1;
			add(b, "[", 1);
			if (*end == '!' || *end == '^') {
				add(b, "^", 1);
				end++;
			}
			if (*end == ']') {              /* a leading ] is a member */
				add(b, "]", 1);
				end++;
			}
			for (; *end && *end != ']'; end++)
				add(b, end, 1);
			add(b, "]", 1);
			g = end;
			if (!*g)
				break;
		} else {
			if (*g == '\\' && g[1])
				g++;
			if (strchr(".+()|{}^$\\[]*?", *g))
				add(b, "\\", 1);
			add(b, g, 1);
		}
	}
}

/* A matcher {"name","value","isRegex","isEqual"} from CMon's NAME=GLOB. */
static void add_matcher(struct buf *b, bool *first, const char *name, const char *glob)
{
	struct buf v = { 0 };
	bool regex;

	if (!glob)
		return;
	regex = strpbrk(glob, "*?[") != NULL;
	if (regex)
		glob_regex(&v, glob);
	else
		addstr(&v, glob);
	addstr(b, *first ? "{\"name\":" : ",{\"name\":");
	addjson(b, name);
	addstr(b, ",\"value\":");
	addjson(b, v.s ? v.s : "");
	addstr(b, regex ? ",\"isRegex\":true,\"isEqual\":true}" : ",\"isRegex\":false,\"isEqual\":true}");
	*first = false;
	b->bad |= v.bad;
	free(v.s);
}

/* time -> "2026-11-29T03:00:00.000Z" */
static const char *iso(double t, char *out, size_t size)
{
	time_t s = (time_t)t;
	struct tm tm;

	gmtime_r(&s, &tm);
	snprintf(out, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)((t - (double)s) * 1000));
	return out;
}

/* base URL + path (heap). */
static char *api(const char *base, const char *path)
{
	size_t n = strlen(base);
	char *s;

	while (n && base[n - 1] == '/')
		n--;
	return asprintf(&s, "%.*s%s", (int)n, base, path) < 0 ? NULL : s;
}

/* silence add: POST the silence to each Alertmanager; print its id. */
static int am_add(const struct ctl_cmd *c, char **urls, size_t nurls)
{
	const char *until = opt(c, 2, "until"), *comment = opt(c, 2, "comment");
	struct buf body = { 0 };
	bool first = true;
	char start[40], end[40];
	int rc = EXIT_OK;

	addstr(&body, "{\"matchers\":[");
	add_matcher(&body, &first, "prog", opt(c, 2, "prog"));
	add_matcher(&body, &first, "machine", opt(c, 2, "machine"));
	add_matcher(&body, &first, "assert", opt(c, 2, "assert"));
	addstr(&body, "],\"startsAt\":\"");
	addstr(&body, iso((double)time(NULL), start, sizeof start));
	addstr(&body, "\",\"endsAt\":\"");
	addstr(&body, iso(until ? strtod(until, NULL) : 0, end, sizeof end));
	addstr(&body, "\",\"createdBy\":\"telemonctl\",\"comment\":");
	addjson(&body, comment && *comment ? comment : AM_DEFAULT_COMMENT);
	addstr(&body, "}");
	if (body.bad) {
		fprintf(stderr, "telemonctl: out of memory\n");
		return EXIT_REFUSED;
	}
	if (c->json)
		fputs(nurls > 1 ? "[" : "", stdout);
	for (size_t i = 0; i < nurls; i++) {
		struct buf answer = { 0 };
		char *url = api(urls[i], "/api/v2/silences");
		long http = url ? am_request("POST", url, body.s, &answer) : 0;
		struct json *j = NULL;
		const char *id = NULL;
		char err[120];

		if (!http) {
			rc = EXIT_UNREACHABLE;
		} else if (http < 200 || http >= 300) {
			rc = refused("silence add", url, http, &answer);
		} else if (!answer.s || !(j = json_parse(answer.s, answer.len, err, sizeof err)) ||
			   !(id = json_str(json_get(j, "silenceID")))) {
			fprintf(stderr, "telemonctl: silence add: the Alertmanager at %s gave no "
				"silence id\n", url);
			rc = EXIT_REFUSED;
		} else if (c->json) {
			struct buf o = { 0 };
			addstr(&o, "{\"id\":");
			addjson(&o, id);
			addstr(&o, ",\"alertmanager\":");
			addjson(&o, urls[i]);
			addstr(&o, ",\"until\":");
			addjson(&o, end);
			addstr(&o, "}");
			printf("%s%s", i ? "," : "", o.s ? o.s : "{}");
			free(o.s);
		} else {
			printf("silence %s added in the Alertmanager at %s, until %.19sZ\n", id, urls[i],
			       end);
		}
		json_free(j);
		free(answer.s);
		free(url);
	}
	if (c->json)
		fputs(nurls > 1 ? "]\n" : "\n", stdout);
	free(body.s);
	return rc;
}

/* A matcher as amtool writes it: name="value", name=~"re", name!=..., name!~... */
static void matcher_text(struct buf *b, const struct json *m)
{
	const struct json *re = json_get(m, "isRegex"), *eq = json_get(m, "isEqual");
	bool regex = re && re->kind == JSON_TRUE, equal = !eq || eq->kind != JSON_FALSE;
	const char *name = json_str(json_get(m, "name")), *value = json_str(json_get(m, "value"));

	if (b->len)
		add(b, " ", 1);
	addstr(b, name ? name : "?");
	addstr(b, equal ? (regex ? "=~" : "=") : (regex ? "!~" : "!="));
	addjson(b, value ? value : "");
}

/* silence list: the active silences of each Alertmanager. */
static int am_list(const struct ctl_cmd *c, char **urls, size_t nurls)
{
	struct buf out = { 0 };
	size_t rows = 0;
	int rc = EXIT_OK;

	if (!c->json)
		printf("%-36s  %-20s  %-12s  %s\n", "ID", "UNTIL", "CREATED BY", "MATCHERS / COMMENT");
	for (size_t i = 0; i < nurls; i++) {
		struct buf answer = { 0 };
		char *url = api(urls[i], "/api/v2/silences");
		long http = url ? am_request("GET", url, NULL, &answer) : 0;
		struct json *j = NULL;
		char err[120];

		if (!http) {
			rc = EXIT_UNREACHABLE;
			goto next;
		}
		if (http != 200) {
			rc = refused("silence list", url, http, &answer);
			goto next;
		}
		if (!answer.s || !(j = json_parse(answer.s, answer.len, err, sizeof err)) ||
		    j->kind != JSON_ARRAY) {
			fprintf(stderr, "telemonctl: silence list: the Alertmanager at %s gave no list "
				"of silences\n", url);
			rc = EXIT_REFUSED;
			goto next;
		}
		for (const struct json *s = j->kids; s; s = s->next) {
			const char *state = json_str(json_get(json_get(s, "status"), "state"));
			const char *id = json_str(json_get(s, "id"));
			const char *ends = json_str(json_get(s, "endsAt"));
			const char *by = json_str(json_get(s, "createdBy"));
			const char *comment = json_str(json_get(s, "comment"));
			const struct json *ms = json_get(s, "matchers");
			struct buf mt = { 0 };

			if (!state || strcmp(state, "active") || !id)
				continue;
			for (const struct json *m = ms ? ms->kids : NULL; m; m = m->next)
				matcher_text(&mt, m);
			if (c->json) {
				addstr(&out, rows ? ",{\"id\":" : "{\"id\":");
				addjson(&out, id);
				addstr(&out, ",\"until\":");
				addjson(&out, ends ? ends : "");
				addstr(&out, ",\"matchers\":");
				add(&out, ms ? ms->src : "[]", ms ? ms->srclen : 2);
				addstr(&out, ",\"matchers_text\":");
				addjson(&out, mt.s ? mt.s : "");
				addstr(&out, ",\"created_by\":");
				addjson(&out, by ? by : "");
				addstr(&out, ",\"comment\":");
				addjson(&out, comment ? comment : "");
				addstr(&out, ",\"alertmanager\":");
				addjson(&out, urls[i]);
				addstr(&out, "}");
			} else {
				printf("%-36s  %.19sZ  %-12s  %s%s%s\n", id, ends ? ends : "?",
				       by ? by : "", mt.s ? mt.s : "", comment && *comment ? "  # " : "",
				       comment ? comment : "");
			}
			rows++;
			free(mt.s);
		}
next:
		json_free(j);
		free(answer.s);
		free(url);
	}
	if (c->json)
		printf("[%s]\n", out.s ? out.s : "");
	else if (!rows)
		printf("(no active silences)\n");
	free(out.s);
	return rc;
}

/* silence rm ID: expire it in the Alertmanager that has it. */
static int am_rm(const struct ctl_cmd *c, char **urls, size_t nurls)
{
	const char *id = c->nwords > 2 ? c->words[2] : "";
	int rc = EXIT_REFUSED;
	bool gone = false;

	if (strspn(id, "0123456789abcdefABCDEF-") != strlen(id) || !*id) {
		fprintf(stderr, "telemonctl: silence rm: '%s' is not an Alertmanager silence id\n", id);
		return EXIT_REFUSED;
	}
	for (size_t i = 0; i < nurls && !gone; i++) {
		struct buf answer = { 0 }, path = { 0 };
		char *url;
		long http;

		addstr(&path, "/api/v2/silence/");
		addstr(&path, id);
		url = path.s ? api(urls[i], path.s) : NULL;
		http = url ? am_request("DELETE", url, NULL, &answer) : 0;
		if (!http)
			rc = EXIT_UNREACHABLE;
		else if (http >= 200 && http < 300)
			gone = true;
		else if (nurls == 1 || http != 404)
			rc = refused("silence rm", url, http, &answer);
		free(answer.s);
		free(path.s);
		free(url);
	}
	if (!gone) {
		if (rc == EXIT_REFUSED && nurls > 1)
			fprintf(stderr, "telemonctl: silence rm: no Alertmanager has silence %s\n", id);
		return rc;
	}
	if (c->json)
		printf("{\"removed\":\"%s\"}\n", id);
	else
		printf("silence %s removed\n", id);
	return EXIT_OK;
}

int am_silence(const struct ctl_cmd *c, bool *done)
{
	static char status_word[] = "status";
	struct ctl_cmd status = { .state = c->state, .json = true, .nwords = 1 };
	char *text = NULL, *urls[AM_URLS_MAX], err[120];
	const struct json *list;
	struct json *j;
	size_t len, n = 0;
	int rc;

	if (c->nwords < 2 || strcmp(c->words[0], "silence"))
		return EXIT_OK;
	status.words[0] = status_word;
	*done = true;
	if ((rc = request_capture(&status, &text, &len)) != EXIT_OK)
		return rc;
	if (!(j = json_parse(text, len, err, sizeof err))) {
		fprintf(stderr, "telemonctl: the telemonitor's status is not JSON: %s\n", err);
		free(text);
		return EXIT_REFUSED;
	}
	free(text);
	list = json_get(j, "alertmanagers");
	for (const struct json *u = list ? list->kids : NULL; u && n < AM_URLS_MAX; u = u->next)
		if (json_str(u) && *json_str(u))
			urls[n++] = (char *)json_str(u);
	if (!n) {                                      /* the telemonitor's own silences */
		json_free(j);
		*done = false;
		return EXIT_OK;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (!strcmp(c->words[1], "add"))
		rc = am_add(c, urls, n);
	else if (!strcmp(c->words[1], "list"))
		rc = am_list(c, urls, n);
	else
		rc = am_rm(c, urls, n);
	fflush(stdout);
	curl_global_cleanup();
	json_free(j);
	return rc;
}
