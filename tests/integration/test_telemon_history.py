"""A program's version and its history (issue 13 part 3, first half):
snarflog puts the version in the log header, right after the magic line
(`#program-version V` in ascii, Header.extra "program-version" in binary):
--program-version STR, else the GNU build-id of CMD's executable as
"build-id:HEX" (none for a program without one). The telemonitor keeps it
with each instance (instances --json "version"), and `telemonctl history
PROG` lists the versions with their instances, first and last seen,
records and failures, oldest first, the same after a restart. `telemonctl
compare PROG V1 V2` finds a planted 10% slowdown of a per-minute report
metric and of the reads themselves (the checker's per-minute summaries of
their durations), and no change where there is none. A bad --program-version is a
usage error."""
import json
import os
import random
import re
import subprocess
import urllib.error
import urllib.request

import cmontest as ct
import telemontest as tt
from cmontest import check

LOG = "#cmon-ascii 1\n#tick-ns 1\n" + "".join("%d 1 Tick %d\n" % (100 + i, i) for i in range(30))


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL).stdout.decode()
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return "build-id:" + m.group(1) if m else None


SPEC = """perfspec reads
  timed event StartRead(tid); EndRead(tid);
  interval Read = s: StartRead, e: EndRead where e.tid = s.tid
    metrics time = ts(e) - ts(s)
  end Read;
  interval Minute = s: every 1 min, e: after 1 min
    metrics reads = {count r : Read}, meantime = {mean r : Read : r.time}
  end Minute;
  assert "per minute": {& m : Minute : false};
end reads
"""


