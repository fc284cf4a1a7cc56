/* Registry connections: one state machine per peer (enum conn_state),
 * driven by conn_drive() for every decoded message. Misbehaving peers get
 * an Error, a log line naming them, and are disconnected; nobody else is
 * affected. A subscriber's first Subscribe is served only if it is
 * authenticated (auth.c). Connections are freed from the reaper event,
 * never from inside an iteration that might still look at them. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmon/log.h"
#include "cmon/tls.h"
#include "registry.h"

static const char *state_name(enum conn_state s)
{
	switch (s) {
	case CONN_HELLO: return "waiting for hello";
	case CONN_SNARFLOG: return "snarflog, not announced";
	case CONN_ANNOUNCED: return "snarflog, announced";
	case CONN_LEFT: return "snarflog, left";
	case CONN_TELEMONITOR: return "telemonitor";
	case CONN_CLOSING: return "closing";
	case CONN_DEAD: return "closed";
	}
	return "?";
}

/* Move `c` to the doomed list; the reaper frees it from a clean stack. */
static void conn_retire(struct conn *c)
{
	struct reg *r = c->reg;

	if (c->state == CONN_DEAD)
		return;
	c->state = CONN_DEAD;
	bufferevent_disable(c->bev, EV_READ | EV_WRITE);
	TAILQ_REMOVE(&r->conns, c, link);
	TAILQ_INSERT_TAIL(&r->doomed, c, link);
	r->nconns--;
	event_active(r->reaper, EV_TIMEOUT, 0);
}

void conn_kill(struct conn *c, const char *fmt, ...)
{
	char why[300];
	va_list ap;

	if (c->state == CONN_DEAD)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	cmon_warn("%s: %s; disconnecting", c->peer, why);
	conn_retire(c);
}

static void closing_done(evutil_socket_t fd, short what, void *arg)
{
	conn_retire(arg);
}

/* Tell the peer why with an Error and close once it is sent (the caller
 * logs it). */
static void conn_end(struct conn *c, Cmon__ErrorCode code, const char *why)
{
	struct timeval tv = { 5, 0 };

	if (c->state == CONN_CLOSING || c->state == CONN_DEAD)
		return;
	cmon_send_error(bufferevent_get_output(c->bev), code, "%s", why);
	c->state = CONN_CLOSING;
	bufferevent_disable(c->bev, EV_READ);
	/* The write callback retires us when the Error is out; bound the wait. */
	bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
	evtimer_del(c->timer);
	evtimer_assign(c->timer, c->reg->base, closing_done, c);
	evtimer_add(c->timer, &tv);
}

