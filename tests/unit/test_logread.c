/* test_logread.c — the cmon-ascii 1 reader and what both readers share:
 * format detection, headers, every kind of malformed record with its line
 * number, gaps, CRLF, values, positions, interning, rewind.
 * (Binary logs: test_logread_bin.c; streaming: test_logread_stream.c.)
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "logread-internal.h"

/* --- helpers ------------------------------------------------------------ */

#define MAXW 64

typedef struct warnings {
    int n;
    uint64_t where[MAXW];
    char msg[MAXW][300];
} warnings;

static void on_warn(void *ctx, const char *logname, uint64_t where, const char *msg)
{
    warnings *w = ctx;
    assert_string_equal(logname, "t.log");
    if (w->n < MAXW) {
        w->where[w->n] = where;
        snprintf(w->msg[w->n], sizeof w->msg[0], "%s", msg);
    }
    w->n++;
}

static log_reader *open_str(const char *s, warnings *w)
{
    char *err = NULL;
    log_reader *r = log_reader_open_mem(s, strlen(s), "t.log", on_warn, w, &err);
    if (!r)
        print_error("open failed: %s\n", err);
    assert_non_null(r);
    assert_null(err);
    return r;
}

/* Opening must fail with a message containing `want`. */
static void open_fails(const char *s, size_t n, const char *want)
{
    char *err = NULL;
    log_reader *r = log_reader_open_mem(s, n, "t.log", NULL, NULL, &err);
    assert_null(r);
    assert_non_null(err);
    if (!strstr(err, want))
        fail_msg("error '%s' lacks '%s'", err, want);
    free(err);
}

static void next_event(log_reader *r, const char *name, int64_t ts, int64_t thread, uint32_t nvalues)
{
    log_record rec;
    char *err = NULL;
    assert_int_equal(log_reader_next(r, &rec, &err), 1);
    assert_int_equal(rec.kind, LOG_REC_EVENT);
    assert_string_equal(rec.name, name);
    assert_int_equal(rec.ts, ts);
    assert_int_equal(rec.thread, thread);
    assert_int_equal(rec.nvalues, nvalues);
}

static void at_end(log_reader *r)
{
    log_record rec;
    char *err = NULL;
    assert_int_equal(log_reader_next(r, &rec, &err), 0);
    assert_int_equal(log_reader_next(r, &rec, &err), 0);
    assert_null(err);
}

static void has_warning(const warnings *w, int i, uint64_t where, const char *want)
{
    assert_true(i < w->n);
    assert_int_equal(w->where[i], where);
    if (!strstr(w->msg[i], want))
        fail_msg("warning '%s' lacks '%s'", w->msg[i], want);
}

/* --- headers ------------------------------------------------------------ */

static void header_minimal(void **state)
{
    warnings w = { 0 };
    log_reader *r = open_str("#cmon-ascii 1\n", &w);
    const log_header *h = log_reader_header(r);
    assert_int_equal(h->format, LOG_FORMAT_ASCII);
    assert_true(h->tick_ns == 1);
    assert_true(h->overhead_ns == 0 && h->overhead_spread_ns == 0);
    assert_int_equal(h->nfields, 0);
    at_end(r);
    assert_int_equal(w.n, 0);
    log_reader_free(r);
}

static void header_fields_kept(void **state)
{
    warnings w = { 0 };
    log_reader *r = open_str("#cmon-ascii 1\n#program fsread\n#tick-ns 2.5\n\n"
                             "#  comment only\n#x-custom  a b\tc  \n#empty\n"
                             "#cmon-overhead-ns 30.5\t 0\n1 2 A\n", &w);
    const log_header *h = log_reader_header(r);
    assert_true(h->tick_ns == 2.5);
    assert_true(h->overhead_ns == 30.5 && h->overhead_spread_ns == 0);
    assert_int_equal(h->nfields, 5);
    assert_string_equal(h->fields[0].key, "program");
    assert_string_equal(h->fields[0].value, "fsread");
    assert_string_equal(h->fields[1].key, "tick-ns");
    assert_string_equal(h->fields[1].value, "2.5");
    assert_string_equal(h->fields[2].key, "x-custom");
    assert_string_equal(h->fields[2].value, "a b\tc");
    assert_string_equal(h->fields[3].key, "empty");
    assert_string_equal(h->fields[3].value, "");
    log_record rec;
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_string_equal(h->fields[4].key, "cmon-overhead-ns");
    assert_string_equal(h->fields[4].value, "30.5\t 0");
    assert_int_equal(rec.where, 9);
    log_reader_free(r);
}

/* '#cmon-overhead-ns MEAN SPREAD THREAD' among the records: a thread's cost
 * update, returned only when wanted; with three words right after the
 * header it ends the header; with two among the records it is a comment. */
