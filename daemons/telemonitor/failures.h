/* Failures: the one way a failure the checker found enters the service.
 * failures_add() looks up the silences, stores the failure, counts it,
 * and hands it to the subscribers (notify.c mails it, alerts.c sends it
 * to Alertmanager) in the order they subscribed; main.c subscribes them.
 * The checker so names no receiver: it sits above this file and every
 * receiver below it (docs/HACKING.md, "Floors"), and a new receiver is
 * one more subscriber, not one more call in checker.c. */
#ifndef TELEMON_FAILURES_H
#define TELEMON_FAILURES_H

#include <stdbool.h>
#include <stdint.h>

#include "store.h"
#include "telemonitor.h"

/* One failure of a monitored instance, with what its class says about
 * where it goes. The pointers are borrowed for the call. */
struct failure_event {
	struct store_failure f;       /* the row to store (failures_add sets silence_id or
	                                 am_silence) */
	struct tm_instance *in;       /* whose failure it is */
	const char *what;             /* what failed, for mails ("interval T #7"), or "" */
	uint32_t class_id;            /* the class monitoring the instance */
	const char *mail;             /* the class's recipients, or NULL */
	double mailgroup;             /* ...and their grouping period in seconds */
	const char *alertmanager;     /* the class's Alertmanager base URL, or NULL */
	double resolve_after;         /* ...and how long after its last failure an alert resolves */
	bool notify_reports;          /* deliver report assertions' failures too */
	uint64_t id;                  /* the stored failure's id (set by failures_add for
	                                 the subscribers) */
};

/* A receiver of failures. Either handler may be NULL. */
struct failure_subscriber {
	const char *name;             /* for logs: "mail", "alertmanager" */
	/* A failure to deliver: stored, counted, not silenced, not an
	 * inconclusive one, and not a report assertion's unless its class asks. */
	void (*on_failure)(struct tmon *tm, const struct failure_event *ev);
	/* This node took over an instance of telemonitor `from` (shared store):
	 * take over what it left undelivered. */
	void (*on_adopt)(struct tmon *tm, const char *from);
	/* Instance `id` ended, is gone, or left this node's memory: nothing
	 * more will fail for it here. */
	void (*on_ended)(struct tmon *tm, uint64_t id);
};

/* Add `sub` (borrowed: it must outlive tm) after the subscribers before
 * it; -ENOSPC past TM_FAILURE_SUBS_MAX. */
int failures_subscribe(struct tmon *tm, const struct failure_subscriber *sub);

/* A failure: marked with the silence that matches it (if any: first one
 * of its class's Alertmanager, amsilences.h, then one of ours), stored,
 * counted on its instance and the service (unless inconclusive: records
 * were lost), then given to each subscriber in order unless it is
 * silenced, inconclusive, or a report assertion's its class does not
 * deliver. 0, or the store's negative error (then nothing more is done). */
int failures_add(struct tmon *tm, const struct failure_event *ev);

/* This node took over an instance from telemonitor `from`: tell each
 * subscriber, in order. */
void failures_adopt(struct tmon *tm, const char *from);

/* Instance `id` ended, is gone, or was dropped from memory: tell each
 * subscriber (instances.c, which owns the instance table, calls it). */
void failures_instance_ended(struct tmon *tm, uint64_t id);

#endif
