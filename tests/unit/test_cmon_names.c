/* Unit tests for cmon/names.h: name and pattern validation, matching. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "cmon/names.h"

static void names_valid(void **state)
{
	static const char *good[] = { "fsread", "a", "lectern-2.1", "x_y+z", "9lives", "A.b.C",
				      "0123456789012345678901234567890123456789012345678901234567890123" };
	for (size_t i = 0; i < sizeof good / sizeof *good; i++)
		assert_true(cmon_name_valid(good[i]));
}

static void names_invalid(void **state)
{
	static const char *bad[] = { "", "..", "a..b", "../etc", "a/b", "-rf", ".hidden", "_x",
				     "+x", "a b", "a;b", "$(x)", "a\nb", "é",
				     "01234567890123456789012345678901234567890123456789012345678901234" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		assert_false(cmon_name_valid(bad[i]));
	assert_false(cmon_name_valid(NULL));
}

static void patterns(void **state)
{
	assert_true(cmon_pattern_valid(""));
	assert_true(cmon_pattern_valid(NULL));
	assert_true(cmon_pattern_valid("fs*"));
	assert_true(cmon_pattern_valid("?oo*.x"));
	assert_false(cmon_pattern_valid("[abc]"));
	assert_false(cmon_pattern_valid("a\\b"));
	assert_false(cmon_pattern_valid("../*"));
	assert_false(cmon_pattern_valid("a b"));
	assert_true(cmon_pid_pattern_valid("12*"));
	assert_true(cmon_pid_pattern_valid(""));
	assert_false(cmon_pid_pattern_valid("12a"));
	assert_false(cmon_pid_pattern_valid("-1"));
}

static void matching(void **state)
{
	static const struct { const char *pat, *s; bool match; } cases[] = {
		{ "", "anything", true },     { NULL, "x", true },       { "fs*", "fsread", true },
		{ "fs*", "fs", true },        { "fs*", "xfs", false },   { "?oo", "foo", true },
		{ "?oo", "fooo", false },     { "*", "", true },         { "a*b*c", "aXbYc", true },
		{ "a*b*c", "aXbY", false },   { "lectern", "lectern", true },
		{ "lectern", "lecter", false }, { "1??", "123", true },  { "1??", "12", false },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
		assert_int_equal(cmon_pattern_match(cases[i].pat, cases[i].s), cases[i].match);
	assert_true(cmon_pattern_is_literal("abc"));
	assert_false(cmon_pattern_is_literal("a?c"));
}

static void sanitize(void **state)
{
	char out[CMON_NAME_MAX + 1];

	assert_true(cmon_name_sanitize("my host", out, sizeof out));
	assert_string_equal(out, "my-host");
	assert_true(cmon_name_sanitize("-.x..y", out, sizeof out));
	assert_true(cmon_name_valid(out));
	assert_false(cmon_name_sanitize("///", out, sizeof out));
	assert_string_equal(out, "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(names_valid),
		cmocka_unit_test(names_invalid),
		cmocka_unit_test(patterns),
		cmocka_unit_test(matching),
		cmocka_unit_test(sanitize),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
