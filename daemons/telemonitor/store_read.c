/* Typed reads of the store (store_read.h): the queries behind telemonctl's
 * listings, the daily statistics and /metrics. Each is its SQL, its
 * values and a row mapper that turns the current row into the caller's
 * struct; query() prepares, runs, hands every row over and finalizes. A
 * column's type is asked before its value is read, and each column is
 * read once, so no conversion invalidates a string handed out. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store-internal.h"
#include "store_read.h"
#include "wtext.h"
#include "store_sql.h"

#define NV(v) (sizeof(v) / sizeof((v)[0]))

/* A caller's callback and its argument, for the row mappers. */
struct to {
	union {                   /* the typed callback (store_read.h) its mapper calls */
		store_instance_row_cb instance;
		store_state_count_cb state_count;
		store_failure_row_cb failure;
		store_stats_row_cb stats;
		store_failure_count_cb failure_count;
		store_report_row_cb report;
		store_silence_row_cb silence;
		store_verdict_row_cb verdict;
		store_version_row_cb version;
		store_version_report_cb version_report;
		store_version_summary_cb version_summary;
		store_summary_row_cb summary;
		store_series_row_cb series;
		store_duration_row_cb duration;
	} cb;
	void *arg;                /* its argument */
	struct store *st;         /* the store, where a mapper needs it (else NULL) */
};

/* Turns the current row of `q` into a struct for `to`; nonzero stops. */
typedef int (*row_fn)(struct db_stmt *q, const struct to *to);

/* Run `sql` with values `v` and give every row to `row` (until it returns
 * nonzero). 0, or -EIO with "store: ..." in err (err may be NULL). */
static int query(struct store *st, const char *sql, const struct bl_value *v, size_t n,
		 row_fn row, const struct to *to, char *err, size_t errlen)
{
	struct db *db = store_conn(st);
	struct db_stmt *q = db_prepare(db, sql);
	enum db_rc rc;

	if (!q) {
		if (err)
			snprintf(err, errlen, "store: %s", db_errmsg(db));
		return -EIO;
	}
	for (rc = db_run(q, v, n); rc == DB_ROW; rc = db_next(q))
		if (row(q, to))
			break;
	if (rc != DB_ROW && rc != DB_DONE) {
		if (err)
			snprintf(err, errlen, "store: %s", db_errmsg(db));
		db_finalize(q);
		return -EIO;
	}
	db_finalize(q);
	return 0;
}

static const char *text(struct db_stmt *q, int c)
{
	return db_col_text(q, c);
}

static bool is_null(struct db_stmt *q, int c)
{
	return db_col_null(q, c);
}

/* A row was found (for exists()). */
static int found(struct db_stmt *q, const struct to *to)
{
	(void)q;
	*(bool *)to->arg = true;
	return 1;
}

/* True if `sql` (one id bound as ?1) gives a row. */
static bool exists(struct store *st, const char *sql, uint64_t id)
{
	struct bl_value v[] = { db_vint((int64_t)id) };
	bool yes = false;
	struct to to = { .arg = &yes };

	return query(st, sql, v, NV(v), found, &to, NULL, 0) == 0 && yes;
}

/* --- instances --------------------------------------------------------------- */

/* While the store is degraded, what is held in memory is newer than the
 * row: a listing shows the instance as it is now (its state, counts and
 * status, and the failures held beside the stored ones). */
static void held_values(struct store *st, struct store_instance_row *r,
			const struct bl_value *v, unsigned n)
{
	static const char *const states[] = { "listed", "monitoring", "retrying", "busy",
					      "stopped", "ended", "gone" };

	if (n < 24)
		return;
	/* INST_PUT's parameters, from 1: 10 ended, 11 state, 13 bytes ... 20 status */
	if (v[9].type == BV_REAL) {
		r->has_ended = true;
		r->ended = v[9].d;
	}
	for (size_t i = 0; i < sizeof states / sizeof states[0]; i++)
		if (v[10].type == BV_TEXT && !strcmp(v[10].s, states[i]))
			r->state = states[i];
	r->want = v[11].i != 0;
	r->bytes = v[12].i;
	r->records = v[13].i;
	r->lost = v[14].i;
	r->gaps = v[15].i;
	r->skipped = v[16].i;
	r->tool_restarts = v[18].i;
	if (v[19].type == BV_TEXT)
		r->status = v[19].s;
	r->unchecked = v[22].i;
	r->failures += store_held_failures(st, r->id);
}

