/* program.c — loading specifications: files, imports, diagnostics. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "lex.h"
#include "program.h"
#include "util.h"

enum { MAX_SPEC_BYTES = 16 * 1024 * 1024 };

pspec *pspec_new(void)
{
    pspec *ps = ps_calloc(1, sizeof *ps);
    ps_check_init_program(&ps->prog);
    return ps;
}

static void free_path(char **path)
{
    if (!path)
        return;
    for (char **p = path; *p; p++)
        free(*p);
    free(path);
}

void pspec_free(pspec *ps)
{
    if (!ps)
        return;
    ps_diags_free(&ps->diags);
    free(ps->main_dir);
    free_path(ps->prog.search_path);
    ps_arena_free(&ps->prog.arena);
    free(ps);
    pv_pools_trim();
}

void pspec_set_search_path(pspec *ps, const char *colon_separated)
{
    free_path(ps->prog.search_path);
    size_t n = 1;
    for (const char *p = colon_separated; *p; p++)
        n += *p == ':';
    char **path = ps_calloc(n + 1, sizeof *path);
    size_t i = 0;
    const char *s = colon_separated;
    for (;;) {
        const char *e = strchr(s, ':');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        path[i++] = len ? ps_strndup(s, len) : ps_strdup(".");
        if (!e)
            break;
        s = e + 1;
    }
    path[i] = NULL;
    ps->prog.search_path = path;
}

/* Read a whole file as a NUL-terminated string; NULL with errno set. */
static char *read_file(const char *path, size_t *len_out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        errno = EISDIR;
        return NULL;
    }
    ps_buf b = {0};
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            ps_buf_free(&b);
            errno = e;
            return NULL;
        }
        if (n == 0)
            break;
        if (b.len + (size_t)n > MAX_SPEC_BYTES) {
            close(fd);
            ps_buf_free(&b);
            errno = EFBIG;
            return NULL;
        }
        ps_buf_put(&b, chunk, (size_t)n);
    }
    close(fd);
    if (len_out)
        *len_out = b.len;
    return ps_buf_take(&b);
}

uint32_t ps_add_file(ps_program *prog, const char *path, const char *text, size_t len)
{
    ps_file *f = PS_NEW(&prog->arena, ps_file);
    f->path = ps_arena_strdup(&prog->arena, path);
    f->text = ps_arena_strndup(&prog->arena, text, len);
    uint32_t id = prog->files.n;
    PS_VEC_PUSH(&prog->arena, prog->files, f);
    return id;
}

/* Parse and check one spec file into its own scope. */
static ps_scope *load_spec(pspec *ps, const char *path, const char *text, size_t len, bool is_main,
                           const char *expect_name, ps_loc import_loc)
{
    ps_program *prog = &ps->prog;
    /* A NUL byte inside the text would silently end it early: say so. */
    const char *nul = memchr(text, '\0', len);
    if (nul) {
        uint32_t f = ps_add_file(prog, path, "", 0);
        ps_loc l = {f, 1, 1};
        ps_lex_position(text, (size_t)(nul - text), &l.line, &l.col);
        ps_diags_add(&ps->diags, l, "the file contains a NUL byte");
        return NULL;
    }
    uint32_t file = ps_add_file(prog, path, text, len);
    ps_items items = {0};
    ps_diag d = {0};
    if (ps_parse_spec(prog, file, &items, &d) < 0) {
        ps_diags_add(&ps->diags, d.loc, "%s", d.msg);
        free(d.msg);
        return NULL;
    }
    if (expect_name && strcmp(items.specname, expect_name) != 0) {
        ps_diags_add(&ps->diags, import_loc, "'%s' declares specification '%s', not '%s'", path, items.specname,
                     expect_name);
        return NULL;
    }
    ps_scope *sc = ps_scope_new(prog, items.specname, file);
    sc->loading = true;
    ps_checker ck = {.prog = prog, .scope = sc, .is_main = is_main, .diags = &ps->diags,
                     .import = ps_import_spec, .import_ctx = ps};
    for (uint32_t i = 0; i < items.n; i++)
        ps_check_item(&ck, items.v[i]);
    ps_symbol *clash = ps_scope_get(sc, items.specname);
    if (clash && clash->kind != SYM_SPEC) {
        ps_loc l = {file, 1, 1};
        ps_diags_add(&ps->diags, l, "the specification's name '%s' is also declared inside it", items.specname);
    }
    sc->loading = false;
    return sc;
}

