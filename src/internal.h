/* SPDX-License-Identifier: MIT */
/* internal.h: what the modules of libm0 share and nothing outside the library sees. */
#ifndef M0_INTERNAL_H
#define M0_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include <llhttp.h>

#include "m0.h"

struct m0_host;
struct m0_loop;
struct m0_conn;

#define M0__EXIT_OK 0
#define M0__EXIT_FAIL 1
#define M0__EXIT_USAGE 2
#define M0__EXIT_CONFIG 78

#define M0__ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define M0__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define M0__LIKELY(x) __builtin_expect(!!(x), 1)

/* ---- buf.c: a growable byte buffer ---- */

struct m0_buf {
        char *data;
        size_t len;
        size_t cap;
};

/* Make room for `extra` more bytes. 0 or -ENOMEM. */
int m0__buf_reserve(struct m0_buf *b, size_t extra);
int m0__buf_append(struct m0_buf *b, const void *data, size_t len);
int m0__buf_vprintf(struct m0_buf *b, const char *fmt, va_list ap);
int m0__buf_printf(struct m0_buf *b, const char *fmt, ...) M0_PRINTF(2, 3);
void m0__buf_free(struct m0_buf *b);

/* ---- time ---- */

/* Monotonic milliseconds. */
uint64_t m0__now_ms(void);

/* ---- config.c ---- */

enum m0_source {
        M0_SRC_DEFAULT = 0,
        M0_SRC_ENV,
        M0_SRC_FLAG,
};

#define M0__KNOBS_MAX 40
/* The largest M0_REPLAY_FRAMES; a stored ring with more slots is none this host made (D46). */
#define M0__REPLAY_FRAMES_MAX 1048576u

/* Every knob of the host. Filled once by m0__config_parse() on the coordinator, read-only after. */
struct m0_config {
        char host[256];
        uint32_t port;
        uint32_t threads; /* resolved: `auto` is turned into a count */
        bool threads_auto;
        uint32_t blocking_threads;
        uint32_t compute_threads;
        uint32_t workers;
        uint32_t max_keepalive_requests;
        uint32_t sse_heartbeat_ms;
        uint32_t app_tick_ms;
        bool access_log;
        bool accept_share;
        uint32_t drain_timeout_ms;
        uint32_t max_head_bytes;
        uint32_t max_uri_bytes;
        uint32_t max_header_fields;
        uint64_t max_body_bytes;
        uint32_t header_timeout_ms;
        uint32_t body_timeout_ms;
        uint32_t idle_timeout_ms;
        uint32_t max_connections;
        uint32_t max_output_bytes;
        uint32_t linger_ms;
        uint32_t drain_idle_ms;
        uint32_t replay_frames;
        uint32_t channel_frames;
        uint32_t slice_requests;
        uint32_t turn_budget_ms;
        bool doctor;
        unsigned char sources[M0__KNOBS_MAX]; /* enum m0_source per knob, in table order */
};

enum m0_config_result {
        M0_CONFIG_SERVE = 0, /* go on */
        M0_CONFIG_HELP,      /* --help printed; exit 0 */
        M0_CONFIG_VERSION,   /* --version printed; exit 0 */
        M0_CONFIG_USAGE,     /* usage error; exit 2 */
        M0_CONFIG_REFUSED,   /* an environment value did not parse; exit 78 */
};

struct m0_knob;

/*
 * Parse flags (argv) over M0_* variables (envp) over defaults into *cfg. On USAGE/REFUSED,
 * `err` holds the one line naming the problem. `help`/`version` output goes to `out`.
 */
enum m0_config_result m0__config_parse(struct m0_config *cfg, const char *app_name, int argc,
                                       char **argv, char **envp, FILE *out, char *err,
                                       size_t err_len);
/* The usage text, printed with usage errors and --help. */
void m0__config_usage(FILE *out, const char *app_name);
/* Source of the knob whose flag is `flag` ("threads") in the last parse. */
enum m0_source m0__config_source(const struct m0_config *cfg, const char *flag);
const char *m0__source_name(enum m0_source s);
/* CPUs this process may run on: affinity, then cgroup v2 cpu.max quota. At least 1. */
unsigned m0__cpus_available(void);
/* Walk every knob: name (flag without dashes), env variable, rendered value, source. */
void m0__config_each(const struct m0_config *cfg,
                     void (*fn)(void *ud, const char *flag, const char *env, const char *value,
                                enum m0_source src),
                     void *ud);