static void held_instance(struct store *st, struct store_instance_row *r)
{
	const struct bl_value *v;
	unsigned n;

	if (st && (v = store_held_instance(st, r->id, &n)))
		held_values(st, r, v, n);
}

/* A listing while degraded: the instances whose rows are only held in
 * memory (new since the store became degraded) come after the stored ones. */
struct held_list {
	struct store *st;
	bool all;                 /* ended ones too */
	uint64_t after;           /* ids up to this one were listed from the store */
	int left;                 /* rows the limit still allows */
	store_instance_row_cb cb;
	void *arg;
	int stop;                 /* the callback said stop */
};

static void held_row(void *arg, uint64_t id, const struct bl_value *v, unsigned n)
{
	struct held_list *h = arg;
	struct store_instance_row r = { .id = id };

	if (h->stop || h->left <= 0 || id <= h->after || n < 24)
		return;
	r.class_id = v[1].type == BV_INT ? (uint64_t)v[1].i : 0;
	r.prog = v[2].s;
	r.machine = v[3].s;
	r.pid = v[4].i;
	r.has_first_seen = v[8].type == BV_REAL;
	r.first_seen = v[8].d;
	r.endpoint = v[6].type == BV_TEXT ? v[6].s : NULL;
	r.version = v[21].type == BV_TEXT ? v[21].s : NULL;
	held_values(h->st, &r, v, n);
	if (!h->all && r.has_ended)
		return;
	h->left--;
	h->stop = h->cb(h->arg, &r);
}


static int listed_row(void *arg, const struct store_instance_row *r)
{
	struct held_list *h = arg;

	if (r->id > h->after)
		h->after = r->id;
	h->left--;
	return h->stop = h->cb(h->arg, r);
}

static int instance_row(struct db_stmt *q, const struct to *to)
{
	struct store_instance_row r = {
		.has_first_seen = !is_null(q, 14),
		.has_ended = !is_null(q, 15),
	};

	r.id = (uint64_t)db_col_int(q, 0);
	r.class_id = (uint64_t)db_col_int(q, 1);
	r.prog = text(q, 2);
	r.machine = text(q, 3);
	r.pid = db_col_int(q, 4);
	r.state = text(q, 5);
	r.want = db_col_int(q, 6) != 0;
	r.records = db_col_int(q, 7);
	r.bytes = db_col_int(q, 8);
	r.lost = db_col_int(q, 9);
	r.gaps = db_col_int(q, 10);
	r.skipped = db_col_int(q, 11);
	r.failures = db_col_int(q, 12);
	r.tool_restarts = db_col_int(q, 13);
	r.first_seen = r.has_first_seen ? db_col_real(q, 14) : 0;
	r.ended = r.has_ended ? db_col_real(q, 15) : 0;
	r.status = text(q, 16);
	r.endpoint = text(q, 17);
	r.version = text(q, 18);
	r.unchecked = db_col_int(q, 19);
	held_instance(to->st, &r);
	return to->cb.instance(to->arg, &r);
}

int store_instances_list(struct store *st, bool all, int limit, store_instance_row_cb cb,
			 void *arg, char *err, size_t errlen)
{
	struct bl_value v[] = { db_vint(all), db_vint(limit) };
	struct to to = { .cb.instance = cb, .arg = arg, .st = st };

	struct held_list h = { .st = st, .all = all, .left = limit, .cb = cb, .arg = arg };
	int r;

	to.arg = &h;
	to.cb.instance = listed_row;
	r = query(st, "SELECT * FROM (SELECT id, class_id, prog, machine, pid, state, want,"
		     " records, bytes, lost, gaps, skipped, " FAILURES_OF("instances") ","
		     " tool_restarts, first_seen, ended, status, endpoint, version, unchecked"
		     " FROM instances"
		     " WHERE ?1 = 1 OR ended IS NULL ORDER BY id DESC LIMIT ?2) AS t ORDER BY id",
		     v, NV(v), instance_row, &to, err, errlen);
	if (r == 0 && !h.stop)
		store_held_instances(st, held_row, &h);
	return r;
}

