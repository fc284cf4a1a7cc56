/* util.c — allocation wrappers and the growable buffer. */
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *oom(void)
{
    /* Not printing from a library: abort() leaves a core and a clear signal. */
    abort();
}

void *ps_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    return p ? p : oom();
}

void *ps_calloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    return p ? p : oom();
}

void *ps_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    return q ? q : oom();
}

char *ps_strdup(const char *s)
{
    return ps_strndup(s, strlen(s));
}

char *ps_strndup(const char *s, size_t n)
{
    char *p = ps_malloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *ps_vasprintf(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        n = 0;
    char *p = ps_malloc((size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    return p;
}

char *ps_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *p = ps_vasprintf(fmt, ap);
    va_end(ap);
    return p;
}

void ps_buf_grow(ps_buf *b, size_t extra)
{
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    b->data = ps_realloc(b->data, cap);
    b->cap = cap;
}

/* "00" "01" ... "99": two digits per step. */
static const char digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Number of decimal digits of v (1 to 20): from its bit length (1233/4096
 * is just above log10(2)), corrected by one comparison. */
static inline unsigned u64_len(uint64_t v)
{
    static const uint64_t pow10[20] = {
        1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL, 100000000ULL,
        1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL, 10000000000000ULL,
        100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL,
        1000000000000000000ULL, 10000000000000000000ULL};
    unsigned t = (unsigned)(64 - __builtin_clzll(v | 1)) * 1233 >> 12;   /* 0 to 19 */
    return t + ((v | 1) >= pow10[t]);      /* v | 1: 0 has one digit too */
}

/* Writes the digits of v so that they end at `end`. */
static inline void u64_digits(char *end, uint64_t v)
{
    char *p = end;
    while (v >= 100) {
        unsigned k = (unsigned)(v % 100) * 2;
        v /= 100;
        *--p = digit_pairs[k + 1];
        *--p = digit_pairs[k];
    }
    if (v >= 10) {
        unsigned k = (unsigned)v * 2;
        *--p = digit_pairs[k + 1];
        *--p = digit_pairs[k];
    } else {
        *--p = (char)('0' + v);
    }
}

/* The digits go straight into the buffer, their count found first. */
void ps_buf_put_u64(ps_buf *b, uint64_t v)
{
    unsigned n = u64_len(v);
    if (PS_UNLIKELY(b->len + n + 1 > b->cap))
        ps_buf_grow(b, n);
    b->len += n;
    u64_digits(b->data + b->len, v);
    b->data[b->len] = '\0';
}

void ps_buf_put_i64(ps_buf *b, int64_t v)
{
    if (v < 0) {
        ps_buf_putc(b, '-');
        /* the magnitude in unsigned arithmetic, so INT64_MIN is no overflow */
        ps_buf_put_u64(b, 0 - (uint64_t)v);
    } else {
        ps_buf_put_u64(b, (uint64_t)v);
    }
}

void ps_buf_printf(ps_buf *b, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n > 0) {
        ps_buf_grow(b, (size_t)n);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
        b->len += (size_t)n;
    }
    va_end(ap);
}

void ps_buf_reset(ps_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void ps_buf_free(ps_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *ps_buf_take(ps_buf *b)
{
    char *p = b->data ? b->data : ps_strdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}
