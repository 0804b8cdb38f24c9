/* SPDX-License-Identifier: MIT */
/* pool.c: a loop's handler pool: threads with handlers of their own for the blocking routes (P1). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress.h"
#include "crash.h"
#include "error.h"
#include "lifecycle.h"
#include "config.h"
#include "hctx.h"
#include "pool.h"
#include "log.h"
#include "route.h"
#include "attach.h"
#include "sse.h"

int m0__pool_init(struct m0_pool *p, struct m0_hctx *l, int nthreads, m0_msg_fn *back,
                  m0_msg_fn *drop)
{
        memset(p, 0, sizeof(*p));
        p->back = back;
        p->drop = drop;
        pthread_mutex_init(&p->lock, NULL);
        pthread_cond_init(&p->cond, NULL);
        p->nthreads = nthreads;
        if (nthreads == 0)
                return 0;
        p->threads = calloc((size_t)nthreads, sizeof(*p->threads));
        if (!p->threads)
                return -ENOMEM;
        for (int i = 0; i < nthreads; i++) {
                p->threads[i].loop = l;
                p->threads[i].index = i;
                m0__thread_init(&p->threads[i].thread, M0_THREAD_POOL, l->index, i, m0__pool_main,
                                &p->threads[i]);
        }
        return 0;
}

void m0__pool_destroy(struct m0_pool *p)
{
        struct m0_link *n;
        while ((n = m0__list_pop(&p->queue)))
                m0__job_free(M0__CONTAINER_OF(n, struct m0_job, link));
        free(p->threads);
        p->threads = NULL;
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->lock);
}

void m0__pool_submit(struct m0_pool *p, struct m0_job *job)
{
        pthread_mutex_lock(&p->lock);
        m0__list_push(&p->queue, &job->link);
        m0__count(&p->depth, 1);
        pthread_cond_signal(&p->cond);
        pthread_mutex_unlock(&p->lock);
}

void m0__pool_stop(struct m0_pool *p)
{
        pthread_mutex_lock(&p->lock);
        p->stop = true;
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
}

static size_t str_size(const char *s)
{
        return strlen(s) + 1;
}

static char *put(char **at, const char *s)
{
        size_t n = strlen(s) + 1;
        char *d = memcpy(*at, s, n);
        *at += n;
        return d;
}

struct m0_job *m0__job_new(struct m0_conn *c, const m0_req *req)
{
        size_t size = sizeof(struct m0_header) * req->nheaders + str_size(req->method) +
                      str_size(req->path) + str_size(req->query) + req->body_len + 1 +
                      req->params.len + (req->protocol ? str_size(req->protocol) : 0);
        for (size_t i = 0; i < req->nheaders; i++)
                size += str_size(req->headers[i].name) + str_size(req->headers[i].value);
        struct m0_job *job = calloc(1, sizeof(*job));
        char *mem = malloc(size);
        if (!job || !mem) {
                free(job);
                free(mem);
                return NULL;
        }
        job->mem = mem;
        job->conn = c;
        struct m0_header *hd = (struct m0_header *)(void *)mem;
        char *at = mem + sizeof(struct m0_header) * req->nheaders;
        for (size_t i = 0; i < req->nheaders; i++) {
                hd[i].name = put(&at, req->headers[i].name);
                hd[i].value = put(&at, req->headers[i].value);
        }
        job->req.headers = hd;
        job->req.nheaders = req->nheaders;
        job->req.method = put(&at, req->method);
        job->req.path = put(&at, req->path);
        job->req.path_len = req->path_len;
        job->req.query = put(&at, req->query);
        job->req.protocol = req->protocol ? put(&at, req->protocol) : NULL;
        /* The route's captures, decoded on the loop: offsets into a copy of their own. */
        job->req.route = req->route;
        job->req.nparams = req->nparams;
        memcpy(job->req.param, req->param, sizeof(req->param));
        if (req->params.len)
                memcpy(at, req->params.data, req->params.len);
        job->req.params.data = at;
        job->req.params.len = req->params.len;
        at += req->params.len;
        if (req->body_len)
                memcpy(at, req->body, req->body_len);
        at[req->body_len] = '\0';
        job->req.body = at;
        job->req.body_len = req->body_len;
        job->req.loop = req->loop;
        job->req.json_max_depth = req->json_max_depth;
        job->res.status = 200;
        job->res.on_pool = true;
        return job;
}

