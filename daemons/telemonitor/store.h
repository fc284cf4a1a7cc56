/* The telemonitor's store: sqlite in WAL mode at DIR/telemonitor.db, or
 * a PostgreSQL database (-store URL; db.h).
 *
 * Tables: classes, instances, failures, windows, verdicts, the mail not
 * sent yet (mail_queue, mail_digest) and the store's own outages
 * (store_outages); see store.c for the schema, versioned with PRAGMA
 * user_version and upgraded by the migrations listed there. Writes are
 * batched: the first write after a commit opens a transaction, and
 * store_commit() (every TM_FLUSH_MS, and before answering telemonctl) ends
 * it, so a burst of failures costs one commit, not one per failure.
 * Reads (store_read.h) see every write at once.
 *
 * Storage faults. Every write is kept as an item (backlog.h) until its
 * batch is committed. When the database cannot take a write (disk full,
 * read-only, I/O error, the file deleted), the store becomes degraded:
 * the batch is rolled back and its writes, and every write after it, are
 * held in memory, in order, within the backlog's bounds (store-backlog
 * failures, STORE_BACKLOG_BYTES in all; the oldest are dropped and
 * counted); store_poll() retries with backoff (1 s doubling to 30 s) and,
 * once a transaction goes through, stores them in order and records the
 * outage in store_outages. A database file that was deleted or replaced
 * is noticed (before each batch and once a second) and a new one is
 * opened at its path; the owner is then asked to record its live state
 * again (store_set_reopen_cb()). Ids of failures, instances, classes,
 * windows and mails are given out here, not by sqlite, so a held write
 * keeps its id. Writes the database refuses for a reason of their own (a
 * constraint) are logged and dropped, never retried. */
#ifndef TELEMON_STORE_H
#define TELEMON_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "digest.h"
#include "telemonitor.h"

/* Schema version this program writes. */
#define STORE_SCHEMA_VERSION 17

/* Largest log window stored. */
#define STORE_WINDOW_MAX (8u << 20)

/* Storage faults (see above). */
#define STORE_BACKLOG_DEFAULT 10000     /* failures held while degraded (store-backlog) */
#define STORE_BACKLOG_MAX 10000000      /* largest store-backlog accepted */
#define STORE_BACKLOG_BYTES (64u << 20) /* memory held while degraded, every kind of write */
#define STORE_RETRY_MIN_S 1.0           /* first retry after a fault */
#define STORE_RETRY_MAX_S 30.0          /* longest wait between retries */
#define STORE_REPORT_S 30.0             /* a degraded store says so this often */
#define STORE_CHECK_S 1.0               /* is the database file still there? */
#define STORE_COMPACT_S 60.0            /* the journal's space is given back this often */
#define STORE_FLUSH_ITEMS 2000          /* held writes per transaction when flushing */
#define STORE_FLUSH_BYTES (8u << 20)    /* ...and bytes */

struct store;

/* One failure as the checker reported it. Strings may be NULL. */
struct store_failure {
	uint64_t instance_id;    /* the instance */
	const char *spec;        /* spec file */
	const char *assertion;   /* label, NULL if unlabelled */
	int line;                /* line of the assertion in the spec */
	const char *result;      /* "fail" or "undefined" */
	const char *kind;        /* "interval", "event" or "assertion" (whole log) */
	const char *type;        /* interval or event type */
	int64_t uid;             /* the interval's uid (-1: none) */
	const char *start;       /* start position "R.S" as the checker said */
	const char *end;         /* end position */
	uint64_t start_pos;      /* start record ordinal in the whole stream (0: none) */
	uint64_t end_pos;        /* end record ordinal in the whole stream */
	bool has_ts;             /* start_ts/end_ts are known */
	int64_t start_ts;        /* interval start, log ticks */
	int64_t end_ts;          /* interval end, log ticks */
	double time;             /* wall-clock time it was reported */
	double start_wall;       /* the interval's start mapped to wall-clock time (0: unknown) */
	const char *metrics;     /* metrics as a JSON object text */
	uint64_t window_id;      /* its log window (0: none) */
	bool report;             /* from a report assertion (statistics) */
	uint64_t silence_id;     /* the silence that kept it quiet (0: none) */
	const char *am_silence;  /* ...or the Alertmanager silence (its id), or NULL */
};

