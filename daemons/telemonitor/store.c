/* The telemonitor's sqlite store (see store.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "backlog.h"
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
	/* 3 -> 4: the store's outages. One row per time the store was
	 * degraded (writes held in memory), written when it recovered:
	 * `writes` and `failures` held in all, and how many of them had to be
	 * dropped. */
	"CREATE TABLE store_outages ("
	"  id INTEGER PRIMARY KEY,"
	"  began REAL NOT NULL, ended REAL NOT NULL, reason TEXT, detail TEXT,"
	"  writes INTEGER NOT NULL, failures INTEGER NOT NULL,"
	"  dropped INTEGER NOT NULL, dropped_failures INTEGER NOT NULL);",
	/* 4 -> 5: alert hygiene. A failure says whether it came from a report
	 * assertion (statistics, not mailed unless the class asks), which
	 * silence kept it quiet (NULL: none), and when and why someone
	 * acknowledged it. silences: glob matchers over prog, machine and
	 * assertion (NULL: any) and the end of the silence. */
	"ALTER TABLE failures ADD COLUMN report INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE failures ADD COLUMN silence_id INTEGER;"
	"ALTER TABLE failures ADD COLUMN acked REAL;"
	"ALTER TABLE failures ADD COLUMN ack_comment TEXT;"
	"CREATE TABLE silences ("
	"  id INTEGER PRIMARY KEY,"
	"  created REAL NOT NULL, until REAL NOT NULL,"
	"  prog TEXT, machine TEXT, assert TEXT, comment TEXT,"
	"  removed REAL);"
	"CREATE INDEX verdicts_time ON verdicts (time);",
	/* 5 -> 6: Alertmanager. alert_outbox holds the POSTs to an
	 * Alertmanager not yet accepted (a JSON array of alerts; deleted when
	 * one is), alerts_open the alerts sent for failures of instances not
	 * ended yet (the alert object as posted, resolved and deleted once its
	 * instance has ended). */
	"CREATE TABLE alert_outbox ("
	"  id INTEGER PRIMARY KEY,"
	"  queued REAL NOT NULL, url TEXT NOT NULL, body TEXT NOT NULL);"
	"CREATE TABLE alerts_open ("
	"  failure_id INTEGER PRIMARY KEY,"
	"  instance_id INTEGER NOT NULL, url TEXT NOT NULL, alert TEXT NOT NULL);"
	"CREATE INDEX alerts_open_instance ON alerts_open (instance_id);",
	/* 6 -> 7: /metrics counts failures per instance and assertion name,
	 * and takes the newest report of each (metrics.c): without these a
	 * scrape read every failure row of the shown instances (bench/http).
	 * The expression is metrics.c's ASSERT_NAME, word for word, or sqlite
	 * does not use them. */
	"CREATE INDEX failures_series ON failures"
	"  (instance_id, coalesce(assert, 'line ' || line));"
	"CREATE INDEX failures_reports ON failures"
	"  (instance_id, coalesce(assert, 'line ' || line)) WHERE metrics IS NOT NULL;",
};

#define NMIGRATIONS (sizeof migrations / sizeof migrations[0])
_Static_assert(NMIGRATIONS == STORE_SCHEMA_VERSION, "one migration per schema version");

/* Prepared statements: X(name, sql). */
#define STORE_STMTS(X)                                                                       \
	X(BEGIN, "BEGIN")                                                                    \
	X(COMMIT, "COMMIT")                                                                  \
	X(CLASS_KEY, "SELECT id FROM classes WHERE prog=?1 AND machine=?2 AND pid=?3")       \
	X(CLASS_PUT,                                                                         \
	  "INSERT OR REPLACE INTO classes (id, prog, machine, pid, tool, spec, mail, window," \
	  " mailgroup, block, auto, active, updated)"                                        \
	  " VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,1,?12)")                              \
	X(CLASSES_KEEP,                                                                      \
	  "UPDATE classes SET active = cmon_id_in(id, ?1)")                                  \
	X(INST_LOOKUP,                                                                       \
	  "SELECT id, bytes, records, lost, gaps, skipped, failures, tool_restarts, want,"  \
	  " first_seen FROM instances WHERE prog=?1 AND machine=?2 AND pid=?3 AND start_ns=?4") \
	X(INST_PUT,                                                                          \
	  "INSERT INTO instances (id, class_id, prog, machine, pid, start_ns, endpoint, tls," \
	  " first_seen, ended, state, want, bytes, records, lost, gaps, skipped, failures,"  \
	  " tool_restarts, status, token) VALUES"                                            \
	  " (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21)"     \
	  " ON CONFLICT (id) DO UPDATE SET class_id=excluded.class_id,"                      \
	  " endpoint=excluded.endpoint, tls=excluded.tls,"                                   \
	  " ended=coalesce(instances.ended, excluded.ended), state=excluded.state,"          \
	  " want=excluded.want, bytes=excluded.bytes, records=excluded.records,"             \
	  " lost=excluded.lost, gaps=excluded.gaps, skipped=excluded.skipped,"               \
	  " failures=excluded.failures, tool_restarts=excluded.tool_restarts,"               \
	  " status=excluded.status, token=coalesce(excluded.token, instances.token)")       \
	X(INST_OPEN,                                                                         \
	  "SELECT id, class_id, prog, machine, pid, start_ns, endpoint, tls, state, want,"  \
	  " bytes, records, lost, gaps, skipped, failures, tool_restarts, status, first_seen," \
	  " token"                                                                           \
	  " FROM instances WHERE ended IS NULL ORDER BY id")                                 \
	X(INST_REAP,                                                                         \
	  "UPDATE instances SET ended = ?1, state = 'gone',"                                 \
	  " status = 'ended while the telemonitor was away'"                                 \
	  " WHERE ended IS NULL AND NOT cmon_id_in(id, ?2)")                                 \
	X(FAIL_INSERT,                                                                       \
	  "INSERT INTO failures (id, instance_id, spec, assert, line, result, kind, type,"   \
	  " uid, start_pos, end_pos, start_rec, end_rec, start_ts, end_ts, time, start_wall," \
	  " metrics, window_id, report, silence_id) VALUES"                                  \
	  " (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21)"     \
	  " ON CONFLICT (id) DO NOTHING")                                                    \
	X(WIN_INSERT,                                                                        \
	  "INSERT OR REPLACE INTO windows (id, instance_id, from_rec, to_rec, truncated,"   \
	  " text) VALUES (?1,?2,?3,?4,?5,?6)")                                               \
	X(VERDICT_INSERT,                                                                    \
	  "INSERT INTO verdicts (instance_id, spec, assert, line, result, offenders, time)"  \
	  " VALUES (?1,?2,?3,?4,?5,?6,?7)")                                                  \
	X(MAIL_INSERT,                                                                       \
	  "INSERT INTO mail_queue (id, queued, recipients, subject, body, failures)"         \
	  " VALUES (?1,?2,?3,?4,?5,?6) ON CONFLICT (id) DO NOTHING")                         \
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
	  " ORDER BY id")                                                                    \
	X(SILENCE_INSERT,                                                                    \
	  "INSERT INTO silences (id, created, until, prog, machine, assert, comment)"        \
	  " VALUES (?1,?2,?3,?4,?5,?6,?7) ON CONFLICT (id) DO NOTHING")                      \
	X(SILENCE_REMOVE, "UPDATE silences SET removed = ?2 WHERE id = ?1")                  \
	X(SILENCE_LOAD,                                                                      \
	  "SELECT id, created, until, prog, machine, assert, comment FROM silences"         \
	  " WHERE removed IS NULL AND until > ?1 ORDER BY id")                               \
	X(ACK, "UPDATE failures SET acked = ?2, ack_comment = ?3 WHERE id = ?1")             \
	X(PRUNE_WINDOWS,                                                                     \
	  "DELETE FROM windows WHERE id IN (SELECT window_id FROM failures"                 \
	  " WHERE time < ?1 AND window_id IS NOT NULL ORDER BY id LIMIT ?2)")                \
	X(PRUNE_FAILURES,                                                                    \
	  "DELETE FROM failures WHERE id IN (SELECT id FROM failures WHERE time < ?1"       \
	  " ORDER BY id LIMIT ?2)")                                                          \
	X(PRUNE_VERDICTS,                                                                    \
	  "DELETE FROM verdicts WHERE id IN (SELECT id FROM verdicts WHERE time < ?1"       \
	  " ORDER BY id LIMIT ?2)")                                                          \
	X(PRUNE_MAIL,                                                                        \
	  "DELETE FROM mail_queue WHERE id IN (SELECT id FROM mail_queue WHERE queued < ?1" \
	  " ORDER BY id LIMIT ?2)")                                                          \
	X(PRUNE_DIGEST,                                                                      \
	  "DELETE FROM mail_digest WHERE id IN (SELECT id FROM mail_digest WHERE time < ?1" \
	  " ORDER BY id LIMIT ?2)")                                                          \
	X(PRUNE_SILENCES,                                                                    \
	  "DELETE FROM silences WHERE id IN (SELECT id FROM silences WHERE until < ?1"      \
	  " ORDER BY id LIMIT ?2)")                                                          \
	X(ALERT_INSERT,                                                                      \
	  "INSERT INTO alert_outbox (id, queued, url, body) VALUES (?1,?2,?3,?4)"           \
	  " ON CONFLICT (id) DO NOTHING")                                                    \
	X(ALERT_DELETE, "DELETE FROM alert_outbox WHERE id=?1")                              \
	X(ALERT_LOAD, "SELECT id, queued, url, body FROM alert_outbox ORDER BY id")          \
	X(ALERT_OPEN,                                                                        \
	  "INSERT OR REPLACE INTO alerts_open (failure_id, instance_id, url, alert)"         \
	  " VALUES (?1,?2,?3,?4)")                                                           \
	X(ALERT_ENDED,                                                                       \
	  "SELECT o.failure_id, o.url, o.alert, coalesce(i.ended, ?1) FROM alerts_open o"   \
	  " LEFT JOIN instances i ON i.id = o.instance_id"                                   \
	  " WHERE i.id IS NULL OR i.ended IS NOT NULL ORDER BY o.failure_id LIMIT ?2")       \
	X(ALERT_CLOSE, "DELETE FROM alerts_open WHERE failure_id=?1")                        \
	X(ALERT_LIVE,                                                                        \
	  "SELECT o.url, o.alert FROM alerts_open o JOIN instances i ON i.id = o.instance_id" \
	  " WHERE i.ended IS NULL ORDER BY o.failure_id DESC LIMIT ?1")                      \
	X(PRUNE_ALERTS,                                                                      \
	  "DELETE FROM alert_outbox WHERE id IN (SELECT id FROM alert_outbox WHERE queued < ?1" \
	  " ORDER BY id LIMIT ?2)")                                                          \
	X(OUTAGE_INSERT,                                                                     \
	  "INSERT INTO store_outages (began, ended, reason, detail, writes, failures,"      \
	  " dropped, dropped_failures) VALUES (?1,?2,?3,?4,?5,?6,?7,?8)")

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

