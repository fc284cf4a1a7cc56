/* check.c — name resolution, static types and scope rules (appendix A). */
#include "check.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

const ps_type ps_t_error = {.kind = T_ERROR};
const ps_type ps_t_num = {.kind = T_NUM};
const ps_type ps_t_bool = {.kind = T_BOOL};
const ps_type ps_t_str = {.kind = T_STR};
const ps_type ps_t_triple = {.kind = T_TRIPLE};

static const char *const builtin_names[B__COUNT] = {
#define X(name, spelling, minargs, maxargs) spelling,
    PS_BUILTINS(X)
#undef X
};
static const uint8_t builtin_min[B__COUNT] = {
#define X(name, spelling, minargs, maxargs) minargs,
    PS_BUILTINS(X)
#undef X
};
static const uint8_t builtin_max[B__COUNT] = {
#define X(name, spelling, minargs, maxargs) maxargs,
    PS_BUILTINS(X)
#undef X
};

enum { MAX_DIAGS = 50 };

void ps_diags_add(ps_diags *d, ps_loc loc, const char *fmt, ...)
{
    if (d->n >= MAX_DIAGS)
        return;
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 8;
        d->v = ps_realloc(d->v, d->cap * sizeof *d->v);
    }
    va_list ap;
    va_start(ap, fmt);
    d->v[d->n].msg = ps_vasprintf(fmt, ap);
    va_end(ap);
    d->v[d->n].loc = loc;
    d->n++;
}

void ps_diags_free(ps_diags *d)
{
    for (uint32_t i = 0; i < d->n; i++)
        free(d->v[i].msg);
    free(d->v);
    d->v = NULL;
    d->n = d->cap = 0;
}

/* ---- types ------------------------------------------------------------------------ */

static const ps_type *map_of(ps_program *prog, const ps_type *elem)
{
    ps_type *t = PS_NEW(&prog->arena, ps_type);
    t->kind = T_MAP;
    t->elem = elem;
    return t;
}

static const ps_type *event_of(ps_program *prog, const ps_evtype *ev)
{
    ps_type *t = PS_NEW(&prog->arena, ps_type);
    t->kind = T_EVENT;
    t->ev = ev;
    return t;
}

static const ps_type *interval_of(ps_program *prog, const ps_ivtype *iv)
{
    ps_type *t = PS_NEW(&prog->arena, ps_type);
    t->kind = T_INTERVAL;
    t->iv = iv;
    return t;
}

static bool type_eq(const ps_type *a, const ps_type *b)
{
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case T_MAP: return type_eq(a->elem, b->elem);
    case T_EVENT: return a->ev == b->ev;
    case T_INTERVAL: return a->iv == b->iv;
    default: return true;
    }
}

static bool is_numeric(const ps_type *t) { return t->kind == T_NUM || t->kind == T_TRIPLE; }
static bool is_err(const ps_type *t) { return t->kind == T_ERROR; }

/* The common type of two values that may be combined: number with triple
 * gives triple, mappings combine elementwise. NULL when incompatible. */
static const ps_type *unify(ps_program *prog, const ps_type *a, const ps_type *b)
{
    if (is_err(a) || is_err(b))
        return &ps_t_error;
    if (is_numeric(a) && is_numeric(b))
        return (a->kind == T_TRIPLE || b->kind == T_TRIPLE) ? &ps_t_triple : &ps_t_num;
    if (a->kind == T_MAP && b->kind == T_MAP) {
        const ps_type *e = unify(prog, a->elem, b->elem);
        return e ? (e == a->elem ? a : e == b->elem ? b : map_of(prog, e)) : NULL;
    }
    return type_eq(a, b) ? a : NULL;
}

const char *ps_type_describe(ps_program *prog, const ps_type *t)
{
    switch (t->kind) {
    case T_ERROR: return "an erroneous type";
    case T_NUM: return "number";
    case T_BOOL: return "boolean";
    case T_STR: return "string";
    case T_TRIPLE: return "triple";
    case T_MAP: return ps_arena_printf(&prog->arena, "mapping of %s", ps_type_describe(prog, t->elem));
    case T_EVENT: return ps_arena_printf(&prog->arena, "event %s", t->ev->name);
    case T_INTERVAL: return ps_arena_printf(&prog->arena, "interval %s", t->iv->name);
    }
    return "?";
}

static int map_depth(const ps_type *t)
{
    int d = 0;
    while (t->kind == T_MAP) {
        d++;
        t = t->elem;
    }
    return d;
}

/* ---- predeclared events --------------------------------------------------------------- */

static ps_evtype *new_evtype(ps_program *prog, const char *name, ps_ev_origin origin, bool timed, ps_loc loc)
{
    ps_evtype *ev = PS_NEW(&prog->arena, ps_evtype);
    ev->name = name;
    ev->origin = origin;
    ev->timed = timed;
    ev->loc = loc;
    ev->id = prog->evtypes.n;
    PS_VEC_PUSH(&prog->arena, prog->evtypes, ev);
    return ev;
}

void ps_check_init_program(ps_program *prog)
{
    ps_loc none = {0, 0, 0};
    new_evtype(prog, "logstart@", EVO_LOGSTART, true, none);
    new_evtype(prog, "logend@", EVO_LOGEND, true, none);
    ps_evtype *gap = new_evtype(prog, "gap@", EVO_GAP, true, none);
    gap->attrs = PS_NEWN(&prog->arena, const char *, 1);
    gap->attrs[0] = "n";
    gap->nattr = 1;
}

ps_evtype *ps_logstart_type(const ps_program *prog) { return prog->evtypes.v[0]; }
ps_evtype *ps_logend_type(const ps_program *prog) { return prog->evtypes.v[1]; }
ps_evtype *ps_gap_type(const ps_program *prog) { return prog->evtypes.v[2]; }

static ps_evtype *predeclared(const ps_program *prog, const char *name)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(prog->evtypes.v[i]->name, name) == 0)
            return prog->evtypes.v[i];
    return NULL;
}

/* ---- checking context ------------------------------------------------------------------ */

typedef enum place {
    PL_TOP,         /* def, assert, print, solve: log aggregates range over the whole log */
    PL_METRIC,      /* an interval's metric definitions */
    PL_WHERE,       /* an interval's start/end where-clause: no aggregates */
    PL_CONST,       /* from/every/after: constant, no variables, no aggregates */
} place;

/* The binders visible at a point, innermost first. A barrier marks the
 * entry into a log aggregate's body. */
typedef struct env {
    const struct env *up;
    ps_binder *b;
    bool barrier;
} env;

typedef struct cx {
    ps_checker *ck;
    place pl;
    ps_ivtype *iv;              /* the interval type whose where/metrics we are in */
    bool in_metric_agg;         /* inside a log aggregate of a metric */
    const env *env;
    uint32_t depth;             /* out: deepest log aggregate / def depended on */
    bool log_dep;               /* out: depends on the log */
} cx;

#define ERR(c, loc, ...) ps_diags_add((c)->ck->diags, (loc), __VA_ARGS__)

static const ps_type *check(cx *c, ps_expr *e);

static ps_binder *new_binder(ps_program *prog, const char *name, ps_binder_kind kind, const ps_type *type)
{
    ps_binder *b = PS_NEW(&prog->arena, ps_binder);
    b->name = name;
    b->kind = kind;
    b->type = type;
    b->slot = prog->nslots++;
    return b;
}

static const char *tdesc(cx *c, const ps_type *t) { return ps_type_describe(c->ck->prog, t); }

