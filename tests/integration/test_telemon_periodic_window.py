"""Log windows of time-based intervals: a failure of an `every` interval
(the report's periodic statistics) keeps a window that pcheck checks to the
same failure — same period boundaries, same metrics — because the window
says in a `#time-origin` header line where the checker's virtual time
began. Also for a manual instance whose monitoring started late (the
checker's origin is then the first record it read, not the program's)."""
import cmontest as ct
import telemontest as tt
from cmontest import check

SPEC = """perfspec periodic
  timed event StartRead(tid, size); EndRead(tid);
  event CacheHit(tid);
  interval Period = s: every 10 ms, e: after 10 ms
    metrics reads = {count r : StartRead}
  end Period;
  assert "busy periods": {& p : Period : p.reads >= 3};
end periodic
"""


def same_failure(stored, report):
    return (report.get("assert") == stored["assert"] and report.get("type") == stored["type"]
            and report.get("start_ts") == stored["start_ts"]
            and report.get("end_ts") == stored["end_ts"]
            and report.get("metrics") == stored["metrics"])


def recheck_all(tm, spec, fails):
    for f in fails:
        ct.wait_for(lambda: tm.ctl_rc("window", str(f["id"]))[0] == 0, 10, "the window")
        text = tm.ctl("window", str(f["id"]))
        check("\n#time-origin " in text, "window %d has no #time-origin: %r", f["id"], text[:400])
        reports = tt.pcheck_json(spec, text)
        check(any(same_failure(f, r) for r in reports),
              "pcheck on the window of failure %d does not report it again:\n%r\n%r",
              f["id"], f, reports)


def main():
    with ct.Env("telemon_periodic_window") as env:
        spec = env.path("periodic.pspec")
        with open(spec, "w") as f:
            f.write(SPEC)
        reg = env.registry()
        rc = (tt.rc_class("periodic", spec=spec, window="5 after 2") +
              tt.rc_class("late", spec=spec, window="5 after 2", auto=False))
        tm = tt.Telemonitor(env, reg, rc)

        # reads take 1 ms; the slow ones (20 ms) leave periods with < 3 reads
        snarf = env.snarflog("periodic", reg=reg, cmd=tt.writer_cmd(
            "--reads", 200, "--slow", "30,120"))
        check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())
        fails = tm.wait_failures(2, "--prog", "periodic")
        check(all(f["assert"] == "busy periods" for f in fails), "failures: %r", fails)
        recheck_all(tm, spec, fails)

        # monitoring started after 50 reads: the checker's origin is later
        gate = env.path("gate")
        late = env.snarflog("late", reg=reg, cmd=tt.writer_cmd(
            "--reads", 200, "--slow", "120", "--gate-after", 50, "--gate", gate))
        inst = tm.instance(lambda i: i["prog"] == "late", what="the late instance")
        tm.ctl("start", str(inst["id"]))
        tm.instance(lambda i: i["id"] == inst["id"] and i["state"] == "monitoring",
                    what="monitoring")
        open(gate, "w").close()
        check(late.wait(30) == 0, "snarflog: %s", late.stderr())
        lf = tm.wait_failures(1, "--prog", "late")
        recheck_all(tm, spec, lf)
        tm.stop()


ct.run_test(main)
