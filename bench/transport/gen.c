/* transport-gen — a monitored program at full speed, for the transport
 * benchmarks: writes N sequence-numbered records (cmon-ascii 1 lines or
 * cmon-bin 1 events) as fast as write() takes them, to CMON_LOG_FD when
 * snarflog runs it, else to -o PATH, -connect HOST:PORT, or stdout.
 * With -wait FILE it starts writing once FILE exists (a FIFO: the moment
 * something opens it for writing); with -work N it does
 * N steps of arithmetic between records, like a program with real work. Reports on stderr
 * how long writing took (what the program "feels"). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			perror("transport-gen: write");
			exit(1);
		}
		p += w;
		n -= (size_t)w;
	}
}

/* Decimal digits of v at p; returns the length. */
static size_t utoa(char *p, unsigned long long v)
{
	char tmp[24];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		p[i] = tmp[n - 1 - i];
	return n;
}

static size_t varint(char *p, unsigned long long v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (char)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (char)v;
	return n;
}

/* One binary Event record (type 1, thread 7, ts, values seq and 4096). */
static size_t bin_event(char *p, unsigned long long ts, double seq)
{
	char body[64];
	size_t n = 0, m = 0;
	double v[2] = { seq, 4096 };

	body[n++] = 0x08; body[n++] = 0x01;              /* type = 1 */
	body[n++] = 0x10; body[n++] = 0x07;              /* thread = 7 */
	body[n++] = 0x18; n += varint(body + n, ts);     /* ts */
	body[n++] = 0x2a; body[n++] = 16;                /* values, packed */
	memcpy(body + n, v, 16);
	n += 16;
	p[m++] = 0;                                       /* frame length, below */
	p[m++] = 0x1a;                                    /* Record.event */
	m += varint(p + m, n);
	memcpy(p + m, body, n);
	m += n;
	p[0] = (char)(m - 1);
	return m;
}

/* Header{magic, version 1, program} and TypeDef{1, "Ev", [seq, n]} records. */
static size_t bin_header(char *p)
{
	static const char h[] = "\x0a\x08" "cmon-bin" "\x10\x01" "\x1a\x09" "transport";
	static const char t[] = "\x08\x01" "\x12\x02" "Ev" "\x1a\x03" "seq" "\x1a\x01" "n";
	size_t n = 0;

	p[n++] = (char)(sizeof h - 1 + 2);
	p[n++] = 0x0a;
	p[n++] = (char)(sizeof h - 1);
	memcpy(p + n, h, sizeof h - 1);
	n += sizeof h - 1;
	p[n++] = (char)(sizeof t - 1 + 2);
	p[n++] = 0x12;
	p[n++] = (char)(sizeof t - 1);
	memcpy(p + n, t, sizeof t - 1);
	return n + sizeof t - 1;
}

static int dial(const char *hostport)
{
	char host[256], *colon;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	int fd;

	snprintf(host, sizeof host, "%s", hostport);
	colon = strrchr(host, ':');
	if (!colon)
		exit(2);
	*colon = '\0';
	if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
		exit(2);
	fd = socket(res->ai_family, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) < 0) {
		perror("transport-gen: connect");
		exit(1);
	}
	freeaddrinfo(res);
	return fd;
}

int main(int argc, char **argv)
{
	struct stat st;
	unsigned long long n = 1000000, bytes = 0;
	const char *out = NULL, *conn = NULL, *wait = NULL, *env = getenv("CMON_LOG_FD");
	int binary = 0, fd = 1;
	unsigned long work = 0;
	volatile unsigned long sink = 0;
	static char buf[1 << 16];
	size_t len = 0;
	double t0, t1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "-format") && i + 1 < argc)
			binary = !strcmp(argv[++i], "binary");
		else if (!strcmp(argv[i], "-o") && i + 1 < argc)
			out = argv[++i];
		else if (!strcmp(argv[i], "-connect") && i + 1 < argc)
			conn = argv[++i];
		else if (!strcmp(argv[i], "-wait") && i + 1 < argc)
			wait = argv[++i];
		else if (!strcmp(argv[i], "-work") && i + 1 < argc)
			work = strtoul(argv[++i], NULL, 10);
		else {
			fprintf(stderr, "usage: transport-gen [-n N] [-format ascii|binary] "
					"[-o PATH | -connect HOST:PORT] [-wait FILE] [-work N]\n");
			return 2;
		}
	}
	if (env)
		fd = atoi(env);
	else if (out)
		fd = open(out, O_WRONLY);
	else if (conn)
		fd = dial(conn);
	if (fd < 0) {
		perror("transport-gen: open");
		return 1;
	}
	/* Start writing only once FILE exists (the benchmark's "go"). A FIFO
	 * is opened: that returns the moment the benchmark opens it for
	 * writing, where looking for a file every millisecond would add up to
	 * a millisecond, a different one in every run. */
	if (wait && stat(wait, &st) == 0 && S_ISFIFO(st.st_mode)) {
		int g = open(wait, O_RDONLY);

		if (g < 0) {
			perror("transport-gen: -wait");
			return 1;
		}
		close(g);
	} else {
		while (wait && access(wait, F_OK) != 0)
			usleep(1000);
	}
	t0 = now();
	if (binary) {
		len = bin_header(buf);
	} else {
		len = (size_t)snprintf(buf, sizeof buf, "#cmon-ascii 1\n#program transport\n");
	}
	for (unsigned long long i = 0; i < n; i++) {
		/* The program's own work between two records (-work N steps). */
		for (unsigned long k = 0; k < work; k++)
			sink = sink * 31 + k;
		if (len > sizeof buf - 64) {
			write_all(fd, buf, len);
			bytes += len;
			len = 0;
		}
		if (binary) {
			len += bin_event(buf + len, 1000000 + i * 7, (double)i);
		} else {
			len += utoa(buf + len, 1000000 + i * 7);
			memcpy(buf + len, " 7 StartRead ", 13);
			len += 13;
			len += utoa(buf + len, i);
			memcpy(buf + len, " 4096\n", 6);
			len += 6;
		}
	}
	write_all(fd, buf, len);
	bytes += len;
	t1 = now();
	fprintf(stderr, "transport-gen: %llu records, %llu bytes, %.6f s\n", n, bytes, t1 - t0);
	return 0;
}
