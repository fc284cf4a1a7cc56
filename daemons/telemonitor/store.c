/* The telemonitor's sqlite store (see store.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmon/log.h"
#include "store.h"

/* Schema migrations: migrations[i] upgrades version i to i + 1. Never edit
 * a released one; add the next. */
static const char *const migrations[] = {
	/* 0 -> 1: the first schema */
	"CREATE TABLE classes ("
	"  id INTEGER PRIMARY KEY,"
	"  prog TEXT NOT NULL, machine TEXT NOT NULL, pid TEXT NOT NULL,"
	"  tool TEXT, spec TEXT, mail TEXT, window TEXT, mailgroup REAL,"
	"  block INTEGER NOT NULL, auto INTEGER NOT NULL,"
	"  active INTEGER NOT NULL DEFAULT 1, updated REAL,"
	"  UNIQUE (prog, machine, pid));"
	"CREATE TABLE instances ("
	"  id INTEGER PRIMARY KEY,"
	"  class_id INTEGER,"
	"  prog TEXT NOT NULL, machine TEXT NOT NULL, pid INTEGER NOT NULL,"
	"  start_ns INTEGER NOT NULL,"
	"  endpoint TEXT, tls INTEGER NOT NULL DEFAULT 0,"
	"  first_seen REAL NOT NULL, ended REAL,"
	"  state TEXT NOT NULL DEFAULT 'listed', want INTEGER NOT NULL DEFAULT 0,"
	"  bytes INTEGER NOT NULL DEFAULT 0, records INTEGER NOT NULL DEFAULT 0,"
	"  lost INTEGER NOT NULL DEFAULT 0, gaps INTEGER NOT NULL DEFAULT 0,"
	"  skipped INTEGER NOT NULL DEFAULT 0, failures INTEGER NOT NULL DEFAULT 0,"
	"  tool_restarts INTEGER NOT NULL DEFAULT 0, status TEXT,"
	"  UNIQUE (prog, machine, pid, start_ns));"
	"CREATE INDEX instances_open ON instances (ended) WHERE ended IS NULL;"
	"CREATE TABLE failures ("
	"  id INTEGER PRIMARY KEY,"
	"  instance_id INTEGER NOT NULL,"
	"  spec TEXT, assert TEXT, line INTEGER, result TEXT, kind TEXT, type TEXT, uid INTEGER,"
	"  start_pos TEXT, end_pos TEXT, start_rec INTEGER, end_rec INTEGER,"
	"  start_ts INTEGER, end_ts INTEGER,"
	"  time REAL NOT NULL, start_wall REAL,"
	"  metrics TEXT, window_id INTEGER);"
	"CREATE INDEX failures_instance ON failures (instance_id);"
	"CREATE INDEX failures_assert ON failures (assert, time);"
	"CREATE INDEX failures_time ON failures (time);"
	"CREATE TABLE windows ("
	"  id INTEGER PRIMARY KEY,"
	"  instance_id INTEGER NOT NULL,"
	"  from_rec INTEGER, to_rec INTEGER, truncated INTEGER NOT NULL DEFAULT 0,"
	"  text TEXT NOT NULL);"
	"CREATE TABLE verdicts ("
	"  id INTEGER PRIMARY KEY,"
	"  instance_id INTEGER NOT NULL,"
	"  spec TEXT, assert TEXT, line INTEGER, result TEXT, offenders INTEGER,"
	"  time REAL NOT NULL);"
	"CREATE INDEX verdicts_instance ON verdicts (instance_id);",
	/* 1 -> 2: mail survives a restart. mail_queue holds the mails not yet
	 * accepted by the relay (a row is deleted when it is); mail_digest the
	 * failures waiting for their group's digest, due at `due` (deleted
	 * when the digest is composed into mail_queue, in the same batch). */
	"CREATE TABLE mail_queue ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  queued REAL NOT NULL,"
	"  recipients TEXT NOT NULL, subject TEXT NOT NULL, body TEXT NOT NULL,"
	"  failures INTEGER NOT NULL);"
	"CREATE TABLE mail_digest ("
	"  id INTEGER PRIMARY KEY,"
	"  failure_id INTEGER NOT NULL, instance_id INTEGER NOT NULL,"
	"  prog TEXT NOT NULL, machine TEXT NOT NULL, pid INTEGER NOT NULL,"
	"  spec TEXT, assert TEXT NOT NULL, line INTEGER NOT NULL,"
	"  time REAL NOT NULL, what TEXT, start_ts INTEGER, end_ts INTEGER, metrics TEXT,"
	"  recipients TEXT NOT NULL, period REAL NOT NULL, due REAL NOT NULL);"
	"CREATE INDEX mail_digest_group ON mail_digest (instance_id, assert, line);",
	/* 2 -> 3: the instance's token (snarflog asks for it in Start), so a
	 * restarted telemonitor re-attaches without waiting for the registry. */
	"ALTER TABLE instances ADD COLUMN token BLOB;",
};

