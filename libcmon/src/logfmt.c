/* Record boundaries and gap markers of the log formats (see cmon/logfmt.h). */
#include "cmon/logfmt.h"

#include "cmonlog.pb-c.h"

#include <stdio.h>
#include <string.h>

#include "varint.h"

/* Skip one field value of wire type `wt`; false if malformed. */
static bool skip_field(const uint8_t **pp, const uint8_t *end, unsigned wt)
{
	uint64_t v;

	switch (wt) {
	case 0:
		return cmon_varint_get(pp, end, &v);
	case 1:
		if (end - *pp < 8)
			return false;
		*pp += 8;
		return true;
	case 2:
		if (!cmon_varint_get(pp, end, &v) || v > (uint64_t)(end - *pp))
			return false;
		*pp += v;
		return true;
	case 5:
		if (end - *pp < 4)
			return false;
		*pp += 4;
		return true;
	default:
		return false;
	}
}

int cmon_bin_frame(const uint8_t *p, size_t n, size_t *hdr, uint64_t *body)
{
	uint64_t v = 0;

	for (size_t i = 0; i < 5; i++) {
		if (i >= n)
			return 0;
		v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			*hdr = i + 1;
			*body = v;
			return 1;
		}
	}
	return -1;
}

/* Walk the fields of a Record body; report the last oneof member and
 * where its payload is. */
static enum cmon_rec_kind record_walk(const uint8_t *p, size_t n, const uint8_t **sub,
				      size_t *sublen)
{
	const uint8_t *end;
	enum cmon_rec_kind kind = CMON_REC_EMPTY;

	if (n == 0)
		return kind;                  /* (and p may be NULL) */
	end = p + n;
	while (p < end) {
		uint64_t key, len;
		unsigned field, wt;
		if (!cmon_varint_get(&p, end, &key))
			return CMON_REC_BAD;
		field = (unsigned)(key >> 3);
		wt = (unsigned)(key & 7);
		if (field == 0)
			return CMON_REC_BAD;
		if (field >= CMON_REC_HEADER && field <= CMON_REC_OVERHEAD) {
			if (wt != 2 || !cmon_varint_get(&p, end, &len) || len > (uint64_t)(end - p))
				return CMON_REC_BAD;
			kind = (enum cmon_rec_kind)field;
			*sub = p;
			*sublen = (size_t)len;
			p += len;
		} else if (!skip_field(&p, end, wt)) {
			return CMON_REC_BAD;
		}
	}
	return kind;
}

enum cmon_rec_kind cmon_bin_record_kind(const uint8_t *p, size_t n)
{
	const uint8_t *sub = NULL;
	size_t sublen = 0;

	return record_walk(p, n, &sub, &sublen);
}

/* Timestamp fields of an Event body; false if its fields cannot be walked. */
static bool event_time(const uint8_t *sub, size_t sublen, struct cmon_event_time *t)
{
	const uint8_t *end = sub + sublen;
	struct cmon_event_time r = { 0 };

	while (sub < end) {
		uint64_t key, v;
		unsigned field, wt;
		/* One-byte keys are the common case: fields 1-15. */
		if (*sub < 0x80) {
			key = *sub++;
		} else if (!cmon_varint_get(&sub, end, &key)) {
			return false;
		}
		field = (unsigned)(key >> 3);
		wt = (unsigned)(key & 7);
		if ((field == 3 || field == 4) && wt == 0) {
			if (!cmon_varint_get(&sub, end, &v))
				return false;
			if (field == 3) {
				r.has_ts = true;
				r.ts = v;
				break;          /* an absolute ts makes ts_delta irrelevant */
			}
			r.has_delta = true;
			r.delta = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);   /* zigzag */
		} else if (wt == 0 && field != 0) {
			/* type, thread: skip a varint in place (at most 10 bytes) */
			const uint8_t *start = sub;
			while (sub < end && (*sub & 0x80) && sub - start < 9)
				sub++;
			if (sub >= end || (*sub & 0x80))
				return false;
			sub++;
		} else if (field == 0 || !skip_field(&sub, end, wt)) {
			return false;
		}
	}
	*t = r;
	return true;
}

