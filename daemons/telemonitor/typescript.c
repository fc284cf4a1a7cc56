/* Typescripts (see typescript.h). Plain appending writes: a regular file
 * takes them at once, so they never hold up the loop for long. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "telemonitor.h"
#include "typescript.h"

void typescript_path(const char *dir, uint64_t id, char *out, size_t size)
{
	snprintf(out, size, "%s/typescripts/%llu", dir, (unsigned long long)id);
}

int typescript_open(struct typescript *ts, const char *dir, uint64_t id)
{
	char sub[PATH_MAX];
	struct stat st;

	ts->fd = -1;
	snprintf(sub, sizeof sub, "%s/typescripts", dir);
	if (mkdir(sub, 0750) < 0 && errno != EEXIST)
		return -errno;
	typescript_path(dir, id, sub, sizeof sub);
	free(ts->path);
	if (!(ts->path = strdup(sub)))
		return -ENOMEM;
	ts->fd = open(ts->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (ts->fd < 0)
		return -errno;
	ts->size = fstat(ts->fd, &st) == 0 ? (size_t)st.st_size : 0;
	return 0;
}

static void rotate(struct typescript *ts)
{
	char old[PATH_MAX + 4];

	snprintf(old, sizeof old, "%s.1", ts->path);
	close(ts->fd);
	rename(ts->path, old);
	ts->fd = open(ts->path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC | O_CLOEXEC, 0640);
	ts->size = 0;
}

void typescript_write(struct typescript *ts, const void *p, size_t n)
{
	const char *c = p;

	if (ts->fd < 0)
		return;
	if (ts->size + n > TM_TYPESCRIPT_MAX) {
		rotate(ts);
		if (ts->fd < 0)
			return;
	}
	while (n > 0) {
		ssize_t w = write(ts->fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;               /* disk full: the typescript is best effort */
		c += w;
		n -= (size_t)w;
		ts->size += (size_t)w;
	}
}

void typescript_note(struct typescript *ts, const char *fmt, ...)
{
	char line[1024], when[32];
	time_t now = time(NULL);
	struct tm tm;
	va_list ap;
	int n;

	gmtime_r(&now, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	n = snprintf(line, sizeof line, "[telemonitor %s] ", when);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if ((size_t)n > sizeof line - 2)
		n = sizeof line - 2;
	line[n++] = '\n';
	typescript_write(ts, line, (size_t)n);
}

void typescript_close(struct typescript *ts)
{
	if (ts->fd >= 0)
		close(ts->fd);
	ts->fd = -1;
	free(ts->path);
	ts->path = NULL;
}
