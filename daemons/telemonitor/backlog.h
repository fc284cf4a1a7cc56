/* The store's backlog: writes the database could not take, kept in memory,
 * in order, until it can (store.c retries them).
 *
 * An item is one write: which statement and the values to bind, in one
 * allocation. Items of a keyed kind (an instance's row, a class's row, the
 * list of active classes) replace the pending item with the same key, so a
 * long outage holds one row per instance, not one update per second.
 *
 * Bounds, both enforced on every push:
 *   - at most `max_failures` failures: the oldest failure is dropped;
 *   - at most `max_bytes` bytes in all: the oldest item of an unkeyed kind
 *     (failure, window, verdict, mail, outage record) is dropped, and a
 *     keyed one only when nothing else is left.
 * Every drop is counted by kind. Pure data: no sqlite, no I/O, no logging. */
#ifndef TELEMON_BACKLOG_H
#define TELEMON_BACKLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

/* What a write is about (for bounds, counts and messages). */
#define BACKLOG_KINDS(X)                                  \
	X(BK_FAILURE, "failure", false)                   \
	X(BK_WINDOW, "window", false)                     \
	X(BK_VERDICT, "verdict", false)                   \
	X(BK_SUMMARY, "interval summary", false)          \
	X(BK_MAIL, "mail", false)                         \
	X(BK_OUTAGE, "outage", false)                     \
	X(BK_CONTROL, "silence or ack", false)            \
	X(BK_ALERT, "alert", false)                       \
	X(BK_INSTANCE, "instance", true)                  \
	X(BK_CLASS, "class", true)

/* X(enum name, spelling, keyed) */
enum backlog_kind {
#define BK_ENUM(e, s, k) e,
	BACKLOG_KINDS(BK_ENUM)
#undef BK_ENUM
	BK_NKINDS /* number of kinds */
};

/* A value to bind. */
enum bl_type { BV_NULL, BV_INT, BV_REAL, BV_TEXT, BV_BLOB };

/* One value; a text or blob is copied into the item by bl_item_new(). */
struct bl_value {
	enum bl_type type;       /* which member holds it */
	int64_t i;               /* BV_INT */
	double d;                /* BV_REAL */
	const char *s;           /* BV_TEXT, BV_BLOB: the bytes (NULL: empty) */
	size_t n;                /* BV_TEXT, BV_BLOB: their length */
};

/* One pending write. */
struct bl_item {
	TAILQ_ENTRY(bl_item) link;    /* in the backlog or a batch journal, oldest first */
	TAILQ_ENTRY(bl_item) kin;     /* among the backlog's items of its kind */
	struct bl_item *hnext;        /* next in its hash chain (keyed kinds) */
	uint64_t seq;                 /* push order, for "oldest" across kinds */
	enum backlog_kind kind;       /* what it is */
	int stmt;                     /* the statement (store.c's numbering) */
	uint64_t key;                 /* keyed kinds: which row */
	size_t bytes;                 /* memory it takes */
	unsigned nvals;               /* values in v */
	struct bl_value v[];          /* the values; texts follow in the same block */
};
TAILQ_HEAD(bl_list, bl_item);

#define BACKLOG_HASH 1024             /* hash buckets for keyed items */

/* The backlog. Initialise with backlog_init(). */
struct backlog {
	struct bl_list items;             /* every item, oldest first */
	struct bl_list by_kind[BK_NKINDS]; /* the same items by kind, oldest first */
	struct bl_item *hash[BACKLOG_HASH]; /* keyed items */
	size_t count[BK_NKINDS];          /* items held, by kind */
	size_t total;                     /* items held */
	size_t bytes;                     /* memory held */
	size_t max_failures;              /* bound on failures held */
	size_t max_bytes;                 /* bound on memory held */
	uint64_t pushed[BK_NKINDS];       /* items pushed since init (replacements too) */
	uint64_t dropped[BK_NKINDS];      /* items dropped to keep the bounds */
	uint64_t seq;                     /* next push number */
};

/* A new item holding copies of `n` values; NULL on ENOMEM. `key` is
 * used only by keyed kinds. */
struct bl_item *bl_item_new(enum backlog_kind kind, int stmt, uint64_t key,
			    const struct bl_value *v, unsigned n);

/* Free an item (not in a backlog); accepts NULL. */
void bl_item_free(struct bl_item *it);

/* An empty backlog with these bounds. */
void backlog_init(struct backlog *b, size_t max_failures, size_t max_bytes);

/* Append `it` (taken): it replaces a pending item with the same kind and
 * key, and the bounds are kept by dropping the oldest (see above). */
void backlog_push(struct backlog *b, struct bl_item *it);

/* Put the items of `l` (taken, in order) back at the front, ahead of
 * everything held; no replacement, no bounds (they were held before). */
void backlog_unshift(struct backlog *b, struct bl_list *l);

/* The held item of keyed kind `kind` with key `key`, or NULL. */
const struct bl_item *backlog_find(const struct backlog *b, enum backlog_kind kind, uint64_t key);

/* The oldest item, or NULL. */
struct bl_item *backlog_first(const struct backlog *b);

/* Take `it` out (it is not counted as dropped); the caller owns it. */
void backlog_remove(struct backlog *b, struct bl_item *it);

/* Free every item (not counted as dropped). */
void backlog_clear(struct backlog *b);

/* Spelling of a kind ("failure"). */
const char *backlog_kind_name(enum backlog_kind k);

#endif
