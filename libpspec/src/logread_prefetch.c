/* logread_prefetch.c — reading ahead on a second thread (issue 14): the
 * reader's own thread parses records into batches while the caller's
 * thread (the engine) takes them, so that parsing and checking run on two
 * cores at once.
 *
 * Hand-off: a ring of PF_NBATCH batches, one producer and one consumer.
 * Each batch has a `full` word: the producer fills a batch whose word is
 * 0 and stores 1 (release); the consumer takes a batch whose word is 1
 * (acquire) and stores 0 when it is done with it. No lock: a side whose
 * batch is not ready polls for up to PF_SPIN_NS, yielding its CPU now and
 * then, and then sleeps in futex(2) on that word,
 * and every store of a word is followed by a wake when the other side
 * sleeps.
 *
 * What the consumer sees is exactly what the direct reader gives, in the
 * same order: each batch carries its records (values copied), the names
 * interned while it was filled (the strings are the reader's, which never
 * move), and the warnings of malformed records, each placed before the
 * record it came before; the consumer calls the warning callback itself,
 * on its own thread, at that point. The last batch carries the end: the
 * direct reader's status and message.
 *
 * Handing back: when the engine turns out to be much quicker than the
 * reader (it waited for batches three quarters of the time over batches
 * PF_JUDGE_FROM to PF_JUDGE_FROM + PF_JUDGE_N), two threads only add the
 * hand-off (each record written on one core and read on the other) to the
 * reader's time, so the consumer asks the producer to stop: the producer
 * marks the batch it is filling as the last (`last`), and once the
 * consumer has taken it, it reads directly, on its own thread, from where
 * the producer stopped. log_prefetch_tuning (tests: pcheck's
 * PSPEC_PREFETCH_HANDOFF=N) asks for it after N batches whatever the timing,
 * or never.
 *
 * Only for logs read to the end without waiting (regular files, memory):
 * on a pipe a record must reach the checker the moment it arrives, and a
 * batch would hold it back. log_reader_prefetch refuses the others.
 */
#include "logread-internal.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define PF_NBATCH 4
#define PF_RECORDS 1024     /* records per batch (log_prefetch_tuning.batch for tests): four fit in L2 */
#define PF_SPIN_NS 200000   /* how long a side polls a word before it sleeps on it: longer
                               than either side takes over a batch (20-40 us), so that a
                               side keeping up never sleeps and the other never pays a
                               futex wake for it; timed, since a poll (x86 PAUSE) takes
                               10 ns on one CPU and 50 on another. log_prefetch_tuning.spin = N
                               (tests) stops after N polls too: 0 sleeps at once, every
                               hand-off a futex */
#define PF_JUDGE_FROM 2     /* batches taken before the engine's waiting is timed */
#define PF_JUDGE_N 16       /* batches it is timed over */

typedef struct pf_warn {
    uint32_t before;        /* index of the record it precedes in its batch */
    uint64_t where;
    char *msg;
} pf_warn;

typedef struct pf_batch {
    alignas(64) _Atomic uint32_t full;  /* 1: filled, the consumer's; 0: the producer's */
    _Atomic uint32_t sleepers;          /* threads in futex_wait on full */
    /* The rest on lines of their own: a consumer ahead of the producer
     * polls `full` of the batch being filled, and if the counts written
     * for every record shared its line, the line would travel between
     * the cores for every record (it did: the producer ran at half the
     * reader's speed). */
    alignas(64) log_record *recs;       /* values: offsets into vals while it is filled,
                                           then pointers (batch_seal); handed out in place */
    uint32_t n;
    double *vals;
    size_t nvals, vcap;
    char **names;           /* names interned while it was filled, in id order */
    uint32_t names_from;    /* the id of names[0] */
    uint32_t nnames, names_cap;
    pf_warn *warns;
    uint32_t nwarn, warn_cap;
    bool final;             /* the end: rc and err below */
    bool last;              /* the producer stopped after it (a hand-back): read directly */
    int rc;
    char *err;
} pf_batch;

/* The fields each side writes are on cache lines of their own: a line
 * written by one thread and read by the other for every record would
 * travel between the cores for every record. */
