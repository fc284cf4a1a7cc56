/* The telemonitor's control commands, listed once. The control socket's
 * dispatch (commands.c), the HTTP API's routes (http.c) and telemonctl's
 * checks of which command takes which option (clients/telemonctl/args.c)
 * all expand CMD_TABLE, so they cannot drift apart.
 *
 * This header names no type of the daemon: telemonctl includes it alone.
 * The handler column is a bare name that only commands.c expands.
 *
 * A new command is a row here, its handler in commands.c, and its operands
 * in telemonctl's args_parse(); an HTTP path makes the API serve it. */
#ifndef TELEMON_CMDTAB_H
#define TELEMON_CMDTAB_H

#include <stddef.h>
#include <string.h>

/* The KEY=VALUE options a command may be given, K(ID, "key"). The order is
 * the one telemonctl names them in ("failures takes --prog, --assert, ..."). */
#define CMD_KEYS(K)                   \
	K(ALL, "all")                 \
	K(PROG, "prog")               \
	K(ASSERT, "assert")           \
	K(SINCE, "since")             \
	K(INSTANCE, "instance")       \
	K(LIMIT, "limit")             \
	K(BEFORE, "before")           \
	K(DAY, "day")                 \
	K(V1, "v1")                   \
	K(V2, "v2")                   \
	K(MACHINE, "machine")         \
	K(UNTIL, "until")             \
	K(COMMENT, "comment")         \
	K(KIND, "kind")

/* Position of each key in CMD_KEYS. */
enum cmd_key_index {
#define CMD_KEY_INDEX(id, name) CMD_KEY_I_##id,
	CMD_KEYS(CMD_KEY_INDEX)
#undef CMD_KEY_INDEX
	CMD_NKEYS                     /* how many keys */
};

/* A set of keys is a mask of these bits. */
enum cmd_key {
#define CMD_KEY_BIT(id, name) CK_##id = 1u << CMD_KEY_I_##id,
	CMD_KEYS(CMD_KEY_BIT)
#undef CMD_KEY_BIT
};

/* The flags of a command. */
enum cmd_flag {
	CMD_RO = 1u << 0,             /* reads only: the HTTP API may serve it */
	CMD_OPTS = 1u << 1,           /* only KEY=VALUE options follow the command word,
				       * checked against its keys before its handler runs */
	CMD_ID = 1u << 2,             /* an id comes first (the {id} of its HTTP path) */
	CMD_SUB = 1u << 3,            /* a subcommand word comes first; the keys are
				       * those of its subcommand `add` */
	CMD_HTTP_TEXT = 1u << 4,      /* the API answers as text/plain, not JSON */
	CMD_HTTP_NEWEST = 1u << 5,    /* the API lists newest first */
};

/* CMD(name, http_path, keys, operands, flags, fn): the command word (an
 * identifier), the API path that serves it or NULL ("{id}" stands for the
 * id), the keys the service accepts, those of them telemonctl fills from
 * its operands rather than from --options, the flags, and the handler in
 * commands.c. */
#define CMD_TABLE(CMD)                                                                            \
	CMD(status, "/api/v1/status", 0, 0, CMD_RO | CMD_OPTS, cmd_status)                        \
	CMD(classes, "/api/v1/classes", 0, 0, CMD_RO | CMD_OPTS, cmd_classes)                     \
	CMD(class, NULL, 0, 0, CMD_SUB, cmd_class)                                                \
	CMD(instances, "/api/v1/instances", CK_ALL | CK_LIMIT, 0, CMD_RO | CMD_OPTS, cmd_instances) \
	CMD(start, NULL, 0, 0, CMD_ID, cmd_start)                                                 \
	CMD(stop, NULL, 0, 0, CMD_ID, cmd_stop)                                                   \
	CMD(typescript, NULL, 0, 0, CMD_RO | CMD_ID, cmd_typescript)                              \
	CMD(window, "/api/v1/failures/{id}/window", 0, 0, CMD_RO | CMD_ID | CMD_HTTP_TEXT,       \
	    cmd_window)                                                                           \
	CMD(verdicts, "/api/v1/instances/{id}/verdicts", 0, 0, CMD_RO | CMD_ID, cmd_verdicts)     \
	CMD(history, "/api/v1/history", CK_PROG, CK_PROG, CMD_RO | CMD_OPTS, cmd_history)         \
	CMD(compare, "/api/v1/compare", CK_PROG | CK_V1 | CK_V2 | CK_ASSERT,                      \
	    CK_PROG | CK_V1 | CK_V2, CMD_RO | CMD_OPTS, cmd_compare)                              \
	CMD(failures, "/api/v1/failures",                                                         \
	    CK_PROG | CK_ASSERT | CK_SINCE | CK_UNTIL | CK_INSTANCE | CK_LIMIT | CK_BEFORE |     \
	    CK_KIND, 0,                                                                           \
	    CMD_RO | CMD_OPTS | CMD_HTTP_NEWEST, cmd_failures)                                    \
	CMD(silence, NULL, CK_PROG | CK_MACHINE | CK_ASSERT | CK_UNTIL | CK_COMMENT,              \
	    CK_PROG | CK_MACHINE | CK_ASSERT, CMD_SUB, cmd_silence)                               \
	CMD(ack, NULL, CK_COMMENT, 0, CMD_ID, cmd_ack)                                            \
	CMD(stats, "/api/v1/stats", CK_PROG | CK_ASSERT | CK_DAY, 0, CMD_RO | CMD_OPTS, cmd_stats)

/* Position of each command in CMD_TABLE. */
enum cmd_index {
#define CMD_INDEX(name, path, keys, operands, flags, fn) CMD_I_##name,
	CMD_TABLE(CMD_INDEX)
#undef CMD_INDEX
	CMD_COUNT                     /* how many commands */
};

/* One row of CMD_TABLE, without its handler. */
struct cmd_info {
	const char *name;             /* the command word */
	const char *http_path;        /* the API path, or NULL */
	unsigned keys;                /* CK_* the service accepts */
	unsigned operands;            /* CK_* telemonctl takes as operands */
	unsigned flags;               /* CMD_* */
};

/* Command `i` (an enum cmd_index). */
static inline const struct cmd_info *cmd_info(int i)
{
	static const struct cmd_info tab[] = {
#define CMD_INFO(name, path, keys, operands, flags, fn) { #name, path, keys, operands, flags },
		CMD_TABLE(CMD_INFO)
#undef CMD_INFO
	};

	return &tab[i];
}

/* The enum cmd_index of command word `name`, or -1. */
static inline int cmd_find(const char *name)
{
	for (int i = 0; i < CMD_COUNT; i++)
		if (!strcmp(cmd_info(i)->name, name))
			return i;
	return -1;
}

/* The spelling of key `i` (an enum cmd_key_index). */
static inline const char *cmd_key_name(int i)
{
	static const char *const names[] = {
#define CMD_KEY_NAME(id, name) name,
		CMD_KEYS(CMD_KEY_NAME)
#undef CMD_KEY_NAME
	};

	return names[i];
}

/* The CK_* bit of key `key` (its first n bytes), or 0 if there is none. */
static inline unsigned cmd_key_bit(const char *key, size_t n)
{
	for (int i = 0; i < CMD_NKEYS; i++)
		if (strlen(cmd_key_name(i)) == n && !strncmp(cmd_key_name(i), key, n))
			return 1u << i;
	return 0;
}

#endif
