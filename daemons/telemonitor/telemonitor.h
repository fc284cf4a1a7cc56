/* telemonitor internals. One event loop; a second thread only sends mail.
 *   rcfile.c    the telemonrc file: parse, check, save
 *   classes.c   the configured classes: load, match, change live
 *   reload.c    SIGHUP: reread the configuration, apply what changed
 *   reglink.c   the registry link: subscribe, hear about instances, reconnect
 *   instances.c the instances we know of and what to do with them
 *   session.c   monitoring one instance: the data connection to its snarflog
 *               (an explicit state machine) feeding its tools
 *   logscan.c   following the log: record ordinals, timestamps, ascii text
 *   tool.c      tool processes: spawn, feed, read, reap, restart with backoff
 *   checker.c   the checker's JSON reports -> failures, windows
 *   failures.c  a failure: silences, store, counters, then its subscribers
 *               (notify.c, alerts.c)
 *   report.c    the one parser of the checker's report lines (over json.c)
 *   json.c      a small strict JSON reader: reports, metrics, the API read back
 *   window.c    log windows around failures
 *   typescript.c  tool output kept per instance
 *   store.c     batched writes, storage faults (on db.h: sqlite or PostgreSQL)
 *   store_sql.c the schema of each engine, migrations, the prepared statements
 *   db.c        one connection: db_sqlite.c (a file), db_pg.c (a server, libpq)
 *   store_read.c  the store's typed reads (listings, statistics, /metrics)
 *   backlog.c   writes held in memory while the store cannot take them
 *   notify.c    failures -> grouped mails (digest.c) -> the mail outbox -> the mailer (mail.c)
 *   outbox.c    one durable queue per transport: order, retries (cmon_backoff), counters
 *   hygiene.c   silences (failures kept quiet) and retention (old rows pruned)
 *   alerts.c    failures -> Alertmanager (curl multi on the loop, through an outbox)
 *   amsilences.c Alertmanager's silences, read every few seconds and cached
 *   control.c   the telemonctl socket; commands.c and stats.c answer it
 *   http.c      the HTTP API (through commands.c), /healthz, and /metrics (metrics.c)
 *   dashboard.c the web dashboard at / (tables rendered with html.c, static files)
 *   setup.c     finding the configuration, state directory and checker
 *   clock.c     tm_now(): wall-clock time */
#ifndef TELEMONITOR_H
#define TELEMONITOR_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include "cmon/names.h"
#include "cmon/net.h"
#include "cmon/proto.h"
#include "cmon/tls.h"
#include "cmon/token.h"
#include "clock.h"
#include "ledger.h"
#include "logscan.h"
#include "rcfile.h"
#include "window.h"

/* Limits on what peers, tools and configurations can make us hold. */
#define TM_INSTANCES_MAX 10000          /* live instances known at once */
#define TM_SESSIONS_MAX 2000            /* instances monitored at once (max-sessions' bound
                                           and default) */
#define TM_BATCH_MS 300                 /* -batch default: a snarflog may keep records this
                                           long to send them together (Start.batch_ms) */
#define TM_BATCH_MS_MAX 1000            /* ...at most (snarflog's own bound) */
#define TM_TOOL_HIGH (512u << 10)       /* bytes queued for a tool before we stop reading */
#define TM_TOOL_LOW (128u << 10)        /* ...and start again below this */
#define TM_LINE_MAX (4u << 20)          /* longest line a checker may print */
#define TM_TYPESCRIPT_MAX (1u << 20)    /* typescript bytes before it is rotated */
#define TM_CTL_CONNS_MAX 32             /* telemonctl connections at once */
#define TM_CTL_REQUEST_MAX (64u << 10)  /* bytes in one telemonctl request */
#define TM_FAILURE_SUBS_MAX 4           /* receivers of failures (failures.h) */

/* Timing. */
#define TM_FLUSH_MS 100                 /* store commit interval */
#define TM_CHECKED_SAVE 1.0             /* an instance's row is saved for its checker's
                                           progress at most this often (a restart counts
                                           the records checked since as unchecked) */
