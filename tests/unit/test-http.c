/* SPDX-License-Identifier: MIT */
/* test-http.c: the request head checker and indexer, m0__http_head_parse (SPEC H2, H3). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "head-checks.h"
#include "request.h"
#include "unit.h"

static struct m0_config cfg;

static void defaults(void)
{
        char *argv[] = {"app", NULL};
        char *envp[] = {NULL};
        char err[256] = "";
        ck_assert_int_eq(m0__config_parse(&cfg, "app", 1, argv, envp, NULL, err, sizeof(err)),
                         M0_CONFIG_SERVE);
}

/* A head as the connection holds it: `n` bytes in a buffer of exactly that size (no NUL after,
 * so a read past `avail` is a sanitizer error), indexed into a request with room for
 * max_header_fields headers. */
struct parsed {
        char *buf;
        struct m0_req req;
        size_t len;
        int rc;
};

static void parsed_free(struct parsed *p)
{
        free(p->buf);
        free(p->req.headers);
        m0__buf_free(&p->req.arena);
        memset(p, 0, sizeof(*p));
}

static void parse_n(struct parsed *p, const char *head, size_t n)
{
        memset(p, 0, sizeof(*p));
        p->buf = malloc(n ? n : 1);
        ck_assert_ptr_nonnull(p->buf);
        memcpy(p->buf, head, n);
        p->req.headers = calloc(cfg.max_header_fields, sizeof(*p->req.headers));
        ck_assert_ptr_nonnull(p->req.headers);
        p->len = 0xdead;
        p->rc = m0__http_head_parse(p->buf, n, &cfg, &p->req, &p->len);
}

/* The status for a head, checked both with and without a request to index into. */
static int status_n(const char *head, size_t n)
{
        char *copy = malloc(n ? n : 1);
        ck_assert_ptr_nonnull(copy);
        memcpy(copy, head, n);
        size_t len = 0;
        int bare = m0__http_head_parse(copy, n, &cfg, NULL, &len);
        free(copy);

        struct parsed p;
        parse_n(&p, head, n);
        int indexed = p.rc;
        parsed_free(&p);
        ck_assert_msg(bare == indexed, "indexing changed the verdict: %d without, %d with", bare,
                      indexed);
        return bare;
}

#define STATUS(lit) status_n(lit, sizeof(lit) - 1)
#define PARSE(p, lit) parse_n(p, lit, sizeof(lit) - 1)

/* Expect a refusal, naming the head on failure. */
#define REFUSED(lit, code)                                                                         \
        do {                                                                                       \
                int st_ = STATUS(lit);                                                             \
                if (st_ != (code)) {                                                               \
                        char *e_ = unit_escape(lit, sizeof(lit) - 1);                              \
                        ck_abort_msg("\"%s\": %d, expected %d", e_, st_, code);                    \
                }                                                                                  \
        } while (0)
#define ACCEPTED(lit) REFUSED(lit, 0)

static void setup(void)
{
        defaults();
}

