# SPDX-License-Identifier: MIT
"""The lifecycle (SPEC R1–R4, L3, X1–X3): every refusal exits 78 with one
`m0: <finding> (<fix>)` line, no READY=1, no loop started and no connection answered; a make
that fails anywhere (loop, pool thread, producer) refuses the start behind the barrier; the
drain answers what is in flight on every loop, names what outlives its bound and exits 1."""

import os
import re
import resource
import signal
import time

import m0test
from m0test import Server, build_dir, check, eq

# ThreadSanitizer runs this module (loops, the barrier, the drain): run.py, D235.
THREADED = True

MAKE_FIX = "the app could not build its handler; no loop accepted"


def _refused(expected, env=None, args=(), sockets=("tcp",), app="host_check", preexec_fn=None,
             only_line=True):
    """Start `app`, send a request at once, and expect exit 78 with exactly the refusal line
    `expected` (a string, or a compiled regex to fullmatch). only_line: stderr has nothing else
    (refusals by a check, before anything is built). Returns the refusal line."""
    with Server(app, env=env, args=args, sockets=sockets, preexec_fn=preexec_fn) as s:
        c = s.connect() if s.tcp_addr else None
        if c is not None:
            c.request("GET", "/health")
        eq(s.wait_exit(10), 78, f"exit status; log:\n{s.log_text()}")
        log = s.log_lines()
        refusals = [ln for ln in log if ln.startswith("m0: ")]
        eq(len(refusals), 1, f"refusal lines:\n{s.log_text()}")
        if isinstance(expected, str):
            eq(refusals[0], expected, "the refusal line")
        else:
            check(expected.fullmatch(refusals[0]), f"the refusal line {refusals[0]!r} is not "
                                                   f"{expected.pattern!r}")
        if only_line:
            eq(log, refusals, "stderr of a refusal by a check")
        check(
            not any("Event loop started" in ln for ln in log),
            f"a loop started although the start was refused:\n{s.log_text()}",
        )
        check("READY=1" not in s.notify_lines(), f"READY=1 was sent: {s.datagrams!r}")
        check(
            not any(ln.startswith("STATUS=") for ln in s.notify_lines()),
            f"STATUS= was sent: {s.datagrams!r}",
        )
        if c is not None:
            s.expect_in_backlog(c, 0.2)
        return refusals[0]


# ---- R1, R2: the host's checks ----


def test_R2_threads_count_env_refused():
    _refused(
        "m0: threads-count: M0_THREADS=0 serves no loop "
        "(set --threads (M0_THREADS) to 1 or more, or auto)",
        env={"M0_THREADS": 0},
    )


def test_R2_threads_count_flag_refused():
    """Given as a flag, the finding names the flag (R1)."""
    _refused(
        "m0: threads-count: --threads=0 serves no loop "
        "(set --threads (M0_THREADS) to 1 or more, or auto)",
        args=["--threads", "0"],
    )


def test_R2_workers_refused():
    _refused(
        "m0: workers: M0_WORKERS=2 asks for forked workers "
        "(systemd supervises this service as one process; set --threads (M0_THREADS))",
        env={"M0_WORKERS": 2},
    )


def _one_handler_built():
    if os.access(os.path.join(build_dir(), "apps", "one_handler"), os.X_OK):
        return True
    print(f"SKIP: no one_handler app in {build_dir()}/apps (not built): "
          "the max_threads 1 refusals are not tested", flush=True)
    return False


def test_R3_threads_vs_application_refused():
    """one_handler declares max_threads 1: two loops are refused by the host (R3), the knob
    named as it was given (R1)."""
    if not _one_handler_built():
        return
    for given, env, args in [("M0_THREADS=2", {"M0_THREADS": 2}, []),
                             ("--threads=2", {}, ["--threads", "2"])]:
        _refused(
            f"m0: threads-vs-application: one_handler serves at most 1 handler and {given} asks "
            "for 2 loops (set --threads (M0_THREADS) to the app's max_threads or fewer)",
            env=env,
            args=args,
            app="one_handler",
        )


def test_R3_blocking_vs_application_refused():
    """one_handler declares max_threads 1: a pool thread would be a second handler (R3)."""
    if not _one_handler_built():
        return
    for given, env, args in [("M0_BLOCKING_THREADS=1", {"M0_BLOCKING_THREADS": 1}, []),
                             ("--blocking-threads=1", {}, ["--blocking-threads=1"])]:
        _refused(
            f"m0: blocking-vs-application: one_handler serves at most 1 handler and {given} "
            "needs 2 (set --blocking-threads (M0_BLOCKING_THREADS) to 0)",
            env=env,
            args=args,
            app="one_handler",
        )


