/* emit.c — writing the inferred PSpec specification (see infer.h).
 *
 * Layout: a header comment (which log, what the bounds are, the pairs
 * dropped as chance), the event and proc declarations, then per interval
 * type a comment explaining it (and why it is not chance), its
 * declaration, and per group (one, or one per value of the split attribute)
 * the unknowns, their solve declarations and the assertions that use them.
 * Everything is sorted by name, so the same log always gives the same text.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer.h"

#define PI_SHOW_DROPPED 12u      /* dropped candidates listed; the rest are counted */

/* ---- names ---------------------------------------------------------------------------- */

typedef struct names {
    char **v;
    size_t n;
} names;

static bool taken(const names *ns, const char *s)
{
    for (size_t i = 0; i < ns->n; i++)
        if (strcmp(ns->v[i], s) == 0)
            return true;
    return false;
}

static void take(names *ns, const char *s)
{
    ns->v = realloc(ns->v, (ns->n + 1) * sizeof *ns->v);
    if (!ns->v)
        abort();
    ns->v[ns->n++] = strdup(s);
}


/* `s` as an identifier: other characters become '_', a leading digit gets '_'. */
static char *ident(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(n + 2), *p = out;
    if (!out)
        abort();
    if (!n || isdigit((unsigned char)s[0]))
        *p++ = '_';
    for (size_t i = 0; i < n; i++)
        *p++ = isalnum((unsigned char)s[i]) ? s[i] : '_';
    *p = 0;
    return out;
}

/* A fresh name from `base` (suffixes _2, _3, ... when taken); heap string, taken. */
static char *fresh(names *ns, const char *base)
{
    char *id = ident(base);
    char buf[600];
    snprintf(buf, sizeof buf, "%s", id);
    for (int k = 2; taken(ns, buf) || pi_reserved(buf); k++)
        snprintf(buf, sizeof buf, "%s_%d", id, k);
    free(id);
    take(ns, buf);
    return strdup(buf);
}

static bool is_call(const char *s)
{
    return strncmp(s, "call@", 5) == 0;
}

static bool is_ret(const char *s)
{
    return strncmp(s, "ret@", 4) == 0;
}

/* The proc a call@/ret@ type belongs to, or NULL. */
static const char *proc_of(const char *s)
{
    return is_call(s) ? s + 5 : is_ret(s) ? s + 4 : NULL;
}

/* The name pinfer gives attribute i of a type: a1, a2, ...; for ret@P the
 * proc's result r and the return's exact flag. NULL: not nameable. */
static const char *attr_name(const pi_type *t, int i, char buf[16])
{
    if (is_ret(t->name))
        return i == 0 ? "r" : i == 1 ? "exact" : NULL;
    snprintf(buf, 16, "a%d", i + 1);
    return buf;
}

/* ---- numbers ---------------------------------------------------------------------------- */

/* A duration of `ticks` in the most readable unit. */
static void fmt_dur(char *out, size_t cap, double ticks, double tick_ns)
{
    double ns = ticks * tick_ns;
    static const struct {
        double ns;
        const char *unit;
    } u[] = { { 86400e9, "days" }, { 3600e9, "hours" }, { 60e9, "min" }, { 1e9, "sec" }, { 1e6, "ms" },
              { 1e3, "us" }, { 1, "ns" } };
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
        if (fabs(ns) >= u[i].ns || i + 1 == sizeof u / sizeof u[0]) {
            snprintf(out, cap, "%.6g ticks (%.3g %s)", ticks, ns / u[i].ns, u[i].unit);
            return;
        }
}

/* A group value as part of a name: 1 -> "1", -3 -> "m3". */
static void value_suffix(char *out, size_t cap, double v)
{
    if (v < 0)
        snprintf(out, cap, "m%.0f", -v);
    else
        snprintf(out, cap, "%.0f", v);
}

/* ---- the writer --------------------------------------------------------------------------- */

typedef struct emitter {
    FILE *f;
    pi_model *m;
    const struct pi_emit_options *opt;
    names ns;
} emitter;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_type_name(const void *a, const void *b)
{
    return strcmp((*(pi_type *const *)a)->name, (*(pi_type *const *)b)->name);
}

