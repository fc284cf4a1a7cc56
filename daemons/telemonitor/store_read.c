/* Typed reads of the store (store_read.h): the queries behind telemonctl's
 * listings, the daily statistics and /metrics. Each prepares its
 * statement, hands every row to the caller as a struct and finalizes it.
 * A column's type is asked before its value is read, and each column is
 * read once, so no conversion invalidates a string handed out. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store-internal.h"
#include "store_read.h"

/* Prepare `sql` on the store's connection; -EIO with "store: ..." in err. */
static int prepare(struct store *st, const char *sql, struct db_stmt **q, char *err,
		   size_t errlen)
{
	struct db *db = store_conn(st);

	if (!(*q = db_prepare(db, sql))) {
		snprintf(err, errlen, "store: %s", db_errmsg(db));
		return -EIO;
	}
	return 0;
}

/* Run `q` with values `v`: its first row (DB_ROW), DB_DONE, or -EIO with
 * the engine's message in err (the statement is finalized then). */
static int run(struct db_stmt *q, const struct bl_value *v, size_t n, char *err, size_t errlen)
{
	enum db_rc rc = db_run(q, v, n);

	if (rc == DB_ROW || rc == DB_DONE)
		return rc;
	if (err)
		snprintf(err, errlen, "store: %s", db_errmsg(db_of(q)));
	db_finalize(q);
	return -EIO;
}

static const char *text(struct db_stmt *q, int c)
{
	return db_col_text(q, c);
}

static bool is_null(struct db_stmt *q, int c)
{
	return db_col_null(q, c);
}


/* --- instances --------------------------------------------------------------- */

int store_instances_list(struct store *st, bool all, int limit, store_instance_row_cb cb,
			 void *arg, char *err, size_t errlen)
{
	struct db_stmt *q;

	if (prepare(st, "SELECT * FROM (SELECT id, class_id, prog, machine, pid, state, want,"
			" records, bytes, lost, gaps, skipped, failures, tool_restarts,"
			" first_seen, ended, status, endpoint FROM instances"
			" WHERE ?1 = 1 OR ended IS NULL ORDER BY id DESC LIMIT ?2) AS t ORDER BY id",
		    &q, err, errlen) < 0)
		return -EIO;
	struct bl_value v[] = { db_vint(all), db_vint(limit) };
	int rc;
	for (rc = run(q, v, 2, err, errlen); rc == DB_ROW; rc = db_next(q)) {
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
		r.want = (int)db_col_int(q, 6) != 0;
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
		if (cb(arg, &r))
			break;
	}
	if (rc < 0)
		return -EIO;
	db_finalize(q);
	return 0;
}

/* True if `sql` (one id bound as ?1) gives a row. */
static bool exists(struct store *st, const char *sql, uint64_t id)
{
	struct db_stmt *q;
	bool found;

	struct bl_value v[] = { db_vint((int64_t)id) };
	int rc;

	if (!(q = db_prepare(store_conn(st), sql)))
		return false;
	rc = run(q, v, 1, NULL, 0);
	if (rc < 0)
		return false;
	found = rc == DB_ROW;
	db_finalize(q);
	return found;
}

bool store_instance_exists(struct store *st, uint64_t id)
{
	return exists(st, "SELECT 1 FROM instances WHERE id = ?1", id);
}

/* The instances /metrics shows: running first, then the most recently ended. */
#define SHOWN_INSTANCES                                                                      \
	"SELECT id FROM instances ORDER BY (ended IS NULL) DESC, coalesce(ended, 0) DESC,"   \
	" id DESC LIMIT ?1"

/* An assertion's name in labels: its label, or "line N". The store's
 * indexes failures_series and failures_reports are on this expression
 * (store_sql.c: sqlite's migration 7 -> 8, and PostgreSQL's schema):
 * change them together. */
#define ASSERT_NAME "coalesce(assert, 'line ' || CAST(line AS TEXT))"

int store_metrics_instances(struct store *st, int limit, store_instance_row_cb cb, void *arg,
			    char *err, size_t errlen)
{
	struct db_stmt *q;

	if (prepare(st, "SELECT id, class_id, prog, machine, pid, state, records, lost,"
			" gaps, bytes, tool_restarts FROM instances WHERE id IN ("
			SHOWN_INSTANCES ") ORDER BY id", &q, err, errlen) < 0)
		return -EIO;
	struct bl_value v[] = { db_vint(limit) };
	int rc;
	for (rc = run(q, v, 1, err, errlen); rc == DB_ROW; rc = db_next(q)) {
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
		if (cb(arg, &r))
			break;
	}
	if (rc < 0)
		return -EIO;
	db_finalize(q);
	return 0;
}

