/* unparse.c — expressions back as PSpec text (see unparse.h). */
#include <stdlib.h>
#include <string.h>

#include "lex.h"
#include "unparse.h"
#include "value.h"

char *ps_agg_source(const ps_program *prog, ps_loc loc)
{
    const char *text = prog->files.v[loc.file]->text;
    size_t at = ps_lex_offset(text, loc.line, loc.col);
    if (at >= strlen(text))
        return NULL;
    const char *t = text + at;
    if (*t != '{')
        return NULL;
    const char *p = t;
    int depth = 0;
    do {
        if (*p == '{')
            depth++;
        else if (*p == '}')
            depth--;
        else if (*p == '"')
            while (p[1] && *++p != '"')
                ;
        p++;
    } while (*p && depth > 0);
    size_t len = (size_t)(p - t);
    ps_buf b = {0};
    for (size_t i = 0; i < len && b.len < PS_UNPARSE_MAX; i++)
        ps_buf_putc(&b, t[i] == '\n' || t[i] == '\r' || t[i] == '\t' ? ' ' : t[i]);
    if (len > PS_UNPARSE_MAX)
        ps_buf_puts(&b, "...");
    return ps_buf_take(&b);
}

/* A time literal's unit, if it is one of the usual ones. */
static const char *unit_name(double unit_ns)
{
    static const struct { double ns; const char *word; } units[] = {
        {1, "ns"}, {1e3, "us"}, {1e6, "ms"}, {1e9, "sec"}, {60e9, "min"}, {3600e9, "hour"},
        {86400e9, "day"}, {604800e9, "week"}, {0, "cyc"},
    };
    for (size_t i = 0; i < PS_ARRAY_LEN(units); i++)
        if (units[i].ns == unit_ns)
            return units[i].word;
    return NULL;
}

static const char *const builtin_spelling[B__COUNT] = {
#define X(name, spelling, minargs, maxargs) [B_##name] = spelling,
    PS_BUILTINS(X)
#undef X
};

static void put(ps_buf *b, const ps_program *prog, const ps_expr *e);

/* An operand: in parentheses unless it is a single item. */
static void operand(ps_buf *b, const ps_program *prog, const ps_expr *e)
{
    bool paren = e->kind == X_BINARY || e->kind == X_CHAIN || e->kind == X_IF ||
                 e->kind == X_ELSE || e->kind == X_MAPONE;
    if (paren)
        ps_buf_putc(b, '(');
    put(b, prog, e);
    if (paren)
        ps_buf_putc(b, ')');
}

static void put(ps_buf *b, const ps_program *prog, const ps_expr *e)
{
    if (b->len > PS_UNPARSE_MAX)
        return;
    switch ((ps_expr_kind)e->kind) {
    case X_NUM:
        ps_buf_printf(b, "%.10g", e->num);
        break;
    case X_TIMELIT: {
        const char *u = unit_name(e->time.unit_ns);
        if (u)
            ps_buf_printf(b, "%.10g %s", e->time.num, u);
        else
            ps_buf_printf(b, "%.10g ns", e->time.num * e->time.unit_ns);
        break;
    }
    case X_BOOL:
        ps_buf_puts(b, e->b ? "TRUE" : "FALSE");
        break;
    case X_STR:
        ps_buf_printf(b, "\"%s\"", e->str);
        break;
    case X_NAME:
        ps_buf_puts(b, e->name);
        break;
    case X_CONST:
        ps_buf_puts(b, e->cst->local ? e->cst->local : e->cst->name);
        break;
    case X_VAR:
        ps_buf_puts(b, e->var->name);
        break;
    case X_FIELD:
    case X_ATTR:
    case X_METRIC:
        operand(b, prog, e->field.obj);
        ps_buf_printf(b, ".%s", e->field.name ? e->field.name : "?");
        break;
    case X_PART:
        operand(b, prog, e->field.obj);
        ps_buf_printf(b, ".%c", e->op);
        break;
    case X_CALL:
    case X_BUILTIN:
    case X_APPLY:
        if (e->kind == X_BUILTIN)
            ps_buf_puts(b, builtin_spelling[e->op]);
        else
            operand(b, prog, e->call.fn);
        ps_buf_putc(b, '(');
        for (uint32_t i = 0; i < e->call.nargs; i++) {
            if (i)
                ps_buf_puts(b, ", ");
            put(b, prog, e->call.args[i]);
        }
        ps_buf_putc(b, ')');
        break;
    case X_NEG:
    case X_NOT:
        ps_buf_putc(b, e->kind == X_NEG ? '-' : '!');
        operand(b, prog, e->bin.a);
        break;
    case X_BINARY:
        if (e->op == PV_OP_MIN || e->op == PV_OP_MAX || e->op == PV_OP_POWER ||
            e->op == PV_OP_LOG) {
            ps_buf_printf(b, "%s(", pv_binop_spelling[e->op]);
            put(b, prog, e->bin.a);
            ps_buf_puts(b, ", ");
            put(b, prog, e->bin.b);
            ps_buf_putc(b, ')');
            break;
        }
        operand(b, prog, e->bin.a);
        ps_buf_printf(b, " %s ", pv_binop_spelling[e->op]);
        operand(b, prog, e->bin.b);
        break;
    case X_CHAIN:
        for (uint32_t i = 0; i < e->list.n; i++) {
            if (i)
                ps_buf_printf(b, " %s ", pv_binop_spelling[e->list.ops[i - 1]]);
            operand(b, prog, e->list.items[i]);
        }
        break;
    case X_TRIPLE:
    case X_MAPLIST:
        ps_buf_putc(b, e->kind == X_TRIPLE ? '[' : '(');
        for (uint32_t i = 0; i < e->list.n; i++) {
            if (i)
                ps_buf_puts(b, ", ");
            put(b, prog, e->list.items[i]);
        }
        ps_buf_putc(b, e->kind == X_TRIPLE ? ']' : ')');
        break;
    case X_MAPONE:
    case X_IF:
    case X_ELSE:
        operand(b, prog, e->bin.a);
        ps_buf_puts(b, e->kind == X_MAPONE ? " -> " : e->kind == X_IF ? " ? " : " ~ ");
        operand(b, prog, e->bin.b);
        break;
    case X_AGG: {
        char *src = ps_agg_source(prog, e->agg->loc);
        ps_buf_puts(b, src ? src : "{...}");
        free(src);
        break;
    }
    }
}

char *ps_unparse(const ps_program *prog, const ps_expr *e)
{
    ps_buf b = {0};

    put(&b, prog, e);
    if (b.len > PS_UNPARSE_MAX) {
        b.len = PS_UNPARSE_MAX;
        b.data[b.len] = '\0';
        ps_buf_puts(&b, "...");
    }
    return ps_buf_take(&b);
}