static int cmp_iv_name(const void *a, const void *b)
{
    return strcmp((*(pi_interval *const *)a)->name, (*(pi_interval *const *)b)->name);
}

/* The interval type's name: the proc for call@X/ret@X, the common stem for
 * StartRead/EndRead, else START_END. */
static char *interval_name(emitter *em, const pi_interval *iv)
{
    const char *a = em->m->types[iv->start].name, *b = em->m->types[iv->end].name;
    char base[600];
    if (iv->affinity == 3) {
        /* the procedure's name without its module: Lectern__ApplyOp -> ApplyOp */
        const char *p = a + 5, *sep = strstr(p, "__");
        while (sep && sep[2]) {
            p = sep + 2;
            sep = strstr(p, "__");
        }
        snprintf(base, sizeof base, "%s", p);
    } else if (iv->affinity == 2) {
        /* A's name without its start word, in its own case */
        static const char *const w[] = { "start", "begin", "enter", "open", "call", "request", "req", NULL };
        size_t n = strlen(a);
        snprintf(base, sizeof base, "%s_%s", a, b);
        for (int k = 0; w[k]; k++) {
            size_t l = strlen(w[k]);
            if (n <= l)
                continue;
            if (strncasecmp(a, w[k], l) == 0) {
                snprintf(base, sizeof base, "%s", a + l);
                break;
            }
            if (strcasecmp(a + n - l, w[k]) == 0) {
                snprintf(base, sizeof base, "%.*s", (int)(n - l), a);
                break;
            }
        }
        /* trim separators */
        size_t s = strspn(base, "_.");
        memmove(base, base + s, strlen(base + s) + 1);
        for (size_t e = strlen(base); e && (base[e - 1] == '_' || base[e - 1] == '.'); e--)
            base[e - 1] = 0;
    } else {
        snprintf(base, sizeof base, "%s_%s", a, b);
    }
    return fresh(&em->ns, base);
}

/* Name of the metric holding the split attribute. */
static void split_metric(const emitter *em, const pi_interval *iv, char *out, size_t cap)
{
    char b[16];
    if (iv->split.inside >= 0) {
        char *id = ident(em->m->types[iv->split.inside].name);
        snprintf(out, cap, "has_%s", id);
        free(id);
        return;
    }
    const pi_type *t = &em->m->types[iv->split.end ? iv->end : iv->start];
    snprintf(out, cap, "%s%s", iv->split.end ? "e_" : "", attr_name(t, iv->split.attr, b));
}

static void key_text(const emitter *em, const pi_interval *iv, char *out, size_t cap)
{
    char b1[16], b2[16];
    if (iv->kstart == PI_THREAD)
        snprintf(out, cap, "thread(e) = thread(s)");
    else
        snprintf(out, cap, "e.%s = s.%s", attr_name(&em->m->types[iv->end], iv->kend, b1),
                 attr_name(&em->m->types[iv->start], iv->kstart, b2));
}

