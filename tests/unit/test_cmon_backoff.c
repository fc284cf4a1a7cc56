/* Unit tests for cmon/backoff.h: the delays double from min to the cap,
 * jitter stays within its percent, a reset starts over, timers arm. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "cmon/backoff.h"

static void doubles_to_the_cap(void **state)
{
	struct cmon_backoff b = { .min_ms = 100, .max_ms = 3000 };
	const unsigned want[] = { 100, 200, 400, 800, 1600, 3000, 3000, 3000 };

	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		assert_int_equal(cmon_backoff_peek(&b), want[i]);
		assert_int_equal(cmon_backoff_next(&b), want[i]);
	}
	assert_int_equal(b.failures, 8);
}

static void many_failures_do_not_overflow(void **state)
{
	struct cmon_backoff b = { .min_ms = 250, .max_ms = 10000, .failures = 4000000000u };

	assert_int_equal(cmon_backoff_next(&b), 10000);
}

static void jitter_stays_within_its_percent(void **state)
{
	struct cmon_backoff b = { .min_ms = 1000, .max_ms = 1000, .jitter_pct = 20 };
	unsigned lo = ~0u, hi = 0;

	for (int i = 0; i < 2000; i++) {
		unsigned ms = cmon_backoff_next(&b);
		assert_true(ms >= 800 && ms <= 1200);
		lo = ms < lo ? ms : lo;
		hi = ms > hi ? ms : hi;
	}
	assert_true(hi - lo > 200);      /* it does spread */
}

static void reset_starts_over(void **state)
{
	struct cmon_backoff b = { .min_ms = 500, .max_ms = 60000 };

	cmon_backoff_next(&b);
	cmon_backoff_next(&b);
	assert_int_equal(cmon_backoff_next(&b), 2000);
	cmon_backoff_reset(&b);
	assert_int_equal(cmon_backoff_next(&b), 500);
}

static void fire(evutil_socket_t fd, short what, void *arg)
{
	(*(int *)arg)++;
}

static void timer_arms(void **state)
{
	struct event_base *base = event_base_new();
	int fired = 0;
	struct event *ev = evtimer_new(base, fire, &fired);

	assert_int_equal(cmon_timer_arm_ms(ev, 50), 0);
	assert_int_equal(cmon_timer_arm_ms(ev, 1), 0);     /* re-arming replaces */
	event_base_dispatch(base);
	assert_int_equal(fired, 1);
	event_free(ev);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(doubles_to_the_cap),
		cmocka_unit_test(many_failures_do_not_overflow),
		cmocka_unit_test(jitter_stays_within_its_percent),
		cmocka_unit_test(reset_starts_over),
		cmocka_unit_test(timer_arms),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
