# SPDX-License-Identifier: MIT
"""TLS (SPEC TL1-TL7). Its certificates at the start: each refusal exits 78 with one line naming
the file and the fix; the doctor prints every certificate and never a key; a certificate near its
end is a journal warning at the start and a metric. Serving: a socket named https (or
--tls-port) serves TLS 1.2 and 1.3 beside the plain ones, refuses 1.1, offers ALPN http/1.1,
picks a certificate by server name and key type, resumes sessions on any loop, bounds its
handshakes, reloads on SIGHUP, and carries streams and the drain (close_notify). Every key and
certificate is made here, with the openssl command, in a temporary directory; the clients are
Python's ssl, curl and openssl s_client."""

import base64
import collections
import hashlib
import json
import os
import re
import selectors
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time

from m0test import Conn, Server, check, eq, free_port, nofile, run_app, tool
from test_metrics import samples, scrape, value

# ThreadSanitizer runs this module (one TLS context for every loop, its reload): run.py, D235.
THREADED = True


def _openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


class Certs:
    """A test CA in a temporary directory, and leaves it issues."""

    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="m0-tls-")
        self.dir = self.tmp.name
        self.ca_key, self.ca = self.path("ca.key"), self.path("ca.crt")
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-subj", "/CN=m0 test CA", "-keyout", self.ca_key, "-out", self.ca, "-days", "30")

    def path(self, name):
        return os.path.join(self.dir, name)

    def leaf(self, name, cn, days=60, curve="P-256", rsa=False, ip=False):
        """name.crt and name.key: an ECDSA leaf (RSA 2048 when rsa) for cn (and DNS:cn, and
        IP:127.0.0.1 when ip) the CA issued."""
        key, csr, crt = self.path(name + ".key"), self.path(name + ".csr"), self.path(name + ".crt")
        kind = ["rsa", "-pkeyopt", "rsa_keygen_bits:2048"] if rsa else [
            "ec", "-pkeyopt", f"ec_paramgen_curve:{curve}"]
        _openssl("req", "-new", "-newkey", *kind,
                 "-nodes", "-subj", f"/CN={cn}", "-keyout", key, "-out", csr)
        ext = self.path(name + ".ext")
        with open(ext, "w") as f:
            f.write(f"subjectAltName=DNS:{cn}{',IP:127.0.0.1' if ip else ''}\n"
                    "basicConstraints=critical,CA:FALSE\n")
        _openssl("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", self.ca_key,
                 "-CAcreateserial", "-days", str(days), "-extfile", ext, "-out", crt)
        return crt, key

    def close(self):
        self.tmp.cleanup()


def _refusal(env):
    """Serve with `env` (plain sockets, no TLS port): (exit status, the refusal lines)."""
    rc, out, err = run_app("host_check", ["--port", str(free_port())], env=env)
    return rc, [ln for ln in err.splitlines() if ln.startswith("m0: ")]


def test_TL3_each_refusal_exits_78_naming_the_file():
    c = Certs()
    try:
        crt, key = c.leaf("a", "a.test")
        _, other_key = c.leaf("b", "b.test")
        bad = c.path("bad.crt")
        with open(bad, "w") as f:
            f.write("hello\n")
        chain = c.path("chain.crt")  # the leaf, then a certificate that did not issue it
        with open(chain, "w") as f:
            f.write(open(crt).read() + open(c.path("b.crt")).read())
        missing = c.path("missing.crt")
        fix_crt = "set M0_TLS_CERT to a file holding the certificate in PEM, leaf first, then its chain"
        cases = [
            ({"M0_TLS_CERT": missing, "M0_TLS_KEY": key},
             f"m0: tls: M0_TLS_CERT={missing}: no such file ({fix_crt})"),
            ({"M0_TLS_CERT": bad, "M0_TLS_KEY": key},
             f"m0: tls: M0_TLS_CERT={bad} is not a PEM certificate chain (no start line) "
             f"({fix_crt})"),
            ({"M0_TLS_CERT": crt, "M0_TLS_KEY": other_key},
             f"m0: tls: M0_TLS_KEY={other_key} does not match the certificate of "
             f"M0_TLS_CERT={crt} (give the key the certificate was made for, or the certificate "
             f"of this key)"),
            ({"M0_TLS_CERT": chain, "M0_TLS_KEY": key},
             f"m0: tls: M0_TLS_CERT={chain}: certificate 2 of the chain (CN=b.test) did not issue "
             f"the one before it (CN=a.test, issued by CN=m0 test CA) (put the leaf first, then "
             f"the certificate that issued it, then its issuer, in that order)"),
            ({"M0_TLS_CERT": crt},
             "m0: tls: M0_TLS_CERT is set and M0_TLS_KEY is not (set both M0_TLS_CERT and "
             "M0_TLS_KEY, or neither)"),
            ({"M0_TLS_PORT": "8443"},
             "m0: tls: no certificate: neither M0_TLS_CERT nor $CREDENTIALS_DIRECTORY/tls.crt "
             "(set M0_TLS_CERT and M0_TLS_KEY, or LoadCredential=tls.crt and tls.key in the "
             "unit)"),
        ]
        for env, line in cases:
            rc, lines = _refusal(env)
            eq(rc, 78, f"exit status with {env}")
            eq(lines, [line], f"the refusal with {env}")
        # Under systemd: the credential's name and LoadCredential= in the fix.
        cred = c.path("cred")
        os.mkdir(cred)
        os.link(key, os.path.join(cred, "tls.key"))
        rc, lines = _refusal({"CREDENTIALS_DIRECTORY": cred})
        eq(rc, 78, "exit status with tls.key and no tls.crt")
        eq(lines, [f"m0: tls: credential tls.crt ({cred}/tls.crt): no such file (give "
                   f"LoadCredential=tls.crt:<file> the certificate in PEM, leaf first, then its "
                   f"chain)"], "the refusal of a missing credential")
    finally:
        c.close()


def _doctor(env):
    rc, out, err = run_app("host_check", ["--doctor"], env=env)
    lines = out.splitlines()
    return rc, lines, json.loads(lines[-1]), out + err


