/* transport-walk — the floor under snarflog's reading side: `cat >/dev/null`
 * that also finds where every record ends, as any reader must that counts
 * the whole records it drops (docs/PERFORMANCE.md, issue 14 target 4).
 *
 *   transport-walk -format ascii|binary < LOG
 *
 * Reads standard input 128 KiB at a time, as cat does, and counts records:
 * ascii lines by their newlines, binary frames by their varint length
 * prefixes, one after the other (a frame may span two reads). Prints the
 * count and bytes to standard error at the end. Nothing is checked or
 * kept: this is the least a record-aware reader does.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	static uint8_t buf[128 << 10];
	unsigned long long records = 0, bytes = 0;
	uint64_t skip = 0;          /* binary: bytes of the current frame still to come */
	uint64_t len = 0;           /* binary: a length prefix read so far ... */
	unsigned shift = 0;         /* ... and its next bit */
	int binary;

	if (argc != 3 || strcmp(argv[1], "-format") != 0 ||
	    (strcmp(argv[2], "ascii") != 0 && strcmp(argv[2], "binary") != 0)) {
		fprintf(stderr, "usage: transport-walk -format ascii|binary < LOG\n");
		return 2;
	}
	binary = strcmp(argv[2], "binary") == 0;
	for (;;) {
		ssize_t n = read(0, buf, sizeof buf);
		const uint8_t *p = buf, *e;

		if (n < 0) {
			perror("transport-walk: read");
			return 1;
		}
		if (n == 0)
			break;
		bytes += (unsigned long long)n;
		e = buf + n;
		if (!binary) {
			while ((p = memchr(p, '\n', (size_t)(e - p))) != NULL) {
				records++;
				p++;
			}
			continue;
		}
		while (p < e) {
			if (skip) {
				size_t k = (size_t)(e - p) < skip ? (size_t)(e - p) : (size_t)skip;
				p += k;
				skip -= k;
				continue;
			}
			if (shift == 0 && p[0] < 0x80) {        /* the usual one-byte prefix */
				skip = p[0];
				p++;
				records++;
				continue;
			}
			len |= (uint64_t)(*p & 0x7f) << shift;
			shift += 7;
			if (!(*p++ & 0x80) || shift >= 64) {
				skip = len;
				len = 0;
				shift = 0;
				records++;
			}
		}
	}
	fprintf(stderr, "transport-walk: %llu records, %llu bytes\n", records, bytes);
	return 0;
}
