/* parse.c — recursive-descent parser for PSpec (appendix A.10).
 *
 * Every parsing function starts with the rule it parses. Errors longjmp back
 * to the entry point, which turns them into one diagnostic; the AST lives in
 * the program's arena, so nothing needs unwinding.
 */
#include "parse.h"

#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "lex.h"
#include "util.h"

typedef struct parser {
    ps_program *prog;
    ps_arena *arena;
    uint32_t file;
    ps_lexer lx;
    ps_token tok;           /* current token */
    ps_token next;          /* one token of lookahead */
    bool have_next;
    ps_diag *diag;
    jmp_buf fail;
    bool commands;          /* peval mode */
    unsigned nesting;       /* current recursion depth of expression parsing */
} parser;

/* Limits that keep the parser, checker and evaluator (all recursive) far
 * from the end of the stack on hostile input. */
enum { MAX_NESTING = 200, MAX_DEPTH = 1000 };

static void fail_at(parser *ps, ps_loc loc, const char *fmt, ...) __attribute__((noreturn, format(printf, 3, 4)));

static void fail_at(parser *ps, ps_loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ps->diag->msg = ps_vasprintf(fmt, ap);
    va_end(ap);
    ps->diag->loc = loc;
    longjmp(ps->fail, 1);
}

static ps_loc loc_of(parser *ps, const ps_token *t)
{
    ps_loc l = {ps->file, t->line, t->col};
    return l;
}

static ps_loc here(parser *ps) { return loc_of(ps, &ps->tok); }

/* Describe the current token for "expected X, found Y". */
static char *found(parser *ps, const ps_token *t)
{
    if (t->kind == TK_IDENT || t->kind == TK_NUMBER)
        return ps_arena_printf(ps->arena, "'%.*s'", (int)(t->len > 40 ? 40 : t->len), t->start);
    if (t->kind == TK_STRING)
        return ps_arena_strdup(ps->arena, "a string");
    return ps_arena_strdup(ps->arena, ps_tok_describe(t->kind));
}

static void lex_check(parser *ps, const ps_token *t)
{
    if (t->kind == TK_ERROR)
        fail_at(ps, loc_of(ps, t), "%s", t->msg);
}

static void advance(parser *ps)
{
    if (ps->have_next) {
        ps->tok = ps->next;
        ps->have_next = false;
    } else {
        ps->tok = ps_lex_next(&ps->lx);
    }
    lex_check(ps, &ps->tok);
}

static const ps_token *peek(parser *ps)
{
    if (!ps->have_next) {
        ps->next = ps_lex_next(&ps->lx);
        ps->have_next = true;
        lex_check(ps, &ps->next);
    }
    return &ps->next;
}

static bool at(parser *ps, ps_tok k) { return ps->tok.kind == k; }

static bool accept(parser *ps, ps_tok k)
{
    if (!at(ps, k))
        return false;
    advance(ps);
    return true;
}

static void expect(parser *ps, ps_tok k, const char *what)
{
    if (!accept(ps, k))
        fail_at(ps, here(ps), "expected %s%s%s, found %s", ps_tok_describe(k), what ? " " : "",
                what ? what : "", found(ps, &ps->tok));
}

static bool tok_is_word(const ps_token *t, const char *w)
{
    return t->kind == TK_IDENT && strlen(w) == t->len && memcmp(t->start, w, t->len) == 0;
}

static bool is_word(parser *ps, const char *w) { return tok_is_word(&ps->tok, w); }

static const char *tok_str(parser *ps, const ps_token *t)
{
    return ps_arena_strndup(ps->arena, t->start, t->len);
}

/* An identifier (keywords are not identifiers). */
static const char *ident(parser *ps, const char *what)
{
    if (!at(ps, TK_IDENT))
        fail_at(ps, here(ps), "expected %s, found %s", what, found(ps, &ps->tok));
    const char *s = tok_str(ps, &ps->tok);
    advance(ps);
    return s;
}

/* A name that may also be spelled like a keyword: attribute names and field
 * names (the Lectern example has an attribute called `event`). */
static bool at_name_like(parser *ps)
{
    ps_tok k = ps->tok.kind;
    return k == TK_IDENT || (k >= TK_PERFSPEC && k <= TK_MOD && k != TK_END);
}

static const char *name_like(parser *ps, const char *what)
{
    if (!at_name_like(ps))
        fail_at(ps, here(ps), "expected %s, found %s", what, found(ps, &ps->tok));
    const char *s = tok_str(ps, &ps->tok);
    advance(ps);
    return s;
}

static ps_expr *new_expr(parser *ps, ps_expr_kind kind, ps_loc loc)
{
    ps_expr *e = PS_NEW(ps->arena, ps_expr);
    e->kind = (uint8_t)kind;
    e->loc = loc;
    e->depth = 1;
    return e;
}

