/* Who is at the other end of a connection (see cmon/net.h): the uid that
 * owns the peer's socket, from SO_PEERCRED on a Unix socket or from the
 * kernel's socket table (sock_diag) for TCP over loopback; and the shared
 * secret a peer may show instead. */
#include "cmon/net.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>

#define DIAG_WAIT_MS 1000   /* the kernel answers within the send; this is a bound */

#define STR_(x) #x
#define STR(x) STR_(x)

/* An IPv4-mapped IPv6 address (::ffff:a.b.c.d) becomes the IPv4 one. */
static void unmap(struct sockaddr_storage *ss)
{
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
	struct sockaddr_in in = { .sin_family = AF_INET };

	if (ss->ss_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
		return;
	in.sin_port = in6->sin6_port;
	memcpy(&in.sin_addr, &in6->sin6_addr.s6_addr[12], 4);
	memset(ss, 0, sizeof *ss);
	memcpy(ss, &in, sizeof in);
}

static bool is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
	if (ss->ss_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
	return false;
}

/* Fill the socket id of the TCP socket whose source is `peer` and whose
 * destination is `local`: the peer's end of our connection. */
static void diag_id(struct inet_diag_sockid *id, const struct sockaddr_storage *peer,
		    const struct sockaddr_storage *local)
{
	if (peer->ss_family == AF_INET) {
		const struct sockaddr_in *p = (const void *)peer, *l = (const void *)local;
		id->idiag_sport = p->sin_port;
		id->idiag_dport = l->sin_port;
		memcpy(id->idiag_src, &p->sin_addr, 4);
		memcpy(id->idiag_dst, &l->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *p = (const void *)peer, *l = (const void *)local;
		id->idiag_sport = p->sin6_port;
		id->idiag_dport = l->sin6_port;
		memcpy(id->idiag_src, &p->sin6_addr, 16);
		memcpy(id->idiag_dst, &l->sin6_addr, 16);
	}
	id->idiag_cookie[0] = id->idiag_cookie[1] = INET_DIAG_NOCOOKIE;
}

/* Ask sock_diag for the owner of the socket `id` of `family`. */
static int diag_lookup(int family, const struct inet_diag_sockid *id, uid_t *uid)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 req;
	} q;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	union {
		struct nlmsghdr align;
		uint8_t bytes[8192];
	} buf;
	struct pollfd pfd;
	ssize_t n;
	size_t off;
	int fd, rc = -ENOENT;

	memset(&q, 0, sizeof q);
	q.nlh.nlmsg_len = sizeof q;
	q.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	q.nlh.nlmsg_flags = NLM_F_REQUEST;     /* no NLM_F_DUMP: this one socket */
	q.nlh.nlmsg_seq = 1;
	q.req.sdiag_family = (uint8_t)family;
	q.req.sdiag_protocol = IPPROTO_TCP;
	q.req.idiag_states = ~0u;
	q.req.id = *id;

	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -errno;
	if (sendto(fd, &q, sizeof q, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
		rc = -errno;
		goto out_close;
	}
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	if (poll(&pfd, 1, DIAG_WAIT_MS) <= 0) {
		rc = -ETIMEDOUT;
		goto out_close;
	}
	n = recv(fd, buf.bytes, sizeof buf.bytes, MSG_DONTWAIT);
	if (n < 0) {
		rc = -errno;
		goto out_close;
	}
	for (off = 0; off + sizeof(struct nlmsghdr) <= (size_t)n;) {
		const struct nlmsghdr *h = (const void *)(buf.bytes + off);

		if (h->nlmsg_len < sizeof *h || h->nlmsg_len > (size_t)n - off)
			break;
		if (h->nlmsg_type == NLMSG_ERROR &&
		    h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct nlmsgerr))) {
			const struct nlmsgerr *e = NLMSG_DATA(h);
			rc = e->error < 0 ? e->error : -ENOENT;
			break;
		}
		if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
		    h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
			const struct inet_diag_msg *d = NLMSG_DATA(h);
			/* A socket no process holds any more (closed, orphaned,
			 * TIME_WAIT, which reports uid 0) vouches for nobody. */
			if (d->id.idiag_sport == id->idiag_sport &&
			    d->id.idiag_dport == id->idiag_dport) {
				if (d->idiag_inode) {
					*uid = (uid_t)d->idiag_uid;
					rc = 0;
				}
				break;
			}
		}
		off += NLMSG_ALIGN(h->nlmsg_len);
	}
out_close:
	close(fd);
	return rc;
}

/* Without sock_diag (a kernel or sandbox that refuses NETLINK_SOCK_DIAG):
 * the same lookup in /proc/net/tcp or tcp6, whose lines name each
 * socket's local and remote address (hex, as the kernel holds them), its
 * owner's uid and its inode. */
