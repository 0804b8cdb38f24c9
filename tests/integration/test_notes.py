# SPDX-License-Identifier: MIT
"""The notes app (SPEC A4, R2): refusals without its admin hash or state directory, or with a
secret in the environment; a login whose session cookie is signed with libsodium's crypto_auth
and checked on every notes route; strict JSON bodies and ids; notes in SQLite that survive
SIGKILL and SIGTERM restarts. Users, the import of the old store and kill -9 under load are in
test_notes_users.py and test_notes_storage.py. doc/notes.md is the contract."""

import hashlib
import hmac
import json
import os
import re
import signal
import stat
import threading
import time

from m0test import Server, check, eq, run_app
from notes_util import (ADMIN_PW, CLEARED, COOKIE_RX, FAILED, FULL, LOG,
                        NO_SUCH_NOTE, NOT_A_NOTE, TOO_BIG, UNAUTHORIZED, WRONG_LOGIN, StateDir,
                        admin_hash, all_notes, call, cookie_hdr, craft, create, db, env, integrity,
                        json_answer, key, list_json, login, mac, make_hash, note_body, note_json,
                        session, start, unauthorized)

# ThreadSanitizer runs this module (the pool's SQLite): run.py, D235.
THREADED = True


def refusal(environ, args=()):
    """Run notes to its refusal: (exit status, the one `m0: ` line)."""
    rc, out, err = run_app("notes", args, environ)
    lines = [ln for ln in err.split("\n") if ln.startswith("m0: ")]
    eq(len(lines), 1, f"refusal lines in {err!r}")
    eq(out, "", "stdout")
    return rc, lines[0]


HASH_FIX = ("set M0_NOTES_ADMIN_HASH to what `notes --hash-password` prints for the password it "
            "reads on stdin")


# ---- refusals (R1, R2, C4) ----


def test_A4_refused_without_admin_hash():
    with StateDir() as d:
        rc, line = refusal(env(d, M0_NOTES_ADMIN_HASH=None))
        eq(rc, 78, "exit status")
        eq(line, "m0: application: M0_NOTES_ADMIN_HASH is not set: the user admin logs in with "
                 f"it ({HASH_FIX})", "refusal line")
        eq(os.listdir(d), [], "files in the state directory")


def test_A4_plain_password_refused():
    """M0_NOTES_PASSWORD is refused whatever its value, and even beside a good hash: a
    password in plain text in the environment is what the hash replaces."""
    with StateDir() as d:
        for extra in ({"M0_NOTES_ADMIN_HASH": None}, {}):
            for value in (ADMIN_PW, ""):
                rc, line = refusal(env(d, M0_NOTES_PASSWORD=value, **extra))
                eq(rc, 78, f"exit status, M0_NOTES_PASSWORD={value!r}, {extra}")
                eq(line, "m0: application: M0_NOTES_PASSWORD is set: a password in plain text is "
                         f"not read ({HASH_FIX}, and remove M0_NOTES_PASSWORD)", "refusal line")


def test_A4_key_in_environment_refused():
    """The session key is the state directory's session.key; an M0_NOTES_KEY is refused."""
    with StateDir() as d:
        rc, line = refusal(env(d, M0_NOTES_KEY="00" * 32))
        eq(rc, 78, "exit status")
        eq(line, "m0: application: M0_NOTES_KEY is set: sessions are signed with a key notes keeps "
                 "in its state directory (remove M0_NOTES_KEY: notes makes its key, session.key, "
                 "in the state directory at the first start)", "refusal line")


def test_A4_malformed_admin_hash_refused():
    """Anything but an Argon2id string libsodium made is refused, by its length only."""
    good = admin_hash()
    with StateDir() as d:
        for bad in ("", "hunter2", good[:-3] + "!!!", good + "$x", good.replace("p=1", "p=2"),
                    good.replace("v=19", "v=16"), good.replace("t=1", "t=0"),
                    good.replace("$argon2id$", "$argon2i$"), "$2y$10$" + "a" * 53,
                    good.replace("$", "$$", 1)):
            rc, line = refusal(env(d, M0_NOTES_ADMIN_HASH=bad))
            eq(rc, 78, f"exit status for {bad!r}")
            eq(line, f"m0: application: M0_NOTES_ADMIN_HASH ({len(bad)} characters) is not an "
                     f"Argon2id string ({HASH_FIX})", f"refusal line for {bad!r}")


