/* Reading the log and cutting it into the saved header and whole records
 * (DESIGN.md §4). The reader never blocks: it reads what is there, hands
 * each complete record to core_record(), and keeps a partial record for
 * the next read. Damage is resynchronised at the next record boundary and
 * reported to core_lost(): an over-long ascii line is skipped to its
 * newline; a corrupt binary frame is skipped byte by byte until a
 * plausible frame (sane length, Record tag, well-formed body) starts. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* ascii, the hot path: hand over consecutive ordinary records (complete,
 * not blank, not over-long) without going through step_ascii(). Returns
 * bytes consumed (0: let step_ascii() look at the next line), or -1 if the
 * first record was refused. */
static long run_ascii(struct snarf *s, const uint8_t *p, size_t avail)
{
	size_t off = 0, rec_max = s->in.rec_max;
	uint32_t ends[SNARF_RUN];

	for (;;) {
		size_t n = 0, pos = off, taken;

		while (n < SNARF_RUN && pos < avail) {
			const uint8_t *q = p + pos;
			const uint8_t *nl = memchr(q, '\n', avail - pos);
			size_t len;

			if (!nl || q[0] <= ' ')
				break;                  /* partial, blank or odd: slow path */
			len = (size_t)(nl - q) + 1;
			if (len > rec_max)
				break;
			pos += len;
			ends[n++] = (uint32_t)(pos - off);
		}
		if (n == 0)
			return (long)off;
		taken = core_records(s, p + off, ends, n);
		if (taken == 0)
			return off ? (long)off : -1;
		off += ends[taken - 1];
		if (taken < n)
			return (long)off;               /* paused */
		if (n < SNARF_RUN)
			return (long)off;
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
			core_header_append(s, in->scratch, avail + 1);
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
			core_header_append(s, p, len);
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

/* Read a varint at *pp (< end) into *v; false if it does not end in time. */
static inline bool quick_varint(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
	const uint8_t *p = *pp;
	uint64_t r = 0;

	for (unsigned shift = 0; p < end && shift < 64; shift += 7) {
		uint8_t b = *p++;
		r |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*pp = p;
			*v = r;
			return true;
		}
	}
	return false;
}

/* The layout every writer we know produces: a frame holding one Record
 * whose only member is an Event that starts type, thread, ts. Returns the
 * frame length and ts, or 0 when the frame looks any different (then the
 * general path decides). */
static inline size_t quick_event(const uint8_t *p, size_t avail, size_t rec_max, uint64_t *ts)
{
	const uint8_t *q = p, *end = p + avail, *body_end, *ev_end;
	uint64_t flen, elen, v;

	if (!quick_varint(&q, end, &flen) || flen > rec_max || flen > (uint64_t)(end - q) ||
	    flen < 2 || *q != 0x1a)
		return 0;
	body_end = q + flen;
	q++;
	if (!quick_varint(&q, body_end, &elen) || q + elen != body_end)
		return 0;
	ev_end = body_end;
	if (q >= ev_end || *q++ != 0x08 || !quick_varint(&q, ev_end, &v))
		return 0;
	if (q >= ev_end || *q++ != 0x10 || !quick_varint(&q, ev_end, &v))
		return 0;
	if (q >= ev_end || *q++ != 0x18 || !quick_varint(&q, ev_end, ts))
		return 0;
	return (size_t)(body_end - p);
}

/* binary, the hot path: consecutive Events with an absolute ts go straight
 * to the buffer; anything else (header, TypeDef, ts_delta, damage, a
 * partial frame) is left to step_binary(). Same contract as run_ascii(). */
static long run_binary(struct snarf *s, const uint8_t *p, size_t avail)
{
	struct input *in = &s->in;
	size_t off = 0;
	uint32_t ends[SNARF_RUN];
	uint64_t ts[SNARF_RUN];

	for (;;) {
		size_t n = 0, pos = off, taken;

		while (n < SNARF_RUN && avail - pos >= 2) {
			const uint8_t *q = p + pos;
			struct cmon_event_time t;
			size_t hdr, flen;
			uint64_t body;

			flen = quick_event(q, avail - pos, in->rec_max, &ts[n]);
			if (!flen) {
				if (cmon_bin_frame(q, avail - pos, &hdr, &body) != 1 ||
				    body > in->rec_max || body > avail - pos - hdr)
					break;
				flen = hdr + (size_t)body;
				if (cmon_bin_record_scan(q + hdr, (size_t)body, &t) != CMON_REC_EVENT ||
				    !t.has_ts)
					break;
				ts[n] = t.ts;
			}
			pos += flen;
			ends[n++] = (uint32_t)(pos - off);
		}
		if (n == 0)
			return (long)off;
		taken = core_records(s, p + off, ends, n);
		if (taken == 0)
			return off ? (long)off : -1;
		in->ts = ts[taken - 1];
		off += ends[taken - 1];
		if (taken < n || n < SNARF_RUN)
			return (long)off;
	}
}

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
	if (p[hdr] != 0x0a && p[hdr] != 0x12 && p[hdr] != 0x1a && p[hdr] != 0x22 && p[hdr] != 0x2a)
		return -1;
	if (avail - hdr < body)
		return in->eof ? -1 : 0;
	k = cmon_bin_record_kind(p + hdr, (size_t)body);
	return k == CMON_REC_BAD || k == CMON_REC_EMPTY ? -1 : 1;
}