def test_TL3_doctor_prints_each_certificate_never_a_key():
    c = Certs()
    try:
        crt, key = c.leaf("a", "a.test", days=60)
        b_crt, b_key = c.leaf("b", "b.test", curve="P-384")
        cred = c.path("cred")
        os.mkdir(cred)
        for src, dst in ((crt, "tls.crt"), (key, "tls.key"), (b_crt, "tls.b.test.crt"),
                         (b_key, "tls.b.test.key")):
            os.link(src, os.path.join(cred, dst))
        keys = [open(p).read() for p in (key, b_key)]
        for env, files in (({"M0_TLS_CERT": crt, "M0_TLS_KEY": key}, [(crt, "default")]),
                           ({"CREDENTIALS_DIRECTORY": cred},
                            [(f"{cred}/tls.crt", "default"),
                             (f"{cred}/tls.b.test.crt", "b.test")])):
            rc, lines, obj, text = _doctor(env)
            eq(rc, 0, f"doctor exit status with {env}")
            tls = [ln for ln in lines if ln.startswith("tls: ")]
            eq(len(tls), len(files), f"tls lines: {tls}")
            for ln, (path, name) in zip(tls, files):
                cn = "b.test" if name == "b.test" else "a.test"
                curve, bits = ("P-384", 384) if name == "b.test" else ("P-256", 256)
                rx = (rf"tls: certificate {re.escape(path)} \({name}\): subject CN={cn}; names "
                      rf"DNS:{cn}; issuer CN=m0 test CA; key ECDSA {curve}, {bits} bits; expires "
                      rf"\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(in (59|60) days\); chain of 0$")
                check(re.match(rx, ln), f"doctor line {ln!r} does not match {rx}")
            checks = {k["name"]: k for k in obj["checks"]}
            eq(checks["tls"]["ok"], True, "the tls check")
            n = len(files)
            eq(checks["tls"]["detail"],
               f"{n} certificate{'s' if n > 1 else ''} loaded and checked; no TLS port "
               f"(M0_TLS_PORT=0)", "the tls check's detail")
            eq([(x["file"], x["name"] or "default", x["key_type"], x["key_bits"], x["chain"])
                for x in obj["tls"]["certificates"]],
               [(p, nm, "ECDSA P-384" if nm == "b.test" else "ECDSA P-256",
                 384 if nm == "b.test" else 256, 0) for p, nm in files], "the JSON's certificates")
            eq(obj["tls"]["port"], None, "no TLS port")
            # Not a line of any key, nor its armour.
            check("PRIVATE KEY" not in text, "the doctor shows a key's armour")
            for k in keys:
                for body in k.splitlines()[1:-1]:
                    check(body not in text, "the doctor shows a line of a key")
        # A failing certificate is the doctor's 78 too, with the check named.
        rc, lines, obj, _ = _doctor({"M0_TLS_CERT": c.path("none.crt"), "M0_TLS_KEY": key})
        eq(rc, 78, "doctor exit status with a missing certificate")
        checks = {k["name"]: k for k in obj["checks"]}
        eq(checks["tls"]["detail"], f"M0_TLS_CERT={c.path('none.crt')}: no such file",
           "the failing check's detail")
        eq(obj["exit"], 78, "the JSON's exit")
    finally:
        c.close()


def test_TL3_expiry_warning_and_metric_at_start():
    c = Certs()
    try:
        crt, key = c.leaf("soon", "soon.test", days=3)
        not_after = subprocess.run(["openssl", "x509", "-in", crt, "-noout", "-enddate"],
                                   check=True, capture_output=True, text=True).stdout
        port = free_port()
        env = {"M0_TLS_CERT": crt, "M0_TLS_KEY": key, "M0_TLS_PORT": "0",
               "M0_METRICS": f"127.0.0.1:{port}"}
        with Server("host_check", env=env) as s:
            s.wait_ready()
            # The warning is written before READY, but the harness reads stderr on its own
            # thread: wait for the line, and count the lines once the host has ended.
            s.wait_log("expires at")
            st, _, body = scrape(("127.0.0.1", port), accept="application/openmetrics-text")
            eq(st, 200, "GET /metrics")
            got = value(samples(body), "m0_tls_certificate_expiry_timestamp_seconds", file=crt,
                        server_name="")
            want = subprocess.run(["date", "-u", "-d", not_after.split("=", 1)[1].strip(), "+%s"],
                                  check=True, capture_output=True, text=True).stdout
            eq(int(float(got)), int(want), "the expiry's timestamp")
            eq(s.stop(), 0, "exit status")
            warn = [ln for ln in s.log_lines() if "expires at" in ln]
            eq(len(warn), 1, f"expiry warnings: {s.log_lines()}")
            rx = (rf"TLS certificate {re.escape(crt)} \(subject CN=soon\.test\) expires at "
                  rf"\S+Z, within M0_TLS_WARN_DAYS=14 days: renew it and reload$")
            check(re.search(rx, warn[0]), f"warning {warn[0]!r}")
        # M0_TLS_WARN_DAYS=2: no warning for three days.
        with Server("host_check", env={**env, "M0_TLS_WARN_DAYS": "2"}) as s:
            s.wait_ready()
            eq(s.stop(), 0, "exit status")
            eq([ln for ln in s.log_lines() if "expires at" in ln], [], "warnings at 2 days")
    finally:
        c.close()


# ---- serving (TL1, TL2, TL5-TL7) ----


# The two versions m0 serves, as the tests that run a case over each name them.
_VERSIONS = ((ssl.TLSVersion.TLSv1_3, "TLSv1.3"), (ssl.TLSVersion.TLSv1_2, "TLSv1.2"))


def _https_addr(s):
    """The address of the server's socket named https."""
    return next(sock.getsockname() for _, name, sock in s.listeners if name == "https")


def _ctx(ca, version=None, ciphers=None, alpn=("http/1.1",), check_name=True):
    """A client context trusting the test CA: pinned to `version` when given."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(ca)
    ctx.check_hostname = check_name
    if version is not None:
        ctx.minimum_version = ctx.maximum_version = version
    if ciphers:
        ctx.set_ciphers(ciphers)
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    return ctx


def _tls(addr, ctx, name="a.test", session=None, timeout=10):
    """A Conn over TLS to `addr`, its handshake done; a close without close_notify is an error."""
    raw = socket.create_connection(addr, timeout=timeout)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        t = ctx.wrap_socket(raw, server_hostname=name, session=session,
                            suppress_ragged_eofs=False)
    except BaseException:
        raw.close()
        raise
    return Conn(t, timeout)


def _serving(c, env=None, **kw):
    """host_check with a plain socket named http and a TLS one named https, a.test's pair."""
    crt, key = c.leaf("a", "a.test")
    return Server("host_check", env={"M0_TLS_CERT": crt, "M0_TLS_KEY": key, **(env or {})},
                  sockets=[("tcp", "http"), ("tcp", "https")], **kw)


def _get_ok(conn, what):
    r = conn.get("/health")
    eq((r.status, r.body), (200, b"ok\n"), what)
    return r


