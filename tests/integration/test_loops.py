# SPDX-License-Identifier: MIT
"""Loops (SPEC L4, A1): new connections go to the least loaded loop, ties rotating; each
connection stays on its loop; each loop's handler counts exactly what it served."""

import collections
import re

import m0test
from m0test import Server, check, eq

# ThreadSanitizer runs this module (N loops): run.py, D235.
THREADED = True


def _spread(threads, nconns, env=None):
    """Open nconns keep-alive connections one after another, each asking /instance once and
    staying open. Returns (server-stopped exit code, [(conn, loop)], counts per loop)."""
    e = {"M0_THREADS": threads}
    e.update(env or {})
    with Server("host_check", env=e) as s:
        s.wait_ready()
        placed = []
        for i in range(nconns):
            c = s.connect()
            r = c.get("/instance")
            eq(r.status, 200, f"connection {i}")
            w = int(r.header("x-worker"))
            eq(r.json()["loop"], w, f"connection {i}: loop in the body vs x-worker")
            placed.append((c, w))
        # Further requests on each connection stay on the loop that owns it.
        for i, (c, w) in enumerate(placed):
            for _ in range(2):
                r = c.get("/instance")
                eq(r.status, 200, f"connection {i}, later request")
                eq(int(r.header("x-worker")), w, f"connection {i}: x-worker of a later request")
        counts = collections.Counter(w for _, w in placed)
        code = s.stop()
        return code, counts, s.log_lines()


def test_L4_accept_share_2_loops_16_16():
    code, counts, log = _spread(2, 32)
    eq(dict(counts), {0: 16, 1: 16}, "connections per loop")
    eq(code, 0, "exit status")
    # At exit each loop says how many it passed and received (L4).
    stopped = [ln for ln in log if re.search(r" loop \d+: .*\bpassed \d+.*\breceived \d+", ln)]
    eq(len(stopped), 2, f"exit lines with passed/received counts: {stopped}")
    passed = received = 0
    for ln in stopped:
        mp = re.search(r"\bpassed (\d+)", ln)
        mr = re.search(r"\breceived (\d+)", ln)
        check(mp and mr, f"loop stopped line without passed/received counts: {ln!r}")
        passed += int(mp.group(1))
        received += int(mr.group(1))
        ma = re.search(r"\baccepted (\d+)", ln)
        if ma:
            eq(int(ma.group(1)) + int(mr.group(1)), 16, f"connections owned per {ln!r}")
        mq = re.search(r"\brequests (\d+)", ln)
        if mq:
            eq(int(mq.group(1)), 16 * 3, f"requests in {ln!r}")
    eq(passed, received, "passed vs received over all loops")


def test_L4_accept_share_4_loops_8_8_8_8():
    code, counts, _ = _spread(4, 32)
    eq(dict(counts), {0: 8, 1: 8, 2: 8, 3: 8}, "connections per loop")
    eq(code, 0, "exit status")


def test_L4_accept_share_off_still_serves():
    code, counts, _ = _spread(2, 32, {"M0_ACCEPT_SHARE": "0"})
    eq(sum(counts.values()), 32, "connections answered")
    check(set(counts) <= {0, 1}, f"loops outside 0..1: {counts}")
    eq(code, 0, "exit status")


def test_A1_instance_counts_per_handler():
    """Two loops, four connections (two per loop), five rounds of /instance on each: every
    answer's `requests` is exactly how many that loop's handler has answered so far."""
    with Server("host_check", env={"M0_THREADS": 2}) as s:
        s.wait_ready()
        conns = [s.connect() for _ in range(4)]
        served = collections.Counter()
        pids = set()
        where = [None] * len(conns)
        for rnd in range(5):
            for i, c in enumerate(conns):
                r = c.get("/instance")
                eq(r.status, 200, f"round {rnd}, connection {i}")
                body = r.json()
                loop = body["loop"]
                served[loop] += 1
                if where[i] is None:
                    where[i] = loop
                eq(loop, where[i], f"connection {i} moved loops")
                eq(int(r.header("x-worker")), loop, "x-worker vs loop")
                eq(body["thread"], -1, "thread on the loop")
                eq(r.header("x-thread"), "-1", "x-thread on the loop")
                eq(body["requests"], served[loop], f"requests on loop {loop}")
                pids.add(body["pid"])
        eq(dict(served), {0: 10, 1: 10}, "answers per loop")
        eq(pids, {s.pid}, "pid in every answer")
        # Every route counts: /health and /pid raise only their own loop's count.
        loop0 = conns[0].get("/instance").json()["loop"]
        served[loop0] += 1
        eq(conns[0].get("/health").status, 200, "/health")
        pid = conns[0].get("/pid")
        eq(pid.body, f'{{"pid":{s.pid}}}\n'.encode(), "/pid body")
        served[loop0] += 2
        eq(conns[0].get("/instance").json()["requests"], served[loop0] + 1, "count after /health and /pid")
        served[loop0] += 1
        other = [c for c, lp in zip(conns, where) if lp != loop0][0]
        eq(other.get("/instance").json()["requests"], served[1 - loop0] + 1, "the other loop's count")


def test_P3_A1_where_answers_ran():
    """x-worker/x-thread say where each answer ran: blocking routes on the loop's pool
    threads, everything else on the loop (-1)."""
    with Server("host_check", env={"M0_THREADS": 2, "M0_BLOCKING_THREADS": 2}) as s:
        d = s.wait_ready()
        check(
            f"STATUS=serving on 2 loops, 4 pool threads, 1 socket: 127.0.0.1:{s.port}" + m0test.status_tail() in d.split("\n"),
            f"STATUS in {d!r}",
        )
        for _ in range(2):
            c = s.connect()
            loop = c.get("/health").header("x-worker")
            for _ in range(4):
                r = c.get("/slow?ms=0")
                eq((r.status, r.body), (200, b'{"slept_ms":0}\n'), "/slow?ms=0")
                eq(r.header("x-worker"), loop, "x-worker of a pool answer")
                check(r.header("x-thread") in ("0", "1"), f"x-thread {r.header('x-thread')!r}")
            r = c.get("/instance")
            eq((r.header("x-worker"), r.header("x-thread")), (loop, "-1"), "/instance on the loop")
            eq(r.json()["thread"], -1, "thread of /instance")
        eq(s.stop(), 0, "exit status")
