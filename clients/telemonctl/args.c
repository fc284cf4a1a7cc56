/* telemonctl's command line: which command, which options each accepts
 * (the service's command table, cmdtab.h), and turning user spellings (times, relative paths) into what the
 * service expects. Usage errors are "telemonctl: MESSAGE" and a Try line
 * on standard error, exit status 2 (cmon/cmdline.h). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmon/cmdline.h"
#include "cmon/when.h"
#include "cmdtab.h"
#include "telemonctl.h"

static const char usage[] =
	"Usage: telemonctl [-state DIR] [-json] COMMAND [ARGS]\n"
	"\n"
	"Commands:\n"
	"  status                          the service: registry, counts, mail, store\n"
	"  classes                         the configured classes\n"
	"  class add PROP=VALUE...         add a class (prog machine pid tool spec mail\n"
	"                                  window mailgroup block auto notify-reports\n"
	"                                  alertmanager resolve-after mail-resolved\n"
	"                                  allow-unbounded); saved and live\n"
	"  class set ID PROP=VALUE...      change a class\n"
	"  class rm ID                     remove a class\n"
	"  instances [--all] [--limit N]   running instances (--all: ended ones too)\n"
	"  start ID                        start monitoring a listed instance\n"
	"  stop ID                         stop monitoring an instance\n"
	"  typescript ID                   what an instance's tools printed\n"
	"  verdicts ID                     an instance's end-of-log verdicts, and the intervals\n"
	"                                  it left open (unclosed)\n"
	"  history PROG                    the versions PROG ran with (log header), first and\n"
	"                                  last seen\n"
	"  compare PROG V1 V2 [--assert LABEL]\n"
	"                                  which report metrics changed from version V1 to\n"
	"                                  V2, by how much (95% interval), and a verdict\n"
	"  failures [--prog P] [--assert LABEL] [--since T] [--until T] [--instance ID]\n"
	"           [--limit N] [--before ID] [--reports | --failures-only]\n"
	"                                  stored failures (T: 2024-03-01, 2024-03-01T12:00,\n"
	"                                  '2 hours' ago, UNIXTIME or @UNIXTIME; times are\n"
	"                                  UTC); the latest N, or the latest N older than\n"
	"                                  failure ID; reports of report assertions only,\n"
	"                                  or failures only (default: both, FLAGS says\n"
	"                                  report)\n"
	"  window ID                       the log window of failure ID (cmon-ascii 1)\n"
	"  stats --prog P --assert LABEL [--day YYYY-MM-DD]\n"
	"                                  a periodic report assertion's metrics per day\n"
	"  silence add MATCHER... (-until T | -for DURATION) [-comment TEXT]\n"
	"                                  matching failures are stored, not notified;\n"
	"                                  MATCHER: prog=GLOB machine=GLOB assert=GLOB\n"
	"  silence list                    the active silences\n"
	"  silence rm ID                   end a silence now\n"
	"                                  (with an Alertmanager, silences are kept there:\n"
	"                                  ID is its silence id)\n"
	"  ack ID [-comment TEXT]          acknowledge failure ID\n"
	"\n"
	"Options (before or after the command; one dash or two, -json or --json):\n"
	"  -state, --state DIR      the service's state directory (default\n"
	"                           $TELEMON_STATE, else ~/.telemonitor, else\n"
	"                           /var/lib/telemonitor)\n"
	"  -json, --json            JSON output (an array or an object)\n"
	"  -all, --all              instances: ended ones too\n"
	"  -limit, --limit N        instances, failures: at most N\n"
	"  -prog, --prog P          failures, stats: of program P\n"
	"  -assert, --assert LABEL  failures, stats: of this assertion\n"
	"  -since, --since T        failures: stored at or after T\n"
	"  -reports, --reports      failures: only the reports of report assertions\n"
	"  -failures-only, --failures-only\n"
	"                           failures: only failures, no reports\n"
	"  -kind, --kind K          failures: failure, report or all (the default)\n"
	"  -instance, --instance ID failures: of instance ID\n"
	"  -before, --before ID     failures: older than failure ID\n"
	"  -day, --day YYYY-MM-DD   stats: of this day only\n"
	"  -until, --until T        silence add: until T; failures: stored before T\n"
	"  -for, --for DURATION     silence add: for DURATION ('2 hours', '30 min')\n"
	"  -comment, --comment TEXT silence add, ack: a comment\n"
	"  -h, --help               show this help and exit\n"
	"  -V, --version            show the version and exit\n"
	"\n"
	"Exit status:\n"
	"  0  done\n"
	"  1  the service (or its Alertmanager) refused (the message says why)\n"
	"  2  bad command line\n"
	"  3  the service (or its Alertmanager) cannot be reached\n";

/* The command line: these options plus -h/--help and -V/--version; which
 * command takes which comes from cmdtab.h (check_options). */
