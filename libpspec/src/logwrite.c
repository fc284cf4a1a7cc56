/* logwrite.c — the log writer (see logwrite.h).
 *
 * Binary records are packed by protobuf-c straight into the output buffer,
 * each preceded by its varint length. Ascii numbers are formatted by hand
 * for integers and as the shortest text that reads back exactly otherwise,
 * so a binary -> ascii -> binary round trip keeps every value bit for bit.
 */
#include "logwrite.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmonlog.pb-c.h"
#include "logread-internal.h"
#include "util.h"

#define OUT_CAP (256u * 1024)

/* A declared event type. */
typedef struct wtype {
    char *name;
    char **attrs;
    size_t nattrs;
    uint32_t hash;
    bool emitted;       /* binary: TypeDef written */
} wtype;

struct log_writer {
    int fd;
    bool own_fd;
    log_format format;
    int err;            /* first error; sticky */
    bool ended;
    char *buf;          /* output not yet written */
    size_t len, cap;
    wtype *types;
    size_t ntypes, types_cap;
    int32_t *slots;     /* name hash -> index into types; -1 empty */
    uint32_t slot_mask;
    uint64_t nevents;
    bool compat;        /* binary: Events as before ivalues (log_writer_set_compat) */
    bool to_file;       /* binary to a regular file: Events carry ts_delta and
                           leave type 0 out, as every writer leaves thread 0 out */
    int64_t prev_ts;    /* the last Event's timestamp (for ts_delta) */
};

/* --- output ------------------------------------------------------------- */

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pfd = { .fd = fd, .events = POLLOUT };
            if (poll(&pfd, 1, -1) >= 0 || errno == EINTR)
                continue;
        }
        return k < 0 ? -errno : -EIO;
    }
    return 0;
}

int log_writer_flush(log_writer *w)
{
    if (w->err)
        return w->err;
    int rc = write_all(w->fd, w->buf, w->len);
    w->len = 0;
    if (rc < 0)
        w->err = rc;
    return rc;
}

/* Room for n more bytes at w->buf + w->len. */
static int reserve(log_writer *w, size_t n)
{
    if (w->err)
        return w->err;
    if (w->cap - w->len >= n)
        return 0;
    int rc = log_writer_flush(w);
    if (rc < 0)
        return rc;
    if (n > w->cap) {
        w->buf = ps_realloc(w->buf, n);
        w->cap = n;
    }
    return 0;
}

/* Append one varint-length-delimited Record. */
static int put_record(log_writer *w, const Cmonlog__Record *rec)
{
    size_t n = cmonlog__record__get_packed_size(rec);
    if (n > LOG_MAX_FRAME)
        return -E2BIG;   /* readers would refuse it */
    int rc = reserve(w, n + 10);
    if (rc < 0)
        return rc;
    unsigned char *p = (unsigned char *)w->buf + w->len;
    size_t v = n, i = 0;
    while (v >= 0x80) {
        p[i++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[i++] = (unsigned char)v;
    cmonlog__record__pack(rec, p + i);
    w->len += i + n;
    return 0;
}

static char *put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *put_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return put_u64(p, 0 - (uint64_t)v);
    }
    return put_u64(p, (uint64_t)v);
}

/* A value as text that the ascii reader turns back into the same double. */
static char *put_double(char *p, double v)
{
    if (fabs(v) < 1e15 && v == (double)(int64_t)v) {
        if (v == 0 && signbit(v))
            *p++ = '-';
        return put_i64(p, (int64_t)v);
    }
    char tmp[40];
    log_fmt_double(tmp, v);
    size_t n = strlen(tmp);
    memcpy(p, tmp, n);
    return p + n;
}

/* --- header ------------------------------------------------------------- */

/* Copy a header key or value, replacing what an ascii header line cannot
 * hold: keys lose blanks and control bytes, values control bytes. */
static char *clean(const char *s, bool key)
{
    char *c = ps_strdup(s ? s : "");
    for (char *p = c; *p; p++) {
        unsigned char u = (unsigned char)*p;
        if (key ? (u <= 0x20 || u == 0x7f) : (u < 0x20 && u != '\t'))
            *p = key ? '_' : ' ';
    }
    return c;
}

static bool parse_i64(const char *s, int64_t *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (!*s || *end || errno)
        return false;
    *v = x;
    return true;
}

static bool parse_tick(const char *s, double *v)
{
    char *end;
    double x = log_strtod(s, &end);
    if (!*s || *end || !(x > 0) || !isfinite(x))
        return false;
    *v = x;
    return true;
}