#define NMIGRATIONS (sizeof migrations / sizeof migrations[0])
_Static_assert(NMIGRATIONS == STORE_SCHEMA_VERSION, "one migration per schema version");

/* Prepared statements: X(name, sql). */
#define STORE_STMTS(X)                                                                       \
	X(BEGIN, "BEGIN")                                                                    \
	X(COMMIT, "COMMIT")                                                                  \
	X(CLASS_UPSERT,                                                                      \
	  "INSERT INTO classes (prog, machine, pid, tool, spec, mail, window, mailgroup,"   \
	  " block, auto, active, updated) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,1,?11)"     \
	  " ON CONFLICT (prog, machine, pid) DO UPDATE SET tool=?4, spec=?5, mail=?6,"      \
	  " window=?7, mailgroup=?8, block=?9, auto=?10, active=1, updated=?11"            \
	  " RETURNING id")                                                                   \
	X(INST_LOOKUP,                                                                       \
	  "SELECT id, bytes, records, lost, gaps, skipped, failures, tool_restarts, want"   \
	  " FROM instances WHERE prog=?1 AND machine=?2 AND pid=?3 AND start_ns=?4")        \
	X(INST_INSERT,                                                                       \
	  "INSERT INTO instances (class_id, prog, machine, pid, start_ns, endpoint, tls,"   \
	  " first_seen, state, want, status, token)"                                        \
	  " VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)")                                \
	X(INST_SAVE,                                                                         \
	  "UPDATE instances SET class_id=?2, endpoint=?3, state=?4, want=?5, bytes=?6,"     \
	  " records=?7, lost=?8, gaps=?9, skipped=?10, failures=?11, tool_restarts=?12,"    \
	  " status=?13, token=coalesce(?14, token) WHERE id=?1")                             \
	X(INST_OPEN,                                                                         \
	  "SELECT id, class_id, prog, machine, pid, start_ns, endpoint, tls, state, want,"  \
	  " bytes, records, lost, gaps, skipped, failures, tool_restarts, status, token"    \
	  " FROM instances WHERE ended IS NULL ORDER BY id")                                 \
	X(INST_END, "UPDATE instances SET ended=?2, state=?3 WHERE id=?1 AND ended IS NULL") \
	X(FAIL_INSERT,                                                                       \
	  "INSERT INTO failures (instance_id, spec, assert, line, result, kind, type, uid," \
	  " start_pos, end_pos, start_rec, end_rec, start_ts, end_ts, time, start_wall,"    \
	  " metrics, window_id) VALUES"                                                      \
	  " (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18)")               \
	X(WIN_INSERT,                                                                        \
	  "INSERT OR REPLACE INTO windows (id, instance_id, from_rec, to_rec, truncated,"   \
	  " text) VALUES (?1,?2,?3,?4,?5,?6)")                                               \
	X(REPORT,                                                                            \
	  "SELECT json_type(j,'$.print'), json_extract(j,'$.print'), json_extract(j,'$.spec')," \
	  " json_extract(j,'$.assert'), json_extract(j,'$.line'), json_extract(j,'$.result')," \
	  " json_extract(j,'$.kind'), json_extract(j,'$.type'), json_extract(j,'$.uid'),"     \
	  " json_extract(j,'$.start'), json_extract(j,'$.end'), json_type(j,'$.start_ts'),"   \
	  " json_extract(j,'$.start_ts'), json_extract(j,'$.end_ts'),"                       \
	  " json_extract(j,'$.metrics'), json_type(j,'$.offenders'),"                        \
	  " json_extract(j,'$.offenders'), json_type(j,'$.metrics')"                         \
	  " FROM (SELECT ?1 AS j) WHERE json_valid(j) AND json_type(j) = 'object'")           \
	X(VERDICT_INSERT,                                                                    \
	  "INSERT INTO verdicts (instance_id, spec, assert, line, result, offenders, time)"  \
	  " VALUES (?1,?2,?3,?4,?5,?6,?7)")                                                  \
	X(MAIL_INSERT,                                                                       \
	  "INSERT INTO mail_queue (queued, recipients, subject, body, failures)"             \
	  " VALUES (?1,?2,?3,?4,?5)")                                                        \
	X(MAIL_DELETE, "DELETE FROM mail_queue WHERE id=?1")                                 \
	X(MAIL_LOAD,                                                                         \
	  "SELECT id, queued, recipients, subject, body, failures FROM mail_queue"          \
	  " ORDER BY id")                                                                    \
	X(DIGEST_INSERT,                                                                     \
	  "INSERT INTO mail_digest (failure_id, instance_id, prog, machine, pid, spec,"     \
	  " assert, line, time, what, start_ts, end_ts, metrics, recipients, period, due)"  \
	  " VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16)")                \
	X(DIGEST_DELETE,                                                                     \
	  "DELETE FROM mail_digest WHERE instance_id=?1 AND assert=?2 AND line=?3")         \
	X(DIGEST_LOAD,                                                                       \
	  "SELECT failure_id, instance_id, prog, machine, pid, spec, assert, line, time,"   \
	  " what, start_ts, end_ts, metrics, recipients, period, due FROM mail_digest"      \
	  " ORDER BY id")

