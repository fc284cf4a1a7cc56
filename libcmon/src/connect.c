/* Asynchronous resolve + connect + TLS handshake (see cmon/connect.h).
 * An attempt moves through explicit states driven by connect_drive(). */
#include "cmon/connect.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/util.h>

#include "cmon/tls.h"

/* Where an attempt is. */
enum conn_phase {
	PH_START,       /* waiting for the deferred start event */
	PH_RESOLVING,   /* evdns_getaddrinfo in flight */
	PH_CONNECTING,  /* bufferevent connecting (and handshaking) to `cur` */
	PH_DONE,        /* callback delivered or cancelled */
};

struct cmon_connector {
	enum conn_phase phase;             /* current state */
	struct event_base *base;           /* loop everything runs on */
	struct evdns_base *dns;            /* resolver, or NULL for blocking lookups */
	struct cmon_addr addr;             /* where to connect */
	SSL_CTX *tls;                      /* TLS context or NULL */
	int timeout_ms;                    /* per-address bound */
	cmon_connect_cb cb;                /* user callback */
	void *arg;                         /* its argument */
	struct event *kick;                /* deferred start */
	struct evdns_getaddrinfo_request *req; /* pending lookup */
	bool sync_lookup;                  /* inside evdns_getaddrinfo right now */
	struct evutil_addrinfo *res;       /* resolved addresses */
	struct evutil_addrinfo *cur;       /* address being tried */
	struct bufferevent *bev;           /* connection being made */
	char peer[CMON_ADDRSTR_MAX];       /* name of `cur` for logs */
	char err[512];                     /* last failure */
};

static void connect_next(struct cmon_connector *c);

static void connector_free(struct cmon_connector *c)
{
	if (c->kick)
		event_free(c->kick);
	if (c->res)
		evutil_freeaddrinfo(c->res);
	if (c->bev)
		bufferevent_free(c->bev);
	free(c);
}

static void finish(struct cmon_connector *c, struct bufferevent *bev)
{
	c->phase = PH_DONE;
	c->cb(bev, c->peer, bev ? NULL : c->err, c->arg);
	connector_free(c);
}

static void bev_event(struct bufferevent *bev, short what, void *arg)
{
	struct cmon_connector *c = arg;
	char tlserr[200];

	if (what & BEV_EVENT_CONNECTED) {
		c->bev = NULL;
		bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
		bufferevent_set_timeouts(bev, NULL, NULL);
		bufferevent_disable(bev, EV_READ | EV_WRITE);
		cmon_socket_tune(bufferevent_getfd(bev));
		finish(c, bev);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT)
		snprintf(c->err, sizeof c->err, "%s: connection timed out", c->peer);
	else if (c->tls && c->addr.kind == CMON_ADDR_TCP && !EVUTIL_SOCKET_ERROR())
		snprintf(c->err, sizeof c->err, "%s: TLS: %s", c->peer,
			 cmon_tls_error(bev, tlserr, sizeof tlserr));
	else
		snprintf(c->err, sizeof c->err, "%s: %s", c->peer,
			 evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	bufferevent_free(c->bev);
	c->bev = NULL;
	connect_next(c);
}

/* Start a connection to `sa`; on immediate failure record why. */
static bool try_connect(struct cmon_connector *c, const struct sockaddr *sa, socklen_t len,
			bool use_tls)
{
	struct timeval tv = { c->timeout_ms / 1000, (c->timeout_ms % 1000) * 1000 };
	int fd;

	cmon_sockaddr_format(sa, len, c->peer, sizeof c->peer);
	c->bev = cmon_tls_connect_bev(c->base, use_tls ? c->tls : NULL, -1, c->addr.host);
	if (!c->bev) {
		snprintf(c->err, sizeof c->err, "%s: out of memory", c->peer);
		return false;
	}
	bufferevent_setcb(c->bev, NULL, NULL, bev_event, c);
	bufferevent_set_timeouts(c->bev, &tv, &tv);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(c->bev, sa, (int)len) < 0) {
		snprintf(c->err, sizeof c->err, "%s: %s", c->peer, strerror(errno ? errno : ECONNREFUSED));
		bufferevent_free(c->bev);
		c->bev = NULL;
		return false;
	}
	fd = bufferevent_getfd(c->bev);
	if (fd >= 0)
		evutil_make_socket_closeonexec(fd);
	return true;
}

