/* Several telemonitors on one store (PostgreSQL): instance ownership on
 * the server's own guarantees (store.h, "Several telemonitors").
 *
 * A lease is a row of `leases`: its owner (a node name), an epoch that
 * every claim raises, and an end time on the server's clock (now()). The
 * statements here run on a connection of their own, in autocommit, with a
 * short lock_timeout: a claim or a renewal never waits behind a batch of
 * writes, and each is one short statement (a renewal is one statement for
 * all of a node's leases). The batches (store.c) carry the fence: every
 * write that belongs to an instance names this node and its epoch, and
 * goes in only while that lease row says so, holding it FOR KEY SHARE
 * until its commit. A claim takes the row FOR UPDATE SKIP LOCKED, so it
 * never waits for, nor slips in under, a batch that still writes as the
 * old owner; the next claim attempt gets it once that batch is over.
 *
 * The renewals run on a thread of their own (the keeper) with a third
 * connection, once a second whatever the event loop is doing: a node busy
 * or starved of CPU keeps its leases as long as that thread gets to run.
 * This node knows its leases are safe until the time the keeper sent its
 * last good renewal plus the lease, less a margin, on its own monotonic
 * clock (only the rate of the clocks matters, never their setting). The
 * keeper shares with the loop only what struct keeper holds, under its
 * mutex; everything else here is the loop's. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmon/log.h"
#include "store-internal.h"

#define EPOCH_BUCKETS 1024           /* hash buckets of the epoch map */
#define LEASE_MARGIN_S 0.5           /* stop writing this long before the lease can end */
#define NODE_ALIVE_S 5.0             /* a node seen this recently is part of the fleet */
#define NODE_JOINING_S 60.0          /* a node started this recently is joining it... */
#define NODE_TOGETHER_S 5.0          /* ...unless the whole fleet started within this */

/* Statements of the coordination connection. */
#define FLEET_STMTS(X)                                                                       \
	X(ENSURE,                                                                            \
	  "INSERT INTO instances (id, class_id, prog, machine, pid, start_ns, endpoint, tls,"  \
	  " first_seen, state, want, token, status) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,"  \
	  "?11,?12, CASE WHEN CAST(?11 AS BIGINT) = 0 THEN 'listed; start it with"            \
	  " telemonctl start ' || CAST(CAST(?1 AS BIGINT) AS TEXT) END)"                      \
	  " ON CONFLICT (prog, machine, pid, start_ns) DO NOTHING RETURNING id")             \
	X(LOOKUP, INST_LOOKUP_SQL)                                                           \
	X(CLAIM_NEW,                                                                         \
	  "INSERT INTO leases (instance_id, owner, epoch, lease_until)"                       \
	  " VALUES (?1, ?2, 1, now() + make_interval(secs => CAST(?3 AS double precision)))" \
	  " ON CONFLICT (instance_id) DO NOTHING RETURNING epoch")                           \
	X(CLAIM,                                                                             \
	  "WITH c AS (SELECT instance_id FROM leases WHERE instance_id = ?1"                 \
	  " AND (owner IS NULL OR owner = ?2 OR lease_until < now())"                        \
	  " FOR UPDATE SKIP LOCKED)"                                                         \
	  " UPDATE leases l SET owner = ?2, epoch = l.epoch + 1,"                            \
	  " lease_until = now() + make_interval(secs => CAST(?3 AS double precision))"       \
	  " FROM c WHERE l.instance_id = c.instance_id RETURNING l.epoch")                  \
	X(RENEW,                                                                             \
	  "UPDATE leases SET lease_until = now() + make_interval(secs => CAST(?2 AS double"  \
	  " precision)) WHERE owner = ?1 AND instance_id IN (SELECT CAST(value AS BIGINT)"   \
	  " FROM json_array_elements_text(CAST(?3 AS json))) RETURNING instance_id, epoch")  \
	X(EXPIRED,                                                                           \
	  "SELECT i.id, l.owner, coalesce(l.epoch, 0) FROM instances i"                      \
	  " LEFT JOIN leases l ON l.instance_id = i.id"                                      \
	  " WHERE i.ended IS NULL AND (l.instance_id IS NULL OR l.owner IS NULL"             \
	  " OR l.lease_until < now()) ORDER BY i.first_seen, i.id LIMIT ?1")                 \
	X(RELEASE,                                                                           \
	  "UPDATE leases SET owner = NULL, lease_until = NULL"                               \
	  " WHERE instance_id = ?1 AND owner = ?2 AND epoch = ?3")                           \
	X(BEAT,                                                                              \
	  "INSERT INTO nodes (name, seen, started, sessions, capacity)"                       \
	  " VALUES (?1, now(), now(), ?2, ?3)"                                               \
	  " ON CONFLICT (name) DO UPDATE SET seen = now(), sessions = excluded.sessions,"   \
	  " capacity = excluded.capacity,"                                                   \
	  " started = CASE WHEN CAST(?4 AS BIGINT) = 1 THEN now() ELSE nodes.started END")  \
	X(FLEET,                                                                             \
	  "WITH live AS (SELECT * FROM nodes WHERE seen > now() -"                           \
	  " make_interval(secs => CAST(?1 AS double precision)))"                            \
	  " SELECT count(*), coalesce(min(sessions) FILTER (WHERE started > now() -"         \
	  " make_interval(secs => CAST(?2 AS double precision)) AND started >"               \
	  " (SELECT min(started) FROM live) + make_interval(secs =>"                         \
	  " CAST(?3 AS double precision))), -1),"                                            \
	  " (SELECT count(*) FROM instances WHERE ended IS NULL) FROM live")

