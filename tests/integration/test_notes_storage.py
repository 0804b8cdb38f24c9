# SPDX-License-Identifier: MIT
"""notes' storage (SPEC A4 revised): the one import of the JSON Lines store the versions before
SQLite kept (exact notes, ids and times; once, atomic under kill -9; a file that does not read
whole refused and left as it is), and acknowledged notes that survive kill -9 during concurrent
writes with `PRAGMA integrity_check` ok. doc/notes.md is the contract.

The old store is written here byte for byte as apps/notes-store.c wrote it (git show
a79dda0:apps/notes-store.c, write_lines): a header line, the revoked sessions, the notes by id,
strings escaped as m0_res_json_string escapes them."""

import os
import random
import re
import shutil
import signal
import threading
import time

from m0test import Server, check, eq, kill_during
from notes_util import (LOG, StateDir, all_notes, call, create, db, env, integrity, jstr,
                        note_body, session, start, unauthorized)

# ThreadSanitizer runs this module (the pool's SQLite): run.py, D235.
THREADED = True

OLD = "notes.jsonl"
DONE = "notes.jsonl.imported"
MAKE_FIX = "(the app could not build its handler; no loop accepted)"


def old_store(notes, next_id, generation=0, revoked=()):
    """The old file's bytes. notes: [(id, created, updated, title bytes, body bytes)]."""
    out = b'{"m0notes":1,"next_id":%d,"generation":%d}\n' % (next_id, generation)
    for nonce, expiry in revoked:
        out += b'{"revoked":"%s","expiry":%d}\n' % (nonce.encode(), expiry)
    for id_, created, updated, title, body in notes:
        out += (b'{"id":%d,"created":%d,"updated":%d,"title":%s,"body":%s}\n'
                % (id_, created, updated, jstr(title), jstr(body)))
    return out


NOTES = [
    (1, 1700000000, 1700000100, b"groceries", b"milk\neggs"),
    (2, 1700000200, 1700000200, b'quote "x" \\ tab\t', "caf\u00e9 \u2603 \U0001F600 \x01".encode()),
    (5, 1700000300, 1700000400, b"t" * 200, b"b" * 65536),
    (7, 1700000500, 1700000500, b"", b""),
]


def write_old(d, data):
    path = os.path.join(d, OLD)
    with open(path, "wb") as f:
        f.write(data)
    return path


def expect_notes(s, cookie, notes, what):
    eq(all_notes(s, cookie), [(i, t.decode(), b.decode(), c, u) for i, c, u, t, b in notes], what)


def imported_line(d, n):
    return (LOG + rf"imported {n} notes of {re.escape(d)}/notes\.jsonl as the user admin's; the "
            r"file is now notes\.jsonl\.imported$")


def refused_start(d, why):
    """Start on `d`, expect the make's refusal naming the old file and `why`."""
    with Server("notes", env=env(d)) as s:
        eq(s.wait_exit(10), 78, f"exit status for {why}")
        lines = [ln for ln in s.log_lines() if ln.startswith("m0: ")]
        eq(lines, [f"m0: loop 0's make failed: {d}/{OLD}: {why} {MAKE_FIX}"], "refusal lines")


# ---- the import of the old store ----


def test_A4_old_store_imported_once():
    """The old file's notes become admin's, exactly: ids, times, bytes; ids go on from its
    next_id; the file is renamed and kept as it was; a restart imports nothing again. Its
    sessions are not imported: they were signed with M0_NOTES_KEY, which is no longer read."""
    with StateDir() as d:
        data = old_store(NOTES, 9, generation=3,
                         revoked=[("ab" * 16, int(time.time()) + 3600)])
        write_old(d, data)
        with start(d) as s:
            s.wait_log(imported_line(d, 4))
            cookie = session(s)
            expect_notes(s, cookie, NOTES, "the imported notes")
            id_, _ = create(s.connect(), cookie, "after", "")
            eq(id_, 9, "the first id after the import (the old next_id)")
            # A cookie of the old format, under any key, is no session.
            old = f"{int(time.time()) + 600}.{'ab' * 16}.{'00' * 32}"
            unauthorized(call(s.connect(), "GET", "/notes", old), "an old cookie")
        eq(sorted(os.listdir(d)), ["notes.db", DONE, "session.key"], "files after the import")
        with open(os.path.join(d, DONE), "rb") as f:
            eq(f.read(), data, "the renamed file, byte for byte")
        with start(d) as s:
            eq(len(all_notes(s, cookie)), 5, "notes after a restart")
            check(not any("imported" in ln for ln in s.log_lines()), "imported again")
        con = db(d)
        eq(con.execute("SELECT file, notes FROM imports").fetchall(), [(OLD, 4)], "imports")
        eq(con.execute("SELECT DISTINCT owner FROM notes").fetchall(), [(1,)], "the owner")
        con.close()


