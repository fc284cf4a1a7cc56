/* Unit tests for the registry's endpoint rules (daemons/registry/endpoint.c):
 * which data endpoints an announcer may give, one named case per rule and
 * per refusal. The registry is a program, not a library, so the module is
 * compiled into this test directly. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../daemons/registry/endpoint.c"

/* A temporary -unix-dir holding a socket, a regular file and a link to
 * the socket. */
struct fixture {
	char dir[64];                 /* the directory */
	char sock[128];               /* DIR/snarf.sock, a listening socket */
	char file[128];               /* DIR/file, a regular file */
	char link[128];               /* DIR/link.sock -> snarf.sock */
	int fd;                       /* the socket */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	FILE *fp;

	strcpy(f->dir, "/tmp/test_registry_endpoint.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->sock, sizeof f->sock, "%s/snarf.sock", f->dir);
	snprintf(f->file, sizeof f->file, "%s/file", f->dir);
	snprintf(f->link, sizeof f->link, "%s/link.sock", f->dir);
	memcpy(un.sun_path, f->sock, strlen(f->sock) + 1);   /* well under 108 bytes */
	f->fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (f->fd < 0 || bind(f->fd, (struct sockaddr *)&un, sizeof un) < 0)
		return -1;
	fp = fopen(f->file, "w");
	if (!fp)
		return -1;
	fclose(fp);
	if (symlink(f->sock, f->link) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	close(f->fd);
	unlink(f->sock);
	unlink(f->file);
	unlink(f->link);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* Peers. */
static struct sockaddr_storage peer_v4(const char *ip)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;

	in->sin_family = AF_INET;
	in->sin_port = htons(40000);
	assert_int_equal(inet_pton(AF_INET, ip, &in->sin_addr), 1);
	return ss;
}

static struct sockaddr_storage peer_v6(const char *ip)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons(40000);
	assert_int_equal(inet_pton(AF_INET6, ip, &in6->sin6_addr), 1);
	return ss;
}

static struct sockaddr_storage peer_unix(void)
{
	struct sockaddr_storage ss = { 0 };

