/* The mailer: a thread that sends queued mails through an SMTP relay with
 * libcurl, one at a time, retrying a relay that is down with exponential
 * backoff (1 s up to 5 min). The event loop only appends to the queue
 * under a mutex, so mail never blocks monitoring. The queue is bounded:
 * beyond MAIL_QUEUE_MAX the oldest mail is dropped (and counted).
 *
 * Mails carry the id of their row in the store's mail queue; the thread
 * hands back the ids of the mails the relay accepted (mailer_fd() becomes
 * readable, mailer_take_sent() takes them), and the loop deletes their
 * rows. A mail's Date and Message-ID come from its id and queueing time,
 * so a mail sent again after a restart is the same message. */
#ifndef TELEMON_MAIL_H
#define TELEMON_MAIL_H

#include <stddef.h>
#include <stdint.h>

#include "digest.h"

/* Limits and timing. */
#define MAIL_QUEUE_MAX 1000          /* mails waiting to be sent */
#define MAIL_BACKOFF_MIN_S 1.0       /* first retry delay */
#define MAIL_BACKOFF_MAX_S 300.0     /* longest retry delay */
#define MAIL_TIMEOUT_S 60            /* one attempt, connect to QUIT */

struct mailer;

/* Counters for status output. */
struct mailer_stats {
	uint64_t sent;               /* mails accepted by the relay */
	uint64_t failures;           /* failed attempts */
	uint64_t dropped;            /* mails dropped because the queue was full */
	size_t queued;               /* mails waiting */
	char last_error[256];        /* the latest failure, "" if none */
};

/* Start a mailer for relay `url` (smtp://host[:port] or smtps://...) with
 * envelope sender `from`. NULL on failure. */
struct mailer *mailer_new(const char *url, const char *from);

/* Queue mail `id` (0: not in the store), composed at `queued` (Unix
 * seconds); its strings are taken and `m` is cleared. 0; 1 when the
 * oldest mail was dropped to make room (*dropped gets its id); -ENOMEM
 * when `m` could not be queued (it is cleared all the same). */
int mailer_queue(struct mailer *mm, uint64_t id, double queued, struct digest_mail *m,
		 uint64_t *dropped);

/* A descriptor that becomes readable when mails have been accepted. */
int mailer_fd(const struct mailer *mm);

/* Take up to `max` ids of mails accepted by the relay into `ids`, oldest
 * first; returns how many (call again while it returns `max`). */
size_t mailer_take_sent(struct mailer *mm, uint64_t *ids, size_t max);

/* Copy the counters. */
void mailer_stats(struct mailer *mm, struct mailer_stats *out);

/* Stop the thread; an attempt in progress is abandoned. Mails accepted
 * before are still given by mailer_take_sent(). */
void mailer_stop(struct mailer *mm);

/* Stop the thread if it runs and free everything (mails not taken
 * included); accepts NULL. */
void mailer_free(struct mailer *mm);

#endif
