# SPDX-License-Identifier: MIT
"""journaltest: a real systemd-journald for a test (SPEC O2): Debian's /lib/systemd/systemd-journald,
run in a private mount namespace of its own (unshare(1)) where a tmpfs covers /run, so that its
sockets are /run/systemd/journal/socket in there and nowhere else, its journal files land in a
temporary directory of the test's (Storage=volatile, bound over /run/log/journal), and /dev/kmsg
is /dev/null (it neither reads the kernel's log nor writes to it) where there is one: a container
has none, and journald then does without. journald itself has a network namespace of its own,
whose datagram queue is the kernel's default (QLEN). An app started with `preexec_fn=j.enter`
joins the mount namespace, so the code under test talks to journald exactly as under systemd:
the same path, the same datagrams. Needs root (CAP_SYS_ADMIN for the namespace).
Standard library only.

    with Journald() as j:
        with Server("host_check", env={"M0_ACCESS_LOG": "journal"}, preexec_fn=j.enter) as s:
            ...
        j.entries(_PID=str(s.pid), M0_STATUS="404")   # journalctl -o json, as dicts
The journald left running is stopped by m0test.reap_all() after each test."""

import ctypes
import glob
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import m0test
from m0test import HarnessError

JOURNALD = "/lib/systemd/systemd-journald"
CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
# journald's datagram queue (net.unix.max_dgram_qlen, taken from the network namespace a socket is
# made in): the kernel's default, which the tests' counts are written for. A machine that systemd
# booted has 512 (sysctl.d/50-default.conf), so journald runs in a network namespace of its own
# (it uses no network, and its sockets are paths) whose queue is this on every machine.
QLEN = 10
QLEN_PATH = "/proc/sys/net/unix/max_dgram_qlen"

CONF = """[Journal]
Storage=volatile
ForwardToSyslog=no
ForwardToKMsg=no
ForwardToConsole=no
ForwardToWall=no
ReadKMsg=no
RateLimitIntervalSec=0
"""

# The namespace: a tmpfs over /run, the test's directory as the journal's, the test's
# journald.conf, /dev/null for /dev/kmsg where the machine has one (a container has none, and
# journald goes without), /proc/sys/net writable where it is not (a container's /proc/sys is
# read-only; only journald's own network namespace is written, see QLEN); then a process that
# only holds it, so that journald can be stopped and started again in it (a restart) while the
# app stays.
_SCRIPT = r"""
set -e
mount -t tmpfs -o mode=0755 m0test-run /run
mkdir -p /run/systemd/journal /run/log/journal
mount --bind "$1/store" /run/log/journal
mount --bind "$1/journald.conf" /etc/systemd/journald.conf
if [ -e /dev/kmsg ]; then mount --bind /dev/null /dev/kmsg; fi
if [ ! -w /proc/sys/net/unix/max_dgram_qlen ]; then
  mount --bind /proc/sys/net /proc/sys/net
  mount -o remount,bind,rw /proc/sys/net
fi
touch /run/m0test-ready
exec sleep infinity
"""


class Journald(m0test.Reaped):
    """A journald of the test's own (run=True), or only its namespace with nothing listening at
    /run/systemd/journal/socket in it (run=False; start() later)."""

    def __init__(self, run=True):
        if os.geteuid() != 0:
            raise HarnessError("a journald of the test's own needs root (a mount namespace)")
        if run and not os.access(JOURNALD, os.X_OK):
            raise HarnessError(f"no {JOURNALD} (Debian's systemd package)")
        self.dir = tempfile.mkdtemp(prefix="m0journal-")
        os.mkdir(os.path.join(self.dir, "store"))
        with open(os.path.join(self.dir, "journald.conf"), "w") as f:
            f.write(CONF)
        self.holder = None
        self.proc = None  # journald
        self.ns_fd = None
        self._reap_later()
        try:
            self.holder = subprocess.Popen(
                [m0test.tool("unshare", "util-linux"), "--mount", "--propagation", "private",
                 "sh", "-c", _SCRIPT, "sh", self.dir],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._logfile(),
            )
            self._wait_for(self.holder, "run/m0test-ready")
            self.ns_fd = os.open(f"/proc/{self.holder.pid}/ns/mnt", os.O_RDONLY)
            if run:
                self.start()
        except BaseException:
            self.cleanup()
            raise

    def _logfile(self):
        return open(os.path.join(self.dir, "journald.log"), "ab")

    def _wait_for(self, proc, path):
        deadline = time.monotonic() + 10
        while not os.path.exists(f"/proc/{self.holder.pid}/root/{path}"):
            if proc.poll() is not None:
                raise HarnessError(f"{proc.args[0]} ended ({proc.returncode}): {self.log()}")
            if time.monotonic() > deadline:
                raise HarnessError(f"no {path} in journald's namespace within 10 s")
            time.sleep(0.02)

    def start(self):
        """journald in the namespace; returns once its socket is there."""
        sock = f"/proc/{self.holder.pid}/root/run/systemd/journal/socket"
        if os.path.exists(sock):
            os.unlink(sock)  # the last one's: wait for the new one's
        self.proc = subprocess.Popen([JOURNALD], preexec_fn=self._enter_own_net,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self._logfile())
        self._wait_for(self.proc, "run/systemd/journal/socket")

    def log(self):
        with open(os.path.join(self.dir, "journald.log"), errors="replace") as f:
            return f.read()

    def enter(self):
        """preexec_fn: the child joins the namespace before it runs the app."""
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(self.ns_fd, CLONE_NEWNS) != 0:
            os._exit(126)

    def _enter_own_net(self):
        """journald's preexec_fn: the namespace, then a network namespace of its own whose
        datagram queue is QLEN."""
        self.enter()
        try:
            if ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")
            with open(QLEN_PATH, "w") as f:
                f.write(str(QLEN))
        except OSError as e:
            os.write(2, f"journaltest: {e}\n".encode())
            os._exit(126)

    def restart(self):
        """A journald restart: the old one ends, a new one binds the socket again."""
        self.stop_process()
        self.start()

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def entries(self, **match):
        """Every entry matching FIELD=value pairs, as dicts (journalctl -o json)."""
        files = glob.glob(os.path.join(self.dir, "store", "*"))
        if not files:
            return []
        args = [m0test.tool("journalctl", "systemd"), "-q", "--no-pager", "-o", "json", "-D",
                files[0]]
        args += [f"{k}={v}" for k, v in match.items()]
        p = subprocess.run(args, capture_output=True, timeout=30)
        return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]

    def wait_entries(self, n, timeout=10, **match):
        """At least `n` entries matching, within `timeout`; HarnessError otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.entries(**match)
            if len(got) >= n or time.monotonic() > deadline:
                if len(got) < n:
                    raise HarnessError(f"{len(got)} journal entries match {match}, wanted {n}")
                return got
            time.sleep(0.1)

    def stop_process(self, proc=None):
        proc = proc or self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def cleanup(self):
        try:
            self.stop_process()
            self.stop_process(self.holder)
        finally:
            if self.ns_fd is not None:
                os.close(self.ns_fd)
                self.ns_fd = None
            shutil.rmtree(self.dir, ignore_errors=True)
            self._reap_done()


def field_bytes(entry, name):
    """A field of a journalctl -o json entry as bytes: journalctl writes a value that is not
    printable UTF-8 as an array of byte values, anything else as a string."""
    v = entry.get(name)
    if v is None:
        return None
    if isinstance(v, list):
        return bytes(v)
    return v.encode()
