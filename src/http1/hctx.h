/* SPDX-License-Identifier: MIT */
/* hctx.h: hctx.c, a loop's HTTP context (LY1): the HTTP state kept beside the event loop (the
 * request in flight, the output buffer, the connections' timer classes, the streams and the
 * channels they follow, the pool, the access log's journal and the counters), and the thread
 * that runs the two. The event loop (loop.h) knows none of it: this context registers its
 * descriptors, timers and tasks there with callbacks, and the loop's hooks. */
#ifndef M0_HCTX_H
#define M0_HCTX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accesslog.h"
#include "buf.h"
#include "list.h"
#include "loop.h"
#include "m0.h"
#include "metrics.h"
#include "pool.h"
#include "request.h"
#include "response.h"
#include "subs.h"
#include "thread.h"

struct m0_bus;
struct m0_config;
struct m0_conn;
struct m0_cors_c;
struct m0_hctx;
struct m0_lifecycle;
struct m0_proto_ops;
struct m0_router;
struct m0_sockets;
struct m0_tls;

/* The classes of a connection's timer (D6), each a FIFO of the loop's in deadline order. */
enum m0_timer_class {
        M0_TIMER_NONE = 0,
        M0_TIMER_IDLE,      /* between requests: idle_timeout_ms */
        M0_TIMER_HEAD,      /* reading a head: header_timeout_ms */
        M0_TIMER_BODY,      /* reading a body: body_timeout_ms */
        M0_TIMER_WRITE,     /* output blocked: idle_timeout_ms since last progress */
        M0_TIMER_DRAIN,     /* idle when the stop came: a request on its way is still answered */
        M0_TIMER_LINGER,    /* closing: drain the client's bytes for a while */
        M0_TIMER_HANDSHAKE, /* a transport's handshake: tls_handshake_timeout_ms (TL6) */
        M0_TIMER_WS,        /* an open WebSocket: its next ping, or its idle bound (src/ws/) */
        M0_TIMER_N,         /* the classes above are connections': the stop walks them */
        /* A WebSocket on an HTTP/2 stream (D231): its ping, idle, stall and close bounds, on the
         * stream's stand-in connection; the stop and its bound reach it through its HTTP/2
         * connection, never as a connection of the loop's. */
        M0_TIMER_WS_STREAM = M0_TIMER_N,
};
_Static_assert(M0_TIMER_WS_STREAM < M0_TIMER_CLASSES, "the loop keeps M0_TIMER_CLASSES classes");

/* struct m0_hctx's `observe` bits. */
#define M0_OBSERVE_METRICS 1u /* a metrics listener is set up: count for the scrape */
#define M0_OBSERVE_JOURNAL 2u /* M0_ACCESS_LOG=journal: an entry per request */

/*
 * What the loops share, and all they know of the host (SPEC LY4, D240): the host's own struct is
 * laid out in src/core/ alone. The host holds one, fills it before it prepares a loop
 * (m0__host_link), and hands each loop a pointer to it; a loop copies into its own context, at
 * prepare, the pointers its request path reads, so a request reads no more than it did when it
 * went through the host.
 */
struct m0_serve {
        const m0_app *app;
        const struct m0_config *cfg;
        const struct m0_router *router; /* the app's routes, compiled before the checks (T1) */
        const struct m0_cors_c *cors;   /* the app's CORS, checked before the checks (Q5) */
        struct m0_bus *bus;
        const struct m0_sockets *sockets;
        const struct m0_lifecycle *life; /* what a thread's make and free read (L1, L3) */
        struct m0_tls *tls;              /* TL1–TL5: NULL when no certificate is configured */
        /* The protocol a connection opening with HTTP/2's preface switches to (HT1), set before
         * the loops start; NULL: none (the unit tests' hosts). */
        const struct m0_proto_ops *h2;
        struct m0_hctx *loops; /* one per loop: its HTTP context, which holds the loop */
        int nloops;
        int done_fd;            /* eventfd: a loop thread ended */
        uint64_t watchdog_usec; /* WATCHDOG_USEC for this process, 0 when off */
        uint32_t tick_ms;       /* M0_APP_TICK_MS when set, else the app's tick_ms (S3) */
        atomic_uint conns;      /* open connections in the process (max_connections) */
        atomic_uint rotate;     /* accept sharing's tie breaker */
        /* Loops that may still hand a connection to another (L4): each lowers it once, when it
         * has closed its listeners at the stop. A stopping loop leaves only once it is 0, so no
         * hand-off is ever posted to a mailbox nobody reads again (X1). */
        atomic_int accepting;
        /* Set by the coordinator when the drain begins, before any loop reads its stop message:
         * a request being answered right then already gets Connection: close (X1). */
        atomic_bool stopping;
};

