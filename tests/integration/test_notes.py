# SPDX-License-Identifier: MIT
"""The notes app (SPEC A4, R2, R3): refusals without its secrets, its state directory or with
more than one handler; a password login whose session cookie is signed with HMAC-SHA256 and
checked on every notes route; strict JSON bodies and ids; notes that survive SIGKILL and
SIGTERM restarts. doc/notes.md is the contract these tests hold it to."""

import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import stat
import tempfile
import time
import urllib.parse

from m0test import Server, check, eq, run_app

KEY = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
PASSWORD = "correct horse battery staple"
COOKIE_RX = re.compile(r"m0notes=(\d+)\.([0-9a-f]{32})\.([0-9a-f]{64})")

UNAUTHORIZED = b'{"error":"login required"}\n'
NO_SUCH_NOTE = b'{"error":"no such note"}\n'
TOO_BIG = b'{"error":"a title holds at most 200 bytes, a body at most 65536"}\n'
NOT_A_NOTE = b'{"error":"the body must be {\\"title\\":string,\\"body\\":string}"}\n'
JSON_CT = [("Content-Type", "application/json")]
LOGIN_FORM = b'{"error":"the body must be password=<form-encoded>"}\n'
CLEARED = "m0notes=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
FULL = b'{"error":"no room for this note"}\n'


# ---- helpers (the harness's Server and Conn, plus what notes needs) ----


class StateDir:
    """A temporary directory for the notes, kept across restarts of the app."""

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="m0notes-")
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)
        return False


def env(state_dir, **extra):
    e = {"M0_NOTES_KEY": KEY, "M0_NOTES_PASSWORD": PASSWORD, "M0_NOTES_DIR": state_dir}
    for k, v in extra.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    return e


def start(state_dir, **extra):
    s = Server("notes", env=env(state_dir, **extra))
    s.wait_ready()
    return s


def refusal(environ, args=()):
    """Run notes to its refusal: (exit status, the one `m0: ` line)."""
    rc, out, err = run_app("notes", args, environ)
    lines = [ln for ln in err.split("\n") if ln.startswith("m0: ")]
    eq(len(lines), 1, f"refusal lines in {err!r}")
    eq(out, "", "stdout")
    return rc, lines[0]


def mac(payload, generation=0, key=KEY):
    msg = f"session:{generation}:{payload}".encode()
    return hmac.new(bytes.fromhex(key), msg, hashlib.sha256).hexdigest()


def craft(expiry, nonce="5a" * 16, generation=0, key=KEY):
    """A session cookie value signed here, with Python's own HMAC."""
    payload = f"{expiry}.{nonce}"
    return f"{payload}.{mac(payload, generation, key)}"


def cookie_hdr(value):
    return [("Cookie", f"m0notes={value}")]


def login(c, password=PASSWORD):
    body = urllib.parse.urlencode({"password": password}).encode()
    return c.exchange(
        "POST", "/login", [("Content-Type", "application/x-www-form-urlencoded")], body
    )


def session(s):
    """Log in on a fresh connection; returns the cookie's value."""
    r = login(s.connect())
    eq(r.status, 204, f"login status; body {r.body!r}")
    m = COOKIE_RX.match(r.header("Set-Cookie"))
    check(m, f"Set-Cookie {r.header('Set-Cookie')!r}")
    return m.group(0).split("=", 1)[1]


def call(c, method, path, cookie=None, body=None, headers=None):
    hs = list(headers or [])
    if cookie is not None:
        hs += cookie_hdr(cookie)
    if body is not None and not any(k.lower() == "content-type" for k, _ in hs):
        hs += JSON_CT
    return c.exchange(method, path, hs, body)


def note_body(title, body):
    return json.dumps({"title": title, "body": body}).encode()


def jstr(b):
    """A byte string as notes writes it in JSON (m0_res_json_string's escaping)."""
    out = bytearray(b'"')
    for ch in b:
        if ch == 0x22:
            out += b'\\"'
        elif ch == 0x5C:
            out += b"\\\\"
        elif ch == 0x0A:
            out += b"\\n"
        elif ch == 0x0D:
            out += b"\\r"
        elif ch == 0x09:
            out += b"\\t"
        elif ch < 0x20:
            out += b"\\u%04x" % ch
        else:
            out.append(ch)
    return bytes(out + b'"')


def note_json(id_, title, body, created, updated):
    return (
        b'{"id":%d,"title":%s,"body":%s,"created":%d,"updated":%d}\n'
        % (id_, jstr(title), jstr(body), created, updated)
    )


def list_json(items):
    """items: [(id, title bytes, created)]."""
    inner = b",".join(b'{"id":%d,"title":%s,"created":%d}' % (i, jstr(t), c) for i, t, c in items)
    return b'{"notes":[' + inner + b"]}\n"


def json_answer(r, status, body, what):
    """Exact status, body, Content-Type, Cache-Control and Content-Length of a notes answer."""
    eq(r.status, status, f"{what}: status (body {r.body!r})")
    eq(r.body, body, f"{what}: body")
    eq(r.header("Content-Type"), "application/json", f"{what}: Content-Type")
    eq(r.header("Cache-Control"), "no-store", f"{what}: Cache-Control")
    eq(r.header("X-Content-Type-Options"), "nosniff", f"{what}: X-Content-Type-Options")
    eq(r.header("Content-Length"), str(len(body)), f"{what}: Content-Length")


