/* The registry links: announce this instance to every registry of the
 * list (-regmachine / TELEMONREG_MACHINE, comma-separated), keep each
 * connection, and when one breaks (or its registry is not there yet) try
 * it again with exponential backoff capped at RL_BACKOFF_MAX_MS,
 * re-announcing so a restarted registry learns about us again. The
 * program is found while any one registry is up. Nothing here ever waits
 * on the network: resolution, connect and TLS are asynchronous. Each link
 * is an explicit state machine (enum reg_state) driven by reg_drive(). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmon/backoff.h"
#include "cmon/connect.h"
#include "cmon/log.h"
#include "cmon/tls.h"
#include "snarflog.h"

#define RL_BACKOFF_MIN_MS 100      /* first retry delay */
#define RL_BACKOFF_MAX_MS 3000     /* retry delay cap */
#define RL_CONNECT_MS 3000         /* per-address connect + handshake bound */
#define RL_LEAVE_MS 1000           /* how long a goodbye may take */

/* Where the link is. */
enum reg_state {
	RL_CONNECTING,    /* resolving / connecting / TLS handshake */
	RL_HANDSHAKE,     /* Hello and Announce sent; waiting for Hello and AnnounceAck */
	RL_UP,            /* announced */
	RL_BACKOFF,       /* waiting before the next attempt */
	RL_LEAVING,       /* Leave sent; closing once it is out */
	RL_DONE,          /* finished */
};

struct regset;

/* One link. */
struct reglink {
	struct snarf *s;              /* back pointer */
	struct regset *set;           /* the set it belongs to */
	enum reg_state state;         /* see enum reg_state */
	struct cmon_addr addr;        /* registry address */
	char name[CMON_ADDRSTR_MAX];  /* registry address for logs */
	struct cmon_connector *conn;  /* connect attempt in progress */
	struct bufferevent *bev;      /* established connection */
	struct event *timer;          /* backoff and leave deadline */
	struct cmon_backoff retry;    /* delays between failed attempts */
	bool announced;               /* an AnnounceAck has been seen once */
	bool hello_seen;              /* the registry's Hello arrived on this connection */
	bool complained;              /* the "unreachable" warning was logged */
};

/* Every registry of the list. */
struct regset {
	struct reglink *links[CMON_REGISTRIES_MAX];  /* one per registry */
	size_t n;                     /* how many */
	size_t ndone;                 /* links finished after reg_leave() */
	bool auto_wanted;             /* some registry has an auto subscriber for us */
};

/* Some link still waits for its registry's first answer. */
static bool first_answer_pending(const struct regset *set)
{
	for (size_t i = 0; i < set->n; i++) {
		const struct reglink *rl = set->links[i];
		if (!rl->announced && !rl->complained &&
		    (rl->state == RL_CONNECTING || rl->state == RL_HANDSHAKE))
			return true;
	}
	return false;
}

/* A link has its first answer (or found its registry unreachable): hold
 * the log for an auto subscriber if any registry has one; release the
 * hold once every registry has answered without one. */
static void first_answers_changed(struct regset *set, struct snarf *s)
{
	if (set->auto_wanted || first_answer_pending(set))
		return;
	core_hold_release(s, set->n > 1 ? "no auto subscriber at any registry"
					: "no auto subscriber");
}

static void reg_connect(struct reglink *rl);

static void timer_set(struct reglink *rl, event_callback_fn fn, unsigned ms)
{
	evtimer_del(rl->timer);
	evtimer_assign(rl->timer, rl->s->base, fn, rl);
	cmon_timer_arm_ms(rl->timer, ms);
}

static void finished(struct reglink *rl)
{
	if (rl->state == RL_DONE)
		return;
	rl->state = RL_DONE;
	evtimer_del(rl->timer);
	if (rl->bev) {
		bufferevent_free(rl->bev);
		rl->bev = NULL;
	}
	if (++rl->set->ndone == rl->set->n)
		core_done(rl->s);
}

static void backoff_fire(evutil_socket_t fd, short what, void *arg)
{
	reg_connect(arg);
}

/* The connection failed or broke: close it and schedule a new attempt. */
static void reg_lost(struct reglink *rl, const char *why)
{
	unsigned ms;

	if (rl->bev) {
		bufferevent_free(rl->bev);
		rl->bev = NULL;
	}
	if (rl->state == RL_LEAVING) {
		finished(rl);
		return;
	}
	ms = cmon_backoff_next(&rl->retry);
	if (rl->state == RL_UP)
		cmon_warn("lost the registry at %s (%s); re-announcing when it is back", rl->name,
			  why);
	else if (!rl->complained)
		cmon_warn("registry at %s unreachable (%s); will keep trying every few seconds",
			  rl->name, why);
	else
		cmon_debug("registry at %s: %s; retry in %u ms", rl->name, why, ms);
	rl->complained = true;
	rl->state = RL_BACKOFF;
	timer_set(rl, backoff_fire, ms);
	if (!rl->announced)
		first_answers_changed(rl->set, rl->s);
	core_check_done(rl->s);             /* nobody to wait for any more */
}

