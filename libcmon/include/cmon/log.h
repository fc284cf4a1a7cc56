/* Logging for daemons and clients: one line per message on standard error,
 * with a syslog level prefix ("<3>") when standard error is the systemd
 * journal, else "PROGNAME: ". Debug lines only with -debug. */
#ifndef CMON_LOG_H
#define CMON_LOG_H

#include <stdbool.h>

/* Severity levels; the values are syslog's, as journald expects. */
enum cmon_log_level {
	CMON_LOG_ERR = 3,      /* something failed; the program may go on */
	CMON_LOG_WARNING = 4,  /* a peer or input misbehaved */
	CMON_LOG_NOTICE = 5,   /* normal but worth noting (start, stop) */
	CMON_LOG_INFO = 6,     /* routine events */
	CMON_LOG_DEBUG = 7,    /* shown only with -debug */
};

/* Set the program name used as prefix and whether debug lines are shown. */
void cmon_log_init(const char *progname, bool debug);

/* True when -debug was given; lets callers skip building debug strings. */
bool cmon_log_debugging(void);

/* Write one formatted line at `level` (no trailing newline needed). */
void cmon_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define cmon_err(...) cmon_log(CMON_LOG_ERR, __VA_ARGS__)
#define cmon_warn(...) cmon_log(CMON_LOG_WARNING, __VA_ARGS__)
#define cmon_notice(...) cmon_log(CMON_LOG_NOTICE, __VA_ARGS__)
#define cmon_info(...) cmon_log(CMON_LOG_INFO, __VA_ARGS__)
#define cmon_debug(...) \
	do { if (cmon_log_debugging()) cmon_log(CMON_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