/* Key of the one held "active classes" write and the one held reap. */
#define KEY_ALL UINT64_MAX

/* One connection to the database file. */
struct conn {
	sqlite3 *db;                  /* the connection (NULL: none) */
	sqlite3_stmt *stmt[ST_COUNT]; /* prepared statements */
	int version;                  /* schema version */
	bool fresh;                   /* the schema was created by this open */
	struct stat wal, shm;         /* its -wal and -shm files when opened (st_ino 0: none) */
};

/* The store. */
struct store {
	char path[PATH_MAX];          /* DIR/telemonitor.db */
	struct conn c;                /* the connection */
	bool in_batch;                /* a write transaction is open */
	struct bl_list journal;       /* the writes of the open batch (or of a flush) */
	struct backlog bl;            /* writes held while degraded */
	bool degraded;                /* writes go to the backlog */
	char reason[64];              /* why, in a few words */
	char detail[300];             /* what sqlite or the system said */
	double since;                 /* when it became degraded */
	double next_retry;            /* when to retry */
	double last_report;           /* when it last said it is degraded */
	double next_check;            /* when to look at the database file again */
	unsigned attempts;            /* retries in this outage */
	uint64_t base_pushed[BK_NKINDS];  /* backlog counts when the outage began */
	uint64_t base_dropped[BK_NKINDS];
	bool drop_told;               /* the first drop of this outage was logged */
	uint64_t outages;             /* outages since start */
	uint64_t rejected;            /* writes refused for a reason of their own */
	uint64_t next_window;         /* next window id to hand out */
	uint64_t next_failure;        /* next failure id */
	uint64_t next_instance;       /* next instance id */
	uint64_t next_mail;           /* next mail id */
	uint64_t next_silence;        /* next silence id */
	uint64_t next_alert;          /* next alert_outbox id */
	uint32_t next_class;          /* next class id */
	store_commit_cb on_commit;    /* called after each batch is ended */
	void *on_commit_arg;          /* its argument */
	store_reopen_cb on_reopen;    /* called after a new database was opened */
	void *on_reopen_arg;          /* its argument */
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
	cmon_err("store: %s: %s", what, sqlite3_errmsg(st->c.db));
	return -EIO;
}

static int exec(sqlite3 *db, const char *sql, const char *what)
{
	char *msg = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		if (what)
			cmon_err("store: %s: %s", what, msg ? msg : sqlite3_errmsg(db));
		sqlite3_free(msg);
		return -EIO;
	}
	return 0;
}

/* --- the connection ------------------------------------------------------------ */

/* Bring the schema up to STORE_SCHEMA_VERSION: a new database is created
 * at the current schema in one transaction, an older one is upgraded one
 * migration per transaction; either is logged once. */
