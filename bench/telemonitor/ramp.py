"""bench/telemonitor/ramp.py BUILD_DIR — the telemonitor's capacity (issue
34): N programs, each under its own snarflog, each writing 999 records a
second in ten writes a second (bench_tm_writer -rate 333 -every-ms 100
-wall, a read every 100 slow), all through one telemonitor on sqlite. For
each N of the ramp it runs two classes side by side, one after the other:

  check  the class has a spec, checked in the telemonitor (a libpspec
         stream per instance, the default -checker inproc): what
         production runs;
  pcheck the same class with -checker process: one pcheck -cont process
         per stream, as before (optional: KINDS="check pcheck count");
  count  the class has only a tool that counts bytes (`wc -c`): the floor
         of moving the records through the telemonitor.

and prints, per row: whether every stream is exact (records + lost +
skipped + unchecked = written, and for `check` every slow read stored as a
failure), the failures' latency (store time minus the failing read's
start, which is wall-clock time: p50 / p99 / max), the CPU of the
telemonitor and everything it ran (its checkers or tools), per record
(over the whole run, starting and ending 1,000 instances included; "tm
only" without the children; "steady" while every program writes, from a
second after the last one started to three seconds before the first
ends, children counted live), the
memory per stream (the telemonitor's RSS plus its children's PSS, sampled
mid-run, divided by N), and how long after the last program ended its
results were all in ("tail").

The knee is the first N whose `check` row is not exact or has p99 latency
above 1 s.

Every run's temporary directory is removed when the whole ramp is over:
on ext4 without a journal (this machine's), each new file scans past the
files deleted in the last minute or so, and a run would otherwise pay, as
its instances start, for the thousands of files the run before it deleted
(12.6% of the telemonitor's samples in the first 14 s of a 1,000-stream
run right after another; 1.2% with the removal deferred).

With REPEAT=k (default 1) each N runs its classes k times, alternated
(check, count, check, count, ...), and the ratios are printed for each
pair, then their median: on a shared machine one pair's steady ratio
moves by 0.1 from run to run.

Environment: RAMP (default "100 300 500 1000"), SECS (20), KINDS ("check
count"), SLOW_EVERY (100), REPEAT (1), EVERY_MS (100: ten writes a second
a program), TM_ARGS (more telemonitor options, e.g. "-batch 0" for
records sent as they come). Run on a Release build (cmake -DCMAKE_BUILD_TYPE=
Release); the programs and snarflogs share the machine with the
telemonitor, as they would on a busy host.
"""
import glob
import os
import shutil
import sqlite3
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
if len(sys.argv) > 1:
    os.environ["CMON_BUILD_DIR"] = os.path.abspath(sys.argv[1])
os.environ.setdefault("CMON_SOURCE_DIR", SRC)
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))

import cmontest as ct          # noqa: E402
import telemontest as tt       # noqa: E402

_E = os.environ.get
RAMP = [int(x) for x in _E("RAMP", "100 300 500 1000").split()]
SECS = int(_E("SECS", 20))
KINDS = _E("KINDS", "check count").split()
SLOW_EVERY = int(_E("SLOW_EVERY", 100))
REPEAT = max(1, int(_E("REPEAT", 1)))
EVERY_MS = int(_E("EVERY_MS", 100))     # a program writes every EVERY_MS ms
TM_ARGS = _E("TM_ARGS", "").split()     # more telemonitor options (e.g. "-batch 0")
READS_S = 333                       # 999 records a second
READS = READS_S * SECS
RECORDS = 3 * READS
TICK = os.sysconf("SC_CLK_TCK")

SPEC = """perfspec ramp
  timed event StartRead(tid, size);
              EndRead(tid);
  event CacheHit(tid);
  interval Read =
    s: StartRead, e: EndRead where e.tid = s.tid
  metrics
    time = ts(e) - ts(s)
  end Read;
  assert "read at most 10 ms": {& r : Read : r.time <= 10 ms};
end ramp
"""


