/* scope.c — a string-keyed symbol table with open addressing. */
#include "scope.h"

#include <string.h>

static uint32_t hash_str(const char *s)
{
    uint32_t h = 2166136261u;           /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

ps_scope *ps_scope_new(ps_program *prog, const char *specname, uint32_t file)
{
    ps_scope *sc = PS_NEW(&prog->arena, ps_scope);
    sc->specname = specname;
    sc->file = file;
    sc->cap = 64;
    sc->slots = PS_NEWN(&prog->arena, ps_symbol, sc->cap);
    PS_VEC_PUSH(&prog->arena, prog->scopes, sc);
    return sc;
}

static ps_symbol *find(const ps_scope *sc, const char *name)
{
    uint32_t i = hash_str(name) & (sc->cap - 1);
    for (;;) {
        ps_symbol *s = &sc->slots[i];
        if (!s->name || strcmp(s->name, name) == 0)
            return s;
        i = (i + 1) & (sc->cap - 1);
    }
}

ps_symbol *ps_scope_get(const ps_scope *sc, const char *name)
{
    ps_symbol *s = find(sc, name);
    return s->name ? s : NULL;
}

ps_symbol *ps_scope_put(ps_program *prog, ps_scope *sc, const char *name)
{
    if ((sc->count + 1) * 2 > sc->cap) {
        ps_symbol *old = sc->slots;
        uint32_t oldcap = sc->cap;
        sc->cap *= 2;
        sc->slots = PS_NEWN(&prog->arena, ps_symbol, sc->cap);
        for (uint32_t i = 0; i < oldcap; i++)
            if (old[i].name)
                *find(sc, old[i].name) = old[i];
    }
    ps_symbol *s = find(sc, name);
    if (!s->name)
        sc->count++;
    memset(s, 0, sizeof *s);
    s->name = name;
    return s;
}
