/* Monitoring one instance (see session.h). The data connection to the
 * instance's snarflog is driven by session_drive(), one message at a time;
 * the log goes to every tool of the class. Flow control: when a tool has
 * more than TM_TOOL_HIGH bytes waiting, we stop reading the connection, so
 * snarflog either holds the program (block) or drops whole records and
 * tells us (a gap); either way our memory stays bounded and the other
 * sessions go on. A tool that dies is restarted, with backoff, when more
 * data arrives; until then the connection is not read. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <openssl/rand.h>

#include "cmon/log.h"
#include "cmon/logfmt.h"
#include "cmon/tls.h"
#include "session.h"
#include "store.h"

static void drain(struct session *s, enum inst_state end, const char *why);
static void settle(struct session *s);
static void finish(struct session *s);
static void lost(struct session *s, const char *why);
static void unproven(struct session *s, const char *why);
static void ask_proof(struct session *s);
static void send_start(struct session *s);
static void data_read(struct bufferevent *bev, void *arg);
static void say(struct session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static const char *const state_names[] = {
	[SS_CONNECTING] = "connecting", [SS_HELLO] = "hello", [SS_PROOF] = "proof",
	[SS_ACCEPT] = "accept",
	[SS_STREAMING] = "streaming", [SS_WAITING] = "waiting", [SS_STOPPING] = "stopping",
	[SS_DRAINING] = "draining", [SS_DONE] = "done",
};

const char *session_state_name(const struct session *s)
{
	return state_names[s->state];
}

/* Set the instance's status line (shown by telemonctl): its owner keeps
 * it (session_events.status). */
static void say(struct session *s, const char *fmt, ...)
{
	char text[sizeof s->inst->status];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	s->ev->status(s->inst, text);
}

void session_store_windows(struct session *s, struct window_done *done, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		store_add_window(s->tm->store, done[i].id, s->inst->id, done[i].from_pos,
				 done[i].to_pos, done[i].truncated, done[i].text, done[i].len);
		free(done[i].text);
	}
}

static void timer_set(struct event *ev, double seconds)
{
	struct timeval tv = { (time_t)seconds, (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6) };

	evtimer_del(ev);
	evtimer_add(ev, &tv);
}

/* Point the session's timer at `fn` and start it (never re-assign a
 * pending event: libevent's timer heap would be corrupted). */
static void timer_arm(struct session *s, event_callback_fn fn, double seconds)
{
	evtimer_del(s->timer);
	evtimer_assign(s->timer, s->tm->base, fn, s);
	timer_set(s->timer, seconds);
}

static void set_paused(struct session *s, bool paused)
{
	if (s->paused == paused)
		return;
	s->paused = paused;
	s->paused_since = paused ? tm_now() : 0;
	s->stall_reported = false;
	if (!s->data)
		return;
	if (paused) {
		bufferevent_disable(s->data, EV_READ);
	} else {
		bufferevent_enable(s->data, EV_READ);
		/* frames may already be waiting in the input buffer */
		if (s->held || evbuffer_get_length(bufferevent_get_input(s->data)))
			bufferevent_trigger(s->data, EV_READ, BEV_OPT_DEFER_CALLBACKS);
	}
}

/* True if some tool has more queued than it may have. */
static bool tools_behind(const struct session *s)
{
	for (size_t i = 0; i < s->ntools; i++)
		if (tool_queued(s->tools[i]) > (s->paused ? TM_TOOL_LOW : TM_TOOL_HIGH))
			return true;
	return false;
}

/* Since when the tools that are behind have taken nothing: the earliest,
 * over them, of their last activity (or the pause, if later). */
static double stalled_since(const struct session *s)
{
	double since = 0;

	for (size_t i = 0; i < s->ntools; i++) {
		const struct tool *t = s->tools[i];
		double at = t->active_at > s->paused_since ? t->active_at : s->paused_since;
		if (tool_queued(t) > TM_TOOL_LOW && (since == 0 || at < since))
			since = at;
	}
	return since ? since : s->paused_since;
}

/* The instance is gone and a tool does not read the rest: give the tools
 * up, but read the stream on to its end, so that what they do not get is
 * counted (settle()) rather than left in the snarflog. */
static void abandon_tools(struct session *s)
{
	typescript_note(&s->ts, "the instance is gone and a tool does not read the rest: reading "
			"the log to its end without the tools, counting what they do not get as lost");
	say(s, "the instance is gone and a tool does not read the rest");
	s->discard = true;
	for (size_t i = 0; i < s->ntools; i++) {
		struct tool *t = s->tools[i];
		if (t->state == TL_RUNNING) {
			tool_abandon_input(t);
			t->state = TL_CLOSING;
		} else if (t->state != TL_CLOSING) {
			t->state = TL_DONE;
		}
	}
	set_paused(s, false);
}

/* The ledger whose counts are the instance's records, lost and gaps: the
 * class's tool if it has one, else the checker, else the session's. */
static const struct ledger *primary(const struct session *s)
{
	for (size_t i = 0; i < s->ntools; i++)
		if (s->tools[i]->kind == TK_SHELL)
			return &s->tools[i]->led;
	return s->ntools ? &s->tools[0]->led : &s->led;
}

/* The checker, or NULL. */
static struct tool *checker_of(const struct session *s)
{
	for (size_t i = 0; i < s->ntools; i++)
		if (s->tools[i]->kind == TK_CHECKER)
			return s->tools[i];
	return NULL;
}

/* Copy the primary ledger's counts to the instance (telemonctl, store):
 * lost and gaps are its own; records are those it got that the checker,
 * if the class has one, also checked; the rest of what it got is
 * unchecked: records the checker was given but did not report on, and
 * (beside a tool) records the checker did not get although the tool did.
 * So records + lost + unchecked is the primary's position in the log. */
static void sync_counts(struct session *s)
{
	const struct ledger *l = primary(s);
	const struct tool *ck = checker_of(s);
	struct tm_instance *in = s->inst;
	uint64_t unchecked = 0, records;

	if (!l->f || s->led_fresh)
		return;                     /* not counting yet (nothing accepted) */
	if (ck && ck->led.f) {
		unchecked = ck->led.f->unchecked;
		if (&ck->led != l && ck->led.f->gap > l->f->gap)
			unchecked += ck->led.f->gap - l->f->gap;
	}
	if (unchecked > l->f->events)
		unchecked = l->f->events;
	records = l->f->events - unchecked;
	if (in->records != records || in->lost != l->f->gap || in->gaps != l->f->markers ||
	    in->unchecked != unchecked) {
		in->records = records;
		in->unchecked = unchecked;
		in->lost = l->f->gap;
		in->gaps = l->f->markers;
		in->dirty = true;
	}
}

/* A run of the checker is over: `complete` (it read its input to the end
 * and exited as pcheck does then) means every record it read was checked
 * and reported on; otherwise what it read past its last progress line
 * ({"checked":N}) is unchecked. Either way the instance's `checked` moves
 * to the end of what it was given. */
static void checker_run_over(struct session *s, struct tool *t, bool complete)
{
	struct ledger_file *f = t->led.f;

	if (t->kind != TK_CHECKER || !f)
		return;
	if (!complete && f->run_events > t->run_checked) {
		f->unchecked += f->run_events - t->run_checked;
		typescript_note(&s->ts, "the checker's run ended before it reported on the last %"
				PRIu64 " records it read; counted as unchecked",
				f->run_events - t->run_checked);
	}
	f->run_events = 0;
	t->run_checked = 0;
	s->inst->checked = f->events;
	s->inst->dirty = true;
	sync_counts(s);
}

/* A checker's run outlived a telemonitor (ledger_finish_orphans): its
 * reports after the last progress the store has (the instance's
 * `checked`, committed with the failures before it) may have died with
 * that telemonitor, so the records past it are unchecked. */
static void checker_orphan_settle(struct session *s, struct tool *t)
{
	struct ledger_file *f = t->led.f;
	struct tm_instance *in = s->inst;
	uint64_t done, from;

	if (t->kind != TK_CHECKER || !f || !(f->flags & LEDGER_ORPHANED))
		return;
	done = f->events - (f->run_events < f->events ? f->run_events : f->events);
	from = in->checked > done ? in->checked : done;
	if (f->events > from) {
		f->unchecked += f->events - from;
		typescript_note(&s->ts, "the checker left running by the previous telemonitor may "
				"have reported on its last %" PRIu64 " records to it alone; counted as "
				"unchecked", f->events - from);
	}
	f->flags &= ~LEDGER_ORPHANED;
	f->run_events = 0;
	in->checked = f->events;
	in->dirty = true;
}

