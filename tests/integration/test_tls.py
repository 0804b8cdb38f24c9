# SPDX-License-Identifier: MIT
"""TLS's certificates at the start (SPEC TL2, TL3): each refusal exits 78 with one line naming the
file and the fix; the doctor prints every certificate and never a key; a certificate near its end
is a journal warning at the start and a metric. Every key and certificate is made here, with the
openssl command, in a temporary directory."""

import json
import os
import re
import subprocess
import tempfile

from m0test import Server, check, eq, free_port, run_app
from test_metrics import samples, scrape, value


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

    def leaf(self, name, cn, days=60, curve="P-256"):
        """name.crt and name.key: an ECDSA leaf for cn (and DNS:cn) the CA issued."""
        key, csr, crt = self.path(name + ".key"), self.path(name + ".csr"), self.path(name + ".crt")
        _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", f"ec_paramgen_curve:{curve}",
                 "-nodes", "-subj", f"/CN={cn}", "-keyout", key, "-out", csr)
        ext = self.path(name + ".ext")
        with open(ext, "w") as f:
            f.write(f"subjectAltName=DNS:{cn}\nbasicConstraints=critical,CA:FALSE\n")
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