/* Tell the peer why with an Error, log it, and close once it is sent. */
static void conn_fail(struct conn *c, Cmon__ErrorCode code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void conn_fail(struct conn *c, Cmon__ErrorCode code, const char *fmt, ...)
{
	char why[300];
	va_list ap;

	if (c->state == CONN_CLOSING || c->state == CONN_DEAD)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	cmon_warn("%s: %s; disconnecting", c->peer, why);
	conn_end(c, code, why);
}

int conn_send(struct conn *c, const Cmon__Msg *m)
{
	struct evbuffer *out;

	if (c->state == CONN_CLOSING || c->state == CONN_DEAD)
		return -EPIPE;
	out = bufferevent_get_output(c->bev);
	if (cmon_frame_send(out, m) < 0) {
		conn_kill(c, "cannot queue a message");
		return -ENOMEM;
	}
	if (evbuffer_get_length(out) > REG_OUTPUT_MAX) {
		conn_kill(c, "not reading (%zu bytes of notifications queued)",
			  evbuffer_get_length(out));
		return -EPIPE;
	}
	return 0;
}

/* Flood control: a token bucket per connection. */
static bool conn_rate_ok(struct conn *c)
{
	struct timeval now;
	double dt;

	event_base_gettimeofday_cached(c->reg->base, &now);
	dt = (double)(now.tv_sec - c->refill.tv_sec) +
	     (double)(now.tv_usec - c->refill.tv_usec) / 1e6;
	c->refill = now;
	if (dt > 0)
		c->tokens += dt * REG_MSG_RATE;
	if (c->tokens > REG_MSG_BURST)
		c->tokens = REG_MSG_BURST;
	if (c->tokens < 1.0)
		return false;
	c->tokens -= 1.0;
	return true;
}

static void on_hello(struct conn *c, const Cmon__Msg *m)
{
	char why[200];
	Cmon__Role role;

	if (!cmon_hello_ok(m, &role, why, sizeof why)) {
		conn_fail(c, m->kind_case == CMON__MSG__KIND_HELLO ? CMON__ERROR_CODE__ERROR_VERSION
								   : CMON__ERROR_CODE__ERROR_PROTOCOL,
			  "%s", why);
		return;
	}
	if (role == CMON__ROLE__ROLE_SNARFLOG) {
		c->state = CONN_SNARFLOG;
	} else if (role == CMON__ROLE__ROLE_TELEMONITOR) {
		c->state = CONN_TELEMONITOR;
		auth_hello(c, m->hello);
	} else {
		conn_fail(c, CMON__ERROR_CODE__ERROR_PROTOCOL, "hello from unexpected role %d",
			  (int)role);
		return;
	}
	evtimer_del(c->timer);
	cmon_send_hello(bufferevent_get_output(c->bev), CMON__ROLE__ROLE_REGISTRY,
			"telemonreg " CMON_VERSION);
	cmon_debug("%s: hello from %s (%s)", c->peer,
		   c->state == CONN_SNARFLOG ? "snarflog" : "telemonitor",
		   m->hello->software ? m->hello->software : "?");
}

static void on_announce(struct conn *c, const Cmon__Announce *a)
{
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__AnnounceAck ack = CMON__ANNOUNCE_ACK__INIT;
	char why[CMON_ADDRSTR_MAX + 200], endpoint[CMON_ADDRSTR_MAX];
	int r;

	if (!cmon_instance_ok(a->instance, why, sizeof why)) {
		conn_fail(c, CMON__ERROR_CODE__ERROR_BAD_NAME, "bad announce: %s", why);
		return;
	}
	if (a->has_token && a->token.len != CMON_TOKEN_LEN) {
		conn_fail(c, CMON__ERROR_CODE__ERROR_BAD_NAME, "bad announce: a token of %zu bytes "
			  "(want %d)", a->token.len, CMON_TOKEN_LEN);
		return;
	}
	/* Subscribers will dial this: only the announcer's own address. */
	r = endpoint_check(a->instance->data_endpoint, (struct sockaddr *)&c->peer_sa,
			   c->reg->unix_dir, endpoint, sizeof endpoint, why, sizeof why);
	if (r < 0) {
		conn_fail(c, r == -EPERM ? CMON__ERROR_CODE__ERROR_DENIED
					 : CMON__ERROR_CODE__ERROR_BAD_NAME, "%s", why);
		return;
	}
	r = matcher_add_instance(c->reg, c, a, endpoint, &c->inst);
	if (r < 0) {
		conn_fail(c, CMON__ERROR_CODE__ERROR_LIMIT, "out of memory");
		return;
	}
	c->state = CONN_ANNOUNCED;
	ack.has_key = true;
	ack.key = c->inst->info.key;
	ack.has_auto_wanted = true;
	ack.auto_wanted = r == 1;
	m.kind_case = CMON__MSG__KIND_ANNOUNCE_ACK;
	m.announce_ack = &ack;
	conn_send(c, &m);
}

/* A subscriber's Subscribe: only from an authenticated one (auth.c);
 * anyone else is refused and closed before it hears of any instance. */
static void on_subscribe(struct conn *c, const Cmon__Subscribe *s)
{
	char why[300];
	int r;

	if (!auth_subscriber(c, why, sizeof why)) {
		auth_log_refusal(c->reg, c->peer, why);
		conn_end(c, CMON__ERROR_CODE__ERROR_DENIED, why);
		return;
	}
	r = matcher_add_sub(c->reg, c, s, why, sizeof why);
	if (r < 0)
		conn_fail(c, (Cmon__ErrorCode)-r, "%s", why);
}

/* Advance `c` by one message from its peer. */
static void conn_drive(struct conn *c, const Cmon__Msg *m)
{
	/* Valid in every state after Hello. */
	if (c->state != CONN_HELLO) {
		if (m->kind_case == CMON__MSG__KIND_PING) {
			cmon_send_ping(bufferevent_get_output(c->bev), true,
				       m->ping->has_nonce ? m->ping->nonce : 0);
			return;
		}
		if (m->kind_case == CMON__MSG__KIND_PONG)
			return;
		if (m->kind_case == CMON__MSG__KIND_ERROR) {
			conn_kill(c, "peer reported error: %s",
				  m->error->message ? m->error->message : "?");
			return;
		}
	}
	switch (c->state) {
	case CONN_HELLO:
		on_hello(c, m);
		return;
	case CONN_SNARFLOG:
		if (m->kind_case == CMON__MSG__KIND_ANNOUNCE) {
			on_announce(c, m->announce);
			return;
		}
		break;
	case CONN_ANNOUNCED:
		if (m->kind_case == CMON__MSG__KIND_LEAVE) {
			c->inst->has_length = m->leave->has_records;
			c->inst->length = m->leave->records;
			matcher_remove_instance(c->reg, c->inst, true);
			c->inst = NULL;
			c->state = CONN_LEFT;
			return;
		}
		break;
	case CONN_TELEMONITOR:
		if (m->kind_case == CMON__MSG__KIND_SUBSCRIBE) {
			on_subscribe(c, m->subscribe);
			return;
		}
		if (m->kind_case == CMON__MSG__KIND_UNSUBSCRIBE) {
			if (!matcher_remove_sub(c->reg, c, m->unsubscribe->id))
				cmon_debug("%s: unsubscribe of unknown class %u", c->peer,
					   m->unsubscribe->id);
			return;
		}
		break;
	case CONN_LEFT:
	case CONN_CLOSING:
	case CONN_DEAD:
		break;
	}
	conn_fail(c, CMON__ERROR_CODE__ERROR_PROTOCOL, "unexpected %s message (%s)",
		  cmon_msg_kind_name(m), state_name(c->state));
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	const char *why = NULL;
	Cmon__Msg *m;
	int r;

	while (c->state != CONN_CLOSING && c->state != CONN_DEAD) {
		r = cmon_frame_next(in, CMON_CONTROL_FRAME_MAX, &m, &why);
		if (r == 0)
			return;
		if (r < 0) {
			conn_fail(c, r == -EMSGSIZE ? CMON__ERROR_CODE__ERROR_TOO_BIG
						    : CMON__ERROR_CODE__ERROR_PROTOCOL,
				  "%s", why);
			return;
		}
		if (!conn_rate_ok(c)) {
			cmon_msg_free(m);
			conn_fail(c, CMON__ERROR_CODE__ERROR_LIMIT,
				  "flooding (over %.0f messages per second)", REG_MSG_RATE);
			return;
		}
		conn_drive(c, m);
		cmon_msg_free(m);
	}
}

static void write_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	if (c->state == CONN_CLOSING && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		conn_retire(c);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	char tlserr[200];
	int e = EVUTIL_SOCKET_ERROR();

	if (what & BEV_EVENT_CONNECTED) {
		cmon_debug("%s: TLS established", c->peer);
		return;
	}
	if (c->state == CONN_CLOSING || c->state == CONN_DEAD) {
		conn_retire(c);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		if (c->state == CONN_ANNOUNCED)
			cmon_debug("%s: snarflog for %s pid %lld went away without leaving", c->peer,
				  c->inst->info.program, (long long)c->inst->info.pid);
		else if (c->state == CONN_HELLO)
			cmon_warn("%s: closed before saying hello", c->peer);
		else
			cmon_debug("%s: closed", c->peer);
		conn_retire(c);
	} else if (what & BEV_EVENT_TIMEOUT) {
		conn_kill(c, "not reading its notifications for 30 s");
	} else if (c->reg->tls && c->state == CONN_HELLO && !e) {
		conn_kill(c, "TLS handshake failed: %s", cmon_tls_error(bev, tlserr, sizeof tlserr));
	} else {
		conn_kill(c, "connection error: %s", e ? evutil_socket_error_to_string(e)
						     : cmon_tls_error(bev, tlserr, sizeof tlserr));
	}
}

static void hello_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	conn_kill(c, "no hello within %d s", c->reg->hello_timeout_s);
}

