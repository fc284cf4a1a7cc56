/* held.h — text held back until it may be printed: pcheck's offender lines
 * of one assertion, printed after the assertion's verdict at the end of
 * the log. */
#ifndef PCHECK_HELD_H
#define PCHECK_HELD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct held_chunk held_chunk;

/* Lines back to back, each ending in '\n', in chunks: the first of
 * HELD_FIRST bytes, then of HELD_CHUNK bytes. Appending never copies what
 * is held already (a growing buffer would copy it again at every doubling),
 * and each large chunk is asked to be one huge page (one page fault for
 * 2 MiB instead of 512). A zeroed held is empty. */
typedef struct held {
    held_chunk *head, *tail;
} held;

#define HELD_FIRST ((size_t)64 << 10)
#define HELD_CHUNK ((size_t)2 << 20)

/* Append s[0..len) and a '\n'; false when out of memory (nothing kept). */
bool held_add(held *h, const char *s, size_t len);
/* Write everything held to f, in order, and empty h. */
void held_flush(held *h, FILE *f);
/* Empty h without writing. */
void held_free(held *h);

#endif
