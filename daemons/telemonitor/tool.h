/* Tool processes: a shell command (the class's `tool`, run by /bin/sh -c)
 * or the checker (pcheck -cont --json -s SPEC -), with the log on standard
 * input and standard output and error read back. Names of the instance are
 * passed in the environment (M_PROG, M_MACHINE, M_PID, M_INSTANCE), never
 * on a command line. Each tool runs in its own process group so that
 * stopping it stops everything the shell started.
 *
 * The log goes to a tool in writes of whole records of at most PIPE_BUF
 * bytes (atomic on a pipe), each counted in the tool's ledger (ledger.h)
 * just before it is made: so a tool never sees half a record (records
 * longer than PIPE_BUF aside), and the count of what it was given is right
 * even if the telemonitor is killed. We keep a second read end of the
 * tool's input pipe; when the tool ends, what it left unread is read back
 * from it and taken off the ledger.
 *
 * The checker may also run in the telemonitor itself (tool_start_inproc,
 * the default; -checker process turns it off): a libpspec stream checks
 * what tool_write gives it at once, and its report lines reach the owner
 * on the next turn of the loop, as a process's would, followed by its
 * progress ({"checked":N}); closing its input ends the check and "exits"
 * with pcheck's status. No pipe, no process, no second parse elsewhere. */
#ifndef TELEMON_TOOL_H
#define TELEMON_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "cmon/backoff.h"
#include "ledger.h"
#include "report.h"
#include "telemonitor.h"

struct pspec;
struct pspec_stream;

/* What a tool is. */
enum tool_kind {
	TK_CHECKER,        /* pcheck: its stdout is JSON Lines of failures */
	TK_SHELL,          /* the class's tool: its stdout is the typescript */
};

/* Where a tool is in its life; driven by the session and tool_reap(). */
enum tool_state {
	TL_IDLE,           /* no process; starts on the next data */
	TL_RUNNING,        /* running; its standard input is open */
	TL_CLOSING,        /* input closed at end of log; waiting for it to finish */
	TL_DEAD,           /* ended unexpectedly; restarts on the next data after backoff */
	TL_DONE,           /* finished for good */
};

struct tool;

/* What a tool's owner hears from it, each call with the owner's `ctx`
 * (libevent's bufferevent_setcb shape): the tool knows nothing of who
 * owns it. */
struct tool_cbs {
	/* A whole line of standard output, without its newline (lines longer
	 * than TM_LINE_MAX are skipped with a warning). NULL: standard output
	 * goes to `output` as it comes. */
	void (*line)(void *ctx, struct tool *t, const char *line, size_t len);
	/* An offender of the checker in this process, taken apart already
	 * (report_of_offender), in its place among the lines: what `line`
	 * would have been given as its JSON line. NULL: it comes as a line. */
	void (*report)(void *ctx, struct tool *t, const struct checker_report *r);
	/* Bytes of standard error, and of standard output when `line` is NULL. */
	void (*output)(void *ctx, struct tool *t, const char *p, size_t n);
	/* It took some of its queued input (its ledger's counts moved). */
	void (*wrote)(void *ctx, struct tool *t);
	/* Its queued input fell below the low-water mark: the owner may read on. */
	void (*drained)(void *ctx, struct tool *t);
	/* The process ended and its outputs are read (wait status in `status`). */
	void (*done)(void *ctx, struct tool *t);
};

/* One tool of a session. */
struct tool {
	TAILQ_ENTRY(tool) link;       /* in tm.tools while a process exists */
	struct tmon *tm;                /* the service */
	const struct tool_cbs *cbs;   /* its owner's callbacks */
	void *ctx;                    /* and their argument */
	enum tool_kind kind;          /* checker or shell */
	enum tool_state state;        /* see enum tool_state */
	pid_t pid;                    /* process (group) id, 0 if none */
	bool in_list;                 /* linked into tm.tools */
	bool exited;                  /* the process has been reaped */
	bool out_eof;                 /* its stdout reached EOF */
	bool err_eof;                 /* its stderr reached EOF */
	bool input_broken;            /* writing to it failed (it stopped reading) */
	bool closing_input;           /* close stdin once the queued data is written */
	int status;                   /* wait status of the last run */
	Cmon__Format fmt;             /* the log's format (set before tool_spawn) */
	struct ledger led;            /* what it was given (owned; opened by the session) */
	int in_fd;                    /* write end of its standard input, or -1 */
	int peek_fd;                  /* a read end of the same pipe (read back at its end), or -1 */
	struct evbuffer *inq;         /* log bytes (whole records) not yet written */
	struct event *in_ev;          /* in_fd writable */
	size_t big_done;              /* bytes of a record longer than PIPE_BUF already written */
	uint64_t unread_lost;         /* records it left unread, over every run */
	uint64_t body_from;           /* byte of the run where its log's body begins (after
	                                 the replayed header) */
	struct evbuffer *replay;      /* shell tool: whole records its last run was given or
	                                 queued and never read, for the next run */
	uint64_t replay_lead;         /* records before them that no run will get (the part
	                                 of a write the dead run had begun) */
	bool replay_broken;           /* a record longer than PIPE_BUF was cut: nothing to replay */
	struct bufferevent *out;      /* its standard output */
	struct bufferevent *err;      /* its standard error */
	struct event *timer;          /* EOF wait after exit; kill escalation */
	uint64_t base;                /* records given to earlier runs (positions are relative) */
	uint64_t log_base;            /* the log's position (ledger units) where this run starts */
	uint64_t written;             /* records given to this run */
	uint64_t run_checked;         /* checker: event records of this run it has said
	                                 (pcheck --progress) it checked and reported on */
	unsigned runs;                /* times started */
	double started;               /* when the current run started */
	double active_at;             /* when it last took input or gave output */
	struct cmon_backoff restart;  /* delays between restarts (session.c) */
	/* the checker in this process (tool_start_inproc) */
	struct pspec *ps;             /* its spec, while a run goes on */
	struct pspec_stream *stream;  /* its check, while the run goes on (its input may have
	                                 ended: `ending`); NULL when the run is not here */
	struct evbuffer *outq;        /* report lines not yet handed to the owner (a line
	                                 TOOL_REPORT_MARK stands for the next of `reports`) */
	struct tool_report *reports;  /* offenders taken apart, not yet handed over (FIFO) */
	struct tool_report **reports_tail;
	struct evbuffer *errq;        /* warnings, as pcheck prints them on stderr */
	struct event *out_ev;         /* hands them over on the next turn of the loop */
	char *line;                   /* the report being formatted */
	size_t line_cap;
	uint64_t said;                /* the records its last progress line said */
	double said_at;               /* and when */
	bool ending;                  /* its input ended: it "exits" once its lines are handed over */
	double retry_at;              /* TL_DEAD: not before this time */
};

