/* test_value.c — unit tests for PSpec run-time values (libpspec/src/value*.c).
 *
 * Most cases are rows of tables: an operation, its operands written in the
 * value notation ("[2,1,3]", "(1 -> 2)", "true", "U" for UNDEFINED) and the
 * expected printed result. Every row runs as its own named cmocka test.
 * Properties that do not fit a row (in-place updates, sharing, large
 * mappings, JSON validity) are plain test functions at the end.
 * Run under -DCMON_SANITIZE=ON to check reference counting for leaks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cmon_skip.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "value.h"

/* ---- helpers ---------------------------------------------------------------- */

/* A stand-in for the engine's type descriptors: the name comes first. */
struct test_type {
    const char *name;
    int other;
};

static void skip_ws(const char **s)
{
    while (**s == ' ')
        (*s)++;
}

static double parse_num(const char **s)
{
    char *end;
    double x = strtod(*s, &end);
    assert_true(end != *s);
    *s = end;
    return x;
}

static void expect_char(const char **s, char c)
{
    skip_ws(s);
    assert_int_equal(**s, c);
    (*s)++;
}

/* value := number | [v,p,m] | true | false | U | ( [key -> value {, key -> value}] ) */
static pv parse_value(const char **s)
{
    skip_ws(s);
    if (strncmp(*s, "true", 4) == 0) {
        *s += 4;
        return pv_bool(true);
    }
    if (strncmp(*s, "false", 5) == 0) {
        *s += 5;
        return pv_bool(false);
    }
    if (**s == 'U') {
        (*s)++;
        return pv_undef();
    }
    if (**s == '[') {
        (*s)++;
        double v = parse_num(s);
        expect_char(s, ',');
        double p = parse_num(s);
        expect_char(s, ',');
        double m = parse_num(s);
        expect_char(s, ']');
        pv t = pv_triple_make(v, p, m);
        assert_int_equal(t.kind, PV_TRIPLE);
        return t;
    }
    if (**s == '(') {
        (*s)++;
        pv m = pv_map_empty();
        skip_ws(s);
        while (**s != ')') {
            double k = parse_num(s);
            skip_ws(s);
            assert_true(strncmp(*s, "->", 2) == 0);
            *s += 2;
            m = pv_map_set(m, k, parse_value(s));
            skip_ws(s);
            if (**s == ',')
                (*s)++;
            skip_ws(s);
        }
        (*s)++;
        return m;
    }
    return pv_num(parse_num(s));
}

/* The value written in src (whole string). */
static pv lit(const char *src)
{
    const char *p = src;
    pv v = parse_value(&p);
    skip_ws(&p);
    assert_true(*p == '\0');
    return v;
}

/* Print v (consumed) and compare with want. */
static void expect_fmt(pv v, const char *want)
{
    ps_buf b = {0};
    pv_format(&b, &v);
    pv_free(v);
    assert_string_equal(ps_buf_str(&b), want);
    ps_buf_free(&b);
}

static void expect_json(pv v, const char *want)
{
    ps_buf b = {0};
    pv_format_json(&b, &v);
    pv_free(v);
    assert_string_equal(ps_buf_str(&b), want);
    ps_buf_free(&b);
}

static char *fmt_borrowed(const pv *v)
{
    ps_buf b = {0};
    pv_format(&b, v);
    return ps_buf_take(&b);
}

/* ---- binary operators ----------------------------------------------------------- */

struct binop_case {
    const char *name;
    pv_binop op;
    const char *a, *b, *want;
};

