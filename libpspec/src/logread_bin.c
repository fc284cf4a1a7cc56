/* logread_bin.c — the cmon-bin 1 reader (DESIGN.md §4.2, proto/cmonlog.proto).
 *
 * Frames are a varint length and one serialized Record. Every frame is
 * decoded by protobuf-c with a bump allocator that is reset per frame, so
 * reading allocates nothing in the steady state. Event frames, nearly all of
 * a log, first go through a small hand-written decoder that understands the
 * plain encoding of Record{event: Event{fields 1-5 in order}} and declines
 * anything else (other orders, repeated or unknown fields, unpacked values,
 * odd varints, length prefixes over 5 bytes); a declined frame goes to
 * protobuf-c. logbin_check_fast() lets the tests and the fuzzer prove that
 * the two agree. (Measured on a Figure 3 log: protobuf-c alone ~10M
 * events/s, with the fast path ~55M.)
 */
#include "logread-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmonlog.pb-c.h"
#include "util.h"

/* Outcomes of read_frame(). */
enum { FRAME_EOF = 0, FRAME_OK = 1, FRAME_TRUNC, FRAME_BIGLEN, FRAME_BADVARINT, FRAME_NOTBIN };

/* The tag byte of Record.header and of Record.event (field 1 / 3, length-delimited). */
#define TAG_HEADER 0x0a
#define TAG_EVENT 0x1a

/* --- the bump allocator ------------------------------------------------- */

static void *arena_alloc(void *ad, size_t n)
{
    log_arena *a = ad;
    if (n > LOG_MAX_ARENA)
        return NULL;
    n = (n + 15) & ~(size_t)15;
    if (a->cap - a->used >= n) {
        void *p = a->block + a->used;
        a->used += n;
        return p;
    }
    if (a->cap + a->extra_bytes + n > LOG_MAX_ARENA)
        return NULL;
    /* Within the limit, running out of memory is what it is everywhere in
     * libpspec (util.h), not a bad frame: protobuf-c would only say the
     * frame did not decode, and a Header frame would make the log
     * "unrecognized". */
    if (a->nextra == a->extra_cap) {
        a->extra_cap = a->extra_cap ? 2 * a->extra_cap : 16;
        a->extra = ps_realloc(a->extra, a->extra_cap * sizeof *a->extra);
    }
    void *p = ps_malloc(n);
    a->extra[a->nextra++] = p;
    a->extra_bytes += n;
    return p;
}

static void arena_free(void *ad, void *p)
{
    (void)ad;
    (void)p;   /* everything goes at the next reset */
}

/* Forget the last frame's allocations; if it overflowed the block, grow the
 * block so that a frame like it fits next time. */
static void arena_reset(log_arena *a)
{
    if (a->nextra) {
        for (size_t i = 0; i < a->nextra; i++)
            free(a->extra[i]);
        size_t cap = a->cap + a->extra_bytes;
        cap = cap < 65536 ? 65536 : cap;
        char *b = malloc(cap);
        if (b) {
            free(a->block);
            a->block = b;
            a->cap = cap;
        }
        a->nextra = 0;
        a->extra_bytes = 0;
    }
    a->used = 0;
}

static void arena_destroy(log_arena *a)
{
    for (size_t i = 0; i < a->nextra; i++)
        free(a->extra[i]);
    free(a->extra);
    free(a->block);
    memset(a, 0, sizeof *a);
}

static Cmonlog__Record *unpack(log_reader *r, const unsigned char *p, size_t n)
{
    arena_reset(&r->arena);
    ProtobufCAllocator alloc = { arena_alloc, arena_free, &r->arena };
    return cmonlog__record__unpack(&alloc, n, p);
}

/* --- TypeDef ids -------------------------------------------------------- */

static inline uint32_t type_get(const log_reader *r, uint32_t id)
{
    if (id < LOG_SMALL_TYPES)
        return id < r->tsmall_cap ? r->tsmall[id] : 0;
    if (!r->tbig)
        return 0;
    uint64_t key = (uint64_t)id + 1;
    for (uint32_t i = (uint32_t)(key * 0x9e3779b97f4a7c15ull >> 32) & r->tbig_mask;;
         i = (i + 1) & r->tbig_mask) {
        if (r->tbig[i].key == key)
            return r->tbig[i].name_id;
        if (r->tbig[i].key == 0)
            return 0;
    }
}

