/* The registry links: one per registry of the list (-regmachine /
 * TELEMONREG_MACHINE, comma-separated). Each connects to its telemonreg,
 * says Hello, subscribes every class (the subscription id is the class id)
 * and passes on what it says about instances through the events table its
 * owner gave (struct reg_events): this file knows nothing of what is done
 * with them. When a registry goes away its link reconnects with capped
 * exponential backoff and subscribes again; monitoring sessions are direct
 * connections to snarflogs and carry on meanwhile, and instances keep
 * being found while any registry is up. "Registry unavailable" is logged
 * once per outage, not per attempt. A registry that refuses our
 * subscriptions (ERROR_DENIED: it does not know us as an authenticated
 * subscriber, docs/protocol.md §8a) is said so plainly, once until it
 * accepts them, and retried with the same backoff. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmon/log.h"
#include "cmon/peer.h"
#include "telemonitor.h"

#define RL_BACKOFF_MIN_MS 100     /* first retry delay */
#define RL_BACKOFF_MAX_MS 3000    /* retry delay cap */
#define RL_CONNECT_MS 5000        /* connect + handshake timeout */

struct regset;

/* One link. */
struct reglink {
	struct tmon *tm;                /* the service */
	struct regset *set;           /* the set it belongs to */
	unsigned index;               /* its place in the list */
	struct peer *peer;            /* the connection (cmon/peer.h); READY: subscribed,
	                                 notifications flow */
	char name[CMON_ADDRSTR_MAX];  /* its address as given, for messages */
	bool warned;                  /* "unavailable" logged for this outage */
	bool ever;                    /* connected at least once */
	size_t pending_acks;          /* SubscribeAcks still expected this round */
	bool synced;                  /* every subscription of the first round answered */
	bool failed;                  /* some attempt has failed since the start */
	bool denied;                  /* it refused our subscriptions, and has not accepted one
	                                 since */
};

/* Every registry of the list. */
struct regset {
	struct reglink *links[CMON_REGISTRIES_MAX];  /* one per registry */
	size_t n;                     /* how many */
	const struct reg_events *ev;  /* where reports go (borrowed) */
	bool synced_told;             /* ev->synced has been called */
	char status[64];              /* reg_status() text with several registries */
};

/* Report `synced` once: when every registry has listed its instances, or
 * at least one has and every other one has failed (a registry that is
 * down must not keep the others' answer from counting, but a lone one
 * that is down tells us nothing). */
static void check_synced(struct regset *set)
{
	size_t synced = 0;

	if (set->synced_told)
		return;
	for (size_t i = 0; i < set->n; i++) {
		if (set->links[i]->synced)
			synced++;
		else if (!set->links[i]->failed)
			return;
	}
	if (synced == 0)
		return;
	set->synced_told = true;
	set->ev->synced(set->links[0]->tm);
}

/* Send the subscription of class `c` on a ready link. */
static void link_subscribe(struct reglink *rl, const struct tm_class *c)
{
	cmon_send_subscribe(peer_output(rl->peer), c->id, c->prog, c->machine, c->pid,
			    c->autostart, c->block);
}

static bool link_ready(const struct reglink *rl)
{
	return peer_state(rl->peer) == PEER_READY;
}

/* The registry refused our subscriptions (not authorized): say so once
 * until it accepts one, with what would let us in. */
static void denied(struct reglink *rl, const char *msg)
{
	if (!rl->denied)
		cmon_err("registry at %s refuses our subscriptions: %s; give the telemonitor the "
			 "registry's -secret-file (-registry-secret-file), a client certificate "
			 "the registry's CA signed, or run it as a user the registry allows "
			 "(-allow-user); retrying", rl->name, msg);
	rl->denied = true;
	rl->warned = true;                /* the line above says it all; the retries are debug */
}

