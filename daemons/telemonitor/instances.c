/* The instances we know of (see telemonitor.h) and what to do with them:
 * an instance of an `auto` class is monitored at once (new instances from
 * their first record: snarflog holds the program's log for us); others are
 * listed until `telemonctl start`. At startup the instances that had not
 * ended are read back from the store and those we were monitoring are
 * re-attached straight away through their saved data endpoints; the
 * registry confirms the rest, and whatever it does not list once it has
 * answered every subscription is marked gone. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alerts.h"
#include "cmon/log.h"
#include "ledger.h"
#include "session.h"
#include "store.h"

double tm_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void instances_set_status(struct tm_instance *in, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(in->status, sizeof in->status, fmt, ap);
	va_end(ap);
	in->dirty = true;
}

struct tm_instance *instances_find(struct tmon *tm, uint64_t id)
{
	struct tm_instance *in;

	TAILQ_FOREACH(in, &tm->instances, link)
		if (in->id == id)
			return in;
	return NULL;
}

static struct tm_instance *find_key(struct tmon *tm, const char *prog, const char *machine,
				    int64_t pid, int64_t start_ns)
{
	struct tm_instance *in;

	TAILQ_FOREACH(in, &tm->instances, link)
		if (in->pid == pid && in->start_ns == start_ns && !strcmp(in->prog, prog) &&
		    !strcmp(in->machine, machine))
			return in;
	return NULL;
}

static void drop(struct tmon *tm, struct tm_instance *in)
{
	TAILQ_REMOVE(&tm->instances, in, link);
	tm->ninstances--;
	free(in);
}

/* Begin monitoring `in` as class `c` (NULL: none matches it any more);
 * `from_start`: it was just announced. */
static void monitor(struct tmon *tm, struct tm_instance *in, const struct tm_class *c,
		    bool from_start)
{
	int r;

	in->want = true;
	in->dirty = true;
	r = c ? session_start(tm, in, c, from_start) : -ENOENT;
	if (r == -ENOSPC) {
		/* past capacity: said, and queued (instances_start_waiting) */
		if (!in->waiting)
			cmon_warn("instance %" PRIu64 " (%s on %s pid %" PRId64 "): %zu instances are "
				  "monitored (max-sessions); it waits for one to end", in->id,
				  in->prog, in->machine, in->pid, tm->nsessions);
		in->waiting = true;
		instances_set_status(in, "waiting: %zu instances monitored at once (max-sessions); "
				     "its log is lost meanwhile (counted)", tm->nsessions);
		in->state = IS_LISTED;
		return;
	}
	in->waiting = false;
	if (r < 0) {
		instances_set_status(in, "cannot monitor: %s",
				     r == -ENOENT ? "no class matches it any more" : strerror(-r));
		cmon_warn("instance %" PRIu64 " (%s on %s pid %" PRId64 "): %s", in->id, in->prog,
			  in->machine, in->pid, in->status);
		in->state = IS_LISTED;
		return;
	}
	store_instance_save(tm->store, in);   /* re-attached after a crash even if it comes soon */
}

static void loaded(void *arg, struct tm_instance *saved)
{
	struct tmon *tm = arg;
	struct tm_instance *in;

	if (tm->ninstances >= TM_INSTANCES_MAX)
		return;
	if (store_shared(tm->store) && store_instance_claim(tm->store, saved->id, tm_now()) != 1)
		return;                 /* another telemonitor took it while we were away */
	in = malloc(sizeof *in);
	if (!in)
		return;
	*in = *saved;
	in->up = false;
	in->confirmed = false;
	in->sess = NULL;
	in->dirty = false;
	if (!classes_find(tm, in->class_id)) {
		struct tm_class *c = classes_match(tm, in->prog, in->machine, in->pid);
		in->class_id = c ? c->id : 0;
	}
	TAILQ_INSERT_TAIL(&tm->instances, in, link);
	tm->ninstances++;
}

