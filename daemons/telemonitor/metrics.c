/* The Prometheus exposition (see metrics.h). Samples are gathered per
 * metric family (the format wants a family's lines together), then each
 * family is written with its HELP and TYPE lines. Per-instance numbers
 * come from the store (the live counters are saved just before), so ended
 * instances keep their final counts. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "alerts.h"
#include "metrics.h"
#include "report.h"
#include "sketch.h"
#include "store.h"
#include "store_read.h"
#include "text.h"

/* Every family: X(enum name, metric name, type, help). */
#define METRIC_FAMILIES(X)                                                                   \
	X(M_BUILD, "cmon_build_info", "gauge", "Always 1; the version as a label.")          \
	X(M_START, "cmon_start_time_seconds", "gauge", "When the service started (Unix time).") \
	X(M_UPTIME, "cmon_uptime_seconds", "gauge", "Seconds since the service started.")    \
	X(M_REG, "cmon_registry_up", "gauge", "1 while the registry link is up.")            \
	X(M_DEGRADED, "cmon_store_degraded", "gauge",                                        \
	  "1 while the store cannot take writes and holds them in memory.")                  \
	X(M_PENDING, "cmon_store_pending_writes", "gauge", "Writes held in memory.")         \
	X(M_PENDING_F, "cmon_store_pending_failures", "gauge",                               \
	  "Failures among the writes held in memory.")                                       \
	X(M_DROPPED, "cmon_store_dropped_writes_total", "counter",                           \
	  "Writes dropped by the store's backlog bounds since start.")                       \
	X(M_DROPPED_F, "cmon_store_dropped_failures_total", "counter",                       \
	  "Failures among the dropped writes since start.")                                  \
	X(M_OUTAGES, "cmon_store_outages_total", "counter",                                  \
	  "Times the store became degraded since start.")                                    \
	X(M_CLASSES, "cmon_classes", "gauge", "Configured classes.")                         \
	X(M_INSTANCES, "cmon_instances", "gauge",                                            \
	  "Instances in the store by state (ended and gone ones included).")                 \
	X(M_SESSIONS, "cmon_sessions", "gauge", "Instances monitored now.")                  \
	X(M_REPORTED, "cmon_failures_reported_total", "counter",                             \
	  "Failures reported by the tools since start (stored or held).")                    \
	X(M_MAILQ, "cmon_mail_queue_length", "gauge", "Mails composed and not sent yet.")    \
	X(M_MAIL_SENT, "cmon_mail_sent_total", "counter",                                    \
	  "Mails accepted by the relay since start.")                                        \
	X(M_MAIL_DROPPED, "cmon_mail_dropped_total", "counter",                              \
	  "Mails dropped since start.")                                                      \
	X(M_MAIL_FAILED, "cmon_mail_failed_total", "counter",                                \
	  "Attempts to hand a mail to the relay that failed, since start.")                  \
	X(M_ALERTQ, "cmon_alerts_queue_length", "gauge",                                     \
	  "Alerts waiting to be sent to Alertmanager.")                                      \
	X(M_ALERTS_SENT, "cmon_alerts_sent_total", "counter",                                \
	  "Alerts Alertmanager accepted since start.")                                       \
	X(M_ALERTS_FAILED, "cmon_alerts_failed_total", "counter",                            \
	  "Attempts to send alerts to Alertmanager that failed, since start.")               \
	X(M_ALERTS_DROPPED, "cmon_alerts_dropped_total", "counter",                          \
	  "Alerts dropped since start.")                                                     \
	X(M_CPU, "cmon_process_cpu_seconds_total", "counter",                                \
	  "Total user and system CPU time spent in seconds.")                                \
	X(M_RSS, "cmon_process_resident_memory_bytes", "gauge",                              \
	  "Resident memory size in bytes.")                                                  \
	X(M_VSZ, "cmon_process_virtual_memory_bytes", "gauge",                               \
	  "Virtual memory size in bytes.")                                                   \
	X(M_FDS, "cmon_process_open_fds", "gauge", "Number of open file descriptors.")       \
	X(M_MAXFDS, "cmon_process_max_fds", "gauge",                                         \
	  "Maximum number of open file descriptors.")                                        \
	X(M_PSTART, "cmon_process_start_time_seconds", "gauge",                              \
	  "Start time of the process since unix epoch in seconds.")                          \
	X(M_HTTP_CONNS, "cmon_http_connections", "gauge", "HTTP connections open.")          \
	X(M_HTTP_CLOSED, "cmon_http_connections_closed_total", "counter",                    \
	  "HTTP connections closed by the server: too slow, or to make room.")               \
	X(M_TLS_EXPIRY, "cmon_tls_cert_expiry_seconds", "gauge",                             \
	  "Seconds until this service's own TLS certificate expires (negative: expired).")  \
	X(M_OMITTED, "cmon_metrics_instances_omitted", "gauge",                              \
	  "Instances left out of this exposition by its bound.")                             \
	X(M_SERIES_OMITTED, "cmon_metrics_series_omitted", "gauge",                          \
	  "Report metric series left out of this exposition by its bound.")                  \
	X(M_STATE, "cmon_instance_state", "gauge", "1 for each instance, its state a label.") \
	X(M_RECORDS, "cmon_records_total", "counter", "Log records received.")               \
	X(M_LOST, "cmon_lost_records_total", "counter",                                      \
	  "Records the transport reported dropped.")                                         \
	X(M_GAPS, "cmon_gaps_total", "counter", "Gap markers received.")                     \
	X(M_BYTES, "cmon_log_bytes_total", "counter", "Log bytes received.")                 \
	X(M_RESTARTS, "cmon_tool_restarts_total", "counter", "Tool restarts after a crash.") \
	X(M_FAILURES, "cmon_failures_total", "counter",                                      \
	  "Failures stored, by assertion (its label, or \"line N\"); reports not counted.")  \
	X(M_REPORTS, "cmon_reports_total", "counter",                                        \
	  "Reports of report assertions (statistics) stored, by assertion.")                 \
	X(M_REPORT, "cmon_report_metric", "gauge",                                           \
	  "A number of the latest report of an assertion, by metric name.")                  \
	X(M_REPORT_S, "cmon_report_metric_seconds", "gauge",                                 \
	  "A duration of the latest report of an assertion, in seconds, by metric name.")    \
	X(M_BUCKET, "cmon_report_mapping", "gauge",                                           \
	  "An entry of a mapping of the latest report of an assertion, by metric and key.")  \
	X(M_HIST, "cmon_report_distribution", "histogram",                                   \
	  "A mapping of counts by integral key (a PSpec histogram) of the latest report of "  \
	  "an assertion, by metric; bounds in the keys' units; no _sum (a bin keeps only a "  \
	  "count).")                                                                         \
	X(M_HIST_S, "cmon_report_distribution_seconds", "histogram",                         \
	  "A PSpec histogram of durations (its name says the keys' unit) of the latest "      \
	  "report of an assertion, by metric; bounds in seconds; no _sum (a bin keeps only "  \
	  "a count).")                                                                       \
	X(M_DURATION, "cmon_interval_duration_seconds", "histogram",                         \
	  "Durations of the intervals that closed, by program, class and interval type.")