/* Record that `e` sits above `child`; refuse trees deeper than MAX_DEPTH. */
static void above(parser *ps, ps_expr *e, const ps_expr *child)
{
    if (child && child->depth + 1 > e->depth)
        e->depth = (uint16_t)(child->depth + 1);
    if (e->depth > MAX_DEPTH)
        fail_at(ps, e->loc, "expression is nested too deeply (more than %d levels)", MAX_DEPTH);
}

/* Count one level of parser recursion. */
static void enter(parser *ps)
{
    if (++ps->nesting > MAX_NESTING)
        fail_at(ps, here(ps), "expression is nested too deeply (more than %d levels)", MAX_NESTING);
}

static void leave(parser *ps) { ps->nesting--; }

bool ps_time_unit(const char *w, size_t n, double *unit_ns)
{
    static const struct {
        const char *word;
        double ns;
    } units[] = {
        {"cyc", 0},         {"ns", 1},           {"us", 1e3},          {"ms", 1e6},
        {"sec", 1e9},       {"min", 60e9},       {"hour", 3600e9},     {"hours", 3600e9},
        {"day", 86400e9},   {"days", 86400e9},   {"week", 604800e9},   {"weeks", 604800e9},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(units); i++) {
        if (strlen(units[i].word) == n && memcmp(units[i].word, w, n) == 0) {
            *unit_ns = units[i].ns;
            return true;
        }
    }
    return false;
}

/* ---- expressions ------------------------------------------------------------- */

static ps_expr *expr(parser *ps);

/* typename ::= [ id . ] ( id | call@id | ret@id | intv@id ) */
static ps_tname type_name(parser *ps, const char *what)
{
    ps_tname t = {.loc = here(ps)};
    const char *first = ident(ps, what);
    if (at(ps, TK_DOT) && peek(ps)->kind == TK_IDENT) {
        advance(ps);
        const char *second = ident(ps, what);
        t.name = ps_arena_printf(ps->arena, "%s.%s", first, second);
    } else {
        t.name = first;
    }
    return t;
}

/* Whether t spells a quantile's operator: p digit+ [. digit+] (the lexer
 * makes "p99.9" one token only right after '{'). */
static bool quantile_word(const ps_token *t)
{
    if (t->kind != TK_IDENT || t->len < 2 || t->start[0] != 'p')
        return false;
    uint32_t i = 1, dots = 0;
    for (; i < t->len; i++) {
        char c = t->start[i];
        if (c == '.' && i > 1 && i + 1 < t->len && !dots)
            dots++;
        else if (c < '0' || c > '9')
            return false;
    }
    return true;
}

/* aggrop ::= + | * | & | '|' | min | max | mean | stdev | var | the | last
 *          | first | count | p digit+ [. digit+]   (the quantile extension) */
static bool aggop_of(parser *ps, ps_agg *a)
{
    switch (ps->tok.kind) {
    case TK_PLUS: a->op = PV_AGG_SUM; return true;
    case TK_STAR: a->op = PV_AGG_PROD; return true;
    case TK_AMP: a->op = PV_AGG_ALL; return true;
    case TK_BAR: a->op = PV_AGG_ANY; return true;
    case TK_IDENT:
        if (quantile_word(&ps->tok)) {
            a->op = PV_AGG_QUANT;
            a->quant_text = ps_arena_strndup(ps->arena, ps->tok.start + 1, ps->tok.len - 1);
            a->quant = strtod(a->quant_text, NULL);
            return true;
        }
        for (int i = PV_AGG_MIN; i < PV_AGG_QUANT; i++) {
            if (is_word(ps, pv_aggop_spelling[i])) {
                a->op = (pv_aggop)i;
                return true;
            }
        }
        return false;
    default: return false;
    }
}

/* varrange ::= id ( : typename | in domain ( expr ) ) [ where expr ] */
static void var_range(parser *ps, ps_agg *a)
{
    a->var = PS_NEW(ps->arena, ps_binder);
    a->var->kind = BIND_AGG;
    a->var->agg = a;
    a->var->name = ident(ps, "a variable name");
    if (accept(ps, TK_IN)) {
        if (!is_word(ps, "domain"))
            fail_at(ps, here(ps), "expected 'domain' after 'in', found %s", found(ps, &ps->tok));
        advance(ps);
        expect(ps, TK_LPAREN, "after 'domain'");
        a->domain = expr(ps);
        expect(ps, TK_RPAREN, "to close 'domain('");
        a->place = AGG_DOMAIN;
    } else {
        expect(ps, TK_COLON, "after the aggregate's variable");
        ps_tname t = type_name(ps, "an event or interval type name");
        a->range_name = t.name;
        a->range_loc = t.loc;
    }
    if (accept(ps, TK_WHERE))
        a->where = expr(ps);
}

