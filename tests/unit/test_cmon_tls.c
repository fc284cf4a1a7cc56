/* cmon/tls.h: cmon_bev_read_more, the large reads of a log stream's read
 * callback (libevent 2.1 reads a socket 4 KiB at a time), and
 * cmon_bev_send and cmon_bev_send_frame, which copy only what the socket
 * does not take. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include "cmon/proto.h"
#include "cmon/tls.h"

struct pair {
	struct event_base *base;
	struct bufferevent *bev;  /* on fd[0] */
	int fd[2];
	short events;             /* what the event callback saw */
};

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + (i >> 9));
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct pair *p = arg;

	(void)bev;
	p->events |= what;
}

static void pair_open(struct pair *p)
{
	memset(p, 0, sizeof *p);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, p->fd), 0);
	assert_int_equal(fcntl(p->fd[0], F_SETFL, O_NONBLOCK), 0);
	assert_int_equal(fcntl(p->fd[1], F_SETFL, O_NONBLOCK), 0);
	p->base = event_base_new();
	assert_non_null(p->base);
}

static void pair_plain(struct pair *p)
{
	pair_open(p);
	p->bev = bufferevent_socket_new(p->base, p->fd[0], BEV_OPT_CLOSE_ON_FREE);
	assert_non_null(p->bev);
	bufferevent_setcb(p->bev, NULL, NULL, on_event, p);
	bufferevent_enable(p->bev, EV_READ);
}

/* A TLS client bufferevent on the pair's near end, writing. (Its
 * handshake never completes: the far end is no TLS server.) */
static void pair_tls_client(struct pair *p)
{
	SSL_CTX *ctx;
	SSL *ssl;

	pair_open(p);
	ctx = SSL_CTX_new(TLS_client_method());
	assert_non_null(ctx);
	ssl = SSL_new(ctx);
	SSL_CTX_free(ctx);                  /* ssl holds a reference of its own */
	assert_non_null(ssl);
	p->bev = bufferevent_openssl_socket_new(p->base, p->fd[0], ssl, BUFFEREVENT_SSL_OPEN,
						BEV_OPT_CLOSE_ON_FREE);
	assert_non_null(p->bev);
	bufferevent_enable(p->bev, EV_WRITE);
}

static void pair_close(struct pair *p)
{
	if (p->bev)
		bufferevent_free(p->bev);
	else
		close(p->fd[0]);
	if (p->fd[1] >= 0)
		close(p->fd[1]);
	event_base_free(p->base);
}

/* Write the pattern from byte `from` into the far end until it is full or
 * `most` bytes went; returns how many. */
static size_t feed(struct pair *p, size_t from, size_t most)
{
	uint8_t buf[4096];
	size_t done = 0;

	while (done < most) {
		size_t n = most - done < sizeof buf ? most - done : sizeof buf;
		ssize_t w;

		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(from + done + i);
		w = write(p->fd[1], buf, n);
		if (w < 0 && errno == EAGAIN)
			break;
		assert_true(w > 0);
		done += (size_t)w;
	}
	return done;
}

/* b[0..len) is the pattern from byte `from` on. */
static void is_pattern(const uint8_t *b, size_t len, size_t from)
{
	for (size_t i = 0; i < len; i++)
		if (b[i] != pattern(from + i))
			fail_msg("byte %zu differs", from + i);
}

static void input_is_pattern(struct bufferevent *bev, size_t len)
{
	struct evbuffer *in = bufferevent_get_input(bev);

	assert_int_equal(evbuffer_get_length(in), len);
	is_pattern(evbuffer_pullup(in, -1), len, 0);
}

/* One readv takes what is there, up to `most`, in order. */
static void reads_up_to_most(void **state)
{
	struct pair p;
	size_t fed;

	(void)state;
	pair_plain(&p);
	fed = feed(&p, 0, 100000);
	assert_true(fed > 70000);
	assert_int_equal(cmon_bev_read_more(p.bev, 65536), 65536);
	input_is_pattern(p.bev, 65536);
	assert_int_equal(cmon_bev_read_more(p.bev, CMON_READ_MORE), fed - 65536);
	input_is_pattern(p.bev, fed);
	/* nothing there */
	assert_int_equal(cmon_bev_read_more(p.bev, CMON_READ_MORE), 0);
	input_is_pattern(p.bev, fed);
	pair_close(&p);
}