/* "MEAN SPREAD" of a cmon-overhead-ns entry: MEAN > 0, SPREAD >= 0, finite. */
static bool parse_overhead(const char *s, double *mean, double *spread)
{
    char *end;
    double m = log_strtod(s, &end);
    if (end == s || (*end != ' ' && *end != '\t'))
        return false;
    const char *t = end;
    while (*t == ' ' || *t == '\t')
        t++;
    double sp = log_strtod(t, &end);
    while (*end == ' ' || *end == '\t')
        end++;
    if (end == t || *end || !(m > 0) || !isfinite(m) || !(sp >= 0) || !isfinite(sp))
        return false;
    *mean = m;
    *spread = sp;
    return true;
}

static int ascii_header(log_writer *w, const log_header_field *fields, size_t nfields)
{
    ps_buf b = { 0 };
    ps_buf_puts(&b, "#cmon-ascii 1\n");
    for (size_t i = 0; i < nfields; i++) {
        char *k = clean(fields[i].key, true), *v = clean(fields[i].value, false);
        double t;
        double m, sp;
        if ((strcmp(k, "tick-ns") == 0 && !parse_tick(v, &t)) ||
            (strcmp(k, "cmon-overhead-ns") == 0 && !parse_overhead(v, &m, &sp))) {
            free(k);
            free(v);
            ps_buf_free(&b);
            return -EINVAL;
        }
        if (*k)
            ps_buf_printf(&b, "#%s%s %s\n", strcmp(k, "cmon-gap") == 0 ? "x-" : "", k, v);
        free(k);
        free(v);
    }
    int rc = reserve(w, b.len);
    if (rc == 0) {
        memcpy(w->buf + w->len, b.data, b.len);
        w->len += b.len;
    }
    ps_buf_free(&b);
    return rc;
}

static int bin_header(log_writer *w, const log_header_field *fields, size_t nfields)
{
    Cmonlog__Header h = CMONLOG__HEADER__INIT;
    Cmonlog__HeaderField *xf = ps_calloc(nfields ? nfields : 1, sizeof *xf);
    Cmonlog__HeaderField **xp = ps_calloc(nfields ? nfields : 1, sizeof *xp);
    h.magic = (char *)"cmon-bin";
    h.has_version = true;
    h.version = 1;
    int rc = 0;
    for (size_t i = 0; i < nfields && rc == 0; i++) {
        const char *k = fields[i].key ? fields[i].key : "";
        const char *v = fields[i].value ? fields[i].value : "";
        if (strcmp(k, "tick-ns") == 0 && !parse_tick(v, &(double){ 0 }))
            rc = -EINVAL;
        else if (strcmp(k, "cmon-overhead-ns") == 0 && !h.has_overhead_ns) {
            if (!parse_overhead(v, &h.overhead_ns, &h.overhead_spread_ns))
                rc = -EINVAL;
            h.has_overhead_ns = h.has_overhead_spread_ns = rc == 0;
        }
        else if (strcmp(k, "program") == 0 && !h.program)
            h.program = (char *)v;
        else if (strcmp(k, "machine") == 0 && !h.machine)
            h.machine = (char *)v;
        else if (strcmp(k, "clock") == 0 && !h.clock)
            h.clock = (char *)v;
        else if (strcmp(k, "pid") == 0 && !h.has_pid && parse_i64(v, &h.pid))
            h.has_pid = true;
        else if (strcmp(k, "start-unix-ns") == 0 && !h.has_start_unix_ns &&
                 parse_i64(v, &h.start_unix_ns))
            h.has_start_unix_ns = true;
        else if (strcmp(k, "tick-ns") == 0 && !h.has_tick_ns && parse_tick(v, &h.tick_ns))
            h.has_tick_ns = true;
        else if (*k) {
            Cmonlog__HeaderField *f = &xf[h.n_extra];
            cmonlog__header_field__init(f);
            f->key = (char *)k;
            f->value = (char *)v;
            xp[h.n_extra++] = f;
        }
    }
    h.extra = xp;
    Cmonlog__Record rec = CMONLOG__RECORD__INIT;
    rec.kind_case = CMONLOG__RECORD__KIND_HEADER;
    rec.header = &h;
    if (rc == 0)
        rc = put_record(w, &rec);
    free(xf);
    free(xp);
    return rc;
}

