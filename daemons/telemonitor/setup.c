/* Where things are: the configuration file (-rc, $TELEMONRC,
 * ~/.telemonrc) and the classes changed live (STATE/classes.rc), the state
 * directory (-state, $TELEMON_STATE, $STATE_DIRECTORY, ~/.telemonitor) and
 * the checker (-pcheck, next to this program, in the build tree, on $PATH).
 * Messages go to standard error: this runs before the service starts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmon/log.h"
#include "telemonitor.h"

/* mkdir -p with mode 0750. */
static int make_dirs(const char *path)
{
	char buf[PATH_MAX];

	snprintf(buf, sizeof buf, "%s", path);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			if (mkdir(buf, 0750) < 0 && errno != EEXIST)
				return -errno;
			*p = '/';
		}
	if (mkdir(buf, 0750) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Hold an exclusive lock on DIR/telemonitor.lock for the life of the
 * process (the kernel drops it when we die, even by SIGKILL), with our pid
 * in it: a second telemonitor on the same state directory would share the
 * database and take over the control socket. */
static int lock_state_dir(struct tmon *tm)
{
	char path[PATH_MAX + 32], pid[32] = "";
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "%s/telemonitor.lock", tm->state_dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0) {
		fprintf(stderr, "telemonitor: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		n = read(fd, pid, sizeof pid - 1);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		if (e == EWOULDBLOCK)
			fprintf(stderr, "telemonitor: another telemonitor%s%s%s is running with "
				"state directory %s\n", *pid ? " (pid " : "", pid, *pid ? ")" : "",
				tm->state_dir);
		else
			fprintf(stderr, "telemonitor: %s: %s\n", path, strerror(e));
		close(fd);
		return -1;
	}
	n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n)
		cmon_warn("%s: cannot write our pid: %s", path, strerror(errno));
	tm->lock_fd = fd;
	return 0;
}

/* The state directory asked for: -state, $TELEMON_STATE,
 * $STATE_DIRECTORY, ~/.telemonitor (`buf` holds the last). */
static const char *state_dir_wanted(const struct tmon *tm, char *buf, size_t size)
{
	const char *d = tm->opt.state, *home = getenv("HOME");

	if (!d || !*d)
		d = getenv("TELEMON_STATE");
	if (!d || !*d) {
		d = getenv("STATE_DIRECTORY");        /* systemd StateDirectory= */
		if (d && strchr(d, ':'))
			d = NULL;
	}
	if (!d || !*d) {
		snprintf(buf, size, "%s/.telemonitor", home && *home ? home : ".");
		d = buf;
	}
	return d;
}

int setup_state_dir(struct tmon *tm)
{
	char buf[PATH_MAX];
	const char *d = state_dir_wanted(tm, buf, sizeof buf);
	int r;

	r = make_dirs(d);
	if (r < 0 || !realpath(d, tm->state_dir)) {
		fprintf(stderr, "telemonitor: state directory %s: %s\n", d,
			strerror(r < 0 ? -r : errno));
		return -1;
	}
	snprintf(tm->ctl_hint, sizeof tm->ctl_hint, "telemonctl -state %s", tm->state_dir);
	snprintf(tm->classes_rc, sizeof tm->classes_rc, "%s/classes.rc", tm->state_dir);
	return lock_state_dir(tm);
}

/* STATE/classes.rc, if there is one, merged into tm->rc. */
static int load_classes_rc(struct tmon *tm)
{
	char buf[PATH_MAX], dir[PATH_MAX], err[1200];
	const char *d = state_dir_wanted(tm, buf, sizeof buf);
	struct rc_config *ov = NULL;
	int r;

	snprintf(tm->classes_rc, sizeof tm->classes_rc, "%s/classes.rc",
		 realpath(d, dir) ? dir : d);
	r = rc_overlay_load(tm->classes_rc, &ov, err, sizeof err);
	if (r == -ENOENT)
		return 0;
	if (r == 0)
		r = rc_overlay_apply(tm->rc, ov, err, sizeof err);
	rc_free(ov);
	if (r < 0) {
		fprintf(stderr, "telemonitor: %s\n", err);
		return -1;
	}
	return 0;
}

/* -rc, $TELEMONRC, ~/.telemonrc; only the last may be missing. The file is
 * kept as read (tm->rc_file); tm->rc is it plus STATE/classes.rc. */
int setup_config(struct tmon *tm)
{
	const char *path = tm->opt.rc, *home = getenv("HOME");
	bool named = true;
	char buf[PATH_MAX], abs_path[PATH_MAX], err[1200];
	int r;

	if (!path || !*path)
		path = getenv("TELEMONRC");
	if (!path || !*path) {
		snprintf(buf, sizeof buf, "%s/.telemonrc", home && *home ? home : ".");
		path = buf;
		named = false;
	}
	if (realpath(path, abs_path))
		path = abs_path;
	r = rc_load(path, &tm->rc_file, err, sizeof err);
	if (r == -ENOENT && !named) {
		tm->rc_file = rc_new(path);
		if (!tm->rc_file)
			return -1;
		cmon_notice("no configuration at %s: starting without it (classes added with "
			    "telemonctl are kept in the state directory)", path);
	} else if (r < 0) {
		fprintf(stderr, "telemonitor: %s\n", err);
		return -1;
	}
	tm->rc = rc_clone(tm->rc_file);
	if (!tm->rc || load_classes_rc(tm) < 0) {
		rc_free(tm->rc);
		rc_free(tm->rc_file);
		tm->rc = tm->rc_file = NULL;
		return -1;
	}
	return 0;
}

static bool executable(const char *path)
{
	return access(path, X_OK) == 0;
}

void setup_pcheck(struct tmon *tm)
{
	char self[PATH_MAX], *slash, cand[PATH_MAX + 64];
	const char *path = getenv("PATH");
	ssize_t n;

	if (tm->opt.pcheck) {
		if (!realpath(tm->opt.pcheck, tm->pcheck))
			snprintf(tm->pcheck, sizeof tm->pcheck, "%s", tm->opt.pcheck);
		return;
	}
	n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			snprintf(cand, sizeof cand, "%s/pcheck", self);
			if (executable(cand) && realpath(cand, tm->pcheck))
				return;
			snprintf(cand, sizeof cand, "%s/../../clients/pcheck/pcheck", self);
			if (executable(cand) && realpath(cand, tm->pcheck))
				return;
		}
	}
	while (path && *path) {
		size_t len = strcspn(path, ":");
		snprintf(cand, sizeof cand, "%.*s/pcheck", (int)len, path);
		if (len && executable(cand) && realpath(cand, tm->pcheck))
			return;
		path += len + (path[len] == ':');
	}
	snprintf(tm->pcheck, sizeof tm->pcheck, "pcheck");
}
