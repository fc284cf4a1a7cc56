/* emit_clock.c — the events' clock (see emit-internal.h): the TSC where
 * the kernel keeps CLOCK_MONOTONIC with it, calibrated against it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "emit-internal.h"

struct emit_clock emit_clk;

/* Time of the first calibration, and of a re-anchor's refinement (ns). */
#define CALIBRATE_NS 1000000ull
#define REFINE_MIN_NS 100000000ull

uint64_t emit_clock_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__)
/* A tick and CLOCK_MONOTONIC at the same moment: the tick halfway between
 * two read around the clock, from the tightest of a few tries (one the
 * scheduler cut in two would be off by the time it lost). */
static void pair(uint64_t *tsc, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;

	*tsc = *ns = 0;
	for (int i = 0; i < 5; i++) {
		uint64_t a = __rdtsc(), n = emit_clock_mono(), b = __rdtsc();
		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*ns = n;
		}
	}
}

/* The CPU's TSC runs at a constant rate in every power state. */
static bool tsc_invariant(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
		return false;
	__get_cpuid(0x80000007u, &a, &b, &c, &d);
	return (d >> 8) & 1;
}

/* The kernel keeps CLOCK_MONOTONIC with the TSC (so it trusts it across
 * CPUs, and the two cannot drift apart but by NTP's slew). */
static bool kernel_uses_tsc(void)
{
	char cs[32] = "";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");

	if (!f)
		return false;
	if (!fgets(cs, sizeof cs, f))
		cs[0] = '\0';
	fclose(f);
	return strcmp(cs, "tsc\n") == 0;
}
#endif

void emit_clock_init(void)
{
#if defined(__x86_64__)
	const char *want = getenv("CMON_CLOCK");
	uint64_t t0, n0, t1, n1;

	emit_clk.tsc = false;
	if ((want && strcmp(want, "monotonic") == 0) || !tsc_invariant() || !kernel_uses_tsc())
		return;
	pair(&t0, &n0);
	do
		pair(&t1, &n1);
	while (n1 - n0 < CALIBRATE_NS);
	if (t1 <= t0)
		return;
	emit_clk.base_tsc = t0;
	emit_clk.base_ns = n0;
	atomic_store_explicit(&emit_clk.mult, (uint64_t)(((unsigned __int128)(n1 - n0) << 32) /
							   (t1 - t0)), memory_order_relaxed);
	emit_clk.tsc = true;
#endif
}

void emit_clock_anchor(struct emit_anchor *a)
{
#if defined(__x86_64__)
	uint64_t tsc, ns;

	if (!emit_clk.tsc)
		return;
	pair(&tsc, &ns);
	/* the rate over the whole time since the start: its error shrinks */
	if (ns - emit_clk.base_ns >= REFINE_MIN_NS && tsc > emit_clk.base_tsc)
		atomic_store_explicit(&emit_clk.mult,
				      (uint64_t)(((unsigned __int128)(ns - emit_clk.base_ns) << 32) /
						 (tsc - emit_clk.base_tsc)), memory_order_relaxed);
	a->tsc = tsc;
	a->ns = ns > a->last_ns ? ns : a->last_ns;
	a->mult = atomic_load_explicit(&emit_clk.mult, memory_order_relaxed);
#else
	(void)a;
#endif
}
