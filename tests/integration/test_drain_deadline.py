"""A consumer too slow at the end of the log: snarflog waits -drain
seconds for it to take the rest, then drops what is left and tells it so
(a gap where those records were, then LogEnd), so that what the consumer
got plus its gaps still adds up to what the program wrote. Before, the
connection was closed: the consumer could not tell the log was cut."""
import cmontest as ct
from cmontest import check

TOTAL = 100000


def main():
    with ct.Env("drain_deadline") as env:
        reg = env.registry()
        gate = env.path("gate")
        writer = ct.logwriter_cmd("--count", str(TOTAL), "--batch", "1000", "--gate-after", "0",
                                  "--gate", gate, "--report", env.path("report"))
        snarf = env.snarflog("drainy", "-drain", "0.5", "-buffer", "8M", reg=reg, cmd=writer)
        # It takes 100 records, then reads nothing for 3 s: the program has
        # ended and the drain deadline passed long before it reads again.
        sub = env.sub("-prog", "drainy", "-pause-after", "100", "-pause-ms", "3000", reg=reg)
        ct.wait_file(sub.out + ".streaming")
        open(gate, "w").close()
        check(sub.wait(30) == 0, "consumer: %s", sub.stderr())
        check(snarf.wait(30) == 0, "snarflog exit: %s", snarf.stderr())
        check("reporting them to it as dropped" in snarf.stderr(), "no warning: %s", snarf.stderr())

        with open(sub.out, "rb") as f:
            _h, items = ct.parse_ascii(f.read())
        received, dropped = ct.check_sequence(items, TOTAL)
        check(dropped > 0 and items[-1][0] == "gap",
              "the rest should end the log as one gap: %d received, %d dropped, last %r",
              received, dropped, items[-1:])
        stats = ct.read_stats(sub.out + ".stats")
        check(stats["end"] == "eof", "end of stream: %r", stats)
        check(int(stats["gapped"]) == dropped, "counts: %r, %d dropped in the log", stats, dropped)
        report = open(env.path("report")).read()
        check("written=%d" % TOTAL in report, "program did not finish: %r", report)

        # The same with a buffer of 64 KiB, which the program overruns many
        # times (drops reported as they happen) and which has wrapped when
        # the deadline comes: what is left is weighed in both pieces.
        gate2 = env.path("gate2")
        writer = ct.logwriter_cmd("--count", str(TOTAL), "--batch", "700", "--gate-after", "0",
                                  "--gate", gate2)
        snarf = env.snarflog("drainy2", "-drain", "0.5", "-buffer", "64K", reg=reg, cmd=writer)
        sub = env.sub("-prog", "drainy2", "-pause-after", "100", "-pause-ms", "3000", reg=reg)
        ct.wait_file(sub.out + ".streaming")
        open(gate2, "w").close()
        check(sub.wait(30) == 0, "consumer: %s", sub.stderr())
        check(snarf.wait(30) == 0, "snarflog exit: %s", snarf.stderr())
        with open(sub.out, "rb") as f:
            _h, items = ct.parse_ascii(f.read())
        received, dropped = ct.check_sequence(items, TOTAL)
        check(dropped > 0 and items[-1][0] == "gap", "64K: %d received, %d dropped, last %r",
              received, dropped, items[-1:])
        stats = ct.read_stats(sub.out + ".stats")
        check(stats["end"] == "eof" and int(stats["gapped"]) == dropped, "64K: %r", stats)


ct.run_test(main)
