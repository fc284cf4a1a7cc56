/* Talking to the service: connect to DIR/control.sock, send the request
 * (NUL-terminated strings, an empty one last), copy the answer out. The
 * first line of the answer is "ok" or "error MESSAGE"; in the output, a
 * line starting with HINT_MARK is a hint for a person and goes to
 * standard error (so a pipe gets only data). */
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "telemonctl.h"

#define REPLY_TIMEOUT_S 60        /* the service answers well within this */
#define HINT_MARK '\002'          /* CTL_HINT of the telemonitor's control.h */

static int width(void)
{
	struct winsize ws;

	if (!isatty(1) || ioctl(1, TIOCGWINSZ, &ws) < 0 || ws.ws_col == 0)
		return 0;
	return ws.ws_col;
}

static bool utf8(void)
{
	setlocale(LC_CTYPE, "");
	return !strcmp(nl_langinfo(CODESET), "UTF-8");
}

static bool send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

static bool write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* Where the answer's bytes go: data lines to standard output, hint lines
 * (HINT_MARK first) to standard error, without the mark. */
struct copy_state {
	bool line_start;         /* the next byte starts a line */
	bool in_hint;            /* inside a hint line */
	bool hinted;             /* a hint was written already */
	char *cap;               /* capturing (request_capture): the data so far, or NULL */
	size_t caplen, capsize;  /* ...its length and allocation */
	bool capturing;          /* data lines go to `cap`, not standard output */
};

/* Keep `n` bytes of data for request_capture(); false when out of memory. */
static bool capture(struct copy_state *co, const char *p, size_t n)
{
	if (co->caplen + n + 1 > co->capsize) {
		size_t size = (co->caplen + n + 1) * 2;
		char *q = realloc(co->cap, size);
		if (!q)
			return false;
		co->cap = q;
		co->capsize = size;
	}
	memcpy(co->cap + co->caplen, p, n);
	co->caplen += n;
	co->cap[co->caplen] = '\0';
	return true;
}

static bool copy_out(struct copy_state *co, const char *p, size_t n)
{
	while (n > 0) {
		if (co->line_start && *p == HINT_MARK) {
			co->in_hint = true;
			/* on a terminal, set the hint apart from the table above it */
			if (!co->hinted && isatty(2) && isatty(1))
				(void)write_all(2, "\n", 1);
			co->hinted = true;
			p++;
			n--;
			co->line_start = false;
			continue;
		}
		const char *nl = memchr(p, '\n', n);
		size_t take = nl ? (size_t)(nl - p) + 1 : n;
		if (co->in_hint)
			(void)write_all(2, p, take);    /* a hint lost is no error */
		else if (co->capturing ? !capture(co, p, take) : !write_all(1, p, take))
			return false;
		co->line_start = nl != NULL;
		if (nl)
			co->in_hint = false;
		p += take;
		n -= take;
	}
	return true;
}

/* Send `c`; its answer's data goes through `co`. The exit status. */
static int talk(const struct ctl_cmd *c, struct copy_state *cop)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct timeval tv = { REPLY_TIMEOUT_S, 0 };
	char head[32], buf[65536], first[1024];
	size_t flen = 0;
	bool have_status = false, ok = false;
	ssize_t n;
	int fd;

	if ((size_t)snprintf(sun.sun_path, sizeof sun.sun_path, "%s/control.sock", c->state) >=
	    sizeof sun.sun_path) {
		fprintf(stderr, "telemonctl: state directory path too long: %s\n", c->state);
		return EXIT_USAGE;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
		fprintf(stderr, "telemonctl: cannot reach the telemonitor at %s: %s (is it running? "
			"-state DIR or $TELEMON_STATE names its state directory)\n", sun.sun_path,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return EXIT_UNREACHABLE;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	snprintf(head, sizeof head, "%d", width());
	const char *fixed[] = { "telemonctl/1", c->json ? "json" : "text", head,
				utf8() ? "utf8" : "ascii" };
	for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
		if (!send_all(fd, fixed[i], strlen(fixed[i]) + 1))
			goto broken;
	for (int i = 0; i < c->nwords; i++)
		if (!send_all(fd, c->words[i], strlen(c->words[i]) + 1))
			goto broken;
	if (!send_all(fd, "", 1))
		goto broken;
	while ((n = recv(fd, buf, sizeof buf, 0)) > 0 || (n < 0 && errno == EINTR)) {
		char *p = buf;
		if (n < 0)
			continue;
		if (!have_status) {
			char *nl = memchr(buf, '\n', (size_t)n);
			size_t take = nl ? (size_t)(nl - buf) : (size_t)n;
			if (flen + take >= sizeof first)
				take = sizeof first - 1 - flen;
			memcpy(first + flen, buf, take);
			flen += take;
			if (!nl)
				continue;
			first[flen] = '\0';
			have_status = true;
			ok = !strcmp(first, "ok");
			p = nl + 1;
			n -= (ssize_t)(nl + 1 - buf);
		}
		if (ok && n > 0 && !copy_out(cop, p, (size_t)n)) {
			close(fd);
			return EXIT_REFUSED;           /* our stdout went away */
		}
	}
	if (n < 0)
		goto broken;
	close(fd);
	if (!have_status) {
		fprintf(stderr, "telemonctl: the telemonitor closed the connection without an "
			"answer\n");
		return EXIT_UNREACHABLE;
	}
	if (!ok) {
		fprintf(stderr, "telemonctl: %s\n", strncmp(first, "error ", 6) ? first : first + 6);
		return EXIT_REFUSED;
	}
	return EXIT_OK;
broken:
	fprintf(stderr, "telemonctl: connection to the telemonitor failed: %s\n",
		errno == EAGAIN ? "no answer in time" : strerror(errno));
	close(fd);
	return EXIT_UNREACHABLE;
}

int request_run(const struct ctl_cmd *c)
{
	struct copy_state co = { .line_start = true };

	return talk(c, &co);
}

int request_capture(const struct ctl_cmd *c, char **out, size_t *len)
{
	struct copy_state co = { .line_start = true, .capturing = true };
	int rc = talk(c, &co);

	if (rc != EXIT_OK) {
		free(co.cap);
		return rc;
	}
	if (!co.cap && !capture(&co, "", 0)) {
		fprintf(stderr, "telemonctl: out of memory\n");
		return EXIT_REFUSED;
	}
	*out = co.cap;
	*len = co.caplen;
	return EXIT_OK;
}
