/* varint.h — base-128 varints of the protobuf wire format, for libcmon's
 * hand-written encoders and scanners (the emit path, the frame prefixes,
 * the log-format scanners). Inline: the emit path is hot. */
#ifndef CMON_VARINT_H
#define CMON_VARINT_H

#include <stdbool.h>
#include <stdint.h>

/* Bytes a varint of V takes (1..10). */
static inline unsigned cmon_varint_size(uint64_t v)
{
	unsigned log2 = 63u - (unsigned)__builtin_clzll(v | 1);
	return (log2 * 9u + 73u) / 64u;
}

/* Writes V as a varint at P; returns the byte after it. */
static inline uint8_t *cmon_varint_put(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* Reads a varint at *PP (before END) into *V and moves *PP past it; false
 * if it is cut off by END or longer than 10 bytes. */
static inline bool cmon_varint_get(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
	const uint8_t *p = *pp;
	uint64_t r = 0;

	for (int shift = 0; shift < 70 && p < end; shift += 7) {
		uint8_t b = *p++;
		r |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*pp = p;
			*v = r;
			return true;
		}
	}
	return false;
}

#endif
