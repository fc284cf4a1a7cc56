/* Alertmanager's silences, read and cached (see amsilences.h). */
#include <errno.h>
#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alerts.h"
#include "amsilences.h"
#include "cmon/log.h"
#include "json.h"

/* One matcher of a silence: label name, value, =, !=, =~ or !~. */
struct matcher {
	char *name;                   /* the label */
	char *value;                  /* the value or the pattern */
	bool regex;                   /* isRegex */
	bool equal;                   /* isEqual (false: negated) */
	bool compiled;                /* regex: `re` holds it (else it never matches) */
	regex_t re;                   /* regex: ^(value)$ */
};

/* One silence of an Alertmanager. */
struct silence {
	char id[AMSIL_ID_MAX];        /* its id */
	double starts, ends;          /* when it is in force */
	struct matcher *m;            /* its matchers */
	size_t nm;                    /* how many */
};

/* One Alertmanager and what we know of its silences. */
struct source {
	char *url;                    /* the base URL as the classes give it */
	char *endpoint;               /* URL/api/v2/silences */
	struct silence *s;            /* the silences last read */
	size_t n;                     /* how many */
	bool inflight;                /* a GET is on its way */
	bool down;                    /* the last GET failed (logged once) */
	bool seen;                    /* still named by a class (this round) */
};

/* The Alertmanager silences of the service. */
struct amsil {
	struct tmon *tm;              /* the service */
	struct event *timer;          /* the polls */
	struct source *src[AMSIL_SOURCES_MAX]; /* the Alertmanagers watched */
	size_t nsrc;                  /* how many */
};

/* Free what silence `s` holds (not `s`). */
static void silence_clear(struct silence *s)
{
	for (size_t k = 0; k < s->nm; k++) {
		free(s->m[k].name);
		free(s->m[k].value);
		if (s->m[k].compiled)
			regfree(&s->m[k].re);
	}
	free(s->m);
	s->m = NULL;
	s->nm = 0;
}

static void silences_free(struct silence *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		silence_clear(&s[i]);
	free(s);
}

static void source_free(struct source *src)
{
	if (!src)
		return;
	silences_free(src->s, src->n);
	free(src->url);
	free(src->endpoint);
	free(src);
}

/* "2026-11-29T01:40:44.123Z" (or with +HH:MM) -> Unix seconds, or -1. */
static double iso_seconds(const char *s)
{
	struct tm t = { 0 };
	double frac = 0;
	int used = 0, oh = 0, om = 0;
	char sign;

	if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &t.tm_year, &t.tm_mon, &t.tm_mday,
			 &t.tm_hour, &t.tm_min, &t.tm_sec, &used) != 6)
		return -1;
	s += used;
	if (*s == '.') {
		char *end;
		frac = strtod(s, &end);
		s = end;
	}
	t.tm_year -= 1900;
	t.tm_mon -= 1;
	time_t base = timegm(&t);
	if (*s == 'Z' || *s == 'z')
		return (double)base + frac;
	if (sscanf(s, "%c%2d:%2d", &sign, &oh, &om) == 3 && (sign == '+' || sign == '-'))
		return (double)base + frac - (sign == '+' ? 1 : -1) * (oh * 3600.0 + om * 60.0);
	return -1;
}

