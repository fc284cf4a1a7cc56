/* test_logwrite.c — the log writer: both formats read back exactly (values
 * bit for bit), binary -> ascii -> binary round trips, header cleaning,
 * the binary encoding chosen per Event (ivalues or doubles, ts_delta or ts),
 * TypeDefs with attributes, argument and write errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmonlog.pb-c.h"
#include "logread-internal.h"
#include "logwrite.h"

static int tmpfd(void)
{
    char path[] = "/tmp/test_logwrite_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    return fd;
}

static unsigned char *slurp(int fd, size_t *n)
{
    *n = (size_t)lseek(fd, 0, SEEK_END);
    unsigned char *p = malloc(*n + 1);
    assert_int_equal(pread(fd, p, *n, 0), (ssize_t)*n);
    return p;
}

static const double tricky[] = {
    0, -0.0, 1, -1, 0.1, -0.1, 1.0 / 3, 2.5, 1e-300, 5e-324, 2.2250738585072014e-308,
    1.7976931348623157e308, -1.7976931348623157e308, 123456789012345678.0, 9007199254740993.0,
    999999999999999.0, 1e15, 1e16, 4096, 0.30000000000000004, 1e22, 1e23, 3.14159,
};
#define NTRICKY (sizeof tricky / sizeof tricky[0])

static void write_sample(log_writer *w)
{
    assert_int_equal(log_writer_declare(w, "StartRead", (const char *const[]){ "tid", "size" }, 2), 0);
    assert_int_equal(log_writer_declare(w, "StartRead", NULL, 0), 0);
    assert_int_equal(log_writer_event_id(w, 0, 0, 7, (double[]){ 7, 4096 }, 2), 0);
    assert_int_equal(log_writer_event(w, "call@read", 5, -3, NULL, 0), 0);
    assert_int_equal(log_writer_gap(w, 17), 0);
    assert_int_equal(log_writer_overhead(w, -3, 41.25, 0.1), 0);
    assert_int_equal(log_writer_overhead(w, 1, 0, 1), -EINVAL);
    assert_int_equal(log_writer_overhead(w, 1, 1, -1), -EINVAL);
    assert_int_equal(log_writer_overhead(w, 1, NAN, 1), -EINVAL);
    assert_int_equal(log_writer_overhead(w, 1, 1, INFINITY), -EINVAL);
    assert_int_equal(log_writer_event(w, "tricky", INT64_MAX, INT64_MIN, tricky, NTRICKY), 0);
    assert_int_equal(log_writer_event(w, "StartRead", 1, 0, (double[]){ 1 }, 1), 0);
}

/* The sample back; with OVH the reader was asked for overhead records. */
static void check_sample(log_reader *r, bool ovh)
{
    log_record rec;
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_string_equal(rec.name, "StartRead");
    assert_int_equal(rec.ts, 0);
    assert_int_equal(rec.thread, 7);
    assert_int_equal(rec.nvalues, 2);
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_string_equal(rec.name, "call@read");
    assert_int_equal(rec.thread, -3);
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_int_equal(rec.kind, LOG_REC_GAP);
    assert_int_equal(rec.gap, 17);
    assert_int_equal(rec.pos, 2);
    if (ovh) {
        assert_int_equal(log_reader_next(r, &rec, NULL), 1);
        assert_int_equal(rec.kind, LOG_REC_OVERHEAD);
        assert_int_equal(rec.thread, -3);
        assert_true(rec.ovh_ns == 41.25 && rec.ovh_spread_ns == 0.1);
        assert_int_equal(rec.pos, 2);
    }
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_string_equal(rec.name, "tricky");
    assert_int_equal(rec.ts, INT64_MAX);
    assert_int_equal(rec.thread, INT64_MIN);
    assert_int_equal(rec.nvalues, NTRICKY);
    for (size_t i = 0; i < NTRICKY; i++)
        if (memcmp(&rec.values[i], &tricky[i], sizeof(double)) != 0)
            fail_msg("value %zu: wrote %.17g, read %.17g", i, tricky[i], rec.values[i]);
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_int_equal(rec.name_id, 0);
    assert_int_equal(log_reader_next(r, &rec, NULL), 0);
    assert_int_equal(log_reader_nmalformed(r), 0);
}