enum metric_family {
#define M_ENUM(e, n, t, h) e,
	METRIC_FAMILIES(M_ENUM)
#undef M_ENUM
	M_COUNT
};

static const struct {
	const char *name, *type, *help;
} families[M_COUNT] = {
#define M_ROW(e, n, t, h) [e] = { n, t, h },
	METRIC_FAMILIES(M_ROW)
#undef M_ROW
};

/* An instance in the exposition: its labels, ready to print. */
struct minst {
	int64_t id;                   /* store id */
	char *labels;                 /* prog="..",machine="..",pid="..",instance_id="..",class=".." */
};

/* Samples being gathered. */
struct gather {
	struct metrics_http http;       /* the HTTP server's counters, as given */
	struct evbuffer *fam[M_COUNT]; /* samples per family */
	struct minst *inst;           /* the instances shown, by id ascending */
	size_t ninst;                 /* how many */
	size_t series;                /* report series written */
	size_t series_omitted;        /* ...and left out */
};

/* Append `s` as a label value: backslash, double quote and newline escaped. */
static void esc(struct evbuffer *b, const char *s)
{
	for (; s && *s; s++) {
		if (*s == '\\')
			evbuffer_add(b, "\\\\", 2);
		else if (*s == '"')
			evbuffer_add(b, "\\\"", 2);
		else if (*s == '\n')
			evbuffer_add(b, "\\n", 2);
		else
			evbuffer_add(b, s, 1);
	}
}

/* `prefix` + `name`="`value`" as a NUL-terminated string in `b`. */
static const char *labels_with(struct evbuffer *b, const char *prefix, const char *name,
			       const char *value)
{
	evbuffer_drain(b, evbuffer_get_length(b));
	evbuffer_add_printf(b, "%s,%s=\"", prefix, name);
	esc(b, value);
	evbuffer_add(b, "\"", 2);       /* with the NUL */
	return (const char *)evbuffer_pullup(b, -1);
}

static void value(struct evbuffer *b, double v)
{
	if (isnan(v))
		evbuffer_add_printf(b, " NaN\n");
	else if (isinf(v))
		evbuffer_add_printf(b, " %sInf\n", v > 0 ? "+" : "-");
	else if (v == floor(v) && fabs(v) < 1e15)
		evbuffer_add_printf(b, " %.0f\n", v);
	else
		evbuffer_add_printf(b, " %.17g\n", v);
}

