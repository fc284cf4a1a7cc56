/* The data endpoint: telemonitors connect here and, one at a time, receive
 * the log: Accepted, the saved header, then whole records with LogGap
 * wherever records were dropped, and LogEnd. Only a consumer the registry
 * sent (it shows the instance's token in Start) or one whose certificate
 * our CA vouches for may start; anyone else gets an Error and is closed
 * before anything about the stream changes. Each connection is an
 * explicit state machine (enum stream_state) driven by stream_drive().
 * Records move from the buffer to a TLS stream only while it has less
 * than SNARF_OUT_HIGH bytes queued, and to a plain socket only while
 * nothing is queued (what it does not take of a chunk is, and the next
 * chunk waits until that is written: the records stay in the buffer, not
 * copied), so a stalled consumer makes the buffer drop old records
 * instead of growing memory. Accepted, the header and LogGap go the way
 * the records do (cmon_bev_send_frame: at once, so the records behind
 * them need not wait a loop turn); LogEnd, Busy and Error are queued, as
 * a stream is freed once its output buffer has drained (write_cb). */
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmon/log.h"
#include "cmon/logfmt.h"
#include "snarflog.h"

/* Where a data connection is. */
enum stream_state {
	ST_HELLO,         /* accepted, our Hello sent; waiting for the peer's Hello */
	ST_WAIT_START,    /* it said Hello (and got its Proof); waiting for Start */
	ST_WAIT_FORMAT,   /* the consumer; Accepted waits until the log format is known */
	ST_STREAMING,     /* the consumer; records flow */
	ST_ENDING,        /* LogEnd, Busy or Error queued; close once flushed */
};

/* One data connection. */
struct stream {
	TAILQ_ENTRY(stream) link;     /* in snarf.streams */
	struct snarf *s;              /* back pointer */
	enum stream_state state;      /* see enum stream_state */
	struct bufferevent *bev;      /* socket or TLS stream */
	char peer[CMON_ADDRSTR_MAX];  /* for log lines and Busy */
	struct event *timer;          /* handshake deadline, then flush deadline */
	bool block;                   /* Start.block: back-pressure instead of dropping */
	bool from_start;              /* Start.from_start: report earlier loss as a gap */
	size_t hdr_sent;              /* bytes of the saved header already sent */
	uint64_t pending_gap;         /* records dropped since the last thing sent */
	uint64_t sent_records;        /* records sent (for LogEnd) */
	uint64_t sent_gap;            /* records reported as dropped (for LogEnd) */
	uint64_t epoch;               /* Start.epoch: its claim (0: none) */
	double batch_s;               /* Start.batch_ms, in seconds (0: send as they come) */
	double last_data;             /* when the last LogData went (monotonic) */
	bool batch_going;             /* a batch is being sent: it goes until the buffer is
	                                 empty (what the socket did not take of it included) */
};

#define FLUSH_S 5                 /* a closing connection gets this long */
#define BATCH_MAX_MS 1000         /* longest Start.batch_ms honoured */

static void stream_free(struct stream *st);

static double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A plain socket (no TLS): records go to it straight from the buffer, and
 * the next chunk waits until what it did not take of the last is written. */
static bool direct(const struct stream *st)
{
	return st->s->tls_server == NULL;
}

static void timer_set(struct stream *st, event_callback_fn fn, int seconds)
{
	struct timeval tv = { seconds, 0 };

	evtimer_del(st->timer);
	evtimer_assign(st->timer, st->s->base, fn, st);
	evtimer_add(st->timer, &tv);
}

static void timer_close(evutil_socket_t fd, short what, void *arg)
{
	struct stream *st = arg;

	if (st->state == ST_ENDING) {
		cmon_warn("%s: did not take the end of the stream; disconnecting", st->peer);
	} else {
		/* (said at most every 10 s: a flood of silent peers is one line) */
		double now = mono_now();
		st->s->silent++;
		if (now - st->s->silent_said >= 10.0) {
			cmon_warn("%s: no hello and start within %d s; disconnecting (%llu such so "
				  "far)", st->peer, st->s->opt.hello_s,
				  (unsigned long long)st->s->silent);
			st->s->silent_said = now;
		}
	}
	stream_free(st);
}

