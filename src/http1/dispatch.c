/* SPDX-License-Identifier: MIT */
/* dispatch.c: the one path from a request to its answer: route it (T1-T3, Q5, Q6), then run its
 * handler on the loop or hand it to the pool, or make the host's own answer; and queue what it
 * answered (H4, H7, P1, S1, H6, X1). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "compress.h"
#include "conn.h"
#include "crash.h"
#include "error.h"
#include "config.h"
#include "cors.h"
#include "head-checks.h"
#include "log.h"
#include "route.h"
#include "sse.h"

/* ---- what a request is to get ---- */

static const char *field(const struct m0_rview *v, const char *name, size_t *ret_len)
{
        if (!v->req)
                return m0__head_field(v->head, v->head_len, name, ret_len);
        const char *s = m0_req_header(v->req, name);
        *ret_len = s ? strlen(s) : 0;
        return s;
}

/*
 * Whether the Content-Type `v` (n bytes; NULL when absent) is route r's media type: the same
 * type, parameters aside, case-insensitive, or, when its subtype is a structured syntax suffix,
 * one with that suffix (RFC 6839: "application/merge-patch+json" for "application/json").
 */
static bool ctype_ok(const struct m0_croute *r, const char *v, size_t n)
{
        if (!v)
                return false;
        size_t t = 0;
        while (t < n && v[t] != ';')
                t++;
        while (t && (v[t - 1] == ' ' || v[t - 1] == '\t'))
                t--;
        if (t == r->ctype_len && strncasecmp(v, r->ctype, t) == 0)
                return true;
        const char *slash = memchr(r->ctype, '/', r->ctype_len);
        size_t tl = (size_t)(slash - r->ctype) + 1; /* "application/" */
        size_t sl = r->ctype_len - tl;              /* "json" */
        return m0__media_suffix(slash + 1, sl) && t > tl + sl + 1 &&
               strncasecmp(v, r->ctype, tl) == 0 && v[t - sl - 1] == '+' &&
               strncasecmp(v + t - sl, slash + 1, sl) == 0;
}

/* The route that matched: its captures bound (or, before the head is indexed, checked), its
 * body's type checked when it has one. */
static void decide_route(const struct m0_rview *v, m0_req *bind, bool has_body,
                         struct m0_decision *d)
{
        const struct m0_croute *r = d->m.route;
        d->body_limit = r->max_body;
        int b = 0;
        if (r->nparams)
                b = m0__req_bind(bind, v->path, &d->m);
        else if (bind) {
                bind->route = r;
                bind->nparams = 0;
        }
        if (b < 0) {
                d->status = b == -EINVAL ? 400 : 503;
                return;
        }
        if (has_body && r->ctype) {
                size_t n = 0;
                const char *ct = field(v, "content-type", &n);
                if (!ctype_ok(r, ct, n)) {
                        d->status = 415;
                        return;
                }
        }
        d->fn = r->handler;
        d->blocking = r->blocking;
}

/* The requests routing does not find in the table: the asterisk-form, and CORS preflights. */
static bool decide_special(const struct m0_hctx *l, const struct m0_rview *v, struct m0_decision *d)
{
        size_t n;
        if (v->path_len == 1 && v->path[0] == '*') {
                /* The asterisk-form is OPTIONS's alone (RFC 9112 3.2.4): the app's methods. */
                d->m.route = NULL;
                d->m.path_known = false;
                d->m.nparams = 0;
                d->m.allow = l->router->methods;
                d->status = v->method == HTTP_OPTIONS ? 204 : 400;
                return true;
        }
        if (!field(v, "origin", &n) || !field(v, "access-control-request-method", &n))
                return false;
        /* Q5: a preflight is the host's to answer, for a path some route takes. */
        m0__router_match(l->router, -1, v->path, v->path_len, &d->m);
        if (!d->m.path_known)
                return false;
        d->status = 204;
        d->preflight = true;
        return true;
}

/* What is not a route without captures: captures, a body's type, 405, dispatch, 404. */
static void decide_rest(const struct m0_hctx *l, const struct m0_rview *v, m0_req *bind,
                        bool has_body, struct m0_decision *d)
{
        if (d->m.route) {
                decide_route(v, bind, has_body, d);
        } else if (d->m.path_known) {
                /* T2: a path of other methods is 405 whatever dispatch is; OPTIONS says them. */
                d->status = v->method == HTTP_OPTIONS ? 204 : 405;
        } else if (l->app->dispatch) {
                d->fn = l->app->dispatch;
        } else {
                d->status = 404;
        }
}

