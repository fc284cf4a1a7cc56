"""Storage faults: the telemonitor's state directory on a full file system,
its database made read-only, and its database deleted while it runs.

In each scenario K failures are reported while the store cannot write. They
are held in memory: `telemonctl status --json` says store.state "degraded"
with the reason and store.pending_failures == K (and over HTTP, /healthz
answers 503 "store degraded: disk full" and /metrics cmon_store_degraded 1
and the pending count); the service says so loudly
(a "store degraded: REASON" log line, and sd_notify STATUS= in the
disk-full case). Once the fault is repaired, every one of the K is stored
(`telemonctl failures --json`, exact count and the failing reads'
timestamps), and the status is "ok" again, the outage counted. With a tiny
bound (-store-backlog 5) the oldest failures are dropped: exactly K - 5,
counted in the status and in the store_outages table, and the newest 5 are
the ones stored. Mail does not wait for the store: in the read-only case
each held failure is mailed during the fault, the mail naming the id the
failure is then stored with, and the outbox (mail_queue) ends empty.

  disk full     the state directory is a 4 MiB tmpfs, filled with a filler
                file, then the filler is removed
  read-only     chattr +i on telemonitor.db and its -wal (root ignores mode
                bits; a remount read-only is refused while the database is
                open for writing), then chattr -i
  deleted       rm telemonitor.db*, with the directory made immutable so no
                new database can be made yet; then the directory is freed
                and a new database takes the held failures. Deleted again
                without a block: noticed and replaced at once, nothing lost.

Needs root (mount, chattr) and a mount namespace (unshare -m), so the
tmpfs is private to the test; otherwise it is skipped (exit 77), never
passed."""
import errno
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys


import cmontest as ct
import telemontest as tt
from cmontest import check

NS_MARK = "CMON_STORE_FAULTS_NS"