enum store_stmt {
#define STMT_ENUM(n, s) ST_##n,
	STORE_STMTS(STMT_ENUM)
#undef STMT_ENUM
	ST_COUNT /* number of statements */
};

static const char *const stmt_sql[ST_COUNT] = {
#define STMT_SQL(n, s) [ST_##n] = s,
	STORE_STMTS(STMT_SQL)
#undef STMT_SQL
};

/* The store. */
struct store {
	sqlite3 *db;                  /* the connection */
	sqlite3_stmt *stmt[ST_COUNT]; /* prepared statements */
	bool in_batch;                /* a write transaction is open */
	uint64_t next_window;         /* next window id to hand out */
	int version;                  /* schema version */
	store_commit_cb on_commit;    /* called after each batch is ended */
	void *on_commit_arg;          /* its argument */
};

static const char *state_names[] = {
	[IS_LISTED] = "listed", [IS_MONITORING] = "monitoring", [IS_RETRYING] = "retrying",
	[IS_BUSY] = "busy", [IS_STOPPED] = "stopped", [IS_ENDED] = "ended", [IS_GONE] = "gone",
};

const char *inst_state_name(enum inst_state st)
{
	return (unsigned)st < sizeof state_names / sizeof *state_names ? state_names[st] : "?";
}

static enum inst_state state_from_name(const char *s)
{
	for (size_t i = 0; i < sizeof state_names / sizeof *state_names; i++)
		if (s && !strcmp(s, state_names[i]))
			return (enum inst_state)i;
	return IS_LISTED;
}

static int db_fail(struct store *st, const char *what)
{
	cmon_err("store: %s: %s", what, sqlite3_errmsg(st->db));
	return -EIO;
}

static int exec(struct store *st, const char *sql, const char *what)
{
	char *msg = NULL;

	if (sqlite3_exec(st->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		cmon_err("store: %s: %s", what, msg ? msg : sqlite3_errmsg(st->db));
		sqlite3_free(msg);
		return -EIO;
	}
	return 0;
}

/* Bring the schema up to STORE_SCHEMA_VERSION. */
static int migrate(struct store *st, char *err, size_t errlen)
{
	sqlite3_stmt *q;
	int v = 0;

	if (sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &q, NULL) != SQLITE_OK)
		goto fail;
	if (sqlite3_step(q) == SQLITE_ROW)
		v = sqlite3_column_int(q, 0);
	sqlite3_finalize(q);
	if (v > STORE_SCHEMA_VERSION) {
		snprintf(err, errlen, "the database's schema version %d is newer than this "
			 "telemonitor's (%d); use a newer telemonitor", v, STORE_SCHEMA_VERSION);
		return -EINVAL;
	}
	for (; v < STORE_SCHEMA_VERSION; v++) {
		char bump[64];
		snprintf(bump, sizeof bump, "PRAGMA user_version = %d", v + 1);
		if (exec(st, "BEGIN IMMEDIATE", "migration") < 0)
			goto fail;
		if (exec(st, migrations[v], "migration") < 0 || exec(st, bump, "migration") < 0 ||
		    exec(st, "COMMIT", "migration") < 0) {
			exec(st, "ROLLBACK", "migration");
			goto fail;
		}
		cmon_info("store: schema upgraded to version %d", v + 1);
	}
	st->version = v;
	return 0;
fail:
	snprintf(err, errlen, "cannot set up the database schema: %s", sqlite3_errmsg(st->db));
	return -EIO;
}

