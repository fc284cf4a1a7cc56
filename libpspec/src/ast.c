/* ast.c — walking expression trees. */
#include "ast.h"

bool ps_expr_any_child(const ps_expr *e, bool (*fn)(const ps_expr *child, void *ctx), void *ctx)
{
    if (!e)
        return false;
    switch ((ps_expr_kind)e->kind) {
    case X_FIELD: case X_ATTR: case X_METRIC: case X_PART:
        return fn(e->field.obj, ctx);
    case X_CALL: case X_BUILTIN: case X_APPLY:
        if (e->call.fn && fn(e->call.fn, ctx))
            return true;
        for (uint32_t i = 0; i < e->call.nargs; i++)
            if (fn(e->call.args[i], ctx))
                return true;
        return false;
    case X_NEG: case X_NOT:
        return fn(e->bin.a, ctx);
    case X_BINARY: case X_MAPONE: case X_IF: case X_ELSE:
        return fn(e->bin.a, ctx) || fn(e->bin.b, ctx);
    case X_CHAIN: case X_TRIPLE: case X_MAPLIST:
        for (uint32_t i = 0; i < e->list.n; i++)
            if (fn(e->list.items[i], ctx))
                return true;
        return false;
    case X_AGG:
        return (e->agg->domain && fn(e->agg->domain, ctx)) || (e->agg->where && fn(e->agg->where, ctx)) ||
               (e->agg->value && fn(e->agg->value, ctx));
    case X_NUM: case X_TIMELIT: case X_BOOL: case X_STR: case X_NAME: case X_CONST: case X_VAR:
        return false;
    }
    return false;
}
