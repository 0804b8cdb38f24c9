# SPDX-License-Identifier: MIT
"""The stop under load and its edges (SPEC X1, X2, L4, H2, H6): every connection accepted before
the stop is answered or left in the listener's backlog for the next process, handed-over
connections included; a stream whose client stopped reading does not fail the stop; a HEAD on a
stream route is a head and nothing more; the header timeout holds behind an answer still being
written."""

import re
import signal
import socket
import threading
import time

from m0test import Server, build_request, check, eq

# ThreadSanitizer runs this module (the stop across loops): run.py, D235.
THREADED = True

_BACKLOG_STATUS = 299  # what the test itself answers on connections the host never took


def _client_loop(addr, stop, results, lock):
    """Open connection after connection, one GET /health each, until `stop` is set. Each
    outcome is recorded: ("answered", status), ("backlog",) for a connection the test answered
    itself after the host exited, or ("lost", bytes) for one closed with no answer."""
    while not stop.is_set():
        try:
            s = socket.create_connection(addr, timeout=20)
        except OSError as e:
            with lock:
                results.append(("connect-failed", str(e)))
            continue
        try:
            s.settimeout(20)
            s.sendall(build_request("GET", "/health", [("Connection", "close")]))
            got = b""
            while True:
                try:
                    data = s.recv(65536)
                except ConnectionResetError:
                    data = b""
                if not data:
                    break
                got += data
            m = re.match(rb"HTTP/1\.1 (\d{3}) ", got)
            with lock:
                if not m:
                    results.append(("lost", got))
                elif int(m.group(1)) == _BACKLOG_STATUS:
                    results.append(("backlog",))
                else:
                    results.append(("answered", int(m.group(1)), got.endswith(b"ok\n")))
        except socket.timeout:
            with lock:
                results.append(("timeout",))
        finally:
            s.close()


def _answer_backlog(listener, want, quiet_for=0.5):
    """After the host exited: take every connection still queued on the passed listener and
    answer it with the test's own status, as the next process would have answered it."""
    listener.settimeout(quiet_for)
    n = 0
    while True:
        try:
            peer, _ = listener.accept()
        except socket.timeout:
            return n
        with peer:
            peer.settimeout(2)
            got = b""
            while len(got) < len(want):
                data = peer.recv(65536)
                if not data:
                    break
                got += data
            eq(got, want, "the request waiting in the backlog")
            peer.sendall(b"HTTP/1.1 %d Backlog\r\nContent-Length: 0\r\n\r\n" % _BACKLOG_STATUS)
        n += 1


def _exit_counts(log):
    passed = received = 0
    lines = [ln for ln in log if re.search(r" loop \d+: loop stopped: ", ln)]
    for ln in lines:
        passed += int(re.search(r"\bpassed (\d+)", ln).group(1))
        received += int(re.search(r"\breceived (\d+)", ln).group(1))
    return len(lines), passed, received


def test_X1_L4_stop_under_connection_churn_loses_no_hand_off():
    """Two loops, one to three clients opening connection after connection, SIGTERM 0.5-0.8 s in:
    every client is answered by the host or waits in the backlog for the next process, never
    closed unanswered; the loops' exit lines agree (passed = received); exit 0. The race this
    guards (a loop that stopped with no connection leaving while another still hands it one)
    is narrow: before its fix one stop in six or so lost a client, so the stop is repeated."""
    want = build_request("GET", "/health", [("Connection", "close")])
    for rnd in range(12):
        with Server("host_check", env={"M0_THREADS": 2}) as s:
            s.wait_ready()
            stop, lock, results = threading.Event(), threading.Lock(), []
            clients = [
                threading.Thread(target=_client_loop, args=(s.tcp_addr, stop, results, lock))
                for _ in range(1 + rnd % 3)
            ]
            for t in clients:
                t.start()
            try:
                time.sleep(0.5 + 0.025 * rnd)
                s.send_signal(signal.SIGTERM)
                rc = s.wait_exit(15)
            finally:
                stop.set()
                # Each client ends after the connection it has open now; one waiting in the
                # backlog is answered here, as the next process would answer it.
                deadline = time.monotonic() + 15
                while any(t.is_alive() for t in clients) and time.monotonic() < deadline:
                    _answer_backlog(s.tcp_listener(), want, quiet_for=0.1)
                for t in clients:
                    t.join(1)
            bad = [r for r in results if r[0] not in ("answered", "backlog")]
            check(not bad, f"round {rnd}: {len(bad)} client(s) lost: {bad[:5]}\n{s.log_text()}")
            wrong = [r for r in results if r[0] == "answered" and (r[1] != 200 or not r[2])]
            check(not wrong, f"round {rnd}: answers other than 200 ok: {wrong[:5]}")
            eq(rc, 0, f"round {rnd}: exit status; log:\n{s.log_text()}")
            n, passed, received = _exit_counts(s.log_lines())
            eq(n, 2, f"round {rnd}: loop exit lines")
            eq(passed, received, f"round {rnd}: passed vs received; log:\n{s.log_text()}")
            answered = sum(1 for r in results if r[0] == "answered")
            check(answered > 0 and passed > 0, f"round {rnd}: no load reached both loops")


