"""telemonitor -http: the JSON API answers what telemonctl --json answers
(instances, classes, failures, status, stats: one formatter, so the same
keys and values), a read sees every failure reported before it (scraped
again and again while failures come), failures newest first with filters and paging, a
failure's log window as text/plain, JSON errors with 400/404/405, HEAD;
/healthz is 200 while the registry link is up and 503 "registry link
down" once the registry is killed; plain HTTP on a non-loopback address is
refused (command line and telemonrc); over TLS it serves HTTPS with client
certificates; an oversized header (400) or body (413) is refused; 256 slow clients
do not keep /healthz out (the idlest is closed) and one sending a byte
now and then is closed after 10 s; with -http-token-file every path
but /healthz wants the bearer token (401 otherwise); -http-tls-* gives
the API its own certificate, and beyond loopback without client
certificates a token is required."""
import http.client
import json
import socket
import ssl
import time
import urllib.parse

import cmontest as ct
import telemontest as tt
from cmontest import check

CONNS_MAX = 256                  # HTTP_CONNS_MAX in daemons/telemonitor/http.h
PER_CLIENT = 64                  # HTTP_CONNS_PER_CLIENT


def same(tm, path, *ctl, reverse=False):
    """GET path equals telemonctl CTL --json (reversed for failures, which
    the API lists newest first). Retried: counters may move in between."""
    def equal():
        api = tm.http_json(path)
        cli = tm.json(*ctl)
        if reverse:
            cli = list(reversed(cli))
        return [api] if api == cli else None
    try:
        return ct.wait_for(equal, 10, "GET %s == telemonctl %s" % (path, " ".join(ctl)))[0]
    except ct.TestFailure:
        raise ct.TestFailure("GET %s: %r\ntelemonctl %s --json: %r"
                             % (path, tm.http_json(path), " ".join(ctl), tm.json(*ctl)))


def error(tm, path, code, method="GET"):
    status, hd, body = tm.http(path, method=method)
    check(status == code, "%s %s: %d (wanted %d) %r", method, path, status, code, body)
    check(hd.get("content-type", "").startswith("application/json"), "error type: %r", hd)
    msg = json.loads(body)["error"]
    check(isinstance(msg, str) and msg, "error message: %r", body)
    return msg, hd


def stored_and_reported(metrics):
    """(failures and reports in the failure counts, cmon_failures_reported_total)
    of a /metrics exposition."""
    stored = reported = 0
    for line in metrics.decode().splitlines():
        if line.startswith(("cmon_failures_total{", "cmon_reports_total{")):
            stored += int(float(line.rsplit(" ", 1)[1]))
        elif line.startswith("cmon_failures_reported_total "):
            reported = int(float(line.rsplit(" ", 1)[1]))
    return stored, reported


def raw_request(host, port, data, timeout=3.0):
    """Send `data` on a new connection; return what comes back (b"" if the
    server closed without answering), or None if nothing came in time."""
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                return out or None
            except ConnectionResetError:
                return out
            if not chunk:
                return out
            out += chunk
            if b"\r\n\r\n" in out:
                return out
    finally:
        s.close()