/* Look a type name up: "T", "S.T", "call@p" ... */
static ps_symbol *lookup_type(ps_checker *ck, const char *name)
{
    const char *dot = strchr(name, '.');
    if (!dot)
        return ps_scope_get(ck->scope, name);
    char spec[256];
    size_t n = (size_t)(dot - name);
    if (n >= sizeof spec)
        return NULL;
    memcpy(spec, name, n);
    spec[n] = '\0';
    ps_symbol *s = ps_scope_get(ck->scope, spec);
    if (!s || s->kind != SYM_SPEC)
        return NULL;
    ps_symbol *t = ps_scope_get(s->spec, dot + 1);
    return (t && t->kind != SYM_SPEC) ? t : NULL;
}

static ps_evtype *resolve_evtype(ps_checker *ck, const char *name, ps_loc loc)
{
    ps_evtype *pre = predeclared(ck->prog, name);
    if (pre)
        return pre;
    ps_symbol *s = lookup_type(ck, name);
    if (!s) {
        ps_diags_add(ck->diags, loc, "undeclared event type '%s'", name);
        return NULL;
    }
    if (s->kind != SYM_EVTYPE) {
        ps_diags_add(ck->diags, loc, "'%s' is not an event type", name);
        return NULL;
    }
    return s->ev;
}

/* ---- expressions ------------------------------------------------------------------------ */

static const ps_type *bad(ps_expr *e)
{
    e->type = &ps_t_error;
    return e->type;
}

static const ps_type *set(ps_expr *e, const ps_type *t)
{
    e->type = t;
    return t;
}

/* Make e a reference to constant k (written `shown`), if the context allows. */
static const ps_type *use_const(cx *c, ps_expr *e, ps_const *k, const char *shown)
{
    if (k->depth > 0 && c->pl != PL_TOP) {
        ERR(c, e->loc, "'%s' depends on the log (it is defined with an aggregate) and cannot be "
            "used in %s", shown, c->pl == PL_METRIC ? "a metric" :
            c->pl == PL_WHERE ? "a where-clause of an interval declaration" : "a time expression");
        return bad(e);
    }
    if (k->depth > c->depth)
        c->depth = k->depth;
    if (k->depth > 0)
        c->log_dep = true;
    e->kind = X_CONST;
    e->cst = k;
    return set(e, k->type);
}

static const ps_type *check_name(cx *c, ps_expr *e)
{
    const char *name = e->name;
    bool crossed = false;
    for (const env *en = c->env; en; en = en->up) {
        if (en->barrier) {
            crossed = true;
            continue;
        }
        if (strcmp(en->b->name, name) != 0)
            continue;
        ps_binder *b = en->b;
        if (crossed) {
            if (b->kind == BIND_END && c->in_metric_agg) {
                ERR(c, e->loc, "an aggregate in a metric may not refer to the end event '%s'", name);
                return bad(e);
            }
            if (!(b->kind == BIND_START && c->in_metric_agg)) {
                ERR(c, e->loc,
                    "'%s' is bound outside this aggregate: a log aggregate may not refer to the "
                    "variables of enclosing aggregates", name);
                return bad(e);
            }
        }
        e->kind = X_VAR;
        e->var = b;
        return set(e, b->type);
    }
    ps_symbol *s = ps_scope_get(c->ck->scope, name);
    if (s && s->kind == SYM_CONST) {
        return use_const(c, e, s->cst, name);
    }
    if (s && (s->kind == SYM_EVTYPE || s->kind == SYM_IVTYPE)) {
        ERR(c, e->loc, "'%s' is a type, not a value", name);
        return bad(e);
    }
    if (s && s->kind == SYM_SPEC) {
        ERR(c, e->loc, "'%s' is a specification; use a qualified name such as %s.X", name, name);
        return bad(e);
    }
    if (c->iv && strcmp(name, c->iv->name) == 0) {
        ERR(c, e->loc, "interval type '%s' cannot be used in its own declaration", name);
        return bad(e);
    }
    if (c->iv) {
        for (uint32_t i = 0; i < c->iv->nmetric; i++) {
            if (c->iv->metrics[i].name && strcmp(c->iv->metrics[i].name, name) == 0) {
                ERR(c, e->loc, "metric '%s' cannot be used here: metrics may not refer to each other", name);
                return bad(e);
            }
        }
    }
    for (int i = 0; i < B__COUNT; i++) {
        if (strcmp(builtin_names[i], name) == 0) {
            ERR(c, e->loc, "built-in function '%s' must be called with arguments", name);
            return bad(e);
        }
    }
    ERR(c, e->loc, "undeclared identifier '%s'", name);
    return bad(e);
}

static const ps_type *check_field(cx *c, ps_expr *e)
{
    ps_expr *obj = e->field.obj;
    const char *f = e->field.name;
    /* S.X: a constant of an imported specification. */
    if (obj->kind == X_NAME) {
        bool bound = false;
        for (const env *en = c->env; en; en = en->up)
            if (!en->barrier && strcmp(en->b->name, obj->name) == 0)
                bound = true;
        ps_symbol *s = bound ? NULL : ps_scope_get(c->ck->scope, obj->name);
        if (s && s->kind == SYM_SPEC) {
            ps_symbol *t = ps_scope_get(s->spec, f);
            if (!t) {
                ERR(c, e->loc, "specification '%s' declares no '%s'", obj->name, f);
                return bad(e);
            }
            if (t->kind != SYM_CONST) {
                ERR(c, e->loc, "'%s.%s' is a type, not a value", obj->name, f);
                return bad(e);
            }
            return use_const(c, e, t->cst, t->cst->name);
        }
    }
    const ps_type *ot = check(c, obj);
    if (is_err(ot))
        return bad(e);
    switch (ot->kind) {
    case T_EVENT:
        for (uint32_t i = 0; i < ot->ev->nattr; i++) {
            if (ot->ev->attrs[i] && strcmp(ot->ev->attrs[i], f) == 0) {
                e->kind = X_ATTR;
                e->field.index = i;
                return set(e, &ps_t_num);
            }
        }
        ERR(c, e->loc, "event type '%s' has no attribute '%s'", ot->ev->name, f);
        return bad(e);
    case T_INTERVAL:
        for (uint32_t i = 0; i < ot->iv->nmetric; i++) {
            if (strcmp(ot->iv->metrics[i].name, f) == 0) {
                e->kind = X_METRIC;
                e->field.index = i;
                const ps_type *mt = ot->iv->metrics[i].expr ? ot->iv->metrics[i].expr->type : NULL;
                return set(e, mt ? mt : &ps_t_error);
            }
        }
        ERR(c, e->loc, "interval type '%s' has no metric '%s'", ot->iv->name, f);
        return bad(e);
    case T_TRIPLE:
        if (strlen(f) == 1 && strchr("vpm", f[0])) {
            e->kind = X_PART;
            e->op = (uint8_t)f[0];
            return set(e, &ps_t_num);
        }
        ERR(c, e->loc, "a triple has components v, p and m, not '%s'", f);
        return bad(e);
    default:
        ERR(c, e->loc, "'.%s' needs an event, interval or triple, not a %s", f, tdesc(c, ot));
        return bad(e);
    }
}

