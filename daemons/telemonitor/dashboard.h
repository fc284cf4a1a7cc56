/* The web dashboard (docs/http.md, Dashboard), served by the HTTP server:
 *
 *   GET /                        index.html with the instances, the recent
 *                                failures and, apart, the reports rendered in
 *                                as HTML tables (usable without JavaScript);
 *                                ?prog=&assert=&since=&until= filter them
 *   GET /instances/ID            an instance: its counts, state, version,
 *                                verdicts, failures and reports
 *   GET /failures/ID             a failure: metrics in units, its witness,
 *                                its log window with the failing lines marked
 *   GET /api/v1/failures/series  failures per assertion and minute (the chart)
 *   GET /api/v1/durations/series interval-duration p50/p90/p99 per minute
 *   GET /static/dashboard.js     the page's script: charts of the daily
 *   GET /static/dashboard.css    report statistics (/api/v1/stats), refresh
 *   GET /static/chart.js         Debian's libjs-chart.js, from its installed path
 *
 * The tables come from the JSON that answers /api/v1/instances and
 * /api/v1/failures (commands_run()), so the page and the API cannot drift.
 * Static files are a fixed list (no path from the URL reaches the file
 * system), with fixed content types and a size bound. */
#ifndef TELEMON_DASHBOARD_H
#define TELEMON_DASHBOARD_H

#include <stdbool.h>
#include <stddef.h>

#include "telemonitor.h"

/* Limits. */
#define DASH_FILE_MAX (4u << 20)        /* bytes of a file served (Chart.js is ~200 KiB) */
#define DASH_INSTANCES 200              /* instances on the page, the latest */
#define DASH_FAILURES 50                /* failures on the page, the newest */
#define DASH_PROGRAMS 20                /* programs whose versions are listed */
#define DASH_PAGE_ROWS 200              /* failures (and reports) on an instance's page */
#define DASH_SERIES_BUCKETS 10080       /* steps in a series (7 days of minutes) */
#define DASH_SERIES_ROWS 100000         /* rows a series reads from the store */

/* The page's Content-Security-Policy: its own scripts, styles and data
 * only (no inline script or style), forms sent only to itself (the
 * filters), never framed. */
#define DASH_CSP "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " \
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

/* The directory holding index.html: `opt` (-web DIR) when given, else the
 * installed CMON_WEBDIR, else the source tree's CMON_WEB_SRCDIR (running
 * from a build tree); NULL when none holds index.html. Not owned. */
const char *dash_webdir(const char *opt);

/* True if GET `path` is the dashboard's. */
bool dash_handles(const char *path);

/* Answer GET `path` with query string `query` (NULL: none; dash_handles()
 * is true) into `body` and set `*type` to its content type. 0, or -ENOENT
 * (no such file, instance or failure: 404), -EINVAL (a bad parameter:
 * 400) or another negative errno with `err` saying why. `webdir` may be
 * NULL (no files). */
int dash_serve(struct tmon *tm, const char *webdir, const char *path, const char *query,
	       struct evbuffer *body, const char **type, char *err, size_t errlen);

#endif
