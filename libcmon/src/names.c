/* Name and pattern validation (see cmon/names.h). */
#include "cmon/names.h"

#include <fnmatch.h>
#include <string.h>

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '+' || c == '-';
}

static bool alnum_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool cmon_name_valid(const char *s)
{
	size_t n;

	if (!s)
		return false;
	n = strlen(s);
	if (n == 0 || n > CMON_NAME_MAX || !alnum_char(s[0]) || strstr(s, ".."))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!name_char(s[i]))
			return false;
	return true;
}

bool cmon_pattern_valid(const char *s)
{
	size_t n;

	if (!s)
		return true;
	n = strlen(s);
	if (n > CMON_NAME_MAX || strstr(s, ".."))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!name_char(s[i]) && s[i] != '*' && s[i] != '?')
			return false;
	return true;
}

bool cmon_pid_pattern_valid(const char *s)
{
	size_t n;

	if (!s)
		return true;
	n = strlen(s);
	if (n > 20)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(s[i] >= '0' && s[i] <= '9') && s[i] != '*' && s[i] != '?')
			return false;
	return true;
}

bool cmon_pattern_is_literal(const char *pattern)
{
	return !pattern || !strpbrk(pattern, "*?");
}

bool cmon_pattern_match(const char *pattern, const char *s)
{
	if (!pattern || !*pattern)
		return true;
	if (cmon_pattern_is_literal(pattern))
		return strcmp(pattern, s) == 0;
	/* Validated patterns hold no '[' or '\\', so fnmatch sees only * and ?. */
	return fnmatch(pattern, s, FNM_NOESCAPE) == 0;
}

bool cmon_name_sanitize(const char *s, char *out, size_t size)
{
	size_t n = 0;

	if (size < CMON_NAME_MAX + 1)
		return false;
	for (; s && *s && n < CMON_NAME_MAX; s++) {
		char c = name_char(*s) ? *s : '-';
		if (n == 0 && !alnum_char(c))
			continue;
		if (c == '.' && n > 0 && out[n - 1] == '.')
			continue;
		out[n++] = c;
	}
	out[n] = '\0';
	if (!cmon_name_valid(out)) {
		strcpy(out, "unknown");
		return false;
	}
	return true;
}
