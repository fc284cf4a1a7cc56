/* quant.c — quantile aggregates: exact values, then a compactor sketch,
 * and the order-statistic confidence interval (quant.h).
 *
 * The sketch is KLL's hierarchy of compactors without the randomness:
 * level h holds values of weight 2^h; a level that reaches
 * PS_QUANT_SKETCH_K entries is sorted and every other entry (starting at
 * the first or the second, alternately) moves up a level with twice the
 * weight. One compaction at level h moves the estimated rank of any value
 * by at most 2^h, so the sum of 2^h over the compactions done is a
 * worst-case bound E on the rank error, known exactly for this run. Each
 * level compacts at least K entries at a time, so level h compacts at most
 * n / (K 2^h) times and E <= n * levels / K, levels ~ log2(n / K) + 1.
 */
#include "quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct ps_quant {
    uint64_t n;                         /* values added */
    uint64_t err;                       /* sketch: worst-case rank error so far */
    bool sketch;                        /* past PS_QUANT_EXACT_MAX: the levels hold the values */
    bool sorted;                        /* exact: v[] is in ascending order */
    double *v;                          /* exact: the values */
    uint32_t nv, capv;
    uint32_t nlev;                      /* sketch: levels in use */
    double *lev[PS_QUANT_LEVELS];       /* sketch: level h's entries, weight 2^h each */
    uint32_t len[PS_QUANT_LEVELS], cap[PS_QUANT_LEVELS];
    uint8_t flip[PS_QUANT_LEVELS];      /* which half the next compaction keeps */
    struct wv { double x; uint64_t w; } *cache;  /* sketch: entries sorted, for queries */
    uint64_t ncache;
    bool cache_ok;
};

ps_quant *ps_quant_new(void)
{
    return ps_calloc(1, sizeof(ps_quant));
}

void ps_quant_free(ps_quant *q)
{
    if (!q)
        return;
    free(q->v);
    for (uint32_t h = 0; h < PS_QUANT_LEVELS; h++)
        free(q->lev[h]);
    free(q->cache);
    free(q);
}

uint64_t ps_quant_count(const ps_quant *q) { return q->n; }
bool ps_quant_exact(const ps_quant *q) { return !q->sketch; }
uint64_t ps_quant_rank_error(const ps_quant *q) { return q->err; }

