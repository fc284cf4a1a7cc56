/* The telemonitor's sqlite store (see store.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "backlog.h"
#include "cmon/backoff.h"
#include "cmon/log.h"
#include "store.h"
#include "store-internal.h"
#include "store_sql.h"

/* Key of the one held "active classes" write and the one held reap. */
#define KEY_ALL UINT64_MAX


static const char *state_names[] = {
	[IS_LISTED] = "listed", [IS_MONITORING] = "monitoring", [IS_RETRYING] = "retrying",
	[IS_BUSY] = "busy", [IS_STOPPED] = "stopped", [IS_ENDED] = "ended", [IS_GONE] = "gone",
};

const char *inst_state_name(enum inst_state st)
{
	return (unsigned)st < sizeof state_names / sizeof *state_names ? state_names[st] : "?";
}

static enum inst_state state_from_name(const char *s)
{
	for (size_t i = 0; i < sizeof state_names / sizeof *state_names; i++)
		if (s && !strcmp(s, state_names[i]))
			return (enum inst_state)i;
	return IS_LISTED;
}

static int db_fail(struct store *st, const char *what)
{
	cmon_err("store: %s: %s", what, db_errmsg(st->c.db));
	return -EIO;
}

/* --- the connection ------------------------------------------------------------ */

static void at_least(uint64_t *next, uint64_t v)
{
	if (*next < v)
		*next = v;
}

/* The ids handed out go on from the database's, and never back. */
static void init_ids(struct store *st)
{
	struct conn *c = &st->c;
	uint64_t cls = st->next_class;

	at_least(&st->next_window, conn_u64(c, "SELECT coalesce(max(id), 0) + 1 FROM windows"));
	at_least(&st->next_window, conn_u64(c, "SELECT coalesce(max(window_id), 0) + 1 FROM failures"));
	at_least(&st->next_failure, conn_u64(c, "SELECT coalesce(max(id), 0) + 1 FROM failures"));
	at_least(&st->next_instance, conn_u64(c, "SELECT coalesce(max(id), 0) + 1 FROM instances"));
	at_least(&st->next_mail, conn_u64(c, "SELECT coalesce(max(id), 0) + 1 FROM mail_queue"));
	if (db_engine(c->db) == DB_SQLITE)  /* ids of mails sent and deleted are not reused */
		at_least(&st->next_mail, conn_u64(c, "SELECT coalesce(max(seq), 0) + 1 FROM"
						  " sqlite_sequence WHERE name = 'mail_queue'"));
	at_least(&st->next_alert, conn_u64(c, "SELECT coalesce(max(id), 0) + 1 FROM alert_outbox"));
	at_least(&st->next_silence, conn_u64(c, "SELECT coalesce(max(id), 0) + 1 FROM silences"));
	at_least(&cls, conn_u64(c, "SELECT coalesce(max(id), 0) + 1 FROM classes"));
	st->next_class = (uint32_t)cls;
}

struct store *store_open(const char *dir, const char *target, char *err, size_t errlen)
{
	struct store *st = calloc(1, sizeof *st);
	int n;

	if (!st) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	TAILQ_INIT(&st->journal);
	TAILQ_INIT(&st->pending);
	TAILQ_INIT(&st->to_pack);
	backlog_init(&st->bl, STORE_BACKLOG_DEFAULT, STORE_BACKLOG_BYTES);
	if (!db_target_embedded(target))
		n = snprintf(st->path, sizeof st->path, "%s", target);
	else
		n = snprintf(st->path, sizeof st->path, "%s/telemonitor.db", dir);
	if (n < 0 || (size_t)n >= sizeof st->path) {
		snprintf(err, errlen, "%s: too long", !db_target_embedded(target) ? "store" : dir);
		free(st);
		return NULL;
	}
	if (conn_open(&st->c, st->path, err, errlen) < 0) {
		free(st);
		return NULL;
	}
	init_ids(st);
	/* without the memory for a packer, windows are stored as text */
	if (db_engine(st->c.db) == DB_SQLITE)
		st->pack = wtext_new();
	return st;
}

struct db *store_conn(struct store *st)
{
	return st->c.db;
}

const char *store_engine(const struct store *st)
{
	return db_engine_name(st->c.db);
}

int store_version(struct store *st)
{
	return st->c.version;
}

bool store_pending(const struct store *st)
{
	return st->in_batch || !TAILQ_EMPTY(&st->pending) || !TAILQ_EMPTY(&st->to_pack);
}

bool store_degraded(const struct store *st)
{
	return st->degraded;
}

void store_set_backlog(struct store *st, size_t max_failures)
{
	if (max_failures < 1)
		max_failures = 1;
	if (max_failures > STORE_BACKLOG_MAX)
		max_failures = STORE_BACKLOG_MAX;
	st->bl.max_failures = max_failures;
}

void store_set_commit_cb(struct store *st, store_commit_cb cb, void *arg)
{
	st->on_commit = cb;
	st->on_commit_arg = arg;
}

void store_set_reopen_cb(struct store *st, store_reopen_cb cb, void *arg)
{
	st->on_reopen = cb;
	st->on_reopen_arg = arg;
}

/* --- faults ------------------------------------------------------------------- */

/* True if the database is lost: the file deleted or replaced since it
 * was opened, or the server's connection gone (db_lost()). */
static bool moved(struct store *st)
{
	return st->c.db && db_lost(st->c.db);
}

/* Say why the store cannot write, from what the engine said. */
static void set_reason(struct store *st, const char *what)
{
	if (st->forced_reason) {
		snprintf(st->reason, sizeof st->reason, "%s", st->forced_reason);
		snprintf(st->detail, sizeof st->detail, "this node could not renew its leases for "
			 "%.1f s (the lease is %.0f s)", STORE_LEASE_S - 0.5, STORE_LEASE_S);
		st->forced_reason = NULL;
		return;
	}
	if (!st->c.db) {
		snprintf(st->reason, sizeof st->reason, "cannot open the database");
		snprintf(st->detail, sizeof st->detail, "while %s: no connection", what);
		return;
	}
	db_fault(st->c.db, what, st->reason, sizeof st->reason, st->detail, sizeof st->detail);
}

static uint64_t sum(const uint64_t *v)
{
	uint64_t n = 0;

	for (int k = 0; k < BK_NKINDS; k++)
		n += v[k];
	return n;
}

/* Hold `it` (taken) in the backlog; the first drop of an outage is told. */
static void hold(struct store *st, struct bl_item *it)
{
	backlog_push(&st->bl, it);
	if (!st->drop_told && sum(st->bl.dropped) > sum(st->base_dropped)) {
		st->drop_told = true;
		cmon_err("store degraded: backlog full (%zu failures, %u MiB): dropping the oldest "
			 "held writes, counted in telemonctl status", st->bl.max_failures,
			 STORE_BACKLOG_BYTES >> 20);
	}
}

/* The database cannot take writes: roll the open batch back and hold its
 * writes, then `it` (may be NULL), in the backlog. */
