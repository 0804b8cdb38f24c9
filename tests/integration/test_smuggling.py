# SPDX-License-Identifier: MIT
"""Request smuggling and malformed framing (SPEC H1, H2, H3, H4), table-driven.

Every row is one connection: the row's raw bytes and, in the same write, a valid
`GET /pid` behind them. A row names the statuses the host answers to its own bytes and the
connection's fate:

  close  the last of those answers carries `Connection: close`, then EOF, and nothing is served
         after it: the appended GET /pid is never answered;
  keep   no answer carries `Connection: close`, the appended GET /pid IS answered (and is the
         last thing that arrives), the connection stays open.

What a row expects is taken from SPEC H3 where it speaks, from RFC 9112/9110 where it does not
(the comment or the name cites the section), and pinned to what the host does where both allow
a choice (the name says "pinned", the comment says why). `M0_BUILD=... python3
test_smuggling.py [WORD...]` prints every row (or those whose name or group has WORD) with what
the host did."""

import socket
import sys
import time

from m0test import HarnessError, Server

FOLLOW = b"GET /pid HTTP/1.1\r\nHost: test\r\n\r\n"
PID_BODY = b'{"pid":'

# Knobs of the table's server: short read timeouts so the rows that stall answer quickly; the
# size limits stay at their defaults (8 KiB URI, 32 KiB head, 100 fields, 4 MiB body).
ARGS = ["--header-timeout-ms", "2000", "--body-timeout-ms", "1000"]

POST = b"POST /echo HTTP/1.1\r\nHost: test\r\n"
GET = b"GET /pid HTTP/1.1\r\nHost: test\r\n"
CHUNKED = POST + b"Transfer-Encoding: chunked\r\n\r\n"


def row(name, raw, statuses, fate, body=None, body_prefix=None):
    """statuses: an int or a list of the answers to the row's own bytes, in order (1xx
    included); body: what the first final answer's body must be (the echo shows how the host
    framed the request); body_prefix: what it must start with."""
    if isinstance(statuses, int):
        statuses = [statuses]
    assert fate in ("close", "keep"), fate
    return {"name": name, "raw": raw, "statuses": statuses, "fate": fate, "body": body,
            "body_prefix": body_prefix}


def te(value, body=b"5\r\nhello\r\n0\r\n\r\n"):
    return POST + b"Transfer-Encoding: " + value + b"\r\n\r\n" + body


GROUPS = {}

