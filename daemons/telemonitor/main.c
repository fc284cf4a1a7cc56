/* telemonitor — the CMon monitoring service. Parse the command line, find
 * the configuration, the state directory and the checker; load and check
 * the configuration (a bad one stops us here, before anything runs); open
 * the store, the control socket and the registry link; re-attach to what
 * we were monitoring; tell systemd we are ready; run the loop until
 * SIGTERM; then stop the tools and commit. The work is in the modules
 * listed in telemonitor.h. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cmon/cmdline.h"
#include "cmon/log.h"
#include "cmon/net.h"
#include "cmon/service.h"
#include "alerts.h"
#include "amsilences.h"
#include "control.h"
#include "db.h"
#include "failures.h"
#include "hygiene.h"
#include "http.h"
#include "ledger.h"
#include "session.h"
#include "store.h"

#define STR_(x) #x
#define STR(x) STR_(x)

static const char usage[] =
	"Usage: telemonitor [-rc FILE] [-state DIR] [-regmachine HOST[:PORT]] [-regname NAME]\n"
	"                   [-pcheck PATH] [-checker inproc|process] [-store URL] [-node NAME] [-store-backlog N]\n"
	"                   [-max-sessions N] [-batch MS] [-http ADDR]\n"
	"                   [-web DIR] [-check]\n"
	"                   [-finish-tools]\n"
	"                   [-debug]\n"
	"                   [-tls-cert FILE -tls-key FILE] [-tls-ca FILE]\n"
	"                   [-http-token-file FILE] [-registry-secret-file FILE]\n"
	"                   [-http-tls-cert FILE -http-tls-key FILE] [-http-tls-ca FILE]\n"
	"\n"
	"The CMon monitoring service: subscribes to the classes of programs in its\n"
	"configuration, runs their tools (the PSpec checker for a class with a spec)\n"
	"on their logs, stores failures with a window of the log around them, mails\n"
	"the people who asked, and answers telemonctl.\n"
	"\n"
	"  -rc, --rc FILE             configuration (default $TELEMONRC, else\n"
	"                             ~/.telemonrc)\n"
	"  -state, --state DIR        state directory: database, typescripts, control\n"
	"                             socket (default $TELEMON_STATE, else\n"
	"                             $STATE_DIRECTORY, else ~/.telemonitor)\n"
	"  -regmachine, --regmachine ADDR\n"
	"                             registry HOST or HOST:PORT, or a comma-separated\n"
	"                             list of them (all are used; default\n"
	"                             $TELEMONREG_MACHINE, else localhost:7361)\n"
	"  -regname, --regname NAME   accepted for compatibility; has no effect\n"
	"  -pcheck, --pcheck PATH     the checker (default: pcheck next to this program,\n"
	"                             then in the build tree, then on $PATH)\n"
	"  -checker, --checker inproc|process\n"
	"                             where a class's spec is checked: in this process,\n"
	"                             one libpspec stream per instance (inproc, the\n"
	"                             default), or by one pcheck -cont process per\n"
	"                             instance (process: a crash of the checker stays\n"
	"                             its own); specs inproc cannot take (two passes,\n"
	"                             unknowns, errors) always get a process\n"
	"  -store, --store URL        keep failures, instances and mail in the\n"
	"                             PostgreSQL database at URL (postgresql://...),\n"
	"                             or sqlite in the state directory (sqlite; the\n"
	"                             default when the configuration names no store)\n"
	"  -node, --node NAME         this telemonitor's name among those sharing a\n"
	"                             PostgreSQL store (default HOST:STATE_DIR)\n"
	"  -store-backlog, --store-backlog N\n"
	"                             while the database cannot be written (disk full,\n"
	"                             read-only, deleted), hold at most N failures in\n"
	"                             memory (default: the configuration's\n"
	"                             store-backlog, else " STR(STORE_BACKLOG_DEFAULT) ")\n"
	"  -max-sessions, --max-sessions N\n"
	"                             monitor at most N instances at once; more wait,\n"
	"                             said in their status, and start as others end\n"
	"                             (default: the configuration's max-sessions, else\n"
	"                             " STR(TM_SESSIONS_MAX) ")\n"
	"  -batch, --batch MS         let each snarflog keep its records up to MS\n"
	"                             milliseconds after it last sent some, to send\n"
	"                             them together: fewer, larger messages cost\n"
	"                             both sides less, failures come later by up to\n"
	"                             MS (0: as they come; at most 1000; default\n"
	"                             " STR(TM_BATCH_MS) ")\n"
	"  -http, --http ADDR         serve the HTTP API, /metrics and /healthz on ADDR\n"
	"                             (HOST:PORT, default the configuration's http, else\n"
	"                             off); only loopback unless TLS is configured\n"
	"                             (docs/http.md)\n"
	"  -web, --web DIR            the web dashboard's files (default: the installed\n"
	"                             ones)\n"
	"  -check, --check            check the configuration and its specs, then exit\n"
	"  -finish-tools, --finish-tools\n"
	"                             let the tools a killed telemonitor left running\n"
	"                             finish their input (or kill them), correct what\n"
	"                             they are counted as having received, then exit\n"
	"                             (systemd's ExecStopPost)\n"
	"  -debug, --debug            log every connection, instance and tool\n"
	"  -tls-cert, --tls-cert FILE\n"
	"  -tls-key, --tls-key FILE\n"
	"  -tls-ca, --tls-ca FILE     TLS (default $CMON_TLS_CERT, $CMON_TLS_KEY,\n"
	"                             $CMON_TLS_CA)\n"
	"  -http-token-file, --http-token-file FILE\n"
	"                             the HTTP API, dashboard and /metrics want\n"
	"                             'Authorization: Bearer TOKEN', TOKEN the file's\n"
	"                             first line (default the configuration's\n"
	"                             http-token-file, else none; /healthz is open)\n"
	"  -http-tls-cert, --http-tls-cert FILE\n"
	"  -http-tls-key, --http-tls-key FILE\n"
	"  -http-tls-ca, --http-tls-ca FILE\n"
	"                             the HTTP API's own certificate (with -http-tls-ca,\n"
	"                             clients must present one it signed); default the\n"
	"                             -tls-* ones\n"
	"  -registry-secret-file, --registry-secret-file FILE\n"
	"                             show the registries the secret in FILE (its\n"
	"                             first line; their -secret-file), which lets us\n"
	"                             subscribe (default $CMON_REGISTRY_SECRET_FILE,\n"
	"                             else none: then the registry must allow our user\n"
	"                             or, with -tls-ca, our certificate)\n"
	"  -h, --help                 show this help and exit\n"
	"  -V, --version              show the version and exit\n"
	"\n"
	"Exit status:\n"
	"  0  stopped by a signal (or -check passed, or -finish-tools done)\n"
	"  1  could not start\n"
	"  2  bad command line, configuration or -registry-secret-file\n";

/* The command line: these options plus -h/--help and -V/--version. */
enum { O_RC = 256, O_STATE, O_REG, O_REGNAME, O_PCHECK, O_STORE, O_NODE, O_BACKLOG, O_HTTP, O_WEB,
       O_CHECK, O_FINISH, O_DEBUG, O_CERT, O_KEY, O_CA, O_MAXSESS, O_TOKEN, O_HCERT, O_HKEY,
       O_HCA, O_REGSECRET, O_CHECKER, O_BATCH };
