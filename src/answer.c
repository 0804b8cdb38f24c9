/* SPDX-License-Identifier: MIT */
/* answer.c: the one path from a complete request to its answer: route it, run its handler on the
 * loop or hand it to the pool, and queue what it answered (H4, P1, S1, H6, X1). */
#include <stdlib.h>

#include "conn.h"
#include "crash.h"
#include "host.h"
#include "http.h"
#include "log.h"
#include "route.h"
#include "sse.h"

/*
 * Queue the answer `res` to `req` in the loop's wbuf, for a loop or a pool handler alike: the
 * stream's head for a HEAD on a stream route (H6), else the serialized response; a response
 * that cannot be serialized is a 500. `keep`: the connection may go on after it; a drain that
 * began meanwhile still closes it (X1).
 */
static void answer(struct m0_conn *c, const m0_req *req, const m0_res *res, bool is_head, bool keep,
                   bool on_pool)
{
        struct m0_loop *l = c->loop;
        struct m0_host *h = l->host;
        if (atomic_load_explicit(&h->stopping, memory_order_relaxed))
                keep = false;
        size_t mark = l->wbuf.len;
        int r = res->stream ? m0__sse_head(l, res, !keep, &l->wbuf)
                            : m0__res_serialize(l, res, is_head, !keep, &l->wbuf);
        if (r < 0) {
                l->wbuf.len = mark; /* no half-written head goes out before the 500 */
                (void)m0__res_error(l, 500, &l->wbuf);
                keep = false;
        }
        if (h->cfg.access_log)
                m0__log(M0_LOG_INFO, l->index, NULL, "%s %s %d %zu%s", req->method, req->path,
                        res->status, res->body.len, on_pool ? " (pool)" : "");
        if (!keep)
                c->closing = true;
}

/* Hand the request to the loop's pool (P1). False when there is no memory for the job: it is
 * then answered on the loop rather than not at all. */
static bool to_pool(struct m0_conn *c, const m0_req *req, m0_handler_fn fn, bool is_head, bool keep)
{
        struct m0_job *job = m0__job_new(c, req);
        if (!job)
                return false;
        job->fn = fn;
        job->loop = c->loop;
        job->is_head = is_head;
        job->keep_alive = keep;
        c->busy = true;
        m0__timer_unlink(c);
        m0__pool_submit(&c->loop->pool, job);
        return true;
}

void m0__conn_dispatch(struct m0_conn *c)
{
        struct m0_loop *l = c->loop;
        struct m0_host *h = l->host;
        struct m0_req *req = &l->req;
        size_t hl;
        char *head = (char *)l->cur_base + c->req_off;
        int st = c->indexed ? 0 : m0__http_head_parse(head, c->head_len, &h->cfg, req, &hl);
        c->indexed = false;
        bool is_head = c->parser.method == HTTP_HEAD;
        c->nreq++;
        l->requests++;
        bool keep = llhttp_should_keep_alive(&c->parser) && !c->closing &&
                    (h->cfg.max_keepalive_requests == 0 || c->nreq < h->cfg.max_keepalive_requests);
        if (st) {
                /* checked at headers-complete already; a second walk cannot disagree */
                m0__conn_refuse(c, st);
                return;
        }
        req->body = c->body.data ? c->body.data : "";
        req->body_len = c->body.len;
        req->loop = l->index;
        req->thread = -1;
        req->arena.len = 0;
        bool blocking = false;
        int status = 0;
        m0_handler_fn fn = m0__app_route(h->app, req, is_head, &blocking, &status);
        if (fn && blocking && l->pool.nthreads > 0 && to_pool(c, req, fn, is_head, keep))
                goto done;
        m0__res_reset(&l->res);
        m0__thread_request_set(h, req->method, req->path);
        m0__app_run(h->app, fn, status, req, &l->res, l->thread.state);
        m0__thread_request_set(h, NULL, NULL);
        if (l->res.stream && !is_head)
                m0__sse_begin(c, req, &l->res);
        else
                answer(c, req, &l->res, is_head, keep, false);
done:
        /* A large body's buffer is not kept for the next request. */
        if (c->body.cap > 64 * 1024)
                m0__buf_free(&c->body);
        c->body.len = 0;
}

void m0__conn_refuse(struct m0_conn *c, int status)
{
        (void)m0__res_error(c->loop, status, &c->loop->wbuf);
        c->closing = true;
}

void m0__conn_job_done(struct m0_job *job)
{
        struct m0_conn *c = job->conn;
        if (c->fd < 0) {
                /* closed while the pool worked: nobody to answer */
                m0__job_free(job);
                free(c);
                return;
        }
        c->busy = false;
        m0__slice_begin(c);
        answer(c, &job->req, &job->res, job->is_head, job->keep_alive, true);
        m0__job_free(job);
        m0__conn_resume(c);
}

void m0__job_discard(struct m0_job *job)
{
        if (job->conn->fd < 0)
                free(job->conn);
        m0__job_free(job);
}
