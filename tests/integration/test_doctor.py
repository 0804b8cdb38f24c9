# SPDX-License-Identifier: MIT
"""The doctor (SPEC D1, R2, C1): `--doctor ARGS` binds nothing, builds nothing, prints human
lines then one JSON object as its last line, and exits with the code serving ARGS exits with.
A table of configurations is run both ways and the two codes are compared with each other and
with the table; the JSON is checked against the configuration each row gave."""

import json
import os
import resource
import socket
import tempfile
import time

from m0test import KNOBS, Server, build_dir, check, compute_threads_default, eq, free_port
from notes_util import make_hash

# SPEC R2: the host's checks, in this order; then the app's own when it defines one.
HOST_CHECKS = [
    "threads-count",
    "workers",
    "threads-vs-application",
    "blocking-vs-application",
    "listen-sockets",
    "limits",
    "bus",
    "routes",
    "cors",
    "metrics",
    "access-log",
    "tls",
]


SOURCES = {"flag", "env", "default", "socket"}

# Apps, and whether each has a producer (a handler of its own) and an app-defined check.
APPS = {"host_check": {"producer": True, "check": True, "max_threads": 0},
        "notes": {"producer": False, "check": True, "max_threads": 0},
        "one_handler": {"producer": False, "check": False, "max_threads": 1}}


def _nofile(n):
    def lower():
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

    return lower


def row(name, code, args=(), env=None, sockets=("tcp",), app="host_check", first=None,
        fails=None, cfg=None, loops=None, pool=0, nofile=None, watchdog=None):
    """One configuration. code: the exit both ways. first: the check named (78 by a check).
    fails: every failing check (default: [first]). cfg: {knob: (value, source)} the doctor
    must report. loops/pool: the topology (loops default: cfg's threads, else 1). nofile: a
    RLIMIT_NOFILE (soft = hard) to run under."""
    return {
        "name": name,
        "code": code,
        "args": [str(a) for a in args],
        "env": dict(env or {}),
        "sockets": list(sockets),
        "app": app,
        "first": first,
        "fails": fails if fails is not None else ([first] if first else []),
        "cfg": dict(cfg or {}),
        "loops": loops,
        "pool": pool,
        "nofile": nofile,
        "watchdog": watchdog,
    }


def run_doctor(r):
    """Run `--doctor ARGS` with the row's sockets and environment. Returns (rc, JSON object,
    human lines, the Server). The doctor takes no connection and sends no notification."""
    preexec = _nofile(r["nofile"]) if r["nofile"] else None
    with Server(r["app"], args=["--doctor", *r["args"]], env=r["env"], sockets=r["sockets"],
                preexec_fn=preexec, capture_stdout=True) as s:
        c = s.connect() if s.tcp_listener() is not None else None
        if c is not None:
            c.request("GET", "/health")
        t0 = time.monotonic()
        rc = s.wait_exit(10)
        took = time.monotonic() - t0
        what = f"{r['name']}: doctor"
        out = s.stdout_text()
        lines = out.rstrip("\n").split("\n")
        try:
            obj = json.loads(lines[-1])
        except ValueError as e:
            raise AssertionError(f"{what}: the last line is not JSON ({e}):\n{out}\nstderr:\n"
                                 f"{s.log_text()}")
        check(isinstance(obj, dict), f"{what}: the last line is not an object: {lines[-1]!r}")
        check(len(lines) >= 5, f"{what}: no human lines before the JSON:\n{out}")
        for ln in lines[:-1]:
            check(not ln.startswith("{"), f"{what}: a JSON line before the last: {ln!r}")
        eq(s.notify_lines(), [], f"{what}: datagrams sent to NOTIFY_SOCKET")
        check(not any("Event loop started" in ln for ln in s.log_lines()),
              f"{what}: a loop started:\n{s.log_text()}")
        check(took < 2.0, f"{what}: took {took:.2f}s")
        if c is not None:
            s.expect_in_backlog(c, 0.1, "the doctor's connection")
        return rc, obj, lines[:-1], s


