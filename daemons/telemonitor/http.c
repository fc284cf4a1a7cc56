/* The HTTP server (see http.h): listening, TLS, the connection bound,
 * routing, and turning a URL into the request telemonctl would have sent.
 *
 * Counting connections: evhttp (2.1) tells nobody when it accepts one, but
 * it asks us for the connection's bufferevent. We count the connection in
 * there, and just after (an event activated for the same loop iteration,
 * holding a reference on the bufferevent) find its evhttp_connection (the
 * bufferevent's callback argument) and set its close callback, where it is
 * counted out; a connection already freed by then has no callbacks left.
 * Each connection has HTTP_REQUEST_S for its first request to come whole
 * and HTTP_TIMEOUT_S for each later one (a client sending a byte now and
 * then does not keep it). At HTTP_CONNS_MAX open connections a new one
 * closes the one that has gone longest without a whole request, so that
 * slow or idle clients never keep /healthz out. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/bufferevent_ssl.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "cmon/log.h"
#include "cmon/when.h"
#include "clock.h"
#include "cmdtab.h"
#include "control.h"
#include "dashboard.h"
#include "http.h"
#include "metrics.h"
#include "store.h"
#include "text.h"

#define HTTP_DEFAULT_PORT 7363          /* when ADDR gives none */
#define HTTP_BACKLOG 128                /* listen(2) backlog */
#define HTTP_ARGS_MAX 12                /* words of a request built from a URL */
#define HTTP_ARG_LEN 600                /* bytes of one of them */

/* The server. */
struct http {
	struct tmon *tm;                /* the service */
	struct evhttp *eh;              /* libevent's server */
	SSL_CTX *ssl;                   /* server TLS context, or NULL for plain HTTP */
	struct evhttp_bound_socket *bound[HTTP_LISTEN_MAX]; /* listening sockets */
	size_t nbound;                  /* how many */
	char addr[CMON_ADDRSTR_MAX];    /* the first one, as bound */
	struct http_count *count;       /* connections open */
	char token[HTTP_TOKEN_MAX + 1]; /* -http-token-file's token, or "" */
	const char *webdir;             /* the dashboard's files (dash_webdir()), or NULL */
};

/* One connection, from the moment its evhttp_connection is found (see
 * the top of the file) to its close. */
struct http_conn {
	TAILQ_ENTRY(http_conn) link;    /* in count->list */
	struct http_count *count;       /* where it is counted */
	struct evhttp_connection *evcon; /* evhttp's */
	struct event *deadline;         /* closes it if no request comes whole in time */
	double since;                   /* when it came, or its last request did */
	char client[INET6_ADDRSTRLEN];  /* the client's address, without the port */
};
TAILQ_HEAD(http_conn_list, http_conn);

/* The connection count. It outlives the server (connections are closed
 * by evhttp_free, and a hook may be pending): it is freed when the server
 * and every connection have let go of it. */
struct http_count {
	size_t conns;                   /* connections open */
	size_t refs;                    /* the server (1) + connections */
	struct http *h;                 /* the server, NULL once it is closed */
	struct http_conn_list list;     /* the connections found so far, oldest first */
	uint64_t closed;                /* connections we closed (slow, or to make room) */
};

/* A request built from a URL for commands_run(). */
struct http_args {
	char word[HTTP_ARGS_MAX][HTTP_ARG_LEN]; /* command and KEY=VALUE words */
	char *argv[HTTP_ARGS_MAX];      /* pointers to them */
	int argc;                       /* how many */
};

/* --- connections --------------------------------------------------------- */

static void count_put(struct http_count *c)
{
	if (--c->refs == 0)
		free(c);
}

/* A connection has ended. */
static void conn_gone(struct http_count *c)
{
	if (c->conns)
		c->conns--;
	count_put(c);
}

/* Forget a connection (evhttp is closing it, or we are). */
static void conn_forget(struct http_conn *hc)
{
	struct http_count *c = hc->count;

	TAILQ_REMOVE(&c->list, hc, link);
	if (hc->deadline)
		event_free(hc->deadline);
	free(hc);
	conn_gone(c);
}

static void conn_closed(struct evhttp_connection *evcon, void *arg)
{
	conn_forget(arg);
}

/* Close a connection ourselves: forgotten first, so that it is counted
 * once whether or not evhttp calls back. */
