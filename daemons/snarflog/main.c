/* snarflog — forward a program's monitoring log to a telemonitor.
 * Parse the command line, start CMD first (so it never waits for us and
 * inherits nothing of ours), then open the log input, the data endpoint
 * and the registry link, and run the loop until the log has ended and
 * been delivered. Exit the way CMD exited. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cmon/cmdline.h"
#include "cmon/log.h"
#include "cmon/net.h"
#include "snarflog.h"

static const char usage[] =
	"Usage: snarflog PROGNAME [-ascii|-binary] [-buffer NBYTES] [-fifo PATH] [-debug]\n"
	"                [-regmachine HOST[:PORT]] [-standalone] [-data-listen ADDR]\n"
	"                [-machine NAME] [-hold SECONDS] [-drain SECONDS] [-maxblock SECONDS]\n"
	"                [-portfile FILE] [-token-file FILE] [-program-version STR]\n"
	"                [-hello-timeout SECONDS] [-tls-cert FILE -tls-key FILE]\n"
	"                [-tls-ca FILE] [-- CMD ARGS...]\n"
	"\n"
	"Reads a monitoring log from standard input, from the named pipe PATH, or\n"
	"from CMD (through the pipe in CMON_LOG_FD / CMON_LOG), keeps the last\n"
	"NBYTES of whole records, and forwards the log to one telemonitor at a time.\n"
	"Options come before \"--\"; everything after it is CMD and its arguments.\n"
	"\n"
	"  -ascii, --ascii            log format ascii (default: detected from the\n"
	"                             first bytes)\n"
	"  -binary, --binary          log format binary\n"
	"  -buffer, --buffer NBYTES   record buffer size, suffix K, M or G allowed\n"
	"                             (default 2M)\n"
	"  -fifo, --fifo PATH         read the log from named pipe PATH (created if\n"
	"                             missing)\n"
	"  -debug, --debug            report forwarding, drops and registry traffic\n"
	"  -regmachine, --regmachine ADDR\n"
	"                             registry HOST or HOST:PORT, or a comma-separated\n"
	"                             list of them (all are used; default\n"
	"                             $TELEMONREG_MACHINE, else localhost:7361)\n"
	"  -regname, --regname NAME   accepted for compatibility ($TELEMONREG_NAME);\n"
	"                             no effect\n"
	"  -standalone, --standalone  do not use a registry; consumers connect directly\n"
	"  -data-listen, --data-listen ADDR\n"
	"                             data endpoint address (default $CMON_DATA_LISTEN,\n"
	"                             else 127.0.0.1:0, or *:0 with TLS)\n"
	"  -machine, --machine NAME   machine name to announce (default: host name)\n"
	"  -hold, --hold SECONDS      keep the first records (while there is room) and,\n"
	"                             at end of log, wait this long for an auto\n"
	"                             subscriber (default 5)\n"
	"  -drain, --drain SECONDS    at end of log, wait this long for the consumer to\n"
	"                             take the rest (default 5)\n"
	"  -maxblock, --maxblock SECONDS\n"
	"                             longest a blocking consumer may hold the program\n"
	"                             up before the oldest records are dropped (default 1)\n"
	"  -portfile, --portfile FILE write the data endpoint's port to FILE\n"
	"  -token-file, --token-file FILE\n"
	"                             write the token a consumer must show to FILE (mode\n"
	"                             0600), for consumers that do not come through the\n"
	"                             registry\n"
	"  -program-version, --program-version STR\n"
	"                             the program's version, put in the log header\n"
	"                             (the original's -version STR works too)\n"
	"                             (#program-version); default: the build-id of\n"
	"                             CMD's executable, if it has one\n"
	"  -hello-timeout, --hello-timeout SECONDS\n"
	"                             drop data connections that have not sent Hello and\n"
	"                             Start within SECONDS (default 10)\n"
	"  -tls-cert, --tls-cert FILE\n"
	"  -tls-key, --tls-key FILE\n"
	"  -tls-ca, --tls-ca FILE     TLS (default $CMON_TLS_CERT, $CMON_TLS_KEY,\n"
	"                             $CMON_TLS_CA)\n"
	"  -h, --help                 show this help and exit\n"
	"  -V, --version              show the version and exit\n"
	"\n"
	"Exit status:\n"
	"  With CMD: CMD's own status, whatever became of forwarding (killed by a\n"
	"  signal: snarflog dies of the same signal, else 128+N); 126 CMD could not\n"
	"  be run, 127 CMD was not found.\n"
	"  Without CMD: 0 the log was read to its end, 1 it could not be read or\n"
	"  forwarding could not be set up.\n"
	"  2  bad command line (CMD is not started)\n";

/* The command line: these options plus -h/--help and -V/--version. */
enum { O_ASCII = 256, O_BINARY, O_BUFFER, O_FIFO, O_DEBUG, O_REG, O_REGNAME, O_STANDALONE,
       O_LISTEN, O_MACHINE, O_HOLD, O_DRAIN, O_MAXBLOCK, O_HELLO, O_PORTFILE, O_TOKENFILE,
       O_CERT, O_KEY, O_CA, O_PROGVERSION };
