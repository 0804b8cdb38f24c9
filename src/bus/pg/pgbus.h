/* SPDX-License-Identifier: MIT */
/* pgbus.h: the database side of a bus shared by many hosts through PostgreSQL (SPEC G1–G6). */
#ifndef M0_PGBUS_H
#define M0_PGBUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * One bus thread per process owns two libpq connections: one publishes (batches of queued
 * events, one transaction each, ids from a one-row counter), one LISTENs and reads the table
 * past the last id it delivered. Every event reaches the `deliver` callback from the table,
 * the host's own included, so every host sees one sequence. The thread never calls back into
 * a loop: the callbacks run on it, and the integrating bus turns what they get into frames and
 * mailbox messages. doc/DECISIONS.md D60–D66 explain the choices.
 */

/* Journal message ids (J1) of the bus's connection; doc/m0.catalog explains them. */
#define M0_MID_BUS_DOWN "9b3b6f1e2d4c4a7e8f0a1b2c3d4e5f65"
#define M0_MID_BUS_UP "9b3b6f1e2d4c4a7e8f0a1b2c3d4e5f66"
#define M0_MID_BUS_REFUSED "9b3b6f1e2d4c4a7e8f0a1b2c3d4e5f67"

/* start_after: deliver from the table's newest id at the first connection on. */
#define M0__PGBUS_FROM_END UINT64_MAX

/* Events per publishing transaction, and their bytes (D61). */
#define M0__PGBUS_BATCH 1000
#define M0__PGBUS_BATCH_BYTES (1u << 20)
/* Rows per read of the table past the last delivered id. */
#define M0__PGBUS_READ_ROWS 1000
/* Rows per retention transaction (D64). */
#define M0__PGBUS_RETAIN_BATCH 1000
/* The advisory lock retention takes (G5), for tests and operators: "m0bur" as a number. */
#define M0__PGBUS_LOCK_RETAIN 468963194226

/* A channel's name: 1–200 bytes of visible ASCII (N1). */
#define M0__PGBUS_CHANNEL_MAX 200

struct m0_pgbus;

/* One event as the table holds it. Strings are NUL-terminated and valid only during the call
 * they are passed to. */
struct m0_pgbus_event {
        uint64_t id;
        const char *channel;
        const char *event; /* NULL when it was published without one */
        const char *data;
        size_t data_len;
        int64_t time_us; /* the inserting transaction's time, microseconds since the epoch */
};

/* A replay's answer (G4): the rows after `after` up to `upto`, oldest first. */
struct m0_pgbus_replayed {
        int err; /* 0, -ECANCELED (the bus stopped), -EIO (the query failed: `why` says) */
        const char *why;
        const struct m0_pgbus_event *ev;
        size_t n;
        bool truncated; /* more rows matched: these are the newest `max` of them */
        uint64_t upto;  /* the last id delivered when the query ran: every later id reaches
                           `deliver` after this callback, so replay + live miss nothing */
};

typedef void (*m0_pgbus_deliver_fn)(void *ud, const struct m0_pgbus_event *ev);
typedef void (*m0_pgbus_replay_fn)(void *ud, const struct m0_pgbus_replayed *r);
typedef void (*m0_pgbus_state_fn)(void *ud, const char *state);

struct m0_pgbus_options {
        const char *uri;  /* a libpq connection URI (postgresql://…) */
        const char *name; /* in each connection's application_name: m0/<name>/publish, …/listen */
        uint32_t queue_max;       /* M0_BUS_QUEUE: events accepted and not yet committed; also the
                                 bound on replay queries waiting */
        uint32_t replay_max;      /* M0_BUS_REPLAY_MAX: rows one replay returns at most */
        uint32_t retain_s;        /* M0_BUS_RETAIN_S: rows older are deleted; 0 = no age bound */
        uint64_t retain_rows;     /* M0_BUS_RETAIN_ROWS: rows past the newest N are deleted; 0 = no
                                 bound */
        uint32_t retain_every_ms; /* how often retention runs; 0 = every 60 s */
        uint64_t start_after;     /* deliver ids after this one, or M0__PGBUS_FROM_END */
        m0_pgbus_deliver_fn deliver;     /* each id once, in id order, on the bus thread */
        m0_pgbus_state_fn state_changed; /* the state text changed (for STATUS=); may be NULL */
        void *ud;
};

/* Counters, for the doctor, STATUS= and tests. */
struct m0_pgbus_stats {
        uint64_t queued;      /* accepted and not yet committed, now */
        uint64_t published;   /* committed */
        uint64_t refused;     /* publishes that failed with -EAGAIN: the queue was full */
        uint64_t delivered;   /* handed to `deliver` */
        uint64_t lost;        /* ids deleted by retention before this host read them */
        uint64_t last_id;     /* the last id delivered */
        uint64_t batches;     /* publishing transactions committed */
        uint64_t reconnects;  /* connection attempts after a failure */
        uint64_t replays;     /* replay queries answered */
        uint64_t retain_runs; /* retention runs that held the lock */
        uint64_t retain_busy; /* retention runs that found the lock held by another host */
        uint64_t retain_batches;
        uint64_t retain_deleted;
        bool created; /* this process created the schema */
};

/*
 * Check that `uri` is a libpq connection URI that libpq parses. 0, or -EINVAL with `err` saying
 * what is wrong (libpq's own words where it has some). Any thread; connects to nothing.
 */
int m0__pgbus_uri_check(const char *uri, char *err, size_t err_len);

