"""Who may subscribe (issue 30, item 1; docs/protocol.md §8a). A
subscriber receives the instances' tokens, so telemonreg serves a
Subscribe only from an authenticated peer: a local one (Unix socket, or TCP
over loopback, its uid from the kernel's socket table) running as the
registry's own uid, root or an -allow-user; one showing the -secret-file
secret in its Hello; or, with -tls-ca, one whose client certificate
verified. Anyone else gets Error{ERROR_DENIED} naming the ways in, no
InstanceUp and not a byte of any token, and is closed; the refusals are
logged at most once a second, with a count of those not logged. Announcing
needs none of it.

Rows (the hostile subscriber runs as uid 65534, so all but the first need
root; without it the test is skipped after them):
  same-uid        the registry's own uid over 127.0.0.1 and ::1: gets the token
  bad-files       -secret-file / -registry-secret-file too short or missing: exit 2
  other-uid       uid 65534 over TCP (IPv4, IPv6): refused; allowed with
                  -allow-user nobody, and with -allow-user 65534
  secret          uid 65534 with the right secret: allowed; wrong or short: refused
  mutual-tls      uid 65534 with a certificate the CA signed: allowed (TLS, not
                  its uid); TLS without a CA authenticates nobody
  announce        uid 65534 may still announce its own instance
  unix            uid 65534 over the registry's Unix socket (SO_PEERCRED):
                  refused, allowed with -allow-user; root allowed
  log-rate        51 refusals: a line or two, the rest counted in the next line
  telemonitor     a telemonitor running as 65534 with CMON_REGISTRY_SECRET_FILE
                  monitors an instance end to end; without it, it says it is
                  refused (once) and shows it in its status; cmon-sub the same"""
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import time

import cmontest as ct
import telemontest as tt
from cmontest import check

ERROR_DENIED = 6
NOBODY = 65534
SECRET = "correct-horse-battery-staple-42"
# Another user may not reach the test runner's Python (pyenv under /root).
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


class Got:
    """What a client received on one connection: every message in order
    (kind, fields), the raw bytes, and the Error if there was one."""

    def __init__(self, raw):
        self.raw = raw
        frames, _rest = ct.split_frames(raw)
        self.msgs = []
        for body in frames:
            (num, vals), = ct.decode(body).items()
            self.msgs.append((ct.MSG_NAME.get(num, str(num)), ct.decode(vals[0])))
        self.kinds = [k for k, _ in self.msgs]
        self.code, self.text = None, ""
        for k, f in self.msgs:
            if k == "error":
                self.code, self.text = f.get(1, [0])[0], ct.text(f.get(2, [b""])[0])

    def tokens(self):
        return [f.get(5, [b""])[0] for k, f in self.msgs if k == "instance_up"]

    def __repr__(self):
        return "%s %r" % (self.kinds, self.text)


def client_main(spec):
    """Run as another user: open `count` connections, say what `role` says
    (subscribe, announce), read until the answer is complete or the
    registry closes; print each connection's bytes as JSON."""
    out = []
    for _ in range(spec.get("count", 1)):
        ctx = None
        if spec.get("tls"):
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.load_verify_locations(spec["tls"]["ca"])
            if spec["tls"].get("cert"):
                ctx.load_cert_chain(spec["tls"]["cert"], spec["tls"]["key"])
        try:
            c = ct.Client(spec.get("port"), host=spec.get("host", "127.0.0.1"),
                          ssl_context=ctx, unix=spec.get("unix"))
        except (OSError, ssl.SSLError) as e:
            out.append({"failed": str(e)})
            continue
        secret = spec.get("secret")
        if spec["role"] == "announce":
            c.send(ct.m_hello(ct.ROLE_SNARFLOG) +
                   ct.m_announce(spec["program"], token=bytes.fromhex(spec["token"])))
            last = "announce_ack"
        else:
            c.send(ct.m_hello(ct.ROLE_TELEMONITOR,
                              secret=secret.encode() if secret is not None else None) +
                   ct.m_subscribe(1, spec["program"]))
            last = "subscribe_ack"
        raw = b""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:       # an Error is followed by the close
            c.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                chunk = c.sock.recv(65536)
            except socket.timeout:
                break
            except OSError:
                break
            if not chunk:
                break
            raw += chunk
            if last in Got(raw).kinds:
                break
        c.close()
        out.append({"raw": raw.hex()})
    print(json.dumps(out))


