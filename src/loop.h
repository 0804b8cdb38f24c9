/* SPDX-License-Identifier: MIT */
/* loop.h: loop.c, one event loop on one thread: its epoll set, its mailbox, its timer lists, its
 * turns (L1, L2, D41). Only the loop's own thread touches a loop, but for what is marked. */
#ifndef M0_LOOP_H
#define M0_LOOP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "accesslog.h"
#include "buf.h"
#include "list.h"
#include "metrics.h"
#include "pool.h"
#include "request.h"
#include "response.h"
#include "subs.h"
#include "thread.h"

struct m0_host;
struct m0_conn;
struct m0_treplay;

enum m0_msg_kind {
        M0_MSG_CONN = 1, /* a connection handed over by another loop's accept */
        M0_MSG_STOP,     /* the drain begins */
        M0_MSG_JOB,      /* a pool thread finished a job of this loop's */
        M0_MSG_REPLAY,   /* the shared bus's answer to a stream's replay from the table */
};

/* One mailbox entry; allocated by the sender, freed by the receiving loop. */
struct m0_msg {
        struct m0_link link;
        enum m0_msg_kind kind;
        int fd;
        struct m0_job *job;
        struct m0_treplay *replay;
};

/*
 * An entry of the loop's run queue (D41, D85): a connection with events left for a later turn,
 * or one of the loop's own sources of work with more than a turn took of it. Each source keeps
 * its remainder where it already waits in order; its entry holds its place among the rest.
 */
enum m0_task_kind {
        M0_TASK_CONN = -1, /* the entry is a connection's (struct m0_conn's `task`) */
        M0_TASK_TIMERS,    /* expired timers left in their classes */
        M0_TASK_MAILBOX,   /* messages taken from the mailbox and not yet handled (`mb_got`) */
        M0_TASK_FRAMES,    /* frames left in the loop's channel on the bus */
        M0_TASK_N,
};

struct m0_task {
        struct m0_link link; /* on loop->runq while `queued` */
        int8_t kind;         /* enum m0_task_kind */
        bool queued;
};

/* The loop's timer lists: one FIFO per class, each in deadline order (D6). */
enum m0_timer_class {
        M0_TIMER_NONE = 0,
        M0_TIMER_IDLE,   /* between requests: idle_timeout_ms */
        M0_TIMER_HEAD,   /* reading a head: header_timeout_ms */
        M0_TIMER_BODY,   /* reading a body: body_timeout_ms */
        M0_TIMER_WRITE,  /* output blocked: idle_timeout_ms since last progress */
        M0_TIMER_DRAIN,  /* idle when the stop came: a request on its way is still answered */
        M0_TIMER_LINGER, /* closing: drain the client's bytes for a while */
        M0_TIMER_N,
};

/* struct m0_loop's `observe` bits. */
#define M0_OBSERVE_METRICS 1u /* a metrics listener is set up: count for the scrape */
#define M0_OBSERVE_JOURNAL 2u /* M0_ACCESS_LOG=journal: an entry per request */

struct m0_loop {
        struct m0_host *host;
        int index;
        struct m0_thread thread; /* its state is the app's handler state for this loop */
        int epfd;

        /* mailbox: any thread pushes under `mb_lock`; the loop drains. Woken on empty→non-empty. */
        int mb_fd;
        pthread_mutex_t mb_lock;
        struct m0_list mb;     /* of m0_msg, oldest first */
        struct m0_list mb_got; /* taken from `mb` by the loop, not yet handled (D85) */

        /* Connections this loop holds or has been promised (a hand-off on its way): the load
         * accept sharing balances. Written by any accepting loop, read by all. */
        atomic_uint load;
        /* Counters, written by this loop only (m0__count), read at exit and by the metrics. */
        m0_counter passed;   /* connections this loop accepted and handed to another */
        m0_counter received; /* connections handed to this loop by another */
        m0_counter accepted; /* connections this loop accepted itself and kept */
        uint64_t requests;
        m0_counter refused_conns; /* closed at once: over max_connections or no fd left */
        /* What the metrics and the access log need (O1, O2): M0_OBSERVE_* bits, fixed at
         * build; requests are timed when any is set. */
        uint8_t observe;
        struct m0_loop_stats stats; /* counted while M0_OBSERVE_METRICS is set */
        struct m0_journal journal;  /* M0_OBSERVE_JOURNAL: entries on their way to journald */

        int *listen_fds; /* this loop's copies of the listeners */
        size_t nlisten;
        int reserve_fd; /* spare fd, given up to shed a connection on EMFILE */

        bool stopping;
        bool failed;
        uint64_t drain_deadline_ms; /* set at the stop: connections left past it are cut */
        m0_counter cut;             /* connections cut at the drain's bound */

        struct m0_list timers[M0_TIMER_N]; /* of m0_conn, by their timer link */
        uint64_t now_ms;
        time_t date_sec;
        char date[40]; /* "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n" */
        size_t date_len;
        char keep_alive[40]; /* "Keep-Alive: timeout=60\r\n": what a kept answer says (D111) */
        size_t keep_alive_len;
        uint64_t next_tick_ms;

