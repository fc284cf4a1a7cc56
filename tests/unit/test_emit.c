/* test_emit.c — the instrumentation library (libcmon, cmon/emit.h).
 *
 * The library keeps process-wide state that is set up once, from the
 * environment, so every scenario runs in a fresh process: the test re-executes
 * itself as `test_emit --child NAME` with CMON_LOG_FD / CMON_LOG set, the log
 * on descriptor 3 and a control pipe on descriptor 4. The parent reads the
 * log and decodes every frame with the protobuf-c generated code
 * (cmonlog.pb-c.h), re-packs it and requires the very same bytes back.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "cmon/emit.h"
#include "cmonlog.pb-c.h"

extern char **environ;

#define LOG_FD 3        /* the log, in a child */
#define CTL_FD 4        /* control pipe to the parent, in a child */
#define CTL_IN_FD 5     /* control pipe from the parent, in a child */

/* What a child tells the parent at the end (on CTL_FD). */
struct report {
	int64_t pid;              /* the child's pid */
	int64_t tid;              /* the thread id of its main thread */
	int64_t other;            /* scenario-specific (a grandchild's pid) */
	uint64_t emitted;         /* events the child emitted */
	struct cmon_stats st;     /* the library's counters at the end */
};

/* ---- child side ------------------------------------------------------ */

