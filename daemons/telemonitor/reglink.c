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

#include "cmon/backoff.h"
#include "cmon/connect.h"
#include "cmon/log.h"
#include "telemonitor.h"

#define RL_BACKOFF_MIN_MS 100     /* first retry delay */
#define RL_BACKOFF_MAX_MS 3000    /* retry delay cap */
#define RL_CONNECT_MS 5000        /* connect + handshake timeout */

/* Where the link is. */
enum rl_state {
	RL_CONNECTING,    /* a connection attempt is under way */
	RL_HELLO,         /* Hello sent; waiting for the registry's */
	RL_READY,         /* subscribed; notifications flow */
	RL_BACKOFF,       /* waiting before the next attempt */
};

struct regset;

/* One link. */
struct reglink {
	struct tmon *tm;                /* the service */
	struct regset *set;           /* the set it belongs to */
	unsigned index;               /* its place in the list */
	enum rl_state state;          /* see enum rl_state */
	struct cmon_addr addr;        /* where the registry is */
	char name[CMON_ADDRSTR_MAX];  /* its address as given, for messages */
	struct cmon_connector *conn;  /* attempt in progress */
	struct bufferevent *bev;      /* the connection */
	struct event *timer;          /* backoff */
	struct cmon_backoff retry;    /* delays between failed attempts */
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
	cmon_send_subscribe(bufferevent_get_output(rl->bev), c->id, c->prog, c->machine, c->pid,
			    c->autostart, c->block);
}

static void attempt(struct reglink *rl);

static void backoff_fire(evutil_socket_t fd, short what, void *arg)
{
	attempt(arg);
}

static void fail(struct reglink *rl, const char *why)
{
	unsigned ms;
	bool was_ready = rl->state == RL_READY;

	if (rl->bev) {
		bufferevent_free(rl->bev);
		rl->bev = NULL;
	}
	ms = cmon_backoff_next(&rl->retry);
	rl->failed = true;
	if (was_ready)
		rl->set->ev->lost(rl->tm, rl->index);
	if (!rl->warned) {
		cmon_warn("registry unavailable at %s: %s; retrying (monitoring goes on)", rl->name,
			  why);
		rl->warned = true;
	} else {
		cmon_debug("registry at %s: %s; retry in %u ms", rl->name, why, ms);
	}
	rl->state = RL_BACKOFF;
	cmon_timer_arm_ms(rl->timer, ms);
	check_synced(rl->set);
}

/* The registry refused our subscriptions (not authorized): say so once
 * until it accepts one, with what would let us in, and retry. */
