# SPDX-License-Identifier: MIT
"""Routes with captures (SPEC T1-T3), 405/Allow/OPTIONS (T2), CORS (Q5), per-route body bounds
and types (Q6), Expect: 100-continue after routing (H8) and HTTP/1.0 keep-alive (H7), table
driven against apps/routes_check (whose table the rows read by index: see its source).

Every row is one connection: the row's bytes, and in the same write a `GET /health` behind
them. A row names each answer to its own bytes (status, header fields with their exact value
or None for "absent", the exact body or None) and the connection's fate:

  close  the last answer carries `Connection: close`, then EOF: the GET /health is never
         answered;
  keep   no answer closes, the GET /health IS answered, and nothing more arrives."""

import json
import re
import socket
import subprocess

from m0test import HarnessError, Server, check, eq, run_app, tool

FOLLOW = b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n"
TEXT = "text/plain; charset=utf-8"


def get(path, headers=b"", method=b"GET"):
    return method + b" " + path + b" HTTP/1.1\r\nHost: test\r\n" + headers + b"\r\n"


def body_req(method, path, body, headers=b""):
    return (method + b" " + path + b" HTTP/1.1\r\nHost: test\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n" + headers + b"\r\n" + body)


def ans(status, body=None, **headers):
    """One expected answer; header names in keyword form use '_' for '-'."""
    return (status, {k.replace("_", "-"): v for k, v in headers.items()}, body)


def row(name, raw, answers, fate="keep"):
    if not isinstance(answers, list):
        answers = [answers]
    assert fate in ("keep", "close")
    return {"name": name, "raw": raw, "answers": answers, "fate": fate}


def text(s):
    return s.encode() + b"\n"


def host_answer(status, reason):
    return f"{status} {reason}\n".encode()


NOT_FOUND = host_answer(404, "Not Found")
NOT_ALLOWED = host_answer(405, "Method Not Allowed")
BAD = host_answer(400, "Bad Request")
# Q4: routing's refusals say what was refused, as m0_req_json() does for its own 415
BAD_CAPTURE = host_answer(400, 'Bad Request: a capture of the path is not valid: a malformed '
                          'escape, %00, %2F in one segment, a "." or ".." segment, or a "/" at '
                          'its start')
UNSUPPORTED = host_answer(415, "Unsupported Media Type: the body must be application/json or a "
                          "+json type")
TOO_LARGE = host_answer(413, "Content Too Large")


def observe(s, r):
    """Send the row and the GET /health behind it; return a list of problems."""
    c = s.connect(timeout=5)
    problems = []
    try:
        try:
            c.send(r["raw"] + FOLLOW)
        except (BrokenPipeError, ConnectionResetError):
            pass
        head_request = r["raw"].startswith(b"HEAD ")
        for i, (status, headers, body) in enumerate(r["answers"]):
            try:
                resp = c.read_response(head=head_request and status >= 200, timeout=5)
            except (HarnessError, socket.timeout, TimeoutError) as e:
                problems.append(f"answer {i}: none ({str(e)[:80]})")
                return problems
            if resp.status != status:
                problems.append(f"answer {i}: status {resp.status}, expected {status} "
                                f"({resp.raw_head[:200]!r} {resp.body[:80]!r})")
                continue
            for k, v in headers.items():
                got = resp.header_all(k)
                if v is None and got:
                    problems.append(f"answer {i}: {k}: {got!r}, expected none")
                elif v is not None and got != [v]:
                    problems.append(f"answer {i}: {k}: {got!r}, expected [{v!r}]")
            if status in (204, 304) or status < 200:
                if resp.header("Content-Length") is not None:
                    problems.append(f"answer {i}: a {status} with a Content-Length")
            if body is not None and resp.body != body:
                problems.append(f"answer {i}: body {resp.body!r}, expected {body!r}")
            last = i == len(r["answers"]) - 1
            closes = (resp.header("Connection") or "").lower() == "close"
            if closes != (last and r["fate"] == "close"):
                problems.append(f"answer {i}: Connection {resp.header('Connection')!r}")
        if r["fate"] == "close":
            try:
                c.expect_eof(3)
            except HarnessError as e:
                problems.append(f"after the last answer: {e}")
        else:
            resp = c.read_response(timeout=5)
            if (resp.status, resp.body) != (200, b"ok\n"):
                problems.append(f"the GET /health behind: {resp.status} {resp.body!r}")
            if not c.nothing_within(0.05):
                problems.append(f"bytes after the last answer: {c.buf[:80]!r}")
    finally:
        c.close()
    return problems


def run_rows(rows, env=None, args=()):
    failures = []
    with Server("routes_check", env=env, args=args) as s:
        s.wait_ready()
        for r in rows:
            problems = observe(s, r)
            if problems:
                failures.append(f"[{r['name']}] {r['raw'][:90]!r}: " + "; ".join(problems))
            if s.exited():
                failures.append(f"the server exited: {s.log_text()}")
                break
    if failures:
        raise AssertionError(f"{len(failures)} of {len(rows)} rows did not hold:\n"
                             + "\n".join(failures))


# ---- T1: patterns and their captures ----

