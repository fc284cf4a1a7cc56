"""Who may connect (issue 15, part 3). snarflog's data endpoint serves only
a consumer that shows the instance's token in Start (the registry hands it
to the subscribers whose class matched, in InstanceUp, and nowhere else)
or, with mutual TLS, one whose certificate snarflog's CA verified. Anyone
else gets Error{ERROR_DENIED} and is closed, and nothing about the stream
changes: no block, no consumer, not even who holds the stream is told.
The registry passes on a data endpoint only if it is the announcer's own
address (":PORT", its numeric peer address, loopback from loopback) or a
Unix socket directly in -unix-dir; anything else is refused with an Error
naming the endpoint and a log line, and no subscriber ever hears of it.
A telemonitor keeps the token in its store, so it re-attaches after a
restart even while the registry is down.

Each refusal is checked here, and each legitimate case still works."""
import os
import socket
import ssl
import time

import cmontest as ct
import telemontest as tt
from cmontest import check

ERROR_BAD_NAME, ERROR_DENIED = 3, 6


def expect_error(c, code, *fragments):
    """The peer's next message (after its Hello, if it sends one) is an
    Error with `code` whose text has every fragment; then it closes."""
    kind, f = c.recv()
    if kind == "hello":
        kind, f = c.recv()
    check(kind == "error", "expected an error, got %s %r", kind, f)
    text = ct.text(f.get(2, [b""])[0])
    check(f.get(1, [0])[0] == code, "error code %r (want %d): %s", f.get(1), code, text)
    for frag in fragments:
        check(frag in text, "error %r should mention %r", text, frag)
    check(c.closed(), "connection left open after the error")
    c.close()
    return text


def data_start(port, start, ssl_context=None):
    """Connect to a data endpoint, say Hello and send `start`."""
    c = ct.Client(port, ssl_context=ssl_context)
    c.send(ct.m_hello(ct.ROLE_TELEMONITOR) + start)
    return c


class RawSub:
    """A subscriber speaking the protocol by hand, to see every field the
    registry sends (cmon-sub would hide unknown ones)."""

    def __init__(self, reg, program):
        self.c = ct.Client(reg.port)
        self.c.send(ct.m_hello(ct.ROLE_TELEMONITOR) + ct.m_subscribe(1, program))
        self.c.expect("hello")
        self.c.expect("subscribe_ack")

    def next(self, kind):
        got = self.c.recv()
        check(got is not None and got[0] == kind, "raw subscriber: expected %s, got %r",
              kind, got)
        return got[1]


