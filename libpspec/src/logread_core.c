/* logread_core.c — the log reader's core: opening and format detection,
 * the input buffer, positions and warnings, name interning, and the public
 * entry points of logread.h.
 *
 * Each format is a table of functions (struct logr_ops in
 * logread-internal.h: logread_ascii.c, logread_bin.c) the core tries in
 * turn on the first bytes and then dispatches through. Formats pull bytes
 * through logr_fill(), which issues one read(2) at a time so that a record
 * is handed out as soon as its last byte has arrived, and build records
 * with the helpers of the header (logr_event, logr_gap, logr_overhead), so
 * that positions and counts mean the same in every format.
 */
#include "logread-internal.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* The formats, in the order they are tried on the first bytes. */
static const logr_ops *const formats[] = { &logr_ascii_ops, &logr_bin_ops };

/* --- errors and warnings ------------------------------------------------ */

void logr_error(char **errmsg, const char *fmt, ...)
{
    if (!errmsg)
        return;
    va_list ap;
    va_start(ap, fmt);
    free(*errmsg);
    *errmsg = ps_vasprintf(fmt, ap);
    va_end(ap);
}

void logr_warn(log_reader *r, uint64_t where, const char *fmt, ...)
{
    r->nmalformed++;
    /* A later pass over the log meets the same bad records again: report
     * each one once, on the pass that first reached it. */
    if (r->warn_once && r->rewound && where <= r->quiet_upto)
        return;
    if (where > r->warned_upto)
        r->warned_upto = where;
    if (!r->warn)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (r->pf && logr_prefetch_producing(r))
        logr_prefetch_warn(r, where, msg);
    else
        r->warn(r->warn_ctx, r->logname, where, msg);
}

const char *logr_quote(char out[200], const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, lim = n > 40 ? 40 : n;
    for (size_t i = 0; i < lim; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
            out[o++] = (char)c;
        } else {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    if (lim < n) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
    return out;
}

/* --- locale-independent numbers ----------------------------------------- */

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void c_locale_init(void)
{
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

locale_t log_c_locale(void)
{
    pthread_once(&c_locale_once, c_locale_init);
    return c_locale;
}

double log_strtod(const char *s, char **end)
{
    locale_t loc = log_c_locale();
    return loc ? strtod_l(s, end, loc) : strtod(s, end);
}

void log_fmt_double(char out[40], double v)
{
    locale_t loc = log_c_locale();
    locale_t old = loc ? uselocale(loc) : (locale_t)0;
    /* The shortest of %.15g .. %.17g that reads back as the same double. */
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, 40, "%.*g", prec, v);
        if (prec == 17 || strtod(out, NULL) == v)
            break;
    }
    if (old)
        uselocale(old);
}

/* --- the input buffer --------------------------------------------------- */

_Thread_local size_t logr_test_read_max;

/* Wait until fd is readable (for descriptors opened O_NONBLOCK). */
static int wait_readable(int fd)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    for (;;) {
        int n = poll(&pfd, 1, -1);
        if (n >= 0)
            return 0;
        if (errno != EINTR)
            return -errno;
    }
}

static void buf_resize(log_reader *r, size_t cap)
{
    r->buf = ps_realloc(r->buf, cap + LOG_BUF_PAD);
    if (cap > r->cap)
        memset(r->buf + r->cap, 0, cap - r->cap + LOG_BUF_PAD);
    r->cap = cap;
}

/* Move the unread bytes to the front of the buffer (positions after start
 * stay as they are; where whole lines end is found again). */
static void buf_compact(log_reader *r)
{
    size_t avail = r->end - r->start;
    memmove(r->buf, r->buf + r->start, avail);
    r->base += r->start;
    r->start = 0;
    r->end = avail;
    r->complete = 0;
}

