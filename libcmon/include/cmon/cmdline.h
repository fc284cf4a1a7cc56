/* The command-line convention of every CMon program (docs/HACKING.md,
 * "Command lines"): a thin front end over getopt_long_only(3).
 *
 *  - Every long option is accepted with one dash (the original spellings
 *    -buffer, -rc, -ascii, -cont) and with two (--buffer); a one-letter
 *    word such as -s is the short option when the program has one.
 *  - -h/--help prints the program's usage on standard output, exit 0.
 *  - -V/--version prints "PROG (CMon) VERSION" on standard output, exit 0.
 *  - A usage error prints exactly "PROG: MESSAGE" and
 *    "Try 'PROG --help' for more information." on standard error, nothing
 *    on standard output, and exits with CMON_EXIT_USAGE (2). PROG is the
 *    program's name, never argv[0].
 *
 * Like getopt(3) itself, this is the one part of libcmon that prints and
 * exits: it runs before the program has anything to clean up. It uses
 * getopt's global state (optind, optarg), so it is not reentrant. */
#ifndef CMON_CMDLINE_H
#define CMON_CMDLINE_H

#include <getopt.h>

/* Exit status of a usage error, the same for every program. */
#define CMON_EXIT_USAGE 2

/* Most long options a program may declare (help and version excluded). */
#define CMON_CMDLINE_MAX_OPTS 48

/* A program's command line. */
struct cmon_cmdline {
	const char *prog;                /* name in messages and --version */
	const char *usage;               /* --help text: "Usage: PROG ...", ends with "Exit status: ..." */
	const char *shortopts;           /* getopt short options; "+" first: stop at the first operand; h and V are added */
	const struct option *longopts;   /* long options ending with a zeroed entry; help and version are added */
};

/* The next option's code (the short letter or the long option's val; its
 * argument in optarg), or -1 after the last option (the operands start at
 * argv[optind]). --help, --version and usage errors do not return. */
int cmon_cmdline_next(const struct cmon_cmdline *c, int argc, char **argv);

/* Print "PROG: MESSAGE" and the Try line on standard error and exit with
 * CMON_EXIT_USAGE. For bad values: "bad value 'abc' for -buffer". */
void cmon_cmdline_fail(const struct cmon_cmdline *c, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 2, 3)));

#endif
