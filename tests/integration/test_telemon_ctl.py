"""telemonctl: bad input of every kind gets one clear line on standard
error and a defined exit status (2: bad command line, 1: the service
refused, 3: no service); classes added, changed and removed live are
saved to STATE/classes.rc (the admin's telemonrc is never written: it
stays byte for byte what it was, comments and all, with no FILE~), sent
to the registry at once, and still there after a restart (a class of the
telemonrc changed or removed live stays changed or removed); --json gives JSON for
every listing; garbage on the control socket harms nobody."""
import hashlib
import json
import os
import shutil
import socket
import subprocess

import cmontest as ct
import telemontest as tt
from cmontest import check


def run(state, *args, cwd=None):
    p = subprocess.run([ct.binary("telemonctl"), "-state", state] + list(args), cwd=cwd,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def expect(state, status, fragment, *args, cwd=None):
    rc, out, err = run(state, *args, cwd=cwd)
    check(rc == status, "telemonctl %s: exit %d, expected %d (%r)", " ".join(args), rc,
          status, err)
    if status == 2:
        # usage errors: the message and the Try line (cmon/cmdline.h), nothing on stdout
        check(err.startswith("telemonctl: ") and err.count("\n") == 2 and out == "" and
              err.endswith("\nTry 'telemonctl --help' for more information.\n"),
              "usage error shape: %r %r", out, err)
    elif status:
        check(err.startswith("telemonctl: ") and err.count("\n") == 1,
              "one line on stderr: %r", err)
        check(fragment in err, "telemonctl %s: %r lacks %r", " ".join(args), err, fragment)
    return out


def main():
    with ct.Env("telemon_ctl") as env:
        # no service
        os.mkdir(env.path("empty"))
        expect(env.path("empty"), 3, "cannot reach the telemonitor", "status")

        reg = env.registry()
        # no classes: the listing says so on stdout, the hint goes to stderr
        tm0 = tt.Telemonitor(env, reg, "; nothing yet\n", name="tm0")
        rc, out, err = run(tm0.state, "classes")
        check(rc == 0 and out.endswith("\n(no classes)\n") and "Add one" not in out and
              "Add one with: telemonctl class add prog=NAME spec=FILE" in err,
              "no classes: %r %r", out, err)
        tm0.stop()
        tm = tt.Telemonitor(env, reg, "; the configuration\n" +
                            tt.rc_class("fsread", tool="cat >/dev/null", auto=False))
        st = tm.state
        classes_rc = os.path.join(st, "classes.rc")

        def rc_sum():
            with open(tm.rc, "rb") as f:
                return hashlib.sha256(f.read()).hexdigest()
        rc_before = rc_sum()
        # usage errors: exit 2
        for args, frag in [((), "no command given"), (("frobnicate",), "unknown command"),
                           (("start",), "an id is missing"), (("start", "abc"), "not an id"),
                           (("stop", "0"), "not an id"), (("window", "1", "2"), "one id"),
                           (("failures", "--day", "2024-01-01"), "failures takes"),
                           (("failures", "--since", "soonish"), "--since: 'soonish'"),
                           (("failures", "--limit", "0"), "--limit"),
                           (("classes", "extra"), "takes no arguments"),
                           (("status", "--frobnicate"), "unrecognized option '--frobnicate'"),
                           (("class",), "expected add, set or rm"),
                           (("class", "add"), "give PROPERTY=VALUE"),
                           (("class", "add", "noequals"), "expected PROPERTY=VALUE"),
                           (("class", "set", "1"), "PROPERTY=VALUE pairs after the id"),
                           (("class", "rm", "x"), "not an id"),
                           (("stats", "--prog", "x"), "needs --prog and --assert"),
                           (("instances", "--prog", "x"), "only --all and --limit"),
                           (("typescript", ""), "empty argument")]:
            expect(st, 2, frag, *args)
        check(run(st, "--help")[0] == 0 and run(st, "--help")[1].startswith("Usage: telemonctl"),
              "--help")

        # refused by the service: exit 1
        for args, frag in [(("start", "999"), "no running instance 999"),
                           (("stop", "999"), "no running instance 999"),
                           (("window", "999"), "no failure 999"),
                           (("typescript", "999"), "no instance 999"),
                           (("class", "rm", "999"), "no class 999"),
                           (("class", "set", "999", "auto=TRUE"), "no class 999"),
                           (("class", "add", "prog=x", "tool=cat", "pid=twelve"),
                            "pid: \"twelve\" is not"),
                           (("class", "add", "prog=a/b", "tool=cat"), "prog: \"a/b\" is not"),
                           (("class", "add", "prog=x", "colour=red"), "colour: unknown property"),
                           (("class", "add", "prog=x", "tool=cat", "block=maybe"),
                            "block: expected TRUE or FALSE"),
                           (("class", "add", "prog=x", "tool=cat", "smtp=smtp://h"),
                            "smtp: only allowed in (defaults"),
                           (("class", "add", "prog=fsread", "tool=cat"), "the same prog"),
                           (("class", "add", "prog=y", "spec=/nonexistent.pspec"),
                            "spec: cannot read /nonexistent.pspec"),
                           (("class", "set", "1", "window=forever"), "window: \"forever\"")]:
            expect(st, 1, frag, *args)
        check(rc_sum() == rc_before and not os.path.exists(classes_rc),
              "refused changes are not saved")
        check("live classes:     %s (none yet)" % classes_rc in tm.ctl("status"), "status: %r",
              tm.ctl("status"))

        # live changes, saved; the spec path is made absolute by telemonctl
        shutil.copy(tt.FSREAD_SPEC, env.path("my.pspec"))
        out = expect(st, 0, "", "class", "add", "prog=other", "spec=my.pspec",
                     "window=100 after 10", cwd=env.dir)
        check("class 2 added; saved to %s" % classes_rc in out, "add: %r", out)
        with open(classes_rc) as f:
            saved = f.read()
        check('(prog "other")' in saved and '(spec "%s")' % env.path("my.pspec") in saved,
              "saved: %r", saved)
        check(saved.startswith("; Classes changed with telemonctl") and
              "written by telemonitor" in saved, "header: %r", saved)
        check(rc_sum() == rc_before and not os.path.exists(tm.rc + "~"),
              "the telemonrc is not written, no backup made")
        check(tm.json("status")["classes_rc"] == classes_rc and
              "live classes:     %s\n" % classes_rc in tm.ctl("status"), "status names classes.rc")
        s = env.snarflog("other", reg=reg, cmd=tt.writer_cmd("--reads", 20, "--slow", "3"))
        check(s.wait(30) == 0, "snarflog: %s", s.stderr())
        check(len(tm.wait_failures(1, "--prog", "other")) == 1, "monitored at once")

        expect(st, 0, "", "class", "set", "2", "auto=FALSE", "mail=ops@example.org")
        c2 = [c for c in tm.json("classes") if c["id"] == 2][0]
        check(not c2["auto"] and c2["mail"] == "ops@example.org" and
              c2["window"] == "100 after 10", "set: %r", c2)
        check("(auto FALSE)" in open(classes_rc).read(), "set saved")
        check(c2["notify_reports"] is False and c2["alertmanager"] is None, "defaults: %r", c2)
        expect(st, 0, "", "class", "set", "2", "notify-reports=TRUE",
               "alertmanager=http://127.0.0.1:9/")
        c2 = [c for c in tm.json("classes") if c["id"] == 2][0]
        check(c2["notify_reports"] is True and c2["alertmanager"] == "http://127.0.0.1:9/",
              "notify-reports and alertmanager set: %r", c2)
        text = open(classes_rc).read()
        check("(notify-reports TRUE)" in text and '(alertmanager "http://127.0.0.1:9/")' in text,
              "saved: %r", text)
        s = env.snarflog("other", reg=reg, cmd=tt.writer_cmd("--reads", 5, "--linger", 1))
        tm.instance(lambda i: i["prog"] == "other" and i["state"] == "listed",
                    what="a listed instance now that the class is manual")
        check(s.wait(30) == 0, "snarflog: %s", s.stderr())

        out = expect(st, 0, "", "class", "rm", "2", "--json")
        check(json.loads(out) == {"id": 2, "result": "removed"}, "rm --json: %r", out)
        check([c["id"] for c in tm.json("classes")] == [1], "removed")
        check('"other"' not in open(classes_rc).read(), "rm saved")

        # the saved file is what a restart reads
        expect(st, 0, "", "class", "add", "prog=third", "tool=cat >/dev/null")
        tm.proc.signal(15)
        tm.proc.wait(10)
        tm.start()
        check([c["prog"] for c in tm.json("classes")] == ["fsread", "third"],
              "classes after a restart: %r", tm.json("classes"))
        # a telemonrc class changed, then removed, stays so across restarts
        expect(st, 0, "", "class", "set", "1", "tool=cat >/dev/null 2>&1")
        tm.proc.signal(15)
        tm.proc.wait(10)
        tm.start()
        got = [(c["prog"], c["tool"]) for c in tm.json("classes")]
        check(got == [("fsread", "cat >/dev/null 2>&1"), ("third", "cat >/dev/null")],
              "telemonrc class changed, after a restart: %r", got)
        fs_id = [c["id"] for c in tm.json("classes") if c["prog"] == "fsread"][0]
        expect(st, 0, "", "class", "rm", str(fs_id))
        check("(removed" in open(classes_rc).read(), "tombstone: %r", open(classes_rc).read())
        tm.proc.signal(15)
        tm.proc.wait(10)
        tm.start()
        check([c["prog"] for c in tm.json("classes")] == ["third"],
              "telemonrc class removed, after a restart: %r", tm.json("classes"))
        check(rc_sum() == rc_before and not os.path.exists(tm.rc + "~") and
              open(tm.rc).read().startswith("; the configuration"),
              "telemonrc byte-identical, with its comment, after add, set and rm")

        # every listing has --json
        for args in (["status"], ["classes"], ["instances", "--all"], ["failures"],
                     ["stats", "--prog", "other", "--assert", "read at most 10 ms"]):
            json.loads(tm.ctl(*(args + ["--json"])))

        # garbage on the control socket
        path = os.path.join(st, "control.sock")
        for junk, want in [(b"hello\0\0", b"error not a telemonctl/1 request"),
                           (b"\0", b"error "), (b"x" * 70000, b"error request too long"),
                           (b"telemonctl/1\0text\00080\0ascii\0\0", b"error no command")]:
            c = socket.socket(socket.AF_UNIX)
            c.connect(path)
            try:
                c.sendall(junk)
            except BrokenPipeError:
                pass
            c.settimeout(15)
            got = b""
            while True:
                try:
                    chunk = c.recv(4096)
                except (ConnectionResetError, socket.timeout):
                    break
                if not chunk:
                    break
                got += chunk
            c.close()
            check(got.startswith(want), "junk %r: answer %r", junk[:20], got)
        c = socket.socket(socket.AF_UNIX)
        c.connect(path)
        c.sendall(b"telemonctl/1\0")              # and then silence: it must not matter
        check(tm.json("status")["classes"] == 1, "still answering")
        c.close()
        tm.stop()

        # a classes.rc the service cannot read stops it at start, naming the file
        with open(classes_rc, "a") as f:
            f.write('(class (prog "x") (colour "red"))\n')
        p = subprocess.run([ct.binary("telemonitor"), "-check", "-rc", tm.rc, "-state", st],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        err = p.stderr.decode()
        check(p.returncode == 2 and classes_rc + ":" in err and "colour: unknown property" in err,
              "bad classes.rc: %d %r", p.returncode, err)
        with open(classes_rc, "w") as f:
            f.write('(defaults (block TRUE))\n')
        p = subprocess.run([ct.binary("telemonitor"), "-check", "-rc", tm.rc, "-state", st],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        check(p.returncode == 2 and "defaults: not allowed here" in p.stderr.decode(),
              "defaults in classes.rc: %d %r", p.returncode, p.stderr)
        os.unlink(classes_rc)
        p = subprocess.run([ct.binary("telemonitor"), "-check", "-rc", tm.rc, "-state", st],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        check(p.returncode == 0 and "(1 classes)" in p.stdout.decode(),
              "without classes.rc, the telemonrc alone: %r", p.stdout)


ct.run_test(main)
