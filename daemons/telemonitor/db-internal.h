/* What db.c's dispatch and the two drivers (db_sqlite.c, db_pg.c) share;
 * nothing outside them includes this. */
#ifndef TELEMON_DB_INTERNAL_H
#define TELEMON_DB_INTERNAL_H

#include "db.h"

/* One driver. */
struct db_ops {
	enum db_engine engine;   /* which */
	const char *name;        /* "sqlite", "postgresql" */
	bool error_aborts;       /* an error aborts the open transaction */
	void (*close)(struct db *db);
	enum db_rc (*exec)(struct db *db, const char *sql);
	enum db_rc (*begin_exclusive)(struct db *db);
	enum db_rc (*schema_version)(struct db *db, int *version);
	enum db_rc (*set_schema_version)(struct db *db, int version);
	struct db_stmt *(*prepare)(struct db *db, const char *sql);
	void (*finalize)(struct db_stmt *q);
	enum db_rc (*run)(struct db_stmt *q, const struct bl_value *v, size_t n);
	enum db_rc (*next)(struct db_stmt *q);
	void (*reset)(struct db_stmt *q);
	bool (*col_null)(struct db_stmt *q, int col);
	int64_t (*col_int)(struct db_stmt *q, int col);
	double (*col_real)(struct db_stmt *q, int col);
	const char *(*col_text)(struct db_stmt *q, int col);
	const void *(*col_blob)(struct db_stmt *q, int col, size_t *len);
	bool (*col_is_blob)(struct db_stmt *q, int col);
	int64_t (*changes)(struct db_stmt *q);
	bool (*in_transaction)(struct db *db);
	void (*fault)(struct db *db, const char *what, char *reason, size_t rlen, char *detail,
		      size_t dlen);
	bool (*lost)(struct db *db);
	bool (*commit_lost)(struct db *db);
	enum db_rc (*compact)(struct db *db);   /* optional: db_compact() */
};

/* The part of a connection every driver has (first in its own struct). */
struct db {
	const struct db_ops *ops;    /* its driver */
	char target[512];            /* what was opened, password masked */
	char errmsg[512];            /* the last failure */
};

/* The part of a statement every driver has (first in its own struct). */
struct db_stmt {
	struct db *db;               /* its connection */
};

/* The drivers' constructors. */
struct db *db_sqlite_open(const char *path, char *err, size_t errlen);
struct db *db_pg_open(const char *url, char *err, size_t errlen);

/* Copy `target` into db->target with a URL's password masked. */
void db_set_target(struct db *db, const char *target);

#endif