static void degrade(struct store *st, struct bl_item *it, const char *what)
{
	bool had_batch = st->in_batch || !TAILQ_EMPTY(&st->journal);
	struct bl_item *j;
	double now = tm_now();

	set_reason(st, what);                      /* before ROLLBACK clears the message */
	if (st->c.db && db_in_transaction(st->c.db))
		db_exec(st->c.db, "ROLLBACK");
	st->in_batch = false;
	if (!st->degraded) {
		st->degraded = true;
		st->since = now;
		st->attempts = 0;
		st->next_retry = now + STORE_RETRY_MIN_S;
		st->last_report = now;
		st->drop_told = false;
		memcpy(st->base_pushed, st->bl.pushed, sizeof st->base_pushed);
		memcpy(st->base_dropped, st->bl.dropped, sizeof st->base_dropped);
		st->outages++;
		cmon_err("store degraded: %s (%s): holding writes in memory (at most %zu "
			 "failures, %u MiB), retrying every %.0f to %.0f s", st->reason, st->detail,
			 st->bl.max_failures, STORE_BACKLOG_BYTES >> 20, STORE_RETRY_MIN_S,
			 STORE_RETRY_MAX_S);
	}
	while ((j = TAILQ_FIRST(&st->journal))) {
		TAILQ_REMOVE(&st->journal, j, link);
		hold(st, j);
	}
	while ((j = TAILQ_FIRST(&st->pending))) {
		TAILQ_REMOVE(&st->pending, j, link);
		hold(st, j);
	}
	if (it)
		hold(st, it);
	if (had_batch && st->on_commit)
		st->on_commit(st->on_commit_arg, false);
}

/* Run item `it` on the connection: DB_DONE, DB_FAULT or DB_REFUSED. */
static enum db_rc apply(struct store *st, const struct bl_item *it)
{
	struct db_stmt *q = st->c.stmt[it->stmt];
	enum db_rc rc = db_run(q, it->v, it->nvals);

	db_reset(q);
	return rc == DB_ROW ? DB_DONE : rc;
}

/* Step a statement without values (BEGIN, COMMIT). */
static enum db_rc step0(struct store *st, enum store_stmt s)
{
	struct bl_item it = { .stmt = s };

	return apply(st, &it);
}

/* Open the batch transaction if it is not open yet; -EAGAIN if the store
 * became degraded. */
static int batch(struct store *st)
{
	if (st->in_batch)
		return 0;
	if (moved(st) || step0(st, ST_BEGIN) != DB_DONE) {
		degrade(st, NULL, "starting a batch");
		return -EAGAIN;
	}
	st->in_batch = true;
	return 0;
}

/* PostgreSQL: a refused write aborted the open batch. Begin it again and
 * run its journal (which went in before) once more. 0, or -EAGAIN if the
 * store became degraded (the journal is then held). */
static int rebatch(struct store *st)
{
	struct bl_item *j;

	db_exec(st->c.db, "ROLLBACK");
	st->in_batch = false;
	if (batch(st) < 0)
		return -EAGAIN;
	TAILQ_FOREACH(j, &st->journal, link)
		if (apply(st, j) != DB_DONE) {
			degrade(st, NULL, "running a batch again");
			return -EAGAIN;
		}
	return 0;
}

/* Write `it` (taken): now, in the open batch, or held while degraded. 0
 * (written or held), -ENOMEM (it could not be made), or -EIO (the
 * database refused this write; logged). */
static int put(struct store *st, struct bl_item *it, const char *what)
{
	enum db_rc rc;

	if (!it) {
		st->rejected++;
		cmon_err("store: out of memory: %s is lost", what);
		return -ENOMEM;
	}
	if (st->degraded) {
		hold(st, it);
		return 0;
	}
	if (st->shared || it->kind == BK_FAILURE) {
		/* made at the commit. Shared: in one transaction that no loop
		 * turn leaves open, so a node stopped or starved between two
		 * turns holds no lock another node's claim would wait for.
		 * Failures: one after the other, while the b-trees of the
		 * table, its indexes and its counts stay warm */
		TAILQ_INSERT_TAIL(&st->pending, it, link);
		return 0;
	}
	if (batch(st) < 0) {
		hold(st, it);
		return 0;
	}
	rc = apply(st, it);
	if (rc == DB_DONE) {
		TAILQ_INSERT_TAIL(&st->journal, it, link);
		return 0;
	}
	if (rc == DB_FAULT) {
		degrade(st, it, what);
		return 0;
	}
	cmon_err("store: %s: %s", what, db_errmsg(st->c.db));
	st->rejected++;
	bl_item_free(it);
	if (db_error_aborts(st->c.db))
		rebatch(st);
	return -EIO;
}

static void free_items(struct bl_list *l)
{
	struct bl_item *j;

	while ((j = TAILQ_FIRST(l))) {
		TAILQ_REMOVE(l, j, link);
		bl_item_free(j);
	}
}

/* Make the pending writes in the open batch (opening it).
 * A write refused for a reason of its own is dropped (logged), the batch
 * begun again with what went in before. 0, or -EAGAIN (degraded: all of
 * them held). */
static int flush_pending(struct store *st)
{
	struct bl_item *it;
	enum db_rc rc;

	while ((it = TAILQ_FIRST(&st->pending))) {
		if (batch(st) < 0)
			return -EAGAIN;
		TAILQ_REMOVE(&st->pending, it, link);
		rc = apply(st, it);
		if (rc == DB_DONE) {
			TAILQ_INSERT_TAIL(&st->journal, it, link);
			continue;
		}
		if (rc == DB_FAULT) {
			degrade(st, it, "writing a batch");
			return -EAGAIN;
		}
		cmon_err("store: a %s cannot be stored and is dropped: %s",
			 backlog_kind_name(it->kind), db_errmsg(st->c.db));
		st->rejected++;
		bl_item_free(it);
		if (db_error_aborts(st->c.db) && rebatch(st) < 0)
			return -EAGAIN;
	}
	return 0;
}

/* Shared store: this node holds leases it has not been able to renew for
 * nearly a lease: whatever it would write now may belong to an instance
 * another node is about to take, so it writes nothing and holds its
 * writes (the fence would refuse them for an instance taken meanwhile). */
static bool leases_unsure(struct store *st)
{
	return st->shared && fleet_holds(st) && !store_lease_safe(st);
}

static void pack_windows(struct store *st);

int store_commit(struct store *st)
{
	pack_windows(st);
	if (!TAILQ_EMPTY(&st->pending) && leases_unsure(st)) {
		st->forced_reason = "leases not renewed";
		degrade(st, NULL, "renewing the leases");
		return -EAGAIN;
	}
	if (!TAILQ_EMPTY(&st->pending) && flush_pending(st) < 0)
		return -EAGAIN;
	if (!st->in_batch)
		return st->degraded ? -EAGAIN : 0;
	if (step0(st, ST_COMMIT) != DB_DONE) {
		degrade(st, NULL, "committing");
		return -EAGAIN;
	}
	st->in_batch = false;
	if (db_commit_lost(st->c.db)) {
		/* committed to a file nobody will read again */
		degrade(st, NULL, "committing");
		return -EAGAIN;
	}
	free_items(&st->journal);
	if (st->shared)
		fleet_ended(st);
	if (st->on_commit)
		st->on_commit(st->on_commit_arg, true);
	return 0;
}

int store_flush(struct store *st)
{
	if (st->shared)
		return store_commit(st);        /* its writes are made at a commit only */
	if (st->degraded)
		return 0;
	pack_windows(st);
	return flush_pending(st);
}

/* The next retry: STORE_RETRY_MIN_S doubling to STORE_RETRY_MAX_S with
 * the attempts of this outage, moved by up to 20% (cmon_backoff), so that
 * nodes of one database do not all come back in the same instant. */
