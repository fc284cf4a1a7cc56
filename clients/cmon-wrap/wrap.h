/* cmon-wrap's work: writing, recognising and undoing wrapper scripts. */
#ifndef CMON_WRAP_H
#define CMON_WRAP_H

#include <stdbool.h>
#include <stddef.h>

/* The first two lines of every wrapper; how we recognise one. */
#define WRAP_MARKER "#!/bin/sh\n# cmon-wrap 1:"

/* Suffix of the moved original. */
#define WRAP_SUFFIX ".real"

/* What to bake into a wrapper. NULL strings are left out. */
struct wrap_opts {
	const char *name;        /* PROGNAME announced by snarflog */
	const char *format;      /* "-ascii", "-binary" or NULL (detect) */
	const char *buffer;      /* -buffer value */
	const char *regmachine;  /* -regmachine value */
	const char *snarflog;    /* absolute path of snarflog */
	const char *tls_cert;    /* -tls-cert value */
	const char *tls_key;     /* -tls-key value */
	const char *tls_ca;      /* -tls-ca value */
};

/* Wrap the program at absolute path `prog`: keep it as prog.real and put
 * a wrapper script in its place atomically. 0, or -errno with `err` set. */
int wrap_program(const char *prog, const struct wrap_opts *o, char *err, size_t errlen);

/* Undo wrap_program(): put prog.real back in place of the wrapper. */
int unwrap_program(const char *prog, char *err, size_t errlen);

/* True if the file at `path` is a wrapper written by cmon-wrap. */
bool is_wrapper(const char *path);

/* Append `s` to `out` (size `size`) as one single-quoted sh word; false if
 * it does not fit. */
bool sh_quote(char *out, size_t size, const char *s);

#endif
