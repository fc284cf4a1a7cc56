"""A program's version and its history (issue 13 part 3, first half):
snarflog puts the version in the log header, right after the magic line
(`#program-version V` in ascii, Header.extra "program-version" in binary):
--program-version STR, else the GNU build-id of CMD's executable as
"build-id:HEX" (none for a program without one). The telemonitor keeps it
with each instance (instances --json "version"), and `telemonctl history
PROG` lists the versions with their instances, first and last seen,
records and failures, oldest first, the same after a restart. A bad
--program-version is a usage error."""
import json
import os
import re
import subprocess

import cmontest as ct
import telemontest as tt
from cmontest import check

LOG = "#cmon-ascii 1\n#tick-ns 1\n" + "".join("%d 1 Tick %d\n" % (100 + i, i) for i in range(30))


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL).stdout.decode()
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return "build-id:" + m.group(1) if m else None


def main():
    with ct.Env("telemon_history") as env:
        reg = env.registry()
        tm = tt.Telemonitor(env, reg, tt.rc_class(
            "vers", tool="cat > %s/$M_INSTANCE.log" % env.dir))
        ascii_log = env.path("a.log")
        with open(ascii_log, "w") as f:
            f.write(LOG)
        bin_log = env.path("b.log")
        subprocess.run([ct.binary("cmon-log"), "--binary", "-o", bin_log, ascii_log], check=True)
        script = env.path("prog.sh")
        with open(script, "w") as f:
            f.write("cat %s >&\"$CMON_LOG_FD\"\n" % ascii_log)
        sh = os.path.realpath("/bin/sh")
        runs = [("1.0", ascii_log), ("2.0", ascii_log), ("2.0", bin_log), (None, None)]
        ids = []
        for version, log in runs:
            args = ["--program-version", version] if version else []
            cmd = tt.writer_cmd("--file", log) if log else ["/bin/sh", script]
            s = env.snarflog("vers", *args, reg=reg, cmd=cmd)
            check(s.wait(30) == 0, "snarflog: %s", s.stderr())
            inst = tm.instance(lambda i: i["prog"] == "vers" and i["state"] == "ended" and
                               i["id"] not in ids, what="the run to end")
            ids.append(inst["id"])
        want_sh = build_id(sh)
        versions = ["1.0", "2.0", "2.0", want_sh]
        # the header the tool got: the version right after the magic line
        for iid, version, (_, log) in zip(ids, versions, runs):
            path = os.path.join(env.dir, "%d.log" % iid)
            text = subprocess.run([ct.binary("cmon-log"), "--ascii", path], stdout=subprocess.PIPE,
                                  check=True).stdout.decode()
            lines = text.splitlines()
            header = [l for l in lines if l.startswith("#")]
            if version and log == ascii_log:
                check(lines[1] == "#program-version %s" % version,
                      "instance %d: after the magic line: %r", iid, lines[:4])
            elif version:
                check("#program-version %s" % version in header,
                      "instance %d: a Header field: %r", iid, header)
            else:
                check(not any(l.startswith("#program-version") for l in lines), "none: %r",
                      lines[:4])
            check(sum(1 for l in lines if not l.startswith("#")) == 30, "every record: %d", iid)
        insts = {i["id"]: i for i in json.loads(tm.ctl("--json", "instances", "--all"))}
        check([insts[i]["version"] for i in ids] == versions, "instances' versions: %r",
              [insts[i]["version"] for i in ids])

        def history():
            return [(h["version"], h["instances"], h["running"], h["records"]) for h in
                    json.loads(tm.ctl("--json", "history", "vers"))]
        want = [("1.0", 1, 0, 30), ("2.0", 2, 0, 60), (want_sh, 1, 0, 30)]
        check(history() == want, "history: %r (sh's build-id %r)", history(), want_sh)
        text = tm.ctl("history", "vers")
        check(text.splitlines()[0].split()[:3] == ["VERSION", "INSTANCES", "RUNNING"] and
              "2.0" in text, "as a table: %s", text)
        check("no instances" in tm.ctl("history", "nosuch"), "an unknown program")
        tm.stop()
        tm.start()
        check(history() == want, "the same after a restart: %r", history())
        tm.stop()
        # usage errors
        for bad in ["", "two\nlines", "x" * 129]:
            p = subprocess.run([ct.binary("snarflog"), "vers", "--program-version", bad],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
            check(p.returncode == 2 and b"bad value" in p.stderr and
                  b"Try 'snarflog --help'" in p.stderr, "bad version %r: %r", bad, p.stderr)


ct.run_test(main)