def test_R2_listen_sockets_refused():
    """A UDP socket passed beside a TCP listener: fd 4 is named; the TCP one serves nothing."""
    _refused(
        "m0: listen-sockets: passed fd 4 ('dgram') is not a listening stream socket "
        "(pass listening stream sockets (ListenStream= in the .socket unit))",
        sockets=[("tcp", "web"), ("udp", "dgram")],
    )


def _nofile(n):
    def lower():
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

    return lower


def test_R2_limits_refused():
    """RLIMIT_NOFILE 1024 (hard) cannot hold 10000 connections (the launcher moves passed fds
    through fd 1000, hence 1024 rather than less)."""
    line = _refused(
        re.compile(
            r"m0: limits: RLIMIT_NOFILE is 1024 \(hard 1024\) and --max-connections "
            r"\(M0_MAX_CONNECTIONS\)=10000 needs (\d+) \(raise LimitNOFILE= or lower "
            r"--max-connections \(M0_MAX_CONNECTIONS\)\)"
        ),
        preexec_fn=_nofile(1024),
    )
    need = int(re.search(r"needs (\d+)", line).group(1))
    check(need > 10000, f"{need} descriptors are not enough for 10000 connections")


def test_R2_limits_lowered_connections_served():
    """The same limit with --max-connections 500 is served: the check is about the need."""
    with Server("host_check", args=["--max-connections", "500"], preexec_fn=_nofile(1024)) as s:
        s.wait_ready()
        eq(s.connect().get("/health").status, 200, "/health")
        eq(s.stop(), 0, "exit status")


def test_R2_application_check_refused():
    """The app's own check (host_check refuses a period that is not a number) comes after the
    host's and refuses the same way."""
    _refused(
        "m0: application: M0_HOSTCHECK_PERIOD_MS='abc' is not a whole number from 1 "
        "(set M0_HOSTCHECK_PERIOD_MS to a whole number, 1 or more)",
        env={"M0_HOSTCHECK_PERIOD_MS": "abc"},
    )


def test_R2_two_failures_first_named():
    _refused(
        "m0: threads-count: M0_THREADS=0 serves no loop "
        "(set --threads (M0_THREADS) to 1 or more, or auto)",
        env={"M0_THREADS": 0, "M0_WORKERS": 2},
    )


def test_R2_host_check_before_application_check():
    """A host check and the app's check both fail: the host's, earlier in the list, is named."""
    _refused(
        "m0: workers: M0_WORKERS=2 asks for forked workers "
        "(systemd supervises this service as one process; set --threads (M0_THREADS))",
        env={"M0_WORKERS": 2, "M0_HOSTCHECK_PERIOD_MS": "abc"},
    )


# ---- R4, L3: make failing behind the barrier ----


def test_L3_R4_loop_make_fails_after_the_other_loop_built():
    """Loop 1's make fails 300 ms after loop 0 built its own: no loop starts, no READY=1, the
    request sent right after the spawn stays unanswered in the backlog, exit 78 naming loop 1."""
    t0 = time.monotonic()
    _refused(
        f"m0: loop 1's make failed: M0_HOSTCHECK_LOOP_MAKE_FAILS=1 asked for it ({MAKE_FIX})",
        env={"M0_THREADS": 2, "M0_HOSTCHECK_LOOP_MAKE_FAILS": 1, "M0_HOSTCHECK_MAKE_DELAY_MS": 300},
        only_line=False,
    )
    check(time.monotonic() - t0 >= 0.3, "refused before loop 1's make had run its 300 ms")


def test_L3_R4_loop_0_make_fails():
    _refused(
        f"m0: loop 0's make failed: M0_HOSTCHECK_LOOP_MAKE_FAILS=0 asked for it ({MAKE_FIX})",
        env={"M0_THREADS": 3, "M0_HOSTCHECK_LOOP_MAKE_FAILS": 0, "M0_HOSTCHECK_MAKE_DELAY_MS": 200},
        only_line=False,
    )