int logr_fill(log_reader *r, size_t want, char **errmsg)
{
    if (r->eof)
        return 0;
    if (r->fed)
        return -EAGAIN;     /* the caller feeds more, and asks again */
    size_t avail = r->end - r->start;
    /* Move the unread tail to the front when the free space runs short. */
    r->complete = 0;
    size_t low = (r->cap < LOG_READ_CHUNK ? r->cap : LOG_READ_CHUNK) / 4;
    if (r->start > 0 && (r->cap - r->end < low || r->cap - r->start < want)) {
        buf_compact(r);
        /* Give back memory a huge frame or line made us take. */
        if (r->cap > 4 * LOG_READ_CHUNK && avail < LOG_READ_CHUNK && want <= LOG_READ_CHUNK)
            buf_resize(r, LOG_READ_CHUNK);
    }
    if (r->full_reads >= 2 && r->cap < LOG_READ_CHUNK) {
        buf_resize(r, r->cap * 2);      /* a fast producer: ask for more at a time */
        r->full_reads = 0;
    }
    if (want > r->cap - r->start || r->end == r->cap) {
        size_t need = r->start + (want > avail + 1 ? want : avail + 1);
        size_t cap = r->cap * 2;
        buf_resize(r, cap > need ? cap : need);
    }
    size_t room = r->cap - r->end;
    if (logr_test_read_max && room > logr_test_read_max)
        room = logr_test_read_max;
    for (;;) {
        ssize_t n = read(r->fd, r->buf + r->end, room);
        if (n > 0) {
            r->full_reads = (size_t)n == room ? r->full_reads + 1 : 0;
            r->end += (size_t)n;
            return 1;
        }
        if (n == 0) {
            r->eof = true;
            return 0;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (r->idle)
                r->idle(r->idle_ctx, r->pos);
            int rc = wait_readable(r->fd);
            if (rc == 0)
                continue;
            errno = -rc;
        }
        int err = errno;
        logr_error(errmsg, "read error at byte %llu: %s",
                   (unsigned long long)(r->base + r->end), strerror(err));
        return -err;
    }
}

void logr_vals_reserve(log_reader *r, size_t n)
{
    if (n <= r->vals_cap)
        return;
    size_t cap = r->vals_cap ? r->vals_cap * 2 : 16;
    while (cap < n)
        cap *= 2;
    r->vals = ps_realloc(r->vals, cap * sizeof *r->vals);
    r->vals_cap = cap;
}

/* --- header ------------------------------------------------------------- */

int logr_header_add(log_reader *r, const char *key, size_t klen, const char *val, size_t vlen)
{
    if (r->hdr.nfields >= LOG_MAX_HEADER_FIELDS)
        return -E2BIG;
    if (r->hdr.nfields == r->hdr_cap) {
        r->hdr_cap = r->hdr_cap ? r->hdr_cap * 2 : 8;
        r->hdr.fields = ps_realloc(r->hdr.fields, r->hdr_cap * sizeof *r->hdr.fields);
    }
    log_header_field *f = &r->hdr.fields[r->hdr.nfields++];
    f->key = ps_strndup(key, klen);
    f->value = ps_strndup(val, vlen);
    return 0;
}

/* --- event names -------------------------------------------------------- */

/* Character classes for names: bit 1 may start a name, bit 2 may follow. */
static const unsigned char name_class[256] = {
    ['_'] = 3,
#define R(c) [c] = 3
    R('A'), R('B'), R('C'), R('D'), R('E'), R('F'), R('G'), R('H'), R('I'), R('J'), R('K'),
    R('L'), R('M'), R('N'), R('O'), R('P'), R('Q'), R('R'), R('S'), R('T'), R('U'), R('V'),
    R('W'), R('X'), R('Y'), R('Z'),
    R('a'), R('b'), R('c'), R('d'), R('e'), R('f'), R('g'), R('h'), R('i'), R('j'), R('k'),
    R('l'), R('m'), R('n'), R('o'), R('p'), R('q'), R('r'), R('s'), R('t'), R('u'), R('v'),
    R('w'), R('x'), R('y'), R('z'),
#undef R
    ['0'] = 2, ['1'] = 2, ['2'] = 2, ['3'] = 2, ['4'] = 2,
    ['5'] = 2, ['6'] = 2, ['7'] = 2, ['8'] = 2, ['9'] = 2,
};

