/* The store's connection, for the store's own modules (store.c, which
 * writes, and store_read.c, which answers the typed reads of
 * store_read.h). Only store*.c include this: SQL against the schema lives
 * there and nowhere else. */
#ifndef TELEMON_STORE_INTERNAL_H
#define TELEMON_STORE_INTERNAL_H

#include "db.h"
#include "store.h"

/* The store's database connection (db.h). */
struct db *store_conn(struct store *st);

/* While degraded, the row of instance `id` as it is held in memory, not
 * yet stored: its values in the order of INST_PUT's parameters (*n of
 * them), or NULL when none is held. */
const struct bl_value *store_held_instance(const struct store *st, uint64_t id, unsigned *n);

/* While degraded, call cb(arg, id, v, n) for every instance row held in
 * memory (values as store_held_instance), oldest first. */
void store_held_instances(const struct store *st,
			  void (*cb)(void *arg, uint64_t id, const struct bl_value *v, unsigned n),
			  void *arg);

/* While degraded, the failures of instance `id` held in memory
 * (inconclusive ones not counted). */
int64_t store_held_failures(const struct store *st, uint64_t id);

#endif
