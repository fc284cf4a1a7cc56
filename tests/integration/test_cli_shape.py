"""One command-line convention for every program (cmon/cmdline.h,
docs/HACKING.md "Command lines"):

- -h and --help: exit 0, the usage on stdout starting "Usage: PROG", with
  both -h, --help and -V, --version listed and an "Exit status" paragraph;
- -V and --version: exactly "PROG (CMon) VERSION\\n" (VERSION from the build);
- an unknown option (--no-such-option, -no-such-option) and an option
  missing its argument (short and long spelling): exit 2, nothing on
  stdout, and on stderr exactly "PROG: MESSAGE" then
  "Try 'PROG --help' for more information." in GNU wording;
- the original single-dash words and their --long spellings do the same
  thing (pcheck -cont, cmon-log -ascii, snarflog -buffer, telemonreg
  -debug, ...), and so do bad values given either way."""
import os
import re
import signal
import subprocess
import time

import cmontest as ct
from cmontest import check

PROGRAMS = {
    "telemonreg": "daemons/registry/telemonreg",
    "snarflog": "daemons/snarflog/snarflog",
    "telemonitor": "daemons/telemonitor/telemonitor",
    "telemonctl": "clients/telemonctl/telemonctl",
    "pcheck": "clients/pcheck/pcheck",
    "peval": "clients/peval/peval",
    "psolve": "clients/psolve/psolve",
    "pinfer": "clients/pinfer/pinfer",
    "cmon-log": "clients/cmon-log/cmon-log",
    "cmon-wrap": "clients/cmon-wrap/cmon-wrap",
}

# Each program's option that needs an argument: (short or single-dash word,
# message for it, --long word, message for it).
MISSING = {
    "telemonreg": ("-listen", "option '-listen' requires an argument",
                   "--listen", "option '--listen' requires an argument"),
    "snarflog": ("-buffer", "option '-buffer' requires an argument",
                 "--buffer", "option '--buffer' requires an argument"),
    "telemonitor": ("-rc", "option '-rc' requires an argument",
                    "--rc", "option '--rc' requires an argument"),
    "telemonctl": ("-state", "option '-state' requires an argument",
                   "--state", "option '--state' requires an argument"),
    "pcheck": ("-s", "option requires an argument -- 's'",
               "--spec", "option '--spec' requires an argument"),
    "peval": ("-c", "option requires an argument -- 'c'",
              "--commands", "option '--commands' requires an argument"),
    "psolve": ("-d", "option requires an argument -- 'd'",
               "--data", "option '--data' requires an argument"),
    "pinfer": ("-o", "option requires an argument -- 'o'",
               "--output", "option '--output' requires an argument"),
    "cmon-log": ("-o", "option requires an argument -- 'o'",
                 "--output", "option '--output' requires an argument"),
    "cmon-wrap": ("-buffer", "option '-buffer' requires an argument",
                  "--buffer", "option '--buffer' requires an argument"),
}


def version():
    """The project version this build was configured with."""
    with open(os.path.join(ct.BUILD, "CMakeCache.txt")) as f:
        m = re.search(r"^CMAKE_PROJECT_VERSION:STATIC=(\S+)$", f.read(), re.M)
    check(m, "no CMAKE_PROJECT_VERSION in CMakeCache.txt")
    return m.group(1)


def binary(name):
    path = os.path.join(ct.BUILD, PROGRAMS[name])
    check(os.access(path, os.X_OK), "%s not built at %s", name, path)
    return path


def run(name, *args, stdin=None, cwd=None, env=None):
    full = dict(os.environ)
    for k in ("TELEMONREG_MACHINE", "TELEMON_STATE", "TELEMONRC", "POSIXLY_CORRECT"):
        full.pop(k, None)
    full.update(env or {})
    p = subprocess.run([binary(name)] + list(args), input=stdin,
                       stdin=None if stdin is not None else subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, cwd=cwd,
                       env=full, preexec_fn=ct.die_with_parent)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def usage_error(name, message, *args, **kw):
    """`name args` is a usage error with exactly this message."""
    rc, out, err = run(name, *args, **kw)
    want = "%s: %s\nTry '%s --help' for more information.\n" % (name, message, name)
    check(rc == 2 and out == "" and err == want,
          "%s %s: exit %d, stdout %r, stderr %r; expected 2, '', %r", name, " ".join(args), rc,
          out, err, want)


