# SPDX-License-Identifier: MIT
"""The todo app (SPEC A7): JSON CRUD on /todos and /todos/:id with exact bodies, statuses and
headers; every error as application/problem+json (400, 404, 405 with Allow, 413, 415, 422);
HEAD; /todos/export as CSV on the pool; /events with each change and the producer's heartbeat;
CORS from M0_TODO_ORIGINS, with cookies when M0_TODO_CREDENTIALS=1; where the database lives
and the knobs' refusals; data kept across SIGTERM and SIGKILL restarts, and every acknowledged
todo through 20 kill -9s under load, with SQLite's integrity_check; ab -k and curl -I on the
stream then another URL on one connection."""

import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import threading
import time

from m0test import Server, SSEReader, check, eq, kill_during, open_stream, run_app, tool

# ThreadSanitizer runs this module (the pool's SQLite): run.py, D235.
THREADED = True

JSON = "application/json"
PROBLEM = "application/problem+json"


class Dir:
    """A temporary directory for the database, kept across restarts."""

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="m0todo-")
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)
        return False


def start(d, args=(), **extra):
    env = {"M0_TODO_DB": os.path.join(d, "todo.db"), **extra}
    s = Server("todo", env=env, args=args)
    s.wait_ready()
    return s


def call(c, method, path, body=None, ctype=JSON, headers=()):
    hs = list(headers)
    if body is not None:
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        if ctype:
            hs.append(("Content-Type", ctype))
    return c.exchange(method, path, hs, body)


def todo(id_, title, done=False):
    """A todo's exact bytes, as the app writes them."""
    return json.dumps({"id": id_, "title": title, "done": done}, separators=(",", ":"),
                      ensure_ascii=False).encode()


def expect_todo(r, status, body, what):
    eq((r.status, r.header("Content-Type"), r.body), (status, JSON, body), what)


def expect_problem(r, status, title, what, detail=None):
    """A problem+json answer with exactly type, title, status and detail (`detail` a string
    for an exact match, a compiled regex to search, or None for any non-empty string)."""
    eq((r.status, r.header("Content-Type")), (status, PROBLEM), f"{what}: status, type")
    p = json.loads(r.body)
    eq(sorted(p), ["detail", "status", "title", "type"], f"{what}: the problem's members")
    eq((p["type"], p["title"], p["status"]), ("about:blank", title, status), f"{what}: problem")
    if isinstance(detail, str):
        eq(p["detail"], detail, f"{what}: detail")
    elif detail is not None:
        check(detail.search(p["detail"]), f"{what}: detail {p['detail']!r}")
    else:
        check(isinstance(p["detail"], str) and p["detail"], f"{what}: detail {p['detail']!r}")
    return p


# ---- the routes ----


def test_A7_crud():
    """Every route's exact answer: 201 with Location and the todo, the list in id order, a todo,
    PATCH of the title, of done and of both, DELETE 204 then 404; an id is never given twice."""
    with Dir() as d, start(d) as s:
        c = s.connect()
        r = call(c, "GET", "/todos")
        expect_todo(r, 200, b"[]", "the empty list")
        r = call(c, "POST", "/todos", {"title": "buy milk"})
        expect_todo(r, 201, todo(1, "buy milk"), "POST")
        eq(r.header("Location"), "/todos/1", "Location")
        r = call(c, "POST", "/todos", {"title": "caf\u00e9 \"noir\"", "done": True})
        expect_todo(r, 201, todo(2, "caf\u00e9 \"noir\"", True), "POST with done")
        eq(r.header("Location"), "/todos/2", "Location")
        r = call(c, "POST", "/todos", {"done": False, "title": "x"})
        expect_todo(r, 201, todo(3, "x"), "POST, done first")
        r = call(c, "GET", "/todos")
        expect_todo(r, 200, b"[" + b",".join([todo(1, "buy milk"), todo(2, "caf\u00e9 \"noir\"",
                                                                          True), todo(3, "x")])
                    + b"]", "the list")
        expect_todo(call(c, "GET", "/todos/2"), 200, todo(2, "caf\u00e9 \"noir\"", True), "GET 2")
        r = call(c, "PATCH", "/todos/1", {"done": True})
        expect_todo(r, 200, todo(1, "buy milk", True), "PATCH done")
        r = call(c, "PATCH", "/todos/1", {"title": "buy oat milk"})
        expect_todo(r, 200, todo(1, "buy oat milk", True), "PATCH title")
        r = call(c, "PATCH", "/todos/1", {"title": "buy milk", "done": False})
        expect_todo(r, 200, todo(1, "buy milk"), "PATCH both")
        r = call(c, "PATCH", "/todos/1", {"done": True}, ctype="application/merge-patch+json")
        expect_todo(r, 200, todo(1, "buy milk", True), "PATCH as merge-patch+json")
        r = call(c, "DELETE", "/todos/3")
        eq((r.status, r.body, r.header("Content-Length")), (204, b"", None), "DELETE")
        for method, body in (("GET", None), ("DELETE", None), ("PATCH", {"done": True})):
            expect_problem(call(c, method, "/todos/3", body), 404, "Not Found",
                           f"{method} after DELETE", "no todo has this id")
        # The highest id was deleted: the next todo gets a new one, not 3 again.
        r = call(c, "POST", "/todos", {"title": "y"})
        expect_todo(r, 201, todo(4, "y"), "POST after deleting the highest")
        expect_problem(call(c, "GET", "/todos/3"), 404, "Not Found", "3 stays deleted")
        r = call(c, "GET", "/todos")
        expect_todo(r, 200, b"[" + b",".join([todo(1, "buy milk", True),
                                             todo(2, "caf\u00e9 \"noir\"", True), todo(4, "y")])
                    + b"]", "the list after")