static void conn_close(struct http_conn *hc)
{
	struct evhttp_connection *evcon = hc->evcon;

	evhttp_connection_set_closecb(evcon, NULL, NULL);
	conn_forget(hc);
	evhttp_connection_free(evcon);
}

static double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A request's line and headers did not all come in time (a slow client,
 * or one sending a byte now and then to keep a connection): close it. */
static void conn_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn *hc = arg;

	cmon_debug("http: a connection sent no whole request in time; closed");
	hc->count->closed++;
	conn_close(hc);
}

static void arm(struct http_conn *hc, int seconds)
{
	struct timeval tv = { seconds, 0 };

	hc->since = mono_now();
	if (hc->deadline)
		evtimer_add(hc->deadline, &tv);
}

/* All connections taken: make room by closing the one that has gone
 * longest without a whole request (slow clients cannot hold the server,
 * and /healthz always gets in). True if one was closed. */
static bool evict_oldest(struct http_count *c)
{
	struct http_conn *hc, *old = NULL;

	TAILQ_FOREACH(hc, &c->list, link)
		if (!old || hc->since < old->since)
			old = hc;
	if (!old)
		return false;
	cmon_debug("http: %zu connections: closing the one idle longest", c->conns);
	c->closed++;
	conn_close(old);
	return true;
}

/* One client address has more than HTTP_CONNS_PER_CLIENT connections:
 * close its own idlest (other than `fresh`), so that one client cannot
 * take the slots of every other. */
static void per_client_bound(struct http_count *c, struct http_conn *fresh)
{
	struct http_conn *hc, *old = NULL;
	size_t n = 0;

	if (!fresh->client[0])
		return;
	TAILQ_FOREACH(hc, &c->list, link)
		if (!strcmp(hc->client, fresh->client)) {
			n++;
			if (hc != fresh && (!old || hc->since < old->since))
				old = hc;
		}
	if (n <= HTTP_CONNS_PER_CLIENT || !old)
		return;
	cmon_debug("http: %zu connections from %s: closing its idlest", n, fresh->client);
	c->closed++;
	conn_close(old);
}

/* The client's address (no port) of socket `fd`, or "". */
static void client_of(int fd, char *out, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;

	out[0] = '\0';
	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
		return;
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, (socklen_t)size);
	else if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, out, (socklen_t)size);
}

/* Finding a new connection's evhttp_connection (see the top of the file). */
struct conn_hook {
	struct event *ev;               /* this callback */
	struct bufferevent *bev;        /* the connection's (we hold a reference) */
	struct http_count *count;       /* where it is counted */
};

static void conn_hook(evutil_socket_t fd, short what, void *arg)
{
	struct conn_hook *k = arg;
	struct http_conn *hc;
	void *evcon = NULL;

	bufferevent_getcb(k->bev, NULL, NULL, NULL, &evcon);
	if (evcon && (hc = calloc(1, sizeof *hc))) {
		/* no Nagle: a reply's last segment would otherwise wait for
		 * the client's delayed ACK on a keep-alive connection (40 ms) */
		int one = 1;
		(void)setsockopt(bufferevent_getfd(k->bev), IPPROTO_TCP, TCP_NODELAY, &one,
				 sizeof one);
		hc->count = k->count;
		hc->evcon = evcon;
		hc->deadline = evtimer_new(bufferevent_get_base(k->bev), conn_deadline, hc);
		client_of(bufferevent_getfd(k->bev), hc->client, sizeof hc->client);
		TAILQ_INSERT_TAIL(&k->count->list, hc, link);
		evhttp_connection_set_closecb(evcon, conn_closed, hc);
		arm(hc, HTTP_REQUEST_S);     /* its first request, whole, within this */
		per_client_bound(k->count, hc);
	} else if (evcon) {
		evhttp_connection_free(evcon);   /* (no memory to watch it: no connection) */
		conn_gone(k->count);
	} else {
		conn_gone(k->count);    /* already freed */
	}
	bufferevent_decref(k->bev);
	event_free(k->ev);
	free(k);
}

/* evhttp asks for the bufferevent of a new connection (its socket is set
 * afterwards). NULL makes evhttp use a plain one, which a TLS client
 * cannot talk to: the connection then fails at once. */
static struct bufferevent *conn_new(struct event_base *base, void *arg)
{
	struct http *h = arg;
	struct conn_hook *k = calloc(1, sizeof *k);
	struct bufferevent *bev;

