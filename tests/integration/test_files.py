# SPDX-License-Identifier: MIT
"""Files served (SPEC SF1, SF2, SF3): todo with M0_TODO_WWW serves a directory at /app/. A file
with its type, ETag and Last-Modified; 304 for its ETag and for If-Modified-Since; one range
206 with Content-Range, 416 past the end, several ranges the whole file; a 1 MiB file whole,
byte for byte, and HEAD with its length and no body; /app/ is index.html; app.js from app.js.gz
for a gzip client with Vary, the plain file for the others; seven ways out of the root serve
nothing from outside it; a file that shrinks while it is sent closes the connection at its
end rather than pretend to the length it announced. SF5 (D237, D238): requests pipelined into
one turn are answered from the turn's cache as they are without it, at every bound; a file
replaced or changed between two turns is served as it is now; a 304 carries what RFC 9110
15.4.5 asks of it and no Last-Modified."""

import email.utils
import gzip
import os
import shutil
import socket
import subprocess
import tempfile

import m0test
from m0test import Server, check, eq, run_app, tool

MIB = 1 << 20
SECRET = b"OUTSIDE-THE-ROOT-7f3a"
APP_JS = b"// app.js\n" + b"".join(b"console.log(%d);\n" % i for i in range(400))


class Site:
    """A served directory (www/) beside a secret outside it, and todo serving it at /app/."""

    def __init__(self, env=None, **server):
        self.extra, self.server = env or {}, server

    def __enter__(self):
        self.top = tempfile.mkdtemp(prefix="m0files-")
        self.www = os.path.join(self.top, "www")
        os.mkdir(self.www)
        os.mkdir(os.path.join(self.www, "sub"))
        self.put("a.txt", b"hello, a\n")
        self.put("index.html", b"<!doctype html><title>todo</title>\n")
        self.put("sub/b.txt", b"b\n")
        self.put("big.bin", os.urandom(MIB))
        self.put("app.js", APP_JS)
        self.put("app.js.gz", gzip.compress(APP_JS, 9, mtime=0))
        # app.js.gz not older than app.js, or it is skipped as stale (D181)
        st = os.stat(os.path.join(self.www, "app.js"))
        os.utime(os.path.join(self.www, "app.js.gz"), ns=(st.st_atime_ns, st.st_mtime_ns))
        with open(os.path.join(self.top, "secret.txt"), "wb") as f:
            f.write(SECRET)
        os.symlink("../secret.txt", os.path.join(self.www, "link_out"))
        self.put(".env", SECRET)
        env = {"M0_TODO_DB": os.path.join(self.top, "todo.db"), "M0_TODO_WWW": self.www,
               **self.extra}
        self.s = Server("todo", env=env, **self.server)
        self.s.__enter__()
        self.s.wait_ready()
        return self

    def put(self, name, data):
        with open(os.path.join(self.www, name), "wb") as f:
            f.write(data)

    def url(self, path):
        return f"http://127.0.0.1:{self.s.port}{path}"

    def __exit__(self, *exc):
        try:
            self.s.__exit__(*exc)
        finally:
            shutil.rmtree(self.top, ignore_errors=True)
        return False


def etag_of(path):
    st = os.stat(path)
    return '"%x-%x-%x"' % (st.st_ino, st.st_size, st.st_mtime_ns)


def curl(*args):
    out = subprocess.run([tool("curl", "curl"), "-sS", "-m", "10", *args], capture_output=True)
    eq(out.returncode, 0, f"curl {args}: {out.stderr!r}")
    return out.stdout


