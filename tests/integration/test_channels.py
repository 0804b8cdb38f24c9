# SPDX-License-Identifier: MIT
"""Channels on the bus (SPEC N1-N5, A5): each stream gets exactly the events of the channels its
handler subscribed it to, exact names and prefixes, in id order, none twice; the refusals of
m0_res_subscribe() and m0_publish(); transient events; replay per channel, a quiet channel's
history through 100,000 events of a busy one, a million channels within the byte bound; 10,000
streams over 1,000 channels; ids that never go backwards across a restart with a state
directory, a kill -9 and none at all (N3); the counter's contract. host_check publishes through
POST /publish (M0_HOSTCHECK_PUBLISH=1) and streams through /follow?channels=..."""

import contextlib
import json
import os
import re
import selectors
import shutil
import signal
import socket
import tempfile
import time

from m0test import OPEN_BLOCKS, SSEReader, Server, check, eq, nofile, open_stream

# ThreadSanitizer runs this module (channels delivered across loops): run.py, D235.
THREADED = True

HEAVY = os.environ.get("M0_HEAVY") == "1"
# No beats (the producer's first step fails and it stops), no heartbeats, POST /publish on.
QUIET = {"M0_HOSTCHECK_STEP_FAILS_AT": 1, "M0_SSE_HEARTBEAT_MS": 0, "M0_HOSTCHECK_PUBLISH": 1}


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def sanitized(pid):
    """Whether the process runs under ASan or TSan, whose allocators hold freed memory."""
    with open(f"/proc/{pid}/maps") as f:
        return any(lib in line for line in f for lib in ("libasan", "libtsan"))


def publish(s, channel, n=1, distinct=False, transient=False, event="e", conn=None):
    """POST /publish: (first id, last id)."""
    q = f"/publish?channel={channel}&n={n}&event={event}"
    q += "&distinct=1" if distinct else ""
    q += "&transient=1" if transient else ""
    r = (conn or s.connect(timeout=120)).exchange("POST", q, timeout=120)
    eq(r.status, 200, f"POST {q}: {r.body!r}")
    got = r.json()
    return got["first"], got["last"]


def follow(s, channels, last_event_id=None):
    """A stream of /follow?channels=...; its first bytes read."""
    c = s.connect()
    headers = [("Last-Event-ID", str(last_event_id))] if last_event_id is not None else None
    r = open_stream(c, f"/follow?channels={channels}", headers)
    eq(r.status, 200, f"status of /follow?channels={channels}")
    eq(c.read_exact(len(OPEN_BLOCKS), timeout=5), OPEN_BLOCKS, "first bytes")
    return SSEReader(c)


def event(i, channel_index, name="e"):
    """What host_check's /publish sends for its i-th event, of id i."""
    return f'id: {i}\nevent: {name}\ndata: {{"i":{channel_index}}}\n\n'.encode()


def events_of(rd, seconds=0.3):
    return [b for b in rd.read_for(seconds) if b.is_event]


def test_N1_each_stream_gets_exactly_its_channels_in_order():
    """Streams on two loops, of exact names, prefixes, every channel and a mix with a repeat:
    each gets exactly the events of its channels, in id order, each once."""
    with Server("host_check", env={**QUIET, "M0_THREADS": 2}, state_dir=True) as s:
        s.wait_ready()
        pats = {"a": "a", "b": "b", "room": "room:*", "all": "*", "mix": "a,room:*,room:1,a",
                "none": ""}
        streams = {k: follow(s, v) for k, v in pats.items()}
        chans = ["a", "b", "room:1", "room:2", "roomy", "a", "room:1", "c"]
        for ch in chans:
            publish(s, ch)
        want = {
            "a": [1, 6], "b": [2], "room": [3, 4, 7], "all": list(range(1, 9)),
            "mix": [1, 3, 4, 6, 7], "none": [],
        }
        for k, rd in streams.items():
            got = events_of(rd)
            eq([b.id_int for b in got], want[k], f"ids on the stream of {pats[k]!r}")
            for b in got:
                eq(b.raw, event(b.id_int, 0), f"event {b.id_int} on {pats[k]!r}")
        eq(s.stop(), 0, "exit status")