static void schedule(struct store *st, double now)
{
	struct cmon_backoff b = { .min_ms = (unsigned)(STORE_RETRY_MIN_S * 1000),
				  .max_ms = (unsigned)(STORE_RETRY_MAX_S * 1000),
				  .jitter_pct = 20,
				  .failures = st->attempts ? st->attempts - 1 : 0 };

	st->next_retry = now + cmon_backoff_next(&b) / 1000.0;
}

/* The database is lost: a sqlite file vanished (or was replaced), or the
 * PostgreSQL connection is gone. Open it again: a sqlite file at its path
 * (the vanished one's -wal and -shm must not be taken for the new one's),
 * or a new connection to the server. */
static int reopen(struct store *st)
{
	char err[PATH_MAX + 300];
	struct conn nc;
	bool pg = db_engine(st->c.db) == DB_POSTGRES;

	if (!pg)
		db_sqlite_clear_sidecars(st->c.db, st->path);
	if (conn_open(&nc, st->path, err, sizeof err) < 0) {
		snprintf(st->reason, sizeof st->reason, pg ? "server gone" : "database deleted");
		snprintf(st->detail, sizeof st->detail, "cannot open %s: %.250s",
			 pg ? "a new connection" : "a new one", err);
		return -EIO;
	}
	conn_close(&st->c);
	st->c = nc;
	st->in_batch = false;
	init_ids(st);
	if (pg)
		cmon_notice("store: connected to %s again", db_target(st->c.db));
	else
		cmon_warn("store: %s was deleted or replaced; opened %s database there", st->path,
			  nc.fresh ? "a new" : "the");
	if (st->on_reopen)
		st->on_reopen(st->on_reopen_arg);
	return 0;
}

/* A flush failed: roll back and put its writes back at the front. */
static void unflush(struct store *st, const char *what)
{
	set_reason(st, what);
	if (st->c.db && db_in_transaction(st->c.db))
		db_exec(st->c.db, "ROLLBACK");
	backlog_unshift(&st->bl, &st->journal);
}

/* Everything held was stored: record the outage, say so. */
static void recovered(struct store *st, double now)
{
	uint64_t writes = sum(st->bl.pushed) - sum(st->base_pushed);
	uint64_t fails = st->bl.pushed[BK_FAILURE] - st->base_pushed[BK_FAILURE];
	uint64_t dropped = sum(st->bl.dropped) - sum(st->base_dropped);
	uint64_t dfails = st->bl.dropped[BK_FAILURE] - st->base_dropped[BK_FAILURE];
	struct bl_value v[] = {
		{ .type = BV_REAL, .d = st->since }, { .type = BV_REAL, .d = now },
		{ .type = BV_TEXT, .s = st->reason, .n = strlen(st->reason) },
		{ .type = BV_TEXT, .s = st->detail, .n = strlen(st->detail) },
		{ .type = BV_INT, .i = (int64_t)writes }, { .type = BV_INT, .i = (int64_t)fails },
		{ .type = BV_INT, .i = (int64_t)dropped }, { .type = BV_INT, .i = (int64_t)dfails },
	};

	st->degraded = false;
	cmon_notice("store recovered after %.0f s (%s): %" PRIu64 " held writes stored "
		    "(%" PRIu64 " failures), %" PRIu64 " dropped (%" PRIu64 " failures)",
		    now - st->since, st->reason, writes - dropped, fails - dfails, dropped, dfails);
	put(st, bl_item_new(BK_OUTAGE, ST_OUTAGE_INSERT, 0, v, 8), "recording an outage");
	st->reason[0] = st->detail[0] = '\0';
	st->since = st->next_retry = 0;
	st->attempts = 0;
}

/* Give the journal's space back (db_compact), now and every
 * STORE_COMPACT_S. A failure is left to the next write to notice. */
static void compact(struct store *st, double now)
{
	st->next_compact = now + STORE_COMPACT_S;
	if (!st->in_batch && db_compact(st->c.db) != DB_DONE)
		cmon_debug("store: compacting the journal: %s", db_errmsg(st->c.db));
}

int store_retry(struct store *st, double now)
{
	struct bl_item *it;
	enum db_rc rc = DB_DONE;

	if (!st->degraded)
		return 0;
	st->attempts++;
	schedule(st, now);
	if (leases_unsure(st))
		return -EAGAIN;
	if (moved(st) && reopen(st) < 0)
		return -EAGAIN;
	while (backlog_first(&st->bl)) {
		size_t n = 0, bytes = 0;
		if (step0(st, ST_BEGIN) != DB_DONE) {
			unflush(st, "retrying");
			return -EAGAIN;
		}
		while ((it = backlog_first(&st->bl)) && n < STORE_FLUSH_ITEMS &&
		       bytes < STORE_FLUSH_BYTES) {
			rc = apply(st, it);
			backlog_remove(&st->bl, it);
			if (rc == DB_DONE) {
				TAILQ_INSERT_TAIL(&st->journal, it, link);
				n++;
				bytes += it->bytes;
			} else if (rc == DB_FAULT) {
				TAILQ_INSERT_TAIL(&st->journal, it, link);
				unflush(st, "storing held writes");
				return -EAGAIN;
			} else {
				/* this one will never go in (a constraint, ...) */
				cmon_err("store: a held %s cannot be stored and is dropped: %s",
					 backlog_kind_name(it->kind), db_errmsg(st->c.db));
				st->bl.dropped[it->kind]++;
				st->rejected++;
				bl_item_free(it);
				if (db_error_aborts(st->c.db))
					break;      /* the rest of this batch, again */
			}
		}
		if (db_error_aborts(st->c.db) && rc == DB_REFUSED) {
			db_exec(st->c.db, "ROLLBACK");
			backlog_unshift(&st->bl, &st->journal);
			continue;
		}
		if (step0(st, ST_COMMIT) != DB_DONE) {
			unflush(st, "committing held writes");
			return -EAGAIN;
		}
		if (db_commit_lost(st->c.db)) {
			unflush(st, "committing held writes");
			st->next_retry = now;       /* reopen at once */
			return -EAGAIN;
		}
		free_items(&st->journal);
	}
	if (st->shared)
		fleet_ended(st);
	recovered(st, now);
	compact(st, now);        /* the held writes' WAL must not fill a small disk again */
	return 0;
}

void store_poll(struct store *st, double now)
{
	if (!st->degraded && now >= st->next_check) {
		st->next_check = now + STORE_CHECK_S;
		if (!st->in_batch && moved(st))
			degrade(st, NULL, "checking the database");
	}
	if (!st->degraded && !st->in_batch && now >= st->next_compact)
		compact(st, now);
	if (!st->degraded)
		return;
	if (now >= st->next_retry)
		store_retry(st, now);
	if (st->degraded && now - st->last_report >= STORE_REPORT_S) {
		char line[400];
		st->last_report = now;
		cmon_err("store still %s for %.0f s; next retry in %.0f s", store_health_line(st, line,
			 sizeof line), now - st->since, st->next_retry > now ? st->next_retry - now : 0);
	}
}

void store_health(const struct store *st, struct store_health *h)
{
	memset(h, 0, sizeof *h);
	h->engine = db_engine_name(st->c.db);
	h->node = st->shared ? st->node : NULL;
	h->degraded = st->degraded;
	h->reason = st->reason;
	h->detail = st->detail;
	h->since = st->since;
	h->next_retry = st->next_retry;
	h->attempts = st->attempts;
	h->pending = st->bl.total;
	h->pending_failures = st->bl.count[BK_FAILURE];
	h->pending_bytes = st->bl.bytes;
	h->limit = st->bl.max_failures;
	h->dropped = sum(st->bl.dropped);
	h->dropped_failures = st->bl.dropped[BK_FAILURE];
	h->dropped_mail = st->bl.dropped[BK_MAIL];
	h->outages = st->outages;
	h->rejected = st->rejected;
}