bool cmon_bin_event_time(const uint8_t *p, size_t n, struct cmon_event_time *t)
{
	const uint8_t *sub = NULL;
	size_t sublen = 0;

	if (record_walk(p, n, &sub, &sublen) != CMON_REC_EVENT)
		return false;
	return event_time(sub, sublen, t);
}

enum cmon_rec_kind cmon_bin_record_scan(const uint8_t *p, size_t n, struct cmon_event_time *t)
{
	const uint8_t *sub = NULL;
	size_t sublen = 0;
	enum cmon_rec_kind k;

	/* Fast path: a Record holding exactly one length-delimited member whose
	 * one-byte key and one- or two-byte length cover the whole body. */
	if (n >= 2 && (p[0] & 7) == 2 && p[0] >= 0x0a && p[0] <= 0x2a) {
		size_t hdr = 2, len = p[1];
		if (p[1] & 0x80) {
			if (n < 3 || (p[2] & 0x80))
				goto slow;
			len = (size_t)(p[1] & 0x7f) | ((size_t)p[2] << 7);
			hdr = 3;
		}
		if (hdr + len != n)
			goto slow;
		k = (enum cmon_rec_kind)(p[0] >> 3);
		sub = p + hdr;
		sublen = len;
		goto found;
	}
slow:
	k = record_walk(p, n, &sub, &sublen);
found:
	if (k == CMON_REC_EVENT && !event_time(sub, sublen, t))
		return CMON_REC_BAD;
	return k;
}

Cmon__Format cmon_log_detect(const uint8_t *p, size_t n, bool eof)
{
	size_t hdr;
	uint64_t body;
	int r;

	if (n == 0)
		return eof ? CMON__FORMAT__FORMAT_ASCII : CMON__FORMAT__FORMAT_UNSPECIFIED;
	if (n >= 11 && memcmp(p, "#cmon-ascii", 11) == 0)
		return CMON__FORMAT__FORMAT_ASCII;
	r = cmon_bin_frame(p, n, &hdr, &body);
	if (r == 0 || (r == 1 && n == hdr))
		return eof ? CMON__FORMAT__FORMAT_ASCII : CMON__FORMAT__FORMAT_UNSPECIFIED;
	/* A binary log opens with a frame whose Record holds a Header (tag 0x0a). */
	if (r == 1 && body >= 2 && p[hdr] == 0x0a)
		return CMON__FORMAT__FORMAT_BINARY;
	return CMON__FORMAT__FORMAT_ASCII;
}

/* The bits set in m (without POPCNT, which baseline x86-64 lacks:
 * __builtin_popcountll is then a libgcc call). */