	if (!k)
		return NULL;
	/* at the bound, make room rather than stop accepting */
	if (h->count->conns >= HTTP_CONNS_MAX)
		evict_oldest(h->count);
	k->ev = event_new(base, -1, 0, conn_hook, k);
	if (!k->ev)
		goto out_free;
	if (h->ssl) {
		SSL *ssl = SSL_new(h->ssl);
		if (!ssl)
			goto out_free;
		bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
						     BEV_OPT_CLOSE_ON_FREE);
		if (!bev) {
			SSL_free(ssl);
			goto out_free;
		}
	} else {
		bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
		if (!bev)
			goto out_free;
	}
	bufferevent_incref(bev);
	k->bev = bev;
	k->count = h->count;
	event_active(k->ev, EV_TIMEOUT, 0);
	h->count->refs++;
	h->count->conns++;
	return bev;
out_free:
	if (k->ev)
		event_free(k->ev);
	free(k);
	return NULL;
}

/* --- replies --------------------------------------------------------------- */

static void reply(struct evhttp_request *req, int code, const char *reason, const char *type,
		  struct evbuffer *body)
{
	struct evkeyvalq *hd = evhttp_request_get_output_headers(req);

	evhttp_add_header(hd, "Content-Type", type);
	evhttp_add_header(hd, "Cache-Control", "no-store");
	evhttp_add_header(hd, "X-Content-Type-Options", "nosniff");
	evhttp_send_reply(req, code, reason, body);
}

static const char *reason_of(int code)
{
	switch (code) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 303: return "See Other";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 503: return "Service Unavailable";
	default: return "Internal Server Error";
	}
}

/* {"error": MSG} with status `code`. */
static void reply_error(struct evhttp_request *req, int code, const char *msg)
{
	struct evbuffer *body = evbuffer_new();
	struct sbuf b = { 0 };

	if (!body) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	sb_printf(&b, "{\"error\":");
	sb_json_str(&b, msg);
	sb_printf(&b, "}\n");
	if (b.s)
		evbuffer_add(body, b.s, b.len);
	sb_free(&b);
	reply(req, code, reason_of(code), "application/json", body);
	evbuffer_free(body);
}

/* --- /healthz and /metrics ------------------------------------------------- */

bool http_healthy(struct tmon *tm, char *why, size_t size)
{
	struct store_health sh;

	store_health(tm->store, &sh);
	if (sh.degraded) {
		snprintf(why, size, "store degraded: %s", sh.reason);
		return false;
	}
	if (!reg_connected(tm)) {
		snprintf(why, size, "registry link down (%s)", reg_status(tm));
		return false;
	}
	snprintf(why, size, "ok");
	return true;
}

static void serve_healthz(struct http *h, struct evhttp_request *req)
{
	struct evbuffer *body = evbuffer_new();
	char why[300];
	bool ok = http_healthy(h->tm, why, sizeof why);

	if (!body) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	evbuffer_add_printf(body, "%s\n", why);
	reply(req, ok ? 200 : 503, reason_of(ok ? 200 : 503), "text/plain; charset=utf-8", body);
	evbuffer_free(body);
}

static void serve_metrics(struct http *h, struct evhttp_request *req)
{
	struct evbuffer *body = evbuffer_new();
	struct metrics_http mh = { http_connections(h->tm), http_closed(h->tm) };
	char err[300] = "";

	if (!body) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	instances_save(h->tm);
	store_flush(h->tm->store);
	if (metrics_write(h->tm, &mh, body, err, sizeof err) < 0)
		reply_error(req, 500, err[0] ? err : "failed");
	else
		reply(req, 200, "OK", METRICS_CONTENT_TYPE, body);
	evbuffer_free(body);
	store_commit(h->tm->store);
}

/* --- the dashboard ------------------------------------------------------------ */

static int status_of(int rc);

static void serve_dash(struct http *h, struct evhttp_request *req, const char *path,
		       const char *query)
{
	struct evbuffer *body = evbuffer_new();
	const char *type = NULL;
	char err[PATH_MAX + 100] = "";
	int rc;

	if (!body) {
		evhttp_send_error(req, 500, NULL);
		return;
	}
	instances_save(h->tm);
	store_flush(h->tm->store);
	rc = dash_serve(h->tm, h->webdir, path, query, body, &type, err, sizeof err);
	if (rc < 0) {
		if (rc != -ENOENT && rc != -EINVAL)
			cmon_warn("http: %s: %s", path, err);
		reply_error(req, status_of(rc), err[0] ? err : "failed");
	} else {
		if (!strncmp(type, "text/html", 9))
			evhttp_add_header(evhttp_request_get_output_headers(req),
					  "Content-Security-Policy", DASH_CSP);
		reply(req, 200, "OK", type, body);
	}
	evbuffer_free(body);
	store_commit(h->tm->store);
}

