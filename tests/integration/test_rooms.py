# SPDX-License-Identifier: MIT
"""The rooms app (SPEC WS6): a login by form that sets a session cookie (a random token whose
hash SQLite keeps), revoked by logout; messages posted by HTTP and over a room's WebSocket,
stored in SQLite and published on the room's channel; a room followed by WebSocket
(python3-websockets) and by event stream with exact ids and bytes; history pages by id; a
reconnect with last_event_id that gets what it missed none twice; an event stream's hole past
what the bus keeps backfilled from SQLite (AP2); CORS with credentials for M0_ROOMS_ORIGINS,
which are also the origins its WebSockets take; every refusal problem+json (400, 401, 404, 413,
415); the knobs' refusals (78); SIGTERM's 1001, and the sessions and rooms kept in the state
directory across a restart."""

import asyncio
import json
import os
import re
import shutil
import signal
import sqlite3
import tempfile

from m0test import OPEN_BLOCKS, SSEReader, Server, check, eq, open_stream, run_app
from wstest import websockets

# ThreadSanitizer runs this module (the pool's SQLite, sends from any thread): run.py, D235.
THREADED = True

JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
PROBLEM = "application/problem+json"
TITLES = {400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 413: "Content Too Large",
          415: "Unsupported Media Type", 429: "Too Many Requests", 503: "Service Unavailable", 507: "Insufficient Storage"}


class Rooms:
    """A rooms app on a database in a temporary directory (`state`: a StateDirectory to keep),
    removed after unless it was given."""

    def __init__(self, state=None, **env):
        self.keep = state is not None
        self.dir = state or tempfile.mkdtemp(prefix="m0rooms-")
        self.db = os.path.join(self.dir, "rooms.db")
        self.s = Server("rooms", env={"STATE_DIRECTORY": self.dir, **env})

    def __enter__(self):
        self.s.wait_ready()
        return self

    def __exit__(self, *exc):
        try:
            self.s.cleanup()
        finally:
            if not self.keep:
                shutil.rmtree(self.dir, ignore_errors=True)
        return False

    @property
    def base(self):
        return f"ws://{self.s.tcp_addr[0]}:{self.s.tcp_addr[1]}"

    def call(self, method, path, body=None, ctype=JSON, cookie=None, headers=()):
        hs = list(headers)
        if cookie:
            hs.append(("Cookie", f"rooms_session={cookie}"))
        if body is not None:
            if not isinstance(body, bytes):
                body = json.dumps(body).encode()
            if ctype:
                hs.append(("Content-Type", ctype))
        c = self.s.connect()
        try:
            return c.exchange(method, path, hs, body)
        finally:
            c.close()

    def login(self, name):
        r = self.call("POST", "/login", f"name={name}".encode(), ctype=FORM)
        eq((r.status, r.header("Content-Type"), r.body), (200, JSON, b'{"user":"%s"}' % name.encode()),
           f"the login of {name}")
        m = re.fullmatch(r"rooms_session=([A-Za-z0-9_-]{43}); HttpOnly; SameSite=Lax; Path=/; "
                         r"Max-Age=86400", r.header("Set-Cookie") or "")
        check(m, f"the session cookie: {r.header('Set-Cookie')!r}")
        return m.group(1)

    def post(self, cookie, room, text):
        """POST a message: (the message as stored, its event's id)."""
        r = self.call("POST", f"/rooms/{room}/messages", {"text": text}, cookie=cookie)
        eq((r.status, r.header("Content-Type")), (201, JSON), f"POST to {room}: {r.body!r}")
        m = json.loads(r.body)
        eq((sorted(m), m["room"], m["text"]), (["from", "id", "room", "text", "time"], room, text),
           "the message as stored")
        eq(r.body, compact(m), "the answer's bytes")
        return m, int(r.header("X-Event-Id"))