def test_A4_password_hash_alias():
    """M0_NOTES_PASSWORD_HASH (SPEC A4's name) is taken for M0_NOTES_ADMIN_HASH; both set and
    different is refused, both set and equal is taken."""
    other = make_hash("another password")
    with StateDir() as d:
        with start(d, M0_NOTES_ADMIN_HASH=None, M0_NOTES_PASSWORD_HASH=admin_hash()) as s:
            session(s)
        with start(d, M0_NOTES_PASSWORD_HASH=admin_hash()) as s:
            session(s)
        rc, line = refusal(env(d, M0_NOTES_PASSWORD_HASH=other))
        eq(rc, 78, "exit status, two hashes")
        eq(line, "m0: application: M0_NOTES_ADMIN_HASH and M0_NOTES_PASSWORD_HASH are both set, "
                 "and differ (set only M0_NOTES_ADMIN_HASH (M0_NOTES_PASSWORD_HASH is another "
                 "name for it))", "refusal line")
        rc, line = refusal(env(d, M0_NOTES_ADMIN_HASH=None, M0_NOTES_PASSWORD_HASH="x"))
        eq(line, "m0: application: M0_NOTES_PASSWORD_HASH (1 characters) is not an Argon2id "
                 f"string ({HASH_FIX})", "a bad alias is named as it was given")


def test_A4_session_key_file():
    """session.key: made at the first start, 32 bytes, mode 0600, kept across restarts (so are
    the sessions); one of another size or readable by others is refused by the check."""
    with StateDir() as d:
        path = os.path.join(d, "session.key")
        with start(d) as s:
            cookie = session(s)
        eq(stat.S_IMODE(os.stat(path).st_mode), 0o600, "the key's mode")
        k = key(d)
        eq(len(k), 32, "the key's length")
        with start(d) as s:
            eq(call(s.connect(), "GET", "/notes", cookie).status, 200, "a session after a restart")
        eq(key(d), k, "the key after a restart")
        os.chmod(path, 0o644)
        rc, line = refusal(env(d))
        eq(rc, 78, "exit status, a key readable by others")
        eq(line, f"m0: application: {path} is readable by others (mode 0644) (chmod 600 {path})",
           "refusal line")
        for content in (b"", k + b"x", k[:-1]):
            with open(path, "wb") as f:
                f.write(content)
            os.chmod(path, 0o600)
            rc, line = refusal(env(d))
            eq(rc, 78, f"exit status, a key of {len(content)} bytes")
            eq(line, f"m0: application: {path} is not a file of 32 bytes (remove it: notes makes "
                     "a new key at the next start, which ends every session)", "refusal line")
        # Removed: a new key, and every session is over.
        os.unlink(path)
        with start(d) as s:
            unauthorized(call(s.connect(), "GET", "/notes", cookie), "a session of the old key")
        check(key(d) != k, "the new key is the old one")


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
            ("M0_NOTES_BUSY_MS", "0", (1, 60000), "milliseconds", 5000),
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


