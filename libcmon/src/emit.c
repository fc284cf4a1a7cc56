/* emit.c — the instrumentation API (cmon/emit.h): library state, per-thread
 * batches, flushing at the right moments, process exit and fork.
 *
 * Life of an event: cmon_emit() reads the clock (the TSC turned into
 * CLOCK_MONOTONIC nanoseconds where it can, emit_clock.c, else the vDSO
 * clock) and appends an Event frame to the calling thread's batch (no lock,
 * no syscall). The batch is written in one write() of at most PIPE_BUF bytes when
 * it is full, when its oldest event is EMIT_FLUSH_NS old, on cmon_flush(), at
 * thread exit (pthread key destructor) and at exit() (atexit handler).
 * Once, at start, the library times that very path on a scratch batch that
 * is never written (emit_overhead) and puts what an event costs its thread
 * in the Header, for readers to take out of the durations they measure;
 * then each thread measures its own cost again once a period while it
 * emits (ovh_update) and puts it in an Overhead record ahead of its next
 * events.
 *
 * Ordering rules, and how they hold:
 *   - Header first, TypeDef before its first Event: the Header and TypeDefs
 *     are the "meta" records, in declaration order. A batch is written only
 *     once every meta record declared so far has been written (meta_written
 *     == nmeta); otherwise the writer first sends the missing ones (under
 *     meta_lock). If that fails the batch is dropped and the TypeDefs stay
 *     pending for the next try: a TypeDef is never lost.
 *   - Loss is counted: a dropped batch adds its events to gap_pending; the
 *     next batch that gets through carries a Gap frame with that count in
 *     front (in the batch's headroom: the same single write).
 *   - Pipes and FIFOs: threads write their batches without a lock; the
 *     kernel keeps writes of <= PIPE_BUF bytes whole. Other descriptors
 *     (sockets, files, devices) are written under meta_lock, which also
 *     guards the carry of a short write.
 *
 * Exit: the atexit handler sets state EXITING, writes its own thread's batch
 * and then the batches of the threads still running. Each batch has
 * a `busy` flag its owner raises around every use; the owner re-reads the
 * state after raising it, and the exit handler issues membarrier() after
 * setting the state, so either the owner sees EXITING and backs off, or the
 * handler sees busy and waits for it to fall (asymmetric Dekker; the owner
 * pays only plain stores). Without membarrier only the exiting thread's own
 * batch and those of threads that already ended are written. A thread that
 * ends while the handler runs leaves its batch to the handler.
 *
 * Fork: the prepare handler flushes the forking thread's batch and takes the
 * locks; the child drops every other thread's batch (they belong to the
 * parent), resets its counters and keeps writing to the same stream with its
 * own thread ids. Type ids: parent and child share one stream, so each
 * process hands out ids from its own range. The log's opener uses 1..4095;
 * a forked child that declares a new name gets ids (slot << 12) + k, slot
 * being its pid modulo 2^20 (never 0); types declared before the fork keep
 * their ids in the child. The ranges a process may emit are in `ranges`.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/membarrier.h>

#include "emit-internal.h"

/* Where the library stands; transitions are one-way except in a fork child. */
enum emit_state {
	ST_UNINIT = 0,   /* nothing done yet: the first call initialises */
	ST_OFF,          /* no log configured (or unusable): every call a no-op */
	ST_ON,           /* writing */
	ST_EXITING,      /* exit() is running: only the exiting thread writes */
	ST_DEAD,         /* the reader is gone for good: events are counted lost */
};

/* Batch writes whose durations a thread keeps, for its write share. */
#define OVH_WRITE_SAMPLES 31

/* The frame of one event shape, (type, number of values), as a thread
 * writes it with an absolute timestamp of ts_len bytes: everything but the
 * timestamp's varint and the values is the same from one such event to the
 * next, so an event of a known shape copies it (tbuf_append). */
struct emit_shape {
	uint32_t type;              /* the event type; 0: no shape here */
	uint8_t n;                  /* values */
	uint8_t pre_len;            /* bytes of `pre` in use */
	uint8_t ts_len;             /* bytes of the ts varint */
	uint8_t frame_len;          /* bytes of the whole frame */
	uint64_t ts_lo;             /* the timestamps of ts_len bytes: from ts_lo ... */
	uint64_t ts_span;           /* ... to ts_lo + ts_span (excluded) */
	uint64_t ts_cont;           /* the varint's continuation bits */
	uint8_t pre[24];            /* frame length, Record.event tag, Event length,
	                               Event.type, Event.thread, Event.ts tag */
};
/* Shapes a thread keeps, by type id modulo this (a power of two). */
#define EMIT_SHAPES 8

/* One thread's batch of encoded Event frames. */
struct emit_tbuf {
	_Atomic int busy;           /* owner is using the batch (see exit) */
	uint32_t len;               /* bytes of frames after the headroom */
	uint32_t nevents;           /* events in the batch */
	uint32_t tid_len;           /* bytes of tid_enc in use */
	uint64_t oldest_ts;         /* timestamp of the batch's first event */
	uint64_t prev_ts;           /* timestamp of the batch's last event
	                               (kept only for ts_delta: tb->deltas) */
	bool deltas;                /* the log is a regular file: ts_delta */
	struct emit_anchor clk;     /* the thread's clock anchor (emit_clock.c) */
	int64_t tid;                /* the owner's kernel thread id */
	uint8_t tid_enc[16];        /* Event.thread pre-encoded (tag + varint) */
	struct emit_shape shapes[EMIT_SHAPES]; /* frames of recent event shapes */
	struct emit_tbuf *next;     /* registry of live batches */
	struct emit_tbuf *prev;     /* registry of live batches */
	/* what an event costs this thread (ovh_update), measured again each
	 * period while it emits */
	uint64_t ovh_due;           /* the next measurement's time (0: not yet set) */
	uint64_t ovh_writes;        /* its own batch writes this period ... */
	uint64_t ovh_events;        /* ... the events they held ... */
	uint64_t ovh_bytes;         /* ... in so many bytes of frames ... */
	uint32_t ovh_wns[OVH_WRITE_SAMPLES]; /* ... and the last ones' ns each */
	double ovh_enc_ns;          /* its latest encoding cost per event (ns) ... */
	double ovh_enc_spread;      /* ... and its spread */
	double ovh_share;           /* its latest write share per event (ns) */
	uint8_t buf[EMIT_HEADROOM + EMIT_BATCH_MAX]; /* headroom, then frames */
};

/* A meta record: the Header (index 0) or a TypeDef. */
struct emit_meta {
	uint8_t *frame;             /* the encoded frame */
	uint32_t len;               /* its length */
	uint32_t id;                /* the type id (0 for the Header) */
	char *name;                 /* the type name (NULL for the Header) */
};

/* Bits of a type id that number the types within one process's range. */
#define EMIT_ID_BITS 12
/* Most id ranges a process can use: its own and its ancestors'. */
#define EMIT_MAX_RANGES 8

