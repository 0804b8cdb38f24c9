/* SPDX-License-Identifier: MIT */
/* compute.h: compute.c, the host-wide compute pool behind m0_parallel_for (P4). */
#ifndef M0_COMPUTE_H
#define M0_COMPUTE_H

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "list.h"
#include "thread.h"

struct m0_compute {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        struct m0_list queue; /* calls whose items are not all taken yet, oldest first */
        bool stop;
        int nthreads;
        struct m0_thread *threads;
};

/* Start the compute pool of `nthreads` (--compute-threads; after the barrier); 0 or -errno. */
int m0__compute_start(struct m0_compute *cp, unsigned nthreads);
/* No new jobs reach the pool (they run inline); its threads end once the queue is empty. */
void m0__compute_stop(struct m0_compute *cp);
/* Join the compute threads by `deadline`; returns how many are still running. */
int m0__compute_join(struct m0_compute *cp, const struct timespec *deadline);
/* Free what the pool holds once its threads are joined. */
void m0__compute_free(struct m0_compute *cp);

#endif /* M0_COMPUTE_H */
