/* Unit tests for the telemonitor's stream follower
 * (daemons/telemonitor/logscan.c): records are numbered as pcheck numbers
 * them (malformed ones included, blank and comment lines not), records
 * split across chunks are put back together, the header is kept for tools
 * that start late, and binary records become cmon-ascii lines. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../daemons/telemonitor/logscan.c"

/* What the callback saw. */
struct seen {
	int n;                    /* records */
	uint64_t pos[32];         /* their ordinals */
	int64_t ts[32];           /* timestamps */
	char text[32][128];       /* texts */
	uint64_t gap[32];         /* gap counts (0: a record) */
};

static void collect(void *arg, const struct logscan_rec *r)
{
	struct seen *s = arg;

	assert_true(s->n < 32);
	s->pos[s->n] = r->pos;
	s->ts[s->n] = r->ts;
	s->gap[s->n] = r->is_gap ? r->gap : 0;
	snprintf(s->text[s->n], sizeof s->text[0], "%.*s", (int)r->len, r->text ? r->text : "");
	s->n++;
}

static void feed(struct logscan *ls, const char *text, struct seen *s)
{
	assert_int_equal(logscan_data(ls, (const uint8_t *)text, strlen(text), collect, s), 0);
}

static void ascii_records(void **state)
{
	struct logscan ls;
	struct seen s = { 0 };
	const char *hdr = "#cmon-ascii 1\n#program demo\n#tick-ns 1000\n";

	logscan_init(&ls, CMON__FORMAT__FORMAT_ASCII);
	assert_int_equal(logscan_header(&ls, (const uint8_t *)hdr, strlen(hdr)), 0);
	assert_true(ls.tick_ns == 1000);
	feed(&ls, "100 1 Ev 1\n\n# a comment\n  \n200 1 Ev", &s);
	assert_int_equal(s.n, 1);
	feed(&ls, " 2\nbad line here\n#cmon-gap 5\n", &s);
	assert_int_equal(s.n, 4);
	assert_int_equal(s.pos[0], 1);
	assert_string_equal(s.text[1], "200 1 Ev 2");
	assert_int_equal(s.pos[1], 2);
	assert_int_equal(s.ts[1], 200);
	assert_int_equal(s.pos[2], 3);               /* malformed: counted, pcheck skips it */
	assert_int_equal(s.ts[2], 200);
	assert_int_equal(s.gap[3], 5);               /* a gap after record 3 */
	assert_int_equal(s.pos[3], 3);
	/* the next record: 4, its \r gone */
	s.n = 0;
	feed(&ls, "300\t2 Ev 3\r\n", &s);
	assert_int_equal(s.pos[0], 4);
	assert_string_equal(s.text[0], "300\t2 Ev 3");
	assert_int_equal(ls.pos, 4);
	assert_true(ls.ahlen == strlen(hdr) && !memcmp(ls.ascii_hdr, hdr, ls.ahlen));
	/* timestamps of 19 digits (CLOCK_REALTIME in ns) are read, up to
	 * INT64_MAX, as pcheck reads them; beyond, the last one stands */
	s.n = 0;
	feed(&ls, "1795935634718120187 1 Ev 1\n9223372036854775807 1 Ev 2\n"
		  "9223372036854775808 1 Ev 3\n12345678901234567890 1 Ev 4\n", &s);
	assert_int_equal(s.n, 4);
	assert_true(s.ts[0] == 1795935634718120187LL);
	assert_true(s.ts[1] == INT64_MAX);
	assert_true(s.ts[2] == INT64_MAX);
	assert_true(s.ts[3] == INT64_MAX);
	logscan_free(&ls);
}

static void ascii_header_in_data(void **state)
{
	struct logscan ls;
	struct seen s = { 0 };

	/* snarflog accepted us before the header was complete */
	logscan_init(&ls, CMON__FORMAT__FORMAT_ASCII);
	feed(&ls, "#cmon-ascii 1\n#clock CLOCK_REALTIME\n#start-unix-ns 17\n5 1 Ev\n#late 1\n", &s);
	assert_int_equal(s.n, 1);
	assert_true(ls.realtime);
	assert_int_equal(ls.start_unix_ns, 17);
	assert_string_equal(ls.ascii_hdr, "#cmon-ascii 1\n#clock CLOCK_REALTIME\n#start-unix-ns 17\n");
	assert_int_equal(ls.rlen, ls.ahlen);         /* the replay header is the same text */
	logscan_free(&ls);
}