def as_user(uid):
    """spawn() arguments that run the program as `uid` (and its group, no
    others). (Popen's user= would drop privileges before spawn()'s own
    preexec, which then cannot import what it needs from root's Python.)"""
    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    return dict(preexec_fn=drop)


def run_client(env, spec, uid=NOBODY):
    """client_main(spec) as `uid`; a Got per connection."""
    kw = as_user(uid) if uid != os.geteuid() else {}
    p = env.spawn("client", [PY, os.path.abspath(__file__), "--client", json.dumps(spec)],
                  stdout=subprocess.PIPE, **kw)
    out, _ = p.p.communicate(timeout=60)
    check(p.p.returncode == 0, "client as uid %d failed: %s", uid, p.stderr())
    res = json.loads(out)
    for r in res:
        check("raw" in r, "client as uid %d could not connect: %s", uid, r.get("failed"))
    return [Got(bytes.fromhex(r["raw"])) for r in res]


def subscribe(env, reg, uid=NOBODY, program="demo", **spec):
    return run_client(env, dict(spec, role="subscribe", port=reg.port, program=program), uid)[0]


def announce(reg, program, token):
    """A fake snarflog (this test's uid) announcing `program` with `token`;
    the instance lives while the returned connection is open."""
    a = ct.Client(reg.port)
    a.send(ct.m_hello(ct.ROLE_SNARFLOG) + ct.m_announce(program, token=token))
    a.expect("hello")
    a.expect("announce_ack")
    return a


def allowed(got, token, what):
    check(got.kinds[:3] == ["hello", "instance_up", "subscribe_ack"],
          "%s: should subscribe and hear of the instance: %r", what, got)
    check(got.tokens() == [token], "%s: should get the instance's token", what)


def refused(got, token, what, *fragments):
    check(got.code == ERROR_DENIED, "%s: should be refused with ERROR_DENIED: %r", what, got)
    check(got.kinds == ["hello", "error"], "%s: nothing but Hello and the Error: %r", what, got)
    check(token not in got.raw, "%s: received token bytes", what)
    check(got.text.startswith("not authorized to subscribe: "), "%s: %r", what, got.text)
    for frag in fragments:
        check(frag in got.text, "%s: %r should say %r", what, got.text, frag)


def secret_file(env, text, owner=None):
    path = env.unique("secret")
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    if owner is not None:
        os.chown(path, owner, owner)
    return path


def has_ipv6():
    try:
        s = socket.socket(socket.AF_INET6)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


def same_uid(env):
    """The registry's own uid (whatever it is) over loopback TCP."""
    token = os.urandom(32)
    reg = env.registry(*(["-listen", "[::1]:0"] if has_ipv6() else []))
    a = announce(reg, "demo", token)
    allowed(subscribe(env, reg, uid=os.geteuid()), token, "same uid over 127.0.0.1")
    if has_ipv6():
        allowed(subscribe(env, reg, uid=os.geteuid(), host="::1"), token, "same uid over ::1")
    w = env.watch("-prog", "demo", reg=reg)
    up = w.expect("up")
    check(up[-1] == "token=" + token.hex(), "cmon-sub gets the token: %r", up)
    a.close()


