"""The class's checker in the telemonitor (-checker inproc, the default: a
libpspec stream per instance) gives exactly what a pcheck process per
instance gives (-checker process): the same workload under both stores the
same failures (an offender assertion failing several times), the same
verdict rows (a whole-log assertion failing at the end of the log, with its
--explain witness, and intervals left open: "unclosed"), the same interval
summaries (--summaries 60), the same counts on the instance, and a
typescript with the malformed line's warning and "checker exited with
status 1". In process mode an instance has a pcheck child; in the default
it has none, except for a spec the stream cannot take (two passes): that
one still gets a pcheck process, whose end-of-log verdict is stored. A
telemonitor killed with SIGKILL in the middle of an in-process check and
started again accounts for every record (records + unchecked + lost ==
written), as with an orphaned checker."""
import os
import re
import sqlite3
import time

import cmontest as ct
import telemontest as tt
from cmontest import check

MS = tt.MS

# fsread's Read with a per-minute interval, an offender assertion, a
# whole-log one that fails (with a witness) and one that holds
EQ_SPEC = """perfspec eq
  timed event StartRead(tid, size);
              EndRead(tid);
  event CacheHit(tid);
  interval Read =
    s: StartRead, e: EndRead where e.tid = s.tid
  metrics
    time = ts(e) - ts(s),
    size = s.size,
    hit = {count c : CacheHit where c.tid = s.tid} != 0
  end Read;
  interval Minute =
    s: every 1 min, e: after 1 min
  metrics
    reads = {count r : Read}
  end Minute;
  assert "read at most 10 ms": {& r : Read : r.time <= 10 ms};
  assert "hit ratio at least 75%": {count r : Read where r.hit} / {count r : Read} >= 0.75;
  assert "mean read at most 5 ms": {mean r : Read : r.time} <= 5 ms;
end eq
"""

EQ_READS = 300
EQ_SLOW = [i for i in range(EQ_READS) if i % 37 == 5]        # 8 slow reads


def eq_log():
    """About 300 s of log clock (a read a second: 5 summaries of Read's
    durations), every other read without a cache hit (the hit ratio fails
    at the end), a malformed line in the middle, two reads never ended."""
    lines = ["#cmon-ascii 1", "#program eq", "#tick-ns 1"]
    t = 1000000
    for i in range(EQ_READS):
        dur = 20 * MS if i in EQ_SLOW else 1 * MS
        lines.append("%d 1 StartRead 1 %d" % (t, 4096 + i % 3))
        if i % 2 == 0:
            lines.append("%d 1 CacheHit 1" % (t + 100))
        lines.append("%d 1 EndRead 1" % (t + dur))
        if i == 150:
            lines.append("this is not a record")
        t += dur + 999 * MS
    lines.append("%d 2 StartRead 2 100" % t)
    lines.append("%d 3 StartRead 3 100" % (t + 5))
    records = sum(1 for l in lines if not l.startswith("#"))   # (the malformed line too)
    return "\n".join(lines) + "\n", records


# a log aggregate inside another: two passes, which the stream cannot take
TWO_PASS_SPEC = os.path.join(ct.SOURCE, "tests", "lang", "cont_two_pass.pspec")
TWO_PASS_LOG = os.path.join(ct.SOURCE, "tests", "lang", "cont_two_pass.log")

# what differs between two runs of the same log: times, ids, the process
VOLATILE = {"id", "time", "time_unix", "instance", "pid", "machine", "window", "window_id",
            "start_wall", "first_seen", "ended", "endpoint", "token", "port", "status",
            "owner", "lease_until", "acked", "ack_comment", "silence", "silence_id",
            "class", "class_id", "start_ns", "bytes", "started", "seen", "last_seen",
            "updated", "since", "time_iso", "start_iso", "acked_iso"}


def norm(rows):
    """Rows (failures, verdicts) without their times and ids."""
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]


def children(pid):
    """[(child pid, argv)] of the processes whose parent is pid."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != pid:
                continue
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except (OSError, ValueError, IndexError):
            continue
        out.append((int(d), argv))
    return out


def pcheck_children(tm, spec=None):
    """The telemonitor's children running pcheck (on `spec`, if given)."""
    return [(p, a) for p, a in children(tm.proc.pid)
            if a and os.path.basename(a[0]) == "pcheck" and (spec is None or spec in a)]


def summaries(tm, inst_id):
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(tm.state, "telemonitor.db"),
                         uri=True, timeout=10)
    try:
        return db.execute("SELECT type, metric, count, sum, sumsq, min, max, sketch "
                          "FROM interval_summaries WHERE instance_id = ? ORDER BY id",
                          (inst_id,)).fetchall()
    finally:
        db.close()


