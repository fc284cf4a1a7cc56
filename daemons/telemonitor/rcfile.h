/* The telemonitor configuration file (telemonrc(5)): the S-expression
 * format of the original CMon telemonitor plus the properties spec, mail,
 * window, mailgroup, notify-reports, alertmanager, resolve-after, mail-resolved,
 * allow-unbounded, and in
 * (defaults ...) smtp, from,
 * store-backlog, retention and http.
 *
 *   description ::= '(' ('defaults' | 'class') property* ')'
 *   property    ::= '(' prop value ')'
 *   value       ::= text | TRUE | FALSE          text is "double-quoted"
 *                 | NUMBER                       (store-backlog only)
 *
 * (defaults ...) comes first and at most once; ';' starts a comment; the
 * last value of a repeated property wins; a class's unset text property
 * takes the defaults' value or "", an unset boolean the default or TRUE.
 * Errors name the file, the line and the property. Nothing here prints. */
#ifndef TELEMON_RCFILE_H
#define TELEMON_RCFILE_H

#include <stdbool.h>
#include <stddef.h>

/* Every property, in the order a saved file lists them (X-macro:
 * X(enum name, spelling, is boolean, allowed in a class, boolean default)). */
#define RC_PROPS(X)                                             \
	X(RC_PROG, "prog", false, true, false)                  \
	X(RC_MACHINE, "machine", false, true, false)            \
	X(RC_PID, "pid", false, true, false)                    \
	X(RC_TOOL, "tool", false, true, false)                  \
	X(RC_SPEC, "spec", false, true, false)                  \
	X(RC_MAIL, "mail", false, true, false)                  \
	X(RC_WINDOW, "window", false, true, false)              \
	X(RC_MAILGROUP, "mailgroup", false, true, false)        \
	X(RC_BLOCK, "block", true, true, true)                  \
	X(RC_AUTO, "auto", true, true, true)                    \
	X(RC_NOTIFY_REPORTS, "notify-reports", true, true, false) \
	X(RC_ALERTMANAGER, "alertmanager", false, true, false)  \
	X(RC_RESOLVE_AFTER, "resolve-after", false, true, false) \
	X(RC_MAIL_RESOLVED, "mail-resolved", true, true, false) \
	X(RC_ALLOW_UNBOUNDED, "allow-unbounded", true, true, false) \
	X(RC_SMTP, "smtp", false, false, false)                 \
	X(RC_FROM, "from", false, false, false)                 \
	X(RC_STORE_BACKLOG, "store-backlog", false, false, false) \
	X(RC_MAX_SESSIONS, "max-sessions", false, false, false) \
	X(RC_RETENTION, "retention", false, false, false)     \
	X(RC_HTTP, "http", false, false, false)                 \
	X(RC_HTTP_TOKEN_FILE, "http-token-file", false, false, false) \
	X(RC_STORE, "store", false, false, false)

/* A property name. */
enum rc_prop {
#define RC_ENUM(e, s, b, c, d) e,
	RC_PROPS(RC_ENUM)
#undef RC_ENUM
	RC_NPROPS /* number of properties */
};

/* Limits on what a configuration file can make us hold. */
#define RC_FILE_MAX (1u << 20)   /* bytes in a configuration file */
#define RC_TEXT_MAX 4096         /* bytes in one text value */
#define RC_CLASSES_MAX 1000      /* classes in one configuration */
#define RC_MAIL_MAX 32           /* addresses in one mail property */
#define RC_STORE_BACKLOG_MAX 10000000 /* largest store-backlog */
#define RC_MAX_SESSIONS_MAX 2000 /* largest max-sessions (TM_SESSIONS_MAX) */
#define RC_RESOLVE_AFTER_DEFAULT 300.0 /* resolve-after when unset: 5 min */
#define RC_RESOLVE_AFTER_MAX (7.0 * 86400) /* longest resolve-after */
#define RC_RETENTION_MIN 3600.0  /* shortest retention, seconds (1 hour) */
#define RC_RETENTION_MAX (100.0 * 366 * 86400) /* longest retention (100 years) */

/* The properties given in one description (explicitly set ones only). */
struct rc_props {
	bool set[RC_NPROPS];     /* the property was given */
	char *text[RC_NPROPS];   /* text values (owned), NULL for booleans or unset */
	bool flag[RC_NPROPS];    /* boolean values */
	int line[RC_NPROPS];     /* line of the last value given (0 = not from a file) */
};

/* One (class ...) description. */
struct rc_class {
	int line;                /* line of its opening parenthesis (0 = added live) */
	bool removed;            /* a (removed ...) entry of classes.rc: prog, machine, pid only */
	struct rc_props p;       /* its own properties */
};

/* A whole configuration. */
struct rc_config {
	char *path;              /* the file it came from or is saved to (owned, may be NULL) */
	char *name;              /* what messages call it (owned, may be NULL) */
	char *dir;               /* directory relative spec paths are resolved in (owned) */
	bool has_defaults;       /* a (defaults ...) was given */
	int defaults_line;       /* its line */
	struct rc_props defaults; /* its properties */
	struct rc_class *classes; /* the classes, in file order */
	size_t nclasses;         /* how many */
};

