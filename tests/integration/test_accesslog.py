# SPDX-License-Identifier: MIT
"""The access log (SPEC O2): M0_ACCESS_LOG=journal writes one structured entry per request to a
real journald (journaltest: Debian's systemd-journald in a mount namespace of the test's own, at
the path the code under test always writes to), with M0_METHOD, M0_PATH, M0_STATUS, M0_BYTES,
M0_DURATION_US and M0_LOOP, any bytes of a path kept whole; entries wait for a journald that is
behind, are dropped and counted past M0_ACCESS_LOG_QUEUE, and find a restarted journald again.
M0_ACCESS_LOG=on keeps its plain line."""

import re
import socket
import time

import m0test
from journaltest import Journald, field_bytes
from m0test import Server, check, eq
from test_metrics import METRICS_SOCKETS, read_response, samples, scrape, total, until, value

# ThreadSanitizer runs this module (the loops' journal queues): run.py, D235.
THREADED = True


def exchange(c, raw, head_only=False):
    c.sendall(raw)
    return read_response(c, head_only)


def test_O2_one_journal_entry_per_request():
    """Every request answered, each with its fields exact: a handler's, the router's 404, a pool
    job's, a stream's start and a refusal whose target holds a control byte and a byte that is
    no UTF-8 (kept whole, in the length-prefixed form)."""
    env = {"M0_ACCESS_LOG": "journal", "M0_THREADS": "2", "M0_BLOCKING_THREADS": "1"}
    with Journald() as j, Server("host_check", env=env, sockets=METRICS_SOCKETS,
                                 preexec_fn=j.enter) as s:
        s.wait_ready()
        want = []  # (method, path bytes, status, bytes, loop, pool)
        with socket.create_connection(s.tcp_addr, timeout=10) as c:
            st, f, raw = exchange(c, m0test.build_request("GET", "/health"))
            loop = f["x-worker"]
            want.append(("GET", b"/health", 200, len(raw), loop, False))
            for _ in range(3):
                st, f, raw = exchange(c, m0test.build_request("GET", "/nope?secret=1"))
                want.append(("GET", b"/nope", st, len(raw), loop, False))
            st, f, raw = exchange(c, m0test.build_request("HEAD", "/health"), head_only=True)
            want.append(("HEAD", b"/health", st, len(raw), loop, False))
            st, f, raw = exchange(c, m0test.build_request("GET", "/slow?ms=5"))
            want.append(("GET", b"/slow", st, len(raw), loop, True))
            st, f, raw = exchange(c, b"GET /caf\xe9\x01x?q HTTP/1.1\r\nHost: t\r\n\r\n")
            want.append(("GET", b"/caf\xe9\x01x", st, len(raw), loop, False))
        eq([w[2] for w in want], [200, 404, 404, 404, 200, 200, 400], "the statuses answered")
        st = s.connect()
        head = m0test.open_stream(st, "/events")
        eq(head.status, 200, "the stream")
        stream_loop = head.header("x-worker")
        m0test.SSEReader(st).expect()
        st.close()

        pid = str(s.pid)
        got = j.wait_entries(3, _PID=pid, M0_STATUS="404")
        eq(len(got), 3, "journalctl M0_STATUS=404 finds the three 404s")
        entries = j.wait_entries(len(want) + 1, _PID=pid, M0_APP="host_check", PRIORITY="6")
        entries = [e for e in entries if "M0_STATUS" in e]
        eq(len(entries), len(want) + 1, "one entry per request")
        # Each loop sends its entries in its order; the stream's, from another connection and
        # maybe another loop, can reach journald before loop 0's last: it is taken out and
        # checked last.
        entries = ([e for e in entries if e.get("M0_PATH") != "/events"] +
                   [e for e in entries if e.get("M0_PATH") == "/events"])
        for e, (method, path, status, nbytes, lp, pool) in zip(entries, want):
            what = f"the entry of {method} {path!r}"
            eq(field_bytes(e, "M0_METHOD"), method.encode(), f"{what}: M0_METHOD")
            eq(field_bytes(e, "M0_PATH"), path, f"{what}: M0_PATH")
            eq(e["M0_STATUS"], str(status), f"{what}: M0_STATUS")
            eq(e["M0_BYTES"], str(nbytes), f"{what}: M0_BYTES, the response's bytes")
            eq(e["M0_LOOP"], lp, f"{what}: M0_LOOP")
            check(e["M0_DURATION_US"].isdigit(), f"{what}: M0_DURATION_US {e['M0_DURATION_US']}")
            msg = b"%s %s %d %d%s" % (method.encode(), path, status, nbytes,
                                      b" (pool)" if pool else b"")
            eq(field_bytes(e, "MESSAGE"), msg, f"{what}: MESSAGE")
        slow = entries[5]
        check(int(slow["M0_DURATION_US"]) >= 5000, f"/slow?ms=5 took {slow['M0_DURATION_US']} us")
        ev = entries[-1]
        eq((ev["M0_METHOD"], ev["M0_PATH"], ev["M0_STATUS"], ev["M0_LOOP"]),
           ("GET", "/events", "200", stream_loop), "the stream's entry")
        # The path that is no text stays bytes: journalctl shows it as a blob, as it should.
        check(isinstance(entries[6]["M0_PATH"], list), "a binary M0_PATH is a byte array")
        smp = samples(scrape(s)[2])
        eq(total(smp, "m0_access_log_entries_total"), len(entries), "entries journald took")
        eq(total(smp, "m0_access_log_dropped_total"), 0, "entries dropped")


