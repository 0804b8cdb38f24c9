/* SPDX-License-Identifier: MIT */
/* host.h: host.c, the serve sequence (L1): the host's state, read by every module. */
#ifndef M0_HOST_H
#define M0_HOST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "activation.h"
#include "bus.h"
#include "compute.h"
#include "config.h"
#include "cors.h"
#include "lifecycle.h"
#include "lease.h"
#include "hctx.h"
#include "m0.h"
#include "metrics.h"
#include "producer.h"
#include "route.h"
#include "attach.h"
#include "thread.h"
#include "tls.h"
#include "util.h"

/* One per process, made by m0_main(). Written by the coordinator before any thread exists, but
 * for what is atomic or under a lock; read-only for the threads after. */
struct m0_host {
        const m0_app *app;
        struct m0_config cfg;
        struct m0_router router; /* the app's routes, compiled before the checks (T1) */
        struct m0_cors_c cors;   /* the app's CORS, checked before the checks (Q5) */
        struct m0_sockets sockets;
        struct m0_hctx *loops; /* one per loop: its HTTP context, which holds the loop */
        /* The protocol a connection opening with HTTP/2's preface switches to (HT1), set before
         * the loops start; NULL: none (the unit tests' hosts). */
        const struct m0_proto_ops *h2;
        int nloops;
        atomic_uint conns;  /* open connections in the process (max_connections) */
        atomic_uint rotate; /* accept sharing's tie breaker */
        /* Loops that may still hand a connection to another (L4): each lowers it once, when it
         * has closed its listeners at the stop. A stopping loop leaves only once it is 0, so no
         * hand-off is ever posted to a mailbox nobody reads again (X1). */
        atomic_int accepting;

        struct m0_barrier barrier; /* the make-barrier (L1, L3) */
        /* Every thread the coordinator started, in the order it started them: each loop and
         * its pool threads, then the producer, then the compute threads. */
        struct m0_thread **threads;
        int nthreads, threads_cap;

        int done_fd; /* eventfd: a loop thread ended */
        struct m0_bus bus;
        struct m0_lease lease;   /* the ids' lease in the state directory (N3) */
        struct m0_shared shared; /* with M0_BUS=postgresql://…: STATUS= and the stop (G3) */
        struct m0_producer producer;
        struct m0_compute compute;
        uint64_t watchdog_usec; /* WATCHDOG_USEC for this process, 0 when off */
        uint32_t tick_ms;       /* M0_APP_TICK_MS when set, else the app's tick_ms (S3) */
        /* Set by the coordinator when the drain begins, before any loop reads its stop message:
         * a request being answered right then already gets Connection: close (X1). */
        atomic_bool stopping;
        uint64_t stop_by_ms;   /* the drain's bound, on the monotonic clock, once it began */
        char sockets_err[256]; /* why a passed socket cannot be served; "" when all are fine */
        struct m0_metrics_server metrics; /* GET /metrics on sockets.metrics (O1) */
        /* The database bus (G1): h->bus.shared, set by m0__shared_start for an M0_BUS URI; NULL
         * with the local bus. The metrics show its state while it is set. */
        struct m0_pgbus *pgbus;
        /* TL1–TL5: the certificates and the TLS context, loaded by the `tls` check before any
         * loop exists; NULL when no certificate is configured. */
        struct m0_tls *tls;
};

/* m0_handler_info's loop_handler_max_ms: a quarter of the watchdog's interval, 0 without one. */
static inline unsigned m0__loop_handler_max_ms(const struct m0_host *h)
{
        return (unsigned)(h->watchdog_usec / 4000);
}

#endif /* M0_HOST_H */
