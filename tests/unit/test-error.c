/* SPDX-License-Identifier: MIT */
/* test-error.c: the answers the host makes by itself (SPEC Q4), byte for byte: built-in text and
 * problem+json, the app's callback and what happens when it breaks its contract, the host's
 * extra headers, a handler's -errno (its log line and journal fields) and m0_req_json()'s
 * refusals passed on by a handler. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define SD_JOURNAL_SUPPRESS_LOCATION /* the function itself, not the macro adding CODE_FILE= */
#include <systemd/sd-journal.h>

#include "error.h"
#include "host-private.h"
#include "log.h"
#include "hctx.h"
#include "response.h"
#include "route.h"
#include "unit-req.h"

static struct m0_config cfg;
static struct m0_host host;
static m0_app app;
static struct m0_hctx *loop;
static struct m0_buf out;
static struct m0_router router;
static int state_marker;

static void setup(void)
{
        unit_config(&cfg);
        memset(&app, 0, sizeof(app));
        app.name = "app";
        host.app = &app;
        loop = calloc(1, sizeof(*loop));
        ck_assert_ptr_nonnull(loop);
        memcpy(loop->loop.date, "Date: X\r\n", 9);
        loop->loop.date_len = 9;
        m0__host_link(&host);
        loop->serve = &host.serve; /* what m0__hctx_prepare hands a loop */
        loop->app = host.app;
        loop->thread.state = &state_marker;
        memset(&out, 0, sizeof(out));
        m0__log_init("app");
}

static void teardown(void)
{
        m0__router_free(&router);
        m0__buf_free(&out);
        free(loop);
        loop = NULL;
}

/* ---- stderr, where the log goes outside the journal ---- */

static int saved_err = -1, pipe_fd[2];

static void capture_begin(void)
{
        ck_assert_int_eq(pipe2(pipe_fd, O_CLOEXEC | O_NONBLOCK), 0);
        saved_err = dup(STDERR_FILENO);
        ck_assert_int_ge(saved_err, 0);
        ck_assert_int_eq(dup2(pipe_fd[1], STDERR_FILENO), STDERR_FILENO);
}

/* What was logged since capture_begin(), NUL-terminated in `buf`. */
static void capture_end(char *buf, size_t len)
{
        ck_assert_int_eq(dup2(saved_err, STDERR_FILENO), STDERR_FILENO);
        close(saved_err);
        ssize_t n = read(pipe_fd[0], buf, len - 1);
        buf[n > 0 ? n : 0] = '\0';
        close(pipe_fd[0]);
        close(pipe_fd[1]);
}

/* A host answer with `detail` and header lines `headers` (or NULL), closing the connection as
 * the head's refusals do, into `out`. */
static int refusal(int status, const char *detail, const char *headers)
{
        struct m0_host_answer a = {.status = status,
                                   .conn = M0__CONN_CLOSE,
                                   .detail = detail,
                                   .headers = headers,
                                   .headers_len = headers ? strlen(headers) : 0};
        return m0__res_error(loop, &a, &out);
}

/* ---- built-in answers ---- */

START_TEST(builtin_text)
{
        ck_assert_int_eq(refusal(413, NULL, NULL), 0);
        ck_assert_buf_lit(out, "HTTP/1.1 413 Content Too Large\r\n"
                               "Server: m0\r\n"
                               "Date: X\r\n"
                               "Content-Length: 22\r\n"
                               "Connection: close\r\n"
                               "Content-Type: text/plain; charset=utf-8\r\n"
                               "\r\n"
                               "413 Content Too Large\n");
        out.len = 0;
        ck_assert_int_eq(refusal(431, NULL, NULL), 0);
        ck_assert_buf_lit(out, "HTTP/1.1 431 Request Header Fields Too Large\r\n"
                               "Server: m0\r\n"
                               "Date: X\r\n"
                               "Content-Length: 36\r\n"
                               "Connection: close\r\n"
                               "Content-Type: text/plain; charset=utf-8\r\n"
                               "\r\n"
                               "431 Request Header Fields Too Large\n");
        out.len = 0;
        /* a detail of the caller's follows a colon; the host's headers follow the body's */
        ck_assert_int_eq(refusal(405, "CONNECT is not served", "Allow: GET, HEAD\r\n"), 0);
        ck_assert_buf_lit(out, "HTTP/1.1 405 Method Not Allowed\r\n"
                               "Server: m0\r\n"
                               "Date: X\r\n"
                               "Content-Length: 46\r\n"
                               "Connection: close\r\n"
                               "Content-Type: text/plain; charset=utf-8\r\n"
                               "Allow: GET, HEAD\r\n"
                               "\r\n"
                               "405 Method Not Allowed: CONNECT is not served\n");
}
END_TEST

