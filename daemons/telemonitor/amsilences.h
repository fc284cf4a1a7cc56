/* Alertmanager's silences, read and cached (docs/alerting.md, "One
 * silence model"): with an `alertmanager` in a class, the silences of
 * that Alertmanager keep the class's failures quiet, as they keep its
 * alerts quiet in Alertmanager.
 *
 * Every AMSIL_POLL_MS the active and pending silences of every
 * Alertmanager the classes name are read (GET URL/api/v2/silences, through
 * alerts_get(): on the loop, never waiting) and replace the cached ones of
 * that Alertmanager. When one cannot be read its last known silences stay
 * in force until they end (logged once per outage). A failure is matched
 * in memory against the labels its alert would carry (alertmanager,
 * assert, prog, machine, pid, class; alerts.h), as Alertmanager matches:
 * every matcher of a silence must hold; `=~` is a regular expression
 * anchored at both ends (POSIX extended here, RE2 there: a pattern POSIX
 * cannot compile never matches, and is logged); `!=`/`!~` negate; a
 * label the alert lacks is the empty string. */
#ifndef TELEMON_AMSILENCES_H
#define TELEMON_AMSILENCES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "telemonitor.h"

#define AMSIL_POLL_MS 5000           /* read each Alertmanager's silences this often */
#define AMSIL_SOURCES_MAX 64         /* Alertmanagers watched */
#define AMSIL_SILENCES_MAX 1000      /* silences kept per Alertmanager */
#define AMSIL_MATCHERS_MAX 64        /* matchers per silence */
#define AMSIL_ID_MAX 64              /* bytes in a silence id (a UUID) */

/* Read the silences now and every AMSIL_POLL_MS. Needs alerts_start(). */
void amsil_start(struct tmon *tm);

/* Stop reading and forget the silences; accepts a tm without them. */
void amsil_stop(struct tmon *tm);

/* The labels a failure's alert carries (alerts.c). */
struct amsil_alert {
	const char *prog;            /* the program */
	const char *machine;         /* its machine */
	int64_t pid;                 /* its pid */
	uint32_t class_id;           /* the class monitoring it */
	const char *assertion;       /* the assertion's label, or NULL: "line N" */
	int line;                    /* ...with N = line */
};

/* True, with the silence's id in `id`, when a silence of Alertmanager
 * `url` (a class's base URL) in force at `now` matches alert `al`. */
bool amsil_silenced(struct tmon *tm, const char *url, const struct amsil_alert *al, double now,
		    char *id, size_t idlen);

/* How many Alertmanager silences are known (in force or pending). */
size_t amsil_count(struct tmon *tm);

/* The Alertmanagers watched (base URLs, as the classes give them), for
 * `telemonctl status --json`: calls `cb` for each. */
void amsil_each_url(struct tmon *tm, void (*cb)(void *arg, const char *url), void *arg);

#endif
