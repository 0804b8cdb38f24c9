/* SPDX-License-Identifier: MIT */
/* conn.h: one connection on its loop: its transport (transport.h, LY2), the protocol that reads
 * requests from it (struct m0_proto_ops, LY3: HTTP/1.1 today), and the HTTP/1.1 state, with the
 * files that touch it: conn.c (its lifetime, reads and writes), deadlines.c (its deadlines), llhttp-driver.c
 * (llhttp and the requests it finds) and dispatch.c (routing, handlers, the answer). sse.c,
 * accesslog.c and hctx.c reach it too. */
#ifndef M0_CONN_H
#define M0_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <llhttp.h>

#include "buf.h"
#include "list.h"
#include "hctx.h"
#include "loop.h"
#include "transport.h"

struct m0_frame;
struct m0_job;
struct m0_res;
struct m0_tls;
struct m0_sub;

enum m0_phase {
        PH_IDLE = 0, /* between messages */
        PH_HEAD,     /* inside a request head */
        PH_BODY,     /* head complete, reading the body */
};

/*
 * Input lives in the loop's scratch buffer while whole requests arrive in one read; only what
 * must outlive the read (a head in progress, unparsed bytes while the connection is paused) is
 * copied into `rbuf`, which is freed again once it empties. An idle connection owns no buffer.
 * Touched by its loop's thread only.
 */
/*
 * A protocol (LY3): what turns a transport's bytes into requests and answers. The connection
 * calls it for its events; HTTP/2 and WebSocket plug in here. Every protocol hands the app the
 * same m0_req/m0_res (dispatch.c).
 */
struct m0_proto_ops {
        const char *name;
        void (*readable)(struct m0_conn *c); /* the transport has bytes (or an end of file) */
        void (*writable)(struct m0_conn *c); /* the transport takes bytes again */
        void (*timer)(struct m0_conn *c);    /* the connection's timer fired */
        void (*drain)(struct m0_conn *c);    /* the stop: finish what is in flight, then close */
        void (*closed)(struct m0_conn *c);   /* the connection is closing: let go of the loop */
        /* Optional: one of the bus's frames for a connection of this protocol that follows
         * channels (a WebSocket, WS2) rather than being a stream; 1 when it was sent, else 0. */
        int (*event)(struct m0_conn *c, const struct m0_frame *f);
        /* Optional (NULL for HTTP/1.1): take `c` over, `n` bytes read already (at `bytes`) being
         * this protocol's first: HTTP/2 after its preface was seen, or chosen by ALPN (n = 0).
         * 0, or -errno with `c` closed. */
        int (*start)(struct m0_conn *c, const char *bytes, size_t n);
        /* Optional (NULL: HTTP/1.1's bytes into the loop's wbuf): frame the answer `res` to the
         * request being answered (`c->h2_stream`), the head alone when `head_only`; a stream's
         * answer (res->stream) too. 0 or -errno (the caller answers 500 instead). */
        int (*respond)(struct m0_conn *c, const m0_res *res, bool head_only);
        /* Optional: for an event stream that is one stream of a connection rather than the
         * connection (HTTP/2's, HT3): queue `len` bytes of it; 0, or -EPIPE once it is gone.
         * sse.c writes such a stream's bytes through this, ends it after them with `drain` and
         * cuts it with `closed`. */
        int (*send)(struct m0_conn *c, const void *data, size_t len);
        /* Optional (NULL: m0__conn_resume): answers were queued outside the protocol's own
         * reading (a pool job came back): send them and go on. */
        void (*resume)(struct m0_conn *c);
        /* Optional (NULL: the connection itself switches, as HTTP/1.1's 101 does): the request
         * being answered (`c->h2_stream`) becomes a tunnel (RFC 8441, D230): `res`'s head is
         * answered 200 and the stand-in connection returned, a connection of the loop's in name
         * only whose transport reads and writes the stream's DATA; its `proto`, `up` and
         * `upgraded` are the caller's to set, and its first event (EPOLLOUT) comes in a later
         * item of the turn. NULL when the stream was reset meanwhile, or with `res` NULL (the
         * caller has no memory): the stream is then reset. */
        struct m0_conn *(*tunnel)(struct m0_conn *c, const m0_res *res);
};

/* HTTP/1.1 (conn.c). */
extern const struct m0_proto_ops m0__proto_http1;

