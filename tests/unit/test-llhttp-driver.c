/* SPDX-License-Identifier: MIT */
/* test-llhttp-driver.c: bytes to requests (llhttp-driver.c): pipelined and split requests,
 * chunked bodies, 100-continue, the bounds and the framings refused (SPEC H1-H4). */
#include "unit-h1.h"

static int echo(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        size_t len;
        const void *body = m0_req_body(req, &len);
        int r = m0_res_printf(res, "%s %s [", m0_req_method(req), m0_req_path(req));
        if (r == 0)
                r = m0_res_write(res, body, len);
        return r ? r : m0_res_printf(res, "]");
}

static const m0_route routes[] = {
        {NULL, "/e", echo, M0_ROUTE_PREFIX},
        {NULL, NULL, NULL, 0},
};
static const m0_app app = {.name = "unit", .routes = routes};

static void setup(void)
{
        h1_start(&app, (const char *const[]){"--linger-ms", "0", "--max-head-bytes", "1024",
                                             "--max-uri-bytes", "256", "--max-header-fields", "8",
                                             "--max-body-bytes", "64", NULL});
}

#define H "Server: m0\r\n"
#define KA "Keep-Alive: timeout=60\r\n"
#define OK(len, body) "HTTP/1.1 200 OK\r\n" H "Content-Length: " len "\r\n" KA "\r\n" body

/* H1: three requests in one read, answered in order. */
START_TEST(pipelined_requests_are_answered_in_order)
{
        int fd = h1_client();
        bool eof;
        char *out = h1_send(fd,
                            "GET /e/1 HTTP/1.1\r\nHost: a\r\n\r\n"
                            "POST /e/2 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi"
                            "GET /e/3 HTTP/1.1\r\nHost: a\r\n\r\n",
                            &eof);
        ck_assert_str_eq(out, OK("11", "GET /e/1 []") OK("14", "POST /e/2 [hi]")
                                      OK("11", "GET /e/3 []"));
        ck_assert(!eof);
        free(out);
        close(fd);
}
END_TEST

/* A request that arrives a byte at a time is answered once, after its last byte, with the
 * bytes it gets in one piece. */
START_TEST(a_request_a_byte_at_a_time_is_answered_as_a_whole)
{
        static const char req[] = "POST /e/x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nabcde";
        int fd = h1_client();
        for (size_t i = 0; i + 1 < sizeof(req) - 1; i++) {
                ck_assert_int_eq(write(fd, req + i, 1), 1);
                h1_turn();
                char *out = h1_read(fd, NULL);
                ck_assert_msg(!*out, "an answer after %zu bytes: %s", i + 1, out);
                free(out);
        }
        char *out = h1_send(fd, "e", NULL);
        ck_assert_str_eq(out, OK("17", "POST /e/x [abcde]"));
        free(out);
        close(fd);
}
END_TEST

/* H4: a chunked body reaches the handler whole, without its framing. */
START_TEST(a_chunked_body_reaches_the_handler_whole)
{
        int fd = h1_client();
        char *out = h1_send(fd,
                            "PUT /e/c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                            "3\r\nabc\r\n"
                            "a;ext=1\r\n0123456789\r\n"
                            "0\r\n\r\n",
                            NULL);
        ck_assert_str_eq(out, OK("24", "PUT /e/c [abc0123456789]"));
        free(out);
        close(fd);
}
END_TEST

/* H4, H8: 100 Continue once the request is routed, then the answer. */
START_TEST(expect_100_continue_is_answered_before_the_body)
{
        int fd = h1_client();
        char *out = h1_send(fd,
                            "POST /e/x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n"
                            "Expect: 100-continue\r\n\r\n",
                            NULL);
        ck_assert_str_eq(out, "HTTP/1.1 100 Continue\r\n\r\n");
        free(out);
        out = h1_send(fd, "ok", NULL);
        ck_assert_str_eq(out, OK("14", "POST /e/x [ok]"));
        free(out);
        close(fd);
}
END_TEST

