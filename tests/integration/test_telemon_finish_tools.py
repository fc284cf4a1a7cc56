"""`telemonitor -finish-tools` (what the systemd unit runs as
ExecStopPost): after a kill -9 of the service, the tools it left running
are given the end of their input, and their ledgers are made right before
anything else is written to them.

  fin    a tool `cat >> FILE`, stopped (SIGSTOP) with records still in its
         pipe when the service is killed: continued, it reads them all and
         ends; every record given to it is in FILE, and the restarted
         service counts exactly those.
  stuck  a tool that never reads (`sleep 600`): killed with its process
         group after the wait; the records it had not read are counted
         lost, and the log says so.

Exit status 0; nothing is left running; a second run has nothing to do."""
import os
import signal
import struct

import cmontest as ct
import telemontest as tt
from cmontest import check


def lines(path):
    with open(path) as f:
        return [ln for ln in f.read().splitlines() if ln and not ln.startswith("#")]


def gone(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def given(path):
    """Event records the tool ledger at `path` says were delivered."""
    try:
        with open(path, "rb") as f:
            head = f.read(56)
    except FileNotFoundError:
        return -1
    return struct.unpack_from("<Q", head, 48)[0] if len(head) == 56 else -1


def main():
    with ct.Env("telemon_finish_tools") as env:
        reg = env.registry()
        out, fin_pid, stuck_pid = env.path("fin.out"), env.path("fin.pid"), env.path("stuck.pid")
        tm = tt.Telemonitor(env, reg,
                            tt.rc_class("fin", block=False,
                                        tool="echo $$ > %s; exec cat >> %s" % (fin_pid, out)) +
                            tt.rc_class("stuck", block=False,
                                        tool="echo $$ > %s; exec sleep 600" % stuck_pid))
        gate = env.path("gate")
        fin = env.snarflog("fin", reg=reg, cmd=tt.writer_cmd(
            "--reads", 300, "--gate-after", 200, "--gate", gate))
        stuck = env.snarflog("stuck", reg=reg, cmd=tt.writer_cmd(
            "--reads", 300, "--gate-after", 200, "--gate", gate))
        for prog in ("fin", "stuck"):
            tm.instance(lambda i, p=prog: i["prog"] == p and i["records"] == 600,
                        what="%s's records" % prog, timeout=60)
        # the telemonitor writes to a tool from its loop, a moment after it
        # took the records in: wait until each tool's ledger (the mmap'd
        # struct ledger_file, `events` at byte 48) says all 600 were given
        for prog in ("fin", "stuck"):
            iid = [i["id"] for i in tm.instances() if i["prog"] == prog][0]
            ct.wait_for(lambda p=os.path.join(tm.state, "tools", "%d-tool.ledger" % iid):
                        given(p) == 600, 30, "%s's tool to be given every record" % prog)
        fpid = int(ct.wait_file(fin_pid).strip())
        spid = int(ct.wait_file(stuck_pid).strip())
        os.killpg(fpid, signal.SIGSTOP)
        tm.proc.kill()

        argv = tm.argv() + ["-finish-tools"]
        run = env.spawn("finish", argv)
        check(run.wait(30) == 0, "-finish-tools: %s", run.stderr())
        log = run.stderr()
        check("instance" in log and "finished its input" in log, "fin finished: %s", log)
        check("did not finish within" in log and "killed (600 records it had not read" in log,
              "stuck killed, its unread records counted: %s", log)
        check(gone(fpid) and gone(spid), "no tool left running")
        check(len(lines(out)) == 600, "fin's tool wrote all 600 records given to it: %d",
              len(lines(out)))
        again = env.spawn("finish2", argv)
        check(again.wait(30) == 0 and "left running" not in again.stderr(),
              "a second run has nothing to do: %s", again.stderr())

        tm.start()
        open(gate, "w").close()
        for snarf in (fin, stuck):
            check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())
        f = tm.instance(lambda i: i["prog"] == "fin" and i["state"] == "ended",
                        what="fin to end", timeout=60)
        check(f["records"] == len(lines(out)) and f["records"] + f["lost"] == 900,
              "fin counted exactly: %r, %d in the file", f, len(lines(out)))
        s = tm.instance(lambda i: i["prog"] == "stuck" and i["state"] == "ended",
                        what="stuck to end", timeout=60)
        check(s["lost"] >= 600 and s["records"] + s["lost"] == 900,
              "stuck: the records its killed tool never read are lost: %r", s)
        tm.stop()


ct.run_test(main)
