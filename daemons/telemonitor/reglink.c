/* The registry link: connect to telemonreg, say Hello, subscribe every
 * class (the subscription id is the class id), and pass on what it says
 * about instances. When the registry goes away the link reconnects with
 * capped exponential backoff and subscribes again; monitoring sessions
 * are direct connections to snarflogs and carry on meanwhile. "Registry
 * unavailable" is logged once per outage, not per attempt. */
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

/* The link. */
struct reglink {
	struct tmon *tm;                /* the service */
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
};

static void attempt(struct reglink *rl);

static void backoff_fire(evutil_socket_t fd, short what, void *arg)
{
	attempt(arg);
}

static void fail(struct reglink *rl, const char *why)
{
	unsigned ms;

	if (rl->bev) {
		bufferevent_free(rl->bev);
		rl->bev = NULL;
	}
	ms = cmon_backoff_next(&rl->retry);
	if (!rl->warned) {
		cmon_warn("registry unavailable at %s: %s; retrying (monitoring goes on)", rl->name,
			  why);
		rl->warned = true;
	} else {
		cmon_debug("registry at %s: %s; retry in %u ms", rl->name, why, ms);
	}
	rl->state = RL_BACKOFF;
	cmon_timer_arm_ms(rl->timer, ms);
}

static void subscribe_all(struct reglink *rl)
{
	struct tm_class *c;

	rl->pending_acks = 0;
	TAILQ_FOREACH(c, &rl->tm->classes, link) {
		reg_subscribe(rl->tm, c);
		rl->pending_acks++;
	}
	if (!rl->pending_acks && !rl->synced) {
		rl->synced = true;
		instances_synced(rl->tm);
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
		cmon_backoff_reset(&rl->retry);
		if (rl->warned || !rl->ever)
			cmon_notice("registry %s at %s", rl->warned ? "available again" : "connected",
				    rl->name);
		rl->warned = false;
		rl->ever = true;
		subscribe_all(rl);
		return;
	}
	switch (m->kind_case) {
	case CMON__MSG__KIND_SUBSCRIBE_ACK:
		if (rl->pending_acks && --rl->pending_acks == 0 && !rl->synced) {
			rl->synced = true;
			instances_synced(rl->tm);
		}
		return;
	case CMON__MSG__KIND_INSTANCE_UP:
		if (m->instance_up->instance)
			instances_up(rl->tm, m->instance_up);
		return;
	case CMON__MSG__KIND_INSTANCE_GONE:
		instances_gone(rl->tm, m->instance_gone->instance,
			       m->instance_gone->has_clean && m->instance_gone->clean);
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
	cmon_send_hello(bufferevent_get_output(bev), CMON__ROLE__ROLE_TELEMONITOR,
			"telemonitor " CMON_VERSION);
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

int reg_start(struct tmon *tm)
{
	struct reglink *rl = calloc(1, sizeof *rl);

	if (!rl)
		return -ENOMEM;
	rl->tm = tm;
	rl->retry = (struct cmon_backoff){ .min_ms = RL_BACKOFF_MIN_MS, .max_ms = RL_BACKOFF_MAX_MS,
					   .jitter_pct = 20 };
	snprintf(rl->name, sizeof rl->name, "%s", tm->opt.regmachine);
	if (cmon_addr_parse(tm->opt.regmachine, CMON_REGISTRY_PORT, &rl->addr) < 0) {
		cmon_err("bad registry address '%s'", tm->opt.regmachine);
		free(rl);
		return -EINVAL;
	}
	rl->timer = evtimer_new(tm->base, backoff_fire, rl);
	if (!rl->timer) {
		free(rl);
		return -ENOMEM;
	}
	tm->reg = rl;
	attempt(rl);
	return 0;
}

void reg_subscribe(struct tmon *tm, const struct tm_class *c)
{
	struct reglink *rl = tm->reg;

	if (!rl || rl->state != RL_READY)
		return;                               /* sent when the link is up */
	cmon_send_subscribe(bufferevent_get_output(rl->bev), c->id, c->prog, c->machine, c->pid,
			    c->autostart, c->block);
}

void reg_unsubscribe(struct tmon *tm, uint32_t id)
{
	struct reglink *rl = tm->reg;

	if (rl && rl->state == RL_READY)
		cmon_send_unsubscribe(bufferevent_get_output(rl->bev), id);
}

bool reg_connected(const struct tmon *tm)
{
	return tm->reg && tm->reg->state == RL_READY;
}

const char *reg_status(const struct tmon *tm)
{
	if (!tm->reg)
		return "none";
	switch (tm->reg->state) {
	case RL_READY: return "connected";
	case RL_HELLO:
	case RL_CONNECTING: return tm->reg->ever ? "reconnecting" : "connecting";
	case RL_BACKOFF: return "unavailable (retrying)";
	}
	return "?";
}

void reg_free(struct tmon *tm)
{
	struct reglink *rl = tm->reg;

	if (!rl)
		return;
	if (rl->conn)
		cmon_connect_cancel(rl->conn);
	if (rl->bev)
		bufferevent_free(rl->bev);
	event_free(rl->timer);
	free(rl);
	tm->reg = NULL;
}
