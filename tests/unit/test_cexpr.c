/* test_cexpr.c — compiled expressions (libpspec/src/cexpr.c) against eval.c.
 *
 * A spec full of the expression shapes the engine compiles (attributes and
 * metrics of binders, relations against constants, ts(e) - ts(s), metric
 * aggregates, triples, logic, constants) is loaded; then, for many random
 * bindings of every binder slot (events with defined, undefined and missing
 * attributes, intervals with metrics of every kind, values of the wrong kind,
 * UNDEFINED), every subexpression is evaluated both ways and must agree
 * exactly: cx_value/cx_eval with ps_eval, cx_num with ps_eval_num, cx_tri
 * with ps_eval_tri, cx_cond with ps_eval_cond, and a where-clause compiled
 * with its key conjunct assumed true with ps_eval_cond wherever that
 * conjunct is true.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cexpr.h"
#include "program.h"

static const char spec[] =
    "perfspec T\n"
    "  def K = 3;\n"
    "  def TT = [5, 1, 2];\n"
    "  def B = true;\n"
    "  def H = 2 ms;\n"
    "  timed event S(a, b); E(a, b);\n"
    "  timed event C(a);\n"
    "  interval I =\n"
    "    s: S where s.a > 0 & s.b != 2,\n"
    "    e: E where e.a = s.a & e.b >= s.b & thread(e) = thread(s)\n"
    "  metrics\n"
    "    d = ts(e) - ts(s),\n"
    "    el = elapsed(e, s),\n"
    "    n = {count c : C where c.a = s.a},\n"
    "    sm = {+ c : C where c.a = s.a : c.a},\n"
    "    mn = {min c : C where s.a = c.a & c.a > 0 : c.a * 2},\n"
    "    al = {& c : C where c.a = s.a : c.a > 1},\n"
    "    tr = {+ c : C where c.a = s.a : [c.a, 1, 1]},\n"
    "    x = s.b - e.b + K,\n"
    "    q = s.b / e.b,\n"
    "    m = -s.b * 2,\n"
    "    th = thread(s) + thread(e),\n"
    "    f = (s.a > 1) = (e.b < 3),\n"
    "    tp = ts(s).v + (ts(e) - ts(s)).p - elapsed(e, s).m,\n"
    "    mixed = ts(e) - ts(s) + 5 - TT,\n"
    "    ng = -(ts(e) - ts(s)),\n"
    "    cnt = {count c : C where c.a = s.a} != 0,\n"
    "    cmp = {count c : C where c.a = s.a} >= 1,\n"
    "    tsum = {+ c : C where c.a = s.a : ts(c)} + [1, 0, 0],\n"
    "    bk = {& c : C where c.a = s.a : c.a > 1} = (s.a < 2),\n"
    "    kk = K + TT.v * (B = true ? 1 ~ 2),\n"
    "    rel = (s.a <= 1) & (s.b < 1) | (e.a >= 2) & (e.b > 0) & (s.a = 3) | (e.b != 0) | 1 >= s.b,\n"
    "    rel2 = {count c : C where c.a = s.a} <= 1 & {count c : C where c.a = s.a} > 0\n"
    "  end I;\n"
    "  assert {& i : I : i.d <= 10 cyc};\n"
    "    {& i : I where i.n > 0 | i.f : i.x < 5 => i.al};\n"
    "    {mean i : I : i.d} >= 0;\n"
    "    {+ i : I where !(i.q = 1) : i.tr} = TT;\n"
    "    {count i : I where i.d > [3,1,1] & i.d < 100 & i.d >= K & 4 <= i.x & i.x != K & i.sm = 2 & i.mn > 1} >= 0;\n"
    "    {max i : I : i.m} <= {min i : I : i.th} | B;\n"
    "    {& i : I : i.d >= H & H > i.d.v & i.cnt = i.cmp & 3 < i.n & i.n <= 2 & i.n = 2 & i.n > 1 & i.n < 2};\n"
    "    {& i : I : i.n >= 2 & i.n != 2 & 2 >= i.n & i.d <= 3 & i.d < 3 & i.d >= 3 & 3 > i.d & i.x = 1};\n"
    "    {& i : I : i.d = 4 & i.d != 4 & i.d > 4 & i.d < 4 & i.el >= i.d & i.ng < i.d & i.mixed >= TT}\n"
    "end T\n";

/* ---- collecting subexpressions ------------------------------------------------------ */

