/* Unit tests for the telemonitor's store (daemons/telemonitor/store.c),
 * the parts that keep mail across a restart: a database of schema version
 * 1 (before the mail queue) is upgraded in place with its data kept; a
 * newer one is refused; queued mails and failures waiting for a digest
 * are read back after close and reopen, oldest first, and forgotten when
 * done; the commit callback sees every batch end; an instance's token is
 * kept (and not lost when it is saved without one); a database deleted
 * while open is noticed, the writes after it are held, and a new database
 * at its path takes them, with their ids, once the retry is due. Alert
 * hygiene: retention prunes old rows at most `limit` per table per call and
 * keeps new ones; only active silences are read back; an ack is stored.
 * Alertmanager: the outbox is kept until done, and an ended instance's
 * open alerts are found to be resolved. Typed reads (store_read.c): the
 * listings honour their filters, order and limit, NULL columns come out as
 * NULL strings or false `has_` flags, and a callback can stop the rows. Id
 * lists: the active classes and the reaped instances are exactly those
 * given (none given included), and the same writes held through an outage
 * are replayed to the same effect.
 *
 * The telemonitor is a program, not a library, so its modules are compiled
 * into this test directly. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "../../daemons/telemonitor/backlog.c"
#include "../../daemons/telemonitor/store.c"
#include "../../daemons/telemonitor/store_read.h"

/* The engine under test: sqlite in the test's directory, or the
 * PostgreSQL database CMON_TEST_PG_URL names (the ctest entry
 * unit.telemon_store_pg sets it: tests/integration/pgserver.py). */
static const char *pg_url(void)
{
	const char *u = getenv("CMON_TEST_PG_URL");

	return u && *u ? u : NULL;
}

static struct store *open_store(const char *dir, char *err, size_t errlen)
{
	return store_open(dir, pg_url(), err, errlen);
}

/* A fresh temporary state directory per test (and an empty database). */
static int setup_dir(void **state)
{
	char *dir = strdup("/tmp/test_telemon_store.XXXXXX"), err[300];

	if (!dir || !mkdtemp(dir))
		return -1;
	*state = dir;
	if (pg_url()) {
		struct db *db = db_open(pg_url(), err, sizeof err);
		if (!db || db_exec(db, "DROP SCHEMA public CASCADE; CREATE SCHEMA public") != DB_DONE) {
			fprintf(stderr, "cannot empty %s: %s\n", pg_url(), db ? db_errmsg(db) : err);
			db_close(db);
			return -1;
		}
		db_close(db);
	}
	return 0;
}

/* A test of sqlite's file (migrations from its first schema, a deleted file). */
#define SQLITE_ONLY()                                                                        \
	do {                                                                                 \
		if (pg_url()) {  /* (does not apply: the run on PostgreSQL) */              \
			print_message("# sqlite only: not on PostgreSQL\n");              \
			return;                                                              \
		}                                                                            \
	} while (0)

static int teardown_dir(void **state)
{
	char *dir = *state, path[PATH_MAX];
	static const char *const files[] = { "telemonitor.db", "telemonitor.db-wal",
					     "telemonitor.db-shm" };

	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, files[i]);
		unlink(path);
	}
	rmdir(dir);
	free(dir);
	return 0;
}

static sqlite3 *raw_open(const char *dir)
{
	char path[PATH_MAX];
	sqlite3 *db = NULL;

	snprintf(path, sizeof path, "%s/telemonitor.db", dir);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	return db;
}

/* One number from the store's database. */
static int64_t count(struct store *st, const char *sql)
{
	return (int64_t)conn_u64(&st->c, sql);
}

/* Run statements on the store's database. */
static void exec_ok(struct store *st, const char *sql)
{
	assert_int_equal(db_exec(st->c.db, sql), DB_DONE);
}