def bad_files(env):
    """A secret shorter than 16 characters, or no file: exit 2 naming it."""
    short = secret_file(env, "too-short\n")
    for prog, opt in (("telemonreg", "-secret-file"), ("telemonitor", "-registry-secret-file"),
                      ("cmon-sub", "-registry-secret-file")):
        for path in (short, env.path("no-such-file")):
            p = subprocess.run([ct.binary(prog), opt, path], capture_output=True, text=True,
                               timeout=20)
            check(p.returncode == 2 and path in p.stderr,
                  "%s %s %s: exit %d: %s", prog, opt, path, p.returncode, p.stderr)
    p = subprocess.run([ct.binary("telemonitor")], capture_output=True, text=True, timeout=20,
                       env=dict(os.environ, CMON_REGISTRY_SECRET_FILE=short))
    check(p.returncode == 2 and "CMON_REGISTRY_SECRET_FILE" in p.stderr and short in p.stderr,
          "telemonitor with a short CMON_REGISTRY_SECRET_FILE: %d %s", p.returncode, p.stderr)
    p = subprocess.run([ct.binary("telemonreg"), "-allow-user", "no-such-user-cmon"],
                       capture_output=True, text=True, timeout=20)
    check(p.returncode == 2 and "no-such-user-cmon" in p.stderr, "unknown -allow-user: %d %s",
          p.returncode, p.stderr)


def other_uid(env):
    token = os.urandom(32)
    v6 = has_ipv6()
    reg = env.registry(*(["-listen", "[::1]:0"] if v6 else []))
    a = announce(reg, "demo", token)
    refused(subscribe(env, reg), token, "uid 65534", "peer uid 65534 is not allowed",
            "-allow-user", "no verified client certificate", "no shared secret")
    if v6:
        refused(subscribe(env, reg, host="::1"), token, "uid 65534 over ::1", "peer uid 65534")
    ct.wait_for(lambda: "not authorized to subscribe" in reg.stderr(), 5, "the refusal logged")
    allowed(subscribe(env, reg, uid=0), token, "root beside a refused one")
    a.close()
    for who in ("nobody", str(NOBODY)):
        reg2 = env.registry("-allow-user", who)
        a = announce(reg2, "demo", token)
        allowed(subscribe(env, reg2), token, "uid 65534 with -allow-user %s" % who)
        a.close()
    reg3 = env.registry("-allow-user", "12345", "-listen", "[::1]:0") if v6 else None
    if reg3:
        a = announce(reg3, "demo", token)
        refused(subscribe(env, reg3, host="::1"), token, "uid 65534, another -allow-user",
                "peer uid 65534")
        a.close()


def shared_secret(env):
    token = os.urandom(32)
    reg = env.registry("-secret-file", secret_file(env, SECRET + "  \n"))
    a = announce(reg, "demo", token)
    allowed(subscribe(env, reg, secret=SECRET), token, "uid 65534 with the secret")
    refused(subscribe(env, reg, secret=SECRET[:-1] + "X"), token, "a wrong secret",
            "wrong shared secret")
    refused(subscribe(env, reg, secret=SECRET[:-1]), token, "a secret one short",
            "wrong shared secret")
    refused(subscribe(env, reg, secret="short"), token, "a short secret", "wrong shared secret")
    refused(subscribe(env, reg, secret=""), token, "an empty secret")
    refused(subscribe(env, reg), token, "no secret", "no shared secret")
    # A registry without -secret-file takes no secret for one.
    reg2 = env.registry()
    b = announce(reg2, "demo", token)
    refused(subscribe(env, reg2, secret=SECRET), token, "a secret the registry does not have",
            "wrong shared secret")
    a.close()
    b.close()


def mutual_tls(env):
    certs = ct.make_certs(env.dir)
    for name in ("other", "node"):
        for f in certs[name].values():
            os.chmod(f, 0o644)            # for uid 65534 (a throwaway key)
    node = dict(certs["node"], ca=certs["ca"])
    other = dict(certs["other"], ca=certs["ca"])
    token = os.urandom(32)
    reg = env.registry("-debug", tls=node)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(certs["ca"])
    ctx.load_cert_chain(certs["node"]["cert"], certs["node"]["key"])
    a = ct.Client(reg.port, ssl_context=ctx)
    a.send(ct.m_hello(ct.ROLE_SNARFLOG) + ct.m_announce("demo", token=token))
    a.expect("hello")
    a.expect("announce_ack")
    allowed(subscribe(env, reg, tls=other), token, "uid 65534 with a verified certificate")
    ct.wait_for(lambda: "allowed by its client certificate" in reg.stderr(), 5,
                "TLS, not the uid, let it in")
    check("allowed by its uid" not in reg.stderr(), "TLS, not the uid, let it in")
    a.close()
    # TLS without a CA: encrypted, nobody authenticated by it.
    reg2 = env.registry("-debug", tls=dict(certs["node"]))
    plain = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    plain.check_hostname = False
    plain.verify_mode = ssl.CERT_NONE
    b = ct.Client(reg2.port, ssl_context=plain)
    b.send(ct.m_hello(ct.ROLE_SNARFLOG) + ct.m_announce("demo", token=token))
    b.expect("hello")
    b.expect("announce_ack")
    refused(subscribe(env, reg2, tls=dict(certs["other"], ca=certs["ca"])), token,
            "uid 65534 over TLS without a CA", "peer uid 65534", "no verified client certificate")
    allowed(subscribe(env, reg2, uid=0, tls=dict(certs["other"], ca=certs["ca"])), token,
            "root over TLS without a CA (by its uid)")
    ct.wait_for(lambda: "allowed by its uid" in reg2.stderr(), 5, "the uid way logged")
    b.close()


