# SPDX-License-Identifier: MIT
"""The pool (SPEC P1, P2, P3): blocking routes run on the loop's pool threads while the loop
keeps answering; without a pool they hold the loop; answers say where they ran; a stream
opened from a pool thread is refused with 409."""

import time

from m0test import OPEN_BLOCKS, SSEReader, Server, check, eq, open_stream

# ThreadSanitizer runs this module (the pool): run.py, D235.
THREADED = True

JOB_MS = 300


def _health_during_jobs(s, njobs, path):
    """Start `njobs` requests of `path` on their own connections, then time /health on a warm
    connection of the same loop. Returns (seconds /health took, [responses of the jobs],
    [seconds each job took])."""
    h = s.connect()
    eq(h.get("/health").status, 200, "/health before the jobs")
    jobs = [s.connect() for _ in range(njobs)]
    for c in jobs:
        eq(c.get("/health").status, 200, "/health on a job's connection")
    t0 = time.monotonic()
    for c in jobs:
        c.request("GET", path)
    time.sleep(0.05)  # the jobs are running
    t1 = time.monotonic()
    r = h.get("/health")
    took = time.monotonic() - t1
    eq((r.status, r.body), (200, b"ok\n"), "/health while the jobs run")
    eq(r.header("x-thread"), "-1", "x-thread of /health")
    out = [c.read_response(timeout=10) for c in jobs]
    return took, out, [x.t - t0 for x in out]


def test_P1_loop_answers_while_the_pool_computes():
    """--blocking-threads 2, one loop, two 300 ms /slow jobs in flight: /health answers in
    under 100 ms, and both jobs ran at once on pool threads 0 and 1."""
    with Server("host_check", args=["--blocking-threads", "2"]) as s:
        s.wait_ready()
        took, out, times = _health_during_jobs(s, 2, f"/slow?ms={JOB_MS}")
        check(took < 0.1, f"/health took {took * 1000:.0f} ms beside two pool jobs")
        for r in out:
            eq((r.status, r.body), (200, f'{{"slept_ms":{JOB_MS}}}\n'.encode()), "/slow")
            eq(r.header("x-worker"), "0", "x-worker of /slow")
        eq(sorted(r.header("x-thread") for r in out), ["0", "1"], "x-thread of the two jobs")
        # In parallel: both end about 300 ms after they were sent, not 600.
        check(max(times) < 2 * JOB_MS / 1000 - 0.05, f"jobs took {times} (serialised?)")
        check(min(times) >= JOB_MS / 1000 - 0.02, f"a job ended early: {times}")
        eq(s.stop(), 0, "exit status")


def test_P1_without_a_pool_the_job_holds_the_loop():
    """The negative arm: no pool, one loop, a 300 ms /slow in flight: /health waits behind it
    (at least 150 ms), and /slow ran on the loop (x-thread -1)."""
    with Server("host_check") as s:
        s.wait_ready()
        took, out, _ = _health_during_jobs(s, 1, f"/slow?ms={JOB_MS}")
        check(took >= 0.15, f"/health took only {took * 1000:.0f} ms behind a job on the loop")
        eq(out[0].status, 200, "/slow")
        eq((out[0].header("x-worker"), out[0].header("x-thread")), ("0", "-1"), "/slow ran on")
        eq(s.stop(), 0, "exit status")


def test_P1_P3_ramp_search_on_the_pool_now_on_the_loop():
    with Server("ramp", env={"M0_THREADS": 2}, args=["--blocking-threads", "2"]) as s:
        s.wait_ready()
        took, out = _now_during_ramp_jobs(s)
        check(took < 0.1, f"/x/now took {took * 1000:.0f} ms beside two pool jobs")
        eq(sorted(r.header("x-thread") for r in out), ["0", "1"], "x-thread of two jobs at once")
        c = s.connect()
        loop = c.get("/x/now").header("x-worker")
        for _ in range(3):
            r = c.get("/x/search?sel=5&k=3")
            eq(r.status, 200, "/x/search")
            check(r.body.startswith(b'{"sel":5,"k":3,"ids":['), f"/x/search body {r.body!r}")
            eq(r.header("x-worker"), loop, "x-worker of /x/search")
            check(r.header("x-thread") in ("0", "1"), f"x-thread {r.header('x-thread')!r}")
        r = c.get("/x/now")
        eq((r.header("x-worker"), r.header("x-thread")), (loop, "-1"), "/x/now ran on")
        eq(s.stop(), 0, "exit status")


def _now_during_ramp_jobs(s):
    """Two 300 ms /x/slow jobs on the loop of a warm connection; time /x/now on it."""
    h = s.connect()
    loop = h.get("/x/now").header("x-worker")
    jobs = []
    while len(jobs) < 2:  # two connections on the loop /x/now is timed on
        c = s.connect()
        if c.get("/x/now").header("x-worker") == loop:
            jobs.append(c)
    for c in jobs:
        c.request("GET", f"/x/slow?ms={JOB_MS}")
    time.sleep(0.05)
    t1 = time.monotonic()
    r = h.get("/x/now")
    took = time.monotonic() - t1
    eq((r.status, r.header("x-thread")), (200, "-1"), "/x/now while the jobs run")
    out = [c.read_response(timeout=10) for c in jobs]
    for r in out:
        eq((r.status, r.body), (200, f'{{"slept_ms":{JOB_MS}}}'.encode()), "/x/slow")
        eq(r.header("x-worker"), loop, "x-worker of /x/slow")
    return took, out


def test_P2_stream_from_a_pool_thread_is_409():
    with Server("host_check", args=["--blocking-threads", "1"]) as s:
        s.wait_ready()
        c = s.connect()
        r = c.get("/events-from-func")
        eq(r.status, 409, "status of a stream opened on a pool thread")
        eq(r.body, b"409 Conflict: streams are served on the loop\n", "body of the 409")
        eq(r.header("Content-Length"), str(len(r.body)), "Content-Length of the 409")
        line = s.wait_log(r"opened a stream on pool thread", timeout=5)
        eq(
            line,
            "m0[host_check] loop 0: GET /events-from-func opened a stream on pool thread 0: "
            "answered 409 (streams are served from loop routes only)",
            "the log line",
        )
        # The connection goes on; nothing of a stream was sent on it.
        r = c.get("/health")
        eq((r.status, r.body), (200, b"ok\n"), "/health after the 409")
        eq(s.stop(), 0, "exit status")


def test_P2_without_a_pool_the_same_route_streams():
    with Server("host_check", env={"M0_HOSTCHECK_PERIOD_MS": 50}, state_dir=True) as s:
        s.wait_ready()
        c = s.connect()
        r = open_stream(c, "/events-from-func")
        eq(r.status, 200, "status of /events-from-func on the loop")
        eq(r.header("Content-Type"), "text/event-stream", "Content-Type")
        eq((r.header("x-worker"), r.header("x-thread")), ("0", "-1"), "where it ran")
        eq(c.read_exact(len(OPEN_BLOCKS), timeout=5), OPEN_BLOCKS, "first bytes")
        f = SSEReader(c).expect(5)
        eq((f.event, f.data), ("beat", [f'{{"beat":{f.id_int},"pid":{s.pid}}}']), "a beat")
        eq(s.stop(), 0, "exit status")
        refused = [ln for ln in s.log_lines() if "opened a stream on pool thread" in ln]
        eq(refused, [], "409 lines without a pool")
