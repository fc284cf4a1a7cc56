"""telemonreg: class patterns with '*' and '?' over program, machine and
pid (empty = any), for instances announced before and after the class;
names and patterns that break DESIGN.md §6 are refused with an Error and
the peer is disconnected, while everyone else is unaffected."""
import cmontest as ct
from cmontest import check

INSTANCES = [
    ("fsread", "alpha", 100),
    ("fswrite", "alpha", 101),
    ("lectern", "beta", 102),
    ("foo", "beta1", 1234),
    ("fooo", "gamma", 5),
    ("net+tool_2", "alpha.example", 77),
]

CLASSES = {
    1: dict(program="fs*"),
    2: dict(program="?oo"),
    3: dict(machine="beta*"),
    4: dict(pid="1??"),
    5: dict(program="*", machine="alpha"),
    6: dict(),
    7: dict(program="lectern", machine="b?ta", pid="102"),
    8: dict(program="nomatch*"),
    9: dict(program="f*o", pid="*"),
    10: dict(machine="*.example"),
}


def expected(cls):
    import fnmatch
    out = set()
    for prog, mach, pid in INSTANCES:
        ok = True
        for key, val in (("program", prog), ("machine", mach), ("pid", str(pid))):
            pat = cls.get(key, "")
            if pat and not fnmatch.fnmatchcase(val, pat):
                ok = False
        if ok:
            out.add(prog)
    return out


def collect(c, nclasses):
    """Read until every class's SubscribeAck arrived; map class -> programs."""
    got, acks = {}, set()
    while len(acks) < nclasses:
        kind, m = c.recv()
        if kind == "instance_up":
            inst = ct.decode(m[2][0])
            got.setdefault(m[1][0], set()).add(ct.text(inst[1][0]))
        elif kind == "subscribe_ack":
            acks.add(m[1][0])
    return got


def main():
    with ct.Env("registry_match") as env:
        reg = env.registry()
        half = len(INSTANCES) // 2
        snarfs = []

        def announce(prog, mach, pid):
            s = ct.Client(reg.port)
            s.send(ct.m_hello(ct.ROLE_SNARFLOG) + ct.m_announce(prog, mach, pid, ":5000"))
            s.expect("hello")
            s.expect("announce_ack")
            snarfs.append(s)

        for inst in INSTANCES[:half]:
            announce(*inst)
        c = ct.Client(reg.port)
        c.send(ct.m_hello(ct.ROLE_TELEMONITOR))
        c.expect("hello")
        for cid, cls in CLASSES.items():
            c.send(ct.m_subscribe(cid, **cls))
        got = collect(c, len(CLASSES))
        for inst in INSTANCES[half:]:
            announce(*inst)
        # Ping as a barrier: everything before the pong has been sent.
        c.send(ct.msg("ping", ct.f_varint(1, 1)))
        while True:
            kind, m = c.recv()
            if kind == "pong":
                break
            check(kind == "instance_up", "unexpected %s", kind)
            got.setdefault(m[1][0], set()).add(ct.text(ct.decode(m[2][0])[1][0]))
        for cid, cls in CLASSES.items():
            want = expected(cls)
            check(got.get(cid, set()) == want, "class %d %r: got %r, want %r", cid, cls,
                  sorted(got.get(cid, set())), sorted(want))

        # Bad names and patterns: Error, disconnect; the others stay.
        bad_announces = ["../etc", "a/b", "-rf", "x y", "$(reboot)", "a..b", "", "x" * 65]
        for name in bad_announces:
            s = ct.Client(reg.port)
            s.send(ct.m_hello(ct.ROLE_SNARFLOG) + ct.m_announce(name, endpoint=":1"))
            s.expect("hello")
            err = s.expect("error")
            check(err.get(1) == [3], "announce %r: error code %r", name, err)
            check(s.closed(), "announce %r: not disconnected", name)
        for mach in ["..", "a;b", "host/x"]:
            s = ct.Client(reg.port)
            s.send(ct.m_hello(ct.ROLE_SNARFLOG) + ct.m_announce("ok", machine=mach, endpoint=":1"))
            s.expect("hello")
            check(s.expect("error").get(1) == [3], "machine %r accepted", mach)
        for ep in ["nohostport", "127.0.0.1:0", "host:99999", "-x:1"]:
            s = ct.Client(reg.port)
            s.send(ct.m_hello(ct.ROLE_SNARFLOG) + ct.m_announce("ok", endpoint=ep))
            s.expect("hello")
            check(s.expect("error").get(1) == [3], "endpoint %r accepted", ep)
        for pat in [dict(program="../x"), dict(machine="a b"), dict(pid="12a"),
                    dict(program="[abc]")]:
            t = ct.Client(reg.port)
            t.send(ct.m_hello(ct.ROLE_TELEMONITOR) + ct.m_subscribe(1, **pat))
            t.expect("hello")
            check(t.expect("error").get(1) == [3], "pattern %r accepted", pat)
            check(t.closed(), "pattern %r: not disconnected", pat)

        # The good subscriber is still served.
        c.send(ct.msg("ping", ct.f_varint(1, 2)))
        check(c.expect("pong").get(1) == [2], "subscriber lost")
        log = reg.stderr()
        check("invalid program name" in log and "127.0.0.1:" in log,
              "registry log should name the peer and the problem:\n%s", log)


ct.run_test(main)