enum fleet_stmt {
#define FL_ENUM(n, s) FL_##n,
	FLEET_STMTS(FL_ENUM)
#undef FL_ENUM
	FL_COUNT
};

static const char *const fleet_sql[FL_COUNT] = {
#define FL_SQL(n, s) [FL_##n] = s,
	FLEET_STMTS(FL_SQL)
#undef FL_SQL
};

/* This node's claim on one instance. */
struct held {
	struct held *next;           /* in its bucket */
	uint64_t id;                 /* the instance */
	uint64_t epoch;              /* the epoch of our claim */
	double claimed;              /* monotonic: when */
	size_t ix;                   /* its place in the keeper's `ids` (SIZE_MAX: none) */
};

/* The renewing thread and what it shares with the loop (under `lock`). */
struct keeper {
	pthread_t thread;            /* running while `run` */
	pthread_mutex_t lock;
	bool run;                    /* the thread is wanted */
	bool started;                /* pthread_create succeeded */
	char url[PATH_MAX];          /* the server */
	char node[256];              /* this node */
	uint64_t *ids;               /* the instances the loop holds (its `held`): the
	                                renewal renews these, and no other lease in
	                                this node's name (one it lost track of, or one
	                                an earlier run of it held, runs out) */
	size_t nids, capids;
	/* the last renewal */
	uint64_t gen;                /* renewals done (successful or not) */
	bool ok;                     /* the last one went through */
	double sent;                 /* monotonic: when the last good one was sent */
	double tried;                /* monotonic: when the last one (good or not) was sent */
	uint64_t *rows;              /* its (id, epoch) pairs */
	size_t nrows, caprows;
	double safe_until;           /* monotonic: our leases surely hold until then */
	char err[300];               /* why the last one failed */
	/* the beat */
	size_t sessions, capacity;   /* set by the loop */
	bool beaten;                 /* its first beat is in */
	struct store_fleet fleet;    /* the last count */
	bool fleet_ok;
};

/* The coordination connection and what this node holds. */
struct fleet {
	struct db *db;               /* the connection (NULL: to be made again) */
	struct db_stmt *stmt[FL_COUNT];
	struct held *map[EPOCH_BUCKETS];
	size_t nheld;                /* claims held */
	double retry_at;             /* monotonic: when to open the connection again */
	uint64_t seen_gen;           /* the keeper's last renewal the loop took in */
	uint64_t *ending;            /* instances whose end is written but not yet known
	                                to be committed: held (renewed) until it is */
	size_t nending, capending;
	double safe_until;           /* monotonic: what that renewal makes safe (the loop's
	                                view: a renewal it has not taken in, with the
	                                instances it no longer lists, makes nothing safe) */
	struct keeper k;             /* the renewing thread */
};

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t bucket(uint64_t id)
{
	return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 54) % EPOCH_BUCKETS;
}

