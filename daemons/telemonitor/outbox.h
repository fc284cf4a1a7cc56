/* The outbox: one durable queue of things to deliver, in order, at least
 * once, for one transport (mail.c's relay, alerts.c's Alertmanager).
 *
 * An item is added with the id of its row in the store (0: not kept),
 * which its owner wrote before (store_mail_add(), store_alert_add()). The
 * outbox hands the oldest item to the transport's send() and waits for
 * outbox_done(): on OUTBOX_SENT the item's row is forgotten (ops->forget)
 * and the next one goes; on OUTBOX_RETRY the item stays at the head and is
 * sent again after a cmon_backoff delay; on OUTBOX_DROP it is forgotten
 * unsent. Beyond `max` items the oldest one not in flight is dropped.
 * Everything runs on the loop; a transport whose work blocks (the mailer
 * thread) reports back to the loop before it calls outbox_done().
 *
 * Ownership: an item's payload belongs to the outbox once added and is
 * freed with ops->release(); it stays valid while its item is in flight. */
#ifndef TELEMON_OUTBOX_H
#define TELEMON_OUTBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "cmon/backoff.h"

struct outbox;

/* One queued item. */
struct outbox_item {
	uint64_t id;                 /* its row in the store (0: not kept) */
	double queued;               /* when it was queued (Unix seconds) */
	void *payload;               /* what the transport sends */
};

/* How an attempt ended (outbox_done()). */
enum outbox_result {
	OUTBOX_SENT,                 /* accepted: forget it, send the next */
	OUTBOX_RETRY,                /* failed: send it again after a backoff */
	OUTBOX_DROP,                 /* refused for good: forget it unsent */
};

/* A transport, as its owner fills it in. */
struct outbox_ops {
	/* Start delivering `it` (the head); report with outbox_done() later
	 * or at once. Never called while an item is in flight. */
	void (*send)(void *ctx, const struct outbox_item *it);
	/* Delete row `id` (never 0) of the store: the item was sent or dropped. */
	void (*forget)(void *ctx, uint64_t id);
	/* Free a payload (may be NULL to free nothing). */
	void (*release)(void *payload);
};

/* Counters for status output and /metrics. */
struct outbox_stats {
	uint64_t sent;               /* items the transport delivered */
	uint64_t failed;             /* attempts that failed (OUTBOX_RETRY) */
	uint64_t dropped;            /* items dropped: queue full or refused */
	size_t queued;               /* items waiting, the one in flight included */
	char last_error[300];        /* the latest failure, "" if none */
};

/* A new empty outbox on `base` for transport `ops` (called with `ctx`),
 * at most `max` items, retrying with `backoff` (copied). NULL on failure. */
struct outbox *outbox_new(struct event_base *base, const struct outbox_ops *ops, void *ctx,
			  size_t max, const struct cmon_backoff *backoff);

/* Queue `payload` (taken, even on failure) kept as row `id` of the store,
 * queued at `queued`; starts sending unless an item is in flight or a
 * retry is pending. 0; 1 when the oldest item was dropped to make room;
 * -ENOMEM when it could not be queued (the payload is released). With
 * `start` false nothing is sent until outbox_kick() (restoring at start). */
int outbox_add(struct outbox *ob, uint64_t id, double queued, void *payload, bool start);

/* Send the head unless an item is in flight or a retry is pending. */
void outbox_kick(struct outbox *ob);

/* The attempt in flight has ended as `r`; `err` says why it failed
 * (OUTBOX_RETRY, OUTBOX_DROP; NULL otherwise). */
void outbox_done(struct outbox *ob, enum outbox_result r, const char *err);

/* The item in flight has been abandoned (the transport stops): it stays
 * at the head, unsent. */
void outbox_abandon(struct outbox *ob);

/* The payload of the head (the item in flight, if any); NULL when empty. */
void *outbox_head(const struct outbox *ob);

/* Items waiting, the one in flight included. */
size_t outbox_queued(const struct outbox *ob);

/* The latest failure, "" if none. */
const char *outbox_last_error(const struct outbox *ob);

/* Whether the last attempt failed (and no attempt succeeded since). */
bool outbox_down(const struct outbox *ob);

/* Copy the counters (all zero for NULL). */
void outbox_stats(const struct outbox *ob, struct outbox_stats *out);

/* Free the outbox and its items (their rows stay in the store); accepts
 * NULL. The transport must have nothing in flight. */
void outbox_free(struct outbox *ob);

#endif
