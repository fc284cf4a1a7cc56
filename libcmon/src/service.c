/* systemd integration (see cmon/service.h). */
#include "cmon/service.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include <systemd/sd-daemon.h>

void cmon_service_ready(const char *status)
{
	sd_notifyf(0, "READY=1\nSTATUS=%s", status ? status : "running");
}

void cmon_service_status(const char *fmt, ...)
{
	char text[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	sd_notifyf(0, "STATUS=%s", text);
}

void cmon_service_stopping(void)
{
	sd_notify(0, "STOPPING=1");
}

static void watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
	sd_notify(0, "WATCHDOG=1");
}

struct event *cmon_service_watchdog(struct event_base *base)
{
	uint64_t usec = 0;
	struct event *ev;
	struct timeval tv;

	if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
		return NULL;
	usec /= 2;
	tv.tv_sec = (time_t)(usec / 1000000);
	tv.tv_usec = (suseconds_t)(usec % 1000000);
	ev = event_new(base, -1, EV_PERSIST, watchdog_cb, NULL);
	if (!ev)
		return NULL;
	event_add(ev, &tv);
	sd_notify(0, "WATCHDOG=1");
	return ev;
}

int cmon_service_listen_fds(int *fds, size_t max)
{
	int n = sd_listen_fds(1);

	if (n <= 0)
		return n;
	if ((size_t)n > max)
		n = (int)max;
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;
		int fl = fcntl(fd, F_GETFL);
		if (fl >= 0)
			fcntl(fd, F_SETFL, fl | O_NONBLOCK);
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		fds[i] = fd;
	}
	return n;
}
