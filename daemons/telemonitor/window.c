/* Log windows (see window.h): the window rule, the record ring of a
 * stream and the windows waiting for their AFTER part.
 *
 * The ring keeps record texts in one byte buffer, each record contiguous
 * (a record that does not fit before the end of the buffer starts again at
 * offset 0), and an array of record descriptors in arrival order. Before a
 * record leaves the ring, every pending window that needs it is finished,
 * so a window is never silently missing its beginning. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "window.h"

#define NO_TEXT UINT32_MAX       /* window_rec.off of a record whose text was not kept */

/* --- the rule -------------------------------------------------------------- */

static const struct {
	const char *name;        /* unit spelling */
	double seconds;          /* its length */
} units[] = {
	{ "ns", 1e-9 }, { "us", 1e-6 }, { "ms", 1e-3 }, { "s", 1 }, { "sec", 1 }, { "secs", 1 },
	{ "second", 1 }, { "seconds", 1 }, { "min", 60 }, { "mins", 60 }, { "minute", 60 },
	{ "minutes", 60 }, { "h", 3600 }, { "hour", 3600 }, { "hours", 3600 },
	{ "day", 86400 }, { "days", 86400 },
};

/* SIZE ::= NUMBER [UNIT | 'records' | 'record']. Parses one size from *p;
 * *is_time tells which kind; *value is records or seconds. */
static int parse_size(const char **p, bool *is_time, double *value)
{
	const char *s = *p, *u;
	char *end;
	char word[16];
	size_t n;
	double v;

	while (isspace((unsigned char)*s))
		s++;
	if (!isdigit((unsigned char)*s) && *s != '.')
		return -EINVAL;
	v = strtod(s, &end);
	if (end == s || !isfinite(v) || v < 0)
		return -EINVAL;
	s = end;
	while (isspace((unsigned char)*s))
		s++;
	u = s;
	while (isalpha((unsigned char)*s))
		s++;
	n = (size_t)(s - u);
	*is_time = false;
	*value = v;
	if (n == 0 || (n == 6 && !strncmp(u, "record", 6)) || (n == 7 && !strncmp(u, "records", 7))) {
		if (n == 0 && strncmp(u, "after", 5) != 0 && *u && !isspace((unsigned char)*u))
			return -EINVAL;
		if (v != floor(v))
			return -EINVAL;
		*p = s;
		return 0;
	}
	if (n >= sizeof word)
		return -EINVAL;
	memcpy(word, u, n);
	word[n] = '\0';
	if (!strcmp(word, "after")) {
		/* "500 after ..." — a record count followed by the keyword */
		if (v != floor(v))
			return -EINVAL;
		*p = u;
		return 0;
	}
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (!strcmp(word, units[i].name)) {
			*is_time = true;
			*value = v * units[i].seconds;
			*p = s;
			return 0;
		}
	return -EINVAL;
}

int window_parse_duration(const char *text, double *seconds)
{
	const char *p = text;
	bool is_time;
	double v;

	if (parse_size(&p, &is_time, &v) < 0 || !is_time)
		return -EINVAL;
	while (isspace((unsigned char)*p))
		p++;
	if (*p)
		return -EINVAL;
	*seconds = v;
	return 0;
}

int window_spec_parse(const char *text, struct window_spec *out, char *err, size_t errlen)
{
	struct window_spec ws = { 0 };
	const char *p = text;
	bool is_time;
	double v;

	if (parse_size(&p, &is_time, &v) < 0)
		goto bad;
	if (is_time) {
		if (v <= 0 || v > 86400)
			goto range;
		ws.before_ns = (int64_t)(v * 1e9);
	} else {
		if (v < 1 || v > WINDOW_MAX_RECORDS)
			goto range;
		ws.before_n = (uint64_t)v;
	}
	while (isspace((unsigned char)*p))
		p++;
	if (!strncmp(p, "after", 5)) {
		p += 5;
		if (parse_size(&p, &is_time, &v) < 0)
			goto bad;
		if (is_time) {
			if (v > 86400)
				goto range;
			ws.after_ns = (int64_t)(v * 1e9);
		} else {
			if (v > WINDOW_MAX_RECORDS)
				goto range;
			ws.after_n = (uint64_t)v;
		}
		while (isspace((unsigned char)*p))
			p++;
	}
	if (*p)
		goto bad;
	*out = ws;
	return 0;
bad:
	snprintf(err, errlen, "\"%.60s\" is not a window such as \"500\", \"30 sec\" or "
		 "\"500 after 50\" (records or a time, then optionally 'after' and records "
		 "or a time)", text);
	return -EINVAL;
range:
	snprintf(err, errlen, "\"%.60s\": a window is 1 to %d records or at most 1 day", text,
		 WINDOW_MAX_RECORDS);
	return -EINVAL;
}

