/* check.h — the PSpec checker (private).
 *
 * Processes parsed items in order (declare before use): resolves names,
 * infers and checks static types, enforces the scope rules of appendix A
 * (no reference to outer aggregate variables from a log aggregate, no `e`
 * in metric aggregates, no nested aggregates in metrics, no aggregates in
 * where-clauses, constants used in metrics must not depend on the log, ...)
 * and computes what the engine needs: aggregate placement and depth, binder
 * slots, and hashable keys in end-event and metric-aggregate where-clauses.
 * Type errors are found before any log is read.
 */
#ifndef PSPEC_CHECK_H
#define PSPEC_CHECK_H

#include "parse.h"
#include "scope.h"

/* Collected diagnostics (heap). */
typedef struct ps_diags {
    ps_diag *v;
    uint32_t n, cap;
} ps_diags;

void ps_diags_add(ps_diags *d, ps_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void ps_diags_free(ps_diags *d);

/* Loads an imported specification `name` (searching the import path) into
 * prog and returns its scope, or NULL after adding a diagnostic at `loc`. */
typedef ps_scope *(*ps_import_fn)(void *ctx, ps_program *prog, const char *name, ps_loc loc,
                                  ps_diags *diags);

typedef struct ps_checker {
    ps_program *prog;
    ps_scope *scope;            /* the spec whose items are being checked */
    bool is_main;               /* record asserts/prints/solves in prog->stmts */
    ps_diags *diags;
    ps_import_fn import;
    void *import_ctx;
} ps_checker;

/* Create the program-wide predeclared event types (logstart@, logend@, gap@);
 * call once per program before checking anything. */
void ps_check_init_program(ps_program *prog);

/* Check one item. Returns 0, or -1 after adding diagnostics. An IT_EXPR
 * item is typed in the global scope (peval evaluates it afterwards). */
int ps_check_item(ps_checker *ck, ps_item *it);

/* A human-readable type name ("number", "mapping of triple", "interval Read"). */
const char *ps_type_describe(ps_program *prog, const ps_type *t);

/* Is metric expression e of interval type t a duration metric, the ones
 * perturbation compensation adjusts: exactly ts(e) - ts(s) of t's own end
 * and start binders (either spelling of ts; parentheses leave no trace)? */
bool ps_metric_is_duration(const ps_ivtype *t, const ps_expr *e);

/* The predeclared event types. */
ps_evtype *ps_logstart_type(const ps_program *prog);
ps_evtype *ps_logend_type(const ps_program *prog);
ps_evtype *ps_gap_type(const ps_program *prog);

#endif
