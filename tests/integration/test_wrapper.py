"""snarflog's wrapper mode (snarflog NAME -- CMD ARGS): CMD gets the log
pipe in CMON_LOG_FD and CMON_LOG, its own stdin/stdout/stderr, signals sent
to snarflog, and snarflog exits with CMD's exit status — or dies of the
same signal. A command that cannot be run gives 127."""
import signal
import subprocess

import cmontest as ct
from cmontest import check


def main():
    with ct.Env("wrapper") as env:
        # Exit status passes through.
        s = env.snarflog("w1", cmd=ct.logwriter_cmd("--count", "5", "--exit", "7"))
        check(s.wait(20) == 7, "exit status %r, want 7", s.p.returncode)

        # Death by signal passes through (SIGUSR1: terminates, no core).
        s = env.snarflog("w2", cmd=ct.logwriter_cmd("--count", "5", "--kill-self",
                                                    str(int(signal.SIGUSR1))))
        check(s.wait(20) == -signal.SIGUSR1, "status %r, want death by SIGUSR1", s.p.returncode)

        # SIGTERM to snarflog reaches CMD (which traps it and exits 42);
        # CMD's stdout is its own (here a pipe the test reads).
        s = env.snarflog("w3", cmd=ct.logwriter_cmd("--count", "5", "--trap-term", "--linger", "30"),
                         stdout=subprocess.PIPE)
        first = s.p.stdout.readline()     # the trap is set (a fixed sleep loses under load)
        check(first == b"logwriter traps SIGTERM\n", "CMD's first line: %r", first)
        s.signal(signal.SIGTERM)
        check(s.wait(20) == 42, "status %r after SIGTERM, want 42", s.p.returncode)
        out = s.p.stdout.read().decode()
        check("logwriter got signal 15" in out, "CMD did not get SIGTERM: %r", out)

        # stdin and stdout pass through untouched.
        s = env.snarflog("w4", cmd=ct.logwriter_cmd("--count", "1", "--echo-stdin"),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        out, _ = s.p.communicate(b"hello from stdin\n", timeout=20)
        check(out == b"hello from stdin\n", "stdout %r", out)
        check(s.p.returncode == 0, "status %r", s.p.returncode)

        # A program that opens the path in CMON_LOG; an auto subscriber gets
        # its whole (short) log even though it ends at once.
        reg = env.registry()
        sub = env.sub("-prog", "w5", "-auto", reg=reg)
        script = ('test -n "$CMON_LOG_FD" || exit 9; '
                  'printf "#cmon-ascii 1\\n1 1 Ev 0\\n2 1 Ev 1\\n" > "$CMON_LOG"; exit 3')
        s = env.snarflog("w5", reg=reg, cmd=["/bin/sh", "-c", script])
        check(s.wait(20) == 3, "status %r, want 3", s.p.returncode)
        check(sub.wait(20) == 0, "subscriber: %s", sub.stderr())
        with open(sub.out, "rb") as f:
            header, items = ct.parse_ascii(f.read())
        ct.check_sequence(items, 2)

        # A command that does not exist.
        s = env.snarflog("w6", cmd=["/nonexistent/program"], wait_port=False)
        check(s.wait(20) == 127, "status %r, want 127", s.p.returncode)
        check("cannot run /nonexistent/program" in s.stderr(), "message: %s", s.stderr())

        # Bad usage never starts anything.
        s = env.spawn("snarflog", [ct.binary("snarflog"), "../evil", "--", "true"])
        check(s.wait(10) == 2 and "invalid PROGNAME" in s.stderr(), "bad name: %s", s.stderr())


ct.run_test(main)
