# SPDX-License-Identifier: MIT
"""Many hosts, one bus (SPEC G1-G4, G7): m0 processes (host_check, two loops each) sharing one
real PostgreSQL 15 (pgtest.Postgres: initdb in a temporary directory, a Unix socket only) through
M0_BUS=postgresql://... Streams on every host and publishers on every host: every stream gets the
same gap-free sequence of ids, every event once, each host's events in the order it published
them; the faults of G3 (pg_terminate_backend() of the bus's connections, a database restart, an
outage) with serving going on and STATUS= and the log saying what happened; a client that
reconnects with Last-Event-ID to another host gets exactly what it missed (G4)."""

import os
import re
import threading
import time

from m0test import HarnessError, Server, check, eq
from pgtest import Postgres
from promtest import promtool_check
from test_channels import follow  # a stream of /follow?channels=, its first bytes read
from test_metrics import TEXT_TYPE, samples, scrape, until, value

# ThreadSanitizer runs this module (the PostgreSQL bus thread): run.py, D235.
THREADED = True

HEAVY = os.environ.get("M0_HEAVY") == "1"
# No beats (the producer's first step fails and it stops), no heartbeats, POST /publish on.
QUIET = {"M0_HOSTCHECK_STEP_FAILS_AT": 1, "M0_SSE_HEARTBEAT_MS": 0, "M0_HOSTCHECK_PUBLISH": 1}


def host(pg, env=None, threads=2):
    s = Server("host_check", env={**QUIET, "M0_THREADS": threads, "M0_BUS": pg.uri,
                                  **(env or {})})
    s.wait_ready(30)
    return s


def status_lines(s):
    return [line for line in s.notify_lines() if line.startswith("STATUS=")]


def publish(s, channel, n, event, timeout=60):
    """POST /publish: n events on `channel` named `event`, data {"i":0..n-1}. Under the shared bus
    m0_publish() answers 0, "accepted; the database gives the id" (D93)."""
    r = s.connect(timeout=timeout).exchange(
        "POST", f"/publish?channel={channel}&n={n}&event={event}", timeout=timeout)
    eq(r.status, 200, f"POST /publish on {channel}: {r.body!r}")
    eq(r.json(), {"first": 0, "last": 0, "published": n}, "accepted, ids not known yet")


def read_events(rd, n, timeout=60, what="a stream"):
    """The next n events of `rd` as (id, channel-less event name, data); HarnessError when they do
    not come in `timeout`."""
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        f = rd.next(max(deadline - time.monotonic(), 0))
        if f is None:
            raise HarnessError(f"{what}: {len(out)} events of {n} in {timeout}s "
                               f"(eof={rd.eof}); the last: {out[-3:]!r}")
        if f.is_event:
            out.append((f.id_int, f.event, f.data_text))
    return out


def nothing_more(rd, seconds, what):
    extra = [f for f in rd.read_for(seconds) if f.is_event]
    eq(extra, [], f"{what}: nothing past the expected events")


def table_rows(pg):
    """(id, channel, event, data) of every row, in id order."""
    return [(int(r[0]), r[1], r[2], r[3]) for r in
            pg.sql("SELECT id, channel, event, data FROM m0_bus_events ORDER BY id")]


def wait_rows(pg, n, timeout=60):
    """The table's rows once it holds n (the publishes were only accepted, D93)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = table_rows(pg)
        if len(rows) >= n or time.monotonic() >= deadline:
            eq(len(rows), n, "rows in the table")
            return rows
        time.sleep(0.05)


def expect_sequence(got, rows, what):
    """`got` (id, event, data) is exactly the table's rows after the first one it has."""
    want = [(i, e, d) for i, _, e, d in rows]
    eq(got, want, f"{what}: the table's sequence, each event once, in id order")


