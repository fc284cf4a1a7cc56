/* Reading the log and cutting it into the saved header and whole records
 * (DESIGN.md §4). The reader never blocks: it reads what is there, turns
 * each complete record into a buffered one, and keeps a partial record
 * for the next read. Damage is resynchronised at the next record boundary
 * and reported to core_lost(): an over-long ascii line is skipped to its
 * newline; a corrupt binary frame is skipped byte by byte until a
 * plausible frame (sane length, Record tag, well-formed body) starts.
 *
 * Two paths. Once past the header, the log is read straight into the
 * record buffer's free space and ordinary records (ascii lines, binary
 * Events with an absolute ts) are cut where they lie, with no copy
 * (cut_in_place). Anything else — the header, a TypeDef, an Event with
 * only ts_delta, a blank or over-long line, damage, the end of the log —
 * moves what is left of the read to the stage, where the careful path
 * (step_ascii, step_binary) deals with it record by record; a partial
 * record left over goes back to the buffer and reading in place resumes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmon/log.h"
#include "cmon/logfmt.h"
#include "cmonlog.pb-c.h"
#include "snarflog.h"

#define READ_CHUNK (128u << 10)     /* bytes asked for per read(): a pipe's writer waits
                                       on the pipe's lock while a read copies, so
                                       reads stay short, as cat's do */
#define READS_PER_WAKEUP 8          /* then let other events run */

static bool blank_line(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r' && p[i] != '\n')
			return false;
	return true;
}

/* Why a cutter stopped. */
enum cut_stop {
	CUT_RUN,          /* SNARF_RUN records cut: call again */
	CUT_MORE,         /* a partial record: needs more bytes */
	CUT_ODD,          /* something only step_ascii() / step_binary() handle */
};

/* Where the ts of each Event a binary cut found is: the offset of its
 * varint from the start of the cut, or NO_TS_AT and its value. */
struct cut_ts {
	uint32_t at[SNARF_RUN];      /* varint offsets, or NO_TS_AT */
	uint64_t val[SNARF_RUN];     /* the value, when at[i] is NO_TS_AT */
};
#define NO_TS_AT UINT32_MAX

/* ascii: cut consecutive ordinary records (complete, not blank, not
 * over-long) at `p`; record i ends at ends[i]. Returns their number.
 * Newlines are found 64 bytes at a time (a memchr call per line of 30
 * bytes cost more than the search), the last bytes with memchr. */
static size_t cut_ascii(const struct input *in, const uint8_t *p, size_t avail, uint32_t *ends,
			enum cut_stop *stop)
{
	size_t n = 0, pos = 0, base = 0;    /* newlines before base: all in `mask` */
	bool blocks = avail >= 64;
	uint64_t mask = blocks ? cmon_newlines64(p) : 0;

	while (n < SNARF_RUN) {
		const uint8_t *q = p + pos;
		size_t nl, len;

		if (pos == avail) {
			*stop = CUT_MORE;
			return n;
		}
		while (blocks && mask == 0) {
			base += 64;
			if (base + 64 > avail)
				blocks = false;
			else
				mask = cmon_newlines64(p + base);
		}
		if (blocks) {
			nl = base + (size_t)__builtin_ctzll(mask);
			mask &= mask - 1;
		} else {
			size_t from = pos > base ? pos : base;
			const uint8_t *e = memchr(p + from, '\n', avail - from);

			if (!e) {
				*stop = avail - pos > in->rec_max ? CUT_ODD : CUT_MORE;
				return n;
			}
			nl = (size_t)(e - p);
		}
		len = nl - pos + 1;
		if (q[0] <= ' ' || q[0] == '#' || len > in->rec_max) {
			/* blank, odd, over-long, or a comment or gap marker: a run
			 * holds events only (see buffer.h) */
			*stop = CUT_ODD;
			return n;
		}
		pos += len;
		ends[n++] = (uint32_t)pos;
	}
	*stop = CUT_RUN;
	return n;
}

