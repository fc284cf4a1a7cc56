/* cmon-sub — a minimal telemonitor for tests and benchmarks.
 *
 *   cmon-sub -watch [class options]       print registry notifications
 *   cmon-sub [class options] [-o FILE]    subscribe, fetch the first matching
 *                                         instance's log, write it to FILE
 *   cmon-sub -connect ADDR [-o FILE]      fetch from a data endpoint directly
 *            [-token HEX | -token-file FILE]   (showing snarflog's token)
 *
 * The log written is exactly what a tool would get: the saved header, whole
 * records, and a gap marker in the log's format wherever snarflog dropped
 * records. Knobs (-stall, -pause-after, -stop-after, -drop-after) make it a
 * misbehaving consumer on purpose. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <openssl/rand.h>

#include "cmon/connect.h"
#include "cmon/log.h"
#include "cmon/logfmt.h"
#include "cmon/names.h"
#include "cmon/net.h"
#include "cmon/proto.h"
#include "cmon/tls.h"
#include "cmon/token.h"

static const char usage[] =
	"usage: cmon-sub [-watch] [-prog PAT] [-machine PAT] [-pid PAT] [-auto] [-block]\n"
	"                [-regmachine ADDR] [-connect ADDR] [-o FILE] [-timeout SEC]\n"
	"                [-token HEX | -token-file FILE]\n"
	"                [-registry-secret-file FILE]  (default $CMON_REGISTRY_SECRET_FILE)\n"
	"                [-ready FILE] [-streaming FILE] [-stats FILE]\n"
	"                [-stall] [-pause-after N -pause-ms MS] [-stop-after N] [-drop-after N]\n"
	"                [-rcvbuf BYTES] [-batch MS]\n"
	"                [-tls-cert FILE -tls-key FILE] [-tls-ca FILE] [-debug]\n"
	"exit: 0 log ended (or -drop-after done), 1 error, 2 usage, 3 busy, 4 timeout,\n"
	"      5 refused (not authorized)\n";

/* Where the data connection is. */
enum data_state {
	D_IDLE,          /* no instance chosen yet */
	D_CONNECTING,    /* connecting to the data endpoint */
	D_HELLO,         /* connected; waiting for the snarflog's Hello */
	D_PROOF,         /* Hello with a challenge sent; waiting for its Proof */
	D_ACCEPT,        /* Start sent; waiting for Accepted or Busy */
	D_STREAMING,     /* receiving the log */
	D_DONE,          /* finished */
};

/* Settings and state (one instance: this is a small tool). */
static struct {
	bool watch, autostart, block, stall, debug;
	const char *prog, *machine, *pid, *regmachine, *connect, *out, *ready, *streaming, *stats;
	double timeout;
	long pause_after, pause_ms, stop_after, drop_after, rcvbuf, batch_ms;
	uint64_t frames;              /* LogData messages received */
	struct cmon_tls_opts tls;
	const char *registry_secret_file;  /* shown to the registry in Hello.secret */
	char registry_secret[CMON_SECRET_MAX + 1];
	size_t registry_secret_len;
	const char *token_hex, *token_file;
	bool has_token;               /* shown in Start: from -token(-file) or InstanceUp */
	uint8_t token[CMON_TOKEN_LEN];
	uint8_t challenge[CMON_CHALLENGE_LEN]; /* what the endpoint must prove it can sign */

	struct event_base *base;
	SSL_CTX *tls_ctx;
	struct bufferevent *reg, *data;
	bool reg_hello;
	enum data_state dstate;
	Cmon__Format format;
	int outfd;
	uint64_t records, gaps, gapped, data_bytes;
	bool paused_once, stopped;
	int exit_code;
	const char *end_reason;
	struct event *pause_timer, *timeout_timer;
} g = { .outfd = 1, .exit_code = 1, .end_reason = "none" };

static void finish(int code)
{
	if (g.dstate != D_DONE)
		g.exit_code = code;
	g.dstate = D_DONE;
	event_base_loopexit(g.base, NULL);
}

static void touch(const char *path)
{
	if (path)
		cmon_write_file_atomic(path, "ok\n");
}

static void write_all(const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(g.outfd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			cmon_err("write: %s", strerror(errno));
			finish(1);
			return;
		}
		p += w;
		n -= (size_t)w;
	}
}