struct store *store_open(const char *dir, char *err, size_t errlen)
{
	struct store *st = calloc(1, sizeof *st);
	char path[PATH_MAX];
	sqlite3_stmt *q;

	if (!st) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(path, sizeof path, "%s/telemonitor.db", dir);
	if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, st->db ? sqlite3_errmsg(st->db) : "cannot open");
		goto out_close;
	}
	sqlite3_busy_timeout(st->db, 5000);
	if (exec(st, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
		     " PRAGMA foreign_keys = OFF; PRAGMA temp_store = MEMORY;", "pragmas") < 0) {
		snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(st->db));
		goto out_close;
	}
	if (migrate(st, err, errlen) < 0)
		goto out_close;
	for (int i = 0; i < ST_COUNT; i++)
		if (sqlite3_prepare_v3(st->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
				       &st->stmt[i], NULL) != SQLITE_OK) {
			snprintf(err, errlen, "preparing statement %d: %s", i, sqlite3_errmsg(st->db));
			goto out_close;
		}
	if (sqlite3_prepare_v2(st->db, "SELECT coalesce(max(id), 0) + 1 FROM windows", -1, &q,
			       NULL) == SQLITE_OK) {
		if (sqlite3_step(q) == SQLITE_ROW)
			st->next_window = (uint64_t)sqlite3_column_int64(q, 0);
		sqlite3_finalize(q);
	}
	if (!st->next_window)
		st->next_window = 1;
	return st;
out_close:
	store_close(st);
	return NULL;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	if (st->in_batch)
		store_commit(st);
	for (int i = 0; i < ST_COUNT; i++)
		sqlite3_finalize(st->stmt[i]);
	sqlite3_close(st->db);
	free(st);
}

sqlite3 *store_db(struct store *st)
{
	return st->db;
}

int store_version(struct store *st)
{
	return st->version;
}

bool store_pending(const struct store *st)
{
	return st->in_batch;
}

/* Run a prepared write statement to completion and reset it. */
static int run(struct store *st, sqlite3_stmt *q, const char *what)
{
	int rc = sqlite3_step(q);

	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return db_fail(st, what);
	return 0;
}

/* Open the batch transaction if it is not open yet. */
static int batch(struct store *st)
{
	if (st->in_batch)
		return 0;
	if (run(st, st->stmt[ST_BEGIN], "begin") < 0)
		return -EIO;
	st->in_batch = true;
	return 0;
}

int store_commit(struct store *st)
{
	int r = 0;

	if (!st->in_batch)
		return 0;
	st->in_batch = false;
	if (run(st, st->stmt[ST_COMMIT], "commit") < 0) {
		exec(st, "ROLLBACK", "rollback");
		r = -EIO;
	}
	if (st->on_commit)
		st->on_commit(st->on_commit_arg, r == 0);
	return r;
}

void store_set_commit_cb(struct store *st, store_commit_cb cb, void *arg)
{
	st->on_commit = cb;
	st->on_commit_arg = arg;
}

static void bind_text(sqlite3_stmt *q, int i, const char *s)
{
	if (s)
		sqlite3_bind_text(q, i, s, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(q, i);
}

int store_class_save(struct store *st, struct tm_class *c)
{
	sqlite3_stmt *q = st->stmt[ST_CLASS_UPSERT];
	int rc;

	if (batch(st) < 0)
		return -EIO;
	bind_text(q, 1, c->prog);
	bind_text(q, 2, c->machine);
	bind_text(q, 3, c->pid);
	bind_text(q, 4, c->tool);
	bind_text(q, 5, c->spec);
	bind_text(q, 6, c->mail);
	bind_text(q, 7, c->window_text);
	sqlite3_bind_double(q, 8, c->mailgroup);
	sqlite3_bind_int(q, 9, c->block);
	sqlite3_bind_int(q, 10, c->autostart);
	sqlite3_bind_double(q, 11, tm_now());
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW)
		c->id = (uint32_t)sqlite3_column_int64(q, 0);
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	return rc == SQLITE_ROW ? 0 : db_fail(st, "saving a class");
}

