#!/usr/bin/env python3
"""Transport benchmarks, side by side in one run (see docs/PERFORMANCE.md).

  bench.py BUILD_DIR [--quick] [--writer-only | --forwarding-only] [--idle-control]
           [--placement] [--baseline SNARFLOG]

  --writer-only    only the writer-overhead runs (1.)
  --forwarding-only  only the forwarding runs (2.)
  --idle-control   also "nobody listening", and cat, with the same 0.3 s
                   pause before writing that the stalled-subscriber runs
                   need (to tell the subscriber's cost from the pause's)
  --placement      also cat (64 KiB and 1 MiB pipe), transport-walk (cat
                   that finds every record's end, 1 MiB pipe: the floor
                   under snarflog's reading) and snarflog with a stalled
                   subscriber, each paused like the stalled runs, with the
                   program and its reader pinned (taskset) to one vCPU, and
                   to a vCPU each
  --baseline PATH  also every snarflog writer-overhead row with the
                   snarflog binary at PATH (e.g. an older build), same runs;
                   and, if a cmon-sub lies next to it, a forwarding row with
                   both (the whole old path: writer and reader)
  REPS=N           writer-overhead runs (default 7, 3 with --quick)
  FWD_REPS=N       forwarding runs (default: REPS - 2, at least 3)
  FWD_LINES=N      lines per forwarding run (default 1,000,000, 300,000
                   with --quick; 1M lines take about 30 ms here, so a
                   run's start weighs in: 3,000,000 measures nearer the
                   steady state)

1. Writer overhead: a program writing a log (transport-gen) into
   `cat >/dev/null` vs through snarflog with nobody listening vs through
   snarflog with a stalled subscriber. Two programs: a firehose that does
   nothing but write records, and a busy program doing ~100 ns of its own
   work per record (still ~9 million records a second). Measured: the
   program's own time to write everything. Target: snarflog <= 1.2x cat.
2. Forwarding throughput, the same lines from the program to a reader on
   loopback TCP: socat (pipe -> socat -> TCP -> reader), snarflog (wrapper
   pipe -> snarflog -> TCP -> cmon-sub, block mode so nothing is dropped),
   rsyslog (program -> TCP -> rsyslogd imptcp -> omfwd TCP -> reader).
   Measured: time from "go" until the reader has every line. Target:
   snarflog <= 2x socat, and faster than rsyslog.
3. Registry: announce -> notify latency with 10,000 instances and 1,000
   classes (transport-regbench), three runs. Target: p99 < 5 ms.

Every configuration runs REPS times, interleaved; medians are reported.
"""

import errno
import fcntl
import functools
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build-bench")
QUICK = "--quick" in sys.argv
WRITER_ONLY = "--writer-only" in sys.argv
FORWARDING_ONLY = "--forwarding-only" in sys.argv
IDLE_CONTROL = "--idle-control" in sys.argv
PLACEMENT = "--placement" in sys.argv
BASELINE = (os.path.abspath(sys.argv[sys.argv.index("--baseline") + 1])
            if "--baseline" in sys.argv else None)
REPS = int(os.environ.get("REPS", "0")) or (3 if QUICK else 7)
FWD_REPS = int(os.environ.get("FWD_REPS", "0")) or max(3, REPS - 2)
N_WRITE = 1_000_000 if QUICK else 3_000_000    # records for the writer-overhead runs
N_FWD = (int(os.environ.get("FWD_LINES", "0"))   # records for the forwarding runs
         or (300_000 if QUICK else 1_000_000))
WORK = (0, 100)                                # transport-gen -work: firehose, busy program


def find(name):
    for root, _d, files in os.walk(BUILD):
        if name in files:
            return os.path.join(root, name)
    sys.exit("bench: %s not built in %s" % (name, BUILD))