def test_SF2_a_file_with_its_type_etag_and_dates():
    with Site() as w:
        head = curl("-D", "-", "-o", os.path.join(w.top, "a.out"), w.url("/app/a.txt"))
        lines = head.decode().split("\r\n")
        eq(lines[0], "HTTP/1.1 200 OK", "status line")
        fields = {k.lower(): v for k, _, v in (ln.partition(": ") for ln in lines[1:] if ln)}
        with open(os.path.join(w.top, "a.out"), "rb") as f:
            eq(f.read(), b"hello, a\n", "the body")
        path = os.path.join(w.www, "a.txt")
        mtime = os.stat(path).st_mtime
        eq(fields.get("content-type"), "text/plain; charset=utf-8", "Content-Type")
        eq(fields.get("content-length"), "9", "Content-Length")
        eq(fields.get("etag"), etag_of(path), "ETag: inode, size, mtime in ns (D176)")
        eq(fields.get("last-modified"), email.utils.formatdate(mtime, usegmt=True),
           "Last-Modified")
        eq(fields.get("cache-control"), "no-cache", "Cache-Control (D178)")
        eq(fields.get("accept-ranges"), "bytes", "Accept-Ranges")

        c = w.s.connect()
        r = c.get("/app/a.txt", [("If-None-Match", etag_of(path))])
        eq((r.status, r.body, r.header("ETag"), r.header("Content-Length")),
           (304, b"", etag_of(path), None), "If-None-Match with its ETag")
        r = c.get("/app/a.txt", [("If-Modified-Since",
                                  email.utils.formatdate(mtime, usegmt=True))])
        eq((r.status, r.body), (304, b""), "If-Modified-Since its Last-Modified")
        r = c.get("/app/a.txt", [("If-Modified-Since",
                                  email.utils.formatdate(mtime - 86400, usegmt=True))])
        eq((r.status, r.body), (200, b"hello, a\n"), "If-Modified-Since a day before")
        r = c.get("/app/a.txt", [("If-None-Match", '"another"')])
        eq((r.status, r.body), (200, b"hello, a\n"), "If-None-Match with another tag")
        c.close()


def test_SF2_ranges():
    with Site() as w:
        c = w.s.connect()
        r = c.get("/app/a.txt", [("Range", "bytes=2-4")])
        eq((r.status, r.header("Content-Range"), r.header("Content-Length"), r.body),
           (206, "bytes 2-4/9", "3", b"llo"), "one range")
        r = c.get("/app/a.txt", [("Range", "bytes=-2")])
        eq((r.status, r.header("Content-Range"), r.body), (206, "bytes 7-8/9", b"a\n"),
           "a suffix range")
        r = c.get("/app/a.txt", [("Range", "bytes=9-")])
        eq((r.status, r.header("Content-Range"), r.body), (416, "bytes */9", b""),
           "a range past the end")
        r = c.get("/app/a.txt", [("Range", "bytes=0-1,4-5")])
        eq((r.status, r.header("Content-Range"), r.body), (200, None, b"hello, a\n"),
           "several ranges: the whole file")
        r = c.get("/app/a.txt", [("Range", "bytes=0-1"), ("If-Range", '"stale"')])
        eq((r.status, r.body), (200, b"hello, a\n"), "If-Range with another tag")
        # RFC 9110 14.2: Range is defined for GET alone, and ignored on a HEAD.
        r = c.exchange("HEAD", "/app/a.txt", [("Range", "bytes=2-4")])
        eq((r.status, r.header("Content-Range"), r.header("Content-Length"), r.body),
           (200, None, "9", b""), "HEAD with a Range: the 200's head")
        r = c.exchange("HEAD", "/app/a.txt", [("Range", "bytes=9-")])
        eq((r.status, r.header("Content-Length")), (200, "9"), "HEAD with a range past the end")
        # curl's own reading of a 206
        eq(curl("-r", "1-3", w.url("/app/a.txt")), b"ell", "curl -r 1-3")
        c.close()