def compact(obj):
    """A JSON value's bytes as the app writes them (jansson, compact, UTF-8)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def expect_problem(r, status, detail, what):
    eq((r.status, r.header("Content-Type")), (status, PROBLEM), f"{what}: status, type")
    eq(json.loads(r.body), {"type": "about:blank", "title": TITLES[status], "status": status,
                            "detail": detail}, f"{what}: the problem")


def bus_message(event_id, room, message):
    """What a WebSocket gets for a message (WS2's shape)."""
    return {"id": event_id, "channel": f"room:{room}", "event": "message",
            "data": compact(message).decode()}


def test_WS6_login_post_history_logout():
    """A login sets the cookie; a POST stores the message and answers it with its event's id;
    history pages by id (?before=, ?after=, ?limit=) oldest first; logout deletes the session,
    after which the same cookie is 401; the messages are in the database file."""
    with Rooms() as a:
        ada = a.login("ada")
        got = [a.post(ada, "lobby", f"m{i}") for i in range(5)]
        msgs = [m for m, _ in got]
        ids = [m["id"] for m in msgs]
        eq(ids, list(range(ids[0], ids[0] + 5)), "message ids rise by one")
        events = [e for _, e in got]
        check(events == sorted(events) and len(set(events)) == 5, f"event ids: {events}")
        eq({m["from"] for m in msgs}, {"ada"}, "the author")

        def page(q):
            r = a.call("GET", f"/rooms/lobby/messages{q}", cookie=ada)
            eq((r.status, r.header("Content-Type")), (200, JSON), f"history {q}")
            eq(r.body, compact(json.loads(r.body)), f"history {q}: bytes")
            return json.loads(r.body)["messages"]

        eq(page(""), msgs, "the whole history, oldest first")
        eq(page("?limit=2"), msgs[3:], "the newest page")
        eq(page(f"?before={ids[3]}&limit=2"), msgs[1:3], "the page before it")
        eq(page(f"?before={ids[1]}&limit=2"), msgs[:1], "the last page")
        eq(page(f"?after={ids[1]}&limit=2"), msgs[2:4], "?after=")
        eq(page(f"?after={ids[4]}"), [], "nothing after the newest")
        eq(page(""), msgs, "GET history changes nothing")
        eq(a.call("GET", "/rooms/empty/messages", cookie=ada).body, b'{"messages":[]}',
           "a room nobody posted in")

        bob = a.login("bob")
        m, _ = a.post(bob, "lobby", "héllo \"bob\" </script>")
        eq(m["from"], "bob", "bob's message")
        r = a.call("POST", "/logout", cookie=bob)
        eq((r.status, r.header("Set-Cookie")),
           (204, "rooms_session=; HttpOnly; SameSite=Lax; Path=/; Max-Age=0"), "logout")
        for method, path, body in (("POST", "/rooms/lobby/messages", {"text": "x"}),
                                   ("GET", "/rooms/lobby/messages", None),
                                   ("GET", "/rooms/lobby/events", None)):
            expect_problem(a.call(method, path, body, cookie=bob), 401,
                           "no session: log in first (POST /login)", f"{method} {path} after logout")
        eq(a.call("GET", "/rooms/lobby/messages", cookie=ada).status, 200, "ada's session lives")
        with sqlite3.connect(a.db) as db:
            eq(db.execute("SELECT count(*) FROM messages WHERE room = 'lobby'").fetchone()[0], 6,
               "messages in SQLite")
            eq(db.execute("SELECT count(*) FROM sessions").fetchone()[0], 1,
               "bob's session deleted, ada's kept")
            keys = [k for (k,) in db.execute("SELECT token_hash FROM sessions")]
            check(all(isinstance(k, bytes) and len(k) == 32 for k in keys) and
                  ada.encode() not in keys, "SQLite keeps the token's hash, not the token")


def test_WS6_refusals_are_problems():
    """Without a session 401 (no cookie, a cookie that is no token, an unknown token); a room's
    name that cannot be one 404; bad JSON, other members, an empty text, a bad page 400; a text
    past M0_ROOMS_MAX_TEXT and a body past its bound 413; another type than JSON 415; a login
    without a name or with a bad one 400, with JSON 415."""
    with Rooms(M0_ROOMS_MAX_TEXT="10") as a:
        ada = a.login("ada")
        none = "no session: log in first (POST /login)"
        expect_problem(a.call("POST", "/rooms/r/messages", {"text": "x"}), 401, none, "no cookie")
        expect_problem(a.call("POST", "/rooms/r/messages", {"text": "x"}, cookie="abc"), 401,
                       none, "a cookie that is no token")
        expect_problem(a.call("GET", "/rooms/r/messages", cookie="A" * 43), 401, none,
                       "a token nobody was given")
        expect_problem(a.call("GET", "/rooms/r/ws", cookie="A" * 43), 401, none,
                       "the WebSocket route without a session")
        bad_room = "a room's name is 1 to 64 of a-z, 0-9, _ and -"
        expect_problem(a.call("GET", "/rooms/Lobby/messages", cookie=ada), 404, bad_room,
                       "an upper-case room")
        expect_problem(a.call("POST", f"/rooms/{'r' * 65}/messages", {"text": "x"}, cookie=ada),
                       404, bad_room, "a room's name of 65")
        only = 'a message is {"text": "…"} and nothing else'
        for body, detail, what in (
                ({"text": "x", "to": "bob"}, only, "another member"),
                ({"text": 5}, only, "a text that is a number"),
                (["x"], only, "an array"),
                ({"text": ""}, "a message's text is not empty", "an empty text")):
            expect_problem(a.call("POST", "/rooms/r/messages", body, cookie=ada), 400, detail, what)
        r = a.call("POST", "/rooms/r/messages", b'{"text": ', cookie=ada)
        eq((r.status, r.header("Content-Type")), (400, PROBLEM), "a body that is not JSON")
        expect_problem(a.call("POST", "/rooms/r/messages", {"text": "é" * 11}, cookie=ada), 413,
                       "a message's text is longer than M0_ROOMS_MAX_TEXT characters",
                       "11 characters past 10")
        m, _ = a.post(ada, "r", "é" * 10)  # ten characters, twenty bytes: taken
        r = a.call("POST", "/rooms/r/messages", {"text": "x" * 200}, cookie=ada)
        eq((r.status, r.header("Content-Type")), (413, PROBLEM), "a body past 10 * 12 + 64 bytes")
        r = a.call("POST", "/rooms/r/messages", b"text=x", ctype=FORM, cookie=ada)
        eq((r.status, json.loads(r.body)["detail"]),
           (415, "the body must be application/json or a +json type"), "a form where JSON goes")
        for q, what in (("?limit=0", "limit 0"), ("?limit=101", "limit past M0_ROOMS_MAX_PAGE"),
                        ("?before=x", "before not a number"), ("?before=-1", "a sign")):
            r = a.call("GET", f"/rooms/r/messages{q}", cookie=ada)
            eq((r.status, r.header("Content-Type")), (400, PROBLEM), what)
        expect_problem(a.call("GET", "/rooms/r/messages?before=5&after=1", cookie=ada), 400,
                       "give before or after, not both", "before and after")
        expect_problem(a.call("POST", "/login", b"name=Ada%21", ctype=FORM), 400,
                       "a name is 1 to 32 of a-z, 0-9, _ and -", "a name that cannot be one")
        r = a.call("POST", "/login", b"nom=ada", ctype=FORM)
        eq((r.status, r.header("Content-Type"), r.header("Set-Cookie")), (400, PROBLEM, None),
           "a login without a name")
        r = a.call("POST", "/login", {"name": "ada"})
        eq((r.status, r.header("Set-Cookie")), (415, None), "a login in JSON")
        eq(json.loads(a.call("GET", "/rooms/r/messages", cookie=ada).body)["messages"], [m],
           "nothing refused was stored")


def test_WS6_websocket_and_event_stream_follow_and_post():
    """A room followed by WebSocket and by event stream: a POST and a text message over the
    WebSocket each come to both, with the same event id and the message's exact bytes; a bad
    message over the WebSocket is answered with a problem message and changes nothing; a
    reconnect with last_event_id gets what it missed then the live ones, none twice; after
    logout, a post over the WebSocket is closed 1008."""
    async def run(a):
        ada, bob = a.login("ada"), a.login("bob")
        conn = a.s.connect()
        r = open_stream(conn, "/rooms/lobby/events", [("Cookie", f"rooms_session={bob}")])
        eq((r.status, r.header("Content-Type")), (200, "text/event-stream"), "the event stream")
        sse = SSEReader(conn)
        eq(sse.expect().raw + sse.expect().raw, OPEN_BLOCKS, "the stream's first bytes")
        hdr = {"Cookie": f"rooms_session={ada}"}
        async with websockets.connect(f"{a.base}/rooms/lobby/ws", extra_headers=hdr) as ws:
            m1, e1 = a.post(bob, "lobby", "over HTTP")
            eq(json.loads(await ws.recv()), bus_message(e1, "lobby", m1), "the POST, by WebSocket")
            await ws.send(json.dumps({"text": "over the WebSocket"}))
            got = json.loads(await ws.recv())
            hist = json.loads(a.call("GET", "/rooms/lobby/messages", cookie=ada).body)["messages"]
            m2 = hist[-1]
            eq((m2["from"], m2["text"], m2["id"]), ("ada", "over the WebSocket", m1["id"] + 1),
               "the WebSocket's message, stored")
            eq(got, bus_message(got["id"], "lobby", m2), "the WebSocket's message, back to it")
            e2 = got["id"]
            check(e2 > e1, f"event ids rise: {e1}, {e2}")
            for what, e, m in (("the POST", e1, m1), ("the WebSocket's", e2, m2)):
                f = sse.expect()
                eq(f.raw, b"id: %d\nevent: message\ndata: %s\n\n" % (e, compact(m)),
                   f"{what}, by event stream")
            # refusals over the WebSocket: a problem message; nothing stored, nothing published
            for sent, status, detail in (
                    ("not json", 400, 'a message is JSON text: {"text": "…"}'),
                    (json.dumps({"text": ""}), 400, "a message's text is not empty"),
                    (json.dumps({"text": "x" * 2001}), 413,
                     "a message's text is longer than M0_ROOMS_MAX_TEXT characters"),
                    (b'{"text": "binary"}', 415, 'a message is JSON text: {"text": "…"}')):
                await ws.send(sent)
                p = json.loads(await ws.recv())
                eq((p["id"], p["channel"], p["event"]), (None, "room:lobby", "problem"),
                   f"the refusal of {sent[:20]!r}")
                eq(json.loads(p["data"]), {"type": "about:blank", "title": TITLES[status],
                                           "status": status, "detail": detail},
                   f"the problem of {sent[:20]!r}")
            eq(sse.next(0.3), None, "a refusal publishes nothing")
        # a reconnect after the first: the second, then the live ones, none twice
        async with websockets.connect(f"{a.base}/rooms/lobby/ws?last_event_id={e1}",
                                      extra_headers=hdr) as ws:
            eq(json.loads(await ws.recv()), bus_message(e2, "lobby", m2), "the one it missed")
            m3, e3 = a.post(bob, "lobby", "live")
            eq(json.loads(await ws.recv()), bus_message(e3, "lobby", m3), "then the live one")
            await ws.send(json.dumps({"text": "second"}))
            m4 = json.loads(json.loads(await ws.recv())["data"])
            eq((m4["id"], m4["text"]), (m3["id"] + 1, "second"), "a post after the resume")
            # another room's messages do not come here
            a.post(bob, "other", "elsewhere")
            m5, e5 = a.post(bob, "lobby", "after")
            eq(json.loads(await ws.recv()), bus_message(e5, "lobby", m5), "only its room's")
            # logout ends the WebSocket's right to post: a post after it is closed 1008
            eq(a.call("POST", "/logout", cookie=ada).status, 204, "ada's logout")
            await ws.send(json.dumps({"text": "too late"}))
            try:
                await ws.recv()
                raise AssertionError("not closed after the logout")
            except websockets.ConnectionClosed as e:
                eq((e.rcvd.code, e.rcvd.reason), (1008, "the session ended: log in again"),
                   "the close")
        texts = [m["text"] for m in
                 json.loads(a.call("GET", "/rooms/lobby/messages", cookie=bob).body)["messages"]]
        eq(texts, ["over HTTP", "over the WebSocket", "live", "second", "after"],
           "the room's history: nothing twice, nothing refused")
        conn.close()

    with Rooms() as a:
        asyncio.run(run(a))


def test_WS6_backfill_from_sqlite():
    """With M0_REPLAY_PER_CHANNEL=2 the bus keeps a room's last two events: an event stream
    whose Last-Event-ID is the first of five gets the m0-gap event, the second and third from
    SQLite by the app's backfill (no id: its Last-Event-ID stays), then the kept fourth and
    fifth with their ids, then the live ones (AP2). A WebSocket with the same last_event_id gets
    the same (D234): the m0-gap message, the messages between from SQLite (id null), then the
    kept ones with their ids, none twice; ?after= reads the same hole."""
    with Rooms(M0_REPLAY_PER_CHANNEL="2") as a:
        ada = a.login("ada")
        got = [a.post(ada, "r", f"m{i}") for i in range(5)]
        (m, e) = zip(*got)
        conn = a.s.connect()
        r = open_stream(conn, "/rooms/r/events", [("Cookie", f"rooms_session={ada}"),
                                                   ("Last-Event-ID", str(e[0]))])
        eq(r.status, 200, "the stream")
        sse = SSEReader(conn)
        want = OPEN_BLOCKS + (b'event: m0-gap\ndata: {"channel":"room:r","oldest":%d}\n\n' % e[3])
        want += b"".join(b"event: message\ndata: %s\n\n" % compact(x) for x in m[1:3])
        want += b"".join(b"id: %d\nevent: message\ndata: %s\n\n" % (i, compact(x))
                         for i, x in zip(e[3:], m[3:]))
        raw = b""
        while len(raw) < len(want):
            raw += sse.expect().raw
        eq(raw, want, "gap, backfill, kept")
        m6, e6 = a.post(ada, "r", "live")
        eq(sse.expect().raw, b"id: %d\nevent: message\ndata: %s\n\n" % (e6, compact(m6)), "live")
        eq(sse.next(0.3), None, "nothing twice")
        conn.close()

        async def ws_resume():
            async with websockets.connect(f"{a.base}/rooms/r/ws?last_event_id={e[0]}",
                                          extra_headers={"Cookie": f"rooms_session={ada}"}) as ws:
                eq(json.loads(await ws.recv()), {"id": None, "channel": "room:r", "event": "m0-gap",
                                                 "data": '{"channel":"room:r","oldest":%d}' % e[4]},
                   "the WebSocket's gap")
                for x in m[1:4]:
                    eq(json.loads(await ws.recv()), bus_message(None, "r", x),
                       "backfilled from SQLite, before the kept ones")
                eq(json.loads(await ws.recv()), bus_message(e[4], "r", m[4]), "kept")
                eq(json.loads(await ws.recv()), bus_message(e6, "r", m6), "kept")
                m7, e7 = a.post(ada, "r", "live again")
                eq(json.loads(await ws.recv()), bus_message(e7, "r", m7), "then live, none twice")
            h = a.call("GET", f"/rooms/r/messages?after={m[0]['id']}&limit=3", cookie=ada)
            eq(json.loads(h.body)["messages"], list(m[1:4]), "the hole, by ?after=")

        asyncio.run(ws_resume())


def test_WS6_cors_credentials_and_websocket_origins():
    """M0_ROOMS_ORIGINS: a listed origin's preflight and answers carry the origin and
    Access-Control-Allow-Credentials: true (the session cookie goes with them), another
    origin's none; the listed origin's WebSocket is 101 and another's 403 before the upgrade.
    Without it: no CORS, and a WebSocket takes its Host's own origin alone."""
    app, evil = "https://chat.example", "https://evil.example"

    async def upgrade(a, cookie, origin):
        try:
            async with websockets.connect(f"{a.base}/rooms/lobby/ws", origin=origin,
                                          extra_headers={"Cookie": f"rooms_session={cookie}"}):
                return 101
        except websockets.InvalidStatusCode as e:
            return e.status_code

    with Rooms(M0_ROOMS_ORIGINS=f"{app} http://localhost:5173") as a:
        ada = a.login("ada")
        r = a.call("OPTIONS", "/rooms/lobby/messages", headers=[
            ("Origin", app), ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "content-type")])
        eq((r.status, r.header_all("Access-Control-Allow-Origin"),
            r.header_all("Access-Control-Allow-Credentials"),
            r.header_all("Access-Control-Allow-Methods"),
            r.header_all("Access-Control-Allow-Headers")),
           (204, [app], ["true"], ["GET, HEAD, POST, OPTIONS"], ["content-type"]),
           "the listed origin's preflight")
        r = a.call("POST", "/rooms/lobby/messages", {"text": "x"}, cookie=ada,
                   headers=[("Origin", app)])
        eq((r.status, r.header_all("Access-Control-Allow-Origin"),
            r.header_all("Access-Control-Allow-Credentials"),
            r.header_all("Access-Control-Expose-Headers")),
           (201, [app], ["true"], ["X-Event-Id"]), "the listed origin's POST with its cookie")
        r = a.call("POST", "/login", b"name=ada", ctype=FORM, headers=[("Origin", app)])
        eq((r.status, r.header_all("Access-Control-Allow-Origin"),
            r.header_all("Access-Control-Allow-Credentials")), (200, [app], ["true"]),
           "a login from the listed origin")
        r = a.call("OPTIONS", "/rooms/lobby/messages", headers=[
            ("Origin", evil), ("Access-Control-Request-Method", "POST")])
        eq((r.status, r.header_all("Access-Control-Allow-Origin"),
            r.header_all("Access-Control-Allow-Credentials")), (204, [], []),
           "another origin's preflight")
        r = a.call("GET", "/rooms/lobby/messages", cookie=ada, headers=[("Origin", evil)])
        eq((r.status, r.header_all("Access-Control-Allow-Origin")), (200, []),
           "another origin's GET: no CORS line, so its page cannot read the answer")
        eq(asyncio.run(upgrade(a, ada, app)), 101, "the listed origin's WebSocket")
        eq(asyncio.run(upgrade(a, ada, evil)), 403, "another origin's WebSocket")
        own = f"http://{a.s.tcp_addr[0]}:{a.s.tcp_addr[1]}"
        eq(asyncio.run(upgrade(a, ada, own)), 403, "the Host's own, when origins are listed")
    with Rooms() as a:
        ada = a.login("ada")
        r = a.call("GET", "/rooms/lobby/messages", cookie=ada, headers=[("Origin", app)])
        eq((r.status, r.header_all("Access-Control-Allow-Origin")), (200, []), "no CORS")
        own = f"http://{a.s.tcp_addr[0]}:{a.s.tcp_addr[1]}"
        eq(asyncio.run(upgrade(a, ada, own)), 101, "the Host's own origin")
        eq(asyncio.run(upgrade(a, ada, app)), 403, "a foreign origin (cross-site hijacking)")


