/* bench_tm_store — how fast the telemonitor's store takes failures.
 *
 *   bench_tm_store DIR MODE N
 *
 * Each failure goes the way it goes in the service: one JSON report line of
 * pcheck taken apart by report_parse(), then store_add_failure(). MODE:
 *   batched     the service's way: one transaction committed every 100 ms
 *   autocommit  the same database (WAL, synchronous=NORMAL), one commit per
 *               failure
 *   naive       what one would write first: a fresh sqlite database with its
 *               default settings (rollback journal, synchronous=FULL) and a
 *               plain INSERT per failure
 *   ramp        the store's load in bench/telemonitor/ramp.py at 1,000
 *               streams: failures spread over 1,000 instances, each with
 *               its window (53 records of log, 2.1 KB), a commit every 330
 *               failures (3,300 a second, committed every 100 ms)
 * Prints "MODE N SECONDS FAILURES_PER_SECOND". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "report.h"
#include "store.h"

double tm_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int line_for(char *buf, size_t size, long i)
{
	long ts = 1000000 + i * 25000000;
	return snprintf(buf, size,
			"{\"spec\":\"/etc/cmon/fsread.pspec\",\"assert\":\"read at most 10 ms\","
			"\"line\":27,\"result\":\"fail\",\"kind\":\"interval\",\"type\":\"Read\","
			"\"uid\":%ld,\"start\":\"%ld.0\",\"end\":\"%ld.0\",\"start_ts\":%ld,"
			"\"end_ts\":%ld,\"metrics\":{\"time\":[%ld,1,1],\"size\":%ld,\"hit\":%s}}",
			i, 3 * i + 1, 3 * i + 3, ts, ts + 20000000 + i % 1000, 20000000 + i % 1000,
			512L << (i % 8), i % 4 ? "true" : "false");
}

enum { RAMP_INSTANCES = 1000, RAMP_PER_COMMIT = 330, RAMP_WINDOW_RECORDS = 53 };

/* A failure's window as the ramp's programs write it: ascii records. */
static size_t window_for(char *buf, size_t size, long i)
{
	size_t n = 0;

	for (long k = 0; k < RAMP_WINDOW_RECORDS && n < size; k++) {
		long ts = 1700000000000000000L + (i * RAMP_WINDOW_RECORDS + k) * 1001003L;
		int w = snprintf(buf + n, size - n, "%s %ld.%09ld %ld\n",
				 k % 3 == 0 ? "ReadStart" : k % 3 == 1 ? "ReadEnd" : "Tick",
				 ts / 1000000000L, ts % 1000000000L, 4096 + (i + k) % 97);
		if (w < 0 || (size_t)w >= size - n)
			break;
		n += (size_t)w;
	}
	return n;
}

/* The service's path: parse the report, add, commit. */
static int run_store(const char *dir, long n, bool batched, bool ramp)
{
	static char window[8192];
	char err[300], line[1024];
	struct store *st = store_open(dir, NULL, err, sizeof err);
	double last = mono();

	if (!st) {
		fprintf(stderr, "bench_tm_store: %s\n", err);
		return -1;
	}
	for (long i = 0; i < n; i++) {
		struct checker_report r;
		struct store_failure f = { 0 };
		uint64_t id;
		int len = line_for(line, sizeof line, i);
		if (report_parse(line, (size_t)len, &r) != 0) {
			fprintf(stderr, "bench_tm_store: report not parsed\n");
			return -1;
		}
		f.instance_id = ramp ? 1 + (uint64_t)(i % RAMP_INSTANCES) : 1;
		f.spec = r.spec;
		f.assertion = r.assertion;
		f.line = r.line;
		f.result = r.result;
		f.kind = r.kind;
		f.type = r.type;
		f.uid = r.uid;
		f.start = r.start;
		f.end = r.end;
		f.has_ts = true;
		f.start_ts = r.start_ts;
		f.end_ts = r.end_ts;
		f.metrics = r.metrics;
		f.time = tm_now();
		f.start_pos = (uint64_t)(3 * i + 1);
		f.end_pos = (uint64_t)(3 * i + 3);
		f.window_id = (uint64_t)i + 1;
		if (store_add_failure(st, &f, &id) < 0) {
			report_free(&r);
			return -1;
		}
		report_free(&r);
		if (ramp) {
			size_t wl = window_for(window, sizeof window, i);

			if (store_add_window(st, f.window_id, f.instance_id, f.start_pos,
					     f.end_pos, false, window, wl) < 0)
				return -1;
			if ((i + 1) % RAMP_PER_COMMIT == 0)
				store_commit(st);
			continue;
		}
		if (!batched || mono() - last >= 0.1) {
			store_commit(st);
			last = mono();
		}
	}
	store_commit(st);
	store_close(st);
	return 0;
}