def test_A4_old_store_found_again():
    """The same file back (a start stopped between the commit and the rename leaves it so) is
    only renamed; another file after an import, or any file beside notes already, is refused
    and left as it is."""
    with StateDir() as d:
        data = old_store(NOTES[:2], 3)
        write_old(d, data)
        with start(d) as s:
            s.wait_log(imported_line(d, 2))
        shutil.copy(os.path.join(d, DONE), os.path.join(d, OLD))
        with start(d) as s:
            cookie = session(s)
            expect_notes(s, cookie, NOTES[:2], "notes after the same file came back")
            check(not any("imported" in ln for ln in s.log_lines()), "imported twice")
        eq(sorted(os.listdir(d)), ["notes.db", DONE, "session.key"], "renamed again")
        other = old_store(NOTES, 9)
        path = write_old(d, other)
        refused_start(d, f"another {OLD} was imported already (2 notes); this one is not read: "
                         "move it away")
        with open(path, "rb") as f:
            eq(f.read(), other, "the refused file")
    with StateDir() as d:
        with start(d) as s:
            create(s.connect(), session(s), "new", "")
        path = write_old(d, data)
        refused_start(d, f"the database has notes already, and {OLD} is imported only into one "
                         "without: move it away")


def test_A4_corrupt_old_store_refused():
    """An old store that does not read whole is refused (78), imports nothing and is left as
    it is: the messages the old code gave, and one for text that is not JSON in UTF-8."""
    head = b'{"m0notes":1,"next_id":3,"generation":0}\n'
    note = b'{"id":1,"created":1,"updated":1,"title":"a","body":"b"}\n'
    for text, why in (
        (b"", "the file is empty"),
        (b'{"m0notes":2,"next_id":1,"generation":0}\n', "line 1 is not a version 1 header"),
        (b'{"m0notes":1,"next_id":1}\n', "line 1 is not a version 1 header"),
        (b'{"m0notes":1,"next_id":1,"generation":0}', "line 1 has no end (a file cut short)"),
        (head + note + b'{"id":2,"created":1,"updated":1,"title":"a","bo',
         "line 3 has no end (a file cut short)"),
        (b'{"m0notes":1,"next_id":2,"generation":0}\n'
         b'{"id":2,"created":1,"updated":1,"title":"a","body":"b"}\n',
         "line 2: note id 2 is out of order or not below next_id"),
        (head + note + note, "line 3: note id 1 is out of order or not below next_id"),
        (head + b'{"id":1,"title":"a"}\n', "line 2 is neither a note nor a revoked session"),
        (head + b'{"id":1,"created":1,"updated":1,"title":"a","body":"b","x":1}\n',
         "line 2 is neither a note nor a revoked session"),
        (head + b'{"revoked":"xyz","expiry":1}\n', "line 2 is neither a note nor a revoked session"),
        (head + b'{"id":1,"created":-1,"updated":1,"title":"a","body":"b"}\n',
         "line 2 is neither a note nor a revoked session"),
        (head + b'{"id":1,"created":1,"updated":1,"title":"' + b"x" * 201 + b'","body":"b"}\n',
         "line 2: a title holds at most 200 bytes, a body at most 65536"),
        (head + b'{"id":1,"created":1,"updated":1,"title":"caf\xe9","body":"b"}\n',
         "line 2 is not a JSON object in UTF-8 (column 44)"),
        (head + b'{"id":1,"created":1,"updated":1,"title":"a\\u0000","body":"b"}\n',
         "line 2 is not a JSON object in UTF-8 (column 49)"),
        (head + b'{"id":1,"id":1,"created":1,"updated":1,"title":"a","body":"b"}\n',
         "line 2 is not a JSON object in UTF-8 (column 12)"),
        (head + b"[1]\n", "line 2 is not a JSON object in UTF-8 (column 1)"),
    ):
        with StateDir() as d:
            path = write_old(d, text)
            refused_start(d, why)
            with open(path, "rb") as f:
                eq(f.read(), text, "the store after the refusal")
            con = db(d)
            eq(con.execute("SELECT count(*) FROM notes").fetchall(), [(0,)], f"notes ({why})")
            con.close()