static void overhead_lines(void **state)
{
    const char *log = "#cmon-ascii 1\n#cmon-overhead-ns 2 0.5\n#cmon-overhead-ns 3 0.25 -7\n"
                      "1 2 A\n#cmon-overhead-ns  4\t1   2 \n#cmon-overhead-ns 9 9\n"
                      "#cmon-overhead-ns 0 1 2\n#cmon-overhead-ns 1 1 2 3\n2 2 A\n";
    for (int want = 0; want <= 1; want++) {
        warnings w = { 0 };
        log_reader *r = open_str(log, &w);
        const log_header *h = log_reader_header(r);
        assert_true(h->overhead_ns == 2 && h->overhead_spread_ns == 0.5);
        assert_int_equal(h->nfields, 1);
        log_reader_want_overhead(r, want);
        log_record rec;
        if (want) {
            assert_int_equal(log_reader_next(r, &rec, NULL), 1);
            assert_int_equal(rec.kind, LOG_REC_OVERHEAD);
            assert_int_equal(rec.thread, -7);
            assert_true(rec.ovh_ns == 3 && rec.ovh_spread_ns == 0.25);
            assert_int_equal(rec.where, 3);
            assert_int_equal(rec.pos, 0);
        }
        assert_int_equal(log_reader_next(r, &rec, NULL), 1);
        assert_int_equal(rec.kind, LOG_REC_EVENT);
        assert_int_equal(rec.where, 4);
        if (want) {
            assert_int_equal(log_reader_next(r, &rec, NULL), 1);
            assert_int_equal(rec.kind, LOG_REC_OVERHEAD);
            assert_int_equal(rec.thread, 2);
            assert_true(rec.ovh_ns == 4 && rec.ovh_spread_ns == 1);
            assert_int_equal(rec.where, 5);
            assert_int_equal(rec.pos, 1);
            assert_int_equal(rec.ts, 1);
        }
        assert_int_equal(log_reader_next(r, &rec, NULL), 1);
        assert_int_equal(rec.kind, LOG_REC_EVENT);
        assert_int_equal(rec.where, 9);
        at_end(r);
        assert_int_equal(w.n, want ? 2 : 0);
        if (want) {
            has_warning(&w, 0, 7, "bad cmon-overhead-ns (want MEAN SPREAD THREAD, MEAN > 0, SPREAD >= 0) '0 1 2'");
            has_warning(&w, 1, 8, "'1 1 2 3'");
        }
        log_reader_free(r);
    }
}

