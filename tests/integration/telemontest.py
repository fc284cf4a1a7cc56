"""Helpers for the telemonitor's black-box tests (test_telemon_*.py), on top
of cmontest.py: start a telemonitor with a configuration written by the
test, ask it things with telemonctl, and generate logs whose failures are
known in advance.

    with cmontest.Env("x") as env:
        reg = env.registry()
        tm = telemontest.Telemonitor(env, reg, '(class (prog "fsread") ...)')
        snarf = env.snarflog("fsread", reg=reg, cmd=telemontest.writer_cmd(...))
        fails = tm.wait_failures(3)

Also a log writer (python3 telemontest.py write ...) that snarflog runs as
the monitored program, writing an fsread log (config/examples/fsread.pspec)
to CMON_LOG_FD with chosen slow reads, optional gates and pacing.
"""

import email
import hashlib
import hmac
import json
import os
import socket
import subprocess
import sys
import threading
import time
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)   # both deprecated in 3.11
    import asyncore
    import smtpd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmontest as ct  # noqa: E402
from cmontest import check  # noqa: E402

EXAMPLES = os.path.join(ct.SOURCE, "config", "examples")
FSREAD_SPEC = os.path.abspath(os.path.join(EXAMPLES, "fsread.pspec"))
LECTERN_SPEC = os.path.abspath(os.path.join(ct.SOURCE, "tests", "lang", "lectern.pspec"))
LECTERN_LOG = os.path.abspath(os.path.join(ct.SOURCE, "tests", "lang", "lectern.log"))

# fsread with a report assertion beside an alert (alert hygiene, Alertmanager)
FSREAD_REPORT_SPEC = """perfspec fsread
  timed event StartRead(tid, size);
              EndRead(tid);
  event CacheHit(tid);
  interval Read =
    s: StartRead, e: EndRead where e.tid = s.tid
  metrics
    time = ts(e) - ts(s),
    size = s.size
  end Read;
  assert "read at most 10 ms": {& r : Read : r.time <= 10 ms};
  assert "read stats": {& r : Read : false};
end fsread
"""

MS = 1000000          # ticks per millisecond in the fsread logs (tick-ns 1)


class MailSink(smtpd.SMTPServer):
    """A local SMTP relay on 127.0.0.1:PORT (0: the kernel's choice), served
    from a thread until close(); keeps every message it is given
    (email.message.Message), in order, in .messages."""

    def __init__(self, port=0):
        super().__init__(("127.0.0.1", port), None, decode_data=False)
        self.port = self.socket.getsockname()[1]
        self.messages = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            asyncore.loop(timeout=0.05, count=1)

    def process_message(self, peer, mailfrom, rcpttos, data, **kw):
        self.messages.append(email.message_from_bytes(data))

    def close(self):
        self._stop.set()
        self._thread.join()
        super().close()


