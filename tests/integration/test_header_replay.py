"""snarflog: a subscriber that joins late gets the saved header first, then
whole records only. ascii: the '#' lines before the first record. binary:
the Header plus every TypeDef so far — including one that arrived after
the first record — and TypeDefs arriving later precede their events.
Events written with ts_delta reach the reader with absolute timestamps,
also when the events before them were dropped."""
import subprocess
import time

import cmontest as ct
from cmontest import check


def late_join(env, name, fmt, first, second, bufsize="2M"):
    """Write `first`, let snarflog read it, join with cmon-sub, write
    `second`, end the log; return (output bytes, stats, snarflog stderr)."""
    snarf = env.snarflog(name, "-" + fmt, "-buffer", bufsize, stdin=subprocess.PIPE)
    snarf.p.stdin.write(first)
    snarf.p.stdin.flush()
    time.sleep(0.3)
    sub = env.sub("-connect", snarf.addr())
    ct.wait_file(sub.out + ".streaming")
    snarf.p.stdin.write(second)
    snarf.p.stdin.close()
    check(sub.wait(20) == 0, "cmon-sub failed: %s", sub.stderr())
    check(snarf.wait(20) == 0, "snarflog failed: %s", snarf.stderr())
    with open(sub.out, "rb") as f:
        return f.read(), ct.read_stats(sub.out + ".stats")


def main():
    with ct.Env("header_replay") as env:
        # ascii, nothing dropped: header then every record.
        data, stats = late_join(env, "asc", "ascii", ct.ascii_log(100), ct.ascii_records(50, 100))
        header, items = ct.parse_ascii(data)
        check(header == ["#cmon-ascii 1", "#program demo", "#tick-ns 1"], "header %r", header)
        check(data.startswith(b"#cmon-ascii 1\n#program demo\n#tick-ns 1\n1000 1 Ev 0\n"),
              "log does not start with header then record 0: %r", data[:80])
        ct.check_sequence(items, 150)
        check(stats["end"] == "eof", "stats %r", stats)

        # ascii, joining after the small buffer dropped the oldest records:
        # still the header first, then whole records from some point on.
        data, _ = late_join(env, "asc2", "ascii", ct.ascii_log(2000), ct.ascii_records(10, 2000),
                            bufsize="4K")
        header, items = ct.parse_ascii(data)
        check(header == ["#cmon-ascii 1", "#program demo", "#tick-ns 1"], "header %r", header)
        first = items[0][1]
        check(items[0][0] == "rec" and first > 0, "expected to join mid-stream: %r", items[:3])
        got, dropped = ct.check_sequence(items, 2010 - first, start=first)
        check(dropped == 0, "no loss after joining: %d", dropped)

        # binary: TypeDef 'Late' arrives after the first record but before
        # the join; 'Later' after the join; events after the join use ts_delta.
        first = (ct.bin_header() + ct.bin_typedef(1, "Ev") +
                 b"".join(ct.bin_event(1, i, ts=1000 + i) for i in range(100)) +
                 ct.bin_typedef(2, "Late") +
                 b"".join(ct.bin_event(2, i, ts=1000 + i) for i in range(100, 150)))
        second = (ct.bin_typedef(3, "Later") +
                  b"".join(ct.bin_event(3, i, ts_delta=1) for i in range(150, 200)))
        data, stats = late_join(env, "bin", "binary", first, second)
        recs = ct.parse_binary(data)
        check(recs[0] == ("header", "demo"), "first record %r", recs[0])
        check(recs[1][0] == "typedef" and recs[2][0] == "typedef",
              "Header must be followed by both TypeDefs seen so far: %r", recs[:4])
        check({recs[1][1], recs[2][1]} == {(1, "Ev"), (2, "Late")}, "typedefs %r", recs[1:3])
        typedefs = [r for r in recs if r[0] == "typedef"]
        check(len(typedefs) == 3, "each TypeDef exactly once: %r", typedefs)
        pos_later = recs.index(("typedef", (3, "Later")))
        events = [(i, r) for i, r in enumerate(recs) if r[0] == "rec"]
        first_t3 = min(i for i, r in events if r[1][0] == 3)
        check(pos_later < first_t3, "TypeDef 3 after its first event")
        items = [("rec", r[1][1]) for _i, r in events]
        ct.check_sequence(items, 200)
        for _i, r in events:
            tid, seq, ts, has_delta = r[1]
            check(ts == 1000 + seq and not has_delta,
                  "event %d: ts %r delta %r (want absolute %d)", seq, ts, has_delta, 1000 + seq)

        # binary, joined after drops: still Header + TypeDefs first.
        first = ct.bin_log(3000)
        data, _ = late_join(env, "bin2", "binary", first, ct.bin_log(5, 3000, header=False),
                            bufsize="8K")
        recs = ct.parse_binary(data)
        check(recs[0] == ("header", "demo") and recs[1] == ("typedef", (1, "Ev")),
              "replayed header %r", recs[:2])
        seqs = [r[1][1] for r in recs if r[0] == "rec"]
        check(seqs[0] > 0 and seqs == list(range(seqs[0], 3005)), "records %r...", seqs[:5])

        # binary, joined after drops, with ts_delta events all along (runs
        # of them, and single ones between absolute ones) and TypeDefs in
        # between: every event that arrives has its absolute ts, which
        # counts the deltas of the dropped events too.
        # (Several hundred KB: most of it is read straight into the buffer.)
        n = 12000
        parts, ts = [ct.bin_header(), ct.bin_typedef(1, "Ev")], 0
        for i in range(n):
            if i % 1700 == 0:
                parts.append(ct.bin_typedef(2 + i // 1700, "T%d" % i))
            ts += 1 + i % 3
            if i % 4 == 3 or (i // 100) % 2:
                parts.append(ct.bin_event(1, i, ts_delta=1 + i % 3, pad=i % 5))
            else:
                parts.append(ct.bin_event(1, i, ts=ts, pad=i % 5))
        data, _ = late_join(env, "bin3", "binary", b"".join(parts),
                            ct.bin_event(1, n, ts_delta=5), bufsize="8K")
        recs = ct.parse_binary(data)
        check(recs[0] == ("header", "demo"), "replayed header %r", recs[:2])
        check([r[1][0] for r in recs if r[0] == "typedef"] == list(range(1, 2 + (n - 1) // 1700 + 1)),
              "every TypeDef replayed once: %r", [r for r in recs if r[0] == "typedef"])
        events = [r[1] for r in recs if r[0] == "rec"]
        check(events[0][1] > 0 and [e[1] for e in events] == list(range(events[0][1], n + 1)),
              "records %r...", events[:3])
        want = {}
        t = 0
        for i in range(n):
            t += 1 + i % 3
            want[i] = t
        want[n] = t + 5
        for _tid, n, t, has_delta in events:
            check(t == want[n] and not has_delta, "event %d: ts %r delta %r (want %d)",
                  n, t, has_delta, want[n])


ct.run_test(main)