static void tbig_put(log_type_slot *t, uint32_t mask, uint64_t key, uint32_t val)
{
    uint32_t i = (uint32_t)(key * 0x9e3779b97f4a7c15ull >> 32) & mask;
    while (t[i].key != 0 && t[i].key != key)
        i = (i + 1) & mask;
    t[i].key = key;
    t[i].name_id = val;
}

/* Map TypeDef id -> name_id (stored + 1). -ENOSPC past LOG_MAX_TYPES. */
static int type_set(log_reader *r, uint32_t id, uint32_t name_id)
{
    if (id < LOG_SMALL_TYPES) {
        if (id >= r->tsmall_cap) {
            uint32_t cap = r->tsmall_cap ? r->tsmall_cap : 64;
            while (cap <= id)
                cap *= 2;
            r->tsmall = ps_realloc(r->tsmall, cap * sizeof *r->tsmall);
            memset(r->tsmall + r->tsmall_cap, 0, (cap - r->tsmall_cap) * sizeof *r->tsmall);
            r->tsmall_cap = cap;
        }
        r->tsmall[id] = name_id + 1;
        return 0;
    }
    if (type_get(r, id)) {
        tbig_put(r->tbig, r->tbig_mask, (uint64_t)id + 1, name_id + 1);
        return 0;
    }
    if (r->tbig_count >= LOG_MAX_TYPES)
        return -ENOSPC;
    if (!r->tbig || 2 * (r->tbig_count + 1) > r->tbig_mask + 1) {
        uint32_t size = r->tbig ? 2 * (r->tbig_mask + 1) : 64;
        log_type_slot *t = ps_calloc(size, sizeof *t);
        for (uint32_t i = 0; r->tbig && i <= r->tbig_mask; i++)
            if (r->tbig[i].key)
                tbig_put(t, size - 1, r->tbig[i].key, r->tbig[i].name_id);
        free(r->tbig);
        r->tbig = t;
        r->tbig_mask = size - 1;
    }
    tbig_put(r->tbig, r->tbig_mask, (uint64_t)id + 1, name_id + 1);
    r->tbig_count++;
    return 0;
}

/* logr_ops.rewind: the TypeDefs are read again. */
static void bin_rewind(log_reader *r)
{
    if (r->tsmall)
        memset(r->tsmall, 0, r->tsmall_cap * sizeof *r->tsmall);
    if (r->tbig)
        memset(r->tbig, 0, (r->tbig_mask + 1) * sizeof *r->tbig);
    r->tbig_count = 0;
}

/* logr_ops.free: the TypeDef maps and protobuf-c's arena. */
static void bin_free(log_reader *r)
{
    free(r->tsmall);
    free(r->tbig);
    r->tsmall = NULL;
    r->tbig = NULL;
    r->tsmall_cap = r->tbig_mask = r->tbig_count = 0;
    arena_destroy(&r->arena);
}

/* --- frames ------------------------------------------------------------- */

/* Decode the varint at p: bytes used, 0 if more bytes are needed, -1 if it
 * runs past 10 bytes. */
static int frame_varint(const unsigned char *p, size_t avail, uint64_t *v)
{
    uint64_t x = 0;
    for (size_t i = 0; i < 10; i++) {
        if (i == avail)
            return 0;
        x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *v = x;
            return (int)i + 1;
        }
    }
    return -1;
}

/* The next frame: FRAME_OK with *f, *n and its byte offset *off, or another
 * FRAME_* outcome (*off then holds where it happened), or a read error.
 * `detect`: stop early (FRAME_NOTBIN) when the first byte of the Record is
 * not the Header tag, so that non-logs are not read to the end. */