START_TEST(builtin_problem_json)
{
        app.flags = M0_APP_ERRORS_JSON;
        ck_assert_int_eq(refusal(408, NULL, NULL), 0);
        static const char body[] = "{\"type\":\"about:blank\",\"title\":\"Request Timeout\","
                                   "\"status\":408,\"detail\":\"the request did not arrive in "
                                   "time\"}";
        char exp[512];
        snprintf(exp, sizeof(exp),
                 "HTTP/1.1 408 Request Timeout\r\nServer: m0\r\nDate: X\r\nContent-Length: %zu\r\n"
                 "Connection: close\r\nContent-Type: application/problem+json\r\n\r\n%s",
                 sizeof(body) - 1, body);
        ck_assert_bytes(out.data, out.len, exp, strlen(exp));

        /* a detail with bytes that are not UTF-8 is still valid JSON */
        struct m0_res res = {0};
        ck_assert_int_eq(
                m0__error_fill(&app, NULL, NULL, 400, "bad \"\xff\" byte\n", NULL, 0, &res), 0);
        ck_assert_buf_lit(res.body,
                          "{\"type\":\"about:blank\",\"title\":\"Bad Request\",\"status\":"
                          "400,\"detail\":\"bad \\\"\xef\xbf\xbd\\\" byte\\n\"}");
        unit_res_free(&res);
}
END_TEST

/* Every status the host makes by itself has a detail of its own. */
START_TEST(details)
{
        static const struct {
                int status;
                const char *detail;
        } d[] = {
                {400, "the request is not valid HTTP/1.1"},
                {404, "no route matches this path"},
                {405, "this path does not take this method"},
                {408, "the request did not arrive in time"},
                {409, "the request conflicts with what the server can do"},
                {411, "the request must carry Content-Length"},
                {413, "the request's body is larger than this server takes"},
                {414, "the request's target is longer than this server takes"},
                {415, "the body's media type is not one this route takes"},
                {417, "only Expect: 100-continue is understood"},
                {431, "the request's head is larger than this server takes"},
                {500, "the server could not answer this request"},
                {503, "the server cannot take this request now"},
                {501, "Not Implemented"},
        };
        for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++)
                ck_assert_str_eq(m0__error_detail(d[i].status), d[i].detail);
}
END_TEST

/* ---- the app's callback ---- */

static int seen_status, seen_calls;
static const char *seen_detail;
static m0_req *seen_req;
static void *seen_state;
static int callback_mode; /* 0 answers, 1 fails, 2 changes the status, 3 streams */

static int on_error(m0_req *req, m0_res *res, int status, const char *detail, void *state)
{
        seen_calls++;
        seen_status = status;
        seen_detail = detail;
        seen_req = req;
        seen_state = state;
        if (req)
                (void)m0_req_query(req, "lang"); /* a helper that leaves its index behind */
        int r = m0_res_header(res, "X-App", "yes");
        if (callback_mode == 1)
                return -EIO;
        if (callback_mode == 2)
                return m0_res_status(res, 200);
        if (callback_mode == 3)
                return m0_res_stream(res);
        return r < 0 ? r : m0_res_json(res, status, "{\"oops\":%d,\"why\":\"%s\"}", status, detail);
}

START_TEST(callback_answers)
{
        app.error = on_error;
        app.flags = M0_APP_ERRORS_JSON; /* the callback comes first */
        callback_mode = 0;
        ck_assert_int_eq(refusal(400, NULL, "Allow: GET\r\n"), 0);
        ck_assert_int_eq(seen_status, 400);
        ck_assert_str_eq(seen_detail, "the request is not valid HTTP/1.1");
        ck_assert_ptr_null(seen_req);
        ck_assert_ptr_eq(seen_state, &state_marker);
        ck_assert_buf_lit(out, "HTTP/1.1 400 Bad Request\r\nServer: m0\r\nDate: X\r\n"
                               "Content-Length: 54\r\nConnection: close\r\nX-App: yes\r\n"
                               "Content-Type: application/json\r\nAllow: GET\r\n\r\n"
                               "{\"oops\":400,\"why\":\"the request is not valid HTTP/1.1\"}");
}
END_TEST

