/* parse.h — the PSpec parser (private).
 *
 * Recursive descent over the grammar of appendix A.10 of the CMon report.
 * The parser only builds structure: names stay unresolved until the checker
 * (check.c) processes the items in order. It stops at the first syntax
 * error, which it reports with its place.
 */
#ifndef PSPEC_PARSE_H
#define PSPEC_PARSE_H

#include "ast.h"

/* A diagnostic: a message and a place. */
typedef struct ps_diag {
    ps_loc loc;
    char *msg;                  /* heap */
} ps_diag;

typedef enum ps_item_kind {
    IT_IMPORT, IT_DEF, IT_EVENT, IT_INTERVAL, IT_PROC, IT_ASSERT, IT_PRINT, IT_SOLVE,
    IT_COMPENSATE,  /* extension: `compensate;` (perturbation compensation of the spec's intervals) */
    IT_EXPR,        /* peval: a bare expression to evaluate and print */
    IT_ECHO,        /* peval: echo "text" */
    IT_HELP,        /* peval: help */
} ps_item_kind;

/* A reference to a type by name, as written. */
typedef struct ps_tname {
    const char *name;           /* "T", "S.T" or "intv@p" */
    ps_loc loc;
} ps_tname;

typedef struct ps_item_interval {
    const char *name;
    bool nested;
    ps_tname parent;            /* subtype form: the parent type (name NULL otherwise) */
    ps_iv_start start_kind;
    const char *svar;           /* start variable name */
    ps_loc svar_loc;
    ps_tname stype;
    ps_expr *s_where, *from, *every;
    ps_iv_end end_kind;
    const char *evar;
    ps_loc evar_loc;
    ps_tname etype;
    ps_expr *e_where, *after;
    ps_expr *within;            /* extension: report an interval open longer (NULL: none) */
    ps_metric *metrics;
    uint32_t nmetric;
} ps_item_interval;

typedef struct ps_item {
    ps_item_kind kind;
    ps_loc loc;
    union {
        struct { const char *name; } import;
        struct { const char *name; ps_expr *expr; bool unknown; ps_loc qloc; } def;  /* qloc: the '?' */
        struct { const char *name; const char **attrs; uint32_t nattr; bool timed; } event;
        ps_item_interval interval;
        struct { const char *name; const char **args; uint32_t nargs; const char *ret; } proc;
        struct { const char *label; ps_expr *expr; } assert;   /* also IT_PRINT, IT_EXPR */
        ps_solve *solve;
        const char *echo;
    };
} ps_item;

typedef struct ps_items {
    ps_item **v;
    uint32_t n, cap;
    const char *specname;       /* perfspec name (spec files) */
} ps_items;

/* Parse a whole specification file `perfspec ID ... end ID` (file index
 * `file` of prog). Returns 0, or -1 with *diag filled. */
int ps_parse_spec(ps_program *prog, uint32_t file, ps_items *out, ps_diag *diag);

/* Parse peval input: a sequence of commands each ending in ';' — bare
 * expressions, def/event/timed event/interval/nested interval/proc/import,
 * assert, print, echo "...", help. Returns 0 or -1 with *diag. */
int ps_parse_commands(ps_program *prog, uint32_t file, ps_items *out, ps_diag *diag);

/* The time units: nanoseconds per unit ("cyc" is 0: one tick). Returns false
 * for other words. */
bool ps_time_unit(const char *word, size_t len, double *unit_ns);

#endif