static bool ident_valid(const char *s, size_t n)
{
    if (n == 0 || !(name_class[(unsigned char)s[0]] & 1))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(name_class[(unsigned char)s[i]] & 2))
            return false;
    return true;
}

bool log_name_valid(const char *s, size_t n)
{
    const char *at = memchr(s, '@', n);
    if (!at)
        return ident_valid(s, n);
    size_t pre = (size_t)(at - s);
    if (!((pre == 4 && memcmp(s, "call", 4) == 0) || (pre == 3 && memcmp(s, "ret", 3) == 0)))
        return false;
    return ident_valid(at + 1, n - pre - 1);
}

uint32_t logr_hash(const char *s, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (; n >= 8; s += 8, n -= 8) {
        uint64_t w = 0;
        for (int i = 0; i < 8; i++)
            w |= (uint64_t)(unsigned char)s[i] << (8 * i);
        h = logr_hash_step(h, w);
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)(unsigned char)s[i] << (8 * i);
    return logr_hash_end(h, w);
}

static void names_rehash(log_reader *r, uint32_t size)
{
    free(r->slots);
    r->slots = ps_malloc(size * sizeof *r->slots);
    memset(r->slots, 0xff, size * sizeof *r->slots);
    r->slot_mask = size - 1;
    for (uint32_t id = 0; id < r->nnames; id++) {
        uint32_t h = logr_hash(r->names[id], r->name_len[id]);
        uint32_t i = h & r->slot_mask;
        while (r->slots[i].id != UINT32_MAX)
            i = (i + 1) & r->slot_mask;
        r->slots[i].hash = h;
        r->slots[i].id = id;
    }
}

uint32_t logr_intern(log_reader *r, const char *s, size_t n, uint32_t hash)
{
    if (r->slots) {
        for (uint32_t i = hash & r->slot_mask;; i = (i + 1) & r->slot_mask) {
            log_name_slot sl = r->slots[i];
            if (sl.id == UINT32_MAX)
                break;
            if (sl.hash == hash && r->name_len[sl.id] == n && memcmp(r->names[sl.id], s, n) == 0)
                return sl.id;
        }
    }
    if (r->nnames >= LOG_MAX_NAMES)
        return UINT32_MAX;
    if (r->nnames == r->names_cap) {
        r->names_cap = r->names_cap ? r->names_cap * 2 : 16;
        r->names = ps_realloc(r->names, r->names_cap * sizeof *r->names);
        r->name_len = ps_realloc(r->name_len, r->names_cap * sizeof *r->name_len);
    }
    uint32_t id = r->nnames++;
    r->names[id] = ps_calloc(n + 17, 1);   /* padded: see logr_name_eq() */
    memcpy(r->names[id], s, n);
    r->name_len[id] = (uint32_t)n;
    if (!r->slots || 2 * r->nnames > r->slot_mask + 1) {
        names_rehash(r, r->slots ? 2 * (r->slot_mask + 1) : 64);
    } else {
        uint32_t i = hash & r->slot_mask;
        while (r->slots[i].id != UINT32_MAX)
            i = (i + 1) & r->slot_mask;
        r->slots[i].hash = hash;
        r->slots[i].id = id;
    }
    return id;
}

/* --- opening ------------------------------------------------------------ */

