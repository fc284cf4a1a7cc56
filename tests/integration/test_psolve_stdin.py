#!/usr/bin/env python3
"""psolve -s - reads the specification from standard input: the same
revised specification as from the file (the log must then be a named file;
a log on standard input too is a usage error), and errors in it are
reported as <stdin>:LINE:COL. pcheck and peval share the loader: pcheck -s -
checks a spec from standard input, and neither takes the log (or peval's
commands) from standard input as well."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmontest as ct  # noqa: E402

SRC = os.environ.get("CMON_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
LANG = os.path.join(SRC, "tests", "lang")


def psolve(*args, stdin=b""):
    return subprocess.run([ct.binary("psolve")] + list(args), input=stdin, capture_output=True, timeout=60)


def main():
    spec = os.path.join(LANG, "solve_thesis.pspec")
    log = os.path.join(LANG, "solve_fs.log")
    with open(spec, "rb") as f:
        text = f.read()
    want = psolve("-s", spec, log)
    ct.check(want.returncode == 0, "psolve -s FILE: %d %r", want.returncode, want.stderr)
    for argv in (["-s", "-", log], ["--spec", "-", log], ["--spec=-", log]):
        got = psolve(*argv, stdin=text)
        ct.check((got.returncode, got.stdout) == (0, want.stdout), "psolve %s: %d %r\n%s", " ".join(argv),
                 got.returncode, got.stderr, got.stdout.decode())
    # the log may not be on standard input as well
    for argv in (["-s", "-"], ["-s", "-", "-"]):
        got = psolve(*argv, stdin=text)
        ct.check(got.returncode == 2 and got.stdout == b"" and got.stderr.decode() ==
                 "psolve: the specification is on standard input (-s -), so the log must be a named file\n"
                 "Try 'psolve --help' for more information.\n", "psolve %s: %d %r", " ".join(argv),
                 got.returncode, got.stderr)
    # errors name <stdin>
    got = psolve("-s", "-", log, stdin=b"perfspec X\n  def A = ;\nend X\n")
    ct.check(got.returncode == 2 and got.stderr.decode().startswith("<stdin>:2:"), "bad spec on stdin: %d %r",
             got.returncode, got.stderr)
    # pcheck -s - LOG: the same verdicts as from the file (names aside)
    solved = want.stdout
    got = subprocess.run([ct.binary("pcheck"), "-s", "-", log], input=solved, capture_output=True, timeout=60)
    ct.check(got.returncode == 0 and got.stdout.count(b"held") == 2 and b"<stdin>:" in got.stdout,
             "pcheck -s -: %d %r %r", got.returncode, got.stdout, got.stderr)
    got = subprocess.run([ct.binary("pcheck"), "-s", "-"], input=solved, capture_output=True, timeout=60)
    ct.check(got.returncode == 2 and got.stderr.decode().startswith(
        "pcheck: the specification is on standard input (-s -), so the log must be a named file\n"),
        "pcheck -s - with the log on stdin: %d %r", got.returncode, got.stderr)
    got = subprocess.run([ct.binary("peval"), "-s", "-", log], input=solved, capture_output=True, timeout=60)
    ct.check(got.returncode == 2 and got.stderr.decode().startswith("peval: the specification is on standard input"),
             "peval -s - without -c: %d %r", got.returncode, got.stderr)
    got = subprocess.run([ct.binary("psolve"), "--help"], capture_output=True, text=True, timeout=60)
    ct.check("'-': standard input" in got.stdout, "psolve --help does not mention -s -:\n%s", got.stdout)


if __name__ == "__main__":
    ct.run_test(main)
