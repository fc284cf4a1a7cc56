"""Shared helpers for CMon's black-box integration tests.

Every test runs the real binaries on 127.0.0.1 with ports chosen by the
kernel, inside a temporary directory, and kills everything it started when
it ends, whether it passed or not:

    with cmontest.Env("drops") as env:
        reg = env.registry()                       # telemonreg on 127.0.0.1:0
        sub = env.sub("-prog", "demo", "-auto")    # cmon-sub, subscribed via reg
        snarf = env.snarflog("demo", stdin=...)    # snarflog announcing to reg
        ...

The environment gives CMON_BUILD_DIR (the build tree) and CMON_SOURCE_DIR.
Also here: a tiny protobuf encoder/decoder (no python3-protobuf on the
test machines) for speaking the wire protocol by hand, generators for
sequence-numbered ascii and binary logs, and parsers that check a received
log against what was written (every record carries a sequence number).
"""

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback

# A test's lines in the order they happened, its stderr among them (ctest
# captures both through one pipe, where stdout would be block-buffered).
sys.stdout.reconfigure(line_buffering=True)

BUILD = os.environ.get("CMON_BUILD_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build")
SOURCE = os.environ.get("CMON_SOURCE_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..")
HERE = os.path.dirname(os.path.abspath(__file__))

# Where each program lives in the build tree.
_BINARIES = {
    "telemonreg": "daemons/registry/telemonreg",
    "snarflog": "daemons/snarflog/snarflog",
    "cmon-sub": ("tests/integration/cmon-sub", "bench/cmon-sub"),
    "cmon-wrap": "clients/cmon-wrap/cmon-wrap",
    "telemonitor": "daemons/telemonitor/telemonitor",
    "telemonctl": "clients/telemonctl/telemonctl",
    "pcheck": "clients/pcheck/pcheck",
}


def binary(name):
    """Absolute path of a program built in CMON_BUILD_DIR."""
    rel = _BINARIES.get(name)
    if rel:
        # Where a target lands depends on which folder defined it first;
        # prefer the most recently built candidate.
        cands = [os.path.join(BUILD, r) for r in ((rel,) if isinstance(rel, str) else rel)]
        cands = [c for c in cands if os.path.exists(c)]
        if cands:
            return os.path.abspath(max(cands, key=os.path.getmtime))
    for root, _dirs, files in os.walk(BUILD):
        if name in files and os.access(os.path.join(root, name), os.X_OK):
            return os.path.abspath(os.path.join(root, name))
    raise FileNotFoundError("%s not built in %s" % (name, BUILD))