def enter_mount_namespace():
    """Run this test again inside a private mount namespace (or skip)."""
    if os.environ.get(NS_MARK) == "1":
        return
    if os.geteuid() != 0:
        ct.skip("needs root: it mounts a tmpfs and uses chattr +i")
    unshare = shutil.which("unshare")
    if not unshare:
        ct.skip("unshare(1) is not installed")
    argv = [unshare, "--mount", "--propagation", "private"]
    probe = subprocess.run(argv + ["true"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if probe.returncode != 0:
        ct.skip("cannot make a mount namespace: %s" % probe.stderr.decode().strip())
    r = subprocess.run(argv + [sys.executable, os.path.abspath(__file__)],
                       env=dict(os.environ, **{NS_MARK: "1"}), preexec_fn=ct.die_with_parent)
    sys.exit(r.returncode)


def run(*argv):
    p = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode, p.stderr.decode().strip()


def mount_tmpfs(path, size):
    os.makedirs(path, exist_ok=True)
    rc, err = run("mount", "-t", "tmpfs", "-o", "size=%s,mode=0700" % size, "tmpfs", path)
    if rc:
        ct.skip("cannot mount a tmpfs: %s" % err)


def chattr(flag, *paths):
    rc, err = run("chattr", flag, *paths)
    check(rc == 0, "chattr %s %s: %s", flag, " ".join(paths), err)


def check_chattr(directory):
    """chattr +i must stop writes to a file already open for writing."""
    if not shutil.which("chattr"):
        ct.skip("chattr(1) is not installed")
    probe = os.path.join(directory, "chattr.probe")
    fd = os.open(probe, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        rc, err = run("chattr", "+i", probe)
        if rc:
            ct.skip("chattr +i is not supported under %s: %s" % (directory, err))
        try:
            os.write(fd, b"x")
            blocked = False
        except PermissionError:
            blocked = True
        finally:
            run("chattr", "-i", probe)
    finally:
        os.close(fd)
        os.unlink(probe)
    if not blocked:
        ct.skip("chattr +i does not stop writes to open files under %s" % directory)


def fill(path):
    """Write `path` until the file system is full; return its size."""
    chunk = b"\0" * 65536
    size = 0
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                size += f.write(chunk)
            except OSError as e:
                check(e.errno == errno.ENOSPC, "filling %s: %s", path, e)
                break
        for n in (4096, 512, 1):           # the last blocks too
            while True:
                try:
                    size += f.write(b"\0" * n)
                except OSError:
                    break
    return size


class Notify:
    """$NOTIFY_SOCKET, played by the test: the STATUS= messages it gets."""

    def __init__(self, env, name):
        self.path = env.path(name + ".notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.setblocking(False)
        self.msgs = []

    def drain(self):
        while True:
            try:
                self.msgs.append(self.sock.recv(4096).decode(errors="replace"))
            except BlockingIOError:
                return self.msgs

    def wait(self, text, timeout=15):
        return ct.wait_for(lambda: [m for m in self.drain() if text in m], timeout,
                           "sd_notify with %r" % text)


class Sink(tt.MailSink):
    """The local mail relay, and the failures its mails name."""

    def failure_ids(self):
        """The failure ids the mails name (their log window commands)."""
        ids = []
        for m in list(self.messages):
            ids += [int(i) for i in re.findall(r" window (\d+)\b",
                                                m.get_payload(decode=True).decode())]
        return ids


def store(tm):
    return tm.json("status")["store"]


def produce(env, reg, prog, k):
    """Run an instance of `prog` whose checker reports k failures (reads
    2, 6, 10, ... too slow, and few enough that the mean read time stays
    within its bound); return their (start_ts, end_ts), in order."""
    slow = [2 + 4 * i for i in range(k)]
    reads = 5 * k + 10
    s = env.snarflog(prog, reg=reg, cmd=tt.writer_cmd(
        "--reads", reads, "--slow", ",".join(str(i) for i in slow)))
    check(s.wait(30) == 0, "snarflog %s: %s", prog, s.stderr())
    return tt.fsread_records(reads, slow)[1]


def wait_held(tm, k, what):
    """Wait until k failures are held or dropped; return the store status."""
    def held():
        s = store(tm)
        return s if s["pending_failures"] + s["dropped_failures"] >= k else None
    s = ct.wait_for(held, 30, "%d failures held (%s)" % (k, what))
    check(s["state"] == "degraded", "%s: state %r", what, s)
    return s


def wait_ok(tm, what):
    # the retries back off (1 s doubling to 30 s): allow for one long wait
    return ct.wait_for(lambda: (lambda s: s if s["state"] == "ok" else None)(store(tm)), 60,
                       "the store to recover (%s)" % what)


def spans(fails):
    return sorted((f["start_ts"], f["end_ts"]) for f in fails)


def new_failures(tm, before):
    ids = {f["id"] for f in before}
    return [f for f in tm.failures() if f["id"] not in ids]


def disk_full(env, reg):
    state = env.path("full.state")
    mount_tmpfs(state, "4m")
    notify = Notify(env, "full")
    tm = tt.Telemonitor(env, reg, tt.rc_class("full", spec=tt.FSREAD_SPEC, window="10 after 3"),
                        name="full", state=state, environ={"NOTIFY_SOCKET": notify.path},
                        extra=["-http", "127.0.0.1:0"])
    check(store(tm)["state"] == "ok", "healthy at start: %r", store(tm))
    ct.wait_for(lambda: tm.http("/healthz")[0] == 200, 10, "/healthz 200 at start")
    produce(env, reg, "full", 2)
    base = spans(tm.wait_failures(2))
    before = tm.failures()
    check(len(before) == 2, "2 failures before the fault: %r", before)

    # the ended instance's ledger files went to the pool (ledger.h), for
    # the next instance to take rather than create; a pooled file needs no
    # new space, so with them there the next ledger would not fail: they
    # are taken away, and the next one must be counted in memory
    free = os.path.join(state, "tools", "free")
    ct.wait_for(lambda: len(os.listdir(free)) == 2, 10,
                "the ended instance's 2 ledger files in the pool (%s)" % free)
    for f in os.listdir(free):
        os.unlink(os.path.join(free, f))
    filler = os.path.join(state, "filler")
    fill(filler)
    k = 6
    bad = produce(env, reg, "full", k)
    s = wait_held(tm, k, "disk full")
    check(s["reason"] == "disk full" and s["pending_failures"] == k and s["dropped"] == 0,
          "status while full: %r", s)
    check(s["pending"] >= k and s["pending_bytes"] > 0 and s["limit"] == 10000,
          "held writes: %r", s)
    check("store degraded: disk full" in tm.stderr(), "the loud line: %s", tm.stderr()[-3000:])
    text = tm.ctl("status")
    check("store:            DEGRADED: disk full" in text and "%d failures pending" % k in text,
          "status text: %s", text)
    notify.wait("STATUS=store degraded: disk full; %d failures pending" % k)
    check(len(tm.failures()) == 2, "nothing new stored while full")
    # the listing shows the instances as they are, not as last stored: the
    # one that ran during the fault has ended, with all its records and
    # failures (held in memory)
    during = [i for i in tm.instances() if i["prog"] == "full"][-1]
    check(during["state"] == "ended" and during["records"] == (5 * k + 10) * 3 and
          during["failures"] == k, "the instance of the fault, while full: %r", during)
    code, _, body = tm.http("/healthz")
    check(code == 503 and body == b"store degraded: disk full\n", "/healthz: %d %r", code, body)
    metrics = tm.http("/metrics")[2].decode()
    check("\ncmon_store_degraded 1\n" in metrics and
          "\ncmon_store_pending_failures %d\n" % k in metrics, "/metrics while full: %s",
          [l for l in metrics.splitlines() if l.startswith("cmon_store")])

    os.unlink(filler)
    s = wait_ok(tm, "disk full")
    check(s["pending"] == 0 and s["dropped"] == 0 and s["outages"] == 1, "recovered: %r", s)
    check(tm.http("/healthz")[0] == 200, "/healthz 200 again")
    check("\ncmon_store_outages_total 1\n" in tm.http("/metrics")[2].decode(), "outage counted")
    new = new_failures(tm, before)
    check(len(new) == k and spans(new) == sorted(bad),
          "all %d held failures stored: %r", k, new)
    check(spans(before) == base, "the earlier failures are kept")
    check("store recovered" in tm.stderr(), "recovery logged: %s", tm.stderr()[-3000:])
    check("counting in memory" in tm.stderr(), "ledgers kept in memory: %s", tm.stderr()[-3000:])
    check("ok (1 outage since start" in tm.ctl("status"), "status text after: %s", tm.ctl("status"))
    # and it stays recovered: the writes it held went through the WAL, which
    # is checkpointed and cut back at once (a WAL left at its high-water
    # mark would fill this disk again); more failures are stored as usual
    wal = os.path.join(state, "telemonitor.db-wal")
    ct.wait_for(lambda: not os.path.exists(wal) or os.path.getsize(wal) <= (1 << 20), 10,
                "the WAL cut back after the recovery")
    more = produce(env, reg, "full", 4)
    ct.wait_for(lambda: len(tm.failures()) == 2 + k + 4, 20, "4 more failures stored")
    check(store(tm)["state"] == "ok" and store(tm)["outages"] == 1, "still ok: %r", store(tm))
    check(sorted(spans(tm.failures()))[-4:] == sorted(more) or
          set(more) <= set(spans(tm.failures())), "the 4 stored")
    tm.stop()
    run("umount", state)


def overflow(env, reg):
    state = env.path("over.state")
    mount_tmpfs(state, "4m")
    tm = tt.Telemonitor(env, reg, tt.rc_class("over", spec=tt.FSREAD_SPEC, window="10 after 3"),
                        name="over", state=state, extra=["-store-backlog", "5"])
    produce(env, reg, "over", 1)
    before = tm.wait_failures(1)

    filler = os.path.join(state, "filler")
    fill(filler)
    k, bound = 12, 5
    bad = produce(env, reg, "over", k)
    s = wait_held(tm, k, "overflow")
    check(s["pending_failures"] == bound and s["dropped_failures"] == k - bound and
          s["dropped"] == k - bound and s["limit"] == bound, "bounded: %r", s)
    check("store degraded: backlog full (5 failures," in tm.stderr(), "drops logged: %s", tm.stderr()[-3000:])
    check("%d writes dropped (%d failures)" % (k - bound, k - bound) in tm.ctl("status"),
          "status text: %s", tm.ctl("status"))

    os.unlink(filler)
    s = wait_ok(tm, "overflow")
    check(s["pending"] == 0 and s["dropped_failures"] == k - bound, "after: %r", s)
    new = new_failures(tm, before)
    check(len(new) == bound and spans(new) == sorted(bad)[-bound:],
          "the newest %d failures stored, the oldest %d dropped: %r", bound, k - bound, new)
    db = sqlite3.connect(os.path.join(state, "telemonitor.db"))
    rows = db.execute("SELECT reason, failures, dropped, dropped_failures FROM store_outages"
                      ).fetchall()
    db.close()
    check(rows == [("disk full", k, k - bound, k - bound)], "outage recorded: %r", rows)
    tm.stop()
    run("umount", state)


def read_only(env, reg):
    sink = Sink()
    rc = ('(defaults (smtp "smtp://127.0.0.1:%d") (from "cmon@test.example"))\n' % sink.port +
          tt.rc_class("ro", spec=tt.FSREAD_SPEC, window="10 after 3", mail="ops@test.example",
                      mailgroup="0 sec"))
    tm = tt.Telemonitor(env, reg, rc, name="ro")
    check_chattr(tm.state)
    produce(env, reg, "ro", 2)
    before = tm.wait_failures(2)
    ct.wait_for(lambda: len(sink.failure_ids()) == 2, 15, "2 mails before the fault")
    files = [os.path.join(tm.state, "telemonitor.db" + x) for x in ("", "-wal")]
    chattr("+i", *files)
    try:
        k = 5
        bad = produce(env, reg, "ro", k)
        s = wait_held(tm, k, "read-only")
        check(s["reason"] == "read-only" and s["pending_failures"] == k, "read-only: %r", s)
        check("store degraded: read-only" in tm.stderr(), "the loud line: %s",
              tm.stderr()[-3000:])
        # mail goes out meanwhile, one per failure ("0 sec" groups nothing)
        ct.wait_for(lambda: len(sink.failure_ids()) == 2 + k, 15, "%d mails" % (2 + k))
    finally:
        chattr("-i", *files)
    s = wait_ok(tm, "read-only")
    new = new_failures(tm, before)
    check(len(new) == k and spans(new) == sorted(bad), "all %d stored: %r", k, new)
    check(len(tm.failures()) == 2 + k, "and the earlier ones kept")
    check(sorted(sink.failure_ids()) == sorted(f["id"] for f in tm.failures()),
          "the mails name the stored failures: %r", sink.failure_ids())
    db = sqlite3.connect(os.path.join(tm.state, "telemonitor.db"))
    ct.wait_for(lambda: db.execute("SELECT count(*) FROM mail_queue").fetchone()[0] == 0, 10,
                "the outbox to be empty (each mail queued, then done)")
    db.close()
    tm.stop()
    sink.close()


def deleted(env, reg):
    tm = tt.Telemonitor(env, reg, tt.rc_class("gone", spec=tt.FSREAD_SPEC, window="10 after 3"),
                        name="gone")
    check_chattr(env.dir)
    produce(env, reg, "gone", 2)
    tm.wait_failures(2)
    db = os.path.join(tm.state, "telemonitor.db")

    # deleted, and no new database can be made for now
    for x in ("", "-wal", "-shm"):
        os.unlink(db + x)
    chattr("+i", tm.state)
    try:
        ct.wait_for(lambda: store(tm)["reason"] == "database deleted", 10, "the deletion noticed")
        k = 4
        bad = produce(env, reg, "gone", k)
        s = wait_held(tm, k, "deleted")
        check(s["reason"] == "database deleted" and s["pending_failures"] == k,
              "deleted: %r", s)
        check("store degraded: database deleted" in tm.stderr(), "the loud line: %s",
              tm.stderr()[-3000:])
    finally:
        chattr("-i", tm.state)
    wait_ok(tm, "deleted")
    fails = tm.failures()
    check(len(fails) == k and spans(fails) == sorted(bad),
          "the new database has exactly the %d held failures: %r", k, fails)
    check("opened a new database there" in tm.stderr(), "reopen logged: %s", tm.stderr()[-3000:])
    check(tm.json("classes")[0]["prog"] == "gone" and
          any(i["prog"] == "gone" for i in tm.instances()), "classes and instances recorded again")

    # deleted again, nothing in the way: noticed and replaced, nothing lost
    for x in ("", "-wal", "-shm"):
        os.unlink(db + x)
    k2 = 3
    bad2 = produce(env, reg, "gone", k2)
    ct.wait_for(lambda: len(tm.failures()) == k2, 60, "%d failures in the newest database" % k2)
    s = wait_ok(tm, "deleted again")
    check(s["outages"] == 2 and s["dropped"] == 0, "second outage: %r", s)
    check(spans(tm.failures()) == sorted(bad2), "exactly the failures after the deletion")
    tm.stop()


def main():
    enter_mount_namespace()
    with ct.Env("store_faults") as env:
        reg = env.registry()
        disk_full(env, reg)
        overflow(env, reg)
        read_only(env, reg)
        deleted(env, reg)


ct.run_test(main)
