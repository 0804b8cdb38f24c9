# SPDX-License-Identifier: MIT
"""Event state in systemd's fd store (SPEC B4, N6, Y1): the first start hands a memfd named m0-bus
to the store (FDSTORE=1, FDNAME=m0-bus); a process started with it back (LISTEN_FDNAMES names
it beside the listener) continues the ids and replays every channel kept across a kill -9; a
stored fd that is not m0 event state is replaced and serving goes on; version 1's ids carry
over. The servers have a state directory, so that a fresh sequence starts at 1 (N3)."""

import os
import re
import struct

from m0test import SSEReader, Server, check, eq, open_stream

# ThreadSanitizer runs this module (the fd store beside the loops): run.py, D235.
THREADED = True

STORE_TEXT = "FDSTORE=1\nFDNAME=m0-bus"
REMOVE_TEXT = "FDSTOREREMOVE=1\nFDNAME=m0-bus"

# The memfd's layout (src/bus/fdstore-log.c, DECISIONS D77), in native byte order: a header (magic,
# version, pad, log_size, last_id, head, tail), then a circular log of records, each a head (id,
# the record's length, the channel's length, pad), the channel and the frame's text.
HEAD = struct.Struct("=8sIIQQQQ")
REC = struct.Struct("=QIHH")
MAGIC = b"m0bus-2\0"
U64 = 2**64
BYTES = 65536  # M0_REPLAY_BYTES for these tests: a log of half of it
LOG = BYTES // 2


def record(event_id, channel, text):
    return REC.pack(event_id, REC.size + len(channel) + len(text), len(channel), 0) + channel + text


def store_image(records=(), magic=MAGIC, version=2, log_size=LOG, last_id=None, head=None,
                tail=0, size=None):
    """A store as this host writes it: `records` [(id, channel, text)] one after the other from
    position 0; the keywords override a header field (or the file's size)."""
    log = b"".join(record(i, c, t) for i, c, t in records)
    last = max([i for i, _, _ in records] + [0]) if last_id is None else last_id
    h = len(log) if head is None else head
    out = HEAD.pack(magic, version, 0, log_size % U64, last % U64, h % U64, tail % U64) + log
    want = HEAD.size + LOG if size is None else size
    return out[:want] + b"\0" * max(0, want - len(out))


def memfd_with(image):
    fd = os.memfd_create("m0-bus")
    os.write(fd, image)
    return fd


def beat(n, pid, event_id):
    return f'id: {event_id}\nevent: beat\ndata: {{"beat":{n},"pid":{pid}}}\n\n'.encode()


FRESH = r"ids start at 1 \(\S+ holds no lease yet\)"


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


def _restarted(fd, env, state_dir=True):
    """host_check started as systemd starts it again: an HTTP socket, and `fd` handed back as
    the fd store's m0-bus; the notify datagrams' fds are collected."""
    return Server("host_check", env=env, sockets=(("tcp", "http"),), extra_fds=[("m0-bus", fd)],
                  collect_fds=True, state_dir=state_dir)


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
    eq(rd.expect(5).raw, b"retry: 2000\n\n", "the reconnection delay")
    return rd


def test_B4_first_start_hands_a_memfd_to_the_store_and_ids_start_at_1():
    with Server("host_check", env={"M0_HOSTCHECK_PERIOD_MS": 50}, collect_fds=True,
                state_dir=True) as s:
        s.wait_ready()
        fd = _stored(s)
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            check(target.startswith("/memfd:m0-bus"), f"the stored fd is {target!r}")
            eq(os.fstat(fd).st_size, HEAD.size + 16777216 // 2,
               "the memfd: half of M0_REPLAY_BYTES")
        finally:
            os.close(fd)
        eq(
            s.wait_log(r"ids start at 1"),
            "m0[host_check]: no event state in the fd store (a first start, or systemctl stop "
            f"flushed it); ids start at 1 ({s.state_dir} holds no lease yet)",
            "the log line",
        )
        f = _stream(s, [("Last-Event-ID", "0")]).expect(5)
        eq(f.raw, beat(1, s.pid, 1), "the first event")
        eq(s.stop(), 0, "exit status")


