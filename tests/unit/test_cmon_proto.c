/* Unit tests for cmon/proto.h: framing round trips and every way a frame
 * can be bad. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include <event2/buffer.h>

#include "cmon/proto.h"

static void roundtrip(void **state)
{
	struct evbuffer *b = evbuffer_new();
	const char *why = NULL;
	Cmon__Msg *m = NULL;
	Cmon__Role role;
	char err[100];

	assert_int_equal(cmon_send_hello(b, CMON__ROLE__ROLE_SNARFLOG, "x"), 0);
	assert_int_equal(cmon_send_subscribe(b, 7, "fs*", NULL, "1?", true, false), 0);
	assert_int_equal(cmon_send_error(b, CMON__ERROR_CODE__ERROR_LIMIT, "too %d", 5), 0);
	assert_int_equal(cmon_frame_next(b, CMON_CONTROL_FRAME_MAX, &m, &why), 1);
	assert_true(cmon_hello_ok(m, &role, err, sizeof err));
	assert_int_equal(role, CMON__ROLE__ROLE_SNARFLOG);
	assert_string_equal(cmon_msg_kind_name(m), "hello");
	cmon_msg_free(m);
	assert_int_equal(cmon_frame_next(b, CMON_CONTROL_FRAME_MAX, &m, &why), 1);
	assert_int_equal(m->kind_case, CMON__MSG__KIND_SUBSCRIBE);
	assert_int_equal(m->subscribe->id, 7);
	assert_string_equal(m->subscribe->program, "fs*");
	assert_true(m->subscribe->auto_);
	assert_false(cmon_hello_ok(m, &role, err, sizeof err));
	cmon_msg_free(m);
	assert_int_equal(cmon_frame_next(b, CMON_CONTROL_FRAME_MAX, &m, &why), 1);
	assert_string_equal(m->error->message, "too 5");
	cmon_msg_free(m);
	assert_int_equal(cmon_frame_next(b, CMON_CONTROL_FRAME_MAX, &m, &why), 0);
	evbuffer_free(b);
}

static void incomplete_then_complete(void **state)
{
	struct evbuffer *b = evbuffer_new(), *in = evbuffer_new();
	const char *why = NULL;
	Cmon__Msg *m = NULL;
	unsigned char byte;

	cmon_send_ping(b, false, 300);
	/* Feed one byte at a time: nothing until the last one. */
	while (evbuffer_remove(b, &byte, 1) == 1) {
		int r;
		evbuffer_add(in, &byte, 1);
		r = cmon_frame_next(in, CMON_CONTROL_FRAME_MAX, &m, &why);
		if (evbuffer_get_length(b) > 0)
			assert_int_equal(r, 0);
		else
			assert_int_equal(r, 1);
	}
	assert_int_equal(m->ping->nonce, 300);
	cmon_msg_free(m);
	evbuffer_free(b);
	evbuffer_free(in);
}

