"""The dashboard's pages and time series (docs/http.md, Dashboard and API).

The Lectern example of test_telemon_dashboard.py (it fails "1-sec max for
display" and reports "1-day stats") with -http on an ephemeral loopback
port. Then

* the API: /api/v1/failures?kind=failure|report|all splits reports from
  failures (all by default), and so do telemonctl failures --reports,
  --failures-only and --kind; /api/v1/failures/series and
  /api/v1/durations/series answer with exactly the documented keys, the
  series counting every failure; bad parameters are 400; a failure at
  :59.7 of a minute (its time set in the store, sqlite or PostgreSQL)
  counts in that minute, not the next;
* without JavaScript (urllib): /instances/N (counts, verdicts, its
  failures and, apart, its reports) and /failures/N (metrics in units,
  the witness, the log window with the failing interval's lines marked)
  render; unknown ids are 404; the filters of / (prog, assert, since,
  until) change the rows, and the failures table holds no report; every
  link of each page answers 200;
* headless Debian chromium: after the scripts ran, the failures chart's
  canvas has data-points > 0, and the instance and failure pages render.

With CMON_SCREENSHOTS=DIR (scripts/screenshots.sh) a PNG of each page is
saved there. Skipped (exit 77) only when chromium is missing or cannot
start."""
import json
import os
import re
import sqlite3
import time
import urllib.parse

import cmontest as ct
import telemontest as tt
from cmontest import check
from test_telemon_dashboard import WEB, Page, chromium, get, shifted_lectern

FAILURE_KEYS = {"since", "until", "step", "kind", "series"}
FAILURE_SERIES_KEYS = {"prog", "assert", "report", "points", "total"}
DURATION_KEYS = {"since", "until", "step", "unit", "series"}
DURATION_SERIES_KEYS = {"prog", "type", "points"}
DURATION_POINT_KEYS = {"t", "count", "p50", "p90", "p99"}


class Links(Page):
    """A page's tables and canvases (Page) and every href in it."""

    def __init__(self, text):
        self.hrefs = []
        super().__init__(text)

    def handle_starttag(self, tag, attrs):
        if tag == "a" and dict(attrs).get("href"):
            self.hrefs.append(dict(attrs)["href"])
        super().handle_starttag(tag, attrs)


def rows(page, table):
    return [r for r in page.tables.get(table, []) if "data-id" in r["attrs"]]


def check_links(base, path, page):
    """Every link of `page` (at `path`) answers 200."""
    check(page.hrefs, "%s: no links", path)
    for href in sorted(set(page.hrefs)):
        url = urllib.parse.urljoin(base + path, href)
        check(url.startswith(base), "%s: a link off the site: %r", path, href)
        status, _, body = get(base, url[len(base):].split("#")[0])
        check(status == 200, "%s: link %s answers %d %r", path, href, status, body[:200])


