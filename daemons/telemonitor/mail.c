/* The mailer thread (see mail.h): libcurl's SMTP support does the
 * protocol (and dot-stuffing); we build the message text. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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

/* The mail being sent. */
struct mail_msg {
	uint64_t id;                 /* its row in the store's mail queue (0: none) */
	double queued;               /* when it was composed */
	const struct digest_mail *m; /* recipients, subject, body (the caller's) */
};

/* The mailer. */
struct mailer {
	pthread_t thread;            /* the sending thread */
	pthread_mutex_t mu;          /* guards everything below */
	pthread_cond_t cv;           /* a mail to send or stop asked */
	struct mail_msg job;         /* the mail to send */
	bool busy;                   /* job is set and its result not taken */
	bool done;                   /* the attempt has ended: result and err are set */
	int result;                  /* 0 or -EIO */
	char err[256];               /* why it failed */
	int pipe[2];                 /* a byte in pipe[1] per ended attempt: wakes the loop */
	bool running;                /* the thread has not been joined */
	atomic_bool stop;            /* the thread must end */
	char *url;                   /* relay */
	char *from;                  /* envelope and header sender */
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
static char *message_text(struct mailer *mm, const struct mail_msg *msg, size_t *len)
{
	const struct digest_mail *m = msg->m;
	char date[64], host[128] = "localhost", msgid[128], *subject = encode_subject(m->subject);
	char *out, *p;
	size_t blen = strlen(m->body), cap;
	time_t when = msg->queued > 0 ? (time_t)msg->queued : time(NULL);
	struct tm tm;

	if (!subject)
		return NULL;
	gethostname(host, sizeof host - 1);
	gmtime_r(&when, &tm);
	strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S +0000", &tm);
	/* a stored mail keeps its Message-ID when it is sent again after a restart */
	if (msg->id)
		snprintf(msgid, sizeof msgid, "%ld.%06ld.%" PRIu64, (long)when,
			 (long)((msg->queued - (double)when) * 1e6), msg->id);
	else
		snprintf(msgid, sizeof msgid, "%ld.%ld.%u", (long)when, (long)getpid(), ++mm->seq);
	cap = 1024 + strlen(subject) + strlen(m->to) + strlen(mm->from) + 2 * blen;
	out = malloc(cap);
	if (!out) {
		free(subject);
		return NULL;
	}
	p = out + snprintf(out, cap,
			   "Date: %s\r\nFrom: %s\r\nTo: %s\r\nSubject: %s\r\n"
			   "Message-ID: <telemonitor.%s@%s>\r\nMIME-Version: 1.0\r\n"
			   "Content-Type: text/plain; charset=utf-8\r\n"
			   "Content-Transfer-Encoding: 8bit\r\nAuto-Submitted: auto-generated\r\n\r\n",
			   date, mm->from, m->to, subject, msgid, host);
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
static int send_one(struct mailer *mm, const struct mail_msg *msg, char *err, size_t errlen)
{
	const struct digest_mail *m = msg->m;
	struct curl_slist *rcpt = NULL;
	char from[300], one[300], curl_err[CURL_ERROR_SIZE] = "";
	struct upload up;
	size_t len = 0;
	char *text = message_text(mm, msg, &len);
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
	char err[256];

	pthread_mutex_lock(&mm->mu);
	while (!atomic_load(&mm->stop)) {
		struct mail_msg msg = mm->job;
		char one = 1;
		int r;
		if (!mm->busy || mm->done) {
			pthread_cond_wait(&mm->cv, &mm->mu);
			continue;
		}
		/* send unlocked; the mail is the caller's until the result is taken */
		pthread_mutex_unlock(&mm->mu);
		err[0] = '\0';
		r = send_one(mm, &msg, err, sizeof err);
		pthread_mutex_lock(&mm->mu);
		if (r < 0 && atomic_load(&mm->stop))
			break;                    /* abandoned */
		mm->result = r < 0 ? -EIO : 0;
		snprintf(mm->err, sizeof mm->err, "%s", err);
		mm->done = true;
		if (write(mm->pipe[1], &one, 1) < 0 && errno != EAGAIN)
			cmon_warn("mailer: cannot wake the loop: %s", strerror(errno));
	}
	pthread_mutex_unlock(&mm->mu);
	return NULL;
}

struct mailer *mailer_new(const char *url, const char *from)
{
	struct mailer *mm = calloc(1, sizeof *mm);

	if (!mm)
		return NULL;
	atomic_init(&mm->stop, false);
	mm->url = strdup(url);
	mm->from = strdup(from);
	if (!mm->url || !mm->from)
		goto out_free;
	if (pipe2(mm->pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		goto out_free;
	if (pthread_mutex_init(&mm->mu, NULL) != 0)
		goto out_close_pipe;
	pthread_cond_init(&mm->cv, NULL);
	if (pthread_create(&mm->thread, NULL, run, mm) != 0)
		goto out_destroy;
	mm->running = true;
	return mm;
out_destroy:
	pthread_cond_destroy(&mm->cv);
	pthread_mutex_destroy(&mm->mu);
out_close_pipe:
	close(mm->pipe[0]);
	close(mm->pipe[1]);
out_free:
	free(mm->url);
	free(mm->from);
	free(mm);
	return NULL;
}

int mailer_send(struct mailer *mm, uint64_t id, double queued, const struct digest_mail *m)
{
	int r = 0;

	pthread_mutex_lock(&mm->mu);
	if (!mm->running || atomic_load(&mm->stop) || mm->busy) {
		r = mm->busy ? -EBUSY : -ESHUTDOWN;
	} else {
		mm->job = (struct mail_msg){ .id = id, .queued = queued, .m = m };
		mm->busy = true;
		mm->done = false;
		pthread_cond_signal(&mm->cv);
	}
	pthread_mutex_unlock(&mm->mu);
	return r;
}

int mailer_fd(const struct mailer *mm)
{
	return mm->pipe[0];
}

int mailer_result(struct mailer *mm, char *err, size_t errlen)
{
	char buf[256];
	int r = 1;

	while (read(mm->pipe[0], buf, sizeof buf) > 0)
		;
	pthread_mutex_lock(&mm->mu);
	if (mm->busy && mm->done) {
		r = mm->result;
		snprintf(err, errlen, "%s", mm->err);
		mm->busy = false;
		mm->done = false;
	}
	pthread_mutex_unlock(&mm->mu);
	return r;
}

const char *mailer_url(const struct mailer *mm)
{
	return mm->url;
}

void mailer_stop(struct mailer *mm)
{
	if (!mm || !mm->running)
		return;
	pthread_mutex_lock(&mm->mu);
	atomic_store(&mm->stop, true);
	pthread_cond_signal(&mm->cv);
	pthread_mutex_unlock(&mm->mu);
	pthread_join(mm->thread, NULL);
	mm->running = false;
}

void mailer_free(struct mailer *mm)
{
	if (!mm)
		return;
	mailer_stop(mm);
	close(mm->pipe[0]);
	close(mm->pipe[1]);
	pthread_cond_destroy(&mm->cv);
	pthread_mutex_destroy(&mm->mu);
	free(mm->url);
	free(mm->from);
	free(mm);
}
