/* The mailer thread (see mail.h): libcurl's SMTP support does the
 * protocol (and dot-stuffing); we build the message text. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cmon/log.h"
#include "mail.h"

/* One queued mail. */
struct mail_msg {
	TAILQ_ENTRY(mail_msg) link;  /* in mailer.queue */
	struct digest_mail m;        /* recipients, subject, body */
};
TAILQ_HEAD(mail_list, mail_msg);

/* The mailer. */
struct mailer {
	pthread_t thread;            /* the sending thread */
	pthread_mutex_t mu;          /* guards everything below */
	pthread_cond_t cv;           /* queue changed or stop asked */
	struct mail_list queue;      /* waiting mails, oldest first */
	size_t n;                    /* their number */
	atomic_bool stop;            /* the thread must end */
	char *url;                   /* relay */
	char *from;                  /* envelope and header sender */
	struct mailer_stats st;      /* counters */
	unsigned seq;                /* for Message-IDs */
};

/* The message being uploaded. */
struct upload {
	const char *p;               /* next byte */
	size_t left;                 /* bytes left */
};

static size_t read_cb(char *buf, size_t size, size_t nmemb, void *arg)
{
	struct upload *u = arg;
	size_t n = size * nmemb < u->left ? size * nmemb : u->left;

	memcpy(buf, u->p, n);
	u->p += n;
	u->left -= n;
	return n;
}

static int progress_cb(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct mailer *mm = arg;

	return atomic_load(&mm->stop) ? 1 : 0;      /* non-zero aborts the transfer */
}

static bool ascii_only(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s >= 0x80)
			return false;
	return true;
}

/* RFC 2047 encoded-word for a subject with non-ASCII text. */
static char *encode_subject(const char *s)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t n = strlen(s), o = 0;
	char *out;

	if (ascii_only(s))
		return strdup(s);
	out = malloc(12 + (n + 2) / 3 * 4 + 3);
	if (!out)
		return NULL;
	o = (size_t)sprintf(out, "=?UTF-8?B?");
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned char)s[i] << 16;
		if (i + 1 < n)
			v |= (unsigned char)s[i + 1] << 8;
		if (i + 2 < n)
			v |= (unsigned char)s[i + 2];
		out[o++] = b64[(v >> 18) & 63];
		out[o++] = b64[(v >> 12) & 63];
		out[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? b64[v & 63] : '=';
	}
	strcpy(out + o, "?=");
	return out;
}

/* Headers and body with CRLF line ends. */
static char *message_text(struct mailer *mm, const struct digest_mail *m, size_t *len)
{
	char date[64], host[128] = "localhost", *subject = encode_subject(m->subject), *out, *p;
	size_t blen = strlen(m->body), cap;
	time_t now = time(NULL);
	struct tm tm;

	if (!subject)
		return NULL;
	gethostname(host, sizeof host - 1);
	gmtime_r(&now, &tm);
	strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S +0000", &tm);
	cap = 1024 + strlen(subject) + strlen(m->to) + strlen(mm->from) + 2 * blen;
	out = malloc(cap);
	if (!out) {
		free(subject);
		return NULL;
	}
	p = out + snprintf(out, cap,
			   "Date: %s\r\nFrom: %s\r\nTo: %s\r\nSubject: %s\r\n"
			   "Message-ID: <telemonitor.%ld.%ld.%u@%s>\r\nMIME-Version: 1.0\r\n"
			   "Content-Type: text/plain; charset=utf-8\r\n"
			   "Content-Transfer-Encoding: 8bit\r\nAuto-Submitted: auto-generated\r\n\r\n",
			   date, mm->from, m->to, subject, (long)now, (long)getpid(), ++mm->seq, host);
	for (const char *b = m->body; *b; b++) {
		if (*b == '\n')
			*p++ = '\r';
		*p++ = *b;
	}
	*p = '\0';
	*len = (size_t)(p - out);
	free(subject);
	return out;
}

/* Send one mail; 0 or -EIO with the reason in `err`. Runs unlocked. */
static int send_one(struct mailer *mm, const struct digest_mail *m, char *err, size_t errlen)
{
	struct curl_slist *rcpt = NULL;
	char from[300], one[300], curl_err[CURL_ERROR_SIZE] = "";
	struct upload up;
	size_t len = 0;
	char *text = message_text(mm, m, &len);
	const char *r = m->to;
	CURL *c;
	CURLcode rc;

	if (!text) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	while (*r) {
		size_t n;
		while (*r == ',' || *r == ' ' || *r == '\t')
			r++;
		n = strcspn(r, ", \t");
		if (n) {
			snprintf(one, sizeof one, "<%.*s>", (int)(n > 280 ? 280 : n), r);
			rcpt = curl_slist_append(rcpt, one);
		}
		r += n;
	}
	snprintf(from, sizeof from, "<%s>", mm->from);
	up.p = text;
	up.left = len;
	c = curl_easy_init();
	if (!c) {
		free(text);
		curl_slist_free_all(rcpt);
		snprintf(err, errlen, "cannot initialise libcurl");
		return -EIO;
	}
	curl_easy_setopt(c, CURLOPT_URL, mm->url);
	curl_easy_setopt(c, CURLOPT_MAIL_FROM, from);
	curl_easy_setopt(c, CURLOPT_MAIL_RCPT, rcpt);
	curl_easy_setopt(c, CURLOPT_READFUNCTION, read_cb);
	curl_easy_setopt(c, CURLOPT_READDATA, &up);
	curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(c, CURLOPT_USE_SSL, (long)CURLUSESSL_TRY);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)MAIL_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, progress_cb);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, mm);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
	rc = curl_easy_perform(c);
	curl_easy_cleanup(c);
	curl_slist_free_all(rcpt);
	free(text);
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "%s", curl_err[0] ? curl_err : curl_easy_strerror(rc));
		return -EIO;
	}
	return 0;
}