static struct held *find(const struct fleet *f, uint64_t id)
{
	for (struct held *h = f->map[bucket(id)]; h; h = h->next)
		if (h->id == id)
			return h;
	return NULL;
}

/* Hold instance `id` at `epoch`, and tell the keeper. The time of the
 * claim is read under the keeper's lock: a renewal whose list was taken
 * before it was sent before it too, and judges nothing of it. */
static void hold_epoch(struct fleet *f, uint64_t id, uint64_t epoch)
{
	struct keeper *k = &f->k;
	struct held *h = find(f, id);
	bool listed = h != NULL;

	if (!h && (h = calloc(1, sizeof *h))) {
		h->id = id;
		h->ix = SIZE_MAX;
		h->next = f->map[bucket(id)];
		f->map[bucket(id)] = h;
		f->nheld++;
	}
	if (!h)
		return;
	h->epoch = epoch;
	pthread_mutex_lock(&k->lock);
	if (!listed && k->nids == k->capids) {
		size_t cap = k->capids ? k->capids * 2 : 64;
		uint64_t *m = realloc(k->ids, cap * sizeof *m);
		if (m) {
			k->ids = m;
			k->capids = cap;
		}
	}
	if (!listed && k->nids < k->capids) {
		h->ix = k->nids;
		k->ids[k->nids++] = id;
	}
	h->claimed = mono();
	pthread_mutex_unlock(&k->lock);
}

static void drop_epoch(struct fleet *f, uint64_t id)
{
	struct keeper *k = &f->k;
	struct held **p = &f->map[bucket(id)];

	while (*p && (*p)->id != id)
		p = &(*p)->next;
	if (*p) {
		struct held *h = *p;
		*p = h->next;
		f->nheld--;
		if (h->ix != SIZE_MAX) {
			/* (the last id takes its place) */
			struct held *moved;
			pthread_mutex_lock(&k->lock);
			k->nids--;
			if (h->ix < k->nids && (moved = find(f, k->ids[k->nids]))) {
				k->ids[h->ix] = moved->id;
				moved->ix = h->ix;
			}
			pthread_mutex_unlock(&k->lock);
		}
		free(h);
	}
}

static void close_db(struct fleet *f)
{
	for (int i = 0; i < FL_COUNT; i++) {
		db_finalize(f->stmt[i]);
		f->stmt[i] = NULL;
	}
	db_close(f->db);
	f->db = NULL;
}

/* (Re)connect; 0, or -EAGAIN (tried again after a second). */
static int connect_db(struct store *st, char *err, size_t errlen)
{
	struct fleet *f = st->fleet;
	char e[600];

	if (f->db)
		return 0;
	if (mono() < f->retry_at)
		return -EAGAIN;
	f->retry_at = mono() + 1.0;
	f->db = db_open(st->path, e, sizeof e);
	if (!f->db || db_exec(f->db, "SET lock_timeout = '1s'; SET statement_timeout = '2s'")
			      != DB_DONE) {
		snprintf(err, errlen, "the coordination connection: %s", f->db ? db_errmsg(f->db) : e);
		close_db(f);
		return -EAGAIN;
	}
	for (int i = 0; i < FL_COUNT; i++)
		if (!(f->stmt[i] = db_prepare(f->db, fleet_sql[i]))) {
			snprintf(err, errlen, "preparing a coordination statement: %s",
				 db_errmsg(f->db));
			close_db(f);
			return -EAGAIN;
		}
	return 0;
}

/* --- the keeper ---------------------------------------------------------------- */

/* One renewal and one beat on the keeper's connection `*db` (made, or made
 * again, as needed). */
static void keep_once(struct keeper *k, struct db **db, struct db_stmt **renew,
		      struct db_stmt **beat, struct db_stmt **count)
{
	struct bl_value rv[3];
	struct bl_value cv[] = { db_vreal(NODE_ALIVE_S), db_vreal(NODE_JOINING_S),
				 db_vreal(NODE_TOGETHER_S) };
	struct bl_value bv[4];
	struct store_fleet fl = { 0 };
	uint64_t *rows = NULL;
	size_t n = 0, cap = 0;
	char err[600] = "", *held = NULL;
	double sent;
	enum db_rc rc;
	bool ok = false, fl_ok = false;