static void upgrade_from_version_1(void **state)
{
	const char *dir = *state;
	char err[300] = "";
	sqlite3 *db;
	struct store *st;

	SQLITE_ONLY();
	db = raw_open(dir);

	/* the released first schema, with a failure in it */
	assert_int_equal(sqlite3_exec(db, sqlite_migrations[0], NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
		"INSERT INTO instances (prog, machine, pid, start_ns, first_seen)"
		" VALUES ('fsread', 'host1', 42, 1, 1.5);"
		"INSERT INTO failures (instance_id, assert, line, time, metrics)"
		" VALUES (1, 'read at most 10 ms', 28, 2.5, '{\"size\":8192}');"
		"PRAGMA user_version = 1;", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);

	st = open_store(dir, err, sizeof err);
	assert_non_null(st);
	assert_int_equal(store_version(st), STORE_SCHEMA_VERSION);
	assert_int_equal(count(st, "SELECT count(*) FROM failures"
				" WHERE assert = 'read at most 10 ms' AND metrics LIKE '%8192%'"), 1);
	assert_int_equal(count(st, "SELECT count(*) FROM mail_queue"), 0);
	assert_int_equal(count(st, "SELECT count(*) FROM mail_digest"), 0);
	store_close(st);

	/* opened again: nothing to do */
	st = open_store(dir, err, sizeof err);
	assert_non_null(st);
	assert_int_equal(store_version(st), STORE_SCHEMA_VERSION);
	store_close(st);
}

static void newer_database_refused(void **state)
{
	const char *dir = *state;
	char err[300] = "", newer[64];
	sqlite3 *db;

	SQLITE_ONLY();
	db = raw_open(dir);

	snprintf(newer, sizeof newer, "PRAGMA user_version = %d", STORE_SCHEMA_VERSION + 1);
	assert_int_equal(sqlite3_exec(db, newer, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_null(open_store(dir, err, sizeof err));
	assert_non_null(strstr(err, "newer"));
}

/* Collected by the load callbacks. */
struct seen {
	size_t n;                 /* rows seen */
	uint64_t ids[8];          /* mail ids, or failure ids */
	char text[8][200];        /* subject, or "label|what|metrics|to|ctl" */
	double when[8];           /* queued, or due */
	size_t count[8];          /* failures in the mail, or the line */
};

static void on_mail(void *arg, uint64_t id, double queued, const char *to, const char *subject,
		    const char *body, size_t n)
{
	struct seen *s = arg;

	assert_true(s->n < 8);
	assert_string_equal(to, "ops@example.org");
	assert_non_null(strstr(body, "Failure"));
	s->ids[s->n] = id;
	snprintf(s->text[s->n], sizeof s->text[0], "%s", subject);
	s->when[s->n] = queued;
	s->count[s->n++] = n;
}

static void mail_queue_kept_until_done(void **state)
{
	const char *dir = *state;
	char err[300] = "";
	struct store *st = open_store(dir, err, sizeof err);
	struct seen s = { 0 };
	uint64_t a = 0, b = 0;

	assert_non_null(st);
	assert_int_equal(store_mail_add(st, "ops@example.org", "first", "Failure 1 at ...\n", 1,
					100.25, &a), 0);
	assert_int_equal(store_mail_add(st, "ops@example.org", "second", "Failure 2 ...\n"
					"Failure 3 ...\n", 2, 101.5, &b), 0);
	assert_true(a > 0 && b > a);
	store_close(st);                    /* commits */

	st = open_store(dir, err, sizeof err);
	assert_non_null(st);
	assert_int_equal(store_mail_load(st, on_mail, &s), 0);
	assert_int_equal(s.n, 2);
	assert_true(s.ids[0] == a && s.ids[1] == b);
	assert_string_equal(s.text[0], "first");
	assert_string_equal(s.text[1], "second");
	assert_true(s.when[0] == 100.25 && s.when[1] == 101.5);
	assert_int_equal(s.count[1], 2);
	assert_int_equal(store_mail_done(st, a), 0);
	assert_int_equal(store_commit(st), 0);
	memset(&s, 0, sizeof s);
	assert_int_equal(store_mail_load(st, on_mail, &s), 0);
	assert_int_equal(s.n, 1);
	assert_true(s.ids[0] == b);
	/* ids are never reused, even after the newest is done */
	assert_int_equal(store_mail_done(st, b), 0);
	assert_int_equal(store_mail_add(st, "ops@example.org", "third", "Failure 4\n", 1, 102,
					&a), 0);
	assert_true(a > b);
	store_close(st);
}

static void on_waiting(void *arg, const struct digest_item *it, double due)
{
	struct seen *s = arg;

	assert_true(s->n < 8);
	assert_string_equal(it->prog, "fsread");
	assert_string_equal(it->machine, "host1");
	assert_int_equal(it->pid, 4242);
	assert_int_equal(it->instance_id, 7);
	assert_true(it->period == 300);
	assert_true(it->start_ts == 1000 && it->end_ts == 21000);
	s->ids[s->n] = it->failure_id;
	snprintf(s->text[s->n], sizeof s->text[0], "%s|%s|%s|%s|%s",
		 it->assertion ? it->assertion : "(null)", it->what ? it->what : "(null)",
		 it->metrics ? it->metrics : "(null)", it->to, it->ctl);
	s->when[s->n] = due;
	s->count[s->n++] = (size_t)it->line;
}

static void digest_waiting_kept_until_done(void **state)
{
	const char *dir = *state;
	char err[300] = "";
	struct store *st = open_store(dir, err, sizeof err);
	struct seen s = { 0 };
	struct digest_item it = {
		.instance_id = 7, .prog = "fsread", .machine = "host1", .pid = 4242,
		.spec = "/etc/cmon/fsread.pspec", .assertion = "read at most 10 ms", .line = 28,
		.failure_id = 18, .time = 1010, .what = "interval Read #12", .start_ts = 1000,
		.end_ts = 21000, .metrics = "size = 4096", .to = "ops@example.org",
		.ctl = "telemonctl -state /old", .period = 300,
	};

	assert_non_null(st);
	assert_int_equal(store_digest_add(st, &it, 1300), 0);
	it.failure_id = 19;
	assert_int_equal(store_digest_add(st, &it, 1300), 0);
	it.failure_id = 20;                 /* unlabelled, another group */
	it.assertion = NULL;
	it.line = 30;
	it.what = NULL;
	it.metrics = NULL;
	assert_int_equal(store_digest_add(st, &it, 1400), 0);
	store_close(st);

	st = open_store(dir, err, sizeof err);
	assert_non_null(st);
	assert_int_equal(store_digest_load(st, "telemonctl -state /new", on_waiting, &s), 0);
	assert_int_equal(s.n, 3);
	assert_true(s.ids[0] == 18 && s.ids[1] == 19 && s.ids[2] == 20);
	assert_string_equal(s.text[0], "read at most 10 ms|interval Read #12|size = 4096|"
			    "ops@example.org|telemonctl -state /new");
	assert_string_equal(s.text[2], "(null)|(null)|(null)|ops@example.org|"
			    "telemonctl -state /new");
	assert_true(s.when[0] == 1300 && s.when[2] == 1400);
	assert_int_equal(s.count[0], 28);
	assert_int_equal(s.count[2], 30);

	/* the labelled group's digest was composed */
	assert_int_equal(store_digest_done(st, 7, "read at most 10 ms", 28), 0);
	assert_int_equal(store_commit(st), 0);
	memset(&s, 0, sizeof s);
	assert_int_equal(store_digest_load(st, "x", on_waiting, &s), 0);
	assert_int_equal(s.n, 1);
	assert_true(s.ids[0] == 20);
	/* and the unlabelled one's */
	assert_int_equal(store_digest_done(st, 7, NULL, 30), 0);
	memset(&s, 0, sizeof s);
	assert_int_equal(store_digest_load(st, "x", on_waiting, &s), 0);
	assert_int_equal(s.n, 0);
	store_close(st);
}

static void on_commit(void *arg, bool committed)
{
	int *n = arg;

	assert_true(committed);
	(*n)++;
}

static void commit_callback(void **state)
{
	const char *dir = *state;
	char err[300] = "";
	struct store *st = open_store(dir, err, sizeof err);
	uint64_t id;
	int n = 0;

	assert_non_null(st);
	store_set_commit_cb(st, on_commit, &n);
	assert_int_equal(store_commit(st), 0);      /* no batch: not called */
	assert_int_equal(n, 0);
	assert_int_equal(store_mail_add(st, "a@b", "s", "b", 1, 1, &id), 0);
	assert_true(store_pending(st));
	assert_int_equal(store_commit(st), 0);
	assert_int_equal(n, 1);
	store_set_commit_cb(st, NULL, NULL);
	assert_int_equal(store_mail_done(st, id), 0);
	store_close(st);
	assert_int_equal(n, 1);
}

/* Collects the instances store_instances_open() reads back. */
static void on_instance(void *arg, struct tm_instance *in)
{
	*(struct tm_instance *)arg = *in;
}

static void instance_token_kept(void **state)
{
	const char *dir = *state;
	char err[300] = "";
	struct store *st = open_store(dir, err, sizeof err);
	struct tm_instance in = { .pid = 42, .start_ns = 7, .has_token = true }, back = { 0 };

	assert_non_null(st);
	strcpy(in.prog, "fsread");
	strcpy(in.machine, "host1");
	strcpy(in.endpoint, "127.0.0.1:4000");
	for (size_t i = 0; i < CMON_TOKEN_LEN; i++)
		in.token[i] = (uint8_t)(i * 7 + 1);
	assert_int_equal(store_instance_insert(st, &in), 0);
	in.has_token = false;                      /* saved without: the token stays */
	assert_int_equal(store_instance_save(st, &in), 0);
	assert_int_equal(store_commit(st), 0);
	store_close(st);

	st = open_store(dir, err, sizeof err);
	assert_non_null(st);
	assert_int_equal(store_instances_open(st, on_instance, &back), 0);
	assert_int_equal(back.id, in.id);
	assert_true(back.has_token);
	for (size_t i = 0; i < CMON_TOKEN_LEN; i++)
		assert_int_equal(back.token[i], (uint8_t)(i * 7 + 1));
	store_close(st);
}

/* Failure rows are made at the commit, one after the other; store_flush
 * makes them sooner for a read on the same connection, and a row the
 * database refuses then is dropped and counted, the others kept. */
static void failures_made_at_commit(void **state)
{
	const char *dir = *state;
	char err[300] = "";
	struct store *st;
	struct store_failure f = { .instance_id = 1, .assertion = "read at most 10 ms", .line = 27,
				   .result = "fail", .uid = -1, .time = 5 };
	struct store_health h;
	uint64_t id1 = 0, id2 = 0, id3 = 0;

	SQLITE_ONLY();
	st = open_store(dir, err, sizeof err);
	assert_non_null(st);
	exec_ok(st, "CREATE TRIGGER refuse BEFORE INSERT ON failures WHEN NEW.line = 99"
		    " BEGIN SELECT RAISE(ABORT, 'refused'); END");
	assert_int_equal(store_add_failure(st, &f, &id1), 0);
	assert_true(store_pending(st));
	assert_false(store_failure_exists(st, id1));           /* not made yet */
	assert_int_equal(store_flush(st), 0);
	assert_true(store_failure_exists(st, id1));
	f.line = 99;
	assert_int_equal(store_add_failure(st, &f, &id2), 0);  /* refused at the commit */
	f.line = 28;
	assert_int_equal(store_add_failure(st, &f, &id3), 0);
	assert_true(id1 < id2 && id2 < id3);
	assert_int_equal(store_commit(st), 0);
	assert_false(store_failure_exists(st, id2));
	assert_true(store_failure_exists(st, id3));
	assert_int_equal(count(st, "SELECT count(*) FROM failures"), 2);
	assert_int_equal(count(st, "SELECT count FROM failure_counts"), 2);
	store_health(st, &h);
	assert_int_equal(h.rejected, 1);
	assert_false(store_degraded(st));
	store_close(st);
}

static void count_reopen(void *arg)
{
	(*(int *)arg)++;
}

static void deleted_database_replaced(void **state)
{
	const char *dir = *state;
	char err[300] = "", path[PATH_MAX];
	struct store *st;
	struct store_failure f = { .instance_id = 1, .assertion = "read at most 10 ms", .line = 27,
				   .result = "fail", .uid = -1, .time = 5 };
	struct store_health h;
	uint64_t id1 = 0, id2 = 0, id3 = 0;
	int reopened = 0;

	SQLITE_ONLY();
	st = open_store(dir, err, sizeof err);

	assert_non_null(st);
	store_set_reopen_cb(st, count_reopen, &reopened);
	assert_int_equal(store_add_failure(st, &f, &id1), 0);
	assert_int_equal(store_commit(st), 0);
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof path, "%s/telemonitor.db%s", dir,
			 i == 0 ? "" : i == 1 ? "-wal" : "-shm");
		unlink(path);
	}
	/* noticed on the next look, before anything is written to the lost file */
	store_poll(st, tm_now());
	assert_true(store_degraded(st));
	store_health(st, &h);
	assert_string_equal(h.reason, "database deleted");
	assert_int_equal(store_add_failure(st, &f, &id2), 0);
	assert_int_equal(store_add_failure(st, &f, &id3), 0);
	assert_true(id2 > id1 && id3 > id2);
	assert_int_equal(store_commit(st), -EAGAIN);
	store_health(st, &h);
	assert_int_equal(h.pending_failures, 2);
	assert_int_equal(h.outages, 1);
	/* not retried before its time, then a new database takes them */
	store_poll(st, tm_now() + 0.5);
	assert_true(store_degraded(st));
	assert_int_equal(reopened, 0);
	store_poll(st, tm_now() + STORE_RETRY_MIN_S);
	assert_false(store_degraded(st));
	assert_int_equal(reopened, 1);
	assert_int_equal(store_commit(st), 0);
	assert_int_equal(count(st, "SELECT count(*) FROM failures"), 2);
	snprintf(path, sizeof path, "SELECT count(*) FROM failures WHERE id IN (%llu, %llu)",
		 (unsigned long long)id2, (unsigned long long)id3);
	assert_int_equal(count(st, path), 2);
	assert_int_equal(count(st, "SELECT failures FROM store_outages"
				" WHERE reason = 'database deleted' AND dropped = 0"), 2);
	store_health(st, &h);
	assert_int_equal(h.pending, 0);
	assert_int_equal(h.dropped, 0);
	store_close(st);
}

/* Three classes and three instances, saved (or held). */
static void three_of_each(struct store *st, struct tm_class *c, struct tm_instance *in)
{
	for (int i = 0; i < 3; i++) {
		snprintf(c[i].prog, sizeof c[i].prog, "prog%d", i);
		strcpy(c[i].machine, "*");
		strcpy(c[i].pid, "*");
		assert_int_equal(store_class_save(st, &c[i]), 0);
		snprintf(in[i].prog, sizeof in[i].prog, "prog%d", i);
		strcpy(in[i].machine, "host1");
		in[i].pid = 100 + i;
		in[i].start_ns = 7;
		if (in[i].id)
			assert_int_equal(store_instance_save(st, &in[i]), 0);
		else
			assert_int_equal(store_instance_insert(st, &in[i]), 0);
	}
}

static void id_lists(void **state)
{
	const char *dir = *state;
	char err[300] = "", path[PATH_MAX];
	struct store *st = open_store(dir, err, sizeof err);
	struct tm_class c[3] = { 0 };
	struct tm_instance in[3] = { 0 };
	uint32_t keep[2];
	uint64_t live[1];

	assert_non_null(st);
	three_of_each(st, c, in);
	keep[0] = c[2].id;                         /* not in order: the list is sorted */
	keep[1] = c[0].id;
	live[0] = in[1].id;
	assert_int_equal(store_classes_keep(st, keep, 2), 0);
	assert_int_equal(store_instances_reap(st, live, 1, tm_now()), 0);
	assert_int_equal(store_commit(st), 0);
	assert_int_equal(count(st, "SELECT count(*) FROM classes WHERE active = 1"), 2);
	assert_int_equal(count(st, "SELECT count(*) FROM classes WHERE active = 1 AND"
				" prog IN ('prog0', 'prog2')"), 2);
	assert_int_equal(count(st, "SELECT count(*) FROM instances WHERE ended IS NULL"
				" AND prog = 'prog1'"), 1);
	assert_int_equal(count(st, "SELECT count(*) FROM instances WHERE state = 'gone'"
				" AND status = 'ended while the telemonitor was away'"), 2);
	/* none given: no class active, every open instance gone */
	assert_int_equal(store_classes_keep(st, keep, 0), 0);
	assert_int_equal(store_instances_reap(st, live, 0, tm_now()), 0);
	assert_int_equal(store_commit(st), 0);
	assert_int_equal(count(st, "SELECT count(*) FROM classes WHERE active = 1"), 0);
	assert_int_equal(count(st, "SELECT count(*) FROM instances WHERE ended IS NULL"),
			 0);

	if (pg_url()) {             /* the rest deletes sqlite's file */
		store_close(st);
		return;
	}

	/* the database goes: the same writes are held, the later keep list
	 * replacing the earlier one, and replayed into the new database */
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof path, "%s/telemonitor.db%s", dir,
			 i == 0 ? "" : i == 1 ? "-wal" : "-shm");
		unlink(path);
	}
	store_poll(st, tm_now());
	assert_true(store_degraded(st));
	three_of_each(st, c, in);
	assert_int_equal(store_classes_keep(st, keep, 0), 0);
	keep[0] = c[1].id;
	assert_int_equal(store_classes_keep(st, keep, 1), 0);
	live[0] = in[2].id;
	assert_int_equal(store_instances_reap(st, live, 1, tm_now()), 0);
	assert_int_equal(store_commit(st), -EAGAIN);
	store_poll(st, tm_now() + STORE_RETRY_MIN_S);
	assert_false(store_degraded(st));
	assert_int_equal(store_commit(st), 0);
	assert_int_equal(count(st, "SELECT count(*) FROM classes"), 3);
	assert_int_equal(count(st, "SELECT count(*) FROM classes WHERE active = 1"), 1);
	assert_int_equal(count(st, "SELECT count(*) FROM classes WHERE active = 1 AND"
				" prog = 'prog1'"), 1);
	assert_int_equal(count(st, "SELECT count(*) FROM instances"), 3);
	assert_int_equal(count(st, "SELECT count(*) FROM instances WHERE ended IS NULL"
				" AND prog = 'prog2'"), 1);
	assert_int_equal(count(st, "SELECT count(*) FROM instances WHERE ended IS NULL"),
			 1);
	store_close(st);
}