/* Type ids BASE + 1 .. BASE + COUNT, handed out by one process. */
struct emit_range {
	uint32_t base;              /* slot << EMIT_ID_BITS; 0 for the opener */
	_Atomic uint32_t count;     /* ids handed out so far */
};

/* The library's process-wide state. */
static struct {
	_Atomic int state;              /* enum emit_state */
	struct emit_range ranges[EMIT_MAX_RANGES]; /* ids we may emit; [0] is
	                                   the opener's, checked on the hot path */
	_Atomic uint32_t nranges;       /* ranges in use */
	int own_range;                  /* index of the range we declare into,
	                                   -1 in a fork child before its first */
	_Atomic uint32_t nmeta;         /* meta records declared */
	_Atomic uint32_t meta_written;  /* meta records 0..meta_written-1 sent */
	_Atomic uint64_t gap_pending;   /* dropped events not yet reported */
	_Atomic uint64_t st_written;    /* cmon_stats.events_written */
	_Atomic uint64_t st_dropped;    /* cmon_stats.events_dropped */
	_Atomic uint64_t st_gap;        /* cmon_stats.gap_reported */
	_Atomic uint64_t st_batches;    /* cmon_stats.batches_written */
	_Atomic uint64_t st_batches_dropped; /* cmon_stats.batches_dropped */
	pthread_mutex_t init_lock;      /* serializes initialisation */
	pthread_mutex_t meta_lock;      /* meta array, meta writes, non-FIFO writes */
	pthread_mutex_t reg_lock;       /* registry list; taken before meta_lock */
	pthread_key_t key;              /* runs tbuf_destroy at thread exit */
	struct emit_meta *meta;         /* meta records, nmeta of them */
	size_t meta_cap;                /* allocated entries of meta */
	struct emit_tbuf *threads;      /* registry of live batches */
	bool membarrier_ok;             /* private expedited membarrier works */
	struct emit_sink sink;          /* the log descriptor */
	uint64_t ovh_period_ns;         /* each thread's cost is measured again this
	                                   often while it emits; 0: only at start */
	double ovh_enc_ns;              /* the encoding cost measured at start (ns) ... */
	double ovh_enc_spread;          /* ... its spread, and the write share: */
	double ovh_share;               /* every thread's first figures */
} g = {
	.init_lock = PTHREAD_MUTEX_INITIALIZER,
	.meta_lock = PTHREAD_MUTEX_INITIALIZER,
	.reg_lock = PTHREAD_MUTEX_INITIALIZER,
	.sink = { .fd = -1 },
};

/* The calling thread's batch (initial-exec: no __tls_get_addr call). */
static __thread struct emit_tbuf *t_tbuf __attribute__((tls_model("initial-exec")));
/* True in the thread running the exit handler: it may still write. */
static __thread bool t_exit_thread __attribute__((tls_model("initial-exec")));

static int emit_init(const char *program);

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* The state, initialising on first use. */
static int state_get(void)
{
	int st = atomic_load_explicit(&g.state, memory_order_acquire);

	if (unlikely(st == ST_UNINIT)) {
		emit_init(NULL);
		st = atomic_load_explicit(&g.state, memory_order_acquire);
	}
	return st;
}

/* ---- batches --------------------------------------------------------- */

/* Pre-encodes the Event.thread field for TB's owner (and notes whether the
 * log takes ts_delta). */
static void tbuf_set_tid(struct emit_tbuf *tb)
{
	uint8_t *p = tb->tid_enc;

	tb->deltas = g.sink.is_file;
	tb->tid = gettid();
	memset(tb->shapes, 0, sizeof tb->shapes);   /* they hold the thread id */
	*p++ = PB_TAG(2, PB_VARINT);
	p = cmon_varint_put(p, (uint64_t)tb->tid);
	tb->tid_len = (uint32_t)(p - tb->tid_enc);
}

/* Notes the frame just written at BASE (an event of TYPE with N values,
 * absolute timestamp TS, EV bytes of Event) as the shape of its kind, when
 * an event like it can take the copy: one-byte lengths, a timestamp below
 * 2^56. Kept out of line: it runs once per shape (and timestamp length). */
static __attribute__((noinline)) void
tbuf_shape_note(struct emit_tbuf *tb, uint32_t type, size_t n,
                const uint8_t *base, uint64_t ts, size_t ev)
{
	struct emit_shape *sh = &tb->shapes[type & (EMIT_SHAPES - 1)];
	unsigned k = cmon_varint_size(ts);
	size_t pre = 3 + 1 + cmon_varint_size(type) + tb->tid_len + 1;

	if (ev > 125 || ts >> 56 || pre > sizeof sh->pre)
		return;
	sh->type = type;
	sh->n = (uint8_t)n;
	sh->pre_len = (uint8_t)pre;
	sh->ts_len = (uint8_t)k;
	sh->frame_len = (uint8_t)(ev + 3);
	emit_varint_range(k, &sh->ts_lo, &sh->ts_span);
	sh->ts_cont = emit_varint_cont(k);
	memcpy(sh->pre, base, pre);
}

/* Copies N doubles to P as protobuf's little-endian fixed64; returns the
 * byte after them. */
static inline __attribute__((always_inline)) uint8_t *
put_doubles(uint8_t *p, size_t n, const double *values)
{
	for (size_t i = 0; i < n; i++, p += sizeof(double))
		memcpy(p, &values[i], sizeof(double));
	return p;
}

/* Encodes an Event frame into TB the plain way (see tbuf_append); returns
 * the Event's length when both length prefixes took one byte, else 0. */
static inline __attribute__((always_inline)) size_t
tbuf_encode(struct emit_tbuf *tb, uint32_t type, size_t n,
            const double *values, uint64_t ts)
{
	uint8_t *base = tb->buf + EMIT_HEADROOM + tb->len;
	uint8_t *body = base + 3;
	uint8_t *p = body;
	size_t ev;

	*p++ = PB_TAG(1, PB_VARINT);            /* Event.type */
	p = cmon_varint_put(p, type);
	memcpy(p, tb->tid_enc, sizeof tb->tid_enc); /* Event.thread (+slack) */
	p += tb->tid_len;
	if (tb->deltas && tb->nevents) {
		int64_t d = (int64_t)(ts - tb->prev_ts);
		*p++ = PB_TAG(4, PB_VARINT);    /* Event.ts_delta (zigzag) */
		p = cmon_varint_put(p, ((uint64_t)d << 1) ^ (uint64_t)(d >> 63));
	} else {
		*p++ = PB_TAG(3, PB_VARINT);    /* Event.ts */
		p = emit_put_varint64(p, ts);
	}
	if (n) {
		size_t vbytes = n * sizeof(double);
		*p++ = PB_TAG(5, PB_LEN);       /* Event.values, packed */
		p = cmon_varint_put(p, vbytes);
		p = put_doubles(p, n, values);
	}
	ev = (size_t)(p - body);
	if (likely(ev <= 125)) {
		base[0] = (uint8_t)(ev + 2);    /* frame length */
		base[1] = PB_TAG(3, PB_LEN);    /* Record.event */
		base[2] = (uint8_t)ev;          /* Event length */
		tb->len += (uint32_t)ev + 3;
		return ev;
	} else {
		size_t rec = 1 + cmon_varint_size(ev) + ev;
		uint8_t *q = base + cmon_varint_size(rec) + 1 + cmon_varint_size(ev);

		memmove(q, body, ev);
		q = cmon_varint_put(base, rec);
		*q++ = PB_TAG(3, PB_LEN);
		q = cmon_varint_put(q, ev);
		tb->len += (uint32_t)(q + ev - base);
		return 0;
	}
}

