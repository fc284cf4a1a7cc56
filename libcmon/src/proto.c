/* Framing and message helpers (see cmon/proto.h). */
#include "cmon/proto.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "cmon/names.h"
#include "cmon/net.h"
#include "varint.h"

int cmon_frame_send(struct evbuffer *out, const Cmon__Msg *msg)
{
	size_t body = protobuf_c_message_get_packed_size(&msg->base);
	uint8_t prefix[CMON_FRAME_PREFIX_MAX];
	size_t plen;
	struct evbuffer_iovec v;

	if (body > CMON_FRAME_MAX)
		return -EMSGSIZE;
	plen = (size_t)(cmon_varint_put(prefix, body) - prefix);
	/* One contiguous reservation: protobuf-c packs straight into it. */
	if (evbuffer_reserve_space(out, (ev_ssize_t)(plen + body), &v, 1) < 1 ||
	    v.iov_len < plen + body)
		return -ENOMEM;
	memcpy(v.iov_base, prefix, plen);
	protobuf_c_message_pack(&msg->base, (uint8_t *)v.iov_base + plen);
	v.iov_len = plen + body;
	if (evbuffer_commit_space(out, &v, 1) < 0)
		return -ENOMEM;
	return 0;
}

size_t cmon_data_prefix(uint8_t *buf, size_t n)
{
	/* Msg { data (35) = LogData { data (1) = n bytes } }: length-delimited
	 * fields, keys (35 << 3 | 2) and (1 << 3 | 2) */
	size_t logdata = 1 + cmon_varint_size(n) + n;
	uint64_t key = (uint64_t)CMON__MSG__KIND_DATA << 3 | 2;
	size_t body = cmon_varint_size(key) + cmon_varint_size(logdata) + logdata;
	uint8_t *p;

	if (body > CMON_FRAME_MAX)
		return 0;               /* as cmon_frame_send refuses it */
	p = cmon_varint_put(buf, body);

	p = cmon_varint_put(p, key);
	p = cmon_varint_put(p, logdata);
	p = cmon_varint_put(p, 1u << 3 | 2);
	p = cmon_varint_put(p, n);
	return (size_t)(p - buf);
}

/* Parse the varint prefix: 1 with *hdr and *body set, 0 need more, <0 bad. */
static int prefix_parse(const uint8_t *buf, size_t len, size_t max, size_t *hdr, size_t *body,
			const char **why)
{
	uint64_t v = 0;

	for (size_t i = 0; i < CMON_FRAME_PREFIX_MAX; i++) {
		if (i >= len)
			return 0;
		v |= (uint64_t)(buf[i] & 0x7f) << (7 * i);
		if (!(buf[i] & 0x80)) {
			if (v > max) {
				*why = "frame longer than the maximum";
				return -EMSGSIZE;
			}
			*hdr = i + 1;
			*body = (size_t)v;
			return 1;
		}
	}
	*why = "bad frame length prefix";
	return -EBADMSG;
}

static int unpack(const uint8_t *p, size_t n, Cmon__Msg **msg, const char **why)
{
	Cmon__Msg *m = cmon__msg__unpack(NULL, n, p);

	if (!m) {
		*why = "undecodable message";
		return -EBADMSG;
	}
	if (m->kind_case == CMON__MSG__KIND__NOT_SET) {
		cmon__msg__free_unpacked(m, NULL);
		*why = "message of unknown kind";
		return -EBADMSG;
	}
	*msg = m;
	return 1;
}

int cmon_frame_decode(const uint8_t *buf, size_t len, size_t max, Cmon__Msg **msg,
		      size_t *used, const char **why)
{
	size_t hdr, body;
	int r = prefix_parse(buf, len, max, &hdr, &body, why);

	if (r <= 0)
		return r;
	if (len - hdr < body)
		return 0;
	r = unpack(buf + hdr, body, msg, why);
	if (r == 1)
		*used = hdr + body;
	return r;
}

