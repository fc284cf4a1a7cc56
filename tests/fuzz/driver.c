/* driver.c — runs a fuzz target without libFuzzer.
 *
 *   fuzz_<name> [FILE|DIR ...]
 *
 * Calls LLVMFuzzerTestOneInput once per file given, and once per regular file
 * in each directory given (in name order, hidden files skipped). Each input
 * is passed in a buffer of exactly its size, so AddressSanitizer sees any
 * read past its end. Arguments starting with '-' (libFuzzer flags) are
 * ignored. With no inputs at all the target gets one empty input. A crash
 * stops the run; the input being run is named on standard error first.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Run the target on one file. Returns 0, or -1 if it cannot be read. */
static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "driver: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) {
        fprintf(stderr, "driver: %s: cannot read\n", path);
        free(buf);
        return -1;
    }
    uint8_t *exact = malloc(n ? n : 1);
    memcpy(exact, buf, n);
    free(buf);
    fprintf(stderr, "driver: running %s (%zu bytes)\n", path, n);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int skip_entry(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

/* Run the target on every regular file in a directory; returns the count or -1. */
static int run_dir(const char *dir)
{
    struct dirent **names;
    int n = scandir(dir, &names, skip_entry, alphasort);
    if (n < 0) {
        fprintf(stderr, "driver: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    int ran = 0, rc = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(dir) + strlen(names[i]->d_name) + 2;
        char *path = malloc(len);
        snprintf(path, len, "%s/%s", dir, names[i]->d_name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (run_file(path) < 0)
                rc = -1;
            else
                ran++;
        }
        free(path);
        free(names[i]);
    }
    free(names);
    return rc < 0 ? -1 : ran;
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    int ran = 0, failed = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-')
            continue;
        struct stat st;
        if (stat(argv[i], &st) < 0) {
            fprintf(stderr, "driver: %s: %s\n", argv[i], strerror(errno));
            failed = 1;
        } else if (S_ISDIR(st.st_mode)) {
            int n = run_dir(argv[i]);
            if (n < 0)
                failed = 1;
            else
                ran += n;
        } else if (run_file(argv[i]) < 0) {
            failed = 1;
        } else {
            ran++;
        }
    }
    if (ran == 0 && !failed) {
        LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
        ran = 1;
    }
    fprintf(stderr, "driver: %d input(s) run%s\n", ran, failed ? ", some could not be read" : "");
    return failed;
}