PATTERNS = [
    row("exact", get(b"/todos"), ans(200, text("todos"), Content_Type=TEXT)),
    row(":id", get(b"/todos/42"), ans(200, text("todo id=42"), x_worker="0", x_thread="-1")),
    row(":id ignores the query", get(b"/todos/42?id=7&x"), ans(200, text("todo id=42"))),
    row(":id in an absolute-form target", get(b"http://other.example/todos/7"),
        ans(200, text("todo id=7"))),
    row("two captures", get(b"/users/7/posts/9"), ans(200, text("post uid=7 pid=9"))),
    row("two captures, one missing", get(b"/users/7/posts"), ans(404, NOT_FOUND)),
    row("two captures, one empty", get(b"/users//posts/9"), ans(404, NOT_FOUND)),
    row(":id needs a segment", get(b"/todos/"), ans(404, NOT_FOUND)),
    row(":id is one segment", get(b"/todos/1/2"), ans(404, NOT_FOUND)),
    row("*rest", get(b"/files/a/b/c.txt"), ans(200, text("files rest=a/b/c.txt"))),
    row("*rest empty", get(b"/files/"), ans(200, text("files rest="))),
    row("*rest needs its slash", get(b"/files"), ans(404, NOT_FOUND)),
    row("*rest keeps empty segments", get(b"/files/a//b/"), ans(200, text("files rest=a//b/"))),
    row("prefix", get(b"/static/css/site.css"), ans(200, b'{"static":"/static/css/site.css"}\n')),
    row("prefix is a string prefix", get(b"/static"), ans(404, NOT_FOUND)),
    row("prefix with a capture", get(b"/u/5/any/thing"), ans(200, text("user prefix uid=5"))),
    row("prefix with a capture, short", get(b"/u/5"), ans(404, NOT_FOUND)),
    row("a route of every method", get(b"/any", method=b"PUT"), ans(200, b'{"any":"PUT"}\n')),
    row("no route", get(b"/nowhere"), ans(404, NOT_FOUND, Content_Type=TEXT)),
    row("exact paths are matched as sent", get(b"/todo%73"), ans(404, NOT_FOUND)),
]

DECODING = [
    row("percent-decoded", get(b"/todos/caf%C3%A9"), ans(200, "todo id=café\n".encode())),
    row("a space", get(b"/todos/a%20b"), ans(200, text("todo id=a b"))),
    row("'+' stays '+'", get(b"/todos/a+b"), ans(200, text("todo id=a+b"))),
    row("%2F in *rest is a '/'", get(b"/files/a%2Fb"), ans(200, text("files rest=a/b"))),
    row("three dots are a name", get(b"/files/..."), ans(200, text("files rest=..."))),
    row("a dot inside a name", get(b"/todos/a.b"), ans(200, text("todo id=a.b"))),
    row("%00 in :id", get(b"/todos/a%00b"), ans(400, BAD_CAPTURE)),
    row("%00 in *rest", get(b"/files/a%00"), ans(400, BAD_CAPTURE)),
    row("%2F in :id", get(b"/todos/a%2Fb"), ans(400, BAD_CAPTURE)),
    row("%2f in :id", get(b"/todos/a%2fb"), ans(400, BAD_CAPTURE)),
    row("%2F in the second capture", get(b"/users/1/posts/a%2Fb"), ans(400, BAD_CAPTURE)),
    row("%zz", get(b"/todos/%zz"), ans(400, BAD_CAPTURE)),
    row("a cut escape", get(b"/todos/abc%4"), ans(400, BAD_CAPTURE)),
    row("a lone %", get(b"/todos/%"), ans(400, BAD_CAPTURE)),
    row(":id is ..", get(b"/todos/.."), ans(400, BAD_CAPTURE)),
    row(":id is .", get(b"/todos/."), ans(400, BAD_CAPTURE)),
    row(":id is %2e%2E", get(b"/todos/%2e%2E"), ans(400, BAD_CAPTURE)),
    row("*rest with ..", get(b"/files/a/../b"), ans(400, BAD_CAPTURE)),
    row("*rest with .", get(b"/files/./x"), ans(400, BAD_CAPTURE)),
    row("*rest ending in ..", get(b"/files/a/.."), ans(400, BAD_CAPTURE)),
    row("*rest with an encoded ..", get(b"/files/a%2F..%2Fb"), ans(400, BAD_CAPTURE)),
    # D110: a capture is relative: no '/' at its start, written or encoded; inner ones stay
    row("*rest that begins with '/'", get(b"/files//etc/passwd"), ans(400, BAD_CAPTURE)),
    row("*rest that begins with %2F", get(b"/files/%2Fetc%2Fpasswd"), ans(400, BAD_CAPTURE)),
    row("*rest that begins with %2F%2F", get(b"/files/%2F%2Froot"), ans(400, BAD_CAPTURE)),
    row("*rest that is %2f alone", get(b"/files/%2f"), ans(400, BAD_CAPTURE)),
    row("*rest that is '/' alone", get(b"/files//"), ans(400, BAD_CAPTURE)),
    row("*rest with %2F%2F inside", get(b"/files/a%2F%2Fb"), ans(200, text("files rest=a//b"))),
    row("a refused capture keeps the connection, and is not a 404", get(b"/todos/a%00") + get(b"/todos/1"),
        [ans(400, BAD_CAPTURE), ans(200, text("todo id=1"))]),
]

# T3: the first matching route in table order wins, whether exact or capture comes first.
ORDER = [
    row("capture before exact: the capture wins", get(b"/todos/export"),
        ans(200, text("todo id=export"))),
    row("... for the methods it takes; the exact route's others are its own",
        get(b"/todos/export", method=b"PUT"), ans(200, text("export"))),
    row("... and DELETE is the capture's", get(b"/todos/export", method=b"DELETE"),
        ans(200, text("deleted id=export"))),
    row("exact before capture: the exact wins", get(b"/files/export"), ans(200, text("files export"))),
    row("... and the capture takes the rest", get(b"/files/exports"), ans(200, text("files rest=exports"))),
    row("two patterns: the first", get(b"/a/c/b"), ans(200, text("a/:x/b x=c"))),
    row("two patterns: the second", get(b"/a/c/d"), ans(200, text("a/c/:y y=d"))),
    row("two patterns: the first alone", get(b"/a/z/b"), ans(200, text("a/:x/b x=z"))),
]

