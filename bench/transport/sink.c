/* transport-sink — the receiving end for the forwarding comparisons:
 * accepts one TCP connection on 127.0.0.1 (port written to -portfile),
 * reads until it has seen N newlines, and reports bytes and the time from
 * accepting to the last line. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	unsigned long long want = 0, lines = 0, bytes = 0;
	const char *portfile = NULL;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof sa;
	static char buf[1 << 18];
	int ls, fd, one = 1;
	double t0;
	FILE *f;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-lines"))
			want = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "-portfile"))
			portfile = argv[i + 1];
	}
	if (!want || !portfile) {
		fprintf(stderr, "usage: transport-sink -lines N -portfile FILE\n");
		return 2;
	}
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ls = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(ls, 4) < 0 ||
	    getsockname(ls, (struct sockaddr *)&sa, &len) < 0) {
		perror("transport-sink");
		return 1;
	}
	f = fopen(portfile, "w");
	fprintf(f, "%u\n", ntohs(sa.sin_port));
	fclose(f);
	fd = accept(ls, NULL, NULL);
	t0 = now();
	{
		/* Give up after 20 s of silence (a lossy sender never finishes). */
		struct timeval tv = { 20, 0 };
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	}
	while (lines < want) {
		ssize_t n = read(fd, buf, sizeof buf);
		const char *p = buf, *end;
		if (n <= 0)
			break;
		bytes += (unsigned long long)n;
		end = buf + n;
		while ((p = memchr(p, '\n', (size_t)(end - p)))) {
			lines++;
			p++;
		}
	}
	printf("transport-sink: %llu lines, %llu bytes, %.6f s\n", lines, bytes, now() - t0);
	return lines >= want ? 0 : 1;
}