void m0__route_decide(const struct m0_hctx *l, const struct m0_rview *v, m0_req *bind,
                      bool has_body, struct m0_decision *d)
{
        d->status = 0;
        d->preflight = false;
        d->blocking = false;
        d->fn = NULL;
        d->body_limit = l->cfg->max_body_bytes;
        if (bind)
                bind->route = NULL;
        if (v->path[0] == '*' || (l->cors->on && v->method == HTTP_OPTIONS))
                if (decide_special(l, v, d))
                        return;
        m0__router_match(l->router, v->method, v->path, v->path_len, &d->m);
        const struct m0_croute *r = d->m.route;
        if (r && !r->nparams && !(has_body && r->ctype)) {
                /* the common case, kept short: an exact route taking the method */
                if (bind) {
                        bind->route = r;
                        bind->nparams = 0;
                }
                d->fn = r->handler;
                d->blocking = r->blocking;
                d->body_limit = r->max_body;
                return;
        }
        decide_rest(l, v, bind, has_body, d);
}

/* ---- routing's own answer, and what every answer leaves behind ---- */

/* What an answer leaves behind (O1, O2), when the metrics or the access log watch: its count,
 * its duration, its line or journal entry. */
static void note(struct m0_conn *c, enum m0_answer_kind kind, const m0_req *req, int status,
                 size_t bytes, size_t body_len, bool on_pool)
{
        m0__request_done(c, &(struct m0_access){.kind = kind,
                                                .method = req->method,
                                                .method_len = strlen(req->method),
                                                .path = req->path,
                                                .path_len = req->path_len,
                                                .status = status,
                                                /* HTTP/2 frames its head later, compressed */
                                                .bytes = c->proto->respond ? body_len : bytes,
                                                .body_len = body_len,
                                                .on_pool = on_pool,
                                                .proto = c->proto->name});
}

/* What the host's answer to `d` says of it beyond its status's own sentence, or NULL. */
static const char *route_detail(const struct m0_decision *d, char *buf, size_t len)
{
        const struct m0_croute *r = d->m.route;
        if (r && d->status == 415 && r->ctype) {
                m0__error_media_detail(r->ctype, r->ctype_len, buf, len);
                return buf;
        }
        if (r && d->status == 400)
                return "a capture of the path is not valid: a malformed escape, %00, %2F in one "
                       "segment, a \".\" or \"..\" segment, or a \"/\" at its start";
        return NULL;
}

/* An answer of the host's, handed to a protocol that frames answers itself (HTTP/2, HT2). */
static int emit(void *ctx, const m0_res *res, bool head_only)
{
        struct m0_conn *c = ctx;
        return c->proto->respond(c, res, head_only);
}

void m0__route_answer(struct m0_conn *c, const struct m0_rview *v, const struct m0_decision *d,
                      bool is_head, enum m0_conn_mode conn)
{
        struct m0_hctx *l = c->loop;
        struct m0_buf lines = {0};
        char allow[512], detail[256];
        size_t body_len = 0;
        int r = 0;
        m0__router_allow(l->router, d->m.allow, allow, sizeof(allow));
        if (d->status == 405 || d->status == 204)
                r = m0__buf_printf(&lines, "Allow: %s\r\n", allow);
        if (r == 0 && l->cors->on) {
                size_t on = 0, hn = 0;
                const char *origin = field(v, "origin", &on);
                if (d->preflight) {
                        const char *rh = field(v, "access-control-request-headers", &hn);
                        r = m0__cors_preflight(l->cors, origin, on, allow, rh, hn, &lines);
                } else
                        r = m0__cors_answer(l->cors, origin, on, &lines);
        }
        struct m0_host_answer a = {
                .status = r == 0 ? d->status : 503,
                .conn = r == 0 ? conn : M0__CONN_CLOSE,
                .head_only = is_head,
                .headers = lines.data,
                .headers_len = r == 0 ? lines.len : 0,
                .detail = r == 0 ? route_detail(d, detail, sizeof(detail)) : NULL,
                .req = v->req,
                .ret_body_len = &body_len,
                .emit = c->proto->respond ? emit : NULL,
                .emit_ctx = c,
        };
        size_t mark = l->wbuf.len;
        if ((m0__res_error(l, &a, &l->wbuf) < 0 || a.conn == M0__CONN_CLOSE) && !a.emit)
                c->closing = true;
        m0__buf_free(&lines);
        /* Routing's answer to a whole request is counted and logged as a handler's (O1, O2);
         * one made before the body, which closes the connection, as a refusal. */
        if (!v->req)
                m0__request_refused(c, a.status, l->wbuf.len - mark);
        else if (l->observe || l->cfg->access_log == M0_ACCESS_LINE)
                note(c, M0_ANSWER_HANDLER, v->req, a.status, l->wbuf.len - mark, body_len, false);
}

