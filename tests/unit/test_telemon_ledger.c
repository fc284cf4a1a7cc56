/* Unit tests for the pool of ledger files (daemons/telemonitor/ledger.c,
 * struct ledger_pool): a forgotten ledger's file goes into STATE/tools/free
 * and the next new ledger takes it rather than creating a file; a file
 * taken from the pool starts afresh, whatever counts it held (also when a
 * crash left it in place before its first write), also when it was this
 * instance's own; the pool is found again
 * by the next telemonitor; without a pool, files are created and deleted
 * as before. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../daemons/telemonitor/ledger.c"

static char state[64];

static int make_state(void **st)
{
	(void)st;
	snprintf(state, sizeof state, "/tmp/cmon-ledger-XXXXXX");
	return mkdtemp(state) ? 0 : -1;
}

static int drop_state(void **st)
{
	char cmd[128];

	(void)st;
	snprintf(cmd, sizeof cmd, "rm -rf %s", state);
	return system(cmd) == 0 ? 0 : -1;
}

static bool exists(const char *fmt, ...)
{
	char path[512], rel[256];
	struct stat sb;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rel, sizeof rel, fmt, ap);
	va_end(ap);
	snprintf(path, sizeof path, "%s/%s", state, rel);
	return stat(path, &sb) == 0;
}

static struct stat stat_of(const char *rel)
{
	char path[512];
	struct stat sb;

	snprintf(path, sizeof path, "%s/%s", state, rel);
	assert_int_equal(stat(path, &sb), 0);
	return sb;
}

static ino_t inode_of(const char *rel)
{
	return stat_of(rel).st_ino;
}

static void reused(void **st)
{
	struct ledger_pool pool;
	struct ledger l;
	bool existed = true;
	ino_t ino;

	(void)st;
	assert_int_equal(ledger_pool_open(&pool, state), 0);
	assert_true(exists("tools/free"));
	assert_int_equal(pool.n, 0);

	/* a new ledger, counted in, found again */
	assert_int_equal(ledger_open(&l, state, &pool, 1, LK_SESSION, &existed), 0);
	assert_false(existed);
	l.f->events = 5;
	l.f->gap = 2;
	ledger_close(&l, &pool, false);
	assert_int_equal(ledger_open(&l, state, &pool, 1, LK_SESSION, &existed), 0);
	assert_true(existed);
	assert_int_equal(l.f->events, 5);
	ledger_close(&l, &pool, false);
	ino = inode_of("tools/1-session.ledger");

	/* forgotten: into the pool (kinds it never had are no files) */
	ledger_forget(state, &pool, 1);
	assert_false(exists("tools/1-session.ledger"));
	assert_int_equal(pool.n, 1);
	assert_true(exists("tools/free/0.ledger"));
	assert_int_equal(stat_of("tools/free/0.ledger").st_size, 0);     /* (emptied: out of the cache) */

	/* the next new ledger is that file, fresh */
	assert_int_equal(ledger_open(&l, state, &pool, 2, LK_CHECKER, &existed), 0);
	assert_false(existed);
	assert_int_equal(pool.n, 0);
	assert_false(exists("tools/free/0.ledger"));
	assert_int_equal(inode_of("tools/2-checker.ledger"), ino);
	assert_int_equal(l.f->events, 0);
	assert_int_equal(l.f->gap, 0);
	assert_int_equal(l.f->instance, 2);
	assert_int_equal(l.f->kind, LK_CHECKER);

	/* removed on close: into the pool too */
	l.f->events = 9;
	ledger_close(&l, &pool, true);
	assert_false(exists("tools/2-checker.ledger"));
	assert_int_equal(pool.n, 1);
	assert_true(exists("tools/free/1.ledger"));
	assert_int_equal(stat_of("tools/free/1.ledger").st_size, 0);

	/* the pool is found again, and goes on numbering after it */
	ledger_pool_close(&pool);
	assert_int_equal(ledger_pool_open(&pool, state), 0);
	assert_int_equal(pool.n, 1);
	assert_int_equal(pool.next, 2);

	/* empty: a file is created */
	assert_int_equal(ledger_open(&l, state, &pool, 3, LK_SESSION, &existed), 0);
	assert_false(existed);
	ledger_close(&l, &pool, false);
	assert_int_equal(ledger_open(&l, state, &pool, 4, LK_SESSION, &existed), 0);
	assert_false(existed);
	assert_int_equal(pool.n, 0);
	assert_int_not_equal(inode_of("tools/4-session.ledger"), inode_of("tools/3-session.ledger"));
	ledger_close(&l, &pool, false);
	ledger_pool_close(&pool);
}

/* A crash right after a pooled file was renamed into place: the file holds
 * another instance's counts, and is read as new. */