static int migrate(struct conn *c, const char *path, char *err, size_t errlen)
{
	sqlite3_stmt *q;
	int v = 0, from;

	if (sqlite3_prepare_v2(c->db, "PRAGMA user_version", -1, &q, NULL) != SQLITE_OK)
		goto fail;
	if (sqlite3_step(q) == SQLITE_ROW)
		v = sqlite3_column_int(q, 0);
	sqlite3_finalize(q);
	if (v > STORE_SCHEMA_VERSION) {
		snprintf(err, errlen, "the database's schema version %d is newer than this "
			 "telemonitor's (%d); use a newer telemonitor", v, STORE_SCHEMA_VERSION);
		return -EINVAL;
	}
	c->fresh = v == 0;
	from = v;
	if (c->fresh && exec(c->db, "BEGIN IMMEDIATE", "creation") < 0)
		goto fail;
	for (; v < STORE_SCHEMA_VERSION; v++) {
		char bump[64];
		snprintf(bump, sizeof bump, "PRAGMA user_version = %d", v + 1);
		if (!c->fresh && exec(c->db, "BEGIN IMMEDIATE", "migration") < 0)
			goto fail;
		if (exec(c->db, migrations[v], "migration") < 0 || exec(c->db, bump, "migration") < 0 ||
		    (!c->fresh && exec(c->db, "COMMIT", "migration") < 0)) {
			exec(c->db, "ROLLBACK", NULL);
			goto fail;
		}
	}
	if (c->fresh && exec(c->db, "COMMIT", "creation") < 0) {
		exec(c->db, "ROLLBACK", NULL);
		goto fail;
	}
	if (c->fresh)
		cmon_info("store: created %s (schema %d)", path, v);
	else if (from < v)
		cmon_info("store: schema upgraded from version %d to %d", from, v);
	c->version = v;
	return 0;
fail:
	snprintf(err, errlen, "cannot set up the database schema: %s", sqlite3_errmsg(c->db));
	return -EIO;
}

/* Remember which -wal and -shm files are this connection's. */
static void note_files(struct conn *c, const char *path)
{
	char p[PATH_MAX + 8];

	snprintf(p, sizeof p, "%s-wal", path);
	if (stat(p, &c->wal) < 0)
		c->wal.st_ino = 0;
	snprintf(p, sizeof p, "%s-shm", path);
	if (stat(p, &c->shm) < 0)
		c->shm.st_ino = 0;
}

static void conn_close(struct conn *c)
{
	for (int i = 0; i < ST_COUNT; i++) {
		sqlite3_finalize(c->stmt[i]);
		c->stmt[i] = NULL;
	}
	sqlite3_close_v2(c->db);
	c->db = NULL;
}

/* cmon_id_in(id, ids): 1 if the integer `id` is in `ids`, a blob of
 * int64 ids in ascending order (id_list()), else 0 (a NULL or empty list
 * included). How CLASSES_KEEP and INST_REAP take a list of ids as one
 * bound value, so that the held write stays one item. */
static void sql_id_in(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	const unsigned char *ids = sqlite3_value_blob(argv[1]);
	size_t lo = 0, hi = (size_t)sqlite3_value_bytes(argv[1]) / sizeof(int64_t);
	int64_t id = sqlite3_value_int64(argv[0]);

	(void)argc;
	while (ids && lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int64_t v;
		memcpy(&v, ids + mid * sizeof v, sizeof v);
		if (v == id) {
			sqlite3_result_int(ctx, 1);
			return;
		}
		if (v < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	sqlite3_result_int(ctx, 0);
}

/* Open (creating or upgrading) the database at `path`. */
static int conn_open(struct conn *c, const char *path, char *err, size_t errlen)
{
	memset(c, 0, sizeof *c);
	if (sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, c->db ? sqlite3_errmsg(c->db) : "cannot open");
		goto out_close;
	}
	sqlite3_extended_result_codes(c->db, 1);
	sqlite3_busy_timeout(c->db, 5000);
	if (exec(c->db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
		     " PRAGMA foreign_keys = OFF; PRAGMA temp_store = MEMORY;", NULL) < 0) {
		snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(c->db));
		goto out_close;
	}
	if (migrate(c, path, err, errlen) < 0)
		goto out_close;
	if (sqlite3_create_function_v2(c->db, "cmon_id_in", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC |
				       SQLITE_DIRECTONLY, NULL, sql_id_in, NULL, NULL, NULL) !=
	    SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(c->db));
		goto out_close;
	}
	for (int i = 0; i < ST_COUNT; i++)
		if (sqlite3_prepare_v3(c->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
				       &c->stmt[i], NULL) != SQLITE_OK) {
			snprintf(err, errlen, "preparing statement %d: %s", i, sqlite3_errmsg(c->db));
			goto out_close;
		}
	note_files(c, path);
	return 0;
out_close:
	conn_close(c);
	return -EIO;
}

static uint64_t query_u64(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *q;
	uint64_t v = 0;

	if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
		return 0;
	if (sqlite3_step(q) == SQLITE_ROW)
		v = (uint64_t)sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	return v;
}

static void at_least(uint64_t *next, uint64_t v)
{
	if (*next < v)
		*next = v;
}

/* The ids handed out go on from the database's, and never back. */
static void init_ids(struct store *st)
{
	sqlite3 *db = st->c.db;
	uint64_t cls = st->next_class;

	at_least(&st->next_window, query_u64(db, "SELECT max(coalesce((SELECT max(id) FROM windows),"
					     " 0), coalesce((SELECT max(window_id) FROM failures), 0)) + 1"));
	at_least(&st->next_failure, query_u64(db, "SELECT coalesce(max(id), 0) + 1 FROM failures"));
	at_least(&st->next_instance, query_u64(db, "SELECT coalesce(max(id), 0) + 1 FROM instances"));
	at_least(&st->next_mail, query_u64(db, "SELECT max(coalesce((SELECT seq FROM sqlite_sequence"
					   " WHERE name = 'mail_queue'), 0), coalesce((SELECT max(id)"
					   " FROM mail_queue), 0)) + 1"));
	at_least(&st->next_alert, query_u64(db, "SELECT coalesce(max(id), 0) + 1 FROM alert_outbox"));
	at_least(&st->next_silence, query_u64(db, "SELECT coalesce(max(id), 0) + 1 FROM silences"));
	at_least(&cls, query_u64(db, "SELECT coalesce(max(id), 0) + 1 FROM classes"));
	st->next_class = (uint32_t)cls;
}

struct store *store_open(const char *dir, char *err, size_t errlen)
{
	struct store *st = calloc(1, sizeof *st);

	if (!st) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	TAILQ_INIT(&st->journal);
	backlog_init(&st->bl, STORE_BACKLOG_DEFAULT, STORE_BACKLOG_BYTES);
	if ((size_t)snprintf(st->path, sizeof st->path, "%s/telemonitor.db", dir) >= sizeof st->path) {
		snprintf(err, errlen, "%s: path too long", dir);
		free(st);
		return NULL;
	}
	if (conn_open(&st->c, st->path, err, errlen) < 0) {
		free(st);
		return NULL;
	}
	init_ids(st);
	return st;
}

sqlite3 *store_db(struct store *st)
{
	return st->c.db;
}

int store_version(struct store *st)
{
	return st->c.version;
}

bool store_pending(const struct store *st)
{
	return st->in_batch;
}

bool store_degraded(const struct store *st)
{
	return st->degraded;
}

void store_set_backlog(struct store *st, size_t max_failures)
{
	if (max_failures < 1)
		max_failures = 1;
	if (max_failures > STORE_BACKLOG_MAX)
		max_failures = STORE_BACKLOG_MAX;
	st->bl.max_failures = max_failures;
}

void store_set_commit_cb(struct store *st, store_commit_cb cb, void *arg)
{
	st->on_commit = cb;
	st->on_commit_arg = arg;
}