/* ---- the answer of a handler ---- */

/*
 * Queue the answer `res` to `req` in the loop's wbuf, for a loop or a pool handler alike: the
 * stream's head for a HEAD on a stream route (H6), else the serialized response; a response
 * that cannot be serialized is a 500. `conn`: what the answer says of the connection; a drain
 * that began meanwhile still closes it (X1).
 */
/* TL7: an answer over TLS tells the browser to come back over TLS alone, for tls_hsts_s seconds
 * (D145), and to take its Content-Type as it is said (D226): over TLS m0 faces browsers with
 * no proxy to add them. A header its handler set itself stays the only one. The app's lines are
 * looked through once for both, and the host's own lines go in as CORS's do, the seconds'
 * digits written without a format (D249). */
static int tls_fields(const struct m0_hctx *l, m0_res *res)
{
        bool hsts = false, nosniff = false;
        for (const char *p = res->head.data, *end = p + res->head.len, *eol; p && p < end;
             p = eol + 1) {
                if (!(eol = memchr(p, '\n', (size_t)(end - p))))
                        break;
                const char *colon = memchr(p, ':', (size_t)(eol - p));
                size_t n = colon ? (size_t)(colon - p) : 0;
                hsts |= n == 25 && strncasecmp(p, "strict-transport-security", 25) == 0;
                nosniff |= n == 22 && strncasecmp(p, "x-content-type-options", 22) == 0;
        }
        char line[96] = "Strict-Transport-Security: max-age=";
        size_t len = 0;
        uint32_t max_age = l->cfg->tls_hsts_s;
        if (max_age && !hsts) {
                char d[10];
                size_t k = 0;
                for (uint32_t s = max_age; s; s /= 10)
                        d[k++] = (char)('0' + s % 10);
                len = 35;
                while (k)
                        line[len++] = d[--k];
                line[len++] = '\r';
                line[len++] = '\n';
        }
        static const char xcto[] = "X-Content-Type-Options: nosniff\r\n";
        if (!nosniff) {
                memcpy(line + len, xcto, sizeof(xcto) - 1);
                len += sizeof(xcto) - 1;
        }
        return len ? m0__buf_append(&res->head, line, len) : 0;
}

/* RFC 8441's extended CONNECT (HTTP/2) answered 2xx by a handler that took no WebSocket: a 2xx
 * to a CONNECT opens its tunnel (RFC 9110 9.3.6), and none is there; the host answers 400 in
 * its place, as a client's handshake to a route that opens none (D233). */
static bool opens_no_tunnel(const m0_req *req, const m0_res *res)
{
        return req->protocol && res->status >= 200 && res->status < 300;
}

