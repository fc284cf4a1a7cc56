/* Following a log stream (see logscan.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmon/digits.h"
#include "cmon/logfmt.h"
#include "cmonlog.pb-c.h"
#include "logscan.h"

void logscan_init(struct logscan *s, Cmon__Format fmt)
{
	memset(s, 0, sizeof *s);
	s->fmt = fmt == CMON__FORMAT__FORMAT_BINARY ? fmt : CMON__FORMAT__FORMAT_ASCII;
	s->tick_ns = 1;
}

void logscan_free(struct logscan *s)
{
	for (uint32_t i = 0; i < s->ntypes; i++)
		free(s->names[i]);
	free(s->names);
	free(s->carry);
	free(s->replay);
	free(s->ascii_hdr);
	free(s->text);
	memset(s, 0, sizeof *s);
}

static int append(uint8_t **buf, size_t *len, const void *p, size_t n, size_t max)
{
	uint8_t *g;

	if (*len + n > max)
		return -E2BIG;
	g = realloc(*buf, *len + n + 1);
	if (!g)
		return -ENOMEM;
	memcpy(g + *len, p, n);
	*len += n;
	g[*len] = '\0';
	*buf = g;
	return 0;
}

/* The start of an incomplete record, kept until its end comes: the buffer
 * grows by doubling, so that a long record arriving in small pieces costs
 * its length, not its length squared (realloc to the exact size each time
 * copied it whole at every piece under a sanitizer's allocator). */
static int carry_add(struct logscan *s, const void *p, size_t n, size_t max)
{
	if (s->clen + n > max)
		return -E2BIG;
	if (s->clen + n + 1 > s->ccap) {
		size_t cap = s->ccap ? s->ccap : 256;
		uint8_t *g;
		while (cap < s->clen + n + 1)
			cap *= 2;
		if (!(g = realloc(s->carry, cap)))
			return -ENOMEM;
		s->carry = g;
		s->ccap = cap;
	}
	memcpy(s->carry + s->clen, p, n);
	s->clen += n;
	s->carry[s->clen] = '\0';
	return 0;
}

/* The carried record is done with: a large buffer goes back. */
static void carry_reset(struct logscan *s)
{
	s->clen = 0;
	if (s->ccap > LOGSCAN_CARRY_KEEP) {
		free(s->carry);
		s->carry = NULL;
		s->ccap = 0;
	}
}

