/* arena.c — region allocator. */
#include "arena.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

struct ps_arena_chunk {
    ps_arena_chunk *next;
    size_t size;
    _Alignas(16) char data[];
};

/* Chunks start small and double up to CHUNK_MAX: a stream's compiled
 * expressions take a few hundred bytes, a large spec many chunks. */
enum { CHUNK_FIRST = 1024, CHUNK_MAX = 16 * 1024 };

void *ps_arena_alloc(ps_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n > a->left) {
        size_t size = a->chunks ? a->chunks->size * 2 : CHUNK_FIRST;
        if (size > CHUNK_MAX)
            size = CHUNK_MAX;
        if (size < n)
            size = n;
        ps_arena_chunk *c = ps_malloc(sizeof *c + size);
        c->size = size;
        c->next = a->chunks;
        a->chunks = c;
        a->next = c->data;
        a->left = size;
    }
    void *p = a->next;
    a->next += n;
    a->left -= n;
    memset(p, 0, n);
    return p;
}

char *ps_arena_strndup(ps_arena *a, const char *s, size_t n)
{
    char *p = ps_arena_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *ps_arena_strdup(ps_arena *a, const char *s)
{
    return ps_arena_strndup(a, s, strlen(s));
}

char *ps_arena_printf(ps_arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *tmp = ps_vasprintf(fmt, ap);
    va_end(ap);
    char *p = ps_arena_strdup(a, tmp);
    free(tmp);
    return p;
}

void ps_arena_free(ps_arena *a)
{
    ps_arena_chunk *c = a->chunks;
    while (c) {
        ps_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->chunks = NULL;
    a->next = NULL;
    a->left = 0;
}