def test_N1_refusals_of_subscribe_and_publish():
    """A channel that is no name, or one too many for a stream, is the handler's -EINVAL or
    -ENOSPC (host_check answers 400 naming it); so is a publish to a prefix or to no name."""
    with Server("host_check", env={**QUIET, "M0_STREAM_MAX_CHANNELS": 3}) as s:
        s.wait_ready()
        cases = [
            ("a%20b", "m0_res_subscribe('a b'): Invalid argument"),
            ("x" * 201, f"m0_res_subscribe('{'x' * 200}'): Invalid argument"),
            ("a,b,c,d", "m0_res_subscribe('d'): No space left on device"),
        ]
        for chans, text in cases:
            r = s.connect().get(f"/follow?channels={chans}")
            eq((r.status, r.body.decode()), (400, text + "\n"), f"/follow?channels={chans[:20]}")
        r = open_stream(s.connect(), "/follow?channels=a,b,c,a")
        eq(r.status, 200, "three channels, one of them twice")
        for ch, text in [("room:*", "m0_publish('room:*'): Invalid argument"),
                         ("a%09b", "m0_publish('a\tb'): Invalid argument")]:
            r = s.connect().exchange("POST", f"/publish?channel={ch}")
            eq((r.status, r.body.decode()), (400, text + "\n"), f"publish to {ch!r}")
        eq(s.stop(), 0, "exit status")


def test_N4_transient_events_are_delivered_and_never_kept():
    with Server("host_check", env=QUIET, state_dir=True) as s:
        s.wait_ready()
        rd = follow(s, "t")
        eq(publish(s, "t", transient=True), (0, 0), "a transient event's id")
        eq(publish(s, "t"), (1, 1), "the next kept event's id")
        got = events_of(rd)
        eq([b.raw for b in got], [b'event: e\ndata: {"i":0}\n\n', event(1, 0)],
           "the transient event, then the kept one")
        eq([b.raw for b in events_of(follow(s, "t", 0))], [event(1, 0)],
           "a replay from 0: the kept event alone")
        eq(s.stop(), 0, "exit status")


def test_N4_a_quiet_channel_keeps_its_history_while_a_busy_one_publishes_100000():
    with Server("host_check", env=QUIET, state_dir=True) as s:
        s.wait_ready()
        for _ in range(3):
            publish(s, "quiet")
        first, last = publish(s, "busy", n=100000)
        eq((first, last), (4, 100003), "the busy channel's ids")
        eq([b.raw for b in events_of(follow(s, "quiet", 0))],
           [event(i, 0) for i in (1, 2, 3)], "the quiet channel's history")
        busy = events_of(follow(s, "busy", 0), 0.5)
        # what it gave up is said first (AP2)
        eq(busy[0].raw, b'event: m0-gap\ndata: {"channel":"busy","oldest":%d}\n\n' % (last - 63),
           "the busy channel's gap")
        busy = busy[1:]
        eq([b.id_int for b in busy], list(range(last - 63, last + 1)),
           "the busy channel: its last 64 (M0_REPLAY_PER_CHANNEL)")
        eq(busy[-1].raw, event(last, 99999), "its newest")
        eq(s.stop(), 0, "exit status")


