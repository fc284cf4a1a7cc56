/* The sqlite driver of db.h: a file in WAL mode. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <sqlite3.h>

#include "db-internal.h"

#define SQ_WAL_PAGES "4096"      /* checkpoint the WAL at this many pages (16 MiB)... */
#define SQ_WAL_KEEP "16777216"   /* ...and keep the file that long after: at a thousand
				    streams failing every second, checkpoints every MiB
				    (and cutting the file back each time) took an eighth
				    of the telemonitor's time */

/* A connection. */
struct sq {
	struct db base;          /* first */
	sqlite3 *h;              /* the connection */
	char path[PATH_MAX];     /* the file */
	int rc;                  /* extended result code of the last failure */
	int sys;                 /* the errno behind it (0: none) */
	struct stat wal, shm;    /* its -wal and -shm files when opened (st_ino 0: none) */
};

/* A statement. */
struct sq_stmt {
	struct db_stmt base;     /* first */
	sqlite3_stmt *q;         /* the statement */
	int64_t changes;         /* rows the last run changed */
};

static const struct db_ops sq_ops;

static struct sq *SQ(struct db *db)
{
	return (struct sq *)db;
}

static struct sq_stmt *SQS(struct db_stmt *q)
{
	return (struct sq_stmt *)q;
}

/* Remember the failure behind result `rc` (or of the connection). */
static void failed(struct sq *c, int rc)
{
	c->rc = rc == SQLITE_ERROR || rc == SQLITE_OK ? sqlite3_extended_errcode(c->h) : rc;
	c->sys = sqlite3_system_errno(c->h);
	snprintf(c->base.errmsg, sizeof c->base.errmsg, "%s", sqlite3_errmsg(c->h));
}

/* A failure that retrying may cure (the disk, not the statement)? */
static enum db_rc classify(int rc)
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
		return DB_REFUSED;
	default:
		return DB_FAULT;
	}
}

static enum db_rc sq_exec(struct db *db, const char *sql)
{
	struct sq *c = SQ(db);
	char *msg = NULL;
	int rc = sqlite3_exec(c->h, sql, NULL, NULL, &msg);

	if (rc == SQLITE_OK)
		return DB_DONE;
	failed(c, rc);
	if (msg)
		snprintf(db->errmsg, sizeof db->errmsg, "%s", msg);
	sqlite3_free(msg);
	return classify(c->rc);
}

static enum db_rc sq_begin_exclusive(struct db *db)
{
	return sq_exec(db, "BEGIN IMMEDIATE");
}

static enum db_rc sq_schema_version(struct db *db, int *version)
{
	struct sq *c = SQ(db);
	sqlite3_stmt *q;
	int rc;

	*version = 0;
	rc = sqlite3_prepare_v2(c->h, "PRAGMA user_version", -1, &q, NULL);
	if (rc != SQLITE_OK) {
		failed(c, rc);
		return classify(c->rc);
	}
	if ((rc = sqlite3_step(q)) == SQLITE_ROW)
		*version = sqlite3_column_int(q, 0);
	else if (rc != SQLITE_DONE)
		failed(c, rc);
	sqlite3_finalize(q);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? DB_DONE : classify(c->rc);
}

static enum db_rc sq_set_schema_version(struct db *db, int version)
{
	char sql[64];

	snprintf(sql, sizeof sql, "PRAGMA user_version = %d", version);
	return sq_exec(db, sql);
}

static void note_files(struct sq *c);

static struct db_stmt *sq_prepare(struct db *db, const char *sql)
{
	struct sq *c = SQ(db);
	struct sq_stmt *s = calloc(1, sizeof *s);
	int rc;

	if (!c->wal.st_ino)
		note_files(c);  /* the schema is set up by now, so they exist */

	if (!s) {
		snprintf(db->errmsg, sizeof db->errmsg, "out of memory");
		return NULL;
	}
	s->base.db = db;
	rc = sqlite3_prepare_v3(c->h, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->q, NULL);
	if (rc != SQLITE_OK) {
		failed(c, rc);
		free(s);
		return NULL;
	}
	return &s->base;
}

static void sq_finalize(struct db_stmt *q)
{
	sqlite3_finalize(SQS(q)->q);
	free(q);
}

/* After a step: the outcome. */
static enum db_rc stepped(struct sq_stmt *s, int rc)
{
	struct sq *c = SQ(s->base.db);

	if (rc == SQLITE_ROW)
		return DB_ROW;
	if (rc == SQLITE_DONE) {
		s->changes = sqlite3_changes64(c->h);
		return DB_DONE;
	}
	failed(c, rc);
	sqlite3_reset(s->q);
	return classify(c->rc);
}