def help_version_errors(ver):
    for name in PROGRAMS:
        rc, text, err = run(name, "--help")
        check(rc == 0 and err == "", "%s --help: exit %d, stderr %r", name, rc, err)
        check(text.startswith("Usage: %s " % name), "%s --help starts %r", name, text[:60])
        check("Exit status" in text, "%s --help has no Exit status paragraph", name)
        check("-h, --help" in text and "-V, --version" in text,
              "%s --help does not list -h, --help and -V, --version", name)
        check(run(name, "-h") == (0, text, ""), "%s -h differs from --help", name)
        for flag in ("--version", "-V"):
            check(run(name, flag) == (0, "%s (CMon) %s\n" % (name, ver), ""),
                  "%s %s: %r", name, flag, run(name, flag))
        usage_error(name, "unrecognized option '--no-such-option'", "--no-such-option")
        usage_error(name, "unrecognized option '-no-such-option'", "-no-such-option")
        short, short_msg, long_, long_msg = MISSING[name]
        usage_error(name, short_msg, short)
        usage_error(name, long_msg, long_)


def same(name, variants, expect=None, **kw):
    """Every argv in `variants` gives the same result; `expect(result)` holds."""
    results = [run(name, *argv, **kw) for argv in variants]
    for argv, r in zip(variants[1:], results[1:]):
        check(r == results[0], "%s %s gives %r but %s gives %r", name, " ".join(variants[0]),
              results[0], " ".join(argv), r)
    if expect:
        check(expect(results[0]), "%s %s: %r", name, " ".join(variants[0]), results[0])
    return results[0]