void store_set_reopen_cb(struct store *st, store_reopen_cb cb, void *arg)
{
	st->on_reopen = cb;
	st->on_reopen_arg = arg;
}

/* --- faults ------------------------------------------------------------------- */

/* True if the database file was deleted or replaced since it was opened. */
static bool moved(struct store *st)
{
	int m = 0;

	if (!st->c.db ||
	    sqlite3_file_control(st->c.db, "main", SQLITE_FCNTL_HAS_MOVED, &m) != SQLITE_OK)
		return false;
	return m != 0;
}

/* A failed step that retrying may cure (the disk, not the write). */
static bool is_fault(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_CONSTRAINT:
	case SQLITE_MISMATCH:
	case SQLITE_TOOBIG:
	case SQLITE_RANGE:
	case SQLITE_ERROR:
	case SQLITE_MISUSE:
	case SQLITE_AUTH:
	case SQLITE_SCHEMA:
		return false;
	default:
		return true;
	}
}

/* Why the files cannot be written, when sqlite could not say (its errno
 * is often gone by the time it reports): EROFS, EPERM (chattr +i) or
 * EACCES from access(2), ENOSPC when the file system has no block left,
 * else 0. */
static int probe(const struct store *st)
{
	char p[PATH_MAX + 8];
	struct statvfs vfs;

	for (int i = 0; i < 2; i++) {
		snprintf(p, sizeof p, "%s%s", st->path, i ? "-wal" : "");
		if (access(p, W_OK) < 0 && errno != ENOENT)
			return errno;
	}
	if (statvfs(st->path, &vfs) == 0 && vfs.f_bavail == 0)
		return ENOSPC;
	return 0;
}

/* Say why the store cannot write, from sqlite's result and errno. */
static void set_reason(struct store *st, int rc, int sys, const char *what)
{
	const char *r;

	if (moved(st)) {
		snprintf(st->reason, sizeof st->reason, "database deleted");
		snprintf(st->detail, sizeof st->detail, "while %s: %.200s was deleted or replaced",
			 what, st->path);
		return;
	}
	if (!sys && (rc & 0xff) != SQLITE_FULL)
		sys = probe(st);
	if ((rc & 0xff) == SQLITE_FULL || sys == ENOSPC || sys == EDQUOT)
		r = "disk full";
	else if ((rc & 0xff) == SQLITE_READONLY || sys == EROFS || sys == EPERM || sys == EACCES)
		r = "read-only";
	else if ((rc & 0xff) == SQLITE_CANTOPEN)
		r = "cannot open the database";
	else if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED)
		r = "database locked";
	else if ((rc & 0xff) == SQLITE_NOMEM)
		r = "out of memory";
	else if ((rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB)
		r = "database corrupt";
	else
		r = "I/O error";
	snprintf(st->reason, sizeof st->reason, "%s", r);
	snprintf(st->detail, sizeof st->detail, "while %s: %s%s%s", what,
		 st->c.db ? sqlite3_errmsg(st->c.db) : sqlite3_errstr(rc), sys ? ": " : "",
		 sys ? strerror(sys) : "");
}

static uint64_t sum(const uint64_t *v)
{
	uint64_t n = 0;

	for (int k = 0; k < BK_NKINDS; k++)
		n += v[k];
	return n;
}

/* Hold `it` (taken) in the backlog; the first drop of an outage is told. */
static void hold(struct store *st, struct bl_item *it)
{
	backlog_push(&st->bl, it);
	if (!st->drop_told && sum(st->bl.dropped) > sum(st->base_dropped)) {
		st->drop_told = true;
		cmon_err("store degraded: backlog full (%zu failures, %u MiB): dropping the oldest "
			 "held writes, counted in telemonctl status", st->bl.max_failures,
			 STORE_BACKLOG_BYTES >> 20);
	}
}

/* The database cannot take writes: roll the open batch back and hold its
 * writes, then `it` (may be NULL), in the backlog. */
static void degrade(struct store *st, struct bl_item *it, int rc, int sys, const char *what)
{
	bool had_batch = st->in_batch || !TAILQ_EMPTY(&st->journal);
	struct bl_item *j;
	double now = tm_now();

	set_reason(st, rc, sys, what);             /* before ROLLBACK clears the message */
	if (st->in_batch && st->c.db && !sqlite3_get_autocommit(st->c.db))
		exec(st->c.db, "ROLLBACK", NULL);
	st->in_batch = false;
	if (!st->degraded) {
		st->degraded = true;
		st->since = now;
		st->attempts = 0;
		st->next_retry = now + STORE_RETRY_MIN_S;
		st->last_report = now;
		st->drop_told = false;
		memcpy(st->base_pushed, st->bl.pushed, sizeof st->base_pushed);
		memcpy(st->base_dropped, st->bl.dropped, sizeof st->base_dropped);
		st->outages++;
		cmon_err("store degraded: %s (%s): holding writes in memory (at most %zu "
			 "failures, %u MiB), retrying every %.0f to %.0f s", st->reason, st->detail,
			 st->bl.max_failures, STORE_BACKLOG_BYTES >> 20, STORE_RETRY_MIN_S,
			 STORE_RETRY_MAX_S);
	}
	while ((j = TAILQ_FIRST(&st->journal))) {
		TAILQ_REMOVE(&st->journal, j, link);
		hold(st, j);
	}
	if (it)
		hold(st, it);
	if (had_batch && st->on_commit)
		st->on_commit(st->on_commit_arg, false);
}

/* Run item `it` on the connection: SQLITE_DONE, or the extended result
 * code with *sys the errno behind it. */
static int apply(struct store *st, const struct bl_item *it, int *sys)
{
	sqlite3_stmt *q = st->c.stmt[it->stmt];
	int rc;

	for (unsigned i = 0; i < it->nvals; i++) {
		const struct bl_value *v = &it->v[i];
		switch (v->type) {
		case BV_NULL: sqlite3_bind_null(q, (int)i + 1); break;
		case BV_INT: sqlite3_bind_int64(q, (int)i + 1, v->i); break;
		case BV_REAL: sqlite3_bind_double(q, (int)i + 1, v->d); break;
		case BV_TEXT: sqlite3_bind_text(q, (int)i + 1, v->s, (int)v->n, SQLITE_STATIC); break;
		case BV_BLOB: sqlite3_bind_blob(q, (int)i + 1, v->s, (int)v->n, SQLITE_STATIC); break;
		}
	}
	rc = sqlite3_step(q);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
		rc = sqlite3_extended_errcode(st->c.db);
		*sys = sqlite3_system_errno(st->c.db);
	} else {
		rc = SQLITE_DONE;
	}
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	return rc;
}

/* Step a statement without values (BEGIN, COMMIT). */
static int step0(struct store *st, enum store_stmt s, int *sys)
{
	struct bl_item it = { .stmt = s };

	return apply(st, &it, sys);
}

/* Open the batch transaction if it is not open yet; -EAGAIN if the store
 * became degraded. */
static int batch(struct store *st)
{
	int sys = 0, rc;

	if (st->in_batch)
		return 0;
	if (moved(st)) {
		degrade(st, NULL, SQLITE_READONLY_DBMOVED, 0, "starting a batch");
		return -EAGAIN;
	}
	rc = step0(st, ST_BEGIN, &sys);
	if (rc != SQLITE_DONE) {
		degrade(st, NULL, rc, sys, "starting a batch");
		return -EAGAIN;
	}
	st->in_batch = true;
	return 0;
}