#define TM_WINDOW_WAIT_S 30.0           /* longest wait for a window's AFTER part */
#define TM_HEAP_GIVE_BACK_S 10.0        /* free heap pages go back to the system this often
                                           (what a burst left behind: cmon_heap_give_back) */
#define TM_STR_(x) #x
#define TM_STR(x) TM_STR_(x)                /* a number as the text of a pcheck argument */
#define TM_SUMMARIES 60                 /* the checker summarises interval durations every
                                           minute of the log (pcheck --summaries) */
#define TM_SUMMARIES_S TM_STR(TM_SUMMARIES)
#define TM_TOOL_BACKOFF_MIN_MS 500      /* first delay before restarting a tool */
#define TM_TOOL_BACKOFF_MAX_MS 60000    /* longest delay */
#define TM_TOOL_HEALTHY_S 60.0          /* a tool that ran this long resets the backoff */
#define TM_RETRY_MIN_MS 250             /* first delay before reconnecting to a snarflog */
#define TM_RETRY_MAX_MS 10000           /* longest delay */
#define TM_RETRY_GIVEUP 40              /* attempts before an instance is given up */
#define TM_CONNECT_MS 5000              /* connect + handshake timeout */
#define TM_PROOF_S 5                    /* a data endpoint's Hello and Proof come within */
#define TM_UNPROVEN_MAX 3               /* attempts on an endpoint that does not prove
                                           it is the snarflog before giving up */
#define TM_STOP_WAIT_S 5                /* wait for LogEnd after Stop */
#define TM_PROGRESS 0.2                 /* pcheck --progress: how often it says how far it is */
#define TM_PROGRESS_S TM_STR(TM_PROGRESS)
#define TM_TOOL_EXIT_WAIT_S 10          /* wait for a tool to exit after end of log */
#define TM_STALL_REPORT_S 5.0           /* a tool not reading this long is reported */
#define TM_STALL_GONE_S 5.0             /* ...and given up once its instance is gone */
#define TM_ORPHAN_WAIT_S 2.0            /* a killed run's tools get this long to finish */

/* Command-line settings. */
struct tm_options {
	const char *rc;               /* -rc FILE, or NULL */
	const char *state;            /* -state DIR, or NULL */
	const char *regmachine;       /* -regmachine HOST[:PORT] */
	const char *pcheck;           /* -pcheck PATH, or NULL */
	bool checker_process;         /* -checker process: every checker a pcheck process */
	const char *http;             /* -http ADDR, or NULL (see http.h) */
	const char *web;              /* -web DIR: the dashboard's files, or NULL (dashboard.h) */
	size_t store_backlog;         /* -store-backlog N, or 0 */
	size_t max_sessions;          /* -max-sessions N, or 0 */
	unsigned batch_ms;            /* -batch MS (default TM_BATCH_MS) */
	const char *store;            /* -store URL (PostgreSQL), or NULL (see store.h) */
	const char *node;             /* -node NAME among telemonitors sharing a store, or NULL */
	bool check_only;              /* -check: check the configuration and exit */
	bool finish_tools;            /* -finish-tools: finish a killed run's tools and exit */
	bool debug;                   /* -debug */
	struct cmon_tls_opts tls;     /* -tls-* / CMON_TLS_* */
	struct cmon_tls_opts http_tls; /* -http-tls-*: the HTTP API's own (else -tls-*) */
	const char *http_token_file;  /* -http-token-file, or NULL */
	const char *registry_secret_file; /* -registry-secret-file / CMON_REGISTRY_SECRET_FILE,
	                                     or NULL */
	char registry_secret[CMON_SECRET_MAX + 1]; /* ...the secret read from it at start, shown
	                                              in Hello to the registry... */
	size_t registry_secret_len;   /* ...its length (0: none) */
};

/* Several telemonitors on one store: the fleet as the server sees it
 * (store_fleet_beat). */
