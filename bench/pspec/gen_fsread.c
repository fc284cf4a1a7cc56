/* gen_fsread — a synthetic file-server log for the report's Figure 3.
 *
 *   gen_fsread [-b] [-t THREADS] [-s SEED] [-p PERCENT] READS > LOG
 *
 * THREADS threads (default 4) each do one Read at a time: StartRead(tid,
 * size), a CacheHit(tid) for about 78% of them, EndRead(tid). Sizes are
 * 512..65536 bytes; a Read takes about 50 us + 1 us/KiB, and about one in
 * 2000 is slow (12-40 ms) so that the 10 ms assertion fails now and then;
 * -p PERCENT makes that share PERCENT% instead (to a tenth of a percent:
 * -p 10 gives about 100,000 offenders in 1M reads, for timing the report).
 * Timestamps are nanoseconds (#tick-ns 1); threads interleave by time.
 * -b writes cmon-bin 1 instead of cmon-ascii 1. Deterministic for a seed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logwrite.h"

static uint64_t rng = 88172645463325252ULL;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

typedef struct thr {
    int64_t t;          /* time of its next event */
    int state;          /* 0: next is StartRead, 1: CacheHit, 2: EndRead */
    int64_t end;        /* when the current read ends */
    int hit;
} thr;

int main(int argc, char **argv)
{
    int threads = 4, binary = 0, opt;
    unsigned slow_mod = 2000, slow_below = 1;  /* a read is slow when next() % slow_mod < slow_below */
    while ((opt = getopt(argc, argv, "bt:s:p:")) != -1) {
        if (opt == 'b') {
            binary = 1;
        } else if (opt == 't') {
            threads = atoi(optarg);
        } else if (opt == 's') {
            rng = strtoull(optarg, NULL, 10) * 2654435761ULL + 1;
        } else if (opt == 'p') {
            double pct = atof(optarg);
            if (!(pct >= 0 && pct <= 100))
                return 2;
            slow_mod = 1000;
            slow_below = (unsigned)(pct * 10 + 0.5);
        } else {
            return 2;
        }
    }
    if (optind >= argc || threads < 1 || threads > 1024) {
        fprintf(stderr, "usage: gen_fsread [-b] [-t THREADS] [-s SEED] [-p PERCENT] READS\n");
        return 2;
    }
    long reads = atol(argv[optind]);
    log_header_field hdr[] = {{"program", "fsread"}, {"tick-ns", "1"}};
    log_writer *w;
    if (log_writer_open(&w, 1, false, binary ? LOG_FORMAT_BIN : LOG_FORMAT_ASCII, hdr, 2) < 0)
        return 1;
    const char *sr[] = {"tid", "size"}, *tid[] = {"tid"};
    int t_start = log_writer_declare(w, "StartRead", sr, 2);
    int t_hit = log_writer_declare(w, "CacheHit", tid, 1);
    int t_end = log_writer_declare(w, "EndRead", tid, 1);
    thr *th = calloc((size_t)threads, sizeof *th);
    for (int i = 0; i < threads; i++)
        th[i].t = 1000000 + i * 137;
    long started = 0, open = 0;
    while (started < reads || open > 0) {
        int k = 0;      /* the thread whose next event comes first */
        for (int i = 1; i < threads; i++)
            if (th[i].t < th[k].t)
                k = i;
        thr *x = &th[k];
        double v[2] = {k + 1, 0};
        int rc = 0;
        if (x->state == 0) {
            if (started >= reads) {
                x->t = INT64_MAX;
                continue;
            }
            int64_t size = 512 << (next() % 8);
            int64_t dur = 50000 + size * 1000 / 1024;
            if (next() % slow_mod < slow_below)
                dur = 12000000 + (int64_t)(next() % 28000000);
            v[1] = (double)size;
            rc = log_writer_event_id(w, t_start, x->t, k + 1, v, 2);
            x->hit = next() % 100 < 78;
            x->end = x->t + dur;
            x->state = x->hit ? 1 : 2;
            x->t += x->hit ? dur / 3 : dur;
            started++;
            open++;
        } else if (x->state == 1) {
            rc = log_writer_event_id(w, t_hit, x->t, k + 1, v, 1);
            x->state = 2;
            x->t = x->end;
        } else {
            rc = log_writer_event_id(w, t_end, x->t, k + 1, v, 1);
            x->state = 0;
            x->t += 2000 + (int64_t)(next() % 20000);
            open--;
        }
        if (rc < 0)
            return 1;
    }
    free(th);
    int rc = log_writer_end(w);
    int rc2 = log_writer_close(w);
    return rc < 0 || rc2 < 0;
}