static enum db_rc sq_run(struct db_stmt *q, const struct bl_value *v, size_t n)
{
	struct sq_stmt *s = SQS(q);

	sqlite3_reset(s->q);
	sqlite3_clear_bindings(s->q);
	for (size_t i = 0; i < n; i++) {
		int col = (int)i + 1;
		switch (v[i].type) {
		case BV_NULL: sqlite3_bind_null(s->q, col); break;
		case BV_INT: sqlite3_bind_int64(s->q, col, v[i].i); break;
		case BV_REAL: sqlite3_bind_double(s->q, col, v[i].d); break;
		case BV_TEXT:
			sqlite3_bind_text(s->q, col, v[i].s ? v[i].s : "", (int)v[i].n,
					  SQLITE_TRANSIENT);
			break;
		case BV_BLOB:
			sqlite3_bind_blob(s->q, col, v[i].s ? v[i].s : "", (int)v[i].n,
					  SQLITE_TRANSIENT);
			break;
		}
	}
	s->changes = 0;
	return stepped(s, sqlite3_step(s->q));
}

static enum db_rc sq_next(struct db_stmt *q)
{
	return stepped(SQS(q), sqlite3_step(SQS(q)->q));
}

static void sq_reset(struct db_stmt *q)
{
	sqlite3_reset(SQS(q)->q);
	sqlite3_clear_bindings(SQS(q)->q);
}

static bool sq_col_null(struct db_stmt *q, int col)
{
	return sqlite3_column_type(SQS(q)->q, col) == SQLITE_NULL;
}

static int64_t sq_col_int(struct db_stmt *q, int col)
{
	return sqlite3_column_int64(SQS(q)->q, col);
}

static double sq_col_real(struct db_stmt *q, int col)
{
	return sqlite3_column_double(SQS(q)->q, col);
}

static const char *sq_col_text(struct db_stmt *q, int col)
{
	return (const char *)sqlite3_column_text(SQS(q)->q, col);
}

static const void *sq_col_blob(struct db_stmt *q, int col, size_t *len)
{
	const void *p = sqlite3_column_blob(SQS(q)->q, col);

	*len = (size_t)sqlite3_column_bytes(SQS(q)->q, col);
	return p;
}

static bool sq_col_is_blob(struct db_stmt *q, int col)
{
	return sqlite3_column_type(SQS(q)->q, col) == SQLITE_BLOB;
}

static int64_t sq_changes(struct db_stmt *q)
{
	return SQS(q)->changes;
}

static bool sq_in_transaction(struct db *db)
{
	return !sqlite3_get_autocommit(SQ(db)->h);
}

/* True if the database file was deleted or replaced since it was opened. */
static bool sq_lost(struct db *db)
{
	int m = 0;

	if (sqlite3_file_control(SQ(db)->h, "main", SQLITE_FCNTL_HAS_MOVED, &m) != SQLITE_OK)
		return false;
	return m != 0;
}

/* Why the files cannot be written, when sqlite could not say (its errno
 * is often gone by the time it reports): EROFS, EPERM (chattr +i) or
 * EACCES from access(2), ENOSPC when the file system has no block left,
 * else 0. */
static int probe(const struct sq *c)
{
	char p[PATH_MAX + 8];
	struct statvfs vfs;

	for (int i = 0; i < 2; i++) {
		snprintf(p, sizeof p, "%s%s", c->path, i ? "-wal" : "");
		if (access(p, W_OK) < 0 && errno != ENOENT)
			return errno;
	}
	if (statvfs(c->path, &vfs) == 0 && vfs.f_bavail == 0)
		return ENOSPC;
	return 0;
}

static void sq_fault(struct db *db, const char *what, char *reason, size_t rlen, char *detail,
		     size_t dlen)
{
	struct sq *c = SQ(db);
	int rc = c->rc & 0xff, sys = c->sys;
	const char *r;

	if (sq_lost(db)) {
		snprintf(reason, rlen, "database deleted");
		snprintf(detail, dlen, "while %s: %.200s was deleted or replaced", what, c->path);
		return;
	}
	if (!sys && rc != SQLITE_FULL)
		sys = probe(c);
	if (rc == SQLITE_FULL || sys == ENOSPC || sys == EDQUOT)
		r = "disk full";
	else if (rc == SQLITE_READONLY || sys == EROFS || sys == EPERM || sys == EACCES)
		r = "read-only";
	else if (rc == SQLITE_CANTOPEN)
		r = "cannot open the database";
	else if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
		r = "database locked";
	else if (rc == SQLITE_NOMEM)
		r = "out of memory";
	else if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB)
		r = "database corrupt";
	else
		r = "I/O error";
	snprintf(reason, rlen, "%s", r);
	snprintf(detail, dlen, "while %s: %s%s%s", what,
		 db->errmsg[0] ? db->errmsg : sqlite3_errstr(c->rc), sys ? ": " : "",
		 sys ? strerror(sys) : "");
}