/* Retention: rows older than the cut go, at most `limit` per table per call. */
static void prune_in_small_batches(void **state)
{
	const char *dir = *state;
	char err[300] = "";
	struct store *st = open_store(dir, err, sizeof err);
	struct store_pruned p;

	assert_non_null(st);
	exec_ok(st,
		"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1200)"
		" INSERT INTO failures (id, instance_id, time, window_id) SELECT i, 1, 1000 + i, i"
		" FROM n;"
		"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1200)"
		" INSERT INTO windows (id, instance_id, text) SELECT i, 1, 'x' FROM n;"
		"INSERT INTO failures (id, instance_id, time, window_id) VALUES (5000, 1, 9000, 5000);"
		"INSERT INTO windows (id, instance_id, text) VALUES (5000, 1, 'new');"
		"INSERT INTO verdicts (instance_id, time) VALUES (1, 10), (1, 9000);"
		"INSERT INTO mail_queue (queued, recipients, subject, body, failures)"
		" VALUES (10, 'a@b.c', 's', 'b', 1);"
		"INSERT INTO alert_outbox (id, queued, url, body) VALUES (1, 10, 'u', '[]');");
	assert_int_equal(store_prune(st, 5000, 500, &p), 0);
	assert_true(p.failures == 500 && p.windows == 500 && p.verdicts == 1 && p.mail == 2);
	assert_int_equal(store_prune(st, 5000, 500, &p), 0);
	assert_true(p.failures == 500 && p.windows == 500 && p.verdicts == 0 && p.mail == 0);
	assert_int_equal(store_prune(st, 5000, 500, &p), 0);
	assert_true(p.failures == 200 && p.windows == 200);
	assert_int_equal(store_prune(st, 5000, 500, &p), 0);
	assert_true(p.failures == 0 && p.windows == 0);
	assert_int_equal(store_commit(st), 0);
	assert_int_equal(count(st, "SELECT count(*) FROM failures"), 1);
	assert_int_equal(count(st, "SELECT count(*) FROM windows WHERE text = 'new'"), 1);
	assert_int_equal(count(st, "SELECT count(*) FROM windows"), 1);
	assert_int_equal(count(st, "SELECT count(*) FROM verdicts"), 1);
	store_close(st);
}

