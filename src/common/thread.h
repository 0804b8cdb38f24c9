/* SPDX-License-Identifier: MIT */
/* thread.h: thread.c, one record for every thread the host starts (its loops, their pool
 * threads, the producer, the compute threads), so that starting, naming and joining them is one
 * piece of code for all. */
#ifndef M0_THREAD_H
#define M0_THREAD_H

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

/*
 * One thread of the host's. Filled by its owner before m0__thread_start(); `started` is true
 * from a successful start until a join. Written by the coordinator only; the thread itself
 * reads its record (its name, its kind) and writes `state`, its handler state.
 */
struct m0_thread {
        pthread_t id;
        bool started;
        int kind;      /* an m0_thread_kind, or M0__THREAD_COMPUTE */
        int loop;      /* the loop it serves; -1 for the producer and compute threads */
        int index;     /* its pool thread index within the loop, or compute index; -1 else */
        char name[16]; /* for the kernel (pthread_setname_np): "m0-loop-1", "m0-pool-0.1" */
        char who[48];  /* for a person: "loop 1", "loop 0 pool thread 1", "the producer" */
        void *(*main)(void *arg);
        void *arg;
        void *state; /* the app's handler state for this thread, NULL until `make` ran */
};

/* Describe a thread before it starts: its kind, loop and index; `name` and `who` follow. */
void m0__thread_init(struct m0_thread *t, int kind, int loop, int index, void *(*main)(void *),
                     void *arg);
/* Start `t`. 0, or -errno (nothing started). */
int m0__thread_start(struct m0_thread *t);
/*
 * Join `t` by `end` (CLOCK_REALTIME); while it runs, tell systemd every second that the drain
 * goes on (EXTEND_TIMEOUT_USEC, X2). 0 when joined (then `started` is false), -ETIMEDOUT past
 * `end`. A thread never started counts as joined.
 */
int m0__thread_join_by(struct m0_thread *t, const struct timespec *end);
/* `ms` from now on CLOCK_REALTIME, the clock pthread_timedjoin_np() reads. */
struct timespec m0__deadline_after(uint64_t ms);

#endif /* M0_THREAD_H */