def test_A4_two_loops_and_a_pool():
    """notes has no max_threads: each loop and pool thread has its own SQLite connection. With a
    pool, logins and writes run there (x-thread >= 0), reads on the loop (x-thread -1). Writers
    on several connections at once: every acknowledged note is there once."""
    with StateDir() as d, start(d, M0_THREADS="2", M0_BLOCKING_THREADS="2") as s:
        c = s.connect()
        r = login(c)
        eq(r.status, 204, "login")
        check(r.header("x-thread") in ("0", "1"), f"login ran on x-thread {r.header('x-thread')}")
        cookie = COOKIE_RX.match(r.header("Set-Cookie")).group(0).split("=", 1)[1]
        for method, path, body, where in (("POST", "/notes", note_body("t", "b"), ("0", "1")),
                                          ("PUT", "/notes/1", note_body("t", "c"), ("0", "1")),
                                          ("PATCH", "/notes", None, ("0", "1")),
                                          ("GET", "/notes", None, ("-1",)),
                                          ("HEAD", "/notes/1", None, ("-1",)),
                                          ("GET", "/notes/1", None, ("-1",)),
                                          ("DELETE", "/notes/1", None, ("0", "1")),
                                          ("GET", "/notes/1", None, ("-1",))):
            r = call(c, method, path, cookie, body)
            check(r.header("x-thread") in where,
                  f"{method} {path} ({r.status}) ran on x-thread {r.header('x-thread')}")
        made, errors = [], []

        def writer(w):
            try:
                c = s.connect()
                for i in range(15):
                    r = call(c, "POST", "/notes", cookie, note_body(f"w{w} n{i}", "x" * i))
                    eq(r.status, 201, f"writer {w}, note {i}")
                    made.append((json.loads(r.body)["id"], f"w{w} n{i}", "x" * i))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        eq(errors, [], "writers' errors")
        got = [(n[0], n[1], n[2]) for n in all_notes(s, cookie)]
        eq(got, sorted(made), "every note, by id")
        check(1 not in [i for i, _, _ in made], "the deleted id was taken again")
        eq(len({i for i, _, _ in made}), 60, "distinct ids")


def test_A4_doctor_reports_the_app_check():
    """The app's check, in the doctor: where the notes are and what admin's hash costs. It
    makes nothing: no database, no key."""
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
                    "detail": f"notes in {d}/notes.db; sessions of 3600 s; admin's Argon2id "
                              "hash: 8 KiB, 1 passes",
                    "fix": "",
                }
            ],
            "the application check",
        )
        check(admin_hash() not in out and ADMIN_PW not in out, "the doctor printed a secret")
        eq(os.listdir(d), [], "files the doctor made")


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
        for user, pw in (("admin", "wrong"), ("admin", ADMIN_PW + "x"), ("admin", ADMIN_PW[:-1]),
                         ("admin", ""), ("admin", ADMIN_PW.upper()), ("nobody", ADMIN_PW),
                         ("Admin", ADMIN_PW), ("admin ", ADMIN_PW), ("", ADMIN_PW),
                         ("a" * 65, ADMIN_PW)):
            r = login(c, pw, user)
            json_answer(r, 401, WRONG_LOGIN, f"login of {user!r} with {pw!r}")
            eq(r.header_all("Set-Cookie"), [], f"Set-Cookie after {user!r}, {pw!r}")
        # Each refusal names the field and what is wrong with it (AP1).
        missing, twice, not_utf8 = "is missing", "is given more than once", "is not UTF-8"
        malformed = "is malformed: no '=', a bad %-escape, or %00"
        for body, field, why in (
            (b"", "user", missing), (b"pass=x", "user", missing),
            (b"password=x", "user", missing), (b"user=admin", "password", missing),
            (b"user=admin&password", "password", malformed), (b"user&password=x", "user", malformed),
            (b"user=admin&password=a&password=b", "password", twice),
            (b"user=a&user=admin&password=x", "user", twice),
            (b"user=admin&password=%zz", "password", malformed),
            (b"user=admin&password=%4", "password", malformed),
            (b"user=admin&password=a%00b", "password", malformed),
            (b"user=a%00&password=x", "user", malformed),
            (b"user=%C3%28&password=x", "user", not_utf8),
            (b"user=admin&password=%FF", "password", not_utf8),
        ):
            r = c.exchange("POST", "/login", None, body)
            json_answer(r, 400, f'{{"error":"the form field \'{field}\' {why}"}}\n'.encode(),
                        f"login body {body!r}")
            eq(r.header_all("Set-Cookie"), [], f"Set-Cookie after {body!r}")
        r = c.exchange("POST", "/login", [("Content-Type", "application/json")],
                       b"user=admin&password=x")
        json_answer(r, 415, b'{"error":"the body must be application/x-www-form-urlencoded"}\n',
                    "a login of another type")
        r = c.exchange("POST", "/login", None, b"user=admin&password=" + b"a" * 4077)
        json_answer(r, 413, b'{"error":"the login body is at most 4096 bytes"}\n', "long login")
        eq(c.get("/login").status, 405, "GET /login")
        # Failed logins are counted in the log, at 1, 2, 4, ...
        s.wait_log(LOG + r"wrong user or password at /login \(8 so far\)$")


