/* test_value_acc.c — the unboxed accumulator entry points (pv_acc_add_num,
 * pv_acc_add_bool, pv_acc_add_triple, pv_acc_result_num) against the boxed
 * pv_acc_add they shortcut, and the event pool (pv_event_alloc).
 *
 * Each case feeds the same sequence of elements to two accumulators of the
 * same operator, one through pv_acc_add and one through the unboxed call,
 * and requires identical results after every element. Sequences cover
 * overflow, signed zeros, invalid triples, UNDEFINED elements and poisoning.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "value.h"

/* One element: a number, a boolean, a triple, UNDEFINED, or a poisoning
 * (a where-clause that was UNDEFINED). */
typedef struct elem {
    char kind;          /* 'n', 'b', 't', 'u', 'p' */
    double v, p, m;     /* 'n': v; 'b': v != 0; 't': [v, p, m] */
} elem;

#define N(x) {'n', (x), 0, 0}
#define B(x) {'b', (x), 0, 0}
#define T(v, p, m) {'t', (v), (p), (m)}
#define U {'u', 0, 0, 0}
#define P {'p', 0, 0, 0}
#define END {0, 0, 0, 0}

static const elem seq_nums[] = {N(3), N(-1.5), N(1e300), N(1e300), N(-0.0), N(7), END};
static const elem seq_nums_overflow[] = {N(DBL_MAX), N(DBL_MAX), N(1), END};
static const elem seq_zeros[] = {N(-0.0), N(0.0), N(-0.0), END};
static const elem seq_single_num[] = {N(42), END};
static const elem seq_nums_undef[] = {N(1), U, N(2), END};
static const elem seq_nums_poison[] = {N(1), N(2), P, N(3), END};
static const elem seq_bools[] = {B(1), B(1), B(0), B(1), END};
static const elem seq_bools_true[] = {B(1), B(1), END};
static const elem seq_bools_false[] = {B(0), B(0), END};
static const elem seq_bools_undef[] = {B(1), U, B(0), END};
static const elem seq_bools_poison[] = {B(0), P, B(1), END};
static const elem seq_triples[] = {T(5, 1, 0), T(2, 0.5, 0.25), T(9, 0, 3), T(-4, 2, 2), END};
static const elem seq_triples_bad[] = {T(5, 1, 0), T(1, -1, 0), T(2, 0, 0), T(NAN, 0, 0), END};
static const elem seq_triples_big[] = {T(DBL_MAX, 0, 0), T(DBL_MAX, 0, 0), T(1, 1, 1), END};
static const elem seq_triples_zero[] = {T(0, -0.0, -0.0), T(-0.0, 0, 0), END};
static const elem seq_triples_undef[] = {T(1, 1, 1), U, T(2, 0, 0), END};
static const elem seq_triples_poison[] = {T(1, 1, 1), P, T(2, 0, 0), END};

static pv boxed(const elem *x)
{
    switch (x->kind) {
    case 'n': return pv_num(x->v);
    case 'b': return pv_bool(x->v != 0);
    case 't': return pv_triple_make(x->v, x->p, x->m);
    default: return pv_undef();
    }
}

static void add_unboxed(pv_acc *a, const elem *x)
{
    switch (x->kind) {
    case 'n': pv_acc_add_num(a, x->v); break;
    case 'b': pv_acc_add_bool(a, x->v != 0); break;
    case 't': pv_acc_add_triple(a, (pv_triple){x->v, x->p, x->m}); break;
    default: pv_acc_add(a, pv_undef()); break;
    }
}

/* Same value, with signed zeros told apart. */
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

static void check_seq(pv_aggop op, const elem *seq)
{
    pv_acc *ref = pv_acc_new(op, 0), *fast = pv_acc_new(op, 0);
    for (const elem *x = seq; x->kind; x++) {
        if (x->kind == 'p') {
            pv_acc_poison(ref);
            pv_acc_poison(fast);
        } else {
            pv_acc_add(ref, boxed(x));
            add_unboxed(fast, x);
        }
        pv r = pv_acc_result(ref), f = pv_acc_result(fast);
        if (!same(&r, &f)) {
            ps_buf br = {0}, bf = {0};
            pv_format(&br, &r);
            pv_format(&bf, &f);
            fail_msg("%s after element %d: boxed %s, unboxed %s", pv_aggop_spelling[op], (int)(x - seq),
                     ps_buf_str(&br), ps_buf_str(&bf));
        }
        assert_int_equal(pv_acc_count(ref), pv_acc_count(fast));
        double d = 0;
        bool isnum = pv_acc_result_num(fast, &d);
        assert_int_equal(isnum, f.kind == PV_NUM);
        if (isnum)
            assert_true(d == f.num && signbit(d) == signbit(f.num));
        pv_free(r);
        pv_free(f);
    }
    pv_acc_free(ref);
    pv_acc_free(fast);
}

