/* fuzz_spec — the PSpec front end (lexer, parser, checker) on arbitrary text.
 * Any input must give either a checked program or diagnostics, never a
 * crash, hang or leak. Imports are looked up in a folder that does not exist. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "pspec/pspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pspec *ps = pspec_new();
    pspec_set_search_path(ps, "/nonexistent-fuzz-import-path");
    if (pspec_load_text(ps, "fuzz.pspec", (const char *)data, size) == 0) {
        (void)pspec_passes(ps);
        (void)pspec_uses_unknowns(ps);
    }
    free(pspec_diags_format(ps));
    pspec_free(ps);
    return 0;
}