/* A callback that fails, changes the status or opens a stream: the built-in answer goes out,
 * and the log says so at the 1st, 2nd, 4th, ... time. */
START_TEST(callback_breaks_its_contract)
{
        app.error = on_error;
        char log[2048];
        capture_begin();
        /* fails, changes the status, fails (not logged: the 3rd), streams (the 4th) */
        static const int modes[] = {1, 2, 1, 3};
        for (size_t i = 0; i < 4; i++) {
                callback_mode = modes[i];
                out.len = 0;
                ck_assert_int_eq(refusal(404, NULL, NULL), 0);
                ck_assert_buf_lit(out, "HTTP/1.1 404 Not Found\r\nServer: m0\r\nDate: X\r\n"
                                       "Content-Length: 14\r\nConnection: close\r\n"
                                       "Content-Type: text/plain; charset=utf-8\r\n\r\n"
                                       "404 Not Found\n");
        }
        capture_end(log, sizeof(log));
        ck_assert_str_eq(log, "m0[app]: the app's error callback failed answering 404: it "
                              "returned Input/output error; the built-in answer went out (1 so "
                              "far)\n"
                              "m0[app]: the app's error callback failed answering 404: it set "
                              "the status 200, which is the host's; the built-in answer went out "
                              "(2 so far)\n"
                              "m0[app]: the app's error callback failed answering 404: it opened "
                              "a stream; the built-in answer went out (4 so far)\n");
}
END_TEST

/* ---- handlers that fail (m0__app_run, loop and pool alike) ---- */

static int h_fail(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)state;
        (void)m0_res_text(res, 200, "half an answer");
        return -EIO;
}

static int h_json(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        json_t *j;
        int r = m0_req_json(req, &j);
        if (r < 0)
                return r;
        return m0_res_json_value(res, 200, j);
}

static int h_json_then_other(m0_req *req, m0_res *res, void *state)
{
        (void)res;
        (void)state;
        json_t *j;
        return m0_req_json(req, &j) < 0 ? -ENOSPC : 0;
}

static int h_json_own_answer(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        json_t *j;
        return m0_req_json(req, &j) < 0 ? m0_res_text(res, 422, "mine\n") : 0;
}

static int h_emediumtype(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)res;
        (void)state;
        return -EMEDIUMTYPE;
}

static const m0_route routes[] = {
        {"GET", "/fail", h_fail, 0},
        {"POST", "/j", h_json, 0},
        {NULL, "/pre/", h_fail, M0_ROUTE_PREFIX},
        {NULL, NULL, NULL, 0},
};

/* Route the request in `p` through app's table, compiled as serving compiles it, binding its
 * route (NULL: dispatch) as the loop does. */
static void route(struct parsed *p)
{
        m0__router_free(&router);
        ck_assert_int_eq(m0__router_build(&router, &app, &cfg), 0);
        struct m0_match m;
        m0__router_match(&router, m0__method_number(p->req.method), p->req.path, p->req.path_len,
                         &m);
        ck_assert_int_eq(m0__req_bind(&p->req, p->req.path, &m), 0);
}

/* Run `fn` for the request in `head` + `body` as the host does; the answer's status. */
static int run(struct parsed *p, struct m0_res *res, m0_handler_fn fn, const char *head,
               const char *body)
{
        parse_request(p, &cfg, head, body, strlen(body));
        route(p);
        unit_res_init(res);
        m0__app_run(&app, fn, &p->req, res, &state_marker);
        return res->status;
}

