/* pinfer — infer a PSpec specification from a monitoring log.
 *
 *   pinfer [-o FILE] [--min-count N] [--percentile P] [LOG|-]
 *
 * Mines start/end event pairs (infer.c) and writes a specification whose
 * bounds are unknowns that psolve fills from the same log (emit.c).
 * Exit status: 0 a specification with intervals was written, 1 nothing to
 * infer, or nothing better than chance (an empty specification was
 * written), 2 usage, 3 the log could not be read (or the output written).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmon/cmdline.h"
#include "infer.h"

static const char usage[] =
    "Usage: pinfer [-o FILE] [--min-count N] [--percentile P] [LOG|-]\n"
    "Infer a PSpec specification from a monitoring log: interval types from start and end\n"
    "events that share a thread or an attribute value and pair better than chance (better\n"
    "than with their order shuffled), split where an attribute of theirs explains their\n"
    "durations, with bounds left open (def X = ?) for psolve to fill:\n"
    "  pinfer LOG > s.pspec && psolve -s s.pspec LOG > solved.pspec && pcheck -s solved.pspec LOG\n"
    "\n"
    "  -o, --output FILE       write the specification to FILE instead of standard output\n"
    "  -m, --min-count N       ignore start/end pairs seen fewer than N times (default 5)\n"
    "  -p, --percentile P      bound each duration by its P-th percentile, 0 < P <= 100\n"
    "                          (default 99; 100: the longest)\n"
    "  -h, --help              show this help and exit\n"
    "  -V, --version           show the version and exit\n"
    "  LOG                     the log (cmon-ascii 1 or cmon-bin 1); standard input when\n"
    "                          absent or '-'\n"
    "Long options may be written with one dash or two.\n"
    "\n"
    "Exit status:\n"
    "  0  a specification was written\n"
    "  1  nothing to infer: no consistent start/end pairs, or none better than chance (an\n"
    "     empty specification is written)\n"
    "  2  the command line is wrong\n"
    "  3  the log could not be read, or the output could not be written\n";

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "output", required_argument, NULL, 'o' },
        { "min-count", required_argument, NULL, 'm' },
        { "percentile", required_argument, NULL, 'p' },
        { NULL, 0, NULL, 0 },
    };
    static const struct cmon_cmdline cl = { "pinfer", usage, "o:m:p:", longopts };
    const char *opath = NULL;
    pi_options opt = { .min_count = 5, .warn = cli_warn };
    double percentile = 99;
    int ch;
    while ((ch = cmon_cmdline_next(&cl, argc, argv)) != -1) {
        char *end;
        switch (ch) {
        case 'o': opath = optarg; break;
        case 'm': {
            errno = 0;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || v < 1 || optarg[0] == '-')
                cmon_cmdline_fail(&cl, "bad value '%s' for --min-count (a whole number, at least 1)", optarg);
            opt.min_count = v;
            break;
        }
        case 'p':
            errno = 0;
            percentile = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(percentile > 0 && percentile <= 100))
                cmon_cmdline_fail(&cl, "bad value '%s' for --percentile (above 0, at most 100)", optarg);
            break;
        }
    }
    if (argc - optind > 1)
        cmon_cmdline_fail(&cl, "more than one log given ('%s' and '%s')", argv[optind], argv[optind + 1]);
    const char *log = optind < argc ? argv[optind] : NULL;

    /* three passes over the log: a pipe is first copied to a temporary file */
    int fd = cli_open_log("pinfer", log, true);
    if (fd < 0)
        return 3;
    char *err = NULL;
    pi_model *m = pi_infer(fd, cli_log_name(log), &opt, &err);
    if (fd > 0)
        close(fd);
    if (!m) {
        fprintf(stderr, "pinfer: %s: %s\n", cli_log_name(log), err);
        free(err);
        return 3;
    }
    FILE *out = stdout;
    if (opath && strcmp(opath, "-") != 0) {
        out = fopen(opath, "w");
        if (!out) {
            fprintf(stderr, "pinfer: %s: %s\n", opath, strerror(errno));
            pi_model_free(m);
            return 3;
        }
    }
    struct pi_emit_options eo = { .percentile = percentile, .min_count = opt.min_count };
    int status = m->niv ? 0 : 1;
    if (pi_emit(out, m, &eo) < 0 || (out != stdout ? fclose(out) : fflush(out)) != 0) {
        fprintf(stderr, "pinfer: %s: %s\n", opath && out != stdout ? opath : "<stdout>", strerror(errno));
        status = 3;
    }
    if (status == 1 && m->ndropped)
        fprintf(stderr, "pinfer: %s: no start/end pairs seen at least %llu times that pair better than chance "
                        "(%u dropped); the specification is empty\n",
                cli_log_name(log), (unsigned long long)opt.min_count, m->ndropped);
    else if (status == 1)
        fprintf(stderr, "pinfer: %s: no start/end pairs seen at least %llu times; the specification is empty\n",
                cli_log_name(log), (unsigned long long)opt.min_count);
    pi_model_free(m);
    return status;
}