def test_TL1_https_socket_beside_plain_versions_and_alpn():
    c = Certs()
    try:
        with _serving(c) as s:
            s.wait_ready()
            addr = _https_addr(s)
            plain = Conn.tcp(s.tcp_addr)
            _get_ok(plain, "plain GET on the socket named http")
            plain.close()
            for v, name in ((ssl.TLSVersion.TLSv1_2, "TLSv1.2"), (ssl.TLSVersion.TLSv1_3,
                                                                 "TLSv1.3")):
                conn = _tls(addr, _ctx(c.ca, v))
                _get_ok(conn, f"GET over {name}")
                _get_ok(conn, f"a second GET over {name}, kept alive")
                eq(conn.sock.version(), name, "the version agreed")
                eq(conn.sock.selected_alpn_protocol(), "http/1.1", "ALPN")
                conn.close()
            # TLS 1.1: the server answers with the protocol_version alert.
            old = _ctx(c.ca, ssl.TLSVersion.TLSv1_1, ciphers="DEFAULT:@SECLEVEL=0")
            try:
                _tls(addr, old).close()
                raise AssertionError("a TLS 1.1 handshake completed")
            except ssl.SSLError as e:
                eq(e.reason, "TLSV1_ALERT_PROTOCOL_VERSION", f"TLS 1.1 refused: {e}")
            # Plain HTTP on the TLS socket is no ClientHello: closed.
            raw = Conn.tcp(addr)
            raw.send(b"GET /health HTTP/1.1\r\nHost: a\r\n\r\n")
            raw.expect_eof()
            raw.close()
            # curl, and openssl s_client.
            port = addr[1]
            curl = tool("curl", "curl")
            out = subprocess.run([curl, "-sS", "--cacert", c.ca, "--resolve",
                                  f"a.test:{port}:127.0.0.1", "-w", "%{http_version}",
                                  f"https://a.test:{port}/health"],
                                 capture_output=True, text=True, timeout=20)
            eq((out.returncode, out.stdout), (0, "ok\n2"), f"curl (h2 by ALPN, HT1): {out.stderr}")
            out = subprocess.run([curl, "-sS", "--http1.1", "--cacert", c.ca, "--resolve",
                                  f"a.test:{port}:127.0.0.1", "-w", "%{http_version}",
                                  f"https://a.test:{port}/health"],
                                 capture_output=True, text=True, timeout=20)
            eq((out.returncode, out.stdout), (0, "ok\n1.1"), f"curl --http1.1: {out.stderr}")
            out = subprocess.run([curl, "-sS", "--cacert", c.ca, "--resolve",
                                  f"a.test:{port}:127.0.0.1", "--tlsv1.1", "--tls-max", "1.1",
                                  "--ciphers", "DEFAULT:@SECLEVEL=0",
                                  f"https://a.test:{port}/health"],
                                 capture_output=True, text=True, timeout=20)
            eq(out.returncode, 35, f"curl over TLS 1.1: {out.stderr}")
            check("alert protocol version" in out.stderr, f"curl's error: {out.stderr}")
            out = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}",
                                  "-servername", "a.test", "-CAfile", c.ca, "-alpn",
                                  "http/1.1", "-ign_eof"],
                                 input=b"GET /health HTTP/1.1\r\nHost: a.test\r\n"
                                       b"Connection: close\r\n\r\n",
                                 capture_output=True, timeout=20)
            text = out.stdout.decode("latin-1")
            for want in ("ALPN protocol: http/1.1", "Verify return code: 0 (ok)",
                         "HTTP/1.1 200 OK\r\n"):
                check(want in text, f"s_client's output lacks {want!r}: {text}")
            # A client offering h2 first gets it (HT1); its preface and SETTINGS then follow.
            out = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}",
                                  "-servername", "a.test", "-CAfile", c.ca, "-alpn",
                                  "h2,http/1.1"], input=b"", capture_output=True, timeout=20)
            text = out.stdout.decode("latin-1")
            check("ALPN protocol: h2\n" in text, f"s_client offering h2: {text}")
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


def test_TL1_tls_port_outside_systemd():
    c = Certs()
    try:
        crt, key = c.leaf("a", "a.test")
        port, tls_port = free_port(), free_port()
        with Server("host_check", sockets=[],
                    env={"M0_TLS_CERT": crt, "M0_TLS_KEY": key, "M0_PORT": str(port),
                         "M0_TLS_PORT": str(tls_port)}) as s:
            s.wait_ready()
            _get_ok(Conn.tcp(("127.0.0.1", port)), "plain GET on M0_PORT")
            conn = _tls(("127.0.0.1", tls_port), _ctx(c.ca))
            _get_ok(conn, "GET over TLS on M0_TLS_PORT")
            eq(conn.sock.version(), "TLSv1.3", "the version agreed")
            conn.close()
            eq(s.stop(), 0, "exit status")
        # A socket named https with no certificate is a refusal, as the TLS port is.
        with Server("host_check", sockets=[("tcp", "https")], notify=False) as s:
            eq(s.wait_exit(), 78, "exit status with an https socket and no certificate")
            lines = [ln for ln in s.log_lines() if ln.startswith("m0: ")]
            eq(lines, ["m0: tls: no certificate: neither M0_TLS_CERT nor "
                       "$CREDENTIALS_DIRECTORY/tls.crt (set M0_TLS_CERT and M0_TLS_KEY, or "
                       "LoadCredential=tls.crt and tls.key in the unit)"], "the refusal")
    finally:
        c.close()


def _key_type(conn):
    """The public key algorithm of the certificate the server presented, as openssl names it."""
    der = conn.sock.getpeercert(binary_form=True)
    out = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-text"], input=der,
                         capture_output=True, check=True, timeout=20).stdout.decode()
    return re.search(r"Public Key Algorithm: (\S+)", out).group(1)


def _subject_cn(conn):
    der = conn.sock.getpeercert(binary_form=True)
    out = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-subject", "-nameopt",
                          "RFC2253"], input=der, capture_output=True, check=True,
                         timeout=20).stdout.decode().strip()
    return out


def test_TL2_sni_and_both_key_types_from_credentials():
    c = Certs()
    try:
        cred = c.path("cred")
        os.mkdir(cred)
        for name, cn, rsa, dst in (("a", "a.test", False, "tls"), ("ar", "a.test", True, "tls.rsa"),
                                   ("b", "b.test", False, "tls.b.test")):
            crt, key = c.leaf(name, cn, rsa=rsa)
            shutil.copy(crt, os.path.join(cred, dst + ".crt"))
            shutil.copy(key, os.path.join(cred, dst + ".key"))
        with Server("host_check", env={"CREDENTIALS_DIRECTORY": cred},
                    sockets=[("tcp", "http"), ("tcp", "https")]) as s:
            s.wait_ready()
            addr = _https_addr(s)
            cases = [
                ("b.test", None, None, "subject=CN=b.test", "id-ecPublicKey"),
                ("a.test", ssl.TLSVersion.TLSv1_3, None, "subject=CN=a.test", "id-ecPublicKey"),
                ("a.test", ssl.TLSVersion.TLSv1_2, "ECDHE-RSA-AES128-GCM-SHA256",
                 "subject=CN=a.test", "rsaEncryption"),
                ("a.test", ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-AES128-GCM-SHA256",
                 "subject=CN=a.test", "id-ecPublicKey"),
                ("other.test", None, None, "subject=CN=a.test", "id-ecPublicKey"),
            ]
            for name, v, ciphers, subject, kt in cases:
                conn = _tls(addr, _ctx(c.ca, v, ciphers, check_name=name != "other.test"),
                            name=name)
                _get_ok(conn, f"GET for {name}")
                eq((_subject_cn(conn), _key_type(conn)), (subject, kt),
                   f"the certificate for {name}, {v}, {ciphers}")
                conn.close()
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


def test_TL5_resumption_across_loops_both_versions():
    c = Certs()
    try:
        with _serving(c, env={"M0_THREADS": "2"}) as s:
            s.wait_ready()
            addr = _https_addr(s)
            for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
                ctx = _ctx(c.ca, v)
                first = _tls(addr, ctx)
                _get_ok(first, f"the first GET over {v}")
                sess = first.sock.session
                first.close()
                loops, reused = set(), 0
                for i in range(4):
                    conn = _tls(addr, ctx, session=sess)
                    r = _get_ok(conn, f"GET {i} over {v}, resumed")
                    reused += conn.sock.session_reused
                    loops.add(r.header("x-worker"))
                    conn.close()
                eq(reused, 4, f"sessions resumed of 4 over {v}")
                eq(len(loops), 2, f"the loops that resumed them over {v}: {loops}")
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


