/* fuzz_log_common.h — what the two log reader fuzz targets share.
 *
 * check_log() reads an input completely in several ways that must agree:
 * from memory, from memory again after log_reader_rewind(), from a file read
 * in small pieces (as a slow pipe delivers it), and without the fast paths
 * (the ascii parser for well-formed lines, the binary Event decoder). It also checks the promises of
 * logread.h on every record. Any disagreement aborts, which the fuzzer
 * reports as a crash.
 */
#ifndef CMON_FUZZ_LOG_COMMON_H
#define CMON_FUZZ_LOG_COMMON_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "logread-internal.h"

/* A running hash of everything a reading produced. */
typedef struct digest {
    uint64_t h;
    uint64_t nrec, nwarn;
} digest;

static inline void mix(digest *d, uint64_t v)
{
    d->h = (d->h ^ v) * 0x100000001b3ull;
    d->h ^= d->h >> 29;
}

static inline void mix_str(digest *d, const char *s)
{
    for (; *s; s++)
        mix(d, (unsigned char)*s);
    mix(d, 0xff);
}

/* The warning callback's context: where warnings go right now. */
typedef struct warn_sink {
    digest *cur;
} warn_sink;

static void fuzz_warn(void *ctx, const char *logname, uint64_t where, const char *msg)
{
    digest *d = ((warn_sink *)ctx)->cur;
    if (strcmp(logname, "fuzz") != 0 || !*msg)
        abort();
    mix(d, where);
    mix_str(d, msg);
    d->nwarn++;
}

#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); abort(); } } while (0)

/* Passes that read through log_reader_next_ref (the engine's way: the
 * reader's own record, in place) instead of log_reader_next's copy. */
static bool by_ref;

static int next_record(log_reader *r, log_record *rec, char **err)
{
    const log_record *p;
    int rc;
    if (!by_ref)
        return log_reader_next(r, rec, err);
    rc = log_reader_next_ref(r, &p, err);
    if (rc == 1)
        *rec = *p;
    return rc;
}

/* Read every record, checking each, into d. Overhead records (only
 * returned when the reader was asked for them) are checked, not mixed in.
 * With WARNED, d also got the reader's warnings (one per malformed record). */
/* Check one record and mix it into d (positions: the last ones seen). */
static void mix_record(log_reader *r, digest *d, const log_record *rec, uint64_t *last_pos,
                       uint64_t *last_event_pos)
{
    if (rec->kind == LOG_REC_OVERHEAD) {
        CHECK(rec->ovh_ns > 0 && isfinite(rec->ovh_ns));
        CHECK(rec->ovh_spread_ns >= 0 && isfinite(rec->ovh_spread_ns));
        CHECK(rec->pos >= *last_pos && rec->pos >= *last_event_pos);   /* malformed events count too */
        return;
    }
    d->nrec++;
    mix(d, (uint64_t)rec->kind);
    mix(d, rec->pos);
    mix(d, rec->where);
    mix(d, (uint64_t)rec->ts);
    CHECK(rec->pos >= *last_pos);
    *last_pos = rec->pos;
    if (rec->kind == LOG_REC_GAP) {
        mix(d, rec->gap);
        return;
    }
    CHECK(rec->kind == LOG_REC_EVENT);
    CHECK(rec->pos > *last_event_pos);
    *last_event_pos = rec->pos;
    CHECK(rec->ts >= 0);
    CHECK(rec->name_id < log_reader_nnames(r));
    CHECK(rec->name == log_reader_name(r, rec->name_id));
    CHECK(log_name_valid(rec->name, strlen(rec->name)));
    mix(d, (uint64_t)rec->thread);
    mix(d, rec->name_id);
    mix_str(d, rec->name);
    mix(d, rec->nvalues);
    for (uint32_t i = 0; i < rec->nvalues; i++) {
        uint64_t bits;
        CHECK(isfinite(rec->values[i]));
        memcpy(&bits, &rec->values[i], 8);
        mix(d, bits);
    }
}

