# SPDX-License-Identifier: MIT
"""Fair turns (SPEC W1, H1, H5): a loop's work per turn is bounded, so connections that each
pipeline a large batch of heavy requests cannot hold it past the watchdog, a second connection
is answered while one connection's batch is under way, and ramp's /x/slow on the loop is capped
below the watchdog's interval."""

import os
import re
import select
import socket
import time

import m0test
from m0test import Server, check, eq

# ThreadSanitizer runs this module (the watchdog's view of the loops): run.py, D235.
THREADED = True

WD_USEC = 2000000  # half interval 1 s: the producer looks, and pings, once a second
HALF = WD_USEC / 1e6 / 2
SLACK = 0.5


def _search(sel):
    return f"GET /x/search?sel={sel}&k=64 HTTP/1.1\r\nHost: test\r\n\r\n".encode()


def _sel(i):
    """The sel of request i of a batch: 90..100, so that the answers' order can be checked."""
    return 90 + i % 11


def _search_cost(s):
    """Seconds one /x/search?sel=100&k=64 takes on this build: the least of 9 round trips, the
    one a loaded machine inflated least (a median of 9 read 7.6 ms where the batches then ran at
    3.1 ms a search, too short to show a held loop)."""
    c = s.connect()
    took = []
    for _ in range(9):
        t0 = time.monotonic()
        r = c.get("/x/search?sel=100&k=64")
        took.append(time.monotonic() - t0)
        eq(r.status, 200, "/x/search")
    c.close()
    return min(took)


NOW = b"GET /x/now HTTP/1.1\r\nHost: test\r\n\r\n"


def _now_every(every):
    """Request i of a batch: /x/now when i % every == every - 1 (its answer carries the server's
    clock when that point of the batch was reached), else a search."""
    return lambda i: None if i % every == every - 1 else _sel(i)


class _Pipeline:
    """One raw connection that writes `n` pipelined requests at once and checks each answer in
    order: request i is /x/search?sel=kind(i) or, where kind(i) is None, /x/now. `nows` collects
    the server's clock from every /x/now answer."""

    def __init__(self, addr, n, kind=_sel):
        self.n = n
        self.kind = kind
        self.k = socket.create_connection(addr, timeout=10)
        self.k.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.got = 0
        self.nows = []
        self.t_last = None

    def write(self):
        reqs = [NOW if self.kind(i) is None else _search(self.kind(i)) for i in range(self.n)]
        self.k.sendall(b"".join(reqs))

    def read(self):
        """Read what is there and check each whole answer in order; False at EOF."""
        d = self.k.recv(1 << 20)
        if not d:
            return False
        self.buf += d
        while True:
            i = self.buf.find(b"\r\n\r\n")
            if i < 0:
                return True
            head = self.buf[:i].decode("latin-1")
            m = re.search(r"\r\ncontent-length: *(\d+)", head, re.I)
            check(m, f"answer {self.got} without Content-Length: {head!r}")
            end = i + 4 + int(m.group(1))
            if len(self.buf) < end:
                return True
            body = self.buf[i + 4 : end]
            self.buf = self.buf[end:]
            eq(head[:12], "HTTP/1.1 200", f"status of answer {self.got}")
            check("Connection: close" not in head, f"answer {self.got} closes the connection")
            sel = self.kind(self.got)
            if sel is None:
                m = re.fullmatch(rb'\{"now":(\d+\.\d{3})\}', body)
                check(m, f"answer {self.got} is not /x/now's: {body[:40]!r}")
                self.nows.append(float(m.group(1)))
            else:
                want = f'{{"sel":{sel},"k":64,"ids":['.encode()
                check(body.startswith(want), f"answer {self.got} out of order: {body[:40]!r}")
            self.got += 1
            self.t_last = time.monotonic()

    @property
    def done(self):
        return self.got == self.n


def _hold(s, ms=300):
    """Hold the loop with /x/slow?ms=`ms` on it, so that what is written meanwhile is all
    waiting, each connection's batch whole in its socket, when the loop next looks."""
    c = s.connect()
    c.request("GET", f"/x/slow?ms={ms}")
    time.sleep(0.05)  # the loop has read it and sleeps
    return c


def _pings(s, since):
    s.drain_notify()
    return [t for t, d in s.datagrams if "WATCHDOG=1" in d.split("\n") and t >= since]