static void answer(struct m0_conn *c, m0_req *req, m0_res *res, bool is_head,
                   enum m0_conn_mode conn, bool on_pool)
{
        struct m0_hctx *l = c->loop;
        if (atomic_load_explicit(&l->serve->stopping, memory_order_relaxed))
                conn = M0__CONN_CLOSE;
        size_t mark = l->wbuf.len;
        int r = 0;
        if (l->cors->on) {
                const char *origin = m0_req_header(req, "origin");
                r = m0__cors_answer(l->cors, origin, origin ? strlen(origin) : 0, &res->head);
        }
        if (r == 0 && c->tls)
                r = tls_fields(l, res);
        if (r == 0 && !res->coded)
                m0__res_compress(l->cfg, req, res);
        int status = 500; /* the host's answer, when the handler's cannot go out */
        if (r == 0 && opens_no_tunnel(req, res)) {
                status = 400;
                r = -EPROTO;
        }
        if (r == 0 && c->proto->respond)
                r = c->proto->respond(c, res, is_head);
        else if (r == 0)
                r = res->stream ? m0__sse_head(l, res, conn == M0__CONN_CLOSE, &l->wbuf)
                                : m0__res_serialize(l, res, is_head, conn, &l->wbuf);
        size_t body_len = res->file.on ? (size_t)res->file.len : res->body.len;
        size_t file_bytes = 0; /* what follows the head in wbuf, for the access line */
        if (res->file.on) {
                /* its bytes follow the head (SF2); a HEAD's, or a failed answer's, are not sent;
                 * a protocol that frames its own answers took its own descriptor of the file */
                if (r == 0 && !is_head && !res->stream && !c->proto->respond) {
                        file_bytes = (size_t)res->file.len;
                        m0__conn_file_begin(c, res);
                } else {
                        m0__res_file_close(res);
                }
        }
        if (r < 0) {
                l->wbuf.len = mark; /* no half-written head goes out before the 500 */
                struct m0_buf lines = {0};
                if (l->cors->on) {
                        const char *origin = m0_req_header(req, "origin");
                        if (m0__cors_answer(l->cors, origin, origin ? strlen(origin) : 0, &lines) <
                            0)
                                lines.len = 0;
                }
                struct m0_host_answer a = {.status = status,
                                           .conn = M0__CONN_CLOSE,
                                           .head_only = is_head,
                                           .headers = lines.data,
                                           .headers_len = lines.len,
                                           .detail = status == 400 ? "this route opens no WebSocket"
                                                                   : NULL,
                                           .req = req,
                                           .ret_body_len = &body_len,
                                           .emit = c->proto->respond ? emit : NULL,
                                           .emit_ctx = c};
                (void)m0__res_error(l, &a, &l->wbuf);
                m0__buf_free(&lines);
                conn = M0__CONN_CLOSE;
        }
        if (l->observe || l->cfg->access_log == M0_ACCESS_LINE)
                note(c, M0_ANSWER_HANDLER, req, r < 0 ? status : res->status,
                     l->wbuf.len - mark + file_bytes, body_len, on_pool);
        if (conn == M0__CONN_CLOSE && !c->proto->respond)
                c->closing = true; /* an HTTP/2 stream's answer closes the stream alone */
}

/* A stream begins (S1): its head, `: open` and its replay, counted as its request's answer. */
static void begin_stream(struct m0_conn *c, const m0_req *req, const m0_res *res)
{
        struct m0_hctx *l = c->loop;
        size_t mark = l->wbuf.len;
        m0__sse_begin(c, req, res);
        if (l->observe)
                note(c, M0_ANSWER_STREAM, req, 200, l->wbuf.len - mark, 0, false);
}

/* The handler accepted an upgrade (WS1): its protocol writes the 101 and takes the connection,
 * which parses no more HTTP/1.1 (or answers 200 and takes the HTTP/2 stream, D230); counted and
 * logged as its request's answer. */
static void upgrade(struct m0_conn *c, m0_req *req, m0_res *res)
{
        struct m0_hctx *l = c->loop;
        size_t mark = l->wbuf.len;
        res->upgrade.status = 500;
        res->upgrade.begin(c, req, res);
        /* the protocol read the request too (a WebSocket's last_event_id indexes its query):
         * the loop's next request must not find that index, as after a handler (route.c) */
        m0__req_end(req);
        if (l->observe || l->cfg->access_log == M0_ACCESS_LINE)
                note(c, M0_ANSWER_HANDLER, req, res->upgrade.status, l->wbuf.len - mark, 0, false);
}

/* Hand the request to the loop's pool (P1). False when there is no memory for the job: it is
 * then answered on the loop rather than not at all. */
static bool to_pool(struct m0_conn *c, const m0_req *req, m0_handler_fn fn, bool is_head,
                    enum m0_conn_mode conn)
{
        struct m0_job *job = m0__job_new(c, req);
        if (!job)
                return false;
        job->fn = fn;
        job->loop = c->loop;
        job->is_head = is_head;
        job->conn_mode = conn;
        job->stream = c->h2_stream;
        c->jobs++;
        c->busy = true;
        if (!c->h2)
                m0__timer_unlink(c); /* HTTP/2's keeps its timer: its other streams go on */
        m0__pool_submit(&c->loop->pool, job);
        return true;
}

