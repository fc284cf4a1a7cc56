/* Writing and undoing wrapper scripts (see wrap.h). The script only ever
 * contains values we were given, each as one single-quoted word, so no
 * name or path can be interpreted by the shell. Replacement is atomic:
 * the original is hard-linked to PROGRAM.real first, then the script is
 * renamed over PROGRAM, so PROGRAM always exists. */
#include "wrap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool sh_quote(char *out, size_t size, const char *s)
{
	size_t n = strlen(out);

	if (n + 1 >= size)
		return false;
	out[n++] = '\'';
	for (; *s; s++) {
		if (*s == '\'') {
			if (n + 4 >= size)
				return false;
			memcpy(out + n, "'\\''", 4);
			n += 4;
		} else {
			if (n + 1 >= size)
				return false;
			out[n++] = *s;
		}
	}
	if (n + 2 > size)
		return false;
	out[n++] = '\'';
	out[n] = '\0';
	return true;
}

bool is_wrapper(const char *path)
{
	char head[sizeof WRAP_MARKER];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	n = read(fd, head, sizeof head - 1);
	close(fd);
	return n == (ssize_t)sizeof head - 1 && memcmp(head, WRAP_MARKER, sizeof head - 1) == 0;
}

/* Append " -OPT 'VALUE'" when value is set. */
static bool add_opt(char *cmd, size_t size, const char *opt, const char *value)
{
	size_t n = strlen(cmd);

	if (!value)
		return true;
	if ((size_t)snprintf(cmd + n, size - n, " %s ", opt) >= size - n)
		return false;
	return sh_quote(cmd, size, value);
}

/* The script text for wrapping `prog` (whose original is `real`). */
static int script_text(char *out, size_t size, const char *prog, const char *real,
		       const struct wrap_opts *o)
{
	char snarf[4096] = "", realq[4096] = "", progq[4096] = "", cmd[16384] = "";

	if (!sh_quote(snarf, sizeof snarf, o->snarflog) || !sh_quote(realq, sizeof realq, real) ||
	    !sh_quote(progq, sizeof progq, prog))
		return -ENAMETOOLONG;
	strcpy(cmd, snarf);
	strcat(cmd, " ");
	if (!sh_quote(cmd, sizeof cmd, o->name))
		return -ENAMETOOLONG;
	if (o->format && strlen(cmd) + strlen(o->format) + 2 < sizeof cmd) {
		strcat(cmd, " ");
		strcat(cmd, o->format);
	}
	if (!add_opt(cmd, sizeof cmd, "-buffer", o->buffer) ||
	    !add_opt(cmd, sizeof cmd, "-regmachine", o->regmachine) ||
	    !add_opt(cmd, sizeof cmd, "-tls-cert", o->tls_cert) ||
	    !add_opt(cmd, sizeof cmd, "-tls-key", o->tls_key) ||
	    !add_opt(cmd, sizeof cmd, "-tls-ca", o->tls_ca))
		return -ENAMETOOLONG;
	if ((size_t)snprintf(out, size,
			     WRAP_MARKER " runs the program below under snarflog for continuous\n"
			     "# monitoring. Undo with: cmon-wrap -undo %s\n"
			     "# If snarflog is missing, the program still runs, unmonitored.\n"
			     "if [ -x %s ]; then\n"
			     "\texec %s -- %s \"$@\"\n"
			     "fi\n"
			     "exec %s \"$@\"\n",
			     progq, snarf, cmd, realq, realq) >= size)
		return -ENAMETOOLONG;
	return 0;
}

int wrap_program(const char *prog, const struct wrap_opts *o, char *err, size_t errlen)
{
	char real[4096], tmp[4096], text[65536];
	struct stat st;
	int fd, r;
	size_t len;

	if (lstat(prog, &st) < 0) {
		snprintf(err, errlen, "%s: %s", prog, strerror(errno));
		return -errno;
	}
	if (S_ISLNK(st.st_mode)) {
		snprintf(err, errlen, "%s is a symbolic link; wrap the file it points to", prog);
		return -EINVAL;
	}
	if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111)) {
		snprintf(err, errlen, "%s is not an executable file", prog);
		return -EINVAL;
	}
	if (st.st_mode & (S_ISUID | S_ISGID)) {
		snprintf(err, errlen, "%s is setuid/setgid; a wrapper script cannot keep that", prog);
		return -EPERM;
	}
	if (is_wrapper(prog)) {
		snprintf(err, errlen, "%s is already wrapped (undo with cmon-wrap -undo)", prog);
		return -EEXIST;
	}
	if ((size_t)snprintf(real, sizeof real, "%s%s", prog, WRAP_SUFFIX) >= sizeof real ||
	    (size_t)snprintf(tmp, sizeof tmp, "%s.cmon-wrap.tmp", prog) >= sizeof tmp) {
		snprintf(err, errlen, "path too long");
		return -ENAMETOOLONG;
	}
	if (access(real, F_OK) == 0) {
		snprintf(err, errlen, "%s already exists; refusing to overwrite it", real);
		return -EEXIST;
	}
	r = script_text(text, sizeof text, prog, real, o);
	if (r < 0) {
		snprintf(err, errlen, "wrapper script too long");
		return r;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		return -errno;
	}
	len = strlen(text);
	if (write(fd, text, len) != (ssize_t)len || fsync(fd) < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out_unlink;
	}
	/* Same permissions (and, when we may, owner) as the program. */
	if (geteuid() == 0 && fchown(fd, st.st_uid, st.st_gid) < 0) {
		/* keep ours */
	}
	if (fchmod(fd, st.st_mode & 0777) < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out_unlink;
	}
	close(fd);
	fd = -1;
	if (link(prog, real) < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot keep the original as %s: %s", real, strerror(errno));
		goto out_unlink;
	}
	if (rename(tmp, prog) < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot put the wrapper in place: %s", strerror(errno));
		unlink(real);
		goto out_unlink;
	}
	return 0;
out_unlink:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return r;
}

int unwrap_program(const char *prog, char *err, size_t errlen)
{
	char real[4096];
	struct stat st;

	if (!is_wrapper(prog)) {
		snprintf(err, errlen, "%s is not a cmon-wrap wrapper", prog);
		return -EINVAL;
	}
	if ((size_t)snprintf(real, sizeof real, "%s%s", prog, WRAP_SUFFIX) >= sizeof real) {
		snprintf(err, errlen, "path too long");
		return -ENAMETOOLONG;
	}
	if (lstat(real, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s is missing; cannot restore the original", real);
		return -ENOENT;
	}
	if (rename(real, prog) < 0) {
		snprintf(err, errlen, "cannot restore %s: %s", prog, strerror(errno));
		return -errno;
	}
	return 0;
}
