/* tp.h — LTTng-UST tracepoint provider for the emit benchmark: the same
 * event as the cmon case, StartRead(tid, size) with two doubles. */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER cmon_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "tp.h"

#if !defined(CMON_BENCH_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define CMON_BENCH_TP_H

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(
	cmon_bench, start_read,
	LTTNG_UST_TP_ARGS(double, tid, double, size),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_float(double, tid, tid)
		lttng_ust_field_float(double, size, size)))

#endif /* CMON_BENCH_TP_H */

#include <lttng/tracepoint-event.h>
