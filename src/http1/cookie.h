/* SPDX-License-Identifier: MIT */
/* cookie.h: cookie.c, cookies (SPEC Q1): the request's Cookie fields into the parameter index,
 * and Set-Cookie built and checked. */
#ifndef M0_COOKIE_H
#define M0_COOKIE_H

#include <stddef.h>

#include "m0.h"

/* The most room the records of the request's cookies take in the parameter index. */
size_t m0__cookie_bound(const m0_req *req);
/* Write the records of every cookie-pair of the request's Cookie fields, in order, at `out`
 * (m0__cookie_bound() bytes); returns their size. */
size_t m0__cookie_put(const m0_req *req, char *out);

#endif /* M0_COOKIE_H */