/* aggrexpr ::= { aggrop varrange [ : expr ] } */
static ps_expr *aggregate(parser *ps)
{
    ps_loc loc = here(ps);
    expect(ps, TK_LBRACE, NULL);
    ps_agg *a = PS_NEW(ps->arena, ps_agg);
    a->loc = loc;
    if (!aggop_of(ps, a))
        fail_at(ps, here(ps),
                "expected an aggregate operator (+ * & | min max mean stdev var the last first count pN), "
                "found %s", found(ps, &ps->tok));
    advance(ps);
    var_range(ps, a);
    if (a->op == PV_AGG_COUNT) {
        if (at(ps, TK_COLON))
            fail_at(ps, here(ps), "'count' takes no value expression");
    } else {
        expect(ps, TK_COLON, "before the aggregate's value expression");
        a->value = expr(ps);
    }
    expect(ps, TK_RBRACE, "to close the aggregate");
    ps_expr *e = new_expr(ps, X_AGG, loc);
    e->agg = a;
    above(ps, e, a->domain);
    above(ps, e, a->where);
    above(ps, e, a->value);
    return e;
}

/* Comma-separated expressions up to `close`. */
static ps_expr **expr_list(parser *ps, ps_tok close, uint32_t *n)
{
    PS_VEC(ps_expr *) v = {0};
    if (!at(ps, close)) {
        do {
            PS_VEC_PUSH(ps->arena, v, expr(ps));
        } while (accept(ps, TK_COMMA));
    }
    *n = v.n;
    return v.v;
}

/* primary ::= num [timeunit] | string | true | false | id
 *           | ( expr [, expr]* ) | [ expr , expr , expr ] | aggrexpr */
static ps_expr *primary(parser *ps)
{
    ps_loc loc = here(ps);
    ps_expr *e;
    switch (ps->tok.kind) {
    case TK_NUMBER: {
        double num = ps->tok.num, unit;
        advance(ps);
        if (at(ps, TK_IDENT) && ps_time_unit(ps->tok.start, ps->tok.len, &unit)) {
            advance(ps);
            e = new_expr(ps, X_TIMELIT, loc);
            e->time.num = num;
            e->time.unit_ns = unit;
        } else {
            e = new_expr(ps, X_NUM, loc);
            e->num = num;
        }
        return e;
    }
    case TK_STRING: {
        char *buf = ps_arena_alloc(ps->arena, ps->tok.len + 1);
        const char *bad = NULL;
        int n = ps_lex_unescape(&ps->tok, buf, &bad);
        if (n < 0) {
            ps_loc bl = loc;
            bl.col += (uint32_t)(bad - ps->tok.start);
            fail_at(ps, bl, "bad escape sequence in string");
        }
        buf[n] = '\0';
        advance(ps);
        e = new_expr(ps, X_STR, loc);
        e->str = buf;
        return e;
    }
    case TK_TRUE:
    case TK_FALSE:
        e = new_expr(ps, X_BOOL, loc);
        e->b = at(ps, TK_TRUE);
        advance(ps);
        return e;
    case TK_IDENT:
        e = new_expr(ps, X_NAME, loc);
        e->name = tok_str(ps, &ps->tok);
        advance(ps);
        return e;
    case TK_LPAREN: {
        advance(ps);
        uint32_t n;
        ps_expr **items = expr_list(ps, TK_RPAREN, &n);
        expect(ps, TK_RPAREN, "to close '('");
        if (n == 0)
            fail_at(ps, loc, "empty parentheses");
        if (n == 1)
            return items[0];
        e = new_expr(ps, X_MAPLIST, loc);
        e->list.items = items;
        e->list.n = n;
        for (uint32_t i = 0; i < n; i++)
            above(ps, e, items[i]);
        return e;
    }
    case TK_LBRACK: {
        advance(ps);
        uint32_t n;
        ps_expr **items = expr_list(ps, TK_RBRACK, &n);
        expect(ps, TK_RBRACK, "to close the triple");
        if (n != 3)
            fail_at(ps, loc, "a triple has three components [v, p, m], found %u", n);
        e = new_expr(ps, X_TRIPLE, loc);
        e->list.items = items;
        e->list.n = 3;
        for (uint32_t i = 0; i < 3; i++)
            above(ps, e, items[i]);
        return e;
    }
    case TK_LBRACE:
        return aggregate(ps);
    default:
        fail_at(ps, loc, "expected an expression, found %s", found(ps, &ps->tok));
    }
}