static const struct option opts[] = {
	{ "ascii", no_argument, NULL, O_ASCII },
	{ "binary", no_argument, NULL, O_BINARY },
	{ "buffer", required_argument, NULL, O_BUFFER },
	{ "fifo", required_argument, NULL, O_FIFO },
	{ "debug", no_argument, NULL, O_DEBUG },
	{ "regmachine", required_argument, NULL, O_REG },
	{ "regname", required_argument, NULL, O_REGNAME },
	{ "standalone", no_argument, NULL, O_STANDALONE },
	{ "data-listen", required_argument, NULL, O_LISTEN },
	{ "machine", required_argument, NULL, O_MACHINE },
	{ "hold", required_argument, NULL, O_HOLD },
	{ "drain", required_argument, NULL, O_DRAIN },
	{ "maxblock", required_argument, NULL, O_MAXBLOCK },
	{ "hello-timeout", required_argument, NULL, O_HELLO },
	{ "portfile", required_argument, NULL, O_PORTFILE },
	{ "token-file", required_argument, NULL, O_TOKENFILE },
	{ "program-version", required_argument, NULL, O_PROGVERSION },
	{ "tls-cert", required_argument, NULL, O_CERT },
	{ "tls-key", required_argument, NULL, O_KEY },
	{ "tls-ca", required_argument, NULL, O_CA },
	{ NULL, 0, NULL, 0 },
};
static const struct cmon_cmdline cmdline = { "snarflog", usage, "", opts };

static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		cmon_cmdline_fail(&cmdline, "bad value '%s' for -buffer", s);
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end == 'i' || *end == 'B' || *end == 'b')
		end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
	if (*end || v > SNARF_MAX_BUFFER)
		cmon_cmdline_fail(&cmdline, "bad value '%s' for -buffer (a size up to 1G, such as "
				  "64K or 2M)", s);
	if (v < SNARF_MIN_BUFFER) {
		fprintf(stderr, "snarflog: -buffer %s is below the smallest buffer; using 4K\n", s);
		v = SNARF_MIN_BUFFER;
	}
	return (size_t)v;
}

static double parse_seconds(const char *s, const char *opt)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !(v >= 0 && v <= 86400))
		cmon_cmdline_fail(&cmdline, "bad value '%s' for %s (seconds, 0 to 86400)", s, opt);
	return v;
}