def test_A7_ids_that_are_no_todo():
    """Unknown and non-numeric ids are 404 problems on GET, PATCH and DELETE; an id the route
    table refuses to decode is the host's 400."""
    with Dir() as d, start(d) as s:
        c = s.connect()
        expect_todo(call(c, "POST", "/todos", {"title": "a"}), 201, todo(1, "a"), "POST")
        for p in ("2", "0", "01", "-1", "+1", "1x", "abc", "1.0", "99999999999999999999",
                  "9223372036854775807", "%20"):
            for method, body in (("GET", None), ("PATCH", {"done": True}), ("DELETE", None)):
                expect_problem(call(c, method, f"/todos/{p}", body), 404, "Not Found",
                               f"{method} /todos/{p}", "no todo has this id")
        # A capture is decoded: "%31" is "1", as any client may encode it.
        expect_todo(call(c, "GET", "/todos/%31"), 200, todo(1, "a"), "GET /todos/%31")
        r = call(c, "GET", "/todos/%00")
        expect_problem(r, 400, "Bad Request", "GET /todos/%00")


def test_A7_head():
    """HEAD answers GET's head without its body: the list, a todo, a 404, the export."""
    with Dir() as d, start(d) as s:
        c = s.connect()
        call(c, "POST", "/todos", {"title": "a"})
        for path in ("/todos", "/todos/1", "/todos/2", "/todos/export"):
            g = call(c, "GET", path)
            h = call(c, "HEAD", path)
            eq((h.status, h.header("Content-Type"), h.header("Content-Length"), h.body),
               (g.status, g.header("Content-Type"), str(len(g.body)), b""), f"HEAD {path}")
        r = call(c, "GET", "/todos/1")
        expect_todo(r, 200, todo(1, "a"), "the connection goes on after the HEADs")


def test_A7_export_csv_on_the_pool():
    """text/csv, RFC 4180 (every title quoted, its quotes doubled, CRLF), in id order, built on
    a pool thread when there is one and on the loop when there is none; a title a spreadsheet
    would run as a formula starts with a ' (D105)."""
    titles = ["plain", "a, b", "say \"hi\"", "two\nlines", "\u00e9t\u00e9", "=1+2",
              "+SUM(A1)", "-3", "@cmd", "\tx", "a=b", "'quoted"]
    cells = ["plain", "a, b", "say \"\"hi\"\"", "two\nlines", "\u00e9t\u00e9", "'=1+2",
             "'+SUM(A1)", "'-3", "'@cmd", "'\tx", "a=b", "'quoted"]
    want = b"id,title,done\r\n" + b"".join(
        f"{i + 1},\"{t}\",{'true' if i % 2 else 'false'}\r\n".encode()
        for i, t in enumerate(cells))
    with Dir() as d:
        for args, thread in ((["--blocking-threads", "1"], "0"), ([], "-1")):
            with start(d, args) as s:
                c = s.connect()
                if args:
                    for i, t in enumerate(titles):
                        r = call(c, "POST", "/todos", {"title": t, "done": bool(i % 2)})
                        eq(r.status, 201, f"POST {t!r}")
                r = call(c, "GET", "/todos/export")
                eq((r.status, r.header("Content-Type"), r.header("x-thread"), r.body),
                   (200, "text/csv; charset=utf-8", thread, want), f"export, {args}")


# ---- errors ----

TOO_LONG = "t" * 201


