/* Grouping failure notices into mails (see digest.h). Groups live in a
 * small chained hash table keyed by (instance, assertion label, line). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "digest.h"

#define BUCKETS 4096

/* The failures of one (instance, assertion) waiting for a digest. */
struct group {
	struct group *next;       /* hash chain */
	uint64_t instance_id;     /* key: instance */
	char *assertion;          /* key: label ("" for unlabelled) */
	int line;                 /* key: line in the spec */
	char *prog, *machine;     /* for the subject */
	int64_t pid;              /* for the subject */
	char *spec;               /* for the body */
	char *to;                 /* recipients */
	char *ctl;                /* telemonctl command prefix */
	double period;            /* grouping period */
	double end;               /* when the current period ends */
	char *items[DIGEST_LIST_MAX]; /* failure paragraphs waiting */
	size_t nitems;            /* how many */
	size_t nmore;             /* failures beyond the list, only counted */
	uint64_t first_id;        /* first failure in the digest */
};

/* The grouping state. */
struct digest {
	struct group *table[BUCKETS]; /* hash buckets */
	size_t ngroups;           /* groups alive */
};

struct digest *digest_new(void)
{
	return calloc(1, sizeof(struct digest));
}

static void group_free(struct group *g)
{
	for (size_t i = 0; i < g->nitems; i++)
		free(g->items[i]);
	free(g->assertion);
	free(g->prog);
	free(g->machine);
	free(g->spec);
	free(g->to);
	free(g->ctl);
	free(g);
}

void digest_free(struct digest *d)
{
	if (!d)
		return;
	for (size_t b = 0; b < BUCKETS; b++)
		while (d->table[b]) {
			struct group *g = d->table[b];
			d->table[b] = g->next;
			group_free(g);
		}
	free(d);
}

void digest_mail_clear(struct digest_mail *m)
{
	free(m->to);
	free(m->subject);
	free(m->body);
	free(m->assertion);
	memset(m, 0, sizeof *m);
}

size_t digest_groups(const struct digest *d)
{
	return d->ngroups;
}

static size_t hash(uint64_t inst, const char *label, int line)
{
	uint64_t h = 1469598103934665603ull ^ inst;

	h *= 1099511628211ull;
	for (; *label; label++) {
		h ^= (unsigned char)*label;
		h *= 1099511628211ull;
	}
	h ^= (uint64_t)(unsigned)line;
	h *= 1099511628211ull;
	return (size_t)(h % BUCKETS);
}