def spellings(tmp):
    src = ct.SOURCE
    spec = os.path.join(src, "tests", "lang", "aggregates.pspec")
    log = os.path.join(src, "tests", "lang", "aggregates.log")

    # pcheck: -cont, -s, -f, -json in every spelling
    same("pcheck", [["-cont", "-s", spec, log], ["--cont", "--spec", spec, log],
                    ["-cont", "-spec", spec, log], ["--cont", "--spec=" + spec, log]],
         lambda r: r[0] in (0, 1) and r[1] and r[2] == "")
    same("pcheck", [["-f", "-json", "-s", spec, log], ["--failures", "--json", "-s", spec, log]],
         lambda r: r[0] in (0, 1) and all(l.startswith("{") for l in r[1].splitlines()))
    # --threads 1 and 2 (every spelling) check alike; nothing else is a count of threads
    same("pcheck", [["-s", spec, log], ["-threads", "1", "-s", spec, log],
                    ["--threads", "2", "-s", spec, log], ["--threads=1", "-s", spec, log]],
         lambda r: r[0] in (0, 1) and r[1] and r[2] == "")
    for flag, value in (("--threads", "3"), ("-threads", "0"), ("--threads", "two")):
        usage_error("pcheck", "bad value '%s' for --threads (1 or 2)" % value, flag, value, "-s", spec, log)

    # peval: -c / -commands / --commands
    cmds = os.path.join(tmp, "cmds")
    with open(cmds, "w") as f:
        f.write("1 + 2;\n")
    same("peval", [["-c", cmds], ["-commands", cmds], ["--commands", cmds], ["--commands=" + cmds]],
         lambda r: r == (0, "3\n", ""))

    # psolve: -s / --spec, -d / --data
    same("psolve", [["-s", spec, "-d", "-", log], ["--spec", spec, "--data", "-", log]],
         lambda r: r[0] != 2 and "unrecognized" not in r[2])
    # -u NAME... [LOG]: the log alone after -u leaves no name (not "every unknown")
    usage_error("psolve", "-u needs at least one name (SPEC.NAME) before the log '%s'" % log,
                "-s", spec, "-u", log)
    usage_error("psolve", "-u needs at least one name (SPEC.NAME)", "-s", spec, "-u", "--", log)

    # pinfer: -m / -min-count / --min-count, -p / -percentile / --percentile
    fig3 = os.path.join(src, "tests", "lang", "fig3.log")
    same("pinfer", [["-m", "3", "-p", "90", fig3], ["-min-count", "3", "-percentile", "90", fig3],
                    ["--min-count", "3", "--percentile=90", fig3]],
         lambda r: r[0] == 0 and "_p90 = ?" in r[1] and r[2] == "")
    for flag in ("-percentile", "--percentile"):
        usage_error("pinfer", "bad value '0' for --percentile (above 0, at most 100)", flag, "0", fig3)

    # cmon-log: -ascii / --ascii / -a; -binary / --binary / -b
    norm = same("cmon-log", [["-ascii", log], ["--ascii", log], ["-a", log]],
                lambda r: r[0] == 0 and r[1].startswith("#cmon-ascii 1\n"))
    for i, argv in enumerate((["-binary"], ["--binary"], ["-b"])):
        out = os.path.join(tmp, "bin%d" % i)
        check(run("cmon-log", *argv, "-o", out, log)[0] == 0, "cmon-log %s", argv)
        check(run("cmon-log", out) == norm, "cmon-log %s: the binary log reads back differently",
              argv)

    # cmon-wrap: -undo / --undo on a program that is not wrapped; -buffer
    plain = os.path.join(tmp, "plain")
    with open(plain, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(plain, 0o755)
    same("cmon-wrap", [["-undo", plain], ["--undo", plain]],
         lambda r: r[0] == 1 and "not a cmon-wrap wrapper" in r[2])
    for flag in ("-buffer", "--buffer"):
        usage_error("cmon-wrap", "bad value 'abc' for -buffer", flag, "abc", plain)

    # snarflog: -buffer / --buffer (below 4K: raised, with a warning; a bad
    # value: a usage error)
    small = b"#cmon-ascii 1\n" + b"".join(b"%d 1 E %d\n" % (i, i) for i in range(20))
    same("snarflog", [["small", "-standalone", "-buffer", "1000"],
                      ["small", "--standalone", "--buffer", "1000"],
                      ["small", "--standalone", "--buffer=1000"]],
         lambda r: r[0] == 0 and "using 4K" in r[2], stdin=small)
    for flag in ("-buffer", "--buffer"):
        usage_error("snarflog", "bad value 'abc' for -buffer", "x", flag, "abc")
    # the format: one of -ascii and -binary (either twice is no conflict)
    usage_error("snarflog", "-ascii and -binary cannot be combined", "x", "-ascii", "--binary")
    usage_error("snarflog", "-ascii and -binary cannot be combined", "x", "-binary", "-ascii",
                "--", "true")
    # options stop at "--": what follows is CMD's, even words that look like ours
    rc, out, err = run("snarflog", "cmdargs", "-standalone", "--", "sh", "-c",
                       'echo "$@"; exit 7', "sh", "-buffer", "--help", "-h")
    check(rc == 7 and out == "-buffer --help -h\n", "snarflog -- CMD: %d %r %r", rc, out, err)

    # telemonreg: -debug / --debug, -portfile / --portfile: it starts,
    # writes its port and stops on SIGTERM the same way
    for argv in (["-debug", "-portfile"], ["--debug", "--portfile"]):
        portfile = os.path.join(tmp, "reg%s.port" % argv[0].count("-"))
        p = subprocess.Popen([binary("telemonreg"), "-listen", "127.0.0.1:0", argv[0], argv[1],
                              portfile], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, preexec_fn=ct.die_with_parent)
        try:
            port = int(ct.wait_file(portfile, 20).strip())
            check(port > 0, "telemonreg %s: port %r", argv, port)
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=20)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        check(p.returncode == 0 and b"ready" in err, "telemonreg %s: %d %r", argv, p.returncode,
              err)
    for flag in ("-max-conns", "--max-conns"):
        usage_error("telemonreg", "bad value 'x' for -max-conns", flag, "x")
    usage_error("telemonreg", "option '-he' is ambiguous; possibilities: '-hello-timeout' '-help'",
                "-he")

    # telemonitor: -rc / --rc, -check / --check
    rc_file = os.path.join(tmp, "empty.rc")
    open(rc_file, "w").close()
    same("telemonitor", [["-rc", rc_file, "-check"], ["--rc", rc_file, "--check"],
                         ["--rc=" + rc_file, "-check"]],
         lambda r: r == (0, "%s: configuration OK (0 classes)\n" % rc_file, ""))
    for flag in ("-store-backlog", "--store-backlog"):
        usage_error("telemonitor", "bad value '0' for -store-backlog (1 to 10000000)", flag, "0")
    for flag in ("-max-sessions", "--max-sessions"):
        usage_error("telemonitor", "bad value '2001' for -max-sessions (1 to 2000)", flag, "2001")
    for flag in ("-batch", "--batch"):
        for bad in ("1001", "-1", "x", "", "0300x"):
            usage_error("telemonitor", "bad value '%s' for -batch (0 to 1000 milliseconds)" % bad,
                        flag, bad)
    same("telemonitor", [["-batch", "0", "-rc", rc_file, "-check"],
                         ["--batch=1000", "-rc", rc_file, "-check"]],
         lambda r: r == (0, "%s: configuration OK (0 classes)\n" % rc_file, ""))
    # a registry list that cannot be read: a usage error, from the option or
    # the variable (snarflog goes on without a registry: test_multi_registry)
    usage_error("telemonitor", "bad value '127.0.0.1:99999' for -regmachine: bad address "
                "'127.0.0.1:99999'", "-regmachine", "127.0.0.1:99999", "-rc", rc_file, "-check")
    usage_error("telemonitor", "bad value '' for -regmachine: bad address ''", "--regmachine=",
                "-rc", rc_file, "-check")
    usage_error("telemonitor", "bad TELEMONREG_MACHINE 'a:1,,b:2': bad address ''", "-rc",
                rc_file, "-check", env={"TELEMONREG_MACHINE": "a:1,,b:2"})
    r = run("telemonitor", "-rc", rc_file, "-check", env={"TELEMONREG_MACHINE": ""})
    check(r[0] == 0, "an empty TELEMONREG_MACHINE is the default: %r", r)
    # the store: sqlite (DESIGN.md's (store "sqlite"), the default) or a PostgreSQL URL
    usage_error("telemonitor", "bad value 'mysql://x' for -store (sqlite, or a postgresql:// "
                "URL)", "-store", "mysql://x", "-rc", rc_file, "-check")
    sq_rc = os.path.join(tmp, "sqlite.rc")
    with open(sq_rc, "w") as f:
        f.write('(defaults (store "sqlite"))\n')
    r = run("telemonitor", "-rc", sq_rc, "-check")
    check(r == (0, "%s: configuration OK (0 classes)\n" % sq_rc, ""), "(store \"sqlite\"): %r", r)
    with open(os.path.join(tmp, "mysql.rc"), "w") as f:
        f.write('(defaults (store "mysql://x"))\n')
    r = run("telemonitor", "-rc", os.path.join(tmp, "mysql.rc"), "-check")
    check(r[0] == 2 and 'mysql.rc:1: error: store: "mysql://x" is neither "sqlite" nor a '
          'postgresql:// URL' in r[2], "(store \"mysql://x\"): %r", r)
    sq_state = os.path.join(tmp, "sqstate")
    os.mkdir(sq_state)
    p = subprocess.Popen([binary("telemonitor"), "-rc", sq_rc, "-store", "sqlite", "-state",
                          sq_state, "-regmachine", "127.0.0.1:1"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp,
                         preexec_fn=ct.die_with_parent)
    try:
        ct.wait_for(lambda: os.path.exists(os.path.join(sq_state, "control.sock")), 20,
                    "the telemonitor's control socket")
        check(os.path.exists(os.path.join(sq_state, "telemonitor.db")) and
              not os.path.exists(os.path.join(tmp, "sqlite")),
              "-store sqlite: not the state directory's telemonitor.db: %r", os.listdir(sq_state))
    finally:
        p.terminate()
        p.communicate(timeout=20)

    # telemonctl: -state / --state, and a command's own options either way
    state = os.path.join(tmp, "nostate")
    same("telemonctl", [["-state", state, "status"], ["--state", state, "status"],
                        ["status", "--state=" + state], ["-json", "-state", state, "status"]],
         lambda r: r[0] == 3 and state + "/control.sock" in r[2])
    for argv in (["failures", "-limit", "0"], ["failures", "--limit", "0"]):
        usage_error("telemonctl", "--limit: '0' is not a positive number", "-state", state, *argv)
    usage_error("telemonctl", "unrecognized option '--frobnicate'", "-state", state, "status",
                "--frobnicate")


def main():
    ver = version()
    help_version_errors(ver)
    with ct.Env("cli_shape") as env:
        spellings(env.dir)


ct.run_test(main)
