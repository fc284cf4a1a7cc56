/* ast.h — a parsed and checked PSpec program (private).
 *
 * The parser builds these structures with names unresolved (X_NAME,
 * X_FIELD, X_CALL); the checker resolves them in place, assigns static types,
 * enforces the scope rules and computes what the engine needs (aggregate
 * depths, binder slots, end-event keys). Everything lives in the program's
 * arena and is freed at once.
 */
#ifndef PSPEC_AST_H
#define PSPEC_AST_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "value.h"

typedef struct ps_program ps_program;
typedef struct ps_scope ps_scope;
typedef struct ps_evtype ps_evtype;
typedef struct ps_ivtype ps_ivtype;
typedef struct ps_const ps_const;
typedef struct ps_expr ps_expr;
typedef struct ps_agg ps_agg;
typedef struct ps_binder ps_binder;

/* A place in a source file. */
typedef struct ps_loc {
    uint32_t file;          /* index into program->files */
    uint32_t line, col;     /* 1-based */
} ps_loc;

/* ---- static types ------------------------------------------------------------ */

typedef enum ps_type_kind {
    T_ERROR = 0,    /* an ill-typed expression: suppresses follow-on messages */
    T_NUM,
    T_BOOL,
    T_STR,
    T_TRIPLE,
    T_MAP,          /* mapping from numbers to `elem` */
    T_EVENT,        /* an event of type `ev` */
    T_INTERVAL,     /* an interval of type `iv` */
} ps_type_kind;

typedef struct ps_type {
    ps_type_kind kind;
    const struct ps_type *elem;     /* T_MAP: range type */
    const ps_evtype *ev;            /* T_EVENT */
    const ps_ivtype *iv;            /* T_INTERVAL */
} ps_type;

extern const ps_type ps_t_error, ps_t_num, ps_t_bool, ps_t_str, ps_t_triple;

/* ---- expressions -------------------------------------------------------------- */

typedef enum ps_expr_kind {
    X_NUM,          /* numeric literal: num */
    X_TIMELIT,      /* literal with a time unit: num * unit_ns nanoseconds (unit_ns 0: cycles) */
    X_BOOL,
    X_STR,
    X_NAME,         /* parser: an identifier, resolved by the checker */
    X_CONST,        /* reference to a def (cst) */
    X_VAR,          /* reference to a binder: s, e, or an aggregate's variable */
    X_FIELD,        /* parser: obj.name; becomes X_ATTR, X_METRIC, X_PART or a qualified X_CONST */
    X_ATTR,         /* event attribute `index` of obj */
    X_METRIC,       /* interval metric `index` of obj */
    X_PART,         /* triple component: op is 'v', 'p' or 'm' */
    X_CALL,         /* parser: fn(args); becomes X_BUILTIN or X_APPLY */
    X_BUILTIN,      /* built-in function `op` (ps_builtin) applied to args */
    X_APPLY,        /* mapping application fn(args[0]) */
    X_NEG,          /* -a */
    X_NOT,          /* !a */
    X_BINARY,       /* a op b, op a pv_binop */
    X_CHAIN,        /* a op1 b op2 c ...: relations, items[n], ops[n-1] */
    X_TRIPLE,       /* [items0, items1, items2] */
    X_MAPONE,       /* a -> b */
    X_MAPLIST,      /* (items0, items1, ...): single-element mappings */
    X_IF,           /* a ? b */
    X_ELSE,         /* a ~ b */
    X_AGG,          /* aggregate expression */
} ps_expr_kind;

/* Built-in functions (Figure 11, plus `mapped`, `ts` as a spelling of
 * `timestamp`, and `elapsed` on two events). */
#define PS_BUILTINS(X)              \
    X(MIN, "min", 2, 2)             \
    X(MAX, "max", 2, 2)             \
    X(POWER, "power", 2, 2)         \
    X(LOG, "log", 2, 2)             \
    X(ELAPSED, "elapsed", 1, 2)     \
    X(ABS, "abs", 1, 1)             \
    X(TRUNC, "trunc", 1, 1)         \
    X(TIMESTAMP, "timestamp", 1, 1) \
    X(TS, "ts", 1, 1)               \
    X(THREAD, "thread", 1, 1)       \
    X(DEFINED, "defined", 1, 1)     \
    X(MAPPED, "mapped", 2, 2)

typedef enum ps_builtin {
#define X(name, spelling, minargs, maxargs) B_##name,
    PS_BUILTINS(X)
#undef X
    B__COUNT
} ps_builtin;