/* tbuf_append into a pipe or socket for an event of no shape noted yet:
 * encodes it the plain way and notes its shape. Out of line, so that the
 * common path keeps its registers. */
static __attribute__((noinline)) void
tbuf_append_new_shape(struct emit_tbuf *tb, uint32_t type, size_t n,
                      const double *values, uint64_t ts)
{
	uint8_t *base = tb->buf + EMIT_HEADROOM + tb->len;
	size_t ev = tbuf_encode(tb, type, n, values, ts);

	if (ev)
		tbuf_shape_note(tb, type, n, base, ts, ev);
}

/* Appends an Event frame to TB. The caller made room (EMIT_EVENT_MAX).
 * Into a pipe or socket, an event of a shape the thread wrote before (same
 * type, as many values, a timestamp of as many bytes) copies that frame's
 * fixed part and writes its timestamp and values. Otherwise (a new shape;
 * a regular file, where the timestamps are deltas of changing length and
 * the plain way is as fast) the body is written first, 3 bytes in,
 * assuming both length prefixes take one byte (true up to 12 values), and
 * moved to make room when they do not.
 * Values go as packed doubles even when integral: Event.ivalues cost a
 * typical two-value event 4 to 9 ns more (docs/PERFORMANCE.md, "A compact
 * cmon-bin"). Into a regular file (tb->deltas) an event after the first of
 * its batch carries ts_delta from the one before: a batch reaches the file
 * whole, so the event before it in the file is the one before it in the
 * batch. */
static inline __attribute__((always_inline)) void
tbuf_append(struct emit_tbuf *tb, uint32_t type, size_t n,
            const double *values, uint64_t ts)
{
	const struct emit_shape *sh = &tb->shapes[type & (EMIT_SHAPES - 1)];

	if (unlikely(tb->deltas)) {
		tbuf_encode(tb, type, n, values, ts);
		tb->prev_ts = ts;
	} else if (likely(sh->type == type && sh->n == n && ts - sh->ts_lo < sh->ts_span)) {
		uint8_t *p = tb->buf + EMIT_HEADROOM + tb->len;
		uint64_t x = emit_spread7(ts) | sh->ts_cont;

		memcpy(p, sh->pre, sizeof sh->pre);     /* (+slack) */
		p += sh->pre_len;
		memcpy(p, &x, sizeof x);                /* Event.ts (+slack) */
		p += sh->ts_len;
		if (n) {
			p[0] = PB_TAG(5, PB_LEN);       /* Event.values, packed */
			p[1] = (uint8_t)(n * sizeof(double));
			put_doubles(p + 2, n, values);
		}
		tb->len += sh->frame_len;
	} else {
		tbuf_append_new_shape(tb, type, n, values, ts);
	}
	if (tb->nevents++ == 0)
		tb->oldest_ts = ts;
}

/* Empties TB after its batch was written (or dropped) and re-anchors its
 * clock: at least every EMIT_FLUSH_NS while the thread emits. */
static void tbuf_empty(struct emit_tbuf *tb)
{
	tb->len = 0;
	tb->nevents = 0;
	emit_clock_anchor(&tb->clk);
}

/* True when every meta record declared so far is in the log. */
static bool meta_ready(void)
{
	uint32_t w = atomic_load_explicit(&g.meta_written, memory_order_acquire);
	return w == atomic_load_explicit(&g.nmeta, memory_order_acquire);
}

/* Writes the meta records not yet in the log, in chunks of whole records of
 * at most PIPE_BUF bytes. Caller holds meta_lock. 0, -EAGAIN or -EPIPE. */
static int meta_flush_locked(void)
{
	static uint8_t chunk[EMIT_WRITE_MAX];
	uint32_t w = atomic_load_explicit(&g.meta_written, memory_order_relaxed);
	uint32_t total = atomic_load_explicit(&g.nmeta, memory_order_relaxed);

	while (w < total) {
		size_t len = 0;
		uint32_t k = w;
		int r;

		while (k < total && len + g.meta[k].len <= sizeof chunk) {
			memcpy(chunk + len, g.meta[k].frame, g.meta[k].len);
			len += g.meta[k++].len;
		}
		r = emit_sink_write(&g.sink, chunk, len);
		if (r < 0)
			return r;
		w = k;
		atomic_store_explicit(&g.meta_written, w, memory_order_release);
	}
	return 0;
}

/* Counts the events of a batch that could not be written. */
static void count_dropped(uint64_t events)
{
	if (!events)
		return;
	atomic_fetch_add_explicit(&g.gap_pending, events, memory_order_relaxed);
	atomic_fetch_add_explicit(&g.st_dropped, events, memory_order_relaxed);
	atomic_fetch_add_explicit(&g.st_batches_dropped, 1, memory_order_relaxed);
}

/* Writes TB's batch, preceded by missing meta records and a Gap frame for
 * what was dropped before, or drops it as a whole. Empties TB either way,
 * leaves errno as it was (emits happen between a program's system call and
 * its errno check, and in signal handlers). Caller is TB's owner with busy
 * raised, or the exit handler. */
static void tbuf_flush(struct emit_tbuf *tb)
{
	bool serial = !g.sink.is_fifo;
	int saved_errno = errno;
	uint64_t gap = 0;
	uint8_t *start;
	size_t len;
	int r = 0;

	if (atomic_load_explicit(&g.state, memory_order_acquire) == ST_DEAD) {
		count_dropped(tb->nevents);
		goto out;
	}
	if (serial)
		pthread_mutex_lock(&g.meta_lock);
	if (!meta_ready()) {
		if (!serial)
			pthread_mutex_lock(&g.meta_lock);
		r = meta_flush_locked();
		if (!serial)
			pthread_mutex_unlock(&g.meta_lock);
		if (r < 0)
			goto drop;
	}
	gap = atomic_exchange_explicit(&g.gap_pending, 0, memory_order_relaxed);
	if (tb->nevents == 0 && gap == 0)
		goto unlock;
	start = tb->buf + EMIT_HEADROOM;
	len = tb->len;
	if (gap) {
		size_t glen = emit_wire_gap_size(gap);
		start -= glen;
		len += glen;
		emit_wire_gap(start, gap);
	}
	r = emit_sink_write(&g.sink, start, len);
	if (r < 0) {
		atomic_fetch_add_explicit(&g.gap_pending, gap, memory_order_relaxed);
		goto drop;
	}
	atomic_fetch_add_explicit(&g.st_gap, gap, memory_order_relaxed);
	if (tb->nevents) {
		atomic_fetch_add_explicit(&g.st_written, tb->nevents,
		                          memory_order_relaxed);
		atomic_fetch_add_explicit(&g.st_batches, 1, memory_order_relaxed);
	}
	goto unlock;
drop:
	count_dropped(tb->nevents);
	if (r == -EPIPE)
		atomic_store_explicit(&g.state, ST_DEAD, memory_order_release);
unlock:
	if (serial)
		pthread_mutex_unlock(&g.meta_lock);
out:
	tbuf_empty(tb);
	errno = saved_errno;
}