static void crash_after_take(void **st)
{
	struct ledger_pool pool;
	struct ledger l;
	bool existed = false;
	char from[512], to[512];

	(void)st;
	assert_int_equal(ledger_pool_open(&pool, state), 0);
	assert_int_equal(ledger_open(&l, state, &pool, 10, LK_SESSION, &existed), 0);
	l.f->events = 77;
	ledger_close(&l, &pool, false);
	snprintf(from, sizeof from, "%s/tools/10-session.ledger", state);
	snprintf(to, sizeof to, "%s/tools/11-session.ledger", state);
	assert_int_equal(rename(from, to), 0);
	assert_int_equal(ledger_open(&l, state, &pool, 11, LK_SESSION, &existed), 0);
	assert_false(existed);
	assert_int_equal(l.f->events, 0);
	assert_int_equal(l.f->instance, 11);
	ledger_close(&l, &pool, false);
	/* the same file under the right name but another kind: new too */
	snprintf(from, sizeof from, "%s/tools/11-checker.ledger", state);
	assert_int_equal(rename(to, from), 0);
	assert_int_equal(ledger_open(&l, state, &pool, 11, LK_CHECKER, &existed), 0);
	assert_false(existed);
	ledger_close(&l, &pool, false);
	ledger_pool_close(&pool);
}

/* The same instance again on this node (a telemonctl stop and start; an
 * instance handed over or taken over, then taken back): its forgotten
 * files hold the counts of the earlier hold, and the store's row is newer
 * than they are. Whichever file it gets (its own from the pool, or one
 * left in place by a crash during the take), it starts afresh. */
static void same_instance_again(void **st)
{
	struct ledger_pool pool;
	struct ledger l, c;
	bool existed = true;
	char from[512], to[512];

	(void)st;
	assert_int_equal(ledger_pool_open(&pool, state), 0);
	/* forgotten by id (the instance ended, or was taken over) */
	assert_int_equal(ledger_open(&l, state, &pool, 30, LK_SESSION, &existed), 0);
	assert_int_equal(ledger_open(&c, state, &pool, 30, LK_CHECKER, &existed), 0);
	l.f->events = c.f->events = 330;
	c.f->unchecked = 7;
	ledger_close(&l, &pool, false);
	ledger_close(&c, &pool, false);
	ledger_forget(state, &pool, 30);
	assert_int_equal(pool.n, 2);
	assert_int_equal(ledger_open(&c, state, &pool, 30, LK_CHECKER, &existed), 0);
	assert_false(existed);
	assert_int_equal(c.f->events, 0);
	assert_int_equal(c.f->unchecked, 0);
	assert_int_equal(ledger_open(&l, state, &pool, 30, LK_SESSION, &existed), 0);
	assert_false(existed);
	assert_int_equal(l.f->events, 0);
	/* removed on close */
	l.f->events = 12;
	ledger_close(&l, &pool, true);
	assert_int_equal(ledger_open(&l, state, &pool, 30, LK_SESSION, &existed), 0);
	assert_false(existed);
	assert_int_equal(l.f->events, 0);
	ledger_close(&c, &pool, false);
	/* a crash between the take's rename and its first write: the file
	 * is in place, under its own old name */
	l.f->events = 44;
	ledger_close(&l, &pool, false);
	ledger_forget(state, &pool, 30);
	snprintf(from, sizeof from, "%s/tools/free/%" PRIu64 ".ledger", state,
		 pool.names[pool.n - 1]);
	snprintf(to, sizeof to, "%s/tools/30-session.ledger", state);
	assert_int_equal(rename(from, to), 0);
	pool.n--;
	assert_int_equal(ledger_open(&l, state, &pool, 30, LK_SESSION, &existed), 0);
	assert_false(existed);
	assert_int_equal(l.f->events, 0);
	ledger_close(&l, &pool, false);
	ledger_pool_close(&pool);
}

static const char unread_hdr[] = "#cmon-ascii 1\n#fsread header\n";
static const char *const unread_w[] = { "1 A 1\n2 B 1\n", "3 A 2\n", "4 B 2\n5 A 3\n6 B 3\n" };

/* A new ledger `id` with one run given the header, then each write of
 * unread_w, counted as the tool is given them; the bytes into `all`. */
static size_t run_of(struct ledger *l, uint64_t id, char *all)
{
	size_t len = 0;
	bool existed;

	assert_int_equal(ledger_open(l, state, NULL, id, LK_SHELL, &existed), 0);
	/* a run of a process (its group: ours here), whose pipe may hold
	 * writes back: the ledger keeps their boundaries */
	ledger_run(l, getpgrp(), CMON__FORMAT__FORMAT_ASCII);
	for (int i = -1; i < 3; i++) {
		const char *p = i < 0 ? unread_hdr : unread_w[i];
		struct cmon_tally t = { 0 };
		cmon_log_tally(CMON__FORMAT__FORMAT_ASCII, (const uint8_t *)p, strlen(p), SIZE_MAX, &t);
		ledger_write(l, &t, strlen(p));
		memcpy(all + len, p, strlen(p));
		len += strlen(p);
	}
	assert_int_equal(l->f->events, 6);
	return len;
}

