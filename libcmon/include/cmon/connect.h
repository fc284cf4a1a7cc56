/* Outgoing connections without ever blocking the event loop: resolve the
 * host asynchronously (evdns), try each address in turn with a timeout,
 * do the TLS handshake if configured, and hand over a ready bufferevent. */
#ifndef CMON_CONNECT_H
#define CMON_CONNECT_H

#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include "cmon/net.h"

/* An attempt in progress; owned by the library until the callback runs. */
struct cmon_connector;

/* Called once: with a connected (and TLS-established) bufferevent whose
 * callbacks are unset and which is disabled, and the peer's name; or with
 * bev NULL and `err` saying why every address failed. The connector is
 * freed when this returns. */
typedef void (*cmon_connect_cb)(struct bufferevent *bev, const char *peer, const char *err,
				void *arg);

/* Start connecting to `addr` (TCP host:port or unix:PATH). `dns` may be
 * NULL (then names are resolved with blocking getaddrinfo). `tls` NULL
 * means plain TCP; Unix sockets are always plain. `timeout_ms` bounds each
 * address's connect + handshake. The callback never runs before this
 * returns. NULL on allocation failure. */
struct cmon_connector *cmon_connect_start(struct event_base *base, struct evdns_base *dns,
					  const struct cmon_addr *addr, SSL_CTX *tls,
					  int timeout_ms, cmon_connect_cb cb, void *arg);

/* Abandon an attempt; its callback will not run. Accepts NULL. */
void cmon_connect_cancel(struct cmon_connector *c);

#endif
