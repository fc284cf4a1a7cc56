/* Tool processes (see tool.h). Started with vfork and exec in their own
 * process group, with SIGHUP ignored: a tool outlives a telemonitor that is
 * killed (the kernel would hang up a stopped tool whose group is orphaned)
 * so that it can finish the input it was given; the next telemonitor
 * finishes or kills it (ledger_finish_orphans). Nothing blocks the loop: the
 * input is written from an event when the pipe has room, and is bounded by
 * its owner's flow control (the drained callback); output is read through
 * bufferevents and handed to the owner's callbacks (tool_cbs), lines
 * bounded by TM_LINE_MAX. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <limits.h>
#include <pthread.h>
#include <unistd.h>

#include "cmon/log.h"
#include "pspec/pspec.h"
#include "tool.h"

extern char **environ;

#define EOF_WAIT_S 2              /* after exit, wait this long for output EOF */

static void check_done(struct tool *t);

struct tool *tool_new(struct tmon *tm, enum tool_kind kind, const struct tool_cbs *cbs, void *ctx)
{
	struct tool *t = calloc(1, sizeof *t);

	if (!t)
		return NULL;
	t->tm = tm;
	t->cbs = cbs;
	t->ctx = ctx;
	t->kind = kind;
	t->state = TL_IDLE;
	t->restart = (struct cmon_backoff){ .min_ms = TM_TOOL_BACKOFF_MIN_MS,
					    .max_ms = TM_TOOL_BACKOFF_MAX_MS };
	t->in_fd = t->peek_fd = -1;
	t->reports_tail = &t->reports;
	t->timer = evtimer_new(tm->base, NULL, NULL);
	t->inq = evbuffer_new();
	t->replay = evbuffer_new();
	if (!t->timer || !t->inq || !t->replay) {
		if (t->timer)
			event_free(t->timer);
		if (t->inq)
			evbuffer_free(t->inq);
		if (t->replay)
			evbuffer_free(t->replay);
		free(t);
		return NULL;
	}
	return t;
}

const char *tool_exit_text(int status, char *buf, size_t size)
{
	if (WIFEXITED(status))
		snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, size, "killed by signal %d (%s)%s", WTERMSIG(status),
			 strsignal(WTERMSIG(status)), WCOREDUMP(status) ? ", core dumped" : "");
	else
		snprintf(buf, size, "ended (status 0x%x)", (unsigned)status);
	return buf;
}

static void free_bev(struct bufferevent **b)
{
	if (*b) {
		bufferevent_free(*b);
		*b = NULL;
	}
}

/* Stop writing to the tool: close our end of its input. What was not
 * written (never counted as given) is kept for a shell tool's next run,
 * unless a record longer than PIPE_BUF was cut in the middle. */
static void input_close(struct tool *t)
{
	if (t->in_ev) {
		event_free(t->in_ev);
		t->in_ev = NULL;
	}
	if (t->in_fd >= 0) {
		close(t->in_fd);
		t->in_fd = -1;
	}
	if (t->big_done)
		t->replay_broken = true;
	if (t->kind == TK_SHELL && !t->replay_broken)
		evbuffer_add_buffer(t->replay, t->inq);
	evbuffer_drain(t->inq, evbuffer_get_length(t->inq));
	t->big_done = 0;
}

/* The run is over: what is still in its pipe never reached it. Read it
 * back through our second read end and take it off the ledger; a shell
 * tool's next run gets its whole records (before what was still queued),
 * and only the part of a write it had begun is lost. */
