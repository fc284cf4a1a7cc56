/* snarflog's policy and life cycle: which records to keep, when to stop
 * reading (block), and how the program ends (drain, leave, exit).
 * Principle 1 of DESIGN.md rules here: unless the consumer's class asked
 * for `block`, reading never stops and the oldest whole records are
 * dropped when the buffer is full. Waiting for the registry's first answer
 * or for an auto subscriber (the hold) only keeps records while there is
 * room. Even a blocking consumer holds the program up for at most
 * -maxblock seconds at a time; then the oldest records are dropped (and
 * counted) until the consumer has caught up with half the buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmon/log.h"
#include "cmon/logfmt.h"
#include "snarflog.h"

void core_format_known(struct snarf *s, Cmon__Format fmt)
{
	s->format = fmt;
	s->ring.fmt = fmt;
	cmon_debug("log format: %s", cmon_format_name(fmt));
	stream_format_known(s);
}

void core_header_append(struct snarf *s, const uint8_t *p, size_t len)
{
	struct header *h = &s->hdr;

	if (h->len + len > SNARF_HEADER_MAX) {
		cmon_warn("saved header would exceed %u bytes; line not kept", SNARF_HEADER_MAX);
		return;
	}
	if (h->len + len > h->cap) {
		size_t cap = h->cap ? h->cap : 4096;
		uint8_t *n;
		while (cap < h->len + len)
			cap *= 2;
		n = realloc(h->data, cap);
		if (!n) {
			cmon_warn("out of memory saving the header");
			return;
		}
		h->data = n;
		h->cap = cap;
	}
	memcpy(h->data + h->len, p, len);
	h->len += len;
}

/* True when the buffer must not drop: a blocking consumer that has not
 * held the program up for -maxblock yet. */
static bool must_keep(const struct snarf *s)
{
	return !s->stopping && s->active_blocks && !s->block_expired;
}

/* The buffer dropped `n` of its oldest records. */
static void note_dropped(struct snarf *s, uint64_t n)
{
	if (n) {
		s->dropped += n;
		s->passed += n;             /* each reaches a consumer as one lost record */
		stream_dropped(s, n);
	}
}

uint8_t *core_read_room(struct snarf *s, size_t want, size_t *room)
{
	uint64_t dropped;
	uint8_t *p = ring_stage_room(&s->ring, want, !must_keep(s), room, &dropped);

	note_dropped(s, dropped);
	return p;
}

size_t core_commit(struct snarf *s, const uint32_t *ends, size_t n)
{
	uint64_t dropped;
	size_t k = ring_stage_commit(&s->ring, ends, n, !must_keep(s), &dropped);

	s->records_in += k;
	note_dropped(s, dropped);
	if (k < n)
		input_pause(s);             /* the index is full and must not drop */
	return k;
}

bool core_record(struct snarf *s, const uint8_t *p, size_t len)
{
	uint64_t dropped;

	if (must_keep(s) && !ring_fits(&s->ring, len)) {
		input_pause(s);
		return false;
	}
	dropped = ring_push(&s->ring, p, len);
	s->records_in++;
	note_dropped(s, dropped);
	return true;
}

size_t core_records(struct snarf *s, const uint8_t *p, const uint32_t *ends, size_t n)
{
	uint64_t dropped;

	if (must_keep(s)) {
		for (size_t i = 0; i < n; i++) {
			size_t start = i ? ends[i - 1] : 0;
			if (!core_record(s, p + start, ends[i] - start))
				return i;
		}
		return n;
	}
	dropped = ring_push_run(&s->ring, p, ends, n);
	s->records_in += n;
	note_dropped(s, dropped);
	return n;
}

void core_lost(struct snarf *s, uint64_t n, const char *why)
{
	uint8_t marker[CMON_GAP_MARKER_MAX];
	size_t len;

	s->resyncs++;
	if (s->resyncs <= 10 || cmon_log_debugging())
		cmon_warn("input damaged (%s); skipped to the next record%s", why,
			  s->resyncs == 10 ? " (further reports only with -debug)" : "");
	/* The loss sits after every buffered record: mark it there, in the
	 * log's own format, so a consumer sees it exactly where it happened. */
	len = cmon_log_gap_marker(s->format, n, marker);
	s->dropped += n;
	note_dropped(s, ring_push(&s->ring, marker, len));
}

