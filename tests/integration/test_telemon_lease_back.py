"""A telemonitor on a PostgreSQL store (Debian's postgresql-15, started by
the test; skipped, never passed, where it cannot start) killed with SIGKILL
and started again, while a transaction still holds its instance's lease.

At start a node claims back the instances its last run held (the lease in
its own name). The claim skips a lease row another transaction has locked
(FOR UPDATE SKIP LOCKED): the server may not have ended the dead run's
last transaction yet, and its fence holds the row. Such a lease is in this
node's name, but the node does not hold it.

  refused    the restarted node says why it did not re-attach the instance
             (its lease is busy), instead of leaving it without a word;
  runs out   the node renews only the leases it holds, so that lease runs
             out (3 s), and the lease scan takes it back, with the node's
             own ledgers ("taken back"). Before, the node renewed every
             lease in its name: this one never ran out, and the instance
             was monitored by nobody, for good;
  counted    every record is counted across the kill and the wait:
             records + lost == written, each failure stored at most once,
             and those after the instance was taken back are all there;
  ended      once the instance's end is committed, its lease is renewed
             no more and runs out (a node renewed every lease it had ever
             held, every second, for as long as it ran).
"""
import subprocess
import time

import cmontest as ct
import pgserver
import telemontest as tt
from cmontest import check

READS, GATE = 1200, 400          # reads written; the gate after this many
SLOW = list(range(20, READS, 40))  # slow reads: failures of "read at most 10 ms"


def main():
    with ct.Env("telemon_lease_back") as env:
        srv = pgserver.start(env)
        url = srv.createdb("fleet")
        reg = env.registry()
        rc = tt.rc_class("lb", spec=tt.FSREAD_SPEC, window="5 after 2")
        tm = tt.Telemonitor(env, reg, rc, name="A", extra=["-store", url, "-node", "A"])

        gate = env.path("gate")
        snarf = env.snarflog("lb", "-drain", "15", reg=reg, cmd=tt.writer_cmd(
            "--reads", READS, "--slow", ",".join(map(str, SLOW)), "--gate-after", GATE,
            "--gate", gate, "--batch", 20, "--pace", 0.005))

        def row():
            out = srv.sql("fleet", "SELECT i.id, l.owner, l.epoch, i.records, i.lost, i.state"
                                   " FROM instances i LEFT JOIN leases l"
                                   " ON l.instance_id = i.id WHERE i.prog = 'lb'").strip()
            return out.split("|") if out else None

        ct.wait_for(lambda: (lambda x: x if x and x[1] == "A" and int(x[3]) >= GATE * 3 - 60
                             else None)(row()), 30, "the first %d reads monitored by A" % GATE)
        iid, epoch = int(row()[0]), int(row()[2])
        tm.proc.kill()
        tm.proc.wait(10)

        # a transaction of its own holds the lease row, as the dead run's
        # last one may still do while the server ends it
        lock = subprocess.Popen(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", url],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            lock.stdin.write("BEGIN;\nSELECT instance_id FROM leases WHERE instance_id = %d"
                             " FOR KEY SHARE;\n" % iid)
            lock.stdin.flush()
            got = lock.stdout.readline().strip()
            check(got == str(iid), "the lease row is locked: %r", got)
            tm.start()
            ct.wait_for(lambda: "(lb on " in tm.stderr() and "not re-attached" in tm.stderr(),
                        20, "the restarted node to say why it did not re-attach")
            check("its lease is busy" in tm.stderr(), "why: %s", tm.stderr()[-2000:])
            # held past a lease, with the node renewing what it holds
            time.sleep(4)
            check("taken back" not in tm.stderr(), "taken back while the row was locked")
            lock.stdin.write("COMMIT;\n")
            lock.stdin.close()
            check(lock.wait(10) == 0, "psql: %s", lock.stderr.read())
        finally:
            if lock.poll() is None:
                lock.kill()
                lock.wait()
        released = time.monotonic()
        try:
            ct.wait_for(lambda: "taken back" in tm.stderr(), 20,
                        "the node to take its instance back once the lease ran out")
        except ct.TestFailure:
            print("leases: %s" % srv.sql("fleet", "SELECT *, now() FROM leases"))
            raise
        took = time.monotonic() - released
        r = row()
        check(r[1] == "A" and int(r[2]) > epoch, "A holds it at a newer epoch: %r", r)

        with open(gate, "w"):
            pass
        check(snarf.wait(60) == 0, "the program ends: %s", snarf.stderr())
        done = ct.wait_for(lambda: (lambda x: x if x and x[5] in ("ended", "gone") else None)
                           (row()), 30, "the instance to end")
        records, lost = int(done[3]), int(done[4])
        check(records + lost == READS * 3, "records %d + lost %d == %d written", records, lost,
              READS * 3)

        # an ended instance's lease is renewed no more: it runs out (no
        # node claims an ended instance), where before every lease a node
        # ever held was renewed every second for as long as it ran
        def ran_out():
            out = srv.sql("fleet", "SELECT lease_until < now() FROM leases"
                                   " WHERE instance_id = %d" % iid).strip()
            return out == "t" or None
        ct.wait_for(ran_out, 15, "the ended instance's lease to run out")
        check(tm.proc.alive(), "the node runs on")

        fails = tm.failures("--limit", "1000")
        tt.check_fsread_failures(fails, READS, SLOW, GATE + 20)
        print("taken back %.1f s after the lock went; records %d, lost %d, failures %d of %d" %
              (took, records, lost, len(fails), len(SLOW)))
        tm.stop()


if __name__ == "__main__":
    ct.run_test(main)
