/* The telemonrc parser, checker and writer (see rcfile.h and telemonrc(5)).
 * A small hand-written tokenizer and recursive-descent parser: the grammar
 * has four rules, and the error messages must name the line and property,
 * which a generic S-expression reader would not know about. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmon/names.h"
#include "cmon/net.h"
#include "db.h"
#include "rcfile.h"
#include "window.h"

static const struct {
	const char *name;        /* spelling */
	bool is_bool;            /* TRUE/FALSE valued */
	bool in_class;           /* allowed in (class ...) */
	bool dflt;               /* booleans: the value when set nowhere */
} props[RC_NPROPS] = {
#define RC_ROW(e, s, b, c, d) [e] = { s, b, c, d },
	RC_PROPS(RC_ROW)
#undef RC_ROW
};

const char *rc_prop_name(enum rc_prop p)
{
	return (unsigned)p < RC_NPROPS ? props[p].name : NULL;
}

int rc_prop_lookup(const char *name)
{
	for (int i = 0; i < RC_NPROPS; i++)
		if (strcmp(props[i].name, name) == 0)
			return i;
	return -1;
}

/* "known: NAME ...; in defaults also NAME ...", from the table (so that an
 * unknown property's message names every property there is). */
static void known_props(char *buf, size_t size)
{
	size_t n = (size_t)snprintf(buf, size, "known:");

	for (int pass = 0; pass < 2; pass++) {
		if (pass && n < size)
			n += (size_t)snprintf(buf + n, size - n, "; in defaults also");
		for (int i = 0; i < RC_NPROPS && n < size; i++)
			if (props[i].in_class == !pass)
				n += (size_t)snprintf(buf + n, size - n, " %s", props[i].name);
	}
}

bool rc_prop_is_bool(enum rc_prop p)
{
	return (unsigned)p < RC_NPROPS && props[p].is_bool;
}

/* --- values ---------------------------------------------------------------- */

static bool addr_char_local(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr(".!#$%&'*+/=?^_`{|}~-", c));
}

static bool addr_char_domain(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '-';
}

/* One mail address local@domain, `n` bytes at `s`: no spaces, angle
 * brackets or line breaks can reach an SMTP command or a mail header. */
static bool addr_valid(const char *s, size_t n)
{
	const char *at = memchr(s, '@', n);
	size_t i;

	if (!at || at == s || at == s + n - 1 || n > 254)
		return false;
	for (i = 0; s + i < at; i++)
		if (!addr_char_local(s[i]))
			return false;
	for (i = (size_t)(at - s) + 1; i < n; i++)
		if (!addr_char_domain(s[i]))
			return false;
	return true;
}

/* Check an address list ("a@b, c@d" or space separated). */
static bool mail_list_valid(const char *v, const char **bad, size_t *badlen)
{
	size_t count = 0;

	while (*v) {
		size_t n;
		while (*v == ',' || *v == ' ' || *v == '\t')
			v++;
		if (!*v)
			break;
		n = strcspn(v, ", \t");
		if (!addr_valid(v, n) || ++count > RC_MAIL_MAX) {
			*bad = v;
			*badlen = n;
			return false;
		}
		v += n;
	}
	return true;
}

static bool has_control(const char *v)
{
	for (; *v; v++)
		if ((unsigned char)*v < 0x20 && *v != '\t')
			return true;
	return false;
}

