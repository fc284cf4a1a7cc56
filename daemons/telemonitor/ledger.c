/* Tool ledgers (see ledger.h). */
#include "ledger.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LEDGER_MAGIC 0x4c6d6f43u    /* "ComL" */
#define READBACK_MAX (1u << 20)      /* most unread bytes read back from a pipe */

/* Zero a ledger's counts: all but the write boundaries, which no one reads
 * past nchunks (0 now). Their pages, three of the file's five, are written
 * only while a process runs (ledger_write), so a session's or an
 * in-process checker's ledger keeps them out of memory. */
static void clear(struct ledger_file *f)
{
	memset(f, 0, offsetof(struct ledger_file, chunk_end));
	memset(&f->run_events, 0, sizeof *f - offsetof(struct ledger_file, run_events));
}

static int map_file(struct ledger *l, int fd, bool *fresh)
{
	struct stat st;
	void *m;

	if (fstat(fd, &st) < 0)
		return -errno;
	*fresh = (size_t)st.st_size < offsetof(struct ledger_file, run_events);
	/* the blocks are allocated now: a full disk is an error here, not a
	 * SIGBUS when a page of the mapping is first written */
	errno = posix_fallocate(fd, 0, sizeof *l->f);
	if (errno)
		return -errno;
	m = mmap(NULL, sizeof *l->f, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	l->f = m;
	if (st.st_size > 0 && (l->f->magic != LEDGER_MAGIC || l->f->version != 1)) {
		clear(l->f);
		*fresh = true;
	}
	return 0;                       /* (an empty file was extended with zeros) */
}

/* The state directory cannot take a ledger file (full, read-only): the
 * counts are kept in memory instead, without the crash safety. */
static int map_memory(struct ledger *l)
{
	void *m = mmap(NULL, sizeof *l->f, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	if (m == MAP_FAILED)
		return -errno;
	l->f = m;
	free(l->path);
	l->path = NULL;
	l->in_memory = true;
	return 0;
}

static bool storage_fault(int r)
{
	return r == -ENOSPC || r == -EDQUOT || r == -EROFS || r == -EPERM || r == -EACCES;
}

/* --- the pool of files ---------------------------------------------------------- */

/* Room for one more name in the pool's list. */
static bool room(struct ledger_pool *p)
{
	size_t cap = p->cap ? p->cap * 2 : 64;
	uint64_t *m;

	if (p->n < p->cap)
		return true;
	if (!(m = realloc(p->names, cap * sizeof *m)))
		return false;
	p->names = m;
	p->cap = cap;
	return true;
}

int ledger_pool_open(struct ledger_pool *p, const char *state_dir)
{
	char dir[3800];
	struct dirent *d;
	DIR *dp;

	memset(p, 0, sizeof *p);
	if ((size_t)snprintf(dir, sizeof dir, "%s/%s", state_dir, LEDGER_DIR) >= sizeof dir)
		return -ENAMETOOLONG;
	if (mkdir(dir, 0750) < 0 && errno != EEXIST)
		return -errno;
	if (asprintf(&p->dir, "%s/free", dir) < 0) {
		p->dir = NULL;
		return -ENOMEM;
	}
	if (mkdir(p->dir, 0750) < 0 && errno != EEXIST)
		goto fail;
	if (!(dp = opendir(p->dir)))
		goto fail;
	while ((d = readdir(dp))) {
		char *end;
		uint64_t k = strtoull(d->d_name, &end, 10);
		if (end == d->d_name || strcmp(end, ".ledger"))
			continue;
		if (k >= p->next)
			p->next = k + 1;
		if (!room(p))
			break;
		p->names[p->n++] = k;
	}
	closedir(dp);
	return 0;
fail:;
	int r = -errno;
	ledger_pool_close(p);
	return r;
}

void ledger_pool_close(struct ledger_pool *p)
{
	free(p->dir);
	free(p->names);
	memset(p, 0, sizeof *p);
}

/* Clear the magic of the ledger file at `path`: 0, or a negative errno. */
static int unmark(const char *path)
{
	static const uint32_t none = 0;
	int fd = open(path, O_WRONLY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (pwrite(fd, &none, sizeof none, offsetof(struct ledger_file, magic)) != sizeof none)
		r = -EIO;
	close(fd);
	return r;
}

/* Move the file at `path` into the pool; deleted when there is no room.
 * It is emptied first (its mapping `f`, if given, is not touched again):
 * the counts it holds are of a hold that is over, and whoever gets the
 * file (this very instance and kind come back to this node included, even
 * when a crash left the file in place during the take) reads it as new.
 * Emptied, not only unmarked: its pages leave the page cache, and the
 * next holder's mapping does not bring in the pages it never writes. */
static void retire(struct ledger_pool *p, const char *path, struct ledger_file *f)
{
	char to[4200];

	if (p && p->dir && p->n < LEDGER_POOL_MAX && room(p)) {
		int r = truncate(path, 0) < 0 ? -errno : 0;
		if (r < 0 && r != -ENOENT && f) {
			f->magic = 0;           /* (cannot be emptied: read as new all the same) */
			r = 0;
		} else if (r < 0 && r != -ENOENT) {
			r = unmark(path);
		}
		if (r == -ENOENT)
			return;
		if (r == 0) {
			snprintf(to, sizeof to, "%s/%" PRIu64 ".ledger", p->dir, p->next);
			if (rename(path, to) == 0) {
				p->names[p->n++] = p->next++;
				return;
			}
			if (errno == ENOENT)
				return;
		}
	}
	unlink(path);
}

/* Put a file of the pool at `path` (where none is). False when it has
 * none left (or the rename fails: the file is dropped from the pool). */
static bool take(struct ledger_pool *p, const char *path)
{
	char from[4200];

	while (p && p->dir && p->n > 0) {
		snprintf(from, sizeof from, "%s/%" PRIu64 ".ledger", p->dir, p->names[--p->n]);
		if (rename(from, path) == 0)
			return true;
	}
	return false;
}

/* --- ledgers ------------------------------------------------------------------------ */

int ledger_open(struct ledger *l, const char *state_dir, struct ledger_pool *pool, uint64_t id,
		enum ledger_kind kind, bool *existed)
{
	static const char *const names[] = { "checker", "tool", "session" };
	char dir[3800];
	bool fresh = false, pooled = false;
	int fd, r = 0;

	l->f = NULL;
	l->path = NULL;
	l->in_memory = false;
	if ((size_t)snprintf(dir, sizeof dir, "%s/%s", state_dir, LEDGER_DIR) >= sizeof dir)
		return -ENAMETOOLONG;
	if (asprintf(&l->path, "%s/%" PRIu64 "-%s.ledger", dir, id, names[kind]) < 0) {
		l->path = NULL;
		return -ENOMEM;
	}
	if (mkdir(dir, 0750) < 0 && errno != EEXIST)
		r = -errno;
	fd = r < 0 ? -1 : open(l->path, O_RDWR | O_CLOEXEC);
	if (fd < 0 && r == 0 && errno == ENOENT && take(pool, l->path)) {
		fd = open(l->path, O_RDWR | O_CLOEXEC);
		pooled = true;
	}
	if (fd < 0 && r == 0)
		fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
	if (r == 0 && fd < 0)
		r = -errno;
	if (fd >= 0) {
		r = map_file(l, fd, &fresh);
		close(fd);
		if (r < 0 && fresh)
			unlink(l->path);            /* made just now, and useless */
	}
	if (r == 0 && !fresh &&
	    (pooled || l->f->instance != id || l->f->kind != (uint32_t)kind)) {
		clear(l->f);                        /* a pooled file: the counts of a hold that is over */
		fresh = true;
	}
	if (storage_fault(r)) {
		r = map_memory(l);
		fresh = true;
	}
	if (r < 0) {
		free(l->path);
		l->path = NULL;
		return r;
	}
	if (fresh) {
		l->f->magic = LEDGER_MAGIC;
		l->f->version = 1;
		l->f->instance = id;
		l->f->kind = (uint32_t)kind;
	}
	*existed = !fresh;
	return 0;
}

void ledger_forget(const char *state_dir, struct ledger_pool *pool, uint64_t id)
{
	static const char *const names[] = { "checker", "tool", "session" };
	char path[4200];

	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		snprintf(path, sizeof path, "%s/%s/%" PRIu64 "-%s.ledger", state_dir, LEDGER_DIR, id,
			 names[i]);
		retire(pool, path, NULL);
	}
}

void ledger_close(struct ledger *l, struct ledger_pool *pool, bool remove)
{
	if (l->f) {
		if (remove && l->path)
			retire(pool, l->path, l->f);
		munmap(l->f, sizeof *l->f);
		l->f = NULL;
	}
	free(l->path);
	l->path = NULL;
}

void ledger_lose(struct ledger *l, uint64_t n)
{
	if (l->f)
		l->f->gap += n;
}

uint64_t ledger_pos(const struct ledger *l)
{
	return l->f ? l->f->base + l->f->events + l->f->gap : 0;
}

void ledger_run(struct ledger *l, pid_t pgid, Cmon__Format fmt)
{
	if (!l->f)
		return;
	l->f->format = (uint32_t)fmt;
	l->f->run_bytes = 0;
	l->f->nchunks = 0;
	l->f->start_time = pgid > 0 ? ledger_proc_start(pgid) : 0;
	l->f->pgid = pgid;
	l->f->flags &= ~LEDGER_INPROC;
	if (pgid > 0)
		l->f->run_events = 0;
}

void ledger_run_inproc(struct ledger *l, Cmon__Format fmt)
{
	ledger_run(l, 0, fmt);
	if (!l->f)
		return;
	l->f->flags |= LEDGER_INPROC;
	l->f->run_events = 0;
}

void ledger_write(struct ledger *l, const struct cmon_tally *t, size_t bytes)
{
	struct ledger_file *f = l->f;

	if (!f)
		return;
	f->events += t->events;
	f->run_events += t->events;
	f->gap += t->gap;
	f->markers += t->markers;
	f->run_bytes += bytes;
	if (f->pgid > 0) {
		/* Write boundaries matter only for what a process's pipe may
		 * hold back (ledger_unread). A session's or an in-process
		 * checker's ledger never writes past its first page: the
		 * other pages of its file stay out of memory (16 KiB a
		 * ledger, two a checked stream). */
		f->chunk_end[f->nchunks % LEDGER_CHUNKS] = f->run_bytes;
		f->nchunks++;
	}
}

void ledger_unwrite(struct ledger *l, const struct cmon_tally *t, size_t bytes)
{
	struct ledger_file *f = l->f;

	if (!f)
		return;
	if (f->pgid > 0)
		f->nchunks--;
	f->run_bytes -= bytes;
	f->markers -= t->markers;
	f->gap -= t->gap;
	f->events -= t->events;
	f->run_events -= t->events;
}

/* The first write boundary at or after byte `at` of the run (run_bytes if
 * none is known: the ring no longer reaches back that far). */
static uint64_t boundary_after(const struct ledger_file *f, uint64_t at)
{
	uint64_t k = f->nchunks, oldest = k > LEDGER_CHUNKS ? k - LEDGER_CHUNKS : 0;
	uint64_t best = f->run_bytes;

	if (at == 0)
		return 0;
	while (k > oldest) {
		uint64_t e = f->chunk_end[--k % LEDGER_CHUNKS];
		if (e < at)
			break;
		best = e;
	}
	return best;
}

uint64_t ledger_unread(struct ledger *l, const uint8_t *p, size_t n, uint64_t body, size_t *whole)
{
	struct ledger_file *f = l->f;
	Cmon__Format fmt;
	struct cmon_tally t = { 0 };
	uint64_t start, b;
	size_t lead;

	if (whole)
		*whole = n;
	if (!f || n == 0)
		return 0;
	if (n > f->run_bytes)
		n = (size_t)f->run_bytes;       /* (more than was counted: none is whole) */
	else if (whole)
		*whole = 0;
	fmt = (Cmon__Format)f->format;
	start = f->run_bytes - n;
	b = boundary_after(f, start);
	lead = (size_t)(b - start);            /* the tail of a write the tool had begun */
	if (lead > n)
		lead = n;
	if (whole && *whole == 0) {
		/* whole writes from the first boundary on, past the run's header */
		*whole = lead;
		if (body > start && body - start > *whole)
			*whole = body - start < n ? (size_t)(body - start) : n;
	}
	cmon_log_tally(fmt, p + lead, n - lead, SIZE_MAX, &t);
	if (lead) {
		if (fmt == CMON__FORMAT__FORMAT_BINARY) {
			/* frames cannot be found from the middle: estimate by size */
			uint64_t per = f->events ? f->run_bytes / (f->events + f->markers + 1) : 0;
			t.events += per ? (lead + per - 1) / per : 1;
		} else {
			const uint8_t *nl = memchr(p, '\n', lead);
			if (nl) {
				t.events++;    /* the line the tool had begun */
				cmon_log_tally(fmt, nl + 1, (size_t)(p + lead - (nl + 1)), SIZE_MAX, &t);
			}
		}
	}
	if (t.events > f->events)
		t.events = f->events;
	if (t.gap > f->gap)
		t.gap = f->gap;
	if (t.markers > f->markers)
		t.markers = f->markers;
	f->events -= t.events;
	f->run_events -= t.events < f->run_events ? t.events : f->run_events;
	f->gap -= t.gap;
	f->markers -= t.markers;
	f->run_bytes -= n;
	return t.events + t.gap;
}

uint64_t ledger_proc_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p)
		return 0;
	/* fields after the command: state is field 3, starttime field 22 */
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (p)
		sscanf(p + 1, "%llu", &v);
	return v;
}

