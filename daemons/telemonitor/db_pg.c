/* The PostgreSQL driver of db.h (libpq). Statements are prepared on the
 * server once per connection; values go as text, blobs as binary; rows
 * come back as text and are converted on reading. A lost connection is a
 * fault: the store opens a new one when it retries (db_lost()). Texts sent
 * to a UTF8 database are made valid UTF-8 first (an invalid byte or a NUL
 * becomes U+FFFD), since the server refuses them and a log window may hold
 * anything a program wrote. */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "db-internal.h"

/* Key of the advisory lock held while the schema is set up. */
#define PG_SCHEMA_LOCK 0x434d6f6e /* "CMon" */

/* Seconds to wait for a connection. */
#define PG_CONNECT_TIMEOUT "5"

/* A connection. */
struct pg {
	struct db base;          /* first */
	PGconn *h;               /* the connection */
	unsigned next_name;      /* for naming prepared statements */
	bool utf8;               /* the server's encoding is UTF8 */
	char sqlstate[6];        /* of the last failure ("" if none was given) */
};

/* A statement. */
struct pg_stmt {
	struct db_stmt base;     /* first */
	char name[24];           /* its name on the server */
	int nparams;             /* highest ?N it uses */
	PGresult *res;           /* the rows of the last run */
	int row;                 /* the current row */
	int nrows;               /* rows in res */
	int64_t changes;         /* rows the last run changed */
	unsigned char *blob;     /* the last blob read (PQunescapeBytea) */
};

static const struct db_ops pg_ops;

static struct pg *PG(struct db *db)
{
	return (struct pg *)db;
}

static struct pg_stmt *PGS(struct db_stmt *q)
{
	return (struct pg_stmt *)q;
}

/* The library must not print: drop the server's notices. */
static void quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

/* Remember the failure of `res` (NULL: of the connection). */
static void failed(struct pg *c, const PGresult *res)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(c->h);
	size_t n;

	snprintf(c->sqlstate, sizeof c->sqlstate, "%s", state ? state : "");
	snprintf(c->base.errmsg, sizeof c->base.errmsg, "%s", msg && *msg ? msg : "no answer");
	n = strlen(c->base.errmsg);
	while (n && isspace((unsigned char)c->base.errmsg[n - 1]))
		c->base.errmsg[--n] = '\0';
}

/* A failure that retrying may cure? SQLSTATE classes 22 (data), 23
 * (integrity), 42 (syntax, undefined object) and 0A (not supported) are
 * the statement's own; anything else, and a connection that is gone, is
 * the server's. */
static enum db_rc classify(struct pg *c)
{
	const char *s = c->sqlstate;

	if (PQstatus(c->h) != CONNECTION_OK)
		return DB_FAULT;
	if (!strncmp(s, "22", 2) || !strncmp(s, "23", 2) || !strncmp(s, "42", 2) ||
	    !strncmp(s, "0A", 2))
		return DB_REFUSED;
	return DB_FAULT;
}

/* After PQexec*: the outcome, keeping `res` in *keep if it has rows. */
static enum db_rc outcome(struct pg *c, PGresult *res, PGresult **keep)
{
	ExecStatusType es = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

	if (es == PGRES_COMMAND_OK || es == PGRES_TUPLES_OK || es == PGRES_EMPTY_QUERY) {
		if (keep)
			*keep = res;
		else
			PQclear(res);
		return DB_DONE;
	}
	failed(c, res);
	PQclear(res);
	return classify(c);
}

static enum db_rc pg_exec(struct db *db, const char *sql)
{
	struct pg *c = PG(db);

	return outcome(c, PQexec(c->h, sql), NULL);
}

static enum db_rc pg_begin_exclusive(struct db *db)
{
	char sql[80];

	snprintf(sql, sizeof sql, "BEGIN; SELECT pg_advisory_xact_lock(%d)", PG_SCHEMA_LOCK);
	return pg_exec(db, sql);
}

/* One integer from `sql` into *v (0 if NULL or no row). */
static enum db_rc one_int(struct pg *c, const char *sql, int *v)
{
	PGresult *res = NULL;
	enum db_rc rc = outcome(c, PQexec(c->h, sql), &res);

