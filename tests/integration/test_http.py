# SPDX-License-Identifier: MIT
"""HTTP/1.1 behaviour over real sockets (SPEC H1, H4): keep-alive and its cap, pipelining,
HEAD, chunked request bodies, Expect: 100-continue, Date/Server/Content-Length."""

import email.utils
import json
import os
import re
import shutil
import subprocess
import time

from m0test import IMF_FIXDATE, Server, build_request, check, eq


def test_H4_ramp_now_headers_and_body():
    with Server("ramp") as s:
        s.wait_ready()
        c = s.connect()
        r = c.get("/x/now")
        eq(r.version, "HTTP/1.1", "version")
        eq(r.status, 200, "status")
        eq(r.reason, "OK", "reason")
        eq(r.header("Content-Type"), "application/json", "Content-Type")
        eq(r.header("Server"), "m0", "Server")
        eq(r.header_all("Server"), ["m0"], "Server fields")
        eq(r.header("Connection"), None, "Connection on a keep-alive answer")
        eq(r.header_all("Keep-Alive"), ["timeout=60"], "Keep-Alive on a kept answer (D111)")
        eq(r.header("x-worker"), "0", "x-worker")
        eq(r.header("x-thread"), "-1", "x-thread")
        date = r.header("Date")
        check(date is not None and IMF_FIXDATE.match(date), f"Date is not IMF-fixdate: {date!r}")
        skew = abs(email.utils.parsedate_to_datetime(date).timestamp() - time.time())
        check(skew <= 2, f"Date is {skew:.0f}s away from now")
        eq(r.header_all("Content-Length"), [str(len(r.body))], "Content-Length")
        eq(
            sorted(n.lower() for n in r.names()),
            sorted(["server", "date", "content-length", "keep-alive", "x-worker", "x-thread",
                    "content-type"]),
            "header fields",
        )
        check(re.fullmatch(rb'\{"now":[1-9][0-9]*\.[0-9]{3}\}', r.body), f"body: {r.body!r}")
        body = json.loads(r.body)
        eq(list(body), ["now"], "JSON keys")
        check(isinstance(body["now"], float), f"now is not a number: {body!r}")
        check(abs(body["now"] - time.time()) < 5, f"now is off: {body!r}")


def test_H4_error_statuses_carry_content_length():
    with Server("ramp") as s:
        s.wait_ready()
        c = s.connect()
        r = c.get("/nowhere")
        eq(r.status, 404, "unknown path")
        eq(r.body, b"404 Not Found\n", "404 body")
        eq(r.header("Content-Length"), "14", "404 Content-Length")
        eq(r.header("Server"), "m0", "404 Server")
        r = c.exchange("POST", "/x/now", body=b"x")
        eq(r.status, 405, "POST to a GET route")
        eq(r.header("Content-Length"), str(len(r.body)), "405 Content-Length")
        r = c.get("/x/search?sel=0")
        eq(r.status, 400, "sel out of range")
        eq(r.body, b'{"error":"sel is 1..100 and k is 1..64"}', "400 body")
        eq(r.header("Connection"), None, "an app's 400 keeps the connection")
        eq(c.get("/x/now").status, 200, "the same connection after an app's 400")


def test_H1_1000_requests_one_connection_no_cap():
    with Server("ramp", args=["--max-keepalive-requests", "0"]) as s:
        s.wait_ready()
        c = s.connect()
        local = c.sock.getsockname()
        for i in range(1, 1002):
            r = c.get("/x/now")
            eq(r.status, 200, f"request {i}")
            eq(r.header("Connection"), None, f"Connection on response {i}")
        eq(c.sock.getsockname(), local, "socket")
        check(c.nothing_within(0.05), "the server sent bytes or closed after the last answer")