int store_instance_read(struct store *st, uint64_t id, store_instance_row_cb cb, void *arg,
		       char *err, size_t errlen)
{
	struct bl_value v[] = { db_vint((int64_t)id) };
	struct to to = { .cb.instance = cb, .arg = arg, .st = st };

	return query(st, "SELECT id, class_id, prog, machine, pid, state, want,"
		     " records, bytes, lost, gaps, skipped, " FAILURES_OF("instances") ","
		     " tool_restarts, first_seen, ended, status, endpoint, version, unchecked"
		     " FROM instances WHERE id = ?1",
		     v, NV(v), instance_row, &to, err, errlen);
}

bool store_instance_exists(struct store *st, uint64_t id)
{
	return exists(st, "SELECT 1 FROM instances WHERE id = ?1", id);
}

/* The instances /metrics shows: running first, then the most recently ended. */
#define SHOWN_INSTANCES                                                                      \
	"SELECT id FROM instances ORDER BY (ended IS NULL) DESC, coalesce(ended, 0) DESC,"   \
	" id DESC LIMIT ?1"

static int metrics_instance_row(struct db_stmt *q, const struct to *to)
{
	struct store_instance_row r = {
		.id = (uint64_t)db_col_int(q, 0),
		.class_id = (uint64_t)db_col_int(q, 1),
		.prog = text(q, 2),
		.machine = text(q, 3),
		.pid = db_col_int(q, 4),
		.state = text(q, 5),
		.records = db_col_int(q, 6),
		.lost = db_col_int(q, 7),
		.gaps = db_col_int(q, 8),
		.bytes = db_col_int(q, 9),
		.tool_restarts = db_col_int(q, 10),
	};

	return to->cb.instance(to->arg, &r);
}

int store_metrics_instances(struct store *st, int limit, store_instance_row_cb cb, void *arg,
			    char *err, size_t errlen)
{
	struct bl_value v[] = { db_vint(limit) };
	struct to to = { .cb.instance = cb, .arg = arg };

	return query(st, "SELECT id, class_id, prog, machine, pid, state, records, lost,"
		     " gaps, bytes, tool_restarts FROM instances WHERE id IN ("
		     SHOWN_INSTANCES ") ORDER BY id", v, NV(v), metrics_instance_row, &to, err,
		     errlen);
}

static int count_row(struct db_stmt *q, const struct to *to)
{
	*(int64_t *)to->arg = db_col_int(q, 0);
	return 1;
}

int store_instances_count(struct store *st, int64_t *n, char *err, size_t errlen)
{
	struct to to = { .arg = n };

	*n = 0;
	return query(st, "SELECT count(*) FROM instances", NULL, 0, count_row, &to, err, errlen);
}

static int state_count_row(struct db_stmt *q, const struct to *to)
{
	struct store_state_count r = { .state = text(q, 0), .count = db_col_int(q, 1) };

	return to->cb.state_count(to->arg, &r);
}

int store_instances_by_state(struct store *st, store_state_count_cb cb, void *arg)
{
	struct to to = { .cb.state_count = cb, .arg = arg };

	return query(st, "SELECT state, count(*) FROM instances GROUP BY state", NULL, 0,
		     state_count_row, &to, NULL, 0);
}

/* --- failures ---------------------------------------------------------------- */

/* The latest failures matching ?1 prog, ?2 assert, ?3 since, ?4 instance,
 * ?6 before (ids below it), at most ?5 of them. */
