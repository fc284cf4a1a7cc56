/* telemonctl's commands, answered from the store and the live state. Each
 * listing has a text form (an aligned table) and a JSON form (an array of
 * objects, or one object). Requests arrive already split into words and
 * KEY=VALUE options by telemonctl; everything is checked again here. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmon/log.h"
#include "alerts.h"
#include "amsilences.h"
#include "cmdtab.h"
#include "control.h"
#include "hygiene.h"
#include "session.h"
#include "store.h"
#include "store_read.h"
#include "text.h"
#include "typescript.h"

/* Value of option KEY among argv[from..], or NULL. */
static const char *opt(const struct ctl_request *r, int from, const char *key)
{
	size_t n = strlen(key);

	for (int i = from; i < r->argc; i++)
		if (!strncmp(r->argv[i], key, n) && r->argv[i][n] == '=')
			return r->argv[i] + n + 1;
	return NULL;
}

/* Check that argv[from..] are options among `keys` (CK_* of cmdtab.h). */
static int only_opts(const struct ctl_request *r, int from, unsigned keys, char *err,
		     size_t errlen)
{
	for (int i = from; i < r->argc; i++) {
		const char *eq = strchr(r->argv[i], '=');

		if (!eq || !(keys & cmd_key_bit(r->argv[i], (size_t)(eq - r->argv[i])))) {
			snprintf(err, errlen, "unexpected argument '%.80s'", r->argv[i]);
			return -EINVAL;
		}
	}
	return 0;
}

