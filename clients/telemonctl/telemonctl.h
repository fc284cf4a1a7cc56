/* telemonctl internals:
 *   args.c     the command line: commands, their options, time formats
 *   request.c  talking to the service over DIR/control.sock (protocol in
 *              daemons/telemonitor/control.h)
 *   am.c       silences kept in the telemonitor's Alertmanager, when it has
 *              one (docs/alerting.md, "One silence model") */
#ifndef TELEMONCTL_H
#define TELEMONCTL_H

#include <stdbool.h>
#include <stddef.h>

/* Exit statuses (telemonctl(1)). */
enum ctl_exit {
	EXIT_OK = 0,             /* the command was done */
	EXIT_REFUSED = 1,        /* the service answered with an error */
	EXIT_USAGE = 2,          /* bad command line */
	EXIT_UNREACHABLE = 3,    /* no service at the state directory, or it broke off */
};

/* Limits. */
#define CTL_WORDS_MAX 250        /* command words and options sent */

/* What to send. */
struct ctl_cmd {
	const char *state;       /* state directory */
	bool json;               /* --json */
	char *words[CTL_WORDS_MAX]; /* command words and KEY=VALUE options (owned) */
	int nwords;              /* how many */
};

/* Parse argv into `c`; on a usage error print it and exit EXIT_USAGE. */
void args_parse(int argc, char **argv, struct ctl_cmd *c);

/* Send `c`, copy the answer to standard output; returns the exit status. */
int request_run(const struct ctl_cmd *c);

/* Send `c` and keep the answer's data (hints still go to standard error):
 * EXIT_OK with `*out` (heap, NUL-terminated; the caller frees it) and
 * `*len`, or the exit status of the error, already reported. */
int request_capture(const struct ctl_cmd *c, char **out, size_t *len);

#define AM_TIMEOUT_S 10L         /* one request to an Alertmanager */

/* `silence add|list|rm` with the telemonitor's Alertmanager(s) (status
 * --json "alertmanagers"): done there, *done set, the exit status
 * returned. Without an Alertmanager *done stays false (the telemonitor
 * keeps its own silences: request_run()). */
int am_silence(const struct ctl_cmd *c, bool *done);

#endif