#define FAILURES_QUERY                                                                  \
	"SELECT f.id, i.prog, i.machine, i.pid, f.assert,"                              \
	" f.line, f.time, f.start_ts, f.end_ts, f.metrics, f.spec, f.result,"           \
	" f.kind, f.type, f.uid, f.start_pos, f.end_pos, f.instance_id,"                \
	" f.window_id, f.start_wall, f.report, f.silence_id, f.acked,"                  \
	" f.ack_comment, f.am_silence"                                                  \
	" FROM failures f JOIN instances i ON i.id = f.instance_id"                     \
	" WHERE (CAST(?1 AS TEXT) IS NULL OR i.prog = ?1)"                              \
	" AND (CAST(?2 AS TEXT) IS NULL OR f.assert = ?2)"                              \
	" AND (CAST(?3 AS DOUBLE PRECISION) IS NULL OR f.time >= ?3)"                   \
	" AND (CAST(?4 AS BIGINT) IS NULL OR f.instance_id = ?4)"                       \
	" AND (CAST(?6 AS BIGINT) IS NULL OR f.id < ?6)"                                \
	" AND (CAST(?7 AS DOUBLE PRECISION) IS NULL OR f.time < ?7)"                    \
	" AND (CAST(?8 AS BIGINT) IS NULL OR f.report = ?8)"                            \
	" ORDER BY f.id DESC LIMIT ?5"

static int failure_row(struct db_stmt *q, const struct to *to)
{
	struct store_failure_row r = {
		.has_ts = !is_null(q, 7),
		.has_uid = !is_null(q, 14),
		.has_window = !is_null(q, 18),
		.has_start_wall = !is_null(q, 19),
		.has_silence = !is_null(q, 21),
		.has_acked = !is_null(q, 22),
	};

	r.id = (uint64_t)db_col_int(q, 0);
	r.prog = text(q, 1);
	r.machine = text(q, 2);
	r.pid = db_col_int(q, 3);
	r.assertion = text(q, 4);
	r.line = (int)db_col_int(q, 5);
	r.time = db_col_real(q, 6);
	r.start_ts = r.has_ts ? db_col_int(q, 7) : 0;
	r.end_ts = r.has_ts ? db_col_int(q, 8) : 0;
	r.metrics = text(q, 9);
	r.spec = text(q, 10);
	r.result = text(q, 11);
	r.kind = text(q, 12);
	r.type = text(q, 13);
	r.uid = r.has_uid ? db_col_int(q, 14) : 0;
	r.start = text(q, 15);
	r.end = text(q, 16);
	r.instance_id = (uint64_t)db_col_int(q, 17);
	r.start_wall = r.has_start_wall ? db_col_real(q, 19) : 0;
	r.report = db_col_int(q, 20) != 0;
	r.silence_id = r.has_silence ? (uint64_t)db_col_int(q, 21) : 0;
	r.acked = r.has_acked ? db_col_real(q, 22) : 0;
	r.ack_comment = text(q, 23);
	r.am_silence = text(q, 24);
	if (r.am_silence)
		r.has_silence = true;
	return to->cb.failure(to->arg, &r);
}

int store_failures_list(struct store *st, const struct store_failure_query *fq,
			store_failure_row_cb cb, void *arg, char *err, size_t errlen)
{
	struct bl_value v[] = {
		db_vtext(fq->prog),
		db_vtext(fq->assertion),
		fq->has_since ? db_vreal(fq->since) : db_vnull(),
		fq->instance_id ? db_vint((int64_t)fq->instance_id) : db_vnull(),
		db_vint(fq->limit),
		fq->before_id ? db_vint((int64_t)fq->before_id) : db_vnull(),
		fq->has_until ? db_vreal(fq->until) : db_vnull(),
		fq->kind == STORE_KIND_ALL ? db_vnull() : db_vint(fq->kind == STORE_KIND_REPORT),
	};
	struct to to = { .cb.failure = cb, .arg = arg };

	/* the latest `limit` (before failure `before_id`), oldest or newest first */
	return query(st, fq->newest_first ? "SELECT * FROM (" FAILURES_QUERY ") AS t ORDER BY id DESC"
					  : "SELECT * FROM (" FAILURES_QUERY ") AS t ORDER BY id",
		     v, NV(v), failure_row, &to, err, errlen);
}

int store_kind_parse(const char *s, enum store_kind *out)
{
	static const char *const names[] = { "all", "failure", "report" };

	for (size_t i = 0; i < NV(names); i++)
		if (s && !strcmp(s, names[i])) {
			*out = (enum store_kind)i;
			return 0;
		}
	return -EINVAL;
}

