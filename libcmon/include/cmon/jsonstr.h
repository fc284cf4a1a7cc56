/* The one JSON string writer. Every JSON text the suite emits (pcheck
 * --json, the telemonitor's API and telemonctl --json, alerts, /metrics
 * labels aside) writes its strings with cmon_json_string(), so that the
 * output is valid JSON (RFC 8259, UTF-8) whatever bytes the string holds:
 *
 *   - well-formed UTF-8 (no overlong forms, no surrogates, at most
 *     U+10FFFF) passes through as it is;
 *   - any other byte of 0x80 or more is read as Latin-1 and written as
 *     \u00XX (so 0xff 0xfe becomes "\u00ff\u00fe": nothing is lost, and
 *     the output stays valid);
 *   - '"' and '\' are escaped, control characters (below 0x20, and 0x7f)
 *     are written as \b \f \n \r \t or \u00XX.
 *
 * Header only (static inline): libpspec and the daemons share it without
 * linking to each other. Nothing here allocates, prints or fails; `put`
 * receives the output in pieces. */
#ifndef CMON_JSONSTR_H
#define CMON_JSONSTR_H

#include <stddef.h>

/* Where the output goes: `n` bytes at `p`. */
typedef void cmon_json_put_fn(void *ctx, const char *p, size_t n);

/* Length of the well-formed UTF-8 sequence starting at p (at most `left`
 * bytes available), or 0 when p[0] does not start one. */
static inline size_t cmon_utf8_len(const unsigned char *p, size_t left)
{
	size_t n;
	unsigned char lo = 0x80, hi = 0xbf;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (left < n)
		return 0;
	/* the second byte's range rules out overlong forms, surrogates and
	 * code points above U+10FFFF */
	if (p[0] == 0xe0)
		lo = 0xa0;
	else if (p[0] == 0xed)
		hi = 0x9f;
	else if (p[0] == 0xf0)
		lo = 0x90;
	else if (p[0] == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

/* Write the `n` bytes at `s` as a JSON string literal, quotes included. */
static inline void cmon_json_string_n(const char *s, size_t n, cmon_json_put_fn *put, void *ctx)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s, *end = p + n, *run = p;

	put(ctx, "\"", 1);
	while (p < end) {
		unsigned char c = *p;
		size_t len;
		char esc[6];
		size_t elen = 2;

		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			p++;
			continue;
		}
		if (c >= 0x80 && (len = cmon_utf8_len(p, (size_t)(end - p))) > 0) {
			p += len;
			continue;
		}
		if (p > run)
			put(ctx, (const char *)run, (size_t)(p - run));
		esc[0] = '\\';
		switch (c) {
		case '"': esc[1] = '"'; break;
		case '\\': esc[1] = '\\'; break;
		case '\b': esc[1] = 'b'; break;
		case '\f': esc[1] = 'f'; break;
		case '\n': esc[1] = 'n'; break;
		case '\r': esc[1] = 'r'; break;
		case '\t': esc[1] = 't'; break;
		default:
			esc[1] = 'u';
			esc[2] = '0';
			esc[3] = '0';
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			elen = 6;
		}
		put(ctx, esc, elen);
		run = ++p;
	}
	if (p > run)
		put(ctx, (const char *)run, (size_t)(p - run));
	put(ctx, "\"", 1);
}

/* The same for a NUL-terminated string; NULL is written as null. */
static inline void cmon_json_string(const char *s, cmon_json_put_fn *put, void *ctx)
{
	size_t n = 0;

	if (!s) {
		put(ctx, "null", 4);
		return;
	}
	while (s[n])
		n++;
	cmon_json_string_n(s, n, put, ctx);
}

#endif
