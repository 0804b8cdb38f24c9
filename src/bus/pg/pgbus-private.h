/* SPDX-License-Identifier: MIT */
/* pgbus-private.h: what the bus thread's files (pgbus.c, pgbus-calls.c, pgbus-sql.c, pgbus-text.c) share. */
#ifndef M0_PGBUS_PRIVATE_H
#define M0_PGBUS_PRIVATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "buf.h"
#include "log.h"
#include "util.h"
#include "pgbus.h"

/*
 * The design, in short (doc/DECISIONS.md D60–D66):
 *  - Ids come from one row, m0_bus_counter, updated in the inserting transaction. Publishers
 *    serialize on its row lock, so ids are gap-free and a transaction holding ids N.. commits
 *    before any transaction can take N+k: a reader of `id > last ORDER BY id` never passes an
 *    id that commits later (G1). A rolled-back transaction rolls its ids back with it.
 *  - One transaction carries up to M0__PGBUS_BATCH queued events, and the NOTIFY that wakes
 *    the listeners. The table is the truth: the listener also reads on (re)connect and every
 *    POLL_EVERY_MS.
 *  - Each transaction also writes (origin, batch) for this process in m0_bus_origins, first,
 *    so that after a connection fails in the middle of a commit the thread can tell whether the
 *    batch in flight committed (and must not be sent twice) or not (and must be sent again).
 *  - Everything runs on one thread with non-blocking libpq and poll(): a connection that hangs
 *    is bounded by CONNECT_TIMEOUT_MS and QUERY_TIMEOUT_MS, a stop is seen at once.
 */
#define CONNECT_TIMEOUT_MS 10000
#define QUERY_TIMEOUT_MS 30000
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
#define POLL_EVERY_MS 1000
#define RETAIN_EVERY_MS 60000
#define MAX_RESULTS 8
#define T_EVENTS "m0_bus_events"
#define T_COUNTER "m0_bus_counter"
#define T_ORIGINS "m0_bus_origins"
#define NOTIFY_CHANNEL "m0_bus"
/* Advisory lock keys ("m0bus", "m0bur"): creating the schema; retention, one host at a time. */
#define LOCK_SCHEMA "468963194227"
#define LOCK_RETAIN "468963194226"
#define TIME_US "(extract(epoch FROM time) * 1000000)::int8"

/* One accepted publish; the three strings live in `mem`. */
struct qev {
        struct qev *next;
        const char *channel;
        const char *event; /* NULL: none */
        const char *data;
        size_t bytes;
        char mem[];
};

/* One replay query waiting for the listening connection. */
struct replay_req {
        struct replay_req *next;
        uint64_t after;
        uint32_t max;
        m0_pgbus_replay_fn done;
        void *ud;
        size_t n;
        char **pat; /* exact names, or a prefix ending in '*' */
};

enum role { PUB = 0, LSN = 1 };

enum step {
        ST_NONE = 0,
        ST_SCHEMA_LOOK, /* BEGIN, the schema lock, the encoding, the tables' columns */
        ST_SCHEMA_MAKE, /* the missing tables, the counter's row, this origin's row, COMMIT */
        ST_ORIGIN,      /* after a failure: did the batch in flight commit? */
        ST_BATCH,
        ST_RETAIN,
        ST_LISTEN,
        ST_START, /* where delivery starts: the counter */
        ST_READ,
        ST_REPLAY,
};

struct conn {
        enum role role;
        const char *what; /* "publishing", "listening" */
        PGconn *pg;       /* NULL while down */
        bool connecting;
        PostgresPollingStatusType polling;
        bool ready; /* connected and set up: may take work */
        enum step step;
        bool flushing;     /* PQflush() left bytes to send */
        uint64_t deadline; /* of the connect or the query in flight; 0: none */
        uint64_t retry_at; /* while down */
        uint32_t backoff_ms;
        int nres;
        PGresult *res[MAX_RESULTS];
        /* The server's FATAL that came as a notice before it closed an idle connection
         * ("terminating connection due to administrator command"): a better reason than
         * libpq's "server closed the connection unexpectedly". */
        char fatal[256];
};

struct m0_pgbus {
        struct m0_pgbus_options opt;
        char *uri, *name;
        char origin[33]; /* this process, in m0_bus_origins */
        int wake_fd;
        pthread_t thread;
        bool running;

        /* Shared with every thread, under `lock`. */
        pthread_mutex_t lock;
        pthread_cond_t cond; /* started or refused became true */
        struct qev *qhead, *qtail;
        size_t qlen; /* accepted and not committed: the queue and the batch in flight */
        struct replay_req *rhead, *rtail;
        size_t rlen;
        bool stopping;
        uint64_t flush_deadline;
        bool schema_ok;
        bool started;           /* the schema is checked and delivery's first id is known */
        uint64_t accepted_down; /* publishes accepted while `down` */
        bool down;
        bool refused;
        char why[512]; /* the refusal */
        char state[600];
        struct m0_pgbus_stats stats;