START_TEST(handler_errno_is_a_logged_500)
{
        struct parsed p;
        struct m0_res res;
        char log[1024];
        app.routes = routes;
        capture_begin();
        ck_assert_int_eq(run(&p, &res, h_fail, "GET /fail?x=1 HTTP/1.1\r\nHost: h\r\n\r\n", ""),
                         500);
        ck_assert_buf_lit(res.head, "Content-Type: text/plain; charset=utf-8\r\n");
        ck_assert_buf_lit(res.body, "500 Internal Server Error\n");
        parsed_free(&p);
        unit_res_free(&res);
        ck_assert_int_eq(run(&p, &res, h_fail, "DELETE /pre/x/y HTTP/1.1\r\nHost: h\r\n\r\n", ""),
                         500);
        parsed_free(&p);
        unit_res_free(&res);
        ck_assert_int_eq(run(&p, &res, h_fail, "HEAD /fail HTTP/1.1\r\nHost: h\r\n\r\n", ""), 500);
        parsed_free(&p);
        unit_res_free(&res);
        ck_assert_int_eq(run(&p, &res, h_fail, "GET /elsewhere HTTP/1.1\r\nHost: h\r\n\r\n", ""),
                         500);
        parsed_free(&p);
        unit_res_free(&res);
        capture_end(log, sizeof(log));
        ck_assert_str_eq(log, "m0[app] loop 0: route /fail: GET /fail failed: Input/output error; "
                              "answered 500\n"
                              "m0[app] loop 0: route /pre/: DELETE /pre/x/y failed: Input/output "
                              "error; answered 500\n"
                              "m0[app] loop 0: route /fail: HEAD /fail failed: Input/output "
                              "error; answered 500\n"
                              "m0[app] loop 0: route dispatch: GET /elsewhere failed: "
                              "Input/output error; answered 500\n");
}
END_TEST

/* A handler passing on m0_req_json()'s -errno gets its 415 or 400, through the callback, with
 * the request; nothing is logged. Another -errno after it is a 500 all the same. */
START_TEST(json_refusals_passed_on)
{
        struct parsed p;
        struct m0_res res;
        char log[1024];
        app.routes = routes;
        capture_begin();
        ck_assert_int_eq(run(&p, &res, h_json,
                             "POST /j HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n", "{}"),
                         415);
        ck_assert_buf_lit(res.body, "415 Unsupported Media Type: the body must be "
                                    "application/json or a +json type\n");
        parsed_free(&p);
        unit_res_free(&res);
        ck_assert_int_eq(run(&p, &res, h_json,
                             "POST /j HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
                             "Content-Length: 3\r\n\r\n",
                             "{1}"),
                         400);
        ck_assert_buf_lit(res.body, "400 Bad Request: the body is not valid JSON: string or '}' "
                                    "expected at line 1, column 2\n");
        parsed_free(&p);
        unit_res_free(&res);

        app.error = on_error;
        callback_mode = 0;
        seen_calls = 0;
        ck_assert_int_eq(run(&p, &res, h_json,
                             "POST /j HTTP/1.1\r\nHost: h\r\nContent-Type: text/plain\r\n"
                             "Content-Length: 2\r\n\r\n",
                             "{}"),
                         415);
        ck_assert_int_eq(seen_calls, 1);
        ck_assert_ptr_eq(seen_req, &p.req);
        ck_assert_str_eq(seen_detail, "the body must be application/json or a +json type");
        ck_assert_buf_lit(res.head, "X-App: yes\r\nContent-Type: application/json\r\n");
        parsed_free(&p);
        unit_res_free(&res);

        /* the app answered the refusal itself: its answer stands */
        ck_assert_int_eq(run(&p, &res, h_json_own_answer,
                             "POST /j HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\n", "x"),
                         422);
        parsed_free(&p);
        unit_res_free(&res);
        capture_end(log, sizeof(log));
        ck_assert_str_eq(log, "");

        capture_begin();
        ck_assert_int_eq(run(&p, &res, h_json_then_other,
                             "POST /j HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\n", "x"),
                         500);
        parsed_free(&p);
        unit_res_free(&res);
        /* a refusal ends with its handler: the same -errno from the next one is a 500 */
        parse_request(&p, &cfg, "POST /j HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\n", "x", 1);
        route(&p);
        unit_res_init(&res);
        m0__app_run(&app, h_json_own_answer, &p.req, &res, NULL);
        ck_assert_int_eq(res.status, 422);
        ck_assert(!p.req.scratch && p.req.refusal.err == 0);
        m0__res_reset(&res);
        m0__app_run(&app, h_emediumtype, &p.req, &res, NULL);
        ck_assert_int_eq(res.status, 500);
        parsed_free(&p);
        unit_res_free(&res);
        capture_end(log, sizeof(log));
        ck_assert_str_eq(log, "m0[app] loop 0: route /j: POST /j failed: No space left on device; "
                              "answered 500\n"
                              "m0[app] loop 0: route /j: POST /j failed: Wrong medium type; "
                              "answered 500\n");
}
END_TEST