/* A silence: failures matching every given pattern (glob(7); NULL or ""
 * matches anything) are stored but not mailed or alerted until `until`. */
struct store_silence {
	uint64_t id;             /* its id */
	double created;          /* when it was added */
	double until;            /* when it ends */
	const char *prog;        /* program pattern, or NULL */
	const char *machine;     /* machine pattern, or NULL */
	const char *assertion;   /* assertion label pattern, or NULL */
	const char *comment;     /* why, or NULL */
};

/* Rows store_prune() deleted, by table. */
struct store_pruned {
	uint64_t failures;       /* failures */
	uint64_t windows;        /* their log windows */
	uint64_t verdicts;       /* end-of-log verdicts and interval summaries */
	uint64_t mail;           /* mails, digest entries and alerts never sent */
	uint64_t silences;       /* silences that ended */
};

/* Open (creating or upgrading) the store: `target` if given (a
 * PostgreSQL URL, db.h), else the sqlite file DIR/telemonitor.db. NULL
 * with a message. */
struct store *store_open(const char *dir, const char *target, char *err, size_t errlen);

/* "sqlite" or "postgresql". */
const char *store_engine(const struct store *st);

/* Commit and close; accepts NULL. */
void store_close(struct store *st);

/* Commit the open batch, if any. 0: committed (or nothing to commit);
 * -EAGAIN: the store is degraded and the writes are held in memory. */
int store_commit(struct store *st);

/* Make the writes that wait for the commit (failures and windows,
 * store_add_failure) so that reads on this connection see them: in the
 * open batch, or, on a shared store (whose writes are made at a commit
 * only, in a transaction no loop turn leaves open), by committing. 0, or
 * -EAGAIN if the store became degraded (the writes are held). */
int store_flush(struct store *st);

/* Called when a batch ends: `committed` is true if it is on disk, false
 * if the store became degraded and holds its writes in memory (they are
 * stored, in order, when it recovers, unless the backlog's bounds drop
 * them). */
typedef void (*store_commit_cb)(void *arg, bool committed);

/* Set (or clear, with NULL) the commit callback. */
void store_set_commit_cb(struct store *st, store_commit_cb cb, void *arg);

/* True if a batch is open, or writes wait for the next commit. */
bool store_pending(const struct store *st);

/* Hold at most `max_failures` failures while degraded (1..STORE_BACKLOG_MAX). */
void store_set_backlog(struct store *st, size_t max_failures);

/* Called after a new database was opened in place of one that was deleted
 * or replaced: record the live state (classes, instances) again. Its
 * writes join the held ones; they are upserts of whole rows, so their
 * place in the order does not matter. */
typedef void (*store_reopen_cb)(void *arg);

/* Set (or clear, with NULL) the reopen callback. */
void store_set_reopen_cb(struct store *st, store_reopen_cb cb, void *arg);

/* Every TM_FLUSH_MS: notice a deleted database file (once a second),
 * retry a degraded store when its backoff is over, and say loudly (every
 * STORE_REPORT_S) that it is still degraded. */
void store_poll(struct store *st, double now);

/* Retry a degraded store now: reopen the database if it vanished, then
 * store the held writes in order. 0 if the store is (now) healthy. */
int store_retry(struct store *st, double now);

/* True while writes are held in memory. */
bool store_degraded(const struct store *st);

