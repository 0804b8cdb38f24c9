# SPDX-License-Identifier: MIT
"""The host's own answers in the app's language (SPEC Q4): every status the host makes by itself,
built in as text/plain, as RFC 9457 problem+json under M0_APP_ERRORS_JSON, and through the app's
`error` callback; a callback that fails or changes the status gets the built-in answer and a log
line; the framing stays the host's (Connection: close where the connection closes, the
connection kept where it goes on); a handler's -errno is a 500 logged with its route."""

import json
import time

from m0test import Server, check, eq

REASONS = {400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
           409: "Conflict", 413: "Content Too Large", 414: "URI Too Long",
           415: "Unsupported Media Type", 417: "Expectation Failed",
           431: "Request Header Fields Too Large", 500: "Internal Server Error"}
# The detail of each status when its caller has none of its own (error.c).
DETAILS = {400: "the request is not valid HTTP/1.1", 404: "no route matches this path",
           405: "this path does not take this method", 408: "the request did not arrive in time",
           413: "the request's body is larger than this server takes",
           414: "the request's target is longer than this server takes",
           417: "only Expect: 100-continue is understood",
           431: "the request's head is larger than this server takes",
           500: "the server could not answer this request"}
ARGS = ["--header-timeout-ms", "400", "--max-body-bytes", "300000", "--max-uri-bytes", "256",
        "--max-header-fields", "20", "--blocking-threads", "1"]
NOT_JSON = "the body must be application/json or a +json type"
CAPTURE = ('a capture of the path is not valid: a malformed escape, %00, %2F in one segment, a '
           '"." or ".." segment, or a "/" at its start')
DEEP = "the body nests JSON deeper than 64 levels (M0_JSON_MAX_DEPTH)"
DEEP_BODY = b"[" * 100000 + b"]" * 100000


def _post(path, ct, body):
    return (b"POST %s HTTP/1.1\r\nHost: t\r\n%sContent-Length: %d\r\n\r\n"
            % (path, b"Content-Type: %s\r\n" % ct if ct else b"", len(body)) + body)


