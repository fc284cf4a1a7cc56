/* emit_wire.c — protobuf wire encoding of the cold records of a cmon-bin 1
 * log (Header, TypeDef, Gap, Overhead) and the name rules they rely on.
 *
 * Every record is a frame: varint length, then a serialized cmonlog.Record
 * (proto/cmonlog.proto). Fields are written in field-number order and only
 * when present, exactly as protobuf-c packs them, so a decode and re-pack
 * gives back the same bytes (tests/unit/test_emit.c checks this).
 */
#include <stdio.h>

#include "emit-internal.h"

/* Record oneof field numbers (cmonlog.Record). */
enum { REC_HEADER = 1, REC_TYPEDEF = 2, REC_GAP = 4, REC_OVERHEAD = 6 };

/* An output cursor that remembers whether it ran out of room. */
struct pbuf {
	uint8_t *p;      /* next byte to write */
	uint8_t *end;    /* end of the room */
	bool full;       /* something did not fit; the result is unusable */
};

/* Appends N raw bytes. */
static void pb_bytes(struct pbuf *b, const void *data, size_t n)
{
	if (b->full || (size_t)(b->end - b->p) < n) {
		b->full = true;
		return;
	}
	memcpy(b->p, data, n);
	b->p += n;
}

/* Appends a varint. */
static void pb_varint(struct pbuf *b, uint64_t v)
{
	uint8_t tmp[10];
	pb_bytes(b, tmp, (size_t)(cmon_varint_put(tmp, v) - tmp));
}

/* Appends a varint field. */
static void pb_field_varint(struct pbuf *b, unsigned field, uint64_t v)
{
	pb_varint(b, PB_TAG(field, PB_VARINT));
	pb_varint(b, v);
}

/* Appends a double field (fixed64, little-endian like the host). */
static void pb_field_double(struct pbuf *b, unsigned field, double v)
{
	pb_varint(b, PB_TAG(field, PB_FIXED64));
	pb_bytes(b, &v, sizeof v);
}

/* Appends a length-delimited field (string, bytes or sub-message). */
static void pb_field_bytes(struct pbuf *b, unsigned field, const void *data,
                           size_t n)
{
	pb_varint(b, PB_TAG(field, PB_LEN));
	pb_varint(b, n);
	pb_bytes(b, data, n);
}

/* Appends a string field. */
static void pb_field_string(struct pbuf *b, unsigned field, const char *s)
{
	pb_field_bytes(b, field, s, strlen(s));
}

/* Wraps the Record body BODY (LEN bytes, the oneof field FIELD) as a frame
 * into OUT; returns the frame length or 0 if it does not fit. */
static size_t frame_record(uint8_t *out, size_t cap, unsigned field,
                           const uint8_t *body, size_t len)
{
	uint8_t rec[EMIT_WRITE_MAX];
	struct pbuf r = { rec, rec + sizeof rec, false };
	struct pbuf f = { out, out + cap, false };

	pb_field_bytes(&r, field, body, len);
	if (r.full)
		return 0;
	pb_varint(&f, (uint64_t)(r.p - rec));
	pb_bytes(&f, rec, (size_t)(r.p - rec));
	return f.full ? 0 : (size_t)(f.p - out);
}

size_t emit_wire_gap_size(uint64_t count)
{
	size_t gap = 1 + cmon_varint_size(count);     /* Gap.count */
	size_t rec = 1 + cmon_varint_size(gap) + gap; /* Record.gap */
	return cmon_varint_size(rec) + rec;
}

void emit_wire_gap(uint8_t *out, uint64_t count)
{
	size_t gap = 1 + cmon_varint_size(count);
	size_t rec = 1 + cmon_varint_size(gap) + gap;
	uint8_t *p = out;

	p = cmon_varint_put(p, rec);
	*p++ = PB_TAG(REC_GAP, PB_LEN);
	p = cmon_varint_put(p, gap);
	*p++ = PB_TAG(1, PB_VARINT);
	cmon_varint_put(p, count);
}

