# SPDX-License-Identifier: MIT
"""promtest: the real readers of m0's metrics (SPEC O1). Debian's `prometheus` package gives a
Prometheus server — run here with a configuration of its own in a temporary directory, scraping
every second, its storage in that directory, its web API on a loopback port the kernel picks —
and `promtool check metrics`; Debian's python3-prometheus-client gives a strict OpenMetrics
parser, run with the system's Python (/usr/bin/python3), where that package lives. Standard
library only.

    with Prometheus({"m0": "127.0.0.1:PORT"}) as p:
        p.wait_up("m0")
        p.query("sum(m0_requests_total)")         # [(labels, float)], /api/v1/query
The Prometheus left running is stopped by m0test.reap_all() after each test."""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import m0test
from m0test import HarnessError

SYSTEM_PYTHON = "/usr/bin/python3"


def promtool_check(text):
    """`promtool check metrics` of the exposition `text`: (exit status, its output)."""
    p = subprocess.run([m0test.tool("promtool", "prometheus"), "check", "metrics"], input=text.encode(),
                       capture_output=True, timeout=30)
    return p.returncode, (p.stdout + p.stderr).decode(errors="replace")


_OM_PARSE = r"""
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = []
for f in text_string_to_metric_families(sys.stdin.read()):
    for s in f.samples:
        out.append([f.name, f.type, f.unit, s.name, s.labels, s.value])
print(json.dumps(out))
"""


def openmetrics_parse(text):
    """The samples of an OpenMetrics exposition as the strict parser reads them:
    [(family, type, unit, sample name, labels, value)]. AssertionError with the parser's reason
    when it refuses the text."""
    p = subprocess.run([SYSTEM_PYTHON, "-c", _OM_PARSE], input=text.encode(),
                       capture_output=True, timeout=30)
    if p.returncode != 0:
        raise AssertionError("the OpenMetrics parser refused the exposition: "
                             + p.stderr.decode(errors="replace").strip().splitlines()[-1])
    return [tuple(x[:4]) + (x[4], x[5]) for x in json.loads(p.stdout)]


class Prometheus(m0test.Reaped):
    """A Prometheus of the test's own scraping `targets` ({job: "host:port"}) every second."""

    def __init__(self, targets, interval="1s"):
        self.dir = tempfile.mkdtemp(prefix="m0prom-")
        self.proc = None
        self.port = None
        lines = [f"global: {{scrape_interval: {interval}, scrape_timeout: {interval}}}",
                 "scrape_configs:"]
        for job, addr in targets.items():
            lines += [f"  - job_name: {job}", f"    static_configs: [{{targets: ['{addr}']}}]"]
        self.config = os.path.join(self.dir, "prometheus.yml")
        with open(self.config, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.logpath = os.path.join(self.dir, "prometheus.log")
        self._reap_later()
        try:
            self._start()
        except BaseException:
            self.cleanup()
            raise

    def _start(self):
        self.proc = subprocess.Popen(
            [m0test.tool("prometheus", "prometheus"), f"--config.file={self.config}",
             f"--storage.tsdb.path={os.path.join(self.dir, 'data')}",
             "--web.listen-address=127.0.0.1:0", "--log.level=info"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(self.logpath, "ab"), cwd=self.dir)
        rx = re.compile(r'msg="Listening on" address=127\.0\.0\.1:(\d+)')
        deadline = time.monotonic() + 30
        while self.port is None:
            m = rx.search(self.log())
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None:
                raise HarnessError(f"prometheus exited ({self.proc.returncode}):\n{self.log()}")
            if time.monotonic() > deadline:
                raise HarnessError(f"prometheus did not listen within 30 s:\n{self.log()}")
            time.sleep(0.05)
        # It listens before it has opened its storage; until then its API answers 503.
        while not self._ready():
            if self.proc.poll() is not None:
                raise HarnessError(f"prometheus exited ({self.proc.returncode}):\n{self.log()}")
            if time.monotonic() > deadline:
                raise HarnessError(f"prometheus was not ready within 30 s:\n{self.log()}")
            time.sleep(0.05)

    def _ready(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=5) as r:
                return r.status == 200
        except (urllib.error.HTTPError, ConnectionError):
            return False

    def log(self):
        with open(self.logpath, errors="replace") as f:
            return f.read()

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.load(r)
        if doc.get("status") != "success":
            raise HarnessError(f"{path} {params}: {doc}")
        return doc["data"]

    def targets(self):
        return {t["labels"]["job"]: t for t in self.api("/api/v1/targets")["activeTargets"]}

    def wait_up(self, job, timeout=30):
        """Until Prometheus has scraped `job` successfully; returns the target."""
        deadline = time.monotonic() + timeout
        while True:
            t = self.targets().get(job)
            if t and t["health"] == "up":
                return t
            if time.monotonic() > deadline:
                raise HarnessError(f"target {job} not up within {timeout}s: {t}")
            time.sleep(0.2)

    def query(self, q):
        """An instant query: [(labels without __name__, value as float)]."""
        data = self.api("/api/v1/query", query=q)
        return [({k: v for k, v in r["metric"].items() if k != "__name__"}, float(r["value"][1]))
                for r in data["result"]]

    def wait_value(self, q, want, timeout=30):
        """Until the query's one value is `want` (each scrape may be the one that brings it)."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.query(q)
            if len(got) == 1 and got[0][1] == want:
                return got
            if time.monotonic() > deadline:
                raise HarnessError(f"{q} is {got}, not {want}, after {timeout}s")
            time.sleep(0.2)

    def cleanup(self):
        try:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(15)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            self._reap_done()