/* Run `fn` on the loop and queue its answer, or begin its stream. */
static void run_here(struct m0_conn *c, m0_req *req, m0_handler_fn fn, bool is_head,
                     enum m0_conn_mode conn)
{
        struct m0_hctx *l = c->loop;
        m0__res_reset(&l->res);
        l->res.req = req;
        l->res.upgrade.begin = NULL;
        m0__thread_request_set(l->serve->watchdog_usec != 0, req->method, req->path, req->path_len);
        m0__app_run(l->app, fn, req, &l->res, l->thread.state);
        m0__thread_request_set(l->serve->watchdog_usec != 0, NULL, NULL, 0);
        l->res.req = NULL;
        if (l->res.upgrade.begin && l->res.status < 400) {
                upgrade(c, req, &l->res);
                return;
        }
        if (l->res.upgrade.begin)
                l->res.upgrade.drop(&l->res); /* the handler failed after accepting (D224) */
        if (!l->res.stream || is_head || c->proto->respond) {
                answer(c, req, &l->res, is_head, conn, false);
                return;
        }
        if (l->cors->on) {
                const char *origin = m0_req_header(req, "origin");
                if (m0__cors_answer(l->cors, origin, origin ? strlen(origin) : 0, &l->res.head) <
                    0) {
                        m0__conn_refuse(c, 503);
                        return;
                }
        }
        begin_stream(c, req, &l->res);
}

void m0__conn_dispatch(struct m0_conn *c)
{
        struct m0_hctx *l = c->loop;
        struct m0_req *req = &l->req;
        size_t hl;
        char *head = (char *)l->cur_base + c->req_off;
        int st = c->indexed ? 0 : m0__http_head_parse(head, c->head_len, l->cfg, req, &hl);
        c->indexed = true; /* a refusal below reads what the walk cut */
        bool is_head = c->parser.method == HTTP_HEAD;
        c->nreq++;
        l->requests++;
        bool keep =
                llhttp_should_keep_alive(&c->parser) && !c->closing &&
                (l->cfg->max_keepalive_requests == 0 || c->nreq < l->cfg->max_keepalive_requests);
        if (st) {
                /* checked at headers-complete already; a second walk cannot disagree */
                m0__conn_refuse(c, st);
                return;
        }
        req->body = c->body.data ? c->body.data : "";
        req->body_len = c->body.len;
        req->loop = l->index;
        req->thread = -1;
        req->http_minor = (uint8_t)c->parser.http_minor;
        req->protocol = NULL;
        /* H7: an HTTP/1.0 connection is kept only when it asked, and then says so. */
        enum m0_conn_mode conn = !keep                       ? M0__CONN_CLOSE
                                 : c->parser.http_minor == 0 ? M0__CONN_KEEP_ALIVE
                                                             : M0__CONN_KEEP;
        m0__dispatch(c, req, c->parser.method, c->routed, is_head, conn);
        /* A large body's buffer is not kept for the next request. */
        if (c->body.cap > 64 * 1024)
                m0__buf_free(&c->body);
        c->body.len = 0;
        c->indexed = false;
}

void m0__dispatch(struct m0_conn *c, m0_req *req, int method, bool has_body, bool is_head,
                  enum m0_conn_mode conn)
{
        struct m0_hctx *l = c->loop;
        struct m0_rview v = {
                .method = method, .path = req->path, .path_len = req->path_len, .req = req};
        struct m0_decision d;
        m0__route_decide(l, &v, req, has_body, &d);
        if (d.status)
                m0__route_answer(c, &v, &d, is_head,
                                 atomic_load_explicit(&l->serve->stopping, memory_order_relaxed)
                                         ? M0__CONN_CLOSE
                                         : conn);
        else if (!d.blocking || l->pool.nthreads == 0 || !to_pool(c, req, d.fn, is_head, conn))
                run_here(c, req, d.fn, is_head, conn);
}

/*
 * The bytes of the request being refused that the parser took, from its first byte on: the
 * head so far, or the whole head once it is complete (the body's bytes may follow it; the
 * head's fields end at its empty line). Past an error in the head, only what came before the
 * error. 0 when none of it is known: between requests (bytes held unparsed are no request yet),
 * or its bytes were let go.
 */