/*
 * What carries a protocol that took over from another (a WebSocket, D231): its own connection,
 * switched from HTTP/1.1 (ws.c's), or one HTTP/2 stream (RFC 8441, h2.c's m0__h2_carrier), whose
 * stand-in connection reads and writes the stream's DATA through its transport. The protocol
 * reads and writes through `c->tr` either way; this says the rest. The loop's thread.
 */
struct m0_carrier_ops {
        bool wire; /* its transport is the socket's: the loop's bytes in and out count its own */
        /* The protocol wants to read (`rd`) and/or to write (`wr`) next: wait for it. 0 or
         * -errno. */
        int (*want)(struct m0_conn *c, bool rd, bool wr);
        /* Its timer at `deadline` (ms), `wait` saying what for in the protocol's terms. */
        void (*arm)(struct m0_conn *c, uint8_t wait, uint64_t deadline);
        /* Ended now (the carrier broke, a bound passed, a timer ran out), its end already
         * recorded: the carrier closes (the protocol's `closed` may run meanwhile). */
        void (*cut)(struct m0_conn *c);
        /* Ended in order, let go of already: both Closes went, and the server ends its side
         * first (RFC 6455 7.1.1; RFC 8441 5: END_STREAM). */
        void (*finish)(struct m0_conn *c);
};

struct m0_h2;

struct m0_conn {
        struct m0_hctx *loop; /* its loop's HTTP context */
        struct m0_transport tr;
        const struct m0_proto_ops *proto;
        struct m0_io io;   /* in the loop's epoll set */
        bool handshaking;  /* the transport's handshake is not done: the protocol waits */
        bool tls_resumed;  /* the TLS handshake resumed a session (TL7) */
        const char *tls;   /* the TLS version it agreed on ("TLSv1.3"), NULL on plain (TL7) */
        uint32_t events;   /* what the protocol waits for: EPOLLIN, EPOLLOUT or none */
        uint32_t ioevents; /* the epoll interest: `events` and what the transport wants */
        uint8_t rwant;     /* M0_WANT_* of the transport's last read that could not go on */
        uint8_t wwant;     /* ... of its last write */
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
        bool indexed;     /* the current head is cut into the loop's request: indexed, or as
                             far as a walk that refused it went (its bytes hold NULs) */
        bool routed;      /* a request with a body, routed at headers-complete (Q6, H8) */
        bool discard;     /* ... to a host answer: its body is read and dropped */
        int err_status;   /* the status a callback chose when it stopped the parser, or
                             M0__ERR_ANSWERED when it answered already */
        uint32_t tail;    /* the last four bytes parsed: a chunked body must end in CRLF CRLF */

        struct m0_buf body;
        uint64_t body_limit; /* the route's bound on the body being read (Q6) */
        uint64_t body_seen;  /* bytes of it so far, kept or dropped */
        struct m0_buf out;   /* bytes the socket did not take yet */
        size_t out_off;
        /* A file answer's body (SF2), sent after `out` by the transport's sendfile: owned while
         * `on`; nothing more is parsed until it is out (conn.c send_file). */
        struct {
                bool on;
                int fd;
                off_t off;
                uint64_t left;
        } file;
        uint32_t nreq;

        /* Its timer (deadlines.c): filed in a class (enum m0_timer_class) of the loop's timers, at a
         * deadline. Its link is on the context's `dead` once the connection is closed. */
        struct m0_timer timer;
        /* The deadline of the head or body being read (H2), 0 when none is; `read_cls` is
         * M0_TIMER_HEAD or M0_TIMER_BODY. Kept apart from the timer, which may wait on output. */
        uint64_t read_deadline;
        uint8_t read_cls;

        /* On the loop's run queue (D41): work left for a later turn, and the epoll events
         * that turn is to handle. */
        struct m0_task task;

        /* When the loop times requests (M0_OBSERVE_*, D80): the time of the connection's last
         * read, and of the read that brought the current request's first byte. */
        uint64_t read_ns, t_start;

