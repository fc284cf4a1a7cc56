"""Many programs starting together, unpaced, through one telemonitor whose
class runs a tool *and* a checker: every record and every failure is
accounted, stream by stream.

N programs (CMON_BURST_STREAMS, default 40) start at once and each writes
COUNT sequence-numbered records (CMON_BURST_COUNT, default 12,000; ascii
and cmon-bin alternately) as fast as the pipe takes them. The class has the
tool `cat >> FILE` and a spec failing on every 100th record. Half the
programs are in a blocking class, half in a dropping one; both may lose
records on a machine this busy (block holds a program up for -maxblock at
most), but only as counted gaps.

For every stream, at its end:
  - records + lost + skipped + unchecked = COUNT (never a stream that stops
    short uncounted);
  - the tool's file holds records in order, each gap marker exactly where
    its records are missing; what it did not get at the end (a stream given
    up) is counted as lost by the telemonitor;
  - the telemonitor's records/lost/gaps are the tool's numbers;
  - the failures stored are exactly the multiples of 100 among the records
    the checker was given, and the instance's failure counter equals its rows.

The soak (bench/faults/soak.sh) runs it at 100 and 200 x 20,000, and paced
(CMON_BURST_PACE=0.1: 1,000 records/s a program) at 600 x 20,000.
"""
import os
import sys
import time

import cmontest as ct
import telemontest as tt
from cmontest import check

_E = os.environ.get
STREAMS = int(_E("CMON_BURST_STREAMS", 40))
COUNT = int(_E("CMON_BURST_COUNT", 12000))
PAD = int(_E("CMON_BURST_PAD", 5))    # extra values a record: 34 bytes ascii, 57 binary
PACE = float(_E("CMON_BURST_PACE", 0))   # seconds between a program's writes of 100 records
EVERY = 100          # the checker fails on every EVERY-th record

SPEC = """perfspec burst
  event Ev(seq);
  assert "every hundredth": {& e : Ev : e.seq mod %d != 0};
end burst
""" % EVERY


def rc(env, spec):
    text = ""
    for blk in ("block", "drop"):
        tool = "exec cat >> %s/$M_PROG.out" % env.dir
        text += tt.rc_class("burst-*-%s" % blk, spec=spec, tool=tool, block=(blk == "block"))
    return text


def read_tool_file(path, fmt):
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        data = f.read()
    if fmt == "ascii":
        # headers repeat at every run of the tool: skip any '#' line but gaps
        items = []
        for line in data.decode().splitlines():
            if line.startswith("#cmon-gap "):
                items.append(("gap", int(line.split()[1])))
            elif line and not line.startswith("#"):
                w = line.split()
                check(len(w) >= 4 and w[2] == "Ev", "not a whole record: %r", line)
                items.append(("rec", int(w[3])))
        return items
    items = []
    for kind, v in ct.parse_binary(data):
        if kind == "rec":
            items.append(("rec", v[1]))
        elif kind == "gap":
            items.append(("gap", v))
    return items


def follow(items):
    """A tool's file in order: records with increasing sequence numbers,
    each gap marker exactly where its records are missing; the log may stop
    short of COUNT only if the telemonitor counts the rest (`tail`).
    Returns (records, lost in gaps, gap markers, tail)."""
    expect = got = lost = markers = 0
    for kind, v in items:
        if kind == "gap":
            expect += v
            lost += v
            markers += 1
            continue
        check(v == expect, "record %d where %d was expected", v, expect)
        expect += 1
        got += 1
    check(expect <= COUNT, "the log goes on past %d records", COUNT)
    return got, lost, markers, COUNT - expect