static void account_unread(struct tool *t)
{
	int avail = 0;

	if (t->peek_fd < 0)
		return;
	if (ioctl(t->peek_fd, FIONREAD, &avail) == 0 && avail > 0) {
		uint8_t *buf = malloc((size_t)avail);
		ssize_t n = buf ? read(t->peek_fd, buf, (size_t)avail) : -1;
		if (n > 0) {
			size_t whole = (size_t)n;
			uint64_t lost = ledger_unread(&t->led, buf, (size_t)n, t->body_from, &whole);
			uint64_t again = 0;
			if (t->kind == TK_SHELL && !t->replay_broken && whole < (size_t)n) {
				struct cmon_tally k = { 0 };
				cmon_log_tally(t->fmt, buf + whole, (size_t)n - whole, SIZE_MAX, &k);
				again = k.events + k.gap < lost ? k.events + k.gap : lost;
				if (evbuffer_prepend(t->replay, buf + whole, (size_t)n - whole) < 0) {
					again = 0;
					t->replay_broken = true;   /* (the rest would follow a hole) */
				}
			}
			t->replay_lead += lost - again;
			t->unread_lost += lost - again;
			if (lost)
				cmon_debug("%s (pid %ld) left %zd bytes (%llu records) unread; %llu of "
					   "them go to its next run",
					   t->kind == TK_CHECKER ? "checker" : "tool", (long)t->pid, n,
					   (unsigned long long)lost, (unsigned long long)again);
		}
		free(buf);
	}
	close(t->peek_fd);
	t->peek_fd = -1;
}

void tool_body_begins(struct tool *t)
{
	t->body_from = (t->led.f ? t->led.f->run_bytes : 0) + evbuffer_get_length(t->inq);
}

struct evbuffer *tool_replay(struct tool *t, uint64_t *lead)
{
	*lead = t->replay_lead;
	return !t->replay_broken && evbuffer_get_length(t->replay) ? t->replay : NULL;
}

void tool_replay_drop(struct tool *t)
{
	evbuffer_drain(t->replay, evbuffer_get_length(t->replay));
	t->replay_lead = 0;
	t->replay_broken = false;
}

/* The length of the first record in the queue (0 if incomplete). */
static size_t first_record(struct tool *t)
{
	size_t len = evbuffer_get_length(t->inq);

	if (t->fmt == CMON__FORMAT__FORMAT_BINARY) {
		uint8_t head[10];
		size_t hdr, k = len < sizeof head ? len : sizeof head;
		uint64_t body;
		evbuffer_copyout(t->inq, head, k);
		if (cmon_bin_frame(head, k, &hdr, &body) != 1 || hdr + body > len)
			return 0;
		return hdr + (size_t)body;
	} else {
		struct evbuffer_ptr e = evbuffer_search(t->inq, "\n", 1, NULL);
		return e.pos < 0 ? 0 : (size_t)e.pos + 1;
	}
}

/* Write whole records from the queue while the pipe takes them: up to
 * PIPE_BUF bytes at a time (atomic), each write counted in the ledger
 * just before it is made. A record longer than PIPE_BUF goes alone, in
 * pieces, and is counted once its last piece is written. */
