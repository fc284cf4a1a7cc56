/* Decimal digits eight at a time (SWAR: one 64-bit word holds eight bytes
 * of text). The one copy of these word tricks: libpspec's ascii reader
 * parses every number with them, the telemonitor's log scanner every
 * timestamp. A loop of `v = v * 10 + digit` costs two dependent
 * operations and a branch per digit, and a timestamp in ns since 1970 has
 * 19 digits; a word is classified and converted in a few multiplications.
 *
 * Header only (static inline): libpspec and the daemons share it without
 * linking to each other. A word is read with memcpy, so the 8 bytes at p
 * must be readable: callers either pad their buffers or check the room
 * first (cmon_scan_digits19 does). The word functions assume a
 * little-endian machine (cmon_scan_digits19 falls back to a byte loop on
 * others). */
#ifndef CMON_DIGITS_H
#define CMON_DIGITS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The 8 bytes at p as a little-endian word (the first byte lowest). */
static inline uint64_t cmon_word_load(const char *p)
{
	uint64_t w;
	memcpy(&w, p, 8);
	return w;
}

/* 0x80 in every byte of w that is not an ASCII digit, 0 in the others
 * (no carry crosses a byte: (x & 0x7f) + 0x76 is at most 0xf5). */
static inline uint64_t cmon_word_nondigits(uint64_t w)
{
	uint64_t x = w ^ 0x3030303030303030ull;
	return (x | ((x & 0x7f7f7f7f7f7f7f7full) + 0x7676767676767676ull)) & 0x8080808080808080ull;
}

/* Index of the byte flagged by the lowest 0x80 bit of m (m != 0). */
static inline unsigned cmon_word_first(uint64_t m)
{
	return (unsigned)__builtin_ctzll(m) >> 3;
}

/* Value of the n (1 to 8) digits in the low bytes of w, the first byte
 * being the most significant digit: pairs, then quads, then all eight. */
static inline uint64_t cmon_word_digits(uint64_t w, unsigned n)
{
	uint64_t v = (w & 0x0f0f0f0f0f0f0f0full) << (64 - 8 * n);
	v = v * 10 + (v >> 8);
	return (((v & 0x000000ff000000ffull) * (100 + (1000000ull << 32))) +
		(((v >> 16) & 0x000000ff000000ffull) * (1 + (10000ull << 32)))) >> 32;
}

static const uint64_t cmon_pow10_u64[] __attribute__((unused)) = {
	1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
};

/* The run of decimal digits at p, read two words at a time: how many of
 * the first 16 bytes are digits before the first that is not (16 if all
 * are), their value in *v. The 16 bytes at p must be readable. No branch
 * per digit; a caller whose run may go on past 16 digits reads on from
 * p + 16 itself. */
static inline __attribute__((always_inline)) size_t cmon_scan_words16(const char *p, uint64_t *v)
{
	uint64_t w = cmon_word_load(p), m = cmon_word_nondigits(w), w1, m1, x;
	unsigned n;

	if (__builtin_expect(m != 0, 1)) {
		n = cmon_word_first(m);
		*v = n ? cmon_word_digits(w, n) : 0;
		return n;
	}
	w1 = cmon_word_load(p + 8);
	m1 = cmon_word_nondigits(w1);
	x = cmon_word_digits(w, 8);
	if (__builtin_expect(m1 != 0, 1)) {
		n = cmon_word_first(m1);
		*v = n ? x * cmon_pow10_u64[n] + cmon_word_digits(w1, n) : x;
		return 8 + n;
	}
	*v = x * 100000000u + cmon_word_digits(w1, 8);
	return 16;
}

/* The run of at most 19 decimal digits at [p, end) into *v: how many
 * there were (0 if none; a 20th digit is left unread, for the caller to
 * reject). Reads no byte at or past `end`. */
static inline size_t cmon_scan_digits19(const char *p, const char *end, uint64_t *v)
{
	uint64_t x = 0;
	size_t n = 0;

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (end - p >= 16 && (n = cmon_scan_words16(p, &x)) < 16) {
		*v = x;
		return n;
	}
#endif
	while (p + n < end && n < 19 && (unsigned char)(p[n] - '0') < 10)
		x = x * 10 + (uint64_t)(p[n++] - '0');
	*v = x;
	return n;
}

#endif