/* Check a text value for property `p`; a message in `msg` if bad. */
static bool value_ok(enum rc_prop p, const char *v, char *msg, size_t size)
{
	const char *bad;
	size_t badlen;
	double secs;

	if (strlen(v) > RC_TEXT_MAX) {
		snprintf(msg, size, "value longer than %u bytes", RC_TEXT_MAX);
		return false;
	}
	if (has_control(v)) {
		snprintf(msg, size, "control characters are not allowed");
		return false;
	}
	switch (p) {
	case RC_PROG:
	case RC_MACHINE:
		if (strlen(v) > CMON_NAME_MAX || !cmon_pattern_valid(v)) {
			snprintf(msg, size, "\"%.80s\" is not a name pattern (up to %d of "
				 "A-Z a-z 0-9 . _ + - and the wildcards * ?)", v, CMON_NAME_MAX);
			return false;
		}
		return true;
	case RC_PID:
		if (strlen(v) > 20 || !cmon_pid_pattern_valid(v)) {
			snprintf(msg, size, "\"%.80s\" is not a pid pattern (digits and * ?)", v);
			return false;
		}
		return true;
	case RC_MAIL:
		if (!mail_list_valid(v, &bad, &badlen)) {
			snprintf(msg, size, "\"%.*s\" is not a mail address (or more than %d)",
				 (int)(badlen > 80 ? 80 : badlen), bad, RC_MAIL_MAX);
			return false;
		}
		return true;
	case RC_FROM:
		if (*v && !addr_valid(v, strlen(v))) {
			snprintf(msg, size, "\"%.80s\" is not a mail address", v);
			return false;
		}
		return true;
	case RC_WINDOW:
		if (*v) {
			struct window_spec ws;
			char why[200];
			if (window_spec_parse(v, &ws, why, sizeof why) < 0) {
				snprintf(msg, size, "%s", why);
				return false;
			}
		}
		return true;
	case RC_MAILGROUP:
		if (*v && (window_parse_duration(v, &secs) < 0 || secs > 7 * 86400.0)) {
			snprintf(msg, size, "\"%.80s\" is not a duration such as \"5 min\" "
				 "(at most 7 days)", v);
			return false;
		}
		return true;
	case RC_RESOLVE_AFTER:
		if (*v && (window_parse_duration(v, &secs) < 0 || secs < 1 ||
			   secs > RC_RESOLVE_AFTER_MAX)) {
			snprintf(msg, size, "\"%.80s\" is not a duration such as \"5 min\" "
				 "(1 s to 7 days)", v);
			return false;
		}
		return true;
	case RC_RETENTION:
		if (*v && (window_parse_duration(v, &secs) < 0 || secs < RC_RETENTION_MIN ||
			   secs > RC_RETENTION_MAX)) {
			snprintf(msg, size, "\"%.80s\" is not a duration such as \"30 days\" "
				 "(1 hour to 100 years)", v);
			return false;
		}
		return true;
	case RC_STORE_BACKLOG:
		if (*v) {
			char *end;
			unsigned long long n = strtoull(v, &end, 10);
			if (*v < '0' || *v > '9' || *end || n < 1 || n > RC_STORE_BACKLOG_MAX) {
				snprintf(msg, size, "\"%.80s\" is not a number of failures from 1 to "
					 "%d", v, RC_STORE_BACKLOG_MAX);
				return false;
			}
		}
		return true;
	case RC_MAX_SESSIONS:
		if (*v) {
			char *end;
			unsigned long long n = strtoull(v, &end, 10);
			if (*v < '0' || *v > '9' || *end || n < 1 || n > RC_MAX_SESSIONS_MAX) {
				snprintf(msg, size, "\"%.80s\" is not a number of instances from 1 to "
					 "%d", v, RC_MAX_SESSIONS_MAX);
				return false;
			}
		}
		return true;
	case RC_ALERTMANAGER:
		if (*v && strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) {
			snprintf(msg, size, "\"%.80s\" is not an http:// or https:// URL", v);
			return false;
		}
		if (strpbrk(v, " \t?#")) {
			snprintf(msg, size, "an Alertmanager URL cannot contain spaces, '?' or '#'");
			return false;
		}
		return true;
	case RC_HTTP:
		if (*v) {
			struct cmon_addr a;
			if (cmon_addr_parse(v, 0, &a) < 0) {
				snprintf(msg, size, "\"%.80s\" is not an address (HOST:PORT, "
					 "[V6]:PORT or unix:PATH)", v);
				return false;
			}
		}
		return true;
	case RC_STORE:
		if (!db_target_valid(v)) {
			snprintf(msg, size, "\"%.80s\" is neither \"sqlite\" nor a postgresql:// URL", v);
			return false;
		}
		return true;
	case RC_SMTP:
		if (*v && strncmp(v, "smtp://", 7) != 0 && strncmp(v, "smtps://", 8) != 0) {
			snprintf(msg, size, "\"%.80s\" is not an smtp:// or smtps:// URL", v);
			return false;
		}
		if (strpbrk(v, " \t")) {
			snprintf(msg, size, "a URL cannot contain spaces");
			return false;
		}
		return true;
	default:
		return true;
	}
}

static int set_value(struct rc_props *pp, enum rc_prop p, const char *text, bool flag, int line)
{
	if (props[p].is_bool) {
		pp->flag[p] = flag;
	} else {
		char *dup = strdup(text);
		if (!dup)
			return -ENOMEM;
		free(pp->text[p]);
		pp->text[p] = dup;
	}
	pp->set[p] = true;
	pp->line[p] = line;
	return 0;
}

