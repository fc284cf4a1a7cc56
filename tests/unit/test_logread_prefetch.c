/* test_logread_prefetch.c — reading ahead on a second thread
 * (logread_prefetch.c) gives what reading directly gives: the same records,
 * and each warning of a malformed record delivered just before the record
 * that followed it in the log, whatever the batch size, with and without a
 * hand-back to direct reading, and through the inline window
 * (log_reader_next_ref) that hands out a batch's records up to its next
 * warning. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "logread-internal.h"

#define NLINES 5000

/* One thing the reader said, in order: a record (its pos, ts, thread, and
 * an event's name and first value or a gap marker's count) or a warning
 * (its line). */
typedef struct said {
    int warning;
    uint64_t pos, where;
    int64_t ts, thread;
    double v0;
    char name[16];
} said;

typedef struct transcript {
    said *s;
    size_t n;
    size_t gaps;            /* gap markers among them */
} transcript;

static void on_warn(void *ctx, const char *logname, uint64_t where, const char *msg)
{
    (void)logname;
    (void)msg;
    transcript *t = ctx;
    t->s[t->n++] = (said){ .warning = 1, .where = where };
}

/* An ascii log with malformed lines here and there: one alone, runs of
 * them, one right after the header, and two at the end; and gap markers,
 * whose count shares its bytes with an event's name and values
 * (logread.h). */
static char *make_log(size_t *len)
{
    size_t cap = 64 * NLINES + 256, n = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    n += (size_t)snprintf(s + n, cap - n, "#cmon-ascii 1\n#program t\n");
    n += (size_t)snprintf(s + n, cap - n, "not a record\n");
    for (int i = 0; i < NLINES; i++) {
        if (i % 37 == 5 || (i > 1000 && i < 1010) || i % 1024 == 1023)
            n += (size_t)snprintf(s + n, cap - n, "%d x\n", i);   /* no name: malformed */
        n += (size_t)snprintf(s + n, cap - n, "%d %d %s %d\n", 1000 + i, i % 3, i % 2 ? "A" : "B", i);
        if (i % 250 == 7)
            n += (size_t)snprintf(s + n, cap - n, "#cmon-gap %d\n", 3 + i);
    }
    n += (size_t)snprintf(s + n, cap - n, "bad\nbad\n");
    *len = n;
    return s;
}

/* The read-ahead thread's tuning for read_all (NULL: the defaults). */
static const log_prefetch_tuning *tuning;

static void read_all(const char *log, size_t len, int prefetch, transcript *t)
{
    char *err = NULL;
    t->n = 0;
    log_reader *r = log_reader_open_mem(log, len, "t.log", on_warn, t, &err);
    assert_non_null(r);
    log_reader_prefetch_tune(r, tuning);
    if (prefetch)
        assert_int_equal(log_reader_prefetch(r, true), 0);
    for (int pass = 0; pass < 2; pass++) {      /* and again after a rewind */
        const log_record *rec;
        int rc;
        while ((rc = log_reader_next_ref(r, &rec, &err)) == 1) {
            said *x = &t->s[t->n++];
            *x = (said){ .pos = rec->pos, .where = rec->where, .ts = rec->ts, .thread = rec->thread };
            if (rec->kind == LOG_REC_GAP) {
                x->v0 = (double)rec->gap;
                snprintf(x->name, sizeof x->name, "(gap)");
                t->gaps++;
            } else {
                x->v0 = rec->nvalues ? rec->values[0] : -1;
                snprintf(x->name, sizeof x->name, "%s", rec->name);
            }
        }
        assert_int_equal(rc, 0);
        if (pass == 0)
            assert_int_equal(log_reader_rewind(r), 0);
    }
    log_reader_free(r);
}