        /* A server-sent event stream (S1): the connection parses nothing more. */
        bool stream;
        uint16_t nsubs;       /* the channels it follows (N1) */
        struct m0_sub *subs;  /* on the loop's index (subs.h), one per channel */
        uint64_t cursor;      /* the newest event id this stream has, sent or passed over */
        uint64_t seq;         /* the bus's sequence when it began: later transient events are its */
        uint64_t stamp;       /* the loop's delivery it was last offered a frame in */
        struct m0_link slink; /* on loop->streams */
        struct m0_treplay *treplay; /* waiting for its replay from the table (D95), or NULL */

        /* Upgraded (WS1): its protocol is another (WebSocket, src/ws/), which `up` is the state
         * of; HTTP/1.1 parses nothing more, and the bytes read behind the request that switched
         * wait in rbuf from rpos for the new protocol. */
        bool upgraded;
        void *up;
        /* HTTP/2 (src/http2/, HT1): its session, NULL on HTTP/1.1; the stream being answered,
         * which a pool job carries there and back; pool jobs in flight (`busy` while any). */
        struct m0_h2 *h2;
        int32_t h2_stream;
        uint32_t jobs;
};

/* A parser callback answered the request itself, then stopped the parser. */
#define M0__ERR_ANSWERED (-1)

/* ---- conn.c: lifetime, reads, writes ---- */

/* Take accepted `fd` onto loop `l` (whose load and the host's count were raised for it). 0, or
 * -ENOMEM after closing fd and lowering both. */
int m0__conn_admit(struct m0_hctx *l, int fd);
/* ... as a TLS connection made with `tls` when it is not NULL (TL1): its handshake first, within
 * tls_handshake_timeout_ms, one of at most tls_max_handshakes in progress on the loop (TL6). */
int m0__conn_admit_tls(struct m0_hctx *l, int fd, struct m0_tls *tls);
/* Handle epoll `events` for `c`, which is being served now (its slice of the turn began). */
void m0__conn_event(struct m0_conn *c, uint32_t events);
/* Its timer's deadline passed: 408, close, or the end of a linger or a drain grace. */
void m0__conn_timer_fire(struct m0_conn *c);
/* Close `c` now; it is freed after the turn (m0__conn_reap), or when its pool job returns. */
void m0__conn_close(struct m0_conn *c);
/* Free the connections closed during the last turn. */
void m0__conn_reap(struct m0_hctx *l);
/* The stop: every connection filed in a timer class finishes what it is answering, then closes
 * (through its protocol's drain). */
void m0__conn_stop_all(struct m0_hctx *l);
/* The drain's bound: every connection still open is closed, and those cut mid-answer counted. */
void m0__conn_cut_all(struct m0_hctx *l);
/* Drain: close `c` now if it is idle and holds no unread byte; otherwise let it finish. */
void m0__conn_stop(struct m0_conn *c);
/* Send `len` bytes on `c` now, or keep them when the socket is full; a connection whose unsent
 * bytes would pass max_output_bytes is closed instead (B2). 0, or -EPIPE when c is gone. */
int m0__conn_send(struct m0_conn *c, const void *data, size_t len);
/* Wait for `ev` (EPOLLIN, EPOLLOUT, both or none), with what the transport wants besides. 0 or
 * -errno. */
int m0__conn_want(struct m0_conn *c, uint32_t ev);
/* Linger (M0_LINGER_MS) or close: the last answer is out. */
void m0__conn_linger(struct m0_conn *c);
/* Answer nothing more: close once the output is out. */
void m0__conn_end(struct m0_conn *c);
/* The answers queued in the loop's wbuf go out, and `c` goes on with the bytes it holds. */
void m0__conn_resume(struct m0_conn *c);
/* The answer whose head was just queued in the loop's wbuf has res's file as its body (SF2):
 * `c` takes the file from `res` and sends it after the head, parsing nothing more meanwhile. */
void m0__conn_file_begin(struct m0_conn *c, struct m0_res *res);

/* For a protocol that upgraded the connection (it waits with m0__conn_want): write what `out`
 * holds (1 all of it is out, 0 the socket is full and EPOLLOUT is asked for, -1 the connection
 * is closed); and hand it back to HTTP/1.1 to close (linger, then close) once the other protocol
 * is done with it. */
int m0__conn_write_out(struct m0_conn *c);
void m0__conn_downgrade_end(struct m0_conn *c);

/* ---- deadlines.c: the connection's deadlines, filed in the loop's timer lists (D6, D53) ---- */

