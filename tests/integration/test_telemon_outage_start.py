"""A program that starts while the telemonitor's PostgreSQL store is down
(Debian's postgresql-15, started by the test and killed with SIGKILL;
skipped, never passed, where it cannot start).

The registry announces the new instance once. The telemonitor cannot
record it in the store then (no row, no id from the server, no lease to
claim), and before, it forgot it, with one line in its log: nobody ever
monitored the program, and its records were counted nowhere. Now it keeps
the announcement and tries again every second; once the server is back
the instance gets its row, is claimed and monitored, and every record is
counted: records + lost == written, lost == 0 (the snarflog held the log
meanwhile: -drain and a buffer big enough), and the telemonitor said
why it waited.

Two telemonitors share the store, as in production: whichever has room
takes the instance once the server is back, and exactly one does."""
import time

import cmontest as ct
import pgserver
import telemontest as tt
from cmontest import check

READS = 600


def main():
    with ct.Env("telemon_outage_start") as env:
        srv = pgserver.start(env)
        url = srv.createdb("fleet")
        srv.sql("postgres", "ALTER DATABASE fleet SET synchronous_commit = on")
        reg = env.registry()
        rc = tt.rc_class("os", spec=tt.FSREAD_SPEC, window="5 after 2")
        tms = {n: tt.Telemonitor(env, reg, rc, name=n, extra=["-store", url, "-node", n])
               for n in ("A", "B")}
        time.sleep(2.5)                      # (both have counted the fleet twice)

        srv.kill()
        for tm in tms.values():
            ct.wait_for(lambda: tm.json("status")["store"]["state"] != "ok", 20,
                        "the telemonitor to notice the store is gone")
        snarf = env.snarflog("os", "-drain", "60", reg=reg, cmd=tt.writer_cmd(
            "--reads", READS, "--slow", "10,300,590", "--batch", 20, "--pace", 0.01))
        ct.wait_for(lambda: all("cannot be recorded in the store" in tm.stderr()
                                for tm in tms.values()), 20,
                    "both telemonitors to say the new instance waits for the store")
        time.sleep(2)
        srv.restart()

        def row():
            out = srv.sql("fleet", "SELECT id, owner, records, lost, state FROM instances"
                                   " WHERE prog = 'os'").strip()
            return out.split("|") if out else None

        check(snarf.wait(90) == 0, "the program ends: %s", snarf.stderr())
        done = ct.wait_for(lambda: (lambda x: x if x and x[4] in ("ended", "gone") else None)
                           (row()), 60, "the instance to be monitored to its end")
        check(done[1] in tms, "a node held it: %r", done)
        check(int(done[2]) == READS * 3 and int(done[3]) == 0,
              "records %s + lost %s == %d written", done[2], done[3], READS * 3)
        streamed = [n for n, tm in tms.items() if "streaming os" in tm.stderr()]
        check(streamed == [done[1]], "exactly its holder streamed it: %r", streamed)
        fails = tms[done[1]].failures()
        check(len(fails) == 3, "the 3 failures, stored once: %r", fails)
        print("held by %s; records %s, lost %s, failures %d" % (done[1], done[2], done[3],
                                                               len(fails)))


if __name__ == "__main__":
    ct.run_test(main)
