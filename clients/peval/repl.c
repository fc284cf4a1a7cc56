/* peval's interactive loop (see repl.h). libedit's readline() reads each
 * line; SIGINT is caught (not fatal) so that Ctrl-C abandons the command
 * being typed, as in a shell. History goes through libedit's history
 * functions, bounded to REPL_HISTORY_MAX entries, and is saved after every
 * command so that a session that is killed loses nothing. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <editline/readline.h>

#include "pspec/pspec.h"
#include "repl.h"

static const char banner[] =
    "PSpec Evaluator. Commands end with ';'. Type help (or ?) for the syntax, quit or Ctrl-D\n"
    "to leave; Ctrl-C cancels the command being typed.\n";

static const char repl_help[] =
    "At this prompt, help, ?, quit and exit work alone on a line without ';'.\n"
    "Ctrl-C cancels the command being typed (all its lines); Ctrl-D or quit leaves.\n"
    "Up and down arrows recall earlier commands, kept in the history file%s%s.\n";

static volatile sig_atomic_t interrupted;   /* SIGINT since we last looked */
static volatile sig_atomic_t evaluating;    /* a command is running */

/* Ctrl-C: at the prompt, cancel the input (readline returns); while a
 * command runs (evaluation cannot be cut short), the first one says so
 * and a second one ends peval, as Ctrl-C used to. */
static void on_sigint(int sig)
{
	static const char msg[] = "\n(evaluating; Ctrl-C again to quit peval)\n";

	(void)sig;
	if (evaluating && interrupted)
		_exit(130);
	if (evaluating && write(STDERR_FILENO, msg, sizeof msg - 1) < 0) {
		/* nothing to do about it in a signal handler */
	}
	interrupted = 1;
}

static void run_one(repl_run_fn *run, void *ctx, const char *text)
{
	interrupted = 0;
	evaluating = 1;
	run(ctx, text);
	evaluating = 0;
}

/* mkdir -p `path` with mode 0700 for what is created. */
static bool make_dirs(const char *path)
{
	char buf[PATH_MAX];

	if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf)
		return false;
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			if (mkdir(buf, 0700) < 0 && errno != EEXIST)
				return false;
			*p = '/';
		}
	return mkdir(buf, 0700) == 0 || errno == EEXIST;
}

bool repl_history_path(char *out, size_t size)
{
	const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	char dir[PATH_MAX];
	int n;

	/* the XDG base directory rules: a relative value is to be ignored */
	if (state && state[0] == '/')
		n = snprintf(dir, sizeof dir, "%s/cmon", state);
	else if (home && home[0] == '/')
		n = snprintf(dir, sizeof dir, "%s/.local/state/cmon", home);
	else
		return false;
	if (n < 0 || (size_t)n >= sizeof dir || !make_dirs(dir))
		return false;
	n = snprintf(out, size, "%s/peval_history", dir);
	return n > 0 && (size_t)n < size;
}

/* `line` with surrounding blanks and one trailing ';' removed is `word`. */
static bool is_word(const char *line, const char *word)
{
	size_t n = strlen(word);

	line += strspn(line, " \t");
	if (strncmp(line, word, n))
		return false;
	line += n;
	line += strspn(line, " \t");
	if (*line == ';')
		line += 1 + strspn(line + 1, " \t");
	return *line == '\0';
}

static void remember(const char *cmd, const char *hist)
{
	add_history(cmd);
	if (hist && write_history(hist) != 0) {
		/* a history that cannot be saved does not stop the session */
	}
}

void repl_run(repl_run_fn *run, void *ctx)
{
	struct sigaction sa = { .sa_handler = on_sigint }, old;
	char hist[PATH_MAX];
	bool have_hist = repl_history_path(hist, sizeof hist);
	char *acc = NULL;
	size_t acclen = 0;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old);     /* no SA_RESTART: the read is interrupted */
	using_history();
	stifle_history(REPL_HISTORY_MAX);
	if (have_hist)
		read_history(hist);           /* none yet is fine */
	fputs(banner, stdout);
	for (;;) {
		interrupted = 0;
		char *line = readline(acclen ? "   " : "-> ");
		if (interrupted) {
			/* Ctrl-C: forget what was typed, start again */
			free(line);
			fputs("^C\n", stdout);
			fflush(stdout);
			acclen = 0;
			if (acc)
				acc[0] = '\0';
			continue;
		}
		if (!line)
			break;                    /* Ctrl-D */
		if (acclen == 0 && (is_word(line, "quit") || is_word(line, "exit"))) {
			remember(line, have_hist ? hist : NULL);
			free(line);
			break;
		}
		if (acclen == 0 && (is_word(line, "help") || is_word(line, "?"))) {
			remember(line, have_hist ? hist : NULL);
			free(line);
			run_one(run, ctx, "help;");
			printf(repl_help, have_hist ? " " : "", have_hist ? hist : " (none: no home)");
			fflush(stdout);
			continue;
		}
		size_t n = strlen(line);
		char *na = realloc(acc, acclen + n + 2);
		if (!na) {
			free(line);
			break;
		}
		acc = na;
		memcpy(acc + acclen, line, n);
		acclen += n;
		acc[acclen++] = '\n';
		acc[acclen] = '\0';
		free(line);
		if (strspn(acc, " \t\n") == acclen) {   /* blank lines before any command */
			acclen = 0;
			acc[0] = '\0';
			continue;
		}
		if (pspec_command_complete(acc)) {
			acc[acclen - 1] = '\0';
			remember(acc, have_hist ? hist : NULL);
			acc[acclen - 1] = '\n';
			run_one(run, ctx, acc);
			acclen = 0;
			acc[0] = '\0';
		}
	}
	putchar('\n');
	free(acc);
	if (have_hist)
		write_history(hist);
	sigaction(SIGINT, &old, NULL);
}
