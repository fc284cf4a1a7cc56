/* fig3_floor — the report's Figure 3 checked by hand in C over pcheck's own
 * log reader: what a checker written for this one spec costs, so the floor
 * under pcheck on this machine is measured, not guessed (issue 14,
 * docs/PERFORMANCE.md).
 *
 *   fig3_floor [-t] LOG
 *
 * The verdicts of fig3.awk and `pcheck -s fig3.pspec`, and one line per
 * failing read and assertion (1 and 3) as fig3.awk prints them, formatted
 * without printf. Reads are matched by the tid attribute; a CacheHit with
 * the same tid inside a Read makes it a hit; durations carry one tick of
 * error either way, so "time <= L" holds when d - 1 <= L.
 * -t: the reader parses ahead on a second thread, as pcheck does by
 * default (log_reader_prefetch); without it, one thread does everything.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logread.h"

/* An open read per thread id, in a small open-addressing table. */
typedef struct slot {
    double tid;
    int64_t start;
    double size;
    int open, hit, used;
} slot;

enum { NSLOT = 1024 };
static slot tab[NSLOT];

static slot *find(double tid)
{
    uint64_t b;
    double k = tid + 0.0;
    memcpy(&b, &k, sizeof b);
    uint32_t i = (uint32_t)((b * 0x9e3779b97f4a7c15ULL) >> 54);
    for (;;) {
        slot *s = &tab[i];
        if (!s->used) {
            s->used = 1;
            s->tid = tid;
            return s;
        }
        if (s->tid == tid)
            return s;
        i = (i + 1) & (NSLOT - 1);
    }
}

static char out[1 << 16];
static size_t outn;

static void flush(void)
{
    if (outn && write(1, out, outn) != (ssize_t)outn) {
        perror("fig3_floor: write");
        exit(2);
    }
    outn = 0;
}

static void put(const char *s, size_t n)
{
    if (outn + n > sizeof out)
        flush();
    memcpy(out + outn, s, n);
    outn += n;
}

static void put_i64(int64_t v)
{
    char b[24], *p = b + sizeof b;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do
        *--p = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    if (v < 0)
        *--p = '-';
    put(p, (size_t)(b + sizeof b - p));
}

static void fail(int which, const slot *s, int64_t end)
{
    put(which == 1 ? "fail 1: read on thread " : "fail 3: read on thread ", 23);
    put_i64((int64_t)s->tid);
    put(" from ", 6);
    put_i64(s->start);
    put(" to ", 4);
    put_i64(end);
    put(" time ", 6);
    put_i64(end - s->start);
    put("\n", 1);
}

int main(int argc, char **argv)
{
    int ahead = argc > 2 && strcmp(argv[1], "-t") == 0;
    if (argc != 2 + ahead) {
        fprintf(stderr, "usage: fig3_floor [-t] LOG\n");
        return 2;
    }
    const char *path = argv[1 + ahead];
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
        switch (kind[rec->name_id]) {
        case 1: {
            slot *s = find(rec->values[0]);
            s->start = rec->ts;
            s->size = rec->nvalues > 1 ? rec->values[1] : 0;
            s->hit = 0;
            s->open = 1;
            break;
        }
        case 2: {
            slot *s = find(rec->values[0]);
            if (s->open)
                s->hit = 1;
            break;
        }
        case 3: {
            slot *s = find(rec->values[0]);
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
        default:
            break;
        }
    }
    if (rc < 0) {
        fprintf(stderr, "fig3_floor: %s: %s\n", path, err);
        return 2;
    }
    flush();
    printf("assertion 1 %s\n", f1 ? "failed" : "held");
    printf("assertion 2 %s\n", n && sum / (double)n <= 5 * ms / tick ? "held" : "failed");
    printf("assertion 3 %s\n", f3 ? "failed" : "held");
    printf("assertion 4 %s\n", n && (double)hits / (double)n >= 0.75 ? "held" : "failed");
    log_reader_free(r);
    free(kind);
    return 0;
}
