/* The wire protocol (proto/cmon.proto): framing of messages over
 * libevent buffers, and constructors for the messages several programs
 * send. A frame is a varint length followed by one packed cmon.Msg.
 * Decoded messages are owned by the caller: free with cmon_msg_free(). */
#ifndef CMON_PROTO_H
#define CMON_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/buffer.h>

#include "cmon.pb-c.h"

/* Protocol version sent in every Hello; peers must speak exactly this one. */
#define CMON_PROTO_VERSION 1

/* Largest frame on a data connection (a LogData chunk or saved header). */
#define CMON_FRAME_MAX (4u << 20)

/* Largest frame on a control (registry) connection. */
#define CMON_CONTROL_FRAME_MAX (64u << 10)

/* Largest varint length prefix for a 32-bit length. */
#define CMON_FRAME_PREFIX_MAX 5

/* Append `msg` as one frame to `out`. 0, -EMSGSIZE (bigger than
 * CMON_FRAME_MAX) or -ENOMEM. */
int cmon_frame_send(struct evbuffer *out, const Cmon__Msg *msg);

/* The bytes of a frame holding a LogData message of `n` payload bytes
 * (Msg.data, LogData.data) that come before the payload, written to
 * `buf`; returns their number (at most CMON_DATA_PREFIX_MAX), or 0 when
 * the message would be longer than CMON_FRAME_MAX (cmon_frame_send()
 * refuses it). The frame is these bytes and then the payload: what
 * cmon_frame_send() writes for that message, without copying the payload
 * into a message first. */
#define CMON_DATA_PREFIX_MAX 16
size_t cmon_data_prefix(uint8_t *buf, size_t n);

/* Decode one frame from the start of `buf` (`len` bytes), refusing frames
 * longer than `max`. Returns 1 with *msg set and *used = bytes consumed,
 * 0 if more bytes are needed, -EMSGSIZE for an oversized frame or -EBADMSG
 * for a malformed prefix or message, with *why naming the problem. */
int cmon_frame_decode(const uint8_t *buf, size_t len, size_t max, Cmon__Msg **msg,
		      size_t *used, const char **why);

/* Like cmon_frame_decode() on the front of `in`, draining the frame.
 * 1 one message, 0 incomplete, negative errno on a bad frame. */
int cmon_frame_next(struct evbuffer *in, size_t max, Cmon__Msg **msg, const char **why);

/* Free a decoded message; accepts NULL. */
void cmon_msg_free(Cmon__Msg *msg);

/* Name of the message kind, e.g. "announce", for log lines. */
const char *cmon_msg_kind_name(const Cmon__Msg *msg);

/* Append a Hello for `role`; `software` e.g. "snarflog 0.1.0". */
int cmon_send_hello(struct evbuffer *out, Cmon__Role role, const char *software);

/* Append a Hello carrying a challenge (data connection, consumer side)
 * and/or a secret (control connection, subscriber side); either may be
 * NULL/0. */
int cmon_send_hello_ext(struct evbuffer *out, Cmon__Role role, const char *software,
			const uint8_t *challenge, size_t challenge_len, const uint8_t *secret,
			size_t secret_len);

/* Bytes of a Hello.challenge: at least CMON_CHALLENGE_MIN, at most
 * CMON_CHALLENGE_MAX; consumers send CMON_CHALLENGE_LEN. */
#define CMON_CHALLENGE_MIN 16
#define CMON_CHALLENGE_MAX 64
#define CMON_CHALLENGE_LEN 32

/* Bytes of a Proof.mac (HMAC-SHA256). */
#define CMON_PROOF_LEN 32

/* The proof of `token` for `challenge`: HMAC-SHA256(token, "cmon-proof-1"
 * || challenge) into `mac`. 0, or -EIO. */
int cmon_proof_compute(const uint8_t *token, size_t token_len, const uint8_t *challenge,
		       size_t challenge_len, uint8_t mac[CMON_PROOF_LEN]);

/* True if `msg` is a Proof of `token` for `challenge` (compared in
 * constant time). */
bool cmon_proof_ok(const Cmon__Msg *msg, const uint8_t *token, size_t token_len,
		   const uint8_t *challenge, size_t challenge_len);

/* Append a Proof of `token` for `challenge`. 0, or a negative errno. */
int cmon_send_proof(struct evbuffer *out, const uint8_t *token, size_t token_len,
		    const uint8_t *challenge, size_t challenge_len);

/* Append an Error with `code` and a formatted message. */
int cmon_send_error(struct evbuffer *out, Cmon__ErrorCode code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Check that `msg` is a Hello with our version; otherwise describe the
 * problem in `why` and return false. `*role` gets the sender's role. */
bool cmon_hello_ok(const Cmon__Msg *msg, Cmon__Role *role, char *why, size_t size);

/* Append a Subscribe (telemonitor side). Patterns may be NULL. */
int cmon_send_subscribe(struct evbuffer *out, uint32_t id, const char *program,
			const char *machine, const char *pid, bool autostart, bool block);

/* Append an Unsubscribe for class `id`. */
int cmon_send_unsubscribe(struct evbuffer *out, uint32_t id);

/* What a Start asks of a snarflog (docs/protocol.md §7). */
struct cmon_start {
	bool block;                  /* back-pressure the program instead of dropping */
	bool from_start;             /* report loss since the first record */
	const uint8_t *token;        /* the instance's token (none when NULL or token_len 0) */
	size_t token_len;
	uint64_t epoch;              /* the consumer's claim (0: none): a newer one replaces
	                                the stream's current consumer */
	unsigned batch_ms;           /* the snarflog may keep records this long after its
	                                last LogData to send them in one ("Batches"; 0: as
	                                they come) */
};

/* Append a Start (data connection, consumer side). */
int cmon_send_start(struct evbuffer *out, const struct cmon_start *st);

/* Append a Stop (data connection, telemonitor side). */
int cmon_send_stop(struct evbuffer *out);

/* Append a Ping or Pong carrying `nonce`. */
int cmon_send_ping(struct evbuffer *out, bool pong, uint64_t nonce);

/* Check every name and pattern in an Instance; false with `why` if bad. */
bool cmon_instance_ok(const Cmon__Instance *in, char *why, size_t size);

#endif