def test_WS6_knobs_refused():
    """A knob out of its range, '*' among the origins (any site would act as the user) and too
    many origins refuse the start (78), each naming what to change; --doctor says where the
    rooms are."""
    d = tempfile.mkdtemp(prefix="m0rooms-")
    try:
        db = os.path.join(d, "rooms.db")
        for env, finding in (
                ({"M0_ROOMS_MAX_TEXT": "0"}, "M0_ROOMS_MAX_TEXT='0' is not a number from 1 to 65536"),
                ({"M0_ROOMS_KEEP": "ten"}, "M0_ROOMS_KEEP='ten' is not a number"),
                ({"M0_ROOMS_USER_POSTS": "0"},
                 "M0_ROOMS_USER_POSTS='0' is not a number from 1 to 1000000"),
                ({"M0_ROOMS_SECURE_COOKIE": "2"}, "M0_ROOMS_SECURE_COOKIE='2'"),
                ({"M0_ROOMS_ORIGINS": "*"}, "M0_ROOMS_ORIGINS names '*'"),
                ({"M0_ROOMS_ORIGINS": " ".join(f"https://o{i}.example" for i in range(17))},
                 "M0_ROOMS_ORIGINS names more than 16 origins")):
            rc, _, err = run_app("rooms", env={"M0_ROOMS_DB": db, **env})
            eq(rc, 78, f"refused: {env}")
            check(finding in err, f"the refusal names it: {err[-400:]}")
        rc, out, err = run_app("rooms", args=["--doctor"], env={"M0_ROOMS_DB": db})
        check(f"rooms in {db}" in out + err, f"the doctor: {(out + err)[-400:]}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_WS6_sigterm_closes_1001_and_the_rooms_survive():
    """SIGTERM closes a room's WebSocket 1001 and exits 0 (WS4); started again on the same
    state directory ($STATE_DIRECTORY/rooms.db), the session and the history are there, and a
    WebSocket resumed with the last id it saw gets what was posted since, none twice."""
    state = tempfile.mkdtemp(prefix="m0rooms-")
    try:
        with Rooms(state) as a:
            ada = a.login("ada")
            m1, e1 = a.post(ada, "lobby", "before the stop")

            async def stop():
                async with websockets.connect(f"{a.base}/rooms/lobby/ws?last_event_id={e1 - 1}",
                                              extra_headers={"Cookie": f"rooms_session={ada}"}) as ws:
                    eq(json.loads(await ws.recv()), bus_message(e1, "lobby", m1), "replayed")
                    a.s.send_signal(signal.SIGTERM)
                    try:
                        await ws.recv()
                        raise AssertionError("no close at the drain")
                    except websockets.ConnectionClosed as e:
                        eq(e.rcvd.code, 1001, "the drain's close")

            asyncio.run(stop())
            eq(a.s.wait_exit(10), 0, "the exit status")
        check(os.path.exists(os.path.join(state, "rooms.db")), "the database in STATE_DIRECTORY")
        with Rooms(state) as a:
            m2, e2 = a.post(ada, "lobby", "after the restart")
            eq(m2["id"], m1["id"] + 1, "the session and the ids survived")
            r = a.call("GET", "/rooms/lobby/messages", cookie=ada)
            eq(json.loads(r.body)["messages"], [m1, m2], "the history survived")

            async def resume():
                async with websockets.connect(f"{a.base}/rooms/lobby/ws?last_event_id={e1}",
                                              extra_headers={"Cookie": f"rooms_session={ada}"}) as ws:
                    eq(json.loads(await ws.recv()), bus_message(e2, "lobby", m2), "only the new one")
                    m3, e3 = a.post(ada, "lobby", "live")
                    eq(json.loads(await ws.recv()), bus_message(e3, "lobby", m3), "then live")

            asyncio.run(resume())
    finally:
        shutil.rmtree(state, ignore_errors=True)


def test_WS6_bounds():
    """M0_ROOMS_MAX_SESSIONS: a login past it is 503 until a logout makes room;
    M0_ROOMS_MAX_ROOMS: a first message in one room more is 507 and stores nothing;
    M0_ROOMS_KEEP: a room keeps its newest messages, the oldest go."""
    with Rooms(M0_ROOMS_MAX_SESSIONS="1", M0_ROOMS_MAX_ROOMS="1", M0_ROOMS_KEEP="2") as a:
        ada = a.login("ada")
        r = a.call("POST", "/login", b"name=bob", ctype=FORM)
        expect_problem(r, 503, "M0_ROOMS_MAX_SESSIONS sessions are open: try later",
                       "a second session")
        eq(r.header("Set-Cookie"), None, "no cookie with the 503")
        msgs = [a.post(ada, "lobby", f"m{i}")[0] for i in range(3)]
        r = a.call("GET", "/rooms/lobby/messages", cookie=ada)
        eq(json.loads(r.body)["messages"], msgs[1:], "the newest two kept")
        expect_problem(a.call("POST", "/rooms/other/messages", {"text": "x"}, cookie=ada), 507,
                       "M0_ROOMS_MAX_ROOMS rooms exist: post in one of them", "a second room")
        eq(json.loads(a.call("GET", "/rooms/other/messages", cookie=ada).body)["messages"], [],
           "nothing stored in it")
        eq(a.call("POST", "/logout", cookie=ada).status, 204, "logout")
        a.login("bob")


def test_WS6_user_posts_bound():
    """M0_ROOMS_USER_POSTS: a user's messages of the last minute, in every room and by either
    way in, are bounded; past it a POST is 429 with Retry-After and a WebSocket's message a 429
    problem, and nothing is stored; another user still posts."""
    limit = "M0_ROOMS_USER_POSTS messages a minute at most: post again in a minute"
    with Rooms(M0_ROOMS_USER_POSTS="3") as a:
        ada, bob = a.login("ada"), a.login("bob")
        kept = [a.post(ada, "lobby", "one")[0], a.post(ada, "other", "two")[0]]

        async def third_and_fourth():
            async with websockets.connect(f"{a.base}/rooms/lobby/ws",
                                          extra_headers={"Cookie": f"rooms_session={ada}"}) as ws:
                await ws.send(json.dumps({"text": "three"}))
                got = json.loads(await ws.recv())
                kept.append(json.loads(got["data"]))
                await ws.send(json.dumps({"text": "four"}))
                p = json.loads(await ws.recv())
                eq((p["id"], p["channel"], p["event"]), (None, "room:lobby", "problem"),
                   "the fourth, by WebSocket")
                eq(json.loads(p["data"]), {"type": "about:blank", "title": TITLES[429],
                                           "status": 429, "detail": limit}, "its problem")
        asyncio.run(third_and_fourth())
        eq(kept[2]["text"], "three", "the third, stored")
        r = a.call("POST", "/rooms/lobby/messages", {"text": "five"}, cookie=ada)
        expect_problem(r, 429, limit, "the fifth, by POST")
        eq(r.header("Retry-After"), "60", "when to post again")
        m, _ = a.post(bob, "lobby", "bob's")
        eq(json.loads(a.call("GET", "/rooms/lobby/messages", cookie=bob).body)["messages"],
           [kept[0], kept[2], m], "the lobby holds what was taken, nothing refused")