const char *store_health_line(const struct store *st, char *buf, size_t size)
{
	uint64_t dropped = sum(st->bl.dropped), dfails = st->bl.dropped[BK_FAILURE];

	if (!st->degraded)
		snprintf(buf, size, "ok");
	else
		snprintf(buf, size, "degraded: %s; %zu failure%s pending (%zu writes), %" PRIu64
			 " dropped (%" PRIu64 " failure%s)", st->reason, st->bl.count[BK_FAILURE],
			 st->bl.count[BK_FAILURE] == 1 ? "" : "s", st->bl.total, dropped, dfails,
			 dfails == 1 ? "" : "s");
	return buf;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	if (store_pending(st))
		store_commit(st);
	/* (a recovery writes the outage's row: committed too) */
	if (st->degraded && store_retry(st, tm_now()) == 0 && store_pending(st))
		store_commit(st);
	if (st->degraded && st->bl.total)
		cmon_err("store still degraded at exit (%s): %zu held writes (%zu failures) are lost",
			 st->reason, st->bl.total, st->bl.count[BK_FAILURE]);
	backlog_clear(&st->bl);
	free_items(&st->journal);
	free_items(&st->pending);
	free_items(&st->to_pack);
	fleet_close(st);
	conn_close(&st->c);
	wtext_free(st->pack);
	free(st);
}

/* --- ids ---------------------------------------------------------------------- */

/* Take the next block of ids (shared store): block b is
 * [b * STORE_ID_BLOCK, (b + 1) * STORE_ID_BLOCK). 0, or -EAGAIN. */
static int take_block(struct store *st)
{
	struct db_stmt *q = st->c.stmt[ST_ID_BLOCK];
	enum db_rc rc = db_run(q, NULL, 0);
	int64_t b = rc == DB_ROW ? db_col_int(q, 0) : 0;

	db_reset(q);
	if (b <= 0)
		return -EAGAIN;
	st->block_next = (uint64_t)b * STORE_ID_BLOCK;
	st->block_end = st->block_next + STORE_ID_BLOCK;
	return 0;
}

/* A new id: from this telemonitor's block on a shared store (a new block
 * is taken once half of it is used, so that an outage, whose held writes
 * are bounded far below a block, never runs out), else from the local
 * counter `*local`. */
static uint64_t new_id(struct store *st, uint64_t *local)
{
	if (!st->shared)
		return (*local)++;
	if (st->block_next - (st->block_end - STORE_ID_BLOCK) >= STORE_ID_BLOCK / 2 &&
	    !st->degraded) {
		uint64_t next = st->block_next, end = st->block_end;
		if (take_block(st) < 0) {
			st->block_next = next;       /* go on in the old block; try again later */
			st->block_end = end;
		}
	}
	return st->block_next++;
}

/* --- writes ------------------------------------------------------------------- */

#define NV(v) ((unsigned)(sizeof(v) / sizeof((v)[0])))

/* Two places at the end of an instance's write for its fence (fleet_fence). */
#define FENCE_SLOT { .type = BV_NULL }

/* This telemonitor's node name for the rows of mail and alerts it queues
 * (and sends) on a shared store, else NULL. */
static struct bl_value mine(const struct store *st)
{
	return st->shared ? db_vtext(st->node) : db_vnull();
}

/* The id of a class without one: the stored class's with its key, else new. */
static void class_id(struct store *st, struct tm_class *c)
{
	struct db_stmt *q = st->c.stmt[ST_CLASS_KEY];
	struct bl_value v[] = { db_vtext(c->prog), db_vtext(c->machine), db_vtext(c->pid) };

	if (db_run(q, v, NV(v)) == DB_ROW)
		c->id = (uint32_t)db_col_int(q, 0);
	db_reset(q);
	if (!c->id)
		c->id = st->next_class++;
	else if (c->id >= st->next_class)
		st->next_class = c->id + 1;
}

/* PostgreSQL (several telemonitors may save the same class at once, from
 * one telemonrc): by its key, at once, its id from the server's row or
 * sequence; so every node gets the same id. */
static int class_put_pg(struct store *st, struct tm_class *c)
{
	struct db_stmt *q = st->c.stmt[ST_CLASS_PUT];
	struct bl_value v[] = {
		db_vtext(c->prog), db_vtext(c->machine), db_vtext(c->pid), db_vtext(c->tool),
		db_vtext(c->spec), db_vtext(c->mail), db_vtext(c->window_text),
		db_vreal(c->mailgroup), db_vint(c->block), db_vint(c->autostart), db_vreal(tm_now()),
	};
	enum db_rc rc;

	if (st->degraded && c->id)          /* (held: its id is the row's already) */
		return put(st, bl_item_new(BK_CLASS, ST_CLASS_PUT, c->id, v, NV(v)),
			   "saving a class");
	rc = db_run(q, v, NV(v));
	if (rc == DB_ROW)
		c->id = (uint32_t)db_col_int(q, 0);
	db_reset(q);
	if (rc == DB_ROW)
		return 0;
	if (rc == DB_FAULT) {
		degrade(st, c->id ? bl_item_new(BK_CLASS, ST_CLASS_PUT, c->id, v, NV(v)) : NULL,
			"saving a class");
		return 0;
	}
	if (db_error_aborts(st->c.db) && st->in_batch)
		rebatch(st);
	return db_fail(st, "saving a class");
}

int store_class_save(struct store *st, struct tm_class *c)
{
	struct bl_value v[12];

	if (db_engine(st->c.db) == DB_POSTGRES && (!st->degraded || c->id))
		return class_put_pg(st, c);
	if (!c->id)
		class_id(st, c);
	v[0] = db_vint(c->id);
	v[1] = db_vtext(c->prog);
	v[2] = db_vtext(c->machine);
	v[3] = db_vtext(c->pid);
	v[4] = db_vtext(c->tool);
	v[5] = db_vtext(c->spec);
	v[6] = db_vtext(c->mail);
	v[7] = db_vtext(c->window_text);
	v[8] = db_vreal(c->mailgroup);
	v[9] = db_vint(c->block);
	v[10] = db_vint(c->autostart);
	v[11] = db_vreal(tm_now());
	return put(st, bl_item_new(BK_CLASS, ST_CLASS_PUT, c->id, v, NV(v)), "saving a class");
}

/* (sqlite reads the list with json_each, PostgreSQL with
 * json_array_elements_text: store_sql.c) */
char *store_id_list(const uint64_t *ids64, const uint32_t *ids32, size_t n)
{
	char *s = malloc(n * 21 + 3), *p = s;

	if (!s)
		return NULL;
	*p++ = '[';
	for (size_t i = 0; i < n; i++)
		p += sprintf(p, "%s%" PRIu64, i ? "," : "", ids64 ? ids64[i] : (uint64_t)ids32[i]);
	*p++ = ']';
	*p = '\0';
	return s;
}

int store_classes_keep(struct store *st, const uint32_t *keep, size_t n)
{
	char *list = store_id_list(NULL, keep, n);
	struct bl_value v[] = { db_vtext(list) };
	int r;

	if (!list)
		return put(st, NULL, "marking the active classes");
	r = put(st, bl_item_new(BK_CLASS, ST_CLASSES_KEEP, KEY_ALL, v, NV(v)),
		"marking the active classes");
	free(list);
	return r;
}

