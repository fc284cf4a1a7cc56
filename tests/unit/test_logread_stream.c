/* test_logread_stream.c — the readers on a pipe that delivers one byte at a
 * time, interrupted by signals, blocking and non-blocking: every record must
 * come out as soon as its last byte has arrived.
 *
 * A feeder thread writes the log byte by byte. After the last byte of each
 * record it waits until the reader has returned that record; a reader that
 * wanted more bytes first would make the feeder time out, which fails the
 * test instead of hanging it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "logread-internal.h"
#include "logwrite.h"

typedef struct feeder {
    int fd;
    const unsigned char *data;
    size_t n;
    const size_t *cuts;     /* wait for an ack after writing data[0 .. cuts[i]) */
    size_t ncuts;
    sem_t ack;
    int timeouts;           /* acks that never came */
} feeder;

static void *feed(void *arg)
{
    feeder *f = arg;
    size_t c = 0;
    for (size_t i = 0; i < f->n; i++) {
        while (write(f->fd, f->data + i, 1) != 1)
            ;
        if ((i & 7) == 0)
            usleep(50);
        if (c < f->ncuts && i + 1 == f->cuts[c]) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 5;
            int rc;
            do
                rc = sem_timedwait(&f->ack, &ts);
            while (rc != 0 && errno == EINTR);
            if (rc != 0)
                f->timeouts++;
            c++;
        }
    }
    close(f->fd);
    return NULL;
}

static volatile sig_atomic_t nsignals;

static void on_alarm(int sig)
{
    (void)sig;
    nsignals++;
}

/* Write a log with the writer into memory, noting where each record ends. */
static unsigned char *make_log(log_format fmt, size_t *n, size_t *cuts, size_t *ncuts)
{
    char path[] = "/tmp/test_logread_stream_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    log_header_field hf[] = { { "program", "stream" }, { "tick-ns", "1" } };
    log_writer *w;
    assert_int_equal(log_writer_open(&w, fd, false, fmt, hf, 2), 0);
    *ncuts = 0;
    for (int i = 0; i < 12; i++) {
        double v[2] = { i, i * 1.5 };
        if (i == 6)
            assert_int_equal(log_writer_gap(w, 4), 0);
        else
            assert_int_equal(log_writer_event(w, i % 3 ? "CacheHit" : "call@read", 1000 + i, i % 4, v,
                                              (size_t)i % 3), 0);
        assert_int_equal(log_writer_flush(w), 0);
        cuts[(*ncuts)++] = (size_t)lseek(fd, 0, SEEK_CUR);
    }
    assert_int_equal(log_writer_end(w), 0);
    assert_int_equal(log_writer_close(w), 0);
    *n = (size_t)lseek(fd, 0, SEEK_END);
    unsigned char *data = malloc(*n);
    assert_int_equal(pread(fd, data, *n, 0), (ssize_t)*n);
    close(fd);
    return data;
}

static void stream(log_format fmt, bool nonblock)
{
    size_t n, cuts[32], ncuts;
    unsigned char *data = make_log(fmt, &n, cuts, &ncuts);
    int p[2];
    assert_int_equal(pipe(p), 0);
    if (nonblock)
        fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
    feeder f = { .fd = p[1], .data = data, .n = n, .cuts = cuts, .ncuts = ncuts };
    sem_init(&f.ack, 0, 0);

    /* Signals interrupt the reader's read(2) calls, never the feeder's. */
    struct sigaction sa = { .sa_handler = on_alarm };   /* no SA_RESTART */
    sigaction(SIGALRM, &sa, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, feed, &f), 0);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    nsignals = 0;
    struct itimerval it = { { 0, 300 }, { 0, 300 } };
    setitimer(ITIMER_REAL, &it, NULL);

    char *err = NULL;
    log_reader *r = log_reader_open(p[0], true, "pipe", NULL, NULL, &err);
    if (!r)
        fail_msg("open: %s", err);
    assert_int_equal(log_reader_header(r)->format, fmt);
    for (size_t i = 0; i < ncuts; i++) {
        log_record rec;
        int rc = log_reader_next(r, &rec, &err);
        if (rc != 1)
            fail_msg("record %zu: next returned %d (%s)", i, rc, err ? err : "");
        if (i == 6) {
            assert_int_equal(rec.kind, LOG_REC_GAP);
            assert_int_equal(rec.gap, 4);
        } else {
            assert_int_equal(rec.kind, LOG_REC_EVENT);
            assert_int_equal(rec.ts, 1000 + (int64_t)i);
            assert_int_equal(rec.nvalues, i % 3);
            assert_string_equal(rec.name, i % 3 ? "CacheHit" : "call@read");
        }
        sem_post(&f.ack);
    }
    log_record rec;
    assert_int_equal(log_reader_next(r, &rec, &err), 0);
    struct itimerval off = { { 0, 0 }, { 0, 0 } };
    setitimer(ITIMER_REAL, &off, NULL);
    pthread_join(th, NULL);
    assert_int_equal(f.timeouts, 0);
    assert_true(nsignals > 0);
    log_reader_free(r);
    sem_destroy(&f.ack);
    free(data);
}

