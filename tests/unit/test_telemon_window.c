/* Unit tests for the telemonitor's log windows (daemons/telemonitor/window.c):
 * the `window` property, which records a failure's window holds (from the
 * interval's start event, at most BEFORE back from its end, AFTER past
 * it), merging of close failures, gap markers, and finishing a window
 * before its records leave the ring. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../daemons/telemonitor/window.c"

static const char header[] = "#cmon-ascii 1\n#program demo\n#tick-ns 1000000\n";

static void spec_parsing(void **state)
{
	struct window_spec ws;
	char err[300];
	double s;

	assert_int_equal(window_spec_parse("500", &ws, err, sizeof err), 0);
	assert_int_equal(ws.before_n, 500);
	assert_int_equal(ws.after_n, 0);
	assert_int_equal(window_spec_parse("30 sec", &ws, err, sizeof err), 0);
	assert_int_equal(ws.before_n, 0);
	assert_true(ws.before_ns == 30000000000LL);
	assert_int_equal(window_spec_parse("500 after 50", &ws, err, sizeof err), 0);
	assert_int_equal(ws.before_n, 500);
	assert_int_equal(ws.after_n, 50);
	assert_int_equal(window_spec_parse("2 min after 500 ms", &ws, err, sizeof err), 0);
	assert_true(ws.before_ns == 120000000000LL && ws.after_ns == 500000000LL);
	assert_int_equal(window_spec_parse("100 records after 10 records", &ws, err, sizeof err), 0);
	assert_int_equal(ws.after_n, 10);
	assert_int_equal(window_spec_parse(WINDOW_DEFAULT, &ws, err, sizeof err), 0);
	static const char *bad[] = { "", "0", "-5", "lots", "500 after", "5.5", "30 fortnights",
				     "500 500", "200000", "2 days", "after 5" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		if (window_spec_parse(bad[i], &ws, err, sizeof err) == 0)
			fail_msg("accepted window '%s'", bad[i]);
	assert_int_equal(window_parse_duration("5 min", &s), 0);
	assert_true(s == 300);
	assert_int_equal(window_parse_duration("250ms", &s), 0);
	assert_true(s == 0.25);
	assert_int_equal(window_parse_duration("5", &s), -EINVAL);
}

/* A ring with records 1..n: "ts 1 Ev pos", ts = 10 * pos ms. */
static void fill(struct window_ring *r, uint64_t from, uint64_t to)
{
	struct window_done done[WINDOW_PENDING_MAX];
	size_t nd;
	char line[64];

	for (uint64_t p = from; p <= to; p++) {
		int n = snprintf(line, sizeof line, "%llu 1 Ev %llu", (unsigned long long)(10 * p),
				 (unsigned long long)p);
		assert_int_equal(window_push(r, p, (int64_t)(10 * p), line, (size_t)n, done,
					     WINDOW_PENDING_MAX, &nd), 0);
		for (size_t i = 0; i < nd; i++)
			free(done[i].text);
	}
}

/* The bytes the ring's kept texts occupy, walked: what r->used must say. */
static size_t walked_bytes(const struct window_ring *r)
{
	size_t sum = 0;

	for (size_t i = 0; i < r->n; i++) {
		const struct window_rec *w = &r->recs[(r->head + i) % r->cap];
		if (!window_rec_gap(w) && w->off != UINT32_MAX)
			sum += w->len;
	}
	return sum;
}

static struct window_ring make(const char *spec)
{
	struct window_ring r;
	struct window_spec ws;
	char err[200];

	assert_int_equal(window_spec_parse(spec, &ws, err, sizeof err), 0);
	window_ring_init(&r, &ws, 0);
	assert_int_equal(window_set_header(&r, header, strlen(header), 1000000, "demo host 42"), 0);
	return r;
}

