/* Unit tests for the events' clock (libcmon/src/emit_clock.c, compiled in):
 * on a machine whose kernel keeps CLOCK_MONOTONIC with an invariant TSC,
 * an event's time read from the TSC agrees with CLOCK_MONOTONIC (within
 * 50 us while the thread re-anchors every 10 ms, as a batch does, and within
 * 0.05% of the time since its anchor without one), never goes backwards,
 * and CMON_CLOCK=monotonic turns it off. Elsewhere the TSC tests are
 * skipped and the fallback is checked. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>

#include "../../libcmon/src/emit_clock.c"

static int64_t absdiff(uint64_t a, uint64_t b)
{
	return a > b ? (int64_t)(a - b) : (int64_t)(b - a);
}

static void follows_monotonic(void **state)
{
	struct emit_anchor a = { 0 };
	uint64_t start, last = 0, next_anchor;
	int64_t worst = 0;

	(void)state;
	unsetenv("CMON_CLOCK");
	emit_clock_init();
	if (!emit_clk.tsc) {
		/* (does not apply: the fallback is the monotonic clock itself) */
		print_message("# the TSC is not this machine's clock: the fallback is used\n");
		return;
	}
	emit_clock_anchor(&a);
	start = emit_clock_mono();
	next_anchor = start + EMIT_FLUSH_NS;
	for (;;) {
		uint64_t before = emit_clock_mono();
		uint64_t t = emit_clock_now(&a);
		uint64_t after = emit_clock_mono();
		int64_t off = t < before ? absdiff(t, before) : t > after ? absdiff(t, after) : 0;
		assert_true(t >= last);
		last = t;
		if (off > worst)
			worst = off;
		if (after >= next_anchor) {
			emit_clock_anchor(&a);
			next_anchor = after + EMIT_FLUSH_NS;
		}
		if (after - start >= 200000000u)
			break;
	}
	print_message("# worst offset from CLOCK_MONOTONIC: %lld ns\n", (long long)worst);
	assert_true(worst < 50000);
}

static void drift_without_anchor(void **state)
{
	struct emit_anchor a = { 0 };
	uint64_t t0, t, m;

	(void)state;
	emit_clock_init();
	if (!emit_clk.tsc)
		return;         /* (does not apply, as above) */
	emit_clock_anchor(&a);
	t0 = emit_clock_mono();
	while (emit_clock_mono() - t0 < 300000000u)
		;
	t = emit_clock_now(&a);
	m = emit_clock_mono();
	/* the 1 ms calibration's error, over 300 ms */
	assert_true(absdiff(t, m) < (int64_t)((m - t0) / 2000));
}

static void monotonic_on_request(void **state)
{
	struct emit_anchor a = { 0 };
	uint64_t before, t, after;

	(void)state;
	setenv("CMON_CLOCK", "monotonic", 1);
	emit_clock_init();
	assert_false(emit_clk.tsc);
	before = emit_clock_mono();
	t = emit_clock_now(&a);
	after = emit_clock_mono();
	assert_true(before <= t && t <= after);
	unsetenv("CMON_CLOCK");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(follows_monotonic),
		cmocka_unit_test(drift_without_anchor),
		cmocka_unit_test(monotonic_on_request),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
