/* arena.h — a region allocator: many small allocations, freed all at once.
 * A specification's AST, types and names live in one arena (STYLE.md). */
#ifndef PSPEC_ARENA_H
#define PSPEC_ARENA_H

#include <stddef.h>

typedef struct ps_arena_chunk ps_arena_chunk;

typedef struct ps_arena {
    ps_arena_chunk *chunks;   /* newest first */
    char *next;               /* free space in the newest chunk */
    size_t left;              /* bytes left there */
} ps_arena;

/* Zeroed, 16-byte aligned memory that lives until ps_arena_free. */
void *ps_arena_alloc(ps_arena *a, size_t n);
char *ps_arena_strndup(ps_arena *a, const char *s, size_t n);
char *ps_arena_strdup(ps_arena *a, const char *s);
char *ps_arena_printf(ps_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ps_arena_free(ps_arena *a);   /* frees everything; the arena can be reused */

#define PS_NEW(arena, type) ((type *)ps_arena_alloc((arena), sizeof(type)))
#define PS_NEWN(arena, type, n) ((type *)ps_arena_alloc((arena), sizeof(type) * (size_t)(n)))

#endif