static log_reader *reader_new(const char *logname, log_warn_fn warn, void *warn_ctx)
{
    log_reader *r = ps_calloc(1, sizeof *r);
    r->fd = -1;
    r->fd_origin = -1;
    r->logname = ps_strdup(!logname ? "<log>" : strcmp(logname, "-") == 0 ? "<stdin>" : logname);
    r->warn = warn;
    r->warn_ctx = warn_ctx;
    r->hdr.tick_ns = 1;
    r->fastpath = true;
    return r;
}

/* Detect the format from the first bytes and read the header. */
static int reader_start(log_reader *r, char **errmsg)
{
    while (r->end == r->start) {
        int rc = logr_fill(r, 1, errmsg);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            logr_error(errmsg, "unrecognized log format (empty input)");
            return -EINVAL;
        }
    }
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        r->ops = formats[i];
        r->hdr.format = r->ops->format;
        int rc = r->ops->open(r, errmsg);
        if (rc != 1)
            return rc;
        if (r->ops->free)
            r->ops->free(r);
    }
    r->ops = NULL;
    logr_error(errmsg, "unrecognized log format");
    return -EINVAL;
}

log_reader *log_reader_open(int fd, bool own_fd, const char *logname,
                            log_warn_fn warn, void *warn_ctx, char **errmsg)
{
    log_reader *r = reader_new(logname, warn, warn_ctx);
    r->fd = fd;
    r->own_fd = own_fd;
    struct stat st;
    bool file = fstat(fd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode));
    if (file)
        r->fd_origin = lseek(fd, 0, SEEK_CUR);
    /* A file is read in large chunks at once; a pipe or socket (pcheck
     * -cont under a telemonitor, one per stream) starts small and grows
     * only while its writer keeps the reads full. */
    buf_resize(r, file ? LOG_READ_CHUNK : LOG_READ_FIRST);
    if (reader_start(r, errmsg) < 0) {
        log_reader_free(r);
        return NULL;
    }
    return r;
}

log_reader *log_reader_open_mem(const void *data, size_t len, const char *logname,
                                log_warn_fn warn, void *warn_ctx, char **errmsg)
{
    log_reader *r = reader_new(logname, warn, warn_ctx);
    r->mem = true;
    r->eof = true;
    buf_resize(r, len);
    if (len)
        memcpy(r->buf, data, len);
    r->end = len;
    if (reader_start(r, errmsg) < 0) {
        log_reader_free(r);
        return NULL;
    }
    return r;
}

int log_reader_open_fed(log_reader **out, const void *data, size_t len, bool eof, const char *logname,
                        log_warn_fn warn, void *warn_ctx, char **errmsg)
{
    log_reader *r = reader_new(logname, warn, warn_ctx);
    r->fed = true;
    r->eof = eof;
    buf_resize(r, len > LOG_READ_FIRST ? len : LOG_READ_FIRST);
    if (len)
        memcpy(r->buf, data, len);
    r->end = len;
    *out = NULL;
    char *msg = NULL;
    int rc = reader_start(r, &msg);
    if (rc < 0) {
        log_reader_free(r);
        if (rc == -EAGAIN) {
            free(msg);
            return rc;
        }
        *errmsg = msg;
        return rc;
    }
    *out = r;
    return 0;
}

void log_reader_feed(log_reader *r, const void *data, size_t len)
{
    if (len == 0)
        return;
    /* ascii: a fast path may take the line peek_line waited for without
     * clearing what that scan found, which is then stale */
    r->scan = 0;
    if (r->start > 0 && (r->start == r->end || r->cap - r->end < len))
        buf_compact(r);
    if (r->cap - r->end < len) {
        size_t cap = r->cap * 2;
        buf_resize(r, cap > r->end + len ? cap : r->end + len);
    }
    memcpy(r->buf + r->end, data, len);
    r->end += len;
}

void log_reader_feed_idle(log_reader *r)
{
    if (r->start != r->end || !r->buf)
        return;
    buf_compact(r);
    r->scan = 0;
    free(r->buf);
    r->buf = NULL;
    r->cap = 0;
}

