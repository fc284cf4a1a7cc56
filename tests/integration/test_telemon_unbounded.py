"""A spec whose continuous check keeps state that grows with the stream
(docs/pspec.md "A plan before running"): a second pass keeps the whole log,
a mapping over the whole log keeps every key it ever saw. The telemonitor
refuses such a class, at start, under -check and in `telemonctl class add`,
with pcheck --bounded's explanation (each cause with its spec line) on one
line, unless the class (or the defaults) says (allow-unbounded TRUE); then
the checker runs it and its end-of-log verdict is stored. A spec file made
unbounded after its class was checked is refused when an instance starts
(the checker runs with --bounded too). A bounded spec
(Figure 3 and per-chunk mappings) is never refused."""
import json
import os
import shutil
import subprocess

import cmontest as ct
import telemontest as tt
from cmontest import check

SPEC = """perfspec twopass
  timed event StartRead(tid, size); EndRead(tid);
  interval Read = s: StartRead, e: EndRead where e.tid = s.tid
    metrics time = ts(e) - ts(s), size = s.size
  end Read;
  def Mean = {mean r : Read : r.time};
  assert "near the mean": {& r : Read : r.time <= 3 * Mean};
  assert "sizes": {count k in domain({+ r : Read : r.size -> 1})} < 100;
end twopass
"""

CAUSES = ["grows with the log: %s:7: {& r : Read} needs another aggregate over the whole "
          "log first (pass 2 of 2): the whole log is kept in a temporary file until it ends; ",
          "%s:8: {+ r : Read} is a mapping over the whole log: one entry per distinct key, "
          "kept as long as the log lasts; (allow-unbounded TRUE) lets the class run it\n"]


def telemonitor(env, rc, *more):
    return subprocess.run([ct.binary("telemonitor"), "-rc", rc, "-state", env.path("x.state"),
                           "-regmachine", "127.0.0.1:9", "-pcheck", ct.binary("pcheck")] +
                          list(more), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=60)


def refusal_ok(err, where, spec):
    check(err.count("\n") == 1 and where in err and "refused (--bounded)" in err and
          all(c % spec in err for c in CAUSES) and "(allow-unbounded TRUE) lets the class run it" in err,
          "one line naming the place, both causes and the way out: %r", err)


def main():
    with ct.Env("telemon_unbounded") as env:
        spec = env.path("twopass.pspec")
        with open(spec, "w") as f:
            f.write(SPEC)
        # refused at start and by -check, with the file and line of the spec property
        rc = env.path("refused.rc")
        with open(rc, "w") as f:
            f.write('(class (prog "slow")\n  (spec "twopass.pspec"))\n')
        for more in ([], ["-check"]):
            p = telemonitor(env, rc, *more)
            check(p.returncode == 2, "exit %d, expected 2: %r", p.returncode, p.stderr)
            refusal_ok(p.stderr.decode(), rc + ":2: error: spec: ", spec)
        check(not os.path.exists(env.path("x.state/telemonitor.db")),
              "a refused configuration touches no store")
        # allowed per class and in the defaults
        for name, text in [("class", '(class (prog "slow") (spec "twopass.pspec")\n'
                                     '  (allow-unbounded TRUE))\n'),
                           ("defaults", '(defaults (allow-unbounded TRUE))\n'
                                        '(class (prog "slow") (spec "twopass.pspec"))\n')]:
            rc = env.path(name + ".rc")
            with open(rc, "w") as f:
                f.write(text)
            p = telemonitor(env, rc, "-check")
            check(p.returncode == 0, "%s: allowed, -check passes: %r", name, p.stderr)
        # the papers' Figure 3 and a chunked mapping are bounded: never refused
        p = telemonitor(env, rc_path(env, "fig3.rc", '(class (prog "fsread") (spec "%s"))\n'
                                     % tt.FSREAD_SPEC), "-check")
        check(p.returncode == 0, "Figure 3 is bounded: %r", p.stderr)

        # live: class add refuses it (exit 1, one line), takes it when allowed
        reg = env.registry()
        tm = tt.Telemonitor(env, reg, "; no classes\n")
        r = subprocess.run([ct.binary("telemonctl"), "-state", tm.state, "class", "add",
                            "prog=slow", "spec=" + spec], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        check(r.returncode == 1, "class add of an unbounded spec: exit %d", r.returncode)
        refusal_ok(r.stderr.decode(), "telemonctl: spec: ", spec)
        out = tm.ctl("class", "add", "prog=slow", "spec=" + spec, "allow-unbounded=TRUE")
        check("added" in out, "allowed: %r", out)
        cls = [c for c in json.loads(tm.ctl("--json", "classes")) if c["prog"] == "slow"]
        check(len(cls) == 1 and cls[0]["allow_unbounded"] is True, "classes --json: %r", cls)
        with open(os.path.join(tm.state, "classes.rc")) as f:
            check("(allow-unbounded TRUE)" in f.read(), "saved with the class")
        # and it runs: a read 10 times the mean is found when the log ends
        reads = ["#cmon-ascii 1"]
        t = 1000
        for i in range(20):
            dur = 500 if i == 7 else 10
            reads += ["%d 1 StartRead 1 %d" % (t, 100 + i % 3), "%d 1 EndRead 1" % (t + dur)]
            t += dur + 5
        log = env.path("slow.log")
        with open(log, "w") as f:
            f.write("\n".join(reads) + "\n")
        s = env.snarflog("slow", reg=reg, cmd=tt.writer_cmd("--file", log, "--linger", "0.5"))
        check(s.wait(30) == 0, "snarflog: %s", s.stderr())
        tm.instance(lambda i: i["prog"] == "slow" and i["state"] == "ended",
                    what="the program to end")
        fails = ct.wait_for(lambda: tm.failures() or None, 20, "the stored failure")
        check(len(fails) == 1 and fails[0]["assert"] == "near the mean" and
              fails[0]["start"] == "15.0",
              "the second pass's verdict is stored: the slow read (records 15-16): %r", fails)
        # a spec file made unbounded after its class was checked is refused
        # when an instance starts: the checker runs with --bounded too
        later = env.path("later.pspec")
        shutil.copy(tt.FSREAD_SPEC, later)
        tm.ctl("class", "add", "prog=later", "spec=" + later)
        shutil.copy(spec, later)
        s = env.snarflog("later", reg=reg, cmd=tt.writer_cmd("--file", log, "--linger", "0.5"))
        check(s.wait(30) == 0, "snarflog: %s", s.stderr())
        inst = tm.instance(lambda i: i["prog"] == "later" and i["state"] == "ended",
                           what="the later program to end")
        ts = ct.wait_for(lambda: (lambda t: t if "refused (--bounded)" in t else None)(
            tm.ctl("typescript", str(inst["id"]))), 10, "the checker's refusal")
        check("needs another aggregate over the whole log first" in ts,
              "the typescript says why: %s", ts)
        check(not [f for f in tm.failures() if f["instance"] == inst["id"]],
              "and nothing was checked: %r", tm.failures())
        tm.stop()


def rc_path(env, name, text):
    path = env.path(name)
    with open(path, "w") as f:
        f.write(text)
    return path


ct.run_test(main)