static void input_flush(struct tool *t)
{
	while (t->in_fd >= 0 && evbuffer_get_length(t->inq)) {
		struct cmon_tally tl = { 0 };
		size_t avail = evbuffer_get_length(t->inq), take;
		const uint8_t *p = evbuffer_pullup(t->inq, avail < PIPE_BUF ? (ssize_t)avail : PIPE_BUF);
		ssize_t n;

		take = cmon_log_tally(t->fmt, p, avail < PIPE_BUF ? avail : PIPE_BUF, PIPE_BUF, &tl);
		if (take == 0) {
			/* one record longer than PIPE_BUF (or bytes that are no record) */
			take = first_record(t);
			if (take == 0)
				take = avail;
			p = evbuffer_pullup(t->inq, (ssize_t)take);
			memset(&tl, 0, sizeof tl);
			cmon_log_tally(t->fmt, p, take, take, &tl);
		}
		if (take <= PIPE_BUF) {
			ledger_write(&t->led, &tl, take);
			n = write(t->in_fd, p, take);
			if (n == (ssize_t)take) {
				evbuffer_drain(t->inq, take);
				continue;
			}
			ledger_unwrite(&t->led, &tl, take);
		} else {
			n = write(t->in_fd, p + t->big_done, take - t->big_done);
			if (n > 0) {
				t->big_done += (size_t)n;
				if (t->big_done == take) {
					ledger_write(&t->led, &tl, take);
					evbuffer_drain(t->inq, take);
					t->big_done = 0;
				}
				continue;
			}
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		/* EPIPE or worse: it stopped reading; its exit is reported when reaped */
		t->input_broken = true;
		input_close(t);
		break;
	}
	if (t->in_fd < 0)
		return;
	if (evbuffer_get_length(t->inq) == 0 && t->closing_input) {
		input_close(t);
		return;
	}
	if (evbuffer_get_length(t->inq))
		event_add(t->in_ev, NULL);
	else
		event_del(t->in_ev);
}

static void in_writable(evutil_socket_t fd, short what, void *arg)
{
	struct tool *t = arg;
	size_t before = evbuffer_get_length(t->inq);

	input_flush(t);
	if (evbuffer_get_length(t->inq) != before) {
		t->active_at = tm_now();
		t->cbs->wrote(t->ctx, t);
	}
	if (evbuffer_get_length(t->inq) < TM_TOOL_LOW && (before >= TM_TOOL_LOW || t->in_fd < 0))
		t->cbs->drained(t->ctx, t);
}

static void out_read(struct bufferevent *bev, void *arg)
{
	struct tool *t = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	t->active_at = tm_now();
	if (!t->cbs->line) {
		char buf[16384];
		int n;
		while ((n = evbuffer_remove(in, buf, sizeof buf)) > 0)
			t->cbs->output(t->ctx, t, buf, (size_t)n);
		return;
	}
	for (;;) {
		size_t len;
		char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF);
		if (!line) {
			if (evbuffer_get_length(in) > TM_LINE_MAX) {
				cmon_warn("%s printed a line longer than %u bytes; skipped",
					  t->kind == TK_CHECKER ? "checker" : "tool", TM_LINE_MAX);
				evbuffer_drain(in, evbuffer_get_length(in));
			}
			return;
		}
		t->cbs->line(t->ctx, t, line, len);
		free(line);
		if (!t->out)                  /* the owner went away meanwhile */
			return;
	}
}

static void err_read(struct bufferevent *bev, void *arg)
{
	struct tool *t = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char buf[16384];
	int n;

	t->active_at = tm_now();
	while ((n = evbuffer_remove(in, buf, sizeof buf)) > 0)
		t->cbs->output(t->ctx, t, buf, (size_t)n);
}

static void out_event(struct bufferevent *bev, short what, void *arg)
{
	struct tool *t = arg;

	if (bev == t->out) {
		/* a last line without its newline */
		struct evbuffer *in = bufferevent_get_input(bev);
		size_t n = evbuffer_get_length(in);
		if (n && t->cbs->line && n <= TM_LINE_MAX) {
			char *line = malloc(n + 1);
			if (line) {
				evbuffer_remove(in, line, n);
				line[n] = '\0';
				t->cbs->line(t->ctx, t, line, n);
				free(line);
			}
		} else if (n) {
			out_read(bev, t);
		}
		t->out_eof = true;
		free_bev(&t->out);
	} else {
		err_read(bev, t);
		t->err_eof = true;
		free_bev(&t->err);
	}
	check_done(t);
}

/* Read what the pipe under `bev` holds now, without waiting, handing it
 * to the reader as it comes (a bufferevent takes 16 KiB an iteration, so a
 * busy loop may see the wait below end before it got to the rest). 1 at
 * EOF or on an error (the pipe is done), 0 when it would block (someone
 * still holds the write end), 2 when the reader freed the bufferevent. */
static int pipe_drain(struct tool *t, struct bufferevent *bev, bool *got)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	evutil_socket_t fd = bufferevent_getfd(bev);
	bool out = bev == t->out;

	for (;;) {
		int n;
		/* (a socket bufferevent keeps the end of its input frozen) */
		evbuffer_unfreeze(in, 0);
		n = evbuffer_read(in, fd, 65536);
		evbuffer_freeze(in, 0);
		if (n == 0)
			return 1;
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : 1;
		*got = true;
		if (out)
			out_read(bev, t);
		else
			err_read(bev, t);
		if ((out ? t->out : t->err) != bev)
			return 2;
	}
}

