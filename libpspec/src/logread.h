/* logread.h — reading monitoring logs: cmon-ascii 1 and cmon-bin 1 (private).
 *
 * Contract: DESIGN.md §4. The reader detects the format from the first bytes,
 * parses the header, then hands out one record at a time. It never prints:
 * malformed records are reported through the warning callback (with the
 * ascii line number or the binary byte offset) and skipped.
 *
 * Streaming: the reader uses plain read(2) on the descriptor and returns each
 * record as soon as it is complete, so a checker in continuous mode sees a
 * record the moment it arrives on a pipe. It blocks only when no complete
 * record is buffered.
 *
 * Event type names are interned: every distinct name gets a small dense id
 * (0, 1, 2, ... in order of first appearance) so a client can cache
 * per-type decisions in an array instead of hashing names per record.
 */
#ifndef PSPEC_LOGREAD_H
#define PSPEC_LOGREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum log_format {
    LOG_FORMAT_ASCII = 1,   /* cmon-ascii 1 */
    LOG_FORMAT_BIN = 2,     /* cmon-bin 1 */
} log_format;

/* One header entry: '#key value' (ascii) or a Header field (binary, with the
 * standard fields under the keys "program", "machine", "pid", "tick-ns",
 * "clock", "start-unix-ns", "cmon-overhead-ns" (value "MEAN SPREAD") and
 * extra fields under their own keys). */
typedef struct log_header_field {
    char *key;
    char *value;
} log_header_field;

typedef struct log_header {
    log_format format;
    double tick_ns;             /* nanoseconds per tick; 1 when not given */
    double overhead_ns;         /* the writer's own cost per event, ns ('#cmon-overhead-ns MEAN SPREAD',
                                   Header.overhead_ns); > 0 when given, 0 when not */
    double overhead_spread_ns;  /* its spread, ns (>= 0; 0 when not given) */
    log_header_field *fields;   /* every header entry, in order (excluding the magic line) */
    size_t nfields;
} log_header;

typedef enum log_rec_kind {
    LOG_REC_EVENT = 1,          /* an event record */
    LOG_REC_GAP,                /* the transport dropped `gap` whole records here */
    LOG_REC_OVERHEAD,           /* from here on an event of `thread` costs it `ovh_ns`, give or
                                   take `ovh_spread_ns` ('#cmon-overhead-ns MEAN SPREAD THREAD',
                                   a binary Overhead); only with log_reader_want_overhead */
} log_rec_kind;

/* A record. Pointers stay valid until the next call on the reader.
 * Which fields mean something depends on `kind`: name and values are an
 * event's, gap a gap's, ovh_* an overhead's, and they share their bytes,
 * so that a record is one cache line (64 bytes) when it is handed from the
 * reading thread to the checking one (logread_prefetch.c); a field of
 * another kind is not 0, it is garbage. */
typedef struct log_record {
    log_rec_kind kind;
    uint32_t name_id;           /* events: interned id of the event type name */
    uint64_t pos;               /* events: 1-based ordinal among the log's event records
                                   (malformed ones included, so positions do not depend on
                                   which records could be parsed); gaps and overheads:
                                   ordinal of the last event record before it (0 if none) */
    uint64_t where;             /* ascii: line number; binary: byte offset of the frame */
    int64_t ts;                 /* timestamp, ticks */
    int64_t thread;             /* thread id (events; overheads: the thread it is for) */
    union {
        struct {                        /* LOG_REC_EVENT */
            const char *name;           /* event type name (NUL-terminated) */
            const double *values;       /* attribute values, in log order */
            uint32_t nvalues;
        };
        uint64_t gap;                   /* LOG_REC_GAP: number of records dropped */
        struct {                        /* LOG_REC_OVERHEAD */
            double ovh_ns;              /* the thread's cost per event, ns (> 0) */
            double ovh_spread_ns;       /* its spread, ns (>= 0) */
        };
    };
} log_record;

/* Called for each malformed record, which is then skipped.
 * `where` is the line number (ascii) or byte offset (binary). */
typedef void (*log_warn_fn)(void *ctx, const char *logname, uint64_t where, const char *msg);

typedef struct log_reader log_reader;

/* Open a reader on `fd` (not closed by the reader unless `own_fd`), detect the
 * format and read the header. `logname` is used in messages ("-" is shown as
 * "<stdin>"). On failure returns NULL and stores a heap-allocated message in
 * *errmsg ("unrecognized log format", "bad header: ...", read errors). */
log_reader *log_reader_open(int fd, bool own_fd, const char *logname,
                            log_warn_fn warn, void *warn_ctx, char **errmsg);
/* Same from a byte buffer (used by tests and fuzzers; the buffer is copied). */
log_reader *log_reader_open_mem(const void *data, size_t len, const char *logname,
                                log_warn_fn warn, void *warn_ctx, char **errmsg);
/* A reader of bytes its caller hands over as they come (pspec_stream):
 * opened on the first bytes (copied), with `eof` when no more will come.
 * Returns 0 with *out set; -EAGAIN (no message) when the header is not
 * complete yet (open again with more bytes); else negative with *errmsg.
 * Once open, log_reader_feed appends bytes; a record not complete yet
 * makes log_reader_next return -EAGAIN (nothing consumed), and
 * log_reader_feed_end says the log ended. */
