/* Unit tests for cmon/when.h: the times telemonctl, the HTTP API and the
 * dashboard take, one parser for all three. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "cmon/when.h"

#define NOW 1700000000.0

static double when(const char *s)
{
	double t = -12345;

	assert_true(cmon_when_parse(s, NOW, &t));
	return t;
}

static void dates_and_times(void **state)
{
	(void)state;
	assert_true(when("2024-03-01") == 1709251200);
	assert_true(when("2024-03-01T12:00") == 1709251200 + 43200);
	assert_true(when("2024-03-01T12:00Z") == 1709251200 + 43200);
	assert_true(when("2024-03-01 12:00") == 1709251200 + 43200);
	assert_true(when("2024-03-01T12:00:05Z") == 1709251200 + 43205);
	assert_true(when("2024-03-01T12:00:05") == 1709251200 + 43205);
	assert_true(when("2024-03-01 12:00:05") == 1709251200 + 43205);
}

static void unix_seconds(void **state)
{
	(void)state;
	assert_true(when("1700000000") == 1700000000);     /* the API's form */
	assert_true(when("@1700000000") == 1700000000);    /* telemonctl's */
	assert_true(when("1700000000.5") == 1700000000.5);
	assert_true(when("0") == 0);
}

static void ago(void **state)
{
	(void)state;
	assert_true(when("2 hours") == NOW - 7200);
	assert_true(when("2 hours ago") == NOW - 7200);
	assert_true(when("10 min") == NOW - 600);
	assert_true(when("90s") == NOW - 90);
	assert_true(when("1 day ago") == NOW - 86400);
	assert_true(when("1.5 h") == NOW - 5400);
	assert_true(when("2 weeks") == NOW - 1209600);
}

static void refused(void **state)
{
	static const char *bad[] = {
		"", " ", "yesterday", "-5", "+5", "inf", "nan", "-1 hour", "2 parsecs", "2 hours hence",
		"2024-13-01", "2024-03-01T25:00", "2024-03-01x", "@", "@-5", "@ 5", "@1e3x",
		"1e300", "5 ago", "2 hours ago ago", "1999-12-31T23:59:59Zjunk", "1e9 weeks",
	};
	double t = -7;

	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (cmon_when_parse(bad[i], NOW, &t))
			fail_msg("'%s' taken as %f", bad[i], t);
		assert_true(t == -7);
	}
	assert_false(cmon_when_parse(NULL, NOW, &t));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(dates_and_times),
		cmocka_unit_test(unix_seconds),
		cmocka_unit_test(ago),
		cmocka_unit_test(refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