START_TEST(valid_get_indexed)
{
        static const char head[] = "GET /a/b?x=1&y=%20 HTTP/1.1\r\n"
                                   "Host: example.com\r\n"
                                   "X-Thing:   spaced  value \t\r\n"
                                   "Accept:*/*\r\n"
                                   "Empty:\r\n"
                                   "Blank: \t \r\n"
                                   "\r\n";
        static const char with_body[] = "GET /a/b?x=1&y=%20 HTTP/1.1\r\n"
                                        "Host: example.com\r\n"
                                        "X-Thing:   spaced  value \t\r\n"
                                        "Accept:*/*\r\n"
                                        "Empty:\r\n"
                                        "Blank: \t \r\n"
                                        "\r\n"
                                        "BODY";
        struct parsed p;
        PARSE(&p, with_body);
        ck_assert_int_eq(p.rc, 0);
        ck_assert_uint_eq(p.len, sizeof(head) - 1);
        ck_assert_str_eq(p.req.method, "GET");
        ck_assert_str_eq(p.req.path, "/a/b");
        ck_assert_str_eq(p.req.query, "x=1&y=%20");
        ck_assert_uint_eq(p.req.nheaders, 5);
        ck_assert_str_eq(p.req.headers[0].name, "Host");
        ck_assert_str_eq(p.req.headers[0].value, "example.com");
        ck_assert_str_eq(p.req.headers[1].name, "X-Thing");
        ck_assert_str_eq(p.req.headers[1].value, "spaced  value");
        ck_assert_str_eq(p.req.headers[2].name, "Accept");
        ck_assert_str_eq(p.req.headers[2].value, "*/*");
        ck_assert_str_eq(p.req.headers[3].name, "Empty");
        ck_assert_str_eq(p.req.headers[3].value, "");
        ck_assert_str_eq(p.req.headers[4].name, "Blank");
        ck_assert_str_eq(p.req.headers[4].value, "");
        /* the body after the head is not touched */
        ck_assert_bytes(p.buf + p.len, 4, "BODY", 4);
        parsed_free(&p);

        /* without a request, the same length and nothing written */
        char copy[sizeof(with_body) - 1];
        memcpy(copy, with_body, sizeof(copy));
        size_t len = 0;
        ck_assert_int_eq(m0__http_head_parse(copy, sizeof(copy), &cfg, NULL, &len), 0);
        ck_assert_uint_eq(len, sizeof(head) - 1);
        ck_assert_bytes(copy, sizeof(copy), with_body, sizeof(with_body) - 1);
}
END_TEST

START_TEST(minimal_heads)
{
        struct parsed p;
        PARSE(&p, "GET / HTTP/1.0\r\n\r\n");
        ck_assert_int_eq(p.rc, 0);
        ck_assert_uint_eq(p.len, 18);
        ck_assert_str_eq(p.req.method, "GET");
        ck_assert_str_eq(p.req.path, "/");
        ck_assert_str_eq(p.req.query, "");
        ck_assert_uint_eq(p.req.nheaders, 0);
        parsed_free(&p);

        PARSE(&p, "DELETE /x? HTTP/1.1\r\nhost: h\r\n\r\n");
        ck_assert_int_eq(p.rc, 0);
        ck_assert_str_eq(p.req.method, "DELETE");
        ck_assert_str_eq(p.req.path, "/x");
        ck_assert_str_eq(p.req.query, "");
        ck_assert_str_eq(p.req.headers[0].name, "host");
        ck_assert_str_eq(p.req.headers[0].value, "h");
        parsed_free(&p);

        /* obs-text in a value passes through as bytes */
        PARSE(&p, "GET / HTTP/1.1\r\nHost: h\r\nX-Name: caf\xc3\xa9\r\n\r\n");
        ck_assert_int_eq(p.rc, 0);
        ck_assert_str_eq(p.req.headers[1].value, "caf\xc3\xa9");
        parsed_free(&p);

        /* HTTP/1.0 needs no Host; HTTP/1.9 is a 1.x */
        ACCEPTED("GET / HTTP/1.0\r\nX: y\r\n\r\n");
        ACCEPTED("GET / HTTP/1.9\r\nHost: h\r\n\r\n");
        REFUSED("GET / HTTP/1.9\r\n\r\n", 400);
}
END_TEST

