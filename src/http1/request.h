/* SPDX-License-Identifier: MIT */
/* request.h: request.c, the request as handlers see it: its accessors, its parameters (query,
 * form, cookies) and what its helpers leave behind until the handler returns. */
#ifndef M0_REQUEST_H
#define M0_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "m0.h"
#include "route.h"
#include "util.h"

/* The request as handlers see it; one per loop, reused. */
struct m0_header {
        const char *name;
        const char *value;
};

/* What a helper refused, for the host to answer when the handler passes its -errno on (Q3). */
struct m0_req_refusal {
        int err;    /* the -errno the helper returned; 0: none */
        int status; /* the answer it stands for: 400, 415 */
        char detail[256];
        const char *headers; /* "Name: value\r\n" lines the answer carries (a 426's), or NULL */
};

struct m0_req {
        const char *method;
        const char *path;
        size_t path_len;
        const char *query;
        struct m0_header *headers;
        size_t nheaders;
        const char *body;
        size_t body_len;
        int loop;
        int thread;
        uint8_t http_minor; /* HTTP/1.x's x */
        /* HTTP/2's extended CONNECT (RFC 8441): its `:protocol` ("websocket"), the request then
         * being the app's GET (D230); NULL for every other request */
        const char *protocol;
        unsigned json_max_depth; /* M0_JSON_MAX_DEPTH, copied in when the request is made */
        /* Made by the helpers a handler calls, and ended by m0__req_end() when it returns. */
        bool scratch;        /* one of the below is set */
        bool indexed;        /* the arena holds the parameter index */
        size_t query_end;    /* the index: query records in [0, query_end), */
        size_t form_end;     /* form records up to form_end, cookie records to arena.len */
        struct m0_buf arena; /* the parameter index (request.c) */
        struct json_t *json; /* m0_req_json()'s value */
        int json_err;        /* or what it failed with */
        struct m0_req_refusal refusal;
        /* The route that matched (NULL: dispatch) and its captures, decoded (T1): value i at
         * params.data + param[i]. A pool job's point into its own memory. */
        const struct m0_croute *route;
        /* The loop's files of this turn (D237); NULL on a pool thread, which shares none. */
        struct m0_fturn *files_turn;
        uint32_t nparams;
        uint32_t param[M0__ROUTE_MAX_PARAMS];
        struct m0_buf params;
};

/* How m0__pct_decode() reads its input. */
enum {
        M0__PCT_PLUS = 1u << 0,     /* '+' is a space (a query, a form) */
        M0__PCT_STRICT = 1u << 1,   /* refuse a malformed escape, %00 and a "." or ".." segment */
        M0__PCT_NO_SLASH = 1u << 2, /* refuse %2F: one segment's capture */
        M0__PCT_RELATIVE = 1u << 3, /* refuse a decoding that begins with '/': a capture (D110) */
};

/*
 * Percent-decode [s, s + n) into `out` (n bytes at most; NULL to check only). Returns the
 * decoded length, or -EINVAL for what `flags` refuses. Without M0__PCT_STRICT an escape that is
 * not two hex digits stays as it is, and nothing is refused.
 */
ssize_t m0__pct_decode(const char *s, size_t n, char *out, unsigned flags);
/*
 * The captures `m` found for its route, decoded into req's params (T1). 0; -EINVAL when one is
 * to be refused (400); -ENOMEM. With req NULL, only checked.
 */
int m0__req_bind(m0_req *req, const char *path, const struct m0_match *m);

/* ---- the parameter index: the query's, the form body's and the cookies' name=value pairs,
 * decoded once into the arena as records of a flag byte, the name and the value, each
 * NUL-terminated (a name holding a NUL is no name and has no record) ---- */

#define M0__PARAM_BAD 1u  /* a value no reader returns: it decodes to a NUL, or breaks RFC 6265 */
#define M0__PARAM_LAX 2u  /* a malformed %-escape: m0_req_query() takes it, the others do not */
#define M0__PARAM_BARE 4u /* no '=': the query takes it (the value ""), a form does not */

/* Write one record at `out` (room for nl + vl + 3 bytes); returns its size. */
size_t m0__param_put(char *out, unsigned flags, const char *name, size_t nl, const char *value,
                     size_t vl);

/* The most room the records of an `sep`-separated list [s, s+n) take. */
size_t m0__param_bound(const char *s, size_t n, char sep);
/* The value of the first cookie named `name`, NULL when none or when it is not RFC 6265's. */
const char *m0__param_cookie(m0_req *req, const char *name);

/* The media type of the request's Content-Type without its parameters ("Application/JSON" of
 * "Application/JSON ; charset=utf-8"), *ret_len bytes; NULL without a Content-Type or with one
 * that is not a media type. */
const char *m0__req_media_type(const m0_req *req, size_t *ret_len);

/* Record that a helper refused the request with `err` (-EMEDIUMTYPE, -EBADMSG, …): the answer
 * is `status` with the formatted detail when the handler returns `err` (Q3, AP1). Returns err. */
int m0__req_refuse(m0_req *req, int err, int status, const char *fmt, ...) M0_PRINTF(4, 5);

void m0__req_scratch_end(m0_req *req);

/* The handler returned: free what its helpers made (the JSON value, a large parameter index)
 * and forget what they found, so that the next request on this loop starts clean. */
static inline void m0__req_end(m0_req *req)
{
        if (M0__UNLIKELY(req->scratch))
                m0__req_scratch_end(req);
}

#endif /* M0_REQUEST_H */
