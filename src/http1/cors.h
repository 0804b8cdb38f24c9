/* SPDX-License-Identifier: MIT */
/* cors.h: cors.c, the app's CORS (Q5): its origins checked once at start, and the header lines
 * of a preflight's answer and of every other answer. */
#ifndef M0_CORS_H
#define M0_CORS_H

#include <stdbool.h>
#include <stddef.h>

#include "m0.h"

struct m0_buf;

/* Preflight answers may be kept this long when the app says nothing (m0_cors.max_age 0). */
#define M0__CORS_MAX_AGE 600

/* The app's CORS, checked; built by the coordinator before the checks, read-only after. */
struct m0_cors_c {
        bool on;          /* the app named origins */
        bool any;         /* "*": every origin, never with credentials */
        bool credentials; /* Access-Control-Allow-Credentials: true to a listed origin */
        unsigned max_age;
        const char *const *origins; /* the app's list, when not `any` */
        size_t norigins;
        const char *expose; /* Access-Control-Expose-Headers, or NULL */
        char err[400];      /* why the app's CORS was refused; "" when it was taken */
        char fix[200];
};

/* Check the app's `def` (NULL: no CORS). 0, or -EINVAL with c->err and c->fix. */
int m0__cors_build(struct m0_cors_c *c, const m0_cors *def);
/* What `origin` (olen bytes, NULL when the request has none) is answered with: the listed entry
 * it equals, "*" for an app of every origin, or NULL when it is not allowed. */
const char *m0__cors_allowed(const struct m0_cors_c *c, const char *origin, size_t olen);
/*
 * Append the lines every answer of a CORS app carries for a request from `origin`: Vary: Origin
 * (listed origins), and when it is allowed Access-Control-Allow-Origin, -Allow-Credentials and
 * -Expose-Headers. 0 or -ENOMEM.
 */
int m0__cors_answer(const struct m0_cors_c *c, const char *origin, size_t olen, struct m0_buf *out);
/*
 * Append a preflight's lines: for an allowed `origin`, Access-Control-Allow-Origin (and
 * -Credentials), -Allow-Methods `methods`, -Allow-Headers as `req_headers` asked when each is a
 * token, -Max-Age; for any origin, Vary. 0 or -ENOMEM.
 */
int m0__cors_preflight(const struct m0_cors_c *c, const char *origin, size_t olen,
                       const char *methods, const char *req_headers, size_t rhlen,
                       struct m0_buf *out);

#endif /* M0_CORS_H */