static const struct option opts[] = {
	{ "rc", required_argument, NULL, O_RC },
	{ "state", required_argument, NULL, O_STATE },
	{ "regmachine", required_argument, NULL, O_REG },
	{ "regname", required_argument, NULL, O_REGNAME },
	{ "pcheck", required_argument, NULL, O_PCHECK },
	{ "checker", required_argument, NULL, O_CHECKER },
	{ "store", required_argument, NULL, O_STORE },
	{ "node", required_argument, NULL, O_NODE },
	{ "store-backlog", required_argument, NULL, O_BACKLOG },
	{ "max-sessions", required_argument, NULL, O_MAXSESS },
	{ "batch", required_argument, NULL, O_BATCH },
	{ "http", required_argument, NULL, O_HTTP },
	{ "web", required_argument, NULL, O_WEB },
	{ "check", no_argument, NULL, O_CHECK },
	{ "finish-tools", no_argument, NULL, O_FINISH },
	{ "debug", no_argument, NULL, O_DEBUG },
	{ "tls-cert", required_argument, NULL, O_CERT },
	{ "tls-key", required_argument, NULL, O_KEY },
	{ "tls-ca", required_argument, NULL, O_CA },
	{ "http-token-file", required_argument, NULL, O_TOKEN },
	{ "http-tls-cert", required_argument, NULL, O_HCERT },
	{ "http-tls-key", required_argument, NULL, O_HKEY },
	{ "http-tls-ca", required_argument, NULL, O_HCA },
	{ "registry-secret-file", required_argument, NULL, O_REGSECRET },
	{ NULL, 0, NULL, 0 },
};
static const struct cmon_cmdline cmdline = { "telemonitor", usage, "", opts };

