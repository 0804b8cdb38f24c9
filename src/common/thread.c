/* SPDX-License-Identifier: MIT */
/* thread.c: one record for every thread the host starts, and its start and bounded join. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "crash.h"
#include "notify.h"
#include "thread.h"

void m0__thread_init(struct m0_thread *t, int kind, int loop, int index, void *(*main)(void *),
                     void *arg)
{
        memset(t, 0, sizeof(*t));
        t->kind = kind;
        t->loop = loop;
        t->index = index;
        t->main = main;
        t->arg = arg;
        switch (kind) {
        case M0_THREAD_LOOP:
                snprintf(t->name, sizeof(t->name), "m0-loop-%d", loop);
                snprintf(t->who, sizeof(t->who), "loop %d", loop);
                break;
        case M0_THREAD_POOL:
                snprintf(t->name, sizeof(t->name), "m0-pool-%d.%d", loop, index);
                snprintf(t->who, sizeof(t->who), "loop %d pool thread %d", loop, index);
                break;
        case M0_THREAD_PRODUCER:
                snprintf(t->name, sizeof(t->name), "m0-producer");
                snprintf(t->who, sizeof(t->who), "the producer");
                break;
        case M0__THREAD_METRICS:
                snprintf(t->name, sizeof(t->name), "m0-metrics");
                snprintf(t->who, sizeof(t->who), "the metrics thread");
                break;
        default:
                snprintf(t->name, sizeof(t->name), "m0-compute");
                snprintf(t->who, sizeof(t->who), "compute thread %d", index);
                break;
        }
}

int m0__thread_start(struct m0_thread *t)
{
        int r = pthread_create(&t->id, NULL, t->main, t->arg);
        if (r != 0)
                return -r;
        t->started = true;
        return 0;
}

struct timespec m0__deadline_after(uint64_t ms)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += (time_t)(ms / 1000);
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        return ts;
}

static bool before(const struct timespec *a, const struct timespec *b)
{
        return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

int m0__thread_join_by(struct m0_thread *t, const struct timespec *end)
{
        if (!t->started)
                return 0;
        for (;;) {
                struct timespec step = m0__deadline_after(1000);
                bool last = !before(&step, end);
                int r = pthread_timedjoin_np(t->id, NULL, last ? end : &step);
                if (r == 0) {
                        t->started = false;
                        return 0;
                }
                if (r != ETIMEDOUT)
                        return -r;
                if (last)
                        return -ETIMEDOUT;
                struct timespec now;
                clock_gettime(CLOCK_REALTIME, &now);
                long long left_ms = (long long)(end->tv_sec - now.tv_sec) * 1000 +
                                    (end->tv_nsec - now.tv_nsec) / 1000000;
                char ext[64];
                snprintf(ext, sizeof(ext), "EXTEND_TIMEOUT_USEC=%llu",
                         (unsigned long long)(left_ms > 0 ? left_ms : 0) * 1000ull + 2000000ull);
                (void)m0__notify(ext);
        }
}
