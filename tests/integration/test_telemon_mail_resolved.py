"""telemonitor's "resolved" mail (docs/alerting.md, "Mail: firing and
resolved"), against a local SMTP sink: mail follows the alerts' states.

- fsread, (mail-resolved TRUE) (resolve-after "2 sec"): its slow read is
  mailed; the program keeps running (held at a gate) and, with no
  failure for resolve-after, a mail with "resolved" in its subject comes
  while the instance is still monitored. Its end later sends no second one.
- fsoff: the same without mail-resolved (default FALSE): its failure is
  mailed, no resolved mail ever.
- fssilent: (mail-resolved TRUE) and a resolve-after of an hour; after its
  failure mail, `telemonctl silence add prog=fssilent`, then its instance
  ends: a silenced pair gets no resolved mail.
- fswitness: (mail-resolved TRUE), an hour's resolve-after, started once fsoff and fssilent have
  ended; its instance ends and its resolved mail ("the instance ended")
  comes, so by then any resolved mail of the two before would have come.
No wall-clock assertion: each step waits for what it needs."""
import cmontest as ct
import telemontest as tt
from cmontest import check


def subjects(sink):
    return [m["Subject"] for m in sink.messages]


def text(m):
    return m.get_payload(decode=True).decode()


def main():
    with ct.Env("telemon_mail_resolved") as env:
        sink = tt.MailSink()
        reg = env.registry()
        on = '(mail-resolved TRUE) (resolve-after "2 sec")'
        rc = ('(defaults (smtp "smtp://127.0.0.1:%d") (from "cmon@test.example"))\n'
              % sink.port +
              tt.rc_class("fsread", spec=tt.FSREAD_SPEC, mail="ops@test.example", extra=on) +
              tt.rc_class("fsoff", spec=tt.FSREAD_SPEC, mail="ops@test.example",
                          extra='(resolve-after "2 sec")') +
              tt.rc_class("fssilent", spec=tt.FSREAD_SPEC, mail="ops@test.example",
                          extra='(mail-resolved TRUE) (resolve-after "1 hour")') +
              tt.rc_class("fswitness", spec=tt.FSREAD_SPEC, mail="ops@test.example",
                          extra='(mail-resolved TRUE) (resolve-after "1 hour")'))
        tm = tt.Telemonitor(env, reg, rc)

        def mail_of(prog, word):
            return [m for m in sink.messages
                    if m["Subject"].startswith("[telemonitor] %s on " % prog) and
                    m["Subject"].endswith(word)]

        # fsread: mailed, then resolved while it runs on
        gate = env.path("fsread.gate")
        s = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd(
            "--reads", 20, "--slow", 3, "--gate-after", 10, "--gate", gate))
        ct.wait_for(lambda: mail_of("fsread", "failed"), 30, "the failure mail of fsread")
        res = ct.wait_for(lambda: mail_of("fsread", "resolved"), 30,
                          "the resolved mail of fsread")[0]
        inst = tm.instance(lambda i: i["prog"] == "fsread")
        check(inst["state"] == "monitoring", "resolved while it runs: %r", inst)
        check(res["Subject"] == '[telemonitor] fsread on %s pid %d: "read at most 10 ms" resolved'
              % (inst["machine"], inst["pid"]), "subject: %r", res["Subject"])
        body = text(res)
        check("no failure for 2 s (resolve-after)" in body and "failed 1 time from" in body,
              "body: %r", body)
        check(res["To"] == "ops@test.example", "recipients: %r", res["To"])
        with open(gate, "w"):
            pass
        check(s.wait(30) == 0, "snarflog: %s", s.stderr())
        tm.instance(lambda i: i["prog"] == "fsread" and i["state"] == "ended",
                    what="fsread to end")

        # fsoff: no resolved mail
        off = env.snarflog("fsoff", reg=reg, cmd=tt.writer_cmd("--reads", 10, "--slow", 3))
        ct.wait_for(lambda: mail_of("fsoff", "failed"), 30, "the failure mail of fsoff")
        check(off.wait(30) == 0, "snarflog: %s", off.stderr())
        tm.instance(lambda i: i["prog"] == "fsoff" and i["state"] == "ended",
                    what="fsoff to end")

        # fssilent: silenced after its failure mail, then it ends
        sgate = env.path("fssilent.gate")
        sil = env.snarflog("fssilent", reg=reg, cmd=tt.writer_cmd(
            "--reads", 20, "--slow", 3, "--gate-after", 10, "--gate", sgate))
        ct.wait_for(lambda: mail_of("fssilent", "failed"), 30, "the failure mail of fssilent")
        tm.ctl("silence", "add", "prog=fssilent", "-for", "1 hour")
        with open(sgate, "w"):
            pass
        check(sil.wait(30) == 0, "snarflog: %s", sil.stderr())
        tm.instance(lambda i: i["prog"] == "fssilent" and i["state"] == "ended",
                    what="fssilent to end")

        # fswitness: resolved when its instance ends
        w = env.snarflog("fswitness", reg=reg, cmd=tt.writer_cmd("--reads", 10, "--slow", 3))
        check(w.wait(30) == 0, "snarflog: %s", w.stderr())
        wres = ct.wait_for(lambda: mail_of("fswitness", "resolved"), 30,
                           "the resolved mail of fswitness")[0]
        check("the instance ended" in text(wres), "ended: %r", text(wres))

        check(not mail_of("fsoff", "resolved"), "no resolved mail without mail-resolved: %r",
              subjects(sink))
        check(not mail_of("fssilent", "resolved"), "no resolved mail for a silenced pair: %r",
              subjects(sink))
        check(len(mail_of("fsread", "resolved")) == 1, "one resolved mail for fsread: %r",
              subjects(sink))
        tm.stop()
        sink.close()


ct.run_test(main)
