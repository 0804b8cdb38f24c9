/* SPDX-License-Identifier: MIT */
/* error.h: error.c, the answers the host makes by itself (SPEC Q4): the app's `error` callback
 * or a built-in body, and a handler's -errno turned into a logged 500. */
#ifndef M0_ERROR_H
#define M0_ERROR_H

#include <stdbool.h>

#include "buf.h"
#include "m0.h"
#include "response.h"

struct m0_hctx;

/* An answer the host makes by itself. */
struct m0_host_answer {
        int status;
        enum m0_conn_mode conn;
        bool head_only;      /* it answers a HEAD: the head alone */
        const char *headers; /* header lines of its own ("Allow: GET, HEAD\r\n"), or NULL */
        size_t headers_len;
        const char *detail;   /* a sentence of the caller's about this refusal, or NULL */
        m0_req *req;          /* the request, when one was read whole; else NULL */
        size_t *ret_body_len; /* when not NULL: set to the body's length, for O1/O2 */
        /* When not NULL, the answer is handed to this as a response (HTTP/2 frames it, HT2)
         * rather than written into `out` as HTTP/1.1's bytes. 0 or -errno. */
        int (*emit)(void *ctx, const m0_res *res, bool head_only);
        void *emit_ctx;
};

/* The short sentence the host's answer `status` carries when its caller has none of its own. */
const char *m0__error_detail(int status);

/* Whether subtype `sub` (n bytes: "json") is a structured syntax suffix (RFC 6838 4.2.8), so
 * that a route of that type takes "…/<x>+json" too. */
bool m0__media_suffix(const char *sub, size_t n);

/* 415's detail for a body that must be of media type `type` (n bytes, "application/json"):
 * "the body must be application/json or a +json type" ("…must be
 * application/x-www-form-urlencoded" for a type that is no suffix), into `out`. The one wording
 * of the refusal, whether a route's content_type, m0_req_json() or m0_req_form_get() made it. */
void m0__error_media_detail(const char *type, size_t n, char *out, size_t len);

/*
 * Fill `res` (reset first) with the host's answer `status`: the app's `error` callback's when it
 * has one and it keeps to its contract, else the built-in body (text/plain, or problem+json under
 * M0_APP_ERRORS_JSON). `detail`: a sentence of the caller's about this refusal, or NULL for the
 * status's own. `headers` (n bytes): lines the host adds whatever the body ("Allow: GET,
 * HEAD\r\n"), or NULL. `req` may be NULL; `state` is the calling thread's handler state. 0, or
 * -ENOMEM with `res` holding the status and what fitted.
 */
int m0__error_fill(const m0_app *app, void *state, m0_req *req, int status, const char *detail,
                   const char *headers, size_t n, m0_res *res);

/*
 * The one path of every answer the host makes by itself (Q4), serialized into `out` on loop `l`
 * with its state: the head's refusals (400, 408, 413, 414, 417, 431), routing's (404, 405 with
 * Allow, 400 for a capture, 413 past a route's bound, 415 for a route's content_type), 500 and
 * 503, through m0__error_fill() with a's lines after the body's own, saying a->conn of the
 * connection. A status below 400 (204 to OPTIONS and to preflights) is no error: no callback, no
 * body, the lines alone. A built-in text answer made without allocating stands in when nothing
 * else can be written. 0 or -ENOMEM.
 */
int m0__res_error(struct m0_hctx *l, const struct m0_host_answer *a, struct m0_buf *out);

/*
 * A handler returned `r` < 0. When it passes on the -errno a helper refused the request with
 * (m0_req_json()'s), the answer is that refusal's status and detail; otherwise a 500, logged
 * with the route's pattern, the method, the path and strerror (journal fields M0_ROUTE=, ERRNO=).
 */
void m0__error_handler_failed(const m0_app *app, void *state, m0_req *req, m0_res *res, int r);

#endif /* M0_ERROR_H */
