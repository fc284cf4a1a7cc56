/* Validation of names and patterns received from users or the network
 * (DESIGN.md §6). A program or machine name is a short word of
 * [A-Za-z0-9._+-], starting with a letter or digit, never containing "..";
 * it can therefore never be a path, an option or a shell metacharacter. */
#ifndef CMON_NAMES_H
#define CMON_NAMES_H

#include <stdbool.h>
#include <stddef.h>

/* Longest program or machine name or pattern, in bytes. */
#define CMON_NAME_MAX 64

/* True if `s` is a valid program or machine name. */
bool cmon_name_valid(const char *s);

/* True if `s` is a valid class pattern for program or machine names:
 * name characters plus '*' and '?'; empty means "any". */
bool cmon_pattern_valid(const char *s);

/* True if `s` is a valid pid pattern: digits, '*' and '?'; empty means "any". */
bool cmon_pid_pattern_valid(const char *s);

/* True if `s` matches `pattern` ('*' any run, '?' one character). An empty
 * or NULL pattern matches everything. Both must have been validated. */
bool cmon_pattern_match(const char *pattern, const char *s);

/* True if `pattern` contains no wildcard (so it matches by equality). */
bool cmon_pattern_is_literal(const char *pattern);

/* Copy into `out` (size >= CMON_NAME_MAX + 1) a valid name derived from
 * `s`: invalid characters become '-', the result is cut to the maximum
 * length; returns false (and leaves "unknown") if nothing usable remains. */
bool cmon_name_sanitize(const char *s, char *out, size_t size);

#endif
