/* TLS for every TCP connection of the transport (OpenSSL 3 through
 * libevent's bufferevent_openssl). Configured by -tls-cert, -tls-key and
 * -tls-ca (or CMON_TLS_CERT, CMON_TLS_KEY, CMON_TLS_CA). With a CA, both
 * sides must present a certificate the CA signed (mutual TLS) and clients
 * check the server's name; without a CA, traffic is encrypted but peers are
 * not authenticated. */
#ifndef CMON_TLS_H
#define CMON_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <sys/uio.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <openssl/ssl.h>

/* TLS settings as given on the command line; NULL fields are unset. */
struct cmon_tls_opts {
	const char *cert;  /* PEM certificate (chain) presented to peers */
	const char *key;   /* PEM private key of `cert` */
	const char *ca;    /* PEM CA bundle peers must be signed by; enables mutual TLS */
};

/* Fill unset fields from CMON_TLS_CERT, CMON_TLS_KEY and CMON_TLS_CA. */
void cmon_tls_opts_from_env(struct cmon_tls_opts *o);

/* True if any TLS option is set (then every TCP connection uses TLS). */
bool cmon_tls_enabled(const struct cmon_tls_opts *o);

/* Context for accepting connections: needs cert and key; with a CA,
 * requires and verifies client certificates. NULL on error, with a
 * message in `err`. Free with SSL_CTX_free. */
SSL_CTX *cmon_tls_server_ctx(const struct cmon_tls_opts *o, char *err, size_t errlen);

/* Context for connecting: with a CA, verifies the server; with cert and
 * key, presents them. NULL on error, with a message in `err`. */
SSL_CTX *cmon_tls_client_ctx(const struct cmon_tls_opts *o, char *err, size_t errlen);

/* Bufferevent for an accepted socket `fd` (owned afterwards): TLS when
 * `ctx` is set, plain otherwise. NULL on allocation failure (fd closed). */
struct bufferevent *cmon_tls_accept_bev(struct event_base *base, SSL_CTX *ctx, int fd);

/* Bufferevent for an outgoing socket `fd` not yet connected (owned
 * afterwards): TLS when `ctx` is set, verifying `host` (a name or IP
 * literal) if the context verifies peers. NULL on failure (fd closed). */
struct bufferevent *cmon_tls_connect_bev(struct event_base *base, SSL_CTX *ctx, int fd,
					 const char *host);

/* True if `bev` is a TLS connection whose peer presented a certificate
 * that verified against our CA (mutual TLS). False for plain connections,
 * and for TLS without a CA (nobody is authenticated then). */
bool cmon_tls_peer_verified(struct bufferevent *bev);

/* Seconds until the certificate of `ctx` expires (negative: expired), or
 * -1e18 without one. Daemons warn when it is under CMON_TLS_EXPIRY_WARN_S. */
double cmon_tls_cert_expiry(SSL_CTX *ctx);

#define CMON_TLS_EXPIRY_WARN_S (30.0 * 86400)   /* 30 days */

/* TLS 1.2 suites: forward-secret AEAD only (TLS 1.3's are all such). */
#define CMON_TLS12_CIPHERS "ECDHE+AESGCM:ECDHE+CHACHA20"

/* Move what the socket under `bev` holds into its input buffer, up to
 * `most` bytes in one readv(2), bounded by the read high-watermark; for a
 * read callback of a stream that can carry a lot. libevent 2.1 reads a
 * socket 4 KiB at a time (EVBUFFER_MAX_READ), one loop turn each: three
 * system calls (epoll_wait, FIONREAD, readv) per 4 KiB. Does nothing on a
 * TLS bufferevent (its bytes must go through OpenSSL), one that is not
 * reading, or one without a socket. Returns the bytes read; end of stream
 * and errors are left for the bufferevent to find on its next read. */
size_t cmon_bev_read_more(struct bufferevent *bev, size_t most);
/* EVBUFFER_MAX_READ of libevent 2.1: an input holding less than this after
 * libevent's read got all the socket had, and a read more would only say
 * EAGAIN. */
#define CMON_LIBEVENT_READ 4096u
#define CMON_READ_MORE (256u << 10)  /* what a log stream's read callback asks for */

/* Send the bytes of iov[0..n) through `bev`, copying only what the kernel
 * does not take at once: while nothing is queued on its output, they go
 * straight to the socket in one sendmsg(2) (MSG_NOSIGNAL), and only the
 * rest is queued, as evbuffer_add() would queue all of it. On TLS, a
 * filter, with output queued or writing disabled, everything is queued. A failed send
 * (the peer gone) queues everything too: the bufferevent's own write then
 * meets the error and reports it. 0, or -ENOMEM. */
int cmon_bev_send(struct bufferevent *bev, const struct iovec *iov, int n);

/* Send `msg` as one frame (cmon_frame_send()) through `bev` the same way:
 * straight to a plain socket while nothing is queued, so bytes sent with
 * cmon_bev_send() right after it need not wait for a loop turn; otherwise
 * queued on the output. 0, -EMSGSIZE or -ENOMEM. */
struct Cmon__Msg;
int cmon_bev_send_frame(struct bufferevent *bev, const struct Cmon__Msg *msg);

/* Describe the last TLS error on `bev` (or in the OpenSSL queue) for logs. */
const char *cmon_tls_error(struct bufferevent *bev, char *buf, size_t size);

#endif
