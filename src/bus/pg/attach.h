/* SPDX-License-Identifier: MIT */
/* attach.h: attach.c, the bus shared through PostgreSQL attached to the host: its start before
 * READY=1, every event from the table through the local bus's one path, replays from the table
 * for streams, STATUS=, and its stop within the drain's bound (G1–G4, D93–D97). */
#ifndef M0_SHARED_H
#define M0_SHARED_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "bus.h"
#include "loop.h"

#include "m0.h"

struct m0_config;
struct m0_conn;
struct m0_msg;
struct m0_pgbus;

/* The coordinator's and the bus thread's common state. The host holds one; m0__shared_start is
 * handed what it reads of the host (LY4, D240). */
struct m0_shared {
        struct m0_bus *bus; /* the host's: bus->shared is the database bus, NULL with the local */
        const struct m0_config *cfg;
        const m0_app *app;
        /* bus->shared once it started, for the metrics, which show its state while it is set
         * (O1); NULL with the local bus. */
        struct m0_pgbus *pgbus;
        pthread_mutex_t lock; /* STATUS= from the bus thread and the coordinator, in order */
        bool serving;         /* READY=1 was sent: a change of the bus's state is a STATUS= */
        bool stopping;        /* the drain began: STATUS= is the drain's */
        char status[512];     /* the serving line, "STATUS=serving on …", without the bus */
        /* The bus thread's alone. */
        uint64_t unsendable; /* rows m0__bus_deliver refused: a stream cannot be sent them */
        uint64_t logged_ms;  /* when one was last logged */
};

/*
 * A stream waiting for its replay from the table (G4, D95). Made and freed by its loop; the bus
 * thread writes the answer and posts `msg`, after which only the loop touches it again.
 */
struct m0_treplay {
        struct m0_loop *loop; /* the stream's loop, and the message its answer comes back as */
        m0_msg_fn *back;      /* ... handled by */
        m0_msg_fn *drop;      /* ... or dropped by, when the loop ended first */
        struct m0_conn *c;    /* the stream; NULL once it ended (the loop's) */
        uint64_t after;       /* its Last-Event-ID */
        struct m0_msg *msg;
        struct m0_fvec held; /* frames that reached the stream meanwhile, in order (the loop's) */
        size_t held_bytes;
        /* The answer. */
        int err; /* 0, or the bus's -errno (-ECANCELED at the stop, -EIO, -ENOMEM) */
        char why[200];
        struct m0_fvec rows; /* the rows after `after` up to `upto`, oldest first */
        bool truncated;      /* more matched: these are the newest M0_BUS_REPLAY_MAX */
        uint64_t upto;       /* every later id reaches the loop's queue after this answer */
        /* A backfill (AP2) instead of a table's answer: the app writes `pre` on a pool thread
         * for each record of `gaps` (the oldest id kept, 8 bytes, then the channel's name and a
         * NUL); `pre` goes first, then `rows` (the kept replay), then `held`. */
        bool backfill;
        struct m0_buf gaps;
        struct m0_buf pre;
        /* A WebSocket's backfill (D234): the app's events as frames, each with its channel,
         * into `pre_frames` instead of `pre`'s bytes. */
        bool frames;
        struct m0_fvec pre_frames;
};

/*
 * With M0_BUS=postgresql://… (the coordinator, before any loop exists): the bus thread, then a
 * wait of up to --bus-ready-ms for the schema and the first id. 0 when the bus is the local one,
 * or when it started (or the database did not answer in time: serving goes on, and the log says
 * so); -EPROTO with `err` naming the table when the database holds one that is not m0's (78);
 * another -errno with `err` when the thread cannot start.
 */
int m0__shared_start(struct m0_shared *s, struct m0_bus *bus, const struct m0_config *cfg,
                     const m0_app *app, char *err, size_t err_len);
/*
 * READY=1 with `st` (the serving line, "STATUS=…"), the bus's state appended on a shared bus,
 * sent under the lock that orders it before any later STATUS= of the bus thread. `st` is left
 * as sent, for the log. The coordinator.
 */
void m0__shared_notify_ready(struct m0_shared *s, char *st, size_t len);
/* Ask the table of bus `b`'s database for `t`'s replay of `pats` (exact names, "prefix*"), at
 * most `max` rows (M0_BUS_REPLAY_MAX); the answer is posted to t->loop, handled by t->back. 0, or
 * -errno (the bus's refusals; nothing is posted). A loop. */
int m0__shared_replay(struct m0_bus *b, uint32_t max, struct m0_treplay *t, const char *const *pats,
                      size_t n);
/* Hand `t`, answered, back to its loop (M0_MSG_REPLAY, with the message it holds). Any thread;
 * only the loop touches `t` after. */
void m0__treplay_post(struct m0_treplay *t);
/* Free a replay whose stream is gone or served. Accepts NULL. */
void m0__treplay_free(struct m0_treplay *t);
/* The drain began: STATUS= is no longer the bus's. The coordinator. */
void m0__shared_draining(struct m0_shared *s);
/* Stop the bus thread, publishing what is queued for at most `flush_ms`, and log what it did.
 * The coordinator, once every thread that publishes was joined (or given up on). */
void m0__shared_stop(struct m0_shared *s, uint64_t flush_ms);
/* Free it (after m0__shared_stop, when no thread can publish any more). */
void m0__shared_free(struct m0_shared *s);

#endif /* M0_SHARED_H */
