"""A consumer too slow at the end of the log: snarflog waits -drain
seconds for it to take the rest, then drops what is left and tells it so
(a gap where those records were, then LogEnd), so that what the consumer
got plus its gaps still adds up to what the program wrote. Before, the
connection was closed: the consumer could not tell the log was cut."""
import cmontest as ct
from cmontest import check

TOTAL = 100000


def slow_at_the_end(env, reg, name, buffer, batch):
    """The program writes TOTAL records once the consumer streams; the
    consumer takes 100, then reads nothing for 3 s: the program has ended
    and the 0.5 s drain deadline passed long before it reads again.
    Checks the consumer's log and counts; returns snarflog's stderr."""
    gate, report = env.path(name + ".gate"), env.path(name + ".report")
    writer = ct.logwriter_cmd("--count", str(TOTAL), "--batch", str(batch), "--gate-after", "0",
                              "--gate", gate, "--report", report)
    snarf = env.snarflog(name, "-drain", "0.5", "-buffer", buffer, reg=reg, cmd=writer)
    sub = env.sub("-prog", name, "-pause-after", "100", "-pause-ms", "3000", reg=reg)
    ct.wait_file(sub.out + ".streaming")
    open(gate, "w").close()
    check(sub.wait(30) == 0, "%s: consumer: %s", name, sub.stderr())
    check(snarf.wait(30) == 0, "%s: snarflog exit: %s", name, snarf.stderr())
    with open(sub.out, "rb") as f:
        _h, items = ct.parse_ascii(f.read())
    received, dropped = ct.check_sequence(items, TOTAL)
    check(dropped > 0 and items[-1][0] == "gap",
          "%s: the rest should end the log as one gap: %d received, %d dropped, last %r",
          name, received, dropped, items[-1:])
    stats = ct.read_stats(sub.out + ".stats")
    check(stats["end"] == "eof", "%s: end of stream: %r", name, stats)
    check(int(stats["gapped"]) == dropped, "%s: counts %r, %d dropped in the log", name, stats,
          dropped)
    with open(report) as f:
        check("written=%d" % TOTAL in f.read(), "%s: the program did not finish", name)
    return snarf.stderr()


def main():
    with ct.Env("drain_deadline") as env:
        reg = env.registry()
        # Everything fits the buffer: only the deadline drops.
        err = slow_at_the_end(env, reg, "drainy", "8M", 1000)
        check("reporting them to it as dropped" in err, "no warning: %s", err)
        # A 64 KiB buffer the program overruns many times (drops reported as
        # they happen) and which has wrapped when the deadline comes: what
        # is left is weighed in both pieces.
        slow_at_the_end(env, reg, "drainy2", "64K", 700)


ct.run_test(main)
