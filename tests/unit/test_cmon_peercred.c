/* Unit tests for cmon/net.h's peer credentials (peercred.c): the uid of a
 * peer over a Unix socket (SO_PEERCRED) and over loopback TCP, IPv4, IPv6
 * and IPv4-mapped (sock_diag); another user's peer when run as root; what
 * is not a local peer; and shared-secret files. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "cmon_skip.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmon/net.h"

#define NOBODY 65534

/* A listening socket on `addr` (port 0) and its bound address. */
static int listen_on(const struct sockaddr *addr, socklen_t len, bool v6only,
		     struct sockaddr_storage *bound)
{
	socklen_t blen = sizeof *bound;
	int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0), off = v6only;

	if (fd < 0)
		return -1;
	if (addr->sa_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
	if (bind(fd, addr, len) < 0 || listen(fd, 4) < 0 ||
	    getsockname(fd, (struct sockaddr *)bound, &blen) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Connect a client of `family` to `to` (the listener of `lfd`); return
 * both ends. */
static void pair_over(int lfd, int family, const struct sockaddr_storage *to, socklen_t tolen,
		      int *client, int *server)
{
	*client = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(*client >= 0);
	assert_int_equal(connect(*client, (const struct sockaddr *)to, tolen), 0);
	*server = accept(lfd, NULL, NULL);
	assert_true(*server >= 0);
}

static void unix_socketpair(void **state)
{
	int sv[2];
	uid_t uid = 12345;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(cmon_peer_uid(sv[0], &uid), 0);
	assert_int_equal(uid, geteuid());
	close(sv[0]);
	close(sv[1]);
}

static void tcp_v4_loopback(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_storage bound;
	int lfd, c, s;
	uid_t uid = 12345;

	lfd = listen_on((struct sockaddr *)&a, sizeof a, false, &bound);
	assert_true(lfd >= 0);
	pair_over(lfd, AF_INET, &bound, sizeof(struct sockaddr_in), &c, &s);
	assert_int_equal(cmon_peer_uid(s, &uid), 0);
	assert_int_equal(uid, geteuid());
	uid = 12345;
	assert_int_equal(cmon_peer_uid(c, &uid), 0);   /* either end */
	assert_int_equal(uid, geteuid());
	uid = 12345;                                   /* the same from /proc alone */
	assert_int_equal(cmon_peer_uid_proc(s, &uid), 0);
	assert_int_equal(uid, geteuid());
	/* The peer closed its socket: what is left of it (orphaned, then
	 * TIME_WAIT with uid 0) vouches for nobody; uid untouched. */
	close(c);
	uid = 12345;
	assert_int_equal(cmon_peer_uid(s, &uid), -ENOENT);
	assert_int_equal(uid, 12345);
	close(s);
	close(lfd);
}

static void tcp_v6_loopback(void **state)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	struct sockaddr_storage bound;
	int lfd, c, s;
	uid_t uid = 12345;

	lfd = listen_on((struct sockaddr *)&a, sizeof a, true, &bound);
	if (lfd < 0)
		CMON_SKIP("no IPv6 on this machine");
	pair_over(lfd, AF_INET6, &bound, sizeof(struct sockaddr_in6), &c, &s);
	assert_int_equal(cmon_peer_uid(s, &uid), 0);
	assert_int_equal(uid, geteuid());
	uid = 12345;
	assert_int_equal(cmon_peer_uid_proc(s, &uid), 0);
	assert_int_equal(uid, geteuid());
	close(c);
	close(s);
	close(lfd);
}

/* A dual-stack IPv6 listener accepts an IPv4 client: its address comes
 * as ::ffff:127.0.0.1 and is looked up as IPv4. */
static void tcp_v4_mapped(void **state)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT };
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_storage bound, peer;
	socklen_t plen = sizeof peer;
	int lfd, c, s;
	uid_t uid = 12345;

	lfd = listen_on((struct sockaddr *)&a, sizeof a, false, &bound);
	if (lfd < 0)
		CMON_SKIP("cannot listen on loopback");
	to.sin_port = ((struct sockaddr_in6 *)&bound)->sin6_port;
	pair_over(lfd, AF_INET, (struct sockaddr_storage *)&to, sizeof to, &c, &s);
	assert_int_equal(getpeername(s, (struct sockaddr *)&peer, &plen), 0);
	assert_int_equal(peer.ss_family, AF_INET6);
	assert_true(IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)&peer)->sin6_addr));
	assert_int_equal(cmon_peer_uid(s, &uid), 0);
	assert_int_equal(uid, geteuid());
	close(c);
	close(s);
	close(lfd);
}

/* As root: a client that runs as uid 65534 is seen as 65534, over
 * loopback TCP and over a Unix socket. */
