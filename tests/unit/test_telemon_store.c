/* Unit tests for the telemonitor's store (daemons/telemonitor/store.c),
 * the parts that keep mail across a restart: a database of schema version
 * 1 (before the mail queue) is upgraded in place with its data kept; a
 * newer one is refused; queued mails and failures waiting for a digest
 * are read back after close and reopen, oldest first, and forgotten when
 * done; the commit callback sees every batch end; an instance's token is
 * kept (and not lost when it is saved without one); a database deleted
 * while open is noticed, the writes after it are held, and a new database
 * at its path takes them, with their ids, once the retry is due.
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

#include "../../daemons/telemonitor/backlog.c"
#include "../../daemons/telemonitor/store.c"

double tm_now(void)
{
	return 1700000000.0;
}

/* A fresh temporary state directory per test. */
static int setup_dir(void **state)
{
	char *dir = strdup("/tmp/test_telemon_store.XXXXXX");

	if (!dir || !mkdtemp(dir))
		return -1;
	*state = dir;
	return 0;
}

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

static int64_t count(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *q;
	int64_t n = -1;

	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
	if (sqlite3_step(q) == SQLITE_ROW)
		n = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	return n;
}

static void upgrade_from_version_1(void **state)
{
	const char *dir = *state;
	char err[300] = "";
	sqlite3 *db = raw_open(dir);
	struct store *st;

	/* the released first schema, with a failure in it */
	assert_int_equal(sqlite3_exec(db, migrations[0], NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
		"INSERT INTO instances (prog, machine, pid, start_ns, first_seen)"
		" VALUES ('fsread', 'host1', 42, 1, 1.5);"
		"INSERT INTO failures (instance_id, assert, line, time, metrics)"
		" VALUES (1, 'read at most 10 ms', 28, 2.5, '{\"size\":8192}');"
		"PRAGMA user_version = 1;", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);

	st = store_open(dir, err, sizeof err);
	assert_non_null(st);
	assert_int_equal(store_version(st), STORE_SCHEMA_VERSION);
	assert_int_equal(count(store_db(st), "SELECT count(*) FROM failures"
				" WHERE assert = 'read at most 10 ms' AND metrics LIKE '%8192%'"), 1);
	assert_int_equal(count(store_db(st), "SELECT count(*) FROM mail_queue"), 0);
	assert_int_equal(count(store_db(st), "SELECT count(*) FROM mail_digest"), 0);
	store_close(st);

	/* opened again: nothing to do */
	st = store_open(dir, err, sizeof err);
	assert_non_null(st);
	assert_int_equal(count(store_db(st), "PRAGMA user_version"), STORE_SCHEMA_VERSION);
	store_close(st);
}

static void newer_database_refused(void **state)
{
	const char *dir = *state;
	char err[300] = "", newer[64];
	sqlite3 *db = raw_open(dir);

	snprintf(newer, sizeof newer, "PRAGMA user_version = %d", STORE_SCHEMA_VERSION + 1);
	assert_int_equal(sqlite3_exec(db, newer, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_null(store_open(dir, err, sizeof err));
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
	struct store *st = store_open(dir, err, sizeof err);
	struct seen s = { 0 };
	uint64_t a = 0, b = 0;

	assert_non_null(st);
	assert_int_equal(store_mail_add(st, "ops@example.org", "first", "Failure 1 at ...\n", 1,
					100.25, &a), 0);
	assert_int_equal(store_mail_add(st, "ops@example.org", "second", "Failure 2 ...\n"
					"Failure 3 ...\n", 2, 101.5, &b), 0);
	assert_true(a > 0 && b > a);
	store_close(st);                    /* commits */

	st = store_open(dir, err, sizeof err);
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
	struct store *st = store_open(dir, err, sizeof err);
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

	st = store_open(dir, err, sizeof err);
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
	struct store *st = store_open(dir, err, sizeof err);
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
	struct store *st = store_open(dir, err, sizeof err);
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

	st = store_open(dir, err, sizeof err);
	assert_non_null(st);
	assert_int_equal(store_instances_open(st, on_instance, &back), 0);
	assert_int_equal(back.id, in.id);
	assert_true(back.has_token);
	for (size_t i = 0; i < CMON_TOKEN_LEN; i++)
		assert_int_equal(back.token[i], (uint8_t)(i * 7 + 1));
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
	struct store *st = store_open(dir, err, sizeof err);
	struct store_failure f = { .instance_id = 1, .assertion = "read at most 10 ms", .line = 27,
				   .result = "fail", .uid = -1, .time = 5 };
	struct store_health h;
	uint64_t id1 = 0, id2 = 0, id3 = 0;
	int reopened = 0;

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
	assert_int_equal(count(store_db(st), "SELECT count(*) FROM failures"), 2);
	snprintf(path, sizeof path, "SELECT count(*) FROM failures WHERE id IN (%llu, %llu)",
		 (unsigned long long)id2, (unsigned long long)id3);
	assert_int_equal(count(store_db(st), path), 2);
	assert_int_equal(count(store_db(st), "SELECT failures FROM store_outages"
				" WHERE reason = 'database deleted' AND dropped = 0"), 2);
	store_health(st, &h);
	assert_int_equal(h.pending, 0);
	assert_int_equal(h.dropped, 0);
	store_close(st);
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
