/* Unit tests for cmon/logfmt.h: format detection, binary frame and record
 * scanning, timestamps, record counting and gap markers. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "cmon/logfmt.h"
#include "cmonlog.pb-c.h"

/* Pack a Record into `buf` with its varint prefix (short records only). */
static size_t frame_record(const Cmonlog__Record *r, uint8_t *buf)
{
	size_t n = cmonlog__record__pack(r, buf + 1);
	buf[0] = (uint8_t)n;
	return n + 1;
}

static size_t event_frame(uint8_t *buf, bool abs, int64_t t)
{
	Cmonlog__Record r = CMONLOG__RECORD__INIT;
	Cmonlog__Event e = CMONLOG__EVENT__INIT;
	double v[2] = { 1.5, 2 };

	e.has_type = true;
	e.type = 3;
	if (abs) {
		e.has_ts = true;
		e.ts = (uint64_t)t;
	} else {
		e.has_ts_delta = true;
		e.ts_delta = t;
	}
	e.n_values = 2;
	e.values = v;
	r.kind_case = CMONLOG__RECORD__KIND_EVENT;
	r.event = &e;
	return frame_record(&r, buf);
}

static void detect(void **state)
{
	uint8_t buf[64];
	Cmonlog__Record r = CMONLOG__RECORD__INIT;
	Cmonlog__Header h = CMONLOG__HEADER__INIT;
	size_t n;

	h.magic = "cmon-bin";
	r.kind_case = CMONLOG__RECORD__KIND_HEADER;
	r.header = &h;
	n = frame_record(&r, buf);
	assert_int_equal(cmon_log_detect(buf, n, false), CMON__FORMAT__FORMAT_BINARY);
	assert_int_equal(cmon_log_detect(buf, 1, false), CMON__FORMAT__FORMAT_UNSPECIFIED);
	assert_int_equal(cmon_log_detect((const uint8_t *)"#cmon-ascii 1\n", 14, false),
			 CMON__FORMAT__FORMAT_ASCII);
	/* '#' is also a plausible varint length: the second byte decides. */
	assert_int_equal(cmon_log_detect((const uint8_t *)"#program x\n", 11, false),
			 CMON__FORMAT__FORMAT_ASCII);
	assert_int_equal(cmon_log_detect((const uint8_t *)"1000 7 Ev\n", 10, false),
			 CMON__FORMAT__FORMAT_ASCII);
	assert_int_equal(cmon_log_detect(NULL, 0, false), CMON__FORMAT__FORMAT_UNSPECIFIED);
	assert_int_equal(cmon_log_detect(NULL, 0, true), CMON__FORMAT__FORMAT_ASCII);
}

static void frames_and_kinds(void **state)
{
	uint8_t buf[64];
	size_t hdr;
	uint64_t body;
	size_t n = event_frame(buf, true, 1234);

	assert_int_equal(cmon_bin_frame(buf, n, &hdr, &body), 1);
	assert_int_equal(hdr + body, n);
	assert_int_equal(cmon_bin_record_kind(buf + hdr, (size_t)body), CMON_REC_EVENT);
	assert_int_equal(cmon_bin_frame(buf, 0, &hdr, &body), 0);
	assert_int_equal(cmon_bin_frame((const uint8_t *)"\xff\xff\xff\xff\xff\x01", 6, &hdr, &body), -1);
	/* A body cut short, a bad wire type, an empty record. */
	assert_int_equal(cmon_bin_record_kind(buf + hdr, (size_t)body - 1), CMON_REC_BAD);
	assert_int_equal(cmon_bin_record_kind((const uint8_t *)"\x1f", 1), CMON_REC_BAD);
	assert_int_equal(cmon_bin_record_kind(NULL, 0), CMON_REC_EMPTY);
}