/* ---- log.c ---- */

/* Message ids (J1), one per event a person acts on; the catalog explains them. */
#define M0_MID_READY "9b3b6f1e2d4c4a7e8f0a1b2c3d4e5f60"
#define M0_MID_REFUSED "9b3b6f1e2d4c4a7e8f0a1b2c3d4e5f61"
#define M0_MID_LOOP_CRASHED "9b3b6f1e2d4c4a7e8f0a1b2c3d4e5f62"
#define M0_MID_LOOP_STUCK "9b3b6f1e2d4c4a7e8f0a1b2c3d4e5f63"
#define M0_MID_DRAIN_TIMEOUT "9b3b6f1e2d4c4a7e8f0a1b2c3d4e5f64"

void m0__log_init(const char *app_name);
/* Whether lines go to journald as structured entries (J1). */
bool m0__log_journal(void);
/* Log one line; `loop` is -1 when no loop speaks; `mid` may be NULL. Thread-safe. */
void m0__log(int prio, int loop, const char *mid, const char *fmt, ...) M0_PRINTF(4, 5);

/* ---- notify.c ---- */

/* Send `state` to $NOTIFY_SOCKET when set; 0, or -errno. A no-op returning 0 without it. */
int m0__notify(const char *state);

/* ---- activation.c ---- */

struct m0_listener {
        int fd;
        char name[64];
        int family;
        char where[128]; /* "127.0.0.1:8080", "/run/m0/app.sock" */
};

struct m0_sockets {
        struct m0_listener *v;
        size_t n;
        bool passed;  /* came from systemd (LISTEN_FDS) */
        int store_fd; /* the fd store's event state (named M0__STORE_NAME), or -1 */
};

/*
 * Take the sockets systemd passed; `unset_env` clears LISTEN_*. Checks each is a listening
 * stream socket; on a bad one fills `err` and returns -ENOTSOCK (or another -errno).
 */
int m0__sockets_take(struct m0_sockets *s, char *err, size_t err_len);
/* Bind host:port when nothing was passed. 0 or -errno with `err` filled. */
int m0__sockets_bind(struct m0_sockets *s, const char *host, uint32_t port, char *err,
                     size_t err_len);
/*
 * Whether serving could bind host:port when nothing was passed, without taking the port: the
 * name resolves as m0__sockets_bind() resolves it, and one of its addresses is this machine's
 * (bound once on port 0, never listened on, closed at once; D47). 0, or -errno with `err`
 * filled as serving's line would be, for the `listen-sockets` check (R2, D1).
 */
int m0__sockets_check_address(const char *host, uint32_t port, char *err, size_t err_len);
/* What a refusal about the address serving binds tells the operator to do. */
#define M0__LISTEN_FIX "set --host/--port or M0_HOST/M0_PORT"
void m0__sockets_close(struct m0_sockets *s);

/* ---- crash.c ---- */

/* Install the fatal-signal handlers (J2) once, before any thread exists. */
void m0__crash_install(struct m0_host *h, bool journal);
/* Name this thread for crash reports and give it an alternate signal stack. */
void m0__thread_identify(struct m0_loop *l, m0_thread_kind kind, int loop, int thread);
void m0__thread_forget(void);
/* The loop this thread serves (a loop or one of its pool threads), or -1. */
int m0__thread_loop(void);
/* The loop whose own thread this is; NULL on any other thread (a pool thread included). */
struct m0_loop *m0__thread_loop_self(void);

/* ---- caps.c ---- */

/* Drop every capability (bounding, ambient, effective, permitted, inheritable) and set
 * no-new-privs. 0 or -errno with `err` filled. */
int m0__caps_drop(char *err, size_t err_len);
/* Before binding: keep CAP_NET_BIND_SERVICE (when held) and nothing else (K1). */
int m0__caps_keep_bind(void);
/* The capabilities held now, as text ("=" when none). */
void m0__caps_describe(char *out, size_t len);

/* ---- checks.c ---- */

struct m0_check {
        const char *name;
        bool ok;
        char detail[256];
        char fix[256];
};

struct m0_host;
/* Run the host's checks (R2) in order; returns the index of the first failure or -1. */
int m0__checks_run(struct m0_host *h, struct m0_check *out, size_t n_out, size_t *ret_n);
/* Raise RLIMIT_NOFILE's soft limit to what the connection limit needs (checked by `limits`). */
int m0__limits_raise(struct m0_host *h);
#define M0__CHECKS_MAX 16