ps_scope *ps_import_spec(void *ctx, ps_program *prog, const char *name, ps_loc loc, ps_diags *diags)
{
    pspec *ps = ctx;
    for (uint32_t i = 0; i < prog->scopes.n; i++) {
        ps_scope *sc = prog->scopes.v[i];
        if (strcmp(sc->specname, name) == 0) {
            if (sc->loading) {
                ps_diags_add(diags, loc, "import cycle: '%s' imports itself (directly or indirectly)", name);
                return NULL;
            }
            return sc;
        }
    }
    char **dirs = prog->search_path;
    char *fallback[2] = {ps->main_dir ? ps->main_dir : ".", NULL};
    if (!dirs)
        dirs = fallback;
    for (char **d = dirs; *d; d++) {
        char *path = ps_asprintf("%s/%s.pspec", *d, name);
        size_t len;
        char *text = read_file(path, &len);
        if (text) {
            uint32_t before = diags->n;
            ps_scope *sc = load_spec(ps, path, text, len, false, name, loc);
            free(text);
            free(path);
            if (!sc || diags->n != before) {
                if (diags->n == before)
                    ps_diags_add(diags, loc, "imported specification '%s' has errors", name);
                return NULL;
            }
            return sc;
        }
        free(path);
    }
    ps_buf where = {0};
    for (char **d = dirs; *d; d++)
        ps_buf_printf(&where, "%s%s", d == dirs ? "" : ":", *d);
    ps_diags_add(diags, loc, "cannot find '%s.pspec' in the import path %s", name, ps_buf_str(&where));
    ps_buf_free(&where);
    return NULL;
}

int pspec_load_file(pspec *ps, const char *path)
{
    size_t len;
    char *text = read_file(path, &len);
    if (!text)
        return -errno;
    int rc = pspec_load_text(ps, path, text, len);
    free(text);
    return rc;
}

int pspec_load_text(pspec *ps, const char *path, const char *text, size_t len)
{
    free(ps->main_dir);
    const char *slash = strrchr(path, '/');
    ps->main_dir = slash ? ps_strndup(path, (size_t)(slash - path) ? (size_t)(slash - path) : 1) : ps_strdup(".");
    uint32_t before = ps->diags.n;
    ps_loc none = {0, 0, 0};
    ps_scope *sc = load_spec(ps, path, text, len, true, NULL, none);
    if (!sc || ps->diags.n != before)
        return -EINVAL;
    ps->prog.main = sc;
    ps->prog.name = sc->specname;
    return 0;
}

size_t pspec_ndiags(const pspec *ps) { return ps->diags.n; }

pspec_diag pspec_diag_at(const pspec *ps, size_t i)
{
    const ps_diag *d = &ps->diags.v[i];
    pspec_diag r = {ps->prog.files.v[d->loc.file]->path, d->loc.line, d->loc.col, d->msg};
    return r;
}

char *ps_format_diag(const ps_program *prog, const ps_diag *d)
{
    const char *path = d->loc.file < prog->files.n ? prog->files.v[d->loc.file]->path : "?";
    if (d->loc.line == 0)
        return ps_asprintf("%s: error: %s", path, d->msg);
    return ps_asprintf("%s:%u:%u: error: %s", path, d->loc.line, d->loc.col, d->msg);
}

char *pspec_diags_format(const pspec *ps)
{
    ps_buf b = {0};
    for (uint32_t i = 0; i < ps->diags.n; i++) {
        char *line = ps_format_diag(&ps->prog, &ps->diags.v[i]);
        ps_buf_puts(&b, line);
        ps_buf_putc(&b, '\n');
        free(line);
    }
    return ps_buf_take(&b);
}

void pspec_clear_diags(pspec *ps)
{
    ps_diags_free(&ps->diags);
}