bool store_failure_exists(struct store *st, uint64_t id)
{
	return exists(st, "SELECT 1 FROM failures WHERE id = ?1", id);
}

/* The window row, and that there was one (to->arg: struct window_found). */
struct window_found {
	store_window_cb cb;       /* the caller's callback */
	void *arg;                /* its argument */
	bool failure;             /* the failure exists */
	char *err;                /* where a damaged window is explained */
	size_t errlen;
	bool damaged;             /* its packed text does not unpack */
};

/* A window's text is packed (wtext.h) where it is a blob. */
static int window_row(struct db_stmt *q, const struct to *to)
{
	struct window_found *w = to->arg;
	struct store_window_row r = { 0 };
	char *unpacked = NULL;
	const void *p;
	size_t n;

	w->failure = true;
	r.has_window = !is_null(q, 0);
	r.stored = r.has_window && !is_null(q, 1);
	if (r.stored) {
		if (db_col_is_blob(q, 1) && (p = db_col_blob(q, 1, &n)) && wtext_is_packed(p, n)) {
			unpacked = wtext_unpack(p, n, STORE_WINDOW_MAX, &r.len, w->err, w->errlen);
			if (!unpacked) {
				w->damaged = true;
				return 1;
			}
			r.text = unpacked;
		} else {
			r.text = text(q, 1);
			r.len = strlen(r.text);
		}
		r.from_rec = db_col_int(q, 2);
		r.to_rec = db_col_int(q, 3);
		r.truncated = db_col_int(q, 4) != 0;
	}
	w->cb(w->arg, &r);
	free(unpacked);
	return 1;
}

int store_failure_window(struct store *st, uint64_t id, store_window_cb cb, void *arg, char *err,
			 size_t errlen)
{
	struct bl_value v[] = { db_vint((int64_t)id) };
	struct window_found w = { cb, arg, false, err, errlen, false };
	struct to to = { .arg = &w };
	int r = query(st, "SELECT f.window_id, w.text, w.from_rec, w.to_rec, w.truncated"
		      " FROM failures f LEFT JOIN windows w ON w.id = f.window_id WHERE f.id = ?1",
		      v, NV(v), window_row, &to, err, errlen);

	return r < 0 ? r : w.damaged ? -EIO : w.failure ? 0 : -ENOENT;
}

/* --- statistics and /metrics ------------------------------------------------- */

static int stats_row(struct db_stmt *q, const struct to *to)
{
	struct store_stats_row r = { .time = db_col_real(q, 0), .metrics = text(q, 1) };

	return to->cb.stats(to->arg, &r);
}

int store_stats_rows(struct store *st, const char *prog, const char *assertion, bool has_day,
		     double day_from, int limit, store_stats_row_cb cb, void *arg, char *err,
		     size_t errlen)
{
	struct bl_value v[] = { db_vtext(prog), db_vtext(assertion),
				has_day ? db_vreal(day_from) : db_vnull(), db_vint(limit) };
	struct to to = { .cb.stats = cb, .arg = arg };

	return query(st, "SELECT * FROM (SELECT coalesce(f.start_wall, f.time) AS t, f.metrics"
		     " FROM failures f JOIN instances i ON i.id = f.instance_id"
		     " WHERE i.prog = ?1 AND f.assert = ?2"
		     " AND (CAST(?3 AS DOUBLE PRECISION) IS NULL OR"
		     " (coalesce(f.start_wall, f.time) >= ?3 AND"
		     "  coalesce(f.start_wall, f.time) < ?3 + 86400))"
		     " ORDER BY f.id DESC LIMIT ?4) AS s ORDER BY t",
		     v, NV(v), stats_row, &to, err, errlen);
}

static int failure_count_row(struct db_stmt *q, const struct to *to)
{
	struct store_failure_count r = {
		.instance_id = (uint64_t)db_col_int(q, 0),
		.name = text(q, 1),
		.count = db_col_int(q, 2),
		.report = db_col_int(q, 3) != 0,
	};

	return to->cb.failure_count(to->arg, &r);
}

