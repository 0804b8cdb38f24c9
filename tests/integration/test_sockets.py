# SPDX-License-Identifier: MIT
"""Socket activation (SPEC Y1, R2 listen-sockets): every passed listening stream socket is
served on every loop; anything else passed is a refusal; none passed binds --host:--port."""

import re
import socket

import m0test
from m0test import Server, check, eq, free_port

def test_Y1_unix_socket_served():
    with Server("host_check", env={"M0_THREADS": 2}, sockets=["unix"]) as s:
        d = s.wait_ready()
        eq(
            [ln for ln in d.split("\n") if ln.startswith("STATUS=")],
            [f"STATUS=serving on 2 loops, 0 pool threads, 1 socket: {s.unix_path}" + m0test.status_tail()],
            "STATUS",
        )
        workers = set()
        for _ in range(4):
            r = s.connect("unix").get("/health")
            eq((r.status, r.body), (200, b"ok\n"), "/health over the Unix socket")
            workers.add(r.header("x-worker"))
        eq(workers, {"0", "1"}, "loops serving the Unix socket")
        eq(s.stop(), 0, "exit status")


def test_Y1_tcp_and_unix_both_served():
    with Server("host_check", env={"M0_THREADS": 2}, sockets=[("tcp", "web"), ("unix", "local")]) as s:
        d = s.wait_ready()
        eq(
            [ln for ln in d.split("\n") if ln.startswith("STATUS=")],
            [f"STATUS=serving on 2 loops, 0 pool threads, 2 sockets: 127.0.0.1:{s.port} {s.unix_path}" + m0test.status_tail()],
            "STATUS",
        )
        for kind in ("tcp", "unix", "tcp", "unix"):
            c = s.connect(kind)
            r = c.get("/pid")
            eq(r.status, 200, f"/pid over {kind}")
            eq(r.json()["pid"], s.pid, f"pid over {kind}")
            eq(c.get("/health").body, b"ok\n", f"keep-alive over {kind}")
        # A loop says it started once it serves, which can follow READY (sent once every loop
        # has built its handler) on a loaded machine: wait for both lines, then take them all.
        for i in (0, 1):
            s.wait_log(rf"loop {i}: Event loop started")
        started = [ln for ln in s.log_lines() if "Event loop started" in ln]
        eq(
            sorted(started),
            [
                "m0[host_check] loop 0: Event loop started (2 listeners)",
                "m0[host_check] loop 1: Event loop started (2 listeners)",
            ],
            "Event loop started lines",
        )
        eq(s.stop(), 0, "exit status")


def _refused(kinds, bad_index, bad_name):
    with Server("host_check", sockets=kinds) as s:
        eq(s.wait_exit(10), 78, "exit status")
        fd = 3 + bad_index
        finding = (
            f"m0: listen-sockets: passed fd {fd} ('{bad_name}') is not a listening stream socket"
        )
        refusals = [ln for ln in s.log_lines() if ln.startswith("m0: ")]
        eq(len(refusals), 1, f"refusal lines:\n{s.log_text()}")
        check(
            re.fullmatch(re.escape(finding) + r" \(.+\)", refusals[0]),
            f"expected {finding!r} and a (fix), got {refusals[0]!r}",
        )
        check("READY=1" not in s.notify_lines(), f"READY=1 was sent: {s.datagrams!r}")
        check(
            not any("Event loop started" in ln for ln in s.log_lines()),
            f"a loop started:\n{s.log_text()}",
        )


def test_Y1_R2_udp_socket_refused():
    _refused([("udp", "dgram")], 0, "dgram")


def test_Y1_R2_unlistened_tcp_socket_refused():
    _refused([("tcp-unlistened", "idle")], 0, "idle")


def test_Y1_R2_bad_socket_beside_a_good_one_refused():
    _refused([("tcp", "web"), ("udp", "dgram")], 1, "dgram")


def test_Y1_no_passed_socket_binds_port():
    port = free_port()
    with Server("host_check", sockets=[], notify=False, args=["--port", port]) as s:
        s.wait_port(port)
        c = s.connect(addr=("127.0.0.1", port))
        r = c.get("/pid")
        eq(r.status, 200, "/pid on the bound port")
        eq(r.json()["pid"], s.pid, "pid")
        s.wait_log(r"Event loop started")
        eq(
            [ln for ln in s.log_lines() if "ready:" in ln],
            [f"m0[host_check]: ready: serving on 1 loop, 0 pool threads, 1 socket: 127.0.0.1:{port}" + m0test.status_tail()],
            "ready line",
        )
        eq(s.stop(), 0, "exit status")


def test_Y1_no_passed_socket_port_from_env():
    port = free_port()
    with Server("ramp", sockets=[], env={"M0_PORT": port, "M0_HOST": "127.0.0.1"}) as s:
        d = s.wait_ready()
        check(f"STATUS=serving on 1 loop, 0 pool threads, 1 socket: 127.0.0.1:{port}" + m0test.status_tail() in d.split("\n"), d)
        s.wait_port(port)
        c = s.connect(addr=("127.0.0.1", port))
        eq(c.get("/x/now").status, 200, "/x/now on M0_PORT")
        eq(s.stop(), 0, "exit status")


def test_Y1_port_in_use_refused():
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        with Server("host_check", sockets=[], args=["--port", port]) as s:
            eq(s.wait_exit(10), 78, "exit status")
            eq(
                [ln for ln in s.log_lines() if ln.startswith("m0: ")],
                [
                    f"m0: cannot listen on 127.0.0.1:{port}: Address already in use "
                    "(set --host/--port or M0_HOST/M0_PORT)"
                ],
                "refusal",
            )
            check("READY=1" not in s.notify_lines(), "READY=1 was sent")
    finally:
        busy.close()