	*v = 0;
	if (rc == DB_DONE && PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
		*v = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	return rc;
}

static enum db_rc pg_schema_version(struct db *db, int *version)
{
	struct pg *c = PG(db);
	int exists;
	enum db_rc rc;

	/* two steps: a statement naming a missing table fails, and inside a
	 * transaction a failure aborts it */
	*version = 0;
	rc = one_int(c, "SELECT CAST(to_regclass('cmon_schema') IS NOT NULL AS INTEGER)", &exists);
	if (rc != DB_DONE || !exists)
		return rc;
	return one_int(c, "SELECT max(version) FROM cmon_schema", version);
}

static enum db_rc pg_set_schema_version(struct db *db, int version)
{
	char sql[200];

	snprintf(sql, sizeof sql, "CREATE TABLE IF NOT EXISTS cmon_schema (version INTEGER NOT NULL);"
		 " DELETE FROM cmon_schema; INSERT INTO cmon_schema VALUES (%d)", version);
	return pg_exec(db, sql);
}

/* `sql` with ?N turned into $N (outside quotes) into a new string; the
 * highest N into *nparams. */
static char *dollars(const char *sql, int *nparams)
{
	char *out = strdup(sql), quote = 0;

	*nparams = 0;
	if (!out)
		return NULL;
	for (char *p = out; *p; p++) {
		if (quote) {
			if (*p == quote)
				quote = 0;
		} else if (*p == '\'' || *p == '"') {
			quote = *p;
		} else if (*p == '?' && isdigit((unsigned char)p[1])) {
			int n = atoi(p + 1);
			*p = '$';
			if (n > *nparams)
				*nparams = n;
		}
	}
	return out;
}

static struct db_stmt *pg_prepare(struct db *db, const char *sql)
{
	struct pg *c = PG(db);
	struct pg_stmt *s = calloc(1, sizeof *s);
	char *text;
	enum db_rc rc;