START_TEST(target_forms)
{
        struct parsed p;
        PARSE(&p, "GET http://example.com/p/q?z=9 HTTP/1.1\r\nHost: example.com\r\n\r\n");
        ck_assert_int_eq(p.rc, 0);
        ck_assert_str_eq(p.req.path, "/p/q");
        ck_assert_str_eq(p.req.query, "z=9");
        parsed_free(&p);

        PARSE(&p, "GET https://example.com:8443 HTTP/1.1\r\nHost: example.com\r\n\r\n");
        ck_assert_int_eq(p.rc, 0);
        ck_assert_str_eq(p.req.path, "/");
        ck_assert_str_eq(p.req.query, "");
        parsed_free(&p);

        PARSE(&p, "GET http://example.com?a=1 HTTP/1.1\r\nHost: example.com\r\n\r\n");
        ck_assert_int_eq(p.rc, 0);
        ck_assert_str_eq(p.req.path, "/");
        ck_assert_str_eq(p.req.query, "a=1");
        parsed_free(&p);

        PARSE(&p, "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
        ck_assert_int_eq(p.rc, 0);
        ck_assert_str_eq(p.req.method, "OPTIONS");
        ck_assert_str_eq(p.req.path, "*");
        parsed_free(&p);

        /* the query starts at the first '?' */
        PARSE(&p, "GET /s?q=a?b HTTP/1.1\r\nHost: h\r\n\r\n");
        ck_assert_int_eq(p.rc, 0);
        ck_assert_str_eq(p.req.path, "/s");
        ck_assert_str_eq(p.req.query, "q=a?b");
        parsed_free(&p);
}
END_TEST

START_TEST(request_line_refusals)
{
        REFUSED("GET /\r\n\r\n", 400);                             /* HTTP/0.9: no version */
        REFUSED("GET /\r\nHost: h\r\n\r\n", 400);                  /* HTTP/0.9 with fields */
        REFUSED("GET / HTTP/2.0\r\nHost: h\r\n\r\n", 400);         /* a version other than 1.x */
        REFUSED("GET / HTTP/0.9\r\nHost: h\r\n\r\n", 400);         /* a version other than 1.x */
        REFUSED("GET / HTTP/1.10\r\nHost: h\r\n\r\n", 400);        /* not one digit */
        REFUSED("GET / HTTP/1.\r\nHost: h\r\n\r\n", 400);          /* no minor */
        REFUSED("GET / http/1.1\r\nHost: h\r\n\r\n", 400);         /* HTTP-name is case-sensitive */
        REFUSED("GET / HTTP/1.1 \r\nHost: h\r\n\r\n", 400);        /* trailing space */
        REFUSED("GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400);        /* empty target */
        REFUSED(" / HTTP/1.1\r\nHost: h\r\n\r\n", 400);            /* empty method */
        REFUSED("G(T / HTTP/1.1\r\nHost: h\r\n\r\n", 400);         /* method not a token */
        REFUSED("GET /\x7f HTTP/1.1\r\nHost: h\r\n\r\n", 400);     /* DEL in the target */
        REFUSED("GET /\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n", 400); /* non-ASCII target */
        REFUSED("GET /\t HTTP/1.1\r\nHost: h\r\n\r\n", 400);       /* HTAB in the target */
        REFUSED("GET / HTTP/1.1\nHost: h\r\n\r\n", 400);           /* bare LF ends the line */
        REFUSED("GET / HTTP/1.1\rHost: h\r\n\r\n", 400);           /* CR not followed by LF */
        REFUSED("GET /\r HTTP/1.1\r\nHost: h\r\n\r\n", 400);       /* CR inside the line */
}
END_TEST

START_TEST(framing_refusals)
{
        /* obs-fold */
        REFUSED("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tb\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\n Host: h\r\n\r\n", 400);
        /* bare LF: between fields, at the end of the head, and alone */
        REFUSED("GET / HTTP/1.1\r\nHost: h\nX: y\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\nHost: h\r\n\n", 400);
        REFUSED("GET / HTTP/1.1\nHost: h\n\n", 400);
        /* CR not followed by LF: in a value, and where the blank line should be */
        REFUSED("GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\nHost: h\r\n\rX\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\nHost: h\r\n\r\r\n", 400);
        /* a head that never ends */
        REFUSED("GET / HTTP/1.1\r\nHost: h\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\nHost: h\r\n\r", 400);
        REFUSED("GET / HTTP/1.1\r\nHost: h", 400);
}
END_TEST

START_TEST(host_refusals)
{
        REFUSED("GET / HTTP/1.1\r\nX: y\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\nHost: a\r\nhOST: b\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\nHosts: a\r\n\r\n", 400); /* another field, not Host */
        ACCEPTED("GET / HTTP/1.1\r\nHOST: a\r\n\r\n");
        ACCEPTED("GET / HTTP/1.1\r\nHost:\r\n\r\n"); /* empty Host is allowed (RFC 9112 3.2) */
}
END_TEST

/* Host, Content-Length and Transfer-Encoding are known in any case, and only they: a name of the
 * same length with another byte where a letter or '-' is (one whose OR with 0x20 is not that
 * letter or '-') is another field (D259). */
START_TEST(the_three_names_exactly)
{
        ACCEPTED("GET / HTTP/1.1\r\nhOsT: a\r\n\r\n");
        REFUSED("GET / HTTP/1.1\r\nHo_t: a\r\n\r\n", 400); /* not Host: none */
        REFUSED("GET / HTTP/1.1\r\nHo^t: a\r\n\r\n", 400); /* '^' | 0x20 is '~' */
        REFUSED("GET / HTTP/1.1\r\nHost: a\r\nHOST: a\r\n\r\n", 400);
        /* as Content-Length, "5, 6" would be refused */
        ACCEPTED("POST / HTTP/1.1\r\nHost: h\r\nContent_Length: 5, 6\r\n\r\n");
        ACCEPTED("POST / HTTP/1.1\r\nHost: h\r\nContent-Lengt~: 5, 6\r\n\r\n");
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\ncONTENT-lENGTH: 5, 6\r\n\r\n", 400);
        /* as Transfer-Encoding beside a Content-Length, refused */
        ACCEPTED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                 "Transfer_Encoding: chunked\r\n\r\n");
        ACCEPTED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                 "Transfer-Encodin^: chunked\r\n\r\n");
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                "TRANSFER-encoding: chunked\r\n\r\n",
                400);
}
END_TEST