/* -registry-secret-file, else CMON_REGISTRY_SECRET_FILE: read the secret
 * once, now; a bad file is a bad command line (exit 2). */
static void read_registry_secret(struct tm_options *o)
{
	const char *env = getenv("CMON_REGISTRY_SECRET_FILE"), *from = "-registry-secret-file";
	int r;

	if (!o->registry_secret_file && env && *env) {
		o->registry_secret_file = env;
		from = "CMON_REGISTRY_SECRET_FILE";
	}
	if (!o->registry_secret_file)
		return;
	r = cmon_secret_read_file(o->registry_secret_file, o->registry_secret,
				  sizeof o->registry_secret, &o->registry_secret_len);
	if (r < 0)
		cmon_cmdline_fail(&cmdline, "%s %s: %s", from, o->registry_secret_file,
				  cmon_secret_strerror(r));
}

static void parse_args(int argc, char **argv, struct tm_options *o)
{
	char *end, why[400];
	int c;

	while ((c = cmon_cmdline_next(&cmdline, argc, argv)) != -1) {
		switch (c) {
		case O_RC: o->rc = optarg; break;
		case O_STATE: o->state = optarg; break;
		case O_REG: o->regmachine = optarg; break;
		case O_REGNAME: break;
		case O_PCHECK: o->pcheck = optarg; break;
		case O_CHECKER:
			if (strcmp(optarg, "inproc") && strcmp(optarg, "process"))
				cmon_cmdline_fail(&cmdline, "bad value '%s' for -checker (inproc or "
						  "process)", optarg);
			o->checker_process = !strcmp(optarg, "process");
			break;
		case O_NODE:
			if (!*optarg || strlen(optarg) > 200)
				cmon_cmdline_fail(&cmdline, "bad value for -node (1 to 200 "
						  "characters)");
			o->node = optarg;
			break;
		case O_STORE:
			if (!db_target_valid(optarg))
				cmon_cmdline_fail(&cmdline, "bad value '%s' for -store (sqlite, or a "
						  "postgresql:// URL)", optarg);
			o->store = optarg;
			break;
		case O_BACKLOG:
			o->store_backlog = strtoul(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end || o->store_backlog < 1 ||
			    o->store_backlog > RC_STORE_BACKLOG_MAX)
				cmon_cmdline_fail(&cmdline, "bad value '%s' for -store-backlog "
						  "(1 to %d)", optarg, RC_STORE_BACKLOG_MAX);
			break;
		case O_MAXSESS:
			o->max_sessions = strtoul(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end || o->max_sessions < 1 ||
			    o->max_sessions > RC_MAX_SESSIONS_MAX)
				cmon_cmdline_fail(&cmdline, "bad value '%s' for -max-sessions "
						  "(1 to %d)", optarg, RC_MAX_SESSIONS_MAX);
			break;
		case O_BATCH:
			o->batch_ms = (unsigned)strtoul(optarg, &end, 10);
			if (*optarg < '0' || *optarg > '9' || *end || strlen(optarg) > 4 ||
			    o->batch_ms > TM_BATCH_MS_MAX)
				cmon_cmdline_fail(&cmdline, "bad value '%s' for -batch (0 to %d "
						  "milliseconds)", optarg, TM_BATCH_MS_MAX);
			break;
		case O_HTTP: o->http = optarg; break;
		case O_WEB: o->web = optarg; break;
		case O_CHECK: o->check_only = true; break;
		case O_FINISH: o->finish_tools = true; break;
		case O_DEBUG: o->debug = true; break;
		case O_CERT: o->tls.cert = optarg; break;
		case O_KEY: o->tls.key = optarg; break;
		case O_CA: o->tls.ca = optarg; break;
		case O_TOKEN: o->http_token_file = optarg; break;
		case O_HCERT: o->http_tls.cert = optarg; break;
		case O_HKEY: o->http_tls.key = optarg; break;
		case O_HCA: o->http_tls.ca = optarg; break;
		case O_REGSECRET: o->registry_secret_file = optarg; break;
		}
	}
	if (optind < argc)
		cmon_cmdline_fail(&cmdline, "unexpected argument '%s'", argv[optind]);
	if (!(o->regmachine = cmon_regmachine(o->regmachine, why, sizeof why)))
		cmon_cmdline_fail(&cmdline, "%s", why);
	cmon_tls_opts_from_env(&o->tls);
	if (!o->http_tls.cert != !o->http_tls.key)
		cmon_cmdline_fail(&cmdline, "-http-tls-cert and -http-tls-key go together");
	if (o->http_tls.ca && !o->http_tls.cert)
		cmon_cmdline_fail(&cmdline, "-http-tls-ca wants -http-tls-cert and -http-tls-key");
	read_registry_secret(o);
}

