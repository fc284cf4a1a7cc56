/* Monitoring one instance: the data connection to its snarflog, an
 * explicit state machine driven by session_drive(), feeding the log to the
 * class's tools, keeping the window ring, and turning what the checker says
 * into failures (checker.c). Shared by session.c and checker.c. */
#ifndef TELEMON_SESSION_H
#define TELEMON_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "cmon/backoff.h"
#include "cmon/connect.h"
#include "ledger.h"
#include "logscan.h"
#include "telemonitor.h"
#include "tool.h"
#include "typescript.h"
#include "window.h"

/* Where a session is. */
enum sess_state {
	SS_CONNECTING,    /* connecting to the snarflog's data endpoint */
	SS_HELLO,         /* connected; waiting for the snarflog's Hello (we say nothing first) */
	SS_PROOF,         /* Hello with a challenge sent; waiting for its Proof */
	SS_ACCEPT,        /* Start sent; waiting for Accepted or Busy */
	SS_STREAMING,     /* receiving the log and feeding the tools */
	SS_WAITING,       /* data connection lost or busy: reconnecting after a delay */
	SS_STOPPING,      /* Stop sent (telemonctl stop); waiting for LogEnd */
	SS_DRAINING,      /* the log ended: tools finish what they were given */
	SS_DONE,          /* over; freed from the reaper event */
};

/* The class settings a session runs with (copied: later class changes
 * apply to new sessions only). */
struct sess_class {
	uint32_t id;                  /* class id */
	char *tool;                   /* shell command, or NULL */
	char *spec;                   /* absolute spec path, or NULL */
	char *mail;                   /* recipients, or NULL */
	double mailgroup;             /* grouping period */
	bool block;                   /* back-pressure the program */
	bool notify_reports;          /* mail report assertions' failures too */
	bool allow_unbounded;         /* run a spec whose -cont state grows with the log */
	char *alertmanager;           /* Alertmanager base URL, or NULL */
	double resolve_after;         /* its alerts resolve this long after their last failure */
};

/* One monitored instance. */
struct session {
	struct tmon *tm;                /* the service */
	struct tm_instance *inst;     /* what we monitor */
	const struct session_events *ev; /* its owner's handlers (session_start) */
	struct sess_class cls;        /* settings */
	enum sess_state state;        /* see enum sess_state */
	bool from_start;              /* ask snarflog to report loss since its first record */
	struct cmon_connector *conn;  /* connection attempt in progress */
	struct bufferevent *data;     /* the data connection */
	struct event *timer;          /* backoff, Stop deadline, drain deadline */
	struct event *tool_timer;     /* a dead tool's restart delay */
	struct event *reaper;         /* frees the session from a clean stack */
	unsigned attempts;            /* connection attempts since the last success */
	unsigned unproven;            /* of them, peers that did not prove they are the
	                                 snarflog (not CMon, or without its token) */
	uint8_t challenge[CMON_CHALLENGE_LEN]; /* SS_PROOF: what we asked it to sign */
	struct cmon_backoff retry;    /* delays between them */
	bool paused;                  /* not reading: a tool is behind or restarting */
	Cmon__Msg *held;              /* a frame read but not yet taken (a tool restarts) */
	double paused_since;          /* when reading stopped */
	bool stall_reported;          /* "a tool does not read" was logged */
	bool lease_wait;              /* not reading: this node's leases are unsure (it was
	                                 stopped or starved) until the next renewal says */
	bool discard;                 /* the tools were given up (they did not read and the
	                                 instance is gone): the stream is read to its end
	                                 and what they did not get is counted as lost */
	bool streamed;                /* Accepted at least once */
	double drained_at;            /* when the session began to drain (the log ended) */
	uint64_t gap_due;             /* records to mark as a gap before the next record
	                                 (loss found when re-attaching) */
	struct ledger led;            /* what the session took in (records and gaps): its
	                                 position in the log is where the stream goes on */
	bool led_fresh;               /* the ledgers were created, not found (no history) */
	Cmon__Format fmt;             /* the log's format */
	struct logscan scan;          /* record ordinals, header, ascii text */
	uint8_t *cut;                 /* the start of a record a LogData chunk cut off,
	                                 waiting for its end (session.c, "Whole records") */
	size_t cut_len, cut_cap;      /* its length, and the buffer's */
	struct window_ring ring;      /* recent records and pending windows */
	struct tool *tools[2];        /* checker and/or shell tool */
	size_t ntools;                /* how many */
	struct typescript ts;         /* tool output */
	bool anchored;                /* anchor_* are set */
	bool origin_due;              /* a checker started: its first record sets the windows' time origin */
	int64_t anchor_ts;            /* a log timestamp ... */
	double anchor_wall;           /* ... and the wall-clock time it stands for */
	enum inst_state end_state;    /* what the instance becomes when we are done */
	char why[256];                /* why the session ends, for the status line */
};

/* The renewal has spoken after a stop: this node still holds the
 * instance, so read again (a session whose lease was lost is stopped
 * instead). */
void session_lease_go(struct session *s);

/* The wall-clock time log timestamp `ts` stands for (0 if unknown).
 * Inline: checker.c, beside session.c on its floor, reads it without
 * calling back into session.c (docs/HACKING.md, "Floors"). */
static inline double session_wall(const struct session *s, int64_t ts)
{
	double tick = s->scan.tick_ns > 0 ? s->scan.tick_ns : 1;

	if (s->scan.realtime)
		return (double)ts * tick / 1e9;
	if (!s->anchored)
		return 0;
	return s->anchor_wall + (double)(ts - s->anchor_ts) * tick / 1e9;
}

/* Store finished windows `done` (n of them), freeing their text. */
void session_store_windows(struct session *s, struct window_done *done, size_t n);

#endif
