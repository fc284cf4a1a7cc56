/* A log window's text at rest: see wtext.h. */
#include "wtext.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

struct wtext {
	ZSTD_CCtx *cx;           /* reused for every window */
	void *buf;               /* the last frame */
	size_t cap;              /* its capacity */
};

struct wtext *wtext_new(void)
{
	struct wtext *w = calloc(1, sizeof *w);

	if (!w)
		return NULL;
	w->cx = ZSTD_createCCtx();
	if (!w->cx) {
		free(w);
		return NULL;
	}
	return w;
}

void wtext_free(struct wtext *w)
{
	if (!w)
		return;
	ZSTD_freeCCtx(w->cx);
	free(w->buf);
	free(w);
}

int wtext_pack(struct wtext *w, const char *text, size_t len, const void **out, size_t *outlen)
{
	size_t bound = ZSTD_compressBound(len), n;

	if (len < WTEXT_MIN)
		return 0;
	if (bound > w->cap) {
		void *b = realloc(w->buf, bound);
		if (!b)
			return -ENOMEM;
		w->buf = b;
		w->cap = bound;
	}
	n = ZSTD_compressCCtx(w->cx, w->buf, w->cap, text, len, WTEXT_LEVEL);
	if (ZSTD_isError(n) || n >= len)
		return 0;
	*out = w->buf;
	*outlen = n;
	return 1;
}

bool wtext_is_packed(const void *p, size_t n)
{
	const uint8_t *b = p;

	/* ZSTD_MAGICNUMBER, little-endian; a window's text starts with '#' */
	return n >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd;
}

char *wtext_unpack(const void *p, size_t n, size_t max, size_t *len, char *err, size_t errlen)
{
	unsigned long long size = ZSTD_getFrameContentSize(p, n);
	size_t got;
	char *t;

	if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
		snprintf(err, errlen, "the stored window is damaged (not a zstd frame of known size)");
		return NULL;
	}
	if (size > max) {
		snprintf(err, errlen, "the stored window says it holds %llu bytes, more than the "
			 "%zu a window may", size, max);
		return NULL;
	}
	t = malloc((size_t)size + 1);
	if (!t) {
		snprintf(err, errlen, "out of memory unpacking a window of %llu bytes", size);
		return NULL;
	}
	got = ZSTD_decompress(t, (size_t)size, p, n);
	if (ZSTD_isError(got) || got != size) {
		snprintf(err, errlen, "the stored window is damaged: %s",
			 ZSTD_isError(got) ? ZSTD_getErrorName(got) : "shorter than it says");
		free(t);
		return NULL;
	}
	t[got] = '\0';
	*len = got;
	return t;
}
