"""Mail that is not sent yet survives the telemonitor's death. Failures
occur while the SMTP relay is down; the telemonitor is killed with
SIGKILL (once while a digest is still being collected, once after it was
composed), started again on the same state directory, and when the relay
comes up every failure arrives by mail exactly once: each failure id is
counted in the prompt mails and digests received. Then, with the relay
up, it is killed inside a grouping period (after the prompt mail was
accepted and forgotten): the failure waiting for its digest is mailed
after the restart, and the prompt mail is not sent again. A clean stop
(SIGTERM) with a mail queued keeps it too. A database of schema version 1
(before the mail queue) is upgraded in place."""
import collections
import os
import re
import sqlite3
import time


import cmontest as ct
import telemontest as tt
from cmontest import check


def failure_ids(messages):
    """How many times each failure id was mailed."""
    n = collections.Counter()
    for m in messages:
        for i in re.findall(r"^Failure (\d+) at ", m.get_payload(decode=True).decode(), re.M):
            n[int(i)] += 1
    return n


def unsent(state):
    """Failures not mailed yet according to the store of a dead telemonitor:
    those in queued mails plus those waiting for a digest."""
    db = sqlite3.connect(os.path.join(state, "telemonitor.db"))
    try:
        queued = db.execute("SELECT coalesce(sum(failures), 0) FROM mail_queue").fetchone()[0]
        waiting = db.execute("SELECT count(*) FROM mail_digest").fetchone()[0]
    finally:
        db.close()
    return queued, waiting


SCHEMA = 17       # the telemonitor's store schema (daemons/telemonitor/store.h)


def mail_status(tm):
    return tm.json("status")["mail"]


def sent_queued(tm):
    st = mail_status(tm)
    return st["sent"], st["queued"]


