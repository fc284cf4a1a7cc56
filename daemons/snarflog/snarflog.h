/* snarflog internals. One event loop, no threads. The parts:
 *   input.c    reads the log (stdin, FIFO or CMD's pipe) and cuts it into
 *              the saved header and whole records
 *   buffer.c   the fixed-size buffer of whole records
 *   core.c     policy: keep or drop, block, hold for an auto subscriber,
 *              end of log and exit
 *   stream.c   the data endpoint: consumer connections and what they get
 *   announce.c the registry link: announce, re-announce with backoff, leave
 *   child.c    running CMD, forwarding signals, its exit status */
#ifndef SNARFLOG_H
#define SNARFLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <openssl/ssl.h>

#include "buffer.h"
#include "cmon/names.h"
#include "cmon/net.h"
#include "cmon/proto.h"
#include "cmon/tls.h"
#include "cmon/token.h"

/* Limits and defaults. */
#define SNARF_DEFAULT_BUFFER (2u << 20)   /* -buffer default: 2 MiB */
#define SNARF_MIN_BUFFER (4u << 10)       /* smallest -buffer */
#define SNARF_MAX_BUFFER (1u << 30)       /* largest -buffer */
#define SNARF_RECORD_MAX (1u << 20)       /* longest record (also <= buffer/4) */
#define SNARF_HEADER_MAX (1u << 20)       /* largest saved header */
#define SNARF_VERSION_MAX 128             /* longest program version */
#define SNARF_CHUNK (256u << 10)          /* LogData payload per frame */
#define SNARF_OUT_HIGH (512u << 10)       /* stop moving records to a TLS stream above this */
#define SNARF_OUT_LOW (128u << 10)        /* ...and resume below this */
#define SNARF_OUT_UNSENT (128 << 10)      /* most bytes a socket holds not yet sent */
#define SNARF_MAX_PENDING 64              /* data connections not yet streaming */
#define SNARF_RUN 256                     /* records handed over at once by the reader */
#define SNARF_FIRST_ANSWER_S 1.0          /* longest hold while the registry has not answered */
#define SNARF_DEFAULT_MAXBLOCK_S 1.0      /* -maxblock default */

/* Command-line settings. */
struct options {
	const char *program;          /* PROGNAME as announced */
	Cmon__Format format;          /* -ascii / -binary, or unspecified = detect */
	size_t buffer;                /* -buffer NBYTES */
	const char *fifo;             /* -fifo PATH */
	bool debug;                   /* -debug */
	const char *regmachine;       /* -regmachine / TELEMONREG_MACHINE */
	bool standalone;              /* -standalone: no registry */
	const char *data_listen;      /* -data-listen / CMON_DATA_LISTEN */
	const char *machine;          /* -machine (default: host name) */
	const char *portfile;         /* -portfile: write the data port there */
	const char *token_file;       /* -token-file: write the consumer token there (0600) */
	const char *program_version;  /* --program-version: the version for the header */
	double hold_s;                /* -hold: seconds to hold for an auto subscriber */
	double drain_s;               /* -drain: seconds to deliver at end of log */
	double maxblock_s;            /* -maxblock: longest stall a blocking consumer causes */
	int hello_s;                  /* -hello-timeout: seconds for Hello + Start */
	struct cmon_tls_opts tls;     /* -tls-* / CMON_TLS_* */
	char **cmd;                   /* -- CMD ARGS..., or NULL */
};

/* What the input reader is doing. */
enum input_state {
	IN_DETECT,        /* format not known yet */
	IN_HEADER,        /* ascii: in the '#' lines before the first record;
	                     binary: expecting the Header record */
	IN_RECORDS,       /* cutting records */
	IN_DISCARD,       /* ascii: skipping the rest of an over-long line */
	IN_RESYNC,        /* binary: looking for the next plausible frame */
	IN_EOF,           /* the writer closed the log */
};