int instances_load(struct tmon *tm)
{
	struct tm_instance *in, *next;
	int r = store_instances_open(tm->store, loaded, tm);
	size_t again = 0;

	if (r < 0)
		return r;
	for (in = TAILQ_FIRST(&tm->instances); in; in = next) {
		next = TAILQ_NEXT(in, link);
		if (in->want && in->class_id && (in->state == IS_MONITORING ||
						 in->state == IS_RETRYING || in->state == IS_BUSY)) {
			instances_set_status(in, "re-attaching after a restart");
			monitor(tm, in, classes_find(tm, in->class_id), false);
			again++;
		} else if (in->state == IS_MONITORING || in->state == IS_RETRYING) {
			in->state = IS_LISTED;
		}
	}
	if (tm->ninstances)
		cmon_notice("%zu instances were running when we stopped; re-attaching %zu",
			    tm->ninstances, again);
	return 0;
}

/* Remember the instance's token, if the registry sent one (a snarflog
 * that predates tokens has none). */
static void take_token(struct tm_instance *in, const Cmon__InstanceUp *up)
{
	if (!up->has_token || up->token.len != CMON_TOKEN_LEN)
		return;
	if (!in->has_token || memcmp(in->token, up->token.data, CMON_TOKEN_LEN) != 0)
		in->dirty = true;
	in->has_token = true;
	memcpy(in->token, up->token.data, CMON_TOKEN_LEN);
}

void instances_up(struct tmon *tm, unsigned link, const Cmon__InstanceUp *up)
{
	const Cmon__Instance *a = up->instance;
	uint32_t sub_id = up->sub_id;
	bool is_new = up->has_is_new && up->is_new;
	struct tm_instance *in;
	struct tm_class *c;
	char why[200];
	int r;

	if (!cmon_instance_ok(a, why, sizeof why) || !a->data_endpoint || !a->has_pid) {
		cmon_warn("registry: ignoring a bad instance: %s", why);
		return;
	}
	in = find_key(tm, a->program, a->machine, a->pid, a->start_unix_ns);
	if (!in) {
		c = classes_match(tm, a->program, a->machine, a->pid);
		if (!c)
			c = classes_find(tm, sub_id);
		if (!c)
			return;                       /* a class removed meanwhile */
		if (tm->ninstances >= TM_INSTANCES_MAX) {
			cmon_warn("more than %d instances; ignoring %s on %s pid %" PRId64,
				  TM_INSTANCES_MAX, a->program, a->machine, a->pid);
			return;
		}
		in = calloc(1, sizeof *in);
		if (!in)
			return;
		snprintf(in->prog, sizeof in->prog, "%s", a->program);
		snprintf(in->machine, sizeof in->machine, "%s", a->machine);
		in->pid = a->pid;
		in->start_ns = a->start_unix_ns;
		in->class_id = c->id;
		snprintf(in->endpoint, sizeof in->endpoint, "%s", a->data_endpoint);
		in->tls = a->has_tls && a->tls;
		take_token(in, up);
		in->state = IS_LISTED;
		r = store_instance_lookup(tm->store, in);
		if (r == 0)
			r = store_instance_insert(tm->store, in);
		if (r < 0) {
			free(in);
			return;
		}
		if (store_shared(tm->store) && store_instance_claim(tm->store, in->id, tm_now()) != 1) {
			/* another telemonitor holds it (or the store is down: the
			 * lease scan takes it once it is back) */
			cmon_debug("instance %" PRIu64 ": %s on %s pid %" PRId64 " is not ours to "
				   "monitor", in->id, in->prog, in->machine, in->pid);
			free(in);
			return;
		}
		in->class_id = c->id;
		TAILQ_INSERT_TAIL(&tm->instances, in, link);
		tm->ninstances++;
		cmon_info("instance %" PRIu64 ": %s on %s pid %" PRId64 " (class %u%s)", in->id,
			  in->prog, in->machine, in->pid, c->id, c->autostart ? ", auto" : "");
	} else {
		c = classes_find(tm, in->class_id);
		if (!c && (c = classes_match(tm, in->prog, in->machine, in->pid)))
			in->class_id = c->id;
		snprintf(in->endpoint, sizeof in->endpoint, "%s", a->data_endpoint);
		in->tls = a->has_tls && a->tls;
		take_token(in, up);
	}
	in->up = true;
	in->listed_by |= 1u << link;
	in->confirmed = true;
	in->dirty = true;
	if (in->sess || !c)
		return;
	if (c->autostart || (in->want && in->state != IS_STOPPED)) {
		/* an auto class wants every record: what went before us is a gap */
		monitor(tm, in, c, is_new || c->autostart);
	} else if (in->state != IS_STOPPED) {
		in->state = IS_LISTED;
		instances_set_status(in, "listed; start it with telemonctl start %" PRIu64, in->id);
	}
}