/* The read high-watermark bounds it, as it bounds the bufferevent. */
static void honours_high_watermark(void **state)
{
	struct pair p;

	(void)state;
	pair_plain(&p);
	bufferevent_setwatermark(p.bev, EV_READ, 0, 50000);
	assert_true(feed(&p, 0, 80000) > 60000);
	assert_int_equal(cmon_bev_read_more(p.bev, 20000), 20000);
	assert_int_equal(cmon_bev_read_more(p.bev, CMON_READ_MORE), 30000);
	assert_int_equal(cmon_bev_read_more(p.bev, CMON_READ_MORE), 0);
	input_is_pattern(p.bev, 50000);
	pair_close(&p);
}

/* A bufferevent told not to read is not read for. */
static void not_while_disabled(void **state)
{
	struct pair p;

	(void)state;
	pair_plain(&p);
	feed(&p, 0, 1000);
	bufferevent_disable(p.bev, EV_READ);
	assert_int_equal(cmon_bev_read_more(p.bev, CMON_READ_MORE), 0);
	assert_int_equal(evbuffer_get_length(bufferevent_get_input(p.bev)), 0);
	bufferevent_enable(p.bev, EV_READ);
	assert_int_equal(cmon_bev_read_more(p.bev, CMON_READ_MORE), 1000);
	pair_close(&p);
}

/* The end of the stream is the bufferevent's to find: the bytes before it
 * are read, then its event callback sees EOF on its own next read. */