/* The comment above an interval type: what pairs it, how many, and why it is keyed and split. */
static void explain(emitter *em, const pi_interval *iv)
{
    FILE *f = em->f;
    const pi_type *A = &em->m->types[iv->start], *B = &em->m->types[iv->end];
    char key[200], d1[80], d2[80], d3[80], b1[16];
    key_text(em, iv, key, sizeof key);
    fprintf(f, "\n  %% %s: from %s to the %s %s with %s.\n", iv->name, A->name,
            iv->nested ? "matching (innermost open)" : "next", B->name, key);
    fprintf(f, "  %%   %llu pairs (of %llu %s and %llu %s).\n  %%  ", (unsigned long long)iv->matched,
            (unsigned long long)A->count, A->name, (unsigned long long)B->count, B->name);
    if (iv->affinity == 3 && iv->kstart == PI_THREAD)
        fprintf(f, " Call and return of one procedure, paired by thread.\n");
    else if (iv->kstart == PI_THREAD)
        fprintf(f, " Keyed by thread: no attribute pairs them as well.\n");
    else if (iv->thread_tried && iv->thread_too)
        fprintf(f, " Keyed by an attribute that names the pair (the thread id pairs them too).\n");
    else if (iv->thread_tried)
        fprintf(f, " Keyed by an attribute that names the pair (the thread id does not pair them).\n");
    else
        fprintf(f, " Keyed by an attribute that names the pair.\n");
    if (iv->nested)
        fprintf(f, "  %%   Nested: up to %u open at once with one key value; an end closes the latest.\n",
                iv->max_depth);
    const chance_result *ch = &iv->chance;
    fprintf(f, "  %%   %s: %llu avoidable unpaired events and %llu pairs nested in others over %u\n"
               "  %%   events; with each key value's starts and ends shuffled, medians %llu and %llu, and\n"
               "  %%   %u of %u shuffles do as well: p = %.2g %s %g%s\n",
            ch->kept ? "Not chance" : "Chance test", (unsigned long long)ch->cost.unpaired,
            (unsigned long long)ch->cost.nested, ch->events, (unsigned long long)ch->median.unpaired,
            (unsigned long long)ch->median.nested, ch->as_low, ch->shuffles, ch->p, ch->kept ? "<=" : ">",
            ch->alpha, !ch->kept ? ";\n  %   kept all the same: a call and its return pair by construction."
                       : iv->affinity ? " (the names pair them)." : ".");
    fmt_dur(d1, sizeof d1, iv->mean, em->m->tick_ns);
    fmt_dur(d2, sizeof d2, iv->min, em->m->tick_ns);
    fmt_dur(d3, sizeof d3, iv->max, em->m->tick_ns);
    fprintf(f, "  %%   Duration: mean %s, min %s, max %s.\n", d1, d2, d3);
    if (iv->split.ngroups && iv->split.inside >= 0) {
        const char *c = em->m->types[iv->split.inside].name;
        fprintf(f, "  %%   Split by whether a %s with the same key occurs inside: that explains %.0f%% of\n"
                   "  %%   the variance of the duration (adjusted for the number of groups):", c, 100 * iv->split.eta2);
        for (uint32_t g = 0; g < 2; g++) {
            fmt_dur(d1, sizeof d1, iv->split.mean[g], em->m->tick_ns);
            fprintf(f, "\n  %%     %s %s: %llu, mean %s", g ? "with" : "without", c,
                    (unsigned long long)iv->split.n[g], d1);
        }
        fprintf(f, "\n");
    } else if (iv->split.ngroups) {
        char metric[40];
        split_metric(em, iv, metric, sizeof metric);
        fprintf(f, "  %%   Split by %s.%s (%s event attribute %d): the groups' means explain %.0f%% of the\n"
                   "  %%   variance of the duration (adjusted for the number of groups):",
                iv->split.end ? "e" : "s", attr_name(iv->split.end ? B : A, iv->split.attr, b1),
                iv->split.end ? "end" : "start", iv->split.attr + 1, 100 * iv->split.eta2);
        for (uint32_t g = 0; g < iv->split.ngroups; g++) {
            fmt_dur(d1, sizeof d1, iv->split.mean[g], em->m->tick_ns);
            fprintf(f, "\n  %%     %s = %.0f: %llu, mean %s", metric, iv->split.value[g],
                    (unsigned long long)iv->split.n[g], d1);
        }
        fprintf(f, "\n");
    }
    if (iv->reg.attr >= 0) {
        fprintf(f, "  %%   Duration against s.%s: a straight line explains %.0f%% of the variance",
                attr_name(A, iv->reg.attr, b1), 100 * iv->reg.r2_all);
        if (iv->split.ngroups)
            fprintf(f, " (within each group)");
        fprintf(f, ", so it is fitted.\n");
    }
}

/* A dropped candidate with its names, for sorting. */
typedef struct named_drop {
    const char *a, *b;
    const pi_dropped *d;
} named_drop;

static int cmp_dropped(const void *x, const void *y)
{
    const named_drop *p = x, *q = y;
    int d = strcmp(p->a, q->a);
    if (!d)
        d = strcmp(p->b, q->b);
    if (!d)
        d = (p->d->kstart > q->d->kstart) - (p->d->kstart < q->d->kstart);
    if (!d)
        d = (p->d->kend > q->d->kend) - (p->d->kend < q->d->kend);
    return d;
}

