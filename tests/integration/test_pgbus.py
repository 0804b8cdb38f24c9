# SPDX-License-Identifier: MIT
"""The bus shared through PostgreSQL (SPEC G1–G7), against a real PostgreSQL 15 started for
each test (pgtest.Postgres: initdb in a temporary directory, a Unix socket only) and driven
through the module's interface by tests/pg/pgbus-drive (pgtest.Driver). Every test checks the
exact sequence: ids, channels, data, order, counts, the state and the log lines."""

import os
import re
import select
import socket
import threading
import time

from m0test import check, eq, run_app, tool
from pgtest import Driver, Postgres

# ThreadSanitizer runs this module (the PostgreSQL bus thread): run.py, D235.
THREADED = True

HEAVY = os.environ.get("M0_HEAVY") == "1"
RETAIN_LOCK = 468963194226  # M0__PGBUS_LOCK_RETAIN
TERMINATED = "FATAL: terminating connection due to administrator command"


def ids(events):
    return [e[0] for e in events]


def datas(events):
    return [e[3] for e in events]


def ready(d, timeout=30):
    eq(d.wait(r"^READY ", timeout), "READY ok", f"{d.name}: the schema checked")


def start(pg, name, *args):
    d = Driver(pg.uri, name=name, args=["--wait-ready", "20000", *args])
    ready(d)
    return d


def expect_gap_free(events, first, n, what):
    """`events` are ids first..first+n-1 exactly, in order, each once (N2, G1)."""
    eq(ids(events), list(range(first, first + n)), f"{what}: the ids")


def own(events, prefix):
    return [d for d in datas(events) if d.startswith(prefix + "-")]


def test_G7_harness_unix_socket_only_and_always_stopped():
    """The harness's server listens on no TCP address, only on the socket in its directory, and
    is stopped and removed when the test inside its block fails."""
    caught = None
    try:
        with Postgres() as pg:
            eq(pg.value("SHOW listen_addresses"), "", "no TCP address")
            eq(pg.value("SHOW unix_socket_directories"), pg.dir, "the socket's directory")
            check(os.path.exists(os.path.join(pg.dir, ".s.PGSQL.5432")), "the socket exists")
            eq(pg.value("SHOW server_version_num")[:2], "15", "PostgreSQL 15")
            eq(pg.value("SELECT current_user"), "postgres", "the unprivileged user")
            with open(os.path.join(pg.data, "postmaster.pid")) as f:
                pid = int(f.readline())
            where = pg.dir
            raise ValueError("a failing test")
    except ValueError as e:
        caught = e
    eq(str(caught), "a failing test", "the test's own failure comes through")
    check(not os.path.exists(where), "the directory was removed")
    try:
        with open(f"/proc/{pid}/stat") as f:
            alive = f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has stopped
    except FileNotFoundError:
        alive = False
    check(not alive, f"the postmaster {pid} was stopped")


def test_G1_three_drivers_one_gap_free_sequence():
    """Three publishers at once: every driver delivers the same ids 1..600, each event once,
    and each publisher's events in the order it published them."""
    with Postgres() as pg:
        ds = [start(pg, f"d{i}") for i in range(3)]
        for i, d in enumerate(ds):
            d.send(f"pubn 200 room:{i},all ev{i} p{i} 400")
        for d in ds:
            eq(d.wait(r"^PN "), "PN accepted=200 refused=0", f"{d.name} published")
        seqs = [d.wait_events(600) for d in ds]
        for d, s in zip(ds, seqs):
            expect_gap_free(s, 1, 600, d.name)
            for i in range(3):
                eq(own(s, f"p{i}"), [f"p{i}-{k}" for k in range(1, 201)],
                   f"{d.name}: p{i}'s events in its order")
        eq(seqs[1], seqs[0], "d1 saw d0's sequence")
        eq(seqs[2], seqs[0], "d2 saw d0's sequence")
        for e in seqs[0]:
            i = int(e[2][2:])
            k = int(e[3].split("-")[1])
            eq(e[1], f"room:{i}" if k % 2 else "all", f"event {e[0]}'s channel")
        eq(pg.value("SELECT count(*) || ' ' || min(id) || ' ' || max(id) FROM m0_bus_events"),
           "600 1 600", "the table")
        eq(pg.value("SELECT last_id FROM m0_bus_counter"), "600", "the counter")
        for d in ds:
            st = d.stats_when_published(200)
            eq((st["published"], st["delivered"], st["lost"], st["queued"]), (200, 600, 0, 0),
               f"{d.name}'s counts")
            eq(d.quit(), 0, f"{d.name} exits 0")