def token_refusals(env):
    """Start without the token, with a wrong one, or with one of the wrong
    length: refused, and the program never waits for the refused peer."""
    reg = env.registry()
    watch = env.watch("-prog", "authprog", reg=reg)
    watch.expect("ack")
    elsewhere = env.watch("-prog", "someother", reg=reg)
    elsewhere.expect("ack")
    raw = RawSub(reg, "authprog")
    gate, report = env.path("gate"), env.path("report")
    # 16K buffer, and -maxblock 60: a granted block would hold the program
    # for a minute.
    snarf = env.snarflog("authprog", "-buffer", "16K", "-maxblock", "60", reg=reg,
                         cmd=ct.logwriter_cmd("--count", "20000", "--pad", "20",
                                              "--gate-after", "1", "--gate", gate,
                                              "--report", report))
    up = watch.expect("up", new=1)
    token = snarf.token()
    check(len(token) == 32, "a 32-byte token: %r", token)
    check("token=%s" % token.hex() in up, "the matching subscriber got the token: %r", up)
    elsewhere.none("up")

    # The raw view: the token is InstanceUp.token (5), never inside Instance.
    ru = raw.next("instance_up")
    check(ru.get(5) == [token], "InstanceUp.token: %r", ru.get(5))
    inst = ct.decode(ru[2][0])
    check(all(k <= 8 for k in inst), "no token field in Instance: %r", sorted(inst))
    check(token not in ru[2][0], "the token inside Instance")

    port = int(up[5].rsplit(":", 1)[1])
    expect_error(data_start(port, ct.m_start(block=True)), ERROR_DENIED,
                 "not authorized", "no token")
    expect_error(data_start(port, ct.m_start(block=True, token=bytes(32))), ERROR_DENIED,
                 "not authorized", "wrong token")
    expect_error(data_start(port, ct.m_start(block=True, token=token[:31])), ERROR_DENIED,
                 "wrong token")
    expect_error(data_start(port, ct.m_start(block=True, token=token + b"x")), ERROR_DENIED,
                 "wrong token")
    # A refused peer that asked for block and then never reads: it is
    # closed at once, and the program runs on.
    stalled = ct.Client(port)
    stalled.send(ct.m_hello(ct.ROLE_TELEMONITOR) + ct.m_start(block=True))
    ct.wait_for(lambda: snarf.stderr().count("not authorized") >= 5, 5, "five refusal lines")
    check("streaming to it" not in snarf.stderr(), "a refused peer became the consumer")

    # The right token (as the registry gave it) is accepted.
    sub = env.sub("-connect", up[5], "-token", token.hex())
    ct.wait_file(sub.out + ".streaming")
    # While it streams, a stranger learns nothing (an Error, not Busy{holder}).
    holder_hidden = expect_error(data_start(port, ct.m_start()), ERROR_DENIED, "no token")
    check("127.0.0.1" not in holder_hidden, "refusal names the holder: %r", holder_hidden)

    t0 = time.monotonic()
    open(gate, "w").close()
    ct.wait_file(report, 30)
    took = time.monotonic() - t0
    print("the program finished %.1f s after it was let go" % took)   # (never asserted)
    check("written=20000" in open(report).read(), "program disturbed")
    stalled.close()
    check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())
    check(sub.wait(30) == 0, "consumer: %s", sub.stderr())
    with open(sub.out, "rb") as f:
        _h, items = ct.parse_ascii(f.read())
    ct.check_sequence(items, 20000)
    gone = raw.next("instance_gone")
    check(set(gone) <= {1, 2, 3, 4} and token not in gone[2][0], "the token in InstanceGone: %r",
          gone)
    raw.c.close()

    # A consumer with the wrong token from a file, through cmon-sub: exit 5.
    snarf2 = env.snarflog("authprog", cmd=ct.logwriter_cmd("--count", "10", "--linger", "3"))
    bad = env.path("bad.token")
    with open(bad, "w") as f:
        f.write("00" * 32 + "\n")
    sub2 = env.sub("-connect", snarf2.addr(), "-token-file", bad)
    check(sub2.wait(20) == 5, "cmon-sub with a wrong token: %s", sub2.stderr())
    check("not authorized" in sub2.stderr(), "cmon-sub says why: %s", sub2.stderr())
    check(os.stat(snarf2.token_file).st_mode & 0o777 == 0o600, "token file not private")
    sub3 = env.sub("-connect", snarf2.addr())          # the harness reads -token-file
    check(sub3.wait(20) == 0, "cmon-sub with the token file: %s", sub3.stderr())
    check(snarf2.wait(20) == 0, "snarflog: %s", snarf2.stderr())