struct log_prefetch {
    pf_batch b[PF_NBATCH];
    /* read by both, written only while the producer does not run */
    alignas(64) uint32_t cap;   /* records per batch */
    uint32_t spin;          /* at most this many polls before sleeping (log_prefetch_tuning.spin;
                               UINT32_MAX: as many as PF_SPIN_NS allows) */
    pthread_t thread;
    bool running;           /* the producer thread exists (not joined yet) */
    bool done;              /* the consumer took the last batch: read directly now */
    /* written by the consumer to stop the producer, rarely */
    alignas(64) _Atomic bool stop;
    _Atomic bool handback;  /* stop after the batch being filled; the consumer reads on */
    /* the producer's */
    alignas(64) uint64_t pidx;  /* batches filled */
    uint32_t pnames;        /* names interned when its batch began */
    /* the consumer's */
    alignas(64) uint64_t cidx;  /* batches taken */
    pf_batch *cur;          /* the batch being handed out */
    uint32_t ci, cw;        /* next record, next warning in cur */
    uint32_t handback_at;   /* log_prefetch_tuning: batches before a hand-back (0: judge) */
    bool never_back;        /* log_prefetch_tuning.never_back */
    uint64_t judge_t0, waited_ns;   /* the timing of batches PF_JUDGE_FROM.. */
    const char **names;     /* every name id it knows */
    uint32_t nnames, names_cap;
};

/* A polite poll: tells the CPU this is a spin loop (x86 PAUSE, arm YIELD). */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void futex_wait(_Atomic uint32_t *w, uint32_t v)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Wait until b's full word differs from v (or, for the producer, a stop
 * is asked): poll it for PF_SPIN_NS, then sleep. A sleeper counts itself
 * first, so that a side handing a batch over makes the futex call only
 * when someone sleeps (set_full). */
static void wait_while(log_prefetch *pf, pf_batch *b, uint32_t v)
{
    if (atomic_load_explicit(&b->full, memory_order_acquire) != v)
        return;
    bool polling = pf->spin > 0;
    uint64_t until = polling ? now_ns() + PF_SPIN_NS : 0;
    for (uint32_t i = 1; atomic_load_explicit(&b->full, memory_order_acquire) == v; i++) {
        if (atomic_load_explicit(&pf->stop, memory_order_relaxed))
            return;
        if (polling) {
            cpu_relax();
            if (i % 64 == 0) {
                if (now_ns() >= until)
                    polling = false;
                /* the other side may be waiting for this CPU (a loaded
                 * machine, or both threads on one vCPU): let it run */
                sched_yield();
            }
            if (i >= pf->spin)
                polling = false;
        } else {
            atomic_fetch_add_explicit(&b->sleepers, 1, memory_order_seq_cst);
            if (atomic_load_explicit(&b->full, memory_order_seq_cst) == v &&
                !atomic_load_explicit(&pf->stop, memory_order_seq_cst))
                futex_wait(&b->full, v);
            atomic_fetch_sub_explicit(&b->sleepers, 1, memory_order_relaxed);
        }
    }
}

/* Hand b over (full = v), waking the other side if it sleeps on it: the
 * store and the load of sleepers are both seq_cst, so either the sleeper
 * sees the new value before it sleeps or this sees the sleeper. */
static void set_full(pf_batch *b, uint32_t v)
{
    atomic_store_explicit(&b->full, v, memory_order_seq_cst);
    if (atomic_load_explicit(&b->sleepers, memory_order_seq_cst))
        futex_wake(&b->full);
}

/* ---- the producer -------------------------------------------------------------- */

static void batch_reset(pf_batch *b)
{
    b->n = 0;
    b->nvals = 0;
    b->nnames = 0;
    for (uint32_t i = 0; i < b->nwarn; i++)
        free(b->warns[i].msg);
    b->nwarn = 0;
    b->final = false;
    b->last = false;
    b->rc = 0;
    free(b->err);
    b->err = NULL;
}

/* The batch the producer is filling (only while it runs). */
static pf_batch *producing(log_prefetch *pf)
{
    return &pf->b[pf->pidx % PF_NBATCH];
}

void logr_prefetch_warn(log_reader *r, uint64_t where, const char *msg)
{
    pf_batch *b = producing(r->pf);
    if (b->nwarn == b->warn_cap) {
        b->warn_cap = b->warn_cap ? 2 * b->warn_cap : 8;
        b->warns = ps_realloc(b->warns, b->warn_cap * sizeof *b->warns);
    }
    b->warns[b->nwarn++] = (pf_warn){.before = b->n, .where = where, .msg = ps_strdup(msg)};
}

/* Keep the record the direct reader just put at b->recs[b->n]: its values
 * (in the reader's buffer until its next record) are copied into b. */
