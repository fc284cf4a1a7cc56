/* telemonreg internals: the registry state, its connections, and the
 * instance/class store. One event loop, no threads. */
#ifndef REGISTRY_H
#define REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <openssl/ssl.h>

#include "cmon/names.h"
#include "cmon/net.h"
#include "cmon/proto.h"
#include "cmon/token.h"

/* Limits on what one peer can make the registry hold or do. */
#define REG_MAX_SUBS_PER_CONN 10000      /* classes one telemonitor may add */
#define REG_OUTPUT_MAX (16u << 20)       /* unread notifications before we give up */
#define REG_MSG_BURST 20000.0            /* messages a peer may send at once... */
#define REG_MSG_RATE 5000.0              /* ...and per second after that */
#define REG_MAX_LISTENERS 16             /* listening sockets */
#define REG_GONE_KEEP_S 300.0           /* a gone instance is told to new subscribers this long */
#define REG_GONE_MAX 4096               /* ...and at most this many of them are kept */
#define REG_MAX_ALLOW_USERS 64           /* -allow-user options */
#define REG_DENIED_LOG_S 1.0             /* at most one "not authorized" line this often */

/* Where a connection is in its life; driven by conn_drive(). */
enum conn_state {
	CONN_HELLO,          /* accepted (TLS done); waiting for the peer's Hello */
	CONN_SNARFLOG,       /* a snarflog said Hello; waiting for its Announce */
	CONN_ANNOUNCED,      /* a snarflog whose instance is registered */
	CONN_LEFT,           /* a snarflog that said Leave; waiting for it to close */
	CONN_TELEMONITOR,    /* a subscriber; may add and drop classes */
	CONN_CLOSING,        /* sending a final Error, then close */
	CONN_DEAD,           /* closed; waiting to be freed outside any iteration */
};

struct conn;

/* A running monitored program, announced by one snarflog connection. */
struct instance {
	TAILQ_ENTRY(instance) link;   /* in reg.instances */
	struct conn *owner;           /* the snarflog connection that announced it */
	Cmon__Instance info;          /* what we tell subscribers (strings owned) */
	bool has_token;               /* it announced a token... */
	uint8_t token[CMON_TOKEN_LEN]; /* ...which only InstanceUp carries, to matching classes */
	bool has_length;              /* it said Leave with the log's length... */
	uint64_t length;              /* ...records the program wrote, told in InstanceGone */
	double gone_at;               /* in reg.gone: when it went (monotonic s)... */
	bool gone_clean;              /* ...and whether it said Leave */
};

/* A class of instances one telemonitor connection wants to hear about. */
struct sub {
	TAILQ_ENTRY(sub) in_conn;     /* in owner->subs */
	TAILQ_ENTRY(sub) in_all;      /* in reg.subs */
	struct conn *owner;           /* the telemonitor connection */
	uint32_t id;                  /* subscriber-chosen id */
	char program[CMON_NAME_MAX + 1]; /* pattern ("" = any) */
	char machine[CMON_NAME_MAX + 1]; /* pattern ("" = any) */
	char pid[24];                 /* pattern ("" = any) */
	bool autostart;               /* the class's auto flag */
	bool block;                   /* the class's block flag */
};

TAILQ_HEAD(instance_list, instance);
TAILQ_HEAD(sub_list, sub);
TAILQ_HEAD(conn_list, conn);

/* One peer connection. */
struct conn {
	TAILQ_ENTRY(conn) link;       /* in reg.conns or reg.doomed */
	struct reg *reg;              /* back pointer */
	enum conn_state state;        /* see enum conn_state */
	struct bufferevent *bev;      /* socket or TLS stream */
	char peer[CMON_ADDRSTR_MAX];  /* "addr:port" for log lines */
	struct sockaddr_storage peer_sa; /* the peer's address: what it may announce */
	struct event *timer;          /* Hello deadline, then close deadline */
	struct instance *inst;        /* CONN_ANNOUNCED: its instance */
	struct sub_list subs;         /* CONN_TELEMONITOR: its classes */
	size_t nsubs;                 /* length of subs */
	double tokens;                /* flood control bucket */
	struct timeval refill;        /* when tokens were last refilled */
	bool secret_shown;            /* CONN_TELEMONITOR: its Hello carried a secret... */
	bool secret_ok;               /* ...and it was ours (-secret-file) */
	bool authorized;              /* CONN_TELEMONITOR: may subscribe (decided at its first
	                                 Subscribe, see auth.c) */
};

/* Who may subscribe, and so receive instance tokens (auth.c; docs/protocol.md
 * §8a, "Who may subscribe"). */
struct reg_auth {
	uid_t self;                   /* our own uid: always allowed, as is root */
	uid_t allow[REG_MAX_ALLOW_USERS]; /* -allow-user uids */
	size_t nallow;                /* how many */
	bool mutual_tls;              /* -tls-ca: a verified client certificate vouches */
	uint8_t secret[CMON_SECRET_MAX]; /* -secret-file's secret... */
	size_t secret_len;            /* ...its length; 0 = no secret */
	double last_log;              /* when a refusal was last logged (monotonic s)... */
	unsigned long quiet;          /* ...and how many were refused since, not logged */
};

