/* emit-internal.h — private interfaces of the instrumentation library.
 *
 * emit.c       the API: state, per-thread buffers, flushing, exit and fork
 * emit_wire.c  protobuf wire encoding of Header, TypeDef and Gap records,
 *              and name validation (the Event encoder is inline below,
 *              because it is the hot path)
 * emit_sink.c  the log descriptor: opening it from the environment and
 *              writing whole batches without ever blocking
 * emit_clock.c the events' clock: the TSC where it is invariant and the
 *              kernel times CLOCK_MONOTONIC with it, else clock_gettime()
 */
#ifndef CMON_EMIT_INTERNAL_H
#define CMON_EMIT_INTERNAL_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "varint.h"

#include "cmon/emit.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the Event encoder copies doubles as little-endian fixed64"
#endif

#define EMIT_HIDDEN __attribute__((visibility("hidden")))

/* Largest single write: a pipe write of at most PIPE_BUF bytes is atomic. */
#define EMIT_WRITE_MAX PIPE_BUF
/* Room kept in front of every batch for one Gap frame (at most 14 bytes). */
#define EMIT_HEADROOM 16
/* Bytes of Event frames one batch may hold. */
#define EMIT_BATCH_MAX (EMIT_WRITE_MAX - EMIT_HEADROOM)
/* Upper bound of the bytes one Event frame with N values may touch: the
 * frame itself (at most 36 + 8N) plus slack for the fixed-size copies of the
 * thread field (16 bytes), of the timestamp varint (8 bytes) and of an
 * event shape's fixed part (24 bytes from the frame's start). */
#define EMIT_EVENT_MAX(n) (56 + 8 * (size_t)(n))
/* A thread's batch is written once its oldest event is this old (ns). */
#define EMIT_FLUSH_NS 10000000ull

/* ---- the events' clock (emit_clock.c) ------------------------------------ */

/* Where CLOCK_MONOTONIC is itself kept by the TSC (the kernel's clocksource
 * is "tsc", and the CPU says its TSC is invariant), an event reads the TSC
 * (rdtsc, about a third of clock_gettime() in a VM) and turns it into
 * CLOCK_MONOTONIC nanoseconds by a per-thread anchor, (tsc, ns) read
 * together, and a rate: ns = anchor_ns + (tsc - anchor_tsc) * mult >> 32.
 * The rate is measured over 1 ms at start and refined at every re-anchor
 * over the whole time since; each batch written re-anchors its thread (at
 * least every EMIT_FLUSH_NS while it emits), so an event is within the
 * rate's error of CLOCK_MONOTONIC over at most that long; a thread's times
 * never go backwards. CMON_CLOCK=monotonic in the environment turns it off
 * (the log's times are CLOCK_MONOTONIC nanoseconds either way). */
struct emit_clock {
	bool tsc;                   /* events are timed by the TSC */
	_Atomic uint64_t mult;      /* nanoseconds per tick, << 32 */
	uint64_t base_tsc;          /* the calibration's start: tick ... */
	uint64_t base_ns;           /* ... and CLOCK_MONOTONIC then */
};

/* A thread's anchor (in its batch). */
struct emit_anchor {
	uint64_t tsc;               /* a tick ... */
	uint64_t ns;                /* ... and CLOCK_MONOTONIC then */
	uint64_t mult;              /* the rate when anchored */
	uint64_t last_ns;           /* the thread's latest time (never go back) */
};

extern struct emit_clock emit_clk EMIT_HIDDEN;

/* Decide the clock and calibrate (once, at library start). */
void emit_clock_init(void) EMIT_HIDDEN;

/* CLOCK_MONOTONIC nanoseconds, read by the system call. */
uint64_t emit_clock_mono(void) EMIT_HIDDEN;

/* Anchor `a` at this moment, refining the rate. */
void emit_clock_anchor(struct emit_anchor *a) EMIT_HIDDEN;

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

/* An event's time, CLOCK_MONOTONIC nanoseconds. */
static inline uint64_t emit_clock_now(struct emit_anchor *a)
{
#if defined(__x86_64__)
	if (__builtin_expect(emit_clk.tsc, 1)) {
		int64_t d = (int64_t)(__rdtsc() - a->tsc);  /* < 0: another CPU's skew */
		uint64_t ns = a->ns + (uint64_t)(((unsigned __int128)(uint64_t)(d > 0 ? d : 0) *
						  a->mult) >> 32);
		if (__builtin_expect(ns < a->last_ns, 0))
			ns = a->last_ns;
		a->last_ns = ns;
		return ns;
	}
#endif
	(void)a;
	return emit_clock_mono();
}

/* ---- protobuf wire format ------------------------------------------- */

/* Field tags (field number << 3 | wire type) used by the encoders. */
enum {
	PB_VARINT = 0,   /* wire type of int/uint/bool fields */
	PB_FIXED64 = 1,  /* wire type of double fields */
	PB_LEN = 2,      /* wire type of strings, sub-messages, packed arrays */
};
#define PB_TAG(field, type) ((uint8_t)(((field) << 3) | (type)))

/* The 7-bit groups of V (below 2^56) one to a byte, little-endian: a varint
 * of V once the continuation bits (emit_varint_cont) are added. */
static inline uint64_t emit_spread7(uint64_t v)
{
	return (v & 0x7f) | ((v << 1) & 0x7f00) | ((v << 2) & 0x7f0000) |
	       ((v << 3) & 0x7f000000) | ((v << 4) & 0x7f00000000) |
	       ((v << 5) & 0x7f0000000000) | ((v << 6) & 0x7f000000000000) |
	       ((v << 7) & 0x7f00000000000000);
}