def test_W1_H5_pipelined_heavy_batches_cannot_hold_the_loop_past_the_watchdog():
    """ramp on one loop without a pool, WATCHDOG_USEC=2 s: ten connections each write one
    pipelined batch of /x/search?sel=90..100&k=64 (seconds of the loop's time in all, sized by
    measuring one search first) while a 300 ms /x/slow holds the loop, so that every batch is
    waiting whole when the loop next looks. WATCHDOG=1 keeps arriving at least every half interval
    (plus slack) all the while, no loop is named stuck, and every request is answered, 200, in
    order, on a connection that stays open."""
    env = {"WATCHDOG_USEC": WD_USEC}
    with Server("ramp", env=env, args=["--max-keepalive-requests", "0"]) as s:
        s.wait_ready()
        cost = _search_cost(s)
        nconns = 10
        per = max(20, min(1200, int(4.5 / cost / nconns)))
        pipes = [_Pipeline(s.tcp_addr, per) for _ in range(nconns)]
        hold = _hold(s)
        t0 = time.monotonic()
        for p in pipes:
            p.write()
        deadline = t0 + 50
        live = {p.k: p for p in pipes}
        while live:
            check(time.monotonic() < deadline, f"answers after 50 s: {[p.got for p in pipes]}")
            r, _, _ = select.select([s.notify_sock, *live], [], [], 1.0)
            s.drain_notify()
            for k in r:
                p = live.get(k)
                if p is None:
                    continue
                check(p.read(), f"EOF after {p.got} of {per} answers")
                if p.done:
                    del live[k]
        t1 = time.monotonic()
        eq(hold.read_response(timeout=5).status, 200, "the /x/slow that held the loop")
        s.drain_notify()
        for p in pipes:
            eq(p.buf, b"", "bytes after the last answer")
            p.k.close()
        check(
            t1 - t0 >= 2 * HALF,
            f"the batches took only {t1 - t0:.2f}s ({nconns} x {per} at {cost * 1000:.2f} ms): "
            "too little to show a held loop",
        )
        pings = _pings(s, t0)
        marks = [t0, *pings, t1]
        gaps = [b - a for a, b in zip(marks, marks[1:])]
        worst = max(gaps)
        check(
            worst <= HALF + SLACK,
            f"{worst:.2f}s without WATCHDOG=1 while {nconns} connections x {per} searches "
            f"({cost * 1000:.2f} ms each) were served over {t1 - t0:.2f}s; pings at "
            f"{[round(t - t0, 2) for t in pings]}",
        )
        eq([ln for ln in s.log_lines() if " stuck" in ln], [], "stuck lines")
        eq(s.stop(), 0, "exit status")


test_W1_H5_pipelined_heavy_batches_cannot_hold_the_loop_past_the_watchdog.once = True  # a crowd of heavy batches against a time bound: the plain variant only (run.py, D235)