/* Count records in a window text and check its first and last. */
static void check_text(const struct window_done *d, uint64_t first, uint64_t last)
{
	char want[64];
	const char *p;
	uint64_t n = 0;

	assert_true(strncmp(d->text, "#cmon-ascii 1\n", 14) == 0);
	assert_non_null(strstr(d->text, "#telemon-instance demo host 42\n"));
	for (p = d->text; (p = strstr(p, " 1 Ev ")); p++)
		n++;
	assert_int_equal(n, last - first + 1);
	snprintf(want, sizeof want, "\n%llu 1 Ev %llu\n", (unsigned long long)(10 * first),
		 (unsigned long long)first);
	assert_non_null(strstr(d->text, want));
	snprintf(want, sizeof want, "\n%llu 1 Ev %llu\n", (unsigned long long)(10 * last),
		 (unsigned long long)last);
	assert_non_null(strstr(d->text, want));
}

static void from_start_event(void **state)
{
	struct window_ring r = make("500 after 5");
	struct window_done d[WINDOW_PENDING_MAX];

	fill(&r, 1, 100);
	/* interval from record 40 to 60: the window starts at its start event */
	assert_int_equal(window_request(&r, 40, 60, 600, 7, 0, 30), 7);
	assert_int_equal(window_collect(&r, 1, false, d, WINDOW_PENDING_MAX), 1);
	assert_int_equal(d[0].id, 7);
	assert_int_equal(d[0].from_pos, 40);
	assert_int_equal(d[0].to_pos, 65);
	assert_false(d[0].truncated);
	check_text(&d[0], 40, 65);
	free(d[0].text);
	window_ring_free(&r);
}

static void last_n_before_end(void **state)
{
	struct window_ring r = make("10 after 3");
	struct window_done d[WINDOW_PENDING_MAX];

	fill(&r, 1, 100);
	/* a long interval (5..80): only the last 10 records up to its end */
	assert_int_equal(window_request(&r, 5, 80, 800, 1, 0, 30), 1);
	assert_int_equal(window_collect(&r, 1, false, d, WINDOW_PENDING_MAX), 1);
	assert_int_equal(d[0].from_pos, 71);
	assert_int_equal(d[0].to_pos, 83);
	check_text(&d[0], 71, 83);
	free(d[0].text);
	window_ring_free(&r);
}

static void waits_for_after(void **state)
{
	struct window_ring r = make("10 after 20");
	struct window_done d[WINDOW_PENDING_MAX];

	fill(&r, 1, 50);
	assert_int_equal(window_request(&r, 45, 50, 500, 3, 100, 30), 3);
	assert_int_equal(window_collect(&r, 101, false, d, WINDOW_PENDING_MAX), 0);
	fill(&r, 51, 69);
	assert_int_equal(window_collect(&r, 102, false, d, WINDOW_PENDING_MAX), 0);
	assert_true(window_next_deadline(&r) == 130);
	fill(&r, 70, 75);
	assert_int_equal(window_collect(&r, 103, false, d, WINDOW_PENDING_MAX), 1);
	assert_int_equal(d[0].from_pos, 45);
	assert_int_equal(d[0].to_pos, 70);
	free(d[0].text);
	/* the deadline finishes a window whose AFTER part never comes */
	assert_int_equal(window_request(&r, 74, 75, 750, 4, 200, 30), 4);
	assert_int_equal(window_collect(&r, 229, false, d, WINDOW_PENDING_MAX), 0);
	assert_int_equal(window_collect(&r, 230, false, d, WINDOW_PENDING_MAX), 1);
	assert_int_equal(d[0].to_pos, 75);
	free(d[0].text);
	/* end of stream finishes everything */
	assert_int_equal(window_request(&r, 75, 75, 750, 5, 300, 30), 5);
	assert_int_equal(window_collect(&r, 301, true, d, WINDOW_PENDING_MAX), 1);
	free(d[0].text);
	window_ring_free(&r);
}

