/* The control socket, DIR/control.sock (a Unix stream socket, mode 0660),
 * where telemonctl asks questions and makes changes.
 *
 * Protocol (version 1), one request per connection:
 *   request   the strings "telemonctl/1", FORMAT ("text" or "json"), WIDTH
 *             (terminal columns, decimal), CHARSET ("utf8" or "ascii"),
 *             then the command words and KEY=VALUE options, each
 *             terminated by a NUL byte, and an empty string (one more NUL)
 *             at the end; at most TM_CTL_REQUEST_MAX bytes and CTL_ARGS_MAX
 *             strings.
 *   response  "ok\n" followed by the output, or "error MESSAGE\n" (one
 *             line); the service then closes the connection. In the
 *             output, a line starting with CTL_HINT is a hint for a
 *             person (what to type next), not data: telemonctl writes it
 *             to standard error without the mark, so piped standard
 *             output carries only data.
 * The service answers from its loop: commands only read the store or
 * change in-memory state, and listings are bounded (CTL_LIST_MAX rows). */
#ifndef TELEMON_CONTROL_H
#define TELEMON_CONTROL_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/buffer.h>

#include "telemonitor.h"

/* Limits. */
#define CTL_ARGS_MAX 256           /* strings in one request */
#define CTL_LIST_MAX 100000        /* rows in one listing */
#define CTL_DEFAULT_LIMIT 1000     /* rows when --limit is not given */
#define CTL_TIMEOUT_S 10           /* a request must arrive within this */

/* The protocol's first string. */
#define CTL_MAGIC "telemonctl/1"

/* The first byte of a hint line in a text answer (ASCII STX). */
#define CTL_HINT "\002"

/* A parsed request. */
struct ctl_request {
	bool json;                 /* --json */
	int width;                 /* terminal width for tables and bars (0: no terminal) */
	bool utf8;                 /* bars may use block characters */
	bool newest_first;         /* failures: newest first (the HTTP API) */
	int argc;                  /* command words and options */
	char **argv;               /* them */
};

/* Open the socket in the state directory. 0 or a negative errno (logged). */
int control_open(struct tmon *tm);

/* Close it and every connection; accepts a tm without one. */
void control_close(struct tmon *tm);

/* Run request `r`, appending the output to `out`. 0, or a negative errno
 * with a one-line message in `err` (commands.c). */
int commands_run(struct tmon *tm, const struct ctl_request *r, struct evbuffer *out, char *err,
		 size_t errlen);

/* `stats` (stats.c): the periodic report assertions' metrics per day. */
int stats_run(struct tmon *tm, const struct ctl_request *r, const char *prog, const char *assertion,
	      const char *day, struct evbuffer *out, char *err, size_t errlen);

/* `compare` (versions.c): report metrics under version v1 against v2. */
int versions_compare(struct tmon *tm, const struct ctl_request *r, const char *prog,
		     const char *v1, const char *v2, const char *assertion, struct evbuffer *out,
		     char *err, size_t errlen);

#endif
