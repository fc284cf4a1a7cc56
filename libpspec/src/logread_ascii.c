/* logread_ascii.c — the cmon-ascii 1 reader (DESIGN.md §4.1).
 *
 * A line is complete when its '\n' has arrived (or at end of input). Lines
 * are parsed in place in the reader's buffer: the byte at the end of every
 * line handed to the parser is '\n' (the real one, or a sentinel written into
 * the buffer's slack at end of input), so the scanning loops below stop at
 * the end of the line without bounds checks.
 *
 * Speed matters here (the checker on top must beat awk by a wide margin), so
 * there are fast paths in front of the general parser. They take well-formed
 * record lines straight from the part of the buffer known to hold whole
 * lines (found with one memrchr per read, not one memchr per line):
 * fast_line() (SSE2) a line of at most 31 bytes, whose tokens and digits it
 * finds with a few 16-byte compares; fast_record() any other line, eight
 * bytes at a time where it can; on both, short event names go through a
 * small cache. Any line they do not fully understand goes to the general
 * parser (peek_line() + parse_record()), which handles headers, comments,
 * gaps, long lines and produces every warning. Numbers are parsed by hand;
 * reals with at most 15 digits by the exact "mantissa / power of ten"
 * shortcut, strtod only for the rest.
 */
#include "logread-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "cmon/digits.h"

#define LINE_TOO_LONG 2

static inline bool is_digit(char c)
{
    return (unsigned char)(c - '0') < 10;
}

static inline bool is_sep(char c)
{
    return c == ' ' || c == '\t';
}

/* True when p ends a token: the end of the line or a separator. */
static inline bool at_sep(const char *p, const char *lend)
{
    return p == lend || is_sep(*p);
}

static const char *token_end(const char *p, const char *lend)
{
    while (p < lend && !is_sep(*p))
        p++;
    return p;
}

/* Read the run of decimal digits at *pp, advancing *pp: returns how many
 * there were and folds them into *acc (acc * 10^n + value; it wraps beyond
 * 19 digits, which callers check). A plain loop, for the general parser and
 * reals; the fast paths convert whole words instead (cmon_word_digits()). */
static inline __attribute__((always_inline)) size_t scan_digits(const char **pp, uint64_t *acc)
{
    const char *p = *pp, *s = p;
    uint64_t x = *acc;
    while (is_digit(*p))
        x = x * 10 + (uint64_t)(*p++ - '0');
    *pp = p;
    *acc = x;
    return (size_t)(p - s);
}

/* Length of the token at p: the bytes before the first one below '!' (a
 * blank, a control byte, the end of the line). */
static inline size_t token_len(const char *p)
{
    size_t n = 0;
    while ((unsigned char)p[n] > ' ')
        n++;
    return n;
}

/* Find the next complete line without consuming it: 1 with *le the index of
 * its '\n' (or of the sentinel at end of input), 0 at end of input,
 * LINE_TOO_LONG, or a negative read error. */
static int peek_line(log_reader *r, size_t *le, char **errmsg)
{
    for (;;) {
        size_t avail = r->end - r->start;
        if (r->scan < avail) {
            const char *nl = memchr(r->buf + r->start + r->scan, '\n', avail - r->scan);
            if (nl) {
                *le = (size_t)(nl - r->buf);
                return *le - r->start > LOG_MAX_LINE ? LINE_TOO_LONG : 1;
            }
            r->scan = avail;
        }
        if (r->eof) {
            if (avail == 0)
                return 0;
            r->buf[r->end] = '\n';
            *le = r->end;
            return avail > LOG_MAX_LINE ? LINE_TOO_LONG : 1;
        }
        if (avail > LOG_MAX_LINE)
            return LINE_TOO_LONG;
        int rc = logr_fill(r, avail + 1, errmsg);
        if (rc < 0)
            return rc;
    }
}

static void consume_line(log_reader *r, size_t le)
{
    r->start = le < r->end ? le + 1 : r->end;
    r->scan = 0;
    r->lineno++;
}

/* Discard bytes up to and including the newline of the line being skipped.
 * Returns 0 or a negative read error; -EAGAIN (a fed reader) leaves
 * r->skipping set, to go on once more bytes come. */
static int skip_rest(log_reader *r, char **errmsg)
{
    for (;;) {
        const char *nl = memchr(r->buf + r->start, '\n', r->end - r->start);
        r->scan = 0;
        if (nl) {
            r->start = (size_t)(nl - r->buf) + 1;
            r->skipping = false;
            return 0;
        }
        r->start = r->end;
        int rc = logr_fill(r, 1, errmsg);
        if (rc <= 0) {
            r->skipping = rc == -EAGAIN;
            return rc;
        }
    }
}

/* Skip a line longer than LOG_MAX_LINE: report it, then discard bytes up to
 * and including its newline. Returns 0 or a negative read error. */