def test_L3_R4_pool_make_fails():
    """The pool thread's make fails (after 300 ms, while its loop has built): same refusal."""
    _refused(
        f"m0: loop 0 pool thread 0's make failed: M0_HOSTCHECK_POOL_MAKE_FAILS=1 asked for it "
        f"({MAKE_FIX})",
        env={
            "M0_BLOCKING_THREADS": 1,
            "M0_HOSTCHECK_POOL_MAKE_FAILS": 1,
            "M0_HOSTCHECK_MAKE_DELAY_MS": 300,
        },
        only_line=False,
    )


def test_L3_R4_pool_make_fails_on_two_loops():
    _refused(
        re.compile(
            r"m0: loop [01] pool thread [01]'s make failed: M0_HOSTCHECK_POOL_MAKE_FAILS=1 "
            r"asked for it \(" + re.escape(MAKE_FIX) + r"\)"
        ),
        env={"M0_THREADS": 2, "M0_BLOCKING_THREADS": 2, "M0_HOSTCHECK_POOL_MAKE_FAILS": 1},
        only_line=False,
    )


def test_L3_R4_producer_make_fails():
    """The producer is built after the barrier and before any loop serves (L1, S2): its make
    failing still leaves no loop started and nothing answered."""
    _refused(
        f"m0: the producer's make failed: M0_HOSTCHECK_PRODUCER_MAKE_FAILS=1 asked for it "
        f"({MAKE_FIX})",
        env={
            "M0_THREADS": 2,
            "M0_HOSTCHECK_PRODUCER_MAKE_FAILS": 1,
            "M0_HOSTCHECK_MAKE_DELAY_MS": 300,
        },
        only_line=False,
    )


# ---- X1–X3: the drain ----


def _on_loops(s, want, tries=8):
    """Open connections until one sits on each loop in `want` (x-worker of /instance).
    Returns {loop: conn}; extra connections stay open."""
    got = {}
    for _ in range(tries):
        c = s.connect()
        r = c.get("/instance")
        eq(r.status, 200, "/instance")
        w = int(r.header("x-worker"))
        eq(r.json()["loop"], w, "loop in /instance vs x-worker")
        got.setdefault(w, c)
        if all(x in got for x in want):
            return got
    raise AssertionError(f"no connection on loops {want} after {tries}: {sorted(got)}")


def _drain_notified(s, drain_ms=5000):
    """STOPPING=1 after READY=1, then EXTEND_TIMEOUT_USEC while the drain runs (X1, X2): the
    first one covers the drain's bound and its 1 s slack. Returns the first value."""
    lines = s.notify_lines()
    check("STOPPING=1" in lines, f"no STOPPING=1: {s.datagrams!r}")
    check(lines.index("STOPPING=1") > lines.index("READY=1"), "STOPPING=1 before READY=1")
    ext = [(i, ln) for i, ln in enumerate(lines) if ln.startswith("EXTEND_TIMEOUT_USEC=")]
    check(ext, f"no EXTEND_TIMEOUT_USEC in {lines!r}")
    for i, ln in ext:
        check(re.fullmatch(r"EXTEND_TIMEOUT_USEC=[1-9]\d*", ln), f"malformed {ln!r}")
        check(i > lines.index("STOPPING=1"), f"{ln} before STOPPING=1")
    first = int(ext[0][1].split("=", 1)[1])
    check(first >= (drain_ms + 1000) * 1000,
          f"EXTEND_TIMEOUT_USEC={first} does not cover {drain_ms} ms + 1 s slack")
    return first


def _wait_stopping(s, timeout=2):
    deadline = time.monotonic() + timeout
    while "STOPPING=1" not in s.notify_lines():
        left = deadline - time.monotonic()
        check(left > 0, f"no STOPPING=1 within {timeout}s of SIGTERM: {s.datagrams!r}")
        s._wait_readable([s.notify_sock], left)


def _answered_whole(c, ms, what):
    r = c.read_response(timeout=ms / 1000 + 5)
    eq(r.status, 200, f"{what}: status")
    eq(r.body, f'{{"slept_ms":{ms}}}\n'.encode(), f"{what}: body")
    eq(r.header("Content-Length"), str(len(r.body)), f"{what}: Content-Length")
    eq(r.header("Connection"), "close", f"{what}: Connection")
    c.expect_eof()
    c.close()  # as a client does on EOF
    return r