/* One sample: NAME{LABELS} VALUE, `labels` already escaped (may be NULL). */
static void sample(struct gather *g, enum metric_family f, const char *labels, double v)
{
	struct evbuffer *b = g->fam[f];

	evbuffer_add_printf(b, "%s", families[f].name);
	if (labels && *labels)
		evbuffer_add_printf(b, "{%s}", labels);
	value(b, v);
}

static void sample_u64(struct gather *g, enum metric_family f, const char *labels, uint64_t v)
{
	struct evbuffer *b = g->fam[f];

	evbuffer_add_printf(b, "%s", families[f].name);
	if (labels && *labels)
		evbuffer_add_printf(b, "{%s}", labels);
	evbuffer_add_printf(b, " %" PRIu64 "\n", v);
}

/* --- the service ------------------------------------------------------------- */

/* Instances counted by state. */
struct by_state {
	const enum inst_state *states; /* the states shown */
	size_t nstates;                /* how many */
	size_t *count;                 /* instances in each */
};

static int count_state(void *arg, const struct store_state_count *row)
{
	struct by_state *bs = arg;

	for (size_t i = 0; row->state && i < bs->nstates; i++)
		if (!strcmp(inst_state_name(bs->states[i]), row->state))
			bs->count[i] += (size_t)row->count;
	return 0;
}

static void service(struct tmon *tm, struct gather *g)
{
	static const enum inst_state states[] = { IS_LISTED, IS_MONITORING, IS_RETRYING,
						   IS_BUSY, IS_STOPPED, IS_ENDED, IS_GONE };
	size_t by_state[sizeof states / sizeof states[0]] = { 0 };
	struct notify_stats ms;
	struct alerts_stats as;
	struct store_health h;
	struct by_state bs = { .states = states, .nstates = sizeof states / sizeof states[0],
			       .count = by_state };
	char lab[80];

	sample(g, M_BUILD, "version=\"" CMON_VERSION "\"", 1);
	sample(g, M_START, NULL, floor(tm->started));
	sample(g, M_UPTIME, NULL, floor(tm_now() - tm->started));
	sample(g, M_REG, NULL, reg_connected(tm));
	store_health(tm->store, &h);
	sample(g, M_DEGRADED, NULL, h.degraded);
	sample_u64(g, M_PENDING, NULL, h.pending);
	sample_u64(g, M_PENDING_F, NULL, h.pending_failures);
	sample_u64(g, M_DROPPED, NULL, h.dropped);
	sample_u64(g, M_DROPPED_F, NULL, h.dropped_failures);
	sample_u64(g, M_OUTAGES, NULL, h.outages);
	sample_u64(g, M_CLASSES, NULL, tm->nclasses);
	store_instances_by_state(tm->store, count_state, &bs);
	for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
		snprintf(lab, sizeof lab, "state=\"%s\"", inst_state_name(states[i]));
		sample_u64(g, M_INSTANCES, lab, by_state[i]);
	}
	sample_u64(g, M_SESSIONS, NULL, tm->nsessions);
	sample_u64(g, M_REPORTED, NULL, tm->total_failures);
	notify_stats(tm, &ms);
	sample_u64(g, M_MAILQ, NULL, ms.queued);
	sample_u64(g, M_MAIL_SENT, NULL, ms.sent);
	sample_u64(g, M_MAIL_DROPPED, NULL, ms.dropped);
	sample_u64(g, M_MAIL_FAILED, NULL, ms.failed);
	alerts_stats(tm, &as);
	sample_u64(g, M_ALERTQ, NULL, as.queued);
	sample_u64(g, M_ALERTS_SENT, NULL, as.sent);
	sample_u64(g, M_ALERTS_FAILED, NULL, as.failed);
	sample_u64(g, M_ALERTS_DROPPED, NULL, as.dropped);
	sample_u64(g, M_HTTP_CONNS, NULL, g->http.conns);
	sample_u64(g, M_HTTP_CLOSED, NULL, g->http.closed);
	if (tm->tls && tm->opt.tls.cert) {
		double d = cmon_tls_cert_expiry(tm->tls);
		if (d > -1e17)
			sample(g, M_TLS_EXPIRY, "cert=\"registry link\"", floor(d));
	}
}

/* --- the process ------------------------------------------------------------ */

/* The standard process_* metrics of Prometheus's client libraries, from
 * /proc/self (Linux): what is not readable is left out. */
