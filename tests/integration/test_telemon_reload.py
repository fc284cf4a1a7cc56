"""telemonitor reload (SIGHUP, issue 33 item 7): the telemonrc file is read
again while a program of class alpha streams a sequence-numbered log (it
waits at gates, and each reload that matters is sent as a gate opens).

  - class beta added: a beta program started after the reload is monitored
    (every record, nothing lost);
  - a file that does not parse, then one whose spec does not: each is
    refused with one log line naming the file and the place, and the
    running classes stay;
  - a class added with telemonctl (classes.rc) stays through them all;
  - alpha removed and beta changed (auto FALSE) in one reload: alpha's
    session goes on to the end of its log (the log counts it), a new beta
    program is only listed;
  - alpha's instance: records + lost + skipped + unchecked = written, lost
    0, and the failures of every multiple of 1000 stored, across all of
    the above."""
import re
import signal

import cmontest as ct
import telemontest as tt
from cmontest import check

COUNT = 40000          # alpha's records
GATES = (10000, 20000, 36000)  # alpha waits at each until the test opens it: each
                       # reload is sent as alpha starts streaming again, and the
                       # last gate holds it until the test is done with it
EVERY = 1000           # failures: records whose seq is a multiple of this

SPEC = """perfspec reload
  event Ev(seq);
  assert "every thousandth": {& e : Ev : e.seq mod %d != 0};
end reload
""" % EVERY

BAD_SPEC = """perfspec broken
  event Ev(seq);
  assert "no type": {& e : Ev : e.nosuch > 0};
end broken
"""


