/* What each tool has been given, kept where a kill -9 of the telemonitor
 * cannot lose it: a small file per tool under STATE/tools/, mapped into
 * memory, so that every update is a store into the page cache (no system
 * call) and survives the process. It is the one owner of the counts of
 * "delivered to the tool" and "reported to the tool as lost"
 * (docs/protocol.md, "Accounting"):
 *
 *   - the counts are raised just before each write() of whole records to
 *     the tool's pipe and put back if the write fails, so a SIGKILL that
 *     lands during the write (it takes effect when the call returns, after
 *     the bytes are in the pipe) leaves them right;
 *   - what a tool had not read when it died is read back from its pipe and
 *     taken off again (ledger_unread());
 *   - the tool's process group and start time are kept, so that the next
 *     telemonitor (or `telemonitor -finish-tools`) can let a tool left
 *     behind by a crash finish its input, or kill it, and correct the counts
 *     before anything new is written (ledger_finish_orphans()).
 *
 * A tool's position in the log is base + events + gap: every record of the
 * log up to there reached it, or a gap marker standing for it did. */
#ifndef TELEMON_LEDGER_H
#define TELEMON_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cmon/logfmt.h"

#define LEDGER_DIR "tools"          /* under the state directory */
#define LEDGER_CHUNKS 2048           /* recent write boundaries kept (a pipe's worth) */

/* Which counts a ledger keeps. */
enum ledger_kind {
	LK_CHECKER = 0,              /* the built-in checker */
	LK_SHELL = 1,                /* the class's tool */
	LK_SESSION = 2,              /* a session without tools: what it received */
};

/* The mapped file. Only the telemonitor that holds the state directory's
 * lock writes it. */
struct ledger_file {
	uint32_t magic;              /* LEDGER_MAGIC */
	uint32_t version;            /* 1 */
	uint64_t instance;           /* instance id */
	uint32_t kind;               /* enum ledger_kind */
	uint32_t format;             /* Cmon__Format of the log */
	int32_t pgid;                /* the running tool's process group, 0 if none */
	uint32_t flags;              /* LEDGER_ORPHANED */
	uint64_t start_time;         /* its start time (/proc/PID/stat), against pid reuse */
	uint64_t base;               /* log records before the first one accounted for */
	uint64_t events;             /* event records delivered, every run */
	uint64_t gap;                /* records the delivered gap markers stood for */
	uint64_t markers;            /* gap markers delivered */
	uint64_t run_bytes;          /* bytes written to the current run */
	uint64_t nchunks;            /* writes made to the current run */
	uint64_t chunk_end[LEDGER_CHUNKS]; /* run_bytes after each of the last writes (kept
	                                      while a process runs: pgid > 0) */
	/* (version 1 files end here; what follows reads as 0 in them) */
	uint64_t run_events;         /* event records given to the current (or last) run and
	                                not read back */
	uint64_t unchecked;          /* checker: records it was given and read but whose
	                                reports never came (docs/protocol.md §11), every run */
};

#define LEDGER_ORPHANED 1u           /* its run outlived a telemonitor (ledger_finish_orphans) */
#define LEDGER_INPROC 2u             /* its run is a checker inside the telemonitor: it dies with it */

/* An open ledger. */
struct ledger {
	struct ledger_file *f;       /* the mapping, or NULL */
	bool in_memory;              /* no file could be made: counted in memory only */
	char *path;                  /* its file (allocated; NULL when in memory) */
};

/* Ledger files no instance needs any more, kept under LEDGER_DIR/free
 * (named N.ledger) for the next ones: a new ledger renames one into place
 * rather than creating a file, and a forgotten one is renamed there rather
 * than deleted. Creating a file costs an inode, and on ext4 without a
 * journal a scan past every inode freed in the last minute: with
 * instances starting and ending all the time, most of a start's cost
 * (docs/PERFORMANCE.md). A file taken from the pool still holds its last
 * instance's counts; ledger_open sees they are not its own and starts
 * afresh, so a crash between the rename and the first write is harmless. */
