"""Alert hygiene, black-box against a local SMTP server (Python's smtpd):

- a report assertion ({& r : Read : false}: statistics, "1-minute stats" in
  config/examples/fsread.pspec) is stored, marked `report`, and never mailed,
  while an ordinary assertion of the same class is; a class with
  (notify-reports TRUE) has its report failures mailed too (regression:
  the periodic statistics report was mailed like an alert every time);
- `telemonctl silence add prog=... 'assert=GLOB' -for ...`: matching failures
  are stored, marked with the silence's id, and not mailed; `silence list`
  (table and --json) shows it; `silence rm` ends it and mail comes again;
  bad silences are refused;
- `telemonctl ack ID -comment TEXT` marks a failure acknowledged (`acked`,
  `acked_iso`, `ack_comment` in failures --json, `acked` in FLAGS);
- wall-clock times beside ticks: `time_iso`, `start_iso` (ISO 8601, UTC);
- retention: 1,200 failures (with windows) and 700 interval summaries
  older than (retention "1 day")
  are pruned in batches of 500 per second while the service runs, newer
  ones stay, the pruning is logged, status shows the retention."""
import os
import re
import sqlite3
import time


import cmontest as ct
import telemontest as tt
from cmontest import check

SPEC = tt.FSREAD_REPORT_SPEC
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def subjects(sink):
    return [m["Subject"] for m in sink.messages]


def run(env, reg, prog, reads, slow):
    s = env.snarflog(prog, reg=reg, cmd=tt.writer_cmd("--reads", reads, "--slow", slow))
    check(s.wait(30) == 0, "snarflog: %s", s.stderr())


