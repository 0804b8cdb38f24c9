/* SPDX-License-Identifier: MIT */
/* response.h: response.c, the response builder apps fill and its serialization on the wire
 * (H4, H5). */
#ifndef M0_RESPONSE_H
#define M0_RESPONSE_H

#include <stdbool.h>

#include "buf.h"
#include "m0.h"

struct m0_loop;

struct m0_res {
        bool stream;         /* m0_res_stream() was called on a loop */
        bool stream_refused; /* ... or on a pool thread (P2: 409) */
        bool on_pool;
        int status;
        struct m0_buf head; /* "name: value\r\n" lines the app added */
        unsigned nheaders;
        struct m0_buf body;
};

/* What an answer says of its connection (H1, H7). */
enum m0_conn_mode {
        M0__CONN_KEEP = 0,   /* HTTP/1.1 keep-alive: nothing to say */
        M0__CONN_CLOSE,      /* Connection: close */
        M0__CONN_KEEP_ALIVE, /* an HTTP/1.0 connection kept: Connection: keep-alive */
};

/* An answer the host makes by itself. */
struct m0_host_answer {
        int status;
        enum m0_conn_mode conn;
        bool head_only;      /* it answers a HEAD: the head alone */
        const char *headers; /* header lines of its own ("Allow: GET, HEAD\r\n"), or NULL */
        size_t headers_len;
};

void m0__res_reset(struct m0_res *res);
/* Serialize status line, host headers, app headers and (unless head_only) the body into out. */
int m0__res_serialize(struct m0_loop *l, const struct m0_res *res, bool head_only,
                      enum m0_conn_mode conn, struct m0_buf *out);
/*
 * The one path of every answer the host makes by itself (Q4): the head's refusals (400, 408,
 * 413, 414, 417, 431), routing's (404, 405 with Allow, 204 to OPTIONS and to preflights, 400
 * for a capture, 415), 500 and 503. A status below 400 carries no body; the others a short
 * text/plain one.
 */
int m0__res_error(struct m0_loop *l, const struct m0_host_answer *a, struct m0_buf *out);
/* The length of the body m0__res_error() gives `status` (0 below 400), as the access log's
 * line says it (O2). */
size_t m0__res_error_body_len(int status);
const char *m0__status_reason(int status);

#endif /* M0_RESPONSE_H */
