/* chance.c — the permutation test of a start/end pairing (see chance.h). */
#include "chance.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX

struct chance_key {
    int64_t key;
    uint32_t a, b;               /* starts, ends */
    uint32_t unpaired_b;         /* ends that found no open start */
    uint32_t top;                /* latest open start, or NIL */
    uint32_t pops;               /* pairs closed so far */
    uint64_t nested;             /* over the closed pairs: pairs closed while each was open */
};

struct chance_open {
    uint32_t pops;               /* the key value's pops when it opened */
    uint32_t below;              /* the start opened before it; free list */
};

/* realloc, or exit 3 saying so (pinfer's one way out of memory; chance.h). */
void *pinfer_xrealloc(void *p, size_t size)
{
    p = realloc(p, size ? size : 1);
    if (!p) {
        fputs("pinfer: out of memory\n", stderr);
        exit(3);
    }
    return p;
}

/* ---- the sample ------------------------------------------------------------------------ */

void chance_sample_init(chance_sample *s)
{
    memset(s, 0, sizeof *s);
    s->free_o = NIL;
}

void chance_sample_free(chance_sample *s)
{
    if (!s)
        return;
    free(s->k);
    free(s->slot);
    free(s->o);
    chance_sample_init(s);
}

static uint32_t hash_key(int64_t key)
{
    uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(h ^ (h >> 29) ^ (h >> 47));
}

static void reindex(chance_sample *s)
{
    uint32_t n = s->nslot ? s->nslot * 2 : 64;
    s->slot = pinfer_xrealloc(s->slot, (size_t)n * sizeof *s->slot);
    memset(s->slot, 0xff, (size_t)n * sizeof *s->slot);
    s->nslot = n;
    for (uint32_t i = 0; i < s->nk; i++) {
        uint32_t h = hash_key(s->k[i].key) & (n - 1);
        while (s->slot[h] != NIL)
            h = (h + 1) & (n - 1);
        s->slot[h] = i;
    }
}

/* The key value's entry, added on first sight. */
static chance_key *key_entry(chance_sample *s, int64_t key)
{
    if (2 * (s->nk + 1) > s->nslot)
        reindex(s);
    uint32_t h = hash_key(key) & (s->nslot - 1);
    for (; s->slot[h] != NIL; h = (h + 1) & (s->nslot - 1))
        if (s->k[s->slot[h]].key == key)
            return &s->k[s->slot[h]];
    if (s->nk == s->capk) {
        s->capk = s->capk ? s->capk * 2 : 64;
        s->k = pinfer_xrealloc(s->k, (size_t)s->capk * sizeof *s->k);
    }
    s->slot[h] = s->nk;
    chance_key *k = &s->k[s->nk++];
    *k = (chance_key){ .key = key, .top = NIL };
    return k;
}

bool chance_add(chance_sample *s, int64_t key, bool end)
{
    if (s->events == CHANCE_MAX_EVENTS)
        s->full = true;
    if (s->full)
        return false;
    s->events++;
    chance_key *k = key_entry(s, key);
    if (!end) {
        uint32_t x = s->free_o;
        if (x != NIL) {
            s->free_o = s->o[x].below;
        } else {
            if (s->no == s->capo) {
                s->capo = s->capo ? s->capo * 2 : 64;
                s->o = pinfer_xrealloc(s->o, (size_t)s->capo * sizeof *s->o);
            }
            x = s->no++;
        }
        s->o[x] = (chance_open){ .pops = k->pops, .below = k->top };
        k->top = x;
        k->a++;
        return true;
    }
    k->b++;
    if (k->top == NIL) {
        k->unpaired_b++;
        return true;
    }
    uint32_t x = k->top;
    k->nested += k->pops - s->o[x].pops;
    k->pops++;
    k->top = s->o[x].below;
    s->o[x].below = s->free_o;
    s->free_o = x;
    return true;
}

/* ---- the test -------------------------------------------------------------------------- */

uint64_t chance_seed(const char *a, const char *b, int ka, int kb)
{
    uint64_t h = 0xcbf29ce484222325ull;   /* FNV-1a over "a\0b\0" and the keys */
    for (const char *s = a;; s++) {
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
        if (!*s)
            break;
    }
    for (const char *s = b;; s++) {
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
        if (!*s)
            break;
    }
    h = (h ^ (uint64_t)(uint32_t)ka) * 0x100000001b3ull;
    h = (h ^ (uint64_t)(uint32_t)kb) * 0x100000001b3ull;
    return h;
}