def unauthorized(r, what):
    json_answer(r, 401, UNAUTHORIZED, what)
    eq(r.header_all("Set-Cookie"), [], f"{what}: Set-Cookie")


def create(c, cookie, title, body):
    """POST a note; checks the 201 exactly and returns (id, created)."""
    t0 = int(time.time())
    r = call(c, "POST", "/notes", cookie, note_body(title, body))
    t1 = int(time.time())
    eq(r.status, 201, f"create {title!r}: status (body {r.body!r})")
    got = json.loads(r.body)
    check(t0 <= got["created"] <= t1, f"created {got['created']} outside [{t0}, {t1}]")
    tb, bb = title.encode(), body.encode()
    json_answer(r, 201, note_json(got["id"], tb, bb, got["created"], got["created"]), "create")
    eq(r.header("Location"), f"/notes/{got['id']}", "Location")
    return got["id"], got["created"]


# ---- refusals (R1, R2, R3, C4) ----


def test_A4_refused_without_key():
    with StateDir() as d:
        rc, line = refusal(env(d, M0_NOTES_KEY=None))
        eq(rc, 78, "exit status")
        eq(
            line,
            "m0: application: M0_NOTES_KEY is not set: sessions are signed with it "
            "(set M0_NOTES_KEY to 64 hex digits (32 random bytes), e.g. `openssl rand -hex 32`)",
            "refusal line",
        )


def test_A4_refused_with_a_weak_or_malformed_key():
    """Too short, odd, not hex, too long: each refused, the key's bytes never printed."""
    with StateDir() as d:
        for key in ("abcdef", KEY[:-1], "zz" + KEY[2:], KEY * 2 + "00", ""):
            rc, line = refusal(env(d, M0_NOTES_KEY=key))
            eq(rc, 78, f"exit status for a key of {len(key)} characters")
            eq(
                line,
                f"m0: application: M0_NOTES_KEY ({len(key)} characters) is not 64 to 128 hex "
                "digits (set M0_NOTES_KEY to 64 hex digits (32 random bytes), e.g. "
                "`openssl rand -hex 32`)",
                "refusal line",
            )
        # 128 hex digits (64 bytes) is the longest key taken.
        with Server("notes", env=env(d, M0_NOTES_KEY=KEY * 2)) as s:
            s.wait_ready()


def test_A4_refused_without_password():
    with StateDir() as d:
        for value, what in ((None, "not set"), ("", "empty")):
            rc, line = refusal(env(d, M0_NOTES_PASSWORD=value))
            eq(rc, 78, f"exit status, password {what}")
            eq(
                line,
                f"m0: application: M0_NOTES_PASSWORD is {what} "
                "(set M0_NOTES_PASSWORD to the password /login will take)",
                "refusal line",
            )


def test_A4_refused_without_a_writable_state_directory():
    fix = "(run under systemd with StateDirectory= or set M0_NOTES_DIR to a writable directory)"
    with StateDir() as d:
        rc, line = refusal(env(d, M0_NOTES_DIR=None))
        eq(rc, 78, "exit status without a directory")
        eq(
            line,
            "m0: application: no state directory: neither M0_NOTES_DIR nor STATE_DIRECTORY "
            f"is set {fix}",
            "refusal line",
        )
        missing = os.path.join(d, "missing")
        rc, line = refusal(env(d, M0_NOTES_DIR=missing))
        eq(rc, 78, "exit status for a missing directory")
        eq(line, f"m0: application: M0_NOTES_DIR='{missing}': No such file or directory {fix}", "line")
        a_file = os.path.join(d, "file")
        open(a_file, "w").close()
        rc, line = refusal(env(d, M0_NOTES_DIR=a_file))
        eq(rc, 78, "exit status for a file")
        eq(line, f"m0: application: M0_NOTES_DIR='{a_file}' is not a directory {fix}", "line")
        rc, line = refusal(env(d, M0_NOTES_DIR=""))
        eq(rc, 78, "exit status for an empty M0_NOTES_DIR")
        eq(line, f"m0: application: M0_NOTES_DIR is empty {fix}", "line")
        rc, line = refusal(env(d, M0_NOTES_DIR=None, STATE_DIRECTORY=f"{missing}:{d}"))
        eq(rc, 78, "exit status for a missing first STATE_DIRECTORY path")
        eq(
            line,
            f"m0: application: STATE_DIRECTORY='{missing}': No such file or directory {fix}",
            "refusal line",
        )


def test_A4_refused_with_malformed_knobs():
    with StateDir() as d:
        for var, val, rng, unit, default in (
            ("M0_NOTES_SESSION_S", "abc", (1, 2592000), "seconds", 3600),
            ("M0_NOTES_SESSION_S", "0", (1, 2592000), "seconds", 3600),
            ("M0_NOTES_MAX_NOTES", "-1", (1, 100000), "a count", 1000),
            ("M0_NOTES_MAX_BYTES", "1k", (1, 268435456), "bytes", 8388608),
            ("M0_NOTES_MAX_REVOKED", "", (1, 65536), "a count", 1024),
        ):
            rc, line = refusal(env(d, **{var: val}))
            eq(rc, 78, f"exit status for {var}={val!r}")
            eq(
                line,
                f"m0: application: {var}='{val}' is not a whole number from {rng[0]} to {rng[1]} "
                f"(set {var} to {unit}, {rng[0]} to {rng[1]}, or unset it for {default})",
                "refusal line",
            )
        rc, line = refusal(env(d, M0_NOTES_SECURE_COOKIE="maybe"))
        eq(rc, 78, "exit status for M0_NOTES_SECURE_COOKIE")
        eq(
            line,
            "m0: application: M0_NOTES_SECURE_COOKIE='maybe' is not on or off "
            "(set M0_NOTES_SECURE_COOKIE to on or off)",
            "refusal line",
        )