void conn_accept(struct reg *r, int fd)
{
	struct timeval hello = { r->hello_timeout_s, 0 }, wr = { 30, 0 };
	socklen_t salen = sizeof(struct sockaddr_storage);
	struct conn *c;

	if (r->nconns >= r->max_conns) {
		struct timeval now;
		char peer[CMON_ADDRSTR_MAX];
		event_base_gettimeofday_cached(r->base, &now);
		if (now.tv_sec != r->last_refused_log) {
			cmon_warn("%s: refused: already %zu connections (the limit)",
				  cmon_peer_name(fd, peer, sizeof peer), r->nconns);
			r->last_refused_log = now.tv_sec;
		}
		close(fd);
		return;
	}
	c = calloc(1, sizeof *c);
	if (!c) {
		close(fd);
		return;
	}
	c->reg = r;
	c->state = CONN_HELLO;
	TAILQ_INIT(&c->subs);
	c->tokens = REG_MSG_BURST;
	event_base_gettimeofday_cached(r->base, &c->refill);
	cmon_peer_name(fd, c->peer, sizeof c->peer);
	/* Where the peer is: the only address its announce may name. */
	if (getpeername(fd, (struct sockaddr *)&c->peer_sa, &salen) < 0)
		c->peer_sa.ss_family = AF_UNSPEC;
	cmon_socket_tune(fd);
	c->bev = cmon_tls_accept_bev(r->base, r->tls, fd);
	c->timer = evtimer_new(r->base, hello_timeout, c);
	if (!c->bev || !c->timer) {
		if (c->bev)
			bufferevent_free(c->bev);
		if (c->timer)
			event_free(c->timer);
		free(c);
		return;
	}
	TAILQ_INSERT_TAIL(&r->conns, c, link);
	r->nconns++;
	bufferevent_setcb(c->bev, read_cb, write_cb, event_cb, c);
	/* Never buffer more than one maximal frame of a peer's input. */
	bufferevent_setwatermark(c->bev, EV_READ, 0, CMON_CONTROL_FRAME_MAX + 16);
	bufferevent_set_timeouts(c->bev, NULL, &wr);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	evtimer_add(c->timer, &hello);
	cmon_debug("%s: connected", c->peer);
}