static int read_frame(log_reader *r, const unsigned char **f, size_t *n, uint64_t *off,
                      bool detect, char **errmsg)
{
    for (;;) {
        size_t avail = r->end - r->start;
        const unsigned char *p = (const unsigned char *)r->buf + r->start;
        uint64_t len = 0;
        int vl = frame_varint(p, avail, &len);
        *off = r->base + r->start;
        if (vl < 0)
            return FRAME_BADVARINT;
        if (vl > 0) {
            if (len > LOG_MAX_FRAME) {
                *n = (size_t)len > LOG_MAX_FRAME ? LOG_MAX_FRAME + 1 : (size_t)len;
                return FRAME_BIGLEN;
            }
            if (detect && avail > (size_t)vl && (len == 0 || p[vl] != TAG_HEADER))
                return FRAME_NOTBIN;
            if (avail >= (size_t)vl + len) {
                *f = p + vl;
                *n = (size_t)len;
                r->start += (size_t)vl + (size_t)len;
                return FRAME_OK;
            }
        }
        if (r->eof) {
            *n = avail;
            return avail == 0 ? FRAME_EOF : FRAME_TRUNC;
        }
        int rc = logr_fill(r, vl > 0 ? (size_t)vl + (size_t)len : avail + 1, errmsg);
        if (rc < 0)
            return rc;
    }
}

/* --- the hand-written Event decoder -------------------------------------- */

/* A varint inside a frame; declines (0) on anything protobuf-c might read
 * differently: truncation, or a 10th byte above 1. */
static inline __attribute__((always_inline)) int fast_varint(const unsigned char **pp, const unsigned char *e, uint64_t *v)
{
    const unsigned char *p = *pp;
    if (PS_LIKELY(p < e && *p < 0x80)) {
        *v = *p;
        *pp = p + 1;
        return 1;
    }
    if (PS_LIKELY(e - p >= 2 && p[1] < 0x80)) {
        *v = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
        *pp = p + 2;
        return 1;
    }
    uint64_t x = 0;
    for (unsigned i = 0; i < 10; i++, p++) {
        if (p >= e || (i == 9 && *p > 1))
            return 0;
        x |= (uint64_t)(*p & 0x7f) << (7 * i);
        if (!(*p & 0x80)) {
            *v = x;
            *pp = p + 1;
            return 1;
        }
    }
    return 0;
}

/* A length prefix inside a frame. protobuf-c reads at most 5 bytes of one
 * (scan_length_prefixed_data) and rejects the Record if the prefix is
 * longer, whatever its value: decline those too, or the fast path would take
 * a frame the reference decoder calls invalid. */
static inline int fast_length(const unsigned char **pp, const unsigned char *e, uint64_t *len)
{
    const unsigned char *p = *pp;
    if (!fast_varint(&p, e, len) || p - *pp > 5)
        return 0;
    *pp = p;
    return 1;
}

/* Fields of Event in the order every protobuf encoder writes them (field
 * number order), each at most once, except ivalues (6), which may come as
 * packed blocks and single unpacked keys in any mix, as protobuf allows:
 * anything else is declined, and so is an Event with both values and
 * ivalues, or with more than LOGBIN_FAST_IVALUES ivalues. */
static inline __attribute__((always_inline)) int decode_fast(const unsigned char *p, size_t n,
                                                             logbin_event *ev, double *ivals)
{
    const unsigned char *e = p + n;
    uint64_t len, v;
    if (n < 2 || *p++ != TAG_EVENT || !fast_length(&p, e, &len) || len != (uint64_t)(e - p))
        return 0;
    ev->has_type = ev->has_thread = ev->has_ts = ev->has_ts_delta = false;
    ev->type = 0;
    ev->thread = 0;
    ev->ts = 0;
    ev->ts_delta = 0;
    ev->nvalues = 0;
    ev->values = NULL;
    if (p < e && *p == 0x08) {          /* 1: type, varint */
        p++;
        if (!fast_varint(&p, e, &v) || v > UINT32_MAX)
            return 0;
        ev->has_type = true;
        ev->type = (uint32_t)v;
    }
    if (p < e && *p == 0x10) {          /* 2: thread, varint */
        p++;
        if (!fast_varint(&p, e, &v))
            return 0;
        ev->has_thread = true;
        ev->thread = (int64_t)v;
    }
    if (p < e && *p == 0x18) {          /* 3: ts, varint */
        p++;
        if (!fast_varint(&p, e, &v))
            return 0;
        ev->has_ts = true;
        ev->ts = v;
    }
    if (p < e && *p == 0x20) {          /* 4: ts_delta, zigzag varint */
        p++;
        if (!fast_varint(&p, e, &v))
            return 0;
        ev->has_ts_delta = true;
        ev->ts_delta = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
    }
    if (p < e && *p == 0x2a) {          /* 5: values, packed doubles */
        p++;
        if (!fast_length(&p, e, &len) || len % 8 || len > (uint64_t)(e - p))
            return 0;
        ev->values = p;
        ev->nvalues = (size_t)len / 8;
        p += len;
        return p == e;                  /* ivalues too: protobuf-c decides */
    }
    size_t k = 0;
    while (p < e) {                     /* 6: ivalues, zigzag varints */
        if (*p == 0x30) {               /* one unpacked */
            p++;
            if (k == LOGBIN_FAST_IVALUES || !fast_varint(&p, e, &v))
                return 0;
            ivals[k++] = (double)((int64_t)(v >> 1) ^ -(int64_t)(v & 1));
        } else if (*p == 0x32) {        /* a packed block */
            p++;
            if (!fast_length(&p, e, &len) || len > (uint64_t)(e - p))
                return 0;
            const unsigned char *be = p + len;
            while (p < be) {
                if (k == LOGBIN_FAST_IVALUES || !fast_varint(&p, be, &v))
                    return 0;
                ivals[k++] = (double)((int64_t)(v >> 1) ^ -(int64_t)(v & 1));
            }
        } else {
            return 0;
        }
    }
    ev->nvalues = k;
    return 1;
}