/* Remember which -wal and -shm files are this connection's. */
static void note_files(struct sq *c)
{
	char p[PATH_MAX + 8];

	snprintf(p, sizeof p, "%s-wal", c->path);
	if (stat(p, &c->wal) < 0)
		c->wal.st_ino = 0;
	snprintf(p, sizeof p, "%s-shm", c->path);
	if (stat(p, &c->shm) < 0)
		c->shm.st_ino = 0;
}

void db_sqlite_clear_sidecars(struct db *db, const char *path)
{
	static const char *const sfx[] = { "-wal", "-shm" };
	struct sq *c = db && db->ops == &sq_ops ? SQ(db) : NULL;
	const struct stat *mine[] = { c ? &c->wal : NULL, c ? &c->shm : NULL };
	char p[PATH_MAX + 8];
	struct stat sb;
	bool missing = stat(path, &sb) < 0 && errno == ENOENT;

	/* The vanished database's -wal and -shm must not be taken for the new
	 * one's: they go if the database is missing, or if they are ours. */
	for (int i = 0; i < 2; i++) {
		snprintf(p, sizeof p, "%s%s", path, sfx[i]);
		if (stat(p, &sb) == 0 &&
		    (missing || (mine[i] && mine[i]->st_ino && sb.st_ino == mine[i]->st_ino &&
				 sb.st_dev == mine[i]->st_dev)))
			unlink(p);
	}
}

static void sq_close(struct db *db)
{
	sqlite3_close_v2(SQ(db)->h);
	free(db);
}

/* sqlite's memory statistics (on by default) take a global mutex around
 * every allocation; nothing here reads them. Set before sqlite starts,
 * once: a process that already started sqlite keeps them (harmless). */
static void sq_configure(void)
{
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

struct db *db_sqlite_open(const char *path, char *err, size_t errlen)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct sq *c;

	pthread_once(&once, sq_configure);
	c = calloc(1, sizeof *c);

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->base.ops = &sq_ops;
	db_set_target(&c->base, path);
	snprintf(c->path, sizeof c->path, "%s", path);
	if (sqlite3_open_v2(path, &c->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, c->h ? sqlite3_errmsg(c->h) : "cannot open");
		goto fail;
	}
	sqlite3_extended_result_codes(c->h, 1);
	sqlite3_busy_timeout(c->h, 5000);
	/* The WAL is checkpointed every SQ_WAL_PAGES pages and cut back to
	 * SQ_WAL_KEEP bytes after each checkpoint: it never holds more than
	 * about 16 MiB for long. The page cache
	 * holds 8 MiB (not sqlite's 2): at a thousand streams with failures
	 * every second the default one re-read the pages it had just written. */
	if (sq_exec(&c->base, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
		    " PRAGMA foreign_keys = OFF; PRAGMA temp_store = MEMORY;"
		    " PRAGMA cache_size = -8192;"
		    " PRAGMA wal_autocheckpoint = " SQ_WAL_PAGES ";"
		    " PRAGMA journal_size_limit = " SQ_WAL_KEEP ";") != DB_DONE) {
		snprintf(err, errlen, "%s: %s", path, c->base.errmsg);
		goto fail;
	}
	return &c->base;
fail:
	sqlite3_close_v2(c->h);
	free(c);
	return NULL;
}

/* Checkpoint the WAL into the database and truncate it to nothing. */
static enum db_rc sq_compact(struct db *db)
{
	return sq_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
}

static const struct db_ops sq_ops = {
	.engine = DB_SQLITE,
	.name = "sqlite",
	.error_aborts = false,
	.close = sq_close,
	.exec = sq_exec,
	.begin_exclusive = sq_begin_exclusive,
	.schema_version = sq_schema_version,
	.set_schema_version = sq_set_schema_version,
	.compact = sq_compact,
	.prepare = sq_prepare,
	.finalize = sq_finalize,
	.run = sq_run,
	.next = sq_next,
	.reset = sq_reset,
	.col_null = sq_col_null,
	.col_int = sq_col_int,
	.col_real = sq_col_real,
	.col_text = sq_col_text,
	.col_blob = sq_col_blob,
	.col_is_blob = sq_col_is_blob,
	.changes = sq_changes,
	.in_transaction = sq_in_transaction,
	.fault = sq_fault,
	.lost = sq_lost,
	.commit_lost = sq_lost,  /* committed to a file nobody will read again */
};