def run_serving(r):
    """Serve ARGS: wait for READY=1 or the exit. Serving is stopped with SIGTERM (its code is
    then 0 when the drain goes well). Returns (code, refusal lines)."""
    preexec = _nofile(r["nofile"]) if r["nofile"] else None
    with Server(r["app"], args=r["args"], env=r["env"], sockets=r["sockets"],
                preexec_fn=preexec) as s:
        got = s.wait_ready_or_exit(15)
        if got == "ready":
            if s.tcp_listener() is not None:
                resp = s.connect().get("/" if r["app"] == "notes" else "/health")
                check(resp.status in (200, 401, 404), f"{r['name']}: serving answered {resp!r}")
            code = s.stop()
        else:
            code = got
            check("READY=1" not in s.notify_lines(), f"{r['name']}: READY=1 and exit {code}")
        return code, [ln for ln in s.log_lines() if ln.startswith("m0: ")]


def check_json(r, rc, obj, human):
    what = f"{r['name']}: doctor JSON"
    meta = APPS[r["app"]]
    for key in ("config", "topology", "app_limits", "sockets", "watchdog", "capabilities",
                "checks", "exit"):
        check(key in obj, f"{what}: no {key!r} in {sorted(obj)}")
    eq(obj["exit"], rc, f"{what}: exit vs the doctor's exit status")

    # config: every knob, each with its value and where it came from.
    cfg = obj["config"]
    check(isinstance(cfg, dict), f"{what}: config is {cfg!r}")
    for knob, entry in cfg.items():
        check(isinstance(entry, dict) and isinstance(entry.get("value"), str),
              f"{what}: config[{knob!r}] has no string value: {entry!r}")
        check(entry.get("source") in SOURCES, f"{what}: config[{knob!r}] source {entry!r}")
    for knob, var, _ in KNOBS:
        check(knob in cfg, f"{what}: config has no {knob!r}")
        eq(cfg[knob].get("env"), var, f"{what}: config[{knob!r}].env")
    passed = bool(r["sockets"])
    for knob in ("host", "port"):
        if passed:
            eq(cfg[knob]["source"], "socket", f"{what}: config[{knob!r}].source with a socket")
        else:
            check(cfg[knob]["source"] != "socket", f"{what}: {knob} from a socket, none passed")
    for knob, (value, source) in r["cfg"].items():
        eq((cfg[knob]["value"], cfg[knob]["source"]), (value, source), f"{what}: config[{knob!r}]")

    # topology: loops, pool threads, handlers (one per loop and pool thread, and the producer's).
    loops = r["loops"]
    if loops is None:
        loops = int(r["cfg"]["threads"][0]) if "threads" in r["cfg"] else 1
    pool = loops * r["pool"]
    topo = obj["topology"]
    eq(topo.get("loops"), loops, f"{what}: topology.loops")
    eq(topo.get("pool_threads"), pool, f"{what}: topology.pool_threads")
    eq(topo.get("handlers"), loops + pool + (1 if meta["producer"] else 0),
       f"{what}: topology.handlers")

    eq(obj["app_limits"].get("max_threads"), meta["max_threads"], f"{what}: app_limits")

    socks = obj["sockets"]
    eq(socks.get("passed"), passed, f"{what}: sockets.passed")
    lst = socks.get("list")
    eq(len(lst), len(r["sockets"]), f"{what}: sockets.list {lst!r}")
    for i, spec in enumerate(r["sockets"]):
        eq(lst[i].get("fd"), 3 + i, f"{what}: sockets.list[{i}].fd")
        name = spec if isinstance(spec, str) else spec[1]
        eq(lst[i].get("name"), name, f"{what}: sockets.list[{i}].name")

    eq(obj["watchdog"].get("usec"), r["watchdog"], f"{what}: watchdog.usec")
    check(isinstance(obj["capabilities"], dict) and obj["capabilities"],
          f"{what}: capabilities {obj['capabilities']!r}")

    # checks: every one, in SPEC order, each {name, ok, detail, fix}.
    checks = obj["checks"]
    names = [c.get("name") for c in checks]
    eq(names, HOST_CHECKS + (["application"] if meta["check"] else []), f"{what}: check names")
    for c in checks:
        eq(sorted(c), ["detail", "fix", "name", "ok"], f"{what}: keys of check {c.get('name')}")
        check(isinstance(c["ok"], bool), f"{what}: {c['name']}.ok is {c['ok']!r}")
        check(isinstance(c["detail"], str) and c["detail"], f"{what}: {c['name']} has no detail")
        check(isinstance(c["fix"], str), f"{what}: {c['name']}.fix is {c['fix']!r}")
        if not c["ok"]:
            check(c["fix"], f"{what}: failing {c['name']} gives no fix")
    eq([c["name"] for c in checks if not c["ok"]], r["fails"], f"{what}: failing checks")
    human_text = "\n".join(human)
    for n in names:
        check(n in human_text, f"{what}: the human lines do not mention check {n}")
    return checks


