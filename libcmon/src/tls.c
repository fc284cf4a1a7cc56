/* TLS contexts and bufferevents (see cmon/tls.h). */
#include "cmon/tls.h"
#include "cmon/proto.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

void cmon_tls_opts_from_env(struct cmon_tls_opts *o)
{
	if (!o->cert)
		o->cert = getenv("CMON_TLS_CERT");
	if (!o->key)
		o->key = getenv("CMON_TLS_KEY");
	if (!o->ca)
		o->ca = getenv("CMON_TLS_CA");
	if (o->cert && !*o->cert)
		o->cert = NULL;
	if (o->key && !*o->key)
		o->key = NULL;
	if (o->ca && !*o->ca)
		o->ca = NULL;
}

bool cmon_tls_enabled(const struct cmon_tls_opts *o)
{
	return o->cert || o->key || o->ca;
}

static void openssl_err(char *err, size_t errlen, const char *what, const char *file)
{
	unsigned long e = ERR_get_error();
	char buf[256] = "unknown error";

	if (e)
		ERR_error_string_n(e, buf, sizeof buf);
	ERR_clear_error();
	snprintf(err, errlen, "%s%s%s: %s", what, file ? " " : "", file ? file : "", buf);
}

/* OpenSSL asks for a pass phrase when a key is encrypted: there is none to
 * give (a daemon has no one to ask), so it fails at once, and says why. */
static int no_pass_phrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	*(bool *)u = true;
	return 0;
}

/* Common settings: TLS 1.2 at least, and then only forward-secret AEAD
 * suites (ECDHE with AES-GCM or ChaCha20-Poly1305; TLS 1.3's own are all
 * such); a peer that closes without close_notify is an end, not an error
 * (the protocol is framed: a cut frame is seen as one); certificate and
 * key if given, CA. */
static SSL_CTX *ctx_new(const SSL_METHOD *m, const struct cmon_tls_opts *o, char *err,
			size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(m);
	bool wanted_pass = false;

	if (!ctx) {
		openssl_err(err, errlen, "cannot create TLS context", NULL);
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION |
				 SSL_OP_CIPHER_SERVER_PREFERENCE);
	if (SSL_CTX_set_cipher_list(ctx, CMON_TLS12_CIPHERS) != 1) {
		openssl_err(err, errlen, "cannot set the TLS 1.2 ciphers", NULL);
		goto out_free;
	}
	SSL_CTX_set_default_passwd_cb(ctx, no_pass_phrase);
	SSL_CTX_set_default_passwd_cb_userdata(ctx, &wanted_pass);
	if ((o->cert && !o->key) || (o->key && !o->cert)) {
		snprintf(err, errlen, "-tls-cert and -tls-key must be given together");
		goto out_free;
	}
	if (o->cert && SSL_CTX_use_certificate_chain_file(ctx, o->cert) != 1) {
		openssl_err(err, errlen, "cannot load certificate", o->cert);
		goto out_free;
	}
	if (o->key && SSL_CTX_use_PrivateKey_file(ctx, o->key, SSL_FILETYPE_PEM) != 1) {
		if (wanted_pass) {
			ERR_clear_error();
			snprintf(err, errlen, "cannot load private key %s: it is encrypted (protected by "
				 "a pass phrase), and a daemon has no one to ask for it; give a key "
				 "without one (openssl pkey -in KEY -out NEWKEY), readable only by "
				 "its user", o->key);
		} else {
			openssl_err(err, errlen, "cannot load private key", o->key);
		}
		goto out_free;
	}
	if (o->key && SSL_CTX_check_private_key(ctx) != 1) {
		openssl_err(err, errlen, "private key does not match certificate", o->key);
		goto out_free;
	}
	if (o->ca && SSL_CTX_load_verify_locations(ctx, o->ca, NULL) != 1) {
		openssl_err(err, errlen, "cannot load CA", o->ca);
		goto out_free;
	}
	SSL_CTX_set_default_passwd_cb(ctx, NULL);
	SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
	return ctx;
out_free:
	SSL_CTX_free(ctx);
	return NULL;
}