void instances_gone(struct tmon *tm, unsigned link, const Cmon__InstanceGone *g)
{
	const Cmon__Instance *a = g->instance;
	bool clean = g->has_clean && g->clean;
	struct tm_instance *in;

	if (!a || !a->program || !a->machine)
		return;
	in = find_key(tm, a->program, a->machine, a->pid, a->start_unix_ns);
	if (!in)
		return;
	if (g->has_records) {
		in->has_length = true;
		in->length = g->records;
	}
	in->listed_by &= ~(1u << link);
	if (in->listed_by)
		return;                 /* another registry still lists it */
	in->up = false;
	if (in->sess) {
		/* a streaming session ends with the log itself (LogEnd); one
		 * that is waiting to reconnect has nothing left to wait for */
		if (in->sess->state == SS_WAITING || in->sess->state == SS_CONNECTING)
			session_stop(in->sess, "the instance is gone");
		return;
	}
	in->state = IS_GONE;
	if (in->want && in->has_length && in->length > in->records + in->lost + in->skipped) {
		/* wanted, but never monitored (refused past capacity, say): its
		 * log was lost to us, and is counted so */
		uint64_t n = in->length - (in->records + in->lost + in->skipped);
		char was[sizeof in->status];
		snprintf(was, sizeof was, "%s", in->status);
		in->lost += n;
		instances_set_status(in, "the program ended; not monitored (%.120s): its %" PRIu64
				     " records counted as lost", was, n);
	} else {
		instances_set_status(in, "%s", clean ? "the program ended (not monitored)"
						     : "its snarflog vanished (not monitored)");
	}
	store_instance_end(tm->store, in, IS_GONE, tm_now());
	cmon_info("instance %" PRIu64 ": %s on %s pid %" PRId64 " is gone%s", in->id, in->prog,
		  in->machine, in->pid, clean ? "" : " (its snarflog vanished)");
	drop(tm, in);
}

void instances_reg_lost(struct tmon *tm, unsigned link)
{
	struct tm_instance *in;

	TAILQ_FOREACH(in, &tm->instances, link)
		in->listed_by &= ~(1u << link);
}

void instances_synced(struct tmon *tm)
{
	struct tm_instance *in, *next;
	uint64_t *live;
	size_t n = 0;

	for (in = TAILQ_FIRST(&tm->instances); in; in = next) {
		next = TAILQ_NEXT(in, link);
		if (in->confirmed || in->sess)
			continue;
		in->state = IS_GONE;
		instances_set_status(in, "ended while the telemonitor was away");
		store_instance_end(tm->store, in, IS_GONE, tm_now());
		cmon_info("instance %" PRIu64 ": %s on %s pid %" PRId64 " ended while we were "
			  "away", in->id, in->prog, in->machine, in->pid);
		drop(tm, in);
	}
	/* whatever the store still lists as running and we do not know is gone */
	live = calloc(tm->ninstances + 1, sizeof *live);
	if (!live)
		return;
	TAILQ_FOREACH(in, &tm->instances, link)
		live[n++] = in->id;
	store_instances_reap(tm->store, live, n, tm_now());
	free(live);
}

int instances_start(struct tmon *tm, uint64_t id, char *err, size_t errlen)
{
	struct tm_instance *in = instances_find(tm, id);
	struct tm_class *c;

	if (!in) {
		snprintf(err, errlen, "no running instance %" PRIu64 " (see telemonctl instances)", id);
		return -ENOENT;
	}
	if (in->sess) {
		snprintf(err, errlen, "instance %" PRIu64 " is already being monitored", id);
		return -EALREADY;
	}
	c = classes_find(tm, in->class_id);
	if (!c && (c = classes_match(tm, in->prog, in->machine, in->pid)))
		in->class_id = c->id;
	if (!c) {
		snprintf(err, errlen, "no class matches instance %" PRIu64 " any more", id);
		return -ENOENT;
	}
	in->state = IS_LISTED;
	monitor(tm, in, c, false);
	if (!in->sess) {
		snprintf(err, errlen, "%s", in->status);
		return -EIO;
	}
	return 0;
}

