/* The store's SQL (see store_sql.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cmon/log.h"
#include "store.h"
#include "store_sql.h"

/* --- sqlite: migrations[i] upgrades version i to i + 1. Never edit a
 * released one; add the next (and the same change to PostgreSQL's). */
/* Migration 9, both engines: the queued mail and alerts say which
 * telemonitor queued them (it sends them, after a restart too). */
#define MAIL_NODES                                                                          \
	"ALTER TABLE mail_queue ADD COLUMN node TEXT;"                                      \
	"ALTER TABLE mail_digest ADD COLUMN node TEXT;"                                     \
	"ALTER TABLE alert_outbox ADD COLUMN node TEXT;"                                    \
	"ALTER TABLE alerts_open ADD COLUMN node TEXT;"

/* Migration 10, both engines: the program's version of each instance, and
 * the listing of a program's versions (telemonctl history) by it. */
#define INSTANCE_VERSION                                                                    \
	"ALTER TABLE instances ADD COLUMN version TEXT;"                                    \
	"CREATE INDEX instances_prog_version ON instances (prog, version);"
/* 12 -> 13: instance ownership on its own rows (store_fleet.c): leases
 * with an epoch, the nodes alive, class ids from a sequence (sqlite has
 * one telemonitor and never uses them); and the records each end-of-log
 * verdict covers, partial when its checker did not see the whole log (an
 * instance handed from one telemonitor to another). */
#define VERDICT_RANGES                                                                      \
	"ALTER TABLE verdicts ADD COLUMN from_rec BIGINT;"                                  \
	"ALTER TABLE verdicts ADD COLUMN to_rec BIGINT;"                                    \
	"ALTER TABLE verdicts ADD COLUMN partial BIGINT NOT NULL DEFAULT 0;"
/* 13 -> 14, both engines: an open alert is one per (instance, assertion)
 * and resolves at `ends` (its last failure + resolve-after) or when its
 * instance ends. */
#define ALERT_ENDS(REAL)                                                                    \
	"ALTER TABLE alerts_open ADD COLUMN name TEXT;"                                     \
	"ALTER TABLE alerts_open ADD COLUMN ends " REAL ";"                                 \
	"CREATE INDEX alerts_open_pair ON alerts_open (instance_id, name);"
/* 14 -> 15, both engines: the Alertmanager silence (its id) that kept a
 * failure quiet (docs/alerting.md, "One silence model"). */
#define AM_SILENCE "ALTER TABLE failures ADD COLUMN am_silence TEXT;"
/* 15 -> 16: failures_series (instance_id, name) serves every lookup by
 * instance_id, so failures_instance only cost each insert its upkeep (7%
 * of a failure's, bench_tm_store). */
#define NO_FAILURES_INSTANCE "DROP INDEX IF EXISTS failures_instance;"
/* 16 -> 17, both engines: an instance's failures counted per assertion
 * name (and report flag) in failure_counts, kept by a trigger in the
 * transaction of each failure row it counts (inconclusive ones are not
 * counted; `newest` is the newest failure with metrics). Every listing's
 * count (FAILURES_OF) and /metrics read it, a row per series, where they
 * read every failure of the instances shown; the two indexes that
 * served them led with the instance, so each failure dirtied two pages
 * of its own in every commit (10 of its 31 us at 1,000 streams,
 * bench_tm_store ramp; the trigger costs 5). Rows pruned by retention
 * stay counted: the counts are of failures ever stored, as a Prometheus
 * counter must be. An instance's reports are still found by an index, on
 * report rows only.
 * The name is the label, or "line N" ("" for a row with neither), as
 * /metrics shows it. */
#define COUNT_NAME(row) "coalesce(" row ".assert, 'line ' || CAST(" row ".line AS TEXT), '')"
#define FAILURE_COUNTS(BIGINT, WITHOUT_ROWID)                                               \
	"CREATE TABLE failure_counts ("                                                     \
	"  instance_id " BIGINT " NOT NULL, name TEXT NOT NULL, report " BIGINT " NOT NULL," \
	"  count " BIGINT " NOT NULL, newest " BIGINT ","                                   \
	"  PRIMARY KEY (instance_id, name, report))" WITHOUT_ROWID ";"                      \
	"INSERT INTO failure_counts (instance_id, name, report, count, newest)"             \
	" SELECT instance_id, " COUNT_NAME("failures") ", report,"                          \
	" sum(CASE WHEN coalesce(result, '') <> 'inconclusive' THEN 1 ELSE 0 END),"         \
	" max(CASE WHEN metrics IS NOT NULL THEN id END) FROM failures"                     \
	" GROUP BY instance_id, " COUNT_NAME("failures") ", report;"                        \
	"DROP INDEX failures_series; DROP INDEX failures_reports;"                          \
	"CREATE INDEX failures_report_rows ON failures (instance_id, id) WHERE report = 1;"