typedef struct exprs {
    const ps_expr **v;
    size_t n, cap;
} exprs;

static void add(exprs *x, const ps_expr *e)
{
    if (x->n == x->cap) {
        x->cap = x->cap ? 2 * x->cap : 64;
        x->v = realloc(x->v, x->cap * sizeof *x->v);
    }
    x->v[x->n++] = e;
}

static void collect(exprs *x, const ps_expr *e);

static void collect_agg(exprs *x, const ps_agg *a)
{
    collect(x, a->where);
    collect(x, a->value);
    collect(x, a->domain);
}

static void collect(exprs *x, const ps_expr *e)
{
    if (!e)
        return;
    add(x, e);
    switch ((ps_expr_kind)e->kind) {
    case X_ATTR: case X_METRIC: case X_PART: collect(x, e->field.obj); break;
    case X_BUILTIN: case X_APPLY:
        collect(x, e->call.fn);
        for (uint32_t i = 0; i < e->call.nargs; i++)
            collect(x, e->call.args[i]);
        break;
    case X_NEG: case X_NOT: collect(x, e->bin.a); break;
    case X_BINARY: case X_MAPONE: case X_IF: case X_ELSE:
        collect(x, e->bin.a);
        collect(x, e->bin.b);
        break;
    case X_CHAIN: case X_TRIPLE: case X_MAPLIST:
        for (uint32_t i = 0; i < e->list.n; i++)
            collect(x, e->list.items[i]);
        break;
    case X_AGG:
        if (e->agg->place == AGG_TOP)
            collect_agg(x, e->agg);
        break;
    default: break;
    }
}

/* ---- random bindings ------------------------------------------------------------------ */

static uint64_t rng = 12345;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static double rnd_attr(void)
{
    static const double vals[] = {0, 1, 2, 3, -1, 0.5, 1e308, -0.0, 4096};
    if (rnd(8) == 0)
        return PV_ATTR_UNDEF;
    return vals[rnd(PS_ARRAY_LEN(vals))];
}

static pv_event *rnd_event(ps_program *prog)
{
    ps_evtype *t = prog->evtypes.v[rnd(prog->evtypes.n)];
    uint32_t nattr = rnd(5) == 0 ? rnd(3) : t->nattr;     /* sometimes too few slots */
    pv_event *e = pv_event_new(t, nattr);
    for (uint32_t i = 0; i < nattr; i++)
        e->attr[i] = rnd_attr();
    e->thread = rnd(3);
    e->ts = (int64_t)rnd(20) - 2;
    e->pos = 1;
    return e;
}

static pv rnd_scalar(void)
{
    switch (rnd(6)) {
    case 0: return pv_undef();
    case 1: return pv_num(rnd_attr() == rnd_attr() ? 1 : rnd(5));
    case 2: return pv_bool(rnd(2));
    case 3: return pv_triple_make(rnd(10), rnd(3), rnd(3));
    case 4: return pv_num(-0.0);
    default: return pv_map_single(pv_num(1), pv_num(2));
    }
}

static pv_interval *rnd_interval(ps_program *prog)
{
    ps_ivtype *t = prog->ivtypes.v[0];
    uint32_t nm = rnd(6) == 0 ? rnd(t->nmetric) : t->nmetric;
    pv_interval *iv = pv_interval_new(t, nm);
    iv->start = rnd_event(prog);
    iv->end = rnd_event(prog);
    iv->uid = 1;
    for (uint32_t i = 0; i < nm; i++)
        iv->metric[i] = rnd_scalar();
    return iv;
}

