/* A point in time a user gives (cmon/when.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmon/when.h"

/* "N UNIT [ago]" from the end of N on: N's length in seconds, or -1. */
static double unit_secs(const char *end)
{
	static const struct {
		const char *name;
		double secs;
	} units[] = {
		{ "s", 1 },	    { "sec", 1 },	  { "secs", 1 },     { "second", 1 },
		{ "seconds", 1 },   { "m", 60 },	  { "min", 60 },     { "mins", 60 },
		{ "minute", 60 },   { "minutes", 60 },	  { "h", 3600 },     { "hour", 3600 },
		{ "hours", 3600 },  { "d", 86400 },	  { "day", 86400 },  { "days", 86400 },
		{ "w", 604800 },    { "week", 604800 },	  { "weeks", 604800 },
	};
	char unit[16];
	size_t n;

	while (*end == ' ')
		end++;
	n = strcspn(end, " ");
	if (n == 0 || n >= sizeof unit)
		return -1;
	memcpy(unit, end, n);
	unit[n] = '\0';
	end += n;
	while (*end == ' ')
		end++;
	if (*end && strcmp(end, "ago"))
		return -1;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (!strcmp(unit, units[i].name))
			return units[i].secs;
	return -1;
}

bool cmon_when_parse(const char *s, double now, double *out)
{
	static const char *const iso[] = {
		"%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%SZ", "%Y-%m-%d %H:%M:%S",
		"%Y-%m-%dT%H:%MZ",    "%Y-%m-%dT%H:%M",	   "%Y-%m-%d %H:%MZ",	 "%Y-%m-%d %H:%M",
		"%Y-%m-%d",
	};
	char *end;
	double v, unit;

	if (!s || !*s)
		return false;
	if (strchr(s, '-') && s[0] >= '0' && s[0] <= '9') {
		for (size_t i = 0; i < sizeof iso / sizeof iso[0]; i++) {
			struct tm tm = { 0 };
			char *e = strptime(s, iso[i], &tm);
			time_t t;
			if (!e || *e)
				continue;
			t = timegm(&tm);
			if (t < 0)
				return false;
			*out = (double)t;
			return true;
		}
		return false;
	}
	if (*s == '@') {
		v = strtod(s + 1, &end);
		if (end == s + 1 || *end || !(v >= 0) || s[1] == ' ')
			return false;
		*out = v;
		return true;
	}
	if (!(*s >= '0' && *s <= '9') && *s != '.')
		return false;       /* (strtod would take "inf", "nan", spaces, a sign) */
	v = strtod(s, &end);
	if (end == s || !(v >= 0) || v > 1e12)
		return false;
	if (!*end) {
		*out = v;           /* Unix seconds */
		return true;
	}
	if ((unit = unit_secs(end)) < 0 || now - v * unit < 0)
		return false;
	*out = now - v * unit;
	return true;
}