static void bad_frames(void **state)
{
	static const struct { const char *name; uint8_t bytes[12]; size_t len; int want; } cases[] = {
		{ "prefix too long", { 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 }, 6, -EBADMSG },
		{ "oversized", { 0x80, 0x80, 0x80, 0x01 }, 4, -EMSGSIZE },
		{ "undecodable", { 0x03, 0xff, 0xff, 0xff }, 4, -EBADMSG },
		{ "no kind", { 0x00 }, 1, -EBADMSG },
		{ "hello without version", { 0x02, 0x0a, 0x00 }, 3, -EBADMSG },
		{ "truncated body", { 0x05, 0x0a, 0x02 }, 3, 0 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const char *why = NULL;
		Cmon__Msg *m = NULL;
		size_t used = 0;
		int r = cmon_frame_decode(cases[i].bytes, cases[i].len, CMON_CONTROL_FRAME_MAX, &m,
					  &used, &why);
		print_message("%s -> %d (%s)\n", cases[i].name, r, why ? why : "");
		assert_int_equal(r, cases[i].want);
		assert_null(m);
		if (r < 0)
			assert_non_null(why);
	}
}

static void frame_limit_respected(void **state)
{
	static uint8_t big[CMON_CONTROL_FRAME_MAX + 100];
	struct evbuffer *b = evbuffer_new();
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__LogData d = CMON__LOG_DATA__INIT;
	const char *why = NULL;
	Cmon__Msg *got = NULL;

	d.has_data = true;
	d.data.data = big;
	d.data.len = sizeof big;
	m.kind_case = CMON__MSG__KIND_DATA;
	m.data = &d;
	assert_int_equal(cmon_frame_send(b, &m), 0);
	assert_int_equal(cmon_frame_next(b, CMON_CONTROL_FRAME_MAX, &got, &why), -EMSGSIZE);
	assert_int_equal(cmon_frame_next(b, CMON_FRAME_MAX, &got, &why), 1);
	assert_int_equal(got->data->data.len, sizeof big);
	cmon_msg_free(got);
	evbuffer_free(b);
}

/* Start carries the token as given, and none when there is none; an
 * epoch and a batch only when they are set (an older snarflog sees the
 * Start it always saw). */
static void start_token(void **state)
{
	static const uint8_t tok[4] = { 0, 1, 0xfe, 0xff };
	struct evbuffer *b = evbuffer_new();
	const char *why = NULL;
	Cmon__Msg *m = NULL;

	assert_int_equal(cmon_send_start(b, &(struct cmon_start){ .block = true, .token = tok,
								 .token_len = sizeof tok }), 0);
	assert_int_equal(cmon_send_start(b, &(struct cmon_start){ .from_start = true, .epoch = 7,
								 .batch_ms = 300 }), 0);
	assert_int_equal(cmon_frame_next(b, CMON_CONTROL_FRAME_MAX, &m, &why), 1);
	assert_int_equal(m->kind_case, CMON__MSG__KIND_START);
	assert_true(m->start->block);
	assert_true(m->start->has_token);
	assert_int_equal(m->start->token.len, sizeof tok);
	assert_memory_equal(m->start->token.data, tok, sizeof tok);
	assert_false(m->start->has_epoch);
	assert_false(m->start->has_batch_ms);
	cmon_msg_free(m);
	assert_int_equal(cmon_frame_next(b, CMON_CONTROL_FRAME_MAX, &m, &why), 1);
	assert_true(m->start->from_start);
	assert_false(m->start->has_token);
	assert_true(m->start->has_epoch);
	assert_int_equal(m->start->epoch, 7);
	assert_true(m->start->has_batch_ms);
	assert_int_equal(m->start->batch_ms, 300);
	cmon_msg_free(m);
	evbuffer_free(b);
}

/* A Proof is HMAC-SHA256(token, "cmon-proof-1" || challenge): checked
 * against known bytes, and refused for
 * another token, another challenge, or a truncated mac. */
static void proof_of_token(void **state)
{
	uint8_t tok[32], other[32], ch[32], mac[CMON_PROOF_LEN];
	struct evbuffer *b = evbuffer_new();
	const char *why = NULL;
	Cmon__Msg *m = NULL;

	for (int i = 0; i < 32; i++) {
		tok[i] = (uint8_t)i;
		other[i] = (uint8_t)(i + 1);
		ch[i] = (uint8_t)(0xa0 + i);
	}
	assert_int_equal(cmon_proof_compute(tok, sizeof tok, ch, sizeof ch, mac), 0);
	{
		/* HMAC-SHA256(key 00..1f, "cmon-proof-1" a0..bf), from Python's hmac */
		static const uint8_t want[CMON_PROOF_LEN] = {
			0x6c, 0x7b, 0x79, 0xd9, 0x66, 0x5c, 0xed, 0x83, 0x78, 0x3f, 0x8e,
			0x3c, 0x0e, 0x60, 0xb8, 0x85, 0xba, 0x13, 0x3c, 0x19, 0x70, 0xe5,
			0x5a, 0x32, 0xe8, 0x31, 0xa8, 0xa9, 0x50, 0xe0, 0x21, 0xe5,
		};
		assert_memory_equal(mac, want, sizeof want);
	}
	assert_int_equal(cmon_send_proof(b, tok, sizeof tok, ch, sizeof ch), 0);
	assert_int_equal(cmon_frame_next(b, CMON_CONTROL_FRAME_MAX, &m, &why), 1);
	assert_int_equal(m->kind_case, CMON__MSG__KIND_PROOF);
	assert_memory_equal(m->proof->mac.data, mac, sizeof mac);
	assert_true(cmon_proof_ok(m, tok, sizeof tok, ch, sizeof ch));
	assert_false(cmon_proof_ok(m, other, sizeof other, ch, sizeof ch));
	ch[0] ^= 1;
	assert_false(cmon_proof_ok(m, tok, sizeof tok, ch, sizeof ch));
	ch[0] ^= 1;
	m->proof->mac.len--;
	assert_false(cmon_proof_ok(m, tok, sizeof tok, ch, sizeof ch));
	m->proof->mac.len++;
	cmon_msg_free(m);
	/* Hello carries the challenge and the secret as given */
	assert_int_equal(cmon_send_hello_ext(b, CMON__ROLE__ROLE_TELEMONITOR, "x", ch, sizeof ch,
					     (const uint8_t *)"s3cret", 6), 0);
	assert_int_equal(cmon_frame_next(b, CMON_CONTROL_FRAME_MAX, &m, &why), 1);
	assert_true(m->hello->has_challenge && m->hello->challenge.len == sizeof ch);
	assert_memory_equal(m->hello->challenge.data, ch, sizeof ch);
	assert_true(m->hello->has_secret && m->hello->secret.len == 6);
	cmon_msg_free(m);
	/* a challenge longer than CMON_CHALLENGE_MAX is refused */
	{
		uint8_t big[CMON_CHALLENGE_MAX + 1] = { 0 };
		assert_int_equal(cmon_proof_compute(tok, sizeof tok, big, sizeof big, mac), -EINVAL);
	}
	evbuffer_free(b);
}

static void instance_checks(void **state)
{
	Cmon__Instance in = CMON__INSTANCE__INIT;
	char why[100];

	in.program = "fsread";
	in.machine = "host1";
	in.has_pid = true;
	in.pid = 42;
	in.data_endpoint = "127.0.0.1:5000";
	assert_true(cmon_instance_ok(&in, why, sizeof why));
	in.data_endpoint = ":5000";
	assert_true(cmon_instance_ok(&in, why, sizeof why));
	in.data_endpoint = "127.0.0.1:0";
	assert_false(cmon_instance_ok(&in, why, sizeof why));
	in.data_endpoint = "127.0.0.1:5000";
	in.program = "../x";
	assert_false(cmon_instance_ok(&in, why, sizeof why));
	assert_string_equal(why, "invalid program name");
	in.program = "ok";
	in.pid = 0;
	assert_false(cmon_instance_ok(&in, why, sizeof why));
	assert_false(cmon_instance_ok(NULL, why, sizeof why));
}

/* cmon_data_prefix and then the payload are the bytes cmon_frame_send
 * writes for the same LogData message, at every length where a varint of
 * the frame grows; both refuse a message longer than CMON_FRAME_MAX. */
static void data_prefix_is_the_frame(void **state)
{
	static const size_t lens[] = { 0, 1, 2, 122, 123, 124, 125, 126, 127, 128, 129,
				       16379, 16380, 16381, 16383, 16384, 16385, 262144,
				       2097145, 2097146, 2097147, 2097148, 2097152, 3000000,
				       CMON_FRAME_MAX - 11, CMON_FRAME_MAX - 10 };
	static uint8_t payload[CMON_FRAME_MAX - 10];

	(void)state;
	for (size_t i = 0; i < sizeof payload; i++)
		payload[i] = (uint8_t)(i * 13 + 5);
	for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
		size_t n = lens[k], plen;
		uint8_t pfx[CMON_DATA_PREFIX_MAX];
		Cmon__Msg m = CMON__MSG__INIT;
		Cmon__LogData d = CMON__LOG_DATA__INIT;
		struct evbuffer *out = evbuffer_new();
		const uint8_t *b;

		d.has_data = true;
		d.data.data = payload;
		d.data.len = n;
		m.kind_case = CMON__MSG__KIND_DATA;
		m.data = &d;
		plen = cmon_data_prefix(pfx, n);
		if (n + 11 > CMON_FRAME_MAX) {
			/* the message (n + 11 bytes here) is longer than a frame
			 * may be: both refuse it */
			assert_int_equal(plen, 0);
			assert_int_equal(cmon_frame_send(out, &m), -EMSGSIZE);
			evbuffer_free(out);
			continue;
		}
		assert_int_equal(cmon_frame_send(out, &m), 0);
		assert_true(plen > 0 && plen <= CMON_DATA_PREFIX_MAX);
		if (evbuffer_get_length(out) != plen + n)
			fail_msg("n = %zu: frame of %zu bytes, prefix %zu", n, evbuffer_get_length(out), plen);
		b = evbuffer_pullup(out, -1);
		if (memcmp(b, pfx, plen) != 0 || memcmp(b + plen, payload, n) != 0)
			fail_msg("n = %zu: bytes differ", n);
		evbuffer_free(out);
	}
}

