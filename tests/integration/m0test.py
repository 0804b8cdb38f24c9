# SPDX-License-Identifier: MIT
"""m0test: the integration harness — spawns an app the way systemd would (passed sockets on fds
3.., LISTEN_PID set to the app's own PID, a NOTIFY_SOCKET this harness reads) and talks HTTP/1.1
to it over raw sockets. Standard library only (Python 3.11, Debian 12)."""

import contextlib
import os
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Every server this module started and has not reaped yet; run.py reaps them after each test.
_live = []
_live_lock = threading.Lock()


class HarnessError(AssertionError):
    """The server did not do what the harness waited for (no READY, no exit, no response...)."""


def build_dir():
    """$M0_BUILD (a build tree), default `build` at the top of the repository."""
    b = os.environ.get("M0_BUILD", "build")
    if os.path.isabs(b):
        return b
    if os.path.isdir(b):
        return os.path.abspath(b)
    return os.path.join(REPO, b)


def app_path(app):
    p = os.path.join(build_dir(), "apps", app)
    if not os.access(p, os.X_OK):
        raise HarnessError(f"no executable {p} (set M0_BUILD to a build tree and run make)")
    return p


def clean_env(extra=None):
    """The caller's environment without anything that would change how the host starts.
    A value in `extra` given as bytes is passed as those bytes (not UTF-8, for one)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not (
            k.startswith("M0_")
            or k.startswith("LISTEN_")
            or k in ("NOTIFY_SOCKET", "JOURNAL_STREAM", "WATCHDOG_USEC", "WATCHDOG_PID",
                     "STATE_DIRECTORY", "CREDENTIALS_DIRECTORY")
        )
    }
    # The build tree's PostgreSQL bus module (D210): libm0 looks for it where it is installed.
    env["M0_BUS_PG_MODULE"] = os.path.join(build_dir(), ".libs", "bus-pg.so")
    for k, v in (extra or {}).items():
        env[k] = os.fsdecode(v) if isinstance(v, bytes) else str(v)
    return env


_port_next = None


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now. Under run.py each test running
    at once has a slot ($M0_TEST_SLOT) and takes its ports from a range of 1000 of its own, below
    the kernel's ephemeral range, so two tests never get the same port (SPEC LY6)."""
    global _port_next
    slot = os.environ.get("M0_TEST_SLOT")
    if slot is None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        return port
    base = 20000 + int(slot) % 12 * 1000
    if _port_next is None:
        _port_next = base + os.getpid() % 1000
    for _ in range(1000):
        port = _port_next
        _port_next = base + (port + 1 - base) % 1000
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise HarnessError(f"no free port in {base}..{base + 999}")