static const log_header_field sample_hdr[] = {
    { "program", "fsread" }, { "machine", "m1" }, { "pid", "99" }, { "tick-ns", "0.5" },
    { "clock", "CLOCK_MONOTONIC" }, { "start-unix-ns", "1700000000000000000" }, { "cmon-overhead-ns", "250.5 12" },
    { "owner", "ops team" },
};
#define NSAMPLE_HDR (sizeof sample_hdr / sizeof sample_hdr[0])

static void round_trip(void **state)
{
    for (int f = LOG_FORMAT_ASCII; f <= LOG_FORMAT_BIN; f++) {
        int fd = tmpfd();
        log_writer *w;
        assert_int_equal(log_writer_open(&w, fd, false, (log_format)f, sample_hdr, NSAMPLE_HDR), 0);
        write_sample(w);
        assert_int_equal(log_writer_end(w), 0);
        assert_int_equal(log_writer_event(w, "X", 1, 1, NULL, 0), -EINVAL);   /* after the end */
        assert_int_equal(log_writer_close(w), 0);
        lseek(fd, 0, SEEK_SET);
        char *err = NULL;
        log_reader *r = log_reader_open(fd, true, "t", NULL, NULL, &err);
        if (!r)
            fail_msg("%s", err);
        const log_header *h = log_reader_header(r);
        assert_int_equal(h->format, f);
        assert_true(h->tick_ns == 0.5);
        assert_int_equal(h->nfields, NSAMPLE_HDR);
        assert_true(h->overhead_ns == 250.5 && h->overhead_spread_ns == 12);
        for (size_t i = 0; i < NSAMPLE_HDR; i++) {
            assert_string_equal(h->fields[i].key, sample_hdr[i].key);
            assert_string_equal(h->fields[i].value, sample_hdr[i].value);
        }
        check_sample(r, false);
        assert_int_equal(log_reader_rewind(r), 0);
        log_reader_want_overhead(r, true);
        check_sample(r, true);
        log_reader_free(r);
    }
}

/* binary -> ascii -> binary through reader and writer keeps every event. */
static void convert_round_trip(void **state)
{
    int fd[3] = { tmpfd(), tmpfd(), tmpfd() };
    log_writer *w;
    assert_int_equal(log_writer_open(&w, fd[0], false, LOG_FORMAT_BIN, sample_hdr, NSAMPLE_HDR), 0);
    write_sample(w);
    assert_int_equal(log_writer_end(w), 0);
    assert_int_equal(log_writer_close(w), 0);
    static const log_format to[] = { LOG_FORMAT_ASCII, LOG_FORMAT_BIN };
    for (int k = 0; k < 2; k++) {
        lseek(fd[k], 0, SEEK_SET);
        log_reader *r = log_reader_open(fd[k], false, "t", NULL, NULL, NULL);
        assert_non_null(r);
        log_reader_want_overhead(r, true);
        const log_header *h = log_reader_header(r);
        assert_int_equal(log_writer_open(&w, fd[k + 1], false, to[k], h->fields, h->nfields), 0);
        log_record rec;
        while (log_reader_next(r, &rec, NULL) == 1) {
            if (rec.kind == LOG_REC_GAP)
                assert_int_equal(log_writer_gap(w, rec.gap), 0);
            else if (rec.kind == LOG_REC_OVERHEAD)
                assert_int_equal(log_writer_overhead(w, rec.thread, rec.ovh_ns, rec.ovh_spread_ns), 0);
            else
                assert_int_equal(log_writer_event(w, rec.name, rec.ts, rec.thread, rec.values, rec.nvalues), 0);
        }
        assert_int_equal(log_writer_end(w), 0);
        assert_int_equal(log_writer_close(w), 0);
        log_reader_free(r);
    }
    lseek(fd[2], 0, SEEK_SET);
    log_reader *r = log_reader_open(fd[2], false, "t", NULL, NULL, NULL);
    log_reader_want_overhead(r, true);
    check_sample(r, true);
    log_reader_free(r);
    for (int k = 0; k < 3; k++)
        close(fd[k]);
}