/* The byte after a varint at `q` of more than one byte, or NULL if it is
 * longer than 10 bytes. Reads up to 10 bytes at q, whatever the varint's
 * length: the caller makes sure they are there and checks the result
 * against its bound. */
static inline const uint8_t *varint_skip_long(const uint8_t *q)
{
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* The first byte without the continuation bit, 8 at a time. */
	uint64_t w, stops;

	memcpy(&w, q, sizeof w);
	stops = ~w & 0x8080808080808080ull;
	if (stops)
		return q + 1 + ((unsigned)__builtin_ctzll(stops) >> 3);
#endif
	for (unsigned i = 0; i < 10; i++)
		if (!(q[i] & 0x80))
			return q + i + 1;
	return NULL;
}

/* varint_skip_long(), quicker for one-byte varints. */
static inline const uint8_t *varint_skip(const uint8_t *q)
{
	return !(q[0] & 0x80) ? q + 1 : varint_skip_long(q);
}

/* The value of a varint already known to be well formed. */
static uint64_t varint_value(const uint8_t *q)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		v |= (uint64_t)(*q & 0x7f) << shift;
		if (!(*q++ & 0x80))
			break;
	}
	return v;
}

/* The first four bytes of a frame of `flen` (8..127) bytes holding a
 * Record whose only member is an Event (tag 3, length flen - 2) that
 * starts with its type (tag 1), read as a little-endian word. */
static inline uint32_t quick_head(size_t flen)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return (uint32_t)flen * 0x10001u + 0x08001a00u - 0x20000u;
#else
	const uint8_t b[4] = { (uint8_t)flen, 0x1a, (uint8_t)(flen - 2), 0x08 };
	uint32_t w;

	memcpy(&w, b, sizeof w);
	return w;
#endif
}

/* Room the quick path may read past a frame of under 128 bytes: three
 * varints of up to 10 bytes each, and their tags. */
#define QUICK_SLACK (128 + 40)
_Static_assert(SNARF_MIN_BUFFER / 4 >= 128, "a quick frame always fits the record limit");

/* binary: is a plausible frame at `p`? 1 yes, 0 need more bytes, -1 no. */
static int plausible_frame(const struct input *in, const uint8_t *p, size_t avail)
{
	size_t hdr;
	uint64_t body;
	int r = cmon_bin_frame(p, avail, &hdr, &body);
	enum cmon_rec_kind k;

	if (r <= 0)
		return r == 0 && !in->eof ? 0 : -1;
	if (body < 2 || body > in->rec_max)
		return -1;
	if (avail == hdr)
		return in->eof ? -1 : 0;
	if (p[hdr] != 0x0a && p[hdr] != 0x12 && p[hdr] != 0x1a && p[hdr] != 0x22 && p[hdr] != 0x2a &&
	    p[hdr] != 0x32)
		return -1;
	if (avail - hdr < body)
		return in->eof ? -1 : 0;
	k = cmon_bin_record_kind(p + hdr, (size_t)body);
	return k == CMON_REC_BAD || k == CMON_REC_EMPTY ? -1 : 1;
}

/* binary: the frame at `p` (`flen` bytes, well formed) is followed by
 * bytes that cannot start a frame. A writer that wrote only part of a
 * frame and went on writing whole ones looks exactly so: the cut-short
 * frame's length took in the start of the next, and the rest of that one
 * is what does not fit. If a frame that is followed by another plausible
 * one (or by the end of what is there) starts inside this one, this one
 * was cut short there: its length, else 0. */
static size_t truncated_at(const struct input *in, const uint8_t *p, size_t flen, size_t avail)
{
	if (flen >= avail || plausible_frame(in, p + flen, avail - flen) >= 0)
		return 0;
	for (size_t q = 1; q < flen; q++) {
		size_t hdr, next;
		uint64_t body;
		if (plausible_frame(in, p + q, avail - q) != 1 ||
		    cmon_bin_frame(p + q, avail - q, &hdr, &body) != 1)
			continue;
		next = q + hdr + (size_t)body;
		if (next == avail || plausible_frame(in, p + next, avail - next) >= 0)
			return q;
	}
	return 0;
}

