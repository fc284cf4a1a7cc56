/* The telemonitor's HTTP server (docs/http.md), libevent's evhttp on the
 * service's loop: off unless -http ADDR or (defaults (http "ADDR")) is
 * given; plain HTTP only on a loopback (or Unix socket) address, HTTPS
 * with the service's TLS options (-tls-cert, -tls-key; mutual TLS with
 * -tls-ca) anywhere.
 *
 *   GET /healthz                       200 "ok", or 503 with the reason
 *   GET /metrics                       Prometheus text format 0.0.4 (metrics.c)
 *   GET /api/v1/status                 telemonctl status --json
 *   GET /api/v1/classes                telemonctl classes --json
 *   GET /api/v1/instances              telemonctl instances --json (all, limit)
 *   GET /api/v1/failures               telemonctl failures --json, newest first
 *                                      (prog, assert, since, until, instance, limit,
 *                                      before, kind)
 *   GET /api/v1/failures/series        failures per assertion and minute (dashboard.h)
 *   GET /api/v1/durations/series       interval-duration percentiles per minute (ditto)
 *   GET /api/v1/failures/ID/window     telemonctl window ID (text/plain)
 *   GET /api/v1/stats                  telemonctl stats --json (prog, assert, day)
 *   GET /api/v1/history, /compare      telemonctl history, compare --json
 *   GET /api/v1/instances/ID/verdicts  telemonctl verdicts ID --json
 *   GET /, /instances/ID, /failures/ID, /static/...
 *                                      the web dashboard (dashboard.h)
 *
 * The API's routes and their parameters are the paths and keys of the
 * command table (cmdtab.h); a URL asks commands_run() (commands.c), the
 * code that answers telemonctl, so the two cannot drift. Only GET and HEAD are served;
 * errors are {"error": "..."} with 400, 404, 405 or 500. */
#ifndef TELEMON_HTTP_H
#define TELEMON_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "telemonitor.h"

/* Limits. */
#define HTTP_CONNS_MAX 256              /* connections at once; beyond, the idlest is closed */
#define HTTP_HEADERS_MAX (8u << 10)     /* bytes of request line and headers */
#define HTTP_BODY_MAX 4096              /* bytes of request body (GET has none) */
#define HTTP_CONNS_PER_CLIENT 64        /* of them from one client address (its idlest closed) */
#define HTTP_TIMEOUT_S 30               /* idle or slow connections are closed after this */
#define HTTP_REQUEST_S 10               /* a new connection's first request comes whole within */
#define HTTP_TOKEN_MAX 512              /* bytes of a bearer token */
#define HTTP_COOKIE "cmon_token"        /* the dashboard's login cookie */
#define HTTP_LISTEN_MAX 8               /* listening sockets (addresses a name resolves to) */

struct http;

/* Start serving on -http ADDR, else the configuration's http, else do
 * nothing. 0 (also when off), -EINVAL for an address we must not serve on
 * (not loopback without TLS) or cannot parse, another negative errno if
 * listening failed; `err` says why. */
int http_open(struct tmon *tm, char *err, size_t errlen);

/* Check what http_open would serve without serving it (the address, the
 * refusals, the token file, the TLS certificate and key): -check runs it.
 * 0 (also when off) or -EINVAL with the message http_open would give. */
int http_check(const struct tmon *tm, char *err, size_t errlen);

/* Stop serving and close every connection; accepts a tm without a server. */
void http_close(struct tmon *tm);

/* "127.0.0.1:8080" as bound (the port the kernel chose for port 0), or
 * NULL when the server is off. */
const char *http_address(const struct tmon *tm);

/* "https" when the server speaks TLS, else "http". */
const char *http_scheme(const struct tmon *tm);

/* Connections open now. */
size_t http_connections(const struct tmon *tm);

/* Connections the server closed: too slow to send a request, or the
 * idlest when all were taken. */
uint64_t http_closed(const struct tmon *tm);

/* One parameter of a query: 0 to go on, or < 0 (with a message in err). */
typedef int (*http_param_fn)(void *arg, const char *key, const char *value, char *err,
			     size_t errlen);

/* Call `fn` on each parameter of `query` (NULL: none), in order, until one
 * returns < 0. 0, that value, or -EINVAL for a malformed query string. */
int http_query_each(const char *query, http_param_fn fn, void *arg, char *err, size_t errlen);

/* A time given in a query (since, until), in the forms telemonctl takes
 * (cmon/when.h): Unix seconds, a date or UTC time (2024-03-01,
 * 2024-03-01T12:00, 2024-03-01T12:00:00Z), or a time ago ("2 hours").
 * False if it is none (*out untouched). */
bool http_parse_time(const char *s, double *out);

/* /healthz: true when the store takes writes and the registry link is
 * up; otherwise false with a one-line reason in `why`. */
bool http_healthy(struct tmon *tm, char *why, size_t size);

#endif