GEN, SINK, SNARF = find("transport-gen"), find("transport-sink"), find("snarflog")
SUB, REG, REGBENCH = find("cmon-sub"), find("telemonreg"), find("transport-regbench")
WALK = find("transport-walk")
BASE_SUB = (os.path.join(os.path.dirname(BASELINE), "cmon-sub")
            if BASELINE and os.path.exists(os.path.join(os.path.dirname(BASELINE), "cmon-sub"))
            else None)
TMP = tempfile.mkdtemp(prefix="cmon-bench-transport-")
procs = []


def spawn(argv, **kw):
    kw.setdefault("stderr", subprocess.PIPE)
    p = subprocess.Popen(argv, **kw)
    procs.append(p)
    return p


def gen_seconds(p):
    """transport-gen's self-reported writing time."""
    err = p.stderr.read().decode()
    for line in err.splitlines():
        if line.startswith("transport-gen:"):
            return float(line.split()[-2])
    raise RuntimeError("transport-gen said: %r" % err)


def wait_file(path, timeout=10):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) or not open(path).read().endswith("\n"):
        if time.monotonic() > deadline:
            raise RuntimeError("timeout waiting for " + path)
        time.sleep(0.01)
    return open(path).read().strip()


def path(name):
    return os.path.join(TMP, name)


def fresh(name):
    p = path(name)
    for f in (p,):
        if os.path.exists(f):
            os.unlink(f)
    return p


def go_fifo():
    """The benchmark's "go": a FIFO, which transport-gen -wait opens and
    which release() opens for writing, so that the program starts the
    moment it is told to (a file it looked for every millisecond added up
    to a millisecond, a different one in every run)."""
    p = fresh("go")
    os.mkfifo(p)
    return p


