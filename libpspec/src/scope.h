/* scope.h — the global scope of one specification file (private).
 * A name maps to a constant, an event type, an interval type or an imported
 * specification (for qualified names S.X). */
#ifndef PSPEC_SCOPE_H
#define PSPEC_SCOPE_H

#include "ast.h"

typedef enum ps_sym_kind { SYM_CONST, SYM_EVTYPE, SYM_IVTYPE, SYM_SPEC } ps_sym_kind;

typedef struct ps_symbol {
    const char *name;
    ps_sym_kind kind;
    bool from_proc;             /* declared by a proc statement (imports may replace it) */
    bool imported;              /* came in through an import (a local declaration may not reuse it) */
    union {
        ps_const *cst;
        ps_evtype *ev;
        ps_ivtype *iv;
        ps_scope *spec;
    };
} ps_symbol;

struct ps_scope {
    const char *specname;       /* perfspec name */
    uint32_t file;              /* its source file */
    ps_symbol *slots;           /* open addressing, name NULL = empty */
    uint32_t cap, count;
    bool loading;               /* import cycle detection */
    bool compensate;            /* extension: it says `compensate;` (its interval types' durations
                                   are compensated for the writer's cost per event) */
};

ps_scope *ps_scope_new(ps_program *prog, const char *specname, uint32_t file);
/* The symbol for `name`, or NULL. */
ps_symbol *ps_scope_get(const ps_scope *sc, const char *name);
/* Add or replace `name`; returns the slot to fill. */
ps_symbol *ps_scope_put(ps_program *prog, ps_scope *sc, const char *name);

#endif
