# SPDX-License-Identifier: MIT
"""WebSocket on HTTP/2 by RFC 8441's extended CONNECT (SPEC WS1, on HT1): the server's SETTINGS
say ENABLE_CONNECT_PROTOCOL; a HEADERS of `:method CONNECT` and `:protocol websocket` reaches the
route and the handler an HTTP/1.1 upgrade reaches, with the same checks, answered `:status 200`;
the stream's DATA then carry masked frames each way (frames built byte by byte, the server's
read with python3-wsproto); a Close ends the stream, a reset ends the WebSocket, SIGTERM closes
each with 1001 before the last GOAWAY. Frames are raw HTTP/2 (hyperframe and hpack, Debian's
python3-h2 packages), on the plain socket by prior knowledge and on TLS by ALPN."""

import json
import os
import re
import signal
import ssl
import subprocess
import time

from m0test import Server, check, eq, tool
from test_http2 import H2, field
from wstest import BINARY, CLOSE, PING, PONG, TEXT, close_payload, frame
from wsproto.frame_protocol import FrameProtocol, Opcode
from hyperframe.frame import (
    DataFrame,
    GoAwayFrame,
    HeadersFrame,
    RstStreamFrame,
    SettingsFrame,
    WindowUpdateFrame,
)

# ThreadSanitizer runs this module (sends from any thread, the drain across streams): run.py, D235.
THREADED = True

CANCEL = 0x8  # RFC 9113 7


