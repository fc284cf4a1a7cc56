/* lex.h — the PSpec lexer (private).
 *
 * Turns a NUL-terminated specification text into tokens with 1-based line
 * and column. `%` starts a comment to the end of the line. Besides the ASCII
 * spellings the lexer accepts the reference's symbols in UTF-8:
 * ≤ ≥ ≠ → ⟶ ⇒ ×.
 *
 * Right after `{`, `p` followed by digits, a '.' and more digits is one
 * identifier ("p99.9"), the spelling of a quantile aggregate's operator;
 * elsewhere the '.' is a field access as always.
 */
#ifndef PSPEC_LEX_H
#define PSPEC_LEX_H

#include <stddef.h>
#include <stdint.h>

#include "tokens.h"

typedef struct ps_token {
    ps_tok kind;
    const char *start;      /* first byte in the source */
    uint32_t len;           /* bytes in the source */
    uint32_t line, col;     /* 1-based position of the first byte */
    double num;             /* TK_NUMBER: its value */
    const char *msg;        /* TK_ERROR: what is wrong (static string) */
} ps_token;

typedef struct ps_lexer {
    const char *src;        /* whole text, NUL-terminated */
    const char *p;          /* next byte */
    uint32_t line;          /* line of *p */
    const char *line_start; /* first byte of the current line */
    ps_tok prev;            /* kind of the token returned last (TK_EOF at first) */
} ps_lexer;

void ps_lex_init(ps_lexer *lx, const char *src);
/* The next token (TK_EOF at the end, repeatedly). */
ps_token ps_lex_next(ps_lexer *lx);

/* Lines end with '\n', "\r\n" or a lone '\r' (old Mac files): the length
 * of the line end at p (2 for "\r\n"), 0 when none starts there. */
size_t ps_lex_eol(const char *p);
/* The 1-based line and column, as tokens have them, of byte `off` of
 * `text` (which may hold NUL bytes before `off`). */
void ps_lex_position(const char *text, size_t off, uint32_t *line, uint32_t *col);
/* The offset in NUL-terminated `text` of 1-based line:col, lines counted
 * as the lexer counts them. */
size_t ps_lex_offset(const char *text, uint32_t line, uint32_t col);

/* Decode a TK_STRING token's body (escapes \n \t \r \f \\ \" \ooo) into
 * out (capacity >= tok->len); returns the decoded length, or -1 with *bad
 * pointing at a bad escape. */
int ps_lex_unescape(const ps_token *tok, char *out, const char **bad);

#endif