static void denied(struct reglink *rl, const char *msg)
{
	char why[300];

	if (!rl->denied)
		cmon_err("registry at %s refuses our subscriptions: %s; give the telemonitor the "
			 "registry's -secret-file (-registry-secret-file), a client certificate "
			 "the registry's CA signed, or run it as a user the registry allows "
			 "(-allow-user); retrying", rl->name, msg);
	rl->denied = true;
	rl->warned = true;                /* the line above says it all; the retries are debug */
	snprintf(why, sizeof why, "it refused our subscriptions: %s", msg);
	fail(rl, why);
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

/* Advance the link by one message from the registry. */
static void drive(struct reglink *rl, const Cmon__Msg *m)
{
	char why[200];
	Cmon__Role role;

	switch (m->kind_case) {
	case CMON__MSG__KIND_PING:
		cmon_send_ping(bufferevent_get_output(rl->bev), true,
			       m->ping->has_nonce ? m->ping->nonce : 0);
		return;
	case CMON__MSG__KIND_PONG:
		return;
	case CMON__MSG__KIND_ERROR:
		if (m->error->has_code && m->error->code == CMON__ERROR_CODE__ERROR_DENIED) {
			denied(rl, m->error->message ? m->error->message : "not authorized");
			return;
		}
		snprintf(why, sizeof why, "it reported an error: %s",
			 m->error->message ? m->error->message : "?");
		fail(rl, why);
		return;
	default:
		break;
	}
	if (rl->state == RL_HELLO) {
		if (!cmon_hello_ok(m, &role, why, sizeof why)) {
			fail(rl, why);
			return;
		}
		rl->state = RL_READY;
		if (!rl->denied) {     /* else: it is up, but will it have us? (an ack says) */
			cmon_backoff_reset(&rl->retry);
			if (rl->warned || !rl->ever)
				cmon_notice("registry %s at %s",
					    rl->warned ? "available again" : "connected", rl->name);
			rl->warned = false;
		}
		rl->ever = true;
		subscribe_all(rl);
		return;
	}
	switch (m->kind_case) {
	case CMON__MSG__KIND_SUBSCRIBE_ACK:
		if (rl->denied) {
			cmon_notice("registry at %s accepts our subscriptions now", rl->name);
			rl->denied = false;
			rl->warned = false;
			cmon_backoff_reset(&rl->retry);
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

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct reglink *rl = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	const char *why = NULL;
	Cmon__Msg *m;
	int r;

	while (rl->bev == bev && (r = cmon_frame_next(in, CMON_CONTROL_FRAME_MAX, &m, &why)) != 0) {
		if (r < 0) {
			fail(rl, why ? why : "bad frame");
			return;
		}
		drive(rl, m);
		cmon_msg_free(m);
	}
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct reglink *rl = arg;
	char tlserr[200];
	int e = EVUTIL_SOCKET_ERROR();

	if (what & BEV_EVENT_CONNECTED)
		return;
	if (what & BEV_EVENT_EOF)
		fail(rl, "it closed the connection");
	else
		fail(rl, e ? evutil_socket_error_to_string(e) : cmon_tls_error(bev, tlserr, sizeof tlserr));
}

static void connected(struct bufferevent *bev, const char *peer, const char *err, void *arg)
{
	struct reglink *rl = arg;

	rl->conn = NULL;
	if (!bev) {
		fail(rl, err);
		return;
	}
	rl->bev = bev;
	rl->state = RL_HELLO;
	bufferevent_setcb(bev, read_cb, NULL, event_cb, rl);
	bufferevent_setwatermark(bev, EV_READ, 0, CMON_CONTROL_FRAME_MAX + 16);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	/* with -registry-secret-file, the secret that lets us subscribe */
	cmon_send_hello_ext(bufferevent_get_output(bev), CMON__ROLE__ROLE_TELEMONITOR,
			    "telemonitor " CMON_VERSION, NULL, 0,
			    (const uint8_t *)rl->tm->opt.registry_secret,
			    rl->tm->opt.registry_secret_len);
}

static void attempt(struct reglink *rl)
{
	rl->state = RL_CONNECTING;
	rl->conn = cmon_connect_start(rl->tm->base, rl->tm->dns, &rl->addr,
				      rl->addr.kind == CMON_ADDR_TCP ? rl->tm->tls : NULL,
				      RL_CONNECT_MS, connected, rl);
	if (!rl->conn)
		fail(rl, "out of memory");
}

/* A link to the registry at `item`, not connected yet. NULL on ENOMEM. */
static struct reglink *link_new(struct tmon *tm, struct regset *set, unsigned index,
				const struct cmon_addr_item *item)
{
	struct reglink *rl = calloc(1, sizeof *rl);

	if (!rl)
		return NULL;
	rl->tm = tm;
	rl->set = set;
	rl->index = index;
	rl->retry = (struct cmon_backoff){ .min_ms = RL_BACKOFF_MIN_MS, .max_ms = RL_BACKOFF_MAX_MS,
					   .jitter_pct = 20 };
	rl->addr = item->addr;
	snprintf(rl->name, sizeof rl->name, "%s", item->text);
	rl->timer = evtimer_new(tm->base, backoff_fire, rl);
	if (!rl->timer) {
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
		attempt(set->links[i]);
	return 0;
}

void reg_subscribe(struct tmon *tm, const struct tm_class *c)
{
	for (size_t i = 0; tm->reg && i < tm->reg->n; i++)
		if (tm->reg->links[i]->state == RL_READY)   /* else sent when it is up */
			link_subscribe(tm->reg->links[i], c);
}

void reg_unsubscribe(struct tmon *tm, uint32_t id)
{
	for (size_t i = 0; tm->reg && i < tm->reg->n; i++)
		if (tm->reg->links[i]->state == RL_READY)
			cmon_send_unsubscribe(bufferevent_get_output(tm->reg->links[i]->bev), id);
}

/* How many links are up. */
static size_t links_ready(const struct regset *set)
{
	size_t k = 0;

	for (size_t i = 0; i < set->n; i++)
		k += set->links[i]->state == RL_READY;
	return k;
}

bool reg_connected(const struct tmon *tm)
{
	return tm->reg && links_ready(tm->reg) > 0;
}

/* The state of one link, for status output. */
static const char *link_status(const struct reglink *rl)
{
	if (rl->denied && rl->state != RL_READY)
		return "refused: not authorized to subscribe (retrying)";
	switch (rl->state) {
	case RL_READY: return "connected";
	case RL_HELLO:
	case RL_CONNECTING: return rl->ever ? "reconnecting" : "connecting";
	case RL_BACKOFF: return "unavailable (retrying)";
	}
	return "?";
}

/* How many links the registry refused (not authorized) and not yet
 * accepted since. */
static size_t links_denied(const struct regset *set)
{
	size_t k = 0;

	for (size_t i = 0; i < set->n; i++)
		k += set->links[i]->denied && set->links[i]->state != RL_READY;
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
		struct reglink *rl = set->links[i];
		if (rl->conn)
			cmon_connect_cancel(rl->conn);
		if (rl->bev)
			bufferevent_free(rl->bev);
		event_free(rl->timer);
		free(rl);
	}
	free(set);
	tm->reg = NULL;
}
