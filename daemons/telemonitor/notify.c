/* Failures -> mails: grouping (digest.c) on the loop, sending (mail.c) on
 * the mailer thread, which is started when the first mail is due. The
 * relay is the defaults' `smtp` (default smtp://localhost:25) and the
 * sender their `from` (default telemonitor@HOSTNAME).
 *
 * Mail survives a restart: what is not sent yet lives in the store, in
 * the same batches as the failures. A failure waiting for its group's
 * digest is a row of mail_digest; a composed mail (prompt or digest) a
 * row of mail_queue, handed to the mailer once its batch is committed (so
 * nothing is mailed about a failure a crash could still take back) and
 * deleted when the relay has accepted it. On start, the waiting failures
 * are put back into their digests and the queued mails are sent. A crash
 * after the relay accepted a mail but before its deletion was committed
 * sends it again (at least once; it keeps its Message-ID). While the store
 * is degraded (store.h) mails are not held back: their rows wait in the
 * store's backlog with the failures, and a mail row the backlog had to
 * drop is counted there (telemonctl status, store.dropped_mail).
 *
 * Mail follows the alerts' firing and resolved states (docs/alerting.md):
 * an (instance, assertion) mailed as failing, of a class with
 * (mail-resolved TRUE), is remembered as firing; it resolves when no
 * failure of it comes for the class's resolve-after, or when its instance
 * ends, and then a "resolved" mail is sent, after any digest of its
 * failures still waiting, unless a silence matches it by then. The pairs
 * firing are kept in memory only: after a restart, no resolved mail
 * comes for those mailed before it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amsilences.h"
#include "cmon/log.h"
#include "digest.h"
#include "failures.h"
#include "hygiene.h"
#include "mail.h"
#include "outbox.h"
#include "store.h"
#include "telemonitor.h"
#include "text.h"

#define DEFAULT_RELAY "smtp://localhost:25"

/* A composed mail in the open batch, handed to the mailer at its commit. */
struct pending {
	TAILQ_ENTRY(pending) link;    /* in notify.pending */
	uint64_t id;                  /* its row in mail_queue (0: none) */
	double queued;                /* when it was composed */
	struct digest_mail m;         /* the mail */
};
TAILQ_HEAD(pending_list, pending);

/* Limits. */
#define NOTIFY_FIRING_MAX DIGEST_GROUPS_MAX  /* pairs remembered as firing */
#define NOTIFY_RESOLVE_TICK_S 1              /* how often firing pairs are looked at */

/* An (instance, assertion) mailed as failing whose class wants a
 * "resolved" mail. */
struct firing {
	TAILQ_ENTRY(firing) link;     /* in notify.firing */
	uint64_t instance_id;         /* key: the instance */
	char *assertion;              /* key: its label, or NULL when unlabelled */
	int line;                     /* key: its line in the spec */
	uint32_t class_id;            /* the class monitoring the instance */
	char *prog, *machine;         /* for the mail and the silences */
	int64_t pid;                  /* for the mail */
	char *spec;                   /* for the mail (may be NULL) */
	char *to;                     /* recipients */
	char *alertmanager;           /* the class's Alertmanager (its silences), or NULL */
	size_t failures;              /* failures mailed since it began failing */
	double first, last;           /* the first and the last of them */
	double resolve_after;         /* quiet time that resolves it */
	bool ended;                   /* its instance ended (or left this node) */
};
TAILQ_HEAD(firing_list, firing);

/* The mail side of the service. */
struct notify {
	struct tmon *tm;              /* the service */
	struct digest *digest;        /* grouping */
	struct mailer *mailer;        /* the sending thread, or NULL until needed */
	struct outbox *outbox;        /* the mails handed over, oldest first (with the mailer) */
	struct event *timer;          /* the next digest is due */
	struct event *sent_ev;        /* the mailer has ended an attempt */
	struct pending_list pending;  /* composed, waiting for their batch's commit */
	uint64_t sent;                /* mails accepted by the relay since start */
	uint64_t dropped;             /* mails dropped (queue full) since start */
	size_t queued;                /* mails composed and neither sent nor dropped */
	struct firing_list firing;    /* pairs mailed as failing (mail-resolved classes) */
	size_t nfiring;               /* how many */
	struct event *resolve_timer;  /* looks at them every NOTIFY_RESOLVE_TICK_S */
};