/* One of the loop's copies of a listener. */
struct m0_lcopy {
        struct m0_io io;
        int fd;
        bool tls; /* a socket named https, or bound for M0_TLS_PORT: its connections are TLS */
        struct m0_hctx *ctx;
};

struct m0_hctx {
        struct m0_loop loop; /* the event loop, which knows nothing of what follows */
        struct m0_serve *serve;
        /* Copies of serve's, which the request path reads (D240). */
        const m0_app *app;
        const struct m0_config *cfg;
        const struct m0_router *router;
        const struct m0_cors_c *cors;
        struct m0_bus *bus;
        int index;
        struct m0_thread thread; /* its state is the app's handler state for this loop */

        /* Connections this loop holds or has been promised (a hand-off on its way): the load
         * accept sharing balances. Written by any accepting loop, read by all. */
        atomic_uint load;
        /* Counters, written by this loop only (m0__count), read at exit and by the metrics. */
        m0_counter passed;   /* connections this loop accepted and handed to another */
        m0_counter received; /* connections handed to this loop by another */
        m0_counter accepted; /* connections this loop accepted itself and kept */
        uint64_t requests;
        m0_counter refused_conns; /* closed at once: over max_connections or no fd left */
        /* TLS (TL6, TL7): the handshakes in progress on this loop (bounded by
         * tls_max_handshakes), and how those that ended ended. Written by this loop only. */
        uint32_t tls_handshaking;
        m0_counter tls_done[2];  /* completed: [0] TLS 1.2, [1] TLS 1.3 */
        m0_counter tls_resumed;  /* ... of which resumed a session */
        m0_counter tls_failed;   /* not TLS, a version or a cipher refused, the peer gone */
        m0_counter tls_timedout; /* not done within tls_handshake_timeout_ms */
        m0_counter tls_refused;  /* closed at once: tls_max_handshakes were in progress */
        /* What the metrics and the access log need (O1, O2): M0_OBSERVE_* bits, fixed at
         * build; requests are timed when any is set. */
        uint8_t observe;
        struct m0_loop_stats stats; /* counted while M0_OBSERVE_METRICS is set */
        struct m0_journal journal;  /* M0_OBSERVE_JOURNAL: entries on their way to journald */
        struct m0_io journal_io;    /* its socket, writable again (D81) */

        struct m0_lcopy *listeners; /* this loop's copies of the listeners */
        size_t nlisten;
        int reserve_fd; /* spare fd, given up to shed a connection on EMFILE */

        bool stopping;
        bool failed;
        uint64_t drain_deadline_ms; /* set at the stop: connections left past it are cut */
        m0_counter cut;             /* connections cut at the drain's bound */
        uint64_t next_tick_ms;

        struct m0_list dead; /* closed during this turn; freed after it (events may name them) */
        uint32_t slice_left; /* requests the connection being served may still run */
        /* The buffer llhttp is parsing now, and whose: callbacks turn pointers into offsets. */
        const char *cur_base;
        size_t cur_len;
        const struct m0_conn *cur_conn; /* NULL between parses */
        struct m0_buf wbuf;  /* responses of the connection being served, written in one go */
        char keep_alive[40]; /* "Keep-Alive: timeout=60\r\n": what a kept answer says (D111) */
        size_t keep_alive_len;

        struct m0_pool pool;
        /* The files this turn opened, closed at its end (SF5, D237); req.files_turn names it. */
        struct m0_fturn files_turn;

