/* Unit tests for snarflog's record buffer (daemons/snarflog/buffer.c,
 * compiled in): whole records only, oldest dropped first, no record ever
 * split across the end of the memory, exact counts; reading in place
 * (ring_stage_*) keeps the staged bytes intact wherever they move. */
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
		rec[1] = 0x1a;                      /* a Record holding an Event: counts one */
		dropped += ring_push(&r, rec, len);
	}
	assert_int_equal(dropped + r.nrec, 10);
	assert_true(ring_peek(&r, 1, &p, &n) > 0);
	assert_int_equal(n, 1);                         /* at least one whole record */
	assert_int_equal(ring_clear(&r) + dropped, 10);
	assert_int_equal(r.nrec, 0);
	ring_free(&r);
}

/* Weights: runs (events only) are weighed without reading them again,
 * single records of every kind (gap markers weigh their count, comments
 * and other records nothing) by reading them. Whatever was pushed weighs
 * exactly what was dropped, consumed (ring_front_weight, as snarflog
 * counts what it sends) and is still held. */
static void weights_case(Cmon__Format fmt)
{
	bool bin = fmt == CMON__FORMAT__FORMAT_BINARY;
	struct ring r;
	uint8_t block[2048], marker[CMON_GAP_MARKER_MAX];
	uint32_t ends[64];
	unsigned seed = 4242;
	uint64_t pushed = 0, dropped = 0, taken = 0, fast = 0;
	const uint8_t *p;
	uint64_t n;
	size_t len;

	assert_int_equal(ring_init(&r, 4096, fmt), 0);
	for (int round = 0; round < 20000; round++) {
		unsigned what = (seed = seed * 1103515245 + 12345) >> 16;
		if (what % 50 == 0) {
			uint64_t count = 1 + what % 1000;
			size_t k = cmon_log_gap_marker(fmt, count, marker);
			dropped += ring_push(&r, marker, k);
			pushed += count;
		} else if (what % 50 == 1) {
			static const uint8_t other[] = { 4, 0x12, 2, 0x08, 0x01 };   /* weighs nothing */
			dropped += bin ? ring_push(&r, other, sizeof other)
				       : ring_push(&r, "# a comment\n", 12);
		} else if (what % 50 == 2) {
			static const uint8_t ev[] = { 4, 0x1a, 2, 0x08, 0x01 };
			dropped += bin ? ring_push(&r, ev, sizeof ev) : ring_push(&r, "7 1 E\n", 6);
			pushed++;
		} else {
			size_t nrec = 1 + what % 40, at = 0;
			for (size_t i = 0; i < nrec; i++) {
				size_t body = 4 + (seed = seed * 1103515245 + 12345) % 30;
				if (bin) {
					block[at] = (uint8_t)(body + 2);
					block[at + 1] = 0x1a;
					block[at + 2] = (uint8_t)body;
					memset(block + at + 3, 0x08, body);
					at += body + 3;
				} else {
					memset(block + at, '5', body);
					block[at + body] = '\n';
					at += body + 1;
				}
				ends[i] = (uint32_t)at;
			}
			if (r.front >= r.mixed_end)
				fast++;
			dropped += ring_push_run(&r, block, ends, nrec);
			pushed += nrec;
		}
		if (what % 13 == 0 && (len = ring_peek(&r, 300, &p, &n)) > 0) {
			struct cmon_tally t = { 0 };
			cmon_log_tally(fmt, p, len, SIZE_MAX, &t);
			assert_int_equal(ring_front_weight(&r, n), cmon_tally_weight(&t));
			taken += ring_front_weight(&r, n);
			ring_consume(&r, len, n);
		}
		assert_true(r.used <= r.cap);
	}
	/* what is left weighs what ring_clear() says (gap markers their
	 * count, the buffer possibly wrapped), and as much as sending it would */
	{
		struct ring copy = r;
		uint64_t sent = taken;      /* taken so far, and then all of it */

		copy.mem = malloc(r.cap);
		copy.ends = malloc(r.icap * sizeof *r.ends);
		assert_true(copy.mem && copy.ends);
		memcpy(copy.mem, r.mem, r.cap);
		memcpy(copy.ends, r.ends, r.icap * sizeof *r.ends);
		while ((len = ring_peek(&copy, SIZE_MAX, &p, &n)) > 0) {
			sent += ring_front_weight(&copy, n);
			ring_consume(&copy, len, n);
		}
		free(copy.mem);
		free(copy.ends);
		taken += ring_clear(&r);
		assert_int_equal(r.nrec, 0);
		assert_int_equal(dropped + taken, pushed);
		assert_int_equal(dropped + sent, pushed);
		assert_int_equal(sent, taken);
	}
	assert_true(fast > 1000);          /* the quick weighing was used */
	ring_free(&r);
}