static void on_sent(evutil_socket_t fd, short what, void *arg);

/* The outbox's send(): give the head to the mailer thread. */
static void mail_send(void *arg, const struct outbox_item *it)
{
	struct notify *n = arg;

	if (mailer_send(n->mailer, it->id, it->queued, it->payload) < 0)
		outbox_abandon(n->outbox);    /* stopped: it stays in the store */
}

/* The outbox's forget(): mail `id` was accepted or dropped. */
static void mail_forget(void *arg, uint64_t id)
{
	struct notify *n = arg;

	store_mail_done(n->tm->store, id);
}

static void mail_release(void *payload)
{
	if (payload)
		digest_mail_clear(payload);
	free(payload);
}

/* The relay as a transport of the outbox. */
static const struct outbox_ops mail_ops = {
	.send = mail_send, .forget = mail_forget, .release = mail_release,
};

static bool ensure_mailer(struct notify *n)
{
	struct tmon *tm = n->tm;
	const char *url = rc_text(tm->rc, NULL, RC_SMTP), *from = rc_text(tm->rc, NULL, RC_FROM);
	char host[128] = "localhost", dflt[200];

	if (n->mailer)
		return true;
	if (!*url)
		url = DEFAULT_RELAY;
	if (!*from) {
		gethostname(host, sizeof host - 1);
		for (char *c = host; *c; c++)
			if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			      (*c >= '0' && *c <= '9') || *c == '.' || *c == '-'))
				*c = '-';
		snprintf(dflt, sizeof dflt, "telemonitor@%s", host);
		from = dflt;
	}
	const struct cmon_backoff backoff = { .min_ms = (unsigned)(MAIL_BACKOFF_MIN_S * 1000),
					      .max_ms = (unsigned)(MAIL_BACKOFF_MAX_S * 1000),
					      .jitter_pct = 20 };
	n->mailer = mailer_new(url, from);
	n->outbox = outbox_new(tm->base, &mail_ops, n, MAIL_QUEUE_MAX, &backoff);
	if (!n->mailer || !n->outbox) {
		cmon_err("cannot start the mailer");
		mailer_free(n->mailer);
		outbox_free(n->outbox);
		n->mailer = NULL;
		n->outbox = NULL;
		return false;
	}
	n->sent_ev = event_new(tm->base, mailer_fd(n->mailer), EV_READ | EV_PERSIST, on_sent, n);
	if (!n->sent_ev || event_add(n->sent_ev, NULL) < 0)
		cmon_err("mailer: cannot watch for sent mail; it is sent again after a restart");
	cmon_info("mail goes through %s from %s", url, from);
	return true;
}

/* Give mail `id` to the mailer (`m` is taken). */
static void hand_over(struct notify *n, uint64_t id, double queued, struct digest_mail *m)
{
	struct digest_mail *copy;
	int r;

	if (!ensure_mailer(n)) {
		digest_mail_clear(m);          /* it stays in the store for the next start */
		return;
	}
	if ((copy = malloc(sizeof *copy))) {
		*copy = *m;
		memset(m, 0, sizeof *m);
	} else {
		digest_mail_clear(m);
	}
	r = copy ? outbox_add(n->outbox, id, queued, copy, true) : -ENOMEM;
	if (r == 1) {
		n->dropped++;
		n->queued--;
	} else if (r < 0) {
		cmon_warn("mail: out of memory; a mail waits for the next start");
	}
}

/* A batch has ended: its mails may go. If the store is degraded, their
 * rows are held in memory and stored (then deleted once sent, in that
 * order) when it recovers; the mail goes now all the same. */