/* --- the ring -------------------------------------------------------------- */

void window_ring_init(struct window_ring *r, const struct window_spec *spec, size_t max_bytes)
{
	memset(r, 0, sizeof *r);
	r->spec = *spec;
	r->tick_ns = 1;
	r->bmax = max_bytes ? max_bytes : WINDOW_RING_BYTES;
	if (spec->before_n && !spec->after_ns)
		r->max_recs = spec->before_n + spec->after_n + WINDOW_LAG_RECORDS;
	else
		r->max_recs = WINDOW_RING_MAX_RECORDS;
	if (r->max_recs > WINDOW_RING_MAX_RECORDS)
		r->max_recs = WINDOW_RING_MAX_RECORDS;
}

void window_ring_free(struct window_ring *r)
{
	free(r->recs);
	free(r->bytes);
	free(r->header);
	free(r->label);
	r->recs = NULL;
	r->bytes = NULL;
	r->header = r->label = NULL;
	r->n = r->cap = r->bcap = 0;
	r->oldest_known = false;
}

int window_set_header(struct window_ring *r, const char *hdr, size_t len, double tick_ns,
		      const char *label)
{
	char *h = malloc(len + 1), *l = strdup(label ? label : "");

	if (!h || !l) {
		free(h);
		free(l);
		return -ENOMEM;
	}
	memcpy(h, hdr, len);
	h[len] = '\0';
	free(r->header);
	free(r->label);
	r->header = h;
	r->header_len = len;
	r->label = l;
	r->tick_ns = tick_ns > 0 ? tick_ns : 1;
	return 0;
}

static struct window_rec *rec_at(const struct window_ring *r, size_t i)
{
	size_t k = r->head + i;         /* (head < cap and i < cap: no division) */

	return &r->recs[k >= r->cap ? k - r->cap : k];
}

/* Ordinal of the oldest kept record (gap markers excluded), or 0. */
static uint64_t oldest_pos(const struct window_ring *r)
{
	for (size_t i = 0; i < r->n; i++)
		if (!window_rec_gap(rec_at(r, i)))
			return rec_at(r, i)->pos;
	return 0;
}

void window_set_origin(struct window_ring *r, int64_t ts)
{
	r->has_origin = true;
	r->origin = ts;
}

/* Index of the first kept record (or marker) at or past ordinal `pos`:
 * ordinals never decrease along the ring. */