struct ledger_pool {
	char *dir;                   /* STATE/LEDGER_DIR/free (allocated), NULL: no pool */
	uint64_t *names;             /* the N of each file there */
	size_t n, cap;
	uint64_t next;               /* the N of the next file put there */
};

#define LEDGER_POOL_MAX 4096         /* files kept for reuse; more are deleted */

/* Set up the pool of STATE (making LEDGER_DIR/free, and taking the files
 * already there). 0, or a negative errno: the pool is then empty and off,
 * and ledgers are created and deleted as files. */
int ledger_pool_open(struct ledger_pool *p, const char *state_dir);

/* Free it (the files stay for the next telemonitor). Accepts an empty one. */
void ledger_pool_close(struct ledger_pool *p);

/* Open the ledger of tool `kind` of instance `id`, creating it if needed
 * (*existed says which; a new one is taken from `pool` when it has one).
 * When the state directory cannot take the file (full, read-only) the
 * ledger is kept in memory (l->in_memory): counts go on, a crash loses
 * them. 0 or a negative errno. */
int ledger_open(struct ledger *l, const char *state_dir, struct ledger_pool *pool, uint64_t id,
		enum ledger_kind kind, bool *existed);

/* Remove every ledger file of instance `id` (its end is stored): into
 * `pool` (NULL: deleted). */
void ledger_forget(const char *state_dir, struct ledger_pool *pool, uint64_t id);

/* Unmap it; with `remove`, remove the file too (into `pool`; NULL:
 * deleted). Accepts a closed ledger. */
void ledger_close(struct ledger *l, struct ledger_pool *pool, bool remove);

/* Position in the log through which everything was delivered or reported. */
uint64_t ledger_pos(const struct ledger *l);

/* A new run of the tool (process group `pgid`) starts, on a log of format
 * `fmt`; with `pgid` 0 the run is over (its run_events stay until the next). */
void ledger_run(struct ledger *l, pid_t pgid, Cmon__Format fmt);
/* A new run of the checker inside the telemonitor (LEDGER_INPROC): a
 * telemonitor killed during it takes its unreported records along, so the
 * next one settles them as it does an orphan's. */
void ledger_run_inproc(struct ledger *l, Cmon__Format fmt);

/* About to write whole records `t` (`bytes` long): count them as delivered.
 * ledger_unwrite() puts them back if the write did not happen. */
void ledger_write(struct ledger *l, const struct cmon_tally *t, size_t bytes);
void ledger_unwrite(struct ledger *l, const struct cmon_tally *t, size_t bytes);

/* `n` records of the log never reached the tool and never will (the
 * instance ended): count them as lost, without a gap marker. */
void ledger_lose(struct ledger *l, uint64_t n);

/* The tool's run ended with the last `n` bytes written to it (`p`, read
 * back from its pipe) unread: take the records that ended in them off.
 * Exact when the tool stopped at a write boundary or (ascii) at a line;
 * otherwise the part of one write it had begun is estimated. Returns how
 * many records were taken off. With `whole`, *whole is where in `p` the
 * whole writes begin that come after byte `body` of the run (its header's
 * end): p[*whole..n) are whole records, fit to be given again (n: none). */
uint64_t ledger_unread(struct ledger *l, const uint8_t *p, size_t n, uint64_t body, size_t *whole);

/* Tools a previous telemonitor left running: let each finish its input
 * (SIGCONT; its input is at end of file) for up to `wait_s` seconds, then
 * read back what it left unread, correct its ledger and kill its process
 * group. Returns how many were found; `note(arg, instance, text)` is told
 * what happened to each. */
int ledger_finish_orphans(const char *state_dir, double wait_s,
			  void (*note)(void *arg, uint64_t instance, const char *text), void *arg);

/* The start time of process `pid` (field 22 of /proc/PID/stat), 0 if gone. */
uint64_t ledger_proc_start(pid_t pid);

#endif