void log_reader_feed_end(log_reader *r)
{
    if (!r->buf)
        buf_resize(r, LOG_BUF_PAD);     /* (the formats look at the buffer even when it is empty) */
    r->eof = true;
}

/* --- the rest of the public API ----------------------------------------- */

const log_header *log_reader_header(const log_reader *r)
{
    return &r->hdr;
}

int logr_next_direct(log_reader *r, log_record *rec, char **errmsg)
{
    return r->ops->next(r, rec, errmsg);
}

_Static_assert(offsetof(log_reader, win) == 0, "log_reader_next_ref() finds the window first");
_Static_assert(sizeof(void *) != 8 || sizeof(log_record) == 64, "a record is one cache line (logread.h)");

int log_reader_next_ref_more(log_reader *r, const log_record **rec, char **errmsg)
{
    if (r->pf)
        return logr_prefetch_next(r, rec, errmsg);
    return logr_next_direct_ref(r, rec, errmsg);
}

int log_reader_next(log_reader *r, log_record *rec, char **errmsg)
{
    const log_record *p;
    int rc = log_reader_next_ref(r, &p, errmsg);
    if (rc == 1)
        *rec = *p;
    return rc;
}

void log_reader_want_overhead(log_reader *r, bool on)
{
    r->want_overhead = on;
}

const char *log_reader_name(const log_reader *r, uint32_t name_id)
{
    if (r->pf)
        return logr_prefetch_name(r, name_id);
    return name_id < r->nnames ? r->names[name_id] : NULL;
}

uint32_t log_reader_nnames(const log_reader *r)
{
    if (r->pf)
        return logr_prefetch_nnames(r);
    return r->nnames;
}

int log_reader_rewind(log_reader *r)
{
    if (r->pf)
        logr_prefetch_rewind(r);
    if (r->mem) {
        r->start = (size_t)r->data_off;
    } else {
        if (r->fd_origin < 0)
            return -ESPIPE;
        if (lseek(r->fd, r->fd_origin + (off_t)r->data_off, SEEK_SET) < 0)
            return -errno;
        r->start = r->end = 0;
        r->base = r->data_off;
        r->eof = false;
    }
    r->scan = 0;
    r->complete = 0;
    r->ended = false;
    r->lineno = r->data_line;
    r->pos = 0;
    r->nrecords = 0;
    r->nmalformed = 0;
    r->rewound = true;
    r->quiet_upto = r->warned_upto;
    r->prev_ts = 0;
    if (r->ops->rewind)
        r->ops->rewind(r);
    return 0;
}

void log_reader_warn_once(log_reader *r, bool on)
{
    r->warn_once = on;
}

void log_reader_on_idle(log_reader *r, void (*idle)(void *ctx, uint64_t records), void *ctx)
{
    r->idle = idle;
    r->idle_ctx = ctx;
}

void logr_set_fastpath(log_reader *r, bool on)
{
    r->fastpath = on;
}

uint64_t log_reader_pos(const log_reader *r)
{
    return r->pos;
}

uint64_t log_reader_nrecords(const log_reader *r)
{
    return r->nrecords;
}

uint64_t log_reader_nmalformed(const log_reader *r)
{
    return r->nmalformed;
}

void log_reader_free(log_reader *r)
{
    if (!r)
        return;
    logr_prefetch_free(r);
    if (r->own_fd && r->fd >= 0)
        close(r->fd);
    for (size_t i = 0; i < r->hdr.nfields; i++) {
        free(r->hdr.fields[i].key);
        free(r->hdr.fields[i].value);
    }
    free(r->hdr.fields);
    for (uint32_t i = 0; i < r->nnames; i++)
        free(r->names[i]);
    free(r->names);
    free(r->name_len);
    free(r->slots);
    free(r->vals);
    free(r->buf);
    free(r->logname);
    if (r->ops && r->ops->free)
        r->ops->free(r);
    free(r);
}