static void eof_left_to_the_bufferevent(void **state)
{
	struct pair p;

	(void)state;
	pair_plain(&p);
	assert_int_equal(feed(&p, 0, 5000), 5000);
	close(p.fd[1]);
	p.fd[1] = -1;
	assert_int_equal(cmon_bev_read_more(p.bev, CMON_READ_MORE), 5000);
	assert_int_equal(cmon_bev_read_more(p.bev, CMON_READ_MORE), 0);
	assert_int_equal(p.events, 0);
	event_base_loop(p.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	assert_true(p.events & BEV_EVENT_EOF);
	input_is_pattern(p.bev, 5000);
	pair_close(&p);
}

/* The bufferevent's own reads still work after: no byte lost or moved. */
static void mixes_with_the_bufferevent(void **state)
{
	struct pair p;
	size_t fed;

	(void)state;
	pair_plain(&p);
	fed = feed(&p, 0, 3000);
	event_base_loop(p.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);   /* libevent reads */
	assert_int_equal(evbuffer_get_length(bufferevent_get_input(p.bev)), fed);
	fed += feed(&p, fed, 40000);
	assert_int_equal(cmon_bev_read_more(p.bev, CMON_READ_MORE), fed - 3000);
	fed += feed(&p, fed, 2000);
	event_base_loop(p.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	input_is_pattern(p.bev, fed);
	pair_close(&p);
}

/* On TLS the socket's bytes are OpenSSL's: it must not touch them. */
static void never_on_tls(void **state)
{
	struct pair p;
	SSL_CTX *ctx;
	SSL *ssl;
	char peek[16];

	(void)state;
	pair_open(&p);
	ctx = SSL_CTX_new(TLS_server_method());
	assert_non_null(ctx);
	ssl = SSL_new(ctx);
	assert_non_null(ssl);
	p.bev = bufferevent_openssl_socket_new(p.base, p.fd[0], ssl, BUFFEREVENT_SSL_ACCEPTING,
					       BEV_OPT_CLOSE_ON_FREE);
	assert_non_null(p.bev);
	bufferevent_enable(p.bev, EV_READ);
	assert_int_equal(feed(&p, 0, 1000), 1000);
	assert_int_equal(cmon_bev_read_more(p.bev, CMON_READ_MORE), 0);
	assert_int_equal(recv(p.fd[0], peek, sizeof peek, MSG_PEEK | MSG_DONTWAIT), sizeof peek);
	pair_close(&p);
	SSL_CTX_free(ctx);
}

/* Nor on a filter, whose bytes come from another bufferevent. */
static void never_on_a_filter(void **state)
{
	struct pair p;
	struct bufferevent *f;
	char peek[16];

	(void)state;
	pair_plain(&p);
	f = bufferevent_filter_new(p.bev, NULL, NULL, 0, NULL, NULL);
	assert_non_null(f);
	bufferevent_enable(f, EV_READ);
	feed(&p, 0, 1000);
	assert_int_equal(cmon_bev_read_more(f, CMON_READ_MORE), 0);
	assert_int_equal(recv(p.fd[0], peek, sizeof peek, MSG_PEEK | MSG_DONTWAIT), sizeof peek);
	bufferevent_free(f);
	pair_close(&p);
}

/* Read from the far end, running the loop, until `want` bytes came (or
 * nothing moves for a while); returns them (malloc'd). */
static uint8_t *drain_far(struct pair *p, size_t want, size_t *got)
{
	uint8_t *buf = malloc(want + 1);
	int idle = 0;

	*got = 0;
	while (*got < want && idle < 200) {
		ssize_t r = read(p->fd[1], buf + *got, want + 1 - *got);

		if (r > 0) {
			*got += (size_t)r;
			idle = 0;
			continue;
		}
		event_base_loop(p->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		idle++;
		usleep(1000);
	}
	return buf;
}

static void fill_pattern(uint8_t *b, size_t from, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pattern(from + i);
}

/* With nothing queued, the bytes go out at once, none copied. */
static void send_goes_straight_out(void **state)
{
	struct pair p;
	uint8_t a[10], b[1000], c[3], *far;
	struct iovec iov[3] = { { a, sizeof a }, { b, sizeof b }, { c, sizeof c } };
	size_t got;

	(void)state;
	pair_plain(&p);
	bufferevent_enable(p.bev, EV_WRITE);
	fill_pattern(a, 0, sizeof a);
	fill_pattern(b, sizeof a, sizeof b);
	fill_pattern(c, sizeof a + sizeof b, sizeof c);
	assert_int_equal(cmon_bev_send(p.bev, iov, 3), 0);
	assert_int_equal(evbuffer_get_length(bufferevent_get_output(p.bev)), 0);
	far = malloc(2000);
	assert_int_equal(read(p.fd[1], far, 2000), 1013);   /* before any loop turn */
	is_pattern(far, 1013, 0);
	free(far);
	/* something queued: behind it, though the socket has room */
	fill_pattern(a, 1013, sizeof a);
	fill_pattern(b, 1013 + sizeof a, sizeof b);
	evbuffer_add(bufferevent_get_output(p.bev), a, sizeof a);
	assert_int_equal(cmon_bev_send(p.bev, &iov[1], 1), 0);
	assert_int_equal(read(p.fd[1], c, sizeof c), -1);
	far = drain_far(&p, 1010, &got);
	assert_int_equal(got, 1010);
	is_pattern(far, got, 1013);
	free(far);
	pair_close(&p);
}

/* What the socket does not take is queued, in order, and follows. */
static void send_queues_the_rest(void **state)
{
	enum { N = 4 << 20 };
	struct pair p;
	uint8_t *big = malloc(N), *far;
	struct iovec iov[2] = { { big, 5 }, { big + 5, N - 5 } };
	size_t queued, got;

	(void)state;
	pair_plain(&p);
	bufferevent_enable(p.bev, EV_WRITE);
	fill_pattern(big, 0, N);
	assert_int_equal(cmon_bev_send(p.bev, iov, 2), 0);
	queued = evbuffer_get_length(bufferevent_get_output(p.bev));
	assert_true(queued > 0 && queued < N);
	/* queued behind it: sent after it */
	fill_pattern(big, N, 1000);
	iov[0] = (struct iovec){ big, 1000 };
	assert_int_equal(cmon_bev_send(p.bev, iov, 1), 0);
	assert_int_equal(evbuffer_get_length(bufferevent_get_output(p.bev)), queued + 1000);
	far = drain_far(&p, N + 1000, &got);
	assert_int_equal(got, N + 1000);
	is_pattern(far, got, 0);
	free(far);
	free(big);
	pair_close(&p);
}

/* TLS, a filter, or writing disabled: queued, as evbuffer_add would. */
static void send_queues_when_not_plain(void **state)
{
	struct pair p;
	uint8_t b[100];
	struct iovec iov[1] = { { b, sizeof b } };
	struct bufferevent *f;

	(void)state;
	fill_pattern(b, 0, sizeof b);
	pair_plain(&p);
	bufferevent_disable(p.bev, EV_WRITE);
	assert_int_equal(cmon_bev_send(p.bev, iov, 1), 0);
	assert_int_equal(evbuffer_get_length(bufferevent_get_output(p.bev)), sizeof b);
	f = bufferevent_filter_new(p.bev, NULL, NULL, 0, NULL, NULL);
	bufferevent_enable(f, EV_WRITE);
	assert_int_equal(cmon_bev_send(f, iov, 1), 0);
	/* (the filter hands its output on to the socket's bufferevent) */
	assert_int_equal(evbuffer_get_length(bufferevent_get_output(f)) +
			 evbuffer_get_length(bufferevent_get_output(p.bev)), 2 * sizeof b);
	bufferevent_free(f);
	assert_int_equal(read(p.fd[1], b, sizeof b), -1);
	pair_close(&p);

	pair_tls_client(&p);
	assert_int_equal(cmon_bev_send(p.bev, iov, 1), 0);
	/* (OpenSSL may take them from the output at once, as records) */
	{
		uint8_t wire[4096];
		ssize_t r = read(p.fd[1], wire, sizeof wire);

		assert_null(r > 0 ? memmem(wire, (size_t)r, b, 16) : NULL);  /* nothing in plain */
	}
	pair_close(&p);
}

/* The peer gone: no SIGPIPE (this test would die of it); the bytes are
 * queued and the bufferevent reports the error on its own write. */
static void send_to_a_closed_peer(void **state)
{
	struct pair p;
	uint8_t b[100];
	struct iovec iov[1] = { { b, sizeof b } };

	(void)state;
	pair_plain(&p);
	bufferevent_enable(p.bev, EV_WRITE);
	close(p.fd[1]);
	p.fd[1] = -1;
	assert_int_equal(cmon_bev_send(p.bev, iov, 1), 0);
	assert_int_equal(evbuffer_get_length(bufferevent_get_output(p.bev)), sizeof b);
	signal(SIGPIPE, SIG_IGN);     /* libevent's own write would raise it (the daemons ignore it) */
	for (int i = 0; i < 10 && !(p.events & BEV_EVENT_ERROR); i++)
		event_base_loop(p.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	assert_true(p.events & BEV_EVENT_ERROR);
	pair_close(&p);
}

/* A gap of `count` records as a message. */
static Cmon__Msg *gap_msg(Cmon__Msg *m, Cmon__LogGap *g, uint64_t count)
{
	cmon__msg__init(m);
	cmon__log_gap__init(g);
	g->has_count = true;
	g->count = count;
	m->kind_case = CMON__MSG__KIND_GAP;
	m->gap = g;
	return m;
}

/* The gap frame of `count` at `p`; returns its length. */
static size_t is_gap_frame(const uint8_t *p, size_t len, uint64_t count)
{
	Cmon__Msg *m = NULL;
	const char *why = NULL;
	size_t used = 0;

	assert_int_equal(cmon_frame_decode(p, len, CMON_FRAME_MAX, &m, &used, &why), 1);
	assert_int_equal(m->kind_case, CMON__MSG__KIND_GAP);
	assert_int_equal(m->gap->count, count);
	cmon_msg_free(m);
	return used;
}

/* A frame with nothing queued goes out at once, and bytes sent after it
 * follow at once too (nothing was left queued in front of them). */
static void frame_goes_straight_out(void **state)
{
	struct pair p;
	Cmon__Msg m;
	Cmon__LogGap g;
	uint8_t b[100], wire[4096];
	struct iovec iov[1] = { { b, sizeof b } };
	ssize_t r;
	size_t flen;

	(void)state;
	pair_plain(&p);
	bufferevent_enable(p.bev, EV_WRITE);
	fill_pattern(b, 0, sizeof b);
	assert_int_equal(cmon_bev_send_frame(p.bev, gap_msg(&m, &g, 12345)), 0);
	assert_int_equal(evbuffer_get_length(bufferevent_get_output(p.bev)), 0);
	assert_int_equal(cmon_bev_send(p.bev, iov, 1), 0);
	assert_int_equal(evbuffer_get_length(bufferevent_get_output(p.bev)), 0);
	r = read(p.fd[1], wire, sizeof wire);                 /* before any loop turn */
	assert_true(r > (ssize_t)sizeof b);
	flen = is_gap_frame(wire, (size_t)r, 12345);
	assert_int_equal((size_t)r, flen + sizeof b);
	is_pattern(wire + flen, sizeof b, 0);
	pair_close(&p);
}

/* Something queued, writing disabled, or TLS: the frame is queued behind,
 * whole and in order. */
static void frame_queued_when_not_now(void **state)
{
	struct pair p;
	Cmon__Msg m;
	Cmon__LogGap g;
	uint8_t b[100], *far;
	size_t got, flen;

	(void)state;
	pair_plain(&p);
	bufferevent_enable(p.bev, EV_WRITE);
	fill_pattern(b, 0, sizeof b);
	evbuffer_add(bufferevent_get_output(p.bev), b, sizeof b);
	assert_int_equal(cmon_bev_send_frame(p.bev, gap_msg(&m, &g, 7)), 0);
	assert_int_equal(read(p.fd[1], b, sizeof b), -1);
	flen = evbuffer_get_length(bufferevent_get_output(p.bev)) - sizeof b;
	far = drain_far(&p, sizeof b + flen, &got);
	assert_int_equal(got, sizeof b + flen);
	is_pattern(far, sizeof b, 0);
	assert_int_equal(is_gap_frame(far + sizeof b, flen, 7), flen);
	free(far);
	bufferevent_disable(p.bev, EV_WRITE);
	assert_int_equal(cmon_bev_send_frame(p.bev, gap_msg(&m, &g, 8)), 0);
	assert_int_equal(evbuffer_get_length(bufferevent_get_output(p.bev)), flen);
	pair_close(&p);

	pair_tls_client(&p);
	assert_int_equal(cmon_bev_send_frame(p.bev, gap_msg(&m, &g, 9)), 0);
	{
		uint8_t frame[32], wire[4096];
		struct evbuffer *e = evbuffer_new();
		ssize_t r = read(p.fd[1], wire, sizeof wire);

		assert_int_equal(cmon_frame_send(e, &m), 0);
		flen = evbuffer_remove(e, frame, sizeof frame);
		evbuffer_free(e);
		/* nothing in plain: it went through OpenSSL */
		assert_null(r > 0 ? memmem(wire, (size_t)r, frame, flen) : NULL);
	}
	pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reads_up_to_most),
		cmocka_unit_test(honours_high_watermark),
		cmocka_unit_test(not_while_disabled),
		cmocka_unit_test(eof_left_to_the_bufferevent),
		cmocka_unit_test(mixes_with_the_bufferevent),
		cmocka_unit_test(never_on_tls),
		cmocka_unit_test(never_on_a_filter),
		cmocka_unit_test(send_goes_straight_out),
		cmocka_unit_test(send_queues_the_rest),
		cmocka_unit_test(send_queues_when_not_plain),
		cmocka_unit_test(send_to_a_closed_peer),
		cmocka_unit_test(frame_goes_straight_out),
		cmocka_unit_test(frame_queued_when_not_now),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
