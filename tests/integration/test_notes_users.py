# SPDX-License-Identifier: MIT
"""notes' users (SPEC A4 revised): `notes --hash-password` and `notes --add-user`, each user
seeing and changing only their own notes (another's is a 404, by id or by guessing, with an
expired or revoked cookie too), bounds and session generations per user, and a login whose
time does not tell which names are users. doc/notes.md is the contract."""

import json
import os
import statistics
import time

from m0test import check, eq
from notes_util import (ADMIN_PW, FULL, HASH_RX, LOG, NO_SUCH_NOTE, WRONG_LOGIN,
                        StateDir, add_user, all_notes, call, command, craft, create, json_answer,
                        key, login, make_hash, note_body, session, start, unauthorized)

# ThreadSanitizer runs this module (the pool's SQLite): run.py, D235.
THREADED = True

DIR_FIX = "(run under systemd with StateDirectory= or set M0_NOTES_DIR to a writable directory)"


# ---- the commands ----


def test_A4_hash_password_command():
    """One Argon2id string on stdout, at the cost asked; the password is stdin's, less one
    trailing newline."""
    for cost, m, t in (("min", 8, 1), (None, 65536, 2)):
        rc, out, err = command(["--hash-password"], b"pw\n",
                               {"M0_NOTES_HASH_COST": cost} if cost else {})
        eq((rc, err), (0, ""), f"exit status and stderr, cost {cost}")
        m_ = HASH_RX.fullmatch(out[:-1])
        check(m_ and out.endswith("\n"), f"stdout {out!r}")
        eq((int(m_.group(1)), int(m_.group(2))), (m, t), f"m= and t= of cost {cost}")
    check(make_hash("pw") != make_hash("pw"), "two hashes of one password are the same (no salt?)")
    for stdin, why in ((b"", "the password on stdin is empty"),
                       (b"\n", "the password on stdin is empty"),
                       (b"a\x00b\n", "the password on stdin holds a NUL byte"),
                       (b"a" * 1025, "the password on stdin is longer than 1024 bytes")):
        rc, out, err = command(["--hash-password"], stdin, {"M0_NOTES_HASH_COST": "min"})
        eq((rc, out, err), (2, "", f"notes: {why}\n"), f"stdin {stdin[:8]!r}")
    rc, out, _ = command(["--hash-password"], b"a" * 1024 + b"\r\n", {"M0_NOTES_HASH_COST": "min"})
    eq(rc, 0, "1024 bytes and a CRLF")
    rc, out, err = command(["--hash-password", "x"], b"pw\n")
    eq((rc, out, err), (2, "", "notes: usage: notes --hash-password < password\n"), "an argument")
    rc, out, err = command(["--hash-password"], b"pw\n", {"M0_NOTES_HASH_COST": "cheap"})
    eq((rc, out, err), (78, "", "notes: M0_NOTES_HASH_COST='cheap' is not min, interactive or "
                        "moderate (set M0_NOTES_HASH_COST to one of them, or unset it for "
                        "interactive)\n"), "a cost it does not know")
    # The newline was dropped: the password is "pw", not "pw\n" (CRLF too).
    for line_end in (b"\n", b"\r\n"):
        rc, out, _ = command(["--hash-password"], b"pw" + line_end, {"M0_NOTES_HASH_COST": "min"})
        with StateDir() as d, start(d, M0_NOTES_ADMIN_HASH=out.strip()) as s:
            c = s.connect()
            eq(login(c, "pw").status, 204, f"the password without {line_end!r}")
            eq(login(c, "pw" + line_end.decode()).status, 401, f"the password with {line_end!r}")