/* Read one silence of an answer; false to skip it (expired, or not one). */
static bool read_silence(struct source *src, const struct json *j, struct silence *out,
			 const struct silence *old, size_t nold)
{
	const struct json *st = json_get(json_get(j, "status"), "state");
	const struct json *ms = json_get(j, "matchers"), *m;
	const char *id = json_str(json_get(j, "id"));

	if (!id || strlen(id) >= AMSIL_ID_MAX || !ms || ms->kind != JSON_ARRAY || !ms->count ||
	    ms->count > AMSIL_MATCHERS_MAX)
		return false;
	if (json_str(st) && !strcmp(json_str(st), "expired"))
		return false;
	memset(out, 0, sizeof *out);
	snprintf(out->id, sizeof out->id, "%s", id);
	out->starts = iso_seconds(json_str(json_get(j, "startsAt")));
	out->ends = iso_seconds(json_str(json_get(j, "endsAt")));
	if (out->ends < 0)
		return false;
	if (!(out->m = calloc(ms->count, sizeof *out->m)))
		return false;
	for (m = ms->kids; m; m = m->next) {
		struct matcher *x = &out->m[out->nm++];
		const struct json *eq = json_get(m, "isEqual");
		const char *name = json_str(json_get(m, "name")), *value = json_str(json_get(m, "value"));
		x->regex = json_get(m, "isRegex") && json_get(m, "isRegex")->kind == JSON_TRUE;
		x->equal = !eq || eq->kind != JSON_FALSE;      /* older Alertmanagers omit it */
		if (!name || !value || !(x->name = strdup(name)) || !(x->value = strdup(value)))
			goto out_drop;
		if (x->regex) {
			char *anchored;
			if (asprintf(&anchored, "^(%s)$", value) < 0)
				goto out_drop;
			x->compiled = regcomp(&x->re, anchored, REG_EXTENDED | REG_NOSUB) == 0;
			free(anchored);
			bool known = false;
			for (size_t i = 0; i < nold; i++)
				known |= !strcmp(old[i].id, out->id);
			if (!x->compiled && !known)
				cmon_warn("alertmanager: %s: silence %s: the pattern %s=~\"%s\" is not a "
					  "POSIX extended regular expression; it matches nothing here",
					  src->url, out->id, name, value);
		}
	}
	return true;
out_drop:
	silence_clear(out);
	return false;
}

/* alerts_get(): an answer to GET URL/api/v2/silences. */
static void got(void *arg, long http, const char *err, const char *body, size_t len)
{
	struct source *src = arg;
	struct json *root = NULL;
	struct silence *s = NULL;
	size_t n = 0;
	char why[300], jerr[160];

	src->inflight = false;
	if (err || http != 200) {
		if (err)
			snprintf(why, sizeof why, "%s", err);
		else
			snprintf(why, sizeof why, "HTTP %ld", http);
		goto out_down;
	}
	if (!(root = json_parse(body, len, jerr, sizeof jerr)) || root->kind != JSON_ARRAY) {
		snprintf(why, sizeof why, "not a list of silences%s%s", root ? "" : ": ",
			 root ? "" : jerr);
		goto out_down;
	}
	if (root->count && !(s = calloc(root->count < AMSIL_SILENCES_MAX ? root->count
									 : AMSIL_SILENCES_MAX, sizeof *s))) {
		snprintf(why, sizeof why, "out of memory");
		goto out_down;
	}
	for (const struct json *j = root->kids; j && n < AMSIL_SILENCES_MAX; j = j->next)
		if (read_silence(src, j, &s[n], src->s, src->n))
			n++;
	json_free(root);
	silences_free(src->s, src->n);
	src->s = s;
	src->n = n;
	if (src->down)
		cmon_notice("alertmanager: reading the silences of %s again (%zu in force or "
			    "pending)", src->url, n);
	src->down = false;
	return;
out_down:
	json_free(root);
	if (!src->down)
		cmon_warn("alertmanager: cannot read the silences of %s: %s; the %zu last known "
			  "stay in force until it answers", src->endpoint, why, src->n);
	src->down = true;
}

/* base URL -> base/api/v2/silences (heap; NULL on ENOMEM). */
static char *endpoint(const char *base)
{
	size_t n = strlen(base);
	char *s;

	while (n && base[n - 1] == '/')
		n--;
	if (asprintf(&s, "%.*s/api/v2/silences", (int)n, base) < 0)
		return NULL;
	return s;
}

static struct source *find(struct amsil *a, const char *url)
{
	for (size_t i = 0; i < a->nsrc; i++)
		if (!strcmp(a->src[i]->url, url))
			return a->src[i];
	return NULL;
}

/* Watch the Alertmanagers the classes name now (a reload may change
 * them) and ask each for its silences unless a GET is on its way. */
static void poll_all(evutil_socket_t fd, short what, void *arg)
{
	struct amsil *a = arg;
	struct tm_class *c;
	size_t k = 0;

	(void)fd;
	(void)what;
	for (size_t i = 0; i < a->nsrc; i++)
		a->src[i]->seen = false;
	TAILQ_FOREACH(c, &a->tm->classes, link) {
		struct source *src;
		if (!c->alertmanager || !*c->alertmanager)
			continue;
		if ((src = find(a, c->alertmanager))) {
			src->seen = true;
			continue;
		}
		if (a->nsrc >= AMSIL_SOURCES_MAX)
			continue;
		if (!(src = calloc(1, sizeof *src)) || !(src->url = strdup(c->alertmanager)) ||
		    !(src->endpoint = endpoint(c->alertmanager))) {
			source_free(src);
			continue;
		}
		src->seen = true;
		a->src[a->nsrc++] = src;
	}
	for (size_t i = 0; i < a->nsrc; i++) {
		struct source *src = a->src[i];
		if (!src->seen) {                  /* no class names it any more */
			alerts_get_cancel(a->tm, src);
			source_free(src);
			continue;
		}
		a->src[k++] = src;
		if (!src->inflight && alerts_get(a->tm, src->endpoint, got, src) == 0)
			src->inflight = true;
	}
	a->nsrc = k;
}