/* --- the API ----------------------------------------------------------------- */

static void add_word(struct http_args *a, const char *fmt, const char *v)
{
	snprintf(a->word[a->argc], HTTP_ARG_LEN, fmt, v);
	a->argv[a->argc] = a->word[a->argc];
	a->argc++;
}

bool http_parse_time(const char *s, double *out)
{
	return cmon_when_parse(s, tm_now(), out);
}

int http_query_each(const char *query, http_param_fn fn, void *arg, char *err, size_t errlen)
{
	struct evkeyvalq params;
	struct evkeyval *kv;
	int rc = 0;

	TAILQ_INIT(&params);
	if (query && evhttp_parse_query_str(query, &params) < 0) {
		snprintf(err, errlen, "malformed query string");
		return -EINVAL;
	}
	TAILQ_FOREACH(kv, &params, next)
		if ((rc = fn(arg, kv->key, kv->value, err, errlen)) < 0)
			break;
	evhttp_clear_headers(&params);
	return rc;
}

/* What query_word() turns a query into. */
struct query_words {
	unsigned keys;            /* the command's CK_* (cmdtab.h) */
	struct http_args *a;      /* its words */
};

/* One parameter of a command's query: checked against its keys and turned
 * into a KEY=VALUE word. 0, or -EINVAL with a message. */
static int query_word(void *arg, const char *key, const char *value, char *err, size_t errlen)
{
	const struct query_words *w = arg;
	struct http_args *a = w->a;
	unsigned keys = w->keys;

	if (!(keys & cmd_key_bit(key, strlen(key)))) {
		snprintf(err, errlen, "unknown parameter '%.60s'", key);
		return -EINVAL;
	}
	if (a->argc == HTTP_ARGS_MAX || strlen(value) > HTTP_ARG_LEN - 40) {
		snprintf(err, errlen, "too many or too long parameters");
		return -EINVAL;
	}
	if (!strcmp(key, "all")) {
		if (!strcmp(value, "1") || !strcmp(value, "true") ||
		    !strcmp(value, "yes") || !*value) {
			add_word(a, "%s", "all=1");
		} else if (strcmp(value, "0") && strcmp(value, "false") &&
			   strcmp(value, "no")) {
			snprintf(err, errlen, "all: expected true or false");
			return -EINVAL;
		}
	} else if (!strcmp(key, "since") || !strcmp(key, "until")) {
		double t;
		char num[80];
		if (!http_parse_time(value, &t)) {
			snprintf(err, errlen, "%s: '%.40s' is not a time (Unix seconds, "
				 "2024-03-01, 2024-03-01T12:00:00Z or '2 hours')", key, value);
			return -EINVAL;
		}
		snprintf(num, sizeof num, "%s=%.6f", key, t);
		add_word(a, "%s", num);
	} else {
		char fmt[80];
		snprintf(fmt, sizeof fmt, "%s=%%s", key);
		add_word(a, fmt, value);
	}
	return 0;
}

/* Check the query's parameters against `keys` (CK_* of cmdtab.h) and turn
 * them into KEY=VALUE words. 0, or -EINVAL with a message. */
static int query_words(const char *query, unsigned keys, struct http_args *a, char *err,
		       size_t errlen)
{
	struct query_words w = { .keys = keys, .a = a };

	return http_query_each(query, query_word, &w, err, errlen);
}

/* Does `path` match the route `route` of cmdtab.h? A "{id}" in the route
 * matches a number, copied to `id` ("" if the route has none). */
static bool route_match(const char *path, const char *route, char *id, size_t size)
{
	const char *mark = strstr(route, "{id}");
	size_t pre, n;

	*id = '\0';
	if (!mark)
		return !strcmp(path, route);
	pre = (size_t)(mark - route);
	if (strncmp(path, route, pre))
		return false;
	path += pre;
	n = strspn(path, "0123456789");
	if (!n || n >= size || strcmp(path + n, mark + 4))
		return false;
	memcpy(id, path, n);
	id[n] = '\0';
	return true;
}

