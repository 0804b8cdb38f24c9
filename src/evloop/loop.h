/* SPDX-License-Identifier: MIT */
/* loop.h: loop.c, one event loop on one thread: its epoll set of descriptors and their
 * callbacks, its mailbox of messages that carry their handler, its timer lists and its turns (L1,
 * L2, D41, LY1). It names nothing of HTTP: what serves on a loop (the HTTP context, hctx.h)
 * registers descriptors, timers and tasks with callbacks of its own, and a table of hooks. Only
 * the loop's own thread touches a loop, but for what is marked. */
#ifndef M0_LOOP_H
#define M0_LOOP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "list.h"

struct m0_loop;

/*
 * A descriptor in the loop's epoll set. The loop calls `ready` with the epoll events; what
 * registered it finds itself from `io` (embedded, M0__CONTAINER_OF).
 */
struct m0_io;
typedef void m0_io_fn(struct m0_io *io, uint32_t events);
struct m0_io {
        m0_io_fn *ready;
};

/* One mailbox entry; allocated (malloc) by the sender, handled and freed by the receiving loop.
 * `handle` runs on the loop's thread; `drop` (may be NULL) frees what the message holds when
 * the loop ends before it handled it. The payload is the sender's: a descriptor or a pointer. */
struct m0_msg;
typedef void m0_msg_fn(struct m0_loop *l, struct m0_msg *m);
struct m0_msg {
        struct m0_link link;
        m0_msg_fn *handle;
        m0_msg_fn *drop;
        int fd;
        void *arg;
};

/*
 * An entry of the loop's run queue (D41, D85): a connection with events left for a later turn,
 * or one of the sources of work with more than a turn took of it. Each source keeps its remainder
 * where it already waits in order; its entry holds its place among the rest. `run` is called with
 * the events the entry was queued with.
 */
struct m0_task;
typedef void m0_task_fn(struct m0_task *t, uint32_t events);
struct m0_task {
        struct m0_link link; /* on loop->runq while `queued` */
        m0_task_fn *run;
        uint32_t events;
        bool queued;
};

/* A timer: filed in one of the loop's classes, each a FIFO kept in deadline order (D6); class 0
 * is "none". The classes, and what each one's deadline is counted from, are the caller's. */
#define M0_TIMER_CLASSES 12
struct m0_timer;
typedef void m0_timer_fn(struct m0_timer *t);
struct m0_timer {
        struct m0_link link; /* on loop->timers[cls] */
        uint64_t deadline;
        m0_timer_fn *fire;
        uint8_t cls; /* 0: filed nowhere */
};

/* What serves on the loop: the hooks the loop calls beside its descriptors' callbacks. */
struct m0_loop_ops {
        /* The mailbox's eventfd was read: the owner looks at what other threads flagged. */
        void (*woken)(struct m0_loop *l);
        /* The turn's events and expired timers were served: the owner's work of a turn's end. */
        void (*turn_end)(struct m0_loop *l);
        /* The owner's next deadline of its own (ms on the monotonic clock), UINT64_MAX if none. */
        uint64_t (*next_deadline)(struct m0_loop *l);
};

struct m0_loop {
        int index;
        int epfd;
        const struct m0_loop_ops *ops;

        /* mailbox: any thread pushes under `mb_lock`; the loop drains. Woken on empty→non-empty. */
        int mb_fd;
        struct m0_io mb_io;
        pthread_mutex_t mb_lock;
        struct m0_list mb;     /* of m0_msg, oldest first */
        struct m0_list mb_got; /* taken from `mb` by the loop, not yet handled (D85) */

        struct m0_list timers[M0_TIMER_CLASSES]; /* of m0_timer */
        uint64_t now_ms;
        time_t date_sec;
        char date[40]; /* "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n" */
        size_t date_len;