/* The header's list of the candidates dropped as chance, sorted by name. */
static void dropped(emitter *em)
{
    FILE *f = em->f;
    pi_model *m = em->m;
    if (m->ndropped) {
        fprintf(f, "%% Dropped as chance: pairs that leave no fewer avoidable unpaired events (then\n"
                   "%% nest no less) than their starts and ends shuffled within each key value (p > %g;\n"
                   "%% > %g when the names pair them), or more than %g of the shuffles' median unpaired\n"
                   "%% events, or nest more than their median:\n",
                PI_CHANCE_P, PI_CHANCE_P_NAMED, PI_CHANCE_RATIO);
        named_drop *nd = calloc(m->ndropped, sizeof *nd);
        if (!nd)
            abort();
        for (uint32_t i = 0; i < m->ndropped; i++)
            nd[i] = (named_drop){ m->types[m->dropped[i].start].name, m->types[m->dropped[i].end].name,
                                  &m->dropped[i] };
        qsort(nd, m->ndropped, sizeof *nd, cmp_dropped);
        for (uint32_t i = 0; i < m->ndropped && i < PI_SHOW_DROPPED; i++) {
            const pi_dropped *d = nd[i].d;
            const pi_type *A = &m->types[d->start], *B = &m->types[d->end];
            char key[100], b1[16], b2[16];
            if (d->kstart == PI_THREAD)
                snprintf(key, sizeof key, "thread");
            else
                snprintf(key, sizeof key, "e.%s = s.%s", attr_name(B, d->kend, b1), attr_name(A, d->kstart, b2));
            const chance_result *c = &d->chance;
            char why[80];
            if ((double)c->cost.unpaired > c->ratio * (double)c->median.unpaired)
                snprintf(why, sizeof why, "unpaired above %g of the median", c->ratio);
            else if (c->cost.nested > c->median.nested)
                snprintf(why, sizeof why, "nests more than the median");
            else
                snprintf(why, sizeof why, "p > %g", c->alpha);
            fprintf(f, "%%   %s to %s by %s: %llu pairs; unpaired %llu (median %llu), nested %llu (median %llu);\n"
                       "%%     %u of %u shuffles do as well, p = %.2g: %s.\n",
                    A->name, B->name, key, (unsigned long long)d->matched, (unsigned long long)c->cost.unpaired,
                    (unsigned long long)c->median.unpaired, (unsigned long long)c->cost.nested,
                    (unsigned long long)c->median.nested, c->as_low, c->shuffles, c->p, why);
        }
        free(nd);
        if (m->ndropped > PI_SHOW_DROPPED)
            fprintf(f, "%%   ... and %u more.\n", m->ndropped - PI_SHOW_DROPPED);
    }
    if (m->untested)
        fprintf(f, "%% %u candidate pairs were dropped untested (limit: %u passes testing %u each).\n",
                m->untested, PI_MAX_TEST_PASSES, PI_TEST_BATCH);
}

static void declare_interval(emitter *em, const pi_interval *iv)
{
    FILE *f = em->f;
    const pi_type *A = &em->m->types[iv->start], *B = &em->m->types[iv->end];
    char key[200], b[16];
    key_text(em, iv, key, sizeof key);
    if (iv->affinity == 3 && iv->kstart == PI_THREAD)
        fprintf(f, "  interval %s = intv@%s\n", iv->name, proc_of(A->name));
    else
        fprintf(f, "  %sinterval %s =\n    s: %s, e: %s where %s\n", iv->nested ? "nested " : "", iv->name, A->name,
                B->name, key);
    fprintf(f, "  metrics\n    time = ts(e) - ts(s)");
    for (uint32_t i = 0; i < A->nvalues && i < PI_MAX_ATTRS; i++) {
        const char *n = attr_name(A, (int)i, b);
        if (n && A->attr[i].n)
            fprintf(f, ",\n    %s = s.%s", n, n);
    }
    if (iv->split.ngroups && iv->split.inside >= 0) {
        const pi_type *C = &em->m->types[iv->split.inside];
        char metric[300], b2[16];
        split_metric(em, iv, metric, sizeof metric);
        if (iv->split.inside_key == PI_THREAD)
            fprintf(f, ",\n    %s = {count c : %s where thread(c) = thread(s)} != 0", metric, C->name);
        else
            fprintf(f, ",\n    %s = {count c : %s where c.%s = s.%s} != 0", metric, C->name,
                    attr_name(C, iv->split.inside_key, b), attr_name(A, iv->kstart, b2));
    } else if (iv->split.ngroups && iv->split.end) {
        const char *n = attr_name(B, iv->split.attr, b);
        fprintf(f, ",\n    e_%s = e.%s", n, n);
    }
    fprintf(f, "\n  end %s;\n", iv->name);
}