static int status_of(int rc)
{
	switch (rc) {
	case -EINVAL: return 400;
	case -ENOENT: return 404;
	case -EAGAIN: return 503;
	default: return 500;
	}
}

static void serve_api(struct http *h, struct evhttp_request *req, const char *path,
		      const char *query)
{
	struct tmon *tm = h->tm;
	struct http_args *a = calloc(1, sizeof *a);
	struct ctl_request r = { .json = true };
	struct evbuffer *body = evbuffer_new();
	const struct cmd_info *c = NULL;
	char err[2048] = "", id[24];
	int rc;

	if (!a || !body) {
		evhttp_send_error(req, 500, NULL);
		goto out;
	}
	/* the routes: the read-only commands of cmdtab.h with a path */
	for (int i = 0; i < CMD_COUNT && !c; i++)
		if (cmd_info(i)->http_path && (cmd_info(i)->flags & CMD_RO) &&
		    route_match(path, cmd_info(i)->http_path, id, sizeof id))
			c = cmd_info(i);
	if (!c) {
		reply_error(req, 404, "no such endpoint (see docs/http.md)");
		goto out;
	}
	add_word(a, "%s", c->name);
	if (*id)
		add_word(a, "%s", id);
	r.json = !(c->flags & CMD_HTTP_TEXT);
	r.newest_first = (c->flags & CMD_HTTP_NEWEST) != 0;
	if (query_words(query, c->keys, a, err, sizeof err) < 0) {
		reply_error(req, 400, err);
		goto out;
	}
	r.argc = a->argc;
	r.argv = a->argv;
	/* as for telemonctl: the counters of live instances are saved first */
	instances_save(tm);
	store_flush(tm->store);
	rc = commands_run(tm, &r, body, err, sizeof err);
	if (rc < 0)     /* "--limit: ..." names telemonctl's option: say "limit" */
		reply_error(req, status_of(rc), !err[0] ? "failed" :
			    strncmp(err, "--", 2) ? err : err + 2);
	else
		reply(req, 200, "OK", r.json ? "application/json" : "text/plain; charset=utf-8",
		      body);
	store_commit(tm->store);
out:
	if (body)
		evbuffer_free(body);
	free(a);
}

/* A whole request came on its connection: the next one has the idle
 * timeout to come whole. */
static void request_came(struct http *h, struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct http_conn *hc;

	TAILQ_FOREACH(hc, &h->count->list, link)
		if (hc->evcon == evcon) {
			arm(hc, HTTP_TIMEOUT_S);
			return;
		}
}

/* `given` (n bytes) is the token, compared in constant time. */
static bool token_is(const struct http *h, const char *given, size_t n)
{
	size_t want = strlen(h->token);
	unsigned char diff = 0;

	for (size_t i = 0; i < want; i++)
		diff |= (unsigned char)(h->token[i] ^ (i < n ? given[i] : 0));
	return diff == 0 && n == want;
}

/* The value of cookie `name` in the request (n bytes at *out), or false. */
static bool find_cookie(struct evhttp_request *req, const char *name, const char **out,
			size_t *n)
{
	const char *c = evhttp_find_header(evhttp_request_get_input_headers(req), "Cookie");
	size_t len = strlen(name);

	while (c && *c) {
		c += strspn(c, " ;");
		if (!strncmp(c, name, len) && c[len] == '=') {
			*out = c + len + 1;
			*n = strcspn(*out, "; ");
			return true;
		}
		c = strchr(c, ';');
	}
	return false;
}

/* With -http-token-file: the request carries `Authorization: Bearer
 * TOKEN`, or the cookie the dashboard's login set (HTTP_COOKIE). Without
 * one, everyone may ask. */
static bool authorized(const struct http *h, struct evhttp_request *req)
{
	const char *a;
	size_t n;

	if (!h->token[0])
		return true;
	a = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
	if (a && !strncasecmp(a, "Bearer ", 7)) {
		a += 7;
		a += strspn(a, " ");
		return token_is(h, a, strlen(a));
	}
	return find_cookie(req, HTTP_COOKIE, &a, &n) && token_is(h, a, n);
}

/* The dashboard's login: a browser cannot send a bearer token, so
 * `/?token=TOKEN` sets it as an HttpOnly cookie and sends the browser on
 * to `/` (the token leaves the address bar). True if answered. */
