/* SPDX-License-Identifier: MIT */
/* host_parallel: one CPU job run serially (/ser) and spread over the compute pool (/par) (A6, P4). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <time.h>

#include <m0.h>

#include "common.h"

#define ITEMS 64
#define ROOTS 100000

#define SLICES 4

struct job {
        double part[ITEMS]; /* each item writes its own slot: nothing else is shared */
        int nested;         /* items split their slices with a parallel call of their own */
};

struct slices {
        size_t item;
        double sum[SLICES];
};

/* One quarter of an item's roots. */
static int slice(size_t q, void *ctx)
{
        struct slices *sl = ctx;
        double s = 0;
        size_t base = sl->item * ROOTS + q * (ROOTS / SLICES);
        for (size_t k = 1; k <= ROOTS / SLICES; k++)
                s += sqrt((double)(base + k));
        sl->sum[q] = s;
        return 0;
}

/* An item is always its four slices summed in order, whichever way they ran: the same bits. */
static int item(size_t i, void *ctx)
{
        struct job *j = ctx;
        struct slices sl = {.item = i};
        if (j->nested) {
                /* From inside a body this call runs inline: no deadlock, same result. */
                int r = m0_parallel_for(SLICES, slice, &sl);
                if (r < 0)
                        return r;
        } else {
                for (size_t q = 0; q < SLICES; q++)
                        (void)slice(q, &sl);
        }
        double s = 0;
        for (size_t q = 0; q < SLICES; q++)
                s += sl.sum[q];
        j->part[i] = s;
        return 0;
}

static long long now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The parts are summed in item order after the fact, so both routes give the same bits. */
static double total(const struct job *j)
{
        double s = 0;
        for (int i = 0; i < ITEMS; i++)
                s += j->part[i];
        return s;
}

static int run(m0_req *req, m0_res *res, int parallel)
{
        struct job j = {.nested = 0};
        const char *nested = m0_req_query(req, "nested");
        j.nested = nested && nested[0] == '1';
        long long t0 = now_us();
        int r = 0;
        if (parallel)
                r = m0_parallel_for(ITEMS, item, &j);
        else
                for (size_t i = 0; i < ITEMS && r == 0; i++)
                        r = item(i, &j);
        long long us = now_us() - t0;
        if (r < 0)
                return r;
        r = app_where(req, res);
        if (r < 0)
                return r;
        r = m0_res_header(res, "Content-Type", "text/plain; charset=utf-8");
        return r < 0 ? r
                     : m0_res_printf(res, "%s=%lldus sum=%.6f\n", parallel ? "par" : "ser", us,
                                     total(&j));
}

static int ser(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        return run(req, res, 0);
}

static int par(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        return run(req, res, 1);
}

static int health(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        int r = app_where(req, res);
        return r < 0 ? r : m0_res_text(res, 200, "ok\n");
}

static const m0_route routes[] = {
        {"GET", "/health", health, 0},
        {"GET", "/ser", ser, M0_ROUTE_BLOCKING},
        {"GET", "/par", par, M0_ROUTE_BLOCKING},
        {NULL, NULL, NULL, 0},
};

static const m0_app app = {
        .name = "host_parallel",
        .routes = routes,
};

int main(int argc, char **argv)
{
        return m0_main(&app, argc, argv);
}