def test_A4_login_sets_a_signed_cookie():
    with StateDir() as d, start(d) as s:
        c = s.connect()
        t0 = int(time.time())
        # Form decoding: '+' is a space, %XX a byte; other fields are ignored, in any order.
        r = c.exchange(
            "POST", "/login", None, b"x&password=correct+horse%20battery%20staple&user=adm%69n"
        )
        t1 = int(time.time())
        eq(r.status, 204, f"login status; body {r.body!r}")
        eq(r.body, b"", "login body")
        eq(r.header("Cache-Control"), "no-store", "login Cache-Control")
        cookies = r.header_all("Set-Cookie")
        eq(len(cookies), 1, f"Set-Cookie fields: {cookies}")
        m = re.fullmatch(
            r"m0notes=1\.(\d+)\.([0-9a-f]{32})\.([0-9a-f]{64}); HttpOnly; SameSite=Strict; "
            r"Path=/; Max-Age=3600",
            cookies[0],
        )
        check(m, f"Set-Cookie {cookies[0]!r}")
        expiry, nonce, got_mac = int(m.group(1)), m.group(2), m.group(3)
        check(t0 + 3600 <= expiry <= t1 + 3600, f"expiry {expiry} not 3600 s after [{t0}, {t1}]")
        # The MAC is crypto_auth (HMAC-SHA-512-256) under session.key, as Python's hmac makes it.
        eq(got_mac, mac(key(d), f"1.{expiry}.{nonce}"), "the cookie's MAC")
        # Two logins, two sessions.
        eq(session(s) != session(s), True, "two logins got different cookies")
        r = call(c, "GET", "/notes", f"1.{expiry}.{nonce}.{got_mac}")
        json_answer(r, 200, b'{"notes":[]}\n', "GET /notes with the session")


def test_A4_secure_cookie_knob_and_session_length():
    with StateDir() as d, start(d, M0_NOTES_SECURE_COOKIE="on", M0_NOTES_SESSION_S="60") as s:
        r = login(s.connect())
        eq(r.status, 204, "login")
        check(
            re.fullmatch(
                r"m0notes=1\.\d+\.[0-9a-f]{32}\.[0-9a-f]{64}; HttpOnly; SameSite=Strict; Path=/; "
                r"Max-Age=60; Secure",
                r.header("Set-Cookie"),
            ),
            f"Set-Cookie {r.header('Set-Cookie')!r}",
        )


