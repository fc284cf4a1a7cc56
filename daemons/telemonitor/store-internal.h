/* The store's connection, for the store's own modules (store.c, which
 * writes, and store_read.c, which answers the typed reads of
 * store_read.h). Only store*.c include this: SQL against the schema lives
 * there and nowhere else. */
#ifndef TELEMON_STORE_INTERNAL_H
#define TELEMON_STORE_INTERNAL_H

#include <sqlite3.h>

#include "store.h"

/* The store's sqlite connection. */
sqlite3 *store_conn(struct store *st);

/* TEMPORARY: removed when JSON parsing leaves sqlite (json-report branch) */
/* A sqlite connection for the JSON functions only (json_each over text we
 * already hold: text.c render_metrics(), stats.c add_value(), metrics.c
 * report(), dashboard.c json_rows()); never for the schema. */
sqlite3 *store_json_db(struct store *st);

#endif