/* End every tool's run that still has a process (killed: it did not
 * finish), counting what it had not read or reported on. */
static void end_runs(struct session *s)
{
	for (size_t i = 0; i < s->ntools; i++) {
		struct tool *t = s->tools[i];
		if (tool_running(t)) {
			tool_kill(t);
			checker_run_over(s, t, false);
		}
	}
}

/* A shell tool starting again gets, right after the header, the whole
 * records its last run left unread (in its pipe, or queued for it),
 * behind a gap marker for the part of a write that run had begun: when
 * they reach up to where the session is (nothing went by meanwhile: the
 * session waits for the restart). True if it did. */
static bool tool_replay_to(struct session *s, struct tool *t, uint64_t have, uint64_t at)
{
	uint8_t marker[CMON_GAP_MARKER_MAX];
	struct cmon_tally k = { 0 };
	struct evbuffer *rb;
	const uint8_t *p;
	uint64_t lead;
	size_t n;

	if (!(rb = tool_replay(t, &lead)) || s->discard)
		return false;
	n = evbuffer_get_length(rb);
	if (!(p = evbuffer_pullup(rb, -1)))
		return false;
	cmon_log_tally(s->fmt, p, n, SIZE_MAX, &k);
	if (have + lead + k.events + k.gap != at)
		return false;
	if (lead) {
		tool_write(t, marker, cmon_log_gap_marker(s->fmt, lead, marker));
		typescript_note(&s->ts, "the tool missed %" PRIu64 " records (of a write its last "
				"run had begun to read); marked as a gap", lead);
	}
	tool_write(t, p, n);
	t->base -= k.events < t->base ? k.events : t->base;
	typescript_note(&s->ts, "the tool's last run left %" PRIu64 " records unread; given to "
			"this run", k.events + k.gap);
	return true;
}

/* A tool starting (again) gets, right after the header, a gap marker for
 * whatever of the log it missed: the records it was given but never read
 * in an earlier run (unless they are given again), and what went by while
 * it was not running. */
static void tool_catch_up(struct session *s, struct tool *t)
{
	uint64_t have = ledger_pos(&t->led), at = ledger_pos(&s->led);
	uint8_t marker[CMON_GAP_MARKER_MAX];
	bool again = at > have && tool_replay_to(s, t, have, at);

	tool_replay_drop(t);
	if (again || at <= have)
		return;
	tool_write(t, marker, cmon_log_gap_marker(s->fmt, at - have, marker));
	typescript_note(&s->ts, "the %s missed %" PRIu64 " records; marked as a gap",
			t->kind == TK_CHECKER ? "checker" : "tool", at - have);
}

static void spawn_tool(struct session *s, struct tool *t)
{
	struct tm_instance *in = s->inst;
	char pid[32], id[32], *argv[14], *env[5], err[300];
	char e_prog[CMON_NAME_MAX + 8], e_machine[CMON_NAME_MAX + 12], e_pid[48], e_inst[48];
	const uint8_t *hdr;
	size_t hlen;

	snprintf(pid, sizeof pid, "%" PRId64, in->pid);
	snprintf(id, sizeof id, "%" PRIu64, in->id);
	snprintf(e_prog, sizeof e_prog, "M_PROG=%s", in->prog);
	snprintf(e_machine, sizeof e_machine, "M_MACHINE=%s", in->machine);
	snprintf(e_pid, sizeof e_pid, "M_PID=%s", pid);
	snprintf(e_inst, sizeof e_inst, "M_INSTANCE=%s", id);
	env[0] = e_prog;
	env[1] = e_machine;
	env[2] = e_pid;
	env[3] = e_inst;
	env[4] = NULL;
	if (t->kind == TK_CHECKER) {
		int n = 0;
		argv[n++] = s->tm->pcheck;
		argv[n++] = "-cont";
		argv[n++] = "--json";
		argv[n++] = "--explain";        /* whole-log failures come with their witness */
		argv[n++] = "--summaries";      /* interval durations per minute, for compare */
		argv[n++] = TM_SUMMARIES_S;
		argv[n++] = "--progress";       /* how far its reports go, for the accounting */
		argv[n++] = TM_PROGRESS_S;
		if (!s->cls.allow_unbounded)    /* the spec may have changed since the class was checked */
			argv[n++] = "--bounded";
		argv[n++] = "-s";
		argv[n++] = s->cls.spec;
		argv[n++] = "-";
		argv[n] = NULL;
	} else {
		argv[0] = "/bin/sh";
		argv[1] = "-c";
		argv[2] = s->cls.tool;
		argv[3] = NULL;
	}
	t->base = s->scan.pos;
	t->log_base = ledger_pos(&t->led);
	t->fmt = s->fmt;
	if (t->kind == TK_CHECKER)
		s->origin_due = true;    /* its first record is the next one scanned */
	if (t->kind == TK_CHECKER && !s->tm->opt.checker_process &&
	    tool_start_inproc(t, s->cls.spec, !s->cls.allow_unbounded) == 0) {
		/* checked in this process (a spec it cannot take gets pcheck) */
	} else if (tool_spawn(t, argv, env, err, sizeof err) < 0) {
		cmon_warn("instance %" PRIu64 " (%s on %s pid %" PRId64 "): %s", in->id, in->prog,
			  in->machine, in->pid, err);
		typescript_note(&s->ts, "%s", err);
		say(s, "%s", err);
		t->state = TL_DEAD;
		t->retry_at = tm_now() + cmon_backoff_next(&t->restart) / 1000.0;
		return;
	}
	/* the replayable header first, so the tool sees a complete-looking log */
	if (s->fmt == CMON__FORMAT__FORMAT_BINARY) {
		hdr = s->scan.replay;
		hlen = s->scan.rlen;
	} else {
		hdr = (const uint8_t *)s->scan.ascii_hdr;
		hlen = s->scan.ahlen;
	}
	if (hlen)
		tool_write(t, hdr, hlen);
	else if (s->fmt != CMON__FORMAT__FORMAT_BINARY && s->scan.seen_record)
		tool_write(t, "#cmon-ascii 1\n", 14);   /* the log had no header at all */
	tool_body_begins(t);
	tool_catch_up(s, t);
	if (t->runs > 1)
		typescript_note(&s->ts, "%s restarted (run %u); it sees the log from record %" PRIu64,
				t->kind == TK_CHECKER ? "checker" : "tool", t->runs, t->base + 1);
}

/* Before taking more data: start tools that are due. False (and paused,
 * with a timer) while a dead tool waits for its backoff. */
static bool tools_ready(struct session *s)
{
	double now = tm_now(), wait = 0;

	if (s->discard)
		return true;

	for (size_t i = 0; i < s->ntools; i++) {
		struct tool *t = s->tools[i];
		if (t->state == TL_IDLE) {
			spawn_tool(s, t);
		} else if (t->state == TL_DEAD) {
			if (now >= t->retry_at)
				spawn_tool(s, t);
			if (t->state == TL_DEAD && (wait == 0 || t->retry_at - now < wait))
				wait = t->retry_at - now;
		}
	}
	if (wait > 0) {
		set_paused(s, true);
		timer_set(s->tool_timer, wait);
		return false;
	}
	return true;
}

/* --- records ---------------------------------------------------------------- */

static void on_record(void *arg, const struct logscan_rec *r)
{
	struct session *s = arg;
	struct window_done done[WINDOW_PENDING_MAX];
	size_t nd = 0;

	if (r->is_gap) {
		if (s->cls.spec)
			window_push_gap(&s->ring, r->pos, r->gap);
		return;
	}
	if (!s->anchored) {
		s->anchored = true;
		s->anchor_ts = r->ts;
		s->anchor_wall = s->from_start && r->pos == 1 && s->scan.start_unix_ns > 0
					 ? (double)s->scan.start_unix_ns / 1e9
					 : tm_now();
	}
	if (!s->cls.spec)
		return;         /* no checker, no failures: no windows to keep */
	if (s->origin_due) {
		s->origin_due = false;   /* pcheck counts virtual time from here */
		window_set_origin(&s->ring, r->ts);
	}
	window_push(&s->ring, r->pos, r->ts, r->text ? r->text : "", r->text ? r->len : 0, done,
		    WINDOW_PENDING_MAX, &nd);
	if (nd)
		session_store_windows(s, done, nd);
}

