/* SPDX-License-Identifier: MIT */
/* test-dispatch.c: from a parsed request to its answer (dispatch.c): the handler of the route,
 * the host's own answers (404, 405, OPTIONS), HEAD, a failing handler, the error callback
 * (SPEC T2, H4, Q4). */
#include "unit-h1.h"

static int hello(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)state;
        return m0_res_text(res, 200, "hello");
}

static int echo(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        size_t len;
        const void *body = m0_req_body(req, &len);
        int r = m0_res_status(res, 201);
        return r ? r : m0_res_write(res, body, len);
}

static int fails(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)res;
        (void)state;
        return -EIO;
}

static const m0_route routes[] = {
        {"GET", "/hello", hello, 0}, {"POST", "/echo", echo, 0}, {"PUT", "/echo", echo, 0},
        {"GET", "/fails", fails, 0}, {NULL, NULL, NULL, 0},
};
static const m0_app app = {.name = "unit", .routes = routes};

static void setup(void)
{
        h1_start(&app, (const char *const[]){"--linger-ms", "0", NULL});
}

#define H "Server: m0\r\n"
#define KA "Keep-Alive: timeout=60\r\n"
#define TEXT "Content-Type: text/plain; charset=utf-8\r\n"

/* One request on a new connection: its answer, which leaves the connection open. */
static void exchange(const char *req, const char *want)
{
        int fd = h1_client();
        bool eof;
        char *out = h1_send(fd, req, &eof);
        ck_assert_str_eq(out, want);
        ck_assert(!eof);
        free(out);
        close(fd);
}

START_TEST(a_route_runs_its_handler)
{
        exchange("GET /hello HTTP/1.1\r\nHost: a\r\n\r\n",
                 "HTTP/1.1 200 OK\r\n" H "Content-Length: 5\r\n" KA TEXT "\r\nhello");
}
END_TEST

START_TEST(the_handler_gets_the_body_and_sets_the_status)
{
        exchange("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
                 "HTTP/1.1 201 Created\r\n" H "Content-Length: 3\r\n" KA "\r\nabc");
}
END_TEST

START_TEST(an_unknown_path_is_404)
{
        exchange("GET /nope HTTP/1.1\r\nHost: a\r\n\r\n",
                 "HTTP/1.1 404 Not Found\r\n" H "Content-Length: 14\r\n" KA TEXT
                 "\r\n404 Not Found\n");
}
END_TEST

/* T2: a path another method's route matches. */
START_TEST(another_method_is_405_with_allow)
{
        exchange("DELETE /echo HTTP/1.1\r\nHost: a\r\n\r\n",
                 "HTTP/1.1 405 Method Not Allowed\r\n" H "Content-Length: 23\r\n" KA TEXT
                 "Allow: POST, PUT, OPTIONS\r\n\r\n405 Method Not Allowed\n");
}
END_TEST

START_TEST(options_lists_the_methods)
{
        exchange("OPTIONS /echo HTTP/1.1\r\nHost: a\r\n\r\n",
                 "HTTP/1.1 204 No Content\r\n" H KA "Allow: POST, PUT, OPTIONS\r\n\r\n");
}
END_TEST

/* H4: HEAD runs the GET route and sends its head, the length of the body it did not send. */
START_TEST(head_is_the_get_without_its_body)
{
        exchange("HEAD /hello HTTP/1.1\r\nHost: a\r\n\r\n",
                 "HTTP/1.1 200 OK\r\n" H "Content-Length: 5\r\n" KA TEXT "\r\n");
}
END_TEST

START_TEST(a_failing_handler_is_500_and_the_connection_goes_on)
{
        int fd = h1_client();
        bool eof;
        char *out = h1_send(fd,
                            "GET /fails HTTP/1.1\r\nHost: a\r\n\r\n"
                            "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n",
                            &eof);
        ck_assert_str_eq(out, "HTTP/1.1 500 Internal Server Error\r\n" H
                              "Content-Length: 26\r\n" KA TEXT "\r\n500 Internal Server Error\n"
                              "HTTP/1.1 200 OK\r\n" H "Content-Length: 5\r\n" KA TEXT "\r\nhello");
        ck_assert(!eof);
        free(out);
        close(fd);
}
END_TEST

/* Q4: the app's error callback writes the host's own answers; its failure falls back to the
 * built-in one. */
static int on_error(m0_req *req, m0_res *res, int status, const char *detail, void *state)
{
        (void)state;
        if (status == 405)
                return -EIO;
        return m0_res_printf(res, "%d %s %s", status, detail, req ? m0_req_path(req) : "-")
                       ?: m0_res_status(res, status);
}

static const m0_app app_err = {.name = "unit", .routes = routes, .error = on_error};

START_TEST(the_error_callback_writes_the_hosts_answers)
{
        h1_stop();
        h1_start(&app_err, (const char *const[]){"--linger-ms", "0", NULL});
        int fd = h1_client();
        char *out = h1_send(fd,
                            "GET /nope HTTP/1.1\r\nHost: a\r\n\r\n"
                            "DELETE /hello HTTP/1.1\r\nHost: a\r\n\r\n",
                            NULL);
        ck_assert_str_eq(out,
                         "HTTP/1.1 404 Not Found\r\n" H "Content-Length: 36\r\n" KA
                         "\r\n404 no route matches this path /nope"
                         "HTTP/1.1 405 Method Not Allowed\r\n" H "Content-Length: 23\r\n" KA TEXT
                         "Allow: GET, HEAD, OPTIONS\r\n\r\n405 Method Not Allowed\n");
        free(out);
        close(fd);
}
END_TEST

static Suite *dispatch_suite(void)
{
        Suite *s = suite_create("dispatch");
        TCase *tc = tcase_create("dispatch");
        tcase_add_checked_fixture(tc, setup, h1_stop);
        tcase_add_test(tc, a_route_runs_its_handler);
        tcase_add_test(tc, the_handler_gets_the_body_and_sets_the_status);
        tcase_add_test(tc, an_unknown_path_is_404);
        tcase_add_test(tc, another_method_is_405_with_allow);
        tcase_add_test(tc, options_lists_the_methods);
        tcase_add_test(tc, head_is_the_get_without_its_body);
        tcase_add_test(tc, a_failing_handler_is_500_and_the_connection_goes_on);
        tcase_add_test(tc, the_error_callback_writes_the_hosts_answers);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(dispatch_suite());
}
