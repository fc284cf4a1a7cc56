"""Bad telemonrc files: one fixture per kind of error. The service refuses
to start (exit status 2, nothing listening, no database touched) with one
message naming the file, the line and the property; `-check` gives the
same verdict without starting (also for an http address start refuses
to serve on). A good file passes -check; a spec that
needs several passes passes too, with pcheck's warning that it reports
only at the end of each log, where the class allows it (allow-unbounded)."""
import os
import subprocess

import cmontest as ct
import telemontest as tt
from cmontest import check

# name: (file text, expected message after "FILE:")
FIXTURES = {
    "defaults_not_first": ('(class (prog "a") (tool "cat"))\n(defaults (tool "x"))\n',
                           "2: error: defaults: must come before every (class ...)"),
    "defaults_twice": ('(defaults)\n; again\n(defaults (block FALSE))\n',
                       "3: error: defaults: given twice (first on line 1)"),
    "unknown_property": ('(class (prog "a")\n       (colour "red"))\n',
                         "2: error: colour: unknown property"),
    "boolean_expected": ('(class (prog "a") (tool "cat")\n  (auto "yes"))\n',
                         "2: error: auto: expected TRUE or FALSE, found text \"yes\""),
    "text_expected": ('(class (prog lectern) (tool "cat"))\n',
                      "1: error: prog: expected a \"text\" value, found 'lectern'"),
    "defaults_only": ('(class (prog "a") (tool "cat")\n (smtp "smtp://x"))\n',
                      "2: error: smtp: only allowed in (defaults ...)"),
    "bad_smtp": ('(defaults (smtp "mailto:root"))\n',
                 "1: error: smtp: \"mailto:root\" is not an smtp:// or smtps:// URL"),
    "bad_name": ('(class (prog "../etc") (tool "cat"))\n',
                 "1: error: prog: \"../etc\" is not a name pattern"),
    "bad_pid": ('(class (prog "a") (pid "twelve") (tool "cat"))\n',
                "1: error: pid: \"twelve\" is not a pid pattern"),
    "bad_mail": ('(class (prog "a") (tool "cat")\n\n (mail "root"))\n',
                 "3: error: mail: \"root\" is not a mail address"),
    "bad_window": ('(class (prog "a") (tool "cat") (window "a lot"))\n',
                   "1: error: window: \"a lot\" is not a window"),
    "bad_mailgroup": ('(class (prog "a") (tool "cat") (mailgroup "5"))\n',
                      "1: error: mailgroup: \"5\" is not a duration"),
    "bad_resolve_after": ('(class (prog "a") (tool "cat") (resolve-after "8 days"))\n',
                          "1: error: resolve-after: \"8 days\" is not a duration"),
    "missing_spec": ('(class (prog "a")\n (spec "missing.pspec"))\n',
                     "2: error: spec: cannot read "),
    "spec_error": ('(class (prog "a")\n (spec "bad.pspec"))\n',
                   "2: error: spec: "),
    "same_class": ('(class (prog "a") (tool "x"))\n(class (prog "a") (tool "y"))\n',
                   "2: error: prog: the same prog, machine and pid as the class on line 1"),
    "unterminated": ('(class (prog "a) (tool "x"))\n', "1: error: "),
    "unbalanced": ('(class (prog "a") (tool "x")\n', "1: error: class: no ')' closes it"),
    "stray_word": ('(class (prog "a") (tool "x"))\nclass\n',
                   "2: error: expected '(' to start (defaults ...) or (class ...), found 'class'"),
    "bad_char": ('(class (prog "a") (tool "x"))\n{}\n', "2: error: unexpected character '{'"),
    # start refuses plain HTTP beyond loopback: -check and start say so
    # before the store is touched (it was created, and -check passed)
    "http_not_loopback": ('(defaults\n (http "0.0.0.0:7363"))\n',
                          "2: error: http: refusing to serve plain HTTP on 0.0.0.0:7363"),
}


