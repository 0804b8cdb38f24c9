#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/bench/test_bench.py: the analysis in contrib/bench/bench.py that turns what the
benchmark records into the figures doc/performance.md prints (the placement part's
attribution of connections and hops, its rank correlation and summary, M7's ratios, targets and
pending arms, M8's rows, summary and targets, M9's and M10's ratios by round, their targets and
the bytes of M10's event frames (contrib/bench/tls-h2), M11's and M12's ratios by round, and the
rewriting of the document's blocks). Standard library only; the last line
is "bench: N passed, N failed"."""

import importlib.machinery
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import traceback
import types

sys.dont_write_bytecode = True  # nothing written into contrib/ (it is in the tarball)
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("bench", os.path.join(TOP, "contrib", "bench",
                                                                    "bench.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
# contrib/bench/tls-h2 (M9, M10) has no .py suffix: loaded by its path.
_loader = importlib.machinery.SourceFileLoader(
    "tls_h2", os.path.join(TOP, "contrib", "bench", "tls-h2"))
tls_h2 = importlib.util.module_from_spec(importlib.util.spec_from_loader("tls_h2", _loader))
_loader.exec_module(tls_h2)


def eq(got, want, what):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


# A server (pid 100, threads 101 and 102) and wrk (pid 200, threads 201 and 202); four
# connections, from the client's ports 5001-5004, on descriptors 11-14 in both processes.
OWNERS = {(100, 10 + i): ("server", str(5000 + i)) for i in range(1, 5)}
OWNERS.update({(200, 10 + i): ("client", str(5000 + i)) for i in range(1, 5)})


def line(pid, tid, cpu, t, call, fd):
    """One line of `perf script -F pid,tid,cpu,time,event,trace`, as perf 6.1 prints it."""
    return (f"{pid:5d}/{tid:<5d} [{cpu:03d}] {t:.6f}:   syscalls:sys_enter_{call}: "
            f"fd: 0x{fd:08x}, buf: 0x7ffc5cc25b38, count: 0x00000340")


def exchange(port, server_tid, client_tid, t, cpus):
    """One request and its answer on the connection from `port`: wrk writes, the server reads,
    the server sends, wrk reads; cpus gives the CPU of each of the four calls."""
    fd = port - 5000 + 10
    return [line(200, client_tid, cpus[0], t, "write", fd),
            line(100, server_tid, cpus[1], t + 0.00001, "read", fd),
            line(100, server_tid, cpus[2], t + 0.00002, "sendto", fd),
            line(200, client_tid, cpus[3], t + 0.00003, "read", fd)]


def test_pairing_each_server_thread_holds_one_client_thread():
    lines = []
    # 101 serves 201's two connections on CPU 0; 102 serves 202's on CPU 1: every hop stays.
    for k in range(3):
        lines += exchange(5001, 101, 201, k * 0.001, (0, 0, 0, 0))
        lines += exchange(5002, 101, 201, k * 0.001, (0, 0, 0, 0))
        lines += exchange(5003, 102, 202, k * 0.001, (1, 1, 1, 1))
        lines += exchange(5004, 102, 202, k * 0.001, (1, 1, 1, 1))
    got = bench.pairing("\n".join(lines), OWNERS)
    eq(got["matrix"], [[2, 0], [0, 2]], "connections per (server thread, wrk thread)")
    eq(got["grouped"], 1.0, "grouped")
    # per connection and exchange: the server's read and wrk's read each follow a send
    eq(got["hops"], 4 * 3 * 2, "hops")
    eq(got["same_cpu"], 1.0, "same-CPU share")


def test_pairing_crossed_connections_and_hops_that_change_cpu():
    lines = []
    # Each server thread holds one connection of each wrk thread; on 5001 the answer is read
    # on the other CPU (1 of its 2 hops crosses), the three others stay on one CPU.
    lines += exchange(5001, 101, 201, 0.0, (0, 0, 0, 1))
    lines += exchange(5002, 102, 201, 0.0, (1, 1, 1, 1))
    lines += exchange(5003, 101, 202, 0.0, (0, 0, 0, 0))
    lines += exchange(5004, 102, 202, 0.0, (1, 1, 1, 1))
    got = bench.pairing("\n".join(lines), OWNERS)
    eq(got["matrix"], [[1, 1], [1, 1]], "connections per (server thread, wrk thread)")
    eq(got["grouped"], 0.5, "grouped")
    eq(got["hops"], 8, "hops")
    eq(got["same_cpu"], round(7 / 8, 2), "same-CPU share")


def test_pairing_ignores_other_descriptors_and_lines():
    lines = exchange(5001, 101, 201, 0.0, (0, 1, 1, 0))
    lines += [line(100, 101, 0, 0.5, "read", 99),        # a descriptor that is no connection
              line(300, 301, 0, 0.5, "write", 11),       # another process with the same fd
              "perf: some warning", ""]
    got = bench.pairing("\n".join(lines), OWNERS)
    eq(got["matrix"], [[1]], "connections")
    eq(got["hops"], 2, "hops")
    eq(got["same_cpu"], 0.0, "same-CPU share")  # request 0 -> 1, answer 1 -> 0


def test_pairing_shows_a_server_thread_without_connections():
    # The race gave one server thread every connection (ramp-race, nginx): the other is a row
    # of zeros, so "8 8 / 0 0" does not read as a one-thread server.
    lines = exchange(5001, 101, 201, 0.0, (0, 0, 0, 0))
    lines += exchange(5003, 101, 202, 0.0, (1, 1, 1, 1))
    got = bench.pairing("\n".join(lines), OWNERS, server_threads=2)
    eq(got["matrix"], [[1, 1], [0, 0]], "connections, with the idle server thread")
    eq(got["grouped"], 1.0, "grouped")


def test_pairing_of_nothing():
    got = bench.pairing("", OWNERS)
    eq((got["matrix"], got["grouped"], got["same_cpu"], got["hops"]), ([], None, None, 0),
       "an empty recording")


def test_spearman():
    eq(bench.spearman([1, 2, 3, 4], [10, 20, 30, 40]), 1.0, "same order")
    eq(bench.spearman([1, 2, 3, 4], [4, 3, 2, 1]), -1.0, "reversed")
    eq(bench.spearman([1, 2, 3], [5, 5, 5]), None, "no spread")
    eq(bench.spearman([1, 2], [1, 2]), None, "fewer than three")
    # ties share their mean rank: x ranks 0, 1.5, 1.5, 3 against 0, 1, 2, 3
    eq(bench.spearman([1, 2, 2, 3], [1, 2, 3, 4]), 0.95, "ties")


def test_placement_summary():
    def row(rnd, arm, rps, p99, same, grouped=0.5):
        return dict(round=rnd, arm=arm, rps=rps, p99_us=p99, same_cpu=same, grouped=grouped)
    rows = [row(0, "ramp", 100, 4000, 0.2), row(0, "nginx", 200, 1000, 0.9, 1.0),
            row(0, "h2o", 100, 4000, 0.3), row(0, "floor", 100, 4000, 0.1),
            row(1, "ramp", 50, 2000, 0.2), row(1, "nginx", 50, 2000, 0.4),
            row(1, "h2o", 50, 2000, None), row(1, "floor", 60, 3000, 0.8)]
    s = bench.placement_summary(rows)
    eq([x["arm"] for x in s["per_server"]], ["ramp", "nginx", "h2o", "floor"], "servers")
    per = {x["arm"]: x for x in s["per_server"]}
    eq(per["nginx"]["rps"], 125, "nginx median rps")
    eq(per["nginx"]["same_cpu"], 0.65, "nginx median same-CPU share")
    eq(per["h2o"]["same_cpu"], 0.3, "a run without a share is left out")
    eq(s["runs"], 7, "runs with a share")
    # round 0: median rps 100, median p99 4000; round 1: median rps 50, p99 2000
    eq((s["high_runs"], s["high_rps_rel"], s["high_p99_rel"]), (2, 1.6, 0.88), "0.75 or more")
    eq((s["low_runs"], s["low_rps_rel"], s["low_p99_rel"]), (5, 1.0, 1.0), "below 0.5")
    s = bench.placement_summary(rows + [row(0, "ramp-race", 150, 1500, 1.0, 1.0)])
    eq([(x["arm"], x["rps"]) for x in s["per_server"]][-1], ("ramp-race", 150),
       "ramp placed by the race, last")


def m1_row(rnd, arm, rps, cpu, p99, client_cpu=12.5, layout="pinned", conns=16):
    return dict(layout=layout, endpoint="now", conns=conns, round=rnd, arm=arm, rps=rps,
                cpu_us_per_req=cpu, client_cpu_us_per_req=client_cpu, p50_us=100, p99_us=p99,
                rss_kib=8000 if arm == "ramp" else 16000, rss_main_kib=8000,
                other_cpu_share=0.0, errors_total=0)


def test_m1_ratios_by_round_and_the_targets_they_meet():
    rows = [m1_row(0, "ramp", 80000, 10.0, 300), m1_row(0, "nginx", 78000, 12.0, 300),
            m1_row(1, "ramp", 76000, 11.0, 280), m1_row(1, "nginx", 80000, 11.0, 350),
            m1_row(2, "ramp", 79000, 10.5, 400), m1_row(2, "nginx", 77000, 12.5, 320)]
    med, ratios = bench.Bench.m1_summary(rows)
    r = ratios[0]
    eq(r["by_round"]["rps"], [round(80 / 78, 3), 0.95, round(79 / 77, 3)], "rps by round")
    eq(r["ramp_over_peer_rps"], round(80 / 78, 3), "the median of the rounds")
    # 80000 rps at 12.5 µs of wrk's CPU per request is wrk's one CPU, saturated; ramp's
    # rounds 1.0, 0.95, 0.9875 and nginx's 0.975, 1.0, 0.9625
    eq([m["wrk_cpus"] for m in med], [0.988, 0.975], "wrk CPUs (medians)")
    eq(bench.wrk_cpus(rows[0]), 1.0, "wrk CPUs of one run")
    lines = bench.render_targets(ratios)
    rps = next(x for x in lines if x.startswith("| rps ≥ nginx's"))
    eq(rps, "| rps ≥ nginx's | 1.03 yes (2/3) | yes |", "the rps target, with its rounds")
    p99 = next(x for x in lines if x.startswith("| p99 ≤ nginx's"))
    eq(p99, "| p99 ≤ nginx's | 1.00 yes (2/3) | yes |", "the p99 target, with its rounds")


def test_write_doc_replaces_only_its_block():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "p.md")
        with open(path, "w") as f:
            f.write(f"# P\n\n{bench.BEGIN}\n\nold results\n\n{bench.END}\n\ntail\n")
        bench.write_doc(path, "placement one", bench.PLACEMENT_BEGIN, bench.PLACEMENT_END)
        bench.write_doc(path, "placement two", bench.PLACEMENT_BEGIN, bench.PLACEMENT_END)
        bench.write_doc(path, "new results")
        with open(path) as f:
            doc = f.read()
    want = (f"# P\n\n{bench.BEGIN}\n\nnew results\n\n{bench.END}\n\ntail\n\n"
            f"{bench.PLACEMENT_BEGIN}\n\nplacement two\n\n{bench.PLACEMENT_END}\n")
    eq(doc, want, "the document")


def test_doc_blocks_follow_the_parts_that_ran():
    env = dict(m0="ramp 0.1.0", m0_commit="0123456789abcdef", nproc=2, kernel="6.1")
    params = dict(rounds=1, duration_s=10, wide_wrk_threads=2)
    rows = [dict(round=0, arm="ramp", conns=16, rps=1000.0, p50_us=100, p99_us=2000,
                 matrix=[[4, 4], [4, 4]], grouped=0.5, same_cpu=0.25, hops=10),
            dict(round=0, arm="ramp", conns=256, rps=900.0, p50_us=1500, p99_us=7000,
                 matrix=[[128, 0], [0, 128]], grouped=1.0, same_cpu=0.96, hops=10)]
    res = dict(command="contrib/bench/run --only placement", date="2026-01-01 00:00:00 UTC",
               environment=env, parameters=params, anomalies=[],
               placement=dict(rows=rows, summary={
                   str(c): bench.placement_summary([x for x in rows if x["conns"] == c])
                   for c in (16, 256)}))
    blocks = bench.doc_blocks(res, "doc/bench/x.json")
    eq([b[1] for b in blocks], [bench.PLACEMENT_BEGIN], "blocks of a placement-only run")
    lines = blocks[0][0].splitlines()
    for want in ("| 1 | ramp | 16 | 1000 | 0.10 | 2.00 | 4 4 / 4 4 | 0.5 | 0.25 |",
                 "| 1 | ramp | 256 | 900 | 1.50 | 7.00 | 128 0 / 0 128 | 1.0 | 0.96 |",
                 "| ramp | 256 | 1 | 900 | 7.00 | 1.0 | 0.96 |"):
        if want not in lines:
            raise AssertionError(f"no line {want!r} in:\n" + "\n".join(lines))
    # an artifact from before the part ran at several connection counts: one summary, of 16
    res["placement"] = dict(rows=rows[:1], summary=bench.placement_summary(rows[:1]))
    lines = bench.doc_blocks(res, "doc/bench/x.json")[0][0].splitlines()
    eq([x for x in lines if x.startswith("| ramp |")],
       ["| ramp | 16 | 1 | 1000 | 2.00 | 0.5 | 0.25 |"], "the summary rows of an older artifact")


# ---------------------------------------------------------------- M7

def m7_arms(*names):
    return [dict(a._asdict(), env=dict(a.env)) for a in bench.M7_ARMS if a.name in names]


def m7_row(rnd, arm, cpu, rps=50000.0, p99=400, other=0.05):
    return dict(round=rnd, arm=arm, cpu_us_per_req=cpu, rps=rps, p99_us=p99,
                other_cpu_share=other, errors_total=0)


# head ÷ base by round: 1.01, 0.99, 1.03, 1.00, 1.02 (the third above the 1.02 target)
M7_ROWS = [m7_row(0, "head", 10.1, 51000), m7_row(0, "base", 10.0),
           m7_row(1, "base", 12.0, other=0.25), m7_row(1, "head", 11.88, 49000),
           m7_row(2, "head", 10.3), m7_row(2, "base", 10.0, 40000),
           m7_row(3, "base", 9.0), m7_row(3, "head", 9.0),
           m7_row(4, "head", 10.2, 50000), m7_row(4, "base", 10.0, 50000)]


def test_m7_ratios_by_round_their_median_and_the_rounds_that_met_the_target():
    s = {m["arm"]: m for m in bench.m7_summary(M7_ROWS, m7_arms("head", "base"))}
    head, base = s["head"], s["base"]
    eq(head["cpu_ratio_by_round"], [1.01, 0.99, 1.03, 1.0, 1.02], "CPU/req ÷ base, by round")
    eq(head["cpu_ratio"], 1.01, "the median of the rounds' ratios")
    eq(head["met"], 4, "rounds at or under 1.02")
    eq(head["cpu_us_per_req"], 10.2, "head's median CPU/req")
    eq(base["cpu_us_per_req"], 10.0, "base's median CPU/req")
    # rps ÷ base: 1.02, 0.98, 1.25, 1.0, 1.0
    eq(head["rps_ratio"], 1.0, "the median rps ratio")
    eq((head["rounds"], head["ref"], head["target"]), (5, "base", 1.02), "head's reference")
    eq((base["cpu_ratio"], base["met"], base["cpu_ratio_by_round"]), (None, None, []),
       "the base arm has no reference")
    eq(base["other_cpu_max"], 0.25, "the busiest round's other CPU")


def m7_slice(requests, cpu_s, busy_s, p99, journald_s=0.0, errors=0):
    return dict(requests=requests, duration_s=1.0, cpu_s=cpu_s, client_cpu_s=0.5, busy_s=busy_s,
                journald_cpu_s=journald_s, p50_us=p99 // 4, p99_us=p99, errors=errors)


def test_m7_row_adds_up_its_slices():
    # 1000 + 3000 + 2000 requests in 3 s for 0.010 + 0.027 + 0.020 s of the server's CPU
    slices = [m7_slice(1000, 0.010, 0.61, 400), m7_slice(3000, 0.027, 0.827, 500, 0.2, 2),
              m7_slice(2000, 0.020, 1.12, 300)]
    row = bench.m7_row(slices, 2)
    eq((row["slices"], row["requests"], row["duration_s"], row["rps"]), (3, 6000, 3.0, 2000.0),
       "requests and time")
    eq(row["cpu_us_per_req"], 9.5, "CPU over all the slices ÷ all their requests")
    eq((row["p99_us"], row["p50_us"]), (400, 100), "p99 and p50: the slices' medians")
    eq(row["errors_total"], 2, "errors")
    eq(row["journald_cpu_us_per_req"], round(0.2e6 / 6000, 3), "journald's CPU per request")
    # other: 0.61-0.01-0.5 = 0.1, 0.827-0.027-0.5-0.2 = 0.1, 1.12-0.02-0.5 = 0.6, of 3 s × 2 CPUs
    eq(row["other_cpu_share"], round(0.8 / 6, 3), "other CPU, net of journald's")
    eq([x["cpu_us_per_req"] for x in row["by_slice"]], [10.0, 9.0, 10.0], "each slice's CPU/req")
    eq([x["other_cpu_share"] for x in row["by_slice"]], [0.05, 0.05, 0.3], "each slice's other")
    eq("journald_cpu_us_per_req" in bench.m7_row(slices[:1], 2), False,
       "no journald figure for an arm without one")


def test_m7_a_round_without_its_reference_is_left_out():
    rows = [r for r in M7_ROWS if (r["arm"], r["round"]) != ("base", 2)]
    head = bench.m7_summary(rows, m7_arms("head", "base"))[0]
    eq(head["cpu_ratio_by_round"], [1.01, 0.99, 1.0, 1.02], "the four rounds with a base")
    eq((head["cpu_ratio"], head["met"]), (1.005, 4), "median and rounds met")
    alone = bench.m7_summary([r for r in M7_ROWS if r["arm"] == "head"], m7_arms("head"))[0]
    eq((alone["cpu_ratio"], alone["met"]), (None, None), "no base build: no ratio")


def m7_result(rows, arms, skipped=()):
    env = dict(m0="ramp (m0) 0.1.0", m0_commit="0123456789abcdef", m0_source="working tree",
               cpu="CPU", nproc=2, kernel="6.1", loadavg_at_start=0.5, loadavg_at_end=0.6)
    return dict(command="contrib/bench/run --only m7 --m7-base afc5cbf",
                date="2026-12-01 00:00:00 UTC", environment=env, parameters=dict(quick=False),
                anomalies=["M7 round 2 base: {'read': 1}", "M1 something else"],
                m7=dict(parameters=dict(conns=16, rounds=5, duration_s=10, slice_s=1,
                                        warmup_s=2, server_cpu=1, client_cpu=0,
                                        flags="--threads 1"),
                        builds=dict(base=dict(dir="/b", commit="afc5cbf0123456789",
                                              source="git archive of afc5cbf",
                                              version="ramp (m0) 0.1.0")),
                        arms=arms, skipped=list(skipped), rows=rows, summary=[]))


def test_m7_block_its_target_cells_and_a_skipped_pending_arm():
    pending = dict(m7_arms("metrics-on")[0], why="pending: the host has no knob M0_METRICS "
                   "(its doctor lists none)")
    res = m7_result(M7_ROWS, m7_arms("head", "base"), [pending])
    blocks = bench.doc_blocks(res, "doc/bench/x.json")
    eq([b[1] for b in blocks], [bench.M7_BEGIN], "the blocks of an M7-only run")
    lines = blocks[0][0].splitlines()
    for want in ("| head | ramp as built | 5 | 10.20 | 50000 | 0.40 | 0 | 5% | base | "
                 "1.010 yes (4/5) | ≤ 1.02 | 1.000 |",
                 "| base | ramp of the base build | 5 | 10.00 | 50000 | 0.40 | 0 | 5% | – | – | "
                 "– | – |",
                 "| head ÷ base | 1.010 | 0.990 | 1.030 | 1.000 | 1.020 |",
                 "- base: ramp (m0) 0.1.0 at afc5cbf01234 (git archive of afc5cbf)",
                 "- Not run: **metrics-on**, metrics on a socket of their own, O1 "
                 "(`M0_METRICS=127.0.0.1:{aux_port}`): pending: the host has no knob M0_METRICS "
                 "(its doctor lists none).",
                 "- M7 round 2 base: {'read': 1}",
                 "- 5 round(s); in each, every arm is started fresh and warmed up 2 s, then the "
                 "arms take turns in 1 s slices (the order reversed every other slice) until "
                 "each has had 10 s; the arm order rotates by one from round to round. "
                 "`wrk -t1 -c16` on CPU 0, each server's process tree on CPU 1, "
                 "`--threads 1`"):
        if want not in lines:
            raise AssertionError(f"no line {want!r} in:\n" + "\n".join(lines))
    if any("M1 something else" in x for x in lines):
        raise AssertionError("another part's anomaly in the M7 block")
    if any("Other work shared the machine" in x for x in lines):
        raise AssertionError("the banner for a busy machine below 30% of other CPU")
    busy = [dict(r, other_cpu_share=0.45) if r["round"] == 3 else r for r in M7_ROWS]
    text = bench.render_m7(m7_result(busy, m7_arms("head", "base")), "doc/bench/x.json")
    if "up to 45% of its CPU" not in text:
        raise AssertionError("no banner for a round at 45% of other CPU:\n" + text)


def test_m7_target_missed():
    rows = [m7_row(r, "head", 10.0) for r in range(3)]
    rows += [m7_row(r, "metrics-on", c) for r, c in ((0, 10.05), (1, 10.2), (2, 10.3))]
    text = bench.render_m7(m7_result(rows, m7_arms("head", "metrics-on")), "doc/bench/x.json")
    want = "| head | 1.020 **no** (1/3) | ≤ 1.01 |"
    if want not in text:
        raise AssertionError(f"no {want!r} in:\n" + text)


def test_m7_plan_names_references_and_skips():
    def why_not(arm):
        return "pending: ramp does not read M0_RAMP_EXTRA_ROUTES" if "routes" in arm.name else None
    run, skipped = bench.m7_plan(bench.M7_ARMS, None, False, why_not)
    eq([a.name for a in run], ["head", "metrics-on", "access-log-journal", "head-paced",
                               "access-log-paced"], "the arms that run")
    eq([(a.name, w) for a, w in skipped],
       [("base", "no --m7-base given"),
        ("routes-3", "pending: ramp does not read M0_RAMP_EXTRA_ROUTES"),
        ("routes-200", "pending: ramp does not read M0_RAMP_EXTRA_ROUTES")], "skipped, and why")
    run, skipped = bench.m7_plan(bench.M7_ARMS, ["routes-200", "metrics-on"], True,
                                 lambda arm: None)
    eq([a.name for a in run], ["head", "base", "routes-3", "routes-200", "metrics-on"],
       "the named arms and their references, in table order")
    eq(skipped, [], "nothing skipped")
    run, _ = bench.m7_plan(bench.M7_ARMS, ["access-log-paced"], False, lambda arm: None)
    eq([(a.name, a.paced) for a in run], [("head-paced", True), ("access-log-paced", True)],
       "O2's arm at one pace and its reference at the same")


def test_m1_against_base_cells_and_the_spread():
    def row(arm, rnd, rps, cpu, p99):
        return dict(arm=arm, round=rnd, layout="pinned", endpoint="now", conns=16, rps=rps,
                    cpu_us_per_req=cpu, p99_us=p99)
    rows = [row("ramp-base", 0, 100.0, 10.0, 300), row("ramp-base", 1, 120.0, 12.0, 500),
            row("ramp-base", 2, 110.0, 11.0, 400), row("ramp", 0, 90.0, 10.5, 600),
            row("ramp", 1, 125.0, 11.0, 650), row("ramp", 2, 95.0, 12.5, 700),
            row("nginx", 0, 1.0, 1.0, 1)]
    cells = bench.m1_against_base(rows)
    eq([(x["metric"], x["base_median"], x["base_min"], x["base_max"], x["head_median"],
         x["ratio"], x["worse_past_spread"]) for x in cells],
       [("rps", 110.0, 100.0, 120.0, 95.0, 0.9, True),
        ("CPU µs/req", 11.0, 10.0, 12.0, 11.0, 1.05, False),
        ("p99 ms", 400, 300, 500, 650, 1.75, True)],
       "each metric against the base's range, which way is worse")
    text = "\n".join(bench.render_against_base(cells, dict(version="ramp 0.1.0",
                                                              commit="e338e48aaaaaaaa",
                                                              source="git archive of e338e48")))
    for want in ("| pinned | /x/now | 16 | p99 ms | 0.40 (0.30–0.50) | 0.65 | 1.750 | **yes** |",
                 "| pinned | /x/now | 16 | CPU µs/req | 11.00 (10.00–12.00) | 11.00 | 1.050 | no |",
                 "Cells worse past the spread: 2 of 3.", "at e338e48aaaaa, git archive of"):
        if want not in text:
            raise AssertionError(f"no {want!r} in:\n{text}")


def test_m1_block_of_a_paced_run_beside_its_base():
    """The results block of the paced M1 run recorded in doc/bench (its artifact as written)."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "doc", "bench",
                        "20261201T213427Z.json")
    with open(path) as f:
        res = json.load(f)
    lines = bench.render(res, "doc/bench/20261201T213427Z.json").splitlines()
    for want in ("Cells worse past the spread: 0 of 12.",
                 "| pinned | /x/now | 256 | p99 ms | 4.43 (3.87–5.29) | 4.34 | 1.006 | no |"):
        if want not in lines:
            raise AssertionError(f"no line {want!r} in:\n" + "\n".join(lines))
    eq(any("M1 paced: `h2load --h1` at 30000 requests a second (`/x/now` only)" in x
           for x in lines), True, "the Parts line says the run was paced")
    eq([x for x in lines if "/x/search" in x and x.startswith("| pinned |")], [],
       "no /x/search cells in a paced run")