static void refresh_window_header(struct session *s)
{
	char label[300];

	if (s->ring.header_len == s->scan.ahlen && s->ring.header)
		return;
	snprintf(label, sizeof label, "%s %s %" PRId64 " (instance %" PRIu64 ")", s->inst->prog,
		 s->inst->machine, s->inst->pid, s->inst->id);
	window_set_header(&s->ring, s->scan.ascii_hdr ? s->scan.ascii_hdr : "", s->scan.ahlen,
			  s->scan.tick_ns, label);
}

static void to_tools(struct session *s, const void *p, size_t n, const struct cmon_tally *tl)
{
	for (size_t i = 0; i < s->ntools; i++)
		if (s->tools[i]->state == TL_RUNNING)
			tool_write_counted(s->tools[i], p, n, tl);
}

/* The program's version, once its log header (the saved header, or the
 * '#' lines of a stream followed from its start) has said it. */
static void note_version(struct session *s)
{
	if (s->scan.version[0] && strcmp(s->scan.version, s->inst->version)) {
		snprintf(s->inst->version, sizeof s->inst->version, "%s", s->scan.version);
		s->inst->dirty = true;
	}
}

static void on_data(struct session *s, const uint8_t *p, size_t n)
{
	struct window_done done[WINDOW_PENDING_MAX];
	struct cmon_tally t = { 0 };
	size_t nd;

	if (logscan_data_tally(&s->scan, p, n, on_record, s, &t) < 0)
		cmon_warn("instance %" PRIu64 ": out of memory following the log", s->inst->id);
	note_version(s);
	refresh_window_header(s);
	s->inst->bytes += n;
	s->inst->dirty = true;
	ledger_write(&s->led, &t, n);
	to_tools(s, p, n, &t);
	sync_counts(s);
	if (s->ring.npend) {
		nd = window_collect(&s->ring, tm_now(), false, done, WINDOW_PENDING_MAX);
		session_store_windows(s, done, nd);
	}
	if (tools_behind(s))
		set_paused(s, true);
}

/* --- whole records ----------------------------------------------------------
 * A LogData chunk holds whole records (protocol.md, "What the consumer
 * receives"): snarflog keeps to that, but a process that announced the
 * instance itself (it knows the token) need not. Everything past this
 * point (logscan, the ledgers, the tools' pipes, the checker) counts a
 * record in the chunk that ends it, by what it is, so a record cut
 * across chunks would be counted by its tail: a cut `#cmon-gap 7` line
 * as an event, a cut binary frame as garbage. So the start of a record
 * a chunk cut off waits here for the rest; a record longer than
 * LOGSCAN_RECORD_MAX goes on as it is (logscan skips it as too long). A
 * LogGap or LogEnd before its end: an ascii record is ended with a
 * newline there (pcheck reads a last line without one the same way), a
 * binary one cannot be and is dropped, said in the typescript. A new
 * stream (a reconnection) starts without it: that record was not
 * delivered whole, so Accepted.records_before counts it as lost. */

/* The bytes of [p, p + n) up to the end of its last whole record. */
static size_t whole_len(Cmon__Format fmt, const uint8_t *p, size_t n)
{
	const uint8_t *q = p, *end = p + n;

	if (fmt != CMON__FORMAT__FORMAT_BINARY) {
		const uint8_t *nl;
		if (n == 0 || p[n - 1] == '\n')
			return n;
		nl = memrchr(p, '\n', n);
		return nl ? (size_t)(nl + 1 - p) : 0;
	}
	for (;;) {
		size_t hdr;
		uint64_t body;
		int r = cmon_bin_frame(q, (size_t)(end - q), &hdr, &body);
		if (r < 0)
			return n;               /* no frame: nothing to wait for */
		if (r == 0 || body > (uint64_t)(end - q) - hdr)
			return (size_t)(q - p);
		q += hdr + (size_t)body;
	}
}

static bool cut_keep(struct session *s, const uint8_t *p, size_t n)
{
	if (s->cut_len + n > s->cut_cap) {
		size_t cap = s->cut_cap ? s->cut_cap : 256;
		uint8_t *g;
		while (cap < s->cut_len + n)
			cap *= 2;
		if (!(g = realloc(s->cut, cap)))
			return false;
		s->cut = g;
		s->cut_cap = cap;
	}
	memcpy(s->cut + s->cut_len, p, n);
	s->cut_len += n;
	return true;
}

/* Nothing waits: a buffer a long record grew goes back. */
static void cut_trim(struct session *s)
{
	if (!s->cut_len && s->cut_cap > LOGSCAN_CARRY_KEEP) {
		free(s->cut);
		s->cut = NULL;
		s->cut_cap = 0;
	}
}

static void on_chunk(struct session *s, const uint8_t *p, size_t n)
{
	size_t whole;

	if (!s->cut_len) {
		whole = whole_len(s->fmt, p, n);
		if (whole)
			on_data(s, p, whole);
		if (whole == n || cut_keep(s, p + whole, n - whole))
			return;
		cmon_warn("instance %" PRIu64 ": out of memory joining a record cut across chunks",
			  s->inst->id);
		on_data(s, p + whole, n - whole);       /* (counted by its tail, as before) */
		return;
	}
	if (!cut_keep(s, p, n)) {
		cmon_warn("instance %" PRIu64 ": out of memory joining a record cut across chunks",
			  s->inst->id);
		on_data(s, s->cut, s->cut_len);
		s->cut_len = 0;
		on_data(s, p, n);
		return;
	}
	whole = whole_len(s->fmt, s->cut, s->cut_len);
	if (!whole && s->cut_len > LOGSCAN_RECORD_MAX)
		whole = s->cut_len;                      /* no record: on as it is */
	if (!whole)
		return;
	on_data(s, s->cut, whole);
	memmove(s->cut, s->cut + whole, s->cut_len - whole);
	s->cut_len -= whole;
	cut_trim(s);
}

/* A LogGap or LogEnd: the record a chunk cut off will not be finished. */
static void cut_end(struct session *s, const char *what)
{
	size_t n = s->cut_len;

	if (!n)
		return;
	if (s->fmt != CMON__FORMAT__FORMAT_BINARY && cut_keep(s, (const uint8_t *)"\n", 1)) {
		typescript_note(&s->ts, "a record the snarflog cut off was not finished before %s: "
				"ended there", what);
		on_data(s, s->cut, s->cut_len);
	} else {
		typescript_note(&s->ts, "%zu bytes of a record the snarflog cut off were not "
				"finished before %s: dropped", n, what);
		cmon_warn("instance %" PRIu64 ": %zu bytes of an unfinished record dropped at %s",
			  s->inst->id, n, what);
	}
	s->cut_len = 0;
	cut_trim(s);
}

/* Mark `count` lost records at this point of the log: in the session's
 * ledger, the window ring and for the running tools (the others catch up
 * when they start). */
static void mark_gap(struct session *s, uint64_t count)
{
	uint8_t marker[CMON_GAP_MARKER_MAX];
	struct cmon_tally t = { .gap = count, .markers = 1 };
	size_t len = cmon_log_gap_marker(s->fmt, count, marker);

	ledger_write(&s->led, &t, len);
	window_push_gap(&s->ring, s->scan.pos, count);
	to_tools(s, marker, len, NULL);
	sync_counts(s);
}

/* A gap found when the stream was accepted: the tools get it before
 * anything that follows (they start when the first records arrive). */
static void flush_gap_due(struct session *s)
{
	uint64_t n = s->gap_due;

	if (!n)
		return;
	s->gap_due = 0;
	mark_gap(s, n);
}

static void on_gap(struct session *s, uint64_t count)
{
	if (!count)
		return;
	flush_gap_due(s);
	mark_gap(s, count);
}

static bool same_instance(const struct tm_instance *in, const Cmon__Instance *a)
{
	return a && a->program && a->machine && !strcmp(a->program, in->prog) &&
	       !strcmp(a->machine, in->machine) && a->has_pid && a->pid == in->pid &&
	       (!a->has_start_unix_ns || a->start_unix_ns == in->start_ns);
}

