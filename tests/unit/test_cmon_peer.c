/* cmon/peer.h: one control connection that keeps itself up, driven
 * against a listener on a Unix socket in a temporary directory whose
 * other side the test plays: connect and Hello (with the secret), a
 * message after the Hello, its Pings answered, the other side closing (down,
 * then a reconnect after the backoff), an Error, a first message that is
 * not a Hello, an unanswered Ping, a goodbye written before closing, and
 * a registry that is not there yet. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "cmon/peer.h"
#include "cmon/proto.h"

/* What the test's server does once the client's Hello has arrived. */
enum script {
	SC_HELLO_ACK_PING,  /* Hello, a Ping, an AnnounceAck; close once the Pong is back */
	SC_HELLO_ERROR,     /* Hello, then an Error (denied) */
	SC_NOT_HELLO,       /* an AnnounceAck instead of a Hello */
	SC_HELLO_SILENT,    /* Hello, then never answer */
	SC_HELLO_LEAVE,     /* Hello; the client's owner says goodbye on READY */
};

/* The other side, and what the client's owner heard. */
struct world {
	struct event_base *base;
	struct evconnlistener *lis;
	struct event *timeout;         /* fails the test after 20 s */
	char dir[64];
	char path[108];
	struct cmon_addr addr;
	enum script script;
	struct bufferevent *server;    /* the server's end of the current connection */
	int accepts;                   /* connections accepted */
	int hellos_in;                 /* client Hellos seen by the server */
	int pongs_in;                  /* Pongs seen by the server (nonce 7) */
	int leaves_in;                 /* Leaves seen by the server */
	int stop_after_hellos;         /* break the loop at this many client Hellos (0: no) */
	/* the owner's side */
	struct peer *p;
	int connected, ready, messages, downs;
	Cmon__Msg__KindCase last_kind;
	struct peer_down last_down;    /* (why and error are not kept) */
	char last_why[200];
	Cmon__ErrorCode last_error_code;
	bool stop_on_down;             /* break the loop at the first down */
};

static void server_read(struct bufferevent *bev, void *arg)
{
	struct world *w = arg;
	struct evbuffer *out = bufferevent_get_output(bev);
	const char *why = NULL;
	Cmon__Msg *m;

	while (w->server == bev &&
	       cmon_frame_next(bufferevent_get_input(bev), CMON_CONTROL_FRAME_MAX, &m, &why) > 0) {
		Cmon__Msg ack = CMON__MSG__INIT;
		Cmon__AnnounceAck a = CMON__ANNOUNCE_ACK__INIT;

		a.has_key = true;
		a.key = 42;
		ack.kind_case = CMON__MSG__KIND_ANNOUNCE_ACK;
		ack.announce_ack = &a;
		switch (m->kind_case) {
		case CMON__MSG__KIND_HELLO:
			w->hellos_in++;
			assert_int_equal(m->hello->role, CMON__ROLE__ROLE_TELEMONITOR);
			assert_string_equal(m->hello->software, "peer-test 1");
			assert_true(m->hello->has_secret);
			assert_int_equal(m->hello->secret.len, 6);
			assert_memory_equal(m->hello->secret.data, "sesame", 6);
			if (w->stop_after_hellos && w->hellos_in == w->stop_after_hellos) {
				event_base_loopbreak(w->base);
				break;
			}
			switch (w->script) {
			case SC_HELLO_ACK_PING:
				cmon_send_hello(out, CMON__ROLE__ROLE_REGISTRY, "registry 1");
				cmon_send_ping(out, false, 7);
				cmon_frame_send(out, &ack);
				break;
			case SC_HELLO_ERROR:
				cmon_send_hello(out, CMON__ROLE__ROLE_REGISTRY, "registry 1");
				cmon_send_error(out, CMON__ERROR_CODE__ERROR_DENIED, "nope");
				break;
			case SC_NOT_HELLO:
				cmon_frame_send(out, &ack);
				break;
			case SC_HELLO_SILENT:
			case SC_HELLO_LEAVE:
				cmon_send_hello(out, CMON__ROLE__ROLE_REGISTRY, "registry 1");
				break;
			}
			break;
		case CMON__MSG__KIND_PONG:
			assert_int_equal(m->pong->nonce, 7);
			w->pongs_in++;
			/* the other side goes away */
			bufferevent_free(bev);
			w->server = NULL;
			break;
		case CMON__MSG__KIND_LEAVE:
			w->leaves_in++;
			break;
		default:
			break;
		}
		cmon_msg_free(m);
	}
}