int store_instances_count(struct store *st, int64_t *n, char *err, size_t errlen)
{
	struct db_stmt *q;
	int64_t total = 0;

	int rc;

	if (prepare(st, "SELECT count(*) FROM instances", &q, err, errlen) < 0)
		return -EIO;
	if ((rc = run(q, NULL, 0, err, errlen)) < 0)
		return -EIO;
	if (rc == DB_ROW)
		total = db_col_int(q, 0);
	db_finalize(q);
	*n = total;
	return 0;
}

int store_instances_by_state(struct store *st, store_state_count_cb cb, void *arg)
{
	struct db_stmt *q;

	int rc;

	if (!(q = db_prepare(store_conn(st), "SELECT state, count(*) FROM instances"
			     " GROUP BY state")))
		return -EIO;
	for (rc = run(q, NULL, 0, NULL, 0); rc == DB_ROW; rc = db_next(q)) {
		struct store_state_count r;
		r.state = text(q, 0);
		r.count = db_col_int(q, 1);
		if (cb(arg, &r))
			break;
	}
	if (rc < 0)
		return -EIO;
	db_finalize(q);
	return 0;
}

/* --- failures ---------------------------------------------------------------- */

/* The latest failures matching ?1 prog, ?2 assert, ?3 since, ?4 instance,
 * ?6 before (ids below it), at most ?5 of them. */
#define FAILURES_QUERY                                                                  \
	"SELECT f.id, i.prog, i.machine, i.pid, f.assert,"                              \
	" f.line, f.time, f.start_ts, f.end_ts, f.metrics, f.spec, f.result,"           \
	" f.kind, f.type, f.uid, f.start_pos, f.end_pos, f.instance_id,"                \
	" f.window_id, f.start_wall, f.report, f.silence_id, f.acked,"                  \
	" f.ack_comment"                                                                \
	" FROM failures f JOIN instances i ON i.id = f.instance_id"                     \
	" WHERE (CAST(?1 AS TEXT) IS NULL OR i.prog = ?1)"                              \
	" AND (CAST(?2 AS TEXT) IS NULL OR f.assert = ?2)"                              \
	" AND (CAST(?3 AS DOUBLE PRECISION) IS NULL OR f.time >= ?3)"                               \
	" AND (CAST(?4 AS BIGINT) IS NULL OR f.instance_id = ?4)"                       \
	" AND (CAST(?6 AS BIGINT) IS NULL OR f.id < ?6)"                                \
	" ORDER BY f.id DESC LIMIT ?5"

int store_failures_list(struct store *st, const struct store_failure_query *fq,
			store_failure_row_cb cb, void *arg, char *err, size_t errlen)
{
	struct db_stmt *q;

	/* the latest `limit` (before failure `before_id`), oldest or newest first */
	if (prepare(st, fq->newest_first ? "SELECT * FROM (" FAILURES_QUERY ") AS t ORDER BY id DESC"
					 : "SELECT * FROM (" FAILURES_QUERY ") AS t ORDER BY id",
		    &q, err, errlen) < 0)
		return -EIO;
	struct bl_value v[] = {
		db_vtext(fq->prog), db_vtext(fq->assertion), fq->has_since ? db_vreal(fq->since) : db_vnull(),
		fq->instance_id ? db_vint((int64_t)fq->instance_id) : db_vnull(), db_vint(fq->limit),
		fq->before_id ? db_vint((int64_t)fq->before_id) : db_vnull(),
	};
	int rc;
	for (rc = run(q, v, 6, err, errlen); rc == DB_ROW; rc = db_next(q)) {
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
		r.report = (int)db_col_int(q, 20) != 0;
		r.silence_id = r.has_silence ? (uint64_t)db_col_int(q, 21) : 0;
		r.acked = r.has_acked ? db_col_real(q, 22) : 0;
		r.ack_comment = text(q, 23);
		if (cb(arg, &r))
			break;
	}
	if (rc < 0)
		return -EIO;
	db_finalize(q);
	return 0;
}

bool store_failure_exists(struct store *st, uint64_t id)
{
	return exists(st, "SELECT 1 FROM failures WHERE id = ?1", id);
}

int store_failure_window(struct store *st, uint64_t id, store_window_cb cb, void *arg, char *err,
			 size_t errlen)
{
	struct store_window_row r = { 0 };
	struct db_stmt *q;

	if (prepare(st, "SELECT f.window_id, w.text, w.from_rec, w.to_rec, w.truncated"
			" FROM failures f LEFT JOIN windows w ON w.id = f.window_id"
			" WHERE f.id = ?1", &q, err, errlen) < 0)
		return -EIO;
	struct bl_value v[] = { db_vint((int64_t)id) };
	int rc = run(q, v, 1, err, errlen);
	if (rc < 0)
		return -EIO;
	if (rc != DB_ROW) {
		db_finalize(q);
		return -ENOENT;
	}
	r.has_window = !is_null(q, 0);
	r.stored = r.has_window && !is_null(q, 1);
	if (r.stored) {
		r.text = text(q, 1);
		r.len = strlen(r.text);
		r.from_rec = db_col_int(q, 2);
		r.to_rec = db_col_int(q, 3);
		r.truncated = (int)db_col_int(q, 4) != 0;
	}
	cb(arg, &r);
	db_finalize(q);
	return 0;
}

