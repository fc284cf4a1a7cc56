"""Alertmanager as a receiver, against the real prometheus-alertmanager
(Debian package) on 127.0.0.1 with a temporary configuration, storage and
clustering off:

- a failure of a class with (alertmanager "http://127.0.0.1:PORT") is
  listed by Alertmanager's API (GET /api/v2/alerts) with the labels
  alertname, assert, prog, machine, pid, class and the annotations
  summary, metrics, spec, window (the telemonctl command) and failure;
- when the instance ends, the alert is resolved (POSTed again with
  endsAt): Alertmanager no longer lists it as active;
- a report assertion is not alerted; a silenced failure is not alerted;
- Alertmanager killed (SIGKILL): the next failure's POST fails, stays in
  the store's outbox (status: queued, failed attempts), survives a SIGKILL
  of the telemonitor too, and is delivered once both are back;
- an instance that ended while the telemonitor was stopped has its alert
  resolved after the restart.
Skips (exit 77) with the reason when Alertmanager is not installed or does
not start."""
import time

import amtest
import cmontest as ct
import telemontest as tt
from cmontest import check

SPEC = tt.FSREAD_REPORT_SPEC


def main():
    amtest.require()
    with ct.Env("telemon_alertmanager") as env:
        am = amtest.Alertmanager(env, ct.free_port())
        am.start()
        spec = env.path("am.pspec")
        with open(spec, "w") as f:
            f.write(SPEC)
        reg = env.registry()
        rc = ('(defaults (alertmanager "http://127.0.0.1:%d/"))\n' % am.port +
              tt.rc_class("fsread", spec=spec) +
              tt.rc_class("slowly", spec=spec) +
              tt.rc_class("resolving", spec=spec, extra='(resolve-after "3 s")'))
        tm = tt.Telemonitor(env, reg, rc, extra=["-http", "127.0.0.1:0"])

        # 1. a failure is listed with its labels and annotations; the
        #    instance lingers so the alert stays active for a while
        gate = env.path("gate")
        s = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd(
            "--reads", 6, "--slow", "2", "--gate-after", 5, "--gate", gate))
        fails = tm.wait_failures(1, "--assert", "read at most 10 ms")
        inst = tm.instance(lambda i: i["prog"] == "fsread")
        alerts = ct.wait_for(lambda: am.alerts(alertname="read at most 10 ms", prog="fsread"),
                             15, "the alert listed by Alertmanager")
        a = alerts[0]
        check(a["labels"] == {"alertname": "read at most 10 ms", "assert": "read at most 10 ms",
                              "prog": "fsread", "machine": inst["machine"],
                              "pid": str(inst["pid"]), "class": str(inst["class"])},
              "labels: %r", a["labels"])
        ann = a["annotations"]
        check(ann["failure"] == str(fails[0]["id"]) and
              ann["window"].endswith("window %d" % fails[0]["id"]) and
              "telemonctl -state" in ann["window"] and ann["spec"].endswith("am.pspec:11") and
              "size = 8192" in ann["metrics"] and '"read at most 10 ms" failed' in ann["summary"],
              "annotations: %r", ann)
        http = tm.json("status")["http"]
        check(a.get("generatorURL") == "http://%s/api/v1/failures/%d/window" % (http, fails[0]["id"]),
              "generatorURL links to the window over the HTTP API: %r", a)
        check(a["status"]["state"] == "active", "active: %r", a)
        check(am.alerts(alertname="read stats") == [], "a report assertion is not alerted")
        st = tm.json("status")["alertmanager"]
        check(st["sent"] == 1 and st["queued"] == 0, "status: %r", st)

        # 2. the instance ends: resolved
        open(gate, "w").close()
        check(s.wait(30) == 0, "snarflog: %s", s.stderr())
        ct.wait_for(lambda: am.alerts(alertname="read at most 10 ms", prog="fsread") == [], 15,
                    "the alert resolved once the instance ended")

        # 2b. resolve-after: the alert of a running instance resolves once no
        #     failure of its assertion came for that long (endsAt = the last
        #     failure + 3 s), while the program runs on
        def sent():
            return tm.json("status")["alertmanager"]["sent"]
        sent0 = sent()
        gate2 = env.path("gate2")
        s2 = env.snarflog("resolving", reg=reg, cmd=tt.writer_cmd(
            "--reads", 6, "--slow", "2", "--gate-after", 5, "--gate", gate2))
        tm.wait_failures(1, "--prog", "resolving")
        al = ct.wait_for(lambda: am.alerts(prog="resolving"), 15, "the resolving alert listed")
        check(al[0]["endsAt"] > al[0]["startsAt"], "endsAt after startsAt: %r", al[0])
        t0 = time.monotonic()
        ct.wait_for(lambda: am.alerts(prog="resolving") == [], 20,
                    "the alert resolved after resolve-after, the instance still running")
        print("resolved %.1f s after it was listed (resolve-after 3 s)" % (time.monotonic() - t0))
        ct.wait_for(lambda: sent() == sent0 + 2, 10, "the alert and its resolution sent")
        check(tm.instance(lambda i: i["prog"] == "resolving")["state"] == "monitoring",
              "the instance still runs")
        open(gate2, "w").close()
        check(s2.wait(30) == 0, "snarflog: %s", s2.stderr())

        # 3. silenced: not alerted
        sent1 = sent()
        tm.ctl("silence", "add", "prog=slowly", "-for", "1 hour")   # kept in Alertmanager
        ct.wait_for(lambda: tm.json("status")["alertmanager_silences"] == 1, 15,
                    "the telemonitor has read the silence back")
        s = env.snarflog("slowly", reg=reg, cmd=tt.writer_cmd("--reads", 4, "--slow", "1"))
        check(s.wait(30) == 0, "snarflog: %s", s.stderr())
        f = tm.wait_failures(1, "--prog", "slowly", "--assert", "read at most 10 ms")
        check(f[0]["silenced"], "silenced: %r", f)
        time.sleep(2)
        check(am.alerts(prog="slowly") == [], "a silenced failure is not alerted")
        check(sent() == sent1, "nothing sent for it: %r (%d before)",
              tm.json("status")["alertmanager"], sent1)
        tm.ctl("silence", "rm", str(tm.json("silence", "list")[0]["id"]))
        ct.wait_for(lambda: tm.json("status")["alertmanager_silences"] == 0, 15,
                    "the telemonitor has read that it ended")

        # 4. Alertmanager down: the POST waits in the outbox, across a
        #    SIGKILL of the telemonitor, and goes once Alertmanager is back
        am.proc.kill()
        s = env.snarflog("slowly", reg=reg, cmd=tt.writer_cmd(
            "--reads", 4, "--slow", "1", "--linger", 10))
        n0 = len(tm.failures("--prog", "slowly", "--assert", "read at most 10 ms"))
        tm.wait_failures(n0 + 1, "--prog", "slowly", "--assert", "read at most 10 ms")
        ct.wait_for(lambda: tm.json("status")["alertmanager"]["failed_attempts"] > 0, 15,
                    "a failed POST")
        st = tm.json("status")["alertmanager"]
        check(st["queued"] == 1 and st["last_error"], "status while down: %r", st)
        check("alertmanager: http://127.0.0.1:%d/api/v2/alerts" % am.port in tm.stderr(),
              "logged: %s", tm.stderr()[-2000:])
        time.sleep(0.3)                      # the batch with the outbox row is committed
        tm.proc.kill()
        tm.start()
        check("alertmanager: 1 alert POST to send from before the restart" in tm.stderr(),
              "outbox restored: %s", tm.stderr()[-2000:])
        am.start()
        inst2 = tm.instance(lambda i: i["prog"] == "slowly" and i["state"] != "ended")
        got = ct.wait_for(lambda: am.alerts(alertname="read at most 10 ms", prog="slowly"), 30,
                          "the alert from the outbox once Alertmanager is back")
        check(got[0]["labels"]["pid"] == str(inst2["pid"]), "the right instance: %r", got)
        ct.wait_for(lambda: (st := tm.json("status")["alertmanager"])["sent"] == 1 and
                    st["queued"] == 0, 10, "status: sent, nothing queued")

        # 5. the instance ends while the telemonitor is away: its alert is
        #    resolved after the restart
        tm.stop()
        s.kill()
        tm.start()
        ct.wait_for(lambda: am.alerts(alertname="read at most 10 ms", prog="slowly") == [], 30,
                    "the alert resolved after the instance ended while we were away")
        tm.stop()
        am.proc.kill()


ct.run_test(main)
