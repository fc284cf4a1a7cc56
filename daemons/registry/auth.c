/* Who may subscribe (docs/protocol.md §8a, "Who may subscribe"). A
 * subscriber hears of instances and receives their tokens, which let it
 * read their logs and hold their programs up (block); so only a subscriber
 * that proves who it is may subscribe, in one of three ways:
 *   - mutual TLS: the registry has a CA and the peer's certificate verified;
 *   - the shared secret (-secret-file) in its Hello;
 *   - a peer on this machine (Unix socket, or TCP over loopback) whose
 *     socket belongs to our uid, root, or an -allow-user uid.
 * Announcers need none of this: they may only announce their own endpoint.
 * The peer's uid is looked up once, at a connection's first Subscribe,
 * never for a snarflog. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "cmon/log.h"
#include "cmon/tls.h"
#include "registry.h"

void auth_hello(struct conn *c, const Cmon__Hello *h)
{
	const struct reg_auth *a = &c->reg->auth;

	if (!h->has_secret)
		return;
	c->secret_shown = true;
	c->secret_ok = a->secret_len && h->secret.len == a->secret_len &&
		       CRYPTO_memcmp(h->secret.data, a->secret, a->secret_len) == 0;
}

static bool uid_allowed(const struct reg_auth *a, uid_t uid)
{
	if (uid == 0 || uid == a->self)
		return true;
	for (size_t i = 0; i < a->nallow; i++)
		if (a->allow[i] == uid)
			return true;
	return false;
}

bool auth_subscriber(struct conn *c, char *why, size_t size)
{
	const struct reg_auth *a = &c->reg->auth;
	const char *how = NULL;
	char uidtext[120];
	uid_t uid = 0;
	int r = -ENOENT;

	if (c->authorized)
		return true;
	if (a->mutual_tls && cmon_tls_peer_verified(c->bev))
		how = "its client certificate";
	else if (c->secret_ok)
		how = "the shared secret";
	else if ((r = cmon_peer_uid(bufferevent_getfd(c->bev), &uid)) == 0 && uid_allowed(a, uid))
		how = "its uid";
	if (how) {
		c->authorized = true;
		if (r == 0)
			cmon_debug("%s: subscriber (uid %u) allowed by %s", c->peer, (unsigned)uid, how);
		else
			cmon_debug("%s: subscriber allowed by %s", c->peer, how);
		return true;
	}
	if (r == 0)
		snprintf(uidtext, sizeof uidtext, "peer uid %u is not allowed (-allow-user)",
			 (unsigned)uid);
	else if (r == -ENOENT)
		snprintf(uidtext, sizeof uidtext, "peer uid unknown (not a local connection)");
	else
		snprintf(uidtext, sizeof uidtext, "peer uid unknown (%s)", strerror(-r));
	snprintf(why, size, "not authorized to subscribe: %s, no verified client certificate, %s",
		 uidtext, c->secret_shown ? "wrong shared secret" : "no shared secret");
	return false;
}

void auth_log_refusal(struct reg *r, const char *peer, const char *why)
{
	struct timespec ts;
	double now;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	if (r->auth.last_log > 0 && now - r->auth.last_log < REG_DENIED_LOG_S) {
		r->auth.quiet++;
		return;
	}
	if (r->auth.quiet)
		cmon_warn("%s: %s; disconnecting (%lu more subscribers refused since the last "
			  "such line, not logged)", peer, why, r->auth.quiet);
	else
		cmon_warn("%s: %s; disconnecting", peer, why);
	r->auth.last_log = now;
	r->auth.quiet = 0;
}

void auth_describe(const struct reg *r, char *buf, size_t size)
{
	const struct reg_auth *a = &r->auth;
	size_t n;

	if (a->self == 0)
		n = (size_t)snprintf(buf, size, "local peers running as root (ours)");
	else
		n = (size_t)snprintf(buf, size, "local peers running as root, uid %u (ours)",
				     (unsigned)a->self);
	for (size_t i = 0; i < a->nallow && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, ", uid %u", (unsigned)a->allow[i]);
	if (n < size && a->mutual_tls)
		n += (size_t)snprintf(buf + n, size - n, "; verified client certificates");
	if (n < size && a->secret_len)
		snprintf(buf + n, size - n, "; the shared secret");
}
