/* summary.c — summaries of interval durations (summary.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "summary.h"
#include "util.h"

ps_summary *ps_summaries_new(const ps_program *prog, uint32_t *n, uint32_t **first)
{
    ps_summary *s = NULL;
    uint32_t k = 0, cap = 0;

    *first = ps_calloc(prog->ivtypes.n + 1, sizeof **first);
    for (uint32_t i = 0; i < prog->ivtypes.n; i++) {
        const ps_ivtype *t = prog->ivtypes.v[i];
        (*first)[i] = k;
        for (uint32_t m = 0; m < t->nmetric; m++) {
            if (!ps_metric_is_duration(t, t->metrics[m].expr))
                continue;
            if (k == cap) {
                cap = cap ? cap * 2 : 4;
                s = ps_realloc(s, cap * sizeof *s);
            }
            memset(&s[k], 0, sizeof s[k]);
            s[k].type = t;
            s[k].metric = m;
            s[k].lo[0] = s[k].lo[1] = PS_SUMMARY_BUCKETS;      /* (nothing yet) */
            s[k].hi[0] = s[k].hi[1] = -1;
            k++;
        }
    }
    (*first)[prog->ivtypes.n] = k;
    *n = k;
    return s;
}

void ps_summaries_free(ps_summary *s, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        free(s[i].b[0]);
        free(s[i].b[1]);
    }
    free(s);
}

void ps_summary_reset(ps_summary *s)
{
    for (int side = 0; side < 2; side++) {
        if (s->lo[side] <= s->hi[side])
            memset(s->b[side] + (s->lo[side] - s->base[side]), 0,
                   (size_t)(s->hi[side] - s->lo[side] + 1) * sizeof *s->b[side]);
        s->lo[side] = PS_SUMMARY_BUCKETS;
        s->hi[side] = -1;
    }
    s->count = s->zero = 0;
    s->sum = s->sumsq = s->min = s->max = 0;
}

/* Make the window of `side` hold bucket k: it grows by doubling, toward k. */
static void window_take(ps_summary *s, int side, int k)
{
    int base = s->base[side], cap = s->cap[side];
    if (cap && k >= base && k < base + cap)
        return;
    int lo = cap && base < k ? base : k, hi = cap && base + cap - 1 > k ? base + cap - 1 : k;
    int want = hi - lo + 1, ncap = cap ? 2 * cap : 16;
    while (ncap < want)
        ncap *= 2;
    if (ncap > PS_SUMMARY_BUCKETS)
        ncap = PS_SUMMARY_BUCKETS;
    /* centre the room left over on the range, inside [0, BUCKETS) */
    int nbase = lo - (ncap - want) / 2;
    if (nbase < 0)
        nbase = 0;
    if (nbase + ncap > PS_SUMMARY_BUCKETS)
        nbase = PS_SUMMARY_BUCKETS - ncap;
    uint64_t *b = ps_calloc((size_t)ncap, sizeof *b);
    if (cap)
        memcpy(b + (base - nbase), s->b[side], (size_t)cap * sizeof *b);
    free(s->b[side]);
    s->b[side] = b;
    s->base[side] = nbase;
    s->cap[side] = ncap;
}

void ps_summary_add(ps_summary *s, double x)
{
    if (!isfinite(x))
        return;
    if (s->count == 0 || x < s->min)
        s->min = x;
    if (s->count == 0 || x > s->max)
        s->max = x;
    s->count++;
    s->sum += x;
    s->sumsq += x * x;
    if (x == 0) {
        s->zero++;
        return;
    }
    int side = x < 0;
    double i = ceil(log(fabs(x)) / log(PS_SUMMARY_GAMMA)) + PS_SUMMARY_BUCKETS / 2;
    int k = i < 0 ? 0 : i >= PS_SUMMARY_BUCKETS ? PS_SUMMARY_BUCKETS - 1 : (int)i;
    window_take(s, side, k);
    s->b[side][k - s->base[side]]++;
    if (k < s->lo[side])
        s->lo[side] = k;
    if (k > s->hi[side])
        s->hi[side] = k;
}