/* ---- bus.c ---- */

/* One published event, formatted once: bytes[start, end) is "id: N\nevent: T\ndata: …\n\n".
 * Immutable once published; reference-counted by the ring, and by the channels and loops that
 * hold it. */
struct m0_frame {
        atomic_uint refs;
        uint64_t id;
        int skip; /* the loop that does not deliver it, or -1 */
        size_t start, end;
        char bytes[];
};

/*
 * One loop's channel (B1, D44, D45): references to the frames published for it since it last
 * took them, oldest first, at most `chan_cap`. A frame that finds it full is refused, and so is
 * every one after it until the loop has taken the whole queue and learnt of the refusal, which
 * it answers by closing the streams that would miss them. Written by publishers, emptied by its
 * loop, both under the bus lock.
 */
struct m0_chan {
        struct m0_frame **q; /* q[(head + i) % cap], i < count */
        size_t head, count;
        uint64_t refused;      /* frames refused since the loop last took the queue */
        uint64_t refused_from; /* the first of them */
        uint64_t refused_last; /* the newest of them */
};

/* What a loop learns from its channel when the frames it took end where refusals began. */
struct m0_refusal {
        uint64_t count, from, last; /* count 0: none */
};

struct m0_bus {
        pthread_mutex_t lock;
        struct m0_frame **ring; /* frame of id i at ring[i % cap] */
        size_t cap, count;
        uint64_t last_id;      /* ids are contiguous: the next one is last_id + 1 */
        struct m0_chan *chans; /* one per loop */
        int nchans;
        size_t chan_cap;
        void (*wake)(void *ud, int skip_loop);
        void *wake_ud;
        struct m0_store *store; /* the memfd in systemd's fd store (B4), or NULL */
};

/* store.c: B4. The fd store entry's name, in LISTEN_FDNAMES and FDNAME=. */
#define M0__STORE_NAME "m0-bus"
struct m0_store;
/*
 * Take the event state back from `passed_fd` (-1: none was passed) into the bus, or start a new
 * one, and hand it to systemd's fd store. A passed store is checked whole first (D46); one that
 * does not fit is removed from the fd store and replaced. Takes `passed_fd` in every case. `msg`
 * says what happened, for the log. 0, or -errno when no new state could be made.
 */
int m0__store_open(struct m0_host *h, int passed_fd, char *msg, size_t msg_len);
/* Record a frame just published (under the bus lock). */
void m0__store_note(struct m0_bus *b, const struct m0_frame *f);
void m0__store_close(struct m0_bus *b);

extern struct m0_bus *m0__bus_global; /* set once before any thread exists */
/* A bus keeping `cap` frames for replay, with `nchans` channels of `chan_cap` frames each. */
int m0__bus_init(struct m0_bus *b, size_t cap, int nchans, size_t chan_cap);
void m0__bus_destroy(struct m0_bus *b);
int64_t m0__bus_publish(struct m0_bus *b, const char *event, const char *data, int skip_loop);
/*
 * Take references to up to `max` kept frames with ids after `after`, oldest first. *ret_last is
 * the id the caller is now up to; *ret_lost counts frames after `after` no longer kept.
 */
size_t m0__bus_take(struct m0_bus *b, uint64_t after, struct m0_frame **out, size_t max,
                    uint64_t *ret_last, uint64_t *ret_lost);
/*
 * Take references to up to `max` frames from channel `chan`, oldest first (the loop's thread).
 * When they end where the channel began refusing frames, *ret_refused says which it refused
 * (count 0 otherwise), and the channel takes frames again.
 */
size_t m0__bus_take_channel(struct m0_bus *b, int chan, struct m0_frame **out, size_t max,
                            struct m0_refusal *ret_refused);
uint64_t m0__bus_last(struct m0_bus *b);
void m0__frame_unref(struct m0_frame *f);

/* ---- the loop (loop.c, conn.c, http.c, response.c) ---- */

struct m0_loop;
struct m0_conn;

enum m0_msg_kind {
        M0_MSG_CONN = 1, /* a connection handed over by another loop's accept */
        M0_MSG_STOP,     /* the drain begins */
        M0_MSG_JOB,      /* a pool thread finished a job of this loop's */
};

