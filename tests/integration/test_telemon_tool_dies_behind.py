"""A tool that dies while its session is paused for it. The tool reads
nothing at first, so the telemonitor's queue to it fills and the session
stops reading the stream (block TRUE); then it dies. The session must read
on, restart the tool when its backoff is over, and take the log to its end:
before the fix (found by bench/faults/soak.sh) nothing resumed a session
paused for a tool that had died, and the instance never ended. Every
record is accounted for: what the tool saw plus what was lost is what the
program wrote."""
import cmontest as ct
import telemontest as tt
from cmontest import check

READS = 20000


def main():
    with ct.Env("telemon_tool_dies_behind") as env:
        reg = env.registry()
        mark = env.path("first-run")
        # first run: read nothing for a second, then die; later runs read all
        tool = ("if [ ! -e '%s' ]; then : > '%s'; sleep 1; kill -SEGV $$; fi; cat >/dev/null"
                % (mark, mark))
        tm = tt.Telemonitor(env, reg, tt.rc_class("behind", tool=tool))
        prog = env.snarflog("behind", reg=reg, cmd=tt.writer_cmd("--reads", READS, "--batch", 2000))
        check(prog.wait(60) == 0, "snarflog: %s", prog.stderr())
        inst = tm.instance(lambda i: i["prog"] == "behind" and i["state"] == "ended",
                           timeout=30, what="the instance to end after its tool died behind")
        check(inst["tool_restarts"] >= 1, "the tool was restarted: %r", inst)
        check(inst["records"] + inst["lost"] == 3 * READS,
              "every record accounted for: %r (written %d)", inst, 3 * READS)
        ts = tm.ctl("typescript", str(inst["id"]))
        check("tool killed by signal 11" in ts and "tool restarted (run 2)" in ts,
              "death and restart in the typescript: %r", ts)
        tm.stop()


ct.run_test(main)