def _imported(d):
    """(notes, distinct ids) and the rows of `imports`, as far as the killed start got."""
    if not os.path.exists(os.path.join(d, "notes.db")):
        return (0, 0), 0
    con = db(d)
    try:
        if not con.execute("SELECT count(*) FROM sqlite_master WHERE name = 'imports'").fetchone()[0]:
            return (0, 0), 0
        return (con.execute("SELECT count(*), count(DISTINCT id) FROM notes").fetchone(),
                con.execute("SELECT count(*) FROM imports").fetchone()[0])
    finally:
        con.close()


def test_A4_old_store_import_survives_kill_9():
    """kill -9 at a moment spread over a start that imports, then a start to the end: whatever
    the moment, the killed start left the notes all imported once or none (never some, never
    twice), and the next start has them all, once."""
    n = 4000
    notes = [(i, 1700000000 + i, 1700000000 + i, b"title %d" % i, b"body %d " % i * 8)
             for i in range(1, n + 1)]
    data = old_store(notes, n + 1)
    with StateDir() as d:
        # How long a start that imports takes here, whatever the build: the kills spread over it.
        write_old(d, data)
        t0 = time.monotonic()
        with start(d) as s:
            took = time.monotonic() - t0
            s.wait_log(imported_line(d, n))
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    outcomes = []
    for rnd in range(6):
        what = f"round {rnd} (seed {seed})"
        with StateDir() as d:
            write_old(d, data)
            s = Server("notes", env=env(d))
            try:
                time.sleep(rng.uniform(0, took))
                s.send_signal(signal.SIGKILL)
                s.wait_exit(10)
            finally:
                s.cleanup()
            count, imports = _imported(d)
            outcomes.append(count[0])
            check(count in ((0, 0), (n, n)), f"{what}: notes after the kill {count}")
            eq(imports, 1 if count[0] else 0, f"{what}: imports")
            check(os.path.exists(os.path.join(d, OLD)) or os.path.exists(os.path.join(d, DONE)),
                  f"{what}: the old file is gone")
            with start(d) as s:
                c = s.connect()
                cookie = session(s)
                listed = call(c, "GET", "/notes", cookie).json()["notes"]
                last = call(c, "GET", f"/notes/{n}", cookie).json()
            eq([(g["id"], g["title"]) for g in listed],
               [(i, f"title {i}") for i in range(1, n + 1)], f"{what}: the notes")
            eq(last, {"id": n, "title": f"title {n}", "body": f"body {n} " * 8,
                      "created": 1700000000 + n, "updated": 1700000000 + n}, f"{what}: a note")
            eq(sorted(f for f in os.listdir(d) if f.startswith("notes.jsonl")), [DONE],
               f"{what}: the old file")
            eq(integrity(d), [("ok",)], f"{what}: integrity_check")
    print(f"  a start took {took:.3f} s; notes found after each kill: {outcomes}, seed {seed}",
          flush=True)


test_A4_old_store_import_survives_kill_9.once = True  # kill -9 in a loop: the plain variant only (run.py, D235)


# ---- kill -9 during writes ----


