/* test_pspec_stream.c — a continuous check fed by its caller (pspec.h,
 * pspec_stream_*): for a spec of one pass, the log's bytes fed in any cut
 * give the reports, the warnings and the exit status that pspec_check gives
 * on the same bytes from a file with opt->continuous.
 *
 * Every language test's spec (tests/lang/NAME.pspec, its log by its
 * '% log:' directive, NAME.log by default) that loads and needs one pass is
 * checked against its log as written and converted to cmon-bin (ending in
 * an End record); each is fed all at once, one byte at a time, in
 * pseudo-random cuts and (logs of at most 4 KiB) cut in two at every byte,
 * and must agree with pspec_check on a file holding the same bytes. Then
 * the edges: the record count, a spec of two passes, an empty and a
 * header-only log, a header cut in the middle of a line, a line longer
 * than the reader takes, and two streams of one pspec interleaved on one
 * thread.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logread.h"
#include "logwrite.h"
#include "pspec/pspec.h"

#define LANG(f) PSPEC_LANG_DIR "/" f

/* --- what a check says -------------------------------------------------------- */

/* A growing string: the reports (JSON, one a line) and warnings of a check,
 * then its exit status and error message. */
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

static void out_str(out *o, const char *s)
{
    out_put(o, s, strlen(s));
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
    snprintf(w, sizeof w, " at %llu: ", (unsigned long long)where);
    out_str(o, "warning: ");
    out_str(o, logname);
    out_str(o, w);
    out_str(o, msg);
    out_put(o, "\n", 1);
}

/* The end of a check's output: its status and message; the string is the
 * caller's. */
static char *out_finish(out *o, int rc, char *err)
{
    char tail[32];
    snprintf(tail, sizeof tail, "exit %d", rc);
    out_str(o, tail);
    if (err) {
        out_str(o, " (");
        out_str(o, err);
        out_str(o, ")");
    }
    out_put(o, "\n", 1);
    free(err);
    free(o->line);
    return o->s;
}

static pspec_check_options options(out *o)
{
    return (pspec_check_options){
        .continuous = true,
        .explain = true,
        .summaries_s = 60,
        .threads = 1,
        .report = on_report,
        .warn = on_warn,
        .ctx = o,
    };
}

/* A temporary file holding `data`, at its start, unlinked already. */
static int temp_file(const void *data, size_t len)
{
    const char *dir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/test_pspec_stream.XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    const char *p = data;
    for (size_t done = 0; done < len;) {
        ssize_t n = write(fd, p + done, len - done);
        assert_true(n > 0);
        done += (size_t)n;
    }
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    return fd;
}

/* pspec_check on a file holding `data`. */
static char *check_file(pspec *ps, const char *logname, const void *data, size_t len)
{
    out o = {0};
    out_str(&o, "");
    pspec_check_options opt = options(&o);
    int fd = temp_file(data, len);
    char *err = NULL;
    int rc = pspec_check(ps, fd, logname, &opt, &err);
    close(fd);
    return out_finish(&o, rc, err);
}

/* How the bytes are cut for pspec_stream_feed. */
typedef enum cut {
    CUT_WHOLE,                 /* all at once */
    CUT_BYTES,                 /* one byte at a time */
    CUT_RANDOM,                /* pseudo-random sizes 1..4096 */
    CUT_RANDOM_SMALL,          /* pseudo-random sizes 1..64 */
    CUT_TWO,                   /* two pieces: the first as long as the seed says */
} cut;

static const char *const cut_names[] = { "all at once", "one byte at a time", "random cuts of 1..4096",
                                         "random cuts of 1..64", "in two" };

