/* Logging to standard error or the journal (see cmon/log.h). */
#include "cmon/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *log_prog = "cmon";
static bool log_debug;
static bool log_journal;   /* stderr is a journald stream: use <N> prefixes */

/* JOURNAL_STREAM is "DEV:INODE" of the stream systemd connected; it only
 * applies if our stderr is still that stream (not redirected since). */
static bool stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2)
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void cmon_log_init(const char *progname, bool debug)
{
	if (progname)
		log_prog = progname;
	log_debug = debug;
	log_journal = stderr_is_journal();
}

bool cmon_log_debugging(void)
{
	return log_debug;
}

void cmon_log(int level, const char *fmt, ...)
{
	char line[1024];
	int saved = errno, n;
	va_list ap;

	if (level >= CMON_LOG_DEBUG && !log_debug)
		return;
	if (log_journal)
		n = snprintf(line, sizeof line, "<%d>", level);
	else
		n = snprintf(line, sizeof line, "%s: ", log_prog);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	va_end(ap);
	/* One write per line so concurrent writers do not interleave mid-line. */
	n = (int)strlen(line);
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* nowhere left to report it */
	}
	errno = saved;
}
