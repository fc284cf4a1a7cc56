/* bench_emit.c — cost per event of libcmon's cmon_emit(), side by side with
 * an LTTng-UST tracepoint and fprintf() to a pipe.
 *
 *   bench_emit MODE [SAMPLES]
 *
 * Every mode logs the same event, StartRead(tid, size) — two numbers, a
 * CLOCK_MONOTONIC timestamp and the thread — in SAMPLES timed blocks of 16
 * events (default 100000 blocks, after a warm-up), and prints one line:
 *   MODE MEDIAN MEAN P99 DROPPED EVENTS
 * MEDIAN and P99: ns per event in the median and 99th-percentile block (a
 * typical event; the rare event that pays for a batch write is in the tail);
 * MEAN: total time / events, i.e. the amortized cost with every write(2)
 * included; DROPPED: events the library dropped because the pipe was full,
 * out of EVENTS emitted (warm-up included).
 * The timer's own cost is measured and subtracted.
 * bench/emit/run.sh runs the modes in turn, several times, and tabulates.
 *
 * Modes of bench_emit:
 *   tsc           rdtsc alone (x86-64): the floor of libcmon's clock where the
 *                 TSC is the kernel's clocksource
 *   clock         clock_gettime(CLOCK_MONOTONIC) alone: the floor every
 *                 timestamping logger pays
 *   cmon-off      cmon_emit() with no log configured (the no-op path)
 *   cmon-pipe     cmon_emit() into a pipe drained by a reader process
 *   cmon-devnull  cmon_emit() into /dev/null: the library without a reader
 *   cmon-file     cmon_emit() into a regular file in $TMPDIR (or /tmp),
 *                 removed afterwards: events carry ts_delta
 *   fprintf-pipe  fprintf("%llu %ld StartRead %g %g\n") of the same
 *                 timestamp, thread and values into a drained pipe
 *   cmon-pipe-1M, fprintf-pipe-1M
 *                 the same at a steady 1 million events per second (in
 *                 bursts of 16), a rate the reader keeps up with
 * Modes of bench_emit_lttng (built with -DBENCH_LTTNG, linked to lttng-ust):
 *   lttng-off     tracepoint compiled in, no tracing session (cheapest case)
 *   lttng-session tracepoint enabled in a running session (run.sh sets one
 *                 up when the lttng tools are installed)
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#ifdef BENCH_LTTNG
#include "tp.h"
#else
#include "cmon/emit.h"
#endif

/* Nanoseconds on CLOCK_MONOTONIC. */
static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Events per timed block: small enough that most blocks hold no batch
 * write, so the median block is the cost of a typical event; the mean over
 * all blocks is the amortized cost, batch writes included. */
#define BLOCK 16

/* Runs STMT (using `i`) in SAMPLES blocks of BLOCK events after a warm-up of
 * a tenth as many blocks; fills SAMPLE_NS with each block's ns per event, minus the
 * timer's own cost OVERHEAD_NS (per block). With PACE_NS > 0, waits after
 * each block until PACE_NS per event have passed since it began (a steady
 * rate of 1e9 / PACE_NS events per second; the wait is not measured). */
#define MEASURE(samples, sample_ns, overhead_ns, pace_ns, stmt)             \
	do {                                                                \
		uint32_t i = 0;                                             \
		size_t warm = (samples) / 10 + 1;                           \
		for (size_t s = 0; s < warm + (samples); s++) {             \
			uint64_t t0 = now_ns(), t1;                         \
			for (uint32_t e = 0; e < BLOCK; e++, i++)           \
				stmt;                                       \
			t1 = now_ns();                                      \
			if (s >= warm)                                      \
				(sample_ns)[s - warm] = ((double)(t1 - t0) - \
				                         (overhead_ns)) / BLOCK; \
			while ((pace_ns) && t1 - t0 < (uint64_t)(pace_ns) * BLOCK) \
				t1 = now_ns();                              \
		}                                                           \
	} while (0)

/* The median cost of an empty timed block: two clock reads. */
static double timer_overhead(void)
{
	static double d[20001];
	size_t n = sizeof d / sizeof *d;

	for (size_t k = 0; k < n; k++) {
		uint64_t t0 = now_ns();
		d[k] = (double)(now_ns() - t0);
	}
	qsort(d, n, sizeof *d, cmp_double);
	return d[n / 2];
}

#ifndef BENCH_LTTNG
/* Starts a process draining pipe P[0] into nothing; returns its pid. */
static pid_t start_reader(int p[2])
{
	pid_t pid;

	if (pipe(p) < 0)
		return -1;
	if (getenv("BENCH_PIPE_SZ"))
		fcntl(p[1], F_SETPIPE_SZ, atoi(getenv("BENCH_PIPE_SZ")));
	pid = fork();
	if (pid == 0) {
		static char buf[1 << 16];
		close(p[1]);
		while (read(p[0], buf, sizeof buf) > 0 || errno == EINTR)
			;
		_exit(0);
	}
	close(p[0]);
	return pid;
}

