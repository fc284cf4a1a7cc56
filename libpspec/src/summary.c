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
            s[k].pos = ps_calloc(PS_SUMMARY_BUCKETS, sizeof(uint64_t));
            s[k].neg = ps_calloc(PS_SUMMARY_BUCKETS, sizeof(uint64_t));
            ps_summary_reset(&s[k]);
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
        free(s[i].pos);
        free(s[i].neg);
    }
    free(s);
}

void ps_summary_reset(ps_summary *s)
{
    for (int side = 0; side < 2; side++) {
        uint64_t *b = side ? s->neg : s->pos;
        if (s->lo[side] <= s->hi[side])
            memset(b + s->lo[side], 0, (size_t)(s->hi[side] - s->lo[side] + 1) * sizeof *b);
        s->lo[side] = PS_SUMMARY_BUCKETS;
        s->hi[side] = -1;
    }
    s->count = s->zero = 0;
    s->sum = s->sumsq = s->min = s->max = 0;
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
    (side ? s->neg : s->pos)[k]++;
    if (k < s->lo[side])
        s->lo[side] = k;
    if (k > s->hi[side])
        s->hi[side] = k;
}