def run_app(app, args=(), env=None, timeout=20, preexec_fn=None):
    """Run an app to completion (usage, --help, refusals before any socket). (rc, stdout, stderr).
    preexec_fn: run in the child before the exec (e.g. lowering a resource limit)."""
    p = subprocess.run(
        [app_path(app), *args],
        env=clean_env(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        preexec_fn=preexec_fn,
    )
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


# In the child: move the passed sockets to fds 3.. (sd_listen_fds' SD_LISTEN_FDS_START), set
# LISTEN_PID to this process's PID and exec the app. exec keeps the PID, and the libtool wrapper
# ends in exec too, so LISTEN_PID is the app's own PID when it reads it. WATCHDOG_PID is set the
# same way when the test asks for it (M0TEST_WATCHDOG_PID=self).
_LAUNCH = r"""
import fcntl, os, sys
src = [int(x) for x in os.environ.pop("M0TEST_FDS", "").split(",") if x]
high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 1000) for fd in src]
for fd in src:
    os.close(fd)
for i, fd in enumerate(high):
    os.dup2(fd, 3 + i, inheritable=True)
    os.close(fd)
wd = os.environ.pop("M0TEST_WATCHDOG_PID", "")
env = dict(os.environ)
if src:
    env["LISTEN_PID"] = str(os.getpid())
if wd == "self":
    env["WATCHDOG_PID"] = str(os.getpid())
os.execve(sys.argv[1], sys.argv[1:], env)
"""


class Server:
    """An app under test, started as systemd would start it.

    sockets: a list of socket kinds, each passed on fds 3, 4, ...:
      "tcp"            a TCP listener on 127.0.0.1, port 0
      "unix"           a Unix stream listener in a temporary directory
      "udp"            a bound UDP socket (not a listening stream socket)
      "tcp-unlistened" a TCP socket that never called listen()
    or (kind, name) to choose its LISTEN_FDNAMES entry (default: the kind).
    An empty list passes no socket (the app binds --host:--port itself).
    notify: create the NOTIFY_SOCKET this harness reads.
    preexec_fn: run in the child before the launcher (e.g. lowering a resource limit; the
      launcher moves passed fds through fd 1000, so keep RLIMIT_NOFILE above that).
    capture_stdout: collect the app's stdout (stdout_text()) instead of discarding it.
    extra_fds: (name, fd) pairs passed after the sockets (fds 3 + len(sockets), ...) and named
      in LISTEN_FDNAMES, as systemd passes back what its fd store keeps.
    watchdog_pid_self: set WATCHDOG_PID to the app's own PID (as LISTEN_PID is).
    collect_fds: receive notify datagrams with their SCM_RIGHTS fds; each datagram's fds are
      kept in `notify_fds` as (monotonic time, text, [fd, ...]) until take_notify_fds().
    state_dir: True for a new state directory ($STATE_DIRECTORY, as StateDirectory= gives one:
      ids then start at 1, N3), a path for that one; `state_dir` is its path after.
    """

    def __init__(
        self,
        app,
        env=None,
        args=(),
        sockets=("tcp",),
        notify=True,
        start=True,
        preexec_fn=None,
        capture_stdout=False,
        extra_fds=(),
        watchdog_pid_self=False,
        collect_fds=False,
        state_dir=False,
    ):
        self.extra_fds = [(name, fd) for name, fd in extra_fds]
        self.watchdog_pid_self = watchdog_pid_self
        self.collect_fds = collect_fds
        self.notify_fds = []  # (monotonic time, text, [fd]) when collect_fds
        self.app = app
        self.preexec_fn = preexec_fn
        self.capture_stdout = capture_stdout
        self.out = b""  # the app's stdout, when capture_stdout
        self._out_reader = None
        self.env = dict(env or {})
        self.args = [str(a) for a in args]
        self.tmp = tempfile.mkdtemp(prefix="m0test-")
        self.state_dir = None
        if state_dir:
            self.state_dir = state_dir if isinstance(state_dir, str) else os.path.join(self.tmp,
                                                                                      "state")
            os.makedirs(self.state_dir, exist_ok=True)
            self.env["STATE_DIRECTORY"] = self.state_dir
        self.listeners = []  # (kind, name, socket)
        self.tcp_addr = None
        self.unix_path = None
        self.notify_sock = None
        self.notify_path = None
        self.datagrams = []  # (monotonic time, text), in the order received
        self.log = []  # (monotonic time, line without its newline)
        self._log_cond = threading.Condition()
        self._log_eof = False
        self.proc = None
        self.pidfd = None
        self.t_spawn = None
        self.returncode = None
        self.conns = []
        try:
            for spec in sockets:
                kind, name = (spec, spec) if isinstance(spec, str) else spec
                self.listeners.append((kind, name, self._make_socket(kind)))
            if notify:
                self.notify_path = os.path.join(self.tmp, "notify")
                self.notify_sock = socket.socket(
                    socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC
                )
                self.notify_sock.bind(self.notify_path)
                self.notify_sock.setblocking(False)
            if start:
                self.start()
        except BaseException:
            self.cleanup()
            raise

    # ---- sockets handed to the app ----

    def _make_socket(self, kind):
        if kind == "tcp":
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", 0))
            s.listen(512)
            if self.tcp_addr is None:
                self.tcp_addr = s.getsockname()
            return s
        if kind == "unix":
            path = os.path.join(self.tmp, f"s{len(self.listeners)}.sock")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            s.listen(512)
            if self.unix_path is None:
                self.unix_path = path
            return s
        if kind == "udp":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
            return s
        if kind == "tcp-unlistened":
            return socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        raise ValueError(f"unknown socket kind {kind!r}")

    @property
    def port(self):
        return self.tcp_addr[1]

    @property
    def pid(self):
        return self.proc.pid

    # ---- process ----

    def start(self):
        env = clean_env(self.env)
        fds = [s.fileno() for _, _, s in self.listeners] + [fd for _, fd in self.extra_fds]
        if fds:
            env["LISTEN_FDS"] = str(len(fds))
            env["LISTEN_FDNAMES"] = ":".join(
                [name for _, name, _ in self.listeners] + [name for name, _ in self.extra_fds]
            )
            env["M0TEST_FDS"] = ",".join(str(fd) for fd in fds)
        if self.watchdog_pid_self:
            env["M0TEST_WATCHDOG_PID"] = "self"
        if self.notify_path:
            env["NOTIFY_SOCKET"] = self.notify_path
        self.t_spawn = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _LAUNCH, app_path(self.app), *self.args],
            env=env,
            pass_fds=fds,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if self.capture_stdout else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            close_fds=True,
            preexec_fn=self.preexec_fn,
        )
        try:
            self.pidfd = os.pidfd_open(self.proc.pid)
        except (AttributeError, OSError):
            self.pidfd = None
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        if self.capture_stdout:
            self._out_reader = threading.Thread(target=self._read_stdout, daemon=True)
            self._out_reader.start()
        with _live_lock:
            _live.append(self)
        return self

    def _read_stderr(self):
        f = self.proc.stderr
        for raw in iter(f.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._log_cond:
                self.log.append((time.monotonic(), line))
                self._log_cond.notify_all()
        with self._log_cond:
            self._log_eof = True
            self._log_cond.notify_all()

    def _read_stdout(self):
        for raw in iter(self.proc.stdout.readline, b""):
            with self._log_cond:
                self.out += raw

    def stdout_text(self):
        """What the app wrote on stdout so far (capture_stdout=True)."""
        with self._log_cond:
            return self.out.decode("utf-8", "replace")

    def exited(self):
        return self.proc.poll() is not None

    def _wait_readable(self, fds, timeout):
        """select() on fds plus the process's pidfd. Returns the readable fds ('exit' for the pidfd)."""
        watch = list(fds)
        if self.pidfd is not None:
            watch.append(self.pidfd)
        else:
            timeout = min(timeout, 0.02)  # no pidfd: look at the process between short waits
        r, _, _ = select.select(watch, [], [], max(timeout, 0))
        out = [fd for fd in r if fd != self.pidfd]
        if self.pidfd in r or (self.pidfd is None and self.exited()):
            out.append("exit")
        return out

    def drain_notify(self):
        """Read every datagram already queued on the notify socket. Returns the new ones."""
        new = []
        if self.notify_sock is None:
            return new
        while True:
            try:
                if self.collect_fds:
                    data, fds, _, _ = socket.recv_fds(self.notify_sock, 65536, 16)
                else:
                    data = self.notify_sock.recv(65536)
            except BlockingIOError:
                break
            entry = (time.monotonic(), data.decode("utf-8", "replace"))
            if self.collect_fds:
                for fd in fds:
                    os.set_inheritable(fd, False)
                self.notify_fds.append((entry[0], entry[1], list(fds)))
            self.datagrams.append(entry)
            new.append(entry)
        return new

    def take_notify_fds(self):
        """The (time, text, [fd]) of every datagram received so far (collect_fds=True); the fds
        are the caller's to close from now on."""
        self.drain_notify()
        out, self.notify_fds = self.notify_fds, []
        return out

    def watch_notify_until(self, sock, timeout=5):
        """Keep reading the notify socket, so that each datagram gets its arrival time, until
        `sock` is readable (an answer has come); HarnessError when neither comes in `timeout`."""
        while True:
            r, _, _ = select.select([self.notify_sock, sock], [], [], timeout)
            if not r:
                raise HarnessError(f"neither a notification nor bytes on the socket in {timeout}s")
            self.drain_notify()
            if sock in r:
                return

    def notify_lines(self):
        """Every line of every datagram received so far, in order."""
        self.drain_notify()
        return [line for _, d in self.datagrams for line in d.split("\n") if line]

    def ready_datagram(self):
        for t, d in self.datagrams:
            if "READY=1" in d.split("\n"):
                return t, d
        return None

    def wait_ready(self, timeout=10):
        """Block on the notify socket until a datagram with the line READY=1 arrives. Returns it."""
        if self.notify_sock is None:
            raise HarnessError("wait_ready needs notify=True")
        deadline = time.monotonic() + timeout
        while True:
            self.drain_notify()
            got = self.ready_datagram()
            if got:
                return got[1]
            left = deadline - time.monotonic()
            if left <= 0:
                raise HarnessError(f"no READY=1 within {timeout}s; log:\n{self.log_text()}")
            ev = self._wait_readable([self.notify_sock], left)
            if "exit" in ev and self.notify_sock not in ev:
                self.drain_notify()
                if self.ready_datagram():
                    continue
                rc = self.wait_exit(5)
                raise HarnessError(
                    f"{self.app} exited with {rc} before READY=1; log:\n{self.log_text()}"
                )

    def wait_ready_or_exit(self, timeout=10):
        """Block until READY=1 arrives or the process exits, whichever is first. Returns
        "ready", or the exit status."""
        if self.notify_sock is None:
            raise HarnessError("wait_ready_or_exit needs notify=True")
        deadline = time.monotonic() + timeout
        while True:
            self.drain_notify()
            if self.ready_datagram():
                return "ready"
            if self.exited():
                return self.wait_exit(5)
            left = deadline - time.monotonic()
            if left <= 0:
                raise HarnessError(f"neither READY=1 nor an exit within {timeout}s")
            self._wait_readable([self.notify_sock], left)

    def wait_port(self, port, host="127.0.0.1", timeout=10, interval=0.02):
        """Readiness without a notify socket: poll connect() until the port accepts."""
        deadline = time.monotonic() + timeout
        while True:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.settimeout(1)
                s.connect((host, port))
                s.close()
                return
            except OSError:
                s.close()
            if self.exited():
                raise HarnessError(
                    f"{self.app} exited with {self.proc.returncode} before {host}:{port} "
                    f"accepted; log:\n{self.log_text()}"
                )
            if time.monotonic() >= deadline:
                raise HarnessError(f"{host}:{port} did not accept within {timeout}s")
            self._wait_readable([], interval)

    def wait_exit(self, timeout=10):
        """Wait for the process to end by itself. Returns its exit status (-N for a signal)."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise HarnessError(f"{self.app} still running after {timeout}s")
            self._wait_readable([], left)
        self._finish()
        return self.proc.returncode

    def _finish(self):
        self.returncode = self.proc.returncode
        self.drain_notify()
        self._reader.join(5)
        if self._out_reader is not None:
            self._out_reader.join(5)
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        with _live_lock:
            if self in _live:
                _live.remove(self)

    def send_signal(self, sig):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=10, close_conns=True):
        """Send `sig`, wait for the exit, SIGKILL past `timeout`. Returns the exit status."""
        if close_conns:
            self.close_conns()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.wait_exit(timeout)
            except HarnessError:
                self.proc.kill()
                self.proc.wait()
        if self.returncode is None or self.pidfd is not None:
            self._finish()
        return self.proc.returncode

    def close_conns(self):
        for c in self.conns:
            c.close()
        self.conns = []

    def cleanup(self):
        try:
            self.close_conns()
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self.proc is not None:
                self._finish()
        finally:
            for _, _, s in self.listeners:
                s.close()
            if self.notify_sock:
                self.notify_sock.close()
            for _, _, fds in self.notify_fds:
                for fd in fds:
                    os.close(fd)
            self.notify_fds = []
            shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            if self.proc is not None and self.proc.poll() is None:
                self.stop()
        finally:
            self.cleanup()
        return False

    # ---- the log ----

    def log_lines(self):
        with self._log_cond:
            return [line for _, line in self.log]

    def log_text(self):
        return "\n".join("  | " + line for line in self.log_lines())

    def wait_log(self, pattern, timeout=10):
        """Wait for a stderr line matching the regex `pattern`; returns the line."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._log_cond:
            while True:
                for _, line in self.log:
                    if rx.search(line):
                        return line
                left = deadline - time.monotonic()
                if self._log_eof or left <= 0:
                    raise HarnessError(f"no log line matching {pattern!r}; log:\n{self.log_text()}")
                self._log_cond.wait(left)

    # ---- the passed listeners ----

    def tcp_listener(self):
        """The first passed TCP listener, or None: the test holds it, as systemd would."""
        tcp = [sock for kind, _, sock in self.listeners if kind == "tcp"]
        return tcp[0] if tcp else None

    def expect_in_backlog(self, conn, window, what="the connection"):
        """`conn`, which sent GET /health, was never taken by the app: no byte and no EOF
        reached it within `window` seconds, and it still waits in the passed TCP listener's
        backlog with its request unread."""
        check(conn.nothing_within(window), f"{what} got bytes or EOF: {conn.buf!r}")
        lst = self.tcp_listener()
        lst.settimeout(2)
        peer, _ = lst.accept()
        try:
            peer.settimeout(2)
            want = build_request("GET", "/health")
            got = b""
            while len(got) < len(want):
                data = peer.recv(65536)
                if not data:
                    break
                got += data
            eq(got, want, "the request still unread in the backlog")
        finally:
            peer.close()

    # ---- clients ----

    def connect(self, kind="tcp", timeout=10, addr=None):
        """A client connection, closed by stop(). addr: a (host, port) other than the passed
        TCP socket's (the app's own bind)."""
        if addr is not None:
            c = Conn.tcp(addr, timeout)
        elif kind == "tcp":
            c = Conn.tcp(self.tcp_addr, timeout)
        elif kind == "unix":
            c = Conn.unix(self.unix_path, timeout)
        else:
            raise ValueError(kind)
        self.conns.append(c)
        return c


class Reaped:
    """A helper a test starts beside its servers (a database, a Prometheus, a journald): once
    `_reap_later()` has registered it, reap_all() calls its cleanup() after the test if the test
    did not; cleanup() calls `_reap_done()`. As a context manager it cleans up at the end."""

    def _reap_later(self):
        with _live_lock:
            _live.append(self)

    def _reap_done(self):
        with _live_lock:
            if self in _live:
                _live.remove(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()
        return False


def reap_all():
    """Kill and clean up every server a test left behind. Returns how many there were."""
    with _live_lock:
        left = list(_live)
    for s in left:
        try:
            s.cleanup()
        except Exception:
            pass
    return len(left)


# ---- HTTP/1.1 over a raw socket ----


class Response:
    def __init__(self, version, status, reason, headers, body, raw_head):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers  # [(name, value)], as sent
        self.body = body
        self.raw_head = raw_head
        self.t = time.monotonic()  # when the whole response had arrived

    def header(self, name):
        """The first value of `name`, case-insensitive; None when absent."""
        n = name.lower()
        for k, v in self.headers:
            if k.lower() == n:
                return v
        return None

    def header_all(self, name):
        n = name.lower()
        return [v for k, v in self.headers if k.lower() == n]

    def names(self):
        return [k for k, _ in self.headers]

    def json(self):
        import json

        return json.loads(self.body)

    def __repr__(self):
        return f"<Response {self.status} {self.headers!r} body={self.body[:80]!r}>"


class Conn:
    """One client connection. Reads exactly one response at a time; keeps what follows."""

    def __init__(self, sock, timeout):
        self.sock = sock
        self.sock.settimeout(timeout)
        self.timeout = timeout
        self.buf = b""
        self.eof = False

    @classmethod
    def tcp(cls, addr, timeout=10):
        s = socket.create_connection(addr, timeout=timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(s, timeout)

    @classmethod
    def unix(cls, path, timeout=10):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(path)
        return cls(s, timeout)

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self, timeout=None):
        """Read once more into the buffer. False at EOF."""
        if self.eof:
            return False
        self.sock.settimeout(self.timeout if timeout is None else timeout)
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def read_exact(self, n, timeout=None):
        while len(self.buf) < n:
            if not self._fill(timeout):
                raise HarnessError(f"EOF after {len(self.buf)} of {n} bytes: {self.buf!r}")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_head(self, timeout=None):
        """Read one response head (status line and fields) and return it as a Response with
        an empty body; the bytes after the head stay in self.buf."""
        while b"\r\n\r\n" not in self.buf:
            if not self._fill(timeout):
                raise HarnessError(f"connection closed before a whole head: {self.buf!r}")
        i = self.buf.index(b"\r\n\r\n")
        raw_head, self.buf = self.buf[: i + 4], self.buf[i + 4 :]
        lines = raw_head[:-4].decode("latin-1").split("\r\n")
        m = re.match(r"^(HTTP/\d\.\d) (\d{3}) (.*)$", lines[0])
        if not m:
            raise HarnessError(f"bad status line {lines[0]!r}")
        headers = []
        for ln in lines[1:]:
            name, sep, value = ln.partition(":")
            if not sep:
                raise HarnessError(f"bad header line {ln!r}")
            headers.append((name, value.strip(" \t")))
        return Response(m.group(1), int(m.group(2)), m.group(3), headers, b"", raw_head)

    def read_response(self, head=False, timeout=None, skip_interim=False):
        """Read one response. `head`: it answers a HEAD (no body whatever Content-Length says).
        Interim (1xx) responses are returned as they come unless skip_interim."""
        while True:
            r = self.read_head(timeout)
            status = r.status
            if 100 <= status < 200:
                if skip_interim:
                    continue
                return r
            if head or status in (204, 304):
                return r
            te = r.header("Transfer-Encoding")
            cl = r.header("Content-Length")
            if te is not None and te.lower() == "chunked":
                r.body = self._read_chunked(timeout)
            elif cl is not None:
                r.body = self.read_exact(int(cl), timeout)
            else:
                while self._fill(timeout):
                    pass
                r.body, self.buf = self.buf, b""
            r.t = time.monotonic()
            return r

    def _read_chunked(self, timeout):
        body = b""
        while True:
            while b"\r\n" not in self.buf:
                if not self._fill(timeout):
                    raise HarnessError("EOF in a chunked response")
            i = self.buf.index(b"\r\n")
            size = int(self.buf[:i].split(b";")[0], 16)
            self.buf = self.buf[i + 2 :]
            if size == 0:
                while b"\r\n\r\n" not in b"\r\n" + self.buf:
                    if not self._fill(timeout):
                        raise HarnessError("EOF in chunked trailers")
                j = (b"\r\n" + self.buf).index(b"\r\n\r\n")
                self.buf = self.buf[j + 2 :]
                return body
            body += self.read_exact(size, timeout)
            self.read_exact(2, timeout)

    def request(self, method, path, headers=None, body=None, host="test"):
        """Send one request (Host added; Content-Length added when a body is given)."""
        self.send(build_request(method, path, headers, body, host))

    def exchange(self, method, path, headers=None, body=None, timeout=None):
        self.request(method, path, headers, body)
        return self.read_response(head=(method == "HEAD"), timeout=timeout)

    def get(self, path, headers=None, timeout=None):
        return self.exchange("GET", path, headers, timeout=timeout)

    def expect_eof(self, timeout=5):
        """Assert the server closes: recv gives b'' within `timeout` and no byte came first."""
        if self.buf:
            raise HarnessError(f"bytes after the last response: {self.buf!r}")
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""
        except socket.timeout:
            raise HarnessError(f"the server did not close the connection within {timeout}s")
        if data:
            raise HarnessError(f"expected EOF, got {data!r}")
        self.eof = True

    def nothing_within(self, timeout):
        """True when no byte (and no EOF) arrives within `timeout`."""
        if self.buf:
            return False
        r, _, _ = select.select([self.sock], [], [], timeout)
        return not r


def build_request(method, path, headers=None, body=None, host="test"):
    lines = [f"{method} {path} HTTP/1.1"]
    hs = list(headers or [])
    if host is not None and not any(k.lower() == "host" for k, _ in hs):
        hs.insert(0, ("Host", host))
    if body is not None and not any(
        k.lower() in ("content-length", "transfer-encoding") for k, _ in hs
    ):
        hs.append(("Content-Length", str(len(body))))
    lines += [f"{k}: {v}" for k, v in hs]
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return raw + (body or b"")


# ---- assertions ----


def eq(actual, expected, what=""):
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def tool(name, package):
    """The path of the program `name`, which Debian's `package` gives (contrib/deps installs it);
    HarnessError naming the package when it is not on PATH: a test that needs it fails, never
    passes without it."""
    path = shutil.which(name)
    if path is None:
        raise HarnessError(f"no {name} on PATH: install Debian's {package} (contrib/deps does)")
    return path


@contextlib.contextmanager
def nofile(need, what):
    """This process's soft RLIMIT_NOFILE raised to its hard limit for the block (the servers it
    starts inherit it), then put back: a login or a container starts at 1024 where a test opens
    thousands of sockets. HarnessError, saying what `what` needs, when the hard limit is below
    `need` descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    raised = 1 << 16 if hard == resource.RLIM_INFINITY else hard
    if hard != resource.RLIM_INFINITY and hard < need:
        raise HarnessError(f"{what} needs {need} file descriptors, and this process may have "
                           f"at most {hard} (hard RLIMIT_NOFILE): raise it to {need} "
                           f"(ulimit -Hn {need} as root, LimitNOFILE= under systemd)")
    if soft != resource.RLIM_INFINITY and soft < raised:
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


IMF_FIXDATE = re.compile(
    r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
    r"\d{4} \d{2}:\d{2}:\d{2} GMT$"
)


# (flag, variable, default) of every host knob, in --help order (SPEC C2, H2, X1, X2, R2, P4).
KNOBS = [
    ("host", "M0_HOST", "127.0.0.1"),
    ("port", "M0_PORT", "8080"),
    ("threads", "M0_THREADS", "1"),
    ("blocking-threads", "M0_BLOCKING_THREADS", "0"),
    ("compute-threads", "M0_COMPUTE_THREADS", "auto"),
    ("workers", "M0_WORKERS", "1"),
    ("max-keepalive-requests", "M0_MAX_KEEPALIVE_REQUESTS", "1000"),
    ("sse-heartbeat-ms", "M0_SSE_HEARTBEAT_MS", "15000"),
    ("app-tick-ms", "M0_APP_TICK_MS", "0"),
    ("access-log", "M0_ACCESS_LOG", "off"),
    ("accept-share", "M0_ACCEPT_SHARE", "on"),
    ("drain-timeout-ms", "M0_DRAIN_TIMEOUT_MS", "5000"),
    ("drain-idle-ms", "M0_DRAIN_IDLE_MS", "100"),
    ("max-head-bytes", "M0_MAX_HEAD_BYTES", "32768"),
    ("max-uri-bytes", "M0_MAX_URI_BYTES", "8192"),
    ("max-header-fields", "M0_MAX_HEADER_FIELDS", "100"),
    ("max-body-bytes", "M0_MAX_BODY_BYTES", "4194304"),
    ("header-timeout-ms", "M0_HEADER_TIMEOUT_MS", "10000"),
    ("body-timeout-ms", "M0_BODY_TIMEOUT_MS", "30000"),
    ("idle-timeout-ms", "M0_IDLE_TIMEOUT_MS", "60000"),
    ("max-connections", "M0_MAX_CONNECTIONS", "10000"),
    ("max-output-bytes", "M0_MAX_OUTPUT_BYTES", "1048576"),
    ("channel-frames", "M0_CHANNEL_FRAMES", "4096"),
    ("slice-requests", "M0_SLICE_REQUESTS", "256"),
    ("turn-budget-ms", "M0_TURN_BUDGET_MS", "10"),
    ("turn-items", "M0_TURN_ITEMS", "32"),
    ("linger-ms", "M0_LINGER_MS", "2000"),
    ("bus", "M0_BUS", "local"),
    ("bus-queue", "M0_BUS_QUEUE", "10000"),
    ("bus-replay-max", "M0_BUS_REPLAY_MAX", "10000"),
    ("bus-retain-s", "M0_BUS_RETAIN_S", "86400"),
    ("bus-retain-rows", "M0_BUS_RETAIN_ROWS", "1000000"),
    ("metrics", "M0_METRICS", "off"),
    ("metrics-max-connections", "M0_METRICS_MAX_CONNECTIONS", "8"),
    ("metrics-timeout-ms", "M0_METRICS_TIMEOUT_MS", "5000"),
    ("access-log-queue", "M0_ACCESS_LOG_QUEUE", "4096"),
    ("json-max-depth", "M0_JSON_MAX_DEPTH", "64"),
    ("replay-per-channel", "M0_REPLAY_PER_CHANNEL", "64"),
    ("replay-bytes", "M0_REPLAY_BYTES", "16777216"),
    ("stream-max-channels", "M0_STREAM_MAX_CHANNELS", "16"),
    ("sse-retry-ms", "M0_SSE_RETRY_MS", "2000"),
    ("bus-ready-ms", "M0_BUS_READY_MS", "5000"),
    ("tls-cert", "M0_TLS_CERT", "off"),
    ("tls-key", "M0_TLS_KEY", "off"),
    ("tls-port", "M0_TLS_PORT", "0"),
    ("tls-warn-days", "M0_TLS_WARN_DAYS", "14"),
    ("tls-ticket-rotate-s", "M0_TLS_TICKET_ROTATE_S", "3600"),
    ("tls-handshake-timeout-ms", "M0_TLS_HANDSHAKE_TIMEOUT_MS", "10000"),
    ("tls-max-handshakes", "M0_TLS_MAX_HANDSHAKES", "2048"),
    ("tls-session-cache", "M0_TLS_SESSION_CACHE", "10000"),
    ("tls-hsts-s", "M0_TLS_HSTS_S", "63072000"),
    ("compress-min-bytes", "M0_COMPRESS_MIN_BYTES", "1024"),
    ("compress-zstd-level", "M0_COMPRESS_ZSTD_LEVEL", "3"),
    ("compress-brotli-level", "M0_COMPRESS_BROTLI_LEVEL", "5"),
    ("compress-gzip-level", "M0_COMPRESS_GZIP_LEVEL", "6"),
    ("files-turn-cache", "M0_FILES_TURN_CACHE", "64"),
    ("h2-max-streams", "M0_H2_MAX_STREAMS", "100"),
    ("h2-window-bytes", "M0_H2_WINDOW_BYTES", "65535"),
    ("h2-reset-rate", "M0_H2_RESET_RATE", "100"),
]


def kill_during(s, writer, n, seconds, what):
    """Run `writer(w, stop, errors)` on `n` threads against the server `s`, SIGKILL it after
    `seconds`, then stop and join them. A writer appends (monotonic time, w, exception) to
    `errors` when it fails; only failures after the kill are expected (the kill breaks every
    connection), so one before it fails the caller's test."""
    stop, errors = threading.Event(), []
    threads = [threading.Thread(target=writer, args=(w, stop, errors), daemon=True)
               for w in range(n)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    killed = time.monotonic()
    s.send_signal(signal.SIGKILL)
    eq(s.wait_exit(10), -signal.SIGKILL, f"{what}: the kill")
    stop.set()
    for t in threads:
        t.join(10)
    eq([(w, e) for t, w, e in errors if t < killed], [],
       f"{what}: writers that failed before the kill")


def compute_threads_default():
    """M0_COMPUTE_THREADS's default as the host computes it: the CPUs this process may use,
    capped by a cgroup v2 cpu.max quota (SPEC C2, P4)."""
    n = len(os.sched_getaffinity(0))
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()
        if quota != "max":
            cap = -(-int(quota) // int(period))
            if 1 <= cap < n:
                n = cap
    except (OSError, ValueError):
        pass
    return n


def status_tail():
    """What STATUS= ends with when M0_COMPUTE_THREADS is left at its default."""
    n = compute_threads_default()
    return f"; {n} compute thread{'' if n == 1 else 's'}"


# ---- server-sent event streams ----


class SSEFrame:
    """One block of a stream, up to and including its blank line: an event (`id:`, `event:`,
    `data:` lines) or comments only (`: open`, `: heartbeat`, `: bye`)."""

    def __init__(self, raw, t):
        self.raw = raw  # the exact bytes, blank line included
        self.t = t  # monotonic time the block was parsed
        self.comments = []
        self.id = None
        self.event = None
        self.data = []  # one entry per data: line
        self.other = []  # any other line, verbatim
        for line in raw[:-2].decode("utf-8", "replace").split("\n"):
            if line.startswith(":"):
                self.comments.append(line[1:].lstrip(" "))
                continue
            name, sep, value = line.partition(":")
            if sep and value.startswith(" "):
                value = value[1:]
            if name == "id" and sep:
                self.id = value
            elif name == "event" and sep:
                self.event = value
            elif name == "data" and sep:
                self.data.append(value)
            else:
                self.other.append(line)

    @property
    def is_event(self):
        return self.id is not None or self.event is not None or bool(self.data)

    @property
    def id_int(self):
        return int(self.id) if self.id is not None else None

    @property
    def data_text(self):
        return "\n".join(self.data)

    def __repr__(self):
        return f"<SSEFrame {self.raw!r}>"


# A stream's first bytes (S1, H9), with the default M0_SSE_RETRY_MS.
OPEN_BLOCKS = b": open\n\nretry: 2000\n\n"


def open_stream(conn, path, headers=None, timeout=None):
    """Send GET `path` and read only the response head (a stream has no length). Returns the
    Response; the stream's bytes stay in conn.buf for an SSEReader."""
    conn.request("GET", path, headers)
    return conn.read_head(timeout)


class SSEReader:
    """Reads the blocks of one stream from a Conn whose head was read by open_stream()."""

    def __init__(self, conn):
        self.conn = conn
        self.eof = False

    @property
    def sock(self):
        return self.conn.sock

    def _pop(self):
        i = self.conn.buf.find(b"\n\n")
        if i < 0:
            return None
        raw, self.conn.buf = self.conn.buf[: i + 2], self.conn.buf[i + 2 :]
        return SSEFrame(raw, time.monotonic())

    def fill(self, timeout):
        """Wait up to `timeout` for bytes and read them. False on timeout or EOF."""
        if self.eof:
            return False
        r, _, _ = select.select([self.conn.sock], [], [], max(timeout, 0))
        if not r:
            return False
        if not self.conn._fill(max(timeout, 1)):
            self.eof = True
            return False
        return True

    def next(self, timeout=5):
        """The next block, or None when nothing whole arrives within `timeout` (or at EOF)."""
        deadline = time.monotonic() + timeout
        while True:
            f = self._pop()
            if f is not None:
                return f
            if not self.fill(deadline - time.monotonic()):
                if self.eof or time.monotonic() >= deadline:
                    return None

    def expect(self, timeout=5):
        """The next block; HarnessError when none arrives in time."""
        f = self.next(timeout)
        if f is None:
            raise HarnessError(
                f"no stream block within {timeout}s (eof={self.eof}, buffered {self.conn.buf!r})"
            )
        return f

    def pending(self):
        """Every whole block already buffered, without reading the socket."""
        out = []
        while True:
            f = self._pop()
            if f is None:
                return out
            out.append(f)

    def read_for(self, seconds):
        """Every block that arrives within `seconds`."""
        deadline = time.monotonic() + seconds
        out = []
        while True:
            out += self.pending()
            left = deadline - time.monotonic()
            if left <= 0 or not self.fill(left):
                if self.eof or time.monotonic() >= deadline:
                    return out + self.pending()

    def read_to_eof(self, timeout=10):
        """Every block until the server closes; (blocks, bytes left over that end no block).
        HarnessError when the connection is still open after `timeout`."""
        deadline = time.monotonic() + timeout
        out = []
        while not self.eof:
            out += self.pending()
            left = deadline - time.monotonic()
            if left <= 0:
                raise HarnessError(
                    f"the stream was still open after {timeout}s ({len(out)} blocks read)"
                )
            self.fill(left)
        out += self.pending()
        return out, self.conn.buf


def read_streams(readers, seconds):
    """Read every reader for `seconds` at once. Returns a list of block lists, in order."""
    deadline = time.monotonic() + seconds
    got = [[] for _ in readers]
    while True:
        for i, rd in enumerate(readers):
            got[i] += rd.pending()
        left = deadline - time.monotonic()
        live = [rd for rd in readers if not rd.eof]
        if left <= 0 or not live:
            return got
        r, _, _ = select.select([rd.sock for rd in live], [], [], left)
        for rd in live:
            if rd.sock in r and not rd.conn._fill(1):
                rd.eof = True
