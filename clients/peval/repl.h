/* peval's interactive loop on a terminal: prompts, line editing and
 * history (libedit), commands over several lines, and the words that work
 * alone on a line without ';' (help, ?, quit, exit). */
#ifndef PEVAL_REPL_H
#define PEVAL_REPL_H

#include <stdbool.h>
#include <stddef.h>

/* Runs one complete command (text ending in ';', possibly several lines). */
typedef void repl_run_fn(void *ctx, const char *text);

/* Most commands kept in the history file. */
#define REPL_HISTORY_MAX 1000

/* Read commands from the terminal until Ctrl-D, quit or exit, handing each
 * complete one to `run`. Ctrl-C cancels the input typed so far (however
 * many lines) and gives a fresh prompt. History is loaded from and saved
 * to repl_history_path(). */
void repl_run(repl_run_fn *run, void *ctx);

/* The history file, $XDG_STATE_HOME/cmon/peval_history (default
 * ~/.local/state/cmon/peval_history), into `out`; its folder is created
 * with mode 0700. False (nothing written to `out`) when there is no home
 * to put it in or the folder cannot be made. */
bool repl_history_path(char *out, size_t size);

#endif