void store_lookup_row(struct db_stmt *q, struct tm_instance *in)
{
	in->id = (uint64_t)db_col_int(q, 0);
	in->bytes = (uint64_t)db_col_int(q, 1);
	in->records = (uint64_t)db_col_int(q, 2);
	in->lost = (uint64_t)db_col_int(q, 3);
	in->gaps = (uint64_t)db_col_int(q, 4);
	in->skipped = (uint64_t)db_col_int(q, 5);
	in->failures = (uint64_t)db_col_int(q, 6);
	in->tool_restarts = (unsigned)db_col_int(q, 7);
	in->want = db_col_int(q, 8) != 0;
	in->first_seen = db_col_real(q, 9);
	in->unchecked = (uint64_t)db_col_int(q, 10);
	in->checked = (uint64_t)db_col_int(q, 11);
}

int store_instance_lookup(struct store *st, struct tm_instance *in)
{
	struct db_stmt *q = st->c.stmt[ST_INST_LOOKUP];
	struct bl_value v[] = { db_vtext(in->prog), db_vtext(in->machine), db_vint(in->pid),
				db_vint(in->start_ns) };
	enum db_rc rc = db_run(q, v, NV(v));

	if (rc == DB_ROW)
		store_lookup_row(q, in);
	db_reset(q);
	if (rc != DB_ROW && rc != DB_DONE)
		return db_fail(st, "looking up an instance");
	return rc == DB_ROW;
}

/* The whole row of `in`, ended at `ended` (0: not ended). */
static int instance_put(struct store *st, const struct tm_instance *in, enum inst_state state,
			double ended, const char *what)
{
	struct bl_value v[] = {
		db_vint((int64_t)in->id), in->class_id ? db_vint(in->class_id) : db_vnull(),
		db_vtext(in->prog), db_vtext(in->machine), db_vint(in->pid), db_vint(in->start_ns),
		db_vtext(in->endpoint), db_vint(in->tls), db_vreal(in->first_seen),
		ended > 0 ? db_vreal(ended) : db_vnull(), db_vtext(inst_state_name(state)), db_vint(in->want),
		db_vint((int64_t)in->bytes), db_vint((int64_t)in->records), db_vint((int64_t)in->lost),
		db_vint((int64_t)in->gaps), db_vint((int64_t)in->skipped), db_vint((int64_t)in->failures),
		db_vint(in->tool_restarts), db_vtext(in->status),
		in->has_token ? db_vblob(in->token, CMON_TOKEN_LEN) : db_vnull(),
		in->version[0] ? db_vtext(in->version) : db_vnull(),
		db_vint((int64_t)in->unchecked), db_vint((int64_t)in->checked),
		FENCE_SLOT, FENCE_SLOT,
	};
	fleet_fence(st, in->id, &v[NV(v) - 2]);
	return put(st, bl_item_new(BK_INSTANCE, ST_INST_PUT, in->id, v, NV(v)), what);
}

int store_instance_insert(struct store *st, struct tm_instance *in)
{
	in->id = new_id(st, &st->next_instance);
	if (in->first_seen <= 0)
		in->first_seen = tm_now();
	return instance_put(st, in, in->state, 0, "adding an instance");
}

int store_instance_add(struct store *st, struct tm_instance *in)
{
	int r;

	if (in->first_seen <= 0)
		in->first_seen = tm_now();
	if (st->shared && !st->degraded)
		return store_instance_ensure(st, in, new_id(st, &st->next_instance));
	r = store_instance_lookup(st, in);
	if (r != 0)
		return r;
	return store_instance_insert(st, in) < 0 ? -EIO : 0;
}

int store_instance_save(struct store *st, const struct tm_instance *in)
{
	return instance_put(st, in, in->state, 0, "saving an instance");
}

int store_instance_end(struct store *st, const struct tm_instance *in, enum inst_state state,
		       double when)
{
	int r = instance_put(st, in, state, when, "ending an instance");

	if (st->shared)
		fleet_ending(st, in->id);
	return r;
}

static void copy_col(char *dst, size_t size, struct db_stmt *q, int col)
{
	const char *s = db_col_text(q, col);

	snprintf(dst, size, "%s", s ? s : "");
}

/* The instance in the current row of INST_OPEN or INST_ONE. */
static void row_instance(struct db_stmt *q, struct tm_instance *in)
{
	char state[32];
	size_t toklen;
	const void *tok;

	memset(in, 0, sizeof *in);
	in->id = (uint64_t)db_col_int(q, 0);
	in->class_id = (uint32_t)db_col_int(q, 1);
	copy_col(in->prog, sizeof in->prog, q, 2);
	copy_col(in->machine, sizeof in->machine, q, 3);
	in->pid = db_col_int(q, 4);
	in->start_ns = db_col_int(q, 5);
	copy_col(in->endpoint, sizeof in->endpoint, q, 6);
	in->tls = db_col_int(q, 7) != 0;
	copy_col(state, sizeof state, q, 8);
	in->state = state_from_name(state);
	in->want = db_col_int(q, 9) != 0;
	in->bytes = (uint64_t)db_col_int(q, 10);
	in->records = (uint64_t)db_col_int(q, 11);
	in->lost = (uint64_t)db_col_int(q, 12);
	in->gaps = (uint64_t)db_col_int(q, 13);
	in->skipped = (uint64_t)db_col_int(q, 14);
	in->failures = (uint64_t)db_col_int(q, 15);
	in->tool_restarts = (unsigned)db_col_int(q, 16);
	copy_col(in->status, sizeof in->status, q, 17);
	in->first_seen = db_col_real(q, 18);
	tok = db_col_blob(q, 19, &toklen);
	if (tok && toklen == CMON_TOKEN_LEN) {
		in->has_token = true;
		memcpy(in->token, tok, CMON_TOKEN_LEN);
	}
	copy_col(in->version, sizeof in->version, q, 21);
	in->unchecked = (uint64_t)db_col_int(q, 22);
	in->checked = (uint64_t)db_col_int(q, 23);
}

int store_instances_open(struct store *st, store_instance_cb cb, void *arg)
{
	struct db_stmt *q = st->c.stmt[ST_INST_OPEN];
	struct bl_value v[] = { st->shared ? db_vtext(st->node) : db_vnull() };
	enum db_rc rc;

	for (rc = db_run(q, v, NV(v)); rc == DB_ROW; rc = db_next(q)) {
		struct tm_instance in;
		row_instance(q, &in);
		cb(arg, &in);
	}
	db_reset(q);
	return rc == DB_DONE ? 0 : db_fail(st, "listing instances");
}

int store_instances_reap(struct store *st, const uint64_t *live, size_t n, double when)
{
	char *list = store_id_list(live, NULL, n);
	struct bl_value v[] = { db_vreal(when), db_vtext(list),
				st->shared ? db_vtext(st->node) : db_vnull() };
	int r;

	if (!list)
		return put(st, NULL, "marking instances gone");
	r = put(st, bl_item_new(BK_INSTANCE, ST_INST_REAP, KEY_ALL, v, NV(v)),
		"marking instances gone");
	free(list);
	return r;
}

const struct bl_value *store_held_instance(const struct store *st, uint64_t id, unsigned *n)
{
	const struct bl_item *it;

	if (!st->degraded || !(it = backlog_find(&st->bl, BK_INSTANCE, id)) ||
	    it->stmt != ST_INST_PUT)
		return NULL;
	*n = it->nvals;
	return it->v;
}