def main():
    with ct.Env("telemon_bad_config") as env:
        with open(env.path("bad.pspec"), "w") as f:
            f.write("perfspec bad\n  event E(x);\n  assert {& e : E : e.y > 0};\nend bad\n")
        for name, (text, want) in sorted(FIXTURES.items()):
            rc = env.path(name + ".rc")
            with open(rc, "w") as f:
                f.write(text)
            state = env.path(name + ".state")
            argv = [ct.binary("telemonitor"), "-rc", rc, "-state", state,
                    "-regmachine", "127.0.0.1:9", "-pcheck", ct.binary("pcheck")]
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=30)
            err = p.stderr.decode()
            check(p.returncode == 2, "%s: exit %d, expected 2: %s", name, p.returncode, err)
            check(err.count("\n") == 1 and (rc + ":" + want) in err,
                  "%s: message %r lacks %r", name, err, rc + ":" + want)
            check(not os.path.exists(os.path.join(state, "telemonitor.db")),
                  "%s: a bad configuration touched the store", name)
            c = subprocess.run(argv + ["-check"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=30)
            check(c.returncode == 2 and c.stderr.decode() == err,
                  "%s: -check gives the same verdict: %d %r", name, c.returncode, c.stderr)
        # the spec error is pcheck's own message, with the spec's line and column
        err = subprocess.run([ct.binary("telemonitor"), "-rc", env.path("spec_error.rc"),
                              "-check", "-pcheck", ct.binary("pcheck")],
                             stderr=subprocess.PIPE).stderr.decode()
        check("bad.pspec:3:" in err, "spec line and column: %r", err)

        # a missing file named with -rc is an error; a good file passes -check
        p = subprocess.run([ct.binary("telemonitor"), "-rc", env.path("none.rc"), "-check"],
                           stderr=subprocess.PIPE)
        check(p.returncode == 2 and "none.rc: No such file" in p.stderr.decode(),
              "missing -rc file: %r", p.stderr)
        good = env.path("good.rc")
        with open(good, "w") as f:
            f.write("; comment\n(defaults (smtp \"smtp://127.0.0.1:25\"))\n" +
                    tt.rc_class("fsread", spec=tt.FSREAD_SPEC, mail="a@b.example"))
        p = subprocess.run([ct.binary("telemonitor"), "-rc", good, "-check",
                            "-pcheck", ct.binary("pcheck")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        check(p.returncode == 0 and b"configuration OK (1 classes)" in p.stdout,
              "good file: %d %r %r", p.returncode, p.stdout, p.stderr)
        # -http beyond loopback without TLS: -check refuses it as start does
        p = subprocess.run([ct.binary("telemonitor"), "-rc", good, "-check", "-http",
                            "0.0.0.0:7363", "-pcheck", ct.binary("pcheck")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        check(p.returncode == 2 and p.stderr.startswith(
            b"telemonitor: http: refusing to serve plain HTTP on 0.0.0.0:7363"),
            "-check -http 0.0.0.0:7363: %d %r", p.returncode, p.stderr)
        # a spec that needs two passes is accepted where the class allows state
        # that grows with the log (test_telemon_unbounded), with the checker's warning
        two = env.path("two.pspec")
        with open(two, "w") as f:
            f.write("perfspec two\n  timed event S(tid); E(tid);\n"
                    "  interval I = s: S, e: E where e.tid = s.tid metrics t = ts(e) - ts(s) end I;\n"
                    "  assert {& i : I : i.t <= 2 * {mean j : I : j.t}};\nend two\n")
        with open(good, "w") as f:
            f.write(tt.rc_class("two", spec=two, extra="(allow-unbounded TRUE)"))
        p = subprocess.run([ct.binary("telemonitor"), "-rc", good, "-check",
                            "-pcheck", ct.binary("pcheck")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        check(p.returncode == 0 and b"needs 2 passes" in p.stderr,
              "two-pass spec: %d %r %r", p.returncode, p.stdout, p.stderr)
        # command line mistakes
        p = subprocess.run([ct.binary("telemonitor"), "-nosuch"], stderr=subprocess.PIPE)
        check(p.returncode == 2 and p.stderr == b"telemonitor: unrecognized option '-nosuch'\n"
              b"Try 'telemonitor --help' for more information.\n", "bad option: %r", p.stderr)
        # -checker takes inproc or process, and nothing else (exit 2, said)
        p = subprocess.run([ct.binary("telemonitor"), "-checker", "threads"], stderr=subprocess.PIPE)
        check(p.returncode == 2 and p.stderr.startswith(
            b"telemonitor: bad value 'threads' for -checker (inproc or process)\n"),
            "-checker threads: %d %r", p.returncode, p.stderr)
        for mode in ("inproc", "process"):
            p = subprocess.run([ct.binary("telemonitor"), "-rc", good, "-check", "-checker", mode,
                                "-pcheck", ct.binary("pcheck")], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
            check(p.returncode == 0, "-checker %s -check: %d %r", mode, p.returncode, p.stderr)
        p = subprocess.run([ct.binary("telemonitor"), "--version"], stdout=subprocess.PIPE)
        check(p.returncode == 0 and p.stdout.startswith(b"telemonitor "), "--version")


ct.run_test(main)
