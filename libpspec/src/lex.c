/* lex.c — the PSpec lexer. Grammar: appendix A.10 of the CMon report. */
#include "lex.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const struct {
    const char *spelling;
    ps_tok kind;
} keywords[] = {
#define X(name, spelling) {spelling, TK_##name},
    PS_KEYWORDS(X)
#undef X
};

static const struct {
    const char *spelling;
    ps_tok kind;
} puncts[] = {
#define X(name, spelling) {spelling, TK_##name},
    PS_PUNCT(X)
#undef X
};

/* UTF-8 spellings of the reference's mathematical symbols. */
static const struct {
    const char *utf8;
    ps_tok kind;
} symbols[] = {
    {"\xe2\x89\xa4", TK_LE},        /* ≤ */
    {"\xe2\x89\xa5", TK_GE},        /* ≥ */
    {"\xe2\x89\xa0", TK_NE},        /* ≠ */
    {"\xe2\x86\x92", TK_ARROW},     /* → */
    {"\xe2\x9f\xb6", TK_ARROW},     /* ⟶ */
    {"\xe2\x87\x92", TK_IMPLIES},   /* ⇒ */
    {"\xc3\x97", TK_STAR},          /* × */
};

const char *ps_tok_describe(ps_tok t)
{
    switch (t) {
    case TK_EOF: return "end of file";
    case TK_ERROR: return "invalid token";
    case TK_IDENT: return "identifier";
    case TK_NUMBER: return "number";
    case TK_STRING: return "string";
#define X(name, spelling) case TK_##name: return "'" spelling "'";
    PS_KEYWORDS(X)
    PS_PUNCT(X)
#undef X
    default: return "token";
    }
}

void ps_lex_init(ps_lexer *lx, const char *src)
{
    lx->src = src;
    lx->p = src;
    if (strncmp(src, "\xef\xbb\xbf", 3) == 0)
        lx->p += 3;     /* a UTF-8 byte order mark, as some editors write */
    lx->line = 1;
    lx->line_start = lx->p;
    lx->prev = TK_EOF;
}

static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_alnum(char c) { return is_alpha(c) || is_digit(c); }

size_t ps_lex_eol(const char *p)
{
    return *p == '\n' ? 1 : *p != '\r' ? 0 : p[1] == '\n' ? 2 : 1;
}

void ps_lex_position(const char *text, size_t off, uint32_t *line, uint32_t *col)
{
    const char *p = text, *end = text + off, *start = text;
    uint32_t l = 1;
    if (off >= 3 && strncmp(text, "\xef\xbb\xbf", 3) == 0)
        p = start = text + 3;   /* as ps_lex_init: columns count from after a byte order mark */
    while (p < end) {
        size_t n = ps_lex_eol(p);
        if (!n) {
            p++;
            continue;
        }
        if (n == 2 && p + 1 == end)
            break;              /* on the '\n' of a "\r\n": the same line end */
        p += n;
        l++;
        start = p;
    }
    *line = l;
    *col = (uint32_t)(end - start) + 1;
}

size_t ps_lex_offset(const char *text, uint32_t line, uint32_t col)
{
    const char *p = text;
    if (strncmp(text, "\xef\xbb\xbf", 3) == 0)
        p += 3;
    for (uint32_t l = 1; l < line && *p;) {
        size_t n = ps_lex_eol(p);
        p += n ? n : 1;
        l += n != 0;
    }
    return (size_t)(p - text) + (col - 1);
}

/* Skip blanks and % comments, counting lines ('\n', '\r\n' or a lone '\r'
 * ends one). */
static void skip_space(ps_lexer *lx)
{
    for (;;) {
        char c = *lx->p;
        size_t eol = ps_lex_eol(lx->p);
        if (eol) {
            lx->p += eol;
            lx->line++;
            lx->line_start = lx->p;
        } else if (c == ' ' || c == '\t' || c == '\f' || c == '\v') {
            lx->p++;
        } else if (c == '%') {
            while (*lx->p && *lx->p != '\n' && *lx->p != '\r')
                lx->p++;
        } else {
            return;
        }
    }
}

static ps_token make(ps_lexer *lx, ps_tok kind, const char *start, const char *end)
{
    ps_token t = {.kind = kind, .start = start, .len = (uint32_t)(end - start), .line = lx->line,
                  .col = (uint32_t)(start - lx->line_start) + 1};
    return t;
}

static ps_token error(ps_lexer *lx, const char *start, const char *end, const char *msg)
{
    ps_token t = make(lx, TK_ERROR, start, end);
    t.msg = msg;
    return t;
}

