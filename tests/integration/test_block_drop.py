"""snarflog: whole-record drops with exact gap counts vs block.

Every record carries a sequence number; the consumer pauses for a while
mid-stream. Without `block`, snarflog keeps reading and drops the oldest
whole records: what arrives plus the counts in the gap markers equals
what was written, and each gap sits exactly where its records are missing.
With `block`, snarflog stops reading instead, so nothing is lost — for at
most -maxblock seconds at a time: a blocking consumer that stalls longer
makes snarflog drop the oldest whole records, counted exactly like any
other drop. Both formats."""
import cmontest as ct
from cmontest import check

COUNT = 20000   # of about 400-800 bytes: far more than buffers in flight


def run(env, fmt, block, pause_ms=1200, maxblock="2"):
    reg = env.registry()
    args = ["-prog", "demo", "-auto", "-pause-after", "500", "-pause-ms", str(pause_ms),
            "-rcvbuf", "32768"]
    if block:
        args.append("-block")
    sub = env.sub(*args, reg=reg)
    w = ct.logwriter_cmd("--format", fmt, "--count", str(COUNT), "--pad", "100")
    snarf = env.snarflog("demo", "-buffer", "64K", "-maxblock", maxblock, reg=reg, cmd=w)
    check(snarf.wait(60) == 0, "snarflog: %s", snarf.stderr())
    check(sub.wait(30) == 0, "cmon-sub: %s", sub.stderr())
    with open(sub.out, "rb") as f:
        data = f.read()
    if fmt == "ascii":
        header, items = ct.parse_ascii(data)
        check(header[0] == "#cmon-ascii 1", "header %r", header)
    else:
        recs = ct.parse_binary(data)
        check(recs[0] == ("header", "demo"), "header %r", recs[0])
        items = [(k, v[1] if k == "rec" else v) for k, v in recs if k in ("rec", "gap")]
    got, dropped = ct.check_sequence(items, COUNT)
    stats = ct.read_stats(sub.out + ".stats")
    check(int(stats["gapped"]) == dropped, "stats %r vs %d dropped", stats, dropped)
    return got, dropped


def main():
    with ct.Env("block_drop") as env:
        for fmt in ("ascii", "binary"):
            got, dropped = run(env, fmt, block=False)
            check(dropped > 0, "%s: a paused consumer with a 64K buffer should lose records", fmt)
            check(got + dropped == COUNT, "%s: %d + %d != %d", fmt, got, dropped, COUNT)
            got, dropped = run(env, fmt, block=True)
            check(dropped == 0 and got == COUNT, "%s block: got %d, dropped %d", fmt, got, dropped)
            # A blocking consumer stalled for longer than -maxblock: drops, exactly counted.
            got, dropped = run(env, fmt, block=True, pause_ms=2500, maxblock="0.3")
            check(dropped > 0, "%s: a stall beyond -maxblock should lose records", fmt)
            check(got + dropped == COUNT, "%s maxblock: %d + %d != %d", fmt, got, dropped, COUNT)


ct.run_test(main)