class Quiet(tt.Telemonitor):
    """The telemonitor without -debug (its log would cost CPU)."""

    def argv(self):
        return [a for a in super().argv() if a != "-debug"]


def cpu(pid):
    """(utime + stime, cutime + cstime) of pid: its own CPU and that of
    its children it has reaped, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        w = f.read().rsplit(")", 1)[1].split()
    return (int(w[11]) + int(w[12])) / TICK, (int(w[13]) + int(w[14])) / TICK


def busy(pid):
    """The CPU seconds of pid and of its live children (a tool runs as long
    as its stream: its CPU reaches cutime only when it is reaped), by pid."""
    out = {pid: sum(cpu(pid))}
    for c in children(pid):
        try:
            out[c] = cpu(c)[0]
        except OSError:
            pass
    return out


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def kib(path, key):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def memory(pid):
    """(the telemonitor's RSS, its children's PSS summed), KiB."""
    own = kib("/proc/%d/status" % pid, "VmRSS")
    kids = sum(kib("/proc/%d/smaps_rollup" % c, "Pss") for c in children(pid))
    return own, kids


def pct(v, p):
    if not v:
        return float("nan")
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))]


def median(v):
    v = sorted(v)
    h = len(v) // 2
    return v[h] if len(v) % 2 else (v[h - 1] + v[h]) / 2


def run(n, kind):
    with ct.Env("ramp-%d-%s" % (n, kind)) as env:
        spec = env.path("ramp.pspec")
        with open(spec, "w") as f:
            f.write(SPEC)
        checks = kind in ("check", "pcheck")
        if checks:
            rc = tt.rc_class("ramp-*", spec=spec, block=True)
        else:
            rc = tt.rc_class("ramp-*", tool="exec wc -c > /dev/null", block=True)
        reg = env.registry()
        tm = Quiet(env, reg, rc, extra=(["-checker", "process"] if kind == "pcheck" else []) + TM_ARGS)
        pid = tm.proc.p.pid
        cpu0 = cpu(pid)
        writer = ct.binary("bench_tm_writer")
        progs = []
        t0 = time.monotonic()
        for k in range(n):
            prog = "ramp-%04d" % k
            env.snarflog(prog, reg=reg, wait_port=False, stdout=subprocess.DEVNULL,
                         cmd=[writer, "-reads", str(READS), "-rate", str(READS_S),
                              "-every-ms", str(EVERY_MS), "-wall", "-slow-every", str(SLOW_EVERY),
                              "-prog", prog])
            progs.append(prog)
        started = time.monotonic() - t0
        # steady state: every program writing, none ended (each writes
        # 999 records a second, paced by the wall clock), sampled from a
        # second after the last one started to three before the first ends
        time.sleep(1.0)
        a, ta = busy(pid), time.monotonic()
        time.sleep(max(1.0, SECS / 2 - started - 1.0))
        own, kids = memory(pid)
        time.sleep(max(1.0, SECS - 3.0 - (time.monotonic() - t0)))
        b, tb = busy(pid), time.monotonic()
        steady = sum(v - a.get(k, 0) for k, v in b.items()) / (n * 3 * READS_S * (tb - ta))
        for p in env.procs:
            if p.name == "snarflog":
                p.p.wait(SECS * 10 + 120)
        ended = time.monotonic()

        def all_ended():
            rows = [i for i in tm.json("instances", "--all", "--limit", "100000")
                    if i["prog"].startswith("ramp-")]      # (a listing stops at 1,000 rows unless told)
            done = [i for i in rows if i["state"] in ("ended", "gone")]
            return rows if len(done) == n else None
        rows = ct.wait_for(all_ended, 600, "every instance to end", interval=0.5)
        tail = time.monotonic() - ended
        cpu1 = cpu(pid)
        own_cpu, kid_cpu = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
        used = own_cpu + kid_cpu
        bad = 0
        recs = 0
        for i in rows:
            acct = i["records"] + i["lost"] + i["skipped"] + i.get("unchecked", 0)
            recs += i["records"]
            want_f = READS // SLOW_EVERY if checks else 0
            if acct != RECORDS or i["lost"] or i.get("unchecked", 0) or \
                    (checks and i["failures"] != want_f):
                bad += 1
        tm.stop()
        lat = []
        if checks:
            db = sqlite3.connect(glob.glob(os.path.join(tm.state, "telemonitor.db"))[0])
            lat = [r[0] for r in db.execute(
                "SELECT time - start_wall FROM failures WHERE report = 0 AND start_wall > 0")]
            db.close()
        return {
            "n": n, "kind": kind, "records": recs, "exact": n - bad,
            "failures": len(lat), "p50": pct(lat, 0.5), "p99": pct(lat, 0.99),
            "max": max(lat) if lat else float("nan"), "cpu": used,
            "us": used / recs * 1e6 if recs else float("nan"),
            "us_tm": own_cpu / recs * 1e6 if recs else float("nan"),
            "steady": steady * 1e6, "started": started,
            "own": own, "kids": kids, "per": (own + kids) / n, "tail": tail,
        }


def main():
    # every run's directory is removed at the end, not after the run: on
    # ext4 without a journal (this machine's) each new file scans past the
    # files deleted in the last minute, and a run would pay at its start
    # for the thousands of files the run before it deleted
    ct.Env.deferred_removal = []
    try:
        ramp()
    finally:
        for d in ct.Env.deferred_removal:
            shutil.rmtree(d, ignore_errors=True)


def ramp():
    print("ramp: %s on %d CPUs (%s); %d s at %d records/s a program, ten writes a second; "
          "classes: %s" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.cpu_count(),
                            os.uname().nodename, SECS, 3 * READS_S, " ".join(KINDS)))
    print("%6s %-6s %10s %7s %8s %8s %8s %8s %7s %7s %7s %7s %9s %9s %8s %6s" %
          ("N", "class", "records", "exact", "failures", "p50 ms", "p99 ms", "max ms", "CPU s",
           "us/rec", "tm only", "steady", "tm MiB", "kids MiB", "KiB/str", "tail"))
    knee = None
    for n in RAMP:
        ratios = {}
        for rep in range(REPEAT):
            res = {}
            for kind in KINDS:
                r = res[kind] = run(n, kind)
                print("%6d %-6s %10d %4d/%-3d %8d %8.0f %8.0f %8.0f %7.1f %7.2f %7.2f %7.2f "
                      "%9.1f %9.1f %8.0f %5.1fs"
                      % (n, kind, r["records"], r["exact"], n, r["failures"], r["p50"] * 1e3,
                         r["p99"] * 1e3, r["max"] * 1e3, r["cpu"], r["us"], r["us_tm"],
                         r["steady"], r["own"] / 1024, r["kids"] / 1024, r["per"], r["tail"]))
                sys.stdout.flush()
            for k in ("check", "pcheck"):
                if k in res and "count" in res and res["count"]["us"] > 0:
                    whole = res[k]["us"] / res["count"]["us"]
                    steady = res[k]["steady"] / res["count"]["steady"]
                    ratios.setdefault(k, []).append((whole, steady))
                    print("%6d %s/count CPU per record: %.2fx (steady %.2fx); programs started "
                          "in %.1f s" % (n, k, whole, steady, res[k]["started"]))
            c = res.get("check")
            if knee is None and c and (c["exact"] < n or c["p99"] > 1.0):
                knee = n
        for k, v in ratios.items():
            if len(v) > 1:
                print("%6d %s/count median of %d pairs: %.2fx (steady %.2fx)"
                      % (n, k, len(v), median([w for w, _ in v]),
                         median([st for _, st in v])))
    print("knee: %s" % ("none up to %d streams" % RAMP[-1] if knee is None else
                        "%d streams (first row not exact or p99 > 1 s)" % knee))


if __name__ == "__main__":
    main()
