"""The web dashboard at / (docs/http.md, Dashboard), in a real browser.

A telemonitor with -http on an ephemeral loopback port monitors the
Lectern example (tests/lang/lectern.log moved to wall-clock days, as in
test_telemon_stats.py): it fails "1-sec max for display" and reports
"1-day stats" once per day. Then

* without JavaScript (urllib): / is HTML with the instances table, a row
  per failure (id, assertion, links to its page and its instance's) and,
  apart, a row per report, text escaped; the
  static files have fixed content types; paths outside the fixed list
  (traversal included) are 404;
* headless Debian chromium: the DOM after the script has run has the same
  failure rows and the instances table, and a chart canvas per metric of
  the report assertion, painted (data-drawn="1", set by dashboard.js once
  Chart.js has drawn pixels); a screenshot is saved as
  $CMON_BUILD_DIR/tests/dashboard.png;
* -web DIR without index.html: / is a 404, the API answers.

Skipped (exit 77, chromium's stderr printed) only when chromium is missing
or cannot start."""
import html.parser
import os
import shutil
import subprocess
import urllib.error
import urllib.request

import cmontest as ct
import telemontest as tt
from cmontest import check

BASE_MS = 1709251200000          # 2024-03-01T00:00:00Z in ms
CHROMIUM = "/usr/bin/chromium"
WEB = os.path.join(ct.SOURCE, "daemons", "telemonitor", "web")


def shifted_lectern(path):
    """lectern.log on wall-clock days from 2024-03-01 (test_telemon_stats.py)."""
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


class Page(html.parser.HTMLParser):
    """The parts of a dashboard page the test looks at: tables by id with
    their rows (attributes, cell texts, links), and canvases."""

    def __init__(self, text):
        super().__init__()
        self.tables, self.canvases = {}, []
        self.table = self.row = self.cell = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.table = self.tables.setdefault(a.get("id"), [])
        elif tag == "tr" and self.table is not None:
            self.row = {"attrs": a, "cells": [], "links": []}
            self.table.append(self.row)
        elif tag == "td" and self.row is not None:
            self.cell = ""
        elif tag == "a" and self.row is not None:
            self.row["links"].append(a.get("href"))
        elif tag == "canvas":
            self.canvases.append(a)

    def handle_endtag(self, tag):
        if tag == "td" and self.row is not None and self.cell is not None:
            self.row["cells"].append(self.cell)
            self.cell = None
        elif tag == "tr":
            self.row = None
        elif tag == "table":
            self.table = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def check_tables(page, api_failures, api_instances, what):
    """The failures table shows what the API answers of failures (reports
    are in a table of their own), and the instances table the instances."""
    for table, want in (("failures", [f for f in api_failures if not f["report"]]),
                        ("reports", [f for f in api_failures if f["report"]])):
        rows = [r for r in page.tables.get(table, []) if "data-id" in r["attrs"]]
        ids = [int(r["attrs"]["data-id"]) for r in rows]
        check(ids == [f["id"] for f in want], "%s: %s rows %r, API %r", what, table, ids,
              [f["id"] for f in want])
        for r, f in zip(rows, want):
            check(r["attrs"]["id"] == "failure-%d" % f["id"], "%s: row id %r", what, r["attrs"])
            check(r["attrs"]["data-assert"] == f["assert"], "%s: assertion %r vs %r", what,
                  r["attrs"], f["assert"])
            check(f["assert"] in r["cells"], "%s: assertion cell %r", what, r["cells"])
            check(str(f["id"]) == r["cells"][0], "%s: id cell %r", what, r["cells"])
            want_links = ["/failures/%d" % f["id"], "/instances/%d" % f["instance"]]
            check(r["links"] == want_links, "%s: links %r", what, r["links"])
        check(any(r["cells"] and "=" in r["cells"][7] for r in rows),
              "%s: metrics shown: %r", what, rows[:2])
    inst = [r for r in page.tables.get("instances", []) if r["cells"]]
    check([int(r["cells"][0]) for r in inst] == sorted((i["id"] for i in api_instances),
                                                       reverse=True),
          "%s: instance rows %r, API %r", what, inst, api_instances)
    for r in inst:
        i = next(i for i in api_instances if i["id"] == int(r["cells"][0]))
        check(r["cells"][1] == i["prog"] and r["cells"][4] == i["state"] and
              r["cells"][6] == str(i["lost"]), "%s: instance row %r vs %r", what, r, i)


def get(base, path):
    """(status, content type, body) of GET base+path, errors included."""
    try:
        with urllib.request.urlopen(base + path, timeout=20) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def chromium(env, *args):
    """Run headless chromium; skip the test if it cannot start."""
    if not os.access(CHROMIUM, os.X_OK):
        ct.skip("%s not installed (scripts/deps.sh installs chromium)" % CHROMIUM)
    cmd = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
           "--disable-dev-shm-usage", "--no-first-run", "--disable-extensions",
           "--user-data-dir=" + env.path("chromium-profile")] + list(args)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired as e:
        ct.skip("chromium did not finish: %s" % (e.stderr or ""))
    if p.returncode != 0 and not p.stdout:
        print("chromium stderr:\n%s" % p.stderr)
        ct.skip("chromium cannot start (exit %d)" % p.returncode)
    return p


