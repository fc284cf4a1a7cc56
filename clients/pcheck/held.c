/* held.c — text held back until it may be printed (see held.h). */
#include "held.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct held_chunk {
    held_chunk *next;
    size_t len, cap;    /* bytes used and room in data */
    char data[];
};

/* A chunk with room for at least `need` bytes. The first of a held is
 * HELD_FIRST bytes (most assertions hold a few lines, or none); the next
 * ones HELD_CHUNK bytes, aligned so that the kernel can back each with one
 * huge page; larger for a line that does not fit. */
static held_chunk *chunk_new(size_t need, bool first)
{
    size_t size = first ? HELD_FIRST : HELD_CHUNK;
    if (need > size - sizeof(held_chunk))
        size = need + sizeof(held_chunk);
    void *p = NULL;
    if (first) {
        if (!(p = malloc(size)))
            return NULL;
    } else if (posix_memalign(&p, HELD_CHUNK, size) != 0) {
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    if (!first && size % HELD_CHUNK == 0)
        (void)madvise(p, size, MADV_HUGEPAGE);   /* a hint: without it, small pages */
#endif
    held_chunk *c = p;
    c->next = NULL;
    c->len = 0;
    c->cap = size - sizeof(held_chunk);
    return c;
}

bool held_add(held *h, const char *s, size_t len)
{
    held_chunk *c = h->tail;
    if (!c || c->cap - c->len < len + 1) {
        if (!(c = chunk_new(len + 1, !c)))
            return false;
        if (h->tail)
            h->tail->next = c;
        else
            h->head = c;
        h->tail = c;
    }
    memcpy(c->data + c->len, s, len);
    c->data[c->len + len] = '\n';
    c->len += len + 1;
    return true;
}

void held_flush(held *h, FILE *f)
{
    for (held_chunk *c = h->head; c; c = c->next)
        fwrite(c->data, 1, c->len, f);
    held_free(h);
}

void held_free(held *h)
{
    for (held_chunk *c = h->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    h->head = h->tail = NULL;
}