def run_table(rows):
    failures = []
    for r in rows:
        try:
            d_rc, obj, human, _ = run_doctor(r)
            s_rc, refusals = run_serving(r)
            eq((d_rc, s_rc), (r["code"], r["code"]), f"{r['name']}: (doctor, serving) exit codes")
            checks = check_json(r, d_rc, obj, human)
            if r["first"]:
                # One list of checks (R2): serving names what the doctor reports first.
                c = [c for c in checks if c["name"] == r["first"]][0]
                eq(refusals, [f"m0: {c['name']}: {c['detail']} ({c['fix']})"],
                   f"{r['name']}: serving's refusal vs the doctor's first failing check")
            else:
                eq(refusals, [], f"{r['name']}: refusal lines while serving")
        except AssertionError as e:
            failures.append(f"{r['name']}: {str(e).splitlines()[0]}")
    if failures:
        raise AssertionError(f"{len(failures)} of {len(rows)} rows failed:\n" + "\n".join(failures))


# ---- the table, by topic ----


def test_D1_table_threads():
    n = str(compute_threads_default())
    run_table([
        row("defaults", 0, cfg={
            "threads": ("1", "default"), "blocking-threads": ("0", "default"),
            "workers": ("1", "default"), "access-log": ("off", "default"),
            "drain-timeout-ms": ("5000", "default"), "max-connections": ("10000", "default")}),
        row("--threads 2", 0, args=["--threads", "2"], cfg={"threads": ("2", "flag")}),
        row("M0_THREADS=2", 0, env={"M0_THREADS": 2}, cfg={"threads": ("2", "env")}),
        row("--threads 3 over M0_THREADS=2", 0, args=["--threads", "3"],
            env={"M0_THREADS": 2}, cfg={"threads": ("3", "flag")}),
        row("--threads auto", 0, args=["--threads", "auto"], cfg={"threads": (n, "flag")}),
        row("M0_THREADS=auto", 0, env={"M0_THREADS": "auto"}, cfg={"threads": (n, "env")}),
        row("M0_THREADS=0", 78, env={"M0_THREADS": 0}, first="threads-count",
            cfg={"threads": ("0", "env")}, loops=0),
        row("--threads=0", 78, args=["--threads=0"], first="threads-count",
            cfg={"threads": ("0", "flag")}, loops=0),
    ])


def test_D1_table_workers_and_pool():
    run_table([
        row("M0_WORKERS=2", 78, env={"M0_WORKERS": 2}, first="workers",
            cfg={"workers": ("2", "env")}),
        row("M0_WORKERS=1", 0, env={"M0_WORKERS": 1}, cfg={"workers": ("1", "env")}),
        row("M0_THREADS=0 and M0_WORKERS=2", 78, env={"M0_THREADS": 0, "M0_WORKERS": 2},
            first="threads-count", fails=["threads-count", "workers"], loops=0),
        row("M0_BLOCKING_THREADS=2", 0, env={"M0_BLOCKING_THREADS": 2}, pool=2,
            cfg={"blocking-threads": ("2", "env")}),
        row("--threads 2 --blocking-threads=3", 0, args=["--threads", "2", "--blocking-threads=3"],
            pool=3, cfg={"threads": ("2", "flag"), "blocking-threads": ("3", "flag")}),
    ])


def test_D1_table_sockets():
    port = free_port()
    port2 = free_port()
    run_table([
        row("passed Unix socket", 0, sockets=["unix"]),
        row("passed TCP and Unix sockets", 0, sockets=[("tcp", "web"), ("unix", "local")]),
        row("passed TCP socket and --port", 0, args=["--port", "1"]),
        row("passed UDP socket", 78, sockets=[("udp", "dgram")], first="listen-sockets"),
        row("passed TCP socket never listening", 78, sockets=[("tcp-unlistened", "idle")],
            first="listen-sockets"),
        row("passed TCP and UDP sockets", 78, sockets=[("tcp", "web"), ("udp", "dgram")],
            first="listen-sockets"),
        row("no socket, --port", 0, sockets=[], args=["--port", port],
            cfg={"port": (str(port), "flag"), "host": ("127.0.0.1", "default")}),
        row("no socket, M0_HOST and M0_PORT", 0, sockets=[],
            env={"M0_HOST": "127.0.0.1", "M0_PORT": port2},
            cfg={"port": (str(port2), "env"), "host": ("127.0.0.1", "env")}),
        row("no socket, M0_HOST that does not resolve", 78, sockets=[],
            env={"M0_HOST": "no-such-host.invalid"}, first="listen-sockets",
            cfg={"host": ("no-such-host.invalid", "env")}),
        row("no socket, --host no address of this machine", 78, sockets=[],
            args=["--host", "192.0.2.1"], first="listen-sockets",
            cfg={"host": ("192.0.2.1", "flag")}),
    ])