/* Type of a binary arithmetic/logic operator; NULL when ill-typed. */
static const ps_type *binop_type(cx *c, pv_binop op, const ps_type *a, const ps_type *b)
{
    ps_program *prog = c->ck->prog;
    switch (op) {
    case PV_OP_ADD: case PV_OP_MUL: case PV_OP_MIN: case PV_OP_MAX:
        if (is_numeric(a) && is_numeric(b))
            return unify(prog, a, b);
        if (a->kind == T_MAP && b->kind == T_MAP) {
            const ps_type *u = unify(prog, a, b);
            if (u && u->kind == T_MAP) {
                const ps_type *leaf = u;
                while (leaf->kind == T_MAP)
                    leaf = leaf->elem;
                if (is_numeric(leaf))
                    return u;
            }
        }
        return NULL;
    case PV_OP_SUB: case PV_OP_DIV:
        return (is_numeric(a) && is_numeric(b)) ? unify(prog, a, b) : NULL;
    case PV_OP_IDIV: case PV_OP_MOD:
        return (a->kind == T_NUM && b->kind == T_NUM) ? &ps_t_num : NULL;
    case PV_OP_EQ: case PV_OP_NE:
        if (is_numeric(a) && is_numeric(b))
            return &ps_t_bool;
        return (a->kind == T_BOOL && b->kind == T_BOOL) ? &ps_t_bool : NULL;
    case PV_OP_LT: case PV_OP_LE: case PV_OP_GT: case PV_OP_GE:
        return (is_numeric(a) && is_numeric(b)) ? &ps_t_bool : NULL;
    case PV_OP_AND: case PV_OP_OR:
        if (a->kind == T_BOOL && b->kind == T_BOOL)
            return &ps_t_bool;
        if (a->kind == T_MAP && b->kind == T_MAP) {
            const ps_type *u = unify(prog, a, b);
            const ps_type *leaf = u;
            while (leaf && leaf->kind == T_MAP)
                leaf = leaf->elem;
            return (leaf && leaf->kind == T_BOOL) ? u : NULL;
        }
        return NULL;
    case PV_OP_IMPLIES:
        return (a->kind == T_BOOL && b->kind == T_BOOL) ? &ps_t_bool : NULL;
    case PV_OP_POWER:
        if (a->kind == T_NUM && b->kind == T_NUM)
            return &ps_t_num;
        if ((a->kind == T_NUM && b->kind == T_TRIPLE) || (a->kind == T_TRIPLE && b->kind == T_NUM))
            return &ps_t_triple;
        return NULL;
    case PV_OP_LOG:
        if (a->kind == T_NUM && b->kind == T_NUM)
            return &ps_t_num;
        if (a->kind == T_NUM && b->kind == T_TRIPLE)
            return &ps_t_triple;
        return NULL;
    default:
        return NULL;
    }
}

static const ps_type *check_binary(cx *c, ps_expr *e)
{
    const ps_type *a = check(c, e->bin.a), *b = check(c, e->bin.b);
    if (is_err(a) || is_err(b))
        return bad(e);
    const ps_type *t = binop_type(c, (pv_binop)e->op, a, b);
    if (!t) {
        ERR(c, e->loc, "operator '%s' cannot combine %s and %s", pv_binop_spelling[e->op], tdesc(c, a),
            tdesc(c, b));
        return bad(e);
    }
    return set(e, t);
}

static const ps_type *check_chain(cx *c, ps_expr *e)
{
    const ps_type *prev = check(c, e->list.items[0]);
    bool ok = !is_err(prev);
    for (uint32_t i = 1; i < e->list.n; i++) {
        const ps_type *t = check(c, e->list.items[i]);
        if (is_err(t) || is_err(prev)) {
            ok = false;
        } else if (!binop_type(c, (pv_binop)e->list.ops[i - 1], prev, t)) {
            ERR(c, e->list.items[i]->loc, "relation '%s' cannot compare %s and %s",
                pv_binop_spelling[e->list.ops[i - 1]], tdesc(c, prev), tdesc(c, t));
            ok = false;
        }
        prev = t;
    }
    return ok ? set(e, &ps_t_bool) : bad(e);
}

static bool need_key_type(cx *c, ps_expr *k, const ps_type *t)
{
    if (is_err(t))
        return false;
    if (!is_numeric(t)) {
        ERR(c, k->loc, "a mapping's domain values are numbers, not %s", tdesc(c, t));
        return false;
    }
    return true;
}

static const ps_type *check_builtin(cx *c, ps_expr *e, ps_builtin fn)
{
    uint32_t n = e->call.nargs;
    const char *name = builtin_names[fn];
    if (n < builtin_min[fn] || n > builtin_max[fn]) {
        if (builtin_min[fn] == builtin_max[fn])
            ERR(c, e->loc, "'%s' takes %d argument%s, not %u", name, builtin_min[fn],
                builtin_min[fn] == 1 ? "" : "s", n);
        else
            ERR(c, e->loc, "'%s' takes %d or %d arguments, not %u", name, builtin_min[fn], builtin_max[fn], n);
        for (uint32_t i = 0; i < n; i++)
            check(c, e->call.args[i]);
        return bad(e);
    }
    const ps_type *t[2] = {NULL, NULL};
    bool err = false;
    for (uint32_t i = 0; i < n; i++) {
        t[i] = check(c, e->call.args[i]);
        err |= is_err(t[i]);
    }
    e->kind = X_BUILTIN;
    e->op = (uint8_t)fn;
    if (err)
        return bad(e);
    switch (fn) {
    case B_MIN: case B_MAX: case B_POWER: case B_LOG: {
        pv_binop op = fn == B_MIN ? PV_OP_MIN : fn == B_MAX ? PV_OP_MAX : fn == B_POWER ? PV_OP_POWER : PV_OP_LOG;
        const ps_type *r = binop_type(c, op, t[0], t[1]);
        if (!r) {
            ERR(c, e->loc, "'%s' cannot take %s and %s", name, tdesc(c, t[0]), tdesc(c, t[1]));
            return bad(e);
        }
        return set(e, r);
    }
    case B_ELAPSED:
        if (n == 1) {
            if (t[0]->kind != T_INTERVAL) {
                ERR(c, e->loc, "'elapsed' of one argument needs an interval, not %s", tdesc(c, t[0]));
                return bad(e);
            }
            const ps_ivtype *iv = t[0]->iv;
            if (!iv->s_type->timed || !iv->e_type->timed) {
                ERR(c, e->loc, "'elapsed' needs an interval whose start and end events are timed; "
                    "'%s' starts with %s and ends with %s", iv->name, iv->s_type->name, iv->e_type->name);
                return bad(e);
            }
            return set(e, &ps_t_triple);
        }
        for (int i = 0; i < 2; i++) {
            if (t[i]->kind == T_EVENT) {
                if (!t[i]->ev->timed) {
                    ERR(c, e->call.args[i]->loc, "event type '%s' is not timed", t[i]->ev->name);
                    return bad(e);
                }
            } else if (!is_numeric(t[i])) {
                ERR(c, e->call.args[i]->loc, "'elapsed' takes two timed events or two triples, not %s",
                    tdesc(c, t[i]));
                return bad(e);
            }
        }
        return set(e, &ps_t_triple);
    case B_ABS: case B_TRUNC:
        if (!is_numeric(t[0])) {
            ERR(c, e->loc, "'%s' needs a number or a triple, not %s", name, tdesc(c, t[0]));
            return bad(e);
        }
        return set(e, t[0]);
    case B_TIMESTAMP: case B_TS:
        if (t[0]->kind != T_EVENT) {
            ERR(c, e->loc, "'%s' needs an event, not %s", name, tdesc(c, t[0]));
            return bad(e);
        }
        if (!t[0]->ev->timed) {
            ERR(c, e->loc, "event type '%s' is not timed (declare it with 'timed event')", t[0]->ev->name);
            return bad(e);
        }
        e->op = B_TIMESTAMP;
        return set(e, &ps_t_triple);
    case B_THREAD:
        if (t[0]->kind != T_EVENT) {
            ERR(c, e->loc, "'thread' needs an event, not %s", tdesc(c, t[0]));
            return bad(e);
        }
        return set(e, &ps_t_num);
    case B_DEFINED:
        return set(e, &ps_t_bool);
    case B_MAPPED:
        if (t[0]->kind != T_MAP) {
            ERR(c, e->loc, "'mapped' needs a mapping as its first argument, not %s", tdesc(c, t[0]));
            return bad(e);
        }
        if (!need_key_type(c, e->call.args[1], t[1]))
            return bad(e);
        return set(e, &ps_t_bool);
    default:
        return bad(e);
    }
}

