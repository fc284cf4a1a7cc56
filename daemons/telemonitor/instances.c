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

#include "cmon/log.h"
#include "failures.h"
#include "ledger.h"
#include "session.h"
#include "store.h"

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

static struct tm_instance *find_in(struct tm_instance_list *list, const char *prog,
				   const char *machine, int64_t pid, int64_t start_ns)
{
	struct tm_instance *in;

	TAILQ_FOREACH(in, list, link)
		if (in->pid == pid && in->start_ns == start_ns && !strcmp(in->prog, prog) &&
		    !strcmp(in->machine, machine))
			return in;
	return NULL;
}

static struct tm_instance *find_key(struct tmon *tm, const char *prog, const char *machine,
				    int64_t pid, int64_t start_ns)
{
	return find_in(&tm->instances, prog, machine, pid, start_ns);
}

static void handed_over(struct tmon *tm, struct tm_instance *in);

static double now_s(const struct tmon *tm)
{
	(void)tm;
	return tm_now();
}

static void drop(struct tmon *tm, struct tm_instance *in)
{
	failures_instance_ended(tm, in->id);
	TAILQ_REMOVE(&tm->instances, in, link);
	tm->ninstances--;
	free(in);
}

static void session_ended(struct tmon *tm, struct tm_instance *in, enum inst_state st);

/* A session says what its instance is doing (session_events.status). */
static void session_status(struct tm_instance *in, const char *text)
{
	instances_set_status(in, "%s", text);
}

/* A session ended (session_events.ended): settle its instance, then a
 * session is free for one waiting. */
static void session_done(struct tmon *tm, struct tm_instance *in, enum inst_state st)
{
	session_ended(tm, in, st);      /* which may free `in` */
	instances_start_waiting(tm);
}

/* What our sessions report to us (session.c is on the floor below). */
static const struct session_events sess_events = {
	.status = session_status,
	.ended = session_done,
};

/* Begin monitoring `in` as class `c` (NULL: none matches it any more);
 * `from_start`: it was just announced. */
