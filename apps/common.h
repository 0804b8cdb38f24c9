/* SPDX-License-Identifier: MIT */
/* common.h: what the reference apps share: where an answer was made (SPEC P3), and a number
 * from the environment. Header-only: each app compiles its own copy of these few lines. */
#ifndef M0_APPS_COMMON_H
#define M0_APPS_COMMON_H

#include <errno.h>
#include <stdlib.h>

#include <m0.h>

/* x-worker: the loop that owns the connection; x-thread: the pool thread, -1 on the loop. */
static inline int app_where(m0_req *req, m0_res *res)
{
        int r = m0_res_headerf(res, "x-worker", "%d", m0_req_loop(req));
        return r < 0 ? r : m0_res_headerf(res, "x-thread", "%d", m0_req_thread(req));
}

/* The decimal value of variable `name`: `def` when unset or empty, `bad` when it is not a
 * number (the app's check then refuses it). */
static inline long app_env_long(const char *name, long def, long bad)
{
        const char *v = getenv(name);
        if (!v || !*v)
                return def;
        char *end;
        errno = 0;
        long x = strtol(v, &end, 10);
        return *end || errno ? bad : x;
}

#endif /* M0_APPS_COMMON_H */
