#!/usr/bin/env python3
"""psolve's output is a specification pcheck can use at once: solve the
thesis's example (tests/lang/solve_thesis.pspec) from its log, then check the
revised spec against the same log — every assertion must hold — and against
a log where reads got slower — the model's assertion must fail."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmontest as ct  # noqa: E402

SRC = os.environ.get("CMON_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
LANG = os.path.join(SRC, "tests", "lang")


def main():
    spec = os.path.join(LANG, "solve_thesis.pspec")
    log = os.path.join(LANG, "solve_fs.log")
    p = subprocess.run([ct.binary("psolve"), "-s", spec, log], capture_output=True, text=True, timeout=60)
    ct.check(p.returncode == 0, "psolve failed (%d): %s", p.returncode, p.stderr)
    ct.check("= ?" not in p.stdout.split("perfspec", 1)[1], "an unknown was left unsolved:\n%s", p.stdout)
    with tempfile.TemporaryDirectory() as d:
        solved = os.path.join(d, "solved.pspec")
        with open(solved, "w") as f:
            f.write(p.stdout)
        c = subprocess.run([ct.binary("pcheck"), "-s", solved, log], capture_output=True, text=True, timeout=60)
        ct.check(c.returncode == 0, "the solved spec does not hold on its own log (%d):\n%s%s", c.returncode,
                 c.stdout, c.stderr)
        ct.check(c.stdout.count("assertion held") == 2, "expected two verdicts:\n%s", c.stdout)
        # Slower reads (every EndRead 300 ticks later): the fitted model no longer holds.
        slow = os.path.join(d, "slow.log")
        with open(log) as fin, open(slow, "w") as fout:
            for line in fin:
                parts = line.split()
                if len(parts) >= 3 and parts[2] == "EndRead":
                    parts[0] = str(int(parts[0]) + 300)
                    line = " ".join(parts) + "\n"
                fout.write(line)
        c = subprocess.run([ct.binary("pcheck"), "-f", "-s", solved, slow], capture_output=True, text=True, timeout=60)
        ct.check(c.returncode == 1, "slower reads should fail the model (%d):\n%s", c.returncode, c.stdout)


if __name__ == "__main__":
    ct.run_test(main)