def test_G1_batches_many_events_per_transaction():
    """5000 events published at once go in few transactions (one now() each), none over the
    batch of 1000, and arrive in order."""
    with Postgres() as pg:
        d = start(pg, "d")
        eq(d.ask("pubn 5000 a,b ev x", r"^PN "), "PN accepted=5000 refused=0", "accepted")
        s = d.wait_events(5000)
        expect_gap_free(s, 1, 5000, "d")
        eq(datas(s), [f"x-{k}" for k in range(1, 5001)], "the data, in order")
        st = d.stats_when_published(5000)
        eq(st["published"], 5000, "published")
        txs = int(pg.value("SELECT count(DISTINCT time) FROM m0_bus_events"))
        eq(st["batches"], txs, "one transaction per batch")
        check(st["batches"] < 500, f"batched: {st['batches']} transactions for 5000 events")
        big = int(pg.value("SELECT max(n) FROM (SELECT count(*) n FROM m0_bus_events "
                           "GROUP BY time) t"))
        check(big <= 1000, f"a batch holds at most 1000 events, not {big}")
        eq(d.quit(), 0, "exit")


def test_G1_trap_a_reader_never_passes_an_id_that_commits_later():
    """A transaction holds id 4 open (it took it from the counter and inserted its row, not yet
    committed). A publisher behind it waits on the counter's row lock, so no id past 4 exists
    yet; the reader delivers nothing past 3. At the commit it delivers 4, then 5..14, once."""
    with Postgres() as pg:
        pub = start(pg, "pub")
        rd = start(pg, "rd")
        eq(pub.ask("pubn 3 a ev x", r"^PN "), "PN accepted=3 refused=0", "the first three")
        expect_gap_free(rd.wait_events(3), 1, 3, "rd before")
        with pg.session() as s:
            s.run("BEGIN;")
            eq(s.run("UPDATE m0_bus_counter SET last_id = last_id + 1 RETURNING last_id;"),
               ["4"], "the session took id 4")
            s.run("INSERT INTO m0_bus_events (id, channel, event, data) "
                  "VALUES (4, 'a', 'slow', 'held');")
            eq(pub.ask("pubn 10 a ev y", r"^PN "), "PN accepted=10 refused=0", "ten more")
            deadline = time.monotonic() + 20
            while True:
                waits = pg.sql("SELECT wait_event_type FROM pg_stat_activity "
                               "WHERE application_name = 'm0/pub/publish' AND state = 'active'")
                if waits == [["Lock"]] or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            eq(waits, [["Lock"]], "the publisher's transaction waits on the counter's lock")
            rd.ask("replay 0 100", r"^RD ")  # a round trip through the bus thread, then:
            expect_gap_free(rd.events(), 1, 3, "rd while id 4 is open")
            eq(pg.value("SELECT max(id) FROM m0_bus_events"), "3", "nothing past 3 committed")
            s.run("COMMIT;")
        for d in (rd, pub):
            ev = d.wait_events(14)
            expect_gap_free(ev, 1, 14, d.name)
            eq(ev[3], (4, "a", "slow", "held"), f"{d.name}: id 4 is the held one")
            eq(datas(ev[4:]), [f"y-{k}" for k in range(1, 11)], f"{d.name}: then 5..14")
        eq(rd.quit(), 0, "rd exits")
        eq(pub.quit(), 0, "pub exits")


def publish_through(pg, drivers, fault, n=600, rate=300):
    """Each driver publishes n events at `rate`/s while fault() runs; every driver then
    delivers all of them once, in id order, with no gap, every publisher's in its order."""
    for i, d in enumerate(drivers):
        d.send(f"pubn {n} c{i} ev p{i} {rate}")
    fault()
    for d in drivers:
        eq(d.wait(r"^PN ", 120), f"PN accepted={n} refused=0", f"{d.name} published")
    total = n * len(drivers)
    seqs = [d.wait_events(total, 120) for d in drivers]
    for d, s in zip(drivers, seqs):
        expect_gap_free(s, 1, total, d.name)
        for i in range(len(drivers)):
            eq(own(s, f"p{i}"), [f"p{i}-{k}" for k in range(1, n + 1)],
               f"{d.name}: p{i}'s events once each, in order")
    for s in seqs[1:]:
        eq(s, seqs[0], "one sequence on every driver")
    eq(pg.value("SELECT count(*) FROM m0_bus_events"), str(total), "the table holds each once")
    return seqs