struct store_fleet {
	size_t nodes;                 /* nodes alive (seen in the last few seconds) */
	size_t instances;             /* live instances */
	bool joining;                 /* a node started in the last minute (joined, or came back) */
	size_t joiner_sessions;       /* ...and the fewest instances such a node monitors */
	size_t held;                  /* leases this node holds */
};

/* A configured class of instances. */
struct tm_class {
	TAILQ_ENTRY(tm_class) link;   /* in tm.classes, in configuration order */
	uint32_t id;                  /* store id; also the registry subscription id */
	size_t index;                 /* position in tm.rc->classes */
	char prog[CMON_NAME_MAX + 1]; /* program pattern ("" = any) */
	char machine[CMON_NAME_MAX + 1]; /* machine pattern */
	char pid[24];                 /* pid pattern */
	char *tool;                   /* shell command, or NULL */
	char *spec;                   /* absolute spec path, or NULL */
	char *mail;                   /* recipients, or NULL */
	char *window_text;            /* the window property as given */
	struct window_spec window;    /* the window rule */
	double mailgroup;             /* grouping period in seconds */
	bool block;                   /* may block the program */
	bool autostart;               /* monitor new instances at once */
	bool notify_reports;          /* mail report assertions' failures too */
	bool allow_unbounded;         /* run a spec whose -cont state grows with the log */
	char *alertmanager;           /* Alertmanager base URL, or NULL */
	double resolve_after;         /* an alert resolves this long after its last failure */
};
TAILQ_HEAD(tm_class_list, tm_class);

/* Where the monitoring of an instance stands (store column `state`). */
enum inst_state {
	IS_LISTED,        /* known and running; not monitored */
	IS_MONITORING,    /* a session is connecting or streaming */
	IS_RETRYING,      /* lost the data connection; reconnecting */
	IS_BUSY,          /* another consumer holds the stream */
	IS_STOPPED,       /* monitoring stopped with telemonctl stop */
	IS_ENDED,         /* the log ended while monitored */
	IS_GONE,          /* the instance went away */
};

struct session;

/* A monitored-program instance we know of. */
struct tm_instance {
	TAILQ_ENTRY(tm_instance) link; /* in tm.instances */
	uint64_t id;                  /* store id */
	uint32_t class_id;            /* the class that matched it (0: none left) */
	char prog[CMON_NAME_MAX + 1]; /* program name */
	char machine[CMON_NAME_MAX + 1]; /* machine name */
	int64_t pid;                  /* process id */
	int64_t start_ns;             /* snarflog start time: with the above, the key */
	double first_seen;            /* when it was first stored */
	char endpoint[CMON_ADDRSTR_MAX]; /* snarflog's data endpoint */
	bool tls;                     /* the endpoint speaks TLS */
	bool has_token;               /* the registry gave us its token... */
	uint8_t token[CMON_TOKEN_LEN]; /* ...shown to its snarflog in Start (kept in the
	                                 store, so a restart re-attaches at once) */
	enum inst_state state;        /* see enum inst_state */
	bool up;                      /* a registry lists it */
	uint32_t listed_by;           /* bit i: registry i of the list lists it */
	bool confirmed;               /* seen since we started (registry or data link) */
	bool want;                    /* monitoring wanted (auto or telemonctl start) */
	struct session *sess;         /* its session while monitoring, else NULL */
	uint64_t bytes;               /* log bytes received */
	uint64_t records;             /* records received */
	uint64_t lost;                /* records the transport reported dropped */
	uint64_t gaps;                /* gap markers received */
	uint64_t skipped;             /* records before we joined */
	uint64_t failures;            /* failures stored (counted from the rows on re-attach) */
	uint64_t unchecked;           /* records the checker was given but did not report on */
	uint64_t checked;             /* event records through which the checker's reports are
	                                 stored, or counted unchecked (docs/protocol.md §11) */
	unsigned tool_restarts;       /* tool restarts after a crash */
	bool has_length;              /* its snarflog said, leaving, how long the log was... */
	uint64_t length;              /* ...in records: what we did not get of it is lost */
	char status[256];             /* latest notable event, for telemonctl */
	char version[129];            /* the program's version from its log header, or "" */
	bool dirty;                   /* counters or state not yet saved */
	bool checked_dirty;           /* `checked` moved: saved at a commit after the failures
	                                 it covers, at most every TM_CHECKED_SAVE */
	double checked_saved;         /* when the row was last saved for `checked` */
	bool taken_over;              /* claimed after its holder's lease ran out: the records
	                                 its row has past `checked` are unchecked here */
	bool lease_lost;              /* shared store: another telemonitor holds it now, so
	                                 its row is not ours to write (store.h, leases) */
	bool lease_seen;              /* set by the renewal that lists it */
	uint64_t epoch;               /* shared store: this node's claim on it (its fencing
	                                 token, also sent to its snarflog in Start); 0 else */
	bool handover;                /* shared store: being handed to another node (balance):
	                                 its session stops, then its lease is let go */
	bool waiting;                 /* wanted, but max-sessions were monitored: it starts
	                                 when one ends (oldest first) */
	bool announced_new;           /* in tm.unstored: the registry said it had just
	                                 started */
};
TAILQ_HEAD(tm_instance_list, tm_instance);