class Telemonitor:
    """A running telemonitor with its own state directory and rc file."""

    def __init__(self, env, reg, rc_text, name="tm", extra=(), state=None, wait=True,
                 regaddr=None, environ=None, prefix=()):
        self.env = env
        self.reg = reg
        self.state = state or env.path(name + ".state")
        self.rc = env.path(name + ".rc")
        self.name = name
        self.extra = list(extra)
        self.prefix = list(prefix)      # a wrapper command (faketime ...)
        self.regaddr = regaddr or (reg.addr() if reg else "127.0.0.1:9")
        if rc_text is not None:
            with open(self.rc, "w") as f:
                f.write(rc_text)
        self.proc = None
        self.environ = environ
        self.start(wait=wait, env=environ)

    def argv(self):
        return self.prefix + [ct.binary("telemonitor"), "-rc", self.rc, "-state", self.state,
                "-regmachine", self.regaddr, "-pcheck", ct.binary("pcheck"),
                "-debug"] + self.store_args() + self.extra

    def store_args(self):
        """With CMON_TEST_STORE=postgresql (the pg.* ctest entries), the
        store is a database of its own on a PostgreSQL server the test's
        Env starts once (pgserver.py): one per state directory, so a
        telemonitor started again on the same state finds its data."""
        if os.environ.get("CMON_TEST_STORE") != "postgresql" or "-store" in self.extra:
            return []
        import pgserver
        srv = getattr(self.env, "pg", None)
        if srv is None:
            srv = self.env.pg = pgserver.start(self.env)
            self.env.pg_dbs = {}
        db = self.env.pg_dbs.get(self.state)
        if db is None:
            db = self.env.pg_dbs[self.state] = "tm%d" % len(self.env.pg_dbs)
            srv.createdb(db)
        return ["-store", srv.url(db)]

    def start(self, wait=True, env=None):
        """Start (or restart) the service; wait until it answers telemonctl."""
        self.proc = self.env.spawn("telemonitor", self.argv(), env=env)
        if wait:
            self.wait_ready()
        return self.proc

    def wait_ready(self, timeout=15):
        def ready():
            if not self.proc.alive():
                raise ct.TestFailure("telemonitor exited: %s" % self.proc.stderr())
            return "ready (" in self.proc.stderr() and self.ctl_rc("status")[0] == 0
        ct.wait_for(ready, timeout, "telemonitor to start")

    def stderr(self):
        return self.proc.stderr()

    def stop(self):
        """SIGTERM: a clean exit (status 0), and nothing from the sanitizers
        when built with them (leaks are reported at exit)."""
        self.proc.signal(15)
        status = self.proc.wait(20)
        err = self.stderr()
        check(status == 0, "telemonitor exit status %s after SIGTERM: %s", status, err[-3000:])
        for bad in ("runtime error", "AddressSanitizer", "LeakSanitizer"):
            check(bad not in err, "telemonitor: %s:\n%s", bad, err[-6000:])

    def ctl_rc(self, *args):
        """Run telemonctl; return (exit status, stdout, stderr)."""
        p = subprocess.run([ct.binary("telemonctl"), "-state", self.state] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")

    def ctl(self, *args):
        """telemonctl ARGS that must succeed; its standard output."""
        rc, out, err = self.ctl_rc(*args)
        check(rc == 0, "telemonctl %s: exit %d: %s", " ".join(args), rc, err)
        return out

    def json(self, *args):
        return json.loads(self.ctl(*(list(args) + ["--json"])))

    def failures(self, *args):
        return self.json("failures", *args)

    def wait_failures(self, n, *args, timeout=20):
        """Wait until at least `n` failures (matching args) are stored."""
        return ct.wait_for(lambda: (lambda f: f if len(f) >= n else None)(self.failures(*args)),
                           timeout, "%d failures" % n)

    def http_addr(self, timeout=10):
        """(host, port) of its HTTP server, from telemonctl status."""
        addr = ct.wait_for(lambda: self.json("status").get("http"), timeout, "the HTTP server")
        host, port = addr.rsplit(":", 1)
        return host, int(port)

    def http(self, path, method="GET", headers=None, ssl_context=None):
        """One request on a new connection: (status, headers dict with
        lower-case names, body bytes)."""
        import http.client
        host, port = self.http_addr()
        if ssl_context:
            c = http.client.HTTPSConnection(host, port, timeout=20, context=ssl_context)
        else:
            c = http.client.HTTPConnection(host, port, timeout=20)
        try:
            c.request(method, path, headers=headers or {})
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def http_json(self, path):
        """GET `path`, which must answer 200 with JSON; the parsed body."""
        status, hd, body = self.http(path)
        check(status == 200, "GET %s: %d %r", path, status, body[:300])
        check(hd.get("content-type", "").startswith("application/json"),
              "GET %s: content type %r", path, hd.get("content-type"))
        return json.loads(body)

    def instances(self, all=True):
        return self.json("instances", *(["--all"] if all else []))

    def instance(self, pred=lambda i: True, timeout=15, what="instance"):
        """Wait for an instance satisfying `pred`; return it."""
        def find():
            for i in self.instances():
                if pred(i):
                    return i
            return None
        return ct.wait_for(find, timeout, what)


def rc_class(prog, spec=None, tool=None, auto=True, block=True, window=None, mail=None,
             mailgroup=None, extra=""):
    """One (class ...) description."""
    parts = ['(prog "%s")' % prog]
    if spec:
        parts.append('(spec "%s")' % spec)
    if tool:
        parts.append('(tool "%s")' % tool.replace("\\", "\\\\").replace('"', '\\"'))
    parts.append("(auto %s)" % ("TRUE" if auto else "FALSE"))
    parts.append("(block %s)" % ("TRUE" if block else "FALSE"))
    if window:
        parts.append('(window "%s")' % window)
    if mail:
        parts.append('(mail "%s")' % mail)
    if mailgroup:
        parts.append('(mailgroup "%s")' % mailgroup)
    return "(class %s %s)\n" % (" ".join(parts), extra)


class FakeSnarflog:
    """A snarflog written in Python, for what the real one never does:
    listens on 127.0.0.1, announces `prog` (format 1 ascii, 2 binary) with
    a token of its own, and to the telemonitor that connects says Hello,
    proves the token (after calling `before_proof`, if given), then
    Accepted, the header, `chunks` as LogData each, and LogEnd."""

    def __init__(self, reg, prog, fmt, header, chunks, before_proof=None):
        self.prog, self.fmt, self.header, self.chunks = prog, fmt, header, chunks
        self.before_proof = before_proof
        self.token = os.urandom(32)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.sent = False
        self.error = None
        threading.Thread(target=self._serve, daemon=True).start()
        self.ctl = ct.Client(reg.port)
        self.ctl.send(ct.m_hello(ct.ROLE_SNARFLOG) +
                      ct.m_announce(prog, pid=os.getpid(), endpoint="127.0.0.1:%d" % self.port,
                                    token=self.token))
        self.ctl.expect("hello")
        self.ctl.expect("announce_ack")

    def _recv(self, c, buf, want):
        while True:
            frames, buf = ct.split_frames(buf)
            for body in frames:
                (num, vals), = ct.decode(body).items()
                if num == ct.MSG[want]:
                    return ct.decode(vals[0]) if vals and vals[0] else {}, buf
            chunk = c.recv(65536)
            if not chunk:
                raise OSError("the telemonitor closed the connection before %s" % want)
            buf += chunk

    def _serve(self):
        try:
            c, _ = self.sock.accept()
            c.settimeout(20)
            c.sendall(ct.m_hello(ct.ROLE_SNARFLOG))
            hello, buf = self._recv(c, b"", "hello")
            challenge = hello[4][0]
            mac = hmac.new(self.token, b"cmon-proof-1" + challenge, hashlib.sha256).digest()
            if self.before_proof:
                self.before_proof()
            c.sendall(ct.msg("proof", ct.f_bytes(1, mac)))
            _, buf = self._recv(c, buf, "start")
            inst = (ct.f_bytes(1, self.prog) + ct.f_bytes(2, "testhost") +
                    ct.f_varint(3, os.getpid()) + ct.f_varint(6, self.fmt))
            c.sendall(ct.msg("accepted", ct.f_bytes(1, inst) + ct.f_varint(2, 0) +
                             ct.f_varint(3, 0)))
            c.sendall(ct.msg("header", ct.f_bytes(1, self.header)))
            for ch in self.chunks:
                c.sendall(ct.msg("data", ct.f_bytes(1, ch)))
            c.sendall(ct.msg("end", ct.f_varint(1, 1)))
            self.sent = True
            while c.recv(65536):
                pass
            c.close()
        except OSError as e:
            self.error = str(e)

    def close(self):
        self.ctl.close()
        self.sock.close()


# ---------------------------------------------------------------------------
# fsread logs with known failures.

def fsread_records(reads, slow=(), start=1000000, slow_ms=20, size=8192):
    """Records of `reads` sequential reads on thread 1; reads whose index is
    in `slow` take slow_ms (failing "read at most 10 ms"), the others 1 ms.
    Every read has a cache hit, so the whole-log assertions hold. Returns
    (lines, [(start_ts, end_ts) of each slow read])."""
    lines, bad = [], []
    t = start
    slow = set(slow)
    for i in range(reads):
        dur = slow_ms * MS if i in slow else 1 * MS
        lines.append("%d 1 StartRead 1 %d" % (t, size))
        lines.append("%d 1 CacheHit 1" % (t + 100))
        lines.append("%d 1 EndRead 1" % (t + dur))
        if i in slow:
            bad.append((t, t + dur))
        t += dur + 1000
    return lines, bad


def check_fsread_failures(fails, reads, slow, after):
    """The failures `fails` (telemonctl failures --json) of an fsread log of
    `reads` reads, `slow` of them slow: each stored at most once, each one
    the log has, and every slow read at index `after` or later among them.
    Returns the (start_ts, end_ts) spans stored."""
    _, bad = fsread_records(reads, slow)
    spans = [(f["start_ts"], f["end_ts"]) for f in fails if f["start_ts"] is not None]
    ct.check(len(spans) == len(set(spans)), "a failure stored twice: %r", spans)
    ct.check(set(spans) <= set(bad), "failures the log does not have: %r",
             sorted(set(spans) - set(bad)))
    later = [b for i, b in zip(slow, bad) if i >= after]
    ct.check(set(later) <= set(spans), "failures from read %d on missing: %r", after,
             sorted(set(later) - set(spans)))
    return spans


FSREAD_HEADER = "#cmon-ascii 1\n#program fsread\n#tick-ns 1\n"


def writer_cmd(*args):
    """argv running this file's log writer (see write_main)."""
    return [sys.executable, os.path.abspath(__file__), "write"] + [str(a) for a in args]


def write_main(argv):
    """The monitored program: writes an fsread log to CMON_LOG_FD.

      write [--reads N] [--slow I,J,...] [--gate-after K --gate FILE]
            [--pace SEC] [--batch N] [--file LOG] [--linger SEC]

    --gate-after K --gate FILE: after K reads, wait until FILE exists.
    --pace: sleep this long between batches. --file: write that log
    instead of a generated one (header included)."""
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--reads", type=int, default=100)
    ap.add_argument("--slow", default="")
    ap.add_argument("--gate-after", type=int, default=-1)
    ap.add_argument("--gate", default=None)
    ap.add_argument("--pace", type=float, default=0.0)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--file", default=None)
    ap.add_argument("--linger", type=float, default=0.0)
    a = ap.parse_args(argv)
    fd = int(os.environ.get("CMON_LOG_FD", "1"))
    if a.file:
        with open(a.file, "rb") as f:
            os.write(fd, f.read())
        time.sleep(a.linger)
        return 0
    slow = [int(x) for x in a.slow.split(",") if x]
    lines, _ = fsread_records(a.reads, slow)
    os.write(fd, FSREAD_HEADER.encode())
    i = 0
    per = 3                                  # lines per read
    while i < a.reads:
        if a.gate_after == i and a.gate:
            while not os.path.exists(a.gate):
                time.sleep(0.02)
        n = min(a.batch, a.reads - i)
        if a.gate_after > i:
            n = min(n, a.gate_after - i)
        os.write(fd, ("\n".join(lines[i * per:(i + n) * per]) + "\n").encode())
        i += n
        if a.pace:
            time.sleep(a.pace)
    time.sleep(a.linger)
    return 0


def pcheck_json(spec, log_text):
    """Run pcheck -f --json on a log given as text; return its reports."""
    p = subprocess.run([ct.binary("pcheck"), "-f", "--json", "-s", spec, "-"],
                       input=log_text.encode(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    check(p.returncode in (0, 1), "pcheck failed (%d): %s", p.returncode, p.stderr.decode())
    return [json.loads(l) for l in p.stdout.decode().splitlines() if l.strip()]


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "write":
    sys.exit(write_main(sys.argv[2:]))
