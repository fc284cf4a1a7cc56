"""Bad input on every listening port (telemonreg's and snarflog's data
endpoint): garbage bytes, oversized frames, undecodable messages, a wrong
first message or version, half-open connections that never speak, a
message flood, more connections than allowed. Each bad peer is
disconnected with a log line naming it and the problem; the daemons keep
serving everyone else and the monitored program is not disturbed."""
import socket
import time

import cmontest as ct
from cmontest import check

ATTACKS = [
    ("garbage", b"\xff" * 32, "bad frame length prefix"),
    ("oversized", ct.varint(50 << 20) + b"\x0a", "frame longer than the maximum"),
    ("undecodable", ct.frame(b"\xff\xff\xff\xff"), "undecodable message"),
    ("no hello", ct.m_subscribe(1), "expected hello"),
    ("bad version", ct.m_hello(ct.ROLE_TELEMONITOR, version=99), "unsupported protocol version"),
]


def attack(port, payload):
    """Send `payload`; return True if the peer closed the connection."""
    c = ct.Client(port)
    try:
        c.send(payload)
    except OSError:
        return True
    closed = c.closed(timeout=10)
    c.close()
    return closed


def main():
    with ct.Env("garbage") as env:
        reg = env.registry("-hello-timeout", "1", "-max-conns", "40")
        good = env.watch("-prog", "demo", reg=reg)
        good.expect("ack")
        gate = env.path("gate")
        writer = ct.logwriter_cmd("--count", "3000", "--gate-after", "1000", "--gate", gate,
                                  "--report", env.path("report"))
        snarf = env.snarflog("demo", "-hello-timeout", "1", reg=reg, cmd=writer)
        good.expect("up", new=1)

        for port, who in ((reg.port, reg), (snarf.port, snarf)):
            for name, payload, logline in ATTACKS:
                check(attack(port, payload), "%s: %s not disconnected", who.name, name)
                ct.wait_for(lambda: logline in who.stderr(), 5,
                            "%s log line %r" % (who.name, logline))
            # Half-open: connects, never says anything (or half a frame).
            for payload in (b"", ct.varint(100) + b"x" * 10):
                t0 = time.monotonic()
                check(attack(port, payload), "%s: silent peer not disconnected", who.name)
                check(time.monotonic() - t0 < 8, "silent peer kept too long")
            check(who.alive(), "%s died", who.name)
        check("no hello within 1 s" in reg.stderr(), "registry half-open log")
        check("no hello and start within 1 s" in snarf.stderr(), "snarflog half-open log")
        # Log lines name the peer.
        check("127.0.0.1:" in reg.stderr().split("bad frame length prefix")[0].splitlines()[-1],
              "registry log line should name the peer")

        # A flood of messages on one connection.
        c = ct.Client(reg.port)
        c.send(ct.m_hello(ct.ROLE_TELEMONITOR))
        c.expect("hello")
        try:
            c.send(ct.msg("ping", ct.f_varint(1, 1)) * 30000)
        except OSError:
            pass
        check(c.closed(timeout=10), "flooding peer not disconnected")
        check("flooding" in reg.stderr(), "flood log line")

        # More connections than -max-conns: the extra ones are refused.
        conns = []
        for _ in range(45):
            s = socket.create_connection(("127.0.0.1", reg.port))
            conns.append(s)
        ct.wait_for(lambda: "refused: already" in reg.stderr(), 5, "refusal log line")
        for s in conns:
            s.close()

        # A data consumer that sends garbage after a proper start.
        d = ct.Client(snarf.port)
        d.send(ct.m_hello(ct.ROLE_TELEMONITOR) + ct.m_start(token=snarf.token()) + b"\xff" * 16)
        check(d.closed(), "data peer sending garbage mid-stream not disconnected")

        # Everyone else is still served: the subscriber hears about a new
        # instance and a consumer gets the whole log.
        w2 = ct.logwriter_cmd("--count", "1", "--gate-after", "0", "--gate", gate)
        env.snarflog("demo", reg=reg, cmd=w2)
        good.expect("up", new=1)
        sub = env.sub("-connect", snarf.addr())
        ct.wait_file(sub.out + ".streaming")
        open(gate, "w").close()
        check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())
        check(sub.wait(30) == 0, "consumer: %s", sub.stderr())
        with open(sub.out, "rb") as f:
            _h, items = ct.parse_ascii(f.read())
        first = items[0][1]
        ct.check_sequence(items, 3000 - first, start=first)
        check("written=3000" in open(env.path("report")).read(), "program disturbed")


ct.run_test(main)