int rc_props_set(struct rc_props *pp, const char *name, const char *value, bool in_defaults,
		 char *err, size_t errlen)
{
	int p = rc_prop_lookup(name);
	char msg[300];
	bool flag = false;

	if (p < 0) {
		snprintf(err, errlen, "%s: unknown property", name);
		return -EINVAL;
	}
	if (!in_defaults && !props[p].in_class) {
		snprintf(err, errlen, "%s: only allowed in (defaults ...)", name);
		return -EINVAL;
	}
	if (props[p].is_bool) {
		if (!strcmp(value, "TRUE") || !strcmp(value, "true") || !strcmp(value, "yes") ||
		    !strcmp(value, "1"))
			flag = true;
		else if (!strcmp(value, "FALSE") || !strcmp(value, "false") ||
			 !strcmp(value, "no") || !strcmp(value, "0"))
			flag = false;
		else {
			snprintf(err, errlen, "%s: expected TRUE or FALSE, not \"%.80s\"", name, value);
			return -EINVAL;
		}
	} else if (!value_ok((enum rc_prop)p, value, msg, sizeof msg)) {
		snprintf(err, errlen, "%s: %s", name, msg);
		return -EINVAL;
	}
	if (set_value(pp, (enum rc_prop)p, value, flag, 0) < 0) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

void rc_props_clear(struct rc_props *pp)
{
	for (int i = 0; i < RC_NPROPS; i++)
		free(pp->text[i]);
	memset(pp, 0, sizeof *pp);
}

int rc_props_copy(struct rc_props *dst, const struct rc_props *src)
{
	struct rc_props t = *src;

	for (int i = 0; i < RC_NPROPS; i++)
		t.text[i] = NULL;
	for (int i = 0; i < RC_NPROPS; i++)
		if (src->text[i] && !(t.text[i] = strdup(src->text[i]))) {
			rc_props_clear(&t);
			return -ENOMEM;
		}
	*dst = t;
	return 0;
}

/* --- tokens ---------------------------------------------------------------- */

/* Kinds of token. */
enum tok_kind {
	TOK_EOF,                 /* end of input */
	TOK_LPAREN,              /* ( */
	TOK_RPAREN,              /* ) */
	TOK_TEXT,                /* "double-quoted" (unescaped into buf) */
	TOK_WORD,                /* a bare word: defaults, class, prog, TRUE, ... */
	TOK_ERROR,               /* lexical error, message in the parser */
};

/* The parser's state. */
struct parser {
	const char *p;           /* next byte */
	const char *end;         /* end of input */
	const char *name;        /* file name for messages */
	int line;                /* current line */
	enum tok_kind kind;      /* current token */
	int tok_line;            /* line it started on */
	char buf[RC_TEXT_MAX + 2]; /* its text (words and unescaped texts) */
	char *err;               /* message buffer */
	size_t errlen;           /* its size */
	bool overlay;            /* parsing the service's classes.rc: (removed ...), no defaults */
};

static int rc_fail(struct parser *ps, int line, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int rc_fail(struct parser *ps, int line, const char *what, const char *fmt, ...)
{
	char msg[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (what)
		snprintf(ps->err, ps->errlen, "%s:%d: error: %s: %s", ps->name, line, what, msg);
	else
		snprintf(ps->err, ps->errlen, "%s:%d: error: %s", ps->name, line, msg);
	return -EINVAL;
}

static bool word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-';
}

/* Read the next token into ps->kind / ps->buf. */
static void next(struct parser *ps)
{
	size_t n = 0;

	for (;;) {
		while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r' ||
					   *ps->p == '\n' || *ps->p == '\f')) {
			if (*ps->p == '\n')
				ps->line++;
			ps->p++;
		}
		if (ps->p < ps->end && *ps->p == ';') {
			while (ps->p < ps->end && *ps->p != '\n')
				ps->p++;
			continue;
		}
		break;
	}
	ps->tok_line = ps->line;
	ps->buf[0] = '\0';
	if (ps->p >= ps->end) {
		ps->kind = TOK_EOF;
		return;
	}
	if (*ps->p == '(' || *ps->p == ')') {
		ps->kind = *ps->p == '(' ? TOK_LPAREN : TOK_RPAREN;
		ps->p++;
		return;
	}
	if (*ps->p == '"') {
		ps->p++;
		for (;;) {
			char c;
			if (ps->p >= ps->end || *ps->p == '\n') {
				ps->kind = TOK_ERROR;
				snprintf(ps->buf, sizeof ps->buf, "unterminated text (a \" is missing)");
				return;
			}
			c = *ps->p++;
			if (c == '"')
				break;
			if (c == '\\') {
				c = ps->p < ps->end ? *ps->p++ : '\0';
				if (c == 'n')
					c = '\n';
				else if (c == 't')
					c = '\t';
				else if (c != '\\' && c != '"') {
					ps->kind = TOK_ERROR;
					snprintf(ps->buf, sizeof ps->buf,
						 "unknown escape in text (use \\\" \\\\ \\n or \\t)");
					return;
				}
			}
			if (c == '\0') {
				ps->kind = TOK_ERROR;
				snprintf(ps->buf, sizeof ps->buf, "NUL byte in text");
				return;
			}
			if (n >= RC_TEXT_MAX) {
				ps->kind = TOK_ERROR;
				snprintf(ps->buf, sizeof ps->buf, "text longer than %u bytes",
					 RC_TEXT_MAX);
				return;
			}
			ps->buf[n++] = c;
		}
		ps->buf[n] = '\0';
		ps->kind = TOK_TEXT;
		return;
	}
	if (word_char(*ps->p)) {
		while (ps->p < ps->end && word_char(*ps->p)) {
			if (n < 64)
				ps->buf[n++] = *ps->p;
			ps->p++;
		}
		ps->buf[n] = '\0';
		ps->kind = TOK_WORD;
		return;
	}
	ps->kind = TOK_ERROR;
	if ((unsigned char)*ps->p >= 0x20 && (unsigned char)*ps->p < 0x7f)
		snprintf(ps->buf, sizeof ps->buf, "unexpected character '%c'", *ps->p);
	else
		snprintf(ps->buf, sizeof ps->buf, "unexpected byte 0x%02x",
			 (unsigned)(unsigned char)*ps->p);
}

