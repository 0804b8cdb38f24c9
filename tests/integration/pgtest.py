# SPDX-License-Identifier: MIT
"""pgtest: a real PostgreSQL for a test (SPEC G7) — Debian's server binaries, a copy of the one
cluster a run makes (`initdb` once, template_data()) in a temporary directory owned by the
unprivileged `postgres` user (the server refuses root),
listening on no TCP address, only on a Unix socket in that directory — and the bus's test
driver (tests/pg/pgbus-drive) run against it. Standard library only (Python 3.11, Debian 12).

    with Postgres() as pg:            # started; stopped and removed at the end, whatever happens
        pg.sql("SELECT 1")            # psql as a subprocess: rows as lists of strings
        with Driver(pg.uri, name="d1") as d:
            d.send("pub room:1 msg hello")
            d.wait(r"^E 1 room:1 msg hello$")
        pg.terminate("m0/d1/publish")  # pg_terminate_backend() by application_name
        pg.restart()                   # a database restart
        pg.stop(); ...; pg.start()     # an outage
Every server and driver left running is stopped by m0test.reap_all() after each test."""

import atexit
import fcntl
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import threading
import time

import m0test
from m0test import HarnessError

PG_USER = "postgres"


def pg_bindir():
    """Where initdb and pg_ctl are: `pg_config --bindir`, else Debian's path for 15."""
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=10)
        d = out.stdout.strip()
        if out.returncode == 0 and os.access(os.path.join(d, "initdb"), os.X_OK):
            return d
    except OSError:
        pass
    d = "/usr/lib/postgresql/15/bin"
    if os.access(os.path.join(d, "initdb"), os.X_OK):
        return d
    raise HarnessError("no PostgreSQL server binaries (contrib/deps installs Debian's postgresql)")


def _as_postgres():
    """The command prefix that runs a server binary as the `postgres` user: runuser when we are
    root (the tests' usual case), nothing when we already are someone else."""
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(PG_USER)
        except KeyError:
            raise HarnessError("no `postgres` user (Debian's postgresql package creates it)")
        return ["runuser", "-u", PG_USER, "--"]
    return []


_own_template = None