static int skip_long_line(log_reader *r, char **errmsg)
{
    uint64_t line = ++r->lineno;
    if (r->buf[r->start] != '#')
        r->pos++;
    logr_warn(r, line, "line longer than %u bytes skipped", LOG_MAX_LINE);
    r->skipping = true;
    return skip_rest(r, errmsg);
}

/* --- numbers ------------------------------------------------------------ */

static const double pow10_tab[] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* Parse a number starting at s: [+-]? (D+ (. D*)? | . D+) ([eE] [+-]? D+)?.
 * *endp is set to the first byte after it (the caller checks that a
 * separator follows). Up to 15 digits without exponent are exact as
 * m / 10^k (both exactly representable, one correctly rounded division);
 * anything else goes to strtod, with the byte after the token temporarily
 * replaced by NUL. Returns 0, -EINVAL, -ERANGE (not finite) or -E2BIG. */
/* The rest of parse_num(): strtod on the token [s, p), with the byte at p
 * temporarily replaced by NUL. */
static __attribute__((noinline)) int parse_num_slow(char *s, char *p, double *out)
{
    if ((size_t)(p - s) > LOG_MAX_NUMBER)
        return -E2BIG;
    char save = *p, *end;
    *p = '\0';
    double v = log_strtod(s, &end);
    *p = save;
    if (end != p)
        return -EINVAL;
    if (!isfinite(v))
        return -ERANGE;
    *out = v;
    return 0;
}

static inline __attribute__((always_inline)) int parse_num(char *s, char **endp, double *out)
{
    char *p = s;
    bool neg = false;
    if (*p == '-' || *p == '+') {
        neg = *p == '-';
        p++;
    }
    uint64_t m = 0;
    size_t ndig = scan_digits((const char **)&p, &m), nfrac = 0;
    if (*p == '.') {
        p++;
        nfrac = scan_digits((const char **)&p, &m);
        ndig += nfrac;
    }
    if (PS_UNLIKELY(ndig == 0))
        return -EINVAL;
    bool expo = false;
    if (PS_UNLIKELY(*p == 'e' || *p == 'E')) {
        char *q = p + 1;
        if (*q == '+' || *q == '-')
            q++;
        if (!is_digit(*q))
            return -EINVAL;
        while (is_digit(*q))
            q++;
        p = q;
        expo = true;
    }
    *endp = p;
    if (PS_LIKELY(!expo && ndig <= 15)) {
        double v = (double)m;
        if (nfrac)
            v /= pow10_tab[nfrac];
        *out = neg ? -v : v;
        return 0;
    }
    return parse_num_slow(s, p, out);
}

int logascii_number(log_reader *r, char *s, char *e, double *out)
{
    (void)r;
    size_t n = (size_t)(e - s);
    if (n > LOG_MAX_NUMBER)
        return -E2BIG;
    char tmp[LOG_MAX_NUMBER + LOG_BUF_PAD + 1] = { 0 }, *end;
    memcpy(tmp, s, n);
    double v;
    int rc = parse_num(tmp, &end, &v);
    if (rc < 0)
        return rc;
    if (end != tmp + n)
        return -EINVAL;
    *out = v;
    return 0;
}