void m0__job_free(struct m0_job *job)
{
        if (!job)
                return;
        m0__buf_free(&job->req.arena);
        m0__buf_free(&job->res.head);
        m0__buf_free(&job->res.body);
        m0__buf_free(&job->res.chans);
        m0__res_file_close(&job->res);
        m0__treplay_free(job->backfill); /* one never run: its answer never comes */
        free(job->mem);
        free(job);
}

/* Take the next job, waiting for one; NULL once the pool is stopped and its queue empty. */
static struct m0_job *next_job(struct m0_pool *p)
{
        pthread_mutex_lock(&p->lock);
        while (m0__list_empty(&p->queue) && !p->stop)
                pthread_cond_wait(&p->cond, &p->lock);
        struct m0_link *n = m0__list_pop(&p->queue);
        if (n)
                m0__uncount(&p->depth, 1);
        pthread_mutex_unlock(&p->lock);
        return M0__LIST_ENTRY(n, struct m0_job, link);
}

/* Run one job with this thread's handler state and post it back to its loop (P1, P2). */
static void run_job(struct m0_pool_thread *t, struct m0_job *job)
{
        struct m0_hctx *l = t->loop;
        const struct m0_serve *s = l->serve;
        if (job->backfill) {
                m0__sse_backfill(l->app, job->backfill, t->thread.state); /* posts it back */
                free(job);
                return;
        }
        job->req.thread = t->index;
        m0__thread_request_set(s->watchdog_usec != 0, job->req.method, job->req.path,
                               job->req.path_len);
        uint64_t t0 = m0__now_ns();
        m0__app_run(l->app, job->fn, &job->req, &job->res, t->thread.state);
        job->run_us = (m0__now_ns() - t0) / 1000;
        m0__res_compress(l->cfg, &job->req, &job->res); /* on this thread, not the loop (SF4) */
        m0__thread_request_set(s->watchdog_usec != 0, NULL, NULL, 0);
        if (job->res.stream_refused || job->res.stream) {
                /* P2: a stream lives on a loop; a pool thread cannot hold one. */
                m0__log(M0_LOG_WARNING, l->index, NULL,
                        "%s %s opened a stream on pool thread %d: answered 409 (streams are "
                        "served from loop routes only)",
                        job->req.method, job->req.path, t->index);
                (void)m0__error_fill(l->app, t->thread.state, &job->req, 409,
                                     "streams are served on the loop", NULL, 0, &job->res);
                m0__req_end(&job->req); /* what the callback's helpers made */
        }
        struct m0_msg *m = calloc(1, sizeof(*m));
        if (!m) {
                /* the connection waits for an answer that cannot be delivered: the drain's
                 * bound cuts it */
                m0__job_free(job);
                return;
        }
        *m = (struct m0_msg){.handle = l->pool.back, .drop = l->pool.drop, .fd = -1, .arg = job};
        (void)m0__loop_post(&l->loop, m);
}

/* The pool thread: build the handler, wait at the barrier, then run jobs until stopped. */
void *m0__pool_main(void *arg)
{
        struct m0_pool_thread *t = arg;
        const struct m0_lifecycle *lc = t->loop->serve->life;
        if (m0__handler_begin(lc, t->loop, &t->thread, true)) {
                struct m0_job *job;
                while ((job = next_job(&t->loop->pool)))
                        run_job(t, job);
        }
        m0__handler_end(lc, &t->thread);
        return NULL;
}