/* binary: give an Event that carries only ts_delta an absolute ts, so a
 * reader joining at any record (or after a gap) gets correct times.
 * Returns the rewritten frame's length in in->scratch, or 0 on failure. */
static size_t rewrite_event(struct input *in, const uint8_t *body, size_t blen, uint64_t ts)
{
	Cmonlog__Record *rec = cmonlog__record__unpack(NULL, blen, body);
	size_t n = 0, plen = 0;
	uint8_t pfx[5];

	if (!rec || rec->kind_case != CMONLOG__RECORD__KIND_EVENT) {
		cmonlog__record__free_unpacked(rec, NULL);
		return 0;
	}
	rec->event->has_ts = true;
	rec->event->ts = ts;
	rec->event->has_ts_delta = false;
	n = cmonlog__record__get_packed_size(rec);
	if (n + 5 <= in->rec_max + 32) {
		size_t v = n;
		while (v >= 0x80) {
			pfx[plen++] = (uint8_t)(v | 0x80);
			v >>= 7;
		}
		pfx[plen++] = (uint8_t)v;
		memcpy(in->scratch, pfx, plen);
		cmonlog__record__pack(rec, in->scratch + plen);
		n += plen;
	} else {
		n = 0;
	}
	cmonlog__record__free_unpacked(rec, NULL);
	return n;
}

/* binary: one step; same contract as step_ascii(). */
static long step_binary(struct snarf *s, const uint8_t *p, size_t avail)
{
	struct input *in = &s->in;
	struct cmon_event_time t;
	enum cmon_rec_kind kind;
	size_t hdr, flen;
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
			core_header_append(s, p, flen);
			return (long)flen;
		}
		cmon_warn("binary log does not start with a Header record");
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

/* Cut as much of the staged input as possible; keep the rest. When the
 * writer has gone and everything is cut, the input has ended. */
static void process(struct snarf *s)
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
		if (s->format == CMON__FORMAT__FORMAT_BINARY) {
			used = in->state == IN_RECORDS ? run_binary(s, p, avail) : 0;
			if (used == 0)
				used = step_binary(s, p, avail);
		} else {
			used = in->state == IN_RECORDS ? run_ascii(s, p, avail) : 0;
			if (used == 0)
				used = step_ascii(s, p, avail);
		}
		if (used <= 0)
			break;                      /* needs more bytes, or refused (paused) */
		off += (size_t)used;
	}
	if (off) {
		memmove(in->stage, in->stage + off, in->len - off);
		in->len -= off;
	}
	if (in->eof && !in->paused && in->state != IN_EOF &&
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

	if (in->len)
		process(s);
	for (int i = 0; i < READS_PER_WAKEUP && !in->paused && !in->eof; i++) {
		size_t room = in->cap - in->len;
		ssize_t n;

		if (room > READ_CHUNK)
			room = READ_CHUNK;
		n = read(in->fd, in->stage + in->len, room);
		if (n > 0) {
			in->len += (size_t)n;
			process(s);
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

int input_open(struct snarf *s, int fd)
{
	struct input *in = &s->in;
	struct stat st;
	int fl;

	memset(in, 0, sizeof *in);
	in->fd = fd;
	in->rec_max = s->opt.buffer / 4 < SNARF_RECORD_MAX ? s->opt.buffer / 4 : SNARF_RECORD_MAX;
	in->cap = in->rec_max + 2 * READ_CHUNK;
	in->stage = malloc(in->cap);
	in->scratch = malloc(in->rec_max + 32);
	if (!in->stage || !in->scratch)
		return -ENOMEM;
	if (fstat(fd, &st) < 0)
		return -errno;
	in->is_file = S_ISREG(st.st_mode) || S_ISBLK(st.st_mode);
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