/* One mailbox entry; allocated by the sender, freed by the receiving loop. */
struct m0_msg {
        struct m0_msg *next;
        enum m0_msg_kind kind;
        int fd;
        struct m0_job *job;
};

/* The request as handlers see it; one per loop, reused. */
struct m0_header {
        const char *name;
        const char *value;
};

struct m0_req {
        const char *method;
        const char *path;
        const char *query;
        struct m0_header *headers;
        size_t nheaders;
        const char *body;
        size_t body_len;
        int loop;
        int thread;
        struct m0_buf arena; /* decoded query values */
};

struct m0_res {
        bool stream;         /* m0_res_stream() was called on a loop */
        bool stream_refused; /* ... or on a pool thread (P2: 409) */
        bool on_pool;
        int status;
        struct m0_buf head; /* "name: value\r\n" lines the app added */
        unsigned nheaders;
        struct m0_buf body;
};

/* Intrusive list of connections, ordered by deadline within one timeout class. */
struct m0_conn_list {
        struct m0_conn *head;
        struct m0_conn *tail;
};

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

enum m0_phase {
        PH_IDLE = 0, /* between messages */
        PH_HEAD,     /* inside a request head */
        PH_BODY,     /* head complete, reading the body */
};

/*
 * Input lives in the loop's scratch buffer while whole requests arrive in one read; only what
 * must outlive the read (a head in progress, unparsed bytes while the connection is paused) is
 * copied into `rbuf`, which is freed again once it empties. An idle connection owns no buffer.
 */
struct m0_conn {
        struct m0_loop *loop;
        int fd;
        uint32_t events; /* current epoll interest */
        llhttp_t parser;

        char *rbuf;
        uint32_t rlen, rcap;
        uint32_t rpos;     /* where parsing resumes in rbuf */
        uint32_t req_off;  /* first byte of the current request in the buffer being parsed */
        uint32_t head_len; /* valid in PH_BODY */
        uint8_t phase;
        bool req_started; /* req_off is known */
        bool closing;     /* answer no more; close once the output is out */
        bool lingering;   /* output out, write side shut; dropping the client's bytes */
        bool busy;        /* a pool thread is answering the current request */
        bool indexed;     /* the current head is already indexed into the loop's request */
        int err_status;   /* the status a callback chose when it stopped the parser */
        uint32_t tail;    /* the last four bytes parsed: a chunked body must end in CRLF CRLF */

        struct m0_buf body;
        struct m0_buf out; /* bytes the socket did not take yet */
        size_t out_off;
        uint32_t nreq;

        enum m0_timer_class tcls;
        uint64_t deadline;
        /* The deadline of the head or body being read (H2), 0 when none is; `read_cls` is
         * M0_TIMER_HEAD or M0_TIMER_BODY. Kept apart from the timer, which may wait on output. */
        uint64_t read_deadline;
        uint8_t read_cls;
        struct m0_conn *tprev, *tnext;

        /* On the loop's run queue (D41): work left for a later turn, and the epoll events
         * that turn is to handle. */
        bool queued;
        uint32_t qevents;
        struct m0_conn *qprev, *qnext;

        /* A server-sent event stream (S1): the connection parses nothing more. */
        bool stream;
        uint64_t cursor;               /* the last event id this stream was sent */
        struct m0_conn *sprev, *snext; /* the loop's streams */
};

/* A blocking request on its way to a pool thread and back (P1). Owned by the pool while queued
 * and running, by the loop once posted back. */
struct m0_job {
        struct m0_job *next;
        struct m0_conn *conn;
        struct m0_loop *loop;
        m0_handler_fn fn;
        bool is_head;
        bool keep_alive;
        int rc;
        struct m0_req req; /* points into `mem` */
        struct m0_res res; /* built on the pool thread */
        char *mem;
};

/* One pool thread of one loop. */
struct m0_pool_thread {
        struct m0_loop *loop;
        int index;
        pthread_t thread;
        bool started;
        void *state;
        atomic_bool busy_past_bound;
};

/* A loop's pool: its threads share one queue. */
struct m0_pool {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        struct m0_job *head, *tail;
        bool stop;
        int nthreads;
        struct m0_pool_thread *threads;
};

struct m0_loop {
        struct m0_host *host;
        int index;
        pthread_t thread;
        bool started;
        int epfd;