        /* The bus thread's alone. */
        struct conn c[2];
        struct qev *inflight; /* the batch sent and not known to be committed */
        size_t ninflight;
        uint64_t seq, inflight_seq;
        bool uncertain;  /* a connection failed while `inflight` was out */
        bool delivering; /* `last` is known */
        uint64_t last;
        bool read_wanted;
        bool last_was_read; /* replays and reads take turns on the listening connection */
        uint64_t poll_at;
        uint64_t retain_at;
        bool retain_active, last_was_retain;
        uint64_t run_deleted, run_batches, run_lo, run_hi;
        struct replay_req *replaying;
        uint64_t replay_upto;
        bool was_up;
        uint64_t down_since; /* 0: not down */
        uint64_t down_last;  /* the last id delivered when it went down */
        char reason[400];    /* the last failure, for the state */
        uint64_t rng;
        struct m0_buf sql;
};

/* ---- pgbus-text.c ---- */

/* A channel's name: 1–200 bytes of visible ASCII (N1). */
bool m0__pgbus_channel_ok(const char *s, size_t len);
/* Well-formed UTF-8. */
bool m0__pgbus_utf8_ok(const char *s);
/* libpq's message as one line: its first line, runs of blanks made one space. */
void m0__pgbus_one_line(char *out, size_t len, const char *msg);
/* The reason for the state and the log, with the cause named when the kernel said EPERM. */
void m0__pgbus_reason_of(char *out, size_t len, const char *msg);
/* The same for a connection `pg` that never came up: when the kernel refuses packets to the
 * address it was trying (m0__pgbus_firewalled), the reason names that and its fix. */
void m0__pgbus_reason_of_attempt(char *out, size_t len, const char *msg, PGconn *pg);
/* Append `s` as a quoted SQL literal escaped for `pg`'s settings. 0 or -ENOMEM/-EINVAL. */
int m0__pgbus_sql_literal(struct m0_buf *b, PGconn *pg, const char *s);

/* ---- pgbus.c: the thread and its connections ---- */

/* The bus thread's body; m0__pgbus_new() starts it with the bus as its argument. */
void *m0__pgbus_main(void *arg);

/* Send `sql` on `c` for step `st`; a failure fails the connection. */
void m0__pgbus_conn_send(struct m0_pgbus *b, struct conn *c, enum step st, const char *sql);
/* The connection failed for `msg`: close it, note what was in flight, retry after the backoff. */
void m0__pgbus_conn_fail(struct m0_pgbus *b, struct conn *c, const char *msg);
void m0__pgbus_conn_close(struct conn *c);
/* Recompute the state after a change on connection `what`; log the going and the coming back. */
void m0__pgbus_state_update(struct m0_pgbus *b, const char *what);

/* ---- pgbus-sql.c: what the thread says to the database; *_send on an idle connection, *_done
 * with its results in c->res ---- */

void m0__pgbus_schema_send(struct m0_pgbus *b, struct conn *c);
void m0__pgbus_schema_looked(struct m0_pgbus *b, struct conn *c);
void m0__pgbus_schema_made(struct m0_pgbus *b, struct conn *c);
/* A table that is not m0's, or a database m0 cannot use: no reconnecting, exit 78 (G6). */
void m0__pgbus_refuse(struct m0_pgbus *b, const char *fmt, ...) M0_PRINTF(2, 3);
void m0__pgbus_qev_free_list(struct qev *q);
/* Move up to a batch of queued events into `inflight` (kept there until committed). */
void m0__pgbus_batch_take(struct m0_pgbus *b);
void m0__pgbus_batch_send(struct m0_pgbus *b, struct conn *c);
void m0__pgbus_batch_done(struct m0_pgbus *b, struct conn *c);
void m0__pgbus_origin_send(struct m0_pgbus *b, struct conn *c);
void m0__pgbus_origin_done(struct m0_pgbus *b, struct conn *c);
void m0__pgbus_retain_send(struct m0_pgbus *b, struct conn *c);
void m0__pgbus_retain_done(struct m0_pgbus *b, struct conn *c);
void m0__pgbus_read_send(struct m0_pgbus *b, struct conn *c);
void m0__pgbus_read_done(struct m0_pgbus *b, struct conn *c);
void m0__pgbus_start_done(struct m0_pgbus *b, struct conn *c);
/* Take the next replay query off the queue and send it. */
void m0__pgbus_replay_send(struct m0_pgbus *b, struct conn *c);
/* Answer the replay in flight: its rows, or `err` (the query's own failure). */
void m0__pgbus_replay_done(struct m0_pgbus *b, struct conn *c, const char *err);
void m0__pgbus_replay_free(struct replay_req *q);

#endif /* M0_PGBUS_PRIVATE_H */