/* Routing's 404 and 405 go through the callback with the request, the host's lines after its
 * own. */
START_TEST(no_route)
{
        struct parsed p;
        app.error = on_error;
        callback_mode = 0;
        parse_head(&p, &cfg, "GET /nope?lang=en HTTP/1.1\r\nHost: h\r\n\r\n");
        struct m0_host_answer a = {.status = 404, .req = &p.req};
        ck_assert_int_eq(m0__res_error(loop, &a, &out), 0);
        ck_assert_ptr_eq(seen_req, &p.req);
        ck_assert_str_eq(seen_detail, "no route matches this path");
        ck_assert(!p.req.scratch); /* what the callback's helpers made ended with the answer */
        ck_assert_buf_lit(out, "HTTP/1.1 404 Not Found\r\nServer: m0\r\nDate: X\r\n"
                               "Content-Length: 47\r\nX-App: yes\r\n"
                               "Content-Type: application/json\r\n\r\n"
                               "{\"oops\":404,\"why\":\"no route matches this path\"}");
        out.len = 0;
        static const char allow[] = "Allow: GET, HEAD, OPTIONS\r\n";
        a = (struct m0_host_answer){.status = 405,
                                    .conn = M0__CONN_KEEP_ALIVE,
                                    .headers = allow,
                                    .headers_len = sizeof(allow) - 1,
                                    .req = &p.req};
        ck_assert_int_eq(m0__res_error(loop, &a, &out), 0);
        ck_assert_str_eq(seen_detail, "this path does not take this method");
        ck_assert_buf_lit(out, "HTTP/1.1 405 Method Not Allowed\r\nServer: m0\r\nDate: X\r\n"
                               "Content-Length: 56\r\nConnection: keep-alive\r\nX-App: yes\r\n"
                               "Content-Type: application/json\r\n"
                               "Allow: GET, HEAD, OPTIONS\r\n\r\n"
                               "{\"oops\":405,\"why\":\"this path does not take this method\"}");
        parsed_free(&p);
}
END_TEST

/* T2, Q4: routing's answers keep their Allow line and the connection's mode, in text and in
 * problem+json; a 204 (OPTIONS, a preflight) is no error: no callback, no body. */
START_TEST(routing_answers)
{
        static const char allow[] = "Allow: GET, HEAD, OPTIONS\r\n";
        struct m0_host_answer a = {
                .status = 405, .headers = allow, .headers_len = sizeof(allow) - 1};
        ck_assert_int_eq(m0__res_error(loop, &a, &out), 0);
        ck_assert_buf_lit(out, "HTTP/1.1 405 Method Not Allowed\r\n"
                               "Server: m0\r\n"
                               "Date: X\r\n"
                               "Content-Length: 23\r\n"
                               "Content-Type: text/plain; charset=utf-8\r\n"
                               "Allow: GET, HEAD, OPTIONS\r\n"
                               "\r\n"
                               "405 Method Not Allowed\n");
        /* to a HEAD: the same head, no body */
        out.len = 0;
        a.head_only = true;
        a.conn = M0__CONN_KEEP_ALIVE;
        ck_assert_int_eq(m0__res_error(loop, &a, &out), 0);
        ck_assert_buf_lit(out, "HTTP/1.1 405 Method Not Allowed\r\n"
                               "Server: m0\r\n"
                               "Date: X\r\n"
                               "Content-Length: 23\r\n"
                               "Connection: keep-alive\r\n"
                               "Content-Type: text/plain; charset=utf-8\r\n"
                               "Allow: GET, HEAD, OPTIONS\r\n"
                               "\r\n");
        /* problem+json, Allow still after the body's type */
        out.len = 0;
        app.flags = M0_APP_ERRORS_JSON;
        a.head_only = false;
        a.conn = M0__CONN_KEEP;
        ck_assert_int_eq(m0__res_error(loop, &a, &out), 0);
        ck_assert_buf_lit(out, "HTTP/1.1 405 Method Not Allowed\r\n"
                               "Server: m0\r\n"
                               "Date: X\r\n"
                               "Content-Length: 111\r\n"
                               "Content-Type: application/problem+json\r\n"
                               "Allow: GET, HEAD, OPTIONS\r\n"
                               "\r\n"
                               "{\"type\":\"about:blank\",\"title\":\"Method Not Allowed\","
                               "\"status\":405,\"detail\":\"this path does not take this "
                               "method\"}");
        /* OPTIONS: 204, no length, no type, no body, and the callback is not asked */
        out.len = 0;
        app.error = on_error;
        seen_calls = 0;
        a = (struct m0_host_answer){
                .status = 204, .headers = allow, .headers_len = sizeof(allow) - 1};
        ck_assert_int_eq(m0__res_error(loop, &a, &out), 0);
        ck_assert_buf_lit(out, "HTTP/1.1 204 No Content\r\nServer: m0\r\nDate: X\r\n"
                               "Allow: GET, HEAD, OPTIONS\r\n\r\n");
        ck_assert_int_eq(seen_calls, 0);
}
END_TEST