def test_A4_add_user_command():
    with StateDir() as d:
        add_user(d, "alice", "alice's password")
        # The database is made by the command; the key is the service's to make.
        eq(sorted(os.listdir(d)), ["notes.db"], "files after --add-user")
        eq(os.stat(os.path.join(d, "notes.db")).st_mode & 0o777, 0o600, "the database's mode")
        run = lambda args, stdin=b"pw\n", **e: command(  # noqa: E731
            args, stdin, {"M0_NOTES_DIR": d, "M0_NOTES_HASH_COST": "min", **e})
        eq(run(["--add-user", "alice"]), (1, "", "notes: the user alice exists already\n"),
           "a second alice")
        eq(run(["--add-user", "admin"]),
           (2, "", "notes: the user admin's password is M0_NOTES_ADMIN_HASH (make it with notes "
                   "--hash-password)\n"), "admin")
        for bad in ("Alice", "-a", ".a", "_a", "a b", "", "a" * 65, "al/ice", "é"):
            eq(run(["--add-user", bad]),
               (2, "", f"notes: '{bad}' is not a user name: 1 to 64 of a-z, 0-9, '.', '_' and "
                       "'-', the first a letter or a digit\n"), f"the name {bad!r}")
        eq(run(["--add-user"]), (2, "", "notes: usage: notes --add-user NAME < password\n"),
           "no name")
        eq(run(["--add-user", "a", "b"]), (2, "", "notes: usage: notes --add-user NAME < password\n"),
           "two names")
        eq(run(["--add-user", "bob"], b""), (2, "", "notes: the password on stdin is empty\n"),
           "no password")
        rc, out, err = command(["--add-user", "bob"], b"pw\n", {"M0_NOTES_HASH_COST": "min"})
        eq((rc, out, err), (78, "", "notes: no state directory: neither M0_NOTES_DIR nor "
                            f"STATE_DIRECTORY is set {DIR_FIX}\n"), "no directory")
        missing = os.path.join(d, "missing")
        eq(run(["--add-user", "bob"], M0_NOTES_DIR=missing),
           (78, "", f"notes: M0_NOTES_DIR='{missing}': No such file or directory {DIR_FIX}\n"),
           "a missing directory")
        for name in ("a", "a.b_c-1", "9" * 64):
            add_user(d, name, "pw")
        # STATE_DIRECTORY's first path, as the service reads it.
        rc, _, err = command(["--add-user", "carol"], b"pw\n",
                             {"STATE_DIRECTORY": f"{d}:/nonexistent", "M0_NOTES_HASH_COST": "min"})
        eq((rc, err), (0, f"notes: added the user carol to {d}/notes.db\n"), "STATE_DIRECTORY")
        with start(d) as s:
            for name, pw in (("alice", "alice's password"), ("a", "pw"), ("carol", "pw")):
                session(s, name, pw)
            # Added while it runs: the service sees the user at once.
            add_user(d, "dave", "dave's password")
            session(s, "dave", "dave's password")
            json_answer(login(s.connect(), "pw", "dave"), 401, WRONG_LOGIN, "dave, wrong password")


def test_A4_add_user_as_root_for_a_service_user():
    """Run by root in a directory another user owns (a DynamicUser= service's), --add-user
    makes the database that user's, so the service can still write it."""
    if os.geteuid() != 0:
        print("SKIP: not root: the ownership of a database root makes is not tested", flush=True)
        return
    with StateDir() as d:
        os.chown(d, 54321, 54322)
        add_user(d, "alice", "pw")
        st = os.stat(os.path.join(d, "notes.db"))
        eq((st.st_uid, st.st_gid), (54321, 54322), "the owner of notes.db")
        eq(sorted(os.listdir(d)), ["notes.db"], "files left (no -wal or -shm of root's)")


# ---- each user's notes are theirs alone ----


def _users(d):
    add_user(d, "alice", "alice pw")
    add_user(d, "bob", "bob pw")


def test_A4_users_see_only_their_own_notes():
    """Alice can never read, list, change or delete Bob's note: by its id, by guessing every
    id, with her cookie made to name Bob, or with Bob's expired or revoked cookie. The answer
    is the same 404 as a note that never existed; Bob's notes are untouched after it all."""
    with StateDir() as d:
        _users(d)
        with start(d) as s:
            c = s.connect()
            alice, bob = session(s, "alice", "alice pw"), session(s, "bob", "bob pw")
            a1, _ = create(c, alice, "alice 1", "hers")
            b1, _ = create(c, bob, "bob 1", "his secret")
            a2, _ = create(c, alice, "alice 2", "hers too")
            b2, _ = create(c, bob, "bob 2", "his other secret")
            eq((a1, b1, a2, b2), (1, 2, 3, 4), "ids: one sequence for every user")
            bobs = all_notes(s, bob)
            eq([n[0] for n in bobs], [b1, b2], "Bob's notes")
            eq([n[0] for n in all_notes(s, alice)], [a1, a2], "Alice's list")
            eq(json.loads(call(c, "GET", "/notes", session(s)).body), {"notes": []},
               "admin's list")
            never = call(c, "GET", "/notes/999999", alice)
            json_answer(never, 404, NO_SUCH_NOTE, "a note that never was")
            for id_ in (b1, b2):
                for method, body in (("GET", None), ("HEAD", None), ("DELETE", None),
                                     ("PUT", note_body("mine now", "")), ("PUT", b"{"),
                                     ("PATCH", None)):
                    r = call(c, method, f"/notes/{id_}", alice, body)
                    what = f"Alice's {method} of Bob's note {id_}"
                    if method == "HEAD":
                        eq((r.status, r.body), (404, b""), what)
                        eq(r.header("Content-Length"), str(len(NO_SUCH_NOTE)), what)
                    else:
                        json_answer(r, 404, NO_SUCH_NOTE, what)
                    eq(sorted(r.names()), sorted(never.names()), f"{what}: header names")
            # Guessing: every id up to past the last gives Alice hers and nothing else.
            found = [i for i in range(1, 12) if call(c, "GET", f"/notes/{i}", alice).status == 200]
            eq(found, [a1, a2], "the ids Alice can read")
            # Alice's cookie made to name Bob keeps its MAC, which no longer matches.
            _, exp, nonce, m = alice.split(".")
            bob_uid = bob.split(".")[0]
            unauthorized(call(c, "GET", f"/notes/{b1}", f"{bob_uid}.{exp}.{nonce}.{m}"),
                         "Alice's cookie naming Bob")
            # Bob's cookies that have ended: expired (validly signed for Bob), revoked.
            k = key(d)
            expired = craft(k, int(time.time()) - 1, uid=int(bob_uid))
            eq(call(c, "POST", "/logout", bob).status, 204, "Bob's logout")
            for cookie, what in ((expired, "expired"), (bob, "revoked")):
                for method, path, body in (("GET", "/notes", None), ("GET", f"/notes/{b1}", None),
                                           ("PUT", f"/notes/{b1}", note_body("x", "y")),
                                           ("DELETE", f"/notes/{b2}", None),
                                           ("POST", "/notes", note_body("x", "y"))):
                    unauthorized(call(c, method, path, cookie, body),
                                 f"{method} {path} with Bob's {what} cookie")
            eq(all_notes(s, session(s, "bob", "bob pw")), bobs, "Bob's notes after it all")
        with start(d) as s:
            # After a restart, the same: the owner is in the database, not in memory.
            eq(call(s.connect(), "GET", f"/notes/{b1}", session(s, "alice", "alice pw")).status,
               404, "Bob's note for Alice after a restart")


