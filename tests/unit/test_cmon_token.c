/* Unit tests for cmon/token.h: fresh tokens differ, hex round trips, bad
 * hex is refused, token files are private and read back, comparison wants
 * the exact bytes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmon/token.h"

static void fresh_tokens_differ(void **state)
{
	uint8_t a[CMON_TOKEN_LEN], b[CMON_TOKEN_LEN];

	assert_int_equal(cmon_token_generate(a), 0);
	assert_int_equal(cmon_token_generate(b), 0);
	assert_memory_not_equal(a, b, CMON_TOKEN_LEN);
}

static void hex_round_trip(void **state)
{
	uint8_t t[CMON_TOKEN_LEN], back[CMON_TOKEN_LEN];
	char hex[CMON_TOKEN_HEX_LEN + 1], upper[CMON_TOKEN_HEX_LEN + 3];

	for (size_t i = 0; i < CMON_TOKEN_LEN; i++)
		t[i] = (uint8_t)(i * 37 + 200);
	cmon_token_hex(t, hex);
	assert_int_equal(strlen(hex), CMON_TOKEN_HEX_LEN);
	assert_int_equal(strncmp(hex, "c8ed12", 6), 0);
	assert_int_equal(cmon_token_parse(hex, back), 0);
	assert_memory_equal(t, back, CMON_TOKEN_LEN);
	/* upper case and a trailing newline are fine */
	for (size_t i = 0; i <= CMON_TOKEN_HEX_LEN; i++)
		upper[i] = (char)(hex[i] >= 'a' ? hex[i] - 32 : hex[i]);
	strcat(upper, "\n");
	memset(back, 0, sizeof back);
	assert_int_equal(cmon_token_parse(upper, back), 0);
	assert_memory_equal(t, back, CMON_TOKEN_LEN);
}

static void bad_hex_refused(void **state)
{
	char hex[CMON_TOKEN_HEX_LEN + 8];
	uint8_t t[CMON_TOKEN_LEN], keep[CMON_TOKEN_LEN];

	memset(t, 0x5a, sizeof t);
	memcpy(keep, t, sizeof t);
	memset(hex, 'a', CMON_TOKEN_HEX_LEN);
	hex[CMON_TOKEN_HEX_LEN] = '\0';
	hex[CMON_TOKEN_HEX_LEN - 1] = '\0';                  /* one digit short */
	assert_int_equal(cmon_token_parse(hex, t), -EINVAL);
	hex[CMON_TOKEN_HEX_LEN - 1] = 'a';
	strcpy(hex + CMON_TOKEN_HEX_LEN, "a");                /* one digit long */
	assert_int_equal(cmon_token_parse(hex, t), -EINVAL);
	strcpy(hex + CMON_TOKEN_HEX_LEN, "");
	hex[3] = 'g';                                         /* not a digit */
	assert_int_equal(cmon_token_parse(hex, t), -EINVAL);
	assert_int_equal(cmon_token_parse(NULL, t), -EINVAL);
	assert_int_equal(cmon_token_parse("", t), -EINVAL);
	assert_memory_equal(t, keep, sizeof t);               /* untouched */
}

static void token_file_is_private(void **state)
{
	char dir[] = "/tmp/test_cmon_token.XXXXXX", path[64];
	uint8_t t[CMON_TOKEN_LEN], back[CMON_TOKEN_LEN];
	struct stat st;
	FILE *f;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/tok", dir);
	assert_int_equal(cmon_token_generate(t), 0);
	assert_int_equal(cmon_token_write_file(path, t), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(st.st_size, CMON_TOKEN_HEX_LEN + 1);
	assert_int_equal(cmon_token_read_file(path, back), 0);
	assert_memory_equal(t, back, CMON_TOKEN_LEN);
	/* written again (a new run): replaced, still private */
	t[0] ^= 1;
	assert_int_equal(cmon_token_write_file(path, t), 0);
	assert_int_equal(cmon_token_read_file(path, back), 0);
	assert_memory_equal(t, back, CMON_TOKEN_LEN);
	/* not a token; missing */
	f = fopen(path, "w");
	fputs("hello\n", f);
	fclose(f);
	assert_int_equal(cmon_token_read_file(path, back), -EINVAL);
	unlink(path);
	assert_int_equal(cmon_token_read_file(path, back), -ENOENT);
	rmdir(dir);
}

static void equal_wants_exact_bytes(void **state)
{
	uint8_t t[CMON_TOKEN_LEN], u[CMON_TOKEN_LEN + 1];

	assert_int_equal(cmon_token_generate(t), 0);
	memcpy(u, t, CMON_TOKEN_LEN);
	u[CMON_TOKEN_LEN] = 0;
	assert_true(cmon_token_equal(t, u, CMON_TOKEN_LEN));
	assert_false(cmon_token_equal(t, u, CMON_TOKEN_LEN + 1));     /* longer */
	assert_false(cmon_token_equal(t, u, CMON_TOKEN_LEN - 1));     /* a prefix */
	assert_false(cmon_token_equal(t, u, 0));
	assert_false(cmon_token_equal(t, NULL, CMON_TOKEN_LEN));
	u[CMON_TOKEN_LEN - 1] ^= 0x80;                                /* last bit */
	assert_false(cmon_token_equal(t, u, CMON_TOKEN_LEN));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fresh_tokens_differ),
		cmocka_unit_test(hex_round_trip),
		cmocka_unit_test(bad_hex_refused),
		cmocka_unit_test(token_file_is_private),
		cmocka_unit_test(equal_wants_exact_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