def test_B4_ids_continue_after_kill_9_and_replay_crosses_it():
    env = {"M0_HOSTCHECK_PERIOD_MS": 50}
    fd = None
    try:
        with Server("host_check", env=env, collect_fds=True, state_dir=True) as s1:
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
                r"after (\d+), (\d+) frames of 1 channel kept for replay",
            )
            n, kept = int(m.group(1)), int(m.group(2))
            check(n >= last, f"ids continue after {n}, but {last} was seen before the crash")
            eq(kept, n, "frames kept (all of them, fewer than a channel keeps)")
            check(not any("ids start" in ln for ln in s2.log_lines()), s2.log_text())
            # A client that saw `last` - 5 reconnects: everything after it, once, in order —
            # the old process's frames from the replay store, then the new one's.
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
                    r"'m0bus-2' header\): replaced by a new one; " + FRESH,
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


# Stores that do not fit (SPEC B4; DECISIONS D46, D77), with the reason the log must give. Each
# has the right name and magic, as an entry written by another process of the unit, or by a bug,
# may.
BAD_STORES = [
    ("a log of 0 bytes", store_image(log_size=0, size=HEAD.size),
     "a log of 0 bytes, outside 32768-536870912"),
    ("a log one byte short of the least", store_image(log_size=LOG - 1, size=HEAD.size + LOG - 1),
     "a log of 32767 bytes, outside 32768-536870912"),
    ("a size that wraps past 2^64", store_image(log_size=U64 - 40, size=100),
     "a log of 18446744073709551576 bytes, outside 32768-536870912"),
    ("version 3", store_image(version=3), "version 3, where this host writes 2"),
    ("cut short", store_image(size=332), "332 bytes, where a log of 32768 takes 32816"),
    ("shorter than its header", store_image()[:10], "10 bytes, shorter than its 48-byte header"),
    ("last id 2^64 - 1", store_image(last_id=U64 - 1),
     "last id 18446744073709551615 or head 0, past 4611686018427387904"),
    ("a tail past its head", store_image(head=10, tail=11),
     "records from 11 to 10, more than its log holds"),
    ("more records than its log holds", store_image(head=LOG + 1),
     "records from 0 to 32769, more than its log holds"),
    ("version 1 of another shape",
     struct.pack("=8sIIQQQ", b"m0bus-1\0", 1, 8, 0, 5, 0) + b"\0" * 192,
     "a version 1 header of another shape (8 slots, 232 bytes)"),
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
            with _restarted(fd, {"M0_HOSTCHECK_PERIOD_MS": 50, "M0_REPLAY_BYTES": BYTES}) as s:
                got = s.wait_ready_or_exit(10)
                check(got == "ready", f"{got!r} instead of READY=1; log:\n{s.log_text()}")
                eq(
                    s.wait_log(r"is not m0 event state"),
                    f"m0[host_check]: the fd store's 'm0-bus' is not m0 event state ({why}): "
                    f"replaced by a new one; ids start at 1 ({s.state_dir} holds no lease yet)",
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
                    eq(os.fstat(new).st_size, HEAD.size + LOG, "its size")
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


def test_N6_each_stored_record_is_checked_before_it_is_restored():
    """A store whose header fits is taken back, but a record is restored only if it is one well-formed
    event of its own id on a channel this host could have published to: a record that would
    inject a second event, a CR in a data line, a channel named like a prefix and an id past the
    store's last are each refused and counted; the good ones come back on their channels."""
    good = [(1, b"beat", b"id: 1\nevent: beat\ndata: frame 1\n\n"),
            (4, b"room:1", b"id: 4\nevent: beat\ndata: frame 4\n\n"),
            (7, b"beat", b"id: 7\ndata: id: 8\ndata: x\n\n")]  # "id: 8" is data here
    bad = [(2, b"beat", b"id: 2\ndata: x\n\nid: 99\nevent: evil\ndata: injected\n\n"),
           (5, b"beat", b"id: 5\ndata: a\rb\n\n"),
           (6, b"room:*", b"id: 6\ndata: a\n\n"),
           (9, b"beat", b"id: 9\ndata: past the last\n\n")]
    records = [good[0], bad[0], good[1], bad[1], bad[2], good[2], bad[3]]
    fd = memfd_with(store_image(records, last_id=8))
    try:
        with _restarted(fd, {"M0_HOSTCHECK_STEP_FAILS_AT": 1, "M0_REPLAY_BYTES": BYTES,
                             "M0_SSE_HEARTBEAT_MS": 0}) as s:
            s.wait_ready()
            s.wait_log(r"producer step failed")
            beats = _stream(s, [("Last-Event-ID", "0")])
            got = [beats.expect(5) for _ in range(2)] + beats.read_for(0.3)
            eq([f.raw for f in got], [good[0][2], good[2][2]], "the beat channel replayed")
            c = s.connect()
            open_stream(c, "/follow?channels=room:*", [("Last-Event-ID", "0")])
            rooms = SSEReader(c)
            eq([b.raw for b in rooms.read_for(0.3) if b.is_event], [good[1][2]],
               "the room channel replayed")
            eq(
                s.wait_log(r"event state taken back"),
                "m0[host_check]: event state taken back from the fd store into a new log: ids "
                "continue after 8, 3 frames of 2 channels kept for replay; 4 not restored (the "
                "first, id 2, has bytes that are not one well-formed event)",
                "the log line",
            )
            # Written anew with the good records alone, so that the bad ones are not refused
            # again at every start.
            eq(_fdstore_datagrams(s), [REMOVE_TEXT, STORE_TEXT], "fd store datagrams")
            os.close(_stored(s))
            eq(s.stop(), 0, "exit status")
    finally:
        os.close(fd)


def test_N6_a_new_bound_carries_the_channels_into_a_new_log():
    """M0_REPLAY_BYTES changes across a restart: the frames of every channel move into a memfd
    of the new size, which replaces the old one in the store."""
    fd = None
    try:
        env = {"M0_HOSTCHECK_PERIOD_MS": 20, "M0_HOSTCHECK_PUBLISH": 1}
        with Server("host_check", env=env, collect_fds=True, state_dir=True) as s1:
            s1.wait_ready()
            fd = _stored(s1)
            r = s1.connect().exchange("POST", "/publish?channel=room:&n=3&distinct=1&event=e")
            eq(r.status, 200, f"POST /publish: {r.body!r}")
            rd = _stream(s1)
            while rd.expect(5).id_int < 10:
                pass
            old_pid = s1.pid
            eq(s1.stop(), 0, "the first process's exit status")
        with _restarted(fd, {"M0_HOSTCHECK_STEP_FAILS_AT": 1, "M0_REPLAY_BYTES": 2 * BYTES,
                             "M0_SSE_HEARTBEAT_MS": 0}) as s2:
            m = _taken_back(
                s2,
                r"m0\[host_check\]: event state taken back from the fd store into a log of a "
                r"new size \(M0_REPLAY_BYTES changed\): ids continue after (\d+), (\d+) frames "
                r"of 4 channels kept for replay",
            )
            n, kept = int(m.group(1)), int(m.group(2))
            check(n >= 10, f"ids continue after {n}")
            eq(kept, n, "every frame kept")
            s2.wait_log(r"producer step failed")
            c = s2.connect()
            open_stream(c, "/follow?channels=room:*,beat", [("Last-Event-ID", "0")])
            got = [b for b in SSEReader(c).read_for(0.5) if b.is_event]
            eq([b.id_int for b in got], list(range(1, n + 1)), "ids replayed, every channel")
            for b in got:
                if b.event == "beat":
                    eq(b.raw, beat(int(b.data[0].split(",")[0][8:]), old_pid, b.id_int), "a beat")
            eq(_fdstore_datagrams(s2), [REMOVE_TEXT, STORE_TEXT],
               "the old entry removed, the new one stored")
            new = _stored(s2)
            eq(os.fstat(new).st_size, HEAD.size + BYTES, "the new memfd's size")
            os.close(new)
            eq(s2.stop(), 0, "exit status")
    finally:
        if fd is not None:
            os.close(fd)


def test_N3_version_1_of_the_store_gives_its_ids():
    """A store of version 1 (before channels): its ids go on, its frames (no channel) are not
    kept, and a new store of version 2 replaces it."""
    v1 = struct.pack("=8sIIQQQ", b"m0bus-1\0", 1, 8, 65536, 4711, 300)
    fd = memfd_with(v1 + b"\0" * (8 * 24 + 65536))
    try:
        env = {"M0_HOSTCHECK_PERIOD_MS": 50}
        with _restarted(fd, env) as s:
            s.wait_ready()
            eq(s.wait_log(r"version 1"),
               "m0[host_check]: event state of version 1 taken back from the fd store: ids "
               "continue after 4711; its frames name no channel and are not kept",
               "the log line")
            eq(_stream(s, [("Last-Event-ID", "4711")]).expect(5).raw, beat(1, s.pid, 4712),
               "the first event")
            eq(_fdstore_datagrams(s), [REMOVE_TEXT, STORE_TEXT], "version 1 replaced")
            new = _stored(s)
            eq(os.pread(new, 8, 0), MAGIC, "the new store's magic")
            os.close(new)
            eq(s.stop(), 0, "exit status")
    finally:
        os.close(fd)
