/* SPDX-License-Identifier: MIT */
/* route.c: which handler answers a request (the route table, then the app's dispatch), and
 * running it with a failure turned into a 500. */
#include <string.h>

#include "request.h"
#include "response.h"
#include "route.h"

static bool path_matches(const m0_route *rt, const char *path)
{
        if (rt->flags & M0_ROUTE_PREFIX)
                return strncmp(path, rt->path, strlen(rt->path)) == 0;
        return strcmp(path, rt->path) == 0;
}

static bool method_matches(const m0_route *rt, const char *method, bool is_head)
{
        return !rt->method || strcmp(rt->method, method) == 0 ||
               (is_head && strcmp(rt->method, "GET") == 0);
}

/* The first route whose path and method match; the path alone decides 404 against 405. */
m0_handler_fn m0__app_route(const m0_app *app, const m0_req *req, bool is_head, bool *ret_blocking,
                            int *ret_status)
{
        bool path_known = false;
        *ret_blocking = false;
        for (const m0_route *rt = app->routes; rt && rt->path; rt++) {
                if (!path_matches(rt, req->path))
                        continue;
                if (method_matches(rt, req->method, is_head)) {
                        *ret_blocking = (rt->flags & M0_ROUTE_BLOCKING) != 0;
                        return rt->handler;
                }
                path_known = true;
        }
        if (app->dispatch)
                return app->dispatch;
        *ret_status = path_known ? 405 : 404;
        return NULL;
}

void m0__app_run(const m0_app *app, m0_handler_fn fn, int status, m0_req *req, m0_res *res,
                 void *state)
{
        if (!fn) {
                (void)m0_res_text(res, status,
                                  status == 405 ? "405 Method Not Allowed\n" : "404 Not Found\n");
                return;
        }
        /* A stream refused on a pool thread is answered 409 by the pool (P2), whatever the
         * handler made of m0_res_stream()'s -EPERM. */
        if (fn(req, res, state) < 0 && !res->stream_refused) {
                m0__res_reset(res);
                (void)m0_res_text(res, 500, "500 Internal Server Error\n");
        }
}
