/* Unit tests for the telemonitor's outbox (daemons/telemonitor/outbox.c),
 * the one durable queue under mail and Alertmanager: items go to the
 * transport one at a time and in order; a delivered item's store row is
 * forgotten (at least once), one never stored (id 0) is not; a failed
 * attempt keeps the item at the head and sends it again after a
 * cmon_backoff delay (min, then twice min), items added meanwhile waiting
 * behind it; a refused item is dropped; a full queue drops its oldest item
 * not in flight; the counters (sent, queued, failed attempts, dropped,
 * last error) are what status and /metrics read. A fake transport records
 * what it is asked and answers as the test says; a real libevent loop
 * runs the retry timer. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../daemons/telemonitor/outbox.c"

/* The fake transport: what it was asked, and how it answers. */
static struct {
	struct outbox *ob;            /* the outbox under test */
	struct event_base *base;      /* the loop */
	char sends[16][32];           /* payloads given to send(), in order */
	double send_at[16];           /* ...when (monotonic seconds) */
	size_t nsend;                 /* how many */
	uint64_t forgot[16];          /* forget() ids, in order */
	size_t nforgot;               /* how many */
	size_t released;              /* release() calls */
	enum outbox_result answer[16]; /* the answer to the i-th send */
	bool hold;                    /* do not answer: the item stays in flight */
	size_t stop_after;            /* break the loop after this many sends (0: never) */
} w;

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fake_send(void *ctx, const struct outbox_item *it)
{
	size_t i = w.nsend++;

	assert_ptr_equal(ctx, &w);
	assert_true(i < 16);
	snprintf(w.sends[i], sizeof w.sends[i], "%s", (const char *)it->payload);
	w.send_at[i] = mono();
	if (w.stop_after && w.nsend >= w.stop_after)
		event_base_loopbreak(w.base);
	if (!w.hold)
		outbox_done(w.ob, w.answer[i], w.answer[i] == OUTBOX_SENT ? NULL : "relay down");
}

static void fake_forget(void *ctx, uint64_t id)
{
	assert_ptr_equal(ctx, &w);
	assert_true(w.nforgot < 16);
	w.forgot[w.nforgot++] = id;
}

static void fake_release(void *payload)
{
	w.released++;
	free(payload);
}

static const struct outbox_ops fake_ops = {
	.send = fake_send, .forget = fake_forget, .release = fake_release,
};

static const struct cmon_backoff quick = { .min_ms = 50, .max_ms = 1000, .jitter_pct = 0 };

static int setup(void **state)
{
	(void)state;
	memset(&w, 0, sizeof w);
	w.base = event_base_new();
	assert_non_null(w.base);
	w.ob = outbox_new(w.base, &fake_ops, &w, 3, &quick);
	assert_non_null(w.ob);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	outbox_free(w.ob);
	event_base_free(w.base);
	return 0;
}

static int add(uint64_t id, const char *what, bool start)
{
	char *p = strdup(what);

	assert_non_null(p);
	return outbox_add(w.ob, id, 1700000000.0, p, start);
}

/* Run the loop until the transport has been asked `sends` times (at most 5 s). */
static void run_until(size_t sends)
{
	struct timeval tv = { 5, 0 };

	w.stop_after = sends;
	event_base_loopexit(w.base, &tv);
	event_base_dispatch(w.base);
	assert_int_equal(w.nsend, sends);
}

/* Delivered in the order added; each row forgotten once, an unstored one never. */
static void test_order_and_persistence(void **state)
{
	struct outbox_stats st;

	(void)state;
	assert_int_equal(add(7, "a", true), 0);
	assert_int_equal(add(0, "b", true), 0);
	assert_int_equal(add(9, "c", true), 0);
	assert_int_equal(w.nsend, 3);
	assert_string_equal(w.sends[0], "a");
	assert_string_equal(w.sends[1], "b");
	assert_string_equal(w.sends[2], "c");
	assert_int_equal(w.nforgot, 2);
	assert_int_equal(w.forgot[0], 7);
	assert_int_equal(w.forgot[1], 9);
	assert_int_equal(w.released, 3);
	outbox_stats(w.ob, &st);
	assert_int_equal(st.sent, 3);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.failed, 0);
	assert_int_equal(st.dropped, 0);
	assert_string_equal(st.last_error, "");
	assert_false(outbox_down(w.ob));
}

/* One at a time: nothing more goes while the head is in flight. */
static void test_one_in_flight(void **state)
{
	(void)state;
	w.hold = true;
	add(1, "a", true);
	add(2, "b", true);
	assert_int_equal(w.nsend, 1);
	assert_int_equal(outbox_queued(w.ob), 2);
	assert_string_equal(outbox_head(w.ob), "a");
	w.hold = false;
	outbox_done(w.ob, OUTBOX_SENT, NULL);
	assert_int_equal(w.nsend, 2);
	assert_string_equal(w.sends[1], "b");
	assert_int_equal(outbox_queued(w.ob), 0);
	assert_null(outbox_head(w.ob));
}