int store_classes_keep(struct store *st, const uint32_t *keep, size_t n)
{
	sqlite3_stmt *q;
	int rc;

	if (batch(st) < 0)
		return -EIO;
	if (exec(st, "UPDATE classes SET active = 2 WHERE active = 1", "classes") < 0)
		return -EIO;
	if (sqlite3_prepare_v2(st->db, "UPDATE classes SET active = 1 WHERE id = ?1", -1, &q,
			       NULL) != SQLITE_OK)
		return db_fail(st, "classes");
	for (size_t i = 0; i < n; i++) {
		sqlite3_bind_int64(q, 1, keep[i]);
		rc = sqlite3_step(q);
		sqlite3_reset(q);
		if (rc != SQLITE_DONE) {
			sqlite3_finalize(q);
			return db_fail(st, "classes");
		}
	}
	sqlite3_finalize(q);
	return exec(st, "UPDATE classes SET active = 0 WHERE active = 2", "classes");
}

int store_instance_lookup(struct store *st, struct tm_instance *in)
{
	sqlite3_stmt *q = st->stmt[ST_INST_LOOKUP];
	int rc;

	bind_text(q, 1, in->prog);
	bind_text(q, 2, in->machine);
	sqlite3_bind_int64(q, 3, in->pid);
	sqlite3_bind_int64(q, 4, in->start_ns);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		in->id = (uint64_t)sqlite3_column_int64(q, 0);
		in->bytes = (uint64_t)sqlite3_column_int64(q, 1);
		in->records = (uint64_t)sqlite3_column_int64(q, 2);
		in->lost = (uint64_t)sqlite3_column_int64(q, 3);
		in->gaps = (uint64_t)sqlite3_column_int64(q, 4);
		in->skipped = (uint64_t)sqlite3_column_int64(q, 5);
		in->failures = (uint64_t)sqlite3_column_int64(q, 6);
		in->tool_restarts = (unsigned)sqlite3_column_int(q, 7);
		in->want = sqlite3_column_int(q, 8) != 0;
	}
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return db_fail(st, "looking up an instance");
	return rc == SQLITE_ROW;
}

int store_instance_insert(struct store *st, struct tm_instance *in)
{
	sqlite3_stmt *q = st->stmt[ST_INST_INSERT];

	if (batch(st) < 0)
		return -EIO;
	if (in->class_id)
		sqlite3_bind_int64(q, 1, in->class_id);
	bind_text(q, 2, in->prog);
	bind_text(q, 3, in->machine);
	sqlite3_bind_int64(q, 4, in->pid);
	sqlite3_bind_int64(q, 5, in->start_ns);
	bind_text(q, 6, in->endpoint);
	sqlite3_bind_int(q, 7, in->tls);
	sqlite3_bind_double(q, 8, tm_now());
	bind_text(q, 9, inst_state_name(in->state));
	sqlite3_bind_int(q, 10, in->want);
	bind_text(q, 11, in->status);
	if (in->has_token)
		sqlite3_bind_blob(q, 12, in->token, CMON_TOKEN_LEN, SQLITE_STATIC);
	if (run(st, q, "adding an instance") < 0)
		return -EIO;
	in->id = (uint64_t)sqlite3_last_insert_rowid(st->db);
	return 0;
}

int store_instance_save(struct store *st, const struct tm_instance *in)
{
	sqlite3_stmt *q = st->stmt[ST_INST_SAVE];

	if (batch(st) < 0)
		return -EIO;
	sqlite3_bind_int64(q, 1, (sqlite3_int64)in->id);
	if (in->class_id)
		sqlite3_bind_int64(q, 2, in->class_id);
	bind_text(q, 3, in->endpoint);
	bind_text(q, 4, inst_state_name(in->state));
	sqlite3_bind_int(q, 5, in->want);
	sqlite3_bind_int64(q, 6, (sqlite3_int64)in->bytes);
	sqlite3_bind_int64(q, 7, (sqlite3_int64)in->records);
	sqlite3_bind_int64(q, 8, (sqlite3_int64)in->lost);
	sqlite3_bind_int64(q, 9, (sqlite3_int64)in->gaps);
	sqlite3_bind_int64(q, 10, (sqlite3_int64)in->skipped);
	sqlite3_bind_int64(q, 11, (sqlite3_int64)in->failures);
	sqlite3_bind_int(q, 12, (int)in->tool_restarts);
	bind_text(q, 13, in->status);
	if (in->has_token)
		sqlite3_bind_blob(q, 14, in->token, CMON_TOKEN_LEN, SQLITE_STATIC);
	return run(st, q, "saving an instance");
}

