/* The control socket (see control.h). Each connection is a small state
 * machine: read the request (bounded, with a deadline), answer it in one
 * go, write the answer out, close. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/listener.h>

#include "cmon/log.h"
#include "control.h"
#include "store.h"

/* Where a control connection is. */
enum ctl_state {
	CTL_READING,      /* waiting for the whole request */
	CTL_WRITING,      /* the answer is queued; close when it is out */
};

/* One telemonctl connection. */
struct ctl_conn {
	TAILQ_ENTRY(ctl_conn) link;   /* in control.conns */
	struct control *ctl;          /* back pointer */
	enum ctl_state state;         /* see enum ctl_state */
	struct bufferevent *bev;      /* the socket */
	struct event *timer;          /* request deadline */
};
TAILQ_HEAD(ctl_list, ctl_conn);

/* The control socket. */
struct control {
	struct tmon *tm;                /* the service */
	struct evconnlistener *lis;   /* listening socket */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* its path */
	struct ctl_list conns;        /* open connections */
	size_t n;                     /* their number */
};

static void conn_free(struct ctl_conn *cc)
{
	TAILQ_REMOVE(&cc->ctl->conns, cc, link);
	cc->ctl->n--;
	bufferevent_free(cc->bev);
	event_free(cc->timer);
	free(cc);
}

static void reply_error(struct ctl_conn *cc, const char *msg)
{
	struct evbuffer *out = bufferevent_get_output(cc->bev);
	char line[600];

	snprintf(line, sizeof line, "%s", msg);
	for (char *c = line; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
	evbuffer_add_printf(out, "error %s\n", line);
}

/* Split the request into strings and run it. */
static void answer(struct ctl_conn *cc, struct evbuffer *in, size_t len)
{
	struct tmon *tm = cc->ctl->tm;
	char *buf = malloc(len + 1), *argv[CTL_ARGS_MAX], err[2048] = "";
	struct ctl_request r = { 0 };
	struct evbuffer *body = evbuffer_new();
	size_t n = 0, off = 0;

	cc->state = CTL_WRITING;
	bufferevent_disable(cc->bev, EV_READ);
	evtimer_del(cc->timer);
	if (!buf || !body) {
		reply_error(cc, "out of memory");
		goto out;
	}
	evbuffer_remove(in, buf, len);
	buf[len] = '\0';
	while (off < len && buf[off] != '\0') {
		if (n == CTL_ARGS_MAX) {
			reply_error(cc, "too many arguments");
			goto out;
		}
		argv[n++] = buf + off;
		off += strlen(buf + off) + 1;
	}
	if (n < 4 || strcmp(argv[0], CTL_MAGIC) != 0) {
		reply_error(cc, "not a telemonctl/1 request (telemonctl and telemonitor versions "
				"differ?)");
		goto out;
	}
	r.json = !strcmp(argv[1], "json");
	r.width = atoi(argv[2]);                /* 0: not a terminal, do not cut */
	if (r.width != 0 && (r.width < 40 || r.width > 1000))
		r.width = 80;
	r.utf8 = !strcmp(argv[3], "utf8");
	r.argc = (int)n - 4;
	r.argv = argv + 4;
	if (r.argc < 1) {
		reply_error(cc, "no command");
		goto out;
	}
	/* read-your-writes: one connection, and the rows waiting for the
	 * commit made first; commit so other readers of the database see
	 * the same */
	instances_save(tm);
	store_flush(tm->store);
	if (commands_run(tm, &r, body, err, sizeof err) < 0) {
		reply_error(cc, err[0] ? err : "failed");
		goto out;
	}
	evbuffer_add(bufferevent_get_output(cc->bev), "ok\n", 3);
	evbuffer_add_buffer(bufferevent_get_output(cc->bev), body);
out:
	free(buf);
	if (body)
		evbuffer_free(body);
	store_commit(tm->store);
	if (evbuffer_get_length(bufferevent_get_output(cc->bev)) == 0)
		conn_free(cc);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct ctl_conn *cc = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in);
	struct evbuffer_ptr end;
	unsigned char first;

	if (cc->state != CTL_READING)
		return;
	/* the request ends with an empty string: "\0\0", or a lone "\0" */
	evbuffer_copyout(in, &first, 1);
	if (len && first == '\0') {
		answer(cc, in, 1);
		return;
	}
	end = evbuffer_search(in, "\0\0", 2, NULL);
	if (end.pos >= 0) {
		answer(cc, in, (size_t)end.pos + 2);
		return;
	}
	if (len > TM_CTL_REQUEST_MAX) {
		cc->state = CTL_WRITING;
		bufferevent_disable(bev, EV_READ);
		reply_error(cc, "request too long");
	}
}