/* A varint at *pp (before end) written in as few bytes as it needs (what
 * cmon_data_prefix writes); false for any other. */
static bool varint_minimal(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
	const uint8_t *at = *pp;

	return cmon_varint_get(pp, end, v) && (size_t)(*pp - at) == cmon_varint_size(*v);
}

/* The whole frame at the front of `in` (hdr + body bytes) when it is a
 * LogData message laid out as cmon_data_prefix() writes it: the message,
 * its payload copied once straight from `in` (not gathered into one piece
 * and then copied again by protobuf-c), built as cmon__msg__unpack would
 * build it, so cmon_msg_free() frees it. 1 taken, 0 not such a frame,
 * -ENOMEM. */
static int take_data_frame(struct evbuffer *in, size_t hdr, size_t body, Cmon__Msg **msg)
{
	uint8_t head[CMON_FRAME_PREFIX_MAX + 24];
	ev_ssize_t copied = evbuffer_copyout(in, head, hdr + 24 < sizeof head ? hdr + 24 : sizeof head);
	const uint8_t *q = head + hdr, *end = head + (copied > 0 ? copied : 0);
	uint64_t key, logdata, tag, n;
	size_t k, pre;
	Cmon__Msg *m;
	Cmon__LogData *d;
	uint8_t *data;

	if (q >= end || !varint_minimal(&q, end, &key) ||
	    key != ((uint64_t)CMON__MSG__KIND_DATA << 3 | 2) || !varint_minimal(&q, end, &logdata) ||
	    !varint_minimal(&q, end, &tag) || tag != (1u << 3 | 2) || !varint_minimal(&q, end, &n))
		return 0;
	k = (size_t)(q - head);
	pre = k - hdr;          /* the body's bytes before the payload */
	if (pre >= body || n != body - pre || logdata != 1 + cmon_varint_size(n) + n)
		return 0;
	m = malloc(sizeof *m);
	d = malloc(sizeof *d);
	data = malloc(n);
	if (!m || !d || !data) {
		free(m);
		free(d);
		free(data);
		return -ENOMEM;
	}
	cmon__msg__init(m);
	cmon__log_data__init(d);
	evbuffer_drain(in, k);
	evbuffer_remove(in, data, n);
	d->has_data = true;
	d->data.data = data;
	d->data.len = n;
	m->kind_case = CMON__MSG__KIND_DATA;
	m->data = d;
	*msg = m;
	return 1;
}

int cmon_frame_next(struct evbuffer *in, size_t max, Cmon__Msg **msg, const char **why)
{
	uint8_t pfx[CMON_FRAME_PREFIX_MAX];
	ev_ssize_t got = evbuffer_copyout(in, pfx, sizeof pfx);
	size_t hdr, body;
	unsigned char *p;
	int r;

	if (got <= 0)
		return 0;
	r = prefix_parse(pfx, (size_t)got, max, &hdr, &body, why);
	if (r <= 0)
		return r;
	if (evbuffer_get_length(in) < hdr + body)
		return 0;
	r = take_data_frame(in, hdr, body, msg);
	if (r != 0) {
		if (r < 0)
			*why = "out of memory";
		return r;
	}
	p = evbuffer_pullup(in, (ev_ssize_t)(hdr + body));
	if (!p) {
		*why = "out of memory";
		return -ENOMEM;
	}
	r = unpack(p + hdr, body, msg, why);
	evbuffer_drain(in, hdr + body);
	return r;
}

void cmon_msg_free(Cmon__Msg *msg)
{
	if (msg)
		cmon__msg__free_unpacked(msg, NULL);
}

const char *cmon_msg_kind_name(const Cmon__Msg *msg)
{
	const ProtobufCFieldDescriptor *f;

	if (!msg || msg->kind_case == CMON__MSG__KIND__NOT_SET)
		return "nothing";
	f = protobuf_c_message_descriptor_get_field(&cmon__msg__descriptor,
						    (unsigned)msg->kind_case);
	return f ? f->name : "unknown";
}

