/* SPDX-License-Identifier: MIT */
/* request.h: request.c, the request as handlers see it. */
#ifndef M0_REQUEST_H
#define M0_REQUEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "m0.h"
#include "route.h"

/* The request as handlers see it; one per loop, reused. */
struct m0_header {
        const char *name;
        const char *value;
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
        struct m0_buf arena; /* decoded query values */
        /* The route that matched (NULL: dispatch) and its captures, decoded (T1): value i at
         * params.data + param[i]. A pool job's point into its own memory. */
        const struct m0_croute *route;
        uint32_t nparams;
        uint32_t param[M0__ROUTE_MAX_PARAMS];
        struct m0_buf params;
};

/* How m0__pct_decode() reads its input. */
enum {
        M0__PCT_PLUS = 1u << 0,     /* '+' is a space (a query, a form) */
        M0__PCT_STRICT = 1u << 1,   /* refuse a malformed escape, %00 and a "." or ".." segment */
        M0__PCT_NO_SLASH = 1u << 2, /* refuse %2F: one segment's capture */
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

#endif /* M0_REQUEST_H */