/* The store's health, for telemonctl status and sd_notify. */
struct store_health {
	const char *engine;      /* "sqlite" or "postgresql" */
	const char *node;        /* this telemonitor's node name on a shared store, else NULL */
	bool degraded;           /* writes are held in memory */
	const char *reason;      /* "disk full", "read-only", "database deleted", ... ("" when ok) */
	const char *detail;      /* what the engine or the system said ("" when ok) */
	double since;            /* when it became degraded (0 when ok) */
	double next_retry;       /* when it tries again (0 when ok) */
	unsigned attempts;       /* retries since it became degraded */
	size_t pending;          /* writes held */
	size_t pending_failures; /* failures among them */
	size_t pending_bytes;    /* memory they take */
	size_t limit;            /* store-backlog: failures held at most */
	uint64_t dropped;        /* writes dropped since start (bounds, or refused on retry) */
	uint64_t dropped_failures; /* failures among them */
	uint64_t dropped_mail;   /* mail rows among them */
	uint64_t outages;        /* times it became degraded since start */
	uint64_t rejected;       /* writes refused for a reason of their own since start */
};

/* Fill `h`; its strings are valid until the next store call. */
void store_health(const struct store *st, struct store_health *h);

/* "ok" or "degraded: disk full; 12 failures pending (40 writes), 0
 * dropped" for logs and sd_notify. */
const char *store_health_line(const struct store *st, char *buf, size_t size);

/* Record class `c` (marked active). A class without an id gets the id of
 * the stored class with its prog, machine and pid, else a new one; a
 * class with an id replaces that row (and any other with its key). */
int store_class_save(struct store *st, struct tm_class *c);

/* Mark every class not in `keep` (ids, n) inactive. */
int store_classes_keep(struct store *st, const uint32_t *keep, size_t n);

/* Find instance `in` by its key (prog, machine, pid, start_ns): 1 and its
 * id, first_seen, counters and want flag filled in; 0 if unknown. */
int store_instance_lookup(struct store *st, struct tm_instance *in);

/* Insert `in` (sets in->id, and in->first_seen if 0). */
int store_instance_insert(struct store *st, struct tm_instance *in);

/* A new instance `in` (its key, class, endpoint...): its row found by its
 * key (1: its id and counts into `in`; on a shared store, added by
 * another node or before a restart) or added (0). <0 on error. */
int store_instance_add(struct store *st, struct tm_instance *in);

/* Save `in`: the whole row (an upsert), so it also puts back a row lost
 * with a deleted database. */
int store_instance_save(struct store *st, const struct tm_instance *in);

/* Called for each instance not yet ended, with its saved fields. */
typedef void (*store_instance_cb)(void *arg, struct tm_instance *in);

/* List the instances that had not ended when we stopped. */
int store_instances_open(struct store *st, store_instance_cb cb, void *arg);

/* Save `in` marked ended at `when` with state `state` (an instance ends
 * once: a later save keeps the first end time). */
int store_instance_end(struct store *st, const struct tm_instance *in, enum inst_state state,
		       double when);

/* Mark every not-ended instance whose id is not in `live` ended ("gone").
 * On a shared store, not one another node holds, nor one first seen at
 * `when` or later: the reap is made at the next commit, and a row another
 * node (or this one) added since this node's registry list was complete
 * is of a live program that list did not have yet (two telemonitors
 * started at once: one reaped the instance the other had just added and
 * nobody had claimed yet, and its log was never read). first_seen is the
 * adding node's clock: nodes whose clocks differ by more than the moments
 * between a list and its commit narrow that guard by the difference. */
int store_instances_reap(struct store *st, const uint64_t *live, size_t n, double when);

/* Add a failure; *id gets its id. Its row is made at the next commit
 * (or store_flush), with the other failures of the batch; a row the
 * database refuses then is logged, dropped and counted (`rejected`). */
int store_add_failure(struct store *st, const struct store_failure *f, uint64_t *id);

/* A fresh window id (windows are numbered before they are stored). */
uint64_t store_next_window_id(struct store *st);

/* Store a finished log window. */
int store_add_window(struct store *st, uint64_t id, uint64_t instance_id, uint64_t from,
		     uint64_t to, bool truncated, const char *text, size_t len);