class Mux:
    """One HTTP/2 connection whose streams are WebSockets or requests: every frame read is
    filed under its stream (HEADERS' fields, a WebSocket's frames through wsproto, END_STREAM,
    RST_STREAM's code); what the server sends is acknowledged with WINDOW_UPDATEs so that its
    windows never shut."""

    def __init__(self, port, tls_ctx=None, host="127.0.0.1"):
        self.h = H2(port, preface=tls_ctx is None)
        if tls_ctx is not None:
            self.h.sock = tls_ctx.wrap_socket(self.h.sock, server_hostname=host)
            eq(self.h.sock.selected_alpn_protocol(), "h2", "ALPN")
            self.h.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + SettingsFrame(0).serialize())
        self.streams = {}
        self.goaways = []
        self.window = {0: 65535}  # what the server lets the client send, per stream and in all
        self.auto_window = True  # the client opens its windows as it reads
        self.settings = None
        while self.settings is None:
            f = self.h.next()
            check(f is not None, "no SETTINGS from the server")
            if isinstance(f, SettingsFrame) and "ACK" not in f.flags:
                self.settings = dict(f.settings)

    def close(self):
        self.h.close()

    def _stream(self, sid):
        return self.streams.setdefault(sid, {
            "fields": [], "body": b"", "end": False, "rst": None, "ws": None, "frames": []})

    def pump(self, until, timeout=5, what="a frame"):
        """Read frames until `until()` holds."""
        deadline = time.monotonic() + timeout
        while not until():
            left = deadline - time.monotonic()
            check(left > 0, f"waited {timeout}s for {what}")
            f = self.h.next(left)
            check(f is not None, f"EOF, or no frame in time, while waiting for {what}")
            self.h.got.clear()
            if isinstance(f, GoAwayFrame):
                self.goaways.append(f)
                continue
            if isinstance(f, WindowUpdateFrame):
                self.window[f.stream_id] = self.window.get(f.stream_id, 0) + f.window_increment
                continue
            if f.stream_id == 0:
                continue
            st = self._stream(f.stream_id)
            if isinstance(f, HeadersFrame):
                st["fields"] += f.fields
            elif isinstance(f, DataFrame):
                st["body"] += f.data
                if st["ws"] and field(st["fields"], ":status") == "200":  # a refusal's body is none
                    st["ws"].receive_bytes(f.data)
                    for wf in st["ws"].received_frames():
                        self._frame(st, wf)
                if f.data and self.auto_window:
                    self.h.send(WindowUpdateFrame(0, window_increment=len(f.data)).serialize() +
                                WindowUpdateFrame(f.stream_id,
                                                  window_increment=len(f.data)).serialize())
            elif isinstance(f, RstStreamFrame):
                st["rst"] = f.error_code
            if "END_STREAM" in getattr(f, "flags", ()):
                st["end"] = True

    @staticmethod
    def _frame(st, wf):
        """wsproto hands a frame over in the pieces that arrived: a message is whole at its
        last piece of its last frame."""
        op = wf.opcode.value if isinstance(wf.opcode, Opcode) else wf.opcode
        if op & 0x8:
            st["frames"].append((op, wf.payload))
            return
        part = wf.payload.encode() if isinstance(wf.payload, str) else bytes(wf.payload)
        if st.get("partial") is None:
            st["partial"] = (op, [])
        st["partial"][1].append(part)
        if wf.message_finished:
            st["frames"].append((st["partial"][0], b"".join(st["partial"][1])))
            st["partial"] = None

    def status(self, sid):
        st = self._stream(sid)
        self.pump(lambda: any(n == ":status" for n, _ in st["fields"]) or st["rst"] is not None,
                  what=f"stream {sid}'s answer")
        check(st["rst"] is None, f"stream {sid} reset ({st['rst']}) before its answer")
        return int(field(st["fields"], ":status"))

    def connect(self, sid, path, protocol="websocket", origin=None, version="13", extra=()):
        fields = [(":method", "CONNECT"), (":protocol", protocol), (":scheme", "http"),
                  (":path", path), (":authority", "test")]
        if version is not None:
            fields.append(("sec-websocket-version", version))
        if origin:
            fields.append(("origin", origin))
        self._stream(sid)["ws"] = FrameProtocol(client=True, extensions=[])
        self.h.headers(sid, fields + list(extra), end_stream=False)
        return self.status(sid)

    def send_flow(self, sid, data):
        """`data` in DATA frames within the windows the server opens (RFC 9113 6.9): what it
        has not consumed holds the rest back."""
        self.window.setdefault(sid, self.settings.get(SettingsFrame.INITIAL_WINDOW_SIZE, 65535))
        while data:
            n = min(len(data), 16384, self.window[0], self.window[sid])
            if n <= 0:
                self.pump(lambda: min(self.window[0], self.window[sid]) > 0,
                          what=f"a WINDOW_UPDATE for stream {sid}")
                continue
            self.send_ws(sid, data[:n])
            self.window[0] -= n
            self.window[sid] -= n
            data = data[n:]

    def send_ws(self, sid, data, end_stream=False):
        self.h.send(DataFrame(sid, data=data, flags=["END_STREAM"] if end_stream else [])
                    .serialize())

    def message(self, sid, timeout=5):
        """The stream's next data frame (opcode, bytes), skipping pings."""
        st = self._stream(sid)

        def have():
            while st["frames"] and st["frames"][0][0] in (PING, PONG):
                st["frames"].pop(0)
            return bool(st["frames"]) or st["end"] or st["rst"] is not None

        self.pump(have, timeout, what=f"a message on stream {sid}")
        check(st["frames"], f"stream {sid} ended (rst {st['rst']}) before a message")
        op, payload = st["frames"].pop(0)
        if op == CLOSE:
            code, reason = payload
            return op, (int(code), reason)
        return op, payload

    def ended(self, sid, timeout=5):
        """Wait for the stream's end: ('end', None) at END_STREAM, ('rst', code) at a reset."""
        st = self._stream(sid)
        self.pump(lambda: st["end"] or st["rst"] is not None, timeout,
                  what=f"stream {sid}'s end")
        return ("end", None) if st["end"] and st["rst"] in (None, 0) else ("rst", st["rst"])

    def post(self, sid, path, body):
        """A POST whose body goes within the windows; its answer's status."""
        self.h.headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", path),
                             (":authority", "test"), ("content-length", str(len(body)))],
                       end_stream=False)
        self.send_flow(sid, body)
        self.send_ws(sid, b"", end_stream=True)
        return self.status(sid)

    def request(self, sid, path):
        self.h.request(sid, "GET", path)
        st = self._stream(sid)
        self.pump(lambda: st["end"] or st["rst"] is not None, what=f"stream {sid}'s answer")
        return int(field(st["fields"], ":status")), st["body"]