struct silences_seen {
	int n;                    /* silences read */
	uint64_t ids[4];          /* their ids */
	char prog[4][32];         /* their prog patterns ("" for NULL) */
};

static void on_silence(void *arg, const struct store_silence *ss)
{
	struct silences_seen *s = arg;

	if (s->n < 4) {
		s->ids[s->n] = ss->id;
		snprintf(s->prog[s->n], sizeof s->prog[0], "%s", ss->prog ? ss->prog : "");
		s->n++;
	}
}

/* Only silences neither ended nor removed are read back; acks are kept. */
static void silences_and_acks(void **state)
{
	const char *dir = *state;
	char err[300] = "";
	struct store *st = open_store(dir, err, sizeof err);
	struct store_silence a = { .created = 1, .until = 2e9, .prog = "fs*", .comment = "deploy" };
	struct store_silence b = { .created = 1, .until = 100, .machine = "ws1" };
	struct store_silence c = { .created = 1, .until = 2e9, .assertion = "read*" };
	struct silences_seen s = { 0 };
	uint64_t ia = 0, ib = 0, ic = 0;

	assert_non_null(st);
	assert_int_equal(store_silence_add(st, &a, &ia), 0);
	assert_int_equal(store_silence_add(st, &b, &ib), 0);
	assert_int_equal(store_silence_add(st, &c, &ic), 0);
	assert_true(ia > 0 && ib > ia && ic > ib);
	assert_int_equal(store_silence_remove(st, ic, 5), 0);
	exec_ok(st, "INSERT INTO failures (id, instance_id, time) VALUES (7, 1, 1)");
	assert_int_equal(store_ack(st, 7, 1234.5, "known"), 0);
	store_close(st);

	st = open_store(dir, err, sizeof err);
	assert_non_null(st);
	assert_int_equal(store_silences_load(st, 1000, on_silence, &s), 0);
	assert_int_equal(s.n, 1);
	assert_true(s.ids[0] == ia);
	assert_string_equal(s.prog[0], "fs*");
	assert_int_equal(count(st, "SELECT count(*) FROM failures WHERE id = 7 AND"
			       " acked = 1234.5 AND ack_comment = 'known'"), 1);
	/* ids go on after a reopen */
	assert_int_equal(store_silence_add(st, &a, &ib), 0);
	assert_true(ib > ic);
	store_close(st);
}

struct alerts_seen {
	int n;                    /* rows read */
	uint64_t ids[4];          /* outbox ids or failure ids */
	double ended[4];          /* when the instance ended */
};

static void on_outbox(void *arg, uint64_t id, double queued, const char *url, const char *body)
{
	struct alerts_seen *s = arg;

	(void)queued;
	(void)url;
	(void)body;
	if (s->n < 4)
		s->ids[s->n++] = id;
}

static void on_open_alert(void *arg, uint64_t failure_id, const char *url, const char *alert,
			  double ended)
{
	struct alerts_seen *s = arg;

	assert_non_null(url);
	assert_non_null(alert);
	if (s->n < 4) {
		s->ended[s->n] = ended;
		s->ids[s->n++] = failure_id;
	}
}

/* The Alertmanager outbox is kept until done; an ended instance's open
 * alerts are listed for resolution, a live one's for renewal. */
