/* pcheck — check a PSpec specification against a monitoring log.
 *
 *   pcheck -s SPEC [-i PATH] [-f] [-cont] [-v INTERVALFILE] [-e EVENTFILE] [--json] [--explain]
 *          [--compensate] [--plan] [--bounded] [LOG|-]
 *
 * Exit status: 0 every assertion held, 1 some failed or was UNDEFINED,
 * 2 the spec did not parse or type-check (or a usage error: CMON_EXIT_USAGE
 * is the same 2), 3 the log could not be read, 4 nothing failed but something
 * was inconclusive (lost records).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "held.h"
#include "cmon/cmdline.h"
#include "pspec/pspec.h"
#include "program.h"   /* (private: ps_set_prefetch_tuning, for tests) */

static const char usage[] =
    "Usage: pcheck -s SPEC [OPTION]... [LOG|-]\n"
    "Check the assertions of the PSpec specification SPEC against a monitoring log\n"
    "(cmon-ascii 1 or cmon-bin 1, detected; standard input when LOG is absent or '-').\n"
    "\n"
    "  -s, --spec SPEC             the specification file ('-': standard input; the log\n"
    "                              must then be a named file)\n"
    "  -i, --path PATH             colon-separated folders searched for imported specs\n"
    "                              (default: SPEC's folder)\n"
    "  -f, --failures              report failures only\n"
    "  -cont, --cont               continuous mode: report each failing interval or event of\n"
    "                              an outermost {& ...} assertion as soon as it closes;\n"
    "                              everything else at end of log\n"
    "  -v, --intervals FILE        write every interval (uid, type, positions, timestamps,\n"
    "                              metrics) to FILE ('-': standard output)\n"
    "  -e, --events FILE           write every event relevant to the spec to FILE ('-':\n"
    "                              standard output)\n"
    "  -json, --json               JSON Lines instead of text\n"
    "  -explain, --explain         with an assertion that did not hold, the values of the log\n"
    "                              aggregates and constants it uses (its witness)\n"
    "  -compensate, --compensate   subtract the writer's cost per event (the log header's\n"
    "                              #cmon-overhead-ns) from every interval's duration metrics\n"
    "                              (ts(e) - ts(s)), as if every spec said 'compensate;'\n"
    "  -plan, --plan               print the passes, which assertions stream in -cont and the\n"
    "                              state the check keeps, without reading a log; then exit\n"
    "  -summaries, --summaries SECONDS\n"
    "                              for each window of SECONDS of the log's clock ([k*SECONDS,\n"
    "                              (k+1)*SECONDS)) in which intervals closed, once the clock\n"
    "                              passes its end, a summary of each interval type's durations\n"
    "                              (metrics exactly ts(e) - ts(s)) in it: count, sum, sum of\n"
    "                              squares, min, max in ns, and a 1% sketch (for telemonctl\n"
    "                              compare)\n"
    "  -threads, --threads N       1: read the log and check it on one thread; 2 (the\n"
    "                              default with two CPUs or more): a log file read offline\n"
    "                              is read and parsed ahead on a second thread (same results)\n"
    "  -progress, --progress SECONDS\n"
    "                              with -cont --json on a pipe: when every record read so far\n"
    "                              has been checked and reported on and more input is awaited,\n"
    "                              say so as {\"checked\":N} (N event records), at most every\n"
    "                              SECONDS (0: each time); for the telemonitor's accounting\n"
    "  -bounded, --bounded         refuse (exit 2) a specification whose continuous check\n"
    "                              keeps state that grows with the length of the log (a\n"
    "                              second pass, a mapping over the whole log), naming why\n"
    "  -h, --help                  show this help and exit\n"
    "  -V, --version               show the version and exit\n"
    "Long options may be written with one dash or two.\n"
    "\n"
    "Exit status:\n"
    "  0  every assertion held\n"
    "  1  some assertion failed or was UNDEFINED\n"
    "  2  the specification has errors, or the command line is wrong\n"
    "  3  the log could not be read\n"
    "  4  nothing failed or was UNDEFINED, but some assertion or deadline was\n"
    "     inconclusive (records were lost, #cmon-gap, where they could have changed it)\n";

