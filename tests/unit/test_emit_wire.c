/* Unit tests for libcmon's varint helpers (libcmon/src/emit-internal.h) and
 * its cold-record encoders (libcmon/src/emit_wire.c, compiled in): the
 * unrolled timestamp varint writes what the plain one writes, and the range
 * an event shape keeps for its timestamp's length (emit.c, tbuf_append)
 * holds exactly the values of that length, at every boundary. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../libcmon/src/emit_wire.c"

/* Values on both sides of every varint length's boundaries, and a few
 * between. */
static size_t boundary_values(uint64_t *out, size_t cap)
{
	size_t n = 0;

	for (unsigned bits = 0; bits <= 63 && n + 6 <= cap; bits++) {
		uint64_t b = 1ull << bits;
		out[n++] = b;
		out[n++] = b - 1;
		out[n++] = b + 1;
		out[n++] = b | (b >> 1);
		out[n++] = (b << 1) - 1;
		out[n++] = b * 3 / 2 + 12345;
	}
	return n;
}

static void spread_matches_loop(void **state)
{
	uint64_t v[512];
	size_t nv = boundary_values(v, 512);

	(void)state;
	for (size_t i = 0; i < nv; i++) {
		uint8_t a[16] = { 0 }, b[16] = { 0 };
		uint8_t *ea = cmon_varint_put(a, v[i]);
		uint8_t *eb = emit_put_varint64(b, v[i]);

		assert_int_equal(ea - a, eb - b);
		assert_int_equal(ea - a, cmon_varint_size(v[i]));
		assert_memory_equal(a, b, (size_t)(ea - a));
		if (v[i] >> 56 == 0) {
			uint64_t x = emit_spread7(v[i]) | emit_varint_cont(cmon_varint_size(v[i]));
			assert_memory_equal(&x, a, (size_t)(ea - a));
		}
	}
}

static void range_is_the_length(void **state)
{
	uint64_t v[512];
	size_t nv = boundary_values(v, 512);

	(void)state;
	for (unsigned k = 1; k <= 8; k++) {
		uint64_t lo, span;

		emit_varint_range(k, &lo, &span);
		for (size_t i = 0; i < nv; i++)
			assert_int_equal(v[i] - lo < span, cmon_varint_size(v[i]) == k);
	}
}

static void gap_frame_size(void **state)
{
	static const uint64_t counts[] = { 1, 127, 128, 16383, 16384, UINT32_MAX, UINT64_MAX >> 1 };

	(void)state;
	for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
		uint8_t out[32];
		size_t n = emit_wire_gap_size(counts[i]);

		assert_true(n <= 14);       /* fits EMIT_HEADROOM */
		memset(out, 0xee, sizeof out);
		emit_wire_gap(out, counts[i]);
		assert_int_equal(out[0], n - 1);   /* frame length */
		assert_int_equal(out[n], 0xee);    /* nothing written past it */
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(spread_matches_loop),
		cmocka_unit_test(range_is_the_length),
		cmocka_unit_test(gap_frame_size),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
