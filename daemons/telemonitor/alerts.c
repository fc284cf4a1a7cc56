/* Alertmanager as a receiver (see alerts.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <curl/curl.h>

#include "alerts.h"
#include "cmon/backoff.h"
#include "cmon/log.h"
#include "failures.h"
#include "outbox.h"
#include "rcfile.h"
#include "store.h"
#include "text.h"

/* One POST: a JSON array of alerts to an Alertmanager's /api/v2/alerts;
 * the payload of an item of the outbox (its id: the alert_outbox row, 0
 * for a refresh, not kept). */
struct post {
	char *url;                    /* the endpoint */
	char *body;                   /* the alerts */
};

/* One GET beside the POSTs (alerts_get()), on its own easy handle. */
struct get {
	LIST_ENTRY(get) link;         /* in alerts.gets */
	CURL *easy;                   /* its transfer */
	alerts_get_cb cb;             /* told once it has ended */
	void *arg;                    /* ...with this */
	struct sbuf body;             /* the answer so far */
	bool too_big;                 /* the answer passed ALERTS_GET_MAX bytes */
	char error[CURL_ERROR_SIZE];  /* libcurl's message */
};
LIST_HEAD(get_list, get);

/* The Alertmanager side of the service. */
struct alerts {
	struct tmon *tm;              /* the service */
	CURLM *multi;                 /* libcurl's multi handle, on our loop */
	CURL *easy;                   /* the POST in flight (one at a time) */
	struct curl_slist *headers;   /* Content-Type: application/json */
	struct event *curl_timer;     /* libcurl's timeout */
	struct event *sweep;          /* ended instances, refreshes */
	struct outbox *outbox;        /* the POSTs, oldest first (the head may be in flight) */
	const struct post *inflight;  /* the head, while it is being sent */
	struct get_list gets;         /* GETs in flight (alerts_get()) */
	double last_refresh;          /* when live alerts were last sent again */
	char error[CURL_ERROR_SIZE];  /* libcurl's message for the last attempt */
};

static void post_free(void *arg)
{
	struct post *p = arg;

	if (!p)
		return;
	free(p->url);
	free(p->body);
	free(p);
}

/* base URL -> base/api/v2/alerts (heap; NULL on ENOMEM). */
static char *endpoint(const char *base)
{
	size_t n = strlen(base);
	char *s;

	while (n && base[n - 1] == '/')
		n--;
	if (asprintf(&s, "%.*s/api/v2/alerts", (int)n, base) < 0)
		return NULL;
	return s;
}

/* Queue a POST (url and body copied); `keep`: as a row of the outbox. */
static void enqueue(struct alerts *a, const char *url, const char *body, bool keep, double now)
{
	struct post *p = calloc(1, sizeof *p);

	if (!p || !(p->url = strdup(url)) || !(p->body = strdup(body))) {
		post_free(p);
		cmon_warn("alertmanager: out of memory; an alert is not sent");
		return;
	}
	uint64_t id = 0;

	if (keep && store_alert_add(a->tm->store, url, body, now, &id) < 0)
		id = 0;                       /* not kept: send it all the same */
	if (outbox_add(a->outbox, id, now, p, true) < 0)
		cmon_warn("alertmanager: out of memory; an alert is not sent");
}

/* --- libcurl on the loop ------------------------------------------------------ */