def test_libm0_not_of_the_build():
    with tempfile.TemporaryDirectory() as d:
        base = os.path.join(d, "base")
        os.makedirs(os.path.join(base, ".libs"))
        saved = bench.mapped_libm0
        try:
            for mapped, build, want in (
                    (f"{base}/.libs/libm0.so.0.0.0", base, None),
                    (f"{d}/head/.libs/libm0.so.0.0.0", base,
                     f"the server mapped {d}/head/.libs/libm0.so.0.0.0, not its build's library "
                     f"in {os.path.realpath(base)}/.libs"),
                    (None, base, "the server mapped no libm0, not the build's in "
                     f"{os.path.realpath(base)}/.libs"),
                    (None, d, None),  # a build without a shared libm0
                    (f"{base}/.libs/libm0.so.0", d,
                     f"the server mapped {base}/.libs/libm0.so.0, not its build's library in "
                     f"{os.path.realpath(d)}/.libs")):
                bench.mapped_libm0 = lambda pid, m=mapped: m
                eq(bench.libm0_not_of(1, build), want, f"{mapped} in {build}")
        finally:
            bench.mapped_libm0 = saved


# What h2load 1.52 printed for `h2load --h1 -t1 -c16 --rps=1250 -D2` (its progress lines cut).
H2LOAD_OUT = """starting benchmark...
Application protocol: http/1.1
Main benchmark duration is over for thread #0. Stopping all clients.

finished in 2.00s, 19912.00 req/s, 3.21MB/s
requests: 39824 total, 39840 started, 39824 done, 39824 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 39824 2xx, 0 3xx, 0 4xx, 0 5xx
time for request:       19us      2.29ms       283us       116us    68.60%
"""