static int ascii_line(struct logscan *s, const char *fmt, const char *k, const char *v)
{
	char line[600];
	int n = snprintf(line, sizeof line, fmt, k, v);

	if (n < 0 || (size_t)n >= sizeof line)
		return 0;
	/* header values cannot carry line breaks into the window text */
	for (char *c = line; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
	strcat(line, "\n");
	return append((uint8_t **)&s->ascii_hdr, &s->ahlen, line, strlen(line), LOGSCAN_HEADER_MAX);
}

/* The program's version from the header: up to its end of line. */
static void set_version(struct logscan *s, const char *val)
{
	size_t n = strcspn(val, "\r\n");

	while (n && val[n - 1] == ' ')
		n--;
	if (n > LOGSCAN_VERSION_MAX)
		n = LOGSCAN_VERSION_MAX;
	memcpy(s->version, val, n);
	s->version[n] = '\0';
}

/* A '#key value' header line (ascii) seen: note the keys we use. */
static void header_key(struct logscan *s, const char *key, size_t klen, const char *val)
{
	if (klen == 7 && !strncmp(key, "tick-ns", 7)) {
		double t = strtod(val, NULL);
		if (t > 0)
			s->tick_ns = t;
	} else if (klen == 5 && !strncmp(key, "clock", 5)) {
		s->realtime = strcasestr(val, "realtime") != NULL;
	} else if (klen == 13 && !strncmp(key, "start-unix-ns", 13)) {
		s->start_unix_ns = strtoll(val, NULL, 10);
	} else if (klen == 15 && !strncmp(key, "program-version", 15)) {
		set_version(s, val);
	}
}

/* One ascii header line (with '\n'), before the first record. */
static int ascii_header_line(struct logscan *s, const char *p, size_t n)
{
	const char *k = p + 1, *sp;
	char val[256];
	size_t klen, vlen;
	int r;

	r = append((uint8_t **)&s->ascii_hdr, &s->ahlen, p, n, LOGSCAN_HEADER_MAX);
	if (r < 0)
		return r;
	r = append(&s->replay, &s->rlen, p, n, LOGSCAN_HEADER_MAX);
	if (r < 0)
		return r;
	sp = memchr(k, ' ', n - 1);
	if (!sp)
		return 0;
	klen = (size_t)(sp - k);
	vlen = n - 1 - klen - 1;
	if (vlen >= sizeof val)
		vlen = sizeof val - 1;
	memcpy(val, sp + 1, vlen);
	val[vlen] = '\0';
	header_key(s, k, klen, val);
	return 0;
}

static int text_reserve(struct logscan *s, size_t n)
{
	char *g;

	if (n <= s->tcap)
		return 0;
	g = realloc(s->text, n);
	if (!g)
		return -ENOMEM;
	s->text = g;
	s->tcap = n;
	return 0;
}

/* A number as the shortest text that reads back to the same double. */
static int fmt_num(char *out, size_t size, double v)
{
	int n = snprintf(out, size, "%.15g", v);

	if (strtod(out, NULL) != v)
		n = snprintf(out, size, "%.17g", v);
	return n;
}

/* --- ascii ----------------------------------------------------------------- */

/* One complete ascii line [p, p+n) without its '\n'. */
static int ascii_record(struct logscan *s, const char *p, size_t n, logscan_cb cb, void *arg)
{
	struct logscan_rec rec = { 0 };
	const char *q = p, *end = p + n;

	if (n && end[-1] == '\r')
		end--, n--;
	while (q < end && (*q == ' ' || *q == '\t'))
		q++;
	if (q == end)
		return 0;
	if (*q == '#') {
		if (end - q > 10 && !strncmp(q, "#cmon-gap", 9) && (q[9] == ' ' || q[9] == '\t')) {
			rec.is_gap = true;
			rec.gap = strtoull(q + 10, NULL, 10);
			rec.pos = s->pos;
			rec.ts = s->last_ts;
			cb(arg, &rec);
			return 0;
		}
		if (!s->seen_record && n < 4096) {
			char line[4097];
			memcpy(line, p, n);
			line[n] = '\n';
			return ascii_header_line(s, line, n + 1);
		}
		return 0;
	}
	s->seen_record = true;
	s->pos++;
	if (*q >= '0' && *q <= '9') {
		/* up to 19 digits (a CLOCK_REALTIME clock in ns has 19), at most
		 * INT64_MAX, as pcheck reads a timestamp */
		uint64_t ts;
		const char *d = q + cmon_scan_digits19(q, end, &ts);
		if (d < end && (*d == ' ' || *d == '\t') && ts <= (uint64_t)INT64_MAX)
			s->last_ts = (int64_t)ts;
	}
	rec.pos = s->pos;
	rec.ts = s->last_ts;
	rec.text = p;
	rec.len = n;
	cb(arg, &rec);
	return 0;
}

static int ascii_data(struct logscan *s, const uint8_t *p, size_t n, logscan_cb cb, void *arg,
		      struct cmon_tally *t)
{
	const uint8_t *end = p + n, *nl;
	int r;

	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl && t)
			cmon_log_tally_line(p, nl, t);   /* (the line as this chunk has it) */
		if (!nl) {
			if (s->skipping)
				return 0;
			if (s->clen + (size_t)(end - p) > LOGSCAN_RECORD_MAX) {
				const uint8_t *first = s->clen ? s->carry : p;
				s->skip_record = *first != '#';
				carry_reset(s);
				s->skipping = true;
				s->malformed++;
				return 0;
			}
			return carry_add(s, p, (size_t)(end - p), LOGSCAN_RECORD_MAX + 1);
		}
		if (s->skipping) {
			s->skipping = false;
			if (s->skip_record)           /* pcheck counts it, then skips it */
				s->pos++;
			p = nl + 1;
			continue;
		}
		if (s->clen + (size_t)(nl - p) > LOGSCAN_RECORD_MAX) {
			/* too long, however it came (whole, or its start carried
			 * from earlier chunks): counted as the skipping above
			 * counts it, and not handed on */
			const uint8_t *first = s->clen ? s->carry : p;
			if (*first != '#')
				s->pos++;
			s->malformed++;
			carry_reset(s);
			p = nl + 1;
			continue;
		}
		if (s->clen) {
			r = carry_add(s, p, (size_t)(nl - p), LOGSCAN_RECORD_MAX + 1);
			if (r < 0)
				return r;
			r = ascii_record(s, (const char *)s->carry, s->clen, cb, arg);
			carry_reset(s);
		} else {
			r = ascii_record(s, (const char *)p, (size_t)(nl - p), cb, arg);
		}
		if (r < 0)
			return r;
		p = nl + 1;
	}
	return 0;
}

/* --- binary ---------------------------------------------------------------- */

