# SPDX-License-Identifier: MIT
"""HTTP/2 by prior knowledge on the plain socket (SPEC HT1-HT6): curl and h2load as real
clients; the same routes, bounds, CORS and error format as HTTP/1.1 (HT2); the drain's GOAWAY
(HT5); the defences (HT4); and raw frames, built with Debian's python3-h2 packages (hyperframe,
hpack), each case citing the section of RFC 9113 it checks (HT6)."""

import collections
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time

from journaltest import Journald
from m0test import Conn, Server, check, eq, free_port, tool

# Debian's python3-h2, python3-hpack and python3-hyperframe are pure Python, installed for the
# system's interpreter: the test's takes them from there when it has none of its own.
if "/usr/lib/python3/dist-packages" not in sys.path:
    sys.path.append("/usr/lib/python3/dist-packages")
import hpack  # noqa: E402
from hyperframe.frame import (  # noqa: E402
    ContinuationFrame,
    DataFrame,
    Frame,
    GoAwayFrame,
    HeadersFrame,
    PingFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

# ThreadSanitizer runs this module (event streams across loops, the pool's answers): run.py, D235.
THREADED = True

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# RFC 9113 section 7's error codes
NO_ERROR, PROTOCOL_ERROR, FLOW_CONTROL_ERROR, STREAM_CLOSED = 0x0, 0x1, 0x3, 0x5
FRAME_SIZE_ERROR, REFUSED_STREAM, COMPRESSION_ERROR = 0x6, 0x7, 0x9
ENHANCE_YOUR_CALM = 0xB


def raw_frame(ftype, flags, sid, payload):
    """A frame as bytes, whatever its length says (RFC 9113 4.1), for frames hyperframe would
    refuse to build."""
    head = struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid)
    return head + payload


class H2:
    """A raw HTTP/2 client on one socket: it sends what it is told, frame by frame, and reads
    the server's frames in order, decoding every header block with one HPACK decoder."""

    def __init__(self, port, settings=None, preface=True):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.enc, self.dec = hpack.Encoder(), hpack.Decoder()
        self.buf, self.eof = b"", False
        self.got = []  # every frame read, in order; HEADERS carry .fields
        if preface:
            self.send(PREFACE + SettingsFrame(0, settings=settings or {}).serialize())

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self, deadline):
        self.sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""
        except socket.timeout:
            return False
        if not data:
            self.eof = True
        self.buf += data
        return bool(data)

    def next(self, timeout=5):
        """The next frame, or None at EOF (or after `timeout`). The server's SETTINGS are
        acknowledged as they come."""
        deadline = time.monotonic() + timeout
        while len(self.buf) < 9:
            if not self._fill(deadline):
                return None
        f, length = Frame.parse_frame_header(memoryview(self.buf[:9]))
        while len(self.buf) < 9 + length:
            if not self._fill(deadline):
                return None
        f.parse_body(memoryview(self.buf[9 : 9 + length]))
        self.buf = self.buf[9 + length :]
        if isinstance(f, (HeadersFrame, ContinuationFrame)):
            f.fields = [(n.decode(), v.decode()) for n, v in self.dec.decode(f.data, raw=True)]
        if isinstance(f, SettingsFrame) and "ACK" not in f.flags:
            self.send(SettingsFrame(0, flags=["ACK"]).serialize())
        self.got.append(f)
        return f

    def headers(self, sid, fields, end_stream=True):
        flags = ["END_HEADERS"] + (["END_STREAM"] if end_stream else [])
        self.send(HeadersFrame(sid, data=self.enc.encode(fields), flags=flags).serialize())

    def request(self, sid, method, path, extra=(), body=None, end_stream=True):
        """HEADERS, then the body in one DATA when there is one; `end_stream` False: a body
        announced and not sent."""
        self.headers(sid, [(":method", method), (":scheme", "http"), (":path", path),
                           (":authority", "test")] + list(extra),
                     end_stream=body is None and end_stream)
        if body is not None:
            self.send(DataFrame(sid, data=body, flags=["END_STREAM"]).serialize())

    def response(self, sid, timeout=5):
        """Stream `sid`'s answer: (status, [(name, value)] without :status, body, the
        RST_STREAM code or None), read up to its END_STREAM or its reset."""
        fields, body, status = [], b"", None
        for f in [f for f in self.got if f.stream_id == sid]:
            self.got.remove(f)  # read earlier, while waiting for another stream
            done = self._take(f, fields)
            if done is not None:
                return done
        while True:
            f = self.next(timeout)
            if f is None:
                raise AssertionError(f"stream {sid}: EOF or no frame within {timeout}s")
            if f.stream_id != sid:
                continue
            self.got.remove(f)
            done = self._take(f, fields)
            if done is not None:
                return done

    def _take(self, f, acc):
        if not hasattr(self, "_body"):
            self._body = {}
        b = self._body.setdefault(f.stream_id, [b""])
        if isinstance(f, HeadersFrame):
            acc.extend(f.fields)
        elif isinstance(f, DataFrame):
            b[0] += f.data
        elif isinstance(f, RstStreamFrame):
            return self._done(f.stream_id, acc, f.error_code)
        if "END_STREAM" in f.flags:
            return self._done(f.stream_id, acc, None)
        return None

    def _done(self, sid, acc, rst):
        body = self._body.pop(sid, [b""])[0]
        status = next((int(v) for n, v in acc if n == ":status"), None)
        return status, [(n, v) for n, v in acc if n != ":status"], body, rst

    def goaway(self, timeout=5):
        """The GOAWAY the server sends next (frames before it are kept), or None at EOF."""
        while True:
            f = self.next(timeout)
            if f is None or isinstance(f, GoAwayFrame):
                return f

    def expect_eof(self, timeout=5):
        """Frames until EOF (none expected but a GOAWAY); EOF must come within `timeout`."""
        deadline = time.monotonic() + timeout
        while self.next(max(0.01, deadline - time.monotonic())) is not None:
            pass
        check(self.eof, f"the server did not close within {timeout}s")


def field(fields, name):
    return next((v for n, v in fields if n == name), None)


def curl(*args):
    p = subprocess.run([tool("curl", "curl"), "-sS", "--max-time", "10", *args],
                       capture_output=True, timeout=30)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def test_HT1_curl_prior_knowledge_and_http11_on_one_port():
    """curl --http2-prior-knowledge gets `2 200` and the exact bodies, HEAD and POST included;
    curl without it gets `1.1 200` on the same port; the access line and the metrics name the
    protocol (HT1)."""
    mport = free_port()
    env = {"M0_THREADS": 1, "M0_ACCESS_LOG": "on", "M0_METRICS": f"127.0.0.1:{mport}"}
    with Server("host_check", env=env) as s:
        s.wait_ready()
        url = f"http://127.0.0.1:{s.port}"
        w = ["-w", "\n%{http_version} %{http_code}"]
        eq(curl("--http2-prior-knowledge", *w, url + "/health")[:2], (0, b"ok\n\n2 200"),
           "GET /health over h2")
        eq(curl(*w, url + "/health")[:2], (0, b"ok\n\n1.1 200"), "GET /health over HTTP/1.1")
        eq(curl("--http2-prior-knowledge", *w, "-H", "Content-Type: application/json",
                "--data-binary", '{"a":[1,2]}', url + "/echo")[:2],
           (0, b'{"a":[1,2]}\n2 200'), "POST /echo over h2")
        eq(curl("--http2-prior-knowledge", *w, url + "/nope")[:2], (0, b"404 Not Found\n\n2 404"),
           "GET /nope over h2: the host's 404, its built-in body")
        rc, out, _ = curl("--http2-prior-knowledge", "-I", url + "/health")
        eq(rc, 0, "HEAD over h2")
        check(re.match(rb"HTTP/2 200 ?\r\n", out) and b"\r\ncontent-length: 3\r\n" in out,
              f"HEAD /health over h2: {out!r}")
        s.wait_log(r"GET /health 200 3 \(h2\)$")
        s.wait_log(r"GET /health 200 3$")
        s.wait_log(r"POST /echo 200 11 \(h2\)$")
        rc, text, _ = curl(f"http://127.0.0.1:{mport}/metrics")
        eq(rc, 0, "the scrape")
        # /health, /echo, /nope and the HEAD over h2; the /health over HTTP/1.1 is not one
        check(re.search(rb'^m0_http2_requests_total\{loop="0"\} 4$', text, re.M),
              f"m0_http2_requests_total: {text.decode()[-2000:]}")
        eq(s.stop(), 0, "exit status")