def publish_everywhere(hosts, rounds, n, tag=""):
    """Every host publishes `rounds` POSTs of n events on its own channel room:<h>, all hosts at
    once; the events are named r<round><tag>."""
    errors = []

    def run(h, s):
        try:
            for k in range(rounds):
                publish(s, f"room:{h}", n, f"r{k}{tag}")
        except BaseException as e:  # noqa: BLE001 -- reported by the test's thread
            errors.append(e)

    ts = [threading.Thread(target=run, args=(h, s)) for h, s in enumerate(hosts)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    if errors:
        raise errors[0]


def test_G7_three_hosts_every_stream_gets_every_event_once_in_order():
    """Three hosts of two loops, two streams each (room:*, and *), publishers on all three at
    once: all six streams get the table's whole sequence, gap-free, each event once; every host's
    events in the order it published them; READY's STATUS says `bus: up`; a clean stop says what
    the shared bus committed and delivered."""
    rounds, n = 4, 50
    with Postgres() as pg:
        hosts = [host(pg) for _ in range(3)]
        for s in hosts:
            ready = [line for line in s.ready_datagram()[1].split("\n")
                     if line.startswith("STATUS=")]
            check(ready and ready[0].endswith("; bus: up"), f"READY's STATUS: {ready!r}")
        streams = [(h, follow(s, chans)) for h, s in enumerate(hosts)
                   for chans in ("room:*", "*")]
        publish_everywhere(hosts, rounds, n)
        total = 3 * rounds * n
        rows = None
        for h, rd in streams:
            got = read_events(rd, total, what=f"host {h}")
            if rows is None:
                rows = table_rows(pg)
                eq(len(rows), total, "rows in the table")
                eq([r[0] for r in rows], list(range(rows[0][0], rows[0][0] + total)),
                   "the table's ids are gap-free")
            expect_sequence(got, rows, f"host {h}'s stream")
            for p in range(3):
                mine = [(e, d) for (_, e, d), r in zip(got, rows) if r[1] == f"room:{p}"]
                eq(mine, [(f"r{k}", f'{{"i":{i}}}') for k in range(rounds) for i in range(n)],
                   f"host {h}: host {p}'s events in the order it published them")
        for h, rd in streams:
            nothing_more(rd, 0.3, f"host {h}")
        last = rows[-1][0]
        for h, s in enumerate(hosts):
            eq(s.stop(), 0, f"host {h} stops cleanly")
            s.wait_log(rf"bus: the shared bus stopped: {rounds * n} events committed in \d+ "
                       rf"transactions, {total} delivered from the table \(last id {last}\).* 0 "
                       r"accepted events not committed")


test_G7_three_hosts_every_stream_gets_every_event_once_in_order.timeout = 180


def ids_of(got):
    return [i for i, _, _ in got]


def test_G4_a_client_moving_to_another_host_gets_exactly_what_it_missed():
    """A client reads part of room:1 on host A, goes away, and comes back on host B with its
    Last-Event-ID: from B's replay store while B kept every event after it; from the table when
    the channel moved past B's 8 kept events (M0_REPLAY_PER_CHANNEL=8), with publishes going on
    during the replay; and from the table on host C, started after the events. Each time exactly
    the ids after the one it had, once, in order, then the live ones."""
    env = {"M0_REPLAY_PER_CHANNEL": 8}
    with Postgres() as pg:
        a, b = host(pg, env), host(pg, env)
        rd = follow(a, "room:1")
        publish(a, "room:1", 6, "x")
        first = read_events(rd, 2, what="A")
        rd.conn.close()
        publish(b, "room:1", 4, "y")
        rows = wait_rows(pg, 10)
        mid = first[-1][0]
        # B kept the channel's last 8: everything after the client's id is there.
        rd = follow(b, "room:1", last_event_id=mid)
        got = read_events(rd, 8, what="B from its replay store")
        expect_sequence(got, [r for r in rows if r[0] > mid], "B, replayed from memory")
        nothing_more(rd, 0.3, "B")
        rd.conn.close()

        # 40 more: B keeps the last 8, so a client at `mid` is replayed from the table, while
        # A publishes 300 more at once: the replay, then the live events, no gap, no repeat.
        publish(a, "room:1", 40, "z")
        rows = wait_rows(pg, 50)
        done = threading.Event()
        t = threading.Thread(target=lambda: (publish(a, "room:1", 300, "live"), done.set()))
        t.start()
        rd = follow(b, "room:1", last_event_id=mid)
        t.join(60)
        check(done.is_set(), "the live publishes were answered")
        total = len(rows) + 300
        got = read_events(rd, total - 2, what="B from the table")
        rows = wait_rows(pg, total)
        expect_sequence(got, [r for r in rows if r[0] > mid], "B, replayed from the table")
        nothing_more(rd, 0.3, "B after the table")

        # C starts now: nothing before its start came through it; the table has it all.
        c = host(pg, env)
        rd = follow(c, "room:1", last_event_id=mid + 1)
        got = read_events(rd, total - 3, what="C")
        publish(c, "room:1", 3, "after")
        got += read_events(rd, 3, what="C live")
        rows = wait_rows(pg, total + 3)
        expect_sequence(got, [r for r in rows if r[0] > mid + 1], "C, from the table then live")
        nothing_more(rd, 0.3, "C")
        for s, replays in ((a, 0), (b, 1), (c, 1)):
            eq(s.stop(), 0, "a clean stop")
            s.wait_log(rf"bus: the shared bus stopped: .*\), {replays} replays,")


test_G4_a_client_moving_to_another_host_gets_exactly_what_it_missed.timeout = 180



def wait_status(s, pattern, timeout=30):
    """The first STATUS= line matching the regex, waiting for the datagrams."""
    rx = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while True:
        for line in status_lines(s):
            if rx.search(line):
                return line
        if time.monotonic() >= deadline:
            raise HarnessError(f"no STATUS= matching {pattern!r} in {timeout}s: "
                               f"{status_lines(s)[-5:]!r}")
        time.sleep(0.05)


def faulted(fault, extra=0, check_lines=True):
    """Three hosts with streams on every host and publishers on all of them, then `fault(pg,
    hosts)`, then publishes again: every stream has the table's whole sequence, each event once,
    in id order; serving went on; STATUS= and the log said the bus went and came back. `extra`:
    the events `fault` publishes itself."""
    rounds, n = 2, 25
    with Postgres() as pg:
        hosts = [host(pg) for _ in range(3)]
        streams = [(h, follow(s, "room:*")) for h, s in enumerate(hosts) for _ in range(2)]
        publish_everywhere(hosts, rounds, n, "a")
        fault(pg, hosts)
        publish_everywhere(hosts, rounds, n, "c")
        total = 6 * rounds * n + extra
        rows = wait_rows(pg, total)
        for h, rd in streams:
            got = read_events(rd, total, timeout=90, what=f"host {h}")
            expect_sequence(got, rows, f"host {h}'s stream after the fault")
            nothing_more(rd, 0.3, f"host {h}")
        for h, s in enumerate(hosts):
            r = s.connect().get("/health")
            eq(r.status, 200, f"host {h} serves after the fault")
            if check_lines:
                s.wait_log(r"bus: lost the database \(")
                s.wait_log(r"bus: the database is back after \d+\.\d s")
                wait_status(s, r"; bus: reconnecting \(")
                wait_status(s, r"; bus: up$")
                check(status_lines(s)[-1].endswith("; bus: up"),
                      f"host {h}'s last STATUS=: {status_lines(s)[-1]!r}")
            eq(s.stop(), 0, f"host {h} stops cleanly")
        return pg, hosts


def test_G3_pg_terminate_backend_of_the_bus_connections():
    """pg_terminate_backend() of all six bus connections (publishing and listening, three
    hosts): they come back, and nothing is lost or repeated."""
    def fault(pg, hosts):
        n = int(pg.value("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                         "WHERE application_name LIKE 'm0/host\\_check-%'"))
        eq(n, 6, "two bus connections per host")
        for s in hosts:
            s.wait_log(r"bus: lost the database \(.*terminating connection due to "
                       r"administrator command")
    faulted(fault)


test_G3_pg_terminate_backend_of_the_bus_connections.timeout = 180


def test_G3_database_restart():
    """A restart of the database while every host publishes and streams."""
    faulted(lambda pg, hosts: pg.restart())


test_G3_database_restart.timeout = 180


def test_G3_outage_serving_goes_on():
    """The database away for 30 s (M0_HEAVY=1, contrib/test-all's plain run; 4 s otherwise):
    every host still answers GET /health, accepts publishes (queued), says `bus: reconnecting
    (...)` in STATUS=; once it is back every stream has every event once, in order."""
    seconds = 30 if HEAVY else 4

    def during(hosts):
        for h, s in enumerate(hosts):
            wait_status(s, r"; bus: reconnecting \(connection to server on socket .* failed: "
                           r"No such file or directory\)$")
            r = s.connect().get("/health")
            eq(r.status, 200, f"host {h} serves during the outage")
        publish_everywhere(hosts, 1, 20, "b")

    faulted(lambda pg, hosts: pg.outage(seconds, lambda: during(hosts)), extra=3 * 20)


test_G3_outage_serving_goes_on.timeout = 240


def test_G6_a_table_that_is_not_m0s_is_refused_78_before_ready():
    """A host whose database holds an m0_bus_events of another shape exits 78 before READY=1,
    its refusal naming the table and its difference, with what to do."""
    with Postgres() as pg:
        pg.sql("CREATE TABLE m0_bus_events (id bigint PRIMARY KEY, payload bytea)")
        s = Server("host_check", env={**QUIET, "M0_BUS": pg.uri})
        eq(s.wait_ready_or_exit(30), 78, "refused")
        why = ('table m0_bus_events is not m0\'s: column 2 is "payload bytea", m0\'s is '
               '"channel text not null"')
        s.wait_log(re.escape(f"m0: bus: {why} (drop or rename that table, or name another "
                             "database or search_path in M0_BUS)"))
        check(s.ready_datagram() is None, "no READY=1")


def test_G3_a_host_started_before_its_database_serves_then_catches_up():
    """The database is not there at the start: after --bus-ready-ms (300) the host is READY with
    `bus: reconnecting (...)` in STATUS=, answers GET /health, accepts publishes; once the
    database starts, a stream gets the queued events, then live ones, in order."""
    with Postgres(start=False) as pg:
        s = host(pg, {"M0_BUS_READY_MS": 300})
        ready = [line for line in s.ready_datagram()[1].split("\n") if line.startswith("STATUS=")]
        check(ready and "; bus: reconnecting (connection to server on socket" in ready[0],
              f"READY's STATUS: {ready!r}")
        s.wait_log(r"bus: the database did not answer within --bus-ready-ms \(300 ms\): bus: "
                   r"reconnecting \(.*\); serving without it, publishes queue up to 10000")
        eq(s.connect().get("/health").status, 200, "serving")
        rd = follow(s, "room:*")
        publish(s, "room:1", 5, "early")
        pg.start()
        pg.sql(f"CREATE DATABASE {pg.dbname}", db="postgres")
        wait_status(s, r"; bus: up$")
        publish(s, "room:1", 5, "late")
        rows = wait_rows(pg, 10)
        got = read_events(rd, 10, what="the stream")
        expect_sequence(got, rows, "queued, then live")
        eq([e for _, e, _ in got], ["early"] * 5 + ["late"] * 5, "in the order published")
        eq(s.stop(), 0, "a clean stop")


test_G3_a_host_started_before_its_database_serves_then_catches_up.timeout = 120


def test_O1_G3_the_metrics_show_the_database_bus():
    """With M0_BUS and M0_METRICS the scrape carries the database bus's state and counts (O1):
    `up` once READY says so, the five events published and delivered with the table's last id,
    `reconnecting` while the database is away, `up` again once it is back."""
    with Postgres() as pg:
        s = host(pg, {"M0_METRICS": "127.0.0.1:0"})
        m = re.search(r"; metrics on 127\.0\.0\.1:(\d+); bus: up$", s.wait_ready().rstrip("\n"))
        check(m, "STATUS= names the metrics port, then the bus up")
        addr = ("127.0.0.1", int(m.group(1)))

        def state():
            smp = samples(scrape(addr)[2])
            return {st: value(smp, "m0_bus_database_state", m0_bus_database_state=st)
                    for st in ("up", "connecting", "reconnecting", "refused")}

        eq(state(), {"up": 1, "connecting": 0, "reconnecting": 0, "refused": 0}, "up")
        # A plain scrape (AP4): the 0.0.4 format, the state set a gauge, and promtool takes it.
        st, f, text = scrape(addr, None)
        eq((st, f["content-type"]), (200, TEXT_TYPE), "a scrape with no Accept")
        check("\n# TYPE m0_bus_database_state gauge\n" in text and
              '\nm0_bus_database_state{m0_bus_database_state="up"} 1\n' in text, text[-1500:])
        eq(promtool_check(text), (0, ""), "promtool check metrics, the database bus's families in")
        publish(s, "room:1", 5, "e")
        last = wait_rows(pg, 5)[-1][0]
        # Delivered can come before the publishing connection has read its COMMIT's answer.
        smp = until(lambda: (lambda x: x if (value(x, "m0_bus_database_events_delivered_total"),
                                             value(x, "m0_bus_database_events_published_total"))
                             == (5, 5) else None)(samples(scrape(addr)[2])),
                    "five delivered and published")
        eq(value(smp, "m0_bus_database_events_published_total"), 5, "published")
        eq(value(smp, "m0_bus_database_last_event_id"), last, "the table's last id")
        eq(value(smp, "m0_bus_database_queued_events"), 0, "nothing queued")
        pg.outage(1, lambda: until(lambda: state()["reconnecting"] == 1, "reconnecting", 30))
        until(lambda: state() == {"up": 1, "connecting": 0, "reconnecting": 0, "refused": 0},
              "up again", 30)
        eq(s.stop(), 0, "a clean stop")


test_O1_G3_the_metrics_show_the_database_bus.timeout = 120