/* parse_uint() for more than 18 digits, which may not fit. */
static __attribute__((noinline)) int parse_uint_long(const char *s, const char *e, uint64_t max,
                                                     uint64_t *v)
{
    uint64_t x = 0;
    for (const char *q = s; q < e; q++) {
        uint64_t d = (uint64_t)(*q - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -ERANGE;
        x = x * 10 + d;
    }
    if (x > max)
        return -ERANGE;
    *v = x;
    return 0;
}

/* Parse digits at *pp into *v (no sign). Returns 0, -EINVAL (no digits),
 * -ERANGE (above max). */
static inline __attribute__((always_inline)) int parse_uint(const char **pp, uint64_t max,
                                                            uint64_t *v)
{
    const char *p = *pp, *s = p;
    uint64_t x = 0;
    size_t n = scan_digits(&p, &x);
    if (PS_UNLIKELY(n == 0))
        return -EINVAL;
    *pp = p;
    if (PS_UNLIKELY(n > 18))
        return parse_uint_long(s, p, max, v);
    if (PS_UNLIKELY(x > max))
        return -ERANGE;
    *v = x;
    return 0;
}

/* --- header ------------------------------------------------------------- */

/* Split "#key value" (p after '#', lend the end of the line). */
static void split_kv(const char *p, const char *lend, const char **k, size_t *kl,
                     const char **v, size_t *vl)
{
    const char *ke = p;
    while (ke < lend && !is_sep(*ke))
        ke++;
    const char *vs = ke;
    while (vs < lend && is_sep(*vs))
        vs++;
    const char *ve = lend;
    while (ve > vs && is_sep(ve[-1]))
        ve--;
    *k = p;
    *kl = (size_t)(ke - p);
    *v = vs;
    *vl = (size_t)(ve - vs);
}

static bool is_gap_line(const char *p, const char *lend)
{
    return lend - p >= 9 && memcmp(p, "#cmon-gap", 9) == 0 && at_sep(p + 9, lend);
}

/* The words after the key of a "#cmon-overhead-ns ..." line, or -1 when
 * the line is not one. Three are a thread's cost update, a record; two
 * the header's line. */
static int overhead_words(const char *p, const char *lend)
{
    if (lend - p < 17 || memcmp(p, "#cmon-overhead-ns", 17) != 0 || !at_sep(p + 17, lend))
        return -1;
    int words = 0;
    for (p += 17;; words++) {
        while (p < lend && is_sep(*p))
            p++;
        if (p == lend)
            return words;
        p = token_end(p, lend);
    }
}

/* A thread's cost update, or a bad one, among the records: more than the
 * header's two words. */
static bool is_overhead_line(const char *p, const char *lend)
{
    return overhead_words(p, lend) > 2;
}

static int bad_header(char **errmsg, uint64_t line, const char *what, const char *tok, size_t n)
{
    char q[200];
    logr_error(errmsg, "bad header: line %llu: %s '%s'", (unsigned long long)line, what,
               logr_quote(q, tok, n));
    return -EINVAL;
}

/* The number that is all of [v, v+vl), as a record's values are read;
 * false when it is not one. */
static bool header_number(const char *v, size_t vl, double *out)
{
    char tmp[LOG_MAX_NUMBER + LOG_BUF_PAD + 1] = { 0 }, *end;
    if (vl == 0 || vl > LOG_MAX_NUMBER)
        return false;
    memcpy(tmp, v, vl);
    return parse_num(tmp, &end, out) == 0 && end == tmp + vl;
}

/* "#cmon-overhead-ns MEAN SPREAD": two finite numbers, MEAN > 0, SPREAD >= 0. */
static bool overhead_value(const char *v, size_t vl, double *mean, double *spread)
{
    const char *lend = v + vl, *e1 = token_end(v, lend), *s2 = e1;
    while (s2 < lend && is_sep(*s2))
        s2++;
    const char *e2 = token_end(s2, lend);
    double m, sp;
    if (e2 != lend || !header_number(v, (size_t)(e1 - v), &m) ||
        !header_number(s2, (size_t)(e2 - s2), &sp) || !logr_overhead_ok(m, sp))
        return false;
    *mean = m;
    *spread = sp;
    return true;
}

/* One header line (after the magic line): keep it; tick-ns must be > 0,
 * cmon-overhead-ns two numbers (the writer's cost per event). */
static int header_line(log_reader *r, uint64_t line, const char *p, const char *lend, char **errmsg)
{
    const char *k, *v;
    size_t kl, vl;
    split_kv(p + 1, lend, &k, &kl, &v, &vl);
    if (kl == 0)
        return 0;   /* "# some comment" */
    if (kl == 7 && memcmp(k, "tick-ns", 7) == 0) {
        double t = 0;
        if (!header_number(v, vl, &t) || !(t > 0))
            return bad_header(errmsg, line, "bad tick-ns", v, vl);
        r->hdr.tick_ns = t;
    }
    if (kl == 16 && memcmp(k, "cmon-overhead-ns", 16) == 0 &&
        !overhead_value(v, vl, &r->hdr.overhead_ns, &r->hdr.overhead_spread_ns))
        return bad_header(errmsg, line, "bad cmon-overhead-ns (want MEAN SPREAD, MEAN > 0, SPREAD >= 0)", v, vl);
    if (logr_header_add(r, k, kl, v, vl) < 0) {
        logr_error(errmsg, "bad header: more than %u header lines", LOG_MAX_HEADER_FIELDS);
        return -E2BIG;
    }
    return 0;
}

static const char ascii_magic[] = "#cmon-ascii";
#define ASCII_MAGIC_LEN (sizeof ascii_magic - 1)

/* True when the input starts with the magic; reads only as far as the
 * bytes still agree with it (a binary log on a pipe is not waited for). */
static int starts_with_magic(log_reader *r, char **errmsg)
{
    for (;;) {
        size_t avail = r->end - r->start;
        size_t n = avail < ASCII_MAGIC_LEN ? avail : ASCII_MAGIC_LEN;
        if (memcmp(r->buf + r->start, ascii_magic, n) != 0)
            return 0;
        if (avail >= ASCII_MAGIC_LEN)
            return 1;
        int rc = logr_fill(r, ASCII_MAGIC_LEN, errmsg);
        if (rc <= 0)
            return rc;
    }
}

/* logr_ops.open: the header lines, up to the first record. */
static int ascii_open(log_reader *r, char **errmsg)
{
    int magic = starts_with_magic(r, errmsg);
    if (magic < 0)
        return magic;
    if (!magic)
        return 1;
    for (;;) {
        size_t le;
        int rc = peek_line(r, &le, errmsg);
        if (rc < 0)
            return rc;
        if (rc == 0)
            break;
        if (rc == LINE_TOO_LONG) {
            /* A record too long ends the header like any record, and is
             * skipped with a warning like a later one (skip_long_line);
             * a header line that long is refused. */
            if (r->lineno > 0 && r->buf[r->start] != '#')
                break;
            logr_error(errmsg, "bad header: line %llu is longer than %u bytes",
                       (unsigned long long)r->lineno + 1, LOG_MAX_LINE);
            return -E2BIG;
        }
        const char *p = r->buf + r->start, *lend = r->buf + le;
        if (lend > p && lend[-1] == '\r')
            lend--;
        uint64_t line = r->lineno + 1;
        if (line == 1) {
            const char *k, *v;
            size_t kl, vl;
            split_kv(p + 1, lend, &k, &kl, &v, &vl);
            if (kl != 10)
                return bad_header(errmsg, 1, "expected '#cmon-ascii 1', got", p,
                                  (size_t)(lend - p));
            if (vl != 1 || *v != '1')
                return bad_header(errmsg, 1, "unsupported cmon-ascii version", v, vl);
        } else {
            const char *q = p;
            while (q < lend && is_sep(*q))
                q++;
            if (q < lend && (*p != '#' || is_gap_line(p, lend) || overhead_words(p, lend) == 3))
                break;   /* the first record */
            if (q < lend) {
                rc = header_line(r, line, p, lend, errmsg);
                if (rc < 0)
                    return rc;
            }
        }
        consume_line(r, le);
    }
    r->data_off = r->base + r->start;
    r->data_line = r->lineno;
    return 0;
}

/* --- records ------------------------------------------------------------ */

/* "#cmon-gap N" -> a gap record (1), or a warning (0). */
static int gap_record(log_reader *r, uint64_t line, const char *p, const char *lend,
                      log_record *rec)
{
    p += 9;
    while (is_sep(*p))
        p++;
    const char *s = p;
    uint64_t n = 0;
    int rc = parse_uint(&p, UINT64_MAX, &n);
    const char *t = p;
    while (is_sep(*t))
        t++;
    if (rc < 0 || t != lend) {
        char q[200];
        const char *e = lend;
        while (e > s && is_sep(e[-1]))
            e--;
        logr_warn(r, line, "bad gap count '%s'", logr_quote(q, s, (size_t)(e - s)));
        return 0;
    }
    return logr_gap(r, rec, line, n);
}

/* "#cmon-overhead-ns MEAN SPREAD THREAD" -> an overhead record (1) when
 * the reader wants them and the line is good, a warning (0) when it is
 * not, nothing (0) when they are not wanted. */
static int overhead_record(log_reader *r, uint64_t line, const char *p, const char *lend,
                           log_record *rec)
{
    if (!r->want_overhead)
        return 0;
    p += 17;
    while (p < lend && is_sep(*p))
        p++;
    /* the words: MEAN [v, e1), SPREAD [s2, e2), THREAD [s3, e3), then nothing */
    const char *v = p, *e1 = token_end(v, lend), *s2 = e1;
    while (s2 < lend && is_sep(*s2))
        s2++;
    const char *e2 = token_end(s2, lend), *s3 = e2;
    while (s3 < lend && is_sep(*s3))
        s3++;
    const char *e3 = token_end(s3, lend), *t = e3;
    while (t < lend && is_sep(*t))
        t++;
    double mean, spread;
    uint64_t th = 0;
    bool neg = s3 < lend && *s3 == '-';
    const char *q = s3 + neg;
    bool ok = overhead_value(v, (size_t)(e2 - v), &mean, &spread) && t == lend && q < e3 &&
              parse_uint(&q, (uint64_t)INT64_MAX + neg, &th) == 0 && q == e3;
    if (!ok) {
        char qb[200];
        logr_warn(r, line, "bad cmon-overhead-ns (want MEAN SPREAD THREAD, MEAN > 0, SPREAD >= 0) '%s'",
                  logr_quote(qb, v, (size_t)(lend - v)));
        return 0;
    }
    return logr_overhead(r, rec, line, neg ? (int64_t)(0 - th) : (int64_t)th, mean, spread);
}

/* Warn about the token at s: "<pre>'<token>'<suffix>". Returns 0. */
static int bad_token(log_reader *r, uint64_t line, const char *pre, const char *s,
                     const char *lend, const char *suffix)
{
    char q[200];
    logr_warn(r, line, "%s'%s'%s", pre, logr_quote(q, s, (size_t)(token_end(s, lend) - s)), suffix);
    return 0;
}

/* The integer token at *pp (a leading '-' when `sign`; *neg says whether
 * it had one), then the blanks after it: 1 with *pp at the next token, or 0
 * after a warning: a bad or out-of-range `what`, or `missing` when the line
 * ends there. */
static int int_field(log_reader *r, uint64_t line, char **pp, const char *lend, bool sign,
                     const char *what, const char *missing, uint64_t *v, bool *neg)
{
    const char *s = *pp, *p = s;
    *neg = sign && *p == '-';
    p += *neg;
    int rc = parse_uint(&p, (uint64_t)INT64_MAX + *neg, v);
    if (rc < 0 || !at_sep(p, lend)) {
        char pre[32];
        snprintf(pre, sizeof pre, "%s%s ", rc == -ERANGE ? "" : "bad ", what);
        return bad_token(r, line, pre, s, lend, rc == -ERANGE ? " out of range" : "");
    }
    while (is_sep(*p))
        p++;
    if (p == lend) {
        logr_warn(r, line, "%s", missing);
        return 0;
    }
    *pp = (char *)p;
    return 1;
}

/* Fill `rec` with a parsed event record (its position already counted)
 * and count it. Returns 1. */
static inline __attribute__((always_inline)) int event_record(log_reader *r, log_record *rec,
                                                              uint64_t line, uint64_t ts, uint64_t th,
                                                              bool neg, uint32_t id, uint32_t nv)
{
    r->prev_ts = (int64_t)ts;
    return logr_event(r, rec, line, (int64_t)ts, neg ? (int64_t)(0 - th) : (int64_t)th, id, nv);
}

/* TIMESTAMP THREAD EVENT [VALUE ...]; p is the first byte of the line's
 * first token. Returns 1 with *rec filled, or 0 after a warning. */
static int parse_record(log_reader *r, uint64_t line, char *p, char *lend, log_record *rec)
{
    r->pos++;

    uint64_t ts, th;
    bool neg;
    if (!int_field(r, line, &p, lend, false, "timestamp", "missing thread and event name", &ts, &neg) ||
        !int_field(r, line, &p, lend, true, "thread", "missing event name", &th, &neg))
        return 0;

    /* The name: a name seen before needs no checking, it was checked when
     * it was interned. */
    const char *s = p;
    size_t nlen = token_len(p);
    p += nlen;
    if (!at_sep(p, lend))
        return bad_token(r, line, "bad event name ", s, lend, "");
    uint32_t h = logr_hash_padded(s, nlen);
    uint32_t id = logr_find_padded(r, s, nlen, h);
    if (PS_UNLIKELY(id == UINT32_MAX)) {
        if (!log_name_valid(s, nlen))
            return bad_token(r, line, "bad event name ", s, lend, "");
        if (nlen > LOG_MAX_NAME) {
            logr_warn(r, line, "event name longer than %u bytes", LOG_MAX_NAME);
            return 0;
        }
        id = logr_intern(r, s, nlen, h);
        if (id == UINT32_MAX) {
            logr_warn(r, line, "too many distinct event names (limit %u)", LOG_MAX_NAMES);
            return 0;
        }
    }

    uint32_t nv = 0;
    for (;;) {
        while (is_sep(*p))
            p++;
        if (p >= lend)
            break;
        if (PS_UNLIKELY(nv == r->vals_cap))
            logr_vals_reserve(r, nv + 1);
        s = p;
        int rc = parse_num(p, &p, &r->vals[nv]);
        if (rc < 0 || !at_sep(p, lend)) {
            char suffix[64];
            bool bad = rc != -ERANGE && rc != -E2BIG;
            snprintf(suffix, sizeof suffix, "%s (field %u)",
                     rc == -ERANGE ? " out of range" : rc == -E2BIG ? " too long" : "", nv + 4);
            return bad_token(r, line, bad ? "bad value " : "value ", s, lend, suffix);
        }
        nv++;
    }

    return event_record(r, rec, line, ts, th, neg, id, nv);
}

/* --- the fast path ------------------------------------------------------ */

static inline bool ends_token(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

#ifdef LOGR_LITTLE_ENDIAN
/* Eight bytes at a time: the fast path reads whole words from a line it
 * knows to be complete; a word may run past the line's '\n' into the next
 * line or the buffer's LOG_BUF_PAD bytes of slack, never further, since
 * every scan stops at the '\n' or within 16 bytes of where it started. */

/* 0x80 in the lowest byte of w below '!' (a blank, a control byte, NUL);
 * bits above that byte mean nothing (borrows), bytes from 0x80 never count. */
static inline uint64_t low_bytes(uint64_t w)
{
    return (w - 0x2121212121212121ull) & ~w & 0x8080808080808080ull;
}

/* Read the run of decimal digits at *pp into *v, advancing *pp; returns how
 * many there were. Like scan_digits() from 0 (and wrapping the same way
 * beyond 19 digits, which callers reject), but up to 15 digits take no
 * branch per digit. */
static inline __attribute__((always_inline)) size_t scan_uint(const char **pp, uint64_t *v)
{
    uint64_t x;
    size_t n = cmon_scan_words16(*pp, &x);
    if (PS_LIKELY(n < 16)) {
        if (n == 0)
            return 0;
        *v = x;
        *pp += n;
        return n;
    }
    /* 17 digits or more (a clock in ns since 1970 has 19): on from the 16th */
    const char *p = *pp + 16;
    n = 16 + scan_digits(&p, &x);     /* (beyond 19 digits x may wrap: the callers decline) */
    *pp = p;
    *v = x;
    return n;
}

/* The id of the interned name [p, p+n), 1 <= n <= 15, given as the words
 * w0, w1 (zero beyond n): from the cache, or from the name table into the
 * cache. UINT32_MAX when the name is not interned. */
static inline __attribute__((always_inline)) uint32_t cached_name(log_reader *r, const char *p,
                                                                  size_t n, uint64_t w0,
                                                                  uint64_t w1)
{
    log_name_cache *c =
        &r->ncache[((w0 ^ (w1 * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull) >> 57];
    _Static_assert(LOG_NAME_CACHE == 128, "the cache index takes the top 7 bits");
    if (PS_LIKELY(c->w0 == w0 && c->w1 == w1))
        return c->id;
    uint32_t id = logr_find_padded(r, p, n, logr_hash_padded(p, n));
    if (id != UINT32_MAX) {
        c->w0 = w0;
        c->w1 = w1;
        c->id = id;
    }
    return id;
}

/* The event name at *pp, when it ends the token and is already interned:
 * its id, with *pp moved past it. UINT32_MAX (and *pp untouched) for
 * anything else, which the general parser then handles. Names of at most
 * 15 bytes are looked up in the reader's cache first. */
static inline __attribute__((always_inline)) uint32_t fast_name(log_reader *r, const char **pp)
{
    const char *p = *pp;
    uint64_t w0 = cmon_word_load(p), w1 = 0, m = low_bytes(w0);
    size_t n;
    if (PS_LIKELY(m)) {
        n = cmon_word_first(m);
        w0 &= (1ull << (8 * n)) - 1;
    } else {
        w1 = cmon_word_load(p + 8);
        m = low_bytes(w1);
        if (!m) {
            n = 16 + token_len(p + 16);
            if (!ends_token(p[n]))
                return UINT32_MAX;
            uint32_t id = logr_find_padded(r, p, n, logr_hash_padded(p, n));
            if (id != UINT32_MAX)
                *pp = p + n;
            return id;
        }
        n = 8 + cmon_word_first(m);
        w1 &= (1ull << (8 * (n - 8))) - 1;
    }
    if (n == 0 || !ends_token(p[n]))
        return UINT32_MAX;
    uint32_t id = cached_name(r, p, n, w0, w1);
    if (id != UINT32_MAX)
        *pp = p + n;
    return id;
}

/* A value token at *p that is a plain integer of at most 7 digits followed
 * by the end of the token: 1 with *out set and *pp moved past it (the value
 * parse_num() would give), else 0. */
static inline __attribute__((always_inline)) int fast_int_value(const char **pp, double *out)
{
    const char *p = *pp;
    uint64_t w = cmon_word_load(p), m = cmon_word_nondigits(w);
    if (!m)
        return 0;
    unsigned n = cmon_word_first(m);
    if (n == 0 || !ends_token(p[n]))
        return 0;
    *out = (double)cmon_word_digits(w, n);
    *pp = p + n;
    return 1;
}

#ifdef __SSE2__
#include <emmintrin.h>
#define HAVE_FAST_LINE 1

/* Bit i set when byte i of the 32 at p satisfies cmp (two 16-byte halves). */
#define MASK32(cmp, a, b) \
    ((uint32_t)_mm_movemask_epi8(cmp(a)) | (uint32_t)_mm_movemask_epi8(cmp(b)) << 16)

static inline __m128i eq_nl(__m128i x) { return _mm_cmpeq_epi8(x, _mm_set1_epi8('\n')); }
static inline __m128i eq_blank(__m128i x)
{
    return _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8(' ')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\t')));
}
/* bytes up to ' ' (unsigned) */
static inline __m128i le_space(__m128i x)
{
    return _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(' ')), x);
}
static inline __m128i is_digit16(__m128i x)
{
    __m128i d = _mm_sub_epi8(x, _mm_set1_epi8('0'));
    return _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(9)), d);
}

