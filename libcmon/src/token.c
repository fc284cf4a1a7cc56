/* Per-instance tokens (see cmon/token.h). */
#include "cmon/token.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "cmon/net.h"

int cmon_token_generate(uint8_t tok[CMON_TOKEN_LEN])
{
	uint8_t buf[CMON_TOKEN_LEN];
	size_t got = 0;

	if (RAND_bytes(buf, sizeof buf) == 1) {
		memcpy(tok, buf, sizeof buf);
		return 0;
	}
	while (got < sizeof buf) {
		ssize_t n = getrandom(buf + got, sizeof buf - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EIO;
		got += (size_t)n;
	}
	memcpy(tok, buf, sizeof buf);
	return 0;
}

void cmon_token_hex(const uint8_t tok[CMON_TOKEN_LEN], char out[CMON_TOKEN_HEX_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < CMON_TOKEN_LEN; i++) {
		out[2 * i] = digits[tok[i] >> 4];
		out[2 * i + 1] = digits[tok[i] & 15];
	}
	out[CMON_TOKEN_HEX_LEN] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int cmon_token_parse(const char *hex, uint8_t tok[CMON_TOKEN_LEN])
{
	uint8_t buf[CMON_TOKEN_LEN];

	if (!hex)
		return -EINVAL;
	for (size_t i = 0; i < CMON_TOKEN_LEN; i++) {
		int hi = hexval(hex[2 * i]), lo = hi < 0 ? -1 : hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		buf[i] = (uint8_t)(hi << 4 | lo);
	}
	for (const char *p = hex + CMON_TOKEN_HEX_LEN; *p; p++)
		if (*p != '\n' && *p != '\r' && *p != ' ' && *p != '\t')
			return -EINVAL;
	memcpy(tok, buf, sizeof buf);
	return 0;
}

int cmon_token_read_file(const char *path, uint8_t tok[CMON_TOKEN_LEN])
{
	char text[CMON_TOKEN_HEX_LEN + 8];
	ssize_t n;
	int fd, e;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, text, sizeof text - 1);
	e = errno;
	close(fd);
	if (n < 0)
		return -e;
	text[n] = '\0';
	return cmon_token_parse(text, tok);
}

int cmon_token_write_file(const char *path, const uint8_t tok[CMON_TOKEN_LEN])
{
	char text[CMON_TOKEN_HEX_LEN + 2];

	cmon_token_hex(tok, text);
	strcat(text, "\n");
	return cmon_write_file_mode(path, text, 0600);
}

bool cmon_token_equal(const uint8_t want[CMON_TOKEN_LEN], const uint8_t *got, size_t len)
{
	return got && len == CMON_TOKEN_LEN && CRYPTO_memcmp(want, got, CMON_TOKEN_LEN) == 0;
}