/* An instance taken over from a node whose lease ran out (killed, hung):
 * its row counts as `records` everything that node's checker was given,
 * but the reports stored with it cover the records up to its `checked`
 * only. Those past it were reported on to that node alone, or not yet:
 * unchecked (the new checker starts where the row's counts stop). */
static void taken_over_settle(struct session *s, struct ledger_file *ck)
{
	struct tm_instance *in = s->inst;
	uint64_t at = in->records + in->unchecked, n;

	if (!in->taken_over || in->checked >= at)
		return;
	n = at - in->checked;
	if (n > in->records)
		n = in->records;
	ck->unchecked += n;
	in->checked = at;
	typescript_note(&s->ts, "taken over: the last %" PRIu64 " records the previous holder "
			"took in may have been reported on to it alone; counted as unchecked", n);
	cmon_info("instance %" PRIu64 ": taken over with its last %" PRIu64 " records not known "
		  "to be checked (counted as unchecked)", in->id, n);
}

/* Set where freshly created ledgers start counting: `base` records of the
 * log came before (skipped), and the instance's earlier counts (a session
 * started again after telemonctl stop) carry on. */
static void ledgers_begin(struct session *s, uint64_t base)
{
	struct tm_instance *in = s->inst;
	struct ledger *ls[3] = { &s->led, NULL, NULL };

	for (size_t i = 0; i < s->ntools; i++)
		ls[1 + i] = &s->tools[i]->led;
	for (size_t i = 0; i < 3; i++) {
		if (!ls[i] || !ls[i]->f)
			continue;
		ls[i]->f->base = base;
		ls[i]->f->events = in->records + in->unchecked;   /* (records exclude unchecked) */
		ls[i]->f->gap = in->lost;
		ls[i]->f->markers = in->gaps;
		if (i > 0 && s->tools[i - 1]->kind == TK_CHECKER) {
			ls[i]->f->unchecked = in->unchecked;
			taken_over_settle(s, ls[i]->f);
		}
	}
	in->taken_over = false;
	s->led_fresh = false;
}

/* The stream is accepted: the snarflog says `before` records of the log
 * came before its first record or gap (Accepted.records_before), `skipped`
 * of them dropped before anyone was connected. Where our accounting stands
 * (the session's ledger) and where the stream begins must meet: what lies
 * between was lost on its way to us (in socket buffers, or received but
 * not yet taken when we or the connection died) and becomes a gap here. */
static void on_accepted(struct session *s, const Cmon__Accepted *a)
{
	struct tm_instance *in = s->inst;
	uint64_t skipped = a->has_skipped ? a->skipped : 0;
	uint64_t before = a->has_records_before ? a->records_before : skipped;
	uint64_t have, missing = 0;
	bool first = !s->streamed;

	if (!same_instance(in, a->instance)) {
		cmon_notice("instance %" PRIu64 " (%s on %s pid %" PRId64 "): its endpoint %s now "
			    "belongs to another instance", in->id, in->prog, in->machine, in->pid,
			    in->endpoint);
		drain(s, IS_GONE, "gone (its endpoint now belongs to another instance)");
		return;
	}
	s->cut_len = 0;                       /* (not delivered whole: lost, or sent again) */
	if (first) {
		s->fmt = a->instance->has_format ? a->instance->format : CMON__FORMAT__FORMAT_ASCII;
		logscan_init(&s->scan, s->fmt);
	}
	if (s->led_fresh) {
		/* joining a log we never followed: with from_start (an auto class)
		 * everything before us is a gap, else it was skipped */
		bool history = in->records || in->lost || in->skipped || in->gaps;
		if (!history && !s->from_start)
			in->skipped = before;
		ledgers_begin(s, history ? in->skipped : s->from_start ? 0 : before);
	}
	have = ledger_pos(&s->led);
	if (before > have)
		missing = before - have;
	else if (before < have)
		cmon_debug("instance %" PRIu64 ": we are ahead of the snarflog (%" PRIu64 " records "
			   "accounted for, %" PRIu64 " before this stream)", in->id, have, before);
	if (missing) {
		const char *when = !first ? "the reconnection" : have ? "the restart" : "we joined";
		cmon_warn("instance %" PRIu64 " (%s on %s pid %" PRId64 "): %" PRIu64 " records "
			  "before %s were lost", in->id, in->prog, in->machine, in->pid, missing, when);
		typescript_note(&s->ts, "%" PRIu64 " records before %s were lost", missing, when);
	}
	if (first)
		typescript_note(&s->ts, "monitoring %s on %s pid %" PRId64 " (%s log%s)", in->prog,
				in->machine, in->pid, cmon_format_name(s->fmt),
				missing ? "; records lost before are marked as a gap"
				: in->skipped ? "; records before this were not seen" : "");
	else
		typescript_note(&s->ts, "reconnected to the snarflog%s",
				missing ? "; records lost meanwhile are marked as a gap" : "");
	s->gap_due += missing;
	if (missing && s->state != SS_DRAINING)
		flush_gap_due(s);
	in->dirty = true;
	s->streamed = true;
	s->state = SS_STREAMING;
	s->attempts = 0;
	cmon_backoff_reset(&s->retry);
	in->state = IS_MONITORING;
	in->confirmed = true;
	in->up = true;                        /* its snarflog answered: it runs */
	in->dirty = true;
	say(s, "monitoring");
	cmon_info("instance %" PRIu64 ": streaming %s on %s pid %" PRId64, in->id, in->prog,
		  in->machine, in->pid);
}

static void on_end(struct session *s, const Cmon__LogEnd *e)
{
	const char *why = !e->has_reason || e->reason == CMON__END_REASON__END_EOF ? "the log ended"
			  : e->reason == CMON__END_REASON__END_STOPPED	    ? "stopped"
									    : "snarflog shut down";

	flush_gap_due(s);
	sync_counts(s);
	/* (what the session took in: the instance's counts follow the tools,
	 * which may still be reading) */
	typescript_note(&s->ts, "%s (%" PRIu64 " records received, %" PRIu64 " reported lost; "
			"this stream: %" PRIu64 " records sent, %" PRIu64 " reported dropped)", why,
			s->led.f ? s->led.f->events : s->inst->records,
			s->led.f ? s->led.f->gap : s->inst->lost, e->has_records ? e->records : 0,
			e->has_dropped ? e->dropped : 0);
	drain(s, s->state == SS_STOPPING ? IS_STOPPED : IS_ENDED, why);
}