/* How the matcher reports what to send: it decides which connection gets
 * which message, the owner of the connections sends it (main.c points this
 * at conn_send). `m` and everything it points to are the matcher's and live
 * only for the call. The callback may retire `to` (conn_send does when the
 * peer is not reading), and must ignore a `to` already closing. */
struct matcher_events {
	void (*send)(void *arg, struct conn *to, const Cmon__Msg *m); /* queue m for `to` */
	void *arg;                    /* passed to send */
};

/* The whole registry. */
struct reg {
	struct event_base *base;      /* the loop */
	SSL_CTX *tls;                 /* server TLS context, or NULL */
	struct evconnlistener *listeners[REG_MAX_LISTENERS]; /* listening sockets */
	size_t nlisteners;            /* how many */
	struct conn_list conns;       /* live connections */
	struct conn_list doomed;      /* closed connections not yet freed */
	struct event *reaper;         /* frees `doomed` from a clean stack */
	size_t nconns;                /* live connections */
	size_t max_conns;             /* refuse beyond this */
	int hello_timeout_s;          /* seconds a new peer has to say Hello */
	const char *unix_dir;         /* -unix-dir: where unix: data endpoints may be, or NULL */
	struct instance_list instances; /* every announced instance */
	struct instance_list gone;    /* instances gone in the last REG_GONE_KEEP_S, oldest
	                                 first (token wiped): told to new subscriptions */
	size_t ngone;                 /* length of gone */
	size_t ninstances;            /* length of instances */
	struct sub_list subs;         /* every class of every telemonitor */
	size_t nsubs;                 /* length of subs */
	uint64_t next_key;            /* next instance key */
	time_t last_refused_log;      /* rate limit for "too many connections" */
	struct reg_auth auth;         /* who may subscribe */
	struct matcher_events events; /* where the matcher's notifications go */
};

/* listen.c — the listening sockets. */
int listen_open(struct reg *r, char **addrs, size_t naddrs, const char *portfile); /* or systemd's */
void listen_close(struct reg *r);                        /* close every listener */

/* conn.c — peer connections. */
void conn_accept(struct reg *r, int fd);                 /* a new peer (fd owned) */
void conn_kill(struct conn *c, const char *fmt, ...)     /* log why and retire the connection */
	__attribute__((format(printf, 2, 3)));
void conn_close_all(struct reg *r);                      /* shutdown: free every connection */
void conn_reap(evutil_socket_t fd, short what, void *arg); /* free retired connections */
int conn_send(struct conn *c, const Cmon__Msg *m);       /* queue a message (kills on backlog) */

/* auth.c — who may subscribe: a verified client certificate (mutual TLS),
 * the shared secret in Hello, or a local peer whose uid is ours, root's or
 * an -allow-user one. */
void auth_hello(struct conn *c, const Cmon__Hello *h);   /* note a subscriber's secret */
bool auth_subscriber(struct conn *c, char *why, size_t size); /* may it subscribe? false:
                                                                `why` says why not */
void auth_log_refusal(struct reg *r, const char *peer, const char *why); /* at most one line
                                                                           a second */
void auth_describe(const struct reg *r, char *buf, size_t size); /* who may, for the log */

/* endpoint.c — which data endpoints are passed on to subscribers.
 * endpoint_check(): may the peer at `peer` announce `announced`? 0 with
 * `out` the endpoint to pass on (numeric); -EPERM (refused: someone else's
 * endpoint) or -EINVAL (not an address), with `why` naming it. */
int endpoint_check(const char *announced, const struct sockaddr *peer, const char *unix_dir,
		   char *out, size_t outlen, char *why, size_t whylen);

/* matcher.c — instances, classes and notifications, which it hands to
 * r->events.send (InstanceUp, InstanceGone, SubscribeAck). */
int matcher_add_instance(struct reg *r, struct conn *owner, const Cmon__Announce *a,
			 const char *endpoint, struct instance **out); /* endpoint: as checked;
			                                                  1: an auto class wants
			                                                  it, 0, -ENOMEM */
void matcher_remove_instance(struct reg *r, struct instance *inst, bool clean); /* + InstanceGone */
int matcher_add_sub(struct reg *r, struct conn *owner, const Cmon__Subscribe *s, char *why,
		    size_t size);                        /* 0 or -ErrorCode; sends Ups + Ack */
bool matcher_remove_sub(struct reg *r, struct conn *owner, uint32_t id); /* false: unknown id */
void matcher_remove_conn_subs(struct reg *r, struct conn *owner); /* a subscriber went away */
void matcher_free_all(struct reg *r);                    /* shutdown: forget all instances */

#endif