	if (!*db) {
		*db = db_open(k->url, err, sizeof err);
		if (*db && (db_exec(*db, "SET lock_timeout = '1s'; SET statement_timeout = '2s'")
				    != DB_DONE ||
			    !(*renew = db_prepare(*db, fleet_sql[FL_RENEW])) ||
			    !(*beat = db_prepare(*db, fleet_sql[FL_BEAT])) ||
			    !(*count = db_prepare(*db, fleet_sql[FL_FLEET])))) {
			snprintf(err, sizeof err, "%s", db_errmsg(*db));
			db_finalize(*renew);
			db_finalize(*beat);
			db_finalize(*count);
			*renew = *beat = *count = NULL;
			db_close(*db);
			*db = NULL;
		}
	}
	/* (sent before the list is taken: a claim the list misses is younger) */
	sent = mono();
	pthread_mutex_lock(&k->lock);
	held = store_id_list(k->ids, NULL, k->nids);
	pthread_mutex_unlock(&k->lock);
	if (!held)
		snprintf(err, sizeof err, "out of memory");
	if (*db && held) {
		rv[0] = db_vtext(k->node);
		rv[1] = db_vreal(STORE_LEASE_S);
		rv[2] = db_vtext(held);
		rc = db_run(*renew, rv, 3);
		for (; rc == DB_ROW; rc = db_next(*renew)) {
			if (n + 2 > cap) {
				uint64_t *m = realloc(rows, (cap = cap ? cap * 2 : 64) * sizeof *rows);
				if (!m)
					break;
				rows = m;
			}
			rows[n++] = (uint64_t)db_col_int(*renew, 0);
			rows[n++] = (uint64_t)db_col_int(*renew, 1);
		}
		ok = rc == DB_DONE;
		if (!ok)
			snprintf(err, sizeof err, "%s", db_errmsg(*db));
		db_reset(*renew);
		pthread_mutex_lock(&k->lock);
		bv[0] = db_vtext(k->node);
		bv[1] = db_vint((int64_t)k->sessions);
		bv[2] = db_vint((int64_t)k->capacity);
		bv[3] = db_vint(!k->beaten);       /* its first beat: it (re)starts now */
		pthread_mutex_unlock(&k->lock);
		if (ok && db_run(*beat, bv, 4) == DB_DONE && db_run(*count, cv, 3) == DB_ROW) {
			int64_t j = db_col_int(*count, 1);
			fl.nodes = (size_t)db_col_int(*count, 0);
			fl.joining = j >= 0;
			fl.joiner_sessions = j >= 0 ? (size_t)j : 0;
			fl.instances = (size_t)db_col_int(*count, 2);
			fl_ok = true;
			k->beaten = true;
		}
		db_reset(*beat);
		db_reset(*count);
		if (!ok && db_lost(*db)) {
			db_finalize(*renew);
			db_finalize(*beat);
			db_finalize(*count);
			*renew = *beat = *count = NULL;
			db_close(*db);
			*db = NULL;
		}
	}
	pthread_mutex_lock(&k->lock);
	k->gen++;
	k->ok = ok;
	k->tried = sent;
	if (ok) {
		free(k->rows);
		k->rows = rows;
		k->nrows = n;
		rows = NULL;
		k->sent = sent;
		k->safe_until = sent + STORE_LEASE_S - LEASE_MARGIN_S;
	} else {
		snprintf(k->err, sizeof k->err, "%s", err);
	}
	if (fl_ok) {
		k->fleet = fl;
		k->fleet_ok = true;
	}
	pthread_mutex_unlock(&k->lock);
	free(rows);
	free(held);
}

static void *keeper_main(void *arg)
{
	struct keeper *k = arg;
	struct db *db = NULL;
	struct db_stmt *renew = NULL, *beat = NULL, *count = NULL;

	for (;;) {
		bool run;
		keep_once(k, &db, &renew, &beat, &count);
		/* a renewal a second: ten relative sleeps, looking for a stop
		 * between them (no absolute deadline from clock_gettime, which a
		 * faked clock, libfaketime's, would put seconds away) */
		for (int i = 0; i < 10; i++) {
			struct timespec d = { 0, 100 * 1000 * 1000 };
			pthread_mutex_lock(&k->lock);
			run = k->run;
			pthread_mutex_unlock(&k->lock);
			if (!run)
				break;
			nanosleep(&d, NULL);
		}
		if (!run)
			break;
	}
	db_finalize(renew);
	db_finalize(beat);
	db_finalize(count);
	db_close(db);
	return NULL;
}

