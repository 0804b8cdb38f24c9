"""The producer (SPEC S2): a step that fails stops the producer, with one log line, while
serving goes on; streams opened during the drain get their farewell at once (X1)."""

import re

import m0test
from m0test import SSEReader, Server, check, eq, open_stream

# ThreadSanitizer runs this module (the producer): run.py, D235.
THREADED = True


def test_S2_failing_step_stops_the_producer_serving_goes_on():
    env = {"M0_HOSTCHECK_PERIOD_MS": "20", "M0_HOSTCHECK_STEP_FAILS_AT": "4"}
    with Server("host_check", env=env, state_dir=True) as s:
        s.wait_ready()
        c = s.connect()
        r = open_stream(c, "/events", [("Last-Event-ID", "0")])
        eq(r.status, 200, "stream status")
        rd = SSEReader(c)
        line = s.wait_log(r"producer step failed")
        eq(
            line,
            "m0[host_check]: producer step failed: Input/output error; the producer stops, "
            "serving goes on",
            "the log line",
        )
        blocks = [b for b in rd.read_for(0.5) if b.event == "beat"]
        eq([b.id for b in blocks], ["1", "2", "3"], "beats before the failing step, none after")
        h = s.connect()
        eq(h.get("/health").status, 200, "serving goes on")
        eq(s.stop(), 0, "exit status")


def test_N3_last_event_id_from_before_a_reset_replays_what_is_kept():
    """A Last-Event-ID past the newest id comes from before the ids started over (a state
    directory wiped, or another host's): the client gets every kept frame rather than nothing,
    and the log counts it."""
    with Server("host_check", env={"M0_HOSTCHECK_PERIOD_MS": "30"}, state_dir=True) as s:
        s.wait_ready()
        c = s.connect()
        open_stream(c, "/events", [("Last-Event-ID", "999999")])
        blocks = [b for b in SSEReader(c).read_for(0.4) if b.event == "beat"]
        check(len(blocks) >= 3, f"frames {len(blocks)}")
        eq(blocks[0].id, "1", "the first kept frame comes first")
        eq([int(b.id) for b in blocks], list(range(1, len(blocks) + 1)), "contiguous")
        line = s.wait_log(r"Last-Event-ID 999999 is past")
        check(re.fullmatch(r"m0\[host_check\] loop 0: a stream's Last-Event-ID 999999 is past the "
                           r"newest id \d+: everything kept of its channels is replayed \(1 such "
                           r"stream on loop 0 so far\)", line), f"the log line {line!r}")
        eq(s.stop(), 0, "exit status")
        stopped = [ln for ln in s.log_lines() if "loop stopped:" in ln]
        check(stopped and stopped[0].endswith("Last-Event-IDs past the newest id 1"),
              f"the exit line {stopped}")
