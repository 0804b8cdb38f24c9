# SPDX-License-Identifier: MIT
"""Event state in systemd's fd store (SPEC B4, Y1): the first start hands a memfd named m0-bus
to the store (FDSTORE=1, FDNAME=m0-bus); a process started with it back (LISTEN_FDNAMES names
it beside the listener) continues the ids and replays what is kept across a kill -9; no
stored fd, or one that is not m0 event state, starts ids at 1 and serving goes on."""

import os
import re

from m0test import SSEReader, Server, check, eq, open_stream

STORE_TEXT = "FDSTORE=1\nFDNAME=m0-bus"


def beat(n, pid, event_id):
    return f'id: {event_id}\nevent: beat\ndata: {{"beat":{n},"pid":{pid}}}\n\n'.encode()


def _stored(s):
    """The fd the app handed to the store (its datagram must carry exactly one)."""
    every = s.take_notify_fds()
    got = [(d, fds) for _, d, fds in every if "FDSTORE=1" in d.split("\n")]
    stray = [(d, fds) for _, d, fds in every if "FDSTORE=1" not in d.split("\n") and fds]
    for _, fds in got[1:] + stray:
        for fd in fds:
            os.close(fd)
    eq(stray, [], "fds on a datagram other than FDSTORE=1")
    eq([d for d, _ in got], [STORE_TEXT], "FDSTORE datagrams")
    fds = got[0][1]
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
    eq(len(fds), 1, "fds attached to FDSTORE=1")
    return fds[0]


def _stream(s, headers=None):
    c = s.connect()
    r = open_stream(c, "/events", headers)
    eq(r.status, 200, "status of /events")
    rd = SSEReader(c)
    eq(rd.expect(5).raw, b": open\n\n", "first bytes")
    return rd


def test_B4_first_start_hands_a_memfd_to_the_store_and_ids_start_at_1():
    with Server("host_check", env={"M0_HOSTCHECK_PERIOD_MS": 50}, collect_fds=True) as s:
        s.wait_ready()
        fd = _stored(s)
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            check(target.startswith("/memfd:m0-bus"), f"the stored fd is {target!r}")
            check(os.fstat(fd).st_size > 0, "the stored memfd is empty")
        finally:
            os.close(fd)
        eq(
            s.wait_log(r"ids start at 1"),
            "m0[host_check]: no event state in the fd store (a first start, or systemctl stop "
            "flushed it): ids start at 1",
            "the log line",
        )
        f = _stream(s, [("Last-Event-ID", "0")]).expect(5)
        eq(f.raw, beat(1, s.pid, 1), "the first event")
        eq(s.stop(), 0, "exit status")


def test_B4_ids_continue_after_kill_9_and_replay_crosses_it():
    env = {"M0_HOSTCHECK_PERIOD_MS": 50}
    fd = None
    try:
        with Server("host_check", env=env, collect_fds=True) as s1:
            s1.wait_ready()
            fd = _stored(s1)
            rd = _stream(s1)
            seen = [rd.expect(5) for _ in range(12)]
            for f in seen:
                eq(f.raw, beat(f.id_int, s1.pid, f.id_int), "a beat before the crash")
            last = seen[-1].id_int
            old_pid = s1.pid
            s1.proc.kill()
            eq(s1.wait_exit(5), -9, "killed")
        with Server(
            "host_check", env=env, sockets=(("tcp", "http"),), extra_fds=[("m0-bus", fd)]
        ) as s2:
            s2.wait_ready()
            line = s2.wait_log(r"event state taken back from the fd store")
            m = re.fullmatch(
                r"m0\[host_check\]: event state taken back from the fd store: ids continue "
                r"after (\d+), (\d+) frames kept for replay",
                line,
            )
            check(m, f"the log line {line!r}")
            n, kept = int(m.group(1)), int(m.group(2))
            check(n >= last, f"ids continue after {n}, but {last} was seen before the crash")
            eq(kept, n, "frames kept (all of them, fewer than the ring holds)")
            check(not any("ids start at 1" in ln for ln in s2.log_lines()), s2.log_text())
            # A client that saw `last` - 5 reconnects: everything after it, once, in order —
            # the old process's frames from the ring, then the new one's.
            back = _stream(s2, [("Last-Event-ID", str(last - 5))])
            got = [back.expect(5) for _ in range(n - last + 5 + 10)]
            eq([f.id_int for f in got], list(range(last - 4, n + 11)), "ids after reconnecting")
            for f in got:
                i = f.id_int
                want = beat(i, old_pid, i) if i <= n else beat(i - n, s2.pid, i)
                eq(f.raw, want, f"frame {i}")
            # A new client: live ids only, past the old ones.
            fresh = _stream(s2).expect(5)
            check(fresh.id_int > n + 10, f"a new stream's first id {fresh.id_int}")
            eq(s2.stop(), 0, "exit status")
    finally:
        if fd is not None:
            os.close(fd)


def test_B4_garbage_named_m0_bus_is_not_state_ids_start_at_1():
    fd = os.memfd_create("m0-bus")
    try:
        os.write(fd, b"not m0 event state\n" * 64)
        with Server(
            "host_check",
            env={"M0_HOSTCHECK_PERIOD_MS": 50},
            sockets=(("tcp", "http"),),
            extra_fds=[("m0-bus", fd)],
            collect_fds=True,
        ) as s:
            s.wait_ready()
            line = s.wait_log(r"is not m0 event state")
            check(
                re.fullmatch(
                    r"m0\[host_check\]: the fd store's 'm0-bus' is not m0 event state \(.+\): "
                    r"ids start at 1",
                    line,
                ),
                f"the log line {line!r}",
            )
            eq(s.connect().get("/health").body, b"ok\n", "/health")
            f = _stream(s, [("Last-Event-ID", "0")]).expect(5)
            eq(f.raw, beat(1, s.pid, 1), "the first event")
            # The new state goes to the store in place of the garbage.
            os.close(_stored(s))
            eq(s.stop(), 0, "exit status")
    finally:
        os.close(fd)