/* File `c` under class `cls`, its deadline counted from now; M0_TIMER_NONE unfiles it. */
void m0__timer_set(struct m0_conn *c, enum m0_timer_class cls);
/* Take `c` out of its timer class, if it is in one. */
void m0__timer_unlink(struct m0_conn *c);
/* The head or body of class `cls` (M0_TIMER_HEAD, M0_TIMER_BODY) begins arriving now. */
void m0__read_begin(struct m0_conn *c, enum m0_timer_class cls);
/* Wait on the deadline of the message being read. */
void m0__wait_read(struct m0_conn *c);
/* Output the client has not taken: the write-stall bound counts from now, unless the message
 * being read must be whole sooner. */
void m0__wait_write(struct m0_conn *c);
uint64_t m0__conn_deadline(const struct m0_conn *c);
/* The connection after `c` in its timer class, or NULL. */
struct m0_conn *m0__conn_timer_next(const struct m0_conn *c);

/* ---- llhttp-driver.c: llhttp over the connection's bytes, and each request it completes ---- */

/* Set up `c`'s parser with m0's callbacks (H1: no lenient flag). */
void m0__parser_init(struct m0_conn *c);
/* `c` is served now: it may run up to slice_requests requests before the loop turns to others. */
void m0__slice_begin(struct m0_conn *c);
/*
 * Parse and answer what `base[pos..len)` holds. Returns how far parsing got. Stops early when
 * the connection is closing, its answers pass max_output_bytes, or its slice of the turn is
 * spent (the rest waits, unparsed).
 */
size_t m0__conn_parse(struct m0_conn *c, char *base, size_t len, size_t pos);

/* ---- dispatch.c: the one path from a complete request to its answer ---- */

/* What routing reads of a request (T1, Q5, Q6): its method and path, and its fields, from the
 * loop's indexed request or, for a request with a body at headers-complete, from its head. */
struct m0_rview {
        int method; /* llhttp's number */
        const char *path;
        size_t path_len;
        m0_req *req;      /* indexed: its fields through m0_req_header() */
        const char *head; /* else the head m0__http_head_parse() accepted */
        size_t head_len;
};

/* What a request is to get: its handler, or an answer of the host's. */
struct m0_decision {
        int status;     /* 0: run `fn`; else the host answers this (204, 400, 404, 405, 415) */
        bool preflight; /* ... to a CORS preflight (Q5) */
        bool blocking;  /* `fn` is M0_ROUTE_BLOCKING */
        m0_handler_fn fn;
        uint64_t body_limit; /* the body it may have (Q6) */
        struct m0_match m;
};

/*
 * Route request `v` (T1-T3) by loop `l`'s routes and CORS and decide what it gets (Q5;
 * `has_body`: it has one, whose type is then checked). With `bind`, the route and its captures are bound into that request;
 * without, the captures are only checked. The loop's thread.
 */
void m0__route_decide(const struct m0_hctx *l, const struct m0_rview *v, m0_req *bind,
                      bool has_body, struct m0_decision *d);
/* Queue the host's answer of `d` to `v` in the loop's wbuf: its Allow and CORS lines, through
 * m0__res_error(); `conn` closing the connection closes it. */
void m0__route_answer(struct m0_conn *c, const struct m0_rview *v, const struct m0_decision *d,
                      bool is_head, enum m0_conn_mode conn);

/* The request llhttp-driver.c just completed: route it, run its handler on the loop or hand it to the
 * pool, and queue its answer in the loop's wbuf. */
void m0__conn_dispatch(struct m0_conn *c);
/* Route request `req` (indexed, its body in place), its method llhttp's number `method`, and
 * answer it: the host's answer, its handler on the loop, or the pool. Every protocol's requests
 * come through here (LY3); `has_body`: its type is checked (Q5). */
void m0__dispatch(struct m0_conn *c, m0_req *req, int method, bool has_body, bool is_head,
                  enum m0_conn_mode conn);
/* Refuse the request being read with `status`, Connection: close, and read no further. */
void m0__conn_refuse(struct m0_conn *c, int status);
/* The loop's side of a pool job: it came back through the mailbox with its answer. */
void m0__conn_job_done(struct m0_job *job);
/* A job that came back to a loop that is gone: free it, and its connection if that was closed. */
void m0__job_discard(struct m0_job *job);

#endif /* M0_CONN_H */