def typescript_ok(tm, inst_id, ts_text=None):
    ts = ts_text if ts_text is not None else tm.ctl("typescript", str(inst_id))
    return ("warning: bad timestamp 'this'" in ts and
            "checker exited with status 1" in ts), ts


def outcome(tm, inst):
    """What the checker left of instance `inst`, without times and ids."""
    i = [x for x in tm.instances() if x["id"] == inst["id"]][0]
    ts = tm.ctl("typescript", str(inst["id"]))
    # its lines without their times and the pid (sorted: the order of a
    # process's standard error among the reports is up to the scheduler)
    ts = re.sub(r"pid \d+", "pid N", re.sub(r"^\[telemonitor [^]]*\] ", "", ts, flags=re.M))
    return {
        "failures": norm(tm.failures("--instance", str(inst["id"]))),
        "verdicts": sorted(norm(tm.json("verdicts", str(inst["id"]))),
                           key=lambda v: (v.get("line", 0), str(v.get("assert")))),
        "summaries": summaries(tm, inst["id"]),
        "counts": {k: i.get(k) for k in ("records", "lost", "unchecked", "failures", "gaps",
                                         "skipped", "state")},
        "typescript": sorted(ts.splitlines()),
    }


def main():
    with ct.Env("telemon_checker_modes") as env:
        eq_spec = env.path("eq.pspec")
        with open(eq_spec, "w") as f:
            f.write(EQ_SPEC)
        text, eq_events = eq_log()
        eq_file = env.path("eq.log")
        with open(eq_file, "w") as f:
            f.write(text)
        rc = (tt.rc_class("eq", spec=eq_spec) + tt.rc_class("fsread", spec=tt.FSREAD_SPEC) +
              tt.rc_class("twopass", spec=TWO_PASS_SPEC, extra="(allow-unbounded TRUE)"))
        # one registry each: a telemonitor sees only its own programs
        reg_p, reg_i, reg_k = env.registry(), env.registry(), env.registry()
        tm_p = tt.Telemonitor(env, reg_p, rc, name="proc", extra=["-checker", "process"])
        tm_i = tt.Telemonitor(env, reg_i, rc, name="inproc")
        tm_k = tt.Telemonitor(env, reg_k, rc, name="killed")
        reg_q = env.registry()
        tm_q = tt.Telemonitor(env, reg_q, rc, name="quiet")
        # a stream that stops at a gate: the progress of its last batch,
        # too soon after the one before to be said at once, is said once
        # its time comes (the in-process checker's timer), so a kill -9
        # after a quiet second leaves nothing unchecked
        qgate = env.path("qgate")
        qsnarf = env.snarflog("fsread", reg=reg_q, cmd=tt.writer_cmd(
            "--reads", 400, "--slow", "5", "--batch", 10, "--pace", 0.03,
            "--gate-after", 300, "--gate", qgate))

        # the kill -9 run first (it takes longest): 500 reads, paced, the
        # last 200 behind a gate, so the stream is flowing when it is killed
        kgate = env.path("kgate")
        ksnarf = env.snarflog("fsread", reg=reg_k, cmd=tt.writer_cmd(
            "--reads", 500, "--slow", "5,200,450", "--batch", 10, "--pace", 0.03,
            "--gate-after", 300, "--gate", kgate))

        # the same workload under both modes, at once
        eq = {}
        for tm, reg in ((tm_p, reg_p), (tm_i, reg_i)):
            eq[tm.name] = env.snarflog("eq", reg=reg, cmd=tt.writer_cmd(
                "--file", eq_file, "--linger", 0.5))
        # a stream held open by a gate under both: who runs pcheck
        gates, held = {}, {}
        for tm, reg in ((tm_p, reg_p), (tm_i, reg_i)):
            gates[tm.name] = env.path("gate." + tm.name)
            held[tm.name] = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd(
                "--reads", 200, "--slow", "7,150", "--gate-after", 100,
                "--gate", gates[tm.name]))

        # kill -9 mid-stream, in-process checker
        kinst = tm_k.instance(lambda i: i["prog"] == "fsread" and i["records"] >= 450,
                              timeout=20, what="the killed run's first 150 reads")
        check(not pcheck_children(tm_k), "inproc: no pcheck: %r", children(tm_k.proc.pid))
        tm_k.proc.kill()
        check(ksnarf.alive(), "the program goes on")
        tm_k.start()

        # 2. while streaming: a pcheck child under -checker process, none by default
        for tm in (tm_p, tm_i):
            tm.instance(lambda i: i["prog"] == "fsread" and i["records"] == 300 and
                        i["state"] == "monitoring", timeout=20,
                        what="%s: the held stream's first 100 reads" % tm.name)
        check(len(pcheck_children(tm_p, tt.FSREAD_SPEC)) == 1,
              "-checker process: one pcheck for the held stream: %r", children(tm_p.proc.pid))
        check(pcheck_children(tm_i) == [], "-checker inproc: no pcheck child: %r",
              children(tm_i.proc.pid))
        for name in gates:
            open(gates[name], "w").close()

        # 3. two passes: the default falls back to a pcheck process
        two = env.snarflog("twopass", reg=reg_i, cmd=tt.writer_cmd(
            "--file", TWO_PASS_LOG, "--linger", 3))
        tinst = tm_i.instance(lambda i: i["prog"] == "twopass" and i["records"] == 8 and
                              i["state"] == "monitoring", timeout=20, what="the two-pass stream")
        ct.wait_for(lambda: pcheck_children(tm_i, TWO_PASS_SPEC), 5,
                    "a pcheck process for the two-pass spec")
        check(len(pcheck_children(tm_i)) == 1, "only the two-pass spec gets pcheck: %r",
              children(tm_i.proc.pid))

        # 1. equivalence
        got = {}
        for tm in (tm_p, tm_i):
            check(eq[tm.name].wait(30) == 0, "snarflog: %s", eq[tm.name].stderr())
            check(held[tm.name].wait(30) == 0, "snarflog: %s", held[tm.name].stderr())
            for prog in ("eq", "fsread"):
                inst = tm.instance(lambda i: i["prog"] == prog and i["state"] == "ended",
                                   timeout=20, what="%s: %s to end" % (tm.name, prog))
                ct.wait_for(lambda: "checker exited" in tm.ctl("typescript", str(inst["id"])),
                            10, "%s: the checker of %s to finish" % (tm.name, prog))
                got[tm.name, prog] = outcome(tm, inst)
        for prog in ("eq", "fsread"):
            p, i = got["proc", prog], got["inproc", prog]
            for k in p:
                check(p[k] == i[k], "%s: %s differ:\n process: %r\n inproc:  %r",
                      prog, k, p[k], i[k])
        # ... and what they both say is what the workload has
        e = got["inproc", "eq"]
        offenders = [f for f in e["failures"] if f["kind"] == "interval"]
        slow = sorted((f["start_ts"], f["end_ts"]) for f in offenders)
        check(len(offenders) == len(EQ_SLOW) and
              all(f["assert"] == "read at most 10 ms" and f["type"] == "Read" and
                  f["result"] == "fail" and f["uid"] and f["start"] and f["end"] and
                  f["metrics"]["time"][0] == 20 * MS for f in offenders) and
              all(b - a == 20 * MS for a, b in slow),
              "the slow reads: %r", e["failures"])
        # the whole-log failure, with its witness (--explain)
        wl = [f for f in e["failures"] if f["kind"] != "interval"]
        check(len(wl) == 1 and wl[0]["assert"] == "hit ratio at least 75%" and
              wl[0]["kind"] == "assertion" and wl[0]["result"] == "fail" and
              wl[0]["metrics"].get("{count r : Read}") == EQ_READS and
              "{count r : Read} fed by" in wl[0]["metrics"], "whole-log failure: %r", wl)
        byassert = {v.get("assert"): v for v in e["verdicts"]}
        check(byassert.get("read at most 10 ms", {}).get("result") == "fail" and
              byassert["read at most 10 ms"].get("count") == len(EQ_SLOW),
              "offender verdict: %r", e["verdicts"])
        check(byassert.get("hit ratio at least 75%", {}).get("result") == "fail",
              "whole-log verdict: %r", e["verdicts"])
        check(byassert.get("mean read at most 5 ms", {}).get("result") == "pass",
              "passing verdict: %r", e["verdicts"])
        check(any(v.get("result") == "unclosed" and v.get("type") == "Read" and v.get("count") == 2
                  for v in e["verdicts"]), "two reads left open: %r", e["verdicts"])
        check(len(e["summaries"]) >= 4 and
              sum(s[2] for s in e["summaries"]) >= 240 and
              all(s[0] == "Read" and s[1] == "time" for s in e["summaries"]),
              "summaries of Read's durations: %r", e["summaries"])
        check(e["counts"]["records"] == eq_events and e["counts"]["lost"] == 0 and
              not e["counts"]["unchecked"] and e["counts"]["failures"] == len(EQ_SLOW) + 1,
              "counts: %r (%d events)", e["counts"], eq_events)
        check("<stdin>:383: warning: bad timestamp 'this'" in e["typescript"] and
              "checker exited with status 1 (some assertion failed)" in e["typescript"] and
              "monitoring eq on vm pid N (ascii log)" not in e["typescript"][-1:],
              "typescript: %r", e["typescript"])
        f = got["inproc", "fsread"]["failures"]
        _, fslow = tt.fsread_records(200, [7, 150])
        check(sorted((x["start_ts"], x["end_ts"]) for x in f) == fslow, "held: %r", f)

        # 3. (continued) the fallback's end-of-log verdict is stored
        check(two.wait(30) == 0, "snarflog: %s", two.stderr())
        tm_i.instance(lambda i: i["id"] == tinst["id"] and i["state"] == "ended",
                      timeout=20, what="the two-pass stream to end")
        verdicts = ct.wait_for(lambda: (lambda v: v if len(v) >= 2 else None)(
            tm_i.json("verdicts", str(tinst["id"]))), 10, "the two-pass verdicts")
        va = {v.get("assert"): v for v in verdicts}
        check(va.get("at most twice the mean", {}).get("result") == "fail" and
              va["at most twice the mean"].get("count") == 1 and
              va.get("same, inline", {}).get("result") == "fail", "verdicts: %r", verdicts)
        tf = tm_i.failures("--instance", str(tinst["id"]))
        check(len(tf) == 2 and all(x["start"] == "7.0" for x in tf), "its failures: %r", tf)
        ct.wait_for(lambda: not pcheck_children(tm_i), 10, "the pcheck to be reaped")

        # 4. after the kill -9: every record accounted for
        again = tm_k.instance(lambda i: i["id"] == kinst["id"] and i["state"] == "monitoring",
                              timeout=20, what="the instance re-attached")
        check(again["pid"] == kinst["pid"], "same instance: %r", again)
        open(kgate, "w").close()
        check(ksnarf.wait(30) == 0, "snarflog: %s", ksnarf.stderr())
        done = tm_k.instance(lambda i: i["id"] == kinst["id"] and i["state"] == "ended",
                             timeout=20, what="the killed run to end")
        # every record: checked, counted unchecked (given to the killed
        # checker past the progress the store has) or counted lost (on its
        # way to the killed telemonitor: a gap), and each of those said
        unchecked, lost = done.get("unchecked", 0), done["lost"]
        check(done["records"] + unchecked + lost == 1500 and unchecked <= 900,
              "every record: %r", done)
        kts = tm_k.ctl("typescript", str(kinst["id"]))
        if unchecked:
            check("may have reported on its last %d records to it alone; counted as "
                  "unchecked" % unchecked in kts, "the unchecked records are said: %r", kts)
        if lost:
            check(done["gaps"] >= 1 and "%d records before the restart were lost" % lost in kts,
                  "the lost records are said: %r", kts)
        check(kts.count("monitoring fsread") == 2, "two runs: %r", kts)
        _, kslow = tt.fsread_records(500, [5, 200, 450])
        kf = ct.wait_for(lambda: (lambda f: f if any((x["start_ts"], x["end_ts"]) == kslow[2]
                                                     for x in f) else None)(
            tm_k.failures("--instance", str(kinst["id"]))), 10, "the slow read after the gate")
        starts = [(x["start_ts"], x["end_ts"]) for x in kf]
        check(len(set(starts)) == len(starts) and set(starts) <= set(kslow) and
              kslow[2] in starts, "no failure twice, the one after the restart caught: %r", kf)
        check(not pcheck_children(tm_k), "inproc after the restart too")

        # 5. quiet at the gate, then kill -9: its last progress was said and
        # stored, so nothing is unchecked and nothing lost
        qinst = tm_q.instance(lambda i: i["prog"] == "fsread" and i["records"] == 900,
                              timeout=20, what="the quiet run's first 300 reads")
        time.sleep(1.5)     # > the progress interval (0.2 s) + a store flush (0.1 s)
        tm_q.proc.kill()
        tm_q.start()
        tm_q.instance(lambda i: i["id"] == qinst["id"] and i["state"] == "monitoring",
                      timeout=20, what="the quiet instance re-attached")
        open(qgate, "w").close()
        check(qsnarf.wait(30) == 0, "snarflog: %s", qsnarf.stderr())
        qdone = tm_q.instance(lambda i: i["id"] == qinst["id"] and i["state"] == "ended",
                              timeout=20, what="the quiet run to end")
        check(qdone["records"] == 1200 and not qdone.get("unchecked") and not qdone["lost"],
              "the last batch before the gate was checked and said so: %r", qdone)

        for tm in (tm_p, tm_i, tm_k, tm_q):
            tm.stop()


ct.run_test(main)