/* The trigger's statement: count the NEW failure row. */
#define COUNT_FAILURE                                                                       \
	"INSERT INTO failure_counts (instance_id, name, report, count, newest) VALUES"       \
	" (NEW.instance_id, " COUNT_NAME("NEW") ", NEW.report,"                             \
	" CASE WHEN coalesce(NEW.result, '') <> 'inconclusive' THEN 1 ELSE 0 END,"          \
	" CASE WHEN NEW.metrics IS NOT NULL THEN NEW.id END)"                               \
	" ON CONFLICT (instance_id, name, report) DO UPDATE SET"                            \
	" count = failure_counts.count + excluded.count,"                                   \
	" newest = CASE WHEN excluded.newest IS NULL THEN failure_counts.newest"            \
	" WHEN failure_counts.newest IS NULL OR excluded.newest > failure_counts.newest"    \
	" THEN excluded.newest ELSE failure_counts.newest END"
#define FAILURE_COUNTS_SQLITE                                                               \
	FAILURE_COUNTS("INTEGER", " WITHOUT ROWID")                                         \
	"CREATE TRIGGER failures_counted AFTER INSERT ON failures BEGIN " COUNT_FAILURE "; END;"
#define FAILURE_COUNTS_PG                                                                   \
	FAILURE_COUNTS("BIGINT", "")                                                        \
	"CREATE FUNCTION cmon_count_failure() RETURNS trigger LANGUAGE plpgsql AS $$"        \
	" BEGIN " COUNT_FAILURE "; RETURN NULL; END $$;"                                    \
	"CREATE TRIGGER failures_counted AFTER INSERT ON failures"                          \
	" FOR EACH ROW EXECUTE FUNCTION cmon_count_failure();"
#define FLEET_TABLES_SQLITE VERDICT_RANGES                                                  \
	"CREATE TABLE leases (instance_id INTEGER PRIMARY KEY, owner TEXT,"                 \
	"  epoch INTEGER NOT NULL DEFAULT 0, lease_until REAL);"                            \
	"CREATE TABLE nodes (name TEXT PRIMARY KEY, seen REAL NOT NULL, started REAL,"      \
	"  sessions INTEGER NOT NULL DEFAULT 0, capacity INTEGER NOT NULL DEFAULT 0);"
#define FLEET_TABLES_PG VERDICT_RANGES                                                      \
	"CREATE TABLE leases (instance_id BIGINT PRIMARY KEY, owner TEXT,"                  \
	"  epoch BIGINT NOT NULL DEFAULT 0, lease_until TIMESTAMPTZ);"                      \
	"CREATE INDEX leases_owner ON leases (owner);"                                      \
	"CREATE TABLE nodes (name TEXT PRIMARY KEY, seen TIMESTAMPTZ NOT NULL, started TIMESTAMPTZ," \
	"  sessions BIGINT NOT NULL DEFAULT 0, capacity BIGINT NOT NULL DEFAULT 0);"        \
	"INSERT INTO leases (instance_id, owner, epoch, lease_until)"                       \
	"  SELECT id, owner, 1, now() FROM instances WHERE ended IS NULL;"                  \
	"CREATE SEQUENCE cmon_class_ids;"                                                   \
	"SELECT setval('cmon_class_ids', (SELECT coalesce(max(id), 0) + 1 FROM classes), false);"
#define INSTANCE_CHECKED                                                                    \
	"ALTER TABLE instances ADD COLUMN unchecked BIGINT NOT NULL DEFAULT 0;"             \
	"ALTER TABLE instances ADD COLUMN checked BIGINT NOT NULL DEFAULT 0;"

/* Migration 11, both engines: summaries are read per instance (compare,
 * by version) and pruned by time. */
#define SUMMARY_INDEXES                                                                     \
	"CREATE INDEX interval_summaries_instance ON interval_summaries (instance_id);"     \
	"CREATE INDEX interval_summaries_time ON interval_summaries (time);"