/* Try the next resolved address, or report failure when none is left. */
static void connect_next(struct cmon_connector *c)
{
	c->phase = PH_CONNECTING;
	while (c->cur) {
		struct evutil_addrinfo *ai = c->cur;
		c->cur = ai->ai_next;
		if (try_connect(c, ai->ai_addr, (socklen_t)ai->ai_addrlen, true))
			return;
	}
	finish(c, NULL);
}

static void resolved(int result, struct evutil_addrinfo *res, void *arg)
{
	struct cmon_connector *c = arg;
	char abuf[CMON_ADDRSTR_MAX];

	c->req = NULL;
	if (c->phase == PH_DONE) {          /* cancelled while the lookup ran */
		if (result == 0 && res)
			evutil_freeaddrinfo(res);
		connector_free(c);
		return;
	}
	if (result != 0) {
		snprintf(c->err, sizeof c->err, "cannot resolve %s: %s",
			 cmon_addr_format(&c->addr, abuf, sizeof abuf), evutil_gai_strerror(result));
		c->res = NULL;
	} else {
		c->res = res;
	}
	c->cur = c->res;
	if (!c->sync_lookup)
		connect_next(c);
}

/* Whether `host` is an IPv4 or IPv6 address rather than a name. */
static bool host_is_literal(const char *host)
{
	unsigned char buf[sizeof(struct in6_addr)];

	return evutil_inet_pton(AF_INET, host, buf) == 1 ||
	       evutil_inet_pton(AF_INET6, host, buf) == 1;
}

static void kick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cmon_connector *c = arg;
	struct evutil_addrinfo hints;
	char port[8];

	if (c->addr.kind == CMON_ADDR_UNIX) {
		struct sockaddr_un un = { .sun_family = AF_UNIX };
		memcpy(un.sun_path, c->addr.path, strlen(c->addr.path) + 1);
		c->phase = PH_CONNECTING;
		if (!try_connect(c, (struct sockaddr *)&un, sizeof un, false))
			finish(c, NULL);
		return;
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	/* A literal address is used as given: AI_ADDRCONFIG would drop "::1" on a
	 * host whose only IPv6 addresses libevent does not count as configured
	 * (loopback, unique-local), so it is kept for names only. */
	hints.ai_flags = host_is_literal(c->addr.host) ? EVUTIL_AI_NUMERICHOST
						       : EVUTIL_AI_ADDRCONFIG;
	snprintf(port, sizeof port, "%u", c->addr.port);
	c->phase = PH_RESOLVING;
	if (!c->dns) {
		struct evutil_addrinfo *res = NULL;
		int r = evutil_getaddrinfo(c->addr.host, port, &hints, &res);
		c->sync_lookup = true;
		resolved(r, res, c);
		c->sync_lookup = false;
		connect_next(c);
		return;
	}
	c->sync_lookup = true;
	c->req = evdns_getaddrinfo(c->dns, c->addr.host, port, &hints, resolved, c);
	c->sync_lookup = false;
	if (!c->req)       /* answered (or failed) synchronously */
		connect_next(c);
}

struct cmon_connector *cmon_connect_start(struct event_base *base, struct evdns_base *dns,
					  const struct cmon_addr *addr, SSL_CTX *tls,
					  int timeout_ms, cmon_connect_cb cb, void *arg)
{
	struct cmon_connector *c = calloc(1, sizeof *c);

	if (!c)
		return NULL;
	c->phase = PH_START;
	c->base = base;
	c->dns = dns;
	c->addr = *addr;
	if (c->addr.kind == CMON_ADDR_TCP && !c->addr.host[0])
		strcpy(c->addr.host, "localhost");
	c->tls = tls;
	c->timeout_ms = timeout_ms > 0 ? timeout_ms : 5000;
	c->cb = cb;
	c->arg = arg;
	cmon_addr_format(&c->addr, c->peer, sizeof c->peer);
	c->kick = evtimer_new(base, kick_cb, c);
	if (!c->kick) {
		free(c);
		return NULL;
	}
	event_active(c->kick, EV_TIMEOUT, 0);
	return c;
}

void cmon_connect_cancel(struct cmon_connector *c)
{
	if (!c)
		return;
	c->phase = PH_DONE;
	if (c->req) {
		/* evdns still calls resolved() (maybe later); it frees `c`. */
		evdns_getaddrinfo_cancel(c->req);
		return;
	}
	connector_free(c);
}