/* Closes the pipe and waits for its reader. */
static void stop_reader(int fd, pid_t pid)
{
	close(fd);
	waitpid(pid, NULL, 0);
}
#endif

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	size_t samples = argc > 2 ? strtoul(argv[2], NULL, 10) : 100000;
	double *ns = calloc(samples ? samples : 1, sizeof *ns);
	unsigned long long dropped = 0;
	volatile double sink = 0;
	double overhead, mean = 0;
	/* MODE-1M: the same at a steady million events per second. */
	size_t mlen = strlen(mode);
	uint64_t pace = mlen > 3 && strcmp(mode + mlen - 3, "-1M") == 0 ? 1000 : 0;
	char base[32];

	snprintf(base, sizeof base, "%.*s", (int)(pace ? mlen - 3 : mlen), mode);

	if (!ns || samples == 0) {
		fprintf(stderr, "usage: %s MODE [SAMPLES]\n", argv[0]);
		return 2;
	}
	overhead = timer_overhead();
#ifdef BENCH_LTTNG
	if (strcmp(base, "lttng-off") == 0 || strcmp(base, "lttng-session") == 0) {
		if (strcmp(base, "lttng-session") == 0 &&
		    !lttng_ust_tracepoint_enabled(cmon_bench, start_read)) {
			fprintf(stderr, "bench_emit: no session enables the tracepoint\n");
			return 3;
		}
		MEASURE(samples, ns, overhead, pace,
		        lttng_ust_tracepoint(cmon_bench, start_read, 7.0,
		                             512.0 + (i & 0xffff)));
	}
#else
	if (strcmp(base, "clock") == 0) {
		struct timespec ts;
		MEASURE(samples, ns, overhead, pace,
		        (clock_gettime(CLOCK_MONOTONIC, &ts), sink += ts.tv_nsec));
#if defined(__x86_64__)
	} else if (strcmp(base, "tsc") == 0) {
		MEASURE(samples, ns, overhead, pace, sink += __rdtsc());
#endif
	} else if (strcmp(base, "cmon-off") == 0 || strcmp(base, "cmon-pipe") == 0 ||
	           strcmp(base, "cmon-devnull") == 0 || strcmp(base, "cmon-file") == 0) {
		const char *attrs[] = { "tid", "size" };
		struct cmon_stats st;
		pid_t reader = -1;
		int p[2] = { -1, -1 };
		cmon_type t;
		char file[256] = "";

		if (strcmp(base, "cmon-pipe") == 0) {
			char fd[16];
			reader = start_reader(p);
			if (reader < 0)
				return 1;
			snprintf(fd, sizeof fd, "%d", p[1]);
			setenv("CMON_LOG_FD", fd, 1);
		} else {
			unsetenv("CMON_LOG_FD");
			unsetenv("CMON_LOG");
			if (strcmp(base, "cmon-devnull") == 0)
				setenv("CMON_LOG", "/dev/null", 1);
			if (strcmp(base, "cmon-file") == 0) {
				const char *dir = getenv("TMPDIR");
				snprintf(file, sizeof file, "%s/bench_emit.%d.log",
				         dir && *dir ? dir : "/tmp", (int)getpid());
				unlink(file);
				setenv("CMON_LOG", file, 1);
			}
		}
		cmon_init("bench_emit");
		t = cmon_declare("StartRead", 2, attrs);
		if (strcmp(base, "cmon-off") != 0 && !t)
			return 1;
		MEASURE(samples, ns, overhead, pace, CMON_EMIT(t, 7.0, 512.0 + (i & 0xffff)));
		cmon_flush();
		cmon_get_stats(&st);
		dropped = (unsigned long long)st.events_dropped;
		if (reader >= 0)
			stop_reader(p[1], reader);
		if (*file)
			unlink(file);
	} else if (strcmp(base, "fprintf-pipe") == 0) {
		long tid = (long)gettid();
		int p[2];
		pid_t reader = start_reader(p);
		FILE *f = reader < 0 ? NULL : fdopen(p[1], "w");
		struct timespec ts;

		if (!f)
			return 1;
		MEASURE(samples, ns, overhead, pace,
		        (clock_gettime(CLOCK_MONOTONIC, &ts),
		         fprintf(f, "%llu %ld StartRead %g %g\n",
		                 (unsigned long long)ts.tv_sec * 1000000000ull +
		                         (unsigned long long)ts.tv_nsec,
		                 tid, 7.0, 512.0 + (i & 0xffff))));
		fclose(f);
		waitpid(reader, NULL, 0);
	}
#endif
	else {
		fprintf(stderr, "bench_emit: unknown mode '%s'\n", mode);
		return 2;
	}
	for (size_t k = 0; k < samples; k++)
		mean += ns[k] / (double)samples;
	qsort(ns, samples, sizeof *ns, cmp_double);
	printf("%s %.2f %.2f %.2f %llu %llu\n", mode, ns[samples / 2], mean,
	       ns[samples * 99 / 100], dropped,
	       (unsigned long long)BLOCK * (samples + samples / 10 + 1));
	(void)sink;
	free(ns);
	return 0;
}
