/* test_lex — the PSpec lexer (lex.c): every keyword and punctuation mark from
 * the X-macro lists, numbers, names with '@', strings, symbols, errors and
 * positions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lex.h"

static ps_token one(const char *src)
{
    ps_lexer lx;
    ps_lex_init(&lx, src);
    return ps_lex_next(&lx);
}

static void every_keyword_and_mark(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        ps_tok k;
    } all[] = {
#define X(name, spelling) {spelling, TK_##name},
        PS_KEYWORDS(X) PS_PUNCT(X)
#undef X
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        ps_token t = one(all[i].s);
        assert_int_equal(t.kind, all[i].k);
        assert_int_equal(t.len, strlen(all[i].s));
        assert_non_null(strstr(ps_tok_describe(t.kind), all[i].s));
    }
}

static void numbers(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        double v;
        uint32_t len;
    } cases[] = {
        {"42", 42, 2},        {"1.5", 1.5, 3},      {"2.5e-3", 2.5e-3, 6}, {"1.5D2", 150, 5},
        {"3x2", 300, 3},      {"1e9", 1e9, 3},      {"7E+1", 70, 4},       {"10ms", 10, 2},
        {"1day", 1, 1},       {"5.", 5, 1},         {"0.25", 0.25, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ps_token t = one(cases[i].s);
        assert_int_equal(t.kind, TK_NUMBER);
        assert_true(t.num == cases[i].v);
        assert_int_equal(t.len, cases[i].len);
    }
}

static void names(void **state)
{
    (void)state;
    static const char *ok[] = {"x", "_a1", "call@Foo_Bar", "ret@f", "intv@p", "logstart@", "gap@", "metricsX"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        ps_token t = one(ok[i]);
        assert_int_equal(t.kind, TK_IDENT);
        assert_int_equal(t.len, strlen(ok[i]));
    }
    /* Keywords are whole words only. */
    assert_int_equal(one("ender").kind, TK_IDENT);
    assert_int_equal(one("end").kind, TK_END);
}

static void strings(void **state)
{
    (void)state;
    ps_token t = one("\"a\\tb\\\"c\\101\\\\\"");
    assert_int_equal(t.kind, TK_STRING);
    char buf[64];
    const char *bad = NULL;
    int n = ps_lex_unescape(&t, buf, &bad);
    assert_int_equal(n, 7);
    assert_memory_equal(buf, "a\tb\"cA\\", 7);
    t = one("\"bad \\q\"");
    assert_int_equal(ps_lex_unescape(&t, buf, &bad), -1);
    assert_int_equal(*bad, '\\');
    assert_int_equal(one("\"open").kind, TK_ERROR);
    assert_int_equal(one("\"line\nbreak\"").kind, TK_ERROR);
    t = one("\"\\000\"");
    assert_int_equal(ps_lex_unescape(&t, buf, &bad), -1);  /* NUL is refused */
}

static void symbols_and_errors(void **state)
{
    (void)state;
    assert_int_equal(one("\xe2\x89\xa4").kind, TK_LE);      /* ≤ */
    assert_int_equal(one("\xe2\x89\xa5").kind, TK_GE);      /* ≥ */
    assert_int_equal(one("\xe2\x89\xa0").kind, TK_NE);      /* ≠ */
    assert_int_equal(one("\xe2\x86\x92").kind, TK_ARROW);   /* → */
    assert_int_equal(one("\xe2\x9f\xb6").kind, TK_ARROW);   /* ⟶ */
    assert_int_equal(one("\xe2\x87\x92").kind, TK_IMPLIES); /* ⇒ */
    assert_int_equal(one("\xc3\x97").kind, TK_STAR);        /* × */
    ps_token t = one("$");
    assert_int_equal(t.kind, TK_ERROR);
    assert_string_equal(t.msg, "unexpected character");
    t = one("\xc3\xa9");                                    /* é: one error token for the whole character */
    assert_int_equal(t.kind, TK_ERROR);
    assert_int_equal(t.len, 2);
}

static void positions_and_comments(void **state)
{
    (void)state;
    ps_lexer lx;
    ps_lex_init(&lx, "% a comment\n  def x = 1; % more\n\tend");
    ps_token t = ps_lex_next(&lx);
    assert_int_equal(t.kind, TK_DEF);
    assert_int_equal(t.line, 2);
    assert_int_equal(t.col, 3);
    for (int i = 0; i < 4; i++)
        t = ps_lex_next(&lx);
    assert_int_equal(t.kind, TK_SEMI);
    t = ps_lex_next(&lx);
    assert_int_equal(t.kind, TK_END);
    assert_int_equal(t.line, 3);
    assert_int_equal(t.col, 2);
    t = ps_lex_next(&lx);
    assert_int_equal(t.kind, TK_EOF);
    t = ps_lex_next(&lx);
    assert_int_equal(t.kind, TK_EOF);   /* and stays there */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_keyword_and_mark), cmocka_unit_test(numbers),
        cmocka_unit_test(names),                  cmocka_unit_test(strings),
        cmocka_unit_test(symbols_and_errors),     cmocka_unit_test(positions_and_comments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