/* Read what is left in the pipe on standard input of `pid` (without
 * waiting), up to READBACK_MAX bytes; *n gets how many. */
static uint8_t *read_back(pid_t pid, size_t *n)
{
	char path[64];
	uint8_t *buf;
	int fd, avail = 0;
	ssize_t r;

	*n = 0;
	snprintf(path, sizeof path, "/proc/%d/fd/0", (int)pid);
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (ioctl(fd, FIONREAD, &avail) < 0 || avail <= 0) {
		close(fd);
		return NULL;
	}
	if ((unsigned)avail > READBACK_MAX)
		avail = READBACK_MAX;
	buf = malloc((size_t)avail);
	while (buf && *n < (size_t)avail) {
		r = read(fd, buf + *n, (size_t)avail - *n);
		if (r <= 0)
			break;
		*n += (size_t)r;
	}
	close(fd);
	return buf;
}

/* An orphan: a tool of a dead telemonitor, still running. */
struct orphan {
	struct ledger l;
	pid_t pgid;
};

/* Does process `pid` belong to group `pgid` and still run (not a zombie
 * waiting for a parent that may be slow to reap it: an orphan's parent is
 * whatever init the machine or container has)? */
static bool member_running(const char *pid, pid_t pgid)
{
	char path[300], buf[512], state;
	int group = 0, fd;
	ssize_t n;
	char *p;

	snprintf(path, sizeof path, "/proc/%s/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strrchr(buf, ')');              /* "PID (COMM) STATE PPID PGRP ..." */
	if (!p || sscanf(p + 1, " %c %*d %d", &state, &group) != 2)
		return false;
	return group == pgid && state != 'Z' && state != 'X';
}

static bool group_alive(pid_t pgid)
{
	struct dirent *d;
	bool alive = false;
	DIR *dp;

	if (kill(-pgid, 0) < 0 && errno != EPERM)
		return false;
	dp = opendir("/proc");
	if (!dp)
		return true;
	while (!alive && (d = readdir(dp)))
		if (d->d_name[0] >= '1' && d->d_name[0] <= '9')
			alive = member_running(d->d_name, pgid);
	closedir(dp);
	return alive;
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };

	nanosleep(&ts, NULL);
}

