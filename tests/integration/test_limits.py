# SPDX-License-Identifier: MIT
"""Request limits (SPEC H2), each lowered through its knob: the answer carries the limit's
status and Connection: close, then the server closes; one step inside the bound is served."""

from m0test import Server, build_request, eq

REASONS = {413: "Content Too Large", 414: "URI Too Long", 431: "Request Header Fields Too Large"}


def refused(c, status, what):
    """Read the refusal: exact status line, plain body, Connection: close, then EOF."""
    r = c.read_response()
    eq(r.status, status, f"{what}: status")
    eq(r.reason, REASONS[status], f"{what}: reason")
    body = f"{status} {REASONS[status]}\n".encode()
    eq(r.body, body, f"{what}: body")
    eq(r.header("Content-Length"), str(len(body)), f"{what}: Content-Length")
    eq(r.header("Connection"), "close", f"{what}: Connection")
    eq(r.header("Server"), "m0", f"{what}: Server")
    c.expect_eof()


def test_H2_uri_over_bound_is_414():
    with Server("host_check", args=["--max-uri-bytes", "64"]) as s:
        s.wait_ready()
        c = s.connect()
        ok = "/health?" + "a" * (64 - len("/health?"))
        eq(c.get(ok).status, 200, "a 64-byte target")
        c.request("GET", ok + "a")
        refused(c, 414, "a 65-byte target")


def test_H2_uri_over_bound_arriving_slowly_is_414():
    """A request line still arriving past the bound is refused without waiting for its end."""
    with Server("host_check", args=["--max-uri-bytes", "64"]) as s:
        s.wait_ready()
        c = s.connect()
        c.send(b"GET /" + b"a" * 200)
        refused(c, 414, "an unfinished 200-byte target")


def test_H2_head_over_bound_is_431():
    with Server("host_check", args=["--max-head-bytes", "1024"]) as s:
        s.wait_ready()
        c = s.connect()
        small = build_request("GET", "/health", [("X-Pad", "p" * 900)])
        eq(len(small) <= 1024, True, "the small head fits")
        eq(c.exchange("GET", "/health", [("X-Pad", "p" * 900)]).status, 200, "head under 1 KiB")
        c.request("GET", "/health", [("X-Pad", "p" * 2000)])
        refused(c, 431, "a 2 KiB head")


def test_H2_head_over_bound_unfinished_is_431():
    with Server("host_check", args=["--max-head-bytes", "1024"]) as s:
        s.wait_ready()
        c = s.connect()
        c.send(b"GET /health HTTP/1.1\r\nHost: test\r\nX-Pad: " + b"p" * 2000)
        refused(c, 431, "an unfinished 2 KiB head")


def test_H2_header_fields_over_bound_is_431():
    with Server("host_check", args=["--max-header-fields", "5"]) as s:
        s.wait_ready()
        c = s.connect()
        five = [(f"X-F{i}", str(i)) for i in range(4)]  # + Host = 5
        eq(c.exchange("GET", "/health", five).status, 200, "5 header fields")
        c.request("GET", "/health", five + [("X-F4", "4")])
        refused(c, 431, "6 header fields")


def test_H2_body_over_bound_is_413():
    with Server("host_check", args=["--max-body-bytes", "10"]) as s:
        s.wait_ready()
        c = s.connect()
        r = c.exchange("POST", "/echo", body=b"0123456789")
        eq((r.status, r.body), (200, b"0123456789"), "a 10-byte body")
        c.request("POST", "/echo", body=b"01234567890123456789")
        refused(c, 413, "a 20-byte Content-Length")


def test_H2_declared_body_over_bound_is_413_before_the_body():
    """The declared length alone decides: the 413 comes without the body ever being sent."""
    with Server("host_check", args=["--max-body-bytes", "10"]) as s:
        s.wait_ready()
        c = s.connect()
        c.send(b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 20\r\n\r\n")
        refused(c, 413, "a 20-byte Content-Length, body held back")


def test_H2_chunked_body_over_bound_is_413():
    with Server("host_check", args=["--max-body-bytes", "10"]) as s:
        s.wait_ready()
        c = s.connect()
        head = b"POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n"
        c.send(head + b"5\r\nabcde\r\n5\r\nfghij\r\n0\r\n\r\n")
        r = c.read_response()
        eq((r.status, r.body), (200, b"abcdefghij"), "a 10-byte chunked body")
        c.send(head + b"6\r\nabcdef\r\n6\r\nghijkl\r\n0\r\n\r\n")
        refused(c, 413, "a 12-byte chunked body")