/* The POST in flight has ended. */
static void finished(struct alerts *a, CURLcode rc)
{
	const struct post *p = a->inflight;
	char err[300];
	long http = 0;

	curl_easy_getinfo(a->easy, CURLINFO_RESPONSE_CODE, &http);
	curl_multi_remove_handle(a->multi, a->easy);
	a->inflight = NULL;
	if (!p)
		return;
	if (rc == CURLE_OK && http >= 200 && http < 300) {
		if (outbox_down(a->outbox))
			cmon_notice("alertmanager: %s accepts alerts again", p->url);
		outbox_done(a->outbox, OUTBOX_SENT, NULL);
	} else if (rc == CURLE_OK && http >= 400 && http < 500) {
		cmon_err("alertmanager: %s refused an alert (HTTP %ld); it is dropped", p->url, http);
		snprintf(err, sizeof err, "%s: HTTP %ld", p->url, http);
		outbox_done(a->outbox, OUTBOX_DROP, err);
	} else {
		size_t n = outbox_queued(a->outbox);
		if (rc != CURLE_OK)
			snprintf(err, sizeof err, "%s: %s", p->url,
				 *a->error ? a->error : curl_easy_strerror(rc));
		else
			snprintf(err, sizeof err, "%s: HTTP %ld", p->url, http);
		if (!outbox_down(a->outbox))
			cmon_warn("alertmanager: %s; %zu alert POST%s waiting, retrying with backoff",
				  err, n, n == 1 ? "" : "s");
		outbox_done(a->outbox, OUTBOX_RETRY, err);  /* it stays at the head */
	}
}

static void get_free(struct alerts *a, struct get *g)
{
	LIST_REMOVE(g, link);
	curl_multi_remove_handle(a->multi, g->easy);
	curl_easy_cleanup(g->easy);
	sb_free(&g->body);
	free(g);
}

/* A GET has ended: tell its owner, then forget it. */
static void get_finished(struct alerts *a, CURL *easy, CURLcode rc)
{
	struct get *g;
	long http = 0;
	const char *err = NULL;

	LIST_FOREACH(g, &a->gets, link)
		if (g->easy == easy)
			break;
	if (!g)
		return;
	curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &http);
	if (g->too_big)
		err = "the answer is too large";
	else if (g->body.oom)
		err = "out of memory";
	else if (rc != CURLE_OK)
		err = *g->error ? g->error : curl_easy_strerror(rc);
	if (err)
		http = 0;
	g->cb(g->arg, http, err, err ? NULL : g->body.s ? g->body.s : "", err ? 0 : g->body.len);
	get_free(a, g);
}

static void check_done(struct alerts *a)
{
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(a->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		if (m->easy_handle == a->easy)
			finished(a, m->data.result);
		else
			get_finished(a, m->easy_handle, m->data.result);
	}
}

static void on_socket(evutil_socket_t fd, short what, void *arg)
{
	struct alerts *a = arg;
	int running, flags = (what & EV_READ ? CURL_CSELECT_IN : 0) |
			     (what & EV_WRITE ? CURL_CSELECT_OUT : 0);

	curl_multi_socket_action(a->multi, fd, flags, &running);
	check_done(a);
}