/* The end of a reading (rc: the last next_record's): mixed in and checked. */
static void read_end(log_reader *r, digest *d, bool warned, int rc, char *err)
{
    log_record rec;
    mix(d, (uint64_t)rc);
    CHECK(rc <= 0);
    CHECK((rc < 0) == (err != NULL));
    if (err)
        mix_str(d, err);
    free(err);
    CHECK(log_reader_nrecords(r) == d->nrec);
    if (warned)
        CHECK(log_reader_nmalformed(r) == d->nwarn);
    /* Once at the end, the reader stays there. */
    if (rc == 0)
        CHECK(log_reader_next(r, &rec, NULL) == 0);
}

/* Read every record, checking each, into d. Overhead records (only
 * returned when the reader was asked for them) are checked, not mixed in.
 * With WARNED, d also got the reader's warnings (one per malformed record). */
static void read_all_ex(log_reader *r, digest *d, bool warned)
{
    log_record rec;
    char *err = NULL;
    int rc;
    uint64_t last_event_pos = 0, last_pos = 0;
    while ((rc = next_record(r, &rec, &err)) == 1)
        mix_record(r, d, &rec, &last_pos, &last_event_pos);
    read_end(r, d, warned, rc, err);
}

/* Read `data` handed over `chunk` bytes at a time (log_reader_open_fed,
 * log_reader_feed: a telemonitor's stream), into d. False, with the open's
 * message in *open_err, when it is not a log. */
static bool read_fed(const uint8_t *data, size_t size, size_t chunk, warn_sink *ws, digest *d,
                     char **open_err)
{
    log_reader *r = NULL;
    size_t fed = 0;
    int rc;
    for (;;) {          /* the header, from all the bytes so far */
        fed = size - fed > chunk ? fed + chunk : size;
        rc = log_reader_open_fed(&r, data, fed, fed == size, "fuzz", fuzz_warn, ws, open_err);
        if (rc != -EAGAIN)
            break;
        CHECK(fed < size && !*open_err);
    }
    if (rc < 0) {
        CHECK(!r && *open_err);
        return false;
    }
    log_record rec;
    char *err = NULL;
    uint64_t last_event_pos = 0, last_pos = 0;
    for (;;) {
        while ((rc = next_record(r, &rec, &err)) == 1)
            mix_record(r, d, &rec, &last_pos, &last_event_pos);
        if (rc != -EAGAIN)
            break;
        CHECK(!err && fed < size + 1);
        log_reader_feed_idle(r);        /* (gives the buffer back when all was read) */
        size_t n = size - fed > chunk ? chunk : size - fed;
        log_reader_feed(r, data + fed, n);
        fed += n;
        if (fed == size)
            log_reader_feed_end(r);
    }
    read_end(r, d, true, rc, err);
    log_reader_free(r);
    return true;
}

static void read_all(log_reader *r, digest *d)
{
    read_all_ex(r, d, true);
}

static int same(const digest *a, const digest *b)
{
    return a->h == b->h && a->nrec == b->nrec && a->nwarn == b->nwarn;
}

/* Open `data` as a file descriptor that is read `chunk` bytes at a time. */
static log_reader *open_chunked(const uint8_t *data, size_t size, size_t chunk, warn_sink *ws,
                                char **err)
{
    int fd = memfd_create("fuzz", 0);
    CHECK(fd >= 0);
    for (size_t off = 0; off < size;) {
        ssize_t n = write(fd, data + off, size - off);
        CHECK(n > 0);
        off += (size_t)n;
    }
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    logr_test_read_max = chunk;
    log_reader *r = log_reader_open(fd, true, "fuzz", fuzz_warn, ws, err);
    logr_test_read_max = 0;
    return r;
}