uint64_t ps_quant_entries(const ps_quant *q)
{
    if (!q->sketch)
        return q->nv;
    uint64_t e = 0;
    for (uint32_t h = 0; h < q->nlev; h++)
        e += q->len[h];
    return e;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_wv(const void *a, const void *b)
{
    return cmp_double(&((const struct wv *)a)->x, &((const struct wv *)b)->x);
}

static void level_push(ps_quant *q, uint32_t h, double x)
{
    if (h >= q->nlev)
        q->nlev = h + 1;
    if (q->len[h] == q->cap[h]) {
        q->cap[h] = q->cap[h] ? 2 * q->cap[h] : PS_QUANT_SKETCH_K;
        q->lev[h] = ps_realloc(q->lev[h], q->cap[h] * sizeof(double));
    }
    q->lev[h][q->len[h]++] = x;
}

/* Halve level h into level h + 1 (the largest entry stays when their number
 * is odd), then compact h + 1 if that filled it. The top level only grows:
 * reaching it would take more than 2^64 values. */
static void compact(ps_quant *q, uint32_t h)
{
    while (h + 1 < PS_QUANT_LEVELS && q->len[h] >= PS_QUANT_SKETCH_K) {
        double *e = q->lev[h];
        uint32_t len = q->len[h], m = len & ~1u;
        qsort(e, len, sizeof *e, cmp_double);
        for (uint32_t i = q->flip[h]; i < m; i += 2)
            level_push(q, h + 1, e[i]);
        q->flip[h] ^= 1;
        if (m < len)
            e[0] = e[len - 1];
        q->len[h] = len - m;
        q->err += (uint64_t)1 << h;
        h++;
    }
}

static void sketch_add(ps_quant *q, double x)
{
    level_push(q, 0, x);
    if (q->len[0] >= PS_QUANT_SKETCH_K)
        compact(q, 0);
}

void ps_quant_add(ps_quant *q, double x)
{
    q->n++;
    q->cache_ok = false;
    if (!q->sketch && q->nv < PS_QUANT_EXACT_MAX) {
        if (q->nv == q->capv) {
            q->capv = q->capv ? 2 * q->capv : 16;
            if (q->capv > PS_QUANT_EXACT_MAX)
                q->capv = PS_QUANT_EXACT_MAX;
            q->v = ps_realloc(q->v, q->capv * sizeof(double));
        }
        q->v[q->nv++] = x;
        q->sorted = false;
        return;
    }
    if (!q->sketch) {
        /* The exact values go into the sketch and their array away. */
        q->sketch = true;
        for (uint32_t i = 0; i < q->nv; i++)
            sketch_add(q, q->v[i]);
        free(q->v);
        q->v = NULL;
        q->nv = q->capv = 0;
    }
    sketch_add(q, x);
}

double ps_quant_at(ps_quant *q, uint64_t r)
{
    if (r < 1)
        r = 1;
    if (r > q->n)
        r = q->n;
    if (!q->sketch) {
        if (!q->sorted) {
            qsort(q->v, q->nv, sizeof *q->v, cmp_double);
            q->sorted = true;
        }
        return q->v[r - 1];
    }
    if (!q->cache_ok) {
        uint64_t n = ps_quant_entries(q), k = 0;
        q->cache = ps_realloc(q->cache, (n ? n : 1) * sizeof *q->cache);
        for (uint32_t h = 0; h < q->nlev; h++)
            for (uint32_t i = 0; i < q->len[h]; i++)
                q->cache[k++] = (struct wv){q->lev[h][i], (uint64_t)1 << h};
        qsort(q->cache, n, sizeof *q->cache, cmp_wv);
        q->ncache = n;
        q->cache_ok = true;
    }
    /* The first entry whose cumulative weight reaches r. */
    uint64_t cum = 0;
    for (uint64_t i = 0; i < q->ncache; i++) {
        cum += q->cache[i].w;
        if (cum >= r)
            return q->cache[i].x;
    }
    return q->cache[q->ncache - 1].x;
}

/* The least j with P(B <= j) > alpha for B ~ Binomial(n, p), 0 < p < 1.
 * Sums the probabilities from where they become negligible below the mode
 * (less than 1e-20 of the mode's), normalised by their total so that the
 * rounding of lgamma for large n does not matter. */
static uint64_t binom_first_above(uint64_t n, double p, double alpha)
{
    double nd = (double)n, odds = p / (1 - p);
    double mode = floor((nd + 1) * p);
    if (mode > nd)
        mode = nd;
    double pm = exp(lgamma(nd + 1) - lgamma(mode + 1) - lgamma(nd - mode + 1) + mode * log(p) +
                    (nd - mode) * log1p(-p));
    uint64_t lo = (uint64_t)mode;
    double plo = pm;
    while (lo > 0 && plo > 1e-20 * pm) {
        plo = plo * (double)lo / (nd - (double)lo + 1) / odds;
        lo--;
    }
    /* Total mass from lo up to where it is negligible above the mode. */
    double total = 0, pi = plo;
    for (uint64_t i = lo;; i++) {
        total += pi;
        if (i >= n || (i > (uint64_t)mode && pi < 1e-20 * pm))
            break;
        pi = pi * (nd - (double)i) / ((double)i + 1) * odds;
    }
    double cdf = 0;
    pi = plo;
    for (uint64_t i = lo;; i++) {
        cdf += pi;
        if (cdf > alpha * total || i >= n)
            return i;
        pi = pi * (nd - (double)i) / ((double)i + 1) * odds;
    }
}

void ps_quant_ranks(uint64_t n, double p, uint64_t *l, uint64_t *u)
{
    double alpha = (1 - PS_QUANT_CONFIDENCE) / 2;
    if (n == 0) {
        *l = 0;
        *u = 1;
        return;
    }
    /* P(X_(l) > q) = P(B <= l - 1), B the number of samples below q. */
    *l = binom_first_above(n, p, alpha);
    /* P(X_(u) < q) = P(B >= u) = P(B' <= n - u), B' ~ Binomial(n, 1 - p). */
    *u = n - binom_first_above(n, 1 - p, alpha) + 1;
}

uint64_t ps_quant_nearest_rank(uint64_t n, double p)
{
    /* The slight shrink keeps 0.07 * 100 = 7.000000000000001 at rank 7. */
    double x = ceil(p * (double)n * (1 - 1e-12));
    uint64_t k = x < 1 ? 1 : (uint64_t)x;
    return k > n ? n : k;
}

pv ps_quant_result(ps_quant *q, double p)
{
    uint64_t n = q->n, l, u, e = q->err;
    if (n == 0 || !(p > 0 && p < 1))
        return pv_undef();
    ps_quant_ranks(n, p, &l, &u);
    if (l <= e || u > n || u + e > n)
        return pv_undef();          /* a side no order statistic bounds: unbounded */
    double v = ps_quant_at(q, ps_quant_nearest_rank(n, p));
    double lo = ps_quant_at(q, l - e), hi = ps_quant_at(q, u + e);
    if (lo > v)
        lo = v;
    if (hi < v)
        hi = v;
    return pv_triple_make(v, hi - v, v - lo);
}
