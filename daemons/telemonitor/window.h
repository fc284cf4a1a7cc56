/* Log windows: the part of a monitored log kept with a failure so that
 * someone can see (and re-check with pcheck) what happened.
 *
 * The rule: a window covers the failing interval from its start event, but
 * at most BEFORE (records, or log time) back from its end event, and then
 * AFTER more (records or log time) past the end. The `window` property
 * spells it "BEFORE [after AFTER]", e.g. "500", "30 sec", "500 after 50",
 * "2 min after 10 sec"; the default is "500 after 50".
 *
 * A session keeps the last records of its stream in a ring (as cmon-ascii
 * text lines, whatever the stream's format) and a list of windows waiting
 * for their AFTER part; it lets go of records as soon as the checker has
 * reported on everything BEFORE past them (window_release). Windows of failures close together are merged, up
 * to a size limit, so a burst of failures stores one window, not a window
 * per failure. Pure logic: no I/O, no event loop. */
#ifndef TELEMON_WINDOW_H
#define TELEMON_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Default window when a class does not say. */
#define WINDOW_DEFAULT "500 after 50"

/* Limits. */
#define WINDOW_MAX_RECORDS 100000        /* BEFORE or AFTER in records */
#define WINDOW_LAG_RECORDS 8192          /* extra records kept at most for a checker that
                                            lags (window_release lets go of them sooner) */
#define WINDOW_RING_MAX_RECORDS 131072   /* records one ring may hold */
#define WINDOW_RING_BYTES (2u << 20)     /* bytes one ring may hold */
#define WINDOW_RING_MIN_RECORDS 512      /* descriptors a ring starts with, shrinks to
                                            (it grows by half) */
#define WINDOW_RING_MIN_BYTES 16384      /* text bytes likewise */
#define WINDOW_PENDING_MAX 64            /* windows waiting for their AFTER part */
#define WINDOW_MERGE_FACTOR 4            /* a merged window spans at most this many windows */

/* How much log a window keeps. */
struct window_spec {
	uint64_t before_n;       /* records up to and including the end event (0: by time) */
	int64_t before_ns;       /* or log nanoseconds before the end event */
	uint64_t after_n;        /* records after the end event (0 with after_ns 0: none) */
	int64_t after_ns;        /* or log nanoseconds after the end event */
};

/* Parse "BEFORE [after AFTER]". 0, or -EINVAL with a message. */
int window_spec_parse(const char *text, struct window_spec *out, char *err, size_t errlen);

/* Parse a duration "N UNIT" (ns us ms s sec second(s) min minute(s) h hour(s)
 * day(s)) into seconds. 0 or -EINVAL. */
int window_parse_duration(const char *text, double *seconds);

/* One kept record, or a gap marker (24 bytes: a ring of a thousand
 * records is most of a stream's memory). */
struct window_rec {
	uint64_t pos;            /* 1-based ordinal of the record in the stream
	                            (gap markers: ordinal of the record before) */
	int64_t ts;              /* its timestamp in ticks (a gap marker: how many
	                            records were lost) */
	uint32_t off;            /* where its text starts in the byte ring, or
	                            WINDOW_REC_GAP for a gap marker */
	uint32_t len;            /* text length without the newline */
};
#define WINDOW_REC_GAP (UINT32_MAX - 1)

/* The number of lost records a gap marker stands for; 0 for a record. */
static inline uint64_t window_rec_gap(const struct window_rec *w)
{
	return w->off == WINDOW_REC_GAP ? (uint64_t)w->ts : 0;
}

/* A window waiting for its AFTER part. */
struct window_pending {
	uint64_t id;             /* caller's window id */
	uint64_t from_pos;       /* first record */
	uint64_t end_pos;        /* last end event covered (the latest failure's) */
	int64_t end_ts;          /* its timestamp */
	uint64_t start_pos;      /* first failure's end event (bounds merging) */
	double deadline;         /* wall-clock time by which it is stored anyway */
	unsigned failures;       /* failures sharing it */
	bool has_origin;         /* the checker's time origin is known: */
	int64_t origin;          /* the timestamp of its first record */
};

/* A finished window, ready to store. */
struct window_done {
	uint64_t id;             /* caller's window id */
	uint64_t from_pos;       /* first record in it */
	uint64_t to_pos;         /* last record in it */
	bool truncated;          /* records it should hold had left the ring */
	char *text;              /* cmon-ascii 1 text, header included (owned by caller) */
	size_t len;              /* its length */
};

