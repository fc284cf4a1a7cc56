/* cli.c — helpers shared by the PSpec command-line tools. */
#include "cli.h"

#include "pspec/pspec.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *cli_log_name(const char *path)
{
    return (!path || strcmp(path, "-") == 0) ? "<stdin>" : path;
}

/* Copy everything from `in` to an unlinked temporary file; return its fd. */
static int spool(const char *prog, int in)
{
    const char *dir = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/pspec-log-XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(tmpl);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot create a temporary file for the log: %s\n", prog, strerror(errno));
        return -1;
    }
    unlink(tmpl);
    char buf[1 << 16];
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "%s: reading the log: %s\n", prog, strerror(errno));
            close(fd);
            return -1;
        }
        if (n == 0)
            break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                fprintf(stderr, "%s: writing a temporary copy of the log: %s\n", prog, strerror(errno));
                close(fd);
                return -1;
            }
            off += w;
        }
    }
    lseek(fd, 0, SEEK_SET);
    return fd;
}

int cli_open_log(const char *prog, const char *path, bool seekable)
{
    int fd = 0;
    if (path && strcmp(path, "-") != 0) {
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
            return -1;
        }
    }
    if (seekable && lseek(fd, 0, SEEK_CUR) < 0) {
        int copy = spool(prog, fd);
        if (fd != 0)
            close(fd);
        return copy;
    }
    return fd;
}

void cli_warn(void *ctx, const char *logname, uint64_t where, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "%s:%" PRIu64 ": warning: %s\n", logname, where, msg);
}

pspec *cli_load_spec(const char *prog, const char *spec, const char *path)
{
    pspec *ps = pspec_new();
    if (!ps) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return NULL;
    }
    if (path)
        pspec_set_search_path(ps, path);
    int rc = pspec_load_file(ps, spec);
    if (rc == 0)
        return ps;
    if (rc == -EINVAL) {
        char *msg = pspec_diags_format(ps);
        fputs(msg, stderr);
        free(msg);
    } else {
        fprintf(stderr, "%s: %s: %s\n", prog, spec, strerror(-rc));
    }
    pspec_free(ps);
    return NULL;
}