static void server_event(struct bufferevent *bev, short what, void *arg)
{
	struct world *w = arg;

	(void)what;
	if (w->server == bev) {
		bufferevent_free(bev);
		w->server = NULL;
	}
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
		      int socklen, void *arg)
{
	struct world *w = arg;

	(void)l;
	(void)sa;
	(void)socklen;
	w->accepts++;
	if (w->server)
		bufferevent_free(w->server);
	w->server = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
	assert_non_null(w->server);
	bufferevent_setcb(w->server, server_read, NULL, server_event, w);
	bufferevent_enable(w->server, EV_READ | EV_WRITE);
}

static void listen_on(struct world *w)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", w->path);
	w->lis = evconnlistener_new_bind(w->base, on_accept, w, LEV_OPT_CLOSE_ON_FREE, 8,
					 (struct sockaddr *)&sun, sizeof sun);
	assert_non_null(w->lis);
}

/* --- the owner ---------------------------------------------------------------- */

static void on_connected(struct peer *p, void *arg)
{
	struct world *w = arg;

	assert_ptr_equal(p, w->p);
	assert_int_equal(peer_state(p), PEER_HELLO);
	assert_non_null(peer_output(p));
	w->connected++;
}

/* Say goodbye and close once it is written. */
static void leave(struct peer *p)
{
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__Leave l = CMON__LEAVE__INIT;

	m.kind_case = CMON__MSG__KIND_LEAVE;
	m.leave = &l;
	assert_int_equal(peer_send(p, &m), 0);
	assert_int_equal(peer_close_flush(p, 2000), 0);
	assert_int_equal(peer_state(p), PEER_CLOSING);
	assert_int_equal(peer_send(p, &m), -ENOTCONN);
}

static void on_ready(struct peer *p, const Cmon__Hello *hello, void *arg)
{
	struct world *w = arg;

	assert_int_equal(peer_state(p), PEER_READY);
	assert_int_equal(hello->role, CMON__ROLE__ROLE_REGISTRY);
	w->ready++;
	if (w->script == SC_HELLO_LEAVE)
		leave(p);
}

static void on_message(struct peer *p, const Cmon__Msg *m, void *arg)
{
	struct world *w = arg;

	(void)p;
	w->messages++;
	w->last_kind = m->kind_case;
}

static void on_down(struct peer *p, const struct peer_down *d, void *arg)
{
	struct world *w = arg;

	w->downs++;
	w->last_down = *d;
	snprintf(w->last_why, sizeof w->last_why, "%s", d->why);
	w->last_error_code = d->error && d->error->has_code ? d->error->code : 0;
	if (d->was == PEER_CLOSING) {
		assert_int_equal(d->retry_ms, 0);
		assert_int_equal(peer_state(p), PEER_IDLE);
	} else {
		assert_true(d->retry_ms > 0);
		assert_int_equal(peer_state(p), PEER_BACKOFF);
	}
	assert_null(peer_output(p));
	if (w->stop_on_down)
		event_base_loopbreak(w->base);
}

static const struct peer_events events = {
	.on_connected = on_connected,
	.on_ready = on_ready,
	.on_message = on_message,
	.on_down = on_down,
};

static void timeout_fire(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	fail_msg("the test timed out");
}