static size_t frame(uint8_t *out, const Cmonlog__Record *r)
{
	size_t n = cmonlog__record__get_packed_size(r);

	assert_true(n < 127);
	out[0] = (uint8_t)n;
	cmonlog__record__pack(r, out + 1);
	return n + 1;
}

static void binary_records(void **state)
{
	uint8_t buf[1024];
	size_t len = 0;
	struct logscan ls;
	struct seen s = { 0 };
	Cmonlog__Record r = CMONLOG__RECORD__INIT;
	Cmonlog__Header h = CMONLOG__HEADER__INIT;
	Cmonlog__TypeDef td = CMONLOG__TYPE_DEF__INIT;
	Cmonlog__Event ev = CMONLOG__EVENT__INIT;
	Cmonlog__Gap gap = CMONLOG__GAP__INIT;
	double vals[2] = { 4096, 0.25 };

	h.magic = "cmon-bin";
	h.program = "fsread";
	h.has_pid = true;
	h.pid = 42;
	h.has_tick_ns = true;
	h.tick_ns = 1;
	r.kind_case = CMONLOG__RECORD__KIND_HEADER;
	r.header = &h;
	len += frame(buf + len, &r);
	td.has_id = true;
	td.id = 3;
	td.name = "StartRead";
	r.kind_case = CMONLOG__RECORD__KIND_TYPEDEF;
	r.typedef_ = &td;
	len += frame(buf + len, &r);
	td.id = 0;
	td.name = "Zero";
	size_t hdr_len = len + frame(buf + len, &r);

	logscan_init(&ls, CMON__FORMAT__FORMAT_BINARY);
	assert_int_equal(logscan_header(&ls, buf, hdr_len), 0);
	assert_string_equal(ls.ascii_hdr, "#cmon-ascii 1\n#program fsread\n#pid 42\n#tick-ns 1\n");
	assert_int_equal(ls.rlen, hdr_len);

	len = 0;
	ev.has_type = true;
	ev.type = 3;
	ev.has_thread = true;
	ev.thread = 7;
	ev.has_ts = true;
	ev.ts = 1000;
	ev.n_values = 2;
	ev.values = vals;
	r.kind_case = CMONLOG__RECORD__KIND_EVENT;
	r.event = &ev;
	len += frame(buf + len, &r);
	ev.type = 9;                                   /* never defined */
	len += frame(buf + len, &r);
	gap.has_count = true;
	gap.count = 2;
	r.kind_case = CMONLOG__RECORD__KIND_GAP;
	r.gap = &gap;
	len += frame(buf + len, &r);
	/* integral values as Event.ivalues, ts as a delta */
	int64_t ivals[2] = { 8192, -3 };
	ev.type = 3;
	ev.has_ts = false;
	ev.has_ts_delta = true;
	ev.ts_delta = 5;
	ev.n_values = 0;
	ev.n_ivalues = 2;
	ev.ivalues = ivals;
	r.kind_case = CMONLOG__RECORD__KIND_EVENT;
	r.event = &ev;
	len += frame(buf + len, &r);
	/* no type: type 0, protobuf's default */
	ev.has_type = false;
	ev.type = 0;
	len += frame(buf + len, &r);
	/* in two chunks, cut inside the first frame */
	assert_int_equal(logscan_data(&ls, buf, 5, collect, &s), 0);
	assert_int_equal(s.n, 0);
	assert_int_equal(logscan_data(&ls, buf + 5, len - 5, collect, &s), 0);
	assert_int_equal(s.n, 5);
	assert_string_equal(s.text[3], "1005 7 StartRead 8192 -3");
	assert_string_equal(s.text[4], "1010 7 Zero 8192 -3");
	assert_string_equal(s.text[0], "1000 7 StartRead 4096 0.25");
	assert_int_equal(s.pos[0], 1);
	assert_int_equal(s.pos[1], 2);               /* unknown type: counted, no text */
	assert_string_equal(s.text[1], "");
	assert_int_equal(ls.malformed, 1);
	assert_int_equal(s.gap[2], 2);
	logscan_free(&ls);
}

