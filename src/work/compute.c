/* SPDX-License-Identifier: MIT */
/* compute.c: the host-wide compute pool behind m0_parallel_for (P4): idle cores for heavy work. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute.h"
#include "crash.h"

/*
 * One call is one job: its items are handed out by an atomic counter to whichever threads take
 * part — the caller first, then every compute thread that finds the job at the head of the
 * queue. The caller returns when the done-counter reaches n, so no item outlives the call and
 * `ctx` may live on the caller's stack.
 */
struct m0_pjob {
        struct m0_link link; /* on the pool's queue while `queued` (under the pool's lock) */
        bool queued;
        size_t n;
        m0_parallel_fn body;
        void *ctx;
        atomic_size_t next_i;
        atomic_size_t done;
        atomic_int err;
        int active;           /* compute threads inside run_items(); under `lock` */
        pthread_mutex_t lock; /* with `cond`: the caller waits for `done == n` */
        pthread_cond_t cond;
};

static __thread bool in_body; /* a nested call runs inline */

static void run_items(struct m0_pjob *j)
{
        bool was = in_body;
        in_body = true;
        size_t i;
        while ((i = atomic_fetch_add(&j->next_i, 1)) < j->n) {
                int r = j->body(i, j->ctx);
                if (r < 0) {
                        int zero = 0;
                        (void)atomic_compare_exchange_strong(&j->err, &zero, r);
                }
                if (atomic_fetch_add(&j->done, 1) + 1 == j->n) {
                        pthread_mutex_lock(&j->lock);
                        pthread_cond_broadcast(&j->cond);
                        pthread_mutex_unlock(&j->lock);
                }
        }
        in_body = was;
}

static void *compute_main(void *arg)
{
        struct m0_compute *cp = arg;
        pthread_setname_np(pthread_self(), "m0-compute"); /* m0__thread_init()'s name for it */
        m0__thread_identify(NULL, (m0_thread_kind)M0__THREAD_COMPUTE, -1, -1);
        pthread_mutex_lock(&cp->lock);
        for (;;) {
                while (m0__list_empty(&cp->queue) && !cp->stop)
                        pthread_cond_wait(&cp->cond, &cp->lock);
                struct m0_pjob *j = M0__LIST_FIRST(&cp->queue, struct m0_pjob, link);
                if (!j)
                        break; /* stopped with nothing queued */
                if (atomic_load(&j->next_i) >= j->n) {
                        /* every item is taken: the job leaves the queue */
                        m0__list_unlink(&cp->queue, &j->link);
                        j->queued = false;
                        continue;
                }
                /* Counted before the queue lock is let go: the caller waits for it to drop. */
                pthread_mutex_lock(&j->lock);
                j->active++;
                pthread_mutex_unlock(&j->lock);
                pthread_mutex_unlock(&cp->lock);
                run_items(j);
                pthread_mutex_lock(&j->lock);
                j->active--;
                pthread_cond_broadcast(&j->cond);
                pthread_mutex_unlock(&j->lock);
                pthread_mutex_lock(&cp->lock);
        }
        pthread_mutex_unlock(&cp->lock);
        m0__thread_forget();
        return NULL;
}

/* Written by the coordinator (start, stop), read by any thread calling m0_parallel_for. */
static _Atomic(struct m0_compute *) compute_global;

int m0__compute_start(struct m0_compute *cp, unsigned nthreads)
{
        pthread_mutex_init(&cp->lock, NULL);
        pthread_cond_init(&cp->cond, NULL);
        cp->nthreads = (int)nthreads;
        if (cp->nthreads == 0)
                return 0;
        cp->threads = calloc((size_t)cp->nthreads, sizeof(*cp->threads));
        if (!cp->threads)
                return -ENOMEM;
        for (int i = 0; i < cp->nthreads; i++) {
                m0__thread_init(&cp->threads[i], M0__THREAD_COMPUTE, -1, i, compute_main, cp);
                int r = m0__thread_start(&cp->threads[i]);
                if (r < 0)
                        return r;
        }
        atomic_store(&compute_global, cp);
        return 0;
}

void m0__compute_stop(struct m0_compute *cp)
{
        atomic_store(&compute_global, NULL); /* later calls run inline */
        pthread_mutex_lock(&cp->lock);
        cp->stop = true;
        pthread_cond_broadcast(&cp->cond);
        pthread_mutex_unlock(&cp->lock);
}

int m0__compute_join(struct m0_compute *cp, const struct timespec *deadline)
{
        int stragglers = 0;
        for (int i = 0; cp->threads && i < cp->nthreads; i++)
                if (m0__thread_join_by(&cp->threads[i], deadline) < 0)
                        stragglers++;
        return stragglers;
}

void m0__compute_free(struct m0_compute *cp)
{
        free(cp->threads);
        cp->threads = NULL;
}

static int run_inline(size_t n, m0_parallel_fn body, void *ctx)
{
        int err = 0;
        bool was = in_body;
        in_body = true;
        for (size_t i = 0; i < n; i++) {
                int r = body(i, ctx);
                if (r < 0 && !err)
                        err = r;
        }
        in_body = was;
        return err;
}

int m0_parallel_for(size_t n, m0_parallel_fn body, void *ctx)
{
        if (!body)
                return -EINVAL;
        struct m0_compute *cp = atomic_load(&compute_global);
        if (n <= 1 || !cp || in_body)
                return run_inline(n, body, ctx);
        struct m0_pjob j = {.n = n, .body = body, .ctx = ctx};
        atomic_init(&j.next_i, 0);
        atomic_init(&j.done, 0);
        atomic_init(&j.err, 0);
        pthread_mutex_init(&j.lock, NULL);
        pthread_cond_init(&j.cond, NULL);

        pthread_mutex_lock(&cp->lock);
        if (cp->stop) {
                pthread_mutex_unlock(&cp->lock);
                return run_inline(n, body, ctx);
        }
        m0__list_push(&cp->queue, &j.link);
        j.queued = true;
        pthread_cond_broadcast(&cp->cond);
        pthread_mutex_unlock(&cp->lock);

        run_items(&j); /* the caller works too */

        /* Off the queue first, so that no thread takes it from here on. */
        pthread_mutex_lock(&cp->lock);
        if (j.queued)
                m0__list_unlink(&cp->queue, &j.link);
        pthread_mutex_unlock(&cp->lock);

        /* Then wait for the items other threads took, and for those threads to let go of it. */
        pthread_mutex_lock(&j.lock);
        while (atomic_load(&j.done) < n || j.active > 0)
                pthread_cond_wait(&j.cond, &j.lock);
        pthread_mutex_unlock(&j.lock);
        pthread_cond_destroy(&j.cond);
        pthread_mutex_destroy(&j.lock);
        return atomic_load(&j.err);
}
