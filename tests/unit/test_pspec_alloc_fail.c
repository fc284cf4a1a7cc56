/* test_pspec_alloc_fail.c — allocation-failure injection over the parser
 * and the engine, as SQLite's malloc tests do.
 *
 * For a few language tests (spec and log), the N-th allocation libpspec
 * makes while loading the spec and checking the log fails, for N = 1, 2,
 * 3, ... until a run makes no allocation fail. Each run is a child process
 * (a crash must not take the test down). Every run must end in one of the
 * ways libpspec promises:
 *   - it completes with the reports and exit status of a run without
 *     failures (an allocation the library can do without), or with an
 *     "out of memory" error;
 *   - it stops in the library's out-of-memory handler, which aborts
 *     (docs/HACKING.md, "Allocation in libpspec"): seen here as abort()
 *     called after a failed allocation;
 * never a signal, another abort, or other reports. A run that completes
 * must also have freed every block it allocated.
 *
 * The allocator functions libpspec calls are wrapped at link time
 * (-Wl,--wrap=malloc,... in tests/unit/CMakeLists.txt): only references
 * from the test and the static library go through the counter, libc and
 * protobuf-c's own allocations do not. Logs are checked as cmon-ascii and,
 * converted, as cmon-bin; on the caller's thread and reading ahead.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "logread.h"
#include "logwrite.h"
#include "pspec/pspec.h"

/* --- the wrapped allocator ----------------------------------------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t c, size_t n);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
void __real_free(void *p);
void __real_abort(void);

static atomic_ulong nallocs;    /* allocations asked for while counting */
static atomic_long live;        /* blocks allocated minus blocks freed, while counting */
static unsigned long fail_at;   /* fail the allocation with this number (1-based); 0: none */
static atomic_bool failed;      /* an allocation was made to fail */
static atomic_bool counting;

/* True when this allocation is to fail. */
static bool inject(void)
{
    if (!atomic_load(&counting))
        return false;
    unsigned long n = atomic_fetch_add(&nallocs, 1) + 1;
    if (fail_at && n == fail_at) {
        atomic_store(&failed, true);
        return true;
    }
    return false;
}

static void *counted(void *p)
{
    if (p && atomic_load(&counting))
        atomic_fetch_add(&live, 1);
    return p;
}

void *__wrap_malloc(size_t n)
{
    return inject() ? NULL : counted(__real_malloc(n));
}

void *__wrap_calloc(size_t c, size_t n)
{
    return inject() ? NULL : counted(__real_calloc(c, n));
}

void *__wrap_aligned_alloc(size_t a, size_t n)
{
    return inject() ? NULL : counted(__real_aligned_alloc(a, n));
}

void *__wrap_realloc(void *p, size_t n)
{
    if (inject())
        return NULL;
    void *q = __real_realloc(p, n);
    if (!p)
        counted(q);
    return q;
}

void __wrap_free(void *p)
{
    if (p && atomic_load(&counting))
        atomic_fetch_sub(&live, 1);
    __real_free(p);
}

/* The library's out-of-memory handler aborts: after a failed allocation
 * that is the promised way out (exit OOM_STOP), any other abort is not. */
enum { OOM_STOP = 42 };

void __wrap_abort(void)
{
    if (atomic_load(&failed))
        _exit(OOM_STOP);
    __real_abort();
}

/* --- one check ------------------------------------------------------------ */

/* A growing string, on the real allocator (the child sends it home). */
typedef struct out {
    char *s;
    size_t len, cap;
} out;

static void out_put(out *o, const char *s, size_t n)
{
    if (o->len + n + 1 > o->cap) {
        o->cap = (o->len + n + 1) * 2;
        o->s = __real_realloc(o->s, o->cap);
        if (!o->s)
            __real_abort();
    }
    memcpy(o->s + o->len, s, n);
    o->len += n;
    o->s[o->len] = '\0';
}

static void on_report(void *ctx, const pspec_report *r)
{
    char *line = pspec_report_format(r, PSPEC_FORMAT_JSON);
    if (!line)
        return;
    bool was = atomic_exchange(&counting, false);
    out_put(ctx, line, strlen(line));
    out_put(ctx, "\n", 1);
    atomic_store(&counting, was);
    free(line);
}

