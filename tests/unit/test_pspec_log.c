/* test_pspec_log.c — the public log-reading API of pspec.h (pspec_log_*):
 * header entries, events with their values, gaps, a malformed record
 * skipped with a warning, the end, and a log that is not one. Only the
 * public header is used, as an embedding program would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pspec/pspec.h"

/* A descriptor reading `text`. */
static int fd_of(const char *text)
{
    int fd = memfd_create("t.log", 0);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    return fd;
}

typedef struct warned {
    unsigned n;
    uint64_t where;
} warned;

static void on_warn(void *ctx, const char *logname, uint64_t where, const char *msg)
{
    warned *w = ctx;
    w->n++;
    w->where = where;
    assert_string_equal(logname, "t.log");
    assert_non_null(msg);
}

static void test_events_gaps_header(void **state)
{
    (void)state;
    int fd = fd_of("#cmon-ascii 1\n"
                   "#program demo\n"
                   "#tick-ns 1000\n"
                   "10 1 call@Read 4 2.5\n"
                   "12 2 ret@Read\n"
                   "oops\n"
                   "#cmon-gap 3\n"
                   "20 1 Tick -1\n");
    warned w = { 0 };
    char *err = NULL;
    pspec_log *l = pspec_log_open(fd, "t.log", on_warn, &w, &err);
    assert_non_null(l);
    assert_null(err);
    assert_true(pspec_log_tick_ns(l) == 1000.0);
    assert_string_equal(pspec_log_header(l, "program"), "demo");
    assert_null(pspec_log_header(l, "machine"));

    pspec_log_record r;
    assert_int_equal(pspec_log_next(l, &r, &err), 1);
    assert_int_equal(r.kind, PSPEC_LOG_EVENT);
    assert_string_equal(r.name, "call@Read");
    assert_int_equal(r.ts, 10);
    assert_int_equal(r.thread, 1);
    assert_int_equal(r.pos, 1);
    assert_int_equal(r.nvalues, 2);
    assert_true(r.values[0] == 4 && r.values[1] == 2.5);
    assert_int_equal(r.gap, 0);

    assert_int_equal(pspec_log_next(l, &r, &err), 1);
    assert_string_equal(r.name, "ret@Read");
    assert_int_equal(r.thread, 2);
    assert_int_equal(r.nvalues, 0);

    /* "oops" is skipped with a warning at its line */
    assert_int_equal(pspec_log_next(l, &r, &err), 1);
    assert_int_equal(w.n, 1);
    assert_int_equal(w.where, 6);
    assert_int_equal(r.kind, PSPEC_LOG_GAP);
    assert_null(r.name);
    assert_int_equal(r.gap, 3);

    assert_int_equal(pspec_log_next(l, &r, &err), 1);
    assert_int_equal(r.kind, PSPEC_LOG_EVENT);
    assert_string_equal(r.name, "Tick");
    assert_int_equal(r.pos, 4);     /* the malformed record counts */
    assert_true(r.values[0] == -1);

    assert_int_equal(pspec_log_next(l, &r, &err), 0);
    assert_null(err);
    pspec_log_free(l);
    pspec_log_free(NULL);
    close(fd);
}

static void test_not_a_log(void **state)
{
    (void)state;
    int fd = fd_of("hello\n");
    char *err = NULL;
    assert_null(pspec_log_open(fd, "t.log", NULL, NULL, &err));
    assert_non_null(err);
    free(err);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events_gaps_header),
        cmocka_unit_test(test_not_a_log),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