def test_h2load_summary_in_wrks_form():
    log = "".join(f"1796157285095{i:03d}\t{'404' if i == 7 else '-1' if i == 8 else '200'}"
                  f"\t{100 + i}\n" for i in range(100))
    out = H2LOAD_OUT.replace("39824 succeeded, 0 failed, 0 errored",
                             "39822 succeeded, 2 failed, 1 errored")
    w = bench.h2load_summary(0, out, "", log, 2)
    eq(w, dict(requests=39824, duration_us=2000000, p50_us=150, p90_us=190, p99_us=199,
               p999_us=199, max_us=199, mean_us=149.9, connect=0, read=1, write=0, timeout=0,
               status=1), "the -D window, the answered requests' times, failed = errored + 4xx/5xx")
    eq(bench.wrk_errors(w), 2, "each failed request counted once")
    timed = H2LOAD_OUT.replace("0 failed, 0 errored, 0 timeout", "3 failed, 2 errored, 1 timeout")
    eq(bench.wrk_errors(bench.h2load_summary(0, timed, "", log, 2)), 3, "a timeout among them")
    big = "".join(f"0\t200\t{i}\n" for i in range(1, 41001))
    eq(bench.h2load_summary(0, H2LOAD_OUT, "", big, 2)["p999_us"], 40959,
       "99.9% of 41000 is the rank 40959")
    for rc, stdout, why in ((1, H2LOAD_OUT, "h2load failed (1)"),
                            (0, "starting benchmark...\n", "h2load printed no summary")):
        try:
            bench.h2load_summary(rc, stdout, "", log, 2)
        except RuntimeError as e:
            eq(str(e).startswith(why), True, f"{why}: {e}")
        else:
            raise AssertionError(f"no RuntimeError for {why}")