def test_A7_errors_are_problems():
    """Every refusal is application/problem+json with type, title, status and detail, and
    changes nothing: bad JSON 400 (naming line and column), another content type 415, a title
    missing, empty, too long or not a string, done not a boolean, another member, a body that
    is no object, a PATCH with nothing to change 422, an unknown path 404, a method the path
    does not take 405 with Allow, a body past 4096 bytes 413."""
    unproc = "Unprocessable Content"
    rows = [
        ("POST", "/todos", b'{"title":', JSON, 400, "Bad Request",
         "the body is not valid JSON: unexpected token at line 1, column 9"),
        ("POST", "/todos", b'{"title": "a",\n "title": "b"}', JSON, 400, "Bad Request",
         re.compile(r"line 2")),
        ("POST", "/todos", b"", JSON, 400, "Bad Request", "the body is empty: JSON was expected"),
        ("POST", "/todos", b'{"title": "a\\u0000b"}', JSON, 400, "Bad Request", None),
        ("POST", "/todos", b'{"title": "\xff"}', JSON, 400, "Bad Request", None),
        ("PATCH", "/todos/1", b"{]", JSON, 400, "Bad Request", re.compile(r"line 1, column 2")),
        ("POST", "/todos", b'{"title": "a"}', "text/plain", 415, "Unsupported Media Type", None),
        ("POST", "/todos", b'{"title": "a"}', None, 415, "Unsupported Media Type", None),
        ("POST", "/todos", b"title=a", "application/x-www-form-urlencoded", 415,
         "Unsupported Media Type", None),
        ("PATCH", "/todos/1", b'{"done": true}', "text/json", 415, "Unsupported Media Type", None),
        ("POST", "/todos", {}, JSON, 422, unproc, "title is required"),
        ("POST", "/todos", {"done": True}, JSON, 422, unproc, "title is required"),
        ("POST", "/todos", {"title": ""}, JSON, 422, unproc, "title must be 1 to 200 characters"),
        ("POST", "/todos", {"title": TOO_LONG}, JSON, 422, unproc,
         "title must be 1 to 200 characters"),
        ("POST", "/todos", {"title": "\u00e9" * 201}, JSON, 422, unproc,
         "title must be 1 to 200 characters"),
        ("POST", "/todos", {"title": 7}, JSON, 422, unproc, "title must be a string"),
        ("POST", "/todos", {"title": None}, JSON, 422, unproc, "title must be a string"),
        ("POST", "/todos", {"title": "a", "done": "yes"}, JSON, 422, unproc,
         "done must be true or false"),
        ("POST", "/todos", {"title": "a", "done": 1}, JSON, 422, unproc,
         "done must be true or false"),
        ("POST", "/todos", {"title": "a", "id": 9}, JSON, 422, unproc,
         "a todo has only a title and done"),
        ("POST", "/todos", ["title"], JSON, 422, unproc, "the body must be a JSON object"),
        ("POST", "/todos", "a", JSON, 422, unproc, "the body must be a JSON object"),
        ("PATCH", "/todos/1", {}, JSON, 422, unproc,
         "nothing to change: give a title, done, or both"),
        ("PATCH", "/todos/1", {"title": TOO_LONG}, JSON, 422, unproc,
         "title must be 1 to 200 characters"),
        ("PATCH", "/todos/1", {"done": None}, JSON, 422, unproc, "done must be true or false"),
        ("POST", "/todos", b'{"title": "' + b"a" * 5000 + b'"}', JSON, 413, "Content Too Large",
         None),
    ]
    allow = [("PUT", "/todos", "GET, HEAD, POST, OPTIONS"),
             ("DELETE", "/todos", "GET, HEAD, POST, OPTIONS"),
             ("POST", "/todos/1", "GET, HEAD, PATCH, DELETE, OPTIONS"),
             ("PUT", "/todos/1", "GET, HEAD, PATCH, DELETE, OPTIONS"),
             ("POST", "/todos/export", "GET, HEAD, PATCH, DELETE, OPTIONS"),
             ("POST", "/events", "GET, HEAD, OPTIONS")]
    with Dir() as d, start(d) as s:
        c = s.connect()
        expect_todo(call(c, "POST", "/todos", {"title": "a"}), 201, todo(1, "a"), "POST")
        for method, path, body, ctype, status, title, detail in rows:
            what = f"{method} {path} {body!r:.60} as {ctype}"
            r = call(c, method, path, body, ctype=ctype)
            expect_problem(r, status, title, what, detail)
            if status == 413:  # refused before the body is read: the connection closes
                c.close()
                c = s.connect()
        for method, path, methods in allow:
            r = call(c, method, path, {"title": "a"})
            expect_problem(r, 405, "Method Not Allowed", f"{method} {path}")
            eq(r.header("Allow"), methods, f"{method} {path}: Allow")
        for path in ("/", "/todo", "/todos/1/x", "/events/1"):
            expect_problem(call(c, "GET", path), 404, "Not Found", f"GET {path}")
        r = call(c, "OPTIONS", "/todos/1")
        eq((r.status, r.header("Allow")), (204, "GET, HEAD, PATCH, DELETE, OPTIONS"), "OPTIONS")
        # Nothing refused changed anything.
        expect_todo(call(c, "GET", "/todos"), 200, b"[" + todo(1, "a") + b"]", "the list after")
        ok = call(c, "POST", "/todos", {"title": "\u00e9" * 200})
        expect_todo(ok, 201, todo(2, "\u00e9" * 200), "200 characters, 400 bytes")
        ok = call(c, "POST", "/todos", {"title": "t" * 200})
        expect_todo(ok, 201, todo(3, "t" * 200), "200 characters")


# ---- the stream ----


