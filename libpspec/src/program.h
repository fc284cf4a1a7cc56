/* program.h — the library object behind pspec.h (private). */
#ifndef PSPEC_PROGRAM_H
#define PSPEC_PROGRAM_H

#include "ast.h"
#include "check.h"
#include "logread.h"
#include "pspec/pspec.h"

struct pspec {
    ps_program prog;            /* everything loaded */
    ps_diags diags;             /* collected diagnostics */
    char *main_dir;             /* folder of the main spec: the default import path */
    log_prefetch_tuning prefetch;   /* ps_set_prefetch_tuning (tests), when prefetch_tuned */
    bool prefetch_tuned;
};

/* Tests only (pcheck takes it from PSPEC_PREFETCH_*): how pspec_check's
 * read-ahead thread hands over batches (copied; NULL: the defaults). */
void ps_set_prefetch_tuning(pspec *ps, const log_prefetch_tuning *t);

/* Add a source text to the program (copied); returns its file index. */
uint32_t ps_add_file(ps_program *prog, const char *path, const char *text, size_t len);
/* The import loader used by the checker (ctx is the pspec). */
ps_scope *ps_import_spec(void *ctx, ps_program *prog, const char *name, ps_loc loc, ps_diags *diags);
/* "FILE:LINE:COL: error: MESSAGE" (heap). */
char *ps_format_diag(const ps_program *prog, const ps_diag *d);

#endif
