"""One silence model (docs/alerting.md; issue 33 item 2), against the real
prometheus-alertmanager (Debian package) on 127.0.0.1 and a local SMTP
server: with an Alertmanager in the classes, its silences govern CMon's
mail and alerts, and `telemonctl silence` manages silences there.

(a) a silence added with amtool (or POSTed, without amtool) for prog=hushed
    stops CMon mailing and alerting hushed's failures: they are stored,
    counted and flagged silenced with the Alertmanager silence's id
    (`failures --json`: silenced, silenced_by; FLAGS silenced), while
    noisy's failures are mailed and alerted as before;
(b) `telemonctl silence add prog=firing -for "1 hour"` creates the silence
    in Alertmanager (createdBy telemonctl, prog="firing"; a glob becomes an
    anchored regex) and quiets firing's alert that is already firing
    (Alertmanager: state suppressed, silencedBy the id), and firing's later
    failures are not mailed; `telemonctl silence list` shows it (text and
    --json), `rm` expires it in Alertmanager;
(c) Alertmanager gone: the telemonitor says so once and keeps the last
    silences it read; `telemonctl silence list` exits 3.
Skips (exit 77) with the reason when Alertmanager is not installed or does
not start."""
import os
import subprocess
import time

import amtest
import cmontest as ct
import telemontest as tt
from cmontest import check

SPEC = tt.FSREAD_REPORT_SPEC
ASSERT = "read at most 10 ms"


def mails_about(sink, prog):
    return [m for m in sink.messages if ("%s on " % prog) in m.as_string()]


def add_silence_amtool(am, prog):
    """A silence of prog=PROG for an hour, by amtool or over the API."""
    if os.access(amtest.AMTOOL, os.X_OK):
        p = subprocess.run([amtest.AMTOOL, "--alertmanager.url=" + am.url, "silence", "add",
                            "prog=" + prog, "--duration=1h", "--comment=maintenance",
                            "--author=ops"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=30)
        check(p.returncode == 0, "amtool: %s", p.stderr.decode(errors="replace"))
        return p.stdout.decode().strip()
    now = time.time()
    iso = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))   # noqa: E731
    return am.post("/api/v2/silences", {
        "matchers": [{"name": "prog", "value": prog, "isRegex": False, "isEqual": True}],
        "startsAt": iso(now), "endsAt": iso(now + 3600), "createdBy": "ops",
        "comment": "maintenance"})["silenceID"]


def main():
    amtest.require()
    with ct.Env("telemon_am_silences") as env:
        am = amtest.Alertmanager(env, ct.free_port())
        am.start()
        sink = tt.MailSink()
        try:
            run(env, am, sink)
        finally:
            sink.close()


