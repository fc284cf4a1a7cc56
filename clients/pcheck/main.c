/* pcheck — check a PSpec specification against a monitoring log.
 *
 *   pcheck -s SPEC [-i PATH] [-f] [-cont] [-v INTERVALFILE] [-e EVENTFILE] [--json] [LOG|-]
 *
 * Exit status: 0 every assertion held, 1 some failed or was UNDEFINED,
 * 2 the spec did not parse or type-check, 3 the log could not be read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "pspec/pspec.h"

static const char usage[] =
    "usage: pcheck -s SPEC [-i PATH] [-f] [-cont] [-v INTERVALFILE] [-e EVENTFILE] [--json] [LOG|-]\n"
    "Check the assertions of the PSpec specification SPEC against a monitoring log\n"
    "(cmon-ascii 1 or cmon-bin 1, detected; standard input when LOG is absent or '-').\n"
    "  -s SPEC           the specification file\n"
    "  -i PATH           colon-separated folders searched for imported specs (default: SPEC's folder)\n"
    "  -f                report failures only\n"
    "  -cont             continuous mode: report each failing interval or event of an outermost\n"
    "                    {& ...} assertion as soon as it closes; everything else at end of log\n"
    "  -v INTERVALFILE   write every interval (uid, type, positions, timestamps, metrics) to the file\n"
    "  -e EVENTFILE      write every event relevant to the spec to the file ('-': standard output)\n"
    "  --json            JSON Lines instead of text\n"
    "  --help, --version\n"
    "Exit status: 0 all assertions held, 1 some failed or were UNDEFINED,\n"
    "2 the specification has errors, 3 the log could not be read.\n";

typedef struct offender_list {
    char **lines;
    size_t n, cap;
} offender_list;

typedef struct out {
    bool json, failures_only, cont;
    FILE *vfile, *efile;
    offender_list *pending;     /* offline: offenders per assertion line, printed after its verdict */
    size_t npending;
    unsigned *pending_line;     /* the assertion line each list belongs to */
    const char **pending_file;
} out;

static offender_list *pending_for(out *o, const char *file, unsigned line)
{
    for (size_t i = 0; i < o->npending; i++)
        if (o->pending_line[i] == line && strcmp(o->pending_file[i], file) == 0)
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

static void emit_line(const char *s)
{
    fputs(s, stdout);
    fputc('\n', stdout);
}

static void on_report(void *ctx, const pspec_report *r)
{
    out *o = ctx;
    pspec_format fmt = o->json ? PSPEC_FORMAT_JSON : PSPEC_FORMAT_TEXT;
    char *s = pspec_report_format(r, fmt);
    switch (pspec_report_kind_of(r)) {
    case PSPEC_REPORT_OFFENDER:
        if (o->cont) {
            emit_line(s);
            fflush(stdout);
            break;
        }
        {
            offender_list *l = pending_for(o, pspec_report_file(r), pspec_report_line(r));
            if (l->n == l->cap) {
                l->cap = l->cap ? l->cap * 2 : 16;
                l->lines = realloc(l->lines, l->cap * sizeof *l->lines);
                if (!l->lines) {
                    fprintf(stderr, "pcheck: out of memory\n");
                    exit(PSPEC_EXIT_LOG);
                }
            }
            l->lines[l->n++] = s;
            return;     /* kept */
        }
    case PSPEC_REPORT_ASSERT:
        if (!(o->failures_only && pspec_report_result(r) == PSPEC_PASS))
            emit_line(s);
        if (!o->cont) {
            offender_list *l = pending_for(o, pspec_report_file(r), pspec_report_line(r));
            for (size_t i = 0; i < l->n; i++) {
                emit_line(l->lines[i]);
                free(l->lines[i]);
            }
            free(l->lines);
            l->lines = NULL;
            l->n = l->cap = 0;
        }
        break;
    case PSPEC_REPORT_PRINT:
    case PSPEC_REPORT_VALUE:
        emit_line(s);
        break;
    case PSPEC_REPORT_INTERVAL:
        if (o->vfile)
            fprintf(o->vfile, "%s\n", s);
        break;
    case PSPEC_REPORT_EVENT:
        if (o->efile)
            fprintf(o->efile, "%s\n", s);
        break;
    }
    free(s);
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

static void need_arg(int i, int argc, const char *flag)
{
    if (i + 1 >= argc) {
        fprintf(stderr, "pcheck: %s needs an argument\n%s", flag, usage);
        exit(PSPEC_EXIT_SPEC);
    }
}

int main(int argc, char **argv)
{
    const char *spec = NULL, *path = NULL, *vpath = NULL, *epath = NULL, *log = NULL;
    out o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-s") == 0) {
            need_arg(i, argc, a);
            spec = argv[++i];
        } else if (strcmp(a, "-i") == 0) {
            need_arg(i, argc, a);
            path = argv[++i];
        } else if (strcmp(a, "-v") == 0) {
            need_arg(i, argc, a);
            vpath = argv[++i];
        } else if (strcmp(a, "-e") == 0) {
            need_arg(i, argc, a);
            epath = argv[++i];
        } else if (strcmp(a, "-f") == 0) {
            o.failures_only = true;
        } else if (strcmp(a, "-cont") == 0 || strcmp(a, "--cont") == 0) {
            o.cont = true;
        } else if (strcmp(a, "--json") == 0 || strcmp(a, "-json") == 0) {
            o.json = true;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            printf("pcheck (CMon) %s\n", CMON_VERSION);
            return 0;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "pcheck: unknown option '%s'\n%s", a, usage);
            return PSPEC_EXIT_SPEC;
        } else if (!log) {
            log = a;
        } else {
            fprintf(stderr, "pcheck: more than one log given ('%s' and '%s')\n", log, a);
            return PSPEC_EXIT_SPEC;
        }
    }
    if (!spec) {
        fprintf(stderr, "pcheck: no specification given (-s SPEC)\n%s", usage);
        return PSPEC_EXIT_SPEC;
    }
    pspec *ps = cli_load_spec("pcheck", spec, path);
    if (!ps)
        return PSPEC_EXIT_SPEC;
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
                               .report = on_report, .warn = cli_warn, .ctx = &o};
    char *err = NULL;
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
    for (size_t i = 0; i < o.npending; i++) {
        for (size_t k = 0; k < o.pending[i].n; k++)
            free(o.pending[i].lines[k]);
        free(o.pending[i].lines);
    }
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
