/* SPDX-License-Identifier: MIT */
/* route.h: route.c, which handler answers a request, and running it. */
#ifndef M0_ROUTE_H
#define M0_ROUTE_H

#include <stdbool.h>

#include "m0.h"

/*
 * Find the handler for a request: the route table, then the app's dispatch. NULL when nothing
 * matches, with *ret_status 404 or 405. *ret_blocking tells whether the route is M0_ROUTE_BLOCKING.
 */
m0_handler_fn m0__app_route(const m0_app *app, const m0_req *req, bool is_head, bool *ret_blocking,
                            int *ret_status);
/* Run `fn` (NULL: answer *status) and turn a failure into a 500. */
void m0__app_run(const m0_app *app, m0_handler_fn fn, int status, m0_req *req, m0_res *res,
                 void *state);

#endif /* M0_ROUTE_H */
