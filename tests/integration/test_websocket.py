# SPDX-License-Identifier: MIT
"""WebSocket (SPEC WS1-WS5): the upgrade's checks and the 101, a real client's echo
and close codes (python3-websockets), the case table of raw frames after Autobahn's sections,
each citing RFC 6455 (frames built byte by byte, the server's read with python3-wsproto), the
bounds (message size, fragments, UTF-8, the output bound, pings and the idle bound, Origin) and
the drain."""

import asyncio
import json
import os
import shutil
import subprocess
import signal
import socket
import struct
import time

from m0test import Server, check, eq
from test_ws_h2 import wait_count
from wstest import (BINARY, CLOSE, CONT, PING, PONG, SAMPLE_KEY, TEXT, RawWs, close_payload,
                    frame, handshake, websockets)

# ThreadSanitizer runs this module (sends from any thread): run.py, D235.
THREADED = True


def _raw(s, path="/echo", **kw):
    ws = RawWs(s.tcp_addr, **kw)
    s.conns.append(ws)
    status, fields = ws.upgrade(path)
    eq(status, 101, f"the upgrade of {path}")
    return ws


def _client(s, path, **kw):
    return websockets.connect(f"ws://{s.tcp_addr[0]}:{s.tcp_addr[1]}{path}", **kw)


# ---- WS1: the handshake (RFC 6455 4.2.1, 4.2.2) ----