int store_failure_counts(struct store *st, int limit, store_failure_count_cb cb, void *arg,
			 char *err, size_t errlen)
{
	struct bl_value v[] = { db_vint(limit) };
	struct to to = { .cb.failure_count = cb, .arg = arg };

	return query(st, "SELECT instance_id, name, count, report FROM failure_counts"
		     " WHERE instance_id IN (" SHOWN_INSTANCES ") AND count > 0"
		     " ORDER BY instance_id, name, report", v, NV(v), failure_count_row, &to, err,
		     errlen);
}

static int report_row(struct db_stmt *q, const struct to *to)
{
	struct store_report_row r = {
		.instance_id = (uint64_t)db_col_int(q, 0),
		.name = text(q, 1),
		.metrics = text(q, 2),
	};

	return to->cb.report(to->arg, &r);
}

int store_newest_reports(struct store *st, int limit, store_report_row_cb cb, void *arg,
			 char *err, size_t errlen)
{
	struct bl_value v[] = { db_vint(limit) };
	struct to to = { .cb.report = cb, .arg = arg };

	/* the newest report of each name, whatever its report flag; one
	 * pruned by retention leaves its name without one until the next */
	return query(st, "SELECT f.instance_id, n.name, f.metrics FROM failures f JOIN"
		     " (SELECT instance_id, name, max(newest) AS id FROM failure_counts"
		     " WHERE instance_id IN (" SHOWN_INSTANCES ") AND newest IS NOT NULL"
		     " GROUP BY instance_id, name) n ON f.id = n.id"
		     " ORDER BY f.instance_id, n.name", v, NV(v), report_row, &to, err, errlen);
}

/* --- silences ---------------------------------------------------------------- */

static int silence_row(struct db_stmt *q, const struct to *to)
{
	struct store_silence s = {
		.id = (uint64_t)db_col_int(q, 0),
		.until = db_col_real(q, 1),
		.prog = text(q, 2),
		.machine = text(q, 3),
		.assertion = text(q, 4),
		.created = db_col_real(q, 5),
		.comment = text(q, 6),
	};

	return to->cb.silence(to->arg, &s);
}

int store_silences_list(struct store *st, double now, int limit, store_silence_row_cb cb,
			void *arg, char *err, size_t errlen)
{
	struct bl_value v[] = { db_vreal(now), db_vint(limit) };
	struct to to = { .cb.silence = cb, .arg = arg };

	return query(st, "SELECT id, until, prog, machine, assert, created, comment"
		     " FROM silences WHERE removed IS NULL AND until > ?1 ORDER BY id LIMIT ?2",
		     v, NV(v), silence_row, &to, err, errlen);
}

/* --- end-of-log verdicts ----------------------------------------------------- */

static int verdict_row(struct db_stmt *q, const struct to *to)
{
	struct store_verdict v = {
		.id = (uint64_t)db_col_int(q, 0),
		.spec = text(q, 1),
		.assertion = text(q, 2),
		.line = (int)db_col_int(q, 3),
		.result = text(q, 4),
		.offenders = db_col_int(q, 5),
		.time = db_col_real(q, 6),
		.from = (uint64_t)db_col_int(q, 7),
		.to = (uint64_t)db_col_int(q, 8),
		.partial = db_col_int(q, 9) != 0,
	};

	return to->cb.verdict(to->arg, &v);
}

int store_verdicts_list(struct store *st, uint64_t instance_id, store_verdict_row_cb cb, void *arg,
			char *err, size_t errlen)
{
	struct bl_value v[] = { db_vint((int64_t)instance_id) };
	struct to to = { .cb.verdict = cb, .arg = arg };

	return query(st, "SELECT id, spec, assert, line, result, offenders, time,"
		     " coalesce(from_rec, 0), coalesce(to_rec, 0), partial"
		     " FROM verdicts WHERE instance_id = ?1 ORDER BY id",
		     v, NV(v), verdict_row, &to, err, errlen);
}

/* --- versions of a program --------------------------------------------------- */

