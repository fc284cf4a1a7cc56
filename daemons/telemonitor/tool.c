/* Tool processes (see tool.h). Started with fork and exec (so that they
 * can be told to die with the telemonitor: PR_SET_PDEATHSIG); the pipes to and
 * from them are libevent bufferevents, so a tool that stops reading or
 * floods its output never blocks the loop: its input queue is bounded by
 * the session's flow control, its output lines by TM_LINE_MAX. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmon/log.h"
#include "tool.h"

extern char **environ;

#define EOF_WAIT_S 2              /* after exit, wait this long for output EOF */

static void check_done(struct tool *t);

struct tool *tool_new(struct tmon *tm, struct session *s, enum tool_kind kind)
{
	struct tool *t = calloc(1, sizeof *t);

	if (!t)
		return NULL;
	t->tm = tm;
	t->sess = s;
	t->kind = kind;
	t->state = TL_IDLE;
	t->timer = evtimer_new(tm->base, NULL, NULL);
	if (!t->timer) {
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

/* stdin: the queue fell below the low mark, or it is flushed for closing. */
static void in_write(struct bufferevent *bev, void *arg)
{
	struct tool *t = arg;

	if (t->closing_input && evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
		free_bev(&t->in);
		return;
	}
	session_tool_drained(t->sess, t);
}

static void in_event(struct bufferevent *bev, short what, void *arg)
{
	struct tool *t = arg;

	/* EPIPE: the tool closed its input (or died). Keep nothing queued
	 * for it; its exit is reported when it is reaped. */
	t->input_broken = true;
	free_bev(&t->in);
	session_tool_drained(t->sess, t);
}

static void out_read(struct bufferevent *bev, void *arg)
{
	struct tool *t = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	if (t->kind == TK_SHELL) {
		char buf[16384];
		int n;
		while ((n = evbuffer_remove(in, buf, sizeof buf)) > 0)
			session_tool_output(t->sess, t, buf, (size_t)n);
		return;
	}
	for (;;) {
		size_t len;
		char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF);
		if (!line) {
			if (evbuffer_get_length(in) > TM_LINE_MAX) {
				cmon_warn("checker printed a line longer than %u bytes; skipped",
					  TM_LINE_MAX);
				evbuffer_drain(in, evbuffer_get_length(in));
			}
			return;
		}
		checker_line(t->sess, t, line, len);
		free(line);
		if (!t->out)                  /* the session went away meanwhile */
			return;
	}
}

static void err_read(struct bufferevent *bev, void *arg)
{
	struct tool *t = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	char buf[16384];
	int n;

	while ((n = evbuffer_remove(in, buf, sizeof buf)) > 0)
		session_tool_output(t->sess, t, buf, (size_t)n);
}

static void out_event(struct bufferevent *bev, short what, void *arg)
{
	struct tool *t = arg;

	if (bev == t->out) {
		/* a last line without its newline */
		struct evbuffer *in = bufferevent_get_input(bev);
		size_t n = evbuffer_get_length(in);
		if (n && t->kind == TK_CHECKER && n <= TM_LINE_MAX) {
			char *line = malloc(n + 1);
			if (line) {
				evbuffer_remove(in, line, n);
				line[n] = '\0';
				checker_line(t->sess, t, line, n);
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

static void eof_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct tool *t = arg;

	/* It exited, but something it started still holds its output open. */
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
	free_bev(&t->in);
	t->pid = 0;
	if (t->in_list) {
		TAILQ_REMOVE(&t->tm->tools, t, link);
		t->in_list = false;
	}
	session_tool_done(t->sess, t);
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

/* In the child, between fork and exec (async-signal-safe calls only): its
 * own process group, killed if the telemonitor dies, default signals. */
static void child(int in, int out, int errfd, pid_t parent, char *const argv[], char **env)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	static const int sigs[] = { SIGPIPE, SIGCHLD, SIGTERM, SIGINT, SIGHUP };
	sigset_t none;

	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);                           /* the telemonitor is already gone */
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		sigaction(sigs[i], &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(errfd, 2) < 0)
		_exit(127);
	close_range(3, ~0U, 0);
	execve(argv[0], argv, env);
	_exit(127);
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
	pid = fork();
	if (pid == 0)
		child(pin[0], pout[1], perr[1], self, argv, env);
	free(env);
	if (pid < 0) {
		r = -errno;
		snprintf(err, errlen, "could not create process for %s: %s", argv[0], strerror(errno));
		goto out_close;
	}
	setpgid(pid, pid);                            /* no race with kill(-pid) below */
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	pin[0] = pout[1] = perr[1] = -1;
	t->in = bufferevent_socket_new(t->tm->base, pin[1], BEV_OPT_CLOSE_ON_FREE);
	if (t->in)
		pin[1] = -1;
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
	t->runs++;
	t->started = tm_now();
	t->state = TL_RUNNING;
	TAILQ_INSERT_TAIL(&t->tm->tools, t, link);
	t->in_list = true;
	if (!t->in || !t->out || !t->err) {
		snprintf(err, errlen, "out of memory");
		tool_signal(t, SIGKILL);
		r = -ENOMEM;
		goto out_close;
	}
	bufferevent_setcb(t->in, NULL, in_write, in_event, t);
	bufferevent_setwatermark(t->in, EV_WRITE, TM_TOOL_LOW, 0);
	bufferevent_enable(t->in, EV_WRITE);
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

int tool_write(struct tool *t, const void *p, size_t n)
{
	if (!t->in || t->closing_input)
		return -EPIPE;
	return evbuffer_add(bufferevent_get_output(t->in), p, n) < 0 ? -ENOMEM : 0;
}

size_t tool_queued(const struct tool *t)
{
	return t->in ? evbuffer_get_length(bufferevent_get_output(t->in)) : 0;
}

void tool_close_input(struct tool *t)
{
	if (!t->in)
		return;
	t->closing_input = true;
	if (evbuffer_get_length(bufferevent_get_output(t->in)) == 0)
		free_bev(&t->in);
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

void tool_free(struct tool *t)
{
	if (!t)
		return;
	if (t->pid > 0 && !t->exited) {
		kill(-t->pid, SIGKILL);
		kill(-t->pid, SIGCONT);
	}
	if (t->in_list)
		TAILQ_REMOVE(&t->tm->tools, t, link);
	free_bev(&t->in);
	free_bev(&t->out);
	free_bev(&t->err);
	event_free(t->timer);
	free(t);
}
