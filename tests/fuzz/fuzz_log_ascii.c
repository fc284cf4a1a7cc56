/* fuzz_log_ascii.c — the cmon-ascii 1 reader on arbitrary input.
 *
 * The input is read as a log (see fuzz_log_common.h for the cross-checks).
 * Its first byte picks the read size of the piecewise reading, and when the
 * input does not start with '#' a standard header is put in front, so that
 * most mutations exercise the record parser rather than format detection.
 * Every space-separated token the number parser accepts must also read the
 * same as with strtod.
 */
#include "fuzz_log_common.h"

static const char std_header[] = "#cmon-ascii 1\n#program fuzz\n";

/* The reader's number parser against strtod on each token of the input. */
static void check_numbers(const uint8_t *data, size_t size)
{
    size_t i = 0;
    while (i < size) {
        while (i < size && (data[i] == ' ' || data[i] == '\n' || data[i] == '\t'))
            i++;
        size_t s = i;
        while (i < size && data[i] != ' ' && data[i] != '\n' && data[i] != '\t')
            i++;
        size_t n = i - s;
        if (n == 0 || n > LOG_MAX_NUMBER)
            continue;
        char tok[LOG_MAX_NUMBER + 1];
        memcpy(tok, data + s, n);
        tok[n] = '\0';
        double v;
        if (logascii_number(NULL, tok, tok + n, &v) != 0)
            continue;
        char *end;
        double w = log_strtod(tok, &end);
        CHECK(end == tok + n);
        CHECK(memcmp(&v, &w, sizeof v) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t chunk = size ? 1 + data[0] % 61 : 1;
    check_numbers(data, size);
    if (size > 0 && data[0] == '#') {
        check_log(data, size, chunk);
        return 0;
    }
    size_t hn = sizeof std_header - 1;
    uint8_t *buf = malloc(hn + size + 1);
    memcpy(buf, std_header, hn);
    if (size)
        memcpy(buf + hn, data, size);
    check_log(buf, hn + size, chunk);
    free(buf);
    return 0;
}