static void batch_keep(pf_batch *b)
{
    log_record *o = &b->recs[b->n++];
    if (o->kind == LOG_REC_EVENT) {
        uint32_t nv = o->nvalues;
        if (PS_UNLIKELY(b->nvals + nv > b->vcap)) {
            b->vcap = (b->nvals + nv) * 2 + 64;
            b->vals = ps_realloc(b->vals, b->vcap * sizeof *b->vals);
        }
        for (uint32_t i = 0; i < nv; i++)
            b->vals[b->nvals + i] = o->values[i];
        o->values = (const double *)(uintptr_t)b->nvals;
        b->nvals += nv;
    }
}

/* The batch is full: its values stay where they are now, so the records'
 * offsets become pointers, here where the records are still in this
 * core's cache; the consumer hands them out as they are. */
static void batch_seal(pf_batch *b)
{
    for (uint32_t i = 0; i < b->n; i++) {
        log_record *o = &b->recs[i];
        if (o->kind == LOG_REC_EVENT)
            /* (a batch of events without values has no array) */
            o->values = b->vals ? b->vals + (uintptr_t)o->values : NULL;
    }
}

/* The names the reader interned since the batch began go with it. */
static void batch_names(log_reader *r, log_prefetch *pf, pf_batch *b)
{
    b->names_from = pf->pnames;
    b->nnames = r->nnames - pf->pnames;
    if (b->nnames > b->names_cap) {
        b->names_cap = b->nnames;
        b->names = ps_realloc(b->names, b->names_cap * sizeof *b->names);
    }
    for (uint32_t i = 0; i < b->nnames; i++)
        b->names[i] = r->names[pf->pnames + i];
    pf->pnames = r->nnames;
}

/* The reader whose producer runs on this thread (set by the thread itself:
 * the consumer's copy of the thread id is written only once
 * pthread_create returns, after the producer may have warned). */
static __thread const log_reader *t_producing;

static void *producer(void *arg)
{
    log_reader *r = arg;
    log_prefetch *pf = r->pf;
    t_producing = r;
    for (;;) {
        pf_batch *b = producing(pf);
        wait_while(pf, b, 1);
        if (atomic_load_explicit(&pf->stop, memory_order_relaxed))
            return NULL;
        batch_reset(b);
        b->last = atomic_load_explicit(&pf->handback, memory_order_relaxed);
        while (!b->last && b->n < pf->cap) {
            char *err = NULL;
            int rc = logr_next_direct(r, &b->recs[b->n], &err);
            if (rc != 1) {
                b->final = true;
                b->rc = rc;
                b->err = err;
                break;
            }
            batch_keep(b);
            if ((b->n & 255) == 0) {
                if (atomic_load_explicit(&pf->stop, memory_order_relaxed))
                    return NULL;
                b->last = atomic_load_explicit(&pf->handback, memory_order_relaxed);
            }
        }
        if (b->final)
            b->last = false;
        batch_seal(b);
        batch_names(r, pf, b);
        set_full(b, 1);
        pf->pidx++;
        if (b->final || b->last)
            return NULL;
    }
}

/* ---- the consumer -------------------------------------------------------------- */

/* Stop the producer (if any) and forget every batch; the direct reader is
 * left wherever the producer got to. */
static void pf_halt(log_reader *r)
{
    log_prefetch *pf = r->pf;
    if (pf->running) {
        atomic_store_explicit(&pf->stop, true, memory_order_relaxed);
        for (int i = 0; i < PF_NBATCH; i++) {
            atomic_store_explicit(&pf->b[i].full, 0, memory_order_release);
            futex_wake(&pf->b[i].full);
        }
        pthread_join(pf->thread, NULL);
        pf->running = false;
    }
    for (int i = 0; i < PF_NBATCH; i++) {
        batch_reset(&pf->b[i]);
        atomic_store_explicit(&pf->b[i].full, 0, memory_order_relaxed);
    }
    atomic_store_explicit(&pf->stop, false, memory_order_relaxed);
    atomic_store_explicit(&pf->handback, false, memory_order_relaxed);
    pf->judge_t0 = pf->waited_ns = 0;
    pf->pidx = pf->cidx = 0;
    pf->cur = NULL;
    pf->done = false;
    r->win.next = r->win.end = NULL;
}

