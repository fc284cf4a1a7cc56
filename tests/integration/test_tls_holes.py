"""TLS without holes (issue 30, item 6), a row each:

  weak-suites        TLS 1.2 suites without forward secrecy or without AEAD
                     (AES128-SHA, AES256-SHA256, ECDHE-RSA-AES128-SHA) are
                     refused by the registry and by snarflog's data
                     endpoint; ECDHE with AES-GCM or ChaCha20, and TLS 1.3,
                     are served; TLS 1.0 and 1.1 refused
  stalled-handshake  40 connections that never send a ClientHello do not
                     keep the authorized consumer out of snarflog's 17 data
                     slots: it fetches the whole log
  https-stalled      300 stalled handshakes on the HTTPS API: /healthz
                     still answers
  no-fallback        a telemonitor configured for TLS never reads an
                     endpoint announced without TLS: it says why and the
                     endpoint receives not a byte
  unix-plain         telemonreg -listen unix:S with TLS options serves the
                     Unix socket plain (docs/protocol.md §8)
  encrypted-key      an encrypted private key is refused at once with a
                     message, never a pass-phrase prompt
  clean-eof          a TLS client that closes is not logged as an error"""
import os
import socket
import ssl
import subprocess
import threading
import time

import cmontest as ct
import telemontest as tt
from cmontest import check

RESULTS = []


def row(name, ok, detail):
    RESULTS.append((name, ok, detail))
    print("row %-18s %s  %s" % (name, "ok" if ok else "FAILED", detail))
    check(ok, "%s: %s", name, detail)