int logbin_decode_fast(const unsigned char *p, size_t n, logbin_event *ev, double *ivals)
{
    return decode_fast(p, n, ev, ivals);
}

/* Copy little-endian doubles. */
static void copy_le_doubles(double *out, const unsigned char *in, size_t n)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n)
        memcpy(out, in, n * 8);
#else
    for (size_t i = 0; i < n; i++) {
        uint64_t u = 0;
        for (int b = 7; b >= 0; b--)
            u = u << 8 | in[8 * i + b];
        memcpy(&out[i], &u, 8);
    }
#endif
}

int logbin_check_fast(const unsigned char *p, size_t n)
{
    logbin_event f;
    double ivals[LOGBIN_FAST_IVALUES];
    if (logbin_decode_fast(p, n, &f, ivals) != 1)
        return 0;
    Cmonlog__Record *m = cmonlog__record__unpack(NULL, n, p);
    int rc = -1;
    if (m && m->kind_case == CMONLOG__RECORD__KIND_EVENT) {
        const Cmonlog__Event *s = m->event;
        /* what protobuf-c saw, as the reader would take it */
        size_t sn = s->n_values ? s->n_values : s->n_ivalues;
        double *svals = ps_malloc((sn ? sn : 1) * sizeof *svals);
        for (size_t i = 0; i < sn; i++)
            svals[i] = s->n_values ? s->values[i] : (double)s->ivalues[i];
        double *vals = ps_malloc((f.nvalues ? f.nvalues : 1) * sizeof *vals);
        if (f.values)
            copy_le_doubles(vals, f.values, f.nvalues);
        else if (f.nvalues)
            memcpy(vals, ivals, f.nvalues * sizeof *vals);
        if (!!s->has_type == f.has_type && s->type == f.type &&
            !!s->has_thread == f.has_thread && s->thread == f.thread &&
            !!s->has_ts == f.has_ts && s->ts == f.ts &&
            !!s->has_ts_delta == f.has_ts_delta && s->ts_delta == f.ts_delta &&
            !(s->n_values && s->n_ivalues) && sn == f.nvalues &&
            (f.nvalues == 0 || memcmp(svals, vals, f.nvalues * 8) == 0))
            rc = 0;
        free(vals);
        free(svals);
    }
    if (m)
        cmonlog__record__free_unpacked(m, NULL);
    return rc;
}

/* --- records ------------------------------------------------------------ */

/* Little-endian double i of `in`, as bits. */
static inline uint64_t le_double_bits(const unsigned char *in, size_t i)
{
    uint64_t u;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(&u, in + 8 * i, 8);
#else
    u = 0;
    for (int b = 7; b >= 0; b--)
        u = u << 8 | in[8 * i + b];
#endif
    return u;
}

/* Check an Event and fill *rec: 1, or 0 after a warning. Values come from
 * `dvals` (protobuf-c's doubles), `ivals` (protobuf-c's ivalues), the wire
 * bytes in ev->values (fast path, doubles), or else are in r->vals already
 * (fast path, ivalues: decode_fast wrote them there). */
