/* The web dashboard (docs/http.md, Dashboard), served by the HTTP server:
 *
 *   GET /                        index.html with the instances and the
 *                                recent failures rendered in as HTML tables
 *                                (usable without JavaScript)
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

/* The page's Content-Security-Policy: its own scripts, styles and data
 * only (no inline script or style), never framed. */
#define DASH_CSP "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " \
	"object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/* The directory holding index.html: `opt` (-web DIR) when given, else the
 * installed CMON_WEBDIR, else the source tree's CMON_WEB_SRCDIR (running
 * from a build tree); NULL when none holds index.html. Not owned. */
const char *dash_webdir(const char *opt);

/* True if GET `path` is the dashboard's. */
bool dash_handles(const char *path);

/* Answer GET `path` (dash_handles() is true) into `body` and set `*type`
 * to its content type. 0, or -ENOENT (no such file: 404) or another
 * negative errno with `err` saying why. `webdir` may be NULL (no files). */
int dash_serve(struct tmon *tm, const char *webdir, const char *path, struct evbuffer *body,
	       const char **type, char *err, size_t errlen);

#endif