def test_H1_default_cap_closes_after_1000():
    with Server("ramp") as s:
        s.wait_ready()
        c = s.connect()
        for i in range(1, 1000):
            r = c.get("/x/now")
            eq(r.status, 200, f"request {i}")
            eq(r.header("Connection"), None, f"Connection on response {i}")
        r = c.get("/x/now")
        eq(r.status, 200, "request 1000")
        eq(r.header("Connection"), "close", "Connection on response 1000")
        c.expect_eof()


def test_H1_keepalive_cap_3():
    with Server("host_check", args=["--max-keepalive-requests", "3"]) as s:
        s.wait_ready()
        c = s.connect()
        for i in (1, 2):
            r = c.get("/health")
            eq(r.status, 200, f"request {i}")
            eq(r.header("Connection"), None, f"Connection on response {i}")
        r = c.get("/health")
        eq(r.status, 200, "request 3")
        eq(r.header("Connection"), "close", "Connection on response 3")
        eq(r.body, b"ok\n", "body of response 3")
        c.expect_eof()


def test_H1_keepalive_cap_pipelined_beyond_cap():
    """Five requests in one write against a cap of 3: three answers, the third closes."""
    with Server("host_check", args=["--max-keepalive-requests", "3"]) as s:
        s.wait_ready()
        c = s.connect()
        c.send(b"".join(build_request("GET", f"/slow?ms=0&n={i}") for i in range(5)))
        for i in (1, 2):
            eq(c.read_response().header("Connection"), None, f"Connection on response {i}")
        r = c.read_response()
        eq(r.header("Connection"), "close", "Connection on response 3")
        c.expect_eof()