def test_A7_events():
    """/events carries each change as it is answered, `event: created|updated|deleted` with the
    todo as data and an id, and the producer's heartbeat (the count and the newest id), a transient
    event with none."""
    with Dir() as d, start(d, M0_TODO_HEARTBEAT_MS="200") as s:
        sc = s.connect()
        head = open_stream(sc, "/events")
        eq((head.status, head.header("Content-Type")), (200, "text/event-stream"), "the stream")
        rd = SSEReader(sc)
        c = s.connect()
        call(c, "POST", "/todos", {"title": "a"})
        call(c, "PATCH", "/todos/1", {"done": True})
        call(c, "POST", "/todos", {"title": "b"})
        call(c, "DELETE", "/todos/1")
        changes, beats = [], []
        deadline = time.monotonic() + 10
        while (len(changes) < 4 or not beats or beats[-1] != '{"todos":1,"last_id":2}') \
                and time.monotonic() < deadline:
            f = rd.next(1)
            if f is None or not f.is_event:
                continue
            # a change takes the next id; a heartbeat is transient (N4): none
            eq(f.id is None, f.event == "heartbeat", f"the id of {f.event} {f.data_text}")
            (beats if f.event == "heartbeat" else changes).append(
                f.data_text if f.event == "heartbeat" else (f.event, f.data_text))
        eq(changes, [("created", todo(1, "a").decode()), ("updated", todo(1, "a", True).decode()),
                     ("created", todo(2, "b").decode()), ("deleted", todo(1, "a", True).decode())],
           "the changes")
        check(beats and beats[-1] == '{"todos":1,"last_id":2}', f"heartbeats: {beats}")
        for b in beats:
            check(re.fullmatch(r'\{"todos":\d+,"last_id":\d+\}', b), f"heartbeat {b!r}")


def test_A7_head_on_the_stream_then_the_next_request():
    """HEAD /events answers the stream's head and the connection takes the next request: on a
    raw connection, and with curl -I on two URLs (one connection)."""
    with Dir() as d, start(d) as s:
        c = s.connect()
        r = call(c, "HEAD", "/events")
        eq((r.status, r.header("Content-Type"), r.body), (200, "text/event-stream", b""),
           "HEAD /events")
        expect_todo(call(c, "GET", "/todos"), 200, b"[]", "the next request")
        curl = tool("curl", "curl")
        base = f"http://127.0.0.1:{s.port}"
        out = subprocess.run([curl, "-sS", "-I", "-m", "10", "-w", "%{http_code} %{num_connects}\\n",
                              f"{base}/events", f"{base}/todos"],
                             capture_output=True, text=True, timeout=20)
        eq(out.returncode, 0, f"curl: {out.stderr}")
        eq(re.findall(r"^(\d{3}) (\d)$", out.stdout, re.M), [("200", "1"), ("200", "0")],
           "curl's codes and new connections")


# ---- CORS ----


def test_A7_cors_from_M0_TODO_ORIGINS():
    """M0_TODO_ORIGINS lists who may call from a browser: a preflight and an answer for a
    listed origin carry the Access-Control lines (Location readable), another origin's none;
    without the variable there is none; more than 16 origins is refused 78 naming it."""
    origins = "https://app.example, http://localhost:5173"
    with Dir() as d:
        with start(d, M0_TODO_ORIGINS=origins) as s:
            c = s.connect()
            r = call(c, "OPTIONS", "/todos", headers=[
                ("Origin", "http://localhost:5173"), ("Access-Control-Request-Method", "POST"),
                ("Access-Control-Request-Headers", "content-type")])
            eq((r.status, r.header("Access-Control-Allow-Origin"),
                r.header("Access-Control-Allow-Methods"), r.header("Access-Control-Allow-Headers")),
               (204, "http://localhost:5173", "GET, HEAD, POST, OPTIONS", "content-type"),
               "a preflight")
            r = call(c, "POST", "/todos", {"title": "a"}, headers=[("Origin", "https://app.example")])
            eq((r.status, r.header("Access-Control-Allow-Origin"),
                r.header("Access-Control-Expose-Headers"), r.header("Vary"),
                r.header("Access-Control-Allow-Credentials")),
               (201, "https://app.example", "Location", "Origin", None),
               "a listed origin's POST, without credentials unless M0_TODO_CREDENTIALS=1")
            r = call(c, "GET", "/todos/1", headers=[("Origin", "https://evil.example")])
            eq((r.status, r.header("Access-Control-Allow-Origin"), r.header("Vary")),
               (200, None, "Origin"), "another origin")
            r = call(c, "GET", "/todos/9", headers=[("Origin", "https://app.example")])
            eq((r.status, r.header("Access-Control-Allow-Origin")), (404, "https://app.example"),
               "a 404 to a listed origin")
        with start(d) as s:
            r = call(s.connect(), "GET", "/todos", headers=[("Origin", "https://app.example")])
            eq((r.status, r.header("Access-Control-Allow-Origin"), r.header("Vary")),
               (200, None, None), "without M0_TODO_ORIGINS")
        many = " ".join(f"https://o{i}.example" for i in range(17))
        rc, _, err = run_app("todo", env={"M0_TODO_DB": os.path.join(d, "todo.db"),
                                          "M0_TODO_ORIGINS": many})
        eq(rc, 78, "17 origins")
        check("M0_TODO_ORIGINS names more than 16 origins" in err, f"the refusal: {err[-300:]}")