/* A tool, not started, reporting to `cbs` with `ctx` (both borrowed: they
 * must outlive it). NULL on ENOMEM. */
struct tool *tool_new(struct tmon *tm, enum tool_kind kind, const struct tool_cbs *cbs, void *ctx);

/* Start it: argv[0] is the program; `env` names/values are added to the
 * environment (NULL-terminated "NAME=value" strings). 0, or a negative
 * errno with a message in `err`. */
int tool_spawn(struct tool *t, char *const argv[], char *const env[], char *err, size_t errlen);

/* Start the checker in this process, on spec file `spec` (with `bounded`,
 * refusing a spec whose state grows with the log, as pcheck --bounded).
 * 0; -ENOTSUP when the spec is for a pcheck process to run and explain
 * (it does not load, is refused, needs two passes or has unknowns): the
 * caller spawns pcheck instead, which says why. */
int tool_start_inproc(struct tool *t, const char *spec, bool bounded);

/* Call once the header of a new run is queued: what follows is the log's
 * body (only whole records of it are ever given again). */
void tool_body_begins(struct tool *t);

/* What the last run of a shell tool left unread (in its pipe, or queued
 * for it), to be given to the next run after a gap marker for *lead
 * records: whole records, NULL if none. Taken: the caller writes them or
 * lets them go (tool_replay_drop). */
struct evbuffer *tool_replay(struct tool *t, uint64_t *lead);
void tool_replay_drop(struct tool *t);

/* A check in this process: hand over now what is queued for its owner
 * (reports, progress and warning lines, as the next turn of the loop
 * would); then *n is the records of its run it has checked and reported
 * on. False for a process, a run whose input has ended, or one killed by
 * its owner meanwhile. */
bool tool_settle(struct tool *t, uint64_t *n);

/* Does it have a run going on (a process not reaped, or a check here)? */
bool tool_running(const struct tool *t);

/* Queue log bytes (whole records, or header lines) for its standard input;
 * when nothing was queued they are written at once, as far as the pipe
 * takes them (the `wrote` callback is not called then: the caller syncs
 * its counts). */
int tool_write(struct tool *t, const void *p, size_t n);

/* The same, for bytes whose records the caller has counted already (`tl`,
 * cmon_log_tally of all of them): a checker in this process takes the
 * count as it is rather than counting again. */
int tool_write_counted(struct tool *t, const void *p, size_t n, const struct cmon_tally *tl);

/* Bytes queued and not yet taken by the tool. */
size_t tool_queued(const struct tool *t);

/* Close its standard input once the queued bytes are written. */
void tool_close_input(struct tool *t);

/* Close its standard input now, dropping what is queued (never given, so
 * never counted): the tool does not read, and the log goes on without it. */
void tool_abandon_input(struct tool *t);

/* Send `sig` to its process group. */
void tool_signal(struct tool *t, int sig);

/* Reap exited children (on SIGCHLD). */
void tool_reap(struct tmon *tm);

/* Kill its run now (if it has a process) and take what it had not read
 * off its ledger; its outputs are not read any more. */
void tool_kill(struct tool *t);

/* Kill it, count what it had not read, and free it (its ledger is closed,
 * and its file removed with `forget`). Accepts NULL. */
void tool_free(struct tool *t, bool forget);

/* "exited with status 3", "killed by signal 9 (core dumped)" ... */
const char *tool_exit_text(int status, char *buf, size_t size);

#endif