def wait_terminated(pg, name, timeout=20):
    """pg_terminate_backend() of `name` once it is connected; how many were terminated."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n = pg.terminate(name)
        if n:
            return n
        time.sleep(0.05)
    return 0


def test_G3_terminate_the_publishing_connection():
    """pg_terminate_backend() of the publishing connection, twice, while it publishes: the
    state names the server's reason, the log says when it went and came back, and every event
    arrives once, in order."""
    with Postgres() as pg:
        d0, d1 = start(pg, "t0"), start(pg, "t1")

        def fault():
            time.sleep(0.5)
            eq(wait_terminated(pg, "m0/t0/publish"), 1, "one backend terminated")
            d0.wait(r"^S bus: up$", 20, start=len(d0.lines))
            time.sleep(0.5)
            eq(wait_terminated(pg, "m0/t0/publish"), 1, "again")

        publish_through(pg, [d0, d1], fault)
        states = d0.states()
        check(f"bus: reconnecting ({TERMINATED})" in states, f"the state said why: {states}")
        eq(states[-1], "bus: up", "up at the end")
        lost = [line for line in d0.log if "lost the database" in line]
        eq(lost[0], "m0[pgbus-drive]: bus: lost the database (publishing connection: "
           f"{TERMINATED}); serving goes on, publishes queue up to 10000", "the log line")
        back = [line for line in d0.log if "the database is back" in line]
        eq(len(back), len(lost), "a line for each return")
        check(re.fullmatch(r"m0\[pgbus-drive\]: bus: the database is back after \d+\.\d s; "
                           r"the \d+ events? published meanwhile go out in order, and every "
                           r"event after id \d+ is read", back[0]), back[0])
        eq(len(lost), 2, "two losses logged")
        eq(d0.stats()["reconnects"], 2, "two reconnections")
        eq(d1.states(), ["bus: up"], "the other host never noticed")
        eq(d0.quit(), 0, "exit")
        eq(d1.quit(), 0, "exit")


def test_G3_terminate_the_listening_connection():
    """pg_terminate_backend() of the listening connection: it comes back, reads every row past
    the last id it delivered, and nothing is missed or repeated."""
    with Postgres() as pg:
        d0, d1 = start(pg, "l0"), start(pg, "l1")

        def fault():
            time.sleep(0.5)
            eq(wait_terminated(pg, "m0/l1/listen"), 1, "the listener terminated")
            d1.wait(r"^S bus: up$", 20, start=len(d1.lines))
            time.sleep(0.3)
            eq(wait_terminated(pg, "m0/l1/listen"), 1, "again")

        publish_through(pg, [d0, d1], fault)
        lost = [line for line in d1.log if "lost the database" in line]
        eq(lost[0], "m0[pgbus-drive]: bus: lost the database (listening connection: "
           f"{TERMINATED}); serving goes on, publishes queue up to 10000", "the log line")
        eq(d1.stats()["reconnects"], 2, "two reconnections")
        eq(d0.quit(), 0, "exit")
        eq(d1.quit(), 0, "exit")


def test_G3_database_restart():
    """A database restart (fast shutdown, both connections of every host cut) while two hosts
    publish: all events once, in order, on both."""
    with Postgres() as pg:
        ds = [start(pg, "r0"), start(pg, "r1")]

        def fault():
            time.sleep(0.7)
            pg.restart()

        publish_through(pg, ds, fault)
        for d in ds:
            check(any(s.startswith("bus: reconnecting (") for s in d.states()),
                  f"{d.name} said it was reconnecting: {d.states()}")
            eq(d.states()[-1], "bus: up", f"{d.name} is up again")
            eq(d.quit(), 0, "exit")


def test_G3_outage():
    """The database away for 30 s (M0_HEAVY=1; 4 s otherwise): publishes queue, the state says
    `bus: reconnecting (<libpq's reason>)`, the log says when it went and came back, and every
    event arrives once, in order, once it is back."""
    seconds = 30 if HEAVY else 4
    with Postgres() as pg:
        ds = [start(pg, "o0"), start(pg, "o1")]
        for d in ds:
            eq(d.ask("pubn 50 before ev b", r"^PN "), "PN accepted=50 refused=0", "before")
        for d in ds:
            d.wait_events(100)
        sock = os.path.join(pg.dir, ".s.PGSQL.5432")
        why = (f'connection to server on socket "{sock}" failed: No such file or directory')

        def during():
            for d in ds:
                d.wait(re.escape(f"S bus: reconnecting ({why})"), 30)
                eq(d.ask("pubn 100 during ev " + d.name, r"^PN "), "PN accepted=100 refused=0",
                   "queued during the outage")
                eq(d.state(), f"bus: reconnecting ({why})", "the state during the outage")
                eq(d.stats()["queued"], 100, "queued")

        t0 = time.monotonic()
        pg.outage(seconds, during)
        for d in ds:
            ev = d.wait_events(300, 60)
            expect_gap_free(ev, 1, 300, d.name)
            for o in ds:
                eq(own(ev, o.name), [f"{o.name}-{k}" for k in range(1, 101)],
                   f"{d.name}: {o.name}'s queued events in order")
            eq(d.states()[-1], "bus: up", "up")
            lost = [line for line in d.log if "lost the database" in line]
            eq(len(lost), 1, f"{d.name}: one line when it went: {d.log}")
            check(lost[0].startswith("m0[pgbus-drive]: bus: lost the database ("), lost[0])
            # The log is another pipe than the events: its line may come after them.
            d.wait("the database is back", 30, stream="err")
            back = [line for line in d.log if "the database is back" in line]
            eq(len(back), 1, f"{d.name}: one line when it came back")
            m = re.search(r"back after (\d+\.\d) s; the 100 events published meanwhile go out "
                          r"in order, and every event after id 100 is read$", back[0])
            check(m, back[0])
            check(seconds - 1 <= float(m.group(1)) <= time.monotonic() - t0 + 1,
                  f"the outage's length: {back[0]}")
            # Its rows can come back through the listener before the publishing connection has
            # read its COMMIT's answer, when they leave the queue (stats_when_published).
            eq(d.stats_when_published(100)["queued"], 0, "nothing left queued")
        for d in ds:
            eq(d.quit(), 0, "exit")


test_G3_outage.timeout = 150


def big_data(i, size):
    head = f"{i}:"
    return head + "".join(chr(ord("a") + (i + j) % 26) for j in range(len(head), size))


def test_G1_large_events_cross_partial_writes():
    """Events of 300 KB, batched up to 1 MiB a transaction: the queries go out in partial
    writes (libpq's non-blocking flush) and every byte comes back, quotes and backslashes
    included."""
    with Postgres() as pg:
        d = start(pg, "big")
        eq(d.ask("pubbig 12 big 300000", r"^PN ", 120), "PN accepted=12 refused=0", "queued")
        eq(d.ask("pub q - it's \\ a \"quote\" ''", r"^P "), "P 0", "quotes")
        ev = d.wait_events(13, 120)
        expect_gap_free(ev, 1, 13, "big")
        for i in range(1, 13):
            eq(len(ev[i - 1][3]), 300000, f"event {i}'s length")
            check(ev[i - 1][3] == big_data(i, 300000), f"event {i}'s bytes")
        eq(ev[12], (13, "q", None, "it's \\ a \"quote\" ''"), "quotes and backslashes")
        st = d.stats()
        check(st["batches"] >= 4, f"at most 1 MiB a transaction: {st['batches']} batches")
        eq(pg.value("SELECT sum(length(data)) FROM m0_bus_events WHERE channel = 'big'"),
           "3600000", "the table holds every byte")
        eq(d.quit(), 0, "exit")


def test_G2_stop_is_bounded_while_the_database_holds_a_batch():
    """A batch waits on the counter's lock; `quit 300` stops within its flush bound anyway, says
    how many accepted events were not committed, and cancels the batch so that it cannot commit
    once the lock is released."""
    with Postgres() as pg:
        d = start(pg, "stop")
        with pg.session() as s:
            s.run("BEGIN;")
            s.run("LOCK TABLE m0_bus_counter IN EXCLUSIVE MODE;")
            eq(d.ask("pubn 5 a ev x", r"^PN "), "PN accepted=5 refused=0", "queued")
            t0 = time.monotonic()
            d.send("quit 300")
            eq(d.wait(r"^Q "), "Q left=5", "five not committed")
            eq(d.wait_exit(10), 0, "exit 0")
            took = time.monotonic() - t0
            check(took < 3, f"stopped in {took:.2f}s")
            deadline = time.monotonic() + 20
            while pg.backends("m0/stop/") and time.monotonic() < deadline:
                time.sleep(0.05)
            eq(pg.backends("m0/stop/"), [], "the canceled batch's backend is gone")
            s.run("COMMIT;")
        eq(pg.value("SELECT count(*) FROM m0_bus_events"), "0", "the batch was rolled back")


def test_G2_queue_bound_counts_refusals():
    """--queue 100 while the counter is locked: 100 publishes are accepted, 50 fail with
    -EAGAIN and are counted; released, the 100 arrive in order."""
    with Postgres() as pg:
        d = start(pg, "q", "--queue", "100")
        with pg.session() as s:
            s.run("BEGIN;")
            s.run("LOCK TABLE m0_bus_counter IN EXCLUSIVE MODE;")
            eq(d.ask("pubn 150 a ev x", r"^PN "), "PN accepted=100 refused=50", "the bound")
            eq(d.ask("pub a ev one-more", r"^P "), "P -11", "-EAGAIN")
            st = d.stats()
            eq((st["queued"], st["refused"], st["published"]), (100, 51, 0), "counted")
            s.run("COMMIT;")
        ev = d.wait_events(100)
        expect_gap_free(ev, 1, 100, "d")
        eq(datas(ev), [f"x-{k}" for k in range(1, 101)], "the accepted ones, in order")
        # The listening connection can deliver the rows before the publishing one has read its
        # COMMIT's answer: the queue has room once the batch counts as published.
        st = d.stats_when_published(100)
        eq((st["queued"], st["published"]), (0, 100), "the batch committed")
        eq(d.ask("pub a ev after", r"^P "), "P 0", "room again")
        eq(d.wait_events(101)[-1], (101, "a", "ev", "after"), "and it arrives")
        eq(d.quit(), 0, "exit")


def replay(d, command):
    """The rows and the closing line of one replay."""
    start_at = len(d.lines)
    done = d.ask(command, r"^RD ")
    with d.cond:
        lines = d.lines[start_at:]
    rows = [tuple(line.split(" ", 4)) for line in lines if line.startswith("R ")]
    return [(int(r[1]), r[2], r[3], r[4]) for r in rows], done


def test_G4_replay_from_the_table():
    """Replay after an id, every channel or some (exact names and prefix patterns), the newest
    `max` when more match, capped by --replay-max; a host that started later replays what it
    never delivered."""
    with Postgres() as pg:
        d = start(pg, "a", "--replay-max", "7")
        chans = ["room:1", "room:2", "other"]
        for k in range(1, 31):
            eq(d.ask(f"pub {chans[(k - 1) % 3]} ev v{k}", r"^P "), "P 0", "published")
        d.wait_events(30)
        rows, done = replay(d, "replay 0 5")
        eq(ids(rows), [26, 27, 28, 29, 30], "the newest five")
        eq(done, "RD err=0 n=5 truncated=1 upto=30", "truncated")
        rows, done = replay(d, "replay 0 100")
        eq(ids(rows), list(range(24, 31)), "capped by --replay-max 7")
        eq(done, "RD err=0 n=7 truncated=1 upto=30", "")
        rows, done = replay(d, "replay 20 7 room:1")
        eq(rows, [(22, "room:1", "ev", "v22"), (25, "room:1", "ev", "v25"),
                  (28, "room:1", "ev", "v28")], "one channel after 20")
        eq(done, "RD err=0 n=3 truncated=0 upto=30", "")
        rows, done = replay(d, "replay 18 7 room:* nothing")
        eq(ids(rows), [20, 22, 23, 25, 26, 28, 29], "a prefix: the newest 7 of room:* after 18")
        eq(done, "RD err=0 n=7 truncated=1 upto=30", "")
        rows, done = replay(d, "replay 24 7 other room:2")
        eq(ids(rows), [26, 27, 29, 30], "two exact names")
        rows, done = replay(d, "replay 30 7")
        eq((rows, done), ([], "RD err=0 n=0 truncated=0 upto=30"), "nothing after the newest")
        rows, done = replay(d, "replay 0 7 bad\x01name")
        eq(done, "RD err=-22 n=0 truncated=0 upto=0", "a channel name that is not one")

        late = start(pg, "late")
        rows, done = replay(late, "replay 25 100")
        eq(ids(rows), [26, 27, 28, 29, 30], "the late host replays from the table")
        eq(rows[0], (26, "room:2", "ev", "v26"), "the row itself")
        eq(done, "RD err=0 n=5 truncated=0 upto=30", "up to its own start")
        eq(d.ask("pub other ev v31", r"^P "), "P 0", "one more")
        eq(late.wait_events(1), [(31, "other", "ev", "v31")], "then live, from 31")
        eq(late.stats()["replays"], 1, "counted")
        # A host that knows where it was (start_after: its ring's last id) catches up from the
        # table at its start, then goes on live.
        back = start(pg, "back", "--start-after", "27")
        eq(ids(back.wait_events(4)), [28, 29, 30, 31], "caught up from 27")
        eq(d.ask("pub other ev v32", r"^P "), "P 0", "")
        eq(back.wait_events(5)[-1], (32, "other", "ev", "v32"), "then live")
        eq(d.quit(), 0, "exit")
        eq(late.quit(), 0, "exit")
        eq(back.quit(), 0, "exit")


def retention_lines(d):
    rx = re.compile(r"bus: retention deleted (\d+) rows? in (\d+) batch(?:es)? \(ids (\d+)-(\d+)\)")
    return [tuple(int(x) for x in m.groups()) for m in map(rx.search, d.log) if m]


def test_G5_retention_one_host_at_a_time_in_batches():
    """Two hosts with --retain-rows 1000 over 2500 rows: while another session holds the
    retention lock neither deletes (each counts the lock as busy); released, the 1500 oldest
    go, in batches of at most 1000, deleted once between the two."""
    with Postgres() as pg:
        args = ["--retain-rows", "1000", "--retain-every-ms", "200"]
        with pg.session() as s:
            s.run(f"SELECT pg_advisory_lock({RETAIN_LOCK});")
            ds = [start(pg, "k0", *args), start(pg, "k1", *args)]
            eq(ds[0].ask("pubn 2500 a ev x", r"^PN "), "PN accepted=2500 refused=0", "2500")
            for d in ds:
                d.wait_events(2500)
            deadline = time.monotonic() + 20
            while any(d.stats()["retain_busy"] < 2 for d in ds) and time.monotonic() < deadline:
                time.sleep(0.1)
            for d in ds:
                st = d.stats()
                check(st["retain_busy"] >= 2, f"{d.name} found the lock held: {st}")
                eq((st["retain_deleted"], st["retain_batches"]), (0, 0), f"{d.name} deleted none")
            eq(pg.value("SELECT count(*) FROM m0_bus_events"), "2500", "all kept while held")
            s.run(f"SELECT pg_advisory_unlock({RETAIN_LOCK});")
            deadline = time.monotonic() + 30
            while pg.value("SELECT count(*) FROM m0_bus_events") != "1000" and \
                    time.monotonic() < deadline:
                time.sleep(0.1)
        eq(pg.value("SELECT count(*) || ' ' || min(id) || ' ' || max(id) FROM m0_bus_events"),
           "1000 1501 2500", "the newest 1000 kept")
        stats = [d.stats() for d in ds]
        eq(sum(st["retain_deleted"] for st in stats), 1500, "1500 deleted, once")
        check(sum(st["retain_batches"] for st in stats) >= 2, f"in batches: {stats}")
        runs = [r for d in ds for r in retention_lines(d)]
        eq(sum(r[0] for r in runs), 1500, f"the log lines add up: {runs}")
        for n, batches, lo, hi in runs:
            check(n <= 1000 * batches, f"at most 1000 a batch: {runs}")
            eq(hi - lo + 1, n, f"a run deletes a contiguous range: {runs}")
        eq(sorted((r[2], r[3]) for r in runs)[0][0], 1, "from the oldest")
        # By age: rows older than --retain-s go, the others stay.
        pg.sql("UPDATE m0_bus_events SET time = now() - interval '2 days' WHERE id <= 1600")
        for d in ds:
            eq(d.quit(), 0, "exit")
        d = start(pg, "age", "--retain-s", "86400", "--retain-every-ms", "200")
        deadline = time.monotonic() + 20
        while pg.value("SELECT min(id) FROM m0_bus_events") != "1601" and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        eq(pg.value("SELECT count(*) || ' ' || min(id) FROM m0_bus_events"), "900 1601",
           "the rows older than a day deleted")
        eq(d.stats()["retain_deleted"], 100, "by this host")
        eq(d.quit(), 0, "exit")


def test_G6_ten_hosts_create_the_schema_once():
    """Ten hosts starting together on an empty database: one creates the tables, nine find
    them, and all ten publish and deliver one sequence."""
    with Postgres() as pg:
        ds = [Driver(pg.uri, name=f"s{i}", args=["--wait-ready", "30000"]) for i in range(10)]
        for d in ds:
            ready(d, 40)
            d.wait(r"bus: (created the tables|found m0's tables)", stream="err")
        created = [d.name for d in ds if any("bus: created the tables" in x for x in d.log)]
        found = [d.name for d in ds if any("bus: found m0's tables" in x for x in d.log)]
        eq(len(created), 1, f"created once: {created}")
        eq(len(found), 9, f"found by the nine others: {found}")
        eq(sorted(created + found), sorted(d.name for d in ds), "each said which")
        c = [d for d in ds if d.name == created[0]][0]
        eq([x for x in c.log if "created" in x],
           ["m0[pgbus-drive]: bus: created the tables m0_bus_events, m0_bus_counter and "
            "m0_bus_origins in database m0test"], "the line")
        eq(sum(d.stats()["created"] for d in ds), 1, "one host counts it")
        eq(pg.value("SELECT count(*) FROM pg_class WHERE relname LIKE 'm0_bus%' AND relkind = 'r'"),
           "3", "three tables")
        eq(pg.value("SELECT count(*) FROM m0_bus_origins"), "10", "one origin per host")
        for i, d in enumerate(ds):
            d.send(f"pub c ev from-{i}")
        for d in ds:
            ev = d.wait_events(10)
            expect_gap_free(ev, 1, 10, d.name)
            eq(sorted(datas(ev)), sorted(f"from-{i}" for i in range(10)), "every host's")
        seq = ds[0].events()
        for d in ds[1:]:
            eq(d.events(), seq, "one sequence")
        for d in ds:
            eq(d.quit(), 0, "exit")


test_G6_ten_hosts_create_the_schema_once.timeout = 120


def test_G6_refuses_a_table_that_is_not_m0s():
    """A table of the bus's name with another shape is refused (78) with its difference named;
    nothing of m0's is created beside it."""
    cases = [
        ("CREATE TABLE m0_bus_events (id bigint PRIMARY KEY, payload bytea)",
         'table m0_bus_events is not m0\'s: column 2 is "payload bytea", m0\'s is '
         '"channel text not null"'),
        ("CREATE TABLE m0_bus_counter (one boolean PRIMARY KEY, last_id bigint NOT NULL, "
         "extra int)",
         'table m0_bus_counter is not m0\'s: column 3 "extra integer" is one m0 does not have'),
        ("CREATE TABLE m0_bus_origins (origin text PRIMARY KEY)",
         'table m0_bus_origins is not m0\'s: it has no column 2 (m0\'s is "batch bigint not null")'),
    ]
    with Postgres() as pg:
        for create, why in cases:
            pg.sql("DROP TABLE IF EXISTS m0_bus_events, m0_bus_counter, m0_bus_origins")
            pg.sql(create)
            d = Driver(pg.uri, name="x", args=["--wait-ready", "20000"])
            eq(d.wait_exit(30), 78, f"refused: {create}")
            eq([x for x in d.log if x.startswith("refused: ")], [f"refused: {why}"], "the reason")
            eq([x for x in d.log if "bus: refused" in x], [f"m0[pgbus-drive]: bus: refused: {why}"],
               "the log line")
            d.cleanup()
            eq(pg.value("SELECT count(*) FROM pg_class WHERE relname LIKE 'm0_bus%' AND "
                        "relkind = 'r'"), "1", "nothing created beside it")


def test_G6_doctor_reports_the_database_and_refuses_a_bad_uri():
    """The doctor (D1): a malformed M0_BUS is 78 naming it (no password shown); a database that
    answers is reported with its version; one that does not is reported, not refused."""
    with Postgres() as pg:
        rc, out, _ = run_app("host_check", ["--doctor"], env={"M0_BUS": pg.uri})
        eq(rc, 0, out)
        line = [x for x in out.splitlines() if x.startswith("check bus")][0]
        ver = pg.value("SHOW server_version")
        eq(line, "check bus                      ok    reached database m0test as postgres "
           f"(PostgreSQL {ver}); m0's tables are not there yet: the first host creates them",
           "reached")
        d = start(pg, "made")
        eq(d.quit(), 0, "the tables made")
        rc, out, _ = run_app("host_check", ["--doctor"], env={"M0_BUS": pg.uri})
        line = [x for x in out.splitlines() if x.startswith("check bus")][0]
        check(line.endswith("m0's tables are there"), line)
    gone = pg.uri
    rc, out, _ = run_app("host_check", ["--doctor"], env={"M0_BUS": gone})
    eq(rc, 0, "an unreachable database is no refusal")
    line = [x for x in out.splitlines() if x.startswith("check bus")][0]
    eq(line, "check bus                      ok    cannot reach the database (connection to "
       f'server on socket "{pg.dir}/.s.PGSQL.5432" failed: No such file or directory); serving '
       "would start and keep reconnecting", "reported")
    bad = "postgresql://m0:s3cret@[::1/m0"
    rc, out, _ = run_app("host_check", ["--doctor"], env={"M0_BUS": bad})
    eq(rc, 78, out)
    check("s3cret" not in out, "the password is not shown")
    line = [x for x in out.splitlines() if x.startswith("check bus")][0]
    eq(line, "check bus                      FAIL  M0_BUS='postgresql://m0:***@[::1/m0' is not a "
       'PostgreSQL connection URI: end of string reached when looking for matching "]" in IPv6 '
       "host address (set M0_BUS to local or a URI such as postgresql:///m0?host=/run/postgresql)",
       "refused, naming M0_BUS")
    rc, out, err = run_app("host_check", [], env={"M0_BUS": "mysql://db/x"})
    eq(rc, 78, "serving refuses it too")
    check("M0_BUS='mysql://db/x' is not a PostgreSQL connection URI: not local and not a "
          "postgresql:// URI" in err, err)


class CutProxy:
    """A Unix-socket proxy in front of the server that can lose a reply: armed, it passes the
    next client message holding `marker` to the server, lets the server answer, and closes
    both sides before a byte of the answer reaches the client — a commit whose reply was lost."""

    def __init__(self, pg):
        self.dir = os.path.join(pg.dir, "proxy")
        os.mkdir(self.dir)
        self.path = os.path.join(self.dir, ".s.PGSQL.5432")
        self.target = os.path.join(pg.dir, ".s.PGSQL.5432")
        self.uri = f"postgresql:///{pg.dbname}?host={self.dir}&user=postgres"
        self.lsn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.lsn.bind(self.path)
        self.lsn.listen(16)
        self.armed = None
        self.cut = threading.Event()
        self.stop = False
        self.t = threading.Thread(target=self._accept, daemon=True)
        self.t.start()

    def _accept(self):
        while not self.stop:
            r, _, _ = select.select([self.lsn], [], [], 0.2)
            if not r:
                continue
            c, _ = self.lsn.accept()
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(self.target)
            threading.Thread(target=self._pump, args=(c, s), daemon=True).start()

    def _pump(self, c, s):
        hold = False
        try:
            while not self.stop:
                r, _, _ = select.select([c, s], [], [], 0.2)
                if c in r:
                    data = c.recv(65536)
                    if not data:
                        break
                    if self.armed and self.armed in data:
                        self.armed = None
                        hold = True
                    s.sendall(data)
                if s in r:
                    data = s.recv(65536)
                    if not data:
                        break
                    if hold:
                        if b"Z\x00\x00\x00\x05" in data:  # ReadyForQuery: the commit is done
                            self.cut.set()
                            break
                        continue
                    c.sendall(data)
        except OSError:
            pass
        finally:
            c.close()
            s.close()

    def close(self):
        self.stop = True
        self.t.join(5)
        self.lsn.close()


def test_G3_a_commit_whose_reply_was_lost_is_not_published_twice():
    """The connection is lost after the server committed a batch but before its answer reached
    the host: on reconnecting the host finds its batch committed (m0_bus_origins) and does not
    send it again; a batch that did not commit (its transaction killed while it waited on the
    counter) is sent again. Each event once."""
    with Postgres() as pg:
        proxy = CutProxy(pg)
        try:
            d = Driver(proxy.uri, name="cut", args=["--wait-ready", "20000"])
            ready(d)
            eq(d.ask("pub a ev first", r"^P "), "P 0", "")
            d.wait_events(1)
            proxy.armed = b"'lost-reply'"
            eq(d.ask("pub a ev lost-reply", r"^P "), "P 0", "")
            check(proxy.cut.wait(20), "the answer was cut")
            d.wait(r"^S bus: up$", 20, start=len(d.lines) - 1)
            eq(d.ask("pub a ev after", r"^P "), "P 0", "")
            ev = d.wait_events(3)
            eq(ev, [(1, "a", "ev", "first"), (2, "a", "ev", "lost-reply"), (3, "a", "ev", "after")],
               "the committed batch once")
            eq(pg.value("SELECT count(*) FROM m0_bus_events"), "3", "the table")
            eq(d.stats_when_published(3)["published"], 3, "counted as published once")
            with pg.session() as s:
                s.run("BEGIN;")
                s.run("LOCK TABLE m0_bus_counter IN EXCLUSIVE MODE;")
                eq(d.ask("pub a ev retried", r"^P "), "P 0", "")
                deadline = time.monotonic() + 20
                while not pg.sql("SELECT 1 FROM pg_stat_activity WHERE application_name = "
                                 "'m0/cut/publish' AND wait_event_type = 'Lock'") and \
                        time.monotonic() < deadline:
                    time.sleep(0.05)
                eq(pg.terminate("m0/cut/publish"), 1, "killed while it waits")
                s.run("COMMIT;")
            ev = d.wait_events(4)
            eq(ev[3], (4, "a", "ev", "retried"), "the rolled-back batch sent again")
            eq(pg.value("SELECT count(*) FROM m0_bus_events"), "4", "once")
            eq(d.quit(), 0, "exit")
        finally:
            proxy.close()


# connect() answering EPERM for TCP, as the kernel does under IPAddressDeny=any (DECISIONS D28):
# this machine has no systemd to run the unit under, so the kernel's answer is stood in for.
EPERM_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/socket.h>
int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
        static int (*real)(int, const struct sockaddr *, socklen_t);
        if (sa->sa_family == AF_INET || sa->sa_family == AF_INET6) {
                errno = EPERM;
                return -1;
        }
        if (!real)
                real = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(RTLD_NEXT, "connect");
        return real(fd, sa, len);
}
"""


def test_G3_eperm_names_ipaddressdeny():
    """A TCP connect the kernel refuses with EPERM (IPAddressDeny=any under m0@.service) is named
    as that, with the fix, in the state, the log line and the doctor."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        src, so = os.path.join(tmp, "eperm.c"), os.path.join(tmp, "eperm.so")
        with open(src, "w") as f:
            f.write(EPERM_SHIM)
        subprocess.run([tool("cc", "build-essential"), "-shared", "-fPIC", "-o", so, src, "-ldl"],
                       check=True)
        asan = os.environ.get("ASAN_OPTIONS", "")
        env = {"LD_PRELOAD": so,
               "ASAN_OPTIONS": (asan + ":" if asan else "") + "verify_asan_link_order=0"}
        uri = "postgresql://m0@127.0.0.1:5432/m0"
        why = ('connection to server at "127.0.0.1", port 5432 failed: Operation not permitted: '
               "the kernel refused the connection (EPERM); under m0@.service IPAddressDeny=any "
               "refuses it until a drop-in allows the database's address (IPAddressAllow=, "
               "doc/systemd.md)")
        d = Driver(uri, name="deny", env=env)
        d.wait(re.escape(f"S bus: reconnecting ({why})"), 20)
        eq(d.wait("cannot reach the database", stream="err"),
           f"m0[pgbus-drive]: bus: cannot reach the database (publishing connection: {why}); "
           "retrying, publishes queue up to 10000", "the log line")
        eq(d.ask("pub a ev queued", r"^P "), "P 0", "publishing goes on into the queue")
        eq(d.stats()["queued"], 1, "queued")
        eq(d.quit(), 0, "exit")
        rc, out, _ = run_app("host_check", ["--doctor"], env={"M0_BUS": uri, **env})
        eq(rc, 0, "reported, not refused")
        line = [x for x in out.splitlines() if x.startswith("check bus")][0]
        eq(line, f"check bus                      ok    cannot reach the database ({why}); serving "
           "would start and keep reconnecting", "the doctor names the cause")