/* A fixed pseudo-random sequence (xorshift64). */
static uint64_t rnd_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static size_t cut_size(cut c, uint64_t *seed, size_t left)
{
    size_t n;
    switch (c) {
    case CUT_WHOLE: n = left; break;
    case CUT_BYTES: n = 1; break;
    case CUT_RANDOM: n = 1 + (size_t)(rnd_next(seed) % 4096); break;
    case CUT_RANDOM_SMALL: n = 1 + (size_t)(rnd_next(seed) % 64); break;
    default: n = *seed ? (size_t)*seed : left; *seed = 0; break;
    }
    return n < left ? n : left;
}

/* A stream of `ps` fed `data` in cuts of kind `c`; feeding stops once the
 * stream says the check is over, as a caller would. The records it counted
 * go to *records (may be NULL). */
static char *check_fed(pspec *ps, const char *logname, const void *data, size_t len, cut c, uint64_t seed,
                       uint64_t *records)
{
    out o = {0};
    out_str(&o, "");
    pspec_check_options opt = options(&o);
    char *err = NULL;
    pspec_stream *s = pspec_stream_new(ps, logname, &opt, &err);
    assert_non_null(s);
    assert_null(err);
    const char *p = data;
    uint64_t seen = 0;
    for (size_t done = 0; done < len;) {
        size_t n = cut_size(c, &seed, len - done);
        bool more = pspec_stream_feed(s, p + done, n);
        done += n;
        uint64_t now = pspec_stream_records(s);
        assert_true(now >= seen);
        seen = now;
        if (!more)
            break;
    }
    int rc = pspec_stream_end(s, &err);
    if (records)
        *records = pspec_stream_records(s);
    pspec_stream_free(s);
    return out_finish(&o, rc, err);
}

/* Fail with where `got` first differs from `want`. */
static void expect_same(const char *what, const char *want, const char *got)
{
    if (strcmp(want, got) == 0)
        return;
    size_t i = 0;
    while (want[i] && want[i] == got[i])
        i++;
    size_t from = i > 300 ? i - 300 : 0;
    fprintf(stderr, "%s: differs from pspec_check at byte %zu\n--- pspec_check, from byte %zu:\n%.1200s\n"
            "--- the stream:\n%.1200s\n", what, i, from, want + from, got + from);
    fail_msg("%s: differs from pspec_check (above)", what);
}

/* The whole of a file (NULL when it cannot be read). */
static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *s = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 > cap) {
            cap = (n + 4096) * 2;
            s = realloc(s, cap);
            if (!s)
                abort();
        }
        size_t got = fread(s + n, 1, cap - n - 1, f);
        if (got == 0)
            break;
        n += got;
    }
    fclose(f);
    s[n] = '\0';
    *len = n;
    return s;
}

/* --- every language test ------------------------------------------------------ */

/* The directives of a language test (tests/lang/run.py): the log ('none':
 * empty.log, as run.py does) and an import folder (-i DIR). */
typedef struct directives {
    char log[256];
    char import[256];
} directives;

static void read_directives(const char *spec_text, const char *name, directives *d)
{
    snprintf(d->log, sizeof d->log, "%s.log", name);
    d->import[0] = '\0';
    const char *p = spec_text;
    while (*p) {
        size_t n = strcspn(p, "\r\n");
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line - 1 ? n : sizeof line - 1), p);
        p += n;
        while (*p == '\r' || *p == '\n')
            p++;
        const char *l = line + strspn(line, " \t");
        if (!*l)
            continue;
        if (*l != '%')
            break;
        l += 1 + strspn(l + 1, " \t");
        char v[256];
        if (sscanf(l, "log: %255s", v) == 1)
            snprintf(d->log, sizeof d->log, "%s", strcmp(v, "none") == 0 ? "empty.log" : v);
        else if (strncmp(l, "args:", 5) == 0) {
            const char *i = strstr(l, "-i ");
            if (i && sscanf(i + 3, "%255s", v) == 1)
                snprintf(d->import, sizeof d->import, "%s/%s", PSPEC_LANG_DIR, v);
        }
    }
}

/* The ascii log `data` written again as cmon-bin, ending in an End record
 * (NULL when it does not read: a bad header). */