/* Appends one HeaderField (key, value) as Header.extra. */
static void header_extra(struct pbuf *b, const char *key, const char *value)
{
	uint8_t tmp[256];
	struct pbuf f = { tmp, tmp + sizeof tmp, false };

	pb_field_string(&f, 1, key);
	pb_field_string(&f, 2, value);
	if (f.full) {
		b->full = true;
		return;
	}
	pb_field_bytes(b, 9, tmp, (size_t)(f.p - tmp));
}

size_t emit_wire_header(uint8_t *out, size_t cap,
                        const struct emit_header_info *h)
{
	uint8_t body[1024];
	struct pbuf b = { body, body + sizeof body, false };
	char start_ts[24];

	pb_field_string(&b, 1, "cmon-bin");
	pb_field_varint(&b, 2, 1);
	pb_field_string(&b, 3, h->program);
	pb_field_string(&b, 4, h->machine);
	pb_field_varint(&b, 5, (uint64_t)h->pid);
	pb_field_double(&b, 6, 1.0);           /* tick_ns: ts is in ns */
	pb_field_string(&b, 7, "CLOCK_MONOTONIC");
	pb_field_varint(&b, 8, (uint64_t)h->start_unix_ns);
	/* Where the log's clock stood at start_unix_ns: maps ts to wall time. */
	snprintf(start_ts, sizeof start_ts, "%llu",
	         (unsigned long long)h->start_ts);
	header_extra(&b, "start_ts", start_ts);
	header_extra(&b, "writer", "libcmon " CMON_VERSION);
	/* What an event costs its thread, for readers to take it out. */
	if (h->has_overhead) {
		pb_field_double(&b, 10, h->overhead_ns);
		pb_field_double(&b, 11, h->overhead_spread_ns);
	}
	if (b.full)
		return 0;
	return frame_record(out, cap, REC_HEADER, body, (size_t)(b.p - body));
}

size_t emit_wire_typedef(uint8_t *out, size_t cap, uint32_t id,
                         const char *name, size_t nattrs,
                         const char *const *attrs)
{
	uint8_t body[EMIT_WRITE_MAX];
	struct pbuf b = { body, body + sizeof body, false };

	pb_field_varint(&b, 1, id);
	pb_field_string(&b, 2, name);
	for (size_t i = 0; i < nattrs; i++)
		pb_field_string(&b, 3, attrs[i]);
	if (b.full)
		return 0;
	return frame_record(out, cap, REC_TYPEDEF, body, (size_t)(b.p - body));
}

size_t emit_wire_overhead(uint8_t *out, size_t cap, int64_t thread, double ns,
                          double spread)
{
	uint8_t body[64];
	struct pbuf b = { body, body + sizeof body, false };

	pb_field_varint(&b, 1, (uint64_t)thread);
	pb_field_double(&b, 2, ns);
	pb_field_double(&b, 3, spread);
	if (b.full)
		return 0;
	return frame_record(out, cap, REC_OVERHEAD, body, (size_t)(b.p - body));
}

/* True for [A-Za-z_]; DIGITS also admits [0-9]. */
static bool ident_char(char c, bool digits)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
	       (digits && c >= '0' && c <= '9');
}

bool emit_name_valid(const char *s, bool allow_proc)
{
	size_t i;

	if (!s || strnlen(s, CMON_MAX_NAME + 1) > CMON_MAX_NAME)
		return false;
	if (allow_proc) {
		if (strncmp(s, "call@", 5) == 0)
			s += 5;
		else if (strncmp(s, "ret@", 4) == 0)
			s += 4;
	}
	if (!ident_char(s[0], false))
		return false;
	for (i = 1; s[i]; i++)
		if (!ident_char(s[i], true))
			return false;
	return true;
}

void emit_sanitize_word(char *out, size_t cap, const char *s)
{
	size_t i = 0;

	for (; s && s[i] && i + 1 < cap; i++) {
		char c = s[i];
		bool ok = ident_char(c, true) || c == '.' || c == '+' || c == '-';
		out[i] = ok ? c : '_';
	}
	out[i] = '\0';
	if (i == 0)
		snprintf(out, cap, "unknown");
}