static void send_announce(struct reglink *rl)
{
	struct snarf *s = rl->s;
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__Announce a = CMON__ANNOUNCE__INIT;
	Cmon__Instance in = CMON__INSTANCE__INIT;
	struct evbuffer *out = bufferevent_get_output(rl->bev);

	in.program = (char *)s->opt.program;
	in.machine = s->machine;
	in.has_pid = true;
	in.pid = s->pid;
	in.has_start_unix_ns = true;
	in.start_unix_ns = s->start_unix_ns;
	in.data_endpoint = s->endpoint;
	in.has_format = s->format != CMON__FORMAT__FORMAT_UNSPECIFIED;
	in.format = s->format;
	in.has_tls = true;
	in.tls = s->tls_server != NULL;
	a.instance = &in;
	a.has_reannounce = true;
	a.reannounce = rl->announced;
	a.has_token = true;                 /* the registry hands it to matching subscribers */
	a.token.data = s->token;
	a.token.len = sizeof s->token;
	m.kind_case = CMON__MSG__KIND_ANNOUNCE;
	m.announce = &a;
	cmon_send_hello(out, CMON__ROLE__ROLE_SNARFLOG, "snarflog " CMON_VERSION);
	cmon_frame_send(out, &m);
}

/* Advance the link by one message from the registry. */
static void reg_drive(struct reglink *rl, const Cmon__Msg *m)
{
	char why[200];
	Cmon__Role role;

	if (m->kind_case == CMON__MSG__KIND_PING) {
		cmon_send_ping(bufferevent_get_output(rl->bev), true,
			       m->ping->has_nonce ? m->ping->nonce : 0);
		return;
	}
	if (m->kind_case == CMON__MSG__KIND_ERROR) {
		snprintf(why, sizeof why, "registry refused us: %s",
			 m->error->message ? m->error->message : "?");
		reg_lost(rl, why);
		return;
	}
	switch (rl->state) {
	case RL_HANDSHAKE:
		if (!rl->hello_seen) {
			if (!cmon_hello_ok(m, &role, why, sizeof why)) {
				reg_lost(rl, why);
				return;
			}
			rl->hello_seen = true;
			return;
		}
		if (m->kind_case == CMON__MSG__KIND_ANNOUNCE_ACK) {
			const Cmon__AnnounceAck *ack = m->announce_ack;
			if (rl->complained || rl->announced)
				cmon_notice("%s to the registry at %s",
					    rl->announced ? "re-announced" : "announced", rl->name);
			else
				cmon_debug("announced to the registry at %s (key %llu)", rl->name,
					   (unsigned long long)ack->key);
			rl->state = RL_UP;
			cmon_backoff_reset(&rl->retry);
			rl->complained = false;
			if (!rl->announced && ack->has_auto_wanted && ack->auto_wanted &&
			    !rl->set->auto_wanted) {
				rl->set->auto_wanted = true;
				core_hold_start(rl->s, rl->s->opt.hold_s,
						"an auto subscriber wants the log from the start");
			}
			if (!rl->announced) {
				rl->announced = true;
				first_answers_changed(rl->set, rl->s);
			}
			core_check_done(rl->s);     /* the log may have ended meanwhile */
			return;
		}
		break;
	case RL_UP:
	case RL_LEAVING:
		if (m->kind_case == CMON__MSG__KIND_PONG)
			return;
		break;
	default:
		return;
	}
	snprintf(why, sizeof why, "unexpected %s message from the registry", cmon_msg_kind_name(m));
	reg_lost(rl, why);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct reglink *rl = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	const char *why = NULL;
	Cmon__Msg *m;
	int r;

	while (rl->bev == bev) {
		r = cmon_frame_next(in, CMON_CONTROL_FRAME_MAX, &m, &why);
		if (r == 0)
			return;
		if (r < 0) {
			reg_lost(rl, why);
			return;
		}
		reg_drive(rl, m);
		cmon_msg_free(m);
	}
}

