/* SPDX-License-Identifier: MIT */
/* test-response.c: the response builder and its bytes on the wire (SPEC H4), a file as its body
 * (SF2) and its compression (SF4). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include <zlib.h>

#include "compress.h"
#include "hctx.h"
#include "host-private.h"
#include "response.h"
#include "unit-req.h"

static struct m0_hctx *loop;
static struct m0_res res;
static struct m0_buf out;

static void setup(void)
{
        loop = calloc(1, sizeof(*loop));
        ck_assert_ptr_nonnull(loop);
        memcpy(loop->loop.date, "Date: X\r\n", 9);
        loop->loop.date_len = 9;
        memset(&res, 0, sizeof(res));
        m0__res_reset(&res);
        memset(&out, 0, sizeof(out));
}

static void teardown(void)
{
        m0__buf_free(&res.head);
        m0__buf_free(&res.body);
        m0__buf_free(&out);
        free(loop);
        loop = NULL;
}

static void serialize(bool head_only, bool close)
{
        out.len = 0;
        ck_assert_int_eq(m0__res_serialize(loop, &res, head_only,
                                           close ? M0__CONN_CLOSE : M0__CONN_KEEP, &out),
                         0);
}

START_TEST(ok_with_header_and_body)
{
        ck_assert_int_eq(res.status, 200);
        ck_assert_int_eq(m0_res_header(&res, "Content-Type", "text/plain"), 0);
        ck_assert_int_eq(m0_res_write(&res, "hello", 5), 0);
        serialize(false, false);
        ck_assert_buf_lit(out, "HTTP/1.1 200 OK\r\n"
                               "Server: m0\r\n"
                               "Date: X\r\n"
                               "Content-Length: 5\r\n"
                               "Content-Type: text/plain\r\n"
                               "\r\n"
                               "hello");
}
END_TEST

START_TEST(head_only_keeps_length)
{
        ck_assert_int_eq(m0_res_header(&res, "Content-Type", "text/plain"), 0);
        ck_assert_int_eq(m0_res_write(&res, "hello", 5), 0);
        serialize(true, false);
        ck_assert_buf_lit(out, "HTTP/1.1 200 OK\r\n"
                               "Server: m0\r\n"
                               "Date: X\r\n"
                               "Content-Length: 5\r\n"
                               "Content-Type: text/plain\r\n"
                               "\r\n");
}
END_TEST

START_TEST(close_adds_connection_close)
{
        ck_assert_int_eq(m0_res_header(&res, "Content-Type", "text/plain"), 0);
        ck_assert_int_eq(m0_res_write(&res, "hello", 5), 0);
        serialize(false, true);
        ck_assert_buf_lit(out, "HTTP/1.1 200 OK\r\n"
                               "Server: m0\r\n"
                               "Date: X\r\n"
                               "Content-Length: 5\r\n"
                               "Connection: close\r\n"
                               "Content-Type: text/plain\r\n"
                               "\r\n"
                               "hello");
        serialize(true, true);
        ck_assert_buf_lit(out, "HTTP/1.1 200 OK\r\n"
                               "Server: m0\r\n"
                               "Date: X\r\n"
                               "Content-Length: 5\r\n"
                               "Connection: close\r\n"
                               "Content-Type: text/plain\r\n"
                               "\r\n");
}
END_TEST

START_TEST(empty_body_and_other_statuses)
{
        serialize(false, false);
        ck_assert_buf_lit(out,
                          "HTTP/1.1 200 OK\r\nServer: m0\r\nDate: X\r\nContent-Length: 0\r\n\r\n");

        ck_assert_int_eq(m0_res_status(&res, 404), 0);
        ck_assert_int_eq(m0_res_write(&res, "no\n", 3), 0);
        serialize(false, false);
        ck_assert_buf_lit(out, "HTTP/1.1 404 Not Found\r\nServer: m0\r\nDate: X\r\n"
                               "Content-Length: 3\r\n\r\nno\n");

        ck_assert_int_eq(m0_res_status(&res, 299), 0);
        serialize(false, false);
        ck_assert_buf_lit(out, "HTTP/1.1 299 Unknown\r\nServer: m0\r\nDate: X\r\n"
                               "Content-Length: 3\r\n\r\nno\n");
}
END_TEST

START_TEST(no_content_and_not_modified_carry_no_length)
{
        ck_assert_int_eq(m0_res_header(&res, "ETag", "\"v1\""), 0);
        ck_assert_int_eq(m0_res_status(&res, 204), 0);
        serialize(false, false);
        ck_assert_buf_lit(out, "HTTP/1.1 204 No Content\r\nServer: m0\r\nDate: X\r\n"
                               "ETag: \"v1\"\r\n\r\n");

        ck_assert_int_eq(m0_res_status(&res, 304), 0);
        serialize(false, true);
        ck_assert_buf_lit(out, "HTTP/1.1 304 Not Modified\r\nServer: m0\r\nDate: X\r\n"
                               "Connection: close\r\nETag: \"v1\"\r\n\r\n");

        /* a body written to a 204 is not sent: it would be read as the next response */
        ck_assert_int_eq(m0_res_write(&res, "stray", 5), 0);
        ck_assert_int_eq(m0_res_status(&res, 204), 0);
        serialize(false, false);
        ck_assert_buf_lit(out, "HTTP/1.1 204 No Content\r\nServer: m0\r\nDate: X\r\n"
                               "ETag: \"v1\"\r\n\r\n");
}
END_TEST

