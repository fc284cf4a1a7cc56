/* fuzz_log_bin.c — the cmon-bin 1 reader on arbitrary input.
 *
 * The input is read as a log (see fuzz_log_common.h for the cross-checks,
 * which include reading with and without the hand-written Event decoder).
 * An input whose first byte is 0xff has that byte replaced by a Header and
 * TypeDefs for ids 0-3, so that mutations reach the event frames. Besides,
 * the whole input and every frame in it are handed to the fast decoder,
 * which must agree with protobuf-c on each frame it accepts.
 */
#include "fuzz_log_common.h"

/* Header{magic "cmon-bin", version 1} and TypeDef{id i, name "E<i>"} for i = 0..3. */
static const uint8_t prelude[] = {
    0x0e, 0x0a, 0x0c, 0x0a, 0x08, 'c', 'm', 'o', 'n', '-', 'b', 'i', 'n', 0x10, 0x01,
    0x08, 0x12, 0x06, 0x08, 0x00, 0x12, 0x02, 'E', '0',
    0x08, 0x12, 0x06, 0x08, 0x01, 0x12, 0x02, 'E', '1',
    0x08, 0x12, 0x06, 0x08, 0x02, 0x12, 0x02, 'E', '2',
    0x08, 0x12, 0x06, 0x08, 0x03, 0x12, 0x02, 'E', '3',
};

/* Every frame of the input, as the reader would split it, through the
 * differential check. */
static void check_frames(const uint8_t *p, size_t n)
{
    CHECK(logbin_check_fast(p, n) == 0);
    size_t off = 0;
    while (off < n) {
        uint64_t len = 0;
        size_t i = off;
        int done = 0;
        for (int k = 0; k < 10 && i < n && !done; k++) {
            uint8_t b = p[i++];
            len |= (uint64_t)(b & 0x7f) << (7 * k);
            done = !(b & 0x80);
        }
        if (!done || len > n - i)
            return;
        CHECK(logbin_check_fast(p + i, (size_t)len) == 0);
        off = i + (size_t)len;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t chunk = size > 1 ? 1 + data[1] % 37 : 1;
    check_frames(data, size);
    if (size == 0 || data[0] != 0xff) {
        check_log(data, size, chunk);
        return 0;
    }
    uint8_t *buf = malloc(sizeof prelude + size);
    memcpy(buf, prelude, sizeof prelude);
    memcpy(buf + sizeof prelude, data + 1, size - 1);
    check_frames(buf + sizeof prelude, size - 1);
    check_log(buf, sizeof prelude + size - 1, chunk);
    free(buf);
    return 0;
}