def rsa_cert(env, certs):
    """An RSA certificate for 127.0.0.1 signed by the test CA (so that
    suites with RSA key exchange could be negotiated at all)."""
    d = env.dir

    def run(*args):
        subprocess.run(["openssl"] + list(args), cwd=d, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "rsa.key", "-out", "rsa.csr",
        "-subj", "/CN=rsa")
    run("x509", "-req", "-in", "rsa.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "rsa.pem", "-days", "2", "-extfile", "san.ext")
    return {"cert": os.path.join(d, "rsa.pem"), "key": os.path.join(d, "rsa.key"),
            "ca": certs["ca"]}


def handshake(port, certs, cipher=None, version=None, client=None):
    """None if a TLS handshake with these settings completes, else why not."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(certs["ca"])
    if client:
        ctx.load_cert_chain(client["cert"], client["key"])
    if cipher:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_ciphers("@SECLEVEL=0:" + cipher)   # raises if we cannot offer it
    if version:
        ctx.set_ciphers("ALL:@SECLEVEL=0")
        ctx.minimum_version = ctx.maximum_version = version
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
                t.do_handshake()
                return None
    except (ssl.SSLError, OSError) as e:
        return str(e) or type(e).__name__


WEAK = ("AES128-SHA", "AES256-SHA256", "ECDHE-RSA-AES128-SHA", "ECDHE-RSA-AES256-SHA384")
STRONG = ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-CHACHA20-POLY1305")


def suites(env, certs, rsa):
    reg = env.registry(tls=rsa)
    snarf = env.snarflog("suites", reg=reg, tls=rsa, cmd=["sleep", "30"])
    client = dict(certs["other"])
    for what, port in (("registry", reg.port), ("data endpoint", snarf.port)):
        weak = {c: handshake(port, certs, cipher=c, client=client) for c in WEAK}
        strong = {c: handshake(port, certs, cipher=c, client=client) for c in STRONG}
        tls13 = handshake(port, certs, client=client)
        old = {v.name: handshake(port, certs, version=v, client=client)
               for v in (ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1)}
        row("weak-suites", all(weak.values()) and not any(strong.values()) and
            tls13 is None and all(old.values()),
            "%s: refused %s; served %s and TLS 1.3; refused %s" % (
                what, [c for c, e in weak.items() if e],
                [c for c, e in strong.items() if not e], [v for v, e in old.items() if e]))
    snarf.kill()


def stalled_handshakes(env, certs):
    node = dict(certs["node"], ca=certs["ca"])
    other = dict(certs["other"], ca=certs["ca"])
    gate = env.path("gate")
    count = 3000
    snarf = env.snarflog("stalled", tls=node, cmd=ct.logwriter_cmd(
        "--count", str(count), "--gate-after", "1", "--gate", gate))
    stalls = [socket.create_connection(("127.0.0.1", snarf.port), timeout=10)
              for _ in range(40)]
    time.sleep(0.5)
    sub = env.sub("-connect", "127.0.0.1:%d" % snarf.port, tls=other)
    ct.wait_file(sub.out + ".streaming", 15)
    open(gate, "w").close()
    check(snarf.wait(60) == 0, "snarflog: %s", snarf.stderr())
    check(sub.wait(30) == 0, "cmon-sub: %s", sub.stderr())
    with open(sub.out, "rb") as f:
        _h, items = ct.parse_ascii(f.read())
    got, lost = ct.check_sequence(items, count)
    closed = 0
    for s in stalls:
        s.settimeout(0.0)
        try:
            if s.recv(1) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except ConnectionError:
            closed += 1
        s.close()
    row("stalled-handshake", got == count and lost == 0,
        "the consumer got %d of %d records, %d lost, with 40 stalled handshakes (%d of "
        "them closed to make room)" % (got, count, lost, closed))


def https_stalled(env, certs):
    reg = env.registry()
    node = dict(certs["node"])
    tm = tt.Telemonitor(env, reg, tt.rc_class("nothing", tool="cat"), name="https",
                        extra=["-http", "127.0.0.1:0", "-http-tls-cert", node["cert"],
                               "-http-tls-key", node["key"]])
    host, port = tm.http_addr()
    socks = []
    for i in range(300):
        socks.append(socket.create_connection((host, port), timeout=10,
                                              source_address=("127.0.0.%d" % (2 + i // 60), 0)))
    time.sleep(0.5)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(certs["ca"])
    answers = []
    for _ in range(5):
        try:
            with socket.create_connection((host, port), timeout=5) as s:
                with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
                    t.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    answers.append(t.recv(100).split(b" ")[1].decode())
        except (OSError, ssl.SSLError, IndexError) as e:
            answers.append(type(e).__name__)
    for s in socks:
        s.close()
    row("https-stalled", all(a == "200" for a in answers),
        "/healthz over HTTPS answered %s with 300 stalled handshakes open" % answers)
    tm.stop()


class Listener:
    """A plain TCP listener counting connections and bytes."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns = self.bytes = 0
        self.stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns += 1
            c.settimeout(2)
            try:
                while True:
                    b = c.recv(4096)
                    if not b:
                        break
                    self.bytes += len(b)
            except OSError:
                pass
            c.close()


def no_fallback(env, certs):
    node = dict(certs["node"], ca=certs["ca"])
    other = dict(certs["other"], ca=certs["ca"])
    reg = env.registry(tls=node)
    tm = tt.Telemonitor(env, reg, tt.rc_class("plain*", tool="cat"), name="fallback",
                        extra=ct.tls_args(other))
    ct.wait_for(lambda: tm.json("status")["registry_state"] == "connected", 10,
                "the registry link over TLS")
    lst = Listener()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(certs["ca"])
    ctx.load_cert_chain(certs["node"]["cert"], certs["node"]["key"])
    a = ct.Client(reg.port, ssl_context=ctx)
    a.send(ct.m_hello(ct.ROLE_SNARFLOG) +
           ct.m_announce("plain1", pid=os.getpid(), endpoint="127.0.0.1:%d" % lst.port,
                         token=os.urandom(32)))
    a.expect("hello")
    a.expect("announce_ack")
    ct.wait_for(lambda: "does not speak TLS" in tm.stderr(), 15, "the refusal said")
    time.sleep(1.0)
    inst = [i for i in tm.instances() if i["prog"] == "plain1"]
    a.close()
    lst.stop = True
    lst.sock.close()
    row("no-fallback", lst.conns == 0 and lst.bytes == 0 and inst and
        "TLS" in inst[0].get("status", ""),
        "the plain endpoint got %d connections, %d bytes; status %r" % (
            lst.conns, lst.bytes, inst[0].get("status") if inst else None))
    tm.stop()


def unix_plain(env, certs):
    node = dict(certs["node"], ca=certs["ca"])
    path = env.path("reg.sock")
    reg = env.registry("-listen", "unix:" + path, tls=node)
    c = ct.Client(None, unix=path)
    c.send(ct.m_hello(ct.ROLE_TELEMONITOR))
    got = c.recv(timeout=5)
    c.close()
    said = [ln for ln in reg.stderr().splitlines() if "listening on unix:" in ln]
    row("unix-plain", got is not None and got[0] == "hello" and said and "plain" in said[0],
        "a plain client on the Unix socket of a TLS registry got %r; it says %r" % (
            got and got[0], said))
    reg.kill()


def encrypted_key(env, certs):
    enc = env.path("enc.key")
    subprocess.run(["openssl", "pkey", "-in", certs["node"]["key"], "-out", enc, "-aes256",
                    "-passout", "pass:secret-pass"], check=True)
    p = env.spawn("telemonreg", [ct.binary("telemonreg"), "-listen", "127.0.0.1:0",
                                 "-tls-cert", certs["node"]["cert"], "-tls-key", enc],
                  stdin=subprocess.PIPE)
    rc = p.wait(10)
    err = p.stderr()
    row("encrypted-key", rc == 1 and "encrypted" in err and "Enter PEM pass phrase" not in err,
        "exit %s: %s" % (rc, err.strip().splitlines()[-1] if err.strip() else ""))


def clean_eof(env, certs):
    node = dict(certs["node"], ca=certs["ca"])
    reg = env.registry(tls=node)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(certs["ca"])
    ctx.load_cert_chain(certs["other"]["cert"], certs["other"]["key"])
    for _ in range(3):
        c = ct.Client(reg.port, ssl_context=ctx)
        c.send(ct.m_hello(ct.ROLE_TELEMONITOR))
        c.expect("hello")
        c.sock.close()                  # no close_notify: an abrupt but ordinary end
    time.sleep(1.0)
    err = reg.stderr()
    row("clean-eof", "unexpected eof" not in err.lower() and "error" not in err.lower(),
        "registry log after 3 TLS clients closed: %r" % err.strip().splitlines()[-1:])
    reg.kill()


def main():
    with ct.Env("tls_holes") as env:
        certs = ct.make_certs(env.dir)
        rsa = rsa_cert(env, certs)
        suites(env, certs, rsa)
        stalled_handshakes(env, certs)
        https_stalled(env, certs)
        no_fallback(env, certs)
        unix_plain(env, certs)
        encrypted_key(env, certs)
        clean_eof(env, certs)
        print("\nTLS rows: %d, %d as expected" % (len(RESULTS), sum(1 for r in RESULTS if r[1])))


ct.run_test(main)