START_TEST(content_length_refusals)
{
        ACCEPTED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n");
        ACCEPTED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
        ACCEPTED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n");
        ACCEPTED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\n");
        ACCEPTED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length:  007 \r\n\r\n");
        ACCEPTED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 9999999999999999999\r\n\r\n");

        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
                400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 6\r\n\r\n", 400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5, 6\r\n\r\n",
                400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\n", 400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -5\r\n\r\n", 400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5a\r\n\r\n", 400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x5\r\n\r\n", 400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5 5\r\n\r\n", 400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n\r\n", 400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length:   \r\n\r\n", 400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5,\r\n\r\n", 400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: ,5\r\n\r\n", 400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5,,5\r\n\r\n", 400);
        /* 20 digits: past what a 64-bit length can say */
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n", 400);
}
END_TEST

START_TEST(transfer_encoding_refusals)
{
        ACCEPTED("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
        ACCEPTED("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: CHUNKED \r\n\r\n");
        ACCEPTED("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
        ACCEPTED("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n");

        /* CL with TE, in either order */
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                "Transfer-Encoding: chunked\r\n\r\n",
                400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                "Content-Length: 5\r\n\r\n",
                400);
        /* a coding list that does not end in chunked */
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                "Transfer-Encoding: gzip\r\n\r\n",
                400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunkedx\r\n\r\n", 400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\r\n\r\n", 400);
        REFUSED("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked,\r\n\r\n", 400);
        /* TE on HTTP/1.0 */
        REFUSED("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400);
        REFUSED("POST / HTTP/1.0\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", 400);
}
END_TEST

START_TEST(field_refusals)
{
        /* whitespace before the colon */
        REFUSED("GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\nHost: h\r\nX\t: y\r\n\r\n", 400);
        /* empty name, no colon, a name that is not a token */
        REFUSED("GET / HTTP/1.1\r\nHost: h\r\n: y\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\nHost: h\r\nX(y): z\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\nHost: h\r\nX\xc3\xa9: z\r\n\r\n", 400);
        /* control characters in a value: 0x01, DEL, NUL, ESC */
        REFUSED("GET / HTTP/1.1\r\nHost: h\r\nX: a\x01z\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\nHost: h\r\nX: a\x7fz\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\nHost: h\r\nX: a\0z\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\nHost: h\r\nX: \x1b\r\n\r\n", 400);
        REFUSED("GET / HTTP/1.1\r\nHost: h\x01\r\n\r\n", 400);
        /* HTAB inside a value is allowed */
        ACCEPTED("GET / HTTP/1.1\r\nHost: h\r\nX: a\tz\r\n\r\n");
}
END_TEST

/* "GET <target> HTTP/1.1\r\nHost: h\r\n\r\n" with a target of exactly `n` bytes. */
static int status_for_target(size_t n)
{
        char *head = malloc(n + 64);
        ck_assert_ptr_nonnull(head);
        size_t o = 0;
        memcpy(head + o, "GET /", 5), o += 5;
        memset(head + o, 'u', n - 1), o += n - 1;
        memcpy(head + o, " HTTP/1.1\r\nHost: h\r\n\r\n", 23), o += 23;
        int st = status_n(head, o);
        free(head);
        return st;
}

/* H3 (D251): every byte at every place of a long value is taken or refused as the byte table
 * says, whichever of the value's eight-byte words it falls in, and the value is indexed whole */
START_TEST(value_bytes_everywhere)
{
        for (int b = 0; b < 256; b++) {
                bool ok = b == '\t' || (b >= 0x20 && b != 0x7f);
                for (size_t at = 0; at < 24; at++) {
                        char value[24];
                        memset(value, 'v', sizeof(value));
                        value[at] = (char)b;
                        char head[58]; /* the value's bytes in place, a NUL's too */
                        memcpy(head, "GET / HTTP/1.1\r\nHost: a\r\nX-V: ", 30);
                        memcpy(head + 30, value, 24);
                        memcpy(head + 54, "\r\n\r\n", 4);
                        struct parsed p;
                        parse_n(&p, head, sizeof(head));
                        bool edge_ws = (b == ' ' || b == '\t') && (at == 0 || at == 23);
                        if (!ok) {
                                ck_assert_msg(p.rc == 400, "byte %#x at %zu: %d", b, at, p.rc);
                        } else {
                                ck_assert_msg(p.rc == 0, "byte %#x at %zu: %d", b, at, p.rc);
                                ck_assert_str_eq(p.req.headers[1].name, "X-V");
                                ck_assert_uint_eq(strlen(p.req.headers[1].value),
                                                  edge_ws ? 23 : 24);
                        }
                        parsed_free(&p);
                }
        }
}
END_TEST

/* The field value's verdict byte by byte, as RFC 9110 5.5 reads it: HTAB, SP, VCHAR, obs-text. */
static int value_reference(const unsigned char *v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!(v[i] == '\t' || (v[i] >= 0x20 && v[i] != 0x7f)))
                        return 400;
        return 0;
}