# A stand-in for an m0 app: its --doctor refuses M0_ACCESS_LOG=journal as a host without O2
# does, and lists one knob, M0_ACCESS_LOG; after its exit, the bytes of a C string.
FAKE_APP = r"""#!/bin/sh
case " $* " in *" --doctor "*) ;; *) exit 1 ;; esac
if [ "$M0_ACCESS_LOG" = journal ]; then
  echo "configuration FAIL"
  echo '{"config":{"access-log":{"env":"M0_ACCESS_LOG"}},"checks":[{"name":"configuration",'\
'"ok":false,"detail":"M0_ACCESS_LOG='"'journal'"' is not on or off"}],"exit":78}'
  exit 78
fi
echo '{"config":{"access-log":{"env":"M0_ACCESS_LOG"}},"checks":[],"exit":0}'
exit 0
"""


def fake_build(d, strings=b""):
    os.makedirs(os.path.join(d, "apps"))
    path = os.path.join(d, "apps", "ramp")
    with open(path, "wb") as f:
        f.write(FAKE_APP.encode() + b"\0" + strings)
    os.chmod(path, 0o755)
    return d


def test_m7_pending_arms_detected_from_the_build():
    arms = {a.name: a for a in bench.M7_ARMS}
    with tempfile.TemporaryDirectory() as d:
        a = types.SimpleNamespace(build=fake_build(os.path.join(d, "head")),
                                  m7_base=None, blocking_threads=0, port_base=0)
        b = bench.Bench(a)
        try:
            eq(b.m7_why_not(arms["head"]), None, "head, as built")
            eq(b.m7_why_not(arms["routes-200"]),
               "pending: ramp does not read M0_RAMP_EXTRA_ROUTES", "no extra-routes variable")
            eq(b.m7_why_not(arms["metrics-on"]),
               "pending: the host has no knob M0_METRICS (its doctor lists none)", "no knob")
            eq(b.m7_why_not(arms["access-log-journal"]),
               "pending: ramp's doctor refuses M0_ACCESS_LOG=journal (exit 78: "
               "M0_ACCESS_LOG='journal' is not on or off)", "a value the doctor refuses")
            a.build = fake_build(os.path.join(d, "routes"), b"M0_RAMP_EXTRA_ROUTES\0")
            eq(b.m7_why_not(arms["routes-200"]), None, "an app that reads the variable")
            a.m7_base = os.path.join(d, "none")
            eq(b.m7_why_not(arms["base"]), os.path.join(d, "none", "apps", "ramp") +
               " is missing", "a base build without its app")
        finally:
            shutil.rmtree(b.tmp, ignore_errors=True)