# name, request bytes, status, the caller's own detail (None: the status's), the path the
# callback is given (None: no request), whether the connection closes after the answer, and
# optionally the host's own fields the answer must carry whatever its style.
CASES = [
    ("malformed head", b"GET /health HTTP/1.1\r\nHost: t\r\nX-A: a\x01b\r\n\r\n", 400, None,
     None, True),
    ("no such path", b"GET /nope HTTP/1.1\r\nHost: t\r\n\r\n", 404, None, "/nope", False),
    ("a method the path does not take", b"POST /health HTTP/1.1\r\nHost: t\r\n\r\n", 405, None,
     "/health", False, {"Allow": "GET, HEAD, OPTIONS"}),
    ("CONNECT", b"CONNECT a:1 HTTP/1.1\r\nHost: a:1\r\n\r\n", 405, None, None, True,
     {"Allow": "GET, HEAD, POST, OPTIONS"}),
    ("a head that stops coming", b"GET /health HTTP/1.1\r\nHost: t\r\n", 408, None, None, True),
    ("a stream on a pool thread", b"GET /events-from-func HTTP/1.1\r\nHost: t\r\n\r\n", 409,
     "streams are served on the loop", "/events-from-func", False),
    ("a body past --max-body-bytes",
     b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 300001\r\n\r\n", 413, None, None, True),
    ("a target past --max-uri-bytes", b"GET /" + b"a" * 400 + b" HTTP/1.1\r\nHost: t\r\n\r\n",
     414, None, None, True),
    ("JSON of another media type", _post(b"/q/json", b"text/plain", b"{}"), 415, NOT_JSON,
     "/q/json", False),
    ("JSON without a Content-Type", _post(b"/q/json", None, b"{}"), 415, NOT_JSON, "/q/json",
     False),
    ("JSON that does not parse", _post(b"/q/json", b"application/json", b'{"a":\n x}'), 400,
     "the body is not valid JSON: invalid token at line 2, column 2", "/q/json", False),
    ("JSON nested 100,000 deep, on the pool",
     _post(b"/q/json-pool", b"application/json", DEEP_BODY), 400, DEEP, "/q/json-pool", False),
    ("an Expect the host does not know",
     b"POST /echo HTTP/1.1\r\nHost: t\r\nExpect: bogus\r\nContent-Length: 3\r\n\r\nabc", 417,
     None, None, True),
    ("past --max-header-fields",
     b"GET /health HTTP/1.1\r\nHost: t\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(25))
     + b"\r\n", 431, None, None, True),
    ("a handler that fails", b"GET /q/fail HTTP/1.1\r\nHost: t\r\n\r\n", 500, None, "/q/fail",
     False),
    # routing's (T1, Q6): a capture with %2F in one segment, a body of another type than the
    # route's, the same held back for 100-continue (refused on the head alone), a body past the
    # route's own bound
    ("a bad capture", b"GET /q/item/a%2Fb HTTP/1.1\r\nHost: t\r\n\r\n", 400, CAPTURE,
     "/q/item/a%2Fb", False),
    # D110: a *rest capture that would begin with '/', as the client wrote it or encoded it
    ("a rest capture that begins with '/'", b"GET /q/file//etc/passwd HTTP/1.1\r\nHost: t\r\n\r\n",
     400, CAPTURE, "/q/file//etc/passwd", False),
    ("the same, encoded", b"GET /q/file/%2Fetc%2Fpasswd HTTP/1.1\r\nHost: t\r\n\r\n", 400,
     CAPTURE, "/q/file/%2Fetc%2Fpasswd", False),
    ("a body of another type than its route's", _post(b"/q/typed", b"text/plain", b"{}"), 415,
     NOT_JSON, "/q/typed", False),
    ("the same, held back for 100-continue",
     b"POST /q/typed HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\n"
     b"Expect: 100-continue\r\nContent-Length: 2\r\n\r\n", 415, NOT_JSON, None, True),
    ("a body past its route's bound", _post(b"/q/small", b"text/plain", b"123456789"), 413, None,
     None, True),
]


def _expected(style, status, detail, path):
    """(Content-Type, the body as it must read) of one answer in `style`."""
    if style == "text":
        tail = f": {detail}" if detail else ""
        return "text/plain; charset=utf-8", f"{status} {REASONS[status]}{tail}\n".encode()
    if style == "json":
        return "application/problem+json", {"type": "about:blank", "title": REASONS[status],
                                            "status": status, "detail": detail or DETAILS[status]}
    return "application/json", {"host_check": status, "detail": detail or DETAILS[status],
                                "path": path}


def _check_case(s, style, case):
    name, raw, status, detail, path, closes, *fields = case
    c = s.connect()
    c.send(raw)
    r = c.read_response(timeout=10)
    eq(r.status, status, "status")
    for k, v in (fields[0] if fields else {}).items():
        eq(r.header(k), v, k)
    ct, want = _expected(style, status, detail, path)
    eq(r.header("Content-Type"), ct, "Content-Type")
    if isinstance(want, bytes):
        eq(r.body, want, "body")
    else:
        eq(json.loads(r.body), want, "body as JSON")
    eq(r.header("Content-Length"), str(len(r.body)), "Content-Length")
    if closes:
        eq(r.header("Connection"), "close", "Connection")
        c.expect_eof()
    else:
        eq(r.header("Connection"), None, "Connection")
        eq(c.get("/health").status, 200, "the next request on the connection")
    c.close()


def _run_style(style, env=None):
    failures = []
    e = {"M0_HOSTCHECK_ERRORS": style} if style != "text" else {}
    e.update(env or {})
    with Server("host_check", args=ARGS, env=e) as s:
        s.wait_ready()
        for case in CASES:
            try:
                _check_case(s, "text" if style.startswith("callback-") else style, case)
            except AssertionError as ex:
                failures.append(f"{case[0]}: {str(ex).splitlines()[0]}")
        # The log is whole once the process has ended and its stderr been read to the end: a
        # line written for the last case can still be on its way while the server runs.
        eq(s.stop(), 0, f"{style}: exit status")
        log = s.log_text()
    if failures:
        raise AssertionError(f"{style}: {len(failures)} of {len(CASES)} answers:\n"
                             + "\n".join(failures))
    return log


def test_Q4_builtin_text():
    _run_style("text")


def test_Q4_builtin_problem_json():
    _run_style("json")


def test_Q4_app_error_callback():
    _run_style("callback")


# The host's answers a HEAD can get, as GETs (RFC 9110 9.3.2): name, the GET's bytes, whether
# the connection closes after it.
HEAD_CASES = [(c[0], c[1], c[5]) for c in CASES if c[1].startswith(b"GET ")] + [
    ("a declared body past --max-body-bytes",
     b"GET /health HTTP/1.1\r\nHost: t\r\nContent-Length: 300001\r\n\r\n", True),
    ("an Expect the host does not know, to a GET route",
     b"GET /health HTTP/1.1\r\nHost: t\r\nExpect: bogus\r\nContent-Length: 3\r\n\r\nabc",
     True),
]


def test_Q4_head_gets_the_head_alone_in_every_style():
    """A HEAD the host refuses gets the head its GET gets, in every style: the status, the
    Content-Type and the Content-Length of the body the app's callback or problem+json made,
    and not one byte of that body: the connection closes with no byte after the head, or goes
    on to its next request."""
    failures = []
    for style in ("text", "json", "callback"):
        e = {"M0_HOSTCHECK_ERRORS": style} if style != "text" else {}
        with Server("host_check", args=ARGS, env=e) as s:
            s.wait_ready()
            for name, raw, closes in HEAD_CASES:
                try:
                    c = s.connect()
                    c.send(raw)
                    g = c.read_response(timeout=10)
                    c.close()
                    check(len(g.body) > 0, f"the GET's answer has a body: {g!r}")
                    c = s.connect()
                    c.send(b"HEAD" + raw[3:])
                    h = c.read_head(timeout=10)
                    eq([(h.status, h.header(k)) for k in ("Content-Type", "Content-Length",
                                                          "Connection")],
                       [(g.status, g.header(k)) for k in ("Content-Type", "Content-Length",
                                                          "Connection")], "the HEAD's head")
                    if closes:
                        c.expect_eof()
                    else:
                        r = c.get("/health")
                        eq((r.status, r.body), (200, b"ok\n"), "the next request")
                    c.close()
                except AssertionError as ex:
                    failures.append(f"{style}: {name}: {str(ex).splitlines()[0]}")
    if failures:
        raise AssertionError(f"{len(failures)} answers:\n" + "\n".join(failures))


def test_Q4_options_is_no_error():
    """T2: the 204 to OPTIONS and to OPTIONS * is the host's, in every style alike: Allow, no body,
    no type, the callback not asked, the connection kept."""
    for style in ("json", "callback"):
        with Server("host_check", env={"M0_HOSTCHECK_ERRORS": style}) as s:
            s.wait_ready()
            c = s.connect()
            for target, allow in ((b"/health", "GET, HEAD, OPTIONS"),
                                  (b"*", "GET, HEAD, POST, OPTIONS")):
                c.send(b"OPTIONS %s HTTP/1.1\r\nHost: t\r\n\r\n" % target)
                r = c.read_response(timeout=10)
                eq((r.status, r.header("Allow"), r.header("Content-Type"), r.body),
                   (204, allow, None, b""), f"{style}: OPTIONS {target.decode()}")
            eq(c.get("/health").status, 200, f"{style}: the next request")
            c.close()


def test_Q4_failing_callback_gets_the_builtin_answer():
    """A callback returning -EIO, or one setting another status, breaks its contract: the
    built-in text goes out, whole and with the host's framing, and the log counts it at the
    1st, 2nd, 4th, 8th, 16th time."""
    for style, why in (("callback-fails", "it returned Input/output error"),
                       ("callback-status", "it set the status 200, which is the host's")):
        log = _run_style(style)
        lines = [ln for ln in log.split("\n") if "error callback" in ln]
        statuses = [c[2] for c in CASES]
        counts = [n for n in (1, 2, 4, 8, 16, 32) if n <= len(CASES)]
        want = [f"the app's error callback failed answering {statuses[n - 1]}: {why}; the "
                f"built-in answer went out ({n} so far)" for n in counts]
        eq([ln.split(": ", 1)[1] for ln in lines], want, f"{style}: the log's lines")


def test_Q4_handler_errno_logged_with_route_method_path():
    with Server("host_check") as s:
        s.wait_ready()
        c = s.connect()
        r = c.get("/q/fail?x=1")
        eq((r.status, r.body), (500, b"500 Internal Server Error\n"), "the answer")
        s.wait_log(r"^m0\[host_check\] loop 0: route /q/fail: GET /q/fail failed: "
                   r"Input/output error; answered 500$")
        # a refusal passed on by the handler is its status, and is not logged as a failure
        c.send(_post(b"/q/json", b"text/plain", b"{}"))
        eq(c.read_response().status, 415, "m0_req_json's refusal")
        eq(c.get("/health").status, 200, "after")
        time.sleep(0.2)
        eq([ln for ln in s.log_lines() if "failed" in ln],
           ["m0[host_check] loop 0: route /q/fail: GET /q/fail failed: Input/output error; "
            "answered 500"], "failure lines")


def test_Q4_unknown_answer_style_refused():
    with Server("host_check", env={"M0_HOSTCHECK_ERRORS": "xml"}) as s:
        eq(s.wait_exit(10), 78, "exit status")
        check(any(ln.startswith("m0: ") and "M0_HOSTCHECK_ERRORS='xml'" in ln
                  for ln in s.log_lines()), f"the refusal:\n{s.log_text()}")