        /* streams (S1), the channels they follow (N5) and the bus's queue (B1, D44) */
        struct m0_list streams;     /* of m0_conn, by their stream link */
        struct m0_subs subs;        /* channel -> the streams that follow it */
        uint64_t deliver_stamp;     /* one per frame delivered: a stream is offered it once */
        atomic_bool bus_pending;    /* set by a publisher, cleared by the loop (wakes on 0→1) */
        struct m0_task frames_task; /* frames left in the loop's channel: their place (D85) */
        m0_counter chan_refused;    /* frames this loop's channel refused, being full (B2) */
        uint64_t chan_dropped;      /* transient frames it refused */
        uint64_t replays_ahead;     /* streams whose Last-Event-ID was past the newest id (N3) */
        uint64_t ahead_logged_ms;
        m0_counter chan_closed;    /* streams closed because their loop's channel was full */
        uint64_t chan_logged_ms;   /* when a full channel was last logged */
        m0_counter streams_cut;    /* streams closed because their backlog passed its bound */
        m0_counter streams_unread; /* streams closed at the stop with frames their client had
                                      not taken */
        uint64_t next_heartbeat_ms;
        /* The WebSocket message of the frame this loop last delivered to a WebSocket (WS2):
         * every follower is sent the same text, so a frame is packed once per loop, not once
         * per WebSocket (D216). Keyed by the frame and its id and seq; freed with the loop. */
        struct m0_ws_text {
                const void *frame;
                uint64_t id, seq;
                char *text;
                size_t len;
        } ws_text;

        /* HTTP/2 stream records whose streams closed, kept for the loop's next streams with
         * their small buffers, at most 128 (h2.c, D249); freed with the loop by the function
         * h2.c leaves here (http1/ calls no function of http2/'s by name, LY4). */
        struct m0_link *h2_spare;
        uint32_t h2_nspare;
        void (*h2_spare_free)(struct m0_hctx *x);

        /* The request the loop is serving, read by the watchdog; kept only when it is on. */
        pthread_mutex_t cur_lock;
        char cur[160];

        struct m0_req req;
        struct m0_res res;
        char *rscratch; /* read buffer shared by the loop's connections between requests */
        size_t rscratch_cap;
};

/* The context of the loop `l` serves HTTP on. */
static inline struct m0_hctx *m0__hctx_of(struct m0_loop *l)
{
        return (struct m0_hctx *)(void *)((char *)l - offsetof(struct m0_hctx, loop));
}

/*
 * Make `x` loop `index` of `s` with nothing acquired yet: every descriptor -1, its locks and its
 * thread record set up. It cannot fail, and m0__hctx_destroy() is safe on it from here on, so the
 * host prepares every loop before it builds any.
 */
void m0__hctx_prepare(struct m0_hctx *x, struct m0_serve *s, int index);
/* Acquire what a prepared loop serves with: its pool, epoll set, mailbox, listener copies and
 * buffers. 0, or -errno with whatever was acquired left for m0__hctx_destroy(). */
int m0__hctx_build(struct m0_hctx *x);
/* Both, for a loop on its own (the unit tests). */
int m0__hctx_init(struct m0_hctx *x, struct m0_serve *s, int index);
/* Free what a prepared context holds, whether m0__hctx_build() finished, failed or never ran. */
void m0__hctx_destroy(struct m0_hctx *x);
/* The loop's thread body; `arg` is its struct m0_hctx. */
void *m0__hctx_main(void *arg);
/* One turn of `x`'s loop, waiting at most `timeout_ms` (the unit tests drive a loop so). */
int m0__hctx_run_once(struct m0_hctx *x, int timeout_ms);
/* Post the stop to loop `x` (any thread). 0 or -errno. */
int m0__hctx_post_stop(struct m0_hctx *x);
/* Deliver what a publish flagged for the loop's streams (D44), a turn's worth (D85). */
void m0__hctx_deliver_pending(struct m0_hctx *x);
/* Copy the request loop `x` is serving ("GET /slow"), "" when none. Any thread. */
void m0__loop_request_get(struct m0_hctx *x, char *out, size_t len);

#endif /* M0_HCTX_H */