def wait_count(s, pattern, n, timeout=10):
    """Wait until `n` stderr lines match `pattern`; returns how many do."""
    rx = re.compile(pattern)
    deadline = time.monotonic() + timeout
    with s._log_cond:
        while True:
            k = sum(1 for _, line in s.log if rx.search(line))
            left = deadline - time.monotonic()
            if k >= n or s._log_eof or left <= 0:
                return k
            s._log_cond.wait(left)


def _ws(s, m, sid, path="/echo", **kw):
    eq(m.connect(sid, path, **kw), 200, f"the extended CONNECT of {path}")
    return sid


def test_WS1_h2_settings_connect_echo_and_close():
    """The server's SETTINGS carry ENABLE_CONNECT_PROTOCOL 1 (RFC 8441 3); CONNECT with
    :protocol websocket to ws_check's /echo is answered 200 with the handler's own header and
    no Sec-WebSocket-Accept (RFC 8441 5); masked text and binary frames in DATA come back exact;
    a Close 1000 is answered with a Close 1000 and END_STREAM (RFC 8441 5: the stream's end is
    the TCP close's), and on_close runs with 1000."""
    with Server("ws_check") as s:
        s.wait_ready()
        m = Mux(s.port)
        eq(m.settings.get(SettingsFrame.ENABLE_CONNECT_PROTOCOL), 1,
           f"ENABLE_CONNECT_PROTOCOL in the server's SETTINGS: {m.settings}")
        _ws(s, m, 1)
        fields = m.streams[1]["fields"]
        eq(field(fields, "x-ws-check"), "echo", "the handler's own header rides on the 200")
        eq(field(fields, "sec-websocket-accept"), None, "no Sec-WebSocket-Accept on HTTP/2")
        eq(field(fields, "content-length"), None, "no Content-Length in a 2xx to CONNECT")
        m.send_ws(1, frame(TEXT, b"hello"))
        eq(m.message(1), (TEXT, b"hello"), "a text message echoed")
        blob = bytes(range(256)) * 300  # 76800 bytes: more than a window and a DATA frame
        m.send_ws(1, frame(BINARY, blob[:16000]))
        m.send_ws(1, frame(BINARY, blob[16000:32000]))
        eq(m.message(1), (BINARY, blob[:16000]), "a binary message echoed")
        eq(m.message(1), (BINARY, blob[16000:32000]), "the next one")
        m.send_ws(1, frame(CLOSE, close_payload(1000, b"bye")))
        eq(m.message(1), (CLOSE, (1000, "bye")), "the Close answered with the client's code")
        eq(m.ended(1)[0], "end", "END_STREAM after the Close")
        eq(m.request(3, "/nope")[0], 404, "the connection goes on")
        s.wait_log(r"ws_check: echo closed 1000$")
        m.close()
        eq(s.stop(), 0, "exit status")


