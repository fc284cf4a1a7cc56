/* Wrapper mode (-- CMD ARGS): run CMD with the write end of a pipe in
 * CMON_LOG_FD (and CMON_LOG=/dev/fd/N), pass signals on to it, and exit
 * the way it exited. CMD is spawned before snarflog opens anything else, so
 * it inherits only its stdin/stdout/stderr and the log pipe. Signals are
 * read from a signalfd in the event loop. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmon/log.h"
#include "snarflog.h"

extern char **environ;

/* Signals passed on to CMD (or, without CMD, that end the log). */
static const int forwarded[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2,
				 SIGWINCH, SIGCONT };

static sigset_t original_mask;

static void handled_set(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
		sigaddset(set, forwarded[i]);
	sigaddset(set, SIGCHLD);
}

int signals_block(void)
{
	sigset_t set;

	handled_set(&set);
	return sigprocmask(SIG_BLOCK, &set, &original_mask) < 0 ? -errno : 0;
}

/* environ plus CMON_LOG_FD and CMON_LOG (replacing inherited ones); the
 * two new strings are returned in own[] for the caller to free. */
static char **child_env(int fd, char *own[2])
{
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 3, sizeof *env);
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "CMON_LOG_FD=", 12) != 0 &&
		    strncmp(environ[i], "CMON_LOG=", 9) != 0)
			env[k++] = environ[i];
	if (asprintf(&own[0], "CMON_LOG_FD=%d", fd) < 0) {
		free(env);
		return NULL;
	}
	if (asprintf(&own[1], "CMON_LOG=/dev/fd/%d", fd) < 0) {
		free(own[0]);
		free(env);
		return NULL;
	}
	env[k++] = own[0];
	env[k++] = own[1];
	env[k] = NULL;
	return env;
}

int child_spawn(struct snarf *s, int *log_fd)
{
	posix_spawnattr_t attr;
	sigset_t dflt;
	char **env, *own[2];
	int p[2], r;
	pid_t pid;

	if (pipe2(p, 0) < 0)
		return -errno;
	fcntl(p[0], F_SETFD, FD_CLOEXEC);            /* CMD gets only the write end */
	fcntl(p[0], F_SETPIPE_SZ, 1 << 20);          /* absorb bursts; best effort */
	env = child_env(p[1], own);
	if (!env) {
		close(p[0]);
		close(p[1]);
		return -ENOMEM;
	}
	/* CMD starts with the signal mask and dispositions we were given. */
	handled_set(&dflt);
	sigaddset(&dflt, SIGPIPE);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &original_mask);
	posix_spawnattr_setsigdefault(&attr, &dflt);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	r = posix_spawnp(&pid, s->opt.cmd[0], NULL, &attr, s->opt.cmd, env);
	posix_spawnattr_destroy(&attr);
	free(own[0]);
	free(own[1]);
	free(env);
	close(p[1]);
	if (r != 0) {
		close(p[0]);
		return -r;
	}
	s->child = pid;
	s->pid = pid;
	*log_fd = p[0];
	return 0;
}

static void reap(struct snarf *s)
{
	int st;
	pid_t pid;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		if (pid == s->child && !s->child_done) {
			s->child_done = true;
			s->child_status = st;
			if (WIFSIGNALED(st))
				cmon_debug("%s (pid %d) killed by signal %d", s->opt.cmd[0], (int)pid,
					   WTERMSIG(st));
			else
				cmon_debug("%s (pid %d) exited with %d", s->opt.cmd[0], (int)pid,
					   WEXITSTATUS(st));
			core_child_exited(s);
		}
	}
}

static void signal_cb(evutil_socket_t fd, short what, void *arg)
{
	struct snarf *s = arg;
	struct signalfd_siginfo si;
	char why[32];

	while (read(fd, &si, sizeof si) == (ssize_t)sizeof si) {
		int sig = (int)si.ssi_signo;
		if (sig == SIGCHLD) {
			reap(s);
			continue;
		}
		if (s->child) {
			/* The terminal already signalled CMD's whole process group. */
			if (si.ssi_code == SI_KERNEL)
				continue;
			if (!s->child_done)
				kill(s->child, sig);
			continue;
		}
		if (sig == SIGHUP || sig == SIGINT || sig == SIGQUIT || sig == SIGTERM) {
			snprintf(why, sizeof why, "signal %d", sig);
			core_shutdown(s, why);
		}
	}
}

int signals_setup(struct snarf *s)
{
	sigset_t set;

	handled_set(&set);
	s->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (s->sigfd < 0)
		return -errno;
	s->sig_event = event_new(s->base, s->sigfd, EV_READ | EV_PERSIST, signal_cb, s);
	if (!s->sig_event || event_add(s->sig_event, NULL) < 0)
		return -ENOMEM;
	if (s->child)
		reap(s);                  /* CMD may already have exited */
	return 0;
}

void signals_free(struct snarf *s)
{
	if (s->sig_event)
		event_free(s->sig_event);
	if (s->sigfd >= 0)
		close(s->sigfd);
	s->sig_event = NULL;
	s->sigfd = -1;
}

int child_exit_code(struct snarf *s)
{
	struct rlimit no_core = { 0, 0 };
	int st = s->child_status, sig;

	if (!s->child)
		return s->exit_code;
	if (!s->child_done) {
		/* We are exiting first (second signal): CMD keeps running. */
		return s->exit_code;
	}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	sig = WTERMSIG(st);
	/* Die of the same signal so our parent sees what CMD did (without a
	 * second core dump); fall back to the shell's 128+N convention. */
	setrlimit(RLIMIT_CORE, &no_core);
	signal(sig, SIG_DFL);
	sigprocmask(SIG_SETMASK, &original_mask, NULL);
	{
		sigset_t one;
		sigemptyset(&one);
		sigaddset(&one, sig);
		sigprocmask(SIG_UNBLOCK, &one, NULL);
	}
	raise(sig);
	return 128 + sig;
}