int log_writer_open(log_writer **out, int fd, bool own_fd, log_format format,
                    const log_header_field *fields, size_t nfields)
{
    if (format != LOG_FORMAT_ASCII && format != LOG_FORMAT_BIN)
        return -EINVAL;
    log_writer *w = ps_calloc(1, sizeof *w);
    w->fd = fd;
    w->own_fd = own_fd;
    w->format = format;
    struct stat st;
    w->to_file = format == LOG_FORMAT_BIN && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    w->cap = OUT_CAP;
    w->buf = ps_malloc(w->cap);
    int rc = format == LOG_FORMAT_ASCII ? ascii_header(w, fields, nfields)
                                        : bin_header(w, fields, nfields);
    if (rc < 0) {
        w->own_fd = false;   /* the caller keeps its fd when opening fails */
        w->len = 0;          /* and nothing is written to it */
        log_writer_close(w);
        return rc;
    }
    *out = w;
    return 0;
}

/* --- types -------------------------------------------------------------- */

static int find_type(const log_writer *w, const char *name, size_t n, uint32_t h)
{
    if (!w->slots)
        return -1;
    for (uint32_t i = h & w->slot_mask;; i = (i + 1) & w->slot_mask) {
        int32_t t = w->slots[i];
        if (t < 0)
            return -1;
        if (w->types[t].hash == h && strncmp(w->types[t].name, name, n) == 0 &&
            w->types[t].name[n] == '\0')
            return t;
    }
}

static void slots_insert(int32_t *slots, uint32_t mask, uint32_t h, int32_t t)
{
    uint32_t i = h & mask;
    while (slots[i] >= 0)
        i = (i + 1) & mask;
    slots[i] = t;
}

void log_writer_set_compat(log_writer *w, bool on)
{
    w->compat = on;
}

int log_writer_declare(log_writer *w, const char *name, const char *const *attrs, size_t nattrs)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > LOG_MAX_NAME || !log_name_valid(name, n))
        return -EINVAL;
    uint32_t h = logr_hash(name, n);
    int t = find_type(w, name, n, h);
    if (t >= 0)
        return t;
    if (w->ntypes >= LOG_MAX_NAMES)
        return -ENOSPC;
    if (w->ntypes == w->types_cap) {
        w->types_cap = w->types_cap ? 2 * w->types_cap : 16;
        w->types = ps_realloc(w->types, w->types_cap * sizeof *w->types);
    }
    wtype *ty = &w->types[w->ntypes];
    ty->name = ps_strdup(name);
    ty->hash = h;
    ty->emitted = false;
    ty->nattrs = attrs ? nattrs : 0;
    ty->attrs = ps_calloc(ty->nattrs ? ty->nattrs : 1, sizeof *ty->attrs);
    for (size_t i = 0; i < ty->nattrs; i++)
        ty->attrs[i] = ps_strdup(attrs[i] ? attrs[i] : "");
    t = (int)w->ntypes++;
    if (!w->slots || 2 * w->ntypes > w->slot_mask + 1) {
        uint32_t size = w->slots ? 2 * (w->slot_mask + 1) : 64;
        free(w->slots);
        w->slots = ps_malloc(size * sizeof *w->slots);
        memset(w->slots, 0xff, size * sizeof *w->slots);
        w->slot_mask = size - 1;
        for (size_t i = 0; i < w->ntypes; i++)
            slots_insert(w->slots, w->slot_mask, w->types[i].hash, (int32_t)i);
    } else {
        slots_insert(w->slots, w->slot_mask, h, t);
    }
    return t;
}

/* --- records ------------------------------------------------------------ */

