/* The record buffer (see buffer.h). */
#include "buffer.h"
#include "cmon/logfmt.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PREFAULT_MAX (32u << 20)   /* bytes of a buffer touched at start */

/* Touch the pages of `p` now (up to PREFAULT_MAX bytes), so that their
 * page faults are taken at start rather than while the program writes its
 * log. (A plain memset after malloc may become calloc and touch nothing.) */
static void prefault(void *p, size_t len)
{
	volatile uint8_t *b = p;

	for (size_t i = 0; i < len && i < PREFAULT_MAX; i += 4096)
		b[i] = 0;
}

int ring_init(struct ring *r, size_t cap, Cmon__Format fmt)
{
	memset(r, 0, sizeof *r);
	r->icap = cap / 16 > 64 ? cap / 16 : 64;
	r->mem = malloc(cap);
	r->ends = malloc(r->icap * sizeof *r->ends);
	if (!r->mem || !r->ends) {
		ring_free(r);
		return -ENOMEM;
	}
	prefault(r->mem, cap);
	prefault(r->ends, r->icap * sizeof *r->ends);
	r->cap = cap;
	r->fmt = fmt;
	return 0;
}

void ring_free(struct ring *r)
{
	free(r->mem);
	free(r->ends);
	memset(r, 0, sizeof *r);
}

/* Move the tail (and the staged bytes after it) to offset `to`. */
static void move_tail(struct ring *r, size_t to)
{
	if (r->staged && r->tail != to)
		memmove(r->mem + to, r->mem + r->tail, r->staged);
	r->tail = to;
}

static void reset_if_empty(struct ring *r)
{
	if (r->nrec == 0) {
		move_tail(r, 0);
		r->head = r->wrap = r->used = 0;
		r->wrapped = false;
		r->ifirst = 0;
	}
}

/* Index slot `k` records after the oldest. */
static size_t slot(const struct ring *r, uint64_t k)
{
	size_t s = r->ifirst + (size_t)k;

	return s >= r->icap ? s - r->icap : s;
}

/* Remove the `n` oldest records; they all lie in the run starting at head
 * (ring_push drops one at a time, ring_consume what ring_peek returned). */
static void drop_front(struct ring *r, uint64_t n)
{
	size_t end = r->ends[slot(r, n - 1)];

	r->used -= end - r->head;
	r->head = end;
	if (r->wrapped && r->head == r->wrap) {
		r->head = 0;
		r->wrapped = false;
		r->wrap = 0;
	}
	r->nrec -= n;
	r->front += n;
	r->ifirst = slot(r, n);
	reset_if_empty(r);
}

/* The records held now up to the newest may weigh other than one each
 * (a single record: of any kind). */
static void mark_mixed(struct ring *r)
{
	r->mixed_end = r->front + r->nrec;
}

bool ring_fits(const struct ring *r, size_t len)
{
	if (r->nrec == 0)
		return len <= r->cap;
	if (r->nrec == r->icap)
		return false;
	if (r->wrapped)
		return r->tail + len <= r->head;
	return r->tail + len <= r->cap || len <= r->head;
}

/* How many of the oldest records (all in the run starting at head) to drop
 * to free at least `want` bytes, or all of that run: a binary search over
 * their end offsets, which increase along the run. */
static uint64_t front_run_count(const struct ring *r, size_t want)
{
	size_t run_end = r->wrapped ? r->wrap : r->tail;
	uint64_t lo = 1, hi = r->nrec;

	/* Records of the head run are the first ones whose ends grow past head. */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		size_t e = r->ends[slot(r, mid - 1)];
		bool in_run = e > r->head && e <= run_end;
		if (in_run && e - r->head >= want)
			hi = mid;
		else if (in_run)
			lo = mid + 1;
		else
			hi = mid;          /* past the wrap: stop at the run's end */
	}
	if (lo > 1) {
		size_t e = r->ends[slot(r, lo - 1)];
		if (!(e > r->head && e <= run_end))
			lo--;              /* the last record of the run */
	}
	return lo;
}

