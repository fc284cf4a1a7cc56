/* fsread-demo — a pretend file server that logs its reads with libcmon.
 *
 * THREADS worker threads each serve READS reads (or run until SIGINT /
 * SIGTERM), RATE per second. A read has a random size of 512..65536 bytes;
 * three in every four are cache hits (which of the four is random). A read
 * "takes" time proportional to its size — about 1 ms at most for a hit,
 * 6 ms for a miss — and now and then (SLOW percent) a read is deliberately
 * slow, 12..30 ms, so that the assertion {& r : Read : r.time <= 10 ms} of
 * config/examples/fsread.pspec fails now and then.
 *
 * It logs the events of the report's Figure 3:
 *   StartRead(tid, size)   CacheHit(tid)   EndRead(tid)
 * where tid is the worker's number (1..THREADS); the event's thread field
 * carries the real thread id. The log goes wherever CMON_LOG_FD / CMON_LOG
 * say (see cmon_emit(3)); without them the program runs unlogged.
 *
 *   CMON_LOG=/tmp/fs.log fsread-demo -t 4 -n 200 && pcheck -s fsread.pspec /tmp/fs.log
 *   snarflog fsread -- fsread-demo -n 0          (forever, under snarflog)
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmon/emit.h>

/* The example's own version: it is built against the installed cmon/emit.h,
 * which is all a libcmon client gets (no CMon build definitions). */
#define FSREAD_DEMO_VERSION "1.0"

/* What the command line asked for. */
struct options {
	unsigned threads;       /* worker threads */
	unsigned long reads;    /* reads per worker; 0: until a signal */
	double rate;            /* reads per second per worker; 0: no pause */
	double slow_pct;        /* percent of reads made slow (> 10 ms) */
	unsigned seed;          /* random seed (0: from the clock) */
	double slower_pct;      /* every read takes this percent longer (a slower version) */
	int quiet;              /* no summary on stderr */
};

/* The event types of Figure 3. */
static cmon_type ev_start, ev_hit, ev_end;
/* Set by SIGINT / SIGTERM: workers finish the read at hand and stop. */
static volatile sig_atomic_t stopping;
/* Totals for the summary. */
static _Atomic unsigned long total_reads, total_hits, total_slow;

/* One worker's state. */
struct worker {
	pthread_t thread;       /* the thread */
	unsigned tid;           /* its number, 1..threads: the tid attribute */
	uint64_t rng;           /* its xorshift64* state */
	const struct options *opt;
};

static void usage(FILE *f, const char *prog)
{
	fprintf(f,
	        "usage: %s [-t THREADS] [-n READS] [-r RATE] [-p SLOWPCT] [-w PCT] [-s SEED] [-q]\n"
	        "  -t, --threads N   worker threads (default 4)\n"
	        "  -n, --reads N     reads per worker, 0 = until SIGINT/SIGTERM (default 100)\n"
	        "  -r, --rate R      reads per second per worker, 0 = no pause (default 100)\n"
	        "  -p, --slow PCT    percent of reads made slow, over 10 ms (default 1)\n"
	        "  -w, --slower PCT  every read takes PCT percent longer: a slower version of the\n"
	        "                    server, for telemonctl compare (default 0)\n"
	        "  -s, --seed N      random seed (default: from the clock)\n"
	        "  -q, --quiet       no summary on standard error\n"
	        "The log goes to $CMON_LOG_FD or $CMON_LOG (cmon-bin 1); see cmon_emit(3).\n",
	        prog);
}

/* A uniformly distributed 64-bit number (xorshift64*). */
static uint64_t rnd(struct worker *w)
{
	w->rng ^= w->rng >> 12;
	w->rng ^= w->rng << 25;
	w->rng ^= w->rng >> 27;
	return w->rng * 0x2545F4914F6CDD1Dull;
}

/* A number in [lo, hi]. */
static unsigned long rnd_range(struct worker *w, unsigned long lo, unsigned long hi)
{
	return lo + (unsigned long)(rnd(w) % (hi - lo + 1));
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !stopping)
		;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One read: StartRead, maybe CacheHit, the work, EndRead. */
static void serve_read(struct worker *w, bool hit)
{
	unsigned long size = rnd_range(w, 512, 65536);
	bool slow = (double)(rnd(w) % 1000000) < w->opt->slow_pct * 10000.0;
	uint64_t work;

	CMON_EMIT(ev_start, w->tid, (double)size);
	if (hit) {
		CMON_EMIT(ev_hit, w->tid);
		work = 200000 + (uint64_t)size * 800000 / 65536;     /* <= 1 ms */
	} else {
		work = 1000000 + (uint64_t)size * 5000000 / 65536;   /* <= 6 ms */
	}
	if (slow)
		work = rnd_range(w, 12000000, 30000000);       /* 12..30 ms */
	work += (uint64_t)((double)work * w->opt->slower_pct / 100);
	sleep_ns(work);
	CMON_EMIT(ev_end, w->tid);
	total_reads++;
	total_hits += hit;
	total_slow += slow;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const struct options *opt = w->opt;
	uint64_t period = opt->rate > 0 ? (uint64_t)(1e9 / opt->rate) : 0;
	uint64_t next = now_ns();
	unsigned miss = 0;

	for (unsigned long i = 0; !stopping && (opt->reads == 0 || i < opt->reads); i++) {
		/* In each group of four reads one misses: 75% hits exactly. */
		if (i % 4 == 0)
			miss = (unsigned)(rnd(w) % 4);
		serve_read(w, i % 4 != miss);
		next += period;
		uint64_t now = now_ns();
		if (next > now) {
			/* Going idle: hand the batch over now, so a continuous
			 * checker sees this read without waiting for the next. */
			cmon_flush();
			sleep_ns(next - now);
		} else {
			next = now;         /* behind: do not try to catch up */
		}
	}
	return NULL;
}

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

