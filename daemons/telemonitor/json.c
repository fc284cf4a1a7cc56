/* The JSON reader (see json.h): a recursive-descent parser over a copy of
 * the text, allocating every node and decoded string from one arena. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define JSON_CHUNK_MIN 4096       /* smallest arena chunk */

/* One block of the arena; the root is the first thing in the first one. */
struct json_chunk {
	struct json_chunk *next;  /* the chunk allocated after this one */
	size_t used;              /* bytes of data handed out */
	size_t cap;               /* bytes of data */
	alignas(max_align_t) unsigned char data[]; /* the memory handed out */
};

/* The parse in progress. */
struct json_parser {
	const char *text;         /* the copy of the text, NUL-terminated */
	size_t len;               /* its length */
	size_t pos;               /* the next byte to read */
	struct json_chunk *first; /* the oldest chunk (it holds the root) */
	struct json_chunk *arena; /* the newest chunk */
	char *err;                /* where the message goes */
	size_t errlen;            /* its size */
	bool failed;              /* a message was written */
	bool oom;                 /* ...and it is "out of memory" */
};

/* Record the first error, at byte `at`. */
__attribute__((format(printf, 3, 4)))
static void parse_error(struct json_parser *p, size_t at, const char *fmt, ...)
{
	char what[160];
	va_list ap;

	if (p->failed)
		return;
	p->failed = true;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	if (p->err && p->errlen)
		snprintf(p->err, p->errlen, "offset %zu: %s", at, what);
}

/* `n` bytes from the arena (aligned), or NULL with the error set. */
static void *arena_alloc(struct json_parser *p, size_t n)
{
	struct json_chunk *c = p->arena;
	size_t a = alignof(max_align_t), off;

	off = c ? (c->used + a - 1) / a * a : 0;
	if (!c || off > c->cap || n > c->cap - off) {
		size_t cap = n > JSON_CHUNK_MIN ? n : JSON_CHUNK_MIN;
		struct json_chunk *nc;
		if (c && cap < c->cap * 2 && c->cap * 2 <= (1u << 24))
			cap = c->cap * 2;
		nc = malloc(sizeof *nc + cap);
		if (!nc) {
			parse_error(p, p->pos, "out of memory");
			p->oom = true;
			return NULL;
		}
		nc->next = NULL;
		nc->used = 0;
		nc->cap = cap;
		if (c)
			c->next = nc;
		else
			p->first = nc;
		p->arena = c = nc;
		off = 0;
	}
	c->used = off + n;
	return c->data + off;
}

static void arena_free(struct json_chunk *c)
{
	while (c) {
		struct json_chunk *next = c->next;
		free(c);
		c = next;
	}
}