/* Advance the session by one message from snarflog. */
static void session_drive(struct session *s, const Cmon__Msg *m)
{
	char why[200];
	Cmon__Role role;

	if (m->kind_case == CMON__MSG__KIND_PING) {
		cmon_send_ping(bufferevent_get_output(s->data), true,
			       m->ping->has_nonce ? m->ping->nonce : 0);
		return;
	}
	if (m->kind_case == CMON__MSG__KIND_ERROR) {
		snprintf(why, sizeof why, "snarflog reported an error: %s",
			 m->error->message ? m->error->message : "?");
		if (m->error->has_code && m->error->code == CMON__ERROR_CODE__ERROR_REPLACED) {
			/* a telemonitor with a newer claim on the instance took the
			 * stream: ours is over, and its row is not ours to write */
			cmon_warn("instance %" PRIu64 " (%s on %s pid %" PRId64 "): another telemonitor "
				  "took the stream (%s); letting go", s->inst->id, s->inst->prog,
				  s->inst->machine, s->inst->pid, why);
			s->inst->lease_lost = true;
			drain(s, s->inst->state, "another telemonitor took the stream");
			return;
		}
		lost(s, why);
		return;
	}
	switch (s->state) {
	case SS_HELLO:
		if (!cmon_hello_ok(m, &role, why, sizeof why)) {
			unproven(s, why);
			return;
		}
		if (role != CMON__ROLE__ROLE_SNARFLOG) {
			unproven(s, "a CMon peer that is not a snarflog");
			return;
		}
		ask_proof(s);
		return;
	case SS_PROOF:
		if (!cmon_proof_ok(m, s->inst->token, CMON_TOKEN_LEN, s->challenge,
				   sizeof s->challenge)) {
			snprintf(why, sizeof why, "%s instead of a proof of the instance's token",
				 m->kind_case == CMON__MSG__KIND_PROOF ? "a wrong proof"
				 : cmon_msg_kind_name(m));
			unproven(s, why);
			return;
		}
		send_start(s);
		return;
	case SS_ACCEPT:
		if (m->kind_case == CMON__MSG__KIND_BUSY) {
			snprintf(why, sizeof why, "busy: another consumer (%s) holds the stream",
				 m->busy->holder ? m->busy->holder : "?");
			s->inst->state = IS_BUSY;
			lost(s, why);
			return;
		}
		if (m->kind_case == CMON__MSG__KIND_ACCEPTED) {
			on_accepted(s, m->accepted);
			return;
		}
		break;
	case SS_STREAMING:
	case SS_STOPPING:
		switch (m->kind_case) {
		case CMON__MSG__KIND_HEADER:
			if (m->header->has_data &&
			    logscan_header(&s->scan, m->header->data.data, m->header->data.len) < 0)
				cmon_warn("instance %" PRIu64 ": header too large", s->inst->id);
			note_version(s);
			refresh_window_header(s);
			return;
		case CMON__MSG__KIND_DATA:
			flush_gap_due(s);
			if (m->data->has_data)
				on_chunk(s, m->data->data.data, m->data->data.len);
			return;
		case CMON__MSG__KIND_GAP:
			cut_end(s, "a gap");
			on_gap(s, m->gap->has_count ? m->gap->count : 0);
			return;
		case CMON__MSG__KIND_END:
			cut_end(s, "the end of the stream");
			on_end(s, m->end);
			return;
		default:
			break;
		}
		break;
	default:
		return;
	}
	snprintf(why, sizeof why, "unexpected %s message from snarflog", cmon_msg_kind_name(m));
	lost(s, why);
}

static void data_read(struct bufferevent *bev, void *arg)
{
	struct session *s = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	const char *why = NULL;
	Cmon__Msg *m;
	int r;

	if (!s->lease_wait && store_lease_state(s->tm->store) == LEASES_UNSURE) {
		/* woken after a stop or a starvation longer than a lease: the
		 * instance may be another node's by now; take nothing in until
		 * the next renewal says (session_lease_go) */
		s->lease_wait = true;
		set_paused(s, true);
		cmon_debug("instance %" PRIu64 ": this node's leases are unsure (it was stopped or "
			   "starved): reading nothing (%s) until the next renewal says", s->inst->id,
			   session_state_name(s));
	}
	if (s->lease_wait)
		return;

	/* (a program writing ten times a second sends less than
	 * CMON_LIBEVENT_READ a write: no readv that says EAGAIN) */
	if (!s->paused && evbuffer_get_length(in) >= CMON_LIBEVENT_READ)
		cmon_bev_read_more(bev, CMON_READ_MORE);
	while (s->data == bev && !s->paused) {
		if (!s->held) {
			r = cmon_frame_next(in, CMON_FRAME_MAX, &s->held, &why);
			if (r == 0)
				return;
			if (r < 0) {
				if (s->state == SS_HELLO || s->state == SS_PROOF)
					unproven(s, "it does not speak the CMon protocol");
				else
					lost(s, why ? why : "bad frame");
				return;
			}
		}
		m = s->held;
		/* log records wait (paused) while a dead tool waits to restart */
		if ((m->kind_case == CMON__MSG__KIND_DATA || m->kind_case == CMON__MSG__KIND_GAP) &&
		    (s->state == SS_STREAMING || s->state == SS_STOPPING) && !tools_ready(s))
			return;
		s->held = NULL;
		session_drive(s, m);
		cmon_msg_free(m);
	}
}

static void data_event(struct bufferevent *bev, short what, void *arg)
{
	struct session *s = arg;
	char buf[200], tlserr[200];
	int e = EVUTIL_SOCKET_ERROR();

	if (what & BEV_EVENT_CONNECTED)
		return;
	/* take what is still buffered first (LogEnd may be in it) */
	if ((s->held || evbuffer_get_length(bufferevent_get_input(bev))) && !s->paused)
		data_read(bev, s);
	if (s->data != bev)
		return;
	if (what & BEV_EVENT_EOF)
		snprintf(buf, sizeof buf, "the snarflog closed the connection");
	else
		snprintf(buf, sizeof buf, "data connection error: %s",
			 e ? evutil_socket_error_to_string(e) : cmon_tls_error(bev, tlserr, sizeof tlserr));
	if (s->state == SS_HELLO)       /* (a snarflog says Hello as soon as it accepts) */
		unproven(s, (what & BEV_EVENT_EOF) ? "the peer closed the connection without "
			 "saying hello" : buf);
	else
		lost(s, buf);
}

/* The snarflog proved itself (or, without a token, mutual TLS vouches for
 * it): ask for the log. */
static void send_start(struct session *s)
{
	evtimer_del(s->timer);
	s->unproven = 0;
	s->state = SS_ACCEPT;
	cmon_send_start(bufferevent_get_output(s->data),
			&(struct cmon_start){ .block = s->cls.block,
					      .from_start = s->from_start && !s->streamed,
					      .token = s->inst->has_token ? s->inst->token : NULL,
					      .token_len = s->inst->has_token ? CMON_TOKEN_LEN : 0,
					      .epoch = s->inst->epoch,
					      .batch_ms = s->tm->opt.batch_ms });
}

/* The data endpoint said Hello as a snarflog: it must now prove that it
 * is the one that announced the token the registry gave us (an announcer
 * can name any port of its machine), before the token or anything else
 * goes to it. */
static void ask_proof(struct session *s)
{
	struct evbuffer *out = bufferevent_get_output(s->data);

	if (!s->inst->has_token) {
		/* (an older registry or snarflog: only a TLS link whose
		 * certificate our CA verified may stand in for the proof) */
		if (s->tm->tls && cmon_tls_peer_verified(s->data)) {
			cmon_send_hello(out, CMON__ROLE__ROLE_TELEMONITOR, "telemonitor " CMON_VERSION);
			send_start(s);
		} else {
			unproven(s, "no token to ask it to prove itself with (and no verified TLS "
				 "certificate)");
		}
		return;
	}
	if (RAND_bytes(s->challenge, sizeof s->challenge) != 1) {
		lost(s, "no randomness for a challenge");
		return;
	}
	cmon_send_hello_ext(out, CMON__ROLE__ROLE_TELEMONITOR, "telemonitor " CMON_VERSION,
			    s->challenge, sizeof s->challenge, NULL, 0);
	s->state = SS_PROOF;
}

/* The peer at the data endpoint did not prove it is the snarflog: a
 * program that is not CMon, or one without the instance's token. Nothing
 * of ours reached it beyond a Hello with random bytes. After
 * TM_UNPROVEN_MAX such attempts the instance is given up, said once. */
static void unproven(struct session *s, const char *why)
{
	struct tm_instance *in = s->inst;

	if (++s->unproven >= TM_UNPROVEN_MAX) {
		cmon_warn("instance %" PRIu64 " (%s on %s pid %" PRId64 "): its data endpoint %s "
			  "did not prove it is the snarflog that announced it (%s; %u attempts); "
			  "giving up", in->id, in->prog, in->machine, in->pid, in->endpoint, why,
			  s->unproven);
		drain(s, IS_GONE, "its data endpoint is not the snarflog that announced it");
		return;
	}
	lost(s, why);
}

/* No Hello, or no Proof, in time. */
static void proof_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	char why[80];

	if (s->paused || s->lease_wait) {
		/* not reading (a tool is behind, or the leases are unsure): the
		 * peer is not to blame; its time starts when we read again */
		timer_arm(s, proof_timeout, TM_PROOF_S);
		return;
	}
	snprintf(why, sizeof why, "no %s within %d s", s->state == SS_HELLO ? "hello" : "proof",
		 TM_PROOF_S);
	unproven(s, why);
}

