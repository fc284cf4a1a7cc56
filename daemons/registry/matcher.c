/* The registry's store: announced instances, subscribed classes, and the
 * notifications that flow when either side changes. Matching is a linear
 * scan with literal patterns compared by strcmp; at 10,000 instances and
 * 1,000 classes that costs well under a millisecond per change (see
 * bench/transport).
 *
 * The matcher decides who is told what; it sends nothing itself. Every
 * message goes out through r->events.send, which the registry's wiring
 * (main.c) points at the connection layer, so this file never calls up
 * into conn.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "cmon/log.h"
#include "registry.h"

static bool sub_matches(const struct sub *s, const Cmon__Instance *in)
{
	char pid[24];

	if (!cmon_pattern_match(s->program, in->program) ||
	    !cmon_pattern_match(s->machine, in->machine))
		return false;
	if (!s->pid[0])
		return true;
	snprintf(pid, sizeof pid, "%lld", (long long)in->pid);
	return cmon_pattern_match(s->pid, pid);
}

static bool live(const struct conn *c)
{
	return c->state != CONN_CLOSING && c->state != CONN_DEAD;
}

static void notify_up(struct reg *r, struct sub *s, struct instance *inst, bool is_new)
{
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__InstanceUp up = CMON__INSTANCE_UP__INIT;

	up.has_sub_id = true;
	up.sub_id = s->id;
	up.instance = &inst->info;
	up.has_is_new = true;
	up.is_new = is_new;
	up.has_auto_ = true;
	up.auto_ = s->autostart;
	/* The token goes to this class's subscriber only, and nowhere else. */
	if (inst->has_token) {
		up.has_token = true;
		up.token.data = inst->token;
		up.token.len = sizeof inst->token;
	}
	m.kind_case = CMON__MSG__KIND_INSTANCE_UP;
	m.instance_up = &up;
	r->events.send(r->events.arg, s->owner, &m);
}

static void notify_gone(struct reg *r, struct sub *s, struct instance *inst, bool clean)
{
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__InstanceGone gone = CMON__INSTANCE_GONE__INIT;

	gone.has_sub_id = true;
	gone.sub_id = s->id;
	gone.instance = &inst->info;
	gone.has_clean = true;
	gone.clean = clean;
	gone.has_records = inst->has_length;
	gone.records = inst->length;
	m.kind_case = CMON__MSG__KIND_INSTANCE_GONE;
	m.instance_gone = &gone;
	r->events.send(r->events.arg, s->owner, &m);
}

static void instance_free(struct instance *inst)
{
	OPENSSL_cleanse(inst->token, sizeof inst->token);
	free(inst->info.program);
	free(inst->info.machine);
	free(inst->info.data_endpoint);
	free(inst);
}

int matcher_add_instance(struct reg *r, struct conn *owner, const Cmon__Announce *a,
			 const char *endpoint, struct instance **out)
{
	const Cmon__Instance *in = a->instance;
	bool reannounce = a->has_reannounce && a->reannounce;
	struct instance *inst = calloc(1, sizeof *inst);
	bool auto_wanted = false;
	struct sub *s;

	if (!inst)
		return -ENOMEM;
	cmon__instance__init(&inst->info);
	inst->owner = owner;
	inst->info.program = strdup(in->program);
	inst->info.machine = strdup(in->machine);
	inst->info.data_endpoint = strdup(endpoint);
	if (!inst->info.program || !inst->info.machine || !inst->info.data_endpoint) {
		instance_free(inst);
		return -ENOMEM;
	}
	inst->info.has_pid = true;
	inst->info.pid = in->pid;
	inst->info.has_start_unix_ns = in->has_start_unix_ns;
	inst->info.start_unix_ns = in->start_unix_ns;
	inst->info.has_format = in->has_format;
	inst->info.format = in->format;
	inst->info.has_tls = true;
	inst->info.tls = in->has_tls && in->tls;
	inst->info.has_key = true;
	inst->info.key = ++r->next_key;
	if (a->has_token && a->token.len == sizeof inst->token) {
		inst->has_token = true;
		memcpy(inst->token, a->token.data, sizeof inst->token);
	}
	TAILQ_INSERT_TAIL(&r->instances, inst, link);
	r->ninstances++;
	cmon_debug("instance up: %s on %s pid %lld at %s (key %llu%s) from %s",
		   inst->info.program, inst->info.machine, (long long)inst->info.pid,
		   inst->info.data_endpoint, (unsigned long long)inst->info.key,
		   reannounce ? ", re-announced" : "", owner->peer);
	TAILQ_FOREACH(s, &r->subs, in_all) {
		if (!live(s->owner) || !sub_matches(s, &inst->info))
			continue;
		notify_up(r, s, inst, !reannounce);
		if (s->autostart && !reannounce)
			auto_wanted = true;
	}
	*out = inst;
	return auto_wanted ? 1 : 0;
}

static double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Forget gone instances older than REG_GONE_KEEP_S, or past REG_GONE_MAX. */
static void gone_expire(struct reg *r, double now)
{
	struct instance *inst;

	while ((inst = TAILQ_FIRST(&r->gone)) &&
	       (r->ngone > REG_GONE_MAX || now - inst->gone_at > REG_GONE_KEEP_S)) {
		TAILQ_REMOVE(&r->gone, inst, link);
		r->ngone--;
		instance_free(inst);
	}
}