struct tool;
TAILQ_HEAD(tool_list, tool);
struct store;
struct regset;
struct notify;
struct control;
struct hygiene;
struct alerts;
struct amsil;
struct http;
struct failure_subscriber;
struct failure_event;

/* The whole service. */
struct tmon {
	struct tm_options opt;        /* settings */
	struct event_base *base;      /* the loop */
	struct evdns_base *dns;       /* asynchronous resolver */
	SSL_CTX *tls;                 /* client TLS context, or NULL */
	struct rc_config *rc;         /* the configuration in force (telemonrc + classes.rc) */
	double lease_grace;           /* shared store: take over no lease before this (the
	                                 owners renew theirs first after an outage) */
	struct store_fleet fleet;     /* shared store: the fleet at the last beat */
	size_t ups_since_beat;        /* new instances heard of since then */
	double heap_given_at;         /* when free heap pages last went back to the system */
	unsigned quiet_beats;         /* beats in a row with no new instance */
	unsigned beats;               /* fleet counts taken in since the start */
	size_t unowned_seen;          /* instances nobody held at the last scan */
	bool rebalancing;             /* a node far under its share joined: hand some over */
	unsigned short_beats;         /* counts in a row showing such a node */
	uint64_t handed_id;           /* the instance this node handed over last... */
	double handed_until;          /* ...not to be taken back before then */
	uint64_t *passed;             /* until the registries' first lists are in: the
	                                 instances they listed that this node left to
	                                 the fleet (live, so not reaped then) */
	size_t npassed, passed_cap;   /* how many, and room */
	bool passed_short;            /* out of memory for one: nothing is reaped */
	bool synced;                  /* those first lists are in */
	struct rc_config *rc_file;    /* the telemonrc file as read (never written) */
	char classes_rc[PATH_MAX + 16]; /* STATE/classes.rc: the classes changed with telemonctl */
	char state_dir[PATH_MAX];     /* -state DIR */
	struct ledger_pool ledgers;   /* ledger files kept for reuse (ledger.h) */
	int lock_fd;                  /* DIR/telemonitor.lock, held while we run, or -1 */
	char pcheck[PATH_MAX];        /* the checker binary */
	size_t max_sessions;          /* instances monitored at once at most (max-sessions) */
	char ctl_hint[PATH_MAX + 32]; /* "telemonctl -state DIR", for mails */
	struct store *store;          /* the database */
	struct regset *reg;           /* registry links */
	struct notify *notify;        /* mail: grouping, queue, sending thread */
	struct hygiene *hygiene;      /* silences and retention */
	struct alerts *alerts;        /* Alertmanager: outbox, POSTs on the loop */
	struct amsil *amsil;          /* Alertmanager: its silences, read and cached */
	struct control *ctl;          /* telemonctl socket */
	struct http *http;            /* the HTTP server, or NULL when off */
	const char *http_addr;        /* its address as bound ("127.0.0.1:8080"), or NULL: set
	                                 by main.c for the floors below (alerts, commands) */
	const char *http_scheme;      /* ...and "http" or "https" */
	struct tm_class_list classes; /* configured classes */
	size_t nclasses;              /* how many */
	struct tm_instance_list instances; /* live instances */
	size_t ninstances;            /* how many */
	struct tm_instance_list unstored; /* new instances the store could not record yet
	                                 (no row, no id): tried again every second */
	size_t nunstored;             /* how many */
	size_t nsessions;             /* sessions alive */
	struct tool_list tools;       /* running tool processes (for SIGCHLD) */
	struct event *flush_timer;    /* store commits */
	struct event *tick;           /* once a second: deadlines, counters, status */
	bool stopping;                /* shutting down */
	double started;               /* when the service started */
	uint64_t total_failures;      /* failures reported since start (stored or held) */
	const struct failure_subscriber *failure_subs[TM_FAILURE_SUBS_MAX]; /* who hears of a
	                                 failure, in order (failures_subscribe; main.c) */
	size_t nfailure_subs;         /* how many */
	uint64_t *forget;             /* ended instances whose ledgers go once the store is healthy */
	size_t nforget, forget_cap;   /* how many, and room */
};