def test_HT1_h2load_2000_requests_no_error():
    """h2load: 2000 requests, 4 connections, 10 streams each at once, on /x/now: every one 2xx,
    none failed or errored (HT1, HT6)."""
    with Server("ramp", env={"M0_THREADS": 2}) as s:
        s.wait_ready()
        p = subprocess.run([tool("h2load", "nghttp2-client"), "-n", "2000", "-c", "4", "-m", "10",
                            f"http://127.0.0.1:{s.port}/x/now"], capture_output=True, timeout=60)
        out = p.stdout.decode()
        eq(p.returncode, 0, f"h2load's exit status: {out}")
        check("requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, "
              "0 errored, 0 timeout" in out, out)
        check("status codes: 2000 2xx, 0 3xx, 0 4xx, 0 5xx" in out, out)
        eq(s.stop(), 0, "exit status")


test_HT1_h2load_2000_requests_no_error.serial = True


def test_HT1_h2_by_alpn_on_the_tls_socket():
    """On a socket named https, a client that offers h2 by ALPN speaks HTTP/2 (HT1, TL1): curl
    --http2 gets `2 200` with the exact body, curl --http1.1 `1.1 200` on the same socket, and
    h2load over TLS completes every request with the protocol it names h2; an event stream is
    served over it (HT3)."""
    from test_tls import Certs

    c = Certs()
    try:
        crt, key = c.leaf("a", "a.test")
        with Server("host_check", env={"M0_TLS_CERT": crt, "M0_TLS_KEY": key},
                    sockets=[("tcp", "http"), ("tcp", "https")]) as s:
            s.wait_ready()
            port = next(sock.getsockname()[1] for _, name, sock in s.listeners if name == "https")
            base = ["--cacert", c.ca, "--resolve", f"a.test:{port}:127.0.0.1", "-w",
                    "\n%{http_version} %{http_code}"]
            url = f"https://a.test:{port}"
            eq(curl("--http2", *base, url + "/health")[:2], (0, b"ok\n\n2 200"), "h2 by ALPN")
            eq(curl("--http1.1", *base, url + "/health")[:2], (0, b"ok\n\n1.1 200"),
               "HTTP/1.1 by ALPN on the same socket")
            eq(curl("--http2", *base, "-H", "Content-Type: application/json", "--data-binary",
                    '{"a":1}', url + "/echo")[:2], (0, b'{"a":1}\n2 200'), "POST over h2 on TLS")
            # an event stream over h2 by ALPN (HT3): its first bytes, then host_check's beats,
            # until curl's --max-time cuts it (exit 28)
            rc, out, _ = curl("--http2", "-N", *base[:-2], "--max-time", "1", "-w",
                              "%{http_version} %{http_code}", url + "/events")
            check(rc == 28 and out.startswith(OPEN) and out.endswith(b"\n\n2 200") and
                  re.search(rb"\nid: \d+\nevent: beat\ndata: \{\"beat\":\d+,", out),
                  f"an event stream over h2 on TLS: {rc} {out[:300]!r}")
            p = subprocess.run([tool("h2load", "nghttp2-client"), "-n", "200", "-c", "2", "-m", "10",
                                f"https://127.0.0.1:{port}/health"], capture_output=True,
                               timeout=60)
            out = p.stdout.decode()
            eq(p.returncode, 0, f"h2load's exit status: {out}")
            check("Application protocol: h2" in out, out)
            check("requests: 200 total, 200 started, 200 done, 200 succeeded, 0 failed, "
                  "0 errored, 0 timeout" in out, out)
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


def h1_answer(port, method, path, headers, body):
    """The HTTP/1.1 answer to one request on a connection of its own, as (status, {name:
    value} without what only HTTP/1.1 says, body)."""
    c = Conn.tcp(("127.0.0.1", port))
    try:
        r = c.exchange(method, path, headers=list(headers.items()), body=body)
    finally:
        c.close()
    skip = {"connection", "keep-alive", "date"}
    return r.status, sorted((n.lower(), v) for n, v in r.headers if n.lower() not in skip), r.body


def h2_answer(h, sid, method, path, headers, body):
    extra = [(n.lower(), v) for n, v in headers.items()]
    if body is not None:
        extra.append(("content-length", str(len(body))))
    h.request(sid, method, path, extra, body)
    status, fields, data, _ = h.response(sid)
    return status, sorted((n, v) for n, v in fields if n != "date"), data


def test_HT2_same_answers_as_http11():
    """The same requests over HTTP/1.1 and HTTP/2 get the same status, fields and bytes (HT2):
    a handler's, a capture's, routing's 404, 405 with Allow, OPTIONS, a CORS preflight and a
    CORS answer, 415 and 413 before the body, a blocking route on the pool, a JSON echo."""
    env = {"M0_THREADS": 1, "M0_BLOCKING_THREADS": 1, "M0_ROUTESCHECK_CORS": "https://a.example"}
    origin = {"Origin": "https://a.example"}
    cases = [
        ("GET", "/health", {}, None),
        ("GET", "/todos/42", {}, None),
        ("GET", "/users/7/posts/9?x=1", {}, None),
        ("GET", "/nope", {}, None),
        ("DELETE", "/health", {}, None),
        ("OPTIONS", "/todos", {}, None),
        ("OPTIONS", "/todos", dict(origin, **{"Access-Control-Request-Method": "POST",
                                              "Access-Control-Request-Headers": "content-type"}),
         None),
        ("GET", "/todos", origin, None),
        ("GET", "/files/a%00b", {}, None),
        ("GET", "/pool/5", {}, None),
        ("POST", "/todos", {"Content-Type": "application/json"}, b'{"t":"x"}'),
        ("POST", "/todos", {"Content-Type": "text/plain"}, b"x"),
        ("POST", "/upload", {"Content-Type": "application/octet-stream"}, b"y" * 100),
        ("HEAD", "/health", {}, None),
    ]
    with Server("routes_check", env=env) as s:
        s.wait_ready()
        h = H2(s.port)
        for i, (method, path, headers, body) in enumerate(cases):
            want = h1_answer(s.port, method, path, headers, body)
            got = h2_answer(h, 1 + 2 * i, method, path, headers, body)
            eq(got, want, f"{method} {path} {headers}: HTTP/2 against HTTP/1.1")
        h.close()
        eq(s.stop(), 0, "exit status")


def test_HT2_bounds_before_the_body_and_431():
    """413 (by Content-Length, past the route's bound) and 415 come before a byte of the body is
    sent, then RST_STREAM NO_ERROR asks the client to stop (RFC 9113 8.1); a decoded header list
    past M0_MAX_HEAD_BYTES or M0_MAX_HEADER_FIELDS gets HTTP/1.1's 431, and the connection goes
    on (HT2, HT4)."""
    env = {"M0_THREADS": 1, "M0_MAX_HEAD_BYTES": 1024, "M0_MAX_HEADER_FIELDS": 20}
    with Server("host_check", env=env) as s:
        s.wait_ready()
        h = H2(s.port)
        h.request(1, "POST", "/q/small", [("content-length", "100")], end_stream=False)
        status, fields, body, rst = h.response(1)
        eq((status, field(fields, "content-type"), body),
           (413, "text/plain; charset=utf-8", b"413 Content Too Large\n"), "413 before the body")
        # the server's END_STREAM came while the request is open: it resets the stream, no error
        f = h.next()
        eq((type(f).__name__, f.stream_id, getattr(f, "error_code", None)),
           ("RstStreamFrame", 1, NO_ERROR), "RST_STREAM after the early answer")
        h.request(3, "POST", "/q/typed", [("content-type", "text/plain"),
                                          ("content-length", "2")], end_stream=False)
        status, _, body, _ = h.response(3)
        eq((status, body), (415, b"415 Unsupported Media Type: the body must be application/json "
                                 b"or a +json type\n"), "415 before the body")
        big = [(f"x-f{i}", "v" * 60) for i in range(16)]
        h.request(5, "GET", "/health", big)
        status, _, body5, _ = h.response(5)
        eq((status, body5), (431, b"431 Request Header Fields Too Large\n"),
           "431: the decoded list past M0_MAX_HEAD_BYTES")
        many = [(f"x-{i}", "1") for i in range(21)]
        h.request(7, "GET", "/health", many)
        eq(h.response(7)[0], 431, "431: past M0_MAX_HEADER_FIELDS")
        h.request(9, "GET", "/health", many[:18])
        eq(h.response(9)[:3:2], (200, b"ok\n"), "18 fields and :authority: within the bound")
        # HTTP/1.1's 431 to the same list says the same
        c = s.connect()
        r = c.exchange("GET", "/health", headers=big)
        eq((r.status, r.body), (431, body5), "HTTP/1.1's 431")
        h.close()
        eq(s.stop(), 0, "exit status")