def test_D1_table_limits_logging_watchdog():
    run_table([
        row("M0_ACCESS_LOG=on", 0, env={"M0_ACCESS_LOG": "on"}, cfg={"access-log": ("on", "env")}),
        row("--access-log=on over M0_ACCESS_LOG=off", 0, args=["--access-log=on"],
            env={"M0_ACCESS_LOG": "off"}, cfg={"access-log": ("on", "flag")}),
        row("RLIMIT_NOFILE 1024", 78, nofile=1024, first="limits"),
        row("RLIMIT_NOFILE 1024, --max-connections 500", 0, nofile=1024,
            args=["--max-connections", "500"], cfg={"max-connections": ("500", "flag")}),
        row("RLIMIT_NOFILE 1024, M0_MAX_CONNECTIONS=500", 0, nofile=1024,
            env={"M0_MAX_CONNECTIONS": 500}, cfg={"max-connections": ("500", "env")}),
        row("WATCHDOG_USEC=4000000", 0, env={"WATCHDOG_USEC": 4000000}, watchdog=4000000),
        row("M0_DRAIN_TIMEOUT_MS=100, M0_SSE_HEARTBEAT_MS=0", 0,
            env={"M0_DRAIN_TIMEOUT_MS": 100, "M0_SSE_HEARTBEAT_MS": 0},
            cfg={"drain-timeout-ms": ("100", "env"), "sse-heartbeat-ms": ("0", "env")}),
    ])


def test_D1_table_application():
    run_table([
        row("M0_HOSTCHECK_PERIOD_MS=abc", 78, env={"M0_HOSTCHECK_PERIOD_MS": "abc"},
            first="application"),
        row("M0_HOSTCHECK_PERIOD_MS=250", 0, env={"M0_HOSTCHECK_PERIOD_MS": 250}),
        row("M0_WORKERS=2 and M0_HOSTCHECK_STEP_COST_MS=-1", 78,
            env={"M0_WORKERS": 2, "M0_HOSTCHECK_STEP_COST_MS": -1}, first="workers",
            fails=["workers", "application"]),
    ])


def _built(app):
    if os.access(os.path.join(build_dir(), "apps", app), os.X_OK):
        return True
    print(f"SKIP: no {app} app in {build_dir()}/apps (not built)", flush=True)
    return False


def test_D1_table_max_threads_1():
    """one_handler declares max_threads 1 (R3): a second loop or a pool thread is refused."""
    if not _built("one_handler"):
        return
    run_table([
        row("one_handler", 0, app="one_handler"),
        row("one_handler, M0_THREADS=2", 78, app="one_handler", env={"M0_THREADS": 2},
            first="threads-vs-application", cfg={"threads": ("2", "env")}),
        row("one_handler, --blocking-threads 1", 78, app="one_handler",
            args=["--blocking-threads", "1"], pool=1,
            first="blocking-vs-application", cfg={"blocking-threads": ("1", "flag")}),
    ])


def test_D1_table_notes():
    """notes has an app check of its own and no max_threads (A4): loops and pool threads as
    asked. Skipped when the build has no notes app."""
    if not _built("notes"):
        return
    with tempfile.TemporaryDirectory(prefix="m0test-notes-") as tmp:
        env = {"M0_NOTES_ADMIN_HASH": make_hash("correct horse"), "M0_NOTES_DIR": tmp}
        run_table([
            row("notes", 0, app="notes", env=env),
            row("notes, M0_THREADS=2, --blocking-threads 1", 0, app="notes",
                env={**env, "M0_THREADS": 2}, args=["--blocking-threads", "1"], pool=1,
                cfg={"threads": ("2", "env"), "blocking-threads": ("1", "flag")}),
            row("notes without M0_NOTES_ADMIN_HASH", 78, app="notes",
                env={k: v for k, v in env.items() if k != "M0_NOTES_ADMIN_HASH"},
                first="application"),
        ])