static inline int event_record(log_reader *r, const logbin_event *ev, const double *dvals,
                               const int64_t *ivals, uint64_t off, log_record *rec)
{
    r->pos++;
    int64_t ts;
    if (ev->has_ts) {
        if (ev->ts > INT64_MAX) {
            logr_warn(r, off, "timestamp %llu out of range", (unsigned long long)ev->ts);
            return 0;
        }
        ts = (int64_t)ev->ts;
    } else {
        int64_t d = ev->has_ts_delta ? ev->ts_delta : 0;
        if (__builtin_add_overflow(r->prev_ts, d, &ts) || ts < 0) {
            logr_warn(r, off, "timestamp delta %lld after %lld out of range", (long long)d,
                      (long long)r->prev_ts);
            return 0;
        }
    }
    r->prev_ts = ts;   /* later deltas count from here even if this event is bad */
    /* An absent type is type 0, protobuf's default (writers leave it out) */
    uint32_t id1 = type_get(r, ev->type);
    if (!id1) {
        logr_warn(r, off, "event of undefined type id %u", ev->type);
        return 0;
    }
    if (PS_UNLIKELY(dvals && ivals)) {
        logr_warn(r, off, "event with both values and ivalues");
        return 0;
    }
    size_t nv = ev->nvalues;
    if (PS_UNLIKELY(nv > r->vals_cap))
        logr_vals_reserve(r, nv);
    if (ev->values) {                       /* fast path: doubles on the wire */
        for (size_t i = 0; i < nv; i++) {
            uint64_t u = le_double_bits(ev->values, i);
            if (PS_UNLIKELY((u & 0x7ff0000000000000ull) == 0x7ff0000000000000ull)) {
                logr_warn(r, off, "value %zu is not a finite number", i + 1);
                return 0;
            }
            memcpy(&r->vals[i], &u, 8);
        }
    } else if (ivals) {                     /* protobuf-c: integers, always finite */
        for (size_t i = 0; i < nv; i++)
            r->vals[i] = (double)ivals[i];
    } else if (dvals) {                     /* protobuf-c: doubles */
        for (size_t i = 0; i < nv; i++) {
            if (PS_UNLIKELY(!isfinite(dvals[i]))) {
                logr_warn(r, off, "value %zu is not a finite number", i + 1);
                return 0;
            }
            r->vals[i] = dvals[i];
        }
    }
    return logr_event(r, rec, off, ts, ev->has_thread ? ev->thread : 0, id1 - 1, (uint32_t)nv);
}

static void typedef_record(log_reader *r, const Cmonlog__TypeDef *td, uint64_t off)
{
    char q[200];
    if (!td->has_id || !td->name) {
        logr_warn(r, off, "TypeDef without %s", td->has_id ? "a name" : "an id");
        return;
    }
    size_t n = strlen(td->name);
    if (n > LOG_MAX_NAME || !log_name_valid(td->name, n)) {
        logr_warn(r, off, "TypeDef %u: bad event name '%s'", td->id, logr_quote(q, td->name, n));
        return;
    }
    uint32_t id = logr_intern(r, td->name, n, logr_hash(td->name, n));
    if (id == UINT32_MAX) {
        logr_warn(r, off, "too many distinct event names (limit %u)", LOG_MAX_NAMES);
        return;
    }
    if (type_set(r, td->id, id) < 0)
        logr_warn(r, off, "too many type ids (limit %u)", LOG_MAX_TYPES);
}

/* A thread's cost update: 1 with *rec filled when the reader wants them
 * and it is good, 0 after a warning when it is not, 0 when not wanted. */
static int overhead_record(log_reader *r, const Cmonlog__Overhead *o, uint64_t off, log_record *rec)
{
    if (!r->want_overhead)
        return 0;
    double m = o->has_overhead_ns ? o->overhead_ns : 0;
    double sp = o->has_overhead_spread_ns ? o->overhead_spread_ns : 0;
    if (!o->has_thread || !logr_overhead_ok(m, sp)) {
        char t1[40], t2[40];
        log_fmt_double(t1, m);
        log_fmt_double(t2, sp);
        logr_warn(r, off, "bad Overhead record%s (want overhead_ns > 0, overhead_spread_ns >= 0) %s %s",
                  o->has_thread ? "" : " without a thread", o->has_overhead_ns ? t1 : "(none)", t2);
        return 0;
    }
    return logr_overhead(r, rec, off, o->thread, m, sp);
}