        /* The turn (D41, D85): the run queue, then one epoll batch, within a budget of time and
         * of items (connections served, timers fired, messages, frames). */
        uint32_t turn_items;     /* turn-items */
        uint64_t turn_budget_ms; /* turn-budget-ms, at most an eighth of the watchdog interval */
        uint64_t wake_every_ms;  /* the longest a loop sleeps: the Date line and the heartbeat */
        uint64_t turn_end_ms;    /* this turn's budget ends here, on the coarse clock */
        bool turn_served;        /* an item was taken in this turn */
        uint32_t turn_left;      /* items this turn may still take (turn-items) */
        struct m0_list runq;     /* of m0_task: work left for the next turn, in order */
        size_t runq_len;
        struct m0_task timers_task;  /* the expired timers' place on the run queue */
        struct m0_task mailbox_task; /* the taken messages' place on the run queue */

        /* Bumped by the loop at the end of each complete turn; read by the producer (W1). */
        atomic_uint_fast64_t heartbeat;
};

/*
 * Make `l` loop `index` with nothing acquired yet: every descriptor -1, its lock set up. It
 * cannot fail, and m0__loop_destroy() is safe on it from here on (as sd_event_new() sets its fds
 * to -EBADF). `ops` are the owner's hooks.
 */
void m0__loop_prepare(struct m0_loop *l, int index, const struct m0_loop_ops *ops);
/* Acquire the epoll set and the mailbox. 0, or -errno with whatever was acquired left for
 * m0__loop_destroy(). */
int m0__loop_build(struct m0_loop *l);
/* Free what a prepared loop holds, whether m0__loop_build() finished, failed or never ran; the
 * messages it did not handle are dropped. */
void m0__loop_destroy(struct m0_loop *l);

/* Register `fd` with `events`, its `io` called when ready; change its events; remove it. 0 or
 * -errno. */
int m0__io_add(struct m0_loop *l, struct m0_io *io, int fd, uint32_t events);
int m0__io_mod(struct m0_loop *l, struct m0_io *io, int fd, uint32_t events);
void m0__io_del(struct m0_loop *l, int fd);

/* Push a message to loop `l` (any thread). 0 or -errno. */
int m0__loop_post(struct m0_loop *l, struct m0_msg *m);
/* Wake loop `l` (any thread): its owner's `woken` hook runs. */
void m0__loop_wake(struct m0_loop *l);

/* File `t` in class `cls` (1 .. M0_TIMER_CLASSES-1) at `deadline`, keeping the class in deadline
 * order: one counted from now goes at the tail at once, an older one steps back past the few
 * entries that are later. */
void m0__timer_file(struct m0_loop *l, struct m0_timer *t, uint8_t cls, uint64_t deadline);
/* Take `t` out of its class, if it is in one. */
void m0__timer_unfile(struct m0_loop *l, struct m0_timer *t);

/* One turn (D41): wait up to `timeout_ms` for events (not at all while the run queue holds
 * work), serve the run queue, then the events, within the turn's budget; then the timers and
 * the owner's turn_end. Returns how many events there were, or -errno. The loop's thread (or a
 * test driving it). */
int m0__loop_run_once(struct m0_loop *l, int timeout_ms);
/* How long the next turn may wait: the earliest timer, the owner's deadline, the wake bound. */
int m0__loop_timeout(struct m0_loop *l);
/* Whether this turn's time is spent, once an item was taken in it (the coarse clock). */
bool m0__turn_spent(struct m0_loop *l);
/* Take one more item of work in this turn (D85): true for the turn's first whatever the budget,
 * then while items and time are left; the item is counted. */
bool m0__turn_take(struct m0_loop *l);
/* Whether the turn may take another item (without taking it). */
bool m0__turn_open(struct m0_loop *l);
/* Give `t` its turn later: to the run queue's tail (unless on it already), `events` added. */
void m0__turn_defer(struct m0_loop *l, struct m0_task *t, uint32_t events);
/* Take `t` off the run queue. */
void m0__turn_forget(struct m0_loop *l, struct m0_task *t);
void m0__loop_date(struct m0_loop *l);

#endif /* M0_LOOP_H */