static void by_time(void **state)
{
	/* tick = 1 ms; records every 10 ms: 50 ms before = 5 records back */
	struct window_ring r = make("50 ms after 30 ms");
	struct window_done d[WINDOW_PENDING_MAX];

	fill(&r, 1, 100);
	assert_int_equal(window_request(&r, 10, 60, 600, 9, 0, 30), 9);
	/* records up to ts 630 are in; 640 > 630 completes it */
	assert_int_equal(window_collect(&r, 1, false, d, WINDOW_PENDING_MAX), 1);
	assert_int_equal(d[0].from_pos, 55);
	assert_int_equal(d[0].to_pos, 63);
	free(d[0].text);
	window_ring_free(&r);
}

static void merging(void **state)
{
	struct window_ring r = make("10 after 5");
	struct window_done d[WINDOW_PENDING_MAX];

	fill(&r, 1, 30);
	assert_int_equal(window_request(&r, 20, 22, 220, 1, 0, 30), 1);
	/* overlapping: merged into window 1 */
	assert_int_equal(window_request(&r, 24, 26, 260, 2, 0, 30), 1);
	/* far away: a window of its own */
	fill(&r, 31, 80);
	assert_int_equal(window_collect(&r, 1, false, d, WINDOW_PENDING_MAX), 1);
	assert_int_equal(d[0].from_pos, 20);
	assert_int_equal(d[0].to_pos, 31);
	free(d[0].text);
	assert_int_equal(window_request(&r, 75, 78, 780, 3, 0, 30), 3);
	window_collect(&r, 1, true, d, WINDOW_PENDING_MAX);
	assert_int_equal(d[0].id, 3);
	free(d[0].text);
	window_ring_free(&r);
}

static void gaps_and_truncation(void **state)
{
	struct window_ring r = make("100 after 0");
	struct window_done d[WINDOW_PENDING_MAX];
	size_t nd;
	char line[64];

	/* a small ring: 40 records of text fit */
	struct window_spec ws = { .before_n = 100 };
	window_ring_free(&r);
	window_ring_init(&r, &ws, 1024);
	window_set_header(&r, header, strlen(header), 1, NULL);
	fill(&r, 1, 10);
	assert_int_equal(window_push_gap(&r, 10, 7), 0);
	fill(&r, 11, 12);
	assert_int_equal(window_request(&r, 9, 12, 120, 1, 0, 30), 1);
	assert_int_equal(window_collect(&r, 1, false, d, WINDOW_PENDING_MAX), 1);
	assert_non_null(strstr(d[0].text, "\n90 1 Ev 9\n100 1 Ev 10\n#cmon-gap 7\n110 1 Ev 11\n"));
	free(d[0].text);

	/* a pending window is finished before its first record is dropped */
	assert_int_equal(window_request(&r, 12, 12, 120, 2, 0, 30), 2);
	for (uint64_t p = 13; p < 200; p++) {
		int n = snprintf(line, sizeof line, "%llu 1 Ev %llu", (unsigned long long)(10 * p),
				 (unsigned long long)p);
		assert_int_equal(window_push(&r, p, (int64_t)(10 * p), line, (size_t)n, d,
					     WINDOW_PENDING_MAX, &nd), 0);
		if (nd) {
			assert_int_equal(nd, 1);
			assert_int_equal(d[0].id, 2);
			assert_int_equal(d[0].from_pos, 12);
			assert_false(d[0].truncated);
			free(d[0].text);
			break;
		}
	}
	assert_int_equal(r.npend, 0);
	assert_int_equal(r.used, walked_bytes(&r));   /* (texts evicted in the way of new ones) */
	/* asking for records that have left: the window says so */
	fill(&r, 200, 300);
	assert_int_equal(window_request(&r, 150, 300, 3000, 3, 0, 30), 3);
	window_collect(&r, 1, true, d, WINDOW_PENDING_MAX);
	assert_true(d[0].truncated);
	assert_non_null(strstr(d[0].text, "left the buffer"));
	free(d[0].text);
	window_ring_free(&r);
}