def test_O2_R1_journal_refused_without_journald():
    with Journald(run=False) as j:
        rc, _, err = m0test.run_app("host_check", ["--port", "0"],
                                    env={"M0_ACCESS_LOG": "journal"}, preexec_fn=j.enter)
        eq(rc, 78, "M0_ACCESS_LOG=journal where no journald is")
        eq(err.strip().splitlines()[-1],
           "m0: access-log: M0_ACCESS_LOG=journal, but journald does not take entries at "
           "/run/systemd/journal/socket: No such file or directory (run it under "
           "systemd-journald, or set M0_ACCESS_LOG to on or off)", "the refusal")


def one_by_one(s, n):
    """`n` GET /health one after the other on one connection, each answer read before the next
    is sent: each is a turn of its own, so each entry leaves in a datagram of its own (D98).
    Returns the answers."""
    c = m0test.Conn.tcp(s.tcp_addr, 30)
    try:
        out = []
        for _ in range(n):
            c.send(m0test.build_request("GET", "/health"))
            out.append(c.read_response())
        return out
    finally:
        c.close()


def test_O2_a_burst_waits_for_journald_and_the_queue_bounds_it():
    """journald stopped: 45 requests one after the other fill its socket's queue
    (net.unix.max_dgram_qlen, 10 here, with a datagram a turn) and the rest of their entries
    wait in the loop's (M0_ACCESS_LOG_QUEUE, 50); once it goes on, every one arrives. Stopped
    again, 300 more: what the queue cannot hold is dropped, counted and logged, and the entries
    journald got plus those dropped are the requests."""
    env = {"M0_ACCESS_LOG": "journal", "M0_ACCESS_LOG_QUEUE": "50"}
    with Journald() as j, Server("host_check", env=env, sockets=METRICS_SOCKETS,
                                 preexec_fn=j.enter) as s:
        s.wait_ready()
        pid = str(s.pid)
        j.pause()
        eq({r.status for r in one_by_one(s, 45)}, {200}, "45 requests, journald stopped")
        j.resume()
        eq(len(j.wait_entries(45, _PID=pid, M0_PATH="/health")), 45, "every entry of 45")
        smp = samples(scrape(s)[2])
        eq(value(smp, "m0_access_log_dropped_total", loop=0), 0, "none dropped")
        j.pause()
        eq({r.status for r in one_by_one(s, 300)}, {200}, "300 requests, journald stopped")
        smp = samples(scrape(s)[2])
        dropped = value(smp, "m0_access_log_dropped_total", loop=0)
        check(dropped > 0, f"entries dropped past the queue: {dropped}")
        s.wait_log(r"access log: \d+ journal entr(y|ies) dropped \(journald is behind; "
                   r"--access-log-queue 50\)")
        j.resume()
        until(lambda: len(j.entries(_PID=pid, M0_PATH="/health")) == 345 - dropped,
              f"345 - {dropped} entries in the journal")
        time.sleep(0.5)
        eq(len(j.entries(_PID=pid, M0_PATH="/health")), 345 - dropped, "and no more")
        smp = samples(scrape(s)[2])
        eq(value(smp, "m0_access_log_entries_total", loop=0) + dropped, 345,
           "entries sent plus dropped")