/* Write `it` (taken): now, in the open batch, or held while degraded. 0
 * (written or held), -ENOMEM (it could not be made), or -EIO (the
 * database refused this write; logged). */
static int put(struct store *st, struct bl_item *it, const char *what)
{
	int sys = 0, rc;

	if (!it) {
		st->rejected++;
		cmon_err("store: out of memory: %s is lost", what);
		return -ENOMEM;
	}
	if (st->degraded) {
		hold(st, it);
		return 0;
	}
	if (batch(st) < 0) {
		hold(st, it);
		return 0;
	}
	rc = apply(st, it, &sys);
	if (rc == SQLITE_DONE) {
		TAILQ_INSERT_TAIL(&st->journal, it, link);
		return 0;
	}
	if (is_fault(rc)) {
		degrade(st, it, rc, sys, what);
		return 0;
	}
	cmon_err("store: %s: %s", what, sqlite3_errmsg(st->c.db));
	st->rejected++;
	bl_item_free(it);
	return -EIO;
}

static void free_journal(struct store *st)
{
	struct bl_item *j;

	while ((j = TAILQ_FIRST(&st->journal))) {
		TAILQ_REMOVE(&st->journal, j, link);
		bl_item_free(j);
	}
}

int store_commit(struct store *st)
{
	int sys = 0, rc;

	if (!st->in_batch)
		return st->degraded ? -EAGAIN : 0;
	rc = step0(st, ST_COMMIT, &sys);
	if (rc != SQLITE_DONE) {
		degrade(st, NULL, rc, sys, "committing");
		return -EAGAIN;
	}
	st->in_batch = false;
	if (moved(st)) {
		/* committed to a file nobody will read again */
		degrade(st, NULL, SQLITE_READONLY_DBMOVED, 0, "committing");
		return -EAGAIN;
	}
	free_journal(st);
	if (st->on_commit)
		st->on_commit(st->on_commit_arg, true);
	return 0;
}

static void schedule(struct store *st, double now)
{
	double delay = STORE_RETRY_MIN_S;

	for (unsigned i = 1; i < st->attempts && delay < STORE_RETRY_MAX_S; i++)
		delay *= 2;
	if (delay > STORE_RETRY_MAX_S)
		delay = STORE_RETRY_MAX_S;
	st->next_retry = now + delay;
}

/* The database file vanished (or was replaced): open one at its path. The
 * vanished database's -wal and -shm must not be taken for the new one's:
 * they go if the database is missing, or if they are the ones we had. */
static int reopen(struct store *st)
{
	static const char *const sfx[] = { "-wal", "-shm" };
	const struct stat *mine[] = { &st->c.wal, &st->c.shm };
	char p[PATH_MAX + 8], err[PATH_MAX + 300];
	struct stat sb;
	bool missing = stat(st->path, &sb) < 0 && errno == ENOENT;
	struct conn nc;

	for (int i = 0; i < 2; i++) {
		snprintf(p, sizeof p, "%s%s", st->path, sfx[i]);
		if (stat(p, &sb) == 0 && (missing || (mine[i]->st_ino && sb.st_ino == mine[i]->st_ino &&
						      sb.st_dev == mine[i]->st_dev)))
			unlink(p);
	}
	if (conn_open(&nc, st->path, err, sizeof err) < 0) {
		snprintf(st->reason, sizeof st->reason, "database deleted");
		snprintf(st->detail, sizeof st->detail, "cannot open a new one: %.270s", err);
		return -EIO;
	}
	conn_close(&st->c);
	st->c = nc;
	st->in_batch = false;
	init_ids(st);
	cmon_warn("store: %s was deleted or replaced; opened %s database there", st->path,
		  nc.fresh ? "a new" : "the");
	if (st->on_reopen)
		st->on_reopen(st->on_reopen_arg);
	return 0;
}

/* A flush failed: roll back and put its writes back at the front. */
static void unflush(struct store *st, int rc, int sys, const char *what)
{
	set_reason(st, rc, sys, what);
	if (st->c.db && !sqlite3_get_autocommit(st->c.db))
		exec(st->c.db, "ROLLBACK", NULL);
	backlog_unshift(&st->bl, &st->journal);
}

/* Everything held was stored: record the outage, say so. */
static void recovered(struct store *st, double now)
{
	uint64_t writes = sum(st->bl.pushed) - sum(st->base_pushed);
	uint64_t fails = st->bl.pushed[BK_FAILURE] - st->base_pushed[BK_FAILURE];
	uint64_t dropped = sum(st->bl.dropped) - sum(st->base_dropped);
	uint64_t dfails = st->bl.dropped[BK_FAILURE] - st->base_dropped[BK_FAILURE];
	struct bl_value v[] = {
		{ .type = BV_REAL, .d = st->since }, { .type = BV_REAL, .d = now },
		{ .type = BV_TEXT, .s = st->reason, .n = strlen(st->reason) },
		{ .type = BV_TEXT, .s = st->detail, .n = strlen(st->detail) },
		{ .type = BV_INT, .i = (int64_t)writes }, { .type = BV_INT, .i = (int64_t)fails },
		{ .type = BV_INT, .i = (int64_t)dropped }, { .type = BV_INT, .i = (int64_t)dfails },
	};

	st->degraded = false;
	cmon_notice("store recovered after %.0f s (%s): %" PRIu64 " held writes stored "
		    "(%" PRIu64 " failures), %" PRIu64 " dropped (%" PRIu64 " failures)",
		    now - st->since, st->reason, writes - dropped, fails - dfails, dropped, dfails);
	put(st, bl_item_new(BK_OUTAGE, ST_OUTAGE_INSERT, 0, v, 8), "recording an outage");
	st->reason[0] = st->detail[0] = '\0';
	st->since = st->next_retry = 0;
	st->attempts = 0;
}

int store_retry(struct store *st, double now)
{
	struct bl_item *it;
	int sys = 0, rc;

	if (!st->degraded)
		return 0;
	st->attempts++;
	schedule(st, now);
	if (moved(st) && reopen(st) < 0)
		return -EAGAIN;
	while (backlog_first(&st->bl)) {
		size_t n = 0, bytes = 0;
		rc = step0(st, ST_BEGIN, &sys);
		if (rc != SQLITE_DONE) {
			unflush(st, rc, sys, "retrying");
			return -EAGAIN;
		}
		while ((it = backlog_first(&st->bl)) && n < STORE_FLUSH_ITEMS &&
		       bytes < STORE_FLUSH_BYTES) {
			rc = apply(st, it, &sys);
			backlog_remove(&st->bl, it);
			if (rc == SQLITE_DONE) {
				TAILQ_INSERT_TAIL(&st->journal, it, link);
				n++;
				bytes += it->bytes;
			} else if (is_fault(rc)) {
				TAILQ_INSERT_TAIL(&st->journal, it, link);
				unflush(st, rc, sys, "storing held writes");
				return -EAGAIN;
			} else {
				/* this one will never go in (a constraint, ...) */
				cmon_err("store: a held %s cannot be stored and is dropped: %s",
					 backlog_kind_name(it->kind), sqlite3_errmsg(st->c.db));
				st->bl.dropped[it->kind]++;
				st->rejected++;
				bl_item_free(it);
			}
		}
		rc = step0(st, ST_COMMIT, &sys);
		if (rc != SQLITE_DONE) {
			unflush(st, rc, sys, "committing held writes");
			return -EAGAIN;
		}
		if (moved(st)) {
			unflush(st, SQLITE_READONLY_DBMOVED, 0, "committing held writes");
			st->next_retry = now;       /* reopen at once */
			return -EAGAIN;
		}
		free_journal(st);
	}
	recovered(st, now);
	return 0;
}