/* The unknowns, solve declarations and assertions of one group. */
static void group_bounds(emitter *em, const pi_interval *iv, int g)
{
    FILE *f = em->f;
    double P = em->opt->percentile, F = P / 100;
    char base[600], where[200], and_[200], label[300], metric[40], vs[40], b[16], pname[40];
    if (g >= 0 && iv->split.inside >= 0) {
        split_metric(em, iv, metric, sizeof metric);
        char *id = ident(em->m->types[iv->split.inside].name);
        snprintf(base, sizeof base, "%s_%s_%s", iv->name, g ? "has" : "no", id);
        snprintf(where, sizeof where, " where %sx.%s", g ? "" : "!", metric);
        snprintf(and_, sizeof and_, "%sx.%s & ", g ? "" : "!", metric);
        snprintf(label, sizeof label, "%s %s %s", iv->name, g ? "with" : "without", em->m->types[iv->split.inside].name);
        free(id);
    } else if (g >= 0) {
        split_metric(em, iv, metric, sizeof metric);
        value_suffix(vs, sizeof vs, iv->split.value[g]);
        snprintf(base, sizeof base, "%s_%s_%s", iv->name, metric, vs);
        snprintf(where, sizeof where, " where x.%s = %.0f", metric, iv->split.value[g]);
        snprintf(and_, sizeof and_, "x.%s = %.0f & ", metric, iv->split.value[g]);
        snprintf(label, sizeof label, "%s with %s = %.0f", iv->name, metric, iv->split.value[g]);
    } else {
        snprintf(base, sizeof base, "%s", iv->name);
        where[0] = and_[0] = 0;
        snprintf(label, sizeof label, "%s", iv->name);
    }
    snprintf(pname, sizeof pname, "p%g", P);
    for (char *p = pname; *p; p++)
        if (*p == '.')
            *p = '_';
    char buf[700];
    snprintf(buf, sizeof buf, "%s_n", base);
    char *n = fresh(&em->ns, buf);
    snprintf(buf, sizeof buf, "%s_%s", base, P >= 100 ? "max" : pname);
    char *bound = fresh(&em->ns, buf);
    snprintf(buf, sizeof buf, "%s_mean", base);
    char *mean = fresh(&em->ns, buf);
    char *hist = NULL;
    fprintf(f, "  def %s = {count x : %s%s};\n", n, iv->name, where);
    if (P < 100) {
        snprintf(buf, sizeof buf, "%s_hist", base);
        hist = fresh(&em->ns, buf);
        fprintf(f, "      %s = {+ x : %s%s : trunc(log(2, max(x.time.v, 0) + 1) * 16) -> 1};\n", hist, iv->name,
                where);
    }
    fprintf(f, "  def %s = ?; %s = ?;\n", bound, mean);
    if (P < 100)
        fprintf(f,
                "  solve %s =\n"
                "      {min k in domain(%s)\n"
                "         where {+ j in domain(%s) where j <= k : %s(j)} >= %g * %s :\n"
                "         power(2, (k + 1) / 16)};\n",
                bound, hist, hist, hist, F, n);
    else
        fprintf(f, "  solve %s = {max x : %s%s : x.time.v};\n", bound, iv->name, where);
    fprintf(f, "        %s = {mean x : %s%s : x.time};\n", mean, iv->name, where);
    if (P < 100)
        fprintf(f, "  assert \"%s: %g%% take at most %s ticks\":\n    {count x : %s where %sx.time.v <= %s} >= %g * %s;\n",
                label, P, bound, iv->name, and_, bound, F, n);
    else
        fprintf(f, "  assert \"%s: none takes longer than %s ticks\":\n    {& x : %s%s : x.time <= %s};\n", label,
                bound, iv->name, where, bound);
    fprintf(f, "    \"%s: mean at most 10%% above %s\":\n    {mean x : %s%s : x.time} <= %s + abs(%s) * 0.1;\n",
            label, mean, iv->name, where, mean, mean);
    if (iv->reg.attr >= 0) {
        const char *xa = attr_name(&em->m->types[iv->start], iv->reg.attr, b);
        snprintf(buf, sizeof buf, "%s_per_%s", base, xa);
        char *slope = fresh(&em->ns, buf);
        snprintf(buf, sizeof buf, "%s_fixed", base);
        char *fixed = fresh(&em->ns, buf);
        snprintf(buf, sizeof buf, "%s_var", base);
        char *var = fresh(&em->ns, buf);
        fprintf(f, "  def %s = ?; %s = ?; %s = ?;\n", slope, fixed, var);
        fprintf(f, "  solve data x : %s%s : x.time.v = %s * x.%s + %s, var %s;\n", iv->name, where, slope, xa, fixed,
                var);
        if (P < 100) {
            /* Chebyshev: at most 1/K^2 of the points lie K residual deviations above the line */
            double K = ceil(sqrt(1 / (1 - F)) * 1000) / 1000;
            fprintf(f,
                    "  assert \"%s: %g%% within %g deviations above the fit\":\n"
                    "    {count x : %s where %sx.time.v <= %s * x.%s + %s + %g * power(%s, 0.5)} >= %g * %s;\n",
                    label, P, K, iv->name, and_, slope, xa, fixed, K, var, F, n);
        }
        free(slope);
        free(fixed);
        free(var);
    }
    free(n);
    free(bound);
    free(mean);
    free(hist);
}

