/* Unit tests for the store's backlog (daemons/telemonitor/backlog.c): items
 * keep their values (texts copied); order is kept; at most max_failures
 * failures are held, the oldest dropped and counted; an instance's row
 * replaces its pending one; the byte bound drops the oldest unkeyed item
 * first and a keyed one only when nothing else is left; items put back
 * after a failed flush go to the front, in order.
 *
 * The telemonitor is a program, not a library, so its module is compiled
 * into this test directly. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../daemons/telemonitor/backlog.c"

/* An item of `kind` whose one value is the text `s` (statement 7). */
static struct bl_item *item(enum backlog_kind kind, uint64_t key, const char *s)
{
	struct bl_value v[] = { { .type = BV_TEXT, .s = s, .n = strlen(s) },
				{ .type = BV_INT, .i = 42 } };
	struct bl_item *it = bl_item_new(kind, 7, key, v, 2);

	assert_non_null(it);
	return it;
}

/* The texts held, in order, joined with spaces. */
static const char *texts(const struct backlog *b)
{
	static char out[512];
	const struct bl_item *it;
	size_t n = 0;

	out[0] = '\0';
	TAILQ_FOREACH(it, &b->items, link)
		n += (size_t)snprintf(out + n, sizeof out - n, "%s%s", n ? " " : "", it->v[0].s);
	return out;
}

static void values_copied(void **state)
{
	char text[] = "metrics";
	struct bl_value v[] = { { .type = BV_NULL }, { .type = BV_INT, .i = -5 },
				{ .type = BV_REAL, .d = 2.5 },
				{ .type = BV_TEXT, .s = text, .n = 3 } };
	struct bl_item *it = bl_item_new(BK_WINDOW, 3, 99, v, 4);

	(void)state;
	assert_non_null(it);
	text[0] = 'X';                      /* the item has its own copy */
	assert_int_equal(it->stmt, 3);
	assert_int_equal(it->key, 0);       /* windows are not keyed */
	assert_int_equal(it->v[0].type, BV_NULL);
	assert_int_equal(it->v[1].i, -5);
	assert_true(it->v[2].d == 2.5);
	assert_int_equal(it->v[3].n, 3);
	assert_string_equal(it->v[3].s, "met");
	assert_true(it->bytes > sizeof *it + 4 * sizeof(struct bl_value));
	bl_item_free(it);
}

static void failures_bounded_oldest_dropped(void **state)
{
	struct backlog b;

	(void)state;
	backlog_init(&b, 3, 1u << 20);
	backlog_push(&b, item(BK_FAILURE, 0, "f1"));
	backlog_push(&b, item(BK_WINDOW, 0, "w1"));
	backlog_push(&b, item(BK_FAILURE, 0, "f2"));
	backlog_push(&b, item(BK_FAILURE, 0, "f3"));
	backlog_push(&b, item(BK_MAIL, 0, "m1"));
	assert_string_equal(texts(&b), "f1 w1 f2 f3 m1");
	backlog_push(&b, item(BK_FAILURE, 0, "f4"));
	backlog_push(&b, item(BK_FAILURE, 0, "f5"));
	/* windows and mail do not count against the failures' bound */
	assert_string_equal(texts(&b), "w1 f3 m1 f4 f5");
	assert_int_equal(b.count[BK_FAILURE], 3);
	assert_int_equal(b.total, 5);
	assert_int_equal(b.dropped[BK_FAILURE], 2);
	assert_int_equal(b.dropped[BK_WINDOW], 0);
	assert_int_equal(b.pushed[BK_FAILURE], 5);
	backlog_clear(&b);
	assert_int_equal(b.total, 0);
	assert_int_equal(b.bytes, 0);
	assert_int_equal(b.dropped[BK_FAILURE], 2);   /* clearing is not dropping */
}