static void pause_done(evutil_socket_t fd, short what, void *arg)
{
	if (g.data)
		bufferevent_enable(g.data, EV_READ);
}

static void on_data(const Cmon__Msg *m)
{
	size_t whole;
	uint8_t marker[CMON_GAP_MARKER_MAX];

	switch (m->kind_case) {
	case CMON__MSG__KIND_HEADER:
		if (m->header->has_data)
			write_all(m->header->data.data, m->header->data.len);
		return;
	case CMON__MSG__KIND_DATA:
		if (!m->data->has_data)
			return;
		write_all(m->data->data.data, m->data->data.len);
		g.records += cmon_log_count_records(g.format, m->data->data.data,
						    m->data->data.len, &whole);
		g.data_bytes += m->data->data.len;
		g.frames++;
		break;
	case CMON__MSG__KIND_GAP:
		write_all(marker, cmon_log_gap_marker(g.format, m->gap->count, marker));
		g.gaps++;
		g.gapped += m->gap->count;
		return;
	case CMON__MSG__KIND_END:
		g.end_reason = m->end->reason == CMON__END_REASON__END_EOF ? "eof"
			       : m->end->reason == CMON__END_REASON__END_STOPPED ? "stopped"
										 : "shutdown";
		finish(0);
		return;
	default:
		cmon_err("unexpected %s on the data connection", cmon_msg_kind_name(m));
		finish(1);
		return;
	}
	if (g.drop_after >= 0 && g.records >= (uint64_t)g.drop_after) {
		g.end_reason = "dropped";
		finish(0);
		return;
	}
	if (g.stop_after >= 0 && !g.stopped && g.records >= (uint64_t)g.stop_after) {
		cmon_send_stop(bufferevent_get_output(g.data));
		g.stopped = true;
	}
	if (g.pause_after >= 0 && !g.paused_once && g.records >= (uint64_t)g.pause_after) {
		struct timeval tv = { g.pause_ms / 1000, (g.pause_ms % 1000) * 1000 };
		g.paused_once = true;
		bufferevent_disable(g.data, EV_READ);
		evtimer_add(g.pause_timer, &tv);
	}
}

static void send_start(struct bufferevent *bev);

static void data_read(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	const char *why = NULL;
	Cmon__Role role;
	char buf[200];
	Cmon__Msg *m;
	int r;

	cmon_bev_read_more(bev, CMON_READ_MORE);
	while (g.dstate != D_DONE && (bufferevent_get_enabled(bev) & EV_READ)) {
		r = cmon_frame_next(in, CMON_FRAME_MAX, &m, &why);
		if (r == 0)
			return;
		if (r < 0) {
			cmon_err("data connection: %s", why);
			finish(1);
			return;
		}
		switch (g.dstate) {
		case D_HELLO:
			if (!cmon_hello_ok(m, &role, buf, sizeof buf)) {
				cmon_err("data connection: %s", buf);
				finish(1);
				break;
			}
			/* with a token, the endpoint proves it holds it before
			 * we send it (docs/protocol.md §8a) */
			if (g.has_token) {
				if (RAND_bytes(g.challenge, sizeof g.challenge) != 1) {
					finish(1);
					break;
				}
				cmon_send_hello_ext(bufferevent_get_output(bev),
						    CMON__ROLE__ROLE_TELEMONITOR,
						    "cmon-sub " CMON_VERSION, g.challenge,
						    sizeof g.challenge, NULL, 0);
				g.dstate = D_PROOF;
				break;
			}
			cmon_send_hello(bufferevent_get_output(bev), CMON__ROLE__ROLE_TELEMONITOR,
					"cmon-sub " CMON_VERSION);
			send_start(bev);
			break;
		case D_PROOF:
			if (m->kind_case == CMON__MSG__KIND_ERROR) {
				fprintf(stderr, "cmon-sub: refused: %s\n",
					m->error->message ? m->error->message : "?");
				finish(1);
			} else if (!cmon_proof_ok(m, g.token, CMON_TOKEN_LEN, g.challenge,
						  sizeof g.challenge)) {
				fprintf(stderr, "cmon-sub: refused: not authorized: the endpoint did "
					"not prove it holds our token (a wrong token, or not that "
					"snarflog)\n");
				finish(5);
			} else {
				send_start(bev);
			}
			break;
		case D_ACCEPT:
			if (m->kind_case == CMON__MSG__KIND_BUSY) {
				fprintf(stderr, "cmon-sub: busy: %s\n",
					m->busy->holder ? m->busy->holder : "?");
				finish(3);
			} else if (m->kind_case == CMON__MSG__KIND_ERROR) {
				fprintf(stderr, "cmon-sub: refused: %s\n",
					m->error->message ? m->error->message : "?");
				finish(m->error->code == CMON__ERROR_CODE__ERROR_DENIED ? 5 : 1);
			} else if (m->kind_case == CMON__MSG__KIND_ACCEPTED) {
				const Cmon__Instance *in2 = m->accepted->instance;
				g.format = in2 && in2->has_format ? in2->format : CMON__FORMAT__FORMAT_ASCII;
				g.dstate = D_STREAMING;
				cmon_debug("accepted: %s log, %llu records skipped",
					   cmon_format_name(g.format),
					   (unsigned long long)m->accepted->skipped);
				touch(g.streaming);
				if (g.stall) {
					bufferevent_disable(bev, EV_READ);
				}
			} else {
				cmon_err("expected accepted, got %s", cmon_msg_kind_name(m));
				finish(1);
			}
			break;
		case D_STREAMING:
			on_data(m);
			break;
		default:
			break;
		}
		cmon_msg_free(m);
	}
}