def test_A4_forged_and_tampered_cookies_401():
    with StateDir() as d, start(d) as s:
        c = s.connect()
        good = session(s)
        k = key(d)
        eq(call(c, "GET", "/notes", good).status, 200, "the genuine cookie")
        uid, expiry, nonce, m = good.split(".")
        flip = lambda ch: "0" if ch != "0" else "1"  # noqa: E731
        now = int(time.time())
        payload = f"1.{now + 600}.{'5a' * 16}"
        sha256 = hmac.new(k, f"session:0:{payload}".encode(), hashlib.sha256).hexdigest()
        old_style = f"{payload}.{sha256}"
        bad = {
            "one MAC character flipped": f"{uid}.{expiry}.{nonce}.{m[:10]}{flip(m[10])}{m[11:]}",
            "last MAC character flipped": f"{uid}.{expiry}.{nonce}.{m[:-1]}{flip(m[-1])}",
            "expiry moved, MAC kept": f"{uid}.{int(expiry) + 1}.{nonce}.{m}",
            "expiry moved back, MAC kept": f"{uid}.{int(expiry) - 100}.{nonce}.{m}",
            "nonce changed, MAC kept": f"{uid}.{expiry}.{flip(nonce[0])}{nonce[1:]}.{m}",
            "uid changed, MAC kept": f"2.{expiry}.{nonce}.{m}",
            "uid missing": f"{expiry}.{nonce}.{m}",
            "MAC upper-cased": f"{uid}.{expiry}.{nonce}.{m.upper()}",
            "MAC cut short": f"{uid}.{expiry}.{nonce}.{m[:-2]}",
            "MAC made longer": f"{uid}.{expiry}.{nonce}.{m}00",
            "an opening quote alone": f'"{good}',
            "a closing quote alone": f'{good}"',
            "a quote inside": f'{uid}.{expiry}."{nonce}".{m}',
            "a space inside": f"{uid}.{expiry}. {nonce}.{m}",
            "leading zero in the uid": "0" + good,
            "leading zero in the expiry": f"{uid}.0{expiry}.{nonce}.{m}",
            "empty": "",
            "signed with another key": craft(b"\xff" * 32, now + 600),
            "signed with HMAC-SHA256, as before libsodium": old_style,
            "signed for another generation": craft(k, now + 600, generation=1),
            "signed for a user that does not exist": craft(k, now + 600, uid=7),
            "expired, validly signed": craft(k, now - 1),
            "expiring now, validly signed": craft(k, now),
            "beyond one session, validly signed": craft(k, now + 3600 + 120),
            "expiry past 2^63, validly signed": craft(k, 10**19),
            "negative expiry, validly signed": craft(k, -5),
        }
        for what, value in bad.items():
            unauthorized(call(c, "GET", "/notes", value), what)
        # A validly signed cookie made here, not by the app, is a session: the MAC is the
        # whole of the check, so Python's HMAC agreeing with libsodium's is tested here too.
        json_answer(call(c, "GET", "/notes", craft(k, now + 600)), 200, b'{"notes":[]}\n',
                    "crafted")
        # Double quotes around a value are RFC 6265's and not part of it (m0_req_cookie, Q1):
        # the quoted session is the same session.
        eq(call(c, "GET", "/notes", f'"{good}"').status, 200, "the session in double quotes")
        # The first m0notes cookie is the one read; other cookies around it do not matter.
        r = call(c, "GET", "/notes", None, headers=[("Cookie", f"a=b; m0notes={good}; c=d")])
        eq(r.status, 200, "the session among other cookies")
        r = call(c, "GET", "/notes", None, headers=[("Cookie", f"m0notes=x; m0notes={good}")])
        unauthorized(r, "a bad m0notes cookie before a good one")


def test_A4_session_expires():
    with StateDir() as d, start(d, M0_NOTES_SESSION_S="2") as s:
        c = s.connect()
        cookie = session(s)
        expiry = int(cookie.split(".")[1])
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
        # The revocation is in the database: it holds after a restart, and only for that session.
        _, exp_a, nonce_a, _ = a.split(".")
        con = db(d)
        eq(con.execute("SELECT owner, nonce, expiry FROM revoked").fetchall(),
           [(1, nonce_a, int(exp_a))], "the revoked sessions")
        con.close()
        with start(d) as s:
            c = s.connect()
            unauthorized(call(c, "GET", "/notes", a), "the logged-out cookie after a restart")
            eq(call(c, "GET", "/notes", b).status, 200, "the other session after a restart")