# ---- Content-Length (H3: differing or malformed; with Transfer-Encoding) ----
GROUPS["content_length"] = [
    row("CL.TE: Content-Length then Transfer-Encoding",
        POST + b"Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG", 400, "close"),
    row("TE.CL: Transfer-Encoding then Content-Length",
        POST + b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n",
        400, "close"),
    row("Content-Length: 0 with Transfer-Encoding: chunked",
        POST + b"Content-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "close"),
    row("Content-Length: +5", POST + b"Content-Length: +5\r\n\r\nhello", 400, "close"),
    row("Content-Length: -1", POST + b"Content-Length: -1\r\n\r\n", 400, "close"),
    row("Content-Length: 0x5", POST + b"Content-Length: 0x5\r\n\r\nhello", 400, "close"),
    row("Content-Length: 1 2 (space inside)", POST + b"Content-Length: 1 2\r\n\r\nab", 400, "close"),
    row("Content-Length empty", POST + b"Content-Length: \r\n\r\n", 400, "close"),
    # 1*DIGIT: leading zeros are digits; the body is 7 bytes.
    row("Content-Length: 007 (leading zeros are 1*DIGIT)",
        POST + b"Content-Length: 007\r\n\r\nabcdefg", 200, "keep", b"abcdefg"),
    row("Content-Length with SP OWS around it", POST + b"Content-Length:  5 \r\n\r\nhello",
        200, "keep", b"hello"),
    # pinned: OWS may be HTAB (RFC 9110 5.6.3) but llhttp 8.1 refuses a trailing HTAB in
    # Content-Length; refusing is the safe side.
    row("Content-Length with a trailing HTAB (pinned)", POST + b"Content-Length:\t5\t\r\n\r\nhello",
        400, "close"),
    # pinned: RFC 9110 8.6 lets a recipient either reject a list of equal values or take it as
    # one; llhttp refuses any comma.
    row("Content-Length: 5, 5 (list of equal values, pinned)",
        POST + b"Content-Length: 5, 5\r\n\r\nhello", 400, "close"),
    row("Content-Length: 5, 6 (list of differing values)",
        POST + b"Content-Length: 5, 6\r\n\r\nhello", 400, "close"),
    row("two Content-Length fields, equal (pinned)",
        POST + b"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 400, "close"),
    row("two Content-Length fields, differing",
        POST + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400, "close"),
    row("Content-Length 2^64 (overflow)", POST + b"Content-Length: 18446744073709551616\r\n\r\n",
        400, "close"),
    row("Content-Length of 30 digits (overflow)", POST + b"Content-Length: " + b"9" * 30 + b"\r\n\r\n",
        400, "close"),
    # 19 nines fits in 64 bits: well-formed, and over the 4 MiB bound before any body byte.
    row("Content-Length 9999999999999999999 (fits, over the body bound)",
        POST + b"Content-Length: 9999999999999999999\r\n\r\n", 413, "close"),
    row("GET with a Content-Length body (the body is consumed, not a request)",
        GET + b"Content-Length: 5\r\n\r\nhello", 200, "keep"),
    row("POST without a length has an empty body", POST + b"\r\n", 200, "keep", b""),
    # Not Content-Length at all: no body, so the body bytes are the next request, malformed.
    row("Content_Length (underscore) is not Content-Length",
        POST + b"Content_Length: 5\r\n\r\nhello", [200, 400], "close", b""),
]

# ---- Transfer-Encoding (H3: a transfer coding that does not end in chunked) ----
GROUPS["transfer_encoding"] = [
    row("TE: xchunked", te(b"xchunked"), 400, "close"),
    row("TE: xchunked with Content-Length",
        POST + b"Content-Length: 5\r\nTransfer-Encoding: xchunked\r\n\r\nhello", 400, "close"),
    row("TE: chunked, identity", te(b"chunked, identity"), 400, "close"),
    row("TE: identity", POST + b"Transfer-Encoding: identity\r\n\r\nhello", 400, "close"),
    row("TE: gzip", POST + b"Transfer-Encoding: gzip\r\n\r\nhello", 400, "close"),
    row("TE: chunked, gzip", te(b"chunked, gzip"), 400, "close"),
    row("TE: \"chunked\" (quoted)", te(b'"chunked"'), 400, "close"),
    row("TE: chunked;q=1 (parameter on chunked, pinned)", te(b"chunked;q=1"), 400, "close"),
    row("TE: VT before chunked", te(b"\x0bchunked"), 400, "close"),
    row("TE: chunked, chunked (chunked twice, RFC 9112 7)", te(b"chunked, chunked"), 400, "close"),
    row("TE: empty", POST + b"Transfer-Encoding: \r\n\r\n", 400, "close"),
    row("Transfer-Encoding : chunked (space before the colon)",
        POST + b"Transfer-Encoding : chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400, "close"),
    row("Transfer-Encoding obs-folded onto the next line",
        POST + b"Transfer-Encoding:\r\n chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400, "close"),
    row("Transfer-Encoding name on a line of its own",
        POST + b"Transfer-Encoding\r\n: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400, "close"),
    row("two TE fields: chunked, chunked",
        POST + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n0\r\n\r\n", 400, "close"),
    row("two TE fields: chunked, then x (does not end in chunked)",
        POST + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        400, "close"),
    row("TE: chunked on HTTP/1.0 (RFC 9112 6.1: faulty framing)",
        b"POST /echo HTTP/1.0\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n0\r\n\r\n", 400, "close"),
    row("TE:\\tchunked (HTAB is OWS: valid)",
        POST + b"Transfer-Encoding:\tchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 200, "keep", b"hello"),
    row("TE:chunked (no OWS)", POST + b"Transfer-Encoding:chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        200, "keep", b"hello"),
    row("TE: chunked with a trailing SP", te(b"chunked "), 200, "keep", b"hello"),
    row("TE: CHUNKED (codings are case-insensitive)", te(b"CHUNKED"), 200, "keep", b"hello"),
    row("transfer-encoding: chunked (lower-case name)",
        POST + b"transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 200, "keep", b"hello"),
    # RFC 9110 5.6.1: a recipient accepts empty list elements.
    row("TE: , chunked (empty list element)", te(b", chunked"), 200, "keep", b"hello"),
    # pinned: the trailing empty element is valid too, but llhttp refuses it (the safe side).
    row("TE: chunked, (trailing empty element, pinned)", te(b"chunked,"), 400, "close"),
    # pinned: the list ends in chunked, so H3 does not refuse it and the framing is certain;
    # RFC 9112 6.1 says SHOULD 501 for a coding the server does not know.
    row("two TE fields: x, then chunked (ends in chunked, pinned)",
        POST + b"Transfer-Encoding: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        200, "keep", b"hello"),
    row("TE: gzip, chunked (ends in chunked, pinned)", te(b"gzip, chunked"), 200, "keep", b"hello"),
    row("Transfer_Encoding (underscore) is not Transfer-Encoding",
        POST + b"Transfer_Encoding: chunked\r\n\r\nhello", [200, 400], "close", b""),
]

# ---- chunked framing (H1: llhttp with its lenient flags off; RFC 9112 7.1) ----
GROUPS["chunked"] = [
    row("chunk size of 17 hex digits (overflow)", CHUNKED + b"fffffffffffffffff\r\nhello\r\n0\r\n\r\n",
        400, "close"),
    # The size fits in 64 bits: the host reads the chunk (the appended request is chunk data)
    # until the body timeout. pinned: refusing the size at once (413) would also do.
    row("chunk size 2^64-1, the chunk never ends (pinned)",
        CHUNKED + b"ffffffffffffffff\r\nhello\r\n0\r\n\r\n", 408, "close"),
    row("chunk size not hex", CHUNKED + b"g\r\nhello\r\n0\r\n\r\n", 400, "close"),
    row("chunk size 0x5", CHUNKED + b"0x5\r\nhello\r\n0\r\n\r\n", 400, "close"),
    row("chunk size -5", CHUNKED + b"-5\r\nhello\r\n0\r\n\r\n", 400, "close"),
    row("chunk size empty", CHUNKED + b"\r\nhello\r\n0\r\n\r\n", 400, "close"),
    row("chunk size with a leading SP", CHUNKED + b" 5\r\nhello\r\n0\r\n\r\n", 400, "close"),
    row("chunk size with a trailing SP", CHUNKED + b"5 \r\nhello\r\n0\r\n\r\n", 400, "close"),
    row("chunk size ended by a bare LF", CHUNKED + b"5\nhello\r\n0\r\n\r\n", 400, "close"),
    row("chunk size 0005 (leading zeros are 1*HEXDIG)", CHUNKED + b"0005\r\nhello\r\n000\r\n\r\n",
        200, "keep", b"hello"),
    row("chunk size in upper-case hex", CHUNKED + b"A\r\nhellohello\r\n0\r\n\r\n",
        200, "keep", b"hellohello"),
    row("chunk data not followed by CRLF (XX)", CHUNKED + b"5\r\nhelloXX0\r\n\r\n", 400, "close"),
    row("chunk data followed by CR and a letter", CHUNKED + b"5\r\nhello\rX0\r\n\r\n", 400, "close"),
    row("chunk data followed by LF LF", CHUNKED + b"5\r\nhello\n\n0\r\n\r\n", 400, "close"),
    row("chunk data followed by a bare LF", CHUNKED + b"5\r\nhello\n0\r\n\r\n", 400, "close"),
    row("chunk data longer than its size", CHUNKED + b"5\r\nhello!\r\n0\r\n\r\n", 400, "close"),
    row("chunk extension with a bare CR", CHUNKED + b"5;a\rb\r\nhello\r\n0\r\n\r\n", 400, "close"),
    row("chunk extension with a bare LF", CHUNKED + b"5;a\nb\r\nhello\r\n0\r\n\r\n", 400, "close"),
    row("chunk extension with NUL", CHUNKED + b"5;a=\x00\r\nhello\r\n0\r\n\r\n", 400, "close"),
    row("chunk extensions: a name, then a name=value",
        CHUNKED + b"5;a;b=c\r\nhello\r\n0;e=f\r\n\r\n", 200, "keep", b"hello"),
    row("chunk extension with a quoted-string value",
        CHUNKED + b"5;d=\"e f\"\r\nhello\r\n0\r\n\r\n", 200, "keep", b"hello"),
    # pinned: valid per RFC 9112 7.1.1, but llhttp 8.1 refuses an extension after a valued one
    # (the safe side).
    row("two valued chunk extensions (pinned)", CHUNKED + b"5;a=b;c=d\r\nhello\r\n0\r\n\r\n",
        400, "close"),
    # pinned: RFC 9112 7.1.1 allows BWS before ';' but llhttp refuses it (the safe side).
    row("chunk extension after BWS (pinned)", CHUNKED + b"5 ;a=b\r\nhello\r\n0\r\n\r\n",
        400, "close"),
    # The trailer section never ends: the appended request line is read as a trailer field.
    row("last chunk without the blank line that ends the trailers",
        CHUNKED + b"5\r\nhello\r\n0\r\n", 400, "close"),
    row("trailer section ended by a bare LF", CHUNKED + b"5\r\nhello\r\n0\r\n\n", 400, "close"),
    row("trailer section ended by CR CR LF", CHUNKED + b"5\r\nhello\r\n0\r\n\r\r\n", 400, "close"),
    row("last chunk ended by a bare LF", CHUNKED + b"5\r\nhello\r\n0\n\r\n", 400, "close"),
    row("trailer field ended by a bare LF", CHUNKED + b"5\r\nhello\r\n0\r\nX-T: a\n\r\n",
        400, "close"),
    row("trailer field with a bare CR", CHUNKED + b"5\r\nhello\r\n0\r\nX-T: a\rb\r\n\r\n",
        400, "close"),
    row("trailer field with NUL", CHUNKED + b"5\r\nhello\r\n0\r\nX-T: a\x00\r\n\r\n", 400, "close"),
    row("trailer line without a colon", CHUNKED + b"5\r\nhello\r\n0\r\nXT\r\n\r\n", 400, "close"),
    row("a well-formed trailer field", CHUNKED + b"5\r\nhello\r\n0\r\nX-T: a\r\n\r\n",
        200, "keep", b"hello"),
]

# ---- line endings, NUL, obs-fold (H3: bare CR, bare LF, obs-fold, control characters) ----
GROUPS["line_syntax"] = [
    row("bare LF ending the request line", b"GET /pid HTTP/1.1\nHost: test\r\n\r\n", 400, "close"),
    row("bare CR ending the request line", b"GET /pid HTTP/1.1\rHost: test\r\n\r\n", 400, "close"),
    row("bare LF ending every line", b"GET /pid HTTP/1.1\nHost: test\n\n", 400, "close"),
    row("bare LF ending a field line", GET + b"X-A: a\nX-B: b\r\n\r\n", 400, "close"),
    row("bare LF ending the head (CRLF LF)", GET + b"\n", 400, "close"),
    row("bare CR before the final CRLF", GET + b"\r\r\n", 400, "close"),
    row("bare CR inside the target", b"GET /p\rid HTTP/1.1\r\nHost: test\r\n\r\n", 400, "close"),
    row("bare CR after a field name", GET + b"X-A\r: a\r\n\r\n", 400, "close"),
    row("bare CR inside a value", GET + b"X-A: a\rb\r\n\r\n", 400, "close"),
    row("NUL in the method", b"G\x00ET /pid HTTP/1.1\r\nHost: test\r\n\r\n", 400, "close"),
    row("NUL in the target", b"GET /p\x00id HTTP/1.1\r\nHost: test\r\n\r\n", 400, "close"),
    row("NUL after the version", b"GET /pid HTTP/1.1\x00\r\nHost: test\r\n\r\n", 400, "close"),
    row("NUL in a field name", GET + b"X-\x00A: a\r\n\r\n", 400, "close"),
    row("NUL in a field value", GET + b"X-A: a\x00b\r\n\r\n", 400, "close"),
    row("obs-fold (SP)", GET + b"X-A: one\r\n two\r\n\r\n", 400, "close"),
    row("obs-fold (HTAB)", GET + b"X-A: one\r\n\ttwo\r\n\r\n", 400, "close"),
    row("obs-fold right after the request line", b"GET /pid HTTP/1.1\r\n Host: test\r\n\r\n",
        400, "close"),
    # RFC 9112 2.2: a server SHOULD ignore at least one empty line before the request line.
    row("empty line (CRLF) before the request line", b"\r\n" + GET + b"\r\n", 200, "keep"),
    # pinned: llhttp skips a bare LF before the request line as an empty line; it precedes the
    # head, which starts at the method, and changes no framing.
    row("bare LF before the request line (pinned)", b"\n" + GET + b"\r\n", 200, "keep"),
]

# ---- request line and version (H3: no version, a version other than 1.x) ----
GROUPS["request_line"] = [
    row("HTTP/0.9: no version", b"GET /pid\r\n\r\n", 400, "close"),
    row("HTTP/0.9: no version, a header behind", b"GET /pid\r\nHost: test\r\n\r\n", 400, "close"),
    row("HTTP/0.9 spelled out", b"GET /pid HTTP/0.9\r\nHost: test\r\n\r\n", 400, "close"),
    row("HTTP/2.0", b"GET /pid HTTP/2.0\r\nHost: test\r\n\r\n", 400, "close"),
    row("HTTP/3.0", b"GET /pid HTTP/3.0\r\nHost: test\r\n\r\n", 400, "close"),
    # pinned: H3 refuses only versions other than 1.x and RFC 9112 2.3 would have HTTP/1.2
    # served as 1.1, but llhttp (H1: it parses, no lenient flags) accepts 1.0 and 1.1 only and
    # refuses it before the host's own check sees it; no HTTP/1.2 exists, refusing is safe.
    row("HTTP/1.2 (pinned)", b"GET /pid HTTP/1.2\r\nHost: test\r\n\r\n", 400, "close"),
    row("HTTP/1.10", b"GET /pid HTTP/1.10\r\nHost: test\r\n\r\n", 400, "close"),
    row("HTTP/1.01", b"GET /pid HTTP/1.01\r\nHost: test\r\n\r\n", 400, "close"),
    row("http/1.1 (lower case)", b"GET /pid http/1.1\r\nHost: test\r\n\r\n", 400, "close"),
    row("HTTP/ 1.1", b"GET /pid HTTP/ 1.1\r\nHost: test\r\n\r\n", 400, "close"),
    row("SP after the version", b"GET /pid HTTP/1.1 \r\nHost: test\r\n\r\n", 400, "close"),
    row("two SP after the method", b"GET  /pid HTTP/1.1\r\nHost: test\r\n\r\n", 400, "close"),
    row("two SP before the version", b"GET /pid  HTTP/1.1\r\nHost: test\r\n\r\n", 400, "close"),
    row("HTAB separators", b"GET\t/pid\tHTTP/1.1\r\nHost: test\r\n\r\n", 400, "close"),
    row("SP before the method", b" GET /pid HTTP/1.1\r\nHost: test\r\n\r\n", 400, "close"),
    row("SP inside the method", b"G ET /pid HTTP/1.1\r\nHost: test\r\n\r\n", 400, "close"),
    row("lower-case method", b"get /pid HTTP/1.1\r\nHost: test\r\n\r\n", 400, "close"),
    # pinned: llhttp knows the registered methods only; RFC 9110 9.1 suggests 501.
    row("unknown method (pinned)", b"FOO /pid HTTP/1.1\r\nHost: test\r\n\r\n", 400, "close"),
    row("CONNECT", b"CONNECT test:443 HTTP/1.1\r\nHost: test:443\r\n\r\n", 405, "close"),
    row("HTTP/1.0: closes after its answer", b"GET /pid HTTP/1.0\r\n\r\n", 200, "close"),
    row("HTTP/1.0 with Connection: keep-alive",
        b"GET /pid HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 200, "keep"),
    row("HTTP/1.1 with Connection: close", GET + b"Connection: close\r\n\r\n", 200, "close"),
]

# ---- Host and request-target (H3: a missing Host on 1.1; RFC 9112 3.2) ----
GROUPS["host_and_target"] = [
    row("missing Host on HTTP/1.1", b"GET /pid HTTP/1.1\r\nX-A: a\r\n\r\n", 400, "close"),
    row("two Host fields, differing", b"GET /pid HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        400, "close"),
    row("two Host fields, equal", b"GET /pid HTTP/1.1\r\nHost: test\r\nHost: test\r\n\r\n",
        400, "close"),
    row("two Host fields on HTTP/1.0", b"GET /pid HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n",
        400, "close"),
    # RFC 9112 3.2: a server MUST answer 400 to a Host field with an invalid value; SP is not
    # in uri-host (RFC 3986 reg-name / IP-literal / IPv4address).
    row("Host with a SP inside (RFC)", b"GET /pid HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "close"),
    row("Host with a port", b"GET /pid HTTP/1.1\r\nHost: test:8080\r\n\r\n", 200, "keep"),
    # An empty reg-name is a valid uri-host (RFC 3986 3.2.2).
    row("Host empty (valid)", b"GET /pid HTTP/1.1\r\nHost:\r\n\r\n", 200, "keep"),
    # RFC 9112 3.2.2: the target's authority wins over Host; the path is /pid.
    row("absolute-form with a different Host",
        b"GET http://other.example/pid HTTP/1.1\r\nHost: test\r\n\r\n", 200, "keep",
        body_prefix=PID_BODY),
    row("absolute-form https with a port and a query",
        b"GET https://other.example:8443/pid?x=1 HTTP/1.1\r\nHost: test\r\n\r\n", 200, "keep"),
    row("authority-form on GET", b"GET test:80 HTTP/1.1\r\nHost: test\r\n\r\n", 400, "close"),
    row("SP inside the target", b"GET /p id HTTP/1.1\r\nHost: test\r\n\r\n", 400, "close"),
    row("control character in the target", b"GET /p\x01id HTTP/1.1\r\nHost: test\r\n\r\n",
        400, "close"),
    row("DEL in the target", b"GET /p\x7fid HTTP/1.1\r\nHost: test\r\n\r\n", 400, "close"),
    row("byte 0xFF in the target", b"GET /p\xffid HTTP/1.1\r\nHost: test\r\n\r\n", 400, "close"),
    # pinned: a fragment is not part of a request-target (RFC 9112 3.2, SHOULD 400); the host
    # takes it as part of the path, routes nothing (404) and the framing is untouched.
    row("fragment in the target (pinned)", b"GET /pid#frag HTTP/1.1\r\nHost: test\r\n\r\n",
        404, "keep"),
    # The path is matched as sent: /p%69d is not /pid.
    row("percent-encoded path is not decoded", b"GET /p%69d HTTP/1.1\r\nHost: test\r\n\r\n",
        404, "keep"),
]

# ---- field lines (H3: control characters in values; RFC 9112 5) ----
GROUPS["fields"] = [
    row("field line without a colon", GET + b"X-A a\r\n\r\n", 400, "close"),
    row("empty field name", GET + b": a\r\n\r\n", 400, "close"),
    row("SP before the colon", GET + b"X-A : a\r\n\r\n", 400, "close"),
    row("HTAB before the colon", GET + b"X-A\t: a\r\n\r\n", 400, "close"),
    row("'(' in a field name", GET + b"X(A): a\r\n\r\n", 400, "close"),
    row("DQUOTE in a field name", GET + b'X"A: a\r\n\r\n', 400, "close"),
    row("byte 0xE9 in a field name", GET + b"X-\xe9: a\r\n\r\n", 400, "close"),
    row("ESC in a value", GET + b"X-A: \x1b[31m\r\n\r\n", 400, "close"),
    row("DEL in a value", GET + b"X-A: a\x7fb\r\n\r\n", 400, "close"),
    row("obs-text in a value (valid)", GET + b"X-A: caf\xe9\r\n\r\n", 200, "keep"),
    row("empty value (valid)", GET + b"X-A:\r\n\r\n", 200, "keep"),
]

# ---- what happens to the connection (H1) ----
GROUPS["connection"] = [
    # The host switches to no other protocol: it answers the request, then closes
    # ("no protocol switch: answer, then close", src/http1/conn.c).
    row("Upgrade: h2c with Connection: Upgrade",
        GET + b"Connection: Upgrade\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n",
        200, "close"),
    row("Upgrade without Connection: upgrade is no upgrade", GET + b"Upgrade: websocket\r\n\r\n",
        200, "keep"),
    row("HEAD with a body", b"HEAD /pid HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\n\r\nabc",
        200, "keep"),
]

# ---- limits at their defaults (H2) ----
GROUPS["limits"] = [
    row("target of 8192 bytes (at the bound)",
        b"GET /pid?" + b"a" * (8192 - 5) + b" HTTP/1.1\r\nHost: test\r\n\r\n", 200, "keep"),
    row("target of 8193 bytes", b"GET /pid?" + b"a" * (8193 - 5) + b" HTTP/1.1\r\nHost: test\r\n\r\n",
        414, "close"),
    row("head over 32 KiB", GET + b"X-Pad: " + b"p" * (32 * 1024) + b"\r\n\r\n", 431, "close"),
    row("100 header fields (at the bound)",
        GET + b"".join(b"X-F%d: %d\r\n" % (i, i) for i in range(99)) + b"\r\n", 200, "keep"),
    row("101 header fields",
        GET + b"".join(b"X-F%d: %d\r\n" % (i, i) for i in range(100)) + b"\r\n", 431, "close"),
    row("Content-Length one over 4 MiB, body held back",
        POST + b"Content-Length: 4194305\r\n\r\n", 413, "close"),
]

# ---- Expect (H4) ----
GROUPS["expect"] = [
    row("Expect: 100-continue, then the body", POST + b"Expect: 100-continue\r\nContent-Length: 5\r\n\r\nhello",
        [100, 200], "keep", b"hello"),
    row("Expect: 100-Continue (case-insensitive)",
        POST + b"Expect: 100-Continue\r\nContent-Length: 5\r\n\r\nhello", [100, 200], "keep", b"hello"),
    # The appended request is 35 bytes of the 100 announced; the rest never comes.
    row("Expect: 100-continue, the body never comes",
        POST + b"Expect: 100-continue\r\nContent-Length: 100\r\n\r\n", [100, 408], "close"),
    row("Expect: something else", POST + b"Expect: foo\r\nContent-Length: 5\r\n\r\nhello",
        417, "close"),
    row("Expect: 100-continue without a body", GET + b"Expect: 100-continue\r\n\r\n", 200, "keep"),
    # RFC 9110 10.1.1: an HTTP/1.0 request's 100-continue is ignored.
    row("Expect: 100-continue on HTTP/1.0",
        b"POST /echo HTTP/1.0\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: 5\r\n"
        b"Connection: keep-alive\r\n\r\nhello", 200, "keep", b"hello"),
]

ROWS = [r for g in GROUPS.values() for r in g]


# ---- running a row ----


def expected_tokens(r):
    sts = [str(x) for x in r["statuses"]]
    if r["fate"] == "keep":
        return sts + ["200 pid", "open"]
    return sts[:-1] + [sts[-1] + " close", "EOF"]


def observe(s, r, bytewise=False):
    """Send the row and the appended request; read what comes back. Returns (tokens, first final
    body): one token per answer ("400 close" when it carries Connection: close, "200 pid" for an
    answer with the /pid body), then "EOF" or "open". bytewise: the row's bytes go one per
    write (the appended request in one write after them)."""
    want = len(r["statuses"])
    c = s.connect(timeout=5)
    toks, body = [], None
    try:
        if bytewise:
            for i in range(len(r["raw"])):
                c.send(r["raw"][i : i + 1])
                time.sleep(0.001)
            c.send(FOLLOW)
        else:
            c.send(r["raw"] + FOLLOW)
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused before all was sent: what was answered still tells
    closed = False
    for i in range(want + 3):
        # Answers that must come get 5 s; after a close, EOF must follow; past the row's answers
        # and the appended request's, nothing more may arrive.
        if closed:
            wait = 3
        elif i > want:
            wait = 0.3
        else:
            wait = 5
        if not c.buf:
            try:
                if not c._fill(wait):
                    toks.append("EOF")
                    break
            except (socket.timeout, TimeoutError):
                toks.append("open")
                break
        try:
            # The row's first answer to a HEAD has no body, whatever its Content-Length says.
            resp = c.read_response(head=(i == 0 and r["raw"].startswith(b"HEAD ")), timeout=5)
        except HarnessError as e:
            toks.append(f"EOF inside an answer ({str(e)[:60]})")
            break
        except (socket.timeout, TimeoutError):
            toks.append(f"half an answer: {c.buf[:60]!r}")
            break
        if resp.status >= 200 and body is None:
            body = resp.body
        tok = str(resp.status)
        if resp.status == 200 and resp.body.startswith(PID_BODY) and i >= want:
            tok += " pid"
        if (resp.header("Connection") or "").lower() == "close":
            tok += " close"
            closed = True
        toks.append(tok)
    else:
        toks.append("more")
    c.close()
    return toks, body


def check_row(s, r, bytewise=False):
    """None when the row held, else what went wrong."""
    toks, body = observe(s, r, bytewise)
    want = expected_tokens(r)
    problems = []
    if toks != want:
        problems.append(f"expected {' / '.join(want)}, got {' / '.join(toks)}")
    if r["body"] is not None and body != r["body"]:
        problems.append(f"body: expected {r['body']!r}, got {body!r}")
    if r["body_prefix"] is not None and not (body or b"").startswith(r["body_prefix"]):
        problems.append(f"body: expected {r['body_prefix']!r}..., got {body!r}")
    if s.exited():
        problems.append(f"the server exited ({s.proc.returncode}); log:\n{s.log_text()}")
    return "; ".join(problems) or None


def show(raw, n=120):
    t = repr(raw)
    return t if len(t) <= n else t[:n] + f"... ({len(raw)} bytes)"


def run_group(name, bytewise=False):
    rows = GROUPS[name]
    failures = []
    with Server("host_check", args=ARGS) as s:
        s.wait_ready()
        for r in rows:
            why = check_row(s, r, bytewise)
            if why:
                failures.append(f"[{r['name']}] bytes {show(r['raw'])}: {why}")
            if s.exited():
                break
        # The host is whole after the table: a plain request on a new connection is served.
        if not s.exited():
            resp = s.connect().get("/pid")
            if resp.status != 200:
                failures.append(f"a plain request after the table: {resp.status}")
    if failures:
        raise AssertionError(
            f"{len(failures)} of {len(rows)} rows did not hold:\n" + "\n".join(failures)
        )


def test_table_size():
    """The table has at least 40 rows, each with its own name."""
    names = [r["name"] for r in ROWS]
    assert len(names) >= 40, len(names)
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, dup


def test_H3_content_length():
    run_group("content_length")


def test_H3_transfer_encoding():
    run_group("transfer_encoding")


def test_H1_chunked_framing():
    run_group("chunked")


def test_H3_line_endings_nul_obs_fold():
    run_group("line_syntax")


def test_H3_request_line_and_version():
    run_group("request_line")


def test_H3_host_and_target():
    run_group("host_and_target")


def test_H3_field_lines():
    run_group("fields")


def test_H1_connection_fate():
    run_group("connection")


def test_H2_limits_at_defaults():
    run_group("limits")


def test_H4_expect():
    run_group("expect")


def test_H1_chunked_framing_one_byte_per_write():
    """The same rows, each byte in its own write: the host's own checks (the head, the end of a
    chunked body) do not depend on where the reads fall."""
    run_group("chunked", bytewise=True)


def test_H3_line_endings_one_byte_per_write():
    run_group("line_syntax", bytewise=True)


def test_H3_transfer_encoding_one_byte_per_write():
    run_group("transfer_encoding", bytewise=True)


def test_H1_connection_fate_one_byte_per_write():
    run_group("connection", bytewise=True)


def test_H1_upgrade_then_a_request_in_a_later_write():
    """An Upgrade request is answered and the connection closed (the host switches to no other
    protocol); bytes that come in a later write are not served. The request sent there is one
    llhttp refuses (HTTP/1.2, see the table): answering it would mean it was never parsed."""
    with Server("host_check", args=ARGS) as s:
        s.wait_ready()
        c = s.connect()
        c.send(GET + b"Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
        r = c.read_response(timeout=5)
        problems = []
        if r.status != 200:
            problems.append(f"the Upgrade request: status {r.status}")
        if r.header("Connection") != "close":
            problems.append(f"the Upgrade request's answer: Connection {r.header('Connection')!r}")
        if c.nothing_within(0.2):
            try:
                c.send(b"GET /pid HTTP/1.2\r\nHost: test\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
        try:
            c.expect_eof(timeout=3)
        except HarnessError as e:
            problems.append(f"after the Upgrade request's answer: {str(e)[:200]}")
        if problems:
            raise AssertionError("; ".join(problems))


def main(argv):
    """Print every row: what it expects, what the host did, pass or fail."""
    only = argv[1:]
    bad = 0
    with Server("host_check", args=ARGS) as s:
        s.wait_ready()
        for g, rows in GROUPS.items():
            for r in rows:
                if only and not any(o in r["name"] or o == g for o in only):
                    continue
                why = check_row(s, r)
                want = " ".join(str(x) for x in r["statuses"]) + " " + r["fate"]
                got = "" if not why else "  <- " + why
                print(f"{'PASS' if not why else 'FAIL'}  {g:18} {r['name']:66} {want}{got}")
                bad += bool(why)
    print(f"{len(ROWS)} rows, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
