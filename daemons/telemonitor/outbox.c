/* The outbox (see outbox.h): a list of items, the head in flight or
 * waiting for its retry timer. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "outbox.h"

/* An item in the queue. */
struct entry {
	TAILQ_ENTRY(entry) link;      /* in outbox.queue */
	struct outbox_item it;        /* what the transport sees */
};
TAILQ_HEAD(entry_list, entry);

/* The queue of one transport. */
struct outbox {
	const struct outbox_ops *ops; /* the transport */
	void *ctx;                    /* its argument */
	size_t max;                   /* items held at most */
	struct entry_list queue;      /* waiting, oldest first (the head may be in flight) */
	size_t n;                     /* how many */
	struct entry *inflight;       /* the head, while the transport sends it */
	struct event *retry;          /* backoff after a failed attempt */
	struct cmon_backoff backoff;  /* the delays (reset on success) */
	bool down;                    /* the last attempt failed */
	struct outbox_stats st;       /* counters (queued is n) */
};

static void entry_free(struct outbox *ob, struct entry *e)
{
	if (ob->ops->release)
		ob->ops->release(e->it.payload);
	free(e);
}

/* Take `e` out of the queue, forget its row, free it. */
static void entry_forget(struct outbox *ob, struct entry *e)
{
	TAILQ_REMOVE(&ob->queue, e, link);
	ob->n--;
	if (e->it.id && ob->ops->forget)
		ob->ops->forget(ob->ctx, e->it.id);
	entry_free(ob, e);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	outbox_kick(arg);
}

struct outbox *outbox_new(struct event_base *base, const struct outbox_ops *ops, void *ctx,
			  size_t max, const struct cmon_backoff *backoff)
{
	struct outbox *ob = calloc(1, sizeof *ob);

	if (!ob)
		return NULL;
	ob->ops = ops;
	ob->ctx = ctx;
	ob->max = max ? max : 1;
	ob->backoff = *backoff;
	ob->backoff.failures = 0;
	TAILQ_INIT(&ob->queue);
	ob->retry = evtimer_new(base, on_retry, ob);
	if (!ob->retry) {
		free(ob);
		return NULL;
	}
	return ob;
}

int outbox_add(struct outbox *ob, uint64_t id, double queued, void *payload, bool start)
{
	struct entry *e = calloc(1, sizeof *e);
	int r = 0;

	if (!e) {
		if (ob->ops->release)
			ob->ops->release(payload);
		return -ENOMEM;
	}
	e->it = (struct outbox_item){ .id = id, .queued = queued, .payload = payload };
	if (ob->n >= ob->max) {
		struct entry *old = TAILQ_FIRST(&ob->queue);
		if (old == ob->inflight)
			old = TAILQ_NEXT(old, link);
		if (old) {
			ob->st.dropped++;
			entry_forget(ob, old);
			r = 1;
		}
	}
	TAILQ_INSERT_TAIL(&ob->queue, e, link);
	ob->n++;
	if (start)
		outbox_kick(ob);
	return r;
}

void outbox_kick(struct outbox *ob)
{
	struct entry *e = TAILQ_FIRST(&ob->queue);

	if (!e || ob->inflight || evtimer_pending(ob->retry, NULL))
		return;
	ob->inflight = e;
	ob->ops->send(ob->ctx, &e->it);       /* may call outbox_done() at once */
}

void outbox_done(struct outbox *ob, enum outbox_result r, const char *err)
{
	struct entry *e = ob->inflight;

	if (!e)
		return;
	ob->inflight = NULL;
	switch (r) {
	case OUTBOX_SENT:
		ob->down = false;
		cmon_backoff_reset(&ob->backoff);
		ob->st.sent++;
		break;
	case OUTBOX_DROP:
		ob->st.dropped++;
		break;
	case OUTBOX_RETRY:
		ob->st.failed++;
		ob->down = true;
		snprintf(ob->st.last_error, sizeof ob->st.last_error, "%s", err ? err : "failed");
		cmon_timer_arm_ms(ob->retry, cmon_backoff_next(&ob->backoff));
		return;                       /* it stays at the head */
	}
	entry_forget(ob, e);
	outbox_kick(ob);
}

void outbox_abandon(struct outbox *ob)
{
	ob->inflight = NULL;
}

void *outbox_head(const struct outbox *ob)
{
	const struct entry *e = ob ? TAILQ_FIRST(&ob->queue) : NULL;

	return e ? e->it.payload : NULL;
}

size_t outbox_queued(const struct outbox *ob)
{
	return ob ? ob->n : 0;
}

const char *outbox_last_error(const struct outbox *ob)
{
	return ob ? ob->st.last_error : "";
}

bool outbox_down(const struct outbox *ob)
{
	return ob && ob->down;
}

void outbox_stats(const struct outbox *ob, struct outbox_stats *out)
{
	memset(out, 0, sizeof *out);
	if (!ob)
		return;
	*out = ob->st;
	out->queued = ob->n;
}

void outbox_free(struct outbox *ob)
{
	struct entry *e;

	if (!ob)
		return;
	while ((e = TAILQ_FIRST(&ob->queue))) {
		TAILQ_REMOVE(&ob->queue, e, link);
		entry_free(ob, e);
	}
	event_free(ob->retry);
	free(ob);
}
