/* Unit tests for cmon/net.h: address parsing and formatting, and the heap
 * settings for programs that move log streams. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "cmon/net.h"

static void parse_good(void **state)
{
	static const struct { const char *text, *host; uint16_t port; const char *back; } cases[] = {
		{ "localhost", "localhost", 7361, "localhost:7361" },
		{ "reg.example:9000", "reg.example", 9000, "reg.example:9000" },
		{ "127.0.0.1:0", "127.0.0.1", 0, "127.0.0.1:0" },
		{ "[::1]:80", "::1", 80, "[::1]:80" },
		{ "[fe80::1%eth0]", "fe80::1%eth0", 7361, "[fe80::1%eth0]:7361" },
		{ "::1", "::1", 7361, "[::1]:7361" },
		{ ":5000", "", 5000, "*:5000" },
		{ "*:5000", "", 5000, "*:5000" },
	};
	char buf[CMON_ADDRSTR_MAX];

	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		struct cmon_addr a;
		assert_int_equal(cmon_addr_parse(cases[i].text, 7361, &a), 0);
		assert_int_equal(a.kind, CMON_ADDR_TCP);
		assert_string_equal(a.host, cases[i].host);
		assert_int_equal(a.port, cases[i].port);
		assert_string_equal(cmon_addr_format(&a, buf, sizeof buf), cases[i].back);
	}
}

static void parse_unix(void **state)
{
	struct cmon_addr a;
	char buf[CMON_ADDRSTR_MAX];

	assert_int_equal(cmon_addr_parse("unix:/run/telemonreg.sock", 1, &a), 0);
	assert_int_equal(a.kind, CMON_ADDR_UNIX);
	assert_string_equal(a.path, "/run/telemonreg.sock");
	assert_true(cmon_addr_is_local(&a));
	assert_string_equal(cmon_addr_format(&a, buf, sizeof buf), "unix:/run/telemonreg.sock");
}

static void parse_bad(void **state)
{
	static const char *bad[] = { "host:", "host:99999", "host:-1", "host:12x", "[::1",
				     "[::1]x", "a b:1", "-x:1", "unix:", "h;rm:1", NULL };
	struct cmon_addr a;

	for (size_t i = 0; bad[i]; i++)
		assert_int_equal(cmon_addr_parse(bad[i], 1, &a), -22);
	assert_int_equal(cmon_addr_parse(NULL, 1, &a), -22);
}

static void locality(void **state)
{
	struct cmon_addr a;

	cmon_addr_parse("127.0.0.5:1", 1, &a);
	assert_true(cmon_addr_is_local(&a));
	cmon_addr_parse("10.0.0.1:1", 1, &a);
	assert_false(cmon_addr_is_local(&a));
}

static void list_parse(void **state)
{
	struct cmon_addr_item it[CMON_REGISTRIES_MAX];
	char bad[300];
	size_t n;

	assert_int_equal(cmon_addr_list_parse("a:1, [::1]:2 ,unix:/run/r.sock", 7361, it,
					      CMON_REGISTRIES_MAX, &n, bad, sizeof bad), 0);
	assert_int_equal(n, 3);
	assert_string_equal(it[0].text, "a:1");
	assert_int_equal(it[0].addr.port, 1);
	assert_string_equal(it[1].addr.host, "::1");
	assert_string_equal(it[2].addr.path, "/run/r.sock");
	assert_int_equal(cmon_addr_list_parse("reg", 7361, it, 8, &n, bad, sizeof bad), 0);
	assert_int_equal(n, 1);
	assert_int_equal(it[0].addr.port, 7361);
	/* an empty element, a bad one, too many */
	assert_int_equal(cmon_addr_list_parse("a,,b", 7361, it, 8, &n, bad, sizeof bad), -EINVAL);
	assert_string_equal(bad, "bad address ''");
	assert_int_equal(cmon_addr_list_parse("a,[::1", 7361, it, 8, &n, bad, sizeof bad), -EINVAL);
	assert_string_equal(bad, "bad address '[::1'");
	assert_int_equal(cmon_addr_list_parse("", 7361, it, 8, &n, bad, sizeof bad), -EINVAL);
	assert_int_equal(cmon_addr_list_parse("a,b,c", 7361, it, 2, &n, bad, sizeof bad), -E2BIG);
	assert_string_equal(bad, "more than 2 addresses in 'a,b,c'");
}

#if defined(__SANITIZE_ADDRESS__)
#define HEAP_TESTABLE 0     /* AddressSanitizer's allocator ignores mallopt */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HEAP_TESTABLE 0
#endif
#endif
#ifndef HEAP_TESTABLE
#define HEAP_TESTABLE 1
#endif

#if HEAP_TESTABLE
/* cmon_heap_for_streams: a 1 MiB block (a stream's chunks are 256 KiB)
 * comes from the heap, not from a mapping of its own (glibc's default
 * threshold starts at 128 KiB), and freeing it keeps the memory for the
 * next one instead of giving it back at once (trim threshold 128 KiB). */
static void heap_for_streams(void **state)
{
	(void)state;
	cmon_heap_for_streams();
	struct mallinfo2 before = mallinfo2();
	char *p = malloc(1u << 20);
	assert_non_null(p);
	memset(p, 1, 1u << 20);
	struct mallinfo2 held = mallinfo2();
	assert_int_equal(held.hblks, before.hblks);          /* not mapped on its own */
	assert_true(held.arena >= before.arena + (1u << 20)); /* the heap grew instead */
	free(p);
	struct mallinfo2 after = mallinfo2();
	assert_true(after.arena >= before.arena + (1u << 20)); /* kept for the next block */
	p = malloc(1u << 20);
	assert_non_null(p);
	assert_true(mallinfo2().arena == after.arena);        /* which reuses it */
	free(p);
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parse_good),
		cmocka_unit_test(parse_unix),
		cmocka_unit_test(parse_bad),
		cmocka_unit_test(locality),
		cmocka_unit_test(list_parse),
#if HEAP_TESTABLE
		cmocka_unit_test(heap_for_streams),
#endif
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
