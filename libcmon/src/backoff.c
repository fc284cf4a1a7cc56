/* backoff.c — capped exponential backoff with jitter (cmon/backoff.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/time.h>

#include "cmon/backoff.h"

/* min · 2^(n-1) capped at max, for the n-th consecutive failure (n ≥ 1). */
static unsigned delay_for(const struct cmon_backoff *b, unsigned n)
{
	uint64_t ms = b->min_ms ? b->min_ms : 1;

	for (unsigned i = 1; i < n && ms < b->max_ms; i++)
		ms *= 2;
	if (ms > b->max_ms)
		ms = b->max_ms;
	return (unsigned)ms;
}

unsigned cmon_backoff_peek(const struct cmon_backoff *b)
{
	return delay_for(b, b->failures + 1);
}

unsigned cmon_backoff_next(struct cmon_backoff *b)
{
	unsigned ms = delay_for(b, ++b->failures);
	unsigned spread = (unsigned)((uint64_t)ms * b->jitter_pct / 100);

	/* Jitter keeps many clients that lost the same peer at the same moment
	 * from coming back in lock step: from the kernel's random source
	 * (arc4random), so that no caller has to seed anything and processes
	 * started together do not draw the same delays. */
	if (spread)
		ms = ms - spread + arc4random_uniform(2 * spread + 1);
	return ms;
}

void cmon_backoff_reset(struct cmon_backoff *b)
{
	b->failures = 0;
}

int cmon_timer_arm_ms(struct event *ev, unsigned ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	return evtimer_add(ev, &tv) == 0 ? 0 : -EINVAL;
}
