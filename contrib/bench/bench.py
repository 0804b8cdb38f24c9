#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""contrib/bench/bench.py: the measuring half of contrib/bench/run (SPEC M1, M2, M3, M7, the M8 part,
M11, M12, cold start, parallel compute).

contrib/bench/run installs the peers, builds m0 and the helpers, then runs this. It can be run
alone on an existing build: bench.py --build BUILD_DIR --helpers DIR [options]. Standard library
only. Every server it starts is in a process group of its own and is stopped on every way out.
"""
import argparse
import atexit
import collections
import datetime
import gzip
import http.client
import json
import math
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BODY = '{"now":1700000000.000}'  # the size of ramp's /x/now body: {"now":<10 digits>.<3>}
PEERS = ("nginx", "h2o", "floor")
ARMS = ("ramp",) + PEERS
# The placement part adds ramp with accept sharing off (SPEC L4's bare race, as nginx and h2o
# place): the same code, placed by the race, is the control for what placement alone does.
# Such an arm is a server of ARMS run with more environment: arm -> (server, environment).
PLACEMENT_VARIANTS = {"ramp-race": ("ramp", {"M0_ACCEPT_SHARE": "0"})}
PLACEMENT_ARMS = ARMS + tuple(PLACEMENT_VARIANTS)
# With --m7-base, M1 runs the base build's ramp beside this one, every cell of ramp's (issue
# 20: "no cell of the M1 table gets worse by more than its round-to-round spread").
M1_BASE = "ramp-base"
M1_ORDER = ARMS + (M1_BASE,)
ENDPOINTS = {"now": "/x/now", "search": "/x/search?sel=25"}
# host_parallel's topologies (issue 8): (name, loops, pool threads per loop)
PAR_TOPOLOGIES = (("1 loop", 1, 0), ("2 loops", 2, 0), ("2 loops + pool", 2, 2))
# M11 (SPEC WS7): the arms, what each follows the channel by (wsload's protocol, the path),
# the echo's message size, the bound on one fan-out, and the targets: m0's WebSocket CPU per
# delivered message ÷ the reference's, at most the bound. floor-ws is contrib/bench/wsfloor.c,
# one write() of a frame built once per socket: what any server spends at the least.
M11_ARMS = ("m0-ws", "m0-sse", "node-ws", "floor-ws")
M11_FLOOR = "floor-ws"
M11_FOLLOW = {"m0-ws": ("ws", "/follow?channel=hot"), "m0-sse": ("sse", "/events?channel=hot"),
              "node-ws": ("ws", "/follow?channel=hot"), "floor-ws": ("ws", "/follow?channel=hot")}
M11_ECHO_SIZE = 32
M11_FANOUT_TIMEOUT_S = 120
M11_TARGETS = (("m0-ws", "m0-sse", 1.2, "≤ 1.2× an event stream's (WS7)"),
               ("m0-ws", "node-ws", 1 / 3, "≤ ⅓ of Node `ws`'s (WS7)"))
# M12 (SPEC SF5): the servers, the cells (what each asks) and the target on files: m0's CPU per
# request ≤ 0.95× each peer's; the compressed JSON is side by side, without a target.
M12_ARMS = ("m0", "nginx", "h2o", "floor")
# The floor's cells (contrib/bench/floor.c, one canned answer per read()), each its own floor
# process: the 1 KiB file's bytes behind a head of h2o 2.2's size for it (251 bytes, D251), and
# a 304 with a head of h2o's 304's size (131 bytes). What it answers, once started, is checked
# as the others' are.
M12_FLOOR_CELLS = {"1k": (("--head-bytes", "251"), "1k.bin"),
                   "304": (("--status", "304", "--head-bytes", "131"), None)}
M12_CELLS = ("1k", "1m", "304", "json")
M12_CELL_NAMES = {"1k": "1 KiB file", "1m": "1 MiB file", "304": "304 (If-None-Match)",
                  "json": "JSON, gzip"}
M12_TARGET = 0.95
# The ratios taken within each round, (arm, peer): SF5's, then each server above the floor.
M12_RATIOS = (("m0", "nginx"), ("m0", "h2o"), ("m0", "floor"), ("nginx", "floor"),
              ("h2o", "floor"))
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024

RUNNING = []  # Popen objects started in a process group of their own
LIB_ENV = {}  # LD_LIBRARY_PATH for the uninstalled libm0, set in main()


def log(*a):
    print("bench:", *a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- processes


def stop(p, timeout=10.0):
    """SIGTERM the group p leads, wait, then SIGKILL it. Idempotent."""
    if p in RUNNING:
        RUNNING.remove(p)
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"pid {p.pid} did not stop in {timeout:.0f} s after SIGTERM: SIGKILL")
    try:  # what is left of the group (nginx workers, h2o's helper), and a stuck leader
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        pass
    return p.returncode


def app_binary(build, name):
    """The app `name` of the build directory `build`: the program itself under apps/.libs, not
    libtool's wrapper script, when there is one."""
    real = os.path.join(build, "apps", ".libs", name)
    return real if os.access(real, os.X_OK) else os.path.join(build, "apps", name)


def build_env(build):
    """LD_LIBRARY_PATH for the uninstalled libm0 of the build directory `build`."""
    libs = os.path.join(build, ".libs")
    return {"LD_LIBRARY_PATH": libs} if os.path.isdir(libs) else {}


def stop_all():
    for p in list(RUNNING):
        stop(p, timeout=5)


def spawn(argv, logpath, env=None, cpus=None, stdout=None):
    if cpus is not None:
        argv = ["taskset", "-c", str(cpus)] + list(argv)
    lf = open(logpath, "ab")
    e = dict(os.environ)
    e.pop("NOTIFY_SOCKET", None)
    e.pop("LISTEN_FDS", None)
    e.pop("LISTEN_PID", None)
    e.update(LIB_ENV)
    e.update(env or {})
    p = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=stdout if stdout is not None else lf,
        stderr=lf,
        env=e,
        start_new_session=True,
    )
    lf.close()
    RUNNING.append(p)
    return p


