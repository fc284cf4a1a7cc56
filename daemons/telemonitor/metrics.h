/* /metrics: the service in the Prometheus text exposition format 0.0.4
 * (docs/http.md lists every metric). Per instance (labels prog, machine,
 * pid, instance_id, class): records, lost records, gap markers, log bytes,
 * tool restarts, failures by assertion, and the numbers of the latest
 * report of each assertion as gauges labelled by metric name (a mapping
 * gives one series per key, labelled `key`; a mapping of counts by
 * integral key, a PSpec histogram, is also a Prometheus histogram,
 * cmon_report_distribution[_seconds]). Service gauges: instances by
 * state, store health and backlog, mail queue, registry link, uptime,
 * build info. Names start with cmon_, counters end in _total.
 *
 * Bounded: at most METRICS_INSTANCES_MAX instances (the running ones
 * first, then the most recently ended) and METRICS_REPORT_SERIES_MAX
 * report series; what is left out is counted in
 * cmon_metrics_instances_omitted and cmon_metrics_series_omitted. */
#ifndef TELEMON_METRICS_H
#define TELEMON_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include <event2/buffer.h>

#include "telemonitor.h"

/* Limits. */
#define METRICS_INSTANCES_MAX 1000        /* instances in one exposition */
#define METRICS_REPORT_SERIES_MAX 20000   /* report metric series in one exposition */

/* The Content-Type of the exposition. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* What the HTTP server that serves /metrics says of itself (given down
 * by http.c: metrics.c is on a floor below it). */
struct metrics_http {
	size_t conns;                 /* connections open now */
	uint64_t closed;              /* connections it closed (slow, or the idlest) */
};

/* Append the exposition to `out`, with the server's counters `http`. 0,
 * or a negative errno with a message. */
int metrics_write(struct tmon *tm, const struct metrics_http *http, struct evbuffer *out,
		  char *err, size_t errlen);

#endif
