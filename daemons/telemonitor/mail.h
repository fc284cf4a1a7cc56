/* The mailer: a thread that sends queued mails through an SMTP relay with
 * libcurl, one at a time, retrying a relay that is down with exponential
 * backoff (1 s up to 5 min). The event loop only appends to the queue
 * under a mutex, so mail never blocks monitoring. The queue is bounded:
 * beyond MAIL_QUEUE_MAX the oldest mail is dropped (and counted). */
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

/* Queue `m` (its strings are taken; `m` is cleared). */
void mailer_queue(struct mailer *mm, struct digest_mail *m);

/* Copy the counters. */
void mailer_stats(struct mailer *mm, struct mailer_stats *out);

/* Stop the thread (an attempt in progress is abandoned at its timeout)
 * and free everything; accepts NULL. */
void mailer_free(struct mailer *mm);

#endif