static void copy_col(char *dst, size_t size, sqlite3_stmt *q, int col)
{
	const unsigned char *s = sqlite3_column_text(q, col);

	snprintf(dst, size, "%s", s ? (const char *)s : "");
}

int store_instances_open(struct store *st, store_instance_cb cb, void *arg)
{
	sqlite3_stmt *q = st->stmt[ST_INST_OPEN];
	int rc;

	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		struct tm_instance in = { 0 };
		char state[32];
		in.id = (uint64_t)sqlite3_column_int64(q, 0);
		in.class_id = (uint32_t)sqlite3_column_int64(q, 1);
		copy_col(in.prog, sizeof in.prog, q, 2);
		copy_col(in.machine, sizeof in.machine, q, 3);
		in.pid = sqlite3_column_int64(q, 4);
		in.start_ns = sqlite3_column_int64(q, 5);
		copy_col(in.endpoint, sizeof in.endpoint, q, 6);
		in.tls = sqlite3_column_int(q, 7) != 0;
		copy_col(state, sizeof state, q, 8);
		in.state = state_from_name(state);
		in.want = sqlite3_column_int(q, 9) != 0;
		in.bytes = (uint64_t)sqlite3_column_int64(q, 10);
		in.records = (uint64_t)sqlite3_column_int64(q, 11);
		in.lost = (uint64_t)sqlite3_column_int64(q, 12);
		in.gaps = (uint64_t)sqlite3_column_int64(q, 13);
		in.skipped = (uint64_t)sqlite3_column_int64(q, 14);
		in.failures = (uint64_t)sqlite3_column_int64(q, 15);
		in.tool_restarts = (unsigned)sqlite3_column_int(q, 16);
		copy_col(in.status, sizeof in.status, q, 17);
		if (sqlite3_column_bytes(q, 18) == CMON_TOKEN_LEN) {
			in.has_token = true;
			memcpy(in.token, sqlite3_column_blob(q, 18), CMON_TOKEN_LEN);
		}
		cb(arg, &in);
	}
	sqlite3_reset(q);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "listing instances");
}

int store_instance_end(struct store *st, uint64_t id, enum inst_state state, double when)
{
	sqlite3_stmt *q = st->stmt[ST_INST_END];

	if (batch(st) < 0)
		return -EIO;
	sqlite3_bind_int64(q, 1, (sqlite3_int64)id);
	sqlite3_bind_double(q, 2, when);
	bind_text(q, 3, inst_state_name(state));
	return run(st, q, "ending an instance");
}

int store_instances_reap(struct store *st, const uint64_t *live, size_t n, double when)
{
	sqlite3_stmt *q;
	int rc = 0;

	if (batch(st) < 0)
		return -EIO;
	if (exec(st, "CREATE TEMP TABLE IF NOT EXISTS live_ids (id INTEGER PRIMARY KEY);"
		     "DELETE FROM live_ids;", "reap") < 0)
		return -EIO;
	if (sqlite3_prepare_v2(st->db, "INSERT OR IGNORE INTO live_ids VALUES (?1)", -1, &q,
			       NULL) != SQLITE_OK)
		return db_fail(st, "reap");
	for (size_t i = 0; i < n && rc == 0; i++) {
		sqlite3_bind_int64(q, 1, (sqlite3_int64)live[i]);
		if (sqlite3_step(q) != SQLITE_DONE)
			rc = -EIO;
		sqlite3_reset(q);
	}
	sqlite3_finalize(q);
	if (rc < 0)
		return db_fail(st, "reap");
	if (sqlite3_prepare_v2(st->db, "UPDATE instances SET ended = ?1, state = 'gone', "
				       "status = 'ended while the telemonitor was away' "
				       "WHERE ended IS NULL AND id NOT IN (SELECT id FROM live_ids)",
			       -1, &q, NULL) != SQLITE_OK)
		return db_fail(st, "reap");
	sqlite3_bind_double(q, 1, when);
	rc = sqlite3_step(q) == SQLITE_DONE ? 0 : -EIO;
	sqlite3_finalize(q);
	return rc < 0 ? db_fail(st, "reap") : 0;
}

