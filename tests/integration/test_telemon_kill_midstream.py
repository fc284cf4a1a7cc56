"""telemonitor killed with SIGKILL while records are in flight: the records
snarflog had already sent (in socket buffers, or received but not yet
saved) cannot come back, but they are not lost silently. On re-attaching,
snarflog's Accepted{records_before} tells where the new stream starts; the
telemonitor counts what it cannot account for as lost, marks the gap for
its tools and says so in the typescript and its log. Every record is
counted on both sides: instance records + lost == records written, and
snarflog's own numbers (records read, LogEnd of the new stream) agree.

To have records in flight for certain, the class's tool does not read its
input while a STALL file exists: the telemonitor stops reading the data
connection once the tool's queue is full, and snarflog fills the socket
behind it. The tool left behind never reads: the next start kills it and
counts what it had been given but never read as lost too. The snarflog
buffer is big enough that nothing is dropped while no telemonitor is
connected. Both log formats; before the burst the program writes its own
gap marker (2 records it says it lost: they count, as lost) and comments
(ascii '#' lines, a binary TypeDef), which count for nothing on either
side."""
import os
import re
import sys
import time

import cmontest as ct
import telemontest as tt
from cmontest import check

FIRST, BURST, LAST = 300, 120000, 1500    # records per phase


def record(fmt, k):
    if fmt == "binary":
        return ct.bin_event(1, k, ts=1000 + k)
    return b"%d 1 Ev %d\n" % (1000 + k, k)


def write_main(argv):
    """The monitored program: FIRST records, then its own gap marker and
    comments; wait for GATE1; a burst of BURST records, then create DONE
    and wait for GATE2; LAST records; exit."""
    fmt, gate1, done, gate2 = argv
    fd = int(os.environ["CMON_LOG_FD"])
    if fmt == "binary":
        os.write(fd, ct.bin_header("midstream") + ct.bin_typedef(1, "Ev"))
        extras = ct.bin_record(4, ct.f_varint(1, 2)) + ct.bin_typedef(2, "Late")
    else:
        os.write(fd, b"#cmon-ascii 1\n#program midstream\n#tick-ns 1\n")
        extras = b"#cmon-gap 2\n# a note from the program\n  # an indented note\n"

    def put(a, b, batch=600):
        for i in range(a, b, batch):
            data = memoryview(b"".join(record(fmt, k) for k in range(i, min(b, i + batch))))
            while data:
                data = data[os.write(fd, data):]

    def wait(path):
        while not os.path.exists(path):
            time.sleep(0.02)

    put(0, FIRST)
    os.write(fd, extras)
    wait(gate1)
    put(FIRST, FIRST + BURST)
    with open(done, "w") as f:
        f.write("done\n")
    wait(gate2)
    put(FIRST + BURST, FIRST + BURST + LAST)
    return 0


def scenario(env, reg, fmt):
    written = FIRST + BURST + LAST
    own_gap = 2                                   # the program's own gap marker
    prog = "midstream-" + fmt
    stall = env.path("stall-" + fmt)
    open(stall, "w").close()
    tool = "if [ -e %s ]; then exec sleep 600; fi; exec cat >/dev/null" % stall
    tm = tt.Telemonitor(env, reg, tt.rc_class(prog, tool=tool, block=True), name="tm-" + fmt)
    gate1, done, gate2 = (env.path(n + "-" + fmt) for n in ("gate1", "done", "gate2"))
    snarf = env.snarflog(prog, "-buffer", str(64 << 20), "-debug", reg=reg,
                         cmd=[sys.executable, os.path.abspath(__file__), "write",
                              fmt, gate1, done, gate2])
    inst = tm.instance(lambda i: i["prog"] == prog and i["records"] == FIRST,
                       what="the first records")

    # The burst: the tool stalls, the telemonitor stops reading, snarflog
    # fills the connection behind it. Wait until what is saved has grown
    # past the first records (the burst reaches the tool's pipe: it takes a
    # pipe's worth before it stalls) and then stays put for 1.5 s, longer
    # than anything the telemonitor does once a second (a loaded ASan run
    # once saw no change for 0.6 s before the burst arrived).
    open(gate1, "w").close()
    ct.wait_file(done, 30)
    seen = []

    def settled():
        r = tm.instance(lambda i: i["id"] == inst["id"])["records"]
        seen.append(r)
        return r if r > FIRST and len(seen) >= 6 and len(set(seen[-6:])) == 1 else None
    saved = ct.wait_for(settled, 30, "the saved count to grow and settle", interval=0.3)
    check(FIRST < saved < FIRST + BURST, "stalled mid-burst: %d saved", saved)

    tm.proc.kill()                                  # SIGKILL, with records in flight
    check(snarf.alive(), "the program goes on")
    os.unlink(stall)
    tm.start()
    tm.instance(lambda i: i["id"] == inst["id"] and i["state"] == "monitoring",
                what="the instance re-attached")
    open(gate2, "w").close()
    check(snarf.wait(60) == 0, "snarflog: %s", snarf.stderr())
    end = tm.instance(lambda i: i["id"] == inst["id"] and i["state"] == "ended",
                      timeout=30, what="the instance to end")
    print("%s: written %d, saved before the kill %d, instance %r" % (fmt, written, saved, end))

    # every record accounted for; the in-flight and unread ones as lost
    check(end["records"] + end["lost"] == written + own_gap,
          "records + lost == written: %r", end)
    check(end["skipped"] == 0, "nothing dropped while no consumer: %r", end)
    check(end["lost"] > own_gap, "records were in flight at the kill: %r", end)
    check(end["gaps"] == 1, "the tool saw one gap, at the restart: %r", end)
    ts = tm.ctl("typescript", str(inst["id"]))
    check("the tool missed %d records" % end["lost"] in ts,
          "typescript says how many: %s", ts)
    check("records before the restart were lost" in tm.stderr(), "log: %s",
          tm.stderr()[-3000:])
    check("left running by the previous telemonitor did not finish" in tm.stderr(),
          "the old tool was killed: %s", tm.stderr()[-3000:])

    # snarflog's side: it read every record (and the program's own gap
    # marker and comments) and dropped none; the new stream's LogEnd counts
    # what came after the restart
    err = snarf.stderr()
    extras = 1 if fmt == "binary" else 3
    m = re.search(r"end of log: (\d+) records read, (\d+) dropped", err)
    check(m and int(m.group(1)) == written + extras and int(m.group(2)) == 0,
          "snarflog read every record: %s", err[-3000:])
    m = re.search(r"this stream: (\d+) records sent, (\d+) reported dropped", ts)
    check(m is not None, "LogEnd numbers in the typescript: %s", ts)
    sent, dropped = int(m.group(1)), int(m.group(2))
    print("%s: new stream: %d records sent, %d reported dropped" % (fmt, sent, dropped))
    # the old tool read nothing, so the new one got exactly the new stream
    check(dropped == 0 and sent == end["records"],
          "LogEnd agrees: %d sent, %d dropped, %d written, %d saved, %r",
          sent, dropped, written, saved, end)
    tm.stop()


def main():
    with ct.Env("telemon_kill_midstream") as env:
        reg = env.registry()
        for fmt in ("ascii", "binary"):
            scenario(env, reg, fmt)


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "write":
    sys.exit(write_main(sys.argv[2:]))
ct.run_test(main)