/* Stop being the consumer: undelivered loss goes to the next one. */
static void release_active(struct stream *st)
{
	struct snarf *s = st->s;

	if (s->active != st)
		return;
	s->active = NULL;
	s->active_blocks = false;
	/* a consumer that vanished (not one that was done) may come back */
	s->consumer_lost = st->state != ST_ENDING;
	s->dropped_unseen += st->pending_gap;
	st->pending_gap = 0;
	core_space_freed(s);          /* a blocking consumer no longer holds us */
}

/* Queue a final message and close once it is out (bounded). */
static void stream_finish(struct stream *st)
{
	st->state = ST_ENDING;
	release_active(st);
	bufferevent_disable(st->bev, EV_READ);
	bufferevent_setwatermark(st->bev, EV_WRITE, 0, 0);
	timer_set(st, timer_close, FLUSH_S);
	if (evbuffer_get_length(bufferevent_get_output(st->bev)) == 0)
		bufferevent_trigger(st->bev, EV_WRITE, BEV_OPT_DEFER_CALLBACKS);
}

static void stream_fail(struct stream *st, Cmon__ErrorCode code, const char *why)
{
	cmon_warn("%s: %s; disconnecting", st->peer, why);
	cmon_send_error(bufferevent_get_output(st->bev), code, "%s", why);
	stream_finish(st);
}

static int send_data(struct stream *st, Cmon__Msg__KindCase kind, const uint8_t *p, size_t n)
{
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__LogHeader h = CMON__LOG_HEADER__INIT;

	if (kind == CMON__MSG__KIND_DATA) {
		/* the records go from the buffer to the socket (copied only if
		 * the socket does not take them at once) */
		uint8_t pfx[CMON_DATA_PREFIX_MAX];
		struct iovec iov[2] = { { pfx, cmon_data_prefix(pfx, n) }, { (void *)p, n } };

		if (iov[0].iov_len == 0)
			return -EMSGSIZE;
		return cmon_bev_send(st->bev, iov, 2);
	}
	m.kind_case = kind;
	h.has_data = true;
	h.data.data = (uint8_t *)p;
	h.data.len = n;
	m.header = &h;
	return cmon_bev_send_frame(st->bev, &m);
}

/* Tell the consumer, here in the stream, of the records dropped since
 * the last piece it was sent. */
static void send_pending_gap(struct stream *st)
{
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__LogGap g = CMON__LOG_GAP__INIT;

	g.has_count = true;
	g.count = st->pending_gap;
	m.kind_case = CMON__MSG__KIND_GAP;
	m.gap = &g;
	cmon_bev_send_frame(st->bev, &m);
	st->sent_gap += st->pending_gap;
	st->pending_gap = 0;
}

static void send_accepted(struct stream *st, uint64_t skipped)
{
	struct snarf *s = st->s;
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__Accepted a = CMON__ACCEPTED__INIT;
	Cmon__Instance in = CMON__INSTANCE__INIT;

	in.program = (char *)s->opt.program;
	in.machine = s->machine;
	in.has_pid = true;
	in.pid = s->pid;
	in.has_start_unix_ns = true;
	in.start_unix_ns = s->start_unix_ns;
	in.data_endpoint = s->endpoint;
	in.has_format = true;
	in.format = s->format;
	in.has_tls = true;
	in.tls = s->tls_server != NULL && s->endpoint[0] != 'u';   /* (unix:PATH stays plain) */
	a.instance = &in;
	a.has_skipped = true;
	a.skipped = skipped;
	/* Loss still to be reported to this consumer (from_start) is its own. */
	a.has_records_before = true;
	a.records_before = s->passed - st->pending_gap;
	m.kind_case = CMON__MSG__KIND_ACCEPTED;
	m.accepted = &a;
	cmon_bev_send_frame(st->bev, &m);
	send_data(st, CMON__MSG__KIND_HEADER, s->hdr.data, s->hdr.len);
	st->hdr_sent = s->hdr.len;
	st->state = ST_STREAMING;
}

/* May this peer become the consumer? It must show the instance's token,
 * or, without one, have a certificate our CA verified (mutual TLS). A
 * wrong token is refused even then: it was meant for another instance. */
