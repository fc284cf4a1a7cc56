/* tokens.h — the PSpec token list, in one place (X-macros).
 *
 * Included by the lexer (to recognise keywords and punctuation), the parser
 * (to name tokens in messages) and tests. Contextual words — aggregate
 * operators (mean, count, ...), time units (ms, sec, ...), built-in
 * function names, and `data var cor from every after domain` — are plain
 * identifiers that the parser recognises by position, so they remain usable
 * as attribute, metric and constant names.
 */
#ifndef PSPEC_TOKENS_H
#define PSPEC_TOKENS_H

/* Reserved words: X(ENUM_SUFFIX, "spelling") */
#define PS_KEYWORDS(X)              \
    X(PERFSPEC, "perfspec")         \
    X(END, "end")                   \
    X(IMPORT, "import")             \
    X(DEF, "def")                   \
    X(SOLVE, "solve")               \
    X(TIMED, "timed")               \
    X(EVENT, "event")               \
    X(NESTED, "nested")             \
    X(INTERVAL, "interval")         \
    X(PROC, "proc")                 \
    X(RETURNS, "returns")           \
    X(ASSERT, "assert")             \
    X(PRINT, "print")               \
    X(METRICS, "metrics")           \
    X(WHERE, "where")               \
    X(IN, "in")                     \
    X(TRUE, "true")                 \
    X(FALSE, "false")               \
    X(DIV, "div")                   \
    X(MOD, "mod")

/* Punctuation, longest spellings first within a shared prefix. */
#define PS_PUNCT(X)                 \
    X(ARROW, "->")                  \
    X(IMPLIES, "=>")                \
    X(LE, "<=")                     \
    X(GE, ">=")                     \
    X(NE, "!=")                     \
    X(LPAREN, "(")                  \
    X(RPAREN, ")")                  \
    X(LBRACK, "[")                  \
    X(RBRACK, "]")                  \
    X(LBRACE, "{")                  \
    X(RBRACE, "}")                  \
    X(COMMA, ",")                   \
    X(SEMI, ";")                    \
    X(COLON, ":")                   \
    X(DOT, ".")                     \
    X(PLUS, "+")                    \
    X(MINUS, "-")                   \
    X(STAR, "*")                    \
    X(SLASH, "/")                   \
    X(EQ, "=")                      \
    X(LT, "<")                      \
    X(GT, ">")                      \
    X(BANG, "!")                    \
    X(AMP, "&")                     \
    X(BAR, "|")                     \
    X(QUESTION, "?")                \
    X(TILDE, "~")

typedef enum ps_tok {
    TK_EOF = 0,
    TK_ERROR,       /* a lexical error; the lexer's message says what */
    TK_IDENT,       /* identifier, possibly with '@' (call@p, ret@p, intv@p, logstart@) */
    TK_NUMBER,
    TK_STRING,
#define X(name, spelling) TK_##name,
    PS_KEYWORDS(X)
    PS_PUNCT(X)
#undef X
    TK__COUNT
} ps_tok;

/* Human-readable name of a token kind for messages ("'->'", "identifier"). */
const char *ps_tok_describe(ps_tok t);

#endif