/* A run's last bytes read back unread (ledger_unread): the records taken
 * off, and where whole writes of the log's body begin, fit to be given
 * to the next run (never the header, never the part of a write the tool
 * had begun). */
static void unread_whole(void **st)
{
	char all[256];
	size_t len, h = sizeof unread_hdr - 1, whole, at;
	struct ledger l;

	(void)st;
	/* it read one line of the header: the body is whole, from its start */
	len = run_of(&l, 40, all);
	assert_int_equal(ledger_unread(&l, (const uint8_t *)all + 14, len - 14, h, &whole), 6);
	assert_int_equal(whole, h - 14);
	assert_int_equal(l.f->events, 0);
	assert_int_equal(l.f->run_bytes, 14);
	ledger_close(&l, NULL, true);

	/* it stopped inside the third write: the rest of that write is lost
	 * (its line begun, and the lines after it in the same write) */
	len = run_of(&l, 41, all);
	at = len - strlen(unread_w[2]) + 2;     /* two bytes into "4 B 2" */
	assert_int_equal(ledger_unread(&l, (const uint8_t *)all + at, len - at, h, &whole), 3);
	assert_int_equal(whole, len - at);      /* the write was begun: nothing whole */
	assert_int_equal(l.f->events, 3);
	ledger_close(&l, NULL, true);

	/* it stopped right after the first write: all the rest is whole */
	len = run_of(&l, 42, all);
	at = h + strlen(unread_w[0]);
	assert_int_equal(ledger_unread(&l, (const uint8_t *)all + at, len - at, h, &whole), 4);
	assert_int_equal(l.f->run_bytes, at);
	assert_int_equal(whole, 0);
	assert_int_equal(l.f->events, 2);
	ledger_close(&l, NULL, true);
}

/* A session's ledger and an in-process checker's are given thousands of
 * writes but keep no write boundaries: nothing can be held back in a pipe
 * for them, and the pages of the file that hold the boundaries are never
 * written, so never in memory (16 KiB a ledger). */
static void no_boundaries_without_pipe(void **st)
{
	struct ledger l[2];
	struct cmon_tally t = { .events = 100 };
	bool existed;

	(void)st;
	assert_int_equal(ledger_open(&l[0], state, NULL, 50, LK_SESSION, &existed), 0);
	assert_int_equal(ledger_open(&l[1], state, NULL, 50, LK_CHECKER, &existed), 0);
	ledger_run(&l[0], 0, CMON__FORMAT__FORMAT_ASCII);
	ledger_run_inproc(&l[1], CMON__FORMAT__FORMAT_ASCII);
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < 3 * LEDGER_CHUNKS; i++)
			ledger_write(&l[k], &t, 3500);
		ledger_unwrite(&l[k], &t, 3500);
		assert_int_equal(l[k].f->events, (3 * LEDGER_CHUNKS - 1) * 100);
		assert_int_equal(l[k].f->run_bytes, (3 * LEDGER_CHUNKS - 1) * 3500ull);
		assert_int_equal(l[k].f->nchunks, 0);
		for (int i = 0; i < LEDGER_CHUNKS; i++)
			assert_int_equal(l[k].f->chunk_end[i], 0);
		ledger_close(&l[k], NULL, true);
	}
}

/* No pool: files are created and deleted. */
static void without_pool(void **st)
{
	struct ledger l;
	bool existed = true;

	(void)st;
	assert_int_equal(ledger_open(&l, state, NULL, 20, LK_SHELL, &existed), 0);
	assert_false(existed);
	ledger_close(&l, NULL, false);
	assert_true(exists("tools/20-tool.ledger"));
	ledger_forget(state, NULL, 20);
	assert_false(exists("tools/20-tool.ledger"));
	assert_int_equal(ledger_open(&l, state, NULL, 21, LK_SHELL, &existed), 0);
	ledger_close(&l, NULL, true);
	assert_false(exists("tools/21-tool.ledger"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(reused, make_state, drop_state),
		cmocka_unit_test_setup_teardown(crash_after_take, make_state, drop_state),
		cmocka_unit_test_setup_teardown(same_instance_again, make_state, drop_state),
		cmocka_unit_test_setup_teardown(unread_whole, make_state, drop_state),
		cmocka_unit_test_setup_teardown(no_boundaries_without_pipe, make_state, drop_state),
		cmocka_unit_test_setup_teardown(without_pool, make_state, drop_state),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
