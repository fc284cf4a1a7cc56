/* A small, strict, bounded JSON reader (RFC 8259): text in, a tree of
 * values out, or one error message with the byte offset where the text
 * went wrong. It reads the checker's report lines (report.c), the metrics
 * objects kept in the store, and the API's own JSON read back by the
 * dashboard — so that no JSON is parsed by the database.
 *
 * Strict: no comments, no trailing commas, no single quotes, no leading
 * zeros or bare '+' in numbers, no control characters in strings, no lone
 * surrogates in \u escapes, nothing but whitespace after the value. Bytes
 * of 0x80 and above inside strings are passed through as they are (the
 * checker writes UTF-8; they are not validated here). Bounded: nesting
 * deeper than JSON_DEPTH_MAX is an error, and the tree takes memory in
 * proportion to the text (at most one node per two bytes of it).
 *
 * Ownership: json_parse() copies the text; the whole tree (strings, keys,
 * source text) lives in one arena owned by the root and freed at once by
 * json_free(root). Every pointer into the tree is valid until then. Pure
 * data: no I/O, no printing, no exit. */
#ifndef TELEMON_JSON_H
#define TELEMON_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSON_DEPTH_MAX 64         /* arrays and objects nested in one another */

/* What a value is. */
enum json_kind {
	JSON_NULL,                /* null */
	JSON_FALSE,               /* false */
	JSON_TRUE,                /* true */
	JSON_NUMBER,              /* a number: num, and its literal in str */
	JSON_STRING,              /* a string: str (decoded, UTF-8) */
	JSON_ARRAY,               /* an array: kids, count */
	JSON_OBJECT,              /* an object: kids (each with key), count */
};

/* One value of the tree. */
struct json {
	enum json_kind kind;      /* what it is */
	const char *src;          /* its source text (in the tree's copy; not NUL-terminated) */
	size_t srclen;            /* the source text's length */
	double num;               /* JSON_NUMBER: its value as a double */
	bool is_int;              /* JSON_NUMBER: an integer literal that fits int64 */
	int64_t i;                /* JSON_NUMBER with is_int: its exact value */
	const char *str;          /* JSON_STRING: decoded text; JSON_NUMBER: the literal;
				     NUL-terminated; NULL for other kinds */
	size_t len;               /* bytes in str (a decoded \u0000 counts: str may hold NULs) */
	struct json *kids;        /* JSON_ARRAY, JSON_OBJECT: first element or member */
	size_t count;             /* JSON_ARRAY, JSON_OBJECT: how many */
	struct json *next;        /* the next element or member of its parent, in source order */
	const char *key;          /* a member of an object: its name, decoded, NUL-terminated */
	size_t keylen;            /* bytes in key */
};

/* Parse `len` bytes of `text` (need not be NUL-terminated) as one JSON
 * value. Returns the root (free with json_free), or NULL with a message
 * "offset N: what" in `err` and errno EINVAL (a bad text) or ENOMEM. */
struct json *json_parse(const char *text, size_t len, char *err, size_t errlen);

/* Free a tree returned by json_parse (NULL is fine). Only the root. */
void json_free(struct json *root);

/* The first member of object `obj` named `key`, or NULL (no such member,
 * or `obj` is NULL or not an object). A member whose name holds \u0000 is
 * never found: `key` is a C string and must equal the whole name. */
const struct json *json_get(const struct json *obj, const char *key);

/* The decoded text of a string value, or NULL (NULL or not a string). */
const char *json_str(const struct json *v);

/* True, with *out set, when `v` is an integer literal within int64 (exact,
 * whatever its size); false (out untouched) otherwise. */
bool json_int64(const struct json *v, int64_t *out);

/* A value as text, the way a report field is read: a string's text, a
 * number's literal, "1" or "0" for true or false; NULL for null, for an
 * array or object, and when `v` is NULL. */
const char *json_text(const struct json *v);

/* A value as an integer, the way a report field is read: an integer's
 * value; another number truncated toward zero (clamped to int64); 1 for
 * true; a string's leading decimal integer ("12.0" gives 12); 0 for
 * anything else and when `v` is NULL. */
int64_t json_as_int(const struct json *v);
/* A number's value; 0 for anything else (and when absent). */
double json_as_double(const struct json *v);

/* A heap copy of v's source text, NUL-terminated (caller frees); NULL on
 * ENOMEM or when `v` is NULL. */
char *json_source_dup(const struct json *v);

#endif
