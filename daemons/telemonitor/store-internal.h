/* The store's connection, for the store's own modules (store.c, which
 * writes, and store_read.c, which answers the typed reads of
 * store_read.h). Only store*.c include this: SQL against the schema lives
 * there and nowhere else. */
#ifndef TELEMON_STORE_INTERNAL_H
#define TELEMON_STORE_INTERNAL_H

#include <limits.h>

#include "backlog.h"
#include "db.h"
#include "store.h"
#include "store_sql.h"
#include "wtext.h"

/* The store. */
struct store {
	char path[PATH_MAX];          /* DIR/telemonitor.db, or the PostgreSQL URL */
	struct conn c;                /* the connection */
	bool in_batch;                /* a write transaction is open */
	struct bl_list journal;       /* the writes of the open batch (or of a flush) */
	struct backlog bl;            /* writes held while degraded */
	bool degraded;                /* writes go to the backlog */
	char reason[64];              /* why, in a few words */
	char detail[300];             /* what the engine or the system said */
	double since;                 /* when it became degraded */
	double next_retry;            /* when to retry */
	double last_report;           /* when it last said it is degraded */
	double next_check;            /* when to look at the database file again */
	double next_compact;          /* when to give the journal's space back (compact) */
	unsigned attempts;            /* retries in this outage */
	uint64_t base_pushed[BK_NKINDS];  /* backlog counts when the outage began */
	uint64_t base_dropped[BK_NKINDS];
	bool drop_told;               /* the first drop of this outage was logged */
	uint64_t outages;             /* outages since start */
	uint64_t rejected;            /* writes refused for a reason of their own */
	uint64_t next_window;         /* next window id to hand out */
	uint64_t next_failure;        /* next failure id */
	uint64_t next_instance;       /* next instance id */
	uint64_t next_mail;           /* next mail id */
	uint64_t next_silence;        /* next silence id */
	uint64_t next_alert;          /* next alert_outbox id */
	uint32_t next_class;          /* next class id */
	char node[256];               /* this telemonitor's name among those sharing the store */
	bool shared;                  /* PostgreSQL: ids from blocks, instances leased */
	struct fleet *fleet;          /* shared: the coordination connection and this node's
	                                 epochs (store_fleet.c) */
	struct bl_list pending;       /* writes to make at the next commit: shared, all of them,
	                                 in one transaction (none stays open across loop
	                                 turns); sqlite, the failures, one after the other
	                                 (a row made alone between records found the b-trees
	                                 of the table, its indexes and its counts cold) */
	struct bl_list to_pack;       /* sqlite: windows whose text is packed at the next
	                                 commit, one after the other (zstd's tables and code
	                                 stay warm: 7-8 us a window packed alone) */
	const char *forced_reason;    /* the next degrade's reason, when not the engine's */
	uint64_t block_next;          /* shared: the next id of this telemonitor's block */
	uint64_t block_end;           /* ... and the end of the block */
	store_commit_cb on_commit;    /* called after each batch is ended */
	void *on_commit_arg;          /* its argument */
	store_reopen_cb on_reopen;    /* called after a new database was opened */
	void *on_reopen_arg;          /* its argument */
	struct wtext *pack;           /* sqlite: packs windows' text (wtext.h); NULL: as text */
};


/* --- store_fleet.c: several telemonitors on one store ----------------- */

/* Open the coordination connection (a second one to the same server, in
 * autocommit: claims and renewals never wait behind a batch). 0 or -EIO. */
int fleet_open(struct store *st, char *err, size_t errlen);

/* Close it and forget the epochs; accepts a store without one. */
void fleet_close(struct store *st);

/* The end of instance `id` is written (made at a commit to come): once
 * that commit is in (fleet_ended), its lease is no longer renewed. It
 * runs out, and nobody claims an instance that has ended; until then the
 * fence needs it. */
void fleet_ending(struct store *st, uint64_t id);

/* Every write made so far is committed: forget the epochs of the ended
 * instances (fleet_ending). */
void fleet_ended(struct store *st);

/* True if this node holds any lease. */
bool fleet_holds(const struct store *st);

/* This node's epoch on instance `id` (its claim), 0 if it holds none. */
uint64_t fleet_epoch(const struct store *st, uint64_t id);

/* The two values every write that belongs to instance `id` ends with on a
 * shared store, so that only the holder of its current epoch writes:
 * this node's name and its epoch (NULL and 0 on sqlite). */
void fleet_fence(const struct store *st, uint64_t id, struct bl_value out[2]);

/* A JSON array text of ids ("[1,2,3]"), from 64- or 32-bit ids (the other
 * NULL), read by each engine's own JSON function; NULL on ENOMEM. Pure:
 * the lease keeper's thread calls it too. */
char *store_id_list(const uint64_t *ids64, const uint32_t *ids32, size_t n);

/* The instance in the current row of an INST_LOOKUP_SQL query. */
void store_lookup_row(struct db_stmt *q, struct tm_instance *in);

/* The store's database connection (db.h). */
struct db *store_conn(struct store *st);

/* While degraded, the row of instance `id` as it is held in memory, not
 * yet stored: its values in the order of INST_PUT's parameters (*n of
 * them), or NULL when none is held. */
const struct bl_value *store_held_instance(const struct store *st, uint64_t id, unsigned *n);

/* While degraded, call cb(arg, id, v, n) for every instance row held in
 * memory (values as store_held_instance), oldest first. */
void store_held_instances(const struct store *st,
			  void (*cb)(void *arg, uint64_t id, const struct bl_value *v, unsigned n),
			  void *arg);

/* While degraded, the failures of instance `id` held in memory
 * (inconclusive ones not counted). */
int64_t store_held_failures(const struct store *st, uint64_t id);

#endif