static bool binder_in_env(const env *en, const char *name)
{
    for (; en; en = en->up)
        if (!en->barrier && strcmp(en->b->name, name) == 0)
            return true;
    return false;
}

static const ps_type *check_call(cx *c, ps_expr *e)
{
    ps_expr *fn = e->call.fn;
    if (fn->kind == X_NAME && !binder_in_env(c->env, fn->name) && !ps_scope_get(c->ck->scope, fn->name)) {
        for (int i = 0; i < B__COUNT; i++)
            if (strcmp(builtin_names[i], fn->name) == 0)
                return check_builtin(c, e, (ps_builtin)i);
    }
    const ps_type *ft = check(c, fn);
    e->kind = X_APPLY;
    if (is_err(ft)) {
        for (uint32_t i = 0; i < e->call.nargs; i++)
            check(c, e->call.args[i]);
        return bad(e);
    }
    if (ft->kind != T_MAP) {
        ERR(c, e->loc, "only mappings and built-in functions can be applied; this is a %s", tdesc(c, ft));
        return bad(e);
    }
    if (e->call.nargs != 1) {
        ERR(c, e->loc, "a mapping is applied to one domain value, not %u", e->call.nargs);
        return bad(e);
    }
    if (!need_key_type(c, e->call.args[0], check(c, e->call.args[0])))
        return bad(e);
    return set(e, ft->elem);
}

/* Is `e` free of variables and log aggregates (a constant expression)? */
static bool is_constant(const ps_expr *e);

static bool not_constant(const ps_expr *e, void *ctx)
{
    (void)ctx;
    return !is_constant(e);
}

static bool is_constant(const ps_expr *e)
{
    if (!e)
        return true;
    switch ((ps_expr_kind)e->kind) {
    case X_CONST: return e->cst->depth == 0 && !e->cst->unknown;
    case X_VAR: case X_AGG: case X_NAME: case X_FIELD: case X_CALL: return false;
    default: return !ps_expr_any_child(e, not_constant, NULL);
    }
}

/* A mapping key written as a plain number (`3`, `-3`): its value, known
 * before any log is read, so that repeated keys can be rejected. Keys built
 * from constants or time units are only known per log; a repeat among those
 * makes the mapping UNDEFINED. */
static bool literal_key(const ps_expr *k, double *out)
{
    bool neg = false;
    while (k->kind == X_NEG) {
        neg = !neg;
        k = k->bin.a;
    }
    if (k->kind != X_NUM)
        return false;
    *out = neg ? -k->num : k->num;
    return true;
}

static const ps_type *check_agg(cx *c, ps_expr *e);

static const ps_type *check(cx *c, ps_expr *e)
{
    ps_program *prog = c->ck->prog;
    switch ((ps_expr_kind)e->kind) {
    case X_NUM: return set(e, &ps_t_num);
    case X_TIMELIT: return set(e, &ps_t_num);
    case X_BOOL: return set(e, &ps_t_bool);
    case X_STR: return set(e, &ps_t_str);
    case X_NAME: return check_name(c, e);
    case X_FIELD: return check_field(c, e);
    case X_CALL: return check_call(c, e);
    case X_NEG: {
        const ps_type *a = check(c, e->bin.a);
        if (is_err(a))
            return bad(e);
        if (!is_numeric(a)) {
            ERR(c, e->loc, "unary '-' needs a number or a triple, not %s", tdesc(c, a));
            return bad(e);
        }
        return set(e, a);
    }
    case X_NOT: {
        const ps_type *a = check(c, e->bin.a);
        if (is_err(a))
            return bad(e);
        if (a->kind != T_BOOL) {
            ERR(c, e->loc, "'!' needs a boolean, not %s", tdesc(c, a));
            return bad(e);
        }
        return set(e, a);
    }
    case X_BINARY: return check_binary(c, e);
    case X_CHAIN: return check_chain(c, e);
    case X_TRIPLE: {
        bool ok = true;
        for (int i = 0; i < 3; i++) {
            const ps_type *t = check(c, e->list.items[i]);
            if (is_err(t)) {
                ok = false;
            } else if (t->kind != T_NUM) {
                ERR(c, e->list.items[i]->loc, "the components of a triple are numbers, not %s", tdesc(c, t));
                ok = false;
            }
        }
        return ok ? set(e, &ps_t_triple) : bad(e);
    }
    case X_MAPONE: {
        const ps_type *k = check(c, e->bin.a), *v = check(c, e->bin.b);
        if (!need_key_type(c, e->bin.a, k) || is_err(v))
            return bad(e);
        return set(e, map_of(prog, v));
    }
    case X_MAPLIST: {
        const ps_type *elem = NULL;
        bool ok = true;
        for (uint32_t i = 0; i < e->list.n; i++) {
            ps_expr *it = e->list.items[i];
            if (it->kind != X_MAPONE) {
                ERR(c, it->loc, "a parenthesized list must contain single-element mappings 'k -> v'");
                ok = false;
                continue;
            }
            const ps_type *t = check(c, it);
            if (is_err(t)) {
                ok = false;
                continue;
            }
            if (!is_constant(it)) {
                ERR(c, it->loc, "the elements of a multi-element mapping must be constant");
                ok = false;
            }
            if (!elem) {
                elem = t->elem;
            } else if (!type_eq(elem, t->elem)) {
                ERR(c, it->loc, "all elements of a mapping must have the same type of value: %s and %s",
                    tdesc(c, elem), tdesc(c, t->elem));
                ok = false;
            }
            double k;
            if (literal_key(it->bin.a, &k)) {
                for (uint32_t j = 0; j < i; j++) {
                    double kj;
                    if (e->list.items[j]->kind == X_MAPONE && literal_key(e->list.items[j]->bin.a, &kj) &&
                        kj == k) {
                        ERR(c, it->bin.a->loc, "domain value %.10g appears more than once in the mapping",
                            k + 0.0);
                        ok = false;
                        break;
                    }
                }
            }
        }
        return ok ? set(e, map_of(prog, elem)) : bad(e);
    }
    case X_IF: {
        const ps_type *a = check(c, e->bin.a), *b = check(c, e->bin.b);
        if (is_err(a) || is_err(b))
            return bad(e);
        if (a->kind != T_BOOL) {
            ERR(c, e->bin.a->loc, "the condition of '?' must be a boolean, not %s", tdesc(c, a));
            return bad(e);
        }
        return set(e, b);
    }
    case X_ELSE: {
        const ps_type *a = check(c, e->bin.a), *b = check(c, e->bin.b);
        if (is_err(a) || is_err(b))
            return bad(e);
        const ps_type *u = unify(prog, a, b);
        if (!u) {
            ERR(c, e->loc, "both sides of '~' must have the same type: %s and %s", tdesc(c, a), tdesc(c, b));
            return bad(e);
        }
        return set(e, u);
    }
    case X_AGG: return check_agg(c, e);
    default:
        return set(e, e->type ? e->type : &ps_t_error);  /* already resolved */
    }
}