static bool dash_login(struct http *h, struct evhttp_request *req, const char *path,
		       const char *query)
{
	struct evkeyvalq q;
	struct evkeyvalq *out = evhttp_request_get_output_headers(req);
	const char *t;
	char cookie[HTTP_TOKEN_MAX + 128];
	bool ok;

	if (!h->token[0] || strcmp(path, "/") || !query || !strstr(query, "token="))
		return false;
	TAILQ_INIT(&q);
	if (evhttp_parse_query_str(query, &q) < 0)
		return false;
	t = evhttp_find_header(&q, "token");
	ok = t && token_is(h, t, strlen(t));
	evhttp_clear_headers(&q);
	if (!ok)
		return false;
	snprintf(cookie, sizeof cookie, "%s=%s; Path=/; HttpOnly; SameSite=Strict%s", HTTP_COOKIE,
		 h->token, h->ssl ? "; Secure" : "");
	evhttp_add_header(out, "Set-Cookie", cookie);
	evhttp_add_header(out, "Location", "/");
	evhttp_add_header(out, "Cache-Control", "no-store");
	evhttp_add_header(out, "Referrer-Policy", "no-referrer");
	evhttp_send_reply(req, 303, "See Other", NULL);
	return true;
}

/* Every request: only GET and HEAD, then by path. */
static void on_request(struct evhttp_request *req, void *arg)
{
	struct http *h = arg;
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	const char *query = uri ? evhttp_uri_get_query(uri) : NULL;

	cmon_debug("http: %s %s", m == EVHTTP_REQ_GET ? "GET" : m == EVHTTP_REQ_HEAD ? "HEAD" :
		   "other", evhttp_request_get_uri(req));
	request_came(h, req);
	if (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_HEAD) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
		reply_error(req, 405, "only GET and HEAD are allowed");
		return;
	}
	if (!path || !*path)
		path = "/";
	if (dash_login(h, req, path, query))
		return;
	if (strcmp(path, "/healthz") && !authorized(h, req)) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
				  "Bearer realm=\"cmon\"");
		reply_error(req, 401, "authorization required: Authorization: Bearer TOKEN "
			    "(the telemonitor's -http-token-file), or for the dashboard "
			    "/?token=TOKEN once");
		return;
	}
	if (!strcmp(path, "/healthz"))
		serve_healthz(h, req);
	else if (!strcmp(path, "/metrics"))
		serve_metrics(h, req);
	else if (dash_handles(path))    /* its pages, and the charts' /api/v1/.../series */
		serve_dash(h, req, path, query);
	else if (!strncmp(path, "/api/v1/", 8))
		serve_api(h, req, path, query);
	else
		reply_error(req, 404, "no such endpoint (see docs/http.md)");
}

/* --- setup ------------------------------------------------------------------- */

/* True if a bound socket can only be reached from this machine. */
static bool socket_is_local(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return false;
	if (ss.ss_family == AF_UNIX)
		return true;
	if (ss.ss_family == AF_INET)
		return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
	if (ss.ss_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr);
	return false;
}

static void http_free(struct http *h)
{
	if (!h)
		return;
	h->nbound = 0;
	if (h->count)
		h->count->h = NULL;
	if (h->eh)
		evhttp_free(h->eh);      /* closes the listeners and every connection */
	if (h->count)
		count_put(h->count);
	SSL_CTX_free(h->ssl);
	free(h);
}

/* A TLS handshake of the API failed (a fatal alert sent or received):
 * said with the peer and the reason, at most every 10 s (with how many
 * were not said). */
static void tls_info(const SSL *ssl, int where, int ret)
{
	static double said;
	static unsigned long quiet;
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	char peer[CMON_ADDRSTR_MAX] = "?";
	long v;
	double now;

	if (!(where & SSL_CB_ALERT) || (ret >> 8) != SSL3_AL_FATAL)
		return;
	now = mono_now();
	if (said && now - said < 10.0) {
		quiet++;
		return;
	}
	if (getpeername(SSL_get_fd(ssl), (struct sockaddr *)&ss, &len) == 0)
		cmon_sockaddr_format((struct sockaddr *)&ss, len, peer, sizeof peer);
	v = SSL_get_verify_result(ssl);
	cmon_warn("http: TLS handshake with %s failed: %s alert \"%s\"%s%s (%lu more not said)",
		  peer, (where & SSL_CB_READ) ? "it sent the" : "we sent the",
		  SSL_alert_desc_string_long(ret), v != X509_V_OK ? ": " : "",
		  v != X509_V_OK ? X509_verify_cert_error_string(v) : "", quiet);
	said = now;
	quiet = 0;
}