/* Record one summary of an interval type's duration metric (pcheck
 * --summaries: the intervals that closed since the last one): count, sum,
 * sum of squares, min, max and the sketch's JSON text. */
int store_add_summary(struct store *st, uint64_t instance_id, double time, const char *type,
		      const char *metric, int64_t count, double sum, double sumsq, double min,
		      double max, const char *sketch);

/* Record a checker's end-of-log verdict for one assertion, over records
 * `from` to `to` of the log (0: unknown); `partial` when that is not the
 * whole log (its checker started past the first record, or the instance
 * went to another telemonitor before its end). */
int store_add_verdict(struct store *st, uint64_t instance_id, const char *spec,
		      const char *assertion, int line, const char *result, int64_t offenders,
		      double time, uint64_t from, uint64_t to, bool partial);

/* Mail not sent yet. A mail is queued in the same batch as the failures
 * it reports, and deleted once the relay has accepted it (or it was
 * dropped): what is in mail_queue when we start must still be sent. */

/* Queue a mail; *id gets its id. */
int store_mail_add(struct store *st, const char *to, const char *subject, const char *body,
		   size_t count, double queued, uint64_t *id);

/* Mail `id` was accepted by the relay (or dropped): forget it. */
int store_mail_done(struct store *st, uint64_t id);

/* Called for each queued mail, oldest first; strings are valid during the call. */
typedef void (*store_mail_cb)(void *arg, uint64_t id, double queued, const char *to,
			      const char *subject, const char *body, size_t count);

/* List the queued mails. */
int store_mail_load(struct store *st, store_mail_cb cb, void *arg);

/* Keep failure notice `it` until the digest of its group, due at `due`. */
int store_digest_add(struct store *st, const struct digest_item *it, double due);

/* The digest of group (instance, assertion label or NULL, line) was
 * composed (and queued in the same batch): forget its failures. */
int store_digest_done(struct store *st, uint64_t instance_id, const char *assertion, int line);

/* Called for each failure waiting for a digest, oldest first, with the
 * time the digest is due; `it`'s strings are valid during the call, its
 * `ctl` is the argument given to store_digest_load(). */
typedef void (*store_digest_cb)(void *arg, const struct digest_item *it, double due);

/* List the failures waiting for a digest. */
int store_digest_load(struct store *st, const char *ctl, store_digest_cb cb, void *arg);

/* Schema version of the open database. */
int store_version(struct store *st);

/* Add silence `s` (its id is given out here, into *id). */
int store_silence_add(struct store *st, const struct store_silence *s, uint64_t *id);

/* Mark silence `id` removed at `when`. */
int store_silence_remove(struct store *st, uint64_t id, double when);

/* Called for each silence not removed and not ended at `now`. */
typedef void (*store_silence_cb)(void *arg, const struct store_silence *s);
int store_silences_load(struct store *st, double now, store_silence_cb cb, void *arg);

/* Acknowledge failure `failure_id` at `when` with `comment` (may be NULL). */
int store_ack(struct store *st, uint64_t failure_id, double when, const char *comment);

/* Retention: delete at most `limit` rows of each kind older than `before`
 * (failures with their windows, verdicts, unsent mail, ended silences), in
 * the open batch. 0 with the counts in *out; -EAGAIN while degraded
 * (nothing is pruned until the held writes are stored). */
int store_prune(struct store *st, double before, size_t limit, struct store_pruned *out);

/* Alertmanager (alerts.h): queue a POST of `body` (a JSON array of alerts)
 * to `url`; its id into *id. */
int store_alert_add(struct store *st, const char *url, const char *body, double queued,
		    uint64_t *id);

/* The Alertmanager accepted POST `id`: forget it. */
int store_alert_done(struct store *st, uint64_t id);

/* Called for each POST not accepted yet, oldest first. */
typedef void (*store_alert_cb)(void *arg, uint64_t id, double queued, const char *url,
			       const char *body);
