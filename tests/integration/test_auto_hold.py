"""The auto-capture handshake: when an auto subscriber's class matches a
new instance, the registry says so in AnnounceAck and snarflog holds the
log from the first record — it stops reading rather than drop — until
that subscriber connects, bounded by -hold. A program writing far more
than the buffer before the subscriber can connect is captured whole. If
the subscriber never comes, snarflog drops as usual after the hold and
exits; a short-lived program's log is still captured."""
import time

import cmontest as ct
from cmontest import check


def main():
    with ct.Env("auto_hold") as env:
        reg = env.registry()

        # An auto subscriber that is slow to connect: a watcher with the
        # auto flag makes the registry request the hold; the real
        # consumer (-connect) arrives 1.5 s later. 4 MB through a 16K buffer:
        # the program blocks (bounded by -hold) instead of losing the start.
        w = env.watch("-prog", "big", "-auto", reg=reg)
        w.expect("ack")
        snarf = env.snarflog("big", "-buffer", "16K", "-hold", "20", reg=reg,
                             cmd=ct.logwriter_cmd("--count", "20000", "--pad", "50",
                                                  "--report", env.path("rep1")))
        up = w.expect("up", new=1, auto=1)
        time.sleep(1.5)
        check(not ct.os.path.exists(env.path("rep1")),
              "the program should be held back until the auto subscriber connects")
        sub = env.sub("-connect", up[5], "-auto")
        check(sub.wait(30) == 0, "subscriber: %s", sub.stderr())
        check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())
        with open(sub.out, "rb") as f:
            _h, items = ct.parse_ascii(f.read())
        ct.check_sequence(items, 20000)
        # The start was held: the first records (more than the buffer
        # holds) arrive without a gap. Later, a consumer slower than the
        # program may see drops like any other; they are counted exactly.
        head = items[:50]
        check(head == [("rec", i) for i in range(50)],
              "the held start of the log was not delivered whole: %r", head[:5])

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
