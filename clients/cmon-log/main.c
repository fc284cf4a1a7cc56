/* cmon-log — convert a monitoring log between cmon-ascii 1 and cmon-bin 1.
 *
 * Reads a log of either format (detected from its first bytes), writes it in
 * the chosen one: by default ascii, i.e. a readable dump of a binary log.
 * Header entries and gaps are kept; malformed records are reported on
 * standard error and left out.
 *
 * Exit status: 0 converted, 1 the output could not be written, 2 usage
 * error, 3 the log could not be read.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmon/cmdline.h"
#include "logread.h"
#include "logwrite.h"

enum { EXIT_WRITE = 1, EXIT_USAGE = 2, EXIT_LOG = 3 };

static const char usage_text[] =
    "Usage: cmon-log [-ascii|-binary [-compat]] [-o OUTFILE] [LOG|-]\n"
    "Convert a CMon monitoring log (cmon-ascii 1 or cmon-bin 1, detected\n"
    "automatically) to ascii (the default) or binary.\n"
    "\n"
    "  -a, -ascii, --ascii     write cmon-ascii 1 (default)\n"
    "  -b, -binary, --binary   write cmon-bin 1\n"
    "  -c, -compat, --compat   binary as before 2026-11 (values as doubles,\n"
    "                          absolute timestamps): for older readers\n"
    "  -o, --output FILE       write to FILE instead of standard output\n"
    "  -h, --help              show this help and exit\n"
    "  -V, --version           show the version and exit\n"
    "Long options may be written with one dash or two. LOG defaults to\n"
    "standard input.\n"
    "\n"
    "Exit status:\n"
    "  0  converted\n"
    "  1  the output could not be written\n"
    "  2  bad command line (or a binary log asked for on a terminal)\n"
    "  3  the log could not be read\n";

/* Print a skipped record: LOG:LINE (ascii) or LOG:@OFFSET (binary). */
static void on_warn(void *ctx, const char *logname, uint64_t where, const char *msg)
{
    const log_format *fmt = ctx;
    fprintf(stderr, "%s:%s%" PRIu64 ": warning: %s\n", logname,
            *fmt == LOG_FORMAT_BIN ? "@" : "", where, msg);
}

/* The header to write: the input's entries, with one tick-ns entry holding
 * the tick length the reader settled on (the last valid one). */
static log_header_field *out_header(const log_header *h, size_t *n, char *tick)
{
    log_header_field *f = calloc(h->nfields + 1, sizeof *f);
    if (!f)
        return NULL;
    size_t k = 0, last_tick = SIZE_MAX;
    for (size_t i = 0; i < h->nfields; i++)
        if (strcmp(h->fields[i].key, "tick-ns") == 0)
            last_tick = i;
    snprintf(tick, 40, "%.17g", h->tick_ns);
    for (size_t i = 0; i < h->nfields; i++) {
        if (strcmp(h->fields[i].key, "tick-ns") != 0)
            f[k++] = h->fields[i];
        else if (i == last_tick)
            f[k++] = (log_header_field){ "tick-ns", tick };
    }
    if (last_tick == SIZE_MAX && h->tick_ns != 1)
        f[k++] = (log_header_field){ "tick-ns", tick };
    *n = k;
    return f;
}

/* Writer type ids by reader name id, declared on first use. */
typedef struct type_map {
    int32_t *ids;
    uint32_t n;
} type_map;

/* Write one record; 0 or a negative errno from the writer. */
static int copy_record(const log_reader *r, const log_record *rec, log_writer *w, type_map *tm)
{
    if (rec->kind == LOG_REC_GAP)
        return log_writer_gap(w, rec->gap);
    if (rec->kind == LOG_REC_OVERHEAD)
        return log_writer_overhead(w, rec->thread, rec->ovh_ns, rec->ovh_spread_ns);
    if (rec->name_id >= tm->n) {
        uint32_t n = log_reader_nnames(r);
        int32_t *ids = realloc(tm->ids, n * sizeof *ids);
        if (!ids)
            return -ENOMEM;
        for (uint32_t i = tm->n; i < n; i++)
            ids[i] = -1;
        tm->ids = ids;
        tm->n = n;
    }
    if (tm->ids[rec->name_id] < 0) {
        int t = log_writer_declare(w, rec->name, NULL, 0);
        if (t < 0)
            return t;
        tm->ids[rec->name_id] = t;
    }
    return log_writer_event_id(w, tm->ids[rec->name_id], rec->ts, rec->thread, rec->values,
                               rec->nvalues);
}

