/* Alert hygiene: silences (failures matching them are stored, marked
 * silenced, and neither mailed nor alerted) and retention (rows older than
 * the defaults' `retention` are pruned in the background).
 *
 * Silences live in the store (store.h, table silences) and in memory, so
 * the checker's path never queries the database: a failure is matched
 * against at most HYG_SILENCES_MAX patterns. Retention runs on its own
 * timer, HYG_PRUNE_ROWS rows of each table per HYG_PRUNE_MS, in the
 * store's open batch, so the loop never waits for a long DELETE. */
#ifndef TELEMON_HYGIENE_H
#define TELEMON_HYGIENE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmon/names.h"
#include "telemonitor.h"

#define HYG_SILENCES_MAX 1000        /* active silences at once */
#define HYG_PATTERN_MAX 128          /* bytes in one matcher pattern */
#define HYG_COMMENT_MAX 500          /* bytes in a silence's or an ack's comment */
#define HYG_SILENCE_MAX_S (366.0 * 86400) /* longest silence */
#define HYG_PRUNE_MS 1000            /* retention: one small batch this often */
#define HYG_PRUNE_ROWS 500           /* ...of at most this many rows per table */

/* Load the active silences and start the retention timer. Needs the store. */
void hygiene_start(struct tmon *tm);

/* Stop the timer and forget the silences; accepts a tm without them. */
void hygiene_stop(struct tmon *tm);

/* The id of the first active silence matching a failure of `prog` on
 * `machine` of assertion `assertion` (NULL: unlabelled, matched as "line
 * N" with N = `line`, as Alertmanager names it) at `now`, or 0. */
uint64_t hygiene_silenced(struct tmon *tm, const char *prog, const char *machine,
			  const char *assertion, int line, double now);

/* Add a silence until `until` (patterns NULL or "" match anything; at least
 * one must be given). 0 with *id, or -EINVAL/-ENOSPC/-EIO with a message. */
int hygiene_silence_add(struct tmon *tm, const char *prog, const char *machine,
			const char *assertion, double until, const char *comment, uint64_t *id,
			char *err, size_t errlen);

/* End silence `id` now. 0, or -ENOENT with a message. */
int hygiene_silence_rm(struct tmon *tm, uint64_t id, char *err, size_t errlen);

/* The retention in seconds (0: keep everything). */
double hygiene_retention(const struct tmon *tm);

/* Retention for status output: "30 days (12 failures pruned since start)"
 * or "keep everything". */
const char *hygiene_status(struct tmon *tm, char *buf, size_t size);

/* Failures the retention pruned since start. */
uint64_t hygiene_pruned(const struct tmon *tm);

#endif