static int parse_id(const char *s, uint64_t *out, const char *what, char *err, size_t errlen)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-' || *s == '+') {
		snprintf(err, errlen, "%s: expected a number", what);
		return -EINVAL;
	}
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v == 0) {
		snprintf(err, errlen, "%s: '%.40s' is not a valid id", what, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int parse_limit(const struct ctl_request *r, int from, int *out, char *err, size_t errlen)
{
	const char *v = opt(r, from, "limit");
	char *end;
	long n;

	*out = CTL_DEFAULT_LIMIT;
	if (!v)
		return 0;
	n = strtol(v, &end, 10);
	if (*end || n < 1 || n > CTL_LIST_MAX) {
		snprintf(err, errlen, "--limit: expected 1 to %d", CTL_LIST_MAX);
		return -EINVAL;
	}
	*out = (int)n;
	return 0;
}

static void emit(struct evbuffer *out, struct sbuf *b)
{
	if (b->s)
		evbuffer_add(out, b->s, b->len);
	sb_free(b);
}

/* A string from the store, "" for NULL. */
static const char *str(const char *s)
{
	return s ? s : "";
}

/* A wall-clock time for a cell: ISO, or "-" if unknown (`has` false). */
static char *fmt_time(bool has, double t, char *buf, size_t size)
{
	if (!has) {
		snprintf(buf, size, "-");
		return buf;
	}
	return iso_time(t, buf, size);
}

/* A wall-clock time already formatted as `iso`: "\"ISO\"", or null if unknown. */
static void json_time(struct sbuf *b, bool has, const char *iso)
{
	if (!has)
		sb_printf(b, "null");
	else
		sb_printf(b, "\"%s\"", iso);
}

/* A failure's FLAGS cell: "report,silenced,acked" or "-". */
static void failure_flags(const struct store_failure_row *f, char *buf, size_t size)
{
	snprintf(buf, size, "%s%s%s%s%s",
		 f->result && !strcmp(f->result, "inconclusive") ? ",inconclusive" : "",
		 f->kind && !strcmp(f->kind, "overdue") ? ",overdue" : "",
		 f->report ? ",report" : "",
		 f->has_silence ? ",silenced" : "",
		 f->has_acked ? ",acked" : "");
	if (*buf)
		memmove(buf, buf + 1, strlen(buf));
	else
		snprintf(buf, size, "-");
}

/* A listing being written: rows go to `b` as JSON, or to `t` as text. */
struct listing {
	struct sbuf *b;           /* the answer */
	struct table *t;          /* the text table (when not json) */
	bool json;                /* JSON, not text */
	bool first;               /* no JSON row written yet */
	int rows;                 /* rows listed */
};

/* Free a table that will not be printed. */
static void table_discard(struct table *t)
{
	struct sbuf scratch = { 0 };

	table_print(t, &scratch, 0);
	sb_free(&scratch);
}

/* Start a listing: "[" for JSON, else a table with columns `head`. */
static void listing_begin(struct listing *l, const char *const *head)
{
	if (l->json)
		sb_add(l->b, "[", 1);
	else
		table_init(l->t, head);
}

/* Finish a listing whose rows were read with status `rc`: close it, say
 * `none` when it has no rows (text), and send it; -EIO if the read failed. */
static int listing_end(struct listing *l, int rc, struct evbuffer *out, int width, const char *none)
{
	if (rc < 0) {
		if (!l->json)
			table_discard(l->t);
		sb_free(l->b);
		return -EIO;
	}
	if (l->json) {
		sb_add(l->b, "]\n", 2);
	} else {
		table_print(l->t, l->b, width);
		if (!l->rows)
			sb_printf(l->b, "%s\n", none);
	}
	emit(out, l->b);
	return 0;
}

/* --- status ------------------------------------------------------------------ */

/* The store's health as the JSON object "store". */
static void store_json(struct sbuf *b, const struct store_health *h)
{
	char when[40];

	sb_printf(b, "{\"engine\":\"%s\",\"node\":", h->engine);
	if (h->node)
		sb_json_str(b, h->node);
	else
		sb_printf(b, "null");
	sb_printf(b, ",\"state\":\"%s\",\"reason\":", h->degraded ? "degraded" : "ok");
	if (h->degraded)
		sb_json_str(b, h->reason);
	else
		sb_printf(b, "null");
	sb_printf(b, ",\"detail\":");
	if (h->degraded)
		sb_json_str(b, h->detail);
	else
		sb_printf(b, "null");
	sb_printf(b, ",\"since\":");
	if (h->degraded)
		sb_printf(b, "\"%s\"", iso_time(h->since, when, sizeof when));
	else
		sb_printf(b, "null");
	sb_printf(b, ",\"pending\":%zu,\"pending_failures\":%zu,\"pending_bytes\":%zu,"
		      "\"limit\":%zu,\"dropped\":%" PRIu64 ",\"dropped_failures\":%" PRIu64
		      ",\"dropped_mail\":%" PRIu64 ",\"rejected\":%" PRIu64 ",\"outages\":%" PRIu64
		      ",\"retries\":%u}",
		  h->pending, h->pending_failures, h->pending_bytes, h->limit, h->dropped,
		  h->dropped_failures, h->dropped_mail, h->rejected, h->outages, h->attempts);
}

/* The store's health as the text of the "store:" line (and the next). */
static void store_text(struct sbuf *b, const struct store_health *h)
{
	char when[40];

	if (!h->degraded) {
		sb_printf(b, "ok");
		if (h->outages)
			sb_printf(b, " (%" PRIu64 " outage%s since start; %" PRIu64 " writes dropped, %"
				  PRIu64 " of them failures)", h->outages, h->outages == 1 ? "" : "s",
				  h->dropped, h->dropped_failures);
		sb_printf(b, "\n");
		return;
	}
	sb_printf(b, "DEGRADED: %s since %s; %zu failure%s pending (%zu writes, %zu bytes; "
		      "at most %zu failures held), %" PRIu64 " writes dropped (%" PRIu64
		      " failures); retry %u\n"
		      "                  %s\n",
		  h->reason, iso_time(h->since, when, sizeof when), h->pending_failures,
		  h->pending_failures == 1 ? "" : "s", h->pending, h->pending_bytes, h->limit,
		  h->dropped, h->dropped_failures, h->attempts, h->detail);
}

/* amsil_each_url(): one URL of a JSON array. */
struct url_list {
	struct sbuf *b;               /* the array so far */
	size_t n;                     /* URLs in it */
};

static void url_item(void *arg, const char *url)
{
	struct url_list *ul = arg;

	if (ul->n++)
		sb_add(ul->b, ",", 1);
	sb_json_str(ul->b, url);
}

/* Delivery counters (mail, Alertmanager) as a status --json object. */
static void delivery_json(struct sbuf *b, uint64_t sent, size_t queued, uint64_t failed,
			  uint64_t dropped, const char *last_error)
{
	sb_printf(b, "{\"sent\":%" PRIu64 ",\"queued\":%zu,\"failed_attempts\":%" PRIu64
		      ",\"dropped\":%" PRIu64 ",\"last_error\":", sent, queued, failed, dropped);
	if (*last_error)
		sb_json_str(b, last_error);
	else
		sb_printf(b, "null");
	sb_add(b, "}", 1);
}

static int cmd_status(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out,
		      char *err, size_t errlen)
{
	struct sbuf b = { 0 };
	struct store_health h;
	struct notify_stats ms;
	struct alerts_stats as;
	char since[40], mail[400], keep[200], am[600];

	(void)err;
	(void)errlen;
	iso_time(tm->started, since, sizeof since);
	notify_status(tm, mail, sizeof mail);
	hygiene_status(tm, keep, sizeof keep);
	alerts_status(tm, am, sizeof am);
	store_health(tm->store, &h);
	if (r->json) {
		sb_printf(&b, "{\"version\":\"%s\",\"pid\":%ld,\"since\":\"%s\",\"state_dir\":",
			  CMON_VERSION, (long)getpid(), since);
		sb_json_str(&b, tm->state_dir);
		sb_printf(&b, ",\"config\":");
		sb_json_str(&b, tm->rc->path);
		sb_printf(&b, ",\"classes_rc\":");
		sb_json_str(&b, tm->classes_rc);
		sb_printf(&b, ",\"classes\":%zu,\"registry\":", tm->nclasses);
		sb_json_str(&b, tm->opt.regmachine);
		sb_printf(&b, ",\"registry_state\":\"%s\",\"instances\":%zu,\"monitored\":%zu,"
			      "\"failures_since_start\":%" PRIu64 ",\"schema\":%d,\"mail\":",
			  reg_status(tm), tm->ninstances, tm->nsessions, tm->total_failures,
			  store_version(tm->store));
		notify_stats(tm, &ms);
		delivery_json(&b, ms.sent, ms.queued, ms.failed, ms.dropped, ms.last_error);
		sb_printf(&b, ",\"checker\":");
		sb_json_str(&b, tm->pcheck);
		sb_printf(&b, ",\"alertmanager\":");
		alerts_stats(tm, &as);
		delivery_json(&b, as.sent, as.queued, as.failed, as.dropped, as.last_error);
		/* the Alertmanagers whose silences apply (telemonctl silence
		 * manages silences there) */
		sb_printf(&b, ",\"alertmanagers\":[");
		{
			struct url_list ul = { .b = &b };
			amsil_each_url(tm, url_item, &ul);
		}
		sb_printf(&b, "],\"alertmanager_silences\":%zu", amsil_count(tm));
		sb_printf(&b, ",\"retention\":");
		if (*rc_text(tm->rc, NULL, RC_RETENTION))
			sb_json_str(&b, rc_text(tm->rc, NULL, RC_RETENTION));
		else
			sb_printf(&b, "null");
		sb_printf(&b, ",\"retention_seconds\":%.0f,\"retention_pruned\":%" PRIu64
			      ",\"retention_status\":", hygiene_retention(tm), hygiene_pruned(tm));
		sb_json_str(&b, keep);
		sb_printf(&b, ",\"http\":");
		sb_json_str(&b, tm->http_addr);
		sb_printf(&b, ",\"store\":");
		store_json(&b, &h);
		sb_printf(&b, "}\n");
	} else {
		sb_printf(&b, "telemonitor %s, pid %ld, running since %s\n"
			      "state directory:  %s\n"
			      "configuration:    %s (%zu classes)\n"
			      "live classes:     %s%s\n"
			      "registry:         %s (%s)\n"
			      "instances:        %zu known, %zu monitored\n"
			      "failures:         %" PRIu64 " %s since start\n"
			      "mail:             %s\n"
			      "checker:          %s\n"
			      "alertmanager:     %s\n"
			      "retention:        %s\n"
			      "http:             %s\n"
			      "store engine:     %s%s%s\n"
			      "store:            ",
			  CMON_VERSION, (long)getpid(), since, tm->state_dir,
			  tm->rc->path ? tm->rc->path : "(none)", tm->nclasses, tm->classes_rc,
			  access(tm->classes_rc, F_OK) == 0 ? "" : " (none yet)", tm->opt.regmachine,
			  reg_status(tm), tm->ninstances, tm->nsessions, tm->total_failures,
			  h.degraded ? "reported (some held in memory, see store)" : "stored", mail,
			  tm->pcheck, am, keep, tm->http_addr ? tm->http_addr : "off", h.engine,
			  h.node ? ", shared, this node " : "", h.node ? h.node : "");
		store_text(&b, &h);
	}
	emit(out, &b);
	return 0;
}

/* --- classes ----------------------------------------------------------------- */

static int cmd_classes(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out,
		       char *err, size_t errlen)
{
	static const char *const head[] = { "ID", "PROG", "MACHINE", "PID", "AUTO", "BLOCK",
					    "WINDOW", "MAIL", "TOOL / SPEC", NULL };
	struct sbuf b = { 0 };
	struct tm_class *c;
	struct table t;
	bool first = true;

	(void)err;
	(void)errlen;
	if (r->json) {
		sb_add(&b, "[", 1);
		TAILQ_FOREACH(c, &tm->classes, link) {
			sb_printf(&b, "%s{\"id\":%u,\"prog\":", first ? "" : ",", c->id);
			sb_json_str(&b, c->prog);
			sb_printf(&b, ",\"machine\":");
			sb_json_str(&b, c->machine);
			sb_printf(&b, ",\"pid\":");
			sb_json_str(&b, c->pid);
			sb_printf(&b, ",\"tool\":");
			sb_json_str(&b, c->tool);
			sb_printf(&b, ",\"spec\":");
			sb_json_str(&b, c->spec);
			sb_printf(&b, ",\"mail\":");
			sb_json_str(&b, c->mail);
			sb_printf(&b, ",\"window\":");
			sb_json_str(&b, c->window_text);
			sb_printf(&b, ",\"mailgroup\":%g,\"block\":%s,\"auto\":%s,"
				      "\"notify_reports\":%s,\"allow_unbounded\":%s,\"alertmanager\":",
				  c->mailgroup, c->block ? "true" : "false", c->autostart ? "true" : "false",
				  c->notify_reports ? "true" : "false", c->allow_unbounded ? "true" : "false");
			sb_json_str(&b, c->alertmanager);
			sb_add(&b, "}", 1);
			first = false;
		}
		sb_add(&b, "]\n", 2);
		emit(out, &b);
		return 0;
	}
	table_init(&t, head);
	TAILQ_FOREACH(c, &tm->classes, link) {
		char id[16], what[PATH_MAX + 300];
		snprintf(id, sizeof id, "%u", c->id);
		snprintf(what, sizeof what, "%s%s%s%s%s", c->spec ? "spec " : "",
			 c->spec ? c->spec : "", c->spec && c->tool ? "; " : "",
			 c->tool ? "tool " : "", c->tool ? c->tool : "");
		const char *row[] = { id, *c->prog ? c->prog : "*", *c->machine ? c->machine : "*",
				      *c->pid ? c->pid : "*", c->autostart ? "yes" : "no",
				      c->block ? "yes" : "no", c->window_text,
				      c->mail ? c->mail : "-", what };
		table_row(&t, row);
	}
	table_print(&t, &b, r->width);
	if (!tm->nclasses)
		sb_printf(&b, "(no classes)\n" CTL_HINT "Add one with: telemonctl class add "
			  "prog=NAME spec=FILE\n");
	emit(out, &b);
	return 0;
}

static int cmd_class(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out,
		     char *err, size_t errlen)
{
	const char *sub = r->argc > 1 ? r->argv[1] : "";
	struct sbuf b = { 0 };
	uint64_t id = 0;
	uint32_t nid;
	int rc;

	if (!strcmp(sub, "add")) {
		if (r->argc < 3) {
			snprintf(err, errlen, "class add: give PROPERTY=VALUE pairs, e.g. prog=fsread "
				 "spec=/path/fsread.pspec");
			return -EINVAL;
		}
		rc = classes_add(tm, r->argv + 2, (size_t)(r->argc - 2), &nid, err, errlen);
		if (rc < 0)
			return rc;
		id = nid;
		reg_subscribe(tm, classes_find(tm, nid));
	} else if (!strcmp(sub, "set") || !strcmp(sub, "rm")) {
		if (r->argc < 3 || parse_id(r->argv[2], &id, "class", err, errlen) < 0) {
			if (r->argc < 3)
				snprintf(err, errlen, "class %s: which class? (an id from telemonctl "
					 "classes)", sub);
			return -EINVAL;
		}
		if (id > UINT32_MAX) {
			snprintf(err, errlen, "no class %" PRIu64, id);
			return -ENOENT;
		}
		if (!strcmp(sub, "rm")) {
			if (r->argc > 3) {
				snprintf(err, errlen, "class rm: unexpected argument '%.80s'", r->argv[3]);
				return -EINVAL;
			}
			rc = classes_rm(tm, (uint32_t)id, err, errlen);
			if (rc == 0) {
				reg_unsubscribe(tm, (uint32_t)id);
				instances_class_removed(tm, (uint32_t)id);
			}
		} else {
			if (r->argc < 4) {
				snprintf(err, errlen, "class set: give PROPERTY=VALUE pairs");
				return -EINVAL;
			}
			rc = classes_set(tm, (uint32_t)id, r->argv + 3, (size_t)(r->argc - 3), err,
					 errlen);
			/* the registry learns the new patterns and flags, and lists
			 * the running instances again (an instance of a class now
			 * `auto` gets monitored) */
			if (rc == 0) {
				reg_unsubscribe(tm, (uint32_t)id);
				reg_subscribe(tm, classes_find(tm, (uint32_t)id));
			}
		}
		if (rc < 0)
			return rc;
	} else {
		snprintf(err, errlen, "class: expected add, set or rm");
		return -EINVAL;
	}
	if (r->json)
		sb_printf(&b, "{\"id\":%" PRIu64 ",\"result\":\"%s\"}\n", id,
			  !strcmp(sub, "add") ? "added" : !strcmp(sub, "rm") ? "removed" : "changed");
	else
		sb_printf(&b, "class %" PRIu64 " %s; saved to %s\n", id,
			  !strcmp(sub, "add") ? "added" : !strcmp(sub, "rm") ? "removed" : "changed",
			  tm->classes_rc);
	emit(out, &b);
	return 0;
}

/* --- instances --------------------------------------------------------------- */

/* One row of `telemonctl instances`. */
static int instance_row(void *arg, const struct store_instance_row *in)
{
	struct listing *l = arg;
	struct sbuf *b = l->b;
	char seen[40], ended[40];

	fmt_time(in->has_first_seen, in->first_seen, seen, sizeof seen);
	fmt_time(in->has_ended, in->ended, ended, sizeof ended);
	l->rows++;
	if (l->json) {
		sb_printf(b, "%s{\"id\":%" PRIu64 ",\"class\":%" PRIu64 ",\"prog\":",
			  l->first ? "" : ",", in->id, in->class_id);
		sb_json_str(b, str(in->prog));
		sb_printf(b, ",\"machine\":");
		sb_json_str(b, str(in->machine));
		sb_printf(b, ",\"pid\":%" PRId64 ",\"state\":\"%s\",\"monitor\":%s,\"records\":%" PRId64
			      ",\"bytes\":%" PRId64 ",\"lost\":%" PRId64 ",\"gaps\":%" PRId64
			      ",\"skipped\":%" PRId64 ",\"unchecked\":%" PRId64
			      ",\"failures\":%" PRId64
			      ",\"tool_restarts\":%" PRId64 ",\"seen\":\"%s\",\"ended\":",
			  in->pid, str(in->state), in->want ? "true" : "false", in->records,
			  in->bytes, in->lost, in->gaps, in->skipped, in->unchecked, in->failures,
			  in->tool_restarts, seen);
		if (!in->has_ended)
			sb_printf(b, "null");
		else
			sb_printf(b, "\"%s\"", ended);
		sb_printf(b, ",\"status\":");
		sb_json_str(b, str(in->status));
		sb_printf(b, ",\"endpoint\":");
		sb_json_str(b, str(in->endpoint));
		sb_printf(b, ",\"version\":");
		sb_json_str(b, in->version);
		sb_add(b, "}", 1);
		l->first = false;
	} else {
		char id[24], pid[24], recs[24], lost[24], fails[24];
		snprintf(id, sizeof id, "%" PRIu64, in->id);
		snprintf(pid, sizeof pid, "%" PRId64, in->pid);
		snprintf(recs, sizeof recs, "%" PRId64, in->records);
		snprintf(lost, sizeof lost, "%" PRId64, in->lost);
		snprintf(fails, sizeof fails, "%" PRId64, in->failures);
		const char *row[] = { id, str(in->prog), str(in->machine), pid, str(in->state),
				      recs, lost, fails, seen, str(in->status) };
		table_row(l->t, row);
	}
	return 0;
}

static int cmd_instances(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out,
			 char *err, size_t errlen)
{
	static const char *const head[] = { "ID", "PROG", "MACHINE", "PID", "STATE", "RECORDS",
					    "LOST", "FAILURES", "SEEN", "STATUS", NULL };
	struct sbuf b = { 0 };
	struct table t;
	struct listing l = { .b = &b, .t = &t, .json = r->json, .first = true };
	bool all = opt(r, 1, "all") != NULL;
	int limit;

	if (parse_limit(r, 1, &limit, err, errlen) < 0)
		return -EINVAL;
	if (r->json)
		sb_add(&b, "[", 1);
	else
		table_init(&t, head);
	if (store_instances_list(tm->store, all, limit, instance_row, &l, err, errlen) < 0) {
		if (!r->json)
			table_discard(&t);
		sb_free(&b);
		return -EIO;
	}
	if (r->json) {
		sb_add(&b, "]\n", 2);
	} else {
		table_print(&t, &b, r->width);
		if (!l.rows)
			sb_printf(&b, all ? "(no instances yet)\n" : "(no running instances; "
							      "--all lists ended ones too)\n");
	}
	emit(out, &b);
	return 0;
}

static int cmd_start_stop(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out,
			  bool start, char *err, size_t errlen)
{
	struct sbuf b = { 0 };
	uint64_t id;
	int rc;

	if (r->argc != 2) {
		snprintf(err, errlen, "%s: give one instance id (see telemonctl instances)",
			 start ? "start" : "stop");
		return -EINVAL;
	}
	if (parse_id(r->argv[1], &id, "instance", err, errlen) < 0)
		return -EINVAL;
	rc = start ? instances_start(tm, id, err, errlen) : instances_stop(tm, id, err, errlen);
	if (rc < 0)
		return rc;
	if (r->json)
		sb_printf(&b, "{\"id\":%" PRIu64 ",\"result\":\"%s\"}\n", id,
			  start ? "started" : "stopping");
	else
		sb_printf(&b, "instance %" PRIu64 ": %s\n", id,
			  start ? "monitoring started" : "stopping (the tools finish what they have)");
	emit(out, &b);
	return 0;
}

static int cmd_start(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out,
		     char *err, size_t errlen)
{
	return cmd_start_stop(tm, r, out, true, err, errlen);
}

static int cmd_stop(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out,
		    char *err, size_t errlen)
{
	return cmd_start_stop(tm, r, out, false, err, errlen);
}

/* --- typescript and window --------------------------------------------------- */

static void add_file(struct sbuf *b, const char *path)
{
	char buf[65536];
	size_t n;
	FILE *f = fopen(path, "re");

	if (!f)
		return;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		sb_add(b, buf, n);
	fclose(f);
}

/* The one argument of "CMD ID" naming a known instance; 0, or -EINVAL/-ENOENT
 * with a message. */
static int instance_arg(struct tmon *tm, const struct ctl_request *r, uint64_t *id, char *err,
			size_t errlen)
{
	if (r->argc != 2) {
		snprintf(err, errlen, "%s: give one instance id", r->argv[0]);
		return -EINVAL;
	}
	if (parse_id(r->argv[1], id, "instance", err, errlen) < 0)
		return -EINVAL;
	if (!store_instance_exists(tm->store, *id)) {
		snprintf(err, errlen, "no instance %" PRIu64 " (see telemonctl instances --all)", *id);
		return -ENOENT;
	}
	return 0;
}

static int cmd_typescript(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out,
			  char *err, size_t errlen)
{
	char path[PATH_MAX], old[PATH_MAX + 4];
	struct sbuf text = { 0 }, b = { 0 };
	uint64_t id;
	int rc = instance_arg(tm, r, &id, err, errlen);

	if (rc < 0)
		return rc;
	typescript_path(tm->state_dir, id, path, sizeof path);
	snprintf(old, sizeof old, "%s.1", path);
	add_file(&text, old);
	add_file(&text, path);
	if (r->json) {
		sb_printf(&b, "{\"id\":%" PRIu64 ",\"typescript\":", id);
		sb_json_str(&b, text.s ? text.s : "");
		sb_printf(&b, "}\n");
		sb_free(&text);
		emit(out, &b);
	} else {
		emit(out, &text);
	}
	return 0;
}

/* One row of `telemonctl history PROG`. */
static int version_row(void *arg, const struct store_version_row *v)
{
	struct listing *l = arg;
	struct sbuf *b = l->b;
	char first[40], last[40];

	fmt_time(true, v->first_seen, first, sizeof first);
	fmt_time(true, v->last_seen, last, sizeof last);
	l->rows++;
	if (l->json) {
		sb_printf(b, "%s{\"version\":", l->first ? "" : ",");
		sb_json_str(b, v->version);
		sb_printf(b, ",\"instances\":%" PRId64 ",\"running\":%" PRId64 ",\"first_seen\":\"%s\","
			      "\"first_seen_unix\":%.3f,\"last_seen\":\"%s\",\"last_seen_unix\":%.3f,"
			      "\"records\":%" PRId64 ",\"failures\":%" PRId64 "}",
			  v->instances, v->running, first, v->first_seen, last, v->last_seen,
			  v->records, v->failures);
		l->first = false;
	} else {
		char n[24], run[24], recs[24], fails[24];
		snprintf(n, sizeof n, "%" PRId64, v->instances);
		snprintf(run, sizeof run, "%" PRId64, v->running);
		snprintf(recs, sizeof recs, "%" PRId64, v->records);
		snprintf(fails, sizeof fails, "%" PRId64, v->failures);
		const char *row[] = { v->version ? v->version : "(none)", n, run, first, last, recs,
				      fails };
		table_row(l->t, row);
	}
	return 0;
}

/* telemonctl history PROG: the versions of a program, with when each was
 * first and last seen (the version comes from the log header; snarflog
 * --program-version or the executable's build-id). */
static int cmd_history(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out,
		       char *err, size_t errlen)
{
	static const char *const head[] = { "VERSION", "INSTANCES", "RUNNING", "FIRST SEEN",
					    "LAST SEEN", "RECORDS", "FAILURES", NULL };
	struct sbuf b = { 0 };
	struct table t;
	struct listing l = { .b = &b, .t = &t, .json = r->json, .first = true };
	const char *prog = opt(r, 1, "prog");

	if (!prog || !*prog) {
		snprintf(err, errlen, "history: give one program name (prog)");
		return -EINVAL;
	}
	listing_begin(&l, head);
	return listing_end(&l, store_versions_list(tm->store, prog, tm_now(), version_row, &l,
						   err, errlen),
			   out, r->width, "(no instances of this program yet)");
}

/* One row of `telemonctl verdicts ID`. */
static int verdict_row(void *arg, const struct store_verdict *v)
{
	struct listing *l = arg;
	struct sbuf *b = l->b;
	bool unclosed = v->result && !strcmp(v->result, "unclosed");
	char when[40], line[16], count[24], what[600];

	fmt_time(true, v->time, when, sizeof when);
	l->rows++;
	if (l->json) {
		sb_printf(b, "%s{\"id\":%" PRIu64 ",\"kind\":\"%s\",\"spec\":", l->first ? "" : ",",
			  v->id, unclosed ? "unclosed" : "assertion");
		sb_json_str(b, v->spec);
		sb_printf(b, ",\"line\":%d,\"assert\":", v->line);
		sb_json_str(b, unclosed ? NULL : v->assertion);
		sb_printf(b, ",\"type\":");
		sb_json_str(b, unclosed ? v->assertion : NULL);
		sb_printf(b, ",\"result\":");
		sb_json_str(b, v->result);
		sb_printf(b, ",\"count\":%" PRId64 ",\"time\":\"%s\",\"time_unix\":%.6f,"
			  "\"from_record\":", v->offenders, when, v->time);
		if (v->from)
			sb_printf(b, "%" PRIu64, v->from);
		else
			sb_printf(b, "null");
		sb_printf(b, ",\"to_record\":");
		if (v->to)
			sb_printf(b, "%" PRIu64, v->to);
		else
			sb_printf(b, "null");
		sb_printf(b, ",\"partial\":%s}", v->partial ? "true" : "false");
		l->first = false;
	} else {
		snprintf(line, sizeof line, "%d", v->line);
		snprintf(count, sizeof count, "%" PRId64, v->offenders);
		if (unclosed)
			snprintf(what, sizeof what, "interval %s", str(v->assertion));
		else if (v->assertion)
			snprintf(what, sizeof what, "assertion \"%s\"", v->assertion);
		else
			snprintf(what, sizeof what, "assertion");
		if (v->partial) {
			size_t n = strlen(what);
			snprintf(what + n, sizeof what - n, " (partial: records %" PRIu64 "-%" PRIu64
				 ")", v->from, v->to);
		}
		const char *row[] = { line, what, str(v->result), count, when };
		table_row(l->t, row);
	}
	return 0;
}

/* telemonctl verdicts ID: the instance's end-of-log verdicts, and the
 * intervals it left open (unclosed), as its checker said them. */
static int cmd_verdicts(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out,
			char *err, size_t errlen)
{
	static const char *const head[] = { "LINE", "WHAT", "RESULT", "COUNT", "TIME", NULL };
	struct sbuf b = { 0 };
	struct table t;
	struct listing l = { .b = &b, .t = &t, .json = r->json, .first = true };
	uint64_t id;
	int rc = instance_arg(tm, r, &id, err, errlen);

	if (rc < 0)
		return rc;
	listing_begin(&l, head);
	return listing_end(&l, store_verdicts_list(tm->store, id, verdict_row, &l, err, errlen), out,
			   r->width, "(no verdicts yet: a checker says them when its log ends)");
}

/* The answer to `telemonctl window ID`, from the failure's window. */
struct window_answer {
	struct sbuf *b;           /* the answer */
	uint64_t id;              /* the failure */
	bool json;                /* JSON, not text */
	char *err;                /* where a message goes */
	size_t errlen;            /* its size */
	int rc;                   /* 0, or why there is no window to show */
};

static int window_found(void *arg, const struct store_window_row *w)
{
	struct window_answer *a = arg;

	if (!w->has_window) {
		snprintf(a->err, a->errlen, "failure %" PRIu64 " has no log window (too many "
			 "failures waiting for theirs at the time)", a->id);
		a->rc = -ENOENT;
	} else if (!w->stored) {
		snprintf(a->err, a->errlen, "the log window of failure %" PRIu64 " is not stored "
			 "yet: it waits for the records after the failure (at most %.0f s)", a->id,
			 TM_WINDOW_WAIT_S);
		a->rc = -EAGAIN;
	} else if (a->json) {
		sb_printf(a->b, "{\"id\":%" PRIu64 ",\"from_record\":%" PRId64 ",\"to_record\":%"
			  PRId64 ",\"truncated\":%s,\"window\":", a->id, w->from_rec, w->to_rec,
			  w->truncated ? "true" : "false");
		sb_json_str(a->b, str(w->text));
		sb_printf(a->b, "}\n");
		a->rc = 0;
	} else {
		sb_add(a->b, w->text, w->len);
		a->rc = 0;
	}
	return 0;
}

static int cmd_window(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out,
		      char *err, size_t errlen)
{
	struct sbuf b = { 0 };
	struct window_answer a = { .b = &b, .json = r->json, .err = err, .errlen = errlen };
	int rc;

	if (r->argc != 2) {
		snprintf(err, errlen, "window: give one failure id (see telemonctl failures)");
		return -EINVAL;
	}
	if (parse_id(r->argv[1], &a.id, "failure", err, errlen) < 0)
		return -EINVAL;
	rc = store_failure_window(tm->store, a.id, window_found, &a, err, errlen);
	if (rc == -EIO)
		return rc;
	if (rc == -ENOENT) {
		snprintf(err, errlen, "no failure %" PRIu64 " (see telemonctl failures)", a.id);
		a.rc = -ENOENT;
	}
	emit(out, &b);
	return a.rc;
}

/* --- failures ---------------------------------------------------------------- */

/* One row of `telemonctl failures` (and of /api/v1/failures). */
static int failure_row(void *arg, const struct store_failure_row *f)
{
	struct listing *l = arg;
	struct sbuf *b = l->b;
	char when[40], start[40], acked[40], flags[64];

	fmt_time(true, f->time, when, sizeof when);
	fmt_time(f->has_start_wall, f->start_wall, start, sizeof start);
	fmt_time(f->has_acked, f->acked, acked, sizeof acked);
	failure_flags(f, flags, sizeof flags);
	l->rows++;
	if (l->json) {
		char *units;

		sb_printf(b, "%s{\"id\":%" PRIu64 ",\"prog\":", l->first ? "" : ",", f->id);
		sb_json_str(b, str(f->prog));
		sb_printf(b, ",\"machine\":");
		sb_json_str(b, str(f->machine));
		sb_printf(b, ",\"pid\":%" PRId64 ",\"assert\":", f->pid);
		sb_json_str(b, f->assertion);
		sb_printf(b, ",\"line\":%d,\"time\":\"%s\",\"time_unix\":%.6f,\"start_ts\":",
			  f->line, when, f->time);
		if (!f->has_ts)
			sb_printf(b, "null,\"end_ts\":null");
		else
			sb_printf(b, "%" PRId64 ",\"end_ts\":%" PRId64, f->start_ts, f->end_ts);
		sb_printf(b, ",\"metrics\":%s", f->metrics ? f->metrics : "null");
		/* the unit of each duration, the numbers staying raw (text.h) */
		units = metrics_units_json(f->metrics);
		sb_printf(b, ",\"units\":%s,\"spec\":", units ? units : "{}");
		free(units);
		sb_json_str(b, f->spec);
		sb_printf(b, ",\"result\":");
		sb_json_str(b, f->result);
		sb_printf(b, ",\"kind\":");
		sb_json_str(b, f->kind);
		sb_printf(b, ",\"type\":");
		sb_json_str(b, f->type);
		sb_printf(b, ",\"uid\":");
		if (!f->has_uid)
			sb_printf(b, "null");
		else
			sb_printf(b, "%" PRId64, f->uid);
		sb_printf(b, ",\"start\":");
		sb_json_str(b, f->start);
		sb_printf(b, ",\"end\":");
		sb_json_str(b, f->end);
		sb_printf(b, ",\"instance\":%" PRIu64 ",\"window\":%s", f->instance_id,
			  f->has_window ? "true" : "false");
		/* wall-clock times beside the ticks, and alert hygiene */
		sb_printf(b, ",\"time_iso\":\"%s\",\"start_iso\":", when);
		json_time(b, f->has_start_wall, start);
		/* silenced: our silence's id (a number), an Alertmanager
		 * silence's (a string), or null; silenced_by says whose */
		sb_printf(b, ",\"report\":%s,\"silenced\":", f->report ? "true" : "false");
		if (!f->has_silence)
			sb_printf(b, "null");
		else if (f->am_silence)
			sb_json_str(b, f->am_silence);
		else
			sb_printf(b, "%" PRIu64, f->silence_id);
		sb_printf(b, ",\"silenced_by\":%s", !f->has_silence ? "null"
						   : f->am_silence ? "\"alertmanager\""
								   : "\"telemonitor\"");
		sb_printf(b, ",\"acked\":%s,\"acked_iso\":", f->has_acked ? "true" : "false");
		json_time(b, f->has_acked, acked);
		sb_printf(b, ",\"ack_comment\":");
		sb_json_str(b, f->ack_comment);
		sb_add(b, "}", 1);
		l->first = false;
	} else {
		char id[24], pid[24], line[16], sts[24] = "-", ets[24] = "-";
		char *metrics = render_metrics(f->metrics);
		snprintf(id, sizeof id, "%" PRIu64, f->id);
		snprintf(pid, sizeof pid, "%" PRId64, f->pid);
		snprintf(line, sizeof line, "%d", f->line);
		if (f->has_ts) {
			snprintf(sts, sizeof sts, "%" PRId64, f->start_ts);
			snprintf(ets, sizeof ets, "%" PRId64, f->end_ts);
		}
		const char *row[] = { id, when, str(f->prog), str(f->machine), pid,
				      f->assertion ? f->assertion : "(unlabelled)",
				      line, start, sts, ets, flags, metrics ? metrics : "" };
		table_row(l->t, row);
		free(metrics);
	}
	return 0;
}

static int cmd_failures(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out,
			char *err, size_t errlen)
{
	static const char *const head[] = { "ID", "TIME", "PROG", "MACHINE", "PID", "ASSERTION",
					    "LINE", "START", "START_TS", "END_TS", "FLAGS", "METRICS",
					    NULL };
	const char *since = opt(r, 1, "since"), *inst = opt(r, 1, "instance");
	const char *before = opt(r, 1, "before"), *until = opt(r, 1, "until");
	const char *kind = opt(r, 1, "kind");
	struct store_failure_query q = {
		.prog = opt(r, 1, "prog"),
		.assertion = opt(r, 1, "assert"),
		.has_since = since != NULL,
		.newest_first = r->newest_first,
	};
	struct sbuf b = { 0 };
	struct table t;
	struct listing l = { .b = &b, .t = &t, .json = r->json, .first = true };

	if (parse_limit(r, 1, &q.limit, err, errlen) < 0)
		return -EINVAL;
	if (since) {
		char *end;
		q.since = strtod(since, &end);
		if (*end || end == since) {
			snprintf(err, errlen, "--since: '%.40s' is not a time", since);
			return -EINVAL;
		}
	}
	if (until) {
		char *end;
		q.has_until = true;
		q.until = strtod(until, &end);
		if (*end || end == until) {
			snprintf(err, errlen, "--until: '%.40s' is not a time", until);
			return -EINVAL;
		}
	}
	if (kind && store_kind_parse(kind, &q.kind) < 0) {
		snprintf(err, errlen, "--kind: '%.40s' is not failure, report or all", kind);
		return -EINVAL;
	}
	if (inst && parse_id(inst, &q.instance_id, "--instance", err, errlen) < 0)
		return -EINVAL;
	if (before && parse_id(before, &q.before_id, "--before", err, errlen) < 0)
		return -EINVAL;
	/* the latest `limit` (before failure `before`), oldest first for
	 * telemonctl, newest first for the HTTP API */
	if (r->json)
		sb_add(&b, "[", 1);
	else
		table_init(&t, head);
	if (store_failures_list(tm->store, &q, failure_row, &l, err, errlen) < 0) {
		if (!r->json)
			table_discard(&t);
		sb_free(&b);
		return -EIO;
	}
	if (r->json) {
		sb_add(&b, "]\n", 2);
	} else {
		table_print(&t, &b, r->width);
		if (l.rows)
			sb_printf(&b, CTL_HINT "The log around a failure: %s window ID\n",
				  tm->ctl_hint);
		else
			sb_printf(&b, "(no failures)\n");
	}
	emit(out, &b);
	return 0;
}

/* --- silences and acknowledgements --------------------------------------------- */

/* A time option given as Unix seconds by telemonctl. */
static int parse_when(const char *v, const char *what, double *out, char *err, size_t errlen)
{
	char *end;
	double t;

	t = v ? strtod(v, &end) : 0;
	if (!v || end == v || *end || !(t > 0)) {
		snprintf(err, errlen, "%s: '%.40s' is not a time", what, v ? v : "");
		return -EINVAL;
	}
	*out = t;
	return 0;
}

/* One row of `telemonctl silence list`. */
static int silence_row(void *arg, const struct store_silence *si)
{
	struct listing *l = arg;
	struct sbuf *b = l->b;
	char until[40], created[40], id[24];

	fmt_time(true, si->until, until, sizeof until);
	fmt_time(true, si->created, created, sizeof created);
	l->rows++;
	if (l->json) {
		sb_printf(b, "%s{\"id\":%" PRIu64 ",\"until\":\"%s\",\"until_unix\":%.3f,"
			      "\"created\":\"%s\",\"prog\":", l->first ? "" : ",",
			  si->id, until, si->until, created);
		sb_json_str(b, si->prog);
		sb_printf(b, ",\"machine\":");
		sb_json_str(b, si->machine);
		sb_printf(b, ",\"assert\":");
		sb_json_str(b, si->assertion);
		sb_printf(b, ",\"comment\":");
		sb_json_str(b, si->comment);
		sb_add(b, "}", 1);
		l->first = false;
	} else {
		snprintf(id, sizeof id, "%" PRIu64, si->id);
		const char *row[] = {
			id, until, si->prog ? si->prog : "*",
			si->machine ? si->machine : "*",
			si->assertion ? si->assertion : "*",
			created, str(si->comment),
		};
		table_row(l->t, row);
	}
	return 0;
}

static int silence_list(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out,
			char *err, size_t errlen)
{
	static const char *const head[] = { "ID", "UNTIL", "PROG", "MACHINE", "ASSERT", "CREATED",
					    "COMMENT", NULL };
	struct sbuf b = { 0 };
	struct table t;
	struct listing l = { .b = &b, .t = &t, .json = r->json, .first = true };

	listing_begin(&l, head);
	return listing_end(&l, store_silences_list(tm->store, tm_now(), HYG_SILENCES_MAX, silence_row,
						    &l, err, errlen),
			   out, r->width, "(no active silences)");
}

/* silence add KEY=VALUE... | silence list | silence rm ID */
static int cmd_silence(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out,
		       char *err, size_t errlen)
{
	const char *sub = r->argc > 1 ? r->argv[1] : "";
	struct sbuf b = { 0 };
	uint64_t id;
	double until;

	if (!strcmp(sub, "list"))
		return only_opts(r, 2, 0, err, errlen) < 0 ? -EINVAL
								  : silence_list(tm, r, out, err, errlen);
	if (!strcmp(sub, "rm")) {
		if (r->argc != 3) {
			snprintf(err, errlen, "silence rm: give one silence id");
			return -EINVAL;
		}
		if (parse_id(r->argv[2], &id, "silence rm", err, errlen) < 0 ||
		    hygiene_silence_rm(tm, id, err, errlen) < 0)
			return -EINVAL;
		sb_printf(&b, r->json ? "{\"removed\":%" PRIu64 "}\n" : "silence %" PRIu64 " removed\n",
			  id);
		emit(out, &b);
		return 0;
	}
	if (strcmp(sub, "add")) {
		snprintf(err, errlen, "silence: expected add, list or rm");
		return -EINVAL;
	}
	if (only_opts(r, 2, cmd_info(CMD_I_silence)->keys, err, errlen) < 0 ||
	    parse_when(opt(r, 2, "until"), "silence add: the end", &until, err, errlen) < 0 ||
	    hygiene_silence_add(tm, opt(r, 2, "prog"), opt(r, 2, "machine"), opt(r, 2, "assert"),
				until, opt(r, 2, "comment"), &id, err, errlen) < 0)
		return -EINVAL;
	if (r->json) {
		sb_printf(&b, "{\"id\":%" PRIu64 "}\n", id);
	} else {
		char when[40];
		sb_printf(&b, "silence %" PRIu64 " added, until %s\n", id,
			  iso_time(until, when, sizeof when));
	}
	emit(out, &b);
	return 0;
}

/* ack FAILURE_ID [comment=TEXT] */
static int cmd_ack(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out, char *err,
		   size_t errlen)
{
	const char *comment = opt(r, 2, "comment");
	struct sbuf b = { 0 };
	uint64_t id;

	if (r->argc < 2 || parse_id(r->argv[1], &id, "ack", err, errlen) < 0 ||
	    only_opts(r, 2, cmd_info(CMD_I_ack)->keys, err, errlen) < 0)
		return -EINVAL;
	if (comment && strlen(comment) > HYG_COMMENT_MAX) {
		snprintf(err, errlen, "ack: the comment is longer than %d bytes", HYG_COMMENT_MAX);
		return -EINVAL;
	}
	if (!store_failure_exists(tm->store, id)) {
		snprintf(err, errlen, "ack: no failure %" PRIu64 " (telemonctl failures)", id);
		return -ENOENT;
	}
	if (store_ack(tm->store, id, tm_now(), comment && *comment ? comment : NULL) < 0) {
		snprintf(err, errlen, "ack: the store refused it");
		return -EIO;
	}
	store_commit(tm->store);
	cmon_notice("failure %" PRIu64 " acknowledged%s%s", id, comment ? ": " : "",
		    comment ? comment : "");
	sb_printf(&b, r->json ? "{\"acked\":%" PRIu64 "}\n" : "failure %" PRIu64 " acknowledged\n",
		  id);
	emit(out, &b);
	return 0;
}

/* --- compare and stats ------------------------------------------------------- */

/* compare prog=P v1=V1 v2=V2 [assert=A], from telemonctl and the API alike */
static int cmd_compare(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out,
		       char *err, size_t errlen)
{
	const char *prog = opt(r, 1, "prog"), *v1 = opt(r, 1, "v1"), *v2 = opt(r, 1, "v2");

	if (!prog || !v1 || !v2 || !*prog) {
		snprintf(err, errlen, "compare: give PROG V1 V2 (prog, v1 and v2)");
		return -EINVAL;
	}
	return versions_compare(tm, r, prog, v1, v2, opt(r, 1, "assert"), out, err, errlen);
}

/* stats prog=P assert=A [day=D] */
static int cmd_stats(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out,
		     char *err, size_t errlen)
{
	const char *prog = opt(r, 1, "prog"), *assertion = opt(r, 1, "assert");

	if (!prog || !assertion) {
		snprintf(err, errlen, "stats: give --prog and --assert");
		return -EINVAL;
	}
	return stats_run(tm, r, prog, assertion, opt(r, 1, "day"), out, err, errlen);
}

/* --- dispatch ---------------------------------------------------------------- */

/* A command's handler: the answer to `out`, or a negative errno and `err`. */
typedef int cmd_handler(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out,
			char *err, size_t errlen);

/* The handlers, in the order of CMD_TABLE (cmdtab.h). */
static cmd_handler *const handlers[CMD_COUNT] = {
#define CMD_HANDLER(name, path, keys, operands, flags, fn) fn,
	CMD_TABLE(CMD_HANDLER)
#undef CMD_HANDLER
};

int commands_run(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out, char *err,
		 size_t errlen)
{
	const char *cmd = r->argv[0];
	int i = cmd_find(cmd);

	if (i < 0) {
		snprintf(err, errlen, "unknown command '%.40s'", cmd);
		return -EINVAL;
	}
	if ((cmd_info(i)->flags & CMD_OPTS) &&
	    only_opts(r, 1, cmd_info(i)->keys, err, errlen) < 0)
		return -EINVAL;
	return handlers[i](tm, r, out, err, errlen);
}