static const struct binop_case binop_cases[] = {
    /* numbers */
    {"num add", PV_OP_ADD, "1", "2", "3"},
    {"num add 0.1+0.2 prints 0.3", PV_OP_ADD, "0.1", "0.2", "0.3"},
    {"num sub to negative", PV_OP_SUB, "1", "4", "-3"},
    {"num div", PV_OP_DIV, "1", "4", "0.25"},
    {"num div by zero", PV_OP_DIV, "1", "0", "UNDEFINED"},
    {"num div zero by zero", PV_OP_DIV, "0", "0", "UNDEFINED"},
    {"num mul overflow", PV_OP_MUL, "1e308", "10", "UNDEFINED"},
    {"div positive", PV_OP_IDIV, "7", "2", "3"},
    {"div negative dividend floors", PV_OP_IDIV, "-7", "2", "-4"},
    {"div negative divisor floors", PV_OP_IDIV, "7", "-2", "-4"},
    {"div both negative", PV_OP_IDIV, "-7", "-2", "3"},
    {"div exact negative", PV_OP_IDIV, "-6", "2", "-3"},
    {"div non-integral", PV_OP_IDIV, "7.5", "2", "UNDEFINED"},
    {"div by zero", PV_OP_IDIV, "7", "0", "UNDEFINED"},
    {"mod positive", PV_OP_MOD, "7", "2", "1"},
    {"mod negative dividend has divisor sign", PV_OP_MOD, "-7", "2", "1"},
    {"mod negative divisor", PV_OP_MOD, "7", "-2", "-1"},
    {"mod both negative", PV_OP_MOD, "-7", "-2", "-1"},
    {"mod exact is 0 not -0", PV_OP_MOD, "-6", "3", "0"},
    {"mod non-integral divisor", PV_OP_MOD, "7", "2.5", "UNDEFINED"},
    {"mod by zero", PV_OP_MOD, "7", "0", "UNDEFINED"},
    {"num min", PV_OP_MIN, "3", "-2", "-2"},
    {"num max", PV_OP_MAX, "3", "-2", "3"},
    {"num lt", PV_OP_LT, "1", "2", "true"},
    {"num le equal", PV_OP_LE, "2", "2", "true"},
    {"num gt", PV_OP_GT, "1", "2", "false"},
    {"num ge", PV_OP_GE, "2", "1", "true"},
    {"num eq", PV_OP_EQ, "2", "2", "true"},
    {"num ne", PV_OP_NE, "2", "2", "false"},
    {"power", PV_OP_POWER, "2", "10", "1024"},
    {"power fractional of negative", PV_OP_POWER, "-8", "0.5", "UNDEFINED"},
    {"power zero to negative", PV_OP_POWER, "0", "-1", "UNDEFINED"},
    {"log base 10 exact", PV_OP_LOG, "10", "1000", "3"},
    {"log base 2 exact", PV_OP_LOG, "2", "8", "3"},
    {"log base 3", PV_OP_LOG, "3", "81", "4"},
    {"log of zero", PV_OP_LOG, "10", "0", "UNDEFINED"},
    {"log base 1", PV_OP_LOG, "1", "5", "UNDEFINED"},
    {"log negative base", PV_OP_LOG, "-2", "4", "UNDEFINED"},
    {"num and is ill-typed", PV_OP_AND, "1", "2", "UNDEFINED"},
    /* booleans */
    {"bool and", PV_OP_AND, "true", "false", "false"},
    {"bool or", PV_OP_OR, "true", "false", "true"},
    {"bool implies false->false", PV_OP_IMPLIES, "false", "false", "true"},
    {"bool implies true->false", PV_OP_IMPLIES, "true", "false", "false"},
    {"bool eq", PV_OP_EQ, "true", "true", "true"},
    {"bool ne", PV_OP_NE, "true", "false", "true"},
    {"bool lt is ill-typed", PV_OP_LT, "false", "true", "UNDEFINED"},
    {"bool plus num is ill-typed", PV_OP_ADD, "true", "1", "UNDEFINED"},
    /* triple arithmetic (Figure 8) */
    {"triple add", PV_OP_ADD, "[1,2,3]", "[4,5,6]", "[5,7,9]"},
    {"num plus triple", PV_OP_ADD, "1", "[2,1,1]", "[3,1,1]"},
    {"triple sub swaps p and m of u", PV_OP_SUB, "[5,1,2]", "[1,3,4]", "[4,5,5]"},
    {"triple mul positive", PV_OP_MUL, "[2,1,1]", "[3,1,1]", "[6,6,4]"},
    {"triple mul straddling zero", PV_OP_MUL, "[2,1,3]", "[-3,1,1]", "[-6,10,6]"},
    {"triple mul both negative", PV_OP_MUL, "[-2,1,1]", "[-3,1,1]", "[6,6,4]"},
    {"triple mul overflow", PV_OP_MUL, "[1e308,1e308,0]", "[0,1,0]", "UNDEFINED"},
    {"triple add overflow", PV_OP_ADD, "[1e308,0,0]", "[1e308,0,0]", "UNDEFINED"},
    {"triple mul zero width", PV_OP_MUL, "[2,0,0]", "[3,0,0]", "[6,0,0]"},
    {"num times triple", PV_OP_MUL, "2", "[3,1,1]", "[6,2,2]"},
    {"negative num times triple", PV_OP_MUL, "-2", "[3,1,1]", "[-6,2,2]"},
    {"triple div zero width", PV_OP_DIV, "[6,0,0]", "[2,0,0]", "[3,0,0]"},
    {"reciprocal of range", PV_OP_DIV, "1", "[2,1,1]", "[0.5,0.5,0.1666666667]"},
    {"triple div range", PV_OP_DIV, "[4,0,0]", "[2,1,1]", "[2,2,0.6666666667]"},
    {"reciprocal of negative range", PV_OP_DIV, "1", "[-2,1,0]", "[-0.5,0,0.5]"},
    {"reciprocal with 0 at lower end", PV_OP_DIV, "1", "[1,0,1]", "UNDEFINED"},
    {"reciprocal with 0 at upper end", PV_OP_DIV, "1", "[-1,1,0]", "UNDEFINED"},
    {"reciprocal of range holding 0", PV_OP_DIV, "1", "[0,1,1]", "UNDEFINED"},
    {"triple div by number zero", PV_OP_DIV, "[3,1,1]", "0", "UNDEFINED"},
    {"triple div is not integer div", PV_OP_IDIV, "[4,0,0]", "2", "UNDEFINED"},
    {"triple mod is ill-typed", PV_OP_MOD, "[4,0,0]", "2", "UNDEFINED"},
    {"triple min", PV_OP_MIN, "[1,2,0]", "[2,0,1]", "[1,1,0]"},
    {"triple max", PV_OP_MAX, "[1,2,0]", "[2,0,1]", "[2,1,1]"},
    {"num min triple", PV_OP_MIN, "5", "[3,1,1]", "[3,1,1]"},
    {"num max triple overlapping", PV_OP_MAX, "3.5", "[3,1,1]", "[3.5,0.5,0]"},
    {"log of triple", PV_OP_LOG, "10", "[100,900,90]", "[2,1,1]"},
    {"log of triple base below 1", PV_OP_LOG, "0.5", "[4,4,2]", "[-2,1,1]"},
    {"log of triple reaching 0", PV_OP_LOG, "10", "[1,0,1]", "UNDEFINED"},
    {"log with triple base", PV_OP_LOG, "[10,0,0]", "100", "UNDEFINED"},
    {"power num to triple", PV_OP_POWER, "2", "[3,1,1]", "[8,8,4]"},
    {"power num below 1 to triple", PV_OP_POWER, "0.5", "[1,1,1]", "[0.5,0.5,0.25]"},
    {"power negative num to triple range", PV_OP_POWER, "-2", "[3,1,0]", "UNDEFINED"},
    {"power negative num to zero-width triple", PV_OP_POWER, "-2", "[3,0,0]", "[-8,0,0]"},
    {"power triple to num", PV_OP_POWER, "[3,1,1]", "2", "[9,7,5]"},
    {"power triple to negative num", PV_OP_POWER, "[2,0,0]", "-1", "[0.5,0,0]"},
    {"power straddling triple squared", PV_OP_POWER, "[0,1,1]", "2", "[0,1,0]"},
    {"power straddling triple cubed", PV_OP_POWER, "[0,1,1]", "3", "[0,1,1]"},
    {"power negative triple cubed", PV_OP_POWER, "[-3,1,1]", "3", "[-27,19,37]"},
    {"power negative triple squared", PV_OP_POWER, "[-3,1,1]", "2", "[9,7,5]"},
    {"power straddling triple to 0", PV_OP_POWER, "[0,1,1]", "0", "[1,0,0]"},
    {"power straddling triple to fraction", PV_OP_POWER, "[0,1,1]", "0.5", "UNDEFINED"},
    {"power triple to triple", PV_OP_POWER, "[2,0,0]", "[2,0,0]", "UNDEFINED"},
    /* triple relations (Figure 9) */
    {"eq touching ranges", PV_OP_EQ, "[1,1,0]", "[3,0,1]", "true"},
    {"eq disjoint ranges", PV_OP_EQ, "[1,0.5,0]", "[3,0,1]", "false"},
    {"ne touching ranges", PV_OP_NE, "[1,1,0]", "[3,0,1]", "false"},
    {"lt touching is false", PV_OP_LT, "[1,1,0]", "[3,0,1]", "false"},
    {"lt disjoint", PV_OP_LT, "[1,0.5,0]", "[3,0,1]", "true"},
    {"le touching is true", PV_OP_LE, "[1,1,0]", "[3,0,1]", "true"},
    {"le above is false", PV_OP_LE, "[5,0,1]", "[2,1,0]", "false"},
    {"gt disjoint", PV_OP_GT, "[5,0,1]", "[2,1,0]", "true"},
    {"gt touching is false", PV_OP_GT, "[5,0,2]", "[2,1,0]", "false"},
    {"ge touching is true", PV_OP_GE, "[5,0,2]", "[2,1,0]", "true"},
    {"eq zero width with number", PV_OP_EQ, "[2,0,0]", "2", "true"},
    {"eq number inside range", PV_OP_EQ, "3", "[2,1,0]", "true"},
    {"lt negative ranges", PV_OP_LT, "[-5,1,1]", "[-2,0,0]", "true"},
    {"gt negative ranges", PV_OP_GT, "[-5,1,1]", "[-2,0,0]", "false"},
    {"eq is not transitive (a=b)", PV_OP_EQ, "[1,1,0]", "[2,1,0]", "true"},
    {"eq is not transitive (a!=c)", PV_OP_EQ, "[1,1,0]", "[3,1,0]", "false"},
    {"triple and is ill-typed", PV_OP_AND, "[1,0,0]", "[1,0,0]", "UNDEFINED"},
    /* mappings */
    {"map add unions domains", PV_OP_ADD, "(1 -> 1, 2 -> 2)", "(2 -> 3, 3 -> 4)",
     "(1 -> 1, 2 -> 5, 3 -> 4)"},
    {"map mul", PV_OP_MUL, "(1 -> 1, 2 -> 2)", "(2 -> 3, 3 -> 4)", "(1 -> 1, 2 -> 6, 3 -> 4)"},
    {"map min", PV_OP_MIN, "(1 -> 5, 2 -> 2)", "(1 -> 3)", "(1 -> 3, 2 -> 2)"},
    {"map max", PV_OP_MAX, "(1 -> 5, 2 -> 2)", "(1 -> 3)", "(1 -> 5, 2 -> 2)"},
    {"map and", PV_OP_AND, "(1 -> true, 2 -> true)", "(1 -> false)", "(1 -> false, 2 -> true)"},
    {"map or", PV_OP_OR, "(1 -> false)", "(1 -> true, 3 -> false)", "(1 -> true, 3 -> false)"},
    {"map of triples plus map of numbers", PV_OP_ADD, "(1 -> [1,1,1])", "(1 -> 2)",
     "(1 -> [3,1,1])"},
    {"nested map add", PV_OP_ADD, "(1 -> (1 -> 1))", "(1 -> (1 -> 2, 2 -> 1), 2 -> (5 -> 5))",
     "(1 -> (1 -> 3, 2 -> 1), 2 -> (5 -> 5))"},
    {"map add with undefined value", PV_OP_ADD, "(1 -> U, 2 -> 1)", "(1 -> 1, 2 -> 1)",
     "(1 -> UNDEFINED, 2 -> 2)"},
    {"empty map add", PV_OP_ADD, "()", "()", "()"},
    {"empty plus map", PV_OP_ADD, "()", "(4 -> 4)", "(4 -> 4)"},
    {"map negative keys ordered", PV_OP_ADD, "(3 -> 1, -2 -> 1)", "(0 -> 1)",
     "(-2 -> 1, 0 -> 1, 3 -> 1)"},
    {"map sub is ill-typed", PV_OP_SUB, "(1 -> 1)", "(1 -> 1)", "UNDEFINED"},
    {"map eq is ill-typed", PV_OP_EQ, "(1 -> 1)", "(1 -> 1)", "UNDEFINED"},
    {"map plus number", PV_OP_ADD, "(1 -> 1)", "1", "UNDEFINED"},
    {"map plus undefined", PV_OP_ADD, "(1 -> 1)", "U", "UNDEFINED"},
};

