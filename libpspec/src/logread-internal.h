/* logread-internal.h — what the log reader's files share (private).
 *
 * logread_core.c owns the reader object, the input buffer, format
 * detection, positions, warnings, name interning and the public entry
 * points; each format is a `struct logr_ops` (logread_ascii.c,
 * logread_bin.c) the core dispatches through; logread_prefetch.c reads
 * ahead on a second thread. The decoding helpers at the end are exported
 * only so the unit test and the fuzzers can compare the fast paths with
 * the slow ones.
 */
#ifndef PSPEC_LOGREAD_INTERNAL_H
#define PSPEC_LOGREAD_INTERNAL_H

#include <locale.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "logread.h"

/* Limits: everything a bad log can make the reader allocate is bounded. */
#define LOG_READ_CHUNK (256u * 1024)          /* bytes asked of each read(2) */
#define LOG_READ_FIRST (16u * 1024)           /* ...of a pipe or socket at first: the
                                                 buffer doubles up to LOG_READ_CHUNK
                                                 while reads fill it */
#define LOG_MAX_LINE (1024u * 1024)           /* longest ascii line */
#define LOG_MAX_FRAME (16u * 1024 * 1024)     /* longest binary frame */
#define LOG_MAX_ARENA (64u * 1024 * 1024)     /* protobuf-c memory for one frame */
#define LOG_MAX_NAME 1024u                    /* longest event type name */
#define LOG_MAX_NAMES 65536u                  /* distinct event type names */
#define LOG_MAX_TYPES 65536u                  /* binary TypeDef ids at or above LOG_SMALL_TYPES */
#define LOG_MAX_HEADER_FIELDS 4096u           /* header entries */
#define LOG_MAX_NUMBER 256u                   /* longest ascii number token */
#define LOG_BUF_PAD 16u                       /* readable slack after the data */

/* Small-id TypeDef map size: ids below this use a direct array. */
#define LOG_SMALL_TYPES 65536u

/* Bump allocator handed to protobuf-c; reset after every frame. */
typedef struct log_arena {
    char *block;            /* main block */
    size_t cap;             /* its size */
    size_t used;            /* bytes handed out from it */
    void **extra;           /* overflow allocations since the last reset */
    size_t nextra, extra_cap;
    size_t extra_bytes;     /* their total size */
} log_arena;

/* One slot of the name hash table; id == UINT32_MAX marks an empty slot. */
typedef struct log_name_slot {
    uint32_t hash;
    uint32_t id;
} log_name_slot;

/* One entry of the ascii reader's name cache: a name of at most 15 bytes as
 * two little-endian words, zero beyond its end, and its id. Names hold no
 * byte below '!', so w0 is never 0 for a name: zeroed entries are empty. */
typedef struct log_name_cache {
    uint64_t w0, w1;
    uint32_t id;
} log_name_cache;

#define LOG_NAME_CACHE 128u                   /* entries of the name cache (a power of 2) */

/* One slot of the large-id TypeDef map; key == 0 marks an empty slot
 * (keys are stored as id + 1 in 64 bits so every uint32 id fits). */
typedef struct log_type_slot {
    uint64_t key;
    uint32_t name_id;
} log_type_slot;

typedef struct log_prefetch log_prefetch;

/* One log format: what the core calls for it. The core owns the bytes
 * (logr_fill), the positions and the warnings; a format turns the bytes
 * into records. */
typedef struct logr_ops {
    log_format format;      /* what log_reader_header() says */
    /* Read the header when the input is in this format: 0; 1 when it is
     * not (the core tries the next format); negative errno-style with a
     * message in *errmsg when it is but the header is bad or unreadable. */
    int (*open)(log_reader *r, char **errmsg);
    /* The next record: 1 with *rec filled, 0 at end of log, negative
     * errno-style on a read or framing error (message in *errmsg). */
    int (*next)(log_reader *r, log_record *rec, char **errmsg);
    /* Forget per-pass state after the core rewound the bytes (NULL: none). */
    void (*rewind)(log_reader *r);
    /* Free what the format allocated in the reader (NULL: nothing). */
    void (*free)(log_reader *r);
} logr_ops;

/* The formats, in the order the core tries them. */
extern const logr_ops logr_ascii_ops;   /* cmon-ascii 1 (logread_ascii.c) */
extern const logr_ops logr_bin_ops;     /* cmon-bin 1 (logread_bin.c) */

