# SPDX-License-Identifier: MIT
"""Cookies, forms and JSON through the real binary (SPEC Q1-Q3): host_check's /q/ routes read
them with m0_req_cookie, m0_req_form and m0_req_json, set cookies with m0_res_cookie, answer
with m0_res_json_value and publish with m0_publish_json; M0_JSON_MAX_DEPTH bounds a body."""

import json

from m0test import SSEReader, Server, check, eq, open_stream, run_app


def _post(c, path, body, ct="application/json"):
    return c.exchange("POST", path, [("Content-Type", ct)] if ct else [], body)


def test_Q1_cookies_read_and_set():
    with Server("host_check") as s:
        s.wait_ready()
        c = s.connect()
        for header, name, value in (
            ("a=b; sid=xyz; c=d", "sid", "xyz"),
            ('sid="quoted"', "sid", "quoted"),
            ("sid=first; sid=second", "sid", "first"),
            ("sid=a,b; sid=ok", "sid", None),
            ("x=1", "sid", None),
            ("sid=caf\u00e9", "sid", None),
        ):
            r = c.exchange("GET", f"/q/cookie?name={name}", [("Cookie", header)])
            eq(r.status, 200, f"{header!r}: status")
            eq(json.loads(r.body), {"value": value}, f"{header!r}: the cookie read")
            # two Set-Cookie fields on one answer, in the order they were set
            eq(r.header_all("Set-Cookie"), ["a=1; HttpOnly; SameSite=Lax; Path=/",
                                            "b=2; Max-Age=60"], "Set-Cookie fields")


def test_Q2_AP1_form_fields():
    """Each failure of a form field its own answer (AP1): absent reads as null; given twice,
    malformed or not UTF-8 is the host's 400 naming the field; another type, 415 naming the
    form's (where a field not UTF-8 was a 500 from jansson)."""
    form = "application/x-www-form-urlencoded"
    body = (b"user=admin&password=correct+horse%20battery&dup=1&dup=2&flag&bad=%zz&nul=a%00b"
            b"&u=%C3%28&e=%E2%82%AC")
    bad = "400 Bad Request: the form field '{}' {}\n"
    malformed = "is malformed: a bad %-escape, %00, or no '=' in a form"
    not_form = "415 Unsupported Media Type: the body must be application/x-www-form-urlencoded\n"
    with Server("host_check") as s:
        s.wait_ready()
        c = s.connect()
        for field, ct, value in (
            ("user", form, "admin"),
            ("password", form, "correct horse battery"),
            ("password", form + "; charset=UTF-8", "correct horse battery"),
            ("password", None, "correct horse battery"),
            ("e", form, "\u20ac"),
            ("absent", form, None),
        ):
            r = _post(c, f"/q/form?f={field}", body, ct)
            eq((r.status, json.loads(r.body)), (200, {"value": value}), f"{field} as {ct}")
        for field, ct, status, text in (
            ("dup", form, 400, bad.format("dup", "is given more than once")),
            ("flag", form, 400, bad.format("flag", malformed)),
            ("bad", form, 400, bad.format("bad", malformed)),
            ("nul", form, 400, bad.format("nul", malformed)),
            ("u", form, 400, bad.format("u", "is not UTF-8")),
            ("user", "application/json", 415, not_form),
            ("user", "multipart/form-data; boundary=x", 415, not_form),
        ):
            r = _post(c, f"/q/form?f={field}", body, ct)
            eq((r.status, r.body.decode()), (status, text), f"{field} as {ct}")
        r = _post(c, "/q/form?f=user", b"", form)
        eq(json.loads(r.body), {"value": None}, "an empty body")
        r = _post(c, "/q/form?f=u&f=u", body, form)
        eq((r.status, r.body.decode()),
           (400, "400 Bad Request: the query parameter 'f' is given more than once\n"),
           "a query parameter given twice")


def test_AP1_route_415_names_the_type():
    """A route whose content_type is a form's names that type in its 415, and takes no
    "+x-www-form-urlencoded" type: that is no structured syntax suffix (AP1, RFC 6838)."""
    with Server("host_check") as s:
        s.wait_ready()
        c = s.connect()
        want = ("415 Unsupported Media Type: the body must be "
                "application/x-www-form-urlencoded\n")
        for ct in ("application/json", "application/a+x-www-form-urlencoded", None):
            r = _post(c, "/q/form-only?f=a", b"a=1", ct)
            eq((r.status, r.body.decode()), (415, want), f"as {ct}")
        r = _post(c, "/q/form-only?f=a", b"a=1", "application/x-www-form-urlencoded")
        eq((r.status, json.loads(r.body)), (200, {"value": "1"}), "a form")
        # a suffix that is one is still taken where the route's type is JSON's
        r = _post(c, "/q/typed", b"{}", "application/merge-patch+json")
        eq(r.status, 200, "+json for application/json")