static int version_row(struct db_stmt *q, const struct to *to)
{
	struct store_version_row v = {
		.version = text(q, 0),
		.instances = db_col_int(q, 1),
		.running = db_col_int(q, 2),
		.first_seen = db_col_real(q, 3),
		.last_seen = db_col_real(q, 4),
		.records = db_col_int(q, 5),
		.failures = db_col_int(q, 6),
	};

	return to->cb.version(to->arg, &v);
}

int store_versions_list(struct store *st, const char *prog, double now, store_version_row_cb cb,
			void *arg, char *err, size_t errlen)
{
	struct bl_value v[] = { db_vtext(prog), db_vreal(now) };
	struct to to = { .cb.version = cb, .arg = arg };

	return query(st, "SELECT version, count(*),"
		     " CAST(sum(CASE WHEN ended IS NULL THEN 1 ELSE 0 END) AS BIGINT),"
		     " min(first_seen), max(coalesce(ended, ?2)),"
		     " CAST(sum(records) AS BIGINT), CAST(sum(failures) AS BIGINT)"
		     " FROM instances WHERE prog = ?1 GROUP BY version ORDER BY min(first_seen)",
		     v, NV(v), version_row, &to, err, errlen);
}

static int version_report_row(struct db_stmt *q, const struct to *to)
{
	return to->cb.version_report(to->arg, text(q, 0), text(q, 1));
}

int store_version_reports(struct store *st, const char *prog, const char *version,
			  const char *assertion, int limit, store_version_report_cb cb, void *arg,
			  char *err, size_t errlen)
{
	struct bl_value v[] = { db_vtext(prog), db_vtext(version),
				assertion ? db_vtext(assertion) : db_vnull(), db_vint(limit) };
	struct to to = { .cb.version_report = cb, .arg = arg };

	return query(st, "SELECT coalesce(f.assert, 'line ' || CAST(f.line AS TEXT)), f.metrics"
		     " FROM failures f JOIN instances i ON i.id = f.instance_id"
		     " WHERE i.prog = ?1 AND i.version = ?2 AND f.report = 1"
		     " AND f.metrics IS NOT NULL AND (CAST(?3 AS TEXT) IS NULL OR"
		     " coalesce(f.assert, 'line ' || CAST(f.line AS TEXT)) = ?3)"
		     " ORDER BY f.id DESC LIMIT ?4",
		     v, NV(v), version_report_row, &to, err, errlen);
}

static int version_summary_row(struct db_stmt *q, const struct to *to)
{
	return to->cb.version_summary(to->arg, text(q, 0), text(q, 1), text(q, 2));
}

int store_version_summaries(struct store *st, const char *prog, const char *version,
			    store_version_summary_cb cb, void *arg, char *err, size_t errlen)
{
	struct bl_value v[] = { db_vtext(prog), db_vtext(version) };
	struct to to = { .cb.version_summary = cb, .arg = arg };

	return query(st, "SELECT s.type, s.metric, s.sketch FROM interval_summaries s"
		     " JOIN instances i ON i.id = s.instance_id"
		     " WHERE i.prog = ?1 AND i.version = ?2 AND s.sketch IS NOT NULL ORDER BY s.id",
		     v, NV(v), version_summary_row, &to, err, errlen);
}

static int summary_row(struct db_stmt *q, const struct to *to)
{
	struct store_summary_row r = {
		.id = (uint64_t)db_col_int(q, 0),
		.prog = text(q, 1),
		.class_id = db_col_int(q, 2),
		.type = text(q, 3),
		.count = db_col_int(q, 4),
		.sum = db_col_real(q, 5),
		.sketch = text(q, 6),
	};

	return to->cb.summary(to->arg, &r);
}

int store_summaries_after(struct store *st, uint64_t after_id, int limit,
			  store_summary_row_cb cb, void *arg, char *err, size_t errlen)
{
	struct bl_value v[] = { db_vint((int64_t)after_id), db_vint(limit) };
	struct to to = { .cb.summary = cb, .arg = arg };

	return query(st, "SELECT s.id, i.prog, coalesce(i.class_id, 0), s.type, s.count,"
		     " coalesce(s.sum, 0), s.sketch FROM interval_summaries s"
		     " JOIN instances i ON i.id = s.instance_id"
		     " WHERE s.id > ?1 ORDER BY s.id LIMIT ?2",
		     v, NV(v), summary_row, &to, err, errlen);
}