static void run_binop_case(void **state)
{
    const struct binop_case *c = *state;
    expect_fmt(pv_binary(c->op, lit(c->a), lit(c->b)), c->want);
}

/* Every operator on every kind propagates an UNDEFINED operand. */
static void test_undefined_propagates_through_every_op(void **state)
{
    (void)state;
    const char *others[] = {"1", "[1,1,1]", "true", "(1 -> 1)", "U", "0"};
    for (int op = 0; op < PV_OP__COUNT; op++) {
        for (size_t i = 0; i < PS_ARRAY_LEN(others); i++) {
            expect_fmt(pv_binary((pv_binop)op, pv_undef(), lit(others[i])), "UNDEFINED");
            expect_fmt(pv_binary((pv_binop)op, lit(others[i]), pv_undef()), "UNDEFINED");
        }
    }
    expect_fmt(pv_neg(pv_undef()), "UNDEFINED");
    expect_fmt(pv_not(pv_undef()), "UNDEFINED");
    expect_fmt(pv_abs(pv_undef()), "UNDEFINED");
    expect_fmt(pv_trunc(pv_undef()), "UNDEFINED");
    expect_fmt(pv_elapsed(pv_undef(), lit("[1,1,0]")), "UNDEFINED");
    expect_fmt(pv_elapsed(lit("[1,1,0]"), pv_undef()), "UNDEFINED");
    expect_fmt(pv_triple_part(pv_undef(), 'v'), "UNDEFINED");
    expect_fmt(pv_to_triple(pv_undef()), "UNDEFINED");
    expect_fmt(pv_map_single(pv_undef(), pv_num(1)), "UNDEFINED");
    expect_fmt(pv_map_apply(pv_undef(), pv_num(1)), "UNDEFINED");
    expect_fmt(pv_map_apply(lit("(1 -> 1)"), pv_undef()), "UNDEFINED");
    expect_fmt(pv_map_mapped(pv_undef(), pv_num(1)), "UNDEFINED");
    expect_fmt(pv_map_mapped(lit("(1 -> 1)"), pv_undef()), "UNDEFINED");
    expect_fmt(pv_map_set(pv_undef(), 1, lit("(2 -> 2)")), "UNDEFINED");
}

static void test_binop_spellings(void **state)
{
    (void)state;
    assert_string_equal(pv_binop_spelling[PV_OP_IDIV], "div");
    assert_string_equal(pv_binop_spelling[PV_OP_IMPLIES], "=>");
    assert_string_equal(pv_binop_spelling[PV_OP_LOG], "log");
    assert_string_equal(pv_aggop_spelling[PV_AGG_SUM], "+");
    assert_string_equal(pv_aggop_spelling[PV_AGG_COUNT], "count");
}

/* ---- unary operations and built-ins ---------------------------------------------- */

struct unary_case {
    const char *name;
    const char *fn;     /* neg not abs trunc triple v p m */
    const char *a, *want;
};

static const struct unary_case unary_cases[] = {
    {"neg number", "neg", "3", "-3"},
    {"neg triple swaps p and m", "neg", "[1,2,3]", "[-1,3,2]"},
    {"neg bool is ill-typed", "neg", "true", "UNDEFINED"},
    {"not", "not", "true", "false"},
    {"not number is ill-typed", "not", "1", "UNDEFINED"},
    {"abs number", "abs", "-3", "3"},
    {"abs positive triple", "abs", "[3,1,1]", "[3,1,1]"},
    {"abs negative triple", "abs", "[-3,1,1]", "[3,1,1]"},
    {"abs triple straddling, upper side wider", "abs", "[1,1,2]", "[1,1,1]"},
    {"abs triple straddling, lower side wider", "abs", "[-1,2,1]", "[1,1,1]"},
    {"abs triple touching 0 from above", "abs", "[2,0,2]", "[2,0,2]"},
    {"abs triple touching 0 from below", "abs", "[-2,2,0]", "[2,0,2]"},
    {"abs zero triple", "abs", "[0,0,0]", "[0,0,0]"},
    {"abs map is ill-typed", "abs", "(1 -> 1)", "UNDEFINED"},
    {"trunc positive", "trunc", "2.7", "2"},
    {"trunc negative toward zero", "trunc", "-2.7", "-2"},
    {"trunc small negative is 0", "trunc", "-0.5", "0"},
    {"trunc triple", "trunc", "[2.5,1,1]", "[2,1,1]"},
    {"trunc triple across zero", "trunc", "[0.5,0,1]", "[0,0,0]"},
    {"trunc negative triple", "trunc", "[-2.5,1,1]", "[-2,1,1]"},
    {"number to triple", "triple", "3", "[3,0,0]"},
    {"triple to triple", "triple", "[3,1,2]", "[3,1,2]"},
    {"bool to triple", "triple", "true", "UNDEFINED"},
    {"triple part v", "v", "[1,2,3]", "1"},
    {"triple part p", "p", "[1,2,3]", "2"},
    {"triple part m", "m", "[1,2,3]", "3"},
    {"number part v", "v", "5", "5"},
    {"number part p", "p", "5", "0"},
    {"part of bool", "v", "false", "UNDEFINED"},
};

static void run_unary_case(void **state)
{
    const struct unary_case *c = *state;
    pv a = lit(c->a), r;
    if (strcmp(c->fn, "neg") == 0)
        r = pv_neg(a);
    else if (strcmp(c->fn, "not") == 0)
        r = pv_not(a);
    else if (strcmp(c->fn, "abs") == 0)
        r = pv_abs(a);
    else if (strcmp(c->fn, "trunc") == 0)
        r = pv_trunc(a);
    else if (strcmp(c->fn, "triple") == 0)
        r = pv_to_triple(a);
    else
        r = pv_triple_part(a, c->fn[0]);
    expect_fmt(r, c->want);
}