const char *const sqlite_migrations[] = {
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
	/* 7 -> 8: the name of an unlabelled assertion is spelled with a
	 * CAST, the one spelling PostgreSQL also takes in an index
	 * (text || integer is not immutable there); store_read.c's
	 * ASSERT_NAME, word for word. */
	"DROP INDEX failures_series; DROP INDEX failures_reports;"
	"CREATE INDEX failures_series ON failures"
	"  (instance_id, coalesce(assert, 'line ' || CAST(line AS TEXT)));"
	"CREATE INDEX failures_reports ON failures"
	"  (instance_id, coalesce(assert, 'line ' || CAST(line AS TEXT))) WHERE metrics IS NOT NULL;",
	/* 8 -> 9: several telemonitors on one store (PostgreSQL). An
	 * instance is monitored by its owner (the telemonitor's node name)
	 * while its lease lasts; the owner renews it, another takes it over
	 * once it has run out (store.h, Leases). Unused on sqlite. */
	"ALTER TABLE instances ADD COLUMN owner TEXT;"
	"ALTER TABLE instances ADD COLUMN lease_until REAL;" MAIL_NODES,
	/* 9 -> 10: the program's version, from its log header
	 * (#program-version, snarflog), for telemonctl history. */
	INSTANCE_VERSION,
	/* 10 -> 11: the checker's summaries of interval durations
	 * (pcheck --summaries), for telemonctl compare. */
	"CREATE TABLE interval_summaries ("
	"  id INTEGER PRIMARY KEY,"
	"  instance_id INTEGER NOT NULL, time REAL NOT NULL,"
	"  type TEXT NOT NULL, metric TEXT NOT NULL,"
	"  count INTEGER NOT NULL, sum REAL, sumsq REAL, min REAL, max REAL, sketch TEXT);"
	SUMMARY_INDEXES,
	/* 11 -> 12: records a checker was given but did not report on (its
	 * run was killed, or its reports died with a telemonitor), and how
	 * far its reports are stored or so counted (docs/protocol.md §11) */
	INSTANCE_CHECKED,
	FLEET_TABLES_SQLITE,
	ALERT_ENDS("REAL"),
	AM_SILENCE,
	NO_FAILURES_INSTANCE,
	FAILURE_COUNTS_SQLITE,
};

#define NMIGRATIONS (sizeof sqlite_migrations / sizeof sqlite_migrations[0])
_Static_assert(NMIGRATIONS == STORE_SCHEMA_VERSION, "one migration per schema version");

/* --- PostgreSQL: a new database gets the schema of version PG_BASE at
 * once (the version PostgreSQL support began with: the same tables,
 * columns and indexes as sqlite's, in PostgreSQL's types); pg_migrations[i]
 * upgrades PG_BASE + i to PG_BASE + i + 1. A class is replaced, with any
 * other row of its key, by cmon_class_put(): INSERT OR REPLACE in one
 * call. */
#define PG_BASE 8