static void stream_ascii(void **state) { stream(LOG_FORMAT_ASCII, false); }
static void stream_ascii_nonblocking(void **state) { stream(LOG_FORMAT_ASCII, true); }
static void stream_bin(void **state) { stream(LOG_FORMAT_BIN, false); }
static void stream_bin_nonblocking(void **state) { stream(LOG_FORMAT_BIN, true); }

/* Records split across many small reads, with lines longer than one read
 * buffer: nothing is lost or duplicated at the seams. */
static void stream_big_lines(void **state)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        FILE *f = fdopen(p[1], "w");
        setvbuf(f, NULL, _IOFBF, 4093);
        fprintf(f, "#cmon-ascii 1\n");
        for (int i = 0; i < 20000; i++) {
            fprintf(f, "%d %d E%d", i, i % 7, i % 5);
            int nv = i % 97 == 0 ? 60000 : i % 4;   /* some lines are ~300 KiB */
            for (int k = 0; k < nv; k++)
                fprintf(f, " %d", k);
            fputc('\n', f);
        }
        fclose(f);
        _exit(0);
    }
    close(p[1]);
    log_reader *r = log_reader_open(p[0], true, "pipe", NULL, NULL, NULL);
    assert_non_null(r);
    for (int i = 0; i < 20000; i++) {
        log_record rec;
        assert_int_equal(log_reader_next(r, &rec, NULL), 1);
        assert_int_equal(rec.ts, i);
        assert_int_equal(rec.thread, i % 7);
        int nv = i % 97 == 0 ? 60000 : i % 4;
        assert_int_equal(rec.nvalues, nv);
        if (nv)
            assert_true(rec.values[nv - 1] == nv - 1);
    }
    log_record rec;
    assert_int_equal(log_reader_next(r, &rec, NULL), 0);
    assert_int_equal(log_reader_nmalformed(r), 0);
    log_reader_free(r);
    int status;
    waitpid(pid, &status, 0);
    assert_int_equal(status, 0);
}

/* A pipe's reader starts with a small buffer and keeps it while its writer
 * is slow (a telemonitor's checker: one per stream); a file's reads are
 * large from the start; a writer that keeps the pipe full loses nothing
 * while the buffer grows. */
static void pipe_buffer_starts_small(void **state)
{
    static const char head[] = "#cmon-ascii 1\n1 1 E 1\n2 1 E 2\n";
    char path[] = "/tmp/cmon-logread-XXXXXX";
    int p[2], fd;
    log_record rec;

    assert_int_equal(pipe(p), 0);
    assert_int_equal(write(p[1], head, sizeof head - 1), (ssize_t)(sizeof head - 1));
    close(p[1]);
    log_reader *r = log_reader_open(p[0], true, "pipe", NULL, NULL, NULL);
    assert_non_null(r);
    assert_int_equal(r->cap, LOG_READ_FIRST);
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_int_equal(log_reader_next(r, &rec, NULL), 1);
    assert_int_equal(log_reader_next(r, &rec, NULL), 0);
    assert_int_equal(r->cap, LOG_READ_FIRST);
    log_reader_free(r);

    fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    assert_int_equal(write(fd, head, sizeof head - 1), (ssize_t)(sizeof head - 1));
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    r = log_reader_open(fd, true, "file", NULL, NULL, NULL);
    assert_non_null(r);
    assert_int_equal(r->cap, LOG_READ_CHUNK);
    log_reader_free(r);

    /* a writer that keeps the pipe full */
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        FILE *f = fdopen(p[1], "w");
        setvbuf(f, NULL, _IOFBF, 1 << 18);  /* writes that fill the pipe at once */
        fprintf(f, "#cmon-ascii 1\n");
        for (int i = 0; i < 200000; i++)
            fprintf(f, "%d 1 E %d\n", i, i);
        fclose(f);
        _exit(0);
    }
    close(p[1]);
    r = log_reader_open(p[0], true, "pipe", NULL, NULL, NULL);
    assert_non_null(r);
    for (int i = 0; i < 200000; i++) {
        assert_int_equal(log_reader_next(r, &rec, NULL), 1);
        assert_int_equal(rec.ts, i);
    }
    assert_int_equal(log_reader_next(r, &rec, NULL), 0);
    assert_true(r->cap <= LOG_READ_CHUNK);
    assert_int_equal(log_reader_nmalformed(r), 0);
    log_reader_free(r);
    int status;
    waitpid(pid, &status, 0);
    assert_int_equal(status, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stream_ascii),
        cmocka_unit_test(stream_ascii_nonblocking),
        cmocka_unit_test(stream_bin),
        cmocka_unit_test(stream_bin_nonblocking),
        cmocka_unit_test(stream_big_lines),
        cmocka_unit_test(pipe_buffer_starts_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
