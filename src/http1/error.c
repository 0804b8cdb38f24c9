/* SPDX-License-Identifier: MIT */
/* error.c: the answers the host makes by itself (SPEC Q4), through the app's `error` callback or
 * a built-in body, text/plain or RFC 9457 problem+json; and a handler's -errno, logged with its
 * route as a 500. */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "crash.h"
#include "error.h"
#include "config.h"
#include "json.h"
#include "log.h"
#include "hctx.h"
#include "request.h"
#include "response.h"
#include "route.h"

const char *m0__error_detail(int status)
{
        switch (status) {
        case 400: return "the request is not valid HTTP/1.1";
        case 404: return "no route matches this path";
        case 405: return "this path does not take this method";
        case 408: return "the request did not arrive in time";
        case 409: return "the request conflicts with what the server can do";
        case 411: return "the request must carry Content-Length";
        case 413: return "the request's body is larger than this server takes";
        case 414: return "the request's target is longer than this server takes";
        case 415: return "the body's media type is not one this route takes";
        case 417: return "only Expect: 100-continue is understood";
        case 431: return "the request's head is larger than this server takes";
        case 500: return "the server could not answer this request";
        case 503: return "the server cannot take this request now";
        default: return m0__status_reason(status);
        }
}

/* RFC 9457 (AP1): "about:blank" says the title is the status's own phrase and nothing more; the
 * host's own answers and an app's take this one path. */
int m0_res_problem(m0_res *res, int status, const char *title, const char *detail)
{
        if (status < 400 || status > 599)
                return -EINVAL;
        json_t *p = json_pack("{s:s,s:o,s:i}", "type", "about:blank", "title",
                              m0__json_string_lossy(title ? title : m0__status_reason(status)),
                              "status", status);
        if (p && detail && json_object_set_new(p, "detail", m0__json_string_lossy(detail)) < 0)
                json_decref(p), p = NULL;
        res->status = status;
        res->body.len = 0;
        int r = p ? m0__res_json_append(res, p) : -ENOMEM;
        json_decref(p);
        if (r == 0)
                r = m0_res_header(res, "Content-Type", "application/problem+json");
        return r;
}

/* The host's own body: "404 Not Found\n", with the caller's detail after a colon when it has
 * one; or problem+json, whose detail is always there. */
static int builtin(const m0_app *app, int status, const char *detail, m0_res *res)
{
        m0__res_reset(res);
        res->status = status;
        if (app->flags & M0_APP_ERRORS_JSON)
                return m0_res_problem(res, status, NULL,
                                      detail ? detail : m0__error_detail(status));
        int r = m0_res_header(res, "Content-Type", "text/plain; charset=utf-8");
        if (r == 0 && detail)
                r = m0_res_printf(res, "%d %s: %s\n", status, m0__status_reason(status), detail);
        else if (r == 0)
                r = m0_res_printf(res, "%d %s\n", status, m0__status_reason(status));
        return r;
}

/* Callbacks that broke their contract, counted for the process; any thread adds. */
static atomic_ullong callback_failures;

/* The app's answer; -EPROTO (logged, at the 1st, 2nd, 4th, … time) when it failed, changed the
 * status, or opened a stream. */
static int from_app(const m0_app *app, void *state, m0_req *req, int status, const char *detail,
                    m0_res *res)
{
        m0__res_reset(res);
        res->status = status;
        int r = app->error(req, res, status, detail ? detail : m0__error_detail(status), state);
        char why[160];
        if (r < 0) {
                char buf[128];
                snprintf(why, sizeof(why), "it returned %s",
                         strerror_r(r == INT_MIN ? INT_MAX : -r, buf, sizeof(buf)));
        } else if (res->status != status) {
                snprintf(why, sizeof(why), "it set the status %d, which is the host's",
                         res->status);
        } else if (res->stream || res->stream_refused) {
                snprintf(why, sizeof(why), "it opened a stream");
        } else {
                return 0;
        }
        unsigned long long k = atomic_fetch_add(&callback_failures, 1) + 1;
        if ((k & (k - 1)) == 0)
                m0__log(M0_LOG_WARNING, m0__thread_loop(), NULL,
                        "the app's error callback failed answering %d: %s; the built-in answer "
                        "went out (%llu so far)",
                        status, why, k);
        return -EPROTO;
}

bool m0__media_suffix(const char *sub, size_t n)
{
        /* RFC 6838 4.2.8's registry of structured syntax suffixes; a form's subtype is none */
        static const char *const suffixes[] = {
                "json",  "xml", "cbor", "json-seq", "cbor-seq", "ber",     "der", "fastinfoset",
                "wbxml", "zip", "gzip", "zstd",     "jwt",      "sqlite3", "yaml"};
        for (size_t i = 0; i < sizeof(suffixes) / sizeof(*suffixes); i++)
                if (strlen(suffixes[i]) == n && strncasecmp(sub, suffixes[i], n) == 0)
                        return true;
        return false;
}