def burst(name, streams=STREAMS, extra=(), writer=()):
    """Start `streams` programs at once through one telemonitor (started
    with `extra` arguments; each program's logwriter gets `writer` too),
    wait for every instance to end and check each stream. Returns the
    telemonitor's instances and what it logged."""
    with ct.Env(name) as env:
        spec = env.path("burst.pspec")
        with open(spec, "w") as f:
            f.write(SPEC)
        reg = env.registry()
        tm = tt.Telemonitor(env, reg, rc(env, spec), extra=list(extra))
        progs = {}
        t0 = time.monotonic()
        for k in range(streams):
            fmt = "ascii" if k % 2 == 0 else "binary"
            blk = "block" if (k // 2) % 2 == 0 else "drop"
            prog = "burst-%03d-%s-%s" % (k, fmt[0], blk)
            snarf = env.snarflog(prog, reg=reg, wait_port=False,
                                 cmd=ct.logwriter_cmd("--format", fmt, "--count", str(COUNT),
                                                      "--batch", "100", "--pad", str(PAD),
                                                      *writer))
            progs[prog] = (fmt, blk, snarf)
        for prog, (fmt, blk, snarf) in progs.items():
            check(snarf.wait(300) == 0, "%s: snarflog: %s", prog, snarf.stderr()[-2000:])
        wrote = time.monotonic() - t0

        def all_ended():
            rows = [i for i in tm.instances() if i["prog"] in progs]
            done = [i for i in rows if i["state"] in ("ended", "gone")]
            return rows if len(done) == len(progs) else None
        rows = ct.wait_for(all_ended, 300, "every instance to end", interval=0.5)
        short, bad = [], []
        tot = {"records": 0, "lost": 0, "failures": 0, "unchecked": 0, "tail": 0}
        for inst in rows:
            prog = inst["prog"]
            fmt, blk, _ = progs[prog]
            items = read_tool_file(env.path(prog + ".out"), fmt)
            got, lost, markers, tail = follow(items)
            unchecked = inst.get("unchecked", 0)
            acct = inst["records"] + inst["lost"] + inst["skipped"] + unchecked
            if acct != COUNT:
                short.append("%s: records %d + lost %d + skipped %d + unchecked %d = %d, not %d "
                             "(%s: %r)" % (prog, inst["records"], inst["lost"], inst["skipped"],
                                           unchecked, acct, COUNT, inst["state"], inst["status"]))
                continue
            if (inst["records"] + unchecked, inst["lost"], inst["gaps"]) != \
                    (got, lost + tail, markers):
                bad.append("%s: the telemonitor counts records %d (+%d unchecked) lost %d gaps "
                           "%d; the tool got %d, %d lost in %d gaps, %d never" %
                           (prog, inst["records"], unchecked, inst["lost"], inst["gaps"], got,
                            lost, markers, tail))
            want = sum(1 for k, v in items if k == "rec" and v % EVERY == 0)
            rows_f = tm.failures("--instance", str(inst["id"]), "--limit", "100000")
            if len(rows_f) != inst["failures"]:
                bad.append("%s: %d failure rows but a failure count of %d" %
                           (prog, len(rows_f), inst["failures"]))
            elif not unchecked and not tail and len(rows_f) != want:
                bad.append("%s: %d failures stored, the checker was given %d" %
                           (prog, len(rows_f), want))
            tot["records"] += got
            tot["lost"] += lost
            tot["tail"] += tail
            tot["unchecked"] += unchecked
            tot["failures"] += len(rows_f)
        print("%d streams x %d records in %.1f s: %d delivered, %d lost in gaps, %d lost at the "
              "end, %d unchecked, %d failures stored" %
              (streams, COUNT, wrote, tot["records"], tot["lost"], tot["tail"],
               tot["unchecked"], tot["failures"]))
        check(not short, "%d of %d streams not accounted for:\n  %s", len(short), streams,
              "\n  ".join(short[:20]))
        check(not bad, "%d streams miscounted:\n  %s", len(bad), "\n  ".join(bad[:20]))
        tm.stop()
        return rows, tm.stderr()


if __name__ == "__main__":
    ct.run_test(lambda: burst("burst", writer=["--pace", str(PACE)] if PACE else ()))
