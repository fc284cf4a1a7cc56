/* perturb.c — intervals of known true duration, instrumented with libcmon,
 * to check perturbation compensation (pcheck --compensate, docs/pspec.md
 * "Perturbation compensation").
 *
 *   perturb calibrate NS          print the spin count of a loop of about NS ns
 *   perturb truth ITERS N         the loop's true duration, uninstrumented:
 *                                 N loops timed in blocks of 100 (no clock
 *                                 read inside a block); prints the median
 *                                 ns per loop over the blocks
 *   perturb run ITERS N K [V]     N intervals Work(tid) ... WorkEnd(tid), each
 *                                 the same loop cut into K + 1 pieces with an
 *                                 Inside(tid, i, ...) event of V values (2 to
 *                                 32, default 2) between pieces, into
 *                                 the log libcmon is given ($CMON_LOG), in
 *                                 blocks of 100 intervals; after each block,
 *                                 100 uninstrumented loops (cut the same way),
 *                                 each timed alone. Prints the truth: their
 *                                 median less the median cost of the timing
 *                                 itself (two clock reads back to back),
 *                                 measured interleaved with the intervals so
 *                                 that both see the same machine
 *
 * The loop is plain arithmetic on a volatile counter, so its duration
 * depends on the spin count only; bench/perturb/run.sh compares what pcheck
 * makes of the intervals, with and without compensation, to the truth. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmon/emit.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink;

/* A chain of dependent multiply-adds in a register: its time depends on
 * the count only (a loop over a volatile counter ran twice as fast back to
 * back as timed alone on this machine: memory renaming). */
static void spin(uint64_t iters)
{
	uint64_t x = sink;

	for (uint64_t i = 0; i < iters; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" : "+r"(x));
	}
	sink = x;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median ns per loop of `iters` spins over `blocks` blocks of 100 loops. */
static double loop_ns(uint64_t iters, size_t blocks)
{
	double *per = malloc(blocks * sizeof *per), m;

	if (!per)
		exit(1);
	for (size_t b = 0; b < blocks; b++) {
		uint64_t t0 = now_ns();
		for (int k = 0; k < 100; k++)
			spin(iters);
		per[b] = (double)(now_ns() - t0) / 100.0;
	}
	qsort(per, blocks, sizeof *per, cmp_double);
	m = per[blocks / 2];
	free(per);
	return m;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "calibrate")) {
		double target = atof(argv[2]);
		uint64_t iters = 5000;

		for (int round = 0; round < 6; round++) {
			double ns = loop_ns(iters, 21);
			iters = (uint64_t)((double)iters * target / ns);
			if (iters < 1)
				iters = 1;
		}
		printf("%llu\n", (unsigned long long)iters);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "truth")) {
		uint64_t iters = strtoull(argv[2], NULL, 10);
		size_t n = strtoull(argv[3], NULL, 10);

		spin(iters * 100);   /* warm up */
		printf("%.1f\n", loop_ns(iters, n / 100 ? n / 100 : 1));
		return 0;
	}
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "run")) {
		uint64_t iters = strtoull(argv[2], NULL, 10);
		size_t n = strtoull(argv[3], NULL, 10);
		unsigned k = (unsigned)strtoul(argv[4], NULL, 10);
		unsigned nv = argc == 6 ? (unsigned)strtoul(argv[5], NULL, 10) : 2;
		const char *attrs[] = { "tid", "i" };
		cmon_type start, inside, end;
		double tid = 1, v[CMON_MAX_ATTRS] = { 1, 0 };

		if (nv < 2 || nv > CMON_MAX_ATTRS) {
			fprintf(stderr, "perturb: V must be 2 to %d\n", CMON_MAX_ATTRS);
			return 2;
		}
		for (unsigned i = 2; i < nv; i++)
			v[i] = 1000.5 + i;   /* a fraction: no encoding could shrink it */

		if (cmon_init("perturb") < 0 || !cmon_enabled()) {
			fprintf(stderr, "perturb: set CMON_LOG or CMON_LOG_FD\n");
			return 2;
		}
		start = cmon_declare("Work", 1, attrs);
		inside = cmon_declare("Inside", 2, attrs);
		end = cmon_declare("WorkEnd", 1, attrs);
		size_t blocks = n / 100 ? n / 100 : 1, m = blocks * 100;
		double *truth = malloc(m * sizeof *truth), *empty = malloc(m * sizeof *empty);
		uint64_t piece = iters / (k + 1), rest = iters - piece * (k + 1);

		if (!truth || !empty)
			return 1;
		spin(iters * 100);   /* warm up */
		for (size_t b = 0; b < blocks; b++) {
			for (size_t j = 0; j < 100; j++) {
				cmon_emit(start, 1, &tid);
				spin(piece + rest);
				for (unsigned i = 0; i < k; i++) {
					v[1] = i;
					cmon_emit(inside, nv, v);
					spin(piece);
				}
				cmon_emit(end, 1, &tid);
			}
			for (size_t j = 0; j < 100; j++) {
				uint64_t t0 = now_ns();
				spin(piece + rest);
				for (unsigned i = 0; i < k; i++)
					spin(piece);
				uint64_t t1 = now_ns();
				empty[b * 100 + j] = (double)(now_ns() - t1);
				truth[b * 100 + j] = (double)(t1 - t0);
			}
		}
		cmon_flush();
		qsort(truth, m, sizeof *truth, cmp_double);
		qsort(empty, m, sizeof *empty, cmp_double);
		printf("%.1f\n", truth[m / 2] - empty[m / 2]);
		free(truth);
		free(empty);
		return 0;
	}
	fprintf(stderr, "usage: perturb calibrate NS | truth ITERS N | run ITERS N K [V]\n");
	return 2;
}