# ---- what the doctor does not do ----


def test_D1_doctor_binds_nothing():
    """Given a port this test already listens on (and no passed socket), the doctor still
    exits 0: it never tried to bind it. Serving the same would be refused."""
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        r = row("busy --port", 0, sockets=[], args=["--port", port],
                cfg={"port": (str(port), "flag")})
        rc, obj, human, _ = run_doctor(r)
        eq(rc, 0, "doctor exit status with a port in use")
        check_json(r, rc, obj, human)
        ls = [c for c in obj["checks"] if c["name"] == "listen-sockets"][0]
        check(f"127.0.0.1:{port}" in ls["detail"], f"listen-sockets detail {ls['detail']!r}")
        # The port is still this test's alone: a client reaches our listener.
        c = socket.create_connection(("127.0.0.1", port), timeout=2)
        busy.settimeout(2)
        peer, _ = busy.accept()
        peer.close()
        c.close()
    finally:
        busy.close()
    # A free port given to the doctor is free while and after it runs.
    port = free_port()
    r = row("free --port", 0, sockets=[], args=["--port", port])
    eq(run_doctor(r)[0], 0, "doctor exit status")
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.close()


def test_D1_doctor_builds_nothing():
    """Every make of host_check sleeps 3 s: the doctor (2 loops, a pool of 2, the producer)
    still returns at once."""
    r = row("make sleeping 3 s", 0, args=["--threads", "2", "--blocking-threads", "2"],
            env={"M0_HOSTCHECK_MAKE_DELAY_MS": 3000}, pool=2,
            cfg={"threads": ("2", "flag"), "blocking-threads": ("2", "flag")})
    t0 = time.monotonic()
    rc, obj, human, _ = run_doctor(r)
    took = time.monotonic() - t0
    eq(rc, 0, "doctor exit status")
    check(took < 1.5, f"the doctor took {took:.2f}s: it built a handler")
    check_json(r, rc, obj, human)


def test_D1_passed_socket_reports_its_address():
    """With one passed TCP socket, the doctor's host and port are the socket's (source
    "socket"), not the defaults nobody will bind."""
    r = row("one passed TCP socket", 0)
    rc, obj, human, s = run_doctor(r)
    check_json(r, rc, obj, human)
    eq(obj["sockets"]["list"][0]["address"], f"127.0.0.1:{s.port}", "sockets.list[0].address")
    eq((obj["config"]["host"]["value"], obj["config"]["host"]["source"]), ("127.0.0.1", "socket"),
       "config.host")
    eq((obj["config"]["port"]["value"], obj["config"]["port"]["source"]), (str(s.port), "socket"),
       "config.port")


def test_D1_C4_unparsable_variable_reported_by_the_doctor():
    """A variable that does not parse refuses serving (78, C4); the doctor, asked about the
    same configuration, exits 78 too and still ends with its JSON object naming it."""
    r = row("M0_THREADS=abc", 78, env={"M0_THREADS": "abc"})
    s_rc, refusals = run_serving(r)
    eq(s_rc, 78, "serving exit status")
    eq(len(refusals), 1, f"serving's refusal lines {refusals!r}")
    with Server("host_check", args=["--doctor"], env={"M0_THREADS": "abc"},
                capture_stdout=True) as s:
        rc = s.wait_exit(10)
        out = s.stdout_text()
        log = s.log_text()
    eq(rc, 78, "doctor exit status")
    lines = out.rstrip("\n").split("\n")
    try:
        obj = json.loads(lines[-1])
    except ValueError:
        raise AssertionError(f"no JSON last line; stdout {out!r}; stderr:\n{log}")
    eq(obj.get("exit"), 78, "exit in the JSON")
    text = json.dumps(obj)
    check("M0_THREADS" in text and "abc" in text, f"the JSON names no M0_THREADS='abc': {text}")


# ---- C1: precedence and both flag forms, as the doctor reports them ----


def _doctor_cfg(args=(), env=None):
    r = row("cfg", 0, args=args, env=env)
    rc, obj, human, _ = run_doctor(r)
    eq(rc, 0, f"doctor exit status for {args} {env}")
    return {k: (v["value"], v["source"]) for k, v in obj["config"].items()}


