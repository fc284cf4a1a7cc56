/* emit_sink.c — the log descriptor of the instrumentation library.
 *
 * Opens the log the environment names and writes whole batches of records
 * to it without ever blocking the program or letting it die of SIGPIPE:
 *   - pipes and FIFOs get O_NONBLOCK; a batch is at most PIPE_BUF bytes, so
 *     the kernel takes it whole or not at all (EAGAIN: the caller drops it);
 *   - sockets and other descriptors may take part of a write; the rest is
 *     kept in a carry buffer and finished before anything else is written,
 *     so the stream still consists of whole records.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "emit-internal.h"

/* Parses a descriptor number: decimal digits only, no sign, <= INT_MAX. */
static int parse_fd(const char *s)
{
	long v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (*s - '0');
		if (v > INT_MAX)
			return -EINVAL;
	}
	return (int)v;
}

/* Classifies FD, makes it non-blocking where that matters, fills *S. */
static int sink_adopt(struct emit_sink *s, int fd, bool owned)
{
	struct stat st;
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	if ((fl & O_ACCMODE) == O_RDONLY)
		return -EBADF;
	if (fstat(fd, &st) < 0)
		return -errno;
	s->is_fifo = S_ISFIFO(st.st_mode);
	s->is_sock = S_ISSOCK(st.st_mode);
	s->is_file = S_ISREG(st.st_mode);
	/* Only pipes and sockets: a terminal or file shares its flags with
	 * other processes, and O_NONBLOCK means nothing for regular files. */
	if ((s->is_fifo || s->is_sock) && !(fl & O_NONBLOCK) &&
	    fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	s->fd = fd;
	s->owned = owned;
	s->carry_len = 0;
	return 0;
}

/* Opens the path in $CMON_LOG: a file (appended to, created 0666 & ~umask)
 * or a FIFO, which must already have a reader (else -ENXIO: we never wait). */
static int sink_open_path(struct emit_sink *s, const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
	                    O_NONBLOCK | O_NOCTTY, 0666);
	int r;

	if (fd < 0)
		return -errno;
	r = sink_adopt(s, fd, true);
	if (r < 0)
		close(fd);
	return r;
}

int emit_sink_open(struct emit_sink *s)
{
	/* secure_getenv: a set-uid program does not take orders from its caller. */
	const char *fdstr = secure_getenv("CMON_LOG_FD");
	const char *path = secure_getenv("CMON_LOG");
	int r = EMIT_SINK_NONE;

	s->fd = -1;
	if (fdstr && *fdstr) {
		int fd = parse_fd(fdstr);
		r = fd < 0 ? fd : sink_adopt(s, fd, false);
		if (r == 0)
			return 0;
	}
	if (path && *path) {
		int r2 = sink_open_path(s, path);
		if (r2 == 0 || r == EMIT_SINK_NONE)
			return r2;
	}
	s->fd = -1;
	return r;
}

/* write() with SIGPIPE held off: if the reader is gone, the write fails with
 * EPIPE and the signal the kernel raised is consumed, never delivered. */
static ssize_t write_nosigpipe(int fd, const void *buf, size_t len)
{
	sigset_t pipe_set, old, pending;
	bool was_pending = false;
	ssize_t n;
	int err;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	if (sigismember(&old, SIGPIPE)) {
		/* Already blocked by the program: do not swallow its own one. */
		sigpending(&pending);
		was_pending = sigismember(&pending, SIGPIPE);
	}
	do
		n = write(fd, buf, len);
	while (n < 0 && errno == EINTR);
	err = errno;
	if (n < 0 && err == EPIPE && !was_pending) {
		static const struct timespec zero = { 0, 0 };
		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = err;
	return n;
}

/* One non-blocking write attempt; returns bytes written or -errno. */
static ssize_t raw_write(struct emit_sink *s, const void *buf, size_t len)
{
	ssize_t n;

	if (s->is_fifo)
		n = write_nosigpipe(s->fd, buf, len);
	else if (s->is_sock) {
		do
			n = send(s->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		while (n < 0 && errno == EINTR);
	} else {
		do
			n = write(s->fd, buf, len);
		while (n < 0 && errno == EINTR);
	}
	return n < 0 ? -errno : n;
}

/* Maps a write error to the caller's two cases: drop and retry later
 * (-EAGAIN), or give up on the log (-EPIPE). */
static int classify(ssize_t err)
{
	switch (err) {
	case -EAGAIN:
#if EWOULDBLOCK != EAGAIN
	case -EWOULDBLOCK:
#endif
	case -ENOSPC:
	case -EDQUOT:
	case -EFBIG:
	case -EIO:
	case -ENOBUFS:
	case -ENOMEM:
		return -EAGAIN;
	default:
		return -EPIPE;
	}
}

int emit_sink_drain_carry(struct emit_sink *s)
{
	while (s->carry_len > 0) {
		ssize_t n = raw_write(s, s->carry, s->carry_len);
		if (n < 0)
			return classify(n);
		if (n == 0)
			return -EAGAIN;
		memmove(s->carry, s->carry + n, s->carry_len - (size_t)n);
		s->carry_len -= (size_t)n;
	}
	return 0;
}

int emit_sink_write(struct emit_sink *s, const void *buf, size_t len)
{
	ssize_t n;
	int r;

	if (s->fd < 0)
		return -EPIPE;
	if (!s->is_fifo && (r = emit_sink_drain_carry(s)) < 0)
		return r;
	n = raw_write(s, buf, len);
	if (n < 0)
		return classify(n);
	if ((size_t)n == len)
		return 0;
	if (s->is_fifo) {
		/* Cannot happen for len <= PIPE_BUF; if it did, the stream
		 * would hold a torn record: stop rather than corrupt more. */
		return -EPIPE;
	}
	memcpy(s->carry, (const uint8_t *)buf + n, len - (size_t)n);
	s->carry_len = len - (size_t)n;
	return 0;
}
