/* pspec_tiny.c — a client of an installed libpspec (pkg-config pspec,
 * find_package(pspec) -> pspec::pspec): checks a tiny spec over a tiny log,
 * both in memory, on the main thread and then on two threads at once (each
 * with its own pspec object), and prints the reports and "threads agree".
 * Exit status: pspec_check's (1: an assertion failed, as this log makes
 * one), or 10 when something could not run. */
#define _GNU_SOURCE
#include <pspec/pspec.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char spec[] =
    "perfspec tick\n"
    "  event Tick(n);\n"
    "  assert \"n never negative\": {& t : Tick : t.n >= 0};\n"
    "         \"three ticks\": {count t : Tick} = 3;\n"
    "end tick\n";
static const char log_text[] =
    "#cmon-ascii 1\n"
    "100 1 Tick 0\n"
    "200 1 Tick -1\n"
    "300 1 Tick 2\n";

typedef struct run {
    char out[4096];
    int status;
} run;

static void on_report(void *ctx, const pspec_report *r)
{
    run *x = ctx;
    char *line = pspec_report_format(r, PSPEC_FORMAT_TEXT);
    size_t n = strlen(x->out);
    snprintf(x->out + n, sizeof x->out - n, "%s\n", line);
    free(line);
}

static void *check(void *arg)
{
    run *x = arg;
    x->status = 10;
    pspec *ps = pspec_new();
    if (!ps)
        return NULL;
    if (pspec_load_text(ps, "tick.pspec", spec, sizeof spec - 1) != 0) {
        char *d = pspec_diags_format(ps);
        fprintf(stderr, "%s", d);
        free(d);
        pspec_free(ps);
        return NULL;
    }
    int fd = memfd_create("tick.log", 0);
    if (fd < 0 || write(fd, log_text, sizeof log_text - 1) != (ssize_t)(sizeof log_text - 1) ||
        lseek(fd, 0, SEEK_SET) != 0) {
        pspec_free(ps);
        return NULL;
    }
    pspec_check_options opt = { .report = on_report, .ctx = x };
    char *err = NULL;
    x->status = pspec_check(ps, fd, "tick.log", &opt, &err);
    if (err)
        fprintf(stderr, "pspec_check: %s\n", err);
    free(err);
    close(fd);
    pspec_free(ps);
    return NULL;
}

int main(void)
{
    static run one, two[2];
    check(&one);
    fputs(one.out, stdout);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, check, &two[i]) != 0)
            return 10;
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        if (two[i].status != one.status || strcmp(two[i].out, one.out) != 0)
            return 10;
    printf("threads agree\n");
    return one.status;
}