def test_O2_a_turns_entries_leave_in_one_datagram():
    """20 requests pipelined in one write are answered in one turn, and their entries leave in
    one datagram (D98): journald stamps an entry with its datagram's arrival, so all 20 share
    one __REALTIME_TIMESTAMP, each still an entry of its own with its own fields; the last one a
    refusal whose target holds a control byte and a byte that is no UTF-8, kept whole in the
    length-prefixed form. The turn's budget is raised so that a sanitizer's slower requests
    still fit one turn: the batching is what is checked, not the budget."""
    env = {"M0_ACCESS_LOG": "journal", "M0_TURN_BUDGET_MS": "1000"}
    with Journald() as j, Server("host_check", env=env, sockets=METRICS_SOCKETS,
                                 preexec_fn=j.enter) as s:
        s.wait_ready()
        pid = str(s.pid)
        paths = [b"/p%d" % i for i in range(19)] + [b"/caf\xe9\x01x"]
        c = m0test.Conn.tcp(s.tcp_addr, 30)
        try:
            c.send(b"".join(m0test.build_request("GET", p.decode()) for p in paths[:19]) +
                   b"GET /caf\xe9\x01x HTTP/1.1\r\nHost: t\r\n\r\n")
            statuses = [c.read_response().status for _ in paths]
        finally:
            c.close()
        eq(statuses, [404] * 19 + [400], "20 pipelined answers, the last a refusal")
        got = [e for e in j.wait_entries(20, _PID=pid, M0_APP="host_check") if "M0_PATH" in e]
        eq(len(got), 20, "one entry per request")
        eq([field_bytes(e, "M0_PATH") for e in got], paths, "each entry's path, in order")
        eq([e["M0_METHOD"] for e in got], ["GET"] * 20, "each entry's method")
        eq(len({e["__REALTIME_TIMESTAMP"] for e in got}), 1, "one datagram's arrival for all")
        smp = samples(scrape(s)[2])
        eq(total(smp, "m0_access_log_entries_total"), 20, "entries journald took")


def test_O2_journald_restarted():
    """journald restarts (its socket is a new one): the loops connect again and go on."""
    with Journald() as j, Server("host_check", env={"M0_ACCESS_LOG": "journal"},
                                 preexec_fn=j.enter) as s:
        s.wait_ready()
        pid = str(s.pid)
        c = s.connect()
        eq(c.get("/health").status, 200, "before")
        j.wait_entries(1, _PID=pid, M0_PATH="/health")
        j.restart()
        for _ in range(5):
            eq(c.get("/pid").status, 200, "after the restart")
        eq(len(j.wait_entries(5, _PID=pid, M0_PATH="/pid")), 5, "entries after the restart")


def test_O2_plain_line_stays():
    """M0_ACCESS_LOG=on: the line a handler's answer always had, and none for a refusal."""
    with Server("host_check", env={"M0_ACCESS_LOG": "on"}) as s:
        s.wait_ready()
        c = s.connect()
        r = c.get("/health")
        s.wait_log(rf"^m0\[host_check\] loop 0: GET /health 200 {len(r.body)}$")
        c2 = s.connect()
        c2.send(b"GET /x HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n")
        eq(c2.read_response().status, 400, "a refusal")
        eq(c.get("/pid").status, 200, "then /pid")
        s.wait_log(r"^m0\[host_check\] loop 0: GET /pid 200 ")
        check(not [ln for ln in s.log_lines() if " 400 " in ln], "no line for the refusal")


