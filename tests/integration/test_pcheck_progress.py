"""pcheck --progress: with -cont --json on a pipe, whenever the check waits
for input it says how many event records it has read, checked and reported
on ({"checked":N}), after every report on them; never without -cont
--json; never for a spec that needs two passes."""
import json
import os
import subprocess
import time

import cmontest as ct
from cmontest import check

SPEC = """perfspec p
  event Ev(seq);
  assert "odd": {& e : Ev : e.seq mod 2 = 0};
end p
"""


def main():
    with ct.Env("pcheck_progress") as env:
        spec = env.path("p.pspec")
        with open(spec, "w") as f:
            f.write(SPEC)
        p = subprocess.Popen([ct.binary("pcheck"), "-cont", "--json", "--progress", "0",
                              "-s", spec, "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        os.write(p.stdin.fileno(), b"#cmon-ascii 1\n" + b"".join(
            b"%d 1 Ev %d\n" % (10 + i, i) for i in range(4)))
        time.sleep(0.5)
        os.write(p.stdin.fileno(), b"".join(b"%d 1 Ev %d\n" % (10 + i, i) for i in range(4, 7)))
        time.sleep(0.5)
        p.stdin.close()
        p.stdin = None
        out, err = p.communicate(timeout=20)
        check(p.returncode == 1, "exit %d: %s", p.returncode, err.decode())
        lines = [json.loads(x) for x in out.decode().splitlines()]
        seen, progress = [], []
        for ln in lines:
            if "checked" in ln:
                check(set(ln) == {"checked"}, "a progress line has one key: %r", ln)
                progress.append(ln["checked"])
                # every offender among the records it covers came before it
                want = [i for i in range(ln["checked"]) if i % 2]
                check(seen == want, "reports before checked=%d: %r", ln["checked"], seen)
            elif ln.get("kind") == "event":
                seen.append(ln["metrics"]["seq"])
        check(progress[-2:] == [4, 7] or progress == [4, 7], "progress lines: %r", progress)
        check(progress == sorted(set(progress)), "increasing, never repeated: %r", progress)
        check(lines[-1].get("offenders") == 3, "the verdict last: %r", lines[-1])

        # only with -cont and --json
        for args in (["--progress", "0"], ["-cont", "--progress", "0"],
                     ["--json", "--progress", "0"], ["-cont", "--json", "--progress", "x"]):
            r = subprocess.run([ct.binary("pcheck")] + args + ["-s", spec, "-"], input=b"",
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
            check(r.returncode == 2 and b"progress" in r.stderr, "%r: %d %r", args,
                  r.returncode, r.stderr)


ct.run_test(main)