def unauthenticated_announce(env):
    token = os.urandom(32)
    reg = env.registry()
    w = env.watch("-prog", "lonely", reg=reg)
    w.expect("ack")
    got = run_client(env, dict(role="announce", port=reg.port, program="lonely",
                               token=token.hex()))[0]
    check(got.kinds == ["hello", "announce_ack"], "uid 65534 announces: %r", got)
    up = w.expect("up")
    check(up[-1] == "token=" + token.hex(), "its instance goes to the subscriber: %r", up)


def unix_socket(env):
    pub = env.path("pub")
    os.mkdir(pub)
    os.chmod(pub, 0o755)
    path = os.path.join(pub, "reg.sock")
    token = os.urandom(32)
    for allow in ([], ["-allow-user", "nobody"]):
        reg = env.registry("-listen", "unix:" + path, *allow)
        os.chmod(path, 0o666)
        a = announce(reg, "demo", token)
        got = run_client(env, dict(role="subscribe", unix=path, program="demo"))[0]
        if allow:
            allowed(got, token, "uid 65534 on the Unix socket with -allow-user")
        else:
            refused(got, token, "uid 65534 on the Unix socket", "peer uid 65534 is not allowed")
        allowed(run_client(env, dict(role="subscribe", unix=path, program="demo"), uid=0)[0],
                token, "root on the Unix socket")
        a.close()
        reg.signal(15)
        check(reg.wait(10) == 0, "telemonreg: %s", reg.stderr())


def log_rate(env):
    """A burst of 50 refusals, a pause, one more: a line or two, and the
    refusals not logged are counted in the next line: lines + counts = 51."""
    reg = env.registry()
    began = time.monotonic()
    got = run_client(env, dict(role="subscribe", port=reg.port, program="x", count=50))
    burst = time.monotonic() - began
    check(all(g.code == ERROR_DENIED for g in got), "all 50 refused: %r",
          [g for g in got if g.code != ERROR_DENIED][:3])
    time.sleep(1.3)
    refused(subscribe(env, reg), b"\0" * 32, "the 51st")

    def lines():
        return [l for l in reg.stderr().splitlines() if "not authorized to subscribe" in l]
    ct.wait_for(lambda: len(lines()) >= 2, 5, "the line after the pause")
    ls = lines()
    check(len(ls) <= 3 + int(burst), "%d lines for 51 refusals (a burst of %.1f s):\n%s",
          len(ls), burst, "\n".join(ls))
    counts = [int(m.group(1)) for m in
              (re.search(r"\((\d+) more subscribers refused since", l) for l in ls) if m]
    check(counts, "no count of the refusals not logged:\n%s", "\n".join(ls))
    check(len(ls) + sum(counts) == 51, "lines %d + counted %r != 51:\n%s", len(ls), counts,
          "\n".join(ls))