static void header_errors(void **state)
{
    static const struct {
        const char *log, *want;
    } cases[] = {
        { "", "unrecognized log format" },
        { "1000 7 StartRead\n", "unrecognized log format" },
        { "#program x\n#cmon-ascii 1\n", "unrecognized log format" },
        { "# cmon-ascii 1\n", "unrecognized log format" },
        { "#cmon", "unrecognized log format" },
        { "#cmon-ascii 2\n", "bad header: line 1: unsupported cmon-ascii version '2'" },
        { "#cmon-ascii\n", "bad header: line 1: unsupported cmon-ascii version ''" },
        { "#cmon-asciiX 1\n", "bad header: line 1: expected '#cmon-ascii 1'" },
        { "#cmon-ascii 1\n#tick-ns 0\n", "bad header: line 2: bad tick-ns '0'" },
        { "#cmon-ascii 1\n#x y\n#tick-ns -1\n", "bad header: line 3: bad tick-ns '-1'" },
        { "#cmon-ascii 1\n#tick-ns abc\n", "bad tick-ns 'abc'" },
        { "#cmon-ascii 1\n#tick-ns\n", "bad tick-ns ''" },
        { "#cmon-ascii 1\n#tick-ns 1e999\n", "bad tick-ns '1e999'" },
        { "#cmon-ascii 1\n#tick-ns nan\n", "bad tick-ns 'nan'" },
        { "#cmon-ascii 1\n#tick-ns 1 2\n", "bad tick-ns '1 2'" },
        { "#cmon-ascii 1\n#cmon-overhead-ns x\n", "bad header: line 2: bad cmon-overhead-ns (want MEAN SPREAD, MEAN > 0, SPREAD >= 0) 'x'" },
        { "#cmon-ascii 1\n#cmon-overhead-ns 5\n", "bad cmon-overhead-ns (want MEAN SPREAD, MEAN > 0, SPREAD >= 0) '5'" },
        { "#cmon-ascii 1\n#x y\n#cmon-overhead-ns -1 2\n", "bad header: line 3: bad cmon-overhead-ns" },
        { "#cmon-ascii 1\n#cmon-overhead-ns 0 2\n", "bad cmon-overhead-ns" },
        { "#cmon-ascii 1\n#cmon-overhead-ns 1 -2\n", "bad cmon-overhead-ns" },
        { "#cmon-ascii 1\n#cmon-overhead-ns 1 2 3 4\n", "bad cmon-overhead-ns" },
        { "#cmon-ascii 1\n#cmon-overhead-ns 1e999 2\n", "bad cmon-overhead-ns" },
        { "#cmon-ascii 1\n#cmon-overhead-ns 1 nan\n", "bad cmon-overhead-ns" },
        { "#cmon-ascii 1\n#cmon-overhead-ns\n", "bad cmon-overhead-ns" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        open_fails(cases[i].log, strlen(cases[i].log), cases[i].want);
}

static void header_too_many_fields(void **state)
{
    size_t n = LOG_MAX_HEADER_FIELDS + 1;
    char *s = malloc(32 + n * 16), *p = s;
    p += sprintf(p, "#cmon-ascii 1\n");
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "#k%zu v\n", i);
    open_fails(s, (size_t)(p - s), "bad header: more than");
    free(s);
}

static void header_crlf(void **state)
{
    warnings w = { 0 };
    log_reader *r = open_str("#cmon-ascii 1\r\n#tick-ns 4\r\n#program p\r\n"
                             "10 1 A 1.5\r\n\r\n20 2 B\r\n30 3 C 7\r\n", &w);
    const log_header *h = log_reader_header(r);
    assert_true(h->tick_ns == 4);
    assert_string_equal(h->fields[1].value, "p");
    log_record rec;
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_int_equal(rec.nvalues, 1);
    assert_true(rec.values[0] == 1.5);
    next_event(r, "B", 20, 2, 0);
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_int_equal(rec.where, 7);
    assert_true(rec.values[0] == 7);
    at_end(r);
    assert_int_equal(w.n, 0);
    log_reader_free(r);
}

/* --- records ------------------------------------------------------------ */

static void records_basic(void **state)
{
    warnings w = { 0 };
    log_reader *r = open_str("#cmon-ascii 1\n"
                             "1000 7 StartRead 7 4096\n"
                             "1800\t7  CacheHit\t7\n"
                             "  9200 -3 EndRead 7   \n"
                             "9300 0 call@read 1 2 3\n"
                             "9400 9223372036854775807 ret@read\n"
                             "9223372036854775807 -9223372036854775808 _x9\n", &w);
    log_record rec;
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_int_equal(rec.kind, LOG_REC_EVENT);
    assert_int_equal(rec.pos, 1);
    assert_int_equal(rec.where, 2);
    assert_int_equal(rec.ts, 1000);
    assert_int_equal(rec.thread, 7);
    assert_string_equal(rec.name, "StartRead");
    assert_int_equal(rec.name_id, 0);
    assert_int_equal(rec.nvalues, 2);
    assert_true(rec.values[0] == 7 && rec.values[1] == 4096);
    next_event(r, "CacheHit", 1800, 7, 1);
    next_event(r, "EndRead", 9200, -3, 1);
    next_event(r, "call@read", 9300, 0, 3);
    next_event(r, "ret@read", 9400, INT64_MAX, 0);
    next_event(r, "_x9", INT64_MAX, INT64_MIN, 0);
    at_end(r);
    assert_int_equal(w.n, 0);
    assert_int_equal(log_reader_nrecords(r), 6);
    assert_int_equal(log_reader_nmalformed(r), 0);
    log_reader_free(r);
}

/* Every kind of malformed record: warned with its line number, skipped,
 * and still counted in positions. */
static void records_malformed(void **state)
{
    static const struct {
        const char *line, *want;
    } cases[] = {
        { "x1 7 A", "bad timestamp 'x1'" },
        { "-5 7 A", "bad timestamp '-5'" },
        { "+5 7 A", "bad timestamp '+5'" },
        { "1.5 7 A", "bad timestamp '1.5'" },
        { "12a 7 A", "bad timestamp '12a'" },
        { "9223372036854775808 7 A", "timestamp '9223372036854775808' out of range" },
        { "99999999999999999999999 7 A", "timestamp '99999999999999999999999' out of range" },
        { "100", "missing thread" },
        { "100   ", "missing thread" },
        { "100 7", "missing event name" },
        { "100 x A", "bad thread 'x'" },
        { "100 - A", "bad thread '-'" },
        { "100 1.0 A", "bad thread '1.0'" },
        { "100 9223372036854775808 A", "thread '9223372036854775808' out of range" },
        { "100 -9223372036854775809 A", "thread '-9223372036854775809' out of range" },
        { "100 7 3abc", "bad event name '3abc'" },
        { "100 7 a-b", "bad event name 'a-b'" },
        { "100 7 foo@bar", "bad event name 'foo@bar'" },
        { "100 7 call@", "bad event name 'call@'" },
        { "100 7 call@1x", "bad event name 'call@1x'" },
        { "100 7 ret@a@b", "bad event name 'ret@a@b'" },
        { "100 7 @x", "bad event name '@x'" },
        { "100 7 A x", "bad value 'x' (field 4)" },
        { "100 7 A 1 nan", "bad value 'nan' (field 5)" },
        { "100 7 A inf", "bad value 'inf' (field 4)" },
        { "100 7 A -Infinity", "bad value '-Infinity' (field 4)" },
        { "100 7 A 0x10", "bad value '0x10' (field 4)" },
        { "100 7 A 1 2 1e", "bad value '1e' (field 6)" },
        { "100 7 A 1e+", "bad value '1e+' (field 4)" },
        { "100 7 A 1.2.3", "bad value '1.2.3' (field 4)" },
        { "100 7 A --1", "bad value '--1' (field 4)" },
        { "100 7 A +", "bad value '+' (field 4)" },
        { "100 7 A .", "bad value '.' (field 4)" },
        { "100 7 A 1,5", "bad value '1,5' (field 4)" },
        { "100 7 A 1e999", "value '1e999' out of range (field 4)" },
        { "100 7 A 1\r2", "bad value '1\\x0d2' (field 4)" },
        { "100 7 A\x01", "bad event name 'A\\x01'" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char log[512];
        snprintf(log, sizeof log, "#cmon-ascii 1\n#program p\n1 1 Before\n\n%s\n2 2 After 5\n",
                 cases[i].line);
        warnings w = { 0 };
        log_reader *r = open_str(log, &w);
        log_record rec;
        assert_int_equal(log_reader_next(r, &rec, NULL), 1);
        assert_int_equal(rec.pos, 1);
        assert_int_equal(log_reader_next(r, &rec, NULL), 1);
        assert_string_equal(rec.name, "After");
        assert_int_equal(rec.pos, 3);       /* the malformed record keeps its position */
        assert_int_equal(rec.where, 6);
        assert_true(rec.values[0] == 5);
        at_end(r);
        if (w.n != 1)
            fail_msg("case '%s': %d warnings", cases[i].line, w.n);
        has_warning(&w, 0, 5, cases[i].want);
        assert_int_equal(log_reader_nmalformed(r), 1);
        log_reader_free(r);
    }
}

static void values_parse_like_strtod(void **state)
{
    static const char *tokens[] = {
        "0", "-0", "+0", "1", "-1", "+5", "007", "4096", "123456789012345", "1234567890123456",
        "12345678901234567890", "9007199254740993", "0.1", "-0.1", ".5", "5.", "3.14159",
        "0.000000000000001", "1e3", "1E-3", "-2.5e+10", "1e-320", "4.9e-324", "1.7976931348623157e308",
        "0.30000000000000004", "123.456e-7", "99999999999999999999999999.5",
        "0.1000000000000000055511151231257827021181583404541015625",
    };
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) {
        char tok[128];
        strcpy(tok, tokens[i]);
        double got = -1, want = strtod(tokens[i], NULL);
        assert_int_equal(logascii_number(NULL, tok, tok + strlen(tok), &got), 0);
        if (memcmp(&got, &want, sizeof got) != 0)
            fail_msg("'%s': got %.17g, strtod says %.17g", tokens[i], got, want);
    }
    /* Pseudo-random short decimals: the fast path must match strtod exactly. */
    unsigned s = 12345;
    for (int i = 0; i < 200000; i++) {
        char tok[64];
        s = s * 1103515245 + 12345;
        unsigned a = s >> 8;
        s = s * 1103515245 + 12345;
        int fd = (int)(s >> 28) % 8;
        int n = snprintf(tok, sizeof tok, "%s%u.%0*u", (s & 1) ? "-" : "", a % 100000, fd + 1,
                         (s >> 4) % 1000000);
        double got, want = strtod(tok, NULL);
        assert_int_equal(logascii_number(NULL, tok, tok + n, &got), 0);
        if (memcmp(&got, &want, sizeof got) != 0)
            fail_msg("'%s': got %.17g, strtod says %.17g", tok, got, want);
    }
    double v;
    char big[LOG_MAX_NUMBER + 8];
    memset(big, '1', sizeof big);
    assert_int_equal(logascii_number(NULL, big, big + sizeof big, &v), -E2BIG);
}

static void values_missing_and_extra(void **state)
{
    warnings w = { 0 };
    log_reader *r = open_str("#cmon-ascii 1\n1 1 A\n2 1 A 1\n3 1 A 1 2 3 4 5 6 7 8 9 10 11 12 13 14 "
                             "15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35\n", &w);
    log_record rec;
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_int_equal(rec.nvalues, 0);
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_int_equal(rec.nvalues, 1);
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_int_equal(rec.nvalues, 35);
    for (uint32_t i = 0; i < 35; i++)
        assert_true(rec.values[i] == i + 1);
    at_end(r);
    log_reader_free(r);
}

/* Blank lines and comments are skipped; '#cmon-gap N' becomes a gap. */
static void gaps_and_comments(void **state)
{
    warnings w = { 0 };
    log_reader *r = open_str("#cmon-ascii 1\n"
                             "#cmon-gap 2\n"              /* right after the header */
                             "1 1 A\n"
                             "# a comment\n"
                             "   \n"
                             "#cmon-gapper 3\n"           /* just a comment */
                             "#cmon-gap\t18446744073709551615  \n"
                             "2 1 B\n"
                             "#cmon-gap x\n"              /* malformed */
                             "#cmon-gap 1 2\n"            /* malformed */
                             "#cmon-gap\n"                /* malformed */
                             "3 1 C", &w);                /* no final newline */
    log_record rec;
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_int_equal(rec.kind, LOG_REC_GAP);
    assert_int_equal(rec.gap, 2);
    assert_int_equal(rec.pos, 0);
    assert_int_equal(rec.where, 2);
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_int_equal(rec.kind, LOG_REC_EVENT);
    assert_int_equal(rec.pos, 1);
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_int_equal(rec.kind, LOG_REC_GAP);
    assert_true(rec.gap == UINT64_MAX);
    assert_int_equal(rec.pos, 1);
    assert_int_equal(rec.where, 7);
    assert_int_equal(rec.ts, 1);
    next_event(r, "B", 2, 1, 0);
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_string_equal(rec.name, "C");
    assert_int_equal(rec.pos, 3);
    assert_int_equal(rec.where, 12);
    at_end(r);
    assert_int_equal(w.n, 3);
    has_warning(&w, 0, 9, "bad gap count 'x'");
    has_warning(&w, 1, 10, "bad gap count '1 2'");
    has_warning(&w, 2, 11, "bad gap count ''");
    assert_int_equal(log_reader_nrecords(r), 5);
    log_reader_free(r);
}

/* `n` bytes of log text read from memory (`mem`) or from a file, as the
 * two ways a log is opened. */
static log_reader *open_text(const char *s, size_t n, int mem, warnings *w, char **err)
{
    char path[] = "/tmp/test_logread_XXXXXX";
    int fd;

    if (mem)
        return log_reader_open_mem(s, n, "t.log", on_warn, w, err);
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, s, n), (ssize_t)n);
    lseek(fd, 0, SEEK_SET);
    unlink(path);
    return log_reader_open(fd, true, "t.log", on_warn, w, err);
}