def test_H5_second_connection_answered_while_a_batch_is_under_way():
    """One connection pipelines about 1.5 s of heavy searches in one write (while a /x/slow
    holds the loop, so that the loop finds the batch whole), with about twenty /x/now among
    them, one last; a second connection's single /x/now, sent once the batch is under way, is
    served before the batch's end: the server's clock in its answer is before the batch's last
    /x/now, and the batch was still running a quarter second after the second answer."""
    with Server("ramp", args=["--max-keepalive-requests", "0"]) as s:
        s.wait_ready()
        cost = _search_cost(s)
        # About 1.5 s of searches, a /x/now after every k of them (about 20 in all), one last.
        searches = max(30, min(1200, int(1.5 / cost)))
        k = max(1, searches // 20)
        every = k + 1
        n = searches // k * every
        other = s.connect()
        eq(other.get("/x/now").status, 200, "/x/now before the batch")
        a = _Pipeline(s.tcp_addr, n, _now_every(every))
        hold = _hold(s)
        t0 = time.monotonic()
        a.write()
        eq(hold.read_response(timeout=5).status, 200, "the /x/slow that held the loop")
        time.sleep(0.1)  # the batch is under way
        other.request("GET", "/x/now")
        theirs = None
        while not a.done or theirs is None:
            check(time.monotonic() - t0 < 40, f"{a.got} of {n} answers after 40 s")
            socks = [] if a.done else [a.k]
            if theirs is None:
                socks.append(other.sock)
            r, _, _ = select.select(socks, [], [], 1.0)
            if other.sock in r:
                resp = other.read_response(timeout=10)
                eq(resp.status, 200, "/x/now beside the batch")
                theirs = float(re.fullmatch(rb'\{"now":(\d+\.\d{3})\}', resp.body).group(1))
            if a.k in r:
                check(a.read(), f"EOF after {a.got} of {n} answers")
        a.k.close()
        first, last = a.nows[0], a.nows[-1]
        check(last - first >= 0.5, f"the batch ran only {last - first:.3f}s on the server")
        check(
            theirs + 0.25 <= last,
            f"the second connection's /x/now ran at +{theirs - first:.3f}s of a batch that ran "
            f"until +{last - first:.3f}s: served only when the batch was (nearly) done",
        )
        eq(s.stop(), 0, "exit status")


def test_W1_ramp_slow_on_the_loop_is_capped_below_the_watchdog():
    """Without a pool, ramp's /x/slow runs on the loop: with a watchdog it takes at most a
    quarter of the interval (handler_max_ms) and answers 400, at once, past it; the longest
    allowed sleep keeps the pings coming. On the pool it is not capped."""
    with Server("ramp", env={"WATCHDOG_USEC": 10000000}) as s:
        s.wait_ready()
        c = s.connect()
        t0 = time.monotonic()
        r = c.get("/x/slow?ms=6000")
        took = time.monotonic() - t0
        eq(r.status, 400, "/x/slow?ms=6000 on the loop, WatchdogSec=10s")
        eq(
            r.body,
            b'{"error":"ms is 0..2500 on the loop (a quarter of the watchdog\'s interval); '
            b'longer sleeps need the pool (--blocking-threads)"}',
            "body",
        )
        eq(r.header("x-thread"), "-1", "x-thread")
        check(took < 1.0, f"the refusal took {took:.2f}s")
        eq(s.stop(), 0, "exit status")
    with Server("ramp", env={"WATCHDOG_USEC": WD_USEC}) as s:
        s.wait_ready()
        c = s.connect()
        r = c.get("/x/slow?ms=501")
        eq(r.status, 400, "/x/slow?ms=501, WATCHDOG_USEC=2 s")
        check(b"0..500 on the loop" in r.body, f"body {r.body!r}")
        t0 = time.monotonic()
        c.request("GET", "/x/slow?ms=500")
        s.watch_notify_until(c.sock, 5)
        r = c.read_response(timeout=5)
        eq((r.status, r.body), (200, b'{"slept_ms":500}'), "/x/slow?ms=500")
        eq(r.header("x-thread"), "-1", "x-thread")
        # Pings on both sides of the sleep; no loop named stuck.
        while time.monotonic() - t0 < 2.5:
            select.select([s.notify_sock], [], [], 0.2)
            s.drain_notify()
        pings = _pings(s, t0 - 1.5)
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        check(pings and max(gaps) <= HALF + SLACK, f"pings around the sleep: {pings}")
        eq([ln for ln in s.log_lines() if " stuck" in ln], [], "stuck lines")
        eq(s.stop(), 0, "exit status")
    with Server("ramp", env={"WATCHDOG_USEC": WD_USEC}, args=["--blocking-threads", "1"]) as s:
        s.wait_ready()
        r = s.connect().get("/x/slow?ms=1200", timeout=10)
        eq((r.status, r.body), (200, b'{"slept_ms":1200}'), "/x/slow?ms=1200 on the pool")
        eq(r.header("x-thread"), "0", "x-thread")
        eq(s.stop(), 0, "exit status")
    with Server("ramp") as s:
        s.wait_ready()
        r = s.connect().get("/x/slow?ms=1200", timeout=10)
        eq((r.status, r.body), (200, b'{"slept_ms":1200}'), "/x/slow?ms=1200, no watchdog")
        eq(s.stop(), 0, "exit status")


# ---- every source of a turn's work takes a bounded batch (D85) ----

ITEMS = 32  # --turn-items' default: what a turn takes of its sources


def _turn_shim(tmp):
    """tests/shim/turns.c built into `tmp`: an LD_PRELOAD shim that counts, per thread name,
    the most system calls of each kind one turn (one epoll_wait() to the next) made."""
    import subprocess

    so = os.path.join(tmp, "turns.so")
    cc = m0test.tool("cc", "build-essential")
    src = os.path.join(m0test.REPO, "tests", "shim", "turns.c")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", so, src, "-ldl", "-lpthread"], check=True)
    return so


def _shim_env(so, log):
    return {
        "LD_PRELOAD": so,
        "M0TEST_TURN_LOG": log,
        # an ASan runtime is linked after the shim; the order does not matter here
        "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0",
    }


def _turn_maxes(log):
    """{(thread name, counter): the most one turn of that thread did}, from the shim's log."""
    out = {}
    with open(log) as f:
        for line in f:
            w = line.split()
            if w[0] == "max":
                out[(w[1], w[2])] = int(w[3])
    return out


def _received(s, loop):
    """How many connections loop `loop` said at exit it was handed (L4)."""
    for ln in s.log_lines():
        m = re.search(rf" loop {loop}: loop stopped: .*\breceived (\d+)", ln)
        if m:
            return int(m.group(1))
    raise AssertionError(f"no exit line of loop {loop}:\n{s.log_text()}")


def test_H2_D85_heads_expiring_together_get_408_a_batch_per_turn():
    """ramp on one loop, --header-timeout-ms 1000: 200 connections each send a head's first
    byte, then /x/slow?ms=1200 holds the loop past all their deadlines, so that they expire
    together. The loop answers each 408 (Connection: close) within the timeout + 1 s of its first
    byte, but at most --turn-items (32) of them in one turn: the turn shim sees exactly 32
    shutdown() calls (one per 408, before its linger) in the fullest turn, where the loop used
    to fire all 200 in one. A /x/now sent during the hold is answered 200."""
    import tempfile

    n, timeout_ms = 200, 1000
    with tempfile.TemporaryDirectory(prefix="m0test-") as tmp:
        so = _turn_shim(tmp)
        log = os.path.join(tmp, "turns")
        args = ["--header-timeout-ms", timeout_ms, "--turn-budget-ms", "10000"]
        with Server("ramp", env=_shim_env(so, log), args=args) as s:
            s.wait_ready()
            normal = s.connect()
            eq(normal.get("/x/now").status, 200, "/x/now before")
            slow = []
            for _ in range(n):
                k = socket.create_connection(s.tcp_addr, timeout=10)
                k.sendall(b"G")
                slow.append((k, time.monotonic()))
            hold = s.connect()
            hold.request("GET", "/x/slow?ms=1200")
            time.sleep(0.05)  # the loop sleeps; the heads' deadlines pass meanwhile
            normal.request("GET", "/x/now")
            r = normal.read_response(timeout=10)
            eq(r.status, 200, "/x/now sent during the hold")
            check(re.fullmatch(rb'\{"now":\d+\.\d{3}\}', r.body), f"/x/now's body {r.body!r}")
            eq(hold.read_response(timeout=10).status, 200, "the /x/slow that held the loop")
            for i, (k, t) in enumerate(slow):
                got = b""
                while True:
                    d = k.recv(4096)
                    if not d:
                        break
                    got += d
                took = time.monotonic() - t
                eq(got.split(b"\r\n", 1)[0], b"HTTP/1.1 408 Request Timeout", f"head {i}")
                check(b"\r\nConnection: close\r\n" in got, f"head {i}'s 408: {got!r}")
                check(took <= timeout_ms / 1000 + 1, f"head {i} closed after {took:.2f}s")
                k.close()
            eq(s.stop(), 0, "exit status")
        maxes = _turn_maxes(log)
        eq(maxes.get(("m0-loop-0", "shutdowns")), ITEMS, f"the fullest turn's 408s; {maxes}")


def test_L4_D85_hand_offs_waiting_together_are_admitted_a_batch_per_turn():
    """ramp on two loops: /x/slow?ms=1000 holds one loop while 200 clients connect; the other
    accepts them all and hands about half to the held one (L4). When it wakes, the held loop
    admits what its mailbox holds at most --turn-items (32) in one turn: the turn shim sees
    exactly 32 setsockopt() calls (one per admitted connection) in its fullest turn, where it
    used to admit all of them in one. Every client is then answered /x/now, 200."""
    import tempfile

    n = 200
    with tempfile.TemporaryDirectory(prefix="m0test-") as tmp:
        so = _turn_shim(tmp)
        log = os.path.join(tmp, "turns")
        args = ["--threads", "2", "--turn-budget-ms", "10000", "--max-keepalive-requests", "0"]
        with Server("ramp", env=_shim_env(so, log), args=args) as s:
            s.wait_ready()
            a, b = s.connect(), s.connect()  # one on each loop (L4: the least loaded)
            held = int(a.get("/x/now").header("x-worker"))
            eq(sorted([held, int(b.get("/x/now").header("x-worker"))]), [0, 1], "x-worker")
            a.request("GET", "/x/slow?ms=1000")
            time.sleep(0.05)
            clients = [socket.create_connection(s.tcp_addr, timeout=10) for _ in range(n)]
            eq(a.read_response(timeout=10).status, 200, "the /x/slow that held a loop")
            for i, k in enumerate(clients):
                c = m0test.Conn(k, 10)
                c.send(NOW)
                r = c.read_response()
                eq(r.status, 200, f"client {i}")
                check(re.fullmatch(rb'\{"now":\d+\.\d{3}\}', r.body), f"client {i}: {r.body!r}")
                c.close()
            eq(s.stop(), 0, "exit status")
            received = _received(s, held)
        check(received > ITEMS, f"the held loop received only {received}")
        maxes = _turn_maxes(log)
        eq(maxes.get((f"m0-loop-{held}", "sockopts")), ITEMS, f"its fullest turn; {maxes}")