static int set_type(struct logscan *s, uint32_t id, const char *name)
{
	char *dup;

	if (id >= LOGSCAN_TYPES_MAX || !name)
		return 0;
	if (id >= s->ntypes) {
		uint32_t n = id + 1 > s->ntypes * 2 ? id + 1 : s->ntypes * 2;
		char **g = realloc(s->names, n * sizeof *g);
		if (!g)
			return -ENOMEM;
		memset(g + s->ntypes, 0, (n - s->ntypes) * sizeof *g);
		s->names = g;
		s->ntypes = n;
	}
	dup = strdup(name);
	if (!dup)
		return -ENOMEM;
	free(s->names[id]);
	s->names[id] = dup;
	return 0;
}

static int bin_header(struct logscan *s, const Cmonlog__Header *h)
{
	char num[64];
	int r = 0;

	free(s->ascii_hdr);
	s->ascii_hdr = NULL;
	s->ahlen = 0;
	r |= append((uint8_t **)&s->ascii_hdr, &s->ahlen, "#cmon-ascii 1\n", 14, LOGSCAN_HEADER_MAX);
	if (h->program)
		r |= ascii_line(s, "#%s %s", "program", h->program);
	if (h->machine)
		r |= ascii_line(s, "#%s %s", "machine", h->machine);
	if (h->has_pid) {
		snprintf(num, sizeof num, "%" PRId64, h->pid);
		r |= ascii_line(s, "#%s %s", "pid", num);
	}
	if (h->has_tick_ns && h->tick_ns > 0) {
		s->tick_ns = h->tick_ns;
		fmt_num(num, sizeof num, h->tick_ns);
		r |= ascii_line(s, "#%s %s", "tick-ns", num);
	}
	if (h->clock) {
		s->realtime = strcasestr(h->clock, "realtime") != NULL;
		r |= ascii_line(s, "#%s %s", "clock", h->clock);
	}
	if (h->has_start_unix_ns) {
		s->start_unix_ns = h->start_unix_ns;
		snprintf(num, sizeof num, "%" PRId64, h->start_unix_ns);
		r |= ascii_line(s, "#%s %s", "start-unix-ns", num);
	}
	for (size_t i = 0; i < h->n_extra; i++) {
		const Cmonlog__HeaderField *f = h->extra[i];
		if (f->key && f->value && *f->key && !strpbrk(f->key, " \t\r\n"))
			r |= ascii_line(s, "#%s %s", f->key, f->value);
		if (f->key && f->value && !strcmp(f->key, "program-version"))
			set_version(s, f->value);
	}
	return r ? -ENOMEM : 0;
}

static int bin_event(struct logscan *s, const Cmonlog__Event *e, logscan_cb cb, void *arg)
{
	struct logscan_rec rec = { 0 };
	const char *name = e->type < s->ntypes ? s->names[e->type] : NULL;
	size_t nv = e->n_values ? e->n_values : e->n_ivalues;   /* ivalues: integers */
	size_t need = 96 + (name ? strlen(name) : 0) + nv * 32, len;
	int r;

	s->pos++;
	if (e->has_ts)
		s->last_ts = (int64_t)e->ts;
	else if (e->has_ts_delta)
		s->last_ts += e->ts_delta;
	rec.pos = s->pos;
	rec.ts = s->last_ts;
	if (name) {
		r = text_reserve(s, need);
		if (r < 0)
			return r;
		len = (size_t)snprintf(s->text, need, "%" PRId64 " %" PRId64 " %s", s->last_ts,
				       e->has_thread ? e->thread : 0, name);
		for (size_t i = 0; i < nv && len + 34 < need; i++) {
			s->text[len++] = ' ';
			len += (size_t)fmt_num(s->text + len, need - len,
					       e->n_values ? e->values[i] : (double)e->ivalues[i]);
		}
		rec.text = s->text;
		rec.len = len;
	} else {
		s->malformed++;
	}
	cb(arg, &rec);
	return 0;
}

