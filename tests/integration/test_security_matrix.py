"""The security matrix (issue 30): each attack a hostile local process can
try, one row each, with the refusal expected and, throughout, an honest
program monitored end to end: nothing lost, nothing skipped, its stream
never taken.

Rows:
  endpoint-silent     a rogue announce names a port that accepts and says
                      nothing: it receives no byte, at most 3 attempts, one
                      log line, the instance given up
  endpoint-garbage    ... a port that answers something else (HTTP): same
  endpoint-registry   ... the registry's own port: same, the registry sees
                      no Hello from the telemonitor
  endpoint-fake-cmon  ... a port speaking CMon without the token (a wrong
                      Proof): it never receives a Start
  endpoint-snarflog   ... the honest snarflog's data port: it cannot prove
                      the rogue's token; its stream goes on
  slot-lockout        100 idle connections reopened as they are closed keep
                      the honest snarflog's slots full while the telemonitor
                      restarts: it re-attaches, nothing lost
  http-slowloris      300 connections sending a header byte now and then:
                      /healthz keeps answering 200
  rogue-subscriber    a subscriber the registry does not know (another
                      uid) gets no token (when run as root; see
                      test_registry_auth for every way in)
A summary table is printed at the end."""
import os
import socket
import threading
import time

import cmontest as ct
import telemontest as tt
from cmontest import check

UNPROVEN_MAX = 3           # TM_UNPROVEN_MAX in daemons/telemonitor/telemonitor.h
RESULTS = []


def row(name, ok, detail):
    RESULTS.append((name, ok, detail))
    print("row %-20s %s  %s" % (name, "ok" if ok else "FAILED", detail))
    check(ok, "%s: %s", name, detail)


class Listener:
    """A TCP listener on 127.0.0.1 standing in for what a rogue announce
    names: counts connections and the bytes they send; `greeting` is sent
    on accept; with `fake_cmon` it speaks CMon without the token (Hello,
    then a wrong Proof to any challenge)."""

    def __init__(self, greeting=b"", fake_cmon=False):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.greeting, self.fake_cmon = greeting, fake_cmon
        self.conns, self.received, self.kinds = 0, b"", []
        self.stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.conns += 1
            threading.Thread(target=self._one, args=(c,), daemon=True).start()

    def _one(self, c):
        c.settimeout(0.2)
        try:
            if self.greeting:
                c.sendall(self.greeting)
            if self.fake_cmon:
                c.sendall(ct.m_hello(ct.ROLE_SNARFLOG))
            buf = b""
            while not self.stop:
                try:
                    chunk = c.recv(65536)
                except socket.timeout:
                    continue
                if not chunk:
                    break
                self.received += chunk
                buf += chunk
                frames, buf = ct.split_frames(buf)
                for body in frames:
                    (num, vals), = ct.decode(body).items()
                    self.kinds.append(ct.MSG_NAME.get(num, str(num)))
                    if self.fake_cmon and num == ct.MSG["hello"]:
                        c.sendall(ct.msg("proof", ct.f_bytes(1, os.urandom(32))))
        except OSError:
            pass
        finally:
            c.close()

    def close(self):
        self.stop = True
        self.sock.close()


def rogue_announce(reg, prog, endpoint):
    """Announce instance `prog` at `endpoint` (with a token of its own)."""
    c = ct.Client(reg.port)
    c.send(ct.m_hello(ct.ROLE_SNARFLOG) +
           ct.m_announce(prog, pid=os.getpid(), endpoint=endpoint, token=os.urandom(32)))
    c.expect("hello")
    c.expect("announce_ack")
    return c


