/* infer.h — mining interval types from a monitoring log (pinfer).
 *
 * pi_infer() reads a log four times or more (the descriptor must be
 * seekable):
 *   1. event types: counts, how many values, and per attribute position
 *      whether it is integral, its range and its first few distinct values;
 *   2. candidate pairs (start type A, end type B, key): every B closes the
 *      most recent open A with the same key value (thread id, or an
 *      attribute of A equal to an attribute of B), like parentheses; a
 *      candidate that pairs nearly all of A and of B is consistent. One
 *      candidate per event type is kept (name affinity, then how well it
 *      pairs, then the longest durations: the outermost interval), and only
 *      when it pairs better than chance: each candidate in line to be kept
 *      is tested (chance.h) on its events gathered in one more pass (one
 *      pass per PI_TEST_BATCH candidates);
 *   3. statistics of the kept intervals: durations grouped by each
 *      small-domain attribute and by whether each other event type occurs
 *      inside with the interval's key (to find what splits them), and the
 *      regression of duration on each numeric attribute of the start.
 *
 * Everything is streaming; memory is bounded by the limits below (and
 * chance.h's CHANCE_MAX_EVENTS).
 */
#ifndef PINFER_INFER_H
#define PINFER_INFER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "chance.h"

/* Limits. Past them pinfer goes on with less: the model says what was left out. */
#define PI_MAX_TYPES 256u        /* distinct event types considered; later ones are ignored */
#define PI_MAX_ATTRS 8u          /* attribute positions considered per type (keys, metrics) */
#define PI_MAX_VALUES 8u         /* distinct values a split attribute may have */
#define PI_MAX_PATHS 64u         /* event types watched inside each interval type (path split) */
#define PI_MAX_CANDIDATES 65536u /* (start, end, key) candidates simulated in pass 2; pairs with
                                    names that match (call@P/ret@P, StartX/EndX) come first */
#define PI_MAX_OPEN (1u << 18)   /* open starts held at once over all candidates; when full, the
                                    starts of given-up candidates are reclaimed, and if none
                                    are, the candidate that cannot push is given up */
#define PI_MAX_DEPTH 64u         /* more starts open at once with one key value: the candidate
                                    is given up (ids do not nest; recursion deeper than this
                                    is not inferred) */
#define PI_MAX_OPEN_PER 4096u    /* a candidate with more starts open than this, and more than it
                                    has paired so far, is not consistent: given up */
#define PI_TEST_BATCH 32u        /* candidates tested for chance in one pass over the log */
#define PI_MAX_TEST_PASSES 16u   /* passes for that; candidates still untested are dropped */

/* Thresholds. */
#define PI_MATCH_MIN 0.9         /* a pair must pair this share of its start and of its end events */
#define PI_UNPAIRED_SLACK 1      /* ... or leave at most this many unpaired (one still open at the end) */
#define PI_AMBIG_MAX 0.1         /* attribute keys: at most this share of ends may find several
                                    open starts with their value (a small-domain value, not an id) */
#define PI_SPLIT_ETA2 0.5        /* split when groups explain this share of the duration variance */
#define PI_REGRESS_R2 0.5        /* propose a regression when it explains this share */
#define PI_SHUFFLES 9999u        /* shuffles of each candidate's starts and ends (chance.h) */
#define PI_CHANCE_P 0.0001       /* keep a pair when its p-value against the shuffles is at most
                                    this (no shuffle pairs as well as the log) ... */
#define PI_CHANCE_P_NAMED 0.01   /* ... or this when the names say start and end (StartX/EndX);
                                    call@P and ret@P by thread pair by construction: kept */
#define PI_CHANCE_RATIO 0.25     /* and when its avoidable unpaired events are at most this share
                                    of the shuffles' median (and it nests no more than theirs) */

/* Where a key or attribute comes from. */
#define PI_THREAD (-1)           /* key: the thread id */

/* What pass 1 learned about one attribute position of an event type. */
typedef struct pi_attr {
    uint64_t n;                  /* records with a value at this position */
    bool integral;               /* every value an integer */
    double min, max;
    double vals[PI_MAX_VALUES];  /* first distinct values, sorted at the end of pass 1 */
    uint32_t nvals;
    bool many;                   /* more than PI_MAX_VALUES distinct values */
} pi_attr;