def test_SF2_a_large_file_whole_and_head():
    with Site() as w:
        out = os.path.join(w.top, "big.out")
        curl("-o", out, w.url("/app/big.bin"))
        with open(out, "rb") as f, open(os.path.join(w.www, "big.bin"), "rb") as g:
            got, want = f.read(), g.read()
        eq(len(got), MIB, "bytes received")
        check(got == want, "the 1 MiB file byte for byte")
        c = w.s.connect()
        r = c.exchange("HEAD", "/app/big.bin")
        eq((r.status, r.header("Content-Length"), r.header("Content-Type")),
           (200, str(MIB), "application/octet-stream"), "HEAD")
        # No body followed the HEAD's head: the next answer on the connection is whole.
        r = c.get("/app/a.txt")
        eq((r.status, r.body), (200, b"hello, a\n"), "the request after the HEAD")
        # Two files pipelined on one connection: each body whole, in order.
        c.send(b"GET /app/big.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /app/a.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        r1, r2 = c.read_response(), c.read_response()
        check(r1.status == 200 and r1.body == want, "the pipelined 1 MiB file byte for byte")
        eq((r2.status, r2.body), (200, b"hello, a\n"), "the file pipelined behind it")
        c.close()


def pipelined(w, reqs):
    """Each of `reqs` ((method, path, headers)) sent in one write on one connection, so that one
    read takes them all and one turn answers them; their answers, in order."""
    c = w.s.connect()
    try:
        c.send(b"".join(m0test.build_request(m, p, h) for m, p, h in reqs))
        return [c.read_response(head=m == "HEAD") for m, _, _ in reqs]
    finally:
        c.close()


def test_SF5_one_turns_answers_from_its_cache():
    """The same requests, pipelined into one turn (the turn's budget raised so that a
    sanitizer's build still takes them in one), answered alike with the turn's cache at its
    default, at a bound of 1 (one entry, the rest opened and closed per answer) and off (D237):
    a file and its 304, HEAD and range; a sibling by Accept-Encoding and the plain file beside
    it; a directory's redirect and its index; the 1 MiB file twice, each byte for byte (the
    cache's descriptor taken past the turn by the connection); and a name out of the root
    refused each time."""
    for bound in (None, "1", "0"):
        env = {"M0_TURN_BUDGET_MS": "1000"}
        if bound is not None:
            env["M0_FILES_TURN_CACHE"] = bound
        with Site(env) as w:
            path = os.path.join(w.www, "a.txt")
            tag = etag_of(path)
            with open(os.path.join(w.www, "big.bin"), "rb") as g:
                big = g.read()
            with open(os.path.join(w.www, "app.js.gz"), "rb") as g:
                gz = g.read()
            what = f"M0_FILES_TURN_CACHE={bound}"
            reqs = [("GET", "/app/a.txt", None),
                    ("GET", "/app/a.txt", [("If-None-Match", tag)]),
                    ("HEAD", "/app/a.txt", None),
                    ("GET", "/app/a.txt", [("Range", "bytes=2-4")]),
                    ("GET", "/app/app.js", [("Accept-Encoding", "gzip")]),
                    ("GET", "/app/app.js", None),
                    ("GET", "/app/app.js", [("Accept-Encoding", "gzip")]),
                    ("GET", "/app", None),
                    ("GET", "/app/", None),
                    ("GET", "/app", None),
                    ("GET", "/app/big.bin", None),
                    ("GET", "/app/link_out", None),
                    ("GET", "/app/big.bin", None),
                    ("GET", "/app/link_out", None),
                    ("GET", "/app/a.txt", None)]
            r = pipelined(w, reqs)
            eq((r[0].status, r[0].body, r[0].header("ETag")), (200, b"hello, a\n", tag),
               f"{what}: the file")
            eq((r[1].status, r[1].body, r[1].header("ETag")), (304, b"", tag),
               f"{what}: its 304")
            eq((r[2].status, r[2].header("Content-Length"), r[2].body), (200, "9", b""),
               f"{what}: HEAD")
            eq((r[3].status, r[3].header("Content-Range"), r[3].body),
               (206, "bytes 2-4/9", b"llo"), f"{what}: a range")
            for i in (4, 6):
                eq((r[i].status, r[i].header("Content-Encoding"), r[i].header("Vary"),
                    r[i].body), (200, "gzip", "Accept-Encoding", gz), f"{what}: the sibling")
            eq((r[5].status, r[5].header("Content-Encoding"), r[5].body), (200, None, APP_JS),
               f"{what}: the plain file beside its sibling")
            for i in (7, 9):
                eq((r[i].status, r[i].header("Location")), (301, "/app/"),
                   f"{what}: the directory's redirect")
            eq((r[8].status, r[8].body), (200, b"<!doctype html><title>todo</title>\n"),
               f"{what}: the index")
            for i in (10, 12):
                check(r[i].status == 200 and r[i].body == big,
                      f"{what}: the 1 MiB file, byte for byte")
            for i in (11, 13):
                eq(r[i].status, 404, f"{what}: a name out of the root")
                check(SECRET not in r[i].body, f"{what}: nothing from outside the root")
            eq((r[14].status, r[14].body), (200, b"hello, a\n"), f"{what}: the file again")


def test_SF5_a_file_changed_between_turns_is_served_as_it_is_now():
    """A file replaced by a rename (another inode) and one rewritten in place (its size
    changed) between two requests, each request sent once the answer before it came, so in a
    turn of its own: each answer is the file as it is now, with its ETag; the old ETag no longer
    gets a 304 (D237)."""
    with Site() as w:
        path = os.path.join(w.www, "a.txt")
        c = w.s.connect()
        old = etag_of(path)
        r = c.get("/app/a.txt")
        eq((r.status, r.body, r.header("ETag")), (200, b"hello, a\n", old), "the file")
        tmp = os.path.join(w.www, "a.txt.new")
        with open(tmp, "wb") as f:
            f.write(b"a, replaced\n")
        os.rename(tmp, path)
        r = c.get("/app/a.txt")
        eq((r.status, r.body, r.header("ETag")), (200, b"a, replaced\n", etag_of(path)),
           "the file replaced by a rename")
        check(etag_of(path) != old, "another ETag")
        r = c.get("/app/a.txt", [("If-None-Match", old)])
        eq((r.status, r.body), (200, b"a, replaced\n"), "the old ETag matches no more")
        with open(path, "r+b") as f:
            f.truncate(0)
            f.write(b"x")
        r = c.get("/app/a.txt")
        eq((r.status, r.body, r.header("ETag")), (200, b"x", etag_of(path)),
           "the file rewritten in place")
        os.unlink(path)
        r = c.get("/app/a.txt")
        eq(r.status, 404, "the file removed")
        c.close()


def test_SF5_a_304s_head():
    """A 304 carries what RFC 9110 15.4.5 asks of it: Date, ETag, Cache-Control and Vary as the
    200 would have (with Server and the kept connection's Keep-Alive, D111), and no
    Last-Modified beside its ETag, no Content-Length, no body (D238); over HTTP/1.1 and, with
    If-Modified-Since, alike."""
    with Site() as w:
        path = os.path.join(w.www, "a.txt")
        tag = etag_of(path)
        c = w.s.connect()
        r = c.get("/app/a.txt")
        lm = r.header("Last-Modified")
        for h in ([("If-None-Match", tag)], [("If-Modified-Since", lm)]):
            r = c.get("/app/a.txt", h)
            eq((r.status, r.body), (304, b""), f"{h[0][0]}: 304")
            eq(r.names(), ["Server", "Date", "Keep-Alive", "ETag", "Cache-Control", "Vary"],
               f"{h[0][0]}: the 304's fields, in order")
            eq((r.header("ETag"), r.header("Cache-Control"), r.header("Vary")),
               (tag, "no-cache", "Accept-Encoding"), f"{h[0][0]}: their values")
        c.close()


def test_SF1_the_directory_index_and_no_listing():
    with Site() as w:
        c = w.s.connect()
        r = c.get("/app/")
        eq((r.status, r.header("Content-Type"), r.body),
           (200, "text/html; charset=utf-8", b"<!doctype html><title>todo</title>\n"),
           "/app/ is index.html")
        r = c.get("/app")
        eq((r.status, r.header("Location")), (301, "/app/"), "/app goes to /app/")
        r = c.get("/app/sub")
        eq(r.status, 404, "a directory without index.html: no listing")
        check(b"b.txt" not in r.body, "no listing")
        r = c.get("/app/missing.txt")
        eq((r.status, r.header("Content-Type")), (404, "application/problem+json"),
           "a missing file: the app's 404")
        r = c.exchange("POST", "/app/a.txt", [("Content-Type", "text/plain")], b"x")
        eq((r.status, r.header("Allow")), (405, "GET, HEAD, OPTIONS"), "POST to a file")
        c.close()


def test_SF3_precompressed_sibling_by_accept_encoding():
    with Site() as w:
        c = w.s.connect()
        with open(os.path.join(w.www, "app.js.gz"), "rb") as f:
            gz = f.read()
        r = c.get("/app/app.js", [("Accept-Encoding", "gzip, deflate")])
        eq((r.status, r.header("Content-Encoding"), r.header("Vary"),
            r.header("Content-Type"), r.body),
           (200, "gzip", "Accept-Encoding", "text/javascript; charset=utf-8", gz),
           "a gzip client gets app.js.gz")
        eq(r.header("ETag"), etag_of(os.path.join(w.www, "app.js.gz")), "the sibling's ETag")
        r = c.get("/app/app.js")
        eq((r.status, r.header("Content-Encoding"), r.header("Vary"), r.body),
           (200, None, "Accept-Encoding", APP_JS), "no Accept-Encoding: the plain file")
        r = c.get("/app/app.js", [("Accept-Encoding", "br, gzip;q=0")])
        eq((r.status, r.header("Content-Encoding"), r.body), (200, None, APP_JS),
           "gzip;q=0: the plain file")
        c.close()
        # and curl's --compressed, which decodes it
        eq(curl("--compressed", w.url("/app/app.js")), APP_JS, "curl --compressed")


def test_SF1_seven_ways_out_of_the_root():
    with Site() as w:
        ways = [
            ("/app/../secret.txt", 400),          # a dot segment
            ("/app/%2e%2e/secret.txt", 400),      # encoded dots
            ("/app/%2Fetc%2Fpasswd", 400),        # absolute, encoded
            ("/app//etc/passwd", 400),            # absolute through a double slash
            ("/app/..%2fsecret.txt", 400),        # an encoded slash after dots
            ("/app/link_out", 404),               # a symlink out of the root
            ("/app/.env", 404),                   # a dotfile
            ("/app/sub//b.txt", 404),             # an empty segment
            ("/app/sub/%2e%2e/%2e%2e/secret.txt", 400),
        ]
        for path, status in ways:
            s = socket.create_connection(("127.0.0.1", w.s.port), timeout=10)
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
            got = b""
            while True:
                d = s.recv(65536)
                if not d:
                    break
                got += d
            s.close()
            eq(got.split(b"\r\n", 1)[0].decode(), f"HTTP/1.1 {status} "
               + ("Bad Request" if status == 400 else "Not Found"), f"GET {path}")
            check(SECRET not in got, f"GET {path}: the secret was served")
            check(b"root:" not in got, f"GET {path}: /etc/passwd was served")


def test_SF2_a_file_that_shrinks_closes_the_connection():
    with Site() as w:
        size, cut = 32 * MIB, 12 * MIB
        data = os.urandom(size)
        w.put("grow.bin", data)
        # Until the client reads past the head, what the server can have sent is bounded by the
        # two sockets' buffers (net.ipv4.tcp_wmem's 4 MiB at most, and the receive window the
        # client has not grown by reading), far below `cut`.
        s = socket.create_connection(("127.0.0.1", w.s.port), timeout=20)
        s.sendall(b"GET /app/grow.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got:
            got += s.recv(4096)
        head, _, got = got.partition(b"\r\n\r\n")
        check(b"Content-Length: %d\r\n" % size in head + b"\r\n", f"the head: {head!r}")
        os.truncate(os.path.join(w.www, "grow.bin"), cut)
        parts = [got]
        while True:
            d = s.recv(1 << 16)
            if not d:
                break
            parts.append(d)
        s.close()
        got = b"".join(parts)
        eq(len(got), cut, "the body ends where the file now ends, and the connection closes")
        check(got == data[:cut], "the bytes sent are the file's")
        w.s.wait_log(r"a file shrank while it was sent")


def test_SF1_the_root_is_opened_at_start():
    """A directory that cannot be opened refuses the start (78) naming the route and the errno
    (D200); a dotfile named as the one file a route serves is refused too; a regular file is
    served as the route's one file, by the same resolution."""
    top = tempfile.mkdtemp(prefix="m0files-")
    try:
        env = {"M0_TODO_DB": os.path.join(top, "todo.db")}
        rc, _, err = run_app("todo", env={**env, "M0_TODO_WWW": os.path.join(top, "none")})
        eq(rc, 78, f"a missing root: {err}")
        check(f"route 8 (GET /app/*rest): files '{top}/none': No such file or directory" in err,
              f"the refusal names the route and the errno: {err!r}")
        with open(os.path.join(top, ".hidden"), "wb") as f:
            f.write(SECRET)
        rc, _, err = run_app("todo", env={**env, "M0_TODO_WWW": os.path.join(top, ".hidden")})
        eq(rc, 78, f"a dotfile as the one file: {err}")
        check("a dotfile is never served" in err, f"the refusal says why: {err!r}")
        with open(os.path.join(top, "one.txt"), "wb") as f:
            f.write(b"the one file\n")
        with Server("todo", env={**env, "M0_TODO_WWW": os.path.join(top, "one.txt")}) as s:
            s.wait_ready()
            c = s.connect()
            for path in ("/app/", "/app/x/y.txt"):
                r = c.get(path)
                eq((r.status, r.header("Content-Type"), r.body),
                   (200, "text/plain; charset=utf-8", b"the one file\n"), f"GET {path}")
            c.close()
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_SF2_files_over_http2():
    """The same files route over HTTP/2 by prior knowledge (SF2, HT2): the 1 MiB file byte for
    byte through the streams' flow control, a range, a 304 and a HEAD, as over HTTP/1.1."""
    with Site() as w:
        h2 = ["--http2-prior-knowledge", "-w", "\n%{http_version} %{http_code}"]
        out = os.path.join(w.top, "big.out")
        eq(curl("--http2-prior-knowledge", "-o", out, "-w", "%{http_version} %{http_code}",
                w.url("/app/big.bin")), b"2 200", "the 1 MiB file over h2")
        with open(out, "rb") as f, open(os.path.join(w.www, "big.bin"), "rb") as g:
            check(f.read() == g.read(), "the 1 MiB file over h2, byte for byte")
        eq(curl(*h2, "-r", "0-4", w.url("/app/a.txt")), b"hello\n2 206", "a range over h2")
        tag = etag_of(os.path.join(w.www, "a.txt"))
        eq(curl(*h2, "-H", f"If-None-Match: {tag}", w.url("/app/a.txt")), b"\n2 304",
           "a 304 over h2")
        head = curl("--http2-prior-knowledge", "-I", w.url("/app/big.bin"))
        check(head.startswith(b"HTTP/2 200") and f"content-length: {MIB}\r\n".encode() in head,
              f"HEAD over h2: {head!r}")
        eq(curl(*h2, w.url("/app/")), b"<!doctype html><title>todo</title>\n\n2 200",
           "the index over h2")
        # Streams of one connection taken in one turn share what its cache opened (D237): the
        # 1 MiB file twice and a small one twice in one connection's first packet (nghttp
        # asks for each name once: a query tells them apart; the route ignores it).
        urls = [w.url(f"/app/{n}?{i}") for i, n in enumerate(("big.bin", "a.txt") * 2)]
        p = subprocess.run([tool("nghttp", "nghttp2-client"), "-ns", *urls],
                           capture_output=True, text=True, timeout=30)
        eq(p.returncode, 0, f"nghttp: {p.stderr!r}")
        rows = sorted(ln.split()[-3:] for ln in p.stdout.splitlines()
                      if ln.strip().split(" ")[0].isdigit() and "/app/" in ln)
        eq(rows, [["200", "1M", "/app/big.bin?0"], ["200", "1M", "/app/big.bin?2"],
                  ["200", "9", "/app/a.txt?1"], ["200", "9", "/app/a.txt?3"]],
           "four streams over one h2 connection")


def test_SF2_files_over_tls():
    """The same files over TLS (SF2, TL7): the transport has no sendfile, so the 1 MiB file goes
    through its records, byte for byte, over HTTP/1.1 and over h2 by ALPN; a range too."""
    from test_tls import Certs

    c = Certs()
    try:
        crt, key = c.leaf("a", "a.test")
        with Site({"M0_TLS_CERT": crt, "M0_TLS_KEY": key},
                  sockets=[("tcp", "http"), ("tcp", "https")]) as w:
            port = next(s.getsockname()[1] for _, name, s in w.s.listeners if name == "https")
            base = ["--cacert", c.ca, "--resolve", f"a.test:{port}:127.0.0.1"]
            url = f"https://a.test:{port}/app"
            with open(os.path.join(w.www, "big.bin"), "rb") as g:
                want = g.read()
            for proto, label in (("--http1.1", b"1.1"), ("--http2", b"2")):
                out = os.path.join(w.top, "big.out")
                eq(curl(proto, *base, "-o", out, "-w", "%{http_version} %{http_code}",
                        url + "/big.bin"), label + b" 200", f"the 1 MiB file over TLS {proto}")
                with open(out, "rb") as f:
                    check(f.read() == want, f"the 1 MiB file over TLS {proto}, byte for byte")
                eq(curl(proto, *base, "-r", "0-4", "-w", "\n%{http_code}", url + "/a.txt"),
                   b"hello\n206", f"a range over TLS {proto}")
    finally:
        c.close()