/* cmon_frame_next takes LogData frames laid out as cmon_data_prefix writes
 * them without gathering them first; every frame, that layout or another
 * (a second field, a non-minimal length, an empty payload, other kinds),
 * comes out as cmon_frame_decode reads it, across evbuffer pieces. */
static void data_frames_taken_whole(void **state)
{
	static uint8_t payload[300000];
	struct evbuffer *in = evbuffer_new(), *all = evbuffer_new();
	static const size_t lens[] = { 1, 2, 127, 128, 16384, 262144, 300000, 0 };
	size_t nframes = 0;
	const uint8_t *flat;
	size_t flen, off = 0;

	(void)state;
	for (size_t i = 0; i < sizeof payload; i++)
		payload[i] = (uint8_t)(i * 31 + 7);
	for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
		uint8_t pfx[CMON_DATA_PREFIX_MAX];
		Cmon__Msg m = CMON__MSG__INIT;
		Cmon__LogData d = CMON__LOG_DATA__INIT;

		evbuffer_add(all, pfx, cmon_data_prefix(pfx, lens[k]));
		evbuffer_add(all, payload, lens[k]);
		d.has_data = true;
		d.data.data = payload;
		d.data.len = lens[k] / 2;
		m.kind_case = CMON__MSG__KIND_DATA;
		m.data = &d;
		cmon_frame_send(all, &m);
		nframes += 2;
	}
	{
		/* a non-minimal payload length (0x85 0x00 for 5), then a LogData
		 * with a second (unknown) field after its payload */
		static const uint8_t odd[] = { 11, 0x9a, 0x02, 8, 0x0a, 0x85, 0x00, 'a', 'b', 'c', 'd', 'e',
					       12, 0x9a, 0x02, 9, 0x0a, 3, 'x', 'y', 'z', 0x10, 0x01, 0x18, 0x02 };
		Cmon__Msg m = CMON__MSG__INIT;
		Cmon__Ping ping = CMON__PING__INIT;

		evbuffer_add(all, odd, sizeof odd);
		m.kind_case = CMON__MSG__KIND_PING;
		m.ping = &ping;
		cmon_frame_send(all, &m);
		nframes += 3;
	}
	flen = evbuffer_get_length(all);
	flat = evbuffer_pullup(all, -1);
	for (size_t got = 0, fed = 0; got < nframes;) {
		Cmon__Msg *a, *b;
		const char *why = NULL;
		size_t used;
		int r = cmon_frame_next(in, CMON_FRAME_MAX, &a, &why);

		if (r == 0) {
			size_t piece = fed % 3 == 0 ? 4093 : fed % 3 == 1 ? 7 : 65536;
			assert_true(fed < flen);
			if (piece > flen - fed)
				piece = flen - fed;
			evbuffer_add(in, flat + fed, piece);
			fed += piece;
			continue;
		}
		assert_int_equal(r, 1);
		assert_int_equal(cmon_frame_decode(flat + off, flen - off, CMON_FRAME_MAX, &b, &used, &why), 1);
		off += used;
		assert_int_equal(a->kind_case, b->kind_case);
		if (a->kind_case == CMON__MSG__KIND_DATA) {
			assert_int_equal(a->data->has_data, b->data->has_data);
			assert_int_equal(a->data->data.len, b->data->data.len);
			if (a->data->data.len)
				assert_memory_equal(a->data->data.data, b->data->data.data, a->data->data.len);
		}
		cmon_msg_free(a);
		cmon_msg_free(b);
		got++;
	}
	assert_int_equal(off, flen);
	assert_int_equal(evbuffer_get_length(in), 0);
	evbuffer_free(in);
	evbuffer_free(all);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(roundtrip),
		cmocka_unit_test(incomplete_then_complete),
		cmocka_unit_test(bad_frames),
		cmocka_unit_test(frame_limit_respected),
		cmocka_unit_test(start_token),
		cmocka_unit_test(instance_checks),
		cmocka_unit_test(proof_of_token),
		cmocka_unit_test(data_prefix_is_the_frame),
		cmocka_unit_test(data_frames_taken_whole),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