static void ovh_update(struct emit_tbuf *tb, uint64_t now);

/* Writes TB's batch for its owner, full or old (tbuf_event), timing the
 * write: the thread's share of its batch writes is part of what its events
 * cost it. Once a period (ovh_update) the thread's cost is measured again
 * and goes into the log in front of its next events. */
static __attribute__((noinline)) void tbuf_write_owned(struct emit_tbuf *tb)
{
	uint64_t t0, d;

	if (!g.ovh_period_ns) {
		tbuf_flush(tb);
		return;
	}
	t0 = emit_clock_now(&tb->clk);
	tb->ovh_events += tb->nevents;
	tb->ovh_bytes += tb->len;
	tbuf_flush(tb);
	d = emit_clock_now(&tb->clk) - t0;
	tb->ovh_wns[tb->ovh_writes++ % OVH_WRITE_SAMPLES] = d < UINT32_MAX ? (uint32_t)d : UINT32_MAX;
	if (unlikely(t0 >= tb->ovh_due))
		ovh_update(tb, t0);     /* (this write counts in the period it ends) */
}

/* Writes TB's batch, or (SCRATCH: a batch that is never written, see
 * emit_overhead) only empties it. */
static inline __attribute__((always_inline)) void
tbuf_write(struct emit_tbuf *tb, bool scratch)
{
	if (scratch)
		tbuf_empty(tb);
	else
		tbuf_write_owned(tb);
}

/* Records an event in TB, claimed by its owner: reads the clock, writes the
 * batch first when the event does not fit and after it when its oldest
 * event is EMIT_FLUSH_NS old, encodes the event. Returns its time. Every
 * event of a thread's batch pays this; cmon_emit adds only its checks and
 * the claim. With SCRATCH (a constant) nothing is ever written: what
 * emit_overhead times is this very code. */
static inline __attribute__((always_inline)) uint64_t
tbuf_event(struct emit_tbuf *tb, uint32_t type, size_t n,
           const double *values, bool scratch)
{
	uint64_t ts = emit_clock_now(&tb->clk);

	if (unlikely(tb->len + EMIT_EVENT_MAX(n) > EMIT_BATCH_MAX))
		tbuf_write(tb, scratch);
	tbuf_append(tb, type, n, values, ts);
	if (unlikely(ts - tb->oldest_ts >= EMIT_FLUSH_NS))
		tbuf_write(tb, scratch);
	return ts;
}

/* True while this thread holds one of the library's locks outside a claimed
 * batch (declaring, creating its batch, forking): an emit from a signal
 * handler on this thread then drops its event instead of waiting for a lock
 * its own thread holds. */
static __thread bool t_locked __attribute__((tls_model("initial-exec")));
/* The forking thread claimed its batch in the prepare handler. */
static __thread bool t_fork_claimed __attribute__((tls_model("initial-exec")));

/* Raises TB's busy flag for its owner. False, flag untouched, when it is up
 * already: a signal handler interrupted this thread inside the library. */
static inline bool tbuf_claim(struct emit_tbuf *tb)
{
	if (atomic_load_explicit(&tb->busy, memory_order_relaxed))
		return false;
	atomic_store_explicit(&tb->busy, 1, memory_order_relaxed);
	/* Ordered against the exit handler's state store by its membarrier. */
	atomic_signal_fence(memory_order_seq_cst);
	return true;
}

/* Whether the owner of a claimed batch may write it in state ST. */
static inline bool may_write(int st)
{
	return likely(st == ST_ON) || (st == ST_EXITING && t_exit_thread);
}

/* The state, read by the owner of a claimed batch. */
static inline int state_claimed(void)
{
	return atomic_load_explicit(&g.state, memory_order_acquire);
}

/* Lowers TB's busy flag; publishes the batch to the exit handler. */
static inline void tbuf_leave(struct emit_tbuf *tb)
{
	atomic_store_explicit(&tb->busy, 0, memory_order_release);
}