static void process(struct gather *g)
{
	char buf[1024], *p;
	FILE *f;
	long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	unsigned long long utime, stime, start, vsize;
	long long rss;
	struct rlimit rl;
	DIR *d;

	f = fopen("/proc/self/stat", "r");
	if (f) {
		size_t n = fread(buf, 1, sizeof buf - 1, f);
		buf[n] = '\0';
		fclose(f);
		/* after "pid (comm) ": state is field 3; utime 14, stime 15,
		 * starttime 22, vsize 23, rss 24 */
		p = strrchr(buf, ')');
		if (p && tick > 0 && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu "
					    "%*d %*d %*d %*d %*d %*d %llu %llu %lld", &utime, &stime,
					    &start, &vsize, &rss) == 5) {
			sample(g, M_CPU, NULL, (double)(utime + stime) / (double)tick);
			sample(g, M_RSS, NULL, (double)rss * (double)page);
			sample(g, M_VSZ, NULL, (double)vsize);
			f = fopen("/proc/stat", "r");
			while (f && fgets(buf, sizeof buf, f)) {
				unsigned long long btime;
				if (sscanf(buf, "btime %llu", &btime) == 1) {
					sample(g, M_PSTART, NULL, (double)btime + (double)start / (double)tick);
					break;
				}
			}
			if (f)
				fclose(f);
		}
	}
	d = opendir("/proc/self/fd");
	if (d) {
		size_t n = 0;
		for (struct dirent *e; (e = readdir(d));)
			n += e->d_name[0] != '.';
		closedir(d);
		sample_u64(g, M_FDS, NULL, n > 0 ? n - 1 : 0);   /* less the one reading it */
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		sample_u64(g, M_MAXFDS, NULL, (uint64_t)rl.rlim_cur);
}

/* --- instances ------------------------------------------------------------- */

static int by_id(const void *a, const void *b)
{
	int64_t x = ((const struct minst *)a)->id, y = ((const struct minst *)b)->id;
	return x < y ? -1 : x > y;
}

static const struct minst *find_inst(const struct gather *g, int64_t id)
{
	struct minst key = { .id = id };
	return bsearch(&key, g->inst, g->ninst, sizeof key, by_id);
}

/* Labels of one instance, escaped, as a heap string. */
static char *inst_labels(const struct store_instance_row *in)
{
	struct evbuffer *b = evbuffer_new();
	char *s = NULL;
	size_t n;

	if (!b)
		return NULL;
	evbuffer_add_printf(b, "prog=\"");
	esc(b, in->prog);
	evbuffer_add_printf(b, "\",machine=\"");
	esc(b, in->machine);
	evbuffer_add_printf(b, "\",pid=\"%" PRId64 "\",instance_id=\"%" PRIu64 "\",class=\"%"
			    PRIu64 "\"", in->pid, in->id, in->class_id);
	n = evbuffer_get_length(b);
	s = malloc(n + 1);
	if (s) {
		evbuffer_remove(b, s, n);
		s[n] = '\0';
	}
	evbuffer_free(b);
	return s;
}

/* One shown instance: its samples, and its labels kept for its failures. */
static int instance(void *arg, const struct store_instance_row *in)
{
	struct gather *g = arg;
	char *lab, *st;

	if (g->ninst >= METRICS_INSTANCES_MAX)
		return 1;
	lab = inst_labels(in);
	if (!lab)
		return 0;
	g->inst[g->ninst].id = (int64_t)in->id;
	g->inst[g->ninst++].labels = lab;
	sample_u64(g, M_RECORDS, lab, (uint64_t)in->records);
	sample_u64(g, M_LOST, lab, (uint64_t)in->lost);
	sample_u64(g, M_GAPS, lab, (uint64_t)in->gaps);
	sample_u64(g, M_BYTES, lab, (uint64_t)in->bytes);
	sample_u64(g, M_RESTARTS, lab, (uint64_t)in->tool_restarts);
	st = malloc(strlen(lab) + 64);
	if (st) {
		snprintf(st, strlen(lab) + 64, "%s,state=\"%s\"", lab, in->state);
		sample(g, M_STATE, st, 1);
		free(st);
	}
	return 0;
}

static int instances(struct tmon *tm, struct gather *g, char *err, size_t errlen)
{
	int64_t total = 0;

	g->inst = calloc(METRICS_INSTANCES_MAX, sizeof *g->inst);
	if (!g->inst) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (store_metrics_instances(tm->store, METRICS_INSTANCES_MAX, instance, g, err,
				    errlen) < 0 ||
	    store_instances_count(tm->store, &total, err, errlen) < 0)
		return -EIO;
	sample_u64(g, M_OMITTED, NULL, total > (int64_t)g->ninst ? (uint64_t)total - g->ninst : 0);
	return 0;
}

/* --- interval durations --------------------------------------------------------- */

/* The histograms of interval durations, from the checkers' summaries
 * (pcheck --summaries 60, one a minute per interval type and instance):
 * every summary stored is added once, in order of its id, from the first
 * scrape on (so the counters cover the whole store and survive restarts),
 * at most DUR_ROWS_PER_SCRAPE summaries a scrape. A sketch bucket counts
 * in the first bound at or above the value it stands for (within 1%). */