def test_TL7_event_stream_over_tls():
    c = Certs()
    try:
        with _serving(c) as s:
            s.wait_ready()
            conn = _tls(_https_addr(s), _ctx(c.ca))
            conn.send(b"GET /events HTTP/1.1\r\nHost: a.test\r\n\r\n")
            head = conn.read_head()
            eq(head.status, 200, f"the stream's head: {head!r}")
            check((head.header("content-type") or "").startswith("text/event-stream"),
                  f"its type: {head!r}")
            # Two beats of the producer, as frames, through the TLS records.
            events = 0
            deadline = time.monotonic() + 10
            while events < 2 and time.monotonic() < deadline:
                check(conn._fill(), "the stream ended")
                events = conn.buf.count(b"event: beat\n")
            check(events >= 2, f"beats over TLS: {conn.buf!r}")
            conn.close()
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


def test_TL7_drain_over_tls_sends_close_notify():
    c = Certs()
    try:
        with _serving(c) as s:
            s.wait_ready()
            idle = _tls(_https_addr(s), _ctx(c.ca))
            _get_ok(idle, "GET before the drain")
            s.send_signal(signal.SIGTERM)
            # The idle connection is closed with close_notify: a clean end of the session (a
            # close without it raises SSLEOFError here), then the stream's end.
            idle.sock.settimeout(10)
            eq(idle.sock.recv(100), b"", "the session's end")
            idle.close()
            eq(s.wait_exit(), 0, "exit status")
    finally:
        c.close()


def _tls_metrics(port):
    """{(name, frozenset(labels)): value} of a scrape, for the m0_tls_handshakes families."""
    st, _, body = scrape(("127.0.0.1", port), accept="application/openmetrics-text")
    eq(st, 200, "GET /metrics")
    return samples(body)


def _closed(conn, timeout=5):
    """Read until the server closes `conn` (a raw TCP Conn); a TLS alert record is all that may
    come before its end."""
    got = b""
    while conn._fill(timeout):
        got = conn.buf
    check(got == b"" or (got[:1] == b"\x15" and len(got) == 7), f"before the close: {got!r}")


def test_TL6_handshake_timeout_garbage_and_bound_per_loop():
    c = Certs()
    try:
        mport = free_port()
        env = {"M0_TLS_HANDSHAKE_TIMEOUT_MS": "2000", "M0_TLS_MAX_HANDSHAKES": "2",
               "M0_METRICS": f"127.0.0.1:{mport}"}
        with _serving(c, env=env) as s:
            s.wait_ready()
            addr = _https_addr(s)
            # Garbage where a ClientHello should be: closed at once, long before the timeout.
            junk = Conn.tcp(addr)
            junk.send(b"\x16\x03\x01\x00\x05hello" + b"\x00" * 64)
            t0 = time.monotonic()
            _closed(junk)
            check(time.monotonic() - t0 < 1.5, "garbage was closed only at the timeout")
            junk.close()
            # Two silent connections hold the loop's two handshakes; the third is closed at once
            # (the listener's queue is FIFO: it is accepted after them).
            silent = [Conn.tcp(addr) for _ in range(2)]
            third = Conn.tcp(addr)
            t0 = time.monotonic()
            _closed(third)
            check(time.monotonic() - t0 < 1.5, "the third handshake waited for the timeout")
            third.close()
            # The silent ones end at the timeout, and a normal client is served after.
            for conn in silent:
                _closed(conn)
                elapsed = time.monotonic() - t0
                check(1.5 < elapsed < 8, f"a silent handshake closed after {elapsed:.2f}s")
                conn.close()
            ok = _tls(addr, _ctx(c.ca))
            _get_ok(ok, "a normal client after them")
            ok.close()
            smp = _tls_metrics(mport)
            got = {r: value(smp, "m0_tls_handshakes_failed_total", loop="0", reason=r)
                   for r in ("error", "timeout", "busy")}
            eq(got, {"error": 1.0, "timeout": 2.0, "busy": 1.0}, "handshakes failed by reason")
            eq(value(smp, "m0_tls_handshakes_total", loop="0", version="TLSv1.3"), 1.0,
               "TLS 1.3 handshakes")
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


def test_TL7_metrics_and_access_log_count_tls():
    c = Certs()
    try:
        mport = free_port()
        env = {"M0_METRICS": f"127.0.0.1:{mport}", "M0_ACCESS_LOG": "on"}
        with _serving(c, env=env) as s:
            s.wait_ready()
            addr = _https_addr(s)
            ctx12 = _ctx(c.ca, ssl.TLSVersion.TLSv1_2)
            first = _tls(addr, ctx12)
            _get_ok(first, "GET over TLS 1.2")
            sess = first.sock.session
            first.close()
            again = _tls(addr, ctx12, session=sess)
            _get_ok(again, "GET over TLS 1.2, resumed")
            check(again.sock.session_reused, "the session was resumed")
            again.close()
            conn = _tls(addr, _ctx(c.ca, ssl.TLSVersion.TLSv1_3))
            _get_ok(conn, "GET over TLS 1.3")
            conn.close()
            _get_ok(Conn.tcp(s.tcp_addr), "plain GET")
            s.wait_log("GET /health 200 3$")
            smp = _tls_metrics(mport)
            eq((value(smp, "m0_tls_handshakes_total", loop="0", version="TLSv1.2"),
                value(smp, "m0_tls_handshakes_total", loop="0", version="TLSv1.3"),
                value(smp, "m0_tls_handshakes_resumed_total", loop="0")), (2.0, 1.0, 1.0),
               "handshakes by version, and resumed")
            eq(s.stop(), 0, "exit status")
            lines = [ln.split(": ", 1)[1] for ln in s.log_lines() if "GET /health" in ln]
            eq(lines, ["GET /health 200 3 (TLSv1.2)", "GET /health 200 3 (TLSv1.2)",
                       "GET /health 200 3 (TLSv1.3)", "GET /health 200 3"], "the access lines")
    finally:
        c.close()