START_TEST(serialize_appends)
{
        /* pipelined responses are batched into one buffer */
        ck_assert_int_eq(m0__buf_append(&out, "PREV", 4), 0);
        ck_assert_int_eq(m0_res_write(&res, "a", 1), 0);
        ck_assert_int_eq(m0__res_serialize(loop, &res, false, M0__CONN_KEEP, &out), 0);
        ck_assert_int_eq(m0__res_serialize(loop, &res, false, M0__CONN_CLOSE, &out), 0);
        ck_assert_buf_lit(out, "PREV"
                               "HTTP/1.1 200 OK\r\nServer: m0\r\nDate: X\r\nContent-Length: 1\r\n"
                               "\r\na"
                               "HTTP/1.1 200 OK\r\nServer: m0\r\nDate: X\r\nContent-Length: 1\r\n"
                               "Connection: close\r\n\r\na");
}
END_TEST

START_TEST(large_body_and_head)
{
        /* a body and headers past every initial capacity, and the real date line's length */
        static const char date[] = "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n";
        memcpy(loop->loop.date, date, sizeof(date) - 1);
        loop->loop.date_len = sizeof(date) - 1;
        size_t n = 1000003;
        char *body = malloc(n);
        ck_assert_ptr_nonnull(body);
        for (size_t i = 0; i < n; i++)
                body[i] = (char)('A' + i % 23);
        ck_assert_int_eq(m0_res_write(&res, body, n), 0);
        char value[1000];
        memset(value, 'v', sizeof(value) - 1);
        value[sizeof(value) - 1] = '\0';
        for (int i = 0; i < 10; i++) {
                char name[16];
                snprintf(name, sizeof(name), "X-%d", i);
                ck_assert_int_eq(m0_res_header(&res, name, value), 0);
        }
        ck_assert_int_eq(m0_res_status(&res, 431), 0); /* the longest reason */
        serialize(false, true);
        struct m0_buf exp = {0};
        ck_assert_int_eq(m0__buf_printf(&exp,
                                        "HTTP/1.1 431 Request Header Fields Too Large\r\n"
                                        "Server: m0\r\n%sContent-Length: 1000003\r\n"
                                        "Connection: close\r\n",
                                        date),
                         0);
        for (int i = 0; i < 10; i++)
                ck_assert_int_eq(m0__buf_printf(&exp, "X-%d: %s\r\n", i, value), 0);
        ck_assert_int_eq(m0__buf_append(&exp, "\r\n", 2), 0);
        ck_assert_int_eq(m0__buf_append(&exp, body, n), 0);
        ck_assert_bytes(out.data, out.len, exp.data, exp.len);
        m0__buf_free(&exp);
        free(body);
}
END_TEST

