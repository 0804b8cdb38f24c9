/* SPDX-License-Identifier: MIT */
/* producer.h: producer.c, the producer thread: the app's step at a fixed rate, and the watchdog
 * (S2, W1). */
#ifndef M0_PRODUCER_H
#define M0_PRODUCER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "thread.h"

struct m0_host;

struct m0_producer {
        struct m0_thread thread;
        atomic_bool stop;    /* set by the coordinator at the drain */
        atomic_bool in_step; /* the app's step is running: named if it outlives the drain */
        uint64_t *beats;     /* each loop's heartbeat at the watchdog's last look */
        bool *stuck;
};

/* Whether the host needs a producer: the app has a step, or the watchdog is on. */
bool m0__producer_needed(const struct m0_host *h);
/* The producer thread's body; `arg` is the host. */
void *m0__producer_main(void *arg);

#endif /* M0_PRODUCER_H */
