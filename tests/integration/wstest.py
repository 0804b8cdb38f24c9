# SPDX-License-Identifier: MIT
"""wstest: WebSocket clients for the tests (SPEC WS1-WS5). Debian's python3-websockets (a real
client) and python3-wsproto (frames read as its frame protocol reads them) live in the system
Python's dist-packages; the suite may run under another Python 3.11, which finds them there.
RawWs writes frames byte by byte, the broken ones included, and reads the server's with
wsproto's FrameProtocol."""

import base64
import hashlib
import os
import socket
import struct
import sys
import time

try:
    import websockets  # noqa: F401
    import wsproto  # noqa: F401
except ImportError:
    sys.path.append("/usr/lib/python3/dist-packages")
import websockets  # noqa: E402
from wsproto.frame_protocol import FrameProtocol, Opcode  # noqa: E402

from m0test import HarnessError  # noqa: E402

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
# RFC 6455 1.3's example: this key's accept is s3pPLMBiTxaQ9kYGzzhZRbK+xOo=
SAMPLE_KEY = "dGhlIHNhbXBsZSBub25jZQ=="

TEXT, BINARY, CLOSE, PING, PONG, CONT = 1, 2, 8, 9, 10, 0


def accept_of(key):
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def frame(opcode, payload=b"", fin=True, rsv=0, mask=True, length=None):
    """One frame as RFC 6455 5.2 draws it; `length` forces the length's form (7, 16 or 64
    bits) or a value that is not the payload's."""
    n = len(payload)
    b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
    form = length or (7 if n < 126 else 16 if n < 65536 else 64)
    if form == 7:
        head = struct.pack("!BB", b0, n)
    elif form == 16:
        head = struct.pack("!BBH", b0, 126, n)
    else:
        head = struct.pack("!BBQ", b0, 127, n if length != "msb" else n | (1 << 63))
    if not mask:
        return head + payload
    key = os.urandom(4)
    head = bytes([head[0], head[1] | 0x80]) + head[2:]
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def close_payload(code, reason=b""):
    return struct.pack("!H", code) + reason


def handshake(path, host, extra=None, key=SAMPLE_KEY, version="13", omit=()):
    fields = {"Host": host, "Upgrade": "websocket", "Connection": "Upgrade",
              "Sec-WebSocket-Key": key, "Sec-WebSocket-Version": version}
    fields.update(extra or {})
    lines = [f"GET {path} HTTP/1.1"] + [f"{k}: {v}" for k, v in fields.items() if k not in omit]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class RawWs:
    """One connection to `addr`: the handshake's bytes, then frames as the test writes them."""

    def __init__(self, addr, timeout=10, rcvbuf=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(addr)
        self.host = f"{addr[0]}:{addr[1]}"
        self.proto = FrameProtocol(client=True, extensions=[])
        self.frames = []
        self.eof = False
        self.rest = b""

    def close(self):
        self.sock.close()

    def upgrade(self, path="/echo", **kw):
        """Send the handshake; returns (status, {lower-case name: value}) of the answer."""
        self.sock.sendall(handshake(path, self.host, **kw))
        data = b""
        while b"\r\n\r\n" not in data:
            got = self.sock.recv(65536)
            if not got:
                raise HarnessError(f"EOF before the answer's head: {data!r}")
            data += got
        head, self.rest = data.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        fields = {}
        for ln in lines[1:]:
            k, v = ln.split(":", 1)
            fields[k.strip().lower()] = v.strip()
        if self.rest and status == 101:
            self.proto.receive_bytes(self.rest)
            self.rest = b""
        return status, fields

    def send(self, data):
        self.sock.sendall(data)

    def next_frame(self, timeout=10):
        """The server's next frame as (opcode, payload, fin); a Close's payload is (code,
        reason), code 1005 for none; None at EOF."""
        deadline = time.monotonic() + timeout
        while True:
            for f in self.proto.received_frames():
                op = f.opcode.value if isinstance(f.opcode, Opcode) else f.opcode
                return op, f.payload, f.message_finished
            if self.eof:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                raise HarnessError("no frame from the server in time")
            self.sock.settimeout(left)
            try:
                got = self.sock.recv(1 << 20)
            except ConnectionResetError:
                got = b""
            if not got:
                self.eof = True
            else:
                self.proto.receive_bytes(got)

    def message(self, timeout=10):
        """The next data message whole (its frames joined), skipping pings; (opcode, bytes)."""
        op0, parts = None, []
        while True:
            f = self.next_frame(timeout)
            if f is None:
                raise HarnessError("EOF inside a message")
            op, payload, fin = f
            if op in (PING, PONG):
                continue
            if op == CLOSE:
                return op, payload
            op0 = op0 or op
            parts.append(payload.encode() if isinstance(payload, str) else bytes(payload))
            if fin:
                return op0, b"".join(parts)

    def expect_close(self, timeout=10):
        """The server's Close (after any data it sent first), then its end of the connection;
        returns (code, reason)."""
        while True:
            f = self.next_frame(timeout)
            if f is None:
                raise HarnessError("EOF without a Close")
            if f[0] == CLOSE:
                code, reason = f[1]
                code = int(code)
                break
        # it closes the TCP connection once the Close went both ways (7.1.1): answer, then EOF
        try:
            self.send(frame(CLOSE, close_payload(code) if code != 1005 else b""))
        except OSError:
            pass
        self.expect_eof(timeout)
        return code, reason

    def expect_eof(self, timeout=10):
        deadline = time.monotonic() + timeout
        while not self.eof:
            f = self.next_frame(max(0.01, deadline - time.monotonic()))
            if f is None:
                return
        return