static char *to_binary(const char *logname, const char *data, size_t len, size_t *blen)
{
    char *err = NULL;
    log_reader *r = log_reader_open_mem(data, len, logname, NULL, NULL, &err);
    if (!r) {
        free(err);
        return NULL;
    }
    log_reader_want_overhead(r, true);
    int fd = temp_file("", 0);
    const log_header *h = log_reader_header(r);
    log_writer *w = NULL;
    if (log_writer_open(&w, fd, false, LOG_FORMAT_BIN, h->fields, h->nfields) != 0) {
        log_reader_free(r);
        close(fd);
        return NULL;
    }
    log_record rec;
    int rc;
    while ((rc = log_reader_next(r, &rec, &err)) == 1) {
        if (rec.kind == LOG_REC_EVENT)
            assert_int_equal(log_writer_event(w, rec.name, rec.ts, rec.thread, rec.values, rec.nvalues), 0);
        else if (rec.kind == LOG_REC_GAP)
            assert_int_equal(log_writer_gap(w, rec.gap), 0);
        else if (rec.kind == LOG_REC_OVERHEAD)
            assert_int_equal(log_writer_overhead(w, rec.thread, rec.ovh_ns, rec.ovh_spread_ns), 0);
    }
    free(err);
    assert_int_equal(rc, 0);
    assert_int_equal(log_writer_end(w), 0);
    assert_int_equal(log_writer_close(w), 0);
    log_reader_free(r);
    off_t end = lseek(fd, 0, SEEK_END);
    assert_true(end > 0);
    char *b = malloc((size_t)end);
    assert_non_null(b);
    assert_int_equal(pread(fd, b, (size_t)end, 0), end);
    close(fd);
    *blen = (size_t)end;
    return b;
}

/* One spec against one log's bytes: pspec_check, then the stream all at
 * once, a byte at a time, in random cuts (three sequences of each size) and,
 * for a log of at most 4 KiB, cut in two at every byte; returns what
 * pspec_check said (the caller's). */