static void instance_rows_replaced(void **state)
{
	struct backlog b;

	(void)state;
	backlog_init(&b, 10, 1u << 20);
	backlog_push(&b, item(BK_INSTANCE, 1, "i1a"));
	backlog_push(&b, item(BK_FAILURE, 0, "f1"));
	backlog_push(&b, item(BK_INSTANCE, 2, "i2a"));
	backlog_push(&b, item(BK_INSTANCE, 1, "i1b"));
	backlog_push(&b, item(BK_CLASS, 1, "c1"));          /* same key, other kind */
	backlog_push(&b, item(BK_INSTANCE, 1, "i1c"));
	assert_string_equal(texts(&b), "f1 i2a c1 i1c");
	assert_int_equal(b.count[BK_INSTANCE], 2);
	assert_int_equal(b.dropped[BK_INSTANCE], 0);        /* replaced, not dropped */
	assert_int_equal(b.pushed[BK_INSTANCE], 4);
	backlog_clear(&b);
}

static void bytes_bounded_unkeyed_first(void **state)
{
	struct backlog b;
	struct bl_item *probe = item(BK_FAILURE, 0, "xx");
	size_t one = probe->bytes;

	(void)state;
	bl_item_free(probe);
	backlog_init(&b, 100, 3 * one);     /* room for three items of this size */
	backlog_push(&b, item(BK_INSTANCE, 1, "i1"));
	backlog_push(&b, item(BK_FAILURE, 0, "f1"));
	backlog_push(&b, item(BK_WINDOW, 0, "w1"));
	backlog_push(&b, item(BK_FAILURE, 0, "f2"));
	assert_string_equal(texts(&b), "i1 w1 f2");         /* the oldest unkeyed went */
	assert_int_equal(b.dropped[BK_FAILURE], 1);
	backlog_push(&b, item(BK_INSTANCE, 2, "i2"));
	backlog_push(&b, item(BK_INSTANCE, 3, "i3"));
	assert_string_equal(texts(&b), "i1 i2 i3");
	backlog_push(&b, item(BK_INSTANCE, 4, "i4"));       /* only rows left: the oldest goes */
	assert_string_equal(texts(&b), "i2 i3 i4");
	assert_int_equal(b.dropped[BK_INSTANCE], 1);
	assert_true(b.bytes <= 3 * one);
	backlog_clear(&b);
}

static void unshift_puts_back_in_order(void **state)
{
	struct backlog b;
	struct bl_list taken;
	struct bl_item *it;

	(void)state;
	backlog_init(&b, 10, 1u << 20);
	TAILQ_INIT(&taken);
	backlog_push(&b, item(BK_FAILURE, 0, "f1"));
	backlog_push(&b, item(BK_INSTANCE, 1, "i1"));
	backlog_push(&b, item(BK_FAILURE, 0, "f2"));
	backlog_push(&b, item(BK_FAILURE, 0, "f3"));
	for (int i = 0; i < 2; i++) {                       /* a flush takes two */
		it = backlog_first(&b);
		backlog_remove(&b, it);
		TAILQ_INSERT_TAIL(&taken, it, link);
	}
	assert_string_equal(texts(&b), "f2 f3");
	backlog_push(&b, item(BK_FAILURE, 0, "f4"));
	backlog_unshift(&b, &taken);                        /* ...and fails */
	assert_true(TAILQ_EMPTY(&taken));
	assert_string_equal(texts(&b), "f1 i1 f2 f3 f4");
	assert_int_equal(b.count[BK_FAILURE], 4);
	assert_int_equal(b.count[BK_INSTANCE], 1);
	assert_int_equal(b.dropped[BK_FAILURE], 0);
	/* the oldest failure is still the first to go */
	b.max_failures = 3;
	backlog_push(&b, item(BK_FAILURE, 0, "f5"));
	assert_string_equal(texts(&b), "i1 f3 f4 f5");
	/* and the row put back is still found and replaced */
	backlog_push(&b, item(BK_INSTANCE, 1, "i1b"));
	assert_string_equal(texts(&b), "f3 f4 f5 i1b");
	backlog_clear(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(values_copied),
		cmocka_unit_test(failures_bounded_oldest_dropped),
		cmocka_unit_test(instance_rows_replaced),
		cmocka_unit_test(bytes_bounded_unkeyed_first),
		cmocka_unit_test(unshift_puts_back_in_order),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