static void data_event(struct bufferevent *bev, short what, void *arg)
{
	if (what & BEV_EVENT_CONNECTED)
		return;
	cmon_err("data connection %s before the end of the log",
		 what & BEV_EVENT_EOF ? "closed" : "failed");
	finish(1);
}

static void send_start(struct bufferevent *bev)
{
	cmon_send_start(bufferevent_get_output(bev),
			&(struct cmon_start){ .block = g.block, .from_start = g.autostart,
					      .token = g.has_token ? g.token : NULL,
					      .token_len = g.has_token ? CMON_TOKEN_LEN : 0,
					      .batch_ms = (unsigned)g.batch_ms });
	g.dstate = D_ACCEPT;
}

static void data_connected(struct bufferevent *bev, const char *peer, const char *err, void *arg)
{
	if (!bev) {
		cmon_err("cannot connect to the data endpoint: %s", err);
		finish(1);
		return;
	}
	g.data = bev;
	g.dstate = D_HELLO;
	if (g.rcvbuf > 0) {
		int v = (int)g.rcvbuf;
		/* A small window keeps little data in flight, so a paused or
		 * stalled consumer shows up at snarflog quickly. */
		setsockopt(bufferevent_getfd(bev), SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
	}
	bufferevent_setcb(bev, data_read, NULL, data_event, NULL);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	/* nothing is sent until the endpoint has said Hello */
}

static void fetch(const char *endpoint, bool tls)
{
	struct cmon_addr a;

	if (cmon_addr_parse(endpoint, 0, &a) < 0) {
		cmon_err("bad endpoint %s", endpoint);
		finish(1);
		return;
	}
	g.dstate = D_CONNECTING;
	if (!cmon_connect_start(g.base, NULL, &a, tls ? g.tls_ctx : NULL, 5000, data_connected,
				NULL))
		finish(1);
}

static void print_instance(const char *what, uint32_t id, const Cmon__Instance *in,
			   const char *extra, const ProtobufCBinaryData *token)
{
	char hex[CMON_TOKEN_HEX_LEN + 1] = "-";

	if (token && token->len == CMON_TOKEN_LEN)
		cmon_token_hex(token->data, hex);
	else if (token)
		snprintf(hex, sizeof hex, "bad-length-%zu", token->len);
	printf("%s %u %s %s %lld %s %s key=%llu token=%s\n", what, id, in->program, in->machine,
	       (long long)in->pid, in->data_endpoint ? in->data_endpoint : "-", extra,
	       (unsigned long long)in->key, hex);
	fflush(stdout);
}

static void reg_read(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	const char *why = NULL;
	Cmon__Role role;
	char buf[200];
	Cmon__Msg *m;
	int r;

	while (g.reg && (r = cmon_frame_next(in, CMON_CONTROL_FRAME_MAX, &m, &why)) != 0) {
		if (r < 0) {
			cmon_err("registry: %s", why);
			finish(1);
			return;
		}
		if (!g.reg_hello) {
			if (!cmon_hello_ok(m, &role, buf, sizeof buf)) {
				cmon_err("registry: %s", buf);
				finish(1);
			}
			g.reg_hello = true;
		} else if (m->kind_case == CMON__MSG__KIND_SUBSCRIBE_ACK) {
			if (g.watch) {
				printf("ack %u %u\n", m->subscribe_ack->id, m->subscribe_ack->existing);
				fflush(stdout);
			}
			touch(g.ready);
		} else if (m->kind_case == CMON__MSG__KIND_INSTANCE_UP) {
			const Cmon__InstanceUp *up = m->instance_up;
			snprintf(buf, sizeof buf, "new=%d auto=%d", up->is_new, up->auto_);
			if (g.watch) {
				print_instance("up", up->sub_id, up->instance, buf,
					       up->has_token ? &up->token : NULL);
			} else if (g.dstate == D_IDLE) {
				if (!g.token_hex && !g.token_file && up->has_token &&
				    up->token.len == CMON_TOKEN_LEN) {
					g.has_token = true;
					memcpy(g.token, up->token.data, CMON_TOKEN_LEN);
				}
				fetch(up->instance->data_endpoint, up->instance->tls);
			}
		} else if (m->kind_case == CMON__MSG__KIND_INSTANCE_GONE) {
			const Cmon__InstanceGone *gone = m->instance_gone;
			snprintf(buf, sizeof buf, "clean=%d", gone->clean);
			if (g.watch)
				print_instance("gone", gone->sub_id, gone->instance, buf, NULL);
		} else if (m->kind_case == CMON__MSG__KIND_ERROR) {
			cmon_err("registry error: %s", m->error->message ? m->error->message : "?");
			if (g.watch) {
				printf("error %d %s\n", (int)m->error->code,
				       m->error->message ? m->error->message : "?");
				fflush(stdout);
			}
			finish(m->error->code == CMON__ERROR_CODE__ERROR_DENIED ? 5 : 1);
		} else if (m->kind_case == CMON__MSG__KIND_PING) {
			cmon_send_ping(bufferevent_get_output(bev), true, m->ping->nonce);
		}
		cmon_msg_free(m);
	}
}

static void reg_event(struct bufferevent *bev, short what, void *arg)
{
	char tlserr[200];

	if (what & BEV_EVENT_CONNECTED)
		return;
	if (!(what & BEV_EVENT_EOF))
		cmon_err("registry connection: %s", EVUTIL_SOCKET_ERROR()
			 ? evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR())
			 : cmon_tls_error(bev, tlserr, sizeof tlserr));
	if (g.watch) {
		printf("registry-lost\n");
		fflush(stdout);
		finish(1);
		return;
	}
	cmon_debug("registry connection lost");
	bufferevent_free(g.reg);
	g.reg = NULL;
	if (g.dstate == D_IDLE)
		finish(1);
}