def check_api(tm, failures):
    """kind=, and the two series' keys and counts."""
    fails = tm.http_json("/api/v1/failures?limit=1000&kind=failure")
    reps = tm.http_json("/api/v1/failures?limit=1000&kind=report")
    both = tm.http_json("/api/v1/failures?limit=1000&kind=all")
    check(fails and not any(f["report"] for f in fails), "kind=failure: %r", fails[:3])
    check(reps and all(f["report"] for f in reps), "kind=report: %r", reps[:3])
    check(sorted(f["id"] for f in fails + reps) == sorted(f["id"] for f in both) ==
          sorted(f["id"] for f in failures), "kind=all is both, and the default")
    check(set(fails[0]) == set(failures[0]), "the same keys: %r", sorted(fails[0]))
    status, _, body = tm.http("/api/v1/failures?kind=bogus")
    check(status == 400 and b"kind" in body, "kind=bogus: %d %r", status, body)

    s = tm.http_json("/api/v1/failures/series?kind=failure")
    check(set(s) == FAILURE_KEYS, "series keys %r", sorted(s))
    check(s["step"] == 60 and s["kind"] == "failure" and s["until"] - s["since"] == 86400,
          "series defaults: %r", {k: s[k] for k in ("since", "until", "step", "kind")})
    for x in s["series"]:
        check(set(x) == FAILURE_SERIES_KEYS, "a series' keys %r", sorted(x))
        check(not x["report"] and x["total"] == sum(p[1] for p in x["points"]) and
              all(p[0] % 60 == 0 for p in x["points"]), "a series: %r", x)
    check(sum(x["total"] for x in s["series"]) == len(fails), "series count %d failures: %r",
          len(fails), s)
    by = {x["assert"]: x["total"] for x in s["series"]}
    want = {}
    for f in fails:
        name = f["assert"] if f["assert"] is not None else "line %d" % f["line"]
        want[name] = want.get(name, 0) + 1
    check(by == want, "per assertion %r, want %r", by, want)
    one = tm.http_json("/api/v1/failures/series?kind=report&step=3600&assert=" +
                       urllib.parse.quote(reps[0]["assert"]))
    check(one["step"] == 3600 and [x["assert"] for x in one["series"]] == [reps[0]["assert"]]
          and one["series"][0]["report"], "one report assertion: %r", one)
    since = max(f["time_unix"] for f in fails) + 1
    check(tm.http_json("/api/v1/failures/series?since=%d&until=%d" % (since, since + 60))
          ["series"] == [],
          "a range after every failure has no series")
    for q in ("step=0", "since=yesterday", "kind=x", "nope=1", "since=2024-03-02&until=2024-03-01",
              "since=2020-01-01&step=1"):
        status, _, body = tm.http("/api/v1/failures/series?" + q)
        check(status == 400 and b"error" in body, "series?%s: %d %r", q, status, body)

    d = tm.http_json("/api/v1/durations/series")
    check(set(d) == DURATION_KEYS and d["unit"] == "ns", "duration keys %r", d)
    for x in d["series"]:
        check(set(x) == DURATION_SERIES_KEYS and x["points"], "a duration series: %r", x)
        for p in x["points"]:
            check(set(p) == DURATION_POINT_KEYS and p["count"] > 0 and
                  p["p50"] <= p["p90"] <= p["p99"], "a point: %r", p)
    reads = [x for x in d["series"] if x["prog"] == "fsread" and x["type"] == "Read"]
    check(reads and sum(p["count"] for p in reads[0]["points"]) == 70,
          "the 70 reads of fsread: %r", d["series"])
    one = tm.http_json("/api/v1/durations/series?prog=fsread&type=Read&step=86400")
    check(len(one["series"]) == 1 and len(one["series"][0]["points"]) <= 2, "one day: %r", one)
    status, _, body = tm.http("/api/v1/durations/series?kind=failure")
    check(status == 400, "durations take no kind: %d", status)
    return fails, reps, d


def store_sql(env, tm, query):
    """Run `query` on the telemonitor's store: psql on PostgreSQL (the pg.*
    entry), else the sqlite file of its state directory."""
    if os.environ.get("CMON_TEST_STORE") == "postgresql":
        env.pg.sql(env.pg_dbs[tm.state], query)
        return
    db = sqlite3.connect(os.path.join(tm.state, "telemonitor.db"), timeout=30)
    with db:
        db.execute(query)
    db.close()