def test_X1_in_flight_on_each_loop_answered_whole():
    """A 1.5 s request on each of two loops (no pool: the loop itself is in the handler) when
    SIGTERM lands: STOPPING=1 comes while both are still running, both are answered whole with
    Connection: close, EXTEND_TIMEOUT_USEC is sent, exit 0."""
    with Server("host_check", env={"M0_THREADS": 2}) as s:
        s.wait_ready()
        on = _on_loops(s, [0, 1])
        sent = {}
        for w in (0, 1):
            # the time before the write: the server's 1.5 s may start before request() returns
            sent[w] = time.monotonic()
            on[w].request("GET", "/slow?ms=1500")
        time.sleep(0.3)
        s.send_signal(signal.SIGTERM)
        _wait_stopping(s)
        for w in (0, 1):
            check(on[w].nothing_within(0), f"loop {w} answered before its 1.5 s had passed")
        for w in (0, 1):
            r = _answered_whole(on[w], 1500, f"loop {w}")
            eq(r.header("x-worker"), str(w), f"x-worker of loop {w}'s answer")
            eq(r.header("x-thread"), "-1", f"x-thread of loop {w}'s answer")
            check(r.t - sent[w] >= 1.5, f"loop {w} answered after {r.t - sent[w]:.2f}s")
        s.close_conns()
        eq(s.wait_exit(5), 0, f"exit status; log:\n{s.log_text()}")
        _drain_notified(s)
        check(
            not any("past the drain's bound" in ln for ln in s.log_lines()),
            f"something was named past the bound:\n{s.log_text()}",
        )


def test_X2_loop_past_the_bound_named_exit_1():
    """M0_DRAIN_TIMEOUT_MS=500 and a 4 s request on loop 1: the log names loop 1 (and not
    loop 0), the request is not answered, exit 1, the process gone within the bound + 1 s
    slack (+ a margin)."""
    drain_ms = 500
    with Server("host_check", env={"M0_THREADS": 2, "M0_DRAIN_TIMEOUT_MS": drain_ms}) as s:
        s.wait_ready()
        on = _on_loops(s, [0, 1])
        c = on[1]
        c.request("GET", "/slow?ms=4000")
        time.sleep(0.2)
        t0 = time.monotonic()
        s.send_signal(signal.SIGTERM)
        rc = s.wait_exit(10)
        took = time.monotonic() - t0
        eq(rc, 1, f"exit status; log:\n{s.log_text()}")
        check(took >= drain_ms / 1000, f"gave up after {took:.2f}s, before the drain's bound")
        check(took < (drain_ms + 1000) / 1000 + 0.75, f"gone {took:.2f}s after SIGTERM")
        log = s.log_lines()
        named = [ln for ln in log if "still running past the drain's bound" in ln]
        check(
            any(re.search(r"\bloop 1 still running past the drain's bound\b", ln) for ln in named),
            f"loop 1 is not named:\n{s.log_text()}",
        )
        check(
            not any(re.search(r"\bloop 0\b", ln) for ln in named),
            f"loop 0, idle, is named:\n{s.log_text()}",
        )
        # The cut request got no byte of an answer.
        c.sock.settimeout(2)
        while c._fill(2):
            pass
        eq(c.buf, b"", "bytes the cut request received")
        _drain_notified(s, drain_ms)


def test_X3_request_answered_beside_a_60s_producer_step():
    """A 4 s request in flight beside a 60 s producer step (default bound 5000 ms): the request
    is answered whole, the step is named and abandoned, exit 1, gone ~6 s after the signal."""
    with Server("host_check", env={"M0_HOSTCHECK_STEP_COST_MS": 60000}) as s:
        s.wait_ready()
        c = s.connect()
        eq(c.get("/health").status, 200, "/health while the producer steps")
        time.sleep(0.1)
        # Taken before the send: the server may start its 4 s before request() returns.
        sent = time.monotonic()
        c.request("GET", "/slow?ms=4000")
        time.sleep(0.2)
        t0 = time.monotonic()
        s.send_signal(signal.SIGTERM)
        r = _answered_whole(c, 4000, "the 4 s request")
        check(r.t - sent >= 4.0, f"answered after {r.t - sent:.2f}s")
        check(r.t - t0 < 5.0, f"answered {r.t - t0:.2f}s after SIGTERM, past the drain's bound")
        s.close_conns()
        rc = s.wait_exit(10)
        took = time.monotonic() - t0
        eq(rc, 1, f"exit status; log:\n{s.log_text()}")
        check(took < 6.5, f"gone {took:.2f}s after SIGTERM (bound 5 s + 1 s slack)")
        log = s.log_lines()
        check(
            any("the producer step is still running past the drain's bound" in ln for ln in log),
            f"the producer step is not named:\n{s.log_text()}",
        )
        check(
            not any(re.search(r"\bloop \d+ still running past", ln) for ln in log),
            f"a loop is named although its request was answered:\n{s.log_text()}",
        )
        _drain_notified(s)


