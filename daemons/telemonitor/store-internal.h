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

/* TEMPORARY: removed when JSON parsing leaves sqlite (json-report branch) */
#include <sqlite3.h>
/* An in-memory sqlite connection for its JSON functions only (whatever
 * engine the store is on); never for the schema. */
sqlite3 *store_json_db(struct store *st);

#endif