/* The ring and pending windows of one stream. */
struct window_ring {
	struct window_spec spec; /* the class's rule */
	double tick_ns;          /* nanoseconds per tick of this log */
	char *header;            /* cmon-ascii header lines, '\n'-terminated (owned) */
	size_t header_len;       /* its length */
	char *label;             /* "#telemon-instance ..." line content (owned) */
	struct window_rec *recs; /* circular array of kept records */
	size_t cap;              /* its size */
	size_t max_recs;         /* most records kept */
	size_t head;             /* index of the oldest */
	size_t n;                /* records kept */
	char *bytes;             /* text of the kept records */
	size_t bcap;             /* its size */
	size_t bmax;             /* its largest allowed size */
	size_t w;                /* next write offset */
	size_t used;             /* bytes the kept texts occupy (counted as records come and
				    go: a release after every batch must not walk the ring) */
	bool oldest_known;       /* oldest_off..oldest_end is the text of the oldest kept record
				    whose text is not empty (kept as records come: a push need
				    not read that record, long out of the cache, to see it is
				    not in the way; dropping a text or moving the texts
				    forgets it) */
	uint32_t oldest_off, oldest_end;
	uint64_t last_pos;       /* ordinal of the newest record */
	uint64_t evicted_pos;    /* ordinal of the newest record dropped from the ring */
	struct window_pending pend[WINDOW_PENDING_MAX]; /* waiting windows */
	size_t npend;            /* how many */
	bool has_origin;         /* the current checker run's time origin is known: */
	int64_t origin;          /* the timestamp of the first record it read */
};

/* Set up `r` for a stream with rule `spec`; `max_bytes` 0 = default. */
void window_ring_init(struct window_ring *r, const struct window_spec *spec, size_t max_bytes);

/* Free everything `r` holds. */
void window_ring_free(struct window_ring *r);

/* Set the header written at the top of every window (cmon-ascii lines,
 * starting with "#cmon-ascii 1") and the tick length. 0 or -ENOMEM. */
int window_set_header(struct window_ring *r, const char *hdr, size_t len, double tick_ns,
		      const char *label);

/* Keep one record: its ordinal, timestamp and text (no newline). Windows
 * whose first record would be dropped are finished first and returned
 * through `done` (up to `max`; *ndone gets the count). 0 or -ENOMEM. */
int window_push(struct window_ring *r, uint64_t pos, int64_t ts, const char *text, size_t len,
		struct window_done *done, size_t max, size_t *ndone);

/* The checker has reported on every record up to `upto_pos`: no window
 * will need records more than BEFORE back from it, and those not in a
 * pending window leave the ring now; what the ring holds beyond four times
 * what it keeps is given back (a checker that lagged, a burst). */
void window_release(struct window_ring *r, uint64_t upto_pos);

/* Keep a gap marker for `count` records lost after record `pos`. */
int window_push_gap(struct window_ring *r, uint64_t pos, uint64_t count);

/* A failure of the interval from record `start_pos` to record `end_pos`
 * (end timestamp `end_ts`) was reported at wall time `now`. Returns the id
 * of the window that will hold it: a pending one it was merged into, or
 * `new_id` for a new one; 0 if no window can be kept (too many pending). */
uint64_t window_request(struct window_ring *r, uint64_t start_pos, uint64_t end_pos,
			int64_t end_ts, uint64_t new_id, double now, double max_wait);

/* Finish the windows whose AFTER part is complete, whose deadline has
 * passed, or all of them when `all` (end of stream). Up to `max` go to
 * `done`; returns how many. */
size_t window_collect(struct window_ring *r, double now, bool all, struct window_done *done,
		      size_t max);

/* Earliest pending deadline, or 0 if none. */
double window_next_deadline(const struct window_ring *r);

/* The checker now running read its first record at `ts`: windows asked
 * for from now on say so in a `#time-origin` header line, so that pcheck
 * places `every` intervals in the window where they were in the stream. */
void window_set_origin(struct window_ring *r, int64_t ts);

/* Render records [from, to] of the ring as window `pw` (used by the above;
 * exposed for tests). */
int window_render(const struct window_ring *r, const struct window_pending *pw, uint64_t from,
		  uint64_t to, struct window_done *out);

#endif