def test_A4_revocation_bound_ends_every_session():
    """Past M0_NOTES_MAX_REVOKED live revocations of one user, that user's generation moves:
    every session of theirs ends."""
    with StateDir() as d, start(d, M0_NOTES_MAX_REVOKED="1") as s:
        c = s.connect()
        a, b, other = session(s), session(s), session(s)
        eq(call(c, "POST", "/logout", a).status, 204, "first logout")
        eq(call(c, "GET", "/notes", other).status, 200, "a session after one logout")
        eq(call(c, "POST", "/logout", b).status, 204, "second logout")
        s.wait_log(LOG + r"user 1 has 1 revoked sessions, the bound \(M0_NOTES_MAX_REVOKED\): "
                   r"every session of theirs was ended$")
        for cookie, what in ((a, "a"), (b, "b"), (other, "other")):
            unauthorized(call(c, "GET", "/notes", cookie), f"session {what} after the bump")
        # A cookie of the new generation works; Python signs it with generation 1.
        json_answer(call(c, "GET", "/notes", craft(key(d), int(time.time()) + 60, generation=1)),
                    200, b'{"notes":[]}\n', "generation 1")
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
            # Not UTF-8 (a Latin-1 e-acute): JSON is UTF-8, and jansson holds to it.
            b'{"title":"caf\xe9","body":"b"}',
            b'{"title":"a","body":"\xed\xa0\x80"}',
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
        # m0_req_json() takes the +json types as JSON (Q3)
        r = call(c, "POST", "/notes", cookie, note_body("plus", "b"),
                 [("Content-Type", "application/vnd.notes+json")])
        eq(r.status, 201, "a +json Content-Type")
        notes = json.loads(call(c, "GET", "/notes", cookie).body)["notes"]
        eq([(n["id"], n["title"]) for n in notes], [(1, "kept"), (2, "ok"), (3, "plus")],
           "notes afterwards")


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
            s.wait_log(LOG + r"a note refused: M0_NOTES_MAX_NOTES reached \(1 so far\)$")
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
        s.wait_log(LOG + r"a note refused: M0_NOTES_MAX_BYTES reached \(2 so far\)$")


# ---- persistence ----


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
            before = all_notes(s, cookie)
            eq(len(before), 19, "notes before the restart")
            # The last write is acknowledged; the signal follows at once, with no drain for kill -9.
            create(c, cookie, "last", "written just before the signal")
            before = all_notes(s, cookie)
            rc = s.stop(sig)
            eq(rc, -signal.SIGKILL if sig == signal.SIGKILL else 0, "exit status")
        finally:
            s.cleanup()
        for name in ("notes.db", "session.key"):
            mode = stat.S_IMODE(os.stat(os.path.join(d, name)).st_mode)
            eq(mode, 0o600, f"the mode of {name}")
        files = sorted(os.listdir(d))
        if sig == signal.SIGKILL:
            # Killed, the WAL is still there; the next open replays it.
            eq(files, ["notes.db", "notes.db-shm", "notes.db-wal", "session.key"], "files")
        else:
            # Stopped, the last connection checkpointed the WAL into the file and removed it.
            eq(files, ["notes.db", "session.key"], "files in the state directory")
        with start(d) as s:
            eq(all_notes(s, cookie), before, "notes after the restart")
            # The session survives too (same key, same generation), and ids go on from 22.
            id_, _ = create(s.connect(), cookie, "after", "")
            eq(id_, 22, "the first id after the restart")
        eq([r[0] for r in integrity(d)], ["ok"], "integrity_check")


def test_A4_notes_survive_sigkill():
    _restart_keeps_acknowledged_writes(signal.SIGKILL)


def test_A4_notes_survive_sigterm():
    _restart_keeps_acknowledged_writes(signal.SIGTERM)