static void skip_ws(struct json_parser *p)
{
	while (p->pos < p->len && (p->text[p->pos] == ' ' || p->text[p->pos] == '\t' ||
				   p->text[p->pos] == '\n' || p->text[p->pos] == '\r'))
		p->pos++;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* A printable description of the byte at `at`, for messages. */
static const char *what_at(const struct json_parser *p, size_t at, char *buf, size_t size)
{
	unsigned char c;

	if (at >= p->len)
		return "end of text";
	c = (unsigned char)p->text[at];
	if (c > 0x20 && c < 0x7f)
		snprintf(buf, size, "'%c'", c);
	else
		snprintf(buf, size, "byte 0x%02x", c);
	return buf;
}

/* Four hex digits at p->pos, or -1. */
static long hex4(struct json_parser *p)
{
	long v = 0;

	if (p->len - p->pos < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		char c = p->text[p->pos + (size_t)i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	p->pos += 4;
	return v;
}

static size_t put_utf8(char *out, unsigned long cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* string -> '"' { char | '\' escape } '"'. The decoded text (never longer
 * than the source) into the arena; false on error. */
static bool parse_string(struct json_parser *p, const char **out, size_t *outlen)
{
	size_t start = p->pos, n = 0, end;
	char *s;

	p->pos++;                         /* the opening quote */
	/* the decoded text is never longer than the source: size it first */
	for (end = p->pos; end < p->len && p->text[end] != '"'; end++)
		if (p->text[end] == '\\')
			end++;
	s = arena_alloc(p, (end < p->len ? end : p->len) - p->pos + 1);
	if (!s)
		return false;
	for (;;) {
		unsigned char c;
		if (p->pos >= p->len) {
			parse_error(p, p->pos, "unterminated string (it opened at offset %zu)", start);
			return false;
		}
		c = (unsigned char)p->text[p->pos];
		if (c == '"') {
			p->pos++;
			break;
		}
		if (c < 0x20) {
			parse_error(p, p->pos, "control character 0x%02x in a string", c);
			return false;
		}
		if (c != '\\') {
			s[n++] = (char)c;
			p->pos++;
			continue;
		}
		size_t esc = p->pos++;
		if (p->pos >= p->len) {
			parse_error(p, p->pos, "unterminated string (it opened at offset %zu)", start);
			return false;
		}
		c = (unsigned char)p->text[p->pos++];
		switch (c) {
		case '"': s[n++] = '"'; break;
		case '\\': s[n++] = '\\'; break;
		case '/': s[n++] = '/'; break;
		case 'b': s[n++] = '\b'; break;
		case 'f': s[n++] = '\f'; break;
		case 'n': s[n++] = '\n'; break;
		case 'r': s[n++] = '\r'; break;
		case 't': s[n++] = '\t'; break;
		case 'u': {
			long cp = hex4(p), lo;
			if (cp < 0) {
				parse_error(p, esc, "bad \\u escape (four hex digits expected)");
				return false;
			}
			if (cp >= 0xdc00 && cp <= 0xdfff) {
				parse_error(p, esc, "lone low surrogate \\u%04lx", cp);
				return false;
			}
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (p->len - p->pos < 2 || p->text[p->pos] != '\\' ||
				    p->text[p->pos + 1] != 'u') {
					parse_error(p, esc, "high surrogate \\u%04lx not followed by a low one",
					     cp);
					return false;
				}
				p->pos += 2;
				lo = hex4(p);
				if (lo < 0xdc00 || lo > 0xdfff) {
					parse_error(p, esc, "high surrogate \\u%04lx not followed by a low one",
					     cp);
					return false;
				}
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			n += put_utf8(s + n, (unsigned long)cp);
			break;
		}
		default:
			parse_error(p, esc, "bad escape \\%c", c > 0x20 && c < 0x7f ? c : '?');
			return false;
		}
	}
	s[n] = '\0';
	*out = s;
	*outlen = n;
	return true;
}

/* number -> [ '-' ] int [ frac ] [ exp ]; int -> '0' | [1-9] digit*;
 * frac -> '.' digit+; exp -> ( 'e' | 'E' ) [ '+' | '-' ] digit+ */
static bool parse_number(struct json_parser *p, struct json *v)
{
	size_t start = p->pos;
	bool integer = true, neg = false;
	uint64_t mag = 0;
	bool fits = true;
	char *lit;

	if (p->text[p->pos] == '-') {
		neg = true;
		p->pos++;
	}
	if (p->pos >= p->len || !is_digit(p->text[p->pos])) {
		parse_error(p, p->pos, "digit expected in a number");
		return false;
	}
	if (p->text[p->pos] == '0') {
		p->pos++;
		if (p->pos < p->len && is_digit(p->text[p->pos])) {
			parse_error(p, p->pos, "leading zero in a number");
			return false;
		}
	} else {
		while (p->pos < p->len && is_digit(p->text[p->pos])) {
			unsigned d = (unsigned)(p->text[p->pos] - '0');
			if (mag > (UINT64_MAX - d) / 10)
				fits = false;
			else
				mag = mag * 10 + d;
			p->pos++;
		}
	}
	if (p->pos < p->len && p->text[p->pos] == '.') {
		integer = false;
		p->pos++;
		if (p->pos >= p->len || !is_digit(p->text[p->pos])) {
			parse_error(p, p->pos, "digit expected after the decimal point");
			return false;
		}
		while (p->pos < p->len && is_digit(p->text[p->pos]))
			p->pos++;
	}
	if (p->pos < p->len && (p->text[p->pos] == 'e' || p->text[p->pos] == 'E')) {
		integer = false;
		p->pos++;
		if (p->pos < p->len && (p->text[p->pos] == '+' || p->text[p->pos] == '-'))
			p->pos++;
		if (p->pos >= p->len || !is_digit(p->text[p->pos])) {
			parse_error(p, p->pos, "digit expected in the exponent");
			return false;
		}
		while (p->pos < p->len && is_digit(p->text[p->pos]))
			p->pos++;
	}
	lit = arena_alloc(p, p->pos - start + 1);
	if (!lit)
		return false;
	memcpy(lit, p->text + start, p->pos - start);
	lit[p->pos - start] = '\0';
	v->kind = JSON_NUMBER;
	v->str = lit;
	v->len = p->pos - start;
	v->num = strtod(lit, NULL);   /* the grammar was checked: all of lit is read */
	if (integer && fits) {
		if (!neg && mag <= (uint64_t)INT64_MAX) {
			v->is_int = true;
			v->i = (int64_t)mag;
		} else if (neg && mag <= (uint64_t)INT64_MAX + 1) {
			v->is_int = true;
			v->i = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
		}
	}
	return true;
}

/* A literal word (true, false, null). */
static bool parse_word(struct json_parser *p, const char *w, enum json_kind kind,
		       struct json *v)
{
	size_t n = strlen(w);

	if (p->len - p->pos < n || memcmp(p->text + p->pos, w, n)) {
		char buf[16];
		parse_error(p, p->pos, "unexpected %s", what_at(p, p->pos, buf, sizeof buf));
		return false;
	}
	p->pos += n;
	v->kind = kind;
	return true;
}

static bool parse_value(struct json_parser *p, struct json *v, int depth);

/* array -> '[' [ value { ',' value } ] ']'
 * object -> '{' [ string ':' value { ',' string ':' value } ] '}' */
static bool parse_container(struct json_parser *p, struct json *v, int depth)
{
	bool object = p->text[p->pos] == '{';
	char close = object ? '}' : ']', buf[16];
	struct json **tail = &v->kids;

	if (depth >= JSON_DEPTH_MAX) {
		parse_error(p, p->pos, "nested deeper than %d", JSON_DEPTH_MAX);
		return false;
	}
	v->kind = object ? JSON_OBJECT : JSON_ARRAY;
	p->pos++;
	skip_ws(p);
	if (p->pos < p->len && p->text[p->pos] == close) {
		p->pos++;
		return true;
	}
	for (;;) {
		struct json *kid = arena_alloc(p, sizeof *kid);
		if (!kid)
			return false;
		memset(kid, 0, sizeof *kid);
		if (object) {
			skip_ws(p);
			if (p->pos >= p->len || p->text[p->pos] != '"') {
				parse_error(p, p->pos, "member name expected, not %s",
				     what_at(p, p->pos, buf, sizeof buf));
				return false;
			}
			if (!parse_string(p, &kid->key, &kid->keylen))
				return false;
			skip_ws(p);
			if (p->pos >= p->len || p->text[p->pos] != ':') {
				parse_error(p, p->pos, "':' expected, not %s",
				     what_at(p, p->pos, buf, sizeof buf));
				return false;
			}
			p->pos++;
		}
		if (!parse_value(p, kid, depth + 1))
			return false;
		*tail = kid;
		tail = &kid->next;
		v->count++;
		skip_ws(p);
		if (p->pos < p->len && p->text[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->pos < p->len && p->text[p->pos] == close) {
			p->pos++;
			return true;
		}
		parse_error(p, p->pos, "',' or '%c' expected, not %s", close,
		     what_at(p, p->pos, buf, sizeof buf));
		return false;
	}
}

/* value -> ws ( object | array | string | number | true | false | null ) ws */
static bool parse_value(struct json_parser *p, struct json *v, int depth)
{
	size_t start;
	bool ok;
	char buf[16];

	skip_ws(p);
	start = p->pos;
	if (p->pos >= p->len) {
		parse_error(p, p->pos, "value expected, not end of text");
		return false;
	}
	switch (p->text[p->pos]) {
	case '{':
	case '[':
		ok = parse_container(p, v, depth);
		break;
	case '"':
		v->kind = JSON_STRING;
		ok = parse_string(p, &v->str, &v->len);
		break;
	case 't':
		ok = parse_word(p, "true", JSON_TRUE, v);
		break;
	case 'f':
		ok = parse_word(p, "false", JSON_FALSE, v);
		break;
	case 'n':
		ok = parse_word(p, "null", JSON_NULL, v);
		break;
	default:
		if (p->text[p->pos] == '-' || is_digit(p->text[p->pos])) {
			ok = parse_number(p, v);
		} else {
			parse_error(p, p->pos, "value expected, not %s",
				    what_at(p, p->pos, buf, sizeof buf));
			ok = false;
		}
	}
	v->src = p->text + start;
	v->srclen = p->pos - start;
	return ok;
}

struct json *json_parse(const char *text, size_t len, char *err, size_t errlen)
{
	struct json_parser p = { .len = len, .err = err, .errlen = errlen };
	struct json *root;
	char *copy, buf[16];

	if (err && errlen)
		err[0] = '\0';
	if (len > SIZE_MAX / 4) {
		parse_error(&p, 0, "text too long");
		errno = EINVAL;
		return NULL;
	}
	root = arena_alloc(&p, sizeof *root);    /* first: json_free finds the arena from it */
	copy = root ? arena_alloc(&p, len + 1) : NULL;
	if (!copy)
		goto out_free_arena;
	memset(root, 0, sizeof *root);
	if (len)
		memcpy(copy, text, len);
	copy[len] = '\0';
	p.text = copy;
	if (!parse_value(&p, root, 0))
		goto out_free_arena;
	skip_ws(&p);
	if (p.pos < p.len) {
		parse_error(&p, p.pos, "%s after the value", what_at(&p, p.pos, buf, sizeof buf));
		goto out_free_arena;
	}
	return root;
out_free_arena:
	arena_free(p.first);
	errno = p.oom ? ENOMEM : EINVAL;
	return NULL;
}

void json_free(struct json *root)
{
	struct json_chunk *c;

	if (!root)
		return;
	c = (struct json_chunk *)((unsigned char *)root - offsetof(struct json_chunk, data));
	arena_free(c);                    /* the root's chunk is the oldest: the rest follow */
}

const struct json *json_get(const struct json *obj, const char *key)
{
	if (!obj || obj->kind != JSON_OBJECT || !key)
		return NULL;
	for (const struct json *m = obj->kids; m; m = m->next)
		if (!strcmp(m->key, key) && strlen(key) == m->keylen)
			return m;
	return NULL;
}

const char *json_str(const struct json *v)
{
	return v && v->kind == JSON_STRING ? v->str : NULL;
}

bool json_int64(const struct json *v, int64_t *out)
{
	if (!v || v->kind != JSON_NUMBER || !v->is_int)
		return false;
	*out = v->i;
	return true;
}

const char *json_text(const struct json *v)
{
	if (!v)
		return NULL;
	switch (v->kind) {
	case JSON_STRING:
	case JSON_NUMBER:
		return v->str;
	case JSON_TRUE:
		return "1";
	case JSON_FALSE:
		return "0";
	default:
		return NULL;
	}
}

double json_as_double(const struct json *v)
{
	return v && v->kind == JSON_NUMBER ? v->num : 0;
}

int64_t json_as_int(const struct json *v)
{
	if (!v)
		return 0;
	switch (v->kind) {
	case JSON_NUMBER:
		if (v->is_int)
			return v->i;
		if (isnan(v->num))
			return 0;
		if (v->num >= 9223372036854775807.0)
			return INT64_MAX;
		if (v->num <= -9223372036854775808.0)
			return INT64_MIN;
		return (int64_t)v->num;
	case JSON_TRUE:
		return 1;
	case JSON_STRING:
		return strtoll(v->str, NULL, 10);
	default:
		return 0;
	}
}

char *json_source_dup(const struct json *v)
{
	char *s;

	if (!v)
		return NULL;
	s = malloc(v->srclen + 1);
	if (!s)
		return NULL;
	memcpy(s, v->src, v->srclen);
	s[v->srclen] = '\0';
	return s;
}