static void on_curl_timer(evutil_socket_t fd, short what, void *arg)
{
	struct alerts *a = arg;
	int running;

	curl_multi_socket_action(a->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_done(a);
}

/* CURLMOPT_SOCKETFUNCTION: watch (or stop watching) a socket for libcurl. */
static int socket_cb(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct alerts *a = userp;
	struct event *ev = socketp;
	short flags = EV_PERSIST | (what & CURL_POLL_IN ? EV_READ : 0) |
		      (what & CURL_POLL_OUT ? EV_WRITE : 0);

	(void)e;
	if (what == CURL_POLL_REMOVE) {
		if (ev)
			event_free(ev);
		curl_multi_assign(a->multi, s, NULL);
		return 0;
	}
	if (ev) {
		event_del(ev);
		event_assign(ev, a->tm->base, s, flags, on_socket, a);
	} else {
		ev = event_new(a->tm->base, s, flags, on_socket, a);
		if (!ev)
			return -1;
		curl_multi_assign(a->multi, s, ev);
	}
	event_add(ev, NULL);
	return 0;
}

/* CURLMOPT_TIMERFUNCTION: libcurl wants to be called after `ms`. */
static int timer_cb(CURLM *m, long ms, void *userp)
{
	struct alerts *a = userp;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	(void)m;
	if (ms < 0)
		evtimer_del(a->curl_timer);
	else
		evtimer_add(a->curl_timer, &tv);
	return 0;
}

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

/* CURLOPT_WRITEFUNCTION of a GET: keep at most ALERTS_GET_MAX bytes. */
static size_t get_body(char *p, size_t size, size_t n, void *arg)
{
	struct get *g = arg;

	if (g->body.len + size * n > ALERTS_GET_MAX) {
		g->too_big = true;
		return 0;                     /* libcurl ends the transfer */
	}
	sb_add(&g->body, p, size * n);
	return size * n;
}

int alerts_get(struct tmon *tm, const char *url, alerts_get_cb cb, void *arg)
{
	struct alerts *a = tm->alerts;
	struct get *g;

	if (!a)
		return -EIO;
	if (!(g = calloc(1, sizeof *g)) || !(g->easy = curl_easy_init())) {
		free(g);
		return -ENOMEM;
	}
	g->cb = cb;
	g->arg = arg;
	curl_easy_setopt(g->easy, CURLOPT_URL, url);
	curl_easy_setopt(g->easy, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(g->easy, CURLOPT_TIMEOUT, ALERTS_TIMEOUT_S);
	curl_easy_setopt(g->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(g->easy, CURLOPT_ERRORBUFFER, g->error);
	curl_easy_setopt(g->easy, CURLOPT_WRITEFUNCTION, get_body);
	curl_easy_setopt(g->easy, CURLOPT_WRITEDATA, g);
	curl_easy_setopt(g->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	LIST_INSERT_HEAD(&a->gets, g, link);
	if (curl_multi_add_handle(a->multi, g->easy) != CURLM_OK) {
		LIST_REMOVE(g, link);
		curl_easy_cleanup(g->easy);
		free(g);
		return -EIO;
	}
	return 0;
}

void alerts_get_cancel(struct tmon *tm, void *arg)
{
	struct alerts *a = tm->alerts;
	struct get *g, *next;

	if (!a)
		return;
	for (g = LIST_FIRST(&a->gets); g; g = next) {
		next = LIST_NEXT(g, link);
		if (g->arg == arg)
			get_free(a, g);
	}
}

/* The outbox's send(): start POST `it` (the head). */
static void post_send(void *arg, const struct outbox_item *it)
{
	struct alerts *a = arg;
	const struct post *p = it->payload;

	curl_easy_reset(a->easy);
	curl_easy_setopt(a->easy, CURLOPT_URL, p->url);
	curl_easy_setopt(a->easy, CURLOPT_POSTFIELDS, p->body);
	curl_easy_setopt(a->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(p->body));
	curl_easy_setopt(a->easy, CURLOPT_HTTPHEADER, a->headers);
	curl_easy_setopt(a->easy, CURLOPT_TIMEOUT, ALERTS_TIMEOUT_S);
	curl_easy_setopt(a->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(a->easy, CURLOPT_ERRORBUFFER, a->error);
	curl_easy_setopt(a->easy, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(a->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	a->error[0] = '\0';
	a->inflight = p;
	if (curl_multi_add_handle(a->multi, a->easy) != CURLM_OK) {
		a->inflight = NULL;
		outbox_abandon(a->outbox);
		cmon_err("alertmanager: cannot start a POST");
	}
}

/* The outbox's forget(): the POST of row `id` was accepted or dropped. */
static void post_forget(void *arg, uint64_t id)
{
	struct alerts *a = arg;

	store_alert_done(a->tm->store, id);
}

/* Alertmanager as a transport of the outbox. */
static const struct outbox_ops post_ops = {
	.send = post_send, .forget = post_forget, .release = post_free,
};

/* --- alerts ------------------------------------------------------------------- */

/* A batch of alerts for one POST: "[a,b,...]" per URL. */
struct batch {
	struct alerts *a;             /* the owner */
	bool keep;                    /* the POSTs go through the outbox */
	double now;                   /* when */
	char *url;                    /* the endpoint of the alerts in `b` */
	struct sbuf b;                /* the array so far */
	size_t n;                     /* alerts in it */
};

static void batch_flush(struct batch *t)
{
	if (t->n) {
		sb_add(&t->b, "]", 1);
		if (!t->b.oom)
			enqueue(t->a, t->url, t->b.s, t->keep, t->now);
	}
	sb_free(&t->b);
	free(t->url);
	t->url = NULL;
	t->n = 0;
}

/* Add alert object `alert` for `url`; `ends`: as resolved at that time. */
static void batch_add(struct batch *t, const char *url, const char *alert, double ends)
{
	size_t len = strlen(alert);
	char when[40];

	if (!url || !alert || len < 2 || alert[len - 1] != '}')
		return;
	if (t->url && strcmp(t->url, url))
		batch_flush(t);
	if (!t->url && !(t->url = strdup(url)))
		return;
	sb_add(&t->b, t->n ? "," : "[", 1);
	if (ends > 0) {
		sb_add(&t->b, alert, len - 1);
		sb_printf(&t->b, ",\"endsAt\":\"%s\"}", iso_time(ends, when, sizeof when));
	} else {
		sb_add(&t->b, alert, len);
	}
	if (++t->n >= ALERTS_BATCH)
		batch_flush(t);
}

/* store_alerts_ended(): resolve an open alert of an ended instance. */
static void resolve_one(void *arg, uint64_t failure_id, const char *url, const char *alert,
			double ended)
{
	struct batch *t = arg;

	batch_add(t, url, alert, ended);
	store_alert_close(t->a->tm->store, failure_id);
}

/* store_alerts_live(): send a live instance's alert again, with the end
 * its last failure gave it (`ends`; Alertmanager resolves it then). */
static void refresh_one(void *arg, uint64_t failure_id, const char *url, const char *alert,
			double ends)
{
	(void)failure_id;
	batch_add(arg, url, alert, ends);
}

static void sweep(evutil_socket_t fd, short what, void *arg)
{
	struct alerts *a = arg;
	struct batch t = { .a = a, .keep = true, .now = tm_now() };

	if (store_degraded(a->tm->store))
		return;
	store_alerts_ended(a->tm->store, t.now, ALERTS_BATCH, resolve_one, &t);
	batch_flush(&t);
	if (t.now - a->last_refresh >= ALERTS_REFRESH_S && !outbox_down(a->outbox)) {
		a->last_refresh = t.now;
		t.keep = false;
		store_alerts_live(a->tm->store, ALERTS_QUEUE_MAX / 10, refresh_one, &t);
		batch_flush(&t);
	}
}

/* A failure (failures.h) of a class with `alertmanager` (its base URL):
 * queue its alert. */
static void alerts_failure(struct tmon *tm, const struct failure_event *ev)
{
	struct alerts *a = tm->alerts;
	const char *url = ev->alertmanager, *assertion = ev->f.assertion, *spec = ev->f.spec;
	const char *metrics_json = ev->f.metrics;
	const struct tm_instance *in = ev->in;
	uint32_t class_id = ev->class_id;
	uint64_t failure_id = ev->id;
	int line = ev->f.line;
	double now = ev->f.time;
	double ends = now + (ev->resolve_after > 0 ? ev->resolve_after : RC_RESOLVE_AFTER_DEFAULT);
	struct sbuf b = { 0 };
	char name[64], when[40], *ep, *metrics, *alert;

	if (!a || !url || !*url)
		return;
	if (!assertion)
		snprintf(name, sizeof name, "line %d", line);
	ep = endpoint(url);
	metrics = render_metrics(metrics_json);
	sb_printf(&b, "{\"labels\":{\"alertname\":");
	sb_json_str(&b, assertion ? assertion : name);
	sb_printf(&b, ",\"assert\":");
	sb_json_str(&b, assertion ? assertion : name);
	sb_printf(&b, ",\"prog\":");
	sb_json_str(&b, in->prog);
	sb_printf(&b, ",\"machine\":");
	sb_json_str(&b, in->machine);
	sb_printf(&b, ",\"pid\":\"%" PRId64 "\",\"class\":\"%" PRIu32 "\"},\"annotations\":"
		      "{\"summary\":", in->pid, class_id);
	{
		char summary[400];
		snprintf(summary, sizeof summary, "%s on %s pid %" PRId64 ": \"%s\" failed",
			 in->prog, in->machine, in->pid, assertion ? assertion : name);
		sb_json_str(&b, summary);
	}
	sb_printf(&b, ",\"metrics\":");
	sb_json_str(&b, metrics ? metrics : "");
	sb_printf(&b, ",\"spec\":");
	{
		char where[PATH_MAX + 32], cmd[sizeof tm->ctl_hint + 40];
		snprintf(where, sizeof where, "%s:%d", spec ? spec : "?", line);
		snprintf(cmd, sizeof cmd, "%s window %" PRIu64, tm->ctl_hint, failure_id);
		sb_json_str(&b, where);
		sb_printf(&b, ",\"window\":");
		sb_json_str(&b, cmd);
	}
	sb_printf(&b, ",\"failure\":\"%" PRIu64 "\"},\"startsAt\":\"%s\"", failure_id,
		  iso_time(now, when, sizeof when));
	if (tm->http_addr) {
		/* the window over the telemonitor's own HTTP API: Alertmanager's
		 * link back to the source of the alert */
		char url[300];
		snprintf(url, sizeof url, "%s://%s/api/v1/failures/%" PRIu64 "/window",
			 tm->http_scheme, tm->http_addr, failure_id);
		sb_printf(&b, ",\"generatorURL\":");
		sb_json_str(&b, url);
	}
	sb_add(&b, "}", 1);
	alert = b.oom ? NULL : sb_take(&b);
	sb_free(&b);
	if (!ep || !alert) {
		cmon_warn("alertmanager: out of memory; failure %" PRIu64 " is not alerted",
			  failure_id);
	} else {
		/* endsAt: Alertmanager resolves it then unless a later failure
		 * of the pair moves it, even if we are gone by then */
		char *body;
		if (asprintf(&body, "[%.*s,\"endsAt\":\"%s\"}]", (int)strlen(alert) - 1, alert,
			     iso_time(ends, when, sizeof when)) >= 0) {
			enqueue(a, ep, body, true, now);
			free(body);
		}
		store_alert_open(tm->store, failure_id, in->id, ep, alert, assertion ? assertion : name,
				 ends);
	}
	free(alert);
	free(metrics);
	free(ep);
}

/* store_alert_load(): a POST not accepted before the last stop. */
static void restore(void *arg, uint64_t id, double queued, const char *url, const char *body)
{
	struct alerts *a = arg;
	struct post *p = calloc(1, sizeof *p);

	(void)queued;
	if (!p || !url || !body || !(p->url = strdup(url)) || !(p->body = strdup(body))) {
		post_free(p);
		return;
	}
	outbox_add(a->outbox, id, queued, p, false);
}

/* Take over the alerts telemonitor `from` queued or left open (after
 * taking over one of its instances; store_adopt_alerts()). */
static void alerts_adopt(struct tmon *tm, const char *from)
{
	struct alerts *a = tm->alerts;

	if (!a)
		return;
	store_adopt_alerts(tm->store, from, restore, a);
	outbox_kick(a->outbox);
}

const struct failure_subscriber alerts_failures = {
	.name = "alertmanager", .on_failure = alerts_failure, .on_adopt = alerts_adopt,
};

void alerts_start(struct tmon *tm)
{
	struct alerts *a = calloc(1, sizeof *a);
	struct timeval tv = { ALERTS_SWEEP_MS / 1000, (ALERTS_SWEEP_MS % 1000) * 1000 };
	const struct cmon_backoff backoff = { .min_ms = (unsigned)(ALERTS_RETRY_MIN_S * 1000),
					      .max_ms = (unsigned)(ALERTS_RETRY_MAX_S * 1000),
					      .jitter_pct = 20 };
	size_t n;

	if (!a)
		goto fail;
	a->tm = tm;
	LIST_INIT(&a->gets);
	a->multi = curl_multi_init();
	a->easy = curl_easy_init();
	a->headers = curl_slist_append(NULL, "Content-Type: application/json");
	a->curl_timer = evtimer_new(tm->base, on_curl_timer, a);
	a->outbox = outbox_new(tm->base, &post_ops, a, ALERTS_QUEUE_MAX, &backoff);
	a->sweep = event_new(tm->base, -1, EV_PERSIST, sweep, a);
	if (!a->multi || !a->easy || !a->headers || !a->curl_timer || !a->outbox || !a->sweep)
		goto fail;
	curl_multi_setopt(a->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(a->multi, CURLMOPT_SOCKETDATA, a);
	curl_multi_setopt(a->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(a->multi, CURLMOPT_TIMERDATA, a);
	tm->alerts = a;
	a->last_refresh = tm_now();
	store_alert_load(tm->store, restore, a);
	if ((n = outbox_queued(a->outbox)))
		cmon_notice("alertmanager: %zu alert POST%s to send from before the restart", n,
			    n == 1 ? "" : "s");
	event_add(a->sweep, &tv);
	outbox_kick(a->outbox);
	return;
fail:
	cmon_err("alertmanager: out of memory; no alerts are sent");
	tm->alerts = NULL;
	if (a) {
		tm->alerts = a;
		alerts_stop(tm);
	}
}

void alerts_stop(struct tmon *tm)
{
	struct alerts *a = tm->alerts;
	size_t n;

	if (!a)
		return;
	tm->alerts = NULL;
	if (a->inflight) {
		curl_multi_remove_handle(a->multi, a->easy);
		outbox_abandon(a->outbox);
	}
	while (!LIST_EMPTY(&a->gets))
		get_free(a, LIST_FIRST(&a->gets));
	if ((n = outbox_queued(a->outbox)))
		cmon_notice("alertmanager: %zu alert POST%s not accepted yet, kept for the next start",
			    n, n == 1 ? "" : "s");
	outbox_free(a->outbox);
	if (a->easy)
		curl_easy_cleanup(a->easy);
	if (a->multi)
		curl_multi_cleanup(a->multi);
	curl_slist_free_all(a->headers);
	if (a->curl_timer)
		event_free(a->curl_timer);
	if (a->sweep)
		event_free(a->sweep);
	free(a);
}

const char *alerts_status(struct tmon *tm, char *buf, size_t size)
{
	struct alerts *a = tm->alerts;
	struct outbox_stats st;

	outbox_stats(a ? a->outbox : NULL, &st);
	if (!st.sent && !st.queued && !st.failed && !st.dropped) {
		snprintf(buf, size, "no alerts sent yet");
		return buf;
	}
	snprintf(buf, size, "%" PRIu64 " sent, %zu queued, %" PRIu64 " failed attempts, %" PRIu64
		 " dropped%s%s", st.sent, st.queued, st.failed, st.dropped,
		 st.last_error[0] ? "; last error: " : "", st.last_error);
	return buf;
}

void alerts_stats(const struct tmon *tm, struct alerts_stats *out)
{
	const struct alerts *a = tm->alerts;
	struct outbox_stats st;

	memset(out, 0, sizeof *out);
	if (!a)
		return;
	outbox_stats(a->outbox, &st);
	out->sent = st.sent;
	out->failed = st.failed;
	out->dropped = st.dropped;
	out->queued = st.queued;
	snprintf(out->last_error, sizeof out->last_error, "%s", st.last_error);
}