/* One frame: 1 with *rec filled, 0 to go on, 2 at an End record. Kept out
 * of line: bin_next's common case then needs a smaller frame. */
static __attribute__((noinline)) int handle_frame(log_reader *r, const unsigned char *f,
                                                  size_t n, uint64_t off, log_record *rec)
{
    logbin_event ev;
    if (r->fastpath && n > 0 && f[0] == TAG_EVENT && decode_fast(f, n, &ev, r->vals))
        return event_record(r, &ev, NULL, NULL, off, rec);
    Cmonlog__Record *m = unpack(r, f, n);
    if (!m) {
        if (n > 0 && f[0] == TAG_EVENT)
            r->pos++;   /* it meant to be an event: keep positions stable */
        logr_warn(r, off, "frame of %zu bytes is not a valid Record", n);
        return 0;
    }
    switch (m->kind_case) {
    case CMONLOG__RECORD__KIND_EVENT: {
        const Cmonlog__Event *e = m->event;
        ev = (logbin_event){
            .has_type = e->has_type, .type = e->type,
            .has_thread = e->has_thread, .thread = e->thread,
            .has_ts = e->has_ts, .ts = e->ts,
            .has_ts_delta = e->has_ts_delta, .ts_delta = e->ts_delta,
            .nvalues = e->n_values ? e->n_values : e->n_ivalues,
        };
        return event_record(r, &ev, e->n_values ? e->values : NULL,
                            e->n_ivalues ? e->ivalues : NULL, off, rec);
    }
    case CMONLOG__RECORD__KIND_TYPEDEF:
        typedef_record(r, m->typedef_, off);
        return 0;
    case CMONLOG__RECORD__KIND_GAP:
        return logr_gap(r, rec, off, m->gap->has_count ? m->gap->count : 0);
    case CMONLOG__RECORD__KIND_OVERHEAD:
        return overhead_record(r, m->overhead, off, rec);
    case CMONLOG__RECORD__KIND_END:
        return 2;
    case CMONLOG__RECORD__KIND_HEADER:
        logr_warn(r, off, "Header record after the start of the log ignored");
        return 0;
    default:
        logr_warn(r, off, "record of unknown kind ignored");
        return 0;
    }
}

/* logr_ops.next: frame by frame, short Event frames first. */
static int bin_next(log_reader *r, log_record *rec, char **errmsg)
{
    while (!r->ended) {
        /* The common case first: a whole short Event frame is buffered. */
        const unsigned char *b = (const unsigned char *)r->buf + r->start;
        size_t avail = r->end - r->start;
        logbin_event ev;
        if (PS_LIKELY(avail >= 2 && b[0] < 0x80 && avail > b[0] && b[1] == TAG_EVENT &&
                      r->fastpath && decode_fast(b + 1, b[0], &ev, r->vals))) {
            uint64_t off = r->base + r->start;
            r->start += 1 + (size_t)b[0];
            if (event_record(r, &ev, NULL, NULL, off, rec))
                return 1;
            continue;
        }
        const unsigned char *f = NULL;
        size_t n = 0;
        uint64_t off = 0;
        int rc = read_frame(r, &f, &n, &off, false, errmsg);
        switch (rc) {
        case FRAME_OK:
            rc = handle_frame(r, f, n, off, rec);
            if (rc == 1)
                return 1;
            if (rc == 2)
                r->ended = true;
            break;
        case FRAME_EOF:
            r->ended = true;
            break;
        case FRAME_TRUNC:
            logr_warn(r, off, "truncated frame at end of log (%zu bytes) ignored", n);
            r->start = r->end;
            r->ended = true;
            break;
        case FRAME_BIGLEN:
            logr_error(errmsg, "frame at byte %llu is longer than the limit of %u bytes",
                       (unsigned long long)off, LOG_MAX_FRAME);
            r->ended = true;
            return -EBADMSG;
        case FRAME_BADVARINT:
            logr_error(errmsg, "bad frame length at byte %llu", (unsigned long long)off);
            r->ended = true;
            return -EBADMSG;
        default:
            return rc;   /* read error */
        }
    }
    return 0;
}

/* --- the header --------------------------------------------------------- */