def main():
    with ct.Env("telemon_reload") as env:
        spec, bad = env.path("reload.pspec"), env.path("broken.pspec")
        with open(spec, "w") as f:
            f.write(SPEC)
        with open(bad, "w") as f:
            f.write(BAD_SPEC)
        alpha = tt.rc_class("alpha", spec=spec)
        beta = tt.rc_class("beta", spec=spec)
        reg = env.registry()
        tm = tt.Telemonitor(env, reg, alpha)

        def reload(text, expect):
            """Write the rc file, SIGHUP, wait for the log line `expect`
            (a regex) after the ones already there; returns its match."""
            with open(tm.rc, "w") as f:
                f.write(text)
            before = len(tm.stderr())
            tm.proc.signal(signal.SIGHUP)
            return ct.wait_for(lambda: re.search(expect, tm.stderr()[before:], re.M), 20,
                               "the log to say %r" % expect)

        def classes():
            return [c["prog"] for c in tm.json("classes")]

        # alpha streams for the whole test (paced), held at each gate
        gates = [env.path("gate%d" % k) for k in range(len(GATES))]
        gate_args = []
        for at, path in zip(GATES, gates):
            gate_args += ["--gate-after", str(at), "--gate", path]
        writer = env.snarflog("alpha", reg=reg, cmd=ct.logwriter_cmd(
            "--count", str(COUNT), "--batch", "100", "--pace", "0.005", *gate_args))

        def at_gate(k):
            """alpha's instance once all it wrote before gate k is in; then
            gate k opens (alpha streams again)."""
            inst = tm.instance(lambda i: i["prog"] == "alpha" and i["records"] == GATES[k],
                               timeout=60, what="alpha at %d records" % GATES[k])
            open(gates[k], "w").close()
            return inst

        # add beta while alpha streams
        ainst = at_gate(0)
        m = reload(alpha + beta, r"reload: (\S+): 2 classes \(1 added, 0 changed, 0 removed, "
                   r"1 unchanged\)")
        check(m.group(1) == tm.rc, "reload names %s, not %s", m.group(1), tm.rc)
        check(classes() == ["alpha", "beta"], "classes after adding beta: %r", classes())
        b = env.snarflog("beta", reg=reg, cmd=ct.logwriter_cmd("--count", "3000"))
        check(b.wait(30) == 0, "beta's snarflog: %s", b.stderr())
        binst = tm.instance(lambda i: i["prog"] == "beta" and i["state"] == "ended",
                            what="the beta program monitored to its end")
        check(binst["records"] == 3000 and binst["lost"] == 0 and binst["skipped"] == 0,
              "beta counted: %r", binst)
        check(binst["failures"] == 3, "beta's failures (0, 1000, 2000): %r", binst)
        # (its snarflog may hold what it wrote since for a batch: -batch)
        arun = tm.instance(lambda i: i["id"] == ainst["id"] and i["records"] > ainst["records"],
                           what="alpha streaming on after the reload")
        check(arun["state"] == "monitoring", "alpha still streaming after the reload: %r", arun)

        # a class added live (classes.rc) stays through the reloads below
        tm.ctl("class", "add", "prog=gamma", "spec=" + spec)

        # a file that does not parse: one line naming the file and line
        m = reload(alpha + beta + '(class (prog "gamma") (spek "x"))\n',
                   r"reload: (.*); keeping the running configuration$")
        check(re.match(re.escape(tm.rc) + r":3: error: .*spek", m.group(1)),
              "the reason names the file, line and property: %r", m.group(0))
        check(classes() == ["alpha", "beta", "gamma"], "classes after a bad file: %r",
              classes())
        # a spec that does not check: refused too, before anything changes
        m = reload(alpha + tt.rc_class("beta", spec=bad),
                   r"reload: (.*); keeping the running configuration$")
        check(m.group(1).startswith(tm.rc + ":2: error: spec:") and "nosuch" in m.group(1),
              "the reason names the file, the class's line and the spec's error: %r",
              m.group(0))
        check(classes() == ["alpha", "beta", "gamma"], "classes after a bad spec: %r",
              classes())
        check(tm.proc.alive(), "the telemonitor died on a bad reload")

        # remove alpha (streaming) and change beta to manual, at once
        at_gate(1)
        reload(tt.rc_class("beta", spec=spec, auto=False),
               r"reload: \S+: 2 classes \(0 added, 1 changed, 1 removed, 1 unchanged\); "
               r"1 instances of removed classes monitored until they end")
        check(classes() == ["beta", "gamma"], "classes after removing alpha: %r", classes())
        b2 = env.snarflog("beta", reg=reg, cmd=ct.logwriter_cmd(
            "--count", "100", "--gate-after", "50", "--gate", gates[2]))
        listed = tm.instance(lambda i: i["prog"] == "beta" and i["id"] != binst["id"],
                             what="a second beta program")
        check(listed["state"] == "listed" and not listed["monitor"],
              "beta is manual now: listed only: %r", listed)

        # alpha's session went on: every record counted
        at_gate(2)
        check(writer.wait(120) == 0, "alpha's snarflog: %s", writer.stderr())
        check(b2.wait(30) == 0, "beta's second snarflog: %s", b2.stderr())
        done = tm.instance(lambda i: i["id"] == ainst["id"] and i["state"] == "ended",
                           timeout=60, what="alpha to end")
        unchecked = done.get("unchecked", 0)
        total = done["records"] + done["lost"] + done["skipped"] + unchecked
        check(total == COUNT and done["lost"] == 0,
              "alpha: records %d + lost %d + skipped %d + unchecked %d = %d, not %d: %r",
              done["records"], done["lost"], done["skipped"], unchecked, total, COUNT, done)
        if not unchecked:
            rows = tm.wait_failures(COUNT // EVERY, "--prog", "alpha", "--limit", "1000")
            check(done["failures"] == COUNT // EVERY == len(rows),
                  "alpha's failures: %d stored, %d rows, %d expected", done["failures"],
                  len(rows), COUNT // EVERY)
        check("SIGHUP ignored" not in tm.stderr(), "SIGHUP is still ignored")
        tm.stop()


ct.run_test(main)