static bool start_allowed(const struct stream *st, const Cmon__Start *m, char *why, size_t size)
{
	const struct snarf *s = st->s;

	if (m->has_token) {
		if (cmon_token_equal(s->token, m->token.data, m->token.len))
			return true;
		snprintf(why, size, "not authorized: wrong token");
		return false;
	}
	if (s->opt.tls.ca && cmon_tls_peer_verified(st->bev))
		return true;
	snprintf(why, size, "not authorized: no token%s",
		 s->opt.tls.ca ? "" : " (ask the registry, or read snarflog's -token-file)");
	return false;
}

/* The consumer's Start: become the consumer, or be told who is. */
static void on_start(struct stream *st, const Cmon__Start *m)
{
	struct snarf *s = st->s;
	Cmon__Msg bm = CMON__MSG__INIT;
	Cmon__Busy busy = CMON__BUSY__INIT;
	uint64_t skipped = 0;
	char why[120];

	/* First, so a stranger learns nothing (not even who holds the stream)
	 * and changes nothing: no block, no consumer, no hold released. */
	if (!start_allowed(st, m, why, sizeof why)) {
		stream_fail(st, CMON__ERROR_CODE__ERROR_DENIED, why);
		return;
	}
	if (s->active && s->active->epoch && m->has_epoch && m->epoch > s->active->epoch &&
	    s->phase < PH_LEAVING) {
		/* a newer claim on the instance (a telemonitor that took it over
		 * from one that hangs): the older consumer is cut off here, so
		 * that it cannot go on taking the stream */
		struct stream *old = s->active;
		char msg[160];
		snprintf(msg, sizeof msg, "replaced by %.80s (epoch %llu > %llu)", st->peer,
			 (unsigned long long)m->epoch, (unsigned long long)old->epoch);
		cmon_notice("%s: %s", old->peer, msg);
		cmon_send_error(bufferevent_get_output(old->bev), CMON__ERROR_CODE__ERROR_REPLACED,
				"%s", msg);
		stream_finish(old);
	}
	if (s->active || s->phase >= PH_LEAVING) {
		busy.holder = s->active ? s->active->peer : "nobody (snarflog is exiting)";
		bm.kind_case = CMON__MSG__KIND_BUSY;
		bm.busy = &busy;
		cmon_frame_send(bufferevent_get_output(st->bev), &bm);
		cmon_debug("%s: busy, already streaming to %s", st->peer, busy.holder);
		stream_finish(st);
		return;
	}
	s->active = st;
	s->consumer_lost = false;
	evtimer_del(st->timer);
	st->epoch = m->has_epoch ? m->epoch : 0;
	st->batch_s = m->has_batch_ms ? (m->batch_ms < BATCH_MAX_MS ? m->batch_ms : BATCH_MAX_MS) / 1e3
				      : 0;
	st->block = m->has_block && m->block;
	s->active_blocks = st->block;
	st->from_start = m->has_from_start && m->from_start;
	if (st->from_start)
		st->pending_gap = s->dropped_unseen;
	else
		skipped = s->dropped_unseen;
	s->dropped_unseen = 0;
	cmon_debug("%s: streaming to it%s%s (batch %.0f ms)", st->peer, st->block ? " (block)" : "",
		   st->from_start ? " (from the start)" : "", st->batch_s * 1e3);
	core_hold_release(s, "consumer connected");
	if (s->active != st)
		return;
	if (s->format == CMON__FORMAT__FORMAT_UNSPECIFIED) {
		st->state = ST_WAIT_FORMAT;
		st->sent_gap = skipped;        /* remembered for Accepted */
		return;
	}
	send_accepted(st, skipped);
	stream_pump(s);
	core_check_done(s);
}

