"""snarflog: Start.batch_ms (docs/protocol.md §7, "Batches").

A consumer that asks for batches of 250 ms gets a program's trickle of
single-record writes (one every 10 ms) in about four LogData messages a
second, every record exact and in order; one that does not ask gets them
as they come. A burst is never held (a quarter of the buffer, or a chunk,
goes at once), also for a blocking consumer with a small buffer, where a
batch that waited for the buffer to fill would stall the program for
good. The last records go when the log ends, not a batch later. A
telemonitor asks for its -batch, and what it stores is what an unbatched
stream gives."""
import time

import cmontest as ct
import telemontest as tt
from cmontest import check

TRICKLE = 300        # single-record writes, 10 ms apart: about 3 s
BURST = 20000        # records of about 400 bytes, 200 a write, unpaced


def run(env, count, writer_args, sub_args, snarf_args=()):
    """(records received, records dropped, cmon-sub's stats, seconds the
    program ran)."""
    reg = env.registry()
    sub = env.sub("-prog", "demo", "-auto", *sub_args, reg=reg)
    w = ct.logwriter_cmd("--count", str(count), *writer_args)
    t0 = time.monotonic()
    snarf = env.snarflog("demo", *snarf_args, reg=reg, cmd=w)
    check(snarf.wait(60) == 0, "snarflog: %s", snarf.stderr())
    ran = time.monotonic() - t0
    check(sub.wait(30) == 0, "cmon-sub: %s", sub.stderr())
    with open(sub.out, "rb") as f:
        header, items = ct.parse_ascii(f.read())
    got, dropped = ct.check_sequence(items, count)
    stats = ct.read_stats(sub.out + ".stats")
    check(stats["end"] == "eof", "the stream ended %r", stats)
    return got, dropped, stats, ran


def main():
    with ct.Env("snarflog_batch") as env:
        trickle = ("--batch", "1", "--pace", "0.01")

        # Batches of 250 ms: at most one LogData per 250 ms the program
        # ran (and the first, which goes at once), every record there.
        got, dropped, stats, ran = run(env, TRICKLE, trickle, ("-batch", "250"))
        frames = int(stats["frames"])
        check(got == TRICKLE and dropped == 0, "batch 250: got %d, dropped %d", got, dropped)
        check(frames <= ran / 0.25 + 5,
              "batch 250: %d LogData messages in %.1f s (at most one a 250 ms)", frames, ran)
        print("batch 250 ms: %d records in %d LogData messages over %.1f s" % (got, frames, ran))

        # Not asked: as they come (300 writes 10 ms apart are not read
        # together unless snarflog was starved for most of them).
        got, dropped, stats, ran = run(env, TRICKLE, trickle, ())
        plain = int(stats["frames"])
        check(got == TRICKLE and dropped == 0, "no batch: got %d, dropped %d", got, dropped)
        check(plain >= 30 and plain > 2 * frames,
              "no batch: %d LogData messages for %d writes (batched: %d)", plain, TRICKLE, frames)
        print("no batch: %d records in %d LogData messages" % (got, plain))

        # A burst under the longest batch, to a blocking consumer, through
        # a 64 KiB buffer: sent as it fills, nothing lost, no stall.
        got, dropped, stats, ran = run(env, BURST, ("--pad", "100"), ("-batch", "1000", "-block"),
                                       ("-buffer", "64K"))
        check(got == BURST and dropped == 0, "burst: got %d, dropped %d", got, dropped)
        print("burst, batch 1000 ms, block, 64K buffer: %d records in %s LogData messages"
              % (got, stats["frames"]))

        # A telemonitor's -batch reaches the snarflog; what it stores is
        # what an unbatched stream gives: every record, the one slow read.
        reg = env.registry()
        tm = tt.Telemonitor(env, reg, tt.rc_class("fsread", spec=tt.FSREAD_SPEC),
                            extra=["-batch", "250"])
        snarf = env.snarflog("fsread", "-debug", reg=reg, cmd=tt.writer_cmd(
            "--reads", 100, "--slow", "50", "--batch", 1, "--pace", 0.01))
        check(snarf.wait(60) == 0, "snarflog: %s", snarf.stderr())
        check("(batch 250 ms)" in snarf.stderr(), "the telemonitor's batch: %s", snarf.stderr())
        done = tm.instance(lambda i: i["prog"] == "fsread" and i["state"] == "ended",
                           what="the instance to end")
        check(done["records"] == 300 and done["lost"] == 0, "every record: %r", done)
        failures = tm.failures("--prog", "fsread")
        check(len(failures) == 1, "the slow read, once: %r", failures)
        tm.stop()


ct.run_test(main)