static void write_cb(struct bufferevent *bev, void *arg)
{
	struct reglink *rl = arg;

	if (rl->state == RL_LEAVING && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		finished(rl);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct reglink *rl = arg;
	int e = EVUTIL_SOCKET_ERROR();
	char tlserr[200];

	if (what & BEV_EVENT_CONNECTED)
		return;
	/* (an error without errno is TLS's: e.g. the registry refused our
	 * certificate, which TLS 1.3 tells after the handshake) */
	reg_lost(rl, what & BEV_EVENT_EOF ? "connection closed"
		 : e ? evutil_socket_error_to_string(e) : cmon_tls_error(bev, tlserr, sizeof tlserr));
}

static void connected(struct bufferevent *bev, const char *peer, const char *err, void *arg)
{
	struct reglink *rl = arg;

	rl->conn = NULL;
	if (!bev) {
		reg_lost(rl, err);
		return;
	}
	rl->bev = bev;
	rl->hello_seen = false;
	rl->state = RL_HANDSHAKE;
	bufferevent_setcb(bev, read_cb, write_cb, event_cb, rl);
	bufferevent_setwatermark(bev, EV_READ, 0, CMON_CONTROL_FRAME_MAX + 16);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	send_announce(rl);
}

static void reg_connect(struct reglink *rl)
{
	rl->state = RL_CONNECTING;
	rl->conn = cmon_connect_start(rl->s->base, rl->s->dns, &rl->addr,
				      rl->addr.kind == CMON_ADDR_TCP ? rl->s->tls_client : NULL,
				      RL_CONNECT_MS, connected, rl);
	if (!rl->conn)
		reg_lost(rl, "out of memory");
}

/* A link to the registry at `item`, not connected yet. NULL on ENOMEM. */
static struct reglink *link_new(struct snarf *s, struct regset *set,
				const struct cmon_addr_item *item)
{
	struct reglink *rl = calloc(1, sizeof *rl);

	if (!rl)
		return NULL;
	rl->s = s;
	rl->set = set;
	rl->retry = (struct cmon_backoff){ .min_ms = RL_BACKOFF_MIN_MS, .max_ms = RL_BACKOFF_MAX_MS,
					   .jitter_pct = 20 };
	rl->addr = item->addr;
	cmon_addr_format(&rl->addr, rl->name, sizeof rl->name);
	rl->timer = evtimer_new(s->base, backoff_fire, rl);
	if (!rl->timer) {
		free(rl);
		return NULL;
	}
	return rl;
}

int reg_start(struct snarf *s)
{
	struct cmon_addr_item items[CMON_REGISTRIES_MAX];
	struct regset *set;
	char err[CMON_ADDRSTR_MAX + 64];
	size_t n;
	int r;

	r = cmon_addr_list_parse(s->opt.regmachine, CMON_REGISTRY_PORT, items, CMON_REGISTRIES_MAX,
				 &n, err, sizeof err);
	if (r < 0) {
		cmon_err("registry: %s", err);
		return r;
	}
	set = calloc(1, sizeof *set);
	if (!set)
		return -ENOMEM;
	s->reg = set;
	for (size_t i = 0; i < n; i++) {
		set->links[i] = link_new(s, set, &items[i]);
		if (!set->links[i])
			return -ENOMEM;             /* reg_free() cleans up */
		set->n++;
	}
	/* Until a registry answers we do not know whether an auto subscriber
	 * wants the log from its first record: keep it, briefly. */
	core_hold_start(s, s->opt.hold_s < SNARF_FIRST_ANSWER_S ? s->opt.hold_s
							      : SNARF_FIRST_ANSWER_S,
			"waiting for the registry's answer");
	for (size_t i = 0; i < set->n; i++)
		reg_connect(set->links[i]);
	return 0;
}

bool reg_first_answer_pending(const struct snarf *s)
{
	return s->reg && first_answer_pending(s->reg);
}

static void leave_expired(evutil_socket_t fd, short what, void *arg)
{
	struct reglink *rl = arg;

	cmon_debug("registry at %s did not take our goodbye in time", rl->name);
	finished(rl);
}

/* Say Leave on one link (or just finish it when it is not up). */
static void link_leave(struct reglink *rl)
{
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__Leave l = CMON__LEAVE__INIT;

	if (rl->state == RL_DONE || rl->state == RL_LEAVING)
		return;
	if (rl->state != RL_UP) {
		cmon_connect_cancel(rl->conn);
		rl->conn = NULL;
		finished(rl);
		return;
	}
	l.has_records = true;
	l.records = core_log_length(rl->s);
	m.kind_case = CMON__MSG__KIND_LEAVE;
	m.leave = &l;
	cmon_frame_send(bufferevent_get_output(rl->bev), &m);
	rl->state = RL_LEAVING;
	bufferevent_setwatermark(rl->bev, EV_WRITE, 0, 0);
	timer_set(rl, leave_expired, RL_LEAVE_MS);
}

void reg_leave(struct snarf *s)
{
	struct regset *set = s->reg;

	if (!set || set->n == 0) {
		core_done(s);
		return;
	}
	/* core_done() comes from the last link to finish */
	for (size_t i = 0; i < set->n; i++)
		link_leave(set->links[i]);
}

void reg_free(struct snarf *s)
{
	struct regset *set = s->reg;

	if (!set)
		return;
	for (size_t i = 0; i < set->n; i++) {
		struct reglink *rl = set->links[i];
		cmon_connect_cancel(rl->conn);
		if (rl->bev)
			bufferevent_free(rl->bev);
		event_free(rl->timer);
		free(rl);
	}
	free(set);
	s->reg = NULL;
}