static void alert_outbox_and_open_alerts(void **state)
{
	const char *dir = *state;
	char err[300] = "";
	struct store *st = open_store(dir, err, sizeof err);
	struct tm_instance live = { .prog = "fsread", .machine = "m", .pid = 1, .start_ns = 1 };
	struct tm_instance gone = { .prog = "fsread", .machine = "m", .pid = 2, .start_ns = 2 };
	struct alerts_seen s = { 0 };
	uint64_t a = 0, b = 0;

	assert_non_null(st);
	assert_int_equal(store_instance_insert(st, &live), 0);
	assert_int_equal(store_instance_insert(st, &gone), 0);
	assert_int_equal(store_alert_add(st, "http://am/api/v2/alerts", "[{}]", 1, &a), 0);
	assert_int_equal(store_alert_add(st, "http://am/api/v2/alerts", "[{}]", 2, &b), 0);
	assert_true(a > 0 && b > a);
	assert_int_equal(store_alert_open(st, 10, live.id, "u", "{\"labels\":{}}", "x", 1e9), 0);
	assert_int_equal(store_alert_open(st, 11, gone.id, "u", "{\"labels\":{}}", "x", 1e9), 0);
	assert_int_equal(store_instance_end(st, &gone, IS_ENDED, 500), 0);
	store_close(st);

	st = open_store(dir, err, sizeof err);
	assert_non_null(st);
	assert_int_equal(store_alert_load(st, on_outbox, &s), 0);
	assert_true(s.n == 2 && s.ids[0] == a && s.ids[1] == b);
	assert_int_equal(store_alert_done(st, a), 0);
	memset(&s, 0, sizeof s);
	assert_int_equal(store_alert_load(st, on_outbox, &s), 0);
	assert_true(s.n == 1 && s.ids[0] == b);
	memset(&s, 0, sizeof s);
	assert_int_equal(store_alerts_ended(st, 9999, 100, on_open_alert, &s), 0);
	assert_true(s.n == 1 && s.ids[0] == 11 && s.ended[0] == 500);
	assert_int_equal(store_alert_close(st, 11), 0);
	memset(&s, 0, sizeof s);
	assert_int_equal(store_alerts_ended(st, 9999, 100, on_open_alert, &s), 0);
	assert_int_equal(s.n, 0);
	assert_int_equal(store_alerts_live(st, 100, on_open_alert, &s), 0);
	assert_true(s.n == 1 && s.ended[0] == 1e9);

	/* one alert per (instance, assertion): a later failure of the pair
	 * replaces it and moves its end; once that end has come it is listed
	 * for resolution at that end, though its instance lives on */
	assert_int_equal(store_alert_open(st, 12, live.id, "u", "{\"labels\":{}}", "x", 600), 0);
	assert_int_equal(store_alert_open(st, 13, live.id, "u", "{\"labels\":{}}", "y", 1e9), 0);
	memset(&s, 0, sizeof s);
	assert_int_equal(store_alerts_live(st, 100, on_open_alert, &s), 0);
	assert_int_equal(s.n, 2);              /* 13 and 12; 10 replaced */
	memset(&s, 0, sizeof s);
	assert_int_equal(store_alerts_ended(st, 599, 100, on_open_alert, &s), 0);
	assert_int_equal(s.n, 0);
	assert_int_equal(store_alerts_ended(st, 9999, 100, on_open_alert, &s), 0);
	assert_true(s.n == 1 && s.ids[0] == 12 && s.ended[0] == 600);
	store_close(st);
}

/* What the typed reads handed over. */
struct reads_seen {
	int n;                    /* rows seen */
	int stop_after;           /* stop after this many (0: never) */
	uint64_t ids[8];          /* their ids */
	bool flag[8];             /* a has_ flag of each */
	char text[8][32];         /* a string of each ("(null)" for NULL) */
};

static int seen(struct reads_seen *s, uint64_t id, bool flag, const char *text)
{
	if (s->n < 8) {
		s->ids[s->n] = id;
		s->flag[s->n] = flag;
		snprintf(s->text[s->n], sizeof s->text[0], "%s", text ? text : "(null)");
	}
	s->n++;
	return s->stop_after && s->n >= s->stop_after;
}

static int on_instance_row(void *arg, const struct store_instance_row *r)
{
	return seen(arg, r->id, r->has_ended, r->status);
}

static int on_failure_row(void *arg, const struct store_failure_row *r)
{
	return seen(arg, r->id, r->has_ts, r->assertion);
}

static int on_silence_row(void *arg, const struct store_silence *r)
{
	return seen(arg, r->id, r->prog != NULL, r->comment);
}

static int on_count(void *arg, const struct store_failure_count *r)
{
	return seen(arg, r->instance_id * 100 + (uint64_t)r->count, true, r->name);
}

static int on_window(void *arg, const struct store_window_row *w)
{
	return seen(arg, (uint64_t)w->len, w->stored, w->has_window ? w->text : NULL);
}

/* The typed reads: filters, order, limits, NULLs, stopping early. */
static void typed_reads(void **state)
{
	const char *dir = *state;
	char err[300] = "";
	struct store *st = open_store(dir, err, sizeof err);
	struct store_failure_query fq = { .limit = 10 };
	struct reads_seen s = { 0 };
	int64_t n = 0;

	assert_non_null(st);
	exec_ok(st,
		"INSERT INTO instances (id, prog, machine, pid, start_ns, first_seen, ended, status)"
		" VALUES (1, 'fs', 'ws1', 10, 1, 100, 200, 'done'), (2, 'fs', 'ws2', 11, 1, 150,"
		" NULL, NULL), (3, 'db', 'ws1', 12, 1, 160, NULL, 'up');"
		"INSERT INTO failures (id, instance_id, assert, line, time, start_ts, end_ts,"
		" result, window_id, metrics) VALUES"
		" (1, 1, 'read', 3, 1000, 5, 9, 'fail', 1, '{\"n\":1}'),"
		" (2, 2, NULL, 4, 1001, NULL, NULL, 'fail', 2, NULL),"
		" (3, 2, 'read', 3, 1002, 7, 8, 'inconclusive', NULL, '{\"n\":2}'),"
		" (4, 3, 'read', 3, 1003, 1, 2, 'fail', NULL, NULL);"
		"INSERT INTO windows (id, instance_id, from_rec, to_rec, text)"
		" VALUES (1, 1, 1, 2, 'log');"
		"INSERT INTO silences (id, created, until, prog, comment, removed)"
		" VALUES (1, 1, 2e9, 'fs*', 'deploy', NULL), (2, 1, 2e9, NULL, NULL, NULL),"
		" (3, 1, 2e9, 'x', NULL, 5), (4, 1, 10, 'y', NULL, NULL);");

	/* instances: running ones unless all, the newest `limit`, oldest first */
	assert_int_equal(store_instances_list(st, false, 10, on_instance_row, &s, err, sizeof err),
			 0);
	assert_int_equal(s.n, 2);
	assert_true(s.ids[0] == 2 && s.ids[1] == 3 && !s.flag[0]);
	assert_string_equal(s.text[0], "(null)");
	memset(&s, 0, sizeof s);
	assert_int_equal(store_instances_list(st, true, 2, on_instance_row, &s, err, sizeof err), 0);
	assert_true(s.n == 2 && s.ids[0] == 2 && s.ids[1] == 3);
	memset(&s, 0, sizeof s);
	s.stop_after = 1;
	assert_int_equal(store_instances_list(st, true, 10, on_instance_row, &s, err, sizeof err),
			 0);
	assert_true(s.n == 1 && s.ids[0] == 1 && s.flag[0]);
	assert_string_equal(s.text[0], "done");
	assert_true(store_instance_exists(st, 3));
	assert_false(store_instance_exists(st, 4));
	assert_int_equal(store_instances_count(st, &n, err, sizeof err), 0);
	assert_int_equal(n, 3);

	/* failures: filters, and newest first on request */
	memset(&s, 0, sizeof s);
	fq.prog = "fs";
	assert_int_equal(store_failures_list(st, &fq, on_failure_row, &s, err, sizeof err), 0);
	assert_true(s.n == 3 && s.ids[0] == 1 && s.ids[2] == 3 && s.flag[0] && !s.flag[1]);
	assert_string_equal(s.text[1], "(null)");
	memset(&s, 0, sizeof s);
	fq = (struct store_failure_query){ .assertion = "read", .before_id = 4, .limit = 10,
					   .newest_first = true };
	assert_int_equal(store_failures_list(st, &fq, on_failure_row, &s, err, sizeof err), 0);
	assert_true(s.n == 2 && s.ids[0] == 3 && s.ids[1] == 1);
	memset(&s, 0, sizeof s);
	fq = (struct store_failure_query){ .has_since = true, .since = 1001.5, .instance_id = 3,
					   .limit = 1 };
	assert_int_equal(store_failures_list(st, &fq, on_failure_row, &s, err, sizeof err), 0);
	assert_true(s.n == 1 && s.ids[0] == 4);
	assert_true(store_failure_exists(st, 2));
	assert_false(store_failure_exists(st, 5));

	/* windows: stored, given but not stored yet, none, no such failure */
	memset(&s, 0, sizeof s);
	assert_int_equal(store_failure_window(st, 1, on_window, &s, err, sizeof err), 0);
	assert_int_equal(store_failure_window(st, 2, on_window, &s, err, sizeof err), 0);
	assert_int_equal(store_failure_window(st, 3, on_window, &s, err, sizeof err), 0);
	assert_int_equal(store_failure_window(st, 9, on_window, &s, err, sizeof err), -ENOENT);
	assert_int_equal(s.n, 3);
	assert_true(s.flag[0] && s.ids[0] == 3 && !s.flag[1] && !s.flag[2]);
	assert_string_equal(s.text[0], "log");
	assert_string_equal(s.text[1], "(null)");

	/* counts per instance and assertion name, inconclusive ones left out */
	memset(&s, 0, sizeof s);
	assert_int_equal(store_failure_counts(st, 10, on_count, &s, err, sizeof err), 0);
	assert_int_equal(s.n, 3);

	/* silences: neither removed nor ended, by id */
	memset(&s, 0, sizeof s);
	assert_int_equal(store_silences_list(st, 1000, 10, on_silence_row, &s, err, sizeof err), 0);
	assert_true(s.n == 2 && s.ids[0] == 1 && s.flag[0] && s.ids[1] == 2 && !s.flag[1]);
	assert_string_equal(s.text[0], "deploy");
	store_close(st);
}

