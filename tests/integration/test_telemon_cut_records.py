"""A sender that cuts records across LogData chunks. protocol.md says a
LogData chunk holds whole records; snarflog keeps that, but a process
speaking for an instance (it knows the token it announced) need not. The
telemonitor must still count every record as a whole one: a record cut
anywhere (inside its timestamp, inside a `#cmon-gap N` line of the log,
right after a newline) counts once, as what the joined line is.

Two fake snarflogs (telemontest.FakeSnarflog) announce their instances, prove their
tokens, and send a log cut every 37 bytes (ascii: 180 records with a
`#cmon-gap 7` line among them and two slow reads; binary: 300 records,
one of them 160 KB).
A third sends a record whose end never comes before LogEnd. Each class
has the checker and a tool (`cat` into a file): the instance's counts, the
failures, and the tool's copy of the log must all be exact."""
import os

import cmontest as ct
import telemontest as tt
from cmontest import check

CUT = 37


def cuts(data, every):
    return [data[i:i + every] for i in range(0, len(data), every)]


def main():
    with ct.Env("telemon_cut_records") as env:
        reg = env.registry()
        outs = {p: env.path(p + ".out") for p in ("cutascii", "cutbin", "cutend")}
        rc = "".join(tt.rc_class(p, spec=tt.FSREAD_SPEC if p != "cutbin" else None,
                                 tool="cat > %s" % outs[p]) for p in outs)
        tm = tt.Telemonitor(env, reg, rc)

        # ascii: 180 records, a gap line of the log's own after record 90,
        # two slow reads; every 37 bytes a cut, one inside "#cmon-gap"
        lines, slow = tt.fsread_records(60, [5, 40])
        lines = lines[:90] + ["#cmon-gap 7"] + lines[90:]
        adata = ("\n".join(lines) + "\n").encode()
        at = adata.index(b"#cmon-gap") + 6
        achunks = cuts(adata[:at], CUT) + cuts(adata[at:], CUT)
        check(any(ch.endswith(b"#cmon-") for ch in achunks), "no cut inside the gap line")
        ahdr = tt.FSREAD_HEADER.encode()
        bhdr = ct.bin_header() + ct.bin_typedef(1, "Ev")
        # (record 150 is 160 KB: its pieces grow the waiting buffer past what
        # is kept once the record is done)
        bdata = b"".join(ct.bin_event(1, i, ts=1000 + i, pad=20000 if i == 150 else 0)
                         for i in range(300))
        # a record whose end never comes: "...EndRead 1" with no newline, then LogEnd
        elines, _ = tt.fsread_records(10)
        edata = ("\n".join(elines)).encode()
        fakes = [tt.FakeSnarflog(reg, "cutascii", 1, ahdr, achunks),
                 tt.FakeSnarflog(reg, "cutbin", 2, bhdr, cuts(bdata, CUT)),
                 tt.FakeSnarflog(reg, "cutend", 1, ahdr, cuts(edata, CUT))]
        ended = {}
        for f in fakes:
            ended[f.prog] = tm.instance(lambda i, p=f.prog: i["prog"] == p and
                                        i["state"] == "ended", timeout=30,
                                        what="%s ended" % f.prog)
            check(f.sent and not f.error, "%s: the fake snarflog: %s", f.prog, f.error)

        a = ended["cutascii"]
        check((a["records"], a["lost"], a["gaps"], a.get("unchecked", 0)) == (180, 7, 1, 0),
              "cutascii: records %s lost %s gaps %s unchecked %s (want 180, 7, 1, 0)",
              a["records"], a["lost"], a["gaps"], a.get("unchecked"))
        fails = tm.wait_failures(2, "--prog", "cutascii")
        check(sorted((f["start_ts"], f["end_ts"]) for f in fails) == sorted(slow),
              "cutascii failures %r, slow reads %r", fails, slow)
        b = ended["cutbin"]
        check((b["records"], b["lost"], b["gaps"]) == (300, 0, 0),
              "cutbin: records %s lost %s gaps %s (want 300, 0, 0)",
              b["records"], b["lost"], b["gaps"])
        # the end note says what the session received, whatever the tools have read yet
        for inst, want in ((a, "(180 records received, 7 reported lost;"),
                           (b, "(300 records received, 0 reported lost;")):
            ts = tm.ctl("typescript", str(inst["id"]))
            check("the log ended " + want in ts, "%s's typescript: %r", inst["prog"], ts[-600:])
        e = ended["cutend"]
        check((e["records"], e["lost"]) == (30, 0),
              "cutend: records %s lost %s (want 30, 0: the unfinished last record counts "
              "once it is ended)", e["records"], e["lost"])

        # each tool got the log whole: the header, then every byte
        def tool_got(prog, want):
            ct.wait_for(lambda: os.path.exists(outs[prog]) and
                        open(outs[prog], "rb").read() == want, 10,
                        "%s's tool to have the whole log" % prog)
        tool_got("cutascii", ahdr + adata)
        tool_got("cutbin", bhdr + bdata)
        tool_got("cutend", ahdr + edata + b"\n")
        for f in fakes:
            f.close()
        tm.stop()
        print("cut records: ascii %d chunks, binary %d, every record counted whole" % (
            len(achunks), len(cuts(bdata, CUT))))


ct.run_test(main)