/* What the `n` oldest records (in the run starting at head) stand for in
 * the program's log: a gap marker for its count, a comment for nothing. */
uint64_t ring_front_weight(const struct ring *r, uint64_t n)
{
	struct cmon_tally t = { 0 };
	size_t end;

	if (n == 0)
		return 0;
	if (r->front >= r->mixed_end)
		return n;              /* from runs only: events, one each */
	end = r->ends[slot(r, n - 1)];
	cmon_log_tally(r->fmt, r->mem + r->head, end - r->head, SIZE_MAX, &t);
	return cmon_tally_weight(&t);
}

/* Drop oldest records until a record of `len` bytes fits; returns what
 * they stood for (records as a consumer counts them, cmon_log_tally). */
static uint64_t make_room(struct ring *r, size_t len)
{
	uint64_t dropped = 0;

	/* Make room in batches of a sixteenth of the buffer, so that a flood
	 * pays for dropping once per batch, not once per record. The room
	 * must be in one piece where the record goes: after the tail when
	 * wrapped, else (it did not fit at the end) at the start. */
	while (!ring_fits(r, len)) {
		size_t want = r->cap / 16 > len ? r->cap / 16 : len;
		size_t upto = (r->wrapped ? r->tail : 0) + want;
		uint64_t k = front_run_count(r, upto > r->head ? upto - r->head : 1);

		if (r->nrec == r->icap && k < r->icap / 16) {
			uint64_t run = front_run_count(r, SIZE_MAX);
			k = run < r->icap / 16 ? run : r->icap / 16;
		}
		dropped += ring_front_weight(r, k);
		drop_front(r, k);
	}
	return dropped;
}

/* Where a record of `len` bytes that fits goes: wrap to 0 if needed. */
static void place(struct ring *r, size_t len)
{
	if (r->nrec == 0) {
		move_tail(r, 0);
		r->head = 0;
	} else if (!r->wrapped && r->tail + len > r->cap) {
		r->wrap = r->tail;
		r->wrapped = true;
		move_tail(r, 0);
	}
}

uint64_t ring_push(struct ring *r, const void *rec, size_t len)
{
	uint64_t dropped;

	assert(r->staged == 0);
	dropped = make_room(r, len);

	place(r, len);
	memcpy(r->mem + r->tail, rec, len);
	r->tail += len;
	r->used += len;
	r->ends[slot(r, r->nrec)] = (uint32_t)r->tail;
	r->nrec++;
	mark_mixed(r);
	return dropped;
}

uint64_t ring_push_run(struct ring *r, const uint8_t *p, const uint32_t *ends, size_t n)
{
	uint64_t dropped = 0;
	size_t i = 0;

	assert(r->staged == 0);
	while (i < n) {
		size_t start = i ? ends[i - 1] : 0, limit, j, base;

		dropped += make_room(r, ends[i] - start);
		place(r, ends[i] - start);
		/* As many following records as fit in one piece, with no drop. */
		limit = (r->wrapped ? r->head : r->cap) - r->tail;
		for (j = i + 1; j < n && ends[j] - start <= limit && r->nrec + (j - i) < r->icap; j++)
			;
		memcpy(r->mem + r->tail, p + start, ends[j - 1] - start);
		base = r->tail - start;
		for (size_t k = i; k < j; k++)
			r->ends[slot(r, r->nrec + (k - i))] = (uint32_t)(base + ends[k]);
		r->tail += ends[j - 1] - start;
		r->used += ends[j - 1] - start;
		r->nrec += j - i;
		i = j;
	}
	return dropped;
}