typedef struct out {
    bool json, failures_only, cont;
    double progress_s;          /* --progress: at most this often (< 0: off) */
    double progress_at;         /* when the last {"checked":N} was printed */
    uint64_t progress_n;        /* and its N */
    FILE *vfile, *efile;
    held *pending;              /* offline: offenders per assertion line, printed after its verdict */
    size_t npending;
    unsigned *pending_line;     /* the assertion line each list belongs to */
    const char **pending_file;
    char *line;                 /* the report being printed (reused) */
    size_t line_cap;
} out;

static held *pending_for(out *o, const char *file, unsigned line)
{
    for (size_t i = 0; i < o->npending; i++)
        if (o->pending_line[i] == line &&
            (o->pending_file[i] == file || strcmp(o->pending_file[i], file) == 0))
            return &o->pending[i];
    o->pending = realloc(o->pending, (o->npending + 1) * sizeof *o->pending);
    o->pending_line = realloc(o->pending_line, (o->npending + 1) * sizeof *o->pending_line);
    o->pending_file = realloc(o->pending_file, (o->npending + 1) * sizeof *o->pending_file);
    if (!o->pending || !o->pending_line || !o->pending_file) {
        fprintf(stderr, "pcheck: out of memory\n");
        exit(PSPEC_EXIT_LOG);
    }
    memset(&o->pending[o->npending], 0, sizeof o->pending[0]);
    o->pending_line[o->npending] = line;
    o->pending_file[o->npending] = file;
    return &o->pending[o->npending++];
}

static void emit_line(const char *s, size_t len)
{
    fwrite(s, 1, len, stdout);
    putc('\n', stdout);
}

/* Keeps an offender's line until its assertion's verdict has been printed. */
static void keep_line(held *l, const char *s, size_t len)
{
    if (!held_add(l, s, len)) {
        fprintf(stderr, "pcheck: out of memory\n");
        exit(PSPEC_EXIT_LOG);
    }
}

static void on_report(void *ctx, const pspec_report *r)
{
    out *o = ctx;
    pspec_format fmt = o->json ? PSPEC_FORMAT_JSON : PSPEC_FORMAT_TEXT;
    size_t len = pspec_report_format_into(r, fmt, &o->line, &o->line_cap);
    const char *s = o->line;
    switch (pspec_report_kind_of(r)) {
    case PSPEC_REPORT_OFFENDER:
        if (o->cont) {
            emit_line(s, len);
            fflush(stdout);
            break;
        }
        keep_line(pending_for(o, pspec_report_file(r), pspec_report_line(r)), s, len);
        break;
    case PSPEC_REPORT_ASSERT:
        if (!(o->failures_only && pspec_report_result(r) == PSPEC_PASS))
            emit_line(s, len);
        if (!o->cont) {
            held_flush(pending_for(o, pspec_report_file(r), pspec_report_line(r)), stdout);
        }
        break;
    case PSPEC_REPORT_OVERDUE:
    case PSPEC_REPORT_SUMMARY:
        /* a deadline passed: said the moment the log shows it; a summary
         * of durations, once the log's clock has passed its window */
        emit_line(s, len);
        if (o->cont)
            fflush(stdout);
        break;
    case PSPEC_REPORT_UNCLOSED:
        /* in the JSON stream; as text a note on standard error, so that
         * the report of a spec stays what appendix A says it is */
        if (o->json)
            emit_line(s, len);
        else
            fprintf(stderr, "%s\n", s);
        break;
    case PSPEC_REPORT_PRINT:
    case PSPEC_REPORT_VALUE:
        emit_line(s, len);
        break;
    case PSPEC_REPORT_INTERVAL:
        if (o->vfile) {
            fwrite(s, 1, len, o->vfile);
            putc('\n', o->vfile);
        }
        break;
    case PSPEC_REPORT_EVENT:
        if (o->efile) {
            fwrite(s, 1, len, o->efile);
            putc('\n', o->efile);
        }
        break;
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The check waits for input: everything read so far is checked and what it
 * made due was reported (and flushed), so say how far that is. */
static void on_idle(void *ctx, uint64_t records)
{
    out *o = ctx;
    double t;

    if (records == o->progress_n)
        return;
    t = now_s();
    if (o->progress_n && t - o->progress_at < o->progress_s)
        return;
    o->progress_at = t;
    o->progress_n = records;
    printf("{\"checked\":%llu}\n", (unsigned long long)records);
    fflush(stdout);
}

static FILE *open_out(const char *path)
{
    if (strcmp(path, "-") == 0)
        return stdout;
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "pcheck: %s: %s\n", path, strerror(errno));
        exit(PSPEC_EXIT_LOG);
    }
    return f;
}