static pv rnd_slot(ps_program *prog)
{
    switch (rnd(5)) {
    case 0: return pv_undef();
    case 1: return pv_num(rnd(3));
    case 2: return pv_interval_val(rnd_interval(prog));
    default: return pv_event_val(rnd_event(prog));
    }
}

static void rnd_acc(pv_acc *a)
{
    pv_acc_reset(a);
    uint32_t n = rnd(4);
    for (uint32_t i = 0; i < n; i++) {
        if (rnd(10) == 0)
            pv_acc_poison(a);
        pv_acc_add(a, rnd_scalar());
    }
}

/* ---- comparing ------------------------------------------------------------------------ */

static bool same(const pv *a, const pv *b)
{
    if (!pv_identical(a, b))
        return false;
    if (a->kind == PV_NUM)
        return signbit(a->num) == signbit(b->num);
    if (a->kind == PV_TRIPLE)
        return signbit(a->t.v) == signbit(b->t.v) && signbit(a->t.p) == signbit(b->t.p) &&
               signbit(a->t.m) == signbit(b->t.m);
    return true;
}

static void fail_at(const ps_program *prog, const ps_expr *e, const char *what, const pv *want, const pv *got)
{
    ps_buf a = {0}, b = {0};
    if (want)
        pv_format(&a, want);
    if (got)
        pv_format(&b, got);
    fail_msg("%s:%u:%u: %s: eval.c %s, cexpr %s", prog->files.v[e->loc.file]->path, e->loc.line, e->loc.col, what,
             ps_buf_str(&a), ps_buf_str(&b));
}

/* The equality conjunct of where-clause w (through '&') comparing x and y. */
static const ps_expr *conjunct(const ps_expr *w, const ps_expr *x, const ps_expr *y)
{
    if (!w || w->kind != X_BINARY)
        return NULL;
    if (w->op == PV_OP_EQ && ((w->bin.a == x && w->bin.b == y) || (w->bin.a == y && w->bin.b == x)))
        return w;
    if (w->op != PV_OP_AND)
        return NULL;
    const ps_expr *k = conjunct(w->bin.a, x, y);
    return k ? k : conjunct(w->bin.b, x, y);
}

typedef struct keyed {
    const ps_expr *where, *key;
} keyed;