static void long_lines_skipped(void **state)
{
    size_t big = LOG_MAX_LINE + 100;
    char *s = malloc(2 * big + 200), *p = s;
    p += sprintf(p, "#cmon-ascii 1\n1 1 A\n");
    memset(p, '7', big);
    p += big;
    p += sprintf(p, "\n#");
    memset(p, 'c', big);
    p += big;
    p += sprintf(p, "\n2 1 B\n");
    for (int mem = 0; mem < 2; mem++) {
        warnings w = { 0 };
        char *err = NULL;
        log_reader *r = open_text(s, (size_t)(p - s), mem, &w, &err);
        assert_non_null(r);
        next_event(r, "A", 1, 1, 0);
        log_record rec;
        assert_int_equal(log_reader_next(r, &rec, NULL), 1);
        assert_string_equal(rec.name, "B");
        assert_int_equal(rec.where, 5);
        assert_int_equal(rec.pos, 3);   /* the long record line counts, the comment does not */
        at_end(r);
        assert_int_equal(w.n, 2);
        has_warning(&w, 0, 3, "longer than");
        has_warning(&w, 1, 4, "longer than");
        log_reader_free(r);
    }
    /* In the header, an over-long line is an error. */
    p = s + sprintf(s, "#cmon-ascii 1\n#");
    memset(p, 'c', big);
    open_fails(s, (size_t)(p - s) + big, "bad header: line 2 is longer than");
    free(s);
}