int ledger_finish_orphans(const char *state_dir, double wait_s,
			  void (*note)(void *arg, uint64_t instance, const char *text), void *arg)
{
	struct orphan *o = NULL;
	size_t n = 0, cap = 0;
	char dir[3800], text[300];
	struct dirent *d;
	DIR *dp;

	snprintf(dir, sizeof dir, "%s/%s", state_dir, LEDGER_DIR);
	dp = opendir(dir);
	if (!dp)
		return 0;
	while ((d = readdir(dp))) {
		struct ledger l;
		bool existed;
		int fd;
		if (!strstr(d->d_name, ".ledger"))
			continue;
		l.f = NULL;
		l.in_memory = false;
		if (asprintf(&l.path, "%s/%s", dir, d->d_name) < 0)
			break;
		fd = open(l.path, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			ledger_close(&l, NULL, false);
			continue;
		}
		if (map_file(&l, fd, &existed) < 0 || existed) {   /* existed = fresh here */
			close(fd);
			ledger_close(&l, NULL, false);
			continue;
		}
		close(fd);
		if (l.f->pgid > 0 || (l.f->flags & LEDGER_INPROC))
			l.f->flags |= LEDGER_ORPHANED;  /* its reports may be lost (settled on re-attach) */
		l.f->flags &= ~LEDGER_INPROC;           /* (a checker inside it died with it) */
		if (l.f->pgid <= 0 || !l.f->start_time ||
		    ledger_proc_start(l.f->pgid) != l.f->start_time) {
			l.f->pgid = 0;                  /* gone (and any pid reuse is not ours) */
			ledger_close(&l, NULL, false);
			continue;
		}
		if (n == cap) {
			struct orphan *m = realloc(o, (cap = cap ? cap * 2 : 8) * sizeof *o);
			if (!m) {
				ledger_close(&l, NULL, false);
				break;
			}
			o = m;
		}
		o[n].l = l;
		o[n].pgid = l.f->pgid;
		n++;
	}
	closedir(dp);
	/* Let them finish: their input is at end of file. SIGCONT in case
	 * they were stopped. */
	for (size_t i = 0; i < n; i++)
		kill(-o[i].pgid, SIGCONT);
	for (double waited = 0; waited < wait_s; waited += 0.02) {
		bool any = false;
		for (size_t i = 0; i < n && !any; i++)
			any = group_alive(o[i].pgid);
		if (!any)
			break;
		sleep_s(0.02);
	}
	for (size_t i = 0; i < n; i++) {
		struct ledger_file *f = o[i].l.f;
		if (group_alive(o[i].pgid)) {
			size_t len;
			uint8_t *back = read_back(o[i].pgid, &len);
			uint64_t lost = back ? ledger_unread(&o[i].l, back, len, 0, NULL) : 0;
			free(back);
			kill(-o[i].pgid, SIGKILL);
			snprintf(text, sizeof text, "the %s left running by the previous telemonitor "
				 "did not finish within %.1f s; killed (%" PRIu64 " records it had "
				 "not read are counted lost)", f->kind == LK_CHECKER ? "checker" : "tool",
				 wait_s, lost);
		} else {
			snprintf(text, sizeof text, "the %s left running by the previous telemonitor "
				 "finished its input", f->kind == LK_CHECKER ? "checker" : "tool");
		}
		f->pgid = 0;
		if (note)
			note(arg, f->instance, text);
		ledger_close(&o[i].l, NULL, false);
	}
	free(o);
	return (int)n;
}
