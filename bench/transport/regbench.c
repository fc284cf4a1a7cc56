/* transport-regbench — load and latency for telemonreg: one telemonitor
 * subscribes C classes, N snarflog connections announce instances, then S
 * more announces are timed one at a time from the moment the Announce is
 * written until the telemonitor receives the matching InstanceUp. Prints
 * percentiles in milliseconds. Everything runs in one libevent loop. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "cmon/connect.h"
#include "cmon/net.h"
#include "cmon/proto.h"

#define SETUP_PARALLEL 200   /* announce handshakes in flight while loading */

static struct {
	struct event_base *base;
	struct cmon_addr reg;
	int instances, classes, samples;
	struct bufferevent *tm;             /* the telemonitor connection */
	int acks;                           /* SubscribeAcks seen */
	int ups;                            /* InstanceUps seen */
	int launched, announced;            /* load phase progress */
	int sample;                         /* current sample, -1 while loading */
	double t_sent;                      /* when the sample's Announce was written */
	double *lat;                        /* latencies, ms */
	double t_all;                       /* subscribe-all start */
	int phase;                          /* 0 subscribe, 1 load, 2 samples, 3 all, 4 done */
} g;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fail(const char *what)
{
	fprintf(stderr, "transport-regbench: %s\n", what);
	exit(1);
}

static void next_step(void);

/* Program name of instance i: spread over the literal classes. */
static void prog_name(char *buf, size_t n, int i)
{
	snprintf(buf, n, "prog%d", i % (g.classes * 9 / 10 > 0 ? g.classes * 9 / 10 : 1));
}

static void send_announce(struct bufferevent *bev, int i)
{
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__Announce a = CMON__ANNOUNCE__INIT;
	Cmon__Instance in = CMON__INSTANCE__INIT;
	char prog[32];

	prog_name(prog, sizeof prog, i);
	in.program = prog;
	in.machine = "benchhost";
	in.has_pid = true;
	in.pid = 1000000 + i;
	in.data_endpoint = "127.0.0.1:9";
	a.instance = &in;
	m.kind_case = CMON__MSG__KIND_ANNOUNCE;
	m.announce = &a;
	cmon_frame_send(bufferevent_get_output(bev), &m);
}

/* A snarflog-like connection: count its AnnounceAck, ignore the rest. */
static void sn_read(struct bufferevent *bev, void *arg)
{
	const char *why;
	Cmon__Msg *m;
	int r;

	while ((r = cmon_frame_next(bufferevent_get_input(bev), CMON_CONTROL_FRAME_MAX, &m, &why)) == 1) {
		if (m->kind_case == CMON__MSG__KIND_ANNOUNCE_ACK && g.phase == 1) {
			g.announced++;
			next_step();
		}
		cmon_msg_free(m);
	}
	if (r < 0)
		fail(why);
}

static void sn_event(struct bufferevent *bev, short what, void *arg)
{
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		fail("registry closed a snarflog connection");
}

static void sn_connected(struct bufferevent *bev, const char *peer, const char *err, void *arg)
{
	int i = (int)(intptr_t)arg;

	if (!bev)
		fail(err);
	bufferevent_setcb(bev, sn_read, NULL, sn_event, NULL);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	cmon_send_hello(bufferevent_get_output(bev), CMON__ROLE__ROLE_SNARFLOG, "regbench");
	if (g.phase == 2)
		g.t_sent = now();
	send_announce(bev, i);
}