/* The continuation bits of an N-byte varint (1..8), as emit_spread7 lays
 * it out. */
static inline uint64_t emit_varint_cont(unsigned n)
{
	return 0x8080808080808080ull & ((1ull << (8 * (n - 1))) - 1);
}

/* The values whose varint takes N bytes (1..8): V with V - *LO < *SPAN. */
static inline void emit_varint_range(unsigned n, uint64_t *lo, uint64_t *span)
{
	*lo = n == 1 ? 0 : 1ull << (7 * (n - 1));
	*span = (1ull << (7 * n)) - *lo;
}

/* cmon_varint_put for values usually 6..8 bytes long (timestamps): spreads
 * the 7-bit groups without a loop. Writes 8 bytes at P whatever the length
 * (the caller leaves that slack); returns the byte after the varint. */
static inline uint8_t *emit_put_varint64(uint8_t *p, uint64_t v)
{
	uint64_t x;
	unsigned n;

	if (v >> 56)
		return cmon_varint_put(p, v);
	n = cmon_varint_size(v);
	x = emit_spread7(v) | emit_varint_cont(n);
	memcpy(p, &x, sizeof x);
	return p + n;
}

/* Size of a Gap frame reporting COUNT dropped events. */
EMIT_HIDDEN size_t emit_wire_gap_size(uint64_t count);
/* Writes a Gap frame for COUNT at OUT (room: emit_wire_gap_size bytes). */
EMIT_HIDDEN void emit_wire_gap(uint8_t *out, uint64_t count);

/* What the Header record says about this log. */
struct emit_header_info {
	const char *program;       /* program name (already sanitized) */
	const char *machine;       /* host name (already sanitized) */
	int64_t pid;               /* process id of the writer */
	int64_t start_unix_ns;     /* CLOCK_REALTIME when the log was opened */
	uint64_t start_ts;         /* CLOCK_MONOTONIC at the same moment */
	bool has_overhead;         /* the library measured its own cost */
	double overhead_ns;        /* ns one event costs its thread (median) */
	double overhead_spread_ns; /* the batches' deviation from it (MAD) */
};

/* Encodes the Header frame into OUT (CAP bytes); returns its length, or 0 if
 * it does not fit. */
EMIT_HIDDEN size_t emit_wire_header(uint8_t *out, size_t cap,
                                    const struct emit_header_info *h);

/* Encodes the TypeDef frame of type ID into OUT (CAP bytes); returns its
 * length, or 0 if it does not fit. */
EMIT_HIDDEN size_t emit_wire_typedef(uint8_t *out, size_t cap, uint32_t id,
                                     const char *name, size_t nattrs,
                                     const char *const *attrs);

/* Most bytes an Overhead frame takes. */
#define EMIT_OVERHEAD_MAX 40

/* Encodes an Overhead frame (from here on an event of THREAD costs it NS,
 * give or take SPREAD) into OUT (CAP bytes); returns its length, or 0 if
 * it does not fit. */
EMIT_HIDDEN size_t emit_wire_overhead(uint8_t *out, size_t cap, int64_t thread,
                                      double ns, double spread);

/* True if S is an identifier [A-Za-z_][A-Za-z0-9_]* or (ALLOW_PROC)
 * call@IDENT / ret@IDENT, at most CMON_MAX_NAME bytes long. */
EMIT_HIDDEN bool emit_name_valid(const char *s, bool allow_proc);

/* Copies S into OUT (CAP bytes, NUL-terminated, at most CAP-1 characters),
 * replacing every byte outside [A-Za-z0-9._+-] by '_' (DESIGN.md §6 names);
 * an empty result becomes "unknown". */
EMIT_HIDDEN void emit_sanitize_word(char *out, size_t cap, const char *s);

/* ---- the log descriptor ----------------------------------------------- */

/* How the log descriptor is written. */
struct emit_sink {
	int fd;                    /* the log, or -1 */
	bool owned;                /* we opened it from $CMON_LOG (O_CLOEXEC) */
	bool is_fifo;              /* pipe or FIFO: writes <= PIPE_BUF are atomic,
	                              so threads write without a lock; SIGPIPE is
	                              blocked around each write */
	bool is_sock;              /* socket: send(MSG_NOSIGNAL) */
	bool is_file;              /* regular file: nothing is lost between two
	                              batches, so Events may carry ts_delta */
	size_t carry_len;          /* unwritten tail of a short write (not a FIFO);
	                              completed before anything else is written */
	uint8_t carry[EMIT_WRITE_MAX]; /* that tail */
};

/* emit_sink_open's answer when no log is configured. */
#define EMIT_SINK_NONE 1

/* Opens the log named by $CMON_LOG_FD, or else $CMON_LOG, into *S. Returns 0,
 * EMIT_SINK_NONE when neither is set, or a negative errno code when the
 * configured log cannot be used. */
EMIT_HIDDEN int emit_sink_open(struct emit_sink *s);

/* Writes LEN (<= EMIT_WRITE_MAX) bytes of whole records without blocking.
 * Returns 0 when the bytes were accepted (for a non-FIFO possibly partly
 * kept in the carry), -EAGAIN when they were not written at all (the log is
 * full or briefly failing: drop them), -EPIPE when the log is gone for good.
 * For a non-FIFO the caller serializes calls (holds the library's lock). */
EMIT_HIDDEN int emit_sink_write(struct emit_sink *s, const void *buf,
                                size_t len);

/* Tries to finish a pending carry; returns 0 when none is left, -EAGAIN or
 * -EPIPE otherwise. Same locking rule as emit_sink_write. */
EMIT_HIDDEN int emit_sink_drain_carry(struct emit_sink *s);

#endif /* CMON_EMIT_INTERNAL_H */
