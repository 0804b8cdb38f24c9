/* SPDX-License-Identifier: MIT */
/* lease.h: lease.c, ids that never go backwards across a stop and a start: a lease on the next
 * ids, written ahead of them in the service's StateDirectory by a thread of its own (N3). */
#ifndef M0_LEASE_H
#define M0_LEASE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct m0_bus;

/* The file in the state directory. */
#define M0__LEASE_FILE "m0-bus-ids"
/* The fewest ids a lease runs ahead of the newest one (D76). */
#define M0__LEASE_MIN 65536u

struct m0_lease {
        int dirfd;     /* the state directory, or -1 */
        char dir[256]; /* its path, for the log */
        int wake_fd;   /* eventfd: the bus pokes it when ids near the lease, the stop too */
        pthread_t thread;
        bool running;
        atomic_bool stop;
        struct m0_bus *bus;
        uint64_t written;  /* the lease on disk: no id past it was handed out */
        uint64_t base;     /* the newest id when the lease was last written */
        uint64_t base_ms;  /* and when */
        uint64_t headroom; /* how far the lease runs ahead of it */
        bool failing;      /* the last write failed: said once, until one succeeds */
        uint64_t writes;
};

/*
 * Open the state directory `dir` ($STATE_DIRECTORY: the first of its colon-separated paths; NULL
 * or empty: none) and read the lease there. 1 and *ret_lease (ids continue after it); 0: the
 * directory holds none yet; -ENOENT: no state directory; another -errno with `why` when the
 * directory or its lease cannot be read (ids must then start where no earlier id can be).
 * The coordinator, before any thread exists.
 */
int m0__lease_open(struct m0_lease *l, const char *dir, uint64_t *ret_lease, char *why,
                   size_t why_len);
/*
 * Write a lease ahead of the bus's newest id now, then start the thread that keeps it ahead:
 * at least every second while ids are taken, and at once when a publisher nears it. The bus
 * waits for it only when ids outrun the headroom. 0, or -errno (serving goes on without a
 * lease; `err` says why). The coordinator.
 */
int m0__lease_start(struct m0_lease *l, struct m0_bus *b, char *err, size_t err_len);
/* Stop the thread. `exact`: nothing publishes any more, so write the newest id itself (the next
 * start continues right after it). The coordinator; safe on a lease never opened. */
void m0__lease_stop(struct m0_lease *l, bool exact);

#endif /* M0_LEASE_H */