/* Advance `st` by one message from its peer. */
static void stream_drive(struct stream *st, const Cmon__Msg *m)
{
	char why[200];
	Cmon__Role role;

	if (m->kind_case == CMON__MSG__KIND_PING && st->state != ST_HELLO) {
		cmon_send_ping(bufferevent_get_output(st->bev), true,
			       m->ping->has_nonce ? m->ping->nonce : 0);
		return;
	}
	switch (st->state) {
	case ST_HELLO:
		if (!cmon_hello_ok(m, &role, why, sizeof why)) {
			stream_fail(st, m->kind_case == CMON__MSG__KIND_HELLO
					? CMON__ERROR_CODE__ERROR_VERSION : CMON__ERROR_CODE__ERROR_PROTOCOL,
				    why);
			return;
		}
		if (m->hello->has_challenge) {
			/* the consumer wants proof that we are the snarflog that
			 * announced the token it was given, before it sends it */
			size_t n = m->hello->challenge.len;
			if (n < CMON_CHALLENGE_MIN || n > CMON_CHALLENGE_MAX) {
				snprintf(why, sizeof why, "a challenge of %zu bytes (want %d to %d)",
					 n, CMON_CHALLENGE_MIN, CMON_CHALLENGE_MAX);
				stream_fail(st, CMON__ERROR_CODE__ERROR_PROTOCOL, why);
				return;
			}
			cmon_send_proof(bufferevent_get_output(st->bev), st->s->token, CMON_TOKEN_LEN,
					m->hello->challenge.data, n);
		}
		st->state = ST_WAIT_START;
		return;
	case ST_WAIT_START:
		if (m->kind_case == CMON__MSG__KIND_START) {
			on_start(st, m->start);
			return;
		}
		break;
	case ST_WAIT_FORMAT:
	case ST_STREAMING:
		if (m->kind_case == CMON__MSG__KIND_STOP) {
			cmon_debug("%s: asked to stop", st->peer);
			stream_end(st->s, CMON__END_REASON__END_STOPPED);
			return;
		}
		break;
	case ST_ENDING:
		return;
	}
	snprintf(why, sizeof why, "unexpected %s message", cmon_msg_kind_name(m));
	stream_fail(st, CMON__ERROR_CODE__ERROR_PROTOCOL, why);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct stream *st = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	const char *why = NULL;
	Cmon__Msg *m;
	int r;

	while (st->state != ST_ENDING) {
		r = cmon_frame_next(in, CMON_CONTROL_FRAME_MAX, &m, &why);
		if (r == 0)
			return;
		if (r < 0) {
			stream_fail(st, r == -EMSGSIZE ? CMON__ERROR_CODE__ERROR_TOO_BIG
						       : CMON__ERROR_CODE__ERROR_PROTOCOL, why);
			return;
		}
		stream_drive(st, m);
		cmon_msg_free(m);
	}
}

static void write_cb(struct bufferevent *bev, void *arg)
{
	struct stream *st = arg;

	if (st->state == ST_ENDING) {
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
			stream_free(st);
		return;
	}
	if (st->state == ST_STREAMING)
		stream_pump(st->s);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct stream *st = arg;
	char tlserr[200];
	int e = EVUTIL_SOCKET_ERROR();

	if (what & BEV_EVENT_CONNECTED)
		return;                        /* TLS handshake done */
	if (st->state == ST_ENDING) {
		stream_free(st);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		if (st->s->active == st)
			cmon_info("%s: consumer disconnected", st->peer);
		else
			cmon_debug("%s: closed", st->peer);
	} else if (st->s->tls_server && st->state == ST_HELLO && !e) {
		cmon_warn("%s: TLS handshake failed: %s", st->peer,
			  cmon_tls_error(bev, tlserr, sizeof tlserr));
	} else {
		cmon_warn("%s: connection error: %s", st->peer,
			  e ? evutil_socket_error_to_string(e) : cmon_tls_error(bev, tlserr, sizeof tlserr));
	}
	stream_free(st);
}

static void stream_free(struct stream *st)
{
	struct snarf *s = st->s;

	release_active(st);
	TAILQ_REMOVE(&s->streams, st, link);
	s->nstreams--;
	bufferevent_free(st->bev);
	event_free(st->timer);
	free(st);
	core_check_done(s);
}

/* Writable only while the kernel holds under SNARF_OUT_UNSENT bytes not
 * yet sent: TCP send buffers grow to megabytes, so without this a stalled
 * consumer's socket keeps taking records (and waking us to copy them)
 * long after its window closed. In-flight data is not limited. (TCP only;
 * Unix sockets have a fixed buffer.) */
static void unsent_limit(int fd)
{
	int v = SNARF_OUT_UNSENT;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof v);
}

