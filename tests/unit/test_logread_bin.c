/* test_logread_bin.c — the cmon-bin 1 reader: header, TypeDef order, ts and
 * ts_delta, gaps and End, malformed and truncated frames, frame limits, the
 * hand-written Event decoder against protobuf-c, rewind.
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

#include "cmonlog.pb-c.h"
#include "logread-internal.h"

/* --- building logs ------------------------------------------------------ */

typedef struct bytes {
    unsigned char *p;
    size_t n, cap;
} bytes;

static void put_raw(bytes *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void put_varint(bytes *b, uint64_t v)
{
    unsigned char t[10];
    size_t i = 0;
    while (v >= 0x80) {
        t[i++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    t[i++] = (unsigned char)v;
    put_raw(b, t, i);
}

/* A frame from raw Record bytes. */
static void put_frame_raw(bytes *b, const void *p, size_t n)
{
    put_varint(b, n);
    put_raw(b, p, n);
}

static void put_record(bytes *b, const Cmonlog__Record *rec)
{
    size_t n = cmonlog__record__get_packed_size(rec);
    unsigned char *tmp = malloc(n + 1);
    cmonlog__record__pack(rec, tmp);
    put_frame_raw(b, tmp, n);
    free(tmp);
}

static void put_header(bytes *b, Cmonlog__Header *h)
{
    Cmonlog__Record rec = CMONLOG__RECORD__INIT;
    rec.kind_case = CMONLOG__RECORD__KIND_HEADER;
    rec.header = h;
    put_record(b, &rec);
}

static void put_std_header(bytes *b)
{
    Cmonlog__Header h = CMONLOG__HEADER__INIT;
    h.magic = (char *)"cmon-bin";
    h.has_version = true;
    h.version = 1;
    put_header(b, &h);
}

static void put_typedef(bytes *b, bool has_id, uint32_t id, const char *name)
{
    Cmonlog__TypeDef td = CMONLOG__TYPE_DEF__INIT;
    td.has_id = has_id;
    td.id = id;
    td.name = (char *)name;
    Cmonlog__Record rec = CMONLOG__RECORD__INIT;
    rec.kind_case = CMONLOG__RECORD__KIND_TYPEDEF;
    rec.typedef_ = &td;
    put_record(b, &rec);
}

typedef struct ev {
    bool has_type;
    uint32_t type;
    bool has_thread;
    int64_t thread;
    bool has_ts;
    uint64_t ts;
    bool has_delta;
    int64_t delta;
    size_t n;
    double v[4];
} ev;

static void put_event(bytes *b, ev e)
{
    Cmonlog__Event m = CMONLOG__EVENT__INIT;
    m.has_type = e.has_type;
    m.type = e.type;
    m.has_thread = e.has_thread;
    m.thread = e.thread;
    m.has_ts = e.has_ts;
    m.ts = e.ts;
    m.has_ts_delta = e.has_delta;
    m.ts_delta = e.delta;
    m.n_values = e.n;
    m.values = e.v;
    Cmonlog__Record rec = CMONLOG__RECORD__INIT;
    rec.kind_case = CMONLOG__RECORD__KIND_EVENT;
    rec.event = &m;
    put_record(b, &rec);
}

static void put_gap(bytes *b, uint64_t count)
{
    Cmonlog__Gap g = CMONLOG__GAP__INIT;
    g.has_count = true;
    g.count = count;
    Cmonlog__Record rec = CMONLOG__RECORD__INIT;
    rec.kind_case = CMONLOG__RECORD__KIND_GAP;
    rec.gap = &g;
    put_record(b, &rec);
}

static void put_end(bytes *b)
{
    Cmonlog__End e = CMONLOG__END__INIT;
    Cmonlog__Record rec = CMONLOG__RECORD__INIT;
    rec.kind_case = CMONLOG__RECORD__KIND_END;
    rec.end = &e;
    put_record(b, &rec);
}

/* --- reading ------------------------------------------------------------ */

#define MAXW 32

typedef struct warnings {
    int n;
    uint64_t where[MAXW];
    char msg[MAXW][300];
} warnings;

static void on_warn(void *ctx, const char *logname, uint64_t where, const char *msg)
{
    warnings *w = ctx;
    if (w->n < MAXW) {
        w->where[w->n] = where;
        snprintf(w->msg[w->n], sizeof w->msg[0], "%s", msg);
    }
    w->n++;
}

static log_reader *open_bytes(const bytes *b, warnings *w)
{
    char *err = NULL;
    log_reader *r = log_reader_open_mem(b->p, b->n, "t.bin", on_warn, w, &err);
    if (!r)
        print_error("open failed: %s\n", err);
    assert_non_null(r);
    assert_int_equal(log_reader_header(r)->format, LOG_FORMAT_BIN);
    return r;
}

static void open_fails(const bytes *b, const char *want)
{
    char *err = NULL;
    assert_null(log_reader_open_mem(b->p, b->n, "t.bin", NULL, NULL, &err));
    assert_non_null(err);
    if (!strstr(err, want))
        fail_msg("error '%s' lacks '%s'", err, want);
    free(err);
}

static log_record next1(log_reader *r)
{
    log_record rec;
    char *err = NULL;
    int rc = log_reader_next(r, &rec, &err);
    if (rc != 1)
        fail_msg("next returned %d (%s)", rc, err ? err : "");
    return rec;
}

static void at_end(log_reader *r)
{
    log_record rec;
    assert_int_equal(log_reader_next(r, &rec, NULL), 0);
    assert_int_equal(log_reader_next(r, &rec, NULL), 0);
}

static void has_warning(const warnings *w, int i, uint64_t where, const char *want)
{
    if (i >= w->n)
        fail_msg("no warning %d (want '%s')", i, want);
    if (!strstr(w->msg[i], want))
        fail_msg("warning '%s' lacks '%s'", w->msg[i], want);
    if (where != UINT64_MAX)
        assert_int_equal(w->where[i], where);
}

/* --- tests -------------------------------------------------------------- */

static void header_fields(void **state)
{
    bytes b = { 0 };
    Cmonlog__Header h = CMONLOG__HEADER__INIT;
    Cmonlog__HeaderField x1 = CMONLOG__HEADER_FIELD__INIT, x2 = CMONLOG__HEADER_FIELD__INIT;
    Cmonlog__HeaderField *xs[] = { &x1, &x2 };
    x1.key = (char *)"build";
    x1.value = (char *)"1.2";
    x2.key = (char *)"novalue";
    h.magic = (char *)"cmon-bin";
    h.has_version = true;
    h.version = 1;
    h.program = (char *)"fsread";
    h.machine = (char *)"m1";
    h.has_pid = true;
    h.pid = 4242;
    h.has_tick_ns = true;
    h.tick_ns = 0.25;
    h.clock = (char *)"CLOCK_MONOTONIC";
    h.has_start_unix_ns = true;
    h.start_unix_ns = -5;
    h.has_overhead_ns = h.has_overhead_spread_ns = true;
    h.overhead_ns = 250.5;
    h.overhead_spread_ns = 0.125;
    h.n_extra = 2;
    h.extra = xs;
    put_header(&b, &h);
    warnings w = { 0 };
    log_reader *r = open_bytes(&b, &w);
    const log_header *lh = log_reader_header(r);
    assert_true(lh->tick_ns == 0.25);
    assert_true(lh->overhead_ns == 250.5 && lh->overhead_spread_ns == 0.125);
    static const char *want[][2] = {
        { "program", "fsread" }, { "machine", "m1" }, { "pid", "4242" }, { "tick-ns", "0.25" },
        { "clock", "CLOCK_MONOTONIC" }, { "start-unix-ns", "-5" }, { "cmon-overhead-ns", "250.5 0.125" },
        { "build", "1.2" }, { "novalue", "" },
    };
    assert_int_equal(lh->nfields, 9);
    for (int i = 0; i < 9; i++) {
        assert_string_equal(lh->fields[i].key, want[i][0]);
        assert_string_equal(lh->fields[i].value, want[i][1]);
    }
    at_end(r);
    assert_int_equal(w.n, 0);
    log_reader_free(r);

    /* tick_ns 0 means 1; absent fields give no entries. */
    b.n = 0;
    Cmonlog__Header h0 = CMONLOG__HEADER__INIT;
    h0.magic = (char *)"cmon-bin";
    h0.has_version = true;
    h0.version = 1;
    h0.has_tick_ns = true;
    put_header(&b, &h0);
    r = open_bytes(&b, &w);
    assert_true(log_reader_header(r)->tick_ns == 1);
    assert_true(log_reader_header(r)->overhead_ns == 0);
    assert_int_equal(log_reader_header(r)->nfields, 0);
    log_reader_free(r);
    free(b.p);
}

static void header_errors(void **state)
{
    bytes b = { 0 };
    Cmonlog__Header h = CMONLOG__HEADER__INIT;
    h.magic = (char *)"cmon-bin";
    put_header(&b, &h);   /* no version */
    open_fails(&b, "bad header: unsupported cmon-bin version 0");
    b.n = 0;
    h.has_version = true;
    h.version = 2;
    put_header(&b, &h);
    open_fails(&b, "bad header: unsupported cmon-bin version 2");
    b.n = 0;
    h.version = 1;
    h.has_tick_ns = true;
    h.tick_ns = -1;
    put_header(&b, &h);
    open_fails(&b, "bad header: bad tick-ns -1");
    b.n = 0;
    h.tick_ns = NAN;
    put_header(&b, &h);
    open_fails(&b, "bad tick-ns");
    b.n = 0;
    h.has_tick_ns = false;
    /* the writer's cost per event: mean > 0, spread >= 0, both finite; a
     * mean without a spread has spread 0, a spread without a mean is bad */
    static const struct {
        bool has_m, has_s;
        double m, s;
        const char *want;
    } oh[] = {
        { true, true, -1, 2, "bad header: bad cmon-overhead-ns -1 2 (want MEAN SPREAD, MEAN > 0, SPREAD >= 0)" },
        { true, true, 0, 2, "bad cmon-overhead-ns 0 2" },
        { true, true, 5, -1, "bad cmon-overhead-ns 5 -1" },
        { true, true, NAN, 1, "bad cmon-overhead-ns" },
        { true, true, 1, INFINITY, "bad cmon-overhead-ns" },
        { false, true, 0, 1, "bad cmon-overhead-ns (none) 1" },
    };
    for (size_t i = 0; i < sizeof oh / sizeof oh[0]; i++) {
        h.has_overhead_ns = oh[i].has_m;
        h.has_overhead_spread_ns = oh[i].has_s;
        h.overhead_ns = oh[i].m;
        h.overhead_spread_ns = oh[i].s;
        put_header(&b, &h);
        open_fails(&b, oh[i].want);
        b.n = 0;
    }
    h.has_overhead_ns = h.has_overhead_spread_ns = false;
    h.magic = (char *)"cmon-bim";
    put_header(&b, &h);
    open_fails(&b, "unrecognized log format");
    b.n = 0;
    h.magic = NULL;
    put_header(&b, &h);
    open_fails(&b, "unrecognized log format");
    /* First record not a Header. */
    b.n = 0;
    put_event(&b, (ev){ .has_type = true, .type = 1 });
    open_fails(&b, "unrecognized log format");
    b.n = 0;
    put_gap(&b, 1);
    open_fails(&b, "unrecognized log format");
    /* Garbage, a truncated header, an absurd first length, an empty frame. */
    static const struct {
        const char *s;
        size_t n;
    } junk[] = {
        { "\x05hello", 6 }, { "\x0a\x0a\x08", 3 }, { "\xff\xff\xff\xff\x7f\x0a", 6 },
        { "\x00", 1 }, { "\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80", 11 }, { "\x02\x0a\x00", 3 },
        { "\x03\x0a\x01\xff", 4 }, { "\x0e\x0a\x0c\x0a\x08" "cmon-bin\x10", 14 },
    };
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        b.n = 0;
        put_raw(&b, junk[i].s, junk[i].n);
        open_fails(&b, "unrecognized log format");
    }
    free(b.p);
}

static void typedef_order_and_ts(void **state)
{
    bytes b = { 0 };
    uint64_t off[16];
    int k = 0;
    put_std_header(&b);
    off[k++] = b.n;
    put_event(&b, (ev){ .has_type = true, .type = 5, .has_ts = true, .ts = 50 });   /* before its TypeDef */
    put_typedef(&b, true, 5, "StartRead");
    put_typedef(&b, true, 4000000000u, "call@read");
    off[k++] = b.n;
    put_event(&b, (ev){ .has_type = true, .type = 5, .has_thread = true, .thread = -7,
                        .has_ts = true, .ts = 100, .n = 2, .v = { 7, 4096 } });
    off[k++] = b.n;
    put_event(&b, (ev){ .has_type = true, .type = 4000000000u, .has_delta = true, .delta = 5 });
    off[k++] = b.n;
    put_event(&b, (ev){ .has_type = true, .type = 5 });   /* no ts, no delta: same ts */
    off[k++] = b.n;
    put_event(&b, (ev){ .has_type = true, .type = 5, .has_delta = true, .delta = -200 });
    off[k++] = b.n;
    put_event(&b, (ev){ .has_type = true, .type = 5, .has_ts = true, .ts = (uint64_t)INT64_MAX + 1 });
    off[k++] = b.n;
    put_event(&b, (ev){ .has_ts = true, .ts = 1 });   /* no type: type 0, not defined yet */
    off[k++] = b.n;
    put_event(&b, (ev){ .has_type = true, .type = 5, .has_delta = true, .delta = 10 });
    off[k++] = b.n;
    put_event(&b, (ev){ .has_type = true, .type = 5, .n = 2, .v = { 1, INFINITY } });
    put_typedef(&b, true, 5, "EndRead");   /* redefinition */
    off[k++] = b.n;
    put_event(&b, (ev){ .has_type = true, .type = 5, .has_ts = true, .ts = INT64_MAX });
    put_typedef(&b, true, 0, "Zero");
    off[k++] = b.n;
    put_event(&b, (ev){ .has_ts = true, .ts = 7 });   /* no type: type 0 */

    for (int fast = 1; fast >= 0; fast--) {
        warnings w = { 0 };
        log_reader *r = open_bytes(&b, &w);
        logr_set_fastpath(r, fast);
        log_record rec = next1(r);
        assert_string_equal(rec.name, "StartRead");
        assert_int_equal(rec.pos, 2);
        assert_int_equal(rec.where, off[1]);
        assert_int_equal(rec.ts, 100);
        assert_int_equal(rec.thread, -7);
        assert_int_equal(rec.nvalues, 2);
        assert_true(rec.values[0] == 7 && rec.values[1] == 4096);
        rec = next1(r);
        assert_string_equal(rec.name, "call@read");
        assert_int_equal(rec.ts, 105);
        assert_int_equal(rec.thread, 0);
        assert_int_equal(rec.pos, 3);
        rec = next1(r);
        assert_string_equal(rec.name, "StartRead");
        assert_int_equal(rec.ts, 105);
        assert_int_equal(rec.pos, 4);
        rec = next1(r);   /* deltas count from the last timestamp seen, even on a bad event */
        assert_int_equal(rec.ts, 11);
        assert_int_equal(rec.pos, 8);
        rec = next1(r);
        assert_string_equal(rec.name, "EndRead");
        assert_int_equal(rec.ts, INT64_MAX);
        assert_int_equal(rec.pos, 10);
        rec = next1(r);
        assert_string_equal(rec.name, "Zero");
        assert_int_equal(rec.ts, 7);
        assert_int_equal(rec.where, off[10]);
        at_end(r);
        assert_int_equal(w.n, 5);
        has_warning(&w, 0, off[0], "event of undefined type id 5");
        has_warning(&w, 1, off[4], "out of range");
        has_warning(&w, 2, off[5], "timestamp 9223372036854775808 out of range");
        has_warning(&w, 3, off[6], "event of undefined type id 0");
        has_warning(&w, 4, off[8], "value 2 is not a finite number");
        assert_int_equal(log_reader_nnames(r), 4);
        assert_int_equal(log_reader_nmalformed(r), 5);
        assert_int_equal(log_reader_nrecords(r), 6);
        log_reader_free(r);
    }
    free(b.p);
}

static void typedef_errors(void **state)
{
    bytes b = { 0 };
    put_std_header(&b);
    put_typedef(&b, false, 0, "A");
    put_typedef(&b, true, 1, NULL);
    put_typedef(&b, true, 2, "3abc");
    put_typedef(&b, true, 3, "foo@bar");
    put_typedef(&b, true, 4, "");
    put_event(&b, (ev){ .has_type = true, .type = 2 });
    warnings w = { 0 };
    log_reader *r = open_bytes(&b, &w);
    at_end(r);
    assert_int_equal(w.n, 6);
    has_warning(&w, 0, UINT64_MAX, "TypeDef without an id");
    has_warning(&w, 1, UINT64_MAX, "TypeDef without a name");
    has_warning(&w, 2, UINT64_MAX, "TypeDef 2: bad event name '3abc'");
    has_warning(&w, 3, UINT64_MAX, "TypeDef 3: bad event name 'foo@bar'");
    has_warning(&w, 4, UINT64_MAX, "TypeDef 4: bad event name ''");
    has_warning(&w, 5, UINT64_MAX, "undefined type id 2");
    log_reader_free(r);
    free(b.p);
}

/* TypeDef ids above the direct-mapped range are limited too. */
static void too_many_type_ids(void **state)
{
    bytes b = { 0 };
    put_std_header(&b);
    for (uint32_t i = 0; i <= LOG_MAX_TYPES; i++)
        put_typedef(&b, true, LOG_SMALL_TYPES + i * 7, "A");
    put_typedef(&b, true, LOG_SMALL_TYPES, "B");   /* redefining a known id still works */
    put_event(&b, (ev){ .has_type = true, .type = LOG_SMALL_TYPES, .has_ts = true, .ts = 1 });
    put_event(&b, (ev){ .has_type = true, .type = LOG_SMALL_TYPES + 7 * (LOG_MAX_TYPES - 1) });
    put_event(&b, (ev){ .has_type = true, .type = LOG_SMALL_TYPES + 7 * LOG_MAX_TYPES });
    warnings w = { 0 };
    log_reader *r = open_bytes(&b, &w);
    assert_string_equal(next1(r).name, "B");
    assert_string_equal(next1(r).name, "A");
    at_end(r);
    assert_int_equal(w.n, 2);
    has_warning(&w, 0, UINT64_MAX, "too many type ids");
    has_warning(&w, 1, UINT64_MAX, "undefined type id");
    log_reader_free(r);
    free(b.p);
}

static void gaps_end_and_odd_records(void **state)
{
    bytes b = { 0 };
    put_std_header(&b);
    put_gap(&b, 3);
    put_typedef(&b, true, 0, "A");
    put_event(&b, (ev){ .has_type = true, .type = 0, .has_ts = true, .ts = 9 });
    uint64_t bad1 = b.n;
    put_frame_raw(&b, "\x1a\x05\x08", 3);        /* an Event that does not unpack */
    uint64_t bad2 = b.n;
    put_frame_raw(&b, "\xff\xff", 2);            /* not a Record at all */
    uint64_t empty = b.n;
    put_frame_raw(&b, "", 0);                    /* a Record with no kind */
    uint64_t hdr = b.n;
    put_std_header(&b);                          /* a second Header */
    uint64_t ok = b.n;
    put_event(&b, (ev){ .has_type = true, .type = 0, .has_ts = true, .ts = 10 });
    put_gap(&b, 0);
    put_end(&b);
    put_raw(&b, "garbage after the end", 21);
    warnings w = { 0 };
    log_reader *r = open_bytes(&b, &w);
    log_record rec = next1(r);
    assert_int_equal(rec.kind, LOG_REC_GAP);
    assert_int_equal(rec.gap, 3);
    assert_int_equal(rec.pos, 0);
    rec = next1(r);
    assert_int_equal(rec.pos, 1);
    rec = next1(r);
    assert_int_equal(rec.pos, 3);   /* the broken Event frame counts */
    assert_int_equal(rec.where, ok);
    assert_int_equal(rec.ts, 10);
    rec = next1(r);
    assert_int_equal(rec.kind, LOG_REC_GAP);
    assert_int_equal(rec.pos, 3);
    assert_int_equal(rec.ts, 10);
    at_end(r);
    assert_int_equal(w.n, 4);
    has_warning(&w, 0, bad1, "frame of 3 bytes is not a valid Record");
    has_warning(&w, 1, bad2, "frame of 2 bytes is not a valid Record");
    has_warning(&w, 2, empty, "record of unknown kind");
    has_warning(&w, 3, hdr, "Header record after the start");
    log_reader_free(r);
    free(b.p);
}

static void put_overhead(bytes *b, bool has_thread, int64_t thread, bool has_mean, double mean,
                         bool has_spread, double spread)
{
    Cmonlog__Overhead o = CMONLOG__OVERHEAD__INIT;
    o.has_thread = has_thread;
    o.thread = thread;
    o.has_overhead_ns = has_mean;
    o.overhead_ns = mean;
    o.has_overhead_spread_ns = has_spread;
    o.overhead_spread_ns = spread;
    Cmonlog__Record rec = CMONLOG__RECORD__INIT;
    rec.kind_case = CMONLOG__RECORD__KIND_OVERHEAD;
    rec.overhead = &o;
    put_record(b, &rec);
}

/* Overhead records (a thread's cost per event): skipped silently unless
 * the reader wants them; then returned in place, the bad ones reported. */
static void overhead_records(void **state)
{
    bytes b = { 0 };
    put_std_header(&b);
    put_overhead(&b, true, 5, true, 40.5, true, 2);     /* before any event */
    put_typedef(&b, true, 0, "A");
    put_event(&b, (ev){ .has_type = true, .type = 0, .has_thread = true, .thread = 5, .has_ts = true, .ts = 9 });
    uint64_t bad1 = b.n;
    put_overhead(&b, false, 0, true, 1, true, 0);        /* no thread */
    uint64_t bad2 = b.n;
    put_overhead(&b, true, 5, true, 0, true, 0);         /* mean not > 0 */
    uint64_t bad3 = b.n;
    put_overhead(&b, true, 5, true, 3, true, -1);        /* negative spread */
    uint64_t bad4 = b.n;
    put_overhead(&b, true, 5, true, INFINITY, true, 0);  /* not finite */
    uint64_t ok = b.n;
    put_overhead(&b, true, -2, true, 7, false, 0);       /* spread absent: 0 */
    put_event(&b, (ev){ .has_type = true, .type = 0, .has_ts = true, .ts = 10 });
    for (int want = 0; want <= 1; want++) {
        warnings w = { 0 };
        log_reader *r = open_bytes(&b, &w);
        log_reader_want_overhead(r, want);
        log_record rec;
        if (want) {
            rec = next1(r);
            assert_int_equal(rec.kind, LOG_REC_OVERHEAD);
            assert_int_equal(rec.thread, 5);
            assert_true(rec.ovh_ns == 40.5 && rec.ovh_spread_ns == 2);
            assert_int_equal(rec.pos, 0);
        }
        rec = next1(r);
        assert_int_equal(rec.kind, LOG_REC_EVENT);
        assert_int_equal(rec.ts, 9);
        if (want) {
            rec = next1(r);
            assert_int_equal(rec.kind, LOG_REC_OVERHEAD);
            assert_int_equal(rec.thread, -2);
            assert_true(rec.ovh_ns == 7 && rec.ovh_spread_ns == 0);
            assert_int_equal(rec.pos, 1);
            assert_int_equal(rec.where, ok);
            assert_int_equal(rec.ts, 9);
        }
        rec = next1(r);
        assert_int_equal(rec.kind, LOG_REC_EVENT);
        assert_int_equal(rec.pos, 2);
        at_end(r);
        assert_int_equal(log_reader_nrecords(r), 2);
        assert_int_equal(w.n, want ? 4 : 0);
        if (want) {
            has_warning(&w, 0, bad1, "bad Overhead record without a thread");
            has_warning(&w, 1, bad2, "bad Overhead record (want overhead_ns > 0, overhead_spread_ns >= 0) 0 0");
            has_warning(&w, 2, bad3, "bad Overhead record (want overhead_ns > 0, overhead_spread_ns >= 0) 3 -1");
            has_warning(&w, 3, bad4, "bad Overhead record");
        }
        log_reader_free(r);
    }
    free(b.p);
}

/* Cutting the log anywhere inside the last frame loses just that frame. */
static void truncated_frames(void **state)
{
    bytes b = { 0 };
    put_std_header(&b);
    put_typedef(&b, true, 1, "A");
    put_event(&b, (ev){ .has_type = true, .type = 1, .has_ts = true, .ts = 1 });
    size_t last = b.n;
    /* 200 values: the frame length needs a 2-byte varint. */
    Cmonlog__Event m = CMONLOG__EVENT__INIT;
    double vals[200] = { 0 };
    m.has_type = true;
    m.type = 1;
    m.n_values = 200;
    m.values = vals;
    Cmonlog__Record rec = CMONLOG__RECORD__INIT;
    rec.kind_case = CMONLOG__RECORD__KIND_EVENT;
    rec.event = &m;
    put_record(&b, &rec);
    for (size_t cut = last; cut <= b.n; cut++) {
        bytes c = { b.p, cut, cut };
        warnings w = { 0 };
        log_reader *r = open_bytes(&c, &w);
        next1(r);
        if (cut == b.n)
            assert_int_equal(next1(r).nvalues, 200);
        at_end(r);
        assert_int_equal(w.n, cut == last || cut == b.n ? 0 : 1);
        if (w.n)
            has_warning(&w, 0, last, "truncated frame at end of log");
        log_reader_free(r);
    }
    free(b.p);
}

static void frame_limits(void **state)
{
    bytes b = { 0 };
    put_std_header(&b);
    size_t at = b.n;
    put_varint(&b, (uint64_t)LOG_MAX_FRAME + 1);
    put_raw(&b, "\x1a", 1);
    log_reader *r = open_bytes(&b, &(warnings){ 0 });
    log_record rec;
    char *err = NULL;
    assert_int_equal(log_reader_next(r, &rec, &err), -EBADMSG);
    char want[100];
    snprintf(want, sizeof want, "frame at byte %zu is longer than the limit", at);
    assert_non_null(strstr(err, want));
    free(err);
    log_reader_free(r);

    b.n = at;
    put_raw(&b, "\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80", 11);
    r = open_bytes(&b, &(warnings){ 0 });
    err = NULL;
    assert_int_equal(log_reader_next(r, &rec, &err), -EBADMSG);
    assert_non_null(strstr(err, "bad frame length at byte"));
    free(err);
    log_reader_free(r);
    free(b.p);
}

/* Frames in unusual but valid (or invalid) encodings: the fast decoder must
 * agree with protobuf-c or decline. */
/* Event.ivalues: integers read as the doubles they stand for, packed or
 * not, on the fast path and through protobuf-c alike; the old doubles still
 * read as before; an Event with both kinds is skipped with a warning, and
 * later deltas count from its timestamp. */
static void ivalues_read(void **state)
{
    for (int fast = 1; fast >= 0; fast--) {
        bytes b = { 0 };
        put_std_header(&b);
        put_typedef(&b, true, 1, "A");
        /* ts 5, ivalues 7 4096 -3 packed */
        put_frame_raw(&b, "\x1a\x0a\x08\x01\x18\x05\x32\x04\x0e\x80\x40\x05", 12);
        /* ts_delta +2, ivalues -1 unpacked, thread 9 */
        put_frame_raw(&b, "\x1a\x08\x08\x01\x10\x09\x20\x04\x30\x01", 10);
        /* ts_delta +1, values 1.0 and ivalues 1: both kinds */
        put_frame_raw(&b, "\x1a\x10\x08\x01\x20\x02\x2a\x08\x00\x00\x00\x00\x00\x00\xf0\x3f\x30\x02", 18);
        size_t both = b.n - 19;
        /* ts_delta +1, values 0.5 (old encoding) */
        put_frame_raw(&b, "\x1a\x0e\x08\x01\x20\x02\x2a\x08\x00\x00\x00\x00\x00\x00\xe0\x3f", 16);
        warnings w = { 0 };
        log_reader *r = open_bytes(&b, &w);
        logr_set_fastpath(r, fast);
        log_record rec = next1(r);
        assert_int_equal(rec.ts, 5);
        assert_int_equal(rec.nvalues, 3);
        assert_true(rec.values[0] == 7 && rec.values[1] == 4096 && rec.values[2] == -3);
        rec = next1(r);
        assert_int_equal(rec.ts, 7);
        assert_int_equal(rec.thread, 9);
        assert_int_equal(rec.nvalues, 1);
        assert_true(rec.values[0] == -1);
        rec = next1(r);
        assert_int_equal(rec.ts, 9);
        assert_int_equal(rec.pos, 4);
        assert_int_equal(rec.nvalues, 1);
        assert_true(rec.values[0] == 0.5);
        at_end(r);
        assert_int_equal(w.n, 1);
        has_warning(&w, 0, both, "event with both values and ivalues");
        log_reader_free(r);
        free(b.p);
    }
}

static void fast_path_agrees(void **state)
{
    static const struct {
        const char *s;
        size_t n;
        int fast;       /* 1: the fast decoder takes it */
    } frames[] = {
        { "\x1a\x00", 2, 1 },
        { "\x1a\x02\x08\x01", 4, 1 },
        { "\x1a\x04\x10\x03\x20\x05", 6, 1 },                           /* no type: type 0 */
        { "\x1a\x04\x08\x01\x08\x02", 6, 0 },                           /* repeated type */
        { "\x1a\x06\x08\x81\x80\x80\x80\x00", 8, 1 },                   /* non-minimal varint */
        { "\x1a\x06\x08\x80\x80\x80\x80\x10", 8, 0 },                   /* type above 32 bits */
        { "\x1a\x0b\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 13, 1 }, /* thread -1 */
        { "\x1a\x0b\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 13, 0 }, /* odd 10th byte */
        { "\x1a\x0c\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 14, 0 }, /* 11 bytes */
        { "\x1a\x04\x08\x01\x20\x03", 6, 1 },                           /* ts_delta -2 */
        { "\x1a\x04\x08\x01\x30\x01", 6, 1 },                           /* ivalues -1, unpacked */
        { "\x1a\x06\x08\x01\x32\x02\x02\x03", 8, 1 },                   /* ivalues 1 -2, packed */
        { "\x1a\x09\x08\x01\x30\x04\x32\x01\x05\x30\x06", 11, 1 },     /* unpacked, packed, unpacked */
        { "\x1a\x04\x08\x01\x32\x00", 6, 1 },                           /* empty packed ivalues */
        { "\x1a\x05\x08\x01\x32\x01\x80", 7, 0 },                       /* varint cut by its block */
        { "\x1a\x06\x08\x01\x32\x02\x80\x01", 8, 1 },                   /* ivalues 64 */
        { "\x1a\x0e\x08\x01\x32\x0a\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01", 16, 1 }, /* INT64_MAX */
        { "\x1a\x0d\x08\x01\x30\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x03", 15, 0 }, /* odd 10th byte */
        { "\x1a\x0e\x08\x01\x2a\x08\x00\x00\x00\x00\x00\x00\xf0\x3f\x30\x02", 16, 0 }, /* both kinds */
        { "\x1a\x06\x30\x02\x08\x01\x30\x02", 8, 0 },                   /* type after ivalues */
        { "\x1a\x04\x08\x01\x38\x01", 6, 0 },                           /* unknown field 7 */
        { "\x1a\x04\x08\x01\x35\x01", 6, 0 },                           /* ivalues, wrong wire type */
        { "\x1a\x15\x08\x01\x32\x11\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01", 23, 0 }, /* 17 ivalues */
        { "\x1a\x14\x08\x01\x32\x10\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01", 22, 1 }, /* 16 ivalues */
        { "\x1a\x0b\x08\x01\x29\x00\x00\x00\x00\x00\x00\xf0\x3f", 13, 0 }, /* unpacked double */
        { "\x1a\x0c\x08\x01\x2a\x08\x00\x00\x00\x00\x00\x00\xf0\x3f", 14, 1 }, /* packed 1.0 */
        { "\x1a\x0b\x08\x01\x2a\x07\x00\x00\x00\x00\x00\x00\xf0", 13, 0 }, /* 7 bytes */
        { "\x1a\x04\x08\x01\x2a\x00", 6, 1 },                           /* empty packed */
        { "\x1a\x03\x08\x01", 4, 0 },                                   /* length past the end */
        { "\x1a\x01\x08\x01", 4, 0 },                                   /* length short */
        { "\x1a\x02\x08\x01\x0a\x00", 6, 0 },                           /* a second field */
        { "\x1a\x02\x0a\x00", 4, 0 },                                   /* wrong wire type */
        { "\x1a\x03\x88\x01\x01", 5, 0 },                               /* 2-byte tag */
        { "\x1a\x02\x00\x01", 4, 0 },                                   /* field 0 */
        { "\x1a\x03\x18\x80\x01", 5, 1 },                               /* ts 128 */
        { "\x1a\x84\x80\x80\x80\x00\x08\x01\x18\x05", 10, 1 },    /* 5-byte Event length */
        { "\x1a\x84\x80\x80\x80\x80\x00\x08\x01\x18\x05", 11, 0 }, /* 6-byte Event length */
        { "\x1a\x80\x80\x80\x80\x80\x00", 7, 0 },                    /* 6-byte length 0 */
        { "\x1a\x06\x2a\x80\x80\x80\x80\x00", 8, 1 },                /* 5-byte packed length */
        { "\x1a\x07\x2a\x80\x80\x80\x80\x80\x00", 9, 0 },            /* 6-byte packed length */
    };
    for (size_t i = 0; i < sizeof frames / sizeof frames[0]; i++) {
        logbin_event e;
        double ivals[LOGBIN_FAST_IVALUES];
        const unsigned char *p = (const unsigned char *)frames[i].s;
        if (logbin_decode_fast(p, frames[i].n, &e, ivals) != frames[i].fast)
            fail_msg("frame %zu: fast decoder %s", i, frames[i].fast ? "declined" : "accepted");
        assert_int_equal(logbin_check_fast(p, frames[i].n), 0);
    }
    /* The same log read with and without the fast path gives the same records. */
    bytes b = { 0 };
    put_std_header(&b);
    put_typedef(&b, true, 0, "Z");
    put_typedef(&b, true, 1, "A");
    put_typedef(&b, true, 2, "B");
    for (size_t i = 0; i < sizeof frames / sizeof frames[0]; i++)
        put_frame_raw(&b, frames[i].s, frames[i].n);
    for (int i = 0; i < 100; i++)
        put_event(&b, (ev){ .has_type = i % 7 != 0, .type = 1 + i % 2, .has_thread = i % 3 != 0,
                            .thread = i * 1000003 - 50000, .has_ts = i % 4 != 0, .ts = (uint64_t)i * i,
                            .has_delta = i % 5 == 0, .delta = i - 40, .n = (size_t)i % 5,
                            .v = { i, -i, i * 0.5, 1e300 } });
    warnings w[2] = { 0 };
    log_reader *r[2] = { open_bytes(&b, &w[0]), open_bytes(&b, &w[1]) };
    logr_set_fastpath(r[1], false);
    int n = 0;
    for (;; n++) {
        log_record a, c;
        int ra = log_reader_next(r[0], &a, NULL), rc = log_reader_next(r[1], &c, NULL);
        assert_int_equal(ra, rc);
        if (ra != 1)
            break;
        assert_int_equal(a.kind, c.kind);
        assert_int_equal(a.pos, c.pos);
        assert_int_equal(a.where, c.where);
        assert_int_equal(a.ts, c.ts);
        assert_int_equal(a.thread, c.thread);
        assert_int_equal(a.name_id, c.name_id);
        assert_int_equal(a.nvalues, c.nvalues);
        assert_memory_equal(a.values, c.values, a.nvalues * sizeof(double));
    }
    assert_true(n > 100);
    assert_int_equal(w[0].n, w[1].n);
    for (int i = 0; i < w[0].n && i < MAXW; i++) {
        assert_int_equal(w[0].where[i], w[1].where[i]);
        assert_string_equal(w[0].msg[i], w[1].msg[i]);
    }
    log_reader_free(r[0]);
    log_reader_free(r[1]);
    free(b.p);
}

/* Regression (fuzz_log_bin): protobuf-c rejects a length prefix of more
 * than 5 bytes, whatever its value, but the fast decoder took one, so an
 * invalid frame was read as an Event on the fast path only. */
static void fast_path_long_length_prefix(void **state)
{
    static const struct {
        const char *s;
        size_t n;
    } frames[] = {
        { "\x1a\x84\x80\x80\x80\x80\x00\x08\x01\x18\x05", 11 },     /* Event length */
        { "\x1a\x09\x08\x01\x2a\x80\x80\x80\x80\x80\x00", 11 },     /* packed values length */
        { "\x1a\x80\x80\x80\x80\x80\x80\x80\x80\x00", 10 },           /* 9 bytes, an empty Event */
    };
    for (size_t i = 0; i < sizeof frames / sizeof frames[0]; i++) {
        const unsigned char *p = (const unsigned char *)frames[i].s;
        logbin_event e;
        double ivals[LOGBIN_FAST_IVALUES];
        assert_int_equal(logbin_decode_fast(p, frames[i].n, &e, ivals), 0);
        assert_int_equal(logbin_check_fast(p, frames[i].n), 0);
        bytes b = { 0 };
        put_std_header(&b);
        put_typedef(&b, true, 1, "A");
        uint64_t bad = b.n;
        put_frame_raw(&b, p, frames[i].n);
        put_event(&b, (ev){ .has_type = true, .type = 1, .has_ts = true, .ts = 7 });
        for (int fast = 0; fast <= 1; fast++) {
            warnings w = { 0 };
            log_reader *r = open_bytes(&b, &w);
            logr_set_fastpath(r, fast);
            log_record rec = next1(r);
            assert_int_equal(rec.ts, 7);
            assert_int_equal(rec.pos, 2);   /* the bad frame still counts as an event */
            at_end(r);
            assert_int_equal(w.n, 1);
            has_warning(&w, 0, bad, "is not a valid Record");
            log_reader_free(r);
        }
        free(b.p);
    }
}

static void rewind_bin(void **state)
{
    bytes b = { 0 };
    put_std_header(&b);
    put_event(&b, (ev){ .has_type = true, .type = 1, .has_ts = true, .ts = 1 });   /* undefined yet */
    put_typedef(&b, true, 1, "A");
    put_event(&b, (ev){ .has_type = true, .type = 1, .has_delta = true, .delta = 4 });
    char path[] = "/tmp/test_logread_bin_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    assert_int_equal(write(fd, b.p, b.n), (ssize_t)b.n);
    lseek(fd, 0, SEEK_SET);
    warnings w = { 0 };
    log_reader *rs[2] = { open_bytes(&b, &w), log_reader_open(fd, true, "t.bin", on_warn, &w, NULL) };
    for (int k = 0; k < 2; k++) {
        for (int pass = 0; pass < 2; pass++) {
            w.n = 0;
            log_record rec = next1(rs[k]);
            assert_int_equal(rec.pos, 2);
            assert_int_equal(rec.ts, 5);
            at_end(rs[k]);
            /* After rewinding, type 1 is undefined again at the first event. */
            assert_int_equal(w.n, 1);
            assert_int_equal(log_reader_rewind(rs[k]), 0);
        }
        log_reader_free(rs[k]);
    }
    free(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(header_fields),
        cmocka_unit_test(header_errors),
        cmocka_unit_test(typedef_order_and_ts),
        cmocka_unit_test(typedef_errors),
        cmocka_unit_test(too_many_type_ids),
        cmocka_unit_test(gaps_end_and_odd_records),
        cmocka_unit_test(overhead_records),
        cmocka_unit_test(truncated_frames),
        cmocka_unit_test(frame_limits),
        cmocka_unit_test(ivalues_read),
        cmocka_unit_test(fast_path_agrees),
        cmocka_unit_test(fast_path_long_length_prefix),
        cmocka_unit_test(rewind_bin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