static void same_as_direct(const char *batch, const char *handoff, const char *spin)
{
    size_t len;
    char *log = make_log(&len);
    transcript want = { calloc(4 * NLINES, sizeof(said)), 0, 0 }, got = { calloc(4 * NLINES, sizeof(said)), 0, 0 };
    assert_true(want.s && got.s);
    read_all(log, len, 0, &want);
    log_prefetch_tuning t = log_prefetch_tuning_parse(batch, spin, handoff);
    tuning = &t;
    read_all(log, len, 1, &got);
    tuning = NULL;
    assert_true(want.n > 2 * NLINES);
    assert_true(want.gaps >= 20);
    assert_int_equal(got.n, want.n);
    for (size_t i = 0; i < want.n; i++) {
        const said *a = &want.s[i], *b = &got.s[i];
        if (a->warning != b->warning || a->where != b->where || a->pos != b->pos || a->ts != b->ts ||
            a->thread != b->thread || a->v0 != b->v0 || strcmp(a->name, b->name) != 0)
            fail_msg("batch %s: item %zu differs: %s at %llu, read ahead %s at %llu", batch, i,
                     a->warning ? "warning" : "record", (unsigned long long)a->where,
                     b->warning ? "warning" : "record", (unsigned long long)b->where);
    }
    free(want.s);
    free(got.s);
    free(log);
}

static void default_batches(void **state)
{
    (void)state;
    same_as_direct("1024", "0", NULL);
}

static void small_batches(void **state)
{
    (void)state;
    static const char *sizes[] = { "1", "2", "3", "7", "37", "100" };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        same_as_direct(sizes[i], "0", "0");
    /* a few polls, then sleep: both ways of waiting in one run */
    same_as_direct("3", "0", "5");
    same_as_direct("37", "0", "70");
}

static void handed_back(void **state)
{
    (void)state;
    same_as_direct("7", "3", NULL);
    same_as_direct("1024", "1", "0");
}

/* The timed decision (no handoff in the tuning): an engine that waits
 * for batches three quarters of the time over batches 2 to 18 asks for the
 * reading back; one that the reader waits for does not. What is read is
 * the same either way. (The two cases are far from the threshold: an
 * engine doing nothing waits nearly all the time; one sleeping 5 ms a
 * batch, while a batch takes the reader well under 1 ms, hardly at all.) */
static bool asks_back(int sleep_us_per_batch)
{
    size_t cap = 40 * 60000, n = 0;
    char *log = malloc(cap), *err = NULL;
    assert_non_null(log);
    n += (size_t)snprintf(log + n, cap - n, "#cmon-ascii 1\n");
    for (int i = 0; i < 60000; i++)
        n += (size_t)snprintf(log + n, cap - n, "%d %d E %d\n", 1000 + i, i % 4, i);
    log_reader *r = log_reader_open_mem(log, n, "t.log", NULL, NULL, &err);
    assert_non_null(r);
    assert_int_equal(log_reader_prefetch(r, true), 0);
    const log_record *rec;
    int64_t want = 1000;
    int rc;
    while ((rc = log_reader_next_ref(r, &rec, &err)) == 1) {
        assert_int_equal(rec->ts, want);
        if (sleep_us_per_batch && (want - 1000) % 1024 == 0)
            usleep((useconds_t)sleep_us_per_batch);
        want++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(want, 1000 + 60000);
    bool asked = logr_prefetch_handback_asked(r);
    log_reader_free(r);
    free(log);
    return asked;
}

static void timed_hand_back(void **state)
{
    (void)state;
    assert_true(asks_back(0));
    assert_false(asks_back(5000));
}

/* The rule, without a clock: more than three quarters, exactly. */
static void hand_back_rule(void **state)
{
    (void)state;
    assert_true(logr_prefetch_handback_due(76, 100));
    assert_false(logr_prefetch_handback_due(75, 100));
    assert_false(logr_prefetch_handback_due(0, 100));
    assert_true(logr_prefetch_handback_due(100, 100));
    assert_false(logr_prefetch_handback_due(0, 0));
    /* a judged stretch of a few seconds, in ns */
    assert_true(logr_prefetch_handback_due(3000000001u, 4000000000u));
    assert_false(logr_prefetch_handback_due(3000000000u, 4000000000u));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(default_batches),
        cmocka_unit_test(small_batches),
        cmocka_unit_test(handed_back),
        cmocka_unit_test(timed_hand_back),
        cmocka_unit_test(hand_back_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