int pi_emit(FILE *f, pi_model *m, const struct pi_emit_options *opt)
{
    emitter em = { f, m, opt, { 0 } };
    /* every event and proc name is taken first */
    for (uint32_t t = 0; t < m->ntypes; t++)
        if (!proc_of(m->types[t].name))
            take(&em.ns, m->types[t].name);
    char *spec = fresh(&em.ns, m->program && *m->program ? m->program : "inferred");
    for (uint32_t i = 0; i < m->niv; i++)
        m->iv[i].name = interval_name(&em, &m->iv[i]);

    double P = opt->percentile;
    fprintf(f, "%% Inferred by pinfer from %s.\n", m->logname);
    fprintf(f, "%% %llu records, %u event types; %u interval type%s with at least %llu pairs.\n",
            (unsigned long long)m->records, m->ntypes, m->niv, m->niv == 1 ? "" : "s",
            (unsigned long long)opt->min_count);
    fprintf(f, "%% Fill in the unknowns ('= ?') from the same log with: psolve -s THIS_FILE LOG\n");
    if (P < 100)
        fprintf(f, "%% Bounds: the %gth percentile of each interval type's duration (in steps of 1/16\n"
                   "%% of a doubling), the mean, and a straight-line fit where an attribute explains it.\n",
                P);
    else
        fprintf(f, "%% Bounds: the longest duration of each interval type, the mean, and a straight-line\n"
                   "%% fit where an attribute explains it.\n");
    /* types not used, sorted */
    pi_type **ts = calloc(m->ntypes + 1, sizeof *ts);
    uint32_t nu = 0;
    for (uint32_t t = 0; t < m->ntypes; t++)
        if (!m->types[t].used)
            ts[nu++] = &m->types[t];
    qsort(ts, nu, sizeof *ts, cmp_type_name);
    if (nu) {
        int col = fprintf(f, "%% Event types that start or end no interval:");
        for (uint32_t i = 0; i < nu; i++) {
            char item[300];
            int len = snprintf(item, sizeof item, " %s (%llu%s)%s", ts[i]->name, (unsigned long long)ts[i]->count,
                               ts[i]->watched ? ", splits one" : "", i + 1 < nu ? "," : ".");
            if (col + len > 80) {
                fprintf(f, "\n%%");
                col = 1;
            }
            col += fprintf(f, "%s", item);
        }
        fputc('\n', f);
    }
    dropped(&em);
    if (m->types_ignored)
        fprintf(f, "%% %llu records of further event types were ignored (limit: %u types).\n",
                (unsigned long long)m->types_ignored, PI_MAX_TYPES);
    if (m->types_reserved)
        fprintf(f, "%% %llu records of event types named by PSpec reserved words were ignored.\n",
                (unsigned long long)m->types_reserved);
    if (m->candidates_capped)
        fprintf(f, "%% Only the first %u candidate pairs were tried (limit).\n", PI_MAX_CANDIDATES);
    if (m->overflowed)
        fprintf(f, "%% %u candidate pairs were given up: too many starts open at once (limits: %u with one\n"
                   "%% key value, %u for one candidate, %u for all).\n", m->overflowed, PI_MAX_DEPTH,
                PI_MAX_OPEN_PER, PI_MAX_OPEN);
    if (m->malformed)
        fprintf(f, "%% %llu malformed records were skipped.\n", (unsigned long long)m->malformed);
    fprintf(f, "perfspec %s\n", spec);

    /* events (not call@/ret@), sorted */
    uint32_t nd = 0;
    for (uint32_t t = 0; t < m->ntypes; t++)
        if ((m->types[t].used || m->types[t].watched) && !proc_of(m->types[t].name))
            ts[nd++] = &m->types[t];
    qsort(ts, nd, sizeof *ts, cmp_type_name);
    for (uint32_t i = 0; i < nd; i++) {
        fprintf(f, "  %s %s(", i ? "          " : "timed event", ts[i]->name);
        for (uint32_t k = 0; k < ts[i]->nvalues; k++)
            fprintf(f, "%sa%u", k ? ", " : "", k + 1);
        fprintf(f, ");\n");
    }
    /* procs, sorted */
    char **procs = calloc(m->ntypes + 1, sizeof *procs);
    uint32_t np = 0;
    for (uint32_t t = 0; t < m->ntypes; t++) {
        const char *p = proc_of(m->types[t].name);
        bool dup = false;
        for (uint32_t k = 0; k < np && p; k++)
            dup |= strcmp(procs[k], p) == 0;
        if ((m->types[t].used || m->types[t].watched) && p && !dup)
            procs[np++] = (char *)p;
    }
    qsort(procs, np, sizeof *procs, cmp_str);
    for (uint32_t i = 0; i < np; i++) {
        uint32_t nargs = 0;
        bool returns = false;
        for (uint32_t t = 0; t < m->ntypes; t++) {
            const char *p = proc_of(m->types[t].name);
            if (!p || strcmp(p, procs[i]) != 0)
                continue;
            if (is_call(m->types[t].name))
                nargs = m->types[t].nvalues;
            else
                returns = m->types[t].nvalues > 0;
        }
        fprintf(f, "  proc %s", procs[i]);
        if (nargs) {
            fputc('(', f);
            for (uint32_t k = 0; k < nargs; k++)
                fprintf(f, "%sa%u", k ? ", " : "", k + 1);
            fputc(')', f);
        }
        fprintf(f, "%s;\n", returns ? " returns r" : "");
    }
    free(procs);
    free(ts);

    /* intervals, sorted by name */
    pi_interval **iv = calloc(m->niv + 1, sizeof *iv);
    for (uint32_t i = 0; i < m->niv; i++)
        iv[i] = &m->iv[i];
    qsort(iv, m->niv, sizeof *iv, cmp_iv_name);
    for (uint32_t i = 0; i < m->niv; i++) {
        explain(&em, iv[i]);
        declare_interval(&em, iv[i]);
        if (iv[i]->split.ngroups)
            for (uint32_t g = 0; g < iv[i]->split.ngroups; g++)
                group_bounds(&em, iv[i], (int)g);
        else
            group_bounds(&em, iv[i], -1);
    }
    free(iv);
    fprintf(f, "end %s\n", spec);
    free(spec);
    for (size_t i = 0; i < em.ns.n; i++)
        free(em.ns.v[i]);
    free(em.ns.v);
    return ferror(f) ? -1 : 0;
}