        /* mailbox: any thread pushes under `mb_lock`; the loop drains. Woken on empty→non-empty. */
        int mb_fd;
        pthread_mutex_t mb_lock;
        struct m0_msg *mb_head;
        struct m0_msg *mb_tail;

        /* Connections this loop holds or has been promised (a hand-off on its way): the load
         * accept sharing balances. Written by any accepting loop, read by all. */
        atomic_uint load;
        /* Counters, written by this loop only, read at exit. */
        uint64_t passed;   /* connections this loop accepted and handed to another */
        uint64_t received; /* connections handed to this loop by another */
        uint64_t accepted; /* connections this loop accepted itself and kept */
        uint64_t requests;
        uint64_t refused_conns; /* closed at once: over max_connections or no fd left */

        int *listen_fds; /* this loop's copies of the listeners */
        size_t nlisten;
        int reserve_fd; /* spare fd, given up to shed a connection on EMFILE */

        void *state; /* the app's handler state for this loop */
        bool stopping;
        bool failed;
        uint64_t drain_deadline_ms; /* set at the stop: connections left past it are cut */
        uint64_t cut;               /* connections cut at the drain's bound */

        struct m0_conn_list timers[M0_TIMER_N];
        uint64_t now_ms;
        time_t date_sec;
        char date[40]; /* "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n" */
        size_t date_len;
        uint64_t next_tick_ms;

        /* The turn (D41): one epoll batch, after the run queue, within a budget. */
        uint64_t turn_budget_ms;  /* turn-budget-ms, at most an eighth of the watchdog interval */
        uint64_t turn_end_ms;     /* this turn's budget ends here, on the coarse clock */
        bool turn_served;         /* a connection was served in this turn */
        uint32_t slice_left;      /* requests the connection being served may still run */
        struct m0_conn_list runq; /* connections with work left for the next turn, in order */
        size_t runq_len;

        struct m0_conn *dead; /* closed during this batch; freed after it (events may name them) */
        const char *
                cur_base; /* the buffer llhttp is parsing now: callbacks turn pointers into offsets */
        size_t cur_len;
        struct m0_buf wbuf; /* responses of the connection being served, written in one go */

        struct m0_pool pool;

        /* streams (S1) and the bus channel (B1) */
        struct m0_conn *streams;
        atomic_bool bus_pending; /* set by a publisher, cleared by the loop (wakes on 0→1) */
        uint64_t chan_refused;   /* frames this loop's channel refused, being full (B2) */
        uint64_t chan_closed;    /* streams closed because their loop's channel was full */
        uint64_t chan_logged_ms; /* when a full channel was last logged */
        uint64_t streams_cut;    /* streams closed because their backlog passed its bound */
        uint64_t streams_unread; /* streams closed at the stop with frames their client had not
                                    taken */
        uint64_t next_heartbeat_ms;

        /* The request the loop is serving, read by the watchdog; kept only when it is on. */
        pthread_mutex_t cur_lock;
        char cur[160];

        struct m0_req req;
        struct m0_res res;
        char *rscratch; /* read buffer shared by the loop's connections between requests */
        size_t rscratch_cap;
        atomic_uint_fast64_t heartbeat;
};

/* pool.c */
int m0__pool_init(struct m0_pool *p, struct m0_loop *l, int nthreads);
void m0__pool_destroy(struct m0_pool *p);
/* Queue `job` for the loop's pool (the loop's thread). */
void m0__pool_submit(struct m0_pool *p, struct m0_job *job);
/* Tell the pool's threads to finish the queue and end. Any thread. */
void m0__pool_stop(struct m0_pool *p);
void *m0__pool_main(void *arg);
/* Copy a request the loop indexed into a job of its own; NULL on ENOMEM. */
struct m0_job *m0__job_new(struct m0_conn *c, const m0_req *req);
void m0__job_free(struct m0_job *job);
/* The loop's side: the job came back through the mailbox. */
void m0__conn_job_done(struct m0_loop *l, struct m0_job *job);
/* A job that came back to a loop that is gone: free it, and its connection if that was closed. */
void m0__job_discard(struct m0_job *job);

/* loop.c */
int m0__loop_init(struct m0_loop *l, struct m0_host *h, int index);
void m0__loop_destroy(struct m0_loop *l);
/* Push a message to loop `l` (any thread). 0 or -errno. */
int m0__loop_post(struct m0_loop *l, struct m0_msg *m);
/* One turn (D41): wait up to `timeout_ms` for events (not at all while the run queue holds
 * work), serve the run queue, then the events, within the turn's budget; then timers,
 * heartbeats and reaping. Returns how many events there were, or -errno. The loop's thread (or a
 * test driving it). */
