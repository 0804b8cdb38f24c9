# SPDX-License-Identifier: MIT
"""The watchdog (SPEC W1): with WATCHDOG_USEC set, WATCHDOG=1 every half interval while every
loop makes progress; a loop held longer than that is named with the request it serves and
the pings stop until it moves again; without WATCHDOG_USEC (or with a WATCHDOG_PID that is not
the process, sd_watchdog_enabled(3)) no ping is sent."""

import select
import time

from m0test import Server, check, eq

# ThreadSanitizer runs this module (the watchdog's view of the loops): run.py, D235.
THREADED = True

USEC = 400000  # half interval 200 ms; loops beat every 100 ms


def _pings(s, since=None):
    """Monotonic times of every WATCHDOG=1 received so far (after `since`)."""
    s.drain_notify()
    return [
        t
        for t, d in s.datagrams
        if "WATCHDOG=1" in d.split("\n") and (since is None or t >= since)
    ]


def _watch(s, seconds):
    """Keep reading the notify socket for `seconds` so every datagram gets its arrival time."""
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        select.select([s.notify_sock], [], [], left)
        s.drain_notify()


def _cadence(s, seconds=1.2):
    s.wait_ready()
    t0 = time.monotonic()
    _watch(s, seconds)
    return _pings(s, since=t0)


def test_W1_pings_every_half_interval():
    with Server("host_check", env={"M0_THREADS": 2, "WATCHDOG_USEC": USEC}) as s:
        pings = _cadence(s)
        # 1.2 s at 200 ms: 6 expected.
        check(4 <= len(pings) <= 8, f"{len(pings)} WATCHDOG=1 in 1.2 s at a 200 ms half interval")
        gaps = sorted(b - a for a, b in zip(pings, pings[1:]))
        med = gaps[len(gaps) // 2]
        check(0.15 <= med <= 0.3, f"median gap between pings {med:.3f}s (want about 0.2)")
        for t, d in s.datagrams:
            if "WATCHDOG=1" in d.split("\n"):
                eq(d, "WATCHDOG=1", "a ping datagram")
        eq(s.stop(), 0, "exit status")


def test_W1_watchdog_pid_of_the_process_pings_another_does_not():
    with Server("host_check", env={"WATCHDOG_USEC": USEC}, watchdog_pid_self=True) as s:
        pings = _cadence(s, 1.0)
        check(3 <= len(pings) <= 7, f"{len(pings)} pings in 1 s with WATCHDOG_PID = the app's PID")
        eq(s.stop(), 0, "exit status")
    with Server("host_check", env={"WATCHDOG_USEC": USEC, "WATCHDOG_PID": 1}) as s:
        pings = _cadence(s, 1.0)
        eq(pings, [], "pings with WATCHDOG_PID naming another process")
        eq(s.stop(), 0, "exit status")


def test_W1_no_watchdog_usec_no_ping():
    with Server("host_check", env={"M0_THREADS": 2}) as s:
        pings = _cadence(s, 1.2)
        eq(pings, [], "WATCHDOG=1 without WATCHDOG_USEC")
        check(not any("stuck" in ln for ln in s.log_lines()), s.log_text())
        eq(s.stop(), 0, "exit status")


def _wedge(threads, loop):
    """Hold `loop` with a 1500 ms /slow on the loop itself (no pool) and watch the pings."""
    env = {"M0_THREADS": threads, "WATCHDOG_USEC": USEC}
    with Server("host_check", env=env) as s:
        s.wait_ready()
        c = None
        while c is None:
            x = s.connect()
            if x.get("/health").header("x-worker") == str(loop):
                c = x
        _watch(s, 0.6)
        before = _pings(s)
        check(len(before) >= 2, f"only {len(before)} pings before the wedge")
        t0 = time.monotonic()
        c.request("GET", "/slow?ms=1500")
        # Read the notify socket until the answer comes, so each ping has its arrival time.
        s.watch_notify_until(c.sock, 5)
        resp = c.read_response(timeout=5)
        t1 = time.monotonic()
        eq((resp.status, resp.header("x-thread")), (200, "-1"), "/slow on the loop")
        check(t1 - t0 >= 1.45, f"/slow?ms=1500 answered after {t1 - t0:.2f}s")
        _watch(s, 1.0)
        pings = _pings(s)
        # The first look after the wedge may still see the progress made before it; from the
        # second (at most 400 ms in) until the loop moves again, nothing is sent.
        during = [t - t0 for t in pings if t0 + 0.45 <= t <= t1 - 0.05]
        eq(during, [], "pings while the loop was held (seconds after the request)")
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        check(max(gaps) >= 1.0, f"the longest gap between pings is {max(gaps):.2f}s")
        after = [t for t in pings if t > t1]
        check(len(after) >= 3, f"{len(after)} pings in the second after the loop moved again")
        stuck = [ln for ln in s.log_lines() if " stuck" in ln]
        eq(
            stuck,
            [
                f"m0[host_check] loop {loop}: loop {loop} stuck: no progress for 200 ms, "
                "serving GET /slow; watchdog ping withheld"
            ],
            "stuck lines",
        )
        eq(c.get("/health").status, 200, "/health after the wedge")
        eq(s.stop(), 0, "exit status")


def test_W1_stuck_loop_withholds_pings_and_is_named():
    _wedge(1, 0)


def test_W1_stuck_second_loop_is_named_while_the_first_runs():
    _wedge(2, 1)