def check_series_floor(env, tm, fails):
    """A failure less than a second before a minute's end counts in that
    minute on both stores (PostgreSQL's CAST to an integer rounded it into
    the next one): one failure moved to :59.7 of its minute, then every
    point of the two minutes from there is the failures' times rounded
    down to the minute."""
    f = fails[0]
    minute = int(f["time_unix"] // 60) * 60
    store_sql(env, tm, "UPDATE failures SET time = %d.7 WHERE id = %d" % (minute + 59, f["id"]))
    now = tm.http_json("/api/v1/failures?limit=1000&kind=failure")
    moved = [g["time_unix"] for g in now if g["id"] == f["id"]]
    check(moved and abs(moved[0] - (minute + 59.7)) < 1e-3, "failure %d at :59.7: %r",
          f["id"], moved)
    want = {}
    for g in now:
        if minute <= g["time_unix"] < minute + 120:
            name = g["assert"] if g["assert"] is not None else "line %d" % g["line"]
            at = want.setdefault(name, {})
            bucket = int(g["time_unix"] // 60) * 60
            at[bucket] = at.get(bucket, 0) + 1
    s = tm.http_json("/api/v1/failures/series?kind=failure&since=%d&until=%d" %
                     (minute, minute + 120))
    got = {x["assert"]: {p[0]: p[1] for p in x["points"]} for x in s["series"]}
    check(got == want, "minutes %d, %d: %r, want %r", minute, minute + 60, got, want)
    name = f["assert"] if f["assert"] is not None else "line %d" % f["line"]
    check(got[name].get(minute, 0) >= 1, "the failure at :59.7 in its minute: %r", got)


def check_ctl(tm, fails, reps):
    """telemonctl failures --reports / --failures-only / --kind, --until."""
    ids = lambda *a: sorted(f["id"] for f in tm.json("failures", *a))
    check(ids("--reports") == ids("-kind", "report") == sorted(f["id"] for f in reps),
          "--reports")
    check(ids("--failures-only") == ids("--kind", "failure") == sorted(f["id"] for f in fails),
          "--failures-only")
    check(ids() == ids("--kind", "all") == sorted(f["id"] for f in fails + reps), "all")
    check(ids("--until", "2000-01-01") == [], "--until before every failure")
    check(ids("--until", "@%d" % (max(f["time_unix"] for f in fails) + 5)) ==
          sorted(f["id"] for f in fails + reps), "--until after every failure")
    text = tm.ctl("failures", "--reports")
    lines = [l for l in text.splitlines() if l[:1].isdigit()]
    check(len(lines) == len(reps) and all("report" in l for l in lines), "text: %s", text)
    for bad, msg in ((("--reports", "--failures-only"), "different kinds"),
                     (("--kind", "bogus"), "--kind"), (("--for", "2 hours"), "-for"),
                     (("--until", "junk"), "--until")):
        rc, out, err = tm.ctl_rc("failures", *bad)
        check(rc == 2 and msg in err, "failures %r: %d %r", bad, rc, err)
    rc, out, err = tm.ctl_rc("instances", "--reports")
    check(rc == 2 and "instances takes only" in err, "instances --reports: %d %r", rc, err)


def check_index(base, fails, reps):
    """The filters of /, reports apart, the links."""
    status, _, body = get(base, "/")
    page = Links(body.decode())
    check([int(r["attrs"]["data-id"]) for r in rows(page, "failures")] ==
          [f["id"] for f in fails][:50], "failures table: no reports, the newest first")
    check([int(r["attrs"]["data-id"]) for r in rows(page, "reports")] ==
          [f["id"] for f in reps][:50], "reports table")
    check_links(base, "/", page)
    label = fails[-1]["assert"]
    page = Links(get(base, "/?assert=" + urllib.parse.quote(label))[2].decode())
    got = rows(page, "failures")
    check(got and all(r["attrs"]["data-assert"] == label for r in got) and
          len(got) == min(50, len([f for f in fails if f["assert"] == label])),
          "assert filter: %r", got[:2])
    check(not rows(page, "reports"), "assert filter on reports")
    page = Links(get(base, "/?prog=no-such-program")[2].decode())
    check(not rows(page, "failures") and not rows(page, "reports") and
          not [r for r in page.tables.get("instances", []) if r["cells"] and
               "empty" not in r["attrs"].get("class", "")], "prog filter: nothing")
    later = time.strftime("%Y-%m-%dT%H:%M:%SZ",
                          time.gmtime(max(f["time_unix"] for f in fails + reps) + 5))
    page = Links(get(base, "/?since=" + later)[2].decode())
    check(not rows(page, "failures"), "since after the last: no rows")
    page = Links(get(base, "/?until=" + later + "&prog=lectern")[2].decode())
    check([int(r["attrs"]["data-id"]) for r in rows(page, "failures")] ==
          [f["id"] for f in fails if f["prog"] == "lectern"][:50],
          "until after the last, prog=lectern: all of lectern's")
    check_links(base, "/?until=" + later, page)
    status, _, body = get(base, "/?since=junk")
    check(status == 400 and b"since" in body, "since=junk: %d %r", status, body)


def check_instance(base, tm, inst, fails, reps):
    path = "/instances/%d" % inst["id"]
    status, ctype, body = get(base, path)
    check(status == 200 and ctype.startswith("text/html"), "%s: %d", path, status)
    text = body.decode()
    page = Links(text)
    summary = {r["cells"][0]: r for r in page.tables.get("instance", []) if r["cells"]}
    cells = [r["cells"] for r in page.tables.get("instance", [])]
    check(["%s" % inst["records"]] in cells and [inst["state"]] in cells and
          [inst["prog"]] in cells, "instance summary %r (%r)", cells, summary)
    verdicts = tm.http_json("/api/v1/instances/%d/verdicts" % inst["id"])
    vrows = [r for r in page.tables.get("verdicts", []) if r["cells"] and
             "empty" not in r["attrs"].get("class", "")]
    check(len(vrows) == len(verdicts), "verdict rows %r vs %r", vrows, verdicts)
    for res in ("pass", "fail", "undefined", "inconclusive", "unclosed"):
        n = len([v for v in verdicts if v["result"] == res])
        check(re.search(r'data-result="%s">%s: <b>%d</b>' % (res, res, n), text),
              "verdict count of %s (%d) in %s", res, n, text[:3000])
    mine = [f["id"] for f in fails if f["instance"] == inst["id"]][:200]
    check([int(r["attrs"]["data-id"]) for r in rows(page, "failures")] == mine,
          "the instance's failures")
    check([int(r["attrs"]["data-id"]) for r in rows(page, "reports")] ==
          [f["id"] for f in reps if f["instance"] == inst["id"]][:200], "its reports")
    check_links(base, path, page)
    for bad in ("/instances/999999", "/instances/0", "/instances/x", "/instances/1/"):
        check(get(base, bad)[0] == 404, "%s is 404", bad)


def check_failure(base, f):
    path = "/failures/%d" % f["id"]
    status, _, body = get(base, path)
    check(status == 200, "%s: %d %r", path, status, body[:300])
    text = body.decode()
    page = Links(text)
    metrics = [r["cells"] for r in page.tables.get("metrics", [])]
    check(len(metrics) == 2 and re.search(r"time = [\d.]+ (µs|ms|s)\b", metrics[0][0]) and
          re.search(r"time = \[\d+,", metrics[1][0]), "metrics in units, and raw: %r", metrics)
    witness = dict(re.findall(r"<tr><th>([^<]*)</th><td>([^<]*)</td></tr>", text))
    check(re.fullmatch(r"[\d.]+ (ns|µs|ms|s)", witness.get("Duration", "")) and
          witness.get("Type") and witness.get("Kind"), "the witness: %r", witness)
    check('<pre id="window">' in text, "a log window: %s", text[-2000:])
    marked = text.count('class="line failing"')
    check(marked >= 1, "the failing interval's lines are marked (%d)", marked)
    check_links(base, path, page)
    check(get(base, "/failures/999999")[0] == 404, "an unknown failure is 404")
    return text


def check_browser(env, base, inst, f):
    p = chromium(env, "--virtual-time-budget=5000", "--dump-dom", base + "/")
    page = Page(p.stdout)
    series = [c for c in page.canvases if "data-points" in c]
    check(len(series) == 2, "two series canvases: %r (chromium stderr: %s)", page.canvases,
          p.stderr[-2000:])
    check(int(series[0]["data-points"]) > 0 and series[0].get("data-drawn") == "1",
          "the failures chart has points: %r", series)
    for path, want in (("/instances/%d" % inst, 'id="verdicts"'),
                       ("/failures/%d" % f, 'id="window"')):
        p = chromium(env, "--virtual-time-budget=3000", "--dump-dom", base + path)
        check(want in p.stdout, "%s in chromium: %s", path, p.stdout[-2000:])
        if path.startswith("/instances/"):
            canv = [c for c in Page(p.stdout).canvases if "data-points" in c]
            check(canv and int(canv[0]["data-points"]) > 0, "instance chart: %r", canv)


def screenshots(env, base, inst, f, outdir):
    os.makedirs(outdir, exist_ok=True)
    for name, path in (("dashboard", "/"), ("instance", "/instances/%d" % inst),
                       ("failure", "/failures/%d" % f)):
        out = os.path.join(outdir, name + ".png")
        chromium(env, "--virtual-time-budget=5000", "--window-size=1280,1600",
                 "--screenshot=" + out, base + path)
        with open(out, "rb") as fh:
            check(fh.read(8) == b"\x89PNG\r\n\x1a\n", "%s is not a PNG", out)
        print("screenshot: %s" % out)


def main():
    with ct.Env("telemon_dashboard_pages") as env:
        reg = env.registry()
        rc = (tt.rc_class("lectern", spec=tt.LECTERN_SPEC, window="5 after 2") +
              tt.rc_class("fsread", spec=tt.FSREAD_SPEC, window="5 after 2"))
        tm = tt.Telemonitor(env, reg, rc, extra=["-http", "127.0.0.1:0", "-web", WEB])
        host, port = tm.http_addr()
        base = "http://%s:%d" % (host, port)
        log = env.path("lectern.log")
        shifted_lectern(log)
        s = env.snarflog("lectern", reg=reg, cmd=tt.writer_cmd("--file", log))
        check(s.wait(30) == 0, "snarflog: %s", s.stderr())
        fs = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd("--reads", 70, "--slow", "3,9"))
        check(fs.wait(30) == 0, "snarflog: %s", fs.stderr())
        tm.wait_failures(2, "--prog", "fsread")
        tm.instance(lambda i: i["prog"] == "fsread" and i["state"] in ("ended", "gone"), 20,
                    "fsread ended")
        tm.wait_failures(2, "--assert", "1-day stats")
        tm.wait_failures(2, "--assert", "1-sec max for display")
        inst = tm.instance(lambda i: i["prog"] == "lectern" and i["state"] in ("ended", "gone"),
                           20, "the instance ended")
        ct.wait_for(lambda: tm.http_json("/api/v1/durations/series?prog=fsread")["series"], 20,
                    "fsread's interval summaries")
        failures = tm.http_json("/api/v1/failures?limit=1000")
        ct.wait_for(lambda: all(tm.http("/api/v1/failures/%d/window" % f["id"])[0] == 200
                                for f in failures if f["window"]), 40, "the windows")
        ct.wait_for(lambda: tm.http_json("/api/v1/instances/%d/verdicts" % inst["id"]), 20,
                    "the verdicts")
        failures = tm.http_json("/api/v1/failures?limit=1000")
        inst = [i for i in tm.http_json("/api/v1/instances?all=1") if i["id"] == inst["id"]][0]

        fails, reps, durations = check_api(tm, failures)
        print("series: %d failures, %d reports, %d duration series" %
              (len(fails), len(reps), len(durations["series"])))
        check_ctl(tm, fails, reps)
        check_index(base, fails, reps)
        check_instance(base, tm, inst, fails, reps)
        failing = [f for f in fails if f["window"] and f["start_ts"] is not None and
                   f["prog"] == "fsread"][0]
        check_failure(base, failing)
        check_browser(env, base, inst["id"], failing["id"])
        check_series_floor(env, tm, fails)
        if os.environ.get("CMON_SCREENSHOTS"):
            screenshots(env, base, inst["id"], failing["id"], os.environ["CMON_SCREENSHOTS"])
        tm.stop()


if __name__ == "__main__":
    ct.run_test(main)
