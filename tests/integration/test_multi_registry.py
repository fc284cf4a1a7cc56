"""Several registries (TELEMONREG_MACHINE=a:p,b:p): snarflog announces to
each and the telemonitor subscribes at each, so programs are found while
any one registry is up. An instance listed by two registries is one
instance (not two), and one registry going away (SIGKILL) does not end
what the other still lists; every record is counted on both sides."""
import os
import socket
import threading

import cmontest as ct
import telemontest as tt
from cmontest import check


class Registries:
    """A list of registries, as -regmachine takes it."""

    def __init__(self, *regs):
        self.regs = regs

    def addr(self):
        return ",".join(r.addr() for r in self.regs)


class Proxy:
    """A TCP relay from a free port to `target` (a registry): closing it cuts
    every connection through it, as a network partition would, while the
    registry itself lives on and sees its peers go."""

    def __init__(self, target):
        self.target = target
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self.socks = []
        threading.Thread(target=self._accept, daemon=True).start()

    def addr(self):
        return "127.0.0.1:%d" % self.port

    def _accept(self):
        while True:
            try:
                a, _ = self.lsock.accept()
            except OSError:
                return
            b = socket.create_connection(("127.0.0.1", self.target.port))
            self.socks += [a, b]
            for x, y in ((a, b), (b, a)):
                threading.Thread(target=self._pump, args=(x, y), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for x in (src, dst):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.lsock.close()
        for x in self.socks:
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            x.close()


def run_program(env, regs, reads):
    s = env.snarflog("fsread", reg=regs, cmd=tt.writer_cmd("--reads", reads, "--slow", "2"))
    check(s.wait(30) == 0, "snarflog: %s", s.stderr())
    return s


def main():
    with ct.Env("multi_registry") as env:
        a, b = env.registry("-debug"), env.registry()
        a_port = a.port
        both = Registries(a, b)
        tm = tt.Telemonitor(env, None, tt.rc_class("fsread", spec=tt.FSREAD_SPEC) +
                            tt.rc_class("idle", spec=tt.FSREAD_SPEC, auto=False),
                            regaddr=both.addr())
        ct.wait_for(lambda: tm.json("status")["registry_state"] == "2 of 2 connected", 15,
                    "both registry links")

        # 1. listed by both registries: one instance, every record
        run_program(env, both, 40)
        first = tm.instance(lambda i: i["state"] == "ended" and i["records"] == 120,
                            what="the first program, ended")
        check(len(tm.instances()) == 1, "one instance, not one per registry: %r",
              tm.instances())

        # 1b. a partition between a program and registry a only: a reports
        # it gone, b still lists it, so it stays listed (an instance is gone
        # once no registry lists it); it is gone when it leaves b too
        proxy = Proxy(a)
        gate0 = env.path("gate0")
        part = env.snarflog("idle", reg=Registries(proxy, b), cmd=tt.writer_cmd(
            "--reads", 10, "--gate-after", 5, "--gate", gate0))
        plisted = tm.instance(lambda i: i["prog"] == "idle" and i["state"] == "listed",
                              what="the partitioned program, listed")
        # b may list it first: cut the relay only once a has it too (under
        # load its announce through the relay can come second)
        ct.wait_for(lambda: "instance up: idle" in a.stderr(), 10,
                    "registry a to list the partitioned program")
        proxy.close()
        ct.wait_for(lambda: "instance gone: idle" in a.stderr(), 10,
                    "registry a to see the partitioned program go")
        tm.ctl("status")    # a round trip: a's InstanceGone, sent first, has been read
        check([i["state"] for i in tm.instances() if i["id"] == plisted["id"]] == ["listed"],
              "gone from one registry, listed by the other: still listed: %r", tm.instances())
        open(gate0, "w").close()
        check(part.wait(30) == 0, "snarflog: %s", part.stderr())
        tm.instance(lambda i: i["id"] == plisted["id"] and i["state"] == "gone",
                    what="the partitioned program gone once b says so too")

        # 2. registry a dies: the telemonitor and snarflog go on through b; a
        # program only listed (manual class) stays listed, since b lists it
        gate = env.path("gate")
        idle = env.snarflog("idle", reg=both, cmd=tt.writer_cmd(
            "--reads", 10, "--gate-after", 5, "--gate", gate))
        listed = tm.instance(lambda i: i["prog"] == "idle" and i["state"] == "listed",
                             what="the manual program, listed")
        a.kill()
        ct.wait_for(lambda: tm.json("status")["registry_state"] == "1 of 2 connected", 15,
                    "the telemonitor to notice a is gone")
        s2 = run_program(env, both, 30)
        check([i["state"] for i in tm.instances() if i["id"] == listed["id"]] == ["listed"],
              "one registry gone does not end what the other lists: %r", tm.instances())
        open(gate, "w").close()
        check(idle.wait(30) == 0, "snarflog: %s", idle.stderr())
        tm.instance(lambda i: i["id"] == listed["id"] and i["state"] == "gone",
                    what="the manual program gone once b says so")
        second = tm.instance(lambda i: i["prog"] == "fsread" and i["id"] != first["id"] and
                             i["state"] == "ended",
                             what="a program started while a is down")
        check(second["records"] == 90 and second["lost"] == 0, "every record: %r", second)
        check("unreachable" in s2.stderr() or "lost the registry" in s2.stderr(),
              "snarflog says a is unreachable: %s", s2.stderr())

        # 3. a comes back, b dies: found through a
        env.registry(port=a_port)
        ct.wait_for(lambda: tm.json("status")["registry_state"] == "2 of 2 connected", 15,
                    "the link to the new a")
        b.kill()
        run_program(env, both, 20)
        third = tm.instance(lambda i: i["prog"] == "fsread" and
                            i["id"] not in (first["id"], second["id"]) and
                            i["state"] == "ended", what="a program started while b is down")
        check(third["records"] == 60 and third["lost"] == 0, "every record: %r", third)
        check(len(tm.instances()) == 5, "five programs, five instances: %r", tm.instances())
        check(len(tm.wait_failures(3)) == 3, "each program's slow read is caught")
        check(tm.stderr().count("registry unavailable at 127.0.0.1:%d" % a_port) == 1,
              "a's outage is logged once: %s", tm.stderr())

        # 4. a bad list is refused with the element named (snarflog still
        # runs the program: it never stands in the program's way)
        for bad, what in (("127.0.0.1:1,,127.0.0.1:2", "''"), ("127.0.0.1:1,[::1", "'[::1'")):
            p = env.spawn("snarflog", [ct.binary("snarflog"), "x", "-regmachine", bad,
                                       "--", "true"])
            check(p.wait(10) == 0 and "registry: bad address " + what in p.stderr(),
                  "%s refused: %s", bad, p.stderr())
        tm.stop()


ct.run_test(main)
