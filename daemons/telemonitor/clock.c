/* The telemonitor's clock (clock.h). */
#include <time.h>

#include "clock.h"

double tm_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