static void eof_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct tool *t = arg;
	bool got = false;

	/* It exited and its outputs have not reached EOF: take what they hold.
	 * At EOF they end as usual; still open and still giving, wait again;
	 * open and silent, something it started still holds them: give up. */
	if (t->out && pipe_drain(t, t->out, &got) == 1)
		out_event(t->out, BEV_EVENT_EOF | BEV_EVENT_READING, t);
	if (t->err && pipe_drain(t, t->err, &got) == 1)
		out_event(t->err, BEV_EVENT_EOF | BEV_EVENT_READING, t);
	if (t->out_eof && t->err_eof)
		return;                            /* out_event finished it */
	if (got) {
		check_done(t);                     /* waits EOF_WAIT_S again */
		return;
	}
	t->out_eof = t->err_eof = true;
	free_bev(&t->out);
	free_bev(&t->err);
	check_done(t);
}

/* Finished when reaped and both outputs are at EOF. */
static void check_done(struct tool *t)
{
	if (!t->exited)
		return;
	if (!t->out_eof || !t->err_eof) {
		struct timeval tv = { EOF_WAIT_S, 0 };
		if (!evtimer_pending(t->timer, NULL)) {
			evtimer_assign(t->timer, t->tm->base, eof_timeout, t);
			evtimer_add(t->timer, &tv);
		}
		return;
	}
	evtimer_del(t->timer);
	input_close(t);
	account_unread(t);
	ledger_run(&t->led, 0, t->fmt);      /* no process: nothing for a successor to finish */
	t->pid = 0;
	if (t->in_list) {
		TAILQ_REMOVE(&t->tm->tools, t, link);
		t->in_list = false;
	}
	t->cbs->done(t->ctx, t);
}

static int nonblock_pipe(int fds[2], bool parent_reads)
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	/* only our end is non-blocking; the child gets an ordinary pipe */
	fcntl(fds[parent_reads ? 0 : 1], F_SETFL, O_NONBLOCK);
	return 0;
}

/* The environment for a tool: ours, minus any M_* we set, plus `add`. */
static char **make_env(char *const add[])
{
	size_t n = 0, k = 0, nadd = 0;
	char **env;

	while (environ[n])
		n++;
	while (add[nadd])
		nadd++;
	env = calloc(n + nadd + 1, sizeof *env);
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		bool replaced = false;
		for (size_t j = 0; j < nadd && !replaced; j++) {
			size_t eq = strcspn(add[j], "=");
			replaced = !strncmp(environ[i], add[j], eq + 1);
		}
		if (!replaced)
			env[k++] = environ[i];
	}
	for (size_t j = 0; j < nadd; j++)
		env[k++] = add[j];
	env[k] = NULL;
	return env;
}

/* In the child, between vfork and exec: it shares the telemonitor's memory
 * until execve, so only system calls, on its own stack frame, with every
 * signal blocked (by the parent) until each one caught in the telemonitor
 * is back to its default. Its own process group, default signals but
 * SIGHUP ignored (see above), and no descriptor but 0, 1 and 2. */
static _Noreturn void child(int in, int out, int errfd, pid_t parent, char *const argv[],
			    char **env)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL }, ign = { .sa_handler = SIG_IGN }, old;
	sigset_t none;

	setpgid(0, 0);
	if (getppid() != parent)
		_exit(127);                           /* the telemonitor is already gone */
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP && sigaction(sig, NULL, &old) == 0 &&
		    (old.sa_handler != SIG_DFL || sig == SIGPIPE))
			sigaction(sig, &dfl, NULL);
	sigaction(SIGHUP, &ign, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(errfd, 2) < 0)
		_exit(127);
	close_range(3, ~0U, 0);
	execve(argv[0], argv, env);
	_exit(127);
}

/* Start the child with vfork: a fork would copy the page tables of a
 * telemonitor holding hundreds of streams for every tool it starts (most
 * of its CPU when many programs start together), and make every page it
 * then writes a copy. All signals are blocked across it, so no handler runs
 * in the child on the shared memory. */
static pid_t __attribute__((noinline)) start_child(int in, int out, int errfd, pid_t parent,
						   char *const argv[], char **env)
{
	sigset_t all, was;
	pid_t pid;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &was);
	pid = vfork();
	if (pid == 0)
		child(in, out, errfd, parent, argv, env);
	pthread_sigmask(SIG_SETMASK, &was, NULL);
	return pid;
}

