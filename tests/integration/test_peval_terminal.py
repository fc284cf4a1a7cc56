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
        end = time.time() + timeout
        while time.time() < end:
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
        raise ct.TestFailure("peval did not exit")


def main():
    t = Term([ct.binary("peval"), "-s", SPEC, LOG])
    t.read_until('PSpec Evaluator. Type "help" or "?" for syntax.')
    t.read_until("-> ")
    # A command over two lines: the continuation prompt, then the result.
    t.send("{count r\n")
    t.send(" : Read};\n")
    t.read_until("3000")
    # History: the up arrow recalls the previous command (both lines).
    mark = len(t.out)
    t.send("\x1b[A\n")
    t.read_until("3000", since=mark)
    # Line editing: type the end first, go to the start (Ctrl-A), insert, end (Ctrl-E), finish.
    mark = len(t.out)
    t.send("+ 2;\x01" + "40 \x05" + "\n")
    t.read_until("42", since=mark)
    # An error names the place and the session goes on.
    mark = len(t.out)
    t.send("nosuch + 1;\n")
    t.read_until("error: undeclared identifier 'nosuch'", since=mark)
    mark = len(t.out)
    t.send("1 ms / 1 us;\n")
    t.read_until("1000", since=mark)
    t.send("\x04")    # end of input
    code = t.finish()
    ct.check(code == 2, "peval should exit 2 after a command with an error, got %s", code)


if __name__ == "__main__":
    ct.run_test(main)
