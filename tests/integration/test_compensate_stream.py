"""Perturbation compensation end to end (issue 13): a real libcmon program
(fsread-demo, two worker threads) runs under snarflog with each thread's
cost measured again every 250 ms (CMON_OVERHEAD_PERIOD_MS: a period must hold
at least 8 batch writes, and a slow thread writes one every 10 ms or so); a subscriber
takes the binary stream. Checks:
  - the Overhead records reach the subscriber, in place, through snarflog:
    several per worker thread, each with that thread's id, and no event
    lost (every read's StartRead and EndRead arrived);
  - cmon-log shows them as '#cmon-overhead-ns MEAN SPREAD THREAD' lines;
  - pcheck --compensate on the stream gives, for every Read, exactly what
    the model of docs/pspec.md computes from those lines (this file's own
    reading of the log: the header's cost, then each thread's latest),
    and the same on the log converted to ascii;
  - with CMON_OVERHEAD_PERIOD_MS=0 no Overhead record is written."""
import re
import subprocess

import cmontest as ct
from cmontest import check

READS = 600
SPEC = """perfspec F
  compensate;
  timed event StartRead(tid, size); EndRead(tid);
  event CacheHit(tid);
  interval Read = s: StartRead, e: EndRead where e.tid = s.tid
    metrics time = ts(e) - ts(s)
  end Read;
  assert "all": {& r : Read : false};
end F
"""


def stream(env, reg, name, period):
    """fsread-demo under snarflog, its stream as a subscriber got it."""
    sub = env.sub("-prog", name, "-auto", reg=reg)
    demo = ct.binary("fsread-demo")
    snarf = env.snarflog(name, reg=reg, cmd=[demo, "-t", "2", "-n", str(READS), "-r", "0", "-q"],
                         env={"CMON_OVERHEAD_PERIOD_MS": str(period)})
    check(snarf.wait(60) == 0, "snarflog: %s", snarf.stderr())
    check(sub.wait(30) == 0, "subscriber: %s", sub.stderr())
    return sub.out


def ascii_of(env, path):
    out = subprocess.run([ct.binary("cmon-log"), "--ascii", path], capture_output=True, timeout=30)
    check(out.returncode == 0, "cmon-log: %s", out.stderr.decode())
    return out.stdout.decode()


def model(text, updates=True):
    """Compensated time of every Read, keyed by its start's ts: the header's
    cost, then each thread's latest line (docs/pspec.md); without UPDATES,
    the header's alone."""
    mean = spread = None
    cost, cum, opened, want = {}, {}, {}, {}
    in_header = True
    for line in text.splitlines():
        if line.startswith("#"):
            w = line.split()
            if w[0] == "#cmon-overhead-ns":
                if in_header and len(w) == 3:
                    mean, spread = float(w[1]), float(w[2])
                elif len(w) == 4:
                    in_header = False
                    if updates:
                        cost[int(w[3])] = (float(w[1]), float(w[2]))
            continue
        in_header = False
        ts, th, name = line.split()[:3]
        ts, th = int(ts), int(th)
        tid = line.split()[3]
        m, sp = cost.get(th, (mean, spread))
        if name == "EndRead" and tid in opened:
            s_ts, s_th, c0 = opened.pop(tid)
            c = cum[s_th]
            want[s_ts] = (ts - s_ts - (c[0] - c0[0]), 1 + (c[1] - c0[1]))
        if name == "StartRead":
            opened[tid] = (ts, th, cum.get(th, (0.0, 0.0)))
        c = cum.get(th, (0.0, 0.0))
        cum[th] = (c[0] + m, c[1] + sp)
    return mean, want


def checked(env, path):
    """pcheck --compensate's Read times, keyed by start ts."""
    spec = env.path("f.pspec")
    with open(spec, "w") as f:
        f.write(SPEC)
    out = subprocess.run([ct.binary("pcheck"), "-s", spec, path], capture_output=True, timeout=60)
    check(out.returncode == 1, "pcheck exit %d: %s", out.returncode, out.stderr.decode())
    check(out.stderr == b"", "pcheck warned: %s", out.stderr.decode())
    got = {}
    for m in re.finditer(r"start \S+ ts (\d+), end .*: time = \[([-0-9.e+]+),([0-9.e+]+),([0-9.e+]+)\]",
                         out.stdout.decode()):
        got[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    return got


def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def main():
    with ct.Env("compensate_stream") as env:
        reg = env.registry()
        path = stream(env, reg, "fsread", 250)
        text = ascii_of(env, path)
        lines = [l.split() for l in text.splitlines() if l.startswith("#cmon-overhead-ns ")]
        updates = [l for l in lines if len(l) == 4]
        threads = {}
        for l in text.splitlines():
            if not l.startswith("#"):
                w = l.split()
                threads.setdefault(w[2], set()).add(int(w[1]))
        starts = sum(1 for l in text.splitlines() if " StartRead " in l)
        ends = sum(1 for l in text.splitlines() if " EndRead " in l)
        check(starts == 2 * READS and ends == 2 * READS, "reads: %d starts, %d ends", starts, ends)
        workers = threads["StartRead"]
        check(len(workers) == 2, "worker threads %r", workers)
        for w in workers:
            n = sum(1 for u in updates if int(u[3]) == w)
            check(n >= 2, "thread %d: %d cost updates in %r", w, n, updates)
        check(all(float(u[1]) > 0 and float(u[2]) >= 0 and int(u[3]) in workers | threads.get("CacheHit", set())
                  for u in updates), "updates %r", updates)

        mean, want = model(text)
        check(mean is not None and mean > 0, "no header cost")
        check(len(want) == 2 * READS, "model has %d reads", len(want))
        _, header_only = model(text, updates=False)
        changed = sum(1 for k in want if not close(want[k][0], header_only[k][0]))
        check(changed >= READS // 2, "the updates changed only %d reads", changed)
        for p in (path, None):
            if p is None:
                p = env.path("ascii.log")
                with open(p, "w") as f:
                    f.write(text)
            got = checked(env, p)
            check(set(got) == set(want), "reads differ: %d vs %d", len(got), len(want))
            for ts, (v, sp) in want.items():
                g = got[ts]
                check(close(g[0], v) and close(g[1], sp),
                      "read at %d: pcheck %r, model %r", ts, g, (v, sp))

        # Period 0: the header's figure only.
        path = stream(env, reg, "fsread0", 0)
        text = ascii_of(env, path)
        check(not [l for l in text.splitlines() if l.startswith("#cmon-overhead-ns ") and len(l.split()) == 4],
              "updates with period 0")
        check(any(l.startswith("#cmon-overhead-ns ") for l in text.splitlines()), "no header cost")
        print("compensate_stream: ok (%d updates, %d reads, %d of them changed by the updates)"
              % (len(updates), len(want), changed))



ct.run_test(main)
