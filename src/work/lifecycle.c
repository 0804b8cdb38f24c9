/* SPDX-License-Identifier: MIT */
/* lifecycle.c: one lifecycle for every thread that serves with a handler state of the app's, and the
 * make-barrier they all report to (L1, L3, R4). */
#include <stdio.h>
#include <string.h>

#include "crash.h"
#include "lifecycle.h"
#include "thread.h"

void m0__barrier_init(struct m0_barrier *b)
{
        memset(b, 0, sizeof(*b));
        pthread_mutex_init(&b->lock, NULL);
        pthread_cond_init(&b->cond, NULL);
        b->gate = M0_GATE_WAIT;
}

void m0__barrier_destroy(struct m0_barrier *b)
{
        pthread_cond_destroy(&b->cond);
        pthread_mutex_destroy(&b->lock);
}

bool m0__barrier_wait(struct m0_barrier *b, const char *who, int make_r, const char *why)
{
        pthread_mutex_lock(&b->lock);
        if (make_r < 0 && !b->failed) {
                b->failed = true;
                snprintf(b->failed_who, sizeof(b->failed_who), "%s", who);
                snprintf(b->failed_msg, sizeof(b->failed_msg), "%s", why);
        }
        b->reported++;
        pthread_cond_broadcast(&b->cond);
        while (b->gate == M0_GATE_WAIT)
                pthread_cond_wait(&b->cond, &b->lock);
        bool go = b->gate == M0_GATE_GO;
        pthread_mutex_unlock(&b->lock);
        return go;
}

bool m0__barrier_await(struct m0_barrier *b, int n)
{
        pthread_mutex_lock(&b->lock);
        while (b->reported < n)
                pthread_cond_wait(&b->cond, &b->lock);
        bool ok = !b->failed;
        pthread_mutex_unlock(&b->lock);
        return ok;
}

void m0__barrier_open(struct m0_barrier *b, bool go)
{
        pthread_mutex_lock(&b->lock);
        b->gate = go ? M0_GATE_GO : M0_GATE_ABORT;
        pthread_cond_broadcast(&b->cond);
        pthread_mutex_unlock(&b->lock);
}

bool m0__handler_begin(const struct m0_lifecycle *lc, struct m0_hctx *loop, struct m0_thread *t,
                       bool build)
{
        pthread_setname_np(pthread_self(), t->name);
        m0__thread_identify(loop, (m0_thread_kind)t->kind, t->loop, t->index);
        char why[200] = "";
        int r = 0;
        if (build && lc->app->make) {
                m0_handler_info info = {.kind = (m0_thread_kind)t->kind,
                                        .loop = t->loop,
                                        .thread = t->index,
                                        .loops = lc->loops,
                                        .loop_handler_max_ms = lc->loop_handler_max_ms};
                r = lc->app->make(&info, &t->state, why, sizeof(why));
                if (r < 0 && !why[0])
                        snprintf(why, sizeof(why), "%s", strerror(-r));
        }
        return m0__barrier_wait(lc->barrier, t->who, r, why);
}

void m0__handler_end(const struct m0_lifecycle *lc, struct m0_thread *t)
{
        if (lc->app->free && t->state)
                lc->app->free(t->state);
        t->state = NULL;
        m0__thread_forget();
}
