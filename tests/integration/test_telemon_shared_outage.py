"""Two telemonitors on one PostgreSQL store (started by the test; skipped,
never passed, where it cannot start), and the server killed with SIGKILL
for longer than a lease while one of them monitors an instance.

While the server is gone nobody can renew a lease, so when it is back
every lease has run out. The owner must keep its instance: a telemonitor
that could not reach the store waits a lease period before it takes any
lease over, so the owners renew theirs first. Then the instance is
monitored by its owner from start to end, the other never streams it,
and every record is counted: records + lost == written, lost == 0 (the
program was held at a gate during the outage)."""
import time

import cmontest as ct
import pgserver
import telemontest as tt
from cmontest import check

READS, GATE = 600, 200


def main():
    with ct.Env("telemon_shared_outage") as env:
        srv = pgserver.start(env)
        url = srv.createdb("fleet")
        # (the test's server acknowledges commits before writing them, for
        # speed; a commit it then loses to kill -9 is no fault of ours)
        srv.sql("postgres", "ALTER DATABASE fleet SET synchronous_commit = on")
        reg = env.registry()
        rc = tt.rc_class("so", spec=tt.FSREAD_SPEC, window="5 after 2")
        tms = {n: tt.Telemonitor(env, reg, rc, name=n, extra=["-store", url, "-node", n])
               for n in ("A", "B")}
        gate = env.path("gate")
        snarf = env.snarflog("so", "-drain", "30", reg=reg, cmd=tt.writer_cmd(
            "--reads", READS, "--slow", "10,100,300,500", "--gate-after", GATE, "--gate", gate,
            "--batch", 20, "--pace", 0.005))

        def row():
            out = srv.sql("fleet", "SELECT id, owner, records, lost, state FROM instances"
                                   " WHERE prog = 'so'").strip()
            return out.split("|") if out else None

        r = ct.wait_for(lambda: (lambda x: x if x and x[1] in tms and int(x[2]) >= GATE * 3
                                 else None)(row()), 30, "the first %d reads monitored" % GATE)
        owner, other = r[1], "B" if r[1] == "A" else "A"

        srv.kill()
        time.sleep(tt_lease() + 3)          # every lease runs out meanwhile
        srv.restart()
        for tm in tms.values():
            ct.wait_for(lambda: tm.json("status")["store"]["state"] == "ok", 60,
                        "the store to recover")
        time.sleep(tt_lease() + 2)          # past the grace period
        with open(gate, "w"):
            pass
        check(snarf.wait(60) == 0, "the program ends: %s", snarf.stderr())
        done = ct.wait_for(lambda: (lambda x: x if x and x[4] in ("ended", "gone") else None)
                           (row()), 40, "the instance to end")
        check(done[1] == owner, "the owner kept it: %r", done)
        check(int(done[2]) == READS * 3 and int(done[3]) == 0,
              "records %s + lost %s == %d", done[2], done[3], READS * 3)
        check("taken over" not in tms[other].stderr() and
              "letting go" not in tms[owner].stderr(),
              "no hand-over: %s / %s", tms[other].stderr()[-2000:], tms[owner].stderr()[-2000:])
        fails = tms[other].failures()
        check(len(fails) == 4, "the 4 failures, stored once: %r", fails)


def tt_lease():
    """STORE_LEASE_S (daemons/telemonitor/store.h)."""
    return 3.0


if __name__ == "__main__":
    ct.run_test(main)