/* Q3, Q4: a route's content_type and m0_req_json() refuse a body in the same words. */
START_TEST(media_detail)
{
        char d[128];
        m0__error_media_detail("application/json", 16, d, sizeof(d));
        ck_assert_str_eq(d, "the body must be application/json or a +json type");
        /* AP1: a suffix is named only where there is one (RFC 6838 4.2.8) */
        m0__error_media_detail("text/csv", 8, d, sizeof(d));
        ck_assert_str_eq(d, "the body must be text/csv");
        m0__error_media_detail("application/x-www-form-urlencoded", 33, d, sizeof(d));
        ck_assert_str_eq(d, "the body must be application/x-www-form-urlencoded");
        m0__error_media_detail("application/XML", 15, d, sizeof(d));
        ck_assert_str_eq(d, "the body must be application/XML or a +XML type");
        ck_assert(m0__media_suffix("cbor", 4));
        ck_assert(!m0__media_suffix("csv", 3));
        ck_assert(!m0__media_suffix("jso", 3));
}
END_TEST

/* ---- the journal entry of a failure (J1, Q4): the fields as sd_journal_sendv() gets them ---- */

static char journal[16][1200];
static int journal_n;

/* Stands in for libsystemd's: the library's call resolves to this one in the test binary. */
int sd_journal_sendv(const struct iovec *iov, int n)
{
        journal_n = n < 16 ? n : 16;
        for (int i = 0; i < journal_n; i++)
                snprintf(journal[i], sizeof(journal[i]), "%.*s", (int)iov[i].iov_len,
                         (const char *)iov[i].iov_base);
        return 0;
}

START_TEST(journal_fields)
{
        struct stat st;
        ck_assert_int_eq(fstat(STDERR_FILENO, &st), 0);
        char js[64];
        snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino);
        setenv("JOURNAL_STREAM", js, 1);
        m0__log_init("app");
        ck_assert(m0__log_journal());
        struct parsed p;
        struct m0_res res;
        app.routes = routes;
        ck_assert_int_eq(run(&p, &res, h_fail, "GET /fail HTTP/1.1\r\nHost: h\r\n\r\n", ""), 500);
        parsed_free(&p);
        unit_res_free(&res);
        unsetenv("JOURNAL_STREAM");
        m0__log_init("app");
        ck_assert_int_eq(journal_n, 6);
        ck_assert_str_eq(journal[0], "MESSAGE=route /fail: GET /fail failed: Input/output error; "
                                     "answered 500");
        ck_assert_str_eq(journal[1], "PRIORITY=3");
        ck_assert_str_eq(journal[2], "M0_APP=app");
        ck_assert_str_eq(journal[3], "M0_LOOP=0");
        ck_assert_str_eq(journal[4], "M0_ROUTE=/fail");
        ck_assert_str_eq(journal[5], "ERRNO=5");
}
END_TEST

static Suite *error_suite(void)
{
        Suite *s = suite_create("error");
        TCase *tc = tcase_create("error");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, builtin_text);
        tcase_add_test(tc, builtin_problem_json);
        tcase_add_test(tc, details);
        tcase_add_test(tc, callback_answers);
        tcase_add_test(tc, callback_breaks_its_contract);
        tcase_add_test(tc, handler_errno_is_a_logged_500);
        tcase_add_test(tc, json_refusals_passed_on);
        tcase_add_test(tc, no_route);
        tcase_add_test(tc, routing_answers);
        tcase_add_test(tc, media_detail);
        tcase_add_test(tc, journal_fields);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(error_suite());
}