struct log_reader {
    /* what the checking thread reads for every record, on lines of their
     * own: read ahead, another thread writes the rest of the reader for
     * every record, and a shared line would cross cores each time */
    log_reader_window win;  /* first: see log_reader_next_ref() (set only read ahead) */
    log_prefetch *pf;       /* reading ahead on a second thread (logread_prefetch.c), or NULL */
    log_prefetch_tuning pf_tune;   /* log_reader_prefetch_tune() */
    bool pf_tuned;
    log_record cur;         /* log_reader_next_ref's record when read directly */
    char pad_[64];          /* (the struct is only 16-byte aligned) */

    const logr_ops *ops;    /* the log's format (set once the header is read) */

    /* where the bytes come from */
    int fd;                 /* -1 for memory readers */
    bool own_fd;
    bool mem;               /* memory reader: buf holds the whole log */
    bool fed;               /* fed reader: the caller appends bytes (log_reader_feed) */
    bool eof;               /* no more bytes will come */
    bool ended;             /* end of log reached (EOF handled or End record) */
    char *logname;          /* display name ("<stdin>" for "-") */
    log_warn_fn warn;
    void *warn_ctx;

    /* input buffer: unread bytes are buf[start..end), slack after end */
    char *buf;
    size_t cap;             /* allocated bytes minus LOG_BUF_PAD */
    unsigned full_reads;    /* reads in a row that filled the room given */
    size_t start, end;
    uint64_t base;          /* stream offset of buf[0] */
    size_t scan;            /* ascii: bytes after start known to hold no newline */
    size_t complete;        /* ascii: buf[start..complete) holds whole lines only */
    bool skipping;          /* ascii: the rest of a line too long is still to be discarded
                               (a fed reader waits for its newline) */

    /* rewinding */
    off_t fd_origin;        /* file offset where the log starts; -1: not seekable */
    uint64_t data_off;      /* stream offset of the first record */
    uint64_t data_line;     /* ascii: lines before the first record */

    log_header hdr;
    size_t hdr_cap;

    /* position state */
    uint64_t lineno;        /* ascii: lines consumed so far */
    uint64_t pos;           /* event records seen (malformed included) */
    uint64_t nrecords;      /* records returned */
    uint64_t nmalformed;    /* malformed records skipped */
    uint64_t warned_upto;   /* highest 'where' reported by a warning so far */
    uint64_t quiet_upto;    /* after a rewind: warnings up to here were already given */
    bool rewound;           /* the reader has been rewound at least once */
    bool warn_once;         /* after a rewind, stay quiet about records already reported */
    void (*idle)(void *ctx, uint64_t records); /* log_reader_on_idle() */
    void *idle_ctx;
    int64_t prev_ts;        /* binary: timestamp of the previous Event */
    bool fastpath;          /* use the fast paths (see logr_set_fastpath) */
    bool want_overhead;     /* return LOG_REC_OVERHEAD records (log_reader_want_overhead) */

    /* values of the current record */
    double *vals;
    size_t vals_cap;

    /* interned names */
    char **names;
    uint32_t *name_len;
    uint32_t nnames, names_cap;
    log_name_slot *slots;
    uint32_t slot_mask;     /* table size - 1 */
    log_name_cache ncache[LOG_NAME_CACHE];  /* ascii fast path: short names seen, direct-mapped */

    /* binary TypeDef id -> name id + 1 (0: undefined) */
    uint32_t *tsmall;
    uint32_t tsmall_cap;
    log_type_slot *tbig;
    uint32_t tbig_mask, tbig_count;

    log_arena arena;
};

/* --- logread_core.c ------------------------------------------------------ */

/* Tests and fuzzers only: when not 0, no read(2) on this thread asks for
 * more bytes, so a file is read in pieces as small as a slow pipe delivers.
 * Per thread, like every other state of the library (pspec.h, "Threads"). */
extern _Thread_local size_t logr_test_read_max;
/* Read once more into the buffer so that at least `want` unread bytes fit.
 * Returns 1 when bytes arrived, 0 at EOF, negative errno on a read error
 * (message in *errmsg). */
