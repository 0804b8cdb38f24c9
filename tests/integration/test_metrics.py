# SPDX-License-Identifier: MIT
"""What operators watch (SPEC O1): GET /metrics on a socket of its own — a passed socket named
`metrics`, or M0_METRICS — in the Prometheus text format 0.0.4, or OpenMetrics when the Accept asks
for it (AP4), checked by `promtool check metrics`, by a strict OpenMetrics parser and by a real
Prometheus scraping it; the counters exact for the requests each test sent, by loop, method and status
class; the metrics port bounded against slow, large and many clients; never on the app's socket."""

import os
import re
import signal
import socket
import subprocess
import time
from collections import Counter

import m0test
from m0test import HarnessError, Server, check, eq, free_port
from promtest import Prometheus, openmetrics_parse, promtool_check
from test_reject import CASES as REJECT_CASES
from test_smuggling import GROUPS as SMUGGLING_GROUPS

# ThreadSanitizer runs this module (the metrics thread): run.py, D235.
THREADED = True

METRICS_SOCKETS = ("tcp", ("tcp", "metrics"))
OM_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
TEXT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OM_ACCEPT = "application/openmetrics-text; version=1.0.0"
# What Debian's Prometheus 2 sends.
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                     "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


def metrics_addr(s):
    """The address of the passed socket named metrics."""
    return [sock for _, name, sock in s.listeners if name == "metrics"][0].getsockname()


def read_response(sock, head_only=False):
    """One whole response from `sock`: (status, {lowercase name: value}, its raw bytes)."""
    raw = b""
    while b"\r\n\r\n" not in raw:
        data = sock.recv(65536)
        if not data:
            raise HarnessError(f"EOF before a whole head: {raw!r}")
        raw += data
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    fields = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    n = 0 if head_only else int(fields.get("content-length", "0"))
    while len(rest) < n:
        data = sock.recv(65536)
        if not data:
            raise HarnessError("EOF in a body")
        rest += data
    eq(len(rest), n, "bytes after the response")
    return status, fields, head + b"\r\n\r\n" + rest


def http(addr, raw, head_only=False, timeout=10):
    """Send `raw` on a new connection to `addr`; (status, fields, response bytes)."""
    with socket.create_connection(addr, timeout=timeout) as c:
        c.sendall(raw)
        return read_response(c, head_only)


def scrape(s_or_addr, accept=OM_ACCEPT):
    """GET /metrics, asking for OpenMetrics unless told (None: no Accept): (status, fields, body
    text)."""
    addr = s_or_addr if isinstance(s_or_addr, tuple) else metrics_addr(s_or_addr)
    hs = "" if accept is None else f"Accept: {accept}\r\n"
    st, f, raw = http(addr, f"GET /metrics HTTP/1.1\r\nHost: m\r\n{hs}\r\n".encode())
    return st, f, raw.partition(b"\r\n\r\n")[2].decode()


def samples(text):
    """{(sample name, frozenset of labels): value} of an OpenMetrics text, strictly parsed."""
    return {(n, frozenset(lb.items())): v for _, _, _, n, lb, v in openmetrics_parse(text)}


def value(smp, name, **labels):
    key = (name, frozenset((k, str(v)) for k, v in labels.items()))
    if key not in smp:
        raise AssertionError(f"no sample {name}{labels}")
    return smp[key]


def total(smp, name, **labels):
    """The sum of every sample `name` whose labels include `labels`."""
    want = {(k, str(v)) for k, v in labels.items()}
    return sum(v for (n, lb), v in smp.items() if n == name and want <= lb)