static void add_str(log_reader *r, const char *key, const char *val)
{
    if (val)
        logr_header_add(r, key, strlen(key), val, strlen(val));
}

static void add_i64(log_reader *r, const char *key, bool has, int64_t v)
{
    char tmp[32];
    if (has) {
        snprintf(tmp, sizeof tmp, "%lld", (long long)v);
        add_str(r, key, tmp);
    }
}

/* logr_ops.open: read and check the Header frame; 1 when the input is not
 * a cmon-bin log. */
static int bin_open(log_reader *r, char **errmsg)
{
    const unsigned char *f = NULL;
    size_t n = 0;
    uint64_t off = 0;
    int rc = read_frame(r, &f, &n, &off, true, errmsg);
    if (rc < 0)
        return rc;
    if (rc != FRAME_OK)
        return 1;
    Cmonlog__Record *m = unpack(r, f, n);
    if (!m || m->kind_case != CMONLOG__RECORD__KIND_HEADER || !m->header->magic ||
        strcmp(m->header->magic, "cmon-bin") != 0)
        return 1;
    const Cmonlog__Header *h = m->header;
    if (!h->has_version || h->version != 1) {
        logr_error(errmsg, "bad header: unsupported cmon-bin version %u",
                   h->has_version ? h->version : 0);
        return -EINVAL;
    }
    if (h->has_tick_ns && h->tick_ns != 0) {
        if (!(h->tick_ns > 0) || !isfinite(h->tick_ns)) {
            char t[40];
            log_fmt_double(t, h->tick_ns);
            logr_error(errmsg, "bad header: bad tick-ns %s", t);
            return -EINVAL;
        }
        r->hdr.tick_ns = h->tick_ns;
    }
    /* the writer's cost per event: a mean > 0, and a spread >= 0 (0 when
     * absent) that means nothing without it */
    if (h->has_overhead_ns || h->has_overhead_spread_ns) {
        double m = h->has_overhead_ns ? h->overhead_ns : 0;
        double sp = h->has_overhead_spread_ns ? h->overhead_spread_ns : 0;
        if (!logr_overhead_ok(m, sp)) {
            char t1[40], t2[40];
            log_fmt_double(t1, m);
            log_fmt_double(t2, sp);
            logr_error(errmsg, "bad header: bad cmon-overhead-ns %s %s (want MEAN SPREAD, MEAN > 0, SPREAD >= 0)",
                       h->has_overhead_ns ? t1 : "(none)", t2);
            return -EINVAL;
        }
        r->hdr.overhead_ns = m;
        r->hdr.overhead_spread_ns = sp;
    }
    if (h->n_extra + 7 > LOG_MAX_HEADER_FIELDS) {
        logr_error(errmsg, "bad header: more than %u header fields", LOG_MAX_HEADER_FIELDS);
        return -E2BIG;
    }
    add_str(r, "program", h->program);
    add_str(r, "machine", h->machine);
    add_i64(r, "pid", h->has_pid, h->pid);
    if (h->has_tick_ns && h->tick_ns != 0) {
        char t[40];
        log_fmt_double(t, h->tick_ns);
        add_str(r, "tick-ns", t);
    }
    add_str(r, "clock", h->clock);
    add_i64(r, "start-unix-ns", h->has_start_unix_ns, h->start_unix_ns);
    if (r->hdr.overhead_ns > 0) {
        char t1[40], t2[40], t[90];
        log_fmt_double(t1, r->hdr.overhead_ns);
        log_fmt_double(t2, r->hdr.overhead_spread_ns);
        snprintf(t, sizeof t, "%s %s", t1, t2);
        add_str(r, "cmon-overhead-ns", t);
    }
    for (size_t i = 0; i < h->n_extra; i++)
        if (h->extra[i]->key)
            add_str(r, h->extra[i]->key, h->extra[i]->value ? h->extra[i]->value : "");
    r->data_off = r->base + r->start;
    r->prev_ts = 0;
    logr_vals_reserve(r, LOGBIN_FAST_IVALUES);   /* decode_fast writes ivalues there */
    return 0;
}

const logr_ops logr_bin_ops = {
    .format = LOG_FORMAT_BIN,
    .open = bin_open,
    .next = bin_next,
    .rewind = bin_rewind,
    .free = bin_free,
};
