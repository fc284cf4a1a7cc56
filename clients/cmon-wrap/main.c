/* cmon-wrap — make a production program run under snarflog, in place.
 *
 *   cmon-wrap [-n NAME] [-ascii|-binary] [-buffer N] [-regmachine ADDR]
 *             [-snarflog PATH] [-tls-cert F -tls-key F] [-tls-ca F] PROGRAM
 *   cmon-wrap -undo PROGRAM
 *
 * Parse the command line, find the files, and hand over to wrap.c. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmon/cmdline.h"
#include "cmon/names.h"
#include "wrap.h"

static const char usage[] =
	"Usage: cmon-wrap [-n NAME] [-ascii|-binary] [-buffer NBYTES] [-regmachine ADDR]\n"
	"                 [-snarflog PATH] [-tls-cert FILE -tls-key FILE] [-tls-ca FILE]\n"
	"                 PROGRAM\n"
	"       cmon-wrap -undo PROGRAM\n"
	"\n"
	"Replaces PROGRAM by a script that runs it under snarflog (the original is\n"
	"kept as PROGRAM.real), so it is monitored wherever it is started.\n"
	"\n"
	"  -n, --name NAME              program name to announce (default: PROGRAM's\n"
	"                               file name)\n"
	"  -ascii, --ascii              log format ascii (default: snarflog detects it)\n"
	"  -binary, --binary            log format binary\n"
	"  -buffer, --buffer NBYTES     snarflog buffer size (K, M or G allowed)\n"
	"  -regmachine, --regmachine ADDR\n"
	"                               registry address baked into the wrapper\n"
	"  -snarflog, --snarflog PATH   snarflog to use (default: found in $PATH, else\n"
	"                               next to cmon-wrap, else in its build tree)\n"
	"  -tls-cert, --tls-cert FILE   TLS certificate baked into the wrapper\n"
	"  -tls-key, --tls-key FILE     its private key\n"
	"  -tls-ca, --tls-ca FILE       the CA\n"
	"  -undo, --undo                put PROGRAM.real back in place of the wrapper\n"
	"  -h, --help                   show this help and exit\n"
	"  -V, --version                show the version and exit\n"
	"\n"
	"Exit status:\n"
	"  0  PROGRAM was wrapped (or restored)\n"
	"  1  it could not be: not found, not a regular file, setuid, a symbolic\n"
	"     link, no snarflog, or a file could not be written\n"
	"  2  bad command line or name\n";

static void die(int code, const char *fmt, const char *arg)
{
	fprintf(stderr, "cmon-wrap: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(code);
}

/* Find an executable in $PATH; returns a malloc'd absolute path or NULL. */
static char *search_path(const char *name)
{
	const char *path = getenv("PATH");
	char *copy, *dir, *save = NULL, buf[PATH_MAX], *found = NULL;

	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	copy = strdup(path);
	for (dir = strtok_r(copy, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
		if ((size_t)snprintf(buf, sizeof buf, "%s/%s", *dir ? dir : ".", name) >= sizeof buf)
			continue;
		if (access(buf, X_OK) == 0)
			found = realpath(buf, NULL);
	}
	free(copy);
	return found;
}

/* The snarflog a wrapper should run: the first in $PATH, else the one
 * installed next to this program, else the one in this program's build
 * tree (daemons/snarflog). Absolute and resolved; NULL if none. */
static char *find_snarflog(void)
{
	static const char *const rel[] = { "snarflog", "../../daemons/snarflog/snarflog" };
	char self[PATH_MAX], buf[PATH_MAX + 64], *found = search_path("snarflog"), *slash;
	ssize_t n;

	if (found)
		return found;
	n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return NULL;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	for (size_t i = 0; i < sizeof rel / sizeof rel[0] && !found; i++) {
		snprintf(buf, sizeof buf, "%s/%s", self, rel[i]);
		if (access(buf, X_OK) == 0)
			found = realpath(buf, NULL);
	}
	return found;
}

/* PROGRAM as an absolute path without resolving its last component (a
 * symbolic link there is refused later, not silently followed). */
static char *absolute(const char *prog)
{
	char dirbuf[PATH_MAX], *slash, *dir, *out;
	const char *base;

	if (!strchr(prog, '/')) {
		char *p = search_path(prog);
		if (!p)
			die(1, "%s: not found in $PATH (give a path)", prog);
		return p;
	}
	snprintf(dirbuf, sizeof dirbuf, "%s", prog);
	slash = strrchr(dirbuf, '/');
	base = prog + (slash - dirbuf) + 1;
	if (slash == dirbuf)
		slash[1] = '\0';
	else
		*slash = '\0';
	if (!*base)
		die(1, "%s: not a file", prog);
	dir = realpath(dirbuf, NULL);
	if (!dir)
		die(1, "%s: no such directory", dirbuf);
	if (asprintf(&out, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, base) < 0)
		die(1, "%s", "out of memory");
	free(dir);
	return out;
}

static bool buffer_ok(const char *s)
{
	size_t n = strspn(s, "0123456789");

	return n > 0 && (s[n] == '\0' || (strchr("kKmMgG", s[n]) && s[n + 1] == '\0'));
}

int main(int argc, char **argv)
{
	enum { O_ASCII = 256, O_BINARY, O_BUFFER, O_REG, O_SNARF, O_CERT, O_KEY, O_CA, O_UNDO };
	static const struct option opts[] = {
		{ "n", required_argument, NULL, 'n' },
		{ "name", required_argument, NULL, 'n' },
		{ "ascii", no_argument, NULL, O_ASCII },
		{ "binary", no_argument, NULL, O_BINARY },
		{ "buffer", required_argument, NULL, O_BUFFER },
		{ "regmachine", required_argument, NULL, O_REG },
		{ "snarflog", required_argument, NULL, O_SNARF },
		{ "tls-cert", required_argument, NULL, O_CERT },
		{ "tls-key", required_argument, NULL, O_KEY },
		{ "tls-ca", required_argument, NULL, O_CA },
		{ "undo", no_argument, NULL, O_UNDO },
		{ NULL, 0, NULL, 0 },
	};
	/* -n is a long option of its own, not a short one, so that a mistyped
	 * -no-such-option is not read as -n o-such-option */
	static const struct cmon_cmdline cl = { "cmon-wrap", usage, "", opts };
	struct wrap_opts o = { 0 };
	const char *snarf = NULL;
	char err[512], *prog, *name = NULL;
	bool undo = false;
	int c;

	while ((c = cmon_cmdline_next(&cl, argc, argv)) != -1) {
		switch (c) {
		case 'n': o.name = optarg; break;
		case O_ASCII: o.format = "-ascii"; break;
		case O_BINARY: o.format = "-binary"; break;
		case O_BUFFER: o.buffer = optarg; break;
		case O_REG: o.regmachine = optarg; break;
		case O_SNARF: snarf = optarg; break;
		case O_CERT: o.tls_cert = optarg; break;
		case O_KEY: o.tls_key = optarg; break;
		case O_CA: o.tls_ca = optarg; break;
		case O_UNDO: undo = true; break;
		}
	}
	if (optind == argc)
		cmon_cmdline_fail(&cl, "no PROGRAM given");
	if (optind + 1 < argc)
		cmon_cmdline_fail(&cl, "unexpected argument '%s' (one PROGRAM at a time)", argv[optind + 1]);
	if (o.buffer && !buffer_ok(o.buffer))
		cmon_cmdline_fail(&cl, "bad value '%s' for -buffer", o.buffer);
	if (o.name && !cmon_name_valid(o.name))
		cmon_cmdline_fail(&cl, "invalid -n name '%s' (up to 64 of A-Z a-z 0-9 . _ + -)", o.name);
	prog = absolute(argv[optind]);
	if (undo) {
		if (unwrap_program(prog, err, sizeof err) < 0)
			die(1, "%s", err);
		printf("restored %s\n", prog);
		free(prog);
		return 0;
	}
	if (!o.name) {
		const char *base = strrchr(prog, '/') + 1;
		if (!cmon_name_valid(base))
			cmon_cmdline_fail(&cl, "'%s' is not a valid program name; choose one with -n",
					  base);
		o.name = base;
	}
	if (snarf) {
		name = realpath(snarf, NULL);
		if (!name || access(name, X_OK) != 0)
			die(1, "%s: not an executable", snarf);
	} else {
		name = find_snarflog();
		if (!name)
			die(1, "%s", "snarflog not found in $PATH, next to cmon-wrap or in its "
			    "build tree (use -snarflog PATH)");
	}
	o.snarflog = name;
	if (wrap_program(prog, &o, err, sizeof err) < 0)
		die(1, "%s", err);
	printf("wrapped %s (original kept as %s%s); undo with: cmon-wrap -undo %s\n", prog, prog,
	       WRAP_SUFFIX, prog);
	free(name);
	free(prog);
	return 0;
}
