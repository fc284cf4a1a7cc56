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
    if (where == 0)     /* about the log as a whole */
        fprintf(stderr, "%s: warning: %s\n", logname, msg);
    else
        fprintf(stderr, "%s:%" PRIu64 ": warning: %s\n", logname, where, msg);
}

/* All of standard input as a NUL-terminated heap string (*len bytes), or
 * NULL with errno set. */
static char *read_stdin(size_t *len)
{
    size_t n = 0, cap = 1 << 16;
    char *buf = malloc(cap + 1);
    if (!buf)
        return NULL;
    for (;;) {
        if (n == cap) {
            if (cap >= CLI_MAX_SPEC) {
                free(buf);
                errno = EFBIG;
                return NULL;
            }
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
        }
        ssize_t r = read(0, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            errno = e;
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

bool cli_spec_on_stdin(const char *spec)
{
    return spec && strcmp(spec, "-") == 0;
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
    int rc;
    if (cli_spec_on_stdin(spec)) {
        size_t len = 0;
        char *text = read_stdin(&len);
        rc = text ? pspec_load_text(ps, "<stdin>", text, len) : -errno;
        free(text);
        spec = "<stdin>";
    } else {
        rc = pspec_load_file(ps, spec);
    }
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