/* Restored items wait for outbox_kick(). */
static void test_restore_then_kick(void **state)
{
	(void)state;
	add(1, "a", false);
	add(2, "b", false);
	assert_int_equal(w.nsend, 0);
	assert_int_equal(outbox_queued(w.ob), 2);
	outbox_kick(w.ob);
	assert_int_equal(w.nsend, 2);
	assert_int_equal(w.nforgot, 2);
}

/* A failed attempt: the item stays at the head, is sent again after min,
 * then 2·min; what was added meanwhile waits behind it. */
static void test_retry_with_backoff(void **state)
{
	struct outbox_stats st;

	(void)state;
	w.answer[0] = OUTBOX_RETRY;
	w.answer[1] = OUTBOX_RETRY;
	w.answer[2] = OUTBOX_SENT;
	w.answer[3] = OUTBOX_SENT;
	add(1, "a", true);
	assert_int_equal(w.nsend, 1);
	assert_true(outbox_down(w.ob));
	add(2, "b", true);
	assert_int_equal(w.nsend, 1);               /* waits for the retry */
	outbox_stats(w.ob, &st);
	assert_int_equal(st.failed, 1);
	assert_int_equal(st.queued, 2);
	assert_string_equal(st.last_error, "relay down");
	assert_string_equal(outbox_last_error(w.ob), "relay down");
	assert_int_equal(w.nforgot, 0);

	run_until(4);
	assert_string_equal(w.sends[0], "a");
	assert_string_equal(w.sends[1], "a");
	assert_string_equal(w.sends[2], "a");
	assert_string_equal(w.sends[3], "b");
	/* 50 ms, then 100 ms (no jitter): lower bounds only, the timer never fires early */
	assert_true(w.send_at[1] - w.send_at[0] >= 0.045);
	assert_true(w.send_at[2] - w.send_at[1] >= 0.095);
	assert_int_equal(w.nforgot, 2);
	assert_int_equal(w.forgot[0], 1);
	assert_int_equal(w.forgot[1], 2);
	outbox_stats(w.ob, &st);
	assert_int_equal(st.sent, 2);
	assert_int_equal(st.failed, 2);
	assert_int_equal(st.queued, 0);
	assert_string_equal(st.last_error, "relay down");   /* kept for status */
	assert_false(outbox_down(w.ob));
	/* reset after the success: the next failure waits min again */
	assert_int_equal(w.ob->backoff.failures, 0);
}

/* Refused for good: forgotten unsent, counted as dropped, the next goes. */
static void test_drop(void **state)
{
	struct outbox_stats st;

	(void)state;
	w.answer[0] = OUTBOX_DROP;
	add(4, "bad", true);
	add(5, "good", true);
	assert_int_equal(w.nsend, 2);
	assert_int_equal(w.nforgot, 2);
	assert_int_equal(w.forgot[0], 4);
	outbox_stats(w.ob, &st);
	assert_int_equal(st.sent, 1);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.failed, 0);
	assert_string_equal(st.last_error, "");
}

/* A full queue (3 here) drops its oldest item not in flight. */
static void test_full(void **state)
{
	struct outbox_stats st;

	(void)state;
	w.hold = true;
	assert_int_equal(add(1, "a", true), 0);     /* in flight */
	assert_int_equal(add(2, "b", true), 0);
	assert_int_equal(add(3, "c", true), 0);
	assert_int_equal(add(4, "d", true), 1);     /* b goes */
	assert_int_equal(w.nforgot, 1);
	assert_int_equal(w.forgot[0], 2);
	assert_int_equal(w.released, 1);
	outbox_stats(w.ob, &st);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.queued, 3);
	w.hold = false;
	outbox_done(w.ob, OUTBOX_SENT, NULL);
	assert_int_equal(w.nsend, 3);
	assert_string_equal(w.sends[1], "c");
	assert_string_equal(w.sends[2], "d");
}

/* Abandoned (the transport stops): the head stays, unsent and unforgotten;
 * freeing the outbox releases every payload and forgets no row. */
static void test_abandon_and_free(void **state)
{
	(void)state;
	w.hold = true;
	add(1, "a", true);
	add(2, "b", true);
	outbox_abandon(w.ob);
	assert_int_equal(outbox_queued(w.ob), 2);
	assert_int_equal(w.nforgot, 0);
	outbox_free(w.ob);
	w.ob = NULL;
	assert_int_equal(w.released, 2);
	assert_int_equal(w.nforgot, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_order_and_persistence, setup, teardown),
		cmocka_unit_test_setup_teardown(test_one_in_flight, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restore_then_kick, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retry_with_backoff, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abandon_and_free, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