/* Issue 31: an over-long first record ends the header like any record and
 * is skipped with a warning like a later one; the log is not refused. */
static void long_first_record_skipped(void **state)
{
    size_t big = LOG_MAX_LINE + 100;
    char *s = malloc(big + 200), *p = s;
    p += sprintf(p, "#cmon-ascii 1\n#tick-ns 10\n");
    memset(p, '7', big);
    p += big;
    p += sprintf(p, "\n2 1 B\n");
    for (int mem = 0; mem < 2; mem++) {
        warnings w = { 0 };
        char *err = NULL;
        log_reader *r = open_text(s, (size_t)(p - s), mem, &w, &err);
        assert_non_null(r);
        assert_true(log_reader_header(r)->tick_ns == 10);
        log_record rec;
        assert_int_equal(log_reader_next(r, &rec, NULL), 1);
        assert_string_equal(rec.name, "B");
        assert_int_equal(rec.where, 4);
        assert_int_equal(rec.pos, 2);   /* the long record counts */
        at_end(r);
        assert_int_equal(w.n, 1);
        has_warning(&w, 0, 3, "longer than");
        log_reader_free(r);
    }
    free(s);
}

static void names_interned(void **state)
{
    warnings w = { 0 };
    log_reader *r = open_str("#cmon-ascii 1\n1 1 B\n2 1 A\n3 1 B\n4 1 A\n5 1 C\n6 1 3x\n", &w);
    static const char *want[] = { "B", "A", "B", "A", "C" };
    static const uint32_t ids[] = { 0, 1, 0, 1, 2 };
    for (int i = 0; i < 5; i++) {
        log_record rec;
        assert_int_equal(log_reader_next(r, &rec, NULL), 1);
        assert_string_equal(rec.name, want[i]);
        assert_int_equal(rec.name_id, ids[i]);
        assert_ptr_equal(rec.name, log_reader_name(r, ids[i]));
    }
    at_end(r);
    assert_int_equal(log_reader_nnames(r), 3);
    assert_null(log_reader_name(r, 3));
    log_reader_free(r);

    /* Many names, some long: ids stay dense and lookups exact. */
    size_t n = 5000;
    char *s = malloc(64 + n * 80), *p = s;
    p += sprintf(p, "#cmon-ascii 1\n");
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "%zu 0 name_%zu_abcdefghijklmnopqrstuvwxyz_%zu\n", i, i % 2500, i % 2500);
    r = open_str(s, &w);
    for (size_t i = 0; i < n; i++) {
        log_record rec;
        char want_name[80];
        assert_int_equal(log_reader_next(r, &rec, NULL), 1);
        snprintf(want_name, sizeof want_name, "name_%zu_abcdefghijklmnopqrstuvwxyz_%zu", i % 2500, i % 2500);
        assert_string_equal(rec.name, want_name);
        assert_int_equal(rec.name_id, i % 2500);
    }
    assert_int_equal(log_reader_nnames(r), 2500);
    log_reader_free(r);
    free(s);
}

