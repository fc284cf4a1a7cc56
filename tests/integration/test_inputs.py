"""snarflog's inputs and input damage: the log from standard input being a
regular file, from a named pipe (-fifo, created if missing), the format
detected from the first bytes; a last line without newline is completed;
blank lines are skipped; an over-long ascii line and corrupt binary framing
are skipped to the next record boundary and reported to the consumer as a
gap exactly there. Binary events of every layout, mixed with TypeDefs and
ts_delta events, come through a pipe intact whichever way snarflog cuts
them (in place or record by record)."""
import os
import random

import cmontest as ct
from cmontest import check


def fetch_auto(env, reg, name, **snarf_kw):
    """Auto subscriber + snarflog; returns the received bytes."""
    sub = env.sub("-prog", name, "-auto", reg=reg)
    snarf = env.snarflog(name, "-buffer", "64K", reg=reg, **snarf_kw)
    return sub, snarf


def finish(sub, snarf):
    check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())
    check(sub.wait(30) == 0, "subscriber: %s", sub.stderr())
    with open(sub.out, "rb") as f:
        return f.read()


def main():
    with ct.Env("inputs") as env:
        reg = env.registry()

        # Regular file on stdin, ascii detected, ragged end.
        path = env.path("in.log")
        with open(path, "wb") as f:
            f.write(ct.ascii_log(300) + b"\n\n" + b"1300 1 Ev 300")
        with open(path, "rb") as stdin:
            sub, snarf = fetch_auto(env, reg, "file", stdin=stdin)
            data = finish(sub, snarf)
        check(data.endswith(b"1300 1 Ev 300\n"), "last line not completed: %r", data[-30:])
        _h, items = ct.parse_ascii(data)
        ct.check_sequence(items, 301)

        # Named pipe, binary detected.
        fifo = env.path("log.fifo")
        sub = env.sub("-prog", "fifo3", "-auto", reg=reg)
        snarf = env.snarflog("fifo3", "-fifo", fifo, reg=reg)
        check(os.path.exists(fifo), "FIFO not created")
        with open(fifo, "wb") as f:
            f.write(ct.bin_log(500))
        data = finish(sub, snarf)
        recs = ct.parse_binary(data)
        check(recs[0] == ("header", "demo"), "binary not detected: %r", recs[:2])
        ct.check_sequence([("rec", r[1][1]) for r in recs if r[0] == "rec"], 500)

        # An over-long ascii line (buffer 64K -> records up to 16K).
        log = ct.ascii_log(100) + b"9 9 " + b"x" * 40000 + b"\n" + ct.ascii_records(100, 100)
        path = env.path("long.log")
        with open(path, "wb") as f:
            f.write(log)
        with open(path, "rb") as stdin:
            sub, snarf = fetch_auto(env, reg, "long", stdin=stdin)
            data = finish(sub, snarf)
        _h, items = ct.parse_ascii(data)
        want = [("rec", i) for i in range(100)] + [("gap", 1)] + [("rec", i) for i in range(100, 200)]
        check(items == want, "over-long line: got %r ... around the loss %r", items[:2],
              items[98:103])
        check("line longer than the record limit" in snarf.stderr(), "no warning: %s", snarf.stderr())

        # Corrupt binary framing: garbage, then a frame claiming 5 MB.
        log = (ct.bin_log(100) + b"\xff" * 8 + b"\x00\x07junkjunk" + ct.varint(5 << 20) +
               b"\x1a\x02ab" + ct.bin_log(100, 100, header=False))
        path = env.path("corrupt.bin")
        with open(path, "wb") as f:
            f.write(log)
        with open(path, "rb") as stdin:
            sub, snarf = fetch_auto(env, reg, "corrupt", stdin=stdin)
            data = finish(sub, snarf)
        recs = ct.parse_binary(data)
        items = [("rec", r[1][1]) if r[0] == "rec" else r for r in recs if r[0] in ("rec", "gap")]
        check(items[:100] == [("rec", i) for i in range(100)], "before the damage: %r", items[:3])
        gaps = [g for g in items[100:] if g[0] == "gap"]
        check(gaps and items[100][0] == "gap", "no gap marker at the damage: %r", items[99:103])
        rest = [i for i in items[100:] if i[0] == "rec"]
        check(rest == [("rec", i) for i in range(100, 200)], "after the damage: %r", rest[:3])
        check("corrupt binary framing" in snarf.stderr(), "no warning: %s", snarf.stderr())

        # A frame cut short (a writer that wrote half of one and went on
        # with whole ones): exactly that record is lost, counted there, and
        # the next is delivered, whether the half holds a packed value or
        # stops in the frame's head; written all at once and in two writes.
        for cut in (0.5, 0.25, 0.75):
            for split in (False, True):
                whole = ct.bin_event(1, 50, ts=1050, pad=3)
                half = whole[:max(2, int(len(whole) * cut))]
                head = ct.bin_log(50) + half
                tail = ct.bin_log(50, 51, header=False)
                name = "trunc%d%s" % (int(cut * 100), "s" if split else "")
                fifo = env.path(name + ".fifo")
                sub = env.sub("-prog", name, "-auto", reg=reg)
                snarf = env.snarflog(name, "-fifo", fifo, "-buffer", "64K", reg=reg)
                with open(fifo, "wb", buffering=0) as f:
                    if split:
                        f.write(head)
                        import time
                        time.sleep(0.3)
                        f.write(tail)
                    else:
                        f.write(head + tail)
                data = finish(sub, snarf)
                recs = ct.parse_binary(data)
                items = [("rec", r[1][1]) if r[0] == "rec" else r for r in recs
                         if r[0] in ("rec", "gap")]
                want = [("rec", i) for i in range(50)] + [("gap", 1)] + \
                    [("rec", i) for i in range(51, 101)]
                check(items == want, "%s: around the cut frame: %r", name, items[48:54])
                check("truncated binary frame" in snarf.stderr(), "%s: no warning: %s", name,
                      snarf.stderr())

        # Ascii lines of every length from 0 to 200 bytes of payload (the
        # cutter looks for newlines 64 bytes at a time), blank lines and
        # comments among them, through a named pipe in one go: every line
        # arrives as it was written, in order, blank ones left out.
        rnd = random.Random(64)
        lines = [b"#cmon-ascii 1", b"#program ascii-lengths"]
        for i in range(20000):
            r = rnd.random()
            if r < 0.01:
                lines.append(rnd.choice([b"", b"   ", b"\t"]))
            elif r < 0.015:
                lines.append(b"#note %d" % i)
            else:
                lines.append(b"%d %d Ev %s" % (i, rnd.randint(1, 9), b"7" * rnd.randint(0, 200)))
        fifo = env.path("lengths.fifo")
        sub = env.sub("-prog", "lengths", "-auto", reg=reg)
        # (a buffer for all 2.2 MB: on a loaded machine they may all be
        # written before the subscriber attaches)
        snarf = env.snarflog("lengths", "-fifo", fifo, "-buffer", "8M", reg=reg)
        with open(fifo, "wb") as f:
            f.write(b"\n".join(lines) + b"\n")
        data = finish(sub, snarf)
        got = [ln for ln in data.split(b"\n")[:-1] if not ln.startswith(b"#program-version")]
        want = [ln for ln in lines if ln.strip()]
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
        check(got == want, "%d lines arrived of %d; first difference at %r: %r, wanted %r",
              len(got), len(want), first, got[first] if first is not None else None,
              want[first] if first is not None else None)

        # Binary events of many layouts through a named pipe, written in
        # one go: short and long frames (one- and two-byte lengths), large
        # thread ids, ts_delta events, values as doubles and as ivalues
        # (packed or not), events of type 0 without a type field, TypeDefs
        # in between. Every event
        # arrives once, in order, with an absolute ts; every TypeDef once,
        # before its first event.
        def type_of(i):
            return 0 if i % 13 == 6 else 1 if i < 487 else 2 + i // 487

        parts, ts = [ct.bin_header(), ct.bin_typedef(1, "Ev"), ct.bin_typedef(0, "Zero")], 0
        for i in range(6000):
            if i % 487 == 0:
                parts.append(ct.bin_typedef(2 + i // 487, "T%d" % i))
            tid = type_of(i)
            ts += 3
            if i % 5 == 4:
                parts.append(ct.bin_event(tid, i, ts_delta=3, thread=1 + (i * 7919) % 70000,
                                          ints=i % 10 == 9, pad=i % 3))
            else:
                parts.append(ct.bin_event(tid, i, ts=ts, thread=1 + (i * 7919) % 70000,
                                          pad=(i % 11) * 2, ints=i % 7 == 0))
        fifo = env.path("mixed.fifo")
        sub = env.sub("-prog", "mixed", "-auto", reg=reg)
        snarf = env.snarflog("mixed", "-fifo", fifo, "-buffer", "2M", reg=reg)
        with open(fifo, "wb") as f:
            f.write(b"".join(parts))
        data = finish(sub, snarf)
        recs = ct.parse_binary(data)
        check(recs[0] == ("header", "demo"), "header %r", recs[:2])
        typedefs = [r[1][0] for r in recs if r[0] == "typedef"]
        check(typedefs == [1, 0] + list(range(2, 2 + 5999 // 487 + 1)), "typedefs %r", typedefs)
        seen_types = set()
        seq = 0
        for r in recs[1:]:
            if r[0] == "typedef":
                seen_types.add(r[1][0])
                continue
            check(r[0] == "rec", "unexpected %r", r)
            tid, n, t, has_delta = r[1]
            check(n == seq, "event %d where %d was due", n, seq)
            check(tid == type_of(n), "event %d of type %d, written as %d", n, tid, type_of(n))
            check(tid in seen_types, "event %d of type %d before its TypeDef", n, tid)
            check(t == 3 * (n + 1) and not has_delta, "event %d: ts %r delta %r", n, t, has_delta)
            seq += 1
        check(seq == 6000, "%d events arrived", seq)


ct.run_test(main)