static const char *tok_desc(struct parser *ps, char *out, size_t size)
{
	switch (ps->kind) {
	case TOK_EOF: return "the end of the file";
	case TOK_LPAREN: return "'('";
	case TOK_RPAREN: return "')'";
	case TOK_TEXT: snprintf(out, size, "text \"%.40s\"", ps->buf); return out;
	case TOK_WORD: snprintf(out, size, "'%.40s'", ps->buf); return out;
	case TOK_ERROR: return ps->buf;
	}
	return "?";
}

/* property ::= '(' prop value ')'   (the '(' already read) */
static int parse_property(struct parser *ps, struct rc_props *pp, bool in_defaults)
{
	char d[80], name[80], value[RC_TEXT_MAX + 2], msg[400];
	int line = ps->tok_line, p;
	bool flag = false;

	next(ps);
	if (ps->kind != TOK_WORD)
		return rc_fail(ps, ps->tok_line, NULL, "expected a property name after '(', found %s",
			    tok_desc(ps, d, sizeof d));
	snprintf(name, sizeof name, "%.64s", ps->buf);
	p = rc_prop_lookup(name);
	if (p < 0) {
		char known[400];
		known_props(known, sizeof known);
		return rc_fail(ps, line, name, "unknown property (%s)", known);
	}
	if (!in_defaults && !props[p].in_class)
		return rc_fail(ps, line, name, "only allowed in (defaults ...)");
	next(ps);
	if (props[p].is_bool) {
		if (ps->kind == TOK_WORD && strcmp(ps->buf, "TRUE") == 0)
			flag = true;
		else if (ps->kind == TOK_WORD && strcmp(ps->buf, "FALSE") == 0)
			flag = false;
		else
			return rc_fail(ps, ps->tok_line, name, "expected TRUE or FALSE, found %s",
				    tok_desc(ps, d, sizeof d));
		value[0] = '\0';
	} else {
		if (ps->kind != TOK_TEXT &&
		    !((p == RC_STORE_BACKLOG || p == RC_MAX_SESSIONS) && ps->kind == TOK_WORD))
			return rc_fail(ps, ps->tok_line, name, "expected a \"text\" value, found %s",
				    tok_desc(ps, d, sizeof d));
		snprintf(value, sizeof value, "%s", ps->buf);
		if (!value_ok((enum rc_prop)p, value, msg, sizeof msg))
			return rc_fail(ps, ps->tok_line, name, "%s", msg);
	}
	next(ps);
	if (ps->kind != TOK_RPAREN)
		return rc_fail(ps, ps->tok_line, name, "expected ')' after the value, found %s",
			    tok_desc(ps, d, sizeof d));
	if (set_value(pp, (enum rc_prop)p, value, flag, line) < 0)
		return rc_fail(ps, line, name, "out of memory");
	return 0;
}

/* description ::= '(' ('defaults' | 'class') property* ')'
 *               | '(' 'removed' property* ')'      (classes.rc only) */