/* A log cannot make the reader intern names without bound. */
static void too_many_names(void **state)
{
    size_t n = LOG_MAX_NAMES + 2;
    char *s = malloc(32 + n * 24), *p = s;
    p += sprintf(p, "#cmon-ascii 1\n");
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "%zu 0 N%zu\n", i, i);
    p += sprintf(p, "9 0 N0\n");
    warnings w = { 0 };
    log_reader *r = log_reader_open_mem(s, (size_t)(p - s), "t.log", on_warn, &w, NULL);
    assert_non_null(r);
    log_record rec;
    size_t got = 0;
    while (log_reader_next(r, &rec, NULL) == 1)
        got++;
    assert_int_equal(got, LOG_MAX_NAMES + 1);   /* the last line's name is known */
    assert_int_equal(log_reader_nnames(r), LOG_MAX_NAMES);
    assert_int_equal(w.n, 2);
    has_warning(&w, 0, LOG_MAX_NAMES + 2, "too many distinct event names");
    log_reader_free(r);
    free(s);
}

static void name_too_long(void **state)
{
    char s[LOG_MAX_NAME + 100], *p = s;
    p += sprintf(p, "#cmon-ascii 1\n1 1 ");
    memset(p, 'a', LOG_MAX_NAME + 1);
    p += LOG_MAX_NAME + 1;
    strcpy(p, "\n2 1 B\n");
    warnings w = { 0 };
    log_reader *r = open_str(s, &w);
    next_event(r, "B", 2, 1, 0);
    at_end(r);
    has_warning(&w, 0, 2, "event name longer than");
    log_reader_free(r);
}

/* The fast path for well-formed lines and the general parser agree on
 * every kind of line, well-formed or not. */