static void test_triples_construction_and_elapsed(void **state)
{
    (void)state;
    expect_fmt(pv_triple_make(1, -1, 0), "UNDEFINED");
    expect_fmt(pv_triple_make(1, 0, -0.5), "UNDEFINED");
    expect_fmt(pv_triple_make(INFINITY, 0, 0), "UNDEFINED");
    expect_fmt(pv_triple_make(NAN, 0, 0), "UNDEFINED");
    expect_fmt(pv_triple_make(1, -0.0, 0), "[1,0,0]");
    expect_fmt(pv_timestamp(5), "[5,1,0]");
    expect_fmt(pv_timestamp(-3), "[-3,1,0]");
    expect_fmt(pv_triple_part(lit("[1,2,3]"), 'x'), "UNDEFINED");
    /* elapsed(e, s) = [e.v-s.v, e.p+s.m, min(e.v-s.v, e.m+s.p)] */
    expect_fmt(pv_elapsed(pv_timestamp(10), pv_timestamp(4)), "[6,1,1]");
    expect_fmt(pv_elapsed(pv_timestamp(5), pv_timestamp(5)), "[0,1,0]");
    expect_fmt(pv_elapsed(lit("[10,2,3]"), lit("[4,5,6]")), "[6,8,6]");
    /* Out-of-order timestamps would give a negative m: UNDEFINED. */
    expect_fmt(pv_elapsed(pv_timestamp(4), pv_timestamp(10)), "UNDEFINED");
    expect_fmt(pv_elapsed(pv_bool(true), pv_timestamp(1)), "UNDEFINED");
}

/* ---- number printing ------------------------------------------------------------ */

struct num_case {
    const char *name;
    double x;
    const char *text, *json;
};

static const struct num_case num_cases[] = {
    {"integer", 1024, "1024", "1024"},
    {"negative integer", -3, "-3", "-3"},
    {"zero", 0, "0", "0"},
    {"negative zero", -0.0, "0", "0"},
    {"largest plain integer", 999999999, "999999999", "999999999"},
    {"1e9 switches to exponent", 1e9, "1e9", "1000000000"},
    {"big integer 10 digits", 3641230271, "3.641230271e9", "3641230271"},
    {"big integer trailing zero dropped", 3645941630, "3.64594163e9", "3645941630"},
    {"big integer rounded", 1234567890123, "1.23456789e12", "1234567890123"},
    {"2^53", 9007199254740992.0, "9.007199255e15", "9007199254740992"},
    {"1e20", 1e20, "1e20", "1e+20"},
    {"fraction rounds half up", 191.48203125, "191.4820313", "191.48203125000001"},
    {"negative fraction", -191.48203125, "-191.4820313", "-191.48203125000001"},
    {"fraction rounded", 2563.0173759, "2563.017376", "2563.0173758999999"},
    {"decimal tie rounds up", 1.0000000005, "1.000000001", "1.0000000005"},
    {"small fraction", 0.04, "0.04", "0.040000000000000001"},
    {"0.1 + 0.2", 0.1 + 0.2, "0.3", "0.30000000000000004"},
    {"exponent -4 stays fixed", 0.0001, "0.0001", "0.0001"},
    {"exponent -5 switches", 0.00001, "1e-5", "1.0000000000000001e-05"},
    {"small exponent form", 1.5e-7, "1.5e-7", "1.4999999999999999e-07"},
    {"fixed with leading zeros", 0.000123456789012, "0.000123456789", "0.000123456789012"},
    {"fraction below 1e9", 123456789.5, "123456789.5", "123456789.5"},
    {"rounds up to next power of ten", 999999999.96, "1e9", "999999999.96000004"},
    {"rounds up to an integer", 99999.999999999, "100000", "99999.999999998996"},
    {"negative rounds up to power of ten", -9.99999999999, "-10", "-9.9999999999900009"},
    {"huge", 1e300, "1e300", "1.0000000000000001e+300"},
    {"largest double", DBL_MAX, "1.797693135e308", "1.7976931348623157e+308"},
    {"tiny", -1.5e-300, "-1.5e-300", "-1.5000000000000001e-300"},
    {"smallest normal", DBL_MIN, "2.225073859e-308", "2.2250738585072014e-308"},
    {"smallest subnormal", 5e-324, "5e-324", "4.9406564584124654e-324"},
    {"infinity", INFINITY, "UNDEFINED", "null"},
    {"minus infinity", -INFINITY, "UNDEFINED", "null"},
    {"nan", NAN, "UNDEFINED", "null"},
};

static void run_num_case(void **state)
{
    const struct num_case *c = *state;
    ps_buf b = {0};
    pv_format_number(&b, c->x);
    assert_string_equal(ps_buf_str(&b), c->text);
    ps_buf_reset(&b);
    pv v = {.kind = PV_NUM, .num = c->x};
    pv_format_json(&b, &v);
    assert_string_equal(ps_buf_str(&b), c->json);
    /* JSON numbers read back exactly. */
    if (isfinite(c->x))
        assert_true(strtod(ps_buf_str(&b), NULL) == c->x);
    ps_buf_free(&b);
}

/* ---- value printing and JSON ------------------------------------------------------ */

struct fmt_case {
    const char *name;
    const char *value;  /* in the notation of lit() */
    const char *text, *json;
};

static const struct fmt_case fmt_cases[] = {
    {"triple", "[606.2,0.04,0.04]", "[606.2,0.04,0.04]",
     "[606.20000000000005,0.040000000000000001,0.040000000000000001]"},
    {"negative triple", "[-1.5,0,2]", "[-1.5,0,2]", "[-1.5,0,2]"},
    {"booleans", "true", "true", "true"},
    {"undefined", "U", "UNDEFINED", "null"},
    {"empty map", "()", "()", "{}"},
    {"map sorted by key", "(2 -> [1,0,0], 1 -> 100)", "(1 -> 100, 2 -> [1,0,0])",
     "{\"1\":100,\"2\":[1,0,0]}"},
    {"nested map", "(1 -> (2 -> 3))", "(1 -> (2 -> 3))", "{\"1\":{\"2\":3}}"},
    {"map with undefined and bool", "(-1 -> U, 0 -> false)", "(-1 -> UNDEFINED, 0 -> false)",
     "{\"-1\":null,\"0\":false}"},
    {"map with big keys exact in json", "(12345678901 -> 1, 12345678902 -> 2)",
     "(1.23456789e10 -> 1, 1.23456789e10 -> 2)", "{\"12345678901\":1,\"12345678902\":2}"},
};

static void run_fmt_case(void **state)
{
    const struct fmt_case *c = *state;
    expect_fmt(lit(c->value), c->text);
    expect_json(lit(c->value), c->json);
}

static void test_format_strings(void **state)
{
    (void)state;
    expect_fmt(pv_str("plain \"raw\" text"), "plain \"raw\" text");
    expect_fmt(pv_map_single(pv_num(1), pv_str("a\"b\\c\n\t\x01")),
               "(1 -> \"a\\\"b\\\\c\\n\\t\\001\")");
    expect_json(pv_str("a\"b\\c\n\t\x01\xff"), "\"a\\\"b\\\\c\\n\\t\\u0001\\u00ff\"");
    /* UTF-8 text (a label "≤ 1 s", a path) stays itself; broken or
     * overlong sequences and DEL are escaped byte by byte. */
    expect_json(pv_str("\xc3\xa9 \xe2\x89\xa4 \xf0\x9f\x98\x80"), "\"\xc3\xa9 \xe2\x89\xa4 \xf0\x9f\x98\x80\"");
    expect_json(pv_str("\xc3x\xc0\xaf\xed\xa0\x80\x7f"),
                "\"\\u00c3x\\u00c0\\u00af\\u00ed\\u00a0\\u0080\\u007f\"");
    expect_json(pv_str("\xe2\x89"), "\"\\u00e2\\u0089\"");
    expect_json(pv_map_single(pv_num(7), pv_str("x")), "{\"7\":\"x\"}");
    ps_buf b = {0};
    pv_json_string(&b, NULL);
    assert_string_equal(ps_buf_str(&b), "null");
    ps_buf_free(&b);
}