void store_held_instances(const struct store *st,
			  void (*cb)(void *arg, uint64_t id, const struct bl_value *v, unsigned n),
			  void *arg)
{
	const struct bl_item *it;

	if (!st->degraded)
		return;
	TAILQ_FOREACH(it, &st->bl.by_kind[BK_INSTANCE], kin)
		if (it->stmt == ST_INST_PUT)
			cb(arg, it->key, it->v, it->nvals);
}

int64_t store_held_failures(const struct store *st, uint64_t id)
{
	const struct bl_item *it;
	int64_t n = 0;

	if (!st->degraded)
		return 0;
	/* FAIL_INSERT's ?2 is the instance, ?6 the result */
	TAILQ_FOREACH(it, &st->bl.by_kind[BK_FAILURE], kin)
		if (it->stmt == ST_FAIL_INSERT && it->nvals > 5 && it->v[1].i == (int64_t)id &&
		    !(it->v[5].type == BV_TEXT && !strcmp(it->v[5].s, "inconclusive")))
			n++;
	return n;
}

int store_add_failure(struct store *st, const struct store_failure *f, uint64_t *id)
{
	uint64_t fid = new_id(st, &st->next_failure);
	struct bl_value v[] = {
		db_vint((int64_t)fid), db_vint((int64_t)f->instance_id), db_vtext(f->spec),
		db_vtext(f->assertion), db_vint(f->line), db_vtext(f->result), db_vtext(f->kind), db_vtext(f->type),
		f->uid >= 0 ? db_vint(f->uid) : db_vnull(), db_vtext(f->start), db_vtext(f->end),
		f->start_pos ? db_vint((int64_t)f->start_pos) : db_vnull(),
		f->end_pos ? db_vint((int64_t)f->end_pos) : db_vnull(),
		f->has_ts ? db_vint(f->start_ts) : db_vnull(), f->has_ts ? db_vint(f->end_ts) : db_vnull(),
		db_vreal(f->time), f->start_wall > 0 ? db_vreal(f->start_wall) : db_vnull(),
		db_vtext(f->metrics), f->window_id ? db_vint((int64_t)f->window_id) : db_vnull(),
		db_vint(f->report), f->silence_id ? db_vint((int64_t)f->silence_id) : db_vnull(),
		f->am_silence ? db_vtext(f->am_silence) : db_vnull(),
		FENCE_SLOT, FENCE_SLOT,
	};
	int r;

	fleet_fence(st, f->instance_id, &v[NV(v) - 2]);
	r = put(st, bl_item_new(BK_FAILURE, ST_FAIL_INSERT, 0, v, NV(v)), "adding a failure");

	if (r == 0)
		*id = fid;
	return r;
}

uint64_t store_next_window_id(struct store *st)
{
	return new_id(st, &st->next_window);
}

#define WINDOW_VALUES 8           /* store_add_window's values */

/* The windows added since the last commit, packed and written. */
static void pack_windows(struct store *st)
{
	struct bl_item *it;

	while ((it = TAILQ_FIRST(&st->to_pack))) {
		struct bl_value v[WINDOW_VALUES];
		const void *packed;
		size_t plen;
		TAILQ_REMOVE(&st->to_pack, it, link);
		if (wtext_pack(st->pack, it->v[5].s, it->v[5].n, &packed, &plen) != 1) {
			put(st, it, "adding a window");       /* as text */
			continue;
		}
		memcpy(v, it->v, sizeof v);
		v[5] = db_vblob(packed, plen);
		put(st, bl_item_new(BK_WINDOW, ST_WIN_INSERT, 0, v, NV(v)), "adding a window");
		bl_item_free(it);
	}
}

/* A window's text is stored packed where the store packs (sqlite) and it
 * gains: packed at the next commit, with the other windows of the batch
 * (pack_windows); held while degraded, it is held packed. */
int store_add_window(struct store *st, uint64_t id, uint64_t instance_id, uint64_t from,
		     uint64_t to, bool truncated, const char *text, size_t len)
{
	struct bl_value v[] = {
		db_vint((int64_t)id), db_vint((int64_t)instance_id), db_vint((int64_t)from),
		db_vint((int64_t)to), db_vint(truncated),
		{ .type = BV_TEXT, .s = text, .n = len > STORE_WINDOW_MAX ? STORE_WINDOW_MAX : len },
		FENCE_SLOT, FENCE_SLOT,
	};
	struct bl_item *it;

	_Static_assert(NV(v) == WINDOW_VALUES, "pack_windows copies them");
	fleet_fence(st, instance_id, &v[NV(v) - 2]);
	it = bl_item_new(BK_WINDOW, ST_WIN_INSERT, 0, v, NV(v));
	if (it && st->pack && v[5].n >= WTEXT_MIN) {
		TAILQ_INSERT_TAIL(&st->to_pack, it, link);     /* packed at the commit */
		return 0;
	}
	return put(st, it, "adding a window");
}

int store_add_verdict(struct store *st, uint64_t instance_id, const char *spec,
		      const char *assertion, int line, const char *result, int64_t offenders,
		      double time, uint64_t from, uint64_t to, bool partial)
{
	struct bl_value v[] = {
		db_vint((int64_t)instance_id), db_vtext(spec), db_vtext(assertion), db_vint(line),
		db_vtext(result), db_vint(offenders), db_vreal(time),
		from ? db_vint((int64_t)from) : db_vnull(), to ? db_vint((int64_t)to) : db_vnull(),
		db_vint(partial), FENCE_SLOT, FENCE_SLOT,
	};

	fleet_fence(st, instance_id, &v[NV(v) - 2]);
	return put(st, bl_item_new(BK_VERDICT, ST_VERDICT_INSERT, 0, v, NV(v)),
		   "adding a verdict");
}

int store_add_summary(struct store *st, uint64_t instance_id, double time, const char *type,
		      const char *metric, int64_t count, double sum, double sumsq, double min,
		      double max, const char *sketch)
{
	struct bl_value v[] = {
		db_vint((int64_t)instance_id), db_vreal(time), db_vtext(type), db_vtext(metric),
		db_vint(count), db_vreal(sum), db_vreal(sumsq), db_vreal(min), db_vreal(max),
		sketch ? db_vtext(sketch) : db_vnull(), FENCE_SLOT, FENCE_SLOT,
	};

	fleet_fence(st, instance_id, &v[NV(v) - 2]);

	return put(st, bl_item_new(BK_SUMMARY, ST_SUMMARY_INSERT, 0, v, NV(v)),
		   "adding an interval summary");
}

int store_mail_add(struct store *st, const char *to, const char *subject, const char *body,
		   size_t count, double queued, uint64_t *id)
{
	uint64_t mid = new_id(st, &st->next_mail);
	struct bl_value v[] = {
		db_vint((int64_t)mid), db_vreal(queued), db_vtext(to ? to : ""), db_vtext(subject ? subject : ""),
		db_vtext(body ? body : ""), db_vint((int64_t)count), mine(st),
	};
	int r = put(st, bl_item_new(BK_MAIL, ST_MAIL_INSERT, 0, v, NV(v)), "queueing a mail");

	if (r == 0)
		*id = mid;
	return r;
}

int store_mail_done(struct store *st, uint64_t id)
{
	struct bl_value v[] = { db_vint((int64_t)id) };

	return put(st, bl_item_new(BK_MAIL, ST_MAIL_DELETE, 0, v, NV(v)), "marking a mail sent");
}