def endpoint_rows(env, reg, tm, honest_snarf):
    """The rogue announces, all at once (each takes up to 3 x 5 s)."""
    silent = Listener()
    garbage = Listener(greeting=b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    fake = Listener(fake_cmon=True)
    targets = {
        "endpoint-silent": "127.0.0.1:%d" % silent.port,
        "endpoint-garbage": "127.0.0.1:%d" % garbage.port,
        "endpoint-registry": "127.0.0.1:%d" % reg.port,
        "endpoint-fake-cmon": "127.0.0.1:%d" % fake.port,
        "endpoint-snarflog": "127.0.0.1:%d" % honest_snarf.port,
    }
    reg_hellos = reg.stderr().count("hello from telemonitor")
    conns = [rogue_announce(reg, "rogue%d" % i, ep) for i, ep in enumerate(targets.values())]
    progs = {name: "rogue%d" % i for i, name in enumerate(targets)}

    def given_up(prog):
        return [i for i in tm.instances() if i["prog"] == prog and i["state"] == "gone"]
    for name, prog in progs.items():
        tm.instance(lambda i, p=prog: i["prog"] == p and i["state"] == "gone", timeout=60,
                    what="%s given up" % name)
    log = tm.stderr()
    for name, prog in progs.items():
        inst = given_up(prog)[0]
        lines = [ln for ln in log.splitlines()
                 if "did not prove it is the snarflog" in ln and "(%s on" % prog in ln]
        ok = len(lines) == 1 and "not the snarflog" in inst["status"]
        detail = "%d log line(s); status %r" % (len(lines), inst["status"])
        if name == "endpoint-silent":
            ok = ok and silent.received == b"" and silent.conns <= UNPROVEN_MAX
            detail += "; %d connections, %d bytes received" % (silent.conns, len(silent.received))
        elif name == "endpoint-garbage":
            ok = ok and garbage.received == b"" and garbage.conns <= UNPROVEN_MAX
            detail += "; %d connections, %d bytes received" % (garbage.conns,
                                                               len(garbage.received))
        elif name == "endpoint-registry":
            n = reg.stderr().count("hello from telemonitor") - reg_hellos
            ok = ok and n == 0
            detail += "; %d hellos at the registry from it" % n
        elif name == "endpoint-fake-cmon":
            ok = ok and "start" not in fake.kinds and fake.conns <= UNPROVEN_MAX
            detail += "; it received %s over %d connections" % (fake.kinds, fake.conns)
        elif name == "endpoint-snarflog":
            ok = ok and "not authorized" not in honest_snarf.stderr()
            detail += "; the honest snarflog refused nobody (no Start came)"
        row(name, ok, detail)
    for c in conns:
        c.close()
    for lst in (silent, garbage, fake):
        lst.close()


def slot_lockout(env, tm, snarf):
    """100 idle connections (more than snarflog's 65 slots), reopened as
    soon as closed, on the honest data endpoint while the telemonitor
    restarts."""
    stop = threading.Event()
    opened = [0]

    def hog():
        while not stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", snarf.port), timeout=2)
                opened[0] += 1
                s.settimeout(0.5)
                while not stop.is_set():
                    try:
                        if s.recv(4096) == b"":
                            break
                    except socket.timeout:
                        continue
                s.close()
            except OSError:
                time.sleep(0.05)
    threads = [threading.Thread(target=hog, daemon=True) for _ in range(100)]
    for t in threads:
        t.start()
    ct.wait_for(lambda: opened[0] >= 100, 10, "the slots taken")
    tm.stop()
    tm.start()
    inst = tm.instance(lambda i: i["prog"] == "honest" and i["state"] == "monitoring",
                       timeout=30, what="the honest instance re-attached under the flood")
    stop.set()
    for t in threads:
        t.join(5)
    row("slot-lockout", True, "re-attached (%d hog connections opened)" % opened[0])
    return inst


def slowloris(env, tm):
    host, port = tm.http_addr()
    socks = []
    for i in range(300):
        try:
            s = socket.create_connection((host, port), timeout=5)
            s.sendall(b"GET /api/v1/status HTTP/1.1\r\n")
            socks.append(s)
        except OSError:
            break
    answers = []
    for i in range(10):
        for s in socks[i * 30:(i + 1) * 30]:
            try:
                s.sendall(b"X")
            except OSError:
                pass
        answers.append(tm.http("/healthz")[0])
        time.sleep(0.2)
    for s in socks:
        s.close()
    row("http-slowloris", all(a == 200 for a in answers),
        "/healthz answered %s with %d slow connections open" % (answers, len(socks)))


def rogue_subscriber(env, reg):
    if os.geteuid() != 0:
        print("row rogue-subscriber   (needs root to act as another uid: see test_registry_auth)")
        return
    import subprocess
    import sys
    code = ("import sys; sys.path.insert(0, %r)\n"
            "import cmontest as ct\n"
            "c = ct.Client(%d)\n"
            "c.send(ct.m_hello(ct.ROLE_TELEMONITOR) + ct.m_subscribe(1, 'honest'))\n"
            "kinds = []\n"
            "while True:\n"
            "    m = c.recv(5)\n"
            "    if m is None: break\n"
            "    kinds.append(m[0])\n"
            "    if m[0] in ('error', 'subscribe_ack'): break\n"
            "print(' '.join(kinds))\n" % (os.path.dirname(os.path.abspath(__file__)), reg.port))
    # (the system's Python: another user may not reach this one's)
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    out = subprocess.run([py, "-c", code], capture_output=True, text=True,
                         timeout=30, preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)))
    kinds = out.stdout.split()
    row("rogue-subscriber", "instance_up" not in kinds and "error" in kinds,
        "uid 65534 got %s" % kinds)


def main():
    with ct.Env("security_matrix") as env:
        reg = env.registry("-debug")
        rc = (tt.rc_class("honest", tool="cat", block=True) +
              tt.rc_class("rogue*", tool="cat", block=False))
        tm = tt.Telemonitor(env, reg, rc, extra=["-http", "127.0.0.1:0"])
        gate = env.path("gate")
        report = env.path("report")
        count = 4000
        snarf = env.snarflog("honest", reg=reg, cmd=ct.logwriter_cmd(
            "--count", str(count), "--batch", "20", "--pace", "0.01", "--gate-after", "2000",
            "--gate", gate, "--report", report))
        tm.instance(lambda i: i["prog"] == "honest" and i["state"] == "monitoring",
                    what="the honest instance monitored")

        endpoint_rows(env, reg, tm, snarf)
        slot_lockout(env, tm, snarf)
        slowloris(env, tm)
        rogue_subscriber(env, reg)

        open(gate, "w").close()
        check(snarf.wait(60) == 0, "the honest program ran to its end: %s", snarf.stderr())
        done = tm.instance(lambda i: i["prog"] == "honest" and i["state"] == "ended",
                           timeout=30, what="the honest instance ended")
        ok = (done["records"] == count and done["lost"] == 0 and done["skipped"] == 0 and
              done.get("unchecked", 0) == 0)
        row("honest-accounting", ok, "records %d of %d, lost %d, skipped %d" % (
            done["records"], count, done["lost"], done["skipped"]))
        tm.stop()
        print("\nsecurity matrix: %d rows, %d refused as expected" % (
            len(RESULTS), sum(1 for r in RESULTS if r[1])))
        for name, ok, detail in RESULTS:
            print("  %-20s %-8s %s" % (name, "ok" if ok else "FAILED", detail))


ct.run_test(main)