static int proc_lookup(int family, const struct inet_diag_sockid *id, uid_t *uid)
{
	const char *path = family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6";
	size_t alen = family == AF_INET ? 4 : 16;
	char want_l[80], want_r[80], line[512];
	const uint32_t *src = (const uint32_t *)id->idiag_src;
	const uint32_t *dst = (const uint32_t *)id->idiag_dst;
	int rc = -ENOENT, n = 0;
	FILE *f;

	/* the peer's socket: local = its address (our peer), remote = ours */
	for (size_t i = 0; i < alen / 4; i++)
		n += snprintf(want_l + n, sizeof want_l - (size_t)n, "%08X", src[i]);
	snprintf(want_l + n, sizeof want_l - (size_t)n, ":%04X", ntohs(id->idiag_sport));
	n = 0;
	for (size_t i = 0; i < alen / 4; i++)
		n += snprintf(want_r + n, sizeof want_r - (size_t)n, "%08X", dst[i]);
	snprintf(want_r + n, sizeof want_r - (size_t)n, ":%04X", ntohs(id->idiag_dport));
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof line, f)) {
		char local[80], remote[80];
		unsigned long u, inode;

		if (sscanf(line, " %*d: %79s %79s %*x %*x:%*x %*x:%*x %*x %lu %*d %lu", local,
			   remote, &u, &inode) != 4)
			continue;
		if (strcmp(local, want_l) || strcmp(remote, want_r))
			continue;
		if (inode) {          /* (a socket no process holds vouches for nobody) */
			*uid = (uid_t)u;
			rc = 0;
		}
		break;
	}
	fclose(f);
	return rc;
}

/* cmon_peer_uid(), through sock_diag (then /proc if it is refused) or, with
 * `proc_only`, through /proc alone. */
static int peer_uid(int fd, uid_t *uid, bool proc_only)
{
	struct sockaddr_storage peer, local;
	socklen_t plen = sizeof peer, llen = sizeof local;
	struct inet_diag_sockid id;
	int r;

	memset(&peer, 0, sizeof peer);
	memset(&local, 0, sizeof local);
	if (getpeername(fd, (struct sockaddr *)&peer, &plen) < 0)
		return -errno;
	if (peer.ss_family == AF_UNIX) {
		struct ucred cred;
		socklen_t clen = sizeof cred;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0)
			return -errno;
		*uid = cred.uid;
		return 0;
	}
	if (getsockname(fd, (struct sockaddr *)&local, &llen) < 0)
		return -errno;
	unmap(&peer);
	unmap(&local);
	if (!is_loopback(&peer) || local.ss_family != peer.ss_family)
		return -ENOENT;
	memset(&id, 0, sizeof id);
	diag_id(&id, &peer, &local);
	r = proc_only ? -EPROTONOSUPPORT : diag_lookup(peer.ss_family, &id, uid);
	if (r < 0 && r != -ENOENT)      /* no sock_diag here: the kernel's table in /proc */
		r = proc_lookup(peer.ss_family, &id, uid);
	return r;
}

int cmon_peer_uid(int fd, uid_t *uid)
{
	return peer_uid(fd, uid, false);
}

int cmon_peer_uid_proc(int fd, uid_t *uid)
{
	return peer_uid(fd, uid, true);
}

int cmon_secret_read_file(const char *path, char *buf, size_t size, size_t *len)
{
	char line[CMON_SECRET_MAX + 2];
	size_t n = 0;
	char *nl;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	while (n < sizeof line) {
		ssize_t r = read(fd, line + n, sizeof line - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (memchr(line, '\n', n))
			break;
	}
	close(fd);
	if (rc < 0)
		goto out_wipe;
	nl = memchr(line, '\n', n);
	if (nl)
		n = (size_t)(nl - line);
	else if (n == sizeof line) {
		rc = -E2BIG;
		goto out_wipe;
	}
	while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r'))
		n--;
	if (n > CMON_SECRET_MAX)
		rc = -E2BIG;
	else if (n < CMON_SECRET_MIN)
		rc = -EINVAL;
	else if (size < n + 1)
		rc = -ENOBUFS;
	if (rc < 0)
		goto out_wipe;
	memcpy(buf, line, n);
	buf[n] = '\0';
	*len = n;
out_wipe:
	explicit_bzero(line, sizeof line);
	return rc;
}

const char *cmon_secret_strerror(int r)
{
	switch (r) {
	case 0: return "ok";
	case -EINVAL: return "the secret (the file's first line) is shorter than "
			     STR(CMON_SECRET_MIN) " characters (make one with: openssl rand -hex 32)";
	case -E2BIG: return "the secret (the file's first line) is longer than "
			     STR(CMON_SECRET_MAX) " characters";
	default: return strerror(-r);
	}
}
