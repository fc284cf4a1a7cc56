/* cli.h — small helpers shared by pcheck, peval and psolve. */
#ifndef PSPEC_CLI_H
#define PSPEC_CLI_H

#include <stdbool.h>
#include <stdint.h>

/* Open LOG ("-" or NULL: standard input). If `seekable` is needed and the
 * descriptor is a pipe, its whole contents are first copied to an unlinked
 * temporary file. Returns the fd or -1 after printing "PROG: ..." on stderr. */
int cli_open_log(const char *prog, const char *path, bool seekable);

/* The name to show for a log path ("<stdin>" for "-" or NULL). */
const char *cli_log_name(const char *path);

typedef struct pspec pspec;

/* Longest specification read from standard input. */
#define CLI_MAX_SPEC (64u << 20)

/* Is SPEC "-", the specification on standard input? */
bool cli_spec_on_stdin(const char *spec);

/* A new program with `spec` loaded ("-": read from standard input, named
 * "<stdin>" in messages, imports from the current folder) (and the import path set when `path` is
 * not NULL), or NULL after printing the spec's errors ("FILE:LINE:COL:
 * error: ...") or "PROG: SPEC: reason" on stderr. */
pspec *cli_load_spec(const char *prog, const char *spec, const char *path);

/* Print a skipped-record warning: "LOG:LINE: warning: MSG" (binary logs: "LOG:@OFFSET"). */
void cli_warn(void *ctx, const char *logname, uint64_t where, const char *msg);

#endif