/* The slots are full: close the oldest connection that has not yet shown
 * a right to the stream (no Start with the token or a verified
 * certificate), first among those that have said nothing at all (still in
 * their TLS handshake, or silent after our Hello), then among those that
 * said Hello but sent no Start. A consumer the registry sent out says
 * Hello as soon as it hears ours, so connections that say nothing, however
 * many and however often they come back, never close it. False if every
 * slot is a consumer's or closing. */
static bool evict_unproven(struct snarf *s)
{
	struct stream *st, *victim = NULL;

	TAILQ_FOREACH(st, &s->streams, link) {
		if (st->state == ST_HELLO) {
			victim = st;
			break;
		}
		if (st->state == ST_WAIT_START && !victim)
			victim = st;
	}
	if (!victim)
		return false;
	s->evicted++;
	cmon_debug("%s: closed to make room (it had not %s)", victim->peer,
		   victim->state == ST_HELLO ? "said Hello" : "started");
	stream_free(victim);
	return true;
}

/* A refused connection: counted, and said at most every 10 s. */
static void refused(struct snarf *s, const char *peer)
{
	double now = mono_now();

	s->refused++;
	if (now - s->refused_said < 10.0)
		return;
	cmon_warn("%s: refused: %zu data connections already open (%llu refused, %llu closed to make "
		  "room so far)", peer, s->nstreams, (unsigned long long)s->refused,
		  (unsigned long long)s->evicted);
	s->refused_said = now;
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
		      int len, void *arg)
{
	struct snarf *s = arg;
	struct stream *st;
	char peer[CMON_ADDRSTR_MAX];

	cmon_sockaddr_format(sa, (socklen_t)len, peer, sizeof peer);
	if (s->nstreams >= SNARF_MAX_PENDING + 1 && !evict_unproven(s)) {
		refused(s, peer);
		close(fd);
		return;
	}
	st = calloc(1, sizeof *st);
	if (!st) {
		close(fd);
		return;
	}
	st->s = s;
	st->state = ST_HELLO;
	snprintf(st->peer, sizeof st->peer, "%s", peer);
	cmon_socket_tune(fd);
	unsent_limit(fd);
	st->bev = cmon_tls_accept_bev(s->base, s->tls_server, fd);
	st->timer = evtimer_new(s->base, timer_close, st);
	if (!st->bev || !st->timer) {
		if (st->bev)
			bufferevent_free(st->bev);
		if (st->timer)
			event_free(st->timer);
		free(st);
		return;
	}
	TAILQ_INSERT_TAIL(&s->streams, st, link);
	s->nstreams++;
	bufferevent_setcb(st->bev, read_cb, write_cb, event_cb, st);
	bufferevent_setwatermark(st->bev, EV_READ, 0, CMON_CONTROL_FRAME_MAX + 16);
	/* (a plain socket is given more when what it did not take is written) */
	bufferevent_setwatermark(st->bev, EV_WRITE, direct(st) ? 0 : SNARF_OUT_LOW, 0);
	/* (libevent writes 16 KiB a loop turn unless told: a system call and
	 * a wake-up of the reader per 16 KiB) */
	bufferevent_set_max_single_write(st->bev, SNARF_CHUNK);
	bufferevent_enable(st->bev, EV_READ | EV_WRITE);
	/* we speak first: a consumer sends nothing to an endpoint until it
	 * has said Hello as a snarflog (and proved it holds the token) */
	cmon_send_hello(bufferevent_get_output(st->bev), CMON__ROLE__ROLE_SNARFLOG,
			"snarflog " CMON_VERSION);
	timer_set(st, timer_close, s->opt.hello_s);
	cmon_debug("%s: data connection", st->peer);
}

static void accept_error_cb(struct evconnlistener *l, void *arg)
{
	cmon_warn("data endpoint: accept failed: %s",
		  evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
}

/* What to announce for the TCP socket `fd`: ":PORT" when it listens on
 * every interface (the registry fills in the address it sees us at),
 * else its numeric address (never a name: the registry passes on only
 * our own address). */
static void endpoint_of(int fd, char *buf, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		snprintf(buf, size, ":%u", cmon_socket_port(fd));
		return;
	}
	if ((ss.ss_family == AF_INET &&
	     ((struct sockaddr_in *)&ss)->sin_addr.s_addr == htonl(INADDR_ANY)) ||
	    (ss.ss_family == AF_INET6 &&
	     IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&ss)->sin6_addr)))
		snprintf(buf, size, ":%u", cmon_socket_port(fd));
	else
		cmon_sockaddr_format((struct sockaddr *)&ss, len, buf, size);
}