static void test_events_and_intervals(void **state)
{
    (void)state;
    static const struct test_type call = {"call@read", 0}, intv = {"intv@read", 1};
    pv_event *s = pv_event_new(&call, 2);
    assert_int_equal(s->refs, 1);
    assert_false(pv_attr_defined(s->attr[0]));
    assert_false(pv_attr_defined(s->attr[1]));
    s->pos = 12;
    s->timed = true;
    s->ts = 4096;
    s->attr[0] = 3;
    pv_event *e = pv_event_new(&call, 0);
    e->pos = 12;
    e->sub = 2;                 /* fabricated after record 12 */
    pv ev = pv_event_val(s);
    pv ev2 = pv_copy(ev);       /* the interval's start reference */
    expect_fmt(pv_copy(ev), "<call@read 12.0>");
    expect_json(pv_copy(ev), "{\"type\":\"call@read\",\"pos\":\"12.0\",\"ts\":4096}");
    expect_fmt(pv_event_val(e), "<call@read 12.2>");
    pv_event *untyped = pv_event_new(NULL, 0);
    expect_json(pv_event_val(untyped), "{\"type\":\"?\",\"pos\":\"0.0\",\"ts\":null}");

    pv_interval *iv = pv_interval_new(&intv, 2);
    assert_int_equal(iv->metric[0].kind, PV_UNDEF);
    iv->uid = 7;
    iv->start = ev2.ev;
    iv->end = pv_event_new(&call, 0);
    iv->metric[1] = lit("(1 -> 2)");
    pv i = pv_interval_val(iv);
    expect_fmt(pv_copy(i), "<intv@read #7>");
    expect_json(pv_copy(i), "{\"type\":\"intv@read\",\"uid\":7}");
    /* A mapping holding an interval: printing and releasing go through it. */
    expect_fmt(pv_map_single(pv_num(1), i), "(1 -> <intv@read #7>)");
    assert_true(pv_identical(&ev, &ev));
    pv_free(ev);
    pv_event_release(NULL);
    pv_interval_release(NULL);
    expect_fmt(pv_event_val(NULL), "UNDEFINED");
}

/* ---- aggregates -------------------------------------------------------------------- */

struct agg_case {
    const char *name;
    pv_aggop op;
    int depth;
    const char *elems;  /* values separated by ';'; "POISON" poisons instead */
    const char *want;
};