log_prefetch_tuning log_prefetch_tuning_parse(const char *batch, const char *spin, const char *handoff)
{
    log_prefetch_tuning t = { 0 };
    long cap = batch ? strtol(batch, NULL, 10) : 0;
    t.batch = cap > 0 && cap <= 1 << 20 ? (uint32_t)cap : 0;
    long sp = spin ? strtol(spin, NULL, 10) : -1;
    t.spin = sp >= 0 && (unsigned long)sp < UINT32_MAX ? (uint32_t)sp : UINT32_MAX;
    long back = handoff ? strtol(handoff, NULL, 10) : -1;
    t.handback_at = back > 0 && back < 1 << 30 ? (uint32_t)back : 0;
    t.never_back = back == 0;
    return t;
}

void log_reader_prefetch_tune(log_reader *r, const log_prefetch_tuning *t)
{
    r->pf_tuned = t != NULL;
    if (t)
        r->pf_tune = *t;
}

int log_reader_prefetch(log_reader *r, bool on)
{
    if (!on) {
        if (r->pf) {
            pf_halt(r);
            logr_prefetch_free(r);
        }
        return 0;
    }
    if (r->pf)
        return 0;
    if (!r->mem && r->fd_origin < 0)
        return -ENOTSUP;
    /* aligned as its type says (malloc gives 16 bytes): see struct log_prefetch */
    log_prefetch *pf = aligned_alloc(alignof(log_prefetch), sizeof *pf);
    if (!pf)
        return -ENOMEM;
    memset(pf, 0, sizeof *pf);
    log_prefetch_tuning t = r->pf_tuned ? r->pf_tune : log_prefetch_tuning_parse(NULL, NULL, NULL);
    pf->cap = t.batch ? t.batch : PF_RECORDS;
    pf->spin = t.spin;
    pf->handback_at = t.handback_at;
    pf->never_back = t.never_back;
    for (int i = 0; i < PF_NBATCH; i++)
        pf->b[i].recs = ps_malloc(pf->cap * sizeof *pf->b[i].recs);
    pf->pnames = r->nnames;
    pf->nnames = r->nnames;
    pf->names_cap = r->nnames + 16;
    pf->names = ps_malloc(pf->names_cap * sizeof *pf->names);
    for (uint32_t i = 0; i < r->nnames; i++)
        pf->names[i] = r->names[i];
    r->pf = pf;
    return 0;
}

/* Hand out the warnings of cur placed before record `upto`. */
static void deliver_warnings(log_reader *r, pf_batch *b, uint32_t upto)
{
    log_prefetch *pf = r->pf;
    for (; pf->cw < b->nwarn && b->warns[pf->cw].before <= upto; pf->cw++)
        if (r->warn)
            r->warn(r->warn_ctx, r->logname, b->warns[pf->cw].where, b->warns[pf->cw].msg);
}

bool logr_prefetch_handback_due(uint64_t waited_ns, uint64_t total_ns)
{
    return waited_ns * 4 > total_ns * 3;
}

/* Batch number pf->cidx is about to be taken: time the engine's waiting
 * over the judged batches, and ask for a hand-back when it waited more
 * than three quarters of the time (or when PSPEC_PREFETCH_HANDOFF says). */
static void judge(log_prefetch *pf)
{
    if (pf->never_back || atomic_load_explicit(&pf->handback, memory_order_relaxed))
        return;
    if (pf->handback_at) {
        if (pf->cidx >= pf->handback_at)
            atomic_store_explicit(&pf->handback, true, memory_order_relaxed);
        return;
    }
    if (pf->cidx == PF_JUDGE_FROM) {
        pf->judge_t0 = now_ns();
        pf->waited_ns = 0;
    } else if (pf->cidx == PF_JUDGE_FROM + PF_JUDGE_N) {
        if (logr_prefetch_handback_due(pf->waited_ns, now_ns() - pf->judge_t0))
            atomic_store_explicit(&pf->handback, true, memory_order_relaxed);
    }
}