def template_data(bindir):
    """The data directory of the one cluster a run makes (`initdb` once; SPEC LY6): each
    Postgres copies it (cp -a, as its owner) rather than running initdb again. It lives in
    $M0_PG_TEMPLATE (run.py makes that directory, and removes it at the end), made by the first
    test that needs it under a lock, so tests running at once wait for one initdb; without
    $M0_PG_TEMPLATE, in a directory of this process's, removed when it exits."""
    global _own_template
    top = os.environ.get("M0_PG_TEMPLATE")
    if not top:
        if _own_template is None:
            _own_template = tempfile.mkdtemp(prefix="m0pgt-",
                                             dir="/tmp" if os.geteuid() == 0 else None)
            atexit.register(shutil.rmtree, _own_template, True)
        top = _own_template
    data = os.path.join(top, "data")
    with open(os.path.join(top, "lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(data, "PG_VERSION")):
            return data
        if os.geteuid() == 0:
            pw = pwd.getpwnam(PG_USER)
            os.chown(top, pw.pw_uid, pw.pw_gid)
        os.chmod(top, 0o755)
        shutil.rmtree(data, ignore_errors=True)  # a half-made one, from a test killed in initdb
        p = subprocess.run(
            _as_postgres() + [os.path.join(bindir, "initdb"), "-D", data, "-U", PG_USER, "-A",
                              "trust", "-E", "UTF8", "--locale=C", "--no-sync"],
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            raise HarnessError(f"initdb exited {p.returncode}: {p.stderr.strip()}")
        return data


class Postgres(m0test.Reaped):
    """A PostgreSQL server of its own for one test, on a Unix socket in its directory.

    dbname: the database created for the test; uri: its libpq URI
    (postgresql:///DB?host=DIR&user=postgres). settings: extra postgresql.conf lines."""

    def __init__(self, dbname="m0test", settings=None, start=True):
        self.bindir = pg_bindir()
        self.dbname = dbname
        # Under /tmp when root: the `postgres` user must reach it, whatever $TMPDIR says, and a
        # Unix socket's path must stay short (108 bytes).
        self.dir = tempfile.mkdtemp(prefix="m0pg-", dir="/tmp" if os.geteuid() == 0 else None)
        self.data = os.path.join(self.dir, "data")
        self.logfile = os.path.join(self.dir, "server.log")
        self.running = False
        self.uri = f"postgresql:///{dbname}?host={self.dir}&user={PG_USER}"
        self._reap_later()
        try:
            if os.geteuid() == 0:
                pw = pwd.getpwnam(PG_USER)
                os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            os.chmod(self.dir, 0o755)
            self._run(["cp", "-a", template_data(self.bindir), self.data], timeout=120)
            conf = [
                "listen_addresses = ''",
                f"unix_socket_directories = '{self.dir}'",
                "fsync = off",  # a test's database: durability is not what is tested
                "max_connections = 100",
                "log_min_messages = warning",
            ] + list(settings or [])
            with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
                f.write("\n".join(conf) + "\n")
            if start:
                self.start()
                self.sql(f"CREATE DATABASE {dbname}", db="postgres")
        except BaseException:
            self.cleanup()
            raise

    def _run(self, argv, timeout=60, check=True):
        p = subprocess.run(_as_postgres() + argv, capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        if check and p.returncode != 0:
            raise HarnessError(f"{' '.join(argv)} exited {p.returncode}: {p.stderr.strip()}")
        return p

    def _pg_ctl(self, *args, timeout=60):
        return self._run([os.path.join(self.bindir, "pg_ctl"), "-D", self.data, *args],
                         timeout=timeout)

    def start(self):
        """Start the server and return once it accepts connections (pg_ctl -w waits for that,
        and pg_isready confirms it on the socket)."""
        self._pg_ctl("-l", self.logfile, "-w", "-t", "60", "start", timeout=90)
        self.running = True
        self._run([os.path.join(self.bindir, "pg_isready"), "-q", "-h", self.dir, "-t", "30"],
                  timeout=40)

    def stop(self, mode="fast"):
        """Stop the server (mode: smart, fast, immediate) and wait until it has."""
        if self.running:
            self._pg_ctl("-m", mode, "-w", "-t", "60", "stop", timeout=90)
            self.running = False

    def restart(self, mode="fast"):
        """A database restart: every connection is cut, and the server is back when it returns."""
        self.stop(mode)
        self.start()

    def outage(self, seconds, during=None):
        """Stop the server for `seconds` (from the stop), run during() meanwhile when given,
        then start it again."""
        t0 = time.monotonic()
        self.stop()
        if during:
            during()
        left = seconds - (time.monotonic() - t0)
        if left > 0:
            time.sleep(left)  # the outage's length is what is tested, not a wait for readiness
        self.start()

    def psql_argv(self, db=None):
        return [os.path.join(self.bindir, "psql"), "-X", "-q", "-At", "-F", "|",
                "-v", "ON_ERROR_STOP=1", "-h", self.dir, "-U", PG_USER, "-d", db or self.dbname]

    def sql(self, query, db=None, timeout=60):
        """Run `query` through psql; the rows of its last statement as lists of strings."""
        p = subprocess.run(self.psql_argv(db) + ["-c", query], capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            raise HarnessError(f"psql {query!r} exited {p.returncode}: {p.stderr.strip()}")
        return [line.split("|") for line in p.stdout.splitlines()]

    def value(self, query):
        rows = self.sql(query)
        if len(rows) != 1 or len(rows[0]) != 1:
            raise HarnessError(f"{query!r} gave {rows!r}, not one value")
        return rows[0][0]

    def session(self):
        """A psql of its own, kept open: a transaction or a lock held across statements."""
        return Session(self)

    def terminate(self, application_name):
        """pg_terminate_backend() of every backend with this application_name; how many."""
        return int(self.value(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            f"WHERE application_name = '{application_name}'"))

    def backends(self, prefix="m0/"):
        """The application_names connected now that start with `prefix`, sorted."""
        return sorted(r[0] for r in self.sql(
            "SELECT application_name FROM pg_stat_activity "
            f"WHERE application_name LIKE '{prefix}%'") if r)

    def cleanup(self):
        """Stop the server (immediately: a failed test has no time to lose) and remove it."""
        try:
            if self.running or os.path.exists(os.path.join(self.data, "postmaster.pid")):
                self._run([os.path.join(self.bindir, "pg_ctl"), "-D", self.data, "-m",
                           "immediate", "-w", "-t", "60", "stop"], timeout=90, check=False)
            self.running = False
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
            self._reap_done()


class Session:
    """One psql process reading statements from a pipe: each run() waits for its answer (a
    marker echoed after it), so a test holds a transaction or a lock open as long as it likes."""

    def __init__(self, pg):
        self.proc = subprocess.Popen(pg.psql_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.n = 0

    def run(self, statement, timeout=30):
        """Send `statement` (ending in ;); its output lines, once psql has answered."""
        self.n += 1
        mark = f"--m0-mark-{self.n}--"
        self.proc.stdin.write(f"{statement}\n\\echo {mark}\n")
        self.proc.stdin.flush()
        lines = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise HarnessError(f"psql ended during {statement!r}: {lines!r}")
            line = line.rstrip("\n")
            if line == mark:
                return lines
            lines.append(line)
        raise HarnessError(f"psql did not answer {statement!r} in {timeout}s")

    def send(self, statement):
        """Send `statement` without waiting (it will block on a lock, say)."""
        self.proc.stdin.write(f"{statement}\n")
        self.proc.stdin.flush()

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def driver_path():
    p = os.path.join(m0test.build_dir(), "tests", "pg", "pgbus-drive")
    if not os.access(p, os.X_OK):
        raise HarnessError(f"no executable {p} (make check TESTS= builds it)")
    return p


class Driver:
    """tests/pg/pgbus-drive against one database: commands on its stdin, its lines collected.

    lines: every stdout line; events(): the delivered events as (id, channel, event, data);
    log: its stderr lines (the module's log)."""

    def __init__(self, uri, name="d", args=(), env=None):
        self.name = name
        argv = [driver_path(), "--uri", uri, "--name", name, *[str(a) for a in args]]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=m0test.clean_env(env))
        self.lines = []
        self.log = []
        self.cond = threading.Condition()
        self.eof = False
        self._readers = [threading.Thread(target=self._read, args=(self.proc.stdout, self.lines),
                                          daemon=True),
                         threading.Thread(target=self._read, args=(self.proc.stderr, self.log),
                                          daemon=True)]
        for t in self._readers:
            t.start()
        with m0test._live_lock:
            m0test._live.append(self)

    def _read(self, f, into):
        for raw in f:
            with self.cond:
                into.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            if into is self.lines:
                self.eof = True
            self.cond.notify_all()

    def send(self, line):
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    def _find(self, rx, start, into):
        for i in range(start, len(into)):
            if rx.search(into[i]):
                return i
        return -1

    def wait(self, pattern, timeout=30, start=0, stream="out"):
        """The first line (from index `start`) matching the regex; waits for it."""
        into = self.lines if stream == "out" else self.log
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                i = self._find(rx, start, into)
                if i >= 0:
                    return into[i]
                left = deadline - time.monotonic()
                if left <= 0 or (self.eof and self.proc.poll() is not None):
                    raise HarnessError(
                        f"{self.name}: no line matching {pattern!r} in {timeout}s; last lines:\n"
                        + "\n".join(into[-20:]) + "\nstderr:\n" + "\n".join(self.log[-20:]))
                self.cond.wait(min(left, 0.5))

    def ask(self, command, answer, timeout=60):
        """Send `command` and wait for its answer line (a regex) after what was printed."""
        with self.cond:
            start = len(self.lines)
        self.send(command)
        return self.wait(answer, timeout, start)

    def events(self):
        """Delivered events, in the order printed: (id, channel, event or None, data)."""
        with self.cond:
            lines = list(self.lines)
        return [_event(line) for line in lines if line.startswith("E ")]

    def wait_events(self, n, timeout=60):
        """Wait until `n` events were delivered; returns them."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                k = sum(1 for line in self.lines if line.startswith("E "))
                if k >= n:
                    break
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    raise HarnessError(f"{self.name}: {k} events of {n} in {timeout}s; stderr:\n"
                                       + "\n".join(self.log[-20:]))
                self.cond.wait(min(left, 0.5))
        return self.events()

    def stats(self):
        line = self.ask("stats", r"^T ")
        return {k: int(v) for k, v in (kv.split("=") for kv in line[2:].split())}

    def stats_when_published(self, n, timeout=30):
        """The counts once `n` events count as published. A batch counts once its publishing
        connection has read its COMMIT's answer, and the listening connection can deliver the
        rows before that: a test that waited for the events waits for this too (SPEC G2)."""
        deadline = time.monotonic() + timeout
        st = self.stats()
        while st["published"] < n and time.monotonic() < deadline:
            time.sleep(0.05)
            st = self.stats()
        return st

    def state(self):
        return self.ask("state", r"^S ")[2:]

    def states(self):
        with self.cond:
            return [line[2:] for line in self.lines if line.startswith("S ")]

    def quit(self, flush_ms=0, timeout=30):
        """Stop the driver; its exit status."""
        if self.proc.poll() is None:
            try:
                self.send(f"quit {flush_ms}")
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.cleanup()
        return self.proc.returncode

    def wait_exit(self, timeout=30):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"{self.name} still running after {timeout}s")
        self.cleanup()
        return self.proc.returncode

    def cleanup(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for t in self._readers:
            t.join(5)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass
        with m0test._live_lock:
            if self in m0test._live:
                m0test._live.remove(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.quit()
        return False


def _event(line):
    _, id_, channel, event, data = (line.split(" ", 4) + [""])[:5]
    return (int(id_), channel, None if event == "-" else event, data)