#define CK(c)                                                              \
	do {                                                               \
		if (!(c)) {                                                \
			fprintf(stderr, "child %s:%d: check failed: %s\n", \
			        __FILE__, __LINE__, #c);                   \
			_exit(100);                                        \
		}                                                          \
	} while (0)

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Sends the end-of-run report to the parent. */
static void send_report(int64_t other, uint64_t emitted)
{
	struct report r = { getpid(), gettid(), other, emitted, { 0 } };
	cmon_get_stats(&r.st);
	CK(write(CTL_FD, &r, sizeof r) == (ssize_t)sizeof r);
}

/* Tells the parent C and waits for its answer. */
static void handshake(char c)
{
	char a;
	CK(write(CTL_FD, &c, 1) == 1);
	CK(read(CTL_IN_FD, &a, 1) == 1);
}

/* Unconfigured: everything is a no-op. */
static int child_noop(void)
{
	const char *attrs[] = { "a" };
	struct cmon_stats st;
	cmon_type t;

	CK(!cmon_enabled());
	errno = 0;
	t = cmon_declare("Ev", 1, attrs);
	CK(t == 0 && errno == ENODEV);
	CMON_EMIT(t, 1.0);
	CMON_EMIT(1, 1.0);                   /* an id never handed out */
	cmon_emit(12345, 0, NULL);
	cmon_flush();
	cmon_proc p = cmon_declare_proc("P", 1, attrs, NULL);
	CK(p.call == 0 && p.ret == 0);
	cmon_call(p, 1, (double[]){ 1 });
	cmon_ret(p, 0);
	CK(cmon_init("again") == -EALREADY);
	CK(cmon_get_stats(&st) == 0);
	CK(st.events_written == 0 && st.events_dropped == 0);
	CK(cmon_get_stats(NULL) == -EINVAL);
	return 0;
}

/* A bad configuration: init fails with an errno code, then a no-op. */
static int child_badenv(void)
{
	int r = cmon_init(NULL);

	CK(r < 0);
	CK(!cmon_enabled());
	CK(cmon_declare("Ev", 0, NULL) == 0);
	CMON_EMIT(1, 1.0);
	cmon_flush();
	return 0;
}

/* The Figure 3 events, procedure sugar and awkward values. */
static int child_basic(void)
{
	const char *sr[] = { "tid", "size" }, *tid[] = { "tid" };
	const char *page[] = { "page" };
	cmon_type start, hit, end, none;
	cmon_proc gp;

	CK(cmon_init("emit-basic") == 0);
	CK(cmon_enabled());
	start = cmon_declare("StartRead", 2, sr);
	hit = cmon_declare("CacheHit", 1, tid);
	end = cmon_declare("EndRead", 1, tid);
	none = cmon_declare("Tick", 0, NULL);
	gp = cmon_declare_proc("Lectern__GotoPage", 1, page, NULL);
	CK(start == 1 && hit == 2 && end == 3 && none == 4);
	CK(gp.call == 5 && gp.ret == 6);
	CMON_EMIT(start, 7, 4096);
	CMON_EMIT(hit, 7);
	CMON_EMIT(end, 7);
	cmon_emit(none, 0, NULL);
	CMON_EMIT(start, -1.5, 1e300);
	CMON_EMIT(start, 9007199254740992.0, -0.0);
	CMON_CALL(gp, 3);
	cmon_ret(gp, 42);
	cmon_flush();
	send_report(0, 8);
	return 0;
}

/* Event shapes (tbuf_append): types that share a slot of the thread's
 * shape cache (1 and 9, 2 and 10, ...), one type emitted with different
 * numbers of values in turn, no values, and up to 14 values (over 12 the
 * frame's lengths take two bytes: no shape). Values: shape_value(). */
#define SHAPE_TYPES 10
#define SHAPE_EVENTS 600
#define SHAPE_MAXN 14

/* Event I's number of values: the same for each type over 40 events in a
 * row (4 of its events), then another. */
static size_t shape_n(int i)
{
	return (size_t)(((i / 40) * 7 + i % SHAPE_TYPES) % (SHAPE_MAXN + 1));
}

static double shape_value(int i, size_t k)
{
	return k % 3 == 0 ? (double)i : k % 3 == 1 ? -0.25 * (double)k : 1e10 + (double)(i * k);
}

static int child_shapes(void)
{
	const char *attrs[SHAPE_MAXN] = { "a", "b", "c", "d", "e", "f", "g",
	                                  "h", "i", "j", "k", "l", "m", "n" };

	CK(cmon_init("emit-shapes") == 0);
	for (int t = 0; t < SHAPE_TYPES; t++) {
		char name[16];
		snprintf(name, sizeof name, "S%d", t + 1);
		CK(cmon_declare(name, SHAPE_MAXN, attrs) == (cmon_type)(t + 1));
	}
	for (int i = 0; i < SHAPE_EVENTS; i++) {
		double v[SHAPE_MAXN];
		size_t n = shape_n(i);
		for (size_t k = 0; k < n; k++)
			v[k] = shape_value(i, k);
		cmon_emit((cmon_type)(i % SHAPE_TYPES + 1), n, v);
		if (i % 97 == 0)
			usleep(300);    /* a ts_delta of 3 bytes, not 1 */
	}
	cmon_flush();
	send_report(0, SHAPE_EVENTS);
	return 0;
}

/* Many threads declaring and emitting at once. */
#define NTHREADS 8
#define PER_THREAD 3000
static cmon_type shared_type;

static void *threads_worker(void *arg)
{
	int k = (int)(intptr_t)arg;
	const char *attrs[] = { "thread", "seq" };

	for (int i = 0; i < PER_THREAD; i++) {
		char name[32];
		cmon_type t;

		snprintf(name, sizeof name, "T%d", (k * 7 + i) % 40);
		t = cmon_declare(name, 2, attrs);
		CK(t != 0);
		CMON_EMIT(t, k, i);
		CMON_EMIT(shared_type, k, i);
	}
	return NULL;
}

static int child_threads(void)
{
	const char *attrs[] = { "thread", "seq" };
	pthread_t th[NTHREADS];

	shared_type = cmon_declare("Shared", 2, attrs);
	CK(shared_type != 0);
	for (int k = 0; k < NTHREADS; k++)
		CK(pthread_create(&th[k], NULL, threads_worker,
		                  (void *)(intptr_t)k) == 0);
	for (int k = 0; k < NTHREADS; k++)
		CK(pthread_join(th[k], NULL) == 0);
	cmon_flush();
	send_report(0, 2ull * NTHREADS * PER_THREAD);
	return 0;
}

/* Fills an unread log until batches drop, lets the parent drain it, goes
 * on: the Gap must count exactly what was lost. */
static int child_gap(void)
{
	const char *attrs[] = { "seq" };
	cmon_type seq, late;
	struct cmon_stats st;
	uint64_t n = 0;

	seq = cmon_declare("Seq", 1, attrs);
	CK(seq != 0);
	do {
		CMON_EMIT(seq, (double)n);
		n++;
		cmon_get_stats(&st);
		CK(n < 10000000);
	} while (st.batches_dropped < 5);
	/* A failed write (EAGAIN) does not leak into the program's errno. */
	errno = EINTR;
	CMON_EMIT(seq, (double)n);
	n++;
	cmon_flush();
	CK(errno == EINTR);
	/* Declared while the log is full: its TypeDef must not be lost. */
	late = cmon_declare("Late", 1, attrs);
	CK(late != 0);
	for (int i = 0; i < 500; i++, n++)
		CMON_EMIT(late, (double)n);
	cmon_flush();
	handshake('F');
	for (int i = 0; i < 100; i++, n++)
		CMON_EMIT(i % 2 ? late : seq, (double)n);
	cmon_flush();
	send_report(0, n);
	return 0;
}

/* The same with several threads; each event carries (thread, seq). */
static _Atomic uint64_t gapt_emitted;
static _Atomic int gapt_phase;

static void *gapt_worker(void *arg)
{
	int k = (int)(intptr_t)arg;
	const char *attrs[] = { "thread", "seq" };
	cmon_type t = cmon_declare("TSeq", 2, attrs);
	uint64_t i = 0;

	CK(t != 0);
	while (gapt_phase == 0) {
		CMON_EMIT(t, k, (double)i++);
		if (i % 64 == 0)
			sched_yield();
	}
	cmon_flush();
	while (gapt_phase == 1)
		sleep_ms(1);
	for (int j = 0; j < 100; j++)
		CMON_EMIT(t, k, (double)i++);
	cmon_flush();
	gapt_emitted += i;
	return NULL;
}

static int child_gap_threads(void)
{
	pthread_t th[4];
	struct cmon_stats st;

	for (int k = 0; k < 4; k++)
		CK(pthread_create(&th[k], NULL, gapt_worker,
		                  (void *)(intptr_t)k) == 0);
	do {
		sleep_ms(1);
		cmon_get_stats(&st);
	} while (st.batches_dropped < 20);
	gapt_phase = 1;
	sleep_ms(50);           /* every worker has flushed and is waiting */
	handshake('F');
	gapt_phase = 2;
	for (int k = 0; k < 4; k++)
		CK(pthread_join(th[k], NULL) == 0);
	cmon_flush();           /* a Gap still pending goes out now */
	send_report(0, gapt_emitted);
	return 0;
}

/* fork(): the child must not repeat the parent's buffered events. */
static int child_fork(void)
{
	const char *attrs[] = { "seq", "who" };
	cmon_type ev = cmon_declare("Ev", 2, attrs);
	pid_t pid;
	int status;

	CK(ev != 0);
	for (int i = 0; i < 10; i++)
		CMON_EMIT(ev, i, 0);    /* still buffered at the fork */
	pid = fork();
	CK(pid >= 0);
	if (pid == 0) {
		/* Its own names get ids no other process of the stream uses. */
		cmon_type mine = cmon_declare("Child", 2, attrs);
		CK(mine != 0 && mine != ev && mine != ev + 1);
		CK(cmon_declare("Ev", 2, attrs) == ev);
		for (int i = 100; i < 110; i++)
			CMON_EMIT(i % 2 ? mine : ev, i, 1);
		exit(0);                /* the atexit handler writes them */
	}
	CK(waitpid(pid, &status, 0) == pid);
	CK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The parent declares after the fork, too. */
	cmon_type late = cmon_declare("Parent", 2, attrs);
	CK(late == ev + 1);
	for (int i = 10; i < 20; i++)
		CMON_EMIT(i % 2 ? late : ev, i, 0);
	send_report(pid, 20);
	exit(0);
}

/* exit(): the main thread's batch, an ended thread's and a running one's. */
static cmon_type exit_type;
static _Atomic int exit_worker_ready;

static void *exit_worker(void *arg)
{
	int k = (int)(intptr_t)arg;

	for (int i = 0; i < 5; i++)
		CMON_EMIT(exit_type, k * 100 + i);
	if (k == 2) {
		exit_worker_ready = 1;  /* tell main, then stay alive */
		for (;;)
			pause();
	}
	return NULL;
}

static int child_exit(void)
{
	const char *attrs[] = { "seq" };
	pthread_t a, b;

	exit_type = cmon_declare("X", 1, attrs);
	CK(exit_type != 0);
	for (int i = 0; i < 5; i++)
		CMON_EMIT(exit_type, i);
	CK(pthread_create(&a, NULL, exit_worker, (void *)1) == 0);
	CK(pthread_join(a, NULL) == 0);
	CK(pthread_create(&b, NULL, exit_worker, (void *)2) == 0);
	for (int i = 5; i < 10; i++)
		CMON_EMIT(exit_type, i);
	while (!exit_worker_ready)
		sleep_ms(1);
	send_report(0, 20);
	exit(0);                /* worker 2 is still running */
}

/* exit() while other threads are busy emitting: their batches are written
 * between two of their events, nothing torn, nothing written twice. */
static cmon_type busy_type;

static void *busy_worker(void *arg)
{
	int k = (int)(intptr_t)arg;

	for (uint64_t i = 0;; i++)
		CMON_EMIT(busy_type, k, (double)i);
	return NULL;
}

static int child_exit_busy(void)
{
	const char *attrs[] = { "thread", "seq" };
	pthread_t th[3];

	busy_type = cmon_declare("Busy", 2, attrs);
	CK(busy_type != 0);
	for (int k = 0; k < 3; k++)
		CK(pthread_create(&th[k], NULL, busy_worker, (void *)(intptr_t)k) == 0);
	sleep_ms(30);
	exit(0);
}

/* $CMON_LOG names a file: appended to, descriptor close-on-exec. */
static int child_path(void)
{
	const char *path = getenv("CMON_LOG");
	const char *attrs[] = { "seq" };
	cmon_type t;
	int found = 0;

	CK(cmon_init("emit-path") == 0);
	t = cmon_declare("P", 1, attrs);
	CK(t != 0);
	for (int i = 0; i < 1000; i++)
		CMON_EMIT(t, i);
	for (int fd = 0; fd < 1024; fd++) {
		char link[64], target[PATH_MAX];
		ssize_t n;

		snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
		n = readlink(link, target, sizeof target - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (strcmp(target, path) == 0) {
			CK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
			CK(fcntl(fd, F_GETFL) & O_APPEND);
			found++;
		}
	}
	CK(found == 1);
	return 0;            /* returning from main flushes too */
}

/* The 10 ms rule: an event waits in the batch, but not for long. */
static int child_latency(void)
{
	const char *attrs[] = { "seq" };
	cmon_type t = cmon_declare("L", 1, attrs);

	CK(t != 0);
	CMON_EMIT(t, 0);
	sleep_ms(20);
	CMON_EMIT(t, 1);        /* the oldest is 20 ms old: written now */
	handshake('R');
	CMON_EMIT(t, 2);        /* batched: not written yet */
	handshake('S');
	send_report(0, 3);
	return 0;               /* written at exit */
}

/* The reader goes away: no SIGPIPE (delivered, or left pending when the
 * program blocks it), logging stops, later events are counted as lost. */
static int child_epipe(void)
{
	const char *attrs[] = { "seq" };
	struct cmon_stats st;
	sigset_t pending, set;
	cmon_type t;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	if (getenv("EPIPE_BLOCKED"))
		pthread_sigmask(SIG_BLOCK, &set, NULL);
	t = cmon_declare("E", 1, attrs);
	CK(t != 0);
	for (int i = 0; i < 10; i++)
		CMON_EMIT(t, i);
	cmon_flush();
	handshake('D');         /* the parent closes its read end */
	for (int i = 10; i < 20000; i++)
		CMON_EMIT(t, i);
	cmon_flush();
	CK(!cmon_enabled());
	cmon_get_stats(&st);
	CK(st.events_written == 10);
	CK(st.events_dropped == 19990);
	sigpending(&pending);
	CK(!sigismember(&pending, SIGPIPE));
	return 0;
}

/* A signal handler emitting while the thread it interrupted is inside an
 * emit: that event is dropped and counted, the batch stays intact. */
static cmon_type sig_type;
static volatile sig_atomic_t sig_count;

static void on_alarm(int sig)
{
	(void)sig;
	CMON_EMIT(sig_type, -1);
	sig_count++;
}

static int child_signal(void)
{
	const char *attrs[] = { "seq" };
	struct itimerval it = { { 0, 50 }, { 0, 50 } };
	cmon_type t = cmon_declare("Main", 1, attrs);
	uint64_t n = 0;

	sig_type = cmon_declare("Sig", 1, attrs);
	CK(t != 0 && sig_type != 0);
	signal(SIGALRM, on_alarm);
	CK(setitimer(ITIMER_REAL, &it, NULL) == 0);
	for (uint64_t start = mono_ns(); mono_ns() - start < 100000000u; n++)
		CMON_EMIT(t, (double)n);
	memset(&it, 0, sizeof it);
	setitimer(ITIMER_REAL, &it, NULL);
	CK(sig_count > 10);
	/* The parent drains the pipe: flush until the last Gap got through,
	 * so nothing is pending when we report. */
	for (int tries = 0; tries < 5000; tries++) {
		struct cmon_stats st;
		cmon_flush();
		cmon_get_stats(&st);
		if (st.gap_reported == st.events_dropped)
			break;
		sleep_ms(1);
	}
	send_report(sig_count, n + (uint64_t)sig_count);
	return 0;
}

/* Name rules and limits. */
static int child_names(void)
{
	const char *one[] = { "a" }, *bad[] = { "a b" };
	const char *many[CMON_MAX_ATTRS + 1];
	char longname[CMON_MAX_NAME + 2];
	cmon_type a, b;
	cmon_proc p;

	for (int i = 0; i <= CMON_MAX_ATTRS; i++)
		many[i] = "x";
	const char *badnames[] = { "", "1abc", "a-b", "call@", "call@1x",
	                           "x@y", "ret@a@b", "é", "intv@p" };
	for (size_t i = 0; i < sizeof badnames / sizeof *badnames; i++) {
		errno = 0;
		CK(cmon_declare(badnames[i], 0, NULL) == 0 && errno == EINVAL);
	}
	CK(cmon_declare(NULL, 0, NULL) == 0);
	CK(cmon_declare("A", 1, NULL) == 0);
	CK(cmon_declare("A", 1, bad) == 0 && errno == EINVAL);
	CK(cmon_declare("A", CMON_MAX_ATTRS + 1, many) == 0 && errno == E2BIG);
	memset(longname, 'n', sizeof longname);
	longname[CMON_MAX_NAME] = '\0';
	CK(cmon_declare(longname, CMON_MAX_ATTRS, many) != 0);
	longname[CMON_MAX_NAME] = 'n';
	longname[CMON_MAX_NAME + 1] = '\0';
	CK(cmon_declare(longname, 0, NULL) == 0 && errno == EINVAL);
	a = cmon_declare("A", 1, one);
	b = cmon_declare("A", 0, NULL);
	CK(a != 0 && a == b);
	CK(cmon_declare("call@Q", 1, one) != 0);
	p = cmon_declare_proc("Q", 1, one, "result");
	CK(p.call == cmon_declare("call@Q", 0, NULL));
	CK(p.ret == cmon_declare("ret@Q", 0, NULL));
	p = cmon_declare_proc("call@Q", 0, NULL, NULL);
	CK(p.call == 0 && p.ret == 0);
	/* The type limit. */
	for (int i = 0; i < CMON_MAX_TYPES; i++) {
		char name[32];
		snprintf(name, sizeof name, "Many%d", i);
		cmon_type t = cmon_declare(name, 0, NULL);
		if (!t) {
			CK(errno == ENOSPC);
			break;
		}
	}
	errno = 0;
	CK(cmon_declare("OneTooMany", 0, NULL) == 0 && errno == ENOSPC);
	CMON_EMIT(CMON_MAX_TYPES + 1, 1);   /* never handed out: ignored */
	cmon_flush();
	return 0;
}

/* One event of the program's own after start (and the library's cost
 * measured, unless CMON_OVERHEAD=0); reports how long cmon_init took. */
static int child_overhead(void)
{
	const char *attrs[] = { "a", "b" };
	uint64_t t0 = mono_ns(), took;
	cmon_type t;

	CK(cmon_init("emit-overhead") == 0);
	took = mono_ns() - t0;
	t = cmon_declare("First", 2, attrs);
	CK(t == 1);
	CMON_EMIT(t, 7, 8);
	cmon_flush();
	send_report((int64_t)took, 1);
	return 0;
}

/* Two threads emitting as fast as they can for PERIODIC_MS each: "Light"
 * events of 2 values and "Heavy" ones of 20 (five times the bytes, so five
 * times the batch writes per event). One after the other: at once, each
 * one's writes to the file would wait on the other's (the inode's lock),
 * and a light thread that waits behind five times as many heavy writes
 * can measure more per event than the heavy one (a run in four did). */
#define PERIODIC_MS 150
static cmon_type light_type, heavy_type;

static void *periodic_worker(void *arg)
{
	bool heavy = arg != NULL;
	double v[20] = { 0 };
	uint64_t end = mono_ns() + PERIODIC_MS * 1000000ull;

	for (int i = 1; i < 20; i++)
		v[i] = i + 0.5;
	while (mono_ns() < end)
		for (int i = 0; i < 100; i++) {
			v[0] = i;
			cmon_emit(heavy ? heavy_type : light_type, heavy ? 20 : 2, v);
		}
	cmon_flush();
	return NULL;
}

static int child_overhead_periodic(void)
{
	const char *attrs[] = { "a", "b" };
	pthread_t th[2];

	light_type = cmon_declare("Light", 2, attrs);
	heavy_type = cmon_declare("Heavy", 2, attrs);
	CK(light_type && heavy_type);
	for (int k = 0; k < 2; k++) {
		CK(pthread_create(&th[k], NULL, periodic_worker, k ? &th[k] : NULL) == 0);
		CK(pthread_join(th[k], NULL) == 0);
	}
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(void);
} children[] = {
	{ "noop", child_noop },       { "badenv", child_badenv },
	{ "basic", child_basic },     { "threads", child_threads },
	{ "gap", child_gap },         { "gap_threads", child_gap_threads },
	{ "fork", child_fork },       { "exit", child_exit },
	{ "path", child_path },       { "latency", child_latency },
	{ "epipe", child_epipe },     { "names", child_names },
	{ "signal", child_signal },   { "exit_busy", child_exit_busy },
	{ "overhead", child_overhead }, { "overhead_periodic", child_overhead_periodic },
	{ "shapes", child_shapes },
};

/* ---- parent side: running children ------------------------------------ */

/* A running child and our ends of its pipes. */
struct child {
	pid_t pid;         /* the child */
	int log;           /* read end of its log, or -1 */
	int ctl;           /* its reports and handshakes */
	int ctl_out;       /* our handshake answers */
};

/* Starts `test_emit --child NAME` with the environment entries ENV (NULL
 * terminated, "KEY=VALUE"; CMON_* of ours are removed) and LOGW (or -1) as
 * descriptor 3. */
static struct child start_child(const char *name, const char *const *env,
                                int logw)
{
	struct child c = { -1, -1, -1, -1 };
	int ctl[2], in[2];
	char *envp[256];
	size_t n = 0;

	assert_int_equal(pipe2(ctl, O_CLOEXEC), 0);
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	for (char **e = environ; *e && n < 200; e++)
		if (strncmp(*e, "CMON_", 5) != 0)
			envp[n++] = *e;
	for (; env && *env; env++)
		envp[n++] = (char *)*env;
	envp[n] = NULL;
	c.pid = fork();
	assert_true(c.pid >= 0);
	if (c.pid == 0) {
		char *argv[] = { "test_emit", "--child", (char *)name, NULL };
		/* out of the way first, then into place (dup2 clears CLOEXEC) */
		int lw = logw >= 0 ? fcntl(logw, F_DUPFD_CLOEXEC, 20) : -1;
		int cw = fcntl(ctl[1], F_DUPFD_CLOEXEC, 20);
		int ir = fcntl(in[0], F_DUPFD_CLOEXEC, 20);
		if (lw >= 0)
			dup2(lw, LOG_FD);
		dup2(cw, CTL_FD);
		dup2(ir, CTL_IN_FD);
		execve("/proc/self/exe", argv, envp);
		_exit(127);
	}
	close(ctl[1]);
	close(in[0]);
	c.ctl = ctl[0];
	c.ctl_out = in[1];
	return c;
}

/* Waits for the child; returns its exit status (or 128 + signal). */
static int wait_child(struct child *c)
{
	int status;

	assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
	close(c->ctl);
	close(c->ctl_out);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

/* A growable byte buffer. */
struct bytes {
	uint8_t *p;
	size_t len, cap;
};

/* Appends what FD has: until EOF, or (NONBLOCK) until it would block. */
static void read_into(struct bytes *b, int fd, bool nonblock)
{
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, nonblock ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
	for (;;) {
		ssize_t n;

		if (b->cap - b->len < 65536) {
			b->cap = b->cap * 2 + 65536;
			b->p = realloc(b->p, b->cap);
			assert_non_null(b->p);
		}
		n = read(fd, b->p + b->len, b->cap - b->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && nonblock)
			break;
		assert_true(n >= 0);
		if (n == 0)
			break;
		b->len += (size_t)n;
	}
	fcntl(fd, F_SETFL, fl);
}

/* Reads the child's end-of-run report. */
static void read_report(struct child *c, struct report *r)
{
	assert_int_equal(read(c->ctl, r, sizeof *r), (ssize_t)sizeof *r);
}

/* Waits for handshake byte WANT from the child (it then waits for us). */
static void expect_handshake(struct child *c, char want)
{
	char got = 0;
	assert_int_equal(read(c->ctl, &got, 1), 1);
	assert_int_equal(got, want);
}

/* Lets the child go on after a handshake. */
static void answer_handshake(struct child *c)
{
	assert_int_equal(write(c->ctl_out, "G", 1), 1);
}

/* Runs a child that needs no log and returns its exit status. */
static int run_plain(const char *name, const char *const *env)
{
	struct child c = start_child(name, env, -1);
	return wait_child(&c);
}

/* ---- parent side: decoding a log --------------------------------------- */

/* A decoded log. */
struct log {
	Cmonlog__Record **rec;   /* every record, in order */
	size_t n;                /* how many */
	Cmonlog__TypeDef **tdef; /* every distinct TypeDef, in order */
	size_t ntdef;            /* how many */
	size_t events;           /* Event records */
	size_t deltas;           /* of which with ts_delta (made absolute) */
	size_t ievents;          /* of which with ivalues (made doubles) */
	uint64_t last_ts;        /* the last Event's timestamp */
	uint64_t gaps;           /* sum of the Gap counts */
	size_t overheads;        /* Overhead records */
};

/* The TypeDef of type ID seen so far, or NULL. */
static Cmonlog__TypeDef *find_type(const struct log *lg, uint32_t id)
{
	for (size_t i = 0; i < lg->ntdef; i++)
		if (lg->tdef[i]->id == id)
			return lg->tdef[i];
	return NULL;
}

/* The TypeDef named NAME, or NULL. */
static Cmonlog__TypeDef *find_name(const struct log *lg, const char *name)
{
	for (size_t i = 0; i < lg->ntdef; i++)
		if (strcmp(lg->tdef[i]->name, name) == 0)
			return lg->tdef[i];
	return NULL;
}

/* Decodes a whole log, checking the contract on the way: whole frames, each
 * re-packing to the same bytes, Header first (and only there), a TypeDef
 * before the first Event of its type and never redefined differently. */
static void decode(const uint8_t *p, size_t len, struct log *lg)
{
	size_t off = 0;

	memset(lg, 0, sizeof *lg);
	while (off < len) {
		uint64_t flen = 0;
		unsigned shift = 0;
		Cmonlog__Record *r;
		uint8_t *again;

		do {
			assert_true(off < len);
			assert_true(shift < 64);
			flen |= (uint64_t)(p[off] & 0x7f) << shift;
			shift += 7;
		} while (p[off++] & 0x80);
		assert_true(flen > 0 && flen <= len - off);   /* whole frame */
		r = cmonlog__record__unpack(NULL, flen, p + off);
		assert_non_null(r);
		/* protobuf-c writes exactly our bytes back, but for one value
		 * in Event.ivalues, which we write unpacked (a byte shorter) */
		if (r->kind_case == CMONLOG__RECORD__KIND_EVENT &&
		    r->event->n_ivalues == 1) {
			assert_int_equal(cmonlog__record__get_packed_size(r), flen + 1);
		} else {
			assert_int_equal(cmonlog__record__get_packed_size(r), flen);
			again = malloc(flen);
			assert_non_null(again);
			cmonlog__record__pack(r, again);
			assert_memory_equal(again, p + off, flen);
			free(again);
		}
		off += flen;

		if (lg->n == 0)
			assert_int_equal(r->kind_case, CMONLOG__RECORD__KIND_HEADER);
		else
			assert_int_not_equal(r->kind_case, CMONLOG__RECORD__KIND_HEADER);
		switch (r->kind_case) {
		case CMONLOG__RECORD__KIND_TYPEDEF: {
			Cmonlog__TypeDef *t = r->typedef_, *old;
			assert_true(t->has_id && t->id >= 1);
			old = find_type(lg, t->id);
			if (old) {      /* a repeat must be the same type */
				assert_string_equal(old->name, t->name);
				break;
			}
			assert_null(find_name(lg, t->name)); /* one id per name */
			lg->tdef = realloc(lg->tdef, (lg->ntdef + 1) * sizeof *lg->tdef);
			assert_non_null(lg->tdef);
			lg->tdef[lg->ntdef++] = t;
			break;
		}
		case CMONLOG__RECORD__KIND_EVENT: {
			Cmonlog__Event *e = r->event;
			assert_true(e->has_type && e->has_thread);
			/* ts, or (into a file only) ts_delta: made absolute here */
			assert_true(e->has_ts != e->has_ts_delta);
			if (e->has_ts_delta) {
				assert_true(lg->events > 0);
				e->ts = lg->last_ts + (uint64_t)e->ts_delta;
				e->has_ts = true;
				e->has_ts_delta = false;
				lg->deltas++;
			}
			lg->last_ts = e->ts;
			/* values, or integral ones in ivalues: made doubles here */
			assert_false(e->n_values && e->n_ivalues);
			if (e->n_ivalues) {
				e->values = malloc(e->n_ivalues * sizeof *e->values);
				assert_non_null(e->values);
				for (size_t k = 0; k < e->n_ivalues; k++)
					e->values[k] = (double)e->ivalues[k];
				e->n_values = e->n_ivalues;
				lg->ievents++;
			}
			assert_non_null(find_type(lg, e->type)); /* defined before use */
			lg->events++;
			break;
		}
		case CMONLOG__RECORD__KIND_GAP:
			assert_true(r->gap->has_count && r->gap->count > 0);
			lg->gaps += r->gap->count;
			break;
		case CMONLOG__RECORD__KIND_OVERHEAD:
			assert_true(r->overhead->has_thread && r->overhead->has_overhead_ns &&
			            r->overhead->has_overhead_spread_ns);
			assert_true(isfinite(r->overhead->overhead_ns) && r->overhead->overhead_ns > 0);
			assert_true(isfinite(r->overhead->overhead_spread_ns) &&
			            r->overhead->overhead_spread_ns >= 0);
			lg->overheads++;
			break;
		case CMONLOG__RECORD__KIND_HEADER:
			break;
		default:
			fail_msg("unexpected record kind %d", r->kind_case);
		}
		if ((lg->n & (lg->n - 1)) == 0) {      /* 0, 1, 2, 4, ... */
			lg->rec = realloc(lg->rec, (lg->n ? 2 * lg->n : 1) *
			                                   sizeof *lg->rec);
			assert_non_null(lg->rec);
		}
		lg->rec[lg->n++] = r;
	}
	assert_int_equal(off, len);
}

/* Offset of the second Header frame in P (two logs appended), or LEN. */
static size_t second_header(const uint8_t *p, size_t len)
{
	size_t off = 0;
	int headers = 0;

	while (off < len) {
		uint64_t flen = 0;
		unsigned shift = 0;
		size_t start = off;

		do {
			flen |= (uint64_t)(p[off] & 0x7f) << shift;
			shift += 7;
		} while (p[off++] & 0x80 && off < len);
		/* Record.header is field 1, length-delimited: tag 0x0a */
		if (p[off] == 0x0a && ++headers == 2)
			return start;
		off += flen;
	}
	return len;
}

static void log_free(struct log *lg)
{
	for (size_t i = 0; i < lg->n; i++)
		cmonlog__record__free_unpacked(lg->rec[i], NULL);
	free(lg->rec);
	free(lg->tdef);
}

/* The name of event record R's type. */
static const char *ev_name(const struct log *lg, const Cmonlog__Record *r)
{
	return find_type(lg, r->event->type)->name;
}

/* Makes a pipe for a child's log (its write end becomes the child's fd 3). */
static void log_pipe(int p[2])
{
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
}

/* Runs child NAME on a fresh pipe with the environment ENV (which names
 * the pipe: CMON_LOG_FD=3), reading everything; returns the bytes. */
static struct bytes run_logged_env(const char *name, const char *const *env,
                                   struct report *rep, int *status)
{
	struct bytes b = { 0 };
	struct child c;
	int p[2];

	log_pipe(p);
	c = start_child(name, env, p[1]);
	close(p[1]);
	read_into(&b, p[0], false);
	close(p[0]);
	if (rep)
		read_report(&c, rep);
	*status = wait_child(&c);
	return b;
}

/* Runs child NAME on a fresh pipe, reading everything; returns the bytes. */
static struct bytes run_logged(const char *name, struct report *rep,
                               int *status)
{
	static const char *const env[] = { "CMON_LOG_FD=3", NULL };

	return run_logged_env(name, env, rep, status);
}

/* ---- the tests --------------------------------------------------------- */

static void test_noop_unconfigured(void **state)
{
	(void)state;
	assert_int_equal(run_plain("noop", NULL), 0);
	/* Empty values count as unset. */
	const char *const empty[] = { "CMON_LOG_FD=", "CMON_LOG=", NULL };
	assert_int_equal(run_plain("noop", empty), 0);
}

static void test_bad_environment_is_ignored(void **state)
{
	static const char *const bad[][3] = {
		{ "CMON_LOG_FD=abc", NULL, NULL },
		{ "CMON_LOG_FD=-3", NULL, NULL },
		{ "CMON_LOG_FD=99999999999999", NULL, NULL },
		{ "CMON_LOG_FD=3x", NULL, NULL },
		{ "CMON_LOG_FD=77", NULL, NULL },          /* not open */
		{ "CMON_LOG=/nonexistent/dir/log", NULL, NULL },
		{ "CMON_LOG_FD=77", "CMON_LOG=/nonexistent/x", NULL },
	};
	(void)state;
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		assert_int_equal(run_plain("badenv", bad[i]), 0);

	/* A FIFO nobody reads: never wait for a reader. */
	char dir[] = "/tmp/test_emit.XXXXXX", fifo[64], env[96];
	assert_non_null(mkdtemp(dir));
	snprintf(fifo, sizeof fifo, "%s/fifo", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	snprintf(env, sizeof env, "CMON_LOG=%s", fifo);
	const char *const fifo_env[] = { env, NULL };
	assert_int_equal(run_plain("badenv", fifo_env), 0);
	unlink(fifo);
	rmdir(dir);

	/* A read-only descriptor. */
	int p[2];
	log_pipe(p);
	close(p[1]);
	const char *const ro[] = { "CMON_LOG_FD=3", NULL };
	struct child c = start_child("badenv", ro, p[0]);
	assert_int_equal(wait_child(&c), 0);
	close(p[0]);
}

static void test_output_decodes_with_protobuf_c(void **state)
{
	struct report rep;
	struct log lg;
	int status, ev = 0;
	uint64_t t0 = mono_ns(), t1, last = 0;
	struct bytes b = run_logged("basic", &rep, &status);
	(void)state;

	t1 = mono_ns();
	assert_int_equal(status, 0);
	decode(b.p, b.len, &lg);
	assert_int_equal(lg.events, 8);
	assert_int_equal(lg.gaps, 0);
	assert_int_equal(lg.ievents, 0);     /* doubles always (PERFORMANCE.md) */
	assert_int_equal(lg.deltas, 0);      /* a pipe: absolute ts only */
	assert_string_equal(find_type(&lg, 1)->name, "StartRead");
	assert_int_equal(find_type(&lg, 1)->n_attrs, 2);
	assert_string_equal(find_type(&lg, 1)->attrs[0], "tid");
	assert_string_equal(find_type(&lg, 1)->attrs[1], "size");
	assert_string_equal(find_type(&lg, 2)->name, "CacheHit");
	assert_string_equal(find_type(&lg, 3)->name, "EndRead");
	assert_string_equal(find_type(&lg, 4)->name, "Tick");
	assert_int_equal(find_type(&lg, 4)->n_attrs, 0);
	assert_string_equal(find_type(&lg, 5)->name, "call@Lectern__GotoPage");
	assert_string_equal(find_type(&lg, 5)->attrs[0], "page");
	assert_string_equal(find_type(&lg, 6)->name, "ret@Lectern__GotoPage");
	assert_int_equal(find_type(&lg, 6)->n_attrs, 2);
	assert_string_equal(find_type(&lg, 6)->attrs[0], "r");
	assert_string_equal(find_type(&lg, 6)->attrs[1], "exact");

	static const struct {
		uint32_t type;
		size_t n;
		double v[2];
	} want[] = {
		{ 1, 2, { 7, 4096 } }, { 2, 1, { 7 } },       { 3, 1, { 7 } },
		{ 4, 0, { 0 } },       { 1, 2, { -1.5, 1e300 } },
		{ 1, 2, { 9007199254740992.0, -0.0 } },
		{ 5, 1, { 3 } },       { 6, 2, { 42, 1 } },
	};
	for (size_t i = 0; i < lg.n; i++) {
		Cmonlog__Event *e;
		if (lg.rec[i]->kind_case != CMONLOG__RECORD__KIND_EVENT)
			continue;
		e = lg.rec[i]->event;
		assert_int_equal(e->type, want[ev].type);
		assert_int_equal(e->thread, rep.tid);
		assert_true(e->ts >= t0 && e->ts <= t1 && e->ts >= last);
		last = e->ts;
		assert_int_equal(e->n_values, want[ev].n);
		for (size_t k = 0; k < e->n_values; k++) {
			assert_memory_equal(&e->values[k], &want[ev].v[k],
			                    sizeof(double));
		}
		ev++;
	}
	assert_int_equal(rep.st.events_written, 8);
	log_free(&lg);
	free(b.p);
}

/* The events of the "shapes" child in LG (decoded, ts_delta made
 * absolute), all of thread TID and timed between T0 and T1: each its own
 * type, time and values. */
static void check_shapes(const struct log *lg, int64_t tid, uint64_t t0, uint64_t t1)
{
	int ev = 0;
	uint64_t last = 0;

	assert_int_equal(lg->events, SHAPE_EVENTS);
	for (size_t i = 0; i < lg->n; i++) {
		const Cmonlog__Event *e;
		if (lg->rec[i]->kind_case != CMONLOG__RECORD__KIND_EVENT)
			continue;
		e = lg->rec[i]->event;
		assert_int_equal(e->type, ev % SHAPE_TYPES + 1);
		assert_int_equal(e->thread, tid);
		assert_true(e->has_ts && e->ts >= last);
		assert_true(e->ts >= t0 && e->ts <= t1);
		last = e->ts;
		assert_int_equal(e->n_values, shape_n(ev));
		for (size_t k = 0; k < e->n_values; k++) {
			double want = shape_value(ev, k);
			assert_memory_equal(&e->values[k], &want, sizeof want);
		}
		ev++;
	}
}

/* An event of a shape the thread wrote before copies that frame's fixed
 * part: the bytes are still exactly protobuf-c's (decode() re-packs every
 * record), and every event has its own type, thread, time and values;
 * into a pipe (absolute ts) ... */
static void test_event_shapes(void **state)
{
	struct report rep;
	struct log lg;
	int status;
	uint64_t t0 = mono_ns();
	struct bytes b = run_logged("shapes", &rep, &status);
	uint64_t t1 = mono_ns();
	(void)state;

	assert_int_equal(status, 0);
	decode(b.p, b.len, &lg);
	assert_int_equal(lg.deltas, 0);
	check_shapes(&lg, rep.tid, t0, t1);
	assert_int_equal(rep.st.events_written, SHAPE_EVENTS);
	log_free(&lg);
	free(b.p);
}

/* Runs child NAME TIMES times with CMON_LOG naming one regular file in a
 * fresh folder, and returns what the file holds then (both removed). */
static struct bytes run_into_file(const char *name, int times)
{
	char dir[] = "/tmp/test_emit.XXXXXX", path[64], env[96];
	struct bytes b = { 0 };
	int fd;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/app.log", dir);
	snprintf(env, sizeof env, "CMON_LOG=%s", path);
	const char *const e[] = { env, NULL };
	for (int i = 0; i < times; i++)
		assert_int_equal(run_plain(name, e), 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	read_into(&b, fd, false);
	close(fd);
	unlink(path);
	rmdir(dir);
	return b;
}

/* ... and into a regular file (ts_delta after a batch's first event, of 1
 * to 3 bytes). */
static void test_event_shapes_file(void **state)
{
	uint64_t t0 = mono_ns();
	struct bytes b = run_into_file("shapes", 1);
	uint64_t t1 = mono_ns();
	struct log lg;
	(void)state;

	decode(b.p, b.len, &lg);
	assert_true(lg.deltas > SHAPE_EVENTS / 2 && lg.deltas < lg.events);
	for (size_t i = 0; i < lg.n; i++)
		if (lg.rec[i]->kind_case == CMONLOG__RECORD__KIND_EVENT) {
			check_shapes(&lg, lg.rec[i]->event->thread, t0, t1);
			break;
		}
	log_free(&lg);
	free(b.p);
}

static void test_header_first(void **state)
{
	struct report rep;
	struct log lg;
	struct timespec w0, w1;
	char host[256];
	int status;
	(void)state;

	clock_gettime(CLOCK_REALTIME, &w0);
	struct bytes b = run_logged("basic", &rep, &status);
	clock_gettime(CLOCK_REALTIME, &w1);
	assert_int_equal(status, 0);
	decode(b.p, b.len, &lg);            /* also: Header first and once */
	Cmonlog__Header *h = lg.rec[0]->header;
	assert_string_equal(h->magic, "cmon-bin");
	assert_true(h->has_version && h->version == 1);
	assert_string_equal(h->program, "emit-basic");
	assert_int_equal(gethostname(host, sizeof host), 0);
	assert_string_equal(h->machine, host);
	assert_true(h->has_pid && h->pid == rep.pid);
	assert_true(h->has_tick_ns && h->tick_ns == 1.0);
	assert_string_equal(h->clock, "CLOCK_MONOTONIC");
	assert_true(h->has_start_unix_ns);
	assert_true(h->start_unix_ns >= w0.tv_sec * 1000000000ll + w0.tv_nsec);
	assert_true(h->start_unix_ns <= w1.tv_sec * 1000000000ll + w1.tv_nsec);
	assert_int_equal(h->n_extra, 2);
	assert_string_equal(h->extra[0]->key, "start_ts");
	assert_string_equal(h->extra[1]->key, "writer");
	/* start_ts is on the events' clock, before the first event */
	assert_true(strtoull(h->extra[0]->value, NULL, 10) <= lg.rec[1 + 6]->event->ts);
	assert_int_equal(lg.rec[7]->kind_case, CMONLOG__RECORD__KIND_EVENT);
	log_free(&lg);
	free(b.p);
}

static void test_typedef_before_first_use_threads(void **state)
{
	struct report rep;
	struct log lg;
	int status;
	uint64_t per[NTHREADS][2] = { { 0 } };
	(void)state;

	struct bytes b = run_logged("threads", &rep, &status);
	assert_int_equal(status, 0);
	decode(b.p, b.len, &lg);            /* checks TypeDef before use */
	assert_int_equal(lg.events + rep.st.events_dropped, rep.emitted);
	assert_int_equal(lg.events, rep.st.events_written);
	assert_int_equal(lg.gaps, rep.st.gap_reported);
	assert_int_equal(lg.gaps, rep.st.events_dropped);
	/* Each thread's events arrive in its order. */
	for (size_t i = 0; i < lg.n; i++) {
		Cmonlog__Event *e;
		int k, shared;
		if (lg.rec[i]->kind_case != CMONLOG__RECORD__KIND_EVENT)
			continue;
		e = lg.rec[i]->event;
		k = (int)e->values[0];
		shared = strcmp(ev_name(&lg, lg.rec[i]), "Shared") == 0;
		assert_true(k >= 0 && k < NTHREADS);
		assert_true((uint64_t)e->values[1] + 1 > per[k][shared] ||
		            per[k][shared] == 0);
		per[k][shared] = (uint64_t)e->values[1] + 1;
	}
	log_free(&lg);
	free(b.p);
}

/* Checks a single-thread sequence log: seq strictly increasing, and every
 * hole exactly as large as the Gap just before the next event. */
static void check_seq_gaps(const struct log *lg)
{
	uint64_t next = 0, gap = 0;

	for (size_t i = 0; i < lg->n; i++) {
		Cmonlog__Record *r = lg->rec[i];
		if (r->kind_case == CMONLOG__RECORD__KIND_GAP)
			gap += r->gap->count;
		if (r->kind_case != CMONLOG__RECORD__KIND_EVENT)
			continue;
		uint64_t s = (uint64_t)r->event->values[0];
		assert_int_equal(s, next + gap);
		next = s + 1;
		gap = 0;
	}
}

/* The gap scenario on descriptor pair P (P[1] is the child's log). */
static void gap_scenario(const char *name, int p[2], bool single_thread)
{
	static const char *const env[] = { "CMON_LOG_FD=3", NULL };
	struct bytes b = { 0 };
	struct report rep;
	struct log lg;
	struct child c;

	c = start_child(name, env, p[1]);
	close(p[1]);
	expect_handshake(&c, 'F');     /* the log is full and losing */
	read_into(&b, p[0], true);     /* drain it */
	answer_handshake(&c);
	read_into(&b, p[0], false);
	close(p[0]);
	read_report(&c, &rep);
	assert_int_equal(wait_child(&c), 0);

	decode(b.p, b.len, &lg);       /* whole records only */
	assert_true(rep.st.events_dropped > 0);
	assert_int_equal(lg.events, rep.st.events_written);
	assert_int_equal(lg.events + rep.st.events_dropped, rep.emitted);
	assert_int_equal(lg.gaps, rep.st.events_dropped);
	assert_int_equal(rep.st.gap_reported, rep.st.events_dropped);
	if (single_thread) {
		check_seq_gaps(&lg);
		assert_non_null(find_name(&lg, "Late"));
	} else {
		/* per thread: strictly increasing; holes sum to the gaps */
		uint64_t next[4] = { 0 }, holes = 0;
		for (size_t i = 0; i < lg.n; i++) {
			Cmonlog__Event *e;
			if (lg.rec[i]->kind_case != CMONLOG__RECORD__KIND_EVENT)
				continue;
			e = lg.rec[i]->event;
			int k = (int)e->values[0];
			uint64_t s = (uint64_t)e->values[1];
			assert_true(k >= 0 && k < 4 && s >= next[k]);
			holes += s - next[k];
			next[k] = s + 1;
		}
		/* events lost after a thread's last received one are holes too */
		uint64_t total = 0;
		for (int k = 0; k < 4; k++)
			total += next[k];
		holes += rep.emitted - total;
		assert_int_equal(holes, lg.gaps);
	}
	log_free(&lg);
	free(b.p);
}

static void test_gap_counts_drops_on_full_pipe(void **state)
{
	int p[2];
	(void)state;

	log_pipe(p);
	gap_scenario("gap", p, true);
}

static void test_gap_counts_drops_threads(void **state)
{
	int p[2];
	(void)state;

	log_pipe(p);
	gap_scenario("gap_threads", p, false);
}

static void test_gap_on_socket_whole_records(void **state)
{
	int s[2], small = 4096;
	(void)state;

	/* A stream socket may take part of a write: the library must finish
	 * the record before anything else. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0);
	setsockopt(s[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
	setsockopt(s[0], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
	gap_scenario("gap", s, true);
}

static void test_fork_writes_each_event_once(void **state)
{
	struct report rep;
	struct log lg;
	int status, seen[110] = { 0 };
	(void)state;

	struct bytes b = run_logged("fork", &rep, &status);
	assert_int_equal(status, 0);
	decode(b.p, b.len, &lg);
	assert_int_equal(lg.events, 30);
	for (size_t i = 0; i < lg.n; i++) {
		Cmonlog__Event *e;
		if (lg.rec[i]->kind_case != CMONLOG__RECORD__KIND_EVENT)
			continue;
		e = lg.rec[i]->event;
		int s = (int)e->values[0];
		assert_true(s >= 0 && s < 110);
		seen[s]++;
		const char *name = ev_name(&lg, lg.rec[i]);
		if (s >= 100) {
			assert_int_equal(e->thread, rep.other);  /* the grandchild */
			assert_int_equal(e->values[1], 1);
			assert_string_equal(name, s % 2 ? "Child" : "Ev");
		} else {
			assert_int_equal(e->thread, rep.tid);
			assert_string_equal(name, s >= 10 && s % 2 ? "Parent" : "Ev");
		}
	}
	for (int s = 0; s < 110; s++)
		assert_int_equal(seen[s], (s < 20 || s >= 100) ? 1 : 0);
	log_free(&lg);
	free(b.p);
}

static void test_flush_at_exit(void **state)
{
	static const char *const env[] = { "CMON_LOG_FD=3", NULL };
	struct bytes b = { 0 };
	struct report rep;
	struct log lg;
	struct child c;
	int p[2], seen[300] = { 0 };
	(void)state;

	log_pipe(p);
	c = start_child("exit", env, p[1]);
	close(p[1]);
	/* worker 2 has emitted and stays alive; main then calls exit() */
	read_report(&c, &rep);
	read_into(&b, p[0], false);
	close(p[0]);
	assert_int_equal(wait_child(&c), 0);
	decode(b.p, b.len, &lg);
	for (size_t i = 0; i < lg.n; i++)
		if (lg.rec[i]->kind_case == CMONLOG__RECORD__KIND_EVENT)
			seen[(int)lg.rec[i]->event->values[0]]++;
	for (int s = 0; s < 300; s++) {
		int want = s < 10 || (s >= 100 && s < 105) || (s >= 200 && s < 205);
		assert_int_equal(seen[s], want);
	}
	log_free(&lg);
	free(b.p);
}

static void test_exit_while_threads_emit(void **state)
{
	struct log lg;
	int status;
	uint64_t next[3] = { 0 };
	(void)state;

	for (int round = 0; round < 3; round++) {
		struct bytes b = run_logged("exit_busy", NULL, &status);
		assert_int_equal(status, 0);
		decode(b.p, b.len, &lg);        /* whole records, TypeDefs first */
		memset(next, 0, sizeof next);
		for (size_t i = 0; i < lg.n; i++) {
			Cmonlog__Event *e;
			if (lg.rec[i]->kind_case != CMONLOG__RECORD__KIND_EVENT)
				continue;
			e = lg.rec[i]->event;
			int k = (int)e->values[0];
			assert_true(k >= 0 && k < 3);
			/* each thread's events in order, none twice */
			assert_true((uint64_t)e->values[1] >= next[k]);
			next[k] = (uint64_t)e->values[1] + 1;
		}
		log_free(&lg);
		free(b.p);
	}
}

static void test_cmon_log_path_appends(void **state)
{
	struct bytes b = run_into_file("path", 2);   /* the second appended */
	struct log lg;
	size_t first;
	(void)state;

	/* two logs back to back: find where the second Header starts */
	first = second_header(b.p, b.len);
	decode(b.p, first, &lg);
	assert_int_equal(lg.events, 1000);
	/* a regular file: events after the first of a batch carry ts_delta;
	 * made absolute, the times of the one thread never go back, and the
	 * values (seq) come in order */
	assert_true(lg.deltas > 0 && lg.deltas < lg.events);
	uint64_t prev = 0;
	for (size_t i = 0, k = 0; i < lg.n; i++) {
		const Cmonlog__Event *e = lg.rec[i]->event;
		if (lg.rec[i]->kind_case != CMONLOG__RECORD__KIND_EVENT)
			continue;
		assert_true(e->n_values == 1 && e->values[0] == (double)k++);
		assert_true(e->ts >= prev);
		prev = e->ts;
	}
	log_free(&lg);
	decode(b.p + first, b.len - first, &lg);
	assert_int_equal(lg.events, 1000);
	assert_true(lg.deltas > 0 && lg.deltas < lg.events);
	assert_string_equal(lg.rec[0]->header->program, "emit-path");
	log_free(&lg);
	free(b.p);
}

static void test_latency_bound_and_batching(void **state)
{
	static const char *const env[] = { "CMON_LOG_FD=3", NULL };
	struct bytes b = { 0 };
	struct report rep;
	struct log lg;
	struct child c;
	int p[2];
	(void)state;

	log_pipe(p);
	c = start_child("latency", env, p[1]);
	close(p[1]);
	expect_handshake(&c, 'R');
	read_into(&b, p[0], true);
	decode(b.p, b.len, &lg);
	assert_int_equal(lg.events, 2);     /* written without cmon_flush */
	log_free(&lg);
	answer_handshake(&c);
	expect_handshake(&c, 'S');
	read_into(&b, p[0], true);
	decode(b.p, b.len, &lg);
	assert_int_equal(lg.events, 2);     /* the third waits in its batch */
	log_free(&lg);
	answer_handshake(&c);
	read_report(&c, &rep);
	read_into(&b, p[0], false);
	close(p[0]);
	assert_int_equal(wait_child(&c), 0);
	decode(b.p, b.len, &lg);
	assert_int_equal(lg.events, 3);     /* and is written at exit */
	log_free(&lg);
	free(b.p);
}

static void test_reader_gone_no_sigpipe(void **state)
{
	static const char *const env[][3] = {
		{ "CMON_LOG_FD=3", NULL, NULL },
		{ "CMON_LOG_FD=3", "EPIPE_BLOCKED=1", NULL },
	};
	(void)state;

	for (int i = 0; i < 2; i++) {
		struct child c;
		int p[2];

		log_pipe(p);
		c = start_child("epipe", env[i], p[1]);
		close(p[1]);
		expect_handshake(&c, 'D');
		close(p[0]);
		answer_handshake(&c);
		assert_int_equal(wait_child(&c), 0);  /* not 128 + SIGPIPE */
	}
}

static void test_emit_from_signal_handler(void **state)
{
	struct report rep;
	struct log lg;
	int status;
	uint64_t next = 0, sig = 0;
	(void)state;

	struct bytes b = run_logged("signal", &rep, &status);
	assert_int_equal(status, 0);
	decode(b.p, b.len, &lg);
	assert_int_equal(lg.events + rep.st.events_dropped, rep.emitted);
	assert_int_equal(lg.gaps, rep.st.gap_reported);
	for (size_t i = 0; i < lg.n; i++) {
		Cmonlog__Event *e;
		if (lg.rec[i]->kind_case != CMONLOG__RECORD__KIND_EVENT)
			continue;
		e = lg.rec[i]->event;
		if (strcmp(ev_name(&lg, lg.rec[i]), "Sig") == 0) {
			assert_true(e->values[0] == -1.0);
			sig++;
		} else {
			assert_true((uint64_t)e->values[0] >= next);
			next = (uint64_t)e->values[0] + 1;
		}
	}
	assert_true(sig > 0);
	log_free(&lg);
	free(b.p);
}

static void test_names_and_limits(void **state)
{
	struct report rep;
	struct log lg;
	int status;
	(void)state;

	struct bytes b = run_logged("names", NULL, &status);
	(void)rep;
	assert_int_equal(status, 0);
	decode(b.p, b.len, &lg);
	log_free(&lg);
	free(b.p);
}

/* Runs the "overhead" child with ENV and decodes its log: Header, the
 * program's TypeDef, then its one Event, first of all events (the
 * calibration's never reach the log) and the only one counted. */
static Cmonlog__Header *overhead_log(const char *const *env, struct log *lg,
                                     struct bytes *b, int64_t *init_ns)
{
	struct report rep;
	int status;

	*b = run_logged_env("overhead", env, &rep, &status);
	assert_int_equal(status, 0);
	decode(b->p, b->len, lg);
	assert_int_equal(lg->n, 3);
	assert_int_equal(lg->events, 1);
	assert_int_equal(lg->rec[1]->kind_case, CMONLOG__RECORD__KIND_TYPEDEF);
	assert_string_equal(lg->rec[1]->typedef_->name, "First");
	assert_int_equal(lg->rec[2]->kind_case, CMONLOG__RECORD__KIND_EVENT);
	assert_int_equal(lg->rec[2]->event->type, 1);
	assert_int_equal(lg->rec[2]->event->n_values, 2);
	assert_true(lg->rec[2]->event->values[0] == 7.0);
	assert_true(lg->rec[2]->event->values[1] == 8.0);
	assert_int_equal(rep.st.events_written, 1);
	assert_int_equal(rep.st.events_dropped, 0);
	assert_int_equal(rep.st.batches_written, 1);
	*init_ns = rep.other;
	return lg->rec[0]->header;
}

static void test_overhead_in_header(void **state)
{
	static const char *const env[][3] = {
		{ "CMON_LOG_FD=3", NULL, NULL },
		{ "CMON_LOG_FD=3", "CMON_CLOCK=monotonic", NULL },
		{ "CMON_LOG_FD=3", "CMON_OVERHEAD=1", NULL },
	};
	(void)state;

	for (size_t i = 0; i < sizeof env / sizeof *env; i++) {
		struct bytes b;
		struct log lg;
		int64_t init_ns;
		Cmonlog__Header *h = overhead_log(env[i], &lg, &b, &init_ns);

		assert_true(h->has_overhead_ns && h->has_overhead_spread_ns);
		print_message("# %s: overhead_ns %.3f spread %.3f, cmon_init %.3f ms\n",
		              env[i][1] ? env[i][1] : "default", h->overhead_ns,
		              h->overhead_spread_ns, (double)init_ns / 1e6);
		assert_true(isfinite(h->overhead_ns) && h->overhead_ns > 0);
		assert_true(isfinite(h->overhead_spread_ns));
		/* a median absolute deviation is within [0, the median] */
		assert_true(h->overhead_spread_ns >= 0);
		assert_true(h->overhead_spread_ns <= h->overhead_ns);
		log_free(&lg);
		free(b.p);
	}
}

static void test_overhead_off(void **state)
{
	static const char *const env[] = { "CMON_LOG_FD=3", "CMON_OVERHEAD=0", NULL };
	struct bytes b;
	struct log lg;
	int64_t init_ns;
	(void)state;

	Cmonlog__Header *h = overhead_log(env, &lg, &b, &init_ns);
	print_message("# CMON_OVERHEAD=0: cmon_init %.3f ms\n", (double)init_ns / 1e6);
	assert_false(h->has_overhead_ns);
	assert_false(h->has_overhead_spread_ns);
	assert_true(h->has_tick_ns && h->tick_ns == 1.0);   /* the rest stays */
	assert_int_equal(h->n_extra, 2);
	log_free(&lg);
	free(b.p);
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of the N values at V (sorted in place). */
static double median(double *v, size_t n)
{
	qsort(v, n, sizeof *v, cmp_dbl);
	return v[n / 2];
}

/* Runs the "overhead_periodic" child logging into a file (no reader to
 * contend with, no batch dropped) with the environment entry EXTRA, and
 * decodes the log into *LG (its bytes in *B). */
static void run_periodic(const char *extra, struct log *lg, struct bytes *b)
{
	char dir[] = "/tmp/test_emit.XXXXXX", path[64], logenv[96];
	int fd;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/periodic.log", dir);
	snprintf(logenv, sizeof logenv, "CMON_LOG=%s", path);
	const char *const env[] = { logenv, extra, NULL };
	assert_int_equal(run_plain("overhead_periodic", env), 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	memset(b, 0, sizeof *b);
	read_into(b, fd, false);
	close(fd);
	unlink(path);
	rmdir(dir);
	decode(b->p, b->len, lg);
	assert_int_equal(lg->gaps, 0);
	assert_true(lg->events > 1000);
}

/* Each thread's cost measured again, each period while it emits: Overhead
 * records of its own thread id, each followed by that thread's events (the
 * record leads its batch); a thread with heavier events costs more. */
static void test_overhead_periodic(void **state)
{
	double fig[2][64];
	size_t nfig[2] = { 0, 0 };
	int64_t tid[2] = { 0, 0 };
	struct bytes b;
	struct log lg;
	(void)state;

	run_periodic("CMON_OVERHEAD_PERIOD_MS=5", &lg, &b);
	for (size_t i = 0; i < lg.n; i++) {
		const Cmonlog__Record *r = lg.rec[i];
		if (r->kind_case == CMONLOG__RECORD__KIND_EVENT)
			tid[strcmp(ev_name(&lg, r), "Heavy") == 0] = r->event->thread;
	}
	assert_true(tid[0] != 0 && tid[1] != 0 && tid[0] != tid[1]);
	for (size_t i = 0; i < lg.n; i++) {
		const Cmonlog__Record *r = lg.rec[i], *next = i + 1 < lg.n ? lg.rec[i + 1] : NULL;
		int k;
		if (r->kind_case != CMONLOG__RECORD__KIND_OVERHEAD)
			continue;
		k = r->overhead->thread == tid[1];
		assert_true(r->overhead->thread == tid[k]);
		if (next && next->kind_case == CMONLOG__RECORD__KIND_EVENT)
			assert_int_equal(next->event->thread, r->overhead->thread);
		if (nfig[k] < 64)
			fig[k][nfig[k]++] = r->overhead->overhead_ns;
	}
	print_message("# periodic: %zu light and %zu heavy updates, medians %.1f and %.1f ns; header %.1f\n",
	              nfig[0], nfig[1], nfig[0] ? median(fig[0], nfig[0]) : 0,
	              nfig[1] ? median(fig[1], nfig[1]) : 0, lg.rec[0]->header->overhead_ns);
	/* 150 ms at a 5 ms period: about 30 each (fewer when the thread is
	 * slow to reach its first batch writes, under the sanitizers) */
	assert_true(nfig[0] >= 5 && nfig[1] >= 5);
	assert_true(median(fig[1], nfig[1]) > median(fig[0], nfig[0]));
	log_free(&lg);
	free(b.p);

	/* period 0: measured at start only; CMON_OVERHEAD=0: never */
	static const char *const off[] = { "CMON_OVERHEAD_PERIOD_MS=0", "CMON_OVERHEAD=0" };
	for (int i = 0; i < 2; i++) {
		run_periodic(off[i], &lg, &b);
		assert_int_equal(lg.overheads, 0);
		assert_int_equal(lg.rec[0]->header->has_overhead_ns, i == 0);
		log_free(&lg);
		free(b.p);
	}
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--child") == 0) {
		for (size_t i = 0; i < sizeof children / sizeof *children; i++)
			if (strcmp(argv[2], children[i].name) == 0)
				return children[i].fn();
		return 99;
	}
	signal(SIGPIPE, SIG_IGN);       /* the parent may close pipes early */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_noop_unconfigured),
		cmocka_unit_test(test_bad_environment_is_ignored),
		cmocka_unit_test(test_output_decodes_with_protobuf_c),
		cmocka_unit_test(test_event_shapes),
		cmocka_unit_test(test_event_shapes_file),
		cmocka_unit_test(test_header_first),
		cmocka_unit_test(test_typedef_before_first_use_threads),
		cmocka_unit_test(test_gap_counts_drops_on_full_pipe),
		cmocka_unit_test(test_gap_counts_drops_threads),
		cmocka_unit_test(test_gap_on_socket_whole_records),
		cmocka_unit_test(test_fork_writes_each_event_once),
		cmocka_unit_test(test_flush_at_exit),
		cmocka_unit_test(test_exit_while_threads_emit),
		cmocka_unit_test(test_cmon_log_path_appends),
		cmocka_unit_test(test_latency_bound_and_batching),
		cmocka_unit_test(test_reader_gone_no_sigpipe),
		cmocka_unit_test(test_emit_from_signal_handler),
		cmocka_unit_test(test_names_and_limits),
		cmocka_unit_test(test_overhead_in_header),
		cmocka_unit_test(test_overhead_off),
		cmocka_unit_test(test_overhead_periodic),
	};
	return cmocka_run_group_tests_name("emit", tests, NULL, NULL);
}