static void reg_connected(struct bufferevent *bev, const char *peer, const char *err, void *arg)
{
	struct evbuffer *out;

	if (!bev) {
		cmon_err("cannot reach the registry: %s", err);
		finish(1);
		return;
	}
	g.reg = bev;
	bufferevent_setcb(bev, reg_read, NULL, reg_event, NULL);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	out = bufferevent_get_output(bev);
	cmon_send_hello_ext(out, CMON__ROLE__ROLE_TELEMONITOR, "cmon-sub " CMON_VERSION, NULL, 0,
			    (const uint8_t *)g.registry_secret, g.registry_secret_len);
	cmon_send_subscribe(out, 1, g.prog, g.machine, g.pid, g.autostart, g.block);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	cmon_err("timed out after %.1f s", g.timeout);
	g.end_reason = "timeout";
	finish(4);
}

static void on_signal(evutil_socket_t fd, short what, void *arg)
{
	g.end_reason = "signal";
	finish(g.watch ? 0 : 1);
}

static void parse_args(int argc, char **argv)
{
	enum { O_WATCH = 1, O_PROG, O_MACHINE, O_PID, O_AUTO, O_BLOCK, O_REG, O_CONNECT, O_OUT,
	       O_TIMEOUT, O_READY, O_STREAMING, O_STATS, O_STALL, O_PAUSE_AFTER, O_PAUSE_MS,
	       O_STOP_AFTER, O_DROP_AFTER, O_RCVBUF, O_CERT, O_KEY, O_CA, O_TOKEN, O_TOKEN_FILE,
	       O_REG_SECRET, O_DEBUG, O_HELP, O_VERSION, O_BATCH };
	static const struct option opts[] = {
		{ "watch", no_argument, NULL, O_WATCH }, { "prog", required_argument, NULL, O_PROG },
		{ "machine", required_argument, NULL, O_MACHINE },
		{ "pid", required_argument, NULL, O_PID }, { "auto", no_argument, NULL, O_AUTO },
		{ "block", no_argument, NULL, O_BLOCK },
		{ "regmachine", required_argument, NULL, O_REG },
		{ "connect", required_argument, NULL, O_CONNECT },
		{ "o", required_argument, NULL, O_OUT },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "ready", required_argument, NULL, O_READY },
		{ "streaming", required_argument, NULL, O_STREAMING },
		{ "stats", required_argument, NULL, O_STATS },
		{ "stall", no_argument, NULL, O_STALL },
		{ "pause-after", required_argument, NULL, O_PAUSE_AFTER },
		{ "pause-ms", required_argument, NULL, O_PAUSE_MS },
		{ "stop-after", required_argument, NULL, O_STOP_AFTER },
		{ "drop-after", required_argument, NULL, O_DROP_AFTER },
		{ "rcvbuf", required_argument, NULL, O_RCVBUF },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "tls-cert", required_argument, NULL, O_CERT },
		{ "tls-key", required_argument, NULL, O_KEY },
		{ "tls-ca", required_argument, NULL, O_CA },
		{ "token", required_argument, NULL, O_TOKEN },
		{ "token-file", required_argument, NULL, O_TOKEN_FILE },
		{ "registry-secret-file", required_argument, NULL, O_REG_SECRET },
		{ "debug", no_argument, NULL, O_DEBUG }, { "help", no_argument, NULL, O_HELP },
		{ "version", no_argument, NULL, O_VERSION }, { NULL, 0, NULL, 0 },
	};
	int c;

	g.pause_after = g.stop_after = g.drop_after = -1;
	g.pause_ms = 1000;
	while ((c = getopt_long_only(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case O_WATCH: g.watch = true; break;
		case O_PROG: g.prog = optarg; break;
		case O_MACHINE: g.machine = optarg; break;
		case O_PID: g.pid = optarg; break;
		case O_AUTO: g.autostart = true; break;
		case O_BLOCK: g.block = true; break;
		case O_REG: g.regmachine = optarg; break;
		case O_CONNECT: g.connect = optarg; break;
		case O_OUT: g.out = optarg; break;
		case O_TIMEOUT: g.timeout = atof(optarg); break;
		case O_READY: g.ready = optarg; break;
		case O_STREAMING: g.streaming = optarg; break;
		case O_STATS: g.stats = optarg; break;
		case O_STALL: g.stall = true; break;
		case O_PAUSE_AFTER: g.pause_after = atol(optarg); break;
		case O_PAUSE_MS: g.pause_ms = atol(optarg); break;
		case O_STOP_AFTER: g.stop_after = atol(optarg); break;
		case O_DROP_AFTER: g.drop_after = atol(optarg); break;
		case O_RCVBUF: g.rcvbuf = atol(optarg); break;
		case O_BATCH: g.batch_ms = atol(optarg); break;
		case O_CERT: g.tls.cert = optarg; break;
		case O_KEY: g.tls.key = optarg; break;
		case O_CA: g.tls.ca = optarg; break;
		case O_TOKEN: g.token_hex = optarg; break;
		case O_TOKEN_FILE: g.token_file = optarg; break;
		case O_REG_SECRET: g.registry_secret_file = optarg; break;
		case O_DEBUG: g.debug = true; break;
		case O_HELP: fputs(usage, stdout); exit(0);
		case O_VERSION: puts("cmon-sub " CMON_VERSION); exit(0);
		default: fputs(usage, stderr); exit(2);
		}
	}
	if (optind < argc) {
		fputs(usage, stderr);
		exit(2);
	}
	if (g.token_hex && cmon_token_parse(g.token_hex, g.token) < 0) {
		fprintf(stderr, "cmon-sub: -token wants %d hex digits\n", CMON_TOKEN_HEX_LEN);
		exit(2);
	}
	if (g.token_file) {
		int r = cmon_token_read_file(g.token_file, g.token);
		if (r < 0) {
			fprintf(stderr, "cmon-sub: %s: %s\n", g.token_file,
				r == -EINVAL ? "not a token" : strerror(-r));
			exit(2);
		}
	}
	g.has_token = g.token_hex || g.token_file;
	if (!g.registry_secret_file)
		g.registry_secret_file = getenv("CMON_REGISTRY_SECRET_FILE");
	if (g.registry_secret_file && *g.registry_secret_file) {
		int r = cmon_secret_read_file(g.registry_secret_file, g.registry_secret,
					      sizeof g.registry_secret, &g.registry_secret_len);
		if (r < 0) {
			fprintf(stderr, "cmon-sub: %s: %s\n", g.registry_secret_file,
				cmon_secret_strerror(r));
			exit(2);
		}
	}
	if (!g.regmachine)
		g.regmachine = getenv("TELEMONREG_MACHINE");
	if (!g.regmachine || !*g.regmachine)
		g.regmachine = CMON_REGISTRY_HOST;
}

