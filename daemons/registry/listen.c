/* The registry's listening sockets: from systemd socket activation when
 * present, else from -listen addresses (default: loopback only without
 * TLS, every interface with TLS). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmon/log.h"
#include "cmon/service.h"
#include "registry.h"

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
		      int len, void *arg)
{
	conn_accept(arg, fd);
}

static void accept_error_cb(struct evconnlistener *l, void *arg)
{
	int e = EVUTIL_SOCKET_ERROR();

	/* EMFILE and friends: keep listening; the next accept may succeed. */
	cmon_warn("accept failed: %s", evutil_socket_error_to_string(e));
}

static int add_listener(struct reg *r, int fd)
{
	struct evconnlistener *l;

	if (r->nlisteners >= REG_MAX_LISTENERS) {
		close(fd);
		return -E2BIG;
	}
	l = evconnlistener_new(r->base, accept_cb, r,
			       LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (!l) {
		close(fd);
		return -ENOMEM;
	}
	evconnlistener_set_error_cb(l, accept_error_cb);
	r->listeners[r->nlisteners++] = l;
	return 0;
}

int listen_open(struct reg *r, char **addrs, size_t naddrs, const char *portfile)
{
	static char *loopback[] = { "127.0.0.1", "::1" };
	static char *anywhere[] = { "*" };
	char err[400], abuf[CMON_ADDRSTR_MAX], ports[64] = "";
	int fds[REG_MAX_LISTENERS], n, rc;
	uint16_t port = 0;

	n = cmon_service_listen_fds(fds, REG_MAX_LISTENERS);
	if (n > 0) {
		for (int i = 0; i < n; i++)
			if (add_listener(r, fds[i]) < 0)
				return -ENOMEM;
		cmon_notice("listening on %d socket(s) from systemd", n);
	} else {
		size_t want = naddrs;
		bool defaults = naddrs == 0;
		if (defaults) {
			addrs = r->tls ? anywhere : loopback;
			want = r->tls ? 1 : 2;
		}
		for (size_t i = 0; i < want; i++) {
			struct cmon_addr a;
			size_t got = 0;
			if (cmon_addr_parse(addrs[i], CMON_REGISTRY_PORT, &a) < 0) {
				cmon_err("bad -listen address '%s'", addrs[i]);
				return -EINVAL;
			}
			/* Listen on one port everywhere: reuse the first kernel choice. */
			if (a.kind == CMON_ADDR_TCP && a.port == 0 && port)
				a.port = port;
			rc = cmon_listen(&a, 1024, fds, REG_MAX_LISTENERS - r->nlisteners, &got,
					 err, sizeof err);
			if (rc < 0) {
				/* A host without IPv6 still gets the IPv4 default. */
				if (defaults && i > 0)
					continue;
				cmon_err("%s", err);
				return rc;
			}
			for (size_t k = 0; k < got; k++) {
				if (!port)
					port = cmon_socket_port(fds[k]);
				if (add_listener(r, fds[k]) < 0)
					return -ENOMEM;
			}
			if (a.kind == CMON_ADDR_TCP && a.port == 0)
				a.port = port;
			cmon_notice("listening on %s%s", cmon_addr_format(&a, abuf, sizeof abuf),
				    !r->tls ? "" : a.kind == CMON_ADDR_TCP ? " (TLS)"
				    : " (plain: TLS is for TCP only)");
		}
	}
	if (portfile) {
		for (size_t i = 0; i < r->nlisteners && !port; i++)
			port = cmon_socket_port(evconnlistener_get_fd(r->listeners[i]));
		snprintf(ports, sizeof ports, "%u\n", port);
		rc = cmon_write_file_atomic(portfile, ports);
		if (rc < 0) {
			cmon_err("cannot write %s: %s", portfile, strerror(-rc));
			return rc;
		}
	}
	return 0;
}

void listen_close(struct reg *r)
{
	for (size_t i = 0; i < r->nlisteners; i++)
		evconnlistener_free(r->listeners[i]);
	r->nlisteners = 0;
}