int logr_fill(log_reader *r, size_t want, char **errmsg);
/* Store a formatted message in *errmsg (when errmsg is not NULL). */
void logr_error(char **errmsg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Report a malformed record at `where` and count it. */
void logr_warn(log_reader *r, uint64_t where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Quote a token for a message: at most 40 bytes, non-printables escaped. */
const char *logr_quote(char out[200], const char *s, size_t n);
/* Append a header entry (copies both strings). */
int logr_header_add(log_reader *r, const char *key, size_t klen, const char *val, size_t vlen);
/* Intern the name [s, s+n) (already validated); UINT32_MAX when the table is full. */
uint32_t logr_intern(log_reader *r, const char *s, size_t n, uint32_t hash);
/* Hash of the name [s, s+n). */
uint32_t logr_hash(const char *s, size_t n);
/* The "C" locale, so numbers never depend on setlocale(); may be 0. */
locale_t log_c_locale(void);
/* strtod in the "C" locale. */
double log_strtod(const char *s, char **end);
/* The shortest decimal text ("%.15g".."%.17g", "C" locale) that reads back as v. */
void log_fmt_double(char out[40], double v);
/* Use (default) or bypass the fast paths: the hand-written binary Event
 * decoder and the ascii parser for well-formed lines. For tests and fuzzers,
 * which check that both ways give the same results. */
void logr_set_fastpath(log_reader *r, bool on);
/* Clear *rec as a record that is not an event (a gap, a thread's cost) of
 * kind `kind` at `where`: after the events read so far, at the latest
 * timestamp. */
static inline void logr_marker(const log_reader *r, log_record *rec, log_rec_kind kind, uint64_t where)
{
    memset(rec, 0, sizeof *rec);
    rec->kind = kind;
    rec->pos = r->pos;
    rec->where = where;
    rec->ts = r->prev_ts;
}

/* A gap of `n` dropped records at `where`, counted as a record. Returns 1. */
static inline int logr_gap(log_reader *r, log_record *rec, uint64_t where, uint64_t n)
{
    logr_marker(r, rec, LOG_REC_GAP, where);
    rec->gap = n;
    r->nrecords++;
    return 1;
}

/* True when MEAN SPREAD are a writer's cost: finite, MEAN > 0, SPREAD >= 0. */
static inline bool logr_overhead_ok(double mean, double spread)
{
    return mean > 0 && isfinite(mean) && spread >= 0 && isfinite(spread);
}

/* A thread's cost update at `where` (already checked by logr_overhead_ok).
 * Returns 1. */
static inline int logr_overhead(const log_reader *r, log_record *rec, uint64_t where,
                                int64_t thread, double mean, double spread)
{
    logr_marker(r, rec, LOG_REC_OVERHEAD, where);
    rec->thread = thread;
    rec->ovh_ns = mean;
    rec->ovh_spread_ns = spread;
    return 1;
}

/* Fill *rec with the event at `where` whose position is already counted
 * (r->pos) and whose `nv` values are in r->vals, and count it. Returns 1. */
static inline __attribute__((always_inline)) int logr_event(log_reader *r, log_record *rec,
                                                            uint64_t where, int64_t ts,
                                                            int64_t thread, uint32_t id,
                                                            uint32_t nv)
{
    rec->kind = LOG_REC_EVENT;
    rec->pos = r->pos;
    rec->where = where;
    rec->ts = ts;
    rec->thread = thread;
    rec->name_id = id;
    rec->name = r->names[id];
    rec->values = r->vals;
    rec->nvalues = nv;
    r->nrecords++;
    return 1;
}

/* Make sure vals can hold n values. */
void logr_vals_reserve(log_reader *r, size_t n);
/* The next record read from the bytes, on this thread (what
 * log_reader_next does without prefetching). */
int logr_next_direct(log_reader *r, log_record *rec, char **errmsg);
/* The same into the reader's own record, handed out in place. */
static inline int logr_next_direct_ref(log_reader *r, const log_record **rec, char **errmsg)
{
    *rec = &r->cur;
    return logr_next_direct(r, &r->cur, errmsg);
}

/* --- logread_prefetch.c --------------------------------------------------- */

/* log_reader_next, log_reader_name, log_reader_nnames while prefetching. */
int logr_prefetch_next(log_reader *r, const log_record **rec, char **errmsg);
const char *logr_prefetch_name(const log_reader *r, uint32_t name_id);
uint32_t logr_prefetch_nnames(const log_reader *r);
/* True on the thread reading ahead: its warnings go into its batch. */
bool logr_prefetch_producing(const log_reader *r);
/* Whether the consumer asked for the reading back (tests). */
bool logr_prefetch_handback_asked(const log_reader *r);
/* The rule it asks by: the engine waited for batches more than three
 * quarters of the time judged (exported for the tests). */
bool logr_prefetch_handback_due(uint64_t waited_ns, uint64_t total_ns);
/* Put the warning at `where` into the batch being filled. */
void logr_prefetch_warn(log_reader *r, uint64_t where, const char *msg);
/* Stop reading ahead before the reader is rewound (it starts again at the
 * next record asked for). */
void logr_prefetch_rewind(log_reader *r);
/* Stop, and free what prefetching holds. */
void logr_prefetch_free(log_reader *r);

/* --- inline name lookup for the hot path --------------------------------
 * "Padded" strings have at least 16 readable bytes from their start: names
 * in the input buffer (LOG_BUF_PAD bytes of slack follow the data) and the
 * interned copies (allocated with 16 zero bytes after the name). */

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define LOGR_LITTLE_ENDIAN 1
#endif

static inline uint64_t logr_hash_step(uint64_t h, uint64_t w)
{
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    return h ^ (h >> 29);
}

static inline uint32_t logr_hash_end(uint64_t h, uint64_t tail)
{
    h = (h ^ tail) * 0xc4ceb9fe1a85ec53ull;
    return (uint32_t)(h ^ (h >> 32));
}

/* logr_hash() of a padded name, reading the tail as one word. */
static inline uint32_t logr_hash_padded(const char *s, size_t n)
{
#ifdef LOGR_LITTLE_ENDIAN
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n, w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = logr_hash_step(h, w);
    }
    memcpy(&w, s, 8);
    return logr_hash_end(h, n ? w & ((1ull << (8 * n)) - 1) : 0);
#else
    return logr_hash(s, n);
#endif
}

/* Equality of two padded names of length n. */
static inline bool logr_name_eq(const char *a, const char *b, size_t n)
{
#ifdef LOGR_LITTLE_ENDIAN
    if (n <= 16) {
        uint64_t a0, b0, a1, b1;
        memcpy(&a0, a, 8);
        memcpy(&b0, b, 8);
        memcpy(&a1, a + 8, 8);
        memcpy(&b1, b + 8, 8);
        uint64_t m0 = n >= 8 ? ~0ull : (1ull << (8 * n)) - 1;
        uint64_t m1 = n >= 16 ? ~0ull : n <= 8 ? 0 : (1ull << (8 * (n - 8))) - 1;
        return (((a0 ^ b0) & m0) | ((a1 ^ b1) & m1)) == 0;
    }
#endif
    return memcmp(a, b, n) == 0;
}

/* Id of the padded name [s, s+n) with hash h, or UINT32_MAX if not interned. */
static inline uint32_t logr_find_padded(const log_reader *r, const char *s, size_t n, uint32_t h)
{
    if (!r->slots)
        return UINT32_MAX;
    for (uint32_t i = h & r->slot_mask;; i = (i + 1) & r->slot_mask) {
        log_name_slot sl = r->slots[i];
        if (sl.id == UINT32_MAX)
            return UINT32_MAX;
        if (sl.hash == h && r->name_len[sl.id] == n && logr_name_eq(r->names[sl.id], s, n))
            return sl.id;
    }
}

/* True when [s, s+n) is an event name: [A-Za-z_][A-Za-z0-9_]* or call@NAME / ret@NAME. */
bool log_name_valid(const char *s, size_t n);

/* --- logread_ascii.c ---------------------------------------------------- */

/* Parse the number token [s, e) as the reader does (fast path, then
 * strtod_l); *s..*e must be writable with one byte of slack at e.
 * Returns 0, -EINVAL for bad syntax, -ERANGE when out of range. */
int logascii_number(log_reader *r, char *s, char *e, double *out);

/* --- logread_bin.c ------------------------------------------------------ */

/* Most Event.ivalues the fast path decodes; an Event with more goes to protobuf-c. */
#define LOGBIN_FAST_IVALUES 16

/* An Event as decoded from the wire, before any checks. */
typedef struct logbin_event {
    bool has_type, has_thread, has_ts, has_ts_delta;
    uint32_t type;
    int64_t thread;
    uint64_t ts;
    int64_t ts_delta;
    size_t nvalues;
    const unsigned char *values;    /* nvalues little-endian doubles (fast path), or NULL
                                       when the values came as Event.ivalues: then they
                                       are in the decoder's `ivals`, converted */
} logbin_event;

/* Hand-written decoder for a frame holding exactly one Record{event}: 1 when
 * it decoded the frame, 0 when it declines (protobuf-c must decide).
 * Event.ivalues go to `ivals` (room for LOGBIN_FAST_IVALUES) as doubles. */
int logbin_decode_fast(const unsigned char *p, size_t n, logbin_event *ev, double *ivals);
/* Differential check for tests and fuzzers: 0 when the fast decoder declines
 * or agrees with protobuf-c on the frame, -1 when they disagree. */
int logbin_check_fast(const unsigned char *p, size_t n);

#endif