int main(int argc, char **argv)
{
	struct event *sig1, *sig2;
	struct cmon_addr a;
	char err[400];
	FILE *f;

	cmon_heap_for_streams();

	parse_args(argc, argv);
	cmon_log_init("cmon-sub", g.debug);
	signal(SIGPIPE, SIG_IGN);
	if (g.out) {
		g.outfd = open(g.out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (g.outfd < 0) {
			cmon_err("%s: %s", g.out, strerror(errno));
			return 1;
		}
	}
	g.base = event_base_new();
	if (cmon_tls_enabled(&g.tls)) {
		g.tls_ctx = cmon_tls_client_ctx(&g.tls, err, sizeof err);
		if (!g.tls_ctx) {
			cmon_err("%s", err);
			return 1;
		}
	}
	g.pause_timer = evtimer_new(g.base, pause_done, NULL);
	g.timeout_timer = evtimer_new(g.base, on_timeout, NULL);
	sig1 = evsignal_new(g.base, SIGTERM, on_signal, NULL);
	sig2 = evsignal_new(g.base, SIGINT, on_signal, NULL);
	evsignal_add(sig1, NULL);
	evsignal_add(sig2, NULL);
	if (g.timeout > 0) {
		struct timeval tv = { (time_t)g.timeout,
				      (suseconds_t)((g.timeout - (double)(time_t)g.timeout) * 1e6) };
		evtimer_add(g.timeout_timer, &tv);
	}
	if (g.connect) {
		fetch(g.connect, g.tls_ctx != NULL);
	} else {
		if (cmon_addr_parse(g.regmachine, CMON_REGISTRY_PORT, &a) < 0) {
			cmon_err("bad registry address %s", g.regmachine);
			return 2;
		}
		if (!cmon_connect_start(g.base, NULL, &a, a.kind == CMON_ADDR_TCP ? g.tls_ctx : NULL,
					5000, reg_connected, NULL))
			return 1;
	}
	event_base_dispatch(g.base);
	if (g.stats && (f = fopen(g.stats, "w"))) {
		fprintf(f, "records=%llu\ngaps=%llu\ngapped=%llu\nbytes=%llu\nend=%s\nframes=%llu\n",
			(unsigned long long)g.records, (unsigned long long)g.gaps,
			(unsigned long long)g.gapped, (unsigned long long)g.data_bytes, g.end_reason,
			(unsigned long long)g.frames);
		fclose(f);
	}
	if (g.data)
		bufferevent_free(g.data);
	if (g.reg)
		bufferevent_free(g.reg);
	event_free(sig1);
	event_free(sig2);
	event_free(g.pause_timer);
	event_free(g.timeout_timer);
	SSL_CTX_free(g.tls_ctx);
	event_base_free(g.base);
	if (g.outfd > 1)
		close(g.outfd);
	return g.exit_code;
}