def main():
    with ct.Env("telemon_http") as env:
        reg = env.registry()
        rc = (tt.rc_class("fsread", spec=tt.FSREAD_SPEC, window="10 after 3") +
              tt.rc_class("lectern", spec=tt.LECTERN_SPEC))
        tm = tt.Telemonitor(env, reg, rc, extra=["-http", "127.0.0.1:0"])
        host, port = tm.http_addr()
        check(host == "127.0.0.1" and port > 0, "bound address: %s:%d", host, port)

        # /healthz: the store is fine and the registry link comes up
        ct.wait_for(lambda: tm.http("/healthz")[0] == 200, 10, "healthz 200")
        status, hd, body = tm.http("/healthz")
        check(body == b"ok\n" and hd["content-type"].startswith("text/plain"), "ok: %r", body)

        # failures: slow reads 5, 20, 40 and 50
        t0 = time.time()
        s = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd("--reads", 60,
                                                                "--slow", "5,20,40,50"))
        check(s.wait(30) == 0, "snarflog: %s", s.stderr())
        lec = env.snarflog("lectern", reg=reg, cmd=tt.writer_cmd("--file", tt.LECTERN_LOG))
        check(lec.wait(30) == 0, "snarflog: %s", lec.stderr())
        fails = tm.wait_failures(4, "--prog", "fsread")
        inst = tm.instance(lambda i: i["prog"] == "fsread" and i["state"] == "ended",
                           what="fsread to end")
        tm.instance(lambda i: i["prog"] == "lectern" and i["state"] == "ended",
                    what="lectern to end")
        tm.wait_failures(2, "--assert", "1-day stats")

        # the same answers as telemonctl --json
        same(tm, "/api/v1/instances?all=1", "instances", "--all")
        same(tm, "/api/v1/instances", "instances")
        same(tm, "/api/v1/instances?all=true&limit=1", "instances", "--all", "--limit", "1")
        same(tm, "/api/v1/classes", "classes")
        st = same(tm, "/api/v1/status", "status")
        check(st["http"] == "%s:%d" % (host, port), "status names the server: %r", st)
        allf = same(tm, "/api/v1/failures", "failures", reverse=True)
        ids = [f["id"] for f in allf]
        check(ids == sorted(ids, reverse=True) and len(ids) >= 6, "newest first: %r", ids)
        same(tm, "/api/v1/stats?prog=lectern&assert=1-day%20stats",
             "stats", "--prog", "lectern", "--assert", "1-day stats")

        # filters, as telemonctl's
        fs = same(tm, "/api/v1/failures?prog=fsread", "failures", "--prog", "fsread",
                  reverse=True)
        check(len(fs) == 4 and all(f["prog"] == "fsread" for f in fs), "prog filter: %r", fs)
        same(tm, "/api/v1/failures?assert=read+at+most+10+ms", "failures", "--assert",
             "read at most 10 ms", reverse=True)
        same(tm, "/api/v1/failures?instance=%d" % inst["id"], "failures", "--instance",
             str(inst["id"]), reverse=True)
        check(tm.http_json("/api/v1/failures?prog=nosuch") == [], "no match")
        check(len(tm.http_json("/api/v1/failures?prog=fsread&since=%d" % int(t0 - 60))) == 4,
              "since (Unix seconds)")
        check(tm.http_json("/api/v1/failures?since=%d" % int(time.time() + 3600)) == [],
              "since in the future")
        check(len(tm.http_json("/api/v1/failures?prog=fsread&since=%s"
                               % time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                               time.gmtime(t0 - 60)))) == 4, "since (ISO)")
        # since is at or after, to the microsecond (it was rounded to the ms)
        newest = fs[0]
        t = newest["time_unix"]
        # (time_unix is printed to the us: the stored time lies within half a us)
        for when, has in (("%.6f" % (t - 1e-6), True), ("%.6f" % (t + 0.0004), False)):
            got = [f["id"] for f in tm.json("failures", "--prog", "fsread", "--since", when)]
            api = [f["id"] for f in tm.http_json("/api/v1/failures?prog=fsread&since=" + when)]
            check((newest["id"] in got) == has and (newest["id"] in api) == has,
                  "since %s (failure %d at %.6f): telemonctl %r, API %r", when, newest["id"], t,
                  got, api)
        # every form of time either takes, the other takes, with the same meaning
        ago = "%d min" % (int(time.time() - t0) // 60 + 2)
        for when in ("%d" % int(t0 - 60), "@%d" % int(t0 - 60), ago, ago + " ago",
                     time.strftime("%Y-%m-%d %H:%M", time.gmtime(t0 - 120))):
            same(tm, "/api/v1/failures?prog=fsread&since=" + urllib.parse.quote(when),
                 "failures", "--prog", "fsread", "--since", when, reverse=True)
            check(len(tm.http_json("/api/v1/failures?prog=fsread&since=" +
                                   urllib.parse.quote(when))) == 4, "since=%s", when)
        # paging: limit, then before= the last id of the page
        page1 = tm.http_json("/api/v1/failures?prog=fsread&limit=3")
        check([f["id"] for f in page1] == [f["id"] for f in fs[:3]], "page 1: %r", page1)
        page2 = tm.http_json("/api/v1/failures?prog=fsread&limit=3&before=%d" % page1[-1]["id"])
        check([f["id"] for f in page2] == [fs[3]["id"]], "page 2: %r", page2)
        same(tm, "/api/v1/failures?prog=fsread&limit=2&before=%d" % page1[1]["id"],
             "failures", "--prog", "fsread", "--limit", "2", "--before", str(page1[1]["id"]),
             reverse=True)
        check(tm.http_json("/api/v1/failures?prog=fsread&before=%d" % fs[-1]["id"]) == [],
              "nothing before the first")

        # a failure's log window: text/plain, as telemonctl window prints it
        f = fs[-1]
        ct.wait_for(lambda: tm.http("/api/v1/failures/%d/window" % f["id"])[0] == 200, 10,
                    "the window")
        status, hd, body = tm.http("/api/v1/failures/%d/window" % f["id"])
        check(hd["content-type"].startswith("text/plain"), "window type: %r", hd)
        text = body.decode()
        check(text.startswith("#cmon-ascii 1\n") and text == tm.ctl("window", str(f["id"])),
              "window text: %r", text[:300])
        check("%d 1 EndRead 1\n" % f["end_ts"] in text, "the failing read: %r", text)

        # errors
        error(tm, "/nosuch", 404)
        error(tm, "/api/v1/nosuch", 404)
        error(tm, "/api/v1/failures/999999/window", 404)
        error(tm, "/api/v1/failures/abc/window", 404)
        msg, _ = error(tm, "/api/v1/failures?limit=0", 400)
        check(msg.startswith("limit: "), "names the parameter: %r", msg)
        error(tm, "/api/v1/failures?limit=100001", 400)
        error(tm, "/api/v1/failures?before=0", 400)
        error(tm, "/api/v1/failures?limit=many", 400)
        error(tm, "/api/v1/failures?since=yesterday", 400)
        error(tm, "/api/v1/failures?instance=-1", 400)
        msg, _ = error(tm, "/api/v1/failures?colour=red", 400)
        check("colour" in msg, "names the parameter: %r", msg)
        error(tm, "/api/v1/stats?prog=lectern", 400)
        for m in ("POST", "PUT", "DELETE"):
            _, hd = error(tm, "/api/v1/failures", 405, method=m)
            check(hd.get("allow") == "GET, HEAD", "Allow: %r", hd)
        status, hd, body = tm.http("/api/v1/classes", method="HEAD")
        check(status == 200 and body == b"", "HEAD: %d %r", status, body)

        # /metrics, briefly (test_telemon_prometheus.py scrapes it for real)
        status, hd, body = tm.http("/metrics")
        check(status == 200 and hd["content-type"].startswith("text/plain; version=0.0.4"),
              "metrics: %d %r", status, hd)
        want = ('cmon_records_total{prog="fsread",machine="%s",pid="%d",instance_id="%d",'
                'class="%d"} 180' % (inst["machine"], inst["pid"], inst["id"], inst["class"]))
        check(want in body.decode(), "records of the instance: %s", body.decode()[:3000])

        # read-your-writes while failures arrive: a failure counted as
        # reported is in the failure counts of the same scrape (the rows
        # waiting for the store's commit are made before any read), at
        # every scrape of a stream failing every 10 reads
        base = stored_and_reported(tm.http("/metrics")[2])
        slow = ",".join(str(k) for k in range(5, 3000, 10))
        s = env.snarflog("fsread", reg=reg, cmd=tt.writer_cmd(
            "--reads", 3000, "--slow", slow, "--batch", 10, "--pace", 0.005))
        scrapes = moving = 0
        while s.alive():
            stored, reported = stored_and_reported(tm.http("/metrics")[2])
            check(stored - base[0] == reported - base[1],
                  "scrape %d: %d failures reported, %d in the counts", scrapes,
                  reported - base[1], stored - base[0])
            scrapes += 1
            moving += 0 < reported - base[1] < 300
        check(s.wait(30) == 0, "snarflog: %s", s.stderr())
        ct.wait_for(lambda: stored_and_reported(tm.http("/metrics")[2]) ==
                    (base[0] + 300, base[1] + 300), 20, "all 300 failures, stored")
        check(moving >= 10, "only %d of %d scrapes while failures came", moving, scrapes)
        print("read-your-writes: %d scrapes, %d while the failures came" % (scrapes, moving))

        # an oversized header is refused
        big = (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
        out = raw_request(host, port, big)
        check(out is not None and out.startswith(b"HTTP/1.1 400") and b"close" in out,
              "oversized header: %r", out[:200] if out else out)
        body = (b"GET /api/v1/classes HTTP/1.1\r\nHost: x\r\nContent-Length: 10000\r\n\r\n" +
                b"x" * 10000)
        out = raw_request(host, port, body)
        check(out is not None and out.startswith(b"HTTP/1.1 413"), "oversized body: %r",
              out[:200] if out else out)
        check(tm.http("/healthz")[0] == 200, "the server goes on")

        # slow clients cannot hold the server: CONNS_MAX connections sending
        # half a request each, and /healthz still gets in (the idlest closed)
        # (from CONNS_MAX / PER_CLIENT loopback source addresses: one
        # address may hold PER_CLIENT of them)
        conns = []
        for i in range(CONNS_MAX):
            c = socket.create_connection((host, port), timeout=10,
                                         source_address=("127.0.0.%d" % (2 + i // PER_CLIENT), 0))
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost")
            conns.append(c)
        ct.wait_for(lambda: b"cmon_http_connections %d\n" % (CONNS_MAX,)
                    in tm.http("/metrics")[2], 20, "all connections counted")
        for i in range(20):
            out = raw_request(host, port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
                              b"Connection: close\r\n\r\n", timeout=5)
            check(out is not None and out.startswith(b"HTTP/1.1 200"),
                  "healthz %d with every slot taken by slow clients: %r", i, out)
        closed = 0
        for c in conns:
            c.settimeout(0.0)
            try:
                if c.recv(4096) == b"":
                    closed += 1
            except (BlockingIOError, ConnectionError):
                pass
        check(closed >= 1, "the idlest slow clients were closed: %d", closed)
        # a client sending a byte now and then is closed once HTTP_REQUEST_S
        # (10 s) pass without a whole request
        for c in conns:
            c.close()
        drip = socket.create_connection((host, port), timeout=10)
        t0 = time.monotonic()
        gone = False
        for ch in b"GET /healthz HTTP/1.1\r\nHost: x" * 4:
            try:
                drip.sendall(bytes([ch]))
                drip.settimeout(1.0)
                if drip.recv(4096) == b"":
                    gone = True
                    break
            except socket.timeout:
                continue
            except (ConnectionError, OSError):
                gone = True
                break
        check(gone and time.monotonic() - t0 < 25, "the dripping client was closed after "
              "%.1f s", time.monotonic() - t0)
        drip.close()
        # one client address holds at most PER_CLIENT: its own idlest go
        mine = [socket.create_connection((host, port), timeout=10,
                                         source_address=("127.0.0.9", 0))
                for _ in range(PER_CLIENT + 10)]
        for c in mine:
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost")
        closed = 0
        deadline = time.monotonic() + 5
        for c in mine[:10]:
            c.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                if c.recv(4096) == b"":
                    closed += 1
            except socket.timeout:
                pass
            except ConnectionError:
                closed += 1
        check(closed == 10, "the oldest 10 of %d connections from one address closed: %d",
              PER_CLIENT + 10, closed)
        check(tm.http("/healthz")[0] == 200, "other clients get in")
        for c in mine:
            c.close()
        metrics = tm.http("/metrics")[2]
        check(b"cmon_http_connections_closed_total " in metrics and
              b"cmon_http_connections_closed_total 0\n" not in metrics,
              "closed connections counted: %r", metrics[-600:])
        ct.wait_for(lambda: b"cmon_http_connections 1\n" in tm.http("/metrics")[2], 10,
                    "the connections counted out")

        # /healthz: 503 with the reason once the registry is gone
        reg.kill()
        ct.wait_for(lambda: tm.http("/healthz")[0] == 503, 10, "healthz 503")
        status, hd, body = tm.http("/healthz")
        check(body.startswith(b"registry link down"), "reason: %r", body)
        tm.stop()

        # plain HTTP beyond loopback is refused, from the command line and telemonrc
        for i, (extra_args, rc_text) in enumerate(
                ((["-http", "0.0.0.0:0"], ""),
                 ([], '(defaults (http "0.0.0.0:0"))\n'))):
            bad = tt.Telemonitor(env, None, rc_text, name="open%d" % i, extra=extra_args,
                                 wait=False)
            code = bad.proc.wait(20)
            check(code == 2 and "not a loopback address" in bad.stderr(),
                  "refused: %d %s", code, bad.stderr())
        bad = tt.Telemonitor(env, None, '(defaults (http "no such:place"))\n', name="badrc",
                             wait=False)
        check(bad.proc.wait(20) == 2 and "http" in bad.stderr(), "bad address: %s",
              bad.stderr())

        # with TLS: HTTPS on any address, client certificates required
        certs = ct.make_certs(env.dir)
        node = dict(certs["node"], ca=certs["ca"])
        treg = env.registry(tls=node)
        ttm = tt.Telemonitor(env, treg, "", name="tls",
                             extra=["-http", "0.0.0.0:0"] + ct.tls_args(node))
        _, tport = ttm.http_addr()
        ctx = ssl.create_default_context(cafile=certs["ca"])
        ctx.load_cert_chain(certs["node"]["cert"], certs["node"]["key"])
        conn = http.client.HTTPSConnection("127.0.0.1", tport, timeout=10, context=ctx)
        conn.request("GET", "/api/v1/classes")
        r = conn.getresponse()
        check(r.status == 200 and r.read() == b"[]\n", "HTTPS with a client certificate")
        conn.close()
        anon = ssl.create_default_context(cafile=certs["ca"])
        try:
            conn = http.client.HTTPSConnection("127.0.0.1", tport, timeout=10,
                                               context=anon)
            conn.request("GET", "/api/v1/classes")
            r = conn.getresponse()
            refused = False
        except (ssl.SSLError, ConnectionError, OSError):
            refused = True
        check(refused, "HTTPS without a client certificate is refused")
        ct.wait_for(lambda: "http: TLS handshake with 127.0.0.1:" in ttm.stderr(), 10,
                    "the failed handshake logged with its reason")
        ttm.stop()

        # -http-token-file: every path but /healthz wants the bearer token
        token = "0123456789abcdef0123456789abcdef"
        tokfile = env.path("token")
        with open(tokfile, "w") as f:
            f.write(token + "\n")
        ktm = tt.Telemonitor(env, None, "", name="token",
                             extra=["-http", "127.0.0.1:0", "-http-token-file", tokfile])
        check(ktm.http("/healthz")[0] in (200, 503), "healthz without a token")
        for path in ("/api/v1/classes", "/metrics", "/", "/api/v1/status"):
            status, hd, body = ktm.http(path)
            check(status == 401 and hd.get("www-authenticate", "").startswith("Bearer"),
                  "%s without a token: %d %r", path, status, hd)
            check("error" in json.loads(body), "a JSON error: %r", body)
            status, hd, body = ktm.http(path, headers={"Authorization": "Bearer " + token[:-1] + "0"})
            check(status == 401, "%s with a wrong token: %d", path, status)
            status, hd, body = ktm.http(path, headers={"Authorization": "Bearer " + token[:-1]})
            check(status == 401, "%s with a prefix of the token: %d", path, status)
        status, hd, body = ktm.http("/api/v1/classes",
                                    headers={"Authorization": "Bearer " + token})
        check(status == 200 and body == b"[]\n", "with the token: %d %r", status, body)
        # the dashboard's login: /?token= sets an HttpOnly cookie, then /
        status, hd, body = ktm.http("/?token=" + token)
        cookie = hd.get("set-cookie", "")
        check(status == 303 and hd.get("location") == "/" and
              cookie.startswith("cmon_token=" + token) and "HttpOnly" in cookie,
              "login: %d %r", status, hd)
        status, hd, body = ktm.http("/api/v1/classes", headers={"Cookie": cookie.split(";")[0]})
        check(status == 200, "with the cookie: %d", status)
        check(ktm.http("/?token=" + token[:-1] + "0")[0] == 401, "login with a wrong token")
        check(ktm.http("/api/v1/classes", headers={"Cookie": "cmon_token=x" + token})[0] == 401,
              "a wrong cookie")
        ktm.stop()
        with open(env.path("short"), "w") as f:
            f.write("abc\n")
        with open(env.path("semi"), "w") as f:
            f.write("0123456789abcdef;0123456789\n")
        for i, (extra_args, rc_text, want) in enumerate((
                (["-http-token-file", env.path("short")], "", "too short"),
                (["-http-token-file", env.path("nonesuch")], "", "cannot read"),
                (["-http-token-file", env.path("semi")], "", "position 17"),
                ([], '(defaults (http-token-file "%s"))\n' % env.path("short"), "too short"))):
            bad = tt.Telemonitor(env, None, rc_text, name="badtok%d" % i,
                                 extra=["-http", "127.0.0.1:0"] + extra_args, wait=False)
            code = bad.proc.wait(20)
            check(code == 2 and want in bad.stderr(), "bad token file refused: %d %s", code,
                  bad.stderr())

        # -http-tls-*: the API's own certificate, the registry link plain; beyond
        # loopback without client certificates, only with a token
        own = ["-http-tls-cert", certs["other"]["cert"], "-http-tls-key", certs["other"]["key"]]
        bad = tt.Telemonitor(env, None, "", name="opentls", extra=["-http", "0.0.0.0:0"] + own,
                             wait=False)
        code = bad.proc.wait(20)
        check(code == 2 and "to anyone" in bad.stderr(), "HTTPS for anyone refused: %d %s",
              code, bad.stderr())
        for args in (["-http-tls-cert", certs["other"]["cert"]],
                     ["-http-tls-ca", certs["ca"]]):
            bad = tt.Telemonitor(env, None, "", name="halftls", extra=args, wait=False)
            check(bad.proc.wait(20) == 2, "half of -http-tls-* refused: %s", bad.stderr())
        preg = env.registry()
        otm = tt.Telemonitor(env, preg, "", name="owntls",
                             extra=["-http", "0.0.0.0:0", "-http-token-file", tokfile] + own)
        ctx = ssl.create_default_context(cafile=certs["ca"])
        _, oport = otm.http_addr()

        def https(path, headers=None):
            conn = http.client.HTTPSConnection("127.0.0.1", oport, timeout=10, context=ctx)
            try:
                conn.request("GET", path, headers=headers or {})
                r = conn.getresponse()
                return r.status, r.read()
            finally:
                conn.close()
        status, body = https("/api/v1/classes", {"Authorization": "Bearer " + token})
        check(status == 200, "HTTPS with its own certificate and a token: %d", status)
        status, body = https("/api/v1/classes")
        check(status == 401, "HTTPS without the token: %d", status)
        ct.wait_for(lambda: https("/healthz")[0] == 200, 10, "the registry link (plain) up")
        otm.stop()


ct.run_test(main)