/* Copy every record from r to w. Returns 0, or EXIT_LOG / EXIT_WRITE after
 * printing why. */
static int convert(log_reader *r, log_writer *w, const char *logname, const char *outname)
{
    type_map tm = { 0 };
    log_record rec;
    char *err = NULL;
    int rc, wrc = 0, status = 0;
    while ((rc = log_reader_next(r, &rec, &err)) == 1 && (wrc = copy_record(r, &rec, w, &tm)) == 0)
        ;
    if (wrc < 0) {
        fprintf(stderr, "cmon-log: %s: %s\n", outname, strerror(-wrc));
        status = EXIT_WRITE;
    } else if (rc < 0) {
        fprintf(stderr, "cmon-log: %s: %s\n", logname, err);
        status = EXIT_LOG;
    }
    free(err);
    free(tm.ids);
    return status;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "ascii", no_argument, NULL, 'a' },
        { "binary", no_argument, NULL, 'b' },
        { "compat", no_argument, NULL, 'c' },
        { "output", required_argument, NULL, 'o' },
        { NULL, 0, NULL, 0 },
    };
    static const struct cmon_cmdline cl = { "cmon-log", usage_text, "abco:", opts };
    log_format outfmt = LOG_FORMAT_ASCII;
    const char *outpath = NULL;
    bool compat = false;
    int c;
    while ((c = cmon_cmdline_next(&cl, argc, argv)) != -1) {
        switch (c) {
        case 'a': outfmt = LOG_FORMAT_ASCII; break;
        case 'b': outfmt = LOG_FORMAT_BIN; break;
        case 'c': compat = true; break;
        case 'o': outpath = optarg; break;
        }
    }
    if (argc - optind > 1)
        cmon_cmdline_fail(&cl, "more than one LOG given");
    const char *inpath = optind < argc ? argv[optind] : "-";

    /* Open the log and read its header. */
    int in = 0;
    if (strcmp(inpath, "-") != 0 && (in = open(inpath, O_RDONLY | O_CLOEXEC)) < 0) {
        fprintf(stderr, "cmon-log: %s: %s\n", inpath, strerror(errno));
        return EXIT_LOG;
    }
    log_format infmt = 0;
    char *err = NULL;
    log_reader *r = log_reader_open(in, true, inpath, on_warn, &infmt, &err);
    const char *logname = strcmp(inpath, "-") == 0 ? "<stdin>" : inpath;
    if (!r) {
        fprintf(stderr, "cmon-log: %s: %s\n", logname, err);
        free(err);
        return EXIT_LOG;
    }
    const log_header *h = log_reader_header(r);
    infmt = h->format;
    log_reader_want_overhead(r, true);   /* carried across, as gaps are */

    /* Open the output and write the header. */
    int out = 1;
    const char *outname = outpath ? outpath : "<stdout>";
    if (outpath && (out = open(outpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)) < 0) {
        fprintf(stderr, "cmon-log: %s: %s\n", outpath, strerror(errno));
        log_reader_free(r);
        return EXIT_WRITE;
    }
    if (outfmt == LOG_FORMAT_BIN && isatty(out)) {
        fputs("cmon-log: refusing to write a binary log to a terminal (use -o FILE)\n", stderr);
        log_reader_free(r);
        return EXIT_USAGE;
    }
    char tick[40];
    size_t nf = 0;
    log_header_field *hf = out_header(h, &nf, tick);
    log_writer *w = NULL;
    int rc = hf ? log_writer_open(&w, out, outpath != NULL, outfmt, hf, nf) : -ENOMEM;
    free(hf);
    if (rc < 0) {
        fprintf(stderr, "cmon-log: %s: %s\n", outname, strerror(-rc));
        log_reader_free(r);
        return EXIT_WRITE;
    }

    log_writer_set_compat(w, compat);

    /* Copy the records; finish the log only if the input was read to its end. */
    int status = convert(r, w, logname, outname);
    if (status == 0 && (rc = log_writer_end(w)) < 0) {
        fprintf(stderr, "cmon-log: %s: %s\n", outname, strerror(-rc));
        status = EXIT_WRITE;
    }
    if ((rc = log_writer_close(w)) < 0 && status == 0) {
        fprintf(stderr, "cmon-log: %s: %s\n", outname, strerror(-rc));
        status = EXIT_WRITE;
    }
    log_reader_free(r);
    return status;
}
