"""/metrics stays bounded however many instances the store holds: at most
1000 instances (METRICS_INSTANCES_MAX), the running ones first, then the
most recently ended; the rest are counted in
cmon_metrics_instances_omitted. Report series (numbers and mapping entries
of the latest reports) are bounded to 20000, the rest counted in
cmon_metrics_series_omitted. The store is given 1 running and 1100 ended
instances and a report with a 25000-key mapping (written with sqlite while
the telemonitor is stopped, as a long-lived service would accumulate
them)."""
import json
import os
import re
import sqlite3

import cmontest as ct
import telemontest as tt
from cmontest import check

BOUND = 1000                     # METRICS_INSTANCES_MAX in daemons/telemonitor/metrics.h
SERIES_BOUND = 20000             # METRICS_REPORT_SERIES_MAX
ENDED = 1100


def main():
    with ct.Env("telemon_metrics_bound") as env:
        tm = tt.Telemonitor(env, None, "", extra=["-http", "127.0.0.1:0"])
        tm.stop()
        db = sqlite3.connect(os.path.join(tm.state, "telemonitor.db"))
        with db:
            # id 1 runs (listed, not ended); ids 2.. ended, later ids later
            db.execute("INSERT INTO instances (id, class_id, prog, machine, pid, start_ns,"
                       " first_seen, ended, state, records) VALUES (1, 0, 'live', 'm', 1, 1,"
                       " 1700000000, NULL, 'listed', 7)")
            db.executemany("INSERT INTO instances (id, class_id, prog, machine, pid, start_ns,"
                           " first_seen, ended, state, records) VALUES (?, 0, 'old', 'm', ?,"
                           " ?, 1700000000, ?, 'ended', ?)",
                           [(i, i, i, 1700000000 + i, i) for i in range(2, ENDED + 2)])
            # a report with a 25000-key mapping and a number: 20000 series shown
            big = {"hist": {str(k): 1 for k in range(SERIES_BOUND + 5000)}, "n": 3}
            db.execute("INSERT INTO failures (id, instance_id, assert, line, time, metrics,"
                       " report) VALUES (1, 1, 'big report', 9, 1700000000, ?, 1)",
                       (json.dumps(big),))
        db.close()
        tm.start()
        code, hd, body = tm.http("/metrics")
        check(code == 200, "/metrics: %d", code)
        text = body.decode()
        shown = [int(m) for m in re.findall(r'^cmon_records_total\{[^}]*instance_id="(\d+)"',
                                            text, re.M)]
        check(len(shown) == BOUND, "%d instances shown, bound %d", len(shown), BOUND)
        want = {1} | set(range(ENDED + 1, ENDED + 1 - (BOUND - 1), -1))
        check(set(shown) == want, "the running one and the latest ended: missing %r, extra %r",
              sorted(want - set(shown))[:10], sorted(set(shown) - want)[:10])
        check("\ncmon_metrics_instances_omitted %d\n" % (ENDED + 1 - BOUND) in text,
              "omitted counted: %s", [l for l in text.splitlines() if "omitted" in l])
        check('cmon_instances{state="ended"} %d\n' % ENDED in text, "by state: %s",
              [l for l in text.splitlines() if l.startswith("cmon_instances")])
        for family in ("cmon_lost_records_total", "cmon_gaps_total", "cmon_instance_state"):
            n = len(re.findall("^%s\\{" % family, text, re.M))
            check(n == BOUND, "%s: %d series", family, n)
        mapped = len(re.findall(r'^cmon_report_mapping\{', text, re.M))
        numbers = len(re.findall(r'^cmon_report_metric\{', text, re.M))
        check(mapped + numbers == SERIES_BOUND, "report series: %d + %d", mapped, numbers)
        check("\ncmon_metrics_series_omitted %d\n" % (SERIES_BOUND + 5000 + 1 - SERIES_BOUND)
              in text, "series omitted: %s", [l for l in text.splitlines() if "omitted" in l])
        check(re.search(r'^cmon_reports_total\{prog="live",[^}]*assert="big report"\} 1$',
                        text, re.M), "the report counted")
        check(not re.search(r'^cmon_failures_total\{[^}]*assert="big report"\}', text, re.M),
              "a report is not a failure")
        tm.stop()


ct.run_test(main)