# ---------------------------------------------------------------- M8

def m8_out(p50, p99, worst, late=0, failed=0, closed=1000, s408=1000, close_max=10004.5,
           runq=None):
    """What contrib/bench/slowloris prints, on one line: runq, the worst answer's client
    wait, in the slowest's fifth field; without it, the two fields of a slowloris before it."""
    first = [2010, worst] if runq is None else [2010, worst, 90, worst - 10, runq]
    return {"t0_us": 123, "slow": {"n": 1000, "opened": 1000, "failed": 0, "closed": closed,
                                   "status408": s408, "late": late, "open": 1000 - closed,
                                   "close_ms_min": 9999.1, "close_ms_max": close_max},
            "normal": {"n": 300, "failed": failed, "p50_us": p50, "p99_us": p99,
                       "max_us": worst, "fifo": runq is not None,
                       "slowest": [first, [4020, p99]]}}


def test_m8_row_from_the_helpers_line():
    row = bench.m8_row(m8_out(250, 900, 3100, late=2, failed=1), "ramp", 1, 10000)
    eq(row, dict(arm="ramp", round=1, timeout_ms=10000, slow_n=1000, slow_opened=1000,
                 slow_failed=0, slow_closed=1000, slow_408=1000, slow_late=2,
                 slow_open_at_end=0, close_ms_min=9999.1, close_ms_max=10004.5, normal_n=300,
                 normal_failed=1, p50_us=250, p99_us=900, max_us=3100,
                 slowest=[(2010, 3100), (4020, 900)], probe_fifo=False, worst_runq_us=-1),
       "the row of a slowloris that does not say where the worst answer's time went")
    row = bench.m8_row(m8_out(250, 900, 3100, runq=2400), "ramp", 1, 10000)
    eq((row["probe_fifo"], row["worst_runq_us"], row["slowest"][0]),
       (True, 2400, (2010, 3100, 90, 3090, 2400)), "the worst answer's parts")


M8_ROWS = [bench.m8_row(m8_out(*x), arm, rnd, 10000) for rnd, arm, x in (
    (0, "ramp", (250, 800, 3000)), (0, "nginx", (300, 600, 700, 1000, 0, 0, 0, -1)),
    (0, "h2o", (280, 9000, 12500)),
    (1, "nginx", (310, 650, 800, 1000, 0, 0, 0, -1)), (1, "h2o", (290, 8000, 11000)),
    (1, "ramp", (240, 1200, 6000)),
    (2, "h2o", (270, 9500, 13000)), (2, "ramp", (260, 700, 4000, 0, 1)),
    (2, "nginx", (305, 620, 750, 1000, 0, 0, 0, -1)))]


def test_m8_summary_medians_sums_and_ramps_targets():
    s = {m["arm"]: m for m in bench.m8_summary(M8_ROWS)}
    eq(list(s), ["ramp", "nginx", "h2o"], "arms in M8_ARMS order")
    r = s["ramp"]
    eq((r["rounds"], r["p50_us"], r["p99_us"], r["max_us"], r["max_us_worst"]),
       (3, 250, 800, 4000, 6000), "ramp's medians and worst")
    eq((r["slow_late"], r["normal_failed"], r["slow_closed"], r["normal_n"]), (0, 1, 3000, 900),
       "ramp's sums")
    eq([(t["what"], t["value"], t["met"], t["rounds_met"]) for t in r["targets"]],
       [("worst answer < 5 ms", 4000, True, 2), ("p99 < 1 ms", 800, True, 2),
        ("every slow connection closed within the head bound + 1 s", 0, True, 3),
        ("no normal request failed", 1, False, 2)], "ramp's targets")
    n = s["nginx"]
    eq((n["slow_late"], n["slow_closed"], n["max_us"], n["close_ms_max"]), (3000, 0, 750, -1),
       "nginx closing none")
    check_no = "targets" not in n and "targets" not in s["h2o"]
    eq(check_no, True, "targets are ramp's only")