static void header_cleaned(void **state)
{
    static const log_header_field hf[] = {
        { "my key", "line1\nline2\r" }, { "cmon-gap", "5" }, { "", "dropped" }, { "tab", "a\tb" },
        { "pid", "not a number" },
    };
    for (int f = LOG_FORMAT_ASCII; f <= LOG_FORMAT_BIN; f++) {
        int fd = tmpfd();
        log_writer *w;
        assert_int_equal(log_writer_open(&w, fd, false, (log_format)f, hf, 5), 0);
        assert_int_equal(log_writer_event(w, "A", 1, 1, NULL, 0), 0);
        assert_int_equal(log_writer_close(w), 0);
        lseek(fd, 0, SEEK_SET);
        log_reader *r = log_reader_open(fd, true, "t", NULL, NULL, NULL);
        assert_non_null(r);
        const log_header *h = log_reader_header(r);
        if (f == LOG_FORMAT_ASCII) {
            assert_int_equal(h->nfields, 4);
            assert_string_equal(h->fields[0].key, "my_key");
            assert_string_equal(h->fields[0].value, "line1 line2");
            assert_string_equal(h->fields[1].key, "x-cmon-gap");
            assert_string_equal(h->fields[2].value, "a\tb");
            assert_string_equal(h->fields[3].key, "pid");
        } else {
            /* binary carries any text; a pid that is not a number stays an extra field */
            assert_int_equal(h->nfields, 4);
            assert_string_equal(h->fields[0].key, "my key");
            assert_string_equal(h->fields[0].value, "line1\nline2\r");
            assert_string_equal(h->fields[3].key, "pid");
            assert_string_equal(h->fields[3].value, "not a number");
        }
        log_record rec;
        assert_int_equal(log_reader_next(r, &rec, NULL), 1);
        assert_int_equal(rec.kind, LOG_REC_EVENT);
        log_reader_free(r);
    }
}

/* Binary TypeDefs carry the attribute names; End counts the events. */
static void bin_typedefs(void **state)
{
    int fd = tmpfd();
    log_writer *w;
    assert_int_equal(log_writer_open(&w, fd, false, LOG_FORMAT_BIN, NULL, 0), 0);
    assert_int_equal(log_writer_declare(w, "A", (const char *const[]){ "tid", "size" }, 2), 0);
    assert_int_equal(log_writer_declare(w, "B", NULL, 0), 1);
    assert_int_equal(log_writer_event_id(w, 1, 5, 0, NULL, 0), 0);
    assert_int_equal(log_writer_event_id(w, 0, 6, 0, NULL, 0), 0);
    assert_int_equal(log_writer_event_id(w, 0, 7, 0, NULL, 0), 0);
    assert_int_equal(log_writer_end(w), 0);
    assert_int_equal(log_writer_close(w), 0);
    size_t n;
    unsigned char *p = slurp(fd, &n), *q = p, *e = p + n;
    int kinds[16], k = 0;
    while (q < e && k < 16) {
        size_t len = *q++;   /* every frame here is short */
        Cmonlog__Record *m = cmonlog__record__unpack(NULL, len, q);
        assert_non_null(m);
        kinds[k++] = m->kind_case;
        if (m->kind_case == CMONLOG__RECORD__KIND_TYPEDEF && m->typedef_->id == 0) {
            assert_int_equal(m->typedef_->n_attrs, 2);
            assert_string_equal(m->typedef_->attrs[1], "size");
        }
        if (m->kind_case == CMONLOG__RECORD__KIND_END)
            assert_int_equal(m->end->records, 3);
        cmonlog__record__free_unpacked(m, NULL);
        q += len;
    }
    static const int want[] = { 1, 2, 3, 2, 3, 3, 5 };   /* TypeDefs just before first use */
    assert_int_equal(k, 7);
    assert_memory_equal(kinds, want, sizeof want);
    free(p);
    close(fd);
}