enum { O_STATE = 256, O_JSON, O_ALL, O_PROG, O_ASSERT, O_SINCE, O_LIMIT, O_INSTANCE, O_BEFORE,
       O_DAY, O_UNTIL, O_FOR, O_COMMENT, O_KIND, O_REPORTS, O_FAILURES_ONLY };
static const struct option opts[] = {
	{ "state", required_argument, NULL, O_STATE },
	{ "json", no_argument, NULL, O_JSON },
	{ "all", no_argument, NULL, O_ALL },
	{ "prog", required_argument, NULL, O_PROG },
	{ "assert", required_argument, NULL, O_ASSERT },
	{ "since", required_argument, NULL, O_SINCE },
	{ "limit", required_argument, NULL, O_LIMIT },
	{ "instance", required_argument, NULL, O_INSTANCE },
	{ "before", required_argument, NULL, O_BEFORE },
	{ "day", required_argument, NULL, O_DAY },
	{ "until", required_argument, NULL, O_UNTIL },
	{ "for", required_argument, NULL, O_FOR },
	{ "comment", required_argument, NULL, O_COMMENT },
	{ "kind", required_argument, NULL, O_KIND },
	{ "reports", no_argument, NULL, O_REPORTS },
	{ "failures-only", no_argument, NULL, O_FAILURES_ONLY },
	{ NULL, 0, NULL, 0 },
};
static const struct cmon_cmdline cmdline = { "telemonctl", usage, "", opts };

/* A usage error: "telemonctl: MESSAGE", the Try line, exit status 2. */
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cmon_cmdline_fail(&cmdline, "%s", msg);
}

