/* Reload (SIGHUP, `systemctl reload`): reread the telemonrc file and
 * STATE/classes.rc and check the result as a start does (every class, every
 * spec through the checker); a configuration that does not pass is not
 * used: the running one stays and the log says why, in one line naming the
 * file and the place. One that passes replaces the classes:
 *
 *   - a class whose prog, machine and pid are unchanged keeps its id, its
 *     registry subscription and its instances' sessions (same settings:
 *     nothing happens; other settings: saved, subscribed again so that the
 *     registry lists its instances anew, and they apply to sessions started
 *     from now on, while running ones keep the settings they started with);
 *   - a new class is saved (an id) and subscribed to;
 *   - a class no longer there is unsubscribed; its instances being
 *     monitored keep their sessions until the instance ends or telemonctl
 *     stops it, so no record is lost or left uncounted; the log counts
 *     them. Its other instances match another class or none.
 *
 * Settings of (defaults ...) read only at start (http, store, smtp, ...)
 * take effect at the next start; the log names those that changed. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cmon/log.h"
#include "store.h"
#include "telemonitor.h"

/* (defaults ...) properties read once at start. */
static const enum rc_prop read_at_start[] = {
	RC_HTTP, RC_HTTP_TOKEN_FILE, RC_STORE, RC_STORE_BACKLOG, RC_MAX_SESSIONS, RC_SMTP, RC_FROM,
};

/* The telemonrc file as it is now (*file) and with STATE/classes.rc
 * merged and checked (*live); 0, or a negative errno with a message. */
static int read_config(struct tmon *tm, struct rc_config **file, struct rc_config **live,
		       char *err, size_t errlen)
{
	struct rc_config *f = NULL, *l = NULL, *ov = NULL;
	int r;

	if (!tm->rc_file->path) {
		snprintf(err, errlen, "no configuration file to reread");
		return -ENOENT;
	}
	r = rc_load(tm->rc_file->path, &f, err, errlen);
	if (r < 0)
		return r;
	l = rc_clone(f);
	if (!l) {
		snprintf(err, errlen, "out of memory");
		r = -ENOMEM;
		goto out_free;
	}
	r = rc_overlay_load(tm->classes_rc, &ov, err, errlen);
	if (r == 0)
		r = rc_overlay_apply(l, ov, err, errlen);
	else if (r == -ENOENT)
		r = 0;
	rc_free(ov);
	if (r < 0)
		goto out_free;
	*file = f;
	*live = l;
	return 0;
out_free:
	rc_free(f);
	rc_free(l);
	return r;
}

/* The class of `list` with the key of `c`, or NULL. */
static struct tm_class *find_key(struct tm_class_list *list, const struct tm_class *c)
{
	struct tm_class *k;

	TAILQ_FOREACH(k, list, link)
		if (classes_same_key(k, c))
			return k;
	return NULL;
}

/* Log the start-only settings whose value changed. */
static void tell_restart_needed(const struct rc_config *was, const struct rc_config *now)
{
	char names[200] = "";
	size_t len = 0;

	for (size_t i = 0; i < sizeof read_at_start / sizeof *read_at_start; i++) {
		enum rc_prop p = read_at_start[i];
		if (strcmp(rc_text(was, NULL, p), rc_text(now, NULL, p)) && len < sizeof names)
			len += (size_t)snprintf(names + len, sizeof names - len, "%s%s",
						len ? ", " : "", rc_prop_name(p));
	}
	if (len)
		cmon_warn("reload: (defaults ...) changed %s, which take%s effect at the next start",
			  names, strchr(names, ',') ? "" : "s");
}

int reload_config(struct tmon *tm)
{
	struct tm_class_list next = TAILQ_HEAD_INITIALIZER(next);
	struct rc_config *file = NULL, *live = NULL;
	/* class ids (static: 16 KB; a reload runs on the loop only) */
	static uint32_t added[RC_CLASSES_MAX], changed[RC_CLASSES_MAX], gone[RC_CLASSES_MAX],
		keep[RC_CLASSES_MAX];
	size_t nadded = 0, nchanged = 0, ngone = 0, nsame = 0, n = 0, still = 0;
	struct tm_class *c, *old;
	struct tm_instance *in;
	char err[2048];

	if (read_config(tm, &file, &live, err, sizeof err) < 0 ||
	    classes_build(tm, live, &next, err, sizeof err) < 0) {
		cmon_err("reload: %s; keeping the running configuration", err);
		rc_free(file);
		rc_free(live);
		return -EINVAL;
	}

	/* what became of each class; the new and changed ones are saved */
	TAILQ_FOREACH(c, &next, link) {
		old = find_key(&tm->classes, c);
		if (old)
			c->id = old->id;
		if (old && classes_same(old, c)) {
			nsame++;
		} else {
			if (store_class_save(tm->store, c) < 0)
				cmon_warn("reload: class '%s' '%s' '%s': the store failed (see the "
					  "log); it is in force all the same", c->prog, c->machine,
					  c->pid);
			if (old)
				changed[nchanged++] = c->id;
			else
				added[nadded++] = c->id;
		}
		keep[n++] = c->id;
	}
	TAILQ_FOREACH(old, &tm->classes, link)
		if (!find_key(&next, old))
			gone[ngone++] = old->id;
	store_classes_keep(tm->store, keep, n);

	/* the new configuration in force */
	tell_restart_needed(tm->rc, live);
	classes_list_free(&tm->classes);
	TAILQ_CONCAT(&tm->classes, &next, link);
	tm->nclasses = n;
	rc_free(tm->rc);
	tm->rc = live;
	rc_free(tm->rc_file);
	tm->rc_file = file;

	/* the registry follows; instances of removed classes find another */
	for (size_t i = 0; i < ngone; i++) {
		reg_unsubscribe(tm, gone[i]);
		TAILQ_FOREACH(in, &tm->instances, link)
			if (in->class_id == gone[i] && in->sess)
				still++;
		instances_class_removed(tm, gone[i]);
	}
	for (size_t i = 0; i < nchanged; i++) {
		reg_unsubscribe(tm, changed[i]);
		reg_subscribe(tm, classes_find(tm, changed[i]));
	}
	for (size_t i = 0; i < nadded; i++)
		reg_subscribe(tm, classes_find(tm, added[i]));
	cmon_notice("reload: %s: %zu classes (%zu added, %zu changed, %zu removed, %zu "
		    "unchanged); %zu instances of removed classes monitored until they end",
		    tm->rc_file->path, n, nadded, nchanged, ngone, nsame, still);
	return 0;
}