def test_X1_pool_job_finishes():
    """With a pool, a 1 s job in flight at SIGTERM is answered whole; exit 0."""
    with Server("host_check", env={"M0_BLOCKING_THREADS": 1}) as s:
        s.wait_ready()
        c = s.connect()
        eq(c.get("/health").status, 200, "/health")
        # before the request: the host may start the job before request() returns
        sent = time.monotonic()
        c.request("GET", "/slow?ms=1000")
        time.sleep(0.2)
        s.send_signal(signal.SIGTERM)
        _wait_stopping(s)
        r = _answered_whole(c, 1000, "the pool job")
        eq(r.header("x-thread"), "0", "x-thread: it ran on the pool")
        check(r.t - sent >= 1.0, f"answered after {r.t - sent:.2f}s")
        s.close_conns()
        eq(s.wait_exit(5), 0, f"exit status; log:\n{s.log_text()}")
        _drain_notified(s)


def test_X1_request_queued_on_a_busy_loop_answered():
    """Connection A keeps its loop busy in /slow?ms=800; connection B, on the same loop, sends
    GET /health just before SIGTERM. When the loop comes back, B's bytes are a request in
    flight, not idleness: answered (200, Connection: close), not dropped."""
    with Server("host_check", env={"M0_THREADS": 2}) as s:
        s.wait_ready()
        conns = []
        pair = None
        for _ in range(6):
            c = s.connect()
            w = c.get("/instance").header("x-worker")
            same = [x for x, wx in conns if wx == w]
            if same:
                pair = (same[0], c, w)
                break
            conns.append((c, w))
        check(pair is not None, "no two connections on one loop")
        a, b, w = pair
        a.request("GET", "/slow?ms=800")
        time.sleep(0.2)
        b.request("GET", "/health")
        time.sleep(0.1)
        s.send_signal(signal.SIGTERM)
        _answered_whole(a, 800, "A")
        r = b.read_response(timeout=5)
        eq((r.status, r.body), (200, b"ok\n"), "B's request")
        eq(r.header("Connection"), "close", "B: Connection")
        eq(r.header("x-worker"), w, "B ran on the busy loop")
        b.expect_eof()
        b.close()
        s.close_conns()
        eq(s.wait_exit(5), 0, f"exit status; log:\n{s.log_text()}")
        _drain_notified(s)



def _fault_shim(tmp):
    """tests/shim/fault.c built into `tmp` (an LD_PRELOAD shim that fails an epoll_create1()
    and records a close() below fd 3)."""
    import subprocess

    so = os.path.join(tmp, "fault.so")
    cc = m0test.tool("cc", "build-essential")
    src = os.path.join(m0test.REPO, "tests", "shim", "fault.c")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", so, src, "-ldl"], check=True)
    return so


def test_L1_loop_1_failing_its_setup_closes_no_descriptor_below_3():
    """counter --threads 3 with loop 1's epoll_create1() failing (an LD_PRELOAD shim): the
    start fails (exit 1, the loop named), and no descriptor below 3 is closed on the way out:
    every loop was prepared (its fds -1) before any was built, so destroying loops 1 and 2,
    half-built and never built, closes nothing of theirs that is not theirs."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="m0test-") as tmp:
        so = _fault_shim(tmp)
        log = os.path.join(tmp, "low-closes")
        env = {
            "LD_PRELOAD": so,
            "M0TEST_EPOLL_FAIL_AT": "2",
            "M0TEST_LOW_CLOSE_LOG": log,
            "M0_PORT": "0",
            # an ASan runtime is linked after the shim; the order does not matter here
            "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0",
        }
        rc, out, err = m0test.run_app("counter", ["--threads", "3"], env=env)
        eq(rc, 1, f"exit status; stderr:\n{err}")
        check("cannot set up loop 1: Too many open files" in err, f"stderr:\n{err}")
        check("Event loop started" not in err, f"a loop served:\n{err}")
        low = open(log).read() if os.path.exists(log) else ""
        eq(low, "", "descriptors below 3 closed")