static void pending_limit(void **state)
{
	struct window_ring r = make("1");

	fill(&r, 1, 10000);
	for (uint64_t i = 0; i < WINDOW_PENDING_MAX; i++)
		assert_int_equal(window_request(&r, 0, 100 * (i + 1), 0, i + 1, 0, 30), i + 1);
	/* far from all of them and no room: no window */
	assert_int_equal(window_request(&r, 0, 9999, 0, 999, 0, 30), 0);
	window_ring_free(&r);
}

/* The checker reported on every record up to 2,000: records more than
 * BEFORE back from there, and not in a pending window, leave the ring, and
 * the ring gives its memory back; a later failure's window is whole. */
static void release_after_progress(void **state)
{
	struct window_ring r = make("500 after 5");
	struct window_done d[WINDOW_PENDING_MAX];
	size_t cap, bcap;

	fill(&r, 1, 20000);
	cap = r.cap;
	bcap = r.bcap;
	assert_true(r.n > 8000);
	assert_int_equal(r.used, walked_bytes(&r));
	window_release(&r, 20000 - 600);
	assert_int_equal(oldest_pos(&r), 20000 - 600 - 500);
	assert_int_equal(r.used, walked_bytes(&r));
	assert_true(r.cap < cap && r.cap >= r.n + 1);
	assert_true(r.bcap < bcap);
	/* a pending window holds its records back */
	assert_int_equal(window_request(&r, 19000, 19100, 191000, 3, 0, 30), 3);
	window_release(&r, 19999);
	assert_int_equal(oldest_pos(&r), 19000);
	fill(&r, 20001, 20010);
	assert_int_equal(window_collect(&r, 1, false, d, WINDOW_PENDING_MAX), 1);
	assert_false(d[0].truncated);
	check_text(&d[0], 19000, 19105);
	free(d[0].text);
	window_release(&r, 19999);
	assert_int_equal(oldest_pos(&r), 19999 - 500);
	assert_int_equal(r.used, walked_bytes(&r));
	/* the next failure (its end event after 19,999) still has its 500 */
	assert_int_equal(window_request(&r, 19000, 20005, 200050, 4, 0, 30), 4);
	assert_int_equal(window_collect(&r, 1, true, d, WINDOW_PENDING_MAX), 1);
	assert_false(d[0].truncated);
	assert_int_equal(d[0].from_pos, 20005 - 499);
	free(d[0].text);
	window_ring_free(&r);
}

/* By log time (records every 10 ms): what lies within BEFORE of the last
 * checked record stays. */
static void release_by_time(void **state)
{
	struct window_ring r = make("50 ms after 30 ms");

	fill(&r, 1, 1000);
	window_release(&r, 900);
	assert_int_equal(oldest_pos(&r), 895);
	window_ring_free(&r);
}

/* The text of record `pos` in random_ops: its length varies with pos,
 * now and then past a quarter of the ring (kept without text). */
static size_t random_text(uint64_t pos, unsigned seed, char *buf, size_t size)
{
	unsigned x = (unsigned)pos * 2654435761u ^ seed;
	size_t len = x % 7 == 0 ? 0 : x % 53 == 0 ? 20000 : x % 400;
	size_t n = (size_t)snprintf(buf, size, "Read %llu.000000000 %u", (unsigned long long)pos, x);

	/* (a length under the prefix's keeps the prefix's first bytes) */

	if (len > size - 1)
		len = size - 1;
	for (size_t i = n; i < len; i++)
		buf[i] = (char)('a' + (pos + i) % 26);
	return len;
}

static unsigned long long lines_checked;

/* Each line of a record in finished windows is that record's text
 * (random_text); the windows are freed. */
