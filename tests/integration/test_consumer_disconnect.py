"""Telemonitor side faults and etiquette: a consumer that disconnects
abruptly or is killed with SIGKILL mid-stream leaves snarflog running and
the next consumer picks the log up at a record boundary (told how much it
skipped); Stop ends a stream with LogEnd(stopped); a second consumer while
one is connected is told Busy. The program finishes normally throughout."""
import signal
import time

import cmontest as ct
from cmontest import check


def main():
    with ct.Env("consumer_disconnect") as env:
        reg = env.registry()
        gates = [env.path("gate%d" % i) for i in range(4)]
        # The program writes 1000 records, then 1000 more after gate0 and
        # the last 2000 after gate1.
        writer = ct.logwriter_cmd("--count", "4000", "--gate-after", "1000", "--gate", gates[0],
                                  "--gate-after", "2000", "--gate", gates[1],
                                  "--report", env.path("report"))
        snarf = env.snarflog("demo", "-debug", reg=reg, cmd=writer)

        # 1. A consumer takes some records, then drops the connection.
        c1 = env.sub("-prog", "demo", "-drop-after", "200", reg=reg)
        check(c1.wait(20) == 0, "first consumer: %s", c1.stderr())
        with open(c1.out, "rb") as f:
            h1, items1 = ct.parse_ascii(f.read())
        check(h1[0] == "#cmon-ascii 1" and items1[0] == ("rec", 0), "first consumer got %r", items1[:2])

        # 2. A consumer killed with SIGKILL while streaming.
        c2 = env.sub("-prog", "demo", "-stall", reg=reg)
        ct.wait_file(c2.out + ".streaming")
        c2.kill()
        time.sleep(0.3)
        check(snarf.alive(), "snarflog died when its consumer was killed")

        # 3. A consumer holds the stream; a second one is told Busy.
        c3 = env.sub("-prog", "demo", "-stop-after", "1", reg=reg)
        ct.wait_file(c3.out + ".streaming")
        busy = env.sub("-prog", "demo", reg=reg)
        check(busy.wait(20) == 3, "second consumer should get Busy (exit 3): %s", busy.stderr())
        check("busy" in busy.stderr(), "busy message: %s", busy.stderr())

        # 4. Stop: the holder gets LogEnd(stopped), the stream is free again.
        open(gates[0], "w").close()       # more records so c3 reaches stop-after
        check(c3.wait(20) == 0, "stopping consumer: %s", c3.stderr())
        check(ct.read_stats(c3.out + ".stats")["end"] == "stopped", "c3 stats")

        # 5. The last consumer reads to the end: whole records, from where
        # the others left off, up to the final record.
        c4 = env.sub("-prog", "demo", reg=reg)
        ct.wait_file(c4.out + ".streaming")
        open(gates[1], "w").close()
        check(c4.wait(30) == 0, "last consumer: %s", c4.stderr())
        with open(c4.out, "rb") as f:
            h4, items4 = ct.parse_ascii(f.read())
        check(h4 == h1, "header replay differs: %r vs %r", h4, h1)
        first = items4[0][1]
        check(first <= 2000, "last consumer should get everything from record 2000: %r", items4[:2])
        ct.check_sequence(items4, 4000 - first, start=first)
        check(snarf.wait(30) == 0, "snarflog exit: %s", snarf.stderr())
        report = open(env.path("report")).read()
        check("written=4000" in report, "program did not finish: %r", report)


ct.run_test(main)