/* Result type of aggregate `op` over elements of type t; NULL if not allowed. */
static const ps_type *agg_result(cx *c, pv_aggop op, const ps_type *t)
{
    ps_program *prog = c->ck->prog;
    switch (op) {
    case PV_AGG_COUNT: return &ps_t_num;
    case PV_AGG_THE: case PV_AGG_FIRST: case PV_AGG_LAST: return t;
    case PV_AGG_SUM: case PV_AGG_PROD: case PV_AGG_MIN: case PV_AGG_MAX:
        if (is_numeric(t))
            return t;
        if (t->kind == T_MAP)
            return agg_result(c, op, t->elem) ? t : NULL;
        return NULL;
    case PV_AGG_ALL: case PV_AGG_ANY:
        if (t->kind == T_BOOL)
            return t;
        if (t->kind == T_MAP)
            return agg_result(c, op, t->elem) ? t : NULL;
        return NULL;
    case PV_AGG_MEAN: case PV_AGG_STDEV: case PV_AGG_VAR:
        if (is_numeric(t))
            return &ps_t_num;
        if (t->kind == T_MAP) {
            const ps_type *r = agg_result(c, op, t->elem);
            return r ? map_of(prog, r) : NULL;
        }
        return NULL;
    case PV_AGG_QUANT:
        return is_numeric(t) ? &ps_t_triple : NULL;     /* mappings: check_agg says why */
    default:
        return NULL;
    }
}

/* Which binders an expression refers to: only `allowed` (and constants)? */
typedef struct refs {
    const ps_binder *allowed;
    bool other;         /* refers to something other than the allowed binder */
    bool uses;          /* refers to the allowed binder */
} refs;

static bool refs_walk(const ps_expr *e, void *ctx)
{
    refs *r = ctx;
    switch ((ps_expr_kind)e->kind) {
    case X_VAR:
        if (e->var == r->allowed)
            r->uses = true;
        else
            r->other = true;
        return false;
    case X_AGG: case X_NAME: case X_FIELD: case X_CALL:
        r->other = true;
        return false;
    case X_CONST:
        if (e->cst->unknown || e->cst->depth > 0)
            r->other = true;
        return false;
    default:
        ps_expr_any_child(e, refs_walk, r);
        return false;
    }
}

static bool depends_only_on(const ps_expr *e, const ps_binder *b)
{
    refs r = {.allowed = b};
    refs_walk(e, &r);
    return r.uses && !r.other;
}

/* Find a conjunct `a = b` of `where` where one side depends only on binder
 * x (and constants) and the other only on binder y; store them. */
static bool find_key(ps_expr *where, const ps_binder *x, const ps_binder *y, ps_expr **xkey, ps_expr **ykey)
{
    if (!where || is_err(where->type))
        return false;
    if (where->kind == X_BINARY && where->op == PV_OP_AND)
        return find_key(where->bin.a, x, y, xkey, ykey) || find_key(where->bin.b, x, y, xkey, ykey);
    if (where->kind != X_BINARY || where->op != PV_OP_EQ)
        return false;
    ps_expr *a = where->bin.a, *b = where->bin.b;
    if (a->type->kind != T_NUM || b->type->kind != T_NUM)
        return false;
    if (depends_only_on(a, x) && depends_only_on(b, y)) {
        *xkey = a;
        *ykey = b;
        return true;
    }
    if (depends_only_on(b, x) && depends_only_on(a, y)) {
        *xkey = b;
        *ykey = a;
        return true;
    }
    return false;
}

/* Resolve the range type of an aggregate or solve declaration (a->range_name)
 * and return the type of its variable, or NULL when the name is not an event
 * or interval type. Sets a->ev or a->iv. */
static const ps_type *range_type(ps_checker *ck, ps_agg *a)
{
    ps_program *prog = ck->prog;
    ps_evtype *pre = predeclared(prog, a->range_name);
    if (pre) {
        a->ev = pre;
        return event_of(prog, pre);
    }
    ps_symbol *s = lookup_type(ck, a->range_name);
    if (s && s->kind == SYM_EVTYPE) {
        a->ev = s->ev;
        return event_of(prog, s->ev);
    }
    if (s && s->kind == SYM_IVTYPE) {
        a->iv = s->iv;
        return interval_of(prog, s->iv);
    }
    return NULL;
}

/* {op x : T [where P] : V}  or  {op x in domain(M) [where P] : V} */
static const ps_type *check_agg(cx *c, ps_expr *e)
{
    ps_agg *a = e->agg;
    ps_program *prog = c->ck->prog;
    if (c->pl == PL_WHERE || c->pl == PL_CONST) {
        ERR(c, e->loc, "aggregates are not allowed in %s",
            c->pl == PL_WHERE ? "the where-clause of an interval's start or end event" : "a time expression");
        return bad(e);
    }
    const ps_type *vt = NULL;   /* the variable's type */
    cx inner = *c;
    env barrier = {.up = c->env, .barrier = true};
    if (c->in_metric_agg) {
        ERR(c, e->loc, "aggregates in metric definitions may not contain other aggregates");
        return bad(e);
    }
    if (a->domain) {
        a->place = AGG_DOMAIN;
        const ps_type *mt = check(c, a->domain);
        if (is_err(mt))
            return bad(e);
        if (mt->kind != T_MAP) {
            ERR(c, a->domain->loc, "'in domain(...)' needs a mapping, not %s", tdesc(c, mt));
            return bad(e);
        }
        vt = &ps_t_num;
    } else {
        vt = range_type(c->ck, a);
        if (!vt) {
            if (c->iv && strcmp(a->range_name, c->iv->name) == 0)
                ERR(c, a->range_loc, "interval type '%s' cannot be used in its own metrics", a->range_name);
            else
                ERR(c, a->range_loc, lookup_type(c->ck, a->range_name) ? "'%s' is not an event or interval type"
                    : "undeclared type '%s'", a->range_name);
            return bad(e);
        }
        inner.env = &barrier;
        if (c->pl == PL_METRIC) {
            a->place = AGG_METRIC;
            inner.in_metric_agg = true;
        } else {
            a->place = AGG_TOP;
        }
    }
    a->var->type = vt;
    a->var->slot = prog->nslots++;
    env bind = {.up = inner.env, .b = a->var};
    inner.env = &bind;
    inner.depth = 0;
    inner.log_dep = false;
    bool ok = true;
    if (a->where) {
        const ps_type *wt = check(&inner, a->where);
        if (is_err(wt)) {
            ok = false;
        } else if (wt->kind != T_BOOL) {
            ERR(c, a->where->loc, "a where-clause must be a boolean, not %s", tdesc(c, wt));
            ok = false;
        }
    }
    const ps_type *valt = &ps_t_num;
    if (a->value) {
        valt = check(&inner, a->value);
        if (is_err(valt))
            ok = false;
    }
    if (a->op == PV_AGG_QUANT && !(a->quant > 0 && a->quant < 100)) {
        ERR(c, e->loc, "quantile 'p%s' out of range: N in pN must be between 0 and 100 (exclusive)",
            a->quant_text);
        ok = false;
    }
    if (ok && a->op == PV_AGG_QUANT && valt->kind == T_MAP) {
        ERR(c, e->loc, "quantile 'p%s' of mapping values (%s) is not supported: aggregate numbers "
            "or triples", a->quant_text, tdesc(c, valt));
        ok = false;
    }
    if (!ok)
        return bad(e);
    const ps_type *rt = agg_result(c, a->op, valt);
    if (!rt) {
        if (a->op == PV_AGG_QUANT)
            ERR(c, e->loc, "aggregate 'p%s' cannot combine values of type %s", a->quant_text, tdesc(c, valt));
        else
            ERR(c, e->loc, "aggregate '%s' cannot combine values of type %s", pv_aggop_spelling[a->op],
                tdesc(c, valt));
        return bad(e);
    }
    a->map_depth = map_depth(valt);
    switch (a->place) {
    case AGG_DOMAIN:
        /* Evaluated directly: its dependencies are those of its parts. */
        if (inner.depth > c->depth)
            c->depth = inner.depth;
        c->log_dep |= inner.log_dep;
        break;
    case AGG_TOP:
        a->depth = inner.depth + 1;
        if (a->depth > c->depth)
            c->depth = a->depth;
        c->log_dep = true;
        a->id = prog->topaggs.n;
        PS_VEC_PUSH(&prog->arena, prog->topaggs, a);
        break;
    case AGG_METRIC: {
        ps_ivtype *iv = c->iv;
        a->owner = iv;
        a->id = iv->naggs;
        ps_agg **na = PS_NEWN(&prog->arena, ps_agg *, iv->naggs + 1);
        if (iv->naggs)
            memcpy(na, iv->aggs, iv->naggs * sizeof *na);
        na[iv->naggs++] = a;
        iv->aggs = na;
        find_key(a->where, a->var, iv->s, &a->elem_key, &a->start_key);
        break;
    }
    }
    e->log_dependent = a->place != AGG_DOMAIN || inner.log_dep;
    return set(e, rt);
}

