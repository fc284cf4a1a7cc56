"""A first record longer than the reader's line limit (1 MiB) is skipped
with a warning and checking goes on, exactly as for the same line later in
the log (issue 31: it refused the whole log as a "bad header", exit 3).
Offline (read ahead or on one thread), -cont and from a pipe, with --json:
the reports are those of the log with a short malformed record in its
place (positions count it the same way), and the warning names its line."""
import subprocess

import cmontest as ct
from cmontest import check

SPEC = """perfspec p
  timed event Ev(seq);
  assert "even": {& e : Ev : e.seq mod 2 = 0};
end p
"""

HEAD = b"#cmon-ascii 1\n#tick-ns 1000\n"
TAIL = b"".join(b"%d 1 Ev %d\n" % (10 + i, i) for i in range(5))


def pcheck(spec, args, log, stdin=None):
    r = subprocess.run([ct.binary("pcheck"), "-s", spec] + args + [log], input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def main():
    with ct.Env("pcheck_long_first_record") as env:
        spec = env.path("p.pspec")
        with open(spec, "w") as f:
            f.write(SPEC)
        long_log, short_log = env.path("long.log"), env.path("short.log")
        with open(long_log, "wb") as f:
            f.write(HEAD + b"1 1 Ev " + b"7" * (1 << 20) + b"\n" + TAIL)
        with open(short_log, "wb") as f:
            f.write(HEAD + b"1 1 Ev x\n" + TAIL)
        for args in ([], ["--threads", "1"], ["-cont"], ["--json"], ["-cont", "--json"]):
            code, out, err = pcheck(spec, args, long_log)
            rcode, rout, _ = pcheck(spec, args, short_log)
            check(code == 1 and rcode == 1, "%r: exit %d (want 1, as the short log's %d): %s",
                  args, code, rcode, err)
            check(out == rout, "%r: the reports of the short log:\n%s\ngot:\n%s", args, rout, out)
            check(err == "%s:3: warning: line longer than 1048576 bytes skipped\n" % long_log,
                  "%r: one warning naming line 3: %r", args, err)
        with open(long_log, "rb") as f:
            data = f.read()
        code, out, err = pcheck(spec, ["-cont", "--json"], "-", stdin=data)
        check(code == 1 and out == pcheck(spec, ["-cont", "--json"], short_log)[1],
              "from a pipe: exit %d: %s %s", code, out, err)
        check(err == "<stdin>:3: warning: line longer than 1048576 bytes skipped\n",
              "from a pipe, the warning: %r", err)


ct.run_test(main)
