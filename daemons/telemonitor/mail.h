/* The mailer: a thread that sends one mail at a time through an SMTP
 * relay with libcurl, the transport of the mail outbox (notify.c keeps the
 * queue, its order, its retries with backoff, 1 s up to 5 min, and its
 * counters in an outbox, outbox.h). The event loop hands the thread a
 * mail and is woken when the attempt has ended (mailer_fd() becomes
 * readable, mailer_result() says how), so mail never blocks monitoring.
 *
 * A mail's Date and Message-ID come from its id (its row in the store's
 * mail queue) and queueing time, so a mail sent again after a restart is
 * the same message. */
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

/* Start a mailer for relay `url` (smtp://host[:port] or smtps://...) with
 * envelope sender `from`. NULL on failure. */
struct mailer *mailer_new(const char *url, const char *from);

/* Start sending mail `id` (0: not in the store), composed at `queued`
 * (Unix seconds); `m` is borrowed until mailer_result() has given the
 * attempt's end (or the mailer is stopped). 0; -EBUSY while a mail is
 * being sent; -ESHUTDOWN once stopped. */
int mailer_send(struct mailer *mm, uint64_t id, double queued, const struct digest_mail *m);

/* A descriptor that becomes readable when an attempt has ended. */
int mailer_fd(const struct mailer *mm);

/* How the attempt ended: 0 sent, -EIO failed (`err` says why), 1 not
 * ended yet (or no mail given). */
int mailer_result(struct mailer *mm, char *err, size_t errlen);

/* The relay's URL. */
const char *mailer_url(const struct mailer *mm);

/* Stop the thread; an attempt in progress is abandoned, one that has
 * ended is still given by mailer_result(). */
void mailer_stop(struct mailer *mm);

/* Stop the thread if it runs and free everything; accepts NULL. */
void mailer_free(struct mailer *mm);

#endif