START_TEST(kept_answers_say_the_idle_timeout)
{
        /* D111: whole seconds, rounded down; an answer that closes says nothing of it */
        static const struct {
                uint32_t ms;
                const char *line;
        } rows[] = {{60000, "Keep-Alive: timeout=60\r\n"},
                    {1999, "Keep-Alive: timeout=1\r\n"},
                    {999, "Keep-Alive: timeout=0\r\n"},
                    {1, "Keep-Alive: timeout=0\r\n"},
                    {86400000, "Keep-Alive: timeout=86400\r\n"}};
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                m0__res_keep_alive(loop, rows[i].ms);
                ck_assert_bytes(loop->keep_alive, loop->keep_alive_len, rows[i].line,
                                strlen(rows[i].line));
        }
        m0__res_keep_alive(loop, 500);
        ck_assert_int_eq(m0_res_write(&res, "a", 1), 0);
        ck_assert_int_eq(m0__res_serialize(loop, &res, false, M0__CONN_KEEP, &out), 0);
        ck_assert_int_eq(m0__res_serialize(loop, &res, false, M0__CONN_KEEP_ALIVE, &out), 0);
        ck_assert_int_eq(m0__res_serialize(loop, &res, true, M0__CONN_CLOSE, &out), 0);
        ck_assert_buf_lit(out, "HTTP/1.1 200 OK\r\nServer: m0\r\nDate: X\r\nContent-Length: 1\r\n"
                               "Keep-Alive: timeout=0\r\n\r\na"
                               "HTTP/1.1 200 OK\r\nServer: m0\r\nDate: X\r\nContent-Length: 1\r\n"
                               "Connection: keep-alive\r\nKeep-Alive: timeout=0\r\n\r\na"
                               "HTTP/1.1 200 OK\r\nServer: m0\r\nDate: X\r\nContent-Length: 1\r\n"
                               "Connection: close\r\n\r\n");
}
END_TEST

START_TEST(http10_keep_alive_is_said)
{
        /* H7: an HTTP/1.0 connection kept says so, or the client waits for the close */
        ck_assert_int_eq(m0_res_write(&res, "a", 1), 0);
        ck_assert_int_eq(m0__res_serialize(loop, &res, false, M0__CONN_KEEP_ALIVE, &out), 0);
        ck_assert_buf_lit(out, "HTTP/1.1 200 OK\r\nServer: m0\r\nDate: X\r\nContent-Length: 1\r\n"
                               "Connection: keep-alive\r\n\r\na");
}
END_TEST

START_TEST(reasons)
{
        ck_assert_str_eq(m0__status_reason(200), "OK");
        ck_assert_str_eq(m0__status_reason(400), "Bad Request");
        ck_assert_str_eq(m0__status_reason(408), "Request Timeout");
        ck_assert_str_eq(m0__status_reason(413), "Content Too Large");
        ck_assert_str_eq(m0__status_reason(414), "URI Too Long");
        ck_assert_str_eq(m0__status_reason(431), "Request Header Fields Too Large");
        ck_assert_str_eq(m0__status_reason(500), "Internal Server Error");
        ck_assert_str_eq(m0__status_reason(503), "Service Unavailable");
        ck_assert_str_eq(m0__status_reason(599), "Unknown");
}
END_TEST

