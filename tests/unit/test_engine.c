/* test_engine.c — unit tests for the interval engine (libpspec/src/engine.c)
 * through its private interface: the per-aggregate element sink that psolve
 * uses. Language behaviour as a whole is tested by tests/lang.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "logread.h"
#include "program.h"

/* A loaded spec, an evaluation context and a reader over an ascii log. */
typedef struct fixture {
    pspec *ps;
    ps_program *prog;
    ps_evalctx ev;
    log_reader *r;
    bool *need_iv;
} fixture;

static void fixture_open(fixture *f, const char *spec, const char *log)
{
    memset(f, 0, sizeof *f);
    f->ps = pspec_new();
    assert_int_equal(pspec_load_text(f->ps, "t.pspec", spec, strlen(spec)), 0);
    f->prog = &f->ps->prog;
    f->ev.nslots = f->prog->nslots;
    f->ev.slots = calloc(f->prog->nslots + 1, sizeof(pv));
    f->ev.consts = calloc(f->prog->consts.n + 1, sizeof(pv));
    f->ev.topvals = calloc(f->prog->topaggs.n + 1, sizeof(pv));
    f->ev.tick_ns = 1;
    f->need_iv = calloc(f->prog->ivtypes.n + 1, sizeof(bool));
    for (uint32_t i = 0; i < f->prog->ivtypes.n; i++)
        f->need_iv[i] = true;
    char *err = NULL;
    f->r = log_reader_open_mem(log, strlen(log), "t.log", NULL, NULL, &err);
    assert_non_null(f->r);
}

static void fixture_close(fixture *f)
{
    for (uint32_t i = 0; i < f->prog->topaggs.n; i++)
        pv_free(f->ev.topvals[i]);
    for (uint32_t i = 0; i < f->prog->consts.n; i++)
        pv_free(f->ev.consts[i]);
    free(f->ev.slots);
    free(f->ev.consts);
    free(f->ev.topvals);
    free(f->need_iv);
    log_reader_free(f->r);
    pspec_free(f->ps);
}

/* What the sink saw. */
typedef struct seen {
    ps_evalctx *ev;
    const ps_expr *value;       /* evaluated during each call */
    uint32_t k;                 /* the sink top */
    char got[256];              /* "x;x;U;" ... one entry per call, U for NULL */
    pv kept;                    /* a copy of the last element */
} seen;

static void sink(void *ctx, uint32_t k, const pv *elem)
{
    seen *s = ctx;
    assert_int_equal(k, s->k);
    char item[32];
    if (!elem) {
        strcpy(item, "U;");
    } else {
        assert_int_equal(elem->kind, PV_EVENT);
        pv x = ps_eval(s->ev, s->value);     /* the variable is bound to elem */
        assert_int_equal(x.kind, PV_NUM);
        snprintf(item, sizeof item, "%g;", x.num);
        pv_free(s->kept);
        s->kept = pv_copy(*elem);
    }
    strncat(s->got, item, sizeof s->got - strlen(s->got) - 1);
}

static const char sink_spec[] =
    "perfspec T\n"
    "  event A(x, y);\n"
    "  assert {count a : A where a.x > 0} = 3;\n"
    "    {+ a : A where a.y > 1 : a.x} = 0\n"
    "end T\n";

static const char sink_log[] =
    "#cmon-ascii 1\n"
    "1 1 A 1 2\n"
    "2 1 A -1 5\n"
    "3 1 A 2\n"         /* y missing: the where-clause is UNDEFINED */
    "4 1 A 3 0\n";

/* Elements that pass the where-clause go to the sink, UNDEFINED ones as
 * NULL; other aggregates of the pass are computed as usual. */
static void test_sink(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, sink_spec, sink_log);
    assert_int_equal(f.prog->topaggs.n, 2);
    uint32_t ksum = f.prog->topaggs.v[0]->op == PV_AGG_SUM ? 0 : 1;
    bool is_sink[2] = {false, false};
    is_sink[ksum] = true;
    seen s = {.ev = &f.ev, .value = f.prog->topaggs.v[ksum]->value, .k = ksum};
    ps_pass p = {.prog = f.prog, .ev = &f.ev, .need_iv = f.need_iv, .tops = f.prog->topaggs.v, .ntops = 2,
                 .sink = sink, .is_sink = is_sink, .ctx = &s};
    char *err = NULL;
    assert_int_equal(ps_engine_run(&p, f.r, &err), 0);
    assert_string_equal(s.got, "1;-1;U;");
    /* The kept element outlives the pass. */
    assert_int_equal(s.kept.kind, PV_EVENT);
    assert_int_equal(s.kept.ev->ts, 2);
    pv_free(s.kept);
    /* The sink aggregate has no value; the other one was accumulated. */
    assert_int_equal(f.ev.topvals[f.prog->topaggs.v[ksum]->id].kind, PV_UNDEF);
    const pv *count = &f.ev.topvals[f.prog->topaggs.v[1 - ksum]->id];
    assert_int_equal(count->kind, PV_NUM);
    assert_true(count->num == 3);
    fixture_close(&f);
}

/* Without is_sink (NULL) every aggregate accumulates. */
static void test_no_sink(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, sink_spec, sink_log);
    uint32_t ksum = f.prog->topaggs.v[0]->op == PV_AGG_SUM ? 0 : 1;
    ps_pass p = {.prog = f.prog, .ev = &f.ev, .need_iv = f.need_iv, .tops = f.prog->topaggs.v, .ntops = 2};
    char *err = NULL;
    assert_int_equal(ps_engine_run(&p, f.r, &err), 0);
    /* The UNDEFINED where-clause makes the sum UNDEFINED. */
    assert_int_equal(f.ev.topvals[f.prog->topaggs.v[ksum]->id].kind, PV_UNDEF);
    const pv *count = &f.ev.topvals[f.prog->topaggs.v[1 - ksum]->id];
    assert_int_equal(count->kind, PV_NUM);
    assert_true(count->num == 3);
    fixture_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sink),
        cmocka_unit_test(test_no_sink),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