def test_m8_block():
    env = dict(m0="ramp 0.1.0", m0_commit="0123456789abcdef", nproc=2, kernel="6.1",
               cpu="Test CPU", loadavg_at_start=0.5, loadavg_at_end=0.6)
    res = dict(command="contrib/bench/run --only m8", date="2026-01-01 00:00:00 UTC",
               environment=env, parameters=dict(quick=False),
               anomalies=["M8 round 3 ramp: 0 slow connections late, 1 normal requests failed",
                          "M1 something else"],
               m8=dict(rows=M8_ROWS, parameters=dict(slow=1000, drip_ms=2000, timeout_ms=10000,
                                                     every_ms=50, threads=2, rounds=3)))
    blocks = bench.doc_blocks(res, "doc/bench/x.json")
    eq([b[1:] for b in blocks], [(bench.M8_BEGIN, bench.M8_END)], "blocks of an M8-only run")
    lines = blocks[0][0].splitlines()
    for want in ("| ramp | 3 | 900 | 1 | 0.25 | 0.80 | 4.00 | 6.00 | – | 3000/3000 | 3000 | 0 "
                 "| 10.00 |",
                 "| nginx | 3 | 900 | 0 | 0.30 | 0.62 | 0.75 | 0.80 | – | 0/3000 | 0 | 3000 | – |",
                 "- worst answer < 5 ms: yes (2/3)", "- no normal request failed: **no** (2/3)",
                 "- M8 round 3 ramp: 0 slow connections late, 1 normal requests failed"):
        if want not in lines:
            raise AssertionError(f"no line {want!r} in:\n" + "\n".join(lines))
    eq([x for x in lines if "M1 something" in x], [], "another part's anomaly")
    eq(any("could not run SCHED_FIFO" in x for x in lines), True, "a probe without SCHED_FIFO")
    rows = [bench.m8_row(m8_out(250, 800, 3000 + 100 * rnd, runq=1000 * rnd), arm, rnd, 10000)
            for rnd in range(3) for arm in bench.M8_ARMS]
    res["m8"]["rows"] = rows
    lines = bench.doc_blocks(res, "doc/bench/x.json")[0][0].splitlines()
    eq([x for x in lines if x.startswith("| ramp |")],
       ["| ramp | 3 | 900 | 0 | 0.25 | 0.80 | 3.10 | 3.20 | 1.00 | 3000/3000 | 3000 | 0 | "
        "10.00 |"], "the worst's client wait, the median over the rounds")
    eq(any("on a thread that runs SCHED_FIFO" in x for x in lines), True, "a SCHED_FIFO probe")


# ---------------------------------------------------------------- M11, M12

def m11_row(rnd, arm, us, whole=True, echo=None, split=None):
    r = dict(round=rnd, arm=arm, followers=10000, messages=20, followers_open=10000,
             delivered=200000 if whole else 199999, every_message=whole, connect_ms=900.0,
             fanout_us_per_msg=us)
    if split:
        r.update(fanout_user_us_per_msg=split[0], fanout_sys_us_per_msg=split[1])
    if echo:
        cpu, p99 = echo
        r.update(echo_open=1000, echoes=100000, echo_rate=10000.0, echo_p50_us=900.0,
                 echo_p99_us=p99, echo_cpu_us=cpu, echo_client_cpu_share=0.6)
    return r


# m0-ws ÷ m0-sse by round: 1.1, 1.3 (past 1.2), 1.0; m0-ws ÷ node-ws: 0.2, 0.26, 0.4 (past ⅓);
# round 4's m0-sse missed a message, so that round has no ratio against it.
M11_ROWS = [m11_row(0, "m0-ws", 5.5, echo=(10.0, 2000.0)), m11_row(0, "m0-sse", 5.0),
            m11_row(0, "node-ws", 27.5, echo=(20.0, 4000.0)),
            m11_row(1, "m0-sse", 5.0), m11_row(1, "node-ws", 25.0, echo=(25.0, 5000.0)),
            m11_row(1, "m0-ws", 6.5, echo=(10.0, 2000.0)),
            m11_row(2, "node-ws", 12.5, echo=(30.0, 3000.0)),
            m11_row(2, "m0-ws", 5.0, echo=(12.0, 1500.0)), m11_row(2, "m0-sse", 5.0),
            m11_row(3, "m0-ws", 5.0, echo=(12.0, 1500.0)),
            m11_row(3, "m0-sse", 1.0, whole=False)]


def test_m11_summary_ratios_by_round_and_the_targets():
    med, ratios = bench.m11_summary(M11_ROWS)
    eq(list(med), ["m0-ws", "m0-sse", "node-ws"], "arms in M11_ARMS order")
    eq((med["m0-ws"]["rounds_whole"], med["m0-ws"]["fanout_us_per_msg"]), (4, 5.25),
       "m0-ws's rounds and median")
    eq((med["m0-sse"]["rounds"], med["m0-sse"]["rounds_whole"],
        med["m0-sse"]["fanout_by_round"]), (4, 3, [5.0, 5.0, 5.0]),
       "a round that missed a message is left out of the median")
    eq((med["m0-ws"]["echo_cpu_us"], med["m0-ws"]["echo_p99_us"], med["m0-sse"]["echo_rate"]),
       (11.0, 1750.0, None), "the echo's medians; none for the event stream")
    t = [(r["ref"], r["field"], r["by_round"], r["median"], r["meets"]) for r in ratios]
    eq(t, [("m0-sse", "fanout_us_per_msg", [1.1, 1.3, 1.0], 1.1, True),
           ("node-ws", "fanout_us_per_msg", [0.2, 0.26, 0.4], 0.26, True),
           ("node-ws", "echo_cpu_us", [0.5, 0.4, 0.4], 0.4, None),
           ("node-ws", "echo_p99_us", [0.5, 0.4, 0.5], 0.5, None)], "ratios")
    med, ratios = bench.m11_summary([m11_row(0, "m0-ws", 5.0), m11_row(0, "node-ws", 10.0)])
    eq([(r["ref"], r["median"], r["meets"]) for r in ratios if r["bound"]],
       [("m0-sse", None, None), ("node-ws", 0.5, False)], "a target missed; an arm not run")


def m12_row(rnd, arm, cell, cpu, size=1300.0):
    return dict(round=rnd, arm=arm, cell=cell, cpu_us_per_req=cpu, rps=40000.0,
                bytes_per_req=size, p99_us=800, other_cpu_share=0.1, errors_total=0,
                body_bytes=977 if cell == "json" else None)


# m0 ÷ nginx on 1 KiB: 0.9, 1.0, 0.8; m0 ÷ h2o: 0.9, 0.95, 1.0; JSON against nginx only.
M12_ROWS = [m12_row(r, a, "1k", c) for r, a, c in (
    (0, "m0", 18.0), (0, "nginx", 20.0), (0, "h2o", 20.0), (1, "nginx", 20.0), (1, "h2o", 21.0),
    (1, "m0", 19.96), (2, "h2o", 20.0), (2, "m0", 20.0), (2, "nginx", 25.0))] + [
    m12_row(0, "m0", "json", 60.0, 1200.0), m12_row(0, "nginx", "json", 40.0, 1250.0)]