/* The first thing one would write: default sqlite, INSERT per failure. */
static int run_naive(const char *dir, long n)
{
	char path[4096], line[1024];
	sqlite3 *db;
	sqlite3_stmt *q;

	snprintf(path, sizeof path, "%s/naive.db", dir);
	if (sqlite3_open(path, &db) != SQLITE_OK ||
	    sqlite3_exec(db, "CREATE TABLE failures (id INTEGER PRIMARY KEY, instance_id INTEGER,"
			     " spec TEXT, assert TEXT, line INTEGER, result TEXT, kind TEXT, type TEXT,"
			     " uid INTEGER, start_pos TEXT, end_pos TEXT, start_ts INTEGER,"
			     " end_ts INTEGER, time REAL, metrics TEXT)", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db,
			       "INSERT INTO failures (instance_id, spec, assert, line, result, kind,"
			       " type, uid, start_pos, end_pos, start_ts, end_ts, time, metrics)"
			       " SELECT 1, json_extract(j,'$.spec'), json_extract(j,'$.assert'),"
			       " json_extract(j,'$.line'), json_extract(j,'$.result'),"
			       " json_extract(j,'$.kind'), json_extract(j,'$.type'),"
			       " json_extract(j,'$.uid'), json_extract(j,'$.start'),"
			       " json_extract(j,'$.end'), json_extract(j,'$.start_ts'),"
			       " json_extract(j,'$.end_ts'), ?2, json_extract(j,'$.metrics')"
			       " FROM (SELECT ?1 AS j)", -1, &q, NULL) != SQLITE_OK) {
		fprintf(stderr, "bench_tm_store: %s\n", sqlite3_errmsg(db));
		return -1;
	}
	for (long i = 0; i < n; i++) {
		int len = line_for(line, sizeof line, i);
		sqlite3_bind_text(q, 1, line, len, SQLITE_STATIC);
		sqlite3_bind_double(q, 2, tm_now());
		if (sqlite3_step(q) != SQLITE_DONE) {
			fprintf(stderr, "bench_tm_store: %s\n", sqlite3_errmsg(db));
			return -1;
		}
		sqlite3_reset(q);
	}
	sqlite3_finalize(q);
	sqlite3_close(db);
	return 0;
}

int main(int argc, char **argv)
{
	double t0, dt;
	long n;
	int r;

	if (argc != 4) {
		fprintf(stderr, "usage: bench_tm_store DIR batched|autocommit|naive|ramp N\n");
		return 2;
	}
	n = atol(argv[3]);
	t0 = mono();
	if (!strcmp(argv[2], "naive"))
		r = run_naive(argv[1], n);
	else
		r = run_store(argv[1], n, !strcmp(argv[2], "batched"), !strcmp(argv[2], "ramp"));
	dt = mono() - t0;
	if (r < 0)
		return 1;
	printf("%s %ld %.3f %.0f\n", argv[2], n, dt, (double)n / dt);
	return 0;
}