class _Ledger:
    """What the writers were told: per note id, the content acknowledged last, and the one a
    request in flight may have written instead; and the creates in flight (no id yet)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {}  # id -> (title, body)
        self.inflight = {}  # id -> (title, body) of a PUT not answered
        self.creates = set()  # (title, body) of POSTs not answered

    def reconcile(self, rows, what):
        """rows: {id: (title, body)} as the database has them now. Every acknowledged note is
        there with its content (or the content of the request in flight on it); everything else
        there is a create that was in flight. Then what is there is what was acknowledged."""
        for id_, content in self.acked.items():
            check(id_ in rows, f"{what}: acknowledged note {id_} {content!r} is missing")
            ok = (content, self.inflight.get(id_))
            check(rows[id_] in ok, f"{what}: note {id_} is {rows[id_]!r}, not one of {ok!r}")
        for id_, content in rows.items():
            if id_ not in self.acked:
                check(content in self.creates, f"{what}: note {id_} {content!r} nobody sent")
        self.acked = dict(rows)
        self.inflight.clear()
        self.creates.clear()


def _writer(s, cookie, ledger, rnd, w, stop, rng, errors):
    """Create notes, and now and then replace one of its own, until the server dies. What
    fails is kept with its time in `errors`: only a failure after the kill is expected."""
    mine = []
    i = 0
    try:
        c = s.connect(timeout=5)
        while not stop.is_set():
            i += 1
            content = (f"r{rnd} w{w} #{i}", "\u00e9" * rng.randrange(0, 300) + f" {i}")
            if mine and i % 4 == 0:
                id_ = rng.choice(mine)
                with ledger.lock:
                    ledger.inflight[id_] = content
                r = call(c, "PUT", f"/notes/{id_}", cookie, note_body(*content))
                eq(r.status, 200, f"PUT /notes/{id_}")
                with ledger.lock:
                    ledger.acked[id_] = content
                    del ledger.inflight[id_]
            else:
                with ledger.lock:
                    ledger.creates.add(content)
                r = call(c, "POST", "/notes", cookie, note_body(*content))
                eq(r.status, 201, "POST /notes")
                id_ = int(r.header("Location").rsplit("/", 1)[1])
                with ledger.lock:
                    ledger.acked[id_] = content
                    ledger.creates.discard(content)
                mine.append(id_)
    except Exception as e:  # noqa: BLE001 - the kill ends every writer with a broken connection
        errors.append((time.monotonic(), w, e))


def _rows(d):
    con = db(d)
    try:
        return {i: (t, b) for i, t, b in con.execute("SELECT id, title, body FROM notes")}
    finally:
        con.close()


def test_A4_acknowledged_notes_survive_kill_9():
    """Rounds of: start (READY), four writers on two loops and their pools, kill -9 at a random
    moment, restart. Every note whose POST got its 201 (and every PUT its 200) is there with
    its exact content, through the app and in the file, and integrity_check says ok. 20 rounds
    with M0_HEAVY=1 (contrib/test-all's plain run), 3 otherwise."""
    rounds = 20 if os.environ.get("M0_HEAVY") == "1" else 3
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    ledger = _Ledger()
    extra = {"M0_THREADS": "2", "M0_BLOCKING_THREADS": "2", "M0_NOTES_MAX_NOTES": "100000",
             "M0_NOTES_MAX_BYTES": str(256 << 20)}
    acked_total = 0
    with StateDir() as d:
        cookie = None
        for rnd in range(rounds + 1):
            s = start(d, **extra)
            try:
                cookie = cookie or session(s)
                what = f"round {rnd} (seed {seed})"
                rows = _rows(d)
                ledger.reconcile(rows, what)
                eq(integrity(d), [("ok",)], f"{what}: integrity_check")
                # Through the app too: the ids and titles of all, the bodies of the last round's.
                c = s.connect()
                listed = {n["id"]: n["title"] for n in call(c, "GET", "/notes", cookie).json()["notes"]}
                eq(listed, {i: t for i, (t, _) in rows.items()}, f"{what}: the list")
                for id_ in [i for i, (t, _) in rows.items() if t.startswith(f"r{rnd - 1} ")]:
                    r = call(c, "GET", f"/notes/{id_}", cookie)
                    eq((r.status, r.json()["body"]), (200, rows[id_][1]), f"{what}: note {id_}")
                if rnd == rounds:
                    break
                before = len(ledger.acked)
                seeds = [rng.random() for _ in range(4)]
                kill_during(s, lambda w, stop, errors: _writer(
                    s, cookie, ledger, rnd, w, stop, random.Random(seeds[w]), errors),
                    4, rng.uniform(0.05, 0.5), what)
                acked_total += len(ledger.acked) - before
            finally:
                s.cleanup()
    check(acked_total >= rounds, f"only {acked_total} notes acknowledged in {rounds} rounds")
    print(f"  {rounds} rounds, {acked_total} notes acknowledged, seed {seed}", flush=True)
