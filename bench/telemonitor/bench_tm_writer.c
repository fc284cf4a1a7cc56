/* bench_tm_writer — a monitored program for bench/telemonitor/run.sh.
 *
 *   bench_tm_writer [-reads N] [-slow-every K] [-rate R] [-every-ms M] [-wall]
 *   bench_tm_writer -latency STATEDIR -prog NAME [-trials T]
 *
 * Writes an fsread log (config/examples/fsread.pspec) in cmon-ascii 1 to
 * CMON_LOG_FD (as snarflog provides), else to the file CMON_LOG, else to
 * standard output, as fast as the pipe takes it (blocking writes). Every
 * K-th read is slow (20 ms, failing "read at most 10 ms"). With -rate it
 * writes R reads (3R records) a second, what is due every millisecond,
 * times every write(), and prints "READS SECONDS LONGEST_WRITE_MS" at the
 * end (bench/http/run.sh); -every-ms M writes what is due every M ms
 * instead (bench/telemonitor/ramp.py: 100, ten writes a second). With
 * -wall the timestamps are CLOCK_REALTIME nanoseconds (#clock
 * CLOCK_REALTIME), so a stored failure's start_wall is when its read
 * began and the store's time minus it is the failure's latency.
 *
 * With -latency it measures how soon a failure is queryable: it writes a
 * slow read, then asks the telemonitor at STATEDIR (its control socket,
 * the telemonctl protocol) every 2 ms for the failures of NAME until one
 * more is stored, and prints the milliseconds that took; T times. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MS 1000000L

static int out_fd = 1;
static long t_ticks = 1000000;
static char buf[1 << 16];
static size_t blen;
static double longest_write;    /* seconds, with -rate */
static bool wall;               /* -wall: timestamps are CLOCK_REALTIME ns */

static double now(void);

static void flush(void)
{
	size_t off = 0;

	while (off < blen) {
		double t0 = now();
		ssize_t w = write(out_fd, buf + off, blen - off);
		if (now() - t0 > longest_write)
			longest_write = now() - t0;
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			perror("bench_tm_writer: write");
			exit(1);
		}
		off += (size_t)w;
	}
	blen = 0;
}

/* One read: StartRead, CacheHit, EndRead on thread 1. */
static void one_read(bool slow)
{
	long dur = slow ? 20 * MS : wall ? 10000 : 1 * MS;   /* -wall: a batch spans ~0.4 ms */

	if (blen + 256 > sizeof buf)
		flush();
	if (wall) {     /* now, unless the last read ends later (slow reads) */
		struct timespec ts;
		long w;

		clock_gettime(CLOCK_REALTIME, &ts);
		w = ts.tv_sec * 1000 * MS + ts.tv_nsec;
		if (w > t_ticks)
			t_ticks = w;
	}
	blen += (size_t)snprintf(buf + blen, sizeof buf - blen,
				 "%ld 1 StartRead 1 8192\n%ld 1 CacheHit 1\n%ld 1 EndRead 1\n",
				 t_ticks, t_ticks + 100, t_ticks + dur);
	t_ticks += dur + (wall ? 1 : 1000);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* How many failures of `prog` the telemonitor has stored (-1: no answer). */
static long count_failures(const char *state, const char *prog)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	char req[512], ans[1 << 16];
	size_t rlen = 0, alen = 0;
	const char *words[] = { "telemonctl/1", "json", "0", "ascii", "failures", NULL, "" };
	char progopt[128];
	long n = 0;
	ssize_t got;
	int fd;

	snprintf(progopt, sizeof progopt, "prog=%s", prog);
	words[5] = progopt;
	for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
		size_t l = strlen(words[i]) + 1;
		memcpy(req + rlen, words[i], l);
		rlen += l;
	}
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s/control.sock", state);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0 ||
	    write(fd, req, rlen) != (ssize_t)rlen) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while (alen < sizeof ans - 1 && (got = read(fd, ans + alen, sizeof ans - 1 - alen)) > 0)
		alen += (size_t)got;
	close(fd);
	ans[alen] = '\0';
	for (const char *p = ans; (p = strstr(p, "{\"id\":")); p++)
		n++;
	return n;
}

int main(int argc, char **argv)
{
	long reads = 1000, slow_every = 0, trials = 10, rate = 0, every_ms = 1;
	const char *latency = NULL, *prog = "fsread", *fdenv = getenv("CMON_LOG_FD");

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-reads") && i + 1 < argc)
			reads = atol(argv[++i]);
		else if (!strcmp(argv[i], "-slow-every") && i + 1 < argc)
			slow_every = atol(argv[++i]);
		else if (!strcmp(argv[i], "-latency") && i + 1 < argc)
			latency = argv[++i];
		else if (!strcmp(argv[i], "-rate") && i + 1 < argc)
			rate = atol(argv[++i]);
		else if (!strcmp(argv[i], "-prog") && i + 1 < argc)
			prog = argv[++i];
		else if (!strcmp(argv[i], "-trials") && i + 1 < argc)
			trials = atol(argv[++i]);
		else if (!strcmp(argv[i], "-every-ms") && i + 1 < argc)
			every_ms = atol(argv[++i]);
		else if (!strcmp(argv[i], "-wall"))
			wall = true;
		else {
			fprintf(stderr, "usage: bench_tm_writer [-reads N] [-slow-every K] [-rate R] "
					"[-every-ms M] [-wall] [-latency STATEDIR -prog NAME -trials T]\n");
			return 2;
		}
	}
	if (fdenv)
		out_fd = atoi(fdenv);
	else if (getenv("CMON_LOG"))
		out_fd = open(getenv("CMON_LOG"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (out_fd < 0) {
		perror("bench_tm_writer");
		return 1;
	}
	blen = (size_t)snprintf(buf, sizeof buf, "#cmon-ascii 1\n#program %s\n#tick-ns 1\n%s", prog,
				wall ? "#clock CLOCK_REALTIME\n" : "");
	if (!latency && rate > 0) {
		double t0 = now(), dt;
		long i = 0;
		struct timespec ms = { every_ms / 1000, (every_ms % 1000) * 1000000 };
		while (i < reads) {
			long due = (long)((now() - t0) * (double)rate) + 1;
			for (; i < reads && i < due; i++)
				one_read(slow_every > 0 && i % slow_every == slow_every - 1);
			flush();
			nanosleep(&ms, NULL);
		}
		dt = now() - t0;
		printf("%ld %.3f %.1f\n", reads, dt, longest_write * 1000);
		return 0;
	}
	if (!latency) {
		double t0 = now();
		for (long i = 0; i < reads; i++)
			one_read(slow_every > 0 && i % slow_every == slow_every - 1);
		flush();
		if (getenv("BENCH_TM_ELAPSED"))   /* bench/telemonitor/stalled.py */
			printf("%ld %.6f\n", reads, now() - t0);
		return 0;
	}
	for (long i = 0; i < 100; i++)
		one_read(false);
	flush();
	for (long t = 0; t < trials; t++) {
		long before = -1;
		double t0, deadline;
		while ((before = count_failures(latency, prog)) < 0)
			usleep(10000);
		one_read(true);
		flush();
		t0 = now();
		deadline = t0 + 10;
		while (count_failures(latency, prog) <= before && now() < deadline)
			usleep(2000);
		printf("%.1f\n", (now() - t0) * 1000);
		fflush(stdout);
		for (long i = 0; i < 50; i++)
			one_read(false);
		flush();
	}
	return 0;
}