/* Check a whole expression in a context; returns its type. */
static const ps_type *check_root(ps_checker *ck, ps_expr *e, place pl, ps_ivtype *iv, const env *en,
                                 uint32_t *depth)
{
    cx c = {.ck = ck, .pl = pl, .iv = iv, .env = en};
    const ps_type *t = check(&c, e);
    e->log_dependent = c.log_dep || e->log_dependent;
    if (depth)
        *depth = c.depth;
    return t;
}

/* ---- declarations ---------------------------------------------------------------------- */

static bool declare_ok(ps_checker *ck, const char *name, ps_loc loc)
{
    ps_symbol *s = ps_scope_get(ck->scope, name);
    if (s && !(s->from_proc && s->imported)) {
        ps_diags_add(ck->diags, loc, "'%s' is already declared in this specification", name);
        return false;
    }
    if (predeclared(ck->prog, name)) {
        ps_diags_add(ck->diags, loc, "'%s' is a predeclared event type", name);
        return false;
    }
    if (strchr(name, '@') && strncmp(name, "intv@", 5) != 0 && strncmp(name, "call@", 5) != 0 &&
        strncmp(name, "ret@", 4) != 0) {
        ps_diags_add(ck->diags, loc, "'%s': names with '@' are reserved", name);
        return false;
    }
    return true;
}

static bool user_name_ok(ps_checker *ck, const char *name, ps_loc loc)
{
    if (strchr(name, '@')) {
        ps_diags_add(ck->diags, loc, "'%s': '@' cannot appear in a declared name (use proc for call@/ret@)", name);
        return false;
    }
    return declare_ok(ck, name, loc);
}

static const char *qualified(ps_checker *ck, const char *local)
{
    return ps_arena_printf(&ck->prog->arena, "%s.%s", ck->scope->specname, local);
}

static int check_def(ps_checker *ck, ps_item *it)
{
    ps_program *prog = ck->prog;
    uint32_t before = ck->diags->n;
    if (!user_name_ok(ck, it->def.name, it->loc))
        return -1;
    ps_const *k = PS_NEW(&prog->arena, ps_const);
    k->name = qualified(ck, it->def.name);
    k->local = it->def.name;
    k->loc = it->loc;
    k->unknown = it->def.unknown;
    k->qloc = it->def.qloc;
    k->expr = it->def.expr;
    if (k->unknown) {
        k->type = &ps_t_num;
    } else {
        k->type = check_root(ck, k->expr, PL_TOP, NULL, NULL, &k->depth);
    }
    k->id = prog->consts.n;
    PS_VEC_PUSH(&prog->arena, prog->consts, k);
    ps_symbol *s = ps_scope_put(prog, ck->scope, it->def.name);
    s->kind = SYM_CONST;
    s->cst = k;
    return ck->diags->n == before ? 0 : -1;
}

static bool attrs_unique(ps_checker *ck, const char **attrs, uint32_t n, ps_loc loc)
{
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = i + 1; j < n; j++)
            if (attrs[i] && attrs[j] && strcmp(attrs[i], attrs[j]) == 0) {
                ps_diags_add(ck->diags, loc, "attribute '%s' is declared twice", attrs[i]);
                return false;
            }
    return true;
}

static ps_evtype *declare_event(ps_checker *ck, const char *name, const char **attrs, uint32_t nattr,
                                bool timed, ps_ev_origin origin, ps_loc loc, bool from_proc)
{
    ps_program *prog = ck->prog;
    ps_evtype *ev = new_evtype(prog, name, origin, timed, loc);
    ev->logname = name;
    ev->attrs = attrs;
    ev->nattr = nattr;
    ps_symbol *s = ps_scope_put(prog, ck->scope, name);
    s->kind = SYM_EVTYPE;
    s->ev = ev;
    s->from_proc = from_proc;
    return ev;
}

static int check_event(ps_checker *ck, ps_item *it)
{
    if (!user_name_ok(ck, it->event.name, it->loc))
        return -1;
    if (!attrs_unique(ck, it->event.attrs, it->event.nattr, it->loc))
        return -1;
    declare_event(ck, it->event.name, it->event.attrs, it->event.nattr, it->event.timed, EVO_USER, it->loc, false);
    return 0;
}

static ps_ivtype *new_ivtype(ps_program *prog, const char *name, ps_loc loc)
{
    ps_ivtype *iv = PS_NEW(&prog->arena, ps_ivtype);
    iv->name = name;
    iv->loc = loc;
    iv->id = prog->ivtypes.n;
    PS_VEC_PUSH(&prog->arena, prog->ivtypes, iv);
    return iv;
}

static void put_ivtype(ps_checker *ck, ps_ivtype *iv, bool from_proc)
{
    ps_symbol *s = ps_scope_put(ck->prog, ck->scope, iv->name);
    s->kind = SYM_IVTYPE;
    s->iv = iv;
    s->from_proc = from_proc;
}

/* A time expression (from/every/after/within): a constant number. */
static void check_time_expr(ps_checker *ck, ps_expr *e, const char *what)
{
    if (!e)
        return;
    const ps_type *t = check_root(ck, e, PL_CONST, NULL, NULL, NULL);
    if (!is_err(t) && t->kind != T_NUM)
        ps_diags_add(ck->diags, e->loc, "the '%s' time must be a number, not %s", what,
                     ps_type_describe(ck->prog, t));
    else if (!is_err(t) && !is_constant(e))
        ps_diags_add(ck->diags, e->loc, "the '%s' time must be a constant expression", what);
}

