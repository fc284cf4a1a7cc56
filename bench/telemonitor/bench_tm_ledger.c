/* bench_tm_ledger DIR N ROUNDS — what an instance's ledgers cost to make
 * and to drop while instances come and go (daemons/telemonitor/ledger.h),
 * with the pool of files and without it (a file created and deleted each
 * time), side by side in one run, alternating. Each round opens the two
 * ledgers (session, checker) of N new instances, then forgets them, as N
 * programs that start and end together would. Prints, per way, the median
 * of the rounds' microseconds per instance (open + forget), CPU time (user
 * + system) included in the wall time it measures.
 *
 * On ext4 without a journal a new inode costs a scan past every inode freed
 * in the last minute or so: the way without the pool pays for the files its
 * earlier rounds deleted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "ledger.h"

static double cpu_now(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One round: N instances from `first` on, opened and forgotten. */
static double round_of(const char *dir, struct ledger_pool *pool, uint64_t first, long n)
{
	struct ledger *l = calloc((size_t)n * 2, sizeof *l);
	double t0 = cpu_now();
	bool existed;

	if (!l)
		exit(1);
	for (long i = 0; i < n; i++)
		if (ledger_open(&l[2 * i], dir, pool, first + (uint64_t)i, LK_SESSION, &existed) < 0 ||
		    ledger_open(&l[2 * i + 1], dir, pool, first + (uint64_t)i, LK_CHECKER,
				&existed) < 0) {
			fprintf(stderr, "bench_tm_ledger: cannot open a ledger under %s\n", dir);
			exit(1);
		}
	for (long i = 0; i < 2 * n; i++)
		ledger_close(&l[i], pool, false);
	for (long i = 0; i < n; i++)
		ledger_forget(dir, pool, first + (uint64_t)i);
	free(l);
	return (cpu_now() - t0) / (double)n * 1e6;
}

int main(int argc, char **argv)
{
	char with_dir[4000], without_dir[4000];
	struct ledger_pool pool;
	double *w, *wo;
	long n, rounds;
	uint64_t next = 1;

	if (argc != 4 || (n = atol(argv[2])) <= 0 || (rounds = atol(argv[3])) <= 0) {
		fprintf(stderr, "usage: bench_tm_ledger DIR N ROUNDS\n");
		return 2;
	}
	snprintf(with_dir, sizeof with_dir, "%s/pool", argv[1]);
	snprintf(without_dir, sizeof without_dir, "%s/files", argv[1]);
	mkdir(with_dir, 0750);
	mkdir(without_dir, 0750);
	if (ledger_pool_open(&pool, with_dir) < 0) {
		fprintf(stderr, "bench_tm_ledger: no pool under %s\n", with_dir);
		return 1;
	}
	w = calloc((size_t)rounds, sizeof *w);
	wo = calloc((size_t)rounds, sizeof *wo);
	if (!w || !wo)
		return 1;
	for (long r = 0; r < rounds; r++) {
		w[r] = round_of(with_dir, &pool, next, n);
		wo[r] = round_of(without_dir, NULL, next, n);
		next += (uint64_t)n;
	}
	qsort(w, (size_t)rounds, sizeof *w, cmp);
	qsort(wo, (size_t)rounds, sizeof *wo, cmp);
	printf("ledgers of %ld instances a round, %ld rounds: CPU us an instance (open 2 + forget), "
	       "median: pool %.1f, files %.1f (%.2fx)\n", n, rounds, w[rounds / 2], wo[rounds / 2],
	       wo[rounds / 2] / w[rounds / 2]);
	ledger_pool_close(&pool);
	free(w);
	free(wo);
	return 0;
}