static void on_commit(void *arg, bool committed)
{
	struct notify *n = arg;
	struct pending *p;

	(void)committed;
	while ((p = TAILQ_FIRST(&n->pending))) {
		TAILQ_REMOVE(&n->pending, p, link);
		hand_over(n, p->id, p->queued, &p->m);
		free(p);
	}
}

/* Queue `m` (taken) in the store and, once committed, at the mailer. */
static void queue_mail(struct notify *n, struct digest_mail *m, double now)
{
	struct store *st = n->tm->store;
	struct pending *p;
	uint64_t id = 0;

	n->queued++;
	if (store_mail_add(st, m->to, m->subject, m->body, m->count, now, &id) < 0 ||
	    !store_pending(st) || !(p = calloc(1, sizeof *p))) {
		hand_over(n, id, now, m);       /* not kept: send it all the same */
		return;
	}
	p->id = id;
	p->queued = now;
	p->m = *m;
	memset(m, 0, sizeof *m);
	TAILQ_INSERT_TAIL(&n->pending, p, link);
}

/* The mailer has ended an attempt: a mail the relay accepted is
 * forgotten in the store (by the outbox), one it did not is sent again
 * after a backoff. */
static void take_sent(struct notify *n)
{
	const struct digest_mail *m;
	char err[256];
	int r;

	if (!n->mailer || (r = mailer_result(n->mailer, err, sizeof err)) > 0)
		return;
	if (r == 0) {
		n->sent++;
		if (n->queued)
			n->queued--;
		outbox_done(n->outbox, OUTBOX_SENT, NULL);
		return;
	}
	m = outbox_head(n->outbox);
	if (m && (!outbox_last_error(n->outbox)[0] || strcmp(outbox_last_error(n->outbox), err)))
		cmon_warn("mail to %s via %s failed: %s; retrying with backoff", m->to,
			  mailer_url(n->mailer), err);
	outbox_done(n->outbox, OUTBOX_RETRY, err);
}

static void on_sent(evutil_socket_t fd, short what, void *arg)
{
	take_sent(arg);
}

static void schedule(struct notify *n)
{
	double when = digest_next_deadline(n->digest), now = tm_now();
	struct timeval tv = { 0, 0 };

	evtimer_del(n->timer);
	if (when <= 0)
		return;
	if (when > now) {
		tv.tv_sec = (time_t)(when - now);
		tv.tv_usec = (suseconds_t)((when - now - (double)tv.tv_sec) * 1e6);
	}
	evtimer_add(n->timer, &tv);
}

static void due(evutil_socket_t fd, short what, void *arg)
{
	struct notify *n = arg;
	struct digest_mail out[16];
	double now = tm_now();
	size_t k;

	do {
		k = digest_due(n->digest, now, out, 16);
		for (size_t i = 0; i < k; i++) {
			/* the digest replaces its waiting failures, in one batch */
			store_digest_done(n->tm->store, out[i].instance_id, out[i].assertion,
					  out[i].line);
			queue_mail(n, &out[i], now);
			digest_mail_clear(&out[i]);
		}
	} while (k == 16);
	schedule(n);
}

/* store_digest_load(): a failure that was waiting for its digest. */
static void restore_waiting(void *arg, const struct digest_item *it, double when)
{
	struct notify *n = arg;

	if (digest_restore(n->digest, it, when) < 0)
		cmon_warn("mail: cannot put failure %llu back into its digest",
			  (unsigned long long)it->failure_id);
}

/* store_mail_load(): a mail that was not sent yet. */
static void restore_queued(void *arg, uint64_t id, double queued, const char *to,
			   const char *subject, const char *body, size_t count)
{
	struct notify *n = arg;
	struct pending *p = calloc(1, sizeof *p);

	if (p) {
		p->id = id;
		p->queued = queued;
		p->m.to = strdup(to ? to : "");
		p->m.subject = strdup(subject ? subject : "");
		p->m.body = strdup(body ? body : "");
		p->m.count = count;
	}
	if (!p || !p->m.to || !p->m.subject || !p->m.body) {
		if (p)
			digest_mail_clear(&p->m);
		free(p);
		cmon_warn("mail: out of memory; mail %llu waits for the next start",
			  (unsigned long long)id);
		return;
	}
	TAILQ_INSERT_TAIL(&n->pending, p, link);
	n->queued++;
}