/* Value of the n (1 to 16) digits at p; a single digit (thread ids, small
 * values) is common enough for a shortcut. */
static inline uint64_t digits16(const char *p, unsigned n)
{
    if (n == 1)
        return (uint64_t)(unsigned char)(*p - '0');
    if (n <= 8)
        return cmon_word_digits(cmon_word_load(p), n);
    return cmon_word_digits(cmon_word_load(p), 8) * cmon_pow10_u64[n - 8] + cmon_word_digits(cmon_word_load(p + 8), n - 8);
}

/* fast_record() for a line of at most 31 bytes with nothing but blanks
 * between its tokens (no '\r', no control byte), p0 having at least 32
 * readable bytes: one pass of 16-byte compares finds every token and every
 * digit, so the fields need no byte-by-byte scanning. Same contract as
 * fast_record(): 1 with the line consumed, or 0 without side effects (then
 * fast_record() tries, then the general parser). */
static inline __attribute__((always_inline)) int fast_line(log_reader *r, const char *p0,
                                                           log_record *rec)
{
    __m128i a = _mm_loadu_si128((const __m128i *)p0);
    __m128i b = _mm_loadu_si128((const __m128i *)(p0 + 16));
    uint32_t nl = MASK32(eq_nl, a, b);
    if (!nl)
        return 0;
    unsigned len = (unsigned)__builtin_ctz(nl);   /* at most 31 */
    uint32_t in = (1u << len) - 1;
    uint32_t blank = MASK32(eq_blank, a, b) & in;
    if ((MASK32(le_space, a, b) & in) != blank)
        return 0;
    uint32_t digit = MASK32(is_digit16, a, b);
    uint32_t tok = ~blank & in;
    uint32_t starts = tok & ~(tok << 1), ends = (tok << 1) & ~tok;
    if (!(starts & 1))
        return 0;

    /* timestamp: [0, e) */
    unsigned e = (unsigned)__builtin_ctz(ends), st;
    if (e > 16 || (~digit & ((1u << e) - 1)))
        return 0;
    uint64_t ts = digits16(p0, e);

    /* thread: [st, e), after an optional '-' */
    starts &= starts - 1;
    ends &= ends - 1;
    if (!starts)
        return 0;
    st = (unsigned)__builtin_ctz(starts);
    e = (unsigned)__builtin_ctz(ends);
    bool neg = p0[st] == '-';
    st += neg;
    if (e <= st || e - st > 16 || (~digit & ((1u << e) - (1u << st))))
        return 0;
    uint64_t th = digits16(p0 + st, e - st);

    /* event name: [st, e) */
    starts &= starts - 1;
    ends &= ends - 1;
    if (!starts)
        return 0;
    st = (unsigned)__builtin_ctz(starts);
    e = (unsigned)__builtin_ctz(ends);
    const char *name = p0 + st;
    size_t n = e - st;
    uint32_t id;
    if (n < 16) {
        uint64_t w0 = cmon_word_load(name), w1 = 0;
        if (n < 8) {
            w0 &= (1ull << (8 * n)) - 1;
        } else {
            w1 = cmon_word_load(name + 8) & ((1ull << (8 * (n - 8))) - 1);
        }
        id = cached_name(r, name, n, w0, w1);
    } else {
        id = logr_find_padded(r, name, n, logr_hash_padded(name, n));
    }
    if (id == UINT32_MAX)
        return 0;

    /* values */
    uint32_t nv = 0;
    for (starts &= starts - 1, ends &= ends - 1; starts;
         starts &= starts - 1, ends &= ends - 1, nv++) {
        st = (unsigned)__builtin_ctz(starts);
        e = (unsigned)__builtin_ctz(ends);
        if (PS_UNLIKELY(nv == r->vals_cap))
            logr_vals_reserve(r, nv + 1);
        if (e - st <= 8 && !(~digit & ((1u << e) - (1u << st)))) {
            r->vals[nv] = (double)digits16(p0 + st, e - st);
        } else {
            char *q;
            if (parse_num((char *)p0 + st, &q, &r->vals[nv]) < 0 || q != p0 + e)
                return 0;
        }
    }

    r->start = (size_t)(p0 + len + 1 - r->buf);
    r->lineno++;
    r->pos++;
    return event_record(r, rec, r->lineno, ts, th, neg, id, nv);
}
#endif /* __SSE2__ */
#else  /* !LOGR_LITTLE_ENDIAN: byte by byte */
static inline size_t scan_uint(const char **pp, uint64_t *v)
{
    *v = 0;
    return scan_digits(pp, v);
}