void matcher_remove_instance(struct reg *r, struct instance *inst, bool clean)
{
	struct sub *s;
	double now = mono_now();

	cmon_debug("instance gone: %s on %s pid %lld (key %llu, %s)", inst->info.program,
		   inst->info.machine, (long long)inst->info.pid,
		   (unsigned long long)inst->info.key, clean ? "left" : "connection lost");
	TAILQ_FOREACH(s, &r->subs, in_all)
		if (live(s->owner) && sub_matches(s, &inst->info))
			notify_gone(r, s, inst, clean);
	TAILQ_REMOVE(&r->instances, inst, link);
	r->ninstances--;
	/* Kept a while (its token wiped), so that a subscriber that was away
	 * when it went — a telemonitor restarting — still hears that it is
	 * gone, and how long its log was: what it did not get is then counted
	 * as lost rather than never accounted (docs/protocol.md §5). */
	OPENSSL_cleanse(inst->token, sizeof inst->token);
	inst->has_token = false;
	inst->owner = NULL;
	inst->gone_at = now;
	inst->gone_clean = clean;
	TAILQ_INSERT_TAIL(&r->gone, inst, link);
	r->ngone++;
	gone_expire(r, now);
}

static void copy_pattern(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
	if (strcmp(dst, "*") == 0)
		dst[0] = '\0';                 /* "*" and "" both mean any */
}

int matcher_add_sub(struct reg *r, struct conn *owner, const Cmon__Subscribe *m, char *why,
		    size_t size)
{
	Cmon__Msg ackm = CMON__MSG__INIT;
	Cmon__SubscribeAck ack = CMON__SUBSCRIBE_ACK__INIT;
	struct instance *inst;
	struct sub *s;
	uint32_t existing = 0;

	if (!cmon_pattern_valid(m->program) || !cmon_pattern_valid(m->machine) ||
	    !cmon_pid_pattern_valid(m->pid)) {
		snprintf(why, size, "invalid pattern in class %u", m->id);
		return -CMON__ERROR_CODE__ERROR_BAD_NAME;
	}
	TAILQ_FOREACH(s, &owner->subs, in_conn)
		if (s->id == m->id) {
			snprintf(why, size, "class id %u already in use", m->id);
			return -CMON__ERROR_CODE__ERROR_PROTOCOL;
		}
	if (owner->nsubs >= REG_MAX_SUBS_PER_CONN) {
		snprintf(why, size, "more than %d classes", REG_MAX_SUBS_PER_CONN);
		return -CMON__ERROR_CODE__ERROR_LIMIT;
	}
	s = calloc(1, sizeof *s);
	if (!s) {
		snprintf(why, size, "out of memory");
		return -CMON__ERROR_CODE__ERROR_LIMIT;
	}
	s->owner = owner;
	s->id = m->id;
	copy_pattern(s->program, sizeof s->program, m->program);
	copy_pattern(s->machine, sizeof s->machine, m->machine);
	copy_pattern(s->pid, sizeof s->pid, m->pid);
	s->autostart = m->has_auto_ && m->auto_;
	s->block = m->has_block && m->block;
	TAILQ_INSERT_TAIL(&owner->subs, s, in_conn);
	TAILQ_INSERT_TAIL(&r->subs, s, in_all);
	owner->nsubs++;
	r->nsubs++;
	cmon_debug("class %u added by %s: prog '%s' machine '%s' pid '%s'%s%s", s->id,
		   owner->peer, s->program, s->machine, s->pid, s->autostart ? " auto" : "",
		   s->block ? " block" : "");
	/* Instances already running: tell the subscriber about them now. */
	TAILQ_FOREACH(inst, &r->instances, link) {
		if (!live(inst->owner) || !sub_matches(s, &inst->info))
			continue;
		notify_up(r, s, inst, false);
		existing++;
	}
	/* ...and those gone lately, which it may have been following. */
	gone_expire(r, mono_now());
	TAILQ_FOREACH(inst, &r->gone, link)
		if (sub_matches(s, &inst->info))
			notify_gone(r, s, inst, inst->gone_clean);
	ack.has_id = true;
	ack.id = s->id;
	ack.has_existing = true;
	ack.existing = existing;
	ackm.kind_case = CMON__MSG__KIND_SUBSCRIBE_ACK;
	ackm.subscribe_ack = &ack;
	r->events.send(r->events.arg, owner, &ackm);
	return 0;
}

static void sub_free(struct reg *r, struct sub *s)
{
	TAILQ_REMOVE(&s->owner->subs, s, in_conn);
	TAILQ_REMOVE(&r->subs, s, in_all);
	s->owner->nsubs--;
	r->nsubs--;
	free(s);
}

bool matcher_remove_sub(struct reg *r, struct conn *owner, uint32_t id)
{
	struct sub *s;

	TAILQ_FOREACH(s, &owner->subs, in_conn)
		if (s->id == id) {
			cmon_debug("class %u removed by %s", id, owner->peer);
			sub_free(r, s);
			return true;
		}
	return false;
}

void matcher_remove_conn_subs(struct reg *r, struct conn *owner)
{
	struct sub *s;

	if (owner->nsubs)
		cmon_debug("%s: dropping its %zu classes", owner->peer, owner->nsubs);
	while ((s = TAILQ_FIRST(&owner->subs)))
		sub_free(r, s);
}

void matcher_free_all(struct reg *r)
{
	struct instance *inst;

	while ((inst = TAILQ_FIRST(&r->instances))) {
		TAILQ_REMOVE(&r->instances, inst, link);
		instance_free(inst);
	}
	r->ninstances = 0;
	while ((inst = TAILQ_FIRST(&r->gone))) {
		TAILQ_REMOVE(&r->gone, inst, link);
		instance_free(inst);
	}
	r->ngone = 0;
}
