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
#include "pspec/pspec.h"

static const char usage[] =
    "usage: psolve -s SPEC [-i PATH] [-d DATAFILE] [-u NAME ...] [LOG|-]\n"
    "Estimate the unknowns (def X = ?) of the PSpec specification SPEC from a monitoring log,\n"
    "following its solve declarations, and print the specification with the estimates filled in.\n"
    "  -s SPEC       the specification file\n"
    "  -i PATH       colon-separated folders searched for imported specs (default: SPEC's folder)\n"
    "  -d DATAFILE   write the data points of every regression to DATAFILE ('-': standard output; for gnuplot:\n"
    "                'y x1 x2 ...' per line, a '#' header, two blank lines between regressions)\n"
    "  -u NAME ...   solve only these unknowns, named SPEC.NAME; the names end at the next\n"
    "                option or '--'\n"
    "  LOG           the log (cmon-ascii 1 or cmon-bin 1); standard input when absent or '-'\n"
    "  --help, --version\n"
    "Exit status: 0 all estimated, 1 some could not be estimated, 2 errors in the specification,\n"
    "3 the log could not be read.\n";

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
    const char *spec = NULL, *path = NULL, *dpath = NULL, *log = NULL;
    const char **only = calloc((size_t)argc + 1, sizeof *only);
    size_t nonly = 0;
    if (!only)
        return 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "-s") == 0 || strcmp(a, "-i") == 0 || strcmp(a, "-d") == 0) && i + 1 >= argc) {
            fprintf(stderr, "psolve: %s needs an argument\n%s", a, usage);
            return 2;
        }
        if (strcmp(a, "-s") == 0) {
            spec = argv[++i];
        } else if (strcmp(a, "-i") == 0) {
            path = argv[++i];
        } else if (strcmp(a, "-d") == 0) {
            dpath = argv[++i];
        } else if (strcmp(a, "-u") == 0) {
            while (i + 1 < argc && argv[i + 1][0] != '-')
                only[nonly++] = argv[++i];
            if (i + 1 < argc && strcmp(argv[i + 1], "--") == 0)
                i++;
            if (nonly == 0) {
                fprintf(stderr, "psolve: -u needs at least one name (SPEC.NAME)\n");
                return 2;
            }
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            printf("psolve (CMon) %s\n", CMON_VERSION);
            return 0;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "psolve: unknown option '%s'\n%s", a, usage);
            return 2;
        } else if (!log) {
            log = a;
        } else {
            fprintf(stderr, "psolve: more than one log given ('%s' and '%s')\n", log, a);
            return 2;
        }
    }
    /* `-u a.X b.Y fs.log`: a last "name" that is a readable file is the log. */
    if (!log && nonly > 0 && access(only[nonly - 1], R_OK) == 0)
        log = only[--nonly];
    if (!spec) {
        fprintf(stderr, "psolve: no specification given (-s SPEC)\n%s", usage);
        return 2;
    }
    pspec *ps = cli_load_spec("psolve", spec, path);
    if (!ps)
        return 2;
    int fd = cli_open_log("psolve", log, true);
    if (fd < 0) {
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
