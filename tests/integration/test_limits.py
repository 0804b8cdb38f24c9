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


# ---- H4 (RFC 9110 9.3.2): a refusal to a HEAD is the head a GET's would have, and no body ----

HEAD_ARGS = ["--max-body-bytes", "10", "--max-head-bytes", "1024", "--max-uri-bytes", "64",
             "--max-header-fields", "5", "--header-timeout-ms", "300"]
HEAD_REASONS = {**REASONS, 400: "Bad Request", 408: "Request Timeout", 417: "Expectation Failed"}
CHUNKED = b"Transfer-Encoding: chunked\r\n\r\n"
# name, the HEAD's bytes, its status: every refusal the host makes before the request is whole,
# on a head the walk indexed, on one the parser stopped in, on one still arriving, and in a body
HEAD_REFUSALS = [
    ("a Content-Length past the bound",
     b"HEAD /health HTTP/1.1\r\nHost: test\r\nContent-Length: 20\r\n\r\n", 413),
    ("a chunked body past the bound",
     b"HEAD /health HTTP/1.1\r\nHost: test\r\n" + CHUNKED + b"b\r\n01234567890\r\n0\r\n\r\n", 413),
    ("a whole head past the bound",
     b"HEAD /health HTTP/1.1\r\nHost: test\r\nX-Pad: " + b"p" * 2000 + b"\r\n\r\n", 431),
    ("an unfinished head past the bound",
     b"HEAD /health HTTP/1.1\r\nHost: test\r\nX-Pad: " + b"p" * 2000, 431),
    ("6 header fields",
     b"HEAD /health HTTP/1.1\r\nHost: test\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(5))
     + b"\r\n", 431),
    ("a target past the bound", b"HEAD /" + b"a" * 100 + b" HTTP/1.1\r\nHost: test\r\n\r\n", 414),
    ("a control character in a value (H3)",
     b"HEAD /health HTTP/1.1\r\nHost: test\r\nX-A: a\x01b\r\n\r\n", 400),
    ("a space before a colon (the parser's)",
     b"HEAD /health HTTP/1.1\r\nHost: test\r\nX-A : a\r\n\r\n", 400),
    ("a chunk size that is no number",
     b"HEAD /health HTTP/1.1\r\nHost: test\r\n" + CHUNKED + b"zz\r\n", 400),
    ("an Expect the host does not know",
     b"HEAD /health HTTP/1.1\r\nHost: test\r\nExpect: bogus\r\nContent-Length: 3\r\n\r\nabc", 417),
    ("a head that stops coming", b"HEAD /health HTTP/1.1\r\nHost: test\r\n", 408),
]


def _to_eof(s, raw):
    """Send `raw` on a new connection; every byte the server sends until it closes."""
    c = s.connect()
    c.send(raw)
    while c._fill(5):
        pass
    c.close()
    return c.buf


def _split(raw, what):
    """(status, {field: value}, the bytes after the head) of the one answer in `raw`."""
    i = raw.find(b"\r\n\r\n")
    eq(i > 0, True, f"{what}: a whole head in {raw[:120]!r}")
    lines = raw[:i].decode("latin-1").split("\r\n")
    fields = dict(ln.split(": ", 1) for ln in lines[1:])
    return int(lines[0].split(" ")[1]), fields, raw[i + 4:]


def test_H4_host_refusals_to_head_carry_no_body():
    """Each refusal to a HEAD: the exact status, the Content-Length and Content-Type the GET's
    refusal carries, Connection: close, and not one byte after the head before the close; the
    same request as a GET gets the body."""
    failures = []
    with Server("host_check", args=HEAD_ARGS) as s:
        s.wait_ready()
        for name, raw, status in HEAD_REFUSALS:
            body = f"{status} {HEAD_REASONS[status]}\n".encode()
            want = (status, str(len(body)), "text/plain; charset=utf-8", "close")
            try:
                st, f, tail = _split(_to_eof(s, raw), name)
                eq((st, f.get("Content-Length"), f.get("Content-Type"), f.get("Connection")),
                   want, "the HEAD's head")
                eq(tail, b"", "bytes after the HEAD's head")
                st, f, tail = _split(_to_eof(s, b"GET" + raw[4:]), name)
                eq((st, f.get("Content-Length"), f.get("Content-Type"), f.get("Connection")),
                   want, "the GET's head")
                eq(tail, body, "the GET's body")
            except AssertionError as e:
                failures.append(f"{name}: {str(e).splitlines()[0]}")
    if failures:
        raise AssertionError(f"{len(failures)} of {len(HEAD_REFUSALS)}:\n" + "\n".join(failures))


def test_H4_a_refusal_before_the_method_is_a_gets():
    """A method the parser stopped inside is no method: its refusal is the one a GET gets,
    with its body (the host cannot know it was to be a HEAD)."""
    with Server("host_check", args=HEAD_ARGS) as s:
        s.wait_ready()
        st, f, tail = _split(_to_eof(s, b"HE\x01AD /health HTTP/1.1\r\nHost: test\r\n\r\n"),
                             "a broken method")
        eq((st, f.get("Content-Length"), tail), (400, "16", b"400 Bad Request\n"), "the answer")
        # a HEAD cut before its method ends (one byte short of "HEAD ") times out alike
        st, f, tail = _split(_to_eof(s, b"HEAD"), "HEAD without its space")
        eq((st, f.get("Content-Length"), tail), (408, "20", b"408 Request Timeout\n"),
           "the answer")


def test_H4_the_method_is_the_refused_requests_own():
    """On a kept connection the HEAD answered before says nothing of the request refused after
    it: a GET refused by the walk, and bytes that are no request, get their bodies; a HEAD
    refused behind a GET gets none."""
    with Server("host_check", args=HEAD_ARGS) as s:
        s.wait_ready()
        head = b"HEAD /health HTTP/1.1\r\nHost: test\r\n\r\n"
        ok = (b"HTTP/1.1 200 OK\r\n", b"Content-Length: 3\r\n")
        for name, then, body in (
                ("a GET the walk refuses", b"GET /health HTTP/1.1\r\nHost: test\r\nX: a\x01\r\n\r\n",
                 b"400 Bad Request\n"),
                ("bytes that are no request", b"\x01\x02\r\n\r\n", b"400 Bad Request\n")):
            out = _to_eof(s, head + then)
            first, _, rest = out.partition(b"\r\n\r\n")
            eq((first.startswith(ok[0]), ok[1] in first + b"\r\n"), (True, True), f"{name}: HEAD")
            st, f, tail = _split(rest, name)
            eq((st, f.get("Content-Length"), tail), (400, "16", body), f"{name}: the refusal")
        big = b"HEAD /health HTTP/1.1\r\nHost: test\r\nX-Pad: " + b"p" * 2000 + b"\r\n\r\n"
        out = _to_eof(s, b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n" + big)
        st, f, tail = _split(out, "the GET")
        eq((st, tail[:3]), (200, b"ok\n"), "the GET")
        st, f, tail = _split(tail[3:], "the HEAD behind it")
        eq((st, f.get("Content-Length"), tail), (431, "36", b""), "the HEAD's 431 behind a GET")
