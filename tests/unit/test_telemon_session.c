/* Unit tests for what a session tells its owner
 * (daemons/telemonitor/session.c, struct session_events): its instance's
 * status line goes to the owner's `status` handler ("connecting", then
 * why it retries or ends), and once it is over the session is freed
 * before the owner's `ended` handler hears, once, the state it leaves the
 * instance in. A real event loop and the transport's connector run it;
 * the floors below (ledgers, log scanning, tools, typescript, windows,
 * store) are stubs, and no tool is configured. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "../../daemons/telemonitor/session.c"

/* --- the floors below, stubbed --------------------------------------------- */

int ledger_open(struct ledger *l, const char *state_dir, struct ledger_pool *pool, uint64_t id,
		enum ledger_kind kind, bool *existed)
{
	(void)l, (void)state_dir, (void)pool, (void)id, (void)kind;
	*existed = false;
	return 0;
}

void ledger_close(struct ledger *l, struct ledger_pool *pool, bool remove)
{
	(void)l, (void)pool, (void)remove;
}

void ledger_write(struct ledger *l, const struct cmon_tally *t, size_t bytes)
{
	(void)l, (void)t, (void)bytes;
}

void ledger_lose(struct ledger *l, uint64_t n)
{
	(void)l, (void)n;
}

uint64_t ledger_pos(const struct ledger *l)
{
	(void)l;
	return 0;
}

void logscan_init(struct logscan *s, Cmon__Format fmt)
{
	(void)s, (void)fmt;
}

void logscan_free(struct logscan *s)
{
	(void)s;
}

int logscan_header(struct logscan *s, const uint8_t *p, size_t n)
{
	(void)s, (void)p, (void)n;
	return 0;
}

int logscan_data_tally(struct logscan *s, const uint8_t *p, size_t n, logscan_cb cb, void *arg,
		       struct cmon_tally *t)
{
	(void)cb, (void)arg;
	cmon_log_tally(s->fmt, p, n, SIZE_MAX, t);   /* (what the real one adds) */
	return 0;
}

struct tool *tool_new(struct tmon *tm, enum tool_kind kind, const struct tool_cbs *cbs, void *ctx)
{
	(void)tm, (void)kind, (void)cbs, (void)ctx;
	fail_msg("no tool is configured");
	return NULL;
}

int tool_spawn(struct tool *t, char *const argv[], char *const env[], char *err, size_t errlen)
{
	(void)t, (void)argv, (void)env, (void)err, (void)errlen;
	return -ENOSYS;
}

int tool_start_inproc(struct tool *t, const char *spec, bool bounded)
{
	(void)t, (void)spec, (void)bounded;
	return -ENOTSUP;
}

bool tool_running(const struct tool *t)
{
	(void)t;
	return false;
}

bool tool_settle(struct tool *t, uint64_t *n)
{
	(void)t, (void)n;
	return false;
}

void tool_body_begins(struct tool *t)
{
	(void)t;
}

struct evbuffer *tool_replay(struct tool *t, uint64_t *lead)
{
	(void)t;
	*lead = 0;
	return NULL;
}

void tool_replay_drop(struct tool *t)
{
	(void)t;
}

int tool_write_counted(struct tool *t, const void *p, size_t n, const struct cmon_tally *tl)
{
	(void)t, (void)p, (void)n, (void)tl;
	return 0;
}

int tool_write(struct tool *t, const void *p, size_t n)
{
	(void)t, (void)p, (void)n;
	return 0;
}

size_t tool_queued(const struct tool *t)
{
	(void)t;
	return 0;
}

void tool_close_input(struct tool *t)
{
	(void)t;
}

void tool_abandon_input(struct tool *t)
{
	(void)t;
}

void tool_kill(struct tool *t)
{
	(void)t;
}

void tool_free(struct tool *t, bool forget)
{
	(void)t, (void)forget;
}

const char *tool_exit_text(int status, char *buf, size_t size)
{
	(void)status;
	snprintf(buf, size, "exited");
	return buf;
}

int typescript_open(struct typescript *ts, const char *dir, uint64_t id)
{
	(void)ts, (void)dir, (void)id;
	return 0;
}

void typescript_close(struct typescript *ts)
{
	(void)ts;
}

void typescript_write(struct typescript *ts, const void *p, size_t n)
{
	(void)ts, (void)p, (void)n;
}

void typescript_note(struct typescript *ts, const char *fmt, ...)
{
	(void)ts, (void)fmt;
}

int window_spec_parse(const char *text, struct window_spec *out, char *err, size_t errlen)
{
	(void)text, (void)out, (void)err, (void)errlen;
	return 0;
}

void window_ring_init(struct window_ring *r, const struct window_spec *spec, size_t max_bytes)
{
	(void)r, (void)spec, (void)max_bytes;
}

void window_ring_free(struct window_ring *r)
{
	(void)r;
}

int window_set_header(struct window_ring *r, const char *hdr, size_t len, double tick_ns,
		      const char *label)
{
	(void)r, (void)hdr, (void)len, (void)tick_ns, (void)label;
	return 0;
}

void window_set_origin(struct window_ring *r, int64_t ts)
{
	(void)r, (void)ts;
}

int window_push(struct window_ring *r, uint64_t pos, int64_t ts, const char *text, size_t len,
		struct window_done *done, size_t max, size_t *ndone)
{
	(void)r, (void)pos, (void)ts, (void)text, (void)len, (void)done, (void)max;
	*ndone = 0;
	return 0;
}