def test_X1_X2_stream_that_stopped_reading_does_not_fail_the_stop():
    """A stream whose client stopped reading, with a backlog of frames it has not taken, and a
    reading stream beside it: SIGTERM with --drain-timeout-ms 1000 closes the stalled one at
    the drain without waiting for it, the reading one gets its farewell, nothing is cut, exit 0
    well before the bound (a stream's farewell is best effort)."""
    env = {"M0_HOSTCHECK_PERIOD_MS": 1}
    with Server("host_check", env=env, args=["--drain-timeout-ms", "1000"], start=False) as s:
        # Small kernel buffers on both ends, so the backlog builds within a fraction of a second.
        s.listeners[0][2].setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        s.start()
        s.wait_ready()
        good = s.connect()
        good.request("GET", "/events")
        eq(good.read_head(5).status, 200, "the reading stream")
        stalled = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(s.tcp_addr)
        stalled.sendall(b"GET /events HTTP/1.1\r\nHost: test\r\n\r\n")
        # About 45 bytes a millisecond: the 8 KiB or so of kernel buffer is full long before.
        deadline = time.monotonic() + 0.6
        while time.monotonic() < deadline:
            good._fill(1)
            good.buf = good.buf[-64:]
        t0 = time.monotonic()
        s.send_signal(signal.SIGTERM)
        while good._fill(5):
            good.buf = good.buf[-64:]
        check(good.buf.endswith(b": bye\n\n"), f"the reading stream's last bytes {good.buf!r}")
        good.close()
        rc = s.wait_exit(5)
        took = time.monotonic() - t0
        stalled.close()
        eq(rc, 0, f"exit status; log:\n{s.log_text()}")
        check(took < 0.9, f"the stop waited {took:.2f}s for a client that does not read")
        log = s.log_lines()
        check(not any("cut" in ln for ln in log), f"a connection was cut:\n{s.log_text()}")
        stopped = [ln for ln in log if "loop stopped:" in ln]
        eq(len(stopped), 1, f"loop stopped lines: {stopped}")
        m = re.search(r"streams closed unread at the stop (\d+)", stopped[0])
        check(m and int(m.group(1)) == 1, f"stalled streams in {stopped[0]!r}")


def _head_timeout_behind_an_answer(body_bytes):
    """One write: POST /echo with `body_bytes` and the first bytes of a next head; then one
    head byte every 0.25 s; the client reads nothing for 2 s, then everything. The head's
    deadline (--header-timeout-ms 1000, from its first byte) passed while the echo was still
    being written: the 408 follows the echo at once, then the end of the connection."""
    env = {"M0_MAX_BODY_BYTES": 16 << 20, "M0_HEADER_TIMEOUT_MS": 1000}
    with Server("host_check", env=env, start=False) as s:
        s.listeners[0][2].setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        s.start()
        s.wait_ready()
        c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.connect(s.tcp_addr)
        body = bytes(range(256)) * (body_bytes // 256)
        first = build_request("POST", "/echo", [], body) + b"GET /health HTTP/1.1\r\nHo"
        done = threading.Event()

        def writer():
            try:
                c.sendall(first)
                for ch in b"st: t\r\nX-Slow: 1234567890":
                    if done.wait(0.25):
                        return
                    c.sendall(bytes([ch]))
            except OSError:
                pass  # closed by the host after its 408: what this test expects

        t = threading.Thread(target=writer, daemon=True)
        t.start()
        time.sleep(2.0)
        c.settimeout(10)
        got = b""
        t_echo_end = t_408 = None
        want_head = f"HTTP/1.1 200 OK\r\n".encode()
        while True:
            try:
                data = c.recv(1 << 20)
            except (ConnectionResetError, socket.timeout):
                data = b""
            now = time.monotonic()
            if not data:
                break
            got += data
            i = got.find(b"\r\n\r\n")
            if t_echo_end is None and i >= 0 and len(got) >= i + 4 + len(body):
                t_echo_end = now
            if t_408 is None and b"HTTP/1.1 408 " in got[len(body) :]:
                t_408 = now
        t_eof = time.monotonic()
        done.set()
        c.close()
        check(got.startswith(want_head), f"first answer {got[:60]!r}")
        i = got.index(b"\r\n\r\n") + 4
        eq(got[i : i + len(body)] == body, True, "the echoed body, whole")
        rest = got[i + len(body) :]
        check(rest.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), f"after the echo: {rest[:80]!r}")
        check(b"\r\nConnection: close\r\n" in rest, f"the 408's head {rest!r}")
        check(t_408 is not None and t_408 - t_echo_end < 0.5,
              f"the 408 came {None if t_408 is None else round(t_408 - t_echo_end, 2)}s after the echo")
        check(t_eof - t_echo_end < 0.6, f"the connection ended {t_eof - t_echo_end:.2f}s after the echo")
        eq(s.stop(), 0, "exit status")


def test_H2_header_timeout_behind_an_answer_within_the_output_bound():
    """The next head is parsed before the answer is out (512 KiB, under --max-output-bytes)."""
    _head_timeout_behind_an_answer(512 << 10)


def test_H2_header_timeout_behind_an_answer_past_the_output_bound():
    """The next head waits unparsed behind a 12 MiB answer (over --max-output-bytes)."""
    _head_timeout_behind_an_answer(12 << 20)
