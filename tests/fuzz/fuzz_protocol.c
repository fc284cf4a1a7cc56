/* fuzz_protocol.c — the wire protocol decoder (cmon/proto.h) on arbitrary
 * bytes, as any peer of telemonreg or snarflog could send them.
 *
 * The input is split into frames twice — by cmon_frame_decode() over the
 * whole buffer and by cmon_frame_next() over an evbuffer fed in small
 * pieces — and both must agree. Every decoded message goes through what a
 * daemon does with it: name, endpoint and pattern validation, matching,
 * the registry's endpoint rules (compiled in from daemons/registry), token
 * comparison, and a re-encode/decode round trip that must reproduce the
 * same bytes. LogData payloads go through the log-format scanners. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "cmon/logfmt.h"
#include "cmon/names.h"
#include "cmon/net.h"
#include "cmon/proto.h"
#include "cmon/token.h"

#include "../../daemons/registry/endpoint.c"

#define MUST(c) do { if (!(c)) { fprintf(stderr, "fuzz_protocol: %s\n", #c); abort(); } } while (0)

/* The registry's endpoint rules for an announce from a remote peer: a
 * passed-on endpoint is that peer's own address, nothing else. */
static void endpoint_rules(const char *ep)
{
	struct sockaddr_in remote = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0xc0000207) };
	struct sockaddr_in6 lo6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	char out[CMON_ADDRSTR_MAX], why[400];
	struct cmon_addr a;

	if (endpoint_check(ep, (struct sockaddr *)&remote, "/nonexistent-fuzz-dir", out,
			   sizeof out, why, sizeof why) == 0) {
		MUST(cmon_addr_parse(out, 0, &a) == 0);
		MUST(a.kind == CMON_ADDR_TCP && strcmp(a.host, "192.0.2.7") == 0);
	}
	if (endpoint_check(ep, (struct sockaddr *)&lo6, NULL, out, sizeof out, why,
			   sizeof why) == 0) {
		MUST(cmon_addr_parse(out, 0, &a) == 0);
		MUST(a.kind == CMON_ADDR_TCP && cmon_addr_is_local(&a));
	}
}

/* What a daemon does with a message; must never crash. */
static void exercise(const Cmon__Msg *m)
{
	char why[200];
	struct cmon_addr a;
	Cmon__Role role;
	size_t whole;

	(void)cmon_msg_kind_name(m);
	(void)cmon_hello_ok(m, &role, why, sizeof why);
	switch (m->kind_case) {
	case CMON__MSG__KIND_ANNOUNCE:
		if (cmon_instance_ok(m->announce->instance, why, sizeof why)) {
			MUST(cmon_name_valid(m->announce->instance->program));
			MUST(cmon_addr_parse(m->announce->instance->data_endpoint, 0, &a) == 0);
			endpoint_rules(m->announce->instance->data_endpoint);
		}
		break;
	case CMON__MSG__KIND_START: {
		static const uint8_t want[CMON_TOKEN_LEN];
		const Cmon__Start *st = m->start;
		bool eq = cmon_token_equal(want, st->has_token ? st->token.data : NULL,
					   st->has_token ? st->token.len : 0);
		MUST(eq == (st->has_token && st->token.len == CMON_TOKEN_LEN &&
			    memcmp(st->token.data, want, CMON_TOKEN_LEN) == 0));
		break;
	}
	case CMON__MSG__KIND_SUBSCRIBE: {
		const Cmon__Subscribe *s = m->subscribe;
		if (cmon_pattern_valid(s->program) && cmon_pattern_valid(s->machine) &&
		    cmon_pid_pattern_valid(s->pid)) {
			(void)cmon_pattern_match(s->program, "fsread");
			(void)cmon_pattern_match(s->machine, "host.example");
			(void)cmon_pattern_match(s->pid, "12345");
		}
		break;
	}
	case CMON__MSG__KIND_INSTANCE_UP:
		if (m->instance_up->instance)
			(void)cmon_instance_ok(m->instance_up->instance, why, sizeof why);
		break;
	case CMON__MSG__KIND_DATA:
		if (m->data->has_data) {
			const uint8_t *p = m->data->data.data;
			size_t n = m->data->data.len;
			(void)cmon_log_count_records(CMON__FORMAT__FORMAT_ASCII, p, n, &whole);
			(void)cmon_log_count_records(CMON__FORMAT__FORMAT_BINARY, p, n, &whole);
			(void)cmon_log_detect(p, n, true);
			/* The one-pass scanner agrees with the two-step one. */
			{
				struct cmon_event_time t1 = { 0 }, t2 = { 0 };
				enum cmon_rec_kind k1 = cmon_bin_record_kind(p, n);
				enum cmon_rec_kind k2 = cmon_bin_record_scan(p, n, &t2);
				if (k1 == CMON_REC_EVENT) {
					bool ok = cmon_bin_event_time(p, n, &t1);
					MUST(k2 == (ok ? CMON_REC_EVENT : CMON_REC_BAD));
					if (ok && t2.has_ts)
						MUST(t1.has_ts && t1.ts == t2.ts);
				} else {
					MUST(k1 == k2);
				}
			}
		}
		break;
	default:
		break;
	}
}

/* Encode `m` again and decode the result: same size, same kind. (It may
 * fail to decode: protobuf-c accepts a field-0 key written in two bytes
 * as an unknown field, keeps it, and rejects it once written canonically.) */
static void roundtrip(const Cmon__Msg *m)
{
	struct evbuffer *b = evbuffer_new();
	const char *why = NULL;
	Cmon__Msg *again = NULL;

	MUST(b);
	if (cmon_frame_send(b, m) == 0 && cmon_frame_next(b, CMON_FRAME_MAX, &again, &why) == 1) {
		MUST(again->kind_case == m->kind_case);
		MUST(protobuf_c_message_get_packed_size(&again->base) ==
		     protobuf_c_message_get_packed_size(&m->base));
		cmon_msg_free(again);
	}
	evbuffer_free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t max, off = 0, used, nbuf = 0, nstream = 0;
	struct evbuffer *in = evbuffer_new();
	const char *why = NULL;
	Cmon__Msg *m;
	int r = 0, rs = 0;

	MUST(in);
	if (size == 0)
		goto out;
	/* The first byte picks the frame limit (control or data connection);
	 * the rest is what the peer sent. */
	max = data[0] & 1 ? CMON_CONTROL_FRAME_MAX : CMON_FRAME_MAX;
	data++;
	size--;
	while (off < size) {
		m = NULL;
		r = cmon_frame_decode(data + off, size - off, max, &m, &used, &why);
		if (r <= 0)
			break;
		MUST(used > 0 && used <= size - off);
		exercise(m);
		roundtrip(m);
		cmon_msg_free(m);
		off += used;
		nbuf++;
	}
	/* The streaming path, fed 7 bytes at a time, sees the same frames. */
	for (size_t pos = 0; pos < size && rs >= 0; pos += 7) {
		evbuffer_add(in, data + pos, size - pos < 7 ? size - pos : 7);
		while ((rs = cmon_frame_next(in, max, &m, &why)) == 1) {
			cmon_msg_free(m);
			nstream++;
		}
	}
	MUST(nstream == nbuf);
	MUST((r < 0) == (rs < 0));
out:
	evbuffer_free(in);
	return 0;
}