def test_R3_threads_2_refused_by_the_host():
    with StateDir() as d:
        with Server("notes", env=env(d, M0_THREADS=2)) as s:
            eq(s.wait_exit(10), 78, "exit status")
            lines = [ln for ln in s.log_lines() if ln.startswith("m0: ")]
            eq(
                lines,
                [
                    "m0: threads-vs-application: notes serves at most 1 handler and "
                    "M0_THREADS=2 asks for 2 loops (set --threads (M0_THREADS) to the app's "
                    "max_threads or fewer)"
                ],
                "refusal lines",
            )
            check("READY=1" not in s.notify_lines(), "READY=1 was sent")
        eq(os.listdir(d), [], "files in the state directory")


def test_R3_blocking_threads_1_refused_by_the_host():
    with StateDir() as d:
        with Server("notes", env=env(d, M0_BLOCKING_THREADS=1)) as s:
            eq(s.wait_exit(10), 78, "exit status")
            lines = [ln for ln in s.log_lines() if ln.startswith("m0: ")]
            eq(
                lines,
                [
                    "m0: blocking-vs-application: notes serves at most 1 handler and "
                    "M0_BLOCKING_THREADS=1 needs 2 (set --blocking-threads (M0_BLOCKING_THREADS) "
                    "to 0)"
                ],
                "refusal lines",
            )
            check("READY=1" not in s.notify_lines(), "READY=1 was sent")


def test_A4_doctor_reports_the_app_check():
    with StateDir() as d:
        rc, out, err = run_app("notes", ["--doctor"], env(d))
        eq(rc, 0, f"doctor exit status; stderr {err!r}")
        doc = json.loads(out.strip().split("\n")[-1])
        app = [c for c in doc["checks"] if c["name"] == "application"]
        eq(
            app,
            [
                {
                    "name": "application",
                    "ok": True,
                    "detail": f"notes in {d}; sessions of 3600 s; SHA-256 self-test passed",
                    "fix": "",
                }
            ],
            "the application check",
        )
        check(KEY not in out and PASSWORD not in out, "the doctor printed a secret")


# ---- no session, no data ----


def test_A4_every_notes_route_needs_a_session():
    with StateDir() as d, start(d) as s:
        c = s.connect()
        # One note exists, so a leak would have something to show.
        cookie = session(s)
        create(c, cookie, "secret", "the body")
        for method, path, body in (
            ("GET", "/notes", None),
            ("HEAD", "/notes", None),
            ("POST", "/notes", note_body("t", "b")),
            ("PATCH", "/notes", None),
            ("GET", "/notes/1", None),
            ("PUT", "/notes/1", note_body("t", "b")),
            ("DELETE", "/notes/1", None),
            ("GET", "/notes/abc", None),
            ("GET", "/notes/999999", None),
            ("OPTIONS", "/notes/1", None),
        ):
            r = call(c, method, path, None, body)
            what = f"{method} {path} without a cookie"
            if method == "HEAD":
                eq(r.status, 401, f"{what}: status")
                eq(r.header("Content-Length"), str(len(UNAUTHORIZED)), f"{what}: Content-Length")
                eq(r.body, b"", f"{what}: body")
            else:
                unauthorized(r, what)
        # The note is untouched.
        r = call(c, "GET", "/notes/1", cookie)
        eq(json.loads(r.body)["title"], "secret", "the note after the refusals")


def test_A4_wrong_password_401_without_cookie():
    with StateDir() as d, start(d) as s:
        c = s.connect()
        for pw in ("wrong", PASSWORD + "x", PASSWORD[:-1], "", PASSWORD.upper()):
            r = login(c, pw)
            json_answer(r, 401, b'{"error":"wrong password"}\n', f"login with {pw!r}")
            eq(r.header_all("Set-Cookie"), [], f"Set-Cookie after {pw!r}")
        for body in (b"", b"pass=x", b"password", b"password=a&password=b", b"password=%zz",
                     b"password=%4", b"password=a%00b"):
            r = c.exchange("POST", "/login", None, body)
            json_answer(r, 400, LOGIN_FORM, f"login body {body!r}")
            eq(r.header_all("Set-Cookie"), [], f"Set-Cookie after {body!r}")
        r = c.exchange("POST", "/login", None, b"password=" + b"a" * 4096)
        json_answer(r, 413, b'{"error":"the login body is at most 4096 bytes"}\n', "long login")
        eq(c.get("/login").status, 405, "GET /login")
        # Failed logins are counted in the log, at 1, 2, 4, ...
        s.wait_log(r"^notes: wrong password at /login \(4 so far\)$")