static void connected(struct bufferevent *bev, const char *peer, const char *err, void *arg)
{
	struct session *s = arg;
	char why[700];

	s->conn = NULL;
	if (!bev) {
		snprintf(why, sizeof why, "cannot connect to %s: %s", s->inst->endpoint, err);
		lost(s, why);
		return;
	}
	s->data = bev;
	s->state = SS_HELLO;
	bufferevent_setcb(bev, data_read, NULL, data_event, s);
	bufferevent_setwatermark(bev, EV_READ, 0, CMON_FRAME_MAX + 64);
	bufferevent_enable(bev, EV_WRITE);
	if (!s->paused)
		bufferevent_enable(bev, EV_READ);
	/* nothing is sent until the peer has said Hello as a snarflog */
	timer_arm(s, proof_timeout, TM_PROOF_S);
}

static void connect_now(struct session *s)
{
	struct cmon_addr a;

	if (cmon_addr_parse(s->inst->endpoint, 0, &a) < 0) {
		drain(s, IS_GONE, "its data endpoint is not an address");
		return;
	}
	if (s->tm->tls && a.kind == CMON_ADDR_TCP && !s->inst->tls) {
		/* never fall back to plaintext where TLS is configured: the token
		 * would go in clear and the log come unauthenticated */
		cmon_warn("instance %" PRIu64 " (%s on %s pid %" PRId64 "): refused: its data "
			  "endpoint %s does not speak TLS, and this telemonitor is configured for "
			  "it", s->inst->id, s->inst->prog, s->inst->machine, s->inst->pid,
			  s->inst->endpoint);
		drain(s, s->inst->state, "refused: its data endpoint does not speak TLS, and this "
		      "telemonitor is configured for TLS");
		return;
	}
	s->state = SS_CONNECTING;
	s->attempts++;
	s->conn = cmon_connect_start(s->tm->base, s->tm->dns, &a,
				     a.kind == CMON_ADDR_TCP ? s->tm->tls : NULL,
				     TM_CONNECT_MS, connected, s);
	if (!s->conn)
		drain(s, s->inst->state, "out of memory");
}

static void retry_fire(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;

	if (s->state == SS_WAITING)
		connect_now(s);
}

/* A tool's restart delay is over, a tool caught up, or the leases are
 * sure again: read again. (Also while greeting the snarflog: a Hello that
 * came while the leases were unsure, just after the store came back,
 * paused a session that had not streamed yet; resumed only from
 * streaming, it stayed "connecting" for good, its log held and never
 * read.) */
static void resume(struct session *s)
{
	if (s->state != SS_STREAMING && s->state != SS_STOPPING && s->state != SS_HELLO &&
	    s->state != SS_PROOF && s->state != SS_ACCEPT)
		return;
	if (!tools_behind(s) && !s->lease_wait)
		set_paused(s, false);
}

void session_lease_go(struct session *s)
{
	if (!s->lease_wait)
		return;
	s->lease_wait = false;
	resume(s);
}

static void tool_timer_fire(evutil_socket_t fd, short what, void *arg)
{
	resume(arg);
}

static void stop_timeout(evutil_socket_t fd, short what, void *arg)
{
	drain(arg, IS_STOPPED, "stopped (the snarflog did not confirm)");
}

/* The data connection is gone (or never came): reconnect later, unless
 * the instance is gone or we gave up. */
static void lost(struct session *s, const char *why)
{
	struct tm_instance *in = s->inst;
	unsigned ms;
	bool busy = in->state == IS_BUSY;

	if (s->data) {
		bufferevent_free(s->data);
		s->data = NULL;
	}
	cmon_msg_free(s->held);
	s->held = NULL;
	if (s->state == SS_STOPPING || s->state == SS_DRAINING || s->state == SS_DONE) {
		if (s->state == SS_STOPPING)
			drain(s, IS_STOPPED, "stopped");
		return;
	}
	if (s->tm->stopping) {
		drain(s, in->state, why);
		return;
	}
	if (s->discard && !in->up) {
		/* read on only to count the rest; its snarflog is gone too */
		drain(s, IS_ENDED, "the instance is gone");
		return;
	}
	/* an instance no registry lists is given up soon, unless its snarflog
	 * answered "busy" (it is alive: another consumer is letting go of it,
	 * e.g. a telemonitor whose lease we took over) */
	if ((!in->up && !busy && s->attempts >= 3) || s->attempts >= TM_RETRY_GIVEUP) {
		cmon_notice("instance %" PRIu64 " (%s on %s pid %" PRId64 "): %s; giving up",
			    in->id, in->prog, in->machine, in->pid, why);
		drain(s, busy ? IS_BUSY : IS_GONE, why);
		return;
	}
	ms = cmon_backoff_next(&s->retry);
	if ((s->attempts <= 1 && !s->unproven) || cmon_log_debugging())
		cmon_info("instance %" PRIu64 " (%s on %s pid %" PRId64 "): %s; retrying in %u ms",
			  in->id, in->prog, in->machine, in->pid, why, ms);
	typescript_note(&s->ts, "%s; retrying", why);
	say(s, "%s; retrying", why);
	in->state = busy ? IS_BUSY : IS_RETRYING;
	in->dirty = true;
	s->state = SS_WAITING;
	timer_arm(s, retry_fire, ms / 1000.0);
}

/* --- the end ------------------------------------------------------------------ */

/* The log ended, and a shell tool's run died with whole records of it
 * unread (tool_replay): it gets another run, given those records and the
 * end, if its restart is due within TM_TOOL_EXIT_WAIT_S of the end. Not
 * when the instance was stopped or is gone, or the telemonitor stops: the
 * records are counted as lost then (settle). */
static bool last_run_due(const struct session *s, struct tool *t)
{
	uint64_t lead;

	return s->state == SS_DRAINING && s->end_state == IS_ENDED && !s->tm->stopping &&
	       !s->discard && t->kind == TK_SHELL && tool_replay(t, &lead) &&
	       t->retry_at <= s->drained_at + TM_TOOL_EXIT_WAIT_S;
}

/* Start the tools waiting for a last run whose restart is due; those that
 * may not have one are done. Returns the seconds until the next one is
 * due, 0 if none waits. */
static double last_runs(struct session *s, double now)
{
	double wait = 0;

	for (size_t i = 0; i < s->ntools; i++) {
		struct tool *t = s->tools[i];
		if (t->state != TL_DEAD)
			continue;
		if (!last_run_due(s, t)) {
			t->state = TL_DONE;
			continue;
		}
		if (now < t->retry_at) {
			if (wait == 0 || t->retry_at - now < wait)
				wait = t->retry_at - now;
			continue;
		}
		spawn_tool(s, t);
		if (t->state != TL_RUNNING) {
			t->state = TL_DONE;     /* (it could not start: settle counts the rest) */
			continue;
		}
		typescript_note(&s->ts, "the log is over; this run gets the records the last one "
				"left unread, then the end");
		t->state = TL_CLOSING;
		tool_close_input(t);
	}
	return wait;
}

/* The tools had TM_TOOL_EXIT_WAIT_S to finish: one still taking input or
 * giving output is working through its queue (a busy machine) and gets
 * more time; one idle that long is killed (what it had not read is counted
 * at the finish). Tools due for a last run (last_runs) start
 * first. */
static void drain_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	double now = tm_now(), last = 0, wait = last_runs(s, now);

	if (wait > 0) {
		timer_arm(s, drain_timeout, wait);
		return;
	}
	if (!s->tm->stopping) {
		for (size_t i = 0; i < s->ntools; i++)
			if (s->tools[i]->state == TL_CLOSING && s->tools[i]->active_at > last)
				last = s->tools[i]->active_at;
		if (last && now - last < TM_TOOL_EXIT_WAIT_S) {
			timer_arm(s, drain_timeout, TM_TOOL_EXIT_WAIT_S - (now - last));
			return;
		}
	}
	for (size_t i = 0; i < s->ntools; i++)
		if (s->tools[i]->state == TL_CLOSING) {
			typescript_note(&s->ts, "%s did not finish: idle for %d s after the end of the "
					"log; killed", s->tools[i]->kind == TK_CHECKER ? "checker"
										       : "tool",
					TM_TOOL_EXIT_WAIT_S);
			s->tools[i]->state = TL_DONE;
		}
	finish(s);
}

static bool tools_done(const struct session *s)
{
	for (size_t i = 0; i < s->ntools; i++)
		if (s->tools[i]->state != TL_DONE)
			return false;
	return true;
}