def test_C1_flag_beats_env_beats_default():
    knobs = [("threads", "M0_THREADS", "1", "2", "3"),
             ("drain-timeout-ms", "M0_DRAIN_TIMEOUT_MS", "5000", "700", "900"),
             ("access-log", "M0_ACCESS_LOG", "off", "on", "off"),
             ("max-keepalive-requests", "M0_MAX_KEEPALIVE_REQUESTS", "1000", "0", "7"),
             ("idle-timeout-ms", "M0_IDLE_TIMEOUT_MS", "60000", "1500", "2500")]
    base = _doctor_cfg()
    env = {var: e for _, var, _, e, _ in knobs}
    with_env = _doctor_cfg(env=env)
    args = [a for k, _, _, _, f in knobs for a in (f"--{k}", f)]
    with_both = _doctor_cfg(args=args, env=env)
    for knob, _, default, e, f in knobs:
        eq(base[knob], (default, "default"), f"{knob} with neither")
        eq(with_env[knob], (e, "env"), f"{knob} with its variable")
        eq(with_both[knob], (f, "flag"), f"{knob} with its variable and its flag")
    # Knobs nobody set stay defaults in all three.
    for cfg in (base, with_env, with_both):
        eq(cfg["max-head-bytes"], ("32768", "default"), "an untouched knob")


def test_C1_both_flag_forms():
    for k, v in [("drain-timeout-ms", "700"), ("blocking-threads", "2"), ("access-log", "on"),
                 ("max-connections", "1234")]:
        spaced = _doctor_cfg(args=[f"--{k}", v])
        joined = _doctor_cfg(args=[f"--{k}={v}"])
        eq(spaced[k], (v, "flag"), f"--{k} {v}")
        eq(joined[k], (v, "flag"), f"--{k}={v}")
        # Everything else alike (host and port are each run's own passed socket).
        for cfg in (spaced, joined):
            del cfg["host"], cfg["port"]
        eq(spaced, joined, f"the rest of the configuration of --{k} {v} vs --{k}={v}")


# ---- the JSON line for every input; the doctor and serving agree (D1, D47) ----


def _doctor_raw(env, sockets=("tcp",), watchdog_pid_self=False):
    """Run --doctor; returns (exit, the last line's object, the last line's bytes). The line
    must be valid UTF-8 and valid JSON, whatever bytes the environment held."""
    with Server("host_check", args=["--doctor"], env=env, sockets=sockets,
                watchdog_pid_self=watchdog_pid_self, capture_stdout=True) as s:
        rc = s.wait_exit(10)
        raw = s.out.rstrip(b"\n").split(b"\n")[-1]
        log = s.log_text()
    try:
        obj = json.loads(raw.decode("utf-8"))
    except ValueError as e:
        raise AssertionError(f"the last line is not UTF-8 JSON ({e}): {raw!r}; stderr:\n{log}")
    check(isinstance(obj, dict), f"the last line is not an object: {raw!r}")
    eq(obj.get("exit"), rc, "exit in the JSON vs the doctor's exit status")
    return rc, obj, raw


def _serve_watchdog(env, watchdog_pid_self=False):
    """Serve with a 200 ms watchdog environment for 0.6 s: (exit, WATCHDOG=1 pings seen)."""
    with Server("host_check", env=env, watchdog_pid_self=watchdog_pid_self) as s:
        got = s.wait_ready_or_exit(10)
        check(got == "ready", f"serving: {got!r}, log:\n{s.log_text()}")
        time.sleep(0.6)
        pings = s.notify_lines().count("WATCHDOG=1")
        return s.stop(), pings


