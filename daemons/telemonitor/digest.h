/* Grouping failure notices into mails. For each (instance, assertion), the
 * first failure is mailed at once; later ones within the grouping period
 * are collected and mailed together as one digest when the period ends,
 * and a new period starts, until a period passes with no failure. A pair
 * that was mailed and then resolves (notify.c decides when) may get a
 * "resolved" mail (digest_resolved_mail). Pure
 * logic: the caller supplies the time, sends what comes out, and keeps
 * what waits for a digest (digest_due_at) so that digest_restore() can
 * put it back after a restart. */
#ifndef TELEMON_DIGEST_H
#define TELEMON_DIGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits. */
#define DIGEST_GROUPS_MAX 10000   /* (instance, assertion) pairs being grouped */
#define DIGEST_LIST_MAX 100       /* failures listed in one digest; the rest are counted */

/* Default grouping period in seconds. */
#define DIGEST_DEFAULT_PERIOD 300.0

/* One failure to notify about. Strings are copied. */
struct digest_item {
	uint64_t instance_id;     /* the instance it belongs to */
	const char *prog;         /* program name */
	const char *machine;      /* machine name */
	int64_t pid;              /* process id */
	const char *spec;         /* spec file (may be NULL) */
	const char *assertion;    /* assertion label, or NULL for an unlabelled one */
	int line;                 /* its line in the spec */
	uint64_t failure_id;      /* the failure's id in the store */
	double time;              /* when it was reported (Unix seconds) */
	const char *what;         /* e.g. "interval Read #12" (may be NULL) */
	int64_t start_ts;         /* interval start, log ticks */
	int64_t end_ts;           /* interval end, log ticks */
	const char *metrics;      /* metrics as text (may be NULL) */
	const char *to;           /* recipients, comma or space separated */
	const char *ctl;          /* command prefix for the hint, e.g. "telemonctl -state /x" */
	double period;            /* grouping period of the class, seconds (0: no grouping) */
};

/* A mail to send. Owned by the receiver: free with digest_mail_clear(). */
struct digest_mail {
	char *to;                 /* recipients as given */
	char *subject;            /* one line, no line breaks */
	char *body;               /* text, '\n' line ends */
	size_t count;             /* failures it reports */
	uint64_t instance_id;     /* a digest: its group's instance (0: a prompt mail) */
	char *assertion;          /* a digest: its group's label ("" if unlabelled) */
	int line;                 /* a digest: its group's line in the spec */
};

struct digest;

/* A new, empty grouping state; NULL on ENOMEM. */
struct digest *digest_new(void);

/* Free it and everything pending; accepts NULL. */
void digest_free(struct digest *d);

/* Note failure `it` at time `now`. Returns 1 with *out filled when it must
 * be mailed now (first of its group), 0 when it was added to a digest,
 * -ENOSPC when too many groups exist (it is dropped), -ENOMEM. */
int digest_add(struct digest *d, const struct digest_item *it, double now,
	       struct digest_mail *out);

/* When the digest that `it` joined (digest_add() returned 0) is due:
 * the end of its group's period. 0 if its group is unknown. */
double digest_due_at(const struct digest *d, const struct digest_item *it);

/* Put back `it`, which was waiting for the digest of its group due at
 * `due` when the service stopped: it joins that digest (creating the
 * group, with that period end, if needed); never a prompt mail. 0,
 * -ENOSPC when too many groups exist (it is dropped), -ENOMEM. */
int digest_restore(struct digest *d, const struct digest_item *it, double due);

/* Digests whose period has ended by `now`: up to `max` into `out`;
 * returns how many. Groups with nothing pending are forgotten. */
size_t digest_due(struct digest *d, double now, struct digest_mail *out, size_t max);

/* When digest_due() next has something to do (0: never). */
double digest_next_deadline(const struct digest *d);

/* Failures of the group of `it` waiting for its digest (0: none, or no
 * such group). */
size_t digest_waiting(const struct digest *d, const struct digest_item *it);

/* An (instance, assertion) that was mailed as failing and is resolved. */
struct digest_resolved {
	const char *prog;         /* program name */
	const char *machine;      /* machine name */
	int64_t pid;              /* process id */
	const char *spec;         /* spec file (may be NULL) */
	const char *assertion;    /* assertion label, or NULL for an unlabelled one */
	int line;                 /* its line in the spec */
	size_t failures;          /* failures mailed since it began failing */
	double first, last;       /* the first and the last of them (Unix seconds) */
	double resolve_after;     /* the quiet time that resolved it (seconds) */
	bool ended;               /* resolved because the instance ended, not by quiet */
	double when;              /* when it resolved */
	const char *to;           /* recipients */
	const char *ctl;          /* command prefix for the hint */
};

/* The "resolved" mail of `r` into *out (subject "... resolved"). 0 or
 * -ENOMEM (*out cleared). */
int digest_resolved_mail(const struct digest_resolved *r, struct digest_mail *out);

/* Number of groups alive (for status output and tests). */
size_t digest_groups(const struct digest *d);

/* Free the strings of a mail and clear it. */
void digest_mail_clear(struct digest_mail *m);

#endif