/* postfix ::= primary { . name | ( expr,* ) } */
static ps_expr *postfix(parser *ps)
{
    ps_expr *e = primary(ps);
    for (;;) {
        if (at(ps, TK_DOT)) {
            /* `. end` is a statement terminator in the thesis's style, not a field. */
            const ps_token *n = peek(ps);
            if (!(n->kind == TK_IDENT || (n->kind >= TK_PERFSPEC && n->kind <= TK_MOD && n->kind != TK_END)))
                return e;
            ps_loc loc = here(ps);
            advance(ps);
            ps_expr *f = new_expr(ps, X_FIELD, loc);
            f->field.obj = e;
            f->field.name = name_like(ps, "a field name");
            above(ps, f, e);
            e = f;
        } else if (at(ps, TK_LPAREN)) {
            ps_loc loc = here(ps);
            advance(ps);
            ps_expr *c = new_expr(ps, X_CALL, loc);
            c->call.fn = e;
            c->call.args = expr_list(ps, TK_RPAREN, &c->call.nargs);
            expect(ps, TK_RPAREN, "to close the argument list");
            c->loc = e->loc;
            above(ps, c, e);
            for (uint32_t i = 0; i < c->call.nargs; i++)
                above(ps, c, c->call.args[i]);
            e = c;
        } else {
            return e;
        }
    }
}

/* unary ::= - unary | postfix */
static ps_expr *unary(parser *ps)
{
    if (at(ps, TK_MINUS)) {
        ps_loc loc = here(ps);
        advance(ps);
        ps_expr *e = new_expr(ps, X_NEG, loc);
        enter(ps);
        e->bin.a = unary(ps);
        leave(ps);
        above(ps, e, e->bin.a);
        return e;
    }
    return postfix(ps);
}

static ps_expr *binary(parser *ps, pv_binop op, ps_expr *a, ps_expr *b, ps_loc loc)
{
    ps_expr *e = new_expr(ps, X_BINARY, loc);
    e->op = (uint8_t)op;
    e->bin.a = a;
    e->bin.b = b;
    above(ps, e, a);
    above(ps, e, b);
    return e;
}

/* mul ::= unary { ( * | / | div | mod ) unary } */
static ps_expr *mul(parser *ps)
{
    ps_expr *e = unary(ps);
    for (;;) {
        pv_binop op;
        if (at(ps, TK_STAR)) op = PV_OP_MUL;
        else if (at(ps, TK_SLASH)) op = PV_OP_DIV;
        else if (at(ps, TK_DIV)) op = PV_OP_IDIV;
        else if (at(ps, TK_MOD)) op = PV_OP_MOD;
        else return e;
        ps_loc loc = here(ps);
        advance(ps);
        e = binary(ps, op, e, unary(ps), loc);
    }
}

/* add ::= mul { ( + | - ) mul } */
static ps_expr *add(parser *ps)
{
    ps_expr *e = mul(ps);
    for (;;) {
        pv_binop op;
        if (at(ps, TK_PLUS)) op = PV_OP_ADD;
        else if (at(ps, TK_MINUS)) op = PV_OP_SUB;
        else return e;
        ps_loc loc = here(ps);
        advance(ps);
        e = binary(ps, op, e, mul(ps), loc);
    }
}

static bool relop(parser *ps, pv_binop *op)
{
    switch (ps->tok.kind) {
    case TK_EQ: *op = PV_OP_EQ; return true;
    case TK_NE: *op = PV_OP_NE; return true;
    case TK_LT: *op = PV_OP_LT; return true;
    case TK_LE: *op = PV_OP_LE; return true;
    case TK_GT: *op = PV_OP_GT; return true;
    case TK_GE: *op = PV_OP_GE; return true;
    default: return false;
    }
}

/* rel ::= add { relop add }   — a op b op c means a op b & b op c */
static ps_expr *rel(parser *ps)
{
    ps_expr *first = add(ps);
    pv_binop op;
    if (!relop(ps, &op))
        return first;
    PS_VEC(ps_expr *) items = {0};
    PS_VEC(uint8_t) ops = {0};
    PS_VEC_PUSH(ps->arena, items, first);
    ps_loc loc = here(ps);
    while (relop(ps, &op)) {
        advance(ps);
        PS_VEC_PUSH(ps->arena, ops, (uint8_t)op);
        PS_VEC_PUSH(ps->arena, items, add(ps));
    }
    if (items.n == 2)
        return binary(ps, (pv_binop)ops.v[0], items.v[0], items.v[1], loc);
    ps_expr *e = new_expr(ps, X_CHAIN, loc);
    e->list.items = items.v;
    e->list.ops = ops.v;
    e->list.n = items.n;
    for (uint32_t i = 0; i < items.n; i++)
        above(ps, e, items.v[i]);
    return e;
}

/* not ::= ! not | rel */
static ps_expr *not_expr(parser *ps)
{
    if (at(ps, TK_BANG)) {
        ps_loc loc = here(ps);
        advance(ps);
        ps_expr *e = new_expr(ps, X_NOT, loc);
        enter(ps);
        e->bin.a = not_expr(ps);
        leave(ps);
        above(ps, e, e->bin.a);
        return e;
    }
    return rel(ps);
}

