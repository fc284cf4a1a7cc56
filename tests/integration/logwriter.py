#!/usr/bin/env python3
"""A monitored program for the integration tests: writes a sequence-numbered
log (ascii or binary) to CMON_LOG_FD (as snarflog's wrapper mode provides),
else to the path in CMON_LOG, else to standard output.

  logwriter.py [--format ascii|binary] [--count N] [--batch N] [--pad N] [--pace SEC]
               [--gate-after K --gate FILE] [--late-typedef]
               [--echo-stdin] [--trap-term] [--exit CODE] [--kill-self SIG]
               [--report FILE] [--linger SEC]
"""

import argparse
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmontest as ct  # noqa: E402


def main():
    ct.die_with_parent()        # snarflog gone (e.g. test timed out): stop too
    ap = argparse.ArgumentParser()
    ap.add_argument("--format", default="ascii")
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--batch", type=int, default=200, help="records per write()")
    ap.add_argument("--pad", type=int, default=0, help="extra values per record")
    ap.add_argument("--pace", type=float, default=0.0, help="seconds between writes")
    ap.add_argument("--gate-after", type=int, action="append", default=[],
                    help="after this many records... (repeatable)")
    ap.add_argument("--gate", action="append", default=[],
                    help="...wait until this file exists (paired with --gate-after)")
    ap.add_argument("--late-typedef", action="store_true",
                    help="binary: second event type defined half-way through")
    ap.add_argument("--echo-stdin", action="store_true")
    ap.add_argument("--trap-term", action="store_true")
    ap.add_argument("--exit", type=int, default=0)
    ap.add_argument("--kill-self", type=int, default=0)
    ap.add_argument("--report", default=None)
    ap.add_argument("--linger", type=float, default=0.0, help="seconds to wait before exiting")
    a = ap.parse_args()

    if a.trap_term:
        def on_term(sig, frame):
            sys.stdout.write("logwriter got signal %d\n" % sig)
            sys.stdout.flush()
            os._exit(42)
        signal.signal(signal.SIGTERM, on_term)
        sys.stdout.write("logwriter traps SIGTERM\n")   # the test waits for this line
        sys.stdout.flush()

    if "CMON_LOG_FD" in os.environ:
        fd = int(os.environ["CMON_LOG_FD"])
    elif "CMON_LOG" in os.environ:
        fd = os.open(os.environ["CMON_LOG"], os.O_WRONLY)
    else:
        fd = 1
    if a.echo_stdin:
        sys.stdout.write(sys.stdin.read())
        sys.stdout.flush()

    binary = a.format == "binary"
    if binary:
        head = ct.bin_header() + ct.bin_typedef(1, "Ev")
    else:
        head = b"#cmon-ascii 1\n#program demo\n#tick-ns 1\n"
    os.write(fd, head)
    pad = b" 0.5" * a.pad
    start = time.monotonic()
    gates = dict(zip(a.gate_after, a.gate))
    i = 0
    while i < a.count:
        if i in gates:
            while not os.path.exists(gates[i]):
                time.sleep(0.01)
        n = min(a.batch, a.count - i)
        for g in gates:
            if g > i:
                n = min(n, g - i)
        parts = []
        for k in range(i, i + n):
            if binary:
                if a.late_typedef and k == a.count // 2:
                    parts.append(ct.bin_typedef(2, "Late", ("seq", "x")))
                tid = 2 if a.late_typedef and k >= a.count // 2 else 1
                parts.append(ct.bin_event(tid, k, ts=1000 + k, pad=a.pad))
            else:
                parts.append(b"%d 1 Ev %d%s\n" % (1000 + k, k, pad))
        data = b"".join(parts)
        view = memoryview(data)
        while view:
            w = os.write(fd, view)
            view = view[w:]
        i += n
        if a.pace:
            time.sleep(a.pace)
    elapsed = time.monotonic() - start
    if a.report:
        with open(a.report + ".tmp", "w") as f:
            f.write("written=%d\nelapsed=%f\n" % (a.count, elapsed))
        os.rename(a.report + ".tmp", a.report)
    if a.linger:
        time.sleep(a.linger)
    if a.kill_self:
        os.kill(os.getpid(), a.kill_self)
    sys.exit(a.exit)


if __name__ == "__main__":
    main()