/* setup.c */
/* Read the configuration file (a missing ~/.telemonrc gives an empty one),
 * then the class changes kept in STATE/classes.rc. */
int setup_config(struct tmon *tm);
/* Create and resolve the state directory, and take its lock (one
 * telemonitor per state directory); -1 with a message if either fails. */
int setup_state_dir(struct tmon *tm);
/* Find the checker binary. */
void setup_pcheck(struct tmon *tm);

/* classes.c */
/* Build and check every class of tm->rc (specs run through the checker). */
int classes_load(struct tmon *tm, char *err, size_t errlen);
/* Build and check every class of `rc` into `out` (an empty list), with
 * their index but no id; -EINVAL with a message naming the file, line and
 * property, `out` left empty. */
int classes_build(struct tmon *tm, const struct rc_config *rc, struct tm_class_list *out,
		  char *err, size_t errlen);
/* True if `a` and `b` have the same prog, machine and pid patterns (the
 * key a class is known by in the store and in classes.rc). */
bool classes_same_key(const struct tm_class *a, const struct tm_class *b);
/* True if `a` and `b` have the same key and the same settings. */
bool classes_same(const struct tm_class *a, const struct tm_class *b);
/* Free the classes of list `l`, leaving it empty. */
void classes_list_free(struct tm_class_list *l);
/* Record the loaded classes in the store (sets their ids). */
int classes_record(struct tmon *tm, char *err, size_t errlen);
/* The class with store id `id`, or NULL. */
struct tm_class *classes_find(struct tmon *tm, uint32_t id);
/* The first class in configuration order that matches an instance, or NULL. */
struct tm_class *classes_match(struct tmon *tm, const char *prog, const char *machine, int64_t pid);
/* Add a class from "prop=value" pairs: check, save (classes.rc and the
 * store), make it live. Telling the registry is the caller's. */
int classes_add(struct tmon *tm, char **pairs, size_t n, uint32_t *id, char *err, size_t errlen);
/* Change class `id` from "prop=value" pairs: check, save, make it live. */
int classes_set(struct tmon *tm, uint32_t id, char **pairs, size_t n, char *err, size_t errlen);
/* Remove class `id`: save, forget it. */
int classes_rm(struct tmon *tm, uint32_t id, char *err, size_t errlen);
/* Run the checker on an empty log to check `spec` (with `bounded`, also that
 * its continuous state does not grow with the log: pcheck --bounded); 0 or a
 * message. */
int classes_check_spec(struct tmon *tm, const char *spec, bool bounded, char *err, size_t errlen);
/* Free every class. */
void classes_free(struct tmon *tm);