int store_alert_load(struct store *st, store_alert_cb cb, void *arg);

/* Remember the alert (a JSON object as posted, without endsAt) sent for
 * failure `failure_id` of instance `instance_id` and assertion `name`, to
 * resolve it at `ends` (the failure's time + resolve-after) or when the
 * instance ends, whichever comes first. It replaces the open alert of an
 * earlier failure of the same instance and assertion: one alert per pair,
 * whose end moves with its last failure. */
int store_alert_open(struct store *st, uint64_t failure_id, uint64_t instance_id, const char *url,
		     const char *alert, const char *name, double ends);

/* Forget the open alert of failure `failure_id` (it was resolved). */
int store_alert_close(struct store *st, uint64_t failure_id);

/* An open alert: its failure (0 for live ones), Alertmanager, the alert
 * object, and when its instance ended (0 for live ones). */
typedef void (*store_open_alert_cb)(void *arg, uint64_t failure_id, const char *url,
				    const char *alert, double ended);

/* At most `limit` open alerts to resolve: their instance has ended (or is
 * unknown: they end at `now`), or their `ends` (last failure +
 * resolve-after) has come; `ended` is when they end (the earlier). */
int store_alerts_ended(struct store *st, double now, size_t limit, store_open_alert_cb cb,
		       void *arg);

/* At most `limit` open alerts of live instances not yet at their end,
 * newest first; `ended` is their `ends` (0: none). */
int store_alerts_live(struct store *st, size_t limit, store_open_alert_cb cb, void *arg);

/* Several telemonitors on one store (PostgreSQL; store_fleet.c). Each has
 * a node name (-node, default HOST:STATE_DIR). Ids are handed out from
 * blocks of STORE_ID_BLOCK a telemonitor takes from the database's
 * sequence, so no two hand out the same; a class's id comes from the
 * server (its key's row, else the sequence cmon_class_ids), so nodes
 * started together from one telemonrc agree on it.
 *
 * An instance is monitored by one node, the holder of its lease: a row of
 * `leases` with the owner, an epoch every claim raises, and an end time on
 * the server's clock. New instances are added once (ON CONFLICT DO
 * NOTHING, the row read back by the others); store_instance_claim() takes
 * a lease nobody holds, or one whose end has passed, FOR UPDATE SKIP
 * LOCKED; the holder renews the leases it holds in one statement a second,
 * and only those: a lease in its name it no longer holds (one an earlier
 * run of it held, or one it let go of without a word to the server) runs
 * out, and is taken over like any other.
 * Claims and renewals run on a connection of their own, in autocommit,
 * never behind a batch. Every write that belongs to an instance (its row,
 * failures, windows, verdicts, summaries, digests, open alerts) carries
 * this node's name and epoch and goes in only while the lease row says
 * so (the fence), so a node that lost an instance can no longer write for
 * it, whatever it believes. On sqlite there is one telemonitor: every
 * claim succeeds and nothing is leased. */
#define STORE_ID_BLOCK (1ull << 20)  /* ids per block */
#define STORE_LEASE_S 3.0            /* an instance's lease, from its last renewal, on the
                                        server's clock: shorter than snarflog's -drain (5 s), so
                                        that a log ending while its holder is dead is still
                                        handed over */

/* Name this telemonitor; on PostgreSQL, take its first block of ids and
 * open the coordination connection. */
int store_set_node(struct store *st, const char *node);

/* True if the store is shared (leases and id blocks are in use). */
bool store_shared(const struct store *st);

/* This telemonitor's node name. */
const char *store_node(const struct store *st);

/* Make sure instance `in` (its key, class, endpoint...) has a row: added
 * with id `new_id` (0: the row is known to be missing), or, if a row
 * with its key exists (another node added it, or it ran before), that
 * row's id and counts into `in`. 0 added, 1 found, -EAGAIN. */
int store_instance_ensure(struct store *st, struct tm_instance *in, uint64_t new_id);

