/* SPDX-License-Identifier: MIT */
/* response.h: response.c, the response builder apps fill and its serialization on the wire
 * (H4, H5). */
#ifndef M0_RESPONSE_H
#define M0_RESPONSE_H

#include <stdbool.h>

#include "buf.h"
#include "m0.h"

struct m0_conn;
struct m0_hctx;
struct m0_fent;

/* An upgrade the handler accepted (m0_res_websocket(), src/ws/): instead of answering, dispatch
 * hands the connection to `begin`, which writes the 101 and switches its protocol (or, on an
 * HTTP/2 stream, answers 200 and gives the stream to it, D230), leaving in `status` what it
 * answered. Set on the loop only; cleared before each handler runs. */
struct m0_upgrade {
        void (*begin)(struct m0_conn *c, m0_req *req, m0_res *res);
        /* ... or, when the handler answered an error after accepting, hands the app's state
         * back (its on_close) */
        void (*drop)(m0_res *res);
        int status;
        const void *cb; /* the protocol's callbacks, and their state */
        void *state;
        char accept[32]; /* Sec-WebSocket-Accept */
};

struct m0_res {
        bool stream;         /* m0_res_stream() or m0_res_subscribe() was called on a loop */
        uint16_t nchans;     /* channels the stream follows (N1) */
        struct m0_buf chans; /* their names, each NUL-terminated, in the order given */
        bool stream_refused; /* ... or on a pool thread (P2: 409) */
        bool on_pool;
        int status;
        struct m0_buf head; /* "name: value\r\n" lines the app added */
        unsigned nheaders;
        struct m0_buf body;
        bool no_compress; /* m0_res_no_compress(): the body goes as it is (SF4, D183) */
        bool coded;       /* the compression of SF4 was decided already (on the pool thread) */
        /* A file's bytes as the body (SF2): [off, off + len) of fd, owned while `on`; sent after
         * the head by the connection (m0__conn_file_begin), or closed by m0__res_file_close. */
        struct {
                bool on;
                bool shared; /* fd is the loop's turn cache's, good until the turn ends (D237) */
                int fd;
                uint64_t off, len;
                struct m0_fent *ent; /* the cache's entry when shared, for its bytes */
        } file;
        m0_req *req; /* the request being answered on the loop (NULL on a pool thread) */
        struct m0_upgrade upgrade;
};

/* What an answer says of its connection (H1, H7). */
enum m0_conn_mode {
        M0__CONN_KEEP = 0,   /* HTTP/1.1 keep-alive: Keep-Alive: timeout=N alone (D111) */
        M0__CONN_CLOSE,      /* Connection: close */
        M0__CONN_KEEP_ALIVE, /* an HTTP/1.0 connection kept: Connection: keep-alive */
};

void m0__res_reset(struct m0_res *res);
/* Append `n` header lines, "Name: value\r\n" each, made by the host from values it checked
 * already (a file's validators and type, D239), as m0_res_header() would have added them one by
 * one. 0, -ENOBUFS past the bounds of a head, or -ENOMEM. */
int m0__res_lines(m0_res *res, const char *lines, size_t len, unsigned n);
/* Close the file res holds as its body, if any (SF2). */
void m0__res_file_close(struct m0_res *res);
/* The value of the first `name` line the handler added (n bytes of a lower-case name), copied
 * NUL-terminated into out; false when there is none or it does not fit. With `out` NULL:
 * whether there is one. */
bool m0__res_head_value(const struct m0_res *res, const char *name, size_t n, char *out,
                        size_t cap);
/* The Keep-Alive line a kept answer of `l` carries for an idle timeout of `idle_ms` (D111):
 * its whole seconds, rounded down, so that a client retires the connection before m0 does. */
void m0__res_keep_alive(struct m0_hctx *l, uint32_t idle_ms);
/* Serialize status line, host headers, app headers and (unless head_only) the body into out;
 * a kept answer carries l's Keep-Alive line. A file body (res->file) is not written: its length
 * is the Content-Length, and its bytes follow the head on the connection. */
int m0__res_serialize(struct m0_hctx *l, const struct m0_res *res, bool head_only,
                      enum m0_conn_mode conn, struct m0_buf *out);
const char *m0__status_reason(int status);

#endif /* M0_RESPONSE_H */