size_t ring_peek(const struct ring *r, size_t max, const uint8_t **p, uint64_t *nrec)
{
	size_t run_end, end = r->head;
	uint64_t n = 0;

	*p = r->mem + r->head;
	*nrec = 0;
	if (r->nrec == 0)
		return 0;
	run_end = r->wrapped ? r->wrap : r->tail;
	while (n < r->nrec) {
		size_t e = r->ends[slot(r, n)];
		if (e <= end || e > run_end)
			break;                 /* next record starts the wrapped run */
		if (n > 0 && e - r->head > max)
			break;
		end = e;
		n++;
	}
	*nrec = n;
	return end - r->head;
}

void ring_consume(struct ring *r, size_t len, uint64_t nrec)
{
	if (nrec)
		drop_front(r, nrec);
	(void)len;
}

uint64_t ring_weight(const struct ring *r)
{
	struct cmon_tally t = { 0 };

	if (r->nrec == 0)
		return 0;
	if (r->front >= r->mixed_end)
		return r->nrec;        /* from runs only: events, one each */
	if (r->wrapped) {
		cmon_log_tally(r->fmt, r->mem + r->head, r->wrap - r->head, SIZE_MAX, &t);
		cmon_log_tally(r->fmt, r->mem, r->tail, SIZE_MAX, &t);
	} else {
		cmon_log_tally(r->fmt, r->mem + r->head, r->tail - r->head, SIZE_MAX, &t);
	}
	return cmon_tally_weight(&t);
}

uint64_t ring_clear(struct ring *r)
{
	uint64_t dropped = 0;

	/* run by run (a wrapped buffer holds two), each weighed as it goes */
	while (r->nrec) {
		uint64_t k = front_run_count(r, SIZE_MAX);

		dropped += ring_front_weight(r, k);
		drop_front(r, k);
	}
	return dropped;
}

uint8_t *ring_stage_room(struct ring *r, size_t want, bool drop, size_t *room,
			 uint64_t *dropped)
{
	size_t avail;

	*dropped = 0;
	if (want > r->cap - r->staged)
		want = r->cap - r->staged;
	if (drop) {
		*dropped = make_room(r, r->staged + want);
		place(r, r->staged + want);
		avail = want;
	} else if (r->nrec == 0) {
		place(r, 0);
		avail = r->cap - r->staged;
	} else if (r->wrapped) {
		avail = r->head - r->tail - r->staged;
	} else {
		avail = r->cap - r->tail - r->staged;
		if (avail < want && r->head > r->staged && r->head - r->staged > avail) {
			r->wrap = r->tail;           /* more room at the start */
			r->wrapped = true;
			move_tail(r, 0);
			avail = r->head - r->staged;
		}
	}
	*room = avail < want ? avail : want;
	return r->mem + r->tail + r->staged;
}

void ring_stage_grow(struct ring *r, size_t n)
{
	r->staged += n;
}

uint8_t *ring_staged(const struct ring *r, size_t *len)
{
	*len = r->staged;
	return r->mem + r->tail;
}

size_t ring_stage_commit(struct ring *r, const uint32_t *ends, size_t n, bool drop,
			 uint64_t *dropped)
{
	size_t i = 0;

	*dropped = 0;
	while (i < n) {
		size_t start = i ? ends[i - 1] : 0, j, base, len;

		if (r->nrec == r->icap) {
			if (!drop)
				break;
			*dropped += make_room(r, 0);     /* the index is full: a batch */
		}
		j = n - i < r->icap - r->nrec ? n : i + (r->icap - r->nrec);
		base = r->tail - start;
		for (size_t k = i, at = slot(r, r->nrec); k < j;) {
			/* up to the end of the index, then from its start */
			size_t m = j - k < r->icap - at ? j - k : r->icap - at;
			for (size_t x = 0; x < m; x++)
				r->ends[at + x] = (uint32_t)(base + ends[k + x]);
			k += m;
			at = 0;
		}
		len = ends[j - 1] - start;
		r->tail += len;
		r->used += len;
		r->staged -= len;
		r->nrec += j - i;
		i = j;
	}
	return i;
}

void ring_stage_clear(struct ring *r)
{
	r->staged = 0;
}