static void test_matches_eval(void **state)
{
    (void)state;
    pspec *ps = pspec_new();
    assert_int_equal(pspec_load_text(ps, "t.pspec", spec, strlen(spec)), 0);
    ps_program *prog = &ps->prog;
    ps_ivtype *iv = prog->ivtypes.v[0];

    exprs all = {0};
    keyed keys[16];
    size_t nkeys = 0;
    collect(&all, iv->s_where);
    collect(&all, iv->e_where);
    keys[nkeys++] = (keyed){iv->e_where, conjunct(iv->e_where, iv->end_key, iv->start_key)};
    for (uint32_t m = 0; m < iv->nmetric; m++)
        collect(&all, iv->metrics[m].expr);
    for (uint32_t k = 0; k < iv->naggs; k++) {
        collect_agg(&all, iv->aggs[k]);
        if (iv->aggs[k]->elem_key)
            keys[nkeys++] = (keyed){iv->aggs[k]->where,
                                    conjunct(iv->aggs[k]->where, iv->aggs[k]->elem_key, iv->aggs[k]->start_key)};
    }
    for (uint32_t i = 0; i < prog->stmts.n; i++)
        collect(&all, prog->stmts.v[i]->expr);
    for (size_t k = 0; k < nkeys; k++)
        assert_non_null(keys[k].key);

    ps_evalctx ev = {.nslots = prog->nslots, .tick_ns = 1000};
    ev.slots = calloc(prog->nslots + 1, sizeof(pv));
    ev.consts = calloc(prog->consts.n + 1, sizeof(pv));
    ev.topvals = calloc(prog->topaggs.n + 1, sizeof(pv));
    for (uint32_t i = 0; i < prog->consts.n; i++)
        ev.consts[i] = ps_eval(&ev, prog->consts.v[i]->expr);
    pv_acc **accs = calloc(iv->naggs + 1, sizeof *accs);
    for (uint32_t k = 0; k < iv->naggs; k++)
        accs[k] = pv_acc_new(iv->aggs[k]->op, iv->aggs[k]->map_depth);

    cx_compiler cc;
    cx_init(&cc, &ev);
    cx_val *vals = calloc(all.n, sizeof *vals);
    const cx **nums = calloc(all.n, sizeof *nums), **tris = calloc(all.n, sizeof *tris);
    const cx **conds = calloc(all.n, sizeof *conds);
    for (size_t i = 0; i < all.n; i++) {
        const ps_expr *e = all.v[i];
        vals[i] = cx_value(&cc, e);
        ps_type_kind t = e->type ? e->type->kind : T_ERROR;
        if (t == T_NUM)
            nums[i] = cx_num(&cc, e);
        if (t == T_NUM || t == T_TRIPLE)
            tris[i] = cx_tri(&cc, e);
        if (t == T_BOOL)
            conds[i] = cx_cond(&cc, e, NULL);
    }
    const cx *keyed_where[16];
    for (size_t k = 0; k < nkeys; k++)
        keyed_where[k] = cx_cond(&cc, keys[k].where, keys[k].key);

    uint64_t checked = 0, assumed = 0;
    for (int round = 0; round < 3000; round++) {
        for (uint32_t s = 0; s < prog->nslots; s++) {
            pv_free(ev.slots[s]);
            ev.slots[s] = rnd_slot(prog);
        }
        for (uint32_t k = 0; k < iv->naggs; k++)
            rnd_acc(accs[k]);
        ev.accs = rnd(6) == 0 ? NULL : accs;
        for (size_t i = 0; i < all.n; i++) {
            const ps_expr *e = all.v[i];
            pv want = ps_eval(&ev, e), got = cx_eval(&vals[i], &ev);
            if (!same(&want, &got))
                fail_at(prog, e, "value", &want, &got);
            pv_free(got);
            if (nums[i]) {
                double a = 7, b = 7;
                bool da = ps_eval_num(&ev, e, &a), db = cx_eval_num(nums[i], &ev, &b);
                if (da != db || (da && (a != b || signbit(a) != signbit(b))))
                    fail_at(prog, e, "number", &want, NULL);
            }
            if (tris[i]) {
                pv_triple a = {0}, b = {0};
                bool da = ps_eval_tri(&ev, e, &a), db = cx_eval_tri(tris[i], &ev, &b);
                if (da != db || (da && memcmp(&a, &b, sizeof a) != 0))
                    fail_at(prog, e, "triple", &want, NULL);
            }
            if (e->type && e->type->kind == T_BOOL) {
                int a = ps_eval_cond(&ev, e), b = conds[i] ? cx_eval_cond(conds[i], &ev) : 1;
                if (a != b)
                    fail_at(prog, e, "condition", &want, NULL);
            }
            pv_free(want);
            checked++;
        }
        for (size_t k = 0; k < nkeys; k++) {
            if (ps_eval_cond(&ev, keys[k].key) != 1)
                continue;
            int a = ps_eval_cond(&ev, keys[k].where);
            int b = keyed_where[k] ? cx_eval_cond(keyed_where[k], &ev) : 1;
            if (a != b)
                fail_at(prog, keys[k].where, "keyed where-clause", NULL, NULL);
            assumed++;
        }
    }
    assert_true(checked > 100000);
    assert_true(assumed > 100);

    cx_free(&cc);
    free(vals);
    free(nums);
    free(tris);
    free(conds);
    for (uint32_t s = 0; s < prog->nslots; s++)
        pv_free(ev.slots[s]);
    for (uint32_t i = 0; i < prog->consts.n; i++)
        pv_free(ev.consts[i]);
    for (uint32_t k = 0; k < iv->naggs; k++)
        pv_acc_free(accs[k]);
    free(accs);
    free(ev.slots);
    free(ev.consts);
    free(ev.topvals);
    free(all.v);
    pspec_free(ps);
}

