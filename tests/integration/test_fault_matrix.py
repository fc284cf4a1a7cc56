"""The promise under faults, proven by a matrix (rsyslog testbench style).

Programs write sequence-numbered records (about 10,000 a second, timing
every write()) under snarflog; a telemonitor monitors them with the tool
`cat >> FILE` for the four combinations of log format (ascii, binary) and
class block setting (FALSE, TRUE). In each row one part is broken mid-stream:

  none           no fault: the baseline the other rows' stalls compare with
  tm_kill        kill -9 of the telemonitor, restarted at once
  tm_kill_twice  ...twice
  tm_kill_stall  its tools stopped (SIGSTOP), then kill -9 of the telemonitor
  tm_late        kill -9, restarted 2 s later (snarflog drops meanwhile)
  tm_stop        SIGSTOP of the telemonitor for 1.5 s
  tm_stop_early  the telemonitor stopped (SIGSTOP) before the programs
                 start, continued 1.5 s later (auto classes: snarflog holds)
  tool_kill      kill -9 of the tools (restarted by the telemonitor), at a
                 moment they hold no record in their own memory
  tool_stop      SIGSTOP of the tools for 1.5 s
  reg_kill       kill -9 of the registry, restarted on the same port
  reg_stop       SIGSTOP of the registry for 1.5 s
  reg_stop_early the registry stopped before the programs start (their
                 announces wait), continued 1.5 s later
  no_consumer    no telemonitor while the programs start (snarflog drops);
                 the programs end only once the restarted telemonitor
                 knows them (a program that ends before any subscriber
                 came is gone unseen, and a loaded sanitizer build once
                 took that long to start)

Every row, every stream, exactly: the records in FILE (all tool runs
appended) plus the counts of the gap markers in FILE equal the records
written; sequence numbers only increase and each gap sits exactly where
its records are missing; the telemonitor's records/lost/gaps for the
instance are the same numbers. The programs' longest write() is printed
for every row (docs/PERFORMANCE.md has the figures); the test fails only on
a stall that shows the program was held up for the fault itself (over 1 s
without block, over -maxblock + 1 s with block), and only when
CMON_MATRIX_STALL_BOUND=1 (bench/faults/soak.sh): the suite never asserts
wall-clock time."""
import json
import os
import re
import signal
import struct
import sys
import time

import cmontest as ct
import telemontest as tt
from cmontest import check

# The soak (bench/faults/soak.sh) runs the same rows bigger through these.
_E = os.environ.get
COUNT = int(_E("CMON_MATRIX_COUNT", 24000))     # records per program
BATCH = 50                                      # records per write()
PERIOD = BATCH / float(_E("CMON_MATRIX_RATE", 10000))  # seconds between writes
PAD = 20               # extra values per record: about 100 bytes a record
MAXBLOCK = float(_E("CMON_MATRIX_MAXBLOCK", 0.3))  # snarflog -maxblock in every row
FAULT_AT = float(_E("CMON_MATRIX_FAULT_AT", 0.8))  # seconds after the programs start
PAUSE = float(_E("CMON_MATRIX_PAUSE", 1.5))     # seconds a SIGSTOP lasts
ROUNDS = int(_E("CMON_MATRIX_ROUNDS", 1))       # times through the rows
COMBOS = [(fmt, blk) for fmt in ("ascii", "binary") for blk in ("drop", "block")]
# Fail on a program held up longer than the fault explains (bench/faults/soak.sh
# sets it; the suite itself never asserts wall-clock time, only prints it).
STALL_BOUND = _E("CMON_MATRIX_STALL_BOUND") == "1"
# Only these rows (comma-separated names, as printed), for chasing one fault.
ONLY = [x for x in _E("CMON_MATRIX_ROWS", "").split(",") if x]