static void check_metrics(ps_checker *ck, ps_ivtype *iv, ps_metric *ms, uint32_t n)
{
    ps_program *prog = ck->prog;
    uint32_t base = iv->nmetric;
    ps_metric *all = PS_NEWN(&prog->arena, ps_metric, base + n);
    if (base)
        memcpy(all, iv->metrics, base * sizeof *all);
    /* Names first (types filled as each is checked), so a reference to a
     * sibling metric gets the specific message. */
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; j < base + i; j++) {
            if (strcmp(all[j].name, ms[i].name) == 0) {
                ps_diags_add(ck->diags, ms[i].loc, j < base ? "metric '%s' is already defined by '%s'"
                             : "metric '%s' is defined twice%s", ms[i].name, j < base ? iv->parent->name : "");
                break;
            }
        }
        all[base + i] = ms[i];
        all[base + i].expr = NULL;
    }
    iv->metrics = all;
    iv->nmetric = base + n;
    env es = {.b = iv->s};
    env ee = {.up = &es, .b = iv->e};
    for (uint32_t i = 0; i < n; i++) {
        check_root(ck, ms[i].expr, PL_METRIC, iv, &ee, NULL);
        all[base + i].expr = ms[i].expr;
    }
}

static int check_interval(ps_checker *ck, ps_item *it)
{
    ps_program *prog = ck->prog;
    ps_item_interval *d = &it->interval;
    uint32_t before = ck->diags->n;
    if (!user_name_ok(ck, d->name, it->loc))
        return -1;
    ps_ivtype *iv = new_ivtype(prog, d->name, it->loc);
    iv->nested = d->nested;
    iv->scope = ck->scope;
    if (d->parent.name) {
        ps_symbol *s = lookup_type(ck, d->parent.name);
        if (!s || s->kind != SYM_IVTYPE) {
            ps_diags_add(ck->diags, d->parent.loc, s ? "'%s' is not an interval type" : "undeclared interval type '%s'",
                         d->parent.name);
            prog->ivtypes.n--;
            return -1;
        }
        ps_ivtype *p = s->iv;
        const char *name = iv->name;
        uint32_t id = iv->id;
        *iv = *p;               /* same start/end spec, binders, metrics, aggregates */
        iv->name = name;
        iv->id = id;
        iv->loc = it->loc;
        iv->parent = p;
        iv->nested = p->nested;
        iv->scope = ck->scope;
        check_metrics(ck, iv, d->metrics, d->nmetric);
        put_ivtype(ck, iv, false);
        return ck->diags->n == before ? 0 : -1;
    }
    if (strcmp(d->svar, d->evar) == 0) {
        ps_diags_add(ck->diags, d->evar_loc, "the start and end events need different names");
        prog->ivtypes.n--;
        return -1;
    }
    iv->start_kind = d->start_kind;
    iv->end_kind = d->end_kind;
    if (d->start_kind == IVS_EVERY) {
        check_time_expr(ck, d->from, "from");
        check_time_expr(ck, d->every, "every");
        iv->from = d->from;
        iv->every = d->every;
        iv->s_type = new_evtype(prog, ps_arena_printf(&prog->arena, "start$%s", d->name), EVO_VSTART, true, it->loc);
        iv->s_type->owner = iv;
    } else {
        iv->s_type = resolve_evtype(ck, d->stype.name, d->stype.loc);
    }
    if (d->end_kind == IVE_AFTER) {
        check_time_expr(ck, d->after, "after");
        iv->after = d->after;
        iv->e_type = new_evtype(prog, ps_arena_printf(&prog->arena, "end$%s", d->name), EVO_VEND, true, it->loc);
        iv->e_type->owner = iv;
    } else {
        iv->e_type = resolve_evtype(ck, d->etype.name, d->etype.loc);
    }
    check_time_expr(ck, d->within, "within");
    iv->within = d->within;
    if (!iv->s_type || !iv->e_type) {
        prog->ivtypes.n--;
        return -1;
    }
    iv->s = new_binder(prog, d->svar, BIND_START, event_of(prog, iv->s_type));
    iv->s->iv = iv;
    iv->e = new_binder(prog, d->evar, BIND_END, event_of(prog, iv->e_type));
    iv->e->iv = iv;
    env es = {.b = iv->s};
    env ee = {.up = &es, .b = iv->e};
    if (d->s_where) {
        const ps_type *t = check_root(ck, d->s_where, PL_WHERE, iv, &es, NULL);
        if (!is_err(t) && t->kind != T_BOOL)
            ps_diags_add(ck->diags, d->s_where->loc, "a where-clause must be a boolean, not %s",
                         ps_type_describe(prog, t));
        iv->s_where = d->s_where;
    }
    if (d->e_where) {
        const ps_type *t = check_root(ck, d->e_where, PL_WHERE, iv, &ee, NULL);
        if (!is_err(t) && t->kind != T_BOOL)
            ps_diags_add(ck->diags, d->e_where->loc, "a where-clause must be a boolean, not %s",
                         ps_type_describe(prog, t));
        iv->e_where = d->e_where;
        find_key(iv->e_where, iv->e, iv->s, &iv->end_key, &iv->start_key);
    }
    check_metrics(ck, iv, d->metrics, d->nmetric);
    /* Declared even when a metric has errors, so that later uses of the
     * type do not add "undeclared" messages to the real one. */
    put_ivtype(ck, iv, false);
    return ck->diags->n == before ? 0 : -1;
}

static ps_expr *mk(ps_program *prog, ps_expr_kind kind, ps_loc loc, const ps_type *t)
{
    ps_expr *e = PS_NEW(&prog->arena, ps_expr);
    e->kind = (uint8_t)kind;
    e->loc = loc;
    e->type = t;
    return e;
}

/* thread(b) */
static ps_expr *thread_of(ps_program *prog, ps_binder *b, ps_loc loc)
{
    ps_expr *v = mk(prog, X_VAR, loc, b->type);
    v->var = b;
    ps_expr *call = mk(prog, X_BUILTIN, loc, &ps_t_num);
    call->op = B_THREAD;
    call->call.args = PS_NEWN(&prog->arena, ps_expr *, 1);
    call->call.args[0] = v;
    call->call.nargs = 1;
    return call;
}

/* proc p(a1, ..., an) [returns r]  declares call@p, ret@p and
 * nested interval intv@p = s: call@p, e: ret@p where thread(s) = thread(e). */
static int check_proc(ps_checker *ck, ps_item *it)
{
    ps_program *prog = ck->prog;
    const char *p = it->proc.name;
    const char *call = ps_arena_printf(&prog->arena, "call@%s", p);
    const char *ret = ps_arena_printf(&prog->arena, "ret@%s", p);
    const char *intv = ps_arena_printf(&prog->arena, "intv@%s", p);
    if (!declare_ok(ck, call, it->loc) || !declare_ok(ck, ret, it->loc) || !declare_ok(ck, intv, it->loc))
        return -1;
    if (!attrs_unique(ck, it->proc.args, it->proc.nargs, it->loc))
        return -1;
    const char **rattrs = PS_NEWN(&prog->arena, const char *, 2);
    rattrs[0] = it->proc.ret;
    rattrs[1] = "exact";
    if (it->proc.ret && strcmp(it->proc.ret, "exact") == 0) {
        ps_diags_add(ck->diags, it->loc, "the result of a proc cannot be called 'exact'");
        return -1;
    }
    ps_evtype *ce = declare_event(ck, call, it->proc.args, it->proc.nargs, true, EVO_CALL, it->loc, true);
    ps_evtype *re = declare_event(ck, ret, rattrs, 2, true, EVO_RET, it->loc, true);
    ps_ivtype *iv = new_ivtype(prog, intv, it->loc);
    iv->nested = true;
    iv->scope = ck->scope;
    iv->start_kind = IVS_EVENT;
    iv->end_kind = IVE_EVENT;
    iv->s_type = ce;
    iv->e_type = re;
    iv->s = new_binder(prog, "s", BIND_START, event_of(prog, ce));
    iv->s->iv = iv;
    iv->e = new_binder(prog, "e", BIND_END, event_of(prog, re));
    iv->e->iv = iv;
    ps_expr *eq = mk(prog, X_BINARY, it->loc, &ps_t_bool);
    eq->op = PV_OP_EQ;
    eq->bin.a = thread_of(prog, iv->s, it->loc);
    eq->bin.b = thread_of(prog, iv->e, it->loc);
    iv->e_where = eq;
    iv->start_key = eq->bin.a;
    iv->end_key = eq->bin.b;
    put_ivtype(ck, iv, true);
    return 0;
}