	ss.ss_family = AF_UNIX;
	return ss;
}

/* Check one announce: `want_out` is what is passed on, or NULL for a
 * refusal whose reason contains `want_why`. */
static void one(const char *name, const char *ep, struct sockaddr_storage peer,
		const char *unix_dir, const char *want_out, int want_rc, const char *want_why)
{
	char out[CMON_ADDRSTR_MAX] = "", why[400] = "";
	int r = endpoint_check(ep, (struct sockaddr *)&peer, unix_dir, out, sizeof out, why,
			       sizeof why);

	print_message("%s: %s -> %d %s%s\n", name, ep, r, out, why);
	assert_int_equal(r, want_rc);
	if (want_out)
		assert_string_equal(out, want_out);
	if (want_why)
		assert_non_null(strstr(why, want_why));
	if (r < 0)
		assert_non_null(strstr(why, "data endpoint"));
}

static void port_only_is_filled_in(void **state)
{
	one("v4 peer", ":5000", peer_v4("192.0.2.7"), NULL, "192.0.2.7:5000", 0, NULL);
	one("star", "*:5000", peer_v4("192.0.2.7"), NULL, "192.0.2.7:5000", 0, NULL);
	one("v6 peer", ":5000", peer_v6("2001:db8::7"), NULL, "[2001:db8::7]:5000", 0, NULL);
	one("mapped peer", ":5000", peer_v6("::ffff:192.0.2.7"), NULL, "192.0.2.7:5000", 0, NULL);
	one("unix peer", ":5000", peer_unix(), NULL, "127.0.0.1:5000", 0, NULL);
}

static void own_address_accepted(void **state)
{
	one("same v4", "192.0.2.7:5000", peer_v4("192.0.2.7"), NULL, "192.0.2.7:5000", 0, NULL);
	one("same v6", "[2001:db8::7]:5000", peer_v6("2001:db8::7"), NULL, "[2001:db8::7]:5000",
	    0, NULL);
	one("same v6, other spelling", "[2001:0db8:0::7]:5000", peer_v6("2001:db8::7"), NULL,
	    "[2001:db8::7]:5000", 0, NULL);
	one("mapped endpoint", "[::ffff:192.0.2.7]:5000", peer_v4("192.0.2.7"), NULL,
	    "192.0.2.7:5000", 0, NULL);
	one("loopback from loopback", "127.0.0.1:5000", peer_v4("127.0.0.1"), NULL,
	    "127.0.0.1:5000", 0, NULL);
	one("v4 loopback from v6 loopback", "127.0.0.1:5000", peer_v6("::1"), NULL,
	    "127.0.0.1:5000", 0, NULL);
	one("v6 loopback from v4 loopback", "[::1]:5000", peer_v4("127.0.0.1"), NULL,
	    "[::1]:5000", 0, NULL);
	one("loopback over our unix socket", "127.0.0.1:5000", peer_unix(), NULL,
	    "127.0.0.1:5000", 0, NULL);
}

static void other_addresses_refused(void **state)
{
	one("another host", "10.255.255.1:25", peer_v4("127.0.0.1"), NULL, NULL, -EPERM,
	    "not the announcer's own address (127.0.0.1)");
	one("another host, remote peer", "192.0.2.8:5000", peer_v4("192.0.2.7"), NULL, NULL,
	    -EPERM, "not the announcer's own address");
	one("loopback from a remote peer", "127.0.0.1:5000", peer_v4("192.0.2.7"), NULL, NULL,
	    -EPERM, "not the announcer's own address");
	one("v6 loopback from a remote peer", "[::1]:5000", peer_v6("2001:db8::7"), NULL, NULL,
	    -EPERM, "not the announcer's own address");
	one("unspecified", "0.0.0.0:5000", peer_v4("127.0.0.1"), NULL, NULL, -EPERM, "own");
	one("unspecified v6", "[::]:5000", peer_v4("127.0.0.1"), NULL, NULL, -EPERM, "own");
	one("other family", "[2001:db8::7]:5000", peer_v4("192.0.2.7"), NULL, NULL, -EPERM,
	    "own");
}

static void host_names_refused(void **state)
{
	one("name", "evil.example.com:80", peer_v4("127.0.0.1"), NULL, NULL, -EPERM,
	    "not a numeric address");
	one("localhost", "localhost:5000", peer_v4("127.0.0.1"), NULL, NULL, -EPERM,
	    "not a numeric address");
	one("scope id", "[fe80::1%eth0]:5000", peer_v6("fe80::1"), NULL, NULL, -EPERM,
	    "not a numeric address");
	one("not an address", "a b:1", peer_v4("127.0.0.1"), NULL, NULL, -EINVAL,
	    "not an address");
}

static void unix_endpoints(void **state)
{
	struct fixture *f = *state;
	char ep[200], want[200], other[200];

	snprintf(ep, sizeof ep, "unix:%s", f->sock);
	one("no -unix-dir", "unix:/etc/passwd", peer_v4("127.0.0.1"), NULL, NULL, -EPERM,
	    "no -unix-dir");
	one("no -unix-dir, a real socket", ep, peer_unix(), NULL, NULL, -EPERM, "no -unix-dir");
	snprintf(want, sizeof want, "unix:%s", f->sock);
	one("socket under the dir, over our unix socket", ep, peer_unix(), f->dir, want, 0, NULL);
	one("socket under the dir, from loopback", ep, peer_v4("127.0.0.1"), f->dir, want, 0,
	    NULL);
	one("from another machine", ep, peer_v4("192.0.2.7"), f->dir, NULL, -EPERM,
	    "from another machine");
	one("outside the dir", "unix:/etc/passwd", peer_unix(), f->dir, NULL, -EPERM,
	    "not a socket directly in");
	snprintf(other, sizeof other, "unix:%s/../x/snarf.sock", f->dir);
	one("dot-dot", other, peer_unix(), f->dir, NULL, -EPERM, "not a socket directly in");
	snprintf(other, sizeof other, "unix:%s", f->dir);
	one("the dir itself", other, peer_unix(), f->dir, NULL, -EPERM, "not a socket directly in");
	snprintf(other, sizeof other, "unix:%s/sub/snarf.sock", f->dir);
	one("a subdirectory (it could be a link)", other, peer_unix(), f->dir, NULL, -EPERM,
	    "not a socket directly in");
	snprintf(other, sizeof other, "unix:%s/.", f->dir);
	one("dot", other, peer_unix(), f->dir, NULL, -EPERM, "not a socket directly in");
	snprintf(other, sizeof other, "unix:%sx/snarf.sock", f->dir);
	one("a sibling with the dir as prefix", other, peer_unix(), f->dir, NULL, -EPERM,
	    "not a socket directly in");
	snprintf(other, sizeof other, "unix:%s", f->file);
	one("a regular file", other, peer_unix(), f->dir, NULL, -EPERM, "not a socket");
	snprintf(other, sizeof other, "unix:%s", f->link);
	one("a link to a socket", other, peer_unix(), f->dir, NULL, -EPERM, "not a socket");
	snprintf(other, sizeof other, "unix:%s/missing.sock", f->dir);
	one("missing", other, peer_unix(), f->dir, NULL, -EPERM, "No such file");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(port_only_is_filled_in),
		cmocka_unit_test(own_address_accepted),
		cmocka_unit_test(other_addresses_refused),
		cmocka_unit_test(host_names_refused),
		cmocka_unit_test_setup_teardown(unix_endpoints, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
