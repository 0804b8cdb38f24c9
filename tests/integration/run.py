#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Run the integration tests: every test_* function of every tests/integration/test_*.py,
optionally only those whose "module.name" contains one of the arguments.

    run.py [-j N] [FILTER...]

Each test runs in a process of its own (forked from this one once the modules are loaded), so
what a test changes in its process (a resource limit, a signal handler, the servers it leaves)
ends with it. Up to N tests run at once (-j N, else $M0_TEST_JOBS, else twice the CPUs, at most
6: a test mostly waits on its servers). A test marked `serial = True` (heavy CPU measurements,
timing bounds, thousands of descriptors) runs alone, after the others, and also apart from the
tests of any other run on the machine that shares its lock ($M0_TEST_LOCK, default
/tmp/m0-test-turn: contrib/test-all's variants, and its builds). Each test has a bound (M0_TEST_TIMEOUT seconds,
default 60, or the function's `timeout` attribute), counted once it has its turn: past it the test
fails with TestTimeout, and 30 s later its process group is killed. A test's output and its
PASS/FAIL line are printed together when it ends. The last line is "integration: N passed,
N failed" and the exit status is 0 only when none failed. Binaries come from $M0_BUILD/apps/
(default: build/ at the top of the repository).

Every test that needs PostgreSQL copies one cluster made once per run (pgtest, $M0_PG_TEMPLATE);
free_port() gives each concurrent test ports of its own ($M0_TEST_SLOT).

$M0_VARIANT names the build under test (tests/run passes contrib/test-all's label: plain, asan,
tsan). Each runs what it is there to find (SPEC LY6, D235): a test marked `once = True` (a heavy
scenario: a load tool, thousands of connections, kill -9 loops, a browser, a compiler; or one
whose outcome does not depend on how m0 was compiled: the docs, the tree's layout, timing
windows; a module-level `ONCE = True` marks each of its tests) runs in the plain variant and is
skipped under a sanitizer; ThreadSanitizer runs only
the modules that drive the host's threads (a module-level `THREADED = True`). A skipped test is
named on a SKIP line and counted apart; without $M0_VARIANT everything runs."""

import fcntl
import importlib.util
import inspect
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import m0test  # noqa: E402

TIMEOUT = int(os.environ.get("M0_TEST_TIMEOUT", "60"))
# The lock that keeps a serial test alone: every run on the machine that names the same path (the
# default, or contrib/test-all's variants and its builds) shares it.
LOCK = os.environ.get("M0_TEST_LOCK", "/tmp/m0-test-turn")
TURN_WAIT = 900  # seconds a test waits for its turn before it runs regardless
KILL_GRACE = 30  # seconds past a test's bound before its process group is killed


class TestTimeout(Exception):
    pass


def default_jobs():
    env = os.environ.get("M0_TEST_JOBS")
    if env:
        return max(1, int(env))
    return max(1, min(6, 2 * (os.cpu_count() or 1)))


VARIANT = os.environ.get("M0_VARIANT", "")
SANITIZERS = ("asan", "tsan")


def skipped_because(mod, fn):
    """Why this variant does not run the test, or None when it does."""
    if VARIANT in SANITIZERS and (getattr(fn, "once", False) or getattr(mod, "ONCE", False)):
        return "once: runs in the plain variant"
    if VARIANT == "tsan" and not getattr(mod, "THREADED", False):
        return "ThreadSanitizer runs the modules that drive the host's threads"
    return None


def discover(filters):
    """(tests to run, [(name, why skipped)])."""
    tests = []
    skipped = []
    for fn in sorted(os.listdir(HERE)):
        if not (fn.startswith("test_") and fn.endswith(".py")):
            continue
        modname = fn[:-3]
        spec = importlib.util.spec_from_file_location(modname, os.path.join(HERE, fn))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        names = [n for n in vars(mod) if n.startswith("test_") and callable(getattr(mod, n))]
        # Source order: a reader finds the output in the order of the file (a decorated test's
        # line is its function's, not the decorator's).
        names.sort(key=lambda n: inspect.unwrap(getattr(mod, n)).__code__.co_firstlineno)
        for n in names:
            full = f"{modname}.{n}"
            if filters and not any(f in full for f in filters):
                continue
            why = skipped_because(mod, getattr(mod, n))
            if why:
                skipped.append((full, why))
            else:
                tests.append((full, getattr(mod, n)))
    return tests, skipped


def bound(fn):
    return getattr(fn, "timeout", TIMEOUT)  # a test may set a longer bound


def run_one(full, fn):
    """In the test's own process: run it, reap what it left, print its PASS/FAIL line (and
    traceback). The exit status is 0 when it passed."""
    t0 = time.monotonic()
    err = None
    tb = ""

    def alarm(signum, frame):
        raise TestTimeout(f"test ran past its {bound(fn)}s bound")

    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(bound(fn))
    try:
        fn()
    except BaseException as e:  # noqa: BLE001 — a test's failure of any kind is reported
        err = e
        tb = traceback.format_exc()
    finally:
        signal.alarm(0)
        left = m0test.reap_all()
    dt = time.monotonic() - t0
    if err is None and left:
        err = AssertionError(f"{left} server(s) left running")
    if err is None:
        print(f"PASS {full} ({dt:.2f}s)", flush=True)
        return 0
    reason = str(err).split("\n")[0] or type(err).__name__
    print(f"FAIL {full}: {type(err).__name__}: {reason} ({dt:.2f}s)", flush=True)
    for line in tb.rstrip("\n").split("\n") if tb else []:
        print("    " + line, flush=True)
    return 1


def take_turn(serial):
    """Wait for this test's turn, across every run sharing LOCK: a test holds LOCK.lock shared,
    a serial one holds it alone. LOCK.gate makes the serial one's wait end: once it has the gate,
    no other test starts until it has run. The files stay open (and the locks held) until the
    test's process ends. Where the files cannot be opened, tests run without them."""
    try:
        gate = open(LOCK + ".gate", "a")
        main = open(LOCK + ".lock", "a")
    except OSError:
        return None
    deadline = time.monotonic() + TURN_WAIT
    for f, how in ((gate, fcntl.LOCK_EX), (main, fcntl.LOCK_EX if serial else fcntl.LOCK_SH)):
        while True:
            try:
                fcntl.flock(f, how | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:  # a holder that never lets go: run anyway
                    print(f"# no turn in {TURN_WAIT}s ({LOCK}): running anyway", flush=True)
                    return gate, main
                time.sleep(0.05)
    if not serial:
        fcntl.flock(gate, fcntl.LOCK_UN)
    return gate, main


class Running:
    def __init__(self, full, fn, slot, outdir):
        self.full, self.fn, self.slot = full, fn, slot
        self.out = os.path.join(outdir, f"{slot}.out")
        self.t0 = time.monotonic()
        self.t_turn = None  # when the test had its turn (take_turn) and began
        self.killed = False
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the test's process: its own group, its output to its own file
            rc = 1
            try:
                os.setpgid(0, 0)
                fd = os.open(self.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.close(fd)
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.close(null)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                os.environ["M0_TEST_SLOT"] = str(slot)
                held = take_turn(getattr(fn, "serial", False))  # noqa: F841 — held to the end
                open(self.out + ".turn", "w").close()
                rc = run_one(full, fn)
            except BaseException:  # noqa: BLE001
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(rc)
        self.pid = pid
        try:
            os.setpgid(pid, pid)  # also here, so a kill never races the child's own setpgid
        except OSError:
            pass

    def kill(self):
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass
        self.killed = True

    def report(self, status):
        """Print the test's output at once; whether it passed."""
        try:
            with open(self.out, "rb") as f:
                text = f.read().decode("utf-8", "replace")
            os.unlink(self.out)
        except OSError:
            text = ""
        if os.path.exists(self.out + ".turn"):
            os.unlink(self.out + ".turn")
        if text:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        if not ok and (self.killed or f"FAIL {self.full}" not in text):
            dt = time.monotonic() - self.t0
            if self.killed:
                why = f"TestTimeout: killed {KILL_GRACE}s past its {bound(self.fn)}s bound"
            else:
                why = f"its process ended with status {status:#x}"
            print(f"FAIL {self.full}: {why} ({dt:.2f}s)")
        sys.stdout.flush()
        return ok


def run_all(tests, jobs):
    """Run the tests, up to `jobs` at once, then the serial ones one at a time.
    (passed, failed)."""
    pooled = [t for t in tests if not getattr(t[1], "serial", False)]
    serial = [t for t in tests if getattr(t[1], "serial", False)]
    outdir = tempfile.mkdtemp(prefix="m0run-")
    passed = failed = 0
    running = {}  # pid -> Running
    free_slots = list(range(max(jobs, 1)))
    try:
        for batch, width in ((pooled, jobs), (serial, 1)):
            queue = list(batch)
            while queue or running:
                while queue and len(running) < width:
                    full, fn = queue.pop(0)
                    r = Running(full, fn, free_slots.pop(0), outdir)
                    running[r.pid] = r
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    now = time.monotonic()
                    for r in running.values():
                        if r.t_turn is None and os.path.exists(r.out + ".turn"):
                            r.t_turn = now
                        if (not r.killed and r.t_turn is not None
                                and now - r.t_turn > bound(r.fn) + KILL_GRACE):
                            r.kill()
                    time.sleep(0.05)
                    continue
                r = running.pop(pid, None)
                if r is None:
                    continue
                free_slots.append(r.slot)
                if r.report(status):
                    passed += 1
                else:
                    failed += 1
    except KeyboardInterrupt:
        for r in running.values():
            r.kill()
        raise
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    return passed, failed


def main(argv):
    args = argv[1:]
    jobs = None
    filters = []
    while args:
        a = args.pop(0)
        if a == "-j" and args:
            jobs = int(args.pop(0))
        elif a.startswith("-j") and a[2:].isdigit():
            jobs = int(a[2:])
        else:
            filters.append(a)
    jobs = jobs or default_jobs()
    try:
        tests, skipped = discover(filters)
    except Exception:
        traceback.print_exc()
        print("integration: 0 passed, 1 failed", flush=True)
        return 1
    # One PostgreSQL cluster for the whole run: pgtest makes it at the first use, each test
    # that needs a database copies it (SPEC LY6).
    pg_template = os.environ.get("M0_PG_TEMPLATE")
    own_template = None
    if not pg_template:
        own_template = pg_template = tempfile.mkdtemp(
            prefix="m0pgt-", dir="/tmp" if os.geteuid() == 0 else None)
        os.environ["M0_PG_TEMPLATE"] = pg_template
    t_all = time.monotonic()
    try:
        passed, failed = run_all(tests, jobs)
    finally:
        if own_template:
            shutil.rmtree(own_template, ignore_errors=True)
    for full, why in skipped:
        print(f"SKIP {full} ({why})")
    print(f"# {len(tests)} tests in {time.monotonic() - t_all:.1f}s ({jobs} at once)"
          + (f"; {len(skipped)} skipped in the {VARIANT} variant" if skipped else ""), flush=True)
    print(f"integration: {passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