static ps_expr *and_expr(parser *ps)
{
    ps_expr *e = not_expr(ps);
    while (at(ps, TK_AMP)) {
        ps_loc loc = here(ps);
        advance(ps);
        e = binary(ps, PV_OP_AND, e, not_expr(ps), loc);
    }
    return e;
}

static ps_expr *or_expr(parser *ps)
{
    ps_expr *e = and_expr(ps);
    while (at(ps, TK_BAR)) {
        ps_loc loc = here(ps);
        advance(ps);
        e = binary(ps, PV_OP_OR, e, and_expr(ps), loc);
    }
    return e;
}

static ps_expr *implies_expr(parser *ps)
{
    ps_expr *e = or_expr(ps);
    while (at(ps, TK_IMPLIES)) {
        ps_loc loc = here(ps);
        advance(ps);
        e = binary(ps, PV_OP_IMPLIES, e, or_expr(ps), loc);
    }
    return e;
}

static ps_expr *arrow_expr(parser *ps)
{
    ps_expr *e = implies_expr(ps);
    while (at(ps, TK_ARROW)) {
        ps_loc loc = here(ps);
        advance(ps);
        ps_expr *m = new_expr(ps, X_MAPONE, loc);
        m->bin.a = e;
        m->bin.b = implies_expr(ps);
        above(ps, m, m->bin.a);
        above(ps, m, m->bin.b);
        e = m;
    }
    return e;
}

static ps_expr *if_expr(parser *ps)
{
    ps_expr *e = arrow_expr(ps);
    while (at(ps, TK_QUESTION)) {
        ps_loc loc = here(ps);
        advance(ps);
        ps_expr *m = new_expr(ps, X_IF, loc);
        m->bin.a = e;
        m->bin.b = arrow_expr(ps);
        above(ps, m, m->bin.a);
        above(ps, m, m->bin.b);
        e = m;
    }
    return e;
}

/* expr ::= if_expr { ~ if_expr }   (Figure 7: ~ binds loosest) */
static ps_expr *expr_body(parser *ps);

static ps_expr *expr(parser *ps)
{
    enter(ps);
    ps_expr *e = expr_body(ps);
    leave(ps);
    return e;
}

static ps_expr *expr_body(parser *ps)
{
    ps_expr *e = if_expr(ps);
    while (at(ps, TK_TILDE)) {
        ps_loc loc = here(ps);
        advance(ps);
        ps_expr *m = new_expr(ps, X_ELSE, loc);
        m->bin.a = e;
        m->bin.b = if_expr(ps);
        above(ps, m, m->bin.a);
        above(ps, m, m->bin.b);
        e = m;
    }
    return e;
}

/* ---- statements ------------------------------------------------------------------ */

static ps_item *new_item(parser *ps, ps_items *out, ps_item_kind kind, ps_loc loc)
{
    ps_item *it = PS_NEW(ps->arena, ps_item);
    it->kind = kind;
    it->loc = loc;
    PS_VEC_PUSH(ps->arena, *out, it);
    return it;
}

static bool stmt_keyword(ps_tok k)
{
    switch (k) {
    case TK_DEF: case TK_SOLVE: case TK_TIMED: case TK_EVENT: case TK_NESTED: case TK_INTERVAL:
    case TK_PROC: case TK_ASSERT: case TK_PRINT: case TK_IMPORT:
        return true;
    default:
        return false;
    }
}

/* Extension (docs/pspec.md, "Perturbation compensation"): the contextual
 * word `compensate` starts a statement of its own when the next token ends
 * it (';', '.', 'end', a statement keyword); elsewhere it is a name. Spec
 * files only (not peval commands). */
static bool at_compensate(parser *ps)
{
    if (ps->commands || !is_word(ps, "compensate"))
        return false;
    ps_tok k = peek(ps)->kind;
    return k == TK_SEMI || k == TK_DOT || k == TK_END || k == TK_EOF || stmt_keyword(k);
}

/* Does a statement (or the end of the specification) start here? */
static bool at_statement_end(parser *ps)
{
    return stmt_keyword(ps->tok.kind) || at(ps, TK_END) || at(ps, TK_EOF) || at_compensate(ps);
}

/* After one element of a statement list: is there another element?
 * Elements are separated by ';' (or the thesis's '.'); the list ends at the
 * next statement keyword (or `compensate` statement), 'end' or the end of
 * input. */
static bool list_continues(parser *ps)
{
    if (at(ps, TK_SEMI) || at(ps, TK_DOT)) {
        ps_tok sep = ps->tok.kind;
        ps_tok k = peek(ps)->kind;
        bool compensate = !ps->commands && tok_is_word(peek(ps), "compensate");
        if (sep == TK_DOT && !(stmt_keyword(k) || k == TK_END || k == TK_EOF || compensate))
            fail_at(ps, here(ps), "expected ';' or the end of the statement, found '.'");
        advance(ps);
        if (ps->commands)
            return false;   /* peval: one element per command */
        return !at_statement_end(ps);
    }
    if (ps->commands)
        fail_at(ps, here(ps), "expected ';' at the end of the command, found %s", found(ps, &ps->tok));
    if (at_statement_end(ps))
        return false;
    fail_at(ps, here(ps), "expected ';' or the end of the statement, found %s", found(ps, &ps->tok));
}

