/* test_pspec_threads.c — libpspec's thread rule (pspec.h, "Threads"):
 * several threads, each with its own pspec object, may check at the same
 * time and get what one thread alone gets.
 *
 * Four threads each load tests/lang/lectern.pspec (intervals nested in
 * intervals, mappings, every interval and event reported) and check it
 * against lectern.log many times, offline and continuously, on the caller's
 * thread and with the read-ahead thread; every run's reports, formatted as
 * JSON, must equal the single-thread run's. Only the public API is used.
 *
 * ctest also runs this file built with -fsanitize=thread (unit.pspec_threads_tsan),
 * which fails on any data race inside the library, e.g. the value free
 * lists that were once global.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pspec/pspec.h"

enum { NTHREADS = 4, NRUNS = 24 };

#define SPEC PSPEC_LANG_DIR "/lectern.pspec"
#define LOG PSPEC_LANG_DIR "/lectern.log"

/* The ways a check is run; each has its own single-thread reference. */
typedef struct mode {
    const char *name;
    bool continuous;
    unsigned threads;          /* pspec_check_options.threads */
} mode;

static const mode modes[] = {
    { "offline, one thread", false, 1 },
    { "continuous", true, 1 },
    { "offline, read-ahead thread", false, 0 },
};
enum { NMODES = sizeof modes / sizeof modes[0] };

/* A growing string of report lines. */
typedef struct out {
    char *s;
    size_t len, cap;
    char *line;                /* pspec_report_format_into's buffer */
    size_t line_cap;
} out;

static void out_put(out *o, const char *s, size_t n)
{
    if (o->len + n + 1 > o->cap) {
        o->cap = (o->len + n + 1) * 2;
        o->s = realloc(o->s, o->cap);
        if (!o->s)
            abort();
    }
    memcpy(o->s + o->len, s, n);
    o->len += n;
    o->s[o->len] = '\0';
}

static void on_report(void *ctx, const pspec_report *r)
{
    out *o = ctx;
    size_t n = pspec_report_format_into(r, PSPEC_FORMAT_JSON, &o->line, &o->line_cap);
    out_put(o, o->line, n);
    out_put(o, "\n", 1);
}

static void on_warn(void *ctx, const char *logname, uint64_t where, const char *msg)
{
    out *o = ctx;
    char w[64];
    snprintf(w, sizeof w, "warning at %llu: ", (unsigned long long)where);
    out_put(o, w, strlen(w));
    out_put(o, msg, strlen(msg));
    out_put(o, "\n", 1);
}

/* One check of the spec over the log with a fresh pspec object: the reports
 * and the exit status, as one heap string (NULL when it could not run). */
static char *check_once(const mode *m)
{
    out o = {0};
    pspec *ps = pspec_new();
    if (!ps || pspec_load_file(ps, SPEC) != 0) {
        pspec_free(ps);
        return NULL;
    }
    int fd = open(LOG, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        pspec_free(ps);
        return NULL;
    }
    pspec_check_options opt = {
        .continuous = m->continuous,
        .want_intervals = true,
        .want_events = true,
        .explain = true,
        .threads = m->threads,
        .report = on_report,
        .warn = on_warn,
        .ctx = &o,
    };
    char *err = NULL;
    int rc = pspec_check(ps, fd, "lectern.log", &opt, &err);
    close(fd);
    pspec_free(ps);
    char tail[80];
    snprintf(tail, sizeof tail, "exit %d%s\n", rc, err ? " (error)" : "");
    free(err);
    out_put(&o, tail, strlen(tail));
    free(o.line);
    return o.s;
}

static char *reference[NMODES];

/* A worker: NRUNS checks in every mode, counting those that differ from the
 * reference. */
typedef struct worker {
    pthread_t thread;
    unsigned runs, differ;
    char *first_diff;          /* the first differing output, for the message */
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    for (unsigned i = 0; i < NRUNS; i++) {
        const mode *m = &modes[i % NMODES];
        char *got = check_once(m);
        w->runs++;
        if (!got || strcmp(got, reference[i % NMODES]) != 0) {
            w->differ++;
            if (!w->first_diff && got) {
                w->first_diff = got;
                got = NULL;
            }
        }
        free(got);
    }
    return NULL;
}

static void test_threads_agree_with_one(void **state)
{
    (void)state;
    for (unsigned m = 0; m < NMODES; m++) {
        reference[m] = check_once(&modes[m]);
        assert_non_null(reference[m]);
        /* the case is a real one: failing assertions, intervals, events */
        assert_non_null(strstr(reference[m], "exit 1\n"));
        assert_non_null(strstr(reference[m], "\"assert\":\"1-sec max for display\""));
        assert_true(strlen(reference[m]) > 10000);
    }
    worker w[NTHREADS];
    memset(w, 0, sizeof w);
    for (unsigned t = 0; t < NTHREADS; t++)
        assert_int_equal(pthread_create(&w[t].thread, NULL, work, &w[t]), 0);
    for (unsigned t = 0; t < NTHREADS; t++)
        assert_int_equal(pthread_join(w[t].thread, NULL), 0);
    for (unsigned t = 0; t < NTHREADS; t++) {
        assert_int_equal(w[t].runs, NRUNS);
        if (w[t].differ)
            fail_msg("thread %u: %u of %u runs differ from one thread's; first:\n%s", t, w[t].differ,
                     w[t].runs, w[t].first_diff ? w[t].first_diff : "(did not run)");
        free(w[t].first_diff);
    }
    for (unsigned m = 0; m < NMODES; m++)
        free(reference[m]);
}

/* A thread that ends right after its checks, while others go on: whatever
 * the library keeps per thread must not outlive it or disturb the rest. */
static void *one_check(void *arg)
{
    return check_once(arg);
}

static void test_short_lived_threads(void **state)
{
    (void)state;
    char *ref = check_once(&modes[0]);
    assert_non_null(ref);
    for (unsigned round = 0; round < 3; round++) {
        pthread_t t[NTHREADS];
        for (unsigned i = 0; i < NTHREADS; i++)
            assert_int_equal(pthread_create(&t[i], NULL, one_check, (void *)&modes[0]), 0);
        for (unsigned i = 0; i < NTHREADS; i++) {
            void *got = NULL;
            assert_int_equal(pthread_join(t[i], &got), 0);
            assert_non_null(got);
            assert_string_equal(got, ref);
            free(got);
        }
    }
    free(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_agree_with_one),
        cmocka_unit_test(test_short_lived_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