/* The mail rows of MAIL_LOAD or MAIL_ADOPT run with values `v`, to `cb`. */
static int mail_rows(struct store *st, enum store_stmt which, const struct bl_value *v, size_t n,
		     store_mail_cb cb, void *arg)
{
	struct db_stmt *q = st->c.stmt[which];
	enum db_rc rc;

	for (rc = db_run(q, v, n); rc == DB_ROW; rc = db_next(q))
		cb(arg, (uint64_t)db_col_int(q, 0), db_col_real(q, 1), db_col_text(q, 2),
		   db_col_text(q, 3), db_col_text(q, 4), (size_t)db_col_int(q, 5));
	db_reset(q);
	return rc == DB_DONE ? 0 : db_fail(st, "reading the mail queue");
}

int store_mail_load(struct store *st, store_mail_cb cb, void *arg)
{
	struct bl_value v[] = { mine(st) };

	return mail_rows(st, ST_MAIL_LOAD, v, NV(v), cb, arg);
}

int store_digest_add(struct store *st, const struct digest_item *it, double due)
{
	struct bl_value v[] = {
		db_vint((int64_t)it->failure_id), db_vint((int64_t)it->instance_id), db_vtext(it->prog),
		db_vtext(it->machine), db_vint(it->pid), db_vtext(it->spec),
		db_vtext(it->assertion ? it->assertion : ""), db_vint(it->line), db_vreal(it->time),
		db_vtext(it->what), db_vint(it->start_ts), db_vint(it->end_ts), db_vtext(it->metrics),
		db_vtext(it->to), db_vreal(it->period), db_vreal(due), mine(st),
	};

	return put(st, bl_item_new(BK_MAIL, ST_DIGEST_INSERT, 0, v, NV(v)),
		   "keeping a failure for its digest");
}

int store_digest_done(struct store *st, uint64_t instance_id, const char *assertion, int line)
{
	struct bl_value v[] = {
		db_vint((int64_t)instance_id), db_vtext(assertion ? assertion : ""), db_vint(line),
	};

	return put(st, bl_item_new(BK_MAIL, ST_DIGEST_DELETE, 0, v, NV(v)), "clearing a digest");
}

/* The digest rows of statement `which` (DIGEST_LOAD or DIGEST_ADOPT) run
 * with values `v`, to `cb`. */
static int digest_rows(struct store *st, enum store_stmt which, const struct bl_value *v,
		       size_t n, const char *ctl, store_digest_cb cb, void *arg)
{
	struct db_stmt *q = st->c.stmt[which];
	enum db_rc rc;

	for (rc = db_run(q, v, n); rc == DB_ROW; rc = db_next(q)) {
		const char *label = db_col_text(q, 6);
		struct digest_item it = {
			.failure_id = (uint64_t)db_col_int(q, 0),
			.instance_id = (uint64_t)db_col_int(q, 1),
			.prog = db_col_text(q, 2),
			.machine = db_col_text(q, 3),
			.pid = db_col_int(q, 4),
			.spec = db_col_text(q, 5),
			.assertion = label && *label ? label : NULL,
			.line = (int)db_col_int(q, 7),
			.time = db_col_real(q, 8),
			.what = db_col_text(q, 9),
			.start_ts = db_col_int(q, 10),
			.end_ts = db_col_int(q, 11),
			.metrics = db_col_text(q, 12),
			.to = db_col_text(q, 13),
			.ctl = ctl,
			.period = db_col_real(q, 14),
		};
		if (!it.prog)
			it.prog = "";
		if (!it.machine)
			it.machine = "";
		if (!it.to)
			it.to = "";
		cb(arg, &it, db_col_real(q, 15));
	}
	db_reset(q);
	return rc == DB_DONE ? 0 : db_fail(st, "reading the failures waiting for a digest");
}

int store_digest_load(struct store *st, const char *ctl, store_digest_cb cb, void *arg)
{
	struct bl_value v[] = { mine(st) };

	return digest_rows(st, ST_DIGEST_LOAD, v, NV(v), ctl, cb, arg);
}

/* --- alert hygiene: silences, acknowledgements, retention ------------------------ */

int store_silence_add(struct store *st, const struct store_silence *s, uint64_t *id)
{
	uint64_t sid = new_id(st, &st->next_silence);
	struct bl_value v[] = {
		db_vint((int64_t)sid), db_vreal(s->created), db_vreal(s->until), db_vtext(s->prog),
		db_vtext(s->machine), db_vtext(s->assertion), db_vtext(s->comment),
	};
	int r = put(st, bl_item_new(BK_CONTROL, ST_SILENCE_INSERT, 0, v, NV(v)),
		    "adding a silence");

	if (r == 0)
		*id = sid;
	return r;
}

int store_silence_remove(struct store *st, uint64_t id, double when)
{
	struct bl_value v[] = { db_vint((int64_t)id), db_vreal(when) };

	return put(st, bl_item_new(BK_CONTROL, ST_SILENCE_REMOVE, 0, v, NV(v)),
		   "removing a silence");
}

int store_silences_load(struct store *st, double now, store_silence_cb cb, void *arg)
{
	struct db_stmt *q = st->c.stmt[ST_SILENCE_LOAD];
	struct bl_value v[] = { db_vreal(now) };
	enum db_rc rc;

	for (rc = db_run(q, v, NV(v)); rc == DB_ROW; rc = db_next(q)) {
		struct store_silence s = {
			.id = (uint64_t)db_col_int(q, 0),
			.created = db_col_real(q, 1),
			.until = db_col_real(q, 2),
			.prog = db_col_text(q, 3),
			.machine = db_col_text(q, 4),
			.assertion = db_col_text(q, 5),
			.comment = db_col_text(q, 6),
		};
		cb(arg, &s);
	}
	db_reset(q);
	return rc == DB_DONE ? 0 : db_fail(st, "reading the silences");
}

int store_ack(struct store *st, uint64_t failure_id, double when, const char *comment)
{
	struct bl_value v[] = { db_vint((int64_t)failure_id), db_vreal(when), db_vtext(comment) };

	return put(st, bl_item_new(BK_CONTROL, ST_ACK, 0, v, NV(v)), "acknowledging a failure");
}

/* One DELETE of at most `limit` rows older than `before`; rows deleted. */
static int64_t prune_one(struct store *st, enum store_stmt which, double before, size_t limit)
{
	struct db_stmt *q = st->c.stmt[which];
	struct bl_value v[] = { db_vreal(before), db_vint((int64_t)limit) };
	enum db_rc rc = db_run(q, v, NV(v));
	int64_t n = rc == DB_DONE ? db_changes(q) : -1;

	db_reset(q);
	if (n < 0 && rc == DB_FAULT)
		degrade(st, NULL, "pruning old rows");
	else if (n < 0)
		cmon_err("store: pruning old rows: %s", db_errmsg(st->c.db));
	return n;
}

int store_prune(struct store *st, double before, size_t limit, struct store_pruned *out)
{
	static const enum store_stmt order[] = {
		ST_PRUNE_WINDOWS, ST_PRUNE_FAILURES, ST_PRUNE_VERDICTS, ST_PRUNE_SUMMARIES,
		ST_PRUNE_MAIL, ST_PRUNE_DIGEST, ST_PRUNE_SILENCES, ST_PRUNE_ALERTS,
	};
	uint64_t *count[] = {
		&out->windows, &out->failures, &out->verdicts, &out->verdicts, &out->mail,
		&out->mail, &out->silences, &out->mail,
	};

	memset(out, 0, sizeof *out);
	if (st->degraded || batch(st) < 0)
		return -EAGAIN;                /* nothing is pruned while writes are held */
	for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
		int64_t n = prune_one(st, order[i], before, limit);
		if (n < 0)
			return -EIO;
		*count[i] += (uint64_t)n;
	}
	return 0;
}