START_TEST(status_range)
{
        ck_assert_int_eq(m0_res_status(&res, 200), 0);
        ck_assert_int_eq(res.status, 200);
        ck_assert_int_eq(m0_res_status(&res, 599), 0);
        ck_assert_int_eq(res.status, 599);
        ck_assert_int_eq(m0_res_status(&res, 199), -EINVAL);
        ck_assert_int_eq(m0_res_status(&res, 100), -EINVAL);
        ck_assert_int_eq(m0_res_status(&res, 600), -EINVAL);
        ck_assert_int_eq(m0_res_status(&res, 0), -EINVAL);
        ck_assert_int_eq(m0_res_status(&res, -200), -EINVAL);
        ck_assert_int_eq(m0_res_status(&res, 999), -EINVAL);
        ck_assert_int_eq(res.status, 599); /* a refused status changes nothing */
        m0__res_reset(&res);
        ck_assert_int_eq(res.status, 200);
}
END_TEST

START_TEST(header_refusals)
{
        /* CR, LF, NUL and other controls in values */
        ck_assert_int_eq(m0_res_header(&res, "X-A", "a\rb"), -EINVAL);
        ck_assert_int_eq(m0_res_header(&res, "X-A", "a\nb"), -EINVAL);
        ck_assert_int_eq(m0_res_header(&res, "X-A", "a\r\nX-Evil: 1"), -EINVAL);
        ck_assert_int_eq(m0_res_headerf(&res, "X-A", "a%cb", 0), -EINVAL);
        ck_assert_int_eq(m0_res_header(&res, "X-A", "a\x01"), -EINVAL);
        ck_assert_int_eq(m0_res_header(&res, "X-A", "a\x7f"), -EINVAL);
        ck_assert_int_eq(m0_res_header(&res, "X-A", NULL), -EINVAL);
        ck_assert_int_eq(m0_res_header(&res, NULL, "v"), -EINVAL);
        /* the host's framing headers, in any case */
        static const char *const reserved[] = {"Content-Length",
                                               "content-length",
                                               "CONTENT-LENGTH",
                                               "Date",
                                               "date",
                                               "Server",
                                               "SERVER",
                                               "Connection",
                                               "connection",
                                               "Transfer-Encoding",
                                               "transfer-encoding"};
        for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
                ck_assert_msg(m0_res_header(&res, reserved[i], "x") == -EINVAL, "%s accepted",
                              reserved[i]);
        /* names that are not tokens */
        static const char *const bad_names[] = {"",    "X Y",  "X:Y",       "X\tY",  "X\r",
                                                "X\n", "X(y)", "X\"",       "X/Y",   "X@",
                                                "X=",  "X{",   "X\xc3\xa9", "X\x7f", "X;"};
        for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
                int r = m0_res_header(&res, bad_names[i], "v");
                if (r != -EINVAL) {
                        char *e = unit_escape(bad_names[i], strlen(bad_names[i]));
                        ck_abort_msg("name \"%s\": %d", e, r);
                }
        }
        ck_assert_uint_eq(res.nheaders, 0);
        ck_assert_uint_eq(res.head.len, 0);

        /* what is allowed */
        ck_assert_int_eq(m0_res_header(&res, "X-Tab", "a\tb"), 0);
        ck_assert_int_eq(m0_res_header(&res, "X-Utf8", "caf\xc3\xa9"), 0);
        ck_assert_int_eq(m0_res_header(&res, "X-Empty", ""), 0);
        ck_assert_int_eq(m0_res_header(&res, "!#$%&'*+-.^_`|~09azAZ", "t"), 0);
        ck_assert_int_eq(m0_res_header(&res, "Content-Lengthy", "1"), 0);
        ck_assert_int_eq(m0_res_headerf(&res, "X-N", "%d-%s", 7, "x"), 0);
        ck_assert_uint_eq(res.nheaders, 6);
        ck_assert_buf_lit(res.head, "X-Tab: a\tb\r\nX-Utf8: caf\xc3\xa9\r\nX-Empty: \r\n"
                                    "!#$%&'*+-.^_`|~09azAZ: t\r\nContent-Lengthy: 1\r\n"
                                    "X-N: 7-x\r\n");
}
END_TEST