#define DUR_ROWS_PER_SCRAPE 20000
#define DUR_SERIES_MAX 2000         /* (prog, class, type) histograms kept */
static const double dur_le[] = {    /* bucket bounds, seconds: 1, 2.5, 5 a decade */
	1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
	1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100,
};
#define DUR_NLE (sizeof dur_le / sizeof dur_le[0])

struct dur_series {
	char *prog, *type;            /* labels */
	int64_t class_id;
	double bucket[DUR_NLE + 1];   /* counts per bucket (not cumulative); last: above all */
	double sum;                   /* seconds */
};

/* The histograms, kept across scrapes (one telemonitor a process). */
static struct {
	uint64_t after;               /* the last summary added */
	struct dur_series *s;
	size_t n, cap;
	uint64_t dropped;             /* summaries of series past DUR_SERIES_MAX */
} dur;

static struct dur_series *dur_find(const char *prog, int64_t class_id, const char *type)
{
	struct dur_series *d;

	for (size_t i = 0; i < dur.n; i++)
		if (dur.s[i].class_id == class_id && !strcmp(dur.s[i].prog, prog) &&
		    !strcmp(dur.s[i].type, type))
			return &dur.s[i];
	if (dur.n == DUR_SERIES_MAX)
		return NULL;
	if (dur.n == dur.cap) {
		size_t cap = dur.cap ? dur.cap * 2 : 16;
		d = realloc(dur.s, cap * sizeof *d);
		if (!d)
			return NULL;
		dur.s = d;
		dur.cap = cap;
	}
	d = &dur.s[dur.n];
	memset(d, 0, sizeof *d);
	d->prog = strdup(prog);
	d->type = strdup(type);
	d->class_id = class_id;
	if (!d->prog || !d->type) {
		free(d->prog);
		free(d->type);
		return NULL;
	}
	dur.n++;
	return d;
}

/* The bucket of a duration of `v` seconds. */
static size_t dur_bucket(double v)
{
	size_t i = 0;

	while (i < DUR_NLE && v > dur_le[i])
		i++;
	return i;
}

static int dur_add(void *arg, const struct store_summary_row *row)
{
	struct dur_series *d;
	struct sketch sk = { 0 };

	(void)arg;
	dur.after = row->id;
	if (!row->prog || !row->type || row->count <= 0)
		return 0;
	d = dur_find(row->prog, row->class_id, row->type);
	if (!d) {
		dur.dropped++;
		return 0;
	}
	d->sum += row->sum / 1e9;
	if (row->sketch && sketch_add_json(&sk, row->sketch, strlen(row->sketch)) == 0) {
		d->bucket[0] += sk.zero;
		for (size_t i = 0; i < sk.n; i++) {
			double ns = 2 * pow(sk.gamma, sk.b[i].idx) / (sk.gamma + 1);
			d->bucket[sk.b[i].sign < 0 ? 0 : dur_bucket(ns / 1e9)] += sk.b[i].count;
		}
	} else {
		/* no sketch: all of them where their mean falls */
		d->bucket[dur_bucket(row->sum / 1e9 / (double)row->count)] += (double)row->count;
	}
	sketch_free(&sk);
	return 0;
}

static int durations(struct tmon *tm, struct gather *g, char *err, size_t errlen)
{
	struct evbuffer *b = g->fam[M_DURATION], *lab = evbuffer_new();
	const char *name = families[M_DURATION].name;
	char cls[24];
	int rc;

	if (!lab) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = store_summaries_after(tm->store, dur.after, DUR_ROWS_PER_SCRAPE, dur_add, NULL, err,
				   errlen);
	for (size_t i = 0; rc == 0 && i < dur.n; i++) {
		const struct dur_series *d = &dur.s[i];
		double cum = 0;

		evbuffer_drain(lab, evbuffer_get_length(lab));
		evbuffer_add_printf(lab, "prog=\"");
		esc(lab, d->prog);
		snprintf(cls, sizeof cls, "%" PRId64, d->class_id);
		evbuffer_add_printf(lab, "\",class=\"%s\",type=\"", cls);
		esc(lab, d->type);
		evbuffer_add(lab, "\"", 2);  /* with the NUL */
		const char *l = (const char *)evbuffer_pullup(lab, -1);
		for (size_t k = 0; k <= DUR_NLE; k++) {
			cum += d->bucket[k];
			if (k < DUR_NLE)
				evbuffer_add_printf(b, "%s_bucket{%s,le=\"%g\"}", name, l, dur_le[k]);
			else
				evbuffer_add_printf(b, "%s_bucket{%s,le=\"+Inf\"}", name, l);
			value(b, cum);
		}
		evbuffer_add_printf(b, "%s_sum{%s}", name, l);
		value(b, d->sum);
		evbuffer_add_printf(b, "%s_count{%s}", name, l);
		value(b, cum);          /* (= the +Inf bucket, as the format wants) */
	}
	evbuffer_free(lab);
	return rc;
}

/* --- failures and reports ------------------------------------------------------ */