static int parse_description(struct parser *ps, struct rc_config *c)
{
	struct rc_class k = { 0 };
	char d[80];
	int line = ps->tok_line, r;
	bool is_defaults;

	if (ps->kind != TOK_LPAREN)
		return rc_fail(ps, ps->tok_line, NULL, "expected '(' to start (defaults ...) or "
			    "(class ...), found %s", tok_desc(ps, d, sizeof d));
	next(ps);
	if (ps->overlay && ps->kind == TOK_WORD && !strcmp(ps->buf, "removed")) {
		k.removed = true;
	} else if (ps->overlay && ps->kind == TOK_WORD && !strcmp(ps->buf, "defaults")) {
		return rc_fail(ps, ps->tok_line, "defaults", "not allowed here (only classes and "
			    "removed classes; defaults belong in the telemonrc file)");
	} else if (ps->kind != TOK_WORD ||
		   (strcmp(ps->buf, "defaults") && strcmp(ps->buf, "class"))) {
		return rc_fail(ps, ps->tok_line, NULL, "expected 'defaults' or 'class' after '(', "
			    "found %s", tok_desc(ps, d, sizeof d));
	}
	is_defaults = strcmp(ps->buf, "defaults") == 0;
	if (is_defaults && c->has_defaults)
		return rc_fail(ps, line, "defaults", "given twice (first on line %d)",
			    c->defaults_line);
	if (is_defaults && c->nclasses)
		return rc_fail(ps, line, "defaults", "must come before every (class ...)");
	if (!is_defaults && c->nclasses >= RC_CLASSES_MAX)
		return rc_fail(ps, line, "class", "more than %d classes", RC_CLASSES_MAX);
	k.line = line;
	for (;;) {
		next(ps);
		if (ps->kind == TOK_RPAREN)
			break;
		if (ps->kind == TOK_EOF) {
			rc_props_clear(&k.p);
			return rc_fail(ps, line, is_defaults ? "defaults" : "class",
				       "no ')' closes it (found the end of the file)");
		}
		if (ps->kind != TOK_LPAREN) {
			rc_props_clear(&k.p);
			return rc_fail(ps, ps->tok_line, is_defaults ? "defaults" : "class",
				    "expected '(' or ')', found %s", tok_desc(ps, d, sizeof d));
		}
		r = parse_property(ps, is_defaults ? &c->defaults : &k.p, is_defaults);
		if (r < 0) {
			rc_props_clear(&k.p);
			return r;
		}
	}
	if (is_defaults) {
		c->has_defaults = true;
		c->defaults_line = line;
		return 0;
	}
	if (k.removed) {
		for (int i = 0; i < RC_NPROPS; i++)
			if (k.p.set[i] && i != RC_PROG && i != RC_MACHINE && i != RC_PID) {
				rc_props_clear(&k.p);
				return rc_fail(ps, line, props[i].name, "a (removed ...) entry has only "
					    "prog, machine and pid");
			}
	}
	r = rc_add_class(c, &k);
	rc_props_clear(&k.p);
	return r < 0 ? rc_fail(ps, line, "class", "out of memory") : 0;
}

struct rc_config *rc_new(const char *path)
{
	struct rc_config *c = calloc(1, sizeof *c);
	char buf[PATH_MAX], *slash;

	if (!c)
		return NULL;
	if (path) {
		c->path = strdup(path);
		snprintf(buf, sizeof buf, "%s", path);
		slash = strrchr(buf, '/');
		if (slash == buf)
			buf[1] = '\0';
		else if (slash)
			*slash = '\0';
		else
			snprintf(buf, sizeof buf, ".");
		c->dir = strdup(buf);
		if (!c->path || !c->dir) {
			rc_free(c);
			return NULL;
		}
	}
	return c;
}

