/* Which data endpoints the registry passes on. Subscribers dial whatever
 * the registry tells them, so an announcer must not be able to point them
 * anywhere but at itself:
 *   ":PORT"        the address the announce came from (as always);
 *   "IP:PORT"      only the announcer's own address, compared as numbers
 *                  (an announcer on loopback, or on our Unix socket, may
 *                  also name a loopback address);
 *   "unix:PATH"    only from this machine (loopback or our Unix socket),
 *                  only directly in the directory given with -unix-dir, and
 *                  only if PATH is a socket there (not a link to one);
 *   anything else (a host name, another host's address, the unspecified
 *   address) is refused: the registry never resolves a name. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "registry.h"

/* The IP address in `sa` (IPv4-mapped IPv6 counts as IPv4). */
static bool ip_of(const struct sockaddr *sa, int *family, uint8_t addr[16])
{
	if (sa->sa_family == AF_INET) {
		*family = AF_INET;
		memcpy(addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			*family = AF_INET;
			memcpy(addr, a6->s6_addr + 12, 4);
		} else {
			*family = AF_INET6;
			memcpy(addr, a6->s6_addr, 16);
		}
		return true;
	}
	return false;
}

/* Parse a numeric IPv4 or IPv6 address (no names, no scope ids). */
static bool ip_parse(const char *host, int *family, uint8_t addr[16])
{
	struct in6_addr a6;

	if (inet_pton(AF_INET, host, addr) == 1) {
		*family = AF_INET;
		return true;
	}
	if (inet_pton(AF_INET6, host, &a6) != 1)
		return false;
	if (IN6_IS_ADDR_V4MAPPED(&a6)) {
		*family = AF_INET;
		memcpy(addr, a6.s6_addr + 12, 4);
	} else {
		*family = AF_INET6;
		memcpy(addr, a6.s6_addr, 16);
	}
	return true;
}

static bool ip_loopback(int family, const uint8_t *addr)
{
	static const uint8_t v6_loopback[16] = { [15] = 1 };

	return family == AF_INET ? addr[0] == 127 : memcmp(addr, v6_loopback, 16) == 0;
}

/* "1.2.3.4:5" / "[::1]:5" for an address and a port. */
static void ip_format(int family, const uint8_t *addr, uint16_t port, char *out, size_t size)
{
	char host[INET6_ADDRSTRLEN];

	inet_ntop(family, addr, host, sizeof host);
	snprintf(out, size, family == AF_INET6 ? "[%s]:%u" : "%s:%u", host, port);
}

/* True if `path` names an entry directly in directory `dir` (absolute,
 * no trailing slash): "DIR/NAME" with NAME neither "." nor ".." and
 * without a slash, so no component but the last can be a link elsewhere
 * and the comparison of strings is a comparison of places. */
static bool path_in(const char *path, const char *dir)
{
	size_t dl = strlen(dir);
	const char *name = path + dl + 1;

	if (strncmp(path, dir, dl) != 0 || path[dl] != '/' || !*name || strchr(name, '/'))
		return false;
	return strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

int endpoint_check(const char *announced, const struct sockaddr *peer, const char *unix_dir,
		   char *out, size_t outlen, char *why, size_t whylen)
{
	struct cmon_addr a;
	uint8_t paddr[16], eaddr[16];
	char pname[CMON_ADDRSTR_MAX] = "?";
	int pfam = 0, efam = 0;
	bool peer_ip = ip_of(peer, &pfam, paddr);
	bool peer_local = peer->sa_family == AF_UNIX || (peer_ip && ip_loopback(pfam, paddr));
	struct stat st;

	if (!announced || cmon_addr_parse(announced, 0, &a) < 0) {
		snprintf(why, whylen, "data endpoint is not an address");
		return -EINVAL;
	}
	if (peer_ip)
		inet_ntop(pfam, paddr, pname, sizeof pname);
	else if (peer->sa_family == AF_UNIX)
		snprintf(pname, sizeof pname, "our Unix socket");
	if (a.kind == CMON_ADDR_UNIX) {
		if (!unix_dir) {
			snprintf(why, whylen, "data endpoint %s refused: Unix socket endpoints are "
				 "not accepted (telemonreg has no -unix-dir)", announced);
			return -EPERM;
		}
		if (!peer_local) {
			snprintf(why, whylen, "data endpoint %s refused: a Unix socket announced "
				 "from another machine (%s)", announced, pname);
			return -EPERM;
		}
		if (!path_in(a.path, unix_dir)) {
			snprintf(why, whylen, "data endpoint %s refused: not a socket directly in %s",
				 announced, unix_dir);
			return -EPERM;
		}
		if (lstat(a.path, &st) < 0) {
			snprintf(why, whylen, "data endpoint %s refused: %s", announced,
				 strerror(errno));
			return -EPERM;
		}
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(why, whylen, "data endpoint %s refused: not a socket", announced);
			return -EPERM;
		}
		snprintf(out, outlen, "unix:%s", a.path);
		return 0;
	}
	if (!a.host[0]) {
		/* ":PORT": where the announce came from. */
		if (peer_ip) {
			ip_format(pfam, paddr, a.port, out, outlen);
			return 0;
		}
		if (peer->sa_family == AF_UNIX) {
			snprintf(out, outlen, "127.0.0.1:%u", a.port);
			return 0;
		}
		snprintf(why, whylen, "data endpoint %s refused: no peer address to fill in",
			 announced);
		return -EPERM;
	}
	if (!ip_parse(a.host, &efam, eaddr)) {
		snprintf(why, whylen, "data endpoint %s refused: not a numeric address (host "
			 "names are not accepted; announce \":PORT\" or %s)", announced, pname);
		return -EPERM;
	}
	if (!(peer_ip && efam == pfam &&
	      memcmp(eaddr, paddr, efam == AF_INET ? 4 : 16) == 0) &&
	    !(peer_local && ip_loopback(efam, eaddr))) {
		snprintf(why, whylen, "data endpoint %s refused: not the announcer's own address "
			 "(%s)", announced, pname);
		return -EPERM;
	}
	ip_format(efam, eaddr, a.port, out, outlen);
	return 0;
}