/* Where failure counts and reports are labelled. */
struct labelling {
	struct gather *g;         /* the exposition */
	struct evbuffer *lab;     /* scratch for labels */
};

/* The failure count of one shown instance's assertion. */
static int failure_count(void *arg, const struct store_failure_count *row)
{
	struct labelling *l = arg;
	const struct minst *in = find_inst(l->g, (int64_t)row->instance_id);

	if (in)
		sample_u64(l->g, row->report ? M_REPORTS : M_FAILURES,
			   labels_with(l->lab, in->labels, "assert", row->name), (uint64_t)row->count);
	return 0;
}

static int failures(struct tmon *tm, struct gather *g, char *err, size_t errlen)
{
	struct labelling l = { .g = g, .lab = evbuffer_new() };
	int rc;

	if (!l.lab) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = store_failure_counts(tm->store, METRICS_INSTANCES_MAX, failure_count, &l, err, errlen);
	evbuffer_free(l.lab);
	return rc;
}

/* One report series, or one more left out once the bound is reached. */
static void report_series(struct gather *g, enum metric_family f, const char *labels, double v)
{
	if (g->series >= METRICS_REPORT_SERIES_MAX) {
		g->series_omitted++;
		return;
	}
	g->series++;
	sample(g, f, labels, v);
}

/* Reading one report's metrics into series. */
struct report_reading {
	struct gather *g;         /* the exposition */
	const char *base;         /* the instance's and assertion's labels */
	struct evbuffer *lab;     /* scratch for a metric's labels */
	struct evbuffer *key;     /* scratch for a mapping entry's labels */
	const char *metric;       /* in a mapping: its metric's labels (in lab) */
};

/* One entry of a mapping (a histogram): a series for its key. */
static int report_entry(void *arg, const struct report_metric *e)
{
	struct report_reading *r = arg;

	if (e->has_value)
		report_series(r->g, M_BUCKET, labels_with(r->key, r->metric, "key", e->name),
			      e->value);
	return 0;
}

/* --- mapping histograms ----------------------------------------------------------
 *
 * A PSpec histogram is a mapping of counts by integral key, built by
 * {+ x : T : KEY -> 1} (docs/pspec.md, "Mappings"). The key is a bin: the
 * index of a bin, trunc(x.time / 1 ms) (bins one key unit wide), or its
 * lower bound, trunc(x.time / 10 ms) * 10 (Lectern's msTime: bins ten key
 * units wide); in both the keys are multiples of the bin width w, and a
 * bin holds the values of [k, k + w). The width is not in the report, so
 * it is taken as the greatest common divisor of the (nonzero) keys: a
 * multiple of w, so k + gcd is a true upper bound whatever w is, and w
 * itself as soon as two neighbouring bins are filled. When every key is 0
 * no width can be told: that bin has only +Inf above it.
 *
 * Each filled bin gives the bucket at its lower bound (the count of the
 * bins below: every value below k) and at k + gcd (the count so far), so
 * histogram_quantile finds a quantile inside its bin even across empty
 * ones. Prometheus's le includes its bound and a bin includes its lower
 * one, so a value exactly on a bound counts in the bucket above; with
 * trunc, bin 0 holds (-w, w) (PSpec's trunc rounds toward zero). No _sum:
 * a bin keeps only how many values fell in it, not what they were.
 *
 * A mapping is taken as a histogram when it has an entry, every key is an
 * integer of at most 2^53 and every value a count (a number, integral, 0
 * or more): a mapping of means, triples or mappings is not one. Its keys
 * are durations when the metric's name says their unit (keys_unit). */

/* One filled bin. */
struct bin {
	int64_t key;                  /* its key (lower bound or index) */
	double count;                 /* values in it */
};

/* The bins of one mapping being read. */
struct bins {
	struct bin *b;                /* in the order written */
	size_t n, cap;                /* how many; room */
	bool not_counts;              /* an entry that is not a count by an integral key */
};

/* A key's unit as a fraction of a second, mul / div, both integers: keys
 * in ms are 1/1000 s. div 0: the keys are not known to be durations. */
struct key_unit {
	int64_t mul, div;
};

/* Does `name` end, in any case, in a duration word (time, duration,
 * latency, elapsed, wait, or their plurals)? */
static bool ends_in_duration(const char *name)
{
	static const char *const word[] = { "time", "times", "duration", "durations", "latency",
					    "latencies", "elapsed", "wait", "waits" };
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof word / sizeof word[0]; i++) {
		size_t k = strlen(word[i]);
		if (n >= k && !strcasecmp(name + n - k, word[i]))
			return true;
	}
	return false;
}

