/* tp.c — instantiates the LTTng-UST tracepoint provider of tp.h. */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "tp.h"