/* Free everything a retired connection holds. */
static void conn_free(struct reg *r, struct conn *c)
{
	if (c->inst) {
		matcher_remove_instance(r, c->inst, false);
		c->inst = NULL;
	}
	matcher_remove_conn_subs(r, c);
	bufferevent_free(c->bev);
	event_free(c->timer);
	free(c);
}

/* The reaper: free retired connections (their instances go, so
 * subscribers hear InstanceGone). */
void conn_reap(evutil_socket_t fd, short what, void *arg)
{
	struct reg *r = arg;
	struct conn *c;

	while ((c = TAILQ_FIRST(&r->doomed))) {
		TAILQ_REMOVE(&r->doomed, c, link);
		conn_free(r, c);
	}
}

void conn_close_all(struct reg *r)
{
	struct conn *c;

	while ((c = TAILQ_FIRST(&r->conns))) {
		TAILQ_REMOVE(&r->conns, c, link);
		c->state = CONN_DEAD;
		/* Shutting down: subscribers need no InstanceGone from us. */
		if (c->inst) {
			c->inst = NULL;
		}
		matcher_remove_conn_subs(r, c);
		bufferevent_free(c->bev);
		event_free(c->timer);
		free(c);
	}
	conn_reap(-1, 0, r);
	matcher_free_all(r);
}