def release(go, timeout=10):
    """Start the program waiting on FIFO `go` (opening it for writing
    returns once the program has it open for reading; it is already
    waiting there when this is called, after the runs' pauses)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.close(os.open(go, os.O_WRONLY | os.O_NONBLOCK))
            return
        except OSError as e:
            if e.errno != errno.ENXIO or time.monotonic() > deadline:
                raise RuntimeError("the program did not wait on %s: %s" % (go, e))
            time.sleep(0.0005)


# --- 1. writer overhead ----------------------------------------------------

F_SETPIPE_SZ = 1031


def pinned(place):
    """taskset prefixes (reader's, program's) for a placement: None (the
    scheduler's choice), "same" (both on vCPU 0) or "apart" (the reader on
    vCPU 1, the program on vCPU 0)."""
    if place is None:
        return [], []
    return ["taskset", "-c", "0" if place == "same" else "1"], ["taskset", "-c", "0"]


def w_cat(fmt, work, pause=False, place=None, pipe=None, walk=False):
    """`pause`: the program starts writing 0.3 s after both are up, as in
    the stalled-subscriber runs (where the scheduler then puts the two
    processes is what the pause changes). `place`: see pinned(); `pipe`:
    the pipe's size in bytes (default the kernel's, 64 KiB). `walk`: the
    reader is transport-walk (cat that finds every record's end) instead."""
    go = go_fifo()
    r, w = os.pipe()
    if pipe:
        fcntl.fcntl(w, F_SETPIPE_SZ, pipe)
    cpre, gpre = pinned(place)
    reader = [WALK, "-format", fmt] if walk else ["cat"]
    cat = spawn(cpre + reader, stdin=r, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE if walk else None)
    g = spawn(gpre + [GEN, "-n", str(N_WRITE), "-format", fmt, "-work", str(work)] +
              (["-wait", go] if pause else []), stdout=w)
    os.close(r)
    os.close(w)
    if pause:
        time.sleep(0.3)
        release(go)
    t = gen_seconds(g)
    g.wait()
    if walk:
        # a floor that found fewer records than were written did less than
        # its share: every event, and the header's records besides
        said = cat.stderr.read().decode()
        found = int(said.split()[1]) if said.startswith("transport-walk:") else -1
        if found < N_WRITE:
            raise RuntimeError("transport-walk found %d records of %d: %r" % (found, N_WRITE, said))
    cat.wait()
    return t


@functools.lru_cache(maxsize=None)
def knows_tokens(snarf):
    """Whether snarflog binary `snarf` has consumer tokens (asked once)."""
    return b"token-file" in subprocess.run([snarf, "--help"], capture_output=True).stdout


def token_args(snarf=None):
    """(snarflog's -token-file, cmon-sub's) for our snarflog; a baseline
    that predates consumer tokens needs none."""
    if snarf not in (None, SNARF) and not knows_tokens(snarf):
        return [], []
    tok = fresh("snarf.token")
    return ["-token-file", tok], ["-token-file", tok]


def w_snarf(fmt, work, stalled, snarf=None, pause=False, place=None):
    go, portfile = go_fifo(), fresh("snarf.port")
    s_tok, c_tok = token_args(snarf)
    spre, gpre = pinned(place)
    s = spawn(spre + [snarf or SNARF, "bench", "-standalone", "-portfile", portfile,
                      "-drain", "0.2"] +
              s_tok + ["--"] + gpre + [GEN, "-n", str(N_WRITE), "-format", fmt,
                                       "-work", str(work), "-wait", go])
    port = wait_file(portfile)
    sub = None
    if stalled:
        sub = spawn([SUB, "-connect", "127.0.0.1:" + port, "-stall", "-rcvbuf", "4096",
                     "-o", "/dev/null"] + c_tok, stderr=subprocess.DEVNULL)
    if stalled or pause:
        time.sleep(0.3)                     # connected and accepted as the consumer
    release(go)
    t = gen_seconds(s)                      # CMD's stderr is snarflog's
    s.wait()
    if sub:
        sub.kill()
        sub.wait()
    return t


# --- 2. forwarding throughput ----------------------------------------------

def wait_exact(p, timeout):
    """The moment p exits. (Popen.wait with a timeout polls, sleeping
    0.5 ms, 1 ms, 2 ms... up to 50 ms between looks: every time it measured
    was one of 0.0315, 0.0635, 0.1135, 0.1635... s.) Kills p after
    `timeout` seconds and raises RuntimeError."""
    fired = []
    timer = threading.Timer(timeout, lambda: (fired.append(1), p.kill()))
    timer.start()
    try:
        p.wait()
    finally:
        timer.cancel()
    t = time.monotonic()
    if fired:
        raise RuntimeError("%s still running after %d s" % (p.args[0], timeout))
    return t


def f_socat():
    go, portfile = go_fifo(), fresh("sink.port")
    sink = spawn([SINK, "-lines", str(N_FWD + 2), "-portfile", portfile], stdout=subprocess.PIPE)
    port = wait_file(portfile)
    g = spawn([GEN, "-n", str(N_FWD), "-wait", go], stdout=subprocess.PIPE)
    sc = spawn(["socat", "-u", "-b", "262144", "STDIN", "TCP:127.0.0.1:" + port], stdin=g.stdout)
    g.stdout.close()
    time.sleep(0.2)
    t0 = time.monotonic()
    release(go)
    t = wait_exact(sink, 300) - t0
    g.wait()
    sc.wait()
    return t


def f_snarf(snarf=None, subscriber=None):
    go, portfile = go_fifo(), fresh("snarf.port")
    s_tok, c_tok = token_args(snarf)
    s = spawn([snarf or SNARF, "bench", "-standalone", "-portfile", portfile] + s_tok + ["--",
               GEN, "-n", str(N_FWD), "-wait", go])
    port = wait_file(portfile)
    sub = spawn([subscriber or SUB, "-connect", "127.0.0.1:" + port, "-block", "-o", "/dev/null"]
                + c_tok)
    time.sleep(0.2)
    t0 = time.monotonic()
    release(go)
    t = wait_exact(sub, 300) - t0
    s.wait(timeout=60)
    if sub.returncode != 0:
        raise RuntimeError("cmon-sub failed: %s" % sub.stderr.read().decode())
    return t


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def f_rsyslog():
    go, portfile = go_fifo(), fresh("sink.port")
    sink = spawn([SINK, "-lines", str(N_FWD + 2), "-portfile", portfile], stdout=subprocess.PIPE)
    sport = wait_file(portfile)
    inport = free_port()
    work = path("rsyslog")
    shutil.rmtree(work, ignore_errors=True)
    os.mkdir(work)
    conf = os.path.join(work, "rsyslog.conf")
    with open(conf, "w") as f:
        f.write("""global(workDirectory="%s" maxMessageSize="8k")
main_queue(queue.type="LinkedList" queue.size="2000000" queue.dequeueBatchSize="1024")
module(load="imptcp")
input(type="imptcp" address="127.0.0.1" port="%d" SupportOctetCountedFraming="off")
template(name="raw" type="string" string="%%rawmsg%%\\n")
action(type="omfwd" target="127.0.0.1" port="%s" protocol="tcp" template="raw")
""" % (work, inport, sport))
    rs = spawn(["rsyslogd", "-n", "-f", conf, "-i", os.path.join(work, "pid")],
               stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", inport), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("rsyslogd did not start")
            time.sleep(0.05)
        # (The probe connection above sent nothing; rsyslog ignores it. The
    # lines start with digits, so RFC 6587 octet counting must be off.)
    g = spawn([GEN, "-n", str(N_FWD), "-connect", "127.0.0.1:%d" % inport, "-wait", go])
    time.sleep(0.2)
    t0 = time.monotonic()
    release(go)
    try:
        t = wait_exact(sink, 60) - t0
    except RuntimeError:
        t = None
    g.wait()
    rs.terminate()
    rs.wait()
    out = sink.stdout.read().decode()
    if sink.returncode != 0:
        sys.stderr.write("bench: rsyslog run failed (sink: %r; rsyslogd: %r); not counted\n"
                         % (out, rs.stderr.read().decode()[-500:]))
        return None
    return t


# --- 3. registry ------------------------------------------------------------

def registry():
    portfile = fresh("reg.port")
    reg = spawn([REG, "-listen", "127.0.0.1:0", "-portfile", portfile], stderr=subprocess.DEVNULL)
    port = wait_file(portfile)
    out = subprocess.run([REGBENCH, "-reg", "127.0.0.1:" + port], capture_output=True,
                         text=True, timeout=300)
    reg.terminate()
    reg.wait()
    return out.stdout.strip()


def print_forwarding(results, fwd):
    print("forwarding: %d ascii lines to a reader over loopback TCP; go -> last line, median of %d"
          % (N_FWD, len(results[("f", "socat")])))
    if BASE_SUB:
        print("  (snarflog-b: the baseline snarflog with the cmon-sub next to it)")
    print("  %-10s %10s %12s %10s" % ("path", "seconds", "lines/s", "vs socat"))
    base = med(results[("f", "socat")])
    for name, _fn in fwd:
        if ("f", name) not in results:
            print("  %-10s %10s" % (name, "failed"))
            continue
        t = med(results[("f", name)])
        print("  %-10s %10.3f %12.0f %9.2fx" % (name, t, N_FWD / t, t / base))
    if ("f", "rsyslog") in results:
        print("  rsyslog / snarflog time: %.2fx" % (med(results[("f", "rsyslog")]) /
                                                   med(results[("f", "snarflog")])))
    print("  (syslog-ng not run: it conflicts with rsyslog as a Debian package; see docs/PERFORMANCE.md)")
    print()


def med(xs):
    return statistics.median(xs)


def main():
    results = {}

    def run(key, fn, *args):
        t = fn(*args)
        if t is not None:
            results.setdefault(key, []).append(t)

    try:
        for _ in range(0 if FORWARDING_ONLY else REPS):
            for work in WORK:
                for fmt in ("ascii", "binary"):
                    run(("w", work, fmt, "cat"), w_cat, fmt, work)
                    if IDLE_CONTROL:
                        run(("w", work, fmt, "cat-paused"), w_cat, fmt, work, True)
                    if PLACEMENT:
                        for place in ("same", "apart"):
                            run(("w", work, fmt, "cat-" + place), w_cat, fmt, work, True, place)
                            run(("w", work, fmt, "cat1m-" + place), w_cat, fmt, work, True, place,
                                1 << 20)
                            run(("w", work, fmt, "walk1m-" + place), w_cat, fmt, work, True, place,
                                1 << 20, True)
                            run(("w", work, fmt, "stalled-" + place), w_snarf, fmt, work, True,
                                None, False, place)
                            if BASELINE:
                                run(("w", work, fmt, "b-stalled-" + place), w_snarf, fmt, work,
                                    True, BASELINE, False, place)
                    run(("w", work, fmt, "nobody"), w_snarf, fmt, work, False)
                    run(("w", work, fmt, "stalled"), w_snarf, fmt, work, True)
                    if IDLE_CONTROL:
                        run(("w", work, fmt, "paused"), w_snarf, fmt, work, False, None, True)
                    if BASELINE:
                        run(("w", work, fmt, "b-nobody"), w_snarf, fmt, work, False, BASELINE)
                        run(("w", work, fmt, "b-stalled"), w_snarf, fmt, work, True, BASELINE)
                        if IDLE_CONTROL:
                            run(("w", work, fmt, "b-paused"), w_snarf, fmt, work, False,
                                BASELINE, True)
        fwd = [("socat", f_socat), ("snarflog", f_snarf)]
        if BASE_SUB:
            fwd.append(("snarflog-b", lambda: f_snarf(BASELINE, BASE_SUB)))
        if shutil.which("rsyslogd"):
            fwd.append(("rsyslog", f_rsyslog))
        for _ in range(0 if WRITER_ONLY else FWD_REPS):
            for name, fn in fwd:
                run(("f", name), fn)
        reglines = [] if WRITER_ONLY or FORWARDING_ONLY else [registry() for _ in range(3)]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(TMP, ignore_errors=True)

    if FORWARDING_ONLY:
        print_forwarding(results, fwd)
        return
    print("writer overhead: %d records; the program's own time to write them, median of %d"
          % (N_WRITE, REPS))
    if BASELINE:
        print("  (baseline: %s)" % BASELINE)
    rows = [("cat", "cat >/dev/null")]
    if IDLE_CONTROL:
        rows.append(("cat-paused", "cat >/dev/null, 0.3 s pause"))
    rows += [("nobody", "snarflog, nobody listening"), ("stalled", "snarflog, stalled subscriber")]
    if IDLE_CONTROL:
        rows.append(("paused", "snarflog, nobody, 0.3 s pause"))
    if PLACEMENT:
        for place, where in (("same", "one vCPU"), ("apart", "own vCPU")):
            rows += [("cat-" + place, "cat, paused, %s" % where),
                     ("cat1m-" + place, "cat, 1M pipe, paused, %s" % where),
                     ("walk1m-" + place, "walk, 1M pipe, paused, %s" % where),
                     ("stalled-" + place, "snarflog stalled, %s" % where)]
    if BASELINE:
        rows += [("b-" + what, "baseline" + label[8:]) for what, label in rows
                 if label.startswith("snarflog")]
    print("  %-9s %-7s %-31s %10s %8s" % ("program", "format", "log goes to", "seconds", "vs cat"))
    for work in WORK:
        prog = "firehose" if work == 0 else "busy"
        for fmt in ("ascii", "binary"):
            base = med(results[("w", work, fmt, "cat")])
            for what, label in rows:
                t = med(results[("w", work, fmt, what)])
                print("  %-9s %-7s %-31s %10.3f %7.2fx" % (prog, fmt, label, t, t / base))
    print()
    if WRITER_ONLY:
        return
    print_forwarding(results, fwd)
    print("registry (3 runs):")
    p99 = []
    for out in reglines:
        for line in out.splitlines():
            print("  " + line)
            if "p99" in line:
                p99.append(float(line.split("p99 ")[1].split()[0]))
    if p99:
        print("  median p99: %.3f ms (target < 5 ms)" % med(p99))


if __name__ == "__main__":
    main()