def main():
    with ct.Env("telemon_mail_restart") as env:
        port = ct.free_port()
        reg = env.registry()
        rc = ('(defaults (smtp "smtp://127.0.0.1:%d") (from "cmon@test.example")\n'
              '          (mailgroup "3 sec"))\n' % port +
              tt.rc_class("fsread", spec=tt.FSREAD_SPEC, mail="ops@test.example") +
              tt.rc_class("quiet", spec=tt.FSREAD_SPEC, mail="ops@test.example",
                          mailgroup="6 sec"))

        # a database from before the mail queue (schema 1) is upgraded
        tm = tt.Telemonitor(env, reg, rc)
        check(tm.json("status")["schema"] == SCHEMA, "schema: %r", tm.json("status"))
        # a fresh state directory: the store is created at the current
        # schema, said once, and nothing is "upgraded"
        err = tm.stderr()
        check(err.count("store: created ") == 1 and "(schema %d)" % SCHEMA in err and
              "upgraded" not in err, "a fresh store logged once: %s", err)
        tm.stop()
        db = sqlite3.connect(os.path.join(tm.state, "telemonitor.db"))
        db.executescript("DROP TABLE mail_queue; DROP TABLE mail_digest;"
                         "ALTER TABLE instances DROP COLUMN token; DROP TABLE store_outages;"
                         "DROP INDEX verdicts_time; DROP TABLE silences;"
                         "DROP TABLE alert_outbox; DROP TABLE alerts_open;"
                         "DROP TRIGGER failures_counted; DROP TABLE failure_counts;"
                         "DROP INDEX failures_report_rows;"
                         "ALTER TABLE failures DROP COLUMN report;"
                         "ALTER TABLE failures DROP COLUMN silence_id;"
                         "ALTER TABLE failures DROP COLUMN acked;"
                         "ALTER TABLE failures DROP COLUMN ack_comment;"
                         "ALTER TABLE failures DROP COLUMN am_silence;"
                         "ALTER TABLE instances DROP COLUMN owner;"
                         "ALTER TABLE instances DROP COLUMN lease_until;"
                         "DROP INDEX instances_prog_version;"
                         "DROP TABLE interval_summaries;"
                         "ALTER TABLE instances DROP COLUMN version;"
                         "ALTER TABLE instances DROP COLUMN unchecked;"
                         "ALTER TABLE instances DROP COLUMN checked;"
                         "DROP TABLE leases; DROP TABLE nodes;"
                         "ALTER TABLE verdicts DROP COLUMN from_rec;"
                         "ALTER TABLE verdicts DROP COLUMN to_rec;"
                         "ALTER TABLE verdicts DROP COLUMN partial;"
                         "DELETE FROM sqlite_sequence; PRAGMA user_version = 1;")
        db.close()
        tm.start()
        err = tm.stderr()
        check(err.count("schema upgraded") == 1 and
              "schema upgraded from version 1 to %d" % SCHEMA in err and "store: created" not in err,
              "upgrade logged once: %s", err)
        check(tm.json("status")["schema"] == SCHEMA, "upgraded: %r", tm.json("status"))

        # 1. the relay is down: a prompt mail is queued, three failures wait
        #    for their digest; SIGKILL
        s1 = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd(
            "--reads", 40, "--slow", "3,10,20,30"))
        check(s1.wait(30) == 0, "snarflog: %s", s1.stderr())
        tm.wait_failures(4)
        ct.wait_for(lambda: mail_status(tm)["failed_attempts"] > 0, 15, "a failed attempt")
        tm.proc.kill()
        queued, waiting = unsent(tm.state)
        check(queued >= 1 and queued + waiting == 4, "all four kept: %d in queued mails, "
              "%d waiting for a digest", queued, waiting)

        # 2. started again, relay still down: the digest is composed and
        #    queued behind the prompt mail; another instance fails; SIGKILL
        tm.start()
        check("from before the restart" in tm.stderr(), "restored: %s", tm.stderr())
        s2 = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd("--reads", 20, "--slow", "5"))
        check(s2.wait(30) == 0, "snarflog: %s", s2.stderr())
        tm.wait_failures(5)
        ct.wait_for(lambda: sent_queued(tm) == (0, 3), 20,
                    "the digest queued with the prompt mails")
        tm.proc.kill()
        check(unsent(tm.state) == (5, 0), "all five in queued mails: %r", unsent(tm.state))

        # 3. the relay comes up, the telemonitor starts again: every failure
        #    arrives exactly once
        relay = tt.MailSink(port)
        tm.start()
        ct.wait_for(lambda: len(failure_ids(relay.messages)) == 5, 30,
                    "mail about all five failures")
        ct.wait_for(lambda: sent_queued(tm) == (3, 0), 15,
                    "the mails forgotten")
        time.sleep(1.0)                     # nothing else is on its way
        ids = failure_ids(relay.messages)
        check(sorted(ids) == sorted(f["id"] for f in tm.failures()) and
              set(ids.values()) == {1}, "each failure once: %r", ids)
        check(len(relay.messages) == 3, "two prompt mails and a digest: %r",
              [m["Subject"] for m in relay.messages])
        digest = [m for m in relay.messages if "more times" in m["Subject"]]
        check(len(digest) == 1 and digest[0]["Subject"].endswith("failed 3 more times"),
              "the digest of the three: %r", [m["Subject"] for m in relay.messages])
        check(len({m["Message-ID"] for m in relay.messages}) == 3, "Message-IDs")
        tm.proc.kill()
        check(unsent(tm.state) == (0, 0), "nothing left: %r", unsent(tm.state))

        # 4. relay up; SIGKILL inside a grouping period, after the prompt
        #    mail was accepted: the waiting failure is mailed after the
        #    restart, the prompt mail is not sent again
        tm.start()
        s3 = env.snarflog("quiet", reg=reg, cmd=tt.writer_cmd("--reads", 30, "--slow", "4,14"))
        check(s3.wait(30) == 0, "snarflog: %s", s3.stderr())
        quiet = tm.wait_failures(2, "--prog", "quiet")
        ct.wait_for(lambda: sent_queued(tm) == (1, 0), 15,
                    "the prompt mail accepted")
        tm.proc.kill()
        check(unsent(tm.state) == (0, 1), "one failure waiting: %r", unsent(tm.state))
        tm.start()
        ct.wait_for(lambda: quiet[1]["id"] in failure_ids(relay.messages), 30,
                    "the digest after the restart")
        ct.wait_for(lambda: sent_queued(tm) == (1, 0), 15,
                    "the digest forgotten")

        # 5. a clean stop with the relay down keeps the queued mail too
        relay.close()
        s4 = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd("--reads", 10, "--slow", "2"))
        check(s4.wait(30) == 0, "snarflog: %s", s4.stderr())
        tm.wait_failures(8)
        ct.wait_for(lambda: mail_status(tm)["failed_attempts"] > 0, 15, "a failed attempt")
        tm.stop()
        check("1 mail not sent yet, kept for the next start" in tm.stderr(), "log: %s",
              tm.stderr())
        relay2 = tt.MailSink(port)
        tm.start()
        ct.wait_for(lambda: sent_queued(tm) == (1, 0), 30,
                    "the kept mail sent")

        ids = failure_ids(relay.messages + relay2.messages)
        fails = tm.failures()
        check(len(fails) == 8 and sorted(ids) == sorted(f["id"] for f in fails) and
              set(ids.values()) == {1}, "every failure mailed exactly once: %r", ids)
        relay2.close()
        tm.stop()


ct.run_test(main)
