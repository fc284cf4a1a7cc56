"""snarflog reading a log it cannot poll: standard input redirected from
/dev/null (as a harness or `snarflog NAME </dev/null` gives it) is an empty
log, not an error — snarflog used to fail with 'cannot read the log:
Invalid argument' because epoll refuses such devices. -fifo naming
something that is not a named pipe is refused with a message saying so."""
import subprocess

import cmontest as ct
from cmontest import check


def main():
    with ct.Env("stdin_not_pollable") as env:
        reg = env.registry()
        snarf = env.snarflog("devnull", "-debug", reg=reg, stdin=subprocess.DEVNULL,
                             wait_port=False)
        check(snarf.wait(20) == 0, "snarflog </dev/null: %s", snarf.stderr())
        err = snarf.stderr()
        check("end of log: 0 records read" in err, "an empty log: %r", err)
        check("Epoll" not in err and "cannot read" not in err, "no error: %r", err)

        notfifo = env.path("plain")
        open(notfifo, "w").close()
        snarf = env.snarflog("notfifo", "-fifo", notfifo, wait_port=False)
        check(snarf.wait(20) == 1, "-fifo on a regular file: status %r", snarf.p.returncode)
        check("is not a named pipe" in snarf.stderr(), "message: %r", snarf.stderr())


ct.run_test(main)