/* A refusal: its exact answer, then the end of the connection; what followed is not served. */
static void refused(const char *req, const char *want)
{
        int fd = h1_client();
        bool eof;
        char *r = malloc(strlen(req) + 64);
        ck_assert_ptr_nonnull(r);
        strcpy(r, req);
        strcat(r, "GET /e/after HTTP/1.1\r\nHost: a\r\n\r\n");
        char *out = h1_send(fd, r, &eof);
        ck_assert_str_eq(out, want);
        ck_assert(eof);
        ck_assert_uint_eq(atomic_load(&h1->load), 0); /* closed: the loop holds it no more */
        free(out);
        free(r);
        close(fd);
}

/* The host's own answer that ends a connection. */
#define REFUSAL(status, len)                                                                       \
        "HTTP/1.1 " status "\r\n" H "Content-Length: " len "\r\nConnection: close\r\n"             \
        "Content-Type: text/plain; charset=utf-8\r\n\r\n" status "\n"

/* H3: Content-Length beside Transfer-Encoding. */
START_TEST(length_and_chunked_together_are_400_and_close)
{
        refused("POST /e/x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
                "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                REFUSAL("400 Bad Request", "16"));
}
END_TEST

/* H3: a folded header line. */
START_TEST(obs_fold_is_400_and_close)
{
        refused("GET /e/x HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n",
                REFUSAL("400 Bad Request", "16"));
}
END_TEST

/* H2: the head's bound. */
START_TEST(a_head_past_its_bound_is_431)
{
        char req[1200];
        snprintf(req, sizeof(req), "GET /e/x HTTP/1.1\r\nHost: a\r\nX-Big: %01000d\r\n\r\n", 0);
        refused(req, REFUSAL("431 Request Header Fields Too Large", "36"));
}
END_TEST

/* H2: the URI's bound. */
START_TEST(a_uri_past_its_bound_is_414)
{
        char req[400];
        snprintf(req, sizeof(req), "GET /e/%0260d HTTP/1.1\r\nHost: a\r\n\r\n", 0);
        refused(req, REFUSAL("414 URI Too Long", "17"));
}
END_TEST

/* H2: the number of fields. */
START_TEST(too_many_fields_is_431)
{
        refused("GET /e/x HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\nF: 1\r\n"
                "G: 1\r\nH: 1\r\n\r\n",
                REFUSAL("431 Request Header Fields Too Large", "36"));
}
END_TEST

/* H2: the body's bound, refused from its length before a byte of it is read. */
START_TEST(a_body_past_its_bound_is_413)
{
        refused("POST /e/x HTTP/1.1\r\nHost: a\r\nContent-Length: 65\r\n\r\n",
                REFUSAL("413 Content Too Large", "22"));
}
END_TEST

static Suite *llhttp_driver_suite(void)
{
        Suite *s = suite_create("llhttp_driver");
        TCase *tc = tcase_create("llhttp_driver");
        tcase_add_checked_fixture(tc, setup, h1_stop);
        tcase_add_test(tc, pipelined_requests_are_answered_in_order);
        tcase_add_test(tc, a_request_a_byte_at_a_time_is_answered_as_a_whole);
        tcase_add_test(tc, a_chunked_body_reaches_the_handler_whole);
        tcase_add_test(tc, expect_100_continue_is_answered_before_the_body);
        tcase_add_test(tc, length_and_chunked_together_are_400_and_close);
        tcase_add_test(tc, obs_fold_is_400_and_close);
        tcase_add_test(tc, a_head_past_its_bound_is_431);
        tcase_add_test(tc, a_uri_past_its_bound_is_414);
        tcase_add_test(tc, too_many_fields_is_431);
        tcase_add_test(tc, a_body_past_its_bound_is_413);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(llhttp_driver_suite());
}