/* A world with a listener (unless `listening` is false) and an idle peer. */
static struct world *world_new(enum script script, unsigned ping_ms, bool listening)
{
	struct world *w = calloc(1, sizeof *w);
	struct peer_options opt = {
		.role = CMON__ROLE__ROLE_TELEMONITOR,
		.software = "peer-test 1",
		.secret = (const uint8_t *)"sesame",
		.secret_len = 6,
		.connect_ms = 2000,
		.ping_ms = ping_ms,
		.backoff = { .min_ms = 20, .max_ms = 40, .jitter_pct = 0 },
	};
	char text[160];
	struct timeval tv = { .tv_sec = 20 };

	assert_non_null(w);
	w->script = script;
	snprintf(w->dir, sizeof w->dir, "/tmp/cmon-peer-XXXXXX");
	assert_non_null(mkdtemp(w->dir));
	snprintf(w->path, sizeof w->path, "%s/reg.sock", w->dir);
	snprintf(text, sizeof text, "unix:%s", w->path);
	assert_int_equal(cmon_addr_parse(text, 0, &w->addr), 0);
	w->base = event_base_new();
	assert_non_null(w->base);
	w->timeout = evtimer_new(w->base, timeout_fire, w);
	assert_non_null(w->timeout);
	evtimer_add(w->timeout, &tv);
	if (listening)
		listen_on(w);
	w->p = peer_new(w->base, &w->addr, &opt, &events, w);
	assert_non_null(w->p);
	assert_int_equal(peer_state(w->p), PEER_IDLE);
	return w;
}

static void world_free(struct world *w)
{
	peer_free(w->p);
	if (w->server)
		bufferevent_free(w->server);
	if (w->lis)
		evconnlistener_free(w->lis);
	event_free(w->timeout);
	event_base_free(w->base);
	unlink(w->path);
	rmdir(w->dir);
	free(w);
}

/* Connect, Hello both ways, a Ping answered, a message; the other side
 * closes: down, and after the backoff a second connection with a new
 * Hello. */
static void test_hello_message_close_reconnect(void **state)
{
	struct world *w = world_new(SC_HELLO_ACK_PING, 0, true);

	(void)state;
	w->stop_after_hellos = 2;
	assert_int_equal(peer_start(w->p), 0);
	assert_int_equal(peer_state(w->p), PEER_CONNECTING);
	assert_int_equal(peer_start(w->p), -EALREADY);
	event_base_dispatch(w->base);

	assert_int_equal(w->accepts, 2);
	assert_int_equal(w->hellos_in, 2);
	assert_int_equal(w->pongs_in, 1);
	assert_int_equal(w->connected, 2);
	assert_int_equal(w->ready, 1);
	assert_int_equal(w->messages, 1);             /* the Ping is not the owner's */
	assert_int_equal(w->last_kind, CMON__MSG__KIND_ANNOUNCE_ACK);
	assert_int_equal(w->downs, 1);
	assert_int_equal(w->last_down.kind, PEER_DOWN_CLOSED);
	assert_int_equal(w->last_down.was, PEER_READY);
	assert_int_equal(w->last_down.retry_ms, 20);
	assert_string_equal(w->last_why, "connection closed");
	assert_int_equal(peer_state(w->p), PEER_HELLO);
	world_free(w);
}

/* A world whose peer has been started and has gone down once. */
static struct world *down_once(enum script script, unsigned ping_ms)
{
	struct world *w = world_new(script, ping_ms, true);

	w->stop_on_down = true;
	assert_int_equal(peer_start(w->p), 0);
	event_base_dispatch(w->base);
	assert_int_equal(w->downs, 1);
	return w;
}

/* An Error from the other side brings the connection down with it. */
static void test_error(void **state)
{
	struct world *w = down_once(SC_HELLO_ERROR, 0);

	(void)state;
	assert_int_equal(w->ready, 1);
	assert_int_equal(w->last_down.kind, PEER_DOWN_ERROR);
	assert_int_equal(w->last_down.was, PEER_READY);
	assert_int_equal(w->last_error_code, CMON__ERROR_CODE__ERROR_DENIED);
	assert_string_equal(w->last_why, "it reported an error: nope");
	world_free(w);
}

