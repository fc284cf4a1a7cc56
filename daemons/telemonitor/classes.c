/* The configured classes: built from the telemonrc file at startup (every
 * spec is checked by running pcheck on it, so a spec error stops the
 * service before it starts half-configured), matched against instances in
 * configuration order (the first matching class is the one used), and
 * changed live by telemonctl: a change is made on a copy of the
 * configuration, checked, saved to STATE/classes.rc (never to the
 * admin's telemonrc), and only then applied and sent to the registry. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmon/log.h"
#include "digest.h"
#include "store.h"
#include "telemonitor.h"

extern char **environ;

static void class_free(struct tm_class *c)
{
	if (!c)
		return;
	free(c->tool);
	free(c->spec);
	free(c->mail);
	free(c->alertmanager);
	free(c->window_text);
	free(c);
}

static char *dup_or_null(const char *s)
{
	return s && *s ? strdup(s) : NULL;
}

/* "*" means the same as "" (any), as the registry treats it. */
static void pattern(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", strcmp(src, "*") ? src : "");
}

/* The class settings of rc class `k` of `rc`; NULL with a message. */
static struct tm_class *class_build(struct tmon *tm, const struct rc_config *rc,
				    const struct rc_class *k, char *err, size_t errlen)
{
	struct tm_class *c = calloc(1, sizeof *c);
	const char *spec = rc_text(rc, k, RC_SPEC), *win = rc_text(rc, k, RC_WINDOW);
	const char *group = rc_text(rc, k, RC_MAILGROUP);
	const char *resolve = rc_text(rc, k, RC_RESOLVE_AFTER);
	char path[PATH_MAX], real[PATH_MAX], why[300];

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pattern(c->prog, sizeof c->prog, rc_text(rc, k, RC_PROG));
	pattern(c->machine, sizeof c->machine, rc_text(rc, k, RC_MACHINE));
	pattern(c->pid, sizeof c->pid, rc_text(rc, k, RC_PID));
	c->tool = dup_or_null(rc_text(rc, k, RC_TOOL));
	c->mail = dup_or_null(rc_text(rc, k, RC_MAIL));
	c->alertmanager = dup_or_null(rc_text(rc, k, RC_ALERTMANAGER));
	c->window_text = strdup(*win ? win : WINDOW_DEFAULT);
	c->block = rc_flag(rc, k, RC_BLOCK);
	c->autostart = rc_flag(rc, k, RC_AUTO);
	c->notify_reports = rc_flag(rc, k, RC_NOTIFY_REPORTS);
	c->allow_unbounded = rc_flag(rc, k, RC_ALLOW_UNBOUNDED);
	c->mailgroup = DIGEST_DEFAULT_PERIOD;
	if (*group)
		window_parse_duration(group, &c->mailgroup);
	c->resolve_after = RC_RESOLVE_AFTER_DEFAULT;
	if (*resolve)
		window_parse_duration(resolve, &c->resolve_after);
	window_spec_parse(c->window_text ? c->window_text : WINDOW_DEFAULT, &c->window, why,
			  sizeof why);
	if (*spec) {
		rc_spec_path(rc, spec, path, sizeof path);
		c->spec = strdup(realpath(path, real) ? real : path);
	}
	if (!c->window_text || (*spec && !c->spec) || (c->tool == NULL && *rc_text(rc, k, RC_TOOL)) ||
	    (c->mail == NULL && *rc_text(rc, k, RC_MAIL)) ||
	    (c->alertmanager == NULL && *rc_text(rc, k, RC_ALERTMANAGER))) {
		class_free(c);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	return c;
}

int classes_check_spec(struct tmon *tm, const char *spec, bool bounded, char *err, size_t errlen)
{
	int pin[2], perr[2], status = 0, r;
	char *argv[] = { tm->pcheck, "-cont", "-s", (char *)spec, "-", NULL, NULL };
	posix_spawn_file_actions_t fa;
	char buf[2048];
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	if (pipe2(pin, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(perr, O_CLOEXEC) < 0) {
		close(pin[0]);
		close(pin[1]);
		return -errno;
	}
	if (bounded) {
		argv[5] = argv[4];
		argv[4] = argv[3];
		argv[3] = argv[2];
		argv[2] = "--bounded";
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pin[0], 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, perr[1], 2);
	r = posix_spawn(&pid, tm->pcheck, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pin[0]);
	close(perr[1]);
	if (r != 0) {
		close(pin[1]);
		close(perr[0]);
		snprintf(err, errlen, "cannot run the checker %s: %s", tm->pcheck, strerror(r));
		return -r;
	}
	/* an empty log: the spec is parsed and type-checked, nothing else */
	if (write(pin[1], "#cmon-ascii 1\n", 14) < 0) {
		/* pcheck may already have failed; its status tells */
	}
	close(pin[1]);
	while (got < sizeof buf - 1 && ((n = read(perr[0], buf + got, sizeof buf - 1 - got)) > 0 ||
					(n < 0 && errno == EINTR)))
		if (n > 0)
			got += (size_t)n;
	buf[got] = '\0';
	close(perr[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) <= 1) {
		/* pass the checker's warnings on (unknowns, several passes) */
		for (char *l = buf, *e; *l; l = e + (*e != '\0')) {
			e = l + strcspn(l, "\n");
			if (e > l && memmem(l, (size_t)(e - l), "warning:", 8))
				cmon_warn("spec %s: %.*s", spec, (int)(e - l), l);
		}
		return 0;
	}
	if (bounded && strstr(buf, "(--bounded)")) {
		/* one line: the refusal, its causes ("\n  CAUSE" each), and how a
		 * class allows it */
		char *w = buf;
		for (const char *r = buf; *r; r++) {
			if (*r != '\n') {
				*w++ = *r;
				continue;
			}
			while (r[1] == ' ')
				r++;
			if (r[1] != '\0' && w > buf && w[-1] != ':')
				*w++ = ';';
			if (r[1] != '\0')
				*w++ = ' ';
		}
		*w = '\0';
		snprintf(err, errlen, "%s; (allow-unbounded TRUE) lets the class run it", buf);
		return -EINVAL;
	}
	buf[strcspn(buf, "\n")] = '\0';
	if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
		snprintf(err, errlen, "%s", buf[0] ? buf : "the specification has errors");
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		snprintf(err, errlen, "cannot run the checker %s", tm->pcheck);
	else
		snprintf(err, errlen, "checking it with %s failed (status 0x%x): %s", tm->pcheck,
			 (unsigned)status, buf);
	return -EINVAL;
}

/* Check a class's spec; the message names the file, line and property. */
static int check_spec(struct tmon *tm, const struct rc_config *rc, const struct rc_class *k,
		      const struct tm_class *c, char *err, size_t errlen)
{
	char why[1800];
	int line = k->p.set[RC_SPEC] ? k->p.line[RC_SPEC] : k->line;

	if (!c->spec || classes_check_spec(tm, c->spec, !c->allow_unbounded, why, sizeof why) == 0)
		return 0;
	if (line && rc->name)
		snprintf(err, errlen, "%s:%d: error: spec: %s", rc->name, line, why);
	else
		snprintf(err, errlen, "spec: %s", why);
	return -EINVAL;
}

int classes_build(struct tmon *tm, const struct rc_config *rc, struct tm_class_list *out,
		  char *err, size_t errlen)
{
	for (size_t i = 0; i < rc->nclasses; i++) {
		const struct rc_class *k = &rc->classes[i];
		struct tm_class *c = class_build(tm, rc, k, err, errlen);
		if (!c || check_spec(tm, rc, k, c, err, errlen) < 0) {
			class_free(c);
			classes_list_free(out);
			return -EINVAL;
		}
		c->index = i;
		TAILQ_INSERT_TAIL(out, c, link);
	}
	return 0;
}

int classes_load(struct tmon *tm, char *err, size_t errlen)
{
	if (classes_build(tm, tm->rc, &tm->classes, err, errlen) < 0)
		return -EINVAL;
	tm->nclasses = tm->rc->nclasses;
	return 0;
}

static bool same_text(const char *a, const char *b)
{
	return !strcmp(a ? a : "", b ? b : "");
}

bool classes_same_key(const struct tm_class *a, const struct tm_class *b)
{
	return !strcmp(a->prog, b->prog) && !strcmp(a->machine, b->machine) &&
	       !strcmp(a->pid, b->pid);
}

bool classes_same(const struct tm_class *a, const struct tm_class *b)
{
	return classes_same_key(a, b) && same_text(a->tool, b->tool) &&
	       same_text(a->spec, b->spec) && same_text(a->mail, b->mail) &&
	       same_text(a->alertmanager, b->alertmanager) &&
	       same_text(a->window_text, b->window_text) && a->mailgroup == b->mailgroup &&
	       a->resolve_after == b->resolve_after &&
	       a->block == b->block && a->autostart == b->autostart &&
	       a->notify_reports == b->notify_reports && a->allow_unbounded == b->allow_unbounded;
}

int classes_record(struct tmon *tm, char *err, size_t errlen)
{
	uint32_t *ids = calloc(tm->nclasses + 1, sizeof *ids);
	struct tm_class *c;
	size_t n = 0;

	if (!ids) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	TAILQ_FOREACH(c, &tm->classes, link) {
		if (store_class_save(tm->store, c) < 0) {
			snprintf(err, errlen, "cannot record the classes in the store");
			free(ids);
			return -EIO;
		}
		ids[n++] = c->id;
	}
	store_classes_keep(tm->store, ids, n);
	free(ids);
	return 0;
}

struct tm_class *classes_find(struct tmon *tm, uint32_t id)
{
	struct tm_class *c;

	if (!id)
		return NULL;
	TAILQ_FOREACH(c, &tm->classes, link)
		if (c->id == id)
			return c;
	return NULL;
}

struct tm_class *classes_match(struct tmon *tm, const char *prog, const char *machine, int64_t pid)
{
	struct tm_class *c;
	char p[24];

	snprintf(p, sizeof p, "%" PRId64, pid);
	TAILQ_FOREACH(c, &tm->classes, link)
		if (cmon_pattern_match(c->prog, prog) && cmon_pattern_match(c->machine, machine) &&
		    cmon_pattern_match(c->pid, p))
			return c;
	return NULL;
}

/* Apply "name=value" pairs to `props`. */
static int apply_pairs(struct rc_props *props, char **pairs, size_t n, char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		char name[64], *eq = strchr(pairs[i], '=');
		size_t len = eq ? (size_t)(eq - pairs[i]) : 0;
		if (!eq || len == 0 || len >= sizeof name) {
			snprintf(err, errlen, "expected PROPERTY=VALUE, not '%.80s'", pairs[i]);
			return -EINVAL;
		}
		memcpy(name, pairs[i], len);
		name[len] = '\0';
		if (rc_props_set(props, name, eq + 1, false, err, errlen) < 0)
			return -EINVAL;
	}
	return 0;
}

/* Make `next` the configuration: save how it differs from the telemonrc
 * file to STATE/classes.rc, then replace tm->rc. */
static int commit_config(struct tmon *tm, struct rc_config *next, char *err, size_t errlen)
{
	if (rc_overlay_save(tm->classes_rc, tm->rc_file, next, err, errlen) < 0)
		return -EIO;
	rc_free(tm->rc);
	tm->rc = next;
	return 0;
}

static void reindex(struct tmon *tm)
{
	struct tm_class *c;
	size_t i = 0;

	TAILQ_FOREACH(c, &tm->classes, link)
		c->index = i++;
}

static void deactivate_removed(struct tmon *tm)
{
	uint32_t ids[RC_CLASSES_MAX];
	struct tm_class *c;
	size_t n = 0;

	TAILQ_FOREACH(c, &tm->classes, link)
		ids[n++] = c->id;
	store_classes_keep(tm->store, ids, n);
}

int classes_add(struct tmon *tm, char **pairs, size_t n, uint32_t *id, char *err, size_t errlen)
{
	struct rc_config *next = rc_clone(tm->rc);
	struct rc_class k = { 0 };
	struct tm_class *c = NULL;
	int idx, r = -EINVAL;

	if (!next) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (apply_pairs(&k.p, pairs, n, err, errlen) < 0)
		goto out;
	idx = rc_add_class(next, &k);
	if (idx < 0) {
		snprintf(err, errlen, idx == -ENOSPC ? "more than %d classes" : "out of memory",
			 RC_CLASSES_MAX);
		goto out;
	}
	if (rc_check_class(next, &next->classes[idx], err, errlen) < 0)
		goto out;
	c = class_build(tm, next, &next->classes[idx], err, errlen);
	if (!c || check_spec(tm, next, &next->classes[idx], c, err, errlen) < 0)
		goto out;
	if ((r = commit_config(tm, next, err, errlen)) < 0)
		goto out;
	next = NULL;
	if (store_class_save(tm->store, c) < 0) {
		snprintf(err, errlen, "saved, but the store failed (see the log)");
		r = -EIO;
		goto out;
	}
	TAILQ_INSERT_TAIL(&tm->classes, c, link);
	tm->nclasses++;
	reindex(tm);
	*id = c->id;
	cmon_notice("class %u added with telemonctl: prog '%s' machine '%s' pid '%s'", c->id,
		    c->prog, c->machine, c->pid);
	c = NULL;
	r = 0;
out:
	rc_props_clear(&k.p);
	rc_free(next);
	class_free(c);
	return r;
}

int classes_set(struct tmon *tm, uint32_t id, char **pairs, size_t n, char *err, size_t errlen)
{
	struct tm_class *old = classes_find(tm, id), *c = NULL;
	struct rc_config *next;
	struct rc_class *k;
	int r = -EINVAL;

	if (!old) {
		snprintf(err, errlen, "no class %u (see telemonctl classes)", id);
		return -ENOENT;
	}
	next = rc_clone(tm->rc);
	if (!next) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	k = &next->classes[old->index];
	if (apply_pairs(&k->p, pairs, n, err, errlen) < 0 ||
	    rc_check_class(next, k, err, errlen) < 0)
		goto out;
	/* the same prog, machine and pid as a later class is also a conflict */
	for (size_t i = old->index + 1; i < next->nclasses; i++)
		if (rc_check_class(next, &next->classes[i], err, errlen) < 0)
			goto out;
	c = class_build(tm, next, k, err, errlen);
	if (!c || check_spec(tm, next, k, c, err, errlen) < 0)
		goto out;
	if ((r = commit_config(tm, next, err, errlen)) < 0)
		goto out;
	next = NULL;
	c->id = old->id;
	c->index = old->index;
	/* the row of that id is replaced, and any other with the new key */
	store_class_save(tm->store, c);
	TAILQ_INSERT_BEFORE(old, c, link);
	TAILQ_REMOVE(&tm->classes, old, link);
	cmon_notice("class %u changed with telemonctl", c->id);
	class_free(old);
	c = NULL;
	r = 0;
out:
	rc_free(next);
	class_free(c);
	return r;
}

int classes_rm(struct tmon *tm, uint32_t id, char *err, size_t errlen)
{
	struct tm_class *c = classes_find(tm, id);
	struct rc_config *next;
	int r;

	if (!c) {
		snprintf(err, errlen, "no class %u (see telemonctl classes)", id);
		return -ENOENT;
	}
	next = rc_clone(tm->rc);
	if (!next) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc_remove_class(next, c->index);
	if ((r = commit_config(tm, next, err, errlen)) < 0) {
		rc_free(next);
		return r;
	}
	TAILQ_REMOVE(&tm->classes, c, link);
	tm->nclasses--;
	reindex(tm);
	deactivate_removed(tm);
	cmon_notice("class %u removed with telemonctl (instances being monitored go on until "
		    "they end or are stopped)", id);
	class_free(c);
	return 0;
}

void classes_list_free(struct tm_class_list *l)
{
	struct tm_class *c;

	while ((c = TAILQ_FIRST(l))) {
		TAILQ_REMOVE(l, c, link);
		class_free(c);
	}
}

void classes_free(struct tmon *tm)
{
	classes_list_free(&tm->classes);
	tm->nclasses = 0;
}
