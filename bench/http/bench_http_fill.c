/* bench_http_fill — a telemonitor store as a long-running service has it,
 * for bench/http/run.sh.
 *
 *   bench_http_fill DIR INSTANCES FAILURES
 *
 * Fills DIR/telemonitor.db through the service's own store module (no SQL
 * of its own): one class, INSTANCES ended instances of 10 programs with
 * their counters, and FAILURES failures spread evenly over them, each with
 * the metrics pcheck reports (a triple, a number, a boolean), under three
 * assertion labels. Failures are a day old, 1 s apart. Prints
 * "INSTANCES FAILURES SECONDS". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store.h"

double tm_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *const labels[] = { "read at most 10 ms", "small reads at most 8 ms",
				      "1-minute stats" };

int main(int argc, char **argv)
{
	struct tm_class c = { .prog = "app*", .machine = "*", .pid = "*", .block = false,
			      .autostart = true };
	char err[300], metrics[200], start[40], end[40];
	long ninst, nfail;
	double t0 = tm_now(), base = t0 - 86400;
	struct store *st;
	struct tm_instance *in;
	uint64_t id;

	if (argc != 4 || (ninst = atol(argv[2])) <= 0 || (nfail = atol(argv[3])) < 0) {
		fprintf(stderr, "usage: bench_http_fill DIR INSTANCES FAILURES\n");
		return 2;
	}
	st = store_open(argv[1], NULL, err, sizeof err);
	in = calloc((size_t)ninst, sizeof *in);
	if (!st || !in) {
		fprintf(stderr, "bench_http_fill: %s\n", st ? "out of memory" : err);
		return 1;
	}
	c.spec = "/etc/cmon/fsread.pspec";
	c.tool = NULL;
	if (store_class_save(st, &c) < 0)
		goto out_fail;
	for (long i = 0; i < ninst; i++) {
		snprintf(in[i].prog, sizeof in[i].prog, "app%ld", i % 10);
		snprintf(in[i].machine, sizeof in[i].machine, "host%02ld", i % 50);
		in[i].class_id = c.id;
		in[i].pid = 10000 + i;
		in[i].start_ns = (int64_t)(base * 1e9) + i;
		in[i].first_seen = base + (double)i;
		in[i].state = IS_MONITORING;
		in[i].records = 3000000 + (uint64_t)i;
		in[i].bytes = 90 * in[i].records;
		in[i].failures = (uint64_t)(nfail / ninst);
		if (store_instance_insert(st, &in[i]) < 0)
			goto out_fail;
	}
	for (long k = 0; k < nfail; k++) {
		long i = k % ninst, r = k / ninst;
		long ts = 1000000 + r * 25000000;
		struct store_failure f = {
			.instance_id = in[i].id, .spec = c.spec, .assertion = labels[k % 3],
			.line = 27 + (int)(k % 3), .result = "fail", .kind = "interval",
			.type = "Read", .uid = r, .start = start, .end = end,
			.start_pos = (uint64_t)(3 * r + 1), .end_pos = (uint64_t)(3 * r + 3),
			.has_ts = true, .start_ts = ts, .end_ts = ts + 20000000 + k % 1000,
			.time = base + (double)k, .metrics = metrics, .report = k % 3 == 2,
		};
		snprintf(start, sizeof start, "%ld.0", 3 * r + 1);
		snprintf(end, sizeof end, "%ld.0", 3 * r + 3);
		snprintf(metrics, sizeof metrics, "{\"time\":[%ld,1,1],\"size\":%ld,\"hit\":%s}",
			 20000000 + k % 1000, 512L << (k % 8), k % 4 ? "true" : "false");
		if (store_add_failure(st, &f, &id) < 0)
			goto out_fail;
		if (k % 10000 == 9999 && store_commit(st) < 0)
			goto out_fail;
	}
	for (long i = 0; i < ninst; i++)
		if (store_instance_end(st, &in[i], IS_ENDED, base + 80000 + (double)i) < 0)
			goto out_fail;
	if (store_commit(st) < 0)
		goto out_fail;
	store_close(st);
	free(in);
	printf("%ld %ld %.2f\n", ninst, nfail, tm_now() - t0);
	return 0;
out_fail:
	fprintf(stderr, "bench_http_fill: the store refused a write\n");
	store_close(st);
	free(in);
	return 1;
}