def test_A4_login_sets_a_signed_cookie():
    with StateDir() as d, start(d) as s:
        c = s.connect()
        t0 = int(time.time())
        # Form decoding: '+' is a space, %XX a byte; other fields are ignored.
        r = c.exchange(
            "POST", "/login", None, b"user=me&password=correct+horse%20battery%20staple&x"
        )
        t1 = int(time.time())
        eq(r.status, 204, f"login status; body {r.body!r}")
        eq(r.body, b"", "login body")
        eq(r.header("Cache-Control"), "no-store", "login Cache-Control")
        cookies = r.header_all("Set-Cookie")
        eq(len(cookies), 1, f"Set-Cookie fields: {cookies}")
        m = re.fullmatch(
            r"m0notes=(\d+)\.([0-9a-f]{32})\.([0-9a-f]{64}); HttpOnly; SameSite=Strict; "
            r"Path=/; Max-Age=3600",
            cookies[0],
        )
        check(m, f"Set-Cookie {cookies[0]!r}")
        expiry, nonce, got_mac = int(m.group(1)), m.group(2), m.group(3)
        check(t0 + 3600 <= expiry <= t1 + 3600, f"expiry {expiry} not 3600 s after [{t0}, {t1}]")
        # The MAC is HMAC-SHA256 under the key, as Python's hmac computes it.
        eq(got_mac, mac(f"{expiry}.{nonce}"), "the cookie's MAC")
        # Two logins, two sessions.
        eq(session(s) != session(s), True, "two logins got different cookies")
        r = call(c, "GET", "/notes", f"{expiry}.{nonce}.{got_mac}")
        json_answer(r, 200, b'{"notes":[]}\n', "GET /notes with the session")


def test_A4_secure_cookie_knob_and_session_length():
    with StateDir() as d, start(d, M0_NOTES_SECURE_COOKIE="on", M0_NOTES_SESSION_S="60") as s:
        r = login(s.connect())
        eq(r.status, 204, "login")
        check(
            re.fullmatch(
                r"m0notes=\d+\.[0-9a-f]{32}\.[0-9a-f]{64}; HttpOnly; SameSite=Strict; Path=/; "
                r"Max-Age=60; Secure",
                r.header("Set-Cookie"),
            ),
            f"Set-Cookie {r.header('Set-Cookie')!r}",
        )


def test_A4_forged_and_tampered_cookies_401():
    with StateDir() as d, start(d) as s:
        c = s.connect()
        good = session(s)
        eq(call(c, "GET", "/notes", good).status, 200, "the genuine cookie")
        expiry, nonce, m = good.split(".")
        flip = lambda ch: "0" if ch != "0" else "1"  # noqa: E731
        now = int(time.time())
        bad = {
            "one MAC character flipped": f"{expiry}.{nonce}.{m[:10]}{flip(m[10])}{m[11:]}",
            "last MAC character flipped": f"{expiry}.{nonce}.{m[:-1]}{flip(m[-1])}",
            "expiry moved, MAC kept": f"{int(expiry) + 1}.{nonce}.{m}",
            "expiry moved back, MAC kept": f"{int(expiry) - 100}.{nonce}.{m}",
            "nonce changed, MAC kept": f"{expiry}.{flip(nonce[0])}{nonce[1:]}.{m}",
            "MAC upper-cased": f"{expiry}.{nonce}.{m.upper()}",
            "MAC cut short": f"{expiry}.{nonce}.{m[:-2]}",
            "MAC made longer": f"{expiry}.{nonce}.{m}00",
            "quoted": f'"{good}"',
            "leading zero in the expiry": "0" + good,
            "empty": "",
            "signed with another key": craft(now + 600, key="ff" * 32),
            "signed for another generation": craft(now + 600, generation=1),
            "expired, validly signed": craft(now - 1),
            "expiring now, validly signed": craft(now),
            "beyond one session, validly signed": craft(now + 3600 + 120),
            "expiry past 2^63, validly signed": craft(10**19),
            "negative expiry, validly signed": craft(-5),
        }
        for what, value in bad.items():
            unauthorized(call(c, "GET", "/notes", value), what)
        # A validly signed cookie made here, not by the app, is a session: the MAC is the
        # whole of the check, so Python's HMAC agreeing with the app's is tested here too.
        json_answer(call(c, "GET", "/notes", craft(now + 600)), 200, b'{"notes":[]}\n', "crafted")
        # The first m0notes cookie is the one read; other cookies around it do not matter.
        r = call(c, "GET", "/notes", None, headers=[("Cookie", f"a=b; m0notes={good}; c=d")])
        eq(r.status, 200, "the session among other cookies")
        r = call(c, "GET", "/notes", None, headers=[("Cookie", f"m0notes=x; m0notes={good}")])
        unauthorized(r, "a bad m0notes cookie before a good one")


def test_A4_session_expires():
    with StateDir() as d, start(d, M0_NOTES_SESSION_S="2") as s:
        c = s.connect()
        cookie = session(s)
        expiry = int(cookie.split(".")[0])
        # A session of 2 s is valid for at least 1 s after the login.
        eq(call(c, "GET", "/notes", cookie).status, 200, "right after the login")
        deadline = time.monotonic() + 5
        while time.time() < expiry and time.monotonic() < deadline:
            time.sleep(0.05)
        unauthorized(call(c, "GET", "/notes", cookie), "after the expiry")