def test_WS1_101_and_accept():
    with Server("ws_check") as s:
        s.wait_ready()
        ws = RawWs(s.tcp_addr)
        s.conns.append(ws)
        status, fields = ws.upgrade("/echo")
        eq(status, 101, "status")
        # 4.2.2 item 5.4, with 1.3's example key and answer
        eq(fields.get("sec-websocket-accept"), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", "accept")
        eq(fields.get("upgrade"), "websocket", "Upgrade")
        eq(fields.get("connection"), "Upgrade", "Connection")
        eq(fields.get("x-ws-check"), "echo", "the handler's own header rides on the 101")
        ws.send(frame(TEXT, b"hello"))
        eq(ws.message(), (TEXT, b"hello"), "echo")


HANDSHAKES = [
    # (what is wrong, the handshake's keywords, status, header the answer must carry)
    ("no Upgrade field (4.2.1 item 3; RFC 9110 15.5.22)", {"omit": ("Upgrade",)}, 426,
     ("sec-websocket-version", "13")),
    ("Upgrade to another protocol (4.2.1 item 3)", {"extra": {"Upgrade": "h2c"}}, 400, None),
    ("Connection without upgrade (4.2.1 item 4)", {"extra": {"Connection": "keep-alive"}}, 400,
     None),
    ("no Sec-WebSocket-Key (4.2.1 item 5)", {"omit": ("Sec-WebSocket-Key",)}, 400, None),
    ("a key of 15 bytes (4.2.1 item 5)", {"key": "AAAAAAAAAAAAAAAAAAAA"}, 400, None),
    ("a key that is not base64 (4.2.1 item 5)", {"key": "!!!!!!!!!!!!!!!!!!!!!!=="}, 400, None),
    ("no Sec-WebSocket-Version (4.2.1 item 6)", {"omit": ("Sec-WebSocket-Version",)}, 400, None),
    ("version 8 (4.2.2 item 4, 4.4)", {"version": "8"}, 426, ("sec-websocket-version", "13")),
]


def test_WS1_handshake_refusals():
    with Server("ws_check") as s:
        s.wait_ready()
        for what, kw, status, header in HANDSHAKES:
            ws = RawWs(s.tcp_addr)
            got, fields = ws.upgrade("/echo", **kw)
            ws.close()
            eq(got, status, what)
            if header:
                eq(fields.get(header[0]), header[1], f"{what}: {header[0]}")
        # HTTP/1.0 (4.1: HTTP/1.1 or higher)
        c = s.connect()
        c.send(f"GET /echo HTTP/1.0\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {SAMPLE_KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
        eq(c.read_response().status, 400, "an HTTP/1.0 handshake")
        # a plain GET: 426, and the connection goes on; a later refusal has no line of it
        c = s.connect()
        r = c.get("/echo")
        eq((r.status, r.header("upgrade"), r.header("sec-websocket-version")),
           (426, "websocket", "13"), "a GET without the upgrade")
        r = c.get("/flood?n=x&size=1")
        eq((r.status, r.header("sec-websocket-version")), (400, None), "the next refusal")
    with Server("ws_check", env={"M0_BLOCKING_THREADS": 1}) as s:
        s.wait_ready()
        # a WebSocket route on the pool is refused as a stream there is (P2)
        ws = RawWs(s.tcp_addr)
        eq(ws.upgrade("/pool")[0], 409, "m0_res_websocket on a pool thread")
        ws.close()


def test_WS3_origin():
    with Server("ws_check") as s:
        s.wait_ready()
        own = f"http://{s.tcp_addr[0]}:{s.tcp_addr[1]}"
        cases = [
            ("/echo", None, 101),  # no browser
            ("/echo", own, 101),  # the Host's own
            ("/echo", "http://evil.example", 403),  # cross-site WebSocket hijacking
            ("/echo", f"http://{s.tcp_addr[0]}:1", 403),  # another port
            ("/echo", "null", 403),
            ("/origins", "https://allowed.example", 101),  # the route's own list decides
            ("/origins", own, 403),
            ("/origins", None, 101),
        ]
        for path, origin, status in cases:
            ws = RawWs(s.tcp_addr)
            got, _ = ws.upgrade(path, extra={"Origin": origin} if origin else None)
            ws.close()
            eq(got, status, f"{path} with Origin {origin}")


# ---- a real client: python3-websockets ----

def test_WS1_websockets_client_echo_and_close():
    async def run(s):
        async with _client(s, "/echo") as ws:
            await ws.send("héllo")
            eq(await ws.recv(), "héllo", "text echo")
            await ws.send(b"\x00\xff\x01")
            eq(await ws.recv(), b"\x00\xff\x01", "binary echo")
            await ws.send("x" * 70000)  # a 64-bit length, back whole
            eq(await ws.recv(), "x" * 70000, "a long message")
            await ws.send("close 4001 bye now")  # the app's m0_ws_close(4001, "bye now")
            try:
                await ws.recv()
                raise AssertionError("a message after the close")
            except websockets.ConnectionClosed as e:
                eq((e.rcvd.code, e.rcvd.reason), (4001, "bye now"), "the app's close")
        async with _client(s, "/echo") as ws:
            await ws.send("close 999")  # not a code RFC 6455 7.4 allows an endpoint to send
            eq(await ws.recv(), "m0_ws_close: -22", "m0_ws_close's -EINVAL")
            await ws.close(1000, "done")
            eq(ws.close_code, 1000, "the client's close, answered")

    with Server("ws_check") as s:
        s.wait_ready()
        asyncio.run(run(s))
        s.wait_log(r"ws_check: echo closed 4001$")
        s.wait_log(r"ws_check: echo closed 1000$")


def test_WS5_node_ws_client():
    node = shutil.which("node")
    check(node is not None, "no node (contrib/deps installs nodejs)")
    root = subprocess.run(["npm", "root", "-g"], capture_output=True, text=True).stdout.strip()
    check(os.path.isdir(os.path.join(root, "ws")), f"no ws in {root} (contrib/deps installs it)")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ws_node.cjs")
    with Server("ws_check") as s:
        s.wait_ready()
        p = subprocess.run([node, script, f"ws://127.0.0.1:{s.port}/echo"], capture_output=True,
                           text=True, timeout=60, env={**os.environ, "NODE_PATH": root})
        eq((p.returncode, p.stdout.splitlines()),
           (0, ["text héllo", "binary 00ff01", "close 4001 bye now"]),
           f"node ws: {p.stderr[-600:]}")


def test_WS3_message_bounds_with_websockets():
    async def run(s):
        async with _client(s, "/echo", max_size=None) as ws:
            await ws.send("x" * (1 << 20))  # M0_WS_MAX_MESSAGE's default, 1 MiB, is taken
            eq(len(await ws.recv()), 1 << 20, "a message of 1 MiB")
            await ws.send("x" * ((1 << 20) + 1))
            try:
                await ws.recv()
                raise AssertionError("an answer past the bound")
            except websockets.ConnectionClosed as e:
                eq(e.rcvd.code, 1009, "a message past 1 MiB")

    with Server("ws_check") as s:
        s.wait_ready()
        asyncio.run(run(s))


# ---- WS5: the case table of raw frames (Autobahn's sections, RFC 6455) ----

def _cases(utf8_split):
    """(section, what, frames to send, what comes back: a list of (opcode, payload) messages
    and at last ("close", code))."""
    a, b = utf8_split
    return [
        ("1.1", "a text message (5.6)", [frame(TEXT, b"Hello")], [(TEXT, b"Hello")]),
        ("1.2", "a binary message (5.6)", [frame(BINARY, b"\x00\x01")], [(BINARY, b"\x00\x01")]),
        ("1.1", "an empty text message (5.6)", [frame(TEXT, b"")], [(TEXT, b"")]),
        ("1.1", "a 16-bit length (5.2)", [frame(TEXT, b"y" * 300)], [(TEXT, b"y" * 300)]),
        ("2.1", "a ping, answered with its payload (5.5.2, 5.5.3)", [frame(PING, b"abc")],
         [(PONG, b"abc")]),
        ("2.4", "a ping of 125 bytes (5.5)", [frame(PING, b"p" * 125)], [(PONG, b"p" * 125)]),
        ("2.5", "a ping of 126 bytes: control frames are at most 125 (5.5)",
         [frame(PING, b"p" * 126, length=16)], [("close", 1002)]),
        ("2.6", "an unsolicited pong is ignored (5.5.3)",
         [frame(PONG, b"x"), frame(TEXT, b"after")], [(TEXT, b"after")]),
        ("3.1", "RSV1 without an extension (5.2)", [frame(TEXT, b"r", rsv=4)], [("close", 1002)]),
        ("3.2", "RSV2 (5.2)", [frame(TEXT, b"r", rsv=2)], [("close", 1002)]),
        ("3.3", "RSV3 on a ping (5.2)", [frame(PING, b"r", rsv=1)], [("close", 1002)]),
        ("4.1.1", "reserved data opcode 3 (5.2)", [frame(3)], [("close", 1002)]),
        ("4.2.1", "reserved control opcode 0xB (5.2)", [frame(0xB)], [("close", 1002)]),
        ("5.1", "a fragmented ping (5.5)", [frame(PING, b"a", fin=False)], [("close", 1002)]),
        ("5.3", "a text message in three fragments (5.4)",
         [frame(TEXT, b"frag", fin=False), frame(CONT, b"men", fin=False), frame(CONT, b"ted")],
         [(TEXT, b"fragmented")]),
        ("5.6", "a ping between fragments is answered first (5.4, 5.5)",
         [frame(TEXT, b"one ", fin=False), frame(PING, b"mid"), frame(CONT, b"two")],
         [(PONG, b"mid"), (TEXT, b"one two")]),
        ("5.9", "a continuation with no message begun (5.4)", [frame(CONT, b"x")],
         [("close", 1002)]),
        ("5.18", "a new message inside a fragmented one (5.4)",
         [frame(TEXT, b"a", fin=False), frame(TEXT, b"b")], [("close", 1002)]),
        ("1.1", "an unmasked client frame (5.1, 5.3)", [frame(TEXT, b"m", mask=False)],
         [("close", 1002)]),
        ("1.1", "a length in a longer form than it needs (5.2)",
         [frame(TEXT, b"short", length=16)], [("close", 1002)]),
        ("6.3", "text that is not UTF-8 (8.1)", [frame(TEXT, b"\xce\xba\xff")], [("close", 1007)]),
        ("6.4", "invalid UTF-8 split across fragments (8.1)",
         [frame(TEXT, b"\xce\xba\xe1\xbd", fin=False), frame(CONT, b"\xb9\xff")],
         [("close", 1007)]),
        ("6.2", "a character split across fragments is whole text (8.1)",
         [frame(TEXT, a, fin=False), frame(CONT, b)], [(TEXT, a + b)]),
        ("6.3", "a message that ends inside a character (8.1)",
         [frame(TEXT, b"ok\xce")], [("close", 1007)]),
        ("7.1", "a Close with a code is answered with it (5.5.1, 7.4)",
         [frame(CLOSE, close_payload(1000, b"bye"))], [("close", 1000)]),
        ("7.3", "a Close without a payload (5.5.1, 7.1.5)", [frame(CLOSE)], [("close", 1005)]),
        ("7.9", "a Close with code 999 (7.4.2)", [frame(CLOSE, close_payload(999))],
         [("close", 1002)]),
        ("7.9", "a Close with code 1005, which no frame may carry (7.4.1)",
         [frame(CLOSE, close_payload(1005))], [("close", 1002)]),
        ("7.9", "a Close with code 5000 (7.4.2)", [frame(CLOSE, close_payload(5000))],
         [("close", 1002)]),
        ("7.13", "a Close with a code for applications (7.4.2)",
         [frame(CLOSE, close_payload(4000))], [("close", 4000)]),
        ("7.5", "a Close whose reason is not UTF-8 (5.5.1, 8.1)",
         [frame(CLOSE, close_payload(1000, b"\xff"))], [("close", 1007)]),
        ("9.1", "a message past M0_WS_MAX_MESSAGE (10.4)", [frame(TEXT, b"z" * 5000)],
         [("close", 1009)]),
        ("9.1", "fragments past M0_WS_MAX_MESSAGE together (10.4)",
         [frame(TEXT, b"z" * 3000, fin=False), frame(CONT, b"z" * 3000)], [("close", 1009)]),
    ]


def test_WS5_case_table():
    utf8 = "κόσμε".encode()
    with Server("ws_check", env={"M0_WS_MAX_MESSAGE": 4096}) as s:
        s.wait_ready()
        for section, what, frames, want in _cases((utf8[:3], utf8[3:])):
            ws = _raw(s)
            ws.send(b"".join(frames))
            for w in want:
                if w[0] == "close":
                    eq(ws.expect_close()[0], w[1], f"Autobahn {section}, {what}: the close code")
                    continue
                f = ws.next_frame()
                check(f is not None, f"Autobahn {section}, {what}: EOF before {w!r}")
                op, payload = f[0], f[1]
                payload = payload.encode() if isinstance(payload, str) else bytes(payload)
                if op == TEXT or op == BINARY:
                    while not f[2]:  # the rest of the message
                        f = ws.next_frame()
                        payload += f[1].encode() if isinstance(f[1], str) else bytes(f[1])
                eq((op, payload), w, f"Autobahn {section}, {what}")
            ws.close()


def test_WS3_too_many_fragments():
    with Server("ws_check") as s:
        s.wait_ready()
        ws = _raw(s)
        # each fragment is a chunk the reassembly keeps: 4096 frames make one message ...
        ws.send(frame(TEXT, b"a", fin=False) + frame(CONT, b"a", fin=False) * 4094 +
                frame(CONT, b"a"))
        eq(ws.message(), (TEXT, b"a" * 4096), "a message of 4096 fragments")
        # ... and the 4097th frame of one is refused as a message too big
        ws.send(frame(TEXT, b"a", fin=False) + frame(CONT, b"a", fin=False) * 4096)
        eq(ws.expect_close()[0], 1009, "the 4097th fragment of one message")


def test_WS1_sends_from_another_thread_while_the_client_leaves():
    with Server("ws_check", env={"M0_WS_MAX_QUEUED": 64 << 20}) as s:
        s.wait_ready()
        ws = _raw(s, "/flood?n=1000000&size=1&thread=1")
        for _ in range(3):
            eq(ws.message(), (BINARY, b"\0"), "a message from the app's thread")
        ws.close()  # gone mid-flood: the thread's next sends are refused, nothing waits
        s.wait_log(r"m0\[ws_check\]: ws_check: flood stopped after \d+ sends: -32$")
        eq(s.stop(), 0, "exit status")



def _burst_order(ws, n, size, code):
    """n messages "burst I" padded to `size`, in order, then the Close (code, "burst done")."""
    for i in range(n):
        op, data = ws.message()
        if op == TEXT:  # the text whole, but shown by its head
            check(data == f"burst {i}".encode().ljust(size, b"."), f"message {i}: {data[:20]!r}")
            data = data[:data.index(b".")]
        eq((op, data), (TEXT, f"burst {i}".encode()), f"message {i} before the Close")
    eq(ws.expect_close(), (code, "burst done"), "the Close after the messages")


def test_WS1_close_after_the_messages_sent_before_it():
    """m0_ws_close() after m0_ws_send()s in one go (SPEC WS1, D223): the client gets every
    message, in order, then the Close with its code and reason, though wslay sends a control
    frame first: the sends pile up behind a client that reads nothing until they are all queued
    (a small receive buffer), on the loop in on_open and from the app's own thread."""
    n, size = 2000, 4000  # 8 MB: more than the socket's send buffer takes
    with Server("ws_check", env={"M0_WS_MAX_QUEUED": 64 << 20}) as s:
        s.wait_ready()
        for k, extra in enumerate(("", "&thread=1")):
            ws = _raw(s, f"/burst?n={n}&size={size}&code=4002{extra}", rcvbuf=4096)
            eq(wait_count(s, r"ws_check: burst queued$", k + 1), k + 1, "the burst queued")
            _burst_order(ws, n, size, 4002)
            ws.close()
        eq(wait_count(s, r"ws_check: burst closed 4002$", 2), 2, "on_close with the app's code")
        eq(s.stop(), 0, "exit status")


def _counts(s):
    c = s.connect()
    r = c.get("/counts")
    c.close()
    eq(r.status, 200, "GET /counts")
    return r.json()


def wait_closed(s, want, timeout=10):
    """/counts once on_close ran for every WebSocket accepted (or the time is out)."""
    deadline = time.monotonic() + timeout
    while True:
        got = _counts(s)
        if got["accepted"] >= want and got["closed"] >= got["accepted"]:
            return got
        if time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def test_WS1_on_close_for_every_websocket_accepted():
    """Once m0_res_websocket() took the state, on_close hands it back once, opened or not (SPEC
    WS1, D224): clients that reset the connection right after the upgrade's request (the 101 then
    fails, or goes to a client gone), and handlers that fail after accepting (500, no WebSocket);
    on_close counts equal the upgrades accepted, and ws_check frees its state there."""
    rounds = 200
    with Server("ws_check") as s:
        s.wait_ready()
        for _ in range(rounds):
            sock = socket.create_connection(s.tcp_addr)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.sendall(handshake("/burst?hold=1", f"{s.tcp_addr[0]}:{s.tcp_addr[1]}"))
            sock.close()  # a reset, before a byte of the 101 is read
        for _ in range(5):
            c = s.connect()
            c.send(handshake("/burst?fail=1", "test"))
            eq(c.read_response().status, 500, "a handler that fails after accepting")
            c.close()
        got = wait_closed(s, 5)
        check(got["accepted"] >= 5, f"upgrades accepted: {got}")
        eq(got["closed"], got["accepted"], f"on_close once per upgrade accepted: {got}")
        # most resets come before the 101 is out whole: the path that never opens is taken
        check(got["opened"] < got["accepted"] - 5, f"some never opened: {got}")
        eq(s.stop(), 0, "exit status")
        eq(_closed_lines(s), got["accepted"], "on_close lines")


def _closed_lines(s):
    return len([ln for ln in s.log_lines() if ln.endswith("ws_check: burst closed 1006")])


# ---- WS3: the output bound, pings and the idle bound ----

def test_WS3_slow_consumer_closed_1008():
    with Server("ws_check", env={"M0_WS_MAX_QUEUED": 65536}) as s:
        s.wait_ready()
        for path, who in (("/flood?n=200&size=65536", r"loop 0: "),
                          ("/flood?n=200&size=65536&thread=1", r"m0\[ws_check\]: ")):
            ws = _raw(s, path, rcvbuf=4096)  # a client that reads nothing for now
            line = s.wait_log(who + r"ws_check: flood stopped after \d+ sends: -\d+$")
            check(line.endswith(": -105") or line.endswith(": -32"),
                  f"{path}: the flood's sends were not refused: {line}")
            n, code = 0, None
            while code is None:  # what was already on its way, then the Close
                op, payload = ws.message(timeout=10)
                if op == CLOSE:
                    code = int(payload[0])
                else:
                    eq(len(payload), 65536, "a message of the flood")
                    n += 1
            eq(code, 1008, f"{path}: the close of a slow consumer")
            check(n < 200, f"{path}: all {n} messages came: nothing was bounded")
            ws.close()


def test_WS3_ping_then_idle_close():
    with Server("ws_check", env={"M0_WS_PING_MS": 100, "M0_IDLE_TIMEOUT_MS": 600}) as s:
        s.wait_ready()
        ws = _raw(s)
        f = ws.next_frame(timeout=5)
        eq(f[0], PING, "a ping after M0_WS_PING_MS")
        ws.send(frame(PONG, bytes(f[1])))  # alive: the next ping comes, no close
        eq(ws.next_frame(timeout=5)[0], PING, "the next ping")
        # silent now: closed once the idle bound passes, without waiting for a Close
        while True:
            f = ws.next_frame(timeout=5)
            if f is None:
                break
            eq(f[0], PING, "only pings while silent")
        s.wait_log(r"ws_check: echo closed 1006$")


# ---- WS4: the drain ----

def test_WS4_sigterm_closes_1001_exit_0():
    with Server("ws_check") as s:
        s.wait_ready()
        ws = _raw(s, "/flood?n=3&size=1000")
        for _ in range(3):
            eq(ws.message(), (BINARY, b"\0" * 1000), "a message queued before the stop")
        echo = _raw(s)
        s.send_signal(signal.SIGTERM)
        eq(ws.expect_close(), (1001, "server shutting down"), "the flood's close at the drain")
        eq(echo.expect_close(), (1001, "server shutting down"), "the echo's close at the drain")
        eq(s.wait_exit(6), 0, "exit status after the drain")
        s.wait_log(r"ws_check: echo closed 1001$")


def test_WS4_a_client_not_reading_does_not_hold_the_drain():
    with Server("ws_check", env={"M0_WS_MAX_QUEUED": 64 << 20}) as s:
        s.wait_ready()
        stuck = _raw(s, "/flood?n=200&size=65536", rcvbuf=4096)  # reads nothing
        s.wait_log(r"loop 0: ws_check: flood stopped after 200 sends: 0$")
        t0 = time.monotonic()
        s.send_signal(signal.SIGTERM)
        eq(s.wait_exit(6), 0, "exit status with a client that reads nothing")
        check(time.monotonic() - t0 < 3, "the drain waited for a client that reads nothing")
        s.wait_log(r"streams closed unread at the stop 1,")
        stuck.close()


# ---- WS2: the bus's events as messages; the proof with counter ----

def _post(s, path):
    c = s.connect()
    r = c.exchange("POST", path)
    c.close()
    eq(r.status, 204, f"POST {path}")
    return int(r.header("x-event-id"))


def test_WS2_counter_ws_proof():
    async def run(s):
        base = f"ws://{s.tcp_addr[0]}:{s.tcp_addr[1]}"
        async with websockets.connect(f"{base}/ws?counter=proof") as ws:
            ids = [_post(s, "/increment?counter=proof") for _ in range(3)]
            got = [json.loads(await ws.recv()) for _ in range(3)]
            eq([m["id"] for m in got], ids, "three messages with the POSTs' ids")
            check(ids[0] < ids[1] < ids[2], f"ids not rising: {ids}")
            eq([json.loads(m["data"])["value"] for m in got], [1, 2, 3], "values")
            eq({(m["channel"], m["event"]) for m in got}, {("counter:proof", "value")},
               "channel and event")
            eq(set(got[0]), {"id", "channel", "event", "data"}, "the message's members")
        # a reconnect with the first one's id gets the other two, then the live ones, none twice
        async with websockets.connect(f"{base}/ws?counter=proof&last_event_id={ids[0]}") as ws:
            again = [json.loads(await ws.recv()) for _ in range(2)]
            eq([m["id"] for m in again], ids[1:], "the replay after last_event_id")
            fourth = _post(s, "/increment?counter=proof")
            m = json.loads(await ws.recv())
            eq((m["id"], json.loads(m["data"])["value"]), (fourth, 4), "live after the replay")
        # /ws follows every counter
        async with websockets.connect(f"{base}/ws") as ws:
            a = _post(s, "/increment?counter=other")
            m = json.loads(await ws.recv())
            eq((m["id"], m["channel"]), (a, "counter:other"), "/ws: every counter's events")
        # Origin: a foreign one is 403 before the upgrade, the Host's own is 101
        try:
            async with websockets.connect(f"{base}/ws", origin="http://evil.example"):
                raise AssertionError("a foreign Origin was upgraded")
        except websockets.InvalidStatusCode as e:
            eq(e.status_code, 403, "a foreign Origin")
        async with websockets.connect(f"{base}/ws", origin=f"http://{s.tcp_addr[0]}:{s.tcp_addr[1]}"):
            pass
        # a text message over 1 MiB is closed 1009
        async with websockets.connect(f"{base}/ws?counter=proof") as ws:
            await ws.send("x" * ((1 << 20) + 1))
            try:
                await ws.recv()
                raise AssertionError("no close past 1 MiB")
            except websockets.ConnectionClosed as e:
                eq(e.rcvd.code, 1009, "a message over 1 MiB")

    with Server("counter") as s:
        s.wait_ready()
        asyncio.run(run(s))
        # text that is not UTF-8 is closed 1007
        ws = _raw(s, "/ws?counter=proof")
        ws.send(frame(TEXT, b"\xc3\x28"))
        eq(ws.expect_close()[0], 1007, "a text message that is not UTF-8")
        # SIGTERM closes 1001 and the process exits 0
        ws = _raw(s, "/ws?counter=proof")
        s.send_signal(signal.SIGTERM)
        eq(ws.expect_close(), (1001, "server shutting down"), "the close at SIGTERM")
        eq(s.wait_exit(6), 0, "exit status")


def test_WS2_next_request_reads_its_own_query():
    """A WebSocket resumed by its query's last_event_id leaves nothing of that query to the
    loop's next request: a POST /increment?counter=b beside it increments b (the index the
    upgrade made of ?counter=a&last_event_id=… was once read by the next request)."""
    async def run(s):
        base = f"ws://{s.tcp_addr[0]}:{s.tcp_addr[1]}"
        first = _post(s, "/increment?counter=a")
        async with websockets.connect(f"{base}/ws?counter=a&last_event_id={first}"):
            _post(s, "/increment?counter=b")
            c = s.connect()
            r = c.exchange("GET", "/")
            c.close()
            eq(r.body, b'{"a":1,"b":1}\n', "each request's own query")

    with Server("counter") as s:  # one loop: the WebSocket's and the POST's
        s.wait_ready()
        asyncio.run(run(s))


def test_WS2_gap_before_the_kept_events():
    with Server("ws_check", env={"M0_REPLAY_PER_CHANNEL": 2}) as s:
        s.wait_ready()
        c = s.connect()
        ids = []
        for i in range(4):
            r = c.exchange("POST", "/publish?channel=room:1", body=f"m{i}".encode())
            eq(r.status, 200, "publish")
            ids.append(r.json()["id"])
        ws = _raw(s, f"/follow?channel=room:1&last_event_id={ids[0]}")
        op, gap = ws.message()
        eq(op, TEXT, "the gap's message")
        gap = json.loads(gap)
        eq((gap["id"], gap["channel"], gap["event"]), (None, "room:1", "m0-gap"), "AP2's gap")
        eq(json.loads(gap["data"]), {"channel": "room:1", "oldest": ids[2]}, "the gap's data")
        kept = [json.loads(ws.message()[1]) for _ in range(2)]
        eq([(m["id"], m["data"], m["event"]) for m in kept],
           [(ids[2], "m2", "message"), (ids[3], "m3", "message")], "the kept events after it")


def test_WS2_every_follower_gets_each_frames_own_message():
    """On one loop, each event's message is packed once and copied to every follower (D216):
    followers of the channel, and replays of older events beside the live ones, each get each
    frame's own message, in order, none another's (SPEC WS2)."""
    with Server("ws_check", args=["--threads", "1"]) as s:
        s.wait_ready()
        c = s.connect()

        def publish(body):
            r = c.exchange("POST", "/publish?channel=room:1", body=body.encode())
            eq(r.status, 200, "publish")
            return r.json()["id"]

        def got(ws, n):
            return [(m["id"], m["channel"], m["data"])
                    for m in (json.loads(ws.message()[1]) for _ in range(n))]

        a, b = _raw(s, "/follow?channel=room:1"), _raw(s, "/follow?channel=room:1")
        i0, i1 = publish("zero"), publish("one")
        for ws in (a, b):
            eq(got(ws, 2), [(i0, "room:1", "zero"), (i1, "room:1", "one")], "the live two")
        # a replay of the frame the loop packed last, then one of an older frame first
        late = _raw(s, f"/follow?channel=room:1&last_event_id={i0}")
        eq(got(late, 1), [(i1, "room:1", "one")], "the replay after the first")
        whole = _raw(s, f"/follow?channel=room:1&last_event_id={i0 - 1}")
        eq(got(whole, 2), [(i0, "room:1", "zero"), (i1, "room:1", "one")], "the replay of both")
        i2 = publish("two")
        for ws in (a, b, late, whole):
            eq(got(ws, 1), [(i2, "room:1", "two")], "the live one after the replays")


def test_WS1_a_message_leaves_in_one_segment():
    """A message's header and payload go out in one write (D217): over loopback, under
    TCP_NODELAY, twenty echoes arrive in twenty segments or so, where a header written apart
    from its payload made forty (the client's tcpi_segs_in, TCP_INFO)."""
    import socket
    import struct

    def segs_in(sock):
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 192)
        return struct.unpack_from("I", info, 140)[0]  # struct tcp_info's tcpi_segs_in

    with Server("ws_check") as s:
        s.wait_ready()
        ws = _raw(s)
        ws.send(frame(TEXT, b"warm"))
        eq(ws.message(), (TEXT, b"warm"), "echo")
        before = segs_in(ws.sock)
        for i in range(20):
            m = b"m%02d" % i + b"x" * 200
            ws.send(frame(TEXT, m))
            eq(ws.message(), (TEXT, m), f"echo {i}")
        got = segs_in(ws.sock) - before
        check(20 <= got <= 30, f"{got} segments came for 20 echoes")


def test_WS2_followers_of_two_channels_and_the_next_request_on_the_loop():
    """A WebSocket's upgrade reads its query's last_event_id after its handler returned; the
    loop's next request reads its own query, not the upgrade's: two WebSockets following two
    channels each get their channel's events alone (SPEC WS2)."""
    with Server("ws_check", args=["--threads", "1"]) as s:
        s.wait_ready()
        a, b = _raw(s, "/follow?channel=a"), _raw(s, "/follow?channel=b")
        ids = []
        for ch, body in (("a", "zero"), ("b", "one"), ("a", "two")):
            r = s.connect().exchange("POST", f"/publish?channel={ch}", body=body.encode())
            eq(r.status, 200, "publish")
            ids.append(r.json()["id"])
        got = [json.loads(a.message()[1]) for _ in range(2)] + [json.loads(b.message()[1])]
        eq([(m["id"], m["channel"], m["data"]) for m in got],
           [(ids[0], "a", "zero"), (ids[2], "a", "two"), (ids[1], "b", "one")],
           "each channel's events to its follower")


# ---- the metrics: open, messages each way, closes by code ----

def test_WS1_metrics():
    from test_metrics import METRICS_SOCKETS, scrape

    def samples(s):
        st, _, body = scrape(s, accept=None)
        eq(st, 200, "the scrape")
        return {ln.rsplit(" ", 1)[0]: ln.rsplit(" ", 1)[1] for ln in body.splitlines()
                if ln.startswith("m0_websocket")}

    with Server("ws_check", sockets=METRICS_SOCKETS) as s:
        s.wait_ready()
        ws = _raw(s)
        for m in (b"one", b"two"):
            ws.send(frame(TEXT, m))
            eq(ws.message(), (TEXT, m), "echo")
        got = samples(s)
        eq(got.get('m0_websockets{loop="0"}'), "1", f"open: {got}")
        eq(got.get('m0_websocket_messages_received_total{loop="0"}'), "2", f"in: {got}")
        eq(got.get('m0_websocket_messages_sent_total{loop="0"}'), "2", f"out: {got}")
        ws.send(frame(CLOSE, close_payload(1000)))
        eq(ws.expect_close()[0], 1000, "the close")
        big = _raw(s)
        big.send(frame(TEXT, b"x" * ((1 << 20) + 1)))
        eq(big.expect_close()[0], 1009, "past the message bound")
        got = samples(s)
        eq(got.get('m0_websockets{loop="0"}'), "0", f"open after the closes: {got}")
        eq(got.get('m0_websocket_closes_total{loop="0",code="1000"}'), "1", f"1000: {got}")
        eq(got.get('m0_websocket_closes_total{loop="0",code="1009"}'), "1", f"1009: {got}")
        eq(got.get('m0_websocket_closes_total{loop="0",code="other"}'), "0", f"other: {got}")