static int keeper_start(struct store *st, char *err, size_t errlen)
{
	struct keeper *k = &st->fleet->k;

	snprintf(k->url, sizeof k->url, "%s", st->path);
	snprintf(k->node, sizeof k->node, "%s", st->node);
	k->run = true;
	if (pthread_create(&k->thread, NULL, keeper_main, k) != 0) {
		snprintf(err, errlen, "cannot start the lease keeper thread");
		k->run = false;
		return -EAGAIN;
	}
	k->started = true;
	return 0;
}

static void keeper_stop(struct keeper *k)
{
	if (!k->started)
		return;
	pthread_mutex_lock(&k->lock);
	k->run = false;
	pthread_mutex_unlock(&k->lock);
	pthread_join(k->thread, NULL);
	k->started = false;
	free(k->rows);
	k->rows = NULL;
}

int fleet_open(struct store *st, char *err, size_t errlen)
{
	if (!st->shared)
		return 0;
	st->fleet = calloc(1, sizeof *st->fleet);
	if (!st->fleet) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&st->fleet->k.lock, NULL);
	if (connect_db(st, err, errlen) < 0 || keeper_start(st, err, errlen) < 0)
		return -EIO;
	return 0;
}

void fleet_close(struct store *st)
{
	struct fleet *f = st->fleet;

	if (!f)
		return;
	keeper_stop(&f->k);
	close_db(f);
	for (size_t i = 0; i < EPOCH_BUCKETS; i++)
		while (f->map[i])
			drop_epoch(f, f->map[i]->id);
	free(f->k.ids);
	free(f->ending);
	pthread_mutex_destroy(&f->k.lock);
	free(f);
	st->fleet = NULL;
}

void fleet_ending(struct store *st, uint64_t id)
{
	struct fleet *f = st->fleet;

	if (!f || !find(f, id))
		return;
	if (f->nending == f->capending) {
		size_t cap = f->capending ? f->capending * 2 : 16;
		uint64_t *m = realloc(f->ending, cap * sizeof *m);
		if (!m)
			return;                 /* (renewed on, as before: nothing is lost) */
		f->ending = m;
		f->capending = cap;
	}
	f->ending[f->nending++] = id;
}

void fleet_ended(struct store *st)
{
	struct fleet *f = st->fleet;

	if (!f)
		return;
	for (size_t i = 0; i < f->nending; i++)
		drop_epoch(f, f->ending[i]);
	f->nending = 0;
}

bool fleet_holds(const struct store *st)
{
	return st->fleet && st->fleet->nheld > 0;
}

uint64_t fleet_epoch(const struct store *st, uint64_t id)
{
	const struct held *h = st->fleet ? find(st->fleet, id) : NULL;

	return h ? h->epoch : 0;
}

void fleet_fence(const struct store *st, uint64_t id, struct bl_value out[2])
{
	if (!st->shared) {
		out[0] = db_vnull();
		out[1] = db_vint(0);
		return;
	}
	out[0] = db_vtext(st->node);
	out[1] = db_vint((int64_t)fleet_epoch(st, id));
}

/* Run coordination statement `which`; a fault drops the connection (made
 * again on the next call). The statement is left for its rows. */
static enum db_rc run(struct store *st, enum fleet_stmt which, const struct bl_value *v, size_t n,
		      const char *what)
{
	struct fleet *f = st->fleet;
	char err[700];
	enum db_rc rc;

	if (!f)
		return DB_REFUSED;
	if (connect_db(st, err, sizeof err) < 0) {
		cmon_debug("store: %s: %s", what, err);
		return DB_FAULT;
	}
	rc = db_run(f->stmt[which], v, n);
	if (rc == DB_FAULT || rc == DB_REFUSED) {
		cmon_warn("store: %s: %s", what, db_errmsg(f->db));
		db_reset(f->stmt[which]);
		if (rc == DB_FAULT || db_lost(f->db))
			close_db(f);
	}
	return rc;
}

static int done(struct store *st, enum fleet_stmt which)
{
	db_reset(st->fleet->stmt[which]);
	return 0;
}