static inline uint32_t fast_name(log_reader *r, const char **pp)
{
    const char *p = *pp;
    size_t n = token_len(p);
    if (n == 0 || !ends_token(p[n]))
        return UINT32_MAX;
    uint32_t id = logr_find_padded(r, p, n, logr_hash_padded(p, n));
    if (id != UINT32_MAX)
        *pp = p + n;
    return id;
}

static inline int fast_int_value(const char **pp, double *out)
{
    (void)pp;
    (void)out;
    return 0;
}
#endif /* LOGR_LITTLE_ENDIAN */

/* A well-formed record line at p0, known to be complete: fill *rec, consume
 * the line and return 1. Anything unusual (a blank or '#' line, leading
 * blanks, a name not seen before, a bad or long number, a stray '\r') makes
 * it return 0 without side effects, and parse_record() takes the line. So
 * the two must agree wherever this one answers; the fuzzer checks that. */
static inline __attribute__((always_inline)) int fast_record(log_reader *r, const char *p0,
                                                             log_record *rec)
{
    const char *p = p0;
    uint64_t ts, th;
    size_t n = scan_uint(&p, &ts);
    /* (19 digits fit in 64 bits; a timestamp is at most INT64_MAX) */
    if (n == 0 || n > 19 || (n == 19 && ts > (uint64_t)INT64_MAX) || !is_sep(*p))
        return 0;
    do
        p++;
    while (is_sep(*p));
    bool neg = *p == '-';
    p += neg;
    n = scan_uint(&p, &th);
    if (n == 0 || n > 18 || !is_sep(*p))
        return 0;
    do
        p++;
    while (is_sep(*p));
    uint32_t id = fast_name(r, &p);
    if (id == UINT32_MAX)
        return 0;
    uint32_t nv = 0;
    for (;;) {
        while (is_sep(*p))
            p++;
        if (*p == '\n' || *p == '\r')
            break;
        if (PS_UNLIKELY(nv == r->vals_cap))
            logr_vals_reserve(r, nv + 1);
        if (!fast_int_value(&p, &r->vals[nv]) &&
            (parse_num((char *)p, (char **)&p, &r->vals[nv]) < 0 || !ends_token(*p)))
            return 0;
        nv++;
    }
    if (*p == '\r' && *++p != '\n')
        return 0;
    if (PS_UNLIKELY((size_t)(p - p0) > LOG_MAX_LINE))
        return 0;
    r->start = (size_t)(p + 1 - r->buf);
    r->lineno++;
    r->pos++;
    return event_record(r, rec, r->lineno, ts, th, neg, id, nv);
}