def test_m12_summary_ratios_by_round_and_the_target_on_files():
    med, ratios = bench.m12_summary(M12_ROWS)
    eq([(m["cell"], m["arm"], m["cpu_us_per_req"]) for m in med],
       [("1k", "m0", 19.96), ("1k", "nginx", 20.0), ("1k", "h2o", 20.0), ("json", "m0", 60.0),
        ("json", "nginx", 40.0)], "medians per cell, in M12_ARMS order")
    eq([(r["cell"], r["peer"], r["cpu_by_round"], r["cpu_median"], r["target"], r["meets"])
        for r in ratios],
       [("1k", "nginx", [0.9, 0.998, 0.8], 0.9, 0.95, True),
        ("1k", "h2o", [0.9, 0.95, 1.0], 0.95, 0.95, True),
        ("json", "nginx", [1.5], 1.5, None, None)], "ratios, no target on the JSON")
    eq(ratios[2]["bytes_median"], 0.96, "bytes on the wire, m0 ÷ nginx")


def test_m11_m12_blocks():
    env = dict(m0="ramp 0.1.0", m0_commit="0123456789abcdef", m0_source="working tree",
               nproc=2, kernel="6.1")
    med11, rat11 = bench.m11_summary(M11_ROWS)
    med12, rat12 = bench.m12_summary(M12_ROWS)
    res = dict(command="contrib/bench/run --only m11,m12", date="2026-01-01 00:00:00 UTC",
               environment=env, parameters=dict(rounds=4), anomalies=["M11 round 4 m0-sse: x"],
               m11=dict(rows=M11_ROWS, medians=med11, ratios=rat11, followers=10000,
                        messages=20, echo_conns=1000, echo_size=32),
               m12=dict(rows=M12_ROWS, medians=med12, ratios=rat12, conns=16))
    blocks = bench.doc_blocks(res, "doc/bench/x.json")
    eq([b[1:] for b in blocks], [(bench.M11_BEGIN, bench.M11_END),
                                 (bench.M12_BEGIN, bench.M12_END)], "blocks of M11 and M12")
    lines = blocks[0][0].splitlines() + blocks[1][0].splitlines()
    for want in (
            "Run of 2026-01-01 00:00:00 UTC: `contrib/bench/run --only m11,m12`, m0 at "
            "0123456789ab (working tree), 4 interleaved rounds, the order rotating; artifact "
            "[`doc/bench/x.json`](bench/x.json).",
            "| m0-ws | bench_app `/follow`, WebSocket | 4/4 | **5.250** (5.500, 6.500, 5.000, "
            "5.000) | n/a | 900 |",
            "| ≤ 1.2× an event stream's (WS7) | **1.100** (1.100, 1.300, 1.000) | yes (2/3) |",
            "| ≤ ⅓ of Node `ws`'s (WS7) | **0.260** (0.200, 0.260, 0.400) | yes (2/3) |",
            "| m0-ws | 1000 | 10000 | 0.90 | 1.75 | 11.00 | 0.60 |",
            "Anomalies: M11 round 4 m0-sse: x",
            "| 1 KiB file | 19.96 | 20.00 | 20.00 | **0.900** (0.900, 0.998, 0.800) yes (2/3) | "
            "**0.950** (0.900, 0.950, 1.000) yes (2/3) | 1300 · 1300 · 1300 |",
            "| JSON, gzip | 60.00 | 40.00 | n/a | **1.500** (1.500) | n/a | 1200 · 1250 · – |"):
        if want not in lines:
            raise AssertionError(f"no line {want!r} in:\n" + "\n".join(lines))
def test_m11_against_the_floor():
    rows = [m11_row(0, "m0-ws", 12.0, echo=(10.0, 2000.0)), m11_row(0, "node-ws", 30.0,
                                                                   echo=(20.0, 4000.0)),
            m11_row(0, "floor-ws", 10.0, echo=(8.0, 1000.0), split=(0.05, 9.9)),
            m11_row(0, "m0-sse", 11.0),
            m11_row(1, "floor-ws", 12.0, echo=(5.0, 1000.0), split=(0.15, 11.9)),
            m11_row(1, "m0-ws", 12.0),
            m11_row(1, "node-ws", 24.0, echo=(10.0, 900.0)),
            m11_row(2, "floor-ws", 1.0, whole=False), m11_row(2, "m0-ws", 13.0)]
    med, ratios = bench.m11_summary(rows)
    eq(list(med), ["m0-ws", "m0-sse", "node-ws", "floor-ws"], "the floor last")
    eq(med["floor-ws"]["fanout_by_round"], [10.0, 12.0], "a floor round short of a message "
       "is left out")
    got = [(r["arm"], r["ref"], r["field"], r["by_round"], r["median"]) for r in ratios
           if r.get("floor")]
    eq(got, [("m0-ws", "floor-ws", "fanout_us_per_msg", [1.2, 1.0], 1.1),
             ("m0-sse", "floor-ws", "fanout_us_per_msg", [1.1], 1.1),
             ("node-ws", "floor-ws", "fanout_us_per_msg", [3.0, 2.0], 2.5),
             ("floor-ws", "node-ws", "fanout_us_per_msg", [0.333, 0.5], 0.416),
             ("m0-ws", "floor-ws", "echo_cpu_us", [1.25], 1.25),
             ("node-ws", "floor-ws", "echo_cpu_us", [2.5, 2.0], 2.25),
             ("floor-ws", "node-ws", "echo_cpu_us", [0.4, 0.5], 0.45)], "ratios to the floor")
    eq([r["bound"] for r in ratios if r.get("floor")], [None] * 7, "no target on the floor")
    res = dict(command="c", date="d", environment=dict(m0_commit="0123456789abcdef",
                                                       m0_source="w"),
               parameters=dict(rounds=3),
               m11=dict(rows=rows, medians=med, ratios=ratios, followers=10000, messages=20,
                        echo_conns=1000, echo_size=32))
    lines = bench.render_m11(res, "doc/bench/x.json").splitlines()
    for want in ("| floor-ws | wsfloor.c `/follow`: one `write()` of one frame to each socket | "
                 "2/3 | **11.000** (10.000, 12.000) | 0.10 · 10.90 | 900 |",
                 "| m0-ws ÷ floor-ws | **1.100** (1.200, 1.000) | **1.250** (1.250) |",
                 "| m0-sse ÷ floor-ws | **1.100** (1.100) | n/a |",
                 "| floor-ws ÷ node-ws (WS7's ⅓ is within any server's reach only if this is "
                 "≤ 0.333) | **0.416** (0.333, 0.500) | **0.450** (0.400, 0.500) |",
                 "| floor-ws | 1000 | 10000 | 0.90 | 1.00 | 6.50 | 0.60 |"):
        if want not in lines:
            raise AssertionError(f"no line {want!r} in:\n" + "\n".join(lines))
    lines = bench.render_m11(dict(res, m11=dict(res["m11"], rows=M11_ROWS,
                                                 **dict(zip(("medians", "ratios"),
                                                            bench.m11_summary(M11_ROWS))))),
                             "doc/bench/x.json")
    eq(("floor-ws" in lines, "Against the floor" in lines), (False, False),
       "no floor rows, no floor lines")


