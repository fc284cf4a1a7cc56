/* The registry links: announce this instance to every registry of the
 * list (-regmachine / TELEMONREG_MACHINE, comma-separated), keep each
 * connection, and when one breaks (or its registry is not there yet) try
 * it again with exponential backoff capped at RL_BACKOFF_MAX_MS,
 * re-announcing so a restarted registry learns about us again. The
 * program is found while any one registry is up. Nothing here ever waits
 * on the network: resolution, connect and TLS are asynchronous. Each link
 * is a peer (cmon/peer.h: connect, Hello, keepalive, backoff); what is
 * ours is the Announce after our Hello, its AnnounceAck, and the Leave. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmon/log.h"
#include "cmon/peer.h"
#include "snarflog.h"

#define RL_BACKOFF_MIN_MS 100      /* first retry delay */
#define RL_BACKOFF_MAX_MS 3000     /* retry delay cap */
#define RL_CONNECT_MS 3000         /* per-address connect + handshake bound */
#define RL_LEAVE_MS 1000           /* how long a goodbye may take */

struct regset;

/* One link. */
struct reglink {
	struct snarf *s;              /* back pointer */
	struct regset *set;           /* the set it belongs to */
	struct peer *peer;            /* the connection; its state, with `up` and `done`,
	                                 is the link's: CLOSING is the goodbye */
	char name[CMON_ADDRSTR_MAX];  /* registry address for logs */
	bool up;                      /* announced on this connection (AnnounceAck) */
	bool done;                    /* finished after reg_leave() */
	bool announced;               /* an AnnounceAck has been seen once */
	bool complained;              /* the "unreachable" warning was logged */
};

/* Every registry of the list. */
struct regset {
	struct reglink *links[CMON_REGISTRIES_MAX];  /* one per registry */
	size_t n;                     /* how many */
	size_t ndone;                 /* links finished after reg_leave() */
	bool auto_wanted;             /* some registry has an auto subscriber for us */
};

/* Some link still waits for its registry's first answer (it is
 * connecting or in the handshake: a failure would have complained). */
static bool first_answer_pending(const struct regset *set)
{
	for (size_t i = 0; i < set->n; i++) {
		const struct reglink *rl = set->links[i];
		if (!rl->announced && !rl->complained && !rl->done)
			return true;
	}
	return false;
}

/* A link has its first answer (or found its registry unreachable): hold
 * the log for an auto subscriber if any registry has one; release the
 * hold once every registry has answered without one. */
static void first_answers_changed(struct regset *set, struct snarf *s)
{
	if (set->auto_wanted || first_answer_pending(set))
		return;
	core_hold_release(s, set->n > 1 ? "no auto subscriber at any registry"
					: "no auto subscriber");
}

static void finished(struct reglink *rl)
{
	if (rl->done)
		return;
	rl->done = true;
	peer_stop(rl->peer);
	if (++rl->set->ndone == rl->set->n)
		core_done(rl->s);
}

/* The connection failed or broke (the peer retries after `d->retry_ms`),
 * or the goodbye is over. */
static void on_down(struct peer *p, const struct peer_down *d, void *arg)
{
	struct reglink *rl = arg;
	char buf[300];
	const char *why = d->why;
	bool was_up = rl->up;

	(void)p;
	rl->up = false;
	if (d->was == PEER_CLOSING) {
		if (d->kind == PEER_DOWN_DEADLINE)
			cmon_debug("registry at %s did not take our goodbye in time", rl->name);
		finished(rl);
		return;
	}
	if (d->kind == PEER_DOWN_CLOSED) {
		why = "connection closed";
	} else if (d->kind == PEER_DOWN_ERROR) {
		snprintf(buf, sizeof buf, "registry refused us: %s",
			 d->error->message ? d->error->message : "?");
		why = buf;
	}
	if (was_up)
		cmon_warn("lost the registry at %s (%s); re-announcing when it is back", rl->name,
			  why);
	else if (!rl->complained)
		cmon_warn("registry at %s unreachable (%s); will keep trying every few seconds",
			  rl->name, why);
	else
		cmon_debug("registry at %s: %s; retry in %u ms", rl->name, why, d->retry_ms);
	rl->complained = true;
	if (!rl->announced)
		first_answers_changed(rl->set, rl->s);
	core_check_done(rl->s);             /* nobody to wait for any more */
}

/* Connected: the Announce follows our Hello at once. */
static void on_connected(struct peer *p, void *arg)
{
	struct reglink *rl = arg;
	struct snarf *s = rl->s;
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__Announce a = CMON__ANNOUNCE__INIT;
	Cmon__Instance in = CMON__INSTANCE__INIT;

	rl->up = false;
	in.program = (char *)s->opt.program;
	in.machine = s->machine;
	in.has_pid = true;
	in.pid = s->pid;
	in.has_start_unix_ns = true;
	in.start_unix_ns = s->start_unix_ns;
	in.data_endpoint = s->endpoint;
	in.has_format = s->format != CMON__FORMAT__FORMAT_UNSPECIFIED;
	in.format = s->format;
	in.has_tls = true;
	in.tls = s->tls_server != NULL;
	a.instance = &in;
	a.has_reannounce = true;
	a.reannounce = rl->announced;
	a.has_token = true;                 /* the registry hands it to matching subscribers */
	a.token.data = s->token;
	a.token.len = sizeof s->token;
	m.kind_case = CMON__MSG__KIND_ANNOUNCE;
	m.announce = &a;
	peer_send(p, &m);
}