static void launch(int i)
{
	if (!cmon_connect_start(g.base, NULL, &g.reg, NULL, 10000, sn_connected,
				(void *)(intptr_t)i))
		fail("connect");
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(double p)
{
	int k = (int)(p / 100.0 * (g.samples - 1) + 0.5);
	return g.lat[k];
}

/* Drive the phases: load, timed samples, subscribe-all, report. */
static void next_step(void)
{
	if (g.phase == 1) {
		while (g.launched < g.instances && g.launched - g.announced < SETUP_PARALLEL)
			launch(g.launched++);
		if (g.announced == g.instances) {
			g.phase = 2;
			g.sample = 0;
			fprintf(stderr, "transport-regbench: %d instances and %d classes registered\n",
				g.instances, g.classes);
			launch(g.instances);
		}
	} else if (g.phase == 2) {
		if (g.sample < g.samples) {
			launch(g.instances + g.sample);
			return;
		}
		g.phase = 3;
		g.ups = 0;
		g.acks = 0;
		g.t_all = now();
		cmon_send_subscribe(bufferevent_get_output(g.tm), 999999, "*", NULL, NULL, false, false);
	}
}

static void tm_read(struct bufferevent *bev, void *arg)
{
	const char *why;
	Cmon__Msg *m;
	int r;

	while ((r = cmon_frame_next(bufferevent_get_input(bev), CMON_FRAME_MAX, &m, &why)) == 1) {
		if (m->kind_case == CMON__MSG__KIND_SUBSCRIBE_ACK) {
			g.acks++;
			if (g.phase == 0 && g.acks == g.classes) {
				g.phase = 1;
				next_step();
			} else if (g.phase == 3) {
				printf("subscribe '*' -> ack after %d notifications: %.2f ms\n", g.ups,
				       (now() - g.t_all) * 1e3);
				g.phase = 4;
				event_base_loopexit(g.base, NULL);
			}
		} else if (m->kind_case == CMON__MSG__KIND_INSTANCE_UP) {
			g.ups++;
			if (g.phase == 2 && m->instance_up->instance->pid ==
						    1000000 + g.instances + g.sample) {
				g.lat[g.sample++] = (now() - g.t_sent) * 1e3;
				next_step();
			}
		}
		cmon_msg_free(m);
	}
	if (r < 0)
		fail(why);
}

static void tm_event(struct bufferevent *bev, short what, void *arg)
{
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		fail("registry closed the telemonitor connection");
}

static void tm_connected(struct bufferevent *bev, const char *peer, const char *err, void *arg)
{
	struct evbuffer *out;
	char prog[32];

	if (!bev)
		fail(err);
	g.tm = bev;
	bufferevent_setcb(bev, tm_read, NULL, tm_event, NULL);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	out = bufferevent_get_output(bev);
	cmon_send_hello(out, CMON__ROLE__ROLE_TELEMONITOR, "regbench");
	/* 90% literal classes (one program each), 10% wildcard classes that
	 * match nothing but still have to be tried. */
	for (int c = 0; c < g.classes; c++) {
		if (c < g.classes * 9 / 10) {
			snprintf(prog, sizeof prog, "prog%d", c);
			cmon_send_subscribe(out, (uint32_t)c, prog, NULL, NULL, false, false);
		} else {
			snprintf(prog, sizeof prog, "w%d*x?", c);
			cmon_send_subscribe(out, (uint32_t)c, prog, "bench*", NULL, false, false);
		}
	}
}

int main(int argc, char **argv)
{
	const char *reg = NULL;

	g.instances = 10000;
	g.classes = 1000;
	g.samples = 1000;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-reg"))
			reg = argv[i + 1];
		else if (!strcmp(argv[i], "-instances"))
			g.instances = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-classes"))
			g.classes = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-samples"))
			g.samples = atoi(argv[i + 1]);
	}
	if (!reg || cmon_addr_parse(reg, CMON_REGISTRY_PORT, &g.reg) < 0 || g.samples < 1 ||
	    g.classes < 10) {
		fprintf(stderr, "usage: transport-regbench -reg HOST:PORT [-instances N] "
				"[-classes C>=10] [-samples S]\n");
		return 2;
	}
	g.lat = calloc((size_t)g.samples, sizeof *g.lat);
	g.base = event_base_new();
	if (!cmon_connect_start(g.base, NULL, &g.reg, NULL, 10000, tm_connected, NULL))
		fail("connect");
	event_base_dispatch(g.base);
	qsort(g.lat, (size_t)g.samples, sizeof *g.lat, cmp);
	printf("announce -> notify with %d instances, %d classes, %d samples: "
	       "p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms\n",
	       g.instances, g.classes, g.samples, pct(50), pct(90), pct(99), g.lat[g.samples - 1]);
	return 0;
}