/* splitmix64: small, fast, the same everywhere. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Is x at most y: fewer unpaired, or as many and no more nested? */
static bool cost_le(chance_cost x, chance_cost y)
{
    return x.unpaired != y.unpaired ? x.unpaired < y.unpaired : x.nested <= y.nested;
}

/* The log's cost on one key value. */
static chance_cost key_cost(const chance_key *k)
{
    uint32_t unpaired = k->unpaired_b + (k->a - (k->b - k->unpaired_b));
    uint32_t forced = k->a > k->b ? k->a - k->b : k->b - k->a;
    return (chance_cost){ unpaired - forced, k->nested };
}

/* The cost of one shuffle: each key value's a starts and b ends in a
 * uniformly random order, paired as in chance_add. With a limit, counting
 * stops once the cost is sure to be above it (the answer is then only
 * that). Every end past the first b - a that finds nothing open is an
 * avoidable unpaired end, and it leaves an avoidable unpaired start too. */
static chance_cost shuffled_cost(const chance_sample *s, uint32_t *stack, uint64_t *rng, const chance_cost *limit)
{
    chance_cost c = { 0, 0 };
    for (uint32_t i = 0; i < s->nk; i++) {
        const chance_key *k = &s->k[i];
        if (!k->a || !k->b)
            continue;
        uint32_t ra = k->a, rb = k->b, depth = 0, pops = 0, ub = 0;
        uint32_t forced_b = k->b > k->a ? k->b - k->a : 0;
        while (ra + rb) {
            uint32_t r = (uint32_t)(next_random(rng) >> 32);
            if ((uint32_t)(((uint64_t)r * (ra + rb)) >> 32) < ra) {
                ra--;
                stack[depth++] = pops;
                continue;
            }
            rb--;
            if (depth)
                c.nested += pops++ - stack[--depth];
            else if (++ub > forced_b)
                c.unpaired += 2;
            if (limit && (c.unpaired > limit->unpaired ||
                          (c.unpaired == limit->unpaired && c.nested > limit->nested)))
                return c;
        }
    }
    return c;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

void chance_test(const chance_sample *s, uint64_t seed, uint32_t shuffles, double alpha, double ratio,
                 chance_result *out)
{
    memset(out, 0, sizeof *out);
    out->events = s->events;
    out->keys = s->nk;
    out->alpha = alpha;
    out->ratio = ratio;
    uint32_t maxa = 0;
    for (uint32_t i = 0; i < s->nk; i++) {
        chance_cost c = key_cost(&s->k[i]);
        out->cost.unpaired += c.unpaired;
        out->cost.nested += c.nested;
        if (s->k[i].a > maxa)
            maxa = s->k[i].a;
    }
    /* kept when 1 + as_low <= allowed; stop as soon as it cannot be */
    uint64_t allowed = (uint64_t)floor(alpha * ((double)shuffles + 1) + 1e-9);
    uint32_t *stack = pinfer_xrealloc(NULL, (size_t)(maxa + 1) * sizeof *stack);
    uint64_t fu[CHANCE_FULL], fn[CHANCE_FULL];
    uint32_t nfull = 0;
    uint64_t rng = seed;
    bool small = false;          /* the effect is large enough (see chance.h) */
    while (out->shuffles < shuffles) {
        bool whole = nfull < CHANCE_FULL;   /* the first ones run to the end, for the medians */
        if (!whole && (!small || 1 + (uint64_t)out->as_low > allowed))
            break;
        chance_cost c = shuffled_cost(s, stack, &rng, whole ? NULL : &out->cost);
        if (whole) {
            fu[nfull] = c.unpaired;
            fn[nfull++] = c.nested;
            if (nfull == CHANCE_FULL || nfull == shuffles) {
                qsort(fu, nfull, sizeof *fu, cmp_u64);
                qsort(fn, nfull, sizeof *fn, cmp_u64);
                out->median = (chance_cost){ fu[nfull / 2], fn[nfull / 2] };
                small = (double)out->cost.unpaired <= ratio * (double)out->median.unpaired &&
                        out->cost.nested <= out->median.nested;
            }
        }
        out->shuffles++;
        out->as_low += cost_le(c, out->cost);
    }
    free(stack);
    out->p = (1.0 + out->as_low) / (1.0 + out->shuffles);
    out->kept = small && out->shuffles == shuffles && 1 + (uint64_t)out->as_low <= allowed;
}