def test_A7_cors_credentials_from_M0_TODO_CREDENTIALS():
    """M0_TODO_CREDENTIALS=1: a page of a listed origin may call with cookies (fetch with
    credentials: 'include', EventSource with withCredentials): the preflight, a GET and the
    event stream's head echo the origin, never '*', with Access-Control-Allow-Credentials: true;
    another origin gets none of it. Credentials without M0_TODO_ORIGINS, with '*', or a value
    other than 0 or 1 refuse the start (78) naming what to change."""
    app, dev, evil = "https://app.example", "http://localhost:5173", "https://evil.example"
    cors = ("Access-Control-Allow-Origin", "Access-Control-Allow-Credentials",
            "Access-Control-Expose-Headers", "Vary")

    def lines(r):
        return tuple(r.header_all(k) for k in cors)

    def preflight(c, origin):
        return call(c, "OPTIONS", "/todos", headers=[
            ("Origin", origin), ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "content-type")])

    with Dir() as d:
        with start(d, M0_TODO_ORIGINS=f"{app}, {dev}", M0_TODO_CREDENTIALS="1") as s:
            c = s.connect()
            r = preflight(c, dev)
            eq((r.status, r.header_all("Access-Control-Allow-Origin"),
                r.header_all("Access-Control-Allow-Credentials"),
                r.header_all("Access-Control-Allow-Methods"),
                r.header_all("Access-Control-Allow-Headers"), r.header_all("Vary")),
               (204, [dev], ["true"], ["GET, HEAD, POST, OPTIONS"], ["content-type"],
                ["Origin, Access-Control-Request-Headers"]), "a listed origin's preflight")
            r = call(c, "GET", "/todos", headers=[("Origin", app), ("Cookie", "session=1")])
            eq((r.status, lines(r)), (200, ([app], ["true"], ["Location"], ["Origin"])),
               "a listed origin's GET")
            r = preflight(c, evil)
            eq((r.status, r.header_all("Access-Control-Allow-Origin"),
                r.header_all("Access-Control-Allow-Credentials"),
                r.header_all("Access-Control-Allow-Methods")), (204, [], [], []),
               "another origin's preflight")
            r = call(c, "GET", "/todos", headers=[("Origin", evil)])
            eq((r.status, lines(r)), (200, ([], [], [], ["Origin"])), "another origin's GET")
            for origin, want in ((app, ([app], ["true"], ["Location"], ["Origin"])),
                                 (evil, ([], [], [], ["Origin"]))):
                c = s.connect()
                r = open_stream(c, "/events", [("Origin", origin)])
                eq((r.status, r.header("Content-Type"), lines(r)),
                   (200, "text/event-stream", want), f"the event stream's head to {origin}")
                c.close()
        db = os.path.join(d, "todo.db")
        for env, text in (
                ({"M0_TODO_CREDENTIALS": "1"},
                 "M0_TODO_CREDENTIALS=1 without M0_TODO_ORIGINS (list the origins that may send "
                 "cookies in M0_TODO_ORIGINS, or unset M0_TODO_CREDENTIALS)"),
                ({"M0_TODO_CREDENTIALS": "yes", "M0_TODO_ORIGINS": app},
                 "M0_TODO_CREDENTIALS='yes' is not a number from 0 to 1"),
                ({"M0_TODO_CREDENTIALS": "1", "M0_TODO_ORIGINS": "*"},
                 "credentials with '*'")):
            rc, _, err = run_app("todo", env={"M0_TODO_DB": db, **env})
            eq(rc, 78, f"exit status, {env}")
            check(text in err, f"the refusal names it, {env}: {err[-400:]}")


# ---- the database and the knobs ----


def test_A7_where_the_database_is():
    """M0_TODO_DB, else $STATE_DIRECTORY/todo.db (its first directory), else todo.db in the
    current directory; the path is printed at start and the file is in WAL mode."""
    with Dir() as d:
        sub = os.path.join(d, "state")
        os.mkdir(sub)
        cases = [({"M0_TODO_DB": os.path.join(d, "mine.db")}, os.path.join(d, "mine.db")),
                 ({"STATE_DIRECTORY": f"{sub}:{d}/other"}, os.path.join(sub, "todo.db")),
                 ({"STATE_DIRECTORY": sub, "M0_TODO_DB": os.path.join(d, "x.db")},
                  os.path.join(d, "x.db")),
                 ({}, os.path.join(d, "todo.db"))]
        for env, path in cases:
            s = Server("todo", env=env, preexec_fn=lambda: os.chdir(d))
            try:
                s.wait_ready()
                s.wait_log(re.escape(f"todos in {path}") + "$")
                eq(call(s.connect(), "POST", "/todos", {"title": "a"}).status, 201, f"POST, {env}")
            finally:
                s.cleanup()
            con = sqlite3.connect(path)
            try:
                eq(con.execute("PRAGMA journal_mode").fetchall(), [("wal",)], f"{path}: journal")
                eq(con.execute("SELECT id, title, done FROM todos").fetchall(), [(1, "a", 0)],
                   f"{path}: rows")
            finally:
                con.close()


