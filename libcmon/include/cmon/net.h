/* Addresses and sockets: parsing "HOST:PORT" / "[V6]:PORT" / "unix:PATH",
 * opening listening sockets, naming peers for log lines, and who a peer is
 * (its uid, a shared secret). */
#ifndef CMON_NET_H
#define CMON_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Default TCP port of telemonreg. */
#define CMON_REGISTRY_PORT 7361

/* Default registry host for clients when TELEMONREG_MACHINE is unset. */
#define CMON_REGISTRY_HOST "localhost"

/* Longest host name we accept in an address (DNS limit). */
#define CMON_HOST_MAX 253

/* Enough room for any formatted address or peer name. */
#define CMON_ADDRSTR_MAX 300

/* Kind of endpoint an address names. */
enum cmon_addr_kind {
	CMON_ADDR_TCP,   /* host (name or literal, possibly empty = any) and port */
	CMON_ADDR_UNIX,  /* filesystem path of a Unix stream socket */
};

/* A parsed endpoint address. */
struct cmon_addr {
	enum cmon_addr_kind kind;      /* TCP or Unix */
	char host[CMON_HOST_MAX + 1];  /* TCP: host name or literal; "" = wildcard / fill in */
	uint16_t port;                 /* TCP: port; 0 = let the kernel choose */
	char path[108];                /* UNIX: socket path (sun_path size) */
};

/* Parse `text` ("host", "host:port", "[v6]:port", ":port", "*:port",
 * "unix:/path") into `out`; `default_port` applies when no port is given.
 * Returns 0, or -EINVAL with `out` untouched. */
int cmon_addr_parse(const char *text, uint16_t default_port, struct cmon_addr *out);

/* Most registries a client announces to or subscribes at. */
#define CMON_REGISTRIES_MAX 8

/* One element of an address list. */
struct cmon_addr_item {
	struct cmon_addr addr;           /* parsed */
	char text[CMON_ADDRSTR_MAX];     /* as written, for messages */
};

/* Parse a comma-separated list of addresses (TELEMONREG_MACHINE=a:p,b:p;
 * blanks around the commas are ignored) into out[0..*n), at most `max`.
 * Returns 0, or -EINVAL (an empty or bad element: `err` says "bad address
 * 'ELEMENT'") or -E2BIG (`err` says "more than MAX addresses in 'TEXT'");
 * `out` and `*n` are then unspecified. */
int cmon_addr_list_parse(const char *text, uint16_t default_port, struct cmon_addr_item *out,
			 size_t max, size_t *n, char *err, size_t errlen);

/* The registries a program talks to: `flag` (its -regmachine, NULL when
 * not given), else $TELEMONREG_MACHINE when set and not empty, else
 * CMON_REGISTRY_HOST. NULL when the list is malformed (an empty -regmachine
 * included), with `err` naming where it came from and what is wrong: a
 * usage error, found before anything starts. */
const char *cmon_regmachine(const char *flag, char *err, size_t errlen);

/* Format `a` back into the syntax above; returns `buf`. */
char *cmon_addr_format(const struct cmon_addr *a, char *buf, size_t size);

/* True if `a` can only be reached from this machine (loopback or Unix). */
bool cmon_addr_is_local(const struct cmon_addr *a);

/* Open non-blocking, close-on-exec listening sockets for `a` (every address
 * the host resolves to, numerically or through /etc/hosts and DNS; an empty
 * host means every interface). Stores up to `max` fds in `fds` and their
 * count in `*n`. Returns 0 or a negative errno; `err` gets a message. */
int cmon_listen(const struct cmon_addr *a, int backlog, int *fds, size_t max, size_t *n,
		char *err, size_t errlen);

/* Local port a TCP socket is bound to (0 for Unix sockets or on error). */
uint16_t cmon_socket_port(int fd);

/* Write "ADDR:PORT" (or "unix:PATH") of the peer of `fd` into `buf`. */
char *cmon_peer_name(int fd, char *buf, size_t size);

/* Format a socket address as "1.2.3.4:5", "[::1]:5" or "unix:PATH". */
char *cmon_sockaddr_format(const struct sockaddr *sa, socklen_t len, char *buf, size_t size);

