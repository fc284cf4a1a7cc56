/* Typescripts: what an instance's tools print (stdout and stderr, and the
 * checker's non-failure output), plus the telemonitor's own notes about
 * them, in DIR/typescripts/ID. A file that reaches TM_TYPESCRIPT_MAX bytes
 * is renamed to ID.1 (replacing an older one) and started again, so one
 * instance never holds more than twice that. */
#ifndef TELEMON_TYPESCRIPT_H
#define TELEMON_TYPESCRIPT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* An open typescript. */
struct typescript {
	int fd;                   /* the file, or -1 */
	char *path;               /* its path (allocated), or NULL */
	size_t size;              /* its size */
};

/* Path of instance `id`'s typescript under state directory `dir`. */
void typescript_path(const char *dir, uint64_t id, char *out, size_t size);

/* Open (appending) the typescript of instance `id`; 0 or a negative errno. */
int typescript_open(struct typescript *ts, const char *dir, uint64_t id);

/* Append tool output. */
void typescript_write(struct typescript *ts, const void *p, size_t n);

/* Append a note of the telemonitor's, as one line "[telemonitor TIME] ...". */
void typescript_note(struct typescript *ts, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Close it; safe on a closed one. */
void typescript_close(struct typescript *ts);

#endif