SSL_CTX *cmon_tls_server_ctx(const struct cmon_tls_opts *o, char *err, size_t errlen)
{
	SSL_CTX *ctx;

	if (!o->cert || !o->key) {
		snprintf(err, errlen, "a TLS server needs -tls-cert and -tls-key");
		return NULL;
	}
	ctx = ctx_new(TLS_server_method(), o, err, errlen);
	if (ctx && o->ca) {
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(o->ca);
		if (names)
			SSL_CTX_set_client_CA_list(ctx, names);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	return ctx;
}

SSL_CTX *cmon_tls_client_ctx(const struct cmon_tls_opts *o, char *err, size_t errlen)
{
	SSL_CTX *ctx = ctx_new(TLS_client_method(), o, err, errlen);

	if (ctx)
		SSL_CTX_set_verify(ctx, o->ca ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
	return ctx;
}

/* True if `fd` is a Unix socket: those stay plain whatever TLS is
 * configured (docs/protocol.md §8: their peers are on this machine, and
 * the file's permissions say who may connect). */
static bool unix_socket(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;

	return getsockname(fd, (struct sockaddr *)&ss, &len) == 0 && ss.ss_family == AF_UNIX;
}

struct bufferevent *cmon_tls_accept_bev(struct event_base *base, SSL_CTX *ctx, int fd)
{
	struct bufferevent *bev;
	SSL *ssl;

	if (!ctx || unix_socket(fd)) {
		bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
		if (!bev)
			close(fd);
		return bev;
	}
	ssl = SSL_new(ctx);
	if (!ssl) {
		close(fd);
		return NULL;
	}
	bev = bufferevent_openssl_socket_new(base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
					     BEV_OPT_CLOSE_ON_FREE);
	if (!bev) {
		SSL_free(ssl);
		close(fd);
		return NULL;
	}
	/* A peer that vanishes must not leave the session half-shut forever. */
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

struct bufferevent *cmon_tls_connect_bev(struct event_base *base, SSL_CTX *ctx, int fd,
					 const char *host)
{
	struct bufferevent *bev;
	unsigned char ipbuf[16];
	SSL *ssl;

	if (!ctx || unix_socket(fd)) {
		bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
		if (!bev)
			close(fd);
		return bev;
	}
	ssl = SSL_new(ctx);
	if (!ssl) {
		close(fd);
		return NULL;
	}
	if (host && *host && SSL_CTX_get_verify_mode(ctx) & SSL_VERIFY_PEER) {
		X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
		bool is_ip = inet_pton(AF_INET, host, ipbuf) == 1 ||
			     inet_pton(AF_INET6, host, ipbuf) == 1;
		if (is_ip)
			X509_VERIFY_PARAM_set1_ip_asc(param, host);
		else
			SSL_set1_host(ssl, host);
	}
	if (host && *host && !inet_pton(AF_INET, host, ipbuf) && !inet_pton(AF_INET6, host, ipbuf))
		SSL_set_tlsext_host_name(ssl, host);
	bev = bufferevent_openssl_socket_new(base, fd, ssl, BUFFEREVENT_SSL_CONNECTING,
					     BEV_OPT_CLOSE_ON_FREE);
	if (!bev) {
		SSL_free(ssl);
		close(fd);
		return NULL;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

double cmon_tls_cert_expiry(SSL_CTX *ctx)
{
	X509 *c = ctx ? SSL_CTX_get0_certificate(ctx) : NULL;
	int days = 0, secs = 0;

	if (!c || !ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(c)))
		return -1e18;
	return (double)days * 86400.0 + (double)secs;
}

bool cmon_tls_peer_verified(struct bufferevent *bev)
{
	SSL *ssl = bev ? bufferevent_openssl_get_ssl(bev) : NULL;

	/* A server context only asks for (and verifies) client certificates
	 * when a CA is configured; a certificate without verification counts
	 * for nothing. */
	return ssl && SSL_get0_peer_certificate(ssl) && SSL_get_verify_result(ssl) == X509_V_OK &&
	       (SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER);
}

/* A bufferevent straight on a socket (not TLS, not a filter): its bytes
 * are the socket's. The socket, or -1. */
static evutil_socket_t plain_socket(struct bufferevent *bev)
{
	if (bufferevent_openssl_get_ssl(bev) || bufferevent_get_underlying(bev))
		return -1;
	return bufferevent_getfd(bev);
}

/* The socket to send to at once: plain, writing, nothing queued; or -1. */
static evutil_socket_t send_now_fd(struct bufferevent *bev)
{
	if (evbuffer_get_length(bufferevent_get_output(bev)) ||
	    !(bufferevent_get_enabled(bev) & EV_WRITE))
		return -1;
	return plain_socket(bev);
}

int cmon_bev_send(struct bufferevent *bev, const struct iovec *iov, int n)
{
	struct evbuffer *out = bufferevent_get_output(bev);
	evutil_socket_t fd = send_now_fd(bev);
	size_t sent = 0;

	if (fd >= 0) {
		struct msghdr mh = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n };
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w > 0)
			sent = (size_t)w;
	}
	for (int i = 0; i < n; i++) {
		if (sent >= iov[i].iov_len) {
			sent -= iov[i].iov_len;
			continue;
		}
		if (evbuffer_add(out, (const uint8_t *)iov[i].iov_base + sent, iov[i].iov_len - sent) < 0)
			return -ENOMEM;
		sent = 0;
	}
	return 0;
}

int cmon_bev_send_frame(struct bufferevent *bev, const Cmon__Msg *msg)
{
	struct evbuffer *b;
	struct iovec iov;
	int r;

	if (send_now_fd(bev) < 0)
		return cmon_frame_send(bufferevent_get_output(bev), msg);
	b = evbuffer_new();            /* the frame, packed once, sent from here */
	if (!b)
		return -ENOMEM;
	r = cmon_frame_send(b, msg);
	if (r == 0) {
		iov.iov_len = evbuffer_get_length(b);
		iov.iov_base = evbuffer_pullup(b, -1);
		r = iov.iov_base ? cmon_bev_send(bev, &iov, 1) : -ENOMEM;
	}
	evbuffer_free(b);
	return r;
}

size_t cmon_bev_read_more(struct bufferevent *bev, size_t most)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_iovec v[2];
	struct iovec iov[2];
	evutil_socket_t fd = plain_socket(bev);
	size_t low, high, len = evbuffer_get_length(in), room = 0;
	ssize_t got;
	int n;

	if (fd < 0 || !(bufferevent_get_enabled(bev) & EV_READ))
		return 0;
	bufferevent_getwatermark(bev, EV_READ, &low, &high);
	if (high && len >= high)
		return 0;
	if (high && most > high - len)
		most = high - len;
	if (most == 0)
		return 0;
	/* A socket bufferevent keeps the end of its input frozen but while
	 * it reads into it itself; so does this. */
	evbuffer_unfreeze(in, 0);
	n = evbuffer_reserve_space(in, (ev_ssize_t)most, v, 2);
	if (n <= 0) {
		evbuffer_freeze(in, 0);
		return 0;
	}
	for (int i = 0; i < n; i++) {
		if (v[i].iov_len > most - room)
			v[i].iov_len = most - room;
		iov[i].iov_base = v[i].iov_base;
		iov[i].iov_len = v[i].iov_len;
		room += v[i].iov_len;
	}
	got = readv(fd, iov, n);
	if (got <= 0) {
		evbuffer_commit_space(in, v, 0);
		evbuffer_freeze(in, 0);
		return 0;
	}
	room = (size_t)got;
	for (int i = 0; i < n; i++) {
		if (v[i].iov_len > room)
			v[i].iov_len = room;
		room -= v[i].iov_len;
	}
	evbuffer_commit_space(in, v, n == 2 && v[1].iov_len == 0 ? 1 : n);
	evbuffer_freeze(in, 0);
	return (size_t)got;
}

const char *cmon_tls_error(struct bufferevent *bev, char *buf, size_t size)
{
	unsigned long e = bev ? bufferevent_get_openssl_error(bev) : 0;
	SSL *ssl = bev ? bufferevent_openssl_get_ssl(bev) : NULL;
	long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;

	if (!e)
		e = ERR_get_error();
	if (v != X509_V_OK) {
		/* name why the certificate was refused, not only that it was */
		snprintf(buf, size, "certificate verify failed: %s", X509_verify_cert_error_string(v));
		while (bev && bufferevent_get_openssl_error(bev))
			;
		ERR_clear_error();
		return buf;
	}
	if (!e) {
		snprintf(buf, size, "connection closed during TLS handshake");
		return buf;
	}
	if (ERR_GET_REASON(e) == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
	    ERR_GET_REASON(e) == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
	    ERR_GET_REASON(e) == SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED ||
	    ERR_GET_REASON(e) == SSL_R_TLSV1_ALERT_DECRYPT_ERROR ||
	    ERR_GET_REASON(e) == SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE ||
	    ERR_GET_REASON(e) == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN) {
		/* the peer refused our certificate and said why in its alert */
		char r[200];
		ERR_error_string_n(e, r, sizeof r);
		snprintf(buf, size, "the peer refused our certificate (%s)", r);
		while (bev && bufferevent_get_openssl_error(bev))
			;
		ERR_clear_error();
		return buf;
	}
	ERR_error_string_n(e, buf, size);
	/* Drain the rest so it is not reported against the next peer. */
	while (bev && bufferevent_get_openssl_error(bev))
		;
	ERR_clear_error();
	return buf;
}