def test_AP1_query_int_strict():
    """m0_req_query_int() takes what the configuration's numbers take, and says too small apart
    from too large, in the host's 400 (AP1)."""
    with Server("host_check") as s:
        s.wait_ready()
        c = s.connect()
        r = c.exchange("GET", "/slow?ms=0")
        eq(r.status, 200, "ms=0")
        for query, why in (
            ("ms=%2B5", "must be a whole number from 0 to 60000"),
            ("ms=+5", "must be a whole number from 0 to 60000"),
            ("ms=%205", "must be a whole number from 0 to 60000"),
            ("ms=-1", "must be a whole number from 0 to 60000"),
            ("ms=60001", "must be at most 60000"),
            ("ms=99999999999999999999999", "must be at most 60000"),
        ):
            r = c.exchange("GET", f"/slow?{query}")
            eq((r.status, r.body.decode()),
               (400, f"400 Bad Request: the query parameter 'ms' {why}\n"), query)


def test_Q3_json_in_and_out():
    with Server("host_check", args=["--blocking-threads", "1"]) as s:
        s.wait_ready()
        c = s.connect()
        for path in ("/q/json", "/q/json-pool"):
            body = b' {"t": "caf\\u00e9 \xe2\x98\x83", "n": [1, 2.5, null, true], "o": {}} '
            r = _post(c, path, body, "application/vnd.test+json; charset=utf-8")
            eq(r.status, 200, f"{path}: status")
            eq(r.header("Content-Type"), "application/json", f"{path}: Content-Type")
            eq(r.body, '{"t":"caf\u00e9 \u2603","n":[1,2.5,null,true],"o":{}}'.encode(),
               f"{path}: the body written back compact")
            eq(r.header("x-thread"), "0" if path.endswith("pool") else "-1", f"{path}: thread")
            r = _post(c, path, b'{"a":1,"a":2}')
            eq((r.status, r.body), (400, b"400 Bad Request: the body is not valid JSON: "
                                         b"duplicate object key at line 1, column 10\n"),
               f"{path}: a repeated key")
            # 64 levels pass, 65 do not
            eq(_post(c, path, b"[" * 64 + b"]" * 64).status, 200, f"{path}: 64 levels")
            r = _post(c, path, b"[" * 65 + b"]" * 65)
            eq((r.status, r.body), (400, b"400 Bad Request: the body nests JSON deeper than 64 "
                                         b"levels (M0_JSON_MAX_DEPTH)\n"), f"{path}: 65 levels")
            eq(c.get("/health").status, 200, f"{path}: the connection goes on")


def test_Q3_json_max_depth_knob():
    with Server("host_check", env={"M0_JSON_MAX_DEPTH": "2"}) as s:
        s.wait_ready()
        c = s.connect()
        eq(_post(c, "/q/json", b'{"a":[1]}').status, 200, "2 levels")
        r = _post(c, "/q/json", b'{"a":[[1]]}')
        eq((r.status, r.body), (400, b"400 Bad Request: the body nests JSON deeper than 2 "
                                     b"levels (M0_JSON_MAX_DEPTH)\n"), "3 levels")
    for bad in ("0", "2049", "x"):
        rc, out, err = run_app("host_check", [], {"M0_JSON_MAX_DEPTH": bad})
        eq(rc, 78, f"M0_JSON_MAX_DEPTH={bad}: exit status")
        lines = [ln for ln in err.split("\n") if ln.startswith("m0: ")]
        check(len(lines) == 1 and lines[0].startswith(f"m0: M0_JSON_MAX_DEPTH='{bad}' is not "),
              f"M0_JSON_MAX_DEPTH={bad}: {err!r}")


def test_Q3_publish_json():
    with Server("host_check", env={"M0_HOSTCHECK_PERIOD_MS": "60000"}) as s:
        s.wait_ready()
        sc = s.connect()
        eq(open_stream(sc, "/follow?channels=q").status, 200, "the stream of channel q")
        rd = SSEReader(sc)
        eq(rd.expect().comments, ["open"], "the stream's first block")
        r = s.connect().get("/q/publish")
        eq(r.status, 200, "publish")
        got = json.loads(r.body)["id"]
        while True:
            f = rd.expect()
            if f.event == "q":
                break
        eq((f.id_int, f.data), (got, ['{"from":"q/publish","n":[1,2]}']), "the event")
