"""The auto-capture handshake: when an auto subscriber's class matches a
new instance, the registry says so in AnnounceAck and snarflog keeps the
log from the first record until that subscriber connects — while there is
room in its buffer. It never stops reading the program's pipe for it
(the program comes first): a program that writes more than the buffer
before the subscriber connects loses its oldest records, and the
subscriber (Start.from_start) is told exactly how many, as a gap before
the first record it gets. If the subscriber never comes, everything ends
normally; a short-lived program's log is still captured (snarflog waits
for the subscriber at end of log, bounded by -hold)."""
import time

import cmontest as ct
from cmontest import check


def main():
    with ct.Env("auto_hold") as env:
        reg = env.registry()

        # An auto subscriber that is slow to connect: a watcher with the
        # auto flag makes the registry request the hold; the real consumer
        # (-connect) arrives 1.5 s later. An 8M buffer keeps the whole start.
        w = env.watch("-prog", "big", "-auto", reg=reg)
        w.expect("ack")
        snarf = env.snarflog("big", "-buffer", "8M", "-hold", "20", reg=reg,
                             cmd=ct.logwriter_cmd("--count", "8000", "--pad", "50",
                                                  "--report", env.path("rep1")))
        up = w.expect("up", new=1, auto=1)
        ct.wait_file(env.path("rep1"), 10)       # never held back: it ends at once
        sub = env.sub("-connect", up[5], "-auto")
        check(sub.wait(30) == 0, "subscriber: %s", sub.stderr())
        check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())
        with open(sub.out, "rb") as f:
            _h, items = ct.parse_ascii(f.read())
        got, dropped = ct.check_sequence(items, 8000)
        check(dropped == 0 and items[:3] == [("rec", 0), ("rec", 1), ("rec", 2)],
              "the start of the log was kept whole: %r (%d dropped)", items[:3], dropped)

        # The same with a 16K buffer: the program still runs straight
        # through; the records that did not fit are dropped oldest first
        # and reported as one gap right at the start.
        snarf = env.snarflog("big", "-buffer", "16K", "-hold", "20", reg=reg,
                             cmd=ct.logwriter_cmd("--count", "20000", "--pad", "50",
                                                  "--report", env.path("rep2")))
        up = w.expect("up", new=1, auto=1)
        ct.wait_file(env.path("rep2"), 10)
        sub = env.sub("-connect", up[5], "-auto")
        check(sub.wait(30) == 0, "subscriber: %s", sub.stderr())
        check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())
        with open(sub.out, "rb") as f:
            _h, items = ct.parse_ascii(f.read())
        got, dropped = ct.check_sequence(items, 20000)
        check(items[0][0] == "gap" and dropped > 0 and got + dropped == 20000,
              "the lost start is one exact gap: %r, %d + %d", items[:2], got, dropped)

        # The hold is bounded: nobody connects, so after -hold the oldest
        # records are dropped and everything ends normally.
        t0 = time.monotonic()
        snarf = env.snarflog("big", "-buffer", "16K", "-hold", "1", "-drain", "1", reg=reg,
                             cmd=ct.logwriter_cmd("--count", "5000", "--pad", "50"))
        w.expect("up", new=1, auto=1)
        check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())
        check(time.monotonic() - t0 < 15, "hold was not bounded")

        # A short-lived program ends before the subscriber could connect:
        # snarflog waits for it (within -hold) and delivers everything.
        sub = env.sub("-prog", "short", "-auto", reg=reg)
        snarf = env.snarflog("short", reg=reg, cmd=ct.logwriter_cmd("--count", "3"))
        check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())
        check(sub.wait(30) == 0, "subscriber: %s", sub.stderr())
        with open(sub.out, "rb") as f:
            _h, items = ct.parse_ascii(f.read())
        ct.check_sequence(items, 3)


ct.run_test(main)
