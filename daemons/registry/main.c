/* telemonreg — the CMon registry. Parse the command line, open the
 * listening sockets, tell systemd we are ready, run the loop until
 * SIGTERM/SIGINT, clean up. The work happens in conn.c, auth.c and
 * matcher.c. */
#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cmon/cmdline.h"
#include "cmon/log.h"
#include "cmon/service.h"
#include "cmon/tls.h"
#include "registry.h"

static const char usage[] =
	"Usage: telemonreg [-listen ADDR]... [-portfile FILE] [-debug]\n"
	"                  [-tls-cert FILE -tls-key FILE [-tls-ca FILE]]\n"
	"                  [-max-conns N] [-hello-timeout SECONDS] [-unix-dir DIR]\n"
	"                  [-allow-user USER]... [-secret-file FILE]\n"
	"\n"
	"The CMon registry: snarflogs announce monitored programs here and\n"
	"telemonitors subscribe to classes of them. A subscriber receives the\n"
	"instances' tokens, so only an authenticated one may subscribe: a local\n"
	"peer (Unix socket or loopback TCP) running as this user, root or an\n"
	"-allow-user; one showing the -secret-file secret; or, with -tls-ca, one\n"
	"whose client certificate the CA verified.\n"
	"\n"
	"  -listen, --listen ADDR     HOST:PORT, [V6]:PORT, *:PORT or unix:PATH;\n"
	"                             repeatable. Default 127.0.0.1 and ::1 port 7361\n"
	"                             (every interface when TLS is configured).\n"
	"                             Ignored under socket activation.\n"
	"  -portfile, --portfile FILE write the bound TCP port to FILE (useful with\n"
	"                             port 0)\n"
	"  -debug, --debug            log instances and classes as they come and go\n"
	"  -tls-cert, --tls-cert FILE serve TLS with this certificate (PEM)\n"
	"  -tls-key, --tls-key FILE   and this private key\n"
	"  -tls-ca, --tls-ca FILE     require client certificates signed by this CA\n"
	"  -max-conns, --max-conns N  refuse connections beyond N (default: open-file\n"
	"                             limit)\n"
	"  -hello-timeout, --hello-timeout SEC\n"
	"                             disconnect peers silent for SEC seconds after\n"
	"                             connecting (default 10)\n"
	"  -unix-dir, --unix-dir DIR  accept unix:PATH data endpoints from this machine\n"
	"                             when PATH is a socket directly in DIR (default:\n"
	"                             refuse them)\n"
	"  -allow-user, --allow-user USER\n"
	"                             also let local peers running as USER (a name or\n"
	"                             a numeric uid) subscribe; repeatable\n"
	"  -secret-file, --secret-file FILE\n"
	"                             let subscribers showing this secret (the file's\n"
	"                             first line, at least 16 characters) subscribe\n"
	"  -h, --help                 show this help and exit\n"
	"  -V, --version              show the version and exit\n"
	"\n"
	"Exit status:\n"
	"  0  stopped by SIGTERM or SIGINT\n"
	"  1  could not start (a socket, the TLS files)\n"
	"  2  bad command line (an unknown -allow-user, a bad -secret-file)\n";

/* The command line: these options plus -h/--help and -V/--version. */
enum { O_LISTEN = 256, O_PORTFILE, O_DEBUG, O_CERT, O_KEY, O_CA, O_MAXC, O_HELLO, O_UNIXDIR,
       O_ALLOW, O_SECRET };
static const struct option opts[] = {
	{ "listen", required_argument, NULL, O_LISTEN },
	{ "portfile", required_argument, NULL, O_PORTFILE },
	{ "debug", no_argument, NULL, O_DEBUG },
	{ "tls-cert", required_argument, NULL, O_CERT },
	{ "tls-key", required_argument, NULL, O_KEY },
	{ "tls-ca", required_argument, NULL, O_CA },
	{ "max-conns", required_argument, NULL, O_MAXC },
	{ "hello-timeout", required_argument, NULL, O_HELLO },
	{ "unix-dir", required_argument, NULL, O_UNIXDIR },
	{ "allow-user", required_argument, NULL, O_ALLOW },
	{ "secret-file", required_argument, NULL, O_SECRET },
	{ NULL, 0, NULL, 0 },
};
static const struct cmon_cmdline cmdline = { "telemonreg", usage, "", opts };

