/* fig3_floor — the report's Figure 3 checked by hand in C over pcheck's own
 * log reader: what a checker written for this one spec costs, so the floor
 * under pcheck on this machine is measured, not guessed (issue 14,
 * docs/PERFORMANCE.md).
 *
 *   fig3_floor [-t] [-r] LOG
 *
 * The verdicts of fig3.awk and `pcheck -s fig3.pspec`, and one line per
 * failing read and assertion (1 and 3) as fig3.awk prints them, formatted
 * without printf. Reads are matched by the tid attribute; a CacheHit with
 * the same tid inside a Read makes it a hit; durations carry one tick of
 * error either way, so "time <= L" holds when d - 1 <= L.
 * -t: the reader parses ahead on a second thread, as pcheck does by
 * default (log_reader_prefetch); without it, one thread does everything.
 * -r: read only, the floor under the floor: every record is taken from the
 * reader and its timestamp and first value summed, and nothing else; it
 * prints "records N" (the events and gap markers read).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logread.h"
#include "util.h"

/* An open read per thread id, in a small open-addressing table. */
typedef struct slot {
    double tid;
    int64_t start;
    double size;
    int open, hit, used;
} slot;

enum { NSLOT = 1024 };
static slot tab[NSLOT];
static unsigned nused;

/* The slot of tid, or NULL when the table is full (more threads than a
 * Figure 3 log of gen_fsread has by far). */
static slot *find(double tid)
{
    uint64_t b;
    double k = tid + 0.0;
    memcpy(&b, &k, sizeof b);
    uint32_t i = (uint32_t)((b * 0x9e3779b97f4a7c15ULL) >> 54);
    for (;;) {
        slot *s = &tab[i];
        if (!s->used) {
            if (nused == NSLOT - 1)
                return NULL;
            nused++;
            s->used = 1;
            s->tid = tid;
            return s;
        }
        if (s->tid == tid)
            return s;
        i = (i + 1) & (NSLOT - 1);
    }
}

/* The offender lines, in pcheck's own printf-free buffer (util.h),
 * written out 64 KiB at a time. */
static ps_buf out;

static void flush(void)
{
    if (out.len && fwrite(out.data, 1, out.len, stdout) != out.len) {
        perror("fig3_floor: write");
        exit(2);
    }
    ps_buf_reset(&out);
}

static void fail(int which, const slot *s, int64_t end)
{
    ps_buf_puts(&out, which == 1 ? "fail 1: read on thread " : "fail 3: read on thread ");
    ps_buf_put_i64(&out, (int64_t)s->tid);
    ps_buf_puts(&out, " from ");
    ps_buf_put_i64(&out, s->start);
    ps_buf_puts(&out, " to ");
    ps_buf_put_i64(&out, end);
    ps_buf_puts(&out, " time ");
    ps_buf_put_i64(&out, end - s->start);
    ps_buf_putc(&out, '\n');
    if (out.len >= (64u << 10))
        flush();
}

/* -r: what the records' fields added up to; written once at the end, so
 * that reading them is not left out of the loop. */
static volatile int64_t seen_ts;
static volatile double seen_value;

/* -r: take every record and look at it, nothing more. */
static int read_only(log_reader *r, const char *path)
{
    const log_record *rec;
    char *err = NULL;
    uint64_t n = 0;
    int64_t ts = 0;
    double v = 0;
    int rc;
    while ((rc = log_reader_next_ref(r, &rec, &err)) > 0) {
        n++;
        ts += rec->ts;
        if (rec->nvalues)
            v += rec->values[0];
    }
    if (rc < 0) {
        fprintf(stderr, "fig3_floor: %s: %s\n", path, err);
        return 2;
    }
    seen_ts = ts;
    seen_value = v;
    printf("records %llu\n", (unsigned long long)n);
    return 0;
}

