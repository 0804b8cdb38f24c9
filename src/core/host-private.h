/* SPDX-License-Identifier: MIT */
/* host-private.h: the host's state (L1), laid out for src/core/ alone (SPEC LY4, D240): no file
 * outside it includes this header (tests/integration/test_layers.py checks), so no other folder
 * reads a member of struct m0_host; each is handed what it reads when it is set up
 * (m0__host_link). The unit tests, which build hosts, include it too. */
#ifndef M0_HOST_PRIVATE_H
#define M0_HOST_PRIVATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "activation.h"
#include "attach.h"
#include "bus.h"
#include "compute.h"
#include "config.h"
#include "cors.h"
#include "hctx.h"
#include "host.h"
#include "lease.h"
#include "lifecycle.h"
#include "m0.h"
#include "metrics.h"
#include "producer.h"
#include "route.h"
#include "thread.h"
#include "tls.h"

/* One per process, made by m0_main(). Written by the coordinator before any thread exists, but
 * for what is atomic or under a lock; read-only for the threads after. */
struct m0_host {
        const m0_app *app;
        struct m0_config cfg;
        struct m0_router router; /* the app's routes, compiled before the checks (T1) */
        struct m0_cors_c cors;   /* the app's CORS, checked before the checks (Q5) */
        struct m0_sockets sockets;
        /* What the loops share and read of the host (D240): the loops themselves, their
         * counters of the process, the stop's flag, the watchdog's interval, the app's tick,
         * done_fd, HTTP/2, and pointers to the app, cfg, router, cors, sockets, bus, tls. */
        struct m0_serve serve;
        struct m0_lifecycle life; /* what a thread's make and free read (L1, L3) */

        struct m0_barrier barrier; /* the make-barrier (L1, L3) */
        /* Every thread the coordinator started, in the order it started them: each loop and
         * its pool threads, then the producer, then the compute threads. */
        struct m0_thread **threads;
        int nthreads, threads_cap;

        struct m0_bus bus;
        struct m0_lease lease;   /* the ids' lease in the state directory (N3) */
        struct m0_shared shared; /* with M0_BUS=postgresql://…: STATUS= and the stop (G3) */
        struct m0_producer producer;
        struct m0_compute compute;
        uint64_t stop_by_ms;   /* the drain's bound, on the monotonic clock, once it began */
        char sockets_err[256]; /* why a passed socket cannot be served; "" when all are fine */
        struct m0_metrics_server metrics; /* GET /metrics on sockets.metrics (O1) */
        /* TL1–TL5: the certificates and the TLS context, loaded by the `tls` check before any
         * loop exists; NULL when no certificate is configured. */
        struct m0_tls *tls;
};

/*
 * Hand out what the other folders read of `h` (D240): h->serve's pointers to the host's own parts
 * (the app, cfg, router, cors, sockets, bus, tls, life), h->life (the app, the barrier, the loops'
 * number, loop_handler_max_ms: a quarter of the watchdog's interval, 0 without one), and the
 * metrics thread's `serve` and `shared`. What h->serve holds by value (the loops, done_fd, the
 * watchdog's interval, the tick, h2, the atomics) is written there directly, before this. The
 * coordinator calls it once the checks, the loops' number and the watchdog are known, just before
 * it prepares the loops; a unit test once its host is set up, before it prepares a loop.
 */
void m0__host_link(struct m0_host *h);

#endif /* M0_HOST_PRIVATE_H */
