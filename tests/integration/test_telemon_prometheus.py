"""/metrics scraped by a real Prometheus (Debian's prometheus package): the
exposition passes `promtool check metrics`; Prometheus scrapes it every
second on loopback, and its query API returns the exact record count of an
ended instance, its failures by assertion, and a report assertion's
numbers and histogram buckets as they were stored, and histogram_quantile
over a PSpec histogram's buckets (cmon_report_distribution_seconds, line
for line in the exposition) falls in the right bin. Label values with a
backslash, a double quote or a newline are escaped (an assertion label
in a spec of ours). Skipped (exit 77, with the reason) only when
Prometheus is not installed or cannot start here."""
import calendar
import re
import http.client
import json
import os
import shutil
import subprocess
import time
import urllib.parse

import cmontest as ct
import telemontest as tt
from cmontest import check

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"

# fsread with one more assertion whose label needs escaping
ODD_LABEL = 'odd \\ "label"'

# A report whose metrics hold a PSpec histogram of read times in
# milliseconds (trunc(r.time / 1 ms): keys are bin indexes), over a batch
# of ten reads of 1.5, 2.5 and 7.2 ms: bins 1 -> 5, 2 -> 3, 7 -> 2.
BINNED_SPEC = """perfspec binned
  timed event StartRead(tid, size);
              EndRead(tid);
  event BatchStart; BatchEnd;
  interval Read =
    s: StartRead, e: EndRead where e.tid = s.tid
  metrics
    time = ts(e) - ts(s)
  end Read;
  interval Batch =
    s: BatchStart, e: BatchEnd
  metrics
    reads = {count r : Read},
    msTimes = {+ r : Read : trunc(r.time / 1 ms) -> 1}
  end Batch;
  assert "batch stats": {& b : Batch : false};
end binned
"""
BINNED_MS = [1.5] * 5 + [2.5] * 3 + [7.2] * 2


def binned_log():
    """The batch of BINNED_MS reads as a cmon-ascii log."""
    lines = ["#cmon-ascii 1", "#program binned", "#tick-ns 1"]
    t = 1000000
    lines.append("%d 1 BatchStart" % t)
    for ms in BINNED_MS:
        t += 1000
        lines.append("%d 1 StartRead 1 8192" % t)
        t += int(ms * tt.MS)
        lines.append("%d 1 EndRead 1" % t)
    lines.append("%d 1 BatchEnd" % (t + 1000))
    return "\n".join(lines) + "\n"



def start_prometheus(env, target):
    """Prometheus scraping `target` every second; its port. Skips the test
    (exit 77) if it is missing or does not become ready."""
    if not os.access(PROMETHEUS, os.X_OK):
        ct.skip("prometheus is not installed (Debian package prometheus; scripts/deps.sh)")
    port = ct.free_port()
    conf = env.path("prometheus.yml")
    with open(conf, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: cmon\n    scrape_interval: 1s\n"
                "    scrape_timeout: 1s\n    static_configs:\n"
                "      - targets: ['%s']\n" % target)
    proc = env.spawn("prometheus", [PROMETHEUS, "--config.file=" + conf,
                                    "--storage.tsdb.path=" + env.path("tsdb"),
                                    "--web.listen-address=127.0.0.1:%d" % port,
                                    "--log.level=warn"])

    def ready():
        if not proc.alive():
            return "exited"
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/-/ready")
            ok = c.getresponse().status == 200
            c.close()
            return "ready" if ok else None
        except OSError:
            return None
    try:
        state = ct.wait_for(ready, 30, "prometheus to be ready")
    except ct.TestFailure:
        state = "not ready after 30 s"
    if state != "ready":
        ct.skip("prometheus could not start (%s): %s" % (state, proc.stderr()[-2000:]))
    return port