/* What http_open will refuse, checked before anything starts; an error
 * about the configuration's (defaults (http ...)) names its file and line. */
static int check_http(struct tmon *tm, char *err, size_t errlen)
{
	char why[1024];
	int line = tm->rc->defaults.line[RC_HTTP];

	if (http_check(tm, why, sizeof why) == 0)
		return 0;
	if (!tm->opt.http && line && tm->rc->name)
		snprintf(err, errlen, "%s:%d: error: %s", tm->rc->name, line, why);
	else
		snprintf(err, errlen, "%s", why);
	return -EINVAL;
}

/* Told how a tool left running by a killed telemonitor ended. */
static void orphan_note(void *arg, uint64_t instance, const char *text)
{
	cmon_notice("instance %llu: %s", (unsigned long long)instance, text);
}

/* Every monitored instance takes a socket and up to six pipe ends. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void on_stop(evutil_socket_t sig, short what, void *arg)
{
	struct tmon *tm = arg;

	cmon_notice("signal %d: shutting down (%zu instances monitored)", (int)sig, tm->nsessions);
	cmon_service_stopping();
	event_base_loopexit(tm->base, NULL);
}

static void on_child(evutil_socket_t sig, short what, void *arg)
{
	tool_reap(arg);
}

/* systemd's STATUS=: the store first when it holds writes back. */
static void tell_status(struct tmon *tm)
{
	struct store_health h;
	char store[300] = "", line[280];

	store_health(tm->store, &h);
	if (h.degraded)
		snprintf(store, sizeof store, "store %s; ",
			 store_health_line(tm->store, line, sizeof line));
	else if (h.dropped_failures)
		snprintf(store, sizeof store, "store ok, %llu failures dropped in outages; ",
			 (unsigned long long)h.dropped_failures);
	cmon_service_status("%s%zu classes, %zu instances, %zu monitored, registry %s, %llu "
			    "failures", store, tm->nclasses, tm->ninstances, tm->nsessions,
			    reg_status(tm), (unsigned long long)tm->total_failures);
}

/* SIGHUP: reread the configuration; a bad one leaves the running one. */
static void on_hup(evutil_socket_t sig, short what, void *arg)
{
	struct tmon *tm = arg;

	cmon_notice("SIGHUP: rereading %s", tm->rc_file->path ? tm->rc_file->path : "(none)");
	if (reload_config(tm) == 0)
		tell_status(tm);
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	struct tmon *tm = arg;
	bool was = store_degraded(tm->store);

	if (store_shared(tm->store))
		instances_save(tm);     /* another node taking an instance over reads its counts */
	else
		instances_save_checked(tm);
	if (store_pending(tm->store))
		store_commit(tm->store);
	store_poll(tm->store, tm_now());
	if (store_degraded(tm->store) != was)
		tell_status(tm);
}

/* The store opened a new database in place of a deleted one: record the
 * classes and the live instances in it again. */
static void on_store_reopened(void *arg)
{
	struct tmon *tm = arg;
	char err[200];

	if (classes_record(tm, err, sizeof err) < 0)
		cmon_err("store: %s", err);
	instances_save_all(tm);
}

/* -store-backlog, else the configuration's store-backlog, else the default. */
static size_t backlog_bound(const struct tmon *tm)
{
	const char *v = rc_text(tm->rc, NULL, RC_STORE_BACKLOG);

	if (tm->opt.store_backlog)
		return tm->opt.store_backlog;
	return *v ? (size_t)strtoull(v, NULL, 10) : STORE_BACKLOG_DEFAULT;
}

/* -max-sessions, else the configuration's max-sessions, else the default. */
static size_t sessions_bound(const struct tmon *tm)
{
	const char *v = rc_text(tm->rc, NULL, RC_MAX_SESSIONS);

	if (tm->opt.max_sessions)
		return tm->opt.max_sessions;
	return *v ? (size_t)strtoull(v, NULL, 10) : TM_SESSIONS_MAX;
}