/* No more log: let the tools finish what they have, then finish. */
static void drain(struct session *s, enum inst_state end, const char *why)
{
	struct window_done done[WINDOW_PENDING_MAX];
	size_t nd;
	double wait;

	if (s->state == SS_DRAINING || s->state == SS_DONE)
		return;
	s->state = SS_DRAINING;
	s->end_state = end;
	s->drained_at = tm_now();
	snprintf(s->why, sizeof s->why, "%s", why);
	if (s->conn) {
		cmon_connect_cancel(s->conn);
		s->conn = NULL;
	}
	if (s->data) {
		bufferevent_free(s->data);
		s->data = NULL;
	}
	for (size_t i = 0; i < s->ntools; i++) {
		struct tool *t = s->tools[i];
		if (t->state == TL_RUNNING) {
			t->state = TL_CLOSING;
			tool_close_input(t);
		} else if (t->state != TL_CLOSING && !(t->state == TL_DEAD && last_run_due(s, t))) {
			t->state = TL_DONE;
		}
	}
	nd = window_collect(&s->ring, tm_now(), true, done, WINDOW_PENDING_MAX);
	session_store_windows(s, done, nd);
	if (tools_done(s)) {
		finish(s);
		return;
	}
	wait = last_runs(s, tm_now());
	timer_arm(s, drain_timeout, s->tm->stopping ? 0.5 : wait > 0 ? wait : TM_TOOL_EXIT_WAIT_S);
}

/* The instance is over for this session: whatever of the log a tool did
 * not get (left in its queue or unread in its pipe when it was given up or
 * killed, or read past it after it was given up) will never reach it, and
 * is counted as lost, so that every tool's count covers the whole log the
 * session took in. */
static void settle(struct session *s)
{
	struct tm_instance *in = s->inst;
	uint64_t at = ledger_pos(&s->led);

	/* its snarflog left before we had all of it (it could not wait for
	 * us): the log's length it told the registry says how much */
	if (in->has_length && s->led_fresh) {
		/* it never accepted us: as on_accepted, but the stream is over */
		bool history = in->records || in->lost || in->skipped || in->gaps;
		if (!history && !s->from_start)
			in->skipped = in->length;
		ledgers_begin(s, history || s->from_start ? in->skipped : in->length);
		at = ledger_pos(&s->led);
	}
	if (in->has_length && in->length > at && !s->led_fresh) {
		ledger_lose(&s->led, in->length - at);
		typescript_note(&s->ts, "the snarflog left before the last %" PRIu64 " records of "
				"its log reached us; counted as lost", in->length - at);
		at = in->length;
	}

	for (size_t i = 0; i < s->ntools; i++) {
		struct tool *t = s->tools[i];
		uint64_t have = ledger_pos(&t->led);
		if (!t->led.f || have >= at)
			continue;
		ledger_lose(&t->led, at - have);
		typescript_note(&s->ts, "the %s did not get the last %" PRIu64 " records; counted "
				"as lost", t->kind == TK_CHECKER ? "checker" : "tool", at - have);
	}
}

static void reap(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	struct tm_instance *in = s->inst;
	struct tmon *tm = s->tm;
	enum inst_state st = s->end_state;

	const struct session_events *ev = s->ev;

	session_free(s);                       /* detaches it from the instance */
	ev->ended(tm, in, st);                 /* which may free it now */
}

static void finish(struct session *s)
{
	struct window_done done[WINDOW_PENDING_MAX];
	size_t nd;

	if (s->state == SS_DONE)
		return;
	if (s->state != SS_DRAINING)
		drain(s, s->inst->state, "stopped");
	s->state = SS_DONE;
	evtimer_del(s->timer);
	evtimer_del(s->tool_timer);
	nd = window_collect(&s->ring, tm_now(), true, done, WINDOW_PENDING_MAX);
	session_store_windows(s, done, nd);
	end_runs(s);
	if (s->end_state == IS_ENDED || s->end_state == IS_GONE || s->end_state == IS_STOPPED)
		settle(s);
	if (s->discard) {
		size_t n = strlen(s->why);
		snprintf(s->why + n, sizeof s->why - n, "; a tool did not read the rest (counted "
			 "as lost)");
	}
	sync_counts(s);
	say(s, "%s", s->why);
	event_active(s->reaper, EV_TIMEOUT, 0);
}

/* --- tools ------------------------------------------------------------------- */

/* A tool printed something for the typescript. */
static void tool_output(void *ctx, struct tool *t, const char *p, size_t n)
{
	struct session *s = ctx;

	typescript_write(&s->ts, p, n);
}

/* A line of the checker's JSON output. */
static void checker_output_line(void *ctx, struct tool *t, const char *line, size_t len)
{
	checker_line(ctx, t, line, len);
}

/* An offender of the checker in this process, taken apart already. */
static void checker_output_report(void *ctx, struct tool *t, const struct checker_report *r)
{
	checker_report(ctx, t, r);
}

/* A tool took enough of its input: maybe read again. */
static void tool_drained(void *ctx, struct tool *t)
{
	struct session *s = ctx;

	if (s->paused)
		resume(s);
}

/* A tool's process has exited and its output is read. */
static void tool_done(void *ctx, struct tool *t)
{
	struct session *s = ctx;
	struct tm_instance *in = s->inst;
	const char *what = t->kind == TK_CHECKER ? "checker" : "tool";
	double ran = tm_now() - t->started;
	unsigned delay_ms;
	char text[120];

	tool_exit_text(t->status, text, sizeof text);
	checker_run_over(s, t, WIFEXITED(t->status) && (WEXITSTATUS(t->status) == 0 ||
							WEXITSTATUS(t->status) == 1 ||
							WEXITSTATUS(t->status) == 4));
	if (t->state == TL_CLOSING || s->state == SS_DRAINING || s->state == SS_DONE) {
		typescript_note(&s->ts, "%s %s%s", what, text,
				t->kind == TK_CHECKER && WIFEXITED(t->status) &&
						WEXITSTATUS(t->status) == 1
					? " (some assertion failed)" : "");
		t->state = TL_DONE;
		if (s->state == SS_DRAINING) {
			/* it left records unread: another run, after its backoff */
			t->retry_at = tm_now() + cmon_backoff_next(&t->restart) / 1000.0;
			if (last_run_due(s, t)) {
				t->state = TL_DEAD;
				in->tool_restarts++;
				in->dirty = true;
				typescript_note(&s->ts, "restarting it for the records it left unread "
						"in %.0f ms", (t->retry_at - tm_now()) * 1e3);
				timer_arm(s, drain_timeout, t->retry_at - tm_now());
				return;
			}
		}
		if (s->state == SS_DRAINING && tools_done(s))
			finish(s);
		return;
	}
	/* It died while the log goes on: report it, restart on the next data. */
	if (ran >= TM_TOOL_HEALTHY_S)
		cmon_backoff_reset(&t->restart);      /* it ran well: start over */
	delay_ms = cmon_backoff_next(&t->restart);
	t->retry_at = tm_now() + delay_ms / 1000.0;
	t->state = TL_DEAD;
	in->tool_restarts++;
	in->dirty = true;
	cmon_warn("instance %" PRIu64 " (%s on %s pid %" PRId64 "): %s %s after %.1f s; "
		  "restarting it on the next data in %u ms", in->id, in->prog, in->machine,
		  in->pid, what, text, ran, delay_ms);
	typescript_note(&s->ts, "%s %s; restarting it on the next data in %u ms", what, text,
			delay_ms);
	say(s, "%s %s; restarting", what, text);
	/* Paused because it was behind, the session would wait for it to drain
	 * for ever (the soak found an instance that never ended): read on, and
	 * the next data waits for the restart (tools_ready). */
	if (s->paused)
		resume(s);
}

/* A tool took queued input: the instance's counts follow at once, not at
 * the next tick (telemonctl shows what the tool has been given). */
static void tool_wrote(void *ctx, struct tool *t)
{
	(void)t;
	sync_counts(ctx);
}

/* What a session hears from its tools: the checker's output is JSON lines,
 * a shell tool's is the typescript. */
static const struct tool_cbs checker_cbs = {
	.line = checker_output_line, .report = checker_output_report, .output = tool_output,
	.wrote = tool_wrote,
	.drained = tool_drained, .done = tool_done,
};
static const struct tool_cbs shell_cbs = {
	.output = tool_output, .wrote = tool_wrote, .drained = tool_drained, .done = tool_done,
};