static void fast_path_agrees(void **state)
{
    static const char *lines[] = {
        "1 2 A", "1 2 A 3", "1 2 A 3 4.5 -6e2 +7 .8 9.", "  1 2 A", "1\t2\tA\t3", "1  2  A  3  ",
        "1 2 A\r", "1 2 A 3\r", "1 2 A\r 3", "1 2 A 3\r\r", "1\r", "1 2\r", "1 -2 A", "1 -0 A",
        "123456789012345678 2 A", "1234567890123456789 2 A", "9223372036854775807 2 A",
        "1 123456789012345678 A", "1 -1234567890123456789 A", "1 2 NewName 1", "1 2 NewName 2",
        "1 2 call@read", "1 2 call@read 1", "1 2 3abc", "1 2 A x", "1 2 A 1e999", "1 2 A 0x1",
        "1 2 A\x01", "1 2 A\x7f", "1 2 A\xc3\xa9", "1 2 A 1,5", "1 2 A 1 nan", "x 2 A", "1 x A",
        "1", "1 2", "", "   ", "# comment", "#cmon-gap 4", "#cmon-gap x", "1 2 A 12345678901234567890",
        "1 2 A 1.00000000000000000001", "1 2 A -", "1 2 A 5e-3", "1 2 A 0.1234567890123456",
        "1 2 A 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30",
        "1 2 B", "1 2 A\t", "1 2 A \t 3 \t",
        /* around the 8-byte words the fast path reads: numbers and names
         * of 7, 8, 9, 15, 16 and 17 bytes (each name twice: the second
         * time it is known), values that are not plain short integers */
        "1234567 2 A", "12345678 2 A", "123456789 2 A", "123456789012345 2 A",
        "1234567890123456 2 A", "12345678901234567 2 A", "000000000000000001 2 A",
        "1 12345678 A", "1 -123456789 A", "1 1234567890123456 A", "12345678\t-0 A",
        "1 2 Abcdefg 1", "1 2 Abcdefg 1", "1 2 Abcdefgh 2", "1 2 Abcdefgh 2",
        "1 2 Abcdefghi 3", "1 2 Abcdefghi 3", "1 2 Abcdefghijklmno", "1 2 Abcdefghijklmno",
        "1 2 Abcdefghijklmnop 4", "1 2 Abcdefghijklmnop\t4", "1 2 Abcdefghijklmnopq 5",
        "1 2 Abcdefghijklmnopq 5", "1 2 Abcdefghijklmnopqrstuvwxyz0123456789 6",
        "1 2 Abcdefghijklmnopqrstuvwxyz0123456789 6", "1 2 Abcdefgh\r", "1 2 Abcdefgh\x01",
        "1 2 Abcdefghijklmnop\x01", "1 2 Abcdefg\xc3\xa9", "1 2 Abcdefghijklmno\xc3\xa9",
        "1 2 A 1234567 12345678 123456789 0000001 00000000 1234567.5 1234567e1 7- 7x 3",
        "1 2 A 1\r", "1 2 A 12345678\r", "1 2 A 1\x01", "1 2 A 9999999\t0\t", "1 2 A -1 +1 .1",
        /* around the 32 bytes the SSE2 line parser looks at (lines of 30
         * to 33 bytes), and every kind of token it checks */
        "1 2 StartRead", "1234567890 4 StartRead 4 16384", "1234567890 4 StartRead 4 163841",
        "1234567890 4 StartRead 4 1638412", "1234567890 4 StartRead 4 16384123",
        "1234567890123456 -12345678 A 1", "12345678901234567 1 A 1", "1 -1234567890123456 A",
        "1 2 Abcdefghijklmno 12345678", "1 2 A 12345678 123456789 -5", "1 2 A +6 .5 7. 1e3 0x",
        "1 - A", "1 -x A", "1 2- A", "-1 2 A", "1\t2\tA\t\t3", "1 2 A 1x", "1 2 A 1 2 3 4 5 6 7 8 9 10 11",
        "1 2 A 1 2 3 4 5 6 7 8 9 10 11 12", "1 2 A 3\x0b", "1 2 Abcdefgh\xff 1",
        /* timestamps of 17 to 20 digits (CLOCK_REALTIME in ns has 19),
         * around INT64_MAX */
        "12345678901234567 1 A 1", "123456789012345678 1 A 1", "1795935634718120187 1 A 1",
        "9223372036854775807 1 A 1", "9223372036854775808 1 A 1", "9999999999999999999 1 A 1",
        "18446744073709551616 1 A 1", "99999999999999999999 1 A 1", "1795935634718120187x 1 A 1",
    };
    char *s = malloc(16384), *p = s;
    p += sprintf(p, "#cmon-ascii 1\n");
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        p += sprintf(p, "%s\n", lines[i]);
    p += sprintf(p, "5 5 A 5");   /* no final newline */
    warnings w[2] = { 0 };
    char *err = NULL;
    log_reader *r[2];
    for (int k = 0; k < 2; k++) {
        r[k] = log_reader_open_mem(s, (size_t)(p - s), "t.log", on_warn, &w[k], &err);
        assert_non_null(r[k]);
    }
    logr_set_fastpath(r[1], false);
    int n = 0;
    for (;; n++) {
        log_record a, b;
        int ra = log_reader_next(r[0], &a, NULL), rb = log_reader_next(r[1], &b, NULL);
        assert_int_equal(ra, rb);
        if (ra != 1)
            break;
        assert_int_equal(a.kind, b.kind);
        assert_int_equal(a.pos, b.pos);
        assert_int_equal(a.where, b.where);
        assert_int_equal(a.ts, b.ts);
        assert_int_equal(a.thread, b.thread);
        if (a.kind == LOG_REC_GAP)
            assert_int_equal(a.gap, b.gap);
        if (a.kind == LOG_REC_EVENT) {
            assert_string_equal(a.name, b.name);
            assert_int_equal(a.name_id, b.name_id);
            assert_int_equal(a.nvalues, b.nvalues);
            assert_memory_equal(a.values, b.values, a.nvalues * sizeof(double));
        }
    }
    assert_true(n > 20);
    assert_int_equal(w[0].n, w[1].n);
    for (int i = 0; i < w[0].n && i < MAXW; i++) {
        assert_int_equal(w[0].where[i], w[1].where[i]);
        assert_string_equal(w[0].msg[i], w[1].msg[i]);
    }
    log_reader_free(r[0]);
    log_reader_free(r[1]);
    free(s);
}

/* The fast path's cache of short names never mixes two names up, however
 * many there are and whatever order they come in. */
static void name_cache_many(void **state)
{
    (void)state;
    enum { NAMES = 1000, PASSES = 3 };
    char *s = malloc(64 + (size_t)NAMES * PASSES * 32), *p = s;
    p += sprintf(p, "#cmon-ascii 1\n");
    for (int pass = 0; pass < PASSES; pass++)
        for (int i = 0; i < NAMES; i++) {
            int k = (i * (pass + 1) * 7 + pass) % NAMES;
            p += sprintf(p, "%d %d %s%d %d\n", i, pass, k % 2 ? "Name_" : "N", k, k);
        }
    warnings w = { 0 };
    log_reader *r = log_reader_open_mem(s, (size_t)(p - s), "t.log", on_warn, &w, NULL);
    assert_non_null(r);
    uint32_t ids[NAMES];
    for (int pass = 0; pass < PASSES; pass++)
        for (int i = 0; i < NAMES; i++) {
            int k = (i * (pass + 1) * 7 + pass) % NAMES;
            char want[32];
            sprintf(want, "%s%d", k % 2 ? "Name_" : "N", k);
            log_record rec;
            assert_int_equal(log_reader_next(r, &rec, NULL), 1);
            assert_string_equal(rec.name, want);
            assert_int_equal(rec.nvalues, 1);
            assert_true(rec.values[0] == k);
            if (pass == 0)
                ids[k] = rec.name_id;
            else
                assert_int_equal(rec.name_id, ids[k]);
        }
    at_end(r);
    assert_int_equal(w.n, 0);
    log_reader_free(r);
    free(s);
}

/* --- rewind ------------------------------------------------------------- */

