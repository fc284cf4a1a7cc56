/* logwrite.h — writing monitoring logs: cmon-ascii 1 and cmon-bin 1 (private).
 *
 * Used by cmon-log and by tests and benchmarks that generate logs. The
 * writer buffers output and writes it with write(2); it never prints. Every
 * function returns 0 (or a type id) on success and a negative errno-style
 * code on failure; after a write error every later call returns that error.
 *
 * Binary logs get a Header, a TypeDef before the first event of each type,
 * Events, Gaps, and an End. An Event carries its values as zigzag varints
 * (`ivalues`) when all are integers below 2^53 in magnitude, as doubles
 * otherwise; its timestamp as `ts_delta` when the writer's fd is a regular
 * file (nothing can be lost between two records of a file), as an absolute
 * `ts` otherwise (pipes, sockets: snarflog may drop records).  Ascii logs get
 * the '#cmon-ascii 1' line, one '#key value' line per header field, one line
 * per event and '#cmon-gap N' per gap.
 */
#ifndef PSPEC_LOGWRITE_H
#define PSPEC_LOGWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "logread.h"

typedef struct log_writer log_writer;

/* Open a writer on `fd` (closed by log_writer_close() when `own_fd`) and
 * write the header. `fields` are header entries as log_header has them: in
 * binary logs "program", "machine", "pid", "tick-ns", "clock",
 * "start-unix-ns" and "cmon-overhead-ns" ("MEAN SPREAD": overhead_ns and
 * overhead_spread_ns) fill the Header's own fields when their values fit, every
 * other entry goes to `extra`. Keys and values are cleaned of characters the
 * ascii format cannot carry. -EINVAL for a bad format, or a bad tick-ns
 * or cmon-overhead-ns value. */
int log_writer_open(log_writer **out, int fd, bool own_fd, log_format format,
                    const log_header_field *fields, size_t nfields);

/* Binary: write Events as writers did before Event.ivalues and ts_delta
 * (doubles, absolute timestamps; readers of any age read them), or not. */
void log_writer_set_compat(log_writer *w, bool on);

/* Declare an event type and its attribute names (attrs may be NULL); returns
 * its type id (>= 0), the same one when declared again, or -EINVAL for a name
 * that is not [A-Za-z_][A-Za-z0-9_]* or call@NAME / ret@NAME. */
int log_writer_declare(log_writer *w, const char *name, const char *const *attrs, size_t nattrs);

/* Write an event of a declared type. ts >= 0; values must be finite;
 * -E2BIG for an event longer than a reader accepts (1 MiB ascii line,
 * 16 MiB binary frame). */
int log_writer_event_id(log_writer *w, int type, int64_t ts, int64_t thread,
                        const double *values, size_t nvalues);

/* Write an event by type name, declaring the type on first use. */
int log_writer_event(log_writer *w, const char *name, int64_t ts, int64_t thread,
                     const double *values, size_t nvalues);

/* Record that `count` whole records were lost here. */
int log_writer_gap(log_writer *w, uint64_t count);

/* Record that from here on an event of `thread` costs it `mean` ns, give
 * or take `spread` ('#cmon-overhead-ns MEAN SPREAD THREAD', a binary
 * Overhead). -EINVAL unless mean > 0 and spread >= 0, both finite. */
int log_writer_overhead(log_writer *w, int64_t thread, double mean, double spread);

/* Finish the log (binary: an End record with the event count) and flush. */
int log_writer_end(log_writer *w);

/* Write out everything buffered. */
int log_writer_flush(log_writer *w);

/* Flush, close the fd when owned, free. Returns the first error seen
 * (including from the final flush). NULL ok. */
int log_writer_close(log_writer *w);

#endif