int cmon_send_hello_ext(struct evbuffer *out, Cmon__Role role, const char *software,
			const uint8_t *challenge, size_t challenge_len, const uint8_t *secret,
			size_t secret_len)
{
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__Hello h = CMON__HELLO__INIT;

	h.version = CMON_PROTO_VERSION;
	h.has_role = true;
	h.role = role;
	h.software = (char *)software;
	if (challenge && challenge_len) {
		h.has_challenge = true;
		h.challenge.data = (uint8_t *)challenge;
		h.challenge.len = challenge_len;
	}
	if (secret && secret_len) {
		h.has_secret = true;
		h.secret.data = (uint8_t *)secret;
		h.secret.len = secret_len;
	}
	m.kind_case = CMON__MSG__KIND_HELLO;
	m.hello = &h;
	return cmon_frame_send(out, &m);
}

int cmon_send_hello(struct evbuffer *out, Cmon__Role role, const char *software)
{
	return cmon_send_hello_ext(out, role, software, NULL, 0, NULL, 0);
}

#define PROOF_LABEL "cmon-proof-1"

int cmon_proof_compute(const uint8_t *token, size_t token_len, const uint8_t *challenge,
		       size_t challenge_len, uint8_t mac[CMON_PROOF_LEN])
{
	uint8_t msg[sizeof PROOF_LABEL - 1 + CMON_CHALLENGE_MAX];
	unsigned int n = 0;

	if (challenge_len > CMON_CHALLENGE_MAX || !token || !token_len)
		return -EINVAL;
	memcpy(msg, PROOF_LABEL, sizeof PROOF_LABEL - 1);
	memcpy(msg + sizeof PROOF_LABEL - 1, challenge, challenge_len);
	if (!HMAC(EVP_sha256(), token, (int)token_len, msg, sizeof PROOF_LABEL - 1 + challenge_len,
		  mac, &n) || n != CMON_PROOF_LEN)
		return -EIO;
	return 0;
}

bool cmon_proof_ok(const Cmon__Msg *msg, const uint8_t *token, size_t token_len,
		   const uint8_t *challenge, size_t challenge_len)
{
	uint8_t want[CMON_PROOF_LEN];

	if (msg->kind_case != CMON__MSG__KIND_PROOF || !msg->proof->has_mac ||
	    msg->proof->mac.len != CMON_PROOF_LEN)
		return false;
	if (cmon_proof_compute(token, token_len, challenge, challenge_len, want) < 0)
		return false;
	return CRYPTO_memcmp(want, msg->proof->mac.data, CMON_PROOF_LEN) == 0;
}

int cmon_send_proof(struct evbuffer *out, const uint8_t *token, size_t token_len,
		    const uint8_t *challenge, size_t challenge_len)
{
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__Proof p = CMON__PROOF__INIT;
	uint8_t mac[CMON_PROOF_LEN];
	int rc = cmon_proof_compute(token, token_len, challenge, challenge_len, mac);

	if (rc < 0)
		return rc;
	p.has_mac = true;
	p.mac.data = mac;
	p.mac.len = sizeof mac;
	m.kind_case = CMON__MSG__KIND_PROOF;
	m.proof = &p;
	return cmon_frame_send(out, &m);
}