/*
 * The doctor's look at the database: connect (bounded by `timeout_s`), report the server's
 * version and whether m0's schema is there. 0 when it answered, -errno when not; `detail` says
 * which, and names IPAddressDeny= when the kernel refused a TCP connection with EPERM. Blocks
 * the caller: the doctor only.
 */
int m0__pgbus_probe(const char *uri, int timeout_s, char *detail, size_t detail_len);

/*
 * Start the bus thread for `opt` (copied). 0 and *ret, or -errno with `err` filled (a bad URI,
 * no memory, no thread). Connecting happens on the thread: a database that is not there yet is
 * no error here. The coordinator, before the loops start.
 */
int m0__pgbus_new(struct m0_pgbus **ret, const struct m0_pgbus_options *opt, char *err,
                  size_t err_len);

/*
 * Wait up to `timeout_ms` for the schema to be checked (created when missing) and the first id
 * to deliver known (every event committed after that point reaches `deliver`). 0 once it is;
 * -EPROTO when the database holds a table that is not m0's (`err` names it: exit 78);
 * -ETIMEDOUT when the database did not answer in time (serving may go on: the thread keeps
 * reconnecting). The coordinator.
 */
int m0__pgbus_wait_ready(struct m0_pgbus *b, int timeout_ms, char *err, size_t err_len);

/*
 * Queue one event for the table (G2). Any thread; never blocks beyond a short mutex. The bytes
 * are copied. 0; -EINVAL for a channel that is not 1–200 bytes of visible ASCII, an event name
 * with a line break, or text that is not UTF-8; -EAGAIN when `queue_max` events are waiting
 * (counted in `refused`); -ESHUTDOWN once the bus stops; -ENOMEM.
 */
int m0__pgbus_publish(struct m0_pgbus *b, const char *channel, const char *event, const char *data);

/*
 * Ask for the rows after id `after` (G4), at most `max` (capped at replay_max; the newest when
 * more match), of the channels named in `channels` (exact names, or "prefix*" for every channel
 * starting with prefix; n == 0: every channel). `done` runs once on the bus thread. Any thread;
 * 0, -EINVAL (a bad pattern), -EAGAIN (queue_max queries wait), -ESHUTDOWN, -ENOMEM.
 */
int m0__pgbus_replay(struct m0_pgbus *b, uint64_t after, const char *const *channels, size_t n,
                     uint32_t max, m0_pgbus_replay_fn done, void *ud);

/* The state as STATUS= and the doctor say it: "bus: up", "bus: connecting",
 * "bus: reconnecting (<libpq's reason>)", "bus: refused (<why>)". Any thread. */
void m0__pgbus_state(struct m0_pgbus *b, char *out, size_t len);
void m0__pgbus_stats(struct m0_pgbus *b, struct m0_pgbus_stats *ret);

/*
 * Stop the thread: publish what is queued while the database answers, for at most `flush_ms`,
 * then cancel a batch still in flight and close the connections. Replays still waiting complete
 * with -ECANCELED. Returns how many accepted events were not committed (a batch whose commit
 * was already under way when the cancel came may still be in the table: the server decides).
 * The coordinator; once.
 */
uint64_t m0__pgbus_stop(struct m0_pgbus *b, int flush_ms);
/* Stop (without flushing) when not stopped, and free. Accepts NULL. */
void m0__pgbus_free(struct m0_pgbus *b);

/*
 * The module (D210). The functions above are built into bus-pg.so, the one object that links
 * libpq, which libm0 loads only when M0_BUS names a database (src/bus/pg/load.c); libm0 calls
 * them through this table, which the module exports as `m0_bus_pg_module` (module.c).
 * M0__PGBUS_MODULE_ABI changes whenever the table, or a struct it passes, changes.
 */
#define M0__PGBUS_MODULE_ABI 1

/* What the module borrows from libm0, which it does not link: the log (a line already
 * formatted; thread-safe) and the local bus's rule for a channel's name. */
struct m0_pgbus_host {
        void (*log)(int prio, const char *mid, const char *msg);
        bool (*channel_ok)(const char *s, size_t len);
};

struct m0_pgbus_module {
        uint32_t abi;        /* M0__PGBUS_MODULE_ABI of the module's build */
        const char *version; /* its PACKAGE_VERSION: libm0 takes only its own */
        /* Called once, by the loader, before any other. */
        void (*init)(const struct m0_pgbus_host *host);
        int (*uri_check)(const char *uri, char *err, size_t err_len);
        int (*probe)(const char *uri, int timeout_s, char *detail, size_t detail_len);
        int (*create)(struct m0_pgbus **ret, const struct m0_pgbus_options *opt, char *err,
                      size_t err_len);
        int (*wait_ready)(struct m0_pgbus *b, int timeout_ms, char *err, size_t err_len);
        int (*publish)(struct m0_pgbus *b, const char *channel, const char *event,
                       const char *data);
        int (*replay)(struct m0_pgbus *b, uint64_t after, const char *const *channels, size_t n,
                      uint32_t max, m0_pgbus_replay_fn done, void *ud);
        void (*state)(struct m0_pgbus *b, char *out, size_t len);
        void (*stats)(struct m0_pgbus *b, struct m0_pgbus_stats *ret);
        uint64_t (*stop)(struct m0_pgbus *b, int flush_ms);
        void (*free)(struct m0_pgbus *b);
};

#endif /* M0_PGBUS_H */