def test_D1_doctor_watchdog_is_what_serving_uses():
    """WATCHDOG_USEC is read as sd_watchdog_enabled() reads it, WATCHDOG_PID honoured: a value
    that does not parse, one that would inject a JSON member, 0, and another process's
    watchdog are all no watchdog (null), as serving has none (it never pings); the doctor's
    JSON stays one valid object."""
    other = str(os.getpid())
    cases = [
        ("abc", {"WATCHDOG_USEC": "abc"}, False, None,
         "off: sd_watchdog_enabled() refuses WATCHDOG_USEC='abc' (Invalid argument)"),
        ('1,"x":2', {"WATCHDOG_USEC": '1,"x":2'}, False, None,
         "off: sd_watchdog_enabled() refuses WATCHDOG_USEC='1,\"x\":2' (Invalid argument)"),
        ("0", {"WATCHDOG_USEC": "0"}, False, None,
         "off: sd_watchdog_enabled() refuses WATCHDOG_USEC='0' (Invalid argument)"),
        ("WATCHDOG_PID that is no pid", {"WATCHDOG_USEC": 200000, "WATCHDOG_PID": "x"}, False,
         None, "off: sd_watchdog_enabled() refuses WATCHDOG_USEC='200000', WATCHDOG_PID='x' "
         "(Invalid argument)"),
        ("another process's", {"WATCHDOG_USEC": 200000, "WATCHDOG_PID": other}, False, None,
         f"off: WATCHDOG_PID={other} is another process"),
        ("this process's", {"WATCHDOG_USEC": 200000}, True, 200000, "on: 200000 us"),
        ("no WATCHDOG_PID", {"WATCHDOG_USEC": 200000}, False, 200000, "on: 200000 us"),
    ]
    failures = []
    for name, env, self_pid, usec, detail in cases:
        try:
            rc, obj, raw = _doctor_raw(env, watchdog_pid_self=self_pid)
            eq(rc, 0, "doctor exit status")
            eq(obj["watchdog"], {"usec": usec, "detail": detail}, "watchdog")
            eq(sorted(obj), ["app", "app_limits", "capabilities", "checks", "config", "cors",
                             "exit", "fd_store", "metrics", "routes", "sockets", "tls",
                             "topology", "version", "watchdog"],
               "members of the JSON object")
            s_rc, pings = _serve_watchdog(env, watchdog_pid_self=self_pid)
            eq(s_rc, rc, "serving's exit status vs the doctor's")
            check((pings > 0) == (usec is not None),
                  f"serving sent {pings} WATCHDOG=1 where the doctor says usec {usec}")
        except AssertionError as e:
            failures.append(f"{name}: {str(e).splitlines()[0]}")
    if failures:
        raise AssertionError(f"{len(failures)} of {len(cases)} cases:\n" + "\n".join(failures))


def _gai_error(host, port):
    """What getaddrinfo() (the same libc as the host's) answers for host:port, as serving asks."""
    try:
        socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0,
                           socket.AI_PASSIVE | socket.AI_NUMERICSERV)
    except socket.gaierror as e:
        return e.strerror
    raise AssertionError(f"{host!r} resolves here: the test needs a name that does not")


def test_D1_doctor_and_serving_refuse_the_same_host():
    """M0_HOST that does not resolve, that holds bytes that are not UTF-8, or that names no
    address of this machine is a failed listen-sockets check for both (R2): the doctor exits 78
    with valid UTF-8 JSON naming it, and serving refuses with the same finding."""
    port = free_port()
    fix = "set --host/--port or M0_HOST/M0_PORT"
    not_utf8 = b"\xff\xfe"
    cases = [
        ("no-such-host.invalid", "no-such-host.invalid",
         f"cannot resolve --host (M0_HOST) 'no-such-host.invalid': "
         f"{_gai_error('no-such-host.invalid', port)}"),
        (not_utf8, "\ufffd\ufffd",
         "cannot resolve --host (M0_HOST) '\ufffd\ufffd': " + _gai_error(not_utf8, port)),
        ("192.0.2.1", "192.0.2.1",
         f"cannot listen on 192.0.2.1:{port}: Cannot assign requested address"),
    ]
    failures = []
    for host, shown, detail in cases:
        try:
            env = {"M0_HOST": host, "M0_PORT": port}
            rc, obj, raw = _doctor_raw(env, sockets=[])
            eq(rc, 78, "doctor exit status")
            eq((obj["config"]["host"]["value"], obj["config"]["host"]["source"]), (shown, "env"),
               "config.host")
            failed = [c for c in obj["checks"] if not c["ok"]]
            eq(failed, [{"name": "listen-sockets", "ok": False, "detail": detail, "fix": fix}],
               "the failed checks")
            s_rc, refusals = run_serving(row(str(host), 78, sockets=[], env=env))
            eq(s_rc, 78, "serving's exit status")
            eq(refusals, [f"m0: listen-sockets: {detail} ({fix})"], "serving's refusal")
        except AssertionError as e:
            failures.append(f"{host!r}: {str(e).splitlines()[0]}")
    if failures:
        raise AssertionError(f"{len(failures)} of {len(cases)} hosts:\n" + "\n".join(failures))