int main(int argc, char **argv)
{
    enum { OPT_CONT = 256, OPT_JSON, OPT_PLAN, OPT_EXPLAIN, OPT_BOUNDED, OPT_COMPENSATE, OPT_SUMMARIES,
           OPT_THREADS, OPT_PROGRESS };
    static const struct option longopts[] = {
        { "spec", required_argument, NULL, 's' },
        { "path", required_argument, NULL, 'i' },
        { "failures", no_argument, NULL, 'f' },
        { "cont", no_argument, NULL, OPT_CONT },
        { "intervals", required_argument, NULL, 'v' },
        { "events", required_argument, NULL, 'e' },
        { "json", no_argument, NULL, OPT_JSON },
        { "plan", no_argument, NULL, OPT_PLAN },
        { "explain", no_argument, NULL, OPT_EXPLAIN },
        { "bounded", no_argument, NULL, OPT_BOUNDED },
        { "summaries", required_argument, NULL, OPT_SUMMARIES },
        { "compensate", no_argument, NULL, OPT_COMPENSATE },
        { "threads", required_argument, NULL, OPT_THREADS },
        { "progress", required_argument, NULL, OPT_PROGRESS },
        { NULL, 0, NULL, 0 },
    };
    static const struct cmon_cmdline cl = { "pcheck", usage, "s:i:fv:e:", longopts };
    const char *spec = NULL, *path = NULL, *vpath = NULL, *epath = NULL, *log = NULL;
    out o = {.progress_s = -1};
    bool plan = false, explain = false, bounded = false, compensate = false;
    double summaries = 0;
    unsigned threads = 0;
    char *end;
    int ch;
    while ((ch = cmon_cmdline_next(&cl, argc, argv)) != -1) {
        switch (ch) {
        case 's': spec = optarg; break;
        case 'i': path = optarg; break;
        case 'f': o.failures_only = true; break;
        case OPT_CONT: o.cont = true; break;
        case 'v': vpath = optarg; break;
        case 'e': epath = optarg; break;
        case OPT_JSON: o.json = true; break;
        case OPT_PLAN: plan = true; break;
        case OPT_EXPLAIN: explain = true; break;
        case OPT_BOUNDED: bounded = true; break;
        case OPT_COMPENSATE: compensate = true; break;
        case OPT_SUMMARIES:
            summaries = strtod(optarg, &end);
            if (end == optarg || *end || !(summaries >= 1 && summaries <= 86400))
                cmon_cmdline_fail(&cl, "bad value '%s' for --summaries (seconds, 1 to 86400)", optarg);
            break;
        case OPT_PROGRESS:
            o.progress_s = strtod(optarg, &end);
            if (end == optarg || *end || !(o.progress_s >= 0 && o.progress_s <= 86400))
                cmon_cmdline_fail(&cl, "bad value '%s' for --progress (seconds, 0 to 86400)", optarg);
            break;
        case OPT_THREADS:
            if (strcmp(optarg, "1") != 0 && strcmp(optarg, "2") != 0)
                cmon_cmdline_fail(&cl, "bad value '%s' for --threads (1 or 2)", optarg);
            threads = (unsigned)(optarg[0] - '0');
            break;
        }
    }
    if (argc - optind > 1)
        cmon_cmdline_fail(&cl, "more than one log given ('%s' and '%s')", argv[optind], argv[optind + 1]);
    log = optind < argc ? argv[optind] : NULL;
    if (!spec)
        cmon_cmdline_fail(&cl, "no specification given (-s SPEC)");
    if (o.progress_s >= 0 && !(o.cont && o.json))
        cmon_cmdline_fail(&cl, "--progress needs -cont and --json");
    if (cli_spec_on_stdin(spec) && !plan && (!log || strcmp(log, "-") == 0))
        cmon_cmdline_fail(&cl, "the specification is on standard input (-s -), so the log must be a named file");
    pspec *ps = cli_load_spec("pcheck", spec, path);
    if (!ps)
        return PSPEC_EXIT_SPEC;
    if (plan) {
        char *text = pspec_plan(ps);
        fputs(text, stdout);
        free(text);
        pspec_free(ps);
        return PSPEC_EXIT_OK;
    }
    if (bounded) {
        char *why = pspec_unbounded(ps);
        if (why) {
            fprintf(stderr, "pcheck: %s: refused (--bounded): its state in continuous mode grows with the "
                    "log:\n%s", spec, why);
            free(why);
            pspec_free(ps);
            return PSPEC_EXIT_SPEC;
        }
    }
    if (pspec_uses_unknowns(ps))
        fprintf(stderr, "pcheck: warning: %s uses unknowns (def X = ?); assertions that depend on them "
                "are UNDEFINED until psolve gives them values\n", spec);
    if (o.cont && pspec_passes(ps) > 1)
        fprintf(stderr, "pcheck: warning: %s needs %u passes over the log (a log aggregate inside "
                "another); with -cont it reports only at the end of the log, which is kept in a "
                "temporary file until then\n", spec, pspec_passes(ps));
    int fd = cli_open_log("pcheck", log, pspec_passes(ps) > 1);
    if (fd < 0) {
        pspec_free(ps);
        return PSPEC_EXIT_LOG;
    }
    if (vpath)
        o.vfile = open_out(vpath);
    if (epath)
        o.efile = open_out(epath);
    pspec_check_options opt = {.continuous = o.cont, .want_intervals = vpath != NULL, .want_events = epath != NULL,
                               .explain = explain, .compensate = compensate, .summaries_s = summaries,
                               .threads = threads, .report = on_report, .warn = cli_warn, .ctx = &o};
    if (o.progress_s >= 0) {
        /* a pipe read without blocking, so that the check knows when it waits */
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0)
            opt.idle = on_idle;
    }
    char *err = NULL;
    /* Tests and benchmarks shape the read-ahead thread's hand-over. */
    const char *pf_batch = getenv("PSPEC_PREFETCH_BATCH"), *pf_spin = getenv("PSPEC_PREFETCH_SPIN"),
               *pf_handoff = getenv("PSPEC_PREFETCH_HANDOFF");
    if (pf_batch || pf_spin || pf_handoff) {
        log_prefetch_tuning t = log_prefetch_tuning_parse(pf_batch, pf_spin, pf_handoff);
        ps_set_prefetch_tuning(ps, &t);
    }
    int status = pspec_check(ps, fd, cli_log_name(log), &opt, &err);
    if (err) {
        /* Spec errors found while running are already "FILE:LINE:COL: error: ..." */
        if (status == PSPEC_EXIT_SPEC)
            fprintf(stderr, "%s\n", err);
        else
            fprintf(stderr, "pcheck: %s: %s\n", cli_log_name(log), err);
        free(err);
    }
    fflush(stdout);
    if (o.vfile && o.vfile != stdout)
        fclose(o.vfile);
    if (o.efile && o.efile != stdout)
        fclose(o.efile);
    for (size_t i = 0; i < o.npending; i++)
        held_free(&o.pending[i]);
    free(o.line);
    free(o.pending);
    free(o.pending_line);
    free(o.pending_file);
    if (fd > 0)
        close(fd);
    pspec_free(ps);
    if (ferror(stdout))
        return PSPEC_EXIT_LOG;
    return status;
}