/* The unit of the keys of a mapping called `name`, by the rule of the
 * numbers (metric_is_duration: "readTime", "latency", "read_ns" are
 * nanoseconds, log ticks) or a unit its name starts with before a capital
 * or '_', followed by a duration word ("msTimes", "us_latency", "secWait").
 * A plural name without a unit is not read as nanoseconds: a histogram's
 * name says what it counts, not the unit of its keys (Lectern's lgmTimes
 * is keyed by milliseconds, pageTimes by seconds). */
static struct key_unit keys_unit(const char *name)
{
	static const struct {
		const char *prefix;
		struct key_unit u;
	} prefixed[] = {
		{ "ns", { 1, 1000000000 } }, { "us", { 1, 1000000 } }, { "ms", { 1, 1000 } },
		{ "secs", { 1, 1 } }, { "sec", { 1, 1 } }, { "s", { 1, 1 } }, { "min", { 60, 1 } },
	};

	for (size_t i = 0; i < sizeof prefixed / sizeof prefixed[0]; i++) {
		size_t k = strlen(prefixed[i].prefix);
		if (!strncmp(name, prefixed[i].prefix, k) &&
		    ((name[k] >= 'A' && name[k] <= 'Z') || name[k] == '_'))
			return ends_in_duration(name + k) ? prefixed[i].u : (struct key_unit){ 0, 0 };
	}
	if (metric_is_duration(name))
		return (struct key_unit){ 1, 1000000000 };
	return (struct key_unit){ 0, 0 };
}

/* One entry of a mapping: a bin, or the sign that this is no histogram. */
static int bin_add(void *arg, const struct report_metric *e)
{
	struct bins *bs = arg;
	char *end;
	double k;

	errno = 0;
	k = strtod(e->name, &end);
	if (e->kind != REPORT_METRIC_NUMBER || !(e->value >= 0) || e->value != floor(e->value) ||
	    isinf(e->value) || end == e->name || *end || errno || k != floor(k) ||
	    fabs(k) > 9007199254740992.0) {
		bs->not_counts = true;
		return 1;
	}
	if (bs->n == METRICS_REPORT_SERIES_MAX) {        /* could never be shown whole */
		bs->not_counts = true;
		return 1;
	}
	if (bs->n == bs->cap) {
		size_t cap = bs->cap ? bs->cap * 2 : 32;
		struct bin *b = realloc(bs->b, cap * sizeof *b);
		if (!b) {
			bs->not_counts = true;
			return 1;
		}
		bs->b = b;
		bs->cap = cap;
	}
	bs->b[bs->n++] = (struct bin){ .key = (int64_t)k, .count = e->value };
	return 0;
}

static int by_key(const void *a, const void *b)
{
	int64_t x = ((const struct bin *)a)->key, y = ((const struct bin *)b)->key;
	return x < y ? -1 : x > y;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* A bound of `key` key units in `u` as the le label's value: the shortest
 * decimal that reads back as the same double ("0.003", not
 * "0.0030000000000000001"); an integer as one. */
static void le_text(char *out, size_t size, int64_t key, struct key_unit u)
{
	double v;

	if (!u.div) {
		snprintf(out, size, "%" PRId64, key);
		return;
	}
	v = (double)key * (double)u.mul / (double)u.div;   /* (a power of ten: rounded once) */
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(out, size, "%.*g", prec, v);
		if (strtod(out, NULL) == v)
			return;
	}
}

/* One bucket line: NAME_bucket{LABELS,le="LE"} CUM. */
static void bucket(struct evbuffer *b, const char *name, const char *labels, const char *le,
		   double cum)
{
	evbuffer_add_printf(b, "%s_bucket{%s,le=\"%s\"}", name, labels, le);
	value(b, cum);
}

/* The buckets of sorted bins `bs` in `u` into `b` (NULL: only count them);
 * the number of series. */
static size_t histogram_lines(struct evbuffer *b, const char *name, const char *labels,
			      const struct bins *bs, struct key_unit u)
{
	uint64_t w = 0;
	double cum = 0;
	size_t lines = 0;
	bool have_last = false;
	int64_t last = 0;
	char le[40];

	for (size_t i = 0; i < bs->n; i++)
		w = gcd(w, bs->b[i].key < 0 ? 0 - (uint64_t)bs->b[i].key : (uint64_t)bs->b[i].key);
	for (size_t i = 0; i < bs->n; i++) {
		const struct bin *x = &bs->b[i];
		if (!have_last || last != x->key) {         /* its lower bound: all below it */
			if (b) {
				le_text(le, sizeof le, x->key, u);
				bucket(b, name, labels, le, cum);
			}
			lines++;
		}
		cum += x->count;
		have_last = false;
		if (w) {                                    /* its upper bound */
			last = x->key + (int64_t)w;
			have_last = true;
			if (b) {
				le_text(le, sizeof le, last, u);
				bucket(b, name, labels, le, cum);
			}
			lines++;
		}
	}
	if (b) {
		bucket(b, name, labels, "+Inf", cum);
		evbuffer_add_printf(b, "%s_count{%s}", name, labels);
		value(b, cum);              /* (= the +Inf bucket, as the format wants) */
	}
	return lines + 2;
}