/* --- life cycle -------------------------------------------------------------- */

/* Open the ledgers of the session and its tools: found (we are re-attaching
 * after a restart, and they say exactly where every count stands) or new. */
static int ledgers_open(struct session *s)
{
	bool existed = false, all = true;
	int r = ledger_open(&s->led, s->tm->state_dir, &s->tm->ledgers, s->inst->id, LK_SESSION,
			    &existed);

	if (r < 0) {
		cmon_err("instance %" PRIu64 ": cannot keep its ledger under %s/%s: %s", s->inst->id,
			 s->tm->state_dir, LEDGER_DIR, strerror(-r));
		return r;
	}
	all = existed;
	for (size_t i = 0; i < s->ntools; i++) {
		struct tool *t = s->tools[i];
		r = ledger_open(&t->led, s->tm->state_dir, &s->tm->ledgers, s->inst->id,
				t->kind == TK_CHECKER ? LK_CHECKER : LK_SHELL, &existed);
		if (r < 0)
			return r;
		if (!existed && all && t->led.f) {
			/* a tool new to a session we follow: it starts where we are */
			t->led.f->base = ledger_pos(&s->led);
		}
		if (existed)
			checker_orphan_settle(s, t);
	}
	s->led_fresh = !all;
	if (all)
		sync_counts(s);
	if (s->led.in_memory)
		cmon_warn("instance %" PRIu64 ": the state directory %s cannot take its ledgers (full "
			  "or read-only): counting in memory, which a crash would lose", s->inst->id,
			  s->tm->state_dir);
	return 0;
}

int session_start(struct tmon *tm, struct tm_instance *in, const struct tm_class *c,
		  bool from_start, const struct session_events *ev)
{
	struct session *s;
	struct window_spec ws;
	char err[200];

	if (tm->nsessions >= (tm->max_sessions ? tm->max_sessions : TM_SESSIONS_MAX))
		return -ENOSPC;
	s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->tm = tm;
	s->inst = in;
	s->ev = ev;
	s->from_start = from_start;
	s->retry = (struct cmon_backoff){ .min_ms = TM_RETRY_MIN_MS, .max_ms = TM_RETRY_MAX_MS,
					  .jitter_pct = 20 };
	s->cls.id = c->id;
	s->cls.block = c->block;
	s->cls.notify_reports = c->notify_reports;
	s->cls.allow_unbounded = c->allow_unbounded;
	s->cls.mailgroup = c->mailgroup;
	s->cls.resolve_after = c->resolve_after;
	s->cls.tool = c->tool ? strdup(c->tool) : NULL;
	s->cls.spec = c->spec ? strdup(c->spec) : NULL;
	s->cls.mail = c->mail ? strdup(c->mail) : NULL;
	s->cls.alertmanager = c->alertmanager ? strdup(c->alertmanager) : NULL;
	s->timer = evtimer_new(tm->base, retry_fire, s);
	s->tool_timer = evtimer_new(tm->base, tool_timer_fire, s);
	s->reaper = event_new(tm->base, -1, 0, reap, s);
	ws = c->window;
	if (!ws.before_n && !ws.before_ns)
		window_spec_parse(WINDOW_DEFAULT, &ws, err, sizeof err);
	window_ring_init(&s->ring, &ws, 0);
	logscan_init(&s->scan, CMON__FORMAT__FORMAT_ASCII);
	s->ts.fd = -1;
	if (c->spec)
		s->tools[s->ntools++] = tool_new(tm, TK_CHECKER, &checker_cbs, s);
	if (c->tool)
		s->tools[s->ntools++] = tool_new(tm, TK_SHELL, &shell_cbs, s);
	for (size_t i = 0; i < s->ntools; i++)
		if (!s->tools[i])
			goto out_free;
	/* the typescript first: settling a run that died with the previous
	 * telemonitor (ledgers_open) says so in it */
	if (typescript_open(&s->ts, tm->state_dir, in->id) < 0)
		cmon_warn("instance %" PRIu64 ": cannot open its typescript", in->id);
	if (ledgers_open(s) < 0)
		goto out_free;
	if (!s->timer || !s->tool_timer || !s->reaper || (c->tool && !s->cls.tool) || (c->spec && !s->cls.spec) ||
	    (c->mail && !s->cls.mail) || (c->alertmanager && !s->cls.alertmanager))
		goto out_free;
	in->sess = s;
	in->state = IS_MONITORING;
	in->dirty = true;
	tm->nsessions++;
	say(s, "connecting");
	connect_now(s);
	return 0;
out_free:
	session_free(s);
	return -ENOMEM;
}

void session_stop(struct session *s, const char *why)
{
	switch (s->state) {
	case SS_CONNECTING:
	case SS_WAITING:
	case SS_HELLO:
	case SS_ACCEPT:
		drain(s, s->inst->up ? IS_STOPPED : IS_GONE, why);
		return;
	case SS_STREAMING:
		if (s->tm->stopping) {
			drain(s, IS_MONITORING, why);
			return;
		}
		cmon_send_stop(bufferevent_get_output(s->data));
		s->state = SS_STOPPING;
		timer_arm(s, stop_timeout, TM_STOP_WAIT_S);
		typescript_note(&s->ts, "%s", why);
		return;
	default:
		return;
	}
}

void session_settle_checked(struct session *s)
{
	struct tool *ck = checker_of(s);
	uint64_t n;

	if (ck && tool_settle(ck, &n) && n > ck->run_checked)
		checker_progress(s, ck, n);
}

void session_tick(struct session *s, double now)
{
	struct window_done done[WINDOW_PENDING_MAX];
	struct tm_instance *in = s->inst;
	double quiet;
	size_t nd;

	if (s->ring.npend) {
		nd = window_collect(&s->ring, now, false, done, WINDOW_PENDING_MAX);
		session_store_windows(s, done, nd);
	}
	sync_counts(s);
	if (!s->paused || !tools_behind(s) ||
	    (s->state != SS_STREAMING && s->state != SS_STOPPING))
		return;
	/* a tool that does not read: say so, and give up once the instance is
	 * gone. A tool behind but still reading is only slow (a busy machine):
	 * what counts is how long since a tool behind took anything. */
	quiet = now - stalled_since(s);
	if (!s->stall_reported && quiet >= TM_STALL_REPORT_S) {
		s->stall_reported = true;
		cmon_warn("instance %" PRIu64 " (%s on %s pid %" PRId64 "): a tool has not read its "
			  "input for %.0f s; %s", in->id, in->prog, in->machine, in->pid, quiet,
			  s->cls.block ? "the program is held up (block)" : "the snarflog drops records");
		typescript_note(&s->ts, "a tool has not read its input for %.0f s", quiet);
		say(s, "stalled: a tool does not read its input");
	}
	if (!in->up && quiet >= TM_STALL_GONE_S)
		abandon_tools(s);
}

void session_free(struct session *s)
{
	if (!s)
		return;
	if (s->ring.npend) {
		/* shutting down: keep what the pending windows have so far */
		struct window_done done[WINDOW_PENDING_MAX];
		size_t nd = window_collect(&s->ring, tm_now(), true, done, WINDOW_PENDING_MAX);
		session_store_windows(s, done, nd);
	}
	if (s->conn)
		cmon_connect_cancel(s->conn);
	if (s->data)
		bufferevent_free(s->data);
	cmon_msg_free(s->held);
	/* the ledgers stay until the instance's end is committed to the store
	 * (its owner's session_events.ended removes them) */
	end_runs(s);
	sync_counts(s);
	for (size_t i = 0; i < s->ntools; i++)
		tool_free(s->tools[i], false);
	ledger_close(&s->led, NULL, false);
	if (s->timer)
		event_free(s->timer);
	if (s->tool_timer)
		event_free(s->tool_timer);
	if (s->reaper)
		event_free(s->reaper);
	typescript_close(&s->ts);
	window_ring_free(&s->ring);
	logscan_free(&s->scan);
	free(s->cut);
	free(s->cls.tool);
	free(s->cls.spec);
	free(s->cls.mail);
	free(s->cls.alertmanager);
	if (s->inst && s->inst->sess == s) {
		s->inst->sess = NULL;
		s->tm->nsessions--;
	}
	free(s);
}