static void event_times(void **state)
{
	uint8_t buf[64];
	size_t hdr;
	uint64_t body;
	struct cmon_event_time t;
	size_t n = event_frame(buf, false, -5);

	cmon_bin_frame(buf, n, &hdr, &body);
	assert_true(cmon_bin_event_time(buf + hdr, (size_t)body, &t));
	assert_false(t.has_ts);
	assert_true(t.has_delta);
	assert_int_equal(t.delta, -5);
	n = event_frame(buf, true, 1ll << 40);
	cmon_bin_frame(buf, n, &hdr, &body);
	assert_true(cmon_bin_event_time(buf + hdr, (size_t)body, &t));
	assert_true(t.has_ts && !t.has_delta);
	assert_true(t.ts == 1ull << 40);

	/* integral values in Event.ivalues, unpacked (a varint key 6) or
	 * packed, before and after the timestamp: walked over the same way */
	static const uint8_t iv[][16] = {
		{ 0x0a, 0x1a, 0x08, 0x08, 0x03, 0x20, 0x09, 0x30, 0x0e, 0x30, 0x01 },
		{ 0x0b, 0x1a, 0x09, 0x32, 0x03, 0x0e, 0x80, 0x40, 0x08, 0x03, 0x20, 0x09 },
	};
	for (int i = 0; i < 2; i++) {
		n = (size_t)iv[i][0] + 1;
		assert_int_equal(cmon_bin_frame(iv[i], n, &hdr, &body), 1);
		assert_int_equal(cmon_bin_record_scan(iv[i] + hdr, (size_t)body, &t), CMON_REC_EVENT);
		assert_true(t.has_delta && !t.has_ts);
		assert_int_equal(t.delta, -5);
	}
}

static void counting_and_gaps(void **state)
{
	uint8_t buf[256], marker[CMON_GAP_MARKER_MAX];
	size_t n = 0, whole, m;
	Cmonlog__Record *r;

	for (int i = 0; i < 3; i++)
		n += event_frame(buf + n, true, i);
	assert_int_equal(cmon_log_count_records(CMON__FORMAT__FORMAT_BINARY, buf, n - 2, &whole), 2);
	assert_true(whole < n - 2);
	assert_int_equal(cmon_log_count_records(CMON__FORMAT__FORMAT_BINARY, buf, n, &whole), 3);
	assert_int_equal(whole, n);
	assert_int_equal(cmon_log_count_records(CMON__FORMAT__FORMAT_ASCII,
						(const uint8_t *)"a\nb\nc", 5, &whole), 2);
	assert_int_equal(whole, 4);

	m = cmon_log_gap_marker(CMON__FORMAT__FORMAT_ASCII, 17, marker);
	assert_memory_equal(marker, "#cmon-gap 17\n", m);
	m = cmon_log_gap_marker(CMON__FORMAT__FORMAT_BINARY, UINT64_MAX, marker);
	assert_true(m <= CMON_GAP_MARKER_MAX);
	assert_int_equal(marker[0], m - 1);
	r = cmonlog__record__unpack(NULL, m - 1, marker + 1);
	assert_non_null(r);
	assert_int_equal(r->kind_case, CMONLOG__RECORD__KIND_GAP);
	assert_true(r->gap->count == UINT64_MAX);
	cmonlog__record__free_unpacked(r, NULL);
	assert_string_equal(cmon_format_name(CMON__FORMAT__FORMAT_BINARY), "binary");
}

/* Ascii lines counted 64 bytes at a time agree with one memchr per line,
 * for every length and newline placement around the 64-byte blocks; and
 * cmon_newlines64 marks exactly the newlines. */
static void counting_ascii_blocks(void **state)
{
	uint8_t buf[400];
	uint32_t seed = 12345;

	(void)state;
	for (int round = 0; round < 4000; round++) {
		size_t n = (size_t)(round % 331), whole, want_whole = 0;
		uint64_t want = 0;
		unsigned every = 1 + (unsigned)(round / 331) * 7;   /* newline density */

		for (size_t i = 0; i < n; i++) {
			seed = seed * 1103515245u + 12345u;
			buf[i] = (seed >> 16) % every == 0 ? '\n' : (uint8_t)('a' + (seed >> 8) % 26);
			if (buf[i] == '\n') {
				want++;
				want_whole = i + 1;
			}
		}
		if (cmon_log_count_records(CMON__FORMAT__FORMAT_ASCII, buf, n, &whole) != want ||
		    whole != want_whole)
			fail_msg("round %d, %zu bytes: %llu lines up to %zu, want %llu up to %zu", round,
				 n, (unsigned long long)cmon_log_count_records(CMON__FORMAT__FORMAT_ASCII,
									       buf, n, &whole),
				 whole, (unsigned long long)want, want_whole);
		if (n >= 64) {
			uint64_t m = cmon_newlines64(buf + n - 64);
			for (unsigned k = 0; k < 64; k++)
				assert_int_equal((m >> k) & 1, buf[n - 64 + k] == '\n');
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(detect),
		cmocka_unit_test(frames_and_kinds),
		cmocka_unit_test(event_times),
		cmocka_unit_test(counting_and_gaps),
		cmocka_unit_test(counting_ascii_blocks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
