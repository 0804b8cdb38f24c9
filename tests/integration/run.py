#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Run the integration tests: every test_* function of every tests/integration/test_*.py,
optionally only those whose "module.name" contains one of the arguments. Each test has a
bound (M0_TEST_TIMEOUT seconds, default 60, or the function's `timeout` attribute); the last line is "integration: N passed, N failed"
and the exit status is 0 only when none failed. Binaries come from $M0_BUILD/apps/ (default:
build/ at the top of the repository)."""

import importlib.util
import inspect
import os
import signal
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import m0test  # noqa: E402


class TestTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise TestTimeout(f"test ran past its {TIMEOUT}s bound")


TIMEOUT = int(os.environ.get("M0_TEST_TIMEOUT", "60"))


def discover(filters):
    tests = []
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
            tests.append((full, getattr(mod, n)))
    return tests


def main(argv):
    filters = argv[1:]
    signal.signal(signal.SIGALRM, _alarm)
    passed = failed = 0
    try:
        tests = discover(filters)
    except Exception:
        traceback.print_exc()
        print("integration: 0 passed, 1 failed", flush=True)
        return 1
    t_all = time.monotonic()
    for full, fn in tests:
        t0 = time.monotonic()
        err = None
        signal.alarm(getattr(fn, "timeout", TIMEOUT))  # a test may set a longer bound
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 — a test's failure of any kind is reported
            if isinstance(e, KeyboardInterrupt):
                signal.alarm(0)
                raise
            err = e
            tb = traceback.format_exc()
        finally:
            signal.alarm(0)
            left = m0test.reap_all()
        dt = time.monotonic() - t0
        if err is None and left:
            err = AssertionError(f"{left} server(s) left running")
            tb = ""
        if err is None:
            passed += 1
            print(f"PASS {full} ({dt:.2f}s)", flush=True)
        else:
            failed += 1
            reason = str(err).split("\n")[0] or type(err).__name__
            print(f"FAIL {full}: {type(err).__name__}: {reason} ({dt:.2f}s)", flush=True)
            for line in tb.rstrip("\n").split("\n"):
                print("    " + line, flush=True)
    print(f"# {len(tests)} tests in {time.monotonic() - t_all:.1f}s", flush=True)
    print(f"integration: {passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