int log_reader_open_fed(log_reader **out, const void *data, size_t len, bool eof, const char *logname,
                        log_warn_fn warn, void *warn_ctx, char **errmsg);
void log_reader_feed(log_reader *r, const void *data, size_t len);
void log_reader_feed_end(log_reader *r);
/* Everything fed has been read: give the buffer back until the next feed
 * (a caller with many streams keeps memory for the ones being fed only). */
void log_reader_feed_idle(log_reader *r);

const log_header *log_reader_header(const log_reader *r);

/* The next record: 1 when *rec was filled, 0 at end of log (EOF or an End
 * record), negative errno-style on a read error (message in *errmsg). */
int log_reader_next(log_reader *r, log_record *rec, char **errmsg);
/* The same without the copy: *rec points to a record (and values) the
 * reader keeps until its next call, rewind or close. The engine's loop
 * uses it: read ahead, the record is the batch's own, in place. Inline:
 * read ahead, the rest of a batch up to its next warning is handed out
 * without a call (the window); the rest is log_reader_next_ref_more(). */
typedef struct log_reader_window {
    const log_record *next, *end;   /* next < end: records to hand out as they are */
} log_reader_window;
int log_reader_next_ref_more(log_reader *r, const log_record **rec, char **errmsg);
static inline int log_reader_next_ref(log_reader *r, const log_record **rec, char **errmsg)
{
    log_reader_window *w = (log_reader_window *)r;   /* every reader's first member */
    if (w->next < w->end) {
        /* the records were written on the reading thread's core: ask for
         * the one 8 ahead now (past the end, a prefetch does no harm) */
        __builtin_prefetch(w->next + 8);
        *rec = w->next++;
        return 1;
    }
    return log_reader_next_ref_more(r, rec, errmsg);
}

/* Name of an interned id (valid for the reader's lifetime). */
const char *log_reader_name(const log_reader *r, uint32_t name_id);
/* Number of ids interned so far. */
uint32_t log_reader_nnames(const log_reader *r);

/* Start again from the first record (same header). Only for seekable files
 * and memory readers; returns -ESPIPE otherwise. */
int log_reader_rewind(log_reader *r);
/* With `on`, a pass after a rewind does not call the warning callback again
 * for the malformed records an earlier pass already reported (the count of
 * log_reader_nmalformed still includes them). Off by default. */
void log_reader_warn_once(log_reader *r, bool on);
/* Call idle(ctx, records) whenever the reader has handed out every record
 * it has and must wait for more input (a read on a non-blocking fd found
 * nothing yet); `records` counts the event records handed out so far (as
 * log_record.pos). Read on the caller's thread only (no read-ahead). */
void log_reader_on_idle(log_reader *r, void (*idle)(void *ctx, uint64_t records), void *ctx);

/* With `on`, log_reader_next also returns the writer's per-thread cost
 * updates (LOG_REC_OVERHEAD; a malformed one is reported and skipped).
 * Off by default: they are skipped silently, as comments are. */
void log_reader_want_overhead(log_reader *r, bool on);

/* With `on`, a second thread reads and parses the log ahead, in batches,
 * while the caller's thread takes the records: what log_reader_next
 * returns, the warnings (given on the caller's thread, in their place) and
 * the counts are exactly those of reading directly. Only for a reader of a
 * regular file or of memory, read to its end (-ENOTSUP otherwise: on a
 * pipe a batch would hold records back). Set log_reader_want_overhead
 * first; log_reader_rewind stops the thread and the next record starts it
 * again. Returns 0. */
int log_reader_prefetch(log_reader *r, bool on);

/* How the read-ahead thread hands batches over, for tests and benchmarks
 * (pcheck takes it from PSPEC_PREFETCH_BATCH, _SPIN and _HANDOFF; the
 * library itself reads no environment). */
typedef struct log_prefetch_tuning {
    uint32_t batch;         /* records per batch (0: the built-in 1024) */
    uint32_t spin;          /* polls before a side sleeps, at most (UINT32_MAX: as long as the
                               built-in time allows; 0: sleep at once) */
    uint32_t handback_at;   /* hand back to one thread after this many batches whatever the
                               timing (0: judged by the timing) */
    bool never_back;        /* never hand back */
} log_prefetch_tuning;
/* The tuning those three variables spell (each NULL, or not a number in
 * range: its default). */
log_prefetch_tuning log_prefetch_tuning_parse(const char *batch, const char *spin, const char *handoff);
/* Use `t` (copied; NULL: the defaults) when the read-ahead thread next starts. */
void log_reader_prefetch_tune(log_reader *r, const log_prefetch_tuning *t);

/* Counts for reports: records read so far, malformed records skipped. */
uint64_t log_reader_nrecords(const log_reader *r);
/* Event records read so far, malformed ones included (as positions count). */
uint64_t log_reader_pos(const log_reader *r);
uint64_t log_reader_nmalformed(const log_reader *r);

void log_reader_free(log_reader *r);   /* NULL ok */

#endif