def main():
    with ct.Env("telemon_dashboard") as env:
        reg = env.registry()
        tm = tt.Telemonitor(env, reg, tt.rc_class("lectern", spec=tt.LECTERN_SPEC,
                                                  window="5 after 2"),
                            extra=["-http", "127.0.0.1:0", "-web", WEB])
        host, port = tm.http_addr()
        base = "http://%s:%d" % (host, port)
        log = env.path("lectern.log")
        shifted_lectern(log)
        s = env.snarflog("lectern", reg=reg, cmd=tt.writer_cmd("--file", log))
        check(s.wait(30) == 0, "snarflog: %s", s.stderr())
        tm.wait_failures(2, "--assert", "1-day stats")
        tm.wait_failures(2, "--assert", "1-sec max for display")
        tm.instance(lambda i: i["state"] in ("ended", "gone"), 20, "the instance ended")
        failures = tm.http_json("/api/v1/failures?limit=50")
        instances = tm.http_json("/api/v1/instances?all=1")
        check(any(f["report"] for f in failures), "a report assertion: %r", failures)
        # the windows are complete once stored (the log has ended)
        ct.wait_for(lambda: all(tm.http("/api/v1/failures/%d/window" % f["id"])[0] == 200
                                for f in failures if f["window"]), 40, "the windows")
        failures = tm.http_json("/api/v1/failures?limit=50")

        # without JavaScript: the server renders the tables
        status, ctype, body = get(base, "/")
        check(status == 200 and ctype.startswith("text/html"), "GET /: %d %r", status, ctype)
        text = body.decode()
        check('<script src="/static/chart.js">' in text and "<!--cmon:" not in text,
              "page: %s", text[:500])
        with urllib.request.urlopen(base + "/", timeout=20) as r:
            csp = r.headers.get("Content-Security-Policy", "")
        check("script-src 'self'" in csp and "frame-ancestors 'none'" in csp, "CSP: %r", csp)
        check_tables(Page(text), failures, instances, "GET /")
        for path, ctype_want in (("/static/dashboard.js", "text/javascript"),
                                 ("/static/dashboard.css", "text/css"),
                                 ("/static/chart.js", "text/javascript"),
                                 ("/index.html", "text/html")):
            status, ctype, body = get(base, path)
            check(status == 200 and ctype.startswith(ctype_want) and body,
                  "GET %s: %d %r", path, status, ctype)
        for path in ("/static/", "/static/index.html", "/static/../index.html",
                     "/static/%2e%2e/index.html", "/static/dashboard.js/", "/web/index.html",
                     "/..%2f..%2fetc/passwd", "/static/chart.min.js"):
            status, ctype, body = get(base, path)
            check(status == 404 and ctype.startswith("application/json"), "GET %s: %d %r",
                  path, status, body[:200])

        # in the browser: the DOM after the script, and a screenshot
        p = chromium(env, "--virtual-time-budget=5000", "--dump-dom", base + "/")
        page = Page(p.stdout)
        check_tables(page, failures, instances, "chromium DOM")
        report = [f["assert"] for f in failures if f["report"]][0]
        canvases = [c for c in page.canvases if c.get("data-assert") == report]
        check(canvases, "no chart canvases in the DOM (chromium stderr: %s)\n%s", p.stderr,
              p.stdout[-2000:])
        metrics = {c["data-metric"]: c for c in canvases}
        check({"applyOps", "pagesPerDoc"} <= set(metrics), "charts of: %r", sorted(metrics))
        undrawn = [c for c in canvases if c.get("data-drawn") != "1"]
        check(not undrawn, "canvases not drawn: %r", undrawn)
        check(metrics["applyOps"]["data-kind"] == "mapping" and
              metrics["pagesPerDoc"]["data-kind"] == "number", "kinds: %r", metrics)

        shot_dir = os.path.join(ct.BUILD, "tests")
        os.makedirs(shot_dir, exist_ok=True)
        shot = os.path.join(shot_dir, "dashboard.png")
        tmp = env.path("dashboard.png")
        chromium(env, "--virtual-time-budget=5000", "--window-size=1200,900",
                 "--screenshot=" + tmp, base + "/")
        with open(tmp, "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n", "screenshot is not a PNG")
        shutil.copyfile(tmp, shot)
        print("screenshot: %s" % shot)
        tm.stop()

        # -web DIR without index.html: no dashboard (404), the API still answers
        os.makedirs(env.path("empty-web"), exist_ok=True)
        tm2 = tt.Telemonitor(env, reg, tt.rc_class("other"), name="noweb",
                             extra=["-http", "127.0.0.1:0", "-web", env.path("empty-web")])
        host, port = tm2.http_addr()
        base2 = "http://%s:%d" % (host, port)
        status, ctype, body = get(base2, "/")
        check(status == 404 and b"-web" in body, "GET / without files: %d %r", status, body)
        check(get(base2, "/api/v1/status")[0] == 200, "the API without the dashboard")
        check("no dashboard" in tm2.stderr(), "warning: %s", tm2.stderr()[-2000:])
        tm2.stop()


if __name__ == "__main__":
    ct.run_test(main)
