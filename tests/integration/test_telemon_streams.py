"""Streams that go wrong. An instance whose stream another consumer holds
is reported busy and taken over when that consumer lets go (the
telemonitor keeps retrying). A snarflog killed with SIGKILL in the middle
of a stream: the instance ends as gone, what was found so far is kept, and
its checker still reports its end-of-log verdicts."""
import cmontest as ct
import telemontest as tt
from cmontest import check


def main():
    with ct.Env("telemon_streams") as env:
        reg = env.registry()
        tm = tt.Telemonitor(env, reg, tt.rc_class("held", spec=tt.FSREAD_SPEC, auto=False) +
                            tt.rc_class("fsread", spec=tt.FSREAD_SPEC))

        # busy: cmon-sub holds the stream, then lets go
        gate = env.path("gate")
        held = env.snarflog("held", reg=reg, cmd=tt.writer_cmd(
            "--reads", 200, "--gate-after", 20, "--gate", gate))
        sub = env.sub("-connect", "127.0.0.1:%d" % held.port, "-stall")
        ct.wait_file(sub.out + ".streaming")
        inst = tm.instance(lambda i: i["prog"] == "held", what="the held instance")
        tm.ctl("start", str(inst["id"]))
        busy = tm.instance(lambda i: i["id"] == inst["id"] and i["state"] == "busy",
                           what="busy")
        check("another consumer" in busy["status"], "why: %r", busy)
        sub.kill()                                   # it lets go
        tm.instance(lambda i: i["id"] == inst["id"] and i["state"] == "monitoring",
                    timeout=20, what="the stream taken over")
        open(gate, "w").close()
        check(held.wait(30) == 0, "snarflog: %s", held.stderr())
        done = tm.instance(lambda i: i["id"] == inst["id"] and i["state"] == "ended",
                           what="the held instance to end")
        # the 60 records written before the gate went to the stalled consumer
        check(done["records"] == 540 and done["lost"] == 0, "the rest of the log: %r", done)

        # a snarflog killed mid-stream (its program then dies of the broken pipe)
        victim = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd(
            "--reads", 200, "--slow", "5", "--batch", 10, "--pace", 0.2))
        tm.wait_failures(1, "--prog", "fsread")
        v = tm.instance(lambda i: i["prog"] == "fsread", what="the victim")
        victim.kill()
        gone = tm.instance(lambda i: i["id"] == v["id"] and i["state"] == "gone",
                           timeout=20, what="the instance to be gone")
        check(30 <= gone["records"] < 600, "what arrived is counted: %r", gone)
        check(len(tm.failures("--prog", "fsread")) == 1, "the failure is kept")
        ts = tm.ctl("typescript", str(v["id"]))
        check("read at most 10 ms" in ts and "checker exited with status 1" in ts,
              "the checker's verdicts at the end: %r", ts)
        tm.stop()


ct.run_test(main)
