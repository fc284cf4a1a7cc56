/* fuzz_rcfile — the telemonitor's configuration parser (telemonrc, the
 * S-expressions of the report's appendix C.1 plus spec/mail/window/smtp) on
 * arbitrary text: a configuration or one clear error, never a crash, hang or
 * leak. The same text is also read as the service's classes.rc (classes and
 * (removed ...) tombstones), merged into an empty configuration and written
 * back. Specs are resolved in a folder that does not exist. The telemonitor
 * is a program, not a library, so its sources are compiled in here. */
#include <stddef.h>
#include <stdint.h>

#include "../../daemons/telemonitor/rcfile.c"
#include "../../daemons/telemonitor/window.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rc_config *cfg = NULL;
    char err[512];
    if (rc_parse((const char *)data, size, "fuzz.rc", "/nonexistent-fuzz-dir", &cfg, err, sizeof err) == 0) {
        struct rc_config *copy = rc_clone(cfg);
        for (size_t i = 0; i < cfg->nclasses; i++) {
            for (int p = 0; p < RC_NPROPS; p++) {
                if (rc_prop_is_bool((enum rc_prop)p))
                    (void)rc_flag(cfg, &cfg->classes[i], (enum rc_prop)p);
                else
                    (void)rc_text(cfg, &cfg->classes[i], (enum rc_prop)p);
            }
            (void)rc_check_class(cfg, &cfg->classes[i], err, sizeof err);
        }
        if (copy)
            free(rc_overlay_format(cfg, copy));     /* no difference: the header alone */
        rc_free(copy);
        rc_free(cfg);
    }
    struct rc_config *ov = NULL, *base = rc_new(NULL);
    if (base && parse_text((const char *)data, size, "classes.rc", NULL, true, &ov, err,
                           sizeof err) == 0) {
        struct rc_config *empty = rc_new(NULL);
        if (empty && rc_overlay_apply(base, ov, err, sizeof err) == 0)
            free(rc_overlay_format(empty, base));
        rc_free(empty);
        rc_free(ov);
    }
    rc_free(base);
    return 0;
}
