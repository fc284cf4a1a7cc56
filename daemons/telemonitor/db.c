/* The database under the store: dispatch to the driver (see db.h). */
#include <stdio.h>
#include <string.h>

#include "db-internal.h"

bool db_is_url(const char *target)
{
	return strncmp(target, "postgresql://", 13) == 0 || strncmp(target, "postgres://", 11) == 0 ||
	       (strchr(target, '=') && !strchr(target, '/') &&
		(strstr(target, "host=") || strstr(target, "dbname=")));
}

void db_set_target(struct db *db, const char *target)
{
	const char *scheme = strstr(target, "://");
	const char *at = scheme ? strchr(scheme + 3, '@') : NULL;
	const char *colon = NULL;

	/* postgresql://user:secret@host/db -> postgresql://user:***@host/db */
	if (at)
		for (const char *p = scheme + 3; p < at; p++)
			if (*p == ':') {
				colon = p;
				break;
			}
	if (colon)
		snprintf(db->target, sizeof db->target, "%.*s:***%s", (int)(colon - target), target,
			 at);
	else
		snprintf(db->target, sizeof db->target, "%s", target);
}

struct db *db_open(const char *target, char *err, size_t errlen)
{
	if (db_is_url(target))
		return db_pg_open(target, err, errlen);
	return db_sqlite_open(target, err, errlen);
}

void db_close(struct db *db)
{
	if (db)
		db->ops->close(db);
}

enum db_engine db_engine(const struct db *db)
{
	return db->ops->engine;
}

const char *db_engine_name(const struct db *db)
{
	return db->ops->name;
}

const char *db_target(const struct db *db)
{
	return db->target;
}

bool db_error_aborts(const struct db *db)
{
	return db->ops->error_aborts;
}

enum db_rc db_exec(struct db *db, const char *sql)
{
	return db->ops->exec(db, sql);
}

enum db_rc db_begin_exclusive(struct db *db)
{
	return db->ops->begin_exclusive(db);
}

enum db_rc db_schema_version(struct db *db, int *version)
{
	return db->ops->schema_version(db, version);
}

enum db_rc db_set_schema_version(struct db *db, int version)
{
	return db->ops->set_schema_version(db, version);
}

struct db_stmt *db_prepare(struct db *db, const char *sql)
{
	return db->ops->prepare(db, sql);
}

struct db *db_of(struct db_stmt *q)
{
	return q->db;
}

void db_finalize(struct db_stmt *q)
{
	if (q)
		q->db->ops->finalize(q);
}

enum db_rc db_run(struct db_stmt *q, const struct bl_value *v, size_t n)
{
	return q->db->ops->run(q, v, n);
}

enum db_rc db_next(struct db_stmt *q)
{
	return q->db->ops->next(q);
}

void db_reset(struct db_stmt *q)
{
	q->db->ops->reset(q);
}

bool db_col_null(struct db_stmt *q, int col)
{
	return q->db->ops->col_null(q, col);
}

int64_t db_col_int(struct db_stmt *q, int col)
{
	return q->db->ops->col_int(q, col);
}

double db_col_real(struct db_stmt *q, int col)
{
	return q->db->ops->col_real(q, col);
}

const char *db_col_text(struct db_stmt *q, int col)
{
	return q->db->ops->col_text(q, col);
}

const void *db_col_blob(struct db_stmt *q, int col, size_t *len)
{
	return q->db->ops->col_blob(q, col, len);
}

bool db_col_is_blob(struct db_stmt *q, int col)
{
	return q->db->ops->col_is_blob(q, col);
}

int64_t db_changes(struct db_stmt *q)
{
	return q->db->ops->changes(q);
}

bool db_in_transaction(struct db *db)
{
	return db->ops->in_transaction(db);
}

enum db_rc db_compact(struct db *db)
{
	return db->ops->compact && !db->ops->in_transaction(db) ? db->ops->compact(db) : DB_DONE;
}

const char *db_errmsg(struct db *db)
{
	return db->errmsg;
}

void db_fault(struct db *db, const char *what, char *reason, size_t rlen, char *detail,
	      size_t dlen)
{
	db->ops->fault(db, what, reason, rlen, detail, dlen);
}

bool db_lost(struct db *db)
{
	return db->ops->lost(db);
}

bool db_commit_lost(struct db *db)
{
	return db->ops->commit_lost(db);
}