/* --- store.h ------------------------------------------------------------------ */

int store_instance_ensure(struct store *st, struct tm_instance *in, uint64_t new_id)
{
	struct bl_value v[] = {
		db_vint((int64_t)new_id), in->class_id ? db_vint(in->class_id) : db_vnull(),
		db_vtext(in->prog), db_vtext(in->machine), db_vint(in->pid), db_vint(in->start_ns),
		db_vtext(in->endpoint), db_vint(in->tls), db_vreal(in->first_seen),
		db_vtext(inst_state_name(in->state)), db_vint(in->want),
		in->has_token ? db_vblob(in->token, CMON_TOKEN_LEN) : db_vnull(),
	};
	struct bl_value k[] = { db_vtext(in->prog), db_vtext(in->machine), db_vint(in->pid),
				db_vint(in->start_ns) };
	struct db_stmt *q;
	enum db_rc rc = run(st, FL_ENSURE, v, sizeof v / sizeof v[0], "adding an instance");

	if (rc == DB_ROW) {
		in->id = (uint64_t)db_col_int(st->fleet->stmt[FL_ENSURE], 0);
		done(st, FL_ENSURE);
		return 0;
	}
	if (rc != DB_DONE)
		return -EAGAIN;
	done(st, FL_ENSURE);
	/* another node added it first: its row */
	rc = run(st, FL_LOOKUP, k, sizeof k / sizeof k[0], "looking up an instance");
	if (rc != DB_ROW) {
		if (rc == DB_DONE)
			done(st, FL_LOOKUP);
		return -EAGAIN;
	}
	q = st->fleet->stmt[FL_LOOKUP];
	store_lookup_row(q, in);
	done(st, FL_LOOKUP);
	return 1;
}

int store_instance_claim(struct store *st, uint64_t id, uint64_t *epoch)
{
	struct bl_value v[] = { db_vint((int64_t)id), db_vtext(st->node), db_vreal(STORE_LEASE_S) };
	double sent = mono();
	enum db_rc rc;

	*epoch = 0;
	if (!st->shared)
		return 1;
	rc = run(st, FL_CLAIM_NEW, v, 3, "claiming an instance");
	if (rc == DB_ROW) {
		*epoch = (uint64_t)db_col_int(st->fleet->stmt[FL_CLAIM_NEW], 0);
		done(st, FL_CLAIM_NEW);
	} else if (rc == DB_DONE) {
		done(st, FL_CLAIM_NEW);
		rc = run(st, FL_CLAIM, v, 3, "claiming an instance");
		if (rc == DB_ROW)
			*epoch = (uint64_t)db_col_int(st->fleet->stmt[FL_CLAIM], 0);
		if (rc == DB_ROW || rc == DB_DONE)
			done(st, FL_CLAIM);
	}
	if (rc != DB_ROW && rc != DB_DONE)
		return -EAGAIN;
	if (!*epoch)
		return 0;
	hold_epoch(st->fleet, id, *epoch);
	if (st->fleet->nheld == 1 && st->fleet->safe_until < sent + STORE_LEASE_S - LEASE_MARGIN_S)
		st->fleet->safe_until = sent + STORE_LEASE_S - LEASE_MARGIN_S;
	return 1;
}

int store_lease_renew(struct store *st, store_lease_cb cb, void *arg)
{
	struct fleet *f = st->fleet;
	struct keeper *k;
	uint64_t *rows = NULL;
	size_t n = 0;
	double sent;
	bool ok;

	if (!st->shared)
		return 0;
	if (!f)
		return -EAGAIN;
	k = &f->k;
	pthread_mutex_lock(&k->lock);
	if (k->gen == f->seen_gen) {
		pthread_mutex_unlock(&k->lock);
		return 1;                       /* nothing new since the last look */
	}
	f->seen_gen = k->gen;
	ok = k->ok;
	sent = k->sent;
	if (ok)
		f->safe_until = k->safe_until;
	if (ok && k->nrows && (rows = malloc(k->nrows * sizeof *rows))) {
		memcpy(rows, k->rows, k->nrows * sizeof *rows);
		n = k->nrows;
	}
	if (!ok)
		cmon_debug("store: renewing the leases: %s", k->err);
	pthread_mutex_unlock(&k->lock);
	if (!ok)
		return -EAGAIN;
	/* a claim made after the renewal was sent is not in it: every held
	 * lease claimed before is reported when the renewal listed it at the
	 * epoch we claimed, or counted absent (lost) by the caller */
	for (size_t i = 0; i + 1 < n; i += 2) {
		const struct held *h = find(f, rows[i]);
		if (h && h->epoch == rows[i + 1])
			cb(arg, rows[i], rows[i + 1]);
	}
	for (size_t b = 0; b < EPOCH_BUCKETS; b++)
		for (const struct held *h = f->map[b]; h; h = h->next)
			if (h->claimed >= sent)
				cb(arg, h->id, h->epoch);       /* too recent to judge */
	free(rows);
	return 0;
}