ORIGIN = "https://app.example"
# The host's own answers (T2, Q5, Q6), one connection to routes_check: (request, method, path,
# status). The last is answered before its body, past /upload's bound of 16, and closes the
# connection: a refusal, which the plain line leaves out.
HOST_ANSWERS = [
    (m0test.build_request("DELETE", "/health"), "DELETE", b"/health", 405),
    (m0test.build_request("OPTIONS", "/health"), "OPTIONS", b"/health", 204),
    (m0test.build_request("OPTIONS", "/todos", headers=[
        ("Origin", ORIGIN), ("Access-Control-Request-Method", "POST")]), "OPTIONS", b"/todos", 204),
    (m0test.build_request("OPTIONS", "*"), "OPTIONS", b"*", 204),
    (m0test.build_request("GET", "/nope?q=1"), "GET", b"/nope", 404),
    (m0test.build_request("POST", "/todos", headers=[("Content-Type", "text/plain")], body=b"{}"),
     "POST", b"/todos", 415),
    (m0test.build_request("POST", "/upload", headers=[("Content-Length", "100")]),
     "POST", b"/upload", 413),
]


def host_answers(s):
    """Send HOST_ANSWERS on one connection: [(status, response bytes, body bytes)]."""
    got = []
    with socket.create_connection(s.tcp_addr, timeout=10) as c:
        for raw, *_ in HOST_ANSWERS:
            st, _, resp = exchange(c, raw)
            got.append((st, resp, resp.partition(b"\r\n\r\n")[2]))
        c.settimeout(5)
        eq(c.recv(100), b"", "the connection after the 413")
    eq([g[0] for g in got], [h[3] for h in HOST_ANSWERS], "the statuses answered")
    return got


def test_O1_O2_host_answers_counted_and_logged():
    """Routing's own answers (405, 204 to OPTIONS, to a preflight and to OPTIONS *, 404, 415)
    are counted by method and status class and logged with their status, as a handler's are;
    the 413 made before the body is counted and is a refusal: a journal entry, no plain line."""
    env = {"M0_THREADS": "1", "M0_ROUTESCHECK_CORS": ORIGIN}
    with Server("routes_check", env={**env, "M0_ACCESS_LOG": "on"},
                sockets=METRICS_SOCKETS) as s:
        s.wait_ready()
        got = host_answers(s)
        smp = samples(scrape(s)[2])
        for m, st, n in [("OPTIONS", "2xx", 3), ("DELETE", "4xx", 1), ("GET", "4xx", 1),
                         ("POST", "4xx", 2)]:
            eq(value(smp, "m0_requests_total", loop=0, method=m, status=st), n,
               f"m0_requests_total {m} {st}")
        eq(total(smp, "m0_requests_total"), len(HOST_ANSWERS), "every request counted")
        for (_, method, path, status), (_, _, body) in zip(HOST_ANSWERS[:-1], got):
            line = f"{method} {path.decode()} {status} {len(body)}"
            s.wait_log(rf"^m0\[routes_check\] loop 0: {re.escape(line)}$")
        check(not [ln for ln in s.log_lines() if " 413 " in ln], "no line for the 413")
    with Journald() as j, Server("routes_check", env={**env, "M0_ACCESS_LOG": "journal"},
                                 preexec_fn=j.enter) as s:
        s.wait_ready()
        got = host_answers(s)
        entries = j.wait_entries(len(HOST_ANSWERS), _PID=str(s.pid), M0_APP="routes_check",
                                 PRIORITY="6")
        entries = [e for e in entries if "M0_STATUS" in e]
        eq(len(entries), len(HOST_ANSWERS), "one entry per request")
        for e, (_, method, path, status), (_, resp, _) in zip(entries, HOST_ANSWERS, got):
            what = f"the entry of {method} {path!r}"
            msg = b"%s %s %d %d" % (method.encode(), path, status, len(resp))
            eq(field_bytes(e, "MESSAGE"), msg, f"{what}: MESSAGE")
            eq((e["M0_METHOD"], field_bytes(e, "M0_PATH"), e["M0_STATUS"], e["M0_BYTES"]),
               (method, path, str(status), str(len(resp))), f"{what}: its fields")