static size_t first_at(const struct window_ring *r, uint64_t pos)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (rec_at(r, mid)->pos < pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int window_render(const struct window_ring *r, const struct window_pending *pw, uint64_t from,
		  uint64_t to, struct window_done *out)
{
	uint64_t id = pw->id;
	static const char magic[] = "#cmon-ascii 1\n";
	size_t size = r->header_len + sizeof magic + 256 + (r->label ? strlen(r->label) : 0);
	uint64_t first = oldest_pos(r);
	char *text, *p;
	bool truncated = first == 0 || first > from;
	size_t lo = first_at(r, from), hi = lo;

	for (; hi < r->n && rec_at(r, hi)->pos <= to; hi++) {
		const struct window_rec *w = rec_at(r, hi);
		size += (w->off == NO_TEXT ? 0 : w->len) + 32;
	}
	text = malloc(size);
	if (!text)
		return -ENOMEM;
	p = text;
	if (r->header_len >= sizeof magic - 1 && !memcmp(r->header, magic, sizeof magic - 1)) {
		memcpy(p, r->header, r->header_len);
		p += r->header_len;
	} else {
		memcpy(p, magic, sizeof magic - 1);
		p += sizeof magic - 1;
	}
	p += sprintf(p, "#telemon-window %llu records %llu-%llu%s\n", (unsigned long long)id,
		     (unsigned long long)from, (unsigned long long)to,
		     truncated ? " (the first ones had left the buffer)" : "");
	if (r->label && *r->label)
		p += sprintf(p, "#telemon-instance %s\n", r->label);
	if (pw->has_origin)
		p += sprintf(p, "#time-origin %lld\n", (long long)pw->origin);
	for (size_t i = lo; i < hi; i++) {
		const struct window_rec *w = rec_at(r, i);
		if (window_rec_gap(w)) {
			if (w->pos >= from && w->pos < to)
				p += sprintf(p, "#cmon-gap %llu\n", (unsigned long long)window_rec_gap(w));
			continue;
		}
		if (w->pos < from || w->pos > to)
			continue;
		if (w->off == NO_TEXT) {
			truncated = true;
			continue;
		}
		if (w->len)                  /* (an empty text may have no buffer yet) */
			memcpy(p, r->bytes + w->off, w->len);
		p += w->len;
		*p++ = '\n';
	}
	*p = '\0';
	out->id = id;
	out->from_pos = from;
	out->to_pos = to;
	out->truncated = truncated;
	out->text = text;
	out->len = (size_t)(p - text);
	return 0;
}

static void pend_remove(struct window_ring *r, size_t i)
{
	memmove(&r->pend[i], &r->pend[i + 1], (r->npend - i - 1) * sizeof r->pend[0]);
	r->npend--;
}

/* Finish every pending window that needs the oldest record, which is about
 * to leave the ring. */
static void before_evict(struct window_ring *r, struct window_done *done, size_t max,
			 size_t *ndone)
{
	uint64_t pos = rec_at(r, 0)->pos;

	for (size_t i = 0; i < r->npend;) {
		struct window_pending *pw = &r->pend[i];
		if (pw->from_pos > pos) {
			i++;
			continue;
		}
		if (*ndone < max && window_render(r, pw, pw->from_pos, r->last_pos,
						  &done[*ndone]) == 0)
			(*ndone)++;
		pend_remove(r, i);
	}
}

static void evict(struct window_ring *r, struct window_done *done, size_t max, size_t *ndone)
{
	struct window_rec *w = rec_at(r, 0);

	if (r->npend)
		before_evict(r, done, max, ndone);
	if (!window_rec_gap(w))
		r->evicted_pos = w->pos;
	if (!window_rec_gap(w) && w->off != NO_TEXT && w->len > 0) {
		r->used -= w->len;
		r->oldest_known = false;
	}
	if (++r->head == r->cap)        /* (no division: one a record) */
		r->head = 0;
	r->n--;
}

/* Lay the descriptors out afresh in an array of `ncap` (> n). */
static int resize_recs(struct window_ring *r, size_t ncap)
{
	struct window_rec *g = malloc(ncap * sizeof *g);

	if (!g)
		return -ENOMEM;
	for (size_t i = 0; i < r->n; i++)
		g[i] = *rec_at(r, i);
	free(r->recs);
	r->recs = g;
	r->cap = ncap;
	r->head = 0;
	return 0;
}

/* Make room in the descriptor array. */
static int grow_recs(struct window_ring *r)
{
	size_t ncap = r->cap ? r->cap + r->cap / 2 : WINDOW_RING_MIN_RECORDS;

	if (ncap > r->max_recs + 1)
		ncap = r->max_recs + 1;
	if (ncap <= r->cap)
		return -ENOSPC;
	return resize_recs(r, ncap);
}

/* Lay the kept texts out afresh, packed, in a buffer of `ncap` bytes
 * (at least what they occupy). */
static int resize_bytes(struct window_ring *r, size_t ncap)
{
	size_t off = 0;
	char *g = malloc(ncap);

	if (!g)
		return -ENOMEM;
	r->oldest_known = false;         /* (the texts move) */
	for (size_t i = 0; i < r->n; i++) {
		struct window_rec *w = rec_at(r, i);
		if (window_rec_gap(w) || w->off == NO_TEXT)
			continue;
		if (w->len)                  /* (an empty text may have no buffer yet) */
			memcpy(g + off, r->bytes + w->off, w->len);
		w->off = (uint32_t)off;
		off += w->len;
	}
	free(r->bytes);
	r->bytes = g;
	r->bcap = ncap;
	r->w = off;
	return 0;
}

/* Make the byte buffer bigger (up to bmax), laying records out afresh. */
static int grow_bytes(struct window_ring *r, size_t need)
{
	size_t ncap = r->bcap ? r->bcap + r->bcap / 2 : WINDOW_RING_MIN_BYTES;

	while (ncap < need + need / 3 && ncap < r->bmax)
		ncap += ncap / 2;
	if (ncap > r->bmax)
		ncap = r->bmax;
	if (ncap <= r->bcap)
		return -ENOSPC;
	return resize_bytes(r, ncap);
}

/* Give back what a ring holds beyond four times what it keeps (a burst, a
 * checker that lagged), down to the minimum sizes. */
static void shrink(struct window_ring *r)
{
	size_t used, want;

	if (r->cap > WINDOW_RING_MIN_RECORDS && r->n * 4 < r->cap) {
		for (want = WINDOW_RING_MIN_RECORDS; want < r->n * 2; want += want / 2)
			;
		if (want < r->cap)
			resize_recs(r, want);   /* on ENOMEM keep the larger one */
	}
	if (r->bcap > WINDOW_RING_MIN_BYTES && (used = r->used) * 4 < r->bcap) {
		for (want = WINDOW_RING_MIN_BYTES; want < used + used / 3; want += want / 2)
			;
		if (want < r->bcap)
			resize_bytes(r, want);
	}
}

void window_release(struct window_ring *r, uint64_t upto_pos)
{
	uint64_t keep = UINT64_MAX;
	size_t before = r->n;

	for (size_t i = 0; i < r->npend; i++)
		if (r->pend[i].from_pos < keep)
			keep = r->pend[i].from_pos;
	if (r->spec.before_n) {
		if (upto_pos <= r->spec.before_n)
			return;
		upto_pos -= r->spec.before_n;
	} else {
		/* by log time: keep what lies within BEFORE of the newest
		 * checked record */
		int64_t ts = 0;
		for (size_t i = r->n; i-- > 0;)
			if (!window_rec_gap(rec_at(r, i)) && rec_at(r, i)->pos <= upto_pos) {
				ts = rec_at(r, i)->ts;
				break;
			}
		while (r->n > 0 && rec_at(r, 0)->pos < upto_pos && rec_at(r, 0)->pos < keep &&
		       (window_rec_gap(rec_at(r, 0)) ||
			(double)(ts - rec_at(r, 0)->ts) * r->tick_ns > (double)r->spec.before_ns))
			evict(r, NULL, 0, NULL);
		goto done;
	}
	while (r->n > 0 && rec_at(r, 0)->pos < upto_pos && rec_at(r, 0)->pos < keep)
		evict(r, NULL, 0, NULL);
done:
	if (r->n < before)
		shrink(r);
}

static int slot(struct window_ring *r, struct window_done *done, size_t max, size_t *ndone)
{
	int rc;

	if (r->n + 1 >= r->cap) {
		rc = grow_recs(r);
		if (rc == -ENOMEM)
			return rc;
		while (r->n + 1 >= r->cap)
			evict(r, done, max, ndone);
	}
	return 0;
}

/* The index of the oldest kept record whose text takes bytes (r->n: none). */
static size_t oldest_text(const struct window_ring *r)
{
	size_t k = 0;

	while (k < r->n && (window_rec_gap(rec_at(r, k)) || rec_at(r, k)->off == NO_TEXT ||
			    !rec_at(r, k)->len))
		k++;
	return k;
}

int window_push(struct window_ring *r, uint64_t pos, int64_t ts, const char *text, size_t len,
		struct window_done *done, size_t max, size_t *ndone)
{
	struct window_rec *w;
	bool keep = len <= r->bmax / 4;
	int rc;

	*ndone = 0;
	if ((rc = slot(r, done, max, ndone)) < 0)
		return rc;
	if (keep && r->w + len > r->bcap && r->bcap < r->bmax) {
		size_t used = r->used;
		if (used + len > r->bcap / 4 * 3 || r->bcap == 0) {
			rc = grow_bytes(r, used + len);
			if (rc == -ENOMEM)
				return rc;
		}
	}
	if (keep) {
		if (r->w + len > r->bcap) {
			size_t tail = r->w;
			/* Back to the start: the texts between the write position
			 * and the end are the oldest, older than any from the start
			 * on; they go first, or the new text would be written over
			 * younger ones while the oldest seemed out of its way. */
			r->w = 0;
			while (r->n > 0) {
				size_t k = oldest_text(r);
				if (k == r->n || rec_at(r, k)->off < tail)
					break;
				for (size_t j = 0; j <= k; j++)
					evict(r, done, max, ndone);
			}
		}
		/* The oldest record with text is the one right after the write
		 * position; drop it (and the markers before it) while it is in
		 * the way of the new text. (An empty text is in nobody's way.) */
		while (!(r->oldest_known &&
			 (r->oldest_off >= r->w + len || r->oldest_end <= r->w))) {
			size_t k = oldest_text(r);
			const struct window_rec *o;
			if (k == r->n)
				break;          /* no text kept: the new one is the oldest */
			o = rec_at(r, k);
			r->oldest_known = true;
			r->oldest_off = o->off;
			r->oldest_end = o->off + o->len;
			if (o->off >= r->w + len || o->off + o->len <= r->w)
				break;
			for (size_t j = 0; j <= k; j++)
				evict(r, done, max, ndone);
		}
	}
	w = rec_at(r, r->n);            /* (slot left n + 1 < cap) */
	w->pos = pos;
	w->ts = ts;
	w->len = (uint32_t)len;
	if (keep) {
		w->off = (uint32_t)r->w;
		if (!r->oldest_known && len > 0) {
			r->oldest_known = true;      /* the only text kept */
			r->oldest_off = w->off;
			r->oldest_end = w->off + (uint32_t)len;
		}
		if (len)                         /* (no buffer yet for an empty first text) */
			memcpy(r->bytes + r->w, text, len);
		r->w += len;
		r->used += len;
	} else {
		w->off = NO_TEXT;
		w->len = 0;
	}
	r->n++;
	r->last_pos = pos;
	return 0;
}

int window_push_gap(struct window_ring *r, uint64_t pos, uint64_t count)
{
	struct window_done done[WINDOW_PENDING_MAX];
	size_t ndone = 0;
	struct window_rec *w;
	int rc;

	if (count == 0 || count > INT64_MAX)
		return 0;               /* (nothing lost; the count is kept in `ts`) */
	if (r->n + 1 >= r->cap) {
		rc = grow_recs(r);
		if (rc == -ENOMEM)
			return rc;
		/* A gap never forces pending windows out: drop it instead. */
		if (r->n + 1 >= r->cap && r->npend)
			return 0;
		while (r->n + 1 >= r->cap)
			evict(r, done, WINDOW_PENDING_MAX, &ndone);
	}
	w = &r->recs[(r->head + r->n) % r->cap];
	w->pos = pos;
	w->ts = (int64_t)count;
	w->off = WINDOW_REC_GAP;
	w->len = 0;
	r->n++;
	return 0;
}

/* Newest kept record (not a gap marker), or NULL. */
static const struct window_rec *newest(const struct window_ring *r)
{
	for (size_t i = r->n; i-- > 0;)
		if (!window_rec_gap(rec_at(r, i)))
			return rec_at(r, i);
	return NULL;
}

/* First record of a window ending at end_pos/end_ts under the BEFORE rule. */
static uint64_t window_from(const struct window_ring *r, uint64_t start_pos, uint64_t end_pos,
			    int64_t end_ts)
{
	uint64_t lo;

	if (r->spec.before_n) {
		lo = end_pos >= r->spec.before_n ? end_pos - r->spec.before_n + 1 : 1;
	} else {
		int64_t span = (int64_t)((double)r->spec.before_ns / r->tick_ns);
		lo = end_pos;
		for (size_t i = r->n; i-- > 0;) {
			const struct window_rec *w = rec_at(r, i);
			if (window_rec_gap(w) || w->pos > end_pos)
				continue;
			if (w->ts < end_ts - span || (start_pos && w->pos < start_pos))
				break;
			lo = w->pos;
		}
	}
	if (start_pos && start_pos > lo && start_pos <= end_pos)
		lo = start_pos;
	return lo ? lo : 1;
}

uint64_t window_request(struct window_ring *r, uint64_t start_pos, uint64_t end_pos,
			int64_t end_ts, uint64_t new_id, double now, double max_wait)
{
	uint64_t from = window_from(r, start_pos, end_pos, end_ts);
	uint64_t span_max = (r->spec.before_n + r->spec.after_n) * WINDOW_MERGE_FACTOR;
	struct window_pending *pw;

	for (size_t i = 0; i < r->npend; i++) {
		uint64_t to;
		pw = &r->pend[i];
		to = pw->end_pos + (r->spec.after_n ? r->spec.after_n : 0);
		if (from > to + 1)
			continue;
		if (span_max && end_pos > pw->from_pos && end_pos - pw->from_pos > span_max)
			continue;
		if (!span_max && r->n && end_pos > pw->from_pos &&
		    end_pos - pw->from_pos > WINDOW_RING_MAX_RECORDS / 4)
			continue;
		if (from < pw->from_pos)
			pw->from_pos = from;
		if (end_pos > pw->end_pos) {
			pw->end_pos = end_pos;
			pw->end_ts = end_ts;
		}
		pw->failures++;
		return pw->id;
	}
	if (r->npend >= WINDOW_PENDING_MAX)
		return 0;
	pw = &r->pend[r->npend++];
	pw->id = new_id;
	pw->from_pos = from;
	pw->end_pos = end_pos;
	pw->end_ts = end_ts;
	pw->start_pos = end_pos;
	pw->deadline = now + max_wait;
	pw->failures = 1;
	pw->has_origin = r->has_origin;
	pw->origin = r->origin;
	return new_id;
}

/* Last record of a pending window if its AFTER part is complete, else 0. */
static uint64_t window_to(const struct window_ring *r, const struct window_pending *pw, bool all)
{
	const struct window_rec *nw = newest(r);

	if (!nw)
		return pw->end_pos;
	if (r->spec.after_ns) {
		int64_t limit = pw->end_ts + (int64_t)((double)r->spec.after_ns / r->tick_ns);
		uint64_t to = pw->end_pos;
		bool complete = nw->ts > limit;
		if (!complete && !all)
			return 0;
		for (size_t i = 0; i < r->n; i++) {
			const struct window_rec *w = rec_at(r, i);
			if (!window_rec_gap(w) && w->pos > pw->end_pos && w->ts <= limit && w->pos > to)
				to = w->pos;
		}
		return to;
	}
	if (r->last_pos >= pw->end_pos + r->spec.after_n)
		return pw->end_pos + r->spec.after_n;
	return all ? r->last_pos : 0;
}

size_t window_collect(struct window_ring *r, double now, bool all, struct window_done *done,
		      size_t max)
{
	size_t ndone = 0;

	for (size_t i = 0; i < r->npend && ndone < max;) {
		struct window_pending *pw = &r->pend[i];
		bool late = now >= pw->deadline;
		uint64_t to = window_to(r, pw, all || late);
		if (!to) {
			i++;
			continue;
		}
		if (to < pw->end_pos)
			to = pw->end_pos;
		if (window_render(r, pw, pw->from_pos, to, &done[ndone]) == 0)
			ndone++;
		pend_remove(r, i);
	}
	return ndone;
}

double window_next_deadline(const struct window_ring *r)
{
	double d = 0;

	for (size_t i = 0; i < r->npend; i++)
		if (d == 0 || r->pend[i].deadline < d)
			d = r->pend[i].deadline;
	return d;
}