int tool_spawn(struct tool *t, char *const argv[], char *const add_env[], char *err,
	       size_t errlen)
{
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
	char **env = NULL;
	pid_t pid, self = getpid();
	int r;

	if ((r = nonblock_pipe(pin, false)) < 0 || (r = nonblock_pipe(pout, true)) < 0 ||
	    (r = nonblock_pipe(perr, true)) < 0) {
		snprintf(err, errlen, "cannot create pipes: %s", strerror(-r));
		goto out_close;
	}
	env = make_env(add_env);
	if (!env) {
		r = -ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto out_close;
	}
	if (access(argv[0], X_OK) < 0) {
		r = -errno;
		snprintf(err, errlen, "could not create process for %s: %s", argv[0], strerror(errno));
		free(env);
		goto out_close;
	}
	pid = start_child(pin[0], pout[1], perr[1], self, argv, env);
	free(env);
	if (pid < 0) {
		r = -errno;
		snprintf(err, errlen, "could not create process for %s: %s", argv[0], strerror(errno));
		goto out_close;
	}
	setpgid(pid, pid);                            /* no race with kill(-pid) below */
	{
		char self_fd[64];
		snprintf(self_fd, sizeof self_fd, "/proc/self/fd/%d", pin[1]);
		t->peek_fd = open(self_fd, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	}
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	pin[0] = pout[1] = perr[1] = -1;
	t->in_ev = event_new(t->tm->base, pin[1], EV_WRITE, in_writable, t);
	if (t->in_ev) {
		t->in_fd = pin[1];
		pin[1] = -1;
	}
	t->out = bufferevent_socket_new(t->tm->base, pout[0], BEV_OPT_CLOSE_ON_FREE);
	if (t->out)
		pout[0] = -1;
	t->err = bufferevent_socket_new(t->tm->base, perr[0], BEV_OPT_CLOSE_ON_FREE);
	if (t->err)
		perr[0] = -1;
	t->pid = pid;
	t->exited = t->out_eof = t->err_eof = t->input_broken = t->closing_input = false;
	t->status = 0;
	t->written = 0;
	t->run_checked = 0;
	t->big_done = 0;
	ledger_run(&t->led, pid, t->fmt);
	t->runs++;
	t->started = t->active_at = tm_now();
	t->state = TL_RUNNING;
	TAILQ_INSERT_TAIL(&t->tm->tools, t, link);
	t->in_list = true;
	if (t->in_fd < 0 || !t->out || !t->err) {
		snprintf(err, errlen, "out of memory");
		tool_signal(t, SIGKILL);
		r = -ENOMEM;
		goto out_close;
	}
	bufferevent_setcb(t->out, out_read, NULL, out_event, t);
	bufferevent_setwatermark(t->out, EV_READ, 0, TM_LINE_MAX + 1);
	bufferevent_enable(t->out, EV_READ);
	bufferevent_setcb(t->err, err_read, NULL, out_event, t);
	bufferevent_enable(t->err, EV_READ);
	cmon_debug("started %s (pid %ld)", argv[0], (long)pid);
	return 0;
out_close:
	for (int i = 0; i < 2; i++) {
		if (pin[i] >= 0)
			close(pin[i]);
		if (pout[i] >= 0)
			close(pout[i]);
		if (perr[i] >= 0)
			close(perr[i]);
	}
	return r;
}

/* --- the checker in this process ------------------------------------------ */

/* An offender taken apart (report_of_offender), queued among the lines. */
struct tool_report {
	struct tool_report *next;
	struct checker_report r;
};

/* The line that stands for the next queued offender: no JSON line starts
 * with a control character. */
#define TOOL_REPORT_MARK "\001"

static void reports_drop(struct tool *t)
{
	struct tool_report *q;

	while ((q = t->reports)) {
		t->reports = q->next;
		report_free(&q->r);
		free(q);
	}
	t->reports_tail = &t->reports;
}

/* An offender for an owner that takes them apart (cbs->report): no JSON
 * line is written and read again, the commonest report at a failure's
 * rate. False when it is not one (or on ENOMEM: it goes as a line). */
static bool inproc_offender(struct tool *t, const pspec_report *r)
{
	struct tool_report *q;

	if (!t->cbs->report || pspec_report_kind_of(r) != PSPEC_REPORT_OFFENDER ||
	    pspec_report_result(r) == PSPEC_PASS)
		return false;
	if (!(q = calloc(1, sizeof *q)))
		return false;
	if (report_of_offender(r, &t->line, &t->line_cap, &q->r) != 0) {
		free(q);
		return false;
	}
	*t->reports_tail = q;
	t->reports_tail = &q->next;
	evbuffer_add(t->outq, TOOL_REPORT_MARK "\n", 2);
	return true;
}

/* A report, as pcheck -cont --json prints it (it asks for no interval or
 * event lines), for the owner on the next turn. */
static void inproc_report(void *ctx, const pspec_report *r)
{
	struct tool *t = ctx;
	pspec_report_kind k = pspec_report_kind_of(r);
	size_t len;

	if (k == PSPEC_REPORT_INTERVAL || k == PSPEC_REPORT_EVENT || inproc_offender(t, r))
		return;
	len = pspec_report_format_into(r, PSPEC_FORMAT_JSON, &t->line, &t->line_cap);
	evbuffer_add(t->outq, t->line, len);
	evbuffer_add(t->outq, "\n", 1);
}

/* A malformed record skipped, as pcheck says it on standard error. */
static void inproc_warn(void *ctx, const char *logname, uint64_t where, const char *msg)
{
	struct tool *t = ctx;

	if (where == 0)
		evbuffer_add_printf(t->errq, "%s: warning: %s\n", logname, msg);
	else
		evbuffer_add_printf(t->errq, "%s:%" PRIu64 ": warning: %s\n", logname, where, msg);
}

/* Free the check (its run is over, or killed). */
static void inproc_stop(struct tool *t)
{
	pspec_stream_free(t->stream);
	t->stream = NULL;
	pspec_free(t->ps);
	t->ps = NULL;
	if (t->out_ev)
		event_del(t->out_ev);
	evtimer_del(t->timer);
	if (t->outq)
		evbuffer_drain(t->outq, evbuffer_get_length(t->outq));
	if (t->errq)
		evbuffer_drain(t->errq, evbuffer_get_length(t->errq));
	reports_drop(t);
	t->ending = false;
}

/* Hand the lines over, as out_read does a process's. */
static void inproc_hand_over(struct tool *t)
{
	char buf[16384];
	int n;

	/* (the owner may kill it from a callback: t->stream goes) */
	while (t->stream && (n = evbuffer_remove(t->errq, buf, sizeof buf)) > 0)
		t->cbs->output(t->ctx, t, buf, (size_t)n);
	while (t->stream) {
		size_t len;
		char *line = evbuffer_readln(t->outq, &len, EVBUFFER_EOL_LF);
		if (!line)
			break;
		if (len == 1 && line[0] == TOOL_REPORT_MARK[0] && t->reports) {
			struct tool_report *q = t->reports;
			if (!(t->reports = q->next))
				t->reports_tail = &t->reports;
			t->cbs->report(t->ctx, t, &q->r);
			report_free(&q->r);
			free(q);
		} else {
			t->cbs->line(t->ctx, t, line, len);
		}
		free(line);
	}
}

/* On the next turn of the loop: the lines; once its input has ended and
 * everything is handed over, it has "exited". */
static void inproc_deliver(evutil_socket_t fd, short what, void *arg)
{
	struct tool *t = arg;

	(void)fd;
	(void)what;
	inproc_hand_over(t);
	if (t->stream && t->ending) {
		inproc_stop(t);
		t->exited = true;
		t->out_eof = t->err_eof = true;
		check_done(t);
	}
}

static void inproc_soon(struct tool *t)
{
	event_active(t->out_ev, EV_TIMEOUT, 0);     /* (once, however often asked) */
}

/* The progress due and not said yet: now. */
static void inproc_progress_due(evutil_socket_t fd, short what, void *arg)
{
	struct tool *t = arg;
	uint64_t n;

	(void)fd;
	(void)what;
	if (!t->stream || t->ending)
		return;
	n = pspec_stream_records(t->stream);
	if (n == t->said)
		return;
	t->said = n;
	t->said_at = tm_now();
	evbuffer_add_printf(t->outq, "{\"checked\":%" PRIu64 "}\n", n);
	inproc_soon(t);
}

/* Say how far the check is, as pcheck --progress TM_PROGRESS does: at
 * most that often (each line saves the instance's `checked`), and what is
 * not said yet when it is too soon is said once the time has come. */
static void inproc_progress(struct tool *t)
{
	double wait = t->said_at + TM_PROGRESS - tm_now();

	if (wait <= 0) {
		inproc_progress_due(-1, 0, t);
	} else if (!evtimer_pending(t->timer, NULL)) {
		struct timeval tv = { 0, (suseconds_t)(wait * 1e6) };
		evtimer_assign(t->timer, t->tm->base, inproc_progress_due, t);
		evtimer_add(t->timer, &tv);
	}
}

/* The end of its input: the verdicts, and pcheck's exit status. */
static void inproc_end(struct tool *t)
{
	char *err = NULL;
	int st;

	if (!t->stream || t->ending)
		return;
	st = pspec_stream_end(t->stream, &err);
	if (err) {
		if (st == PSPEC_EXIT_SPEC)
			evbuffer_add_printf(t->errq, "%s\n", err);
		else
			evbuffer_add_printf(t->errq, "pcheck: <stdin>: %s\n", err);
		free(err);
	}
	t->status = (st & 0xff) << 8;          /* as waitpid says "exited with status st" */
	t->ending = true;
	inproc_soon(t);
}

bool tool_settle(struct tool *t, uint64_t *n)
{
	if (!t->stream || t->ending)
		return false;
	inproc_hand_over(t);
	if (!t->stream || t->reports || evbuffer_get_length(t->outq) || evbuffer_get_length(t->errq))
		return false;
	*n = pspec_stream_records(t->stream);
	return true;
}

static int inproc_write(struct tool *t, const void *p, size_t n, const struct cmon_tally *counted)
{
	struct cmon_tally tl = { 0 };

	if (!t->stream || t->ending)
		return -EPIPE;
	if (counted)
		tl = *counted;
	else
		cmon_log_tally(t->fmt, p, n, SIZE_MAX, &tl);
	ledger_write(&t->led, &tl, n);
	t->active_at = tm_now();
	if (!pspec_stream_feed(t->stream, p, n)) {
		inproc_end(t);                      /* an End record, or no log at all */
		return 0;
	}
	inproc_progress(t);
	if (evbuffer_get_length(t->outq) || evbuffer_get_length(t->errq))
		inproc_soon(t);
	return 0;
}

int tool_start_inproc(struct tool *t, const char *spec, bool bounded)
{
	pspec_check_options opt = {
		.continuous = true, .explain = true, .summaries_s = TM_SUMMARIES,
		.threads = 1, .report = inproc_report, .warn = inproc_warn, .ctx = t,
	};
	struct pspec *ps = pspec_new();
	char *why = NULL, *err = NULL;

	if (!ps)
		return -ENOMEM;
	if (pspec_load_file(ps, spec) < 0 || pspec_passes(ps) > 1 || pspec_uses_unknowns(ps) ||
	    (bounded && (why = pspec_unbounded(ps)))) {
		free(why);
		pspec_free(ps);
		return -ENOTSUP;
	}
	if (!t->outq && !(t->outq = evbuffer_new()))
		goto nomem;
	if (!t->errq && !(t->errq = evbuffer_new()))
		goto nomem;
	if (!t->out_ev && !(t->out_ev = event_new(t->tm->base, -1, 0, inproc_deliver, t)))
		goto nomem;
	t->stream = pspec_stream_new(ps, "<stdin>", &opt, &err);
	if (!t->stream) {
		free(err);
		pspec_free(ps);
		return -ENOTSUP;
	}
	t->ps = ps;
	t->ending = false;
	t->said = 0;
	t->said_at = 0;
	t->pid = 0;
	t->exited = t->out_eof = t->err_eof = t->input_broken = t->closing_input = false;
	t->status = 0;
	t->written = 0;
	t->run_checked = 0;
	ledger_run_inproc(&t->led, t->fmt);
	t->runs++;
	t->started = t->active_at = tm_now();
	t->state = TL_RUNNING;
	return 0;
nomem:
	pspec_free(ps);
	return -ENOMEM;
}

bool tool_running(const struct tool *t)
{
	return (t->pid > 0 && !t->exited) || t->stream;
}

int tool_write_counted(struct tool *t, const void *p, size_t n, const struct cmon_tally *tl)
{
	if (t->stream)
		return inproc_write(t, p, n, tl);
	return tool_write(t, p, n);
}

int tool_write(struct tool *t, const void *p, size_t n)
{
	bool idle;

	if (t->stream)
		return inproc_write(t, p, n, NULL);
	if (t->in_fd < 0 || t->closing_input)
		return -EPIPE;
	idle = evbuffer_get_length(t->inq) == 0;
	if (evbuffer_add(t->inq, p, n) < 0)
		return -ENOMEM;
	if (idle) {
		/* Nothing was waiting: write now rather than on the next turn of
		 * the loop (an epoll_ctl pair and a wake-up less a batch); the
		 * caller syncs the counts. What the pipe does not take waits for
		 * it to have room. */
		input_flush(t);
		t->active_at = tm_now();
	} else if (!event_pending(t->in_ev, EV_WRITE, NULL)) {
		event_add(t->in_ev, NULL);
	}
	return 0;
}

size_t tool_queued(const struct tool *t)
{
	return t->in_fd >= 0 ? evbuffer_get_length(t->inq) : 0;
}

void tool_close_input(struct tool *t)
{
	if (t->stream) {
		inproc_end(t);
		return;
	}
	if (t->in_fd < 0)
		return;
	t->closing_input = true;
	if (evbuffer_get_length(t->inq) == 0)
		input_close(t);
}

void tool_abandon_input(struct tool *t)
{
	if (t->stream) {
		inproc_end(t);       /* (as a process does at the end of its input) */
		return;
	}
	input_close(t);
}

void tool_signal(struct tool *t, int sig)
{
	if (t->pid > 0 && !t->exited)
		kill(-t->pid, sig);
}

void tool_reap(struct tmon *tm)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		struct tool *t;
		TAILQ_FOREACH(t, &tm->tools, link)
			if (t->pid == pid)
				break;
		if (!t)
			continue;                 /* a tool already given up */
		t->exited = true;
		t->status = status;
		check_done(t);
	}
}