static void over_long_line(void **state)
{
	struct logscan ls;
	struct seen s = { 0 };
	size_t n = LOGSCAN_RECORD_MAX + 100;
	char *big = malloc(n);

	memset(big, '1', n);
	logscan_init(&ls, CMON__FORMAT__FORMAT_ASCII);
	feed(&ls, "#cmon-ascii 1\n1 1 Ev\n", &s);
	assert_int_equal(logscan_data(&ls, (const uint8_t *)big, n, collect, &s), 0);
	feed(&ls, " 1 Ev\n2 1 Ev\n", &s);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.pos[1], 3);               /* the long line counted, like pcheck */
	free(big);
	logscan_free(&ls);
}

/* --- any cut gives the same records ------------------------------------------ */

#define CUT_RECS 4000

/* Every record seen, as one list. */
struct all {
	size_t n;
	uint64_t pos[CUT_RECS];
	int64_t ts[CUT_RECS];
	uint64_t gap[CUT_RECS];
	uint64_t hash[CUT_RECS];   /* FNV-1a of the text, and its length */
	size_t len[CUT_RECS];
};

static void collect_all(void *arg, const struct logscan_rec *r)
{
	struct all *a = arg;
	uint64_t h = 1469598103934665603u;

	assert_true(a->n < CUT_RECS);
	for (size_t i = 0; i < r->len; i++)
		h = (h ^ (uint8_t)r->text[i]) * 1099511628211u;
	a->pos[a->n] = r->pos;
	a->ts[a->n] = r->ts;
	a->gap[a->n] = r->is_gap ? r->gap : 0;
	a->hash[a->n] = h;
	a->len[a->n] = r->len;
	a->n++;
}

/* A log of every kind of line: records short and long (some longer than
 * LOGSCAN_RECORD_MAX), blank lines, comments, gap markers, CRLF endings,
 * malformed lines, an unterminated last one. */
static char *random_log(unsigned seed, size_t *len)
{
	size_t cap = 1u << 23, n = 0;
	char *p = malloc(cap);
	unsigned x = seed;

	assert_non_null(p);
	n += (size_t)snprintf(p, cap, "#cmon-ascii 1\n#program cut\n#tick-ns 1000\n");
	for (int i = 0; i < 2500 && n < cap - LOGSCAN_RECORD_MAX - 200; i++) {
		x = x * 1103515245u + 12345u;
		switch ((x >> 8) % 16) {
		case 0:
			p[n++] = '\n';
			break;
		case 1:
			n += (size_t)snprintf(p + n, cap - n, "# a comment %u\n", x);
			break;
		case 2:
			n += (size_t)snprintf(p + n, cap - n, "#cmon-gap %u\n", 1 + (x >> 12) % 9);
			break;
		case 3:
			n += (size_t)snprintf(p + n, cap - n, "not a record %u\r\n", x);
			break;
		case 4:
			if (i == 700 || i == 1800) {    /* longer than a record may be */
				size_t k = LOGSCAN_RECORD_MAX + (x >> 16) % 300;
				memset(p + n, '7', k);
				n += k;
				p[n++] = '\n';
				break;
			}
			/* fall through */
		default: {
			size_t k = (x >> 12) % 600;
			n += (size_t)snprintf(p + n, cap - n, "%d %u Ev%u", 1000 * i, x % 4, x % 3);
			for (size_t j = 0; j < k; j++)
				p[n++] = (char)('a' + (i + j) % 26);
			if ((x >> 20) % 5 == 0)
				p[n++] = '\r';
			p[n++] = '\n';
		}
		}
	}
	n += (size_t)snprintf(p + n, cap - n, "999999 1 Last");    /* no newline */
	*len = n;
	return p;
}

/* Feed `log` to a fresh follower of `fmt` (after `hdr`, if any) in random
 * cuts of 1..most bytes, and check it gives what `whole` saw, and that
 * each cut's tally (logscan_data_tally) is cmon_log_tally's. */