def tls_peers(env):
    """With a CA, a peer whose certificate it verified needs no token;
    TLS without a CA authenticates nobody, so the token is still needed."""
    certs = ct.make_certs(env.dir)
    node = dict(certs["node"], ca=certs["ca"])

    def py_tls(client=None):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(certs["ca"])
        if client:
            ctx.load_cert_chain(client["cert"], client["key"])
        return ctx

    snarf = env.snarflog("tlsprog", tls=node,
                         cmd=ct.logwriter_cmd("--count", "5", "--linger", "30"))
    c = data_start(snarf.port, ct.m_start(), ssl_context=py_tls(certs["other"]))
    c.expect("hello")
    c.expect("accepted")
    c.close()
    # still refused: a wrong token, even with a good certificate
    expect_error(data_start(snarf.port, ct.m_start(token=bytes(32)),
                            ssl_context=py_tls(certs["other"])), ERROR_DENIED, "wrong token")
    snarf.kill()

    # TLS without a CA: encrypted, but a peer without the token is refused.
    snarf = env.snarflog("tlsprog", tls=certs["node"],
                         cmd=ct.logwriter_cmd("--count", "5", "--linger", "30"))
    plain_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    plain_ctx.check_hostname = False
    plain_ctx.verify_mode = ssl.CERT_NONE
    expect_error(data_start(snarf.port, ct.m_start(), ssl_context=plain_ctx), ERROR_DENIED,
                 "no token")
    c = data_start(snarf.port, ct.m_start(token=snarf.token()), ssl_context=plain_ctx)
    c.expect("hello")
    c.expect("accepted")
    c.close()
    snarf.kill()


def announce(reg, endpoint, program="authevil", token=None):
    c = ct.Client(reg.port)
    c.send(ct.m_hello(ct.ROLE_SNARFLOG) + ct.m_announce(program, endpoint=endpoint, token=token))
    return c


def endpoint_refusals(env):
    """Announces naming someone else's endpoint are refused and never
    reach a subscriber; the announcer's own endpoints still work."""
    unix_dir = env.path("run")
    os.mkdir(unix_dir)
    reg = env.registry("-unix-dir", unix_dir)
    watch = env.watch("-prog", "auth*", reg=reg)
    watch.expect("ack")
    for ep, why in (("unix:/etc/passwd", "not a socket directly in"),
                    ("unix:%s/../etc/passwd" % unix_dir, "not a socket directly in"),
                    ("unix:%s/nosuch.sock" % unix_dir, "No such file"),
                    ("10.255.255.1:25", "not the announcer's own address"),
                    ("192.0.2.1:7000", "not the announcer's own address"),
                    ("0.0.0.0:7000", "not the announcer's own address"),
                    ("evil.example.com:80", "not a numeric address"),
                    ("localhost:7000", "not a numeric address")):
        text = expect_error(announce(reg, ep), ERROR_DENIED, ep, why)
        ct.wait_for(lambda: ep in reg.stderr() and "refused" in reg.stderr(), 5,
                    "log line for %s" % ep)
        print("refused %-28s %s" % (ep, text))
    expect_error(announce(reg, ":7000", token=b"short"), ERROR_BAD_NAME, "token")
    watch.none("up", settle=0.5)

    # The announcer's own endpoints are accepted and passed on as numbers.
    keep = []
    for ep, want in ((":7001", "127.0.0.1:7001"), ("127.0.0.1:7002", "127.0.0.1:7002"),
                     ("[::1]:7003", "[::1]:7003")):
        c = announce(reg, ep, program="authok", token=bytes(range(32)))
        c.expect("hello")
        c.expect("announce_ack")
        keep.append(c)
        up = watch.expect("up", new=1)
        check(up[2] == "authok" and up[5] == want, "passed on %r as %r", ep, up)
        check("token=" + bytes(range(32)).hex() in up, "token passed on: %r", up)
    # An announce from before tokens (none) still works, and none is passed on.
    c = announce(reg, ":7004", program="authold")
    c.expect("hello")
    c.expect("announce_ack")
    keep.append(c)
    check("token=-" in watch.expect("up", new=1), "no token invented")
    for c in keep:
        c.close()

    # A real snarflog on a Unix socket directly in -unix-dir, end to end.
    sock = os.path.join(unix_dir, "authunix.sock")
    sub = env.sub("-prog", "authunix", "-auto", reg=reg)
    snarf = env.snarflog("authunix", "-data-listen", "unix:" + sock, reg=reg,
                         cmd=ct.logwriter_cmd("--count", "300"), wait_port=False)
    up = watch.expect("up", new=1)
    check(up[5] == "unix:" + sock, "unix endpoint passed on: %r", up)
    check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())
    check(sub.wait(30) == 0, "consumer over unix: %s", sub.stderr())
    with open(sub.out, "rb") as f:
        ct.check_sequence(ct.parse_ascii(f.read())[1], 300)

    # Without -unix-dir the same snarflog is refused (and says why).
    reg2 = env.registry()
    watch2 = env.watch("-prog", "auth*", reg=reg2)
    watch2.expect("ack")
    snarf = env.snarflog("authunix", "-data-listen", "unix:" + sock + "2", reg=reg2,
                         cmd=ct.logwriter_cmd("--count", "3", "--linger", "2"),
                         wait_port=False)
    ct.wait_for(lambda: "registry refused us" in snarf.stderr(), 10, "snarflog told why")
    check("no -unix-dir" in snarf.stderr(), "reason: %s", snarf.stderr())
    watch2.none("up")
    snarf.kill()