/* --- statistics and /metrics ------------------------------------------------- */

int store_stats_rows(struct store *st, const char *prog, const char *assertion, bool has_day,
		     double day_from, int limit, store_stats_row_cb cb, void *arg, char *err,
		     size_t errlen)
{
	struct db_stmt *q;

	if (prepare(st, "SELECT * FROM (SELECT coalesce(f.start_wall, f.time) AS t, f.metrics"
			" FROM failures f JOIN instances i ON i.id = f.instance_id"
			" WHERE i.prog = ?1 AND f.assert = ?2 AND (CAST(?3 AS DOUBLE PRECISION) IS NULL OR"
			" (coalesce(f.start_wall, f.time) >= ?3 AND"
			"  coalesce(f.start_wall, f.time) < ?3 + 86400))"
			" ORDER BY f.id DESC LIMIT ?4) AS s ORDER BY t", &q, err, errlen) < 0)
		return -EIO;
	struct bl_value v[] = { db_vtext(prog), db_vtext(assertion), has_day ? db_vreal(day_from) : db_vnull(),
				db_vint(limit) };
	int rc;
	for (rc = run(q, v, 4, err, errlen); rc == DB_ROW; rc = db_next(q)) {
		struct store_stats_row r;
		r.time = db_col_real(q, 0);
		r.metrics = text(q, 1);
		if (cb(arg, &r))
			break;
	}
	if (rc < 0)
		return -EIO;
	db_finalize(q);
	return 0;
}

int store_failure_counts(struct store *st, int limit, store_failure_count_cb cb, void *arg,
			 char *err, size_t errlen)
{
	struct db_stmt *q;

	if (prepare(st, "SELECT instance_id, " ASSERT_NAME ", count(*) FROM failures"
			" WHERE instance_id IN (" SHOWN_INSTANCES ")"
			" AND (result IS NULL OR result <> 'inconclusive')"
			" GROUP BY instance_id, " ASSERT_NAME, &q, err, errlen) < 0)
		return -EIO;
	struct bl_value v[] = { db_vint(limit) };
	int rc;
	for (rc = run(q, v, 1, err, errlen); rc == DB_ROW; rc = db_next(q)) {
		struct store_failure_count r;
		r.instance_id = (uint64_t)db_col_int(q, 0);
		r.name = text(q, 1);
		r.count = db_col_int(q, 2);
		if (cb(arg, &r))
			break;
	}
	if (rc < 0)
		return -EIO;
	db_finalize(q);
	return 0;
}

int store_newest_reports(struct store *st, int limit, store_report_row_cb cb, void *arg,
			 char *err, size_t errlen)
{
	struct db_stmt *q;

	if (prepare(st, "SELECT instance_id, " ASSERT_NAME ", metrics FROM failures"
			" WHERE id IN (SELECT max(id) FROM failures WHERE instance_id IN ("
			SHOWN_INSTANCES ") AND metrics IS NOT NULL"
			" GROUP BY instance_id, " ASSERT_NAME ")"
			" ORDER BY instance_id, " ASSERT_NAME, &q, err, errlen) < 0)
		return -EIO;
	struct bl_value v[] = { db_vint(limit) };
	int rc;
	for (rc = run(q, v, 1, err, errlen); rc == DB_ROW; rc = db_next(q)) {
		struct store_report_row r;
		r.instance_id = (uint64_t)db_col_int(q, 0);
		r.name = text(q, 1);
		r.metrics = text(q, 2);
		if (cb(arg, &r))
			break;
	}
	if (rc < 0)
		return -EIO;
	db_finalize(q);
	return 0;
}

/* --- silences ---------------------------------------------------------------- */

int store_silences_list(struct store *st, double now, int limit, store_silence_row_cb cb,
			void *arg, char *err, size_t errlen)
{
	struct db_stmt *q;

	if (prepare(st, "SELECT id, until, prog, machine, assert, created, comment"
			" FROM silences WHERE removed IS NULL AND until > ?1 ORDER BY id"
			" LIMIT ?2", &q, err, errlen) < 0)
		return -EIO;
	struct bl_value v[] = { db_vreal(now), db_vint(limit) };
	int rc;
	for (rc = run(q, v, 2, err, errlen); rc == DB_ROW; rc = db_next(q)) {
		struct store_silence s;
		s.id = (uint64_t)db_col_int(q, 0);
		s.until = db_col_real(q, 1);
		s.prog = text(q, 2);
		s.machine = text(q, 3);
		s.assertion = text(q, 4);
		s.created = db_col_real(q, 5);
		s.comment = text(q, 6);
		if (cb(arg, &s))
			break;
	}
	if (rc < 0)
		return -EIO;
	db_finalize(q);
	return 0;
}