/* binary: cut consecutive Events that carry an absolute ts at `p`. The
 * usual layout — a frame of under 128 bytes holding a Record whose only
 * member is an Event starting type, thread, ts — is recognised quickly
 * (away from the end of the bytes, where reading a little past the frame
 * is safe); any other frame goes through cmon_bin_record_scan(). Record i
 * ends at ends[i]; its ts is described by ts. */
/* binary: a run of cut Events ends at `q` (`left` bytes there) for
 * `why`. When what follows cannot start a frame, the run's last frame may
 * be one a writer cut short (truncated_at): it is left to step_binary()
 * to judge, with what follows it in view. */
static size_t run_end(const struct input *in, const uint8_t *q, size_t left, size_t n,
		      enum cut_stop why, enum cut_stop *stop)
{
	*stop = why;
	if (n > 0 && plausible_frame(in, q, left) < 0) {
		*stop = CUT_ODD;
		return n - 1;
	}
	return n;
}

static size_t cut_binary(const struct input *in, const uint8_t *p, size_t avail, uint32_t *ends,
			 struct cut_ts *ts, enum cut_stop *stop)
{
	const uint8_t *q = p, *quick_end = avail > QUICK_SLACK ? p + avail - QUICK_SLACK : p;
	size_t n = 0;

	while (n < SNARF_RUN) {
		size_t left, hdr;
		struct cmon_event_time t;
		uint64_t body;

		while (q < quick_end) {
			/* Frame length (1 byte, 8..127, always <= rec_max), Record
			 * tag 3 with a 1-byte length covering the frame, Event tag 1:
			 * four bytes compared at once; then type, thread, ts. */
			size_t flen = q[0];
			uint32_t head;
			const uint8_t *e, *tsp;

			memcpy(&head, q, sizeof head);
			if (flen - 8 >= 0x78 || head != quick_head(flen))
				break;
			e = varint_skip(q + 4);
			if (!e || *e != 0x10 || !(e = varint_skip(e + 1)) || *e != 0x18)
				break;
			tsp = e + 1;
			e = varint_skip_long(tsp);         /* (a ts is seldom one byte) */
			if (!e || e > q + 1 + flen)
				break;
			ts->at[n] = (uint32_t)(tsp - p);
			q += 1 + flen;
			ends[n++] = (uint32_t)(q - p);
			if (n == SNARF_RUN) {
				*stop = CUT_RUN;
				return n;
			}
		}
		left = avail - (size_t)(q - p);
		if (left < 2)
			return run_end(in, q, left, n, CUT_MORE, stop);
		switch (cmon_bin_frame(q, left, &hdr, &body)) {
		case 0:
			return run_end(in, q, left, n, CUT_MORE, stop);
		case 1:
			break;
		default:
			return run_end(in, q, left, n, CUT_ODD, stop);
		}
		if (body > in->rec_max)
			return run_end(in, q, left, n, CUT_ODD, stop);
		if (body > left - hdr)
			return run_end(in, q, left, n, CUT_MORE, stop);
		/* (an Event as every tally counts one: see buffer.h) */
		if (body == 0 || q[hdr] != 0x1a ||
		    cmon_bin_record_scan(q + hdr, (size_t)body, &t) != CMON_REC_EVENT || !t.has_ts)
			return run_end(in, q, left, n, CUT_ODD, stop);
		ts->at[n] = NO_TS_AT;
		ts->val[n] = t.ts;
		q += hdr + (size_t)body;
		ends[n++] = (uint32_t)(q - p);
	}
	*stop = CUT_RUN;
	return n;
}