static const struct agg_case agg_cases[] = {
    /* Figure 10: empty sequences */
    {"sum empty", PV_AGG_SUM, 0, "", "0"},
    {"sum empty over mappings", PV_AGG_SUM, 1, "", "()"},
    {"prod empty", PV_AGG_PROD, 0, "", "1"},
    {"prod empty over mappings", PV_AGG_PROD, 1, "", "()"},
    {"all empty", PV_AGG_ALL, 0, "", "true"},
    {"any empty", PV_AGG_ANY, 0, "", "false"},
    {"count empty", PV_AGG_COUNT, 0, "", "0"},
    {"min empty", PV_AGG_MIN, 0, "", "UNDEFINED"},
    {"max empty over mappings", PV_AGG_MAX, 1, "", "()"},          /* A.9.13: union of no domains */
    {"mean empty over mappings", PV_AGG_MEAN, 1, "", "()"},
    {"the empty over mappings", PV_AGG_THE, 1, "", "()"},
    {"mean empty", PV_AGG_MEAN, 0, "", "UNDEFINED"},
    {"the empty", PV_AGG_THE, 0, "", "UNDEFINED"},
    {"first empty", PV_AGG_FIRST, 0, "", "UNDEFINED"},
    {"last empty", PV_AGG_LAST, 0, "", "UNDEFINED"},
    {"stdev empty", PV_AGG_STDEV, 0, "", "UNDEFINED"},
    {"var empty", PV_AGG_VAR, 0, "", "UNDEFINED"},
    /* Figure 10: single elements */
    {"sum one", PV_AGG_SUM, 0, "7", "7"},
    {"prod one", PV_AGG_PROD, 0, "7", "7"},
    {"all one", PV_AGG_ALL, 0, "false", "false"},
    {"any one", PV_AGG_ANY, 0, "true", "true"},
    {"min one triple", PV_AGG_MIN, 0, "[1,2,3]", "[1,2,3]"},
    {"max one", PV_AGG_MAX, 0, "7", "7"},
    {"mean one", PV_AGG_MEAN, 0, "7", "7"},
    {"the one", PV_AGG_THE, 0, "7", "7"},
    {"first one", PV_AGG_FIRST, 0, "7", "7"},
    {"last one", PV_AGG_LAST, 0, "7", "7"},
    {"count one", PV_AGG_COUNT, 0, "7", "1"},
    {"stdev one", PV_AGG_STDEV, 0, "7", "UNDEFINED"},
    {"var one", PV_AGG_VAR, 0, "7", "UNDEFINED"},
    /* many elements */
    {"sum many", PV_AGG_SUM, 0, "1; 2; 3", "6"},
    {"sum triples", PV_AGG_SUM, 0, "[1,1,0]; [2,0,1]; 3", "[6,1,1]"},
    {"prod many", PV_AGG_PROD, 0, "2; 3; 4", "24"},
    {"all many", PV_AGG_ALL, 0, "true; false; true", "false"},
    {"any many", PV_AGG_ANY, 0, "false; false; true", "true"},
    {"min many", PV_AGG_MIN, 0, "3; -1; 2", "-1"},
    {"max triples", PV_AGG_MAX, 0, "[1,2,0]; [2,0,1]", "[2,1,1]"},
    {"mean many", PV_AGG_MEAN, 0, "1; 2; 3; 4", "2.5"},
    {"mean of triples uses favoured values", PV_AGG_MEAN, 0, "[1,1,1]; [3,0,0]", "2"},
    {"var many", PV_AGG_VAR, 0, "1; 2; 3; 4", "1.666666667"},
    {"stdev many", PV_AGG_STDEV, 0, "1; 2; 3; 4", "1.290994449"},
    {"stdev constant is 0", PV_AGG_STDEV, 0, "5; 5; 5", "0"},
    {"var of triples", PV_AGG_VAR, 0, "[1,9,9]; [3,0,0]", "2"},
    {"the two", PV_AGG_THE, 0, "7; 7", "UNDEFINED"},
    {"first many", PV_AGG_FIRST, 0, "1; 2; 3", "1"},
    {"last many", PV_AGG_LAST, 0, "1; 2; 3", "3"},
    {"count many", PV_AGG_COUNT, 0, "1; 2; 3", "3"},
    /* UNDEFINED elements */
    {"sum undefined element", PV_AGG_SUM, 0, "1; U; 2", "UNDEFINED"},
    {"prod undefined element", PV_AGG_PROD, 0, "U; 2", "UNDEFINED"},
    {"all undefined element", PV_AGG_ALL, 0, "false; U", "UNDEFINED"},
    {"any undefined element", PV_AGG_ANY, 0, "true; U; true", "UNDEFINED"},
    {"min undefined element", PV_AGG_MIN, 0, "1; U", "UNDEFINED"},
    {"max undefined element", PV_AGG_MAX, 0, "U", "UNDEFINED"},
    {"mean undefined element", PV_AGG_MEAN, 0, "1; U; 3", "UNDEFINED"},
    {"stdev undefined element", PV_AGG_STDEV, 0, "1; 2; U", "UNDEFINED"},
    {"var undefined element", PV_AGG_VAR, 0, "U; 1; 2", "UNDEFINED"},
    {"the undefined element", PV_AGG_THE, 0, "U", "UNDEFINED"},
    {"first undefined element", PV_AGG_FIRST, 0, "U; 2", "UNDEFINED"},
    {"first then undefined", PV_AGG_FIRST, 0, "1; U", "1"},
    {"last undefined element", PV_AGG_LAST, 0, "1; U", "UNDEFINED"},
    {"last after undefined", PV_AGG_LAST, 0, "U; 2", "2"},
    {"count counts undefined", PV_AGG_COUNT, 0, "1; U; 2", "3"},
    {"mean of booleans is ill-typed", PV_AGG_MEAN, 0, "true", "UNDEFINED"},
    /* a where-clause evaluated to UNDEFINED */
    {"sum poisoned", PV_AGG_SUM, 0, "1; POISON; 2", "UNDEFINED"},
    {"count poisoned", PV_AGG_COUNT, 0, "1; POISON", "UNDEFINED"},
    {"first poisoned", PV_AGG_FIRST, 0, "1; POISON", "UNDEFINED"},
    {"mean over maps poisoned", PV_AGG_MEAN, 1, "(1 -> 1); POISON", "UNDEFINED"},
    /* mappings: per key, in sequence order */
    {"sum over maps", PV_AGG_SUM, 1, "(1 -> 1); (1 -> 1, 2 -> 5)", "(1 -> 2, 2 -> 5)"},
    {"prod over maps", PV_AGG_PROD, 1, "(1 -> 2); (1 -> 3, 2 -> 5)", "(1 -> 6, 2 -> 5)"},
    {"all over maps", PV_AGG_ALL, 1, "(1 -> true); (1 -> false)", "(1 -> false)"},
    {"min over maps", PV_AGG_MIN, 1, "(1 -> 4, 2 -> 1); (1 -> 3)", "(1 -> 3, 2 -> 1)"},
    {"mean over maps (thesis example)", PV_AGG_MEAN, 1, "(1 -> 100, 2 -> 200); (1 -> 200, 3 -> 100)",
     "(1 -> 150, 2 -> 200, 3 -> 100)"},
    {"stdev over maps", PV_AGG_STDEV, 1, "(1 -> 1); (1 -> 3, 2 -> 5)",
     "(1 -> 1.414213562, 2 -> UNDEFINED)"},
    {"var over maps of triples", PV_AGG_VAR, 1, "(1 -> [1,1,1]); (1 -> [3,0,0])", "(1 -> 2)"},
    {"the over maps, disjoint keys", PV_AGG_THE, 1, "(1 -> 1); (2 -> 2)", "(1 -> 1, 2 -> 2)"},
    {"the over maps, repeated key", PV_AGG_THE, 1, "(1 -> 1, 2 -> 2); (1 -> 1)",
     "(1 -> UNDEFINED, 2 -> 2)"},
    {"first over maps", PV_AGG_FIRST, 1, "(1 -> 1); (1 -> 2, 2 -> 3)", "(1 -> 1, 2 -> 3)"},
    {"last over maps", PV_AGG_LAST, 1, "(1 -> 1); (1 -> 2, 2 -> 3); (2 -> 4)", "(1 -> 2, 2 -> 4)"},
    {"count over maps", PV_AGG_COUNT, 1, "(1 -> 1); (2 -> 2)", "2"},
    {"sum over nested maps", PV_AGG_SUM, 2, "(1 -> (2 -> 1)); (1 -> (2 -> 2, 3 -> 1))",
     "(1 -> (2 -> 3, 3 -> 1))"},
    {"mean over nested maps", PV_AGG_MEAN, 2, "(1 -> (2 -> 1)); (1 -> (2 -> 3), 4 -> (4 -> 4))",
     "(1 -> (2 -> 2), 4 -> (4 -> 4))"},
    {"sum over maps with undefined value", PV_AGG_SUM, 1, "(1 -> U); (1 -> 2, 2 -> 3)",
     "(1 -> UNDEFINED, 2 -> 3)"},
    {"mean over maps with undefined value", PV_AGG_MEAN, 1, "(1 -> U, 2 -> 1); (1 -> 2)",
     "(1 -> UNDEFINED, 2 -> 1)"},
    {"first over maps keeps undefined value", PV_AGG_FIRST, 1, "(1 -> U); (1 -> 2)",
     "(1 -> UNDEFINED)"},
    {"sum over maps, undefined element", PV_AGG_SUM, 1, "(1 -> 1); U; (1 -> 1)", "UNDEFINED"},
    {"mean over maps, undefined element", PV_AGG_MEAN, 1, "(1 -> 1); U", "UNDEFINED"},
    {"first over maps, undefined first", PV_AGG_FIRST, 1, "U; (1 -> 2)", "UNDEFINED"},
    {"last over maps, undefined last", PV_AGG_LAST, 1, "(1 -> 2); U", "UNDEFINED"},
    {"last over maps, undefined before", PV_AGG_LAST, 1, "U; (1 -> 2)", "(1 -> 2)"},
    {"mean over empty maps", PV_AGG_MEAN, 1, "(); ()", "()"},
};

/* Feed c->elems to a, one element at a time. */
static void feed(pv_acc *a, const char *elems)
{
    const char *p = elems;
    skip_ws(&p);
    while (*p) {
        if (strncmp(p, "POISON", 6) == 0) {
            pv_acc_poison(a);
            p += 6;
        } else {
            pv_acc_add(a, parse_value(&p));
        }
        skip_ws(&p);
        if (*p == ';')
            p++;
        skip_ws(&p);
    }
}

static void run_agg_case(void **state)
{
    const struct agg_case *c = *state;
    pv_acc *a = pv_acc_new(c->op, c->depth);
    feed(a, c->elems);
    expect_fmt(pv_acc_result(a), c->want);
    /* Reading the result leaves the accumulator as it was. */
    expect_fmt(pv_acc_result(a), c->want);
    /* After a reset it behaves like a new one. */
    pv_acc_reset(a);
    assert_int_equal(pv_acc_count(a), 0);
    pv_acc *fresh = pv_acc_new(c->op, c->depth);
    feed(a, c->elems);
    feed(fresh, c->elems);
    pv r1 = pv_acc_result(a), r2 = pv_acc_result(fresh);
    assert_true(pv_identical(&r1, &r2));
    pv_free(r1);
    pv_free(r2);
    pv_acc_free(fresh);
    pv_acc_free(a);
}

static void test_acc_incremental(void **state)
{
    (void)state;
    pv_acc *a = pv_acc_new(PV_AGG_SUM, 1);
    pv_acc_add(a, lit("(1 -> 1)"));
    pv first = pv_acc_result(a);
    pv_acc_add(a, lit("(1 -> 1, 2 -> 1)"));
    /* The result handed out earlier is not changed by later elements. */
    expect_fmt(first, "(1 -> 1)");
    expect_fmt(pv_acc_result(a), "(1 -> 2, 2 -> 1)");
    assert_int_equal(pv_acc_count(a), 2);
    pv_acc_free(a);
    pv_acc_free(NULL);

    /* A shared element (a constant mapping) is never modified. */
    pv konst = lit("(1 -> 10)");
    a = pv_acc_new(PV_AGG_SUM, 1);
    pv_acc_add(a, pv_copy(konst));
    pv_acc_add(a, pv_copy(konst));
    pv_acc_add(a, pv_copy(konst));
    expect_fmt(pv_acc_result(a), "(1 -> 30)");
    expect_fmt(konst, "(1 -> 10)");
    pv_acc_free(a);

    /* Welford stays accurate around a large offset. */
    a = pv_acc_new(PV_AGG_VAR, 0);
    for (int i = 0; i < 1000; i++)
        pv_acc_add(a, pv_num(1e9 + (i % 2)));
    pv v = pv_acc_result(a);
    assert_int_equal(v.kind, PV_NUM);
    assert_true(fabs(v.num - 0.25025025025025) < 1e-9);
    pv_acc_free(a);

    /* The histogram of the report: {+ x : T : k -> 1}. */
    a = pv_acc_new(PV_AGG_SUM, 1);
    for (int i = 0; i < 200000; i++)
        pv_acc_add(a, pv_map_single(pv_num(i % 1000), pv_num(1)));
    pv h = pv_acc_result(a);
    assert_int_equal(pv_map_count(&h), 1000);
    for (int k = 0; k < 1000; k++) {
        const pv *n = pv_map_lookup(&h, k);
        assert_non_null(n);
        assert_true(n->kind == PV_NUM && n->num == 200);
    }
    pv_free(h);
    pv_acc_free(a);
}