def test_HT2_request_body_flow_control():
    """A body larger than the stream's window (M0_H2_WINDOW_BYTES, 65535) arrives whole: m0
    opens the window as it takes the bytes, with WINDOW_UPDATE on the stream and on the
    connection (RFC 9113 6.9, HT2)."""
    with Server("host_check", env={"M0_THREADS": 1}) as s:
        s.wait_ready()
        h = H2(s.port)
        body = bytes(range(256)) * 800  # 204800 bytes
        h.headers(1, [(":method", "POST"), (":scheme", "http"), (":path", "/echo"),
                      (":authority", "t"), ("content-length", str(len(body)))], end_stream=False)
        sent, window, updates = 0, 65535, {0: 0, 1: 0}
        while sent < len(body):
            n = min(16384, len(body) - sent, window)
            if n == 0:
                f = h.next()
                check(f is not None, "the server closed while the body's window was shut")
                if isinstance(f, WindowUpdateFrame):
                    updates[f.stream_id] = updates.get(f.stream_id, 0) + f.window_increment
                    window = max(0, 65535 + min(updates[0], updates[1]) - sent)
                continue
            last = sent + n == len(body)
            h.send(DataFrame(1, data=body[sent:sent + n],
                             flags=["END_STREAM"] if last else []).serialize())
            sent += n
            window -= n
        check(updates[1] > 0 and updates[0] > 0, f"WINDOW_UPDATEs: {updates}")
        # the answer's DATA passes the client's window of 65535: open it
        h.send(WindowUpdateFrame(0, window_increment=1 << 20).serialize())
        h.send(WindowUpdateFrame(1, window_increment=1 << 20).serialize())
        status, _, got, rst = h.response(1)
        eq((status, len(got), got == body, rst), (200, len(body), True, None), "the echo")
        h.close()
        eq(s.stop(), 0, "exit status")


# ---- HT3: event streams as HTTP/2 streams ----

OPEN = b": open\n\nretry: 2000\n\n"  # a stream's first bytes, as over HTTP/1.1 (S1, H9)
BYE = b": bye\n\n"
HEARTBEAT = b": heartbeat\n\n"


def value_event(i, value=None):
    """The counter's event `i` (its value `value`, i by default), as its streams carry it."""
    value = i if value is None else value
    return f'id: {i}\nevent: value\ndata: {{"counter":"default","value":{value}}}\n\n'.encode()


class Streams:
    """What each of a connection's streams got: its fields, its DATA bytes, whether it ended
    (END_STREAM) and its RST_STREAM code. `windows`: the streams whose window the client opens
    again as their bytes come (the connection's always is)."""

    def __init__(self, h, windows=None):
        self.h, self.windows = h, windows
        self.fields, self.data, self.ended, self.rst = {}, {}, set(), {}
        self.pings = set()

    def _take(self, f):
        sid = f.stream_id
        if isinstance(f, HeadersFrame):
            self.fields.setdefault(sid, []).extend(f.fields)
        elif isinstance(f, DataFrame):
            self.data[sid] = self.data.get(sid, b"") + f.data
            if f.data:
                out = WindowUpdateFrame(0, window_increment=len(f.data)).serialize()
                if self.windows is None or sid in self.windows:
                    out += WindowUpdateFrame(sid, window_increment=len(f.data)).serialize()
                self.h.send(out)
        elif isinstance(f, RstStreamFrame):
            self.rst[sid] = f.error_code
        elif isinstance(f, PingFrame) and "ACK" in f.flags:
            self.pings.add(bytes(f.opaque_data))
        if sid and "END_STREAM" in getattr(f, "flags", ()):
            self.ended.add(sid)

    def until(self, done, what, timeout=10):
        """Read frames until `done(self)`; fail after `timeout`."""
        for f in list(self.h.got):
            self.h.got.remove(f)
            self._take(f)
        deadline = time.monotonic() + timeout
        while not done(self):
            f = self.h.next(max(0.01, deadline - time.monotonic()))
            if f is None:
                raise AssertionError(f"{what}: not within {timeout}s (eof {self.h.eof}); "
                                     f"data {dict(list(self.data.items())[:4])} rst {self.rst}")
            self.h.got.remove(f)
            self._take(f)

    def quiet(self, seconds):
        """Frames for `seconds`, which must bring no stream's bytes."""
        before = dict(self.data)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            f = self.h.next(max(0.01, deadline - time.monotonic()))
            if f is None and self.h.eof:
                break
            if f is not None:
                self.h.got.remove(f)
                self._take(f)
        eq(self.data, before, "bytes that came while nothing was published")


def open_events(h, sids, path="/events", extra=()):
    h.send(b"".join(HeadersFrame(sid, data=h.enc.encode(
        [(":method", "GET"), (":scheme", "http"), (":path", path), (":authority", "test")]
        + list(extra)), flags=["END_HEADERS", "END_STREAM"]).serialize() for sid in sids))


def check_event_head(fields, what):
    names = [n for n, _ in fields]
    eq(field(fields, ":status"), "200", f"{what}: status")
    eq(field(fields, "content-type"), "text/event-stream", f"{what}: content-type")
    eq(field(fields, "cache-control"), "no-cache", f"{what}: cache-control")
    check("content-length" not in names, f"{what}: a content-length: {fields}")


def increment(s):
    """POST /increment over HTTP/1.1: its event's id."""
    r = s.connect().exchange("POST", "/increment")
    eq((r.status, r.body), (204, b""), "POST /increment")
    return int(r.header("x-event-id"))


def test_HT3_hundred_event_streams_on_one_connection():
    """100 event streams on one HTTP/2 connection (counter's /events): each gets HEADERS (200,
    text/event-stream, no content-length) and `: open`; a request on the same connection is
    answered while they are open; one POST over HTTP/1.1 reaches every stream, exactly its
    event, and nothing more; streams the client resets follow nothing more while the others
    get the next event (HT3)."""
    env = {"M0_THREADS": 1, "M0_H2_MAX_STREAMS": 200, "M0_SSE_HEARTBEAT_MS": 0}
    with Server("counter", env=env, state_dir=True) as s:
        s.wait_ready()
        h = H2(s.port)
        sids = list(range(1, 201, 2))
        open_events(h, sids)
        st = Streams(h)
        st.until(lambda t: all(t.data.get(i) == OPEN for i in sids), "100 streams' : open")
        for i in sids:
            check_event_head(st.fields[i], f"stream {i}")
        h.request(201, "GET", "/")
        st.until(lambda t: 201 in t.ended, "GET / while the streams are open")
        eq((field(st.fields[201], ":status"), st.data.get(201)), ("200", b"{}\n"), "GET /")
        eq(increment(s), 1, "the event's id")
        want = OPEN + value_event(1)
        st.until(lambda t: all(len(t.data[i]) >= len(want) for i in sids), "the event")
        for i in sids:
            eq(st.data[i], want, f"stream {i}'s bytes")
        st.quiet(0.3)
        eq((st.ended & set(sids), st.rst), (set(), {}), "no stream ended by m0")
        # the client resets half: their channels are followed no more (a freed stream that
        # was still followed would be found by ASan at the next delivery)
        h.send(b"".join(RstStreamFrame(i, error_code=0x8).serialize() for i in sids[:50]) +
               PingFrame(0, opaque_data=b"afterrst").serialize())
        st.until(lambda t: b"afterrst" in t.pings, "the PING after the resets")  # all read
        eq(increment(s), 2, "the second event's id")
        want2 = want + value_event(2)
        st.until(lambda t: all(len(t.data[i]) >= len(want2) for i in sids[50:]), "event 2")
        for i in sids[50:]:
            eq(st.data[i], want2, f"stream {i}'s bytes after the second POST")
        for i in sids[:50]:
            eq(st.data[i], want, f"reset stream {i}: nothing after its reset")
        h.close()
        eq(s.stop(), 0, "exit status")