def test_TL4_sighup_reload_keeps_open_connections_and_a_bad_set_keeps_the_old():
    c = Certs()
    try:
        a_crt, a_key = c.leaf("a", "a.test")
        b_crt, b_key = c.leaf("b", "a.test")  # a renewal: the same name, another key
        _, other_key = c.leaf("o", "o.test")
        crt, key = c.path("live.crt"), c.path("live.key")
        shutil.copy(a_crt, crt)
        shutil.copy(a_key, key)
        fingerprint = {}
        for name, path in (("a", a_crt), ("b", b_crt)):
            fingerprint[name] = subprocess.run(
                ["openssl", "x509", "-in", path, "-noout", "-fingerprint", "-sha256"],
                capture_output=True, check=True, text=True).stdout.strip()

        def presented(conn):
            der = conn.sock.getpeercert(binary_form=True)
            return subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-fingerprint",
                                   "-sha256"], input=der, capture_output=True,
                                  check=True).stdout.decode().strip()

        with Server("host_check", env={"M0_TLS_CERT": crt, "M0_TLS_KEY": key},
                    sockets=[("tcp", "http"), ("tcp", "https")]) as s:
            s.wait_ready()
            addr = _https_addr(s)
            old = _tls(addr, _ctx(c.ca))
            _get_ok(old, "GET before the reload")
            eq(presented(old), fingerprint["a"], "the certificate before the reload")
            shutil.copy(b_crt, crt)
            shutil.copy(b_key, key)
            s.send_signal(signal.SIGHUP)
            line = s.wait_log("TLS reload")
            check(line.endswith("TLS reloaded: 1 certificate for new handshakes; open "
                                "connections keep theirs"), f"the reload's line: {line!r}")
            new = _tls(addr, _ctx(c.ca))
            _get_ok(new, "GET after the reload")
            eq(presented(new), fingerprint["b"], "a new handshake's certificate")
            new.close()
            _get_ok(old, "the connection opened before still answers")
            # A key that is not the certificate's: refused, and b still serves.
            shutil.copy(other_key, key)
            s.send_signal(signal.SIGHUP)
            line = s.wait_log("TLS reload refused")
            want = (f"TLS reload refused, the certificates loaded before still serve: "
                    f"M0_TLS_KEY={key} does not match the certificate of M0_TLS_CERT={crt} "
                    f"(give the key the certificate was made for, or the certificate of this "
                    f"key)")
            check(line.endswith(want), f"the refusal's line: {line!r}, wanted {want!r}")
            again = _tls(addr, _ctx(c.ca))
            _get_ok(again, "GET after the bad reload")
            eq(presented(again), fingerprint["b"], "the certificate after the bad reload")
            again.close()
            _get_ok(old, "the first connection still answers")
            old.close()
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


def test_TL7_pipelining_large_and_chunked_bodies_over_tls():
    c = Certs()
    try:
        with _serving(c) as s:
            s.wait_ready()
            conn = _tls(_https_addr(s), _ctx(c.ca))
            # Three requests in one write: answered in order on the kept connection.
            conn.send(b"GET /health HTTP/1.1\r\nHost: a\r\n\r\n" * 3)
            for i in range(3):
                r = conn.read_response()
                eq((r.status, r.body), (200, b"ok\n"), f"pipelined answer {i}")
            # A body of 1 MiB, many records, some of whose plaintext waits inside OpenSSL
            # between reads; its echo comes back whole, also many records.
            body = bytes(range(256)) * 4096
            conn.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n" % len(body)
                      + body)
            r = conn.read_response()
            eq((r.status, len(r.body), r.body == body), (200, len(body), True), "the echo")
            # Chunked, with Expect: 100-continue.
            conn.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
                      b"Expect: 100-continue\r\n\r\n")
            r = conn.read_response()
            eq(r.status, 100, "100-continue over TLS")
            conn.send(b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
            r = conn.read_response()
            eq((r.status, r.body), (200, b"hello world"), "the chunked echo")
            conn.send(b"HEAD /health HTTP/1.1\r\nHost: a\r\n\r\n")
            r = conn.read_response(head=True)
            eq((r.status, r.header("content-length")), (200, "3"), "HEAD over TLS")
            _get_ok(conn, "GET after them")
            conn.close()
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


class _Records:
    """A TLS client over a raw socket whose records the test sends in the segments it chooses:
    seal() turns one write into its record (ssl.MemoryBIO) without sending it. The handshake's
    last flight (the client's Finished) waits in the first seal()'s bytes. As a socket: recv and
    sendall of plaintext, for Conn."""

    def __init__(self, addr, ctx, name="a.test", timeout=10):
        self.raw = socket.create_connection(addr, timeout=timeout)
        self.raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out, server_hostname=name)
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.raw.sendall(self.out.read())
                self._feed()

    def _feed(self):
        data = self.raw.recv(65536)
        if data:
            self.inc.write(data)
        else:
            self.inc.write_eof()

    def seal(self, data):
        self.obj.write(data)
        return self.out.read()

    def settimeout(self, t):
        self.raw.settimeout(t)

    def sendall(self, data):
        self.raw.sendall(self.seal(data))

    def recv(self, n):
        while True:
            try:
                return self.obj.read(n)
            except ssl.SSLWantReadError:
                self._feed()
            except ssl.SSLZeroReturnError:
                return b""

    def close(self):
        self.raw.close()


def _raw_to_end(sock, timeout=10):
    """Every byte the socket brings until the peer's end of file (a timeout raises)."""
    sock.settimeout(timeout)
    raw = b""
    while True:
        data = sock.recv(65536)
        if not data:
            return raw
        raw += data


def _echo(body):
    return b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def test_TL7_records_in_one_segment_and_a_byte_at_a_time():
    """m0 reads the socket into its own buffer and OpenSSL takes the records from there (D246):
    what one read brought is all answered though no readiness of the socket announces it. The
    client's Finished and its first request in one segment; three requests, each its own record,
    in one segment; a record sent a byte a segment, then three so; each answered, in order."""
    c = Certs()
    try:
        with _serving(c) as s:
            s.wait_ready()
            for v, name in _VERSIONS:
                r = _Records(_https_addr(s), _ctx(c.ca, v))
                conn = Conn(r, 10)
                r.raw.sendall(r.seal(_echo(b"first")))
                eq(r.obj.version(), name, "the version agreed")
                got = conn.read_response()
                eq((got.status, got.body), (200, b"first"), f"{name}: behind the Finished")
                words = [b"one", b"two", b"three"]
                r.raw.sendall(b"".join(r.seal(_echo(w)) for w in words))
                for w in words:
                    got = conn.read_response()
                    eq((got.status, got.body), (200, w), f"{name}: three records, one segment")
                for batch in ([b"drip"], words):
                    seg = b"".join(r.seal(_echo(w)) for w in batch)
                    for i in range(len(seg)):
                        r.raw.send(seg[i:i + 1])
                    for w in batch:
                        got = conn.read_response()
                        eq((got.status, got.body), (200, w), f"{name}: a byte a segment")
                r.close()
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


def test_TL7_pipelined_behind_a_pool_job_over_tls():
    """A blocking route's request (the pool answers it: HTTP/1.1 reads nothing meanwhile) and
    four pipelined requests behind it, 65.6 KB in one segment: more than one read of the socket
    brings (64 KiB, D246), so the last request's bytes wait in m0's buffer with the socket
    drained. When the pool's answer is out, reading resumes with them: all five answered at
    once, in order, not the last at the header timeout."""
    c = Certs()
    try:
        with _serving(c, env={"M0_BLOCKING_THREADS": "1", "M0_THREADS": "1",
                              "M0_HEADER_TIMEOUT_MS": "8000"}) as s:
            s.wait_ready()
            r = _Records(_https_addr(s), _ctx(c.ca, ssl.TLSVersion.TLSv1_3))
            conn = Conn(r, 10)
            r.raw.sendall(r.seal(b"GET /health HTTP/1.1\r\nHost: a\r\n\r\n"))
            eq(conn.read_response().status, 200, "after the handshake")
            first = b"GET /slow?ms=300 HTTP/1.1\r\nHost: a\r\n\r\n"
            pad = (65600 - len(first)) // 4 - 36
            reqs = [b"GET /pid HTTP/1.1\r\nHost: a\r\nX: " + b"a" * pad + b"\r\n\r\n"
                    for _ in range(4)]
            t0 = time.monotonic()
            r.raw.sendall(r.seal(first + b"".join(reqs)))
            got = [conn.read_response() for _ in range(5)]
            elapsed = time.monotonic() - t0
            eq([g.status for g in got], [200] * 5, "five answers")
            eq([g.header("x-thread") != "-1" for g in got], [True] + [False] * 4,
               "the first from the pool, the rest on the loop")
            check(elapsed < 5, f"the five answered after {elapsed:.2f}s")
            r.close()
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