/* --- time series (the dashboard's charts) -------------------------------------- */

/* The whole seconds of a time, rounded down on both backends: a CAST to an
 * integer truncates on sqlite but rounds to the nearest on PostgreSQL (a
 * failure at :59.7 would count in the next minute); floor() is not in every
 * sqlite build. */
#define FLOOR_SECONDS(t)                                                                     \
	"(CAST(" t " AS BIGINT) - CASE WHEN CAST(" t " AS BIGINT) > " t " THEN 1 ELSE 0 END)"

static int series_row(struct db_stmt *q, const struct to *to)
{
	struct store_series_row r = {
		.prog = text(q, 0),
		.name = text(q, 1),
		.report = db_col_int(q, 2) != 0,
		.bucket = db_col_int(q, 3),
		.count = db_col_int(q, 4),
	};

	return to->cb.series(to->arg, &r);
}

int store_failure_series(struct store *st, const struct store_series_query *sq,
			 store_series_row_cb cb, void *arg, char *err, size_t errlen)
{
	struct bl_value v[] = {
		db_vtext(sq->prog),
		db_vtext(sq->assertion),
		db_vreal(sq->since),
		db_vreal(sq->until),
		db_vint(sq->step),
		sq->kind == STORE_KIND_ALL ? db_vnull() : db_vint(sq->kind == STORE_KIND_REPORT),
		db_vint(sq->limit),
	};
	struct to to = { .cb.series = cb, .arg = arg };

	/* the minute (step) of a failure: its whole seconds, rounded down,
	 * divided, so that both backends count in the store with integer
	 * arithmetic and put a failure in the same minute */
	return query(st, "SELECT i.prog, coalesce(f.assert, 'line ' || CAST(f.line AS TEXT)) AS name,"
		     " f.report, " FLOOR_SECONDS("f.time") " / CAST(?5 AS BIGINT) * CAST(?5 AS BIGINT)"
		     " AS bucket,"
		     " count(*)"
		     " FROM failures f JOIN instances i ON i.id = f.instance_id"
		     " WHERE f.time >= ?3 AND f.time < ?4"
		     " AND (CAST(?1 AS TEXT) IS NULL OR i.prog = ?1)"
		     " AND (CAST(?2 AS TEXT) IS NULL OR f.assert = ?2)"
		     " AND (CAST(?6 AS BIGINT) IS NULL OR f.report = ?6)"
		     " GROUP BY i.prog, name, f.report, bucket"
		     " ORDER BY i.prog, name, f.report, bucket LIMIT ?7",
		     v, NV(v), series_row, &to, err, errlen);
}

static int duration_row(struct db_stmt *q, const struct to *to)
{
	struct store_duration_row r = {
		.prog = text(q, 0),
		.type = text(q, 1),
		.time = db_col_real(q, 2),
		.sketch = text(q, 3),
	};

	return to->cb.duration(to->arg, &r);
}

int store_duration_rows(struct store *st, const char *prog, const char *type, double since,
			double until, int limit, store_duration_row_cb cb, void *arg, char *err,
			size_t errlen)
{
	struct bl_value v[] = { db_vtext(prog), db_vtext(type), db_vreal(since), db_vreal(until),
				db_vint(limit) };
	struct to to = { .cb.duration = cb, .arg = arg };

	return query(st, "SELECT i.prog, s.type, s.time, s.sketch FROM interval_summaries s"
		     " JOIN instances i ON i.id = s.instance_id"
		     " WHERE s.time >= ?3 AND s.time < ?4 AND s.sketch IS NOT NULL"
		     " AND (CAST(?1 AS TEXT) IS NULL OR i.prog = ?1)"
		     " AND (CAST(?2 AS TEXT) IS NULL OR s.type = ?2)"
		     " ORDER BY i.prog, s.type, s.time LIMIT ?5",
		     v, NV(v), duration_row, &to, err, errlen);
}