void store_poll(struct store *st, double now)
{
	if (!st->degraded && now >= st->next_check) {
		st->next_check = now + STORE_CHECK_S;
		if (!st->in_batch && moved(st))
			degrade(st, NULL, SQLITE_READONLY_DBMOVED, 0, "checking the database file");
	}
	if (!st->degraded)
		return;
	if (now >= st->next_retry)
		store_retry(st, now);
	if (st->degraded && now - st->last_report >= STORE_REPORT_S) {
		char line[400];
		st->last_report = now;
		cmon_err("store still %s for %.0f s; next retry in %.0f s", store_health_line(st, line,
			 sizeof line), now - st->since, st->next_retry > now ? st->next_retry - now : 0);
	}
}

void store_health(const struct store *st, struct store_health *h)
{
	memset(h, 0, sizeof *h);
	h->degraded = st->degraded;
	h->reason = st->reason;
	h->detail = st->detail;
	h->since = st->since;
	h->next_retry = st->next_retry;
	h->attempts = st->attempts;
	h->pending = st->bl.total;
	h->pending_failures = st->bl.count[BK_FAILURE];
	h->pending_bytes = st->bl.bytes;
	h->limit = st->bl.max_failures;
	h->dropped = sum(st->bl.dropped);
	h->dropped_failures = st->bl.dropped[BK_FAILURE];
	h->dropped_mail = st->bl.dropped[BK_MAIL];
	h->outages = st->outages;
	h->rejected = st->rejected;
}

const char *store_health_line(const struct store *st, char *buf, size_t size)
{
	uint64_t dropped = sum(st->bl.dropped), dfails = st->bl.dropped[BK_FAILURE];

	if (!st->degraded)
		snprintf(buf, size, "ok");
	else
		snprintf(buf, size, "degraded: %s; %zu failure%s pending (%zu writes), %" PRIu64
			 " dropped (%" PRIu64 " failure%s)", st->reason, st->bl.count[BK_FAILURE],
			 st->bl.count[BK_FAILURE] == 1 ? "" : "s", st->bl.total, dropped, dfails,
			 dfails == 1 ? "" : "s");
	return buf;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	if (st->in_batch)
		store_commit(st);
	if (st->degraded)
		store_retry(st, tm_now());
	if (st->degraded && st->bl.total)
		cmon_err("store still degraded at exit (%s): %zu held writes (%zu failures) are lost",
			 st->reason, st->bl.total, st->bl.count[BK_FAILURE]);
	backlog_clear(&st->bl);
	free_journal(st);
	conn_close(&st->c);
	free(st);
}

/* --- writes ------------------------------------------------------------------- */

/* Value makers. */
static struct bl_value vtext(const char *s)
{
	return s ? (struct bl_value){ .type = BV_TEXT, .s = s, .n = strlen(s) }
		 : (struct bl_value){ .type = BV_NULL };
}

static struct bl_value vblob(const void *p, size_t n)
{
	return (struct bl_value){ .type = BV_BLOB, .s = p, .n = n };
}

static struct bl_value vint(int64_t i)
{
	return (struct bl_value){ .type = BV_INT, .i = i };
}

static struct bl_value vreal(double d)
{
	return (struct bl_value){ .type = BV_REAL, .d = d };
}

static struct bl_value vnull(void)
{
	return (struct bl_value){ .type = BV_NULL };
}

#define NV(v) ((unsigned)(sizeof(v) / sizeof((v)[0])))

/* The id of a class without one: the stored class's with its key, else new. */
static void class_id(struct store *st, struct tm_class *c)
{
	sqlite3_stmt *q = st->c.stmt[ST_CLASS_KEY];

	sqlite3_bind_text(q, 1, c->prog, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 2, c->machine, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 3, c->pid, -1, SQLITE_STATIC);
	if (sqlite3_step(q) == SQLITE_ROW)
		c->id = (uint32_t)sqlite3_column_int64(q, 0);
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	if (!c->id)
		c->id = st->next_class++;
	else if (c->id >= st->next_class)
		st->next_class = c->id + 1;
}

int store_class_save(struct store *st, struct tm_class *c)
{
	struct bl_value v[12];

	if (!c->id)
		class_id(st, c);
	v[0] = vint(c->id);
	v[1] = vtext(c->prog);
	v[2] = vtext(c->machine);
	v[3] = vtext(c->pid);
	v[4] = vtext(c->tool);
	v[5] = vtext(c->spec);
	v[6] = vtext(c->mail);
	v[7] = vtext(c->window_text);
	v[8] = vreal(c->mailgroup);
	v[9] = vint(c->block);
	v[10] = vint(c->autostart);
	v[11] = vreal(tm_now());
	return put(st, bl_item_new(BK_CLASS, ST_CLASS_PUT, c->id, v, NV(v)), "saving a class");
}

static int by_id(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* The ids as a blob for cmon_id_in(): int64s in ascending order (*bytes
 * long; caller frees). NULL on ENOMEM. */
static int64_t *id_list(const uint64_t *ids64, const uint32_t *ids32, size_t n, size_t *bytes)
{
	int64_t *v = malloc(n ? n * sizeof *v : 1);

	if (!v)
		return NULL;
	for (size_t i = 0; i < n; i++)
		v[i] = ids64 ? (int64_t)ids64[i] : (int64_t)ids32[i];
	qsort(v, n, sizeof *v, by_id);
	*bytes = n * sizeof *v;
	return v;
}

int store_classes_keep(struct store *st, const uint32_t *keep, size_t n)
{
	size_t bytes = 0;
	int64_t *list = id_list(NULL, keep, n, &bytes);
	struct bl_value v[] = { vblob(list, bytes) };
	int r;

	if (!list)
		return put(st, NULL, "marking the active classes");
	r = put(st, bl_item_new(BK_CLASS, ST_CLASSES_KEEP, KEY_ALL, v, NV(v)),
		"marking the active classes");
	free(list);
	return r;
}

int store_instance_lookup(struct store *st, struct tm_instance *in)
{
	sqlite3_stmt *q = st->c.stmt[ST_INST_LOOKUP];
	int rc;

	sqlite3_bind_text(q, 1, in->prog, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 2, in->machine, -1, SQLITE_STATIC);
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
		in->first_seen = sqlite3_column_double(q, 9);
	}
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return db_fail(st, "looking up an instance");
	return rc == SQLITE_ROW;
}