/* The bearer token from `path`: its first line, trimmed; at least 16
 * characters, so that it is not guessed. 0, or -EINVAL with a message. */
static int read_token(const char *path, char *out, size_t size, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f) {
		snprintf(err, errlen, "http: cannot read the token file %.200s: %s", path,
			 strerror(errno));
		return -EINVAL;
	}
	if (!fgets(out, (int)size, f))
		out[0] = '\0';
	fclose(f);
	n = strcspn(out, "\r\n");
	out[n] = '\0';
	while (n && (out[n - 1] == ' ' || out[n - 1] == '\t'))
		out[--n] = '\0';
	for (size_t i = 0; i < n; i++)
		if (out[i] <= ' ' || out[i] > '~' || strchr(";,\"\\", out[i])) {
			snprintf(err, errlen, "http: the token in %.200s has a character a header or "
				 "cookie cannot carry (position %zu; use letters, digits and -._~+/=)",
				 path, i + 1);
			return -EINVAL;
		}
	if (n < 16) {
		snprintf(err, errlen, "http: the token in %.200s is %s (at least 16 characters, "
			 "e.g. openssl rand -hex 32)", path, n ? "too short" : "missing");
		return -EINVAL;
	}
	return 0;
}

/* What http_open serves: the address, the token file and the TLS settings
 * of the command line and the configuration. */
struct http_plan {
	const char *text;                 /* the address as given */
	const char *tokfile;              /* the token file, or "" / NULL */
	const struct cmon_tls_opts *topts; /* -http-tls-*, else the registry link's -tls-* */
	bool tls;                         /* serve over TLS */
	struct cmon_addr a;               /* the address parsed */
};

/* Fill `p` and refuse what must not be served (the checks made before
 * listening, which -check makes too): 1, 0 when HTTP is off, or -EINVAL
 * with a message. */
static int http_plan(const struct tmon *tm, struct http_plan *p, char *err, size_t errlen)
{
	p->text = tm->opt.http ? tm->opt.http : rc_text(tm->rc, NULL, RC_HTTP);
	p->tokfile = tm->opt.http_token_file ? tm->opt.http_token_file
					     : rc_text(tm->rc, NULL, RC_HTTP_TOKEN_FILE);
	/* the API's own certificate (-http-tls-*), else the registry link's */
	p->topts = cmon_tls_enabled(&tm->opt.http_tls) ? &tm->opt.http_tls : &tm->opt.tls;
	p->tls = cmon_tls_enabled(p->topts);
	if (!p->text || !*p->text)
		return 0;
	if (cmon_addr_parse(p->text, HTTP_DEFAULT_PORT, &p->a) < 0) {
		snprintf(err, errlen, "http: '%.200s' is not an address (HOST:PORT, [V6]:PORT or "
			 "unix:PATH)", p->text);
		return -EINVAL;
	}
	if (!p->tls && !cmon_addr_is_local(&p->a)) {
		snprintf(err, errlen, "http: refusing to serve plain HTTP on %.200s, which is not a "
			 "loopback address: configure TLS (-http-tls-cert, -http-tls-key, and "
			 "-http-tls-ca for client certificates) or listen on 127.0.0.1", p->text);
		return -EINVAL;
	}
	if (p->tls && !p->topts->ca && !(p->tokfile && *p->tokfile) && !cmon_addr_is_local(&p->a)) {
		snprintf(err, errlen, "http: refusing to serve %.200s, which is not a loopback "
			 "address, to anyone: require client certificates (-http-tls-ca) or a "
			 "bearer token (-http-token-file)", p->text);
		return -EINVAL;
	}
	return 1;
}

int http_check(const struct tmon *tm, char *err, size_t errlen)
{
	struct http_plan p;
	char token[HTTP_TOKEN_MAX + 1];
	SSL_CTX *ssl;
	int r = http_plan(tm, &p, err, errlen);

	if (r <= 0)
		return r;
	if (p.tokfile && *p.tokfile && read_token(p.tokfile, token, sizeof token, err, errlen) < 0)
		return -EINVAL;
	if (p.tls) {
		ssl = cmon_tls_server_ctx(p.topts, err, errlen);
		if (!ssl)
			return -EINVAL;
		SSL_CTX_free(ssl);
	}
	return 0;
}