/* H3 (D251): a value of every length from 0 to 40, with one byte of every value at every place
 * and then with several bytes drawn at random (a fixed seed), CTLs, DEL and obs-text among them
 * side by side: the walk eight bytes at a time gives the verdict the byte-by-byte reference
 * gives, whichever of its words the bytes fall in and however the value's tail is cut. */
START_TEST(value_bytes_against_a_byte_at_a_time_reference)
{
        static const unsigned char odd[] = {0x00, 0x01, 0x09, 0x0a, 0x0d, 0x1f, 0x20, 0x21,
                                            0x7e, 0x7f, 0x80, 0x81, 0x9f, 0xa0, 0xfe, 0xff};
        uint64_t seed = 0x9e3779b97f4a7c15u;
        char head[96];
        for (size_t len = 0; len <= 40; len++) {
                for (int round = 0; round < 256 * 3 + 2000; round++) {
                        unsigned char v[40];
                        memset(v, 'v', len);
                        if (len && round < 256 * 3) {
                                /* one byte of each value, at the start, the middle, the end */
                                size_t at = round % 3 == 0 ? 0 : round % 3 == 1 ? len / 2 : len - 1;
                                v[at] = (unsigned char)(round / 3);
                        } else if (len) {
                                for (size_t k = 0; k < len; k++) {
                                        seed = seed * 6364136223846793005u + 1442695040888963407u;
                                        unsigned r = (unsigned)(seed >> 33);
                                        if (r % 4 == 0)
                                                v[k] = odd[(r >> 8) % sizeof(odd)];
                                        else if (r % 4 == 1)
                                                v[k] = (unsigned char)(r >> 12);
                                }
                        }
                        /* CR or LF inside the value ends it (a CRLF may even end the head
                         * there): other tests say what becomes of those */
                        if (memchr(v, '\r', len) || memchr(v, '\n', len))
                                continue;
                        memcpy(head, "GET / HTTP/1.1\r\nHost: a\r\nX-V: ", 30);
                        memcpy(head + 30, v, len);
                        memcpy(head + 30 + len, "\r\n\r\n", 4);
                        int want = value_reference(v, len);
                        int got = status_n(head, 30 + len + 4);
                        ck_assert_msg(got == want, "length %zu round %d (%s): %d, expected %d", len,
                                      round, unit_escape((const char *)v, len), got, want);
                }
        }
}
END_TEST