/* Which encoding each Event gets: ivalues when every value is an integer
 * below 2^53 in magnitude (not -0), doubles otherwise; ts_delta into a
 * regular file (but the first), ts into a pipe; --compat always doubles
 * and ts. Type 0 ("E") is left out in a regular file but for --compat,
 * type 1 ("F", every third event) never. Each reads back the same type
 * and values, bit for bit. */
static const double enc_vals[][3] = {
    { 7, 4096, -5 },                              /* ivalues, packed */
    { 1 },                                        /* ivalues, unpacked */
    { 9007199254740991.0, -9007199254740991.0 },  /* ivalues: largest exact */
    { 9007199254740992.0 },                       /* 2^53: doubles */
    { 1, 0.5 },                                   /* one non-integer: doubles */
    { -0.0 },                                     /* -0: doubles */
    { 0 },                                        /* 0: ivalues */
};
static const size_t enc_n[] = { 3, 1, 2, 1, 2, 1, 1 };
static const bool enc_int[] = { true, true, true, false, false, false, true };
#define NENC (sizeof enc_n / sizeof enc_n[0])

static void check_encoding(const unsigned char *p, size_t n, bool file, bool compat)
{
    const unsigned char *q = p, *e = p + n;
    size_t k = 0;
    int64_t prev = 0;
    while (q < e) {
        uint64_t len = 0;
        for (int sh = 0;; sh += 7) {
            len |= (uint64_t)(*q & 0x7f) << sh;
            if (!(*q++ & 0x80))
                break;
        }
        Cmonlog__Record *m = cmonlog__record__unpack(NULL, len, q);
        assert_non_null(m);
        if (m->kind_case == CMONLOG__RECORD__KIND_EVENT) {
            const Cmonlog__Event *ev = m->event;
            int64_t ts = 1000 + 10 * (int64_t)k - (k == 3 ? 500 : 0);   /* one step back */
            if (file && !compat && k > 0) {     /* the first: absolute */
                assert_false(ev->has_ts);
                assert_true(ev->has_ts_delta);
                assert_int_equal(ev->ts_delta, ts - prev);
            } else {
                assert_true(ev->has_ts);
                assert_false(ev->has_ts_delta);
                assert_int_equal(ev->ts, ts);
            }
            prev = ts;
            uint32_t type = k % 3 == 2;
            assert_int_equal(ev->type, type);
            assert_int_equal(ev->has_type, type != 0 || !file || compat);
            if (enc_int[k] && !compat) {
                assert_int_equal(ev->n_values, 0);
                assert_int_equal(ev->n_ivalues, enc_n[k]);
                for (size_t i = 0; i < enc_n[k]; i++)
                    assert_true((double)ev->ivalues[i] == enc_vals[k][i]);
            } else {
                assert_int_equal(ev->n_ivalues, 0);
                assert_int_equal(ev->n_values, enc_n[k]);
                assert_memory_equal(ev->values, enc_vals[k], enc_n[k] * sizeof(double));
            }
            k++;
        }
        cmonlog__record__free_unpacked(m, NULL);
        q += len;
    }
    assert_int_equal(k, NENC);
}

static void write_enc(log_writer *w)
{
    for (size_t k = 0; k < NENC; k++) {
        int64_t ts = 1000 + 10 * (int64_t)k - (k == 3 ? 500 : 0);
        assert_int_equal(log_writer_event(w, k % 3 == 2 ? "F" : "E", ts, 3, enc_vals[k], enc_n[k]),
                         0);
    }
}

static void read_enc(int fd)
{
    log_reader *r = log_reader_open(fd, false, "t", NULL, NULL, NULL);
    assert_non_null(r);
    log_record rec;
    for (size_t k = 0; k < NENC; k++) {
        assert_int_equal(log_reader_next(r, &rec, NULL), 1);
        assert_int_equal(rec.ts, 1000 + 10 * (int64_t)k - (k == 3 ? 500 : 0));
        assert_int_equal(rec.thread, 3);
        assert_string_equal(rec.name, k % 3 == 2 ? "F" : "E");
        assert_int_equal(rec.nvalues, enc_n[k]);
        assert_memory_equal(rec.values, enc_vals[k], enc_n[k] * sizeof(double));
    }
    assert_int_equal(log_reader_next(r, &rec, NULL), 0);
    assert_int_equal(log_reader_nmalformed(r), 0);
    log_reader_free(r);
}

