/* The store's SQL: the schema of each engine with its migrations, the
 * statements store.c prepares (in the SQL both engines read alike, with
 * a PostgreSQL spelling where they differ), and the connection that holds
 * them. Only store*.c include this. */
#ifndef TELEMON_STORE_SQL_H
#define TELEMON_STORE_SQL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db.h"

/* The rows of the mail and alert queues a telemonitor sends are its own
 * (column node; ?N is its node name on a shared store, else NULL). */
#define MINE(n) "(CAST(?" #n " AS TEXT) IS NULL OR node IS NULL OR node = ?" #n ")"
#define MINE_O(n) "(CAST(?" #n " AS TEXT) IS NULL OR o.node IS NULL OR o.node = ?" #n ")"

/* An instance's failures (inconclusive ones are stored apart and not
 * counted): what every listing and a re-attach read. failure_counts is
 * kept by a trigger in the transaction of each failure row, so that the
 * count and the rows agree after any fault (store_sql.c, 16 -> 17). */
#define FAILURES_OF(tbl)                                                                     \
	"(SELECT CAST(coalesce(sum(c.count), 0) AS BIGINT) FROM failure_counts c"             \
	" WHERE c.instance_id = " tbl ".id)"

/* An instance by its key: the columns store_lookup_row() reads. */
#define INST_LOOKUP_SQL                                                                      \
	"SELECT id, bytes, records, lost, gaps, skipped, " FAILURES_OF("instances") ","       \
	" tool_restarts, want, first_seen, unchecked, checked FROM instances"                  \
	" WHERE prog=?1 AND machine=?2 AND pid=?3 AND start_ns=?4"