def reads_log(path, seed, scale, minutes=16):
    """A log of `minutes` minutes (1 ms ticks), 40 reads a minute taking
    Normal(10 ms, 3 ms) times `scale`: per-minute means spread about 5%."""
    r = random.Random(seed)
    lines = ["#cmon-ascii 1", "#tick-ns 1000000"]
    for minute in range(minutes):
        for i in range(40):
            t = minute * 60000 + i * 1400 + r.randint(0, 100)
            d = max(1, int(round(r.gauss(10, 3) * scale)))
            lines += ["%d 1 StartRead 1" % t, "%d 1 EndRead 1" % (t + d)]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def compare(env, reg):
    """telemonctl compare: V2 reads 10% slower is found, V3 (as V1) is not."""
    spec = env.path("reads.pspec")
    with open(spec, "w") as f:
        f.write(SPEC)
    tm = tt.Telemonitor(env, reg, tt.rc_class("reads", spec=spec), name="tm2",
                        extra=["-http", "127.0.0.1:0"])
    runs = [("v1", 1, 1.0), ("v1", 2, 1.0), ("v2", 3, 1.1), ("v2", 4, 1.1), ("v3", 5, 1.0),
            ("v3", 6, 1.0)]
    for version, seed, scale in runs:
        log = env.path("reads%d.log" % seed)
        reads_log(log, seed, scale)
        s = env.snarflog("reads", "--program-version", version, reg=reg,
                         cmd=tt.writer_cmd("--file", log))
        check(s.wait(30) == 0, "snarflog: %s", s.stderr())
    ct.wait_for(lambda: len([i for i in tm.instances() if i["state"] == "ended"]) == 6, 30,
                "six runs to end")
    # 15 whole minutes per run are reported (the 16th ends with the log)
    ct.wait_for(lambda: len(tm.failures()) >= 90 or None, 30, "the per-minute reports")

    def cmp(v1, v2):
        out = json.loads(tm.ctl("--json", "compare", "reads", v1, v2))
        return {m["metric"]: m for m in out["metrics"]}, out
    got, whole = cmp("v1", "v2")
    mt = got.get("meantime", {})
    check(mt.get("verdict") == "slower" and mt["n1"] >= 28 and mt["n2"] >= 28 and
          0.05 * mt["median1"] < mt["shift"] < 0.15 * mt["median1"] and
          mt["ci_low"] > 0 and mt["ci_low"] <= mt["shift"] <= mt["ci_high"],
          "v2's planted 10%% is found, with an interval around it: %r", whole)
    check(got["reads"]["verdict"] == "no change detected", "the read count did not move: %r",
          got["reads"])
    # the reads' durations themselves, from the checker's per-minute sketches
    iv = [m for m in whole["metrics"] if m["kind"] == "interval" and m["type"] == "Read"]
    check(len(iv) == 1 and iv[0]["metric"] == "time" and iv[0]["verdict"] == "slower" and
          iv[0]["n1"] == 2 * 16 * 40 and iv[0]["n2"] == 2 * 16 * 40 and
          0.05 * iv[0]["median1"] < iv[0]["shift"] < 0.15 * iv[0]["median1"],
          "every read of v2 is 10%% slower: %r", iv)
    check(iv[0].get("unit") == "ns" and mt.get("unit") == "ns" and "unit" not in got["reads"],
          "durations say their unit: %r", whole)
    text = tm.ctl("compare", "reads", "v1", "v2")
    check(re.search(r"interval Read: time: \d+ vs \d+ values, median [0-9.]+ ms -> [0-9.]+ ms, "
                    r"shift \+[0-9.]+ (ms|\u00b5s) \(\+[0-9.]+%\), 95% interval \[\+[0-9.]+ (ms|\u00b5s), "
                    r"\+[0-9.]+ (ms|\u00b5s)\]", text) and
          re.search(r"reads: \d+ vs \d+ values, median \d+ -> \d+, ", text),
          "durations in units, counts as numbers: %s", text)
    check("Mann-Whitney" in whole["method"], "the method is said: %r", whole["method"])
    got, whole = cmp("v1", "v3")
    check(got["meantime"]["verdict"] == "no change detected",
          "no change between v1 and v3: %r", whole)
    iv = [m for m in whole["metrics"] if m["kind"] == "interval"]
    check(len(iv) == 1 and iv[0]["verdict"] == "no change detected",
          "the reads of v1 and v3 take as long: %r", iv)
    text = tm.ctl("compare", "reads", "v1", "v2", "--assert", "per minute")
    check("per minute: meantime:" in text and "slower" in text and "95% interval" in text,
          "as text: %s", text)
    check("no report metric" in tm.ctl("compare", "reads", "v1", "nosuch"), "an unknown version")
    # the same in the HTTP API
    host, port = tm.http_addr()

    def api(path):
        return json.loads(urllib.request.urlopen("http://%s:%d%s" % (host, port, path),
                                                 timeout=10).read().decode())
    check(api("/api/v1/compare?v2=v2&prog=reads&v1=v1") == json.loads(
        tm.ctl("--json", "compare", "reads", "v1", "v2")), "GET /api/v1/compare")
    check(api("/api/v1/history?prog=reads") == json.loads(tm.ctl("--json", "history", "reads")),
          "GET /api/v1/history")
    # bytes that are not UTF-8 echoed back: still valid JSON (UTF-8, the
    # bytes as \u00XX), never the raw bytes (issue 30)
    raw = urllib.request.urlopen("http://%s:%d/api/v1/compare?prog=x&v1=a&v2=%%ff%%fe%%01"
                                 % (host, port), timeout=10).read()
    got = json.loads(raw.decode("utf-8", errors="strict"))
    check(b"\xff" not in raw and got["v2"] == "\u00ff\u00fe\u0001",
          "invalid UTF-8 escaped, the bytes kept as Latin-1: %r", raw[:300])
    # ... and the dashboard: the versions table, each later version linked to
    # its comparison with the one before
    page = urllib.request.urlopen("http://%s:%d/" % (host, port), timeout=10).read().decode()
    table = page[page.index('<table id="versions">'):]
    table = table[:table.index("</table>")]
    check(table.count("<tr><td>") == 3 and
          '<a class="compare" href="/api/v1/compare?prog=reads&amp;v1=v1&amp;v2=v2">' in table and
          '<a class="compare" href="/api/v1/compare?prog=reads&amp;v1=v2&amp;v2=v3">' in table,
          "the dashboard's versions: %s", table)
    try:
        api("/api/v1/compare?prog=reads&v1=v1")
        check(False, "compare without v2 is refused")
    except urllib.error.HTTPError as e:
        check(e.code == 400, "400 without v2: %d", e.code)
    tm.stop()


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
        # the original's spelling, -version STR, for the first run
        ids = []
        for version, log in runs:
            args = ([] if not version else ["-version", version] if not ids
                    else ["--program-version", version])
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
        compare(env, reg)
        # usage errors
        for bad in ["", "two\nlines", "x" * 129]:
            p = subprocess.run([ct.binary("snarflog"), "vers", "--program-version", bad],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
            check(p.returncode == 2 and b"bad value" in p.stderr and
                  b"Try 'snarflog --help'" in p.stderr, "bad version %r: %r", bad, p.stderr)


ct.run_test(main)