/* Note where the last complete line in the buffer ends. */
static void find_complete(log_reader *r)
{
    const char *nl = memrchr(r->buf + r->start, '\n', r->end - r->start);
    r->complete = nl ? (size_t)(nl - r->buf) + 1 : r->start;
}

/* ascii_next() for a line the fast path did not take: the general
 * parser, line by line, trying the fast path again after each line. */
static __attribute__((noinline)) int next_general(log_reader *r, log_record *rec, char **errmsg)
{
    if (r->ended)
        return 0;
    for (;;) {
        if (PS_LIKELY(r->fastpath)) {
            if (r->start >= r->complete)
                find_complete(r);
            if (r->start < r->complete && fast_record(r, r->buf + r->start, rec))
                return 1;
        }
        size_t le;
        int rc = peek_line(r, &le, errmsg);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            r->ended = true;
            return 0;
        }
        if (rc == LINE_TOO_LONG) {
            rc = skip_long_line(r, errmsg);
            if (rc < 0)
                return rc;
            continue;
        }
        char *p = r->buf + r->start, *lend = r->buf + le;
        consume_line(r, le);
        uint64_t line = r->lineno;
        if (lend > p && lend[-1] == '\r')
            lend--;
        while (is_sep(*p))
            p++;
        if (p == lend)
            continue;
        if (*p == '#') {
            if (is_gap_line(p, lend) && gap_record(r, line, p, lend, rec))
                return 1;
            if (is_overhead_line(p, lend) && overhead_record(r, line, p, lend, rec))
                return 1;
            continue;
        }
        if (parse_record(r, line, p, lend, rec))
            return 1;
    }
}

/* logr_ops.next: the fast paths, then the general parser. */
static int ascii_next(log_reader *r, log_record *rec, char **errmsg)
{
    if (PS_UNLIKELY(r->skipping)) {
        int rc = skip_rest(r, errmsg);
        if (rc < 0)
            return rc;
    }
    if (PS_LIKELY(r->fastpath && !r->ended)) {
        if (r->start >= r->complete)
            find_complete(r);
        if (r->start < r->complete) {
            const char *p0 = r->buf + r->start;
#ifdef HAVE_FAST_LINE
            /* 32 bytes from p0 are readable: LOG_BUF_PAD bytes follow end */
            if (r->end - r->start >= 32 - LOG_BUF_PAD && fast_line(r, p0, rec))
                return 1;
#endif
            if (fast_record(r, p0, rec))
                return 1;
        }
    }
    return next_general(r, rec, errmsg);
}

const logr_ops logr_ascii_ops = {
    .format = LOG_FORMAT_ASCII,
    .open = ascii_open,
    .next = ascii_next,
};
