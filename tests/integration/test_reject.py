# SPDX-License-Identifier: MIT
"""Malformed requests (SPEC H3): 400, Connection: close, and nothing served after it — a valid
request sent in the same write right behind the bad one is never answered."""

from m0test import Server, eq

FOLLOW = b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n"

CASES = [
    ("obs-fold", b"GET /health HTTP/1.1\r\nHost: test\r\nX-A: one\r\n two\r\n\r\n"),
    ("obs-fold with HTAB", b"GET /health HTTP/1.1\r\nHost: test\r\nX-A: one\r\n\ttwo\r\n\r\n"),
    ("bare LF line endings", b"GET /health HTTP/1.1\nHost: test\n\n"),
    ("bare LF after a header", b"GET /health HTTP/1.1\r\nHost: test\nX-A: a\r\n\r\n"),
    ("bare LF ending the head", b"GET /health HTTP/1.1\r\nHost: test\r\n\n"),
    ("CR not followed by LF", b"GET /health HTTP/1.1\r\nHost: test\rX-A: a\r\n\r\n"),
    ("CR inside a value", b"GET /health HTTP/1.1\r\nHost: test\r\nX-A: a\rb\r\n\r\n"),
    ("missing Host on HTTP/1.1", b"GET /health HTTP/1.1\r\nX-A: a\r\n\r\n"),
    ("two Host fields", b"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
    (
        "Content-Length with Transfer-Encoding",
        b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    ),
    (
        "two differing Content-Length",
        b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
    ),
    (
        "differing Content-Length in one field",
        b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 3, 4\r\n\r\nabcd",
    ),
    ("malformed Content-Length", b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 3x\r\n\r\nabc"),
    ("negative Content-Length", b"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: -1\r\n\r\n"),
    (
        "transfer coding not ending in chunked",
        b"POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked, gzip\r\n\r\nabc",
    ),
    ("request line without a version", b"GET /\r\n\r\n"),
    ("request line without a version, with a header", b"GET /health\r\nHost: test\r\n\r\n"),
    ("HTTP/2.0", b"GET /health HTTP/2.0\r\nHost: test\r\n\r\n"),
    ("HTTP/0.9 version", b"GET /health HTTP/0.9\r\nHost: test\r\n\r\n"),
    ("lower-case version", b"GET /health http/1.1\r\nHost: test\r\n\r\n"),
    ("control character in a value", b"GET /health HTTP/1.1\r\nHost: test\r\nX-A: a\x01b\r\n\r\n"),
    ("DEL in a value", b"GET /health HTTP/1.1\r\nHost: test\r\nX-A: a\x7fb\r\n\r\n"),
    ("NUL in a value", b"GET /health HTTP/1.1\r\nHost: test\r\nX-A: a\x00b\r\n\r\n"),
    ("space before the colon", b"GET /health HTTP/1.1\r\nHost: test\r\nX-A : a\r\n\r\n"),
    ("empty field name", b"GET /health HTTP/1.1\r\nHost: test\r\n: a\r\n\r\n"),
]


def rejected(s, name, raw):
    c = s.connect()
    c.send(raw + FOLLOW)
    r = c.read_response()
    eq(r.status, 400, f"{name}: status")
    eq(r.body, b"400 Bad Request\n", f"{name}: body")
    eq(r.header("Content-Length"), "16", f"{name}: Content-Length")
    eq(r.header("Connection"), "close", f"{name}: Connection")
    c.expect_eof()
    c.close()


def _run(cases):
    failures = []
    with Server("host_check") as s:
        s.wait_ready()
        # The same well-formed request is served on its own: the refusals are about the bytes.
        eq(s.connect().get("/health").status, 200, "control request")
        for name, raw in cases:
            try:
                rejected(s, name, raw)
            except AssertionError as e:
                failures.append(f"{name} {raw!r}: {str(e).splitlines()[0]}")
        eq(s.connect().get("/health").status, 200, "served after the refusals")
    if failures:
        raise AssertionError(f"{len(failures)} of {len(cases)} not refused:\n" + "\n".join(failures))


def _case(name):
    return [c for c in CASES if c[0] == name]


def test_H3_obs_fold():
    _run(_case("obs-fold") + _case("obs-fold with HTAB"))


def test_H3_bare_lf():
    _run(_case("bare LF line endings") + _case("bare LF after a header") + _case("bare LF ending the head"))


def test_H3_cr_without_lf():
    _run(_case("CR not followed by LF") + _case("CR inside a value"))


def test_H3_host():
    _run(_case("missing Host on HTTP/1.1") + _case("two Host fields"))


def test_H3_content_length_and_transfer_encoding():
    _run(
        _case("Content-Length with Transfer-Encoding")
        + _case("two differing Content-Length")
        + _case("differing Content-Length in one field")
        + _case("malformed Content-Length")
        + _case("negative Content-Length")
        + _case("transfer coding not ending in chunked")
    )


def test_H3_version():
    _run(
        _case("request line without a version")
        + _case("request line without a version, with a header")
        + _case("HTTP/2.0")
        + _case("HTTP/0.9 version")
        + _case("lower-case version")
    )


def test_H3_field_syntax():
    _run(
        _case("control character in a value")
        + _case("DEL in a value")
        + _case("NUL in a value")
        + _case("space before the colon")
        + _case("empty field name")
    )

