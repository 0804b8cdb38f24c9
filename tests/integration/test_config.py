# SPDX-License-Identifier: MIT
"""Configuration and refusals (SPEC C1–C4, R1, R2): usage errors exit 2 with the usage text
and one line naming the problem; bad variables and refused configurations exit 78 with one
`m0: <finding> (<fix>)` line and never READY=1; --help and --version exit 0."""

import re

from m0test import KNOBS, Server, check, eq, run_app


def _usage_error(args, last_line, env=None):
    rc, out, err = run_app("host_check", args, env)
    eq(rc, 2, f"exit status of {args}")
    eq(out, "", f"stdout of {args}")
    lines = err.rstrip("\n").split("\n")
    check(lines[0].startswith("usage: host_check "), f"usage text missing for {args}:\n{err}")
    check(any("--threads" in ln for ln in lines), f"the usage text lists no flag:\n{err}")
    eq(lines[-1], last_line, f"last line for {args}")
    eq(sum(1 for ln in lines if ln.startswith("m0: ")), 1, f"lines naming the problem:\n{err}")


def test_C1_unknown_flag_exit_2():
    _usage_error(["--bogus-flag", "1"], "m0: unknown option '--bogus-flag'")


def test_C1_missing_value_exit_2():
    _usage_error(["--threads"], "m0: option '--threads' needs a value")


def test_C1_malformed_flag_value_exit_2():
    _usage_error(
        ["--threads", "abc"], "m0: option '--threads': 'abc' is not a whole number from 0 to 1024, or auto"
    )


def test_C1_positional_argument_exit_2():
    _usage_error(["serve"], "m0: unexpected argument 'serve'")


def test_C1_usage_error_wins_over_bad_variable():
    _usage_error(["--nope"], "m0: unknown option '--nope'", env={"M0_THREADS": "abc"})


def test_C4_bad_variable_exit_78():
    with Server("host_check", env={"M0_THREADS": "abc"}) as s:
        eq(s.wait_exit(10), 78, "exit status")
        refusals = [ln for ln in s.log_lines() if ln.startswith("m0: ")]
        eq(len(refusals), 1, f"refusal lines:\n{s.log_text()}")
        check(
            re.fullmatch(r"m0: M0_THREADS='abc' is not .+ \(.*M0_THREADS.*\)", refusals[0]),
            f"the refusal does not name M0_THREADS and 'abc' with a fix: {refusals[0]!r}",
        )
        check("READY=1" not in s.notify_lines(), "READY=1 was sent")


def test_C4_bad_variables_each_named():
    for var, val in [
        ("M0_PORT", "http"),
        ("M0_MAX_BODY_BYTES", "-1"),
        ("M0_ACCEPT_SHARE", "maybe"),
        ("M0_MAX_HEADER_FIELDS", "0"),
        ("M0_DRAIN_TIMEOUT_MS", ""),
    ]:
        rc, out, err = run_app("host_check", [], {var: val})
        eq(rc, 78, f"exit status for {var}={val!r}")
        lines = [ln for ln in err.split("\n") if ln.startswith("m0: ")]
        eq(len(lines), 1, f"refusal lines for {var}={val!r}: {err!r}")
        check(
            lines[0].startswith(f"m0: {var}='{val}' is not "),
            f"the refusal does not name {var} and {val!r}: {lines[0]!r}",
        )


def test_C4_retired_knob_is_refused_naming_what_replaced_it():
    """M0_REPLAY_FRAMES (replay is per channel now, N4): a value for it is refused, not read with
    another meaning or ignored; 78 for the variable, 2 (usage) for the flag (DECISIONS D75)."""
    why = ("replay is kept per channel now: set M0_REPLAY_PER_CHANNEL (events a channel keeps) "
           "or M0_REPLAY_BYTES (the whole store's memory)")
    rc, out, err = run_app("host_check", [], {"M0_REPLAY_FRAMES": "1024"})
    eq(rc, 78, "exit status for M0_REPLAY_FRAMES=1024")
    eq([ln for ln in err.split("\n") if ln.startswith("m0: ")],
       [f"m0: M0_REPLAY_FRAMES is no longer read: {why} (unset M0_REPLAY_FRAMES)"], "the refusal")
    rc, out, err = run_app("host_check", ["--replay-frames", "8"])
    eq(rc, 2, "exit status for --replay-frames 8")
    check(f"m0: option '--replay-frames' is no longer read: {why}" in err.split("\n"), err)