static void same_in_cuts(Cmon__Format fmt, const uint8_t *hdr, size_t hlen, const uint8_t *log,
			 size_t len, size_t most, unsigned *x, const struct all *whole)
{
	static struct all cut;
	struct logscan ls;
	size_t at = 0;

	memset(&cut, 0, sizeof cut);
	logscan_init(&ls, fmt);
	if (hdr)
		assert_int_equal(logscan_header(&ls, hdr, hlen), 0);
	while (at < len) {
		size_t k;
		*x = *x * 1103515245u + 12345u;
		k = 1 + (*x >> 8) % most;
		if (k > len - at)
			k = len - at;
		struct cmon_tally got = { 0 }, want = { 0 };
		assert_int_equal(logscan_data_tally(&ls, log + at, k, collect_all, &cut, &got), 0);
		/* the chunk stands for what cmon_log_tally says it does */
		cmon_log_tally(fmt, log + at, k, SIZE_MAX, &want);
		assert_true(got.events == want.events && got.gap == want.gap &&
			    got.markers == want.markers);
		at += k;
	}
	assert_int_equal(cut.n, whole->n);
	for (size_t i = 0; i < whole->n; i++) {
		assert_int_equal(cut.pos[i], whole->pos[i]);
		assert_int_equal(cut.ts[i], whole->ts[i]);
		assert_int_equal(cut.gap[i], whole->gap[i]);
		assert_int_equal(cut.len[i], whole->len[i]);
		assert_int_equal(cut.hash[i], whole->hash[i]);
	}
	logscan_free(&ls);
}

/* The log fed whole, then in random cuts of 1..4096 bytes and of 1..16:
 * the same records, the same texts, the same count. */
static void any_cut(void **state)
{
	static struct all whole;
	size_t bytes = 0, records = 0;

	(void)state;
	for (unsigned seed = 1; seed <= 12; seed++) {
		size_t len;
		char *log = random_log(seed, &len);
		struct logscan ls;
		unsigned x = seed * 7919u;

		memset(&whole, 0, sizeof whole);
		logscan_init(&ls, CMON__FORMAT__FORMAT_ASCII);
		assert_int_equal(logscan_data(&ls, (const uint8_t *)log, len, collect_all, &whole), 0);
		logscan_free(&ls);
		assert_true(whole.n > 1500);
		same_in_cuts(CMON__FORMAT__FORMAT_ASCII, NULL, 0, (const uint8_t *)log, len, 4096, &x,
			     &whole);
		same_in_cuts(CMON__FORMAT__FORMAT_ASCII, NULL, 0, (const uint8_t *)log, len, 16, &x,
			     &whole);
		bytes += len;
		records += whole.n;
		free(log);
	}
	print_message("%zu bytes, %zu records and gaps, each log fed whole and in two ways of "
		      "random cuts: the same\n", bytes, records);
}

/* A cmon-bin log's records after its header: events of defined and
 * undefined types, with timestamps and deltas, float and integer values,
 * gaps, and TypeDefs on the way. */
static uint8_t *random_bin(unsigned seed, size_t *len)
{
	size_t cap = 1u << 20, n = 0;
	uint8_t *p = malloc(cap);
	unsigned x = seed;
	char name[32];

	assert_non_null(p);
	for (int i = 0; i < 3000; i++) {
		Cmonlog__Record r = CMONLOG__RECORD__INIT;
		Cmonlog__TypeDef td = CMONLOG__TYPE_DEF__INIT;
		Cmonlog__Event ev = CMONLOG__EVENT__INIT;
		Cmonlog__Gap gap = CMONLOG__GAP__INIT;
		double vals[3] = { 1.5 * i, -2, 0.125 };
		int64_t ivals[2] = { i, -i };

		x = x * 1103515245u + 12345u;
		if ((x >> 8) % 29 == 0) {
			td.has_id = true;
			td.id = 1 + (x >> 12) % 6;
			snprintf(name, sizeof name, "T%u_%d", td.id, i);
			td.name = name;
			r.kind_case = CMONLOG__RECORD__KIND_TYPEDEF;
			r.typedef_ = &td;
		} else if ((x >> 8) % 23 == 0) {
			gap.has_count = true;
			gap.count = 1 + (x >> 12) % 7;
			r.kind_case = CMONLOG__RECORD__KIND_GAP;
			r.gap = &gap;
		} else {
			ev.has_type = (x >> 12) % 9 != 0;
			ev.type = (x >> 14) % 8;
			ev.has_thread = true;
			ev.thread = (x >> 16) % 4;
			if ((x >> 18) % 2) {
				ev.has_ts = true;
				ev.ts = 1000000 + 1000 * i;
			} else {
				ev.has_ts_delta = true;
				ev.ts_delta = 1000;
			}
			if ((x >> 19) % 2) {
				ev.n_values = (x >> 20) % 4;
				ev.values = vals;
			} else {
				ev.n_ivalues = (x >> 20) % 3;
				ev.ivalues = ivals;
			}
			r.kind_case = CMONLOG__RECORD__KIND_EVENT;
			r.event = &ev;
		}
		n += frame(p + n, &r);
	}
	*len = n;
	return p;
}