/* The whole row of `in`, ended at `ended` (0: not ended). */
static int instance_put(struct store *st, const struct tm_instance *in, enum inst_state state,
			double ended, const char *what)
{
	struct bl_value v[] = {
		vint((int64_t)in->id), in->class_id ? vint(in->class_id) : vnull(),
		vtext(in->prog), vtext(in->machine), vint(in->pid), vint(in->start_ns),
		vtext(in->endpoint), vint(in->tls), vreal(in->first_seen),
		ended > 0 ? vreal(ended) : vnull(), vtext(inst_state_name(state)), vint(in->want),
		vint((int64_t)in->bytes), vint((int64_t)in->records), vint((int64_t)in->lost),
		vint((int64_t)in->gaps), vint((int64_t)in->skipped), vint((int64_t)in->failures),
		vint(in->tool_restarts), vtext(in->status),
		in->has_token ? vblob(in->token, CMON_TOKEN_LEN) : vnull(),
	};
	return put(st, bl_item_new(BK_INSTANCE, ST_INST_PUT, in->id, v, NV(v)), what);
}

int store_instance_insert(struct store *st, struct tm_instance *in)
{
	in->id = st->next_instance++;
	if (in->first_seen <= 0)
		in->first_seen = tm_now();
	return instance_put(st, in, in->state, 0, "adding an instance");
}

int store_instance_save(struct store *st, const struct tm_instance *in)
{
	return instance_put(st, in, in->state, 0, "saving an instance");
}

int store_instance_end(struct store *st, const struct tm_instance *in, enum inst_state state,
		       double when)
{
	return instance_put(st, in, state, when, "ending an instance");
}

static void copy_col(char *dst, size_t size, sqlite3_stmt *q, int col)
{
	const unsigned char *s = sqlite3_column_text(q, col);

	snprintf(dst, size, "%s", s ? (const char *)s : "");
}

int store_instances_open(struct store *st, store_instance_cb cb, void *arg)
{
	sqlite3_stmt *q = st->c.stmt[ST_INST_OPEN];
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
		in.first_seen = sqlite3_column_double(q, 18);
		if (sqlite3_column_bytes(q, 19) == CMON_TOKEN_LEN) {
			in.has_token = true;
			memcpy(in.token, sqlite3_column_blob(q, 19), CMON_TOKEN_LEN);
		}
		cb(arg, &in);
	}
	sqlite3_reset(q);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "listing instances");
}

int store_instances_reap(struct store *st, const uint64_t *live, size_t n, double when)
{
	size_t bytes = 0;
	int64_t *list = id_list(live, NULL, n, &bytes);
	struct bl_value v[] = { vreal(when), vblob(list, bytes) };
	int r;

	if (!list)
		return put(st, NULL, "marking instances gone");
	r = put(st, bl_item_new(BK_INSTANCE, ST_INST_REAP, KEY_ALL, v, NV(v)),
		"marking instances gone");
	free(list);
	return r;
}

int store_add_failure(struct store *st, const struct store_failure *f, uint64_t *id)
{
	uint64_t fid = st->next_failure++;
	struct bl_value v[] = {
		vint((int64_t)fid), vint((int64_t)f->instance_id), vtext(f->spec),
		vtext(f->assertion), vint(f->line), vtext(f->result), vtext(f->kind), vtext(f->type),
		f->uid >= 0 ? vint(f->uid) : vnull(), vtext(f->start), vtext(f->end),
		f->start_pos ? vint((int64_t)f->start_pos) : vnull(),
		f->end_pos ? vint((int64_t)f->end_pos) : vnull(),
		f->has_ts ? vint(f->start_ts) : vnull(), f->has_ts ? vint(f->end_ts) : vnull(),
		vreal(f->time), f->start_wall > 0 ? vreal(f->start_wall) : vnull(),
		vtext(f->metrics), f->window_id ? vint((int64_t)f->window_id) : vnull(),
		vint(f->report), f->silence_id ? vint((int64_t)f->silence_id) : vnull(),
	};
	int r = put(st, bl_item_new(BK_FAILURE, ST_FAIL_INSERT, 0, v, NV(v)), "adding a failure");

	if (r == 0)
		*id = fid;
	return r;
}

uint64_t store_next_window_id(struct store *st)
{
	return st->next_window++;
}

int store_add_window(struct store *st, uint64_t id, uint64_t instance_id, uint64_t from,
		     uint64_t to, bool truncated, const char *text, size_t len)
{
	struct bl_value v[] = {
		vint((int64_t)id), vint((int64_t)instance_id), vint((int64_t)from),
		vint((int64_t)to), vint(truncated),
		{ .type = BV_TEXT, .s = text, .n = len > STORE_WINDOW_MAX ? STORE_WINDOW_MAX : len },
	};

	return put(st, bl_item_new(BK_WINDOW, ST_WIN_INSERT, 0, v, NV(v)), "adding a window");
}

int store_add_verdict(struct store *st, uint64_t instance_id, const char *spec,
		      const char *assertion, int line, const char *result, int64_t offenders,
		      double time)
{
	struct bl_value v[] = {
		vint((int64_t)instance_id), vtext(spec), vtext(assertion), vint(line),
		vtext(result), vint(offenders), vreal(time),
	};

	return put(st, bl_item_new(BK_VERDICT, ST_VERDICT_INSERT, 0, v, NV(v)),
		   "adding a verdict");
}

int store_mail_add(struct store *st, const char *to, const char *subject, const char *body,
		   size_t count, double queued, uint64_t *id)
{
	uint64_t mid = st->next_mail++;
	struct bl_value v[] = {
		vint((int64_t)mid), vreal(queued), vtext(to ? to : ""), vtext(subject ? subject : ""),
		vtext(body ? body : ""), vint((int64_t)count),
	};
	int r = put(st, bl_item_new(BK_MAIL, ST_MAIL_INSERT, 0, v, NV(v)), "queueing a mail");

	if (r == 0)
		*id = mid;
	return r;
}

int store_mail_done(struct store *st, uint64_t id)
{
	struct bl_value v[] = { vint((int64_t)id) };

	return put(st, bl_item_new(BK_MAIL, ST_MAIL_DELETE, 0, v, NV(v)), "marking a mail sent");
}

int store_mail_load(struct store *st, store_mail_cb cb, void *arg)
{
	sqlite3_stmt *q = st->c.stmt[ST_MAIL_LOAD];
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
	struct bl_value v[] = {
		vint((int64_t)it->failure_id), vint((int64_t)it->instance_id), vtext(it->prog),
		vtext(it->machine), vint(it->pid), vtext(it->spec),
		vtext(it->assertion ? it->assertion : ""), vint(it->line), vreal(it->time),
		vtext(it->what), vint(it->start_ts), vint(it->end_ts), vtext(it->metrics),
		vtext(it->to), vreal(it->period), vreal(due),
	};

	return put(st, bl_item_new(BK_MAIL, ST_DIGEST_INSERT, 0, v, NV(v)),
		   "keeping a failure for its digest");
}

int store_digest_done(struct store *st, uint64_t instance_id, const char *assertion, int line)
{
	struct bl_value v[] = {
		vint((int64_t)instance_id), vtext(assertion ? assertion : ""), vint(line),
	};

	return put(st, bl_item_new(BK_MAIL, ST_DIGEST_DELETE, 0, v, NV(v)), "clearing a digest");
}