def write_main(argv):
    """The monitored program: COUNT records in batches, paced; report the
    longest write() and how many writes took over 50 ms."""
    fmt, report = argv
    fd = int(os.environ["CMON_LOG_FD"])
    if fmt == "binary":
        head = ct.bin_header("matrix") + ct.bin_typedef(1, "Ev")
    else:
        head = b"#cmon-ascii 1\n#program matrix\n#tick-ns 1000\n"
    os.write(fd, head)
    worst, slow, t0 = 0.0, 0, time.monotonic()
    for i in range(0, COUNT, BATCH):
        if fmt == "binary":
            data = b"".join(ct.bin_event(1, k, ts=1000 + k, pad=PAD) for k in range(i, i + BATCH))
        else:
            data = b"".join(b"%d 1 Ev %d%s\n" % (1000 + k, k, b" 0.5" * PAD)
                            for k in range(i, i + BATCH))
        view = memoryview(data)
        a = time.monotonic()
        while view:
            view = view[os.write(fd, view):]
        took = time.monotonic() - a
        worst = max(worst, took)
        slow += took > 0.05
        delay = t0 + (i // BATCH + 1) * PERIOD - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    with open(report, "w") as f:
        json.dump({"worst_write_s": worst, "writes_over_50ms": slow}, f)
    gate = os.environ.get("CMON_MATRIX_GATE")     # end only once it exists
    for _ in range(6000):
        if not gate or os.path.exists(gate):
            break
        time.sleep(0.01)
    return 0


def read_tool_file(path, fmt):
    """What the tool runs appended: ('rec', seq) and ('gap', n) in order
    (headers repeat at each run and are skipped); number of gap markers."""
    items = []
    if not os.path.exists(path):
        return items
    with open(path, "rb") as f:
        data = f.read()
    if fmt == "ascii":
        for line in data.decode().splitlines():
            if line.startswith("#cmon-gap "):
                items.append(("gap", int(line.split()[1])))
            elif line and not line.startswith("#"):
                w = line.split()
                check(len(w) == 4 + PAD and w[2] == "Ev", "not a whole record: %r", line)
                items.append(("rec", int(w[3])))
        return items
    frames, rest = ct.split_frames(data)
    check(rest == b"", "a partial record at the end of %s", path)
    for body in frames:
        (kind, vals), = ct.decode(body).items()
        f = ct.decode(vals[0])
        if kind == 3:
            items.append(("rec", int(struct.unpack("<d", f[5][0][:8])[0])))
        elif kind == 4:
            items.append(("gap", f.get(1, [0])[0]))
    return items


class Row:
    """One row of the matrix: four programs, one per format/block combination."""

    def __init__(self, env, name):
        self.env, self.name = env, name
        self.progs = {}
        self.gate = None        # with a path: the programs end once it exists

    def start_programs(self, reg):
        for fmt, blk in COMBOS:
            prog = "%s-%s-%s" % (self.name.replace("_", ".").replace("#", "-r"), fmt, blk)
            report = self.env.path(prog + ".report")
            # (-drain 15: a killed telemonitor restarted on a loaded machine,
            # under the sanitizers, with its tools' checkers to finish, may
            # take longer than the default 5 s to come back for the rest)
            snarf = self.env.snarflog(
                prog, "-buffer", "256K", "-maxblock", str(MAXBLOCK), "-drain", "15", reg=reg,
                cmd=[sys.executable, os.path.abspath(__file__), "write", fmt, report],
                env={"CMON_MATRIX_GATE": self.gate} if self.gate else None)
            self.progs[prog] = (fmt, blk, snarf, report)
        # The control: the same program writing into `cat >/dev/null`, as
        # it would without CMon; its longest write() is the machine's own
        # scheduling noise at that moment, side by side with the rows'.
        self.controls = {}
        for fmt in ("ascii", "binary"):
            report = self.env.path("%s-control-%s.report" % (self.name, fmt))
            cmd = "exec %s %s write %s %s 3>&1 | cat >/dev/null" % (
                sys.executable, os.path.abspath(__file__), fmt, report)
            self.controls[fmt] = (self.env.spawn("control", ["sh", "-c", cmd],
                                                 env={"CMON_LOG_FD": "3"}), report)

    def tool_pids(self):
        pids = []
        for prog in self.progs:
            path = self.env.path(prog + ".pids")
            if os.path.exists(path):
                with open(path) as f:
                    pids += [int(x) for x in f.read().split()]
        return pids

    def signal_tools(self, sig):
        for pid in self.tool_pids():
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                pass

    def kill_tools(self):
        """kill -9 each tool at a moment when it holds no record of its own
        (cat reads, then writes what it read; killed in between, it would
        lose records that were delivered to it — a loss inside the tool
        that nobody outside can count). What is still in its pipe is the
        telemonitor's to count. cat copies byte for byte, so it holds
        nothing exactly when the bytes it has read minus those it has
        written (/proc/PID/io) are at their least: stop it a few times to
        learn that least, then kill it stopped at such a moment. Each
        reading is taken only once the kernel shows it stopped (state T):
        a SIGSTOP sent to a tool waiting for the CPU takes effect only when
        it next runs, and on a loaded machine that can be after a pipe
        read that the reading would miss."""
        def stop(pid):
            os.killpg(pid, signal.SIGSTOP)
            for _ in range(2000):
                with open("/proc/%d/stat" % pid) as f:
                    state = f.read().rpartition(")")[2].split()[0]
                if state in "Tt":
                    return
                if state in "ZX":
                    raise ProcessLookupError(pid)
                time.sleep(0.001)
            check(False, "tool_kill: tool %d did not stop within 2 s of SIGSTOP", pid)

        def held(pid):
            with open("/proc/%d/io" % pid) as f:
                io = dict(ln.split(": ") for ln in f.read().splitlines())
            return int(io["rchar"]) - int(io["wchar"])

        # on a loaded machine a tool may start late: wait for all of them
        # while the programs still write
        deadline = time.time() + 1.5
        while len(self.tool_pids()) < len(COMBOS) and time.time() < deadline:
            time.sleep(0.02)
        pids, killed, finished = self.tool_pids(), 0, 0
        for pid in pids:
            seen = []
            try:
                for k in range(400):
                    stop(pid)
                    seen.append(held(pid))
                    if k >= 20 and seen[-1] == min(seen):
                        os.killpg(pid, signal.SIGKILL)
                        try:    # (the telemonitor may have reaped it already)
                            os.killpg(pid, signal.SIGCONT)
                        except ProcessLookupError:
                            pass
                        killed += 1
                        break
                    os.killpg(pid, signal.SIGCONT)
                    time.sleep(0.001)
            except (ProcessLookupError, FileNotFoundError):
                finished += 1   # it read its whole input and ended before we got to it
        # the row tests a fault only if there was one: every program's tool
        # was running at the fault, and each was killed (one that had
        # already finished its input on a slow machine is no fault, but
        # most must have been killed mid-stream)
        check(len(pids) == len(COMBOS) and killed + finished == len(pids) and
              killed >= len(pids) // 2,
              "tool_kill: %d of %d tools killed (%d had finished)", killed, len(pids), finished)

    def finish(self, tm):
        """Wait for the programs and the instances to end; check every
        stream exactly; return printable results."""
        out = []
        for prog, (fmt, blk, snarf, report) in self.progs.items():
            check(snarf.wait(60) == 0, "%s: snarflog: %s", prog, snarf.stderr()[-3000:])
            # (gone: its snarflog left while the telemonitor was down, after
            # handing all of the log to the killed one; the registry told the
            # restarted one its length, and the rest is counted lost)
            inst = tm.instance(lambda i, p=prog: i["prog"] == p and
                               i["state"] in ("ended", "gone"),
                               timeout=90, what="%s to end" % prog)
            items = read_tool_file(self.env.path(prog + ".out"), fmt)
            # A gone instance's tools may stop short: the end of its log
            # never reached this telemonitor (it is counted lost, by the
            # length the registry told), and no tool ran to be told so.
            gone = inst["state"] == "gone"
            # Likewise when the log ended before the last telemonitor
            # started a tool (killed twice, the stream had nothing left
            # but its end): the telemonitor counts what the tool did not
            # get as lost, and its typescript says how much, exactly
            # what the tool's output lacks.
            told = [int(n) for n in re.findall(
                r"the tool did not get the last (\d+) records; counted as lost",
                tm.ctl("typescript", str(inst["id"])))]
            got, lost = ct.check_sequence(items, COUNT, allow_short_end=gone or bool(told))
            tail = COUNT - got - lost
            check(gone or not tail or tail in told,
                  "%s: the tool's output stops %d records short; the typescript says %r",
                  prog, tail, told)
            markers = sum(1 for k, _ in items if k == "gap")
            unchecked = inst.get("unchecked", 0)
            check(got + lost + tail == COUNT, "%s: %d + %d != %d", prog, got, lost, COUNT)
            check((inst["records"] + unchecked, inst["lost"]) == (got, lost + tail) and
                  inst["gaps"] in ((markers, markers + 1) if tail else (markers,)),
                  "%s: the telemonitor counts %r, the tool saw %d records, %d lost in %d gaps"
                  " (%d more lost at the end)", prog, inst, got, lost, markers, tail)
            check(inst["records"] + inst["lost"] + inst["skipped"] + unchecked == COUNT,
                  "%s: records + lost + skipped + unchecked != %d: %r", prog, COUNT, inst)
            stored, missing = check_failures(tm, prog, inst, items)
            with open(report) as f:
                rep = json.load(f)
            # (a wall-clock bound: only where asked, by the soak in bench/)
            bound = 1.0 if blk == "drop" else MAXBLOCK + 1.0
            check(not STALL_BOUND or rep["worst_write_s"] < bound,
                  "%s: the program was held up %.3f s", prog, rep["worst_write_s"])
            out.append("%-28s delivered %6d  lost %6d in %2d gaps  unchecked %5d  failures "
                       "%4d (%d missing)  longest write %7.1f ms" %
                       (prog, got, lost, markers, unchecked, stored, missing,
                        rep["worst_write_s"] * 1000))
        for fmt, (proc, report) in self.controls.items():
            check(proc.wait(60) == 0, "control %s: %s", fmt, proc.stderr()[-3000:])
            with open(report) as f:
                rep = json.load(f)
            out.append("%-28s into cat >/dev/null            longest write %7.1f ms" %
                       ("control-" + fmt, rep["worst_write_s"] * 1000))
        return out


# Every class runs a checker beside the tool (the production shape): it
# fails on every EVERY-th record, so that its failures can be counted.
EVERY = 100
SPEC = """perfspec matrix
  event Ev(seq);
  assert "every hundredth": {& e : Ev : e.seq mod %d != 0};
end matrix
""" % EVERY


def rc(env):
    spec = env.path("matrix.pspec")
    with open(spec, "w") as f:
        f.write(SPEC)
    text = ""
    for fmt, blk in COMBOS:
        tool = "echo $$ >> %s/$M_PROG.pids; exec cat >> %s/$M_PROG.out" % (env.dir, env.dir)
        text += tt.rc_class("*-%s-%s" % (fmt, blk), tool=tool, spec=spec, block=(blk == "block"))
    return text


def check_failures(tm, prog, inst, items):
    """The checker's failures, one by one: each is a record that fails (a
    multiple of EVERY), none twice, the instance's count equals its rows,
    and every failure of a record the tool got is stored unless the
    records it lies in were counted unchecked (k missing need at least
    (k - 1) * EVERY + 1 of them). Returns (stored, missing)."""
    rows = tm.failures("--instance", str(inst["id"]), "--limit", "100000")
    seqs = [json.loads(r["metrics"])["seq"] if isinstance(r["metrics"], str)
            else r["metrics"]["seq"] for r in rows]
    check(len(rows) == inst["failures"], "%s: %d failure rows, a count of %d", prog, len(rows),
          inst["failures"])
    check(all(q % EVERY == 0 for q in seqs), "%s: a failure of a record that holds: %r", prog,
          [q for q in seqs if q % EVERY][:5])
    check(len(set(seqs)) == len(seqs), "%s: a failure stored twice", prog)
    want = {v for k, v in items if k == "rec" and v % EVERY == 0}
    missing = len(want - set(seqs))
    unchecked = inst.get("unchecked", 0)
    check(missing == 0 or unchecked >= (missing - 1) * EVERY + 1,
          "%s: %d failures of records the tool got are missing, %d records unchecked",
          prog, missing, unchecked)
    return len(rows), missing


def main():
    with ct.Env("fault_matrix") as env:
        reg = [env.registry()]
        port = reg[0].port
        tm = tt.Telemonitor(env, reg[0], rc(env))
        results = []

        def row(name, fault, tm_up=True, before=None):
            if ONLY and name.split("#")[0] not in ONLY:
                return
            r = Row(env, name)
            if not tm_up:
                r.gate = env.path(name + ".gate")
                tm.proc.kill()
                tm.proc.wait()
            if before:
                before(r)
            r.start_programs(reg[0])
            time.sleep(FAULT_AT)
            fault(r)
            if not tm.proc.alive():
                tm.start()
            results.extend(["[%s]" % name] + r.finish(tm))

        def tm_kill(r, times=1, gap=0.0):
            for k in range(times):
                tm.proc.kill()
                tm.proc.wait()
                time.sleep(gap)
                tm.start()
                if k + 1 < times:
                    # kill it again once it has taken its streams back (or
                    # they ended) and saved that: a kill mid-stream, not one
                    # before the restart did anything (a loaded sanitizer
                    # build takes seconds to get there)
                    def back():
                        err = tm.stderr()
                        done = [i["prog"] for i in tm.instances()
                                if i["state"] in ("ended", "gone")]
                        return all(("streaming %s on" % p) in err or p in done
                                   for p in r.progs)
                    ct.wait_for(back, 30, "the streams taken back after the restart",
                                interval=0.1)
                time.sleep(0.3)

        def tm_kill_stall(r):
            r.signal_tools(signal.SIGSTOP)
            time.sleep(0.5)
            tm_kill(r)

        def pause(proc_signal, r):
            proc_signal(signal.SIGSTOP)
            time.sleep(PAUSE)
            proc_signal(signal.SIGCONT)

        def stop_early(proc_signal):
            """(before, fault): stopped before the programs start, continued
            PAUSE seconds later."""
            def fault(r):
                time.sleep(max(0.0, PAUSE - FAULT_AT))
                proc_signal()(signal.SIGCONT)
            return (lambda r: proc_signal()(signal.SIGSTOP)), fault

        def reg_kill(r):
            reg[0].kill()
            reg[0].p.wait()
            time.sleep(0.3)
            reg[0] = env.registry(port=port)

        def no_consumer(r):
            time.sleep(1.2)
            tm.start()
            ct.wait_for(lambda: all(any(i["prog"] == p for i in tm.instances())
                                    for p in r.progs), 60,
                        "the restarted telemonitor to know the programs")
            with open(r.gate, "w"):
                pass

        for k in range(ROUNDS):
            n = "#%d" % k if ROUNDS > 1 else ""
            row("none" + n, lambda r: None)
            row("tm_kill" + n, tm_kill)
            row("tm_kill_twice" + n, lambda r: tm_kill(r, times=2))
            row("tm_kill_stall" + n, tm_kill_stall)
            row("tm_late" + n, lambda r: tm_kill(r, gap=2.0))
            row("tm_stop" + n, lambda r: pause(tm.proc.signal, r))
            b, f = stop_early(lambda: tm.proc.signal)
            row("tm_stop_early" + n, f, before=b)
            row("tool_kill" + n, lambda r: r.kill_tools())
            row("tool_stop" + n, lambda r: pause(r.signal_tools, r))
            row("reg_kill" + n, reg_kill)
            row("reg_stop" + n, lambda r: pause(reg[0].signal, r))
            b, f = stop_early(lambda: reg[0].signal)
            row("reg_stop_early" + n, f, before=b)
            row("no_consumer" + n, no_consumer, tm_up=False)
        print("\n".join(results))
        tm.stop()


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "write":
    sys.exit(write_main(sys.argv[2:]))
ct.run_test(main)
