/* psolve — estimate the unknown constants of a PSpec specification from a log.
 *
 *   psolve -s SPEC [-i PATH] [-d DATAFILE] [-u NAME ...] [LOG|-]
 *
 * Prints the specification with each solved `= ?` replaced by its estimate.
 * Exit status: 0 every unknown asked for was estimated, 1 some could not be,
 * 2 the spec or its solve declarations have errors, 3 the log is unreadable.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmon/cmdline.h"
#include "pspec/pspec.h"

static const char usage[] =
    "Usage: psolve -s SPEC [-i PATH] [-d DATAFILE] [-u NAME ...] [LOG|-]\n"
    "Estimate the unknowns (def X = ?) of the PSpec specification SPEC from a monitoring log,\n"
    "following its solve declarations, and print the specification with the estimates filled in.\n"
    "\n"
    "  -s, --spec SPEC         the specification file ('-': standard input; the log must\n"
    "                          then be a named file)\n"
    "  -i, --path PATH         colon-separated folders searched for imported specs\n"
    "                          (default: SPEC's folder)\n"
    "  -d, --data DATAFILE     write the data points of every regression to DATAFILE ('-':\n"
    "                          standard output; for gnuplot: 'y x1 x2 ...' per line, a '#'\n"
    "                          header, two blank lines between regressions)\n"
    "  -u, --unknowns NAME ... solve only these unknowns, named SPEC.NAME; the names end at\n"
    "                          the next option or '--'\n"
    "  -h, --help              show this help and exit\n"
    "  -V, --version           show the version and exit\n"
    "  LOG                     the log (cmon-ascii 1 or cmon-bin 1); standard input when\n"
    "                          absent or '-'\n"
    "Long options may be written with one dash or two.\n"
    "\n"
    "Exit status:\n"
    "  0  every unknown asked for was estimated\n"
    "  1  some could not be estimated\n"
    "  2  errors in the specification or its solve declarations, or the command line is wrong\n"
    "  3  the log could not be read\n";

typedef struct ctx {
    FILE *data;
    int blocks;
} ctx;

static void on_header(void *p, unsigned line, const char *const *names, size_t n)
{
    ctx *c = p;
    if (!c->data)
        return;
    if (c->blocks++)
        fputs("\n\n", c->data);
    fprintf(c->data, "# solve at line %u:", line);
    for (size_t i = 0; i < n; i++)
        fprintf(c->data, " %s", names[i]);
    fputc('\n', c->data);
}

/* The shortest %g form of x that reads back as exactly x. */
static void print_exact(FILE *f, double x)
{
    char buf[40];
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    fputs(buf, f);
}

static void on_point(void *p, unsigned line, const double *v, size_t n)
{
    ctx *c = p;
    (void)line;
    if (!c->data)
        return;
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputc(' ', c->data);
        print_exact(c->data, v[i]);
    }
    fputc('\n', c->data);
}

static void on_problem(void *p, const char *msg)
{
    (void)p;
    fprintf(stderr, "%s\n", msg);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "spec", required_argument, NULL, 's' },
        { "path", required_argument, NULL, 'i' },
        { "data", required_argument, NULL, 'd' },
        { "unknowns", required_argument, NULL, 'u' },
        { NULL, 0, NULL, 0 },
    };
    static const struct cmon_cmdline cl = { "psolve", usage, "s:i:d:u:", longopts };
    const char *spec = NULL, *path = NULL, *dpath = NULL, *log = NULL;
    /* file-scope, so that a usage error's exit() leaves nothing unreachable */
    static const char **only;
    size_t nonly = 0;
    int ch;
    only = calloc((size_t)argc + 1, sizeof *only);
    if (!only)
        return 3;
    while ((ch = cmon_cmdline_next(&cl, argc, argv)) != -1) {
        switch (ch) {
        case 's': spec = optarg; break;
        case 'i': path = optarg; break;
        case 'd': dpath = optarg; break;
        case 'u':
            /* -u takes names up to the next option or "--" */
            if (optarg[0] == '-')
                cmon_cmdline_fail(&cl, "-u needs at least one name (SPEC.NAME)");
            only[nonly++] = optarg;
            while (optind < argc && argv[optind][0] != '-')
                only[nonly++] = argv[optind++];
            break;
        }
    }
    if (argc - optind > 1)
        cmon_cmdline_fail(&cl, "more than one log given ('%s' and '%s')", argv[optind], argv[optind + 1]);
    log = optind < argc ? argv[optind] : NULL;
    /* `-u a.X b.Y fs.log`: a last "name" that is a readable file is the log. */
    if (!log && nonly > 0 && access(only[nonly - 1], R_OK) == 0)
        log = only[--nonly];
    if (log && nonly == 0 && only[0])
        cmon_cmdline_fail(&cl, "-u needs at least one name (SPEC.NAME) before the log '%s'", log);
    if (!spec)
        cmon_cmdline_fail(&cl, "no specification given (-s SPEC)");
    if (cli_spec_on_stdin(spec) && (!log || strcmp(log, "-") == 0))
        cmon_cmdline_fail(&cl, "the specification is on standard input (-s -), so the log must be a named file");
    pspec *ps = cli_load_spec("psolve", spec, path);
    if (!ps) {
        free(only);
        return 2;
    }
    int fd = cli_open_log("psolve", log, true);
    if (fd < 0) {
        free(only);
        pspec_free(ps);
        return 3;
    }
    ctx c = {0};
    if (dpath && strcmp(dpath, "-") == 0) {
        c.data = stdout;
    } else if (dpath) {
        c.data = fopen(dpath, "w");
        if (!c.data) {
            fprintf(stderr, "psolve: %s: %s\n", dpath, strerror(errno));
            close(fd);
            free(only);
            pspec_free(ps);
            return 3;
        }
    }
    pspec_solve_options opt = {.only = nonly ? only : NULL, .nonly = nonly, .data_header = on_header,
                               .data_point = on_point, .problem = on_problem, .warn = cli_warn, .ctx = &c};
    char *out = NULL, *err = NULL;
    int status = pspec_solve(ps, fd, cli_log_name(log), &opt, &out, &err);
    if (err) {
        if (status == PSPEC_EXIT_LOG)
            fprintf(stderr, "psolve: %s: %s\n", cli_log_name(log), err);
        else if (strstr(err, ": error: ") || strstr(err, ": warning: "))
            fprintf(stderr, "%s\n", err); /* FILE:LINE:COL: error: ... */
        else
            fprintf(stderr, "psolve: %s\n", err);
    }
    if (out && status != PSPEC_EXIT_SPEC && status != PSPEC_EXIT_LOG)
        fputs(out, stdout);
    free(out);
    free(err);
    if (c.data && c.data != stdout && fclose(c.data) != 0) {
        fprintf(stderr, "psolve: %s: %s\n", dpath, strerror(errno));
        status = status ? status : 3;
    }
    if (fd > 0)
        close(fd);
    free(only);
    pspec_free(ps);
    if (fflush(stdout) != 0)
        return 3;
    return status;
}