/* The connection failed or broke; the peer retries after d->retry_ms. */
static void on_down(struct peer *p, const struct peer_down *d, void *arg)
{
	struct reglink *rl = arg;
	char buf[300];
	const char *why = d->why;

	(void)p;
	if (d->kind == PEER_DOWN_ERROR && d->error->has_code &&
	    d->error->code == CMON__ERROR_CODE__ERROR_DENIED) {
		const char *msg = d->error->message ? d->error->message : "not authorized";
		denied(rl, msg);
		snprintf(buf, sizeof buf, "it refused our subscriptions: %s", msg);
		why = buf;
	} else if (d->kind == PEER_DOWN_CLOSED) {
		why = "it closed the connection";
	}
	rl->failed = true;
	if (d->was == PEER_READY)
		rl->set->ev->lost(rl->tm, rl->index);
	if (!rl->warned) {
		cmon_warn("registry unavailable at %s: %s; retrying (monitoring goes on)", rl->name,
			  why);
		rl->warned = true;
	} else {
		cmon_debug("registry at %s: %s; retry in %u ms", rl->name, why, d->retry_ms);
	}
	check_synced(rl->set);
}

static void subscribe_all(struct reglink *rl)
{
	struct tm_class *c;

	rl->pending_acks = 0;
	TAILQ_FOREACH(c, &rl->tm->classes, link) {
		link_subscribe(rl, c);
		rl->pending_acks++;
	}
	if (!rl->pending_acks && !rl->synced) {
		rl->synced = true;
		check_synced(rl->set);
	}
}

/* The registry said Hello: subscribe every class. */
static void on_ready(struct peer *p, const Cmon__Hello *hello, void *arg)
{
	struct reglink *rl = arg;

	(void)hello;
	if (!rl->denied) {     /* else: it is up, but will it have us? (an ack says) */
		peer_backoff_reset(p);
		if (rl->warned || !rl->ever)
			cmon_notice("registry %s at %s", rl->warned ? "available again" : "connected",
				    rl->name);
		rl->warned = false;
	}
	rl->ever = true;
	subscribe_all(rl);
}

/* One message from the registry after its Hello. */
static void on_message(struct peer *p, const Cmon__Msg *m, void *arg)
{
	struct reglink *rl = arg;

	switch (m->kind_case) {
	case CMON__MSG__KIND_SUBSCRIBE_ACK:
		if (rl->denied) {
			cmon_notice("registry at %s accepts our subscriptions now", rl->name);
			rl->denied = false;
			rl->warned = false;
			peer_backoff_reset(p);
		}
		if (rl->pending_acks && --rl->pending_acks == 0 && !rl->synced) {
			rl->synced = true;
			check_synced(rl->set);
		}
		return;
	case CMON__MSG__KIND_INSTANCE_UP:
		if (m->instance_up->instance)
			rl->set->ev->up(rl->tm, rl->index, m->instance_up);
		return;
	case CMON__MSG__KIND_INSTANCE_GONE:
		rl->set->ev->gone(rl->tm, rl->index, m->instance_gone);
		return;
	default:
		cmon_debug("registry: ignoring %s", cmon_msg_kind_name(m));
		return;
	}
}

static const struct peer_events link_events = {
	.on_ready = on_ready,
	.on_message = on_message,
	.on_down = on_down,
};

/* A link to the registry at `item`, not connected yet. NULL on ENOMEM. */
static struct reglink *link_new(struct tmon *tm, struct regset *set, unsigned index,
				const struct cmon_addr_item *item)
{
	struct reglink *rl = calloc(1, sizeof *rl);
	struct peer_options opt = {
		.role = CMON__ROLE__ROLE_TELEMONITOR,
		.software = "telemonitor " CMON_VERSION,
		/* with -registry-secret-file, the secret that lets us subscribe */
		.secret = (const uint8_t *)tm->opt.registry_secret,
		.secret_len = tm->opt.registry_secret_len,
		.tls = tm->tls,
		.dns = tm->dns,
		.connect_ms = RL_CONNECT_MS,
		.backoff = { .min_ms = RL_BACKOFF_MIN_MS, .max_ms = RL_BACKOFF_MAX_MS,
			     .jitter_pct = 20 },
	};

	if (!rl)
		return NULL;
	rl->tm = tm;
	rl->set = set;
	rl->index = index;
	snprintf(rl->name, sizeof rl->name, "%s", item->text);
	rl->peer = peer_new(tm->base, &item->addr, &opt, &link_events, rl);
	if (!rl->peer) {
		free(rl);
		return NULL;
	}
	return rl;
}

