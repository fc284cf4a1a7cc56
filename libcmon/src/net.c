/* Addresses and sockets (see cmon/net.h). */
#include "cmon/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static bool host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '-' || c == '_' || c == ':' || c == '%';
}

static int parse_port(const char *s, uint16_t *port)
{
	char *end;
	long v;

	if (!*s || strlen(s) > 5)
		return -EINVAL;
	for (const char *p = s; *p; p++)
		if (*p < '0' || *p > '9')
			return -EINVAL;
	v = strtol(s, &end, 10);
	if (*end || v < 0 || v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

int cmon_addr_parse(const char *text, uint16_t default_port, struct cmon_addr *out)
{
	struct cmon_addr a;
	const char *host, *port = NULL;
	size_t hostlen;

	if (!text)
		return -EINVAL;
	memset(&a, 0, sizeof a);
	if (strncmp(text, "unix:", 5) == 0) {
		size_t n = strlen(text + 5);
		if (n == 0 || n >= sizeof a.path)
			return -EINVAL;
		a.kind = CMON_ADDR_UNIX;
		memcpy(a.path, text + 5, n + 1);
		*out = a;
		return 0;
	}
	a.kind = CMON_ADDR_TCP;
	a.port = default_port;
	if (text[0] == '[') {                      /* [v6]:port or [v6] */
		const char *close = strchr(text, ']');
		if (!close)
			return -EINVAL;
		host = text + 1;
		hostlen = (size_t)(close - host);
		if (close[1] == ':')
			port = close + 2;
		else if (close[1] != '\0')
			return -EINVAL;
	} else {
		const char *colon = strrchr(text, ':');
		if (colon && strchr(text, ':') != colon) {
			colon = NULL;                      /* bare IPv6 literal, no port */
		}
		host = text;
		hostlen = colon ? (size_t)(colon - text) : strlen(text);
		if (colon)
			port = colon + 1;
	}
	if (hostlen > CMON_HOST_MAX)
		return -EINVAL;
	if (hostlen == 1 && host[0] == '*')
		hostlen = 0;                              /* "*:port" = every interface */
	for (size_t i = 0; i < hostlen; i++)
		if (!host_char(host[i]))
			return -EINVAL;
	if (hostlen > 0 && host[0] == '-')
		return -EINVAL;
	memcpy(a.host, host, hostlen);
	a.host[hostlen] = '\0';
	if (port && parse_port(port, &a.port) < 0)
		return -EINVAL;
	*out = a;
	return 0;
}

int cmon_addr_list_parse(const char *text, uint16_t default_port, struct cmon_addr_item *out,
			 size_t max, size_t *n, char *err, size_t errlen)
{
	const char *p = text ? text : "";

	*n = 0;
	for (;;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		while (len && (*p == ' ' || *p == '\t'))
			p++, len--;
		while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		if (*n == max) {
			snprintf(err, errlen, "more than %zu addresses in '%.200s'", max, text);
			return -E2BIG;
		}
		if (len == 0 || len >= sizeof out[*n].text) {
			snprintf(err, errlen, "bad address '%.*s'", (int)(len < 200 ? len : 200), p);
			return -EINVAL;
		}
		memcpy(out[*n].text, p, len);
		out[*n].text[len] = '\0';
		if (cmon_addr_parse(out[*n].text, default_port, &out[*n].addr) < 0) {
			snprintf(err, errlen, "bad address '%.200s'", out[*n].text);
			return -EINVAL;
		}
		(*n)++;
		if (!end)
			return 0;
		p = end + 1;
	}
}

const char *cmon_regmachine(const char *flag, char *err, size_t errlen)
{
	struct cmon_addr_item items[CMON_REGISTRIES_MAX];
	const char *v = flag ? flag : getenv("TELEMONREG_MACHINE");
	char why[300];
	size_t n;

	if (!flag && (!v || !*v))
		return CMON_REGISTRY_HOST;
	if (cmon_addr_list_parse(v, CMON_REGISTRY_PORT, items, CMON_REGISTRIES_MAX, &n, why,
				 sizeof why) < 0) {
		if (flag)
			snprintf(err, errlen, "bad value '%.200s' for -regmachine: %s", v, why);
		else
			snprintf(err, errlen, "bad TELEMONREG_MACHINE '%.200s': %s", v, why);
		return NULL;
	}
	return v;
}

char *cmon_addr_format(const struct cmon_addr *a, char *buf, size_t size)
{
	if (a->kind == CMON_ADDR_UNIX)
		snprintf(buf, size, "unix:%s", a->path);
	else if (strchr(a->host, ':'))
		snprintf(buf, size, "[%s]:%u", a->host, a->port);
	else
		snprintf(buf, size, "%s:%u", a->host[0] ? a->host : "*", a->port);
	return buf;
}

bool cmon_addr_is_local(const struct cmon_addr *a)
{
	if (a->kind == CMON_ADDR_UNIX)
		return true;
	return strcmp(a->host, "localhost") == 0 || strncmp(a->host, "127.", 4) == 0 ||
	       strcmp(a->host, "::1") == 0;
}

/* Bind and listen one resolved address; returns the fd or -errno. */
static int listen_one(const struct sockaddr *sa, socklen_t len, int backlog)
{
	int fd, one = 1, e;

	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (sa->sa_family != AF_UNIX)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (sa->sa_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	if (bind(fd, sa, len) < 0 || listen(fd, backlog) < 0) {
		e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

int cmon_listen(const struct cmon_addr *a, int backlog, int *fds, size_t max, size_t *n,
		char *err, size_t errlen)
{
	char portstr[8], abuf[CMON_ADDRSTR_MAX];
	struct addrinfo hints, *res = NULL, *ai;
	uint16_t chosen = a->port;
	size_t count = 0;
	int r, fd, last = -EADDRNOTAVAIL;

	if (a->kind == CMON_ADDR_UNIX) {
		struct sockaddr_un un = { .sun_family = AF_UNIX };
		struct stat st;
		memcpy(un.sun_path, a->path, strlen(a->path) + 1);
		/* Replace a stale socket left by a previous run, never a file. */
		if (lstat(a->path, &st) == 0 && S_ISSOCK(st.st_mode))
			unlink(a->path);
		fd = listen_one((struct sockaddr *)&un, sizeof un, backlog);
		if (fd < 0) {
			snprintf(err, errlen, "cannot listen on %s: %s",
				 cmon_addr_format(a, abuf, sizeof abuf), strerror(-fd));
			return fd;
		}
		fds[0] = fd;
		*n = 1;
		return 0;
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	snprintf(portstr, sizeof portstr, "%u", a->port);
	r = getaddrinfo(a->host[0] ? a->host : NULL, portstr, &hints, &res);
	if (r != 0) {
		snprintf(err, errlen, "cannot resolve %s: %s",
			 cmon_addr_format(a, abuf, sizeof abuf), gai_strerror(r));
		return -EADDRNOTAVAIL;
	}
	for (ai = res; ai && count < max; ai = ai->ai_next) {
		struct sockaddr_storage ss;
		memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
		/* With port 0 and several addresses, use one port for all of them. */
		if (chosen) {
			if (ss.ss_family == AF_INET)
				((struct sockaddr_in *)&ss)->sin_port = htons(chosen);
			else if (ss.ss_family == AF_INET6)
				((struct sockaddr_in6 *)&ss)->sin6_port = htons(chosen);
		}
		fd = listen_one((struct sockaddr *)&ss, ai->ai_addrlen, backlog);
		if (fd < 0) {
			last = fd;
			/* An address family the host lacks (no IPv6) is not fatal. */
			if (fd == -EAFNOSUPPORT || fd == -EADDRNOTAVAIL)
				continue;
			snprintf(err, errlen, "cannot listen on %s: %s",
				 cmon_sockaddr_format(ai->ai_addr, ai->ai_addrlen, abuf, sizeof abuf),
				 strerror(-fd));
			for (size_t i = 0; i < count; i++)
				close(fds[i]);
			freeaddrinfo(res);
			return fd;
		}
		if (!chosen)
			chosen = cmon_socket_port(fd);
		fds[count++] = fd;
	}
	freeaddrinfo(res);
	if (count == 0) {
		snprintf(err, errlen, "cannot listen on %s: %s",
			 cmon_addr_format(a, abuf, sizeof abuf), strerror(-last));
		return last;
	}
	*n = count;
	return 0;
}

uint16_t cmon_socket_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

char *cmon_sockaddr_format(const struct sockaddr *sa, socklen_t len, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
		snprintf(buf, size, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
		snprintf(buf, size, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else if (sa->sa_family == AF_UNIX) {
		const struct sockaddr_un *un = (const struct sockaddr_un *)sa;
		size_t n = len > offsetof(struct sockaddr_un, sun_path)
				   ? len - offsetof(struct sockaddr_un, sun_path) : 0;
		if (n > 0 && un->sun_path[0])
			snprintf(buf, size, "unix:%.*s", (int)strnlen(un->sun_path, n), un->sun_path);
		else
			snprintf(buf, size, "unix");
	} else {
		snprintf(buf, size, "?");
	}
	return buf;
}

char *cmon_peer_name(int fd, char *buf, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;

	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0) {
		snprintf(buf, size, "fd %d", fd);
		return buf;
	}
	return cmon_sockaddr_format((struct sockaddr *)&ss, len, buf, size);
}

void cmon_socket_tune(int fd)
{
	int one = 1, idle = 30, intvl = 10, cnt = 3;

	/* Fails with EOPNOTSUPP on Unix sockets; that is fine. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

int cmon_write_file_atomic(const char *path, const char *text)
{
	return cmon_write_file_mode(path, text, 0644);
}

int cmon_write_file_mode(const char *path, const char *text, mode_t mode)
{
	char tmp[4096];
	size_t len = strlen(text);
	int fd, e = 0;

	if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp)
		return -ENAMETOOLONG;
	/* A fresh file of ours, never one (or a link) someone put there. */
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	if (write(fd, text, len) != (ssize_t)len)
		e = errno ? -errno : -EIO;
	if (close(fd) < 0 && !e)
		e = -errno;
	if (!e && rename(tmp, path) < 0)
		e = -errno;
	if (e)
		unlink(tmp);
	return e;
}

void cmon_heap_for_streams(void)
{
	mallopt(M_MMAP_THRESHOLD, (int)CMON_HEAP_MMAP_MAX);
	mallopt(M_TRIM_THRESHOLD, (int)CMON_HEAP_KEEP);
}

bool cmon_heap_give_back(void)
{
#ifdef __GLIBC__
	return malloc_trim(CMON_HEAP_KEEP) != 0;
#else
	return false;
#endif
}