/* Spelling of a property ("prog"); NULL for an out-of-range value. */
const char *rc_prop_name(enum rc_prop p);

/* Look up a property by spelling; -1 if unknown. */
int rc_prop_lookup(const char *name);

/* True if `p` takes TRUE/FALSE rather than text. */
bool rc_prop_is_bool(enum rc_prop p);

/* Parse `len` bytes of configuration text named `name` (for messages) and
 * check every value. `dir` resolves relative spec paths (NULL: the current
 * directory). 0 with *out set, or -EINVAL with "NAME:LINE: error: PROP:
 * message" in `err`. */
int rc_parse(const char *text, size_t len, const char *name, const char *dir,
	     struct rc_config **out, char *err, size_t errlen);

/* Read and parse the file at `path`. 0, -ENOENT (missing; `err` says so),
 * or another negative errno with a message in `err`. */
int rc_load(const char *path, struct rc_config **out, char *err, size_t errlen);

/* An empty configuration that will be saved to `path` (may be NULL). */
struct rc_config *rc_new(const char *path);

/* A deep copy of `c`; NULL on ENOMEM. */
struct rc_config *rc_clone(const struct rc_config *c);

/* Free a configuration; accepts NULL. */
void rc_free(struct rc_config *c);

/* Effective text of `p` for class `k` (or the defaults when k is NULL):
 * the class's value, else the defaults', else "". Never NULL. */
const char *rc_text(const struct rc_config *c, const struct rc_class *k, enum rc_prop p);

/* Effective boolean of `p` for class `k`: its value, else the defaults',
 * else the property's default (TRUE for block and auto, FALSE for
 * notify-reports, mail-resolved and allow-unbounded). */
bool rc_flag(const struct rc_config *c, const struct rc_class *k, enum rc_prop p);

/* Set property `name` of `props` from the text `value` (booleans accept
 * TRUE/FALSE, true/false, yes/no, 1/0), checking it as the file parser
 * does; `in_defaults` allows smtp and from. 0 or -EINVAL with a message. */
int rc_props_set(struct rc_props *props, const char *name, const char *value, bool in_defaults,
		 char *err, size_t errlen);

/* Check class `k` of `c` as a whole (tool or spec given, readable spec, no
 * other class with the same prog, machine and pid). 0 or -EINVAL with a
 * message naming the line and property. */
int rc_check_class(const struct rc_config *c, const struct rc_class *k, char *err,
		   size_t errlen);

/* Append a copy of `k` to `c`; returns its index or a negative errno. */
int rc_add_class(struct rc_config *c, const struct rc_class *k);

/* Remove class `i` of `c`. */
void rc_remove_class(struct rc_config *c, size_t i);

/* Deep copy of `src` into `dst` (dst is overwritten); 0 or -ENOMEM. */
int rc_props_copy(struct rc_props *dst, const struct rc_props *src);

/* Free the values of `p` and clear it. */
void rc_props_clear(struct rc_props *p);

/* Resolve a spec path against the configuration's directory into `out`. */
void rc_spec_path(const struct rc_config *c, const char *spec, char *out, size_t size);

/* The configuration in canonical form (heap string, NULL on ENOMEM). */
char *rc_format(const struct rc_config *c);

/* classes.rc, the file in the state directory where the telemonitor keeps
 * the classes changed with telemonctl (the telemonrc file is never
 * written). Same S-expression format, classes only, plus tombstones:
 *
 *   entry ::= '(' 'class' property* ')'     replaces the telemonrc class with
 *                                           the same prog, machine and pid, or adds one
 *           | '(' 'removed' key* ')'        removes that telemonrc class
 *   key   ::= '(' ('prog' | 'machine' | 'pid') text ')'
 */

/* Read and parse classes.rc at `path` (not merged, not checked). 0,
 * -ENOENT (missing), or another negative errno with a message in `err`. */
int rc_overlay_load(const char *path, struct rc_config **out, char *err, size_t errlen);

/* Merge overlay `ov` into `c` in file order (replace, remove, or append),
 * then check every class of `c`. 0 or a negative errno with a message. */
int rc_overlay_apply(struct rc_config *c, const struct rc_config *ov, char *err, size_t errlen);

/* The classes.rc text that turns `base` (the telemonrc file) into `live`:
 * a tombstone for each base class gone, the changed classes, then the
 * added ones. Heap string, NULL on ENOMEM. */
char *rc_overlay_format(const struct rc_config *base, const struct rc_config *live);

/* Write rc_overlay_format() to `path` atomically. 0 or a negative errno
 * with a message. */
int rc_overlay_save(const char *path, const struct rc_config *base, const struct rc_config *live,
		    char *err, size_t errlen);

#endif