bool store_lease_safe(const struct store *st)
{
	struct keeper *k;
	bool safe;

	if (!st->shared)
		return true;
	if (!st->fleet)
		return false;
	(void)k;
	safe = mono() < st->fleet->safe_until;
	return safe;
}

enum store_lease_state store_lease_state(const struct store *st)
{
	struct keeper *k;
	enum store_lease_state r;
	double now = mono();

	if (!st->shared || !fleet_holds(st))
		return LEASES_SAFE;
	k = &st->fleet->k;
	pthread_mutex_lock(&k->lock);
	if (now < st->fleet->safe_until)
		r = LEASES_SAFE;
	else if (k->tried >= st->fleet->safe_until && !k->ok)
		r = LEASES_OUTAGE;
	else
		r = LEASES_UNSURE;
	pthread_mutex_unlock(&k->lock);
	return r;
}

int store_leases_expired(struct store *st, size_t limit, store_id_cb cb, void *arg)
{
	struct bl_value v[] = { db_vint((int64_t)(limit > 64 ? 64 : limit)) };
	uint64_t ids[64], epochs[64];
	char owners[64][256];
	size_t n = 0;
	enum db_rc rc;
	struct db_stmt *q;

	if (!st->shared)
		return 0;
	if (limit > 64)
		limit = 64;
	rc = run(st, FL_EXPIRED, v, 1, "looking for instances nobody holds");
	q = st->fleet->stmt[FL_EXPIRED];
	for (; rc == DB_ROW && n < limit; rc = db_next(q)) {
		const char *o = db_col_text(q, 1);
		ids[n] = (uint64_t)db_col_int(q, 0);
		epochs[n] = (uint64_t)db_col_int(q, 2);
		snprintf(owners[n], sizeof owners[n], "%s", o ? o : "");
		n++;
	}
	if (rc == DB_ROW || rc == DB_DONE)
		done(st, FL_EXPIRED);
	else
		return -EAGAIN;
	/* (the callbacks claim, on the same connection: after the rows are read) */
	for (size_t i = 0; i < n; i++)
		cb(arg, ids[i], owners[i][0] ? owners[i] : NULL, epochs[i]);
	return 0;
}

int store_lease_release(struct store *st, uint64_t id)
{
	struct bl_value v[] = { db_vint((int64_t)id), db_vtext(st->node),
				db_vint((int64_t)fleet_epoch(st, id)) };
	enum db_rc rc;

	if (!st->shared)
		return 0;
	rc = run(st, FL_RELEASE, v, 3, "letting an instance go");
	if (rc == DB_DONE || rc == DB_ROW)
		done(st, FL_RELEASE);
	drop_epoch(st->fleet, id);
	return rc == DB_DONE || rc == DB_ROW ? 0 : -EAGAIN;
}

void store_lease_forget(struct store *st, uint64_t id)
{
	if (st->fleet)
		drop_epoch(st->fleet, id);
}

int store_fleet_beat(struct store *st, size_t sessions, size_t capacity, struct store_fleet *out)
{
	struct keeper *k;
	int r = -EAGAIN;

	memset(out, 0, sizeof *out);
	if (!st->shared)
		return 0;
	if (!st->fleet)
		return -EAGAIN;
	k = &st->fleet->k;
	pthread_mutex_lock(&k->lock);
	k->sessions = sessions;
	k->capacity = capacity;
	if (k->fleet_ok) {
		*out = k->fleet;
		r = 0;
	}
	pthread_mutex_unlock(&k->lock);
	out->held = st->fleet->nheld;
	return r;
}