def stat_fields(pid):
    """The fields of /proc/<pid>/stat after the comm (state ppid ... utime(12) stime(13)
    cutime(14) cstime(15) ... rss(22), counted from 1 as proc(5) counts them less 2), or None
    for a process gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    return s[s.rindex(")") + 2 :].split()


def proc_table():
    """pid -> (ppid, utime+stime+cutime+cstime ticks, rss pages) for every process."""
    t = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        f = stat_fields(d)
        if f is not None:
            t[int(d)] = (int(f[1]), int(f[11]) + int(f[12]) + int(f[13]) + int(f[14]), int(f[21]))
    return t


def tree(root, table=None):
    table = table or proc_table()
    kids = {}
    for pid, (ppid, _, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in table:
            out.append(pid)
            todo.extend(kids.get(pid, []))
    return out, table


def cpu_seconds(root):
    pids, t = tree(root)
    return sum(t[p][1] for p in pids) / CLK_TCK


def user_system_s(root):
    """(user, system) CPU seconds of root's process tree, from /proc/<pid>/stat in clock
    ticks: utime+cutime and stime+cstime."""
    user = system = 0
    for pid in tree(root)[0]:
        f = stat_fields(pid)
        if f is None:
            continue
        user += int(f[11]) + int(f[13])
        system += int(f[12]) + int(f[14])
    return user / CLK_TCK, system / CLK_TCK


def machine_busy_s():
    """CPU seconds every CPU spent busy since boot (all of /proc/stat's cpu line but idle)."""
    with open("/proc/stat") as f:
        x = [int(v) for v in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest and guest_nice are in user)
    return (sum(x[:8]) - x[3] - x[4]) / CLK_TCK


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def thread_cpu(pid):
    """CPU seconds of the live threads of one process, summed by thread name."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                s = f.read()
        except OSError:
            continue
        name = s[s.index("(") + 1 : s.rindex(")")]
        f = s[s.rindex(")") + 2 :].split()
        out[name] = out.get(name, 0) + (int(f[11]) + int(f[12])) / CLK_TCK
    return out


def compute_threads(pid):
    """How many of the process's threads are named m0-compute."""
    n = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                n += f.read().strip() == "m0-compute"
        except OSError:
            pass
    return n


def vmrss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_by_pid(root):
    pids, _ = tree(root)
    return {p: vmrss_kib(p) for p in pids}


def rss_growth(before, after):
    """KiB the processes of `before` grew by in `after`; a process that started in between (h2o
    starts its crash-handler helper lazily) is left out rather than counted as growth."""
    return sum(after[p] - before[p] for p in before if p in after)


def rss(root):
    """(KiB of the whole tree, KiB of the root process, processes in the tree)."""
    pids, _ = tree(root)
    return sum(vmrss_kib(p) for p in pids), vmrss_kib(root), len(pids)


# ---------------------------------------------------------------- HTTP


def http_get(port, path, timeout=2.0):
    """One GET on a new connection: (status, body bytes, seconds to the first byte)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        t0 = time.perf_counter()
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        data = b""
        first = None
        while True:
            b = s.recv(65536)
            if first is None:
                first = time.perf_counter() - t0
            if not b:
                break
            data += b
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep:
                m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                if m and len(body) >= int(m.group(1)) or head.startswith(b"HTTP/1.1 304 "):
                    break
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.") else 0
    return status, body, first


def wait_ready(p, port, path, timeout=20.0, status=200):
    """Poll until the server answers `status` (200) on path (never a blind sleep)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise RuntimeError(f"exited with {p.returncode} before answering (see its log)")
        try:
            st, body, _ = http_get(port, path, timeout=1.0)
            if st == status:
                return body
            last = f"status {st}"
        except OSError as e:
            last = str(e)
        time.sleep(0.02)
    raise RuntimeError(f"no 200 on :{port}{path} within {timeout:.0f} s ({last})")


def port_listening(port):
    want = f":{port:04X}"
    for fn in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(fn) as f:
                next(f)
                for line in f:
                    x = line.split()
                    if x[1].endswith(want) and x[3] == "0A":
                        return True
        except OSError:
            pass
    return False


def http_fetch(port, path, headers=None, timeout=10.0):
    """One GET through http.client (which undoes chunking): (status, headers with lower-case
    names, body)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body
    finally:
        c.close()


def settle(pid, quiet_s=0.3, timeout=60.0):
    """Wait until the process tree has used under 0.2 ms of CPU in each 50 ms for quiet_s: the
    work of what came before (M11's handshakes) is done. False when it never got quiet."""
    deadline = time.monotonic() + timeout
    last, still = run_time_s(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = run_time_s(pid)
        if now - last > 0.0002:
            still = time.monotonic()
        last = now
        if time.monotonic() - still >= quiet_s:
            return True
    return False


def bench_json():
    """M12's JSON: 200 todos as todo's list has them, about 10 KiB."""
    return json.dumps([dict(id=i, title=f"todo number {i}", done=i % 3 == 0)
                       for i in range(1, 201)], separators=(",", ":")) + "\n"


# ---------------------------------------------------------------- wrk

WRK_LUA = r"""
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,' ..
    '"status":%d,"timeout":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"p999_us":%d,' ..
    '"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), latency.max, latency.mean))
end
"""

# host_parallel: every answer says how long its handler took ("par=12345us sum=..."); each
# wrk thread keeps those times and done() prints their median and 99th percentile.
PAR_LUA = r"""
local threads = {}
function setup(thread) table.insert(threads, thread) end
handler_us = {}
function response(status, headers, body)
  local v = body and body:match("=(%d+)us")
  if v then handler_us[#handler_us + 1] = tonumber(v) end
end
""" + WRK_LUA.rstrip()[: -len("end")] + r"""
  local all = {}
  for _, t in ipairs(threads) do
    for _, v in ipairs(t:get("handler_us") or {}) do all[#all + 1] = v end
  end
  table.sort(all)
  local function pct(p)
    if #all == 0 then return -1 end
    return all[math.max(1, math.ceil(#all * p / 100))]
  end
  io.write(string.format('WRKUS {"n":%d,"p50_us":%d,"p99_us":%d}\n', #all, pct(50), pct(99)))
end
"""


def wrk_summary(returncode, stdout, stderr):
    """The figures WRK_LUA printed (WRKJSON; WRKUS as "handler" when there), or RuntimeError."""
    if returncode != 0:
        raise RuntimeError(f"wrk failed ({returncode}): {stderr.strip()}")
    m = re.search(r"^WRKJSON (.*)$", stdout, re.M)
    if not m:
        raise RuntimeError("wrk printed no summary: " + stdout[-500:])
    w = json.loads(m.group(1))
    m = re.search(r"^WRKUS (.*)$", stdout, re.M)
    if m:
        w["handler"] = json.loads(m.group(1))
    return w


def h2load_summary(returncode, stdout, stderr, log, duration_s):
    """The figures of one h2load run of `duration_s` seconds (its -D, which is what h2load
    counts requests over; its "finished in" adds the start and the stop) in wrk_summary's form:
    the requests done from its summary; the percentiles and the mean from its log of every
    request (start µs, status, µs to the end of the answer), those that got an answer; as errors
    its failed requests, which h2load counts as the errored (timed out among them) and the
    answers of 4xx and 5xx; RuntimeError when it did not run."""
    if returncode != 0:
        raise RuntimeError(f"h2load failed ({returncode}): {(stderr or stdout).strip()[-500:]}")
    q = re.search(r"^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed, (\d+) errored, (\d+) timeout", stdout, re.M)
    if not q:
        raise RuntimeError("h2load printed no summary: " + stdout[-500:])
    failed, errored, timeout = (int(q.group(i)) for i in (5, 6, 7))
    times = sorted(int(f[2]) for f in (x.split("\t") for x in log.splitlines())
                   if len(f) >= 3 and int(f[1]) > 0)

    def pct(p):  # the nearest rank, in integers: 99.9% of 41000 is rank 40959, not 40960
        return times[max(0, -(-len(times) * round(p * 10) // 1000) - 1)] if times else -1
    return dict(requests=int(q.group(3)), duration_us=round(duration_s * 1e6), p50_us=pct(50),
                p90_us=pct(90), p99_us=pct(99), p999_us=pct(99.9), max_us=pct(100),
                mean_us=round(sum(times) / len(times), 1) if times else -1, connect=0,
                read=errored - timeout, write=0, timeout=timeout, status=failed - errored)


def wrk_errors(w):
    return w["connect"] + w["read"] + w["write"] + w["timeout"] + w["status"]


class Bench:
    def __init__(self, a):
        self.a = a
        self.tmp = tempfile.mkdtemp(prefix="m0-bench-")
        os.chmod(self.tmp, 0o755)
        self.lua = os.path.join(self.tmp, "done.lua")
        with open(self.lua, "w") as f:
            f.write(WRK_LUA)
        self.par_lua = os.path.join(self.tmp, "par.lua")
        with open(self.par_lua, "w") as f:
            f.write(PAR_LUA)
        with open(os.path.join(self.tmp, "now.json"), "w") as f:
            f.write(BODY)
        os.chmod(os.path.join(self.tmp, "now.json"), 0o644)
        # M12's directory, which nginx's and h2o's configurations name at /f/ in every part
        www = os.path.join(self.tmp, "www")
        os.mkdir(www)
        os.chmod(www, 0o755)
        for name, data in (("1k.bin", bytes(range(256)) * 4), ("1m.bin", os.urandom(1 << 20)),
                           ("data.json", bench_json().encode())):
            with open(os.path.join(www, name), "wb") as f:
                f.write(data)
            os.chmod(os.path.join(www, name), 0o644)
        self.nproc = len(os.sched_getaffinity(0))
        self.nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        self.port = a.port_base
        self.anomalies = []

    def note(self, msg):
        log("NOTE: " + msg)
        self.anomalies.append(msg)

    def binp(self, name):
        """The app itself, not libtool's wrapper script (which would add a shell to every
        start and a bash process to the tree); spawn() sets LD_LIBRARY_PATH for it."""
        return app_binary(self.a.build, name)

    def helper(self, name):
        return os.path.join(self.a.helpers, name)

    def logpath(self, name):
        return os.path.join(self.tmp, name + ".log")

    def pinned(self):
        """The pinned layout: one loop on --server-cpu, wrk -t1 on --client-cpu."""
        return dict(name="pinned", server_cpus=str(self.a.server_cpu),
                    client_cpus=str(self.a.client_cpu), workers=1, wrk_threads=1)

    def layouts(self):
        out = []
        for name in self.a.layouts:
            if name == "pinned":
                out.append(self.pinned())
            else:
                out.append(dict(name="wide", server_cpus=None, client_cpus=None,
                                workers=self.nproc, wrk_threads=self.a.wide_wrk_threads))
        return out

    # ------------------------------------------------------------ servers

    def server_argv(self, arm, port, workers, max_conns=None, head_timeout_s=None):
        """An arm's command line; `head_timeout_s` (M8) sets each server's bound on a request
        head, else each keeps its own (ramp 10 s, nginx 60 s, h2o 120 s)."""
        if arm == "ramp":
            argv = [self.binp("ramp"), "--port", str(port), "--threads", str(workers),
                    "--max-keepalive-requests", "0",
                    "--blocking-threads", str(self.a.blocking_threads)]
            if max_conns:
                argv += ["--max-connections", str(max_conns)]
            if head_timeout_s:
                argv += ["--header-timeout-ms", str(head_timeout_s * 1000)]
            return argv
        if arm == "floor":
            return [self.helper("floor"), str(port), str(workers)]
        conns = max(10240, (max_conns or 0) + 1024)
        d = os.path.join(self.tmp, f"{arm}-{port}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(HERE, f"{arm}.conf.in")) as f:
            conf = f.read()
        for k, v in dict(PORT=port, WORKERS=workers, DIR=d, TMP=self.tmp, CONNECTIONS=conns,
                         NOFILE=self.nofile, HEADER_TIMEOUT_S=head_timeout_s or 60,
                         REQUEST_TIMEOUT_S=head_timeout_s or 120).items():
            conf = conf.replace(f"@{k}@", str(v))
        path = os.path.join(d, f"{arm}.conf")
        with open(path, "w") as f:
            f.write(conf)
        if arm == "nginx":
            return ["nginx", "-e", "stderr", "-p", d, "-c", path]
        return ["h2o", "-c", path]

    def start(self, arm, layout, port, max_conns=None, ready_path="/x/now", env=None,
              argv=None, cpus="layout", ready_status=200):
        argv = argv or self.server_argv(arm, port, layout["workers"], max_conns)
        cpus = layout["server_cpus"] if cpus == "layout" else cpus
        p = spawn(argv, self.logpath(f"{arm}-{port}"), env=env, cpus=cpus)
        try:
            body = wait_ready(p, port, ready_path, status=ready_status)
        except RuntimeError as e:
            stop(p)
            raise RuntimeError(f"{arm}: {e}; log: {self.logpath(f'{arm}-{port}')}")
        return p, body

    def next_port(self):
        """The next port from --port-base up that nothing on this machine holds."""
        while True:
            self.port += 1
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", self.port))
                    return self.port
                except OSError:
                    continue

    # ------------------------------------------------------------ wrk

    def wrk_argv(self, port, path, conns, threads, duration, cpus=None, lua=None, headers=()):
        """wrk with --latency and the Lua script that prints its summary (WRK_LUA), and a -H
        for each of `headers` ("Name: value")."""
        argv = ["wrk", "-t", str(threads), "-c", str(conns), "-d", f"{duration}s", "--latency",
                "-s", lua or self.lua]
        for h in headers:
            argv += ["-H", h]
        argv.append(f"http://127.0.0.1:{port}{path}")
        return argv if cpus is None else ["taskset", "-c", str(cpus)] + argv

    def wrk(self, port, path, conns, threads, duration, cpus, lua=None, headers=()):
        argv = self.wrk_argv(port, path, conns, threads, duration, cpus, lua, headers)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=duration + 60)
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        w = wrk_summary(r.returncode, r.stdout, r.stderr)
        w["client_cpu_s"] = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
        return w

    def h2load_paced(self, port, path, conns, rate, duration, cpus, threads=1):
        """h2load over HTTP/1.1 at `rate` requests a second in all (--rps of each of `conns`
        connections), `threads` threads on `cpus` (None: anywhere), for `duration` seconds:
        wrk's figures, the times from h2load's log of every request (h2load_summary)."""
        logf = os.path.join(self.tmp, "h2load.log")
        argv = ["h2load", "--h1", f"-t{threads}", f"-c{conns}", f"--rps={rate / conns:g}",
                f"-D{duration}", f"--log-file={logf}", f"http://127.0.0.1:{port}{path}"]
        if cpus is not None:
            argv = ["taskset", "-c", str(cpus)] + argv
        if os.path.exists(logf):  # h2load appends to it
            os.unlink(logf)
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=duration + 60)
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            log = ""
            if r.returncode == 0:
                with open(logf) as f:
                    log = f.read()
            w = h2load_summary(r.returncode, r.stdout, r.stderr, log, duration)
        finally:
            if os.path.exists(logf):
                os.unlink(logf)
        w["client_cpu_s"] = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
        return w

    def measure(self, p, port, path, conns, layout, duration, lua=None, rate=0, headers=()):
        """One row: wrk (h2load at `rate` requests a second, when given; wrk with `headers`)
        against a running server, with the server tree's CPU and RSS."""
        load = loadavg()
        b0, c0, t0 = machine_busy_s(), cpu_seconds(p.pid), thread_cpu(p.pid)
        if rate:
            w = self.h2load_paced(port, path, conns, rate, duration, layout["client_cpus"],
                                  layout["wrk_threads"])
        else:
            w = self.wrk(port, path, conns, layout["wrk_threads"], duration,
                         layout["client_cpus"], lua, headers)
        c1, b1, t1 = cpu_seconds(p.pid), machine_busy_s(), thread_cpu(p.pid)
        rss_tree, rss_main, nprocs = rss(p.pid)
        n = max(w["requests"], 1)
        secs = w["duration_us"] / 1e6
        out = dict(
            conns=conns, wrk_threads=layout["wrk_threads"], duration_s=round(secs, 3),
            requests=w["requests"], rps=round(w["requests"] / secs, 1),
            server_cpu_s=round(c1 - c0, 3), cpu_us_per_req=round((c1 - c0) * 1e6 / n, 3),
            client_cpu_us_per_req=round(w["client_cpu_s"] * 1e6 / n, 3),
            # what came back per request, heads included (h2load's summary has no bytes)
            bytes_per_req=round(w["bytes"] / n, 1) if "bytes" in w else None,
            p50_us=w["p50_us"], p90_us=w["p90_us"], p99_us=w["p99_us"], p999_us=w["p999_us"],
            max_us=w["max_us"], mean_us=w["mean_us"],
            errors=dict(connect=w["connect"], read=w["read"], write=w["write"],
                        timeout=w["timeout"], non2xx=w["status"]),
            errors_total=wrk_errors(w), rss_kib=rss_tree, rss_main_kib=rss_main, processes=nprocs,
            loadavg_before=load,
            # the root process's threads, by name (m0: m0-loop-N, m0-producer, ...)
            thread_cpu_us_per_req={k: round((v - t0.get(k, 0)) * 1e6 / n, 3)
                                   for k, v in sorted(t1.items()) if v - t0.get(k, 0) > 0},
            loop_cpu_us_per_req=round(sum(v - t0.get(k, 0) for k, v in t1.items()
                                          if k.startswith("m0-loop")) * 1e6 / n, 3),
            # CPU that neither the server nor wrk used while the run lasted: other work on the
            # machine (and interrupt-context network work); a large share means a noisy row.
            other_cpu_share=round(max(0.0, (b1 - b0) - (c1 - c0) - w["client_cpu_s"])
                                  / (secs * self.nproc), 3),
        )
        if "handler" in w:  # host_parallel: the time its handler reported, under this load
            h = w["handler"]
            out.update(handler_n=h["n"], handler_p50_us=h["p50_us"] if h["n"] else None,
                       handler_p99_us=h["p99_us"] if h["n"] else None)
        return out

    # ------------------------------------------------------------ M1

    def m1(self):
        a = self.a
        rows = []
        arms = M1_ORDER if a.m7_base else ARMS
        if a.m1_rate and not shutil.which("h2load"):
            raise RuntimeError("--m1-rate needs h2load (Debian's nghttp2-client)")
        for layout in self.layouts():
            for rnd in range(a.rounds):
                k = rnd % len(arms)
                order = arms[k:] + arms[:k]
                for pos, arm in enumerate(order):
                    port = self.next_port()
                    log(f"M1 {layout['name']} round {rnd + 1}/{a.rounds}: {arm} on :{port}")
                    if arm == M1_BASE:  # ramp's command line, the base build's ramp and libm0
                        argv = self.server_argv("ramp", port, layout["workers"])
                        argv[0] = app_binary(a.m7_base, "ramp")
                        p, body = self.start(arm, layout, port, argv=argv,
                                             env=build_env(a.m7_base))
                        why = libm0_not_of(p.pid, a.m7_base)
                        if why:
                            stop(p)
                            raise RuntimeError(f"M1 {arm}: {why}")
                    else:
                        p, body = self.start(arm, layout, port)
                    try:
                        if arm not in ("ramp", M1_BASE) and body.decode() != BODY:
                            raise RuntimeError(f"{arm} answered {body!r}, not {BODY}")
                        if a.warmup > 0:
                            self.wrk(port, "/x/now", 16, layout["wrk_threads"], a.warmup,
                                     layout["client_cpus"])
                        # paced (--m1-rate), /x/now alone: a rate for /x/now is past /x/search's
                        eps = (("now", "search") if arm in ("ramp", M1_BASE) and not a.m1_rate
                               else ("now",))
                        for ep in eps:
                            for conns in a.conns:
                                row = self.measure(p, port, ENDPOINTS[ep], conns, layout,
                                                   a.duration, rate=a.m1_rate)
                                row.update(layout=layout["name"], round=rnd, position=pos,
                                           arm=arm, endpoint=ep, path=ENDPOINTS[ep])
                                rows.append(row)
                                log(f"  {ep:6} c={conns:<4} {row['rps']:>10.0f} rps "
                                    f"{row['cpu_us_per_req']:7.2f} us/req  p99 "
                                    f"{row['p99_us'] / 1000:7.2f} ms  rss {row['rss_kib']} KiB"
                                    f"  errors {row['errors_total']}")
                                if row["errors_total"]:
                                    self.note(f"M1 {layout['name']} round {rnd + 1} {arm} "
                                              f"{ep} c={conns}: {row['errors']}")
                                if a.m1_rate and row["rps"] < 0.95 * a.m1_rate:
                                    self.note(f"M1 {layout['name']} round {rnd + 1} {arm} "
                                              f"{ep} c={conns}: {row['rps']:.0f} requests a "
                                              f"second, short of the pace of {a.m1_rate}")
                        if p.poll() is not None:
                            self.note(f"M1 {arm} exited with {p.returncode} during the runs")
                    finally:
                        rc = stop(p)
                        if rc not in (0, -signal.SIGTERM, 143) and arm in ("ramp", M1_BASE):
                            self.note(f"M1 ramp exited {rc} after SIGTERM "
                                      f"(log {self.logpath(f'{arm}-{port}')})")
        return rows

    @staticmethod
    def m1_summary(rows):
        keys = sorted({(r["layout"], r["endpoint"], r["conns"], r["arm"]) for r in rows},
                      key=lambda k: (k[0], k[1], k[2], M1_ORDER.index(k[3])))
        med = []
        for lay, ep, c, arm in keys:
            rs = [r for r in rows if (r["layout"], r["endpoint"], r["conns"], r["arm"]) ==
                  (lay, ep, c, arm)]
            m = dict(layout=lay, endpoint=ep, conns=c, arm=arm, rounds=len(rs),
                     errors_total=sum(r["errors_total"] for r in rs))
            for f in ("rps", "cpu_us_per_req", "client_cpu_us_per_req", "p50_us", "p99_us",
                      "rss_kib", "rss_main_kib", "other_cpu_share"):
                m[f] = round(statistics.median(r[f] for r in rs), 3)
            m["wrk_cpus"] = round(statistics.median(wrk_cpus(r) for r in rs), 3)
            med.append(m)
        ratios = []
        for lay, ep, c, arm in keys:
            if arm == "ramp":
                continue
            per = {f: [] for f in ("rps", "cpu_us_per_req", "p99_us", "rss_kib")}
            for r in rows:
                if (r["layout"], r["endpoint"], r["conns"], r["arm"]) != (lay, ep, c, arm):
                    continue
                mine = [x for x in rows if x["arm"] == "ramp" and x["round"] == r["round"] and
                        (x["layout"], x["endpoint"], x["conns"]) == (lay, ep, c)]
                if not mine:
                    continue
                for f in per:
                    if r[f]:
                        per[f].append(mine[0][f] / r[f])
            if per["rps"]:
                ratios.append(dict(
                    layout=lay, endpoint=ep, conns=c, peer=arm, rounds=len(per["rps"]),
                    **{f"ramp_over_peer_{f}": round(statistics.median(v), 3) if v else None
                       for f, v in per.items()},
                    by_round={f: [round(x, 3) for x in v] for f, v in per.items()}))
        return med, ratios

    # ------------------------------------------------------------ M2

    def m2(self):
        a = self.a
        arms = [
            ("no-work", {"M0_SIM_HZ": "60", "M0_SIM_COST_MS": "0"}),
            ("producer", {"M0_SIM_HZ": "60", "M0_SIM_COST_MS": "8"}),
            ("on-loop", {"M0_SIM_HZ": "60", "M0_SIM_COST_MS": "8", "M0_SIM_ON_LOOP": "1"}),
        ]
        rows = []
        for layout in self.layouts():
            for rnd in range(a.rounds):
                k = rnd % len(arms)
                for pos, (arm, env) in enumerate(arms[k:] + arms[:k]):
                    port = self.next_port()
                    log(f"M2 {layout['name']} round {rnd + 1}/{a.rounds}: {arm} on :{port}")
                    argv = [self.binp("sim_loop"), "--port", str(port), "--threads",
                            str(layout["workers"]), "--max-keepalive-requests", "0"]
                    p, _ = self.start("sim_loop", layout, port, ready_path="/now", env=env,
                                      argv=argv)
                    try:
                        if a.warmup > 0:
                            self.wrk(port, "/now", 16, layout["wrk_threads"], a.warmup,
                                     layout["client_cpus"])
                        for conns in a.conns:
                            row = self.measure(p, port, "/now", conns, layout, a.duration)
                            row.update(layout=layout["name"], round=rnd, position=pos, arm=arm,
                                       env=env)
                            # The CPUs the server's threads and wrk compete for: CPU 1 alone
                            # pinned (wrk has CPU 0), the whole machine wide.
                            cpus = 1 if layout["server_cpus"] else self.nproc
                            step_s = (row["thread_cpu_us_per_req"].get("m0-producer", 0.0)
                                      * row["requests"] / 1e6)
                            row["producer_cpu_share"] = round(
                                step_s / (row["duration_s"] * cpus), 4)
                            rows.append(row)
                            log(f"  c={conns:<4} {row['rps']:>10.0f} rps  p99 "
                                f"{row['p99_us'] / 1000:7.2f} ms  cpu "
                                f"{row['cpu_us_per_req']:.2f} us/req")
                    finally:
                        stop(p)
        summary = []
        for layout in {r["layout"] for r in rows}:
            for conns in a.conns:
                for arm, _ in arms:
                    rs = [r for r in rows if (r["layout"], r["conns"], r["arm"]) ==
                          (layout, conns, arm)]
                    ret = []
                    for r in rs:
                        base = [x for x in rows if x["arm"] == "no-work" and
                                (x["layout"], x["conns"], x["round"]) ==
                                (layout, conns, r["round"])]
                        if base and base[0]["rps"]:
                            ret.append(r["rps"] / base[0]["rps"])
                    summary.append(dict(
                        layout=layout, conns=conns, arm=arm, rounds=len(rs),
                        rps=round(statistics.median(r["rps"] for r in rs), 1),
                        retention=round(statistics.median(ret), 4) if ret else None,
                        p50_us=statistics.median(r["p50_us"] for r in rs),
                        p99_us=statistics.median(r["p99_us"] for r in rs),
                        cpu_us_per_req=round(statistics.median(r["cpu_us_per_req"] for r in rs),
                                             3),
                        loop_cpu_us_per_req=round(
                            statistics.median(r["loop_cpu_us_per_req"] for r in rs), 3),
                        producer_cpu_share=round(
                            statistics.median(r.get("producer_cpu_share", 0.0) for r in rs), 4),
                        errors_total=sum(r["errors_total"] for r in rs)))
        summary.sort(key=lambda s: (s["layout"], s["conns"], [x for x, _ in arms].index(s["arm"])))
        return dict(rows=rows, summary=summary, loss=self.m2_loss())

    def m2_loss(self):
        """Bus delivery: one stream of sim_loop's producer frames for N seconds, per rate."""
        a = self.a
        out = []
        lay = self.layouts()[0]
        for hz in a.loss_hz:
            for load in ("idle", "loaded"):
                port = self.next_port()
                env = {"M0_SIM_HZ": str(hz), "M0_SIM_COST_MS": "0"}
                argv = [self.binp("sim_loop"), "--port", str(port), "--threads",
                        str(lay["workers"]), "--max-keepalive-requests", "0"]
                p, _ = self.start("sim_loop", lay, port, ready_path="/now", env=env, argv=argv)
                w = None
                try:
                    if load == "loaded":
                        wargv = ["wrk", "-t", str(lay["wrk_threads"]), "-c", "16", "-d",
                                 f"{a.loss_seconds + 3}s", f"http://127.0.0.1:{port}/now"]
                        w = spawn(wargv, self.logpath(f"wrk-loss-{port}"),
                                  cpus=lay["client_cpus"])
                    s = self.sseload("stream", port, "/events", 1, a.loss_seconds, "sim")
                finally:
                    if w is not None:
                        stop(w)
                    stop(p)
                elapsed = s["hold_s"] + s["connect_ms"] / 1000
                published = (s["last_id"] - s["first_id"] + 1) if s["frames"] else 0
                row = dict(
                    hz=hz, load=load, seconds=round(elapsed, 3),
                    nominal=round(hz * elapsed, 1),
                    received=s["frames"], published_in_window=published, gaps=s["gaps"],
                    dups=s["dups"], closed=s["closed"],
                    delivery_loss=round(s["gaps"] / published, 6) if published else None,
                    shortfall_vs_nominal=round(1 - s["frames"] / (hz * elapsed), 4),
                )
                out.append(row)
                log(f"M2 loss {hz} Hz {load}: {row['received']} frames in "
                    f"{row['seconds']:.1f} s (nominal {row['nominal']}), gaps {row['gaps']}")
                if s["gaps"] or s["dups"] or s["closed"]:
                    self.note(f"M2 loss at {hz} Hz {load}: gaps {s['gaps']}, dups {s['dups']}, "
                              f"stream closed {s['closed']}")
        return out

    # ------------------------------------------------------------ M3

    def sseload(self, mode, port, path, n, hold, event=None, on_ready=None):
        argv = [self.helper("sseload"), mode, "127.0.0.1", str(port), path, str(n), str(hold)]
        if event:
            argv.append(event)
        p = spawn(argv, self.logpath(f"sseload-{port}"), stdout=subprocess.PIPE)
        try:
            line = p.stdout.readline().decode()
            if not line.startswith("ready"):
                raise RuntimeError(f"sseload: {line!r}; log {self.logpath(f'sseload-{port}')}")
            _, opened, failed, ms = line.split()
            extra = on_ready(int(opened), int(failed), float(ms)) if on_ready else None
            out = p.stdout.read().decode()
            p.wait(hold + 120)
        finally:
            stop(p)
        res = json.loads(out.strip().splitlines()[-1])
        if extra:
            res.update(extra)
        return res

    def m3(self):
        a = self.a
        n = a.clients
        room = self.nofile - 200
        if n > room:
            self.note(f"M3: RLIMIT_NOFILE hard limit is {self.nofile}: {room} clients, "
                      f"not {n}")
            n = room
        res = dict(clients=n, nofile=self.nofile)

        # Streams: host_check's producer beat once a second, N idle streams.
        port = self.next_port()
        lay = dict(name="wide", server_cpus=None, client_cpus=None, workers=self.nproc)
        argv = [self.binp("host_check"), "--port", str(port), "--threads", str(self.nproc),
                "--max-connections", str(n + 1000)]
        log(f"M3 streams: {n} clients on host_check :{port}")
        p, _ = self.start("host_check", lay, port, ready_path="/health", argv=argv,
                          env={"M0_HOSTCHECK_PERIOD_MS": "1000"}, cpus=None)
        try:
            before = rss_by_pid(p.pid)

            def sample(opened, failed, ms):
                time.sleep(1.0)
                after = rss_by_pid(p.pid)
                return dict(rss_before_kib=sum(before.values()),
                            rss_with_streams_kib=sum(after.values()),
                            rss_growth_kib=rss_growth(before, after))

            s = self.sseload("stream", port, "/events", n, a.stream_hold, "beat", sample)
            alive = p.poll() is None
        finally:
            rc = stop(p)
        s["per_stream_bytes"] = round(s["rss_growth_kib"] * 1024
                                      / max(s["open"] + s["closed"], 1), 1)
        s["expected_frames_per_client"] = round(s["hold_s"] + s["connect_ms"] / 1000, 1)
        s["common_window_frames"] = max(s["last_id_min"] - s["first_id_max"] + 1, 0)
        s["every_frame_to_every_client"] = (
            s["open"] == n and s["clients_with_gaps"] == 0 and s["clients_with_frames"] == n
            and s["last_id_min"] >= s["first_id_max"])
        s["server_alive_at_end"] = alive
        s["server_exit"] = rc
        res["streams"] = s
        log(f"M3 streams: open {s['open']}/{n}, frames {s['frames_min']}..{s['frames_max']} "
            f"per client, gaps {s['gaps']}, {s['per_stream_bytes']} B/stream")
        if not s["every_frame_to_every_client"]:
            self.note(f"M3 streams: not every frame reached every client: {s}")

        # Idle keep-alive connections: one request each, then idle.
        res["keepalive"] = []
        pinned = dict(name="ka", server_cpus=None, client_cpus=None, workers=1)
        for arm in ("ramp", "nginx", "h2o"):
            port = self.next_port()
            log(f"M3 keep-alive: {n} idle connections on {arm} :{port}")
            p, _ = self.start(arm, pinned, port, max_conns=n + 1000)
            try:
                http_get(port, "/x/now")
                before = rss_by_pid(p.pid)

                def sample(opened, failed, ms):
                    time.sleep(1.0)
                    return dict(after=rss_by_pid(p.pid))

                k = self.sseload("keepalive", port, "/x/now", n, a.keepalive_hold, None, sample)
            finally:
                stop(p)
            after = k.pop("after")
            k.update(server=arm, rss_before_kib=sum(before.values()),
                     rss_after_kib=sum(after.values()), rss_growth_kib=rss_growth(before, after),
                     processes_started_between=len(set(after) - set(before)))
            k["per_conn_bytes"] = round(k["rss_growth_kib"] * 1024
                                        / max(k["open"] + k["closed"], 1), 1)
            res["keepalive"].append(k)
            log(f"  {arm}: open {k['open']}, {k['per_conn_bytes']} B/conn, "
                f"closed in hold {k['closed_in_hold']}")
            if k["failed"] or k["closed_in_hold"]:
                self.note(f"M3 keep-alive {arm}: failed {k['failed']}, closed during the hold "
                          f"{k['closed_in_hold']}")
        return res

    # ------------------------------------------------------------ M8

    def m8(self):
        """A normal client beside a crowd of slowloris connections, ramp, nginx and h2o in the
        same rounds (the order rotating), each with the same bound on a request head."""
        a = self.a
        t_s = a.m8_timeout_ms // 1000
        lay = dict(name="m8", server_cpus=None, client_cpus=None, workers=a.m8_threads)
        rows = []
        for rnd in range(a.rounds):
            k = rnd % len(M8_ARMS)
            for arm in M8_ARMS[k:] + M8_ARMS[:k]:
                port = self.next_port()
                log(f"M8 round {rnd + 1}/{a.rounds}: {arm} on :{port}, {a.m8_slow} slow "
                    f"connections")
                argv = self.server_argv(arm, port, a.m8_threads, a.m8_slow + 1000, t_s)
                p, _ = self.start(arm, lay, port, argv=argv)
                try:
                    out = self.slowloris(port)
                    alive = p.poll() is None
                finally:
                    stop(p)
                row = m8_row(out, arm, rnd, a.m8_timeout_ms)
                row["server_alive_at_end"] = alive
                rows.append(row)
                log(f"  normal: {row['normal_n']} asked, {row['normal_failed']} failed, p50 "
                    f"{ms(row['p50_us'])} p99 {ms(row['p99_us'])} worst {ms(row['max_us'])} ms (the "
                    f"client's CPU wait in it {ms(max(row['worst_runq_us'], 0))}); "
                    f"slow: {row['slow_closed']}/{row['slow_n']} closed, {row['slow_late']} "
                    f"late")
                if arm == "ramp" and (row["slow_late"] or row["normal_failed"]):
                    self.note(f"M8 round {rnd + 1} ramp: {row['slow_late']} slow connections "
                              f"late, {row['normal_failed']} normal requests failed")
        return dict(rows=rows, summary=m8_summary(rows),
                    parameters=dict(slow=a.m8_slow, drip_ms=a.m8_drip_ms,
                                    timeout_ms=a.m8_timeout_ms, every_ms=a.m8_every_ms,
                                    threads=a.m8_threads, rounds=a.rounds))

    def slowloris(self, port):
        """contrib/bench/slowloris.c against :port; its JSON. It ends once every slow
        connection is closed, or 6 s past the head bound after the last could have opened."""
        a = self.a
        hold = a.m8_timeout_ms / 1000 + 6
        argv = [self.helper("slowloris"), "127.0.0.1", str(port), str(a.m8_slow),
                str(a.m8_drip_ms), str(a.m8_timeout_ms), str(hold), "/x/now",
                str(a.m8_every_ms)]
        p = spawn(argv, self.logpath(f"slowloris-{port}"), stdout=subprocess.PIPE)
        try:
            out = p.stdout.read().decode()
            p.wait(hold + 60)
        finally:
            stop(p)
        return json.loads(out.strip().splitlines()[-1])

    # ------------------------------------------------------------ parallel compute (issue 8)

    def parallel(self):
        """host_parallel /ser against /par: alone (sequential requests on one connection) and
        under 8 closed-loop clients, per topology, with the compute pool at its default and
        with M0_COMPUTE_THREADS=0 (inline) as the control. Nothing is pinned."""
        a = self.a
        arms = [dict(topology=t, loops=l, blocking=bt, compute=c)
                for t, l, bt in PAR_TOPOLOGIES for c in ("default", "inline")]
        lay = dict(name="parallel", server_cpus=None, client_cpus=None, workers=None,
                   wrk_threads=1)
        rows = []
        for rnd in range(a.rounds):
            k = rnd % len(arms)
            for pos, arm in enumerate(arms[k:] + arms[:k]):
                port = self.next_port()
                name = f"{arm['topology']}, compute {arm['compute']}"
                log(f"parallel round {rnd + 1}/{a.rounds}: {name} on :{port}")
                argv = [self.binp("host_parallel"), "--port", str(port), "--threads",
                        str(arm["loops"]), "--blocking-threads", str(arm["blocking"]),
                        "--max-keepalive-requests", "0"]
                env = {"M0_COMPUTE_THREADS": "0"} if arm["compute"] == "inline" else {}
                p, _ = self.start("host_parallel", lay, port, ready_path="/health", env=env,
                                  argv=argv)
                try:
                    routes = ("ser", "par") if rnd % 2 == 0 else ("par", "ser")
                    for route in routes:  # warm: a few requests on each route
                        self.sequential(port, f"/{route}", 3)
                    sums = {}
                    for route in routes:
                        alone = self.sequential(port, f"/{route}", a.par_requests)
                        sums[route] = alone["sum"]
                        row = self.measure(p, port, f"/{route}", 8, lay, a.duration,
                                           lua=self.par_lua)
                        row.update(round=rnd, position=pos, route=route, **arm,
                                   # counted after the load: a compute thread names itself
                                   # once it runs, which may be after the first answer
                                   compute_threads=compute_threads(p.pid),
                                   alone_n=alone["n"], alone_handler_us=alone["handler_us"],
                                   alone_wall_us=alone["wall_us"],
                                   alone_handler_us_all=alone["handler_all"],
                                   alone_wall_us_all=alone["wall_all"],
                                   alone_x_thread=alone["x_thread"])
                        rows.append(row)
                        log(f"  /{route}: alone {alone['handler_us'] / 1000:6.2f} ms in the "
                            f"handler, {alone['wall_us'] / 1000:6.2f} ms wall; 8 clients "
                            f"{row['rps']:7.1f} rps p99 {row['p99_us'] / 1000:7.2f} ms "
                            f"(handler p50 {row['handler_p50_us'] / 1000:.2f} ms)")
                        if row["errors_total"]:
                            self.note(f"parallel round {rnd + 1} {name} /{route}: "
                                      f"{row['errors']}")
                    if sums["ser"] != sums["par"]:
                        self.note(f"parallel {name}: /ser sum {sums['ser']} != /par sum "
                                  f"{sums['par']}")
                    if p.poll() is not None:
                        self.note(f"parallel {name}: exited with {p.returncode} during the runs")
                finally:
                    rc = stop(p)
                    if rc not in (0, -signal.SIGTERM, 143):
                        self.note(f"parallel {name}: exited {rc} after SIGTERM")
        return dict(rows=rows, summary=self.parallel_summary(rows))

    def sequential(self, port, path, n):
        """n GETs one after another on one keep-alive connection: the medians of the time the
        handler reported and of the wall time from the request's send to its last byte."""
        handler, wall, xt, total = [], [], set(), None
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            buf = b""
            for _ in range(n):
                t0 = time.perf_counter()
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
                while b"\r\n\r\n" not in buf:
                    b = s.recv(65536)
                    if not b:
                        raise RuntimeError(f"{path}: connection closed")
                    buf += b
                head, _, buf = buf.partition(b"\r\n\r\n")
                m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                if not m:
                    raise RuntimeError(f"{path}: no Content-Length in {head!r}")
                want = int(m.group(1))
                while len(buf) < want:
                    b = s.recv(65536)
                    if not b:
                        raise RuntimeError(f"{path}: connection closed")
                    buf += b
                body, buf = buf[:want], buf[want:]
                wall.append((time.perf_counter() - t0) * 1e6)
                if not head.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError(f"{path}: {head[:40]!r}")
                m = re.match(rb"(ser|par)=(\d+)us sum=(\S+)", body)
                if not m:
                    raise RuntimeError(f"{path}: answered {body!r}")
                handler.append(int(m.group(2)))
                total = m.group(3).decode()
                t = re.search(rb"(?im)^x-thread:\s*(-?\d+)", head)
                if t:
                    xt.add(int(t.group(1)))
        return dict(n=n, handler_us=statistics.median(handler), wall_us=round(
            statistics.median(wall), 1), handler_all=handler,
            wall_all=[round(x, 1) for x in wall], x_thread=sorted(xt), sum=total)

    @staticmethod
    def parallel_summary(rows):
        keys = []
        for r in rows:
            k = (r["topology"], r["compute"], r["route"])
            if k not in keys:
                keys.append(k)
        order = [t for t, _, _ in PAR_TOPOLOGIES]
        keys.sort(key=lambda k: (order.index(k[0]), k[1] != "default", k[2] != "ser"))
        out = []
        for top, comp, route in keys:
            rs = [r for r in rows if (r["topology"], r["compute"], r["route"]) ==
                  (top, comp, route)]
            m = dict(topology=top, compute=comp, route=route, rounds=len(rs),
                     loops=rs[0]["loops"], blocking=rs[0]["blocking"],
                     compute_threads=max(r["compute_threads"] for r in rs),
                     errors_total=sum(r["errors_total"] for r in rs))
            for f in ("alone_handler_us", "alone_wall_us", "rps", "p50_us", "p99_us",
                      "handler_p50_us", "cpu_us_per_req", "other_cpu_share"):
                vals = [r[f] for r in rs if r.get(f) is not None]
                m[f] = round(statistics.median(vals), 3) if vals else None
            # the fastest of all the requests alone: the one other work disturbed least
            m["alone_handler_min_us"] = min(min(r["alone_handler_us_all"]) for r in rs)
            # /par ÷ /ser of the same server in the same round, then the median over rounds
            if route == "par":
                m["par_over_ser_alone_handler_min_us"] = round(
                    m["alone_handler_min_us"] / min(min(x["alone_handler_us_all"]) for x in rows
                                                    if x["route"] == "ser" and
                                                    (x["topology"], x["compute"]) == (top, comp)),
                    3)
                for f in ("alone_wall_us", "rps", "p99_us", "cpu_us_per_req"):
                    v = []
                    for r in rs:
                        s = [x for x in rows if x["route"] == "ser" and x["round"] == r["round"]
                             and (x["topology"], x["compute"]) == (top, comp)]
                        if s and s[0][f]:
                            v.append(r[f] / s[0][f])
                    m[f"par_over_ser_{f}"] = round(statistics.median(v), 3) if v else None
            out.append(m)
        return out

    # ------------------------------------------------------------ placement

    def placement(self):
        """The wide layout, /x/now, at each of --conns, with each run's placement beside its rps
        and p99: which server thread serves which wrk thread's connections, and how often a
        request and its answer stayed on one CPU. Read from perf tracepoints on the socket
        calls of the server and of wrk, one second in the middle of the run."""
        a = self.a
        layout = dict(name="wide", server_cpus=None, client_cpus=None, workers=self.nproc,
                      wrk_threads=a.wide_wrk_threads)
        rows = []
        arms = PLACEMENT_ARMS
        for rnd in range(a.rounds):
            k = rnd % len(arms)
            for pos, arm in enumerate(arms[k:] + arms[:k]):
                port = self.next_port()
                log(f"placement round {rnd + 1}/{a.rounds}: {arm} on :{port}")
                server, env = PLACEMENT_VARIANTS.get(arm, (arm, None))
                argv = self.server_argv(server, port, layout["workers"])
                p, _ = self.start(arm, layout, port, argv=argv, env=env)
                try:
                    if a.warmup > 0:
                        self.wrk(port, "/x/now", 16, layout["wrk_threads"], a.warmup, None)
                    for conns in a.conns:
                        row = self.placement_run(p, port, layout, conns, a.duration)
                        row.update(round=rnd, position=pos, arm=arm, conns=conns)
                        rows.append(row)
                        log(f"  c={conns:<4} {row['rps']:>10.0f} rps  p99 "
                            f"{row['p99_us'] / 1000:6.2f} ms  connections {row['matrix']}  "
                            f"same CPU {row['same_cpu']}")
                finally:
                    stop(p)
        return dict(rows=rows, summary={str(c): placement_summary([x for x in rows
                                                                   if x["conns"] == c])
                                        for c in a.conns})

    def placement_run(self, p, port, layout, conns, duration):
        argv = self.wrk_argv(port, "/x/now", conns, layout["wrk_threads"], duration)
        w = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        RUNNING.append(w)
        try:
            time.sleep(min(duration / 3, 3))
            server = set(tree(p.pid)[0])
            owners = socket_owners(port, server, w.pid)
            data = os.path.join(self.tmp, "placement.data")
            pids = ",".join(str(x) for x in sorted(server | {w.pid}))
            try:
                rec = subprocess.run(["perf", "record", "-q", "-e", PLACEMENT_EVENTS, "-p",
                                      pids, "-o", data, "--", "sleep", "1"],
                                     capture_output=True, text=True, timeout=60)
            except OSError as e:  # no perf: the run still counts, without its placement
                rec = subprocess.CompletedProcess([], 127, "", str(e))
            out, err = w.communicate(timeout=duration + 60)
        finally:
            if w.poll() is None:
                w.kill()
                w.wait()
        r = wrk_summary(w.returncode, out, err)
        row = dict(rps=round(r["requests"] / (r["duration_us"] / 1e6), 1),
                   p50_us=r["p50_us"], p99_us=r["p99_us"], errors_total=wrk_errors(r),
                   matrix=None, same_cpu=None, grouped=None, hops=0)
        if rec.returncode != 0:
            self.note(f"placement: perf record failed ({rec.returncode}): "
                      f"{rec.stderr.strip()[:200]}")
            return row
        sc = subprocess.run(["perf", "script", "-i", data, "-F", "pid,tid,cpu,time,event,trace"],
                            capture_output=True, text=True, timeout=120)
        row.update(pairing(sc.stdout, owners, layout["workers"]))
        return row

    # ------------------------------------------------------------ M7: what features cost

    def m7_build(self, arm):
        return self.a.build if arm.build == "head" else self.a.m7_base

    def m7_argv(self, arm, port):
        return [app_binary(self.m7_build(arm), arm.app), "--port", str(port)] + list(
            M7_FLAGS) + ["--blocking-threads", str(self.a.blocking_threads)] + list(arm.flags)

    def m7_env(self, arm, aux_port):
        """The arm's environment: its build's libm0 (the base build's ramp must not load the
        head's library) and its own variables, {aux_port} filled in."""
        env = build_env(self.m7_build(arm))
        env.update({k: v.replace("{aux_port}", str(aux_port)) for k, v in arm.env.items()})
        return env

    def m7_doctor(self, arm):
        """(exit code, the doctor's closing JSON object or {}) for the arm's command line and
        environment, with --doctor: what serving with them would do, binding nothing. The
        ports are free ones, as at a start, so that a check of the address can pass. An arm
        that needs a journald asks its doctor beside one of its own, as it will serve (the
        doctor refuses M0_ACCESS_LOG=journal where no journald takes entries), its answer
        written to a file since journald-ns gives the command's stdout to the journal."""
        argv = self.m7_argv(arm, self.next_port()) + ["--doctor"]
        env = dict(os.environ, **self.m7_env(arm, self.next_port()))
        env.pop("NOTIFY_SOCKET", None)
        jdir = None
        if "journald" in arm.needs:
            jdir = tempfile.mkdtemp(prefix="journal-doctor-", dir=self.tmp)
            out = os.path.join(self.tmp, os.path.basename(jdir) + ".out")
            argv = journald_argv(jdir) + ["sh", "-c", 'exec "$@" >"$0"', out] + argv
        rc, said = 127, ""
        try:
            r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60,
                               start_new_session=True)
            rc, said = r.returncode, r.stdout
            if jdir:
                with open(out) as f:
                    said = f.read()
        except OSError:  # not started, or under journald-ns its answer never written
            pass
        finally:
            if jdir:
                shutil.rmtree(jdir, ignore_errors=True)
        try:
            doc = json.loads(said.strip().splitlines()[-1])
        except (IndexError, ValueError):
            doc = {}
        return rc, doc

    def m7_journald(self):
        """Why no journald of the arm's own can be started here (a sentence), or None: one
        trial of contrib/bench/journald-ns, the first time an arm needs it."""
        if not hasattr(self, "m7_journald_why"):
            why = None
            if os.geteuid() != 0:
                why = "it needs a journald of its own, which needs root"
            elif not shutil.which("unshare") or not shutil.which("journalctl"):
                why = "it needs unshare and journalctl (util-linux, systemd)"
            else:
                d = tempfile.mkdtemp(prefix="journal-trial-", dir=self.tmp)
                p = spawn(journald_argv(d) + ["true"], self.logpath("journal-trial"))
                try:
                    rc = p.wait(60)
                finally:
                    stop(p)
                if rc:
                    with open(self.logpath("journal-trial")) as f:
                        said = f.read().strip()[-300:]
                    why = f"contrib/bench/journald-ns could not start a journald: {said or rc}"
                shutil.rmtree(d, ignore_errors=True)
            self.m7_journald_why = why
        return self.m7_journald_why

    def m7_why_not(self, arm):
        """Why `arm` cannot run with the builds at hand (a sentence, "pending: …" when the
        feature it measures is missing), or None. The needs of M7Arm first, then the journald,
        then the doctor on the arm's flags and environment (beside that journald)."""
        exe = app_binary(self.m7_build(arm), arm.app)
        if not os.access(exe, os.X_OK):
            return f"{exe} is missing"
        for need in arm.needs:
            kind, _, var = need.partition(":")
            if kind == "reads":
                with open(exe, "rb") as f:
                    if var.encode() + b"\0" not in f.read():
                        return f"pending: {arm.app} does not read {var}"
            elif kind == "knob":
                config = self.m7_doctor(arm)[1].get("config", {})
                if not any(k.get("env") == var for k in config.values()):
                    return f"pending: the host has no knob {var} (its doctor lists none)"
            elif kind == "h2load":
                if not shutil.which("h2load"):
                    return "no h2load (Debian's nghttp2-client) to pace it"
                if not self.a.m7_rate:
                    return "no request rate: --m7-rate 0"
            elif kind != "journald":
                raise ValueError(f"M7 arm {arm.name}: unknown need {need!r}")
        if "journald" in arm.needs:
            why = self.m7_journald()
            if why:
                return why
        if arm.flags or arm.env:
            rc, doc = self.m7_doctor(arm)
            if rc != 0:
                said = "; ".join(c["detail"] for c in doc.get("checks", []) if not c.get("ok"))
                given = " ".join(list(arm.flags) + [f"{k}={v}" for k, v in arm.env.items()])
                return f"pending: {arm.app}'s doctor refuses {given} (exit {rc}: {said})"
        return None

    def m7_start(self, arm, layout, port):
        """Start the arm fresh: (the Popen to stop, the server's pid, its journal directory or
        None). Under journald-ns the Popen is the wrapper and the server its child."""
        aux = self.next_port() if any("{aux_port}" in v for v in arm.env.values()) else None
        argv, jdir = self.m7_argv(arm, port), None
        if "journald" in arm.needs:
            jdir = os.path.join(self.tmp, f"journal-{port}")
            os.makedirs(jdir)
            argv = journald_argv(jdir) + argv
        p, _ = self.start(arm.name, layout, port, ready_path=arm.path, env=self.m7_env(arm, aux),
                          argv=argv)
        try:
            pid = p.pid if jdir is None else read_pid(jdir, "command.pid")
            if arm.probe:
                wait_ready(p, aux, arm.probe)
            why = libm0_not_of(pid, self.m7_build(arm))
            if why:
                raise RuntimeError(f"M7 {arm.name}: {why}")
        except BaseException:
            stop(p)
            raise
        return p, pid, jdir

    def m7(self):
        """SPEC M7: the arms of M7_ARMS that can run, in interleaved rounds. In each round every
        arm is started fresh (the order rotating by one from round to round), warmed up, then
        measured pinned (one loop on --server-cpu, wrk -t1 on --client-cpu) on its path at
        --m7-conns in slices of --m7-slice seconds, the arms taking turns slice by slice (the
        order reversed every other slice) until each has had --duration seconds."""
        a = self.a
        run, skipped = m7_plan(M7_ARMS, a.m7_arms, bool(a.m7_base), self.m7_why_not)
        for arm, why in skipped:
            log(f"M7 {arm.name}: not run: {why}")
        rows = []
        for rnd in range(a.rounds):
            k = rnd % len(run) if run else 0
            rows += self.m7_round(run[k:] + run[:k], rnd)
        arms = [dict(arm._asdict(), env=dict(arm.env)) for arm in run]
        return dict(
            parameters=dict(conns=a.m7_conns, rate=a.m7_rate, rounds=a.rounds,
                            duration_s=a.duration,
                            slice_s=a.m7_slice, warmup_s=a.warmup, server_cpu=a.server_cpu,
                            client_cpu=a.client_cpu, flags=" ".join(
                                M7_FLAGS + ("--blocking-threads", str(a.blocking_threads)))),
            builds=dict(base=self.m7_base_build()) if a.m7_base else {},
            arms=arms, skipped=[dict(x._asdict(), env=dict(x.env), why=w) for x, w in skipped],
            rows=rows, summary=m7_summary(rows, arms))

    def m7_round(self, order, rnd):
        """One round: a row per arm, from the slices it served."""
        a = self.a
        layout = self.pinned()
        live = []  # (arm, Popen, server pid, journal directory, port)
        try:
            for arm in order:
                port = self.next_port()
                log(f"M7 round {rnd + 1}/{a.rounds}: {arm.name} on :{port}")
                live.append((arm, *self.m7_start(arm, layout, port), port))
            for arm, _, _, _, port in live:
                if a.warmup > 0:
                    self.wrk(port, arm.path, a.m7_conns, 1, a.warmup, layout["client_cpus"])
            slices = {arm.name: [] for arm in order}
            n = max(1, a.duration // a.m7_slice)
            for i in range(n):
                for arm, _, pid, jdir, port in (live if i % 2 == 0 else live[::-1]):
                    jpid = read_pid(jdir, "journald.pid") if jdir else None
                    slices[arm.name].append(self.m7_slice(pid, jpid, port, arm, layout,
                                                          a.m7_slice))
            rows = []
            for pos, (arm, p, pid, _, port) in enumerate(live):
                row = m7_row(slices[arm.name], self.nproc)
                row.update(round=rnd, position=pos, arm=arm.name, path=arm.path,
                           conns=a.m7_conns, libm0=mapped_libm0(pid))
                rows.append(row)
                log(f"  {arm.name:20} {row['rps']:>8.0f} rps {row['cpu_us_per_req']:7.3f} us/req"
                    f"  p99 {row['p99_us'] / 1000:6.2f} ms  other CPU "
                    f"{row['other_cpu_share'] * 100:.0f}%  errors {row['errors_total']}")
                if row["errors_total"]:
                    self.note(f"M7 round {rnd + 1} {arm.name}: {row['errors_total']} errors")
                if arm.paced and row["rps"] < 0.95 * a.m7_rate:
                    self.note(f"M7 round {rnd + 1} {arm.name}: {row['rps']:.0f} requests a "
                              f"second, short of the pace of {a.m7_rate}")
                if p.poll() is not None:
                    self.note(f"M7 {arm.name} exited with {p.returncode} during the round")
        finally:
            for arm, p, _, _, port in live:
                rc = stop(p)
                if rc not in (0, -signal.SIGTERM, 143):
                    self.note(f"M7 {arm.name} exited {rc} after SIGTERM "
                              f"(log {self.logpath(f'{arm.name}-{port}')})")
        for row, (arm, _, _, jdir, _) in zip(rows, live):
            if jdir:
                row["journal_entries"] = journal_entries(jdir, arm.path)
                if row["journal_entries"] is None or row["journal_entries"] < row["requests"]:
                    self.note(f"M7 round {rnd + 1} {arm.name}: {row['journal_entries']} journal "
                              f"entries for {row['requests']} measured requests")
                shutil.rmtree(jdir, ignore_errors=True)
        return rows

    def m7_slice(self, pid, jpid, port, arm, layout, secs):
        """wrk (h2load at --m7-rate for a paced arm) for `secs` against a running arm: what
        m7_row adds up."""
        b0, c0, j0 = machine_busy_s(), run_time_s(pid), run_time_s(jpid) if jpid else 0.0
        if arm.paced:
            w = self.h2load_paced(port, arm.path, self.a.m7_conns, self.a.m7_rate, secs,
                                  layout["client_cpus"])
        else:
            w = self.wrk(port, arm.path, self.a.m7_conns, 1, secs, layout["client_cpus"])
        c1, j1, b1 = run_time_s(pid), run_time_s(jpid) if jpid else 0.0, machine_busy_s()
        return dict(requests=w["requests"], duration_s=w["duration_us"] / 1e6, cpu_s=c1 - c0,
                    client_cpu_s=w["client_cpu_s"], busy_s=b1 - b0, journald_cpu_s=j1 - j0,
                    p50_us=w["p50_us"], p99_us=w["p99_us"], errors=wrk_errors(w))

    def m7_base_build(self):
        """What the base build is: its directory, commit and version."""
        a = self.a
        d = a.m7_base
        m = re.search(r"/rev-([0-9a-f]{12})/", os.path.abspath(d) + "/")
        commit = a.m7_base_commit or (m and m.group(1))
        source = f"git archive of {a.m7_base_rev}" if a.m7_base_rev else f"the build in {d}"
        if not commit:  # a build configured from a source tree: that tree's HEAD
            src = None
            try:
                with open(os.path.join(d, "Makefile")) as f:
                    src = next((x.split("=", 1)[1].strip() for x in f
                                if x.startswith("abs_top_srcdir =")), None)
            except OSError:
                pass
            commit = src and run_text(["git", "-C", src, "rev-parse", "HEAD"])
        env = dict(os.environ, **build_env(d))
        r = subprocess.run([app_binary(d, "ramp"), "--version"], capture_output=True, text=True,
                           env=env, timeout=10)
        return dict(dir=d, commit=commit, source=source,
                    version=(r.stdout + r.stderr).strip().splitlines()[0] if r.stdout or
                    r.stderr else None)

    # ------------------------------------------------------------ cold start

    # ------------------------------------------------------------ M11

    def node_ws(self):
        """(node's argv head, NODE_PATH) for ws-node.js, or (None, why not)."""
        node = shutil.which("node") or shutil.which("nodejs")
        if not node:
            return None, "no node"
        try:
            root = subprocess.run(["npm", "root", "-g"], capture_output=True, text=True,
                                  timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            root = ""
        if not root or not os.path.isdir(os.path.join(root, "ws")):
            return None, "no `ws` where `npm root -g` says (contrib/deps installs it)"
        return [node, os.path.join(HERE, "ws-node.js")], root

    def m11_start(self, arm, port, n):
        """An arm's server, pinned as M1's pinned layout pins one: bench_app with one loop (the
        pings, the heartbeat and the idle bound off, so nothing but the load runs), Node, or
        wsfloor."""
        lay = self.pinned()
        if arm == M11_FLOOR:
            p, _ = self.start("wsfloor", lay, port, ready_path="/health",
                              argv=[self.helper("wsfloor"), str(port)])
            return p
        if arm == "node-ws":
            head, node_path = self.node_ws()
            p, _ = self.start("node", lay, port, ready_path="/health", argv=head + [str(port)],
                              env={"NODE_PATH": node_path})
            return p
        argv = [self.binp("bench_app"), "--port", str(port), "--threads", "1",
                "--max-keepalive-requests", "0", "--blocking-threads", "0",
                "--max-connections", str(n + 2000)]
        env = {"M0_SSE_HEARTBEAT_MS": "0", "M0_WS_PING_MS": "0",
               "M0_IDLE_TIMEOUT_MS": "600000"}
        p, _ = self.start("bench_app", lay, port, ready_path="/health", env=env, argv=argv)
        return p

    def wsload(self, args, on_line):
        """contrib/bench/wsload on the client's CPU; on_line(kind, rest) for each line it prints
        ("ready", "whole"), then ("end", its JSON), which is returned with client_cpu_s."""
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = spawn([self.helper("wsload")] + args, self.logpath(f"wsload-{args[0]}"),
                  cpus=self.a.client_cpu, stdout=subprocess.PIPE)
        res = None
        try:
            for raw in p.stdout:
                text = raw.decode().strip()
                if text.startswith("{"):
                    res = json.loads(text)
                    on_line("end", res)
                    break
                kind, _, rest = text.partition(" ")
                on_line(kind, rest)
        finally:
            stop(p)
        if res is None:
            raise RuntimeError(f"wsload {args[0]} ended without its summary; log "
                               f"{self.logpath('wsload-' + args[0])}")
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        res["client_cpu_s"] = round((ru1.ru_utime + ru1.ru_stime)
                                    - (ru0.ru_utime + ru0.ru_stime), 3)
        return res

    def m11_echo(self, p, port):
        """Echo round trips on --m11-echo-conns WebSockets for --duration s, each connection
        sending its next message when its echo is back; the server's CPU from ready to the
        summary."""
        a = self.a
        mark = {}

        def on(kind, rest):
            if kind in ("ready", "end"):
                mark[kind] = run_time_s(p.pid)
        r = self.wsload(["echo", "127.0.0.1", str(port), "/echo", str(a.m11_echo_conns),
                         str(a.duration), str(M11_ECHO_SIZE)], on)
        n = max(r["echoes"], 1)
        return dict(echo_open=r["open"], echo_failed=r["failed"], echoes=r["echoes"],
                    echo_rate=round(r["echoes"] / max(r["seconds"], 1e-9), 1),
                    echo_p50_us=r["p50_us"], echo_p99_us=r["p99_us"],
                    echo_p999_us=r["p999_us"], echo_max_us=r["max_us"],
                    echo_cpu_us=round((mark["end"] - mark["ready"]) * 1e6 / n, 3),
                    echo_client_cpu_share=round(r["client_cpu_s"] / max(r["seconds"], 1e-9), 3))

    def m11_fanout(self, p, port, arm, n, e):
        """n connections follow a channel; e messages are published one at a time, each when
        the one before reached every connection (wsload's "whole K"). The server's CPU from
        the first publish to the last delivery, less its idle rate over the same time, ÷ the
        messages delivered."""
        proto, path = M11_FOLLOW[arm]
        st = {}

        def publish(k):
            body = f"bench message {k:06d}".encode()
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            try:
                c.request("POST", "/publish?channel=hot", body=body)
                r = c.getresponse()
                r.read()
            finally:
                c.close()
            if r.status != 200:
                raise RuntimeError(f"M11 {arm}: POST /publish: {r.status}")

        def on(kind, rest):
            if kind == "ready":
                opened = int(rest.split()[0])
                st["opened"] = opened
                if opened != n:
                    return  # wsload waits out its timeout; the row says so
                settle(p.pid)  # the handshakes' work done
                t0, c0 = time.monotonic(), run_time_s(p.pid)
                time.sleep(1.0)
                st["idle_per_s"] = (run_time_s(p.pid) - c0) / (time.monotonic() - t0)
                st["us0"] = user_system_s(p.pid)
                st["t0"], st["c0"] = time.monotonic(), run_time_s(p.pid)
                publish(1)
            elif kind == "whole" and int(rest) < e:
                publish(int(rest) + 1)
            elif kind == "end":
                st["t1"], st["c1"] = time.monotonic(), run_time_s(p.pid)
                st["us1"] = user_system_s(p.pid)
        r = self.wsload(["fanout", proto, "127.0.0.1", str(port), path, str(n), str(e),
                         str(M11_FANOUT_TIMEOUT_S)], on)
        row = dict(followers=n, messages=e, followers_open=r["open"], delivered=r["messages"],
                   every_message=bool(r["every_message"]) and r["messages"] == n * e,
                   connect_ms=r["connect_ms"])
        if "c0" in st:
            wall = st["t1"] - st["t0"]
            used = st["c1"] - st["c0"] - st["idle_per_s"] * wall
            d = max(r["messages"], 1)
            row.update(fanout_wall_s=round(wall, 3), fanout_cpu_s=round(used, 4),
                       idle_cpu_per_s=round(st["idle_per_s"], 5),
                       fanout_us_per_msg=round(used * 1e6 / d, 4),
                       # the same span in clock ticks, user and system apart (idle not taken
                       # off): how much of a delivery is the kernel's
                       fanout_user_us_per_msg=round((st["us1"][0] - st["us0"][0]) * 1e6 / d, 3),
                       fanout_sys_us_per_msg=round((st["us1"][1] - st["us0"][1]) * 1e6 / d, 3))
        return row

    def m11(self):
        a = self.a
        n, e = a.m11_followers, a.m11_messages
        room = self.nofile - 200
        if n > room:
            self.note(f"M11: RLIMIT_NOFILE hard limit is {self.nofile}: {room} followers, "
                      f"not {n}")
            n = room
        head, why = self.node_ws()
        arms = M11_ARMS if head else tuple(x for x in M11_ARMS if x != "node-ws")
        if not head:
            self.note(f"M11: node-ws not run: {why}")
        rows = []
        for rnd in range(a.rounds):
            k = rnd % len(arms)
            for pos, arm in enumerate(arms[k:] + arms[:k]):
                port = self.next_port()
                log(f"M11 round {rnd + 1}/{a.rounds}: {arm} on :{port}")
                p = self.m11_start(arm, port, n)
                try:
                    row = dict(round=rnd, position=pos, arm=arm)
                    if arm != "m0-sse":
                        row.update(self.m11_echo(p, port))
                        log(f"  echo at {row['echo_open']} connections: {row['echo_rate']:.0f}"
                            f"/s p50 {row['echo_p50_us']:.0f} us p99 {row['echo_p99_us']:.0f} "
                            f"us, {row['echo_cpu_us']:.2f} us CPU each")
                    row.update(self.m11_fanout(p, port, arm, n, e))
                    if p.poll() is not None:
                        self.note(f"M11 {arm} exited with {p.returncode} during the runs")
                finally:
                    stop(p)
                rows.append(row)
                log(f"  fan-out to {row['followers_open']}/{n}: {row['delivered']} delivered, "
                    f"{row.get('fanout_us_per_msg', 'n/a')} us CPU per message")
                if not row["every_message"]:
                    self.note(f"M11 round {rnd + 1} {arm}: {row['delivered']} of {n * e} "
                              f"messages delivered to {row['followers_open']} followers")
        med, ratios = m11_summary(rows)
        return dict(rows=rows, medians=med, ratios=ratios, followers=n, messages=e,
                    echo_conns=a.m11_echo_conns, echo_size=M11_ECHO_SIZE,
                    node_path=why if head else None, node_not_run=None if head else why)

    # ------------------------------------------------------------ M12

    def m12_check(self, arm, port):
        """What each cell will ask, checked once: the files' bytes, the 304 for the ETag the
        server gives, the JSON compressed by gzip and the same bytes unpacked. Returns the
        cells' (path, headers), and the compressed JSON's bytes."""
        www = os.path.join(self.tmp, "www")
        cells = {}
        for cell, name in (("1k", "1k.bin"), ("1m", "1m.bin")):
            st, hd, body = http_fetch(port, f"/f/{name}")
            with open(os.path.join(www, name), "rb") as f:
                if st != 200 or body != f.read():
                    raise RuntimeError(f"M12 {arm}: /f/{name} answered {st}, {len(body)} bytes")
            cells[cell] = (f"/f/{name}", ())
        etag = http_fetch(port, "/f/1k.bin")[1].get("etag")
        st, _, _ = http_fetch(port, "/f/1k.bin", {"If-None-Match": etag or '"none"'})
        if st != 304:
            raise RuntimeError(f"M12 {arm}: If-None-Match {etag} answered {st}, not 304")
        cells["304"] = ("/f/1k.bin", (f"If-None-Match: {etag}",))
        gz = None
        if arm != "h2o":  # h2o 2.2 compresses nothing here (no `compress` in M1's config)
            path = "/json" if arm == "m0" else "/f/data.json"
            st, hd, body = http_fetch(port, path, {"Accept-Encoding": "gzip"})
            with open(os.path.join(www, "data.json"), "rb") as f:
                want = f.read()
            if st != 200 or hd.get("content-encoding") != "gzip" or \
                    gzip.decompress(body) != want:
                raise RuntimeError(f"M12 {arm}: {path} answered {st}, "
                                   f"{hd.get('content-encoding')}, {len(body)} bytes")
            cells["json"] = (path, ("Accept-Encoding: gzip",))
            gz = len(body)
        return cells, gz

    def m12(self):
        a = self.a
        lay = self.pinned()
        www = os.path.join(self.tmp, "www")
        rows = []
        for rnd in range(a.rounds):
            k = rnd % len(M12_ARMS)
            for pos, arm in enumerate(M12_ARMS[k:] + M12_ARMS[:k]):
                port = self.next_port()
                log(f"M12 round {rnd + 1}/{a.rounds}: {arm} on :{port}")
                if arm == "floor":
                    rows += self.m12_floor(rnd, pos, port)
                    continue
                if arm == "m0":
                    argv = [self.binp("bench_app"), "--port", str(port), "--threads", "1",
                            "--max-keepalive-requests", "0", "--blocking-threads", "0"]
                    env = {"M0_BENCH_WWW": www,
                           "M0_BENCH_JSON": os.path.join(www, "data.json")}
                    p, _ = self.start("bench_app", lay, port, ready_path="/health", env=env,
                                      argv=argv)
                else:
                    p, _ = self.start(arm, lay, port, ready_path="/f/1k.bin")
                try:
                    cells, gz = self.m12_check(arm, port)
                    if a.warmup > 0:
                        self.wrk(port, "/f/1k.bin", a.m12_conns, 1, a.warmup,
                                 lay["client_cpus"])
                    for cell in M12_CELLS:
                        if cell not in cells:
                            continue
                        path, headers = cells[cell]
                        row = self.measure(p, port, path, a.m12_conns, lay, a.duration,
                                           headers=headers)
                        row.update(round=rnd, position=pos, arm=arm, cell=cell, path=path,
                                   headers=list(headers))
                        if cell == "json":
                            row["body_bytes"] = gz
                        rows.append(row)
                        log(f"  {cell:4} {row['rps']:>9.0f} rps {row['cpu_us_per_req']:7.2f} "
                            f"us/req {row['bytes_per_req']:>9.0f} B/req  errors "
                            f"{row['errors_total']}")
                        if row["errors_total"]:
                            self.note(f"M12 round {rnd + 1} {arm} {cell}: {row['errors']}")
                finally:
                    stop(p)
        med, ratios = m12_summary(rows)
        return dict(rows=rows, medians=med, ratios=ratios, conns=a.m12_conns)

    def m12_floor(self, rnd, pos, port):
        """The floor's cells (M12_FLOOR_CELLS), each on a floor of its own started on `port`
        and the ports after it, checked to answer what the cell asks as the others are, warmed
        up and measured as theirs are."""
        a = self.a
        lay = self.pinned()
        www = os.path.join(self.tmp, "www")
        rows = []
        for cell, (opts, body_file) in M12_FLOOR_CELLS.items():
            argv = [self.helper("floor")] + list(opts)
            if body_file:
                argv += ["--body-file", os.path.join(www, body_file)]
            argv += [str(port), "1"]
            status = 304 if cell == "304" else 200
            headers = ('If-None-Match: "floor"',) if cell == "304" else ()
            p, _ = self.start("floor", lay, port, ready_path="/f/1k.bin", argv=argv,
                              ready_status=status)
            try:
                st, _, body = http_fetch(port, "/f/1k.bin",
                                         dict(h.split(": ", 1) for h in headers))
                want = b""
                if body_file:
                    with open(os.path.join(www, body_file), "rb") as f:
                        want = f.read()
                if st != status or body != want:
                    raise RuntimeError(f"M12 floor {cell}: answered {st}, {len(body)} bytes")
                if a.warmup > 0:
                    self.wrk(port, "/f/1k.bin", a.m12_conns, 1, a.warmup, lay["client_cpus"],
                             headers=headers)
                row = self.measure(p, port, "/f/1k.bin", a.m12_conns, lay, a.duration,
                                   headers=headers)
                row.update(round=rnd, position=pos, arm="floor", cell=cell, path="/f/1k.bin",
                           headers=list(headers), floor_argv=argv[1:-2])
                rows.append(row)
                log(f"  {cell:4} {row['rps']:>9.0f} rps {row['cpu_us_per_req']:7.2f} "
                    f"us/req {row['bytes_per_req']:>9.0f} B/req  errors {row['errors_total']}")
                if row["errors_total"]:
                    self.note(f"M12 round {rnd + 1} floor {cell}: {row['errors']}")
            finally:
                stop(p)
            port = self.next_port()
        return rows

    def cold(self):
        a = self.a
        out = {}
        for app in ("ramp", "host_check"):
            times = []
            for i in range(a.cold_trials):
                sock_path = os.path.join(self.tmp, f"notify-{app}-{i}.sock")
                ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                ns.bind(sock_path)
                ns.settimeout(30)
                argv = [self.binp(app), "--threads", "2", "--port", "0"]
                env = dict(os.environ, NOTIFY_SOCKET=sock_path, **LIB_ENV)
                lf = open(self.logpath(f"cold-{app}"), "ab")
                t0 = time.perf_counter()
                p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=lf,
                                     stderr=lf, start_new_session=True)
                RUNNING.append(p)
                lf.close()
                try:
                    while True:
                        msg = ns.recv(4096)
                        if b"READY=1" in msg.split(b"\n"):
                            times.append((time.perf_counter() - t0) * 1000)
                            break
                except socket.timeout:
                    self.note(f"cold start: {app} sent no READY=1 in 30 s")
                finally:
                    ns.close()
                    os.unlink(sock_path)
                    stop(p)
            out[f"{app}_exec_to_ready_ms"] = summarize(times)
            log(f"cold: {app} 2 loops exec->READY=1 median "
                f"{out[f'{app}_exec_to_ready_ms']['median']} ms")

        times, total = [], []
        for i in range(a.cold_trials):
            port = self.next_port()
            argv = ["systemd-socket-activate", "-l", f"127.0.0.1:{port}", "-E", "M0_THREADS=2"]
            argv += [f"-E{k}={v}" for k, v in LIB_ENV.items()] + [self.binp("ramp")]
            p = spawn(argv, self.logpath(f"activate-{port}"))
            try:
                deadline = time.monotonic() + 10
                while not port_listening(port):
                    if time.monotonic() > deadline or p.poll() is not None:
                        raise RuntimeError("systemd-socket-activate did not listen")
                    time.sleep(0.005)
                with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
                    t0 = time.perf_counter()
                    s.sendall(b"GET /x/now HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    data = s.recv(65536)
                    t1 = time.perf_counter()
                    while True:
                        b = s.recv(65536)
                        if not b:
                            break
                        data += b
                    t2 = time.perf_counter()
                if not data.startswith(b"HTTP/1.1 200"):
                    self.note(f"socket activation: first answer {data[:40]!r}")
                times.append((t1 - t0) * 1000)
                total.append((t2 - t0) * 1000)
                with open(f"/proc/{p.pid}/comm") as f:
                    comm = f.read().strip()
            finally:
                stop(p)
        out["socket_activated_first_byte_ms"] = summarize(times)
        out["socket_activated_whole_response_ms"] = summarize(total)
        out["socket_activated_process"] = comm
        log(f"cold: socket-activated connect->first byte median "
            f"{out['socket_activated_first_byte_ms']['median']} ms")
        return out


def summarize(v):
    if not v:
        return dict(n=0, median=None, min=None, max=None)
    return dict(n=len(v), median=round(statistics.median(v), 2), min=round(min(v), 2),
                max=round(max(v), 2))


def run_text(argv):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10,
                           env=dict(os.environ, **LIB_ENV))
        return (r.stdout + r.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return None


def environment(a, b):
    cpu = None
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    git = lambda *x: run_text(["git", "-C", ROOT] + list(x))  # noqa: E731
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip() != ""
    m = re.search(r"/rev-([0-9a-f]{12})/", os.path.abspath(a.build) + "/")
    if a.rev:
        source = f"git archive of {a.rev}"
    elif a.m0_build_given:
        source = f"an existing build in {a.build}" + (" (of a git archive)" if m else "")
    else:
        source = "working tree" + (" with uncommitted changes" if dirty else "")
    return dict(
        kernel=platform.release(), cpu=cpu, nproc=b.nproc, memory_kib=mem_total(),
        nginx=run_text(["nginx", "-v"]), h2o=run_text(["h2o", "--version"]),
        wrk=run_text(["wrk", "--version"]), m0=run_text([b.binp("ramp"), "--version"]),
        m0_commit=a.rev_commit or (m.group(1) if m else git("rev-parse", "HEAD")),
        m0_source=source,
        loadavg_at_start=loadavg(),
        python=platform.python_version(), rlimit_nofile=b.nofile,
    )


def mem_total():
    with open("/proc/meminfo") as f:
        return int(f.readline().split()[1])


# ---------------------------------------------------------------- markdown


def ms(us):
    return "n/a" if us is None else f"{us / 1000:.2f}"


def wrk_cpus(row):
    """The CPUs wrk kept busy during a run (CPU seconds per second): 1.00 pinned means its one
    CPU was saturated, so the run's rps is wrk's rate, whatever the server could do."""
    return row["client_cpu_us_per_req"] * row["rps"] / 1e6


def render(res, json_rel):
    a = res["parameters"]
    e = res["environment"]
    L = []
    if a["quick"]:
        L.append(f"**Quick run** (`--quick`: {a['rounds']} round, {a['duration_s']} s runs, "
                 "pinned layout only). It checks that the harness works end to end; its "
                 "numbers are single samples, not measurements to quote.")
        L.append("")
    busy = [r["other_cpu_share"] for part in ("m1", "m2", "parallel") if res.get(part)
            for r in res[part]["rows"] if "other_cpu_share" in r]
    if busy and max(busy) > 0.3:
        L.append(f"**Other work shared the machine**: up to {max(busy) * 100:.0f}% of its CPU "
                 "went neither to the server nor to wrk during a run (the *other CPU* column). "
                 "Those rows are noisy; compare within a round, and rerun on an idle machine.")
        L.append("")
    L.append(f"- Command: `{res['command']}`")
    L.append(f"- Date: {res['date']}; artifact: [`{json_rel}`]({json_rel.replace('doc/', '')})")
    L.append(f"- m0: {e['m0']} at {e['m0_commit'][:12]} ({e['m0_source']})")
    L.append(f"- Machine: {e['cpu']}, {e['nproc']} CPUs, kernel {e['kernel']}, "
             f"{e['memory_kib'] // 1024} MiB")
    L.append(f"- Peers: {e['nginx']}; {e['h2o']}; {e['wrk']}")
    L.append(f"- Load average (1 min) at the start: {e['loadavg_at_start']}, at the end: "
             f"{e.get('loadavg_at_end')}")
    parts = a.get("only") or ["m1", "m2", "m3", "cold"]
    runs = f"- Parts: {', '.join(parts)}; {a['rounds']} round(s) × {a['duration_s']} s"
    if a.get("m1_rate"):
        runs += (f", M1 paced: `h2load --h1` at {a['m1_rate']} requests a second (`/x/now` "
                 "only)")
    if "m1" in parts or "m2" in parts:
        runs += (f", warm-up {a['warmup_s']} s, connections {', '.join(map(str, a['conns']))}, "
                 f"layouts {', '.join(a['layouts'])}")
    L.append(runs)
    L.append("")
    m1 = res.get("m1")
    if m1:
        L.append("#### M1: requests (medians over the rounds)")
        L.append("")
        L.append("| layout | endpoint | conns | server | rps | server CPU µs/req | p50 ms | "
                 "p99 ms | RSS KiB (tree / main) | errors | wrk CPUs | other CPU |")
        L.append("|---|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|")
        for m in m1["medians"]:
            wc = m.get("wrk_cpus")
            wc = wrk_cpus(m) if wc is None else wc
            L.append(f"| {m['layout']} | {ENDPOINTS[m['endpoint']]} | {m['conns']} | {m['arm']} "
                     f"| {m['rps']:.0f} | {m['cpu_us_per_req']:.2f} | {ms(m['p50_us'])} | "
                     f"{ms(m['p99_us'])} | {m['rss_kib']:.0f} / {m['rss_main_kib']:.0f} | "
                     f"{m['errors_total']} | {wc:.2f} | {m['other_cpu_share'] * 100:.0f}% |")
        L.append("")
        L.append("`/x/search?sel=25` is ramp's alone: the peers have no such view (n/a). "
                 "*wrk CPUs*: the CPU time wrk used per second of the run; at 1.00 in the "
                 "pinned layout its one CPU was saturated, so that row's rps is the rate wrk "
                 "could drive, and the server's CPU per request is what separates the servers. "
                 "*other CPU*: the share of the machine's CPU time, during the run, that "
                 "neither the server nor wrk used (other work on the machine, and network "
                 "work done in interrupt context); rows where it is high are noisy.")
        L.append("")
        L.append("Ramp ÷ peer, computed within each round, then the median over the rounds. "
                 "Below 1 in the CPU, p99 and RSS columns: ramp used less; above 1 in the rps "
                 "column: ramp served more.")
        L.append("")
        L.append("| layout | conns | peer | rps | CPU/req | p99 | RSS |")
        L.append("|---|--:|---|--:|--:|--:|--:|")
        for r in m1["ratios"]:
            if r["endpoint"] != "now":
                continue
            f = lambda k: "n/a" if r[k] is None else f"{r[k]:.2f}"  # noqa: E731
            L.append(f"| {r['layout']} | {r['conns']} | {r['peer']} | "
                     f"{f('ramp_over_peer_rps')} | {f('ramp_over_peer_cpu_us_per_req')} | "
                     f"{f('ramp_over_peer_p99_us')} | {f('ramp_over_peer_rss_kib')} |")
        L.append("")
        if m1.get("against_base"):
            L.extend(render_against_base(m1["against_base"], m1["base"]))
        L.extend(render_targets(m1["ratios"]))
    m2 = res.get("m2")
    if m2:
        L.append("#### M2: sim_loop at 60 Hz × 8 ms, `/now`")
        L.append("")
        L.append("| layout | conns | arm | rps | retention vs no-work | p50 ms | p99 ms | "
                 "CPU µs/req (process / loops) | producer's CPU share | errors |")
        L.append("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|")
        for s in m2["summary"]:
            ret = "n/a" if s["retention"] is None else f"{s['retention'] * 100:.1f}%"
            share = s.get("producer_cpu_share")
            share = "–" if not share else f"{share * 100:.1f}%"
            L.append(f"| {s['layout']} | {s['conns']} | {s['arm']} | {s['rps']:.0f} | {ret} | "
                     f"{ms(s['p50_us'])} | {ms(s['p99_us'])} | {s['cpu_us_per_req']:.2f} / "
                     f"{s['loop_cpu_us_per_req']:.2f} | {share} | {s['errors_total']} |")
        L.append("")
        L.append("*producer's CPU share*: the producer thread's CPU time ÷ (the run's time × the "
                 "CPUs the server and wrk compete for: 1 pinned, where wrk has the other, all of "
                 "them wide). When every one of those CPUs is busy, what the producer takes is "
                 "what the loops and wrk lose, so a retention near 1 − this share is the loop "
                 "keeping its throughput for the CPU it has; the loops' CPU per request, beside "
                 "it, says whether the loop itself got slower.")
        L.append("")
        L.append("Bus delivery, one stream of `event: sim` frames (step cost 0, producer):")
        L.append("")
        L.append("| rate | load | seconds | nominal | received | published in window | "
                 "id gaps | delivery loss | short of nominal |")
        L.append("|--:|---|--:|--:|--:|--:|--:|--:|--:|")
        for x in m2["loss"]:
            dl = "n/a" if x["delivery_loss"] is None else f"{x['delivery_loss'] * 100:.2f}%"
            L.append(f"| {x['hz']} Hz | {x['load']} | {x['seconds']:.1f} | {x['nominal']:.0f} | "
                     f"{x['received']} | {x['published_in_window']} | {x['gaps']} | {dl} | "
                     f"{max(x['shortfall_vs_nominal'], 0) * 100:.1f}% |")
        L.append("")
    m3 = res.get("m3")
    if m3:
        s = m3["streams"]
        L.append(f"#### M3: {m3['clients']} connections on one process")
        L.append("")
        nloops = res["environment"]["nproc"]
        L.append(f"- Streams (host_check `/events`, one beat a second, {nloops} loops): "
                 f"{s['open']} open of {s['n']}, connected in {s['connect_ms']:.0f} ms; "
                 f"frames per client {s['frames_min']}–{s['frames_max']} in "
                 f"{s['expected_frames_per_client']} s, {s['common_window_frames']} seen by "
                 f"every client (ids {s['first_id_max']}–{s['last_id_min']}); id gaps "
                 f"{s['gaps']}, clients with gaps "
                 f"{s['clients_with_gaps']}; every frame to every client: "
                 f"{'yes' if s['every_frame_to_every_client'] else '**no**'}.")
        L.append(f"- RSS per idle stream: ({s['rss_with_streams_kib']} − {s['rss_before_kib']}) "
                 f"KiB / {s['open'] + s['closed']} = **{s['per_stream_bytes'] / 1024:.2f} KiB**")
        L.append("")
        L.append("| server (1 worker) | idle keep-alive conns | RSS before KiB | RSS after KiB | "
                 "growth KiB | per connection | closed during hold |")
        L.append("|---|--:|--:|--:|--:|--:|--:|")
        for k in m3["keepalive"]:
            L.append(f"| {k['server']} | {k['open']} | {k['rss_before_kib']} | "
                     f"{k['rss_after_kib']} | {k.get('rss_growth_kib', '')} | "
                     f"{k['per_conn_bytes'] / 1024:.2f} KiB | {k['closed_in_hold']} |")
        L.append("")
        L.append("Growth counts the processes that were there before the connections opened; "
                 "one that started in between (h2o's crash-handler helper) is left out.")
        L.append("")
    c = res.get("cold")
    if c:
        L.append("#### Cold start (2 loops)")
        L.append("")
        L.append("| what | trials | median ms | min | max |")
        L.append("|---|--:|--:|--:|--:|")
        for key, label in (("ramp_exec_to_ready_ms", "ramp: exec → READY=1"),
                           ("host_check_exec_to_ready_ms", "host_check: exec → READY=1"),
                           ("socket_activated_first_byte_ms",
                            "ramp socket-activated: connect → first response byte"),
                           ("socket_activated_whole_response_ms",
                            "ramp socket-activated: connect → whole response")):
            v = c[key]
            L.append(f"| {label} | {v['n']} | {v['median']} | {v['min']} | {v['max']} |")
        L.append("")
    par = res.get("parallel")
    if par:
        L.extend(render_parallel(par, a))
    if res["anomalies"]:
        L.append("Anomalies the run noted:")
        L.append("")
        for x in res["anomalies"]:
            L.append(f"- {x}")
        L.append("")
    return "\n".join(L)


# SPEC M1's targets: (what, peer, ratio field, test, bound)
M8_ARMS = ("ramp", "nginx", "h2o")
# M8's targets for ramp: (what, field of the summary, test, bound)
M8_TARGETS = (
    ("worst answer < 5 ms", "max_us", "lt", 5000),
    ("p99 < 1 ms", "p99_us", "lt", 1000),
    ("every slow connection closed within the head bound + 1 s", "slow_late", "eq", 0),
    ("no normal request failed", "normal_failed", "eq", 0),
)
M8_BEGIN = ("<!-- bench:m8:begin (written by contrib/bench/run --only m8; edits here are "
            "replaced) -->")
M8_END = "<!-- bench:m8:end -->"


def m8_row(out, arm, rnd, timeout_ms):
    """One M8 row from contrib/bench/slowloris's JSON: the normal client's answers and what
    became of the slow connections (late: closed more than 1 s past the head bound after their
    first byte, or never)."""
    slow, normal = out["slow"], out["normal"]
    return dict(arm=arm, round=rnd, timeout_ms=timeout_ms,
                slow_n=slow["n"], slow_opened=slow["opened"], slow_failed=slow["failed"],
                slow_closed=slow["closed"], slow_408=slow["status408"], slow_late=slow["late"],
                slow_open_at_end=slow["open"], close_ms_min=slow["close_ms_min"],
                close_ms_max=slow["close_ms_max"],
                normal_n=normal["n"], normal_failed=normal["failed"], p50_us=normal["p50_us"],
                p99_us=normal["p99_us"], max_us=normal["max_us"],
                slowest=[tuple(x) for x in normal["slowest"]],
                probe_fifo=normal.get("fifo", False), worst_runq_us=worst_runq(normal))


def worst_runq(normal):
    """How long the normal client's own thread waited for a CPU during its worst answer
    (slowloris's fifth field of the slowest), -1 when it does not say."""
    w = normal["slowest"][:1]
    return w[0][4] if w and len(w[0]) >= 5 else -1


def m8_summary(rows):
    """Per arm, in M8_ARMS order: the median over the rounds of the normal client's p50, p99
    and worst answer, the worst of the worst, the sums of late slow connections and failed
    normal requests; for ramp, each M8 target met or not, and in how many rounds."""
    out = []
    for arm in M8_ARMS:
        rs = [r for r in rows if r["arm"] == arm]
        if not rs:
            continue
        m = dict(arm=arm, rounds=len(rs))
        for f in ("p50_us", "p99_us", "max_us", "close_ms_max"):
            m[f] = statistics.median(r[f] for r in rs)
        m["max_us_worst"] = max(r["max_us"] for r in rs)
        known = [r["worst_runq_us"] for r in rs if r.get("worst_runq_us", -1) >= 0]
        m["worst_runq_us"] = statistics.median(known) if known else -1
        m["probe_fifo"] = all(r.get("probe_fifo") for r in rs)
        for f in ("slow_late", "normal_failed", "slow_closed", "slow_408", "slow_n",
                  "normal_n"):
            m[f] = sum(r[f] for r in rs)
        if arm == "ramp":
            m["targets"] = []
            for what, field, test, bound in M8_TARGETS:
                def meets(x, test=test, bound=bound):
                    return x < bound if test == "lt" else x == bound
                m["targets"].append(dict(what=what, value=m[field], met=meets(m[field]),
                                         rounds_met=sum(meets(r[field]) for r in rs)))
        out.append(m)
    return out


def render_m8(res, json_rel):
    m8, e = res["m8"], res["environment"]
    p = m8["parameters"]
    summary = m8_summary(m8["rows"])
    L = ["#### M8: a normal client beside a crowd of slowloris connections", ""]
    if res["parameters"].get("quick"):
        L += ["**Quick run**: single samples, not measurements to quote.", ""]
    L.append(f"- Command: `{res['command']}`")
    L.append(f"- Date: {res['date']}; artifact: [`{json_rel}`]({json_rel.replace('doc/', '')})")
    L.append(f"- m0: {e['m0']} at {e['m0_commit'][:12]}; machine: {e['cpu']}, {e['nproc']} "
             f"CPUs; load average (1 min) {e['loadavg_at_start']} at the start, "
             f"{e.get('loadavg_at_end')} at the end")
    L.append(f"- {p['rounds']} round(s), the arm order rotating; each server on "
             f"{p['threads']} threads or workers, unpinned, its bound on a request head "
             f"{p['timeout_ms'] / 1000:g} s (ramp `--header-timeout-ms`, nginx "
             "`client_header_timeout`, h2o `http1-request-timeout`). `contrib/bench/slowloris` "
             f"opens {p['slow']} connections, each sending one byte of an endless head every "
             f"{p['drip_ms']} ms, and beside them asks `/x/now` every {p['every_ms']} ms on a "
             "fresh connection, timed from its connect to the answer's last byte, on a thread "
             + ("that runs SCHED_FIFO" if all(m["probe_fifo"] for m in summary)
                else "that could not run SCHED_FIFO (the probe may wait for a CPU)"))
    L.append("")
    L.append("| arm | rounds | normal asked | failed | p50 ms | p99 ms | worst ms | worst of "
             "rounds ms | the worst's client wait ms | slow closed | 408 | late | slowest close "
             "s |")
    L.append("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for m in summary:
        L.append(f"| {m['arm']} | {m['rounds']} | {m['normal_n']} | {m['normal_failed']} | "
                 f"{ms(m['p50_us'])} | {ms(m['p99_us'])} | {ms(m['max_us'])} | "
                 f"{ms(m['max_us_worst'])} | "
                 f"{'–' if m['worst_runq_us'] < 0 else ms(m['worst_runq_us'])} | "
                 f"{m['slow_closed']}/{m['slow_n']} | {m['slow_408']} "
                 f"| {m['slow_late']} | "
                 f"{'–' if m['close_ms_max'] < 0 else format(m['close_ms_max'] / 1000, '.2f')} |")
    L.append("")
    L.append("*p50, p99, worst*: the normal client's, the median over the rounds. *late*: slow "
             "connections closed more than 1 s past the head bound after their first byte, or "
             "still open at the end (6 s past it). *slowest close*: the longest from a slow "
             "connection's first byte to its close, the median over the rounds (–: none "
             "closed). *the worst's client wait*: how long the normal client's own thread "
             "waited for a CPU during its worst answer (its `schedstat`), the median over the "
             "rounds: time in the worst answer that is the client's, not the server's.")
    L.append("")
    ramp = next((m for m in summary if m["arm"] == "ramp"), None)
    if ramp:
        L.append("M8's targets for ramp (the median over the rounds, and in how many "
                 "rounds the round's own figure met it):")
        L.append("")
        for t in ramp["targets"]:
            L.append(f"- {t['what']}: {'yes' if t['met'] else '**no**'} "
                     f"({t['rounds_met']}/{ramp['rounds']})")
        L.append("")
    notes = [x for x in res.get("anomalies", []) if x.startswith("M8")]
    if notes:
        L += ["Anomalies the run noted:", ""] + [f"- {x}" for x in notes] + [""]
    return "\n".join(L)


M1_TARGETS = (
    ("CPU/req ≤ 0.95× nginx's", "nginx", "cpu_us_per_req", "le", 0.95),
    ("CPU/req ≤ 0.95× h2o's", "h2o", "cpu_us_per_req", "le", 0.95),
    ("CPU/req ≤ 1.15× the floor's", "floor", "cpu_us_per_req", "le", 1.15),
    ("rps ≥ nginx's", "nginx", "rps", "ge", 1.0),
    ("rps ≥ h2o's", "h2o", "rps", "ge", 1.0),
    ("p99 ≤ nginx's", "nginx", "p99_us", "le", 1.0),
    ("p99 ≤ h2o's", "h2o", "p99_us", "le", 1.0),
    ("RSS < nginx's", "nginx", "rss_kib", "lt", 1.0),
    ("RSS < h2o's", "h2o", "rss_kib", "lt", 1.0),
)


# The metrics of a cell, and which way is worse.
M1_CELL_METRICS = (("rps", "rps", "lower"), ("CPU µs/req", "cpu_us_per_req", "higher"),
                   ("p99 ms", "p99_us", "higher"))


def m1_against_base(rows):
    """Every cell of ramp's (layout, endpoint, conns, metric) against the base build's ramp of
    the same rounds: the base's median and range over its rounds, ramp's median, the median of
    the within-round ratios, and whether ramp's median is worse than the base's worst round
    (worse past the spread: below its lowest rps, above its highest CPU or p99)."""
    keys = sorted({(r["layout"], r["endpoint"], r["conns"]) for r in rows
                   if r["arm"] == M1_BASE})
    out = []
    for lay, ep, c in keys:
        def of(arm, lay=lay, ep=ep, c=c):
            return {r["round"]: r for r in rows if r["arm"] == arm and
                    (r["layout"], r["endpoint"], r["conns"]) == (lay, ep, c)}
        head, base = of("ramp"), of(M1_BASE)
        both = sorted(set(head) & set(base))
        if not both:
            continue
        for label, f, worse in M1_CELL_METRICS:
            b = [base[i][f] for i in both]
            h = [head[i][f] for i in both]
            ratios = [head[i][f] / base[i][f] for i in both if base[i][f]]
            hm = statistics.median(h)
            past = hm < min(b) if worse == "lower" else hm > max(b)
            out.append(dict(layout=lay, endpoint=ep, conns=c, metric=label, field=f,
                            rounds=len(both), base_median=round(statistics.median(b), 3),
                            base_min=round(min(b), 3), base_max=round(max(b), 3),
                            head_median=round(hm, 3),
                            ratio=round(statistics.median(ratios), 3) if ratios else None,
                            worse_past_spread=past))
    return out


def render_against_base(cells, base):
    """The table of m1_against_base, and the count of cells worse past the spread."""
    L = [f"Ramp against the base build's ramp (`{M1_BASE}`: {base['version']} at "
         f"{(base['commit'] or 'an unknown commit')[:12]}, {base['source']}) in the same rounds, "
         "every cell of ramp's: the base's median and range over the rounds, ramp's median, the "
         "median of the within-round ratios, and whether ramp's median is worse than the base's "
         "worst round.", "",
         "| layout | endpoint | conns | metric | base: median (min–max) | ramp: median | "
         "ramp ÷ base | worse past the spread? |", "|---|---|--:|---|--:|--:|--:|---|"]

    def v(x, f):
        return ms(x) if f == "p99_us" else f"{x:.0f}" if f == "rps" else f"{x:.2f}"
    for x in cells:
        f = x["field"]
        L.append(f"| {x['layout']} | {ENDPOINTS[x['endpoint']]} | {x['conns']} | {x['metric']} "
                 f"| {v(x['base_median'], f)} ({v(x['base_min'], f)}–{v(x['base_max'], f)}) | "
                 f"{v(x['head_median'], f)} | "
                 f"{'n/a' if x['ratio'] is None else format(x['ratio'], '.3f')} | "
                 f"{'**yes**' if x['worse_past_spread'] else 'no'} |")
    n = sum(x["worse_past_spread"] for x in cells)
    L += ["", f"Cells worse past the spread: {n} of {len(cells)}.", ""]
    return L


def render_targets(ratios):
    """Each SPEC M1 target against the median of the within-round ratios, /x/now."""
    cells = sorted({(r["layout"], r["conns"]) for r in ratios if r["endpoint"] == "now"},
                   key=lambda x: (x[0] != "pinned", x[1]))
    if not cells:
        return []
    L = ["SPEC M1's targets against this run (`/x/now`; each cell is the median ramp ÷ peer "
         "ratio of the rounds, whether it meets the target, and in how many of the rounds "
         "the round's own ratio met it):", ""]
    L.append("| target | " + " | ".join(f"{lay} c={c}" for lay, c in cells) + " | met |")
    L.append("|---|" + "--:|" * len(cells) + "---|")
    for what, peer, field, test, bound in M1_TARGETS:
        def meets(x, test=test, bound=bound):
            return {"le": x <= bound, "ge": x >= bound, "lt": x < bound}[test]
        out, ok = [], []
        for lay, c in cells:
            r = next((x for x in ratios if (x["layout"], x["conns"], x["peer"], x["endpoint"])
                      == (lay, c, peer, "now")), None)
            v = r and r[f"ramp_over_peer_{field}"]
            if v is None:
                out.append("n/a")
                continue
            ok.append(meets(v))
            out.append(target_cell(v, (r.get("by_round") or {}).get(field), meets))
        verdict = ("n/a" if not ok else "yes" if all(ok) else "**no**" if not any(ok)
                   else f"**partly** ({sum(ok)} of {len(ok)})")
        L.append(f"| {what} | " + " | ".join(out) + f" | {verdict} |")
    L.append("")
    return L


def target_cell(value, rounds, meets, digits=2):
    """A target's cell: the median ratio, whether it meets the target, and in how many of the
    rounds the round's own ratio met it ("0.99 yes (5/5)")."""
    of = f" ({sum(map(meets, rounds))}/{len(rounds)})" if rounds else ""
    return f"{value:.{digits}f} {'yes' if meets(value) else '**no**'}{of}"


def render_parallel(par, a):
    L = ["#### Parallel compute: host_parallel `/ser` against `/par` (issue 8)", ""]
    n = a["parallel"]["alone_requests"]
    L.append(f"One job is 64 items × 100,000 square roots. *Alone*: {n} "
             "requests one after another on one connection, nothing else running on the "
             "server; the median of the time the handler reported (`ser=<µs>` / `par=<µs>`) "
             "and of the wall time from sending the request to its last byte, and the "
             "fastest handler time of all the rounds (the request other work disturbed "
             "least). *8 clients*: "
             f"`wrk -t1 -c8` for {a['duration_s']} s, closed loop, nothing pinned; the handler "
             "column is the median of the times the handlers reported under that load. "
             "Compute *default*: `M0_COMPUTE_THREADS` unset (one thread per CPU); *inline*: "
             "`M0_COMPUTE_THREADS=0`, the control, where `/par` runs its items on the "
             "calling thread. Medians over the rounds.")
    L.append("")
    L.append("| loops | pool / loop | compute | route | alone: handler ms | alone: wall ms | "
             "alone: fastest ms | 8 clients: rps | p50 ms | p99 ms | handler p50 ms | "
             "server CPU ms/req | errors | other CPU |")
    L.append("|--:|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    summary = Bench.parallel_summary(par["rows"])  # from the rows, so a fix here applies
    for m in summary:
        comp = (f"default ({m['compute_threads']} threads)" if m["compute"] == "default"
                else "inline (0)")
        L.append(f"| {m['loops']} | {m['blocking']} | {comp} | /{m['route']} | "
                 f"{ms(m['alone_handler_us'])} | {ms(m['alone_wall_us'])} | "
                 f"{ms(m['alone_handler_min_us'])} | {m['rps']:.1f} | "
                 f"{ms(m['p50_us'])} | {ms(m['p99_us'])} | {ms(m['handler_p50_us'])} | "
                 f"{ms(m['cpu_us_per_req'])} | {m['errors_total']} | "
                 f"{m['other_cpu_share'] * 100:.0f}% |")
    L.append("")
    L.append("`/par` ÷ `/ser` on the same server in the same round, median over the rounds "
             "(*fastest*: the fastest `/par` ÷ the fastest `/ser` of the arm; below 1 in the "
             "wall, fastest, p99 and CPU columns: `/par` took less; above 1 in rps: `/par` "
             "served more):")
    L.append("")
    L.append("| loops | pool / loop | compute | alone: wall | alone: fastest | 8 clients: rps | "
             "p99 | CPU/req |")
    L.append("|--:|--:|---|--:|--:|--:|--:|--:|")
    f = lambda v: "n/a" if v is None else f"{v:.2f}"  # noqa: E731
    for m in summary:
        if m["route"] != "par":
            continue
        L.append(f"| {m['loops']} | {m['blocking']} | {m['compute']} | "
                 f"{f(m['par_over_ser_alone_wall_us'])} | "
                 f"{f(m['par_over_ser_alone_handler_min_us'])} | {f(m['par_over_ser_rps'])} | "
                 f"{f(m['par_over_ser_p99_us'])} | {f(m['par_over_ser_cpu_us_per_req'])} |")
    L.append("")
    return L


# --------------------------------------------------------------- placement (wide layout)

PLACEMENT_EVENTS = ",".join("syscalls:sys_enter_" + c for c in
                            ("read", "recvfrom", "write", "writev", "sendto"))
PERF_LINE = re.compile(r"^\s*(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+syscalls:sys_enter_(\w+):"
                       r"\s+fd: (0x[0-9a-f]+)")


def socket_owners(port, server_pids, wrk_pid):
    """(pid, fd) -> the client's port, for each established connection to `port`, on the server
    side (the processes in server_pids) and on wrk's, from `ss -tnp`."""
    out = subprocess.run(["ss", "-tnpH", "state", "established"], capture_output=True,
                         text=True, timeout=30).stdout
    owners = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) < 4:
            continue
        local, peer = f[2], f[3]
        for m in re.finditer(r"pid=(\d+),fd=(\d+)", line):
            pid, fd = int(m.group(1)), int(m.group(2))
            if pid in server_pids and local.endswith(f":{port}"):
                owners[(pid, fd)] = ("server", peer.rsplit(":", 1)[1])
            elif pid == wrk_pid and peer.endswith(f":{port}"):
                owners[(pid, fd)] = ("client", local.rsplit(":", 1)[1])
    return owners


def pairing(script, owners, server_threads=0):
    """From `perf script` lines of socket calls: the connections per (server thread, wrk
    thread), the share of connections on the server thread that holds most of its wrk thread's
    (grouped), and the share of hops (a request from wrk to the server, an answer back) whose
    receive ran on the CPU its send ran on (same_cpu). Server threads that served none of the
    connections are rows of zeros, up to `server_threads`."""
    events = {}  # client port -> [(time, side, sends, tid, cpu)]
    tids = {}    # (side, client port) -> Counter of tids
    for line in script.splitlines():
        m = PERF_LINE.match(line)
        if not m:
            continue
        key = owners.get((int(m.group(1)), int(m.group(6), 16)))
        if not key:
            continue
        side, cport = key
        tid, cpu, t = int(m.group(2)), int(m.group(3)), float(m.group(4))
        sends = m.group(5) not in ("read", "recvfrom")
        events.setdefault(cport, []).append((t, side, sends, tid, cpu))
        c = tids.setdefault(key, {})
        c[tid] = c.get(tid, 0) + 1
    cells = {}
    same = hops = 0
    for cport, evs in events.items():
        st, ct = tids.get(("server", cport)), tids.get(("client", cport))
        if not st or not ct:
            continue
        cell = (max(st, key=st.get), max(ct, key=ct.get))
        cells[cell] = cells.get(cell, 0) + 1
        last_send = {}
        for t, side, sends, tid, cpu in sorted(evs):
            if sends:
                last_send[side] = cpu
            else:
                other = "client" if side == "server" else "server"
                if other in last_send:
                    hops += 1
                    same += last_send[other] == cpu
    srv = sorted({s for s, _ in cells})
    cli = sorted({c for _, c in cells})
    matrix = [[cells.get((s, c), 0) for c in cli] for s in srv]
    matrix += [[0] * len(cli) for _ in range(server_threads - len(srv))] if cli else []
    total = sum(cells.values())
    grouped = sum(max(row[j] for row in matrix) for j in range(len(cli))) if matrix else 0
    return dict(matrix=matrix, grouped=round(grouped / total, 2) if total else None,
                same_cpu=round(same / hops, 2) if hops else None, hops=hops)


def spearman(xs, ys):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    if len(xs) < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sx = sum((a - mx) ** 2 for a in rx) ** 0.5
    sy = sum((b - my) ** 2 for b in ry) ** 0.5
    return round(sxy / (sx * sy), 2) if sx and sy else None


def placement_summary(rows):
    """Per server: the medians; over every run: how rps and p99, each divided by the median
    of its round (so that rounds on a busier machine compare), follow the same-CPU share."""
    per = []
    for arm in PLACEMENT_ARMS:
        r = [x for x in rows if x["arm"] == arm]
        if not r:
            continue
        sc = [x["same_cpu"] for x in r if x["same_cpu"] is not None]
        gr = [x["grouped"] for x in r if x["grouped"] is not None]
        per.append(dict(arm=arm, runs=len(r), rps=statistics.median(x["rps"] for x in r),
                        p99_us=statistics.median(x["p99_us"] for x in r),
                        same_cpu=round(statistics.median(sc), 2) if sc else None,
                        grouped=round(statistics.median(gr), 2) if gr else None))
    rel = []
    for rnd in sorted({x["round"] for x in rows}):
        r = [x for x in rows if x["round"] == rnd]
        mr = statistics.median(x["rps"] for x in r)
        mp = statistics.median(x["p99_us"] for x in r)
        rel += [(x["same_cpu"], x["rps"] / mr, x["p99_us"] / mp) for x in r
                if x["same_cpu"] is not None]
    out = dict(per_server=per, runs=len(rel))
    if rel:
        out["spearman_same_cpu_rps"] = spearman([x[0] for x in rel], [x[1] for x in rel])
        out["spearman_same_cpu_p99"] = spearman([x[0] for x in rel], [x[2] for x in rel])
        hi = [x for x in rel if x[0] >= 0.75]
        lo = [x for x in rel if x[0] < 0.5]
        for name, part in (("high", hi), ("low", lo)):
            out[f"{name}_runs"] = len(part)
            for i, what in ((1, "rps"), (2, "p99")):
                out[f"{name}_{what}_rel"] = (round(statistics.median(x[i] for x in part), 2)
                                             if part else None)
    return out


def render_placement(res, json_rel):
    pl = res["placement"]
    e = res["environment"]
    a = res["parameters"]
    L = ["#### Placement: the wide layout, run by run", ""]
    L.append(f"- Command: `{res['command']}`")
    L.append(f"- Date: {res['date']}; artifact: [`{json_rel}`]({json_rel.replace('doc/', '')})")
    L.append(f"- m0: {e['m0']} at {e['m0_commit'][:12]}; {e['nproc']} CPUs, kernel "
             f"{e['kernel']}; {a['rounds']} round(s) × {a['duration_s']} s, "
             f"`wrk -t{a['wide_wrk_threads']}`, nothing pinned")
    L.append("")
    L.append("*connections*: how many connections each server thread (row) serves for each wrk "
             "thread (column), from `ss` and the threads that made the socket calls. "
             "*grouped*: the share of connections on the server thread that holds most of "
             "their wrk thread's. *same CPU*: the share of hops (a request from wrk to the "
             "server, an answer back) whose receive ran on the CPU its send ran on, from "
             "`perf record` of the socket calls of both sides for one second mid-run. "
             "*ramp-race*: ramp with `M0_ACCEPT_SHARE=0`, each connection taken by whichever "
             "loop wins the kernel's race, as nginx's workers and h2o's threads take theirs: "
             "the same code as *ramp*, placed the peers' way.")
    L.append("")
    L.append("| round | server | conns | rps | p50 ms | p99 ms | connections | grouped | "
             "same CPU |")
    L.append("|--:|---|--:|--:|--:|--:|---|--:|--:|")
    for x in pl["rows"]:
        m = " / ".join(" ".join(str(v) for v in row) for row in x["matrix"] or [])
        L.append(f"| {x['round'] + 1} | {x['arm']} | {x.get('conns', 16)} | {x['rps']:.0f} | "
                 f"{ms(x['p50_us'])} | {ms(x['p99_us'])} | {m or 'n/a'} | {x['grouped']} | "
                 f"{x['same_cpu']} |")
    L.append("")
    summaries = pl["summary"]
    if "per_server" in summaries:  # an artifact of one connection count (16)
        summaries = {"16": summaries}
    L.append("| server | conns | runs | median rps | median p99 ms | median grouped | "
             "median same CPU |")
    L.append("|---|--:|--:|--:|--:|--:|--:|")
    for conns, s in summaries.items():
        for x in s["per_server"]:
            L.append(f"| {x['arm']} | {conns} | {x['runs']} | {x['rps']:.0f} | "
                     f"{ms(x['p99_us'])} | {x['grouped']} | {x['same_cpu']} |")
    L.append("")
    for conns, s in summaries.items():
        if not s.get("runs"):
            continue

        def part(name, what):
            n = s[f"{name}_runs"]
            if not n:
                return f"no run had a same-CPU share {what}"
            return (f"the {n} run(s) with a same-CPU share {what} served a median "
                    f"{s[f'{name}_rps_rel']}× their round's median rps, at "
                    f"{s[f'{name}_p99_rel']}× its p99")
        L.append(f"At {conns} connections, over all {s['runs']} runs, each run's rps and p99 "
                 f"divided by the median of its round: Spearman's rank correlation with the "
                 f"same-CPU share is {s['spearman_same_cpu_rps']} for rps and "
                 f"{s['spearman_same_cpu_p99']} for p99; {part('high', 'of 0.75 or more')}; "
                 f"{part('low', 'below 0.5')}.")
        L.append("")
    return "\n".join(L)


PLACEMENT_BEGIN = ("<!-- bench:placement:begin (written by contrib/bench/run --only placement; "
                   "edits here are replaced) -->")
PLACEMENT_END = "<!-- bench:placement:end -->"


# ---------------------------------------------------------------- M7: what features cost

# One arm of M7 (SPEC M7): a server run in every round beside the others, its CPU per request
# set against its reference arm's of the same round. Adding a feature's arm is adding a row.
#   name, label  the arm's key, and what the document says it is
#   build        "head": the build under test (--build); "base": the build --m7-base names
#   app          the program in the build's apps/
#   flags, env   added to M7_FLAGS and to the environment; "{aux_port}" in a value is a second
#                free port, chosen at each start
#   path         what wrk asks for, and what must answer 200 before the load
#   ref, target  the reference arm, and the bound on this arm's CPU/req ÷ the reference's
#   needs        what a build may lack; an arm whose needs are not met is not run, and the
#                document says why: "reads:VAR", the app's binary holds the name VAR (it reads
#                the variable); "knob:VAR", the host's doctor lists a knob VAR; "journald", a
#                journald of its own (contrib/bench/journald-ns) with the server's output
#                connected to it. The doctor must also accept the arm's flags and environment.
#   probe        a path that must answer 200 on {aux_port} once the arm answers on its own
M7Arm = collections.namedtuple("M7Arm", "name label build app flags env path ref target needs "
                               "probe paced", defaults=((), None, False))
M7_ARMS = (
    M7Arm("head", "ramp as built", "head", "ramp", (), {}, "/x/now", "base", 1.02),
    M7Arm("base", "ramp of the base build", "base", "ramp", (), {}, "/x/now", None, None),
    M7Arm("routes-3", "ramp's own routes, T1's reference", "head", "ramp", (),
          {"M0_RAMP_EXTRA_ROUTES": "0"}, "/x/now", None, None, ("reads:M0_RAMP_EXTRA_ROUTES",)),
    M7Arm("routes-200", "197 routes more, T1", "head", "ramp", (),
          {"M0_RAMP_EXTRA_ROUTES": "197"}, "/x/now", "routes-3", 1.03,
          ("reads:M0_RAMP_EXTRA_ROUTES",)),
    M7Arm("metrics-on", "metrics on a socket of their own, O1", "head", "ramp", (),
          {"M0_METRICS": "127.0.0.1:{aux_port}"}, "/x/now", "head", 1.01, ("knob:M0_METRICS",),
          "/metrics"),
    M7Arm("access-log-journal", "the access log to the journal, as fast as wrk asks", "head",
          "ramp", (), {"M0_ACCESS_LOG": "journal"}, "/x/now", "head", None, ("journald",)),
    # O2 at one request rate (--m7-rate): its journald on the server's CPU halves the rate the
    # arm above reaches, and at half the rate the same request costs more (D104).
    M7Arm("head-paced", "ramp as built, paced", "head", "ramp", (), {}, "/x/now", None, None,
          ("h2load",), None, True),
    M7Arm("access-log-paced", "the access log to the journal, paced, O2", "head", "ramp", (),
          {"M0_ACCESS_LOG": "journal"}, "/x/now", "head-paced", 1.10, ("journald", "h2load"),
          None, True),
)
# Every arm's command line, as M1's ramp: one loop, no keep-alive cap (+ --blocking-threads).
M7_FLAGS = ("--threads", "1", "--max-keepalive-requests", "0")
M7_BEGIN = ("<!-- bench:m7:begin (written by contrib/bench/run --only m7; edits here are "
            "replaced) -->")
M7_END = "<!-- bench:m7:end -->"


def m7_plan(arms, names, have_base, why_not):
    """(the arms to run, in table order; [(arm, why)] for the others). `names` (None: every arm)
    and the references of those named, transitively, are wanted; of those, an arm of the base
    build does not run without a base build, nor one for which why_not(arm) gives a reason."""
    by = {x.name: x for x in arms}
    want = set(names or by)
    todo = list(want)
    while todo:
        ref = by[todo.pop()].ref
        if ref and ref not in want:
            want.add(ref)
            todo.append(ref)
    run, skipped = [], []
    for arm in arms:
        if arm.name not in want:
            continue
        why = "no --m7-base given" if arm.build == "base" and not have_base else why_not(arm)
        if why:
            skipped.append((arm, why))
        else:
            run.append(arm)
    return run, skipped


def m7_summary(rows, arms):
    """Per arm that ran (dicts of M7Arm's fields, in table order): the medians over its rounds
    and, against its reference, each round's CPU/req ÷ the reference's CPU/req of the same round,
    the median of those ratios and how many rounds met the target."""
    out = []
    for arm in arms:
        rs = sorted((r for r in rows if r["arm"] == arm["name"]), key=lambda r: r["round"])
        if not rs:
            continue
        m = dict(arm=arm["name"], label=arm["label"], build=arm["build"], path=arm["path"],
                 flags=arm["flags"], env=arm["env"], rounds=len(rs),
                 ref=arm["ref"], target=arm["target"],
                 errors_total=sum(r["errors_total"] for r in rs))
        for f in ("cpu_us_per_req", "rps", "p99_us", "other_cpu_share",
                  "journald_cpu_us_per_req", "journal_entries"):
            v = [r[f] for r in rs if r.get(f) is not None]
            m[f] = round(statistics.median(v), 3) if v else None
        m["other_cpu_max"] = max(r["other_cpu_share"] for r in rs)
        cpu, rps = [], []
        for r in rs:
            base = next((x for x in rows if x["arm"] == arm["ref"] and x["round"] == r["round"]),
                        None)
            if base and base["cpu_us_per_req"] and base["rps"]:
                cpu.append(round(r["cpu_us_per_req"] / base["cpu_us_per_req"], 4))
                rps.append(round(r["rps"] / base["rps"], 4))
        m["cpu_ratio_by_round"] = cpu
        m["cpu_ratio"] = round(statistics.median(cpu), 4) if cpu else None
        m["rps_ratio"] = round(statistics.median(rps), 4) if rps else None
        m["met"] = sum(x <= arm["target"] for x in cpu) if cpu and arm["target"] else None
        out.append(m)
    return out


def journald_argv(jdir):
    """The command line that runs what follows it beside a journald of its own, keeping the
    journal in `jdir` (contrib/bench/journald-ns, in a mount namespace of its own)."""
    return ["unshare", "--mount", "--propagation", "private", sys.executable,
            os.path.join(HERE, "journald-ns"), jdir, "--"]


def read_pid(d, name):
    with open(os.path.join(d, name)) as f:
        return int(f.read())


def run_time_s(root):
    """CPU seconds the live threads of root's process tree have run: the time M1 reads from
    /proc/<pid>/stat in clock ticks, read here in nanoseconds from each thread's schedstat,
    since M7's slices are short enough for a tick to matter. Ticks where there is no
    schedstat (a kernel without CONFIG_SCHED_INFO)."""
    if not os.path.exists("/proc/self/schedstat"):
        return cpu_seconds(root)
    total = 0
    for pid in tree(root)[0]:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass  # a thread that ended in between
    return total / 1e9


def m7_row(slices, nproc):
    """An arm's row of a round from its slices: requests, times and CPU added up (CPU per
    request is the server's CPU over all its slices ÷ all their requests), p50 and p99 the
    median of the slices' own, *other CPU* the share of the machine's CPU in the slices that
    neither the server, wrk nor the arm's journald used; each slice's own figures too."""
    for x in slices:
        x["other_s"] = max(0.0, x["busy_s"] - x["cpu_s"] - x["client_cpu_s"] -
                           x["journald_cpu_s"])
    n = max(sum(x["requests"] for x in slices), 1)
    secs = sum(x["duration_s"] for x in slices)
    cpu = sum(x["cpu_s"] for x in slices)
    jcpu = sum(x["journald_cpu_s"] for x in slices)
    row = dict(slices=len(slices), requests=n, duration_s=round(secs, 3),
               rps=round(n / secs, 1) if secs else 0.0, server_cpu_s=round(cpu, 6),
               cpu_us_per_req=round(cpu * 1e6 / n, 4),
               client_cpu_us_per_req=round(sum(x["client_cpu_s"] for x in slices) * 1e6 / n, 3),
               p50_us=statistics.median(x["p50_us"] for x in slices),
               p99_us=statistics.median(x["p99_us"] for x in slices),
               errors_total=sum(x["errors"] for x in slices),
               other_cpu_share=round(sum(x["other_s"] for x in slices) / (secs * nproc), 3)
               if secs else 0.0,
               by_slice=[dict(requests=x["requests"], p99_us=x["p99_us"],
                              cpu_us_per_req=round(x["cpu_s"] * 1e6 / max(x["requests"], 1), 3),
                              other_cpu_share=round(x["other_s"] / (x["duration_s"] * nproc), 3)
                              if x["duration_s"] else 0.0) for x in slices])
    if jcpu:
        row["journald_cpu_us_per_req"] = round(jcpu * 1e6 / n, 3)
    return row


def libm0_not_of(pid, build):
    """Why the server `pid` does not run the libm0 of the build directory `build` (a sentence),
    or None: it mapped one from elsewhere, or none although the build has a shared one (its
    .libs). A server of a base build that loaded the head's libm0 would measure the head twice."""
    libs = os.path.realpath(os.path.join(build, ".libs"))
    lib = mapped_libm0(pid)
    if lib is None:
        return f"the server mapped no libm0, not the build's in {libs}" if os.path.isdir(
            libs) else None
    if not os.path.realpath(lib).startswith(libs + "/"):
        return f"the server mapped {lib}, not its build's library in {libs}"
    return None


def mapped_libm0(pid):
    """The path of the libm0 the process `pid` mapped, or None."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                path = line.split(None, 5)[-1].strip()
                if "/libm0.so" in path:
                    return path
    except OSError:
        pass
    return None


def journal_entries(jdir, path):
    """How many entries the journal in `jdir` holds with M0_PATH=`path`, or None."""
    try:
        r = subprocess.run(["journalctl", "--no-pager", "-D", jdir, f"M0_PATH={path}", "-o",
                            "cat", "--output-fields=M0_PATH"], capture_output=True, text=True,
                           timeout=600)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.count("\n") if r.returncode == 0 else None


def m7_what(arm):
    """An arm's label, with what its command line and environment add to every arm's."""
    extra = list(arm.get("flags") or ()) + [f"{k}={v}" for k, v in (arm.get("env") or {}).items()]
    return arm["label"] + (f" (`{' '.join(extra)}`)" if extra else "")


def render_m7(res, json_rel):
    m7, e = res["m7"], res["environment"]
    p = m7["parameters"]
    summary = m7_summary(m7["rows"], m7["arms"])  # from the rows, so a fix here applies
    L = ["#### M7: what features cost, `/x/now` CPU per request in the same rounds", ""]
    if res["parameters"].get("quick"):
        L += ["**Quick run**: single samples, not measurements to quote.", ""]
    busy = max((r["other_cpu_share"] for r in m7["rows"]), default=0)
    if busy > 0.3:
        L += [f"**Other work shared the machine**: up to {busy * 100:.0f}% of its CPU went "
              "neither to the server nor to wrk during a run (*other CPU*). Read the ratios "
              "within the rounds, and their count of rounds, rather than the CPU columns.", ""]
    L.append(f"- Command: `{res['command']}`")
    L.append(f"- Date: {res['date']}; artifact: [`{json_rel}`]({json_rel.replace('doc/', '')})")
    L.append(f"- head: {e['m0']} at {e['m0_commit'][:12]} ({e['m0_source']})")
    b = m7["builds"].get("base")
    if b:
        L.append(f"- base: {b['version']} at {(b['commit'] or 'an unknown commit')[:12]} "
                 f"({b['source']})")
    L.append(f"- Machine: {e['cpu']}, {e['nproc']} CPUs, kernel {e['kernel']}; load average "
             f"(1 min) {e['loadavg_at_start']} at the start, {e.get('loadavg_at_end')} at the end")
    turns = (f"the arms take turns in {p['slice_s']} s slices (the order reversed every other "
             f"slice) until each has had {p['duration_s']} s" if p.get("slice_s") else
             f"each runs {p['duration_s']} s in turn")
    paced = (f"; the paced arms `h2load --h1 -t1 -c{p['conns']}` at {p['rate']} requests a "
             "second in all" if any(m.get("paced") for m in m7["arms"]) else "")
    L.append(f"- {p['rounds']} round(s); in each, every arm is started fresh and warmed up "
             f"{p['warmup_s']} s, then {turns}; the arm order rotates by one from round to "
             f"round. `wrk -t1 -c{p['conns']}` on CPU {p['client_cpu']}{paced}, each server's "
             f"process tree on CPU {p['server_cpu']}, `{p['flags']}`")
    L.append("")
    if summary:
        L.append("| arm | what | rounds | server CPU µs/req | rps | p99 ms | errors | other CPU "
                 "| against | CPU/req ÷ reference | target | rps ÷ reference |")
        L.append("|---|---|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|")
        for m in summary:
            if m["cpu_ratio"] is None:
                cell = "n/a" if m["ref"] else "–"
            elif m["target"]:
                cell = target_cell(m["cpu_ratio"], m["cpu_ratio_by_round"],
                                   lambda x, t=m["target"]: x <= t, 3)
            else:
                cell = f"{m['cpu_ratio']:.3f}"
            L.append(f"| {m['arm']} | {m7_what(m)} | {m['rounds']} | "
                     f"{m['cpu_us_per_req']:.2f} | {m['rps']:.0f} | {ms(m['p99_us'])} | "
                     f"{m['errors_total']} | {m['other_cpu_share'] * 100:.0f}% | "
                     f"{m['ref'] or '–'} | {cell} | "
                     f"{'≤ ' + format(m['target'], '.2f') if m['target'] else '–'} | "
                     f"{'–' if m['rps_ratio'] is None else format(m['rps_ratio'], '.3f')} |")
        L.append("")
        L.append("*server CPU µs/req*: as M1's, the CPU time of the server's process tree ÷ "
                 "the requests it served, over all its slices of a round; the median over the "
                 "rounds. *CPU/req ÷ reference*: in each round, this arm's CPU per request ÷ "
                 "its reference arm's in the same round; the cell is the median of those "
                 "ratios, whether it meets the target, and in how many rounds the round's own "
                 "ratio met it. *p99*: the median of the slices' own. *other CPU*: as M1's, the "
                 "share of the machine's CPU that neither the server nor wrk used.")
        L.append("")
        rounds = max(m["rounds"] for m in summary)
        ratioed = [m for m in summary if m["cpu_ratio_by_round"]]
        if ratioed:
            L.append("| CPU/req ÷ reference | " + " | ".join(f"round {i + 1}"
                                                          for i in range(rounds)) + " |")
            L.append("|---|" + "--:|" * rounds)
            for m in ratioed:
                by = [f"{x:.3f}" for x in m["cpu_ratio_by_round"]]
                L.append(f"| {m['arm']} ÷ {m['ref']} | " + " | ".join(
                    by + [""] * (rounds - len(by))) + " |")
            L.append("")
        for m in summary:
            if m["journald_cpu_us_per_req"] is not None:
                n = m["journal_entries"]
                L.append(f"- {m['arm']}: journald used {m['journald_cpu_us_per_req']:.2f} µs of "
                         "CPU per request beside the server's (not in the server's figure); its "
                         f"journal held {'n/a' if n is None else f'{n:.0f}'} entries with "
                         f"`M0_PATH={m['path']}` (median per round).")
    for x in m7["skipped"]:
        L.append(f"- Not run: **{x['name']}**, {m7_what(x)}: {x['why']}.")
    notes = [x for x in res.get("anomalies", []) if x.startswith("M7")]
    if m7["skipped"] or notes:
        L.append("")
    if notes:
        L += ["Anomalies the run noted:", ""] + [f"- {x}" for x in notes] + [""]
    return "\n".join(L)


# ---------------------------------------------------------------- M11, M12


def m11_summary(rows):
    """M11's medians per arm, over the rounds whose fan-out reached every follower (the echo's
    over every round that had one), and each target's ratio within each round (m0-ws's CPU per
    delivered message ÷ the reference's of the same round), their median and whether it meets
    the bound; the echo's m0-ws ÷ node-ws ratios too, without a target."""
    whole = [r for r in rows if r.get("every_message") and r.get("fanout_us_per_msg")]
    med = {}
    for arm in M11_ARMS:
        rs = [r for r in rows if r["arm"] == arm]
        if not rs:
            continue
        good = [r for r in whole if r["arm"] == arm]
        m = dict(arm=arm, rounds=len(rs), rounds_whole=len(good),
                 followers=max(r["followers"] for r in rs),
                 fanout_by_round=[r["fanout_us_per_msg"] for r in good])
        for f in ("fanout_us_per_msg", "connect_ms", "fanout_user_us_per_msg",
                  "fanout_sys_us_per_msg"):
            v = [r[f] for r in good if r.get(f) is not None]
            m[f] = round(statistics.median(v), 4) if v else None
        echo = [r for r in rs if r.get("echoes")]
        for f in ("echo_open", "echo_rate", "echo_p50_us", "echo_p99_us", "echo_cpu_us",
                  "echo_client_cpu_share"):
            m[f] = round(statistics.median(r[f] for r in echo), 3) if echo else None
        med[arm] = m

    def by_round(arm, ref, field, pool):
        out = []
        for r in pool:
            x = [y for y in pool if y["arm"] == ref and y["round"] == r["round"]]
            if r["arm"] == arm and x and x[0].get(field):
                out.append(round(r[field] / x[0][field], 3))
        return out
    ratios = []
    for arm, ref, bound, what in M11_TARGETS:
        v = by_round(arm, ref, "fanout_us_per_msg", whole)
        m = round(statistics.median(v), 3) if v else None
        ratios.append(dict(arm=arm, ref=ref, field="fanout_us_per_msg", bound=round(bound, 4),
                           what=what, by_round=v, median=m,
                           meets=None if m is None else m <= bound))
    echoed = [r for r in rows if r.get("echoes")]
    for field in ("echo_cpu_us", "echo_p99_us"):
        v = by_round("m0-ws", "node-ws", field, echoed)
        ratios.append(dict(arm="m0-ws", ref="node-ws", field=field, bound=None, what=None,
                           by_round=v, median=round(statistics.median(v), 3) if v else None,
                           meets=None))
    # Against the floor (when it ran): each arm ÷ floor-ws, and floor-ws ÷ node-ws, which says
    # whether any server could spend ⅓ of Node's; no target.
    pairs = [(arm, M11_FLOOR, "fanout_us_per_msg", whole) for arm in ("m0-ws", "m0-sse",
                                                                       "node-ws")]
    pairs += [(M11_FLOOR, "node-ws", "fanout_us_per_msg", whole)]
    pairs += [(arm, M11_FLOOR, "echo_cpu_us", echoed) for arm in ("m0-ws", "node-ws")]
    pairs += [(M11_FLOOR, "node-ws", "echo_cpu_us", echoed)]
    for arm, ref, field, pool in pairs:
        v = by_round(arm, ref, field, pool)
        if v:
            ratios.append(dict(arm=arm, ref=ref, field=field, bound=None, what=None,
                               by_round=v, median=round(statistics.median(v), 3), meets=None,
                               floor=True))
    return med, ratios


def m12_summary(rows):
    """M12's medians per cell and server over the rounds, and m0 ÷ each peer within each round
    (CPU per request and bytes per request), their medians, and for the files' cells whether
    the CPU's median meets SF5's 0.95; and each server ÷ the floor, where it ran, without a
    target."""
    med = []
    for cell in M12_CELLS:
        for arm in M12_ARMS:
            rs = [r for r in rows if (r["cell"], r["arm"]) == (cell, arm)]
            if not rs:
                continue
            m = dict(cell=cell, arm=arm, rounds=len(rs),
                     errors_total=sum(r["errors_total"] for r in rs),
                     body_bytes=rs[0].get("body_bytes"),
                     cpu_by_round=[r["cpu_us_per_req"] for r in rs])
            for f in ("rps", "cpu_us_per_req", "bytes_per_req", "p99_us", "other_cpu_share"):
                m[f] = round(statistics.median(r[f] for r in rs), 3)
            med.append(m)
    ratios = []
    for cell in M12_CELLS:
        for arm, peer in M12_RATIOS:
            cpu, size = [], []
            for r in rows:
                if (r["cell"], r["arm"]) != (cell, arm):
                    continue
                x = [y for y in rows if (y["cell"], y["arm"], y["round"]) ==
                     (cell, peer, r["round"])]
                if x and x[0]["cpu_us_per_req"]:
                    cpu.append(round(r["cpu_us_per_req"] / x[0]["cpu_us_per_req"], 3))
                    size.append(round(r["bytes_per_req"] / x[0]["bytes_per_req"], 3))
            if not cpu:
                continue
            target = None if cell == "json" or peer == "floor" else M12_TARGET
            m = round(statistics.median(cpu), 3)
            ratios.append(dict(cell=cell, arm=arm, peer=peer, cpu_by_round=cpu, cpu_median=m,
                               bytes_median=round(statistics.median(size), 3), target=target,
                               meets=None if target is None else m <= target))
    return med, ratios


M11_BEGIN = ("<!-- bench:m11:begin (written by contrib/bench/run --only m11; edits here are "
             "replaced) -->")
M11_END = "<!-- bench:m11:end -->"
M12_BEGIN = ("<!-- bench:m12:begin (written by contrib/bench/run --only m12; edits here are "
             "replaced) -->")
M12_END = "<!-- bench:m12:end -->"


def run_line(res, json_rel):
    """Which run a block comes from: its date, the exact command, the commit, the artifact."""
    env = res["environment"]
    commit = (env.get("m0_commit") or "?")[:12]
    return (f"Run of {res['date']}: `{res['command']}`, m0 at {commit} "
            f"({env.get('m0_source')}), {res['parameters']['rounds']} interleaved rounds, the "
            f"order rotating; artifact [`{json_rel}`]({os.path.relpath(json_rel, 'doc')}).")


def rounds_cell(v, by, digits=2, unit=""):
    if v is None:
        return "n/a"
    return f"**{v:.{digits}f}{unit}** ({', '.join(f'{x:.{digits}f}' for x in by)})"


def render_m11(res, json_rel):
    m = res["m11"]
    med = m["medians"]
    L = ["#### M11: WebSocket, fan-out and echo (SPEC WS7)", "", run_line(res, json_rel), "",
         f"Fan-out: {m['followers']} connections follow one channel, and {m['messages']} "
         "messages are published one at a time, each when the one before reached every "
         "connection; the server's CPU (every thread's `schedstat`) from the first publish to "
         "the last delivery, less its idle rate, ÷ the messages delivered; user and system apart "
         "from `/proc/<pid>/stat`'s clock ticks over the same span (the medians of the rounds). "
         "A round counts when every connection got every message.", "",
         "| arm | what follows | rounds whole | CPU per delivered message, µs (median; the "
         "rounds) | of which user · system, µs | connecting, ms |", "|---|---|--:|---|--:|--:|"]
    what = {"m0-ws": "bench_app `/follow`, WebSocket", "m0-sse": "bench_app `/events`, event "
            "stream", "node-ws": "ws-node.js `/follow`, Node `ws`",
            M11_FLOOR: "wsfloor.c `/follow`: one `write()` of one frame to each socket"}
    for arm in M11_ARMS:
        x = med.get(arm)
        if not x and arm == M11_FLOOR:
            continue
        if not x:
            L.append(f"| {arm} | {what[arm]} | not run | | | |")
            continue
        conn = "n/a" if x["connect_ms"] is None else f"{x['connect_ms']:.0f}"
        split = ("n/a" if x.get("fanout_user_us_per_msg") is None else
                 f"{x['fanout_user_us_per_msg']:.2f} · {x['fanout_sys_us_per_msg']:.2f}")
        L.append(f"| {arm} | {what[arm]} | {x['rounds_whole']}/{x['rounds']} | "
                 f"{rounds_cell(x['fanout_us_per_msg'], x['fanout_by_round'], 3)} | {split} | "
                 f"{conn} |")
    L += ["", "| target | m0-ws ÷ reference, the CPU per delivered message (median; the rounds) "
          "| met |", "|---|---|---|"]
    for r in m["ratios"]:
        if r["bound"] is None:
            continue
        met = ("n/a" if r["meets"] is None else
               f"{'yes' if r['meets'] else '**no**'} "
               f"({sum(x <= r['bound'] for x in r['by_round'])}/{len(r['by_round'])})")
        L.append(f"| {r['what']} | {rounds_cell(r['median'], r['by_round'], 3)} | {met} |")
    L += ["", f"Echo: {m['echo_conns']} WebSockets, each sending a {m['echo_size']}-byte binary "
          "message and the next as soon as its echo is back, for the run's duration; the round "
          "trip from the send to the echo's last byte.", "",
          "| arm | connections | echoes/s | p50, ms | p99, ms | server CPU per echo, µs | "
          "client's CPU share |", "|---|--:|--:|--:|--:|--:|--:|"]
    for arm in ("m0-ws", "node-ws", M11_FLOOR):
        x = med.get(arm)
        if not x or x["echo_rate"] is None:
            continue
        L.append(f"| {arm} | {x['echo_open']:.0f} | {x['echo_rate']:.0f} | "
                 f"{ms(x['echo_p50_us'])} | {ms(x['echo_p99_us'])} | {x['echo_cpu_us']:.2f} | "
                 f"{x['echo_client_cpu_share']:.2f} |")
    for r in m["ratios"]:
        if r["bound"] is None and r["median"] is not None and not r.get("floor"):
            name = {"echo_cpu_us": "CPU per echo", "echo_p99_us": "p99"}[r["field"]]
            L.append("")
            L.append(f"m0-ws ÷ node-ws, echo {name}: {rounds_cell(r['median'], r['by_round'])}.")
    floor = {(r["arm"], r["ref"], r["field"]): r for r in m["ratios"] if r.get("floor")}
    if floor:
        L += ["", "Against the floor (`contrib/bench/wsfloor.c`: the fan-out one `write()` to "
              "each socket of one frame built once a message, the echo one `read()` and one "
              "`write()`; it parses nothing else), within each round:", "",
              "| ratio | fan-out, CPU per delivered message (median; the rounds) | echo, CPU per "
              "echo (median; the rounds) |", "|---|---|---|"]
        for arm, ref in (("m0-ws", M11_FLOOR), ("m0-sse", M11_FLOOR), ("node-ws", M11_FLOOR),
                         (M11_FLOOR, "node-ws")):
            cells = []
            for field in ("fanout_us_per_msg", "echo_cpu_us"):
                r = floor.get((arm, ref, field))
                cells.append(rounds_cell(r["median"], r["by_round"], 3) if r else "n/a")
            name = f"{arm} ÷ {ref}"
            if arm == M11_FLOOR:
                name += " (WS7's ⅓ is within any server's reach only if this is ≤ 0.333)"
            L.append(f"| {name} | {cells[0]} | {cells[1]} |")
    notes = [x for x in res.get("anomalies") or () if x.startswith("M11")]
    if notes:
        L += ["", "Anomalies: " + "; ".join(notes)]
    return "\n".join(L) + "\n"


def render_m12(res, json_rel):
    m = res["m12"]
    med = {(x["cell"], x["arm"]): x for x in m["medians"]}
    L = ["#### M12: files and compression (SPEC SF5)", "", run_line(res, json_rel), "",
         f"`wrk -t1 -c{m['conns']}` keep-alive, pinned as M1's pinned layout (server on one "
         "CPU, one loop or worker; wrk on the other); server CPU per request from its process "
         "tree's `/proc/<pid>/stat`; bytes per request as wrk read them, heads included.", "",
         "| cell | m0 µs/req | nginx µs/req | h2o µs/req | m0 ÷ nginx (rounds) | m0 ÷ h2o "
         "(rounds) | bytes/req m0 · nginx · h2o |", "|---|--:|--:|--:|---|---|---|"]
    rat = {(r["cell"], r["peer"]): r for r in m["ratios"] if r.get("arm", "m0") == "m0"}
    servers = M12_ARMS[:3]  # the floor has a table of its own
    for cell in M12_CELLS:
        if not any((cell, a) in med for a in servers):
            continue
        cpu = [f"{med[(cell, a)]['cpu_us_per_req']:.2f}" if (cell, a) in med else "n/a"
               for a in servers]
        cells = []
        for peer in ("nginx", "h2o"):
            r = rat.get((cell, peer))
            if not r:
                cells.append("n/a")
                continue
            verdict = "" if r["target"] is None else (
                f" {'yes' if r['meets'] else '**no**'} "
                f"({sum(x <= r['target'] for x in r['cpu_by_round'])}/{len(r['cpu_by_round'])})")
            cells.append(rounds_cell(r["cpu_median"], r["cpu_by_round"], 3) + verdict)
        size = " · ".join(f"{med[(cell, a)]['bytes_per_req']:.0f}" if (cell, a) in med else "–"
                          for a in servers)
        L.append(f"| {M12_CELL_NAMES[cell]} | " + " | ".join(cpu) + " | " + " | ".join(cells)
                 + f" | {size} |")
    floor_cells = [c for c in M12_CELLS if (c, "floor") in med]
    if floor_cells:
        rat3 = {(r["cell"], r.get("arm", "m0"), r["peer"]): r for r in m["ratios"]}
        L += ["", "Against the floor (`contrib/bench/floor.c`: one canned answer per `read()`, "
              "the 1 KiB file's bytes behind a head padded to h2o's 251 bytes, or a 304 of "
              "h2o's 131), within each round:", "",
              "| cell | floor µs/req | floor bytes/req | m0 ÷ floor (rounds) | nginx ÷ floor "
              "(rounds) | h2o ÷ floor (rounds) |", "|---|--:|--:|---|---|---|"]
        for cell in floor_cells:
            f = med[(cell, "floor")]
            cells = []
            for arm in ("m0", "nginx", "h2o"):
                r = rat3.get((cell, arm, "floor"))
                cells.append(rounds_cell(r["cpu_median"], r["cpu_by_round"], 3) if r else "n/a")
            L.append(f"| {M12_CELL_NAMES[cell]} | {f['cpu_us_per_req']:.2f} | "
                     f"{f['bytes_per_req']:.0f} | " + " | ".join(cells) + " |")
    gz = [f"{a} {med[('json', a)]['body_bytes']}" for a in servers
          if ("json", a) in med and med[("json", a)].get("body_bytes")]
    L += ["", f"SF5's target on files: m0's CPU per request ≤ {M12_TARGET}× each peer's (yes/no "
          "on the median of the rounds' ratios, and in how many rounds the round's own met it). "
          "The JSON (200 todos, "
          f"{len(bench_json())} bytes) is m0's `/json` compressed by the host (SF4, gzip level "
          "6) against nginx's `gzip on` (level 6) of the same bytes as a file; h2o 2.2 "
          "compresses nothing without its `compress` directive and is left out. The gzip "
          "bodies: " + (", ".join(gz) if gz else "n/a") + " bytes."]
    notes = [x for x in res.get("anomalies") or () if x.startswith("M12")]
    if notes:
        L += ["", "Anomalies: " + "; ".join(notes)]
    return "\n".join(L) + "\n"


BEGIN = "<!-- bench:results:begin (written by contrib/bench/run; edits here are replaced) -->"
END = "<!-- bench:results:end -->"


def doc_blocks(res, rel):
    """(text, begin marker, end marker) for each block of doc/performance.md this run
    rewrites: the results section when it ran any part but placement, M7, M8, M11 and M12, and
    the blocks of those when it ran them."""
    out = []
    if any(res.get(k) for k in ("m1", "m2", "m3", "cold", "parallel")):
        out.append((render(res, rel), BEGIN, END))
    if res.get("placement"):
        out.append((render_placement(res, rel), PLACEMENT_BEGIN, PLACEMENT_END))
    if res.get("m7"):
        out.append((render_m7(res, rel), M7_BEGIN, M7_END))
    if res.get("m8"):
        out.append((render_m8(res, rel), M8_BEGIN, M8_END))
    if res.get("m11"):
        out.append((render_m11(res, rel), M11_BEGIN, M11_END))
    if res.get("m12"):
        out.append((render_m12(res, rel), M12_BEGIN, M12_END))
    return out


def write_doc(path, text, begin=BEGIN, end=END):
    """Replace what stands between the markers `begin` and `end` in `path` with `text`; the
    markers go at the end of the file first when it has none (contrib/bench/restart-under-load
    writes its own block through this too)."""
    with open(path) as f:
        doc = f.read()
    i, j = doc.find(begin), doc.find(end)
    if i < 0 or j < i:
        doc = doc.rstrip("\n") + "\n\n" + begin + "\n" + end + "\n"
        i, j = doc.find(begin), doc.find(end)
    doc = doc[: i + len(begin)] + "\n\n" + text.rstrip("\n") + "\n\n" + doc[j:]
    with open(path, "w") as f:
        f.write(doc)


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", help="m0 build directory (apps/ramp …)")
    ap.add_argument("--helpers", help="directory with floor and sseload")
    ap.add_argument("--render", metavar="JSON",
                    help="only rewrite the results section of --doc from an artifact")
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: 1 round, 3 s runs, pinned layout only")
    ap.add_argument("--duration", type=int, help="seconds per run (default 10, quick 3)")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 3, quick 1)")
    ap.add_argument("--warmup", type=int, help="seconds of wrk before each arm's runs "
                    "(default 2, quick 1)")
    ap.add_argument("--layouts", help="pinned,wide (default both, quick pinned)")
    ap.add_argument("--conns", default="16,256", help="wrk connections (default 16,256)")
    ap.add_argument("--only", default="m1,m2,m3,cold,parallel,placement,m7,m8,m11,m12",
                    help="parts to run, comma-separated: m1, m2, m3, cold, parallel, "
                    "placement, m7, m8, m11, m12 (default all)")
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--wide-wrk-threads", type=int, default=2)
    ap.add_argument("--blocking-threads", type=int, default=0,
                    help="ramp's pool threads per loop (default 0: search runs on the loop)")
    ap.add_argument("--clients", type=int, default=10000, help="M3 connections (10000)")
    ap.add_argument("--stream-hold", type=float, help="M3 seconds the streams are held "
                    "(default 20, quick 5)")
    ap.add_argument("--keepalive-hold", type=float, default=3.0)
    ap.add_argument("--loss-seconds", type=float, help="M2 seconds per loss count "
                    "(default 10, quick 3)")
    ap.add_argument("--loss-hz", default="60,250,1000")
    ap.add_argument("--cold-trials", type=int, help="default 20, quick 5")
    ap.add_argument("--par-requests", type=int, help="host_parallel: sequential requests "
                    "per route for the one-alone figures (default 20, quick 5)")
    ap.add_argument("--m7-base", metavar="BUILD_DIR", help="M7: an m0 build to run the base "
                    "arm from, beside this one (contrib/bench/run --m7-base REV builds one)")
    ap.add_argument("--m7-arms", help="M7: the arms to run, comma-separated, with their "
                    "references (default every arm of M7_ARMS that can run)")
    ap.add_argument("--m7-conns", type=int, default=16, help="M7: wrk connections (16)")
    ap.add_argument("--m1-rate", type=int, default=0, help="M1: drive /x/now at this many "
                    "requests a second, through h2load, instead of as fast as wrk asks; "
                    "/x/search is then not run (0: wrk)")
    ap.add_argument("--m7-rate", type=int, default=20000, help="M7: the paced arms' requests a "
                    "second, through h2load over as many connections as --m7-conns (20000; 0: "
                    "no paced arms)")
    ap.add_argument("--m7-slice", type=int, default=1, help="M7: seconds of one arm's turn; "
                    "the arms take turns until each has had --duration (1)")
    ap.add_argument("--m7-base-rev", help=argparse.SUPPRESS)
    ap.add_argument("--m7-base-commit", help=argparse.SUPPRESS)
    ap.add_argument("--m8-slow", type=int, default=1000, help="M8: slowloris connections "
                    "(1000)")
    ap.add_argument("--m8-drip-ms", type=int, default=2000, help="M8: a slow connection sends "
                    "a byte of its head this often (2000)")
    ap.add_argument("--m8-timeout-ms", type=int, default=10000, help="M8: every server's bound "
                    "on a request head, whole seconds (10000)")
    ap.add_argument("--m8-every-ms", type=int, default=50, help="M8: the normal client asks "
                    "this often (50)")
    ap.add_argument("--m8-threads", type=int, default=2, help="M8: server threads (2)")
    ap.add_argument("--m11-followers", type=int, default=10000, help="M11: WebSockets (and "
                    "streams) following the channel (10000)")
    ap.add_argument("--m11-messages", type=int, help="M11: messages published to them a round, "
                    "one at a time (default 20, quick 5)")
    ap.add_argument("--m11-echo-conns", type=int, default=1000, help="M11: WebSockets of the "
                    "echo (1000)")
    ap.add_argument("--m12-conns", type=int, default=16, help="M12: wrk connections (16)")
    ap.add_argument("--port-base", type=int, default=24100)
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "doc", "bench"))
    ap.add_argument("--doc", default=os.path.join(ROOT, "doc", "performance.md"))
    ap.add_argument("--no-doc", action="store_true", help="write the JSON only")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--rev", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--m0-build-given", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rev-commit", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--command", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.render:
        with open(a.render) as f:
            res = json.load(f)
        for text, begin, end in doc_blocks(res, os.path.relpath(os.path.abspath(a.render), ROOT)):
            write_doc(a.doc, text, begin, end)
        log(f"rewrote the results of {os.path.relpath(a.doc, ROOT)} from {a.render}")
        return
    if not a.build or not a.helpers:
        ap.error("--build and --helpers are required (contrib/bench/run passes them)")
    q = a.quick
    a.duration = a.duration or (3 if q else 10)
    a.rounds = a.rounds or (1 if q else 3)
    a.warmup = a.warmup if a.warmup is not None else (1 if q else 2)
    a.layouts = (a.layouts or ("pinned" if q else "pinned,wide")).split(",")
    a.conns = [int(x) for x in a.conns.split(",")]
    a.only = a.only.split(",")
    a.stream_hold = a.stream_hold or (5 if q else 20)
    a.loss_seconds = a.loss_seconds or (3 if q else 10)
    a.loss_hz = [int(x) for x in a.loss_hz.split(",")]
    a.cold_trials = a.cold_trials or (5 if q else 20)
    a.par_requests = a.par_requests or (5 if q else 20)
    a.m11_messages = a.m11_messages or (5 if q else 20)
    if a.m11_followers < 1 or a.m11_messages < 1 or a.m11_echo_conns < 1 or a.m12_conns < 1:
        ap.error("--m11-followers, --m11-messages, --m11-echo-conns and --m12-conns take 1 "
                 "or more")
    for x in a.only:
        if x not in ("m1", "m2", "m3", "cold", "parallel", "placement", "m7", "m8", "m11",
                     "m12"):
            ap.error(f"unknown part {x}")
    if (a.m8_slow < 1 or a.m8_drip_ms < 1 or a.m8_every_ms < 1 or a.m8_threads < 1 or
            a.m8_timeout_ms < 1000 or a.m8_timeout_ms % 1000):
        ap.error("--m8-slow, --m8-drip-ms, --m8-every-ms and --m8-threads take 1 or more, "
                 "--m8-timeout-ms whole seconds")
    a.m7_arms = a.m7_arms.split(",") if a.m7_arms else None
    for x in a.m7_arms or ():
        if x not in [arm.name for arm in M7_ARMS]:
            ap.error(f"unknown M7 arm {x} (arms: {', '.join(arm.name for arm in M7_ARMS)})")
    if a.m7_slice < 1 or a.m7_conns < 1:
        ap.error("--m7-slice and --m7-conns take 1 or more")
    a.m7_base = a.m7_base and os.path.abspath(a.m7_base)
    if a.m7_base and not os.access(app_binary(a.m7_base, "ramp"), os.X_OK):
        ap.error(f"--m7-base {a.m7_base}: no apps/ramp there")
    for x in a.layouts:
        if x not in ("pinned", "wide"):
            ap.error(f"unknown layout {x}")
    if "pinned" in a.layouts or {"m7", "m11", "m12"} & set(a.only):
        cpus = os.sched_getaffinity(0)
        if a.server_cpu not in cpus or a.client_cpu not in cpus or a.server_cpu == a.client_cpu:
            ap.error(f"pinned needs two distinct CPUs of {sorted(cpus)}")

    LIB_ENV.update(build_env(a.build))
    if {"m11", "m12"} & set(a.only) and not os.access(app_binary(a.build, "bench_app"), os.X_OK):
        ap.error(f"M11 and M12 need apps/bench_app, which {a.build} lacks")
    b = Bench(a)

    def on_signal(sig, frame):
        raise KeyboardInterrupt(f"signal {sig}")

    signal.signal(signal.SIGINT, on_signal)  # also when started in the background
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    atexit.register(stop_all)
    started = datetime.datetime.now(datetime.timezone.utc)
    res = dict(
        command=a.command or " ".join(sys.argv),
        date=started.strftime("%Y-%m-%d %H:%M:%S UTC"),
        mode="quick" if q else "full",
        environment=environment(a, b),
        parameters=dict(
            quick=q, duration_s=a.duration, rounds=a.rounds, warmup_s=a.warmup,
            m1_rate=a.m1_rate,
            layouts=a.layouts, conns=a.conns, server_cpu=a.server_cpu,
            client_cpu=a.client_cpu, wide_wrk_threads=a.wide_wrk_threads,
            ramp_flags="--max-keepalive-requests 0 --blocking-threads "
            f"{a.blocking_threads}", body=BODY, wrk_timeout_s=2,
            nginx="return 200 with default_type application/json, access_log off, "
            "keepalive_requests 1000000000",
            h2o="file.file on a file holding the body (now.json), file.etag OFF; no mruby",
            floor="contrib/bench/floor.c: one canned response per read()",
            arm_order="rotates by one each round: ramp, nginx, h2o, floor",
            cpu="utime+stime+cutime+cstime of the server's process tree from /proc/PID/stat, "
            "before and after each run",
            rss="sum of VmRSS over the server's process tree after each run",
            clients=a.clients, stream_hold_s=a.stream_hold, loss_seconds=a.loss_seconds,
            loss_hz=a.loss_hz, cold_trials=a.cold_trials, only=a.only,
            parallel=dict(
                app="host_parallel: /ser and /par, one job of 64 items x 100,000 square roots",
                topologies=[dict(name=t, loops=n, blocking_threads=bt)
                            for t, n, bt in PAR_TOPOLOGIES],
                compute="default (M0_COMPUTE_THREADS unset: the CPUs) and inline "
                "(M0_COMPUTE_THREADS=0)",
                alone_requests=a.par_requests,
                alone="sequential GETs on one keep-alive connection: the median of the time "
                "the handler reported and of the wall time from send to last byte",
                loaded="wrk -t1 -c8 for the run's duration, unpinned; rps, p50/p99, and the "
                "median of the times the handlers reported",
                max_keepalive_requests=0),
            m11=dict(
                followers=a.m11_followers, messages=a.m11_messages,
                echo_conns=a.m11_echo_conns, echo_size=M11_ECHO_SIZE,
                m0="apps/bench_app --threads 1 --blocking-threads 0, M0_SSE_HEARTBEAT_MS=0 "
                "M0_WS_PING_MS=0 M0_IDLE_TIMEOUT_MS=600000, pinned to --server-cpu",
                node="contrib/bench/ws-node.js (Node `ws`, no per-message deflate), pinned "
                "to --server-cpu", client="contrib/bench/wsload on --client-cpu",
                floor="contrib/bench/wsfloor.c: one write() per socket of one frame built "
                "once a message; the echo one read() and one write(); pinned to --server-cpu",
                cpu="every thread's schedstat of the server's tree"),
            m12=dict(
                conns=a.m12_conns, files="1k.bin (1024 B), 1m.bin (1 MiB), data.json "
                f"({len(bench_json())} B) in one directory",
                m0="apps/bench_app --threads 1 --blocking-threads 0, M0_BENCH_WWW at /f/, "
                "M0_BENCH_JSON at /json (gzip level 6, the default)",
                nginx="location /f/: alias, sendfile on, tcp_nopush on, gzip on, "
                "gzip_comp_level 6, gzip_vary on; one worker",
                h2o="/f: file.dir; one thread", wrk="-t1, pinned to --client-cpu",
                floor={cell: "contrib/bench/floor.c " + " ".join(opts) +
                       (f" --body-file {f}" if f else "") + ", one loop, one write() an answer"
                       for cell, (opts, f) in M12_FLOOR_CELLS.items()}),
        ),
    )
    try:
        if "m1" in a.only:
            rows = b.m1()
            med, ratios = b.m1_summary(rows)
            res["m1"] = dict(rows=rows, medians=med, ratios=ratios)
            if a.m7_base:
                res["m1"]["against_base"] = m1_against_base(rows)
                res["m1"]["base"] = b.m7_base_build()
        if "m2" in a.only:
            res["m2"] = b.m2()
        if "m3" in a.only:
            res["m3"] = b.m3()
        if "cold" in a.only:
            res["cold"] = b.cold()
        if "parallel" in a.only:
            res["parallel"] = b.parallel()
        if "placement" in a.only:
            res["placement"] = b.placement()
        if "m7" in a.only:
            res["m7"] = b.m7()
        if "m8" in a.only:
            res["m8"] = b.m8()
        if "m11" in a.only:
            res["m11"] = b.m11()
        if "m12" in a.only:
            res["m12"] = b.m12()
    except BaseException:
        log(f"failed; logs kept in {b.tmp}")
        stop_all()
        raise
    finally:
        stop_all()
    res["anomalies"] = b.anomalies
    res["environment"]["loadavg_at_end"] = loadavg()
    res["finished"] = datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S UTC")

    os.makedirs(a.out_dir, exist_ok=True)
    name = started.strftime("%Y%m%dT%H%M%SZ") + ("-quick" if q else "") + ".json"
    out = os.path.join(a.out_dir, name)
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    rel = os.path.relpath(out, ROOT)
    for text, begin, end in doc_blocks(res, rel):
        print(text)
        if not a.no_doc:
            write_doc(a.doc, text, begin, end)
    log(f"wrote {rel}" + ("" if a.no_doc else f" and {os.path.relpath(a.doc, ROOT)}"))
    if a.keep or b.anomalies:
        log(f"logs in {b.tmp}")
    else:
        shutil.rmtree(b.tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt as e:
        stop_all()
        log(f"interrupted ({e or 'SIGINT'}); every server it started is stopped")
        sys.exit(130)