static void word(struct ctl_cmd *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void word(struct ctl_cmd *c, const char *fmt, ...)
{
	va_list ap;
	char *s;

	if (c->nwords >= CTL_WORDS_MAX)
		die("too many arguments");
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (!s) {
		fprintf(stderr, "telemonctl: out of memory\n");
		exit(EXIT_REFUSED);
	}
	c->words[c->nwords++] = s;
}

static void need_id(const char *cmd, const char *s)
{
	char *end;

	if (!s)
		die("%s: an id is missing", cmd);
	errno = 0;
	if (!isdigit((unsigned char)*s) || strtoull(s, &end, 10) == 0 || *end || errno)
		die("%s: '%s' is not an id (a positive number)", cmd, s);
}

/* A time (cmon/when.h: the forms the HTTP API takes too) as Unix seconds,
 * or -1. */
static double parse_time(const char *s)
{
	double t;

	return cmon_when_parse(s, (double)time(NULL), &t) ? t : -1;
}

static bool valid_day(const char *s)
{
	struct tm tm = { 0 };
	char *e;

	if (strlen(s) != 10)
		return false;
	e = strptime(s, "%Y-%m-%d", &tm);
	return e && !*e;
}

/* A class property; spec paths are made absolute (the service's working
 * directory is not ours). */
static void property(struct ctl_cmd *c, const char *cmd, const char *arg)
{
	const char *eq = strchr(arg, '=');
	char cwd[PATH_MAX], real[PATH_MAX];

	if (!eq || eq == arg)
		die("%s: expected PROPERTY=VALUE, not '%s'", cmd, arg);
	if (!strncmp(arg, "spec=", 5) && eq[1] && eq[1] != '/') {
		if (realpath(eq + 1, real)) {
			word(c, "spec=%s", real);
			return;
		}
		if (getcwd(cwd, sizeof cwd)) {
			word(c, "spec=%s/%s", cwd, eq + 1);
			return;
		}
	}
	word(c, "%s", arg);
}

/* A duration "N UNIT" ("2 hours", "30 min", "1 day") in seconds, or -1. */
static double parse_duration(const char *s)
{
	char buf[80];
	double now = (double)time(NULL), t;

	if (strlen(s) > 60 || strstr(s, "ago"))
		return -1;
	snprintf(buf, sizeof buf, "%s ago", s);
	t = parse_time(buf);
	return t < 0 ? -1 : now - t;
}

/* silence add MATCHER... | list | rm ID: matchers are prog=, machine=, assert=
 * (glob(7) patterns); the end is sent as Unix seconds. */
static void silence_args(struct ctl_cmd *c, char **pos, int n, const char *until, const char *dur,
			 const char *comment)
{
	const char *sub = n > 1 ? pos[1] : "";

	if (!strcmp(sub, "list")) {
		if (n != 2)
			die("silence list takes no arguments");
		word(c, "list");
		return;
	}
	if (!strcmp(sub, "rm")) {
		/* ours are numbers, Alertmanager's UUIDs */
		if (n > 2 && (strspn(pos[2], "0123456789abcdefABCDEF-") != strlen(pos[2]) ||
			      strlen(pos[2]) > 64 || !strpbrk(pos[2], "abcdefABCDEF-")))
			need_id("silence rm", pos[2]);
		else if (n <= 2)
			need_id("silence rm", NULL);
		if (n != 3)
			die("silence rm takes one id");
		word(c, "rm");
		word(c, "%s", pos[2]);
		return;
	}
	if (strcmp(sub, "add"))
		die("silence: expected add, list or rm");
	word(c, "add");
	if (n < 3)
		die("silence add: give matchers, e.g. prog=fsread 'assert=read*'");
	for (int i = 2; i < n; i++) {
		const char *eq = strchr(pos[i], '=');
		size_t k = eq ? (size_t)(eq - pos[i]) : 0;
		if (!eq || !((k == 4 && !strncmp(pos[i], "prog", 4)) ||
			     (k == 7 && !strncmp(pos[i], "machine", 7)) ||
			     (k == 6 && !strncmp(pos[i], "assert", 6))))
			die("silence add: '%s' is not a matcher (prog=GLOB, machine=GLOB or "
			    "assert=GLOB)", pos[i]);
		if (!eq[1])
			die("silence add: '%s' has an empty pattern", pos[i]);
		word(c, "%s", pos[i]);
	}
	if (!until == !dur)
		die("silence add: give the end with -until TIME or -for DURATION (one of them)");
	if (until) {
		double t = parse_time(until);
		if (t < 0)
			die("-until: '%s' is not a time (2024-03-01T12:00, @1700000000)", until);
		word(c, "until=%.3f", t);
	} else {
		double d = parse_duration(dur);
		if (!(d > 0))
			die("-for: '%s' is not a duration ('2 hours', '30 min', '1 day')", dur);
		word(c, "until=%.3f", (double)time(NULL) + d);
	}
	if (comment)
		word(c, "comment=%s", comment);
}

/* The options a command takes: the keys of cmdtab.h it is not given as
 * operands (for a command with subcommands, only its `add` does). */
static unsigned options_of(int ci, char **pos, int n)
{
	const struct cmd_info *info;

	if (ci < 0)
		return 0;
	info = cmd_info(ci);
	if ((info->flags & CMD_SUB) && !(n > 1 && !strcmp(pos[1], "add")))
		return 0;
	return info->keys & ~info->operands;
}

/* Die unless command `cmd` takes every option `given` (CK_* of cmdtab.h). */
static void check_options(const char *cmd, unsigned takes, unsigned given)
{
	/* -until, -for and -comment have messages of their own */
	const unsigned apart = CK_UNTIL | CK_COMMENT;
	char list[256] = "";
	size_t len = 0;
	int count = 0, k = 0;

	if (given & ~apart & ~takes) {
		if (!(takes & ~apart))
			die("%s takes no such option", cmd);
		for (int i = 0; i < CMD_NKEYS; i++)
			count += (takes & ~apart & (1u << i)) != 0;
		for (int i = 0; i < CMD_NKEYS; i++) {
			if (!(takes & ~apart & (1u << i)) || len >= sizeof list)
				continue;
			len += (size_t)snprintf(list + len, sizeof list - len, "%s--%s",
						k == 0 ? "" : k == count - 1 ? " and " : ", ",
						cmd_key_name(i));
			k++;
		}
		/* "instances takes only --all and --limit", "stats takes
		 * --prog, --assert and --day" */
		die("%s takes %s%s", cmd, count <= 2 ? "only " : "", list);
	}
	if ((given & CK_UNTIL) && !(takes & CK_UNTIL))
		die("-until belongs to silence add and failures, -for to silence add");
	if ((given & CK_COMMENT) && !(takes & CK_COMMENT))
		die("-comment belongs to silence add and ack");
}

/* The kind of failures asked for (--kind K, --reports, --failures-only):
 * `k`, unless another one was asked for already. */
static const char *take_kind(const char *had, const char *k)
{
	if (strcmp(k, "failure") && strcmp(k, "report") && strcmp(k, "all"))
		die("--kind: '%s' is not failure, report or all", k);
	if (had && strcmp(had, k))
		die("--reports, --failures-only and --kind ask for different kinds: give one");
	return k;
}

static const char *default_state(void)
{
	static char buf[PATH_MAX];
	const char *d = getenv("TELEMON_STATE"), *home = getenv("HOME");
	struct stat st;

	if (d && *d)
		return d;
	snprintf(buf, sizeof buf, "%s/.telemonitor", home && *home ? home : ".");
	if (stat(buf, &st) == 0)
		return buf;
	if (stat("/var/lib/telemonitor", &st) == 0)
		return "/var/lib/telemonitor";
	return buf;
}

void args_parse(int argc, char **argv, struct ctl_cmd *c)
{
	const char *prog = NULL, *assertion = NULL, *since = NULL, *limit = NULL, *inst = NULL;
	const char *day = NULL, *before = NULL, *until = NULL, *dur = NULL, *comment = NULL, *cmd;
	const char *kind = NULL;
	bool all = false;
	int ch, n, ci;
	char **pos;

	while ((ch = cmon_cmdline_next(&cmdline, argc, argv)) != -1) {
		switch (ch) {
		case O_STATE: c->state = optarg; break;
		case O_JSON: c->json = true; break;
		case O_ALL: all = true; break;
		case O_PROG: prog = optarg; break;
		case O_ASSERT: assertion = optarg; break;
		case O_SINCE: since = optarg; break;
		case O_LIMIT: limit = optarg; break;
		case O_INSTANCE: inst = optarg; break;
		case O_BEFORE: before = optarg; break;
		case O_DAY: day = optarg; break;
		case O_UNTIL: until = optarg; break;
		case O_FOR: dur = optarg; break;
		case O_COMMENT: comment = optarg; break;
		case O_KIND: kind = take_kind(kind, optarg); break;
		case O_REPORTS: kind = take_kind(kind, "report"); break;
		case O_FAILURES_ONLY: kind = take_kind(kind, "failure"); break;
		}
	}
	if (!c->state || !*c->state)
		c->state = default_state();
	pos = argv + optind;
	n = argc - optind;
	if (n < 1)
		die("no command given");
	cmd = pos[0];
	for (int i = 0; i < n; i++)
		if (!*pos[i])
			die("empty argument");
	ci = cmd_find(cmd);
	check_options(cmd, options_of(ci, pos, n),
		      (all ? CK_ALL : 0) | (prog ? CK_PROG : 0) | (assertion ? CK_ASSERT : 0) |
		      (since ? CK_SINCE : 0) | (inst ? CK_INSTANCE : 0) | (limit ? CK_LIMIT : 0) |
		      (before ? CK_BEFORE : 0) | (day ? CK_DAY : 0) |
		      (until || dur ? CK_UNTIL : 0) | (comment ? CK_COMMENT : 0) |
		      (kind ? CK_KIND : 0));
	word(c, "%s", cmd);
	switch (ci) {
	case CMD_I_class: {
		const char *sub = n > 1 ? pos[1] : NULL;
		if (!sub || (strcmp(sub, "add") && strcmp(sub, "set") && strcmp(sub, "rm")))
			die("class: expected add, set or rm");
		word(c, "%s", sub);
		if (!strcmp(sub, "add")) {
			if (n < 3)
				die("class add: give PROPERTY=VALUE pairs, e.g. prog=fsread spec=F.pspec");
			for (int i = 2; i < n; i++)
				property(c, "class add", pos[i]);
		} else {
			need_id(sub, n > 2 ? pos[2] : NULL);
			word(c, "%s", pos[2]);
			if (!strcmp(sub, "rm") && n != 3)
				die("class rm takes one id");
			if (!strcmp(sub, "set") && n < 4)
				die("class set: give PROPERTY=VALUE pairs after the id");
			for (int i = 3; i < n; i++)
				property(c, "class set", pos[i]);
		}
		break;
	}
	case CMD_I_instances:
		if (n != 1)
			die("instances takes no arguments, only --all and --limit");
		if (all)
			word(c, "all=1");
		break;
	case CMD_I_compare:
		if (n != 4)
			die("compare takes PROG V1 V2 (and --assert LABEL)");
		word(c, "prog=%s", pos[1]);
		word(c, "v1=%s", pos[2]);
		word(c, "v2=%s", pos[3]);
		if (assertion)
			word(c, "assert=%s", assertion);
		break;
	case CMD_I_history:
		if (n != 2 || !*pos[1])
			die("history takes one program name");
		word(c, "prog=%s", pos[1]);
		break;
	case CMD_I_failures:
		if (n != 1)
			die("failures takes options only, e.g. --prog fsread");
		if (prog)
			word(c, "prog=%s", prog);
		if (assertion)
			word(c, "assert=%s", assertion);
		if (since) {
			double t = parse_time(since);
			if (t < 0)
				die("--since: '%s' is not a time (2024-03-01, 2024-03-01T12:00, "
				    "'2 hours', 1700000000)", since);
			word(c, "since=%.6f", t);
		}
		if (inst) {
			need_id("--instance", inst);
			word(c, "instance=%s", inst);
		}
		if (before) {
			need_id("--before", before);
			word(c, "before=%s", before);
		}
		if (dur)
			die("-for belongs to silence add (failures takes --since and --until)");
		if (until) {
			double t = parse_time(until);
			if (t < 0)
				die("--until: '%s' is not a time (2024-03-01, 2024-03-01T12:00, "
				    "'2 hours', 1700000000)", until);
			word(c, "until=%.6f", t);
		}
		if (kind)
			word(c, "kind=%s", kind);
		break;
	case CMD_I_stats:
		if (n != 1)
			die("stats takes options only: --prog P --assert LABEL [--day D]");
		if (!prog || !assertion)
			die("stats needs --prog and --assert");
		word(c, "prog=%s", prog);
		word(c, "assert=%s", assertion);
		if (day) {
			if (!valid_day(day))
				die("--day: '%s' is not a date YYYY-MM-DD", day);
			word(c, "day=%s", day);
		}
		break;
	case CMD_I_silence:
		silence_args(c, pos, n, until, dur, comment);
		break;
	case CMD_I_ack:
		need_id(cmd, n > 1 ? pos[1] : NULL);
		if (n != 2)
			die("ack takes one failure id (and -comment TEXT)");
		word(c, "%s", pos[1]);
		if (comment)
			word(c, "comment=%s", comment);
		break;
	default:
		/* the plain ones: no arguments (status, classes), or one id
		 * (start, stop, typescript, window, verdicts) */
		if (ci >= 0 && (cmd_info(ci)->flags & CMD_OPTS) && !cmd_info(ci)->keys) {
			if (n != 1)
				die("%s takes no arguments", cmd);
		} else if (ci >= 0 && (cmd_info(ci)->flags & CMD_ID) && !cmd_info(ci)->keys) {
			need_id(cmd, n > 1 ? pos[1] : NULL);
			if (n != 2)
				die("%s takes one id", cmd);
			word(c, "%s", pos[1]);
		} else {
			die("unknown command '%s'", cmd);
		}
	}
	if (limit) {
		char *end;
		long v = strtol(limit, &end, 10);
		if (*end || v < 1)
			die("--limit: '%s' is not a positive number", limit);
		word(c, "limit=%ld", v);
	}
}