/* The same for cmon-bin: fed whole, and in random cuts of 1..64 and 1..3
 * bytes (inside the length and the body of a frame). */
static void any_cut_binary(void **state)
{
	static struct all whole;
	Cmonlog__Record r = CMONLOG__RECORD__INIT;
	Cmonlog__Header h = CMONLOG__HEADER__INIT;
	uint8_t hdr[128];
	size_t hlen, records = 0;

	(void)state;
	h.magic = "cmon-bin";
	h.program = "cut";
	h.has_tick_ns = true;
	h.tick_ns = 1;
	r.kind_case = CMONLOG__RECORD__KIND_HEADER;
	r.header = &h;
	hlen = frame(hdr, &r);
	for (unsigned seed = 1; seed <= 12; seed++) {
		size_t len;
		uint8_t *log = random_bin(seed, &len);
		struct logscan ls;
		unsigned x = seed * 104729u;

		memset(&whole, 0, sizeof whole);
		logscan_init(&ls, CMON__FORMAT__FORMAT_BINARY);
		assert_int_equal(logscan_header(&ls, hdr, hlen), 0);
		assert_int_equal(logscan_data(&ls, log, len, collect_all, &whole), 0);
		logscan_free(&ls);
		assert_true(whole.n > 2500);
		same_in_cuts(CMON__FORMAT__FORMAT_BINARY, hdr, hlen, log, len, 64, &x, &whole);
		same_in_cuts(CMON__FORMAT__FORMAT_BINARY, hdr, hlen, log, len, 3, &x, &whole);
		records += whole.n;
		free(log);
	}
	print_message("%zu cmon-bin records and gaps fed whole and in random cuts: the same\n",
		      records);
}

/* Timestamps of 1 to 21 digits (cmon_scan_digits19's word path from 16
 * bytes of line on, its byte loop below that), each line also alone in a
 * heap block of exactly its length (ASan: nothing read past the line):
 * the same value as a byte loop, and a timestamp of 20 digits or more
 * leaves the last one in place, as pcheck does. */
static void timestamps(void **state)
{
	static const char *tails[] = { " 1 Ev 1", " 1", "\t1", "x 1 Ev", "", " 1 Ev 1 0.5 0.5 0.5" };
	const char *digits = "918273645501928374659";
	uint64_t checked = 0;

	(void)state;
	for (size_t nd = 1; nd <= 21; nd++) {
		for (size_t k = 0; k < sizeof tails / sizeof tails[0]; k++) {
			char line[64];
			int n = snprintf(line, sizeof line, "%.*s%s", (int)nd, digits, tails[k]);
			uint64_t want = 0, got;
			size_t i = 0, used;
			char *exact = malloc((size_t)n);
			struct logscan ls;
			struct seen s = { 0 };
			char fed[80];

			assert_non_null(exact);
			while (i < (size_t)n && i < 19 && line[i] >= '0' && line[i] <= '9')
				want = want * 10 + (uint64_t)(line[i++] - '0');
			memcpy(exact, line, (size_t)n);
			used = cmon_scan_digits19(exact, exact + n, &got);
			assert_int_equal(used, i);
			assert_true(got == want);
			free(exact);

			/* through the scanner: a timestamp only when a blank follows */
			logscan_init(&ls, CMON__FORMAT__FORMAT_ASCII);
			ls.last_ts = 7;
			snprintf(fed, sizeof fed, "%s\n", line);
			feed(&ls, fed, &s);
			assert_int_equal(s.n, 1);
			if (i < (size_t)n && (line[i] == ' ' || line[i] == '\t') && want <= INT64_MAX)
				assert_true(s.ts[0] == (int64_t)want);
			else
				assert_true(s.ts[0] == 7);
			logscan_free(&ls);
			checked++;
		}
	}
	print_message("%llu timestamps of 1 to 21 digits: as a byte loop reads them\n",
		      (unsigned long long)checked);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ascii_records),
		cmocka_unit_test(ascii_header_in_data),
		cmocka_unit_test(binary_records),
		cmocka_unit_test(over_long_line),
		cmocka_unit_test(any_cut),
		cmocka_unit_test(any_cut_binary),
		cmocka_unit_test(timestamps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