START_TEST(header_bounds)
{
        for (int i = 0; i < 64; i++) {
                char name[16];
                snprintf(name, sizeof(name), "X-%d", i);
                ck_assert_int_eq(m0_res_header(&res, name, "v"), 0);
        }
        ck_assert_uint_eq(res.nheaders, 64);
        size_t len = res.head.len;
        ck_assert_int_eq(m0_res_header(&res, "X-64", "v"), -ENOBUFS);
        ck_assert_int_eq(m0_res_headerf(&res, "X-64", "%s", "v"), -ENOBUFS);
        ck_assert_uint_eq(res.nheaders, 64);
        ck_assert_uint_eq(res.head.len, len);
        m0__res_reset(&res);
        ck_assert_uint_eq(res.nheaders, 0);
        ck_assert_uint_eq(res.head.len, 0);

        /* 16 KiB of header lines: "X: " + value + CRLF */
        char *big = malloc(16384);
        ck_assert_ptr_nonnull(big);
        memset(big, 'b', 16384 - 1);
        big[16384 - 5] = '\0'; /* "X: " + 16379 + CRLF = 16384 */
        ck_assert_int_eq(m0_res_header(&res, "X", big), 0);
        ck_assert_uint_eq(res.head.len, 16384);
        ck_assert_int_eq(m0_res_header(&res, "Y", ""), -ENOBUFS);
        m0__res_reset(&res);
        big[16384 - 5] = 'b';
        big[16384 - 4] = '\0'; /* one byte more */
        ck_assert_int_eq(m0_res_header(&res, "X", big), -ENOBUFS);
        ck_assert_uint_eq(res.head.len, 0);
        free(big);

        /* a formatted value past 1023 bytes */
        ck_assert_int_eq(m0_res_headerf(&res, "X", "%01024d", 1), -ENOBUFS);
        ck_assert_int_eq(m0_res_headerf(&res, "X", "%01023d", 1), 0);
        ck_assert_uint_eq(res.head.len, 3 + 1023 + 2);
}
END_TEST

/* jansson's escapes (Q3): quote, backslash, the short forms, \u00XX for other controls; UTF-8
 * and DEL as they are; bytes that are not UTF-8 refused, the body left as it was. */
START_TEST(json_string_escapes)
{
        ck_assert_int_eq(m0_res_write(&res, "[", 1), 0);
        ck_assert_int_eq(
                m0_res_json_string(&res,
                                   "a\"b\\c/\n\r\t\b\f\x01\x1f\x7f caf\xc3\xa9 \xf0\x9f\x98\x80"),
                0);
        ck_assert_int_eq(m0_res_write(&res, ",", 1), 0);
        ck_assert_int_eq(m0_res_json_string(&res, ""), 0);
        ck_assert_int_eq(m0_res_write(&res, "]", 1), 0);
        ck_assert_buf_lit(res.body, "[\"a\\\"b\\\\c/\\n\\r\\t\\b\\f\\u0001\\u001F\x7f "
                                    "caf\xc3\xa9 \xf0\x9f\x98\x80\",\"\"]");
        size_t before = res.body.len;
        ck_assert_int_eq(m0_res_json_string(&res, "caf\xe9"), -EINVAL);
        ck_assert_int_eq(m0_res_json_string(&res, "a\xed\xa0\x80"
                                                  "b"),
                         -EINVAL);                                       /* a surrogate */
        ck_assert_int_eq(m0_res_json_string(&res, "\xc0\xaf"), -EINVAL); /* overlong */
        ck_assert_uint_eq(res.body.len, before);
}
END_TEST