static void weights(void **state)
{
	weights_case(CMON__FORMAT__FORMAT_BINARY);
	weights_case(CMON__FORMAT__FORMAT_ASCII);
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

/* A stream of records "r<seq><padding>\n" produced on demand, for the
 * reading-in-place tests: byte k of the stream is always the same. */
struct stream_gen {
	char buf[1 << 16];            /* produced, not yet taken */
	size_t len;                   /* bytes in buf */
	int seq;                      /* next record's number */
	unsigned seed;                /* padding lengths */
	int maxpad;                   /* longest padding */
};

/* Take up to `n` bytes of the stream into `dst`. */
static size_t gen_take(struct stream_gen *g, uint8_t *dst, size_t n)
{
	while (g->len < n && g->len < sizeof g->buf - 400) {
		int pad = (int)((g->seed = g->seed * 1103515245 + 12345) >> 16) % (g->maxpad + 1);
		g->len += (size_t)snprintf(g->buf + g->len, sizeof g->buf - g->len, "r%d%.*s\n",
					   g->seq++, pad, "........................................"
					   "........................................................."
					   "........................................................."
					   ".........................................................");
	}
	if (n > g->len)
		n = g->len;
	memcpy(dst, g->buf, n);
	memmove(g->buf, g->buf + n, g->len - n);
	g->len -= n;
	return n;
}

/* Check the buffer's invariants with bytes staged. */
static void check_layout(const struct ring *r)
{
	assert_true(r->used <= r->cap && r->nrec <= r->icap);
	assert_true(r->tail + r->staged <= r->cap);
	if (r->wrapped)
		assert_true(r->tail + r->staged <= r->head && r->head < r->wrap);
	else if (r->nrec)
		assert_true(r->head < r->tail);
}

/* Read a generated stream in place in pieces of random size, commit whole
 * records where they lie, sometimes without dropping, and consume at
 * random: staged bytes are never lost or changed, what comes out is whole
 * records in order, and exactly the dropped ones are missing. */
static void stage_soak_case(size_t cap, int maxpad, unsigned seed)
{
	struct ring r;
	struct stream_gen g = { .seed = seed, .maxpad = maxpad };
	uint8_t expect[1 << 16];          /* the staged bytes as they must be */
	size_t nexpect = 0;
	uint64_t dropped = 0, taken = 0, pending = 0, next = 0, committed = 0;
	unsigned rnd = seed ^ 0x5555;

	assert_int_equal(ring_init(&r, cap, CMON__FORMAT__FORMAT_ASCII), 0);
	for (int round = 0; round < 40000; round++) {
		bool drop = (rnd = rnd * 1103515245 + 12345) >> 16 & 3;   /* 3 in 4 */
		size_t want = 1 + ((rnd = rnd * 1103515245 + 12345) >> 16) % (cap / 4);
		size_t room, n, len;
		uint64_t d;
		uint8_t *dst = ring_stage_room(&r, want, drop, &room, &d);
		uint8_t *st;
		uint32_t ends[64];

		dropped += d;
		pending += d;
		if (drop)
			assert_true(room == want || room == cap - nexpect);
		else
			assert_int_equal(d, 0);
		check_layout(&r);
		st = ring_staged(&r, &len);
		assert_int_equal(len, nexpect);
		assert_memory_equal(st, expect, nexpect);   /* moved intact */
		assert_ptr_equal(dst, st + len);
		/* "read" some bytes */
		n = room ? gen_take(&g, dst, 1 + ((rnd = rnd * 1103515245 + 12345) >> 16) % room) : 0;
		ring_stage_grow(&r, n);
		memcpy(expect + nexpect, dst, n);
		nexpect += n;
		/* cut whole records and commit them */
		st = ring_staged(&r, &len);
		{
			size_t k = 0, pos = 0, c;
			const uint8_t *nl;
			while (k < 64 && (nl = memchr(st + pos, '\n', len - pos))) {
				pos = (size_t)(nl - st) + 1;
				ends[k++] = (uint32_t)pos;
			}
			c = ring_stage_commit(&r, ends, k, drop, &d);
			dropped += d;
			pending += d;
			committed += c;
			if (drop)
				assert_int_equal(c, k);
			else
				assert_int_equal(d, 0);
			if (c) {
				memmove(expect, expect + ends[c - 1], nexpect - ends[c - 1]);
				nexpect -= ends[c - 1];
			}
		}
		check_layout(&r);
		/* sometimes a consumer takes some */
		if (((rnd = rnd * 1103515245 + 12345) >> 16) % 3 == 0) {
			const uint8_t *p;
			uint64_t m;
			size_t plen = ring_peek(&r, ((rnd >> 4) % 500), &p, &m);
			const uint8_t *q = p;
			for (uint64_t j = 0; j < m; j++) {
				int v;
				assert_int_equal(sscanf((const char *)q, "r%d", &v), 1);
				assert_int_equal((uint64_t)v, next + (j == 0 ? pending : 0));
				next = (uint64_t)v + 1;
				q = memchr(q, '\n', (size_t)(p + plen - q)) + 1;
			}
			assert_ptr_equal(q, p + plen);
			if (m) {
				ring_consume(&r, plen, m);
				taken += m;
				pending = 0;
			}
			check_layout(&r);
			st = ring_staged(&r, &len);
			assert_int_equal(len, nexpect);
			assert_memory_equal(st, expect, nexpect);
		}
		assert_int_equal(taken + dropped + r.nrec, committed);
	}
	assert_true(committed > 1000);
	ring_free(&r);
}

static void stage_soak(void **state)
{
	stage_soak_case(4096, 3, 1);          /* tiny records: the index fills first */
	stage_soak_case(4096, 200, 2);        /* long records, much wrapping */
	stage_soak_case(1000, 60, 3);
	stage_soak_case(65536, 250, 4);
}

/* Without dropping, reading in place stops when the buffer is full and
 * goes on once a consumer has taken records; the partial record waiting
 * at the end of the memory moves to the start intact. */
static void stage_no_drop(void **state)
{
	struct ring r;
	const uint8_t *p;
	uint64_t d, n;
	size_t room, len;
	uint32_t end;
	uint8_t *dst;

	assert_int_equal(ring_init(&r, 100, CMON__FORMAT__FORMAT_ASCII), 0);
	/* three records of 30 bytes fill 90 bytes */
	for (int i = 0; i < 3; i++) {
		dst = ring_stage_room(&r, 30, false, &room, &d);
		assert_int_equal(room, 30);
		memset(dst, 'a' + i, 29);
		dst[29] = '\n';
		ring_stage_grow(&r, 30);
		end = 30;
		assert_int_equal(ring_stage_commit(&r, &end, 1, false, &d), 1);
	}
	/* a partial record of 8 bytes at the end, then no room */
	dst = ring_stage_room(&r, 30, false, &room, &d);
	assert_int_equal(room, 10);
	memcpy(dst, "partial!", 8);
	ring_stage_grow(&r, 8);
	ring_stage_room(&r, 30, false, &room, &d);
	assert_int_equal(room, 2);
	assert_int_equal(r.nrec, 3);
	/* the consumer takes the first record: room at the start, where the
	 * partial record moves */
	len = ring_peek(&r, 30, &p, &n);
	assert_int_equal(n, 1);
	ring_consume(&r, len, n);
	dst = ring_stage_room(&r, 30, false, &room, &d);
	assert_true(r.wrapped);
	assert_int_equal(r.tail, 0);
	assert_int_equal(room, 22);
	p = ring_staged(&r, &len);
	assert_int_equal(len, 8);
	assert_memory_equal(p, "partial!", 8);
	memcpy(dst, "ly\n", 3);
	ring_stage_grow(&r, 3);
	end = 11;
	assert_int_equal(ring_stage_commit(&r, &end, 1, false, &d), 1);
	assert_int_equal(d, 0);
	assert_int_equal(r.nrec, 3);
	/* everything consumed: the buffer starts over, staged bytes kept */
	dst = ring_stage_room(&r, 5, false, &room, &d);
	memcpy(dst, "tail", 4);
	ring_stage_grow(&r, 4);
	while ((len = ring_peek(&r, 100, &p, &n)) > 0)
		ring_consume(&r, len, n);
	assert_int_equal(r.nrec, 0);
	assert_int_equal(r.tail, 0);
	p = ring_staged(&r, &len);
	assert_int_equal(len, 4);
	assert_memory_equal(p, "tail", 4);
	ring_free(&r);
}

/* A full index: committing without dropping stops; with dropping, the
 * oldest records go, counted. */
static void stage_index_full(void **state)
{
	struct ring r;
	uint32_t ends[200];
	uint64_t d;
	size_t room;
	uint8_t *dst;

	assert_int_equal(ring_init(&r, 1024, CMON__FORMAT__FORMAT_ASCII), 0);
	assert_int_equal(r.icap, 64);
	dst = ring_stage_room(&r, 200, false, &room, &d);
	assert_int_equal(room, 200);
	for (int i = 0; i < 100; i++) {
		dst[2 * i] = 'x';
		dst[2 * i + 1] = '\n';
		ends[i] = (uint32_t)(2 * i + 2);
	}
	ring_stage_grow(&r, 200);
	assert_int_equal(ring_stage_commit(&r, ends, 100, false, &d), 64);
	assert_int_equal(d, 0);
	assert_int_equal(r.staged, 72);
	for (int i = 0; i < 36; i++)
		ends[i] = (uint32_t)(2 * i + 2);
	assert_int_equal(ring_stage_commit(&r, ends, 36, true, &d), 36);
	assert_int_equal(d + r.nrec, 100);
	assert_int_equal(r.staged, 0);
	ring_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(keeps_newest_whole_records),
		cmocka_unit_test(interleaved_consume),
		cmocka_unit_test(binary_records),
		cmocka_unit_test(weights),
		cmocka_unit_test(random_soak),
		cmocka_unit_test(run_equals_single),
		cmocka_unit_test(stage_soak),
		cmocka_unit_test(stage_no_drop),
		cmocka_unit_test(stage_index_full),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
