"""telemonitor mail, against a local SMTP server (Python's smtpd): the first
failure of an assertion is mailed at once to every address of the class;
later ones within the grouping period (`mailgroup`, here 2 s) arrive
together in one digest; the mail names program, machine, pid and
assertion, has the metrics and the telemonctl command for the log window.
A relay that is down is retried with backoff, and meanwhile monitoring
goes on: failures are stored as they come."""
import email
import threading
import time
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)   # both deprecated in 3.11
    import asyncore
    import smtpd

import cmontest as ct
import telemontest as tt
from cmontest import check


class Sink(smtpd.SMTPServer):
    """Keeps every message it is given."""

    def __init__(self, port=0):
        super().__init__(("127.0.0.1", port), None, decode_data=False)
        self.port = self.socket.getsockname()[1]
        self.messages = []

    def process_message(self, peer, mailfrom, rcpttos, data, **kw):
        self.messages.append({"when": time.monotonic(), "from": mailfrom, "to": sorted(rcpttos),
                              "msg": email.message_from_bytes(data)})


def serve(sink, stop):
    while not stop.is_set():
        asyncore.loop(timeout=0.05, count=1, map=None)


def body(m):
    return m["msg"].get_payload(decode=True).decode()


def main():
    with ct.Env("telemon_mail") as env:
        sink = Sink()
        stop = threading.Event()
        th = threading.Thread(target=serve, args=(sink, stop), daemon=True)
        th.start()
        reg = env.registry()
        rc = ('(defaults (smtp "smtp://127.0.0.1:%d") (from "cmon@test.example")\n'
              '          (mailgroup "2 sec"))\n' % sink.port +
              tt.rc_class("fsread", spec=tt.FSREAD_SPEC,
                          mail="ops@test.example, dev@test.example"))
        tm = tt.Telemonitor(env, reg, rc)

        s = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd(
            "--reads", 60, "--slow", "3,10,20,30"))
        check(s.wait(30) == 0, "snarflog: %s", s.stderr())
        fails = tm.wait_failures(4)
        first = ct.wait_for(lambda: sink.messages, 15, "the first mail")[0]
        inst = tm.instance(lambda i: i["prog"] == "fsread")
        subj = first["msg"]["Subject"]
        check(subj == '[telemonitor] fsread on %s pid %d: "read at most 10 ms" failed'
              % (inst["machine"], inst["pid"]), "subject: %r", subj)
        check(first["to"] == ["dev@test.example", "ops@test.example"], "recipients: %r",
              first["to"])
        check(first["from"] == "cmon@test.example", "sender: %r", first["from"])
        text = body(first)
        check("Failure %d " % fails[0]["id"] in text, "the first failure: %r", text)
        check("size = 8192, hit = true" in text, "metrics: %r", text)
        check("telemonctl -state %s window %d" % (tm.state.rstrip("/"), fails[0]["id"])
              in text.replace(tm.state, tm.state.rstrip("/")), "window command: %r", text)
        check("within 2 s" in text, "the grouping is announced: %r", text)

        digest = ct.wait_for(lambda: sink.messages[1:], 15, "the digest")[0]
        check(len(sink.messages) == 2, "one prompt mail and one digest: %r",
              [m["msg"]["Subject"] for m in sink.messages])
        check(digest["when"] - first["when"] >= 1.0, "the digest waits for the period")
        check(digest["msg"]["Subject"].endswith('"read at most 10 ms" failed 3 more times'),
              "digest subject: %r", digest["msg"]["Subject"])
        dtext = body(digest)
        for f in fails[1:]:
            check("Failure %d " % f["id"] in dtext and "window %d" % f["id"] in dtext,
                  "failure %d in the digest: %r", f["id"], dtext)
        time.sleep(2.5)
        check(len(sink.messages) == 2, "nothing more after a quiet period")

        # the relay goes down: monitoring goes on, mail is retried
        stop.set()
        th.join()
        sink.close()
        port = sink.port
        s2 = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd("--reads", 20, "--slow", "5"))
        check(s2.wait(30) == 0, "snarflog: %s", s2.stderr())
        tm.wait_failures(5)                       # stored while the relay is down
        ct.wait_for(lambda: "failed attempts" in tm.ctl("status") and
                    "0 failed attempts" not in tm.ctl("status"), 15, "a failed attempt")
        check("mail to" in tm.stderr() and "retrying" in tm.stderr(), "logged: %s", tm.stderr())
        sink2 = Sink(port)
        stop2 = threading.Event()
        th2 = threading.Thread(target=serve, args=(sink2, stop2), daemon=True)
        th2.start()
        late = ct.wait_for(lambda: sink2.messages, 20, "the mail after the relay is back")[0]
        check("failed" in late["msg"]["Subject"], "late mail: %r", late["msg"]["Subject"])
        # the loop learns of the relay's acceptance just after the relay does
        ct.wait_for(lambda: (st := tm.json("status")["mail"])["sent"] == 3 and st["queued"] == 0,
                    10, "status: 3 sent, 0 queued")
        stop2.set()
        th2.join()
        sink2.close()
        tm.stop()


ct.run_test(main)