/* constdef ::= id = expr | id = ? */
static void def_stmt(parser *ps, ps_items *out)
{
    do {
        ps_item *it = new_item(ps, out, IT_DEF, here(ps));
        it->def.name = ident(ps, "a constant name");
        expect(ps, TK_EQ, "after the constant's name");
        if (at(ps, TK_QUESTION)) {
            it->def.qloc = here(ps);
            advance(ps);
            it->def.unknown = true;
        } else {
            it->def.expr = expr(ps);
        }
    } while (list_continues(ps));
}

/* eventdef ::= id ( id,* ) */
static void event_stmt(parser *ps, ps_items *out, bool timed)
{
    do {
        ps_item *it = new_item(ps, out, IT_EVENT, here(ps));
        it->event.timed = timed;
        it->event.name = ident(ps, "an event type name");
        PS_VEC(const char *) attrs = {0};
        if (accept(ps, TK_LPAREN)) {
            if (!at(ps, TK_RPAREN)) {
                do {
                    PS_VEC_PUSH(ps->arena, attrs, name_like(ps, "an attribute name"));
                } while (accept(ps, TK_COMMA));
            }
            expect(ps, TK_RPAREN, "to close the attribute list");
        }
        it->event.attrs = attrs.v;
        it->event.nattr = attrs.n;
    } while (list_continues(ps));
}

/* metricdef,+ after 'metrics' */
static void metric_list(parser *ps, ps_item_interval *iv)
{
    PS_VEC(ps_metric) ms = {0};
    do {
        ps_metric m = {.loc = here(ps)};
        m.name = name_like(ps, "a metric name");
        expect(ps, TK_EQ, "after the metric's name");
        m.expr = expr(ps);
        PS_VEC_PUSH(ps->arena, ms, m);
    } while (accept(ps, TK_COMMA));
    iv->metrics = ms.v;
    iv->nmetric = ms.n;
}

/* A contextual word (from/every/after) used as a keyword here, unless it is
 * really an event type name followed by ',' or 'where'. */
static bool contextual(parser *ps, const char *word)
{
    if (!is_word(ps, word))
        return false;
    ps_tok k = peek(ps)->kind;
    return !(k == TK_COMMA || k == TK_WHERE || k == TK_METRICS || k == TK_END || k == TK_DOT);
}

/* intervaldef ::= id = intvstart , intvend [ within expr ] [ metrics metricdef,+ ] end id
 *              |  id = typename [ metrics metricdef,+ ] end id
 * intvstart ::= id : typename [ where expr ] | id : [ from expr ] every expr
 * intvend   ::= id : typename [ where expr ] | id : after expr */
static void interval_stmt(parser *ps, ps_items *out, bool nested)
{
    do {
        ps_item *it = new_item(ps, out, IT_INTERVAL, here(ps));
        ps_item_interval *iv = &it->interval;
        iv->nested = nested;
        iv->name = ident(ps, "an interval type name");
        expect(ps, TK_EQ, "after the interval type's name");
        if (at(ps, TK_IDENT) && peek(ps)->kind == TK_COLON) {
            iv->svar_loc = here(ps);
            iv->svar = ident(ps, "the start event's name");
            expect(ps, TK_COLON, NULL);
            if (contextual(ps, "from") || contextual(ps, "every")) {
                iv->start_kind = IVS_EVERY;
                if (is_word(ps, "from")) {
                    advance(ps);
                    iv->from = expr(ps);
                }
                if (!is_word(ps, "every"))
                    fail_at(ps, here(ps), "expected 'every', found %s", found(ps, &ps->tok));
                advance(ps);
                iv->every = expr(ps);
            } else {
                iv->start_kind = IVS_EVENT;
                iv->stype = type_name(ps, "the start event type");
                if (accept(ps, TK_WHERE))
                    iv->s_where = expr(ps);
            }
            expect(ps, TK_COMMA, "between the start and end event declarations");
            iv->evar_loc = here(ps);
            iv->evar = ident(ps, "the end event's name");
            expect(ps, TK_COLON, "after the end event's name");
            if (contextual(ps, "after")) {
                advance(ps);
                iv->end_kind = IVE_AFTER;
                iv->after = expr(ps);
            } else {
                iv->end_kind = IVE_EVENT;
                iv->etype = type_name(ps, "the end event type");
                if (accept(ps, TK_WHERE))
                    iv->e_where = expr(ps);
            }
            /* extension: a deadline (docs/pspec.md, "Deadlines") */
            if (contextual(ps, "within")) {
                advance(ps);
                iv->within = expr(ps);
            }
        } else {
            iv->parent = type_name(ps, "an interval type or a start event declaration 's: T'");
        }
        if (accept(ps, TK_METRICS))
            metric_list(ps, iv);
        ps_loc endloc = here(ps);
        expect(ps, TK_END, "to close the interval declaration");
        const char *endname = ident(ps, "the interval type's name after 'end'");
        if (strcmp(endname, iv->name) != 0)
            fail_at(ps, endloc, "interval '%s' is closed by 'end %s'", iv->name, endname);
    } while (list_continues(ps));
}

