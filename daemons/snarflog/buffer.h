/* A fixed-size buffer of whole log records, oldest first. Records are
 * stored contiguously and never wrap around the end of the memory, so any
 * run of them can be handed out as one piece; a small index of record end
 * offsets means dropping or counting records never rescans their bytes.
 * When a new record does not fit, the oldest whole records are dropped to
 * make room — a sixteenth of the buffer at a time, so that a flood costs
 * one drop per batch rather than per record. Holds at most `cap` bytes and
 * cap/16 records.
 *
 * The input may also read straight into the free space after the newest
 * record and turn those bytes into records where they lie, with no copy:
 * such "staged" bytes sit at [tail, tail + staged), are not records (not
 * peeked, counted or dropped) until committed, and move along when the
 * tail moves to the start of the memory. ring_push() and ring_push_run()
 * are only for when nothing is staged.
 *
 * What the functions that drop return is not a number of records held but
 * what the dropped ones stood for in the program's log (cmon_log_tally:
 * events 1, a gap marker its count, comments 0): the count a consumer is
 * told in LogGap. The runs of ring_push_run() and ring_stage_commit() are
 * events as cmon_log_tally counts them (binary: a Record whose first byte
 * is the event's tag; ascii: a line that starts with neither a blank nor
 * '#'), so that a stretch holding nothing else is weighed without reading
 * it again; ring_push() takes any record. */
#ifndef SNARFLOG_BUFFER_H
#define SNARFLOG_BUFFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmon.pb-c.h"

/* The buffer. Records live in [head, wrap) then [0, tail) when wrapped,
 * else in [head, tail). */
struct ring {
	uint8_t *mem;          /* cap bytes */
	size_t cap;            /* capacity in bytes */
	size_t head;           /* offset of the oldest record */
	size_t tail;           /* where the next record goes */
	size_t wrap;           /* end of the older run when wrapped */
	bool wrapped;          /* records continue at offset 0 */
	size_t used;           /* bytes of records held */
	size_t staged;         /* bytes read in place after tail, not yet records */
	uint64_t nrec;         /* records held */
	uint32_t *ends;        /* end offset of each record, circular, oldest at ifirst */
	size_t icap;           /* index capacity: most records held at once */
	size_t ifirst;         /* index slot of the oldest record */
	Cmon__Format fmt;      /* log format (for callers; the index finds boundaries) */
	uint64_t front;        /* ordinal of the oldest record: records ever removed */
	uint64_t mixed_end;    /* records with a lower ordinal may weigh other than 1 */
};

/* Allocate room for `cap` bytes of records of format `fmt`. 0 or -ENOMEM. */
int ring_init(struct ring *r, size_t cap, Cmon__Format fmt);

/* Release the memory; the ring can be initialised again. */
void ring_free(struct ring *r);

/* True if a record of `len` bytes fits without dropping anything. */
bool ring_fits(const struct ring *r, size_t len);

/* Store a record (0 < len <= cap), first dropping as many of the oldest
 * records as needed; returns what they stood for (see above). */
uint64_t ring_push(struct ring *r, const void *rec, size_t len);

/* Store `n` records lying back to back at `p`, record i ending at offset
 * ends[i] (each 0 < length <= cap); like n calls of ring_push() with one
 * copy per contiguous piece. Returns what the dropped records stood for. */
uint64_t ring_push_run(struct ring *r, const uint8_t *p, const uint32_t *ends, size_t n);

/* The oldest records as one contiguous piece of at most `max` bytes (but
 * always at least one whole record when any is held). Returns its length
 * (0 if empty) and the number of records in it. */
size_t ring_peek(const struct ring *r, size_t max, const uint8_t **p, uint64_t *nrec);

/* Forget the first `len` bytes / `nrec` records, as returned by ring_peek. */
void ring_consume(struct ring *r, size_t len, uint64_t nrec);

/* What the `n` oldest records (all in the piece ring_peek returns) stand
 * for in the program's log: n when they all came in runs. */
uint64_t ring_front_weight(const struct ring *r, uint64_t n);

/* What everything held stands for (see above), without dropping it. */
uint64_t ring_weight(const struct ring *r);

/* Drop everything; returns what it stood for (see above: a gap marker
 * its count, a comment nothing). */
uint64_t ring_clear(struct ring *r);

/* Room to read up to `want` more bytes in place, in one piece right after
 * the staged ones (moving those to the start of the memory if that is
 * where the room is). With `drop`, the oldest records are dropped as
 * needed so that all of `want` fits (capped at cap - staged) and
 * *dropped gets what they stood for; without, only free space is used. Returns where
 * the room starts; *room is its length (0: no room without dropping). */
uint8_t *ring_stage_room(struct ring *r, size_t want, bool drop, size_t *room,
			 uint64_t *dropped);

/* `n` bytes were written at the room ring_stage_room() gave. */
void ring_stage_grow(struct ring *r, size_t n);

/* The staged bytes; *len gets their number. */
uint8_t *ring_staged(const struct ring *r, size_t *len);

/* The first staged bytes are `n` records, record i ending at ends[i]
 * (offsets from the first staged byte, increasing): make them records.
 * When the index is full, drops the oldest records if `drop` (*dropped
 * gets what they stood for), else stops early. Returns how many were committed. */
size_t ring_stage_commit(struct ring *r, const uint32_t *ends, size_t n, bool drop,
			 uint64_t *dropped);

/* Forget the staged bytes (the caller has taken them elsewhere). */
void ring_stage_clear(struct ring *r);

#endif
