# SPDX-License-Identifier: MIT
"""The serve sequence (SPEC L1, L3, R4): READY=1 only after every handler exists, no loop
accepts before it, and a make that fails on one loop refuses the start without serving."""

import re
import select
import time

import m0test
from m0test import Server, check, eq

# ThreadSanitizer runs this module (the serve sequence's threads): run.py, D235.
THREADED = True

def test_L1_ready_status_names_loops_and_socket():
    with Server("host_check", env={"M0_THREADS": 2}) as s:
        d = s.wait_ready(10)
        lines = d.split("\n")
        eq(lines[0], "READY=1", "first line of the READY datagram")
        status = [ln for ln in lines if ln.startswith("STATUS=")]
        eq(
            status,
            [f"STATUS=serving on 2 loops, 0 pool threads, 1 socket: 127.0.0.1:{s.port}" + m0test.status_tail()],
            "STATUS= in the READY datagram",
        )
        eq(s.connect().get("/health").status, 200, "/health after READY")
        eq(s.stop(), 0, "exit status after SIGTERM")


def test_L1_L3_ready_only_after_every_make():
    """Both loops' make sleep 600 ms. A request sent right after the spawn is answered only
    after READY=1 was queued, and no loop logs `Event loop started` before the ready line."""
    delay_ms = 600
    with Server(
        "host_check", env={"M0_THREADS": 2, "M0_HOSTCHECK_MAKE_DELAY_MS": delay_ms}
    ) as s:
        c = s.connect()  # the listener is ours: the kernel completes the handshake at once
        c.request("GET", "/health")
        ready_seen_at = None
        resp_seen_at = None
        # One thread watches both sockets, the notify socket first: when the response becomes
        # readable, a READY=1 sent before it is already queued on the notify socket.
        while resp_seen_at is None:
            r, _, _ = select.select([s.notify_sock, c.sock], [], [], 10)
            check(r, f"neither READY=1 nor a response within 10 s; log:\n{s.log_text()}")
            s.drain_notify()
            if ready_seen_at is None and s.ready_datagram():
                ready_seen_at = s.ready_datagram()[0]
            if c.sock in r:
                resp_seen_at = time.monotonic()
                s.drain_notify()
                if ready_seen_at is None and s.ready_datagram():
                    ready_seen_at = s.ready_datagram()[0]
        check(
            ready_seen_at is not None,
            f"the response arrived before READY=1 (datagrams so far: {s.datagrams!r})",
        )
        resp = c.read_response()
        eq(resp.status, 200, "status of /health")
        eq(resp.body, b"ok\n", "body of /health")
        check(
            resp_seen_at - s.t_spawn >= delay_ms / 1000.0,
            f"answered {resp_seen_at - s.t_spawn:.3f}s after the spawn, before make's {delay_ms} ms",
        )
        ready_line = s.wait_log(r"^m0\[host_check\]: ready: ")
        eq(
            ready_line,
            f"m0[host_check]: ready: serving on 2 loops, 0 pool threads, 1 socket: 127.0.0.1:{s.port}" + m0test.status_tail(),
            "the ready log line",
        )
        s.wait_log(r"loop 1: Event loop started")
        s.wait_log(r"loop 0: Event loop started")
        log = s.log_lines()
        i_ready = log.index(ready_line)
        started = [i for i, ln in enumerate(log) if "Event loop started" in ln]
        eq(
            sorted(log[i] for i in started),
            [
                "m0[host_check] loop 0: Event loop started (1 listener)",
                "m0[host_check] loop 1: Event loop started (1 listener)",
            ],
            "Event loop started lines",
        )
        check(
            all(i > i_ready for i in started),
            f"an `Event loop started` line precedes the ready line:\n{s.log_text()}",
        )
        eq(s.stop(), 0, "exit status after SIGTERM")


def test_L3_R4_make_failing_on_loop_1_refuses_without_serving():
    """Loop 1's make fails 300 ms after loop 0 built its own: exit 78 naming loop 1, no READY=1,
    no `Event loop started`, and the connection made meanwhile is never answered."""
    with Server(
        "host_check",
        env={
            "M0_THREADS": 2,
            "M0_HOSTCHECK_LOOP_MAKE_FAILS": 1,
            "M0_HOSTCHECK_MAKE_DELAY_MS": 300,
        },
    ) as s:
        c = s.connect()
        c.request("GET", "/health")
        eq(s.wait_exit(10), 78, "exit status")
        log = s.log_lines()
        refusals = [ln for ln in log if ln.startswith("m0: ")]
        eq(len(refusals), 1, f"refusal lines:\n{s.log_text()}")
        # R1/R4: `m0: <finding> (<fix>)`, the finding naming the loop and the app's reason.
        check(
            re.fullmatch(
                r"m0: loop 1's make failed: M0_HOSTCHECK_LOOP_MAKE_FAILS=1 asked for it \(.+\)",
                refusals[0],
            ),
            f"the refusal does not name loop 1 and the reason: {refusals[0]!r}",
        )
        check(
            not any("Event loop started" in ln for ln in log),
            f"a loop started although make failed:\n{s.log_text()}",
        )
        check("READY=1" not in s.notify_lines(), f"READY=1 was sent: {s.datagrams!r}")
        # The listener is still held by this test: the connection waits in its backlog,
        # unanswered, rather than being served by a loop that started anyway.
        check(c.nothing_within(0.2), f"the connection got bytes or EOF: {c.buf!r}")


def test_L1_ready_once_single_loop():
    with Server("ramp") as s:
        s.wait_ready(10)
        eq(s.connect().get("/x/now").status, 200, "/x/now")
        eq(s.stop(), 0, "exit status")
        ready = [ln for ln in s.notify_lines() if ln == "READY=1"]
        eq(len(ready), 1, "READY=1 datagrams")
        eq(
            [ln for ln in s.notify_lines() if ln.startswith("STATUS=")],
            [f"STATUS=serving on 1 loop, 0 pool threads, 1 socket: 127.0.0.1:{s.port}" + m0test.status_tail()],
            "STATUS lines",
        )
