/* SPDX-License-Identifier: MIT */
/* counter: one number shared by every loop, changed by POSTs and broadcast to every stream (A5). */
#include <stdatomic.h>
#include <stdio.h>

#include <m0.h>

#include "common.h"

/* Shared by every handler on purpose: an atomic in plain memory, one process. */
static atomic_long value;

static int change(m0_req *req, m0_res *res, long by)
{
        long v = atomic_fetch_add(&value, by) + by;
        char data[48];
        snprintf(data, sizeof(data), "{\"value\":%ld}", v);
        int64_t id = m0_publish("value", data, -1);
        if (id < 0)
                return (int)id;
        int r = app_where(req, res);
        if (r == 0)
                r = m0_res_headerf(res, "x-event-id", "%lld", (long long)id);
        return r < 0 ? r : m0_res_status(res, 204);
}

static int increment(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        return change(req, res, 1);
}

static int decrement(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        return change(req, res, -1);
}

static int events(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        int r = app_where(req, res);
        return r < 0 ? r : m0_res_stream(res);
}

static int index_page(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        int r = app_where(req, res);
        return r < 0 ? r : m0_res_json(res, 200, "{\"value\":%ld}\n", atomic_load(&value));
}

static const m0_route routes[] = {
        {"GET", "/", index_page, 0},
        {"POST", "/increment", increment, 0},
        {"POST", "/decrement", decrement, 0},
        {"GET", "/events", events, 0},
        {NULL, NULL, NULL, 0},
};

static const m0_app app = {
        .name = "counter",
        .routes = routes,
};

int main(int argc, char **argv)
{
        return m0_main(&app, argc, argv);
}