static void on_warn(void *ctx, const char *logname, uint64_t where, const char *msg)
{
    (void)logname;
    char w[64];
    bool was = atomic_exchange(&counting, false);
    snprintf(w, sizeof w, "warning at %llu: ", (unsigned long long)where);
    out_put(ctx, w, strlen(w));
    out_put(ctx, msg, strlen(msg));
    out_put(ctx, "\n", 1);
    atomic_store(&counting, was);
}

typedef struct acase {
    const char *name;
    const char *spec;          /* path */
    int logfd;                 /* the log (ascii or binary), read from its start */
    unsigned threads;          /* pspec_check_options.threads */
} acase;

/* Load and check, counting allocations: the reports, the warnings, the
 * exit status and whether the run freed all it allocated, as one string. */
static void check_once(const acase *c, out *o)
{
    atomic_store(&live, 0);
    atomic_store(&counting, true);
    char *err = NULL;
    int rc;
    pspec *ps = pspec_new();
    if (!ps) {
        rc = -ENOMEM;
        goto out_done;
    }
    rc = pspec_load_file(ps, c->spec);
    if (rc == 0) {
        lseek(c->logfd, 0, SEEK_SET);
        pspec_check_options opt = {
            .want_intervals = true,
            .want_events = true,
            .explain = true,
            .threads = c->threads,
            .report = on_report,
            .warn = on_warn,
            .ctx = o,
        };
        rc = pspec_check(ps, c->logfd, c->name, &opt, &err);
    } else {
        char *d = pspec_diags_format(ps);
        bool was = atomic_exchange(&counting, false);
        out_put(o, "load failed: ", 13);
        if (d)
            out_put(o, d, strlen(d));
        atomic_store(&counting, was);
        if (d && strstr(d, "out of memory"))
            rc = -ENOMEM;
        free(d);
    }
    pspec_free(ps);
out_done:;
    bool oom = err && strstr(err, "out of memory");
    char tail[600];
    snprintf(tail, sizeof tail, "exit %d%s%.500s\n", oom ? -ENOMEM : rc, err ? ": " : "", err ? err : "");
    free(err);
    atomic_store(&counting, false);
    out_put(o, tail, strlen(tail));
    if (atomic_load(&live) != 0) {
        snprintf(tail, sizeof tail, "%ld blocks not freed\n", (long)atomic_load(&live));
        out_put(o, tail, strlen(tail));
    }
}

/* Outcomes of one child run. */
typedef struct run {
    bool oom_stop;             /* stopped in the out-of-memory handler */
    bool any_failed;           /* an allocation was made to fail */
    int status;                /* waitpid's */
    char *out;                 /* its output (when it completed) */
} run;

/* Run check_once in a child with allocation `n` failing (0: none). */
static run run_child(const acase *c, unsigned long n)
{
    int fd = memfd_create("alloc_fail_out", MFD_CLOEXEC);
    assert_true(fd >= 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        fail_at = n;
        out o = { 0 };
        check_once(c, &o);
        char flag = atomic_load(&failed) ? 'F' : '-';
        if (write(fd, &flag, 1) != 1 || (o.len && write(fd, o.s, o.len) != (ssize_t)o.len))
            _exit(99);
        _exit(0);
    }
    run r = { 0 };
    assert_int_equal(waitpid(pid, &r.status, 0), pid);
    r.oom_stop = WIFEXITED(r.status) && WEXITSTATUS(r.status) == OOM_STOP;
    if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) {
        off_t len = lseek(fd, 0, SEEK_END);
        assert_true(len >= 1);
        r.out = calloc(1, (size_t)len);
        char flag;
        assert_int_equal(pread(fd, &flag, 1, 0), 1);
        assert_int_equal(pread(fd, r.out, (size_t)len - 1, 1), len - 1);
        r.any_failed = flag == 'F';
    }
    close(fd);
    return r;
}