/* The ts of Event i of a binary cut made at `p`. */
static uint64_t cut_ts_of(const uint8_t *p, const struct cut_ts *ts, size_t i)
{
	return ts->at[i] == NO_TS_AT ? ts->val[i] : varint_value(p + ts->at[i]);
}

/* Cut ordinary records at `p` in the log's format. */
static size_t cut(const struct snarf *s, const uint8_t *p, size_t avail, uint32_t *ends,
		  struct cut_ts *ts, enum cut_stop *stop)
{
	if (s->format == CMON__FORMAT__FORMAT_BINARY)
		return cut_binary(&s->in, p, avail, ends, ts, stop);
	return cut_ascii(&s->in, p, avail, ends, stop);
}

/* The stage's hot path: hand consecutive ordinary records to the buffer
 * in runs, leaving anything else to step_ascii() / step_binary(). Returns
 * bytes consumed (0: let the step look at what is next), or -1 if the
 * first record was refused (the buffer must not drop). */
static long run_stage(struct snarf *s, const uint8_t *p, size_t avail)
{
	struct input *in = &s->in;
	size_t off = 0;
	uint32_t ends[SNARF_RUN];
	struct cut_ts ts;

	for (;;) {
		enum cut_stop stop;
		size_t n = cut(s, p + off, avail - off, ends, &ts, &stop), taken;

		if (n == 0)
			return (long)off;
		taken = core_records(s, p + off, ends, n);
		if (taken == 0)
			return off ? (long)off : -1;
		if (s->format == CMON__FORMAT__FORMAT_BINARY)
			in->ts = cut_ts_of(p + off, &ts, taken - 1);
		off += ends[taken - 1];
		if (taken < n || stop != CUT_RUN)
			return (long)off;               /* paused, or something else is next */
	}
}

/* ascii: keep one header line; after the first (the magic line), the
 * program's version, if there is one. */
static void header_line(struct snarf *s, const uint8_t *p, size_t len)
{
	bool first = s->hdr.len == 0;
	char line[SNARF_VERSION_MAX + 32];

	core_header_append(s, p, len);
	if (first && s->version[0]) {
		int n = snprintf(line, sizeof line, "#program-version %s\n", s->version);
		core_header_append(s, (const uint8_t *)line, (size_t)n);
	}
}

/* ascii: one step at `p` (`avail` bytes). Returns bytes consumed, 0 if it
 * needs more input, or -1 if the record was refused (buffer must not drop). */
static long step_ascii(struct snarf *s, const uint8_t *p, size_t avail)
{
	struct input *in = &s->in;
	const uint8_t *nl = memchr(p, '\n', avail);
	size_t len;

	if (in->state == IN_DISCARD) {
		if (!nl)
			return (long)avail;
		in->state = s->hdr.complete ? IN_RECORDS : IN_HEADER;
		return nl - p + 1;
	}
	if (!nl) {
		if (avail > in->rec_max) {
			core_lost(s, 1, "line longer than the record limit");
			in->state = IN_DISCARD;
			return (long)avail;
		}
		if (!in->eof || avail == 0)
			return 0;
		/* Last line without a newline: complete it. */
		memcpy(in->scratch, p, avail);
		in->scratch[avail] = '\n';
		if (in->state == IN_HEADER && p[0] == '#') {
			header_line(s, in->scratch, avail + 1);
			return (long)avail;
		}
		if (blank_line(p, avail))
			return (long)avail;
		in->state = IN_RECORDS;
		s->hdr.complete = true;
		return core_record(s, in->scratch, avail + 1) ? (long)avail : -1;
	}
	len = (size_t)(nl - p) + 1;
	if (len > in->rec_max) {
		core_lost(s, 1, "line longer than the record limit");
		return (long)len;
	}
	if (in->state == IN_HEADER) {
		if (p[0] == '#') {
			header_line(s, p, len);
			return (long)len;
		}
		if (blank_line(p, len))
			return (long)len;
		in->state = IN_RECORDS;
		s->hdr.complete = true;
	}
	if (blank_line(p, len))
		return (long)len;
	return core_record(s, p, len) ? (long)len : -1;
}