/* num ::= digit+ [ . digit+ ] [ exp [+|-] digit+ ],  exp ::= E e D d X x */
static ps_token lex_number(ps_lexer *lx)
{
    const char *s = lx->p, *q = s;
    while (is_digit(*q))
        q++;
    if (*q == '.' && is_digit(q[1])) {
        q++;
        while (is_digit(*q))
            q++;
    }
    if (strchr("EeDdXx", *q) && *q) {
        const char *r = q + 1;
        if (*r == '+' || *r == '-')
            r++;
        if (is_digit(*r)) {
            while (is_digit(*r))
                r++;
            q = r;
        }
    }
    /* strtod does not know Modula-3's D/X exponent letters: copy and map. */
    char buf[64];
    size_t n = (size_t)(q - s);
    if (n >= sizeof buf) {
        lx->p = q;
        return error(lx, s, q, "number literal too long");
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = strchr("DdXx", s[i]) && s[i] ? 'e' : s[i];
    buf[n] = '\0';
    lx->p = q;
    ps_token t = make(lx, TK_NUMBER, s, q);
    t.num = strtod(buf, NULL);
    return t;
}

/* string ::= " char* "   (no newline inside) */
static ps_token lex_string(ps_lexer *lx)
{
    const char *s = lx->p, *q = s + 1;
    while (*q && *q != '"' && *q != '\n' && *q != '\r') {
        if (*q == '\\' && q[1] && q[1] != '\n' && q[1] != '\r')
            q++;
        q++;
    }
    if (*q != '"') {
        lx->p = q;
        return error(lx, s, q, "unterminated string");
    }
    lx->p = q + 1;
    return make(lx, TK_STRING, s, q + 1);
}

/* Whether [s, q) is `p` followed by digits only. */
static bool quantile_head(const char *s, const char *q)
{
    if (q - s < 2 || s[0] != 'p')
        return false;
    for (const char *d = s + 1; d < q; d++)
        if (!is_digit(*d))
            return false;
    return true;
}

/* id ::= alpha alnum*  with the reference's '@' forms: call@p, ret@p, intv@p,
 * and names ending in '@' such as logstart@. */
static ps_token lex_ident(ps_lexer *lx)
{
    const char *s = lx->p, *q = s;
    while (is_alnum(*q))
        q++;
    if (lx->prev == TK_LBRACE && quantile_head(s, q) && q[0] == '.' && is_digit(q[1])) {
        q++;                    /* {p99.9 ...}: a quantile's operator */
        while (is_digit(*q))
            q++;
    }
    if (*q == '@') {
        q++;
        if (is_alpha(*q))
            while (is_alnum(*q))
                q++;
    }
    lx->p = q;
    ps_token t = make(lx, TK_IDENT, s, q);
    for (size_t i = 0; i < PS_ARRAY_LEN(keywords); i++) {
        if (strlen(keywords[i].spelling) == t.len && memcmp(keywords[i].spelling, s, t.len) == 0) {
            t.kind = keywords[i].kind;
            break;
        }
    }
    return t;
}

static ps_token lex_token(ps_lexer *lx);

ps_token ps_lex_next(ps_lexer *lx)
{
    ps_token t = lex_token(lx);
    lx->prev = t.kind;
    return t;
}

static ps_token lex_token(ps_lexer *lx)
{
    skip_space(lx);
    const char *s = lx->p;
    char c = *s;
    if (c == '\0')
        return make(lx, TK_EOF, s, s);
    if (is_alpha(c))
        return lex_ident(lx);
    if (is_digit(c))
        return lex_number(lx);
    if (c == '"')
        return lex_string(lx);
    for (size_t i = 0; i < PS_ARRAY_LEN(puncts); i++) {
        size_t n = strlen(puncts[i].spelling);
        if (strncmp(s, puncts[i].spelling, n) == 0) {
            lx->p = s + n;
            return make(lx, puncts[i].kind, s, lx->p);
        }
    }
    for (size_t i = 0; i < PS_ARRAY_LEN(symbols); i++) {
        size_t n = strlen(symbols[i].utf8);
        if (strncmp(s, symbols[i].utf8, n) == 0) {
            lx->p = s + n;
            return make(lx, symbols[i].kind, s, lx->p);
        }
    }
    /* Skip one whole UTF-8 sequence so the column of what follows stays sane. */
    const char *q = s + 1;
    while ((*q & 0xC0) == 0x80)
        q++;
    lx->p = q;
    return error(lx, s, q, "unexpected character");
}

int ps_lex_unescape(const ps_token *tok, char *out, const char **bad)
{
    const char *p = tok->start + 1, *end = tok->start + tok->len - 1;
    int n = 0;
    while (p < end) {
        char c = *p++;
        if (c != '\\') {
            out[n++] = c;
            continue;
        }
        const char *esc = p - 1;
        c = *p++;
        switch (c) {
        case 'n': out[n++] = '\n'; break;
        case 't': out[n++] = '\t'; break;
        case 'r': out[n++] = '\r'; break;
        case 'f': out[n++] = '\f'; break;
        case '\\': out[n++] = '\\'; break;
        case '"': out[n++] = '"'; break;
        default:
            if (c >= '0' && c <= '7' && p + 1 < end && p[0] >= '0' && p[0] <= '7' &&
                p[1] >= '0' && p[1] <= '7') {
                int v = (c - '0') * 64 + (p[0] - '0') * 8 + (p[1] - '0');
                if (v > 255 || v == 0) {
                    *bad = esc;
                    return -1;
                }
                out[n++] = (char)v;
                p += 2;
            } else {
                *bad = esc;
                return -1;
            }
        }
    }
    return n;
}