def test_N4_a_million_channels_stay_within_the_byte_bound():
    """A million distinct channels published to: RSS grows by at most M0_REPLAY_BYTES (16 MiB)
    plus a fixed overhead, the channels idle longest are evicted and counted, and the newest
    channels still replay."""
    n = 1000000
    with Server("host_check", env=QUIET, state_dir=True) as s:
        s.wait_ready()
        publish(s, "warm-up")
        base = rss_kib(s.pid)
        first, last = publish(s, "m", n=n, distinct=True)
        grown = rss_kib(s.pid) - base
        print(f"  RSS grew {grown} KiB over {n} channels")
        if sanitized(s.pid):
            print("  (a sanitizer's allocator keeps freed memory in quarantine: RSS not compared)")
        else:
            check(grown <= 16 * 1024 + 8 * 1024,
                  f"RSS grew {grown} KiB, past 16 MiB of replay plus 8 MiB of overhead")
        eq([b.raw for b in events_of(follow(s, f"m{n - 1}", 0))], [event(last, n - 1)],
           "the newest channel's event")
        eq(events_of(follow(s, "m0", 0)), [], "the oldest channel: evicted")
        eq(s.stop(), 0, "exit status")
        line = s.wait_log(r"bus stopped")
        m = re.search(r"replay kept (\d+) frames of (\d+) channels in (\d+) bytes, channels "
                      r"evicted (\d+)", line)
        check(m, line)
        kept, chans, used, evicted = map(int, m.groups())
        eq(kept, chans, "one frame a channel")
        eq(evicted + chans, n + 1, "channels evicted and kept: every one published to")
        check(used <= 16 * 1024 * 1024, f"{used} bytes kept, past M0_REPLAY_BYTES")
        check(chans > 10000, f"only {chans} channels kept in 16 MiB")


test_N4_a_million_channels_stay_within_the_byte_bound.once = True  # a million channels: the plain variant only (run.py, D235)


# run.py runs it alone: a million channels: CPU and memory.
test_N4_a_million_channels_stay_within_the_byte_bound.serial = True


