#!/usr/bin/env python3
"""HTTP client for bench/http/run.sh (standard library only).

  client.py latency HOST:PORT PATH N     N sequential GETs on one keep-alive
                                         connection; prints p50 p99 max (ms)
  client.py hammer HOST:PORT PATH STOP   GET PATH in a loop, keep-alive, until
                                         the file STOP exists; prints requests
  client.py command N CMD...             run CMD N times, one after the other;
                                         prints p50 p99 max (ms) of each run
"""
import http.client
import os
import subprocess
import sys
import time


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def show(ts):
    print("%.3f %.3f %.3f" % (pct(ts, 50) * 1e3, pct(ts, 99) * 1e3, max(ts) * 1e3))


def get(conn, path):
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        sys.exit("client.py: %s: %d %s" % (path, r.status, body[:200]))
    return body


def main():
    mode = sys.argv[1]
    if mode == "command":
        n, cmd = int(sys.argv[2]), sys.argv[3:]
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
            ts.append(time.perf_counter() - t0)
        show(ts)
        return
    host, port = sys.argv[2].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    path = sys.argv[3]
    if mode == "latency":
        get(conn, path)                     # warm-up
        ts = []
        for _ in range(int(sys.argv[4])):
            t0 = time.perf_counter()
            get(conn, path)
            ts.append(time.perf_counter() - t0)
        show(ts)
    elif mode == "hammer":
        n = 0
        while not os.path.exists(sys.argv[4]):
            get(conn, path)
            n += 1
        print(n)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
