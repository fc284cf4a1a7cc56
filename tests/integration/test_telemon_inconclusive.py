"""Verdicts under loss in the service: a program whose log says records were
lost (#cmon-gap) inside a slow interval gets an *inconclusive* offender,
stored with result "inconclusive" and shown apart (the flag in `telemonctl
failures`), neither counted as a failure of the instance nor in
cmon_failures_total; a slow interval without loss is a failure as usual.
Intervals whose end never came are said in the typescript (unclosed) and
listed with the end-of-log verdicts (telemonctl verdicts, the API), and
those of a type with a deadline (`within`) are overdue failures, or
inconclusive overdue reports when records were lost after they started
(a lost record could have been the end). A whole-log verdict is stored with
its witness (pcheck --explain) as its metrics."""
import json
import subprocess
import urllib.error
import urllib.request

import cmontest as ct
import telemontest as tt
from cmontest import check

SPEC = """perfspec loss
  timed event StartRead(tid); EndRead(tid);
  interval Read = s: StartRead, e: EndRead where e.tid = s.tid within 500
    metrics time = ts(e) - ts(s)
  end Read;
  assert "fast": {& r : Read : r.time <= 10};
  assert "enough reads": {count r : Read} >= 10;
end loss
"""

LOG = r"""#cmon-ascii 1
10 1 StartRead 1
20 1 StartRead 2
#cmon-gap 2
90 1 EndRead 1
100 1 StartRead 3
190 1 EndRead 3
200 1 StartRead 4
900 1 StartRead 5
"""


def main():
    with ct.Env("telemon_inconclusive") as env:
        reg = env.registry()
        spec = env.path("loss.pspec")
        with open(spec, "w") as f:
            f.write(SPEC)
        tm = tt.Telemonitor(env, reg, tt.rc_class("lossy", spec=spec),
                            extra=["-http", "127.0.0.1:0"])
        prog = env.path("prog.sh")
        with open(prog, "w") as f:
            f.write("printf '%s' >&\"$CMON_LOG_FD\"\n" % LOG.replace("%", "%%"))
        s = env.snarflog("lossy", reg=reg, cmd=["sh", prog])
        check(s.wait(30) == 0, "snarflog: %s", s.stderr())
        inst = tm.instance(lambda i: i["state"] == "ended", what="the program to end")
        fails = ct.wait_for(lambda: (lambda f: f if len(f) >= 5 else None)(tm.failures()),
                            20, "five stored results")
        whole = [f for f in fails if f["kind"] == "assertion"]
        check(len(whole) == 1 and whole[0]["result"] == "inconclusive" and
              whole[0]["metrics"] == {"{count r : Read}": 2,
                                      "{count r : Read} fed by": "Read #1 1.0, Read #2 4.0"},
              "the whole-log verdict over a lossy log is inconclusive, with its witness: %r",
              whole)
        by_uid = {f["uid"]: f for f in fails}
        overdue = sorted(f["start"] for f in fails if f["kind"] == "overdue")
        results = {f["start"]: f["result"] for f in fails if f["kind"] == "overdue"}
        check(overdue == ["2.0", "6.0"] and results == {"2.0": "inconclusive", "6.0": "fail"},
              "reads 2 and 4 never ended (within 500): read 4 is overdue, read 2 inconclusive "
              "(records were lost after it started): %r", fails)
        check(by_uid.get(1, {}).get("result") == "inconclusive",
              "read 1 (open across the gap) is inconclusive: %r", fails)
        check(by_uid.get(2, {}).get("result") == "fail", "read 3 (no loss) fails: %r", fails)
        check([i for i in tm.instances() if i["id"] == inst["id"]][0]["failures"] == 2,
              "the certain failure and the certain overdue one count, not the inconclusive "
              "ones: %r", tm.instances())
        text = tm.ctl("failures")
        check("inconclusive" in text and "overdue" in text, "the listing shows them apart: %s",
              text)
        host, port = tm.http_addr()
        page = urllib.request.urlopen("http://%s:%d/" % (host, port), timeout=10).read().decode()
        check("inconclusive" in page and "overdue" in page, "and so does the dashboard")
        # reads 2 and 4 never ended: said in the typescript, kept with the verdicts
        ts = ct.wait_for(lambda: (lambda t: t if "unclosed" in t else None)(
            tm.ctl("typescript", str(inst["id"]))), 10, "the unclosed note")
        check("3 intervals of type Read still open at end of log (unclosed)" in ts,
              "unclosed intervals are counted: %s", ts)
        # ... and listed with the end-of-log verdicts (telemonctl verdicts, the API)
        verdicts = json.loads(tm.ctl("--json", "verdicts", str(inst["id"])))
        got = [(v["kind"], v["line"], v["assert"], v["type"], v["result"], v["count"])
               for v in verdicts]
        check(got == [("assertion", 6, "fast", None, "fail", 1),
                      ("assertion", 7, "enough reads", None, "inconclusive", 0),
                      ("unclosed", 3, None, "Read", "unclosed", 3)],
              "the verdicts of the instance: %r", verdicts)
        api = json.loads(urllib.request.urlopen("http://%s:%d/api/v1/instances/%d/verdicts" % (
            host, port, inst["id"]), timeout=10).read().decode())
        check(api == verdicts, "the API answers the same: %r", api)
        try:
            urllib.request.urlopen("http://%s:%d/api/v1/instances/999/verdicts" % (host, port),
                                   timeout=10)
            check(False, "verdicts of an unknown instance: 404")
        except urllib.error.HTTPError as e:
            check(e.code == 404, "verdicts of an unknown instance: %d", e.code)
        r = subprocess.run([ct.binary("telemonctl"), "-state", tm.state, "verdicts", "999"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        check(r.returncode == 1 and b"no instance 999" in r.stderr, "telemonctl: %r", r.stderr)
        text = tm.ctl("verdicts", str(inst["id"]))
        check("interval Read" in text and "unclosed" in text and
              'assertion "enough reads"' in text, "as a table: %s", text)
        tm.stop()


ct.run_test(main)