/* Fail every allocation in turn; every run must end as promised. */
static void fail_each(const acase *c)
{
    run ref = run_child(c, 0);
    assert_non_null(ref.out);
    if (strstr(ref.out, "not freed"))
        fail_msg("%s: without failures:\n%s", c->name, ref.out);
    unsigned long stops = 0, done = 0;
    for (unsigned long n = 1;; n++) {
        run r = run_child(c, n);
        if (r.oom_stop) {
            stops++;
            continue;
        }
        if (!r.out)
            fail_msg("%s: allocation %lu failing: the run ended with status 0x%x "
                     "(neither completed nor stopped by the out-of-memory handler)",
                     c->name, n, (unsigned)r.status);
        bool same = strcmp(r.out, ref.out) == 0;
        bool oom_err = strstr(r.out, "exit -12") != NULL && !strstr(r.out, "not freed");
        if (!same && !oom_err)
            fail_msg("%s: allocation %lu failing: the run completed differently:\n%s\n"
                     "--- instead of ---\n%s", c->name, n, r.out, ref.out);
        bool last = !r.any_failed;
        free(r.out);
        if (last)
            break;   /* n went past the run's allocations */
        done++;
    }
    print_message("%s: %lu runs stopped out of memory, %lu completed\n", c->name, stops, done);
    free(ref.out);
}

/* --- the cases -------------------------------------------------------------- */

/* The ascii log `path` written again as cmon-bin into a memfd. */
static int to_binary(const char *path)
{
    char *err = NULL;
    int in = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(in >= 0);
    log_reader *r = log_reader_open(in, true, path, NULL, NULL, &err);
    assert_non_null(r);
    int fd = memfd_create("alloc_fail_bin", MFD_CLOEXEC);
    assert_true(fd >= 0);
    const log_header *h = log_reader_header(r);
    log_writer *w = NULL;
    assert_int_equal(log_writer_open(&w, fd, false, LOG_FORMAT_BIN, h->fields, h->nfields), 0);
    log_record rec;
    int rc;
    while ((rc = log_reader_next(r, &rec, &err)) == 1) {
        if (rec.kind == LOG_REC_EVENT)
            assert_int_equal(log_writer_event(w, rec.name, rec.ts, rec.thread, rec.values,
                                              rec.nvalues), 0);
        else if (rec.kind == LOG_REC_GAP)
            assert_int_equal(log_writer_gap(w, rec.gap), 0);
    }
    assert_int_equal(rc, 0);
    assert_int_equal(log_writer_close(w), 0);
    log_reader_free(r);
    return fd;
}

#define LANG(f) PSPEC_LANG_DIR "/" f

/* The cases: a spec and a log, checked as written or converted to
 * cmon-bin, on the caller's thread (1) or reading ahead (2). */
typedef struct tcase {
    const char *name;
    const char *spec, *log;
    bool binary;
    unsigned threads;
} tcase;

static const tcase cases[] = {
    { "a type error", LANG("err_assert_type.pspec"), LANG("fig3.log"), false, 1 },
    { "a bad log header", LANG("bad_header.pspec"), LANG("bad_header.log"), false, 1 },
    { "fig3 ascii", LANG("fig3.pspec"), LANG("fig3.log"), false, 1 },
    { "fig3 binary", LANG("fig3.pspec"), LANG("fig3.log"), true, 1 },
    { "lectern ascii", LANG("lectern.pspec"), LANG("lectern.log"), false, 1 },
    { "lectern ascii, read ahead", LANG("lectern.pspec"), LANG("lectern.log"), false, 2 },
};
enum { NCASES = sizeof cases / sizeof cases[0] };

static void test_case(void **state)
{
    const tcase *t = *state;
    int fd = t->binary ? to_binary(t->log) : open(t->log, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    acase c = { t->name, t->spec, fd, t->threads };
    fail_each(&c);
    close(fd);
}

int main(void)
{
    struct CMUnitTest tests[NCASES];
    for (size_t i = 0; i < NCASES; i++)
        tests[i] = (struct CMUnitTest){ .name = cases[i].name, .test_func = test_case,
                                        .initial_state = (void *)&cases[i] };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
