/* One outgoing control connection that keeps itself up (see peer.h): the
 * state machine of a registry link, shared by snarflog's announcer and the
 * telemonitor's registry links. Everything that happens to the
 * connection comes through drive() (a message) or down() (a failure). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "cmon/connect.h"
#include "cmon/peer.h"
#include "cmon/tls.h"

/* One peer. */
struct peer {
	struct event_base *base;      /* the loop (borrowed) */
	struct cmon_addr addr;        /* where the other side is */
	struct peer_options opt;      /* how to connect and greet (pointers borrowed) */
	struct peer_events ev;        /* the owner's callbacks */
	void *arg;                    /* their argument */
	enum peer_state state;        /* see enum peer_state */
	struct cmon_connector *conn;  /* CONNECTING: the attempt */
	struct bufferevent *bev;      /* HELLO, READY, CLOSING: the connection */
	struct event *timer;          /* BACKOFF: the next attempt; CLOSING: the deadline */
	struct event *ping_timer;     /* the next Ping (ping_ms) */
	struct cmon_backoff retry;    /* delays between failed attempts */
	uint64_t ping_nonce;          /* the last Ping's nonce */
	bool ping_out;                /* a Ping was sent ... */
	bool heard;                   /* ... and something has arrived since */
};

static const char *const state_names[] = {
#define PEER_STATE_NAME(name, text) [name] = text,
	PEER_STATES(PEER_STATE_NAME)
#undef PEER_STATE_NAME
};

const char *peer_state_name(enum peer_state s)
{
	if ((size_t)s >= sizeof state_names / sizeof state_names[0] || !state_names[s])
		return "?";
	return state_names[s];
}

enum peer_state peer_state(const struct peer *p)
{
	return p->state;
}

/* Drop the connection or the attempt, and the timers. */
static void disconnect(struct peer *p)
{
	cmon_connect_cancel(p->conn);
	p->conn = NULL;
	if (p->bev) {
		bufferevent_free(p->bev);
		p->bev = NULL;
	}
	evtimer_del(p->timer);
	evtimer_del(p->ping_timer);
}

static void attempt(struct peer *p);

static void backoff_fire(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	attempt(arg);
}

/* The connection failed, broke or was closed: tell the owner, after
 * arming the next attempt (unless it was CLOSING), so that the owner may
 * stop the peer from its callback. */
static void down(struct peer *p, enum peer_down_kind kind, const char *why,
		 const Cmon__Error *error)
{
	struct peer_down d = { .kind = kind, .was = p->state, .why = why, .error = error };

	disconnect(p);
	if (d.was == PEER_CLOSING) {
		p->state = PEER_IDLE;
	} else {
		d.retry_ms = cmon_backoff_next(&p->retry);
		p->state = PEER_BACKOFF;
		evtimer_assign(p->timer, p->base, backoff_fire, p);
		cmon_timer_arm_ms(p->timer, d.retry_ms);
	}
	if (p->ev.on_down)
		p->ev.on_down(p, &d, p->arg);
}

static void ping_fire(evutil_socket_t fd, short what, void *arg)
{
	struct peer *p = arg;
	char why[64];

	(void)fd;
	(void)what;
	if (p->ping_out && !p->heard) {
		snprintf(why, sizeof why, "no answer to a ping within %u ms", p->opt.ping_ms);
		down(p, PEER_DOWN_PING, why, NULL);
		return;
	}
	cmon_send_ping(bufferevent_get_output(p->bev), false, ++p->ping_nonce);
	p->ping_out = true;
	p->heard = false;
	cmon_timer_arm_ms(p->ping_timer, p->opt.ping_ms);
}

/* Advance the peer by one message from the other side. */
static void drive(struct peer *p, const Cmon__Msg *m)
{
	char why[200];
	Cmon__Role role;

	p->heard = true;
	switch (m->kind_case) {
	case CMON__MSG__KIND_PING:
		cmon_send_ping(bufferevent_get_output(p->bev), true,
			       m->ping->has_nonce ? m->ping->nonce : 0);
		return;
	case CMON__MSG__KIND_PONG:
		return;
	case CMON__MSG__KIND_ERROR:
		snprintf(why, sizeof why, "it reported an error: %s",
			 m->error->message ? m->error->message : "?");
		down(p, PEER_DOWN_ERROR, why, m->error);
		return;
	default:
		break;
	}
	if (p->state == PEER_HELLO) {
		if (!cmon_hello_ok(m, &role, why, sizeof why)) {
			down(p, PEER_DOWN_HELLO, why, NULL);
			return;
		}
		p->state = PEER_READY;
		if (p->ev.on_ready)
			p->ev.on_ready(p, m->hello, p->arg);
		return;
	}
	if (p->ev.on_message)
		p->ev.on_message(p, m, p->arg);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct peer *p = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	const char *why = NULL;
	Cmon__Msg *m;
	int r;

	while (p->bev == bev) {
		r = cmon_frame_next(in, p->opt.frame_max, &m, &why);
		if (r == 0)
			return;
		if (r < 0) {
			down(p, PEER_DOWN_FRAME, why ? why : "bad frame", NULL);
			return;
		}
		drive(p, m);
		cmon_msg_free(m);
	}
}

