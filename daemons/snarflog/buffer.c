/* The record buffer (see buffer.h). */
#include "buffer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cmon/logfmt.h"

int ring_init(struct ring *r, size_t cap, Cmon__Format fmt)
{
	memset(r, 0, sizeof *r);
	r->mem = malloc(cap);
	if (!r->mem)
		return -ENOMEM;
	r->cap = cap;
	r->fmt = fmt;
	return 0;
}

void ring_free(struct ring *r)
{
	free(r->mem);
	memset(r, 0, sizeof *r);
}

static void reset_if_empty(struct ring *r)
{
	if (r->nrec == 0) {
		r->head = r->tail = r->wrap = r->used = 0;
		r->wrapped = false;
	}
}

/* Length of the record at offset `at` (the buffer only holds whole ones). */
static size_t record_len(const struct ring *r, size_t at)
{
	size_t end = r->wrapped && at >= r->head ? r->wrap : r->tail;
	const uint8_t *p = r->mem + at;

	if (r->fmt == CMON__FORMAT__FORMAT_BINARY) {
		size_t hdr = 0;
		uint64_t body = 0;
		cmon_bin_frame(p, end - at, &hdr, &body);
		return hdr + (size_t)body;
	}
	return (size_t)((const uint8_t *)memchr(p, '\n', end - at) - p) + 1;
}

static void drop_oldest(struct ring *r)
{
	size_t len = record_len(r, r->head);

	r->head += len;
	r->used -= len;
	r->nrec--;
	if (r->wrapped && r->head == r->wrap) {
		r->head = 0;
		r->wrapped = false;
		r->wrap = 0;
	}
	reset_if_empty(r);
}

bool ring_fits(const struct ring *r, size_t len)
{
	if (r->nrec == 0)
		return len <= r->cap;
	if (r->wrapped)
		return r->tail + len <= r->head;
	return r->tail + len <= r->cap || len <= r->head;
}

uint64_t ring_push(struct ring *r, const void *rec, size_t len)
{
	uint64_t dropped = 0;

	while (!ring_fits(r, len)) {
		drop_oldest(r);
		dropped++;
	}
	if (r->nrec == 0) {
		r->head = r->tail = 0;
	} else if (!r->wrapped && r->tail + len > r->cap) {
		r->wrap = r->tail;
		r->wrapped = true;
		r->tail = 0;
	}
	memcpy(r->mem + r->tail, rec, len);
	r->tail += len;
	r->used += len;
	r->nrec++;
	return dropped;
}

size_t ring_peek(const struct ring *r, size_t max, const uint8_t **p, uint64_t *nrec)
{
	size_t end, len = 0;
	uint64_t n = 0;

	*p = r->mem + r->head;
	*nrec = 0;
	if (r->nrec == 0)
		return 0;
	end = r->wrapped ? r->wrap : r->tail;
	while (r->head + len < end) {
		size_t l = record_len(r, r->head + len);
		if (len > 0 && len + l > max)
			break;
		len += l;
		n++;
	}
	*nrec = n;
	return len;
}

void ring_consume(struct ring *r, size_t len, uint64_t nrec)
{
	r->head += len;
	r->used -= len;
	r->nrec -= nrec;
	if (r->wrapped && r->head == r->wrap) {
		r->head = 0;
		r->wrapped = false;
		r->wrap = 0;
	}
	reset_if_empty(r);
}

uint64_t ring_clear(struct ring *r)
{
	uint64_t n = r->nrec;

	r->nrec = 0;
	reset_if_empty(r);
	return n;
}