void core_space_freed(struct snarf *s)
{
	if (s->block_expired && (!s->active_blocks || s->ring.used <= s->ring.cap / 2)) {
		s->block_expired = false;      /* caught up: block again */
		if (s->active_blocks)
			cmon_info("the blocking consumer caught up; blocking again");
	}
	if (s->in.paused && (!must_keep(s) || ring_fits(&s->ring, s->ring.staged + s->in.rec_max))) {
		evtimer_del(s->block_timer);
		input_resume(s);
	}
}

static void block_expired(evutil_socket_t fd, short what, void *arg)
{
	struct snarf *s = arg;

	if (!s->in.paused || !must_keep(s))
		return;
	s->block_expired = true;
	s->block_expiries++;
	cmon_warn("the blocking consumer took nothing for %.3f s; dropping the oldest records "
		  "until it catches up (-maxblock)", s->opt.maxblock_s);
	core_space_freed(s);
}

void core_blocked(struct snarf *s)
{
	struct timeval tv;

	if (!must_keep(s) || evtimer_pending(s->block_timer, NULL))
		return;
	tv.tv_sec = (time_t)s->opt.maxblock_s;
	tv.tv_usec = (suseconds_t)((s->opt.maxblock_s - (double)tv.tv_sec) * 1e6);
	evtimer_add(s->block_timer, &tv);
}

static void hold_expired(evutil_socket_t fd, short what, void *arg)
{
	core_hold_release(arg, "no auto subscriber connected in time");
}

void core_hold_start(struct snarf *s, double seconds, const char *why)
{
	struct timeval tv;

	if (s->active || seconds <= 0)
		return;
	s->hold = true;                 /* keep records while there is room; never stop reading */
	tv.tv_sec = (time_t)seconds;
	tv.tv_usec = (suseconds_t)((seconds - (double)tv.tv_sec) * 1e6);
	evtimer_del(s->hold_timer);
	evtimer_add(s->hold_timer, &tv);
	cmon_debug("holding the log (not dropping) for up to %.1f s: %s", seconds, why);
}

void core_hold_release(struct snarf *s, const char *why)
{
	if (!s->hold)
		return;
	s->hold = false;
	evtimer_del(s->hold_timer);
	cmon_debug("hold released: %s", why);
	core_space_freed(s);
	core_check_done(s);
}

void core_input_ended(struct snarf *s)
{
	cmon_debug("end of log: %llu records read, %llu dropped",
		   (unsigned long long)s->records_in, (unsigned long long)s->dropped);
	core_check_done(s);
}

void core_child_exited(struct snarf *s)
{
	core_check_done(s);
}

static void drain_expired(evutil_socket_t fd, short what, void *arg)
{
	struct snarf *s = arg;

	if (s->phase != PH_DRAINING)
		return;
	if (s->active) {
		/* What the consumer did not take in time is dropped, and it is
		 * told so (a gap, then LogEnd), so that its count still adds up
		 * to what the program wrote; the LogEnd's flush is bounded by
		 * the stream's own timer. */
		uint64_t left = ring_clear(&s->ring);

		cmon_warn("end of log: the consumer did not take the last %llu records within %.1f s; "
			  "reporting them to it as dropped", (unsigned long long)left, s->opt.drain_s);
		note_dropped(s, left);
		stream_end(s, CMON__END_REASON__END_EOF);
		core_check_done(s);
		return;
	}
	if (stream_ending(s))
		return;                        /* a LogEnd is being flushed; its timer bounds it */
	cmon_debug("end of log: no answer from the registry within %.1f s", s->opt.drain_s);
	stream_close_all(s);
	s->phase = PH_LEAVING;
	reg_leave(s);
}