int reg_start(struct tmon *tm, const struct reg_events *ev)
{
	struct cmon_addr_item items[CMON_REGISTRIES_MAX];
	struct regset *set;
	char err[CMON_ADDRSTR_MAX + 64];
	size_t n;
	int r;

	r = cmon_addr_list_parse(tm->opt.regmachine, CMON_REGISTRY_PORT, items, CMON_REGISTRIES_MAX,
				 &n, err, sizeof err);
	if (r < 0) {
		cmon_err("registry: %s", err);
		return r;
	}
	set = calloc(1, sizeof *set);
	if (!set)
		return -ENOMEM;
	set->ev = ev;
	tm->reg = set;
	for (size_t i = 0; i < n; i++) {
		set->links[i] = link_new(tm, set, (unsigned)i, &items[i]);
		if (!set->links[i])
			return -ENOMEM;              /* reg_free() cleans up */
		set->n++;
	}
	for (size_t i = 0; i < set->n; i++)
		peer_start(set->links[i]->peer);
	return 0;
}

void reg_subscribe(struct tmon *tm, const struct tm_class *c)
{
	for (size_t i = 0; tm->reg && i < tm->reg->n; i++)
		if (link_ready(tm->reg->links[i]))   /* else sent when it is up */
			link_subscribe(tm->reg->links[i], c);
}

void reg_unsubscribe(struct tmon *tm, uint32_t id)
{
	for (size_t i = 0; tm->reg && i < tm->reg->n; i++)
		if (link_ready(tm->reg->links[i]))
			cmon_send_unsubscribe(peer_output(tm->reg->links[i]->peer), id);
}

/* How many links are up. */
static size_t links_ready(const struct regset *set)
{
	size_t k = 0;

	for (size_t i = 0; i < set->n; i++)
		k += link_ready(set->links[i]);
	return k;
}

bool reg_connected(const struct tmon *tm)
{
	return tm->reg && links_ready(tm->reg) > 0;
}

/* The state of one link, for status output. */
static const char *link_status(const struct reglink *rl)
{
	if (rl->denied && !link_ready(rl))
		return "refused: not authorized to subscribe (retrying)";
	switch (peer_state(rl->peer)) {
	case PEER_READY: return "connected";
	case PEER_HELLO:
	case PEER_CONNECTING: return rl->ever ? "reconnecting" : "connecting";
	case PEER_BACKOFF: return "unavailable (retrying)";
	default: return "?";
	}
}

/* How many links the registry refused (not authorized) and not yet
 * accepted since. */
static size_t links_denied(const struct regset *set)
{
	size_t k = 0;

	for (size_t i = 0; i < set->n; i++)
		k += set->links[i]->denied && !link_ready(set->links[i]);
	return k;
}

const char *reg_status(const struct tmon *tm)
{
	struct regset *set = tm->reg;
	size_t k, d;

	if (!set || set->n == 0)
		return "none";
	if (set->n == 1)
		return link_status(set->links[0]);
	k = links_ready(set);
	d = links_denied(set);
	if (k == 0)
		return d ? "refused: not authorized to subscribe (retrying)" : "unavailable (retrying)";
	if (d)
		snprintf(set->status, sizeof set->status, "%zu of %zu connected, %zu refused", k,
			 set->n, d);
	else
		snprintf(set->status, sizeof set->status, "%zu of %zu connected", k, set->n);
	return set->status;
}

void reg_free(struct tmon *tm)
{
	struct regset *set = tm->reg;

	if (!set)
		return;
	for (size_t i = 0; i < set->n; i++) {
		peer_free(set->links[i]->peer);
		free(set->links[i]);
	}
	free(set);
	tm->reg = NULL;
}