int m0__loop_run_once(struct m0_loop *l, int timeout_ms);
/* Whether this turn's budget is spent, once a connection was served in it (the coarse clock). */
bool m0__turn_spent(struct m0_loop *l);
/* Give `c` its turn later: to the run queue's tail (unless on it already) with `events`. */
void m0__turn_defer(struct m0_conn *c, uint32_t events);
/* Take `c` off the run queue (it is closing). */
void m0__turn_forget(struct m0_conn *c);
/* The loop's thread body. */
void *m0__loop_main(void *arg);
void m0__loop_date(struct m0_loop *l);
/* Copy the request loop `l` is serving ("GET /slow"), "" when none. Any thread. */
void m0__loop_request_get(struct m0_loop *l, char *out, size_t len);

/* conn.c */
int m0__conn_admit(struct m0_loop *l, int fd);
void m0__conn_event(struct m0_conn *c, uint32_t events);
void m0__conn_timer_fire(struct m0_conn *c);
void m0__conn_close(struct m0_conn *c);
/* Free the connections closed during the last batch of events. */
void m0__conn_reap(struct m0_loop *l);
/* Drain: close `c` now if it is idle and holds no unread byte; otherwise let it finish. */
void m0__conn_stop(struct m0_conn *c);
void m0__timer_set(struct m0_conn *c, enum m0_timer_class cls);
uint64_t m0__conn_deadline(const struct m0_conn *c);
struct m0_conn *m0__conn_timer_next(const struct m0_conn *c);

/* Send `len` bytes on `c` now, or keep them when the socket is full; a connection whose unsent
 * bytes would pass max_output_bytes is closed instead (B2). 0, or -EPIPE when c is gone. */
int m0__conn_send(struct m0_conn *c, const void *data, size_t len);
/* Answer nothing more: close once the output is out. */
void m0__conn_end(struct m0_conn *c);

/* sse.c */
/* A stream's head (status line, the host's and the app's headers, the blank line) into `w`;
 * `close` adds Connection: close. Alone, it answers a HEAD on a stream route (H6). */
int m0__sse_head(struct m0_loop *l, const m0_res *res, bool close, struct m0_buf *w);
/* After the handler called m0_res_stream(): the stream's head, replay, and subscription. */
void m0__sse_begin(struct m0_conn *c, const m0_req *req, const m0_res *res);
/* A publish woke this loop: deliver the new frames to its streams. */
void m0__sse_deliver(struct m0_loop *l);
void m0__sse_heartbeat(struct m0_loop *l);
/* The drain: ": bye" to every stream, then close. */
void m0__sse_farewell(struct m0_loop *l);
void m0__sse_unlink(struct m0_conn *c);
void m0__bus_wake_loops(void *ud, int skip_loop);

/* accept.c */
void m0__accept_ready(struct m0_loop *l, int lfd);

/* http.c */
/* 1 for the bytes RFC 9110 allows in a token (a field name, a method). */
extern const unsigned char m0__tchar[256];
/* 1 for the bytes RFC 9110 allows in a field value: HTAB, SP, VCHAR, obs-text. */
extern const unsigned char m0__vchar[256];
extern const llhttp_settings_t m0__http_settings;

/*
 * Check a complete request head at `head` for what H3 forbids and llhttp may let through, and
 * index it. Returns 0 and the head's length in *ret_len, or an HTTP status (400, 414, 431)
 * for a head that must be refused. When `req` is non-NULL the head is also cut into
 * NUL-terminated strings and indexed into req (headers up to `max_fields`).
 */
int m0__http_head_parse(char *head, size_t avail, const struct m0_config *cfg, struct m0_req *req,
                        size_t *ret_len);

/* response.c */
void m0__res_reset(struct m0_res *res);
/* Serialize status line, host headers, app headers and (unless head_only) the body into out. */
int m0__res_serialize(struct m0_loop *l, const struct m0_res *res, bool head_only, bool close,
                      struct m0_buf *out);
/* A host-made error answer (400, 408, 413, 414, 431, 500, 503) with Connection: close. */
int m0__res_error(struct m0_loop *l, int status, struct m0_buf *out);
const char *m0__status_reason(int status);