/* Read the input in every way; all must agree. */
static void check_log(const uint8_t *data, size_t size, size_t chunk)
{
    digest a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 };
    warn_sink ws = { &a }, wc = { &c };
    char *ea = NULL, *ec = NULL;
    log_reader *ra = log_reader_open_mem(data, size, "fuzz", fuzz_warn, &ws, &ea);
    log_reader *rc = open_chunked(data, size, chunk, &wc, &ec);
    CHECK(!ra == !rc);
    /* handed over in pieces (a stream): the same, warnings in the same places */
    digest fd_ = { 0 };
    warn_sink wf = { &fd_ };
    char *ef = NULL;
    bool fed_ok = read_fed(data, size, chunk, &wf, &fd_, &ef);
    CHECK(fed_ok == !!ra);
    if (!ra) {
        CHECK(ea && ec && strcmp(ea, ec) == 0);
        CHECK(ef && strcmp(ea, ef) == 0);
        CHECK(a.nwarn == 0);
        free(ea);
        free(ec);
        free(ef);
        return;
    }
    CHECK(!ea && !ec);
    const log_header *ha = log_reader_header(ra), *hc = log_reader_header(rc);
    CHECK(ha->format == hc->format && ha->nfields == hc->nfields);
    CHECK(ha->tick_ns > 0 && isfinite(ha->tick_ns));
    CHECK(memcmp(&ha->tick_ns, &hc->tick_ns, sizeof ha->tick_ns) == 0);
    for (size_t i = 0; i < ha->nfields; i++) {
        CHECK(strcmp(ha->fields[i].key, hc->fields[i].key) == 0);
        CHECK(strcmp(ha->fields[i].value, hc->fields[i].value) == 0);
    }

    read_all(ra, &a);
    CHECK(same(&a, &fd_));
    logr_test_read_max = chunk;
    read_all(rc, &c);
    logr_test_read_max = 0;
    CHECK(same(&a, &c));

    /* Again after rewinding, both from memory and from the file. */
    ws.cur = &d;
    CHECK(log_reader_rewind(ra) == 0);
    read_all(ra, &d);
    CHECK(same(&a, &d));
    wc.cur = &b;
    CHECK(log_reader_rewind(rc) == 0);
    read_all(rc, &b);
    CHECK(same(&a, &b));

    /* The same without the fast paths (binary Event decoder, ascii lines). */
    digest e = { 0 };
    ws.cur = &e;
    CHECK(log_reader_rewind(ra) == 0);
    logr_set_fastpath(ra, false);
    read_all(ra, &e);
    CHECK(same(&a, &e));

    /* Asked for the writer's cost updates too, the other records are the
     * same (warnings aside: bad updates are reported then). */
    digest f = { 0 }, g = { 0 }, junk = { 0 };
    ws.cur = &junk;
    logr_set_fastpath(ra, true);
    CHECK(log_reader_rewind(ra) == 0);
    by_ref = true;
    read_all_ex(ra, &f, false);
    by_ref = false;
    CHECK(log_reader_rewind(ra) == 0);
    log_reader_want_overhead(ra, true);
    read_all_ex(ra, &g, false);
    CHECK(f.h == g.h && f.nrec == g.nrec);

    /* Read ahead on a second thread in batches of 3 records: the same,
     * warnings in the same places. */
    digest h = { 0 };
    ws.cur = &h;
    log_reader_want_overhead(ra, false);
    CHECK(log_reader_rewind(ra) == 0);
    log_prefetch_tuning t = log_prefetch_tuning_parse("3", NULL, NULL);
    log_reader_prefetch_tune(ra, &t);
    CHECK(log_reader_prefetch(ra, true) == 0);
    read_all(ra, &h);
    CHECK(same(&a, &h));
    /* again, the batches' records handed out in place */
    digest h2 = { 0 };
    ws.cur = &h2;
    CHECK(log_reader_rewind(ra) == 0);
    by_ref = true;
    read_all(ra, &h2);
    by_ref = false;
    CHECK(same(&a, &h2));
    log_reader_free(ra);
    log_reader_free(rc);
}

#endif
