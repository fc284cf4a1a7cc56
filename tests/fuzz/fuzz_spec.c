/* fuzz_spec — the PSpec front end (lexer, parser, checker) on arbitrary text,
 * and psolve's linear-form analysis of every solve declaration of a spec that
 * checks. Any input must give either a checked program or diagnostics, never
 * a crash, hang or leak. Imports are looked up in a folder that does not
 * exist. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "program.h"
#include "pspec/pspec.h"
#include "solve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pspec *ps = pspec_new();
    pspec_set_search_path(ps, "/nonexistent-fuzz-import-path");
    if (pspec_load_text(ps, "fuzz.pspec", (const char *)data, size) == 0) {
        (void)pspec_passes(ps);
        (void)pspec_uses_unknowns(ps);
        ps_program *prog = &ps->prog;
        for (uint32_t i = 0; i < prog->stmts.n; i++) {
            if (prog->stmts.v[i]->kind != ST_SOLVE)
                continue;
            ps_linform lf;
            ps_diags d = {0};
            (void)ps_linear_form(prog, prog->stmts.v[i]->solve->eqn, NULL, &lf, &d);
            ps_diags_free(&d);
        }
    }
    free(pspec_diags_format(ps));
    pspec_free(ps);
    return 0;
}