int cmon_send_error(struct evbuffer *out, Cmon__ErrorCode code, const char *fmt, ...)
{
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__Error e = CMON__ERROR__INIT;
	char text[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	e.has_code = true;
	e.code = code;
	e.message = text;
	m.kind_case = CMON__MSG__KIND_ERROR;
	m.error = &e;
	return cmon_frame_send(out, &m);
}

bool cmon_hello_ok(const Cmon__Msg *msg, Cmon__Role *role, char *why, size_t size)
{
	if (msg->kind_case != CMON__MSG__KIND_HELLO) {
		snprintf(why, size, "expected hello as first message, got %s",
			 cmon_msg_kind_name(msg));
		return false;
	}
	if (msg->hello->version != CMON_PROTO_VERSION) {
		snprintf(why, size, "unsupported protocol version %u (we speak %u)",
			 msg->hello->version, CMON_PROTO_VERSION);
		return false;
	}
	*role = msg->hello->has_role ? msg->hello->role : CMON__ROLE__ROLE_UNSPECIFIED;
	return true;
}

int cmon_send_subscribe(struct evbuffer *out, uint32_t id, const char *program,
			const char *machine, const char *pid, bool autostart, bool block)
{
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__Subscribe s = CMON__SUBSCRIBE__INIT;

	s.id = id;
	s.program = (char *)program;
	s.machine = (char *)machine;
	s.pid = (char *)pid;
	s.has_auto_ = true;
	s.auto_ = autostart;
	s.has_block = true;
	s.block = block;
	m.kind_case = CMON__MSG__KIND_SUBSCRIBE;
	m.subscribe = &s;
	return cmon_frame_send(out, &m);
}

int cmon_send_unsubscribe(struct evbuffer *out, uint32_t id)
{
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__Unsubscribe u = CMON__UNSUBSCRIBE__INIT;

	u.has_id = true;
	u.id = id;
	m.kind_case = CMON__MSG__KIND_UNSUBSCRIBE;
	m.unsubscribe = &u;
	return cmon_frame_send(out, &m);
}

int cmon_send_start(struct evbuffer *out, const struct cmon_start *st)
{
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__Start s = CMON__START__INIT;

	s.has_batch_ms = st->batch_ms != 0;
	s.batch_ms = st->batch_ms;
	s.has_epoch = st->epoch != 0;
	s.epoch = st->epoch;
	if (st->token && st->token_len) {
		s.has_token = true;
		s.token.data = (uint8_t *)st->token;
		s.token.len = st->token_len;
	}
	s.has_block = true;
	s.block = st->block;
	s.has_from_start = true;
	s.from_start = st->from_start;
	m.kind_case = CMON__MSG__KIND_START;
	m.start = &s;
	return cmon_frame_send(out, &m);
}

int cmon_send_stop(struct evbuffer *out)
{
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__Stop s = CMON__STOP__INIT;

	m.kind_case = CMON__MSG__KIND_STOP;
	m.stop = &s;
	return cmon_frame_send(out, &m);
}

int cmon_send_ping(struct evbuffer *out, bool pong, uint64_t nonce)
{
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__Ping p = CMON__PING__INIT;
	Cmon__Pong q = CMON__PONG__INIT;

	if (pong) {
		q.has_nonce = true;
		q.nonce = nonce;
		m.kind_case = CMON__MSG__KIND_PONG;
		m.pong = &q;
	} else {
		p.has_nonce = true;
		p.nonce = nonce;
		m.kind_case = CMON__MSG__KIND_PING;
		m.ping = &p;
	}
	return cmon_frame_send(out, &m);
}

bool cmon_instance_ok(const Cmon__Instance *in, char *why, size_t size)
{
	struct cmon_addr a;

	if (!in) {
		snprintf(why, size, "no instance");
		return false;
	}
	if (!cmon_name_valid(in->program)) {
		snprintf(why, size, "invalid program name");
		return false;
	}
	if (!cmon_name_valid(in->machine)) {
		snprintf(why, size, "invalid machine name");
		return false;
	}
	if (!in->has_pid || in->pid <= 0 || in->pid > 0x7fffffff) {
		snprintf(why, size, "invalid pid");
		return false;
	}
	if (!in->data_endpoint || strlen(in->data_endpoint) > CMON_HOST_MAX + 8 ||
	    cmon_addr_parse(in->data_endpoint, 0, &a) < 0 ||
	    (a.kind == CMON_ADDR_TCP && a.port == 0)) {
		snprintf(why, size, "invalid data endpoint");
		return false;
	}
	return true;
}
