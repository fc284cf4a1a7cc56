/* A point in time a user gives (telemonctl's --since and --until, the HTTP
 * API's and the dashboard's since and until), one parser for all of them
 * so that each takes the same forms, as DESIGN.md asks of the API ("same
 * meaning and limits as telemonctl failures"):
 *   - a date or time in UTC: 2024-03-01, 2024-03-01T12:00, 2024-03-01 12:00,
 *     2024-03-01T12:00:05, 2024-03-01 12:00:05, each also ending in Z where
 *     a time is given;
 *   - Unix seconds, 1700000000 or @1700000000 (may be fractional);
 *   - a time ago, N UNIT [ago]: "10 min", "2 hours", "1 day ago", "90s"
 *     (units s sec secs second seconds, m min mins minute minutes, h hour
 *     hours, d day days, w week weeks). */
#ifndef CMON_WHEN_H
#define CMON_WHEN_H

#include <stdbool.h>

/* `s` as Unix seconds into *out, a time ago counted back from `now`;
 * false if it is none of the forms above (or before 1970). */
bool cmon_when_parse(const char *s, double now, double *out);

#endif
