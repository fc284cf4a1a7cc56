/* Unit tests for pcheck's held text (clients/pcheck/held.c): lines kept in
 * chunks come out as one buffer would have given them, whatever chunk
 * boundaries they meet. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../clients/pcheck/held.c"

/* What f received, NUL-terminated; *n its length. */
static char *flushed(held *h, size_t *n)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, n);
    assert_non_null(f);
    held_flush(h, f);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static void empty(void **state)
{
    (void)state;
    held h = { 0 };
    size_t n;
    char *out = flushed(&h, &n);
    assert_int_equal(n, 0);
    free(out);
    held_free(&h);
    assert_true(held_add(&h, "", 0));       /* an empty line is a '\n' */
    out = flushed(&h, &n);
    assert_int_equal(n, 1);
    assert_memory_equal(out, "\n", 1);
    free(out);
}

/* Lines of 0 to 300 bytes (about 13 MiB in all: the first chunk and
 * several large ones), then a line larger than a chunk, then more. */
static void in_order_across_chunks(void **state)
{
    (void)state;
    size_t big = HELD_CHUNK + HELD_CHUNK / 2, cap = 16 << 20, len = 0;
    char *want = malloc(cap), *line = malloc(big);
    assert_true(want && line);
    held h = { 0 };
    uint32_t x = 12345;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 40000 + round * 5; i++) {
            x = x * 1103515245u + 12345u;
            size_t l = (x >> 16) % 301;
            for (size_t k = 0; k < l; k++)
                line[k] = (char)('a' + (i + k) % 26);
            assert_true(held_add(&h, line, l));
            memcpy(want + len, line, l);
            want[len + l] = '\n';
            len += l + 1;
        }
        if (round == 0) {
            memset(line, 'Z', big);
            assert_true(held_add(&h, line, big));
            memcpy(want + len, line, big);
            want[len + big] = '\n';
            len += big + 1;
        }
    }
    assert_true(len < cap);
    size_t n;
    char *out = flushed(&h, &n);
    assert_int_equal(n, len);
    assert_memory_equal(out, want, len);
    free(out);
    /* flushing emptied it */
    out = flushed(&h, &n);
    assert_int_equal(n, 0);
    free(out);
    free(want);
    free(line);
}

/* A line that does not fit the first chunk's rest goes whole into the next. */
static void line_at_the_boundary(void **state)
{
    (void)state;
    held h = { 0 };
    size_t room = HELD_FIRST - sizeof(held_chunk), first = room - 10;
    char *a = malloc(first), b[20];
    assert_non_null(a);
    memset(a, 'a', first);
    memset(b, 'b', sizeof b);
    assert_true(held_add(&h, a, first - 1));    /* exactly fills: first - 1 + '\n' */
    assert_true(held_add(&h, b, 8));            /* 9 more: fits the 10 left */
    assert_true(held_add(&h, b, 1));            /* 2: does not fit the 1 left */
    assert_ptr_not_equal(h.head, h.tail);
    assert_int_equal(h.head->len, first + 9);
    size_t n;
    char *out = flushed(&h, &n);
    assert_int_equal(n, first + 9 + 2);
    assert_memory_equal(out + first - 1, "\nbbbbbbbb\nb\n", 12);
    free(out);
    free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty),
        cmocka_unit_test(in_order_across_chunks),
        cmocka_unit_test(line_at_the_boundary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