static int check_import(ps_checker *ck, ps_item *it)
{
    ps_program *prog = ck->prog;
    const char *name = it->import.name;
    if (ps_scope_get(ck->scope, name)) {
        ps_diags_add(ck->diags, it->loc, "'%s' is already declared in this specification", name);
        return -1;
    }
    if (!ck->import) {
        ps_diags_add(ck->diags, it->loc, "imports are not available here");
        return -1;
    }
    ps_scope *sc = ck->import(ck->import_ctx, prog, name, it->loc, ck->diags);
    if (!sc)
        return -1;
    ps_symbol *s = ps_scope_put(prog, ck->scope, name);
    s->kind = SYM_SPEC;
    s->spec = sc;
    /* Procedure types are never qualified: bring them in directly, the last
     * import winning (A.4). */
    for (uint32_t i = 0; i < sc->cap; i++) {
        ps_symbol *t = &sc->slots[i];
        if (!t->name || !t->from_proc)
            continue;
        ps_symbol *mine = ps_scope_get(ck->scope, t->name);
        if (mine && !(mine->from_proc && mine->imported))
            continue;   /* a local proc declaration wins */
        ps_symbol *n = ps_scope_put(prog, ck->scope, t->name);
        *n = *t;
        n->imported = true;
    }
    return 0;
}

/* The constant named in `var`/`cor`. psolve binds it only while it is an
 * unknown; once psolve has filled it in, the declaration must still check
 * (psolve's output is meant for pcheck as it is), so any number will do. */
static ps_const *resolve_unknown(ps_checker *ck, const char *name, ps_loc loc)
{
    ps_symbol *s = ps_scope_get(ck->scope, name);
    if (!s || s->kind != SYM_CONST || s->cst->type->kind != T_NUM) {
        ps_diags_add(ck->diags, loc, "'%s' must be an unknown (declared with 'def %s = ?')", name, name);
        return NULL;
    }
    return s->cst;
}

static int check_solve(ps_checker *ck, ps_item *it, ps_stmt *st)
{
    ps_program *prog = ck->prog;
    ps_solve *sv = it->solve;
    uint32_t before = ck->diags->n;
    const env *en = NULL;
    env bind;
    if (sv->data) {
        ps_agg *a = sv->range;
        a->place = AGG_TOP;
        const ps_type *vt = NULL;
        if (a->domain) {
            const ps_type *mt = check_root(ck, a->domain, PL_TOP, NULL, NULL, NULL);
            if (!is_err(mt) && mt->kind != T_MAP)
                ps_diags_add(ck->diags, a->domain->loc, "'in domain(...)' needs a mapping, not %s",
                             ps_type_describe(prog, mt));
            vt = &ps_t_num;
        } else {
            vt = range_type(ck, a);
            if (!vt) {
                ps_diags_add(ck->diags, a->range_loc, "undeclared event or interval type '%s'", a->range_name);
                return -1;
            }
        }
        a->var->type = vt;
        a->var->slot = prog->nslots++;
        bind.up = NULL;
        bind.b = a->var;
        bind.barrier = false;
        en = &bind;
        if (a->where) {
            const ps_type *wt = check_root(ck, a->where, PL_TOP, NULL, en, &a->depth);
            if (!is_err(wt) && wt->kind != T_BOOL)
                ps_diags_add(ck->diags, a->where->loc, "a where-clause must be a boolean, not %s",
                             ps_type_describe(prog, wt));
        }
    }
    ps_expr *eq = sv->eqn;
    const ps_type *t = check_root(ck, eq, PL_TOP, NULL, en, NULL);
    if (!is_err(t) && !(eq->kind == X_BINARY && eq->op == PV_OP_EQ))
        ps_diags_add(ck->diags, eq->loc, "a solve declaration needs an equation 'a = b'");
    if (sv->var_name)
        sv->var_c = resolve_unknown(ck, sv->var_name, sv->var_loc);
    if (sv->cor_name)
        sv->cor_c = resolve_unknown(ck, sv->cor_name, sv->cor_loc);
    st->solve = sv;
    return ck->diags->n == before ? 0 : -1;
}

static void add_stmt(ps_checker *ck, ps_stmt *st)
{
    if (!ck->is_main)
        return;
    st->id = ck->prog->stmts.n;
    PS_VEC_PUSH(&ck->prog->arena, ck->prog->stmts, st);
}

int ps_check_item(ps_checker *ck, ps_item *it)
{
    ps_program *prog = ck->prog;
    switch (it->kind) {
    case IT_IMPORT: return check_import(ck, it);
    case IT_DEF: return check_def(ck, it);
    case IT_EVENT: return check_event(ck, it);
    case IT_INTERVAL: return check_interval(ck, it);
    case IT_PROC: return check_proc(ck, it);
    case IT_ASSERT:
    case IT_PRINT:
    case IT_EXPR: {
        uint32_t before = ck->diags->n;
        const ps_type *t = check_root(ck, it->assert.expr, PL_TOP, NULL, NULL, NULL);
        if (it->kind == IT_ASSERT && !is_err(t) && t->kind != T_BOOL)
            ps_diags_add(ck->diags, it->assert.expr->loc, "an assertion must be a boolean, not %s",
                         ps_type_describe(prog, t));
        if (ck->diags->n != before)
            return -1;
        if (it->kind == IT_EXPR)
            return 0;
        ps_stmt *st = PS_NEW(&prog->arena, ps_stmt);
        st->kind = it->kind == IT_ASSERT ? ST_ASSERT : ST_PRINT;
        st->loc = it->loc;
        st->label = it->assert.label;
        st->expr = it->assert.expr;
        add_stmt(ck, st);
        return 0;
    }
    case IT_SOLVE: {
        ps_stmt *st = PS_NEW(&prog->arena, ps_stmt);
        st->kind = ST_SOLVE;
        st->loc = it->loc;
        if (check_solve(ck, it, st) < 0)
            return -1;
        add_stmt(ck, st);
        return 0;
    }
    case IT_COMPENSATE:
        ck->scope->compensate = true;   /* for every interval type the spec declares, before or after */
        return 0;
    case IT_ECHO:
    case IT_HELP:
        return 0;
    }
    return 0;
}

/* ts(b) or timestamp(b) */
static bool is_ts_of(const ps_expr *e, const ps_binder *b)
{
    return e->kind == X_BUILTIN && (e->op == B_TIMESTAMP || e->op == B_TS) && e->call.nargs == 1 &&
           e->call.args[0]->kind == X_VAR && e->call.args[0]->var == b;
}

bool ps_metric_is_duration(const ps_ivtype *t, const ps_expr *e)
{
    return e && e->kind == X_BINARY && e->op == PV_OP_SUB && is_ts_of(e->bin.a, t->e) && is_ts_of(e->bin.b, t->s);
}
