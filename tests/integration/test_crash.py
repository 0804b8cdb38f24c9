# SPDX-License-Identifier: MIT
"""Crash reports and privileges (SPEC J2, L5, K1): a fatal signal on a loop or a pool thread
leaves one report naming the thread, the signal and the request, with a backtrace, and the
process dies by that signal; a serving process holds no capability and cannot gain one, while
--doctor (which drops nothing) reports what the process was started with."""

import json
import os
import re
import signal

from m0test import Server, check, eq, run_app

# ThreadSanitizer runs this module (a crash named by its thread): run.py, D235.
THREADED = True

FRAME = re.compile(r"^\S.*\[0x[0-9a-f]+\]$")  # backtrace_symbols_fd: "obj(fn+0x1c)[0x7f…]"


def _connection_on(s, loop):
    while True:
        c = s.connect()
        if c.get("/health").header("x-worker") == str(loop):
            return c


def _report(s, first_line):
    """The report in the log: exactly one `crashed` line, equal to `first_line`, then
    `backtrace:` and at least three frames."""
    log = s.log_lines()
    crashed = [i for i, ln in enumerate(log) if " crashed: " in ln]
    eq([log[i] for i in crashed], [first_line], "crash lines")
    i = crashed[0]
    eq(log[i + 1 : i + 2], ["backtrace:"], "the line after the crash line")
    frames = []
    for ln in log[i + 2 :]:
        if not FRAME.match(ln):
            break
        frames.append(ln)
    check(len(frames) >= 3, f"{len(frames)} backtrace frames; log:\n{s.log_text()}")


def test_J2_L5_crash_on_a_loop_names_the_loop_and_request():
    env = {"M0_THREADS": 2, "M0_HOSTCHECK_CRASH": 1}
    with Server("host_check", env=env) as s:
        s.wait_ready()
        c = _connection_on(s, 1)
        c.request("GET", "/crash")
        c.expect_eof(timeout=10)
        eq(s.wait_exit(10), -signal.SIGSEGV, "exit status (killed by SIGSEGV)")
        _report(
            s,
            "m0[host_check]: loop 1 crashed: SIGSEGV (sent by a process) on its loop thread, "
            "serving GET /crash",
        )
        check("READY=1" in s.notify_lines(), "READY=1")


def test_J2_L5_crash_on_a_pool_thread_names_loop_and_thread():
    env = {"M0_THREADS": 2, "M0_HOSTCHECK_CRASH": 1}
    with Server("host_check", env=env, args=["--blocking-threads", "1"]) as s:
        s.wait_ready()
        c = _connection_on(s, 0)
        c.request("GET", "/crash-pool")
        c.expect_eof(timeout=10)
        eq(s.wait_exit(10), -signal.SIGSEGV, "exit status (killed by SIGSEGV)")
        _report(
            s,
            "m0[host_check]: loop 0 pool thread 0 crashed: SIGSEGV (sent by a process) on its "
            "pool thread, serving GET /crash-pool",
        )


def test_J2_crash_names_bus_and_abrt():
    for name, sig in (("BUS", signal.SIGBUS), ("ABRT", signal.SIGABRT)):
        with Server("host_check", env={"M0_HOSTCHECK_CRASH": 1}) as s:
            s.wait_ready()
            c = s.connect()
            c.request("GET", f"/crash?sig={name}")
            c.expect_eof(timeout=10)
            eq(s.wait_exit(10), -sig, f"exit status (killed by SIG{name})")
            _report(
                s,
                f"m0[host_check]: loop 0 crashed: SIG{name} (sent by a process) on its loop "
                "thread, serving GET /crash",
            )


def test_J2_crash_routes_are_404_without_the_variable():
    env = {"M0_HOSTCHECK_CRASH": "yes"}
    with Server("host_check", env=env, args=["--blocking-threads", "1"]) as s:
        s.wait_ready()
        c = s.connect()
        for path in ("/crash", "/crash-pool"):
            eq(c.get(path).status, 404, f"{path} without M0_HOSTCHECK_CRASH=1")
        eq(c.get("/health").status, 200, "/health after")
        eq(s.stop(), 0, "exit status")
        check(not any("crashed" in ln for ln in s.log_lines()), s.log_text())


def _status(path):
    out = {}
    with open(path) as f:
        for ln in f:
            k, _, v = ln.partition(":")
            out[k] = v.strip()
    return out


def test_K1_serving_process_holds_no_capability():
    check(os.geteuid() == 0, "this test runs as root (it checks what root gives up)")
    mine = _status("/proc/self/status")
    check(int(mine["CapEff"], 16) != 0, f"the test itself holds no capability: {mine['CapEff']}")
    with Server("host_check", env={"M0_THREADS": 2}, args=["--blocking-threads", "1"]) as s:
        s.wait_ready()
        eq(s.connect().get("/health").status, 200, "/health")
        tasks = os.listdir(f"/proc/{s.pid}/task")
        check(len(tasks) >= 5, f"threads of the serving process: {tasks}")
        for tid in tasks:
            st = _status(f"/proc/{s.pid}/task/{tid}/status")
            for k in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"):
                eq(st[k], "0000000000000000", f"{k} of thread {tid} ({st['Name']})")
            eq(st["NoNewPrivs"], "1", f"NoNewPrivs of thread {tid} ({st['Name']})")
            eq(st["Uid"].split(), ["0"] * 4, f"Uid of thread {tid}")
        eq(s.stop(), 0, "exit status")


def test_K1_doctor_reports_the_capabilities_it_was_started_with():
    mine = _status("/proc/self/status")
    rc, out, err = run_app("host_check", ["--doctor"])
    eq(rc, 0, f"doctor exit status; stderr {err!r}")
    doc = json.loads(out.strip().split("\n")[-1])
    caps = doc["capabilities"]
    eq((caps["effective"], caps["permitted"]), (mine["CapEff"], mine["CapPrm"]), "doctor's sets")
    check(caps["held"] not in ("", "="), f"held {caps['held']!r}")
    eq(caps["dropped_when_serving"], True, "dropped_when_serving")