void amsil_start(struct tmon *tm)
{
	struct amsil *a = calloc(1, sizeof *a);
	struct timeval tv = { AMSIL_POLL_MS / 1000, (AMSIL_POLL_MS % 1000) * 1000 };

	if (!a || !(a->timer = event_new(tm->base, -1, EV_PERSIST, poll_all, a))) {
		cmon_err("alertmanager: out of memory; its silences are not read");
		free(a);
		return;
	}
	a->tm = tm;
	tm->amsil = a;
	event_add(a->timer, &tv);
	poll_all(-1, 0, a);
}

void amsil_stop(struct tmon *tm)
{
	struct amsil *a = tm->amsil;

	if (!a)
		return;
	tm->amsil = NULL;
	event_free(a->timer);
	for (size_t i = 0; i < a->nsrc; i++) {
		alerts_get_cancel(tm, a->src[i]);
		source_free(a->src[i]);
	}
	free(a);
}

/* The value of label `name` of alert `al` ("" if it has none). */
static const char *label(const struct amsil_alert *al, const char *name, char *buf, size_t size)
{
	if (!strcmp(name, "alertname") || !strcmp(name, "assert")) {
		if (al->assertion)
			return al->assertion;
		snprintf(buf, size, "line %d", al->line);
		return buf;
	}
	if (!strcmp(name, "prog"))
		return al->prog ? al->prog : "";
	if (!strcmp(name, "machine"))
		return al->machine ? al->machine : "";
	if (!strcmp(name, "pid")) {
		snprintf(buf, size, "%" PRId64, al->pid);
		return buf;
	}
	if (!strcmp(name, "class")) {
		snprintf(buf, size, "%" PRIu32, al->class_id);
		return buf;
	}
	return "";
}

static bool matcher_holds(const struct matcher *m, const struct amsil_alert *al)
{
	char buf[32];
	const char *v = label(al, m->name, buf, sizeof buf);
	bool hit;

	if (m->regex)
		hit = m->compiled && regexec(&m->re, v, 0, NULL, 0) == 0;
	else
		hit = !strcmp(m->value, v);
	if (m->regex && !m->compiled)
		return false;                      /* unknown pattern: never silences */
	return m->equal ? hit : !hit;
}

bool amsil_silenced(struct tmon *tm, const char *url, const struct amsil_alert *al, double now,
		    char *id, size_t idlen)
{
	struct amsil *a = tm->amsil;
	struct source *src;

	if (!a || !url || !(src = find(a, url)))
		return false;
	for (size_t i = 0; i < src->n; i++) {
		const struct silence *s = &src->s[i];
		bool all = s->ends > now && s->starts <= now;
		for (size_t k = 0; all && k < s->nm; k++)
			all = matcher_holds(&s->m[k], al);
		if (all) {
			snprintf(id, idlen, "%s", s->id);
			return true;
		}
	}
	return false;
}

void amsil_each_url(struct tmon *tm, void (*cb)(void *arg, const char *url), void *arg)
{
	const struct tm_class *c, *d;

	TAILQ_FOREACH(c, &tm->classes, link) {
		if (!c->alertmanager || !*c->alertmanager)
			continue;
		for (d = TAILQ_FIRST(&tm->classes); d != c; d = TAILQ_NEXT(d, link))
			if (d->alertmanager && !strcmp(d->alertmanager, c->alertmanager))
				break;
		if (d == c)                        /* its first class */
			cb(arg, c->alertmanager);
	}
}

size_t amsil_count(struct tmon *tm)
{
	struct amsil *a = tm->amsil;
	size_t n = 0;

	for (size_t i = 0; a && i < a->nsrc; i++)
		n += a->src[i]->n;
	return n;
}