def test_WS1_h2_refusals():
    """The upgrade's checks as over HTTP/1.1 (WS1, WS3): a foreign Origin 403, the route's own
    list deciding on /origins; version 8 426 with Sec-WebSocket-Version 13, none 400; a pool
    route 409 (P2); an unknown :protocol 501 (RFC 9220 3's answer, D232); a CONNECT without
    :protocol is a proxy's CONNECT, 405 (RFC 9110 9.3.6); an extended CONNECT without :path is
    malformed, its stream reset PROTOCOL_ERROR (RFC 8441 4, RFC 9113 8.1.1)."""
    with Server("ws_check", env={"M0_BLOCKING_THREADS": 1}) as s:
        s.wait_ready()
        m = Mux(s.port)
        own = "http://test"
        cases = [
            ("/echo", {"origin": "http://evil.example"}, 403),
            ("/echo", {"origin": own}, 200),
            ("/echo", {"origin": "null"}, 403),
            ("/origins", {"origin": "https://allowed.example"}, 200),
            ("/origins", {"origin": own}, 403),
            ("/echo", {"version": "8"}, 426),
            ("/echo", {"version": None}, 400),
            ("/pool", {}, 409),
            ("/nope", {}, 404),
            ("/echo", {"protocol": "chat"}, 501),
        ]
        sid = 1
        for path, kw, status in cases:
            eq(m.connect(sid, path, **kw), status, f"{path} {kw}")
            if status == 426:
                eq(field(m.streams[sid]["fields"], "sec-websocket-version"), "13",
                   "426's Sec-WebSocket-Version")
            if status == 200:
                m.send_ws(sid, frame(TEXT, b"in"))
                eq(m.message(sid), (TEXT, b"in"), f"{path} {kw}: echo")
            sid += 2
        m.h.headers(sid, [(":method", "CONNECT"), (":authority", "test:443")], end_stream=False)
        eq(m.status(sid), 405, "a CONNECT without :protocol")
        sid += 2
        m.h.headers(sid, [(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"),
                          (":authority", "test")], end_stream=False)
        eq(m.ended(sid), ("rst", 0x1), "an extended CONNECT without :path")
        sid += 2
        eq(m.request(sid, "/nope")[0], 404, "the connection goes on")
        m.close()
        eq(s.stop(), 0, "exit status")


def test_WS1_h2_a_route_that_opens_no_websocket():
    """An extended CONNECT to a route whose handler answers 200 without taking a WebSocket is
    answered 400, not 200: a 2xx to a CONNECT would open a tunnel that is not there (RFC 9110
    9.3.6; D233), on the loop as on the pool; the access line says 400; the same GET as GET is
    200."""
    env = {"M0_THREADS": 1, "M0_BLOCKING_THREADS": 1, "M0_ACCESS_LOG": "on"}
    with Server("host_check", env=env) as s:
        s.wait_ready()
        m = Mux(s.port)
        eq(m.connect(1, "/health"), 400, "CONNECT websocket to /health")
        eq(m.connect(3, "/slow?ms=1"), 400, "... to a pool route")
        m.pump(lambda: m.streams[1]["end"] and m.streams[3]["end"], what="the refusals' ends")
        check(b"this route opens no WebSocket" in m.streams[1]["body"], m.streams[1]["body"])
        eq(m.request(5, "/health"), (200, b"ok\n"), "GET /health on the same connection")
        s.wait_log(r"GET /health 400 \d+ \(h2\)$")
        m.close()
        eq(s.stop(), 0, "exit status")


def test_WS1_h2_counter_bus_messages():
    """counter's /ws?counter=NAME over HTTP/2 (WS2): three POSTs arrive as three messages with
    their ids and values 1, 2, 3, exact JSON; a second WebSocket with last_event_id of the
    first gets the other two, none twice."""
    with Server("counter") as s:
        s.wait_ready()
        m = Mux(s.port)
        _ws(s, m, 1, "/ws?counter=h2")
        c = s.connect()
        ids = []
        for _ in range(3):
            r = c.exchange("POST", "/increment?counter=h2")
            eq(r.status, 204, "POST /increment")
            ids.append(int(r.header("x-event-id")))
        got = [m.message(1) for _ in range(3)]
        eq([op for op, _ in got], [TEXT] * 3, "text messages")
        msgs = [json.loads(p) for _, p in got]
        eq([(x["id"], x["channel"], x["event"], json.loads(x["data"])["value"]) for x in msgs],
           [(i, "counter:h2", "value", v) for i, v in zip(ids, (1, 2, 3))], "the three events")
        _ws(s, m, 3, f"/ws?counter=h2&last_event_id={ids[0]}")
        again = [json.loads(m.message(3)[1])["id"] for _ in range(2)]
        eq(again, ids[1:], "the replay after last_event_id")
        c.close()
        m.close()
        eq(s.stop(), 0, "exit status")


def test_WS1_h2_two_websockets_and_a_request_multiplexed():
    """Two WebSockets and ordinary requests on one connection (HT3's multiplexing): each
    stream's frames come back on its own stream, exact, interleaved with a GET's answer."""
    with Server("ws_check") as s:
        s.wait_ready()
        m = Mux(s.port)
        _ws(s, m, 1)
        _ws(s, m, 3)
        m.send_ws(1, frame(TEXT, b"one"))
        m.send_ws(3, frame(TEXT, b"three"))
        m.h.request(5, "GET", "/nope")
        m.send_ws(3, frame(BINARY, b"\x00\xff" * 5000))
        m.send_ws(1, frame(TEXT, b"uno"))
        eq(m.message(3), (TEXT, b"three"), "stream 3's first")
        eq(m.message(1), (TEXT, b"one"), "stream 1's first")
        eq(m.message(1), (TEXT, b"uno"), "stream 1's second")
        eq(m.message(3), (BINARY, b"\x00\xff" * 5000), "stream 3's second")
        m.pump(lambda: m.streams.get(5, {}).get("end"), what="the GET's answer")
        eq(int(field(m.streams[5]["fields"], ":status")), 404, "the GET between them")
        # an app's close on one stream leaves the other open
        m.send_ws(1, frame(TEXT, b"close 4000 done"))
        eq(m.message(1), (CLOSE, (4000, "done")), "the app's close")
        m.send_ws(1, frame(CLOSE, close_payload(4000)))
        eq(m.ended(1)[0], "end", "stream 1 ended")
        m.send_ws(3, frame(TEXT, b"still"))
        eq(m.message(3), (TEXT, b"still"), "stream 3 goes on")
        m.close()
        eq(s.stop(), 0, "exit status")


def test_WS1_h2_reset_stream_ends_the_websocket():
    """RST_STREAM CANCEL from the client is the WebSocket's abnormal end (RFC 8441 5): on_close
    runs once, 1006; the connection's other streams go on; a client that ends its side with
    END_STREAM before a Close is the same (its stream reset CANCEL)."""
    with Server("ws_check") as s:
        s.wait_ready()
        m = Mux(s.port)
        _ws(s, m, 1)
        _ws(s, m, 3)
        m.h.send(RstStreamFrame(1, error_code=CANCEL).serialize())
        s.wait_log(r"ws_check: echo closed 1006$")
        m.send_ws(3, frame(TEXT, b"alive"))
        eq(m.message(3), (TEXT, b"alive"), "the other WebSocket")
        m.send_ws(3, b"", end_stream=True)
        eq(m.ended(3), ("rst", CANCEL), "END_STREAM before a Close: reset CANCEL")
        eq(wait_count(s, r"ws_check: echo closed 1006$", 2), 2, "two closes 1006")
        eq(m.request(5, "/nope")[0], 404, "the connection goes on")
        m.close()
        eq(s.stop(), 0, "exit status")
        eq(len([ln for ln in s.log_lines() if ln.endswith("ws_check: echo closed 1006")]), 2,
           "on_close once per WebSocket")


def test_WS1_h2_close_after_the_messages_sent_before_it():
    """m0_ws_close() after m0_ws_send()s in one go, on a stream (SPEC WS1, D223): every message
    in order, then the Close with its code and reason, then END_STREAM; the sends pile up behind
    the stream's windows (the client opens none until all are queued), on the loop and from the
    app's own thread."""
    n, size = 2000, 4000  # 8 MB, behind a stream window of 64 KiB
    with Server("ws_check", env={"M0_WS_MAX_QUEUED": 64 << 20}) as s:
        s.wait_ready()
        m = Mux(s.port)
        for k, (sid, extra) in enumerate(((1, ""), (3, "&thread=1"))):
            m.auto_window = False
            _ws(s, m, sid, f"/burst?n={n}&size={size}&code=4003{extra}")
            eq(wait_count(s, r"ws_check: burst queued$", k + 1), k + 1, "the burst queued")
            m.auto_window = True
            m.h.send(WindowUpdateFrame(0, 1 << 24).serialize() +
                     WindowUpdateFrame(sid, 1 << 24).serialize())
            for i in range(n):
                op, data = m.message(sid)
                if op == TEXT:  # the text whole, but shown by its head
                    check(data == f"burst {i}".encode().ljust(size, b"."), f"{i}: {data[:20]!r}")
                    data = data[:data.index(b".")]
                eq((op, data), (TEXT, f"burst {i}".encode()),
                   f"stream {sid}'s message {i} before the Close")
            eq(m.message(sid), (CLOSE, (4003, "burst done")), "the Close after the messages")
            m.send_ws(sid, frame(CLOSE, close_payload(4003)))
            eq(m.ended(sid)[0], "end", "END_STREAM after the Closes")
        eq(wait_count(s, r"ws_check: burst closed 4003$", 2), 2, "on_close with the app's code")
        m.close()
        eq(s.stop(), 0, "exit status")


def test_WS1_h2_on_close_for_a_stream_reset_before_its_200():
    """A stream reset in the same packet as its extended CONNECT (SPEC WS1, D224): the handler
    accepted, the WebSocket never opened, and on_close hands its state back once, 1006; the
    connection's other streams go on."""
    from test_websocket import wait_closed
    rounds = 50
    with Server("ws_check") as s:
        s.wait_ready()
        m = Mux(s.port)
        fields = [(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "http"),
                  (":path", "/burst?hold=1"), (":authority", "test"),
                  ("sec-websocket-version", "13")]
        for i in range(rounds):
            sid = 1 + 2 * i
            head = HeadersFrame(sid, data=m.h.enc.encode(fields), flags=["END_HEADERS"])
            m.h.send(head.serialize() + RstStreamFrame(sid, error_code=CANCEL).serialize())
        eq(m.request(1 + 2 * rounds, "/nope")[0], 404, "the connection goes on")
        got = wait_closed(s, rounds)
        eq(got, {"accepted": rounds, "opened": 0, "closed": rounds},
           "each accepted, none opened, each closed once")
        m.close()
        eq(s.stop(), 0, "exit status")


def test_WS1_h2_sigterm_closes_each_1001_then_goaway():
    """SIGTERM (WS4, HT5): each WebSocket stream gets its Close 1001 after its queued messages,
    the connection a GOAWAY; the client's Closes end the streams, and the process exits 0."""
    with Server("ws_check") as s:
        s.wait_ready()
        m = Mux(s.port)
        _ws(s, m, 1, "/flood?n=3&size=1000")
        _ws(s, m, 3)
        for _ in range(3):
            eq(m.message(1), (BINARY, b"\0" * 1000), "a message queued before the stop")
        s.send_signal(signal.SIGTERM)
        for sid in (1, 3):
            eq(m.message(sid), (CLOSE, (1001, "server shutting down")), f"stream {sid}'s close")
        m.pump(lambda: m.goaways, what="a GOAWAY")
        for sid in (1, 3):
            m.send_ws(sid, frame(CLOSE, close_payload(1001)))
            eq(m.ended(sid)[0], "end", f"stream {sid} ended after the Closes")
        eq(s.wait_exit(6), 0, "exit status after the drain")
        s.wait_log(r"ws_check: echo closed 1001$")


def test_WS1_h2_slow_consumer_closed_1008():
    """WS3's output bound on a stream: past M0_WS_MAX_QUEUED the app's sends are refused and the
    WebSocket is closed 1008, its queued messages dropped behind the Close, its stream ended;
    the connection's other streams go on."""
    env = {"M0_WS_MAX_QUEUED": 65536}
    with Server("ws_check", env=env) as s:
        s.wait_ready()
        m = Mux(s.port)
        _ws(s, m, 1, "/flood?n=200&size=65536")
        s.wait_log(r"loop 0: ws_check: flood stopped after \d+ sends: -105$")
        eq(m.message(1), (CLOSE, (1008, "too slow")), "the slow consumer's close")
        eq(m.ended(1)[0], "end", "its stream ended")
        eq(m.request(3, "/nope")[0], 404, "the connection goes on")
        m.close()
        eq(s.stop(), 0, "exit status")


def test_WS1_h2_metrics():
    """A stream's WebSocket counts in the WebSocket metrics as one over HTTP/1.1 does."""
    from test_metrics import METRICS_SOCKETS, scrape

    def samples(s):
        st, _, body = scrape(s, accept=None)
        eq(st, 200, "the scrape")
        return {ln.rsplit(" ", 1)[0]: ln.rsplit(" ", 1)[1] for ln in body.splitlines()
                if ln.startswith("m0_websocket")}

    with Server("ws_check", sockets=METRICS_SOCKETS) as s:
        s.wait_ready()
        m = Mux(s.tcp_addr[1])
        _ws(s, m, 1)
        for msg in (b"one", b"two"):
            m.send_ws(1, frame(TEXT, msg))
            eq(m.message(1), (TEXT, msg), "echo")
        got = samples(s)
        eq(got.get('m0_websockets{loop="0"}'), "1", f"open: {got}")
        eq(got.get('m0_websocket_messages_received_total{loop="0"}'), "2", f"in: {got}")
        eq(got.get('m0_websocket_messages_sent_total{loop="0"}'), "2", f"out: {got}")
        m.send_ws(1, frame(CLOSE, close_payload(1000)))
        eq(m.message(1)[1][0], 1000, "the close")
        m.ended(1)
        got = samples(s)
        eq(got.get('m0_websockets{loop="0"}'), "0", f"closed: {got}")
        eq(got.get('m0_websocket_closes_total{loop="0",code="1000"}'), "1", f"by code: {got}")
        m.close()
        eq(s.stop(), 0, "exit status")


def test_WS1_h2_over_tls_by_alpn():
    """On the TLS socket, h2 chosen by ALPN: the same extended CONNECT and echo."""
    from test_tls import Certs

    c = Certs()
    try:
        crt, key = c.leaf("a", "a.test")
        with Server("ws_check", env={"M0_TLS_CERT": crt, "M0_TLS_KEY": key},
                    sockets=[("tcp", "http"), ("tcp", "https")]) as s:
            s.wait_ready()
            port = next(sock.getsockname()[1] for _, name, sock in s.listeners if name == "https")
            ctx = ssl.create_default_context(cafile=c.ca)
            ctx.set_alpn_protocols(["h2"])
            ctx.check_hostname = False
            m = Mux(port, tls_ctx=ctx, host="a.test")
            eq(m.settings.get(SettingsFrame.ENABLE_CONNECT_PROTOCOL), 1, "the SETTINGS on TLS")
            _ws(s, m, 1)
            m.send_ws(1, frame(TEXT, b"over tls"))
            eq(m.message(1), (TEXT, b"over tls"), "echo over TLS")
            m.send_ws(1, frame(CLOSE, close_payload(1000)))
            eq(m.message(1), (CLOSE, (1000, "")), "the close")
            eq(m.ended(1)[0], "end", "END_STREAM")
            m.close()
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


def test_WS1_h2_large_message_through_the_windows():
    """A message of 300 KiB, past both of the client's windows, goes in as the server consumes
    it (its WINDOW_UPDATEs come as wslay reads) and comes back exact, its echo held by the
    client's windows and let go as it opens them (RFC 9113 6.9; D231)."""
    with Server("ws_check") as s:
        s.wait_ready()
        m = Mux(s.port)
        _ws(s, m, 1)
        blob = os.urandom(300 * 1024)
        m.send_flow(1, frame(BINARY, blob))
        eq(m.message(1, timeout=10), (BINARY, blob), "300 KiB echoed exact")
        m.send_flow(1, frame(TEXT, b"after"))
        eq(m.message(1), (TEXT, b"after"), "the next message")
        m.close()
        eq(s.stop(), 0, "exit status")


def test_WS1_h2_sends_from_another_thread():
    """m0_ws_send() from a thread of the app's own reaches a stream's WebSocket through its
    loop's mailbox, in order, every message exact (WS1)."""
    with Server("ws_check", env={"M0_WS_MAX_QUEUED": 64 << 20}) as s:
        s.wait_ready()
        m = Mux(s.port)
        _ws(s, m, 1, "/flood?n=200&size=100&thread=1")
        for i in range(200):
            eq(m.message(1), (BINARY, b"\0" * 100), f"message {i} from the app's thread")
        s.wait_log(r"m0\[ws_check\]: ws_check: flood stopped after 200 sends: 0$")
        m.close()
        eq(s.stop(), 0, "exit status")


def test_WS1_h2_ping_then_idle_reset():
    """A stream's WebSocket has its own pings and idle bound (WS3) on its stand-in's timer: a
    ping after M0_WS_PING_MS; a pong keeps it; silent past M0_IDLE_TIMEOUT_MS its stream is
    reset CANCEL and on_close runs with 1006, while the connection's own idle bound waits for
    its WebSockets."""
    with Server("ws_check", env={"M0_WS_PING_MS": 100, "M0_IDLE_TIMEOUT_MS": 600}) as s:
        s.wait_ready()
        m = Mux(s.port)
        _ws(s, m, 1)
        st = m.streams[1]
        m.pump(lambda: any(op == PING for op, _ in st["frames"]), what="a ping")
        op, payload = st["frames"].pop(0)
        eq(op, PING, "the first frame: a ping")
        m.send_ws(1, frame(PONG, bytes(payload)))
        m.pump(lambda: any(op == PING for op, _ in st["frames"]), what="the next ping")
        eq(m.ended(1, timeout=5), ("rst", CANCEL), "silent: its stream reset")
        eq([op for op, _ in st["frames"]], [PING] * len(st["frames"]), "only pings meanwhile")
        s.wait_log(r"ws_check: echo closed 1006$")
        m.close()
        eq(s.stop(), 0, "exit status")


def test_WS1_h2_a_websocket_that_reads_no_more_holds_no_window():
    """Once a stream's WebSocket reads no more (the app closed it while its output waits for
    the client's window), what the client still sends on it is dropped and the connection's
    window opened again: another stream's body of 20000 bytes goes through, which the 60000
    bytes left unread would have held back (RFC 9113 6.9; D231); the Close follows the output
    once the client opens its window."""
    with Server("ws_check") as s:
        s.wait_ready()
        m = Mux(s.port)
        _ws(s, m, 1)
        m.auto_window = False
        # its echo is past the client's window of 65535 and the stream's 16 KiB: the rest, and
        # the Close behind it, wait in wslay's queue
        blob = os.urandom(150000)
        m.send_flow(1, frame(BINARY, blob))
        st = m.streams[1]
        m.pump(lambda: len(st["body"]) >= 65535, what="the echo up to the window")
        m.send_flow(1, frame(TEXT, b"close 4000 held"))  # queued behind the echo's rest
        m.send_flow(1, frame(BINARY, b"x" * 59990))  # read by nobody
        # answered once its body is whole (the 404's own body waits for the client's window)
        eq(m.post(3, "/nope", b"y" * 20000), 404, "a body on another stream")
        m.auto_window = True
        m.h.send(WindowUpdateFrame(0, window_increment=1 << 20).serialize() +
                 WindowUpdateFrame(1, window_increment=1 << 20).serialize())
        eq(m.message(1), (BINARY, blob), "the echo whole")
        eq(m.message(1), (CLOSE, (4000, "held")), "then the app's Close")
        eq(m.ended(1)[0], "end", "its stream ended")
        s.wait_log(r"ws_check: echo closed 4000$")
        m.close()
        eq(s.stop(), 0, "exit status")


def test_WS1_h2_chromium_over_tls():
    """A real client: headless Chromium loads a page over TLS (h2 by ALPN), then opens
    `new WebSocket("wss://…/echo")` from it, which it carries on that HTTP/2 connection by
    extended CONNECT since the server's SETTINGS allow it: the access line says the upgrade was
    answered 200 over h2; a text and a binary message come back exact, and the page's close
    1000 is clean (ws_h2_page.mjs, driven through the DevTools protocol)."""
    from test_tls import Certs

    chromium = tool("chromium", "chromium")
    node = tool("node", "nodejs")
    here = os.path.dirname(os.path.abspath(__file__))
    c = Certs()
    try:
        crt, key = c.leaf("a", "a.test")
        env = {"M0_TLS_CERT": crt, "M0_TLS_KEY": key, "M0_ACCESS_LOG": "on"}
        with Server("ws_check", env=env, sockets=[("tcp", "http"), ("tcp", "https")]) as s:
            s.wait_ready()
            port = next(sock.getsockname()[1] for _, name, sock in s.listeners if name == "https")
            base = f"https://127.0.0.1:{port}"
            out = subprocess.run([node, "--experimental-websocket", "--no-warnings",
                                  os.path.join(here, "ws_h2_page.mjs"), chromium, base + "/nope",
                                  f"wss://127.0.0.1:{port}/echo"],
                                 capture_output=True, text=True, timeout=90)
            last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
            eq(out.returncode, 0, f"the page's steps: {last} {out.stderr[-2000:]}")
            eq(json.loads(last), {"got": ["hello over h2", [0, 1, 255]], "code": 1000,
                                  "reason": "done", "clean": True}, "what the page got")
            s.wait_log(r"GET /nope 404 \d+ \(h2\) \(TLSv1\.3\)$")
            s.wait_log(r"GET /echo 200 0 \(h2\) \(TLSv1\.3\)$")
            s.wait_log(r"ws_check: echo closed 1000$")
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


# run.py runs it alone: a browser takes both cores for a while.
test_WS1_h2_chromium_over_tls.serial = True
test_WS1_h2_chromium_over_tls.once = True  # a browser: the plain variant only (run.py, D235)