int instances_stop(struct tmon *tm, uint64_t id, char *err, size_t errlen)
{
	struct tm_instance *in = instances_find(tm, id);

	if (!in) {
		snprintf(err, errlen, "no running instance %" PRIu64 " (see telemonctl instances)", id);
		return -ENOENT;
	}
	if (!in->sess) {
		snprintf(err, errlen, "instance %" PRIu64 " is not being monitored", id);
		return -EALREADY;
	}
	in->want = false;
	in->dirty = true;
	session_stop(in->sess, "stopped with telemonctl stop");
	return 0;
}

void instances_class_removed(struct tmon *tm, uint32_t class_id)
{
	struct tm_instance *in;

	TAILQ_FOREACH(in, &tm->instances, link) {
		struct tm_class *c;
		if (in->class_id != class_id)
			continue;
		c = classes_match(tm, in->prog, in->machine, in->pid);
		in->class_id = c ? c->id : 0;
		in->dirty = true;
		if (!in->sess && !c)
			instances_set_status(in, "no class matches it any more");
	}
}

/* Forget the ledgers of instance `id` once the store holds nothing back;
 * false if the list is full (forget them now). */
static bool later_forget(struct tmon *tm, uint64_t id)
{
	if (tm->nforget == TM_INSTANCES_MAX)
		return false;
	if (tm->nforget == tm->forget_cap) {
		size_t cap = tm->forget_cap ? tm->forget_cap * 2 : 16;
		uint64_t *m = realloc(tm->forget, cap * sizeof *m);
		if (!m)
			return false;
		tm->forget = m;
		tm->forget_cap = cap;
	}
	tm->forget[tm->nforget++] = id;
	return true;
}

void instances_start_waiting(struct tmon *tm)
{
	struct tm_instance *in, *next;

	for (in = TAILQ_FIRST(&tm->instances); in && !tm->stopping; in = next) {
		struct tm_class *c;
		next = TAILQ_NEXT(in, link);
		if (!in->waiting || in->sess || !in->up)
			continue;
		if (tm->nsessions >= tm->max_sessions)
			return;
		c = classes_find(tm, in->class_id);
		in->waiting = false;
		if (c) {
			cmon_info("instance %" PRIu64 " (%s on %s pid %" PRId64 "): a session is free: "
				  "monitoring it", in->id, in->prog, in->machine, in->pid);
			monitor(tm, in, c, c->autostart);
		}
	}
}

void instances_session_ended(struct tmon *tm, struct tm_instance *in, enum inst_state st)
{
	if (in->lease_lost) {
		drop(tm, in);           /* its row is the new holder's to write */
		return;
	}
	in->state = st;
	in->dirty = true;
	if (st == IS_STOPPED)
		in->want = false;
	if (tm->stopping) {
		store_instance_save(tm->store, in);
		return;
	}
	cmon_info("instance %" PRIu64 " (%s on %s pid %" PRId64 "): %s (%" PRIu64 " records, %"
		  PRIu64 " lost, %" PRIu64 " failures)", in->id, in->prog, in->machine, in->pid,
		  in->status, in->records, in->lost, in->failures);
	if (st == IS_ENDED || st == IS_GONE)
		store_instance_end(tm->store, in, st, tm_now());
	else
		store_instance_save(tm->store, in);
	if (st == IS_ENDED || st == IS_GONE || st == IS_STOPPED) {
		/* committed now, so a crash cannot bring the instance back; then
		 * its ledgers are no longer needed (while the store is degraded,
		 * they go once it has stored the instance's end) */
		if (store_commit(tm->store) == 0 || !later_forget(tm, in->id))
			ledger_forget(tm->state_dir, in->id);
	}
	if (st == IS_ENDED || st == IS_GONE)
		drop(tm, in);
}

/* --- several telemonitors on one store ---------------------------------------- */

static void renewed(void *arg, uint64_t id, const char *owner)
{
	struct tm_instance *in = instances_find(arg, id);

	(void)owner;
	if (in)
		in->lease_seen = true;
}