int http_open(struct tmon *tm, char *err, size_t errlen)
{
	struct http_plan p;
	const char *text, *tokfile;
	const struct cmon_tls_opts *topts;
	bool tls;
	int fds[HTTP_LISTEN_MAX];
	struct cmon_addr a;
	struct http *h;
	size_t n = 0;
	int rc;

	rc = http_plan(tm, &p, err, errlen);
	if (rc <= 0)
		return rc;
	text = p.text;
	tokfile = p.tokfile;
	topts = p.topts;
	tls = p.tls;
	a = p.a;
	h = calloc(1, sizeof *h);
	if (!h) {
		snprintf(err, errlen, "http: out of memory");
		return -ENOMEM;
	}
	h->tm = tm;
	h->count = calloc(1, sizeof *h->count);
	if (!h->count) {
		free(h);
		snprintf(err, errlen, "http: out of memory");
		return -ENOMEM;
	}
	h->count->refs = 1;
	h->count->h = h;
	TAILQ_INIT(&h->count->list);
	if (tokfile && *tokfile && read_token(tokfile, h->token, sizeof h->token, err, errlen) < 0) {
		rc = -EINVAL;
		goto out_free;
	}
	if (tls) {
		h->ssl = cmon_tls_server_ctx(topts, err, errlen);
		if (!h->ssl) {
			rc = -EINVAL;
			goto out_free;
		}
		SSL_CTX_set_info_callback(h->ssl, tls_info);
	}
	h->eh = evhttp_new(tm->base);
	if (!h->eh) {
		snprintf(err, errlen, "http: out of memory");
		rc = -ENOMEM;
		goto out_free;
	}
	evhttp_set_max_headers_size(h->eh, HTTP_HEADERS_MAX);
	evhttp_set_max_body_size(h->eh, HTTP_BODY_MAX);
	evhttp_set_timeout(h->eh, HTTP_TIMEOUT_S);
	/* every method reaches on_request, which answers 405 with a JSON body */
	evhttp_set_allowed_methods(h->eh, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
				   EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
				   EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_gencb(h->eh, on_request, h);
	evhttp_set_bevcb(h->eh, conn_new, h);
	rc = cmon_listen(&a, HTTP_BACKLOG, fds, HTTP_LISTEN_MAX, &n, err, errlen);
	if (rc < 0)
		goto out_free;
	for (size_t i = 0; i < n; i++) {
		if (!tls && !socket_is_local(fds[i])) {
			snprintf(err, errlen, "http: %.200s resolves to an address that is not "
				 "loopback: refusing plain HTTP there (configure TLS)", text);
			rc = -EINVAL;
		} else if (rc == 0) {
			h->bound[h->nbound] = evhttp_accept_socket_with_handle(h->eh, fds[i]);
			if (h->bound[h->nbound]) {
				h->nbound++;
				continue;
			}
			snprintf(err, errlen, "http: cannot serve on %.200s", text);
			rc = -ENOMEM;
		}
		close(fds[i]);
	}
	if (rc < 0)
		goto out_free;
	if (a.kind == CMON_ADDR_TCP)
		a.port = cmon_socket_port(evhttp_bound_socket_get_fd(h->bound[0]));
	cmon_addr_format(&a, h->addr, sizeof h->addr);
	h->webdir = dash_webdir(tm->opt.web);
	if (!h->webdir)
		cmon_warn("http: no dashboard: %s holds no index.html", tm->opt.web ? tm->opt.web :
			  "the installed web directory");
	tm->http = h;
	cmon_notice("http: serving %s on %s (dashboard /%s%s, API /api/v1/, /metrics, /healthz)%s",
		    h->ssl ? "HTTPS" : "HTTP", h->addr, h->webdir ? " from " : "",
		    h->webdir ? h->webdir : "", h->token[0] ? "; a bearer token is required" : "");
	return 0;
out_free:
	http_free(h);
	return rc;
}

void http_close(struct tmon *tm)
{
	http_free(tm->http);
	tm->http = NULL;
}

const char *http_address(const struct tmon *tm)
{
	return tm->http ? tm->http->addr : NULL;
}

const char *http_scheme(const struct tmon *tm)
{
	return tm->http && tm->http->ssl ? "https" : "http";
}

size_t http_connections(const struct tmon *tm)
{
	return tm->http ? tm->http->count->conns : 0;
}

uint64_t http_closed(const struct tmon *tm)
{
	return tm->http ? tm->http->count->closed : 0;
}
