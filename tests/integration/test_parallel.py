"""host_parallel (SPEC A6, P4): /ser and /par give the same sum on 1 and 2 loops, with and
without a handler pool, under 8 concurrent /par; a nested parallel call does not deadlock;
SIGTERM during a /par drains it whole."""

import re
import signal
import threading

import m0test
from m0test import Server, check, eq

# ThreadSanitizer runs this module (compute threads): run.py, D235.
THREADED = True

SUM = re.compile(r"^(ser|par)=(\d+)us sum=(\d+\.\d{6})\n$")


def _get(s, path):
    c = s.connect()
    try:
        return c.get(path, timeout=60)
    finally:
        c.close()


def _sum(resp, kind):
    eq(resp.status, 200, "status")
    m = SUM.match(resp.body.decode())
    check(m is not None, f"body {resp.body!r}")
    eq(m.group(1), kind, "route kind")
    return m.group(3)


def _same_sums(env):
    with Server("host_parallel", env=env) as s:
        s.wait_ready()
        ser = _get(s, "/ser")
        par = _get(s, "/par")
        eq(_sum(par, "par"), _sum(ser, "ser"), "par sum equals ser sum")
        return ser, par


def test_P4_A6_same_sum_one_loop():
    ser, par = _same_sums({"M0_THREADS": "1"})
    eq(par.header("x-thread"), "-1", "no pool: /par runs on the loop")
    eq(par.header("x-worker"), "0", "x-worker")


def test_P4_A6_same_sum_two_loops():
    _same_sums({"M0_THREADS": "2"})


def test_P4_A6_same_sum_with_pool():
    ser, par = _same_sums({"M0_THREADS": "2", "M0_BLOCKING_THREADS": "2"})
    check(par.header("x-thread") in ("0", "1"), f"x-thread {par.header('x-thread')!r} on the pool")


def test_P4_A6_inline_when_compute_threads_0():
    _same_sums({"M0_COMPUTE_THREADS": "0"})


def test_P4_eight_concurrent_par():
    with Server("host_parallel", env={"M0_THREADS": "2", "M0_BLOCKING_THREADS": "2"}) as s:
        s.wait_ready()
        want = _sum(_get(s, "/ser"), "ser")
        got, errors = [], []

        def one():
            try:
                got.append(_sum(_get(s, "/par"), "par"))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

        ts = [threading.Thread(target=one) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        eq(errors, [], "errors")
        eq(got, [want] * 8, "eight concurrent sums")


def test_P4_nested_call_runs_inline():
    with Server("host_parallel", env={"M0_THREADS": "1"}) as s:
        s.wait_ready()
        ser = _sum(_get(s, "/ser?nested=1"), "ser")
        par = _sum(_get(s, "/par?nested=1"), "par")
        eq(par, ser, "nested par sum")
        eq(par, _sum(_get(s, "/par"), "par"), "nested and flat give the same bits")


def test_P4_sigterm_during_par_drains():
    with Server("host_parallel", env={"M0_THREADS": "1"}) as s:
        s.wait_ready()
        want = _sum(_get(s, "/ser"), "ser")
        c = s.connect()
        eq(c.get("/health").status, 200, "the connection is accepted and served")
        # Bytes that reached the socket before the signal are a request in flight (X1): the
        # drain answers it whole whether or not the loop had read it yet.
        c.send(b"GET /par HTTP/1.1\r\nHost: t\r\n\r\n")
        s.send_signal(signal.SIGTERM)
        r = c.read_response(timeout=30)
        code = s.wait_exit(timeout=10)
        eq(_sum(r, "par"), want, "drained /par sum")
        eq(r.header("Connection"), "close", "Connection on the drained answer")
        eq(code, 0, "exit code")
