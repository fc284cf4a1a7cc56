"""telemonitor and a registry that goes away: monitoring sessions are direct
connections to snarflogs, so an instance being monitored is checked to
the end while the registry is down; the telemonitor says once that the
registry is unavailable, reconnects when it is back (SIGKILL, then a new
registry on the same port), subscribes again, and picks up instances that
start afterwards."""
import cmontest as ct
import telemontest as tt
from cmontest import check


def main():
    with ct.Env("telemon_registry_restart") as env:
        reg = env.registry()
        port = reg.port
        tm = tt.Telemonitor(env, reg, tt.rc_class("fsread", spec=tt.FSREAD_SPEC))
        gate = env.path("gate")
        snarf = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd(
            "--reads", 200, "--slow", "150", "--gate-after", 50, "--gate", gate))
        inst = tm.instance(lambda i: i["records"] == 150, what="the first 50 reads")

        reg.kill()                                       # SIGKILL, for real
        ct.wait_for(lambda: "unavailable" in tm.json("status")["registry_state"], 10,
                    "the telemonitor to notice")
        open(gate, "w").close()                          # the log goes on meanwhile
        check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())
        done = tm.instance(lambda i: i["id"] == inst["id"] and i["state"] == "ended",
                           what="the instance to end without a registry")
        check(done["records"] == 600 and done["lost"] == 0, "every record: %r", done)
        check(len(tm.wait_failures(1)) == 1, "the slow read is caught")

        reg2 = env.registry(port=port)
        ct.wait_for(lambda: tm.json("status")["registry_state"] == "connected", 15,
                    "the telemonitor to reconnect")
        check(tm.stderr().count("registry unavailable") == 1,
              "the outage is logged once: %s", tm.stderr())
        check("available again" in tm.stderr(), "and its end: %s", tm.stderr())
        s2 = env.snarflog("fsread", reg=reg2, cmd=tt.writer_cmd("--reads", 30, "--slow", "2"))
        check(s2.wait(30) == 0, "snarflog: %s", s2.stderr())
        tm.instance(lambda i: i["id"] != inst["id"] and i["state"] == "ended" and
                    i["records"] == 90, what="a new instance after the registry restart")
        check(len(tm.wait_failures(2)) == 2, "its failure is stored")
        tm.stop()


ct.run_test(main)