static void other_user(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	char dir[] = "/tmp/cmon-peercred-XXXXXX";
	struct sockaddr_storage bound;
	int lfd[2], s, status;
	uid_t uid;
	pid_t pid;

	if (geteuid() != 0)
		CMON_SKIP("needs root (to run a peer as another uid)");
	assert_non_null(mkdtemp(dir));
	assert_int_equal(chmod(dir, 0755), 0);
	snprintf(un.sun_path, sizeof un.sun_path, "%s/sock", dir);
	lfd[0] = listen_on((struct sockaddr *)&a, sizeof a, false, &bound);
	lfd[1] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(lfd[0] >= 0 && lfd[1] >= 0);
	assert_int_equal(bind(lfd[1], (struct sockaddr *)&un, sizeof un), 0);
	assert_int_equal(chmod(un.sun_path, 0666), 0);
	assert_int_equal(listen(lfd[1], 4), 0);
	for (int i = 0; i < 2; i++) {
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			char byte;
			int c;
			if (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0)
				_exit(3);
			c = socket(i ? AF_UNIX : AF_INET, SOCK_STREAM, 0);
			if (c < 0 || connect(c, i ? (struct sockaddr *)&un : (struct sockaddr *)&bound,
					     i ? sizeof un : sizeof(struct sockaddr_in)) < 0)
				_exit(4);
			(void)!read(c, &byte, 1);          /* until the parent is done */
			_exit(0);
		}
		s = accept(lfd[i], NULL, NULL);
		assert_true(s >= 0);
		uid = 0;
		assert_int_equal(cmon_peer_uid(s, &uid), 0);
		assert_int_equal(uid, NOBODY);
		if (i == 0) {           /* TCP: /proc says the same */
			uid = 0;
			assert_int_equal(cmon_peer_uid_proc(s, &uid), 0);
			assert_int_equal(uid, NOBODY);
		}
		close(s);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		close(lfd[i]);
	}
	unlink(un.sun_path);
	rmdir(dir);
}

/* A peer on this machine's own non-loopback address is not taken for a
 * local one (it could as well be another machine's). */
static void tcp_not_loopback(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct sockaddr_storage bound;
	struct ifaddrs *ifs, *i;
	int lfd, c, s;
	uid_t uid = 12345;

	assert_int_equal(getifaddrs(&ifs), 0);
	for (i = ifs; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    (ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr) >> 24) != 127)
			break;
	if (i)
		a.sin_addr = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
	freeifaddrs(ifs);
	if (!i)
		CMON_SKIP("no address but loopback on this machine");
	lfd = listen_on((struct sockaddr *)&a, sizeof a, false, &bound);
	assert_true(lfd >= 0);
	pair_over(lfd, AF_INET, &bound, sizeof(struct sockaddr_in), &c, &s);
	assert_int_equal(cmon_peer_uid(s, &uid), -ENOENT);
	assert_int_equal(uid, 12345);
	close(c);
	close(s);
	close(lfd);
}

static void not_a_local_peer(void **state)
{
	int p[2], fd;
	uid_t uid = 12345;

	assert_int_equal(pipe(p), 0);
	assert_int_equal(cmon_peer_uid(p[0], &uid), -ENOTSOCK);
	close(p[0]);
	close(p[1]);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(cmon_peer_uid(fd, &uid), -ENOTCONN);
	close(fd);
	assert_int_equal(uid, 12345);
}

/* Write `text` to a fresh temporary file; return its path (static). */
static const char *secret_file(const char *text)
{
	static char path[64];
	int fd;

	snprintf(path, sizeof path, "/tmp/cmon-secret-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static void secret_files(void **state)
{
	static const struct { const char *text, *want; int rc; } cases[] = {
		{ "0123456789abcdef\n", "0123456789abcdef", 0 },
		{ "0123456789abcdef", "0123456789abcdef", 0 },             /* no newline */
		{ "0123456789abcdef \t\r\nsecond line\n", "0123456789abcdef", 0 },
		{ "  leading blanks stay\n", "  leading blanks stay", 0 },
		{ "0123456789abcde\n", NULL, -EINVAL },                     /* 15 */
		{ "0123456789abcde    \n", NULL, -EINVAL },                 /* 15 + blanks */
		{ "", NULL, -EINVAL },
		{ "\nlong enough second line\n", NULL, -EINVAL },
	};
	char buf[CMON_SECRET_MAX + 1], big[CMON_SECRET_MAX + 3];
	size_t len;

	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const char *path = secret_file(cases[i].text);
		strcpy(buf, "untouched");
		len = 99;
		assert_int_equal(cmon_secret_read_file(path, buf, sizeof buf, &len), cases[i].rc);
		if (cases[i].want) {
			assert_string_equal(buf, cases[i].want);
			assert_int_equal(len, strlen(cases[i].want));
		} else {
			assert_string_equal(buf, "untouched");
			assert_int_equal(len, 99);
			assert_non_null(strstr(cmon_secret_strerror(cases[i].rc), "16"));
		}
		unlink(path);
	}
	/* Exactly the longest, then one more (with and without a newline). */
	memset(big, 'x', CMON_SECRET_MAX);
	strcpy(big + CMON_SECRET_MAX, "\n");
	const char *path = secret_file(big);
	assert_int_equal(cmon_secret_read_file(path, buf, sizeof buf, &len), 0);
	assert_int_equal(len, CMON_SECRET_MAX);
	unlink(path);
	strcpy(big + CMON_SECRET_MAX, "x\n");
	path = secret_file(big);
	assert_int_equal(cmon_secret_read_file(path, buf, sizeof buf, &len), -E2BIG);
	unlink(path);
	big[CMON_SECRET_MAX + 1] = '\0';
	path = secret_file(big);
	assert_int_equal(cmon_secret_read_file(path, buf, sizeof buf, &len), -E2BIG);
	unlink(path);
	assert_int_equal(cmon_secret_read_file("/nonexistent/cmon-secret", buf, sizeof buf, &len),
			 -ENOENT);
	assert_int_equal(cmon_secret_read_file("/tmp", buf, sizeof buf, &len), -EISDIR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(unix_socketpair),
		cmocka_unit_test(tcp_v4_loopback),
		cmocka_unit_test(tcp_v6_loopback),
		cmocka_unit_test(tcp_v4_mapped),
		cmocka_unit_test(other_user),
		cmocka_unit_test(tcp_not_loopback),
		cmocka_unit_test(not_a_local_peer),
		cmocka_unit_test(secret_files),
	};
	return cmon_tests_done(cmocka_run_group_tests(tests, NULL, NULL));
}