/* Take over the mail telemonitor `from` queued and did not send (after
 * taking over one of its instances; store_adopt_mail()). */
static void notify_adopt(struct tmon *tm, const char *from)
{
	struct notify *n = tm->notify;
	size_t before;

	if (!n)
		return;
	before = n->queued;
	if (store_adopt_mail(tm->store, from, tm->ctl_hint, restore_queued, restore_waiting, n) == 0 &&
	    n->queued > before)
		cmon_notice("mail: %zu mail%s of %s adopted", n->queued - before,
			    n->queued - before == 1 ? "" : "s", from);
	schedule(n);
}

/* --- resolved mail ------------------------------------------------------------ */

static void firing_free(struct firing *f)
{
	if (!f)
		return;
	free(f->assertion);
	free(f->prog);
	free(f->machine);
	free(f->spec);
	free(f->to);
	free(f->alertmanager);
	free(f);
}

static char *dup_opt(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* Does class `class_id` (or the defaults, if it is gone) want resolved mail? */
static bool wants_resolved(struct tmon *tm, uint32_t class_id)
{
	const struct tm_class *c = classes_find(tm, class_id);
	const struct rc_class *k = NULL;

	if (!tm->rc)
		return false;
	if (c && c->index < tm->rc->nclasses)
		k = &tm->rc->classes[c->index];
	return rc_flag(tm->rc, k, RC_MAIL_RESOLVED);
}

/* A failure of `ev` was mailed (or joined a digest): its pair fires, from
 * now on or once more. */
static void firing_note(struct notify *n, const struct failure_event *ev)
{
	const char *label = ev->f.assertion;
	struct firing *f;
	struct timeval tick = { NOTIFY_RESOLVE_TICK_S, 0 };

	TAILQ_FOREACH(f, &n->firing, link)
		if (f->instance_id == ev->in->id && f->line == ev->f.line &&
		    (label ? f->assertion && !strcmp(f->assertion, label) : !f->assertion))
			break;
	if (!f) {
		if (n->nfiring >= NOTIFY_FIRING_MAX || !(f = calloc(1, sizeof *f)))
			return;                 /* no resolved mail for it */
		f->instance_id = ev->in->id;
		f->line = ev->f.line;
		f->class_id = ev->class_id;
		f->pid = ev->in->pid;
		f->assertion = dup_opt(label);
		f->prog = strdup(ev->in->prog);
		f->machine = strdup(ev->in->machine);
		f->spec = dup_opt(ev->f.spec);
		f->to = strdup(ev->mail);
		f->alertmanager = ev->alertmanager && *ev->alertmanager ? strdup(ev->alertmanager)
									 : NULL;
		f->first = ev->f.time;
		if ((label && !f->assertion) || !f->prog || !f->machine || !f->to ||
		    (ev->f.spec && !f->spec) ||
		    (ev->alertmanager && *ev->alertmanager && !f->alertmanager)) {
			firing_free(f);
			return;
		}
		TAILQ_INSERT_TAIL(&n->firing, f, link);
		n->nfiring++;
	}
	f->failures++;
	f->last = ev->f.time;
	f->resolve_after = ev->resolve_after > 0 ? ev->resolve_after : RC_RESOLVE_AFTER_DEFAULT;
	if (!evtimer_pending(n->resolve_timer, NULL))
		evtimer_add(n->resolve_timer, &tick);
}

/* Is pair `f` silenced at `now` (by the same silences as its failures)? */
static bool firing_silenced(struct tmon *tm, const struct firing *f, double now)
{
	struct amsil_alert al = {
		.prog = f->prog, .machine = f->machine, .pid = f->pid, .class_id = f->class_id,
		.assertion = f->assertion, .line = f->line,
	};
	char id[AMSIL_ID_MAX];

	if (f->alertmanager)
		return amsil_silenced(tm, f->alertmanager, &al, now, id, sizeof id);
	return hygiene_silenced(tm, f->prog, f->machine, f->assertion, f->line, now) != 0;
}

/* Every NOTIFY_RESOLVE_TICK_S while pairs fire: those quiet for their
 * resolve-after, or whose instance has ended, resolve, once their
 * waiting digest (if any) has gone; a resolved mail for each that no
 * silence matches. */
static void resolve_tick(evutil_socket_t fd, short what, void *arg)
{
	struct notify *n = arg;
	struct tmon *tm = n->tm;
	double now = tm_now();
	struct firing *f, *next;
	struct timeval tick = { NOTIFY_RESOLVE_TICK_S, 0 };

	(void)fd, (void)what;
	for (f = TAILQ_FIRST(&n->firing); f; f = next) {
		bool ended = f->ended;
		struct digest_item key = { .instance_id = f->instance_id, .assertion = f->assertion,
					   .line = f->line };
		next = TAILQ_NEXT(f, link);
		if ((!ended && now < f->last + f->resolve_after) ||
		    digest_waiting(n->digest, &key))
			continue;
		if (!firing_silenced(tm, f, now)) {
			struct digest_resolved r = {
				.prog = f->prog, .machine = f->machine, .pid = f->pid, .spec = f->spec,
				.assertion = f->assertion, .line = f->line, .failures = f->failures,
				.first = f->first, .last = f->last, .resolve_after = f->resolve_after,
				.ended = ended && now < f->last + f->resolve_after, .when = now,
				.to = f->to, .ctl = tm->ctl_hint,
			};
			struct digest_mail m;
			if (digest_resolved_mail(&r, &m) == 0) {
				queue_mail(n, &m, now);
				digest_mail_clear(&m);
			} else {
				cmon_warn("mail: out of memory; no resolved mail for %s on %s pid %lld",
					  f->prog, f->machine, (long long)f->pid);
			}
		}
		TAILQ_REMOVE(&n->firing, f, link);
		n->nfiring--;
		firing_free(f);
	}
	if (n->nfiring)
		evtimer_add(n->resolve_timer, &tick);
}

void notify_start(struct tmon *tm)
{
	struct notify *n = calloc(1, sizeof *n);
	size_t waiting;

	if (!n)
		goto fail;
	n->tm = tm;
	TAILQ_INIT(&n->pending);
	TAILQ_INIT(&n->firing);
	n->digest = digest_new();
	n->timer = evtimer_new(tm->base, due, n);
	n->resolve_timer = evtimer_new(tm->base, resolve_tick, n);
	if (!n->digest || !n->timer || !n->resolve_timer)
		goto fail;
	tm->notify = n;
	store_set_commit_cb(tm->store, on_commit, n);
	/* what was not mailed when we stopped */
	store_digest_load(tm->store, tm->ctl_hint, restore_waiting, n);
	store_mail_load(tm->store, restore_queued, n);
	waiting = digest_groups(n->digest);
	if (n->queued || waiting)
		cmon_notice("mail: %zu mail%s to send and %zu digest%s to finish from before the "
			    "restart", n->queued, n->queued == 1 ? "" : "s", waiting,
			    waiting == 1 ? "" : "s");
	on_commit(n, true);                    /* they are committed already */
	schedule(n);
	return;
fail:
	cmon_err("mail: out of memory; no mail is sent");
	if (n) {
		digest_free(n->digest);
		if (n->timer)
			event_free(n->timer);
		if (n->resolve_timer)
			event_free(n->resolve_timer);
		free(n);
	}
}

void notify_stop(struct tmon *tm)
{
	struct notify *n = tm->notify;
	struct pending *p;
	struct firing *f;

	if (!n)
		return;
	tm->notify = NULL;
	store_set_commit_cb(tm->store, NULL, NULL);
	/* mails accepted up to now are forgotten; the others stay in the store */
	mailer_stop(n->mailer);
	take_sent(n);
	if (n->outbox)
		outbox_abandon(n->outbox);     /* a mail in flight stays in the store */
	if (n->queued)
		cmon_notice("mail: %zu mail%s not sent yet, kept for the next start", n->queued,
			    n->queued == 1 ? "" : "s");
	while ((p = TAILQ_FIRST(&n->pending))) {  /* their batch is committed at close */
		TAILQ_REMOVE(&n->pending, p, link);
		digest_mail_clear(&p->m);
		free(p);
	}
	if (n->sent_ev)
		event_free(n->sent_ev);
	mailer_free(n->mailer);
	outbox_free(n->outbox);
	event_free(n->timer);
	event_free(n->resolve_timer);
	while ((f = TAILQ_FIRST(&n->firing))) {   /* no resolved mail: kept in memory only */
		TAILQ_REMOVE(&n->firing, f, link);
		firing_free(f);
	}
	digest_free(n->digest);
	free(n);
}

/* A failure (failures.h) of a class with `mail`: mail it now or add it
 * to a digest. */
static void notify_failure(struct tmon *tm, const struct failure_event *ev)
{
	struct notify *n = tm->notify;
	const struct tm_instance *in = ev->in;
	double now = ev->f.time;
	char *metrics;
	struct digest_mail m;
	struct digest_item it = {
		.instance_id = in->id, .prog = in->prog, .machine = in->machine, .pid = in->pid,
		.spec = ev->f.spec, .assertion = ev->f.assertion, .line = ev->f.line,
		.failure_id = ev->id, .time = now, .what = ev->what && *ev->what ? ev->what : NULL,
		.start_ts = ev->f.start_ts, .end_ts = ev->f.end_ts, .to = ev->mail,
		.ctl = tm->ctl_hint, .period = ev->mailgroup,
	};
	int r;

	if (!n || !ev->mail)
		return;
	metrics = render_metrics(ev->f.metrics);
	it.metrics = metrics;
	r = digest_add(n->digest, &it, now, &m);
	if (r >= 0 && wants_resolved(tm, ev->class_id))
		firing_note(n, ev);
	if (r == 1) {
		queue_mail(n, &m, now);
		digest_mail_clear(&m);
	} else if (r == 0) {
		store_digest_add(tm->store, &it, digest_due_at(n->digest, &it));
	} else if (r == -ENOSPC) {
		static bool warned;
		if (!warned)
			cmon_warn("too many assertions being grouped for mail; some failures "
				  "are not mailed");
		warned = true;
	}
	schedule(n);
	free(metrics);
}

/* Pairs of an instance that ended resolve at the next tick. */
static void notify_ended(struct tmon *tm, uint64_t id)
{
	struct notify *n = tm->notify;
	struct firing *f;

	if (!n)
		return;
	TAILQ_FOREACH(f, &n->firing, link)
		if (f->instance_id == id)
			f->ended = true;
}

const struct failure_subscriber notify_failures = {
	.name = "mail", .on_failure = notify_failure, .on_adopt = notify_adopt,
	.on_ended = notify_ended,
};

void notify_stats(struct tmon *tm, struct notify_stats *out)
{
	struct notify *n = tm->notify;
	struct outbox_stats st;

	memset(out, 0, sizeof *out);
	if (!n)
		return;
	outbox_stats(n->outbox, &st);
	out->sent = n->sent;
	out->failed = st.failed;
	out->dropped = n->dropped;
	out->queued = n->queued;
	snprintf(out->last_error, sizeof out->last_error, "%s", st.last_error);
}

const char *notify_status(struct tmon *tm, char *buf, size_t size)
{
	struct notify *n = tm->notify;
	struct outbox_stats st;

	if (!n || (!n->mailer && !n->queued)) {
		snprintf(buf, size, "no mail sent yet");
		return buf;
	}
	outbox_stats(n->outbox, &st);
	snprintf(buf, size, "%llu sent, %zu queued, %llu failed attempts, %llu dropped%s%s",
		 (unsigned long long)n->sent, n->queued, (unsigned long long)st.failed,
		 (unsigned long long)n->dropped, st.last_error[0] ? "; last error: " : "",
		 st.last_error);
	return buf;
}