/* ---- mappings ----------------------------------------------------------------------- */

static void test_map_construction(void **state)
{
    (void)state;
    expect_fmt(pv_map_single(pv_num(3), pv_num(4)), "(3 -> 4)");
    expect_fmt(pv_map_single(pv_num(-0.0), pv_num(4)), "(0 -> 4)");
    expect_fmt(pv_map_single(pv_num(1.5), pv_num(4)), "UNDEFINED");
    expect_fmt(pv_map_single(pv_num(INFINITY), pv_num(4)), "UNDEFINED");
    expect_fmt(pv_map_single(lit("[4,1,1]"), pv_num(4)), "(4 -> 4)");
    expect_fmt(pv_map_single(lit("[4.5,1,1]"), pv_num(4)), "UNDEFINED");
    expect_fmt(pv_map_single(pv_bool(true), pv_num(4)), "UNDEFINED");
    expect_fmt(pv_map_single(pv_num(1), pv_undef()), "(1 -> UNDEFINED)");
    /* The value is consumed even when the key is bad. */
    expect_fmt(pv_map_single(pv_num(0.5), lit("(1 -> 2)")), "UNDEFINED");
    expect_fmt(pv_map_single(pv_num(1), lit("(2 -> (3 -> 4))")), "(1 -> (2 -> (3 -> 4)))");
    expect_fmt(pv_map_set(lit("(1 -> 1)"), 1.5, pv_num(2)), "UNDEFINED");
    expect_fmt(pv_map_set(lit("(1 -> 1)"), -0.0, pv_num(2)), "(0 -> 2, 1 -> 1)");
    expect_fmt(pv_map_set(lit("(1 -> 1)"), 1, pv_num(2)), "(1 -> 2)");
    expect_fmt(pv_map_set(pv_num(1), 1, lit("(1 -> 1)")), "UNDEFINED");
}

static void test_map_apply_and_mapped(void **state)
{
    (void)state;
    pv m = lit("(1 -> 10, 0 -> (5 -> 6), -4 -> U)");
    expect_fmt(pv_map_apply(pv_copy(m), pv_num(1)), "10");
    expect_fmt(pv_map_apply(pv_copy(m), pv_num(-0.0)), "(5 -> 6)");
    expect_fmt(pv_map_apply(pv_copy(m), lit("[1,3,3]")), "10");
    expect_fmt(pv_map_apply(pv_copy(m), pv_num(2)), "UNDEFINED");
    expect_fmt(pv_map_apply(pv_copy(m), pv_num(1.25)), "UNDEFINED");
    expect_fmt(pv_map_apply(pv_copy(m), pv_num(-4)), "UNDEFINED");
    expect_fmt(pv_map_apply(pv_num(1), pv_num(1)), "UNDEFINED");
    expect_fmt(pv_map_mapped(pv_copy(m), pv_num(1)), "true");
    expect_fmt(pv_map_mapped(pv_copy(m), pv_num(-4)), "true");
    expect_fmt(pv_map_mapped(pv_copy(m), pv_num(2)), "false");
    expect_fmt(pv_map_mapped(pv_copy(m), pv_num(1.25)), "UNDEFINED");
    assert_int_equal(pv_map_count(&m), 3);
    pv num = pv_num(1);
    assert_int_equal(pv_map_count(&num), 0);
    assert_null(pv_map_lookup(&num, 1));
    assert_null(pv_map_lookup(&m, 7));
    assert_int_equal(pv_map_lookup(&m, -0.0)->kind, PV_MAP);
    double *keys;
    assert_int_equal(pv_map_keys_sorted(&m, &keys), 3);
    assert_true(keys[0] == -4 && keys[1] == 0 && keys[2] == 1);
    free(keys);
    pv e = pv_map_empty();
    assert_int_equal(pv_map_keys_sorted(&e, &keys), 0);
    free(keys);
    pv_free(e);
    /* The mapping survives all the borrowed copies above. */
    expect_fmt(m, "(-4 -> UNDEFINED, 0 -> (5 -> 6), 1 -> 10)");
}

static void test_map_in_place_and_shared(void **state)
{
    (void)state;
    /* Unshared left operand: updated in place. */
    pv m = lit("(1 -> 1)");
    pv_map *before = m.map;
    m = pv_binary(PV_OP_ADD, m, pv_map_single(pv_num(1), pv_num(1)));
    assert_ptr_equal(m.map, before);
    m = pv_map_set(m, 2, pv_num(5));
    assert_ptr_equal(m.map, before);

    /* Shared left operand: copied; the other holder sees no change. */
    pv keep = pv_copy(m);
    pv r = pv_binary(PV_OP_ADD, m, lit("(1 -> 10, 3 -> 3)"));
    assert_ptr_not_equal(r.map, keep.map);
    expect_fmt(r, "(1 -> 12, 2 -> 5, 3 -> 3)");
    expect_fmt(pv_copy(keep), "(1 -> 2, 2 -> 5)");

    /* Shared left, unshared right: the right one is reused, order kept. */
    pv right = lit("(1 -> 1)");
    before = right.map;
    r = pv_binary(PV_OP_MIN, pv_copy(keep), right);
    assert_ptr_equal(r.map, before);
    expect_fmt(r, "(1 -> 1, 2 -> 5)");
    expect_fmt(pv_copy(keep), "(1 -> 2, 2 -> 5)");

    /* pv_map_set on a shared mapping. */
    r = pv_map_set(pv_copy(keep), 1, pv_num(0));
    expect_fmt(r, "(1 -> 0, 2 -> 5)");
    expect_fmt(pv_copy(keep), "(1 -> 2, 2 -> 5)");

    /* Nested: a shared inner mapping is copied, not modified. */
    pv inner = lit("(7 -> 1)");
    pv outer = pv_map_single(pv_num(1), pv_copy(inner));
    outer = pv_binary(PV_OP_ADD, outer, lit("(1 -> (7 -> 1, 8 -> 1))"));
    expect_fmt(outer, "(1 -> (7 -> 2, 8 -> 1))");
    expect_fmt(inner, "(7 -> 1)");

    /* The same mapping on both sides. */
    r = pv_binary(PV_OP_ADD, pv_copy(keep), pv_copy(keep));
    expect_fmt(r, "(1 -> 4, 2 -> 10)");
    expect_fmt(pv_copy(keep), "(1 -> 2, 2 -> 5)");
    r = pv_binary(PV_OP_MUL, pv_copy(keep), keep);      /* last reference */
    expect_fmt(r, "(1 -> 4, 2 -> 25)");
}

