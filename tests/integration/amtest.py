"""The real Alertmanager (Debian package prometheus-alertmanager) for the
integration tests: started on 127.0.0.1 with a temporary configuration and
storage, clustering off; skips the test (exit 77) saying why when it is not
installed or does not start."""
import json
import os
import time
import urllib.request

import cmontest as ct

AM = "/usr/bin/prometheus-alertmanager"
AMTOOL = "/usr/bin/amtool"
CONFIG = """route:
  receiver: "null"
  group_wait: 1s
receivers:
  - name: "null"
"""


def require():
    """Skip the test unless Alertmanager is installed."""
    if not os.access(AM, os.X_OK):
        ct.skip("%s is not installed (Debian package prometheus-alertmanager; "
                "scripts/deps.sh installs it)" % AM)


class Alertmanager:
    def __init__(self, env, port):
        self.env, self.port = env, port
        self.url = "http://127.0.0.1:%d" % port
        self.conf = env.path("am.yml")
        with open(self.conf, "w") as f:
            f.write(CONFIG)
        self.data = env.path("am.data")
        self.proc = None

    def start(self):
        self.proc = self.env.spawn("alertmanager", [
            AM, "--config.file=" + self.conf, "--storage.path=" + self.data,
            "--web.listen-address=127.0.0.1:%d" % self.port, "--cluster.listen-address="])
        deadline = time.time() + 20
        while time.time() < deadline:
            if not self.proc.alive():
                ct.skip("prometheus-alertmanager exited at start: %s" % self.proc.stderr()[-800:])
            try:
                self.get("/api/v2/status")
                return
            except OSError:
                time.sleep(0.2)
        ct.skip("prometheus-alertmanager did not answer within 20 s: %s"
                % self.proc.stderr()[-800:])

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=5) as r:
            return json.loads(r.read())

    def post(self, path, obj):
        req = urllib.request.Request(self.url + path, data=json.dumps(obj).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def alerts(self, **labels):
        return [a for a in self.get("/api/v2/alerts")
                if all(a["labels"].get(k) == v for k, v in labels.items())]

    def silences(self, state="active"):
        return [s for s in self.get("/api/v2/silences") if s["status"]["state"] == state]
