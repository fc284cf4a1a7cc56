"""cmon-wrap: replaces a program in place by a wrapper script that runs
it under snarflog; arguments (with spaces and quotes), exit status and
output pass through, and the log reaches an auto subscriber. Wrapping
twice is refused, -undo restores the original byte for byte, a wrapper
whose snarflog has vanished still runs the program, and unsafe targets
(symbolic links, setuid files, names that are not valid program names)
are refused."""
import os
import shutil
import stat
import subprocess

import cmontest as ct
from cmontest import check

PROGRAM = """#!/bin/sh
printf 'args:'; for a in "$@"; do printf ' [%s]' "$a"; done; echo
if [ -n "$CMON_LOG" ]; then printf '#cmon-ascii 1\\n1 1 Ev 0\\n2 1 Ev 1\\n' > "$CMON_LOG"; fi
exit 5
"""


def wrap(env, *args):
    p = env.spawn("cmon-wrap", [ct.binary("cmon-wrap")] + list(args), stdout=subprocess.PIPE)
    out, _ = p.p.communicate(timeout=20)
    return p.p.returncode, out.decode() + p.stderr()


def main():
    with ct.Env("cmon_wrap") as env:
        reg = env.registry()
        d = env.path("odd dir 'q'")
        os.mkdir(d)
        prog = os.path.join(d, "myprog")
        with open(prog, "w") as f:
            f.write(PROGRAM)
        os.chmod(prog, 0o755)
        original = open(prog, "rb").read()

        code, out = wrap(env, "-n", "demo", "-ascii", "-buffer", "1M", "-regmachine", reg.addr(),
                         "-snarflog", ct.binary("snarflog"), prog)
        check(code == 0, "wrap failed: %s", out)
        check(open(prog + ".real", "rb").read() == original, "original not kept as .real")
        check(os.stat(prog).st_mode & 0o777 == 0o755, "mode not kept")

        sub = env.sub("-prog", "demo", "-auto", reg=reg)
        run = env.spawn("myprog", [prog, "a b", "it's", '"q"', ""], stdout=subprocess.PIPE)
        out, _ = run.p.communicate(timeout=30)
        check(run.p.returncode == 5, "exit status %r: %s", run.p.returncode, run.stderr())
        check(out.decode() == "args: [a b] [it's] [\"q\"] []\n", "arguments mangled: %r", out)
        check(sub.wait(30) == 0, "subscriber: %s", sub.stderr())
        with open(sub.out, "rb") as f:
            _h, items = ct.parse_ascii(f.read())
        ct.check_sequence(items, 2)

        code, out = wrap(env, "-snarflog", ct.binary("snarflog"), prog)
        check(code == 1 and "already wrapped" in out, "second wrap: %d %s", code, out)

        code, out = wrap(env, "-undo", prog)
        check(code == 0, "undo: %s", out)
        check(open(prog, "rb").read() == original and not os.path.exists(prog + ".real"),
              "undo did not restore the original")
        code, out = wrap(env, "-undo", prog)
        check(code == 1 and "not a cmon-wrap wrapper" in out, "undo of a plain program: %s", out)

        # A wrapper whose snarflog disappeared still runs the program.
        snarf_copy = env.path("snarflog-copy")
        shutil.copy(ct.binary("snarflog"), snarf_copy)
        code, out = wrap(env, "-n", "demo", "-snarflog", snarf_copy, prog)
        check(code == 0, "wrap: %s", out)
        os.unlink(snarf_copy)
        run = env.spawn("myprog", [prog, "x"], stdout=subprocess.PIPE)
        out, _ = run.p.communicate(timeout=20)
        check(run.p.returncode == 5 and out == b"args: [x]\n", "unmonitored run: %r", out)

        # Refusals.
        bad = env.path("bad name")
        shutil.copy(prog + ".real", bad)
        code, out = wrap(env, "-snarflog", ct.binary("snarflog"), bad)
        check(code == 2 and "-n" in out, "invalid name accepted: %s", out)
        link = env.path("link")
        os.symlink(bad, link)
        code, out = wrap(env, "-n", "x", "-snarflog", ct.binary("snarflog"), link)
        check(code == 1 and "symbolic link" in out, "symlink accepted: %s", out)
        suid = env.path("suid")
        shutil.copy(prog + ".real", suid)
        os.chmod(suid, 0o4755)
        if os.stat(suid).st_mode & stat.S_ISUID:
            code, out = wrap(env, "-snarflog", ct.binary("snarflog"), suid)
            check(code == 1 and "setuid" in out, "setuid accepted: %s", out)
        code, out = wrap(env, "--version")
        check(code == 0 and out.startswith("cmon-wrap "), "version: %s", out)


ct.run_test(main)
