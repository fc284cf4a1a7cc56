/* Unit tests for cmon/cmdline.h: each case parses an argv in a child
 * process (the front end prints and exits) and checks its exit status, its
 * standard output and error, and the options and operands it returned. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmon/cmdline.h"

enum { O_CONT = 256, O_STATE, O_HELLO };

static const struct option longopts[] = {
	{ "spec", required_argument, NULL, 's' },
	{ "cont", no_argument, NULL, O_CONT },
	{ "state", required_argument, NULL, O_STATE },
	{ "hello", no_argument, NULL, O_HELLO },
	{ NULL, 0, NULL, 0 },
};
static const struct cmon_cmdline permuting = { "prog", "Usage: prog [OPTION]...\n", "s:f", longopts };
static const struct cmon_cmdline in_order = { "prog", "Usage: prog\n", "+s:f", longopts };

#define TRY "Try 'prog --help' for more information.\n"
#define MAXARGS 8

struct cmd_case {
	const char *name;
	const struct cmon_cmdline *cl;
	const char *argv[MAXARGS];   /* after the program name, NULL-terminated */
	int status;                  /* exit status */
	const char *out, *err;       /* standard output and error, exactly */
	const char *trace;           /* what cmon_cmdline_next returned: "s=a cont | x y" */
};

static const struct cmd_case cases[] = {
	{ "both spellings", &permuting, { "-s", "a", "--spec", "b", "-spec=c", "-sd", "--sp=e" }, 0,
	  "", "", "s=a s=b s=c s=d s=e |" },
	{ "single-dash long, prefix", &permuting, { "-cont", "--cont", "-co", "--c" }, 0, "", "",
	  "cont cont cont cont |" },
	{ "operands permuted", &permuting, { "x", "-cont", "y", "-f" }, 0, "", "", "cont f | x y" },
	{ "-- ends the options", &permuting, { "-f", "--", "-s", "--cont" }, 0, "", "",
	  "f | -s --cont" },
	{ "+: in order", &in_order, { "-f", "x", "-cont" }, 0, "", "", "f | x -cont" },
	{ "-h is help", &permuting, { "-h", "-no-such" }, 0, "Usage: prog [OPTION]...\n", "", "" },
	{ "--help", &permuting, { "--help" }, 0, "Usage: prog [OPTION]...\n", "", "" },
	{ "-V", &permuting, { "-V" }, 0, "prog (CMon) " CMON_VERSION "\n", "", "" },
	{ "--version", &permuting, { "-cont", "--version" }, 0, "prog (CMon) " CMON_VERSION "\n",
	  "", "" },
	{ "unknown --long", &permuting, { "--no-such-option" }, 2, "",
	  "prog: unrecognized option '--no-such-option'\n" TRY, "" },
	{ "unknown -long", &permuting, { "-no-such-option" }, 2, "",
	  "prog: unrecognized option '-no-such-option'\n" TRY, "" },
	{ "unknown with value", &permuting, { "--nope=1" }, 2, "",
	  "prog: unrecognized option '--nope=1'\n" TRY, "" },
	{ "no name", &permuting, { "-=x" }, 2, "", "prog: unrecognized option '-=x'\n" TRY, "" },
	{ "unknown letter in a cluster", &permuting, { "-fx" }, 2, "",
	  "prog: invalid option -- 'x'\n" TRY, "" },
	{ "short missing its argument", &permuting, { "-s" }, 2, "",
	  "prog: option requires an argument -- 's'\n" TRY, "" },
	{ "cluster missing its argument", &permuting, { "-fs" }, 2, "",
	  "prog: option requires an argument -- 's'\n" TRY, "" },
	{ "long missing its argument", &permuting, { "--spec" }, 2, "",
	  "prog: option '--spec' requires an argument\n" TRY, "" },
	{ "single-dash prefix missing its argument", &permuting, { "-sta" }, 2, "",
	  "prog: option '-state' requires an argument\n" TRY, "" },
	{ "argument to a flag", &permuting, { "--cont=yes" }, 2, "",
	  "prog: option '--cont' doesn't allow an argument\n" TRY, "" },
	{ "ambiguous prefix", &permuting, { "-he" }, 2, "",
	  "prog: option '-he' is ambiguous; possibilities: '-hello' '-help'\n" TRY, "" },
	{ "ambiguous --prefix", &permuting, { "--s=1" }, 2, "",
	  "prog: option '--s' is ambiguous; possibilities: '--spec' '--state'\n" TRY, "" },
	{ "fail", &permuting, { "-s", "abc", "fail" }, 2, "", "prog: bad value 'abc' for -s\n" TRY,
	  "" },
};

/* The child: parse, write what was returned to `trace`, exit 0; or call
 * cmon_cmdline_fail when the operand "fail" comes. */
static void child(const struct cmd_case *c, int trace)
{
	char *argv[MAXARGS + 2] = { "prog" };
	const char *last = NULL;
	int argc = 1, ch;

	for (; c->argv[argc - 1]; argc++)
		argv[argc] = (char *)c->argv[argc - 1];
	optind = 0;
	while ((ch = cmon_cmdline_next(c->cl, argc, argv)) != -1) {
		if (ch == 's') {
			last = optarg;
			dprintf(trace, "s=%s ", optarg);
		} else {
			dprintf(trace, "%s ", ch == 'f' ? "f" : ch == O_CONT ? "cont" :
				ch == O_STATE ? "state" : "hello");
		}
	}
	dprintf(trace, "|");
	for (; optind < argc; optind++) {
		if (!strcmp(argv[optind], "fail"))
			cmon_cmdline_fail(c->cl, "bad value '%s' for -s", last);
		dprintf(trace, " %s", argv[optind]);
	}
	_exit(0);
}

static void slurp(int fd, char *buf, size_t size)
{
	size_t n = 0;
	ssize_t r;

	while (n < size - 1 && (r = read(fd, buf + n, size - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = '\0';
	close(fd);
}

static void cmdline_cases(void **state)
{
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const struct cmd_case *c = &cases[i];
		int out[2], err[2], tr[2], st;
		char obuf[4096], ebuf[4096], tbuf[4096];
		pid_t pid;

		assert_int_equal(pipe(out), 0);
		assert_int_equal(pipe(err), 0);
		assert_int_equal(pipe(tr), 0);
		fflush(NULL);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			dup2(out[1], 1);
			dup2(err[1], 2);
			close(out[0]);
			close(err[0]);
			close(tr[0]);
			child(c, tr[1]);
		}
		close(out[1]);
		close(err[1]);
		close(tr[1]);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		slurp(out[0], obuf, sizeof obuf);
		slurp(err[0], ebuf, sizeof ebuf);
		slurp(tr[0], tbuf, sizeof tbuf);
		print_message("case '%s': exit %d, out %s, err %s, trace %s\n", c->name,
			      WIFEXITED(st) ? WEXITSTATUS(st) : -1, obuf, ebuf, tbuf);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), c->status);
		assert_string_equal(obuf, c->out);
		assert_string_equal(ebuf, c->err);
		if (c->status == 0 && !*c->out)
			assert_string_equal(tbuf, c->trace);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cmdline_cases),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