static inline uint64_t bits_set(uint64_t m)
{
	m -= (m >> 1) & 0x5555555555555555ull;
	m = (m & 0x3333333333333333ull) + ((m >> 2) & 0x3333333333333333ull);
	m = (m + (m >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (m * 0x0101010101010101ull) >> 56;
}

uint64_t cmon_log_count_records(Cmon__Format fmt, const uint8_t *p, size_t n, size_t *whole)
{
	const uint8_t *q = p, *end;
	uint64_t count = 0;

	*whole = 0;
	if (n == 0)
		return 0;
	end = p + n;
	if (fmt == CMON__FORMAT__FORMAT_BINARY) {
		for (;;) {
			size_t hdr;
			uint64_t body;
			if (cmon_bin_frame(q, (size_t)(end - q), &hdr, &body) != 1 ||
			    body > (uint64_t)(end - q) - hdr)
				break;
			q += hdr + body;
			count++;
		}
	} else {
		const uint8_t *b = p, *nl;
		uint64_t m;

		/* 64 bytes at a time; the last newline seen ends the whole lines */
		for (; end - b >= 64; b += 64)
			if ((m = cmon_newlines64(b)) != 0) {
				count += bits_set(m);
				q = b + 64 - __builtin_clzll(m);
			}
		while (b < end && (nl = memchr(b, '\n', (size_t)(end - b)))) {
			b = q = nl + 1;
			count++;
		}
	}
	*whole = (size_t)(q - p);
	return count;
}

/* An ascii line [p, end) without its newline: one event, a gap, or nothing
 * (as the telemonitor's logscan.c reads it). */
void cmon_log_tally_other(const uint8_t *p, const uint8_t *end, struct cmon_tally *t)
{
	if (end > p && end[-1] == '\r')
		end--;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p == end)
		return;
	if (*p != '#') {
		t->events++;
		return;
	}
	if (end - p > 10 && memcmp(p, "#cmon-gap", 9) == 0 && (p[9] == ' ' || p[9] == '\t')) {
		uint64_t v = 0;
		const uint8_t *d = p + 10;
		while (d < end && (*d == ' ' || *d == '\t'))
			d++;
		for (; d < end && *d >= '0' && *d <= '9'; d++)
			v = v > UINT64_MAX / 10 ? UINT64_MAX : v * 10 + (uint64_t)(*d - '0');
		t->gap += v;
		t->markers++;
	}
}

/* The count of a binary Gap record body (field 4 of Record, holding
 * field 1 varint), 0 if absent or malformed. */
static uint64_t bin_gap_count(const uint8_t *p, size_t n)
{
	size_t hdr;
	uint64_t len, v = 0;

	/* Record: tag 0x22 (field 4, length-delimited), then the Gap body */
	if (n < 2 || p[0] != 0x22 || cmon_bin_frame(p + 1, n - 1, &hdr, &len) != 1 ||
	    len > n - 1 - hdr)
		return 0;
	p += 1 + hdr;
	for (const uint8_t *e = p + len; p < e;) {
		uint8_t tag = *p++;
		unsigned shift = 0;
		uint64_t x = 0;
		if ((tag & 7) != 0)
			return v;                       /* only varints are expected */
		while (p < e && shift < 64) {
			x |= (uint64_t)(*p & 0x7f) << shift;
			shift += 7;
			if (!(*p++ & 0x80))
				break;
		}
		if (tag == 0x08)
			v = x;
	}
	return v;
}

size_t cmon_log_tally(Cmon__Format fmt, const uint8_t *p, size_t n, size_t max,
		      struct cmon_tally *t)
{
	const uint8_t *q = p, *end = p + n;

	if (fmt == CMON__FORMAT__FORMAT_BINARY) {
		for (;;) {
			size_t hdr, len;
			uint64_t body;
			if (cmon_bin_frame(q, (size_t)(end - q), &hdr, &body) != 1 ||
			    body > (uint64_t)(end - q) - hdr)
				break;
			len = hdr + (size_t)body;
			if (q > p && (size_t)(q - p) + len > max)
				break;
			if (body && q[hdr] == 0x1a) {           /* Record.event */
				t->events++;
			} else if (body && q[hdr] == 0x22) {    /* Record.gap */
				t->gap += bin_gap_count(q + hdr, (size_t)body);
				t->markers++;
			}
			q += len;
		}
		return (size_t)(q - p);
	}
	while (q < end) {
		const uint8_t *nl = memchr(q, '\n', (size_t)(end - q));
		if (!nl || (q > p && (size_t)(nl + 1 - p) > max))
			break;
		cmon_log_tally_line(q, nl, t);
		q = nl + 1;
	}
	return (size_t)(q - p);
}

size_t cmon_log_gap_marker(Cmon__Format fmt, uint64_t count, uint8_t *buf)
{
	if (fmt == CMON__FORMAT__FORMAT_BINARY) {
		Cmonlog__Record rec = CMONLOG__RECORD__INIT;
		Cmonlog__Gap gap = CMONLOG__GAP__INIT;
		size_t n;
		gap.has_count = true;
		gap.count = count;
		rec.kind_case = CMONLOG__RECORD__KIND_GAP;
		rec.gap = &gap;
		n = cmonlog__record__pack(&rec, buf + 1);   /* at most 13 bytes: one-byte prefix */
		buf[0] = (uint8_t)n;
		return n + 1;
	}
	return (size_t)snprintf((char *)buf, CMON_GAP_MARKER_MAX, "#cmon-gap %llu\n",
				(unsigned long long)count);
}

const char *cmon_format_name(Cmon__Format fmt)
{
	switch (fmt) {
	case CMON__FORMAT__FORMAT_ASCII:
		return "ascii";
	case CMON__FORMAT__FORMAT_BINARY:
		return "binary";
	default:
		return "unknown";
	}
}