# T2: 405 with Allow, OPTIONS, HEAD from GET.
ALLOW = [
    row("405 with Allow", get(b"/health", method=b"POST"),
        ans(405, NOT_ALLOWED, Allow="GET, HEAD, OPTIONS", Content_Type=TEXT,
            Content_Length="23")),
    row("405 of an exact path of two methods", get(b"/todos", method=b"DELETE"),
        ans(405, NOT_ALLOWED, Allow="GET, HEAD, POST, OPTIONS")),
    row("405 of a capture's path", get(b"/todos/5", method=b"POST"),
        ans(405, NOT_ALLOWED, Allow="GET, HEAD, PATCH, DELETE, OPTIONS")),
    row("405 lists every route the path matches", get(b"/todos/export", method=b"POST"),
        ans(405, NOT_ALLOWED, Allow="GET, HEAD, PUT, PATCH, DELETE, OPTIONS")),
    row("HEAD is GET's", get(b"/todos/5", method=b"HEAD"),
        ans(200, b"", Content_Length=str(len("todo id=5\n")))),
    row("405 to a HEAD: the head alone", get(b"/upload", method=b"HEAD"),
        ans(405, b"", Allow="POST, PUT, OPTIONS", Content_Length="23")),
    row("OPTIONS: 204 with Allow", get(b"/todos/5", method=b"OPTIONS"),
        ans(204, b"", Allow="GET, HEAD, PATCH, DELETE, OPTIONS", Content_Type=None)),
    row("OPTIONS of a prefix route", get(b"/static/x", method=b"OPTIONS"),
        ans(204, b"", Allow="GET, HEAD, OPTIONS")),
    row("OPTIONS a route takes is the route's", get(b"/custom", method=b"OPTIONS"),
        ans(200, text("custom options"))),
    row("OPTIONS to a route of every method", get(b"/any", method=b"OPTIONS"),
        ans(200, b'{"any":"OPTIONS"}\n')),
    row("OPTIONS of no route", get(b"/nowhere", method=b"OPTIONS"), ans(404, NOT_FOUND)),
    row("OPTIONS *: every method the app has",
        b"OPTIONS * HTTP/1.1\r\nHost: test\r\n\r\n",
        ans(204, b"", Allow="GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")),
    row("the asterisk-form is OPTIONS's alone", b"GET * HTTP/1.1\r\nHost: test\r\n\r\n",
        ans(400, BAD)),
    row("CONNECT: 405 with the app's methods, then close",
        b"CONNECT test:443 HTTP/1.1\r\nHost: test:443\r\n\r\n",
        ans(405, NOT_ALLOWED, Allow="GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"), "close"),
    row("a 405 keeps the connection", get(b"/health", method=b"PUT") + get(b"/todos/3"),
        [ans(405, NOT_ALLOWED), ans(200, text("todo id=3"))]),
]