static void *run(void *arg)
{
	struct mailer *mm = arg;
	double backoff = 0;
	struct timespec until = { 0, 0 };
	char err[256];

	pthread_mutex_lock(&mm->mu);
	while (!atomic_load(&mm->stop)) {
		struct mail_msg *msg = TAILQ_FIRST(&mm->queue);
		struct timespec now;
		int r;
		clock_gettime(CLOCK_REALTIME, &now);
		if (!msg) {
			pthread_cond_wait(&mm->cv, &mm->mu);
			continue;
		}
		if (backoff > 0 && (now.tv_sec < until.tv_sec ||
				    (now.tv_sec == until.tv_sec && now.tv_nsec < until.tv_nsec))) {
			pthread_cond_timedwait(&mm->cv, &mm->mu, &until);
			continue;
		}
		/* send unlocked; the loop may queue more meanwhile */
		TAILQ_REMOVE(&mm->queue, msg, link);
		mm->n--;
		pthread_mutex_unlock(&mm->mu);
		r = send_one(mm, &msg->m, err, sizeof err);
		pthread_mutex_lock(&mm->mu);
		if (r == 0) {
			mm->st.sent++;
			backoff = 0;
			digest_mail_clear(&msg->m);
			free(msg);
			continue;
		}
		if (atomic_load(&mm->stop)) {
			digest_mail_clear(&msg->m);
			free(msg);
			break;
		}
		mm->st.failures++;
		if (!mm->st.last_error[0] || strcmp(mm->st.last_error, err))
			cmon_warn("mail to %s via %s failed: %s; retrying with backoff", msg->m.to,
				  mm->url, err);
		snprintf(mm->st.last_error, sizeof mm->st.last_error, "%s", err);
		backoff = backoff ? backoff * 2 : MAIL_BACKOFF_MIN_S;
		if (backoff > MAIL_BACKOFF_MAX_S)
			backoff = MAIL_BACKOFF_MAX_S;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += (time_t)backoff;
		until.tv_nsec += (long)((backoff - (double)(time_t)backoff) * 1e9);
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		/* back at the head: order is kept */
		TAILQ_INSERT_HEAD(&mm->queue, msg, link);
		mm->n++;
	}
	pthread_mutex_unlock(&mm->mu);
	return NULL;
}

struct mailer *mailer_new(const char *url, const char *from)
{
	struct mailer *mm = calloc(1, sizeof *mm);

	if (!mm)
		return NULL;
	TAILQ_INIT(&mm->queue);
	atomic_init(&mm->stop, false);
	mm->url = strdup(url);
	mm->from = strdup(from);
	if (!mm->url || !mm->from || pthread_mutex_init(&mm->mu, NULL) != 0) {
		free(mm->url);
		free(mm->from);
		free(mm);
		return NULL;
	}
	pthread_cond_init(&mm->cv, NULL);
	if (pthread_create(&mm->thread, NULL, run, mm) != 0) {
		pthread_cond_destroy(&mm->cv);
		pthread_mutex_destroy(&mm->mu);
		free(mm->url);
		free(mm->from);
		free(mm);
		return NULL;
	}
	return mm;
}

void mailer_queue(struct mailer *mm, struct digest_mail *m)
{
	struct mail_msg *msg = calloc(1, sizeof *msg);

	if (!msg) {
		digest_mail_clear(m);
		return;
	}
	msg->m = *m;
	memset(m, 0, sizeof *m);
	pthread_mutex_lock(&mm->mu);
	if (mm->n >= MAIL_QUEUE_MAX) {
		struct mail_msg *old = TAILQ_FIRST(&mm->queue);
		TAILQ_REMOVE(&mm->queue, old, link);
		mm->n--;
		mm->st.dropped++;
		digest_mail_clear(&old->m);
		free(old);
	}
	TAILQ_INSERT_TAIL(&mm->queue, msg, link);
	mm->n++;
	pthread_cond_signal(&mm->cv);
	pthread_mutex_unlock(&mm->mu);
}

void mailer_stats(struct mailer *mm, struct mailer_stats *out)
{
	pthread_mutex_lock(&mm->mu);
	*out = mm->st;
	out->queued = mm->n;
	pthread_mutex_unlock(&mm->mu);
}

void mailer_free(struct mailer *mm)
{
	struct mail_msg *msg;

	if (!mm)
		return;
	pthread_mutex_lock(&mm->mu);
	atomic_store(&mm->stop, true);
	pthread_cond_signal(&mm->cv);
	pthread_mutex_unlock(&mm->mu);
	pthread_join(mm->thread, NULL);
	if (mm->n)
		cmon_warn("%zu mail%s not sent (shutting down)", mm->n, mm->n == 1 ? "" : "s");
	while ((msg = TAILQ_FIRST(&mm->queue))) {
		TAILQ_REMOVE(&mm->queue, msg, link);
		digest_mail_clear(&msg->m);
		free(msg);
	}
	pthread_cond_destroy(&mm->cv);
	pthread_mutex_destroy(&mm->mu);
	free(mm->url);
	free(mm->from);
	free(mm);
}