/* rc_parse(), or with `overlay` the grammar of classes.rc. */
static int parse_text(const char *text, size_t len, const char *name, const char *dir,
		      bool overlay, struct rc_config **out, char *err, size_t errlen)
{
	struct parser ps = { .p = text, .end = text + len, .name = name, .line = 1,
			     .err = err, .errlen = errlen, .overlay = overlay };
	struct rc_config *c = calloc(1, sizeof *c);
	int r = 0;

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if ((dir && !(c->dir = strdup(dir))) || !(c->name = strdup(name))) {
		rc_free(c);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (len > RC_FILE_MAX) {
		snprintf(err, errlen, "%s: larger than %u bytes", name, RC_FILE_MAX);
		rc_free(c);
		return -EFBIG;
	}
	if (memchr(text, '\0', len)) {
		snprintf(err, errlen, "%s: contains a NUL byte; not a text file", name);
		rc_free(c);
		return -EINVAL;
	}
	next(&ps);
	while (ps.kind != TOK_EOF) {
		if (ps.kind == TOK_ERROR) {
			r = rc_fail(&ps, ps.tok_line, NULL, "%s", ps.buf);
			break;
		}
		r = parse_description(&ps, c);
		if (r < 0)
			break;
		next(&ps);
	}
	/* an overlay's classes are checked once merged (rc_overlay_apply) */
	for (size_t i = 0; r == 0 && !overlay && i < c->nclasses; i++)
		r = rc_check_class(c, &c->classes[i], err, errlen);
	if (r < 0) {
		rc_free(c);
		return r;
	}
	*out = c;
	return 0;
}

int rc_parse(const char *text, size_t len, const char *name, const char *dir,
	     struct rc_config **out, char *err, size_t errlen)
{
	return parse_text(text, len, name, dir, false, out, err, errlen);
}

/* Read the whole regular file at `path` (at most RC_FILE_MAX bytes) into
 * a heap string *text of *lenp bytes. 0, or a negative errno with a message. */
static int read_file(const char *path, char **textp, size_t *lenp, char *err, size_t errlen)
{
	struct stat st;
	char *text;
	ssize_t got;
	size_t len = 0;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return r;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		close(fd);
		return -EINVAL;
	}
	if (st.st_size > RC_FILE_MAX) {
		snprintf(err, errlen, "%s: larger than %u bytes", path, RC_FILE_MAX);
		close(fd);
		return -EFBIG;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	while (len < (size_t)st.st_size &&
	       ((got = read(fd, text + len, (size_t)st.st_size - len)) > 0 ||
		(got < 0 && errno == EINTR)))
		if (got > 0)
			len += (size_t)got;
	close(fd);
	text[len] = '\0';
	*textp = text;
	*lenp = len;
	return 0;
}

int rc_load(const char *path, struct rc_config **out, char *err, size_t errlen)
{
	struct rc_config *c = NULL;
	char *text = NULL, *slash, dir[PATH_MAX];
	size_t len = 0;
	int r;

	r = read_file(path, &text, &len, err, errlen);
	if (r < 0)
		return r;
	if (!realpath(path, dir))
		snprintf(dir, sizeof dir, "%s", path);
	slash = strrchr(dir, '/');
	if (slash == dir)
		dir[1] = '\0';
	else if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof dir, ".");
	r = rc_parse(text, len, path, dir, &c, err, errlen);
	free(text);
	if (r < 0)
		return r;
	c->path = strdup(path);
	if (!c->path) {
		rc_free(c);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

struct rc_config *rc_clone(const struct rc_config *c)
{
	struct rc_config *d = calloc(1, sizeof *d);

	if (!d)
		return NULL;
	d->has_defaults = c->has_defaults;
	d->defaults_line = c->defaults_line;
	if ((c->path && !(d->path = strdup(c->path))) || (c->name && !(d->name = strdup(c->name))) ||
	    (c->dir && !(d->dir = strdup(c->dir))) || rc_props_copy(&d->defaults, &c->defaults) < 0)
		goto fail;
	for (size_t i = 0; i < c->nclasses; i++)
		if (rc_add_class(d, &c->classes[i]) < 0)
			goto fail;
	return d;
fail:
	rc_free(d);
	return NULL;
}

void rc_free(struct rc_config *c)
{
	if (!c)
		return;
	rc_props_clear(&c->defaults);
	for (size_t i = 0; i < c->nclasses; i++)
		rc_props_clear(&c->classes[i].p);
	free(c->classes);
	free(c->path);
	free(c->name);
	free(c->dir);
	free(c);
}

const char *rc_text(const struct rc_config *c, const struct rc_class *k, enum rc_prop p)
{
	if (k && k->p.set[p] && k->p.text[p])
		return k->p.text[p];
	if (c->defaults.set[p] && c->defaults.text[p])
		return c->defaults.text[p];
	return "";
}

bool rc_flag(const struct rc_config *c, const struct rc_class *k, enum rc_prop p)
{
	if (k && k->p.set[p])
		return k->p.flag[p];
	if (c->defaults.set[p])
		return c->defaults.flag[p];
	return (unsigned)p < RC_NPROPS && props[p].dflt;
}

void rc_spec_path(const struct rc_config *c, const char *spec, char *out, size_t size)
{
	if (spec[0] == '/' || !c->dir)
		snprintf(out, size, "%s", spec);
	else
		snprintf(out, size, "%s/%s", c->dir, spec);
}

/* "*" and "" both mean any, as the registry treats them. */
static const char *pattern_key(const char *s)
{
	return strcmp(s, "*") == 0 ? "" : s;
}

static void where(const struct rc_config *c, const struct rc_class *k, enum rc_prop p, char *out,
		  size_t size)
{
	int line = k->p.set[p] && k->p.line[p] ? k->p.line[p] : k->line;

	if (line && (c->name || c->path))
		snprintf(out, size, "%s:%d: error: ", c->name ? c->name : c->path, line);
	else if (line)
		snprintf(out, size, "line %d: error: ", line);
	else
		out[0] = '\0';
}

int rc_check_class(const struct rc_config *c, const struct rc_class *k, char *err, size_t errlen)
{
	const char *spec = rc_text(c, k, RC_SPEC);
	char loc[PATH_MAX + 40], path[PATH_MAX];

	/* A class may have neither a tool nor a spec (appendix C.1: an unset
	 * text is empty): monitoring its instances then only counts the log. */
	if (*spec) {
		rc_spec_path(c, spec, path, sizeof path);
		if (access(path, R_OK) < 0) {
			where(c, k, RC_SPEC, loc, sizeof loc);
			snprintf(err, errlen, "%sspec: cannot read %s: %s", loc, path,
				 strerror(errno));
			return -EINVAL;
		}
	}
	for (size_t i = 0; i < c->nclasses && &c->classes[i] != k; i++) {
		const struct rc_class *o = &c->classes[i];
		if (strcmp(pattern_key(rc_text(c, o, RC_PROG)), pattern_key(rc_text(c, k, RC_PROG))) ||
		    strcmp(pattern_key(rc_text(c, o, RC_MACHINE)),
			   pattern_key(rc_text(c, k, RC_MACHINE))) ||
		    strcmp(pattern_key(rc_text(c, o, RC_PID)), pattern_key(rc_text(c, k, RC_PID))))
			continue;
		where(c, k, RC_PROG, loc, sizeof loc);
		if (o->line)
			snprintf(err, errlen, "%sprog: the same prog, machine and pid as the class "
				 "on line %d (two classes cannot describe the same instances)",
				 loc, o->line);
		else
			snprintf(err, errlen, "%sprog: the same prog, machine and pid as another "
				 "class (two classes cannot describe the same instances)", loc);
		return -EINVAL;
	}
	return 0;
}

int rc_add_class(struct rc_config *c, const struct rc_class *k)
{
	struct rc_class *grown;

	if (c->nclasses >= RC_CLASSES_MAX)
		return -ENOSPC;
	grown = realloc(c->classes, (c->nclasses + 1) * sizeof *grown);
	if (!grown)
		return -ENOMEM;
	c->classes = grown;
	grown[c->nclasses].line = k->line;
	grown[c->nclasses].removed = k->removed;
	if (rc_props_copy(&grown[c->nclasses].p, &k->p) < 0)
		return -ENOMEM;
	return (int)c->nclasses++;
}

void rc_remove_class(struct rc_config *c, size_t i)
{
	if (i >= c->nclasses)
		return;
	rc_props_clear(&c->classes[i].p);
	memmove(&c->classes[i], &c->classes[i + 1], (c->nclasses - i - 1) * sizeof c->classes[0]);
	c->nclasses--;
}

/* --- writing --------------------------------------------------------------- */

/* A growing string. */
struct sbuf {
	char *s;                 /* text (NUL-terminated) */
	size_t len;              /* its length */
	size_t cap;              /* allocated */
	bool oom;                /* an allocation failed */
};

static void sb_add(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if (b->s && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		size_t ncap = (b->cap ? b->cap * 2 : 1024) + (size_t)n;
		char *g = realloc(b->s, ncap);
		if (!g) {
			b->oom = true;
			return;
		}
		b->s = g;
		b->cap = ncap;
	}
}

static void sb_text(struct sbuf *b, const char *v)
{
	sb_add(b, "\"");
	for (; *v; v++) {
		if (*v == '"' || *v == '\\')
			sb_add(b, "\\%c", *v);
		else if (*v == '\n')
			sb_add(b, "\\n");
		else
			sb_add(b, "%c", *v);
	}
	sb_add(b, "\"");
}

static void sb_props(struct sbuf *b, const struct rc_props *pp)
{
	for (int i = 0; i < RC_NPROPS; i++) {
		if (!pp->set[i])
			continue;
		sb_add(b, "\n  (%s ", props[i].name);
		if (props[i].is_bool)
			sb_add(b, "%s", pp->flag[i] ? "TRUE" : "FALSE");
		else
			sb_text(b, pp->text[i] ? pp->text[i] : "");
		sb_add(b, ")");
	}
}

char *rc_format(const struct rc_config *c)
{
	struct sbuf b = { 0 };
	char when[64];
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
	sb_add(&b, "; telemonitor configuration (see telemonrc(5)), written %s.\n", when);
	if (c->has_defaults) {
		sb_add(&b, "\n(defaults");
		sb_props(&b, &c->defaults);
		sb_add(&b, ")\n");
	}
	for (size_t i = 0; i < c->nclasses; i++) {
		sb_add(&b, "\n(class");
		sb_props(&b, &c->classes[i].p);
		sb_add(&b, ")\n");
	}
	if (b.oom) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

/* Write `len` bytes of `text` to `path` atomically (a temporary file in the
 * same directory, fsync, rename; mode 0640). 0 or a negative errno. */
static int write_atomic(const char *path, const char *text, size_t len)
{
	char tmp[PATH_MAX];
	size_t off = 0;
	int fd, r = 0;

	if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid()) >= sizeof tmp)
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd < 0)
		return -errno;
	while (off < len) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			r = -errno;
			break;
		}
		off += (size_t)w;
	}
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