/* ---- producer.c ---- */

struct m0_producer {
        pthread_t thread;
        bool started;
        void *state;
        atomic_bool stop;
        atomic_bool in_step; /* the app's step is running: named if it outlives the drain */
        uint64_t *beats;     /* each loop's heartbeat at the watchdog's last look */
        bool *stuck;
};

bool m0__producer_needed(const struct m0_host *h);
void *m0__producer_main(void *arg);

/* ---- compute.c ---- */

#define M0__THREAD_COMPUTE 3 /* a compute thread, beside the kinds of m0_thread_kind */

struct m0_pjob;
struct m0_compute {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        struct m0_pjob *head, *tail; /* calls whose items are not all taken yet */
        bool stop;
        int nthreads;
        pthread_t *threads;
        bool *started;
};

/* Start the compute pool (after the barrier); 0 or -errno. */
int m0__compute_start(struct m0_host *h);
/* No new jobs reach the pool (they run inline); its threads end once the queue is empty. */
void m0__compute_stop(struct m0_host *h);
/* Join the compute threads by `deadline`; returns how many are still running. */
int m0__compute_join(struct m0_host *h, const struct timespec *deadline);

/* ---- host.c ---- */

struct m0_host {
        const m0_app *app;
        struct m0_config cfg;
        struct m0_sockets sockets;
        struct m0_loop *loops;
        int nloops;
        atomic_uint conns;  /* open connections in the process (max_connections) */
        atomic_uint rotate; /* accept sharing's tie breaker */
        /* Loops that may still hand a connection to another (L4): each lowers it once, when it
         * has closed its listeners at the stop. A stopping loop leaves only once it is 0, so no
         * hand-off is ever posted to a mailbox nobody reads again (X1). */
        atomic_int accepting;

        /* The make-barrier (L1, L3). */
        pthread_mutex_t lock;
        pthread_cond_t cond;
        int reported;
        int failed_loop;     /* 1 once a make failed, -1 */
        char failed_who[64]; /* "loop 1", "loop 0 pool thread 1", "the producer" */
        char failed_msg[256];
        enum { M0_GATE_WAIT, M0_GATE_GO, M0_GATE_ABORT } gate;

        int done_fd; /* eventfd: a loop thread ended */
        struct m0_bus bus;
        struct m0_producer producer;
        struct m0_compute compute;
        uint64_t watchdog_usec; /* WATCHDOG_USEC for this process, 0 when off */
        uint32_t tick_ms;       /* M0_APP_TICK_MS when set, else the app's tick_ms (S3) */
        /* Set by the coordinator when the drain begins, before any loop reads its stop message:
         * a request being answered right then already gets Connection: close (X1). */
        atomic_bool stopping;
        char sockets_err[256]; /* why a passed socket cannot be served; "" when all are fine */
};

/* m0_handler_info's loop_handler_max_ms: a quarter of the watchdog's interval, 0 without one. */
static inline unsigned m0__loop_handler_max_ms(const struct m0_host *h)
{
        return (unsigned)(h->watchdog_usec / 4000);
}

/* doctor.c: print the doctor's report (D1); returns the exit code serving would return. */
int m0__doctor(struct m0_host *h, const struct m0_check *checks, size_t n, int first, FILE *out);

/*
 * Report the outcome of a thread's `make` and wait at the barrier (L1, L3). `who` names the
 * thread ("loop 1"). Returns true when every handler was built and serving begins.
 */
bool m0__barrier_wait(struct m0_host *h, const char *who, int make_r, const char *why);
/* Record the request this thread is serving (NULL when none): the watchdog and crash reports
 * name it. */
void m0__thread_request_set(struct m0_host *h, const char *method, const char *path);

/*
 * Find the handler for a request: the route table, then the app's dispatch. NULL when nothing
 * matches, with *ret_status 404 or 405. *ret_blocking tells whether the route is M0_ROUTE_BLOCKING.
 */
m0_handler_fn m0__app_route(const m0_app *app, const m0_req *req, bool is_head, bool *ret_blocking,
                            int *ret_status);
/* Run `fn` (NULL: answer *status) and turn a failure into a 500. */
void m0__app_run(const m0_app *app, m0_handler_fn fn, int status, m0_req *req, m0_res *res,
                 void *state);

#endif /* M0_INTERNAL_H */
