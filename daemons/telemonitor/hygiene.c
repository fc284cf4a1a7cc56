/* Alert hygiene: silences and retention (see hygiene.h). */
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmon/log.h"
#include "hygiene.h"
#include "store.h"
#include "window.h"

/* One active silence, as in the store. */
struct silence {
	uint64_t id;                      /* its id */
	double until;                     /* when it ends */
	char prog[HYG_PATTERN_MAX];       /* patterns ("" = any) */
	char machine[HYG_PATTERN_MAX];
	char assertion[HYG_PATTERN_MAX];
};

/* The hygiene side of the service. */
struct hygiene {
	struct tmon *tm;                  /* the service */
	struct silence *s;                /* active silences, by id */
	size_t n;                         /* how many */
	struct event *timer;              /* retention's batches */
	struct store_pruned round;        /* pruned in the current round */
	uint64_t pruned;                  /* failures pruned since start */
};

static bool pattern_ok(const char *p)
{
	return !p || strlen(p) < HYG_PATTERN_MAX;
}

static void copy(char *dst, const char *src)
{
	snprintf(dst, HYG_PATTERN_MAX, "%s", src ? src : "");
}

static bool matches(const char *pattern, const char *s)
{
	return !*pattern || fnmatch(pattern, s ? s : "", 0) == 0;
}

static int remember(struct hygiene *h, const struct store_silence *ss)
{
	struct silence *s;

	if (h->n >= HYG_SILENCES_MAX)
		return -ENOSPC;
	if (!h->s && !(h->s = calloc(HYG_SILENCES_MAX, sizeof *h->s)))
		return -ENOMEM;
	s = &h->s[h->n++];
	s->id = ss->id;
	s->until = ss->until;
	copy(s->prog, ss->prog);
	copy(s->machine, ss->machine);
	copy(s->assertion, ss->assertion);
	return 0;
}

/* store_silences_load(): an active silence. */
static void loaded(void *arg, const struct store_silence *ss)
{
	if (remember(arg, ss) < 0)
		cmon_warn("silences: more than %d active; silence %" PRIu64 " is ignored",
			  HYG_SILENCES_MAX, ss->id);
}

/* Forget the silences that ended. */
static void expire(struct hygiene *h, double now)
{
	size_t k = 0;

	for (size_t i = 0; i < h->n; i++)
		if (h->s[i].until > now)
			h->s[k++] = h->s[i];
	h->n = k;
}

double hygiene_retention(const struct tmon *tm)
{
	const char *v = rc_text(tm->rc, NULL, RC_RETENTION);
	double secs = 0;

	if (!*v || window_parse_duration(v, &secs) < 0)
		return 0;
	return secs;
}

/* Retention: one small batch of DELETEs; log a round once it is caught up. */
static void prune(evutil_socket_t fd, short what, void *arg)
{
	struct hygiene *h = arg;
	struct store_pruned p;
	double keep = hygiene_retention(h->tm), now = tm_now();

	expire(h, now);
	if (keep <= 0 || store_prune(h->tm->store, now - keep, HYG_PRUNE_ROWS, &p) < 0)
		return;
	h->round.failures += p.failures;
	h->round.windows += p.windows;
	h->round.verdicts += p.verdicts;
	h->round.mail += p.mail;
	h->round.silences += p.silences;
	h->pruned += p.failures;
	if (p.failures == HYG_PRUNE_ROWS || p.windows == HYG_PRUNE_ROWS ||
	    p.verdicts >= HYG_PRUNE_ROWS || p.mail >= HYG_PRUNE_ROWS ||
	    p.silences == HYG_PRUNE_ROWS)
		return;                        /* more to come at the next tick */
	if (h->round.failures || h->round.windows || h->round.verdicts || h->round.mail || h->round.silences)
		cmon_notice("retention: pruned %" PRIu64 " failures, %" PRIu64 " windows, %" PRIu64
			    " verdicts, %" PRIu64 " unsent mails and %" PRIu64 " ended silences "
			    "older than %s", h->round.failures, h->round.windows, h->round.verdicts,
			    h->round.mail, h->round.silences, rc_text(h->tm->rc, NULL, RC_RETENTION));
	memset(&h->round, 0, sizeof h->round);
}

void hygiene_start(struct tmon *tm)
{
	struct hygiene *h = calloc(1, sizeof *h);
	struct timeval tv = { HYG_PRUNE_MS / 1000, (HYG_PRUNE_MS % 1000) * 1000 };

	if (!h || !(h->timer = event_new(tm->base, -1, EV_PERSIST, prune, h))) {
		cmon_err("hygiene: out of memory; no silences and no retention");
		free(h);
		return;
	}
	h->tm = tm;
	tm->hygiene = h;
	store_silences_load(tm->store, tm_now(), loaded, h);
	if (h->n)
		cmon_info("%zu silence%s active", h->n, h->n == 1 ? "" : "s");
	event_add(h->timer, &tv);
}

