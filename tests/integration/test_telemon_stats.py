"""telemonctl stats: the report's Lectern example (Figures 5-6). The "1-day
stats" assertion fails for every one-day Chunk, so each day's metrics are
stored as a failure; `stats` shows them per day, mappings as histograms.
The log is tests/lang/lectern.log (two days) with its timestamps moved to
wall-clock time (#clock CLOCK_REALTIME) starting 2024-03-01 01:00 UTC; it
runs twice, so each day has two reports whose histograms add up."""
import json

import cmontest as ct
import telemontest as tt
from cmontest import check

BASE_MS = 1709251200000          # 2024-03-01T00:00:00Z in ms


def shifted_lectern(path):
    out = []
    with open(tt.LECTERN_LOG) as f:
        for line in f:
            if line.startswith("#tick-ns"):
                out.append(line)
                out.append("#clock CLOCK_REALTIME\n")
            elif line.startswith("#") or not line.strip():
                out.append(line)
            else:
                ts, rest = line.split(" ", 1)
                out.append("%d %s" % (int(ts) + BASE_MS, rest))
    with open(path, "w") as f:
        f.writelines(out)


def main():
    with ct.Env("telemon_stats") as env:
        reg = env.registry()
        tm = tt.Telemonitor(env, reg, tt.rc_class("lectern", spec=tt.LECTERN_SPEC))
        log = env.path("lectern.log")
        shifted_lectern(log)
        for _ in range(2):
            s = env.snarflog("lectern", reg=reg, cmd=tt.writer_cmd("--file", log))
            check(s.wait(30) == 0, "snarflog: %s", s.stderr())
        fails = tm.wait_failures(4, "--assert", "1-day stats")
        check(len(fails) == 4, "two chunks per run: %r", fails)
        check(len(tm.failures("--assert", "1-sec max for display")) == 4, "two slow lgm per run")

        st = tm.json("stats", "--prog", "lectern", "--assert", "1-day stats")
        check(st["prog"] == "lectern" and st["assert"] == "1-day stats", "header: %r", st)
        days = st["days"]
        check([d["day"] for d in days] == ["2024-03-01", "2024-03-02"], "days: %r", days)
        check([d["reports"] for d in days] == [2, 2], "reports per day: %r", days)
        d1, d2 = days[0]["metrics"], days[1]["metrics"]
        check(d1["applyOps"] == {"kind": "mapping", "values": {"3": 4, "5": 8}},
              "applyOps day 1 (two reports added up): %r", d1["applyOps"])
        check(d2["applyOps"]["values"] == {"3": 4, "5": 8, "7": 4}, "applyOps day 2: %r",
              d2["applyOps"])
        check(d1["lgmTimeByArea"]["values"] == {"480000": {"270": 4},
                                                "1080000": {"230": 4, "310": 4}},
              "nested mapping: %r", d1["lgmTimeByArea"])
        check(d1["pagesPerDoc"] == {"kind": "number", "n": 2, "min": 2.5, "mean": 2.5,
                                    "max": 2.5, "sum": 5}, "number: %r", d1["pagesPerDoc"])
        check(d2["pageTimes"]["values"] == {"30": 4, "47": 4, "65": 4, "81": 2},
              "pageTimes day 2: %r", d2["pageTimes"])

        one = tm.json("stats", "--prog", "lectern", "--assert", "1-day stats",
                      "--day", "2024-03-02")
        check([d["day"] for d in one["days"]] == ["2024-03-02"], "--day: %r", one)

        text = tm.ctl("stats", "--prog", "lectern", "--assert", "1-day stats")
        check("4 reports on 2 days" in text, "summary line: %r", text)
        check("== 2024-03-01  (2 reports)" in text, "day heading: %r", text)
        check("applyOps  (mapping, 2 keys)" in text, "mapping heading: %r", text)
        bar = [l for l in text.splitlines() if l.strip().startswith("5 |")]
        check(bar and ("#" in bar[0] or "\u2588" in bar[0]) and bar[0].endswith(" 8"),
              "a histogram bar: %r", bar)
        check("480000:" in text, "nested histogram: %r", text)
        check("pagesPerDoc" in text and "mean 2.5" in text, "numbers: %r", text)

        rc, out, err = tm.ctl_rc("stats", "--prog", "lectern", "--assert", "no such")
        check(rc == 0 and "no reports" in out, "nothing to show: %d %r", rc, out)
        rc, out, err = tm.ctl_rc("stats", "--prog", "lectern", "--assert", "1-day stats",
                                 "--day", "March 1")
        check(rc == 2 and "--day" in err, "bad --day: %d %r", rc, err)
        rc, out, err = tm.ctl_rc("stats", "--prog", "lectern")
        check(rc == 2 and "--assert" in err, "missing --assert: %d %r", rc, err)
        json.loads(tm.ctl("stats", "--json", "--prog", "x", "--assert", "y"))
        tm.stop()


ct.run_test(main)