def test_A4_logout_revokes_the_session():
    with StateDir() as d:
        with start(d) as s:
            c = s.connect()
            a, b = session(s), session(s)
            r = call(c, "POST", "/logout", a)
            eq(r.status, 204, "logout status")
            eq(r.body, b"", "logout body")
            eq(r.header_all("Set-Cookie"), [CLEARED], "logout Set-Cookie")
            eq(r.header("Cache-Control"), "no-store", "logout Cache-Control")
            unauthorized(call(c, "GET", "/notes", a), "the cookie after its logout")
            eq(call(c, "GET", "/notes", b).status, 200, "another session after the logout")
            # Logging out again, or without a session, still answers 204 and clears the cookie.
            for cookie in (a, None):
                r = call(c, "POST", "/logout", cookie)
                eq(r.status, 204, f"logout with {cookie!r}")
                eq(r.header("Set-Cookie"), CLEARED, f"Set-Cookie of a logout with {cookie!r}")
            eq(s.stop(), 0, "exit status after SIGTERM")
        # The revocation is on disk: it holds after a restart, and only for that session.
        with open(os.path.join(d, "notes.jsonl"), "rb") as f:
            lines = f.read().split(b"\n")
        eq(lines[0], b'{"m0notes":1,"next_id":1,"generation":0}', "header line")
        exp_a, nonce_a, _ = a.split(".")
        eq(
            lines[1:],
            [b'{"revoked":"%s","expiry":%s}' % (nonce_a.encode(), exp_a.encode()), b""],
            "the revoked session's line",
        )
        with start(d) as s:
            c = s.connect()
            unauthorized(call(c, "GET", "/notes", a), "the logged-out cookie after a restart")
            eq(call(c, "GET", "/notes", b).status, 200, "the other session after a restart")


def test_A4_revocation_bound_ends_every_session():
    """Past M0_NOTES_MAX_REVOKED live revocations, the generation moves: every session ends."""
    with StateDir() as d, start(d, M0_NOTES_MAX_REVOKED="1") as s:
        c = s.connect()
        a, b, other = session(s), session(s), session(s)
        eq(call(c, "POST", "/logout", a).status, 204, "first logout")
        eq(call(c, "GET", "/notes", other).status, 200, "a session after one logout")
        eq(call(c, "POST", "/logout", b).status, 204, "second logout")
        s.wait_log(r"^notes: 1 revoked sessions is the bound \(M0_NOTES_MAX_REVOKED\): every "
                   r"session was ended$")
        for cookie, what in ((a, "a"), (b, "b"), (other, "other")):
            unauthorized(call(c, "GET", "/notes", cookie), f"session {what} after the bump")
        # A cookie of the new generation works; Python signs it with generation 1.
        json_answer(call(c, "GET", "/notes", craft(int(time.time()) + 60, generation=1)), 200,
                    b'{"notes":[]}\n', "generation 1")
        eq(call(c, "GET", "/notes", session(s)).status, 200, "a new login")


# ---- the notes ----


def test_A4_crud_round_trip():
    t2, b2 = 'quote "x" \\ tab\t', "caf\u00e9 \u2603 \U0001F600 \x01"
    with StateDir() as d, start(d) as s:
        c = s.connect()
        cookie = session(s)
        json_answer(call(c, "GET", "/notes", cookie), 200, b'{"notes":[]}\n', "empty list")
        id1, c1 = create(c, cookie, "groceries", "milk\neggs")
        id2, c2 = create(c, cookie, t2, b2)
        eq((id1, id2), (1, 2), "ids")
        r = call(c, "GET", "/notes", cookie)
        json_answer(r, 200, list_json([(1, b"groceries", c1), (2, t2.encode(), c2)]), "list")
        eq(json.loads(r.body)["notes"][1]["title"], t2, "the list read back as JSON")
        two = note_json(2, t2.encode(), b2.encode(), c2, c2)
        json_answer(call(c, "GET", "/notes/2", cookie), 200, two, "GET /notes/2")
        eq(json.loads(two)["body"], b2, "the note read back as JSON")
        # HEAD: the GET's head, no body.
        r = c.exchange("HEAD", "/notes/2", cookie_hdr(cookie))
        eq((r.status, r.body), (200, b""), "HEAD /notes/2")
        eq(r.header("Content-Length"), str(len(two)), "HEAD /notes/2: Content-Length")
        # PUT replaces title and body, keeps created, moves updated. Whitespace and escapes
        # are JSON's; the members may come in any order.
        t0 = int(time.time())
        body = b'{ "body" : "bread" ,\n "title":"shopping\\u0021" }'
        r = call(c, "PUT", "/notes/1", cookie, body)
        t1 = int(time.time())
        eq(r.status, 200, f"PUT status; {r.body!r}")
        upd = json.loads(r.body)["updated"]
        check(t0 <= upd <= t1, f"updated {upd} outside [{t0}, {t1}]")
        one = note_json(1, b"shopping!", b"bread", c1, upd)
        json_answer(r, 200, one, "PUT /notes/1")
        json_answer(call(c, "GET", "/notes/1", cookie), 200, one, "GET after PUT")
        # DELETE: 204, then 404, and the list is one shorter. Ids are never reused.
        r = call(c, "DELETE", "/notes/1", cookie)
        eq((r.status, r.body, r.header("Cache-Control")), (204, b"", "no-store"), "DELETE")
        json_answer(call(c, "GET", "/notes/1", cookie), 404, NO_SUCH_NOTE, "GET after DELETE")
        json_answer(call(c, "DELETE", "/notes/1", cookie), 404, NO_SUCH_NOTE, "DELETE twice")
        r = call(c, "PUT", "/notes/1", cookie, note_body("a", "b"))
        json_answer(r, 404, NO_SUCH_NOTE, "PUT after DELETE")
        r = call(c, "GET", "/notes", cookie)
        json_answer(r, 200, list_json([(2, t2.encode(), c2)]), "list after DELETE")
        id3, _ = create(c, cookie, "", "")
        eq(id3, 3, "the id after a delete")
        # Methods a route does not take, with a session: 405 and Allow.
        r = call(c, "PATCH", "/notes", cookie)
        json_answer(r, 405, b'{"error":"method not allowed"}\n', "PATCH /notes")
        eq(r.header("Allow"), "GET, HEAD, POST", "Allow of /notes")
        r = call(c, "POST", "/notes/2", cookie, note_body("a", "b"))
        json_answer(r, 405, b'{"error":"method not allowed"}\n', "POST /notes/2")
        eq(r.header("Allow"), "GET, HEAD, PUT, DELETE", "Allow of /notes/2")