int logr_prefetch_next(log_reader *r, const log_record **rec, char **errmsg)
{
    log_prefetch *pf = r->pf;
    if (r->win.end) {
        /* the window is spent: the batch's next record is where it ended */
        pf->ci = (uint32_t)(r->win.end - pf->cur->recs);
        r->win.next = r->win.end = NULL;
    }
    if (pf->done)
        return logr_next_direct_ref(r, rec, errmsg);
    if (!pf->running) {
        /* names a stopped producer interned in batches never taken */
        if (r->nnames > pf->names_cap) {
            pf->names_cap = 2 * r->nnames;
            pf->names = ps_realloc(pf->names, pf->names_cap * sizeof *pf->names);
        }
        for (; pf->nnames < r->nnames; pf->nnames++)
            pf->names[pf->nnames] = r->names[pf->nnames];
        pf->pnames = r->nnames;
        if (pthread_create(&pf->thread, NULL, producer, r) != 0) {
            pf->done = true;    /* no thread: read directly */
            return logr_next_direct_ref(r, rec, errmsg);
        }
        pf->running = true;
    }
    for (;;) {
        pf_batch *b = pf->cur;
        if (!b) {
            b = &pf->b[pf->cidx % PF_NBATCH];
            judge(pf);
            bool timed = pf->judge_t0 && pf->cidx < PF_JUDGE_FROM + PF_JUDGE_N &&
                         !atomic_load_explicit(&b->full, memory_order_acquire);
            uint64_t t0 = timed ? now_ns() : 0;
            wait_while(pf, b, 0);
            if (timed)
                pf->waited_ns += now_ns() - t0;
            pf->cur = b;
            pf->ci = pf->cw = 0;
            if (pf->nnames + b->nnames > pf->names_cap) {
                pf->names_cap = 2 * (pf->nnames + b->nnames);
                pf->names = ps_realloc(pf->names, pf->names_cap * sizeof *pf->names);
            }
            for (uint32_t i = 0; i < b->nnames; i++)
                if (b->names_from + i == pf->nnames)
                    pf->names[pf->nnames++] = b->names[i];
        }
        deliver_warnings(r, b, pf->ci);
        if (pf->ci < b->n) {
            *rec = &b->recs[pf->ci++];
            /* the records up to the next warning need nothing else: the
             * window hands them out inline */
            uint32_t end = pf->cw < b->nwarn && b->warns[pf->cw].before < b->n ? b->warns[pf->cw].before
                                                                                : b->n;
            if (pf->ci < end) {
                r->win.next = &b->recs[pf->ci];
                r->win.end = &b->recs[end];
            }
            return 1;
        }
        deliver_warnings(r, b, UINT32_MAX);
        if (b->final) {
            int rc = b->rc;
            if (errmsg) {
                free(*errmsg);
                *errmsg = b->err;
            } else {
                free(b->err);
            }
            b->err = NULL;
            pthread_join(pf->thread, NULL);
            pf->running = false;
            pf->done = true;
            atomic_store_explicit(&b->full, 0, memory_order_relaxed);
            pf->cur = NULL;
            return rc;
        }
        if (b->last) {
            /* handed back: the producer stopped after this batch, at a
             * record boundary; read on from there on this thread */
            pthread_join(pf->thread, NULL);
            pf->running = false;
            pf->done = true;
            batch_reset(b);
            atomic_store_explicit(&b->full, 0, memory_order_relaxed);
            pf->cur = NULL;
            return logr_next_direct_ref(r, rec, errmsg);
        }
        set_full(b, 0);
        pf->cidx++;
        pf->cur = NULL;
    }
}

/* (Once done, every batch has been taken and the producer joined: the
 * reader's own names are the ones handed out, and those read since.) */
const char *logr_prefetch_name(const log_reader *r, uint32_t name_id)
{
    const log_prefetch *pf = r->pf;
    if (pf->done)
        return name_id < r->nnames ? r->names[name_id] : NULL;
    return name_id < pf->nnames ? pf->names[name_id] : NULL;
}

uint32_t logr_prefetch_nnames(const log_reader *r)
{
    return r->pf->done ? r->nnames : r->pf->nnames;
}

bool logr_prefetch_handback_asked(const log_reader *r)
{
    return r->pf && atomic_load_explicit(&r->pf->handback, memory_order_relaxed);
}

bool logr_prefetch_producing(const log_reader *r)
{
    return t_producing == r;
}

void logr_prefetch_rewind(log_reader *r)
{
    pf_halt(r);
}

void logr_prefetch_free(log_reader *r)
{
    log_prefetch *pf = r->pf;
    if (!pf)
        return;
    pf_halt(r);
    for (int i = 0; i < PF_NBATCH; i++) {
        batch_reset(&pf->b[i]);
        free(pf->b[i].recs);
        free(pf->b[i].vals);
        free(pf->b[i].names);
        free(pf->b[i].warns);
    }
    free(pf->names);
    free(pf);
    r->pf = NULL;
}