/* binary: give an Event that carries only ts_delta an absolute ts, so a
 * reader joining at any record (or after a gap) gets correct times.
 * Returns the rewritten frame's length in in->scratch, or 0 on failure. */
/* binary: the frame of `rec` (varint length, then the record) into `out`
 * of `cap` bytes; its length, or 0 when it does not fit. */
static size_t pack_frame(const Cmonlog__Record *rec, uint8_t *out, size_t cap)
{
	size_t n = cmonlog__record__get_packed_size(rec), plen = 0;

	if (n + 5 > cap)
		return 0;
	for (size_t v = n; ; v >>= 7) {
		out[plen++] = (uint8_t)(v >= 0x80 ? (v & 0x7f) | 0x80 : v);
		if (v < 0x80)
			break;
	}
	cmonlog__record__pack(rec, out + plen);
	return plen + n;
}

static size_t rewrite_event(struct input *in, const uint8_t *body, size_t blen, uint64_t ts)
{
	Cmonlog__Record *rec = cmonlog__record__unpack(NULL, blen, body);
	size_t n = 0;

	if (rec && rec->kind_case == CMONLOG__RECORD__KIND_EVENT) {
		rec->event->has_ts = true;
		rec->event->ts = ts;
		rec->event->has_ts_delta = false;
		n = pack_frame(rec, in->scratch, in->rec_max + 32);
	}
	cmonlog__record__free_unpacked(rec, NULL);
	return n;
}

/* binary: keep the Header record (frame `p`, `flen` bytes, body at `body`),
 * with the program's version added as Header.extra "program-version" when
 * there is one (kept as it came if it cannot be decoded). */
static void header_binary(struct snarf *s, const uint8_t *p, size_t flen, const uint8_t *body,
			  size_t blen)
{
	Cmonlog__Record *rec;
	Cmonlog__HeaderField f = CMONLOG__HEADER_FIELD__INIT, **extra;
	uint8_t *frame;
	size_t n;

	if (!s->version[0] || !(rec = cmonlog__record__unpack(NULL, blen, body))) {
		core_header_append(s, p, flen);
		return;
	}
	extra = rec->kind_case == CMONLOG__RECORD__KIND_HEADER
			? malloc((rec->header->n_extra + 1) * sizeof *extra) : NULL;
	if (!extra) {
		cmonlog__record__free_unpacked(rec, NULL);
		core_header_append(s, p, flen);
		return;
	}
	if (rec->header->n_extra)       /* (no extra: NULL, which memcpy may not take) */
		memcpy(extra, rec->header->extra, rec->header->n_extra * sizeof *extra);
	f.key = "program-version";
	f.value = s->version;
	extra[rec->header->n_extra] = &f;
	Cmonlog__HeaderField **old = rec->header->extra;
	rec->header->extra = extra;
	rec->header->n_extra++;
	n = cmonlog__record__get_packed_size(rec) + 5;
	frame = malloc(n);
	if (frame && (n = pack_frame(rec, frame, n)) > 0)
		core_header_append(s, frame, n);
	else
		core_header_append(s, p, flen);
	free(frame);
	rec->header->n_extra--;
	rec->header->extra = old;
	free(extra);
	cmonlog__record__free_unpacked(rec, NULL);
}