/* reload.c */
/* Reread the telemonrc file and STATE/classes.rc and, if every class and
 * spec passes the checks a start makes, make them the configuration:
 * classes added, changed and removed, the registry told, sessions kept
 * (see reload.c). 0, or -EINVAL after logging why the running
 * configuration stays. */
int reload_config(struct tmon *tm);

/* reglink.c */
/* What the registry links report, to the handlers their owner sets
 * (main.c wires instances.c's). `link` numbers the registry in the list. */
struct reg_events {
	/* A registry lists a running instance matching one of our classes. */
	void (*up)(struct tmon *tm, unsigned link, const Cmon__InstanceUp *up);
	/* A registry reports an instance gone (`clean`: it said goodbye, and
	 * `records`, when present, is the log's length). */
	void (*gone)(struct tmon *tm, unsigned link, const Cmon__InstanceGone *g);
	/* The connection to a registry broke: what it listed is unknown until
	 * it is back and lists it again. */
	void (*lost)(struct tmon *tm, unsigned link);
	/* Once, after start: every registry has listed its instances (or could
	 * not be reached). */
	void (*synced)(struct tmon *tm);
};
/* Start the links to every registry of -regmachine (a comma-separated list;
 * each connects in the background and reconnects forever). `ev` is
 * borrowed and must outlive them. */
int reg_start(struct tmon *tm, const struct reg_events *ev);
/* Tell the registry about class `c` (now, or when the link comes up). */
void reg_subscribe(struct tmon *tm, const struct tm_class *c);
/* Tell the registry to forget class `id`. */
void reg_unsubscribe(struct tmon *tm, uint32_t id);
/* True while at least one registry link is up. */
bool reg_connected(const struct tmon *tm);
/* "connected", "unavailable (retrying)", ... for status output (with
 * several registries, "2 of 3 connected"). */
const char *reg_status(const struct tmon *tm);
/* Close the links. */
void reg_free(struct tmon *tm);

/* instances.c */
/* Read back the instances not ended at the last stop; re-attach monitored ones. */
int instances_load(struct tmon *tm);
/* Registry `link` reports instance `in` (matching class `sub_id`) running. */
void instances_up(struct tmon *tm, unsigned link, const Cmon__InstanceUp *up);
/* Registry `link` reports an instance gone (`clean`: it said goodbye,
 * with the log's length); it is gone once no registry lists it any more. */
void instances_gone(struct tmon *tm, unsigned link, const Cmon__InstanceGone *g);
/* Registry `link` went away: it no longer vouches for any instance. */
void instances_reg_lost(struct tmon *tm, unsigned link);
/* The registries have listed every running instance: forget those they did not. */
void instances_synced(struct tmon *tm);
/* Record the new instances the store could not take when they came
 * (tm.unstored), and monitor them as they would have been then. */