/* Collects instance ids (and holders, or epochs) from the lease calls. */
struct ids_seen {
	int n;                    /* ids seen */
	uint64_t ids[8];          /* the ids */
	char owner[8][32];        /* their holders ("" for none) */
	uint64_t epoch[8];        /* their epochs (renewals) */
};

static void on_id(void *arg, uint64_t id, const char *owner, uint64_t epoch)
{
	(void)epoch;
	struct ids_seen *s = arg;

	if (s->n < 8) {
		s->ids[s->n] = id;
		snprintf(s->owner[s->n], sizeof s->owner[0], "%s", owner ? owner : "");
	}
	s->n++;
}

static void on_lease(void *arg, uint64_t id, uint64_t epoch)
{
	struct ids_seen *s = arg;

	if (s->n < 8) {
		s->ids[s->n] = id;
		s->epoch[s->n] = epoch;
	}
	s->n++;
}

/* The keeper renews on a thread of its own: wait for a renewal it made
 * after now, then take it in (store_lease_renew). */
static int renew_wait(struct store *st, struct ids_seen *s)
{
	int r = 1;

	usleep(1100 * 1000);
	for (int i = 0; i < 30 && r == 1; i++) {
		r = store_lease_renew(st, on_lease, s);
		if (r == 1)
			usleep(100 * 1000);
	}
	return r;
}

/* A failure of instance `id` (no window). */
static int add_fail(struct store *st, uint64_t id, const char *label, uint64_t *fid)
{
	struct store_failure f = { .instance_id = id, .assertion = label, .line = 3,
				   .result = "fail", .kind = "interval", .uid = 1, .time = tm_now() };

	return store_add_failure(st, &f, fid);
}

/* How many failures of instance `id` are stored. */
static int64_t count_failures(struct store *st, uint64_t id)
{
	struct db_stmt *q = db_prepare(store_conn(st), "SELECT count(*) FROM failures WHERE"
				       " instance_id = ?1");
	struct bl_value v[] = { db_vint((int64_t)id) };
	int64_t n = -1;

	if (q && db_run(q, v, 1) == DB_ROW)
		n = db_col_int(q, 0);
	db_finalize(q);
	return n;
}

/* Two telemonitors on one PostgreSQL store: the instance is added once
 * (the second finds the first's row), ids from separate blocks, one claim
 * wins (epoch 1), the lease is renewed by its holder only; once it has run
 * out (on the server's clock) the other takes the instance over (epoch 2)
 * and the old holder's writes no longer go in (the fence); each sends only
 * its own mail. */
static void shared_store(void **state)
{
	const char *dir = *state;
	char err[300] = "";
	struct store *a, *b;
	struct tm_instance in = { .prog = "fs", .machine = "ws1", .pid = 7, .start_ns = 1,
				  .state = IS_LISTED }, in2 = in;
	struct ids_seen s = { 0 };
	struct seen m = { 0 };
	uint64_t ma = 0, mb = 0, ea = 0, eb = 0, fid = 0;
	double now = tm_now();

	if (!pg_url()) {   /* (does not apply: unit.telemon_store_pg runs it) */
		print_message("# PostgreSQL only: not on sqlite\n");
		return;
	}
	a = open_store(dir, err, sizeof err);
	b = open_store(dir, err, sizeof err);
	assert_true(a && b);
	assert_int_equal(store_set_node(a, "node-a"), 0);
	assert_int_equal(store_set_node(b, "node-b"), 0);
	assert_true(store_shared(a) && store_shared(b));

	assert_int_equal(store_instance_add(a, &in), 0);       /* added */
	assert_int_equal(store_instance_add(b, &in2), 1);      /* found, not added twice */
	assert_true(in.id && in2.id == in.id);
	assert_int_equal(store_instance_claim(a, in.id, &ea), 1);
	assert_int_equal(ea, 1);
	assert_int_equal(store_instance_claim(b, in.id, &eb), 0);
	assert_int_equal(renew_wait(a, &s), 0);
	assert_true(s.n == 1 && s.ids[0] == in.id && s.epoch[0] == 1);
	assert_true(store_lease_safe(a));
	memset(&s, 0, sizeof s);
	assert_int_equal(renew_wait(b, &s), 0);
	assert_int_equal(s.n, 0);
	assert_int_equal(store_leases_expired(b, 10, on_id, &s), 0);
	assert_int_equal(s.n, 0);                     /* a's lease still runs */

	/* a's writes go in while it holds the lease */
	assert_int_equal(add_fail(a, in.id, "first", &fid), 0);
	assert_int_equal(store_commit(a), 0);
	assert_int_equal(count_failures(b, in.id), 1);

	/* a stops renewing; once its lease has ended on the server, b takes
	 * the instance over with a new epoch */
	assert_int_equal(db_exec(store_conn(b), "UPDATE leases SET lease_until = now() -"
				 " interval '1 second'"), DB_DONE);
	assert_int_equal(store_leases_expired(b, 10, on_id, &s), 0);
	assert_true(s.n == 1 && s.ids[0] == in.id);
	assert_string_equal(s.owner[0], "node-a");
	assert_int_equal(store_instance_claim(b, in.id, &eb), 1);
	assert_int_equal(eb, 2);
	memset(&s, 0, sizeof s);
	assert_int_equal(renew_wait(a, &s), 0);
	assert_int_equal(s.n, 0);                     /* a learns it lost it */
	/* the fence: a's later write is refused, b's goes in */
	assert_int_equal(add_fail(a, in.id, "stale", &fid), 0);
	assert_int_equal(store_commit(a), 0);
	assert_int_equal(count_failures(b, in.id), 1);
	assert_int_equal(add_fail(b, in.id, "new", &fid), 0);
	assert_int_equal(store_commit(b), 0);
	assert_int_equal(count_failures(b, in.id), 2);

	/* ids from separate blocks; each loads only the mail it queued */
	assert_int_equal(store_mail_add(a, "ops@example.org", "from a", "Failure a", 1, now, &ma), 0);
	assert_int_equal(store_mail_add(b, "ops@example.org", "from b", "Failure b", 1, now, &mb), 0);
	assert_int_equal(store_commit(a), 0);
	assert_int_equal(store_commit(b), 0);
	assert_true(ma / STORE_ID_BLOCK != mb / STORE_ID_BLOCK);
	assert_int_equal(store_mail_load(a, on_mail, &m), 0);
	assert_true(m.n == 1 && m.ids[0] == ma);
	assert_string_equal(m.text[0], "from a");
	memset(&m, 0, sizeof m);
	assert_int_equal(store_mail_load(b, on_mail, &m), 0);
	assert_true(m.n == 1 && m.ids[0] == mb);

	/* b took over a's instance: it adopts a's unsent mail, once */
	memset(&m, 0, sizeof m);
	assert_int_equal(store_adopt_mail(b, "node-a", "telemonctl", on_mail, NULL, &m), 0);
	assert_true(m.n == 1 && m.ids[0] == ma);
	assert_int_equal(store_commit(b), 0);
	memset(&m, 0, sizeof m);
	assert_int_equal(store_adopt_mail(b, "node-a", "telemonctl", on_mail, NULL, &m), 0);
	assert_int_equal(m.n, 0);
	assert_int_equal(store_mail_load(b, on_mail, &m), 0);
	assert_int_equal(m.n, 2);
	memset(&m, 0, sizeof m);
	assert_int_equal(store_mail_load(a, on_mail, &m), 0);
	assert_int_equal(m.n, 0);
	store_close(a);
	store_close(b);
}

