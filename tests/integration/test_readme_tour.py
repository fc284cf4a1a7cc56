"""README's "A five-minute tour" is true: every ```sh block between
<!-- tour:begin --> and <!-- tour:end --> runs, in order, in one bash, as a
reader would run them from the top of a clone (here: a temporary folder
with build/, config/ and tests/ linked to the real ones, so everything the
tour writes lands in the temporary folder), and what each block prints
(standard output and error together) matches the ```text block right
after it.

In an expected block, runs of blanks count as one (tables align to their
widths), a placeholder <NAME> (capitals) stands for any characters but
blanks (possibly none) and a line "..." for any number of lines. Every
block must end with exit status 0. The registry gets a free port through
TELEMONREG_MACHINE, which the tour honours; mktemp -d makes the tour's
scratch folder in ours (TMPDIR)."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import cmontest as ct
from cmontest import check

README = os.path.join(ct.SOURCE, "README.md")
PLACEHOLDER = re.compile(r"<[A-Z][A-Z0-9_]*>")


def tour_blocks(text):
    """[(commands, expected output or None)] of the tour, in order."""
    begin, end = text.find("<!-- tour:begin -->"), text.find("<!-- tour:end -->")
    check(0 <= begin < end, "README.md has no <!-- tour:begin --> ... <!-- tour:end -->")
    fences = re.findall(r"^```(\w*)\n(.*?)^```$", text[begin:end], re.S | re.M)
    blocks = []
    for lang, body in fences:
        if lang == "sh":
            blocks.append([body, None])
        elif lang == "text":
            check(blocks and blocks[-1][1] is None, "a ```text block follows no ```sh block:\n%s",
                  body)
            blocks[-1][1] = body
    check(len(blocks) >= 5, "only %d shell blocks in the tour", len(blocks))
    return blocks


def squeeze(line):
    return re.sub(r"[ \t]+", " ", line).strip()


def line_regex(line):
    """A regular expression for one expected line."""
    parts = PLACEHOLDER.split(squeeze(line))
    return r"\S*".join(re.escape(p) for p in parts)


def matches(expected, actual):
    """True if the actual output fits the expected block."""
    pattern = []
    for line in expected.rstrip("\n").split("\n"):
        if line.strip() == "...":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            pattern.append(line_regex(line) + r"\n")
    text = "".join(squeeze(l) + "\n" for l in actual.rstrip("\n").split("\n")) if actual else ""
    return re.fullmatch("".join(pattern), text) is not None


def first_difference(expected, actual):
    """The first expected line that no actual line at that place fits, for
    the failure message."""
    exp = [l for l in expected.rstrip("\n").split("\n")]
    act = actual.rstrip("\n").split("\n")
    for i, line in enumerate(exp):
        if line.strip() == "...":
            return "(after a '...' line)"
        if i >= len(act):
            return "missing line %d: %r" % (i + 1, line)
        if not re.fullmatch(line_regex(line), squeeze(act[i])):
            return "line %d: expected %r\n                got %r" % (i + 1, line, act[i])
    return "extra lines from %d: %r" % (len(exp) + 1, act[len(exp):len(exp) + 3])


def self_test():
    """The comparison itself: placeholders, blanks, '...'."""
    check(matches("a  <N>  b\n", "a 12 b\n"), "placeholder")
    check(matches("x (<N> offender<S>)\n", "x (1 offender)\n"), "empty placeholder")
    check(not matches("a <N> b\n", "a 1 2 b\n"), "a placeholder is one word")
    check(matches("h\n...\nt\n", "h\n1\n2\nt\n") and matches("h\n...\nt\n", "h\nt\n"), "...")
    check(not matches("h\nt\n", "h\nt\nu\n"), "extra line")


def main():
    self_test()
    blocks = tour_blocks(open(README, encoding="utf-8").read())
    with ct.Env("readme_tour") as env:
        top = env.path("clone")
        os.mkdir(top)
        for name, target in (("build", ct.BUILD), ("config", os.path.join(ct.SOURCE, "config")),
                             ("tests", os.path.join(ct.SOURCE, "tests"))):
            os.symlink(os.path.abspath(target), os.path.join(top, name))
        tmp = env.path("tmp")
        os.mkdir(tmp)
        # the driver: each block in the same shell, its output to a file
        script = ["cd %s || exit 99" % top]
        for i, (body, _) in enumerate(blocks):
            script.append("{\n%s\n} >%s/out.%d 2>&1 </dev/null; echo $? >%s/rc.%d"
                          % (body.rstrip("\n"), env.dir, i, env.dir, i))
        with open(env.path("tour.sh"), "w") as f:
            f.write("\n".join(script) + "\n")
        envvars = dict(os.environ)
        envvars.update(TMPDIR=tmp, TELEMONREG_MACHINE="127.0.0.1:%d" % ct.free_port(),
                       HOME=env.path("home"), LC_ALL="C.UTF-8")
        for k in ("TELEMON_STATE", "TELEMONRC", "CMON_LOG", "CMON_LOG_FD", "XDG_STATE_HOME"):
            envvars.pop(k, None)
        t0 = time.monotonic()
        p = subprocess.Popen(["bash", env.path("tour.sh")], env=envvars, cwd=top,
                             start_new_session=True, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        try:
            out, _ = p.communicate(timeout=200)
        finally:
            # whatever the tour left running (it should stop its daemons itself)
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        took = time.monotonic() - t0
        check(p.returncode == 0, "the tour's shell: exit %s: %r", p.returncode, out[-2000:])
        failures = []
        for i, (body, expected) in enumerate(blocks):
            with open(env.path("out.%d" % i), errors="replace") as f:
                actual = f.read()
            with open(env.path("rc.%d" % i)) as f:
                rc = int(f.read())
            head = "block %d:\n%s" % (i + 1, body)
            if rc != 0:
                failures.append("%s--> exit status %d; printed:\n%s" % (head, rc, actual))
            elif expected is not None and not matches(expected, actual):
                failures.append("%s--> printed:\n%s--> %s" % (head, actual,
                                                             first_difference(expected, actual)))
        if failures:
            for name in ("telemonitor.log", "telemonreg.log"):
                for root, _dirs, files in os.walk(tmp):
                    if name in files:
                        with open(os.path.join(root, name), errors="replace") as f:
                            sys.stderr.write("---- %s\n%s\n" % (name, f.read()[-3000:]))
        check(not failures, "the README tour differs from what it shows:\n\n%s",
              "\n\n".join(failures))
        print("tour: %d blocks in %.1f s" % (len(blocks), took))


if __name__ == "__main__":
    ct.run_test(main)
