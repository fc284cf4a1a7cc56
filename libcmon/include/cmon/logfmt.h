/* Record boundaries of the two log formats (DESIGN.md §4), without
 * decoding records: what snarflog needs to keep whole records and the
 * replayable header, and what a consumer needs to count records and write
 * gap markers. Binary scanning walks protobuf wire format by hand because
 * it runs once per record on the forwarding path; full decoding is left to
 * protobuf-c (cmonlog.pb-c.h). */
#ifndef CMON_LOGFMT_H
#define CMON_LOGFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "cmon.pb-c.h"

/* The kinds of binary Record, as their field numbers in cmonlog.Record. */
enum cmon_rec_kind {
	CMON_REC_BAD = -1,     /* not a well-formed Record */
	CMON_REC_EMPTY = 0,    /* no kind set */
	CMON_REC_HEADER = 1,   /* Header */
	CMON_REC_TYPEDEF = 2,  /* TypeDef */
	CMON_REC_EVENT = 3,    /* Event */
	CMON_REC_GAP = 4,      /* Gap */
	CMON_REC_END = 5,      /* End */
	CMON_REC_OVERHEAD = 6, /* Overhead (a thread's cost per event) */
};

/* Timestamp fields found in a binary Event. */
struct cmon_event_time {
	bool has_ts;           /* absolute `ts` present */
	uint64_t ts;           /* its value */
	bool has_delta;        /* `ts_delta` present */
	int64_t delta;         /* its value */
};

/* Guess the format from the first bytes of a log: FORMAT_ASCII,
 * FORMAT_BINARY, or FORMAT_UNSPECIFIED if more bytes are needed.
 * A log starting with a frame holding a Header record is binary;
 * anything else is ascii. */
Cmon__Format cmon_log_detect(const uint8_t *p, size_t n, bool eof);

/* Parse a binary frame's varint length at `p`: 1 with *hdr (prefix bytes)
 * and *body set; 0 if more bytes are needed; -1 if the prefix is not a
 * varint of at most 5 bytes. */
int cmon_bin_frame(const uint8_t *p, size_t n, size_t *hdr, uint64_t *body);

/* Kind of the Record whose body is `p` (`n` bytes): walks its top-level
 * fields and returns the last oneof member present, or CMON_REC_BAD. */
enum cmon_rec_kind cmon_bin_record_kind(const uint8_t *p, size_t n);

/* Find the Event inside a Record body of kind CMON_REC_EVENT and report its
 * timestamp fields. False if malformed. */
bool cmon_bin_event_time(const uint8_t *p, size_t n, struct cmon_event_time *t);

/* One pass over a Record body: its kind and, for an Event, its timestamp
 * fields. Stops reading an Event at its absolute `ts` (then `ts_delta` is
 * irrelevant), so the attribute values are not walked in the usual field
 * order. An Event whose fields cannot be walked is CMON_REC_BAD. */
enum cmon_rec_kind cmon_bin_record_scan(const uint8_t *p, size_t n, struct cmon_event_time *t);

/* The newlines among the 64 bytes at `p`, as bits (bit i: p[i] is '\n'):
 * how ascii lines are found on the forwarding path, where a memchr call
 * per line of 30 bytes costs more than the search. */
static inline uint64_t cmon_newlines64(const uint8_t *p)
{
#if defined(__SSE2__)
	const __m128i nl = _mm_set1_epi8('\n');
	uint64_t m = 0;

	for (unsigned k = 0; k < 4; k++) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * k));
		m |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, nl)) << (16 * k);
	}
	return m;
#else
	uint64_t m = 0;

	for (unsigned k = 0; k < 64; k++)
		m |= (uint64_t)(p[k] == '\n') << k;
	return m;
#endif
}

/* Count the whole records in `p`: lines for ascii, frames for binary.
 * Stops at the first incomplete one; *whole gets the bytes they span. */
uint64_t cmon_log_count_records(Cmon__Format fmt, const uint8_t *p, size_t n, size_t *whole);

/* What a run of whole records stands for in the program's log, counted the
 * same way by snarflog, the telemonitor and its tools (docs/protocol.md,
 * "Accounting"): an event record (a non-blank ascii line not starting
 * with '#', a binary Event) is one record; a gap marker (`#cmon-gap N`, a
 * binary Gap) stands for the N records it says were lost; anything else
 * (comments, blank lines, TypeDef, Header, End, Overhead) for none. */
struct cmon_tally {
	uint64_t events;       /* event records */
	uint64_t gap;          /* records the gap markers stand for */
	uint64_t markers;      /* gap markers */
};

/* Ordinal positions covered by `t`: events + gap. */
static inline uint64_t cmon_tally_weight(const struct cmon_tally *t)
{
	return t->events + t->gap;
}

/* The ascii line [p, nl), its '\n' at nl, added to *t as cmon_log_tally
 * adds it (a line that is not the usual record goes to
 * cmon_log_tally_other). A reader that already finds every line of a chunk
 * counts it in the same pass: p is where the line starts in the chunk,
 * even when the chunk begins inside a line (cmon_log_tally reads that
 * tail the same way). */
void cmon_log_tally_other(const uint8_t *p, const uint8_t *nl, struct cmon_tally *t);

static inline void cmon_log_tally_line(const uint8_t *p, const uint8_t *nl, struct cmon_tally *t)
{
	if (nl > p && (unsigned char)(*p - '0') < 10)
		t->events++;                     /* the usual record: a timestamp first */
	else
		cmon_log_tally_other(p, nl, t);
}

/* Add up the whole records at `p` (`n` bytes), taking at most `max` bytes
 * of them but always the first record if it is complete; *t is added to.
 * Returns the bytes taken (0: no complete record). */
size_t cmon_log_tally(Cmon__Format fmt, const uint8_t *p, size_t n, size_t max,
		      struct cmon_tally *t);

/* Render a gap of `count` records in format `fmt` into `buf` ("#cmon-gap N\n"
 * or a framed Gap record). Returns its length (<= CMON_GAP_MARKER_MAX). */
size_t cmon_log_gap_marker(Cmon__Format fmt, uint64_t count, uint8_t *buf);

/* Room needed by cmon_log_gap_marker(). */
#define CMON_GAP_MARKER_MAX 32

/* Name of a format for logs and --help: "ascii", "binary" or "unknown". */
const char *cmon_format_name(Cmon__Format fmt);

#endif