/* Take over instance `id`, whose holder `owner` let its lease run out. */
static void take_over(void *arg, uint64_t id, const char *owner)
{
	struct tmon *tm = arg;
	struct tm_instance *in, row;
	struct tm_class *c;
	char was[256];

	snprintf(was, sizeof was, "%s", owner ? owner : "nobody");
	if (instances_find(tm, id) || tm->ninstances >= TM_INSTANCES_MAX ||
	    store_instance_claim(tm->store, id, tm_now()) != 1 ||
	    store_instance_get(tm->store, id, &row) != 1)
		return;
	in = malloc(sizeof *in);
	if (!in)
		return;
	*in = row;
	c = classes_find(tm, in->class_id);
	if (!c && (c = classes_match(tm, in->prog, in->machine, in->pid)))
		in->class_id = c->id;
	TAILQ_INSERT_TAIL(&tm->instances, in, link);
	tm->ninstances++;
	if (owner) {
		cmon_notice("instance %" PRIu64 " (%s on %s pid %" PRId64 "): taken over from %s, "
			    "whose lease ran out", in->id, in->prog, in->machine, in->pid, was);
		notify_adopt(tm, was);        /* what it queued and did not send */
		alerts_adopt(tm, was);
	}
	else
		cmon_info("instance %" PRIu64 " (%s on %s pid %" PRId64 "): claimed (nobody held it)",
			  in->id, in->prog, in->machine, in->pid);
	instances_set_status(in, "taken over from %s", was);
	in->dirty = true;
	if (c && in->want && in->state != IS_STOPPED)
		monitor(tm, in, c, false);
	else if (in->state != IS_STOPPED)
		in->state = IS_LISTED;
}

void instances_leases(struct tmon *tm)
{
	struct tm_instance *in, *next;
	double now = tm_now();

	if (!store_shared(tm->store))
		return;
	TAILQ_FOREACH(in, &tm->instances, link)
		in->lease_seen = false;
	if (store_lease_renew(tm->store, now, renewed, tm) < 0) {
		/* the store is down: nobody can take them meanwhile; once it is
		 * back, every lease may have run out, so the others get a lease
		 * period to renew theirs before we take any over */
		tm->lease_grace = now + STORE_LEASE_S + 1;
		return;
	}
	for (in = TAILQ_FIRST(&tm->instances); in; in = next) {
		next = TAILQ_NEXT(in, link);
		if (in->lease_seen || in->lease_lost)
			continue;
		/* another telemonitor holds it: stop without writing its row */
		in->lease_lost = true;
		cmon_warn("instance %" PRIu64 " (%s on %s pid %" PRId64 "): another telemonitor "
			  "took it over; letting go", in->id, in->prog, in->machine, in->pid);
		if (in->sess)
			session_stop(in->sess, "another telemonitor took it over");
		else
			drop(tm, in);
	}
	if (now >= tm->lease_grace)
		store_leases_expired(tm->store, now, 64, take_over, tm);
}

void instances_save_all(struct tmon *tm)
{
	struct tm_instance *in;

	TAILQ_FOREACH(in, &tm->instances, link)
		in->dirty = true;
	instances_save(tm);
}

void instances_save(struct tmon *tm)
{
	struct tm_instance *in;

	if (tm->nforget && !store_degraded(tm->store)) {
		for (size_t i = 0; i < tm->nforget; i++)
			ledger_forget(tm->state_dir, tm->forget[i]);
		tm->nforget = 0;
	}

	TAILQ_FOREACH(in, &tm->instances, link)
		if (in->dirty && !in->lease_lost) {
			in->dirty = in->checked_dirty = false;
			store_instance_save(tm->store, in);
		}
}

void instances_save_checked(struct tmon *tm)
{
	struct tm_instance *in;

	TAILQ_FOREACH(in, &tm->instances, link)
		if (in->checked_dirty && !in->lease_lost) {
			in->checked_dirty = in->dirty = false;
			store_instance_save(tm->store, in);
		}
}

void instances_free(struct tmon *tm)
{
	struct tm_instance *in;

	while ((in = TAILQ_FIRST(&tm->instances))) {
		if (in->sess)
			session_free(in->sess);
		drop(tm, in);
	}
	free(tm->forget);
	tm->forget = NULL;
	tm->nforget = tm->forget_cap = 0;
}
