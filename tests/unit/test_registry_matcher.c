/* Unit tests for the registry's matcher (daemons/registry/matcher.c): with
 * fake subscriber and announcer connections (no sockets, no loop), which
 * subscriber is told which InstanceUp or InstanceGone, what the ack counts,
 * and how patterns, the auto flag, tokens and re-announcements shape them.
 * The matcher sends nothing itself: the test's r.events.send records every
 * message it asks for. The registry is a program, not a library, so the
 * module is compiled into this test directly. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../daemons/registry/matcher.c"

#define MAX_SENT 64
#define NCONNS 4

/* One message the matcher asked to send, copied out of its stack. */
struct sent {
	struct conn *to;              /* the connection it was for */
	Cmon__Msg__KindCase kind;     /* InstanceUp, InstanceGone or SubscribeAck */
	uint32_t id;                  /* sub_id (Up, Gone) or the ack's id */
	char program[CMON_NAME_MAX + 1]; /* Up, Gone: the instance's */
	char machine[CMON_NAME_MAX + 1]; /* Up, Gone: the instance's */
	int64_t pid;                  /* Up, Gone: the instance's */
	uint64_t key;                 /* Up, Gone: the instance's registry key */
	bool is_new;                  /* Up */
	bool autostart;               /* Up: the class's auto flag */
	bool has_token;               /* Up: carried the instance's token... */
	uint8_t token[CMON_TOKEN_LEN]; /* ...this one */
	bool clean;                   /* Gone: it said Leave */
	bool has_records;             /* Gone: with the log's length... */
	uint64_t records;             /* ...this one */
	uint32_t existing;            /* Ack: InstanceUps before it */
};

/* A registry with two subscribers (tm[0], tm[1]) and two announcers
 * (snarf[0], snarf[1]), and what the matcher sent. */
struct fixture {
	struct reg r;
	struct conn tm[NCONNS];
	struct conn snarf[NCONNS];
	struct sent sent[MAX_SENT];
	size_t nsent;
};

static void copy_instance(struct sent *s, const Cmon__Instance *in)
{
	snprintf(s->program, sizeof s->program, "%s", in->program);
	snprintf(s->machine, sizeof s->machine, "%s", in->machine);
	s->pid = in->pid;
	s->key = in->key;
}