int store_digest_load(struct store *st, const char *ctl, store_digest_cb cb, void *arg)
{
	sqlite3_stmt *q = st->c.stmt[ST_DIGEST_LOAD];
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

/* --- alert hygiene: silences, acknowledgements, retention ------------------------ */

int store_silence_add(struct store *st, const struct store_silence *s, uint64_t *id)
{
	uint64_t sid = st->next_silence++;
	struct bl_value v[] = {
		vint((int64_t)sid), vreal(s->created), vreal(s->until), vtext(s->prog),
		vtext(s->machine), vtext(s->assertion), vtext(s->comment),
	};
	int r = put(st, bl_item_new(BK_CONTROL, ST_SILENCE_INSERT, 0, v, NV(v)),
		    "adding a silence");

	if (r == 0)
		*id = sid;
	return r;
}

int store_silence_remove(struct store *st, uint64_t id, double when)
{
	struct bl_value v[] = { vint((int64_t)id), vreal(when) };

	return put(st, bl_item_new(BK_CONTROL, ST_SILENCE_REMOVE, 0, v, NV(v)),
		   "removing a silence");
}

int store_silences_load(struct store *st, double now, store_silence_cb cb, void *arg)
{
	sqlite3_stmt *q = st->c.stmt[ST_SILENCE_LOAD];
	int rc;

	sqlite3_bind_double(q, 1, now);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		struct store_silence s = {
			.id = (uint64_t)sqlite3_column_int64(q, 0),
			.created = sqlite3_column_double(q, 1),
			.until = sqlite3_column_double(q, 2),
			.prog = (const char *)sqlite3_column_text(q, 3),
			.machine = (const char *)sqlite3_column_text(q, 4),
			.assertion = (const char *)sqlite3_column_text(q, 5),
			.comment = (const char *)sqlite3_column_text(q, 6),
		};
		cb(arg, &s);
	}
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "reading the silences");
}

int store_ack(struct store *st, uint64_t failure_id, double when, const char *comment)
{
	struct bl_value v[] = { vint((int64_t)failure_id), vreal(when), vtext(comment) };

	return put(st, bl_item_new(BK_CONTROL, ST_ACK, 0, v, NV(v)), "acknowledging a failure");
}

/* One DELETE of at most `limit` rows older than `before`; rows deleted. */
static int64_t prune_one(struct store *st, enum store_stmt which, double before, size_t limit)
{
	sqlite3_stmt *q = st->c.stmt[which];
	int64_t n;
	int rc;

	sqlite3_bind_double(q, 1, before);
	sqlite3_bind_int64(q, 2, (sqlite3_int64)limit);
	rc = sqlite3_step(q);
	n = rc == SQLITE_DONE ? sqlite3_changes64(st->c.db) : -1;
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	if (n < 0 && is_fault(rc))
		degrade(st, NULL, rc, 0, "pruning old rows");
	else if (n < 0)
		cmon_err("store: pruning old rows: %s", sqlite3_errmsg(st->c.db));
	return n;
}

int store_prune(struct store *st, double before, size_t limit, struct store_pruned *out)
{
	static const enum store_stmt order[] = {
		ST_PRUNE_WINDOWS, ST_PRUNE_FAILURES, ST_PRUNE_VERDICTS, ST_PRUNE_MAIL,
		ST_PRUNE_DIGEST, ST_PRUNE_SILENCES, ST_PRUNE_ALERTS,
	};
	uint64_t *count[] = {
		&out->windows, &out->failures, &out->verdicts, &out->mail, &out->mail,
		&out->silences, &out->mail,
	};

	memset(out, 0, sizeof *out);
	if (st->degraded || batch(st) < 0)
		return -EAGAIN;                /* nothing is pruned while writes are held */
	for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
		int64_t n = prune_one(st, order[i], before, limit);
		if (n < 0)
			return -EIO;
		*count[i] += (uint64_t)n;
	}
	return 0;
}

/* --- Alertmanager ------------------------------------------------------------- */

int store_alert_add(struct store *st, const char *url, const char *body, double queued,
		    uint64_t *id)
{
	uint64_t aid = st->next_alert++;
	struct bl_value v[] = { vint((int64_t)aid), vreal(queued), vtext(url), vtext(body) };
	int r = put(st, bl_item_new(BK_ALERT, ST_ALERT_INSERT, 0, v, NV(v)), "queueing an alert");

	if (r == 0)
		*id = aid;
	return r;
}

int store_alert_done(struct store *st, uint64_t id)
{
	struct bl_value v[] = { vint((int64_t)id) };

	return put(st, bl_item_new(BK_ALERT, ST_ALERT_DELETE, 0, v, NV(v)), "marking an alert sent");
}

int store_alert_load(struct store *st, store_alert_cb cb, void *arg)
{
	sqlite3_stmt *q = st->c.stmt[ST_ALERT_LOAD];
	int rc;

	while ((rc = sqlite3_step(q)) == SQLITE_ROW)
		cb(arg, (uint64_t)sqlite3_column_int64(q, 0), sqlite3_column_double(q, 1),
		   (const char *)sqlite3_column_text(q, 2), (const char *)sqlite3_column_text(q, 3));
	sqlite3_reset(q);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "reading the alert outbox");
}

int store_alert_open(struct store *st, uint64_t failure_id, uint64_t instance_id, const char *url,
		     const char *alert)
{
	struct bl_value v[] = {
		vint((int64_t)failure_id), vint((int64_t)instance_id), vtext(url), vtext(alert),
	};

	return put(st, bl_item_new(BK_ALERT, ST_ALERT_OPEN, 0, v, NV(v)), "keeping an open alert");
}

int store_alert_close(struct store *st, uint64_t failure_id)
{
	struct bl_value v[] = { vint((int64_t)failure_id) };

	return put(st, bl_item_new(BK_ALERT, ST_ALERT_CLOSE, 0, v, NV(v)), "closing an alert");
}

/* Rows of `which` (ALERT_ENDED or ALERT_LIVE) to `cb`; the columns differ. */
static int alert_rows(struct store *st, enum store_stmt which, double now, size_t limit,
		      store_open_alert_cb cb, void *arg)
{
	sqlite3_stmt *q = st->c.stmt[which];
	bool ended = which == ST_ALERT_ENDED;
	int rc;

	if (ended) {
		sqlite3_bind_double(q, 1, now);
		sqlite3_bind_int64(q, 2, (sqlite3_int64)limit);
	} else {
		sqlite3_bind_int64(q, 1, (sqlite3_int64)limit);
	}
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		int c = ended ? 1 : 0;
		cb(arg, ended ? (uint64_t)sqlite3_column_int64(q, 0) : 0,
		   (const char *)sqlite3_column_text(q, c), (const char *)sqlite3_column_text(q, c + 1),
		   ended ? sqlite3_column_double(q, 3) : 0);
	}
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	return rc == SQLITE_DONE ? 0 : db_fail(st, "reading the open alerts");
}

int store_alerts_ended(struct store *st, double now, size_t limit, store_open_alert_cb cb,
		       void *arg)
{
	return alert_rows(st, ST_ALERT_ENDED, now, limit, cb, arg);
}

int store_alerts_live(struct store *st, size_t limit, store_open_alert_cb cb, void *arg)
{
	return alert_rows(st, ST_ALERT_LIVE, 0, limit, cb, arg);
}