START_TEST(uri_limit)
{
        ck_assert_int_eq(status_for_target(8192), 0);
        ck_assert_int_eq(status_for_target(8193), 414);
        cfg.max_uri_bytes = 16;
        ck_assert_int_eq(status_for_target(16), 0);
        ck_assert_int_eq(status_for_target(17), 414);
        ck_assert_int_eq(status_for_target(1000), 414);
        /* the limit is on the target, however large the head limit is */
        cfg.max_head_bytes = 1048576;
        ck_assert_int_eq(status_for_target(17), 414);
}
END_TEST

/* A head with `nfields` fields "Hk: v\r\n" after Host. */
static int status_for_fields(size_t nfields)
{
        struct m0_buf b = {0};
        ck_assert_int_eq(m0__buf_printf(&b, "GET / HTTP/1.1\r\nHost: h\r\n"), 0);
        for (size_t i = 1; i < nfields; i++)
                ck_assert_int_eq(m0__buf_printf(&b, "H%zu: v\r\n", i), 0);
        ck_assert_int_eq(m0__buf_append(&b, "\r\n", 2), 0);
        int st = status_n(b.data, b.len);
        m0__buf_free(&b);
        return st;
}

START_TEST(field_count_limit)
{
        ck_assert_int_eq(status_for_fields(100), 0);
        ck_assert_int_eq(status_for_fields(101), 431);
        cfg.max_header_fields = 3;
        ck_assert_int_eq(status_for_fields(3), 0);
        ck_assert_int_eq(status_for_fields(4), 431);
        ck_assert_int_eq(status_for_fields(50), 431);
        cfg.max_header_fields = 1;
        ck_assert_int_eq(status_for_fields(1), 0);
        ck_assert_int_eq(status_for_fields(2), 431);

        /* every field of a head at the limit is indexed */
        cfg.max_header_fields = 3;
        struct parsed p;
        PARSE(&p, "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n");
        ck_assert_int_eq(p.rc, 0);
        ck_assert_uint_eq(p.req.nheaders, 3);
        ck_assert_str_eq(p.req.headers[2].name, "B");
        ck_assert_str_eq(p.req.headers[2].value, "2");
        parsed_free(&p);
}
END_TEST