void hygiene_stop(struct tmon *tm)
{
	struct hygiene *h = tm->hygiene;

	if (!h)
		return;
	tm->hygiene = NULL;
	event_free(h->timer);
	free(h->s);
	free(h);
}

uint64_t hygiene_silenced(struct tmon *tm, const char *prog, const char *machine,
			  const char *assertion, int line, double now)
{
	struct hygiene *h = tm->hygiene;
	char name[32];

	if (!h || !h->n)
		return 0;
	if (!assertion) {
		snprintf(name, sizeof name, "line %d", line);
		assertion = name;
	}
	for (size_t i = 0; i < h->n; i++) {
		const struct silence *s = &h->s[i];
		if (s->until > now && matches(s->prog, prog) && matches(s->machine, machine) &&
		    matches(s->assertion, assertion))
			return s->id;
	}
	return 0;
}

int hygiene_silence_add(struct tmon *tm, const char *prog, const char *machine,
			const char *assertion, double until, const char *comment, uint64_t *id,
			char *err, size_t errlen)
{
	struct hygiene *h = tm->hygiene;
	double now = tm_now();
	struct store_silence ss = {
		.created = now, .until = until, .prog = prog && *prog ? prog : NULL,
		.machine = machine && *machine ? machine : NULL,
		.assertion = assertion && *assertion ? assertion : NULL,
		.comment = comment && *comment ? comment : NULL,
	};

	if (!h) {
		snprintf(err, errlen, "silences are not available (out of memory at start)");
		return -EIO;
	}
	if (!ss.prog && !ss.machine && !ss.assertion) {
		snprintf(err, errlen, "silence add: give at least one matcher (prog=, machine=, "
			 "assert=)");
		return -EINVAL;
	}
	if (!pattern_ok(prog) || !pattern_ok(machine) || !pattern_ok(assertion)) {
		snprintf(err, errlen, "silence add: a pattern is longer than %d bytes",
			 HYG_PATTERN_MAX - 1);
		return -EINVAL;
	}
	if (comment && strlen(comment) > HYG_COMMENT_MAX) {
		snprintf(err, errlen, "silence add: the comment is longer than %d bytes",
			 HYG_COMMENT_MAX);
		return -EINVAL;
	}
	if (!(until > now) || until - now > HYG_SILENCE_MAX_S) {
		snprintf(err, errlen, "silence add: the end must be in the future, at most 366 "
			 "days away");
		return -EINVAL;
	}
	expire(h, now);
	if (h->n >= HYG_SILENCES_MAX) {
		snprintf(err, errlen, "silence add: %d silences are active already",
			 HYG_SILENCES_MAX);
		return -ENOSPC;
	}
	if (store_silence_add(tm->store, &ss, &ss.id) < 0) {
		snprintf(err, errlen, "silence add: the store refused it");
		return -EIO;
	}
	if (remember(h, &ss) < 0) {
		snprintf(err, errlen, "silence add: out of memory");
		return -ENOMEM;
	}
	store_commit(tm->store);
	*id = ss.id;
	cmon_notice("silence %" PRIu64 " added: prog=%s machine=%s assert=%s for %.0f s%s%s", ss.id,
		    ss.prog ? ss.prog : "*", ss.machine ? ss.machine : "*",
		    ss.assertion ? ss.assertion : "*", until - now, ss.comment ? ": " : "",
		    ss.comment ? ss.comment : "");
	return 0;
}

int hygiene_silence_rm(struct tmon *tm, uint64_t id, char *err, size_t errlen)
{
	struct hygiene *h = tm->hygiene;

	for (size_t i = 0; h && i < h->n; i++) {
		if (h->s[i].id != id)
			continue;
		h->s[i] = h->s[--h->n];
		store_silence_remove(tm->store, id, tm_now());
		store_commit(tm->store);
		cmon_notice("silence %" PRIu64 " removed", id);
		return 0;
	}
	snprintf(err, errlen, "silence rm: no active silence %" PRIu64 " (telemonctl silence list)",
		 id);
	return -ENOENT;
}

uint64_t hygiene_pruned(const struct tmon *tm)
{
	const struct hygiene *h = tm->hygiene;

	return h ? h->pruned : 0;
}

const char *hygiene_status(struct tmon *tm, char *buf, size_t size)
{
	struct hygiene *h = tm->hygiene;
	const char *v = rc_text(tm->rc, NULL, RC_RETENTION);

	if (!*v)
		snprintf(buf, size, "keep everything");
	else
		snprintf(buf, size, "%s (%" PRIu64 " failures pruned since start)", v,
			 h ? h->pruned : 0);
	return buf;
}
