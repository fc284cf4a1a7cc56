/* Text helpers (see text.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text.h"

#define RENDER_DEPTH_MAX 8        /* nesting shown before "..." */

static bool reserve(struct sbuf *b, size_t more)
{
	size_t need = b->len + more + 1, ncap;
	char *g;

	if (b->oom)
		return false;
	if (need <= b->cap)
		return true;
	ncap = b->cap ? b->cap : 256;
	while (ncap < need)
		ncap *= 2;
	g = realloc(b->s, ncap);
	if (!g) {
		b->oom = true;
		return false;
	}
	b->s = g;
	b->cap = ncap;
	return true;
}

void sb_add(struct sbuf *b, const char *p, size_t n)
{
	if (!reserve(b, n))
		return;
	memcpy(b->s + b->len, p, n);
	b->len += n;
	b->s[b->len] = '\0';
}

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void sb_json_str(struct sbuf *b, const char *s)
{
	if (!s) {
		sb_add(b, "null", 4);
		return;
	}
	sb_add(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };
			sb_add(b, e, 2);
		} else if (c == '\n') {
			sb_add(b, "\\n", 2);
		} else if (c == '\t') {
			sb_add(b, "\\t", 2);
		} else if (c == '\r') {
			sb_add(b, "\\r", 2);
		} else if (c < 0x20) {
			sb_printf(b, "\\u%04x", c);
		} else {
			sb_add(b, s, 1);
		}
	}
	sb_add(b, "\"", 1);
}

char *sb_take(struct sbuf *b)
{
	char *s = b->s ? b->s : strdup("");

	b->s = NULL;
	b->len = b->cap = 0;
	b->oom = false;
	return s;
}

void sb_free(struct sbuf *b)
{
	free(b->s);
	b->s = NULL;
	b->len = b->cap = 0;
}

char *iso_time(double t, char *out, size_t size)
{
	time_t s = (time_t)t;
	struct tm tm;

	gmtime_r(&s, &tm);
	strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return out;
}

/* One value of json_each: its type and text. */
static void render_value(sqlite3 *db, const char *type, const char *text, struct sbuf *b,
			 int depth);

/* Every member of the object or array `json`, as "k -> v" or "v". */
static void render_members(sqlite3 *db, const char *json, bool object, struct sbuf *b, int depth)
{
	sqlite3_stmt *q;
	bool first = true;

	if (depth >= RENDER_DEPTH_MAX) {
		sb_add(b, "...", 3);
		return;
	}
	if (sqlite3_prepare_v2(db, "SELECT key, type, value FROM json_each(?1)", -1, &q, NULL) !=
	    SQLITE_OK)
		return;
	sqlite3_bind_text(q, 1, json, -1, SQLITE_TRANSIENT);
	while (sqlite3_step(q) == SQLITE_ROW) {
		const char *key = (const char *)sqlite3_column_text(q, 0);
		const char *type = (const char *)sqlite3_column_text(q, 1);
		const char *val = (const char *)sqlite3_column_text(q, 2);
		if (!first)
			sb_add(b, object ? ", " : ",", object ? 2 : 1);
		first = false;
		if (object)
			sb_printf(b, "%s -> ", key ? key : "?");
		render_value(db, type ? type : "null", val, b, depth + 1);
	}
	sqlite3_finalize(q);
}

static void render_value(sqlite3 *db, const char *type, const char *text, struct sbuf *b,
			 int depth)
{
	if (!strcmp(type, "null")) {
		sb_add(b, "UNDEFINED", 9);
	} else if (!strcmp(type, "object")) {
		sb_add(b, "(", 1);
		render_members(db, text, true, b, depth);
		sb_add(b, ")", 1);
	} else if (!strcmp(type, "array")) {
		sb_add(b, "[", 1);
		render_members(db, text, false, b, depth);
		sb_add(b, "]", 1);
	} else if (!strcmp(type, "text")) {
		sb_printf(b, "\"%s\"", text ? text : "");
	} else if (!strcmp(type, "true") || !strcmp(type, "false")) {
		sb_printf(b, "%s", type);
	} else {
		sb_printf(b, "%s", text ? text : "?");   /* integer, real, true, false */
	}
}

char *render_metrics(sqlite3 *db, const char *json)
{
	struct sbuf b = { 0 };
	sqlite3_stmt *q;
	bool first = true;

	if (!json)
		return strdup("");
	if (sqlite3_prepare_v2(db, "SELECT key, type, value FROM json_each(?1) WHERE json_valid(?1)"
				   " AND json_type(?1) = 'object'", -1, &q, NULL) != SQLITE_OK)
		return strdup("");
	sqlite3_bind_text(q, 1, json, -1, SQLITE_TRANSIENT);
	while (sqlite3_step(q) == SQLITE_ROW) {
		const char *key = (const char *)sqlite3_column_text(q, 0);
		const char *type = (const char *)sqlite3_column_text(q, 1);
		const char *val = (const char *)sqlite3_column_text(q, 2);
		if (!first)
			sb_add(&b, ", ", 2);
		first = false;
		sb_printf(&b, "%s = ", key ? key : "?");
		render_value(db, type ? type : "null", val, &b, 0);
	}
	sqlite3_finalize(q);
	if (b.oom) {
		sb_free(&b);
		return NULL;
	}
	return sb_take(&b);
}

void table_init(struct table *t, const char *const *header)
{
	memset(t, 0, sizeof *t);
	while (header[t->ncols])
		t->ncols++;
	table_row(t, header);
}

void table_row(struct table *t, const char *const *cells)
{
	if ((t->nrows + 1) * t->ncols > t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : t->ncols * 16;
		char **g = realloc(t->cells, ncap * sizeof *g);
		if (!g)
			return;
		t->cells = g;
		t->cap = ncap;
	}
	for (size_t i = 0; i < t->ncols; i++)
		t->cells[t->nrows * t->ncols + i] = strdup(cells[i] ? cells[i] : "");
	t->nrows++;
}

/* Display width of UTF-8 text (one column per code point). */
static size_t text_width(const char *s)
{
	size_t w = 0;

	for (; s && *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

void table_print(struct table *t, struct sbuf *out, int width)
{
	size_t *w = calloc(t->ncols, sizeof *w);

	if (!w)
		goto out;
	for (size_t r = 0; r < t->nrows; r++)
		for (size_t c = 0; c < t->ncols; c++) {
			size_t n = text_width(t->cells[r * t->ncols + c]);
			if (n > w[c])
				w[c] = n;
		}
	for (size_t r = 0; r < t->nrows; r++) {
		size_t used = 0, start = out->len;
		for (size_t c = 0; c < t->ncols; c++) {
			const char *cell = t->cells[r * t->ncols + c] ? t->cells[r * t->ncols + c] : "";
			bool last = c + 1 == t->ncols;
			sb_printf(out, "%s", cell);
			used += text_width(cell);
			if (!last)
				for (size_t k = text_width(cell); k < w[c] + 2; k++, used++)
					sb_add(out, " ", 1);
		}
		/* cut an over-long last column to the terminal width */
		if (width > 0 && used > (size_t)width && out->s) {
			size_t cols = 0, i = start;
			while (i < out->len && cols < (size_t)width - 1) {
				if (((unsigned char)out->s[i] & 0xc0) != 0x80)
					cols++;
				i++;
			}
			while (i < out->len && ((unsigned char)out->s[i] & 0xc0) == 0x80)
				i++;
			out->len = i;
			out->s[i] = '\0';
			sb_printf(out, "%s", "+");
		}
		sb_add(out, "\n", 1);
	}
out:
	for (size_t i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(w);
	memset(t, 0, sizeof *t);
}
