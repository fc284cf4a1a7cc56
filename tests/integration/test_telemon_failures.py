"""telemonitor failures and log windows: every failing interval the checker
reports is stored and can be listed (with filters, as JSON and as a table);
each has a log window from the interval's start event (at most BEFORE
records back from its end) to AFTER records past its end, stored as
cmon-ascii 1 text; checking the window again with pcheck gives the same
failure (assertion, interval type, timestamps, metrics). A window waits
for its AFTER records; until then telemonctl says so. A binary log gets
ascii windows too."""
import os
import sqlite3
import subprocess
import time

import cmontest as ct
import telemontest as tt
from cmontest import check


def same_failure(stored, report):
    return (report.get("assert") == stored["assert"] and report.get("type") == stored["type"]
            and report.get("start_ts") == stored["start_ts"]
            and report.get("end_ts") == stored["end_ts"]
            and report.get("metrics") == stored["metrics"])


def recheck(tm, f):
    """The window of failure f, checked again with pcheck, reports f."""
    text = tm.ctl("window", str(f["id"]))
    check(text.startswith("#cmon-ascii 1\n"), "window text: %r", text[:200])
    check("#telemon-window" in text, "window header: %r", text[:300])
    check("%d 1 StartRead 1 8192\n" % f["start_ts"] in text, "start event in window %d", f["id"])
    check("%d 1 EndRead 1\n" % f["end_ts"] in text, "end event in window %d", f["id"])
    reports = tt.pcheck_json(tt.FSREAD_SPEC, text)
    check(any(same_failure(f, r) for r in reports),
          "pcheck on the window of failure %d does not report it again:\n%r\n%r",
          f["id"], f, reports)
    return text