static void parse_args(int argc, char **argv, struct options *o)
{
	int c, nopt = argc;

	/* Everything after "--" is CMD; options come before it. */
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			nopt = i;
			o->cmd = argv + i + 1;
			if (!o->cmd[0])
				cmon_cmdline_fail(&cmdline, "no command after --");
			break;
		}
	/* The original's -version STR: with a word after it, it is the
	 * program's version (--program-version); alone, and --version
	 * always, it asks for snarflog's own. */
	for (int i = 1; i + 1 < nopt; i++)
		if (strcmp(argv[i], "-version") == 0 && argv[i + 1][0] != '-')
			argv[i] = (char *)"--program-version";
	o->buffer = SNARF_DEFAULT_BUFFER;
	o->hold_s = 5;
	o->drain_s = 5;
	o->maxblock_s = SNARF_DEFAULT_MAXBLOCK_S;
	o->hello_s = 10;
	while ((c = cmon_cmdline_next(&cmdline, nopt, argv)) != -1) {
		switch (c) {
		case O_ASCII:
		case O_BINARY: {
			Cmon__Format f = c == O_ASCII ? CMON__FORMAT__FORMAT_ASCII
						      : CMON__FORMAT__FORMAT_BINARY;
			if (o->format && o->format != f)
				cmon_cmdline_fail(&cmdline, "-ascii and -binary cannot be combined");
			o->format = f;
			break;
		}
		case O_BUFFER: o->buffer = parse_size(optarg); break;
		case O_FIFO: o->fifo = optarg; break;
		case O_DEBUG: o->debug = true; break;
		case O_REG: o->regmachine = optarg; break;
		case O_REGNAME: break;             /* Network Objects name: meaningless here */
		case O_STANDALONE: o->standalone = true; break;
		case O_LISTEN: o->data_listen = optarg; break;
		case O_MACHINE: o->machine = optarg; break;
		case O_HOLD: o->hold_s = parse_seconds(optarg, "-hold"); break;
		case O_DRAIN: o->drain_s = parse_seconds(optarg, "-drain"); break;
		case O_MAXBLOCK:
			o->maxblock_s = parse_seconds(optarg, "-maxblock");
			if (o->maxblock_s > 3600)
				cmon_cmdline_fail(&cmdline, "bad value '%s' for -maxblock (at most "
						  "3600 seconds)", optarg);
			break;
		case O_HELLO:
			o->hello_s = (int)parse_seconds(optarg, "-hello-timeout");
			if (o->hello_s < 1)
				cmon_cmdline_fail(&cmdline, "bad value '%s' for -hello-timeout (at "
						  "least 1 second)", optarg);
			break;
		case O_PORTFILE: o->portfile = optarg; break;
		case O_TOKENFILE: o->token_file = optarg; break;
		case O_PROGVERSION:
			if (!snarf_version_valid(optarg))
				cmon_cmdline_fail(&cmdline, "bad value '%s' for -program-version (1 to "
						  "%d printable characters)", optarg, SNARF_VERSION_MAX);
			o->program_version = optarg;
			break;
		case O_CERT: o->tls.cert = optarg; break;
		case O_KEY: o->tls.key = optarg; break;
		case O_CA: o->tls.ca = optarg; break;
		}
	}
	if (optind >= nopt)
		cmon_cmdline_fail(&cmdline, "missing PROGNAME");
	if (optind + 1 < nopt)
		cmon_cmdline_fail(&cmdline, "unexpected argument '%s' (put the command after --)",
				  argv[optind + 1]);
	o->program = argv[optind];
	if (!cmon_name_valid(o->program))
		cmon_cmdline_fail(&cmdline, "invalid PROGNAME '%s': use up to 64 of A-Z a-z 0-9 . _ "
				  "+ -, starting with a letter or digit", o->program);
	if (o->machine && !cmon_name_valid(o->machine))
		cmon_cmdline_fail(&cmdline, "invalid -machine name '%s'", o->machine);
	if (o->fifo && o->cmd)
		cmon_cmdline_fail(&cmdline, "-fifo and a command cannot be combined");
	/* (a list that cannot be read is not refused here: it is said, and
	 * the program runs without a registry, never kept from running by it;
	 * announce.c) */
	if (!o->regmachine)
		o->regmachine = getenv("TELEMONREG_MACHINE");
	if (!o->regmachine || !*o->regmachine)
		o->regmachine = CMON_REGISTRY_HOST;
	cmon_tls_opts_from_env(&o->tls);
	if (!o->data_listen)
		o->data_listen = getenv("CMON_DATA_LISTEN");
	if (!o->data_listen || !*o->data_listen)
		o->data_listen = cmon_tls_enabled(&o->tls) ? "*:0" : "127.0.0.1:0";
}

/* Last resort after a setup failure in wrapper mode: keep CMD's log pipe
 * drained so CMD is never blocked or killed by SIGPIPE, then wait for it. */
static int sink(struct snarf *s, int fd)
{
	char buf[65536];
	ssize_t n;
	int st = 0;

	cmon_err("forwarding disabled; discarding the log until %s exits", s->opt.cmd[0]);
	if (fd > 0) {
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
			;
	}
	while (waitpid(s->child, &st, 0) < 0 && errno == EINTR)
		;
	s->child_done = true;
	s->child_status = st;
	return child_exit_code(s);
}