static void bin_encoding(void **state)
{
    for (int compat = 0; compat <= 1; compat++) {
        /* a regular file */
        int fd = tmpfd();
        log_writer *w;
        assert_int_equal(log_writer_open(&w, fd, false, LOG_FORMAT_BIN, NULL, 0), 0);
        log_writer_set_compat(w, compat);
        write_enc(w);
        assert_int_equal(log_writer_close(w), 0);
        size_t n;
        unsigned char *p = slurp(fd, &n);
        check_encoding(p, n, true, compat);
        lseek(fd, 0, SEEK_SET);
        read_enc(fd);
        free(p);
        close(fd);
        /* a pipe (the log fits in its buffer) */
        int pp[2];
        assert_int_equal(pipe(pp), 0);
        assert_int_equal(log_writer_open(&w, pp[1], false, LOG_FORMAT_BIN, NULL, 0), 0);
        log_writer_set_compat(w, compat);
        write_enc(w);
        assert_int_equal(log_writer_close(w), 0);
        close(pp[1]);
        unsigned char buf[4096];
        ssize_t got = read(pp[0], buf, sizeof buf);
        assert_true(got > 0 && got < (ssize_t)sizeof buf);
        close(pp[0]);
        check_encoding(buf, (size_t)got, false, compat);
        fd = tmpfd();
        assert_int_equal(write(fd, buf, (size_t)got), got);
        lseek(fd, 0, SEEK_SET);
        read_enc(fd);
        close(fd);
    }
}

/* Two binary logs written one after the other into one file read with
 * right timestamps: the second log's first event carries an absolute ts
 * (the reader ignores the second Header and keeps counting deltas). */
static void bin_appended(void **state)
{
    int fd = tmpfd();
    for (int part = 0; part < 2; part++) {
        log_writer *w;
        assert_int_equal(log_writer_open(&w, fd, false, LOG_FORMAT_BIN, NULL, 0), 0);
        for (int i = 0; i < 3; i++)
            assert_int_equal(log_writer_event(w, "E", 1000 * (part ? 1 : 5) + i, 1, NULL, 0), 0);
        assert_int_equal(log_writer_close(w), 0);
    }
    lseek(fd, 0, SEEK_SET);
    log_reader *r = log_reader_open(fd, false, "t", NULL, NULL, NULL);
    assert_non_null(r);
    static const int64_t want[] = { 5000, 5001, 5002, 1000, 1001, 1002 };
    log_record rec;
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(log_reader_next(r, &rec, NULL), 1);
        assert_int_equal(rec.ts, want[i]);
    }
    log_reader_free(r);
    close(fd);
}