/* sig ::= id [ ( [ argid,+ ] ) ] [ returns id ],  argid ::= id | ? */
static void proc_stmt(parser *ps, ps_items *out)
{
    do {
        ps_item *it = new_item(ps, out, IT_PROC, here(ps));
        it->proc.name = ident(ps, "a procedure name");
        PS_VEC(const char *) args = {0};
        if (accept(ps, TK_LPAREN)) {
            if (!at(ps, TK_RPAREN)) {
                do {
                    if (accept(ps, TK_QUESTION))
                        PS_VEC_PUSH(ps->arena, args, NULL);
                    else
                        PS_VEC_PUSH(ps->arena, args, name_like(ps, "an argument name or '?'"));
                } while (accept(ps, TK_COMMA));
            }
            expect(ps, TK_RPAREN, "to close the argument list");
        }
        it->proc.args = args.v;
        it->proc.nargs = args.n;
        if (accept(ps, TK_RETURNS))
            it->proc.ret = name_like(ps, "the result's name");
    } while (list_continues(ps));
}

/* assert [ string : ] expr;+   (each element may carry its own label) */
static void assert_stmt(parser *ps, ps_items *out, ps_item_kind kind)
{
    do {
        ps_item *it = new_item(ps, out, kind, here(ps));
        if (kind == IT_ASSERT && at(ps, TK_STRING) && peek(ps)->kind == TK_COLON) {
            ps_expr *l = primary(ps);
            it->assert.label = l->str;
            expect(ps, TK_COLON, NULL);
            it->loc = here(ps);
        }
        it->assert.expr = expr(ps);
    } while (list_continues(ps));
}

/* solvedecl ::= [ data varrange : ] expr [ , var id [ , cor id ] ] */
static void solve_stmt(parser *ps, ps_items *out)
{
    do {
        ps_item *it = new_item(ps, out, IT_SOLVE, here(ps));
        ps_solve *sv = PS_NEW(ps->arena, ps_solve);
        it->solve = sv;
        if (is_word(ps, "data") && peek(ps)->kind == TK_IDENT) {
            advance(ps);
            sv->data = true;
            sv->range = PS_NEW(ps->arena, ps_agg);
            sv->range->loc = here(ps);
            sv->range->op = PV_AGG_SUM;
            var_range(ps, sv->range);
            expect(ps, TK_COLON, "before the equation");
        }
        sv->eqn = expr(ps);
        if (accept(ps, TK_COMMA)) {
            if (!is_word(ps, "var"))
                fail_at(ps, here(ps), "expected 'var' after ',', found %s", found(ps, &ps->tok));
            advance(ps);
            sv->var_loc = here(ps);
            sv->var_name = ident(ps, "an unknown's name");
            if (accept(ps, TK_COMMA)) {
                if (!is_word(ps, "cor"))
                    fail_at(ps, here(ps), "expected 'cor' after ',', found %s", found(ps, &ps->tok));
                advance(ps);
                sv->cor_loc = here(ps);
                sv->cor_name = ident(ps, "an unknown's name");
            }
        }
    } while (list_continues(ps));
}

/* import ::= import id { (, | ;) id } */
static void import_stmt(parser *ps, ps_items *out)
{
    for (;;) {
        ps_item *it = new_item(ps, out, IT_IMPORT, here(ps));
        it->import.name = ident(ps, "a specification name");
        if (at(ps, TK_COMMA)) {
            advance(ps);
            continue;
        }
        if (at(ps, TK_SEMI) && !ps->commands && peek(ps)->kind == TK_IDENT) {
            advance(ps);
            continue;
        }
        break;
    }
    if (ps->commands) {
        expect(ps, TK_SEMI, "at the end of the command");
        return;
    }
    if (!accept(ps, TK_SEMI) && !stmt_keyword(ps->tok.kind) && !at(ps, TK_END) && !at_compensate(ps))
        fail_at(ps, here(ps), "expected ';' after the import list, found %s", found(ps, &ps->tok));
}

/* compensate ::= compensate [;]   (extension: subtract the writer's cost per
 * event from the durations of this spec's intervals) */