def test_A7_refusals():
    """A database that cannot be opened, and knobs out of range, refuse the start (78) naming
    what to change."""
    with Dir() as d:
        db = os.path.join(d, "todo.db")
        for env, text in (
                ({"M0_TODO_DB": os.path.join(d, "no", "such", "todo.db")},
                 "cannot open " + os.path.join(d, "no", "such", "todo.db")),
                ({"M0_TODO_DB": db, "M0_TODO_BUSY_MS": "0"},
                 "M0_TODO_BUSY_MS='0' is not a number from 1 to 60000 (set M0_TODO_BUSY_MS to "
                 "1..60000, or unset it (5000))"),
                ({"M0_TODO_DB": db, "M0_TODO_BUSY_MS": "5s"},
                 "M0_TODO_BUSY_MS='5s' is not a number from 1 to 60000"),
                ({"M0_TODO_DB": db, "M0_TODO_HEARTBEAT_MS": "99"},
                 "M0_TODO_HEARTBEAT_MS='99' is not a number from 100 to 3600000"),
                ({"M0_TODO_DB": db, "M0_TODO_MAX_TODOS": "0"},
                 "M0_TODO_MAX_TODOS='0' is not a number from 1 to 10000000"),
                ({"M0_TODO_DB": db, "M0_TODO_MAX_TODOS": "10000001"},
                 "M0_TODO_MAX_TODOS='10000001' is not a number from 1 to 10000000")):
            rc, _, err = run_app("todo", env=env)
            eq(rc, 78, f"exit status, {env}")
            check(text in err, f"the refusal names it, {env}: {err[-400:]}")
        with open(db, "wb") as f:
            f.write(b"this is not a database" * 100)
        rc, _, err = run_app("todo", env={"M0_TODO_DB": db})
        eq(rc, 78, "a file that is no database")
        check(f"cannot open {db}: file is not a database" in err, f"the refusal: {err[-400:]}")


def test_A7_max_todos():
    """M0_TODO_MAX_TODOS bounds the list: past it a POST is 507 and writes nothing; a DELETE
    makes room again."""
    with Dir() as d, start(d, M0_TODO_MAX_TODOS="3") as s:
        c = s.connect()
        for i in range(1, 4):
            expect_todo(call(c, "POST", "/todos", {"title": f"t{i}"}), 201, todo(i, f"t{i}"),
                        f"POST {i}")
        expect_problem(call(c, "POST", "/todos", {"title": "t4"}), 507, "Insufficient Storage",
                       "the fourth", "the list is full: it holds M0_TODO_MAX_TODOS todos")
        eq(call(c, "DELETE", "/todos/2").status, 204, "DELETE")
        expect_todo(call(c, "POST", "/todos", {"title": "t5"}), 201, todo(4, "t5"), "POST after")
        expect_todo(call(c, "GET", "/todos"), 200,
                    b"[" + b",".join([todo(1, "t1"), todo(3, "t3"), todo(4, "t5")]) + b"]",
                    "the list")


def test_A7_many_handlers_open_one_new_database():
    """Every handler state opens a new file at once (1 loop and 1 pool thread, 2 and 2, 4 loops
    with 2 each: 3 to 13 connections with the producer's), ten times each: every start is
    READY, and every handler serves."""
    for loops, pool in ((1, 1), (2, 2), (4, 2)):
        for i in range(10):
            with Dir() as d, start(d, ["--threads", loops, "--blocking-threads", pool]) as s:
                for _ in range(2 * loops):
                    c = s.connect()
                    eq(call(c, "GET", "/todos").status, 200, f"{loops}x{pool}, start {i}: GET")
                    eq(call(c, "GET", "/todos/export").status, 200,
                       f"{loops}x{pool}, start {i}: export")
                    c.close()


def test_A7_restart_keeps_data():
    """What was written is there after a SIGTERM restart and after a SIGKILL one."""
    with Dir() as d:
        with start(d) as s:
            c = s.connect()
            for t in ("a", "b", "c"):
                call(c, "POST", "/todos", {"title": t})
            call(c, "PATCH", "/todos/2", {"done": True})
            call(c, "DELETE", "/todos/1")
            eq(s.stop(), 0, "SIGTERM's exit")
        want = b"[" + todo(2, "b", True) + b"," + todo(3, "c") + b"]"
        with start(d) as s:
            c = s.connect()
            expect_todo(call(c, "GET", "/todos"), 200, want, "after SIGTERM")
            expect_todo(call(c, "POST", "/todos", {"title": "d"}), 201, todo(4, "d"), "POST")
            s.send_signal(signal.SIGKILL)
            eq(s.wait_exit(10), -signal.SIGKILL, "the kill")
        with start(d) as s:
            expect_todo(call(s.connect(), "GET", "/todos"), 200, want[:-1] + b"," + todo(4, "d")
                        + b"]", "after SIGKILL")


def _writer(s, w, rnd, acked, inflight, lock, stop, errors):
    """POST todos until the server dies; what was answered 201 goes into `acked`."""
    i = 0
    try:
        c = s.connect(timeout=5)
        while not stop.is_set():
            i += 1
            title = f"r{rnd} w{w} #{i}"
            with lock:
                inflight.add(title)
            r = call(c, "POST", "/todos", {"title": title})
            eq(r.status, 201, "POST /todos")
            id_ = json.loads(r.body)["id"]
            eq(r.header("Location"), f"/todos/{id_}", "Location")
            with lock:
                acked[id_] = title
                inflight.discard(title)
    except Exception as e:  # noqa: BLE001 - the kill ends every writer with a broken connection
        errors.append((time.monotonic(), w, e))