	if (!s || !(text = dollars(sql, &s->nparams))) {
		snprintf(db->errmsg, sizeof db->errmsg, "out of memory");
		free(s);
		return NULL;
	}
	s->base.db = db;
	snprintf(s->name, sizeof s->name, "cmon%u", c->next_name++);
	rc = outcome(c, PQprepare(c->h, s->name, text, 0, NULL), NULL);
	free(text);
	if (rc != DB_DONE) {
		free(s);
		return NULL;
	}
	return &s->base;
}

static void let_go(struct pg_stmt *s)
{
	PQclear(s->res);
	s->res = NULL;
	s->row = s->nrows = 0;
	PQfreemem(s->blob);
	s->blob = NULL;
}

static void pg_finalize(struct db_stmt *q)
{
	struct pg_stmt *s = PGS(q);
	struct pg *c = PG(q->db);
	char sql[48];

	let_go(s);
	if (PQstatus(c->h) == CONNECTION_OK && !PQisBusy(c->h)) {
		snprintf(sql, sizeof sql, "DEALLOCATE %s", s->name);
		PQclear(PQexec(c->h, sql));
	}
	free(s);
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if none. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	size_t len;
	uint32_t cp;

	if (p[0] >= 0x01 && p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

/* A NUL-terminated copy of text `s` (n bytes) the server takes: NULs, and
 * on a UTF8 server invalid bytes, become U+FFFD. */
static char *text_param(const struct pg *c, const char *s, size_t n)
{
	char *out = malloc(n * 3 + 1), *o = out;
	const unsigned char *p = (const unsigned char *)s;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t k = c->utf8 ? utf8_len(p + i, n - i) : (p[i] ? 1 : 0);
		if (k) {
			memcpy(o, p + i, k);
			o += k;
			i += k;
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	*o = '\0';
	return out;
}

static enum db_rc pg_run(struct db_stmt *q, const struct bl_value *v, size_t n)
{
	struct pg_stmt *s = PGS(q);
	struct pg *c = PG(q->db);
	int np = s->nparams > (int)n ? s->nparams : (int)n;
	const char **vals = calloc((size_t)np + 1, sizeof *vals);
	char **owned = calloc((size_t)np + 1, sizeof *owned);
	int *lens = calloc((size_t)np + 1, sizeof *lens);
	int *fmts = calloc((size_t)np + 1, sizeof *fmts);
	enum db_rc rc = DB_FAULT;

	let_go(s);
	s->changes = 0;
	if (!vals || !owned || !lens || !fmts) {
		snprintf(c->base.errmsg, sizeof c->base.errmsg, "out of memory");
		c->sqlstate[0] = '\0';
		goto out;
	}
	for (size_t i = 0; i < n && (int)i < np; i++) {
		char num[40];
		switch (v[i].type) {
		case BV_NULL:
			break;
		case BV_INT:
			snprintf(num, sizeof num, "%" PRId64, v[i].i);
			owned[i] = strdup(num);
			break;
		case BV_REAL:
			if (isnan(v[i].d))
				snprintf(num, sizeof num, "NaN");
			else if (isinf(v[i].d))
				snprintf(num, sizeof num, "%sInfinity", v[i].d < 0 ? "-" : "");
			else
				snprintf(num, sizeof num, "%.17g", v[i].d);
			owned[i] = strdup(num);
			break;
		case BV_TEXT:
			owned[i] = text_param(c, v[i].s ? v[i].s : "", v[i].n);
			break;
		case BV_BLOB:
			vals[i] = v[i].s ? v[i].s : "";
			lens[i] = (int)v[i].n;
			fmts[i] = 1;
			continue;
		}
		if (v[i].type != BV_NULL && !owned[i]) {
			snprintf(c->base.errmsg, sizeof c->base.errmsg, "out of memory");
			goto out;
		}
		vals[i] = owned[i];
	}
	rc = outcome(c, PQexecPrepared(c->h, s->name, np, vals, lens, fmts, 0), &s->res);
	if (rc == DB_DONE) {
		const char *t = PQcmdTuples(s->res);
		s->changes = t && *t ? strtoll(t, NULL, 10) : 0;
		s->nrows = PQntuples(s->res);
		s->row = 0;
		if (s->nrows > 0)
			rc = DB_ROW;
	}
out:
	for (int i = 0; owned && i < np; i++)
		free(owned[i]);
	free(owned);
	free(vals);
	free(lens);
	free(fmts);
	return rc;
}

static enum db_rc pg_next(struct db_stmt *q)
{
	struct pg_stmt *s = PGS(q);

	PQfreemem(s->blob);
	s->blob = NULL;
	if (s->res && ++s->row < s->nrows)
		return DB_ROW;
	return DB_DONE;
}

static void pg_reset(struct db_stmt *q)
{
	let_go(PGS(q));
}

/* The current row's column, or NULL. */
static const char *cell(struct pg_stmt *s, int col)
{
	if (!s->res || s->row >= s->nrows || col >= PQnfields(s->res) ||
	    PQgetisnull(s->res, s->row, col))
		return NULL;
	return PQgetvalue(s->res, s->row, col);
}

static bool pg_col_null(struct db_stmt *q, int col)
{
	return cell(PGS(q), col) == NULL;
}

static int64_t pg_col_int(struct db_stmt *q, int col)
{
	const char *t = cell(PGS(q), col);

	if (!t)
		return 0;
	if (t[0] == 't' && !t[1])
		return 1;     /* a boolean */
	if (strpbrk(t, ".eE"))
		return (int64_t)strtod(t, NULL);
	return strtoll(t, NULL, 10);
}

static double pg_col_real(struct db_stmt *q, int col)
{
	const char *t = cell(PGS(q), col);

	return t ? strtod(t, NULL) : 0.0;
}

static const char *pg_col_text(struct db_stmt *q, int col)
{
	return cell(PGS(q), col);
}

#define PG_BYTEA_OID 17         /* pg_type.oid of bytea */

static bool pg_col_is_blob(struct db_stmt *q, int col)
{
	struct pg_stmt *s = PGS(q);

	return cell(s, col) && PQftype(s->res, col) == PG_BYTEA_OID;
}

static const void *pg_col_blob(struct db_stmt *q, int col, size_t *len)
{
	struct pg_stmt *s = PGS(q);
	const char *t = cell(s, col);

	*len = 0;
	if (!t)
		return NULL;
	PQfreemem(s->blob);
	s->blob = PQunescapeBytea((const unsigned char *)t, len);
	return s->blob;
}

static int64_t pg_changes(struct db_stmt *q)
{
	return PGS(q)->changes;
}

static bool pg_in_transaction(struct db *db)
{
	PGTransactionStatusType t = PQtransactionStatus(PG(db)->h);

	return t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
}

static bool pg_lost(struct db *db)
{
	return PQstatus(PG(db)->h) != CONNECTION_OK;
}

static void pg_fault(struct db *db, const char *what, char *reason, size_t rlen, char *detail,
		     size_t dlen)
{
	struct pg *c = PG(db);
	const char *s = c->sqlstate, *r;

	if (PQstatus(c->h) != CONNECTION_OK || !strncmp(s, "08", 2))
		r = "server gone";
	else if (!strcmp(s, "53100"))
		r = "disk full";
	else if (!strncmp(s, "53", 2))
		r = "server out of resources";
	else if (!strcmp(s, "25006"))
		r = "read-only";
	else if (!strncmp(s, "57", 2))
		r = "server shutting down";
	else if (!strncmp(s, "40", 2) || !strcmp(s, "55P03"))
		r = "database locked";
	else
		r = "server error";
	snprintf(reason, rlen, "%s", r);
	snprintf(detail, dlen, "while %s: %s%s%s%s", what, db->errmsg, *s ? " (SQLSTATE " : "", s,
		 *s ? ")" : "");
}

static bool pg_commit_lost(struct db *db)
{
	(void)db;
	return false;
}

static void pg_close(struct db *db)
{
	PQfinish(PG(db)->h);
	free(db);
}

struct db *db_pg_open(const char *url, char *err, size_t errlen)
{
	/* later keywords give way to what the URL says: expand_dbname */
	const char *const keys[] = { "connect_timeout", "application_name", "dbname", NULL };
	const char *const vals[] = { PG_CONNECT_TIMEOUT, "telemonitor", url, NULL };
	struct pg *c = calloc(1, sizeof *c);
	const char *enc;

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->base.ops = &pg_ops;
	db_set_target(&c->base, url);
	c->h = PQconnectdbParams(keys, vals, 1);
	if (!c->h || PQstatus(c->h) != CONNECTION_OK) {
		failed(c, NULL);
		snprintf(err, errlen, "%s: %s", c->base.target, c->h ? c->base.errmsg : "out of memory");
		PQfinish(c->h);
		free(c);
		return NULL;
	}
	PQsetNoticeProcessor(c->h, quiet, NULL);
	enc = PQparameterStatus(c->h, "server_encoding");
	c->utf8 = enc && !strcmp(enc, "UTF8");
	if (pg_exec(&c->base, "SET client_encoding = 'UTF8'; SET lock_timeout = '5s'") != DB_DONE) {
		snprintf(err, errlen, "%s: %s", c->base.target, c->base.errmsg);
		pg_close(&c->base);
		return NULL;
	}
	return &c->base;
}

static const struct db_ops pg_ops = {
	.engine = DB_POSTGRES,
	.name = "postgresql",
	.error_aborts = true,
	.close = pg_close,
	.exec = pg_exec,
	.begin_exclusive = pg_begin_exclusive,
	.schema_version = pg_schema_version,
	.set_schema_version = pg_set_schema_version,
	.prepare = pg_prepare,
	.finalize = pg_finalize,
	.run = pg_run,
	.next = pg_next,
	.reset = pg_reset,
	.col_null = pg_col_null,
	.col_int = pg_col_int,
	.col_real = pg_col_real,
	.col_text = pg_col_text,
	.col_blob = pg_col_blob,
	.col_is_blob = pg_col_is_blob,
	.changes = pg_changes,
	.in_transaction = pg_in_transaction,
	.fault = pg_fault,
	.lost = pg_lost,
	.commit_lost = pg_commit_lost,
};