static char *compare_all_cuts(pspec *ps, const char *what, const char *logname, const char *data, size_t len)
{
    char *want = check_file(ps, logname, data, len);
    char label[700];
    for (cut c = CUT_WHOLE; c <= CUT_RANDOM_SMALL; c++) {
        for (uint64_t k = 0; k < (c >= CUT_RANDOM ? 3 : 1); k++) {
            char *got = check_fed(ps, logname, data, len, c, 0x9e3779b97f4a7c15ull ^ (len + k), NULL);
            snprintf(label, sizeof label, "%s, %s (sequence %u)", what, cut_names[c], (unsigned)k);
            expect_same(label, want, got);
            free(got);
        }
    }
    for (size_t at = 1; len <= 4096 && at < len; at++) {
        char *got = check_fed(ps, logname, data, len, CUT_TWO, at, NULL);
        snprintf(label, sizeof label, "%s, %s after byte %zu", what, cut_names[CUT_TWO], at);
        expect_same(label, want, got);
        free(got);
    }
    return want;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_every_language_test(void **state)
{
    (void)state;
    DIR *dir = opendir(PSPEC_LANG_DIR);
    assert_non_null(dir);
    char **names = NULL;
    size_t nnames = 0;
    for (struct dirent *e; (e = readdir(dir));) {
        size_t n = strlen(e->d_name);
        if (n > 6 && strcmp(e->d_name + n - 6, ".pspec") == 0) {
            names = realloc(names, (nnames + 1) * sizeof *names);
            assert_non_null(names);
            names[nnames++] = strndup(e->d_name, n - 6);
        }
    }
    closedir(dir);
    qsort(names, nnames, sizeof *names, cmp_names);

    unsigned ascii = 0, binary = 0, skipped = 0, failed = 0, ended = 0;
    for (size_t i = 0; i < nnames; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.pspec", PSPEC_LANG_DIR, names[i]);
        size_t slen = 0;
        char *spec_text = read_all(path, &slen);
        assert_non_null(spec_text);
        directives d;
        read_directives(spec_text, names[i], &d);
        free(spec_text);

        pspec *ps = pspec_new();
        assert_non_null(ps);
        if (d.import[0])
            pspec_set_search_path(ps, d.import);
        char logpath[512];
        snprintf(logpath, sizeof logpath, "%s/%s", PSPEC_LANG_DIR, d.log);
        size_t len = 0;
        char *log = read_all(logpath, &len);
        if (pspec_load_file(ps, path) != 0 || pspec_passes(ps) > 1 || !log) {
            skipped++;
            free(log);
            pspec_free(ps);
            continue;
        }
        char what[600];
        snprintf(what, sizeof what, "%s.pspec on %s", names[i], d.log);
        char *ref = compare_all_cuts(ps, what, d.log, log, len);
        ascii++;
        if (strstr(ref, "\nexit 1") || strncmp(ref, "exit 1", 6) == 0)
            failed++;
        free(ref);

        size_t blen = 0;
        char *bin = to_binary(d.log, log, len, &blen);
        if (bin) {
            snprintf(what, sizeof what, "%s.pspec on %s as cmon-bin", names[i], d.log);
            free(compare_all_cuts(ps, what, d.log, bin, blen));
            /* an End record ends the check: feeding stops there */
            out o = {0};
            pspec_check_options opt = options(&o);
            char *err = NULL;
            pspec_stream *s = pspec_stream_new(ps, d.log, &opt, &err);
            assert_non_null(s);
            if (!pspec_stream_feed(s, bin, blen))
                ended++;
            pspec_stream_free(s);
            free(o.s);
            free(o.line);
            free(bin);
            binary++;
        }
        free(log);
        pspec_free(ps);
    }
    for (size_t i = 0; i < nnames; i++)
        free(names[i]);
    free(names);
    print_message("%u specs compared on their logs as written, %u converted to cmon-bin (%u pairs); "
                  "%u skipped (not loading, two passes, no log); %u with failing assertions\n",
                  ascii, binary, ascii + binary, skipped, failed);
    assert_true(ascii + binary >= 100);
    assert_true(ascii >= 50);
    assert_true(failed >= 10);
    assert_int_equal(ended, binary);
}

/* --- the edges ----------------------------------------------------------------- */

static const char small_spec[] =
    "perfspec Small\n"
    "  timed event S(k); E(k);\n"
    "  event N(x);\n"
    "  interval I = s: S, e: E where e.k = s.k metrics t = ts(e) - ts(s) end I;\n"
    "  assert \"short\": {& i : I : i.t < 5 ms};\n"
    "  assert \"small\": {& n : N : n.x < 10};\n"
    "  print {count i : I};\n"
    "end Small\n";

static const char small_header[] =
    "#cmon-ascii 1\n"
    "#program small\n"
    "#tick-ns 1000\n";

/* Seven event records, between a comment, a blank line and a gap. */
static const char small_records[] =
    "1000 1 S 1\n"
    "# a comment\n"
    "2000 1 N 3\n"
    "\n"
    "9000 1 E 1\n"
    "#cmon-gap 2\n"
    "10000 2 S 2\n"
    "11000 2 N 12\n"
    "12000 2 E 2\n"
    "70000000 1 N 1\n";
enum { SMALL_EVENTS = 7 };

static pspec *load_small(void)
{
    pspec *ps = pspec_new();
    assert_non_null(ps);
    assert_int_equal(pspec_load_text(ps, "small.pspec", small_spec, strlen(small_spec)), 0);
    assert_int_equal(pspec_passes(ps), 1);
    return ps;
}

static char *small_log(size_t *len)
{
    size_t n = strlen(small_header) + strlen(small_records);
    char *s = malloc(n + 1);
    assert_non_null(s);
    strcpy(s, small_header);
    strcat(s, small_records);
    *len = n;
    return s;
}

/* The records counted are the log's event records, once each is fed, and
 * not before its line is complete. */
static void test_records(void **state)
{
    (void)state;
    pspec *ps = load_small();
    size_t len;
    char *log = small_log(&len);
    for (cut c = CUT_WHOLE; c <= CUT_RANDOM_SMALL; c++) {
        uint64_t records = 0;
        char *got = check_fed(ps, "small.log", log, len, c, 42, &records);
        assert_int_equal(records, SMALL_EVENTS);
        free(got);
    }

    /* line by line: the count after each line is the event lines so far */
    out o = {0};
    pspec_check_options opt = options(&o);
    char *err = NULL;
    pspec_stream *s = pspec_stream_new(ps, "small.log", &opt, &err);
    assert_non_null(s);
    assert_int_equal(pspec_stream_records(s), 0);
    uint64_t events = 0;
    for (const char *p = log; *p;) {
        size_t n = strcspn(p, "\n") + 1;
        if (n > 2) {           /* its first half: the record is not complete yet */
            assert_true(pspec_stream_feed(s, p, n / 2));
            assert_int_equal(pspec_stream_records(s), events);
            assert_true(pspec_stream_feed(s, p + n / 2, n - n / 2));
        } else {
            assert_true(pspec_stream_feed(s, p, n));
        }
        if (*p >= '0' && *p <= '9')
            events++;
        assert_int_equal(pspec_stream_records(s), events);
        p += n;
    }
    assert_int_equal(events, SMALL_EVENTS);
    assert_int_equal(pspec_stream_end(s, &err), PSPEC_EXIT_FAILED);
    assert_null(err);
    assert_int_equal(pspec_stream_records(s), SMALL_EVENTS);
    pspec_stream_free(s);
    /* the stream's reports: the failure, and the same as from a file */
    char *got = out_finish(&o, PSPEC_EXIT_FAILED, NULL);
    assert_non_null(strstr(got, "\"assert\":\"small\""));
    char *want = check_file(ps, "small.log", log, len);
    expect_same("small.log line by line", want, got);
    free(want);
    free(got);
    free(log);
    pspec_free(ps);
}

/* A spec of two passes cannot be checked as the log comes; nor can
 * nothing. */
static void test_two_passes_refused(void **state)
{
    (void)state;
    pspec *ps = pspec_new();
    assert_non_null(ps);
    out o = {0};
    pspec_check_options opt = options(&o);
    char *err = NULL;
    assert_null(pspec_stream_new(ps, "x.log", &opt, &err));
    assert_non_null(err);
    assert_true(strlen(err) > 0);
    free(err);
    err = NULL;

    assert_int_equal(pspec_load_file(ps, LANG("cont_two_pass.pspec")), 0);
    assert_int_equal(pspec_passes(ps), 2);
    assert_null(pspec_stream_new(ps, "x.log", &opt, &err));
    assert_non_null(err);
    assert_non_null(strstr(err, "2 passes"));
    free(err);
    assert_null(o.s);          /* nothing reported */
    pspec_free(ps);
    pspec_stream_free(NULL);
}

/* No bytes at all: the log could not be read. A header and nothing else:
 * what pspec_check says of the same bytes. */
static void test_empty_and_header_only(void **state)
{
    (void)state;
    pspec *ps = load_small();
    out o = {0};
    pspec_check_options opt = options(&o);
    char *err = NULL;
    pspec_stream *s = pspec_stream_new(ps, "empty.log", &opt, &err);
    assert_non_null(s);
    assert_int_equal(pspec_stream_end(s, &err), PSPEC_EXIT_LOG);
    assert_non_null(err);
    assert_true(strlen(err) > 0);
    free(err);
    assert_int_equal(pspec_stream_records(s), 0);
    pspec_stream_free(s);
    assert_null(o.s);

    /* the same with a zero-length feed first, and as pspec_check says it */
    char *want = check_file(ps, "empty.log", "", 0);
    assert_non_null(strstr(want, "exit 3 ("));
    char *got = check_fed(ps, "empty.log", "", 0, CUT_WHOLE, 1, NULL);
    expect_same("an empty log", want, got);
    free(got);
    s = pspec_stream_new(ps, "empty.log", &opt, &err);
    assert_non_null(s);
    assert_true(pspec_stream_feed(s, "", 0));
    assert_int_equal(pspec_stream_end(s, &err), PSPEC_EXIT_LOG);
    free(err);
    pspec_stream_free(s);
    free(want);

    /* a header only, with its last line ended or not */
    size_t hlen = strlen(small_header);
    for (size_t n = hlen - 1; n <= hlen; n++) {
        want = check_file(ps, "header.log", small_header, n);
        for (cut c = CUT_WHOLE; c <= CUT_RANDOM_SMALL; c++) {
            got = check_fed(ps, "header.log", small_header, n, c, 7, NULL);
            expect_same("a header only", want, got);
            free(got);
        }
        free(want);
    }
    /* a header that is not a log's */
    static const char bad[] = "this is not a log\n1 1 S 1\n";
    want = check_file(ps, "bad.log", bad, strlen(bad));
    assert_non_null(strstr(want, "exit 3 ("));
    for (cut c = CUT_WHOLE; c <= CUT_RANDOM_SMALL; c++) {
        got = check_fed(ps, "bad.log", bad, strlen(bad), c, 7, NULL);
        expect_same("not a log", want, got);
        free(got);
    }
    free(want);
    pspec_free(ps);
}

/* A header cut in the middle of one of its lines, then the rest of it with
 * the records: the same as from a file. */
static void test_header_cut_in_a_line(void **state)
{
    (void)state;
    pspec *ps = load_small();
    size_t len;
    char *log = small_log(&len);
    char *want = check_file(ps, "small.log", log, len);
    assert_non_null(strstr(want, "exit 1\n"));
    const char *mid = strstr(log, "#program") + 4;
    for (size_t at = 1; at < strlen(small_header) + 3; at++) {
        out o = {0};
        out_str(&o, "");
        pspec_check_options opt = options(&o);
        char *err = NULL;
        pspec_stream *s = pspec_stream_new(ps, "small.log", &opt, &err);
        assert_non_null(s);
        size_t first = at == 1 ? (size_t)(mid - log) : at;     /* (the first in "#prog|ram") */
        assert_true(pspec_stream_feed(s, log, first));
        assert_int_equal(pspec_stream_records(s), 0);
        assert_true(pspec_stream_feed(s, log + first, len - first));
        int rc = pspec_stream_end(s, &err);
        pspec_stream_free(s);
        char *got = out_finish(&o, rc, err);
        char label[64];
        snprintf(label, sizeof label, "the header cut after %zu bytes", first);
        expect_same(label, want, got);
        free(got);
    }
    free(want);
    free(log);
    pspec_free(ps);
}

/* A record line longer than a reader takes (1 MiB), fed in pieces: skipped
 * with one warning, as from a file, and the records after it read. */
static void test_long_line(void **state)
{
    (void)state;
    pspec *ps = load_small();
    size_t big = 1024 * 1024 + 20000;
    size_t cap = strlen(small_header) + strlen(small_records) + big + 64;
    char *log = malloc(cap);
    assert_non_null(log);
    size_t len = (size_t)snprintf(log, cap, "%s1000 1 S 1\n500 1 N ", small_header);
    memset(log + len, '7', big);
    len += big;
    len += (size_t)snprintf(log + len, cap - len, "\n%s", small_records);
    char *want = check_file(ps, "long.log", log, len);
    assert_non_null(strstr(want, "longer than"));
    for (cut c = CUT_WHOLE; c <= CUT_RANDOM; c++) {
        if (c == CUT_BYTES)
            continue;
        char *got = check_fed(ps, "long.log", log, len, c, 13, NULL);
        char label[64];
        snprintf(label, sizeof label, "a long line, %s", cut_names[c]);
        expect_same(label, want, got);
        free(got);
    }
    free(want);
    free(log);
    pspec_free(ps);
}

/* Two streams of one pspec, fed in turns on one thread: each says what it
 * says alone. */
static void test_two_streams_interleaved(void **state)
{
    (void)state;
    pspec *ps = pspec_new();
    assert_non_null(ps);
    assert_int_equal(pspec_load_file(ps, LANG("lectern.pspec")), 0);
    assert_true(pspec_passes(ps) <= 1);
    size_t alen = 0;
    char *a = read_all(LANG("lectern.log"), &alen);
    assert_non_null(a);
    /* B: the first half of the same log's lines, then its own ending */
    size_t blen = alen / 2;
    while (blen > 0 && a[blen - 1] != '\n')
        blen--;
    char *b = strndup(a, blen);
    assert_non_null(b);

    char *want_a = check_file(ps, "a.log", a, alen);
    char *want_b = check_file(ps, "b.log", b, blen);
    assert_string_not_equal(want_a, want_b);
    char *alone_a = check_fed(ps, "a.log", a, alen, CUT_RANDOM_SMALL, 3, NULL);
    char *alone_b = check_fed(ps, "b.log", b, blen, CUT_RANDOM_SMALL, 5, NULL);
    expect_same("a.log alone", want_a, alone_a);
    expect_same("b.log alone", want_b, alone_b);

    for (unsigned round = 0; round < 2; round++) {
        out oa = {0}, ob = {0};
        out_str(&oa, "");
        out_str(&ob, "");
        pspec_check_options opta = options(&oa), optb = options(&ob);
        char *err = NULL;
        pspec_stream *sa = pspec_stream_new(ps, "a.log", &opta, &err);
        pspec_stream *sb = pspec_stream_new(ps, "b.log", &optb, &err);
        assert_non_null(sa);
        assert_non_null(sb);
        uint64_t seed = 11 + round;
        size_t da = 0, db = 0;
        bool more_a = true, more_b = true;
        while ((da < alen && more_a) || (db < blen && more_b)) {
            if (da < alen && more_a) {
                size_t n = cut_size(round ? CUT_BYTES : CUT_RANDOM_SMALL, &seed, alen - da);
                more_a = pspec_stream_feed(sa, a + da, n);
                da += n;
            }
            if (db < blen && more_b) {
                size_t n = cut_size(CUT_RANDOM_SMALL, &seed, blen - db);
                more_b = pspec_stream_feed(sb, b + db, n);
                db += n;
            }
        }
        /* B ends first, while A is still open; then A */
        char *errb = NULL, *erra = NULL;
        int rcb = pspec_stream_end(sb, &errb);
        int rca = pspec_stream_end(sa, &erra);
        pspec_stream_free(sa);
        pspec_stream_free(sb);
        char *got_a = out_finish(&oa, rca, erra);
        char *got_b = out_finish(&ob, rcb, errb);
        expect_same("a.log interleaved", want_a, got_a);
        expect_same("b.log interleaved", want_b, got_b);
        free(got_a);
        free(got_b);
    }
    free(alone_a);
    free(alone_b);
    free(want_a);
    free(want_b);
    free(a);
    free(b);
    pspec_free(ps);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_language_test),
        cmocka_unit_test(test_records),
        cmocka_unit_test(test_two_passes_refused),
        cmocka_unit_test(test_empty_and_header_only),
        cmocka_unit_test(test_header_cut_in_a_line),
        cmocka_unit_test(test_long_line),
        cmocka_unit_test(test_two_streams_interleaved),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
