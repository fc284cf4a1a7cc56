"""TLS on every TCP connection. With -tls-ca, telemonreg and snarflog's
data endpoint accept only peers presenting a certificate the CA signed:
no certificate, a certificate from another CA, or plain TCP are refused
(with a log line), and a fully TLS pipeline (announce, subscribe, fetch)
works end to end. Without a CA, traffic is encrypted and any client may
connect. Certificates are generated for the test with openssl."""
import ssl

import cmontest as ct
from cmontest import check


def py_tls(certs, client=None, verify=True):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if verify:
        ctx.load_verify_locations(certs["ca"])
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if client:
        ctx.load_cert_chain(client["cert"], client["key"])
    return ctx


def refused(port, ctx):
    """True if a TLS client with `ctx` cannot get a Hello answered."""
    try:
        c = ct.Client(port, ssl_context=ctx)
        c.send(ct.m_hello(ct.ROLE_TELEMONITOR))
        got = c.recv(timeout=5)
        c.close()
        return got is None
    except (ssl.SSLError, OSError):
        return True


def main():
    with ct.Env("tls") as env:
        certs = ct.make_certs(env.dir)
        node = dict(certs["node"], ca=certs["ca"])
        other = dict(certs["other"], ca=certs["ca"])
        evil = dict(certs["evil"], ca=certs["ca"])

        # Mutual TLS registry.
        reg = env.registry(tls=node)
        ok = env.watch("-prog", "demo", reg=reg, tls=other)
        ok.expect("ack")
        check(refused(reg.port, py_tls(certs)), "client without a certificate accepted")
        check(refused(reg.port, py_tls(certs, certs["evil"])), "certificate from another CA accepted")
        plain = ct.Client(reg.port)
        plain.send(ct.m_hello(ct.ROLE_TELEMONITOR))
        check(plain.closed(), "plain TCP client accepted")
        ct.wait_for(lambda: "TLS handshake failed" in reg.stderr(), 5, "handshake failure log")
        c = ct.Client(reg.port, ssl_context=py_tls(certs, certs["other"]))
        c.send(ct.m_hello(ct.ROLE_TELEMONITOR))
        c.expect("hello")
        c.close()
        bad = env.sub("-prog", "demo", reg=reg, tls=evil, wait_ready=False)
        check(bad.wait(20) == 1, "cmon-sub with a foreign certificate should fail")

        # The whole pipeline over mutual TLS: snarflog announces over TLS,
        # serves its data endpoint over TLS; an auto subscriber fetches.
        sub = env.sub("-prog", "demo", "-auto", reg=reg, tls=other)
        snarf = env.snarflog("demo", reg=reg, tls=node,
                             cmd=ct.logwriter_cmd("--count", "500", "--linger", "1"))
        up = ok.expect("up", new=1)
        check(up[5].startswith("127.0.0.1:"), "TLS endpoint announced as ':PORT', filled in: %r", up)
        data_port = int(up[5].rsplit(":", 1)[1])
        check(refused(data_port, py_tls(certs)), "data endpoint accepted a client without certificate")
        check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())
        check(sub.wait(30) == 0, "subscriber: %s", sub.stderr())
        with open(sub.out, "rb") as f:
            _h, items = ct.parse_ascii(f.read())
        ct.check_sequence(items, 500)

        # TLS without a CA: encrypted, no client authentication.
        reg2 = env.registry(tls=certs["node"])
        c = ct.Client(reg2.port, ssl_context=py_tls(certs, verify=False))
        c.send(ct.m_hello(ct.ROLE_TELEMONITOR))
        c.expect("hello")
        c.close()
        plain = ct.Client(reg2.port)
        plain.send(ct.m_hello(ct.ROLE_TELEMONITOR))
        check(plain.closed(), "plain TCP client accepted by a TLS registry")
        w = env.watch("-prog", "x", reg=reg2, tls=certs["other"])
        w.expect("ack")

        # A client that verifies refuses a server whose certificate its CA
        # did not sign.
        reg3 = env.registry(tls=dict(certs["evil"]))
        bad = env.sub("-prog", "x", reg=reg3, tls=other, wait_ready=False)
        check(bad.wait(20) == 1, "client accepted a server certificate from another CA")


ct.run_test(main)
