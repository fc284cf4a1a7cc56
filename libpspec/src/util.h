/* util.h — small helpers shared by every libpspec module (private).
 *
 * Allocation: ps_malloc/ps_calloc/ps_realloc/ps_strdup never return NULL.
 * Running out of memory inside the interpreter is treated as fatal (abort),
 * as glib and jq do; see docs/HACKING.md. Everything else reports errors as
 * values.
 */
#ifndef PSPEC_UTIL_H
#define PSPEC_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

void *ps_malloc(size_t n);
void *ps_calloc(size_t count, size_t size);
void *ps_realloc(void *p, size_t n);
char *ps_strdup(const char *s);
char *ps_strndup(const char *s, size_t n);
/* printf into a fresh heap string. */
char *ps_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *ps_vasprintf(const char *fmt, va_list ap);

#define PS_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define PS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define PS_LIKELY(x) __builtin_expect(!!(x), 1)

/* A growable byte buffer, always NUL-terminated. Zero-initialise to use. */
typedef struct ps_buf {
    char *data;    /* NUL-terminated contents (NULL until first append) */
    size_t len;    /* bytes used, excluding the NUL */
    size_t cap;    /* bytes allocated */
} ps_buf;

/* Make room for `extra` more bytes and the NUL (the slow path of the appends). */
void ps_buf_grow(ps_buf *b, size_t extra);

/* Appends. They are inline, and written without printf, because the
 * per-offender report lines are made of them (issue 14). */
static inline void ps_buf_put(ps_buf *b, const char *s, size_t n)
{
    if (PS_UNLIKELY(b->len + n + 1 > b->cap))
        ps_buf_grow(b, n);
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static inline void ps_buf_puts(ps_buf *b, const char *s) { ps_buf_put(b, s, strlen(s)); }

static inline void ps_buf_putc(ps_buf *b, char c)
{
    if (PS_UNLIKELY(b->len + 2 > b->cap))
        ps_buf_grow(b, 1);
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
}

/* The decimal digits of v, as "%" PRIu64 / "%" PRId64 write them. */
void ps_buf_put_u64(ps_buf *b, uint64_t v);
void ps_buf_put_i64(ps_buf *b, int64_t v);
void ps_buf_printf(ps_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ps_buf_reset(ps_buf *b);      /* len = 0, keeps the allocation */
void ps_buf_free(ps_buf *b);
/* Detach the contents as a heap string (never NULL); the buffer is emptied. */
char *ps_buf_take(ps_buf *b);
/* Contents as a C string ("" when empty). */
static inline const char *ps_buf_str(const ps_buf *b) { return b->data ? b->data : ""; }

#endif