def test_A4_failed_write_changes_nothing():
    """A write the database refuses answers 500 and changes nothing, and the log says why.
    The refusal is planted as a trigger, as a full disk or a failing fsync would refuse it."""
    with StateDir() as d, start(d) as s:
        c = s.connect()
        cookie = session(s)
        _, c1 = create(c, cookie, "one", "1")
        con = db(d)
        for table, when in (("notes", "INSERT"), ("notes", "UPDATE"), ("notes", "DELETE"),
                            ("revoked", "INSERT")):
            con.execute(f"CREATE TRIGGER planted_{when.lower()}_{table} BEFORE {when} ON {table} "
                        f"BEGIN SELECT RAISE(ABORT, 'planted: no {when} on {table}'); END")
        json_answer(call(c, "POST", "/notes", cookie, note_body("two", "2")), 500, FAILED, "POST")
        s.wait_log(LOG + rf"could not save a note in {re.escape(d)}/notes\.db: planted: no "
                   r"INSERT on notes \(Input/output error; 1 failures so far\)$")
        json_answer(call(c, "PUT", "/notes/1", cookie, note_body("uno", "")), 500, FAILED, "PUT")
        json_answer(call(c, "DELETE", "/notes/1", cookie), 500, FAILED, "DELETE")
        s.wait_log(LOG + r"could not save a delete in .*: planted: no DELETE on notes "
                   r"\(Input/output error; 3 failures so far\)$")
        json_answer(call(c, "GET", "/notes", cookie), 200, list_json([(1, b"one", c1)]), "list")
        r = call(c, "GET", "/notes/1", cookie)
        json_answer(r, 200, note_json(1, b"one", b"1", c1, c1), "the note after the refusals")
        eq(con.execute("SELECT id, title, body FROM notes").fetchall(), [(1, "one", "1")],
           "the database after the refusals")
        # A logout that cannot be saved still ends the session in this process.
        other = session(s)
        r = call(c, "POST", "/logout", other)
        json_answer(r, 500, FAILED, "a logout that cannot be saved")
        eq(r.header("Set-Cookie"), CLEARED, "Set-Cookie of the logout")
        unauthorized(call(c, "GET", "/notes", other), "a session whose logout failed")
        eq(call(c, "GET", "/notes", cookie).status, 200, "another session")
        for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
            con.execute(f"DROP TRIGGER {row[0]}")
        con.close()
        # The id the failed create did not take is the next one's.
        id_, _ = create(c, cookie, "two", "2")
        eq(id_, 2, "the id after the failed creates")
        unauthorized(call(c, "GET", "/notes", other), "the failed logout, once writes work again")


def test_A4_database_schema():
    """What the database holds: a note's exact bytes, its owner, its size; WAL mode; admin as
    user 1 with no hash in the file (it is the environment's)."""
    with StateDir() as d:
        with start(d) as s:
            c = s.connect()
            cookie = session(s)
            _, c1 = create(c, cookie, "a\"b", "line\nnext \u00e9")
        con = db(d)
        eq(con.execute("SELECT id, owner, created, updated, size, title, body FROM notes")
           .fetchall(), [(1, 1, c1, c1, 15, 'a"b', "line\nnext \u00e9")], "the notes table")
        eq(con.execute("SELECT id, name, hash, generation FROM users").fetchall(),
           [(1, "admin", None, 0)], "the users table")
        eq(con.execute("PRAGMA journal_mode").fetchall(), [("wal",)], "journal_mode")
        eq(con.execute("PRAGMA user_version").fetchall(), [(1,)], "the schema's version")
        con.close()


def test_A4_state_directory_first_path():
    """STATE_DIRECTORY may list several paths: the first is the store's; M0_NOTES_DIR beats it."""
    with StateDir() as d:
        first, second = os.path.join(d, "first"), os.path.join(d, "second")
        os.mkdir(first)
        os.mkdir(second)
        with start(d, M0_NOTES_DIR=None, STATE_DIRECTORY=f"{first}:{second}") as s:
            create(s.connect(), session(s), "here", "")
        # m0-bus-ids is the host's: the lease on the bus's next ids (N3).
        eq((sorted(os.listdir(first)), os.listdir(second)),
           (["m0-bus-ids", "notes.db", "session.key"], []), "where the store went")
        with start(second, STATE_DIRECTORY=first) as s:
            create(s.connect(), session(s), "there", "")
        eq(sorted(os.listdir(second)), ["notes.db", "session.key"],
           "M0_NOTES_DIR beats STATE_DIRECTORY")


def test_A4_handlers_open_a_new_database_at_once():
    """Two loops with two pool threads each: six handlers open one new notes.db at the same
    moment, and every start is served (READY=1), none refused with "database is locked" while
    the first open turns the file into WAL mode (SPEC A4, R4). Before the opens were taken one
    at a time about one start in five was refused, so twenty starts are made."""
    for _ in range(20):
        with StateDir() as d, start(d, M0_THREADS="2", M0_BLOCKING_THREADS="2") as s:
            eq(s.connect().get("/notes").status, 401, "an answer from the new database's host")
            eq(s.stop(), 0, "exit status")