def test_A4_sizes_413():
    with StateDir() as d, start(d) as s:
        c = s.connect()
        cookie = session(s)
        create(c, cookie, "t" * 200, "b" * 65536)
        # 100 two-byte characters written as escapes: 200 bytes decoded, taken.
        create(c, cookie, "\u00e9" * 100, "")
        for title, body, what in (
            ("t" * 201, "", "a 201-byte title"),
            ("", "b" * 65537, "a 65537-byte body"),
            ("\u00e9" * 101, "", "a title of 202 bytes once decoded"),
        ):
            r = call(c, "POST", "/notes", cookie, note_body(title, body))
            json_answer(r, 413, TOO_BIG, f"POST, {what}")
            r = call(c, "PUT", "/notes/1", cookie, note_body(title, body))
            json_answer(r, 413, TOO_BIG, f"PUT, {what}")
        # A request past the most a note can take escaped, whatever it holds.
        r = call(c, "POST", "/notes", cookie, b" " * (6 * (200 + 65536) + 1025))
        json_answer(r, 413, TOO_BIG, "a body longer than any note escaped")
        ids = [n["id"] for n in json.loads(call(c, "GET", "/notes", cookie).body)["notes"]]
        eq(ids, [1, 2], "notes after the refusals")


def test_A4_malformed_bodies_400_and_415():
    with StateDir() as d, start(d) as s:
        c = s.connect()
        cookie = session(s)
        for body in (
            b"",
            b"{",
            b"[]",
            b'"title"',
            b"{}",
            b'{"title":"a"}',
            b'{"body":"b"}',
            b'{"title":"a","body":"b","extra":"c"}',
            b'{"title":"a","title":"b","body":"c"}',
            b'{"title":1,"body":"b"}',
            b'{"title":null,"body":"b"}',
            b'{"title":["a"],"body":"b"}',
            b'{"title":{"a":"b"},"body":"b"}',
            b'{"title":"a","body":"b"}x',
            b'{"title":"a","body":"b"}{}',
            b'{"title":"a","body":"b",}',
            b'{"title":"a" "body":"b"}',
            b"{'title':'a','body':'b'}",
            b'{"title":"a\\u0000","body":"b"}',
            b'{"title":"a\x00","body":"b"}',
            b'{"title":"a\nb","body":"b"}',
            b'{"title":"\\x41","body":"b"}',
            b'{"title":"\\ud800","body":"b"}',
            b'{"title":"\\udc00\\ud800","body":"b"}',
            b'{"title":"\\u12","body":"b"}',
            b'{"title":"a","body":"b',
            b'{"title":"a","body":"b\\',
        ):
            json_answer(call(c, "POST", "/notes", cookie, body), 400, NOT_A_NOTE, f"POST {body!r}")
        create(c, cookie, "kept", "")
        json_answer(call(c, "PUT", "/notes/1", cookie, b"{"), 400, NOT_A_NOTE, "PUT {")
        for ct in ("text/plain", "application/jsonx", "application/x-www-form-urlencoded"):
            r = call(c, "POST", "/notes", cookie, note_body("a", "b"), [("Content-Type", ct)])
            json_answer(r, 415, b'{"error":"the body must be application/json"}\n', ct)
        r = c.exchange("POST", "/notes", cookie_hdr(cookie), note_body("a", "b"))
        json_answer(r, 415, b'{"error":"the body must be application/json"}\n', "no Content-Type")
        r = call(c, "POST", "/notes", cookie, note_body("ok", "b"),
                 [("Content-Type", "Application/JSON; charset=utf-8")])
        eq(r.status, 201, "a Content-Type with a parameter")
        notes = json.loads(call(c, "GET", "/notes", cookie).body)["notes"]
        eq([(n["id"], n["title"]) for n in notes], [(1, "kept"), (2, "ok")], "notes afterwards")