/* "GET / HTTP/1.1\r\nHost: h\r\nX: vvv…\r\n\r\n", exactly `total` bytes (total >= 35). */
static int status_for_head_size(size_t total)
{
        static const char pre[] = "GET / HTTP/1.1\r\nHost: h\r\n";
        char *head = malloc(total);
        ck_assert_ptr_nonnull(head);
        size_t o = 0;
        memcpy(head, pre, sizeof(pre) - 1), o += sizeof(pre) - 1;
        size_t fill = total - o - 3 - 2 - 2; /* "X: " CRLF CRLF */
        memcpy(head + o, "X: ", 3), o += 3;
        memset(head + o, 'v', fill), o += fill;
        memcpy(head + o, "\r\n\r\n", 4), o += 4;
        ck_assert_uint_eq(o, total);
        int st = status_n(head, total);
        free(head);
        return st;
}

START_TEST(head_size_limit)
{
        ck_assert_int_eq(status_for_head_size(32768), 0);
        ck_assert_int_eq(status_for_head_size(32769), 431);
        cfg.max_head_bytes = 256;
        ck_assert_int_eq(status_for_head_size(256), 0);
        /* 257: the fields end at 255, only the blank line crosses the limit */
        ck_assert_int_eq(status_for_head_size(257), 431);
        ck_assert_int_eq(status_for_head_size(258), 431);
        ck_assert_int_eq(status_for_head_size(4000), 431);

        /* a head over the limit on its request line alone (the target within its own limit) */
        cfg.max_uri_bytes = 8192;
        ck_assert_int_eq(status_for_target(300), 431);
}
END_TEST

/* A head refused by the walk leaves the request the fields it cut before the refusal (Q5: the
 * refusal's CORS lines read the Origin there), and none past it. */
START_TEST(refused_walk_keeps_the_fields_before)
{
        struct parsed p;
        PARSE(&p, "GET / HTTP/1.1\r\nHost: a\r\nOrigin: https://a.example \r\nX: b\x01\r\n"
                  "Late: c\r\n\r\n");
        ck_assert_int_eq(p.rc, 400);
        ck_assert_uint_eq(p.req.nheaders, 2);
        ck_assert_str_eq(m0_req_header(&p.req, "origin"), "https://a.example");
        ck_assert_ptr_null(m0_req_header(&p.req, "late"));
        parsed_free(&p);

        cfg.max_header_fields = 2;
        PARSE(&p, "GET / HTTP/1.1\r\nOrigin: o\r\nHost: a\r\nX: 1\r\n\r\n");
        ck_assert_int_eq(p.rc, 431);
        ck_assert_uint_eq(p.req.nheaders, 2);
        ck_assert_str_eq(m0_req_header(&p.req, "Origin"), "o");
        parsed_free(&p);

        /* refused on its request line: nothing cut, and nothing of the last request's left */
        char head[] = "GET / HTTP/2.0\r\nOrigin: o\r\n\r\n";
        struct m0_req req = {.headers = calloc(2, sizeof(*req.headers)), .nheaders = 2};
        size_t len = 0;
        ck_assert_ptr_nonnull(req.headers);
        ck_assert_int_eq(m0__http_head_parse(head, sizeof(head) - 1, &cfg, &req, &len), 400);
        ck_assert_uint_eq(req.nheaders, 0);
        free(req.headers);
}
END_TEST

/* Feed `head` to a reader one byte per read, the buffer holding all read so far; returns the
 * first answer that is not -EAGAIN (-EAGAIN if none), and at which byte it came. */
static int read_bytewise(struct m0_head_reader *r, char *buf, const char *head, struct m0_req *req,
                         size_t *ret_at)
{
        size_t n = strlen(head);
        m0__head_reader_init(r, &cfg);
        for (size_t i = 0; i < n; i++) {
                buf[i] = head[i];
                int st = m0__head_read(r, buf, i, i + 1, req);
                if (st != -EAGAIN) {
                        *ret_at = i + 1;
                        return st;
                }
        }
        *ret_at = n;
        return -EAGAIN;
}