void instances_retry_unstored(struct tmon *tm);
/* The live instance with id `id`, or NULL. */
struct tm_instance *instances_find(struct tmon *tm, uint64_t id);
/* telemonctl start: monitor listed instance `id`. */
int instances_start(struct tmon *tm, uint64_t id, char *err, size_t errlen);
/* telemonctl stop: stop monitoring instance `id`. */
int instances_stop(struct tmon *tm, uint64_t id, char *err, size_t errlen);
/* Class `class_id` was removed: match its instances again. */
void instances_class_removed(struct tmon *tm, uint32_t class_id);
/* Set the status line of `in` shown by telemonctl. */
void instances_set_status(struct tm_instance *in, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Save the counters and state of every changed instance. */
void instances_save(struct tmon *tm);
/* Start the instances waiting for a session (max-sessions), oldest
 * first, while there is room. */
void instances_start_waiting(struct tmon *tm);

/* Save the instances whose checker said how far it is (before a commit:
 * so the store's `checked` never runs ahead of the failures it covers),
 * each at most every TM_CHECKED_SAVE: a checker says it five times a
 * second, and a thousand streams' rows saved that often were 4% of the
 * telemonitor's CPU. Telemonctl's answers save every changed row. */
void instances_save_checked(struct tmon *tm);
/* Save every instance (the store opened a new database). */
void instances_save_all(struct tmon *tm);
/* Free every instance and its session. */
void instances_free(struct tmon *tm);
/* Every second on a shared store: renew this node's leases, let go of the
 * instances another node took over, take over those whose holder's lease
 * ran out (store.h, leases). */
void instances_leases(struct tmon *tm);

/* Shared store: this node may take one more instance (under max-sessions
 * and under its share of the fleet's live instances). */
bool fleet_room(const struct tmon *tm);
/* "listed", "monitoring", ... as stored and shown. */
const char *inst_state_name(enum inst_state st);

/* session.c */
/* What a session reports to its owner, to the handlers the owner gives
 * session_start() (instances.c's): session.c is on a floor below
 * instances.c and names nothing of it (docs/HACKING.md, "Floors"). */
struct session_events {
	/* The status line of `in`, shown by telemonctl, is now `text`. */
	void (*status)(struct tm_instance *in, const char *text);
	/* The session of `in` has ended and been freed, leaving `in` in state
	 * `st`: a session is free for another instance. */
	void (*ended)(struct tmon *tm, struct tm_instance *in, enum inst_state st);
};
/* Start monitoring `in` as class `c` (`from_start`: it was just
 * announced); the session copies what it needs of `c` and reports to
 * `ev` (borrowed: it must outlive the session). */
int session_start(struct tmon *tm, struct tm_instance *in, const struct tm_class *c,
		  bool from_start, const struct session_events *ev);
/* Stop monitoring: Stop to snarflog, the tools finish their input. */
void session_stop(struct session *s, const char *why);
/* Once a second: window deadlines, stalled tools. */
void session_tick(struct session *s, double now);
/* Before its row is saved: a checker in this process hands over what it
 * has queued (its reports become failures in this batch), and then it has
 * reported on every record it was given, so `checked` moves up to them
 * (between its progress lines, which come at most every TM_PROGRESS).
 * What a row's `checked` leaves behind its `records` is unchecked for a
 * node that takes the instance over. */
void session_settle_checked(struct session *s);
/* Free a session (tools killed, pending windows stored); accepts NULL. */
void session_free(struct session *s);
/* Name of the session's state, for logs. */
const char *session_state_name(const struct session *s);

/* checker.c */
/* One line of the checker's JSON output. */
void checker_line(struct session *s, struct tool *t, const char *line, size_t len);
/* An offender of the checker in this process, taken apart already
 * (report_of_offender): what checker_line does with its line. */
struct checker_report;
void checker_report(struct session *s, struct tool *t, const struct checker_report *r);
/* Every report of checker `t` on the first `n` records of its run has
 * been handled: the instance's `checked` moves there (a progress line,
 * or session_settle_checked). */
void checker_progress(struct session *s, struct tool *t, uint64_t n);

/* notify.c */
/* The mail as a receiver of failures (failures.h; main.c subscribes it):
 * a failure of a class with `mail` is mailed now or added to a digest;
 * the mail a telemonitor whose instance we took over queued and did not
 * send is taken over (store_adopt_mail()). */
extern const struct failure_subscriber notify_failures;
/* Set up mail grouping, and send what was not sent before the last stop
 * (the mailer starts with the first mail). Needs the store. */
void notify_start(struct tmon *tm);
/* Stop the mailer; what is not sent stays in the store for the next start. */
void notify_stop(struct tmon *tm);
/* Mail counters as one line, for status output. */
const char *notify_status(struct tmon *tm, char *buf, size_t size);

/* Mail delivery counters since start (status --json, /metrics). */
struct notify_stats {
	uint64_t sent;               /* mails the relay accepted */
	uint64_t failed;             /* attempts that failed */
	uint64_t dropped;            /* mails dropped */
	size_t queued;               /* mails composed and not sent yet */
	char last_error[256];        /* the relay's latest failure, "" if none */
};

/* Fill `out` (all zero when no mail was ever composed). */
void notify_stats(struct tmon *tm, struct notify_stats *out);

#endif
