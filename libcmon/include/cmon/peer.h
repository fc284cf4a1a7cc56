/* peer.h — one outgoing control connection that keeps itself up: connect
 * (cmon/connect.h: asynchronous resolution, each address in turn, TLS),
 * say Hello and wait for the other side's, answer its Pings (and, if
 * asked, ping it), turn an Error, a bad frame or a closed connection into
 * one "down" report, and reconnect after a capped exponential backoff
 * with jitter (cmon/backoff.h). snarflog's registry links (announce.c)
 * and the telemonitor's (reglink.c) are owners of peers.
 *
 * The machine, driven by peer.c alone:
 *
 *   IDLE --peer_start--> CONNECTING --connected, our Hello sent--> HELLO
 *   HELLO --its Hello--> READY (on_ready; then on_message for each message)
 *   CONNECTING/HELLO/READY --failure--> BACKOFF (on_down) --delay--> CONNECTING
 *   READY --peer_close_flush--> CLOSING --written/deadline/failure--> IDLE (on_down)
 *   any --peer_stop--> IDLE (no callback)
 *
 * The library never logs: every failure reaches the owner as a struct
 * peer_down, and the owner says what it means. Callbacks may call any
 * peer_* function on their own peer, except peer_free. */
#ifndef CMON_PEER_H
#define CMON_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include "cmon/backoff.h"
#include "cmon/net.h"
#include "cmon/proto.h"

/* The states of a peer (X-macro: name, text of peer_state_name). */
#define PEER_STATES(X)                                                                         \
	X(PEER_IDLE, "idle")             /* not started, stopped, or closed after CLOSING */  \
	X(PEER_CONNECTING, "connecting") /* resolving, connecting, TLS handshake */           \
	X(PEER_HELLO, "hello")           /* our Hello sent; waiting for the other side's */   \
	X(PEER_READY, "ready")           /* Hellos exchanged; messages go to on_message */    \
	X(PEER_CLOSING, "closing")       /* writing what is queued, then closing for good */  \
	X(PEER_BACKOFF, "backoff")       /* waiting before the next attempt */

/* Where a peer is. */
enum peer_state {
#define PEER_STATE_ENUM(name, text) name,
	PEER_STATES(PEER_STATE_ENUM)
#undef PEER_STATE_ENUM
};

/* Why a connection went down (or never came up). */
enum peer_down_kind {
	PEER_DOWN_CONNECT,  /* no address could be reached, or out of memory (why) */
	PEER_DOWN_CLOSED,   /* the other side closed the connection */
	PEER_DOWN_IO,       /* a socket or TLS error (why) */
	PEER_DOWN_FRAME,    /* a frame that could not be read (why) */
	PEER_DOWN_HELLO,    /* its first message was not an acceptable Hello (why) */
	PEER_DOWN_ERROR,    /* it sent an Error message (error) */
	PEER_DOWN_PING,     /* a Ping of ours went unanswered for ping_ms */
	PEER_DOWN_OWNER,    /* the owner called peer_fail() (why) */
	PEER_DOWN_FLUSHED,  /* CLOSING: everything queued was written; closed */
	PEER_DOWN_DEADLINE, /* CLOSING: not written within the deadline; closed */
};

/* What on_down is told. Valid only during the callback. */
struct peer_down {
	enum peer_down_kind kind;    /* what happened */
	enum peer_state was;         /* the state the peer was in */
	const char *why;             /* a short text: the error, or the kind in words */
	const Cmon__Error *error;    /* PEER_DOWN_ERROR: the message; else NULL */
	unsigned retry_ms;           /* the next attempt is in this many ms; 0: none (IDLE) */
};

struct peer;

/* What a peer tells its owner; `arg` is the one given to peer_new(). */
struct peer_events {
	/* Optional: connected and our Hello queued; the owner may peer_send()
	 * what it wants to follow the Hello at once. */
	void (*on_connected)(struct peer *p, void *arg);
	/* The other side's Hello arrived (version checked): READY. */
	void (*on_ready)(struct peer *p, const Cmon__Hello *hello, void *arg);
	/* One decoded message after the Hello (READY or CLOSING), other than
	 * Ping and Pong, which the peer answers and takes itself. */
	void (*on_message)(struct peer *p, const Cmon__Msg *m, void *arg);
	/* The connection is gone, or an attempt failed; see struct peer_down.
	 * The peer is already in BACKOFF (or IDLE after CLOSING). */
	void (*on_down)(struct peer *p, const struct peer_down *d, void *arg);
};

/* How a peer connects and greets. Copied by peer_new(); the pointers in
 * it are borrowed and must outlive the peer. */
struct peer_options {
	Cmon__Role role;                 /* our role in Hello */
	const char *software;            /* our software in Hello ("snarflog 1.4") */
	const uint8_t *secret;           /* Hello's secret (NULL: none) */
	size_t secret_len;               /* its length */
	const uint8_t *challenge;        /* Hello's challenge (NULL: none) */
	size_t challenge_len;            /* its length */
	SSL_CTX *tls;                    /* TLS for TCP addresses (NULL: plain); Unix: plain */
	struct evdns_base *dns;          /* asynchronous resolver (NULL: blocking getaddrinfo) */
	unsigned connect_ms;             /* bound on each address's connect + TLS handshake */
	size_t frame_max;                /* longest frame taken (0: CMON_CONTROL_FRAME_MAX) */
	unsigned ping_ms;                /* once connected, Ping this often; a Ping unanswered
	                                    by the next one brings it down (0: never ping) */
	struct cmon_backoff backoff;     /* delays between attempts: min_ms, max_ms, jitter_pct */
};

/* A peer for `addr` (copied), IDLE. NULL on allocation failure. */
struct peer *peer_new(struct event_base *base, const struct cmon_addr *addr,
		      const struct peer_options *opt, const struct peer_events *ev, void *arg);

/* Start connecting (from IDLE; from BACKOFF: at once). Returns 0, or
 * -EALREADY when a connection is under way or up. A failure to start
 * comes as on_down (PEER_DOWN_CONNECT) before this returns. */
int peer_start(struct peer *p);

/* Queue `m` on the connection (HELLO, READY). 0, -ENOTCONN when there is
 * no connection, or cmon_frame_send()'s error. */
int peer_send(struct peer *p, const Cmon__Msg *m);

/* The connection's output buffer for the cmon_send_* helpers (HELLO,
 * READY), or NULL when there is no connection. */
struct evbuffer *peer_output(struct peer *p);

/* Bring the connection down as PEER_DOWN_OWNER with `why` (the owner did
 * not like what it heard): on_down, then the usual backoff. Nothing
 * happens when there is no connection or attempt. */
void peer_fail(struct peer *p, const char *why);

/* Close for good once what is queued is written (READY: e.g. after a
 * goodbye), at the latest after `deadline_ms`: CLOSING, then on_down
 * (FLUSHED, DEADLINE, or whatever broke it meanwhile) with retry_ms 0.
 * Returns 0, or -ENOTCONN when not READY (nothing happens). */
int peer_close_flush(struct peer *p, unsigned deadline_ms);

/* Forget the failures: the next failure waits backoff.min_ms again. */
void peer_backoff_reset(struct peer *p);

/* Close the connection or abandon the attempt, and stay IDLE; no callback. */
void peer_stop(struct peer *p);

/* Stop and free. Accepts NULL. Not from the peer's own callbacks. */
void peer_free(struct peer *p);

/* Where the peer is. */
enum peer_state peer_state(const struct peer *p);

/* "idle", "connecting", ... */
const char *peer_state_name(enum peer_state s);

#endif