int main(int argc, char **argv)
{
	static struct snarf snarf;
	struct snarf *s = &snarf;
	char prefix[CMON_NAME_MAX + 16], host[256], err[400];
	struct timespec now;
	int log_fd = 0, r;

	cmon_heap_for_streams();

	parse_args(argc, argv, &s->opt);
	snprintf(prefix, sizeof prefix, "snarflog(%s)", s->opt.program);
	cmon_log_init(prefix, s->opt.debug);
	s->sigfd = -1;
	s->pid = getpid();
	TAILQ_INIT(&s->streams);
	clock_gettime(CLOCK_REALTIME, &now);
	s->start_unix_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	srandom((unsigned)(now.tv_nsec ^ getpid()));
	snarf_version(s);

	if (signals_block() < 0) {
		cmon_err("cannot block signals: %s", strerror(errno));
		return 1;
	}
	if (s->opt.cmd) {
		r = child_spawn(s, &log_fd);
		if (r < 0) {
			cmon_err("cannot run %s: %s", s->opt.cmd[0], strerror(-r));
			return r == -ENOENT ? 127 : 126;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	if (s->opt.machine) {
		snprintf(s->machine, sizeof s->machine, "%s", s->opt.machine);
	} else {
		if (gethostname(host, sizeof host) < 0)
			strcpy(host, "localhost");
		host[sizeof host - 1] = '\0';
		cmon_name_sanitize(host, s->machine, sizeof s->machine);
	}

	s->base = event_base_new();
	if (!s->base)
		goto out_sink;
	s->dns = evdns_base_new(s->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
					 EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (!s->dns)
		s->dns = evdns_base_new(s->base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (cmon_tls_enabled(&s->opt.tls)) {
		s->tls_client = cmon_tls_client_ctx(&s->opt.tls, err, sizeof err);
		if (s->tls_client)
			s->tls_server = cmon_tls_server_ctx(&s->opt.tls, err, sizeof err);
		if (!s->tls_client || !s->tls_server) {
			cmon_err("%s", err);
			goto out_sink;
		}
		if (cmon_tls_cert_expiry(s->tls_server) < CMON_TLS_EXPIRY_WARN_S)
			cmon_warn("TLS: our certificate %s %s in %.0f days; renew it", s->opt.tls.cert,
				  cmon_tls_cert_expiry(s->tls_server) < 0 ? "expired" : "expires",
				  (cmon_tls_cert_expiry(s->tls_server) < 0 ? -cmon_tls_cert_expiry(s->tls_server) : cmon_tls_cert_expiry(s->tls_server)) / 86400);
	}
	if (signals_setup(s) < 0 || core_init(s) < 0)
		goto out_sink;
	if (s->opt.fifo)
		r = input_open_fifo(s, s->opt.fifo);
	else
		r = input_open(s, log_fd);
	if (r < 0) {
		cmon_err("cannot read the log%s%s: %s", s->opt.fifo ? " from " : "",
			 s->opt.fifo ? s->opt.fifo : "",
			 s->opt.fifo && r == -EEXIST ? "it exists and is not a named pipe"
						     : strerror(-r));
		goto out_sink;
	}
	/* Without a data endpoint nobody can read the log, but the program
	 * still must not notice: keep reading (and dropping). */
	if (stream_listen(s) < 0)
		cmon_err("no data endpoint: the log will be read and dropped");
	else if (!s->opt.standalone && reg_start(s) < 0)
		cmon_err("no registry: consumers must connect to the data endpoint directly");

	event_base_dispatch(s->base);

	s->exit_code = 0;
	reg_free(s);
	stream_close_all(s);
	input_close(s);
	signals_free(s);
	core_free(s);
	if (s->dns)
		evdns_base_free(s->dns, 0);
	SSL_CTX_free(s->tls_server);
	SSL_CTX_free(s->tls_client);
	event_base_free(s->base);
	return child_exit_code(s);

out_sink:
	if (!s->opt.cmd)
		return 1;
	return sink(s, log_fd);
}