def telemonitor(env):
    """A telemonitor running as uid 65534 with the registry's secret
    (CMON_REGISTRY_SECRET_FILE) monitors an instance end to end; without
    it the registry refuses it, and it says so once, and in its status."""
    reg = env.registry("-secret-file", secret_file(env, SECRET + "\n"))
    state = env.path("tm.state")
    os.mkdir(state)
    os.chown(state, NOBODY, NOBODY)
    setpriv = shutil.which("setpriv")
    if not setpriv:
        ct.skip("no setpriv(1) to run a telemonitor as another user")
    nobody = [setpriv, "--reuid", str(NOBODY), "--regid", str(NOBODY), "--clear-groups"]
    tm = tt.Telemonitor(env, reg, tt.rc_class("fsread", spec=tt.FSREAD_SPEC), state=state,
                        prefix=nobody,
                        environ={"CMON_REGISTRY_SECRET_FILE": secret_file(env, SECRET + "\n",
                                                                          owner=NOBODY)})
    ct.wait_for(lambda: tm.json("status")["registry_state"] == "connected", 10,
                "the registry link")
    s = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd("--reads", 100, "--slow", "10"))
    check(s.wait(30) == 0, "snarflog: %s", s.stderr())
    inst = tm.instance(lambda i: i["state"] == "ended", what="the instance monitored as 65534")
    check(inst["records"] == 300 and inst["lost"] == 0, "complete: %r", inst)
    check(len(tm.wait_failures(1)) == 1, "its failure is stored")
    check("refuses" not in tm.stderr(), "not refused: %s", tm.stderr())
    tm.stop()

    state2 = env.path("tm2.state")
    os.mkdir(state2)
    os.chown(state2, NOBODY, NOBODY)
    bad = tt.Telemonitor(env, reg, tt.rc_class("fsread", spec=tt.FSREAD_SPEC), name="nosecret",
                         state=state2, prefix=nobody)
    state_text = "refused: not authorized to subscribe (retrying)"
    ct.wait_for(lambda: bad.json("status")["registry_state"] == state_text, 10,
                "the refusal in the status")
    time.sleep(3.5)                       # a few more attempts
    said = len(re.findall(r"registry at \S+ refuses our subscriptions", bad.stderr()))
    check(said == 1, "the refusal said %d times:\n%s", said, bad.stderr()[-3000:])
    check("not authorized to subscribe" in bad.stderr(), "the registry's reason: %s",
          bad.stderr())
    check("registry unavailable" not in bad.stderr() and "available again" not in bad.stderr(),
          "a refusal is not an outage: %s", bad.stderr()[-3000:])
    bad.stop()

    # cmon-sub the same: refused (exit 5) without the secret, served with it.
    out, ready = os.path.join(state, "sub.log"), os.path.join(state, "sub.ready")
    fetch = [ct.binary("cmon-sub"), "-prog", "fsread", "-regmachine", reg.addr(), "-auto",
             "-o", out, "-ready", ready, "-timeout", "30"]
    p = env.spawn("cmon-sub", fetch, **as_user(NOBODY))
    check(p.wait(20) == 5, "cmon-sub as 65534 without the secret: %s", p.stderr())
    check(not os.path.exists(ready), "subscribed without the secret")
    sf = secret_file(env, SECRET, owner=NOBODY)
    p = env.spawn("cmon-sub", fetch + ["-registry-secret-file", sf], **as_user(NOBODY))
    ct.wait_file(ready, 10)
    s = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd("--reads", 10))
    check(p.wait(30) == 0, "cmon-sub as 65534 with the secret: %s", p.stderr())
    check(s.wait(30) == 0, "snarflog: %s", s.stderr())
    with open(out) as f:
        check(len([l for l in f if l[:1].isdigit()]) == 30, "the whole log fetched")


def main():
    with ct.Env("registry_auth") as env:
        os.chmod(env.dir, 0o755)          # uid 65534 reaches its sockets and files
        same_uid(env)
        bad_files(env)
        if os.geteuid() != 0:
            ct.skip("the other rows run a subscriber as uid 65534, which needs root")
        other_uid(env)
        shared_secret(env)
        mutual_tls(env)
        unauthenticated_announce(env)
        unix_socket(env)
        log_rate(env)
        telemonitor(env)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--client":
        client_main(json.loads(sys.argv[2]))
    else:
        ct.run_test(main)