static const elem *const all_seqs[] = {
    seq_nums, seq_nums_overflow, seq_zeros, seq_single_num, seq_nums_undef, seq_nums_poison,
    seq_bools, seq_bools_true, seq_bools_false, seq_bools_undef, seq_bools_poison,
    seq_triples, seq_triples_bad, seq_triples_big, seq_triples_zero, seq_triples_undef, seq_triples_poison,
};

/* Every operator on every sequence, ill-typed combinations included (the
 * unboxed entry points must still agree with pv_acc_add there). */
static void test_unboxed_matches_boxed(void **state)
{
    (void)state;
    for (int op = 0; op < PV_AGG__COUNT; op++)
        for (size_t i = 0; i < PS_ARRAY_LEN(all_seqs); i++)
            check_seq((pv_aggop)op, all_seqs[i]);
}

/* An empty accumulator: count is 0, others follow Figure 10. */
static void test_result_num_empty(void **state)
{
    (void)state;
    double d = -1;
    pv_acc *a = pv_acc_new(PV_AGG_COUNT, 0);
    assert_true(pv_acc_result_num(a, &d));
    assert_true(d == 0);
    pv_acc_poison(a);
    d = -1;
    assert_false(pv_acc_result_num(a, &d));
    assert_true(d == -1);       /* untouched on failure */
    pv_acc_free(a);
    a = pv_acc_new(PV_AGG_SUM, 0);
    assert_true(pv_acc_result_num(a, &d));
    assert_true(d == 0);
    pv_acc_free(a);
    a = pv_acc_new(PV_AGG_MEAN, 0);
    assert_false(pv_acc_result_num(a, &d));
    pv_acc_free(a);
    a = pv_acc_new(PV_AGG_ALL, 0);
    assert_false(pv_acc_result_num(a, &d));     /* true is not a number */
    pv_acc_free(a);
}

/* Mapping accumulators take numbers only through pv_acc_add's own rules. */
static void test_unboxed_on_mapping_acc(void **state)
{
    (void)state;
    pv_acc *ref = pv_acc_new(PV_AGG_SUM, 1), *fast = pv_acc_new(PV_AGG_SUM, 1);
    pv_acc_add(ref, pv_num(1));
    pv_acc_add_num(fast, 1);
    pv r = pv_acc_result(ref), f = pv_acc_result(fast);
    assert_true(same(&r, &f));
    pv_free(r);
    pv_free(f);
    pv_acc_free(ref);
    pv_acc_free(fast);
}

/* Released events are reused for the same capacity, and large ones are
 * simply freed (run under ASan for the leak check). */
static void test_event_pool(void **state)
{
    (void)state;
    pv_event *e = pv_event_alloc(3);
    assert_int_equal(e->refs, 1);
    assert_int_equal(e->nattr, 3);
    e->type = NULL;
    pv_event_release(e);
    pv_event *again = pv_event_alloc(3);
    assert_ptr_equal(again, e);
    assert_int_equal(again->refs, 1);
    again->refs++;
    pv_event_release(again);        /* still referenced */
    assert_int_equal(again->refs, 1);
    pv_event_release(again);
    pv_event *big = pv_event_alloc(1000);
    assert_int_equal(big->nattr, 1000);
    big->attr[999] = 1;
    pv_event_release(big);
    /* pv_event_new on a recycled buffer starts clean. */
    pv_event *n = pv_event_new("T", 3);
    assert_int_equal(n->refs, 1);
    assert_int_equal(n->sub, 0);
    assert_int_equal(n->pos, 0);
    assert_false(pv_attr_defined(n->attr[0]));
    assert_false(pv_attr_defined(n->attr[2]));
    pv_event_release(n);
    /* Many at once: more than the pool keeps. */
    pv_event *many[600];
    for (int i = 0; i < 600; i++)
        many[i] = pv_event_alloc(2);
    for (int i = 0; i < 600; i++)
        pv_event_release(many[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unboxed_matches_boxed),
        cmocka_unit_test(test_result_num_empty),
        cmocka_unit_test(test_unboxed_on_mapping_acc),
        cmocka_unit_test(test_event_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
