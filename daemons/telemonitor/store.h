/* The telemonitor's store: sqlite in WAL mode at DIR/telemonitor.db.
 *
 * Tables: classes, instances, failures, windows, verdicts, and the mail
 * not sent yet: mail_queue, mail_digest (see store.c for
 * the schema, versioned with PRAGMA user_version and upgraded by the
 * migrations listed there). Writes are batched: the first write after a
 * commit opens a transaction, and store_commit() (every TM_FLUSH_MS, and
 * before answering telemonctl) ends it, so a burst of failures costs one
 * commit, not one per failure. Queries on the same connection see every
 * write at once. */
#ifndef TELEMON_STORE_H
#define TELEMON_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "digest.h"
#include "telemonitor.h"

/* Schema version this program writes. */
#define STORE_SCHEMA_VERSION 3

/* Largest log window stored. */
#define STORE_WINDOW_MAX (8u << 20)

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
};

/* Open (creating or upgrading) DIR/telemonitor.db. NULL with a message. */
struct store *store_open(const char *dir, char *err, size_t errlen);

/* Commit and close; accepts NULL. */
void store_close(struct store *st);

/* The connection, for queries. */
sqlite3 *store_db(struct store *st);

/* Commit the open batch, if any. 0 or -EIO (the batch is lost and logged). */
int store_commit(struct store *st);

/* Called after every store_commit() that ended a batch; `committed` is
 * false if the batch was lost. */
typedef void (*store_commit_cb)(void *arg, bool committed);

/* Set (or clear, with NULL) the commit callback. */
void store_set_commit_cb(struct store *st, store_commit_cb cb, void *arg);

/* True if a batch is open. */
bool store_pending(const struct store *st);

/* Record class `c` (by prog, machine, pid; marked active); sets c->id. */
int store_class_save(struct store *st, struct tm_class *c);

/* Mark every class not in `keep` (ids, n) inactive. */
int store_classes_keep(struct store *st, const uint32_t *keep, size_t n);

/* Find instance `in` by its key (prog, machine, pid, start_ns): 1 and its
 * id, counters and want flag filled in; 0 if unknown. */
int store_instance_lookup(struct store *st, struct tm_instance *in);

/* Insert `in` (sets in->id). */
int store_instance_insert(struct store *st, struct tm_instance *in);

/* Save counters, state, status, class and want flag of `in`. */
int store_instance_save(struct store *st, const struct tm_instance *in);

/* Called for each instance not yet ended, with its saved fields. */
typedef void (*store_instance_cb)(void *arg, struct tm_instance *in);

/* List the instances that had not ended when we stopped. */
int store_instances_open(struct store *st, store_instance_cb cb, void *arg);

/* Mark instance `id` ended at `when` with state `state`. */
int store_instance_end(struct store *st, uint64_t id, enum inst_state state, double when);

/* Mark every not-ended instance whose id is not in `live` ended ("gone"). */
int store_instances_reap(struct store *st, const uint64_t *live, size_t n, double when);

/* Add a failure; *id gets its id. */
int store_add_failure(struct store *st, const struct store_failure *f, uint64_t *id);

/* The statement that takes one JSON report of the checker apart (bind
 * ?1; columns: print type, print, spec, assert, line, result, kind, type,
 * uid, start, end, start_ts type, start_ts, end_ts, metrics, offenders
 * type, offenders, metrics type). No row if the line is not a JSON object. */
sqlite3_stmt *store_report_stmt(struct store *st);

/* A fresh window id (windows are numbered before they are stored). */
uint64_t store_next_window_id(struct store *st);

/* Store a finished log window. */
int store_add_window(struct store *st, uint64_t id, uint64_t instance_id, uint64_t from,
		     uint64_t to, bool truncated, const char *text, size_t len);

/* Record a checker's end-of-log verdict for one assertion. */
int store_add_verdict(struct store *st, uint64_t instance_id, const char *spec,
		      const char *assertion, int line, const char *result, int64_t offenders,
		      double time);

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

#endif
