"""telemonitor killed with SIGKILL in the middle of a stream and started
again (as systemd's Restart=always would): it reloads its classes, keeps
what it had stored (failures, windows), and re-attaches to the instance
it was monitoring, which goes on under the same id with a fresh checker;
every record is accounted for. A tool it left running (killed, it cannot
stop them) is finished by its next start: given its end of input for a
moment, then killed with its process group. Under systemd
it says READY=1 and sends watchdog pings (played here by the test, as
test_systemd.py does)."""
import os
import socket
import time

import cmontest as ct
import telemontest as tt
from cmontest import check


def main():
    with ct.Env("telemon_restart") as env:
        reg = env.registry()
        pidfile = env.path("sleeper.pid")
        tm = tt.Telemonitor(env, reg, tt.rc_class("fsread", spec=tt.FSREAD_SPEC) +
                            tt.rc_class("sleeper", block=False,
                                        tool="echo $$ > %s; exec sleep 600" % pidfile))
        sleeper = env.snarflog("sleeper", reg=reg, cmd=tt.writer_cmd("--reads", 5,
                                                                      "--linger", 2))
        tool_pid = int(ct.wait_file(pidfile).strip())
        gate = env.path("gate")
        snarf = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd(
            "--reads", 400, "--slow", "5,350", "--gate-after", 100, "--gate", gate))
        before = tm.wait_failures(1)
        inst = tm.instance(lambda i: i["prog"] == "fsread" and i["records"] == 300,
                           what="the first 100 reads")
        ct.wait_for(lambda: tm.ctl_rc("window", str(before[0]["id"]))[0] == 0, 10, "window")
        window = tm.ctl("window", str(before[0]["id"]))

        tm.proc.kill()                              # SIGKILL, for real
        check(snarf.alive(), "the program goes on")

        notify_path = env.path("notify")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(notify_path)
        notify.settimeout(10)
        tm.start(env={"NOTIFY_SOCKET": notify_path, "WATCHDOG_USEC": "400000"})
        msgs = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sum("WATCHDOG=1" in m for m in msgs) < 2:
            msgs.append(notify.recv(4096).decode())
        check(any("READY=1" in m for m in msgs), "READY=1 among %r", msgs)
        # the tool left behind (it never reads) was killed by the new start
        check(not os.path.exists("/proc/%d" % tool_pid) or
              open("/proc/%d/stat" % tool_pid).read().split()[2] == "Z",
              "the old tool is gone once the telemonitor has started again")
        check("left running by the previous telemonitor did not finish" in tm.stderr(),
              "log: %s", tm.stderr()[-2000:])
        check(sum("WATCHDOG=1" in m for m in msgs) >= 2, "watchdog pings: %r", msgs)

        # state kept: classes, failures, windows
        check([c["prog"] for c in tm.json("classes")] == ["fsread", "sleeper"],
              "classes reloaded")
        check(tm.failures() == before, "failures kept: %r", tm.failures())
        check(tm.ctl("window", str(before[0]["id"])) == window, "window kept")
        # re-attached: same instance, monitored again
        again = tm.instance(lambda i: i["id"] == inst["id"] and i["state"] == "monitoring",
                            what="the instance re-attached")
        check(again["pid"] == inst["pid"], "same instance: %r", again)
        check("re-attaching" in tm.stderr() or "streaming" in tm.stderr(), "log: %s",
              tm.stderr())
        check(len([i for i in tm.instances() if i["prog"] == "fsread"]) == 1,
              "no duplicate instance: %r", tm.instances())

        open(gate, "w").close()
        check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())
        done = tm.instance(lambda i: i["id"] == inst["id"] and i["state"] == "ended",
                           what="the instance to end")
        # every record: checked, or (when the kill came before the checker
        # had said how far it was, {"checked":N}, and that was stored) one
        # of the first 300 its killed predecessor was given, counted unchecked
        # and said in the typescript (docs/protocol.md, "Accounting")
        unchecked = done.get("unchecked", 0)
        check(done["records"] + unchecked == 1200 and done["lost"] == 0 and unchecked <= 300,
              "every record: %r", done)
        if unchecked:
            check("counted as unchecked" in tm.ctl("typescript", str(inst["id"])),
                  "the unchecked records are said")
        after = tm.wait_failures(2)
        _, slow = tt.fsread_records(400, [5, 350])
        check([(f["start_ts"], f["end_ts"]) for f in after] == slow,
              "the slow read after the restart is caught by the new checker: %r", after)
        check(after[1]["instance"] == inst["id"], "under the same instance")
        ts = tm.ctl("typescript", str(inst["id"]))
        check(ts.count("monitoring fsread") == 2, "two runs in the typescript: %r", ts)

        # a clean stop (SIGTERM) exits 0 and leaves no socket behind
        tm.proc.signal(15)
        check(tm.proc.wait(10) == 0, "SIGTERM: %s", tm.stderr())
        check(not os.path.exists(os.path.join(tm.state, "control.sock")), "socket removed")
        notify.close()
        tm.stop()


ct.run_test(main)