/* A mapping `m` of a report as a histogram, when it is one; `labels`
 * are its instance's, assertion's and metric's. Shown whole or not at
 * all (then counted in series_omitted). */
static void histogram(struct gather *g, const char *labels, const struct report_metric *m)
{
	struct bins bs = { 0 };
	struct key_unit u = keys_unit(m->name);
	enum metric_family f = u.div ? M_HIST_S : M_HIST;
	size_t lines;

	if (report_metrics_each(m->node, bin_add, &bs) < 0 || bs.not_counts || !bs.n)
		goto out_free;
	qsort(bs.b, bs.n, sizeof *bs.b, by_key);
	for (size_t i = 1; i < bs.n; i++)
		if (bs.b[i].key == bs.b[i - 1].key)     /* ("1" and "1.0": no bins) */
			goto out_free;
	lines = histogram_lines(NULL, NULL, NULL, &bs, u);
	if (g->series + lines > METRICS_REPORT_SERIES_MAX) {
		g->series_omitted += lines;
		goto out_free;
	}
	g->series += lines;
	histogram_lines(g->fam[f], families[f].name, labels, &bs, u);
out_free:
	free(bs.b);
}

/* One metric: a series for its value, or one for each of a mapping's (and
 * the mapping as a histogram when it is one). */
static int report_metric(void *arg, const struct report_metric *m)
{
	struct report_reading *r = arg;

	r->metric = labels_with(r->lab, r->base, "metric", m->name);
	if (m->has_value && metric_is_duration(m->name))   /* (base units: seconds) */
		report_series(r->g, M_REPORT_S, r->metric, m->value / 1e9);
	else if (m->has_value)
		report_series(r->g, M_REPORT, r->metric, m->value);
	else if (m->kind == REPORT_METRIC_MAPPING) {
		report_metrics_each(m->node, report_entry, r);
		histogram(r->g, r->metric, m);
	}
	return 0;
}

/* The metrics object of one report; `base` are its instance's and
 * assertion's labels. Text that is not a JSON object adds nothing. */
static void report(struct gather *g, const char *base, const char *json)
{
	struct report_reading r = { .g = g, .base = base, .lab = evbuffer_new(),
				    .key = evbuffer_new() };

	if (r.lab && r.key)
		report_metrics_each_text(json, report_metric, &r);
	if (r.lab)
		evbuffer_free(r.lab);
	if (r.key)
		evbuffer_free(r.key);
}

/* The newest reports being exposed. */
struct reporting {
	struct gather *g;         /* the exposition */
	struct evbuffer *base;    /* scratch for an instance's and assertion's labels */
};

/* The newest report of one shown instance's assertion. */
static int newest_report(void *arg, const struct store_report_row *row)
{
	struct reporting *rp = arg;
	const struct minst *in = find_inst(rp->g, (int64_t)row->instance_id);

	if (!in || !row->metrics || row->metrics[0] != '{')
		return 0;
	report(rp->g, labels_with(rp->base, in->labels, "assert", row->name), row->metrics);
	return 0;
}

static int reports(struct tmon *tm, struct gather *g, char *err, size_t errlen)
{
	struct reporting rp = { .g = g, .base = evbuffer_new() };
	int rc;

	if (!rp.base) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = store_newest_reports(tm->store, METRICS_INSTANCES_MAX, newest_report, &rp, err,
				  errlen);
	if (rc == 0)
		sample_u64(g, M_SERIES_OMITTED, NULL, g->series_omitted);
	evbuffer_free(rp.base);
	return rc;
}

/* --- the exposition ------------------------------------------------------------ */

int metrics_write(struct tmon *tm, const struct metrics_http *http, struct evbuffer *out,
		  char *err, size_t errlen)
{
	struct gather g = { .http = *http };
	int rc = -ENOMEM;

	for (int f = 0; f < M_COUNT; f++)
		if (!(g.fam[f] = evbuffer_new())) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	service(tm, &g);
	process(&g);
	rc = instances(tm, &g, err, errlen);
	if (rc == 0)
		rc = failures(tm, &g, err, errlen);
	if (rc == 0)
		rc = reports(tm, &g, err, errlen);
	if (rc == 0)
		rc = durations(tm, &g, err, errlen);
	if (rc < 0)
		goto out;
	for (int f = 0; f < M_COUNT; f++) {
		evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", families[f].name,
				    families[f].help, families[f].name, families[f].type);
		evbuffer_add_buffer(out, g.fam[f]);
	}
out:
	for (int f = 0; f < M_COUNT; f++)
		if (g.fam[f])
			evbuffer_free(g.fam[f]);
	for (size_t i = 0; i < g.ninst; i++)
		free(g.inst[i].labels);
	free(g.inst);
	return rc;
}