/* binary: one step; same contract as step_ascii(). */
static long step_binary(struct snarf *s, const uint8_t *p, size_t avail)
{
	struct input *in = &s->in;
	struct cmon_event_time t;
	enum cmon_rec_kind kind;
	size_t hdr, flen, skip;
	uint64_t body;
	int r;

	if (in->state == IN_RESYNC) {
		for (size_t i = 0; i < avail; i++) {
			r = plausible_frame(in, p + i, avail - i);
			if (r == 0)
				return (long)i;       /* need more bytes to judge */
			if (r == 1) {
				in->state = IN_RECORDS;
				return (long)i;
			}
		}
		return (long)avail;
	}
	r = cmon_bin_frame(p, avail, &hdr, &body);
	if (r == 0 || (r == 1 && body <= in->rec_max && avail - hdr < body)) {
		if (!in->eof)
			return 0;
		if (avail)
			core_lost(s, 1, "truncated record at end of log");
		return (long)avail;
	}
	if (r < 0 || body > in->rec_max)
		goto corrupt;
	flen = hdr + (size_t)body;
	kind = cmon_bin_record_scan(p + hdr, (size_t)body, &t);
	if (kind == CMON_REC_BAD)
		goto corrupt;
	if (in->state == IN_HEADER) {
		in->state = IN_RECORDS;
		if (kind == CMON_REC_HEADER) {
			header_binary(s, p, flen, p + hdr, (size_t)body);
			return (long)flen;
		}
		cmon_warn("binary log does not start with a Header record");
	}
	if (kind != CMON_REC_EMPTY && (skip = truncated_at(in, p, flen, avail)) > 0) {
		/* one record cut short: it is lost, the next starts inside it */
		core_lost(s, 1, "truncated binary frame");
		return (long)skip;
	}
	switch (kind) {
	case CMON_REC_EMPTY:
		return (long)flen;
	case CMON_REC_TYPEDEF:
		/* Part of the replayable header, unless the header is full. */
		if (s->hdr.len + flen <= SNARF_HEADER_MAX) {
			core_header_append(s, p, flen);
			return (long)flen;
		}
		break;
	case CMON_REC_EVENT:
		if (t.has_ts) {
			if (!core_record(s, p, flen))
				return -1;
			in->ts = t.ts;
			return (long)flen;
		}
		if (t.has_delta) {
			uint64_t ts = in->ts + (uint64_t)t.delta;
			size_t n = rewrite_event(in, p + hdr, (size_t)body, ts);
			if (!n)
				goto corrupt;
			if (!core_record(s, in->scratch, n))
				return -1;
			in->ts = ts;
			s->rewrites++;
			return (long)flen;
		}
		break;
	default:
		break;
	}
	return core_record(s, p, flen) ? (long)flen : -1;
corrupt:
	core_lost(s, 1, "corrupt binary framing");
	in->state = IN_RESYNC;
	return 1;
}

/* The careful path: cut as much of the stage as possible; keep the rest. */
static void cut_stage(struct snarf *s)
{
	struct input *in = &s->in;
	size_t off = 0;

	while (!in->paused && in->state != IN_EOF) {
		const uint8_t *p = in->stage + off;
		size_t avail = in->len - off;
		long used;

		if (in->state == IN_DETECT) {
			Cmon__Format f = s->opt.format;
			if (f == CMON__FORMAT__FORMAT_UNSPECIFIED)
				f = cmon_log_detect(p, avail, in->eof);
			if (f == CMON__FORMAT__FORMAT_UNSPECIFIED)
				break;
			core_format_known(s, f);
			in->state = IN_HEADER;
			continue;
		}
		if (avail == 0)
			break;
		used = in->state == IN_RECORDS ? run_stage(s, p, avail) : 0;
		if (used == 0)
			used = s->format == CMON__FORMAT__FORMAT_BINARY ? step_binary(s, p, avail)
								       : step_ascii(s, p, avail);
		if (used <= 0)
			break;                      /* needs more bytes, or refused (paused) */
		off += (size_t)used;
	}
	if (off) {
		memmove(in->stage, in->stage + off, in->len - off);
		in->len -= off;
	}
}

/* Hand a partial record left in the stage back to the buffer, so that the
 * next read goes in place. False if it stays: not cutting ordinary
 * records, paused, at the end of the log, or no room without dropping. */