def test_TL7_a_record_begun_and_stalled_closes_at_the_idle_timeout():
    """Part of a record, then nothing: no request has begun (its bytes are in OpenSSL, not yet
    plaintext), so the connection is idle and closed at M0_IDLE_TIMEOUT_MS with close_notify,
    as before D246; the server is not woken for it meanwhile."""
    c = Certs()
    try:
        with _serving(c, env={"M0_IDLE_TIMEOUT_MS": "1000"}) as s:
            s.wait_ready()
            r = _Records(_https_addr(s), _ctx(c.ca, ssl.TLSVersion.TLSv1_3))
            conn = Conn(r, 10)
            r.raw.sendall(r.seal(_echo(b"first")))
            got = conn.read_response()
            eq((got.status, got.body), (200, b"first"), "the first answer")
            rec = r.seal(_echo(b"stalled"))
            t0 = time.monotonic()
            r.raw.sendall(rec[:len(rec) // 2])
            raw = _raw_to_end(r.raw)
            elapsed = time.monotonic() - t0
            check(0.9 < elapsed < 5, f"closed after {elapsed:.2f}s")
            r.inc.write(raw)
            r.inc.write_eof()
            eq(conn.sock.recv(100), b"", "close_notify before the end")
            r.close()
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


def test_TL7_five_connections_of_one_loop_whose_bursts_take_the_buffer_in_turn():
    """Five connections on one loop each send 20 pipelined requests (46 to 90 KB, more than
    the 64 KiB one read of the socket brings), in two halves, the five first halves before the
    five second ones: a read leaves a connection's bytes in the thread's buffer and the next
    connection read moves them into a copy of their own (D246's eviction). Every request is
    answered with its own body, in order, three rounds, over TLS 1.3 and 1.2."""
    c = Certs()
    try:
        with _serving(c, env={"M0_THREADS": "1"}) as s:
            s.wait_ready()
            for v, name in _VERSIONS:
                rs = [_Records(_https_addr(s), _ctx(c.ca, v)) for _ in range(5)]
                conns = [Conn(r, 20) for r in rs]
                for rnd in range(3):
                    bodies = [[b"%d-%d-%d|" % (rnd, j, k) * (300 + 97 * k) for k in range(20)]
                              for j in range(5)]
                    segs = [r.seal(b"".join(_echo(b) for b in bodies[j]))
                            for j, r in enumerate(rs)]
                    for r, seg in zip(rs, segs):
                        r.raw.sendall(seg[:len(seg) // 2])
                    for r, seg in zip(rs, segs):
                        r.raw.sendall(seg[len(seg) // 2:])
                    for j, conn in enumerate(conns):
                        for k, b in enumerate(bodies[j]):
                            got = conn.read_response()
                            eq((got.status, got.body), (200, b),
                               f"{name}: round {rnd}, connection {j}, request {k}")
                for r in rs:
                    r.close()
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


def test_TL7_a_request_and_close_notify_in_one_segment_are_answered_and_closed():
    """A client's last request and its close_notify in one segment: one read of the socket
    brings both, OpenSSL takes the request's record and then the close_notify behind it (D246).
    The request is answered and the connection closed at once with m0's close_notify, though the
    socket, drained, is never readable again; not left open to the idle timeout. So too a record
    m0 cannot decrypt behind a request: OpenSSL's alert has ended the session (no answer can
    follow it), and the connection is closed at once (D255)."""
    c = Certs()
    try:
        with _serving(c, env={"M0_IDLE_TIMEOUT_MS": "20000"}) as s:
            s.wait_ready()
            for v, name in _VERSIONS:
                for tail in ("close_notify", "a bad record"):
                    r = _Records(_https_addr(s), _ctx(c.ca, v))
                    conn = Conn(r, 10)
                    r.raw.sendall(r.seal(_echo(b"first")))
                    got = conn.read_response()
                    eq((got.status, got.body), (200, b"first"), f"{name}: the first answer")
                    rec = r.seal(_echo(b"last"))
                    if tail == "close_notify":
                        try:
                            r.obj.unwrap()
                        except ssl.SSLWantReadError:
                            pass
                        end = r.out.read()
                    else:
                        end = bytearray(r.seal(b"GET /health HTTP/1.1\r\nHost: a\r\n\r\n"))
                        end[-1] ^= 1
                        end = bytes(end)
                    t0 = time.monotonic()
                    r.raw.sendall(rec + end)
                    raw = _raw_to_end(r.raw)
                    elapsed = time.monotonic() - t0
                    check(elapsed < 3, f"{name}, {tail}: closed after {elapsed:.2f}s")
                    if tail == "close_notify":
                        r.inc.write(raw)
                        r.inc.write_eof()
                        got = conn.read_response()
                        eq((got.status, got.body), (200, b"last"), f"{name}: answered")
                        eq(conn.sock.recv(100), b"", f"{name}: m0's close_notify")
                    r.close()
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


def test_TL7_hsts_and_the_servers_suite_order():
    """An app's answer over TLS carries Strict-Transport-Security for M0_TLS_HSTS_S (two years
    by default), the same answer over plain HTTP none, and 0 sends none; it carries
    X-Content-Type-Options: nosniff over TLS whatever M0_TLS_HSTS_S says, and none over plain
    HTTP (D226); the server's suite order gives AES-128-GCM to a client that lists AES-256-GCM
    first, in TLS 1.3 and 1.2 (D145)."""
    c = Certs()
    try:
        for env, want in (({}, "max-age=63072000"), ({"M0_TLS_HSTS_S": "600"}, "max-age=600"),
                          ({"M0_TLS_HSTS_S": "0"}, None)):
            with _serving(c, env=env) as s:
                s.wait_ready()
                conn = _tls(_https_addr(s), _ctx(c.ca))
                r = _get_ok(conn, "GET over TLS")
                eq(r.header_all("Strict-Transport-Security"), [want] if want else [],
                   f"HSTS over TLS with {env}")
                eq(r.header_all("X-Content-Type-Options"), ["nosniff"],
                   f"nosniff over TLS with {env}")
                conn.close()
                plain = Conn.tcp(s.tcp_addr)
                r = _get_ok(plain, "plain GET")
                eq(r.header_all("Strict-Transport-Security"), [], "HSTS over plain HTTP")
                eq(r.header_all("X-Content-Type-Options"), [], "nosniff over plain HTTP")
                plain.close()
                if not env:
                    v13 = _ctx(c.ca, ssl.TLSVersion.TLSv1_3)
                    conn = _tls(_https_addr(s), v13)
                    eq(conn.sock.cipher()[0], "TLS_AES_128_GCM_SHA256", "the TLS 1.3 suite")
                    conn.close()
                    v12 = _ctx(c.ca, ssl.TLSVersion.TLSv1_2,
                               ciphers="ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256")
                    conn = _tls(_https_addr(s), v12)
                    eq(conn.sock.cipher()[0], "ECDHE-ECDSA-AES128-GCM-SHA256", "the TLS 1.2 suite")
                    conn.close()
                eq(s.stop(), 0, "exit status")
    finally:
        c.close()


# ---- real clients (TL8): Node and Chromium ----

# Node: its https module trusting the test CA by the `ca:` option (a.test named by SNI on a
# connection to 127.0.0.1), and its fetch trusting it through NODE_EXTRA_CA_CERTS (the leaf
# names 127.0.0.1 too): counter's page, an event stream on each, the POST whose event both read.
# Prints one JSON line: what each got, in order.
NODE_TLS = r"""
const https = require('https');
const fs = require('fs');
const [port, caFile] = process.argv.slice(1);
const ca = fs.readFileSync(caFile);
const base = `https://127.0.0.1:${port}`;
const opts = (path, method = 'GET') => ({ host: '127.0.0.1', port: Number(port), servername: 'a.test',
  ca, path, method, headers: { host: `a.test:${port}` } });
const fail = (e) => { console.error(e); process.exit(1); };
const get = (path) => new Promise((resolve, reject) => {
  const req = https.request(opts(path), (res) => {
    const version = res.socket.getProtocol();
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (d) => { body += d; });
    res.on('end', () => resolve([res.statusCode, body, version]));
  });
  req.on('error', reject);
  req.end();
});
// An event stream by the https module: resolves `open` at its first bytes, `event` once the
// bytes hold a whole event after them.
const httpsStream = () => {
  let onOpen, onEvent, bytes = '', head;
  const open = new Promise((r) => { onOpen = r; });
  const event = new Promise((r) => { onEvent = r; });
  const req = https.request(opts('/events'), (res) => {
    head = [res.statusCode, res.headers['content-type']];
    res.setEncoding('utf8');
    res.on('data', (d) => {
      bytes += d;
      if (bytes.includes('\n\n')) onOpen();
      if (bytes.includes('id: ')) {
        if (bytes.endsWith('\n\n')) { onEvent([...head, bytes]); req.destroy(); }
      }
    });
  });
  req.on('error', (e) => { if (!req.destroyed) fail(e); });
  req.end();
  return { open, event };
};
const fetchStream = async () => {
  const res = await fetch(`${base}/events`);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let bytes = '', onOpen;
  const open = new Promise((r) => { onOpen = r; });
  const event = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return [res.status, res.headers.get('content-type'), bytes + '<end>'];
      bytes += dec.decode(value, { stream: true });
      if (bytes.includes('\n\n')) onOpen();
      if (bytes.includes('id: ') && bytes.endsWith('\n\n')) {
        reader.cancel();
        return [res.status, res.headers.get('content-type'), bytes];
      }
    }
  })();
  return { open, event };
};
(async () => {
  const index = await get('/');
  const r = await fetch(`${base}/`);
  const fetched = [r.status, await r.text()];
  const a = httpsStream();
  const b = await fetchStream();
  await a.open;
  await b.open;
  const post = await fetch(`${base}/increment`, { method: 'POST' });
  const posted = [post.status, post.headers.get('x-event-id'), await post.text()];
  console.log(JSON.stringify({ index, fetched, posted, https: await a.event, fetch: await b.event }));
  process.exit(0);
})().catch(fail);
"""


def _counter_tls(c, env=None):
    """counter with a plain socket named http and a TLS one named https: a.test's pair, its
    leaf naming 127.0.0.1 too; no heartbeats, so a stream's bytes are its events."""
    crt, key = c.leaf("a", "a.test", ip=True)
    return Server("counter", env={"M0_TLS_CERT": crt, "M0_TLS_KEY": key,
                                  "M0_SSE_HEARTBEAT_MS": 0, **(env or {})},
                  sockets=[("tcp", "http"), ("tcp", "https")], state_dir=True)


OPEN = ": open\n\nretry: 2000\n\n"  # a stream's first bytes (S1, H9)
EVENT1 = 'id: 1\nevent: value\ndata: {"counter":"default","value":1}\n\n'


def test_TL8_node_https_and_fetch_read_an_event_stream():
    """Node over TLS (TL8): its https module trusting the test CA by `ca:` and its fetch by
    NODE_EXTRA_CA_CERTS each get counter's page (200 `{}`) over TLS 1.3, each hold an event
    stream, and both streams get exactly `: open`, then event 1, the one a POST by fetch made
    (204, x-event-id 1)."""
    c = Certs()
    try:
        with _counter_tls(c) as s:
            s.wait_ready()
            port = _https_addr(s)[1]
            p = subprocess.run([tool("node", "nodejs"), "-e", NODE_TLS, str(port), c.ca],
                               capture_output=True, text=True, timeout=60,
                               env={**os.environ, "NODE_EXTRA_CA_CERTS": c.ca})
            eq(p.returncode, 0, f"node: {p.stdout} {p.stderr[-2000:]}")
            got = json.loads(p.stdout.strip().splitlines()[-1])
            eq(got, {"index": [200, "{}\n", "TLSv1.3"], "fetched": [200, "{}\n"],
                     "posted": [204, "1", ""],
                     "https": [200, "text/event-stream", OPEN + EVENT1],
                     "fetch": [200, "text/event-stream", OPEN + EVENT1]}, "what node got")
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


def spki_sha256(crt):
    """The base64 SHA-256 of the certificate's public key (its DER SubjectPublicKeyInfo), as
    Chromium's --ignore-certificate-errors-spki-list takes it."""
    pub = subprocess.run(["openssl", "x509", "-in", crt, "-noout", "-pubkey"], check=True,
                         capture_output=True, timeout=20).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "DER"], input=pub,
                         check=True, capture_output=True, timeout=20).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def chromium_page(c, s, n, *flags):
    """sse_page.mjs in headless Chromium on counter's page over https (a.test), accepting the
    test leaf by its key, with `n` EventSources: ({what the page saw}, [the responses the
    DevTools protocol reported])."""
    here = os.path.dirname(os.path.abspath(__file__))
    port = _https_addr(s)[1]
    out = subprocess.run([tool("node", "nodejs"), "--experimental-websocket", "--no-warnings",
                          os.path.join(here, "sse_page.mjs"), tool("chromium", "chromium"),
                          f"https://a.test:{port}/", spki_sha256(c.path("a.crt")), str(n),
                          *flags], capture_output=True, text=True, timeout=120)
    last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    eq(out.returncode, 0, f"the page's steps: {last} {out.stderr[-2000:]}")
    got = json.loads(last)
    return got["page"], got["responses"]


def response_counts(responses):
    """[((url, status, protocol), how many)] of the responses the DevTools protocol reported,
    sorted; the browser's own /favicon.ico, which it asks for at a time of its choosing once
    the page has loaded, left out."""
    return sorted(collections.Counter((r["url"], r["status"], r["protocol"]) for r in responses
                                      if not r["url"].endswith("/favicon.ico")).items())


def test_TL8_chromium_page_and_event_source_over_tls():
    """Chromium over TLS, HTTP/1.1 (--disable-http2) (TL8): it loads counter's page from
    https://a.test, an EventSource there opens, fetch() gets GET / (200 `{}`) and POST
    /increment (204, x-event-id 1) meanwhile, and the EventSource receives event 1 with its
    exact data; the DevTools protocol reports each of those responses over http/1.1 with its
    status."""
    c = Certs()
    try:
        with _counter_tls(c) as s:
            s.wait_ready()
            port = _https_addr(s)[1]
            page, responses = chromium_page(c, s, 1, "--disable-http2")
            eq(page, {"origin": f"https://a.test:{port}", "index": [200, "{}\n"],
                      "post": [204, "1"], "open": 1,
                      "events": [["1", '{"counter":"default","value":1}']]}, "what the page saw")
            origin = f"https://a.test:{port}"
            eq(response_counts(responses),
               [((origin + "/", 200, "http/1.1"), 2), ((origin + "/events", 200, "http/1.1"), 1),
                ((origin + "/increment", 204, "http/1.1"), 1)], "the responses Chromium reported")
            eq(s.stop(), 0, "exit status")
    finally:
        c.close()


# run.py runs it alone: a browser takes both cores for a while.
test_TL8_chromium_page_and_event_source_over_tls.serial = True
test_TL8_chromium_page_and_event_source_over_tls.once = True  # a browser: the plain variant only (run.py, D235)


# ---- a crowd of slow handshakes (TL6) ----


def _client_hello(ca):
    """The bytes of a ClientHello for a.test, as Python's ssl would send them."""
    out = ssl.MemoryBIO()
    obj = _ctx(ca).wrap_bio(ssl.MemoryBIO(), out, server_hostname="a.test")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


@nofile(1100, "1000 connections dripping a ClientHello beside a normal client")
def test_TL6_a_thousand_clients_dripping_a_client_hello():
    """1000 connections to the TLS socket each send a ClientHello one byte a second; a normal
    client on the same loop, over TLS, is answered within 500 ms throughout, on its kept
    connection and on a new one (a full handshake) every tenth request, as H2's slowloris
    test asks of HTTP/1.1 heads; every dripping connection is closed no sooner than
    M0_TLS_HANDSHAKE_TIMEOUT_MS (6 s) after its connect and within 3 s past it, with nothing
    or one alert record before its end, each counted as a timeout. Whole in the plain run
    (M0_HEAVY=1); 300 under the sanitizers, whose slower loop is not what is measured here."""
    n = 1000 if os.environ.get("M0_HEAVY") == "1" else 300
    hs_s = 6.0
    c = Certs()
    socks = []
    sel = selectors.DefaultSelector()
    try:
        mport = free_port()
        env = {"M0_THREADS": "1", "M0_TLS_HANDSHAKE_TIMEOUT_MS": str(int(hs_s * 1000)),
               "M0_METRICS": f"127.0.0.1:{mport}"}
        with _serving(c, env=env) as s:
            s.wait_ready()
            addr = _https_addr(s)
            ctx = _ctx(c.ca)
            hello = _client_hello(c.ca)
            check(len(hello) > 100 and hello[:1] == b"\x16", f"a ClientHello: {hello[:16]!r}")
            normal = _tls(addr, ctx)
            _get_ok(normal, "the normal client before")
            opened = []
            for _ in range(n):
                k = socket.create_connection(addr, timeout=5)
                opened.append(time.monotonic())
                k.setblocking(False)
                socks.append(k)
            got, eof, sent = [b""] * n, [None] * n, [0] * n
            for i, k in enumerate(socks):
                sel.register(k, selectors.EVENT_READ, i)

            def drip():
                for i, k in enumerate(socks):
                    if eof[i] is None and sent[i] < len(hello):
                        try:
                            k.send(hello[sent[i] : sent[i] + 1])
                            sent[i] += 1
                        except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                            pass

            def pump(timeout):
                for key, _ in sel.select(timeout):
                    i = key.data
                    try:
                        data = key.fileobj.recv(4096)
                    except BlockingIOError:
                        continue
                    except ConnectionResetError:
                        data = b""
                    if data:
                        got[i] += data
                    else:
                        eof[i] = time.monotonic()
                        sel.unregister(key.fileobj)

            drip()
            next_drip = time.monotonic() + 1.0
            lat, fresh = [], 0
            end = opened[-1] + hs_s + 4.0
            while time.monotonic() < end:
                pump(0.05)
                if time.monotonic() >= next_drip:
                    drip()
                    next_drip += 1.0
                t = time.monotonic()
                if len(lat) % 10 == 9:  # now and then a new connection: a full handshake
                    f = _tls(addr, ctx, timeout=5)
                    r = f.get("/health", timeout=5)
                    f.close()
                    fresh += 1
                else:
                    r = normal.get("/health", timeout=5)
                lat.append(time.monotonic() - t)
                eq((r.status, r.body), (200, b"ok\n"), "the normal client's request")
                if all(e is not None for e in eof):
                    break
                time.sleep(0.05)
            open_ = [i for i in range(n) if eof[i] is None]
            check(not open_, f"{len(open_)} of {n} still open {hs_s + 4:.0f}s after their connect")
            early = [eof[i] - opened[i] for i in range(n) if eof[i] - opened[i] < hs_s - 0.05]
            check(not early, f"{len(early)} closed before the bound, e.g. after {early[:1]}s")
            late = [eof[i] - opened[i] for i in range(n) if eof[i] - opened[i] > hs_s + 3.0]
            check(not late, f"{len(late)} closed more than 3 s past the bound, e.g. {late[:1]}s")
            bad = [got[i] for i in range(n)
                   if not (got[i] == b"" or (got[i][:1] == b"\x15" and len(got[i]) == 7))]
            check(not bad, f"{len(bad)} got more than an alert, e.g. {bad[:1]!r}")
            check(min(sent) >= 3, f"a dripping connection sent only {min(sent)} bytes")
            check(len(lat) >= 40 and fresh >= 4, f"only {len(lat)} normal requests, {fresh} new")
            check(max(lat) < 0.5, f"the normal client waited {max(lat):.3f}s (of {len(lat)})")
            _get_ok(normal, "the normal client after")
            normal.close()
            smp = _tls_metrics(mport)
            eq({r: value(smp, "m0_tls_handshakes_failed_total", loop="0", reason=r)
                for r in ("error", "timeout", "busy")},
               {"error": 0.0, "timeout": float(n), "busy": 0.0}, "handshakes failed by reason")
            eq(value(smp, "m0_tls_handshakes_total", loop="0", version="TLSv1.3"),
               float(1 + fresh), "the normal client's handshakes")
            eq(s.stop(), 0, "exit status")
    finally:
        sel.close()
        for k in socks:
            k.close()
        c.close()


# it compares timings: run.py runs it alone
test_TL6_a_thousand_clients_dripping_a_client_hello.serial = True
test_TL6_a_thousand_clients_dripping_a_client_hello.once = True  # a crowd against a time bound: the plain variant only (run.py, D235)
