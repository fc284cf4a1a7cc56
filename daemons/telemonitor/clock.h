/* The telemonitor's clock: the one place that reads wall-clock time, on
 * the lowest floor so that every part may ask it (docs/HACKING.md,
 * "Floors"). */
#ifndef TELEMON_CLOCK_H
#define TELEMON_CLOCK_H

/* Wall-clock time as Unix seconds. */
double tm_now(void);

#endif