/* Tune a connected TCP socket: TCP_NODELAY and keepalive that notices a
 * vanished peer within about a minute. Harmless on Unix sockets. */
void cmon_socket_tune(int fd);

/* Process-wide heap settings for a program that moves log streams
 * (snarflog, the telemonitor, cmon-sub): blocks up to CMON_HEAP_MMAP_MAX
 * come from the heap, and up to CMON_HEAP_KEEP freed at its top is kept
 * for the next ones. With glibc's defaults, each 256 KiB chunk of a
 * stream (an evbuffer chain, a LogData payload) was mapped afresh and given
 * back: a page fault per 4 KiB of it, a third of the consumer's CPU.
 * Call first thing in main(). */
#define CMON_HEAP_MMAP_MAX (4u << 20)
#define CMON_HEAP_KEEP (16u << 20)
void cmon_heap_for_streams(void);

/* Give back to the system the whole free pages inside the heap (not only
 * at its top), keeping CMON_HEAP_KEEP at the top: after a burst (many
 * streams starting with a backlog, a checker that lagged) the blocks
 * freed in the middle of the heap would otherwise stay resident for the
 * process's life. A walk of the heap's free lists (0.01-6 ms in the
 * telemonitor at 1,000 streams, a heap of about 150 MiB; 18-39 ms for a
 * synthetic heap of 394 MiB with 100,000 holes); pages given back fault
 * in again when used, so call it every few seconds, not per event. True
 * if any memory was given back (false, too, where the C library cannot
 * do it). */
bool cmon_heap_give_back(void);

/* Who is at the other end of a connection (peercred.c): the user that
 * owns the peer's socket, and the shared secret a peer may show. What the
 * registry uses to decide who may subscribe (docs/protocol.md §8a). */

/* The uid of the peer of the connected socket `fd`: SO_PEERCRED on a Unix
 * socket; for TCP whose peer address is loopback (127.0.0.0/8, ::1, or
 * IPv4-mapped loopback), the owner of the peer's socket as the kernel's
 * socket table says (NETLINK_SOCK_DIAG, an exact lookup of that one
 * socket; no privilege needed). 0 with `*uid` set; -ENOENT when the peer
 * is not on this machine's loopback or its socket is not found (closed
 * meanwhile); another negative errno (-ENOTSOCK, -EPROTONOSUPPORT without
 * sock_diag, ...) otherwise. Blocks only for the netlink round trip, which
 * the kernel answers at once. `*uid` is untouched on failure. */
int cmon_peer_uid(int fd, uid_t *uid);

/* The same from /proc/net/tcp(6) alone: what cmon_peer_uid() falls back
 * to where the kernel or a sandbox refuses NETLINK_SOCK_DIAG. */
int cmon_peer_uid_proc(int fd, uid_t *uid);

/* A shared secret (telemonreg -secret-file, the subscribers'
 * -registry-secret-file): a file's first line without trailing blanks,
 * CMON_SECRET_MIN to CMON_SECRET_MAX bytes. */
#define CMON_SECRET_MIN 16
#define CMON_SECRET_MAX 1024

/* Read the secret in `path` into `buf` (`size` bytes, at least
 * CMON_SECRET_MAX + 1; NUL-terminated) and its length into `*len`. 0;
 * -EINVAL (shorter than CMON_SECRET_MIN, empty included); -E2BIG (longer
 * than CMON_SECRET_MAX); or the negative errno of opening or reading it.
 * `buf` and `*len` are untouched on failure. */
int cmon_secret_read_file(const char *path, char *buf, size_t size, size_t *len);

/* What went wrong, for a message "FILE: TEXT", given the return value of
 * cmon_secret_read_file(). A static string. */
const char *cmon_secret_strerror(int r);

/* Write `text` to `path` atomically (temp file + rename); 0 or -errno.
 * Used for -portfile. */
int cmon_write_file_atomic(const char *path, const char *text);

/* The same with file mode `mode` (e.g. 0600 for a secret; the umask may
 * only take bits away). */
int cmon_write_file_mode(const char *path, const char *text, mode_t mode);

#endif