/* Parses the command line into *OPT; returns -1 on error, 1 after --help. */
static int parse_args(int argc, char **argv, struct options *opt)
{
	static const struct option longopts[] = {
		{ "threads", required_argument, NULL, 't' },
		{ "reads", required_argument, NULL, 'n' },
		{ "rate", required_argument, NULL, 'r' },
		{ "slow", required_argument, NULL, 'p' },
		{ "seed", required_argument, NULL, 's' },
		{ "slower", required_argument, NULL, 'w' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "t:n:r:p:w:s:qh", longopts, NULL)) != -1) {
		char *end = NULL;
		errno = 0;
		switch (c) {
		case 't': {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || errno || v < 1 || v > 1024)
				goto bad;
			opt->threads = (unsigned)v;
			break;
		}
		case 'n':
			opt->reads = strtoul(optarg, &end, 10);
			if (*end || errno || optarg[0] == '-')
				goto bad;
			break;
		case 'r':
			opt->rate = strtod(optarg, &end);
			if (*end || errno || !(opt->rate >= 0) || opt->rate > 1e6)
				goto bad;
			break;
		case 'w':
			opt->slower_pct = strtod(optarg, &end);
			if (*end || errno || !(opt->slower_pct >= 0) || opt->slower_pct > 1000)
				goto bad;
			break;
		case 'p':
			opt->slow_pct = strtod(optarg, &end);
			if (*end || errno || !(opt->slow_pct >= 0) || opt->slow_pct > 100)
				goto bad;
			break;
		case 's':
			opt->seed = (unsigned)strtoul(optarg, &end, 10);
			if (*end || errno)
				goto bad;
			break;
		case 'q':
			opt->quiet = 1;
			break;
		case 'h':
			usage(stdout, argv[0]);
			return 1;
		case 'V':
			printf("fsread-demo %s\n", FSREAD_DEMO_VERSION);
			return 1;
		default:
			usage(stderr, argv[0]);
			return -1;
		}
		continue;
bad:
		fprintf(stderr, "%s: bad value for -%c: '%s'\n", argv[0], c, optarg);
		return -1;
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
		usage(stderr, argv[0]);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct options opt = { .threads = 4, .reads = 100, .rate = 100.0, .slow_pct = 1.0 };
	const char *tid[] = { "tid" }, *tid_size[] = { "tid", "size" };
	struct sigaction sa;
	struct worker *w;
	struct cmon_stats st;
	int r;

	r = parse_args(argc, argv, &opt);
	if (r)
		return r < 0 ? 2 : 0;
	if (opt.seed == 0)
		opt.seed = (unsigned)now_ns() ^ (unsigned)getpid();

	r = cmon_init("fsread");
	if (r < 0 && !opt.quiet)
		fprintf(stderr, "fsread-demo: log not usable (%s); running unlogged\n",
		        strerror(-r));
	else if (!cmon_enabled() && !opt.quiet)
		fprintf(stderr, "fsread-demo: CMON_LOG_FD / CMON_LOG not set; running unlogged\n");
	ev_start = cmon_declare("StartRead", 2, tid_size);
	ev_hit = cmon_declare("CacheHit", 1, tid);
	ev_end = cmon_declare("EndRead", 1, tid);

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	w = calloc(opt.threads, sizeof *w);
	if (!w) {
		fprintf(stderr, "fsread-demo: out of memory\n");
		return 1;
	}
	for (unsigned i = 0; i < opt.threads; i++) {
		w[i].tid = i + 1;
		w[i].rng = ((uint64_t)opt.seed << 16) ^ (0x9E3779B97F4A7C15ull * (i + 1));
		w[i].opt = &opt;
		if ((r = pthread_create(&w[i].thread, NULL, worker_main, &w[i])) != 0) {
			fprintf(stderr, "fsread-demo: cannot start thread: %s\n", strerror(r));
			stopping = 1;
			opt.threads = i;
			break;
		}
	}
	for (unsigned i = 0; i < opt.threads; i++)
		pthread_join(w[i].thread, NULL);
	free(w);

	cmon_flush();
	cmon_get_stats(&st);
	if (!opt.quiet)
		fprintf(stderr,
		        "fsread-demo: %lu reads (%lu hits, %lu slow) by %u thread%s, seed %u; "
		        "log: %llu events written, %llu dropped\n",
		        (unsigned long)total_reads, (unsigned long)total_hits,
		        (unsigned long)total_slow, opt.threads, opt.threads == 1 ? "" : "s", opt.seed,
		        (unsigned long long)st.events_written,
		        (unsigned long long)st.events_dropped);
	return 0;       /* exit() writes what the library still holds */
}