static bool stage_to_buffer(struct snarf *s)
{
	struct input *in = &s->in;
	uint8_t *dst;
	size_t room;

	if (in->state != IN_RECORDS || in->paused || in->eof || in->len == 0)
		return false;
	dst = core_read_room(s, in->len, &room);
	if (room < in->len)
		return false;
	memcpy(dst, in->stage, in->len);
	ring_stage_grow(&s->ring, in->len);
	in->len = 0;
	return true;
}

/* The hot path: cut the bytes read into the buffer into records where
 * they lie. Returns true if it moved what is left to the stage (something
 * unusual, or the end of the log), false if it needs more bytes or the
 * input was paused. */
static bool cut_in_place(struct snarf *s)
{
	struct input *in = &s->in;
	bool binary = s->format == CMON__FORMAT__FORMAT_BINARY;
	uint32_t ends[SNARF_RUN];
	struct cut_ts ts;

	for (;;) {
		size_t avail, n, taken;
		const uint8_t *p = ring_staged(&s->ring, &avail);
		enum cut_stop stop;
		uint64_t last = 0;

		n = cut(s, p, avail, ends, &ts, &stop);
		if (n) {
			if (binary)
				last = cut_ts_of(p, &ts, n - 1);
			taken = core_commit(s, ends, n);
			/* (Stopping early means not dropping: the bytes at p
			 * have not moved.) */
			if (binary && taken)
				in->ts = taken == n ? last : cut_ts_of(p, &ts, taken - 1);
			if (taken < n)
				return false;          /* paused */
		}
		if (stop == CUT_RUN)
			continue;
		if (stop == CUT_MORE && !in->eof)
			return false;
		p = ring_staged(&s->ring, &avail);
		if (avail == 0)
			return false;
		memcpy(in->stage, p, avail);
		in->len = avail;
		ring_stage_clear(&s->ring);
		return true;
	}
}

/* Cut what has been read: the stage first, then what was read in place.
 * When the writer has gone and everything is cut, the input has ended. */
static void process(struct snarf *s)
{
	struct input *in = &s->in;

	while (!in->paused && in->state != IN_EOF) {
		if (in->len) {
			cut_stage(s);
			if (!stage_to_buffer(s))
				break;
		}
		if (s->ring.staged == 0 || !cut_in_place(s))
			break;
	}
	if (in->eof && !in->paused && in->state != IN_EOF && s->ring.staged == 0 &&
	    (in->len == 0 || in->state == IN_DETECT)) {
		in->state = IN_EOF;
		in->len = 0;
		event_del(in->ev);
		core_input_ended(s);
	}
}

static void read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct snarf *s = arg;
	struct input *in = &s->in;

	if (in->len || s->ring.staged)
		process(s);
	for (int i = 0; i < READS_PER_WAKEUP && !in->paused && !in->eof; i++) {
		bool in_place = in->len == 0 && in->state == IN_RECORDS;
		uint8_t *dst;
		size_t room;
		ssize_t n;

		if (in_place) {
			dst = core_read_room(s, in->chunk, &room);
			if (room == 0) {
				input_pause(s);        /* full, and must not drop */
				break;
			}
		} else {
			dst = in->stage + in->len;
			room = in->cap - in->len;
			if (room > READ_CHUNK)
				room = READ_CHUNK;
		}
		n = read(in->fd, dst, room);
		if (n > 0) {
			if (in_place)
				ring_stage_grow(&s->ring, (size_t)n);
			else
				in->len += (size_t)n;
			process(s);
			stream_pump(s);                /* forward as it comes, as cat would */
			if ((size_t)n < room && !in->is_file)
				break;                 /* drained the pipe for now */
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n < 0)
			cmon_warn("reading the log: %s; treating it as ended", strerror(errno));
		in->eof = true;
		process(s);
		break;
	}
	stream_pump(s);
	/* Regular files never signal readiness: keep going from the loop. */
	if (in->is_file && !in->paused && in->state != IN_EOF)
		event_active(in->ev, EV_READ, 0);
}