/* --- classes.rc: the live class changes ------------------------------------ */

/* True if class `a` of `ca` and class `b` of `cb` describe the same
 * instances (the same prog, machine and pid patterns). */
static bool same_key(const struct rc_config *ca, const struct rc_class *a,
		     const struct rc_config *cb, const struct rc_class *b)
{
	static const enum rc_prop key[] = { RC_PROG, RC_MACHINE, RC_PID };

	for (size_t i = 0; i < sizeof key / sizeof key[0]; i++)
		if (strcmp(pattern_key(rc_text(ca, a, key[i])), pattern_key(rc_text(cb, b, key[i]))))
			return false;
	return true;
}

/* The index of the class of `c` with the key of class `k` of `ck`, or -1. */
static long find_key(const struct rc_config *c, const struct rc_config *ck,
		     const struct rc_class *k)
{
	for (size_t i = 0; i < c->nclasses; i++)
		if (!c->classes[i].removed && same_key(c, &c->classes[i], ck, k))
			return (long)i;
	return -1;
}

static bool same_props(const struct rc_props *a, const struct rc_props *b)
{
	for (int i = 0; i < RC_NPROPS; i++) {
		if (a->set[i] != b->set[i])
			return false;
		if (!a->set[i])
			continue;
		if (props[i].is_bool ? a->flag[i] != b->flag[i]
				     : strcmp(a->text[i] ? a->text[i] : "", b->text[i] ? b->text[i] : ""))
			return false;
	}
	return true;
}