struct ps_expr {
    uint8_t kind;               /* ps_expr_kind */
    uint8_t op;                 /* pv_binop, ps_builtin, or 'v'/'p'/'m' */
    bool log_dependent;         /* checker: contains a log aggregate (directly or via a def) */
    uint16_t depth;             /* parser: height of this subtree (bounded: see parse.c) */
    ps_loc loc;
    const ps_type *type;        /* checker: static type */
    union {
        double num;                                     /* X_NUM */
        struct { double num, unit_ns; } time;           /* X_TIMELIT */
        bool b;                                         /* X_BOOL */
        const char *str;                                /* X_STR (decoded) */
        const char *name;                               /* X_NAME */
        ps_const *cst;                                  /* X_CONST */
        ps_binder *var;                                 /* X_VAR */
        struct { ps_expr *obj; const char *name; uint32_t index; } field; /* X_FIELD/ATTR/METRIC/PART */
        struct { ps_expr *fn; ps_expr **args; uint32_t nargs; } call;     /* X_CALL/BUILTIN/APPLY */
        struct { ps_expr *a, *b; } bin;                 /* X_BINARY, X_MAPONE, X_IF, X_ELSE, X_NEG(a), X_NOT(a) */
        struct { ps_expr **items; uint8_t *ops; uint32_t n; } list; /* X_CHAIN, X_TRIPLE, X_MAPLIST */
        ps_agg *agg;                                    /* X_AGG */
    };
};

/* A name bound by an interval declaration (s, e) or an aggregate. Each binder
 * has its own slot in the evaluator's slot array. */
typedef enum ps_binder_kind { BIND_START, BIND_END, BIND_AGG } ps_binder_kind;

struct ps_binder {
    const char *name;
    ps_binder_kind kind;
    uint32_t slot;              /* index into the evaluator's slots */
    const ps_type *type;
    ps_agg *agg;                /* BIND_AGG: the aggregate that binds it */
    ps_ivtype *iv;              /* BIND_START/END: the interval type that binds it */
};

/* Where an aggregate expression sits, which decides how it is evaluated. */
typedef enum ps_agg_place {
    AGG_TOP,        /* log aggregate in a def/assert/print/solve: over the whole log */
    AGG_METRIC,     /* log aggregate in a metric: over the events/intervals inside an interval */
    AGG_DOMAIN,     /* over the domain of a mapping: evaluated directly */
} ps_agg_place;

struct ps_agg {
    pv_aggop op;
    double quant;               /* PV_AGG_QUANT: N of {pN ...}, a percentage */
    const char *quant_text;     /* PV_AGG_QUANT: N as written ("99.9"), for messages */
    ps_agg_place place;
    ps_loc loc;
    ps_binder *var;             /* the aggregate's variable */
    const char *range_name;     /* parser: the range's type name ("T", "S.T", "intv@p") */
    ps_loc range_loc;           /* parser: where that name is */
    ps_evtype *ev;              /* range: events of this type, or */
    ps_ivtype *iv;              /*        intervals of this type, or */
    ps_expr *domain;            /*        the domain of this mapping */
    ps_expr *where;             /* NULL: true */
    ps_expr *value;             /* NULL for count */
    int map_depth;              /* mapping levels of the value's type (pv_acc_new) */
    uint32_t id;                /* AGG_TOP: index in program->topaggs; AGG_METRIC: index in iv->aggs */
    uint32_t depth;             /* AGG_TOP: 1 + deepest log aggregate/def it depends on */
    ps_ivtype *owner;           /* AGG_METRIC: the interval type whose metric contains it */
    /* AGG_METRIC only: when `where` has a conjunct elem_key = start_key, with
     * elem_key depending only on the variable and start_key only on s, the
     * engine indexes open intervals by start_key. */
    ps_expr *elem_key, *start_key;
};

/* A new accumulator for aggregate a (its operator, its quantile, its
 * mapping depth). */
static inline pv_acc *ps_agg_acc_new(const ps_agg *a)
{
    return a->op == PV_AGG_QUANT ? pv_acc_new_quantile(a->quant / 100, a->map_depth)
                                 : pv_acc_new(a->op, a->map_depth);
}

/* ---- declarations --------------------------------------------------------------- */

/* Where an event type comes from. */
typedef enum ps_ev_origin {
    EVO_USER,       /* event / timed event declaration */
    EVO_CALL,       /* call@p from proc p */
    EVO_RET,        /* ret@p from proc p */
    EVO_LOGSTART,   /* logstart@: fabricated before the first event */
    EVO_LOGEND,     /* logend@: fabricated after the last event */
    EVO_GAP,        /* gap@(n): fabricated where the transport dropped records */
    EVO_VSTART,     /* start$I: virtual time event of interval type I */
    EVO_VEND,       /* end$I: virtual time event of interval type I */
} ps_ev_origin;

struct ps_evtype {
    const char *name;           /* FIRST MEMBER (pv_type_name): as written, e.g. "call@f" */
    const char *logname;        /* name matched against log records */
    const char **attrs;         /* attribute names (NULL for '?') */
    uint32_t nattr;
    bool timed;
    ps_ev_origin origin;
    ps_ivtype *owner;           /* EVO_VSTART/EVO_VEND: its interval type */
    uint32_t id;                /* index in program->evtypes */
    ps_loc loc;
};

typedef struct ps_metric {
    const char *name;
    ps_expr *expr;
    ps_loc loc;
} ps_metric;

typedef enum ps_iv_start { IVS_EVENT, IVS_EVERY } ps_iv_start;
typedef enum ps_iv_end { IVE_EVENT, IVE_AFTER } ps_iv_end;