/* One complete binary frame (prefix included). */
static int bin_frame(struct logscan *s, const uint8_t *f, size_t n, size_t hdr, logscan_cb cb,
		     void *arg)
{
	Cmonlog__Record *m = cmonlog__record__unpack(NULL, n - hdr, f + hdr);
	struct logscan_rec rec = { 0 };
	int r = 0;

	if (!m) {
		if (n > hdr && f[hdr] == 0x1a) {          /* meant to be an Event */
			s->pos++;
			s->malformed++;
			rec.pos = s->pos;
			rec.ts = s->last_ts;
			cb(arg, &rec);
		}
		return 0;
	}
	switch (m->kind_case) {
	case CMONLOG__RECORD__KIND_HEADER:
		r = bin_header(s, m->header);
		if (r == 0 && s->rlen == 0)
			r = append(&s->replay, &s->rlen, f, n, LOGSCAN_HEADER_MAX);
		break;
	case CMONLOG__RECORD__KIND_TYPEDEF:
		r = set_type(s, m->typedef_->id, m->typedef_->name);
		if (r == 0)
			r = append(&s->replay, &s->rlen, f, n, LOGSCAN_HEADER_MAX);
		if (r == -E2BIG)
			r = 0;                        /* too many TypeDefs to replay: keep going */
		break;
	case CMONLOG__RECORD__KIND_EVENT:
		r = bin_event(s, m->event, cb, arg);
		break;
	case CMONLOG__RECORD__KIND_GAP:
		rec.is_gap = true;
		rec.gap = m->gap->has_count ? m->gap->count : 0;
		rec.pos = s->pos;
		rec.ts = s->last_ts;
		cb(arg, &rec);
		break;
	default:
		break;
	}
	cmonlog__record__free_unpacked(m, NULL);
	return r;
}

static int bin_data(struct logscan *s, const uint8_t *p, size_t n, logscan_cb cb, void *arg)
{
	const uint8_t *end = p + n;
	int r;

	if (s->clen) {
		/* complete the carried frame first */
		size_t hdr;
		uint64_t body;
		while (p < end) {
			int k = cmon_bin_frame(s->carry, s->clen, &hdr, &body);
			size_t want, take;
			if (k < 0) {
				carry_reset(s);
				s->malformed++;
				break;
			}
			want = k == 0 ? 1 : (size_t)(hdr + body - s->clen);
			take = want < (size_t)(end - p) ? want : (size_t)(end - p);
			if (k == 1 && hdr + body > LOGSCAN_RECORD_MAX) {
				carry_reset(s);
				return 0;                 /* cannot resynchronise inside the chunk */
			}
			r = carry_add(s, p, take, LOGSCAN_RECORD_MAX + 8);
			if (r < 0)
				return r;
			p += take;
			if (k == 1 && s->clen == hdr + body) {
				r = bin_frame(s, s->carry, s->clen, hdr, cb, arg);
				carry_reset(s);
				if (r < 0)
					return r;
				break;
			}
		}
	}
	while (p < end) {
		size_t hdr;
		uint64_t body;
		int k = cmon_bin_frame(p, (size_t)(end - p), &hdr, &body);
		if (k < 0) {
			s->malformed++;
			return 0;                         /* garbage: drop the rest of the chunk */
		}
		if (k == 0 || body > (uint64_t)(end - p) - hdr) {
			if ((size_t)(end - p) > LOGSCAN_RECORD_MAX)
				return 0;
			return carry_add(s, p, (size_t)(end - p), LOGSCAN_RECORD_MAX + 8);
		}
		r = bin_frame(s, p, hdr + (size_t)body, hdr, cb, arg);
		if (r < 0)
			return r;
		p += hdr + body;
	}
	return 0;
}

static void no_records(void *arg, const struct logscan_rec *rec)
{
}

int logscan_header(struct logscan *s, const uint8_t *p, size_t n)
{
	if (n == 0)
		return 0;
	if (s->fmt == CMON__FORMAT__FORMAT_BINARY)
		return bin_data(s, p, n, no_records, NULL);
	return ascii_data(s, p, n, no_records, NULL, NULL);
}

int logscan_data(struct logscan *s, const uint8_t *p, size_t n, logscan_cb cb, void *arg)
{
	if (n == 0)
		return 0;
	if (s->fmt == CMON__FORMAT__FORMAT_BINARY)
		return bin_data(s, p, n, cb, arg);
	return ascii_data(s, p, n, cb, arg, NULL);
}

int logscan_data_tally(struct logscan *s, const uint8_t *p, size_t n, logscan_cb cb, void *arg,
		       struct cmon_tally *t)
{
	struct cmon_tally k = { 0 };
	int r;

	if (n == 0)
		return 0;
	if (s->fmt == CMON__FORMAT__FORMAT_BINARY) {
		r = bin_data(s, p, n, cb, arg);
	} else {
		r = ascii_data(s, p, n, cb, arg, &k);
		if (r == 0) {
			t->events += k.events;
			t->gap += k.gap;
			t->markers += k.markers;
			return 0;
		}
	}
	cmon_log_tally(s->fmt, p, n, SIZE_MAX, t);   /* (binary, or ascii cut short: apart) */
	return r;
}