static const char pg_schema[] =
	"CREATE TABLE classes ( "
	"  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
	"  prog TEXT NOT NULL, machine TEXT NOT NULL, pid TEXT NOT NULL, "
	"  tool TEXT, spec TEXT, mail TEXT, \"window\" TEXT, mailgroup DOUBLE PRECISION, "
	"  block BIGINT NOT NULL, auto BIGINT NOT NULL, "
	"  active BIGINT NOT NULL DEFAULT 1, updated DOUBLE PRECISION, "
	"  UNIQUE (prog, machine, pid));"
	"CREATE TABLE instances ( "
	"  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
	"  class_id BIGINT, "
	"  prog TEXT NOT NULL, machine TEXT NOT NULL, pid BIGINT NOT NULL, "
	"  start_ns BIGINT NOT NULL, "
	"  endpoint TEXT, tls BIGINT NOT NULL DEFAULT 0, "
	"  first_seen DOUBLE PRECISION NOT NULL, ended DOUBLE PRECISION, "
	"  state TEXT NOT NULL DEFAULT 'listed', want BIGINT NOT NULL DEFAULT 0, "
	"  bytes BIGINT NOT NULL DEFAULT 0, records BIGINT NOT NULL DEFAULT 0, "
	"  lost BIGINT NOT NULL DEFAULT 0, gaps BIGINT NOT NULL DEFAULT 0, "
	"  skipped BIGINT NOT NULL DEFAULT 0, failures BIGINT NOT NULL DEFAULT 0, "
	"  tool_restarts BIGINT NOT NULL DEFAULT 0, status TEXT, token BYTEA, "
	"  UNIQUE (prog, machine, pid, start_ns));"
	"CREATE INDEX instances_open ON instances (ended) WHERE ended IS NULL;"
	"CREATE TABLE failures ( "
	"  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
	"  instance_id BIGINT NOT NULL, "
	"  spec TEXT, assert TEXT, line BIGINT, result TEXT, kind TEXT, type TEXT, uid BIGINT, "
	"  start_pos TEXT, end_pos TEXT, start_rec BIGINT, end_rec BIGINT, "
	"  start_ts BIGINT, end_ts BIGINT, "
	"  time DOUBLE PRECISION NOT NULL, start_wall DOUBLE PRECISION, "
	"  metrics TEXT, window_id BIGINT, "
	"  report BIGINT NOT NULL DEFAULT 0, silence_id BIGINT, acked DOUBLE PRECISION, ack_comment TEXT);"
	"CREATE INDEX failures_instance ON failures (instance_id);"
	"CREATE INDEX failures_assert ON failures (assert, time);"
	"CREATE INDEX failures_time ON failures (time);"
	"CREATE INDEX failures_series ON failures (instance_id, coalesce(assert, 'line ' || CAST(line AS TEXT)));"
	"CREATE INDEX failures_reports ON failures (instance_id, coalesce(assert, 'line ' || CAST(line AS TEXT))) WHERE metrics IS NOT NULL;"
	"CREATE TABLE windows ( "
	"  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
	"  instance_id BIGINT NOT NULL, "
	"  from_rec BIGINT, to_rec BIGINT, truncated BIGINT NOT NULL DEFAULT 0, "
	"  text TEXT NOT NULL);"
	"CREATE TABLE verdicts ( "
	"  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
	"  instance_id BIGINT NOT NULL, "
	"  spec TEXT, assert TEXT, line BIGINT, result TEXT, offenders BIGINT, "
	"  time DOUBLE PRECISION NOT NULL);"
	"CREATE INDEX verdicts_instance ON verdicts (instance_id);"
	"CREATE INDEX verdicts_time ON verdicts (time);"
	"CREATE TABLE mail_queue ( "
	"  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
	"  queued DOUBLE PRECISION NOT NULL, "
	"  recipients TEXT NOT NULL, subject TEXT NOT NULL, body TEXT NOT NULL, "
	"  failures BIGINT NOT NULL);"
	"CREATE TABLE mail_digest ( "
	"  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
	"  failure_id BIGINT NOT NULL, instance_id BIGINT NOT NULL, "
	"  prog TEXT NOT NULL, machine TEXT NOT NULL, pid BIGINT NOT NULL, "
	"  spec TEXT, assert TEXT NOT NULL, line BIGINT NOT NULL, "
	"  time DOUBLE PRECISION NOT NULL, what TEXT, start_ts BIGINT, end_ts BIGINT, metrics TEXT, "
	"  recipients TEXT NOT NULL, period DOUBLE PRECISION NOT NULL, due DOUBLE PRECISION NOT NULL);"
	"CREATE INDEX mail_digest_group ON mail_digest (instance_id, assert, line);"
	"CREATE TABLE store_outages ( "
	"  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
	"  began DOUBLE PRECISION NOT NULL, ended DOUBLE PRECISION NOT NULL, reason TEXT, detail TEXT, "
	"  writes BIGINT NOT NULL, failures BIGINT NOT NULL, "
	"  dropped BIGINT NOT NULL, dropped_failures BIGINT NOT NULL);"
	"CREATE TABLE silences ( "
	"  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
	"  created DOUBLE PRECISION NOT NULL, until DOUBLE PRECISION NOT NULL, "
	"  prog TEXT, machine TEXT, assert TEXT, comment TEXT, "
	"  removed DOUBLE PRECISION);"
	"CREATE TABLE alert_outbox ( "
	"  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
	"  queued DOUBLE PRECISION NOT NULL, url TEXT NOT NULL, body TEXT NOT NULL);"
	"CREATE TABLE alerts_open ( "
	"  failure_id BIGINT PRIMARY KEY, "
	"  instance_id BIGINT NOT NULL, url TEXT NOT NULL, alert TEXT NOT NULL);"
	"CREATE INDEX alerts_open_instance ON alerts_open (instance_id);"
	"CREATE FUNCTION cmon_class_put(p_id BIGINT, p_prog TEXT, p_machine TEXT, p_pid TEXT,"
	"  p_tool TEXT, p_spec TEXT, p_mail TEXT, p_window TEXT, p_mailgroup DOUBLE PRECISION,"
	"  p_block BIGINT, p_auto BIGINT, p_updated DOUBLE PRECISION) RETURNS void"
	"  LANGUAGE sql AS $$"
	"  DELETE FROM classes WHERE id = p_id OR (prog = p_prog AND machine = p_machine"
	"    AND pid = p_pid);"
	"  INSERT INTO classes (id, prog, machine, pid, tool, spec, mail, \"window\", mailgroup,"
	"    block, auto, active, updated) VALUES (p_id, p_prog, p_machine, p_pid, p_tool, p_spec,"
	"    p_mail, p_window, p_mailgroup, p_block, p_auto, 1, p_updated);"
	"  $$;";