static void errors(void **state)
{
    int fd = tmpfd();
    log_writer *w;
    assert_int_equal(log_writer_open(&w, fd, false, (log_format)7, NULL, 0), -EINVAL);
    static const log_header_field bad_tick[] = { { "tick-ns", "0" } };
    assert_int_equal(log_writer_open(&w, fd, false, LOG_FORMAT_ASCII, bad_tick, 1), -EINVAL);
    assert_int_equal(log_writer_open(&w, fd, false, LOG_FORMAT_BIN, bad_tick, 1), -EINVAL);
    static const char *bad_overhead[] = { "x", "5", "-1 2", "0 1", "1 -1", "1 2 3", "inf 1", "1 nan" };
    for (size_t i = 0; i < sizeof bad_overhead / sizeof bad_overhead[0]; i++) {
        log_header_field f = { (char *)"cmon-overhead-ns", (char *)bad_overhead[i] };
        assert_int_equal(log_writer_open(&w, fd, false, LOG_FORMAT_ASCII, &f, 1), -EINVAL);
        assert_int_equal(log_writer_open(&w, fd, false, LOG_FORMAT_BIN, &f, 1), -EINVAL);
    }
    assert_int_equal(lseek(fd, 0, SEEK_END), 0);   /* nothing written */
    for (int f = LOG_FORMAT_ASCII; f <= LOG_FORMAT_BIN; f++) {
        assert_int_equal(log_writer_open(&w, fd, false, (log_format)f, NULL, 0), 0);
        static const char *bad[] = { "", "3a", "a-b", "foo@bar", "call@", "a b", "call@x@y" };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            assert_int_equal(log_writer_declare(w, bad[i], NULL, 0), -EINVAL);
            assert_int_equal(log_writer_event(w, bad[i], 1, 1, NULL, 0), -EINVAL);
        }
        assert_int_equal(log_writer_event(w, "A", -1, 1, NULL, 0), -EINVAL);
        assert_int_equal(log_writer_event(w, "A", 1, 1, (double[]){ NAN }, 1), -EINVAL);
        assert_int_equal(log_writer_event(w, "A", 1, 1, (double[]){ -INFINITY }, 1), -EINVAL);
        assert_int_equal(log_writer_event(w, "A", 1, 1, NULL, 1), -EINVAL);
        assert_int_equal(log_writer_event_id(w, 5, 1, 1, NULL, 0), -EINVAL);
        assert_int_equal(log_writer_close(w), 0);
    }
    close(fd);

    /* A reader that went away: -EPIPE, and it sticks. */
    signal(SIGPIPE, SIG_IGN);
    int p[2];
    assert_int_equal(pipe(p), 0);
    close(p[0]);
    assert_int_equal(log_writer_open(&w, p[1], true, LOG_FORMAT_ASCII, NULL, 0), 0);
    assert_int_equal(log_writer_flush(w), -EPIPE);
    assert_int_equal(log_writer_event(w, "A", 1, 1, NULL, 0), -EPIPE);
    assert_int_equal(log_writer_close(w), -EPIPE);
    assert_int_equal(log_writer_close(NULL), 0);
}

/* Many events through the output buffer, an event bigger than it, and one
 * bigger than a reader accepts. */
static void big_output(void **state)
{
    for (int f = LOG_FORMAT_ASCII; f <= LOG_FORMAT_BIN; f++) {
        int fd = tmpfd();
        log_writer *w;
        assert_int_equal(log_writer_open(&w, fd, false, (log_format)f, NULL, 0), 0);
        size_t nbig = 30000, huge = f == LOG_FORMAT_ASCII ? 100000 : LOG_MAX_FRAME / 8 + 1;
        double *hv = calloc(huge, sizeof *hv);
        for (size_t i = 0; i < huge; i++)
            hv[i] = 1.0 / 3;
        assert_int_equal(log_writer_event(w, "Huge", 1, 1, hv, huge), -E2BIG);
        free(hv);
        double *big = malloc(nbig * sizeof *big);
        for (size_t i = 0; i < nbig; i++)
            big[i] = (double)i / 7;
        for (int i = 0; i < 50000; i++)
            assert_int_equal(log_writer_event(w, i % 2 ? "A" : "B", i, i % 4, (double[]){ i }, 1), 0);
        assert_int_equal(log_writer_event(w, "Big", 1, 1, big, nbig), 0);
        assert_int_equal(log_writer_end(w), 0);
        assert_int_equal(log_writer_close(w), 0);
        lseek(fd, 0, SEEK_SET);
        log_reader *r = log_reader_open(fd, true, "t", NULL, NULL, NULL);
        log_record rec;
        for (int i = 0; i < 50000; i++) {
            assert_int_equal(log_reader_next(r, &rec, NULL), 1);
            assert_int_equal(rec.ts, i);
            assert_true(rec.values[0] == i);
        }
        assert_int_equal(log_reader_next(r, &rec, NULL), 1);
        assert_int_equal(rec.nvalues, nbig);
        assert_memory_equal(rec.values, big, nbig * sizeof *big);
        assert_int_equal(log_reader_next(r, &rec, NULL), 0);
        log_reader_free(r);
        free(big);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip),
        cmocka_unit_test(convert_round_trip),
        cmocka_unit_test(header_cleaned),
        cmocka_unit_test(bin_typedefs),
        cmocka_unit_test(bin_encoding),
        cmocka_unit_test(bin_appended),
        cmocka_unit_test(errors),
        cmocka_unit_test(big_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