static void compensate_stmt(parser *ps, ps_items *out)
{
    new_item(ps, out, IT_COMPENSATE, here(ps));
    advance(ps);
    if (list_continues(ps))
        fail_at(ps, here(ps), "expected a statement or 'end' after 'compensate;', found %s", found(ps, &ps->tok));
}

/* stmt ::= def constdef;+ | solve solvedecl;+ | [timed] event eventdef;+
 *        | [nested] interval intervaldef;+ | proc sig;+ | assert ...;+ | print expr;+
 *        | compensate */
static bool statement(parser *ps, ps_items *out)
{
    if (at_compensate(ps)) {
        compensate_stmt(ps, out);
        return true;
    }
    switch (ps->tok.kind) {
    case TK_DEF: advance(ps); def_stmt(ps, out); return true;
    case TK_SOLVE: advance(ps); solve_stmt(ps, out); return true;
    case TK_TIMED:
        advance(ps);
        expect(ps, TK_EVENT, "after 'timed'");
        event_stmt(ps, out, true);
        return true;
    case TK_EVENT: advance(ps); event_stmt(ps, out, false); return true;
    case TK_NESTED:
        advance(ps);
        expect(ps, TK_INTERVAL, "after 'nested'");
        interval_stmt(ps, out, true);
        return true;
    case TK_INTERVAL: advance(ps); interval_stmt(ps, out, false); return true;
    case TK_PROC: advance(ps); proc_stmt(ps, out); return true;
    case TK_ASSERT: advance(ps); assert_stmt(ps, out, IT_ASSERT); return true;
    case TK_PRINT: advance(ps); assert_stmt(ps, out, IT_PRINT); return true;
    case TK_IMPORT: advance(ps); import_stmt(ps, out); return true;
    default: return false;
    }
}

static void start(parser *ps, ps_program *prog, uint32_t file, ps_diag *diag, bool commands)
{
    memset(ps, 0, sizeof *ps);
    ps->prog = prog;
    ps->arena = &prog->arena;
    ps->file = file;
    ps->diag = diag;
    ps->commands = commands;
    ps_lex_init(&ps->lx, prog->files.v[file]->text);
}

/* spec ::= perfspec id import;* stmt;+ end id */
int ps_parse_spec(ps_program *prog, uint32_t file, ps_items *out, ps_diag *diag)
{
    parser ps;
    start(&ps, prog, file, diag, false);
    if (setjmp(ps.fail))
        return -1;
    advance(&ps);
    expect(&ps, TK_PERFSPEC, "at the start of the specification");
    out->specname = ident(&ps, "the specification's name");
    prog->files.v[file]->specname = out->specname;
    while (!at(&ps, TK_END)) {
        if (at(&ps, TK_EOF))
            fail_at(&ps, here(&ps), "expected 'end %s' at the end of the specification", out->specname);
        if (!statement(&ps, out))
            fail_at(&ps, here(&ps), "expected a statement (def, event, interval, proc, assert, print, "
                    "solve, import, compensate) or 'end', found %s", found(&ps, &ps.tok));
    }
    ps_loc endloc = here(&ps);
    advance(&ps);
    const char *endname = ident(&ps, "the specification's name after 'end'");
    if (strcmp(endname, out->specname) != 0)
        fail_at(&ps, endloc, "specification '%s' is closed by 'end %s'", out->specname, endname);
    if (!accept(&ps, TK_SEMI))
        accept(&ps, TK_DOT);
    if (!at(&ps, TK_EOF))
        fail_at(&ps, here(&ps), "unexpected %s after the end of the specification", found(&ps, &ps.tok));
    return 0;
}

/* commands ::= { command ; }   (peval) */
int ps_parse_commands(ps_program *prog, uint32_t file, ps_items *out, ps_diag *diag)
{
    parser ps;
    start(&ps, prog, file, diag, true);
    if (setjmp(ps.fail))
        return -1;
    advance(&ps);
    while (!at(&ps, TK_EOF)) {
        if (accept(&ps, TK_SEMI))
            continue;
        if (statement(&ps, out))
            continue;
        if (is_word(&ps, "echo") && peek(&ps)->kind == TK_STRING) {
            ps_item *it = new_item(&ps, out, IT_ECHO, here(&ps));
            advance(&ps);
            it->echo = primary(&ps)->str;
            expect(&ps, TK_SEMI, "at the end of the command");
            continue;
        }
        if ((is_word(&ps, "help") && (peek(&ps)->kind == TK_SEMI || peek(&ps)->kind == TK_EOF)) ||
            at(&ps, TK_QUESTION)) {
            new_item(&ps, out, IT_HELP, here(&ps));
            advance(&ps);
            accept(&ps, TK_SEMI);
            continue;
        }
        ps_item *it = new_item(&ps, out, IT_EXPR, here(&ps));
        it->assert.expr = expr(&ps);
        expect(&ps, TK_SEMI, "at the end of the expression");
    }
    return 0;
}
