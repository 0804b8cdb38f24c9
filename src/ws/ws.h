/* SPDX-License-Identifier: MIT */
/* ws.h: ws.c and ws-bus.c, WebSocket over an HTTP/1.1 connection (RFC 6455; SPEC WS1-WS4) or an
 * HTTP/2 stream (RFC 8441): the upgrade's checks and the 101 (or 200), the protocol a connection
 * switches to (struct m0_proto_ops), wslay's event context over what carries its frames, the
 * bounds, the drain, and the bus's events as text messages. The framing is wslay's; m0 has none
 * of its own. */
#ifndef M0_WS_H
#define M0_WS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <wslay/wslay.h>

#include "m0.h"

struct m0_conn;
struct m0_frame;
struct m0_hctx;

/* struct m0_ws's `wait`: what its timer stands for. */
enum {
        M0__WS_WAIT_NONE = 0, /* the 101's rest (HTTP/1.1's own write stall) */
        M0__WS_WAIT_PING,     /* its next ping, or its idle bound */
        M0__WS_WAIT_WRITE,    /* output the client does not take: the write stall */
        M0__WS_WAIT_CLOSE,    /* its Close is out: the client's, within the linger */
};

/*
 * One WebSocket. Its loop's thread alone touches it but for `refs` and `posted`, which any
 * thread sending to it changes, and `closing`, which the loop writes and senders read.
 */
struct m0_ws {
        atomic_uint refs;     /* the connection's, each message on its way, each m0_ws_ref() */
        atomic_size_t posted; /* bytes of messages in the loop's mailbox for it */
        atomic_uint inbox;    /* its messages in the loop's mailbox (a close waits for them) */
        atomic_bool closing;  /* no more sends: its close is asked for, or it is gone */
        struct m0_hctx *loop; /* its loop, for as long as it lives */
        struct m0_conn *c;    /* its connection (a stream's stand-in on HTTP/2); NULL once gone */
        const struct m0_carrier_ops *carrier;
        uint8_t wait; /* M0__WS_WAIT_*: what its timer is filed for */
        wslay_event_context_ptr ctx;
        const m0_ws_callbacks *cb;
        void *state;
        uint64_t last_in_ms;   /* when the client's last byte came */
        uint64_t last_ping_ms; /* when the last ping went */
        uint32_t frags;        /* frames of the message being read (WS3) */
        uint32_t read_left;    /* bytes this turn may still read for it */
        uint16_t code;         /* the close code that ends it, once known */
        bool opened;           /* on_open ran */
        bool in_io;            /* inside wslay: sends are queued, the caller sends them */
        bool broken;           /* the transport failed or the client left */
        bool ended;            /* on_close ran: it is done with its connection */
        bool drain;            /* the stop: 1001 once what is queued is out (WS4) */
        bool close_wait;       /* its Close is out: waiting for the client's */
        bool bus;              /* it follows channels (WS2) */
        uint8_t nhold;         /* bytes in hold */
        uint8_t hold[14];      /* a frame's header, waiting for its payload (D217) */
        bool close_queued;     /* its Close is in wslay's queue: nothing more goes behind it */
        uint16_t close_code;   /* the Close asked for (the app's, or the drain's 1001), that
                                * waits for the messages queued before it; 0 for none */
        char close_reason[124];
        uint64_t cursor; /* ... the newest event id it has, sent or passed over */
};

/* ---- ws.c ---- */

/* The protocol of an upgraded connection. */
extern const struct m0_proto_ops m0__proto_ws;

/* The longest frame sequence one message may be (WS3): more is closed 1009. */
#define M0__WS_MAX_FRAGMENTS 4096

/* Queue `len` bytes as one message of wslay opcode `op` on `ws`, on its loop; -EPIPE, -ENOBUFS
 * (the output bound: then closed 1008) or -ENOMEM. Then send what the transport takes, unless
 * inside wslay. */
int m0__ws_queue(struct m0_ws *ws, uint8_t op, const void *data, size_t len);

/* Send what wslay has now, unless inside wslay or not open yet. */
void m0__ws_flush(struct m0_ws *ws);
/* Close with `code` at once (a failure of m0's: 1011), unless a Close is queued already. */
void m0__ws_close_now(struct m0_ws *ws, uint16_t code, const char *reason);

/* ---- ws-bus.c: the bus's events as text messages (WS2) ---- */

/* The WebSocket's channels into its loop's index, and its replay after `last_event_id` (N2,
 * AP2) queued as messages. 0 or -errno (it is then closed 1011). */
int m0__ws_follow(struct m0_ws *ws, m0_req *req, const m0_res *res);
/* One of the bus's frames to `ws` unless its cursor has passed it: 1 when queued, else 0. */
int m0__ws_event(struct m0_ws *ws, const struct m0_frame *f);
/* Its channels out of the loop's index. */
void m0__ws_unfollow(struct m0_ws *ws);

#endif /* M0_WS_H */