/* An event type. */
typedef struct pi_type {
    char *name;
    uint64_t count;
    uint32_t nvalues;            /* most values a record of it carried */
    pi_attr attr[PI_MAX_ATTRS];
    bool used;                   /* start or end of an inferred interval */
    bool watched;                /* splits an interval type by occurring inside it */
} pi_type;

/* A split of an interval type's durations by one small-domain attribute. */
typedef struct pi_split {
    bool end;                    /* attribute of the end event (else of the start) */
    int attr;                    /* its position (0-based) */
    int inside;                  /* >= 0: not an attribute but whether an event of this type
                                    (index) occurs inside with the interval's key; groups 0
                                    (none inside) and 1 */
    int inside_key;              /* how that event carries the key: PI_THREAD or its attribute */
    uint32_t ngroups;
    double value[PI_MAX_VALUES]; /* each group's value, ascending */
    uint64_t n[PI_MAX_VALUES];
    double mean[PI_MAX_VALUES];  /* each group's mean duration, ticks */
    double eta2;                 /* share of the variance the groups explain */
} pi_split;

/* A regression of duration on a numeric attribute of the start, per group. */
typedef struct pi_regress {
    int attr;                    /* start attribute position; -1: none proposed */
    double r2[PI_MAX_VALUES];    /* per group (group 0 only when not split) */
    double slope[PI_MAX_VALUES];
    double r2_all;               /* weighted by group size */
} pi_regress;

/* An inferred interval type. */
typedef struct pi_interval {
    uint32_t start, end;         /* event type indices */
    int kstart, kend;            /* key: PI_THREAD, or attribute positions */
    int affinity;                /* 3 call@X/ret@X, 2 names with one stem, 0 none */
    bool nested;                 /* several open at once on one key value (recursion) */
    uint32_t max_depth;
    uint64_t matched;            /* pairs */
    uint64_t thread_too;         /* attribute keys: pairs the thread id would also make (0: not tried) */
    bool thread_tried;
    double mean, min, max;       /* durations, ticks */
    chance_result chance;        /* why it is not chance (!chance.kept: call@P/ret@P by thread,
                                    kept as they pair by construction) */
    pi_split split;              /* ngroups == 0: no split */
    pi_regress reg;
    char *name;                  /* interval type name (set by emit) */
} pi_interval;

/* A candidate dropped because it pairs no better than chance. */
typedef struct pi_dropped {
    uint32_t start, end;         /* event type indices */
    int kstart, kend;            /* key */
    uint64_t matched;            /* pairs in pass 2 */
    chance_result chance;
} pi_dropped;

/* The result of mining. */
typedef struct pi_model {
    const char *logname;
    const char *program;         /* the log's '#program', or NULL */
    double tick_ns;
    uint64_t records, malformed;
    pi_type *types;
    uint32_t ntypes;
    uint64_t types_ignored;      /* records of types past PI_MAX_TYPES */
    uint64_t types_reserved;     /* records of types named by a PSpec reserved word */
    uint32_t candidates;         /* simulated in pass 2 */
    bool candidates_capped;      /* more than PI_MAX_CANDIDATES were possible */
    uint32_t overflowed;         /* candidates given up for too many open starts */
    pi_interval *iv;
    uint32_t niv;
    pi_dropped *dropped;         /* in the order they were tested */
    uint32_t ndropped;
    uint32_t untested;           /* candidates dropped untested (PI_MAX_TEST_PASSES) */
} pi_model;

typedef struct pi_options {
    uint64_t min_count;          /* fewest pairs for an interval type */
    void (*warn)(void *ctx, const char *logname, uint64_t where, const char *msg);
    void *ctx;
} pi_options;

/* Mine the log on fd (seekable; not closed). Returns the model, or NULL with
 * a heap message in *errmsg when the log cannot be read. */
pi_model *pi_infer(int fd, const char *logname, const pi_options *opt, char **errmsg);
void pi_model_free(pi_model *m);   /* NULL ok */
/* Is `s` a word PSpec reserves (libpspec's PS_KEYWORDS), so that no event
 * type, interval or constant may be called so? */
bool pi_reserved(const char *s);

/* Write the specification for the model (emit.c). `percentile` in (0, 100]. */
struct pi_emit_options {
    double percentile;
    uint64_t min_count;
};
int pi_emit(FILE *out, pi_model *m, const struct pi_emit_options *opt);

#endif
