"""A telemonitor on a PostgreSQL store (Debian's postgresql-15, started by
the test; skipped, never passed, where it cannot start) stopped with
SIGSTOP for longer than a lease while it greets a snarflog: between its
challenge and the snarflog's proof, the production shape of an owner that
hangs rather than dies.

When it runs again the proof is waiting. Its leases are unsure until its
next renewal (the instance may be another node's by now), so it reads
nothing: the session, still greeting, waits paused. The renewal says the
lease is still its own, and the session goes on from where it was: the
proof, Start, the whole log. (Only a streaming session used to be resumed:
one paused while greeting stayed "connecting" for good, its log never
read.) The snarflog is telemontest.FakeSnarflog, which can hold its proof
back; the real one answers at once.
"""
import signal
import threading
import time

import cmontest as ct
import pgserver
import telemontest as tt
from cmontest import check

LEASE = 3.0                      # STORE_LEASE_S (daemons/telemonitor/store.h)


def main():
    with ct.Env("telemon_greeting_stop") as env:
        srv = pgserver.start(env)
        url = srv.createdb("fleet")
        reg = env.registry()
        out = env.path("gs.out")
        rc = tt.rc_class("gs", tool="cat > %s" % out)
        tm = tt.Telemonitor(env, reg, rc, name="A",
                            extra=["-store", url, "-node", "A", "-debug"])
        lines, _ = tt.fsread_records(100)
        data = ("\n".join(lines) + "\n").encode()
        header = tt.FSREAD_HEADER.encode()
        stops = []

        def stop_then_prove():
            # challenged: the telemonitor stops past a lease; the proof
            # goes out while it is stopped, and it runs again just after
            tm.proc.signal(signal.SIGSTOP)
            stops.append(time.time())
            time.sleep(LEASE + 1.0)
            threading.Timer(0.3, lambda: tm.proc.signal(signal.SIGCONT)).start()

        fake = tt.FakeSnarflog(reg, "gs", 1, header, [data], before_proof=stop_then_prove)
        try:
            inst = tm.instance(lambda i: i["prog"] == "gs" and i["state"] == "ended",
                               timeout=30, what="the instance monitored to its end")
        finally:
            tm.proc.signal(signal.SIGCONT)
        check(stops, "the telemonitor never challenged the fake snarflog")
        check(not fake.error and fake.sent, "the fake snarflog: %s", fake.error)
        check("leases are unsure" in tm.stderr() and "reading nothing (proof)" in tm.stderr(),
              "the session did not wait for the renewal while greeting: %s",
              tm.stderr()[-3000:])
        check((inst["records"], inst["lost"], inst["skipped"]) == (300, 0, 0),
              "records %s lost %s skipped %s (want 300, 0, 0)", inst["records"], inst["lost"],
              inst["skipped"])
        ct.wait_for(lambda: open(out, "rb").read() == header + data, 10,
                    "the tool to have the whole log")
        fake.close()
        tm.stop()
        print("greeting stop: stopped %.1f s between challenge and proof; the session "
              "waited for the renewal and took the whole log (%d records)" % (
                  LEASE + 1.3, inst["records"]))


ct.run_test(main)
