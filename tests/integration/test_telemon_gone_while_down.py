"""A snarflog that leaves while its telemonitor is down: the telemonitor
is stopped (SIGSTOP) while the program writes the rest of its log and
exits, so snarflog hands the stream to a consumer that does not read,
gives up on it after -drain and leaves (Leave.records = the log's length).
Then the telemonitor is killed (-9) and started again: it re-attaches the
instance, finds no snarflog, and the registry, which remembers gone
instances a while, tells it the log's length on subscribing. Every record
is accounted: records + lost + skipped + unchecked = written, and the
instance ends. Without the registry's memory, the restarted telemonitor
never learned the length and the rest of the log went uncounted (the
fault matrix's tm_kill_twice row under load)."""
import os
import signal
import time

import cmontest as ct
import telemontest as tt
from cmontest import check

FIRST, TOTAL = 200, 3000


def main():
    with ct.Env("telemon_gone_while_down") as env:
        reg = env.registry()
        rc = tt.rc_class("gwd", tool="cat > /dev/null", block=False)
        tm = tt.Telemonitor(env, reg, rc)
        gate = env.path("gate")
        snarf = env.snarflog("gwd", "-drain", "1", reg=reg, cmd=ct.logwriter_cmd(
            "--count", str(TOTAL), "--batch", "100", "--gate-after", str(FIRST),
            "--gate", gate))
        tm.instance(lambda i: i["prog"] == "gwd" and i["state"] == "monitoring" and
                    i["records"] >= FIRST, what="the first records monitored")
        tm.proc.signal(signal.SIGSTOP)
        open(gate, "w").close()
        check(snarf.wait(30) == 0, "snarflog left: %s", snarf.stderr())
        time.sleep(0.5)                    # (its Leave reaches the registry)
        tm.proc.signal(signal.SIGKILL)
        tm.proc.signal(signal.SIGCONT)
        tm.proc.wait(20)
        tm.start()
        inst = tm.instance(lambda i: i["prog"] == "gwd" and i["state"] in ("ended", "gone"),
                           timeout=30, what="the instance to end after the restart")
        total = inst["records"] + inst["lost"] + inst["skipped"] + inst.get("unchecked", 0)
        check(total == TOTAL, "every record accounted: %r (%d of %d)", inst, total, TOTAL)
        check(inst["lost"] > 0, "the records the stopped telemonitor never read are lost: %r",
              inst)
        print("ended %s: records %d, lost %d, skipped %d, unchecked %d" % (
            inst["state"], inst["records"], inst["lost"], inst["skipped"],
            inst.get("unchecked", 0)))
        tm.stop()


ct.run_test(main)