def main():
    with ct.Env("telemon_failures") as env:
        reg = env.registry()
        rc = (tt.rc_class("fsread", spec=tt.FSREAD_SPEC, window="10 after 3") +
              tt.rc_class("binread", spec=tt.FSREAD_SPEC, window="20"))
        tm = tt.Telemonitor(env, reg, rc)
        t0 = time.time()

        # slow reads 5 and 40, and 41 right after (its window is merged)
        gate = env.path("gate")
        snarf = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd(
            "--reads", 60, "--slow", "5,40,41", "--gate-after", 42, "--gate", gate))
        fails = tm.wait_failures(3)
        # the window of read 41 waits for 3 more records, held back by the gate
        last = max(fails, key=lambda f: f["start_ts"])
        rc_, _, err = tm.ctl_rc("window", str(last["id"]))
        check(rc_ == 1 and "not stored yet" in err, "pending window: %d %r", rc_, err)
        open(gate, "w").close()
        check(snarf.wait(30) == 0, "snarflog: %s", snarf.stderr())

        _, slow = tt.fsread_records(60, [5, 40, 41])
        check(sorted((f["start_ts"], f["end_ts"]) for f in fails) == sorted(slow),
              "failures %r, slow reads %r", fails, slow)
        inst = tm.instance(lambda i: i["prog"] == "fsread")
        for f in fails:
            check(f["prog"] == "fsread" and f["machine"] == inst["machine"] and
                  f["pid"] == inst["pid"] and f["instance"] == inst["id"], "identity: %r", f)
            check(f["assert"] == "read at most 10 ms" and f["line"] == 27, "assertion: %r", f)
            check(f["type"] == "Read" and f["kind"] == "interval" and f["result"] == "fail",
                  "interval: %r", f)
            check(f["metrics"]["size"] == 8192 and f["metrics"]["hit"] is True and
                  f["metrics"]["time"][0] == 20 * tt.MS, "metrics: %r", f["metrics"])
            check(f["units"] == {"time": "ns"}, "the duration's unit: %r", f)
            check(f["time"].endswith("Z") and t0 - 5 <= f["time_unix"] <= time.time() + 5,
                  "time: %r", f)

        ct.wait_for(lambda: tm.ctl_rc("window", str(last["id"]))[0] == 0, 10,
                    "the last window to be stored")
        texts = [recheck(tm, f) for f in fails]
        # read 5: from its start event (record 16) to 3 records after its end (18)
        w5 = texts[0]
        check("records 16-21" in w5, "window of read 5: %r", w5[:300])
        check(w5.count("\n") == w5.count("#") + 6, "6 records in it: %r", w5)
        # reads 40 and 41 share one window
        check(texts[1] == texts[2], "merged window for reads 40 and 41")
        wj = tm.json("window", str(fails[0]["id"]))
        check(wj["from_record"] == 16 and wj["to_record"] == 21 and wj["window"] == w5,
              "window --json: %r", wj)

        # queries
        check(tm.failures("--prog", "nosuch") == [], "--prog filter")
        check(len(tm.failures("--assert", "read at most 10 ms")) == 3, "--assert filter")
        check(tm.failures("--assert", "hit ratio at least 75%") == [], "--assert: no match")
        check(len(tm.failures("--since", "@%d" % int(t0 - 60))) == 3, "--since past")
        check(tm.failures("--since", "@%d" % int(time.time() + 3600)) == [], "--since future")
        check(len(tm.failures("--since", "10 min")) == 3, "--since relative")
        check([f["id"] for f in tm.failures("--limit", "2")] == [f["id"] for f in fails[1:]],
              "--limit keeps the latest")
        check(len(tm.failures("--instance", str(inst["id"]))) == 3, "--instance")
        table = tm.ctl("failures")
        lines = table.splitlines()
        check(lines[0].split()[:6] == ["ID", "TIME", "PROG", "MACHINE", "PID", "ASSERTION"],
              "table header: %r", lines[0])
        check(sum("read at most 10 ms" in l for l in lines) == 3, "table rows: %r", table)
        check("time = 20.0 ms (\u00b11 ns), size = 8192, hit = true" in table,
              "metrics as text, durations in units: %r", table)
        check("window ID" not in table, "no hint in piped data: %r", table)
        rc, out, err = tm.ctl_rc("failures")
        check(rc == 0 and out == table and "The log around a failure: telemonctl -state %s "
              "window ID" % tm.state in err, "the hint to see a window, on stderr: %r", err)

        # a binary log: windows are still cmon-ascii 1 and re-check
        lines_, _ = tt.fsread_records(30, [7])
        ascii_log = env.path("b.log")
        with open(ascii_log, "w") as f:
            f.write(tt.FSREAD_HEADER.replace("fsread", "binread") + "\n".join(lines_) + "\n")
        bin_log = env.path("b.bin")
        subprocess.run([ct.binary("cmon-log"), "--binary", "-o", bin_log, ascii_log], check=True)
        b = env.snarflog("binread", "-binary", reg=reg, cmd=tt.writer_cmd("--file", bin_log))
        check(b.wait(30) == 0, "snarflog: %s", b.stderr())
        bf = tm.wait_failures(1, "--prog", "binread")
        ct.wait_for(lambda: tm.ctl_rc("window", str(bf[0]["id"]))[0] == 0, 10, "binary window")
        text = recheck(tm, bf[0])
        check("#program binread" in text, "header carried over: %r", text[:200])

        # state is in DIR/telemonitor.db, readable by anyone with sqlite
        path = os.path.join(tm.state, "telemonitor.db")
        check(os.path.exists(path), "database file")
        # windows at rest: a zstd frame (a BLOB) where that is smaller, the
        # text itself where it is short (wtext.h); both came back above
        db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
        rows = db.execute("SELECT typeof(text), text FROM windows").fetchall()
        db.close()
        packed = [t for k, t in rows if k == "blob"]
        check(len(rows) == 3 and packed, "windows stored: %r", [(k, len(t)) for k, t in rows])
        check(all(t[:4] == b"\x28\xb5\x2f\xfd" for t in packed), "zstd frames: %r",
              [t[:8] for t in packed])
        check(all(len(t) < 256 for k, t in rows if k == "text"), "short windows as text")
        tm.stop()


ct.run_test(main)