        /* The turn (D41, D85): the run queue, then one epoll batch, within a budget of time and
         * of items (connections served, timers fired, messages, frames). */
        uint64_t turn_budget_ms; /* turn-budget-ms, at most an eighth of the watchdog interval */
        uint64_t turn_end_ms;    /* this turn's budget ends here, on the coarse clock */
        bool turn_served;        /* an item was taken in this turn */
        uint32_t turn_left;      /* items this turn may still take (turn-items) */
        uint32_t slice_left;     /* requests the connection being served may still run */
        struct m0_list runq;     /* of m0_task: work left for the next turn, in order */
        size_t runq_len;
        struct m0_task src_task[M0_TASK_N]; /* the loop's sources' places on the run queue */

        struct m0_list dead; /* closed during this turn; freed after it (events may name them) */
        /* The buffer llhttp is parsing now, and whose: callbacks turn pointers into offsets. */
        const char *cur_base;
        size_t cur_len;
        const struct m0_conn *cur_conn; /* NULL between parses */
        struct m0_buf wbuf; /* responses of the connection being served, written in one go */

        struct m0_pool pool;

        /* streams (S1), the channels they follow (N5) and the bus's queue (B1, D44) */
        struct m0_list streams;  /* of m0_conn, by their stream link */
        struct m0_subs subs;     /* channel -> the streams that follow it */
        uint64_t deliver_stamp;  /* one per frame delivered: a stream is offered it once */
        atomic_bool bus_pending; /* set by a publisher, cleared by the loop (wakes on 0→1) */
        m0_counter chan_refused; /* frames this loop's channel refused, being full (B2) */
        uint64_t chan_dropped;   /* transient frames it refused */
        uint64_t replays_ahead;  /* streams whose Last-Event-ID was past the newest id (N3) */
        uint64_t ahead_logged_ms;
        m0_counter chan_closed;    /* streams closed because their loop's channel was full */
        uint64_t chan_logged_ms;   /* when a full channel was last logged */
        m0_counter streams_cut;    /* streams closed because their backlog passed its bound */
        m0_counter streams_unread; /* streams closed at the stop with frames their client had
                                      not taken */
        uint64_t next_heartbeat_ms;

        /* The request the loop is serving, read by the watchdog; kept only when it is on. */
        pthread_mutex_t cur_lock;
        char cur[160];

        struct m0_req req;
        struct m0_res res;
        char *rscratch; /* read buffer shared by the loop's connections between requests */
        size_t rscratch_cap;
        /* Bumped by the loop at the end of each complete turn; read by the producer (W1). */
        atomic_uint_fast64_t heartbeat;
};

/*
 * Make `l` loop `index` of `h` with nothing acquired yet: every descriptor -1, its locks and its
 * thread record set up. It cannot fail, and m0__loop_destroy() is safe on it from here on, so the
 * host prepares every loop before it builds any (as sd_event_new() sets its fds to -EBADF).
 */
void m0__loop_prepare(struct m0_loop *l, struct m0_host *h, int index);
/* Acquire what a prepared loop serves with: its pool, epoll set, mailbox, listener copies and
 * buffers. 0, or -errno with whatever was acquired left for m0__loop_destroy(). */
int m0__loop_build(struct m0_loop *l);
/* Both, for a loop on its own (the unit tests). */
int m0__loop_init(struct m0_loop *l, struct m0_host *h, int index);
/* Free what a prepared loop holds, whether m0__loop_build() finished, failed or never ran. */
void m0__loop_destroy(struct m0_loop *l);
/* Push a message to loop `l` (any thread). 0 or -errno. */
int m0__loop_post(struct m0_loop *l, struct m0_msg *m);
/* One turn (D41): wait up to `timeout_ms` for events (not at all while the run queue holds
 * work), serve the run queue, then the events, within the turn's budget; then timers,
 * heartbeats and reaping. Returns how many events there were, or -errno. The loop's thread (or a
 * test driving it). */
int m0__loop_run_once(struct m0_loop *l, int timeout_ms);
/* Whether this turn's time is spent, once an item was taken in it (the coarse clock). */
bool m0__turn_spent(struct m0_loop *l);
/* Take one more item of work in this turn (D85): true for the turn's first whatever the budget,
 * then while items and time are left; the item is counted. */
bool m0__turn_take(struct m0_loop *l);
/* Give `c` its turn later: to the run queue's tail (unless on it already) with `events`. */
void m0__turn_defer(struct m0_conn *c, uint32_t events);
/* Take `c` off the run queue (it is closing). */
void m0__turn_forget(struct m0_conn *c);
/* Source `src` has work left past this turn: it takes its place at the run queue's tail. */
void m0__turn_leave(struct m0_loop *l, enum m0_task_kind kind);
/* The loop's thread body; `arg` is its struct m0_loop. */
void *m0__loop_main(void *arg);
void m0__loop_date(struct m0_loop *l);
/* Copy the request loop `l` is serving ("GET /slow"), "" when none. Any thread. */
void m0__loop_request_get(struct m0_loop *l, char *out, size_t len);

#endif /* M0_LOOP_H */