def test_A4_tampered_ids_404():
    with StateDir() as d, start(d) as s:
        c = s.connect()
        cookie = session(s)
        create(c, cookie, "one", "1")
        create(c, cookie, "two", "2")
        for path in (
            "/notes/abc",
            "/notes/999999",
            "/notes/1/../2",
            "/notes/2/",
            "/notes/01",
            "/notes/0",
            "/notes/-1",
            "/notes/+1",
            "/notes/1x",
            "/notes/%32",
            "/notes/1%00",
            "/notes/",
            "/notes//1",
            "/notes/99999999999999999999999999",
            "/notes/1234567890123456789",
            "/notes/" + "9" * 4000,
        ):
            for method in ("GET", "PUT", "DELETE"):
                body = note_body("x", "y") if method == "PUT" else None
                r = call(c, method, path, cookie, body)
                json_answer(r, 404, NO_SUCH_NOTE, f"{method} {path}")
        # A query string is not part of the id.
        eq(call(c, "GET", "/notes/2?x=1", cookie).status, 200, "GET /notes/2?x=1")
        r = call(c, "GET", "/notes", cookie)
        eq([n["title"] for n in json.loads(r.body)["notes"]], ["one", "two"], "notes untouched")


def test_A4_caps_507():
    with StateDir() as d:
        with start(d, M0_NOTES_MAX_NOTES="2") as s:
            c = s.connect()
            cookie = session(s)
            create(c, cookie, "a", "")
            create(c, cookie, "b", "")
            r = call(c, "POST", "/notes", cookie, note_body("c", ""))
            json_answer(r, 507, FULL, "a third note")
            s.wait_log(r"^notes: a note refused: M0_NOTES_MAX_NOTES reached \(1 so far\)$")
            eq(call(c, "DELETE", "/notes/1", cookie).status, 204, "delete one")
            create(c, cookie, "c", "")
    with StateDir() as d, start(d, M0_NOTES_MAX_BYTES="10") as s:
        c = s.connect()
        cookie = session(s)
        create(c, cookie, "abcd", "efgh")
        # 8 bytes stored: 2 more fit exactly, 3 do not; a PUT counts the note it replaces.
        json_answer(call(c, "POST", "/notes", cookie, note_body("abc", "")), 507, FULL, "POST")
        create(c, cookie, "a", "b")
        r = call(c, "PUT", "/notes/1", cookie, note_body("abcd", "efghi"))
        json_answer(r, 507, FULL, "PUT")
        r = call(c, "PUT", "/notes/1", cookie, note_body("", "abcdefgh"))
        eq(r.status, 200, "a PUT that fits")
        s.wait_log(r"^notes: a note refused: M0_NOTES_MAX_BYTES reached \(2 so far\)$")


# ---- persistence ----


def _notes(s, cookie):
    """Every note, each read whole: [(id, title, body, created, updated)]."""
    c = s.connect()
    out = []
    for n in json.loads(call(c, "GET", "/notes", cookie).body)["notes"]:
        r = call(c, "GET", f"/notes/{n['id']}", cookie)
        eq(r.status, 200, f"GET /notes/{n['id']}")
        j = json.loads(r.body)
        out.append((j["id"], j["title"], j["body"], j["created"], j["updated"]))
    return out


def _restart_keeps_acknowledged_writes(sig):
    with StateDir() as d:
        s = start(d)
        try:
            c = s.connect()
            cookie = session(s)
            for i in range(1, 21):
                create(c, cookie, f"note {i}", f"body {i}\n" * i)
            eq(call(c, "DELETE", "/notes/5", cookie).status, 204, "delete 5")
            eq(call(c, "PUT", "/notes/7", cookie, note_body("seven", "replaced")).status, 200, "put 7")
            before = _notes(s, cookie)
            eq(len(before), 19, "notes before the restart")
            # The last write is acknowledged; the signal follows at once, with no drain for kill -9.
            create(c, cookie, "last", "written just before the signal")
            before = _notes(s, cookie)
            rc = s.stop(sig)
            eq(rc, -signal.SIGKILL if sig == signal.SIGKILL else 0, "exit status")
        finally:
            s.cleanup()
        mode = stat.S_IMODE(os.stat(os.path.join(d, "notes.jsonl")).st_mode)
        eq(mode, 0o600, "the store's mode")
        eq(sorted(os.listdir(d)), ["notes.jsonl"], "files in the state directory")
        with start(d) as s:
            eq(_notes(s, cookie), before, "notes after the restart")
            # The session survives too (same key, same generation), and ids go on from 22.
            id_, _ = create(s.connect(), cookie, "after", "")
            eq(id_, 22, "the first id after the restart")


def test_A4_notes_survive_sigkill():
    _restart_keeps_acknowledged_writes(signal.SIGKILL)


def test_A4_notes_survive_sigterm():
    _restart_keeps_acknowledged_writes(signal.SIGTERM)


