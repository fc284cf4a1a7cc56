"""telemonitor, auto vs manual classes. An instance of an `auto` class is
monitored at once and from its first record (its first read fails and is
caught; every record arrives, nothing skipped or lost). An instance of a
manual class is only listed until `telemonctl start`; then its checker
runs on what the snarflog still holds; `telemonctl stop` ends monitoring.
Tools get M_PROG, M_MACHINE and M_PID in their environment, and their
output is the instance's typescript. A class with neither a tool nor a
spec (appendix C.1: unset texts are empty) is accepted; monitoring its
instances counts their log."""
import cmontest as ct
import telemontest as tt
from cmontest import check


def main():
    with ct.Env("telemon_auto_manual") as env:
        reg = env.registry()
        rc = (tt.rc_class("fsread", spec=tt.FSREAD_SPEC, auto=True) +
              tt.rc_class("manual", auto=False,
                          tool='echo "tool for $M_PROG on $M_MACHINE pid $M_PID"; grep -c Read') +
              tt.rc_class("bare", auto=True))
        tm = tt.Telemonitor(env, reg, rc)
        classes = tm.json("classes")
        check([c["prog"] for c in classes] == ["fsread", "manual", "bare"], "classes: %r", classes)
        check(classes[0]["auto"] and not classes[1]["auto"], "auto flags: %r", classes)

        # auto: from the very first record (read 0 is slow)
        snarf = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd("--reads", 300,
                                                                  "--slow", "0,150"))
        check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())
        inst = tm.instance(lambda i: i["prog"] == "fsread" and i["state"] == "ended",
                           what="the fsread instance to end")
        check(inst["records"] == 900, "records captured: %r", inst)
        check(inst["skipped"] == 0 and inst["lost"] == 0, "nothing skipped or lost: %r", inst)
        fails = tm.wait_failures(2, "--prog", "fsread")
        got = sorted(f["start_ts"] for f in fails if f["assert"] == "read at most 10 ms")
        _, slow = tt.fsread_records(300, [0, 150])
        check(got == [s for s, _ in slow], "slow reads caught %r, expected %r", got, slow)
        check(len(fails) == 2, "only the two slow reads fail: %r", fails)

        # neither tool nor spec: the log is taken and counted, nothing runs
        bare = env.snarflog("bare", reg=reg, cmd=tt.writer_cmd("--reads", 100))
        check(bare.wait(30) == 0, "snarflog: %s", bare.stderr())
        binst = tm.instance(lambda i: i["prog"] == "bare" and i["state"] == "ended",
                            what="the bare instance to end")
        check(binst["records"] == 300 and binst["lost"] == 0, "bare instance counted: %r", binst)
        ts = tm.ctl("typescript", str(binst["id"]))
        check(all(l.startswith("[telemonitor ") for l in ts.splitlines()),
              "no tool: only the telemonitor's own notes in the typescript: %r", ts)

        # manual: listed, not monitored, until started
        gate = env.path("gate")
        man = env.snarflog("manual", reg=reg, cmd=tt.writer_cmd(
            "--reads", 50, "--gate-after", 20, "--gate", gate))
        minst = tm.instance(lambda i: i["prog"] == "manual", what="the manual instance")
        check(minst["state"] == "listed" and not minst["monitor"], "listed only: %r", minst)
        check("telemonctl start %d" % minst["id"] in minst["status"], "hint: %r", minst)
        check(minst["records"] == 0, "nothing read yet: %r", minst)
        out = tm.ctl("start", str(minst["id"]))
        check("monitoring started" in out, "start: %r", out)
        tm.instance(lambda i: i["id"] == minst["id"] and i["state"] == "monitoring",
                    what="monitoring after start")
        rc_, _, err = tm.ctl_rc("start", str(minst["id"]))
        check(rc_ == 1 and "already being monitored" in err, "start twice: %d %r", rc_, err)
        open(gate, "w").close()
        check(man.wait(30) == 0, "snarflog: %s", man.stderr())
        done = tm.instance(lambda i: i["id"] == minst["id"] and i["state"] == "ended",
                           what="the manual instance to end")
        check(done["records"] == 150, "all 150 records (held by snarflog): %r", done)
        ts = tm.ctl("typescript", str(minst["id"]))
        check("tool for manual on " in ts and " pid %d" % minst["pid"] in ts,
              "M_* in the environment: %r", ts)
        check("\n100\n" in ts, "the tool saw all 100 StartRead and EndRead records: %r", ts)

        # stop: an instance being monitored goes back to listed/stopped
        gate2 = env.path("gate2")
        man2 = env.snarflog("manual", reg=reg, cmd=tt.writer_cmd(
            "--reads", 50, "--gate-after", 10, "--gate", gate2))
        m2 = tm.instance(lambda i: i["prog"] == "manual" and i["state"] == "listed",
                         what="a second manual instance")
        tm.ctl("start", str(m2["id"]))
        tm.instance(lambda i: i["id"] == m2["id"] and i["records"] == 30,
                    what="the first 10 reads")
        out = tm.ctl("stop", str(m2["id"]))
        check("stopping" in out, "stop: %r", out)
        st = tm.instance(lambda i: i["id"] == m2["id"] and i["state"] == "stopped",
                         what="stopped")
        check(not st["monitor"], "not wanted any more: %r", st)
        rc_, _, err = tm.ctl_rc("stop", str(m2["id"]))
        check(rc_ == 1 and "not being monitored" in err, "stop twice: %d %r", rc_, err)
        open(gate2, "w").close()
        check(man2.wait(30) == 0, "the program is not held up: %s", man2.stderr())
        tm.stop()


ct.run_test(main)