def test_A4_bounds_and_generations_are_per_user():
    """M0_NOTES_MAX_NOTES is each user's; so is the revocation list: Alice filling hers ends
    her sessions, not Bob's."""
    with StateDir() as d:
        _users(d)
        with start(d, M0_NOTES_MAX_NOTES="1", M0_NOTES_MAX_REVOKED="1") as s:
            c = s.connect()
            alice, bob = session(s, "alice", "alice pw"), session(s, "bob", "bob pw")
            create(c, alice, "a", "")
            json_answer(call(c, "POST", "/notes", alice, note_body("a2", "")), 507, FULL,
                        "Alice's second note")
            create(c, bob, "b", "")
            a1, a2 = session(s, "alice", "alice pw"), session(s, "alice", "alice pw")
            eq(call(c, "POST", "/logout", a1).status, 204, "Alice's first logout")
            eq(call(c, "POST", "/logout", a2).status, 204, "Alice's second logout")
            s.wait_log(LOG + r"user 2 has 1 revoked sessions, the bound "
                       r"\(M0_NOTES_MAX_REVOKED\): every session of theirs was ended$")
            unauthorized(call(c, "GET", "/notes", alice), "Alice's other session")
            eq(call(c, "GET", "/notes", bob).status, 200, "Bob's session")


# ---- login timing ----


def _login_time(c, user, password):
    t0 = time.perf_counter()
    r = login(c, password, user)
    dt = time.perf_counter() - t0
    json_answer(r, 401, WRONG_LOGIN, f"login of {user!r}")
    return dt


def test_A4_login_timing_does_not_tell_users_apart():
    """A wrong password for a user that exists, and any password for one that does not, each
    cost one Argon2id verification: for a name that is no user, a dummy hash made with admin's
    parameters is verified. Compared: the medians of alternating samples, within a generous
    ratio. This is no test of speed: a login that skipped the verification for unknown names
    would take well under 1% of one that verifies (a 64 MiB, 2-pass hash, libsodium's
    interactive cost, is used here because at the min cost a verification is too short to stand
    out of a request's own time), and fail it by a factor of ~100."""
    with StateDir() as d:
        hash_ = make_hash(ADMIN_PW, "interactive")
        add_user(d, "alice", "alice pw", "interactive")
        with start(d, M0_NOTES_ADMIN_HASH=hash_) as s:
            c = s.connect()
            samples = {"alice": [], "admin": [], "nobody": [], "NotAName!": []}
            for _ in range(7):
                for user in samples:
                    samples[user].append(_login_time(c, user, "wrong"))
            med = {u: statistics.median(v) for u, v in samples.items()}
            for unknown in ("nobody", "NotAName!"):
                for known in ("alice", "admin"):
                    ratio = med[unknown] / med[known]
                    check(0.5 < ratio < 2.0,
                          f"median login of {unknown!r} / of {known!r} = {ratio:.3f} "
                          f"(medians, ms: { {u: round(m * 1e3, 2) for u, m in med.items()} })")
            # The right password still works, in about the same time.
            eq(login(c, "alice pw", "alice").status, 204, "Alice's login")
            eq(login(c, ADMIN_PW).status, 204, "admin's login")


test_A4_login_timing_does_not_tell_users_apart.once = True  # a timing comparison: the plain variant only (run.py, D235)


# run.py runs it alone: it compares timings.
test_A4_login_timing_does_not_tell_users_apart.serial = True