def query(port, expr):
    """Prometheus's instant query: {labels-without-name: value}."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    r = json.loads(c.getresponse().read())
    c.close()
    check(r.get("status") == "success", "query %s: %r", expr, r)
    return r["data"]["result"]


def wait_value(port, expr, want, what):
    """Wait until `expr` gives exactly one series with value `want`."""
    def got():
        res = query(port, expr)
        return res if len(res) == 1 and float(res[0]["value"][1]) == float(want) else None
    try:
        return ct.wait_for(got, 30, what, interval=0.5)[0]
    except ct.TestFailure:
        raise ct.TestFailure("%s: %s gives %r, wanted %r" % (what, expr, query(port, expr), want))


def main():
    with ct.Env("telemon_prometheus") as env:
        spec = env.path("fsread.pspec")
        with open(tt.FSREAD_SPEC) as f:
            text = f.read()
        label = ODD_LABEL.replace("\\", "\\\\").replace('"', '\\"')
        with open(spec, "w") as f:
            f.write(text.replace("end fsread",
                                 '  assert "%s": {& r : Read : r.size < 0};\nend fsread' % label))
        bspec, blog = env.path("binned.pspec"), env.path("binned.log")
        with open(bspec, "w") as f:
            f.write(BINNED_SPEC)
        with open(blog, "w") as f:
            f.write(binned_log())
        reg = env.registry()
        rc = (tt.rc_class("fsread", spec=spec) + tt.rc_class("lectern", spec=tt.LECTERN_SPEC) +
              tt.rc_class("binned", spec=bspec))
        tm = tt.Telemonitor(env, reg, rc, extra=["-http", "127.0.0.1:0"])
        host, port = tm.http_addr()

        s = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd("--reads", 70, "--slow", "3,9"))
        check(s.wait(30) == 0, "snarflog: %s", s.stderr())
        lec = env.snarflog("lectern", reg=reg, cmd=tt.writer_cmd("--file", tt.LECTERN_LOG))
        check(lec.wait(30) == 0, "snarflog: %s", lec.stderr())
        bin_ = env.snarflog("binned", reg=reg, cmd=tt.writer_cmd("--file", blog))
        check(bin_.wait(30) == 0, "snarflog: %s", bin_.stderr())
        inst = tm.instance(lambda i: i["prog"] == "fsread" and i["state"] == "ended",
                           what="fsread to end")
        check(inst["records"] == 210, "every record: %r", inst)
        linst = tm.instance(lambda i: i["prog"] == "lectern" and i["state"] == "ended",
                            what="lectern to end")
        reports = tm.wait_failures(2, "--assert", "1-day stats")
        latest = reports[-1]["metrics"]
        tm.wait_failures(70 + 2, "--prog", "fsread")
        binst = tm.instance(lambda i: i["prog"] == "binned" and i["state"] == "ended",
                            what="binned to end")
        tm.wait_failures(1, "--assert", "batch stats")

        # the exposition as promtool sees it
        status, hd, body = tm.http("/metrics")
        check(status == 200 and hd["content-type"].startswith("text/plain; version=0.0.4"),
              "/metrics: %d %r", status, hd)
        expo = body.decode()
        if os.access(PROMTOOL, os.X_OK):
            p = subprocess.run([PROMTOOL, "check", "metrics"], input=body,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
            check(p.returncode == 0, "promtool check metrics: %s\n%s",
                  p.stdout.decode(), expo[:4000])
        else:
            ct.skip("promtool is not installed (Debian package prometheus)")
        check('assert="odd \\\\ \\"label\\""' in expo, "escaped label: %s",
              [l for l in expo.splitlines() if "odd" in l])

        # the batch's msTimes as a histogram in seconds, line for line: each
        # filled bin's lower and upper bound (its key and key + 1, in ms),
        # +Inf and _count, no _sum (a bin keeps only a count)
        bl = ('prog="binned",machine="%s",pid="%d",instance_id="%d",class="%d",'
              'assert="batch stats",metric="msTimes"'
              % (binst["machine"], binst["pid"], binst["id"], binst["class"]))
        fam = "cmon_report_distribution_seconds"
        want = ["# TYPE %s histogram" % fam] + [
            '%s_bucket{%s,le="%s"} %d' % (fam, bl, le, n)
            for le, n in (("0.001", 0), ("0.002", 5), ("0.003", 8), ("0.007", 8),
                          ("0.008", 10), ("+Inf", 10))] + [
            "%s_count{%s} 10" % (fam, bl)]
        got = [l for l in expo.splitlines()
               if l.startswith("# TYPE %s " % fam) or (l.startswith(fam) and bl in l)]
        check(got == want, "the batch's histogram:\n%s\nwanted\n%s", "\n".join(got),
              "\n".join(want))
        check("%s_sum" % fam not in expo, "no _sum")
        # the gauges stay beside it
        check('cmon_report_mapping{%s,key="7"} 2' % bl in expo, "the mapping's gauges")

        # every family's name starts with cmon_ (DESIGN.md), the process
        # metrics' too
        names = {ln.split()[2] for ln in expo.splitlines() if ln.startswith("# TYPE ")}
        names |= {re.split(r"[{ ]", ln)[0] for ln in expo.splitlines()
                  if ln and not ln.startswith("#")}
        check(names and all(n.startswith("cmon_") for n in names),
              "metric names without cmon_: %r", sorted(n for n in names if not n.startswith("cmon_")))

        # delivery (no relay, no Alertmanager here: all 0, as status --json
        # says) and the process metrics (client libraries' process_*), from /proc/self
        samples = {}
        for line in expo.splitlines():
            if line and not line.startswith("#") and "{" not in line:
                name, val = line.split(" ")
                samples[name] = float(val)
        status = tm.json("status")
        for what in ("mail", "alertmanager"):
            check(status[what] == {"sent": 0, "queued": 0, "failed_attempts": 0, "dropped": 0,
                                   "last_error": None}, "status %s: %r", what, status[what])
        for name in ("cmon_alerts_sent_total", "cmon_alerts_failed_total",
                     "cmon_alerts_dropped_total", "cmon_alerts_queue_length",
                     "cmon_mail_sent_total", "cmon_mail_failed_total", "cmon_mail_dropped_total",
                     "cmon_mail_queue_length"):
            check(samples.get(name) == 0, "%s: %r", name, samples.get(name))
        since = calendar.timegm(time.strptime(status["since"], "%Y-%m-%dT%H:%M:%SZ"))
        check(abs(samples.get("cmon_process_start_time_seconds", 0) - since) < 3,
              "cmon_process_start_time_seconds %r, started %s",
              samples.get("cmon_process_start_time_seconds"), status["since"])
        check(0 <= samples.get("cmon_process_cpu_seconds_total", -1) < 600 and
              samples.get("cmon_process_resident_memory_bytes", 0) > 1 << 20 and
              samples.get("cmon_process_virtual_memory_bytes", 0) >=
              samples["cmon_process_resident_memory_bytes"] and
              3 <= samples.get("cmon_process_open_fds", 0) <=
              samples.get("cmon_process_max_fds", 0),
              "process metrics: %r",
              {k: v for k, v in samples.items() if k.startswith("cmon_process_")})

        # Prometheus scrapes it; its query API gives the stored numbers
        pport = start_prometheus(env, "%s:%d" % (host, port))
        wait_value(pport, 'up{job="cmon"}', 1, "the target to be up")
        sel = 'prog="fsread",instance_id="%d"' % inst["id"]
        r = wait_value(pport, "cmon_records_total{%s}" % sel, 210,
                       "records of the ended instance")
        m = r["metric"]
        check(m["machine"] == inst["machine"] and m["pid"] == str(inst["pid"]) and
              m["class"] == str(inst["class"]) and m["instance"] == "%s:%d" % (host, port),
              "labels: %r", m)
        wait_value(pport, "cmon_lost_records_total{%s}" % sel, 0, "nothing lost")
        wait_value(pport, 'cmon_failures_total{%s,assert="read at most 10 ms"}' % sel, 2,
                   "the two slow reads")
        wait_value(pport, 'cmon_failures_total{%s,assert=%s}' % (sel, json.dumps(ODD_LABEL)), 70,
                   "the odd label, escaped and read back")
        wait_value(pport, 'cmon_instances{state="ended"}', 3, "instances by state")
        wait_value(pport, "cmon_store_degraded", 0, "the store is fine")
        wait_value(pport, 'cmon_build_info{version!=""}', 1, "build info")
        wait_value(pport, "cmon_alerts_failed_total", 0, "alert delivery")
        r = ct.wait_for(lambda: query(pport, "cmon_process_resident_memory_bytes"), 30,
                        "cmon_process_resident_memory_bytes", interval=0.5)
        check(float(r[0]["value"][1]) > 1 << 20, "process metrics scraped: %r", r)

        # interval durations as a histogram, from the checkers' summaries:
        # every Read of the fsread instance counted, and histogram_quantile
        # answers from CMon's buckets
        dsel = 'prog="fsread",class="%d",type="Read"' % inst["class"]
        wait_value(pport, "cmon_interval_duration_seconds_count{%s}" % dsel, 70,
                   "the 70 reads in the duration histogram")
        q = ct.wait_for(lambda: query(pport, "histogram_quantile(0.99, "
                                      "cmon_interval_duration_seconds_bucket{%s})" % dsel), 30,
                        "histogram_quantile over cmon_interval_duration_seconds", interval=0.5)
        p99 = float(q[0]["value"][1])
        check(0 < p99 < 100, "p99 of the reads: %r", q)
        print("p99 of the reads from CMon's buckets: %.6f s" % p99)

        # a PSpec histogram: histogram_quantile over its buckets answers a
        # value inside the right bin (as Prometheus's buckets, bounded above:
        # the quantile that is the last value of a bin is the bin's upper
        # bound). The ninth of the ten reads (7.2 ms) is in bin 7, [7 ms, 8 ms);
        # the fifth (1.5 ms), the median, in bin 1.
        bsel = 'prog="binned",instance_id="%d",metric="msTimes"' % binst["id"]
        wait_value(pport, "cmon_report_distribution_seconds_count{%s}" % bsel, 10,
                   "the ten reads in the batch's histogram")
        q = ct.wait_for(lambda: query(pport, "histogram_quantile(0.9, "
                                      "cmon_report_distribution_seconds_bucket{%s})" % bsel), 30,
                        "histogram_quantile over cmon_report_distribution_seconds", interval=0.5)
        p90 = float(q[0]["value"][1])
        check(0.007 < p90 <= 0.008, "p90 of the batch, in bin 7 (7 ms, 8 ms]: %r", q)
        q = query(pport, "histogram_quantile(0.5, cmon_report_distribution_seconds_bucket{%s})"
                  % bsel)
        p50 = float(q[0]["value"][1])
        check(0.001 < p50 <= 0.002, "median of the batch, in bin 1 (1 ms, 2 ms]: %r", q)
        print("p90 and median of the batch from CMon's buckets: %.6f s, %.6f s" % (p90, p50))
        # Lectern's lgmTimes (keys are lower bounds of 10-ms bins, no unit in
        # its name): a histogram in key units, bins as wide as the keys' gcd
        lg = {int(k): v for k, v in latest["lgmTimes"].items()}
        lq = ct.wait_for(lambda: query(pport, 'histogram_quantile(0.5, cmon_report_distribution_bucket'
                                       '{prog="lectern",instance_id="%d",metric="lgmTimes"})'
                                       % linst["id"]), 30, "lgmTimes as a histogram", interval=0.5)
        ranks, half = sorted(lg), sum(lg.values()) / 2
        below = 0
        for k in ranks:
            if below + lg[k] >= half:
                break
            below += lg[k]
        med = float(lq[0]["value"][1])
        check(k < med <= k + 10, "median of lgmTimes %r in bin (%d, %d]: %r", lg, k, k + 10, lq)

        # a report assertion's numbers and histogram, from its latest report
        lsel = 'prog="lectern",instance_id="%d",assert="1-day stats"' % linst["id"]
        numbers = {k: v for k, v in latest.items() if isinstance(v, (int, float))
                   and not isinstance(v, bool)}
        maps = {k: v for k, v in latest.items() if isinstance(v, dict)}
        check(numbers and maps, "the report has numbers and mappings: %r", latest)
        wait_value(pport, "cmon_reports_total{%s}" % lsel, len(reports),
                   "the reports counted as reports")
        check(query(pport, "cmon_failures_total{%s}" % lsel) == [],
              "a report is not counted as a failure")
        for k, v in numbers.items():
            wait_value(pport, 'cmon_report_metric{%s,metric="%s"}' % (lsel, k), v,
                       "report metric %s" % k)
        for k, v in maps.items():
            flat = {kk: vv for kk, vv in v.items() if isinstance(vv, (int, float))}
            if not flat:
                continue
            res = ct.wait_for(lambda: (lambda r: r if len(r) == len(flat) else None)(
                query(pport, 'cmon_report_mapping{%s,metric="%s"}' % (lsel, k))), 30,
                "buckets of %s" % k, interval=0.5)
            got = {x["metric"]["key"]: float(x["value"][1]) for x in res}
            check(got == {kk: float(vv) for kk, vv in flat.items()},
                  "buckets of %s: %r, stored %r", k, got, flat)
        tm.stop()


ct.run_test(main)