START_TEST(json_and_text_helpers)
{
        ck_assert_int_eq(m0_res_json(&res, 201, "{\"id\":%d}", 7), 0);
        serialize(false, false);
        ck_assert_buf_lit(out, "HTTP/1.1 201 Created\r\nServer: m0\r\nDate: X\r\n"
                               "Content-Length: 8\r\nContent-Type: application/json\r\n\r\n"
                               "{\"id\":7}");
        m0__res_reset(&res);
        ck_assert_int_eq(m0_res_text(&res, 503, "busy\n"), 0);
        serialize(false, false);
        ck_assert_buf_lit(out, "HTTP/1.1 503 Service Unavailable\r\nServer: m0\r\nDate: X\r\n"
                               "Content-Length: 5\r\nContent-Type: text/plain; charset=utf-8\r\n"
                               "\r\nbusy\n");
        m0__res_reset(&res);
        ck_assert_int_eq(m0_res_text(&res, 700, "x"), -EINVAL);
        ck_assert_int_eq(res.status, 200);
        ck_assert_uint_eq(res.body.len, 0);
        ck_assert_int_eq(m0_res_printf(&res, "%s=%d;", "n", 5), 0);
        ck_assert_int_eq(m0_res_printf(&res, "%s", "end"), 0);
        ck_assert_buf_lit(res.body, "n=5;end");
}
END_TEST

/* SF4, D183: the app's mark holds for its answer only */
START_TEST(no_compress_mark)
{
        ck_assert(!res.no_compress);
        m0_res_no_compress(&res);
        ck_assert(res.no_compress);
        m0__res_reset(&res);
        ck_assert(!res.no_compress);
}
END_TEST

/* SF2: a file's length is the Content-Length, a HEAD's too, and none of its bytes is in the head */
START_TEST(file_body_is_its_length_alone)
{
        res.file.on = true;
        res.file.fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(res.file.fd, 0);
        res.file.off = 10;
        res.file.len = 1048576;
        serialize(false, false);
        ck_assert_buf_lit(out, "HTTP/1.1 200 OK\r\nServer: m0\r\nDate: X\r\n"
                               "Content-Length: 1048576\r\n\r\n");
        serialize(true, false);
        ck_assert_buf_lit(out, "HTTP/1.1 200 OK\r\nServer: m0\r\nDate: X\r\n"
                               "Content-Length: 1048576\r\n\r\n");
        m0__res_reset(&res); /* closes it */
        ck_assert(!res.file.on);
}
END_TEST

/* ---- SF4: answers compressed ---- */

static struct m0_host *host;
static struct parsed preq;

static void compress_setup(void)
{
        setup();
        host = calloc(1, sizeof(*host));
        ck_assert_ptr_nonnull(host);
        unit_config(&host->cfg);
}

static void compress_teardown(void)
{
        parsed_free(&preq);
        free(host);
        teardown();
}

/* A JSON answer of `n` bytes to a GET with `fields` ("Name: value\r\n" lines), compressed. */
static void answer_json(const char *fields, size_t n, const char *ctype)
{
        char head[512];
        snprintf(head, sizeof(head), "GET /todos HTTP/1.1\r\nHost: t\r\n%s\r\n", fields);
        parse_request(&preq, &host->cfg, head, NULL, 0);
        ck_assert_int_eq(m0_res_header(&res, "Content-Type", ctype), 0);
        for (size_t i = 0; i < n; i++)
                ck_assert_int_eq(m0_res_write(&res, i % 10 == 9 ? "," : "7", 1), 0);
        m0__res_compress(&host->cfg, &preq.req, &res);
        ck_assert(res.coded);
}

static bool head_has(const char *line)
{
        return memmem(res.head.data, res.head.len, line, strlen(line)) != NULL;
}