def test_A7_acknowledged_todos_survive_kill_9():
    """20 rounds of: start (READY), four writers on two loops and their pools, kill -9 at a
    random moment, restart. Every todo whose POST got its 201 is in the file and in the list
    with its title, nothing is there that nobody sent, and integrity_check says ok."""
    rounds = 20
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    acked, inflight, lock = {}, set(), threading.Lock()
    total = 0
    with Dir() as d:
        for rnd in range(rounds + 1):
            what = f"round {rnd} (seed {seed})"
            # No bound on the list: four writers for up to 0.4 s a round reach todo's 10000
            # within 20 rounds on a fast machine, and a 507 is not what this test is about.
            s = start(d, ["--threads", "2", "--blocking-threads", "2"],
                      M0_TODO_MAX_TODOS="1000000")
            try:
                con = sqlite3.connect(os.path.join(d, "todo.db"))
                try:
                    eq(con.execute("PRAGMA integrity_check").fetchall(), [("ok",)],
                       f"{what}: integrity_check")
                    rows = dict(con.execute("SELECT id, title FROM todos"))
                finally:
                    con.close()
                for id_, title in acked.items():
                    eq(rows.get(id_), title, f"{what}: acknowledged todo {id_}")
                for id_, title in rows.items():
                    check(id_ in acked or title in inflight, f"{what}: todo {id_} nobody sent")
                acked = dict(rows)
                listed = json.loads(call(s.connect(), "GET", "/todos").body)
                eq([(t["id"], t["title"]) for t in listed], sorted(rows.items()), f"{what}: list")
                if rnd == rounds:
                    break
                inflight = set()
                before = len(acked)
                kill_during(s, lambda w, stop, errors: _writer(
                    s, w, rnd, acked, inflight, lock, stop, errors),
                    4, rng.uniform(0.05, 0.4), what)
                total += len(acked) - before
            finally:
                s.cleanup()
    check(total >= rounds, f"only {total} todos acknowledged in {rounds} rounds")
    print(f"  {rounds} rounds, {total} todos acknowledged, seed {seed}", flush=True)


test_A7_acknowledged_todos_survive_kill_9.timeout = 240
test_A7_acknowledged_todos_survive_kill_9.once = True  # kill -9 in a loop: the plain variant only (run.py, D235)


# ---- load ----


def test_A7_ab_keep_alive():
    """ab -k -c 16 -n 20000 on GET /todos/1: every request answered, none failed."""
    ab = tool("ab", "apache2-utils")
    with Dir() as d, start(d, ["--max-keepalive-requests", "0"]) as s:
        eq(call(s.connect(), "POST", "/todos", {"title": "a"}).status, 201, "POST")
        out = subprocess.run([ab, "-q", "-k", "-c", "16", "-n", "20000", "-s", "20",
                              f"http://127.0.0.1:{s.port}/todos/1"],
                             capture_output=True, text=True, timeout=120)
        eq(out.returncode, 0, f"ab's exit: {out.stderr[-500:]}")
        f = dict(re.findall(r"^([A-Za-z -]+):\s+(\S+)", out.stdout, re.M))
        eq((f.get("Complete requests"), f.get("Failed requests"), f.get("Non-2xx responses"),
            f.get("Keep-Alive requests"), f.get("Document Length")),
           ("20000", "0", None, "20000", str(len(todo(1, "a")))), "ab's counts")


test_A7_ab_keep_alive.timeout = 120
test_A7_ab_keep_alive.once = True  # a load tool: the plain variant only (run.py, D235)


# ---- compressed answers (SF4) ----


