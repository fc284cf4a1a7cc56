"""A skipped test never reads as a pass, and in CI it fails the run
(DESIGN.md §9: `.ci/run` runs the suite with CMON_REQUIRE=all).

  - scripts/run-tests.sh over a tiny ctest tree (one test passes, one exits
    77 = skipped): without CMON_REQUIRE it exits 0 and its summary line
    names the skipped test; with CMON_REQUIRE=all it exits 1 and says why;
  - cmontest.skip() exits 77 with "SKIP: reason", and under
    CMON_REQUIRE=all exits 1 saying the test was required;
  - .ci/run sets CMON_REQUIRE=all before `make check`."""
import os
import subprocess
import sys

import cmontest as ct
from cmontest import check

CTEST_FILE = """add_test(ok "sh" "-c" "exit 0")
add_test(cannot "sh" "-c" "echo SKIP: no such package; exit 77")
set_tests_properties(cannot PROPERTIES SKIP_RETURN_CODE 77)
"""


def run_tests(tree, require):
    env = dict(os.environ)
    env.pop("CMON_REQUIRE", None)
    if require:
        env["CMON_REQUIRE"] = require
    p = subprocess.run([os.path.join(ct.SOURCE, "scripts", "run-tests.sh"), tree], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    out = p.stdout.decode(errors="replace")
    last = [ln for ln in out.splitlines() if ln.startswith("check (")]
    check(last, "no summary line:\n%s", out)
    return p.returncode, last[-1]


def skip_as(require):
    env = dict(os.environ)
    env.pop("CMON_REQUIRE", None)
    if require:
        env["CMON_REQUIRE"] = require
    code = ("import sys; sys.path.insert(0, %r); import cmontest; cmontest.skip('no chromium')"
            % os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                       timeout=60)
    return p.returncode, p.stdout.decode()


def main():
    with ct.Env("ci_skips") as env:
        tree = env.path("tree")
        os.mkdir(tree)
        with open(os.path.join(tree, "CTestTestfile.cmake"), "w") as f:
            f.write(CTEST_FILE)

        rc, line = run_tests(tree, None)
        check(rc == 0, "a skip outside CI is not a failure: %d %r", rc, line)
        check("1 of them skipped, not passed: cannot" in line, "names the skipped test: %r", line)

        rc, line = run_tests(tree, "all")
        check(rc == 1, "CMON_REQUIRE=all: a skipped test fails the run: %d %r", rc, line)
        check("CMON_REQUIRE=all" in line and "cannot" in line, "says why: %r", line)

        rc, out = skip_as(None)
        check(rc == ct.SKIP and out.startswith("SKIP: no chromium"), "skip(): %d %r", rc, out)
        rc, out = skip_as("all")
        check(rc == 1 and "CMON_REQUIRE=all" in out and "no chromium" in out,
              "skip() under CMON_REQUIRE=all: %d %r", rc, out)

        with open(os.path.join(ct.SOURCE, ".ci", "run")) as f:
            ci = f.read()
        check("CMON_REQUIRE=all" in ci and "export CMON_REQUIRE" in ci and
              ci.index("CMON_REQUIRE=all") < ci.index("make check"),
              ".ci/run sets CMON_REQUIRE=all before make check:\n%s", ci)


ct.run_test(main)