/* Command-line settings. */
struct options {
	char *listen[REG_MAX_LISTENERS];   /* -listen addresses */
	size_t nlisten;                    /* how many */
	const char *portfile;              /* -portfile */
	bool debug;                        /* -debug */
	struct cmon_tls_opts tls;          /* -tls-* */
	long max_conns;                    /* -max-conns, 0 = from rlimit */
	long hello_timeout;                /* -hello-timeout */
	char *unix_dir;                    /* -unix-dir, without trailing slashes */
	uid_t allow[REG_MAX_ALLOW_USERS];  /* -allow-user uids */
	size_t nallow;                     /* how many */
	const char *secret_file;           /* -secret-file */
};

static long parse_long(const char *s, const char *opt, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi)
		cmon_cmdline_fail(&cmdline, "bad value '%s' for %s", s, opt);
	return v;
}

/* -allow-user USER: a user name (resolved now) or a numeric uid. */
static uid_t parse_user(const char *s)
{
	struct passwd *pw;
	char *end;
	unsigned long v;

	if (*s >= '0' && *s <= '9') {
		errno = 0;
		v = strtoul(s, &end, 10);
		if (errno || *end || v >= (uid_t)-1)
			cmon_cmdline_fail(&cmdline, "bad value '%s' for -allow-user", s);
		return (uid_t)v;
	}
	pw = getpwnam(s);
	if (!pw)
		cmon_cmdline_fail(&cmdline, "-allow-user: no user '%s' on this system", s);
	return pw->pw_uid;
}

static void parse_args(int argc, char **argv, struct options *o)
{
	int c;

	o->hello_timeout = 10;
	while ((c = cmon_cmdline_next(&cmdline, argc, argv)) != -1) {
		switch (c) {
		case O_LISTEN:
			if (o->nlisten == REG_MAX_LISTENERS)
				cmon_cmdline_fail(&cmdline, "too many -listen options (at most %d)",
						  REG_MAX_LISTENERS);
			o->listen[o->nlisten++] = optarg;
			break;
		case O_PORTFILE: o->portfile = optarg; break;
		case O_DEBUG: o->debug = true; break;
		case O_CERT: o->tls.cert = optarg; break;
		case O_KEY: o->tls.key = optarg; break;
		case O_CA: o->tls.ca = optarg; break;
		case O_MAXC: o->max_conns = parse_long(optarg, "-max-conns", 1, 10000000); break;
		case O_HELLO:
			o->hello_timeout = parse_long(optarg, "-hello-timeout", 1, 3600);
			break;
		case O_UNIXDIR: {
			size_t n = strlen(optarg);
			while (n > 1 && optarg[n - 1] == '/')
				optarg[--n] = '\0';
			if (optarg[0] != '/' || n < 2 || strstr(optarg, "//") ||
			    strstr(optarg, "/./") || strstr(optarg, "/../") ||
			    strcmp(optarg + n - 2, "/.") == 0 ||
			    (n >= 3 && strcmp(optarg + n - 3, "/..") == 0))
				cmon_cmdline_fail(&cmdline, "-unix-dir needs an absolute directory "
						  "other than / (without . or .. components), not '%s'",
						  optarg);
			o->unix_dir = optarg;
			break;
		}
		case O_ALLOW:
			if (o->nallow == REG_MAX_ALLOW_USERS)
				cmon_cmdline_fail(&cmdline, "too many -allow-user options (at most %d)",
						  REG_MAX_ALLOW_USERS);
			o->allow[o->nallow++] = parse_user(optarg);
			break;
		case O_SECRET: o->secret_file = optarg; break;
		}
	}
	if (optind < argc)
		cmon_cmdline_fail(&cmdline, "unexpected argument '%s'", argv[optind]);
}

/* Who may subscribe, from the options; exits 2 on a bad -secret-file. */
static void setup_auth(const struct options *o, struct reg_auth *a)
{
	char secret[CMON_SECRET_MAX + 1];
	size_t len;
	int r;

	a->self = geteuid();
	memcpy(a->allow, o->allow, o->nallow * sizeof *o->allow);
	a->nallow = o->nallow;
	a->mutual_tls = o->tls.ca != NULL;
	if (!o->secret_file)
		return;
	r = cmon_secret_read_file(o->secret_file, secret, sizeof secret, &len);
	if (r < 0)
		cmon_cmdline_fail(&cmdline, "-secret-file %s: %s", o->secret_file,
				  cmon_secret_strerror(r));
	memcpy(a->secret, secret, len);
	a->secret_len = len;
	explicit_bzero(secret, sizeof secret);
}

