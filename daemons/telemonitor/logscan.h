/* Following a log stream as it arrives in LogHeader/LogData chunks: count
 * its records the way pcheck numbers them (1-based ordinal of the event
 * records, malformed ones included), find their timestamps, render each
 * as a cmon-ascii line for log windows, and keep the replayable header (the
 * header plus every binary TypeDef) for a tool that starts late or again.
 * Binary records are decoded with protobuf-c (cmonlog.proto). */
#ifndef TELEMON_LOGSCAN_H
#define TELEMON_LOGSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmon.pb-c.h"
#include "cmon/logfmt.h"

/* Limits. */
#define LOGSCAN_RECORD_MAX (1u << 20)   /* longest record carried across chunks */
#define LOGSCAN_CARRY_KEEP 65536        /* a carry buffer larger than this is freed
                                           once its record is done */
#define LOGSCAN_HEADER_MAX (1u << 20)   /* largest replayable header */
#define LOGSCAN_VERSION_MAX 128         /* longest program version kept */
#define LOGSCAN_TYPES_MAX 65536         /* binary type ids */

/* One record found in the stream. */
struct logscan_rec {
	bool is_gap;             /* a gap marker written by the program itself */
	uint64_t gap;            /* its count */
	uint64_t pos;            /* ordinal (gaps: of the record before) */
	int64_t ts;              /* timestamp in ticks (previous one if unreadable) */
	const char *text;        /* the record as a cmon-ascii line, no newline */
	size_t len;              /* its length */
};

/* Called for every record, in order. */
typedef void (*logscan_cb)(void *arg, const struct logscan_rec *rec);

/* The state of one stream. */
struct logscan {
	Cmon__Format fmt;        /* FORMAT_ASCII or FORMAT_BINARY */
	uint64_t pos;            /* event records so far */
	int64_t last_ts;         /* timestamp of the latest event */
	bool seen_record;        /* a record has been seen (ascii header is complete) */
	double tick_ns;          /* from the header; 1 if absent */
	bool realtime;           /* the header's clock is wall-clock time */
	int64_t start_unix_ns;   /* from the header; 0 if absent */
	char version[LOGSCAN_VERSION_MAX + 1]; /* #program-version (snarflog), or "" */
	uint8_t *carry;          /* bytes of an incomplete record */
	size_t clen;             /* how many */
	size_t ccap;             /* the buffer's size */
	bool skipping;           /* ascii: discarding an over-long line */
	bool skip_record;        /* ...which is a record, not a '#' line */
	char **names;            /* binary: type name by id (owned) */
	uint32_t ntypes;         /* size of names */
	uint8_t *replay;         /* replayable header in the stream's format */
	size_t rlen;             /* its length */
	char *ascii_hdr;         /* the header as cmon-ascii lines */
	size_t ahlen;            /* its length */
	char *text;              /* scratch for one rendered record */
	size_t tcap;             /* its size */
	uint64_t malformed;      /* records that could not be decoded */
};

/* Start following a stream of format `fmt`. */
void logscan_init(struct logscan *s, Cmon__Format fmt);

/* Free what `s` holds. */
void logscan_free(struct logscan *s);

/* Take the saved header (LogHeader payload). 0 or -ENOMEM / -E2BIG. */
int logscan_header(struct logscan *s, const uint8_t *p, size_t n);

/* Take whole (or partial) records from a LogData payload, calling `cb` for
 * each complete one. 0 or -ENOMEM. */
int logscan_data(struct logscan *s, const uint8_t *p, size_t n, logscan_cb cb, void *arg);

/* logscan_data, adding to *t what the chunk stands for, as cmon_log_tally
 * counts it (ascii: in the same pass over its lines). */
int logscan_data_tally(struct logscan *s, const uint8_t *p, size_t n, logscan_cb cb, void *arg,
		       struct cmon_tally *t);

#endif
