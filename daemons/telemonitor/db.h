/* The database under the store: one connection to sqlite (a file) or to
 * PostgreSQL (a URL), behind one small interface, so that store*.c hold
 * every query and know nothing of either library.
 *
 * Statements use sqlite's numbered placeholders (?1, ?2, ...) in the
 * subset of SQL both engines read alike (ON CONFLICT ... DO UPDATE,
 * coalesce, LIMIT ?N, CAST(?N AS TEXT) where a parameter's type could not
 * be inferred, "window" quoted); the PostgreSQL driver turns ?N into $N.
 * Values go in as bl_value (backlog.h), the same as held writes.
 *
 * A step or exec answers with an enum db_rc. DB_FAULT means the engine
 * could not take it for a reason outside the statement (disk full,
 * read-only, I/O error, the server gone or shutting down, a lock timeout):
 * retrying later may cure it, and db_fault() says why in a few words.
 * DB_REFUSED means the statement itself will never go in (a constraint,
 * a type mismatch, a bad statement): it is dropped, not retried.
 *
 * Not thread-safe: one connection per thread. Never prints, never exits. */
#ifndef TELEMON_DB_H
#define TELEMON_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backlog.h"

/* Outcome of a step or an exec. */
enum db_rc {
	DB_DONE,                 /* done (no more rows) */
	DB_ROW,                  /* a row is ready (db_col_*) */
	DB_FAULT,                /* the engine cannot take it now: retry later */
	DB_REFUSED,              /* the statement cannot go in: drop it */
};

/* The engines. */
enum db_engine {
	DB_SQLITE,               /* a file, in WAL mode */
	DB_POSTGRES,             /* a server, by URL */
};

struct db;
struct db_stmt;

/* True if `target` names a PostgreSQL server ("postgresql://" or
 * "postgres://" URL, or a libpq "key=value" string with host= or dbname=). */
bool db_is_url(const char *target);

/* A store target that names the embedded default: NULL, "" or "sqlite"
 * (DESIGN.md: `(store "sqlite")`), which is sqlite in the state
 * directory; any other target is a PostgreSQL URL. */
static inline bool db_target_embedded(const char *target)
{
	return !target || !*target || !strcmp(target, "sqlite");
}

/* A store target a user may give (-store, (store ...)): the embedded one
 * or a postgresql:// / postgres:// URL. */
static inline bool db_target_valid(const char *target)
{
	return db_target_embedded(target) || !strncmp(target, "postgresql://", 13) ||
	       !strncmp(target, "postgres://", 11);
}

/* Open a connection to `target`: a PostgreSQL URL (db_is_url) or a sqlite
 * file path (created if missing). NULL with a message naming the target. */
struct db *db_open(const char *target, char *err, size_t errlen);

/* Close; accepts NULL. Prepared statements must be finalized first. */
void db_close(struct db *db);

/* Which engine. */
enum db_engine db_engine(const struct db *db);

/* "sqlite" or "postgresql". */
const char *db_engine_name(const struct db *db);

/* The target as given, with any password in a URL masked, for messages. */
const char *db_target(const struct db *db);

/* Run one or more statements without parameters (DDL, BEGIN, COMMIT,
 * ROLLBACK). DB_DONE, DB_FAULT or DB_REFUSED. */
enum db_rc db_exec(struct db *db, const char *sql);

/* Begin a transaction that no other writer shares: sqlite's BEGIN
 * IMMEDIATE; on PostgreSQL a transaction holding the store's advisory
 * lock, so that telemonitors sharing a database set up its schema one at
 * a time. */
enum db_rc db_begin_exclusive(struct db *db);

/* The schema version stored in the database into *version (0 for a new
 * database): sqlite's user_version; a one-row table cmon_schema on
 * PostgreSQL. */
enum db_rc db_schema_version(struct db *db, int *version);

/* Record schema version `version` (in the open transaction). */
enum db_rc db_set_schema_version(struct db *db, int version);

/* True if an error inside a transaction aborts it (PostgreSQL): the
 * statements before it must be run again in a new one. */
