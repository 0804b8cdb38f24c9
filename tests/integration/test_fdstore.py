# SPDX-License-Identifier: MIT
"""Event state in systemd's fd store (SPEC B4, Y1): the first start hands a memfd named m0-bus
to the store (FDSTORE=1, FDNAME=m0-bus); a process started with it back (LISTEN_FDNAMES names
it beside the listener) continues the ids and replays what is kept across a kill -9; no
stored fd, or one that is not m0 event state, starts ids at 1 and serving goes on."""

import os
import re
import struct

from m0test import SSEReader, Server, check, eq, open_stream

STORE_TEXT = "FDSTORE=1\nFDNAME=m0-bus"
REMOVE_TEXT = "FDSTOREREMOVE=1\nFDNAME=m0-bus"

# The memfd's layout (src/store.c, DECISIONS D19), in native byte order: a header (magic,
# version, cap, data_size, last_id, data_head), `cap` index entries (id, pos, len, pad), then
# the data ring.
HEAD = struct.Struct("=8sIIQQQ")
ENTRY = struct.Struct("=QQII")
MAGIC = b"m0bus-1\0"
NOT_KEPT = 0xFFFFFFFF
U64 = 2**64


def data_size_for(cap):
    return max(cap * 512, 64 * 1024)


def store_image(cap, frames=(), entries=None, magic=MAGIC, version=1, data_size=None,
                last_id=None, data_head=None, size=None):
    """A store as this host writes it: `frames` [(id, bytes)] laid out one after the other from
    position 0, each in entry id % cap. `entries` {id: (pos, len)} then overrides an entry; the
    other keywords override a header field (or the file's size)."""
    ds = data_size_for(cap) if data_size is None else data_size
    idx = [(0, 0, 0)] * cap
    data = b""
    for i, raw in frames:
        idx[i % cap] = (i, len(data), len(raw))
        data += raw
    for i, (pos, n) in (entries or {}).items():
        idx[i % cap] = (i, pos % U64, n)
    last = max([i for i, _ in frames] + list(entries or {}) + [0]) if last_id is None else last_id
    head = len(data) if data_head is None else data_head
    out = HEAD.pack(magic, version, cap, ds % U64, last % U64, head % U64)
    out += b"".join(ENTRY.pack(i, pos, n, 0) for i, pos, n in idx)
    out += data
    want = HEAD.size + cap * ENTRY.size + ds if size is None else size
    return out[:want] + b"\0" * max(0, want - len(out))


def memfd_with(image):
    fd = os.memfd_create("m0-bus")
    os.write(fd, image)
    return fd


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


def _restarted(fd, env):
    """host_check started as systemd starts it again: an HTTP socket, and `fd` handed back as
    the fd store's m0-bus; the notify datagrams' fds are collected."""
    return Server("host_check", env=env, sockets=(("tcp", "http"),), extra_fds=[("m0-bus", fd)],
                  collect_fds=True)


def _taken_back(s, pattern):
    """Wait for READY=1 and the store's log line, which must match `pattern` whole."""
    s.wait_ready()
    line = s.wait_log(r"event state taken back")
    m = re.fullmatch(pattern, line)
    check(m, f"the log line {line!r}")
    return m


