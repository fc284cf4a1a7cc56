/* backoff.h — capped exponential backoff with jitter, for every client that
 * reconnects or restarts something (snarflog's registry link, the
 * telemonitor's registry link, data connections and tools).
 *
 * A struct cmon_backoff is plain data owned by its user: set min_ms, max_ms
 * and jitter_pct, then call cmon_backoff_next() after each failure and
 * cmon_backoff_reset() after a success. */
#ifndef CMON_BACKOFF_H
#define CMON_BACKOFF_H

#include <event2/event.h>

/* One backoff sequence: min, 2·min, 4·min, … capped at max, each ± jitter. */
struct cmon_backoff {
	unsigned min_ms;     /* the first delay */
	unsigned max_ms;     /* the cap (before jitter) */
	unsigned jitter_pct; /* each delay is moved by up to ± this percent (0: none) */
	unsigned failures;   /* failures since the last reset */
};

/* Count one more failure and return the delay to wait before the next
 * attempt: min_ms · 2^(failures-1), capped at max_ms, with jitter. */
unsigned cmon_backoff_next(struct cmon_backoff *b);

/* The delay the next failure would give, without jitter (for messages). */
unsigned cmon_backoff_peek(const struct cmon_backoff *b);

/* Forget the failures (after a success). */
void cmon_backoff_reset(struct cmon_backoff *b);

/* Arm the one-shot timer `ev` to fire in `ms` milliseconds (re-arming it
 * when it is pending). Returns 0 or a negative errno-style code. */
int cmon_timer_arm_ms(struct event *ev, unsigned ms);

#endif