static const char *const pg_migrations[] = {
	/* 8 -> 9: as sqlite's, and the blocks of ids each telemonitor hands
	 * out (store.c, ids) */
	"ALTER TABLE instances ADD COLUMN owner TEXT;"
	"ALTER TABLE instances ADD COLUMN lease_until DOUBLE PRECISION;"
	"CREATE INDEX instances_owner ON instances (owner) WHERE ended IS NULL;"
	"CREATE SEQUENCE cmon_id_blocks START 1;" MAIL_NODES,
	/* 9 -> 10: as sqlite's */
	INSTANCE_VERSION,
	/* 10 -> 11: as sqlite's */
	"CREATE TABLE interval_summaries ("
	"  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
	"  instance_id BIGINT NOT NULL, time DOUBLE PRECISION NOT NULL,"
	"  type TEXT NOT NULL, metric TEXT NOT NULL,"
	"  count BIGINT NOT NULL, sum DOUBLE PRECISION, sumsq DOUBLE PRECISION,"
	"  min DOUBLE PRECISION, max DOUBLE PRECISION, sketch TEXT);"
	SUMMARY_INDEXES,
	/* 11 -> 12: as sqlite's */
	INSTANCE_CHECKED,
	/* 12 -> 13: leases with epochs, nodes, class ids from the server */
	FLEET_TABLES_PG,
	/* 13 -> 14: as sqlite's */
	ALERT_ENDS("DOUBLE PRECISION"),
	/* 14 -> 15: as sqlite's */
	AM_SILENCE,
	/* 15 -> 16: as sqlite's */
	NO_FAILURES_INSTANCE,
	/* 16 -> 17: as sqlite's, the trigger in PL/pgSQL */
	FAILURE_COUNTS_PG,
	NULL,
};

#define NPG_MIGRATIONS (sizeof pg_migrations / sizeof pg_migrations[0] - 1)
_Static_assert(PG_BASE + NPG_MIGRATIONS == STORE_SCHEMA_VERSION,
	       "PostgreSQL's schema is at the same version as sqlite's");

/* A list of ids as a JSON array text ("[1,2,3]"), read by each engine's
 * own JSON function. */
#define PG_IDS(n) "(SELECT CAST(value AS BIGINT) FROM json_array_elements_text(CAST(?" #n " AS json)))"

/* The fence on instance `id` (an SQL expression) with the node name in
 * parameter n (NULL: a store that is not shared, no fence) and the epoch
 * in parameter e. */
#define FENCED(id, n, e)                                                                    \
	"(CAST(?" #n " AS TEXT) IS NULL OR EXISTS (SELECT 1 FROM leases"                    \
	" WHERE instance_id = " id " AND owner = ?" #n                                      \
	" AND epoch = CAST(?" #e " AS BIGINT) FOR KEY SHARE))"

