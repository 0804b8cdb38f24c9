# SPDX-License-Identifier: MIT
"""What the notes tests share (test_notes*.py): the app's environment, its commands, sessions
signed here with Python's own HMAC, and exact answers. doc/notes.md is the contract."""

import hashlib
import hmac
import json
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
import time
import urllib.parse

from m0test import Server, app_path, check, clean_env, eq

ADMIN_PW = "correct horse battery staple"
COOKIE_RX = re.compile(r"m0notes=(\d+)\.(\d+)\.([0-9a-f]{32})\.([0-9a-f]{64})")
HASH_RX = re.compile(r"\$argon2id\$v=19\$m=(\d+),t=(\d+),p=1\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+")

UNAUTHORIZED = b'{"error":"login required"}\n'
NO_SUCH_NOTE = b'{"error":"no such note"}\n'
WRONG_LOGIN = b'{"error":"wrong user or password"}\n'
TOO_BIG = b'{"error":"a title holds at most 200 bytes, a body at most 65536"}\n'
NOT_A_NOTE = b'{"error":"the body must be {\\"title\\":string,\\"body\\":string}"}\n'
FAILED = b'{"error":"could not save"}\n'
FULL = b'{"error":"no room for this note"}\n'
JSON_CT = [("Content-Type", "application/json")]
CLEARED = "m0notes=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
# How the app's log lines start, on stderr outside the journal (m0_log, SPEC J1).
LOG = r"^m0\[notes\] loop \d+: "


class StateDir:
    """A temporary directory for the notes, kept across restarts of the app."""

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="m0notes-")
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)
        return False


def command(args, stdin=b"", env=None, timeout=60):
    """Run `notes ARGS` with `stdin`: (exit status, stdout, stderr) as text."""
    p = subprocess.run([app_path("notes"), *args], env=clean_env(env), input=stdin,
                       capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def make_hash(password, cost="min"):
    """An Argon2id string from `notes --hash-password` (min cost: cheap to make and to verify)."""
    rc, out, err = command(["--hash-password"], (password + "\n").encode(),
                           {"M0_NOTES_HASH_COST": cost})
    eq((rc, err), (0, ""), "notes --hash-password")
    check(HASH_RX.fullmatch(out.rstrip("\n")), f"--hash-password printed {out!r}")
    return out.rstrip("\n")


_admin_hash = []


def admin_hash():
    if not _admin_hash:
        _admin_hash.append(make_hash(ADMIN_PW))
    return _admin_hash[0]


def add_user(state_dir, name, password, cost="min"):
    rc, out, err = command(["--add-user", name], (password + "\n").encode(),
                           {"M0_NOTES_DIR": state_dir, "M0_NOTES_HASH_COST": cost})
    eq((rc, out), (0, ""), f"notes --add-user {name}: {err!r}")
    eq(err, f"notes: added the user {name} to {state_dir}/notes.db\n", "--add-user's line")


def env(state_dir, **extra):
    e = {"M0_NOTES_ADMIN_HASH": admin_hash(), "M0_NOTES_DIR": state_dir}
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


def key(state_dir):
    """The session key the app made in its state directory."""
    with open(os.path.join(state_dir, "session.key"), "rb") as f:
        return f.read()


def mac(k, payload, generation=0):
    """libsodium's crypto_auth: HMAC-SHA-512 cut to 256 bits."""
    msg = f"session:{generation}:{payload}".encode()
    return hmac.new(k, msg, hashlib.sha512).digest()[:32].hex()


def craft(k, expiry, uid=1, nonce="5a" * 16, generation=0):
    """A session cookie value signed here, with Python's own HMAC."""
    payload = f"{uid}.{expiry}.{nonce}"
    return f"{payload}.{mac(k, payload, generation)}"


def cookie_hdr(value):
    return [("Cookie", f"m0notes={value}")]


def login(c, password=ADMIN_PW, user="admin"):
    body = urllib.parse.urlencode({"user": user, "password": password}).encode()
    return c.exchange("POST", "/login", [("Content-Type", "application/x-www-form-urlencoded")],
                      body)


def session(s, user="admin", password=ADMIN_PW):
    """Log in on a fresh connection; returns the cookie's value."""
    r = login(s.connect(), password, user)
    eq(r.status, 204, f"login of {user}: status; body {r.body!r}")
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
    """A byte string as notes writes it in JSON (jansson's escaping: the short forms, then
    \\u00XX in upper-case hex)."""
    short = {0x22: b'\\"', 0x5C: b"\\\\", 0x08: b"\\b", 0x0C: b"\\f", 0x0A: b"\\n",
             0x0D: b"\\r", 0x09: b"\\t"}
    out = bytearray(b'"')
    for ch in b:
        if ch in short:
            out += short[ch]
        elif ch < 0x20:
            out += b"\\u%04X" % ch
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


def all_notes(s, cookie):
    """Every note of the session's user, each read whole: [(id, title, body, created, updated)]."""
    c = s.connect()
    out = []
    for n in json.loads(call(c, "GET", "/notes", cookie).body)["notes"]:
        r = call(c, "GET", f"/notes/{n['id']}", cookie)
        eq(r.status, 200, f"GET /notes/{n['id']}")
        j = json.loads(r.body)
        out.append((j["id"], j["title"], j["body"], j["created"], j["updated"]))
    return out


def db(state_dir):
    """The app's database, opened with Python's sqlite3 (autocommit; never made if absent)."""
    path = os.path.join(state_dir, "notes.db")
    return sqlite3.connect(f"file:{path}?mode=rw", uri=True, isolation_level=None, timeout=10)


def integrity(state_dir):
    con = db(state_dir)
    try:
        return con.execute("PRAGMA integrity_check").fetchall()
    finally:
        con.close()