static void write_cb(struct bufferevent *bev, void *arg)
{
	struct peer *p = arg;

	if (p->state == PEER_CLOSING && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		down(p, PEER_DOWN_FLUSHED, "closed", NULL);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct peer *p = arg;
	int e = EVUTIL_SOCKET_ERROR();
	char tlserr[200];

	if (what & BEV_EVENT_CONNECTED)
		return;
	/* (an error without errno is TLS's: e.g. the other side refused our
	 * certificate, which TLS 1.3 tells after the handshake) */
	if (what & BEV_EVENT_EOF)
		down(p, PEER_DOWN_CLOSED, "connection closed", NULL);
	else
		down(p, PEER_DOWN_IO,
		     e ? evutil_socket_error_to_string(e) : cmon_tls_error(bev, tlserr, sizeof tlserr),
		     NULL);
}

static void connected(struct bufferevent *bev, const char *peer, const char *err, void *arg)
{
	struct peer *p = arg;

	(void)peer;
	p->conn = NULL;
	if (!bev) {
		down(p, PEER_DOWN_CONNECT, err, NULL);
		return;
	}
	p->bev = bev;
	p->state = PEER_HELLO;
	p->ping_out = false;
	bufferevent_setcb(bev, read_cb, write_cb, event_cb, p);
	bufferevent_setwatermark(bev, EV_READ, 0, p->opt.frame_max + 16);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	cmon_send_hello_ext(bufferevent_get_output(bev), p->opt.role, p->opt.software,
			    p->opt.challenge, p->opt.challenge_len, p->opt.secret,
			    p->opt.secret_len);
	if (p->opt.ping_ms)
		cmon_timer_arm_ms(p->ping_timer, p->opt.ping_ms);
	if (p->ev.on_connected)
		p->ev.on_connected(p, p->arg);
}

static void attempt(struct peer *p)
{
	p->state = PEER_CONNECTING;
	p->conn = cmon_connect_start(p->base, p->opt.dns, &p->addr,
				     p->addr.kind == CMON_ADDR_TCP ? p->opt.tls : NULL,
				     (int)p->opt.connect_ms, connected, p);
	if (!p->conn)
		down(p, PEER_DOWN_CONNECT, "out of memory", NULL);
}

int peer_start(struct peer *p)
{
	if (p->state != PEER_IDLE && p->state != PEER_BACKOFF)
		return -EALREADY;
	evtimer_del(p->timer);
	attempt(p);
	return 0;
}

int peer_send(struct peer *p, const Cmon__Msg *m)
{
	if (!p->bev || p->state == PEER_CLOSING)
		return -ENOTCONN;
	return cmon_frame_send(bufferevent_get_output(p->bev), m);
}

struct evbuffer *peer_output(struct peer *p)
{
	return p->bev && p->state != PEER_CLOSING ? bufferevent_get_output(p->bev) : NULL;
}

void peer_fail(struct peer *p, const char *why)
{
	if (p->state == PEER_IDLE || p->state == PEER_BACKOFF)
		return;
	down(p, PEER_DOWN_OWNER, why, NULL);
}

static void deadline_fire(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	down(arg, PEER_DOWN_DEADLINE, "not written in time", NULL);
}

int peer_close_flush(struct peer *p, unsigned deadline_ms)
{
	if (p->state != PEER_READY)
		return -ENOTCONN;
	p->state = PEER_CLOSING;
	evtimer_del(p->ping_timer);
	if (evbuffer_get_length(bufferevent_get_output(p->bev)) == 0) {
		down(p, PEER_DOWN_FLUSHED, "closed", NULL);
		return 0;
	}
	bufferevent_setwatermark(p->bev, EV_WRITE, 0, 0);
	evtimer_assign(p->timer, p->base, deadline_fire, p);
	cmon_timer_arm_ms(p->timer, deadline_ms);
	return 0;
}

void peer_backoff_reset(struct peer *p)
{
	cmon_backoff_reset(&p->retry);
}

void peer_stop(struct peer *p)
{
	disconnect(p);
	p->state = PEER_IDLE;
}

struct peer *peer_new(struct event_base *base, const struct cmon_addr *addr,
		      const struct peer_options *opt, const struct peer_events *ev, void *arg)
{
	struct peer *p = calloc(1, sizeof *p);

	if (!p)
		return NULL;
	p->base = base;
	p->addr = *addr;
	p->opt = *opt;
	if (!p->opt.frame_max)
		p->opt.frame_max = CMON_CONTROL_FRAME_MAX;
	p->ev = *ev;
	p->arg = arg;
	p->retry = opt->backoff;
	p->retry.failures = 0;
	p->timer = evtimer_new(base, backoff_fire, p);
	if (!p->timer)
		goto out_free_peer;
	p->ping_timer = evtimer_new(base, ping_fire, p);
	if (!p->ping_timer)
		goto out_free_timer;
	return p;

out_free_timer:
	event_free(p->timer);
out_free_peer:
	free(p);
	return NULL;
}

void peer_free(struct peer *p)
{
	if (!p)
		return;
	disconnect(p);
	event_free(p->timer);
	event_free(p->ping_timer);
	free(p);
}