# Lines AddressSanitizer / UndefinedBehaviorSanitizer print on an error.
_SANITIZER_MARKS = {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"}


def die_with_parent():
    """Have the kernel SIGKILL this process when its parent dies, so a test
    killed by ctest's timeout leaves nothing behind (Linux prctl)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)   # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


class TestFailure(Exception):
    """An assertion about the system under test did not hold."""


def check(cond, msg, *args):
    """Fail the test with a formatted message unless `cond` holds."""
    if not cond:
        raise TestFailure(msg % args if args else msg)


def wait_for(pred, timeout=10.0, what="condition", interval=0.02):
    """Poll `pred` until it returns something true; fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TestFailure("timed out after %.1f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now (for a server
    that must be told its port, or restarted on the same one)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_file(path, timeout=10.0):
    """Wait until `path` exists and is non-empty; return its text."""
    def ready():
        try:
            with open(path) as f:
                text = f.read()
            return text if text.endswith("\n") else None
        except FileNotFoundError:
            return None
    return wait_for(ready, timeout, "file %s" % path)


class Proc:
    """A started program: its Popen, name, and stderr file."""

    def __init__(self, env, name, argv, popen, errpath):
        self.env, self.name, self.argv, self.p, self.errpath = env, name, argv, popen, errpath
        self.port = None

    @property
    def pid(self):
        return self.p.pid

    def alive(self):
        return self.p.poll() is None

    def wait(self, timeout=20.0):
        """Wait for exit; return the status (negative = killed by signal)."""
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TestFailure("%s did not exit within %.1f s" % (self.name, timeout))

    def signal(self, sig):
        if self.alive():
            self.p.send_signal(sig)

    def kill(self):
        """SIGKILL, for real, and reap."""
        if self.alive():
            self.p.kill()
        self.p.wait()

    def stderr(self):
        try:
            with open(self.errpath, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def addr(self):
        return "127.0.0.1:%d" % self.port

    def token(self):
        """snarflog's consumer token (bytes), from its -token-file."""
        return bytes.fromhex(wait_file(self.token_file, 10).strip())


class Env:
    """A test's world: a temporary directory and every process started in
    it. Use as a context manager; on exit (normal or not) all processes
    are killed and, on failure, their stderr is printed."""

    # A list: the directories of Envs that passed are put there rather than
    # removed, for the caller to remove later (bench/telemonitor/ramp.py:
    # on ext4 without a journal, files deleted in the last minute make
    # every new file cost more, and one run must not pay for the last).
    deferred_removal = None

    def __init__(self, name):
        self.name = name
        self.procs = []
        self.dir = tempfile.mkdtemp(prefix="cmon-%s-" % name)
        self.counter = 0

    def __enter__(self):
        return self

    def __exit__(self, etype, evalue, tb):
        # Ask politely first (so sanitizers can report leaks at exit), then
        # SIGKILL whatever is left; servers a test started (a PostgreSQL,
        # pgserver.py) stop last.
        for p in reversed(self.procs):
            if p.alive():
                try:
                    p.p.terminate()
                except OSError:
                    pass
        deadline = time.monotonic() + 3
        for p in reversed(self.procs):
            try:
                p.p.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.p.kill()
                p.p.wait()
        for stop in reversed(getattr(self, "cleanups", [])):
            stop()
        reports = [p for p in self.procs if any(m in p.stderr() for m in _SANITIZER_MARKS)]
        if etype is None and reports:
            etype = TestFailure
            sys.stderr.write("---- sanitizer reports in %s\n" % ", ".join(p.name for p in reports))
        if etype is not None:
            # what failed first: a long dump below may be cut short where
            # the output is shown in part (a CI log's excerpt)
            if evalue is not None:
                sys.stderr.write("---- %s failed: %s: %s\n" % (self.name, etype.__name__,
                                                              str(evalue)[:2000]))
            sys.stderr.write("---- %s failed; stderr of its processes:\n" % self.name)
            for p in self.procs:
                text = p.stderr()
                if text:
                    sys.stderr.write("---- %s (%s)\n%s\n" % (p.name, " ".join(p.argv[1:]), text[-4000:]))
            sys.stderr.write("---- temporary directory kept: %s\n" % self.dir)
            if evalue is None:
                raise TestFailure("sanitizer reported errors")
        elif Env.deferred_removal is not None:
            Env.deferred_removal.append(self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def path(self, name):
        return os.path.join(self.dir, name)

    def unique(self, stem):
        self.counter += 1
        return self.path("%s.%d" % (stem, self.counter))

    def spawn(self, name, argv, stdin=None, stdout=None, env=None, **kw):
        """Start argv with stderr captured to a file; track it for cleanup."""
        errpath = self.unique(name + ".err")
        full_env = dict(os.environ)
        full_env.pop("TELEMONREG_MACHINE", None)
        full_env.pop("CMON_DATA_LISTEN", None)
        for k in ("CMON_TLS_CERT", "CMON_TLS_KEY", "CMON_TLS_CA", "CMON_LOG", "CMON_LOG_FD",
                  "CMON_REGISTRY_SECRET_FILE"):
            full_env.pop(k, None)
        if env:
            full_env.update(env)
        err = open(errpath, "wb")
        user_preexec = kw.pop("preexec_fn", None)

        def preexec():
            die_with_parent()
            if user_preexec:
                user_preexec()
        p = subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=err, env=full_env,
                             cwd=self.dir, preexec_fn=preexec, **kw)
        err.close()
        proc = Proc(self, name, argv, p, errpath)
        self.procs.append(proc)
        return proc

    def registry(self, *args, port=0, tls=None):
        """Start telemonreg on 127.0.0.1:PORT (0 = kernel's choice); wait
        until it listens. `tls` is a dict of cert/key/ca paths."""
        portfile = self.unique("reg.port")
        argv = [binary("telemonreg"), "-listen", "127.0.0.1:%d" % port, "-portfile", portfile]
        argv += tls_args(tls) + list(args)
        proc = self.spawn("telemonreg", argv)
        try:
            proc.port = int(wait_file(portfile, 10).strip())
        except TestFailure:
            raise TestFailure("telemonreg did not start: %s" % proc.stderr())
        return proc

    def snarflog(self, name, *args, reg=None, cmd=None, stdin=None, stdout=None, env=None,
                 tls=None, wait_port=True):
        """Start snarflog NAME announcing to `reg` (standalone if None). With
        `cmd`, run it as the wrapped program. Waits for the data endpoint.
        Its consumer token goes to proc.token_file (read with proc.token());
        `sub("-connect", ...)` shows it to the snarflog it connects to."""
        portfile = self.unique("snarf.port")
        token_file = self.unique("snarf.token")
        argv = [binary("snarflog"), name, "-portfile", portfile, "-token-file", token_file]
        argv += ["-regmachine", reg.addr()] if reg else ["-standalone"]
        argv += tls_args(tls) + list(args)
        if cmd:
            argv += ["--"] + list(cmd)
        proc = self.spawn("snarflog", argv, stdin=stdin, stdout=stdout, env=env)
        proc.portfile, proc.token_file = portfile, token_file
        if wait_port:
            try:
                proc.port = int(wait_file(portfile, 10).strip())
            except TestFailure:
                raise TestFailure("snarflog did not start: %s" % proc.stderr())
        return proc

    def sub(self, *args, reg=None, out=None, tls=None, wait_ready=True):
        """Start cmon-sub subscribed through `reg` (or with -connect in
        args). Its log goes to `out` (a path; default a fresh file), its
        counters to out + '.stats'. Waits until subscribed when via reg."""
        out = out or self.unique("sub.log")
        ready = out + ".ready"
        argv = [binary("cmon-sub"), "-o", out, "-stats", out + ".stats",
                "-ready", ready, "-streaming", out + ".streaming"]
        argv += self._token_for(args)
        if reg:
            argv += ["-regmachine", reg.addr()]
        argv += tls_args(tls) + list(args)
        proc = self.spawn("cmon-sub", argv)
        proc.out = out
        if reg and wait_ready:
            wait_file(ready, 10)
        return proc

    def _token_for(self, args):
        """For `-connect ADDR` without -token(-file): the token file of the
        snarflog of ours listening on ADDR's port, as a legitimate local
        consumer would read it."""
        args = list(args)
        if "-connect" not in args or "-token" in args or "-token-file" in args:
            return []
        port = args[args.index("-connect") + 1].rsplit(":", 1)[-1]
        for p in reversed(self.procs):
            if getattr(p, "token_file", None) is None:
                continue
            if p.port is None:
                try:
                    with open(p.portfile) as f:
                        p.port = int(f.read().strip())
                except (OSError, ValueError):
                    continue
            if str(p.port) == port:
                wait_file(p.token_file, 10)
                return ["-token-file", p.token_file]
        return []

    def watch(self, *args, reg, tls=None):
        """cmon-sub -watch: registry notifications as lines, read with
        `Watcher.expect`."""
        argv = [binary("cmon-sub"), "-watch", "-regmachine", reg.addr()] + tls_args(tls) + list(args)
        proc = self.spawn("cmon-sub", argv, stdout=subprocess.PIPE)
        return Watcher(proc)


def tls_args(tls):
    if not tls:
        return []
    out = []
    for k in ("cert", "key", "ca"):
        if tls.get(k):
            out += ["-tls-" + k, tls[k]]
    return out


class Watcher:
    """Reads the lines cmon-sub -watch prints: 'ack ID N', 'up ID PROG
    MACHINE PID ENDPOINT new=X auto=Y key=K token=HEX|-', 'gone ID ...
    clean=X key=K token=-', 'error CODE MESSAGE'."""

    def __init__(self, proc):
        self.proc = proc
        self.lines = []
        self.buf = b""
        os.set_blocking(proc.p.stdout.fileno(), False)

    def _pump(self):
        try:
            chunk = os.read(self.proc.p.stdout.fileno(), 65536)
        except BlockingIOError:
            return
        if chunk:
            self.buf += chunk
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                self.lines.append(line.decode())

    def expect(self, prefix, timeout=10.0, **fields):
        """Wait for (and consume) the first line starting with `prefix`
        whose words include every given key=value; return its words."""
        def find():
            self._pump()
            for i, line in enumerate(self.lines):
                if not line.startswith(prefix):
                    continue
                words = line.split()
                if all(("%s=%s" % (k, v)) in words for k, v in fields.items()):
                    del self.lines[i]
                    return words
            return None
        return wait_for(find, timeout, "watch line %r %r (have %r)" % (prefix, fields, self.lines))

    def none(self, prefix, settle=0.5):
        """Check that no line starting with `prefix` arrives within `settle` s."""
        time.sleep(settle)
        self._pump()
        bad = [l for l in self.lines if l.startswith(prefix)]
        check(not bad, "unexpected watch lines: %r", bad)


# ---------------------------------------------------------------------------
# Protobuf wire format by hand (enough for cmon.proto and cmonlog.proto).

def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def f_varint(num, v):
    return varint(num << 3) + varint(v)


def f_bytes(num, b):
    if isinstance(b, str):
        b = b.encode()
    return varint((num << 3) | 2) + varint(len(b)) + b


def f_double(num, v):
    return varint((num << 3) | 1) + struct.pack("<d", v)


def zigzag(n):
    return (n << 1) ^ (n >> 63)


def frame(body):
    """Length-prefixed frame around a serialized message."""
    return varint(len(body)) + body


def read_varint(buf, pos):
    shift = result = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def decode(buf):
    """Decode a message into {field: [values]}; length-delimited values
    stay bytes (decode them again for nested messages)."""
    out = {}
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = read_varint(buf, pos)
        elif wt == 1:
            v = buf[pos:pos + 8]
            pos += 8
        elif wt == 2:
            n, pos = read_varint(buf, pos)
            v = buf[pos:pos + n]
            pos += n
        elif wt == 5:
            v = buf[pos:pos + 4]
            pos += 4
        else:
            raise ValueError("wire type %d" % wt)
        out.setdefault(num, []).append(v)
    return out


def split_frames(buf):
    """Split a byte string of frames; returns (list of bodies, leftover)."""
    frames, pos = [], 0
    while pos < len(buf):
        try:
            n, p2 = read_varint(buf, pos)
        except ValueError:
            break
        if p2 + n > len(buf):
            break
        frames.append(buf[p2:p2 + n])
        pos = p2 + n
    return frames, buf[pos:]


# cmon.Msg field numbers (proto/cmon.proto).
MSG = dict(hello=1, error=2, ping=3, pong=4, announce=10, announce_ack=11, leave=12,
           subscribe=20, subscribe_ack=21, unsubscribe=22, instance_up=23, instance_gone=24,
           start=30, accepted=31, busy=32, stop=33, header=34, data=35, gap=36, end=37,
           proof=38)
MSG_NAME = {v: k for k, v in MSG.items()}
ROLE_SNARFLOG, ROLE_TELEMONITOR = 1, 2


def msg(kind, body=b""):
    """A framed cmon.Msg of `kind` holding the serialized `body`."""
    return frame(f_bytes(MSG[kind], body))


def m_hello(role, version=1, secret=None):
    """A Hello; `secret` (bytes or str) is the registry's shared secret."""
    body = f_varint(1, version) + f_varint(2, role)
    if secret is not None:
        body += f_bytes(5, secret)
    return msg("hello", body)


def m_instance(program, machine, pid, endpoint):
    return (f_bytes(1, program) + f_bytes(2, machine) + f_varint(3, pid) +
            f_bytes(5, endpoint))


def m_announce(program, machine="testhost", pid=4242, endpoint="127.0.0.1:9", reannounce=False,
               token=None):
    body = f_bytes(1, m_instance(program, machine, pid, endpoint)) + f_varint(2, int(reannounce))
    if token is not None:
        body += f_bytes(3, token)
    return msg("announce", body)


def m_start(block=False, from_start=False, token=None):
    """A Start; `token` (bytes) is the instance's token, None for none."""
    body = f_varint(1, int(block)) + f_varint(2, int(from_start))
    if token is not None:
        body += f_bytes(3, token)
    return msg("start", body)


def m_subscribe(sid, program="", machine="", pid="", auto=False, block=False):
    return msg("subscribe", f_varint(1, sid) + f_bytes(2, program) + f_bytes(3, machine) +
               f_bytes(4, pid) + f_varint(5, int(auto)) + f_varint(6, int(block)))


def m_unsubscribe(sid):
    return msg("unsubscribe", f_varint(1, sid))


class Client:
    """A raw protocol client over TCP (optionally TLS via an ssl context),
    or over the Unix socket at `unix`."""

    def __init__(self, port, host="127.0.0.1", ssl_context=None, timeout=10.0, unix=None):
        if unix:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(timeout)
            s.connect(unix)
        else:
            s = socket.create_connection((host, port), timeout=timeout)
        if ssl_context:
            s = ssl_context.wrap_socket(s, server_hostname=host)
        self.sock = s
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def recv(self, timeout=10.0):
        """Next message as (kind name, {field: [values]}), or None at EOF."""
        deadline = time.monotonic() + timeout
        while True:
            body = self._one_frame()
            if body is not None:
                m = decode(body)
                (num, vals), = m.items()
                return MSG_NAME.get(num, str(num)), decode(vals[0])
            left = deadline - time.monotonic()
            if left <= 0:
                raise TestFailure("no message within %.1f s" % timeout)
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(262144)
            except socket.timeout:
                continue
            except (ConnectionResetError, OSError):
                return None
            if not chunk:
                return None
            self.buf += chunk

    def _one_frame(self):
        """Take one complete frame off the front of the buffer, if any."""
        try:
            n, pos = read_varint(self.buf, 0)
        except ValueError:
            return None
        if pos + n > len(self.buf):
            return None
        body = self.buf[pos:pos + n]
        self.buf = self.buf[pos + n:]
        return body

    def expect(self, kind, timeout=10.0):
        got = self.recv(timeout)
        check(got is not None, "connection closed while expecting %s", kind)
        check(got[0] == kind, "expected %s, got %s %r", kind, got[0], got[1])
        return got[1]

    def closed(self, timeout=10.0):
        """True once the peer has closed (messages before that are skipped)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.recv(deadline - time.monotonic()) is None:
                return True
        return False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def text(v):
    return v.decode() if isinstance(v, bytes) else v


# ---------------------------------------------------------------------------
# Logs with sequence numbers.

def ascii_log(count, start=0, header=True, program="demo"):
    """An ascii log: header lines, then `count` records 'TS 1 Ev SEQ'."""
    out = []
    if header:
        out += ["#cmon-ascii 1", "#program %s" % program, "#tick-ns 1"]
    for i in range(start, start + count):
        out.append("%d 1 Ev %d" % (1000 + i, i))
    return ("\n".join(out) + "\n").encode()


def ascii_records(count, start=0):
    return ascii_log(count, start, header=False)


def bin_record(kind, body):
    """A framed cmonlog.Record with oneof field `kind` (1..5)."""
    return frame(f_bytes(kind, body))


def bin_header(program="demo"):
    return bin_record(1, f_bytes(1, "cmon-bin") + f_varint(2, 1) + f_bytes(3, program) +
                      f_bytes(4, "testhost") + f_varint(5, 1))


def bin_typedef(tid, name, attrs=("seq",)):
    return bin_record(2, f_varint(1, tid) + f_bytes(2, name) + b"".join(f_bytes(3, a) for a in attrs))


def bin_event(tid, seq, ts=None, ts_delta=None, thread=1, pad=0, ints=False):
    """A framed Event record whose first value is `seq` (then `pad` 0.5s);
    `ints`: the values as Event.ivalues (then `pad` 7s), unpacked when there
    is one, else packed. Type 0 is left out, as writers of files do (an
    absent type is 0)."""
    body = (f_varint(1, tid) if tid else b"") + f_varint(2, thread)
    if ts is not None:
        body += f_varint(3, ts)
    if ts_delta is not None:
        body += f_varint(4, zigzag(ts_delta))
    if ints and pad == 0:
        body += f_varint(6, zigzag(seq))
    elif ints:
        body += f_bytes(6, b"".join(varint(zigzag(v)) for v in [seq] + [7] * pad))
    else:
        body += f_bytes(5, struct.pack("<d", float(seq)) + _PAD * pad)
    return bin_record(3, body)


def event_first_value(f):
    """The first value of a decoded Event: from `values` or `ivalues`."""
    if 5 in f:
        return int(struct.unpack("<d", f[5][0][:8])[0])
    v = f[6][0]
    if isinstance(v, bytes):        # packed
        v, _ = read_varint(v, 0)
    return (v >> 1) ^ -(v & 1)


_PAD = struct.pack("<d", 0.5)


def bin_log(count, start=0, header=True):
    out = [bin_header(), bin_typedef(1, "Ev")] if header else []
    out += [bin_event(1, i, ts=1000 + i) for i in range(start, start + count)]
    return b"".join(out)


def parse_ascii(data):
    """Split a received ascii log into (header lines, items) where items
    are ('rec', seq) or ('gap', n) in order."""
    header, items = [], []
    in_header = True
    for line in data.decode().splitlines():
        if not line.strip():
            continue
        if line.startswith("#cmon-gap "):
            items.append(("gap", int(line.split()[1])))
            in_header = False
            continue
        if line.startswith("#"):
            check(in_header, "comment line after the header: %r", line)
            header.append(line)
            continue
        in_header = False
        words = line.split()
        check(len(words) >= 4 and words[2] == "Ev" and all(w == "0.5" for w in words[4:]),
              "not a whole record: %r", line)
        items.append(("rec", int(words[3])))
    return header, items


def parse_binary(data):
    """Decode a received binary log into a list of (kind, value): ('header',
    program), ('typedef', (id, name)), ('rec', (type, seq, ts)), ('gap', n),
    ('end', n)."""
    frames, rest = split_frames(data)
    check(rest == b"", "binary log ends with a partial record (%d bytes)", len(rest))
    out = []
    for body in frames:
        rec = decode(body)
        check(len(rec) == 1, "record with %d kinds", len(rec))
        (kind, vals), = rec.items()
        f = decode(vals[0])
        if kind == 1:
            out.append(("header", text(f.get(3, [b""])[0])))
        elif kind == 2:
            out.append(("typedef", (f[1][0], text(f[2][0]))))
        elif kind == 3:
            seq = event_first_value(f)
            out.append(("rec", (f.get(1, [0])[0], seq, f.get(3, [None])[0], 4 in f)))
        elif kind == 4:
            out.append(("gap", f.get(1, [0])[0]))
        elif kind == 5:
            out.append(("end", f.get(1, [0])[0]))
    return out


def check_sequence(items, total, start=0, allow_skip_at_start=False, allow_short_end=False):
    """Every record 0..total-1 is either received or inside a gap that
    sits exactly where it was lost: received + gap counts == total, and
    sequence numbers increase without unexplained holes. Returns (received,
    dropped). With `allow_short_end` the items may stop before `total`
    (a tail the reader never saw: the caller accounts for it)."""
    expect = start
    received = dropped = 0
    first = True
    for kind, v in items:
        if kind == "gap":
            expect += v
            dropped += v
            continue
        seq = v
        if first and allow_skip_at_start and seq > expect:
            expect = seq
        first = False
        check(seq == expect, "record %d where %d was expected (a loss without a gap "
              "marker, or a gap miscounted)", seq, expect)
        expect += 1
        received += 1
    check(expect == start + total or (allow_short_end and expect < start + total),
          "log ends at %d, expected %d records", expect, start + total)
    return received, dropped


def read_stats(path):
    """cmon-sub's -stats file as a dict."""
    with open(path) as f:
        return dict(line.strip().split("=", 1) for line in f if "=" in line)


def make_certs(dirpath):
    """A throwaway CA, a second (untrusted) CA, and certificates for
    127.0.0.1/localhost signed by each. Returns a dict of paths."""
    def run(*args):
        subprocess.run(["openssl"] + list(args), cwd=dirpath, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ext = os.path.join(dirpath, "san.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    paths = {}
    for ca in ("ca", "evilca"):
        run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", ca + ".key", "-out", ca + ".pem", "-days", "2",
            "-subj", "/CN=cmon test %s" % ca)
        paths[ca] = os.path.join(dirpath, ca + ".pem")
    for name, ca in (("node", "ca"), ("other", "ca"), ("evil", "evilca")):
        run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=%s" % name)
        run("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
            "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile", ext)
        paths[name] = {"cert": os.path.join(dirpath, name + ".pem"),
                       "key": os.path.join(dirpath, name + ".key")}
    return paths


# Exit status that ctest reports as "skipped" (SKIP_RETURN_CODE in
# tests/integration/CMakeLists.txt): never counted as passed.
SKIP = 77


def skip(reason):
    """End the test as skipped, saying why (the machine cannot run it).
    Under CMON_REQUIRE=all (CI) nothing may be skipped: the test fails,
    saying why it could not run."""
    if os.environ.get("CMON_REQUIRE") == "all":
        print("FAILED: skipped, and CMON_REQUIRE=all requires every test to run: %s" % reason)
        sys.stdout.flush()
        sys.exit(1)
    print("SKIP: %s" % reason)
    sys.stdout.flush()
    sys.exit(SKIP)


def run_test(fn):
    """Run a test function; exit 0 on success, 1 with a traceback on failure
    (a test may also end itself with skip())."""
    try:
        fn()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
    print("ok")
    sys.exit(0)


def logwriter_cmd(*args):
    """argv running tests/integration/logwriter.py with `args`."""
    return [sys.executable, os.path.join(HERE, "logwriter.py")] + list(args)