/* Window text that is not UTF-8 (a log holds whatever its program wrote):
 * sqlite keeps the bytes; on PostgreSQL, whose UTF8 database would refuse
 * them, each invalid byte and NUL becomes U+FFFD and the rest is kept. */
static int on_text_window(void *arg, const struct store_window_row *w)
{
	snprintf(arg, 64, "%s", w->stored ? w->text : "(none)");
	return 0;
}

static void texts_not_utf8(void **state)
{
	const char *dir = *state;
	static const char raw[] = "ok \xff\xfe caf\xc3\xa9 \xe2\x82 end";
	char err[300] = "", got[64] = "";
	struct store *st = open_store(dir, err, sizeof err);
	struct store_failure f = { .instance_id = 1, .line = 1, .result = "fail", .uid = -1,
				   .time = 5 };
	struct store_health h;
	uint64_t wid, fid = 0;

	assert_non_null(st);
	wid = store_next_window_id(st);
	f.window_id = wid;
	assert_int_equal(store_add_window(st, wid, 1, 1, 2, false, raw, sizeof raw - 1), 0);
	assert_int_equal(store_add_failure(st, &f, &fid), 0);
	assert_int_equal(store_commit(st), 0);
	store_health(st, &h);
	assert_int_equal(h.rejected, 0);
	assert_int_equal(store_failure_window(st, fid, on_text_window, got, err, sizeof err), 0);
	if (pg_url())
		assert_string_equal(got, "ok \xef\xbf\xbd\xef\xbf\xbd caf\xc3\xa9 "
					 "\xef\xbf\xbd\xef\xbf\xbd end");
	else
		assert_string_equal(got, raw);
	store_close(st);
}

/* Windows at rest (wtext.h): on sqlite a window's text is one zstd frame
 * (a BLOB) when that is smaller, a short one stays text, and both read
 * back byte for byte; a frame that does not unpack is said, not shown.
 * PostgreSQL keeps the text (the server packs large values itself). */
static int on_window_copy(void *arg, const struct store_window_row *w)
{
	char **out = arg;

	*out = w->stored ? strndup(w->text, w->len) : NULL;
	return 0;
}

static uint64_t window_failure(struct store *st, const char *text, size_t len)
{
	struct store_failure f = { .instance_id = 1, .line = 1, .result = "fail", .uid = -1,
				   .time = 5 };
	uint64_t wid = store_next_window_id(st), fid = 0;

	f.window_id = wid;
	assert_int_equal(store_add_window(st, wid, 1, 1, 2, false, text, len), 0);
	assert_int_equal(store_add_failure(st, &f, &fid), 0);
	assert_int_equal(store_commit(st), 0);
	return fid;
}

static void windows_packed(void **state)
{
	const char *dir = *state;
	char err[300] = "", *got = NULL, *big = malloc(64 * 1024), *text;
	struct store *st = open_store(dir, err, sizeof err);
	uint64_t fbig, fsmall;
	size_t n = 0, len;
	const char *small = "#cmon-ascii 1\n1 StartRead 1 8192\n";

	assert_non_null(st);
	assert_non_null(big);
	n += (size_t)snprintf(big, 64, "#cmon-ascii 1\n#tick-ns 1\n");
	for (int i = 0; n + 80 < 64 * 1024; i++)
		n += (size_t)snprintf(big + n, 80, "1795944759%09d %d StartRead %d 8192\n",
				      i * 1000, i % 7, i % 13);
	fbig = window_failure(st, big, n);
	fsmall = window_failure(st, small, strlen(small));

	assert_int_equal(store_failure_window(st, fbig, on_window_copy, &got, err, sizeof err), 0);
	assert_non_null(got);
	assert_int_equal(strlen(got), n);
	assert_memory_equal(got, big, n);
	free(got);
	assert_int_equal(store_failure_window(st, fsmall, on_window_copy, &got, err, sizeof err), 0);
	assert_string_equal(got, small);
	free(got);
	if (pg_url()) {
		assert_int_equal(count(st, "SELECT count(*) FROM windows WHERE length(text) > 60000"),
				 1);
		store_close(st);
		free(big);
		return;
	}
	/* packed where it gains, at least threefold for log text; text where not */
	assert_int_equal(count(st, "SELECT count(*) FROM windows WHERE typeof(text) = 'blob'"
			       " AND length(text) * 3 < 60000"), 1);
	assert_int_equal(count(st, "SELECT count(*) FROM windows WHERE typeof(text) = 'text'"),
			 1);

	/* a damaged frame: the read says so */
	exec_ok(st, "UPDATE windows SET text = x'28b52ffd2400ffffffff' WHERE typeof(text) = 'blob'");
	err[0] = '\0';
	assert_int_equal(store_failure_window(st, fbig, on_window_copy, &got, err, sizeof err),
			 -EIO);
	assert_non_null(strstr(err, "damaged"));
	store_close(st);

	/* the packer itself: a frame larger than a reader allows is refused */
	struct wtext *w = wtext_new();
	const void *p;
	size_t plen;
	assert_non_null(w);
	assert_int_equal(wtext_pack(w, small, strlen(small), &p, &plen), 0);   /* too small */
	assert_int_equal(wtext_pack(w, big, n, &p, &plen), 1);
	assert_true(wtext_is_packed(p, plen));
	assert_false(wtext_is_packed(big, n));
	assert_null(wtext_unpack(p, plen, n - 1, &len, err, sizeof err));
	assert_non_null(strstr(err, "more than"));
	text = wtext_unpack(p, plen, n, &len, err, sizeof err);
	assert_non_null(text);
	assert_int_equal(len, n);
	assert_memory_equal(text, big, n);
	assert_null(wtext_unpack(p, plen / 2, n, &len, err, sizeof err));   /* cut short */
	free(text);
	/* a window the size of most (2-3 KiB) */
	assert_int_equal(wtext_pack(w, big, 3000, &p, &plen), 1);
	assert_true(plen * 2 < 3000);
	text = wtext_unpack(p, plen, n, &len, err, sizeof err);
	assert_non_null(text);
	assert_int_equal(len, 3000);
	assert_memory_equal(text, big, 3000);
	free(text);
	wtext_free(w);
	free(big);
}