def run(env, am, sink):
    spec = env.path("am.pspec")
    with open(spec, "w") as f:
        f.write(SPEC)
    reg = env.registry()
    rc = ('(defaults (alertmanager "%s") (smtp "smtp://127.0.0.1:%d")\n'
          '          (from "cmon@test.example") (mailgroup "1 sec"))\n' % (am.url, sink.port) +
          "".join(tt.rc_class(p, spec=spec, mail="ops@test.example")
                  for p in ("hushed", "noisy", "firing")))
    tm = tt.Telemonitor(env, reg, rc)
    st = tm.json("status")
    check(st["alertmanagers"] == [am.url], "status --json alertmanagers: %r", st)
    n_silences = lambda: tm.json("status")["alertmanager_silences"]   # noqa: E731

    # (a) an amtool silence: stored and flagged, neither mailed nor alerted
    amid = add_silence_amtool(am, "hushed")
    check(len(amid) >= 32, "amtool printed the silence id: %r", amid)
    ct.wait_for(lambda: n_silences() == 1, 15, "the telemonitor read the silence")
    s = env.snarflog("hushed", reg=reg, cmd=tt.writer_cmd("--reads", 6, "--slow", "1,3"))
    check(s.wait(30) == 0, "snarflog: %s", s.stderr())
    n = env.snarflog("noisy", reg=reg, cmd=tt.writer_cmd("--reads", 4, "--slow", "1"))
    check(n.wait(30) == 0, "snarflog: %s", n.stderr())
    hushed = tm.wait_failures(2, "--prog", "hushed", "--assert", ASSERT)
    check(all(f["silenced"] == amid and f["silenced_by"] == "alertmanager" for f in hushed),
          "hushed's failures flagged with the Alertmanager silence: %r", hushed)
    check("silenced" in tm.ctl("failures", "--prog", "hushed"), "FLAGS silenced")
    noisy = tm.wait_failures(1, "--prog", "noisy", "--assert", ASSERT)
    check(noisy[0]["silenced"] is None and noisy[0]["silenced_by"] is None,
          "noisy is not silenced: %r", noisy)
    ct.wait_for(lambda: mails_about(sink, "noisy"), 15, "noisy's failure mailed")
    ct.wait_for(lambda: am.alerts(prog="noisy"), 15, "noisy's failure alerted")
    time.sleep(2)
    check(mails_about(sink, "hushed") == [], "hushed's failures not mailed: %r",
          [m["Subject"] for m in sink.messages])
    check(am.alerts(prog="hushed") == [], "hushed's failures not alerted")
    check(tm.json("status")["failures_since_start"] >= len(hushed) + 1,
          "silenced failures are counted: %r", tm.json("status"))

    # (b) telemonctl silence add, in Alertmanager, quiets a firing alert
    gate = env.path("gate")
    f = env.snarflog("firing", reg=reg, cmd=tt.writer_cmd(
        "--reads", 10, "--slow", "2,8", "--gate-after", 5, "--gate", gate))
    tm.wait_failures(1, "--prog", "firing", "--assert", ASSERT)
    ct.wait_for(lambda: [a for a in am.alerts(prog="firing")
                         if a["status"]["state"] == "active"], 15, "firing's alert active")
    ct.wait_for(lambda: mails_about(sink, "firing"), 15, "firing's first failure mailed")
    out = tm.ctl("silence", "add", "prog=firing", "-for", "1 hour", "-comment", "deploy")
    sid = out.split()[1]
    check(out.startswith("silence ") and am.url in out, "silence add: %r", out)
    made = [x for x in am.silences() if x["id"] == sid]
    check(len(made) == 1 and made[0]["createdBy"] == "telemonctl" and
          made[0]["comment"] == "deploy" and
          made[0]["matchers"] == [{"name": "prog", "value": "firing", "isRegex": False,
                                   "isEqual": True}], "in Alertmanager: %r", made)
    left = (time.mktime(time.strptime(made[0]["endsAt"][:19], "%Y-%m-%dT%H:%M:%S"))
            - time.mktime(time.strptime(made[0]["startsAt"][:19], "%Y-%m-%dT%H:%M:%S")))
    check(3500 < left <= 3601, "for 1 hour: %r", made[0])
    q = ct.wait_for(lambda: [a for a in am.alerts(prog="firing")
                             if a["status"]["state"] == "suppressed"], 15,
                    "firing's alert suppressed in Alertmanager")
    check(q[0]["status"]["silencedBy"] == [sid], "silencedBy: %r", q[0]["status"])
    # a glob becomes an anchored regular expression
    g = tm.json("silence", "add", "prog=fir?ng", "assert=read*", "-for", "30 min")
    gm = [x for x in am.silences() if x["id"] == g["id"]][0]["matchers"]
    check({(m["name"], m["value"], m["isRegex"]) for m in gm} ==
          {("prog", "fir.ng", True), ("assert", "read.*", True)}, "glob matchers: %r", gm)
    # list: text and JSON
    text = tm.ctl("silence", "list")
    check(sid in text and "prog=\"firing\"" in text and "deploy" in text and amid in text,
          "silence list: %s", text)
    lj = {x["id"]: x for x in tm.json("silence", "list")}
    check(set(lj) == {sid, g["id"], amid} and lj[sid]["comment"] == "deploy" and
          lj[sid]["created_by"] == "telemonctl" and lj[sid]["until"] and
          lj[sid]["matchers"][0]["value"] == "firing", "silence list --json: %r", lj)
    # later failures of firing: silenced, not mailed
    ct.wait_for(lambda: n_silences() == 3, 15, "the telemonitor read the new silences")
    mailed = len(mails_about(sink, "firing"))
    open(gate, "w").close()
    check(f.wait(30) == 0, "snarflog: %s", f.stderr())
    later = sorted(tm.wait_failures(2, "--prog", "firing", "--assert", ASSERT),
                   key=lambda x: x["id"])
    check(later[-1]["silenced"] in (sid, g["id"]) and later[0]["silenced"] is None,
          "the failure after the silence is flagged, the one before not: %r", later)
    time.sleep(2)
    check(len(mails_about(sink, "firing")) == mailed, "not mailed once silenced")
    # rm: expired in Alertmanager
    check(tm.ctl("silence", "rm", sid).strip() == "silence %s removed" % sid, "rm")
    tm.ctl("silence", "rm", g["id"])
    check(sid not in [x["id"] for x in am.silences()] and
          sid in [x["id"] for x in am.silences("expired")], "expired in Alertmanager")
    check(sid not in tm.ctl("silence", "list"), "no longer listed")
    rc_, _, err = tm.ctl_rc("silence", "rm", "00000000-0000-0000-0000-000000000000")
    check(rc_ == 1 and "Alertmanager" in err, "rm of no silence: exit %d: %s", rc_, err)
    ct.wait_for(lambda: n_silences() == 1, 15, "the telemonitor read that they ended")

    # (c) Alertmanager gone: the last known silences stay in force
    am.proc.kill()
    ct.wait_for(lambda: "cannot read the silences of" in tm.stderr(), 15, "logged")
    s = env.snarflog("hushed", reg=reg, cmd=tt.writer_cmd("--reads", 4, "--slow", "1"))
    check(s.wait(30) == 0, "snarflog: %s", s.stderr())
    h2 = tm.wait_failures(len(hushed) + 1, "--prog", "hushed", "--assert", ASSERT)
    check(h2[0]["silenced"] == amid, "still silenced while Alertmanager is down: %r", h2[0])
    time.sleep(6)
    check(tm.stderr().count("cannot read the silences of") == 1, "logged once: %s",
          tm.stderr()[-2000:])
    rc_, _, err = tm.ctl_rc("silence", "list")
    check(rc_ == 3 and "cannot reach the Alertmanager" in err, "list: exit %d: %s", rc_, err)
    check(mails_about(sink, "hushed") == [], "hushed never mailed")
    tm.stop()


ct.run_test(main)
