"""Registry faults: telemonreg killed with SIGKILL and restarted on the same
port learns every running instance again because snarflogs re-announce
(with capped backoff); a snarflog started before any registry exists
announces once one appears. Meanwhile the program is never held up and
its log stays complete for a consumer that connects afterwards."""
import time

import cmontest as ct
from cmontest import check



def main():
    with ct.Env("registry_restart") as env:
        reg = env.registry()
        port = reg.port
        w1 = env.watch("-prog", "demo", reg=reg)
        w1.expect("ack")
        gate = env.path("gate")
        writer = ct.logwriter_cmd("--count", "2000", "--gate-after", "1000", "--gate", gate,
                                  "--report", env.path("report"))
        snarf = env.snarflog("demo", reg=reg, cmd=writer)
        up = w1.expect("up", new=1)
        pid = up[4]

        reg.kill()                                   # SIGKILL, for real
        w1.expect("registry-lost")
        time.sleep(0.5)                              # snarflog is in backoff now
        reg2 = env.registry(port=port)
        w2 = env.watch("-prog", "demo", reg=reg2)
        again = w2.expect("up", timeout=15, new=0)   # re-announced, not new
        check(again[4] == pid, "re-announced pid %s, was %s", again[4], pid)

        # The instance is still fully readable: everything written so far
        # and after is delivered (nothing dropped with a 2M buffer).
        sub = env.sub("-prog", "demo", reg=reg2)
        ct.wait_file(sub.out + ".streaming")
        open(gate, "w").close()
        check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())
        check(sub.wait(30) == 0, "cmon-sub: %s", sub.stderr())
        with open(sub.out, "rb") as f:
            header, items = ct.parse_ascii(f.read())
        ct.check_sequence(items, 2000)
        w2.expect("gone", clean=1)
        check("re-announced" in snarf.stderr(), "snarflog should log the re-announce")

        # A snarflog started before the registry exists.
        port3 = ct.free_port()
        fake = type("R", (), {"addr": lambda self: "127.0.0.1:%d" % port3})()
        writer = ct.logwriter_cmd("--count", "10", "--gate-after", "5", "--gate", gate + "3")
        early = env.snarflog("early", reg=fake, cmd=writer)
        time.sleep(1.0)
        check(early.alive(), "snarflog must keep running without a registry")
        reg3 = env.registry(port=port3)
        w3 = env.watch("-prog", "early", reg=reg3)
        w3.expect("up", timeout=15)
        open(gate + "3", "w").close()
        check(early.wait(30) == 0, "snarflog: %s", early.stderr())
        log = early.stderr()
        check("unreachable" in log, "snarflog should say once that the registry is unreachable:\n%s", log)
        check(log.count("unreachable") == 1, "the warning should not repeat:\n%s", log)


ct.run_test(main)