test_HT3_hundred_event_streams_on_one_connection.serial = True


def test_HT3_hundred_event_sources_in_chromium_on_one_connection():
    """The browser's proof (HT3): headless Chromium loads counter's page over https (h2 by
    ALPN), opens 100 EventSources to its /events, asks GET / and POST /increment with fetch()
    while all 100 are open, and every one of the 100 receives event 1 with its exact data. The
    DevTools protocol reports each response (the page, 100 streams, the two fetches, the
    browser's favicon) over h2 on one connection, and m0 counts every request it answered as
    HTTP/2: the six-connection limit of HTTP/1.1 is gone. (Chromium opened a second TLS
    connection to m0 in the runs here, which the DevTools protocol names for no response.)
    M0_H2_MAX_STREAMS is 200 so that the fetches fit beside the 100 open streams (at the default
    100 the browser would queue them until a stream ends)."""
    from test_metrics import samples, scrape, total
    from test_tls import Certs, _counter_tls, _https_addr, chromium_page, response_counts

    c = Certs()
    try:
        mport = free_port()
        env = {"M0_THREADS": 1, "M0_H2_MAX_STREAMS": 200, "M0_METRICS": f"127.0.0.1:{mport}"}
        with _counter_tls(c, env) as s:
            s.wait_ready()
            origin = f"https://a.test:{_https_addr(s)[1]}"
            page, responses = chromium_page(c, s, 100)
            eq(page, {"origin": origin, "index": [200, "{}\n"], "post": [204, "1"], "open": 100,
                      "events": [["1", '{"counter":"default","value":1}']] * 100},
               "what the page saw")
            eq(response_counts(responses),
               [((origin + "/", 200, "h2"), 2), ((origin + "/events", 200, "h2"), 100),
                ((origin + "/increment", 204, "h2"), 1)], "the responses Chromium reported")
            conns = collections.Counter(r["connectionId"] for r in responses)
            eq(len(conns), 1, f"the connections Chromium used, with their responses: {conns}")
            st, _, body = scrape(("127.0.0.1", mport))
            eq(st, 200, "GET /metrics")
            smp = samples(body)
            h2, every = total(smp, "m0_http2_requests_total"), total(smp, "m0_requests_total")
            eq(h2, every, "m0's requests over h2, of all it answered")
            check(every in (103, 104), f"m0 answered {every} requests (103, and the favicon)")
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


# run.py runs it alone: a browser takes both cores for a while.
test_HT3_hundred_event_sources_in_chromium_on_one_connection.serial = True
test_HT3_hundred_event_sources_in_chromium_on_one_connection.once = True  # a browser: the plain variant only (run.py, D235)


def test_HT3_replay_heartbeats_and_the_drain():
    """An h2 event stream with last-event-id: 1 gets events 2 and 3 replayed after `: open`;
    one without gets none, then both get the next live event and heartbeats; SIGTERM gives
    each of ten streams `: bye` and END_STREAM, the GOAWAYs, the close, and exit 0 (HT3, HT5)."""
    env = {"M0_THREADS": 1, "M0_SSE_HEARTBEAT_MS": 200}
    with Server("counter", env=env, state_dir=True) as s:
        s.wait_ready()
        for i in (1, 2, 3):
            eq(increment(s), i, "the event's id")
        h = H2(s.port)
        open_events(h, [1], extra=[("last-event-id", "1")])
        open_events(h, range(3, 21, 2))
        st = Streams(h)
        replayed = OPEN + value_event(2) + value_event(3)
        st.until(lambda t: len(t.data.get(1, b"")) >= len(replayed) and
                 all(t.data.get(i) for i in range(3, 21, 2)), "the streams' first bytes")
        eq(st.data[1][:len(replayed)], replayed, "stream 1: the replay after last-event-id 1")
        eq(st.data[3][:len(OPEN)], OPEN, "stream 3: : open")
        eq(increment(s), 4, "the live event's id")
        st.until(lambda t: all(value_event(4) in t.data[i] and
                               t.data[i].endswith(HEARTBEAT) for i in range(1, 21, 2)),
                 "event 4 and a heartbeat after it")
        for i in range(1, 21, 2):
            first = replayed if i == 1 else OPEN
            eq(st.data[i].replace(HEARTBEAT, b""), first + value_event(4), f"stream {i}'s events")
        s.send_signal(signal.SIGTERM)
        h.expect_eof()
        goaways = [(f.last_stream_id, f.error_code) for f in h.got if isinstance(f, GoAwayFrame)]
        for f in list(h.got):
            h.got.remove(f)
            st._take(f)
        for i in range(1, 21, 2):
            check(st.data[i].endswith(HEARTBEAT + BYE) or st.data[i].endswith(value_event(4) + BYE),
                  f"stream {i}: no `: bye` at its end: {st.data[i][-60:]!r}")
        eq(st.ended, set(range(1, 21, 2)), "END_STREAM on every stream")
        eq(st.rst, {}, "no stream reset")
        eq(goaways, [(0x7FFFFFFF, NO_ERROR), (19, NO_ERROR)], "the GOAWAYs")
        h.close()
        eq(s.wait_exit(5), 0, "exit status")


def test_HT3_a_stream_whose_window_stays_shut_is_reset():
    """The slow-subscriber rule per stream: two streams with windows of 100 bytes; the client
    opens stream 3's again as it reads, never stream 1's. Once more than M0_MAX_OUTPUT_BYTES
    (4096) wait for stream 1's window it is reset (CANCEL); stream 3 gets every event, the
    connection goes on and answers (HT3)."""
    env = {"M0_THREADS": 1, "M0_SSE_HEARTBEAT_MS": 0, "M0_MAX_OUTPUT_BYTES": 4096}
    with Server("counter", env=env, state_dir=True) as s:
        s.wait_ready()
        h = H2(s.port, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 100})
        open_events(h, [1, 3])
        st = Streams(h, windows={3})
        st.until(lambda t: t.data.get(1) == OPEN and t.data.get(3) == OPEN, ": open")
        poster = s.connect()
        n = 0
        while 1 not in st.rst and n < 300:
            n += 1
            r = poster.exchange("POST", "/increment")
            eq(r.status, 204, "POST /increment")
            st.until(lambda t: value_event(n) in t.data[3] or 1 in t.rst, f"event {n}")
        eq(st.rst.get(1), 0x8, "stream 1: RST_STREAM CANCEL")
        # 100 bytes went out of stream 1; past them, more than 4096 waited
        eq(st.data[1], (OPEN + b"".join(value_event(i) for i in range(1, n + 1)))[:100],
           "stream 1: what its window let out")
        check(60 <= n <= 90, f"stream 1 reset after {n} events of ~55 bytes")
        for k in range(2):
            n += 1
            eq(poster.exchange("POST", "/increment").status, 204, "POST /increment")
        want = OPEN + b"".join(value_event(i) for i in range(1, n + 1))
        st.until(lambda t: len(t.data[3]) >= len(want), "stream 3 after the reset")
        eq(st.data[3], want, "stream 3: every event")
        h.request(5, "GET", "/")
        st.until(lambda t: 5 in t.ended, "GET / on the same connection")
        eq(field(st.fields[5], ":status"), "200", "GET /")
        h.close()
        eq(s.stop(), 0, "exit status")


def test_HT5_sigterm_goaway_answers_admitted_streams():
    """SIGTERM: RFC 9113 6.8's graceful shutdown. GOAWAY NO_ERROR of 2^31-1 first, then, after
    M0_DRAIN_IDLE_MS, GOAWAY NO_ERROR naming the last stream admitted (3, a pool request in
    flight, sent just before the signal); that stream's whole answer; the close; exit 0 (HT5)."""
    with Server("host_check", env={"M0_THREADS": 1, "M0_BLOCKING_THREADS": 2}) as s:
        s.wait_ready()
        h = H2(s.port)
        h.request(1, "GET", "/health")
        eq(h.response(1)[2], b"ok\n", "stream 1")
        h.request(3, "GET", "/slow?ms=300")
        s.send_signal(signal.SIGTERM)
        h.expect_eof()
        goaways = [(f.last_stream_id, f.error_code) for f in h.got if isinstance(f, GoAwayFrame)]
        eq(goaways, [(0x7FFFFFFF, NO_ERROR), (3, NO_ERROR)], "the GOAWAYs")
        status, _, body, rst = h.response(3)
        eq((status, body, rst), (200, b'{"slept_ms":300}\n', None), "stream 3, answered whole")
        h.close()
        eq(s.wait_exit(5), 0, "exit status")