def test_A4_failed_write_changes_nothing():
    """A write that fails answers 500 and leaves the notes as they were, in memory and on disk.
    The temporary file is opened without following a symlink planted in its place."""
    with StateDir() as d, StateDir() as elsewhere, start(d) as s:
        c = s.connect()
        cookie = session(s)
        _, c1 = create(c, cookie, "one", "1")
        store = os.path.join(d, "notes.jsonl")
        with open(store, "rb") as f:
            saved = f.read()
        tmp = os.path.join(d, "notes.jsonl.tmp")
        failed = b'{"error":"could not save"}\n'
        target = os.path.join(elsewhere, "target")
        for plant, what, errno_text in (
            (lambda: os.mkdir(tmp), "a directory", "Is a directory"),
            (lambda: os.symlink(target, tmp), "a symlink", "Too many levels of symbolic links"),
        ):
            plant()
            json_answer(call(c, "POST", "/notes", cookie, note_body("two", "2")), 500, failed, what)
            json_answer(call(c, "PUT", "/notes/1", cookie, note_body("uno", "")), 500, failed, what)
            json_answer(call(c, "DELETE", "/notes/1", cookie), 500, failed, what)
            s.wait_log(rf"^notes: could not save the notes in {re.escape(d)}: {errno_text} "
                       r"\(\d+ failures so far\)$")
            json_answer(call(c, "GET", "/notes", cookie), 200, list_json([(1, b"one", c1)]), what)
            r = call(c, "GET", "/notes/1", cookie)
            json_answer(r, 200, note_json(1, b"one", b"1", c1, c1), what)
            with open(store, "rb") as f:
                eq(f.read(), saved, f"the store with {what} planted")
            eq(os.path.exists(target), False, "a file at the symlink's target")
            # A logout that cannot be saved still ends the session in this process.
            other = session(s)
            r = call(c, "POST", "/logout", other)
            json_answer(r, 500, failed, f"logout with {what}")
            eq(r.header("Set-Cookie"), CLEARED, f"Set-Cookie of the logout with {what}")
            unauthorized(call(c, "GET", "/notes", other), f"a session whose logout failed ({what})")
            if os.path.islink(tmp):
                os.unlink(tmp)
            else:
                os.rmdir(tmp)
        # The id the failed create did not take is the next one's.
        id_, _ = create(c, cookie, "two", "2")
        eq(id_, 2, "the id after the failed creates")


def test_A4_store_file_format():
    """The store is JSON Lines: a header, revoked sessions, then one line per note."""
    with StateDir() as d:
        with start(d) as s:
            c = s.connect()
            cookie = session(s)
            _, c1 = create(c, cookie, "a\"b", "line\nnext \u00e9")
        with open(os.path.join(d, "notes.jsonl"), "rb") as f:
            text = f.read()
        eq(
            text,
            b'{"m0notes":1,"next_id":2,"generation":0}\n'
            b'{"id":1,"created":%d,"updated":%d,"title":"a\\"b","body":"line\\nnext \xc3\xa9"}\n'
            % (c1, c1),
            "notes.jsonl",
        )


def test_A4_state_directory_first_path():
    """STATE_DIRECTORY may list several paths: the first is the store's; M0_NOTES_DIR beats it."""
    with StateDir() as d:
        first, second = os.path.join(d, "first"), os.path.join(d, "second")
        os.mkdir(first)
        os.mkdir(second)
        with start(d, M0_NOTES_DIR=None, STATE_DIRECTORY=f"{first}:{second}") as s:
            create(s.connect(), session(s), "here", "")
        eq((os.listdir(first), os.listdir(second)), (["notes.jsonl"], []), "where the store went")
        with start(second, STATE_DIRECTORY=first) as s:
            create(s.connect(), session(s), "there", "")
        eq(os.listdir(second), ["notes.jsonl"], "M0_NOTES_DIR beats STATE_DIRECTORY")


def test_A4_corrupt_store_refused():
    """A store that does not read whole is refused (78), never overwritten."""
    with StateDir() as d:
        path = os.path.join(d, "notes.jsonl")
        for text, why in (
            (b"", "the file is empty"),
            (b'{"m0notes":2,"next_id":1,"generation":0}\n', "line 1 is not a version 1 header"),
            (b'{"m0notes":1,"next_id":1,"generation":0}', "line 1 has no end (a file cut short)"),
            (
                b'{"m0notes":1,"next_id":3,"generation":0}\n{"id":1,"created":1,"updated":1,'
                b'"title":"a","body":"b"}\n{"id":2,"created":1,"updated":1,"title":"a","bo',
                "line 3 has no end (a file cut short)",
            ),
            (
                b'{"m0notes":1,"next_id":2,"generation":0}\n{"id":2,"created":1,"updated":1,'
                b'"title":"a","body":"b"}\n',
                "line 2: note id 2 is out of order or not below next_id",
            ),
            (
                b'{"m0notes":1,"next_id":2,"generation":0}\n{"id":1,"title":"a"}\n',
                "line 2 is neither a note nor a revoked session",
            ),
            (
                b'{"m0notes":1,"next_id":2,"generation":0}\n{"id":1,"created":1,"updated":1,'
                b'"title":"' + b"x" * 201 + b'","body":"b"}\n',
                "line 2 is not one object of known members",
            ),
        ):
            with open(path, "wb") as f:
                f.write(text)
            with Server("notes", env=env(d)) as s:
                eq(s.wait_exit(10), 78, f"exit status for {why}")
                lines = [ln for ln in s.log_lines() if ln.startswith("m0: ")]
                eq(
                    lines,
                    [
                        f"m0: loop 0's make failed: {path}: {why} (the app could not build its "
                        "handler; no loop accepted)"
                    ],
                    "refusal lines",
                )
            with open(path, "rb") as f:
                eq(f.read(), text, "the store after the refusal")