/* This run's token, and the file a consumer without a registry reads it
 * from. Without randomness there is no token: nobody could be told apart
 * from a stranger, so the endpoint stays shut. */
static int token_make(struct snarf *s)
{
	int r = cmon_token_generate(s->token);

	if (r < 0) {
		cmon_err("no randomness for the consumer token");
		return r;
	}
	if (s->opt.token_file) {
		r = cmon_token_write_file(s->opt.token_file, s->token);
		if (r < 0)
			cmon_warn("cannot write the token to %s: %s", s->opt.token_file,
				  strerror(-r));
	} else if (s->opt.standalone && !s->opt.tls.ca) {
		cmon_warn("standalone without -token-file or -tls-ca: no consumer can show "
			  "that it may connect");
	}
	return 0;
}

int stream_listen(struct snarf *s)
{
	struct cmon_addr a;
	char err[400], abuf[CMON_ADDRSTR_MAX];
	int fds[4];
	size_t n = 0;
	int r;

	r = token_make(s);
	if (r < 0)
		return r;
	if (cmon_addr_parse(s->opt.data_listen, 0, &a) < 0) {
		cmon_err("bad data endpoint address '%s'", s->opt.data_listen);
		return -EINVAL;
	}
	r = cmon_listen(&a, 64, fds, 1, &n, err, sizeof err);
	if (r < 0) {
		cmon_err("%s", err);
		return r;
	}
	s->data_listener = evconnlistener_new(s->base, accept_cb, s,
					      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1,
					      fds[0]);
	if (!s->data_listener) {
		close(fds[0]);
		return -ENOMEM;
	}
	evconnlistener_set_error_cb(s->data_listener, accept_error_cb);
	if (a.kind == CMON_ADDR_TCP) {
		a.port = cmon_socket_port(fds[0]);
		endpoint_of(fds[0], s->endpoint, sizeof s->endpoint);
	} else {
		cmon_addr_format(&a, s->endpoint, sizeof s->endpoint);
	}
	cmon_debug("data endpoint %s%s", cmon_addr_format(&a, abuf, sizeof abuf),
		   s->tls_server && a.kind == CMON_ADDR_TCP ? " (TLS)" : "");
	if (s->opt.portfile) {
		char text[16];
		snprintf(text, sizeof text, "%u\n", a.port);
		r = cmon_write_file_atomic(s->opt.portfile, text);
		if (r < 0)
			cmon_warn("cannot write %s: %s", s->opt.portfile, strerror(-r));
	}
	return 0;
}

void stream_format_known(struct snarf *s)
{
	struct stream *st = s->active;

	if (st && st->state == ST_WAIT_FORMAT) {
		uint64_t skipped = st->sent_gap;
		st->sent_gap = 0;
		send_accepted(st, skipped);
	}
}

void stream_dropped(struct snarf *s, uint64_t n)
{
	if (s->active)
		s->active->pending_gap += n;
	else
		s->dropped_unseen += n;
}

bool stream_drained(struct snarf *s)
{
	struct stream *st = s->active;

	if (!st)
		return true;
	if (st->state == ST_WAIT_FORMAT)
		return s->ring.nrec == 0 && s->hdr.len == 0;
	return s->ring.nrec == 0 && st->pending_gap == 0 && st->hdr_sent == s->hdr.len;
}

bool stream_ending(struct snarf *s)
{
	struct stream *st;

	TAILQ_FOREACH(st, &s->streams, link)
		if (st->state == ST_ENDING)
			return true;
	return false;
}

static void batch_due(evutil_socket_t fd, short what, void *arg)
{
	struct stream *st = arg;

	(void)fd;
	(void)what;
	if (st->state == ST_STREAMING)
		stream_pump(st->s);
}