/* The log input. */
struct input {
	enum input_state state;       /* see enum input_state */
	int fd;                       /* where the log comes from */
	bool is_file;                 /* regular file: not pollable, read until EOF */
	bool paused;                  /* not reading: the buffer must not drop */
	bool eof;                     /* read() returned 0: no more bytes will come */
	struct event *ev;             /* read readiness (or self-activation for files) */
	uint8_t *stage;               /* bytes read but not yet cut into records */
	size_t len;                   /* bytes in stage */
	size_t cap;                   /* stage size (record max + two reads) */
	size_t chunk;                 /* bytes asked for per read into the buffer */
	size_t rec_max;               /* longest record accepted */
	uint64_t ts;                  /* binary: running absolute timestamp */
	uint8_t *scratch;             /* binary: room to rewrite one record */
};

/* The saved header replayed to every consumer. */
struct header {
	uint8_t *data;                /* bytes */
	size_t len;                   /* used */
	size_t cap;                   /* allocated */
	bool complete;                /* ascii: the first record has been seen */
};

/* Where snarflog as a whole is. */
enum snarf_phase {
	PH_RUNNING,       /* reading the log */
	PH_DRAINING,      /* log ended: delivering the buffer (bounded) */
	PH_LEAVING,       /* saying goodbye to the registry */
	PH_DONE,          /* loop exits */
};

struct stream;
TAILQ_HEAD(stream_list, stream);
struct regset;

/* The whole program state. */
struct snarf {
	struct options opt;           /* settings */
	struct event_base *base;      /* the loop */
	struct evdns_base *dns;       /* async resolver for the registry */
	SSL_CTX *tls_server;          /* data endpoint TLS, or NULL */
	SSL_CTX *tls_client;          /* registry TLS, or NULL */
	enum snarf_phase phase;       /* see enum snarf_phase */
	Cmon__Format format;          /* the log's format once known */
	char machine[CMON_NAME_MAX + 1]; /* announced machine name */
	char version[SNARF_VERSION_MAX + 1]; /* program version for the header, or "" */
	int64_t pid;                  /* announced pid (CMD's, else our own) */
	int64_t start_unix_ns;        /* when we started */
	struct input in;              /* the log input */
	struct ring ring;             /* buffered records */
	struct header hdr;            /* saved header */
	uint64_t records_in;          /* records read */
	uint64_t dropped;             /* records dropped, all causes */
	uint64_t dropped_unseen;      /* dropped while no consumer (for the next one) */
	uint64_t passed;              /* records gone from the buffer's front, as a
	                                 consumer counts them: event records sent
	                                 plus records dropped (Accepted.records_before) */
	uint64_t resyncs;             /* over-long lines / corrupt frames skipped */
	uint64_t rewrites;            /* binary events given an absolute ts */
	bool hold;                    /* waiting for the registry's first answer or
	                                 an auto subscriber (drops only when full) */
	struct event *hold_timer;     /* ends the hold */
	struct event *drain_timer;    /* bounds PH_DRAINING */
	struct event *stats_timer;    /* periodic debug summary */
	struct event *block_timer;    /* bounds a block stall (-maxblock) */
	bool block_expired;           /* the blocking consumer stalled us for -maxblock:
	                                 drop until it has caught up */
	uint64_t block_expiries;      /* how often that happened */
	uint64_t dropped_reported;    /* `dropped` at the last summary */
	struct evconnlistener *data_listener; /* the data endpoint */
	char endpoint[CMON_ADDRSTR_MAX]; /* what we announce: ":PORT", "IP:PORT", "unix:P" */
	uint8_t token[CMON_TOKEN_LEN]; /* what a consumer must show in Start (random,
	                                 this run only); sent to the registry only */
	struct stream *active;        /* the consumer being streamed to, or NULL */
	bool active_blocks;           /* ...and it asked for `block` */
	bool consumer_lost;           /* the last consumer vanished without being done:
	                                 at end of log, wait -drain for it to return */
	struct stream_list streams;   /* every data connection */
	size_t nstreams;              /* their number */
	uint64_t refused;             /* data connections refused (every slot a consumer's) */
	uint64_t evicted;             /* ...closed unproven to make room for a newer one */
	uint64_t silent;              /* ...closed for saying nothing within -hello-timeout */
	double refused_said, silent_said; /* when those were last logged (monotonic) */
	struct regset *reg;           /* registry links, or NULL (standalone) */
	pid_t child;                  /* CMD's pid, or 0 */
	bool child_done;              /* CMD has exited */
	int child_status;             /* its wait status */
	struct event *sig_event;      /* signalfd reader */
	int sigfd;                    /* signalfd, or -1 */
	bool stopping;                /* told to exit: end the log, never block */
	int exit_code;                /* what main returns */
};