int rc_overlay_load(const char *path, struct rc_config **out, char *err, size_t errlen)
{
	char *text = NULL;
	size_t len = 0;
	int r;

	r = read_file(path, &text, &len, err, errlen);
	if (r < 0)
		return r;
	r = parse_text(text, len, path, NULL, true, out, err, errlen);
	free(text);
	return r;
}

int rc_overlay_apply(struct rc_config *c, const struct rc_config *ov, char *err, size_t errlen)
{
	char why[1000];

	for (size_t i = 0; i < ov->nclasses; i++) {
		const struct rc_class *k = &ov->classes[i];
		long at = find_key(c, c, k);
		if (k->removed) {
			if (at >= 0)
				rc_remove_class(c, (size_t)at);
			continue;
		}
		if (at >= 0) {
			struct rc_props copy;
			if (rc_props_copy(&copy, &k->p) < 0)
				goto oom;
			rc_props_clear(&c->classes[at].p);
			c->classes[at].p = copy;
			memset(c->classes[at].p.line, 0, sizeof c->classes[at].p.line);
			c->classes[at].line = 0;
			continue;
		}
		int idx = rc_add_class(c, k);
		if (idx < 0) {
			if (idx == -ENOSPC) {
				snprintf(err, errlen, "%s: more than %d classes", ov->name ? ov->name : "?",
					 RC_CLASSES_MAX);
				return -EINVAL;
			}
			goto oom;
		}
		c->classes[idx].line = 0;
		memset(c->classes[idx].p.line, 0, sizeof c->classes[idx].p.line);
	}
	for (size_t i = 0; i < c->nclasses; i++)
		if (rc_check_class(c, &c->classes[i], why, sizeof why) < 0) {
			snprintf(err, errlen, "%s (after the changes in %s)", why,
				 ov->name ? ov->name : "?");
			return -EINVAL;
		}
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

char *rc_overlay_format(const struct rc_config *base, const struct rc_config *live)
{
	static const enum rc_prop key[] = { RC_PROG, RC_MACHINE, RC_PID };
	struct sbuf b = { 0 };

	sb_add(&b, "; Classes changed with telemonctl class add|set|rm, written by telemonitor\n"
		   "; (see telemonrc(5)). Read after the telemonrc file at startup: a (class ...)\n"
		   "; here replaces the telemonrc class with the same prog, machine and pid or\n"
		   "; adds one, a (removed ...) removes it. The telemonrc file is never written.\n");
	for (size_t i = 0; i < base->nclasses; i++) {
		const struct rc_class *k = &base->classes[i];
		long at = find_key(live, base, k);
		if (at < 0) {
			sb_add(&b, "\n(removed");
			for (size_t j = 0; j < sizeof key / sizeof key[0]; j++) {
				sb_add(&b, "\n  (%s ", props[key[j]].name);
				sb_text(&b, rc_text(base, k, key[j]));
				sb_add(&b, ")");
			}
			sb_add(&b, ")\n");
		} else if (!same_props(&k->p, &live->classes[at].p)) {
			sb_add(&b, "\n(class");
			sb_props(&b, &live->classes[at].p);
			sb_add(&b, ")\n");
		}
	}
	for (size_t i = 0; i < live->nclasses; i++)
		if (find_key(base, live, &live->classes[i]) < 0) {
			sb_add(&b, "\n(class");
			sb_props(&b, &live->classes[i].p);
			sb_add(&b, ")\n");
		}
	if (b.oom) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

int rc_overlay_save(const char *path, const struct rc_config *base, const struct rc_config *live,
		    char *err, size_t errlen)
{
	char *text = rc_overlay_format(base, live);
	int r;

	if (!text) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r = write_atomic(path, text, strlen(text));
	free(text);
	if (r < 0)
		snprintf(err, errlen, "cannot save %s: %s", path, strerror(-r));
	return r;
}