int main(int argc, char **argv)
{
    int ahead = 0, only_read = 0, i = 1;
    for (; i < argc - 1; i++) {
        if (strcmp(argv[i], "-t") == 0)
            ahead = 1;
        else if (strcmp(argv[i], "-r") == 0)
            only_read = 1;
        else
            break;
    }
    if (i != argc - 1) {
        fprintf(stderr, "usage: fig3_floor [-t] [-r] LOG\n");
        return 2;
    }
    const char *path = argv[i];
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        fprintf(stderr, "fig3_floor: %s: %s\n", path, strerror(errno));
        return 2;
    }
    char *err = NULL;
    log_reader *r = log_reader_open(fd, true, path, NULL, NULL, &err);
    if (!r) {
        fprintf(stderr, "fig3_floor: %s: %s\n", path, err);
        return 2;
    }
    if (ahead)
        log_reader_prefetch(r, true);
    if (only_read) {
        int rc = read_only(r, path);
        log_reader_free(r);
        return rc;
    }
    double tick = log_reader_header(r)->tick_ns, ms = 1e6;
    double lim1 = 10 * ms / tick, lim3 = 8 * ms / tick;
    /* name id -> 1 StartRead, 2 CacheHit, 3 EndRead, 4 anything else */
    uint8_t *kind = NULL;
    uint32_t nkind = 0;
    uint64_t n = 0, hits = 0, f1 = 0, f3 = 0;
    double sum = 0;
    const log_record *rec;
    int rc;
    while ((rc = log_reader_next_ref(r, &rec, &err)) > 0) {
        if (rec->kind != LOG_REC_EVENT || rec->nvalues < 1)
            continue;
        if (rec->name_id >= nkind || !kind[rec->name_id]) {
            if (rec->name_id >= nkind) {
                uint32_t m = rec->name_id + 16;
                kind = realloc(kind, m);
                if (!kind) {
                    perror("fig3_floor");
                    return 2;
                }
                memset(kind + nkind, 0, m - nkind);
                nkind = m;
            }
            const char *name = rec->name;
            kind[rec->name_id] = strcmp(name, "StartRead") == 0  ? 1
                                 : strcmp(name, "CacheHit") == 0 ? 2
                                 : strcmp(name, "EndRead") == 0  ? 3
                                                                 : 4;
        }
        uint8_t k = kind[rec->name_id];
        if (k == 4)
            continue;
        slot *s = find(rec->values[0]);
        if (!s) {
            fprintf(stderr, "fig3_floor: %s: more than %d thread ids\n", path, NSLOT - 1);
            return 2;
        }
        switch (k) {
        case 1:
            s->start = rec->ts;
            s->size = rec->nvalues > 1 ? rec->values[1] : 0;
            s->hit = 0;
            s->open = 1;
            break;
        case 2:
            if (s->open)
                s->hit = 1;
            break;
        default: {  /* 3 */
            if (!s->open)
                break;
            s->open = 0;
            double d = (double)(rec->ts - s->start);
            n++;
            sum += d;
            hits += (uint64_t)s->hit;
            if (d - 1 > lim1) {
                f1++;
                fail(1, s, rec->ts);
            }
            if (s->size <= 4096 && d - 1 > lim3) {
                f3++;
                fail(3, s, rec->ts);
            }
            break;
        }
        }
    }
    if (rc < 0) {
        fprintf(stderr, "fig3_floor: %s: %s\n", path, err);
        return 2;
    }
    flush();
    ps_buf_free(&out);
    printf("assertion 1 %s\n", f1 ? "failed" : "held");
    printf("assertion 2 %s\n", n && sum / (double)n <= 5 * ms / tick ? "held" : "failed");
    printf("assertion 3 %s\n", f3 ? "failed" : "held");
    printf("assertion 4 %s\n", n && (double)hits / (double)n >= 0.75 ? "held" : "failed");
    log_reader_free(r);
    free(kind);
    return 0;
}