/* Prepared statements: X(name, sql). */
#define STORE_STMTS(X)                                                                       \
	X(BEGIN, "BEGIN")                                                                    \
	X(COMMIT, "COMMIT")                                                                  \
	X(CLASS_KEY, "SELECT id FROM classes WHERE prog=?1 AND machine=?2 AND pid=?3")       \
	X(CLASS_PUT,                                                                         \
	  "INSERT OR REPLACE INTO classes (id, prog, machine, pid, tool, spec, mail, \"window\"," \
	  " mailgroup, block, auto, active, updated)"                                        \
	  " VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,1,?12)")                              \
	X(CLASSES_KEEP,                                                                      \
	  "UPDATE classes SET active = (id IN (SELECT value FROM json_each(?1)))")           \
	X(INST_LOOKUP, INST_LOOKUP_SQL)                                                      \
	X(INST_PUT,                                                                          \
	  "INSERT INTO instances (id, class_id, prog, machine, pid, start_ns, endpoint, tls," \
	  " first_seen, ended, state, want, bytes, records, lost, gaps, skipped, failures,"  \
	  " tool_restarts, status, token, version, unchecked, checked) VALUES"              \
	  " (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22," \
	  "?23,?24)"                                                                         \
	  " ON CONFLICT (id) DO UPDATE SET class_id=excluded.class_id,"                      \
	  " endpoint=excluded.endpoint, tls=excluded.tls,"                                   \
	  " ended=coalesce(instances.ended, excluded.ended), state=excluded.state,"          \
	  " want=excluded.want, bytes=excluded.bytes, records=excluded.records,"             \
	  " lost=excluded.lost, gaps=excluded.gaps, skipped=excluded.skipped,"               \
	  " failures=excluded.failures, tool_restarts=excluded.tool_restarts,"               \
	  " status=excluded.status, token=coalesce(excluded.token, instances.token),"       \
	  " version=coalesce(excluded.version, instances.version),"                         \
	  " unchecked=excluded.unchecked, checked=excluded.checked")                         \
	X(INST_OPEN,                                                                         \
	  "SELECT id, class_id, prog, machine, pid, start_ns, endpoint, tls, state, want,"  \
	  " bytes, records, lost, gaps, skipped, " FAILURES_OF("instances") ","              \
	  " tool_restarts, status, first_seen, token, owner, version, unchecked, checked"    \
	  " FROM instances WHERE ended IS NULL"                                              \
	  " AND (CAST(?1 AS TEXT) IS NULL OR owner IS NULL OR owner = ?1) ORDER BY id")      \
	X(INST_ONE,                                                                          \
	  "SELECT id, class_id, prog, machine, pid, start_ns, endpoint, tls, state, want,"  \
	  " bytes, records, lost, gaps, skipped, " FAILURES_OF("instances") ","              \
	  " tool_restarts, status, first_seen, token, owner, version, unchecked, checked"    \
	  " FROM instances WHERE id = ?1")                                                   \
	X(ID_BLOCK, "SELECT 0")                                                              \
	X(MAIL_ADOPT,                                                                        \
	  "UPDATE mail_queue SET node = ?1 WHERE node = ?2"                                  \
	  " RETURNING id, queued, recipients, subject, body, failures")                     \
	X(DIGEST_ADOPT,                                                                      \
	  "UPDATE mail_digest SET node = ?1 WHERE node = ?2"                                 \
	  " RETURNING failure_id, instance_id, prog, machine, pid, spec, assert, line, time," \
	  " what, start_ts, end_ts, metrics, recipients, period, due")                      \
	X(ALERT_ADOPT,                                                                       \
	  "UPDATE alert_outbox SET node = ?1 WHERE node = ?2 RETURNING id, queued, url, body") \
	X(ALERTS_OPEN_ADOPT, "UPDATE alerts_open SET node = ?1 WHERE node = ?2")            \
	X(INST_REAP,                                                                         \
	  "UPDATE instances SET ended = ?1, state = 'gone',"                                 \
	  " status = 'ended while the telemonitor was away'"                                 \
	  " WHERE ended IS NULL AND id NOT IN (SELECT value FROM json_each(?2))"             \
	  " AND (CAST(?3 AS TEXT) IS NULL OR owner IS NULL OR owner = ?3)")                  \
	X(FAIL_INSERT,                                                                       \
	  "INSERT INTO failures (id, instance_id, spec, assert, line, result, kind, type,"   \
	  " uid, start_pos, end_pos, start_rec, end_rec, start_ts, end_ts, time, start_wall," \
	  " metrics, window_id, report, silence_id, am_silence) VALUES"                      \
	  " (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22)" \
	  " ON CONFLICT (id) DO NOTHING")                                                    \
	X(WIN_INSERT,                                                                        \
	  "INSERT INTO windows (id, instance_id, from_rec, to_rec, truncated, text)"         \
	  " VALUES (?1,?2,?3,?4,?5,?6) ON CONFLICT (id) DO UPDATE SET"                        \
	  " instance_id=excluded.instance_id, from_rec=excluded.from_rec,"                   \
	  " to_rec=excluded.to_rec, truncated=excluded.truncated, text=excluded.text")       \
	X(SUMMARY_INSERT,                                                                    \
	  "INSERT INTO interval_summaries (instance_id, time, type, metric, count, sum,"     \
	  " sumsq, min, max, sketch) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)")              \
	X(VERDICT_INSERT,                                                                    \
	  "INSERT INTO verdicts (instance_id, spec, assert, line, result, offenders, time,"  \
	  " from_rec, to_rec, partial) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)")             \
	X(MAIL_INSERT,                                                                       \
	  "INSERT INTO mail_queue (id, queued, recipients, subject, body, failures, node)"   \
	  " VALUES (?1,?2,?3,?4,?5,?6,?7) ON CONFLICT (id) DO NOTHING")                      \
	X(MAIL_DELETE, "DELETE FROM mail_queue WHERE id=?1")                                 \
	X(MAIL_LOAD,                                                                         \
	  "SELECT id, queued, recipients, subject, body, failures FROM mail_queue"          \
	  " WHERE " MINE(1) " ORDER BY id")                                                  \
	X(DIGEST_INSERT,                                                                     \
	  "INSERT INTO mail_digest (failure_id, instance_id, prog, machine, pid, spec,"     \
	  " assert, line, time, what, start_ts, end_ts, metrics, recipients, period, due,"  \
	  " node) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17)")      \
	X(DIGEST_DELETE,                                                                     \
	  "DELETE FROM mail_digest WHERE instance_id=?1 AND assert=?2 AND line=?3")         \
	X(DIGEST_LOAD,                                                                       \
	  "SELECT failure_id, instance_id, prog, machine, pid, spec, assert, line, time,"   \
	  " what, start_ts, end_ts, metrics, recipients, period, due FROM mail_digest"      \
	  " WHERE " MINE(1) " ORDER BY id")                                                  \
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
	X(PRUNE_SUMMARIES,                                                                   \
	  "DELETE FROM interval_summaries WHERE id IN (SELECT id FROM interval_summaries"   \
	  " WHERE time < ?1 ORDER BY id LIMIT ?2)")                                          \
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
	  "INSERT INTO alert_outbox (id, queued, url, body, node) VALUES (?1,?2,?3,?4,?5)"  \
	  " ON CONFLICT (id) DO NOTHING")                                                    \
	X(ALERT_DELETE, "DELETE FROM alert_outbox WHERE id=?1")                              \
	X(ALERT_LOAD,                                                                        \
	  "SELECT id, queued, url, body FROM alert_outbox WHERE " MINE(1) " ORDER BY id")    \
	X(ALERT_SUPERSEDE,                                                                   \
	  "DELETE FROM alerts_open WHERE instance_id=?1 AND name=?2 AND failure_id<>?3")     \
	X(ALERT_OPEN,                                                                        \
	  "INSERT INTO alerts_open (failure_id, instance_id, url, alert, node, name, ends)"  \
	  " VALUES (?1,?2,?3,?4,?5,?6,?7) ON CONFLICT (failure_id) DO UPDATE SET"            \
	  " instance_id=excluded.instance_id, url=excluded.url, alert=excluded.alert,"       \
	  " node=excluded.node, name=excluded.name, ends=excluded.ends")                     \
	X(ALERT_ENDED,                                                                       \
	  "SELECT o.failure_id, o.url, o.alert,"                                             \
	  " CASE WHEN o.ends IS NOT NULL AND (i.ended IS NULL OR o.ends < i.ended)"          \
	  " THEN o.ends ELSE coalesce(i.ended, ?1) END FROM alerts_open o"                   \
	  " LEFT JOIN instances i ON i.id = o.instance_id"                                   \
	  " WHERE (i.id IS NULL OR i.ended IS NOT NULL OR o.ends <= ?1) AND " MINE_O(3)      \
	  " ORDER BY o.failure_id LIMIT ?2")                                                 \
	X(ALERT_CLOSE, "DELETE FROM alerts_open WHERE failure_id=?1")                        \
	X(ALERT_LIVE,                                                                        \
	  "SELECT o.url, o.alert, coalesce(o.ends, 0) FROM alerts_open o"                   \
	  " JOIN instances i ON i.id = o.instance_id"                                        \
	  " WHERE i.ended IS NULL AND " MINE_O(2) " ORDER BY o.failure_id DESC LIMIT ?1")    \
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

/* sqlite's schema migrations (sqlite_migrations[i]: version i to i + 1). */
extern const char *const sqlite_migrations[];

/* One connection with its statements prepared. */
struct conn {
	struct db *db;                /* the connection (NULL: none) */
	struct db_stmt *stmt[ST_COUNT]; /* prepared statements */
	int version;                  /* schema version */
	bool fresh;                   /* the schema was created by this open */
};

/* Open `target` (a sqlite file or a PostgreSQL URL), create or upgrade its
 * schema, prepare the statements. 0, or -EIO with a message. */
int conn_open(struct conn *c, const char *target, char *err, size_t errlen);

/* Finalize the statements and close; accepts a closed one. */
void conn_close(struct conn *c);

/* One number from `sql` (no parameters); 0 if none. */
uint64_t conn_u64(struct conn *c, const char *sql);

#endif
