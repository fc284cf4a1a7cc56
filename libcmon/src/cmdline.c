/* The command-line front end (see cmon/cmdline.h): getopt_long_only with
 * -h/--help and -V/--version added, getopt's own messages silenced (a
 * leading ':' and opterr = 0) and replaced by GNU-worded ones that name the
 * program instead of argv[0]. */
#include "cmon/cmdline.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CMON_VERSION
#define CMON_VERSION "unknown"
#endif

/* Codes of the two options every program has. */
enum { OPT_HELP = 'h', OPT_VERSION = 'V' };

/* The program's options plus help and version. */
struct merged {
	char shortopts[128];
	struct option longopts[CMON_CMDLINE_MAX_OPTS + 3];
};

static void merge(const struct cmon_cmdline *c, struct merged *m)
{
	const char *s = c->shortopts ? c->shortopts : "";
	size_t n = 0;

	/* "+" (stop at the first operand) must stay first, ':' comes next */
	if (snprintf(m->shortopts, sizeof m->shortopts, "%s:%shV", *s == '+' ? "+" : "",
		     *s == '+' ? s + 1 : s) >= (int)sizeof m->shortopts)
		abort();
	for (const struct option *o = c->longopts; o && o->name; o++) {
		if (n == CMON_CMDLINE_MAX_OPTS)
			abort();        /* raise CMON_CMDLINE_MAX_OPTS */
		m->longopts[n++] = *o;
	}
	m->longopts[n++] = (struct option){ "help", no_argument, NULL, OPT_HELP };
	m->longopts[n++] = (struct option){ "version", no_argument, NULL, OPT_VERSION };
	m->longopts[n] = (struct option){ NULL, 0, NULL, 0 };
}

void cmon_cmdline_fail(const struct cmon_cmdline *c, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", c->prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help' for more information.\n", c->prog);
	exit(CMON_EXIT_USAGE);
}

/* The long options `word` ("-name", "--name" or "--name=value") can mean,
 * as getopt decides: an exact match, else the prefix matches (options that
 * differ only in name count once). Returns how many; *found is the first. */
static int long_matches(const struct option *opts, const char *word, const struct option **found)
{
	const char *name = word + (word[1] == '-' ? 2 : 1);
	size_t len = strcspn(name, "=");
	int count = 0;

	*found = NULL;
	if (len == 0)
		return 0;       /* "-=value": no name at all */
	for (const struct option *o = opts; o->name; o++) {
		if (strncmp(o->name, name, len) != 0)
			continue;
		if (strlen(o->name) == len) {
			*found = o;
			return 1;
		}
		if (!*found) {
			*found = o;
			count = 1;
		} else if (o->has_arg != (*found)->has_arg || o->flag != (*found)->flag ||
			   o->val != (*found)->val) {
			count++;
		}
	}
	return count;
}

/* The dashes the user typed before a long option's name. */
static const char *dashes(const char *word)
{
	return word[1] == '-' ? "--" : "-";
}

/* An option `word` missing its argument: the long option (named in full,
 * as getopt does) or the short letter `opt`. */
static __attribute__((noreturn)) void fail_missing(const struct cmon_cmdline *c,
						   const struct merged *m, const char *word, int opt)
{
	const struct option *o;
	bool is_short = word[1] != '-' && word[2] == '\0' && strchr(m->shortopts, word[1]);

	if (!is_short && long_matches(m->longopts, word, &o) == 1 && o->val == opt)
		cmon_cmdline_fail(c, "option '%s%s' requires an argument", dashes(word), o->name);
	cmon_cmdline_fail(c, "option requires an argument -- '%c'", opt);
}

/* An unknown or ambiguous long option, an argument given to a long option
 * that takes none, or an unknown short letter `opt`. */
static __attribute__((noreturn)) void fail_unknown(const struct cmon_cmdline *c,
						   const struct merged *m, const char *word, int opt)
{
	const struct option *o;
	char list[1024];
	size_t n = 0;
	int k;

	if (opt != 0) {
		k = word[0] == '-' && strchr(word, '=') ? long_matches(m->longopts, word, &o) : 0;
		if (k == 1 && o->val == opt && o->has_arg == no_argument)
			cmon_cmdline_fail(c, "option '%s%s' doesn't allow an argument", dashes(word),
					  o->name);
		cmon_cmdline_fail(c, "invalid option -- '%c'", opt);
	}
	if (long_matches(m->longopts, word, &o) > 1) {
		const char *name = word + strlen(dashes(word));
		size_t len = strcspn(name, "=");
		for (const struct option *p = m->longopts; p->name && n < sizeof list - 1; p++)
			if (strncmp(p->name, name, len) == 0)
				n += (size_t)snprintf(list + n, sizeof list - n, " '%s%s'", dashes(word),
						      p->name);
		list[n < sizeof list ? n : sizeof list - 1] = '\0';
		cmon_cmdline_fail(c, "option '%.*s' is ambiguous; possibilities:%s",
				  (int)(strlen(dashes(word)) + len), word, list);
	}
	cmon_cmdline_fail(c, "unrecognized option '%s'", word);
}

int cmon_cmdline_next(const struct cmon_cmdline *c, int argc, char **argv)
{
	struct merged m;
	int ch;

	merge(c, &m);
	opterr = 0;
	ch = getopt_long_only(argc, argv, m.shortopts, m.longopts, NULL);
	switch (ch) {
	case OPT_HELP:
		fputs(c->usage, stdout);
		exit(fflush(stdout) == 0 && !ferror(stdout) ? EXIT_SUCCESS : EXIT_FAILURE);
	case OPT_VERSION:
		printf("%s (CMon) %s\n", c->prog, CMON_VERSION);
		exit(fflush(stdout) == 0 && !ferror(stdout) ? EXIT_SUCCESS : EXIT_FAILURE);
	case ':':
		fail_missing(c, &m, argv[optind - 1], optopt);
	case '?':
		fail_unknown(c, &m, argv[optind - 1], optopt);
	default:
		return ch;
	}
}