def non_loopback_address():
    """This host's address on a non-loopback interface, or None."""
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect(("192.0.2.1", 9))
        ip = s.getsockname()[0]
        s.close()
        return None if ip.startswith("127.") else ip
    except OSError:
        return None


def remote_announcer(env):
    """An announcer seen at a non-loopback address may not name loopback
    (or anything but that address); ":PORT" becomes that address."""
    ip = non_loopback_address()
    if not ip:
        print("no non-loopback address here: remote announcer part skipped")
        return
    portfile = env.unique("reg.port")
    reg = env.spawn("telemonreg", [ct.binary("telemonreg"), "-listen", "%s:0" % ip,
                                   "-portfile", portfile])
    port = int(ct.wait_file(portfile).strip())

    def from_ip(ep):
        c = ct.Client.__new__(ct.Client)
        c.sock = socket.create_connection((ip, port), timeout=10, source_address=(ip, 0))
        c.buf = b""
        c.send(ct.m_hello(ct.ROLE_SNARFLOG) + ct.m_announce("authremote", endpoint=ep))
        return c
    expect_error(from_ip("127.0.0.1:7000"), ERROR_DENIED, "not the announcer's own address")
    c = from_ip(":7000")
    c.expect("hello")
    c.expect("announce_ack")
    c.close()
    c = from_ip("%s:7001" % ip)
    c.expect("hello")
    c.expect("announce_ack")
    c.close()
    check(reg.alive(), "registry died")


def telemonitor_keeps_token(env):
    """The telemonitor shows the token it was given; killed and started
    again while the registry is down, it re-attaches with the token it
    kept in its store, and is not refused."""
    reg = env.registry()
    tm = tt.Telemonitor(env, reg, tt.rc_class("authtm", tool="cat", block=False))
    gate = env.path("tm.gate")
    snarf = env.snarflog("authtm", reg=reg, cmd=ct.logwriter_cmd(
        "--count", "400", "--gate-after", "200", "--gate", gate))
    inst = tm.instance(lambda i: i["prog"] == "authtm" and i["records"] == 200,
                       what="the first 200 records")
    tm.proc.kill()
    reg.kill()
    tm.start()
    tm.instance(lambda i: i["id"] == inst["id"] and i["state"] == "monitoring",
                what="the instance re-attached without a registry")
    open(gate, "w").close()
    check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())
    done = tm.instance(lambda i: i["id"] == inst["id"] and i["state"] == "ended",
                       what="the instance ended")
    check(done["records"] + done["lost"] == 400, "every record accounted for: %r", done)
    check("not authorized" not in snarf.stderr(), "telemonitor refused: %s", snarf.stderr())
    tm.stop()


def main():
    with ct.Env("auth_refusals") as env:
        token_refusals(env)
        telemonitor_keeps_token(env)
        tls_peers(env)
        endpoint_refusals(env)
        remote_announcer(env)


ct.run_test(main)