/* gzip for a client that takes only gzip, with Vary; it inflates to the body */
START_TEST(compress_gzip_with_vary)
{
        answer_json("Accept-Encoding: gzip\r\n", 2000, "application/json");
        ck_assert(head_has("Content-Encoding: gzip\r\n"));
        ck_assert(head_has("Vary: Accept-Encoding\r\n"));
        unsigned char plain[4096];
        z_stream z = {0};
        ck_assert_int_eq(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
        z.next_in = (unsigned char *)res.body.data;
        z.avail_in = (uInt)res.body.len;
        z.next_out = plain;
        z.avail_out = sizeof(plain);
        ck_assert_int_eq(inflate(&z, Z_FINISH), Z_STREAM_END);
        ck_assert_uint_eq(z.total_out, 2000);
        inflateEnd(&z);
        ck_assert(res.body.len < 200);
        for (size_t i = 0; i < 2000; i++)
                ck_assert_int_eq(plain[i], i % 10 == 9 ? ',' : '7');
}
END_TEST

/* what leaves the body as it is, with or without Vary */
START_TEST(compress_refusals)
{
        static const struct {
                const char *fields, *ctype;
                size_t n;
                bool no_compress, vary;
        } cases[] = {
                {"", "application/json", 2000, false, true}, /* accepts none */
                {"Accept-Encoding: gzip\r\n", "application/json", 1023, false, false}, /* small */
                {"Accept-Encoding: gzip\r\n", "application/json", 2000, true, false},  /* marked */
                {"Accept-Encoding: gzip\r\nSec-Fetch-Site: cross-site\r\n", "application/json",
                 2000, false, true},                                            /* BREACH, D183 */
                {"Accept-Encoding: gzip\r\n", "image/png", 2000, false, false}, /* incompressible */
                {"Accept-Encoding: gzip\r\n", "text/event-stream", 2000, false, false},
                {"Accept-Encoding: gzip;q=0, identity\r\n", "text/plain", 2000, false, true},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                m0__res_reset(&res);
                parsed_free(&preq);
                if (cases[i].no_compress)
                        m0_res_no_compress(&res);
                answer_json(cases[i].fields, cases[i].n, cases[i].ctype);
                ck_assert_msg(res.body.len == cases[i].n, "case %zu: the body as it is", i);
                ck_assert_msg(!head_has("Content-Encoding"), "case %zu: no coding", i);
                ck_assert_msg(head_has("Vary: Accept-Encoding\r\n") == cases[i].vary,
                              "case %zu: Vary", i);
        }
}
END_TEST

/* an answer the app coded itself, and a 206 or 304, are left alone */
START_TEST(compress_leaves_coded_and_partial_answers)
{
        ck_assert_int_eq(m0_res_header(&res, "Content-Encoding", "br"), 0);
        answer_json("Accept-Encoding: gzip\r\n", 2000, "application/json");
        ck_assert_uint_eq(res.body.len, 2000);
        ck_assert(!head_has("Vary"));
        m0__res_reset(&res);
        parsed_free(&preq);
        res.status = 206;
        answer_json("Accept-Encoding: gzip\r\n", 2000, "text/plain");
        ck_assert_uint_eq(res.body.len, 2000);
        ck_assert(!head_has("Content-Encoding"));
}
END_TEST

static Suite *response_suite(void)
{
        Suite *s = suite_create("response");
        TCase *tc = tcase_create("response");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, ok_with_header_and_body);
        tcase_add_test(tc, no_compress_mark);
        tcase_add_test(tc, head_only_keeps_length);
        tcase_add_test(tc, close_adds_connection_close);
        tcase_add_test(tc, empty_body_and_other_statuses);
        tcase_add_test(tc, no_content_and_not_modified_carry_no_length);
        tcase_add_test(tc, serialize_appends);
        tcase_add_test(tc, large_body_and_head);
        tcase_add_test(tc, http10_keep_alive_is_said);
        tcase_add_test(tc, kept_answers_say_the_idle_timeout);
        tcase_add_test(tc, reasons);
        tcase_add_test(tc, status_range);
        tcase_add_test(tc, header_refusals);
        tcase_add_test(tc, header_bounds);
        tcase_add_test(tc, json_string_escapes);
        tcase_add_test(tc, json_and_text_helpers);
        tcase_add_test(tc, file_body_is_its_length_alone);
        suite_add_tcase(s, tc);
        TCase *tz = tcase_create("compress");
        tcase_add_checked_fixture(tz, compress_setup, compress_teardown);
        tcase_add_test(tz, compress_gzip_with_vary);
        tcase_add_test(tz, compress_refusals);
        tcase_add_test(tz, compress_leaves_coded_and_partial_answers);
        suite_add_tcase(s, tz);
        return s;
}

int main(void)
{
        return unit_run(response_suite());
}
