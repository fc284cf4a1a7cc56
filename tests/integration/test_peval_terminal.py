#!/usr/bin/env python3
"""peval on a terminal: banner, prompt, a command over several lines,
history recalled with the up arrow, line editing (Ctrl-A, Ctrl-E), an error
that does not end the session, and a clean exit at end of input (Ctrl-D).
`help`, `quit` and `exit` work alone on a line without ';'; Ctrl-C cancels
the command being typed (even over several lines) and the session goes on;
the history is kept in $XDG_STATE_HOME/cmon/peval_history (folder mode
0700) and recalled by the next session. Runs peval in a pseudo-terminal,
as a user would."""
import os
import pty
import select
import shutil
import stat
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmontest as ct  # noqa: E402

SRC = os.environ.get("CMON_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
SPEC = os.path.join(SRC, "config", "examples", "fsread.pspec")
LOG = os.path.join(SRC, "config", "examples", "fsread-sample.log")


class Term:
    def __init__(self, argv, state_home):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.environ["TERM"] = "xterm"
            os.environ["XDG_STATE_HOME"] = state_home
            os.execv(argv[0], argv)
        self.out = b""

    def read_until(self, needle, timeout=10, since=0):
        """Wait until `needle` appears in the output after offset `since`."""
        end = time.time() + timeout
        while needle.encode() not in self.out[since:]:
            left = end - time.time()
            if left <= 0:
                raise ct.TestFailure("timed out waiting for %r; terminal so far:\n%s" % (needle, self.out.decode(errors="replace")))
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                self.out += chunk
        return self.out

    def send(self, s):
        os.write(self.fd, s.encode())

    def finish(self, timeout=10):
        """Type end of input (Ctrl-D) and wait for the exit status. A Ctrl-D
        typed while libedit is switching the terminal mode can be lost, so it
        is typed again every second, as a person would."""
        end = time.time() + timeout
        last = 0
        while time.time() < end:
            if time.time() - last >= 1:
                try:
                    # After a lost Ctrl-D the line may hold debris: clear it first (Ctrl-U).
                    self.send("\x04" if last == 0 else "\x15\x04")
                except OSError:
                    pass
                last = time.time()
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            try:
                r, _, _ = select.select([self.fd], [], [], 0.1)
                if r:
                    self.out += os.read(self.fd, 4096)
            except OSError:
                pass
        os.kill(self.pid, 9)
        raise ct.TestFailure("peval did not exit; terminal so far:\n%r" % self.out[-400:])


def command(t, keys, expect):
    """Type `keys` at the prompt, wait for `expect` and for the next prompt
    (typing ahead of the prompt can lose keys while libedit switches the
    terminal mode, as it would for a person)."""
    mark = len(t.out)
    t.send(keys)
    t.read_until(expect, since=mark)
    t.read_until("-> ", since=t.out.index(expect.encode(), mark))
    time.sleep(0.2)     # let libedit put the terminal in raw mode


def session(state_home):
    t = Term([ct.binary("peval"), "-s", SPEC, LOG], state_home)
    t.read_until("PSpec Evaluator. Commands end with ';'. Type help (or ?) for the syntax, "
                 "quit or Ctrl-D")
    t.read_until("-> ")
    time.sleep(0.2)

    # A command over two lines: the continuation prompt, then the result.
    mark = len(t.out)
    t.send("{count r\n")
    t.read_until("   ", since=mark)
    command(t, " : Read};\n", "3000")
    # History: the up arrow recalls the previous command (both lines).
    command(t, "\x1b[A\n", "3000")
    # Line editing: type the end first, go to the start (Ctrl-A), insert, end (Ctrl-E), finish.
    command(t, "+ 2;\x01" + "40 \x05" + "\n", "42")
    # An error names the place and the session goes on.
    command(t, "nosuch + 1;\n", "error: undeclared identifier 'nosuch'")
    command(t, "1 ms / 1 us;\n", "1000")
    code = t.finish()   # end of input
    ct.check(code == 2, "peval should exit 2 after a command with an error, got %s", code)


def help_interrupt_history(state_home):
    t = Term([ct.binary("peval"), "-s", SPEC, LOG], state_home)
    t.read_until("-> ")
    time.sleep(0.2)
    # help without ';'
    command(t, "help\n", "alone on a line without ';'")
    ct.check(b"Commands end with ';'" in t.out, "help printed the syntax: %r", t.out[-300:])
    # Ctrl-C on a continuation line cancels the whole command
    mark = len(t.out)
    t.send("{count r\n")
    t.read_until("   ", since=mark)
    time.sleep(0.2)
    mark = len(t.out)
    t.send("\x03")
    t.read_until("-> ", since=mark)
    time.sleep(0.2)
    command(t, "1+1;\n", "2")
    ct.check(b"error" not in t.out[mark:], "the cancelled lines were forgotten: %r", t.out[mark:])
    # Ctrl-C in the middle of a first line too
    mark = len(t.out)
    t.send("1 +")
    time.sleep(0.2)
    t.send("\x03")
    t.read_until("-> ", since=mark)
    time.sleep(0.2)
    command(t, "20 + 3;\n", "23")
    ct.check(os.waitpid(t.pid, os.WNOHANG)[0] == 0, "peval still running after Ctrl-C")
    # quit without ';'
    mark = len(t.out)
    t.send("quit\n")
    end = time.time() + 10
    while True:
        pid, status = os.waitpid(t.pid, os.WNOHANG)
        if pid:
            break
        ct.check(time.time() < end, "quit did not end peval: %r", t.out[mark:])
        time.sleep(0.05)
    ct.check(os.waitstatus_to_exitcode(status) == 0, "quit: exit %r", status)

    # the history file, in a 0700 folder, bounded, recalled by the next session
    folder = os.path.join(state_home, "cmon")
    ct.check(stat.S_IMODE(os.stat(folder).st_mode) == 0o700, "history folder mode %o",
             stat.S_IMODE(os.stat(folder).st_mode))
    with open(os.path.join(folder, "peval_history"), errors="replace") as f:
        hist = f.read().replace("\\040", " ")     # libedit's file: spaces as \040
    ct.check("1+1;" in hist and "20 + 3;" in hist and "help" in hist, "history: %r", hist)
    ct.check("{count r" not in hist, "a cancelled command is not history: %r", hist)
    t = Term([ct.binary("peval"), "-s", SPEC, LOG], state_home)
    t.read_until("-> ")
    time.sleep(0.2)
    # up twice: quit, then 20 + 3;
    command(t, "\x1b[A\x1b[A\n", "23")
    ct.check(t.finish() == 0, "second session")


def main():
    tmp = tempfile.mkdtemp(prefix="peval-term-")
    try:
        session(os.path.join(tmp, "s1"))
        help_interrupt_history(os.path.join(tmp, "s2", "state"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    ct.run_test(main)