bool db_error_aborts(const struct db *db);

/* Values to bind. A NULL text is a NULL. */
static inline struct bl_value db_vint(int64_t i)
{
	return (struct bl_value){ .type = BV_INT, .i = i };
}

static inline struct bl_value db_vreal(double d)
{
	return (struct bl_value){ .type = BV_REAL, .d = d };
}

static inline struct bl_value db_vtext(const char *s)
{
	return s ? (struct bl_value){ .type = BV_TEXT, .s = s, .n = __builtin_strlen(s) }
		 : (struct bl_value){ .type = BV_NULL };
}

static inline struct bl_value db_vblob(const void *p, size_t n)
{
	return (struct bl_value){ .type = BV_BLOB, .s = p, .n = n };
}

static inline struct bl_value db_vnull(void)
{
	return (struct bl_value){ .type = BV_NULL };
}

/* The connection of statement `q`. */
struct db *db_of(struct db_stmt *q);

/* Prepare `sql` (placeholders ?1..?N). NULL with db_errmsg() set. */
struct db_stmt *db_prepare(struct db *db, const char *sql);

/* Finalize; accepts NULL. */
void db_finalize(struct db_stmt *q);

/* Run `q` with `n` values bound to ?1..?n: the first row is ready on
 * DB_ROW; DB_DONE if there is none. Values need only live during the call. */
enum db_rc db_run(struct db_stmt *q, const struct bl_value *v, size_t n);

/* The next row: DB_ROW or DB_DONE (or a fault). */
enum db_rc db_next(struct db_stmt *q);

/* Let go of the statement's rows; it can be run again. */
void db_reset(struct db_stmt *q);

/* Columns of the current row, from 0. A NULL reads as 0, 0.0 or NULL. */
bool db_col_null(struct db_stmt *q, int col);
int64_t db_col_int(struct db_stmt *q, int col);
double db_col_real(struct db_stmt *q, int col);
/* A text column (NUL-terminated; valid until the next step or reset). */
const char *db_col_text(struct db_stmt *q, int col);
/* A blob column and its length into *len (valid until the next step or reset). */
const void *db_col_blob(struct db_stmt *q, int col, size_t *len);
/* True if the column holds a blob (sqlite: the value's storage class, in
 * any column; PostgreSQL: a bytea column). */
bool db_col_is_blob(struct db_stmt *q, int col);

/* Number of rows the last run of an UPDATE or DELETE changed. */
int64_t db_changes(struct db_stmt *q);

/* True while a transaction is open on the connection. */
bool db_in_transaction(struct db *db);

/* Give back the space the engine's journal holds, outside a transaction
 * (sqlite: checkpoint the WAL into the database and truncate it, so that
 * a small disk that once filled up does not fill again with the WAL of
 * the writes it held meanwhile). DB_DONE where there is nothing to do. */
enum db_rc db_compact(struct db *db);

/* What the engine said about the last failure. */
const char *db_errmsg(struct db *db);

/* Why the last DB_FAULT happened, in a few words ("disk full",
 * "read-only", "server gone", ...) into `reason`, and in full into
 * `detail` (prefixed with `what`). */
void db_fault(struct db *db, const char *what, char *reason, size_t rlen, char *detail,
	      size_t dlen);

/* sqlite: true if the file was deleted or replaced since it was opened,
 * so the writes go to a file nobody will read again. PostgreSQL: true if
 * the connection is lost. Either way, the cure is to open it again. */
bool db_lost(struct db *db);

/* True if what was just committed went where nobody will read it again:
 * sqlite's file was deleted or replaced (db_lost()). Never on PostgreSQL,
 * where a commit the server acknowledged is kept even if the connection
 * is lost right after. */
bool db_commit_lost(struct db *db);

/* sqlite only: forget the -wal and -shm files of a database file that
 * vanished, before opening a new one at `path` (see store.c reopen()). */
void db_sqlite_clear_sidecars(struct db *db, const char *path);

#endif