/* One head read alone (the metrics sockets, O1): llhttp and the walk, as a loop's connection
 * reads it; the answer comes with the byte that decides it, whatever the reads (H3, H2). */
START_TEST(head_reader_reads_as_the_loop_does)
{
        static char buf[4096];
        struct m0_head_reader r;
        struct m0_header fields[8];
        struct m0_req req = {.headers = fields};
        size_t at;
        const char *ok = "\r\nHEAD /m?x=1 HTTP/1.1\r\nHost: a\r\nAccept: t/p\r\n\r\nbody";
        ck_assert_int_eq(read_bytewise(&r, buf, ok, &req, &at), 0);
        ck_assert_uint_eq(at, strlen(ok) - 4); /* the last byte of the head; the body is not read */
        ck_assert_str_eq(req.method, "HEAD");
        ck_assert_str_eq(req.path, "/m");
        ck_assert_str_eq(req.query, "x=1");
        ck_assert_str_eq(m0_req_header(&req, "accept"), "t/p");
        ck_assert(m0__head_read_is_head(&r));
        ck_assert_int_eq(m0__head_read(&r, buf, at, at, &req), 0); /* decided: it stays */

        /* bare LF: refused when llhttp has the head, not held until a CRLF CRLF that never
         * comes */
        const char *lf = "GET /metrics HTTP/1.1\nHost: x\n\n";
        ck_assert_int_eq(read_bytewise(&r, buf, lf, &req, &at), 400);
        ck_assert(!m0__head_read_is_head(&r));
        /* what llhttp refuses, at once */
        ck_assert_int_eq(read_bytewise(&r, buf, "GET / HTTP/1.2\r\nHost: x\r\n", &req, &at), 400);
        ck_assert_uint_le(at, strlen("GET / HTTP/1.2\r"));
        ck_assert_int_eq(read_bytewise(&r, buf, "HEAD / HTTP/1.1\r\n\r\n", &req, &at), 400);
        ck_assert(m0__head_read_is_head(&r)); /* refused, a HEAD still: its answer is a head */
        ck_assert_int_eq(read_bytewise(&r, buf, "GET / HTTP/1.1\r\nHost: a", &req, &at), -EAGAIN);

        /* the bounds of a head still arriving, as a loop's connection has them */
        cfg.max_uri_bytes = 16;
        cfg.max_head_bytes = 80;
        char line[128] = "GET /";
        memset(line + 5, 'a', 60);
        ck_assert_int_eq(read_bytewise(&r, buf, line, &req, &at), 414);
        ck_assert_uint_eq(at, 16 + 32 + 1);
        const char *big = "GET / HTTP/1.1\r\nHost: a\r\nX: "
                          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        ck_assert_int_eq(read_bytewise(&r, buf, big, &req, &at), 431);
        ck_assert_uint_eq(at, 81);
}
END_TEST

static Suite *http_suite(void)
{
        Suite *s = suite_create("http");
        TCase *tc = tcase_create("head");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, valid_get_indexed);
        tcase_add_test(tc, minimal_heads);
        tcase_add_test(tc, target_forms);
        tcase_add_test(tc, request_line_refusals);
        tcase_add_test(tc, framing_refusals);
        tcase_add_test(tc, host_refusals);
        tcase_add_test(tc, the_three_names_exactly);
        tcase_add_test(tc, content_length_refusals);
        tcase_add_test(tc, transfer_encoding_refusals);
        tcase_add_test(tc, field_refusals);
        tcase_add_test(tc, value_bytes_everywhere);
        tcase_add_test(tc, value_bytes_against_a_byte_at_a_time_reference);
        tcase_add_test(tc, uri_limit);
        tcase_add_test(tc, field_count_limit);
        tcase_add_test(tc, head_size_limit);
        tcase_add_test(tc, refused_walk_keeps_the_fields_before);
        tcase_add_test(tc, head_reader_reads_as_the_loop_does);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(http_suite());
}
