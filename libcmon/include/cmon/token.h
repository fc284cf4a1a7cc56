/* The per-instance token: a secret snarflog makes at start, announces to
 * the registry, and asks of every consumer in Start. The registry hands
 * it only to the subscribers whose class matched the instance (InstanceUp),
 * so a consumer that has it was sent by the registry (or read snarflog's
 * -token-file, which only the owner can). docs/protocol.md, "Who may
 * connect". Tokens are raw bytes on the wire, lowercase hex in files. */
#ifndef CMON_TOKEN_H
#define CMON_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes in a token. */
#define CMON_TOKEN_LEN 32

/* Characters in a token's hex form (no terminator). */
#define CMON_TOKEN_HEX_LEN (2 * CMON_TOKEN_LEN)

/* Fill `tok` with fresh random bytes (OpenSSL's CSPRNG, else getrandom).
 * 0, or -EIO when no randomness is available (`tok` then untouched). */
int cmon_token_generate(uint8_t tok[CMON_TOKEN_LEN]);

/* Write `tok` as CMON_TOKEN_HEX_LEN lowercase hex digits and a NUL. */
void cmon_token_hex(const uint8_t tok[CMON_TOKEN_LEN], char out[CMON_TOKEN_HEX_LEN + 1]);

/* Parse a token's hex form; trailing white space (a newline) is allowed.
 * 0, or -EINVAL with `tok` untouched. */
int cmon_token_parse(const char *hex, uint8_t tok[CMON_TOKEN_LEN]);

/* Read a token file written by cmon_token_write_file(). 0, -EINVAL (not a
 * token) or another negative errno; `tok` untouched on failure. */
int cmon_token_read_file(const char *path, uint8_t tok[CMON_TOKEN_LEN]);

/* Write `tok` (hex and a newline) to `path`, atomically, readable by its
 * owner only (mode 0600). 0 or a negative errno. */
int cmon_token_write_file(const char *path, const uint8_t tok[CMON_TOKEN_LEN]);

/* True if `got` (`len` bytes, may be NULL) is exactly `want`. Takes the
 * same time wherever the first difference is (CRYPTO_memcmp). */
bool cmon_token_equal(const uint8_t want[CMON_TOKEN_LEN], const uint8_t *got, size_t len);

#endif