/* This telemonitor's node name into buf: -node, else HOST:STATE_DIR. */
static int node_name(const struct tmon *tm, char *buf, size_t size)
{
	char host[256] = "";

	if (tm->opt.node) {
		snprintf(buf, size, "%s", tm->opt.node);
		return 0;
	}
	gethostname(host, sizeof host - 1);
	snprintf(buf, size, "%.60s:%.120s", host[0] ? host : "localhost", tm->state_dir);
	return 0;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct tmon *tm = arg;
	struct tm_instance *in;
	double now = tm_now();

	TAILQ_FOREACH(in, &tm->instances, link)
		if (in->sess)
			session_tick(in->sess, now);
	if (!TAILQ_EMPTY(&tm->unstored))
		instances_retry_unstored(tm);
	instances_leases(tm);
	instances_save(tm);
	tell_status(tm);
	if (now - tm->heap_given_at >= TM_HEAP_GIVE_BACK_S) {
		tm->heap_given_at = now;
		cmon_heap_give_back();
	}
}

/* The registry links report to the instance table. */
static const struct reg_events registry_events = {
	.up = instances_up,
	.gone = instances_gone,
	.lost = instances_reg_lost,
	.synced = instances_synced,
};

int main(int argc, char **argv)
{
	static struct tmon tm;
	struct event *ev[8] = { 0 }, *watchdog = NULL;
	struct timeval flush = { 0, TM_FLUSH_MS * 1000 }, second = { 1, 0 };
	char err[2048] = "";
	int rc = 1;

	cmon_heap_for_streams();

	tm.lock_fd = -1;
	tm.opt.batch_ms = TM_BATCH_MS;
	parse_args(argc, argv, &tm.opt);
	cmon_log_init("telemonitor", tm.opt.debug);
	signal(SIGPIPE, SIG_IGN);
	raise_fd_limit();
	TAILQ_INIT(&tm.classes);
	TAILQ_INIT(&tm.instances);
	TAILQ_INIT(&tm.unstored);
	TAILQ_INIT(&tm.tools);
	tm.started = tm_now();
	setup_pcheck(&tm);
	if (tm.opt.finish_tools) {
		if (setup_state_dir(&tm) < 0)
			return 1;
		ledger_finish_orphans(tm.state_dir, TM_ORPHAN_WAIT_S, orphan_note, NULL);
		return 0;
	}
	if (setup_config(&tm) < 0)
		return 2;
	/* every class and spec, and the HTTP settings, are checked before
	 * anything is touched (and by -check) */
	if (classes_load(&tm, err, sizeof err) < 0 || check_http(&tm, err, sizeof err) < 0) {
		fprintf(stderr, "telemonitor: %s\n", err);
		rc = 2;
		goto out_store;
	}
	if (tm.opt.check_only) {
		printf("%s: configuration OK (%zu classes)\n", tm.rc->path ? tm.rc->path : "(none)",
		       tm.nclasses);
		rc = 0;
		goto out_store;
	}
	if (setup_state_dir(&tm) < 0)
		goto out_store;
	/* before anything is written to a tool: the tools a killed
	 * telemonitor left behind finish, and their ledgers are made right */
	ledger_finish_orphans(tm.state_dir, TM_ORPHAN_WAIT_S, orphan_note, NULL);
	if ((rc = ledger_pool_open(&tm.ledgers, tm.state_dir)) < 0)
		cmon_warn("no pool of ledger files under %s/%s: %s (each is created and deleted)",
			  tm.state_dir, LEDGER_DIR, strerror(-rc));
	rc = 1;
	tm.store = store_open(tm.state_dir,
			      tm.opt.store ? tm.opt.store : rc_text(tm.rc, NULL, RC_STORE), err,
			      sizeof err);
	if (!tm.store || classes_record(&tm, err, sizeof err) < 0) {
		fprintf(stderr, "telemonitor: %s\n", err);
		goto out_store;
	}
	if (node_name(&tm, err, sizeof err) < 0 || store_set_node(tm.store, err) < 0) {
		fprintf(stderr, "telemonitor: cannot name this telemonitor in the store\n");
		goto out_store;
	}
	store_set_backlog(tm.store, backlog_bound(&tm));
	tm.max_sessions = sessions_bound(&tm);
	store_set_reopen_cb(tm.store, on_store_reopened, &tm);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	tm.base = event_base_new();
	if (!tm.base)
		goto out_curl;
	tm.dns = evdns_base_new(tm.base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
	if (cmon_tls_enabled(&tm.opt.tls)) {
		tm.tls = cmon_tls_client_ctx(&tm.opt.tls, err, sizeof err);
		if (!tm.tls) {
			cmon_err("%s", err);
			goto out_base;
		}
		if (tm.opt.tls.cert && cmon_tls_cert_expiry(tm.tls) < CMON_TLS_EXPIRY_WARN_S) {
			double d = cmon_tls_cert_expiry(tm.tls);
			cmon_warn("TLS: our certificate %s %s in %.0f days; renew it", tm.opt.tls.cert,
				  d < 0 ? "expired" : "expires", (d < 0 ? -d : d) / 86400);
		}
	}
	notify_start(&tm);
	hygiene_start(&tm);
	alerts_start(&tm);
	amsil_start(&tm);
	/* who hears of a failure, in this order (failures.h) */
	failures_subscribe(&tm, &notify_failures);
	failures_subscribe(&tm, &alerts_failures);
	if (control_open(&tm) < 0)
		goto out_notify;
	rc = http_open(&tm, err, sizeof err);
	if (rc < 0) {
		fprintf(stderr, "telemonitor: %s\n", err);
		rc = rc == -EINVAL ? 2 : 1;
		goto out_control;
	}
	/* the API's address, given down as data to what links to it (alerts'
	 * generatorURL, status output): they are on floors below http.c */
	tm.http_addr = http_address(&tm);
	tm.http_scheme = http_scheme(&tm);
	rc = 1;
	ev[0] = evsignal_new(tm.base, SIGTERM, on_stop, &tm);
	ev[1] = evsignal_new(tm.base, SIGINT, on_stop, &tm);
	ev[2] = evsignal_new(tm.base, SIGCHLD, on_child, &tm);
	ev[3] = evsignal_new(tm.base, SIGHUP, on_hup, &tm);
	ev[4] = event_new(tm.base, -1, EV_PERSIST, on_flush, &tm);
	ev[5] = event_new(tm.base, -1, EV_PERSIST, on_tick, &tm);
	for (int i = 0; i < 6; i++)
		if (!ev[i])
			goto out_events;
	for (int i = 0; i < 4; i++)
		evsignal_add(ev[i], NULL);
	event_add(ev[4], &flush);
	event_add(ev[5], &second);
	if (instances_load(&tm) < 0 || reg_start(&tm, &registry_events) < 0)
		goto out_events;
	watchdog = cmon_service_watchdog(tm.base);
	cmon_service_ready("started");
	cmon_notice("ready (version %s; %zu classes; state %s; registry %s; checker %s%s)",
		    CMON_VERSION, tm.nclasses, tm.state_dir, tm.opt.regmachine,
		    tm.opt.checker_process ? "" : "in this process, else ", tm.pcheck);
	if (!tm.nclasses)
		cmon_notice("no class configured: idle until one is added (%s class add, or a "
			    "class in %s and a reload, SIGHUP)", tm.ctl_hint,
			    tm.rc_file && tm.rc_file->path ? tm.rc_file->path : "the telemonrc file");
	event_base_dispatch(tm.base);
	rc = 0;
	tm.stopping = true;
	instances_save(&tm);
out_events:
	tm.stopping = true;
	http_close(&tm);
	tm.http_addr = NULL;
out_control:
	control_close(&tm);
	reg_free(&tm);
	instances_free(&tm);
	ledger_pool_close(&tm.ledgers);
	if (watchdog)
		event_free(watchdog);
	for (int i = 0; i < 8; i++)
		if (ev[i])
			event_free(ev[i]);
out_notify:
	amsil_stop(&tm);
	alerts_stop(&tm);
	hygiene_stop(&tm);
	notify_stop(&tm);
	SSL_CTX_free(tm.tls);
out_base:
	if (tm.dns)
		evdns_base_free(tm.dns, 0);
	if (tm.base)
		event_base_free(tm.base);
out_curl:
	curl_global_cleanup();
out_store:
	classes_free(&tm);
	store_close(tm.store);
	rc_free(tm.rc);
	rc_free(tm.rc_file);
	if (tm.lock_fd >= 0)
		close(tm.lock_fd);
	return rc;
}