static void write_cb(struct bufferevent *bev, void *arg)
{
	struct ctl_conn *cc = arg;

	if (cc->state == CTL_WRITING && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		conn_free(cc);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	conn_free(arg);
}

static void timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ctl_conn *cc = arg;

	if (cc->state != CTL_READING)
		return;
	cc->state = CTL_WRITING;
	bufferevent_disable(cc->bev, EV_READ);
	reply_error(cc, "incomplete request");
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
		      void *arg)
{
	struct control *ctl = arg;
	struct timeval tv = { CTL_TIMEOUT_S, 0 };
	struct ctl_conn *cc;

	if (ctl->n >= TM_CTL_CONNS_MAX) {
		cmon_warn("control: more than %d telemonctl connections; refusing one",
			  TM_CTL_CONNS_MAX);
		close(fd);
		return;
	}
	cc = calloc(1, sizeof *cc);
	if (!cc) {
		close(fd);
		return;
	}
	cc->ctl = ctl;
	cc->bev = bufferevent_socket_new(ctl->tm->base, fd, BEV_OPT_CLOSE_ON_FREE);
	cc->timer = evtimer_new(ctl->tm->base, timeout_cb, cc);
	if (!cc->bev || !cc->timer) {
		if (cc->bev)
			bufferevent_free(cc->bev);
		else
			close(fd);
		if (cc->timer)
			event_free(cc->timer);
		free(cc);
		return;
	}
	TAILQ_INSERT_TAIL(&ctl->conns, cc, link);
	ctl->n++;
	bufferevent_setcb(cc->bev, read_cb, write_cb, event_cb, cc);
	bufferevent_setwatermark(cc->bev, EV_READ, 0, TM_CTL_REQUEST_MAX + 1);
	bufferevent_enable(cc->bev, EV_READ | EV_WRITE);
	evtimer_add(cc->timer, &tv);
}

int control_open(struct tmon *tm)
{
	struct control *ctl = calloc(1, sizeof *ctl);
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd, r;

	if (!ctl)
		return -ENOMEM;
	ctl->tm = tm;
	TAILQ_INIT(&ctl->conns);
	if ((size_t)snprintf(ctl->path, sizeof ctl->path, "%s/control.sock", tm->state_dir) >=
	    sizeof ctl->path) {
		cmon_err("state directory path too long for a socket: %s", tm->state_dir);
		free(ctl);
		return -ENAMETOOLONG;
	}
	memcpy(sun.sun_path, ctl->path, sizeof ctl->path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		r = -errno;
		free(ctl);
		return r;
	}
	unlink(ctl->path);                       /* a stale socket of a crashed run */
	if (bind(fd, (struct sockaddr *)&sun, sizeof sun) < 0 || chmod(ctl->path, 0660) < 0 ||
	    listen(fd, 16) < 0) {
		r = -errno;
		cmon_err("control socket %s: %s", ctl->path, strerror(errno));
		close(fd);
		free(ctl);
		return r;
	}
	ctl->lis = evconnlistener_new(tm->base, accept_cb, ctl,
				      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (!ctl->lis) {
		close(fd);
		free(ctl);
		return -ENOMEM;
	}
	tm->ctl = ctl;
	return 0;
}

void control_close(struct tmon *tm)
{
	struct control *ctl = tm->ctl;
	struct ctl_conn *cc;

	if (!ctl)
		return;
	while ((cc = TAILQ_FIRST(&ctl->conns)))
		conn_free(cc);
	evconnlistener_free(ctl->lis);
	unlink(ctl->path);
	free(ctl);
	tm->ctl = NULL;
}