/* The registry took our announcement. */
static void announce_acked(struct reglink *rl, const Cmon__AnnounceAck *ack)
{
	if (rl->complained || rl->announced)
		cmon_notice("%s to the registry at %s", rl->announced ? "re-announced" : "announced",
			    rl->name);
	else
		cmon_debug("announced to the registry at %s (key %llu)", rl->name,
			   (unsigned long long)ack->key);
	rl->up = true;
	peer_backoff_reset(rl->peer);
	rl->complained = false;
	if (!rl->announced && ack->has_auto_wanted && ack->auto_wanted && !rl->set->auto_wanted) {
		rl->set->auto_wanted = true;
		core_hold_start(rl->s, rl->s->opt.hold_s,
				"an auto subscriber wants the log from the start");
	}
	if (!rl->announced) {
		rl->announced = true;
		first_answers_changed(rl->set, rl->s);
	}
	core_check_done(rl->s);             /* the log may have ended meanwhile */
}

/* One message from the registry after its Hello: the AnnounceAck, once. */
static void on_message(struct peer *p, const Cmon__Msg *m, void *arg)
{
	struct reglink *rl = arg;
	char why[200];

	if (m->kind_case == CMON__MSG__KIND_ANNOUNCE_ACK && !rl->up &&
	    peer_state(p) == PEER_READY) {
		announce_acked(rl, m->announce_ack);
		return;
	}
	snprintf(why, sizeof why, "unexpected %s message from the registry", cmon_msg_kind_name(m));
	peer_fail(p, why);
}

static const struct peer_events link_events = {
	.on_connected = on_connected,
	.on_message = on_message,
	.on_down = on_down,
};

/* A link to the registry at `item`, not connected yet. NULL on ENOMEM. */
static struct reglink *link_new(struct snarf *s, struct regset *set,
				const struct cmon_addr_item *item)
{
	struct reglink *rl = calloc(1, sizeof *rl);
	struct peer_options opt = {
		.role = CMON__ROLE__ROLE_SNARFLOG,
		.software = "snarflog " CMON_VERSION,
		.tls = s->tls_client,
		.dns = s->dns,
		.connect_ms = RL_CONNECT_MS,
		.backoff = { .min_ms = RL_BACKOFF_MIN_MS, .max_ms = RL_BACKOFF_MAX_MS,
			     .jitter_pct = 20 },
	};

	if (!rl)
		return NULL;
	rl->s = s;
	rl->set = set;
	cmon_addr_format(&item->addr, rl->name, sizeof rl->name);
	rl->peer = peer_new(s->base, &item->addr, &opt, &link_events, rl);
	if (!rl->peer) {
		free(rl);
		return NULL;
	}
	return rl;
}

int reg_start(struct snarf *s)
{
	struct cmon_addr_item items[CMON_REGISTRIES_MAX];
	struct regset *set;
	char err[CMON_ADDRSTR_MAX + 64];
	size_t n;
	int r;

	r = cmon_addr_list_parse(s->opt.regmachine, CMON_REGISTRY_PORT, items, CMON_REGISTRIES_MAX,
				 &n, err, sizeof err);
	if (r < 0) {
		cmon_err("registry: %s", err);
		return r;
	}
	set = calloc(1, sizeof *set);
	if (!set)
		return -ENOMEM;
	s->reg = set;
	for (size_t i = 0; i < n; i++) {
		set->links[i] = link_new(s, set, &items[i]);
		if (!set->links[i])
			return -ENOMEM;             /* reg_free() cleans up */
		set->n++;
	}
	/* Until a registry answers we do not know whether an auto subscriber
	 * wants the log from its first record: keep it, briefly. */
	core_hold_start(s, s->opt.hold_s < SNARF_FIRST_ANSWER_S ? s->opt.hold_s
							      : SNARF_FIRST_ANSWER_S,
			"waiting for the registry's answer");
	for (size_t i = 0; i < set->n; i++)
		peer_start(set->links[i]->peer);
	return 0;
}

bool reg_first_answer_pending(const struct snarf *s)
{
	return s->reg && first_answer_pending(s->reg);
}

/* Say Leave on one link (or just finish it when it is not up). */
static void link_leave(struct reglink *rl)
{
	Cmon__Msg m = CMON__MSG__INIT;
	Cmon__Leave l = CMON__LEAVE__INIT;

	if (rl->done || peer_state(rl->peer) == PEER_CLOSING)
		return;
	if (!rl->up) {
		finished(rl);
		return;
	}
	l.has_records = true;
	l.records = core_log_length(rl->s);
	m.kind_case = CMON__MSG__KIND_LEAVE;
	m.leave = &l;
	peer_send(rl->peer, &m);
	peer_close_flush(rl->peer, RL_LEAVE_MS);
}

void reg_leave(struct snarf *s)
{
	struct regset *set = s->reg;

	if (!set || set->n == 0) {
		core_done(s);
		return;
	}
	/* core_done() comes from the last link to finish */
	for (size_t i = 0; i < set->n; i++)
		link_leave(set->links[i]);
}

void reg_free(struct snarf *s)
{
	struct regset *set = s->reg;

	if (!set)
		return;
	for (size_t i = 0; i < set->n; i++) {
		peer_free(set->links[i]->peer);
		free(set->links[i]);
	}
	free(set);
	s->reg = NULL;
}