struct ps_ivtype {
    const char *name;           /* FIRST MEMBER (pv_type_name) */
    uint32_t id;                /* index in program->ivtypes */
    bool nested;
    ps_ivtype *parent;          /* subtype of, or NULL */
    ps_loc loc;
    ps_iv_start start_kind;
    ps_binder *s;               /* start event binder */
    ps_evtype *s_type;          /* IVS_EVENT: start event type; IVS_EVERY: start$I */
    ps_expr *s_where;           /* may be NULL */
    ps_expr *from, *every;      /* IVS_EVERY (from may be NULL) */
    ps_iv_end end_kind;
    ps_binder *e;               /* end event binder */
    ps_evtype *e_type;          /* IVE_EVENT: end event type; IVE_AFTER: end$I */
    ps_expr *e_where;           /* may be NULL */
    ps_expr *after;             /* IVE_AFTER */
    ps_expr *within;            /* extension: open longer than this is overdue (NULL: no bound) */
    const ps_scope *scope;      /* the spec that declares it (its `compensate;` applies) */
    ps_metric *metrics;         /* inherited ones first */
    uint32_t nmetric;
    ps_agg **aggs;              /* log aggregates in the metrics */
    uint32_t naggs;
    /* When e_where has a conjunct end_key = start_key (numbers), with end_key
     * depending only on e and start_key only on s, open intervals are found
     * by hash lookup instead of a scan. */
    ps_expr *end_key, *start_key;
};

struct ps_const {
    const char *name;           /* qualified name, e.g. "fsread.Mean8k" */
    const char *local;          /* name in its own spec */
    ps_expr *expr;              /* NULL for an unknown */
    bool unknown;               /* def X = ? */
    const ps_type *type;
    uint32_t id;                /* index in program->consts: value slot */
    uint32_t depth;             /* 0: no log aggregate; else deepest aggregate it needs */
    ps_loc loc;
    ps_loc qloc;                /* unknowns: where the '?' is (psolve replaces it) */
};

typedef enum ps_stmt_kind { ST_ASSERT, ST_PRINT, ST_SOLVE } ps_stmt_kind;

/* solve EQN  |  solve data x : T [where P] : EQN [, var V [, cor C]]
 *            |  solve data x in domain(M) [where P] : EQN ... */
typedef struct ps_solve {
    bool data;                  /* regression form */
    ps_agg *range;              /* data form: variable, range and where (op unused) */
    ps_expr *eqn;               /* an equation: X_CHAIN with one '=' */
    ps_const *var_c, *cor_c;    /* unknowns bound to variance / correlation, or NULL */
    const char *var_name, *cor_name;  /* parser: their names as written */
    ps_loc var_loc, cor_loc;
} ps_solve;

typedef struct ps_stmt {
    ps_stmt_kind kind;
    ps_loc loc;
    const char *label;          /* assert "label": ..., or NULL */
    ps_expr *expr;              /* assert / print */
    ps_solve *solve;            /* solve */
    uint32_t id;                /* index in program->stmts */
} ps_stmt;

/* A source file (or peval input chunk), kept for messages. */
typedef struct ps_file {
    const char *path;           /* as shown in messages */
    const char *text;           /* NUL-terminated contents */
    const char *specname;       /* perfspec name, once parsed */
} ps_file;

/* A dynamic array of pointers in the arena. */
#define PS_VEC(type) struct { type *v; uint32_t n, cap; }
#define PS_VEC_PUSH(arena, vec, x)                                                    \
    do {                                                                              \
        if ((vec).n == (vec).cap) {                                                   \
            uint32_t ncap_ = (vec).cap ? (vec).cap * 2 : 8;                           \
            void *nv_ = ps_arena_alloc((arena), sizeof(*(vec).v) * ncap_);           \
            if ((vec).n)                                                              \
                __builtin_memcpy(nv_, (vec).v, sizeof(*(vec).v) * (vec).n);           \
            (vec).v = nv_;                                                            \
            (vec).cap = ncap_;                                                        \
        }                                                                             \
        (vec).v[(vec).n++] = (x);                                                     \
    } while (0)

/* Everything known about a specification and what it imports. */
struct ps_program {
    ps_arena arena;
    PS_VEC(ps_file *) files;
    PS_VEC(ps_evtype *) evtypes;
    PS_VEC(ps_ivtype *) ivtypes;
    PS_VEC(ps_const *) consts;
    PS_VEC(ps_stmt *) stmts;       /* the main spec's asserts, prints, solves, in order */
    PS_VEC(ps_agg *) topaggs;      /* every AGG_TOP aggregate */
    PS_VEC(ps_scope *) scopes;     /* one per spec file */
    ps_scope *main;                /* the main spec's scope */
    const char *name;              /* the main spec's perfspec name */
    uint32_t nslots;               /* binders allocated so far */
    char **search_path;            /* import directories (heap, NULL-terminated) */
};

/* Call fn on each direct subexpression of e (an aggregate's domain, where and
 * value included; a constant's definition not) until fn returns true;
 * returns whether it did. The one place that knows every node's children. */
bool ps_expr_any_child(const ps_expr *e, bool (*fn)(const ps_expr *child, void *ctx), void *ctx);

#endif