def main():
    with ct.Env("telemon_hygiene") as env:
        sink = tt.MailSink()
        spec = env.path("hyg.pspec")
        with open(spec, "w") as f:
            f.write(SPEC)
        reg = env.registry()
        rc = ('(defaults (smtp "smtp://127.0.0.1:%d") (from "cmon@test.example")\n'
              '          (mailgroup "1 sec"))\n' % sink.port +
              tt.rc_class("fsread", spec=spec, mail="ops@test.example") +
              tt.rc_class("noisy", spec=spec, mail="ops@test.example",
                          extra="(notify-reports TRUE)"))
        tm = tt.Telemonitor(env, reg, rc)
        check(tm.json("status")["retention"] is None, "no retention by default")
        check("retention:        keep everything" in tm.ctl("status"), "status text")

        # 1. report assertions: stored, not mailed
        run(env, reg, "fsread", 6, "2")
        fails = tm.wait_failures(7, "--prog", "fsread")
        stats = [f for f in fails if f["assert"] == "read stats"]
        slow = [f for f in fails if f["assert"] == "read at most 10 ms"]
        check(len(stats) == 6 and all(f["report"] for f in stats), "report failures: %r", fails)
        check(len(slow) == 1 and not slow[0]["report"], "ordinary failure: %r", slow)
        ct.wait_for(lambda: sink.messages, 15, "the mail about the slow read")
        time.sleep(2.5)                     # a digest period and more
        check(subjects(sink) == ['[telemonitor] fsread on %s pid %d: "read at most 10 ms" failed'
                                 % (slow[0]["machine"], slow[0]["pid"])],
              "only the alert is mailed: %r", subjects(sink))
        table = tm.ctl("failures", "--prog", "fsread")
        check("report" in table and "FLAGS" in table.splitlines()[0], "FLAGS: %r", table)
        for f in fails:
            check(ISO.match(f["time_iso"]) and f["time_iso"] == f["time"], "time_iso: %r", f)
            check(f["start_iso"] is None or ISO.match(f["start_iso"]), "start_iso: %r", f)
            check(f["silenced"] is None and f["acked"] is False and f["acked_iso"] is None,
                  "not silenced nor acked: %r", f)

        # 2. a class that asks for them gets its report failures mailed
        run(env, reg, "noisy", 2, "")
        tm.wait_failures(2, "--prog", "noisy")
        ct.wait_for(lambda: any('noisy' in s and '"read stats" failed 1 more time' in s
                                for s in subjects(sink)), 15,
                    "the report failures mailed (prompt and digest) for notify-reports TRUE")

        # 3. silences
        n_mail = len(sink.messages)
        rc_, out, err = tm.ctl_rc("silence", "add", "prog=fsread", "assert=read at*",
                                  "-for", "1 hour", "-comment", "deploy in progress")
        check(rc_ == 0 and re.match(r"silence \d+ added, until ", out), "add: %r %r", out, err)
        sid = int(out.split()[1])
        sl = tm.json("silence", "list")
        check(len(sl) == 1 and sl[0]["id"] == sid and sl[0]["prog"] == "fsread" and
              sl[0]["assert"] == "read at*" and sl[0]["machine"] is None and
              sl[0]["comment"] == "deploy in progress" and ISO.match(sl[0]["until"]) and
              3500 < sl[0]["until_unix"] - time.time() <= 3600, "list: %r", sl)
        check("deploy in progress" in tm.ctl("silence", "list"), "list as a table")
        before = len(tm.failures("--prog", "fsread"))
        run(env, reg, "fsread", 4, "1")
        fails = tm.wait_failures(before + 5, "--prog", "fsread")
        quiet = [f for f in fails if f["silenced"] == sid]
        check(len(quiet) == 1 and quiet[0]["assert"] == "read at most 10 ms",
              "the silenced failure is stored and marked: %r", fails[-5:])
        check("silenced" in tm.ctl("failures", "--prog", "fsread"), "FLAGS silenced")
        time.sleep(2.5)
        check(len(sink.messages) == n_mail, "nothing mailed while silenced: %r",
              subjects(sink)[n_mail:])
        for bad, why in ((("silence", "add", "colour=red", "-for", "1 h"), "not a matcher"),
                         (("silence", "add", "prog=x"), "-until TIME or -for"),
                         (("silence", "add", "prog=x", "-for", "soon"), "not a duration"),
                         (("silence", "add", "prog=x", "-until", "2001-01-01"),
                          "must be in the future"),
                         (("silence", "rm", "999"), "no active silence 999"),
                         (("silence", "frob"), "expected add, list or rm"),
                         (("ack", "999"), "no failure 999")):
            rc_, out, err = tm.ctl_rc(*bad)
            check(rc_ != 0 and why in err, "%r: exit %d, %r", bad, rc_, err)
        check("silence %d added" % sid in tm.stderr(), "logged: %s", tm.stderr()[-2000:])
        # a restart keeps it
        tm.stop()
        tm.start()
        check([s["id"] for s in tm.json("silence", "list")] == [sid], "kept across a restart")
        check(tm.ctl("silence", "rm", str(sid)).strip() == "silence %d removed" % sid, "rm")
        check(tm.json("silence", "list") == [], "removed")
        run(env, reg, "fsread", 4, "1")
        ct.wait_for(lambda: len(sink.messages) > n_mail, 15, "mail again after rm")

        # an unlabelled assertion is matched as "line N"
        unlab = env.path("unlab.pspec")
        with open(unlab, "w") as f:
            f.write(SPEC.replace('"read stats": {& r : Read : false}',
                                 '{& r : Read : r.size <= 4096}'))
        tm.ctl("class", "add", "prog=unlab", "spec=" + unlab, "mail=ops@test.example")
        tm.ctl("silence", "add", "prog=unlab", "assert=line 1?", "-for", "10 min")
        run(env, reg, "unlab", 2, "")
        uf = tm.wait_failures(2, "--prog", "unlab")
        check(all(f["assert"] is None and f["line"] == 12 and f["silenced"] for f in uf),
              "unlabelled, silenced as 'line 12': %r", uf)

        # 4. ack
        fid = slow[0]["id"]
        check(tm.ctl("ack", str(fid), "-comment", "known: cold cache").strip() ==
              "failure %d acknowledged" % fid, "ack")
        f = [x for x in tm.failures("--prog", "fsread") if x["id"] == fid][0]
        check(f["acked"] is True and ISO.match(f["acked_iso"]) and
              f["ack_comment"] == "known: cold cache", "acked: %r", f)
        check("acked" in tm.ctl("failures", "--prog", "fsread"), "FLAGS acked")

        # 5. retention: old rows go in small batches, new ones stay
        tm.stop()
        db = sqlite3.connect(os.path.join(tm.state, "telemonitor.db"))
        recent = db.execute("SELECT count(*) FROM failures").fetchone()[0]
        old = time.time() - 3 * 86400
        base = db.execute("SELECT max(id) FROM failures").fetchone()[0] + 1
        wbase = db.execute("SELECT coalesce(max(id), 0) FROM windows").fetchone()[0] + 1
        db.executemany("INSERT INTO windows (id, instance_id, text) VALUES (?, 1, 'x')",
                       [(wbase + i,) for i in range(1200)])
        db.executemany("INSERT INTO failures (id, instance_id, assert, line, time, window_id)"
                       " VALUES (?, 1, 'old', 1, ?, ?)",
                       [(base + i, old + i, wbase + i) for i in range(1200)])
        # the checker's interval summaries (pcheck --summaries) go the same way
        db.executemany("INSERT INTO interval_summaries (instance_id, time, type, metric, count)"
                       " VALUES (1, ?, 'Read', 'time', 1)",
                       [(old + i,) for i in range(700)] + [(time.time(),)] * 3)
        db.commit()
        db.close()
        with open(tm.rc) as f:
            text = f.read()
        with open(tm.rc, "w") as f:
            f.write(text.replace('(mailgroup "1 sec")', '(mailgroup "1 sec") (retention "1 day")'))
        tm.start()
        st = tm.json("status")
        check(st["retention"] == "1 day" and st["retention_seconds"] == 86400, "status: %r", st)
        check("retention:        1 day" in tm.ctl("status"), "status text")
        ct.wait_for(lambda: "retention: pruned 1200 failures, 1200 windows" in tm.stderr(), 20,
                    "the pruning logged")
        def counts():
            db = sqlite3.connect(os.path.join(tm.state, "telemonitor.db"))
            try:
                return (db.execute("SELECT count(*) FROM failures").fetchone()[0],
                        db.execute("SELECT count(*) FROM windows WHERE id >= ?",
                                   (wbase,)).fetchone()[0],
                        db.execute("SELECT count(*) FROM interval_summaries WHERE time < ?",
                                   (time.time() - 86400,)).fetchone()[0],
                        db.execute("SELECT count(*) FROM interval_summaries WHERE time >= ?",
                                   (time.time() - 86400,)).fetchone()[0] >= 3)
            finally:
                db.close()
        # the last batch is committed with the next flush (TM_FLUSH_MS)
        ct.wait_for(lambda: counts() == (recent, 0, 0, True), 5,
                    "the recent failures and summaries only: %r" % (counts(),))
        st = tm.json("status")
        check("1200 failures pruned since start" in st["retention_status"] and
              st["retention_pruned"] == 1200, "status counts: %r", st)
        tm.stop()
        sink.close()


ct.run_test(main)