def test_H1_http10_closes_unless_keepalive():
    with Server("host_check") as s:
        s.wait_ready()
        c = s.connect()
        c.send(b"GET /health HTTP/1.0\r\n\r\n")
        r = c.read_response()
        eq(r.status, 200, "HTTP/1.0 without Host")
        eq(r.header("Connection"), "close", "Connection on an HTTP/1.0 answer")
        c.expect_eof()
        c = s.connect()
        c.send(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        r = c.read_response()
        eq(r.status, 200, "HTTP/1.0 keep-alive")
        check(
            r.header("Connection") in (None, "keep-alive"),
            f"Connection on an HTTP/1.0 keep-alive answer: {r.header('Connection')!r}",
        )
        eq(c.get("/health").status, 200, "second request on the HTTP/1.0 keep-alive connection")


def _date_free(raw):
    return re.sub(rb"Date: [^\r]*\r\n", b"Date: X\r\n", raw)


def test_H1_keep_alive_timeout_on_kept_answers():
    """D111: every answer that keeps its connection says how long m0 keeps it idle, in whole
    seconds rounded down (under a second: 0, "do not count on it"), so that a client such as
    Node's fetch retires it first; an answer that closes and a stream's head do not."""
    ok = b"x-worker: 0\r\nx-thread: -1\r\nContent-Type: text/plain; charset=utf-8\r\n"
    for args, n in (([], b"60"), (["--idle-timeout-ms", "2999"], b"2"),
                    (["--idle-timeout-ms", "500"], b"0"), (["--idle-timeout-ms", "1000"], b"1")):
        line = b"Keep-Alive: timeout=" + n + b"\r\n"
        kept = b"HTTP/1.1 200 OK\r\nServer: m0\r\nDate: X\r\nContent-Length: 3\r\n" + line + ok
        with Server("host_check", args=args + ["--blocking-threads", "1"]) as s:
            s.wait_ready()
            c = s.connect()
            r = c.get("/health")
            eq(_date_free(r.raw_head + r.body), kept + b"\r\nok\n", f"{args}: a kept answer")
            r = c.exchange("HEAD", "/health")
            eq(_date_free(r.raw_head), kept + b"\r\n", f"{args}: a HEAD's")
            r = c.get("/slow?ms=0")
            eq(r.header_all("Keep-Alive"), ["timeout=" + n.decode()], f"{args}: a pool answer's")
            r = c.get("/nowhere")
            eq(_date_free(r.raw_head + r.body),
               b"HTTP/1.1 404 Not Found\r\nServer: m0\r\nDate: X\r\nContent-Length: 14\r\n"
               + line + b"Content-Type: text/plain; charset=utf-8\r\n\r\n404 Not Found\n",
               f"{args}: the host's own 404")
            c.send(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            r = c.read_response()
            eq(_date_free(r.raw_head + r.body),
               b"HTTP/1.1 200 OK\r\nServer: m0\r\nDate: X\r\nContent-Length: 3\r\n"
               b"Connection: keep-alive\r\n" + line + ok + b"\r\nok\n",
               f"{args}: HTTP/1.0 kept")
            r = c.get("/health", headers=[("Connection", "close")])
            eq(_date_free(r.raw_head + r.body),
               b"HTTP/1.1 200 OK\r\nServer: m0\r\nDate: X\r\nContent-Length: 3\r\n"
               b"Connection: close\r\n" + ok + b"\r\nok\n", f"{args}: an answer that closes")
            c.expect_eof()
            # a stream's connection never idles between requests: its head says nothing of it
            c = s.connect()
            c.request("GET", "/events")
            r = c.read_head()
            eq(_date_free(r.raw_head),
               b"HTTP/1.1 200 OK\r\nServer: m0\r\nDate: X\r\nContent-Type: text/event-stream\r\n"
               b"Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n"
               b"x-worker: 0\r\nx-thread: -1\r\n\r\n", f"{args}: a stream's head")
            c.close()


def test_H1_node_fetch_meets_no_close_at_the_idle_deadline():
    """D111: Node's fetch reuses an idle connection for as long as Keep-Alive says, less its
    margin, and 4 s without one; asked again about --idle-timeout-ms after an answer, it must
    never meet m0's close ("other side closed")."""
    node = shutil.which("node")
    check(node is not None, "no node (contrib/deps installs nodejs)")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "idle_fetch.mjs")
    with Server("ramp", args=["--idle-timeout-ms", "500"]) as s:
        s.wait_ready()
        p = subprocess.run([node, script, f"http://127.0.0.1:{s.port}/x/now", "30", "500"],
                           capture_output=True, text=True, timeout=120)
        lines = p.stdout.splitlines()
        eq((p.returncode, lines[-1:]), (0, ["failed 0 of 30"]),
           f"node: {p.stdout[-600:]} {p.stderr[-600:]}")


def test_H1_pipelined_20_in_order_ramp():
    with Server("ramp") as s:
        s.wait_ready()
        c = s.connect()
        sels = [((i * 7) % 20) + 1 for i in range(20)]
        c.send(b"".join(build_request("GET", f"/x/search?sel={n}&k=1") for n in sels))
        for i, n in enumerate(sels):
            r = c.read_response()
            eq(r.status, 200, f"response {i}")
            body = json.loads(r.body)
            eq((body["sel"], body["k"], len(body["ids"])), (n, 1, 1), f"response {i}")
        check(c.nothing_within(0.05), f"bytes after the 20th response: {c.buf!r}")


def test_H1_pipelined_with_post_in_the_middle():
    """/instance counts this handler's answers, so each response says where it sits."""
    with Server("host_check") as s:
        s.wait_ready()
        c = s.connect()
        body = b"pipelined body \x00\xff end"
        reqs = [build_request("GET", "/instance") for _ in range(10)]
        reqs.append(
            build_request("POST", "/echo", [("Content-Type", "application/octet-stream")], body)
        )
        reqs += [build_request("GET", "/instance") for _ in range(9)]
        c.send(b"".join(reqs))
        for i in range(20):
            r = c.read_response()
            eq(r.status, 200, f"response {i}")
            if i == 10:
                eq(r.body, body, "echo in the middle")
                eq(r.header("Content-Length"), str(len(body)), "echo Content-Length")
            else:
                eq(r.json()["requests"], i + 1, f"requests count in response {i}")
        check(c.nothing_within(0.05), f"bytes after the 20th response: {c.buf!r}")


def test_H4_head_health():
    with Server("host_check") as s:
        s.wait_ready()
        c = s.connect()
        g = c.get("/health")
        eq(g.status, 200, "GET status")
        eq(g.body, b"ok\n", "GET body")
        # HEAD then GET in one write: the GET's status line must follow the HEAD's head directly.
        c.send(build_request("HEAD", "/health") + build_request("GET", "/health"))
        h = c.read_response(head=True)
        eq(h.status, 200, "HEAD status")
        eq(h.header("Content-Length"), str(len(g.body)), "HEAD Content-Length")

        def comparable(r):
            return [(k, v) for k, v in r.headers if k.lower() != "date"]

        eq(comparable(h), comparable(g), "HEAD header fields (Date aside)")
        check(IMF_FIXDATE.match(h.header("Date") or ""), f"HEAD Date {h.header('Date')!r}")
        check(
            c.buf.startswith(b"HTTP/1.1 200 OK\r\n") or not c.buf,
            f"bytes after the HEAD head: {c.buf[:40]!r}",
        )
        g2 = c.read_response()
        eq((g2.status, g2.body), (200, b"ok\n"), "GET after HEAD")
        check(c.nothing_within(0.05), f"bytes after the GET: {c.buf!r}")


def test_H4_chunked_request_body():
    with Server("host_check") as s:
        s.wait_ready()
        c = s.connect()
        head = (
            b"POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n"
            b"Content-Type: text/plain\r\n\r\n"
        )
        chunks = [
            b"5;name=value\r\nhello\r\n",
            b"1\r\n \r\n",
            b"A\r\n0123456789\r\n",
            b"1a\r\n" + b"abcdefghijklmnopqrstuvwxyz" + b"\r\n",
            b"0\r\nX-Trailer: yes\r\n\r\n",
        ]
        c.send(head)
        for ch in chunks:
            c.send(ch)
        r = c.read_response()
        expect = b"hello 0123456789abcdefghijklmnopqrstuvwxyz"
        eq(r.status, 200, "status")
        eq(r.body, expect, "echoed body")
        eq(r.header("Content-Length"), str(len(expect)), "Content-Length")
        eq(r.header("Connection"), None, "Connection")
        # The connection goes on: the same chunked body again, in one write.
        c.send(head + b"".join(chunks))
        eq(c.read_response().body, expect, "second chunked body")
        eq(c.get("/health").body, b"ok\n", "GET after the chunked POSTs")


def test_H4_expect_100_continue():
    with Server("host_check") as s:
        s.wait_ready()
        c = s.connect()
        body = b"hello world"
        c.send(
            b"POST /echo HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\n"
            b"Content-Length: 11\r\n\r\n"
        )
        interim = b"HTTP/1.1 100 Continue\r\n\r\n"
        eq(c.read_exact(len(interim), timeout=5), interim, "interim response")
        check(c.nothing_within(0.05), f"more than the interim before the body: {c.buf!r}")
        c.send(body)
        r = c.read_response()
        eq(r.status, 200, "final status")
        eq(r.body, body, "echoed body")
        # The harness's reader sees the same thing as a 100 then a 200.
        c.send(
            b"POST /echo HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\n"
            b"Content-Length: 3\r\n\r\n"
        )
        r = c.read_response()
        eq((r.status, r.reason, r.headers), (100, "Continue", []), "interim")
        c.send(b"abc")
        eq(c.read_response().body, b"abc", "second echo")


def test_H4_expect_unknown_is_417():
    with Server("host_check") as s:
        s.wait_ready()
        c = s.connect()
        c.send(
            b"POST /echo HTTP/1.1\r\nHost: test\r\nExpect: something-else\r\n"
            b"Content-Length: 3\r\n\r\nabc"
        )
        r = c.read_response()
        eq(r.status, 417, "unknown expectation")
        eq(r.header("Connection"), "close", "Connection")
        c.expect_eof()