def test_HT5_stream_after_the_notice_is_refused():
    """A stream opened after the last GOAWAY is not admitted: nghttp2 drops it, and its number
    is past the GOAWAY's (RFC 9113 6.8); the connection still ends cleanly, exit 0 (HT5)."""
    with Server("host_check", env={"M0_THREADS": 1, "M0_DRAIN_IDLE_MS": 0}) as s:
        s.wait_ready()
        h = H2(s.port)
        h.request(1, "GET", "/health")
        eq(h.response(1)[2], b"ok\n", "stream 1")
        s.send_signal(signal.SIGTERM)
        g = h.goaway()
        eq((g.last_stream_id, g.error_code), (0x7FFFFFFF, NO_ERROR), "the notice")
        g = h.goaway()
        eq((g.last_stream_id, g.error_code), (1, NO_ERROR), "the last GOAWAY, at once")
        try:
            h.request(3, "GET", "/health")
        except (BrokenPipeError, ConnectionResetError):
            pass
        h.expect_eof()
        check(not [f for f in h.got if f.stream_id == 3], f"stream 3 answered: {h.got}")
        h.close()
        eq(s.wait_exit(5), 0, "exit status")


# ---- HT6: raw frames, each case citing RFC 9113 ----


def expect_goaway(h, code, what):
    g = h.goaway()
    check(g is not None, f"{what}: EOF without a GOAWAY")
    eq(g.error_code, code, f"{what}: GOAWAY's error code")
    h.expect_eof()
    return g


def expect_rst(h, sid, code, what):
    status, _, _, rst = h.response(sid)
    eq((status, rst), (None, code), f"{what}: RST_STREAM")