static void monitor(struct tmon *tm, struct tm_instance *in, const struct tm_class *c,
		    bool from_start)
{
	int r;

	in->want = true;
	in->dirty = true;
	r = c ? session_start(tm, in, c, from_start, &sess_events) : -ENOENT;
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

	uint64_t epoch = 0;
	int r;

	if (tm->ninstances >= TM_INSTANCES_MAX)
		return;
	if (store_shared(tm->store) && (r = store_instance_claim(tm->store, saved->id, &epoch)) != 1) {
		/* another telemonitor took it while we were away, or a
		 * transaction still holds its lease (our last run's, which the
		 * server has not ended yet): not renewed by us, the lease runs
		 * out, and the lease scan takes it back (take_over) */
		cmon_info("instance %" PRIu64 " (%s on %s pid %" PRId64 "): not re-attached: %s",
			  saved->id, saved->prog, saved->machine, saved->pid,
			  r < 0 ? "the store cannot be reached to claim it; claimed once its lease "
				  "runs out" :
				  "another telemonitor holds it, or its lease is busy; claimed if its "
				  "lease runs out");
		return;
	}
	in = malloc(sizeof *in);
	if (!in)
		return;
	*in = *saved;
	in->epoch = epoch;
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

/* Where to reach its snarflog, and its token, as the registry lists it. */
static void take_endpoint(struct tm_instance *in, const Cmon__InstanceUp *up)
{
	snprintf(in->endpoint, sizeof in->endpoint, "%s", up->instance->data_endpoint);
	in->tls = up->instance->has_tls && up->instance->tls;
	take_token(in, up);
}

/* Several telemonitors: remember an instance the registry listed and
 * this node left to the fleet, until the first lists are in (it is live:
 * instances_synced reaps only what nobody listed). */
static void pass_on(struct tmon *tm, uint64_t id)
{
	if (tm->synced || tm->passed_short)
		return;
	if (tm->npassed == tm->passed_cap) {
		size_t cap = tm->passed_cap ? tm->passed_cap * 2 : 64;
		uint64_t *m = realloc(tm->passed, cap * sizeof *m);
		if (!m) {
			tm->passed_short = true;    /* (not all known: nothing is reaped) */
			return;
		}
		tm->passed = m;
		tm->passed_cap = cap;
	}
	tm->passed[tm->npassed++] = id;
}

/* A new instance has its row: ours to monitor (in tm->instances now), or,
 * on a shared store, left to the fleet (freed). True if ours. */
static bool adopt(struct tmon *tm, struct tm_instance *in, const struct tm_class *c)
{
	int r = 1;

	/* several telemonitors: a node takes a new instance only while it is
	 * under its share of the fleet and under max-sessions; one that
	 * nobody takes at once goes to whichever has room first (the lease
	 * scan, every second) */
	if (store_shared(tm->store) &&
	    ((c->autostart && !fleet_room(tm)) ||
	     (r = store_instance_claim(tm->store, in->id, &in->epoch)) != 1)) {
		cmon_debug("instance %" PRIu64 ": %s on %s pid %" PRId64 " is not ours to monitor: "
			   "%s", in->id, in->prog, in->machine, in->pid,
			   r == 1 ? "no room here (max-sessions, the fleet's share, or just started)" :
			   r < 0 ? "the store cannot be reached to claim it" :
			   "another telemonitor holds it, or its lease is busy");
		pass_on(tm, in->id);
		free(in);
		return false;
	}
	in->class_id = c->id;
	TAILQ_INSERT_TAIL(&tm->instances, in, link);
	tm->ninstances++;
	cmon_info("instance %" PRIu64 ": %s on %s pid %" PRId64 " (class %u%s)", in->id, in->prog,
		  in->machine, in->pid, c->id, c->autostart ? ", auto" : "");
	return true;
}

/* A registry lists `in` (bits `links` of the list): monitor it if its
 * class wants it. */
static void listed(struct tmon *tm, struct tm_instance *in, const struct tm_class *c,
		   uint32_t links, bool is_new)
{
	in->up = true;
	in->listed_by |= links;
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

/* A new instance the store cannot record now (no row, so no id to claim
 * it by, nor anywhere to count its records): kept, and tried again every
 * second (instances_retry_unstored). Its log waits in its snarflog. */
static void wait_for_store(struct tmon *tm, struct tm_instance *in, bool is_new)
{
	if (tm->nunstored >= TM_INSTANCES_MAX) {
		cmon_err("instance %s on %s pid %" PRId64 ": cannot be recorded in the store, and "
			 "%d others wait for it already; not monitored", in->prog, in->machine,
			 in->pid, TM_INSTANCES_MAX);
		free(in);
		return;
	}
	cmon_warn("instance %s on %s pid %" PRId64 ": cannot be recorded in the store now; tried "
		  "again every second (its log waits in its snarflog)", in->prog, in->machine,
		  in->pid);
	in->announced_new = is_new;
	in->up = true;
	TAILQ_INSERT_TAIL(&tm->unstored, in, link);
	tm->nunstored++;
}

void instances_up(struct tmon *tm, unsigned link, const Cmon__InstanceUp *up)
{
	const Cmon__Instance *a = up->instance;
	uint32_t sub_id = up->sub_id;
	bool is_new = up->has_is_new && up->is_new;
	struct tm_instance *in;
	struct tm_class *c;
	char why[200];

	if (!cmon_instance_ok(a, why, sizeof why) || !a->data_endpoint || !a->has_pid) {
		cmon_warn("registry: ignoring a bad instance: %s", why);
		return;
	}
	in = find_key(tm, a->program, a->machine, a->pid, a->start_unix_ns);
	if (!in && (in = find_in(&tm->unstored, a->program, a->machine, a->pid,
				 a->start_unix_ns))) {
		/* listed again while it waits for the store */
		take_endpoint(in, up);
		in->listed_by |= 1u << link;
		in->up = true;
		return;
	}
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
		take_endpoint(in, up);
		in->state = IS_LISTED;
		in->want = c->autostart;        /* (an auto class wants it from its start, whoever
						   of the fleet monitors it) */
		if (store_shared(tm->store))
			tm->ups_since_beat++;
		if (store_instance_add(tm->store, in) < 0) {
			in->listed_by = 1u << link;
			wait_for_store(tm, in, is_new);
			return;
		}
		if (!adopt(tm, in, c))
			return;
	} else {
		c = classes_find(tm, in->class_id);
		if (!c && (c = classes_match(tm, in->prog, in->machine, in->pid)))
			in->class_id = c->id;
		take_endpoint(in, up);
	}
	listed(tm, in, c, 1u << link, is_new);
}

/* Several telemonitors: an instance that ended before any of them
 * monitored it (none had room when it started, and the lease scan had not
 * given it to one yet) is known to this node by its row only. Left live,
 * the node that claimed it next would find its snarflog gone and end it
 * with nothing counted, not knowing the length the registry tells once,
 * here. So whoever hears first claims it and ends it, its log counted as
 * lost; a node that cannot claim it leaves it to its holder, which hears
 * of the end itself. */
static void gone_unmonitored(struct tmon *tm, const char *prog, const char *machine, int64_t pid,
			     int64_t start_ns, uint64_t length)
{
	struct tm_instance row = { 0 };
	uint64_t epoch, had, n;

	snprintf(row.prog, sizeof row.prog, "%s", prog);
	snprintf(row.machine, sizeof row.machine, "%s", machine);
	row.pid = pid;
	row.start_ns = start_ns;
	/* (a node that monitored it ends it itself, and its lease may be
	 * free once it has: not claimed again, then) */
	if (store_instance_lookup(tm->store, &row) != 1 || !row.want ||
	    store_instance_get(tm->store, row.id, &row) != 1 || row.state == IS_ENDED ||
	    row.state == IS_GONE)
		return;
	if (store_instance_claim(tm->store, row.id, &epoch) != 1)
		return;
	if (store_instance_get(tm->store, row.id, &row) != 1 || row.state == IS_ENDED ||
	    row.state == IS_GONE) {
		store_lease_release(tm->store, row.id);
		return;
	}
	row.epoch = epoch;
	had = row.records + row.lost + row.skipped + row.unchecked;
	n = length > had ? length - had : 0;
	row.lost += n;
	instances_set_status(&row, "the program ended before any telemonitor monitored it: its "
			     "%" PRIu64 " records counted as lost", n);
	store_instance_end(tm->store, &row, IS_GONE, tm_now());
	store_commit(tm->store);      /* (as any end: its lease is left to run out) */
	cmon_warn("instance %" PRIu64 " (%s on %s pid %" PRId64 "): %s", row.id, row.prog,
		  row.machine, row.pid, row.status);
}

/* `in`, known here and not monitored, is gone: ended, its log counted. */
static void gone_here(struct tmon *tm, struct tm_instance *in, bool clean)
{
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

void instances_gone(struct tmon *tm, unsigned link, const Cmon__InstanceGone *g)
{
	const Cmon__Instance *a = g->instance;
	bool clean = g->has_clean && g->clean;
	struct tm_instance *in;

	if (!a || !a->program || !a->machine)
		return;
	in = find_key(tm, a->program, a->machine, a->pid, a->start_unix_ns);
	if (!in && (in = find_in(&tm->unstored, a->program, a->machine, a->pid,
				 a->start_unix_ns))) {
		/* (it waits for the store: ended once it has its row) */
		if (g->has_records) {
			in->has_length = true;
			in->length = g->records;
		}
		in->listed_by &= ~(1u << link);
		in->up = in->listed_by != 0;
		return;
	}
	if (!in) {
		if (store_shared(tm->store) && g->has_records)
			gone_unmonitored(tm, a->program, a->machine, a->pid, a->start_unix_ns,
					 g->records);
		return;
	}
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
	gone_here(tm, in, clean);
}

void instances_retry_unstored(struct tmon *tm)
{
	struct tm_instance *in, *next;

	for (in = TAILQ_FIRST(&tm->unstored); in; in = next) {
		struct tm_class *c = classes_find(tm, in->class_id);
		uint32_t links = in->listed_by;

		next = TAILQ_NEXT(in, link);
		if (c && store_instance_add(tm->store, in) < 0)
			continue;                 /* (said when it came) */
		TAILQ_REMOVE(&tm->unstored, in, link);
		tm->nunstored--;
		if (!c) {
			free(in);                 /* its class was removed meanwhile */
			continue;
		}
		cmon_notice("instance %" PRIu64 " (%s on %s pid %" PRId64 "): recorded in the store%s",
			    in->id, in->prog, in->machine, in->pid,
			    in->up ? "" : "; the program ended meanwhile");
		if (!in->up && store_shared(tm->store)) {
			/* (whoever holds it ends it, its whole log counted as lost) */
			if (in->has_length)
				gone_unmonitored(tm, in->prog, in->machine, in->pid, in->start_ns,
						 in->length);
			free(in);
			continue;
		}
		if (!adopt(tm, in, c))
			continue;
		if (in->up)
			listed(tm, in, c, links, in->announced_new);
		else
			gone_here(tm, in, in->has_length);
	}
}

void instances_reg_lost(struct tmon *tm, unsigned link)
{
	struct tm_instance *in;

	TAILQ_FOREACH(in, &tm->instances, link)
		in->listed_by &= ~(1u << link);
	TAILQ_FOREACH(in, &tm->unstored, link)
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
	/* whatever the store still lists as running and nobody listed is
	 * gone (on a shared store, unless another node holds it) */
	tm->synced = true;
	live = tm->passed_short ? NULL : calloc(tm->ninstances + tm->npassed + 1, sizeof *live);
	if (live) {
		TAILQ_FOREACH(in, &tm->instances, link)
			live[n++] = in->id;
		for (size_t i = 0; i < tm->npassed; i++)
			live[n++] = tm->passed[i];
		store_instances_reap(tm->store, live, n, tm_now());
		free(live);
	}
	free(tm->passed);
	tm->passed = NULL;
	tm->npassed = tm->passed_cap = 0;
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

/* A session of `in` has ended (and been freed) leaving it in state `st`. */
static void session_ended(struct tmon *tm, struct tm_instance *in, enum inst_state st)
{
	if (in->lease_lost) {
		drop(tm, in);           /* its row is the new holder's to write */
		return;
	}
	if (in->handover && !tm->stopping) {
		handed_over(tm, in);
		return;
	}
	in->state = st;
	in->dirty = true;
	if (st == IS_STOPPED)
		in->want = false;
	if (st == IS_ENDED || st == IS_GONE)
		failures_instance_ended(tm, in->id);
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
			ledger_forget(tm->state_dir, &tm->ledgers, in->id);
	}
	if (st == IS_ENDED || st == IS_GONE)
		drop(tm, in);
}

/* --- several telemonitors on one store ---------------------------------------- */

/* This node's share of the fleet's live instances: an even split, and
 * one more, so that a burst of starts is not held back by rounding. */
static size_t fleet_share(const struct tmon *tm)
{
	size_t nodes = tm->fleet.nodes ? tm->fleet.nodes : 1;
	size_t live = tm->fleet.instances + tm->ups_since_beat;

	return (live + nodes - 1) / nodes + 1;
}

/* An even split of the fleet's live instances. */
static size_t fleet_even(const struct tmon *tm)
{
	size_t nodes = tm->fleet.nodes ? tm->fleet.nodes : 1;

	return (tm->fleet.instances + nodes - 1) / nodes;
}

/* An instance a node let go to balance the fleet is for the node that
 * joined: while that one is under an even split, a node at it or above
 * leaves the instance alone (else two old nodes handing over at once take
 * each other's, and more move than the joiner gets). Once the joiner has
 * its split, or none is joining, any node with room takes it. */
static bool leave_to_joiner(const struct tmon *tm, const char *owner, uint64_t last_epoch)
{
	size_t even = fleet_even(tm);

	return !owner && last_epoch && tm->fleet.joining && tm->fleet.joiner_sessions < even &&
	       tm->nsessions >= even;
}

bool fleet_room(const struct tmon *tm)
{
	/* (the fleet is counted once a second: until two counts have come,
	 * a node that just started sees only itself and takes nothing new) */
	return tm->nsessions < tm->max_sessions && tm->nsessions < fleet_share(tm) &&
	       tm->beats >= 2;
}

static void renewed(void *arg, uint64_t id, uint64_t epoch)
{
	struct tm_instance *in = instances_find(arg, id);

	if (in && in->epoch == epoch)
		in->lease_seen = true;
}

/* Take over instance `id`, which nobody holds: never claimed, let go by
 * a node handing it over, or whose holder's lease ran out (`owner`). */
static void take_over(void *arg, uint64_t id, const char *owner, uint64_t last_epoch)
{
	struct tmon *tm = arg;
	struct tm_instance *in, row;
	struct tm_class *c;
	uint64_t epoch;
	char was[256];
	/* a lease in our own name that we do not hold: an earlier run of this
	 * node held it and could not claim it back at start (loaded) */
	bool ours = owner && strcmp(owner, store_node(tm->store)) == 0;

	snprintf(was, sizeof was, "%s", owner ? owner : "nobody");
	if (!last_epoch)
		tm->unowned_seen++;           /* a new instance nobody took yet */
	if (instances_find(tm, id) || tm->ninstances >= TM_INSTANCES_MAX || !fleet_room(tm) ||
	    leave_to_joiner(tm, owner, last_epoch) ||
	    (id == tm->handed_id && now_s(tm) < tm->handed_until) ||
	    store_instance_claim(tm->store, id, &epoch) != 1)
		return;
	if (store_instance_get(tm->store, id, &row) != 1) {
		store_lease_release(tm->store, id);
		return;
	}
	in = malloc(sizeof *in);
	if (!in)
		return;
	*in = row;
	in->epoch = epoch;
	/* Ledgers this node kept of it are from an earlier hold: after
	 * another node's, the row is newer than they are, and the session
	 * starts from the row; after our own last run's, they go together,
	 * as at a restart. */
	if (!ours)
		ledger_forget(tm->state_dir, &tm->ledgers, id);
	c = classes_find(tm, in->class_id);
	if (!c && (c = classes_match(tm, in->prog, in->machine, in->pid)))
		in->class_id = c->id;
	TAILQ_INSERT_TAIL(&tm->instances, in, link);
	tm->ninstances++;
	if (ours) {
		/* (its mail and alerts are ours already; the row's counts are
		 * settled as after any holder, where no ledger says more) */
		cmon_notice("instance %" PRIu64 " (%s on %s pid %" PRId64 "): taken back: its "
			    "lease, in this node's name from an earlier run, ran out (epoch %" PRIu64
			    ")", in->id, in->prog, in->machine, in->pid, epoch);
		in->taken_over = true;
	} else if (owner) {
		cmon_notice("instance %" PRIu64 " (%s on %s pid %" PRId64 "): taken over from %s, "
			    "whose lease ran out (epoch %" PRIu64 ")", in->id, in->prog, in->machine,
			    in->pid, was, epoch);
		failures_adopt(tm, was);      /* the mail and alerts it did not deliver */
		in->taken_over = true;
	} else {
		cmon_info("instance %" PRIu64 " (%s on %s pid %" PRId64 "): claimed (nobody held it; "
			  "epoch %" PRIu64 ")", in->id, in->prog, in->machine, in->pid, epoch);
	}
	if (ours)
		instances_set_status(in, "taken back after a restart");
	else
		instances_set_status(in, "taken over from %s", was);
	in->dirty = true;
	if (c && in->want && in->state != IS_STOPPED)
		monitor(tm, in, c, c->autostart);
	else if (in->state != IS_STOPPED)
		in->state = IS_LISTED;
}

/* Over its share while another node has room: hand one instance over at
 * a record boundary. Its session stops (Stop, LogEnd, the tools finish),
 * its counts are stored, then its lease is let go; the node that claims
 * it resumes where the counts stop (the snarflog kept the rest). */
static void balance(struct tmon *tm)
{
	struct tm_instance *in;
	size_t nodes = tm->fleet.nodes, even = fleet_even(tm), share = fleet_share(tm), tol;

	/* A node that joins (or comes back) has far less than an even split:
	 * the others hand instances over to it until it is within a tenth of
	 * its share. Nothing else moves an instance: not the unevenness a
	 * burst of starts leaves (the claims share those out), not instances
	 * ending here and there, and not while instances are starting. */
	if (nodes < 2) {
		tm->rebalancing = false;
		return;
	}
	tol = even > 10 ? even / 10 : 1;
	/* (for three counts in a row: a count is up to two seconds old) */
	tm->short_beats = tm->fleet.joining && tm->fleet.joiner_sessions * 2 < even
				  ? tm->short_beats + 1 : 0;
	if (tm->short_beats >= 3 && tm->quiet_beats >= 3)
		tm->rebalancing = true;
	else if (!tm->fleet.joining || tm->fleet.joiner_sessions + tol >= even)
		tm->rebalancing = false;
	if (!tm->rebalancing || tm->nsessions <= even)
		return;
	TAILQ_FOREACH(in, &tm->instances, link)
		if (in->handover)
			return;                   /* one at a time */
	TAILQ_FOREACH(in, &tm->instances, link)
		if (in->sess && in->sess->state == SS_STREAMING) {
			cmon_info("instance %" PRIu64 " (%s on %s pid %" PRId64 "): handing it over "
				  "(%zu monitored here, the fleet's share is %zu)", in->id, in->prog,
				  in->machine, in->pid, tm->nsessions, share);
			in->handover = true;
			session_stop(in->sess, "handed over to another telemonitor (balance)");
			return;
		}
}

/* The session of an instance being handed over is over: store where its
 * counts stand, then let its lease go (in that order: the next holder
 * reads the counts). */
static void handed_over(struct tmon *tm, struct tm_instance *in)
{
	tm->handed_id = in->id;                 /* not to be taken back at once */
	tm->handed_until = now_s(tm) + 30;
	in->state = IS_MONITORING;            /* for the next holder */
	in->handover = false;
	instances_set_status(in, "handed over to another telemonitor");
	store_instance_save(tm->store, in);
	if (store_commit(tm->store) == 0) {
		store_lease_release(tm->store, in->id);
		ledger_forget(tm->state_dir, &tm->ledgers, in->id);
	} else {
		store_lease_forget(tm->store, in->id);   /* its lease runs out instead */
	}
	drop(tm, in);
}

void instances_leases(struct tmon *tm)
{
	struct tm_instance *in, *next;
	double now = tm_now();
	int r;

	if (!store_shared(tm->store))
		return;
	if (store_fleet_beat(tm->store, tm->nsessions, tm->max_sessions, &tm->fleet) == 0) {
		tm->beats++;
		tm->quiet_beats = tm->ups_since_beat ? 0 : tm->quiet_beats + 1;
		tm->ups_since_beat = 0;
	}
	TAILQ_FOREACH(in, &tm->instances, link)
		in->lease_seen = false;
	r = store_lease_renew(tm->store, renewed, tm);
	if (r < 0) {
		/* the server cannot be reached: nobody can take them meanwhile;
		 * once it is back, every lease may have run out, so the others
		 * get a lease period to renew theirs before we take any over */
		tm->lease_grace = now + STORE_LEASE_S + 1;
		if (store_lease_state(tm->store) == LEASES_OUTAGE)
			TAILQ_FOREACH(in, &tm->instances, link)
				if (in->sess)
					session_lease_go(in->sess);
		return;
	}
	if (store_degraded(tm->store) && store_lease_safe(tm->store))
		store_retry(tm->store, now);        /* (held while the leases were unsure) */
	for (in = TAILQ_FIRST(&tm->instances); in && r == 0; in = next) {
		next = TAILQ_NEXT(in, link);
		if (in->lease_seen || in->lease_lost)
			continue;
		/* another telemonitor holds it (a newer epoch): stop without
		 * writing its row; the fence would refuse it anyway */
		in->lease_lost = true;
		store_lease_forget(tm->store, in->id);
		cmon_warn("instance %" PRIu64 " (%s on %s pid %" PRId64 "): another telemonitor "
			  "took it over; letting go", in->id, in->prog, in->machine, in->pid);
		if (in->sess)
			session_stop(in->sess, "another telemonitor took it over");
		else
			drop(tm, in);
	}
	/* the sessions that waited for this renewal (this node was stopped or
	 * starved) and still hold their instances read again */
	if (store_lease_state(tm->store) != LEASES_UNSURE)
		TAILQ_FOREACH(in, &tm->instances, link)
			if (in->sess && !in->lease_lost)
				session_lease_go(in->sess);
	if (now >= tm->lease_grace) {
		tm->unowned_seen = 0;
		store_leases_expired(tm->store, 64, take_over, tm);
		if (tm->unowned_seen)
			tm->quiet_beats = 0;      /* not settled while any waits for a holder */
	}
	balance(tm);
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
	double now = tm_now();

	if (tm->nforget && !store_degraded(tm->store)) {
		for (size_t i = 0; i < tm->nforget; i++)
			ledger_forget(tm->state_dir, &tm->ledgers, tm->forget[i]);
		tm->nforget = 0;
	}

	TAILQ_FOREACH(in, &tm->instances, link)
		if (in->dirty && !in->lease_lost) {
			if (in->sess)
				session_settle_checked(in->sess);
			in->dirty = in->checked_dirty = false;
			in->checked_saved = now;       /* (its `checked` went with the row) */
			store_instance_save(tm->store, in);
		}
}

void instances_save_checked(struct tmon *tm)
{
	struct tm_instance *in;
	double now = tm_now();

	TAILQ_FOREACH(in, &tm->instances, link)
		if (in->checked_dirty && !in->lease_lost && now - in->checked_saved >= TM_CHECKED_SAVE) {
			if (in->sess)
				session_settle_checked(in->sess);
			in->checked_dirty = in->dirty = false;
			in->checked_saved = now;
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
	free(tm->passed);
	tm->passed = NULL;
	while ((in = TAILQ_FIRST(&tm->unstored))) {
		TAILQ_REMOVE(&tm->unstored, in, link);
		free(in);
	}
	tm->nunstored = 0;
	tm->forget = NULL;
	tm->nforget = tm->forget_cap = 0;
}
