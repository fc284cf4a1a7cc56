/* cmon/emit.h — the instrumentation API that monitored programs link.
 *
 * A program declares event types (a name and attribute names) and emits
 * events; each event gets a CLOCK_MONOTONIC timestamp (nanoseconds) and the
 * calling thread's id, and goes into a `cmon-bin 1` log (DESIGN.md §4.2) on
 * the descriptor named by $CMON_LOG_FD, or else the file or FIFO named by
 * $CMON_LOG. With neither variable set every function is a cheap no-op.
 *
 * Promises (details in cmon_emit(3)):
 *   - Never blocks, prints or exits; SIGPIPE never reaches the program.
 *     When the reader is slow, whole batches of events are dropped and
 *     counted, and a Gap record with the count precedes the next batch that
 *     gets through.
 *   - A pipe or FIFO receives whole records only, in writes of at most
 *     PIPE_BUF bytes, so concurrent writers never interleave mid-record.
 *   - The Header is the first record; a TypeDef precedes the first Event of
 *     its type.
 *   - The Header says what one event costs the thread that emits it
 *     (overhead_ns, overhead_spread_ns), measured when the log is opened,
 *     on a buffer never written; each thread measures its own again once
 *     a period while it emits (CMON_OVERHEAD_PERIOD_MS, 1 s) and writes it
 *     as an Overhead record ahead of its next events. CMON_OVERHEAD=0
 *     turns both off.
 *   - A thread's events reach the log when its buffer (one PIPE_BUF batch)
 *     fills, when it emits 10 ms or more after its oldest buffered event, on
 *     cmon_flush(), when the thread exits and when the process calls exit().
 *
 * Ownership: the library copies every string and array it is given; nothing
 * the caller passes is kept. All functions are thread-safe and may be called
 * from constructors and atexit handlers; only cmon_emit (on a thread that
 * has emitted before) may be called from a signal handler.
 */
#ifndef CMON_EMIT_H
#define CMON_EMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CMON_API __attribute__((visibility("default")))
#else
#define CMON_API
#endif

/* Most attributes a type may declare, and most values one event carries. */
#define CMON_MAX_ATTRS 32
/* Longest event type or attribute name, in bytes (call@/ret@ included); the
 * limit keeps every TypeDef record within one atomic pipe write. */
#define CMON_MAX_NAME 64
/* Most event types one process may declare (a forked child gets as many
 * again for the names it declares itself). */
#define CMON_MAX_TYPES 4095

/* An event type id in this log; 0 means "no type" and makes emits no-ops. */
typedef uint32_t cmon_type;

/* The two event types of a procedure: call@NAME and ret@NAME. */
typedef struct cmon_proc {
	cmon_type call;   /* call@NAME: its attributes are the arguments */
	cmon_type ret;    /* ret@NAME: attributes (result, exact) */
} cmon_proc;

/* Counters of what the library did, for the program's own health checks. */
struct cmon_stats {
	uint64_t events_written;   /* events in batches the log accepted */
	uint64_t events_dropped;   /* events in batches dropped (reader slow or gone) */
	uint64_t gap_reported;     /* sum of the Gap counts written to the log */
	uint64_t batches_written;  /* successful batch writes */
	uint64_t batches_dropped;  /* batches dropped as a whole */
};

/* Opens the log named by the environment, with PROGRAM (NULL: the invocation
 * name) in the Header. Optional: the first other call does it lazily. Returns
 * 0 (log open, or no log configured), -EALREADY if already initialised, or a
 * negative errno code when the configured log is unusable (then a no-op). */
CMON_API int cmon_init(const char *program);

/* True when events are being written to a log. */
CMON_API bool cmon_enabled(void);

/* Declares an event type NAME with NATTRS attribute names ATTRS and returns
 * its id; declaring a name again returns the first id (the attributes of
 * the first declaration stand). Names match [A-Za-z_][A-Za-z0-9_]* or
 * call@NAME / ret@NAME. Returns 0 with errno set: EINVAL bad name, E2BIG
 * too many attributes, ENOSPC too many types, ENOTSUP fork nesting too
 * deep, ENOMEM, ENODEV when logging is off. */
CMON_API cmon_type cmon_declare(const char *name, size_t nattrs,
                                const char *const *attrs);

/* Emits an event of TYPE with N values (at most CMON_MAX_ATTRS are kept),
 * stamped with CLOCK_MONOTONIC and the calling thread's id; errno is kept. */
CMON_API void cmon_emit(cmon_type type, size_t n, const double *values);

/* Declares call@NAME with attributes ARGS and ret@NAME with attributes
 * (RESULT or "r", "exact"), the PSpec `proc` sugar. Zero ids on failure. */
CMON_API cmon_proc cmon_declare_proc(const char *name, size_t nargs,
                                     const char *const *args,
                                     const char *result);

/* Emits call@NAME of P with N argument values. */
CMON_API void cmon_call(cmon_proc p, size_t n, const double *args);

/* Emits ret@NAME of P with RESULT and exact = 1. */
CMON_API void cmon_ret(cmon_proc p, double result);

/* Writes the calling thread's buffered events, pending TypeDefs and any
 * pending Gap now (without blocking; dropped like any batch if the log is
 * full). Call it before a thread goes idle to bound the log's latency. */
CMON_API void cmon_flush(void);

/* Copies the library's counters into *OUT. Returns 0, or -EINVAL. */
CMON_API int cmon_get_stats(struct cmon_stats *out);

#ifndef __cplusplus
/* CMON_EMIT(type, v1, v2, ...): emits TYPE with the listed values (one or more). */
#define CMON_EMIT(type, ...)                                                  \
	cmon_emit((type), sizeof((const double[]){__VA_ARGS__}) / sizeof(double), \
	          (const double[]){__VA_ARGS__})
/* CMON_CALL(proc, a1, ...): emits call@NAME with the listed arguments. */
#define CMON_CALL(proc, ...)                                                  \
	cmon_call((proc), sizeof((const double[]){__VA_ARGS__}) / sizeof(double), \
	          (const double[]){__VA_ARGS__})
#endif

#ifdef __cplusplus
}
#endif

#endif /* CMON_EMIT_H */
