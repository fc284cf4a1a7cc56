/* chance.h — does a start/end pairing say more than chance? (pinfer)
 *
 * pinfer pairs the starts A and the ends B of a candidate interval type like
 * parentheses, per key value. Unrelated events pair too: on one thread, a
 * random mix of As and Bs leaves few of them unpaired (a random walk seldom
 * falls back to zero), only with many open at once, and the longer the log
 * the larger the share that pairs. So a candidate is judged by its cost,
 * two counts compared in this order:
 *
 *   1. the avoidable unpaired events: those beyond |starts - ends| on each
 *      key value (a start that never ends is not avoidable: the counts
 *      force it); 0 for any well-bracketed sequence, recursion included;
 *   2. the nesting: for each pair, the pairs nested inside it; 0 for
 *      intervals that never overlap on a key value;
 *
 * against the cost of the same events when the order of the As and Bs of
 * each key value is shuffled: a permutation test of "A and B are
 * independent", each key value keeping its counts. Its p-value is
 * (1 + shuffles that cost no more than the log) / (1 + shuffles). A small
 * p alone is not enough: with many candidates some unrelated pair is bound
 * to come out ahead of most shuffles, and pinfer only tests the pairs that
 * already paired well. So the effect must be large as well: the avoidable
 * unpaired events at most a small share of the shuffles' typical (median)
 * count (real intervals leave next to none), and the nesting no more than
 * theirs (real intervals nest no deeper than chance; chance that happens to
 * leave few unpaired nests deeper). The shuffles come from a seed made of
 * the candidate's names and keys, so the same log always gets the same
 * answer.
 *
 * The test looks at the first CHANCE_MAX_EVENTS events of the pair (a
 * sample; the starts still open when it ends count as unpaired, as at the
 * end of a log), so its memory does not grow with the log.
 *
 * Ownership: a chance_sample owns its memory; chance_sample_free releases it
 * (NULL ok). No global state: samples may be used from several threads, one
 * thread per sample.
 */
#ifndef PINFER_CHANCE_H
#define PINFER_CHANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHANCE_MAX_EVENTS (1u << 14) /* events of one pair the test looks at (the first ones) */
#define CHANCE_FULL 19u              /* shuffles always run to the end, for their median */

typedef struct chance_key chance_key;    /* one key value's counts and open starts */
typedef struct chance_open chance_open;  /* an open start */

/* The events of one candidate, by key value, in log order. */
typedef struct chance_sample {
    chance_key *k;               /* key values, in order of first sight */
    uint32_t nk, capk;
    uint32_t *slot;              /* hash index into k (UINT32_MAX: empty) */
    uint32_t nslot;              /* a power of 2, at least twice nk */
    chance_open *o;              /* open starts of every key value; free list */
    uint32_t no, capo, free_o;
    uint32_t events;             /* events added */
    bool full;                   /* CHANCE_MAX_EVENTS were added; later ones are not */
} chance_sample;

/* A cost: compared by unpaired first, then nested. */
typedef struct chance_cost {
    uint64_t unpaired;           /* avoidable unpaired events */
    uint64_t nested;             /* over the pairs: pairs nested inside each */
} chance_cost;

/* What the test found. */
typedef struct chance_result {
    uint32_t events;             /* events it looked at */
    uint32_t keys;               /* key values among them */
    chance_cost cost;            /* the log's */
    chance_cost median;          /* each count's median over the first CHANCE_FULL shuffles */
    uint32_t shuffles;           /* shuffles run: fewer than asked when the answer was clear */
    uint32_t as_low;             /* shuffles that cost no more than the log */
    double p;                    /* (1 + as_low) / (1 + shuffles) */
    double alpha;                /* the p-value it had to reach */
    double ratio;                /* the share of the median unpaired it had to stay within */
    bool kept;                   /* p <= alpha over all the shuffles asked for,
                                    cost.unpaired <= ratio * median.unpaired and
                                    cost.nested <= median.nested */
} chance_result;

void chance_sample_init(chance_sample *s);
void chance_sample_free(chance_sample *s);     /* NULL ok; leaves it empty */
/* Add a start (end false) or an end with key value `key`, in log order.
 * False when the sample is full (the event is not counted). */
bool chance_add(chance_sample *s, int64_t key, bool end);

/* A seed for the shuffles of the candidate (start type a, end type b, keys
 * ka and kb): the same names give the same seed. */
uint64_t chance_seed(const char *a, const char *b, int ka, int kb);
/* Test the sample with up to `shuffles` shuffles: kept when p <= alpha, the
 * avoidable unpaired events are at most `ratio` times their median, and the
 * nesting at most its median.
 * Stops early once the answer is no (p > alpha whatever the rest do). */
void chance_test(const chance_sample *s, uint64_t seed, uint32_t shuffles, double alpha, double ratio,
                 chance_result *out);

/* realloc(p, size) that exits 3 with "pinfer: out of memory" when it
 * fails: pinfer's allocation, for chance.c and infer.c alike. */
void *pinfer_xrealloc(void *p, size_t size);

#endif