static void rewind_ascii(void **state)
{
    const char *log = "#cmon-ascii 1\n#program x\n1 1 A 1\nbad\n#cmon-gap 3\n2 2 B\n";
    char path[] = "/tmp/test_logread_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    /* The log starts after some unrelated bytes: rewinding goes back to
     * where the reader started, not to offset 0. */
    assert_int_equal(write(fd, "junk", 4), 4);
    assert_int_equal(write(fd, log, strlen(log)), (ssize_t)strlen(log));
    lseek(fd, 4, SEEK_SET);
    warnings w = { 0 };
    log_reader *readers[2] = {
        log_reader_open(fd, true, "t.log", on_warn, &w, NULL),
        open_str(log, &w),
    };
    for (int k = 0; k < 2; k++) {
        log_reader *r = readers[k];
        assert_non_null(r);
        for (int pass = 0; pass < 3; pass++) {
            log_record rec;
            next_event(r, "A", 1, 1, 1);
            if (pass == 2)
                break;   /* rewind from the middle too */
            assert_int_equal(log_reader_next(r, &rec, NULL), 1);
            assert_int_equal(rec.kind, LOG_REC_GAP);
            assert_int_equal(rec.where, 5);
            assert_int_equal(rec.pos, 2);
            assert_int_equal(log_reader_next(r, &rec, NULL), 1);
            assert_int_equal(rec.pos, 3);
            assert_int_equal(rec.where, 6);
            at_end(r);
            assert_int_equal(log_reader_nmalformed(r), 1);
            assert_int_equal(log_reader_rewind(r), 0);
        }
        assert_int_equal(log_reader_rewind(r), 0);
        next_event(r, "A", 1, 1, 1);
        assert_int_equal(log_reader_header(r)->nfields, 1);
        log_reader_free(r);
    }
    /* A pipe cannot rewind. */
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(write(p[1], log, strlen(log)), (ssize_t)strlen(log));
    close(p[1]);
    log_reader *r = log_reader_open(p[0], true, "t.log", on_warn, &w, NULL);
    assert_non_null(r);
    next_event(r, "A", 1, 1, 1);
    assert_int_equal(log_reader_rewind(r), -ESPIPE);
    log_reader_free(r);
}

/* With log_reader_warn_once, a second pass stays quiet about the bad records
 * the first pass reported (the count still includes them), and a pass that
 * goes further than any earlier one reports the new ones. */
static void rewind_warn_once(void **state)
{
    (void)state;
    const char *log = "#cmon-ascii 1\n1 1 A\nbad\n2 1 A\n3 1 A x\n";
    warnings w = { 0 };
    log_reader *r = open_str(log, &w);
    log_reader_warn_once(r, true);
    next_event(r, "A", 1, 1, 0);
    next_event(r, "A", 2, 1, 0);
    assert_int_equal(w.n, 1);                   /* line 3 */
    assert_int_equal(log_reader_rewind(r), 0);
    next_event(r, "A", 1, 1, 0);
    next_event(r, "A", 2, 1, 0);
    at_end(r);                                  /* line 5 is new */
    assert_int_equal(w.n, 2);
    has_warning(&w, 1, 5, "bad value 'x' (field 4)");
    assert_int_equal(log_reader_nmalformed(r), 2);
    assert_int_equal(log_reader_rewind(r), 0);
    next_event(r, "A", 1, 1, 0);
    next_event(r, "A", 2, 1, 0);
    at_end(r);
    assert_int_equal(w.n, 2);                   /* nothing new */
    assert_int_equal(log_reader_nmalformed(r), 2);
    log_reader_free(r);
}

static void open_fd_errors(void **state)
{
    char *err = NULL;
    int fd = open("/dev/null", O_RDONLY);
    assert_null(log_reader_open(fd, true, "-", NULL, NULL, &err));
    assert_string_equal(err, "unrecognized log format (empty input)");
    free(err);
    err = NULL;
    /* A directory cannot be read. */
    fd = open("/", O_RDONLY | O_DIRECTORY);
    assert_null(log_reader_open(fd, true, "/", NULL, NULL, &err));
    assert_non_null(strstr(err, "read error"));
    free(err);
    log_reader_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(header_minimal),
        cmocka_unit_test(header_fields_kept),
        cmocka_unit_test(header_errors),
        cmocka_unit_test(overhead_lines),
        cmocka_unit_test(header_too_many_fields),
        cmocka_unit_test(header_crlf),
        cmocka_unit_test(records_basic),
        cmocka_unit_test(records_malformed),
        cmocka_unit_test(values_parse_like_strtod),
        cmocka_unit_test(values_missing_and_extra),
        cmocka_unit_test(gaps_and_comments),
        cmocka_unit_test(long_lines_skipped),
        cmocka_unit_test(long_first_record_skipped),
        cmocka_unit_test(names_interned),
        cmocka_unit_test(too_many_names),
        cmocka_unit_test(name_too_long),
        cmocka_unit_test(fast_path_agrees),
        cmocka_unit_test(name_cache_many),
        cmocka_unit_test(rewind_ascii),
        cmocka_unit_test(rewind_warn_once),
        cmocka_unit_test(open_fd_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