def test_HT6_preface_and_settings():
    """RFC 9113 3.4: the server's preface is a SETTINGS frame, m0's values in it, and it
    acknowledges the client's (6.5.3); a missing client preface ends the connection (3.4);
    SETTINGS with ACK and a payload is FRAME_SIZE_ERROR (6.5); ENABLE_PUSH 2 and
    INITIAL_WINDOW_SIZE past 2^31-1 are PROTOCOL_ERROR and FLOW_CONTROL_ERROR (6.5.2)."""
    with Server("host_check", env={"M0_THREADS": 1}) as s:
        s.wait_ready()
        h = H2(s.port, settings={SettingsFrame.MAX_CONCURRENT_STREAMS: 7})
        f = h.next()
        eq((type(f).__name__, "ACK" in f.flags), ("SettingsFrame", False), "first frame")
        eq(dict(f.settings), {SettingsFrame.MAX_CONCURRENT_STREAMS: 100,
                              SettingsFrame.INITIAL_WINDOW_SIZE: 65535,
                              SettingsFrame.MAX_HEADER_LIST_SIZE: 32768,
                              SettingsFrame.ENABLE_CONNECT_PROTOCOL: 1}, "m0's SETTINGS")
        acks = [f for f in iter(lambda: h.next(1), None)
                if isinstance(f, SettingsFrame) and "ACK" in f.flags]
        eq(len(acks), 1, "6.5.3: the client's SETTINGS acknowledged once")
        h.close()

        # 3.4: the preface split across writes is still the preface
        h = H2(s.port, preface=False)
        h.send(PREFACE[:9])
        time.sleep(0.05)  # so the server reads the first part alone
        h.send(PREFACE[9:] + SettingsFrame(0).serialize())
        h.request(1, "GET", "/health")
        eq(h.response(1)[:3:2], (200, b"ok\n"), "a preface in two writes")
        h.close()

        # 3.4: a connection whose first bytes are HTTP/1.1's is HTTP/1.1; one that begins the
        # preface and breaks it is refused, as no HTTP/1.1 request either
        c = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        c.sendall(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n")
        c.settimeout(5)
        data = c.recv(65536)
        check(data.startswith(b"HTTP/1.1 400 ") or data.startswith(b"HTTP/1.1 505 "), data)
        c.close()

        for what, payload, code in [
            ("6.5: SETTINGS ACK with a payload", raw_frame(4, 1, 0, b"\0\3\0\0\0\1"),
             FRAME_SIZE_ERROR),
            ("6.5: SETTINGS of 5 bytes", raw_frame(4, 0, 0, b"\0\3\0\0\0"), FRAME_SIZE_ERROR),
            ("6.5: SETTINGS on a stream", raw_frame(4, 0, 1, b""), PROTOCOL_ERROR),
            ("6.5.2: ENABLE_PUSH 2", raw_frame(4, 0, 0, struct.pack(">HI", 2, 2)),
             PROTOCOL_ERROR),
            ("6.5.2: INITIAL_WINDOW_SIZE 2^31", raw_frame(4, 0, 0, struct.pack(">HI", 4, 1 << 31)),
             FLOW_CONTROL_ERROR),
            ("6.5.2: MAX_FRAME_SIZE 16383", raw_frame(4, 0, 0, struct.pack(">HI", 5, 16383)),
             PROTOCOL_ERROR),
        ]:
            h = H2(s.port)
            h.send(payload)
            expect_goaway(h, code, what)
            h.close()
        eq(s.stop(), 0, "exit status")


def test_HT6_frame_sizes_and_stream_states():
    """RFC 9113 4.2: a frame past SETTINGS_MAX_FRAME_SIZE is FRAME_SIZE_ERROR, as is a PING of 7
    bytes (6.7) and a WINDOW_UPDATE of 3 (6.9); 5.1: DATA on an idle stream and HEADERS on an even
    stream id (5.1.1) are PROTOCOL_ERROR; DATA on a closed
    stream is STREAM_CLOSED (5.1); a WINDOW_UPDATE of 0 on the connection is PROTOCOL_ERROR
    (6.9); a window past 2^31-1 is FLOW_CONTROL_ERROR (6.9.1); PRIORITY is read and ignored
    (5.3.2); an unknown frame type is ignored (4.1)."""
    with Server("host_check", env={"M0_THREADS": 1}) as s:
        s.wait_ready()
        for what, build, code in [
            ("4.2: DATA past MAX_FRAME_SIZE", lambda h: (
                h.headers(1, [(":method", "POST"), (":scheme", "http"), (":path", "/echo"),
                              (":authority", "t")], end_stream=False),
                h.send(raw_frame(0, 0, 1, b"x" * 16385))), FRAME_SIZE_ERROR),
            ("6.7: PING of 7 bytes", lambda h: h.send(raw_frame(6, 0, 0, b"1234567")),
             FRAME_SIZE_ERROR),
            ("6.9: WINDOW_UPDATE of 3 bytes", lambda h: h.send(raw_frame(8, 0, 0, b"\0\0\1")),
             FRAME_SIZE_ERROR),
            ("5.1: DATA on an idle stream", lambda h: h.send(raw_frame(0, 1, 1, b"x")),
             PROTOCOL_ERROR),
            ("5.1.1: HEADERS on stream 2", lambda h: h.headers(
                2, [(":method", "GET"), (":scheme", "http"), (":path", "/health"),
                    (":authority", "t")]), PROTOCOL_ERROR),
            ("6.9: WINDOW_UPDATE of 0 on the connection",
             lambda h: h.send(raw_frame(8, 0, 0, b"\0\0\0\0")), PROTOCOL_ERROR),
            ("6.9.1: the connection's window past 2^31-1", lambda h: h.send(
                raw_frame(8, 0, 0, struct.pack(">I", 0x7FFFFFFF))), FLOW_CONTROL_ERROR),
            ("6.8: GOAWAY on a stream", lambda h: h.send(raw_frame(7, 0, 1, b"\0" * 8)),
             PROTOCOL_ERROR),
        ]:
            h = H2(s.port)
            build(h)
            expect_goaway(h, code, what)
            h.close()

        h = H2(s.port)
        h.request(1, "GET", "/health")
        eq(h.response(1)[2], b"ok\n", "stream 1")
        h.send(raw_frame(0, 1, 1, b"x"))  # 5.1: DATA on stream 1, closed
        g = h.goaway()
        check(g is not None and g.error_code == STREAM_CLOSED, f"5.1: DATA on a closed stream: {g}")
        h.close()

        h = H2(s.port)
        h.send(raw_frame(2, 0, 1, b"\0\0\0\0\x10"))  # 5.3.2: PRIORITY on an idle stream
        h.send(raw_frame(0xFA, 0, 0, b"whatever"))  # 4.1: an unknown type
        h.send(PingFrame(0, opaque_data=b"12345678").serialize())
        while True:
            f = h.next()
            check(f is not None and not isinstance(f, GoAwayFrame), f"no PING ACK but {f}")
            if isinstance(f, PingFrame):
                eq((f.flags, f.opaque_data), ({"ACK"}, b"12345678"), "6.7: the PING's ACK")
                break
        h.request(3, "GET", "/health")
        eq(h.response(3)[2], b"ok\n", "PRIORITY and an unknown frame ignored")
        h.close()
        eq(s.stop(), 0, "exit status")


def test_HT6_fields_and_pseudo_headers():
    """RFC 9113 8.2.1: an upper-case field name; 8.2.2: connection-specific fields (Connection,
    Keep-Alive, Transfer-Encoding, Upgrade, TE other than trailers); 8.3: a pseudo-header after
    a regular field, an unknown one, a missing :path, a repeated :method, a response
    pseudo-header in a request; each is a malformed request, the stream reset PROTOCOL_ERROR,
    the connection going on. `te: trailers` is allowed (8.2.2); HPACK garbage, and a dynamic
    table grown past SETTINGS_HEADER_TABLE_SIZE, are a COMPRESSION_ERROR for the connection (4.3,
    HT4)."""
    base = [(":method", "GET"), (":scheme", "http"), (":path", "/health"), (":authority", "t")]
    bad = [
        ("8.2.1: upper-case name", base + [("X-Up", "1")]),
        ("8.2.2: connection", base + [("connection", "keep-alive")]),
        ("8.2.2: keep-alive", base + [("keep-alive", "timeout=5")]),
        ("8.2.2: transfer-encoding", base + [("transfer-encoding", "chunked")]),
        ("8.2.2: upgrade", base + [("upgrade", "websocket")]),
        ("8.2.2: te: gzip", base + [("te", "gzip")]),
        ("8.3: pseudo after regular", base[:3] + [("x-a", "1"), (":authority", "t")]),
        ("8.3: unknown pseudo-header", base + [(":foo", "1")]),
        ("8.3.1: no :path", [base[0], base[1], base[3]]),
        ("8.3.1: :method twice", base + [(":method", "GET")]),
        ("8.3.2: :status in a request", base + [(":status", "200")]),
        ("8.3.1: empty :path", [base[0], base[1], (":path", ""), base[3]]),
    ]
    with Server("host_check", env={"M0_THREADS": 1}) as s:
        s.wait_ready()
        h = H2(s.port)
        sid = 1
        for what, fields in bad:
            h.headers(sid, fields)
            expect_rst(h, sid, PROTOCOL_ERROR, what)
            sid += 2
        h.headers(sid, base + [("te", "trailers")])
        eq(h.response(sid)[:3:2], (200, b"ok\n"), "8.2.2: te: trailers")
        h.close()

        h = H2(s.port)
        h.send(raw_frame(1, 5, 1, b"\xff\xff\xff\xff\xff"))  # 4.3: an index past every table
        expect_goaway(h, COMPRESSION_ERROR, "4.3: HPACK that does not decode")
        h.close()

        # 4.3, RFC 7541 6.3: a dynamic table size update to 8192, past the 4096 m0 allows
        h = H2(s.port)
        block = b"\x3f\xe1\x3f" + hpack.Encoder().encode(base)
        h.send(raw_frame(1, 5, 1, block))
        expect_goaway(h, COMPRESSION_ERROR, "an HPACK table grown past its setting")
        h.close()
        eq(s.stop(), 0, "exit status")


def test_HT4_too_many_concurrent_streams():
    """RFC 9113 5.1.2: past SETTINGS_MAX_CONCURRENT_STREAMS (M0_H2_MAX_STREAMS, 3 here) a new
    stream is refused with RST_STREAM REFUSED_STREAM while the client has not acknowledged the
    setting, the open ones answered; once it has, libnghttp2 treats one more as the connection's
    PROTOCOL_ERROR, with GOAWAY (HT4)."""
    post = [(":method", "POST"), (":scheme", "http"), (":path", "/echo"), (":authority", "t")]
    with Server("host_check", env={"M0_THREADS": 1, "M0_H2_MAX_STREAMS": 3}) as s:
        s.wait_ready()
        h = H2(s.port)
        for sid in (1, 3, 5, 7):  # four bodies begun, none ended, before reading a frame
            h.headers(sid, post, end_stream=False)
        expect_rst(h, 7, REFUSED_STREAM, "the fourth stream")
        for sid in (1, 3, 5):
            h.send(DataFrame(sid, data=b"%d" % sid, flags=["END_STREAM"]).serialize())
            eq(h.response(sid)[:3:2], (200, b"%d" % sid), f"stream {sid}")
        h.close()

        h = H2(s.port)
        while not any(isinstance(f, SettingsFrame) and "ACK" in f.flags for f in h.got):
            check(h.next() is not None, "no SETTINGS ACK")  # ours acknowledged on the way
        for sid in (1, 3, 5, 7):
            h.headers(sid, post, end_stream=False)
        g = expect_goaway(h, PROTOCOL_ERROR, "a fourth stream past the acknowledged limit")
        eq(g.last_stream_id, 5, "GOAWAY's last stream")
        h.close()
        eq(s.stop(), 0, "exit status")


def test_HT4_rapid_reset_gets_goaway():
    """Rapid Reset (CVE-2023-44487): streams opened and reset at once, past M0_H2_RESET_RATE
    (50 here), get GOAWAY and the connection ends; a new connection is served (HT4)."""
    with Server("host_check", env={"M0_THREADS": 1, "M0_H2_RESET_RATE": 50}) as s:
        s.wait_ready()
        h = H2(s.port)
        out = b""
        for i in range(500):
            sid = 1 + 2 * i
            out += HeadersFrame(sid, data=h.enc.encode(
                [(":method", "GET"), (":scheme", "http"), (":path", "/health"),
                 (":authority", "t")]), flags=["END_HEADERS", "END_STREAM"]).serialize()
            out += RstStreamFrame(sid, error_code=0x8).serialize()
        try:
            h.send(out)
        except (BrokenPipeError, ConnectionResetError):
            pass
        g = h.goaway()
        check(g is not None, "no GOAWAY")
        check(g.error_code in (ENHANCE_YOUR_CALM, 0x2), f"GOAWAY's code: {g.error_code}")
        check(g.last_stream_id < 999, f"GOAWAY's last stream {g.last_stream_id}")
        h.expect_eof()
        h.close()
        h = H2(s.port)
        h.request(1, "GET", "/health")
        eq(h.response(1)[2], b"ok\n", "a new connection")
        h.close()
        eq(s.stop(), 0, "exit status")


def test_HT4_continuation_flood_gets_goaway():
    """The CONTINUATION flood (CVE-2024-27316): a header block in more CONTINUATION frames than
    m0 takes (8) ends the connection with GOAWAY, before the block is whole (HT4)."""
    with Server("host_check", env={"M0_THREADS": 1}) as s:
        s.wait_ready()
        h = H2(s.port)
        block = h.enc.encode([(":method", "GET"), (":scheme", "http"), (":path", "/health"),
                              (":authority", "t")])
        out = HeadersFrame(1, data=block, flags=["END_STREAM"]).serialize()
        for i in range(50):
            out += ContinuationFrame(1, data=h.enc.encode([("x-c", "1")])).serialize()
        try:
            h.send(out)
        except (BrokenPipeError, ConnectionResetError):
            pass
        expect_goaway(h, ENHANCE_YOUR_CALM, "CONTINUATION flood")
        check(not [f for f in h.got if isinstance(f, HeadersFrame)], f"an answer: {h.got}")
        h.close()
        eq(s.stop(), 0, "exit status")


def test_HT4_ping_flood_and_idle_connection():
    """A PING flood: more acknowledgements than m0 queues (1000) asked for at once end the
    connection with GOAWAY ENHANCE_YOUR_CALM; an idle connection gets GOAWAY NO_ERROR after
    M0_IDLE_TIMEOUT_MS and is closed; a new connection is served (HT4)."""
    env = {"M0_THREADS": 1, "M0_IDLE_TIMEOUT_MS": 400, "M0_LINGER_MS": 100}
    with Server("host_check", env=env) as s:
        s.wait_ready()
        h = H2(s.port)
        h.request(1, "GET", "/health")
        eq(h.response(1)[2], b"ok\n", "stream 1")
        t0 = time.monotonic()
        h.expect_eof(timeout=5)
        took = time.monotonic() - t0
        # M0_IDLE_TIMEOUT_MS=400 counts from the answer sent; `took` from the answer read
        check(0.1 <= took < 3, f"closed after {took:.2f}s idle")
        goaways = [(f.last_stream_id, f.error_code) for f in h.got if isinstance(f, GoAwayFrame)]
        eq(goaways, [(1, NO_ERROR)], "the idle connection's GOAWAY")
        h.close()

        h = H2(s.port)
        try:  # 20000 PINGs in one write: every read of them asks for thousands of ACKs
            h.send(PingFrame(0, opaque_data=b"87654321").serialize() * 20000)
        except (BrokenPipeError, ConnectionResetError):
            pass
        expect_goaway(h, ENHANCE_YOUR_CALM, "a PING flood")
        h.close()
        h = H2(s.port)
        h.request(1, "GET", "/health")
        eq(h.response(1)[2], b"ok\n", "a new connection is served")
        h.close()
        eq(s.stop(), 0, "exit status")


def test_HT4_settings_flood_and_too_many_entries():
    """A SETTINGS flood (CVE-2019-9515): 20000 SETTINGS frames in one write ask for more
    acknowledgements than m0 queues (1000): GOAWAY ENHANCE_YOUR_CALM. A SETTINGS frame of 33
    entries, past the 32 m0 works through: the same; 32 entries are taken and acknowledged. A
    new connection is served after each (HT4)."""
    with Server("host_check", env={"M0_THREADS": 1}) as s:
        s.wait_ready()
        h = H2(s.port)
        try:  # every read of them asks for thousands of ACKs
            h.send(SettingsFrame(0).serialize() * 20000)
        except (BrokenPipeError, ConnectionResetError):
            pass
        expect_goaway(h, ENHANCE_YOUR_CALM, "a SETTINGS flood")
        h.close()
        entry = struct.pack(">HI", SettingsFrame.MAX_CONCURRENT_STREAMS, 100)
        h = H2(s.port)
        h.send(raw_frame(4, 0, 0, entry * 33))
        expect_goaway(h, ENHANCE_YOUR_CALM, "a SETTINGS frame of 33 entries")
        h.close()
        h = H2(s.port)
        h.send(raw_frame(4, 0, 0, entry * 32))
        h.request(1, "GET", "/health")
        eq(h.response(1)[2], b"ok\n", "a new connection, 32 entries in a SETTINGS")
        acks = [f for f in h.got if isinstance(f, SettingsFrame) and "ACK" in f.flags]
        eq(len(acks), 2, "m0's acknowledgements: of the first SETTINGS and of the 32 entries")
        h.close()
        eq(s.stop(), 0, "exit status")


def tcp_state(sock):
    """The socket's TCP state (struct tcp_info's first byte): 1 established, 7 closed (a reset
    came), 8 close-wait (the peer's FIN came)."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


def test_HT4_ping_and_settings_floods_from_a_client_that_never_reads():
    """A client that stops reading: it opens its windows wide, posts 12 MB to /echo and reads
    nothing past the answer's first DATA, so m0's answer fills the socket and m0's output
    waits; then it sends PINGs (then, on another connection, SETTINGS) 10 to a write, too few
    to a read for a burst to pass the bound by itself. Their acknowledgements queue inside
    m0 up to the bound (1000), the session ends with a GOAWAY the client never reads, m0 reads
    no more of it, and the connection is closed by the write stall bound (M0_IDLE_TIMEOUT_MS,
    1 s) while the client still sends. m0's memory stays bounded meanwhile (its RSS grows by
    less than 16 MiB during the flood, unsanitized), and a new connection is served (HT4,
    D225)."""
    from test_channels import rss_kib, sanitized

    env = {"M0_THREADS": 1, "M0_IDLE_TIMEOUT_MS": 1000, "M0_LINGER_MS": 100,
           "M0_MAX_BODY_BYTES": 16 << 20}
    body = b"e" * (12 << 20)
    with Server("host_check", env=env) as s:
        s.wait_ready()
        for what, frame in (("PING", PingFrame(0, opaque_data=b"87654321").serialize()),
                            ("SETTINGS", SettingsFrame(0).serialize())):
            h = H2(s.port, settings={SettingsFrame.INITIAL_WINDOW_SIZE: (1 << 31) - 1})
            h.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            h.send(WindowUpdateFrame(0, window_increment=(1 << 31) - 1 - 65535).serialize())
            upload(h, 1, "/echo", body)
            while not any(isinstance(f, DataFrame) and f.stream_id == 1 for f in h.got):
                check(h.next() is not None, f"{what}: no answer to the upload")
            rss0 = rss_kib(s.pid)  # the last frame the client reads is that DATA
            k = h.sock
            k.setblocking(False)
            t0, ended, sent, pending = time.monotonic(), None, 0, b""
            while time.monotonic() - t0 < 10:
                if tcp_state(k) != 1:
                    ended = time.monotonic() - t0
                    break
                if not pending:
                    pending = frame * 10
                try:
                    n = k.send(pending)
                    pending, sent = pending[n:], sent + n
                except BlockingIOError:
                    time.sleep(0.01)  # m0 reads no more
                except (BrokenPipeError, ConnectionResetError):
                    ended = time.monotonic() - t0
                    break
                time.sleep(0.001)
            grew = rss_kib(s.pid) - rss0
            h.close()
            frames = sent // len(frame)
            check(ended is not None, f"{what}: the connection still open after 10 s, "
                  f"{frames} frames sent")
            check(1.0 <= ended < 6, f"{what}: closed after {ended:.2f}s, {frames} frames sent")
            check(frames > 1000, f"{what}: only {frames} frames sent")
            if not sanitized(s.pid):
                check(grew < 16384, f"{what}: m0's RSS grew by {grew} KiB")
        h = H2(s.port)
        h.request(1, "GET", "/health")
        eq(h.response(1)[2], b"ok\n", "a new connection is served")
        h.close()
        eq(s.stop(), 0, "exit status")


def upload(h, sid, path, body):
    """POST `body` on stream `sid`, sending DATA as far as m0's windows allow and reading its
    WINDOW_UPDATEs (RFC 9113 6.9): {stream id: the increments it gave}."""
    h.headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", path),
                    (":authority", "t"), ("content-length", str(len(body)))], end_stream=False)
    sent, window, updates = 0, 65535, {0: 0, sid: 0}
    while sent < len(body):
        n = min(16384, len(body) - sent, window)
        if n == 0:
            f = h.next()
            check(f is not None, "the server closed while the body's window was shut")
            if isinstance(f, WindowUpdateFrame):
                updates[f.stream_id] = updates.get(f.stream_id, 0) + f.window_increment
                window = max(0, 65535 + min(updates[0], updates[sid]) - sent)
            continue
        last = sent + n == len(body)
        h.send(DataFrame(sid, data=body[sent:sent + n],
                         flags=["END_STREAM"] if last else []).serialize())
        sent += n
        window -= n
    return updates


def test_HT4_a_client_that_never_opens_its_window():
    """An answer larger than the client's window (65535) to a client that never sends
    WINDOW_UPDATE: m0 sends what the window allows, then, nothing coming from the client for
    M0_IDLE_TIMEOUT_MS, GOAWAY and the close; the host goes on (HT4)."""
    env = {"M0_THREADS": 1, "M0_IDLE_TIMEOUT_MS": 500, "M0_LINGER_MS": 100}
    with Server("host_check", env=env) as s:
        s.wait_ready()
        h = H2(s.port)
        body = b"z" * 100000
        upload(h, 1, "/echo", body)
        t0 = time.monotonic()
        h.expect_eof(timeout=5)
        took = time.monotonic() - t0
        got = sum(len(f.data) for f in h.got if isinstance(f, DataFrame) and f.stream_id == 1)
        eq(got, 65535, "the answer's bytes sent: the client's window")
        goaways = [f.error_code for f in h.got if isinstance(f, GoAwayFrame)]
        eq(goaways, [NO_ERROR], "GOAWAY")
        check(0.1 <= took < 3, f"closed after {took:.2f}s (M0_IDLE_TIMEOUT_MS=500)")
        h.close()
        h = H2(s.port)
        h.request(1, "GET", "/health")
        eq(h.response(1)[2], b"ok\n", "a new connection is served")
        h.close()
        eq(s.stop(), 0, "exit status")


def test_HT2_pool_jobs_of_a_connection_that_left():
    """Two pool requests and one the client resets, on a connection the client then closes:
    the jobs come back to nobody, the connection is freed once the last has (ASan checks it),
    and the host answers on (HT2)."""
    env = {"M0_THREADS": 1, "M0_BLOCKING_THREADS": 2}
    with Server("host_check", env=env) as s:
        s.wait_ready()
        h = H2(s.port)
        h.request(1, "GET", "/slow?ms=200")
        h.request(3, "GET", "/slow?ms=100")
        h.send(RstStreamFrame(3, error_code=0x8).serialize())
        h.request(5, "GET", "/health")
        eq(h.response(5)[2], b"ok\n", "a loop request beside the pool's")
        h.close()
        # both pool threads are busy until 100 ms: this job ends past 350 ms, after the two
        # of the connection that left have come back to the loop
        h = H2(s.port)
        h.request(1, "GET", "/slow?ms=250")
        eq(h.response(1)[:3:2], (200, b'{"slept_ms":250}\n'), "a new connection")
        h.close()
        eq(s.stop(), 0, "exit status (under ASan: no leak, no use after free)")


def test_HT1_journal_entries_name_the_protocol():
    """M0_ACCESS_LOG=journal: each entry's M0_PROTOCOL says which protocol carried it, and an
    HTTP/2 answer's M0_BYTES is its body's (HT1)."""
    env = {"M0_ACCESS_LOG": "journal", "M0_THREADS": "1"}
    with Journald() as j, Server("host_check", env=env, preexec_fn=j.enter) as s:
        s.wait_ready()
        h = H2(s.port)
        h.request(1, "GET", "/health")
        eq(h.response(1)[2], b"ok\n", "over h2")
        h.close()
        c = s.connect()
        eq(c.get("/health").status, 200, "over HTTP/1.1")
        c.close()
        entries = [e for e in j.wait_entries(2, _PID=str(s.pid), M0_APP="host_check",
                                             PRIORITY="6") if "M0_STATUS" in e]
        eq([(e["M0_PROTOCOL"], e["M0_PATH"], e["M0_STATUS"]) for e in entries],
           [("h2", "/health", "200"), ("http/1.1", "/health", "200")], "the entries")
        eq(entries[0]["M0_BYTES"], "3", "HTTP/2: the body's bytes")
        check(int(entries[1]["M0_BYTES"]) > 100, f"HTTP/1.1: {entries[1]['M0_BYTES']}")
        eq(s.stop(), 0, "exit status")


def test_HT2_request_bodies_bounded_per_connection():
    """Bodies kept on one connection stay within M0_MAX_BODY_BYTES (20000 here): a second
    stream's bytes past it are taken but its windows stay shut (no WINDOW_UPDATE for the
    connection) until the first stream's body has gone to its handler; then both are answered
    whole (HT2, RFC 9113 6.9)."""
    with Server("host_check", env={"M0_THREADS": 1, "M0_MAX_BODY_BYTES": 20000}) as s:
        s.wait_ready()
        h = H2(s.port)
        post = [(":method", "POST"), (":scheme", "http"), (":path", "/echo"), (":authority", "t")]
        for sid in (1, 3):  # 19999 bytes of each body: neither is whole
            c = b"%d" % sid
            h.headers(sid, post + [("content-length", "20000")], end_stream=False)
            h.send(DataFrame(sid, data=c * 16384).serialize() +
                   DataFrame(sid, data=c * 3615).serialize())
        def barrier():
            h.send(PingFrame(0, opaque_data=b"barrier!").serialize())
            while True:
                f = h.next()
                check(f is not None, "EOF")
                if isinstance(f, PingFrame) and "ACK" in f.flags:
                    return
        barrier()
        barrier()  # every frame the DATA made came before this ACK
        conn_updates = [f.window_increment for f in h.got
                        if isinstance(f, WindowUpdateFrame) and f.stream_id == 0]
        eq(conn_updates, [], "the connection's window stays shut with 39998 bytes kept")
        h.send(DataFrame(1, data=b"1", flags=["END_STREAM"]).serialize())
        status, _, body, _ = h.response(1)
        eq((status, body), (200, b"1" * 20000), "stream 1")
        barrier()
        conn_updates = [f.window_increment for f in h.got
                        if isinstance(f, WindowUpdateFrame) and f.stream_id == 0]
        eq(sum(conn_updates), 39999, "the connection's window opened for both bodies")
        h.send(DataFrame(3, data=b"3", flags=["END_STREAM"]).serialize())
        status, _, body, _ = h.response(3)
        eq((status, body), (200, b"3" * 20000), "stream 3")
        h.close()
        eq(s.stop(), 0, "exit status")


NODE_H2 = r"""
const http2 = require('http2');
const s = http2.connect(process.argv[1]);
s.on('error', (e) => { console.error(e); process.exit(1); });
let left = 2;
for (const [path, body] of [['/health', null], ['/echo', '{"n":1}']]) {
  const r = s.request(Object.assign({':path': path, ':method': body ? 'POST' : 'GET'},
                                    body ? {'content-type': 'application/json'} : {}));
  let got = '';
  r.setEncoding('utf8');
  r.on('response', (h) => { got += h[':status'] + ' '; });
  r.on('data', (d) => { got += d; });
  r.on('end', () => {
    console.log(path + ' ' + JSON.stringify(got));
    if (--left === 0) s.close();
  });
  r.end(body || undefined);
}
"""


def test_HT6_real_clients_nghttp_and_node():
    """Real clients over prior knowledge (HT6): nghttp's GET, and Node's http2 module with two
    streams on one session, a GET and a POST, get the exact statuses and bodies."""
    with Server("host_check", env={"M0_THREADS": 1}) as s:
        s.wait_ready()
        url = f"http://127.0.0.1:{s.port}"
        p = subprocess.run([tool("nghttp", "nghttp2-client"), url + "/health"],
                           capture_output=True, timeout=30)
        eq((p.returncode, p.stdout), (0, b"ok\n"), "nghttp /health")
        p = subprocess.run([tool("node", "nodejs"), "-e", NODE_H2, url], capture_output=True,
                           timeout=30)
        eq(p.returncode, 0, f"node: {p.stderr.decode(errors='replace')}")
        eq(sorted(p.stdout.decode().splitlines()),
           ['/echo "200 {\\"n\\":1}"', '/health "200 ok\\n"'], "node's http2")
        eq(s.stop(), 0, "exit status")


def test_HT2_query_form_and_cookies_as_over_http11():
    """A request with a body keeps its query (the form's field is named in it), and cookies
    sent as two fields (RFC 9113 8.2.3) are read as HTTP/1.1's one Cookie line: the same
    answers as over HTTP/1.1 (HT2)."""
    with Server("host_check", env={"M0_THREADS": 1}) as s:
        s.wait_ready()
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        want = h1_answer(s.port, "POST", "/q/form?f=b", form, b"a=1&b=two")
        eq((want[0], want[2]), (200, b'{"value":"two"}'), "HTTP/1.1's answer")
        h = H2(s.port)
        eq(h2_answer(h, 1, "POST", "/q/form?f=b", form, b"a=1&b=two"), want, "the form")
        want = h1_answer(s.port, "GET", "/q/cookie?name=s", {"Cookie": "a=1; s=xyz"}, None)
        h.request(3, "GET", "/q/cookie?name=s", [("cookie", "a=1"), ("cookie", "s=xyz")])
        status, fields, body, _ = h.response(3)
        got = (status, sorted((n, v) for n, v in fields if n != "date"), body)
        eq(got, want, "two cookie fields")
        check(b"xyz" in body, f"the cookie's value: {body!r}")
        h.close()
        eq(s.stop(), 0, "exit status")
