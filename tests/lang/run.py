#!/usr/bin/env python3
"""Run one data-driven PSpec language test (tests/lang/README.md).

A case NAME is NAME.pspec (or NAME.peval for an evaluator session), a log,
and NAME.expected: the transcript of the run (stdout, then '--- stderr' and
stderr if any, then '--- exit N'). Directives in '%' comment lines at the top
of NAME.pspec / NAME.peval:
    % args: -f --json          extra pcheck arguments
    % log: other.log           log file (default NAME.log; 'none' for no log)
    % spec: other.pspec        (peval cases) spec to load with -s
    % cont: no                 skip the offline/continuous differential check
    % stdin: yes               give the log on standard input ('-') instead of by name
    % tool: psolve             run psolve -s NAME.pspec [args] LOG instead of pcheck
For every pcheck case whose exit status is 0, 1 or 4, the same check is run with
-cont and must report the same verdicts and the same set of failing
intervals and events. Every pcheck case whose log reads without warnings is
also run on the log converted to cmon-bin 1 and must print the same output,
and every pcheck case on a log file the same with --threads 1 and with the
read-ahead thread handing over batches of 1 and 2 records.
Usage: run.py --pcheck BIN --peval BIN [--cmonlog BIN] NAME [--update]
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def directives(path):
    d = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"\s*%\s*(args|log|spec|cont|stdin|tool):\s*(.*?)\s*$", line)
            if m:
                d[m.group(1)] = m.group(2)
            elif line.strip() and not line.lstrip().startswith("%"):
                break
    return d


def run(cmd, stdin=None, env=None):
    full = dict(os.environ, **env) if env else None
    p = subprocess.run(cmd, cwd=HERE, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                       env=full)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def transcript(code, out, err):
    t = out
    if err:
        t += "--- stderr\n" + err
    return t + "--- exit %d\n" % code


def offender_set(out, cont):
    """Verdict lines and offender lines, as sets, from text or JSON output."""
    verdicts, offenders = set(), set()
    for line in out.splitlines():
        if line.startswith("{"):
            if '"kind":' in line:
                offenders.add(line)
            elif '"assert":' in line:
                verdicts.add(line)
        elif any(w in line for w in (": failed for ", ": UNDEFINED for ", ": inconclusive for ",
                                      '" failed for ', '" UNDEFINED for ', '" inconclusive for ')):
            offenders.add(line)
        elif ": assertion " in line:
            verdicts.add(line)
    return verdicts, offenders


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pcheck", required=True)
    ap.add_argument("--peval", required=True)
    ap.add_argument("--cmonlog")
    ap.add_argument("--psolve")
    ap.add_argument("--update", action="store_true")
    ap.add_argument("name")
    a = ap.parse_args()
    name = a.name
    if os.path.exists(os.path.join(HERE, name + ".peval")):
        src = name + ".peval"
        d = directives(os.path.join(HERE, src))
        cmd = [a.peval]
        if d.get("spec"):
            cmd += ["-s", d["spec"]]
        cmd += ["-c", src]
        log = d.get("log", name + ".log")
        if log != "none":
            cmd.append(log)
        cmd += d.get("args", "").split()
        is_pcheck = False
    else:
        src = name + ".pspec"
        d = directives(os.path.join(HERE, src))
        tool = a.psolve if d.get("tool") == "psolve" else a.pcheck
        cmd = [tool, "-s", src] + d.get("args", "").split()
        log = d.get("log", name + ".log")
        if log != "none":
            cmd.append(log)
        else:
            cmd.append("empty.log")
        is_pcheck = d.get("tool") != "psolve"
    stdin = subprocess.DEVNULL
    if d.get("stdin") == "yes":
        stdin = open(os.path.join(HERE, cmd[-1]), "rb")
        cmd[-1] = "-"
    code, out, err = run(cmd, stdin=stdin)
    got = transcript(code, out, err)
    exp_path = os.path.join(HERE, name + ".expected")
    if a.update:
        with open(exp_path, "w") as f:
            f.write(got)
    failed = False
    try:
        with open(exp_path, encoding="utf-8") as f:
            want = f.read()
    except FileNotFoundError:
        want = None
    if want != got:
        print("FAIL %s: output differs from %s.expected" % (name, name))
        print("command: " + " ".join(cmd))
        print("--- expected\n%s--- got\n%s" % (want, got))
        failed = True
    if is_pcheck and code in (0, 1, 4) and d.get("cont", "yes") != "no":
        if d.get("stdin") == "yes":
            stdin.seek(0)
        ccode, cout, cerr = run(cmd[:1] + ["-cont"] + cmd[1:], stdin=stdin)
        if ccode != code or offender_set(out, False) != offender_set(cout, True):
            print("FAIL %s: -cont differs from the offline check" % name)
            print("offline (exit %d):\n%s\ncontinuous (exit %d):\n%s" % (code, out, ccode, cout))
            failed = True
    if is_pcheck and d.get("stdin") != "yes":
        # Reading ahead on a second thread (the default for a log file) must
        # change nothing: the same transcript on one thread, and with
        # batches of 1 and 2 records (every record a hand-off; with 2, a
        # side that waits sleeps at once: the futex path every time), and
        # with the reading handed back to the engine's thread after 3
        # batches of 1, or 1 of 2 (what happens when the engine waits).
        for extra, env in ((["--threads", "1"], None), ([], {"PSPEC_PREFETCH_BATCH": "1"}),
                           ([], {"PSPEC_PREFETCH_BATCH": "2", "PSPEC_PREFETCH_SPIN": "0"}),
                           ([], {"PSPEC_PREFETCH_BATCH": "1", "PSPEC_PREFETCH_HANDOFF": "3"}),
                           ([], {"PSPEC_PREFETCH_BATCH": "2", "PSPEC_PREFETCH_HANDOFF": "1",
                                 "PSPEC_PREFETCH_SPIN": "0"})):
            tcode, tout, terr = run(cmd[:1] + extra + cmd[1:], env=env)
            if transcript(tcode, tout, terr) != got:
                print("FAIL %s: %s %s differs from the default" % (name, " ".join(extra), env or ""))
                print("--- default\n%s--- this\n%s" % (got, transcript(tcode, tout, terr)))
                failed = True
    logarg = cmd[-1]
    if is_pcheck and a.cmonlog and "warning:" not in err and code != 3 and logarg.endswith(".log") \
            and d.get("stdin") != "yes":
        import tempfile
        # Three binary spellings of the log, each read like the ascii one:
        # written to a file (ts_delta, ivalues), through a pipe (absolute ts,
        # ivalues) and --compat (absolute ts, doubles: the encoding before
        # ivalues, which old logs have).
        for how, opts in (("file", []), ("pipe", []), ("compat", ["--compat"])):
            with tempfile.NamedTemporaryFile(suffix=".bin") as tmp:
                if how == "pipe":
                    conv = subprocess.Popen([a.cmonlog, "--binary", logarg], cwd=HERE, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE)
                    cat = subprocess.run(["cat"], stdin=conv.stdout, stdout=tmp)
                    conv.stdout.close()
                    e2 = conv.stderr.read().decode("utf-8", "replace")
                    c = conv.wait() or cat.returncode
                else:
                    c, o2, e2 = run([a.cmonlog, "--binary"] + opts + ["-o", tmp.name, logarg])
                if c != 0:
                    print("FAIL %s: cmon-log could not convert %s (%s): %s" % (name, logarg, how, e2))
                    failed = True
                    continue
                bcode, bout, berr = run(cmd[:-1] + [tmp.name])
                if (bcode, bout) != (code, out):
                    print("FAIL %s: the binary log (%s) gives different output" % (name, how))
                    print("ascii (exit %d):\n%s\nbinary (exit %d):\n%s%s" % (code, out, bcode, bout, berr))
                    failed = True
    if failed:
        return 1
    print("ok %s" % name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
