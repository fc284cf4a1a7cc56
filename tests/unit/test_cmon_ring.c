/* Unit tests for snarflog's record buffer (daemons/snarflog/buffer.c,
 * compiled in): whole records only, oldest dropped first, no record ever
 * split across the end of the memory, exact counts. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "../../daemons/snarflog/buffer.c"

/* Drain the ring and check it holds exactly records first..last. */
static void expect_seq(struct ring *r, int first, int last)
{
	int next = first;
	const uint8_t *p;
	uint64_t n;
	size_t len;

	while ((len = ring_peek(r, 100, &p, &n)) > 0) {
		const uint8_t *q = p;
		for (uint64_t i = 0; i < n; i++) {
			int v;
			assert_int_equal(sscanf((const char *)q, "r%d", &v), 1);
			assert_int_equal(v, next++);
			q = memchr(q, '\n', (size_t)(p + len - q)) + 1;
		}
		assert_ptr_equal(q, p + len);      /* only whole records */
		ring_consume(r, len, n);
	}
	assert_int_equal(next, last + 1);
	assert_int_equal(r->nrec, 0);
	assert_int_equal(r->used, 0);
}

static void keeps_newest_whole_records(void **state)
{
	struct ring r;
	char rec[32];
	uint64_t dropped = 0;

	assert_int_equal(ring_init(&r, 64, CMON__FORMAT__FORMAT_ASCII), 0);
	for (int i = 0; i < 100; i++) {
		int n = snprintf(rec, sizeof rec, "r%d%s\n", i, i % 3 ? "" : "xxxx");
		dropped += ring_push(&r, rec, (size_t)n);
		assert_true(r.used <= r.cap);
	}
	assert_int_equal(dropped + r.nrec, 100);
	expect_seq(&r, (int)dropped, 99);
	ring_free(&r);
}

static void interleaved_consume(void **state)
{
	struct ring r;
	char rec[32];
	const uint8_t *p;
	uint64_t n, dropped = 0, taken = 0;
	size_t len;

	assert_int_equal(ring_init(&r, 50, CMON__FORMAT__FORMAT_ASCII), 0);
	for (int i = 0; i < 1000; i++) {
		int k = snprintf(rec, sizeof rec, "r%d\n", i);
		dropped += ring_push(&r, rec, (size_t)k);
		if (i % 7 == 0 && (len = ring_peek(&r, 8, &p, &n)) > 0) {
			ring_consume(&r, len, n);
			taken += n;
		}
	}
	assert_int_equal(taken + dropped + r.nrec, 1000);
	ring_free(&r);
}

static void binary_records(void **state)
{
	struct ring r;
	uint8_t rec[20];
	uint64_t dropped = 0;
	const uint8_t *p;
	uint64_t n;

	assert_int_equal(ring_init(&r, 40, CMON__FORMAT__FORMAT_BINARY), 0);
	for (int i = 0; i < 10; i++) {
		size_t len = (size_t)(3 + i % 5);
		rec[0] = (uint8_t)(len - 1);
		memset(rec + 1, i, len - 1);
		dropped += ring_push(&r, rec, len);
	}
	assert_int_equal(dropped + r.nrec, 10);
	assert_true(ring_peek(&r, 1, &p, &n) > 0);
	assert_int_equal(n, 1);                         /* at least one whole record */
	assert_int_equal(ring_clear(&r) + dropped, 10);
	assert_int_equal(r.nrec, 0);
	ring_free(&r);
}

/* Random record sizes (tiny ones fill the index first), random consumption:
 * what comes out is always whole records, in order, and everything pushed
 * is either consumed, dropped (counted) or still held. */
static void random_soak(void **state)
{
	struct ring r;
	char rec[300];
	const uint8_t *p;
	uint64_t n, dropped = 0, taken = 0, next = 0, pending = 0;
	unsigned seed = 12345;
	size_t len;

	assert_int_equal(ring_init(&r, 4096, CMON__FORMAT__FORMAT_ASCII), 0);
	for (int i = 0; i < 200000; i++) {
		int pad = (int)((seed = seed * 1103515245 + 12345) >> 16) % (i % 1000 < 500 ? 4 : 250);
		int k = snprintf(rec, sizeof rec, "r%d%.*s\n", i, pad, "................................"
				 "................................................................"
				 "................................................................"
				 "................................................................");
		uint64_t d = ring_push(&r, rec, (size_t)k);
		dropped += d;
		pending += d;               /* the oldest records: right where we are */
		assert_true(r.used <= r.cap && r.nrec <= r.icap);
		if ((seed >> 20) % 5 == 0 && (len = ring_peek(&r, (seed >> 8) % 700, &p, &n)) > 0) {
			const uint8_t *q = p;
			for (uint64_t j = 0; j < n; j++) {
				int v;
				assert_int_equal(sscanf((const char *)q, "r%d", &v), 1);
				/* exactly the dropped ones are missing, nothing else */
				assert_int_equal((uint64_t)v, next + (j == 0 ? pending : 0));
				next = (uint64_t)v + 1;
				q = memchr(q, '\n', (size_t)(p + len - q)) + 1;
			}
			assert_ptr_equal(q, p + len);
			ring_consume(&r, len, n);
			taken += n;
			pending = 0;
		}
	}
	assert_int_equal(taken + dropped + r.nrec, 200000);
	ring_free(&r);
}

/* ring_push_run() leaves the buffer exactly as record-by-record pushes do. */
static void run_equals_single(void **state)
{
	struct ring a, b;
	uint8_t block[4096];
	uint32_t ends[64];
	unsigned seed = 777;
	uint64_t da = 0, db = 0;

	assert_int_equal(ring_init(&a, 2048, CMON__FORMAT__FORMAT_ASCII), 0);
	assert_int_equal(ring_init(&b, 2048, CMON__FORMAT__FORMAT_ASCII), 0);
	for (int round = 0, seq = 0; round < 3000; round++) {
		size_t n = 1 + (seed = seed * 1103515245 + 12345) % 40, len = 0;
		for (size_t i = 0; i < n; i++) {
			int pad = (int)((seed = seed * 1103515245 + 12345) >> 16) % 60;
			len += (size_t)snprintf((char *)block + len, sizeof block - len, "r%d%.*s\n", seq++,
						pad, "............................................................");
			ends[i] = (uint32_t)len;
		}
		da += ring_push_run(&a, block, ends, n);
		for (size_t i = 0; i < n; i++) {
			size_t start = i ? ends[i - 1] : 0;
			db += ring_push(&b, block + start, ends[i] - start);
		}
		assert_int_equal(da, db);
		assert_int_equal(a.nrec, b.nrec);
		assert_int_equal(a.used, b.used);
		assert_int_equal(a.head, b.head);
		assert_int_equal(a.tail, b.tail);
		assert_memory_equal(a.mem + a.head, b.mem + b.head,
				    (a.wrapped ? a.wrap : a.tail) - a.head);
	}
	ring_free(&a);
	ring_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(keeps_newest_whole_records),
		cmocka_unit_test(interleaved_consume),
		cmocka_unit_test(binary_records),
		cmocka_unit_test(random_soak),
		cmocka_unit_test(run_equals_single),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
