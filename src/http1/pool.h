/* SPDX-License-Identifier: MIT */
/* pool.h: pool.c, a loop's handler pool: threads with handlers of their own for the blocking
 * routes (P1, P2). */
#ifndef M0_POOL_H
#define M0_POOL_H

#include <pthread.h>
#include <stdbool.h>

#include "list.h"
#include "loop.h"
#include "m0.h"
#include "metrics.h"
#include "request.h"
#include "response.h"
#include "thread.h"

struct m0_conn;
struct m0_hctx;
struct m0_treplay;

/* A blocking request on its way to a pool thread and back (P1). Owned by the pool while queued
 * and running, by the loop once posted back. */
struct m0_job {
        struct m0_link link; /* on the pool's queue */
        struct m0_conn *conn;
        struct m0_hctx *loop;
        m0_handler_fn fn;
        bool is_head;
        enum m0_conn_mode conn_mode; /* what its answer says of the connection (H7) */
        int32_t stream;              /* the HTTP/2 stream it answers (HT2); 0 on HTTP/1.1 */
        struct m0_req req;           /* points into `mem` */
        struct m0_res res;           /* built on the pool thread */
        char *mem;
        uint64_t run_us;             /* how long the handler ran on its pool thread (O1) */
        struct m0_treplay *backfill; /* a stream's backfill (AP2) instead of a request, or NULL */
};

/* One pool thread of one loop. */
struct m0_pool_thread {
        struct m0_hctx *loop;
        int index;
        struct m0_thread thread;
};

/* A loop's pool: its threads share one queue, under `lock`. */
struct m0_pool {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        struct m0_list queue; /* of m0_job, oldest first */
        /* Jobs queued and not yet taken by a pool thread, for the metrics: written under
         * `lock` (so by one thread at a time), read without it. */
        m0_counter depth;
        bool stop;
        int nthreads;
        struct m0_pool_thread *threads;
        /* A job's way back: the message its loop handles it with, or drops it with when the
         * loop ended first (its HTTP context's). */
        m0_msg_fn *back;
        m0_msg_fn *drop;
};

int m0__pool_init(struct m0_pool *p, struct m0_hctx *l, int nthreads, m0_msg_fn *back,
                  m0_msg_fn *drop);
/* Free what the pool holds, queued jobs included, once its threads are gone. */
void m0__pool_destroy(struct m0_pool *p);
/* Queue `job` for the loop's pool (the loop's thread). */
void m0__pool_submit(struct m0_pool *p, struct m0_job *job);
/* Tell the pool's threads to finish the queue and end. Any thread. */
void m0__pool_stop(struct m0_pool *p);
/* A pool thread's body; `arg` is its struct m0_pool_thread. */
void *m0__pool_main(void *arg);
/* Copy a request the loop indexed into a job of its own; NULL on ENOMEM. */
struct m0_job *m0__job_new(struct m0_conn *c, const m0_req *req);
/* Free a job; accepts NULL. */
void m0__job_free(struct m0_job *job);

#endif /* M0_POOL_H */