/* A first message that is not a Hello. */
static void test_not_hello(void **state)
{
	struct world *w = down_once(SC_NOT_HELLO, 0);

	(void)state;
	assert_int_equal(w->ready, 0);
	assert_int_equal(w->messages, 0);
	assert_int_equal(w->last_down.kind, PEER_DOWN_HELLO);
	assert_int_equal(w->last_down.was, PEER_HELLO);
	assert_non_null(strstr(w->last_why, "expected hello"));
	world_free(w);
}

/* Our Pings go unanswered. */
static void test_ping_unanswered(void **state)
{
	struct world *w = down_once(SC_HELLO_SILENT, 30);

	(void)state;
	assert_int_equal(w->ready, 1);
	assert_int_equal(w->last_down.kind, PEER_DOWN_PING);
	assert_int_equal(w->last_down.was, PEER_READY);
	world_free(w);
}

/* A goodbye is written, then the peer closes for good. */
static void test_close_flush(void **state)
{
	struct world *w = down_once(SC_HELLO_LEAVE, 0);

	(void)state;
	assert_int_equal(w->last_down.kind, PEER_DOWN_FLUSHED);
	assert_int_equal(w->last_down.was, PEER_CLOSING);
	assert_int_equal(peer_state(w->p), PEER_IDLE);
	/* the server reads the Leave (then sees the close) */
	w->stop_on_down = false;
	while (w->server)
		event_base_loop(w->base, EVLOOP_ONCE);
	assert_int_equal(w->leaves_in, 1);
	world_free(w);
}

/* Nobody listens yet: each attempt fails and the delays grow to the cap;
 * stopped, it stays idle; once the listener is there it connects. */
static void test_unreachable_then_up(void **state)
{
	struct world *w = world_new(SC_HELLO_SILENT, 0, false);

	(void)state;
	w->stop_on_down = true;
	peer_start(w->p);
	event_base_dispatch(w->base);
	assert_int_equal(w->last_down.kind, PEER_DOWN_CONNECT);
	assert_int_equal(w->last_down.was, PEER_CONNECTING);
	assert_int_equal(w->last_down.retry_ms, 20);
	event_base_dispatch(w->base);
	assert_int_equal(w->downs, 2);
	assert_int_equal(w->last_down.retry_ms, 40);
	event_base_dispatch(w->base);
	assert_int_equal(w->last_down.retry_ms, 40);   /* the cap */
	peer_stop(w->p);
	assert_int_equal(peer_state(w->p), PEER_IDLE);

	listen_on(w);
	w->stop_on_down = false;
	w->stop_after_hellos = 1;
	assert_int_equal(peer_start(w->p), 0);
	event_base_dispatch(w->base);
	assert_int_equal(w->connected, 1);
	assert_int_equal(w->downs, 3);
	world_free(w);
}

static void test_state_names(void **state)
{
	(void)state;
	assert_string_equal(peer_state_name(PEER_IDLE), "idle");
	assert_string_equal(peer_state_name(PEER_CONNECTING), "connecting");
	assert_string_equal(peer_state_name(PEER_HELLO), "hello");
	assert_string_equal(peer_state_name(PEER_READY), "ready");
	assert_string_equal(peer_state_name(PEER_CLOSING), "closing");
	assert_string_equal(peer_state_name(PEER_BACKOFF), "backoff");
	assert_string_equal(peer_state_name((enum peer_state)99), "?");
	peer_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello_message_close_reconnect),
		cmocka_unit_test(test_error),
		cmocka_unit_test(test_not_hello),
		cmocka_unit_test(test_ping_unanswered),
		cmocka_unit_test(test_close_flush),
		cmocka_unit_test(test_unreachable_then_up),
		cmocka_unit_test(test_state_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