int store_add_failure(struct store *st, const struct store_failure *f, uint64_t *id)
{
	sqlite3_stmt *q = st->stmt[ST_FAIL_INSERT];

	if (batch(st) < 0)
		return -EIO;
	sqlite3_bind_int64(q, 1, (sqlite3_int64)f->instance_id);
	bind_text(q, 2, f->spec);
	bind_text(q, 3, f->assertion);
	sqlite3_bind_int(q, 4, f->line);
	bind_text(q, 5, f->result);
	bind_text(q, 6, f->kind);
	bind_text(q, 7, f->type);
	if (f->uid >= 0)
		sqlite3_bind_int64(q, 8, f->uid);
	bind_text(q, 9, f->start);
	bind_text(q, 10, f->end);
	if (f->start_pos)
		sqlite3_bind_int64(q, 11, (sqlite3_int64)f->start_pos);
	if (f->end_pos)
		sqlite3_bind_int64(q, 12, (sqlite3_int64)f->end_pos);
	if (f->has_ts) {
		sqlite3_bind_int64(q, 13, f->start_ts);
		sqlite3_bind_int64(q, 14, f->end_ts);
	}
	sqlite3_bind_double(q, 15, f->time);
	if (f->start_wall > 0)
		sqlite3_bind_double(q, 16, f->start_wall);
	bind_text(q, 17, f->metrics);
	if (f->window_id)
		sqlite3_bind_int64(q, 18, (sqlite3_int64)f->window_id);
	if (run(st, q, "adding a failure") < 0)
		return -EIO;
	*id = (uint64_t)sqlite3_last_insert_rowid(st->db);
	return 0;
}

sqlite3_stmt *store_report_stmt(struct store *st)
{
	return st->stmt[ST_REPORT];
}

uint64_t store_next_window_id(struct store *st)
{
	return st->next_window++;
}

int store_add_window(struct store *st, uint64_t id, uint64_t instance_id, uint64_t from,
		     uint64_t to, bool truncated, const char *text, size_t len)
{
	sqlite3_stmt *q = st->stmt[ST_WIN_INSERT];

	if (len > STORE_WINDOW_MAX)
		len = STORE_WINDOW_MAX;
	if (batch(st) < 0)
		return -EIO;
	sqlite3_bind_int64(q, 1, (sqlite3_int64)id);
	sqlite3_bind_int64(q, 2, (sqlite3_int64)instance_id);
	sqlite3_bind_int64(q, 3, (sqlite3_int64)from);
	sqlite3_bind_int64(q, 4, (sqlite3_int64)to);
	sqlite3_bind_int(q, 5, truncated);
	sqlite3_bind_text(q, 6, text, (int)len, SQLITE_STATIC);
	return run(st, q, "adding a window");
}

int store_add_verdict(struct store *st, uint64_t instance_id, const char *spec,
		      const char *assertion, int line, const char *result, int64_t offenders,
		      double time)
{
	sqlite3_stmt *q = st->stmt[ST_VERDICT_INSERT];

	if (batch(st) < 0)
		return -EIO;
	sqlite3_bind_int64(q, 1, (sqlite3_int64)instance_id);
	bind_text(q, 2, spec);
	bind_text(q, 3, assertion);
	sqlite3_bind_int(q, 4, line);
	bind_text(q, 5, result);
	sqlite3_bind_int64(q, 6, offenders);
	sqlite3_bind_double(q, 7, time);
	return run(st, q, "adding a verdict");
}

int store_mail_add(struct store *st, const char *to, const char *subject, const char *body,
		   size_t count, double queued, uint64_t *id)
{
	sqlite3_stmt *q = st->stmt[ST_MAIL_INSERT];

	if (batch(st) < 0)
		return -EIO;
	sqlite3_bind_double(q, 1, queued);
	bind_text(q, 2, to ? to : "");
	bind_text(q, 3, subject ? subject : "");
	bind_text(q, 4, body ? body : "");
	sqlite3_bind_int64(q, 5, (sqlite3_int64)count);
	if (run(st, q, "queueing a mail") < 0)
		return -EIO;
	*id = (uint64_t)sqlite3_last_insert_rowid(st->db);
	return 0;
}