def test_C1_flag_beats_variable():
    """--opt=v and --opt v both work; the flag wins over its variable."""
    for args in (["--max-keepalive-requests=2"], ["--max-keepalive-requests", "2"]):
        with Server("host_check", args=args, env={"M0_MAX_KEEPALIVE_REQUESTS": "50"}) as s:
            s.wait_ready()
            c = s.connect()
            eq(c.get("/health").header("Connection"), None, f"{args}: first answer")
            eq(c.get("/health").header("Connection"), "close", f"{args}: second answer")
            c.expect_eof()


def test_C1_variable_beats_default():
    with Server("host_check", env={"M0_MAX_KEEPALIVE_REQUESTS": "1"}) as s:
        s.wait_ready()
        c = s.connect()
        eq(c.get("/health").header("Connection"), "close", "first answer with a cap of 1")
        c.expect_eof()


def test_C3_help_lists_every_flag_with_its_variable():
    rc, out, err = run_app("host_check", ["--help"])
    eq(rc, 0, "exit status")
    eq(err, "", "stderr")
    check(out.startswith("usage: host_check "), f"--help output:\n{out}")
    for flag, env, default in KNOBS:
        rx = re.compile(
            rf"^\s+--{re.escape(flag)}\s+{re.escape(env)}\s+default {re.escape(default)}$", re.M
        )
        check(rx.search(out), f"--help has no line for --{flag} {env} (default {default}):\n{out}")
    # And every flag it lists names its variable and a default.
    for m in re.finditer(r"^\s+--([a-z][a-z0-9-]*)\s+(\S+)", out, re.M):
        flag, second = m.group(1), m.group(2)
        if flag in ("doctor", "help", "version"):
            continue
        check(second.startswith("M0_"), f"--{flag} is listed without its variable: {m.group(0)!r}")
    for word in ("--doctor", "--help", "--version"):
        check(word in out, f"--help does not mention {word}")


def test_C3_version():
    for app in ("host_check", "ramp"):
        rc, out, err = run_app(app, ["--version"])
        eq(rc, 0, f"{app} --version exit status")
        check(re.fullmatch(rf"{app} \(m0\) \d+\.\d+\.\d+\n", out), f"{app} --version: {out!r}")
        eq(err, "", f"{app} --version stderr")


def test_R2_workers_refused():
    with Server("host_check", env={"M0_WORKERS": "2"}) as s:
        eq(s.wait_exit(10), 78, "exit status")
        refusals = [ln for ln in s.log_lines() if ln.startswith("m0: ")]
        eq(len(refusals), 1, f"refusal lines: {refusals}")
        check(refusals[0].startswith("m0: workers: "), f"refusal does not name the check: {refusals[0]!r}")
        check(
            refusals[0].endswith(
                "(systemd supervises this service as one process; set --threads (M0_THREADS))"
            ),
            f"refusal does not give the fix naming --threads (M0_THREADS): {refusals[0]!r}",
        )
        check("M0_WORKERS=2" in refusals[0], f"refusal does not name M0_WORKERS=2: {refusals[0]!r}")
        check("READY=1" not in s.notify_lines(), "READY=1 was sent")
        check(not any("Event loop started" in ln for ln in s.log_lines()), "a loop started")


def test_R2_workers_1_is_served():
    with Server("host_check", env={"M0_WORKERS": "1"}) as s:
        s.wait_ready()
        eq(s.connect().get("/health").status, 200, "/health with M0_WORKERS=1")


def test_R2_threads_zero_refused():
    with Server("host_check", env={"M0_THREADS": "0"}) as s:
        eq(s.wait_exit(10), 78, "exit status")
        refusals = [ln for ln in s.log_lines() if ln.startswith("m0: ")]
        eq(len(refusals), 1, f"refusal lines:\n{s.log_text()}")
        check(
            re.fullmatch(r"m0: threads-count: M0_THREADS=0 .+ \(.*--threads \(M0_THREADS\).*\)", refusals[0]),
            f"the refusal does not name threads-count, M0_THREADS=0 and the fix: {refusals[0]!r}",
        )
        check("READY=1" not in s.notify_lines(), "READY=1 was sent")


def test_R2_first_failing_check_is_named():
    """Two failures (threads-count, workers): the first in the list is the one named."""
    with Server("host_check", env={"M0_THREADS": "0", "M0_WORKERS": "3"}) as s:
        eq(s.wait_exit(10), 78, "exit status")
        refusals = [ln for ln in s.log_lines() if ln.startswith("m0: ")]
        eq(len(refusals), 1, f"refusal lines: {refusals}")
        check(refusals[0].startswith("m0: threads-count: "), f"named: {refusals[0]!r}")