/* Statements PostgreSQL spells differently (NULL: the same). */
static const char *const stmt_sql_pg[ST_COUNT] = {
	/* (class_put_pg: by its key, the id from the server; 11 values) */
	[ST_CLASS_PUT] =
		"INSERT INTO classes (id, prog, machine, pid, tool, spec, mail, \"window\","
		" mailgroup, block, auto, active, updated) VALUES (nextval('cmon_class_ids'),"
		" ?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,1,?11)"
		" ON CONFLICT (prog, machine, pid) DO UPDATE SET tool = excluded.tool,"
		" spec = excluded.spec, mail = excluded.mail, \"window\" = excluded.\"window\","
		" mailgroup = excluded.mailgroup, block = excluded.block, auto = excluded.auto,"
		" active = 1, updated = excluded.updated RETURNING id",
	[ST_CLASSES_KEEP] = "UPDATE classes SET active = CASE WHEN id IN " PG_IDS(1)
			    " THEN 1 ELSE 0 END",
	[ST_INST_REAP] = "UPDATE instances SET ended = ?1, state = 'gone',"
			 " status = 'ended while the telemonitor was away'"
			 " WHERE ended IS NULL AND id NOT IN " PG_IDS(2)
			 " AND (CAST(?3 AS TEXT) IS NULL OR (instances.first_seen < ?1"
			 " AND NOT EXISTS (SELECT 1 FROM leases l"
			 " WHERE l.instance_id = instances.id AND l.owner IS NOT NULL"
			 " AND l.owner <> ?3)))",
	/* the fence (store_fleet.c): an instance's writes go in only while
	 * this node (?N) holds its lease at its epoch (?N+1), the lease row
	 * held FOR KEY SHARE until the batch commits */
	[ST_INST_PUT] =
		"INSERT INTO instances (id, class_id, prog, machine, pid, start_ns, endpoint, tls,"
		" first_seen, ended, state, want, bytes, records, lost, gaps, skipped, failures,"
		" tool_restarts, status, token, version, unchecked, checked, owner) VALUES"
		" (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22,"
		"?23,?24,?25)"
		" ON CONFLICT (id) DO UPDATE SET class_id=excluded.class_id,"
		" endpoint=excluded.endpoint, tls=excluded.tls,"
		" ended=coalesce(instances.ended, excluded.ended), state=excluded.state,"
		" want=excluded.want, bytes=excluded.bytes, records=excluded.records,"
		" lost=excluded.lost, gaps=excluded.gaps, skipped=excluded.skipped,"
		" failures=excluded.failures, tool_restarts=excluded.tool_restarts,"
		" status=excluded.status, token=coalesce(excluded.token, instances.token),"
		" version=coalesce(excluded.version, instances.version),"
		" unchecked=excluded.unchecked, checked=excluded.checked, owner=excluded.owner"
		" WHERE " FENCED("excluded.id", 25, 26),
	[ST_FAIL_INSERT] =
		"INSERT INTO failures (id, instance_id, spec, assert, line, result, kind, type,"
		" uid, start_pos, end_pos, start_rec, end_rec, start_ts, end_ts, time, start_wall,"
		" metrics, window_id, report, silence_id, am_silence)"
		" SELECT ?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22"
		" WHERE " FENCED("?2", 23, 24) " ON CONFLICT (id) DO NOTHING",
	[ST_WIN_INSERT] =
		"INSERT INTO windows (id, instance_id, from_rec, to_rec, truncated, text)"
		" SELECT ?1,?2,?3,?4,?5,?6 WHERE " FENCED("?2", 7, 8)
		" ON CONFLICT (id) DO UPDATE SET"
		" instance_id=excluded.instance_id, from_rec=excluded.from_rec,"
		" to_rec=excluded.to_rec, truncated=excluded.truncated, text=excluded.text",
	[ST_VERDICT_INSERT] =
		"INSERT INTO verdicts (instance_id, spec, assert, line, result, offenders, time,"
		" from_rec, to_rec, partial)"
		" SELECT ?1,?2,?3,?4,?5,?6,?7,?8,?9,?10 WHERE " FENCED("?1", 11, 12),
	[ST_SUMMARY_INSERT] =
		"INSERT INTO interval_summaries (instance_id, time, type, metric, count, sum,"
		" sumsq, min, max, sketch) SELECT ?1,?2,?3,?4,?5,?6,?7,?8,?9,?10"
		" WHERE " FENCED("?1", 11, 12),
	[ST_INST_OPEN] =
		"SELECT id, class_id, prog, machine, pid, start_ns, endpoint, tls, state, want,"
		" bytes, records, lost, gaps, skipped, " FAILURES_OF("instances") ","
		" tool_restarts, status, first_seen, token, owner, version, unchecked, checked"
		" FROM instances WHERE ended IS NULL"
		" AND (CAST(?1 AS TEXT) IS NULL OR NOT EXISTS (SELECT 1 FROM leases l"
		" WHERE l.instance_id = instances.id AND l.owner IS NOT NULL AND l.owner <> ?1))"
		" ORDER BY id",
	[ST_ID_BLOCK] = "SELECT nextval('cmon_id_blocks')",
};