def test_m12_against_the_floor():
    rows = [m12_row(r, a, c, cpu) for r, a, c, cpu in (
        (0, "m0", "1k", 6.0), (0, "nginx", "1k", 12.0), (0, "h2o", "1k", 7.0),
        (0, "floor", "1k", 5.0), (0, "m0", "304", 7.0), (0, "floor", "304", 5.6),
        (1, "floor", "1k", 6.0), (1, "m0", "1k", 7.2), (1, "h2o", "1k", 6.6),
        (1, "nginx", "1k", 13.2))]
    med, ratios = bench.m12_summary(rows)
    eq([(m["cell"], m["arm"], m["cpu_us_per_req"]) for m in med if m["arm"] == "floor"],
       [("1k", "floor", 5.5), ("304", "floor", 5.6)], "the floor's medians")
    got = [(r["cell"], r["arm"], r["peer"], r["cpu_by_round"], r["cpu_median"], r["target"])
           for r in ratios if r["peer"] == "floor"]
    eq(got, [("1k", "m0", "floor", [1.2, 1.2], 1.2, None),
             ("1k", "nginx", "floor", [2.4, 2.2], 2.3, None),
             ("1k", "h2o", "floor", [1.4, 1.1], 1.25, None),
             ("304", "m0", "floor", [1.25], 1.25, None)], "each server ÷ the floor, no target")
    eq([(r["peer"], r["target"]) for r in ratios if r["arm"] == "m0" and r["cell"] == "1k"],
       [("nginx", 0.95), ("h2o", 0.95), ("floor", None)], "SF5's target on the peers only")
    res = dict(command="c", date="d", environment=dict(m0_commit="0123456789abcdef",
                                                       m0_source="w"),
               parameters=dict(rounds=2), m12=dict(rows=rows, medians=med, ratios=ratios,
                                                   conns=16))
    lines = bench.render_m12(res, "doc/bench/x.json").splitlines()
    for want in ("| 1 KiB file | 6.60 | 12.60 | 6.80 | **0.522** (0.500, 0.545) yes (2/2) | "
                 "**0.974** (0.857, 1.091) **no** (1/2) | 1300 · 1300 · 1300 |",
                 "| 1 KiB file | 5.50 | 1300 | **1.200** (1.200, 1.200) | **2.300** (2.400, "
                 "2.200) | **1.250** (1.400, 1.100) |",
                 "| 304 (If-None-Match) | 5.60 | 1300 | **1.250** (1.250) | n/a | n/a |"):
        if want not in lines:
            raise AssertionError(f"no line {want!r} in:\n" + "\n".join(lines))


def m9_row(rnd, arm, test, cpu_us):
    return dict(round=rnd, arm=arm, test=test, n=1000, cpu_us=cpu_us)


def test_m9_m10_ratios_by_round_their_median_and_the_targets():
    rows = []
    for rnd, (ka, full, res) in enumerate(((8.0, 900.0, 200.0), (9.0, 1000.0, 300.0),
                                           (10.0, 1100.0, 250.0))):
        rows += [m9_row(rnd, "ramp", "ka", ka), m9_row(rnd, "nginx", "ka", 10.0),
                 m9_row(rnd, "h2o", "ka", 8.0), m9_row(rnd, "ramp", "full", full),
                 m9_row(rnd, "nginx", "full", 1000.0), m9_row(rnd, "ramp", "resumed", res),
                 m9_row(rnd, "ramp", "h2 m=10", 4.0), m9_row(rnd, "h2o", "h2 m=10", 5.0)]
    rows.append(m9_row(3, "nginx", "ka", 1.0))  # a round without ramp's row: left out
    r = tls_h2.ratios(rows, "cpu_us")
    eq(r["ka"]["nginx"], dict(by_round=[0.8, 0.9, 1.0], median=0.9), "ramp / nginx by round")
    eq(r["ka"]["h2o"], dict(by_round=[1.0, 1.125, 1.25], median=1.125), "ramp / h2o")
    eq(sorted(r), ["full", "h2 m=10", "ka"], "tests with a peer's row (resumed has none)")
    eq(tls_h2.within(rows, "cpu_us", "resumed", "full"),
       dict(by_round=[0.222, 0.3, 0.227], median=0.227), "resumed over full, in each round")
    eq(tls_h2.medians(rows, "cpu_us")[("ka", "ramp")], 9.0, "a median over the rounds")
    got = {t["what"]: (t["value"], t["meets"]) for t in tls_h2.targets(rows)}
    eq(got, {"ka: ramp / h2o CPU per request <= 0.9": (1.125, False),
             "ka: ramp / nginx CPU per request <= 0.9": (0.9, True),
             "h2 m=10: ramp / h2o CPU per request <= 0.9": (0.8, True),
             "full handshake: ramp / nginx CPU per connection <= 1.0": (1.0, True),
             "ramp's resumed handshake / its full one <= 0.25": (0.227, True)}, "targets")


def test_m10_frame_ratio_counts_only_rounds_where_both_delivered_every_frame():
    def sse(rnd, proto, n, ns, ok=True):
        return dict(round=rnd, proto=proto, streams=n, ns_per_frame=ns, every_frame=ok)
    rows = [sse(0, "h1", 100, 400.0), sse(0, "h2", 100, 480.0),
            sse(1, "h1", 100, 500.0), sse(1, "h2", 100, 500.0, ok=False),
            sse(2, "h1", 100, 400.0), sse(2, "h2", 100, 600.0),
            sse(0, "h1", 1, 1000.0), sse(0, "h2", 1, 1200.0)]
    eq(tls_h2.frame_ratio(rows), {1: dict(by_round=[1.2], median=1.2),
                                  100: dict(by_round=[1.2, 1.5], median=1.35)},
       "h2 / h1 per round, a round with a frame missing left out")
    res = dict(rows=[m9_row(0, "ramp", "ka", 9.0), m9_row(0, "nginx", "ka", 10.0),
                     dict(round=0, arm="ramp", test="idle h2c", n=10, bytes_per_conn=2048.0)],
               sse=rows)
    lines = tls_h2.table(res).splitlines()
    eq([x for x in lines if x.startswith("| ka |")],
       ["| ka | 9.00 | 10.00 | n/a | **0.90** (0.90) | n/a |"], "the CPU row")
    eq([x for x in lines if x.startswith("| idle h2c |")], ["| idle h2c | 2048 | n/a | n/a |"],
       "the idle row")
    eq([x for x in lines if x.startswith("| 100 streams |")],
       ["| 100 streams | 400 | 540 | **1.35** (1.20, 1.50) |"], "the event streams' row")


def test_m10_frame_bytes_as_host_check_writes_its_events():
    answers = [dict(first=1796220902031803, last=1796220902031805, published=3),
               dict(first=1796220902031900, last=1796220902031900, published=1)]
    want = (b'id: 1796220902031803\ndata: {"i":0}\n\nid: 1796220902031804\ndata: {"i":1}\n\n'
            b'id: 1796220902031805\ndata: {"i":2}\n\nid: 1796220902031900\ndata: {"i":0}\n\n')
    eq(tls_h2.frame_bytes(answers), len(want), "each POST's events numbered from 0")
    eq(tls_h2.frame_bytes([]), 0, "nothing published")


def main():
    tests = [(k, v) for k, v in sorted(globals().items()) if k.startswith("test_")]
    passed = failed = 0
    for name, fn in tests:
        try:
            fn()
            passed += 1
            print(f"ok   {name}")
        except Exception:
            failed += 1
            print(f"FAIL {name}")
            traceback.print_exc(file=sys.stdout)
    print(f"bench: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
