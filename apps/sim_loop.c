/* SPDX-License-Identifier: MIT */
/* sim_loop: periodic work off the loop (SPEC A3): a step at M0_SIM_HZ costing M0_SIM_COST_MS,
 * run by the producer, or with M0_SIM_ON_LOOP=1 on the loop's tick (the comparison arm). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <m0.h>

#include "common.h"

struct state {
        int loop;
        unsigned long long steps;
};

/* Read once in main, before any thread exists; read-only after. */
static long sim_hz = 4, sim_cost_ms = 200;
static int on_loop;

/*
 * The step's cost is CPU time, as a simulation's would be: spin, do not sleep, and count the
 * thread's own CPU clock, so that a step preempted by other work still costs its whole
 * M0_SIM_COST_MS of CPU (counted in wall time it would cost less exactly when CPUs are short).
 */
static void spin_ms(long ms)
{
        struct timespec t0, t;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
        volatile unsigned long sink = 0;
        do {
                for (int i = 0; i < 1000; i++)
                        sink += (unsigned long)i;
                clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
        } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

static int run_step(struct state *st)
{
        spin_ms(sim_cost_ms);
        char data[96];
        snprintf(data, sizeof(data), "{\"step\":%llu,\"where\":\"%s\",\"loop\":%d}", ++st->steps,
                 on_loop ? "loop" : "producer", st->loop);
        int64_t id = m0_publish("sim", "sim", data, 0);
        return id < 0 ? (int)id : 0;
}

/* The period in whole milliseconds, alternated so that the rate averages M0_SIM_HZ exactly
 * (60 Hz: 16, 17, 17, 16, ...). */
static int64_t step(void *state)
{
        struct state *st = state;
        int r = run_step(st);
        if (r < 0)
                return r;
        unsigned long long n = st->steps;
        return (int64_t)((1000 * (n + 1)) / (unsigned long long)sim_hz -
                         (1000 * n) / (unsigned long long)sim_hz);
}

/* The on-loop arm: only loop 0 steps, so the cadence and the frames match the producer arm. */
static void tick(void *state)
{
        struct state *st = state;
        if (st->loop == 0)
                (void)run_step(st);
}

static int make(const m0_handler_info *info, void **ret_state, char *err, size_t err_len)
{
        (void)err;
        (void)err_len;
        struct state *st = calloc(1, sizeof(*st));
        if (!st)
                return -ENOMEM;
        st->loop = info->loop;
        *ret_state = st;
        return 0;
}

static int now(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int r = app_where(req, res);
        return r < 0 ? r
                     : m0_res_json(res, 200, "{\"now\":%lld.%03ld}", (long long)ts.tv_sec,
                                   ts.tv_nsec / 1000000L);
}

static int events(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        int r = app_where(req, res);
        return r < 0 ? r : m0_res_subscribe(res, "sim");
}

static int index_page(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        int r = app_where(req, res);
        if (r < 0)
                return r;
        char text[160];
        snprintf(text, sizeof(text), "sim_loop: %ld Hz x %ld ms on the %s; /now, /events\n", sim_hz,
                 sim_cost_ms, on_loop ? "loop's tick" : "producer");
        return m0_res_text(res, 200, text);
}

static int check(char *finding, size_t flen, char *fix, size_t xlen)
{
        if (sim_hz < 1 || sim_hz > 1000) {
                snprintf(finding, flen, "M0_SIM_HZ=%ld is outside 1..1000", sim_hz);
                snprintf(fix, xlen, "set M0_SIM_HZ from 1 to 1000");
                return -EINVAL;
        }
        if (sim_cost_ms < 0 || sim_cost_ms > 10000) {
                snprintf(finding, flen, "M0_SIM_COST_MS=%ld is outside 0..10000", sim_cost_ms);
                snprintf(fix, xlen, "set M0_SIM_COST_MS from 0 to 10000");
                return -EINVAL;
        }
        return 0;
}

static const m0_route routes[] = {
        {"GET", "/", index_page, 0},
        {"GET", "/now", now, 0},
        {"GET", "/events", events, 0},
        {NULL, NULL, NULL, 0},
};

int main(int argc, char **argv)
{
        static m0_app app = {
                .name = "sim_loop",
                .make = make,
                .free = free,
                .routes = routes,
                .check = check,
        };
        sim_hz = app_env_long("M0_SIM_HZ", 4, -1);
        sim_cost_ms = app_env_long("M0_SIM_COST_MS", 200, -1);
        on_loop = app_env_long("M0_SIM_ON_LOOP", 0, -1) == 1;
        if (on_loop) {
                /* The app drives its own cadence: without it the arm would measure nothing. */
                app.tick = tick;
                app.tick_ms = sim_hz > 0 ? (unsigned)(1000 / sim_hz) : 250;
        } else {
                app.step = step;
        }
        return m0_main(&app, argc, argv);
}
