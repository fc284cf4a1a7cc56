/* systemd integration for daemons: readiness and status notification,
 * the watchdog, socket activation. Every function is a no-op when the
 * program does not run under systemd. */
#ifndef CMON_SERVICE_H
#define CMON_SERVICE_H

#include <stddef.h>

#include <event2/event.h>

/* Tell systemd we are ready (Type=notify), with a status line. */
void cmon_service_ready(const char *status);

/* Update the status line systemctl shows. */
void cmon_service_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Tell systemd we are shutting down. */
void cmon_service_stopping(void);

/* If WATCHDOG_USEC is set, send WATCHDOG=1 from `base` at half that period
 * (so a stuck loop gets the daemon restarted). Returns the timer event or
 * NULL (no watchdog or error); free it with event_free before the base. */
struct event *cmon_service_watchdog(struct event_base *base);

/* Listening sockets passed by systemd socket activation: stores up to
 * `max` fds (made non-blocking and close-on-exec) and returns how many
 * (0 when not socket-activated), or a negative errno. */
int cmon_service_listen_fds(int *fds, size_t max);

#endif