def test_SF4_the_list_of_200_todos_compressed():
    """The list of 200 todos goes gzip-compressed to a client that accepts gzip (and zstd or br
    when it takes those), with Vary; it decompresses to the identity answer, which a client
    that does not accept gzip gets as it is; a cross-site request gets it as it is too (D183),
    and the event stream is never compressed."""
    import gzip
    with Dir() as d, start(d) as s:
        c = s.connect()
        for i in range(200):
            r = call(c, "POST", "/todos", {"title": f"todo number {i}, with some words"})
            eq(r.status, 201, f"POST {i}")
        plain = call(c, "GET", "/todos")
        eq((plain.status, plain.header("Content-Encoding"), plain.header("Vary")),
           (200, None, "Accept-Encoding"), "no Accept-Encoding: identity")
        eq(len(json.loads(plain.body)), 200, "the list holds 200 todos")
        eq(plain.header("Content-Length"), str(len(plain.body)), "its length")
        r = call(c, "GET", "/todos", headers=[("Accept-Encoding", "gzip")])
        eq((r.status, r.header("Content-Encoding"), r.header("Vary"), r.header("Content-Type")),
           (200, "gzip", "Accept-Encoding", JSON), "gzip")
        eq(gzip.decompress(r.body), plain.body, "the gzip body decompressed")
        check(len(r.body) * 4 < len(plain.body), f"{len(r.body)} bytes for {len(plain.body)}")
        r = call(c, "GET", "/todos", headers=[("Accept-Encoding", "deflate, gzip;q=0")])
        eq((r.header("Content-Encoding"), r.body), (None, plain.body), "gzip;q=0: identity")
        r = call(c, "GET", "/todos", headers=[("Accept-Encoding", "gzip, br, zstd")])
        eq(r.header("Content-Encoding"), "zstd", "zstd first among equals (D182)")
        r = call(c, "GET", "/todos", headers=[("Accept-Encoding", "gzip"),
                                              ("Sec-Fetch-Site", "cross-site")])
        eq((r.header("Content-Encoding"), r.body), (None, plain.body), "cross-site: identity")
        r = call(c, "GET", "/todos/1", headers=[("Accept-Encoding", "gzip")])
        eq((r.status, r.header("Content-Encoding"), r.header("Vary")), (200, None, None),
           "a todo under M0_COMPRESS_MIN_BYTES: as it is")
        c.close()
        # curl's own decoding of it
        curl = tool("curl", "curl")
        out = subprocess.run([curl, "-sS", "-m", "10", "--compressed", "-H",
                              "Accept-Encoding: gzip", f"http://127.0.0.1:{s.port}/todos"],
                             capture_output=True)
        eq((out.returncode, out.stdout), (0, plain.body), "curl --compressed")
        e = s.connect()
        h = open_stream(e, "/events", [("Accept-Encoding", "gzip, br, zstd")])
        eq((h.status, h.header("Content-Encoding")), (200, None), "the event stream as it is")
        e.close()


def test_SF1_todo_serves_its_page():
    """todo serves apps/todo-www at /app/ with M0_TODO_WWW: the index whose script and style it
    names, each with its type, byte for byte; the page calls todo's own API on its origin."""
    www = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "apps", "todo-www")
    with Dir() as d, start(d, M0_TODO_WWW=www) as s:
        c = s.connect()
        for path, name, ctype in (("/app/", "index.html", "text/html; charset=utf-8"),
                                  ("/app/app.js", "app.js", "text/javascript; charset=utf-8"),
                                  ("/app/app.css", "app.css", "text/css; charset=utf-8")):
            with open(os.path.join(www, name), "rb") as f:
                want = f.read()
            r = c.get(path)
            eq((r.status, r.header("Content-Type"), r.body), (200, ctype, want), f"GET {path}")
            if name == "index.html":
                check(b'src="app.js"' in r.body and b'href="app.css"' in r.body,
                      "the index names app.js and app.css beside it")
            if name == "app.js":
                check(b'new EventSource(API + "/events")' in r.body and b'const API = "";' in r.body,
                      "the page follows /events on its own origin")
        c.close()


def test_SF1_the_page_in_chromium():
    """Headless Chromium loads todo's page from todo (/app/, M0_TODO_WWW) and drives it through
    the DevTools protocol (todo_page.mjs): the seeded list shown with a title of markup as text
    and the stream live; a todo added through the form, one marked done, one renamed, one
    deleted, and one another client added arriving through /events. What the page shows at the
    end is what GET /todos holds; the screenshot is kept in the build tree
    (test-screenshots/todo-page.png)."""
    from m0test import build_dir
    chromium = tool("chromium", "chromium")
    node = tool("node", "nodejs")
    here = os.path.dirname(os.path.abspath(__file__))
    www = os.path.join(here, "..", "..", "apps", "todo-www")
    shots = os.path.join(build_dir(), "test-screenshots")
    os.makedirs(shots, exist_ok=True)
    shot = os.path.join(shots, "todo-page.png")
    if os.path.exists(shot):
        os.unlink(shot)
    with Dir() as d, start(d, M0_TODO_WWW=www) as s:
        c = s.connect()
        eq(call(c, "POST", "/todos", {"title": "buy milk"}).status, 201, "seed 1")
        eq(call(c, "POST", "/todos", {"title": "<b>not bold</b>"}).status, 201, "seed 2")
        out = subprocess.run([node, "--experimental-websocket", "--no-warnings",
                              os.path.join(here, "todo_page.mjs"), chromium,
                              f"http://127.0.0.1:{s.port}/app/", shot],
                             capture_output=True, text=True, timeout=90)
        last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
        eq(out.returncode, 0, f"the page's steps: {last} {out.stderr[-2000:]}")
        shown = json.loads(last)
        listed = json.loads(call(c, "GET", "/todos").body)
        eq(shown["items"], [[t["title"], t["done"]] for t in listed],
           "what the page shows is the list")
        eq([t["title"] for t in listed],
           ["buy milk", "renamed in chromium", "from another client"], "the list's titles")
        eq((shown["count"], shown["live"]), ("2 of 3 left", "live"), "the count and the stream")
        with open(shot, "rb") as f:
            eq(f.read(8), b"\x89PNG\r\n\x1a\n", "the screenshot is a PNG")
        c.close()


# run.py runs it alone: a browser takes both cores for a while.
test_SF1_the_page_in_chromium.serial = True
test_SF1_the_page_in_chromium.once = True  # a browser: the plain variant only (run.py, D235)