/* Raise the open-file limit as far as allowed and derive the connection cap. */
static size_t connection_limit(long wanted)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	} else {
		rl.rlim_cur = 1024;
	}
	size_t cap = rl.rlim_cur > 64 + 32 ? (size_t)rl.rlim_cur - 32 : 64;
	return wanted > 0 && (size_t)wanted < cap ? (size_t)wanted : cap;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct reg *r = arg;

	cmon_notice("signal %d: shutting down (%zu instances, %zu classes)", (int)sig,
		    r->ninstances, r->nsubs);
	cmon_service_stopping();
	event_base_loopexit(r->base, NULL);
}

static void on_status(evutil_socket_t fd, short what, void *arg)
{
	struct reg *r = arg;

	cmon_service_status("%zu instances, %zu classes, %zu connections", r->ninstances,
			    r->nsubs, r->nconns);
}

/* The matcher's notifications go out on the connection they are for. */
static void send_to_conn(void *arg, struct conn *to, const Cmon__Msg *m)
{
	(void)arg;
	conn_send(to, m);
}

int main(int argc, char **argv)
{
	struct options o = { 0 };
	struct reg r = { 0 };
	struct event *sigterm = NULL, *sigint = NULL, *status = NULL, *watchdog = NULL;
	struct timeval every = { 2, 0 };
	char err[400], who[600];
	int rc = 1;

	parse_args(argc, argv, &o);
	setup_auth(&o, &r.auth);
	cmon_log_init("telemonreg", o.debug);
	signal(SIGPIPE, SIG_IGN);
	TAILQ_INIT(&r.conns);
	TAILQ_INIT(&r.doomed);
	TAILQ_INIT(&r.instances);
	TAILQ_INIT(&r.gone);
	TAILQ_INIT(&r.subs);
	r.events.send = send_to_conn;
	r.max_conns = connection_limit(o.max_conns);
	r.hello_timeout_s = (int)o.hello_timeout;
	r.unix_dir = o.unix_dir;
	r.base = event_base_new();
	if (!r.base) {
		cmon_err("cannot create event loop");
		return 1;
	}
	if (cmon_tls_enabled(&o.tls)) {
		r.tls = cmon_tls_server_ctx(&o.tls, err, sizeof err);
		if (!r.tls) {
			cmon_err("%s", err);
			goto out_base;
		}
		if (cmon_tls_cert_expiry(r.tls) < CMON_TLS_EXPIRY_WARN_S)
			cmon_warn("TLS: our certificate %s %s in %.0f days; renew it", o.tls.cert,
				  cmon_tls_cert_expiry(r.tls) < 0 ? "expired" : "expires",
				  (cmon_tls_cert_expiry(r.tls) < 0 ? -cmon_tls_cert_expiry(r.tls) : cmon_tls_cert_expiry(r.tls)) / 86400);
	}
	r.reaper = event_new(r.base, -1, 0, conn_reap, &r);
	if (!r.reaper || listen_open(&r, o.listen, o.nlisten, o.portfile) < 0)
		goto out_listen;
	sigterm = evsignal_new(r.base, SIGTERM, on_signal, &r);
	sigint = evsignal_new(r.base, SIGINT, on_signal, &r);
	status = event_new(r.base, -1, EV_PERSIST, on_status, &r);
	if (!sigterm || !sigint || !status)
		goto out_events;
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);
	event_add(status, &every);
	watchdog = cmon_service_watchdog(r.base);
	cmon_service_ready("0 instances, 0 classes");
	cmon_notice("ready (version %s, max %zu connections%s)", CMON_VERSION, r.max_conns,
		    r.tls ? (o.tls.ca ? ", mutual TLS" : ", TLS") : "");
	auth_describe(&r, who, sizeof who);
	cmon_notice("may subscribe: %s", who);
	event_base_dispatch(r.base);
	rc = 0;
out_events:
	if (watchdog)
		event_free(watchdog);
	if (status)
		event_free(status);
	if (sigint)
		event_free(sigint);
	if (sigterm)
		event_free(sigterm);
out_listen:
	listen_close(&r);
	conn_close_all(&r);
	if (r.reaper)
		event_free(r.reaper);
	SSL_CTX_free(r.tls);
out_base:
	event_base_free(r.base);
	return rc;
}