void m0__error_media_detail(const char *type, size_t n, char *out, size_t len)
{
        const char *slash = memchr(type, '/', n);
        const char *sub = slash ? slash + 1 : type + n;
        size_t sn = (size_t)(type + n - sub);
        if (m0__media_suffix(sub, sn))
                snprintf(out, len, "the body must be %.*s or a +%.*s type", (int)n, type, (int)sn,
                         sub);
        else
                snprintf(out, len, "the body must be %.*s", (int)n, type);
}

/* The host's header lines, after the body's own; each line counts against the bounds. */
static int host_headers(m0_res *res, const char *headers, size_t n)
{
        int r = m0__buf_append(&res->head, headers, n);
        for (size_t i = 0; r == 0 && i < n; i++)
                res->nheaders += headers[i] == '\n';
        return r;
}

int m0__error_fill(const m0_app *app, void *state, m0_req *req, int status, const char *detail,
                   const char *headers, size_t n, m0_res *res)
{
        int r = app && app->error ? from_app(app, state, req, status, detail, res) : -ENOENT;
        if (r < 0) {
                static const m0_app none = {0};
                r = builtin(app ? app : &none, status, detail, res);
        }
        if (r == 0 && n)
                r = host_headers(res, headers, n);
        if (r < 0) {
                m0__res_reset(res);
                res->status = status;
        }
        return r;
}

/* The answer of the versions before Q4, made without allocating, with a's lines when they fit
 * (a last resort): for when nothing else can be written. */
static int plain_static(struct m0_hctx *l, const struct m0_host_answer *a, struct m0_buf *out)
{
        static const char ct[] = "Content-Type: text/plain; charset=utf-8\r\n";
        char head[1024], body[96];
        size_t hn = sizeof(ct) - 1;
        memcpy(head, ct, hn);
        if (a->headers_len <= sizeof(head) - hn) {
                if (a->headers_len)
                        memcpy(head + hn, a->headers, a->headers_len);
                hn += a->headers_len;
        }
        int bn = snprintf(body, sizeof(body), "%d %s\n", a->status, m0__status_reason(a->status));
        struct m0_res res = {.status = a->status};
        res.head.data = head;
        res.head.len = hn;
        res.body.data = body;
        res.body.len = (size_t)bn;
        if (a->ret_body_len)
                *a->ret_body_len = res.body.len;
        return m0__res_serialize(l, &res, a->head_only, a->conn, out);
}

int m0__res_error(struct m0_hctx *l, const struct m0_host_answer *a, struct m0_buf *out)
{
        struct m0_res res = {.status = a->status};
        if (a->ret_body_len)
                *a->ret_body_len = 0;
        if (a->status < 400) {
                /* no error: the lines alone, as they are (a preflight's may be long) */
                res.head.data = (char *)a->headers;
                res.head.len = a->headers_len;
                return a->emit ? a->emit(a->emit_ctx, &res, a->head_only)
                               : m0__res_serialize(l, &res, a->head_only, a->conn, out);
        }
        size_t mark = out->len;
        int r = m0__error_fill(l->app, l->thread.state, a->req, a->status, a->detail, a->headers,
                               a->headers_len, &res);
        if (r == 0)
                r = a->emit ? a->emit(a->emit_ctx, &res, a->head_only)
                            : m0__res_serialize(l, &res, a->head_only, a->conn, out);
        if (r == 0 && a->ret_body_len)
                *a->ret_body_len = res.body.len;
        m0__buf_free(&res.head);
        m0__buf_free(&res.body);
        if (a->req)
                m0__req_end(a->req); /* what the callback's helpers made */
        if (r < 0 && !a->emit) {
                out->len = mark;
                r = plain_static(l, a, out);
        }
        return r;
}

/* Q4's log line: the route's pattern, the method, the path and strerror, and under journald
 * the route and the errno as fields of their own (M0_ROUTE=, ERRNO=). */
static void log_failure(const m0_req *req, int r)
{
        int e = r == INT_MIN ? INT_MAX : -r;
        const char *route = m0__app_route_pattern(req);
        char buf[128], f_route[512], f_errno[32];
        const char *why = strerror_r(e, buf, sizeof(buf));
        snprintf(f_route, sizeof(f_route), "M0_ROUTE=%s", route);
        snprintf(f_errno, sizeof(f_errno), "ERRNO=%d", e);
        const char *const fields[] = {f_route, f_errno};
        m0__log_fields(M0_LOG_ERR, req->loop, fields, 2, "route %s: %s %s failed: %s; answered 500",
                       route, req->method, req->path, why);
}

void m0__error_handler_failed(const m0_app *app, void *state, m0_req *req, m0_res *res, int r)
{
        if (req->refusal.err != 0 && req->refusal.err == r) {
                const char *h = req->refusal.headers;
                (void)m0__error_fill(app, state, req, req->refusal.status, req->refusal.detail, h,
                                     h ? strlen(h) : 0, res);
                return;
        }
        log_failure(req, r);
        (void)m0__error_fill(app, state, req, 500, NULL, NULL, 0, res);
}