static unsigned char *put_varint(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

static unsigned varint_size(uint64_t v)
{
    unsigned n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* True when every value is an integer of magnitude below 2^53 (and no -0):
 * Event.ivalues then carries them exactly. */
static bool all_integral(const double *values, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v = values[i];
        if (!(fabs(v) < 9007199254740992.0) || v != (double)(int64_t)v ||
            (v == 0 && signbit(v)))
            return false;
    }
    return true;
}

/* Append one Event frame, encoded by hand (proto/cmonlog.proto): type
 * (in a file, unless 0: an absent type is 0), thread unless 0, ts (or
 * ts_delta in a file, after the first event), then the values as ivalues
 * when all are integral (unpacked when there is one: a byte shorter), else
 * as packed doubles. */
static int put_event(log_writer *w, uint32_t type, int64_t ts, int64_t thread,
                     const double *values, size_t nvalues)
{
    bool ints = all_integral(values, nvalues);
    bool delta = w->to_file && w->nevents > 0;  /* the first event: absolute, so that
                                                   a log appended to another reads right */
    bool typed = type != 0 || !w->to_file;      /* streams keep snarflog's quick layout */
    size_t vbytes = 0;
    if (ints)
        for (size_t i = 0; i < nvalues; i++)
            vbytes += varint_size(zigzag((int64_t)values[i]));
    else
        vbytes = 8 * nvalues;
    size_t ev = (typed ? 1 + varint_size(type) : 0) +
                (thread ? 1 + varint_size((uint64_t)thread) : 0) +
                1 + (delta ? varint_size(zigzag(ts - w->prev_ts)) : varint_size((uint64_t)ts));
    if (nvalues == 1 && ints)
        ev += 1 + vbytes;
    else if (nvalues)
        ev += 1 + varint_size(vbytes) + vbytes;
    size_t rec = 1 + varint_size(ev) + ev;
    if (rec > LOG_MAX_FRAME)
        return -E2BIG;   /* readers would refuse it */
    int rc = reserve(w, rec + 10);
    if (rc < 0)
        return rc;
    unsigned char *p = (unsigned char *)w->buf + w->len;
    p = put_varint(p, rec);
    *p++ = 0x1a;                        /* Record.event */
    p = put_varint(p, ev);
    if (typed) {
        *p++ = 0x08;                    /* Event.type */
        p = put_varint(p, type);
    }
    if (thread) {
        *p++ = 0x10;                    /* Event.thread */
        p = put_varint(p, (uint64_t)thread);
    }
    if (delta) {
        *p++ = 0x20;                    /* Event.ts_delta */
        p = put_varint(p, zigzag(ts - w->prev_ts));
    } else {
        *p++ = 0x18;                    /* Event.ts */
        p = put_varint(p, (uint64_t)ts);
    }
    if (nvalues == 1 && ints) {
        *p++ = 0x30;                    /* Event.ivalues, unpacked */
        p = put_varint(p, zigzag((int64_t)values[0]));
    } else if (nvalues && ints) {
        *p++ = 0x32;                    /* Event.ivalues, packed */
        p = put_varint(p, vbytes);
        for (size_t i = 0; i < nvalues; i++)
            p = put_varint(p, zigzag((int64_t)values[i]));
    } else if (nvalues) {
        *p++ = 0x2a;                    /* Event.values, packed doubles */
        p = put_varint(p, vbytes);
        for (size_t i = 0; i < nvalues; i++, p += 8) {
            uint64_t u;
            memcpy(&u, &values[i], 8);
            for (int b = 0; b < 8; b++)
                p[b] = (unsigned char)(u >> (8 * b));
        }
    }
    w->len = (size_t)(p - (unsigned char *)w->buf);
    w->prev_ts = ts;
    return 0;
}

static int bin_event(log_writer *w, int type, int64_t ts, int64_t thread,
                     const double *values, size_t nvalues)
{
    wtype *ty = &w->types[type];
    Cmonlog__Record rec = CMONLOG__RECORD__INIT;
    int rc;
    if (!ty->emitted) {
        Cmonlog__TypeDef td = CMONLOG__TYPE_DEF__INIT;
        td.has_id = true;
        td.id = (uint32_t)type;
        td.name = ty->name;
        td.n_attrs = ty->nattrs;
        td.attrs = ty->attrs;
        rec.kind_case = CMONLOG__RECORD__KIND_TYPEDEF;
        rec.typedef_ = &td;
        if ((rc = put_record(w, &rec)) < 0)
            return rc;
        ty->emitted = true;
    }
    if (!w->compat)
        return put_event(w, (uint32_t)type, ts, thread, values, nvalues);
    Cmonlog__Event ev = CMONLOG__EVENT__INIT;
    ev.has_type = true;
    ev.type = (uint32_t)type;
    ev.has_thread = thread != 0;
    ev.thread = thread;
    ev.has_ts = true;
    ev.ts = (uint64_t)ts;
    ev.n_values = nvalues;
    ev.values = (double *)values;
    rec.kind_case = CMONLOG__RECORD__KIND_EVENT;
    rec.event = &ev;
    if ((rc = put_record(w, &rec)) == 0)
        w->prev_ts = ts;   /* deltas count from here if compat is turned off */
    return rc;
}

static int ascii_event(log_writer *w, int type, int64_t ts, int64_t thread,
                       const double *values, size_t nvalues)
{
    const wtype *ty = &w->types[type];
    size_t nlen = strlen(ty->name);
    if (nvalues > LOG_MAX_LINE / 2)
        return -E2BIG;
    int rc = reserve(w, 48 + nlen + 41 * nvalues);
    if (rc < 0)
        return rc;
    char *p = w->buf + w->len;
    p = put_i64(p, ts);
    *p++ = ' ';
    p = put_i64(p, thread);
    *p++ = ' ';
    memcpy(p, ty->name, nlen);
    p += nlen;
    for (size_t i = 0; i < nvalues; i++) {
        *p++ = ' ';
        p = put_double(p, values[i]);
    }
    if ((size_t)(p - (w->buf + w->len)) > LOG_MAX_LINE)
        return -E2BIG;   /* readers would skip it; the buffer is left as it was */
    *p++ = '\n';
    w->len = (size_t)(p - w->buf);
    return 0;
}

int log_writer_event_id(log_writer *w, int type, int64_t ts, int64_t thread,
                        const double *values, size_t nvalues)
{
    if (w->err)
        return w->err;
    if (w->ended || type < 0 || (size_t)type >= w->ntypes || ts < 0 || (nvalues && !values))
        return -EINVAL;
    for (size_t i = 0; i < nvalues; i++)
        if (!isfinite(values[i]))
            return -EINVAL;
    int rc = w->format == LOG_FORMAT_BIN ? bin_event(w, type, ts, thread, values, nvalues)
                                         : ascii_event(w, type, ts, thread, values, nvalues);
    if (rc == 0)
        w->nevents++;
    return rc;
}

int log_writer_event(log_writer *w, const char *name, int64_t ts, int64_t thread,
                     const double *values, size_t nvalues)
{
    size_t n = name ? strlen(name) : 0;
    int t = find_type(w, name ? name : "", n, logr_hash(name ? name : "", n));
    if (t < 0)
        t = log_writer_declare(w, name, NULL, 0);
    if (t < 0)
        return t;
    return log_writer_event_id(w, t, ts, thread, values, nvalues);
}

int log_writer_gap(log_writer *w, uint64_t count)
{
    if (w->err)
        return w->err;
    if (w->ended)
        return -EINVAL;
    if (w->format == LOG_FORMAT_BIN) {
        Cmonlog__Gap g = CMONLOG__GAP__INIT;
        g.has_count = true;
        g.count = count;
        Cmonlog__Record rec = CMONLOG__RECORD__INIT;
        rec.kind_case = CMONLOG__RECORD__KIND_GAP;
        rec.gap = &g;
        return put_record(w, &rec);
    }
    int rc = reserve(w, 40);
    if (rc < 0)
        return rc;
    char *p = w->buf + w->len;
    memcpy(p, "#cmon-gap ", 10);
    p = put_u64(p + 10, count);
    *p++ = '\n';
    w->len = (size_t)(p - w->buf);
    return 0;
}

int log_writer_overhead(log_writer *w, int64_t thread, double mean, double spread)
{
    if (w->err)
        return w->err;
    if (w->ended || !(mean > 0) || !isfinite(mean) || !(spread >= 0) || !isfinite(spread))
        return -EINVAL;
    if (w->format == LOG_FORMAT_BIN) {
        Cmonlog__Overhead o = CMONLOG__OVERHEAD__INIT;
        o.has_thread = o.has_overhead_ns = o.has_overhead_spread_ns = true;
        o.thread = thread;
        o.overhead_ns = mean;
        o.overhead_spread_ns = spread;
        Cmonlog__Record rec = CMONLOG__RECORD__INIT;
        rec.kind_case = CMONLOG__RECORD__KIND_OVERHEAD;
        rec.overhead = &o;
        return put_record(w, &rec);
    }
    int rc = reserve(w, 160);
    if (rc < 0)
        return rc;
    char *p = w->buf + w->len;
    memcpy(p, "#cmon-overhead-ns ", 18);
    p = put_double(p + 18, mean);
    *p++ = ' ';
    p = put_double(p, spread);
    *p++ = ' ';
    p = put_i64(p, thread);
    *p++ = '\n';
    w->len = (size_t)(p - w->buf);
    return 0;
}

int log_writer_end(log_writer *w)
{
    if (w->err)
        return w->err;
    if (!w->ended && w->format == LOG_FORMAT_BIN) {
        Cmonlog__End e = CMONLOG__END__INIT;
        e.has_records = true;
        e.records = w->nevents;
        Cmonlog__Record rec = CMONLOG__RECORD__INIT;
        rec.kind_case = CMONLOG__RECORD__KIND_END;
        rec.end = &e;
        int rc = put_record(w, &rec);
        if (rc < 0)
            return rc;
    }
    w->ended = true;
    return log_writer_flush(w);
}

int log_writer_close(log_writer *w)
{
    if (!w)
        return 0;
    int rc = log_writer_flush(w);
    if (w->own_fd && close(w->fd) < 0 && rc == 0)
        rc = -errno;
    for (size_t i = 0; i < w->ntypes; i++) {
        free(w->types[i].name);
        for (size_t j = 0; j < w->types[i].nattrs; j++)
            free(w->types[i].attrs[j]);
        free(w->types[i].attrs);
    }
    free(w->types);
    free(w->slots);
    free(w->buf);
    free(w);
    return rc;
}
