/* peval — evaluate PSpec expressions against a monitoring log, interactively.
 *
 *   peval [-s SPEC] [-i PATH] [-c CMDFILE] [LOG|-]
 *
 * Commands end in ';': expressions (their values are printed), def, event,
 * timed event, interval, nested interval, proc, import, echo "...", help.
 * On a terminal the loop of repl.c reads them, with line editing and history. A log on
 * standard input is copied to a temporary file, so that new declarations can
 * be evaluated by reading it again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmon/cmdline.h"
#include "pspec/pspec.h"
#include "repl.h"

static const char usage[] =
    "Usage: peval [-s SPEC] [-i PATH] [-c CMDFILE] [LOG|-]\n"
    "Evaluate PSpec expressions against a monitoring log (cmon-ascii 1 or cmon-bin 1).\n"
    "\n"
    "  -s, --spec SPEC         declarations to start from (its assertions are not checked)\n"
    "  -i, --path PATH         colon-separated folders searched for imported specs\n"
    "  -c, --commands CMDFILE  read the commands from CMDFILE instead of the terminal\n"
    "  -h, --help              show this help and exit\n"
    "  -V, --version           show the version and exit\n"
    "  LOG                     the log; '-' for standard input (then -c is needed). Without\n"
    "                          LOG and with -c, a log piped on standard input is used.\n"
    "Long options may be written with one dash or two.\n"
    "Commands end with ';'. Type help; for the syntax.\n"
    "\n"
    "Exit status:\n"
    "  0  every command succeeded\n"
    "  2  some command had an error, or the command line is wrong\n"
    "  3  the log could not be read\n";

typedef struct state {
    pspec_session *session;
    int status;
} state;

static void on_report(void *ctx, const pspec_report *r)
{
    (void)ctx;
    char *s = pspec_report_format(r, PSPEC_FORMAT_TEXT);
    puts(s);
    free(s);
    fflush(stdout);
}

static void on_out(void *ctx, const char *text)
{
    (void)ctx;
    fputs(text, stdout);
    fflush(stdout);
}

/* Run one chunk of commands. `first_line` keeps messages pointing at the
 * right line of the command file: the chunk is prefixed with blank lines. */
static void run_chunk(state *st, const char *text, const char *source, unsigned first_line)
{
    size_t pad = first_line > 1 ? first_line - 1 : 0;
    size_t n = strlen(text);
    char *buf = malloc(pad + n + 1);
    if (!buf) {
        fprintf(stderr, "peval: out of memory\n");
        exit(3);
    }
    memset(buf, '\n', pad);
    memcpy(buf + pad, text, n + 1);
    char *err = NULL;
    int rc = pspec_session_run(st->session, buf, source, on_report, on_out, st, &err);
    if (rc < 0) {
        fprintf(stderr, "%s\n", err ? err : "error");
        if (st->status == 0)
            st->status = rc == -EIO ? 3 : 2;
    }
    free(err);
    free(buf);
}

/* Read commands line by line from f, running each complete command. */
static void run_stream(state *st, FILE *f, const char *source)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    char *acc = NULL;
    size_t acclen = 0;
    unsigned lineno = 0, start_line = 1;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (acclen == 0)
            start_line = lineno;
        char *na = realloc(acc, acclen + (size_t)len + 1);
        if (!na) {
            fprintf(stderr, "peval: out of memory\n");
            exit(3);
        }
        acc = na;
        memcpy(acc + acclen, line, (size_t)len + 1);
        acclen += (size_t)len;
        if (pspec_command_complete(acc)) {
            run_chunk(st, acc, source, start_line);
            acclen = 0;
            acc[0] = '\0';
        }
    }
    if (acclen && strspn(acc, " \t\r\n") != acclen) {
        /* A last command without ';': run it so the error says what is missing. */
        run_chunk(st, acc, source, start_line);
    }
    free(acc);
    free(line);
}

/* The interactive loop (repl.c) runs each command it reads here. */
static void run_input(void *ctx, const char *text)
{
    run_chunk(ctx, text, "<input>", 1);
}

/* True when the seekable fd has no bytes left to read. */
static bool is_empty(int fd)
{
    off_t at = lseek(fd, 0, SEEK_CUR);
    char c;
    return at >= 0 && pread(fd, &c, 1, at) == 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "spec", required_argument, NULL, 's' },
        { "path", required_argument, NULL, 'i' },
        { "commands", required_argument, NULL, 'c' },
        { NULL, 0, NULL, 0 },
    };
    static const struct cmon_cmdline cl = { "peval", usage, "s:i:c:", longopts };
    const char *spec = NULL, *path = NULL, *cmdfile = NULL, *log = NULL;
    int ch;
    while ((ch = cmon_cmdline_next(&cl, argc, argv)) != -1) {
        switch (ch) {
        case 's': spec = optarg; break;
        case 'i': path = optarg; break;
        case 'c': cmdfile = optarg; break;
        }
    }
    if (argc - optind > 1)
        cmon_cmdline_fail(&cl, "more than one log given ('%s' and '%s')", argv[optind], argv[optind + 1]);
    log = optind < argc ? argv[optind] : NULL;
    bool log_on_stdin = (log && strcmp(log, "-") == 0) || (!log && cmdfile && !isatty(0));
    if (log_on_stdin && !cmdfile)
        cmon_cmdline_fail(&cl, "the log is on standard input, so the commands must come from -c CMDFILE");
    if (cli_spec_on_stdin(spec) && (log_on_stdin || !cmdfile))
        cmon_cmdline_fail(&cl, "the specification is on standard input (-s -), so the log must be a named "
                          "file and the commands must come from -c CMDFILE");
    pspec *ps;
    if (spec) {
        ps = cli_load_spec("peval", spec, path);
        if (!ps)
            return 2;
    } else {
        ps = pspec_new();
        if (path)
            pspec_set_search_path(ps, path);
    }
    int fd = -1;
    if (log || log_on_stdin) {
        fd = cli_open_log("peval", log_on_stdin ? "-" : log, true);
        if (fd < 0) {
            pspec_free(ps);
            return 3;
        }
        /* `peval -c CMDFILE` with nothing on standard input (/dev/null, an
         * empty pipe) is a session without a log, not an unreadable log. */
        if (!log && log_on_stdin && is_empty(fd)) {
            if (fd > 0)
                close(fd);
            fd = -1;
            log_on_stdin = false;
        }
    }
    char *err = NULL;
    state st = {0};
    st.session = pspec_session_new(ps, fd, cli_log_name(log_on_stdin ? "-" : log), cli_warn, NULL, &err);
    if (!st.session) {
        fprintf(stderr, "peval: %s: %s\n", cli_log_name(log), err ? err : "cannot read the log");
        free(err);
        pspec_free(ps);
        return 3;
    }
    if (cmdfile) {
        FILE *f = fopen(cmdfile, "r");
        if (!f) {
            fprintf(stderr, "peval: %s: %s\n", cmdfile, strerror(errno));
            st.status = 2;
        } else {
            run_stream(&st, f, cmdfile);
            fclose(f);
        }
    } else if (isatty(0)) {
        repl_run(run_input, &st);
    } else {
        run_stream(&st, stdin, "<stdin>");
    }
    pspec_session_free(st.session);
    if (fd > 0)
        close(fd);
    pspec_free(ps);
    return st.status;
}