/* Move the life cycle forward when its conditions hold:
 * RUNNING -> DRAINING once the log ended (and CMD exited);
 * DRAINING -> LEAVING once the consumer has everything (or none is
 * coming); LEAVING -> DONE is reg_leave()'s job. */
void core_check_done(struct snarf *s)
{
	struct timeval tv;

	if (s->phase == PH_RUNNING) {
		if (s->in.state != IN_EOF || (s->child && !s->child_done))
			return;
		s->phase = PH_DRAINING;
	}
	if (s->phase != PH_DRAINING)
		return;
	if (s->hold) {
		evtimer_del(s->drain_timer);    /* the hold timer bounds this wait */
		return;
	}
	if (!evtimer_pending(s->drain_timer, NULL)) {
		tv.tv_sec = (time_t)s->opt.drain_s;
		tv.tv_usec = (suseconds_t)((s->opt.drain_s - (double)tv.tv_sec) * 1e6);
		evtimer_add(s->drain_timer, &tv);
	}
	/* A short-lived program: the registry may yet say an auto subscriber
	 * wants this log. Wait for its first answer (bounded by -drain). A
	 * consumer that vanished mid-stream (a telemonitor killed and being
	 * restarted) gets the same time to come back for the rest. */
	if (!s->active && (reg_first_answer_pending(s) || s->consumer_lost))
		return;
	if (s->active) {
		if (!stream_drained(s)) {
			stream_pump(s);
			return;
		}
		stream_end(s, CMON__END_REASON__END_EOF);
	}
	if (stream_ending(s))
		return;                        /* a LogEnd is still being flushed */
	s->phase = PH_LEAVING;
	evtimer_del(s->drain_timer);
	reg_leave(s);
}

/* The records of the log so far, as a consumer counts them: those gone
 * from the buffer's front (sent or dropped) and those still held. */
uint64_t core_log_length(const struct snarf *s)
{
	return s->passed + ring_weight(&s->ring);
}

void core_done(struct snarf *s)
{
	s->phase = PH_DONE;
	event_base_loopexit(s->base, NULL);
}

void core_shutdown(struct snarf *s, const char *why)
{
	if (s->phase != PH_RUNNING || s->in.state == IN_EOF) {
		cmon_notice("%s again: exiting now", why);
		stream_close_all(s);
		core_done(s);
		return;
	}
	cmon_debug("%s: ending the log", why);
	s->stopping = true;
	input_stop(s);
}

static void stats_cb(evutil_socket_t fd, short what, void *arg)
{
	struct snarf *s = arg;

	if (s->dropped == s->dropped_reported && !s->active)
		return;
	cmon_debug("%llu records read, %llu buffered (%zu bytes), %llu dropped (+%llu), %s",
		   (unsigned long long)s->records_in, (unsigned long long)s->ring.nrec,
		   s->ring.used, (unsigned long long)s->dropped,
		   (unsigned long long)(s->dropped - s->dropped_reported),
		   s->active ? "forwarding" : "no consumer");
	s->dropped_reported = s->dropped;
}

int core_init(struct snarf *s)
{
	struct timeval every = { 5, 0 };

	s->hold_timer = evtimer_new(s->base, hold_expired, s);
	s->drain_timer = evtimer_new(s->base, drain_expired, s);
	s->stats_timer = event_new(s->base, -1, EV_PERSIST, stats_cb, s);
	s->block_timer = evtimer_new(s->base, block_expired, s);
	if (!s->hold_timer || !s->drain_timer || !s->stats_timer || !s->block_timer)
		return -1;
	if (s->opt.debug)
		event_add(s->stats_timer, &every);
	return ring_init(&s->ring, s->opt.buffer, s->opt.format);
}

void core_free(struct snarf *s)
{
	if (s->hold_timer)
		event_free(s->hold_timer);
	if (s->drain_timer)
		event_free(s->drain_timer);
	if (s->stats_timer)
		event_free(s->stats_timer);
	if (s->block_timer)
		event_free(s->block_timer);
	ring_free(&s->ring);
	free(s->hdr.data);
}
