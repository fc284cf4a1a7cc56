"""telemonreg: announce, subscribe and notify in both orders; InstanceGone
on Leave (clean) and on a snarflog killed with SIGKILL (unclean); an
unsubscribed class hears nothing more; the auto flag is reflected to the
snarflog in AnnounceAck."""
import signal
import subprocess

import cmontest as ct
from cmontest import check


def main():
    with ct.Env("registry_notify") as env:
        reg = env.registry("-debug")

        # Subscribe first, then a snarflog announces: "up" with new=1.
        early = env.watch("-prog", "demo", reg=reg)
        early.expect("ack", timeout=10)
        w = ct.logwriter_cmd("--count", "10", "--gate-after", "5", "--gate", env.path("go"))
        snarf = env.snarflog("demo", reg=reg, cmd=w)
        up = early.expect("up", **{"new": 1})
        check(up[2] == "demo", "wrong program in %r", up)
        pid = up[4]
        check(up[5].startswith("127.0.0.1:"), "endpoint %r not on loopback", up[5])

        # Subscribe after the announce: "up" with new=0 before the ack, and
        # the ack counts it.
        late = env.watch("-prog", "demo", reg=reg)
        words = late.expect("up", **{"new": 0})
        check(words[4] == pid, "pid %s vs %s", words[4], pid)
        ack = late.expect("ack")
        check(ack[2] == "1", "ack should count 1 existing instance: %r", ack)

        # A class that does not match hears nothing.
        other = env.watch("-prog", "other", reg=reg)
        other.expect("ack")

        # Clean end: the program finishes, snarflog says Leave.
        open(env.path("go"), "w").close()
        check(snarf.wait(20) == 0, "snarflog exit status")
        early.expect("gone", clean=1)
        late.expect("gone", clean=1)
        other.none("up")

        # Unclean end: SIGKILL the snarflog.
        w2 = ct.logwriter_cmd("--count", "1", "--linger", "30")
        s2 = env.snarflog("demo", reg=reg, cmd=w2)
        early.expect("up", new=1)
        s2.kill()
        early.expect("gone", clean=0)

        # Raw protocol: unsubscribe stops notifications; auto flag -> AnnounceAck.
        c = ct.Client(reg.port)
        c.send(ct.m_hello(ct.ROLE_TELEMONITOR) + ct.m_subscribe(7, program="raw*", auto=True))
        c.expect("hello")
        ack = c.expect("subscribe_ack")
        check(ack[1] == [7] and ack.get(2, [0]) == [0], "ack %r", ack)

        s = ct.Client(reg.port)
        s.send(ct.m_hello(ct.ROLE_SNARFLOG) + ct.m_announce("rawprog", endpoint=":4000"))
        s.expect("hello")
        aa = s.expect("announce_ack")
        check(aa.get(2) == [1], "auto subscriber should be reported: %r", aa)
        up = c.expect("instance_up")
        inst = ct.decode(up[2][0])
        check(ct.text(inst[5][0]) == "127.0.0.1:4000",
              "':PORT' endpoint should be filled with the announcer's address: %r", inst[5])
        check(up.get(3) == [1] and up.get(4) == [1], "is_new/auto flags: %r", up)

        c.send(ct.m_unsubscribe(7))
        s2c = ct.Client(reg.port)
        s2c.send(ct.m_hello(ct.ROLE_SNARFLOG) + ct.m_announce("rawprog2", pid=99))
        s2c.expect("hello")
        aa = s2c.expect("announce_ack")
        check(aa.get(2) == [0], "no auto subscriber after unsubscribe: %r", aa)
        c.send(ct.msg("ping", ct.f_varint(1, 5)))
        got = c.expect("pong")
        check(got.get(1) == [5], "pong nonce %r", got)

        # Leave on the raw snarflog: subscriber of 'raw*' unsubscribed, so
        # nothing; the registry keeps serving.
        s.send(ct.msg("leave"))
        s.close()
        s2c.close()
        c.close()
        check(reg.alive(), "registry died")


ct.run_test(main)