/* core.c — policy and life cycle. */
int core_init(struct snarf *s);                          /* timers and the buffer; 0 or <0 */
void core_free(struct snarf *s);                         /* release what core_init made */
void core_done(struct snarf *s);                         /* everything finished: leave the loop */
void core_format_known(struct snarf *s, Cmon__Format fmt); /* the input's format was detected */
void core_header_append(struct snarf *s, const uint8_t *p, size_t len); /* grow the saved header */
bool core_record(struct snarf *s, const uint8_t *p, size_t len); /* buffer a record; false = paused */
size_t core_records(struct snarf *s, const uint8_t *p, const uint32_t *ends, size_t n); /* a run */
uint8_t *core_read_room(struct snarf *s, size_t want, size_t *room); /* where to read in place */
size_t core_commit(struct snarf *s, const uint32_t *ends, size_t n); /* staged bytes -> records */
void core_lost(struct snarf *s, uint64_t n, const char *why); /* damaged input: mark a gap */
void core_input_ended(struct snarf *s);                  /* the writer closed the log */
void core_child_exited(struct snarf *s);                 /* CMD was reaped */
void core_space_freed(struct snarf *s);                  /* records left the buffer: maybe resume */
void core_blocked(struct snarf *s);                      /* input paused: bound the stall */
void core_hold_start(struct snarf *s, double seconds, const char *why); /* keep, do not drop */
void core_hold_release(struct snarf *s, const char *why); /* end the hold */
void core_check_done(struct snarf *s);                   /* advance RUNNING/DRAINING/LEAVING */
uint64_t core_log_length(const struct snarf *s);         /* records in the log so far (§11 unit) */
void core_shutdown(struct snarf *s, const char *why);    /* a signal: end the log (twice: exit) */

/* input.c — reading and cutting the log. */
int input_open(struct snarf *s, int fd);                 /* read the log from fd (owned) */
int input_open_fifo(struct snarf *s, const char *path);  /* create/open a FIFO and read it */
void input_pause(struct snarf *s);                       /* stop reading (buffer must not drop) */
void input_resume(struct snarf *s);                      /* read again, from the loop */
void input_stop(struct snarf *s);                        /* cut what is staged, then end the log */
void input_close(struct snarf *s);                       /* release the input */

/* stream.c — the data endpoint. */
int stream_listen(struct snarf *s);                      /* make the token, open the data endpoint */
void stream_pump(struct snarf *s);                       /* move records to the consumer's socket */
void stream_dropped(struct snarf *s, uint64_t n);        /* n oldest records were dropped */
void stream_format_known(struct snarf *s);               /* a waiting consumer may be Accepted */
bool stream_drained(struct snarf *s);                    /* the consumer has everything */
bool stream_ending(struct snarf *s);                     /* a final message is being flushed */
void stream_end(struct snarf *s, Cmon__EndReason reason); /* send LogEnd to the consumer, close */
void stream_close_all(struct snarf *s);                  /* close every data connection now */

/* announce.c — the registry link. */
int reg_start(struct snarf *s);                          /* connect and announce (retrying) */
void reg_leave(struct snarf *s);                         /* say Leave, then core_done() */
bool reg_first_answer_pending(const struct snarf *s);    /* first AnnounceAck still expected */
void reg_free(struct snarf *s);                          /* release the link */

/* child.c — CMD and signals. */
int signals_block(void);                                 /* block handled signals (before spawn) */
int child_spawn(struct snarf *s, int *log_fd);           /* run CMD with the log pipe */
int child_exit_code(struct snarf *s);                    /* CMD's status (may die of its signal) */
int signals_setup(struct snarf *s);                      /* signalfd into the loop */
void signals_free(struct snarf *s);                      /* release the signalfd */

/* version.c: the program's version for the log header (--program-version,
 * else CMD's build-id); s->version, "" when there is none. */
void snarf_version(struct snarf *s);
bool snarf_version_valid(const char *v);

#endif