int window_push_gap(struct window_ring *r, uint64_t pos, uint64_t count)
{
	(void)r, (void)pos, (void)count;
	return 0;
}

size_t window_collect(struct window_ring *r, double now, bool all, struct window_done *done,
		      size_t max)
{
	(void)r, (void)now, (void)all, (void)done, (void)max;
	return 0;
}

int store_add_window(struct store *st, uint64_t id, uint64_t instance_id, uint64_t from,
		     uint64_t to, bool truncated, const char *text, size_t len)
{
	(void)st, (void)id, (void)instance_id, (void)from, (void)to, (void)truncated, (void)text;
	(void)len;
	return 0;
}

enum store_lease_state store_lease_state(const struct store *st)
{
	(void)st;
	return LEASES_SAFE;
}

void checker_line(struct session *s, struct tool *t, const char *line, size_t len)
{
	(void)s, (void)t, (void)line, (void)len;
	fail_msg("no checker is configured");
}

void checker_report(struct session *s, struct tool *t, const struct checker_report *r)
{
	(void)s, (void)t, (void)r;
	fail_msg("no checker is configured");
}

void checker_progress(struct session *s, struct tool *t, uint64_t n)
{
	(void)s, (void)t, (void)n;
	fail_msg("no checker is configured");
}

double tm_now(void)
{
	return 1700000000.0;
}

/* --- the owner: records what it hears ----------------------------------------- */

static struct {
	char status[8][256];          /* status lines, in order */
	size_t nstatus;               /* how many */
	size_t ended;                 /* `ended` calls */
	enum inst_state end_state;    /* ...the last one's state */
	bool freed_first;             /* ...the session was gone from the instance by then */
	size_t sessions;              /* ...and tm->nsessions then */
} heard;

static void on_status(struct tm_instance *in, const char *text)
{
	(void)in;
	assert_true(heard.nstatus < sizeof heard.status / sizeof heard.status[0]);
	snprintf(heard.status[heard.nstatus++], sizeof heard.status[0], "%s", text);
}

static void on_ended(struct tmon *tm, struct tm_instance *in, enum inst_state st)
{
	heard.ended++;
	heard.end_state = st;
	heard.freed_first = in->sess == NULL;
	heard.sessions = tm->nsessions;
}

static const struct session_events events = { .status = on_status, .ended = on_ended };

static struct tmon tm;
static struct tm_instance in;
static struct tm_class cls;

static int setup(void **state)
{
	(void)state;
	memset(&heard, 0, sizeof heard);
	memset(&tm, 0, sizeof tm);
	memset(&in, 0, sizeof in);
	memset(&cls, 0, sizeof cls);
	tm.base = event_base_new();
	assert_non_null(tm.base);
	snprintf(tm.state_dir, sizeof tm.state_dir, "/nonexistent");
	in.id = 7;
	in.up = true;
	snprintf(in.prog, sizeof in.prog, "fsread");
	snprintf(in.machine, sizeof in.machine, "host1");
	cls.id = 3;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	event_base_free(tm.base);
	return 0;
}

/* Run the loop until `done` says so, or 5 s pass. */
static void run_until(bool (*done)(void))
{
	for (int i = 0; i < 500 && !done(); i++) {
		struct timeval tv = { 0, 10000 };
		event_base_loopexit(tm.base, &tv);
		event_base_dispatch(tm.base);
	}
	assert_true(done());
}

static bool is_ended(void)
{
	return heard.ended > 0;
}

static bool is_retrying(void)
{
	return heard.nstatus >= 2;
}

static void bad_endpoint_ends_gone(void **state)
{
	(void)state;
	snprintf(in.endpoint, sizeof in.endpoint, "[::1");
	assert_int_equal(session_start(&tm, &in, &cls, false, &events), 0);
	assert_int_equal(heard.nstatus, 2);
	assert_string_equal(heard.status[0], "connecting");
	assert_string_equal(heard.status[1], "its data endpoint is not an address");
	assert_int_equal(heard.ended, 0);               /* from the loop, on a clean stack */
	assert_non_null(in.sess);
	assert_int_equal(tm.nsessions, 1);
	run_until(is_ended);
	assert_int_equal(heard.ended, 1);
	assert_int_equal(heard.end_state, IS_GONE);
	assert_true(heard.freed_first);
	assert_int_equal(heard.sessions, 0);
}

static void refused_retries_then_stops(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	(void)state;
	/* a loopback port bound but not listening: refused at once */
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	snprintf(in.endpoint, sizeof in.endpoint, "127.0.0.1:%u", ntohs(sa.sin_port));
	assert_int_equal(session_start(&tm, &in, &cls, false, &events), 0);
	assert_int_equal(heard.nstatus, 1);
	assert_string_equal(heard.status[0], "connecting");
	assert_int_equal(in.state, IS_MONITORING);
	run_until(is_retrying);
	assert_non_null(strstr(heard.status[1], "; retrying"));
	assert_int_equal(in.state, IS_RETRYING);
	assert_int_equal(heard.ended, 0);
	session_stop(in.sess, "stopped with telemonctl stop");
	assert_string_equal(heard.status[heard.nstatus - 1], "stopped with telemonctl stop");
	run_until(is_ended);
	assert_int_equal(heard.ended, 1);
	assert_int_equal(heard.end_state, IS_STOPPED);
	assert_true(heard.freed_first);
	assert_null(in.sess);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(bad_endpoint_ends_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(refused_retries_then_stops, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