int store_mail_done(struct store *st, uint64_t id)
{
	sqlite3_stmt *q = st->stmt[ST_MAIL_DELETE];

	if (batch(st) < 0)
		return -EIO;
	sqlite3_bind_int64(q, 1, (sqlite3_int64)id);
	return run(st, q, "marking a mail sent");
}

int store_mail_load(struct store *st, store_mail_cb cb, void *arg)
{
	sqlite3_stmt *q = st->stmt[ST_MAIL_LOAD];
	int rc;

	while ((rc = sqlite3_step(q)) == SQLITE_ROW)
		cb(arg, (uint64_t)sqlite3_column_int64(q, 0), sqlite3_column_double(q, 1),
		   (const char *)sqlite3_column_text(q, 2), (const char *)sqlite3_column_text(q, 3),
		   (const char *)sqlite3_column_text(q, 4), (size_t)sqlite3_column_int64(q, 5));
	sqlite3_reset(q);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "reading the mail queue");
}

int store_digest_add(struct store *st, const struct digest_item *it, double due)
{
	sqlite3_stmt *q = st->stmt[ST_DIGEST_INSERT];

	if (batch(st) < 0)
		return -EIO;
	sqlite3_bind_int64(q, 1, (sqlite3_int64)it->failure_id);
	sqlite3_bind_int64(q, 2, (sqlite3_int64)it->instance_id);
	bind_text(q, 3, it->prog);
	bind_text(q, 4, it->machine);
	sqlite3_bind_int64(q, 5, it->pid);
	bind_text(q, 6, it->spec);
	bind_text(q, 7, it->assertion ? it->assertion : "");
	sqlite3_bind_int(q, 8, it->line);
	sqlite3_bind_double(q, 9, it->time);
	bind_text(q, 10, it->what);
	sqlite3_bind_int64(q, 11, it->start_ts);
	sqlite3_bind_int64(q, 12, it->end_ts);
	bind_text(q, 13, it->metrics);
	bind_text(q, 14, it->to);
	sqlite3_bind_double(q, 15, it->period);
	sqlite3_bind_double(q, 16, due);
	return run(st, q, "keeping a failure for its digest");
}

int store_digest_done(struct store *st, uint64_t instance_id, const char *assertion, int line)
{
	sqlite3_stmt *q = st->stmt[ST_DIGEST_DELETE];

	if (batch(st) < 0)
		return -EIO;
	sqlite3_bind_int64(q, 1, (sqlite3_int64)instance_id);
	bind_text(q, 2, assertion ? assertion : "");
	sqlite3_bind_int(q, 3, line);
	return run(st, q, "clearing a digest");
}

int store_digest_load(struct store *st, const char *ctl, store_digest_cb cb, void *arg)
{
	sqlite3_stmt *q = st->stmt[ST_DIGEST_LOAD];
	int rc;

	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		const char *label = (const char *)sqlite3_column_text(q, 6);
		struct digest_item it = {
			.failure_id = (uint64_t)sqlite3_column_int64(q, 0),
			.instance_id = (uint64_t)sqlite3_column_int64(q, 1),
			.prog = (const char *)sqlite3_column_text(q, 2),
			.machine = (const char *)sqlite3_column_text(q, 3),
			.pid = sqlite3_column_int64(q, 4),
			.spec = (const char *)sqlite3_column_text(q, 5),
			.assertion = label && *label ? label : NULL,
			.line = sqlite3_column_int(q, 7),
			.time = sqlite3_column_double(q, 8),
			.what = (const char *)sqlite3_column_text(q, 9),
			.start_ts = sqlite3_column_int64(q, 10),
			.end_ts = sqlite3_column_int64(q, 11),
			.metrics = (const char *)sqlite3_column_text(q, 12),
			.to = (const char *)sqlite3_column_text(q, 13),
			.ctl = ctl,
			.period = sqlite3_column_double(q, 14),
		};
		if (!it.prog)
			it.prog = "";
		if (!it.machine)
			it.machine = "";
		if (!it.to)
			it.to = "";
		cb(arg, &it, sqlite3_column_double(q, 15));
	}
	sqlite3_reset(q);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "reading the failures waiting for a digest");
}