def until(fn, what, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        if time.monotonic() > deadline:
            raise HarnessError(f"{what}: not within {timeout}s")
        time.sleep(0.05)


def method_class(m):
    return m if m in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS") else "other"


# Per connection: what it sends, one request at a time; the last one of some is refused (400),
# which answers it and closes the connection. Each begins with a route of host_check's, whose
# answer names its loop (x-worker); the host's own answers (404, 400) do not.
PLAN = [
    [("GET", "/health", None), ("HEAD", "/health", None), ("GET", "/nope", None)],
    [("POST", "/echo", b"hello"), ("DELETE", "/health", None), ("BREW", "/pot", None)],
    [("GET", "/health", None), ("OPTIONS", "/health", None), ("GET", "/pid", None)],
    [("GET", "/health", None), (None, b"GET /x HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n", None)],
    [("GET", "/health", None), ("PUT", "/health", b"x"), ("PATCH", "/health", b"y"),
     ("GET", "/slow?ms=30", None)],
    [("GET", "/instance", None), (None, b"GET /caf\xe9\x01 HTTP/1.1\r\nHost: t\r\n\r\n", None)],
]


def run_plan(s):
    """Send PLAN to the app: returns the tally {(loop, method class, status class): n} of what
    the client was answered, the bytes it sent and received, and how many connections it made."""
    tally, sent, received = Counter(), 0, 0
    for reqs in PLAN:
        loop = None
        with socket.create_connection(s.tcp_addr, timeout=10) as c:
            for method, path, body in reqs:
                if method is None:
                    raw, method = path, "GET"
                else:
                    raw = m0test.build_request(method, path, body=body)
                c.sendall(raw)
                sent += len(raw)
                st, f, resp = read_response(c, head_only=method == "HEAD")
                received += len(resp)
                loop = f.get("x-worker", loop)
                tally[(loop, method_class(method), f"{st // 100}xx")] += 1
                if st == 400:
                    c.settimeout(5)
                    eq(c.recv(100), b"", "the connection after a 400")
    return tally, sent, received, len(PLAN)


def test_O1_requests_counted_exactly_by_loop_method_and_status():
    """Six connections on two loops, every method class and status class the plan gets: each
    m0_requests_total sample is what the client was answered, the histogram counts every request,
    the bytes are exactly the client's, and the connections balance (L4)."""
    with Server("host_check", env={"M0_THREADS": "2"}, sockets=METRICS_SOCKETS) as s:
        s.wait_ready()
        tally, sent, received, nconns = run_plan(s)
        check(len({k[0] for k in tally}) == 2, f"both loops served: {tally}")
        smp = until(lambda: (lambda m: m if total(m, "m0_connections") == 0 else None)(
            samples(scrape(s)[2])), "every connection closed on the server")
        for loop in ("0", "1"):
            for m in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"):
                for st in ("2xx", "3xx", "4xx", "5xx"):
                    eq(value(smp, "m0_requests_total", loop=loop, method=m, status=st),
                       tally[(loop, m, st)], f"m0_requests_total loop {loop} {m} {st}")
        n = sum(tally.values())
        eq(value(smp, "m0_request_duration_seconds_count"), n, "the histogram's count")
        eq(value(smp, "m0_request_duration_seconds_bucket", le="+Inf"), n, "its +Inf bucket")
        check(value(smp, "m0_request_duration_seconds_bucket", le="0.025") < n,
              "/slow?ms=30 took more than 25 ms")
        check(value(smp, "m0_request_duration_seconds_sum") >= 0.030, "the sum holds /slow's 30 ms")
        eq(total(smp, "m0_received_bytes_total"), sent, "bytes read: what the client sent")
        eq(total(smp, "m0_sent_bytes_total"), received, "bytes sent: what the client received")
        eq(total(smp, "m0_connections_accepted_total"), nconns, "connections accepted")
        eq(total(smp, "m0_connections_passed_total"), total(smp, "m0_connections_received_total"),
           "connections handed over, passed and received")
        eq(total(smp, "m0_connections_refused_total"), 0, "connections refused")
        eq(value(smp, "m0_loops"), 2, "m0_loops")
        eq(value(smp, "m0_draining"), 0, "m0_draining")
        eq(value(smp, "m0_build_info", app="host_check", version=m0test.run_app(
            "host_check", ["--version"])[1].split()[-1]), 1, "m0_build_info")


def test_O1_AP4_formats_promtool_and_the_strict_parser():
    """A scrape with no Accept (curl's `*/*` too) gets the 0.0.4 text format, which `promtool
    check metrics` passes with every family of the host there; OpenMetrics when the Accept names
    it above text/plain (Prometheus's does), which the strict parser takes; both say the same."""
    with Server("host_check", env={"M0_BLOCKING_THREADS": "1", "M0_THREADS": "2"},
                sockets=METRICS_SOCKETS) as s:
        s.wait_ready()
        run_plan(s)
        st, f, text = scrape(s, None)
        eq(st, 200, "GET /metrics")
        eq(f["content-type"], TEXT_TYPE, "the default format")
        check("# EOF" not in text and "# UNIT" not in text, "no OpenMetrics lines in 0.0.4")
        rc, out = promtool_check(text)
        eq((rc, out), (0, ""), "promtool check metrics")
        # The way an operator reads it, curl piped to promtool.
        host, port = metrics_addr(s)
        curl = subprocess.run(f"curl -sS --max-time 10 http://{host}:{port}/metrics | "
                              "promtool check metrics", shell=True, capture_output=True,
                              timeout=30)
        eq((curl.returncode, curl.stdout + curl.stderr), (0, b""), "curl -s | promtool check")
        types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
        for name, typ in [("m0_requests_total", "counter"), ("m0_build_info", "gauge"),
                          ("m0_request_duration_seconds", "histogram"),
                          ("m0_received_bytes_total", "counter"),
                          ("m0_pool_job_duration_seconds", "histogram"), ("m0_streams", "gauge"),
                          ("m0_streams_closed_total", "counter"),
                          ("m0_bus_channels_evicted_total", "counter")]:
            eq(types.get(name), typ, f"# TYPE {name}")
        check(re.search(r'^m0_build_info\{app="host_check",version="[^"]+"\} 1$', text, re.M),
              "m0_build_info, a gauge of 1")
        for accept, want in [(None, TEXT_TYPE), ("*/*", TEXT_TYPE),
                             ("text/plain", TEXT_TYPE),
                             ("text/plain; version=0.0.4", TEXT_TYPE),
                             ("application/openmetrics-text;q=0,text/plain", TEXT_TYPE),
                             ("application/openmetrics-text;q=0.4,text/plain;q=0.5", TEXT_TYPE),
                             ("application/openmetrics-text", OM_TYPE),
                             ("application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
                              OM_TYPE),
                             (PROMETHEUS_ACCEPT, OM_TYPE)]:
            st, f, body = scrape(s, accept)
            eq((st, f["content-type"]), (200, want), f"Accept: {accept}")
            eq(body.endswith("\n# EOF\n"), want == OM_TYPE, f"Accept: {accept}: # EOF last")
        st, f, om = scrape(s, PROMETHEUS_ACCEPT)
        fams = {(fam, typ, unit) for fam, typ, unit, _, _, _ in openmetrics_parse(om)}
        for want in [("m0_requests", "counter", ""),
                     ("m0_request_duration_seconds", "histogram", "seconds"),
                     ("m0_received_bytes", "counter", "bytes"),
                     ("m0_pool_job_duration_seconds", "histogram", "seconds"),
                     ("m0_build", "info", ""), ("m0_streams", "gauge", ""),
                     ("m0_bus_channels_evicted", "counter", "")]:
            check(want in fams, f"family {want} in {sorted(fams)}")
        rc, out = promtool_check(om)
        check(rc != 0, "promtool, which reads 0.0.4 only, does refuse OpenMetrics' counters")
        # The requests the plan made read the same in both formats.
        rx = re.compile(r'^(m0_requests_total\{[^}]*\}) (\d+)$', re.M)
        eq(dict(rx.findall(text)), dict(rx.findall(om)), "m0_requests_total in both formats")
        check(len(rx.findall(text)) == 2 * 8 * 4, "every series of m0_requests_total")


def test_O1_never_on_the_app_socket_and_off_by_default():
    """With no socket named metrics and M0_METRICS unset there are no metrics; /metrics on the
    app's socket is the app's (a 404 here), whatever the metrics are."""
    with Server("host_check") as s:
        s.wait_ready()
        check("metrics on" not in s.ready_datagram()[1], "no metrics in STATUS=")
        eq(s.connect().get("/metrics").status, 404, "/metrics on the app's socket, metrics off")
    with Server("host_check", sockets=METRICS_SOCKETS) as s:
        s.wait_ready()
        eq(s.connect().get("/metrics").status, 404, "/metrics on the app's socket, metrics on")
        smp = samples(scrape(s)[2])
        eq(value(smp, "m0_requests_total", loop=0, method="GET", status="4xx"), 1,
           "that 404 is the app's request, counted")


def test_O1_M0_METRICS_binds_and_a_passed_socket_wins():
    port = free_port()
    with Server("host_check", env={"M0_METRICS": f"127.0.0.1:{port}"}) as s:
        st = s.wait_ready()
        check(st.rstrip("\n").endswith(f"; metrics on 127.0.0.1:{port}"), f"STATUS=: {st!r}")
        eq(scrape(("127.0.0.1", port))[0], 200, "GET /metrics on M0_METRICS's address")
    # Port 0: the kernel's port, which STATUS= names.
    with Server("host_check", env={"M0_METRICS": "127.0.0.1:0"}) as s:
        m = re.search(r"; metrics on 127\.0\.0\.1:(\d+)", s.wait_ready())
        check(m and int(m.group(1)) > 0, "STATUS= names the metrics port")
        eq(scrape(("127.0.0.1", int(m.group(1))))[0], 200, "GET /metrics on the kernel's port")
    # A passed socket named metrics wins over M0_METRICS, which is then not bound.
    port = free_port()
    with Server("host_check", env={"M0_METRICS": f"127.0.0.1:{port}"},
                sockets=METRICS_SOCKETS) as s:
        st = s.wait_ready()
        check(st.rstrip("\n").endswith(f"; metrics on 127.0.0.1:{metrics_addr(s)[1]}"), st)
        eq(scrape(s)[0], 200, "GET /metrics on the passed socket")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            raise AssertionError("M0_METRICS's port was bound beside the passed socket")
        except ConnectionRefusedError:
            pass


def test_O1_R1_metrics_address_refused():
    rc, _, err = m0test.run_app("host_check", ["--port", "0"],
                                env={"M0_METRICS": "192.0.2.1:9464"})
    eq(rc, 78, "a metrics address this machine does not have")
    eq(err.strip().splitlines()[-1],
       "m0: metrics: cannot listen on 192.0.2.1:9464: Cannot assign requested address (set "
       "--metrics or M0_METRICS to HOST:PORT, or off)", "the refusal")
    rc, _, err = m0test.run_app("host_check", env={"M0_METRICS": "9464"})
    eq(rc, 78, "M0_METRICS without a host")
    check("M0_METRICS='9464' is not off or HOST:PORT" in err, err)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        rc, _, err = m0test.run_app("host_check", ["--port", "0"],
                                    env={"M0_METRICS": f"127.0.0.1:{port}"})
        eq(rc, 78, "a metrics port in use")
        eq(err.strip().splitlines()[-1], f"m0: cannot listen on 127.0.0.1:{port}: Address already "
           "in use (set --metrics or M0_METRICS to HOST:PORT, or off)", "the refusal")


def test_O1_metrics_port_refuses_what_it_must():
    """Only GET and HEAD /metrics are answered; a malformed head is 400, one past the head bound
    431, a client that does not finish its head in M0_METRICS_TIMEOUT_MS gets 408 and is closed,
    and past M0_METRICS_MAX_CONNECTIONS new connections are closed at once — while the app
    goes on answering. Each is counted in m0_metrics_rejected_total."""
    env = {"M0_METRICS_MAX_CONNECTIONS": "2", "M0_METRICS_TIMEOUT_MS": "700",
           "M0_MAX_HEAD_BYTES": "1024"}
    with Server("host_check", env=env, sockets=METRICS_SOCKETS) as s:
        s.wait_ready()
        ma = metrics_addr(s)
        rejected = 0
        for raw, want in [(b"GET / HTTP/1.1\r\nHost: m\r\n\r\n", 404),
                          (b"GET /metricsx HTTP/1.1\r\nHost: m\r\n\r\n", 404),
                          (b"POST /metrics HTTP/1.1\r\nHost: m\r\nContent-Length: 0\r\n\r\n", 405),
                          (b"GET /metrics HTTP/1.1\r\n\r\n", 400),
                          (b"GET /metrics HTTP/1.1\r\nHost: m\r\nX: " + b"a" * 2000 + b"\r\n\r\n",
                           431)]:
            st, f, _ = http(ma, raw)
            eq(st, want, f"{raw[:40]!r}")
            eq(f["connection"], "close", "every metrics answer closes")
            if want == 405:
                eq(f["allow"], "GET, HEAD", "405's Allow")
            rejected += 1
        # A refusal to a HEAD is its head alone (D100): the length of the body it would have.
        for raw, want in [(b"HEAD / HTTP/1.1\r\nHost: m\r\n\r\n", 404),
                          (b"HEAD /metrics HTTP/1.1\r\n\r\n", 400),
                          (b"HEAD /metrics HTTP/1.1\r\nHost: m\r\nX: " + b"a" * 2000 +
                           b"\r\n\r\n", 431)]:
            with socket.create_connection(ma, timeout=10) as c:
                c.sendall(raw)
                got = b""
                while data := c.recv(65536):
                    got += data
            head, _, body = got.partition(b"\r\n\r\n")
            check(head.startswith(f"HTTP/1.1 {want} ".encode()), f"{raw[:30]!r}: {got!r}")
            reason = head.split(b"\r\n")[0].split(b" ", 2)[2]
            n = len(b"%d %s\n" % (want, reason))
            check(f"\r\nContent-Length: {n}\r\n".encode() in head + b"\r\n",
                  f"{raw[:30]!r}: the length of its body: {head!r}")
            eq(body, b"", f"{raw[:30]!r}: bytes after the head")
            rejected += 1
        st, f, raw = http(ma, b"HEAD /metrics?x=1 HTTP/1.1\r\nHost: m\r\n\r\n", head_only=True)
        eq(st, 200, "HEAD /metrics (the query is no part of the path)")
        check(int(f["content-length"]) > 1000 and raw.endswith(b"\r\n\r\n"), "a head, no body")
        # Slow: half a head, then nothing. 408 at the bound, then closed.
        slow = socket.create_connection(ma, timeout=10)
        slow.sendall(b"GET /metrics HTTP/1.1\r\nHo")
        t0 = time.monotonic()
        got = b""
        while True:
            data = slow.recv(4096)
            if not data:
                break
            got += data
        dt = time.monotonic() - t0
        slow.close()
        check(got.startswith(b"HTTP/1.1 408 "), f"the slow client's answer: {got!r}")
        check(0.5 < dt < 5, f"closed {dt:.2f}s after its half head (bound 0.7 s)")
        rejected += 1
        # Many: two hold the slots; a third is closed at once, and the app still answers. The
        # connections above closed on the client's side; the thread frees their slots when it
        # reads their end of file, a moment later.
        time.sleep(0.3)
        held = [socket.create_connection(ma, timeout=10) for _ in range(2)]
        for h in held:
            h.sendall(b"GET /metrics HTTP/1.1\r\n")
            h.settimeout(0.2)
            try:
                raise AssertionError(f"a held connection got {h.recv(4096)!r} at once")
            except socket.timeout:
                pass
        # It sends nothing: a request that reached the socket before the close would turn the
        # kernel's end of file into a reset, depending on the thread's speed alone.
        third = socket.create_connection(ma, timeout=5)
        eq(third.recv(4096), b"", "the connection past the limit")
        third.close()
        rejected += 1
        eq(s.connect().get("/health").status, 200, "the app, while the metrics port is full")
        for h in held:
            h.settimeout(5)
            check(h.recv(4096).startswith(b"HTTP/1.1 408 "), "a held slot's end")
            h.close()
        rejected += 2
        smp = samples(scrape(s)[2])
        eq(value(smp, "m0_metrics_rejected_total"), rejected, "m0_metrics_rejected_total")
        eq(value(smp, "m0_metrics_scrapes_total"), 2, "the HEAD and this GET")
        eq(value(smp, "m0_requests_total", loop=0, method="GET", status="2xx"), 1,
           "the app counted its /health alone")


# Every malformed head of the H3 tables: test_reject's, and test_smuggling's rows of the head's
# groups that the host refuses at once with one status (400, 414, 431); not the chunked body's.
HEAD_GROUPS = ("content_length", "transfer_encoding", "line_syntax", "request_line",
               "host_and_target", "fields", "limits")
MALFORMED_HEADS = [(name, raw, 400) for name, raw in REJECT_CASES] + [
    (r["name"], r["raw"], r["statuses"][0]) for g in HEAD_GROUPS for r in SMUGGLING_GROUPS[g]
    if len(r["statuses"]) == 1 and r["statuses"][0] in (400, 414, 431)]


def first_status(addr, raw, timeout):
    """Send `raw` on a new connection to `addr`: (the first answer's status, seconds it took)."""
    with socket.create_connection(addr, timeout=timeout) as c:
        t0 = time.monotonic()
        try:
            c.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before all was sent: the answer still came
        st = read_response(c, head_only=raw.startswith(b"HEAD "))[0]
        return st, time.monotonic() - t0


def test_O1_H3_the_metrics_socket_refuses_every_malformed_head_as_the_app_does():
    """Each malformed head the app's socket refuses, the metrics socket refuses with the same
    status, at once: both read a head with llhttp and H3's walk (a head ending in bare LFs was
    read there until M0_METRICS_TIMEOUT_MS, then 408). The timeout is long so that an answer the
    metrics socket owes at once cannot pass for one it gives at the deadline."""
    timeout_s = 30
    env = {"M0_METRICS_TIMEOUT_MS": str(timeout_s * 1000)}
    check(len(MALFORMED_HEADS) > 80, f"the table: {len(MALFORMED_HEADS)} heads")
    with Server("host_check", env=env, sockets=METRICS_SOCKETS) as s:
        s.wait_ready()
        ma = metrics_addr(s)
        failures = []
        for name, raw, want in MALFORMED_HEADS:
            got = {}
            for where, addr in (("app", s.tcp_addr), ("metrics", ma)):
                try:
                    got[where] = first_status(addr, raw, timeout_s + 10)
                except (HarnessError, OSError) as e:
                    got[where] = (f"no answer: {e}", 0)
            app, metrics = got["app"], got["metrics"]
            if app[0] != want or metrics[0] != want or metrics[1] > timeout_s / 2:
                failures.append(f"[{name}] {raw[:60]!r}: want {want}; app {app[0]}, metrics "
                                f"{metrics[0]} after {metrics[1]:.1f}s")
        if failures:
            raise AssertionError(f"{len(failures)} of {len(MALFORMED_HEADS)} heads:\n"
                                 + "\n".join(failures))
        # The metrics socket is whole after the table.
        eq(scrape(s)[0], 200, "GET /metrics after the table")


test_O1_H3_the_metrics_socket_refuses_every_malformed_head_as_the_app_does.timeout = 300


def test_O1_pool_histogram_and_streams():
    """A pool's job time and queue, a stream open and closed, the bus's events published and
    delivered."""
    with Server("host_check", env={"M0_BLOCKING_THREADS": "1", "M0_HOSTCHECK_PERIOD_MS": "50"},
                sockets=METRICS_SOCKETS) as s:
        s.wait_ready()
        c = s.connect()
        for _ in range(3):
            eq(c.get("/slow?ms=60").status, 200, "/slow on the pool")
        st = s.connect()
        m0test.open_stream(st, "/events")
        rd = m0test.SSEReader(st)
        beats = [f for f in rd.read_for(0.5) if f.is_event]
        check(len(beats) >= 2, f"beats on the stream: {beats}")
        smp = samples(scrape(s)[2])
        eq(value(smp, "m0_pool_job_duration_seconds_count"), 3, "pool jobs")
        eq(value(smp, "m0_pool_job_duration_seconds_bucket", le="0.05"), 0, "none under 50 ms")
        eq(value(smp, "m0_pool_job_duration_seconds_bucket", le="0.1"), 3, "all under 100 ms")
        eq(value(smp, "m0_pool_queued_jobs", loop=0), 0, "nothing queued")
        eq(value(smp, "m0_streams", loop=0), 1, "the stream open")
        check(value(smp, "m0_bus_events_delivered_total", loop=0) >= len(beats), "delivered")
        check(value(smp, "m0_bus_events_published_total") >=
              value(smp, "m0_bus_events_delivered_total", loop=0), "published")
        st.close()
        until(lambda: value(samples(scrape(s)[2]), "m0_streams", loop=0) == 0, "stream closed")


def test_O1_N4_the_bus_counts_transient_unfollowed_and_evicted():
    """The counts of the bus's stop line are families too: transient events, events on a channel
    no stream follows, channels evicted whole to stay within M0_REPLAY_BYTES, events a channel
    alone past that bound gave up, publishes that waited for the id lease. Exact for what the
    test published, and the same numbers the stop line then logs."""
    env = {"M0_HOSTCHECK_STEP_FAILS_AT": 1, "M0_SSE_HEARTBEAT_MS": 0, "M0_HOSTCHECK_PUBLISH": 1,
           "M0_REPLAY_BYTES": 65536, "M0_REPLAY_PER_CHANNEL": 65536}
    with Server("host_check", env=env, sockets=METRICS_SOCKETS) as s:
        s.wait_ready()

        def publish(q):
            r = s.connect(timeout=60).exchange("POST", f"/publish?event=e&{q}", timeout=60)
            eq(r.status, 200, f"POST /publish?{q}: {r.body!r}")

        st = s.connect()
        eq(m0test.open_stream(st, "/follow?channels=f").status, 200, "/follow?channels=f")
        eq(st.read_exact(len(m0test.OPEN_BLOCKS), timeout=5), m0test.OPEN_BLOCKS, "first bytes")
        publish("channel=f&n=2&transient=1")  # followed: delivered, never kept
        publish("channel=nobody&transient=1")  # transient, and on a channel nobody follows
        publish("channel=nobody")  # kept, followed by none
        # 3000 channels of one event each, where 64 KiB keeps a few hundred: the idle go whole.
        publish("channel=m&n=3000&distinct=1")
        # One channel of 2000 events, which 64 KiB cannot keep alone: it gives up its oldest.
        publish("channel=big&n=2000")
        eq(len([b for b in m0test.SSEReader(st).read_for(0.3) if b.is_event]), 2,
           "the transient events on the stream")
        smp = samples(scrape(s)[2])
        got = {n: value(smp, f"m0_bus_{n}_total") for n in (
            "events_published", "events_evicted", "events_transient", "events_unfollowed",
            "channels_evicted", "events_past_bound", "lease_waits")}
        eq(got["events_transient"], 3, "m0_bus_events_transient_total")
        eq(got["events_unfollowed"], 1 + 1 + 3000 + 2000, "m0_bus_events_unfollowed_total")
        eq(got["events_published"], 1 + 3000 + 2000, "m0_bus_events_published_total")
        eq(got["lease_waits"], 0, "m0_bus_lease_waits_total (no state directory, no lease)")
        eq(value(smp, "m0_bus_events_delivered_total", loop=0), 2, "delivered: the transient two")
        check(got["channels_evicted"] > 2000, f"channels evicted: {got}")
        check(got["events_past_bound"] > 1000, f"events past the bound: {got}")
        eq(s.stop(), 0, "exit status")
        line = s.wait_log(r"bus stopped")
        m = re.search(r"published (\d+) events and (\d+) transient ones \((\d+) on a channel "
                      r"nobody followed\); last id \d+; replay kept (\d+) frames of (\d+) "
                      r"channels in \d+ bytes, channels evicted (\d+), frames given up past the "
                      r"bound (\d+); publishes that waited for the id lease (\d+)", line)
        check(m, line)
        pub, tr, unf, kept, chans, ev, past, waits = map(int, m.groups())
        eq((got["events_published"], got["events_transient"], got["events_unfollowed"],
            got["channels_evicted"], got["events_past_bound"], got["lease_waits"]),
           (pub, tr, unf, ev, past, waits), "the families against the stop line")
        # Every channel published to is kept or was evicted; every kept event published is kept
        # or was given up (the stop line's own counts, read under the bus lock).
        eq(ev + chans, 1 + 3000 + 1, "channels evicted and kept: nobody, m0..m2999, big")
        eq(got["events_evicted"] + kept, pub, "events evicted and kept: every one published")


def test_O1_X1_metrics_answer_through_the_drain():
    with Server("host_check", env={"M0_BLOCKING_THREADS": "1"}, sockets=METRICS_SOCKETS) as s:
        s.wait_ready()
        c = s.connect()
        c.request("GET", "/slow?ms=1500")
        time.sleep(0.3)
        s.send_signal(signal.SIGTERM)
        s.wait_log(r"draining")
        smp = samples(scrape(s)[2])
        eq(value(smp, "m0_draining"), 1, "m0_draining during the drain")
        eq(c.read_response().status, 200, "the request in flight")
        eq(s.wait_exit(10), 0, "exit after the drain")


def test_O1_a_real_prometheus_scrapes_it():
    """Prometheus 2 (Debian's) scrapes the metrics socket every second while ten 60 ms requests
    run; its HTTP API then says exactly what the test sent: the counter by loop and status, and
    quantiles that put every request in the 50–100 ms bucket."""
    with Server("host_check", env={"M0_BLOCKING_THREADS": "2"}, sockets=METRICS_SOCKETS) as s:
        s.wait_ready()
        host, port = metrics_addr(s)
        with Prometheus({"m0": f"{host}:{port}"}) as p:
            p.wait_up("m0")
            conns = [s.connect() for _ in range(2)]
            for _ in range(5):
                for c in conns:
                    c.request("GET", "/slow?ms=60")
                for c in conns:
                    eq(c.read_response().status, 200, "/slow?ms=60")
            p.wait_value('sum(m0_requests_total{job="m0",method="GET",status="2xx"})', 10)
            got = p.query('m0_requests_total{job="m0",loop="0",method="GET",status="2xx"}')
            eq([v for _, v in got], [10.0], "the counter of loop 0, GET, 2xx")
            eq(p.query('sum(m0_requests_total{job="m0",status!="2xx"})')[0][1], 0.0, "the rest")
            p.wait_value('m0_request_duration_seconds_count{job="m0"}', 10)
            for q, want in [(0.5, 0.075), (0.9, 0.095)]:
                got = p.query(f'histogram_quantile({q}, m0_request_duration_seconds_bucket'
                              f'{{job="m0"}})')
                eq(len(got), 1, f"one quantile {q}")
                check(abs(got[0][1] - want) < 1e-9, f"quantile {q}: {got[0][1]}, want {want}")
            eq(p.targets()["m0"]["lastError"], "", "the scrape's last error")
            # OpenMetrics names the family without its _total: Prometheus keeps the type there.
            meta = p.api("/api/v1/targets/metadata", metric="m0_requests")
            eq([m["type"] for m in meta], ["counter"], "Prometheus read m0_requests' type")


test_O1_a_real_prometheus_scrapes_it.timeout = 120
test_O1_a_real_prometheus_scrapes_it.once = True  # a Prometheus server: the plain variant only (run.py, D235)