static const char *const stmt_sql[ST_COUNT] = {
#define STMT_SQL(n, s) [ST_##n] = s,
	STORE_STMTS(STMT_SQL)
#undef STMT_SQL
};


/* --- the connection ------------------------------------------------------------ */

/* Say what failed while setting up the schema, and roll back. */
static int schema_failed(struct conn *c, char *err, size_t errlen)
{
	snprintf(err, errlen, "cannot set up the database schema: %s", db_errmsg(c->db));
	if (db_in_transaction(c->db))
		db_exec(c->db, "ROLLBACK");
	return -EIO;
}

/* Bring the schema up to STORE_SCHEMA_VERSION: a new database is created
 * at the current schema in one transaction, an older one is upgraded one
 * migration per transaction; either is logged once. The version is read
 * again once the exclusive transaction holds, so that telemonitors opening
 * one new PostgreSQL database at once create it once. */
static int migrate(struct conn *c, char *err, size_t errlen)
{
	bool pg = db_engine(c->db) == DB_POSTGRES;
	int v = 0, from;

	if (db_begin_exclusive(c->db) != DB_DONE || db_schema_version(c->db, &v) != DB_DONE)
		return schema_failed(c, err, errlen);
	if (v > STORE_SCHEMA_VERSION) {
		db_exec(c->db, "ROLLBACK");
		snprintf(err, errlen, "the database's schema version %d is newer than this "
			 "telemonitor's (%d); use a newer telemonitor", v, STORE_SCHEMA_VERSION);
		return -EINVAL;
	}
	c->fresh = v == 0;
	from = v;
	if (pg && v == 0) {
		if (db_exec(c->db, pg_schema) != DB_DONE)
			return schema_failed(c, err, errlen);
		v = PG_BASE;
	}
	for (; v < STORE_SCHEMA_VERSION; v++) {
		const char *sql = pg ? pg_migrations[v - PG_BASE] : sqlite_migrations[v];
		if (db_exec(c->db, sql) != DB_DONE)
			return schema_failed(c, err, errlen);
		if (!c->fresh && (db_set_schema_version(c->db, v + 1) != DB_DONE ||
				  db_exec(c->db, "COMMIT") != DB_DONE ||
				  (v + 1 < STORE_SCHEMA_VERSION && db_begin_exclusive(c->db) != DB_DONE)))
			return schema_failed(c, err, errlen);
	}
	if ((c->fresh || from == v) &&
	    ((from != v && db_set_schema_version(c->db, v) != DB_DONE) ||
	     db_exec(c->db, "COMMIT") != DB_DONE))
		return schema_failed(c, err, errlen);
	if (c->fresh)
		cmon_info("store: created %s %s (schema %d)", db_engine_name(c->db),
			  db_target(c->db), v);
	else if (from < v)
		cmon_info("store: schema upgraded from version %d to %d", from, v);
	c->version = v;
	return 0;
}

void conn_close(struct conn *c)
{
	for (int i = 0; i < ST_COUNT; i++) {
		db_finalize(c->stmt[i]);
		c->stmt[i] = NULL;
	}
	db_close(c->db);
	c->db = NULL;
}

int conn_open(struct conn *c, const char *target, char *err, size_t errlen)
{
	bool pg;

	memset(c, 0, sizeof *c);
	c->db = db_open(target, err, errlen);
	if (!c->db)
		return -EIO;
	if (migrate(c, err, errlen) < 0)
		goto out_close;
	pg = db_engine(c->db) == DB_POSTGRES;
	for (int i = 0; i < ST_COUNT; i++) {
		const char *sql = pg && stmt_sql_pg[i] ? stmt_sql_pg[i] : stmt_sql[i];
		if (!(c->stmt[i] = db_prepare(c->db, sql))) {
			snprintf(err, errlen, "preparing statement %d: %s", i, db_errmsg(c->db));
			goto out_close;
		}
	}
	return 0;
out_close:
	conn_close(c);
	return -EIO;
}

uint64_t conn_u64(struct conn *c, const char *sql)
{
	struct db_stmt *q = db_prepare(c->db, sql);
	uint64_t v = 0;

	if (!q)
		return 0;
	if (db_run(q, NULL, 0) == DB_ROW)
		v = (uint64_t)db_col_int(q, 0);
	db_finalize(q);
	return v;
}