/* printf into a fresh string; NULL on ENOMEM. */
static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, f);
	if (vasprintf(&s, f, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

/* `s` as one word for a POSIX shell: in single quotes, each ' written
 * '\'' (so a label with an apostrophe pastes as it is). Allocated. */
static char *shell_word(const char *s)
{
	size_t n = 3;
	char *q, *p;

	for (const char *c = s; *c; c++)
		n += *c == '\'' ? 4 : 1;
	if (!(q = malloc(n)))
		return NULL;
	p = q;
	*p++ = '\'';
	for (; *s; s++) {
		if (*s == '\'') {
			memcpy(p, "'\\''", 4);
			p += 4;
		} else {
			*p++ = *s;
		}
	}
	*p++ = '\'';
	*p = '\0';
	return q;
}

/* The mails' last line: the telemonctl command that lists every failure
 * of the assertion, ready to paste. Allocated. */
static char *all_of_them(const char *ctl, const char *prog, const char *assertion)
{
	char *q = shell_word(assertion ? assertion : ""), *line;

	if (!q)
		return NULL;
	line = fmt("All of them: %s failures --prog %s --assert %s\n", ctl, prog, q);
	free(q);
	return line;
}

static void iso_time(double t, char *out, size_t size)
{
	time_t s = (time_t)t;
	struct tm tm;

	gmtime_r(&s, &tm);
	strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The assertion as people read it: "read at most 10 ms" or "line 12". */
static void assertion_name(const char *label, int line, char *out, size_t size)
{
	if (label && *label)
		snprintf(out, size, "\"%s\"", label);
	else
		snprintf(out, size, "the assertion on line %d", line);
}

static void period_text(double p, char *out, size_t size)
{
	if (p >= 3600 && (long)p % 3600 == 0)
		snprintf(out, size, "%ld hour%s", (long)p / 3600, p == 3600 ? "" : "s");
	else if (p >= 60 && (long)p % 60 == 0)
		snprintf(out, size, "%ld min", (long)p / 60);
	else
		snprintf(out, size, "%g s", p);
}

/* The paragraph describing one failure. */
static char *paragraph(const struct digest_item *it)
{
	char when[40];

	iso_time(it->time, when, sizeof when);
	return fmt("Failure %" PRIu64 " at %s\n"
		   "  %s%slog timestamps %" PRId64 " to %" PRId64 "\n"
		   "  metrics: %s\n"
		   "  log window: %s window %" PRIu64 "\n",
		   it->failure_id, when, it->what ? it->what : "", it->what ? ", " : "",
		   it->start_ts, it->end_ts, it->metrics && *it->metrics ? it->metrics : "(none)",
		   it->ctl, it->failure_id);
}

/* Characters a subject line must not carry. */
static void one_line(char *s)
{
	for (; s && *s; s++)
		if (*s == '\r' || *s == '\n' || *s == '\t')
			*s = ' ';
}

static int prompt_mail(const struct digest_item *it, struct digest_mail *out)
{
	char name[600], per[40];
	char *para = paragraph(it), *all = all_of_them(it->ctl, it->prog, it->assertion);

	assertion_name(it->assertion, it->line, name, sizeof name);
	period_text(it->period, per, sizeof per);
	out->to = strdup(it->to);
	out->subject = fmt("[telemonitor] %s on %s pid %" PRId64 ": %s failed", it->prog,
			   it->machine, it->pid, name);
	if (it->period > 0)
		out->body = fmt("%s failed for program %s on machine %s, pid %" PRId64 "%s%s%s.\n\n"
				"%s\n"
				"Further failures of this assertion within %s will be sent together "
				"in one digest.\n%s",
				name, it->prog, it->machine, it->pid, it->spec ? " (spec " : "",
				it->spec ? it->spec : "", it->spec ? ")" : "", para ? para : "", per,
				all ? all : "");
	else
		out->body = fmt("%s failed for program %s on machine %s, pid %" PRId64 ".\n\n%s",
				name, it->prog, it->machine, it->pid, para ? para : "");
	out->count = 1;
	one_line(out->subject);
	free(para);
	free(all);
	if (!out->to || !out->subject || !out->body) {
		digest_mail_clear(out);
		return -ENOMEM;
	}
	return 1;
}

/* The group of `it`, or NULL; *bucket gets its hash bucket. */
static struct group *find_group(const struct digest *d, const struct digest_item *it,
				size_t *bucket)
{
	const char *label = it->assertion ? it->assertion : "";
	size_t b = hash(it->instance_id, label, it->line);
	struct group *g;

	for (g = d->table[b]; g; g = g->next)
		if (g->instance_id == it->instance_id && g->line == it->line &&
		    !strcmp(g->assertion, label))
			break;
	if (bucket)
		*bucket = b;
	return g;
}

/* A new, empty group for `it` in bucket `b`; NULL on ENOSPC or ENOMEM (*err). */
static struct group *new_group(struct digest *d, const struct digest_item *it, size_t b,
			       int *err)
{
	struct group *g;

	if (d->ngroups >= DIGEST_GROUPS_MAX) {
		*err = -ENOSPC;
		return NULL;
	}
	*err = -ENOMEM;
	g = calloc(1, sizeof *g);
	if (!g)
		return NULL;
	g->instance_id = it->instance_id;
	g->line = it->line;
	g->pid = it->pid;
	g->assertion = strdup(it->assertion ? it->assertion : "");
	g->prog = strdup(it->prog);
	g->machine = strdup(it->machine);
	g->spec = it->spec ? strdup(it->spec) : NULL;
	g->to = strdup(it->to);
	g->ctl = strdup(it->ctl);
	if (!g->assertion || !g->prog || !g->machine || !g->to || !g->ctl ||
	    (it->spec && !g->spec)) {
		group_free(g);
		return NULL;
	}
	g->next = d->table[b];
	d->table[b] = g;
	d->ngroups++;
	return g;
}

/* Add `it` to the digest its group is collecting. */
static int join_digest(struct group *g, const struct digest_item *it)
{
	if (g->nitems == 0 && g->nmore == 0)
		g->first_id = it->failure_id;
	if (g->nitems < DIGEST_LIST_MAX) {
		char *p = paragraph(it);
		if (!p)
			return -ENOMEM;
		g->items[g->nitems++] = p;
	} else {
		g->nmore++;
	}
	return 0;
}

int digest_add(struct digest *d, const struct digest_item *it, double now,
	       struct digest_mail *out)
{
	struct group *g;
	size_t b;
	int err;

	memset(out, 0, sizeof *out);
	if (it->period <= 0)
		return prompt_mail(it, out);
	g = find_group(d, it, &b);
	if (g && (now < g->end || g->nitems || g->nmore))
		/* inside a period (or its digest is due): add to the digest */
		return join_digest(g, it);
	if (!g) {
		g = new_group(d, it, b, &err);
		if (!g)
			return err;
	}
	g->period = it->period;
	g->end = now + it->period;
	return prompt_mail(it, out);
}

double digest_due_at(const struct digest *d, const struct digest_item *it)
{
	const struct group *g = find_group(d, it, NULL);

	return g ? g->end : 0;
}

int digest_restore(struct digest *d, const struct digest_item *it, double due)
{
	struct group *g;
	size_t b;
	int err;

	g = find_group(d, it, &b);
	if (!g) {
		g = new_group(d, it, b, &err);
		if (!g)
			return err;
		g->period = it->period > 0 ? it->period : DIGEST_DEFAULT_PERIOD;
		g->end = due;
	} else if (due < g->end) {
		g->end = due;
	}
	return join_digest(g, it);
}

static int digest_mail(struct group *g, struct digest_mail *out)
{
	char name[600], per[40], more[80] = "";
	size_t total = g->nitems + g->nmore, len = 0;
	char *list, *p, *all;

	for (size_t i = 0; i < g->nitems; i++)
		len += strlen(g->items[i]) + 1;
	list = malloc(len + 1);
	if (!list)
		return -ENOMEM;
	p = list;
	for (size_t i = 0; i < g->nitems; i++) {
		size_t n = strlen(g->items[i]);
		memcpy(p, g->items[i], n);
		p[n] = '\n';
		p += n + 1;
	}
	*p = '\0';
	assertion_name(g->assertion, g->line, name, sizeof name);
	period_text(g->period, per, sizeof per);
	if (g->nmore)
		snprintf(more, sizeof more, "... and %zu more not listed here.\n\n", g->nmore);
	out->to = strdup(g->to);
	out->subject = fmt("[telemonitor] %s on %s pid %" PRId64 ": %s failed %zu more time%s",
			   g->prog, g->machine, g->pid, name, total, total == 1 ? "" : "s");
	out->body = fmt("Digest: %s failed %zu more time%s within %s for program %s on "
			"machine %s, pid %" PRId64 "%s%s%s.\n\n%s%s%s",
			name, total, total == 1 ? "" : "s", per, g->prog, g->machine, g->pid,
			g->spec ? " (spec " : "", g->spec ? g->spec : "", g->spec ? ")" : "", list,
			more, (all = all_of_them(g->ctl, g->prog, g->assertion)) ? all : "");
	free(all);
	out->count = total;
	out->instance_id = g->instance_id;
	out->assertion = strdup(g->assertion);
	out->line = g->line;
	one_line(out->subject);
	free(list);
	if (!out->to || !out->subject || !out->body || !out->assertion) {
		digest_mail_clear(out);
		return -ENOMEM;
	}
	return 0;
}

size_t digest_due(struct digest *d, double now, struct digest_mail *out, size_t max)
{
	size_t n = 0;

	for (size_t b = 0; b < BUCKETS && n < max; b++) {
		struct group **pg = &d->table[b];
		while (*pg && n < max) {
			struct group *g = *pg;
			if (g->end > now) {
				pg = &g->next;
				continue;
			}
			if (g->nitems || g->nmore) {
				memset(&out[n], 0, sizeof out[n]);
				if (digest_mail(g, &out[n]) == 0)
					n++;
				for (size_t i = 0; i < g->nitems; i++)
					free(g->items[i]);
				g->nitems = g->nmore = 0;
				g->end = now + g->period;
				pg = &g->next;
				continue;
			}
			*pg = g->next;
			group_free(g);
			d->ngroups--;
		}
	}
	return n;
}

double digest_next_deadline(const struct digest *d)
{
	double t = 0;

	for (size_t b = 0; b < BUCKETS; b++)
		for (const struct group *g = d->table[b]; g; g = g->next)
			if (t == 0 || g->end < t)
				t = g->end;
	return t;
}

size_t digest_waiting(const struct digest *d, const struct digest_item *it)
{
	const struct group *g = find_group(d, it, NULL);

	return g ? g->nitems + g->nmore : 0;
}

int digest_resolved_mail(const struct digest_resolved *r, struct digest_mail *out)
{
	char name[600], per[40], first[40], last[40], when[40], why[200];
	char *all = all_of_them(r->ctl, r->prog, r->assertion);

	memset(out, 0, sizeof *out);
	assertion_name(r->assertion, r->line, name, sizeof name);
	period_text(r->resolve_after, per, sizeof per);
	iso_time(r->first, first, sizeof first);
	iso_time(r->last, last, sizeof last);
	iso_time(r->when, when, sizeof when);
	if (r->ended)
		snprintf(why, sizeof why, "the instance ended (%s)", when);
	else
		snprintf(why, sizeof why, "no failure for %s (resolve-after)", per);
	out->to = strdup(r->to);
	out->subject = fmt("[telemonitor] %s on %s pid %" PRId64 ": %s resolved", r->prog,
			   r->machine, r->pid, name);
	out->body = fmt("Resolved: %s of program %s on machine %s, pid %" PRId64 "%s%s%s: %s.\n\n"
			"It failed %zu time%s from %s to %s.\n%s",
			name, r->prog, r->machine, r->pid, r->spec ? " (spec " : "",
			r->spec ? r->spec : "", r->spec ? ")" : "", why, r->failures,
			r->failures == 1 ? "" : "s", first, last, all ? all : "");
	free(all);
	out->count = 0;
	one_line(out->subject);
	if (!out->to || !out->subject || !out->body) {
		digest_mail_clear(out);
		return -ENOMEM;
	}
	return 0;
}
