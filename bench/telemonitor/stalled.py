"""bench/telemonitor/stalled.py BUILD_DIR — a program whose monitoring
nobody can consume (issue 34): how much slower does it run than writing its
log into `cat`?

The program is bench_tm_writer writing READS reads (3 records each) of an
fsread log as fast as the pipe takes them; its time is what it measures
from its first record to its last write (BENCH_TM_ELAPSED), not the
wrapper's exit (snarflog then waits up to its drain deadline for a
consumer that does not read). It runs, one after the other,
ROUNDS times each (medians; ratios to `cat` in the same round):

  cat       writer | cat > /dev/null
  alone     under snarflog -standalone (nobody subscribes)
  stalled   under snarflog announcing to a registry, monitored by a
            telemonitor whose class's tool never reads (`exec sleep`); the
            class does not block the program (block FALSE), or with
            BLOCK=1 it does (block TRUE: the program is held up to
            snarflog's -maxblock, once, then records are dropped, counted)
  checked   the same with a checker (the spec of ramp.py) instead: a
            consumer that keeps up, for comparison

and prints the program's time and the CPU of everything involved
(the writer, snarflog, and for `stalled`/`checked` the telemonitor and its
tool), from getrusage of the children and /proc of the services.

Environment: READS (default 3,000,000), ROUNDS (5), BLOCK (0), TM_ARGS (more
telemonitor options, as for ramp.py).
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ramp                    # noqa: E402  (sets up BUILD_DIR and the tests' modules)

ct, tt = ramp.ct, ramp.tt

READS = int(os.environ.get("READS", 3000000))
ROUNDS = int(os.environ.get("ROUNDS", 5))
BLOCK = os.environ.get("BLOCK", "0") == "1"


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


ENV = dict(os.environ, BENCH_TM_ELAPSED="1")


def timed(argv):
    """Run argv to its end: (the program's own wall seconds, as it reports
    them, CPU seconds of it and its children)."""
    r0 = os.times()
    out = subprocess.run(argv, env=ENV, stdout=subprocess.PIPE, check=True).stdout
    r1 = os.times()
    t = float(out.split()[-1])
    return t, (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)


def writer(prog="stalled-1"):
    return [ct.binary("bench_tm_writer"), "-reads", str(READS), "-prog", prog]


def snarf_argv(env, prog, reg=None):
    argv = [ct.binary("snarflog"), prog, "-portfile", env.unique("port"),
            "-token-file", env.unique("token")]
    argv += ["-regmachine", reg.addr()] if reg else ["-standalone"]
    return argv + ["--"] + writer(prog)


def run_cat():
    """The writer's log (CMON_LOG_FD 3) into cat; its report on stdout."""
    r0 = os.times()
    rfd, wfd = os.pipe()
    c = subprocess.Popen(["cat"], stdin=rfd, stdout=subprocess.DEVNULL)
    os.close(rfd)
    w = subprocess.Popen(writer(), env=dict(ENV, CMON_LOG_FD=str(wfd)), pass_fds=(wfd,),
                         stdout=subprocess.PIPE)
    os.close(wfd)
    out = w.communicate()[0]
    c.wait()
    r1 = os.times()
    t = float(out.split()[-1])
    return t, (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)


def run_monitored(kind):
    with ct.Env("stalled-" + kind) as env:
        if kind == "alone":
            return timed(snarf_argv(env, "stalled-1"))
        spec = env.path("ramp.pspec")
        with open(spec, "w") as f:
            f.write(ramp.SPEC)
        if kind == "stalled":
            rc = tt.rc_class("stalled-*", tool="exec sleep 100000", block=BLOCK)
        else:
            rc = tt.rc_class("stalled-*", spec=spec, block=BLOCK)
        reg = env.registry()
        tm = ramp.Quiet(env, reg, rc, extra=ramp.TM_ARGS)
        pid = tm.proc.p.pid
        c0 = sum(ramp.cpu(pid)) + sum(ramp.cpu(reg.p.pid))
        t, c = timed(snarf_argv(env, "stalled-1", reg))
        time.sleep(0.5)
        kids = 0.0
        for k in ramp.children(pid):      # the stalled tool is still running
            try:
                with open("/proc/%d/stat" % k) as f:
                    w = f.read().rsplit(")", 1)[1].split()
                kids += (int(w[11]) + int(w[12])) / ramp.TICK
            except OSError:
                pass
        c1 = sum(ramp.cpu(pid)) + sum(ramp.cpu(reg.p.pid))
        return t, c + (c1 - c0) + kids


def main():
    print("stalled: %s on %d CPUs (%s); %d reads (%d records) a run, %d rounds" %
          (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.cpu_count(),
           os.uname().nodename, READS, 3 * READS, ROUNDS))
    kinds = ["cat", "alone", "stalled", "checked"]
    res = {k: [] for k in kinds}
    for _ in range(ROUNDS):
        base = None
        for k in kinds:
            t, c = run_cat() if k == "cat" else run_monitored(k)
            base = base or t
            res[k].append((t, c, t / base))
    print("%-9s %10s %10s %12s" % ("", "wall s", "CPU s", "wall vs cat"))
    for k in kinds:
        print("%-9s %10.3f %10.3f %11.2fx" % (k, median([r[0] for r in res[k]]),
                                             median([r[1] for r in res[k]]),
                                             median([r[2] for r in res[k]])))


if __name__ == "__main__":
    main()