void tool_kill(struct tool *t)
{
	if (t->stream) {
		/* killed: what it had not handed over is lost, as a process's
		 * unread output would be */
		inproc_stop(t);
		t->exited = true;
		t->status = SIGKILL;
		t->out_eof = t->err_eof = true;
	}
	input_close(t);
	if (t->pid > 0 && !t->exited) {
		int st;
		kill(-t->pid, SIGKILL);
		kill(-t->pid, SIGCONT);
		/* dead before its input is read back: it cannot take more */
		while (waitpid(t->pid, &st, 0) < 0 && errno == EINTR)
			;
		t->exited = true;
		t->status = st;
	}
	account_unread(t);
	ledger_run(&t->led, 0, t->fmt);
	evtimer_del(t->timer);
	free_bev(&t->out);
	free_bev(&t->err);
	if (t->in_list) {
		TAILQ_REMOVE(&t->tm->tools, t, link);
		t->in_list = false;
	}
	t->pid = 0;
}

void tool_free(struct tool *t, bool forget)
{
	if (!t)
		return;
	tool_kill(t);
	ledger_close(&t->led, &t->tm->ledgers, forget);
	if (t->out_ev)
		event_free(t->out_ev);
	if (t->outq)
		evbuffer_free(t->outq);
	if (t->errq)
		evbuffer_free(t->errq);
	reports_drop(t);
	free(t->line);
	evbuffer_free(t->inq);
	evbuffer_free(t->replay);
	event_free(t->timer);
	free(t);
}