# Q6, H8: bounds and types, decided when the head is whole.
BODIES = [
    row("POST within the route's bound", body_req(b"POST", b"/upload", b"x" * 16),
        ans(200, b"x" * 16)),
    row("POST one past the route's bound: 413 before the body",
        b"POST /upload HTTP/1.1\r\nHost: test\r\nContent-Length: 17\r\n\r\n",
        ans(413, TOO_LARGE), "close"),
    row("chunked past the route's bound",
        b"POST /upload HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"10\r\n" + b"y" * 16 + b"\r\n1\r\nz\r\n0\r\n\r\n", ans(413, TOO_LARGE), "close"),
    row("chunked at the route's bound",
        b"POST /upload HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"10\r\n" + b"y" * 16 + b"\r\n0\r\n\r\n", ans(200, b"y" * 16)),
    row("another method of the path has no bound of its own", body_req(b"PUT", b"/upload", b"x" * 100),
        ans(200, b"x" * 100)),
    row("a JSON route takes JSON", body_req(b"POST", b"/todos", b'{"a":1}',
                                            b"Content-Type: application/json\r\n"),
        ans(200, b'{"a":1}')),
    row("... with parameters, in any case", body_req(b"POST", b"/todos", b"{}",
                                                     b"Content-Type: Application/JSON; charset=utf-8\r\n"),
        ans(200, b"{}")),
    row("... and a +json type", body_req(b"PATCH", b"/todos/5", b"{}",
                                         b"Content-Type: application/merge-patch+json\r\n"),
        ans(200, b"id=5 {}")),
    row("415 for text/plain", body_req(b"POST", b"/todos", b"hello", b"Content-Type: text/plain\r\n"),
        ans(415, UNSUPPORTED)),
    row("415 without a type", body_req(b"POST", b"/todos", b"hello"), ans(415, UNSUPPORTED)),
    row("415 for application/jsonx", body_req(b"POST", b"/todos", b"{}",
                                              b"Content-Type: application/jsonx\r\n"),
        ans(415, UNSUPPORTED)),
    row("415 for application/+json", body_req(b"POST", b"/todos", b"{}",
                                              b"Content-Type: application/+json\r\n"),
        ans(415, UNSUPPORTED)),
    row("a body to no route is read and dropped", body_req(b"POST", b"/nowhere", b"hello"),
        ans(404, NOT_FOUND)),
    row("a body to a path of other methods", body_req(b"POST", b"/health", b"hello"),
        ans(405, NOT_ALLOWED, Allow="GET, HEAD, OPTIONS")),
    row("a body to a refused capture", body_req(b"PATCH", b"/todos/a%00", b"{}",
                                                b"Content-Type: application/json\r\n"),
        ans(400, BAD_CAPTURE)),
    row("a body to no route announcing more than the bound: answered now",
        b"POST /nowhere HTTP/1.1\r\nHost: test\r\nContent-Length: 4194305\r\n\r\n",
        ans(404, NOT_FOUND), "close"),
    row("a route's bound past --max-body-bytes is the knob's",
        b"POST /big HTTP/1.1\r\nHost: test\r\nContent-Length: 4194305\r\n\r\n",
        ans(413, TOO_LARGE), "close"),
]

EXPECT = b"Expect: 100-continue\r\n"
EXPECTS = [
    row("100-continue to a route: asked for", body_req(b"POST", b"/upload", b"hello", EXPECT),
        [ans(100), ans(200, b"hello")]),
    row("100-continue to no route: 404, no 100, close",
        b"POST /nowhere HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n" + EXPECT + b"\r\n",
        ans(404, NOT_FOUND), "close"),
    row("100-continue to another method: 405 with Allow, no 100",
        b"POST /health HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n" + EXPECT + b"\r\n",
        ans(405, NOT_ALLOWED, Allow="GET, HEAD, OPTIONS"), "close"),
    row("100-continue past the route's bound: 413, no 100",
        b"POST /upload HTTP/1.1\r\nHost: test\r\nContent-Length: 17\r\n" + EXPECT + b"\r\n",
        ans(413, TOO_LARGE), "close"),
    row("100-continue of the wrong type: 415, no 100",
        b"POST /todos HTTP/1.1\r\nHost: test\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n"
        + EXPECT + b"\r\n", ans(415, UNSUPPORTED), "close"),
    row("100-continue to a refused capture: 400, no 100",
        b"PATCH /todos/%00 HTTP/1.1\r\nHost: test\r\nContent-Length: 2\r\n"
        b"Content-Type: application/json\r\n" + EXPECT + b"\r\n", ans(400, BAD_CAPTURE), "close"),
    row("100-continue, chunked, to no route",
        b"POST /nowhere HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n" + EXPECT + b"\r\n",
        ans(404, NOT_FOUND), "close"),
]


def test_T1_patterns_and_captures():
    run_rows(PATTERNS)


def test_T1_capture_decoding_and_refusals():
    run_rows(DECODING)


def test_T3_first_match_in_table_order():
    run_rows(ORDER)


def test_T2_405_allow_and_options():
    run_rows(ALLOW)


def test_T2_dispatch_runs_only_for_unmatched_paths():
    d = lambda p, m="GET": b'{"dispatch":"' + m.encode() + b" " + p + b'"}\n'  # noqa: E731
    run_rows([
        row("no route: dispatch", get(b"/nowhere"), ans(200, d(b"/nowhere"))),
        row("another method: 405, not dispatch", get(b"/health", method=b"POST"),
            ans(405, NOT_ALLOWED, Allow="GET, HEAD, OPTIONS")),
        row("OPTIONS of a route's path: the host's", get(b"/todos/1", method=b"OPTIONS"),
            ans(204, b"", Allow="GET, HEAD, PATCH, DELETE, OPTIONS")),
        row("OPTIONS of no route: dispatch", get(b"/nowhere", method=b"OPTIONS"),
            ans(200, d(b"/nowhere", "OPTIONS"))),
        row("a refused capture is not dispatch's", get(b"/todos/a%00"), ans(400, BAD_CAPTURE)),
        row("a path no capture takes is", get(b"/todos/"), ans(200, d(b"/todos/"))),
        row("a body to dispatch is asked for",
            body_req(b"POST", b"/nowhere", b"abc", EXPECT),
            [ans(100), ans(200, d(b"/nowhere", "POST"))]),
        row("OPTIONS *: dispatch takes any method", b"OPTIONS * HTTP/1.1\r\nHost: test\r\n\r\n",
            ans(204, b"", Allow="GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")),
    ], env={"M0_ROUTESCHECK_DISPATCH": "1"})


def test_T2_options_star_lists_the_routes_methods():
    """host_check's routes are GET and POST: OPTIONS * says those."""
    with Server("host_check") as s:
        s.wait_ready()
        c = s.connect()
        c.send(b"OPTIONS * HTTP/1.1\r\nHost: test\r\n\r\n")
        r = c.read_response()
        eq((r.status, r.header("Allow"), r.header("Content-Length")),
           (204, "GET, HEAD, POST, OPTIONS", None), "OPTIONS *")
        eq(c.get("/health").body, b"ok\n", "the connection after it")


def test_Q6_per_route_body_bounds_and_types():
    run_rows(BODIES)


def test_H8_expect_answered_after_routing():
    run_rows(EXPECTS)


def test_H8_expect_body_sent_anyway_after_a_refusal():
    """A client that sends the body after a final answer to its 100-continue: the answer came
    first, with Connection: close, and nothing of the body is answered."""
    with Server("routes_check") as s:
        s.wait_ready()
        c = s.connect()
        c.send(b"POST /nowhere HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n" + EXPECT + b"\r\n")
        r = c.read_response()
        eq((r.status, r.header("Connection")), (404, "close"), "the final answer, no 100")
        try:
            c.send(b"hello" + FOLLOW)
        except (BrokenPipeError, ConnectionResetError):
            pass
        c.expect_eof(5)


def test_Q6_route_bound_within_a_smaller_knob():
    """--max-body-bytes 1000: /big's 1 GiB is 1000, and the doctor says so."""
    run_rows([
        row("at the knob", body_req(b"POST", b"/big", b"b" * 1000), ans(200, b"b" * 1000)),
        row("past the knob", b"POST /big HTTP/1.1\r\nHost: test\r\nContent-Length: 1001\r\n\r\n",
            ans(413, TOO_LARGE), "close"),
        row("a route's own bound below it", body_req(b"POST", b"/upload", b"u" * 17),
            ans(413, TOO_LARGE), "close"),
        row("a dropped body past the knob: the route's answer, then close",
            b"POST /nowhere HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3e9\r\n" + b"c" * 1001 + b"\r\n0\r\n\r\n", ans(413, TOO_LARGE), "close"),
    ], args=["--max-body-bytes", "1000"])
    rc, out, _ = run_app("routes_check", ["--doctor", "--max-body-bytes", "1000", "--port", "0"])
    eq(rc, 0, "the doctor's exit")
    table = json.loads(out.rstrip("\n").split("\n")[-1])["routes"]["table"]
    big = [t for t in table if t["path"] == "/big"][0]
    eq((big["max_body_bytes"], table[11]["max_body_bytes"]), (1000, 16), "the doctor's bounds")


def test_T1_captures_on_the_pool():
    with Server("routes_check", args=["--blocking-threads", "1"]) as s:
        s.wait_ready()
        c = s.connect()
        r = c.get("/pool/a%20b")
        eq((r.status, r.body, r.header("x-thread")), (200, b"todo id=a b\n", "0"), "on the pool")
        r = c.get("/pool/%00")
        eq((r.status, r.body), (400, BAD_CAPTURE), "a refused capture never reaches the pool")
        r = c.get("/pool/z")
        eq((r.status, r.body, r.header("x-thread")), (200, b"todo id=z\n", "0"), "after it")


# ---- Q5: CORS ----

APP = "https://app.example"
DEV = "http://localhost:5173"


def origin(o):
    return b"Origin: " + o.encode("latin-1") + b"\r\n"


def preflight(path, o, method=b"PATCH", req_headers=None):
    h = origin(o) + b"Access-Control-Request-Method: " + method + b"\r\n"
    if req_headers is not None:
        h += b"Access-Control-Request-Headers: " + req_headers + b"\r\n"
    return get(path, h, b"OPTIONS")


NO_CORS = dict(Access_Control_Allow_Origin=None, Access_Control_Allow_Credentials=None,
               Access_Control_Allow_Methods=None, Access_Control_Allow_Headers=None,
               Access_Control_Max_Age=None)
PF_VARY = "Origin, Access-Control-Request-Headers"

CORS_LIST = [
    row("an allowed origin", get(b"/health", origin(APP)),
        ans(200, b"ok\n", Access_Control_Allow_Origin=APP, Vary="Origin",
            Access_Control_Allow_Credentials=None)),
    row("the other allowed origin", get(b"/todos/1", origin(DEV)),
        ans(200, text("todo id=1"), Access_Control_Allow_Origin=DEV, Vary="Origin")),
    row("another origin", get(b"/health", origin("https://evil.example")),
        ans(200, b"ok\n", Vary="Origin", **NO_CORS)),
    row("no origin", get(b"/health"), ans(200, b"ok\n", Vary="Origin", **NO_CORS)),
    row("the null origin", get(b"/health", origin("null")), ans(200, b"ok\n", **NO_CORS)),
    row("a longer host", get(b"/health", origin(APP + ".evil.example")),
        ans(200, b"ok\n", **NO_CORS)),
    row("a prefix of it", get(b"/health", origin(APP[:-1])), ans(200, b"ok\n", **NO_CORS)),
    row("upper case", get(b"/health", origin("https://APP.example")), ans(200, b"ok\n", **NO_CORS)),
    row("with a path", get(b"/health", origin(APP + "/")), ans(200, b"ok\n", **NO_CORS)),
    row("a list", get(b"/health", origin(APP + ", https://evil.example")),
        ans(200, b"ok\n", **NO_CORS)),
    row("escaped CR LF stay bytes", get(b"/health", origin(APP + "%0d%0aX-Evil: 1")),
        ans(200, b"ok\n", X_Evil=None, **NO_CORS)),
    row("a CR inside the value is no header", b"GET /health HTTP/1.1\r\nHost: test\r\n"
        b"Origin: " + APP.encode() + b"\rX-Evil: 1\r\n\r\n", ans(400, BAD, X_Evil=None), "close"),
    row("OWS around it is not part of it", get(b"/health", b"Origin:  " + APP.encode() + b" \r\n"),
        ans(200, b"ok\n", Access_Control_Allow_Origin=APP)),
    row("the first Origin field counts", get(b"/health", origin("https://evil.example") + origin(APP)),
        ans(200, b"ok\n", **NO_CORS)),
    row("host answers carry it", get(b"/nowhere", origin(APP)),
        ans(404, NOT_FOUND, Access_Control_Allow_Origin=APP, Vary="Origin")),
    row("a 405 carries it", get(b"/health", origin(APP), b"DELETE"),
        ans(405, NOT_ALLOWED, Access_Control_Allow_Origin=APP, Allow="GET, HEAD, OPTIONS")),
    row("preflight",
        preflight(b"/todos/5", APP, req_headers=b"Content-Type, X-Request-Id"),
        ans(204, b"", Access_Control_Allow_Origin=APP,
            Access_Control_Allow_Methods="GET, HEAD, PATCH, DELETE, OPTIONS",
            Access_Control_Allow_Headers="content-type, x-request-id",
            Access_Control_Max_Age="600", Vary=PF_VARY,
            Allow="GET, HEAD, PATCH, DELETE, OPTIONS", Access_Control_Allow_Credentials=None,
            Content_Type=None)),
    row("preflight without Request-Headers", preflight(b"/todos", APP, b"POST"),
        ans(204, b"", Access_Control_Allow_Origin=APP,
            Access_Control_Allow_Methods="GET, HEAD, POST, OPTIONS",
            Access_Control_Allow_Headers=None)),
    row("preflight for a method the path lacks: the browser reads the list",
        preflight(b"/health", APP, b"DELETE"),
        ans(204, b"", Access_Control_Allow_Origin=APP,
            Access_Control_Allow_Methods="GET, HEAD, OPTIONS")),
    row("preflight with headers that are no tokens: none allowed",
        preflight(b"/todos/5", APP, req_headers=b"x-a, x b"),
        ans(204, b"", Access_Control_Allow_Origin=APP, Access_Control_Allow_Headers=None)),
    row("preflight with an empty element", preflight(b"/todos/5", APP, req_headers=b"x-a,,x-b"),
        ans(204, b"", Access_Control_Allow_Headers=None)),
    row("preflight from another origin", preflight(b"/todos/5", "https://evil.example"),
        ans(204, b"", Vary=PF_VARY, Allow="GET, HEAD, PATCH, DELETE, OPTIONS", **NO_CORS)),
    row("preflight from null", preflight(b"/todos/5", "null"), ans(204, b"", **NO_CORS)),
    row("preflight to no route", preflight(b"/nowhere", APP),
        ans(404, NOT_FOUND, Access_Control_Allow_Origin=APP, Access_Control_Allow_Methods=None)),
    row("preflight to a path with an OPTIONS route: still the host's", preflight(b"/custom", APP, b"GET"),
        ans(204, b"", Access_Control_Allow_Methods="GET, HEAD, OPTIONS")),
    row("a plain OPTIONS there is the route's", get(b"/custom", origin(APP), b"OPTIONS"),
        ans(200, text("custom options"), Access_Control_Allow_Origin=APP)),
    row("a body to a CORS route", body_req(b"POST", b"/upload", b"abc", origin(APP)),
        ans(200, b"abc", Access_Control_Allow_Origin=APP)),
    row("a 413 before the body", b"POST /upload HTTP/1.1\r\nHost: test\r\nContent-Length: 99\r\n"
        + origin(APP) + EXPECT + b"\r\n",
        ans(413, TOO_LARGE, Access_Control_Allow_Origin=APP, Vary="Origin"), "close"),
    row("a 405 before the body", b"POST /health HTTP/1.1\r\nHost: test\r\nContent-Length: 9\r\n"
        + origin(APP) + EXPECT + b"\r\n",
        ans(405, NOT_ALLOWED, Access_Control_Allow_Origin=APP, Vary="Origin"), "close"),
]


def test_Q5_cors_listed_origins():
    run_rows(CORS_LIST, env={"M0_ROUTESCHECK_CORS": f"{APP},{DEV}"})


# Q5, D100: the host's refusals made before routing carry the same lines for an Origin field
# read whole before the refusal, and none for one it never read.
HEAD_LIMIT = 2048
PAD = b"X-Pad: " + b"p" * (HEAD_LIMIT + 100) + b"\r\n"
TOO_BIG = host_answer(431, "Request Header Fields Too Large")
CHUNKED = b"Transfer-Encoding: chunked\r\n"
ALLOWED = dict(Access_Control_Allow_Origin=APP, Vary="Origin",
               Access_Control_Expose_Headers="Location, ETag")
OTHER = dict(Access_Control_Allow_Origin=None, Vary="Origin", Access_Control_Expose_Headers=None)
EVIL = "https://evil.example"


def chunked(path, headers, body):
    return b"POST " + path + b" HTTP/1.1\r\nHost: test\r\n" + headers + CHUNKED + b"\r\n" + body


CORS_REFUSALS = [
    row("a 431 after Origin", get(b"/health", origin(APP) + PAD), ans(431, TOO_BIG, **ALLOWED),
        "close"),
    row("a 431 after another origin", get(b"/health", origin(EVIL) + PAD),
        ans(431, TOO_BIG, **OTHER), "close"),
    row("a 431 before Origin: never read", get(b"/health", PAD + origin(APP)),
        ans(431, TOO_BIG, **OTHER), "close"),
    row("a 431 to a HEAD after Origin", get(b"/health", origin(APP) + PAD, b"HEAD"),
        ans(431, b"", Content_Length=str(len(TOO_BIG)), **ALLOWED), "close"),
    row("a 431 to a head with a body, after Origin",
        b"POST /upload HTTP/1.1\r\nHost: test\r\n" + origin(APP) + PAD
        + b"Content-Length: 3\r\n\r\nabc", ans(431, TOO_BIG, **ALLOWED), "close"),
    row("the walk's 400 after Origin", get(b"/health", origin(APP) + b"X-A: a\x01b\r\n"),
        ans(400, BAD, **ALLOWED), "close"),
    row("the parser's 400 after Origin", get(b"/health", origin(APP) + b"X-A : a\r\n"),
        ans(400, BAD, **ALLOWED), "close"),
    row("the parser's 400 after another origin", get(b"/health", origin(EVIL) + b"X-A : a\r\n"),
        ans(400, BAD, **OTHER), "close"),
    row("a chunk size that is no number", chunked(b"/upload", origin(APP), b"zz\r\n"),
        ans(400, BAD, **ALLOWED), "close"),
    row("... from another origin", chunked(b"/upload", origin(EVIL), b"zz\r\n"),
        ans(400, BAD, **OTHER), "close"),
    row("a chunked body past the route's bound",
        chunked(b"/upload", origin(APP), b"11\r\n" + b"a" * 17 + b"\r\n0\r\n\r\n"),
        ans(413, TOO_LARGE, **ALLOWED), "close"),
    row("... from another origin",
        chunked(b"/upload", origin(EVIL), b"11\r\n" + b"a" * 17 + b"\r\n0\r\n\r\n"),
        ans(413, TOO_LARGE, **OTHER), "close"),
    row("a chunked body not ending in CRLF CRLF",
        chunked(b"/upload", origin(APP), b"3\r\nabc\r\n0\r\n\n"), ans(400, BAD, **ALLOWED),
        "close"),
    row("an Expect the host does not know",
        body_req(b"POST", b"/upload", b"abc", origin(APP) + b"Expect: bogus\r\n"),
        ans(417, host_answer(417, "Expectation Failed"), **ALLOWED), "close"),
    row("CONNECT", b"CONNECT a:1 HTTP/1.1\r\nHost: a:1\r\n" + origin(APP) + b"\r\n",
        ans(405, NOT_ALLOWED, Allow="GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS", **ALLOWED),
        "close"),
]


def test_Q5_cors_on_the_host_refusals():
    run_rows(CORS_REFUSALS, args=["--max-head-bytes", str(HEAD_LIMIT)],
             env={"M0_ROUTESCHECK_CORS": f"{APP},{DEV}",
                  "M0_ROUTESCHECK_CORS_EXPOSE": "Location, ETag"})


def _refused_when_stalled(s, raw):
    """Send `raw` and stall: the refusal's status and CORS fields, the close after it."""
    c = s.connect(timeout=5)
    c.send(raw)
    r = c.read_response(timeout=5)
    c.expect_eof()
    c.close()
    return (r.status, r.header("Access-Control-Allow-Origin"), r.header("Vary"))


def test_Q5_cors_on_a_head_that_stops_coming():
    """A 408 carries the lines for an Origin line that arrived whole; one cut inside its value
    is no origin, even when what came is an allowed one (it may go on as APP + ".evil...")."""
    head = b"GET /health HTTP/1.1\r\nHost: test\r\n"
    with Server("routes_check", args=["--header-timeout-ms", "300"],
                env={"M0_ROUTESCHECK_CORS": APP}) as s:
        s.wait_ready()
        eq(_refused_when_stalled(s, head + origin(APP)), (408, APP, "Origin"), "a whole line")
        eq(_refused_when_stalled(s, head + origin(APP)[:-2]), (408, None, "Origin"),
           "a line cut before its CR LF")
        eq(_refused_when_stalled(s, head + origin(APP)[:-1]), (408, None, "Origin"),
           "a line cut between its CR and LF")
        eq(_refused_when_stalled(s, head), (408, None, "Origin"), "no Origin yet")
        eq(_refused_when_stalled(s, b"GET /hea"), (408, None, "Origin"), "no field yet")
        # refused at its first byte: nothing of a request was read, nothing varies
        eq(_refused_when_stalled(s, b"\x01GET / HTTP/1.1\r\n\r\n"), (400, None, None),
           "no request")


def test_Q5_cors_credentials_expose_and_max_age():
    run_rows([
        row("credentials on an answer", get(b"/health", origin(APP)),
            ans(200, b"ok\n", Access_Control_Allow_Origin=APP,
                Access_Control_Allow_Credentials="true",
                Access_Control_Expose_Headers="Location, ETag", Vary="Origin")),
        row("... not to another origin", get(b"/health", origin("https://evil.example")),
            ans(200, b"ok\n", Access_Control_Expose_Headers=None, **NO_CORS)),
        row("credentials on a preflight", preflight(b"/todos/1", APP),
            ans(204, b"", Access_Control_Allow_Origin=APP,
                Access_Control_Allow_Credentials="true", Access_Control_Max_Age="86400",
                Access_Control_Expose_Headers=None)),
    ], env={"M0_ROUTESCHECK_CORS": APP, "M0_ROUTESCHECK_CORS_CREDENTIALS": "1",
            "M0_ROUTESCHECK_CORS_MAX_AGE": "86400",
            "M0_ROUTESCHECK_CORS_EXPOSE": "Location, ETag"})


def test_Q5_cors_any_origin():
    star = dict(Access_Control_Allow_Origin="*", Access_Control_Allow_Credentials=None)
    run_rows([
        row("any origin", get(b"/health", origin("https://evil.example")),
            ans(200, b"ok\n", Vary=None, **star)),
        row("no origin: the same answer", get(b"/health"), ans(200, b"ok\n", Vary=None, **star)),
        row("null", get(b"/health", origin("null")), ans(200, b"ok\n", **star)),
        row("preflight", preflight(b"/todos/1", "https://any.example", req_headers=b"X-A"),
            ans(204, b"", Access_Control_Allow_Headers="x-a", Vary=PF_VARY,
                Access_Control_Allow_Methods="GET, HEAD, PATCH, DELETE, OPTIONS", **star)),
        row("a 404", get(b"/nowhere"), ans(404, NOT_FOUND, **star)),
    ], env={"M0_ROUTESCHECK_CORS": "*"})


def test_Q5_cors_on_streams_and_the_pool():
    env = {"M0_ROUTESCHECK_CORS": APP}
    with Server("routes_check", env=env, args=["--blocking-threads", "1"]) as s:
        s.wait_ready()
        c = s.connect()
        c.send(get(b"/events", origin(APP)))
        r = c.read_head()
        eq((r.status, r.header("Content-Type"), r.header("Access-Control-Allow-Origin"),
            r.header("Vary")), (200, "text/event-stream", APP, "Origin"), "the stream's head")
        c2 = s.connect()
        c2.send(get(b"/pool/7", origin(APP)))
        r = c2.read_response()
        eq((r.status, r.header("x-thread"), r.header("Access-Control-Allow-Origin"),
            r.header("Vary")), (200, "0", APP, "Origin"), "a pool route's answer")


# ---- H7: HTTP/1.0 keep-alive ----


def _date_free(raw):
    return re.sub(rb"Date: [^\r]*\r\n", b"Date: X\r\n", raw)


def test_H7_http10_keep_alive_exact_bytes():
    with Server("host_check") as s:
        s.wait_ready()
        c = s.connect()
        want = (b"HTTP/1.1 200 OK\r\nServer: m0\r\nDate: X\r\nContent-Length: 3\r\n"
                b"Connection: keep-alive\r\nKeep-Alive: timeout=60\r\nx-worker: 0\r\nx-thread: -1\r\n"
                b"Content-Type: text/plain; charset=utf-8\r\n\r\nok\n")
        for i in range(3):
            c.send(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            r = c.read_response(timeout=5)
            eq(_date_free(r.raw_head + r.body), want, f"answer {i}")
        # a host answer says it too, and keeps the connection
        c.send(b"GET /nowhere HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
        r = c.read_response()
        eq((r.status, r.header("Connection")), (404, "keep-alive"), "a 404 to HTTP/1.0")
        # without keep-alive, HTTP/1.0 closes as before
        c.send(b"GET /health HTTP/1.0\r\n\r\n")
        r = c.read_response()
        eq((r.status, r.header("Connection")), (200, "close"), "HTTP/1.0 without keep-alive")
        c.expect_eof()


def test_H7_http10_keep_alive_cap_and_pool():
    with Server("host_check", args=["--max-keepalive-requests", "2", "--blocking-threads", "1"]) as s:
        s.wait_ready()
        c = s.connect()
        c.send(b"GET /slow?ms=0 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        r = c.read_response()
        eq((r.status, r.header("Connection"), r.header("x-thread")), (200, "keep-alive", "0"),
           "a pool answer to HTTP/1.0")
        c.send(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        r = c.read_response()
        eq((r.status, r.header("Connection")), (200, "close"), "the cap's last answer")
        c.expect_eof()


def ab_keep_alive(app_args, n):
    """`ab -k -c 16 -n N` against host_check's /health: its counts by name."""
    ab = tool("ab", "apache2-utils")
    with Server("host_check", args=app_args) as s:
        s.wait_ready()
        out = subprocess.run([ab, "-q", "-k", "-c", "16", "-n", str(n), "-s", "20",
                              f"http://127.0.0.1:{s.port}/health"],
                             capture_output=True, text=True, timeout=120)
        check(out.returncode == 0, f"ab exited {out.returncode}: {out.stderr[-500:]}")
        return dict(re.findall(r"^([A-Za-z -]+):\s+(\S+)", out.stdout, re.M))


def test_H7_ab_keep_alive_completes():
    """ab -k speaks HTTP/1.0 with Connection: Keep-Alive; it waits for a close unless the
    answer says keep-alive. 100,000 requests over 16 connections, none failed."""
    fields = ab_keep_alive(["--max-keepalive-requests", "0"], 100000)
    eq((fields.get("Complete requests"), fields.get("Failed requests"),
        fields.get("Keep-Alive requests")), ("100000", "0", "100000"), "ab's counts")


test_H7_ab_keep_alive_completes.timeout = 180
test_H7_ab_keep_alive_completes.once = True  # a load tool: the plain variant only (run.py, D235)


def test_H7_ab_keep_alive_with_the_default_cap():
    """With the default cap each connection closes after its 1000th answer (which says close);
    ab reconnects and none fails."""
    fields = ab_keep_alive([], 20000)
    eq((fields.get("Complete requests"), fields.get("Failed requests")), ("20000", "0"),
       "ab's counts")
    check(int(fields.get("Keep-Alive requests", "0")) >= 20000 - 20 * 16,
          f"keep-alive requests: {fields.get('Keep-Alive requests')}")


test_H7_ab_keep_alive_with_the_default_cap.timeout = 120


def test_table_size():
    rows = PATTERNS + DECODING + ORDER + ALLOW + BODIES + EXPECTS + CORS_LIST
    names = [r["name"] for r in rows]
    eq(len(names), len(set(names)), "row names are unique")
    check(len(rows) >= 100, f"{len(rows)} rows")



def test_M7_ramp_extra_routes():
    """M0_RAMP_EXTRA_ROUTES=197 puts 197 routes before ramp's own four (bench M7's routes-200
    arm): /x/now still answers, an extra route of each shape answers its path, the doctor lists
    201 routes; a value that is no number, or past 10000, is refused 78 naming the variable."""
    rc, out, _ = run_app("ramp", ["--doctor"], env={"M0_RAMP_EXTRA_ROUTES": "197"})
    eq(rc, 0, "the doctor's exit with 197 extra routes")
    doc = json.loads(out.strip().splitlines()[-1])
    eq(len(doc["routes"]["table"]), 201, "routes in the compiled table")
    eq(doc["routes"]["table"][197]["path"], "/x/", "ramp's own come after the extra ones")
    with Server("ramp", env={"M0_RAMP_EXTRA_ROUTES": "197"}) as s:
        s.wait_ready()
        c = s.connect(timeout=5)
        r = c.get("/x/now")
        eq((r.status, r.body[:7]), (200, b'{"now":'), "/x/now behind 197 routes")
        for path, status in (("/api/v1/r3", 200), ("/api/v1/r3/7", 200), ("/x/e2", 200),
                             ("/files/r1/a/b", 200), ("/api/v1/r40", 404), ("/x/nothing", 404)):
            r = c.get(path)
            eq(r.status, status, f"GET {path}")
            if status == 200:
                eq(r.body, path.encode(), f"GET {path}'s body")
        c.close()
    for bad in ("x", "-1", "10001"):
        rc, _, err = run_app("ramp", env={"M0_RAMP_EXTRA_ROUTES": bad})
        eq(rc, 78, f"M0_RAMP_EXTRA_ROUTES={bad}")
        check("M0_RAMP_EXTRA_ROUTES" in err, f"the refusal names the variable: {err[-200:]}")