static int on_report(void *arg, const struct store_report_row *r)
{
	return seen(arg, r->instance_id, true, r->metrics);
}

static int on_instance_failures(void *arg, const struct store_instance_row *r)
{
	*(int64_t *)arg = r->failures;
	return 0;
}

/* The rows of sqlite's query plan of `sql`, "; "-separated. */
static void sqlite_plan(const char *dir, const char *sql, char *plan, size_t size)
{
	sqlite3 *db = raw_open(dir);
	char *x = NULL;
	sqlite3_stmt *q;

	assert_true(asprintf(&x, "EXPLAIN QUERY PLAN %s", sql) > 0);
	assert_int_equal(sqlite3_prepare_v2(db, x, -1, &q, NULL), SQLITE_OK);
	plan[0] = '\0';
	while (sqlite3_step(q) == SQLITE_ROW)
		snprintf(plan + strlen(plan), size - strlen(plan), "%s; ",
			 (const char *)sqlite3_column_text(q, 3));
	sqlite3_finalize(q);
	sqlite3_close(db);
	free(x);
	print_message("# plan: %s\n", plan);
}

/* Schema 17 (both engines): failures are counted per instance, assertion
 * name and report flag in failure_counts by a trigger, inconclusive ones
 * not, a replayed row (same id) once, and rows pruned by retention stay
 * counted; the newest report of each name is found from it; no index of
 * failures leads with the instance but the one on report rows. */
static void failures_counted(void **state)
{
	const char *dir = *state;
	char err[300] = "", plan[2000] = "";
	struct store *st = open_store(dir, err, sizeof err);
	struct reads_seen s = { 0 };
	const char *master = pg_url() ? "SELECT count(*) FROM pg_indexes WHERE indexname = "
				      : "SELECT count(*) FROM sqlite_master WHERE name = ";
	char sql[200];
	int64_t n = -1;

	assert_non_null(st);
	for (int i = 0; i < 4; i++) {
		static const char *const gone[] = { "'failures_instance'", "'failures_series'",
						    "'failures_reports'" };
		snprintf(sql, sizeof sql, "%s%s", master, i < 3 ? gone[i] : "'failures_report_rows'");
		assert_int_equal(count(st, sql), i < 3 ? 0 : 1);
	}
	exec_ok(st,
		"INSERT INTO instances (id, prog, machine, pid, start_ns, first_seen)"
		" VALUES (1, 'fs', 'ws1', 10, 1, 100), (2, 'fs', 'ws2', 11, 1, 150);"
		"INSERT INTO failures (id, instance_id, assert, line, time, result, metrics,"
		" report) VALUES"
		" (1, 1, 'read', 3, 1000, 'fail', '{\"n\":1}', 0),"
		" (2, 1, NULL, 4, 1001, 'fail', NULL, 0),"
		" (3, 1, 'read', 3, 1002, 'inconclusive', '{\"n\":3}', 0),"
		" (4, 2, 'stats', 5, 1003, 'fail', '{\"n\":4}', 1),"
		" (5, 1, 'read', 3, 1004, 'fail', NULL, 0);"
		/* a batch replayed after a fault: nothing counted twice */
		"INSERT INTO failures (id, instance_id, assert, line, time, result, metrics)"
		" VALUES (1, 1, 'read', 3, 1000, 'fail', '{\"n\":1}') ON CONFLICT (id) DO NOTHING;");
	assert_int_equal(store_failure_counts(st, 10, on_count, &s, err, sizeof err), 0);
	assert_int_equal(s.n, 3);
	assert_true(s.ids[0] == 101 && s.ids[1] == 102 && s.ids[2] == 201);
	assert_string_equal(s.text[0], "line 4");
	assert_string_equal(s.text[1], "read");
	assert_string_equal(s.text[2], "stats");
	assert_int_equal(store_instance_read(st, 1, on_instance_failures, &n, err, sizeof err), 0);
	assert_int_equal(n, 3);
	/* the newest with metrics, inconclusive or not, report or not */
	memset(&s, 0, sizeof s);
	assert_int_equal(store_newest_reports(st, 10, on_report, &s, err, sizeof err), 0);
	assert_int_equal(s.n, 2);
	assert_true(s.ids[0] == 1 && s.ids[1] == 2);
	assert_string_equal(s.text[0], "{\"n\":3}");
	assert_string_equal(s.text[1], "{\"n\":4}");
	/* pruned by retention: still counted; its report gone with it */
	exec_ok(st, "DELETE FROM failures WHERE id IN (3, 4)");
	memset(&s, 0, sizeof s);
	assert_int_equal(store_failure_counts(st, 10, on_count, &s, err, sizeof err), 0);
	assert_true(s.n == 3 && s.ids[1] == 102 && s.ids[2] == 201);
	memset(&s, 0, sizeof s);
	assert_int_equal(store_newest_reports(st, 10, on_report, &s, err, sizeof err), 0);
	assert_int_equal(s.n, 0);
	store_close(st);
	if (pg_url())
		return;
	/* an instance's count is a lookup, not a scan of its failures */
	sqlite_plan(dir, "SELECT sum(count) FROM failure_counts WHERE instance_id = 7", plan,
		    sizeof plan);
	assert_non_null(strstr(plan, "SEARCH failure_counts USING PRIMARY KEY (instance_id=?)"));
	sqlite_plan(dir, "SELECT id FROM failures WHERE instance_id = 7 AND report = 1"
		    " ORDER BY id DESC", plan, sizeof plan);
	assert_non_null(strstr(plan, "failures_report_rows (instance_id=?)"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(upgrade_from_version_1, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(newer_database_refused, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(mail_queue_kept_until_done, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(digest_waiting_kept_until_done, setup_dir,
						teardown_dir),
		cmocka_unit_test_setup_teardown(commit_callback, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(instance_token_kept, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(deleted_database_replaced, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(failures_made_at_commit, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(prune_in_small_batches, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(silences_and_acks, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(typed_reads, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(shared_store, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(texts_not_utf8, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(windows_packed, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(failures_counted, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(id_lists, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(alert_outbox_and_open_alerts, setup_dir,
						teardown_dir),
	};
	if (pg_url())
		printf("# store on PostgreSQL: %s\n", pg_url());
	return cmocka_run_group_tests(tests, NULL, NULL);
}