def _many_streams(addr, paths, timeout=60):
    """Open one stream per path; returns [socket], each with its head and first bytes read."""
    socks = []
    for p in paths:
        sk = socket.create_connection(addr, timeout=10)
        sk.sendall(f"GET {p} HTTP/1.1\r\nHost: test\r\n\r\n".encode())
        socks.append(sk)
    head_end = {}
    bufs = {sk: b"" for sk in socks}
    sel = selectors.DefaultSelector()
    for sk in socks:
        sk.setblocking(False)
        sel.register(sk, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while len(head_end) < len(socks) and time.monotonic() < deadline:
        for key, _ in sel.select(1):
            sk = key.fileobj
            bufs[sk] += sk.recv(65536)
            i = bufs[sk].find(b"\r\n\r\n")
            if i >= 0 and bufs[sk][i + 4:].startswith(OPEN_BLOCKS):
                head_end[sk] = i + 4 + len(OPEN_BLOCKS)
                sel.unregister(sk)
    sel.close()
    eq(len(head_end), len(socks), "streams whose first bytes arrived")
    for sk in socks:
        check(bufs[sk].startswith(b"HTTP/1.1 200 OK\r\n"), f"a stream's head {bufs[sk][:60]!r}")
        check(len(bufs[sk]) == head_end[sk], f"bytes before any publish: {bufs[sk]!r}")
    return socks


def _read_all(socks, want_len, timeout=60):
    """Read each socket until it has want_len[i] bytes (or the timeout); returns the bytes."""
    got = {sk: b"" for sk in socks}
    sel = selectors.DefaultSelector()
    for sk in socks:
        sel.register(sk, selectors.EVENT_READ)
    left = len(socks)
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        for key, _ in sel.select(1):
            sk = key.fileobj
            data = sk.recv(65536)
            got[sk] += data
            if not data or len(got[sk]) >= want_len[sk]:
                sel.unregister(sk)
                left -= 1
    # Anything more would be an event a stream should not have had.
    time.sleep(0.3)
    for sk in socks:
        try:
            got[sk] += sk.recv(65536)
        except BlockingIOError:
            pass
    sel.close()
    return got


@nofile(10100, "10,000 streams and their client")
def test_N5_10000_streams_over_1000_channels_each_gets_exactly_its_own():
    """10,000 streams on two loops, stream i following channels c(i % 1000) and c((7i + 3) %
    1000): after one event on each of the 1,000 channels, every stream has exactly its two, in
    id order."""
    nstreams, nchan = 10000, 1000
    env = {**QUIET, "M0_THREADS": 2, "M0_MAX_CONNECTIONS": 12000}
    with Server("host_check", env=env, state_dir=True) as s:
        s.wait_ready()
        pairs = [(i % nchan, (7 * i + 3) % nchan) for i in range(nstreams)]
        socks = _many_streams(s.tcp_addr, [f"/follow?channels=c{a},c{b}" for a, b in pairs])
        try:
            first, last = publish(s, "c", n=nchan, distinct=True)
            eq((first, last), (1, nchan), "ids of the 1,000 events")
            want = {}
            for sk, (a, b) in zip(socks, pairs):
                ids = sorted({first + a, first + b})
                want[sk] = b"".join(event(i, i - first) for i in ids)
            got = _read_all(socks, {sk: len(w) for sk, w in want.items()})
            wrong = [i for i, sk in enumerate(socks) if got[sk] != want[sk]]
            eq(wrong[:5], [], f"streams with other bytes than their channels' ({len(wrong)} in all)")
        finally:
            for sk in socks:
                sk.close()
        eq(s.stop(), 0, "exit status")


# ---- N3: ids never go backwards ----


# run.py runs it alone: 20,000 descriptors.
test_N5_10000_streams_over_1000_channels_each_gets_exactly_its_own.serial = True


def _kept_events(s, channel, last_event_id):
    return [b.id_int for b in events_of(follow(s, channel, last_event_id))]


@contextlib.contextmanager
def state_dir():
    """A state directory that outlives the servers started with it (theirs go at their end)."""
    d = tempfile.mkdtemp(prefix="m0test-state-")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_N3_a_state_directory_carries_the_ids_across_stop_and_start():
    with state_dir() as state:
        with Server("host_check", env=QUIET, state_dir=state) as s1:
            s1.wait_ready()
            _, last = publish(s1, "a", n=5)
            eq(last, 5, "the first process's last id")
            eq(s1.stop(), 0, "exit status")
        with open(os.path.join(state, "m0-bus-ids")) as f:
            eq(f.read(), "5\n", "the lease at a clean stop: the last id itself")
        with Server("host_check", env=QUIET, state_dir=state) as s2:
            s2.wait_ready()
            line = s2.wait_log(r"ids continue after")
            check(line.endswith(f"ids continue after 5, the lease kept in {state}"), line)
            eq(publish(s2, "a"), (6, 6), "the next id after a stop and a start")
            eq(s2.stop(), 0, "exit status")


def test_N3_after_a_kill_9_the_ids_start_past_every_id_handed_out():
    """200,000 ids in one burst, past the first lease's headroom (65,536, D76), then kill -9:
    with no fd store, the next process starts past every id handed out (the lease on disk is
    never behind them)."""
    with state_dir() as state:
        with Server("host_check", env=QUIET, state_dir=state) as s1:
            s1.wait_ready()
            _, last = publish(s1, "a", n=200000)
            eq(last, 200000, "ids handed out")
            s1.send_signal(signal.SIGKILL)
            s1.wait_exit()
        with open(os.path.join(state, "m0-bus-ids")) as f:
            lease = int(f.read())
        check(lease >= last, f"the lease on disk {lease} is below the last id handed out {last}")
        with Server("host_check", env=QUIET, state_dir=state) as s2:
            s2.wait_ready()
            line = s2.wait_log(r"ids continue after")
            check(line.endswith(f"ids continue after {lease}, the lease kept in {state}"), line)
            first, _ = publish(s2, "a")
            eq(first, lease + 1, "the first id after the crash")
            # The lease runs ahead by twice the ids of the last second, at most 2^40 (D76).
            check(lease - last <= 2**40, f"the lease {lease} runs {lease - last} ids ahead")
            eq(s2.stop(), 0, "exit status")


def test_N3_without_a_state_directory_ids_start_above_the_wall_clock():
    """Outside systemd with no state directory: a new process's ids start above the wall clock's
    microseconds, so a client that saw the old process's ids reconnects with a Last-Event-ID
    below every new one and gets everything kept (nothing skipped, nothing twice)."""
    env = {**QUIET}
    t0 = int(time.time() * 1e6)
    with Server("host_check", env=env) as s1:
        s1.wait_ready()
        line = s1.wait_log(r"ids start above the wall clock")
        start1 = int(re.search(r"after (\d+) \(no state directory\)", line).group(1))
        check(start1 >= t0, f"ids start after {start1}, below the wall clock at the start {t0}")
        _, seen = publish(s1, "a", n=3)
        eq(seen, start1 + 3, "the first process's ids")
        eq(s1.stop(), 0, "exit status")
    with Server("host_check", env=env) as s2:
        s2.wait_ready()
        line = s2.wait_log(r"ids start above the wall clock")
        start2 = int(re.search(r"after (\d+) \(no state directory\)", line).group(1))
        check(start2 > seen, f"the second process starts at {start2}, not past {seen}")
        first, last = publish(s2, "a", n=3)
        eq(first, start2 + 1, "the second process's first id")
        eq(_kept_events(s2, "a", seen), [first, first + 1, first + 2],
           "Last-Event-ID of the old process: every event of the new one")
        eq(s2.stop(), 0, "exit status")


def test_N3_a_last_event_id_past_the_newest_gets_everything_and_is_counted():
    with Server("host_check", env=QUIET, state_dir=True) as s:
        s.wait_ready()
        publish(s, "a", n=2)
        eq(_kept_events(s, "a", 1000), [1, 2], "Last-Event-ID: 1000 with the newest id 2")
        line = s.wait_log(r"past the newest id")
        eq(line, "m0[host_check] loop 0: a stream's Last-Event-ID 1000 is past the newest id 2: "
           "everything kept of its channels is replayed (1 such stream on loop 0 so far)",
           "the log line")
        eq(s.stop(), 0, "exit status")
        check(re.search(r"Last-Event-IDs past the newest id 1\b", s.wait_log(r"loop stopped")),
              "the loop's exit line counts it")


# ---- the counter (SPEC A5, as revised for channels) ----


def test_A5_counter_names_channels_and_values():
    with Server("counter", env={"M0_SSE_HEARTBEAT_MS": 0, "M0_COUNTER_MAX": 3},
                state_dir=True) as s:
        s.wait_ready()
        c = s.connect()
        r = open_stream(c, "/events?counter=a")
        eq(r.status, 200, "GET /events?counter=a")
        eq(c.read_exact(len(OPEN_BLOCKS), timeout=5), OPEN_BLOCKS, "first bytes")
        only_a = SSEReader(c)
        c = s.connect()
        eq(open_stream(c, "/events").status, 200, "GET /events")
        eq(c.read_exact(len(OPEN_BLOCKS), timeout=5), OPEN_BLOCKS, "first bytes")
        every = SSEReader(c)
        steps = [("increment", "a", 1), ("increment", "b", 1), ("decrement", "a", 0),
                 ("increment", None, 1)]
        for k, (verb, name, value) in enumerate(steps, 1):
            q = f"/{verb}" + (f"?counter={name}" if name else "")
            r = s.connect().exchange("POST", q)
            eq((r.status, r.body, r.header("x-event-id")), (204, b"", str(k)), f"POST {q}")
        def v(i, name, value):
            return (f'id: {i}\nevent: value\ndata: {{"counter":"{name}","value":{value}}}\n\n'
                    .encode())
        eq([b.raw for b in events_of(only_a)], [v(1, "a", 1), v(3, "a", 0)], "counter:a")
        eq([b.raw for b in events_of(every)],
           [v(1, "a", 1), v(2, "b", 1), v(3, "a", 0), v(4, "default", 1)], "counter:*")
        r = s.connect().get("/")
        eq((r.status, r.header("content-type"), r.body),
           (200, "application/json", b'{"a":0,"b":1,"default":1}\n'), "GET /")
        for bad in ["A", "a.b", "", "x" * 65, "a%20b"]:
            r = s.connect().exchange("POST", f"/increment?counter={bad}")
            eq((r.status, r.body), (400, b"counter: a name is 1 to 64 of a-z, 0-9, _ and -\n"),
               f"POST /increment?counter={bad}")
            eq(s.connect().get(f"/events?counter={bad}").status, 400, f"/events?counter={bad}")
        r = s.connect().exchange("POST", "/increment?counter=" + "x" * 64)
        eq(r.status, 507, "a fourth counter past M0_COUNTER_MAX=3")
        eq(r.body, b"counter: 3 counters exist (M0_COUNTER_MAX); '" + b"x" * 64 +
           b"' would be one more\n", "its text")
        eq(json.loads(s.connect().get("/").body), {"a": 0, "b": 1, "default": 1},
           "values after the refusals")
        eq(s.stop(), 0, "exit status")


# ---- a replay that cannot be whole says so (SPEC AP2) ----


def counter_value(i, name, value):
    return f'id: {i}\nevent: value\ndata: {{"counter":"{name}","value":{value}}}\n\n'.encode()


def test_AP2_gap_event_before_the_kept_events():
    """counter with M0_REPLAY_PER_CHANNEL=4, 10 increments of `gap`: a stream whose Last-Event-ID
    is the first increment's gets `m0-gap` naming counter:gap and the oldest id kept, first and
    with no id, then the 4 kept events in order, then live ones; a stream whose id is the last
    one given up or later gets no gap, and neither does one of a channel that lost none."""
    with Server("counter", env={"M0_SSE_HEARTBEAT_MS": 0, "M0_REPLAY_PER_CHANNEL": 4},
                state_dir=True) as s:
        s.wait_ready()
        ids = []
        for _ in range(10):
            r = s.connect().exchange("POST", "/increment?counter=gap")
            eq(r.status, 204, "POST /increment?counter=gap")
            ids.append(int(r.header("x-event-id")))
        r = s.connect().exchange("POST", "/increment?counter=whole")
        whole_id = int(r.header("x-event-id"))
        eq(ids, list(range(1, 11)), "the increments' ids")
        gap = b'event: m0-gap\ndata: {"channel":"counter:gap","oldest":7}\n\n'
        kept = [counter_value(i, "gap", i) for i in range(7, 11)]

        def stream(query, last_event_id):
            c = s.connect()
            r = open_stream(c, f"/events{query}", [("Last-Event-ID", str(last_event_id))])
            eq(r.status, 200, f"GET /events{query}")
            eq(c.read_exact(len(OPEN_BLOCKS), timeout=5), OPEN_BLOCKS, "first bytes")
            return SSEReader(c)

        rd = stream("?counter=gap", ids[0])
        eq([b.raw for b in events_of(rd)], [gap] + kept, "after the first increment's id")
        s.connect().exchange("POST", "/increment?counter=gap")
        eq([b.raw for b in events_of(rd)], [counter_value(12, "gap", 11)], "then the live one")
        # every counter's channel (counter:*): the gap of counter:gap alone, before any replay
        rd = stream("", 0)
        eq([b.raw for b in events_of(rd)],
           [b'event: m0-gap\ndata: {"channel":"counter:gap","oldest":8}\n\n']
           + [counter_value(i, "gap", i) for i in (8, 9, 10)]
           + [counter_value(whole_id, "whole", 1), counter_value(12, "gap", 11)],
           "counter:* from 0")
        # nothing lost after the id (7 was the last given up): no gap
        eq([b.raw for b in events_of(stream("?counter=gap", 7))],
           [counter_value(i, "gap", i) for i in (8, 9, 10)] + [counter_value(12, "gap", 11)],
           "after id 7, where the oldest kept is 8")
        eq([b.raw for b in events_of(stream("?counter=whole", 0))],
           [counter_value(whole_id, "whole", 1)], "a channel that lost nothing")
        # an id past the newest replays everything kept, with no gap (N3)
        eq([b.raw for b in events_of(stream("?counter=gap", 1000))],
           [counter_value(i, "gap", i) for i in (8, 9, 10)] + [counter_value(12, "gap", 11)],
           "an id past the newest")
        eq(s.stop(), 0, "exit status")


def test_AP2_the_app_backfills_a_replay_with_a_hole():
    """An app's backfill (host_check's, M0_HOSTCHECK_BACKFILL=1) runs for a channel that lost
    events after the stream's Last-Event-ID, on the loop's pool when it has one, on the loop
    otherwise; what it writes comes after the gap event and before the kept events, the live
    ones after them, none twice; a channel that lost nothing is not backfilled; a backfill that
    fails closes the stream, logged (AP2)."""
    env = {**QUIET, "M0_HOSTCHECK_BACKFILL": 1, "M0_REPLAY_PER_CHANNEL": 4}
    for args, thread in (([], -1), (["--blocking-threads", "1"], 0)):
        with Server("host_check", env=env, args=args, state_dir=True) as s:
            s.wait_ready()
            eq(publish(s, "a", n=10), (1, 10), "ten events on a")
            eq(publish(s, "b"), (11, 11), "one on b")
            rd = follow(s, "a,b", 1)
            want = [b'event: m0-gap\ndata: {"channel":"a","oldest":7}\n\n',
                    b'event: backfill\ndata: {"channel":"a","last_id":1,"oldest":7,"thread":%d}'
                    b'\n\n' % thread] + [event(i, i - 1) for i in range(7, 11)] + [event(11, 0)]
            eq([b.raw for b in events_of(rd)], want, f"the stream, backfilled ({args})")
            publish(s, "a")
            eq([b.raw for b in events_of(rd)], [event(12, 0)], f"then live ({args})")
            # nothing lost after the id: no backfill
            eq([b.raw for b in events_of(follow(s, "a", 8))],
               [event(i, i - 1) for i in (9, 10)] + [event(12, 0)], f"after id 8 ({args})")
            # what is published while the backfill runs waits for it, and comes once
            eq(publish(s, "slow", n=5), (13, 17), "five events on slow")
            rd = follow(s, "slow", 0)
            eq(publish(s, "slow"), (18, 18), "one more on slow, while it backfills")
            eq([b.raw for b in events_of(rd, 1.0)],
               [b'event: m0-gap\ndata: {"channel":"slow","oldest":14}\n\n',
                b'event: backfill\ndata: {"channel":"slow","last_id":0,"oldest":14,"thread":%d}'
                b'\n\n' % thread] + [event(i, i - 13) for i in range(14, 18)] + [event(18, 0)],
               f"a slow backfill, then what came meanwhile ({args})")
            eq(publish(s, "fail", n=5), (19, 23), "five events on fail")
            rd = follow(s, "fail", 0)
            blocks, rest = rd.read_to_eof(10)
            eq(([b.raw for b in blocks if b.is_event], rest),
               ([b'event: m0-gap\ndata: {"channel":"fail","oldest":20}\n\n'], b""),
               f"a failed backfill: the gap, then the end ({args})")
            s.wait_log(r"loop 0: a stream's backfill by the app after id 0 failed \(Input/output "
                       r"error: channel fail\): the stream is closed, for its client to "
                       r"reconnect$")
            eq(s.stop(), 0, "exit status")