/* cx_cond: NULL when always true, constants folded, the assumption used only
 * through '&'. */
static void test_cond_folding(void **state)
{
    (void)state;
    static const char text[] =
        "perfspec F\n"
        "  event A(x); B(x);\n"
        "  interval I = s: A, e: B where e.x = s.x metrics a = 1 end I;\n"
        "  interval J = s: A, e: B where e.x = s.x | e.x > 1 metrics a = 1 end J;\n"
        "  interval L = s: A, e: B where true & e.x = s.x & true metrics a = 1 end L;\n"
        "  assert {count i : I} >= 0; {count j : J} >= 0; {count l : L} >= 0\n"
        "end F\n";
    pspec *ps = pspec_new();
    assert_int_equal(pspec_load_text(ps, "f.pspec", text, strlen(text)), 0);
    ps_program *prog = &ps->prog;
    ps_evalctx ev = {.tick_ns = 1};
    cx_compiler cc;
    cx_init(&cc, &ev);
    ps_ivtype *i = prog->ivtypes.v[0], *j = prog->ivtypes.v[1], *l = prog->ivtypes.v[2];
    /* e.x = s.x alone, assumed: nothing left to evaluate. */
    assert_non_null(i->end_key);
    assert_null(cx_cond(&cc, i->e_where, i->e_where));
    assert_non_null(cx_cond(&cc, i->e_where, NULL));
    /* Under '|' the assumption does not apply (and J has no key). */
    assert_null(j->end_key);
    assert_non_null(cx_cond(&cc, j->e_where, j->e_where->bin.a));
    /* true & K & true with K assumed: always true. */
    assert_non_null(l->end_key);
    const ps_expr *k = l->e_where->bin.a->bin.b;
    assert_int_equal(k->op, PV_OP_EQ);
    assert_null(cx_cond(&cc, l->e_where, k));
    assert_null(cx_cond(&cc, NULL, NULL));
    cx_free(&cc);
    pspec_free(ps);
}

/* Structural equality, as used to share key indexes. */
static void test_same_expr(void **state)
{
    (void)state;
    static const char text[] =
        "perfspec Q\n"
        "  event A(x, y); B(x);\n"
        "  interval I = s: A, e: B where e.x = s.x metrics\n"
        "    n = {count b : B where b.x = s.x}, m = {count b : B where s.y = b.x},\n"
        "    o = {count b : B where b.x = s.x + 1}\n"
        "  end I;\n"
        "  assert {count i : I} >= 0\n"
        "end Q\n";
    pspec *ps = pspec_new();
    assert_int_equal(pspec_load_text(ps, "q.pspec", text, strlen(text)), 0);
    ps_ivtype *i = ps->prog.ivtypes.v[0];
    assert_int_equal(i->naggs, 3);
    assert_true(cx_same_expr(i->start_key, i->aggs[0]->start_key));     /* s.x and s.x */
    assert_false(cx_same_expr(i->start_key, i->aggs[1]->start_key));    /* s.x and s.y */
    assert_false(cx_same_expr(i->start_key, i->aggs[2]->start_key));    /* s.x and s.x + 1 */
    assert_true(cx_same_expr(i->aggs[2]->start_key, i->aggs[2]->start_key));
    assert_false(cx_same_expr(i->start_key, NULL));
    pspec_free(ps);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_eval),
        cmocka_unit_test(test_cond_folding),
        cmocka_unit_test(test_same_expr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