/* Whether the kernel can tell us when `fd` is readable: a character
 * device like /dev/null cannot (epoll refuses it), so it is read like a
 * regular file, until end of file. */
static bool pollable(int fd)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(EPOLL_CLOEXEC);
	bool ok;

	if (ep < 0)
		return true;
	ok = epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0 || errno != EPERM;
	close(ep);
	return ok;
}

int input_open(struct snarf *s, int fd)
{
	struct input *in = &s->in;
	struct stat st;
	int fl;

	memset(in, 0, sizeof *in);
	in->fd = fd;
	in->rec_max = s->opt.buffer / 4 < SNARF_RECORD_MAX ? s->opt.buffer / 4 : SNARF_RECORD_MAX;
	in->cap = in->rec_max + 2 * READ_CHUNK;
	in->chunk = s->opt.buffer / 16 < READ_CHUNK ? s->opt.buffer / 16 : READ_CHUNK;
	in->stage = malloc(in->cap);
	in->scratch = malloc(in->rec_max + 32);
	if (!in->stage || !in->scratch)
		return -ENOMEM;
	if (fstat(fd, &st) < 0)
		return -errno;
	in->is_file = S_ISREG(st.st_mode) || S_ISBLK(st.st_mode) ||
		      (S_ISCHR(st.st_mode) && !pollable(fd));
	if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
		fl = fcntl(fd, F_GETFL);
		if (fl >= 0)
			fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	}
	if (S_ISFIFO(st.st_mode))
		fcntl(fd, F_SETPIPE_SZ, 1 << 20);   /* absorb bursts; best effort */
	if (in->is_file)
		in->ev = event_new(s->base, -1, 0, read_cb, s);
	else
		in->ev = event_new(s->base, fd, EV_READ | EV_PERSIST, read_cb, s);
	if (!in->ev)
		return -ENOMEM;
	in->state = IN_DETECT;
	if (in->is_file)
		event_active(in->ev, EV_READ, 0);
	else if (event_add(in->ev, NULL) < 0)
		return -EINVAL;
	return 0;
}

int input_open_fifo(struct snarf *s, const char *path)
{
	struct stat st;
	int fd, r;

	if (mkfifo(path, 0600) < 0 && errno != EEXIST)
		return -errno;
	if (stat(path, &st) < 0)
		return -errno;
	if (!S_ISFIFO(st.st_mode))
		return -EEXIST;
	/* Non-blocking open succeeds with no writer yet; epoll then reports
	 * nothing until a writer connects, and EOF once it has gone. */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = input_open(s, fd);
	if (r < 0)
		close(fd);
	return r;
}

void input_pause(struct snarf *s)
{
	if (s->in.paused)
		return;
	s->in.paused = true;
	if (s->in.ev)
		event_del(s->in.ev);
	core_blocked(s);
}

void input_resume(struct snarf *s)
{
	struct input *in = &s->in;

	if (!in->paused || !in->ev)
		return;
	in->paused = false;
	if (in->state == IN_EOF)
		return;
	if (!in->is_file && !in->eof)
		event_add(in->ev, NULL);
	/* Process what is staged (and read more) from the loop, not from here. */
	event_active(in->ev, EV_READ, 0);
}

void input_stop(struct snarf *s)
{
	struct input *in = &s->in;

	if (in->state == IN_EOF)
		return;
	in->eof = true;
	in->paused = false;
	event_del(in->ev);
	process(s);
}

void input_close(struct snarf *s)
{
	struct input *in = &s->in;

	if (in->ev) {
		event_free(in->ev);
		in->ev = NULL;
	}
	if (in->fd > 0)
		close(in->fd);
	in->fd = -1;
	free(in->stage);
	free(in->scratch);
	in->stage = in->scratch = NULL;
	in->len = 0;
}