static void windows_hold_their_records(struct window_done *done, size_t nd, unsigned seed)
{
	static char want[20001];

	for (size_t i = 0; i < nd; i++) {
		const char *p = done[i].text, *end = p + done[i].len;
		while (p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
			unsigned long long pos;
			/* (a line shorter than its record's "Read P.000000000 X"
			 * may be a shorter record's: not compared) */
			if (n > 5 && !strncmp(p, "Read ", 5) && sscanf(p + 5, "%llu", &pos) == 1) {
				size_t len = random_text(pos, seed, want, sizeof want);
				char prefix[64];
				int np = snprintf(prefix, sizeof prefix, "Read %llu.000000000 %u", pos,
						  (unsigned)pos * 2654435761u ^ seed);
				if (n >= (size_t)np && !memcmp(p, prefix, (size_t)np)) {
					assert_int_equal(n, len);
					assert_memory_equal(p, want, len);
					lines_checked++;
				}
			}
			p += n + 1;
		}
		free(done[i].text);
	}
}

/* Random pushes, gaps, windows and releases on a small ring (its texts
 * wrap and grow often): after every step each kept record's text is the
 * one pushed, and `used` is what they occupy. A push that wrote over a
 * text still kept (window_push's oldest_off..oldest_end wrong) fails here. */
static void random_ops(void **state)
{
	static char text[20001];
	char t2[20001];

	unsigned long long windows = 0;

	(void)state;
	for (unsigned seed = 1; seed <= 40; seed++) {
		struct window_ring r = make(seed % 2 ? "40" : "30 ms after 5");
		struct window_done done[WINDOW_PENDING_MAX];
		uint64_t pos = 0, id = 0;
		unsigned x = seed;

		r.bmax = 16384 * (1 + seed % 3);
		for (int step = 0; step < 6000; step++) {
			size_t nd = 0;
			x = x * 1103515245u + 12345u;
			if ((x >> 8) % 97 == 0) {
				assert_int_equal(window_push_gap(&r, pos, 1 + (x >> 16) % 5), 0);
			} else if ((x >> 8) % 89 == 0 && pos > 10) {
				window_request(&r, pos - 10, pos - 2, (int64_t)pos * 1000000, ++id, step, 30);
			} else if ((x >> 8) % 13 == 0) {
				window_release(&r, pos > 30 ? pos - (x >> 16) % 30 : 0);
			} else {
				size_t len = random_text(++pos, seed, text, sizeof text);
				assert_int_equal(window_push(&r, pos, (int64_t)pos * 1000000, text, len,
							     done, WINDOW_PENDING_MAX, &nd), 0);
			}
			windows_hold_their_records(done, nd, seed);
			nd = window_collect(&r, step, false, done, WINDOW_PENDING_MAX);
			windows_hold_their_records(done, nd, seed);
			for (size_t i = 0; i < r.n; i++) {
				const struct window_rec *w = rec_at(&r, i);
				size_t len;
				if (window_rec_gap(w) || w->off == NO_TEXT)
					continue;
				len = random_text(w->pos, seed, t2, sizeof t2);
				assert_int_equal(w->len, len);
				assert_true(w->off + len <= r.bcap);
				if (len)
					assert_memory_equal(r.bytes + w->off, t2, len);
			}
			assert_int_equal(r.used, walked_bytes(&r));
		}
		windows_hold_their_records(done, window_collect(&r, 1e9, true, done,
								WINDOW_PENDING_MAX), seed);
		windows += id;
		window_ring_free(&r);
	}
	print_message("%llu windows finished; their %llu lines of records were the records' "
		      "texts\n", windows, lines_checked);
	assert_true(windows > 1000 && lines_checked > 10000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(spec_parsing),
		cmocka_unit_test(from_start_event),
		cmocka_unit_test(last_n_before_end),
		cmocka_unit_test(waits_for_after),
		cmocka_unit_test(by_time),
		cmocka_unit_test(merging),
		cmocka_unit_test(gaps_and_truncation),
		cmocka_unit_test(pending_limit),
		cmocka_unit_test(release_after_progress),
		cmocka_unit_test(release_by_time),
		cmocka_unit_test(random_ops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