/* Begins a section holding a library lock (see t_locked). */
static void locked_begin(void)
{
	t_locked = true;
	if (t_tbuf)
		atomic_store_explicit(&t_tbuf->busy, 1, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
}

/* Ends it. */
static void locked_end(void)
{
	atomic_signal_fence(memory_order_seq_cst);
	if (t_tbuf)
		tbuf_leave(t_tbuf);
	t_locked = false;
}

/* Thread exit: writes what the thread left and frees its batch. */
static void tbuf_destroy(void *arg)
{
	struct emit_tbuf *tb = arg;
	int st = ST_ON;

	if (tbuf_claim(tb)) {
		st = state_claimed();
		if (may_write(st))
			tbuf_flush(tb);
		tbuf_leave(tb);
	}
	if (st == ST_EXITING && !t_exit_thread) {
		/* exit() is running: its handler writes this batch (it must not
		 * find it freed); the process is ending anyway. */
		t_tbuf = NULL;
		return;
	}
	t_locked = true;
	pthread_mutex_lock(&g.reg_lock);
	if (tb->prev)
		tb->prev->next = tb->next;
	else
		g.threads = tb->next;
	if (tb->next)
		tb->next->prev = tb->prev;
	pthread_mutex_unlock(&g.reg_lock);
	if (t_tbuf == tb)
		t_tbuf = NULL;
	t_locked = false;
	free(tb);
}

/* The calling thread's batch, created on first use; NULL if out of memory
 * or when called from a signal handler that interrupted the library. */
static struct emit_tbuf *tbuf_get(void)
{
	struct emit_tbuf *tb = t_tbuf;
	int saved_errno = errno;

	if (likely(tb != NULL))
		return tb;
	if (t_locked)
		return NULL;
	t_locked = true;
	tb = calloc(1, sizeof *tb);
	if (!tb)
		goto out;
	tbuf_set_tid(tb);
	emit_clock_anchor(&tb->clk);
	tb->ovh_enc_ns = g.ovh_enc_ns;
	tb->ovh_enc_spread = g.ovh_enc_spread;
	tb->ovh_share = g.ovh_share;
	if (pthread_setspecific(g.key, tb) != 0) {
		free(tb);
		tb = NULL;
		goto out;
	}
	pthread_mutex_lock(&g.reg_lock);
	tb->next = g.threads;
	if (g.threads)
		g.threads->prev = tb;
	g.threads = tb;
	pthread_mutex_unlock(&g.reg_lock);
	t_tbuf = tb;
out:
	t_locked = false;
	errno = saved_errno;
	return tb;
}

/* ---- exit and fork --------------------------------------------------- */

/* Waits (bounded, ~10 ms) for another thread to leave TB; true if it did. */
static bool tbuf_wait_idle(struct emit_tbuf *tb)
{
	for (int i = 0; i < 10000; i++) {
		if (!atomic_load_explicit(&tb->busy, memory_order_acquire))
			return true;
		if (i > 100)
			sched_yield();
	}
	return false;
}

/* atexit: writes every batch there is, then lets only this thread write. */
static void emit_atexit(void)
{
	struct emit_tbuf *self;
	bool claimed;

	if (atomic_load_explicit(&g.state, memory_order_acquire) != ST_ON)
		return;
	self = tbuf_get();
	t_exit_thread = true;
	atomic_store_explicit(&g.state, ST_EXITING, memory_order_seq_cst);
	claimed = self && tbuf_claim(self);
	if (claimed)
		tbuf_flush(self);
	if (g.membarrier_ok &&
	    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) {
		pthread_mutex_lock(&g.reg_lock);
		for (struct emit_tbuf *tb = g.threads; tb; tb = tb->next)
			if (tb != self && tbuf_wait_idle(tb))
				tbuf_flush(tb);
		pthread_mutex_unlock(&g.reg_lock);
	}
	if (claimed) {
		tbuf_flush(self);       /* a Gap for what the others dropped */
		tbuf_leave(self);
	}
}

/* fork, before: write our batch, then hold the locks across the fork. */
static void emit_prefork(void)
{
	struct emit_tbuf *tb = t_tbuf;

	t_fork_claimed = tb && tbuf_claim(tb);
	if (t_fork_claimed && may_write(state_claimed()))
		tbuf_flush(tb);
	t_locked = true;
	pthread_mutex_lock(&g.reg_lock);
	pthread_mutex_lock(&g.meta_lock);
}

/* fork, in the parent: carry on. */
static void emit_postfork_parent(void)
{
	pthread_mutex_unlock(&g.meta_lock);
	pthread_mutex_unlock(&g.reg_lock);
	t_locked = false;
	if (t_fork_claimed)
		tbuf_leave(t_tbuf);
}

/* fork, in the child: forget the parent's batches, losses and counters. */
static void emit_postfork_child(void)
{
	struct emit_tbuf *self = t_tbuf;
	struct emit_tbuf *tb, *next;

	pthread_mutex_unlock(&g.meta_lock);
	pthread_mutex_unlock(&g.reg_lock);
	t_locked = false;
	g.own_range = -1;       /* new names get ids from a range of our own */
	for (tb = g.threads; tb; tb = next) {
		next = tb->next;
		if (tb != self)
			free(tb);
	}
	g.threads = self;
	if (self) {
		self->next = self->prev = NULL;
		self->len = self->nevents = 0;
		tbuf_set_tid(self);
		if (t_fork_claimed)
			tbuf_leave(self);
	}
	atomic_store(&g.gap_pending, 0);
	atomic_store(&g.st_written, 0);
	atomic_store(&g.st_dropped, 0);
	atomic_store(&g.st_gap, 0);
	atomic_store(&g.st_batches, 0);
	atomic_store(&g.st_batches_dropped, 0);
	/* The parent owns a half-written record; writing now would tear it. */
	if (g.sink.carry_len)
		atomic_store(&g.state, ST_DEAD);
	g.sink.carry_len = 0;
}

/* ---- initialisation -------------------------------------------------- */

/* Nanoseconds of clock CLK. */
static uint64_t clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- its own cost ----------------------------------------------------- */

/* Batches timed, and events in each; one more batch first warms up. */
#define OVH_BATCHES 7
#define OVH_EVENTS 1000
/* The calibration events' type id and values: a typical event, never
 * written anywhere (the batch is a scratch one). */
#define OVH_TYPE 1

/* Sorts the N doubles at V (N is small). */
static void sort_small(double *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
}

/* The median of the OVH_BATCHES timings at PER (sorted in place) into *MED,
 * and their median absolute deviation from it into *MAD. */
static void median_mad(double *per, double *med, double *mad)
{
	double dev[OVH_BATCHES];

	sort_small(per, OVH_BATCHES);
	*med = per[OVH_BATCHES / 2];
	for (int b = 0; b < OVH_BATCHES; b++)
		dev[b] = per[b] > *med ? per[b] - *med : *med - per[b];
	sort_small(dev, OVH_BATCHES);
	*mad = dev[OVH_BATCHES / 2];
}

/* One calibration event: what cmon_emit does on a thread that has emitted
 * before (claim, clock, encode, leave; not its two loads checking the type
 * and the state), on the scratch batch TB. Not inlined: the call is paid as
 * a program pays it. */
static __attribute__((noinline)) void ovh_event(struct emit_tbuf *tb,
                                               const double *values)
{
	if (unlikely(!tbuf_claim(tb)))
		return;
	tbuf_event(tb, OVH_TYPE, 2, values, true);
	tbuf_leave(tb);
}

/* A scratch descriptor written like the log: a pipe (read end in *RD) for
 * a pipe or FIFO, an unnamed file in the log's own folder (else /tmp) for
 * a file, /dev/null for a device; -1 for a socket (not measured). */
static int ovh_scratch(const struct emit_sink *sink, int *rd)
{
	struct stat st;
	char link[64], path[PATH_MAX];
	ssize_t n;
	int p[2], fd;

	*rd = -1;
	if (fstat(sink->fd, &st) < 0 || sink->is_sock)
		return -1;
	if (sink->is_fifo || S_ISFIFO(st.st_mode)) {
		if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0)
			return -1;
		*rd = p[0];
		return p[1];
	}
	if (S_ISREG(st.st_mode)) {
		snprintf(link, sizeof link, "/proc/self/fd/%d", sink->fd);
		n = readlink(link, path, sizeof path - 1);
		if (n > 0) {
			path[n] = '\0';
			fd = open(dirname(path), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
			if (fd >= 0)
				return fd;
		}
		return open("/tmp", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	}
	return open("/dev/null", O_WRONLY | O_CLOEXEC);
}

/* The median ns of writing a full batch (EMIT_BATCH_MAX bytes) to a scratch
 * descriptor of the log's kind, OVH_BATCHES times (a pipe is drained after
 * each, untimed); 0 when it cannot be measured. */
static double ovh_write_ns(const struct emit_sink *sink)
{
	static uint8_t buf[EMIT_BATCH_MAX];
	double t[OVH_BATCHES];
	int rd, wr = ovh_scratch(sink, &rd), k = 0;

	if (wr < 0)
		return 0;
	for (int i = 0; i < OVH_BATCHES; i++) {
		uint64_t t0 = emit_clock_mono();
		ssize_t n = write(wr, buf, sizeof buf);
		uint64_t t1 = emit_clock_mono();
		if (n != (ssize_t)sizeof buf)
			break;
		t[k++] = (double)(t1 - t0);
		if (rd >= 0 && read(rd, buf, sizeof buf) < 0)
			break;
	}
	close(wr);
	if (rd >= 0)
		close(rd);
	if (k < OVH_BATCHES)
		return 0;
	sort_small(t, OVH_BATCHES);
	return t[OVH_BATCHES / 2];
}

/* Measures what one event costs the thread that emits it, once, at start
 * (issue 13): OVH_BATCHES batches of OVH_EVENTS events of two small values
 * run through the emit path on a scratch batch that is never written (no
 * write(2), no effect on the log or the counters), each batch timed by
 * CLOCK_MONOTONIC. *NS is the median batch's ns per event, *SPREAD the
 * median absolute deviation of the batches from it. What is measured is
 * the clock read (TSC or clock_gettime, whichever the log uses) and the
 * encoding, with the clock re-anchor every full batch. The write of a full
 * batch (one per about 120 events) is the thread's too: ovh_write_ns()
 * times writes like it, and its share per event (the write over the events
 * a batch holds) is added to both *NS and *SPREAD (an interval holds a
 * write or not: the share is its mean, not its spread). Takes about 1 ms.
 * *ENC and *ENC_SPREAD get the encoding's part alone, *WSHARE the write's
 * (the threads start from them, ovh_update). Returns 0, or -ENOMEM (nothing measured). */
static int emit_overhead(const struct emit_sink *sink, double *ns, double *spread,
                         double *enc, double *enc_spread, double *wshare)
{
	double per[OVH_BATCHES], values[2] = { 0, 4096 };
	struct emit_tbuf *tb = calloc(1, sizeof *tb);

	if (!tb)
		return -ENOMEM;
	tbuf_set_tid(tb);
	tb->deltas = sink->is_file;
	emit_clock_anchor(&tb->clk);
	for (int b = -1; b < OVH_BATCHES; b++) {
		uint64_t t0 = emit_clock_mono();

		for (int i = 0; i < OVH_EVENTS; i++) {
			values[0] = (double)(i & 63);
			ovh_event(tb, values);
		}
		if (b >= 0)
			per[b] = (double)(emit_clock_mono() - t0) / OVH_EVENTS;
	}
	/* the bytes one calibration event takes in a batch */
	tbuf_empty(tb);
	for (int i = 0; i < 16; i++)
		ovh_event(tb, values);
	double per_batch = tb->nevents ? (double)EMIT_BATCH_MAX * tb->nevents / tb->len : 0;
	free(tb);
	median_mad(per, ns, spread);
	*enc = *ns;
	*enc_spread = *spread;
	*wshare = 0;
	if (per_batch >= 1) {
		double share = ovh_write_ns(sink) / per_batch;
		*ns += share;
		*spread += share;
		*wshare = share;
	}
	return 0;
}

/* Scratch events of a periodic measurement: at most this many, and at most
 * one per OVH_SHARE events the thread emitted in the period (so measuring
 * costs its thread at most 1/OVH_SHARE more than its events do); in
 * OVH_BATCHES timed parts of at least OVH_PART_MIN events. Fewer: the
 * encoding figure of the period before stays. */
#define OVH_PERIODIC_MAX 448
#define OVH_SHARE 100
#define OVH_PART_MIN 8
/* Fewer batch writes in a period than this: the write share of the period
 * before stays (one write the scheduler cut into is no median). */
#define OVH_WRITES_MIN 8

/* One scratch event of N values on TB, whose owner holds it claimed
 * (ovh_event without the claim). Not inlined, as ovh_event. */
static __attribute__((noinline)) void ovh_event_owned(struct emit_tbuf *tb, size_t n,
                                                     const double *values)
{
	tbuf_event(tb, OVH_TYPE, n, values, true);
}

/* The values of an event of as many bytes as TB's owner's events took on
 * average this period (frames of N values take about 20 + 8N bytes). */
static size_t ovh_shape(const struct emit_tbuf *tb)
{
	double avg = (double)tb->ovh_bytes / (double)tb->ovh_events;
	double n = (avg - (double)(16 + tb->tid_len)) / 8 + 0.5;

	return n < 0 ? 0 : n > CMON_MAX_ATTRS ? CMON_MAX_ATTRS : (size_t)n;
}

/* TB's owner's share per event of its batch writes this period: the median
 * of its last writes' durations (a write the scheduler cut into moves it
 * little) times its writes per event. */
static double ovh_write_share(const struct emit_tbuf *tb)
{
	double w[OVH_WRITE_SAMPLES];
	int n = tb->ovh_writes < OVH_WRITE_SAMPLES ? (int)tb->ovh_writes : OVH_WRITE_SAMPLES;

	if (!n)
		return 0;
	for (int i = 0; i < n; i++)
		w[i] = tb->ovh_wns[i];
	sort_small(w, n);
	return w[n / 2] * (double)tb->ovh_writes / (double)tb->ovh_events;
}

/* The thread's own cost, measured again (issue 13: "periodically, per
 * thread"): called by its owner right after a batch write, when the period
 * is over (NOW, the write's start, is past ovh_due). The encoding is timed
 * as at start, on the thread's own (now empty) batch, in this thread, with
 * its caches as the program left them, but with few events (see
 * OVH_PERIODIC_MAX); its batch writes were timed as they happened
 * (tbuf_write_owned), and their share per event is the median write over
 * the events per write (ovh_write_share). The figure goes into
 * the batch as an Overhead frame, in front of the thread's next events,
 * and holds for them until the next. The first call only starts the
 * period. */
static void ovh_update(struct emit_tbuf *tb, uint64_t now)
{
	double per[OVH_BATCHES], values[CMON_MAX_ATTRS] = { 0, 4096 };
	uint64_t n = tb->ovh_events / OVH_SHARE;
	int part = (int)((n < OVH_PERIODIC_MAX ? n : OVH_PERIODIC_MAX) / OVH_BATCHES);
	bool fresh = false;

	if (tb->ovh_due && tb->ovh_events &&
	    atomic_load_explicit(&g.state, memory_order_relaxed) != ST_DEAD) {
		if (part >= OVH_PART_MIN) {
			size_t nv = ovh_shape(tb);

			for (int b = 0; b < OVH_BATCHES; b++) {
				uint64_t t0 = emit_clock_now(&tb->clk);

				for (int i = 0; i < part; i++) {
					values[0] = (double)(i & 63);
					ovh_event_owned(tb, nv, values);
				}
				per[b] = (double)(emit_clock_now(&tb->clk) - t0) / part;
			}
			tbuf_empty(tb);
			median_mad(per, &tb->ovh_enc_ns, &tb->ovh_enc_spread);
			fresh = true;
		}
		if (tb->ovh_writes >= OVH_WRITES_MIN) {
			tb->ovh_share = ovh_write_share(tb);
			fresh = true;
		}
		if (fresh && tb->ovh_enc_ns + tb->ovh_share > 0)
			tb->len += (uint32_t)emit_wire_overhead(tb->buf + EMIT_HEADROOM + tb->len,
			                                        EMIT_BATCH_MAX - tb->len, tb->tid,
			                                        tb->ovh_enc_ns + tb->ovh_share,
			                                        tb->ovh_enc_spread + tb->ovh_share);
	}
	tb->ovh_due = now + g.ovh_period_ns;
	tb->ovh_writes = 0;
	tb->ovh_events = 0;
	tb->ovh_bytes = 0;
}

/* The period of the threads' measurements: $CMON_OVERHEAD_PERIOD_MS
 * milliseconds (0: only at start), else 1 s. */
static uint64_t ovh_period(void)
{
	const char *s = getenv("CMON_OVERHEAD_PERIOD_MS");
	char *end;
	unsigned long long ms;

	if (!s || !*s)
		return 1000000000ull;
	errno = 0;
	ms = strtoull(s, &end, 10);
	if (errno || *end || ms > 86400000ull)
		return 1000000000ull;
	return ms * 1000000ull;
}

/* Encodes the Header as meta record 0. */
static int meta_init(const char *program)
{
	struct emit_header_info h;
	char prog[65], host[65], rawhost[256];
	const char *want;
	uint8_t frame[EMIT_WRITE_MAX];
	size_t len;

	emit_sanitize_word(prog, sizeof prog,
	                   program ? program : program_invocation_short_name);
	if (gethostname(rawhost, sizeof rawhost) < 0)
		rawhost[0] = '\0';
	rawhost[sizeof rawhost - 1] = '\0';
	emit_sanitize_word(host, sizeof host, rawhost);
	h.program = prog;
	h.machine = host;
	h.pid = getpid();
	h.start_unix_ns = (int64_t)clock_ns(CLOCK_REALTIME);
	h.start_ts = clock_ns(CLOCK_MONOTONIC);
	/* CMON_OVERHEAD=0: no measurement, no overhead fields. */
	want = getenv("CMON_OVERHEAD");
	h.has_overhead = !(want && strcmp(want, "0") == 0) &&
	                 emit_overhead(&g.sink, &h.overhead_ns, &h.overhead_spread_ns,
	                               &g.ovh_enc_ns, &g.ovh_enc_spread, &g.ovh_share) == 0;
	g.ovh_period_ns = h.has_overhead ? ovh_period() : 0;
	len = emit_wire_header(frame, sizeof frame, &h);
	g.meta_cap = 16;
	g.meta = calloc(g.meta_cap, sizeof *g.meta);
	if (!len || !g.meta)
		return -ENOMEM;
	g.meta[0].frame = malloc(len);
	if (!g.meta[0].frame)
		return -ENOMEM;
	memcpy(g.meta[0].frame, frame, len);
	g.meta[0].len = (uint32_t)len;
	atomic_store(&g.nmeta, 1);
	atomic_store(&g.nranges, 1);    /* ranges[0]: base 0, count 0 */
	g.own_range = 0;
	return 0;
}

/* Opens the log and sets the state; see cmon_init(). */
static int emit_init(const char *program)
{
	int r;

	pthread_mutex_lock(&g.init_lock);
	if (atomic_load(&g.state) != ST_UNINIT) {
		pthread_mutex_unlock(&g.init_lock);
		return -EALREADY;
	}
	r = emit_sink_open(&g.sink);
	if (r != 0)
		goto out_off;
	emit_clock_init();
	r = meta_init(program);
	if (r < 0)
		goto out_close;
	r = -pthread_key_create(&g.key, tbuf_destroy);
	if (r < 0)
		goto out_close;
	if (atexit(emit_atexit) != 0 ||
	    pthread_atfork(emit_prefork, emit_postfork_parent,
	                   emit_postfork_child) != 0) {
		/* A half-registered handler only ever sees state OFF. */
		r = -ENOMEM;
		goto out_close;
	}
	g.membarrier_ok = syscall(SYS_membarrier,
	                          MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
	                          0, 0) == 0;
	atomic_store(&g.state, ST_ON);
	pthread_mutex_unlock(&g.init_lock);
	/* The Header goes out now, so the reader knows the program is up. */
	pthread_mutex_lock(&g.meta_lock);
	if (meta_flush_locked() == -EPIPE)
		atomic_store(&g.state, ST_DEAD);
	pthread_mutex_unlock(&g.meta_lock);
	return 0;

out_close:
	if (g.sink.owned)
		close(g.sink.fd);
	g.sink.fd = -1;
out_off:
	atomic_store(&g.state, ST_OFF);
	pthread_mutex_unlock(&g.init_lock);
	return r == EMIT_SINK_NONE ? 0 : r;
}

/* ---- the API --------------------------------------------------------- */

int cmon_init(const char *program)
{
	return emit_init(program);
}

bool cmon_enabled(void)
{
	return state_get() == ST_ON;
}

/* The range this process declares new types into, created in a fork child
 * on its first declaration; NULL if there is no room. Holds meta_lock. */
static struct emit_range *own_range_locked(void)
{
	uint32_t nr, slot;

	if (g.own_range >= 0)
		return &g.ranges[g.own_range];
	nr = atomic_load_explicit(&g.nranges, memory_order_relaxed);
	if (nr >= EMIT_MAX_RANGES)
		return NULL;
	slot = (uint32_t)getpid() & 0xfffffu;
	if (slot == 0)
		slot = 0xfffffu;
	g.ranges[nr].base = slot << EMIT_ID_BITS;
	atomic_store_explicit(&g.ranges[nr].count, 0, memory_order_relaxed);
	atomic_store_explicit(&g.nranges, nr + 1, memory_order_release);
	g.own_range = (int)nr;
	return &g.ranges[nr];
}

cmon_type cmon_declare(const char *name, size_t nattrs,
                       const char *const *attrs)
{
	uint8_t frame[EMIT_WRITE_MAX];
	struct emit_range *r;
	struct emit_meta *m;
	uint32_t n, local, id;
	size_t len;
	int err = 0;
	int st = state_get();

	if (st != ST_ON && !(st == ST_EXITING && t_exit_thread)) {
		errno = ENODEV;
		return 0;
	}
	if (!emit_name_valid(name, true) || (nattrs && !attrs)) {
		errno = EINVAL;
		return 0;
	}
	if (nattrs > CMON_MAX_ATTRS) {
		errno = E2BIG;
		return 0;
	}
	for (size_t i = 0; i < nattrs; i++)
		if (!emit_name_valid(attrs[i], false)) {
			errno = EINVAL;
			return 0;
		}
	/* Called from a signal handler that interrupted the library? */
	if (t_locked ||
	    (t_tbuf && atomic_load_explicit(&t_tbuf->busy, memory_order_relaxed))) {
		errno = EDEADLK;
		return 0;
	}
	locked_begin();
	pthread_mutex_lock(&g.meta_lock);
	n = atomic_load_explicit(&g.nmeta, memory_order_relaxed);
	for (uint32_t i = 1; i < n; i++)
		if (strcmp(g.meta[i].name, name) == 0) {
			id = g.meta[i].id;
			goto out;
		}
	r = own_range_locked();
	if (!r) {
		err = ENOTSUP;
		goto out_err;
	}
	local = atomic_load_explicit(&r->count, memory_order_relaxed) + 1;
	if (local > CMON_MAX_TYPES) {
		err = ENOSPC;
		goto out_err;
	}
	if (n + 1 > g.meta_cap) {
		size_t cap = g.meta_cap * 2;
		m = realloc(g.meta, cap * sizeof *m);
		if (!m)
			goto out_nomem;
		g.meta = m;
		g.meta_cap = cap;
	}
	id = r->base + local;
	len = emit_wire_typedef(frame, sizeof frame, id, name, nattrs, attrs);
	m = &g.meta[n];
	m->frame = malloc(len);
	m->name = strdup(name);
	if (!len || !m->frame || !m->name) {
		free(m->frame);
		free(m->name);
		m->frame = NULL;
		m->name = NULL;
		goto out_nomem;
	}
	memcpy(m->frame, frame, len);
	m->len = (uint32_t)len;
	m->id = id;
	/* The TypeDef is pending before the id can be emitted. */
	atomic_store_explicit(&g.nmeta, n + 1, memory_order_release);
	atomic_store_explicit(&r->count, local, memory_order_release);
	goto out;

out_nomem:
	err = ENOMEM;
out_err:
	id = 0;
out:
	pthread_mutex_unlock(&g.meta_lock);
	locked_end();
	if (!id)
		errno = err;
	return id;
}

/* True if TYPE was handed out by a range other than the opener's. */
static bool type_in_other_range(cmon_type type)
{
	uint32_t nr = atomic_load_explicit(&g.nranges, memory_order_acquire);

	for (uint32_t i = 1; i < nr; i++) {
		const struct emit_range *r = &g.ranges[i];
		if ((type >> EMIT_ID_BITS) == (r->base >> EMIT_ID_BITS) &&
		    (type & ((1u << EMIT_ID_BITS) - 1)) - 1u <
		            atomic_load_explicit(&r->count, memory_order_acquire))
			return true;
	}
	return false;
}

/* emit, the rare cases: first event of a thread, a fork child's own types,
 * exiting, log gone. */
static __attribute__((noinline)) void emit_slow(cmon_type type, size_t n,
                                                const double *values)
{
	struct emit_tbuf *tb = tbuf_get();
	int st;

	if (n > CMON_MAX_ATTRS)
		n = CMON_MAX_ATTRS;
	if (!tb || !tbuf_claim(tb)) {
		count_dropped(1);       /* from a signal handler, or no memory */
		return;
	}
	st = state_claimed();
	if (may_write(st)) {
		tbuf_event(tb, type, n, values, false);
		/* While exiting nobody flushes later: write through. */
		if (st != ST_ON && tb->nevents)
			tbuf_flush(tb);
	} else if (st == ST_DEAD || st == ST_EXITING) {
		atomic_fetch_add_explicit(&g.st_dropped, 1, memory_order_relaxed);
	}
	tbuf_leave(tb);
}

void cmon_emit(cmon_type type, size_t n, const double *values)
{
	struct emit_tbuf *tb;
	int st;

	/* Type 0, and any type while logging is off (no id handed out), end
	 * here; so do ids of a fork child's own range, checked in emit_slow. */
	if (unlikely(type - 1u >=
	             atomic_load_explicit(&g.ranges[0].count, memory_order_relaxed))) {
		if (type_in_other_range(type))
			emit_slow(type, values ? n : 0, values);
		return;
	}
	if (unlikely(n > CMON_MAX_ATTRS || !values))
		n = values ? CMON_MAX_ATTRS : 0;
	tb = t_tbuf;
	if (unlikely(!tb || atomic_load_explicit(&tb->busy, memory_order_relaxed))) {
		/* First event of the thread, or a signal handler interrupted an
		 * emit of this very thread: not safe to touch the batch. */
		if (!tb)
			emit_slow(type, n, values);
		else
			count_dropped(1);
		return;
	}
	atomic_store_explicit(&tb->busy, 1, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
	st = atomic_load_explicit(&g.state, memory_order_acquire);
	if (unlikely(st != ST_ON)) {
		tbuf_leave(tb);
		emit_slow(type, n, values);
		return;
	}
	tbuf_event(tb, type, n, values, false);
	tbuf_leave(tb);
}

cmon_proc cmon_declare_proc(const char *name, size_t nargs,
                            const char *const *args, const char *result)
{
	cmon_proc p = { 0, 0 };
	const char *ret_attrs[2] = { result ? result : "r", "exact" };
	char full[CMON_MAX_NAME + 8];

	if (!emit_name_valid(name, false) || strlen(name) + 5 > CMON_MAX_NAME) {
		errno = EINVAL;
		return p;
	}
	snprintf(full, sizeof full, "call@%s", name);
	p.call = cmon_declare(full, nargs, args);
	if (!p.call)
		return p;
	snprintf(full, sizeof full, "ret@%s", name);
	p.ret = cmon_declare(full, 2, ret_attrs);
	if (!p.ret)
		p.call = 0;
	return p;
}

void cmon_call(cmon_proc p, size_t n, const double *args)
{
	cmon_emit(p.call, n, args);
}

void cmon_ret(cmon_proc p, double result)
{
	const double v[2] = { result, 1.0 };   /* exact: the return was seen */

	cmon_emit(p.ret, 2, v);
}

void cmon_flush(void)
{
	struct emit_tbuf *tb;
	int saved_errno = errno;
	int st = state_get();

	if (st == ST_OFF || (st == ST_EXITING && !t_exit_thread))
		goto out;
	tb = st == ST_DEAD ? t_tbuf : tbuf_get();
	if (!tb || !tbuf_claim(tb))
		goto out;
	st = state_claimed();
	/* When the log is gone, this counts what was left as dropped. */
	if (may_write(st) || st == ST_DEAD)
		tbuf_flush(tb);
	tbuf_leave(tb);
out:
	errno = saved_errno;
}

int cmon_get_stats(struct cmon_stats *out)
{
	if (!out)
		return -EINVAL;
	out->events_written = atomic_load(&g.st_written);
	out->events_dropped = atomic_load(&g.st_dropped);
	out->gap_reported = atomic_load(&g.st_gap);
	out->batches_written = atomic_load(&g.st_batches);
	out->batches_dropped = atomic_load(&g.st_batches_dropped);
	return 0;
}
