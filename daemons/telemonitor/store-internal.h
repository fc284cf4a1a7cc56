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

#endif