/* The fake connection layer: remember what was asked. */
static void record_send(void *arg, struct conn *to, const Cmon__Msg *m)
{
	struct fixture *f = arg;
	struct sent *s;

	assert_true(f->nsent < MAX_SENT);
	s = &f->sent[f->nsent++];
	memset(s, 0, sizeof *s);
	s->to = to;
	s->kind = m->kind_case;
	switch (m->kind_case) {
	case CMON__MSG__KIND_INSTANCE_UP:
		assert_true(m->instance_up->has_sub_id && m->instance_up->has_is_new &&
			    m->instance_up->has_auto_);
		s->id = m->instance_up->sub_id;
		copy_instance(s, m->instance_up->instance);
		s->is_new = m->instance_up->is_new;
		s->autostart = m->instance_up->auto_;
		s->has_token = m->instance_up->has_token;
		if (s->has_token) {
			assert_int_equal(m->instance_up->token.len, CMON_TOKEN_LEN);
			memcpy(s->token, m->instance_up->token.data, CMON_TOKEN_LEN);
		}
		break;
	case CMON__MSG__KIND_INSTANCE_GONE:
		assert_true(m->instance_gone->has_sub_id && m->instance_gone->has_clean);
		s->id = m->instance_gone->sub_id;
		copy_instance(s, m->instance_gone->instance);
		s->clean = m->instance_gone->clean;
		s->has_records = m->instance_gone->has_records;
		s->records = m->instance_gone->records;
		break;
	case CMON__MSG__KIND_SUBSCRIBE_ACK:
		assert_true(m->subscribe_ack->has_id && m->subscribe_ack->has_existing);
		s->id = m->subscribe_ack->id;
		s->existing = m->subscribe_ack->existing;
		break;
	default:
		fail_msg("the matcher sent message kind %d", (int)m->kind_case);
	}
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	size_t i;

	if (!f)
		return -1;
	TAILQ_INIT(&f->r.conns);
	TAILQ_INIT(&f->r.doomed);
	TAILQ_INIT(&f->r.instances);
	TAILQ_INIT(&f->r.gone);
	TAILQ_INIT(&f->r.subs);
	f->r.events.send = record_send;
	f->r.events.arg = f;
	for (i = 0; i < NCONNS; i++) {
		f->tm[i].reg = &f->r;
		f->tm[i].state = CONN_TELEMONITOR;
		TAILQ_INIT(&f->tm[i].subs);
		snprintf(f->tm[i].peer, sizeof f->tm[i].peer, "tm%zu", i);
		f->snarf[i].reg = &f->r;
		f->snarf[i].state = CONN_ANNOUNCED;
		TAILQ_INIT(&f->snarf[i].subs);
		snprintf(f->snarf[i].peer, sizeof f->snarf[i].peer, "snarf%zu", i);
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	size_t i;

	for (i = 0; i < NCONNS; i++)
		matcher_remove_conn_subs(&f->r, &f->tm[i]);
	matcher_free_all(&f->r);
	assert_int_equal(f->r.nsubs, 0);
	free(f);
	return 0;
}

/* Subscriber `c` adds class `id`; expects success, and forgets the ack and
 * any InstanceUp it caused unless `keep`. */
static void subscribe(struct fixture *f, struct conn *c, uint32_t id, const char *program,
		      const char *machine, const char *pid, bool autostart, bool keep)
{
	Cmon__Subscribe m = CMON__SUBSCRIBE__INIT;
	char why[128] = "";

	m.id = id;
	m.program = (char *)program;
	m.machine = (char *)machine;
	m.pid = (char *)pid;
	m.has_auto_ = true;
	m.auto_ = autostart;
	assert_int_equal(matcher_add_sub(&f->r, c, &m, why, sizeof why), 0);
	if (!keep)
		f->nsent = 0;
}

/* Announcer `c` announces an instance; returns matcher_add_instance()'s
 * answer with the instance in *out. `token`: CMON_TOKEN_LEN bytes or NULL. */
static int announce(struct fixture *f, struct conn *c, const char *program, const char *machine,
		    int64_t pid, bool reannounce, const uint8_t *token, struct instance **out)
{
	Cmon__Announce a = CMON__ANNOUNCE__INIT;
	Cmon__Instance in = CMON__INSTANCE__INIT;
	int rc;

	in.program = (char *)program;
	in.machine = (char *)machine;
	in.has_pid = true;
	in.pid = pid;
	a.instance = &in;
	a.has_reannounce = reannounce;
	a.reannounce = reannounce;
	if (token) {
		a.has_token = true;
		a.token.data = (uint8_t *)token;
		a.token.len = CMON_TOKEN_LEN;
	}
	rc = matcher_add_instance(&f->r, c, &a, "192.0.2.1:4000", out);
	if (rc >= 0)
		c->inst = *out;
	return rc;
}

static void assert_up(const struct sent *s, struct conn *to, uint32_t id, const char *program,
		      bool is_new, bool autostart)
{
	assert_int_equal(s->kind, CMON__MSG__KIND_INSTANCE_UP);
	assert_ptr_equal(s->to, to);
	assert_int_equal(s->id, id);
	assert_string_equal(s->program, program);
	assert_int_equal(s->is_new, is_new);
	assert_int_equal(s->autostart, autostart);
}

static void assert_gone(const struct sent *s, struct conn *to, uint32_t id, const char *program,
			bool clean)
{
	assert_int_equal(s->kind, CMON__MSG__KIND_INSTANCE_GONE);
	assert_ptr_equal(s->to, to);
	assert_int_equal(s->id, id);
	assert_string_equal(s->program, program);
	assert_int_equal(s->clean, clean);
}

static void assert_ack(const struct sent *s, struct conn *to, uint32_t id, uint32_t existing)
{
	assert_int_equal(s->kind, CMON__MSG__KIND_SUBSCRIBE_ACK);
	assert_ptr_equal(s->to, to);
	assert_int_equal(s->id, id);
	assert_int_equal(s->existing, existing);
}

/* A new instance is told, as new, to every class that matches it and to no
 * other; an auto class that matches makes the answer 1. */
static void new_instance_told_to_matching_classes(void **state)
{
	struct fixture *f = *state;
	struct instance *inst;

	subscribe(f, &f->tm[0], 1, "web", "", "", false, false);
	subscribe(f, &f->tm[0], 2, "db", "", "", true, false);
	subscribe(f, &f->tm[1], 7, "", "", "", true, false);

	assert_int_equal(announce(f, &f->snarf[0], "web", "m1", 100, false, NULL, &inst), 1);
	assert_int_equal(f->nsent, 2);
	assert_up(&f->sent[0], &f->tm[0], 1, "web", true, false);
	assert_up(&f->sent[1], &f->tm[1], 7, "web", true, true);
	assert_string_equal(f->sent[0].machine, "m1");
	assert_int_equal(f->sent[0].pid, 100);
	assert_int_equal(f->sent[0].key, inst->info.key);
	assert_int_equal(f->r.ninstances, 1);
}

/* Only non-auto classes match: no automatic start wanted. */
static void no_auto_class_answers_zero(void **state)
{
	struct fixture *f = *state;
	struct instance *inst;

	subscribe(f, &f->tm[0], 1, "web", "", "", false, false);
	subscribe(f, &f->tm[1], 2, "db", "", "", true, false);
	assert_int_equal(announce(f, &f->snarf[0], "web", "m1", 100, false, NULL, &inst), 0);
	assert_int_equal(f->nsent, 1);
	assert_up(&f->sent[0], &f->tm[0], 1, "web", true, false);
}

/* Program, machine and pid patterns with '*' and '?'; "*" means any. */
static void patterns_select_instances(void **state)
{
	struct fixture *f = *state;
	struct instance *inst;

	subscribe(f, &f->tm[0], 1, "w*", "", "", false, false);
	subscribe(f, &f->tm[0], 2, "*", "m?", "", false, false);
	subscribe(f, &f->tm[0], 3, "", "", "12*", false, false);
	subscribe(f, &f->tm[0], 4, "web", "m1", "123", false, false);
	subscribe(f, &f->tm[0], 5, "db", "*", "*", false, false);

	announce(f, &f->snarf[0], "web", "m1", 123, false, NULL, &inst);
	assert_int_equal(f->nsent, 4);
	assert_up(&f->sent[0], &f->tm[0], 1, "web", true, false);
	assert_up(&f->sent[1], &f->tm[0], 2, "web", true, false);
	assert_up(&f->sent[2], &f->tm[0], 3, "web", true, false);
	assert_up(&f->sent[3], &f->tm[0], 4, "web", true, false);

	f->nsent = 0;
	announce(f, &f->snarf[1], "www", "m22", 99, false, NULL, &inst);
	assert_int_equal(f->nsent, 1);
	assert_up(&f->sent[0], &f->tm[0], 1, "www", true, false);
}

/* A class added while instances run hears of each matching one (not as
 * new), then an ack counting them. */
static void subscribe_reports_running_instances_then_ack(void **state)
{
	struct fixture *f = *state;
	struct instance *a, *b, *c;

	announce(f, &f->snarf[0], "web", "m1", 1, false, NULL, &a);
	announce(f, &f->snarf[1], "db", "m1", 2, false, NULL, &b);
	announce(f, &f->snarf[2], "web", "m2", 3, false, NULL, &c);
	assert_int_equal(f->nsent, 0);

	subscribe(f, &f->tm[0], 9, "web", "", "", true, true);
	assert_int_equal(f->nsent, 3);
	assert_up(&f->sent[0], &f->tm[0], 9, "web", false, true);
	assert_string_equal(f->sent[0].machine, "m1");
	assert_up(&f->sent[1], &f->tm[0], 9, "web", false, true);
	assert_string_equal(f->sent[1].machine, "m2");
	assert_ack(&f->sent[2], &f->tm[0], 9, 2);

	f->nsent = 0;
	subscribe(f, &f->tm[1], 3, "none", "", "", false, true);
	assert_int_equal(f->nsent, 1);
	assert_ack(&f->sent[0], &f->tm[1], 3, 0);
}

/* A re-announced instance is not new, and wants no automatic start. */
static void reannounce_is_not_new(void **state)
{
	struct fixture *f = *state;
	struct instance *inst;

	subscribe(f, &f->tm[0], 1, "web", "", "", true, false);
	assert_int_equal(announce(f, &f->snarf[0], "web", "m1", 5, true, NULL, &inst), 0);
	assert_int_equal(f->nsent, 1);
	assert_up(&f->sent[0], &f->tm[0], 1, "web", false, true);
}

/* The token goes in InstanceUp to matching classes, never in InstanceGone. */
static void token_only_in_instance_up(void **state)
{
	struct fixture *f = *state;
	struct instance *inst;
	uint8_t token[CMON_TOKEN_LEN];

	memset(token, 0xa5, sizeof token);
	subscribe(f, &f->tm[0], 1, "web", "", "", false, false);
	subscribe(f, &f->tm[1], 2, "db", "", "", false, false);
	announce(f, &f->snarf[0], "web", "m1", 5, false, token, &inst);
	assert_int_equal(f->nsent, 1);
	assert_ptr_equal(f->sent[0].to, &f->tm[0]);
	assert_true(f->sent[0].has_token);
	assert_memory_equal(f->sent[0].token, token, sizeof token);

	f->nsent = 0;
	announce(f, &f->snarf[1], "web", "m1", 6, false, NULL, &inst);
	assert_int_equal(f->nsent, 1);
	assert_false(f->sent[0].has_token);

	f->nsent = 0;
	subscribe(f, &f->tm[1], 3, "web", "", "", false, true);
	assert_int_equal(f->nsent, 3);
	assert_true(f->sent[0].has_token);
	assert_false(f->sent[1].has_token);
	assert_ack(&f->sent[2], &f->tm[1], 3, 2);
}

/* An instance that goes is told, with how it went and its length, to the
 * classes that match it. */
static void instance_gone_told_to_matching_classes(void **state)
{
	struct fixture *f = *state;
	struct instance *a, *b;

	subscribe(f, &f->tm[0], 1, "web", "", "", false, false);
	subscribe(f, &f->tm[1], 2, "", "", "", false, false);
	subscribe(f, &f->tm[1], 3, "db", "", "", false, false);
	announce(f, &f->snarf[0], "web", "m1", 1, false, NULL, &a);
	announce(f, &f->snarf[1], "db", "m1", 2, false, NULL, &b);
	f->nsent = 0;

	a->has_length = true;
	a->length = 42;
	matcher_remove_instance(&f->r, a, true);
	assert_int_equal(f->nsent, 2);
	assert_gone(&f->sent[0], &f->tm[0], 1, "web", true);
	assert_true(f->sent[0].has_records);
	assert_int_equal(f->sent[0].records, 42);
	assert_gone(&f->sent[1], &f->tm[1], 2, "web", true);

	f->nsent = 0;
	matcher_remove_instance(&f->r, b, false);
	assert_int_equal(f->nsent, 2);
	assert_gone(&f->sent[0], &f->tm[1], 2, "db", false);
	assert_false(f->sent[0].has_records);
	assert_gone(&f->sent[1], &f->tm[1], 3, "db", false);
	assert_int_equal(f->r.ninstances, 0);
}

/* A class added after an instance went (a telemonitor back from a
 * restart) hears that it is gone, with its log's length, after the
 * running ones and before the ack; the gone one carries no token. */
static void gone_lately_told_to_new_classes(void **state)
{
	static const uint8_t token[CMON_TOKEN_LEN] = { 7 };
	struct fixture *f = *state;
	struct instance *a, *b;

	announce(f, &f->snarf[0], "web", "m1", 1, false, token, &a);
	announce(f, &f->snarf[1], "web", "m2", 2, false, NULL, &b);
	a->has_length = true;
	a->length = 24000;
	matcher_remove_instance(&f->r, a, true);
	assert_int_equal(f->r.ngone, 1);
	f->nsent = 0;

	subscribe(f, &f->tm[0], 1, "web", "", "", false, true);
	assert_int_equal(f->nsent, 3);
	assert_up(&f->sent[0], &f->tm[0], 1, "web", false, false);
	assert_gone(&f->sent[1], &f->tm[0], 1, "web", true);
	assert_true(f->sent[1].has_records);
	assert_int_equal(f->sent[1].records, 24000);
	assert_ack(&f->sent[2], &f->tm[0], 1, 1);

	f->nsent = 0;                   /* a class it does not match hears nothing of it */
	subscribe(f, &f->tm[1], 2, "db", "", "", false, true);
	assert_int_equal(f->nsent, 1);
	assert_ack(&f->sent[0], &f->tm[1], 2, 0);
}

/* Closing or dead subscribers hear nothing; instances of closing
 * announcers are not reported to new classes. */
static void closing_connections_are_skipped(void **state)
{
	struct fixture *f = *state;
	struct instance *a, *b;

	subscribe(f, &f->tm[0], 1, "", "", "", false, false);
	subscribe(f, &f->tm[1], 2, "", "", "", false, false);
	subscribe(f, &f->tm[2], 3, "", "", "", true, false);
	f->tm[0].state = CONN_CLOSING;
	f->tm[2].state = CONN_DEAD;

	assert_int_equal(announce(f, &f->snarf[0], "web", "m1", 1, false, NULL, &a), 0);
	assert_int_equal(f->nsent, 1);
	assert_up(&f->sent[0], &f->tm[1], 2, "web", true, false);

	f->nsent = 0;
	announce(f, &f->snarf[1], "db", "m1", 2, false, NULL, &b);
	f->snarf[1].state = CONN_CLOSING;
	f->nsent = 0;
	subscribe(f, &f->tm[3], 4, "", "", "", false, true);
	assert_int_equal(f->nsent, 2);
	assert_up(&f->sent[0], &f->tm[3], 4, "web", false, false);
	assert_ack(&f->sent[1], &f->tm[3], 4, 1);

	f->nsent = 0;
	matcher_remove_instance(&f->r, a, true);
	assert_int_equal(f->nsent, 2);
	assert_gone(&f->sent[0], &f->tm[1], 2, "web", true);
	assert_gone(&f->sent[1], &f->tm[3], 4, "web", true);
}

/* Refused classes send nothing, not even an ack (the caller answers). */
static void refused_classes_send_nothing(void **state)
{
	struct fixture *f = *state;
	Cmon__Subscribe m = CMON__SUBSCRIBE__INIT;
	struct instance *inst;
	char why[128] = "";

	announce(f, &f->snarf[0], "web", "m1", 1, false, NULL, &inst);
	subscribe(f, &f->tm[0], 1, "", "", "", false, false);

	m.id = 1;
	assert_int_equal(matcher_add_sub(&f->r, &f->tm[0], &m, why, sizeof why),
			 -CMON__ERROR_CODE__ERROR_PROTOCOL);
	assert_non_null(strstr(why, "already in use"));
	m.id = 2;
	m.program = (char *)"no/slash";
	assert_int_equal(matcher_add_sub(&f->r, &f->tm[0], &m, why, sizeof why),
			 -CMON__ERROR_CODE__ERROR_BAD_NAME);
	m.program = NULL;
	m.pid = (char *)"12a";
	assert_int_equal(matcher_add_sub(&f->r, &f->tm[0], &m, why, sizeof why),
			 -CMON__ERROR_CODE__ERROR_BAD_NAME);
	assert_int_equal(f->nsent, 0);
	assert_int_equal(f->r.nsubs, 1);
}

/* A removed class, or the classes of a subscriber that went away, hear no
 * more. */
static void removed_classes_hear_nothing(void **state)
{
	struct fixture *f = *state;
	struct instance *inst;

	subscribe(f, &f->tm[0], 1, "", "", "", false, false);
	subscribe(f, &f->tm[0], 2, "web", "", "", false, false);
	subscribe(f, &f->tm[1], 3, "", "", "", false, false);
	assert_true(matcher_remove_sub(&f->r, &f->tm[0], 1));
	assert_false(matcher_remove_sub(&f->r, &f->tm[0], 1));
	matcher_remove_conn_subs(&f->r, &f->tm[1]);
	assert_int_equal(f->r.nsubs, 1);
	assert_int_equal(f->tm[1].nsubs, 0);

	announce(f, &f->snarf[0], "web", "m1", 1, false, NULL, &inst);
	assert_int_equal(f->nsent, 1);
	assert_up(&f->sent[0], &f->tm[0], 2, "web", true, false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(new_instance_told_to_matching_classes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(no_auto_class_answers_zero, setup, teardown),
		cmocka_unit_test_setup_teardown(patterns_select_instances, setup, teardown),
		cmocka_unit_test_setup_teardown(subscribe_reports_running_instances_then_ack,
						setup, teardown),
		cmocka_unit_test_setup_teardown(reannounce_is_not_new, setup, teardown),
		cmocka_unit_test_setup_teardown(token_only_in_instance_up, setup, teardown),
		cmocka_unit_test_setup_teardown(instance_gone_told_to_matching_classes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(gone_lately_told_to_new_classes, setup, teardown),
		cmocka_unit_test_setup_teardown(closing_connections_are_skipped, setup, teardown),
		cmocka_unit_test_setup_teardown(refused_classes_send_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(removed_classes_hear_nothing, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
