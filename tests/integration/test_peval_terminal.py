#!/usr/bin/env python3
"""peval on a terminal: banner, prompt, a command over several lines,
history recalled with the up arrow, line editing (Ctrl-A, Ctrl-E), an error
that does not end the session, and a clean exit at end of input (Ctrl-D).
Runs peval in a pseudo-terminal, as a user would."""
import os
import pty
import select
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmontest as ct  # noqa: E402

SRC = os.environ.get("CMON_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
SPEC = os.path.join(SRC, "config", "examples", "fsread.pspec")
LOG = os.path.join(SRC, "config", "examples", "fsread-sample.log")


class Term:
    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.environ["TERM"] = "xterm"
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


def main():
    t = Term([ct.binary("peval"), "-s", SPEC, LOG])
    t.read_until('PSpec Evaluator. Type "help" or "?" for syntax.')
    t.read_until("-> ")

    def command(keys, expect):
        """Type `keys` at the prompt, wait for `expect` and for the next prompt
        (typing ahead of the prompt can lose keys while libedit switches the
        terminal mode, as it would for a person)."""
        mark = len(t.out)
        t.send(keys)
        t.read_until(expect, since=mark)
        t.read_until("-> ", since=t.out.index(expect.encode(), mark))
        time.sleep(0.2)     # let libedit put the terminal in raw mode

    # A command over two lines: the continuation prompt, then the result.
    mark = len(t.out)
    t.send("{count r\n")
    t.read_until("   ", since=mark)
    command(" : Read};\n", "3000")
    # History: the up arrow recalls the previous command (both lines).
    command("\x1b[A\n", "3000")
    # Line editing: type the end first, go to the start (Ctrl-A), insert, end (Ctrl-E), finish.
    command("+ 2;\x01" + "40 \x05" + "\n", "42")
    # An error names the place and the session goes on.
    command("nosuch + 1;\n", "error: undeclared identifier 'nosuch'")
    command("1 ms / 1 us;\n", "1000")
    code = t.finish()   # end of input
    ct.check(code == 2, "peval should exit 2 after a command with an error, got %s", code)


if __name__ == "__main__":
    ct.run_test(main)