def _fdstore_datagrams(s):
    """The fd store's datagrams received so far, in order (their fds stay with `s`)."""
    s.drain_notify()
    return [d for _, d in s.datagrams if "FDSTORE" in d]


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
        with _restarted(fd, env) as s2:
            m = _taken_back(
                s2,
                r"m0\[host_check\]: event state taken back from the fd store: ids continue "
                r"after (\d+), (\d+) frames kept for replay",
            )
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
        with _restarted(fd, {"M0_HOSTCHECK_PERIOD_MS": 50}) as s:
            s.wait_ready()
            line = s.wait_log(r"is not m0 event state")
            check(
                re.fullmatch(
                    r"m0\[host_check\]: the fd store's 'm0-bus' is not m0 event state \(no "
                    r"'m0bus-1' header\): replaced by a new one, ids start at 1",
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


# Stores that do not fit (SPEC B4; DECISIONS D46), with the reason the log must give. Each has
# the right name and magic, as an entry written by another process of the unit, or by a bug, may.
BAD_STORES = [
    ("data_size 0 with a frame", store_image(8, data_size=0, entries={1: (0, 0)}, size=232),
     "a data ring of 0 bytes, where 8 slots take 65536"),
    ("data_size 0, nothing published", store_image(8, data_size=0, size=232),
     "a data ring of 0 bytes, where 8 slots take 65536"),
    ("a data ring one byte long", store_image(8, data_size=65537),
     "a data ring of 65537 bytes, where 8 slots take 65536"),
    ("sizes that wrap past 2^64", store_image(8, data_size=U64 - 132, size=100),
     f"a data ring of {U64 - 132} bytes, where 8 slots take 65536"),
    ("cap 0", store_image(8, size=65768)[:12] + struct.pack("=I", 0) + store_image(8)[16:],
     "0 slots, outside 1-1048576"),
    ("cap past M0_REPLAY_FRAMES' range", HEAD.pack(MAGIC, 1, 1048577, 1048577 * 512, 0, 0),
     "1048577 slots, outside 1-1048576"),
    ("version 2", store_image(8, version=2), "version 2, where this host writes 1"),
    ("cut short", store_image(8, size=332), "332 bytes, where 8 slots take 65768"),
    ("shorter than its header", store_image(8)[:10], "10 bytes, shorter than its 40-byte header"),
    ("last id 2^64 - 1", store_image(8, last_id=U64 - 1),
     "last id 18446744073709551615, past the largest id (4611686018427387904)"),
    ("more bytes written than its ids can write", store_image(8, last_id=2, data_head=2**40),
     "1099511627776 bytes written, more than 3 events can write"),
]


def test_B4_a_store_that_does_not_fit_is_replaced():
    """Every field of a passed store is checked before use: each bad one above is logged with
    what does not fit, removed from the store (FDSTOREREMOVE=1) and replaced by a new memfd
    (FDSTORE=1), so the next start does not see it again; the process serves (READY=1) and
    ids start at 1."""
    failures = []
    for name, image, why in BAD_STORES:
        fd = memfd_with(image)
        try:
            with _restarted(fd, {"M0_HOSTCHECK_PERIOD_MS": 50, "M0_REPLAY_FRAMES": 8}) as s:
                got = s.wait_ready_or_exit(10)
                check(got == "ready", f"{got!r} instead of READY=1; log:\n{s.log_text()}")
                eq(
                    s.wait_log(r"is not m0 event state"),
                    f"m0[host_check]: the fd store's 'm0-bus' is not m0 event state ({why}): "
                    "replaced by a new one, ids start at 1",
                    "the log line",
                )
                f = _stream(s, [("Last-Event-ID", "0")]).expect(5)
                eq(f.raw, beat(1, s.pid, 1), "the first event")
                eq(_fdstore_datagrams(s), [REMOVE_TEXT, STORE_TEXT], "fd store datagrams, in order")
                new = _stored(s)
                try:
                    check(os.readlink(f"/proc/self/fd/{new}").startswith("/memfd:m0-bus"),
                          "the new entry is no memfd")
                    check(os.fstat(new).st_ino != os.fstat(fd).st_ino, "the bad store came back")
                    eq(os.fstat(new).st_size, HEAD.size + 8 * ENTRY.size + 65536, "its size")
                finally:
                    os.close(new)
                eq(s.stop(), 0, "exit status")
        except AssertionError as e:
            failures.append(f"{name}: {str(e).splitlines()[0]}")
        except Exception as e:
            failures.append(f"{name}: {type(e).__name__}: {str(e).splitlines()[0]}")
        finally:
            os.close(fd)
    if failures:
        raise AssertionError(f"{len(failures)} of {len(BAD_STORES)} stores:\n" + "\n".join(failures))


def test_B4_each_stored_frame_is_checked_before_it_is_restored():
    """A store whose header fits is kept, but a frame is restored only if its entry lies
    within the bytes written, does not overlap the frame before it, and its bytes are one
    well-formed event with its own id: a frame that would inject a second event, a position
    that wraps past 2^64, a CR in a data line and a frame hidden inside another's data are
    each refused and counted."""
    good = {i: f"id: {i}\nevent: beat\ndata: frame {i}\n\n".encode() for i in (1, 4, 7)}
    good[7] = b"id: 7\ndata: id: 8\ndata: x\n\n"  # frame 8 is hidden inside it
    frames = [
        (1, good[1]),
        (2, b"id: 2\ndata: x\n\nid: 99\nevent: evil\ndata: injected\n\n"),
        (4, good[4]),
        (6, b"id: 6\ndata: a\rb\n\n"),
        (7, good[7]),
    ]
    image = store_image(8, frames)
    ends = sum(len(raw) for _, raw in frames)
    pos7 = ends - len(good[7])
    image = store_image(
        8, frames, entries={3: (U64 - 8, 16), 5: (0, NOT_KEPT), 8: (pos7 + 12, len(good[7]) - 12)},
        data_head=ends)
    fd = memfd_with(image)
    try:
        with _restarted(fd, {"M0_HOSTCHECK_STEP_FAILS_AT": 1, "M0_REPLAY_FRAMES": 8,
                             "M0_SSE_HEARTBEAT_MS": 0}) as s:
            s.wait_ready()
            s.wait_log(r"producer step failed")
            rd = _stream(s, [("Last-Event-ID", "0")])
            got = [rd.expect(5) for _ in range(3)] + rd.read_for(0.3)
            eq([f.raw for f in got], [good[1], good[4], good[7]], "the frames replayed")
            eq(
                s.wait_log(r"event state taken back"),
                "m0[host_check]: event state taken back from the fd store: ids continue after 8, "
                "3 frames kept for replay; 4 not restored (the first, id 2, has bytes that are "
                "not one well-formed event)",
                "the log line",
            )
            eq(_fdstore_datagrams(s), [],
               "fd store datagrams (the store fits: it stays)")
            eq(s.stop(), 0, "exit status")
    finally:
        os.close(fd)


def test_B4_resize_counts_the_frames_it_kept():
    """M0_REPLAY_FRAMES shrinks from 8 to 3 across a restart: the log says 3 frames kept, and a
    replay from 0 gives exactly the newest 3 of the old process's frames."""
    fd = None
    try:
        with Server("host_check", env={"M0_HOSTCHECK_PERIOD_MS": 20, "M0_REPLAY_FRAMES": 8},
                    collect_fds=True) as s1:
            s1.wait_ready()
            fd = _stored(s1)
            rd = _stream(s1)
            while rd.expect(5).id_int < 10:
                pass
            old_pid = s1.pid
            eq(s1.stop(), 0, "the first process's exit status")
        with _restarted(fd, {"M0_HOSTCHECK_STEP_FAILS_AT": 1, "M0_REPLAY_FRAMES": 3,
                             "M0_SSE_HEARTBEAT_MS": 0}) as s2:
            m = _taken_back(
                s2,
                r"m0\[host_check\]: event state taken back from the fd store and resized to 3 "
                r"frames: ids continue after (\d+), 3 frames kept",
            )
            n = int(m.group(1))
            check(n >= 10, f"ids continue after {n}")
            s2.wait_log(r"producer step failed")
            rd = _stream(s2, [("Last-Event-ID", "0")])
            got = [rd.expect(5) for _ in range(3)]
            eq([f.raw for f in got], [beat(i, old_pid, i) for i in (n - 2, n - 1, n)],
               "the frames replayed")
            eq(rd.read_for(0.3), [], "anything after them")
            eq(_fdstore_datagrams(s2), [REMOVE_TEXT, STORE_TEXT],
               "the old entry removed, the new one stored")
            os.close(_stored(s2))
            eq(s2.stop(), 0, "exit status")
    finally:
        if fd is not None:
            os.close(fd)