/* Claim instance `id` for this node: 1 if it is ours now (its new epoch
 * in *epoch), 0 if another node holds it (or a batch of the old holder is
 * still writing: try again later), -EAGAIN when the server cannot be
 * reached. On sqlite always 1 (epoch 0). */
int store_instance_claim(struct store *st, uint64_t id, uint64_t *epoch);

/* Called with an instance id and this node's epoch on it. */
typedef void (*store_lease_cb)(void *arg, uint64_t id, uint64_t epoch);

/* Take in the keeper's last renewal of the leases this node holds (one
 * statement a second, on its own thread); `cb` gets each it still holds
 * with the epoch it claimed (another epoch: lost). 0, or -EAGAIN when the
 * server cannot be reached. */
int store_lease_renew(struct store *st, store_lease_cb cb, void *arg);

/* True while this node's leases surely hold: less than a lease (less a
 * margin) since it sent its last good renewal, on its monotonic clock.
 * Past it, the node writes nothing for its instances (the others may take
 * them over). Always true on sqlite. */
bool store_lease_safe(const struct store *st);

/* Where this node's leases stand (store_lease_state). */
enum store_lease_state {
	LEASES_SAFE,             /* renewed less than a lease (less a margin) ago */
	LEASES_OUTAGE,           /* not renewed since: the server could not be reached (no other
	                            node can take them over while so: carry on, writes held) */
	LEASES_UNSURE,           /* not renewed since, and no renewal tried since then (this node
	                            was stopped or starved): another node may hold them now, so
	                            no log is taken in until the next renewal says */
};

/* Where this node's leases stand now (LEASES_SAFE on sqlite, or holding none). */
enum store_lease_state store_lease_state(const struct store *st);

/* Called with an instance id, its last holder (NULL: none, or it let go)
 * and the epoch of its last claim (0: never claimed). */
typedef void (*store_id_cb)(void *arg, uint64_t id, const char *owner, uint64_t epoch);

/* At most `limit` (64) live instances nobody holds: never claimed, let go,
 * or whose holder's lease ended (server time), this node's name among the
 * holders (a lease an earlier run of it held). Oldest first (first_seen):
 * in a burst the ones waiting longest are claimed first as room frees; in
 * id order, the ids of the node whose block is highest waited behind every
 * newer instance, and short programs' logs were lost past snarflog -hold. */
int store_leases_expired(struct store *st, size_t limit, store_id_cb cb, void *arg);

/* Let instance `id` go (handed over, or ended): its lease has no owner,
 * and this node's epoch on it is forgotten. */
int store_lease_release(struct store *st, uint64_t id);

/* Forget this node's epoch on `id` (lost to another node, or its lease
 * left to run out: it is no longer renewed). */
void store_lease_forget(struct store *st, uint64_t id);

/* (struct store_fleet: telemonitor.h) */
/* Say this node is alive (with `sessions` monitored of `capacity`) and
 * count the fleet. 0, or -EAGAIN. */
int store_fleet_beat(struct store *st, size_t sessions, size_t capacity, struct store_fleet *out);

/* Adopt what telemonitor `from` queued and did not send: they become this
 * node's, and each row goes to its callback, as at a start. Called after
 * taking over an instance from `from`. 0, -EAGAIN while degraded, -EIO.
 * Its mail and the failures waiting for its digests (a NULL callback:
 * that kind is left where it is): */
int store_adopt_mail(struct store *st, const char *from, const char *ctl, store_mail_cb mail_cb,
		     store_digest_cb digest_cb, void *arg);
/* Its Alertmanager POSTs (to `cb`) and open alerts (resolved by our sweep). */
int store_adopt_alerts(struct store *st, const char *from, store_alert_cb cb, void *arg);

/* Read instance `id`'s row into *in: 1, 0 if there is none, <0 on error. */
int store_instance_get(struct store *st, uint64_t id, struct tm_instance *in);

#endif
