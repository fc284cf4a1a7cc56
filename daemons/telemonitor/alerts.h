/* Alertmanager as a receiver beside mail: a failure of a class with
 * `alertmanager` (telemonrc(5)) is POSTed to URL/api/v2/alerts as an alert
 * with the labels alertname and assert (the assertion's label, or "line
 * N"), prog, machine, pid and class (its id), the annotations summary,
 * metrics, spec (FILE:LINE), window (the telemonctl command for its log
 * window) and failure (its id), and startsAt. When its instance ends the
 * alert is POSTed again with endsAt (resolved); while the instance runs
 * its alerts are sent again every ALERTS_REFRESH_S, as Alertmanager
 * expects of a client (else it resolves them after its resolve_timeout).
 *
 * Nothing blocks the loop: libcurl's multi interface runs on the loop's
 * sockets and timers. POSTs go one at a time, in order; every POST for a
 * failure or a resolution is first a row of the store's alert_outbox,
 * written in the failure's batch and deleted once an Alertmanager has
 * accepted it (2xx), so a restart sends what was not accepted (at least
 * once). A refused POST (5xx, no answer) is retried with backoff from
 * ALERTS_RETRY_MIN_S doubling to ALERTS_RETRY_MAX_S; one an Alertmanager
 * rejects as malformed (4xx) is logged and dropped. */
#ifndef TELEMON_ALERTS_H
#define TELEMON_ALERTS_H

#include <stdint.h>

#include "telemonitor.h"

#define ALERTS_QUEUE_MAX 10000          /* POSTs held in memory; the oldest is dropped */
#define ALERTS_TIMEOUT_S 10L            /* one POST, connection included */
#define ALERTS_RETRY_MIN_S 1.0          /* first retry after a failed POST */
#define ALERTS_RETRY_MAX_S 300.0        /* longest wait between retries */
#define ALERTS_SWEEP_MS 1000            /* look for ended instances this often */
#define ALERTS_REFRESH_S 60.0           /* send live instances' alerts again */
#define ALERTS_BATCH 100                /* alerts resolved or refreshed per POST */
#define ALERTS_URL_MAX 1024             /* bytes in an Alertmanager URL */
#define ALERTS_GET_MAX (4 << 20)        /* bytes read of a GET's answer */

/* Send what was not accepted before the last stop and start watching for
 * ended instances. Needs the store and the loop. */
void alerts_start(struct tmon *tm);

/* Stop sending; what is not accepted stays in the store. Accepts a tm without. */
void alerts_stop(struct tmon *tm);

/* Alertmanager as a receiver of failures (failures.h; main.c subscribes
 * it): a failure of a class with `alertmanager` is queued as an alert;
 * the alerts a telemonitor whose instance we took over queued or left
 * open are taken over (store_adopt_alerts()). */
extern const struct failure_subscriber alerts_failures;

/* How a GET ended: `http` the status (0 when there was no answer, then
 * `err` says why), `body` the answer's `len` bytes (NULL with `err`). */
typedef void (*alerts_get_cb)(void *arg, long http, const char *err, const char *body,
			      size_t len);

/* GET `url` on the loop, beside the POSTs and never waiting
 * (ALERTS_TIMEOUT_S, at most ALERTS_GET_MAX bytes of answer): `cb` is
 * called once, later. 0, or -ENOMEM / -EIO (then `cb` is never called).
 * For the Alertmanager's silences (amsilences.c). */
int alerts_get(struct tmon *tm, const char *url, alerts_get_cb cb, void *arg);

/* Drop the GETs in flight for `arg` without calling their callbacks. */
void alerts_get_cancel(struct tmon *tm, void *arg);

/* Counters as one line, for status output. */
const char *alerts_status(struct tmon *tm, char *buf, size_t size);

/* Delivery counters since start (status --json, /metrics). */
struct alerts_stats {
	uint64_t sent;               /* POSTs Alertmanager accepted */
	uint64_t failed;             /* attempts that failed */
	uint64_t dropped;            /* alerts dropped (queue full) */
	size_t queued;               /* alerts waiting to be sent */
	char last_error[300];        /* the latest failure, "" if none */
};

/* Fill `out` (all zero when no alert was ever queued). */
void alerts_stats(const struct tmon *tm, struct alerts_stats *out);

#endif