static void test_map_large(void **state)
{
    (void)state;
    enum { N = 20000 };
    pv m = pv_map_empty();
    /* Scrambled keys, negative and positive, beyond the linear-search size. */
    for (int i = 0; i < N; i++) {
        double k = (double)((i * 7919) % N) - N / 2;
        m = pv_map_set(m, k, pv_num(k * 2));
    }
    assert_int_equal(pv_map_count(&m), N);
    for (int k = -N / 2; k < N / 2; k++) {
        const pv *v = pv_map_lookup(&m, k);
        assert_non_null(v);
        assert_true(v->num == k * 2.0);
    }
    assert_null(pv_map_lookup(&m, N));
    double *keys;
    assert_int_equal(pv_map_keys_sorted(&m, &keys), N);
    for (int i = 0; i < N; i++)
        assert_true(keys[i] == i - N / 2);
    free(keys);
    /* Huge integral keys are fine too. */
    m = pv_map_set(m, 1e300, pv_num(1));
    m = pv_map_set(m, -9007199254740993.0, pv_num(1));
    assert_int_equal(pv_map_count(&m), N + 2);

    pv keep = pv_copy(m);
    pv sum = pv_binary(PV_OP_ADD, m, pv_copy(keep));
    assert_true(pv_map_lookup(&sum, 123)->num == 492);
    assert_true(pv_map_lookup(&keep, 123)->num == 246);
    assert_false(pv_identical(&sum, &keep));
    for (int k = -N / 2; k < N / 2; k++)
        assert_true(pv_map_lookup(&sum, k)->num == k * 4.0);
    assert_true(pv_map_lookup(&sum, 1e300)->num == 2);
    /* Multiplying by a one-key mapping changes only that key. */
    pv prod = pv_binary(PV_OP_MUL, pv_copy(keep), lit("(123 -> 2)"));
    assert_true(pv_map_lookup(&prod, 123)->num == 492);
    assert_true(pv_map_lookup(&prod, 124)->num == 248);
    assert_int_equal(pv_map_count(&prod), N + 2);
    pv_free(prod);
    pv_free(sum);
    pv_free(keep);
}

static void test_identical(void **state)
{
    (void)state;
    const char *vals[] = {"U", "1", "2", "true", "false", "[1,2,3]", "[1,2,4]", "()",
                          "(1 -> 1)", "(1 -> 2)", "(2 -> 1)", "(1 -> 1, 2 -> 1)",
                          "(1 -> (1 -> 1))", "(1 -> U)"};
    for (size_t i = 0; i < PS_ARRAY_LEN(vals); i++) {
        for (size_t j = 0; j < PS_ARRAY_LEN(vals); j++) {
            pv a = lit(vals[i]), b = lit(vals[j]);
            assert_int_equal(pv_identical(&a, &b), i == j);
            pv_free(a);
            pv_free(b);
        }
    }
    pv a = lit("(2 -> 2, 1 -> 1)"), b = lit("(1 -> 1, 2 -> 2)");
    assert_true(pv_identical(&a, &b));     /* insertion order does not matter */
    pv_free(a);
    pv_free(b);
    char s1[] = "abc", s2[] = "abc";
    pv x = pv_str(s1), y = pv_str(s2);
    assert_true(pv_identical(&x, &y));
    char *t = fmt_borrowed(&x);
    assert_string_equal(t, "abc");
    free(t);
}

/* Every JSON text we produce parses, checked by python3's json module. */
static void test_json_is_valid(void **state)
{
    (void)state;
    ps_buf all = {0};
    const char *vals[] = {"U", "-0", "0.1", "1e300", "-1e-300", "[1.5,0,2]", "()",
                          "(1 -> (2 -> [1,2,3]), -5 -> U, 1e15 -> 1e20, 3 -> true)"};
    for (size_t i = 0; i < PS_ARRAY_LEN(vals); i++) {
        pv v = lit(vals[i]);
        pv_format_json(&all, &v);
        ps_buf_putc(&all, '\n');
        pv_free(v);
    }
    double odd[] = {INFINITY, -INFINITY, NAN, DBL_MAX, -DBL_MAX, DBL_MIN, 5e-324,
                    9007199254740993.0, -9007199254740992.0, 1e-7};
    for (size_t i = 0; i < PS_ARRAY_LEN(odd); i++) {
        pv v = {.kind = PV_NUM, .num = odd[i]};
        pv_format_json(&all, &v);
        ps_buf_putc(&all, '\n');
        v = (pv){.kind = PV_TRIPLE, .t = {odd[i], odd[i], 0}};
        pv_format_json(&all, &v);
        ps_buf_putc(&all, '\n');
    }
    char weird[256];
    for (int i = 1; i < 256; i++)
        weird[i - 1] = (char)i;
    weird[255] = '\0';
    pv_json_string(&all, weird);
    ps_buf_putc(&all, '\n');

    FILE *py = popen("python3 -c 'import json,sys\n"
                     "for l in sys.stdin: json.loads(l, parse_constant=lambda c: 1/0)' "
                     "2>/dev/null", "w");
    if (!py) {
        ps_buf_free(&all);
        CMON_SKIP("cannot run python3");
    }
    fwrite(all.data, 1, all.len, py);
    int status = pclose(py);
    ps_buf_free(&all);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        CMON_SKIP("no python3 here");
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- main: one named test per table row -------------------------------------------- */

#define TABLE_TESTS(tests, n, table, runner, prefix)                                       \
    for (size_t i_ = 0; i_ < PS_ARRAY_LEN(table); i_++, (n)++) {                           \
        (tests)[n] = (struct CMUnitTest){                                                 \
            .name = ps_asprintf("%s: %s", prefix, (table)[i_].name),                       \
            .test_func = runner,                                                           \
            .initial_state = (void *)&(table)[i_],                                         \
        };                                                                                 \
    }

int main(void)
{
    static const struct CMUnitTest plain[] = {
        cmocka_unit_test(test_undefined_propagates_through_every_op),
        cmocka_unit_test(test_binop_spellings),
        cmocka_unit_test(test_triples_construction_and_elapsed),
        cmocka_unit_test(test_format_strings),
        cmocka_unit_test(test_events_and_intervals),
        cmocka_unit_test(test_acc_incremental),
        cmocka_unit_test(test_map_construction),
        cmocka_unit_test(test_map_apply_and_mapped),
        cmocka_unit_test(test_map_in_place_and_shared),
        cmocka_unit_test(test_map_large),
        cmocka_unit_test(test_identical),
        cmocka_unit_test(test_json_is_valid),
    };
    size_t cap = PS_ARRAY_LEN(binop_cases) + PS_ARRAY_LEN(unary_cases) + PS_ARRAY_LEN(num_cases) +
                 PS_ARRAY_LEN(fmt_cases) + PS_ARRAY_LEN(agg_cases);
    struct CMUnitTest *tests = ps_calloc(cap, sizeof(*tests));
    size_t n = 0;
    TABLE_TESTS(tests, n, binop_cases, run_binop_case, "binop");
    TABLE_TESTS(tests, n, unary_cases, run_unary_case, "unary");
    TABLE_TESTS(tests, n, num_cases, run_num_case, "number");
    TABLE_TESTS(tests, n, fmt_cases, run_fmt_case, "format");
    TABLE_TESTS(tests, n, agg_cases, run_agg_case, "aggregate");

    int failed = cmocka_run_group_tests_name("value", plain, NULL, NULL);
    failed += _cmocka_run_group_tests("value tables", tests, n, NULL, NULL);
    for (size_t i = 0; i < n; i++)
        free((char *)tests[i].name);
    free(tests);
    return cmon_tests_done(failed ? 1 : 0);
}