/* Start.batch_ms, at `now`: keep the records for now, st->timer (free
 * while streaming) sending them batch_s after the last LogData? Not while
 * a batch is going, nor once the log has ended, nor when a quarter of the
 * buffer (or a chunk) waits: a batch never makes the buffer drop or
 * block. */
static bool batch_holds(struct stream *st, double now)
{
	const struct ring *r = &st->s->ring;
	size_t most = r->cap / 4 < SNARF_CHUNK ? r->cap / 4 : SNARF_CHUNK;
	double wait = st->last_data + st->batch_s - now;

	if (st->batch_going || st->s->phase != PH_RUNNING || r->used >= most ||
	    r->nrec >= r->icap / 4 || wait <= 0)
		return false;
	if (!evtimer_pending(st->timer, NULL)) {
		long us = (long)(wait * 1e6) + 1;
		struct timeval tv = { (time_t)(us / 1000000), (suseconds_t)(us % 1000000) };

		evtimer_assign(st->timer, st->s->base, batch_due, st);
		evtimer_add(st->timer, &tv);
	}
	return true;
}

void stream_pump(struct snarf *s)
{
	struct stream *st = s->active;
	struct evbuffer *out;
	bool freed = false;
	double now = 0;

	if (!st || st->state != ST_STREAMING)
		return;
	out = bufferevent_get_output(st->bev);
	while (evbuffer_get_length(out) < (direct(st) ? 1 : SNARF_OUT_HIGH)) {
		const uint8_t *p;
		uint64_t nrec;
		size_t n;

		if (st->hdr_sent < s->hdr.len) {
			/* TypeDefs (or header lines) that arrived since Accepted. */
			send_data(st, CMON__MSG__KIND_DATA, s->hdr.data + st->hdr_sent,
				  s->hdr.len - st->hdr_sent);
			st->hdr_sent = s->hdr.len;
			continue;
		}
		if (st->pending_gap) {
			send_pending_gap(st);
			continue;
		}
		if (s->ring.nrec == 0) {
			st->batch_going = false;
			break;
		}
		if (st->batch_s > 0 && batch_holds(st, now = mono_now()))
			break;
		n = ring_peek(&s->ring, SNARF_CHUNK, &p, &nrec);
		if (n == 0)
			break;
		if (st->batch_s > 0) {
			st->last_data = now;
			st->batch_going = true;
		}
		if (send_data(st, CMON__MSG__KIND_DATA, p, n) < 0) {
			cmon_warn("%s: cannot queue data", st->peer);
			break;
		}
		s->passed += ring_front_weight(&s->ring, nrec);
		ring_consume(&s->ring, n, nrec);
		st->sent_records += nrec;
		freed = true;
	}
	if (freed)
		core_space_freed(s);
	if (s->phase == PH_DRAINING && stream_drained(s))
		core_check_done(s);
}

void stream_end(struct snarf *s, Cmon__EndReason reason)
{
	struct stream *st = s->active;
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__LogEnd e = CMON__LOG_END__INIT;

	if (!st)
		return;
	if (st->state == ST_WAIT_FORMAT)
		send_accepted(st, st->sent_gap);
	if (st->state == ST_STREAMING && st->pending_gap)
		send_pending_gap(st);       /* dropped after the last piece sent */
	e.has_reason = true;
	e.reason = reason;
	e.has_records = true;
	e.records = st->sent_records;
	e.has_dropped = true;
	e.dropped = st->sent_gap;
	m.kind_case = CMON__MSG__KIND_END;
	m.end = &e;
	cmon_frame_send(bufferevent_get_output(st->bev), &m);
	cmon_debug("%s: end of stream (%llu records, %llu reported dropped)", st->peer,
		   (unsigned long long)st->sent_records, (unsigned long long)st->sent_gap);
	stream_finish(st);
}

void stream_close_all(struct snarf *s)
{
	struct stream *st;

	while ((st = TAILQ_FIRST(&s->streams))) {
		if (s->active == st) {
			s->active = NULL;
			s->active_blocks = false;
		}
		TAILQ_REMOVE(&s->streams, st, link);
		s->nstreams--;
		bufferevent_free(st->bev);
		event_free(st->timer);
		free(st);
	}
	if (s->data_listener) {
		evconnlistener_free(s->data_listener);
		s->data_listener = NULL;
	}
}