/* --- Alertmanager ------------------------------------------------------------- */

int store_alert_add(struct store *st, const char *url, const char *body, double queued,
		    uint64_t *id)
{
	uint64_t aid = new_id(st, &st->next_alert);
	struct bl_value v[] = { db_vint((int64_t)aid), db_vreal(queued), db_vtext(url), db_vtext(body),
				mine(st) };
	int r = put(st, bl_item_new(BK_ALERT, ST_ALERT_INSERT, 0, v, NV(v)), "queueing an alert");

	if (r == 0)
		*id = aid;
	return r;
}

int store_alert_done(struct store *st, uint64_t id)
{
	struct bl_value v[] = { db_vint((int64_t)id) };

	return put(st, bl_item_new(BK_ALERT, ST_ALERT_DELETE, 0, v, NV(v)), "marking an alert sent");
}

/* The outbox rows of ALERT_LOAD or ALERT_ADOPT run with values `v`, to `cb`. */
static int outbox_rows(struct store *st, enum store_stmt which, const struct bl_value *v,
		       size_t n, store_alert_cb cb, void *arg)
{
	struct db_stmt *q = st->c.stmt[which];
	enum db_rc rc;

	for (rc = db_run(q, v, n); rc == DB_ROW; rc = db_next(q))
		cb(arg, (uint64_t)db_col_int(q, 0), db_col_real(q, 1), db_col_text(q, 2),
		   db_col_text(q, 3));
	db_reset(q);
	return rc == DB_DONE ? 0 : db_fail(st, "reading the alert outbox");
}

int store_alert_load(struct store *st, store_alert_cb cb, void *arg)
{
	struct bl_value v[] = { mine(st) };

	return outbox_rows(st, ST_ALERT_LOAD, v, NV(v), cb, arg);
}

int store_alert_open(struct store *st, uint64_t failure_id, uint64_t instance_id, const char *url,
		     const char *alert, const char *name, double ends)
{
	struct bl_value s[] = {
		db_vint((int64_t)instance_id), db_vtext(name), db_vint((int64_t)failure_id),
	};
	struct bl_value v[] = {
		db_vint((int64_t)failure_id), db_vint((int64_t)instance_id), db_vtext(url), db_vtext(alert),
		mine(st), db_vtext(name), db_vreal(ends),
	};
	int rc = put(st, bl_item_new(BK_ALERT, ST_ALERT_SUPERSEDE, 0, s, NV(s)),
		     "replacing an open alert");

	if (rc < 0)
		return rc;
	return put(st, bl_item_new(BK_ALERT, ST_ALERT_OPEN, 0, v, NV(v)), "keeping an open alert");
}

int store_alert_close(struct store *st, uint64_t failure_id)
{
	struct bl_value v[] = { db_vint((int64_t)failure_id) };

	return put(st, bl_item_new(BK_ALERT, ST_ALERT_CLOSE, 0, v, NV(v)), "closing an alert");
}

/* Rows of `which` (ALERT_ENDED or ALERT_LIVE) to `cb`; the columns differ. */
static int alert_rows(struct store *st, enum store_stmt which, double now, size_t limit,
		      store_open_alert_cb cb, void *arg)
{
	struct db_stmt *q = st->c.stmt[which];
	bool ended = which == ST_ALERT_ENDED;
	struct bl_value ve[] = { db_vreal(now), db_vint((int64_t)limit), mine(st) };
	struct bl_value vl[] = { db_vint((int64_t)limit), mine(st) };
	enum db_rc rc;

	for (rc = ended ? db_run(q, ve, NV(ve)) : db_run(q, vl, NV(vl)); rc == DB_ROW;
	     rc = db_next(q)) {
		int c = ended ? 1 : 0;
		cb(arg, ended ? (uint64_t)db_col_int(q, 0) : 0,
		   db_col_text(q, c), db_col_text(q, c + 1), db_col_real(q, c + 2));
	}
	db_reset(q);
	return rc == DB_DONE ? 0 : db_fail(st, "reading the open alerts");
}

int store_alerts_ended(struct store *st, double now, size_t limit, store_open_alert_cb cb,
		       void *arg)
{
	return alert_rows(st, ST_ALERT_ENDED, now, limit, cb, arg);
}

int store_alerts_live(struct store *st, size_t limit, store_open_alert_cb cb, void *arg)
{
	return alert_rows(st, ST_ALERT_LIVE, 0, limit, cb, arg);
}

/* --- several telemonitors on one store: leases ---------------------------------- */

int store_set_node(struct store *st, const char *node)
{
	char err[800];

	snprintf(st->node, sizeof st->node, "%s", node);
	st->shared = db_engine(st->c.db) == DB_POSTGRES;
	if (st->shared && take_block(st) < 0) {
		cmon_err("store: cannot take a block of ids: %s", db_errmsg(st->c.db));
		return -EIO;
	}
	if (st->shared && fleet_open(st, err, sizeof err) < 0) {
		cmon_err("store: %s", err);
		return -EIO;
	}
	return 0;
}

bool store_shared(const struct store *st)
{
	return st->shared;
}

const char *store_node(const struct store *st)
{
	return st->node;
}

int store_instance_get(struct store *st, uint64_t id, struct tm_instance *in)
{
	struct db_stmt *q = st->c.stmt[ST_INST_ONE];
	struct bl_value v[] = { db_vint((int64_t)id) };
	enum db_rc rc = db_run(q, v, NV(v));

	if (rc == DB_ROW)
		row_instance(q, in);
	db_reset(q);
	if (rc != DB_ROW && rc != DB_DONE)
		return db_fail(st, "reading an instance");
	return rc == DB_ROW;
}

/* Ready to adopt `from`'s rows: shared, another node, the batch open. */
static int adopting(struct store *st, const char *from)
{
	if (!st->shared || !from || !strcmp(from, st->node))
		return 0;
	if (st->degraded || batch(st) < 0)
		return -EAGAIN;
	return 1;
}

int store_adopt_mail(struct store *st, const char *from, const char *ctl, store_mail_cb mail_cb,
		     store_digest_cb digest_cb, void *arg)
{
	struct bl_value v[] = { db_vtext(st->node), db_vtext(from) };
	int r = adopting(st, from);

	if (r <= 0)
		return r;
	r = mail_cb ? mail_rows(st, ST_MAIL_ADOPT, v, NV(v), mail_cb, arg) : 0;
	if (digest_cb && digest_rows(st, ST_DIGEST_ADOPT, v, NV(v), ctl, digest_cb, arg) < 0)
		r = -EIO;
	return r;
}

int store_adopt_alerts(struct store *st, const char *from, store_alert_cb cb, void *arg)
{
	struct bl_value v[] = { db_vtext(st->node), db_vtext(from) };
	int r = adopting(st, from);

	if (r <= 0)
		return r;
	r = outbox_rows(st, ST_ALERT_ADOPT, v, NV(v), cb, arg);
	if (db_run(st->c.stmt[ST_ALERTS_OPEN_ADOPT], v, NV(v)) != DB_DONE)
		r = db_fail(st, "adopting open alerts");
	db_reset(st->c.stmt[ST_ALERTS_OPEN_ADOPT]);
	return r;
}
