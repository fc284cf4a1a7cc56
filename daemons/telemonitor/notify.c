/* Failures -> mails: grouping (digest.c) on the loop, sending (mail.c) on
 * the mailer thread, which is started when the first mail is due. The
 * relay is the defaults' `smtp` (default smtp://localhost:25) and the
 * sender their `from` (default telemonitor@HOSTNAME). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmon/log.h"
#include "digest.h"
#include "mail.h"
#include "store.h"
#include "telemonitor.h"
#include "text.h"

#define DEFAULT_RELAY "smtp://localhost:25"

static bool ensure_mailer(struct tmon *tm)
{
	const char *url = rc_text(tm->rc, NULL, RC_SMTP), *from = rc_text(tm->rc, NULL, RC_FROM);
	char host[128] = "localhost", dflt[200];

	if (tm->mailer)
		return true;
	if (!*url)
		url = DEFAULT_RELAY;
	if (!*from) {
		gethostname(host, sizeof host - 1);
		for (char *c = host; *c; c++)
			if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			      (*c >= '0' && *c <= '9') || *c == '.' || *c == '-'))
				*c = '-';
		snprintf(dflt, sizeof dflt, "telemonitor@%s", host);
		from = dflt;
	}
	tm->mailer = mailer_new(url, from);
	if (!tm->mailer) {
		cmon_err("cannot start the mailer");
		return false;
	}
	cmon_info("mail goes through %s from %s", url, from);
	return true;
}

static void schedule(struct tmon *tm)
{
	double when = digest_next_deadline(tm->digest), now = tm_now();
	struct timeval tv = { 0, 0 };

	evtimer_del(tm->notify_timer);
	if (when <= 0)
		return;
	if (when > now) {
		tv.tv_sec = (time_t)(when - now);
		tv.tv_usec = (suseconds_t)((when - now - (double)tv.tv_sec) * 1e6);
	}
	evtimer_add(tm->notify_timer, &tv);
}

static void due(evutil_socket_t fd, short what, void *arg)
{
	struct tmon *tm = arg;
	struct digest_mail out[16];
	size_t n;

	do {
		n = digest_due(tm->digest, tm_now(), out, 16);
		for (size_t i = 0; i < n; i++) {
			if (ensure_mailer(tm))
				mailer_queue(tm->mailer, &out[i]);
			digest_mail_clear(&out[i]);
		}
	} while (n == 16);
	schedule(tm);
}

void notify_start(struct tmon *tm)
{
	tm->digest = digest_new();
	tm->notify_timer = evtimer_new(tm->base, due, tm);
}

void notify_stop(struct tmon *tm)
{
	if (tm->notify_timer)
		event_free(tm->notify_timer);
	tm->notify_timer = NULL;
	mailer_free(tm->mailer);
	tm->mailer = NULL;
	digest_free(tm->digest);
	tm->digest = NULL;
}

void notify_failure(struct tmon *tm, const char *mail, double mailgroup,
		    const struct tm_instance *in, uint64_t failure_id, const char *assertion,
		    int line, const char *spec, const char *what, int64_t start_ts, int64_t end_ts,
		    const char *metrics_json, double now)
{
	char *metrics = render_metrics(store_db(tm->store), metrics_json);
	struct digest_mail m;
	struct digest_item it = {
		.instance_id = in->id, .prog = in->prog, .machine = in->machine, .pid = in->pid,
		.spec = spec, .assertion = assertion, .line = line, .failure_id = failure_id,
		.time = now, .what = what && *what ? what : NULL, .start_ts = start_ts,
		.end_ts = end_ts, .metrics = metrics, .to = mail, .ctl = tm->ctl_hint,
		.period = mailgroup,
	};
	int r;

	if (!tm->digest)
		goto out;
	r = digest_add(tm->digest, &it, now, &m);
	if (r == 1) {
		if (ensure_mailer(tm))
			mailer_queue(tm->mailer, &m);
		digest_mail_clear(&m);
	} else if (r == -ENOSPC) {
		static bool warned;
		if (!warned)
			cmon_warn("too many assertions being grouped for mail; some failures "
				  "are not mailed");
		warned = true;
	}
	schedule(tm);
out:
	free(metrics);
}

const char *notify_status(struct tmon *tm, char *buf, size_t size)
{
	struct mailer_stats st;

	if (!tm->mailer) {
		snprintf(buf, size, "no mail sent yet");
		return buf;
	}
	mailer_stats(tm->mailer, &st);
	snprintf(buf, size, "%llu sent, %zu queued, %llu failed attempts, %llu dropped%s%s",
		 (unsigned long long)st.sent, st.queued, (unsigned long long)st.failures,
		 (unsigned long long)st.dropped, st.last_error[0] ? "; last error: " : "",
		 st.last_error);
	return buf;
}