static size_t refused_head(const struct m0_conn *c, const char **ret)
{
        const struct m0_hctx *l = c->loop;
        bool parsing = l->cur_conn == c;
        const char *base = parsing ? l->cur_base : c->rbuf;
        size_t end = parsing ? l->cur_len : c->rlen;
        if (c->phase == PH_IDLE || !c->req_started || !base)
                return 0;
        if (c->phase == PH_HEAD && llhttp_get_errno(&c->parser) != HPE_OK) {
                const char *at = llhttp_get_error_pos(&c->parser);
                end = at && at >= base ? (size_t)(at - base) : 0;
        }
        if (end <= c->req_off)
                return 0;
        *ret = base + c->req_off;
        return end - c->req_off;
}

/* The Origin field of a refused request's head `h` (n bytes), when its line is whole: a value
 * the head is cut inside, or whose line does not end in CRLF, is no origin. */
static const char *refused_origin(const char *h, size_t n, size_t *ret_len)
{
        size_t vn = 0;
        const char *v = m0__head_field(h, n, "origin", &vn);
        if (!v)
                return NULL;
        const char *e = v + vn, *end = h + n;
        while (e < end && (*e == ' ' || *e == '\t'))
                e++;
        if (end - e < 2 || e[0] != '\r' || e[1] != '\n')
                return NULL;
        *ret_len = vn;
        return v;
}

/*
 * Refuse the request being read (H2, H3, Q4, Q5) with what of it is known: a HEAD's refusal is
 * its head alone (RFC 9110 9.3.2, D100), and an app with CORS gets the lines of Q5 for the
 * Origin field read (D101). Once the head has been walked into the loop's request (c->indexed)
 * the method is llhttp's and the fields are the ones the walk cut before it stopped; before
 * that, both come from the bytes the parser took. A refusal before the method is whole, or
 * before the Origin line is (a head cut or refused ahead of it), cannot know them: the answer
 * is then a GET's, without the Origin's lines, which is all the bytes allow.
 */
void m0__conn_refuse(struct m0_conn *c, int status)
{
        struct m0_hctx *l = c->loop;
        struct m0_buf lines = {0};
        const char *head = NULL;
        size_t n = refused_head(c, &head);
        bool walked = n && c->indexed;
        struct m0_host_answer a = {
                .status = status,
                .conn = M0__CONN_CLOSE,
                .head_only = walked ? c->parser.method == HTTP_HEAD
                                    : n >= 5 && memcmp(head, "HEAD ", 5) == 0,
        };
        int r = 0;
        if (status == 405) {
                /* CONNECT (RFC 9110 9.3.6): the app's methods, as for OPTIONS * */
                char allow[512];
                m0__router_allow(l->router, l->router->methods, allow, sizeof(allow));
                r = m0__buf_printf(&lines, "Allow: %s\r\n", allow);
        }
        if (r == 0 && l->cors->on && n) {
                size_t on = 0;
                const char *origin = NULL;
                if (walked && l->req.nheaders) {
                        origin = m0_req_header(&l->req, "origin");
                        on = origin ? strlen(origin) : 0;
                } else {
                        origin = refused_origin(head, n, &on);
                }
                r = m0__cors_answer(l->cors, origin, on, &lines);
        }
        a.headers = lines.data;
        a.headers_len = r == 0 ? lines.len : 0;
        size_t mark = l->wbuf.len;
        (void)m0__res_error(l, &a, &l->wbuf);
        m0__buf_free(&lines);
        m0__request_refused(c, status, l->wbuf.len - mark);
        c->closing = true;
}

void m0__conn_job_done(struct m0_job *job)
{
        struct m0_conn *c = job->conn;
        bool last = --c->jobs == 0;
        if (c->tr.fd < 0) {
                /* closed while the pool worked: nobody to answer */
                m0__job_free(job);
                if (last)
                        free(c);
                return;
        }
        c->busy = !last;
        c->h2_stream = job->stream;
        m0__slice_begin(c);
        if (c->loop->observe & M0_OBSERVE_METRICS)
                m0__histogram_note(&c->loop->stats.job, job->run_us);
        answer(c, &job->req, &job->res, job->is_head, job->conn_mode, true);
        m0__job_free(job);
        m0__conn_resume(c);
}

void m0__job_discard(struct m0_job *job)
{
        if (--job->conn->jobs == 0 && job->conn->tr.fd < 0)
                free(job->conn);
        m0__job_free(job);
}
