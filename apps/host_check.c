/* SPDX-License-Identifier: MIT */
/* host_check: the app the host's own tests drive (SPEC A1); every answer says where it ran. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <m0.h>

#include "common.h"

struct state {
        int loop;
        int thread;
        unsigned long long served; /* requests this handler answered: one counter per handler */
        unsigned long long beats;  /* the producer's: beats published */
        long period_ms, cost_ms;
};

static void sleep_ms(long ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static int where(m0_req *req, m0_res *res, struct state *st)
{
        st->served++;
        return app_where(req, res);
}

static int health(m0_req *req, m0_res *res, void *state)
{
        int r = where(req, res, state);
        return r < 0 ? r : m0_res_text(res, 200, "ok\n");
}

static int pid(m0_req *req, m0_res *res, void *state)
{
        int r = where(req, res, state);
        return r < 0 ? r : m0_res_json(res, 200, "{\"pid\":%ld}\n", (long)getpid());
}

static int instance(m0_req *req, m0_res *res, void *state)
{
        struct state *st = state;
        int r = where(req, res, st);
        if (r < 0)
                return r;
        return m0_res_json(res, 200, "{\"loop\":%d,\"thread\":%d,\"requests\":%llu,\"pid\":%ld}\n",
                           m0_req_loop(req), m0_req_thread(req), st->served, (long)getpid());
}

/* /slow?ms=N: hold this handler for N ms (0..60000), as a view that computes would. */
static int slow(m0_req *req, m0_res *res, void *state)
{
        int r = where(req, res, state);
        if (r < 0)
                return r;
        long ms = 100;
        r = m0_req_query_int(req, "ms", 0, 60000, &ms);
        if (r < 0 && r != -ENOENT)
                return m0_res_text(res, 400, "ms must be a whole number from 0 to 60000\n");
        sleep_ms(ms);
        return m0_res_json(res, 200, "{\"slept_ms\":%ld}\n", ms);
}

/* A test knob: unset gives `def`; a value that is not a whole number gives LONG_MIN, which the
 * app's check refuses before anything is built. */
/* /events: the producer's beats (S1); x-worker says which loop holds the stream. */
static int events(m0_req *req, m0_res *res, void *state)
{
        int r = where(req, res, state);
        return r < 0 ? r : m0_res_stream(res);
}

/*
 * /crash?sig=SEGV|BUS|ABRT (loop) and /crash-pool (a blocking route): a fatal signal in the
 * middle of a request, for the crash report's tests (J2); SEGV when `sig` is absent. 404 unless
 * M0_HOSTCHECK_CRASH=1 was set explicitly.
 */
static int crash(m0_req *req, m0_res *res, void *state)
{
        const char *on = getenv("M0_HOSTCHECK_CRASH");
        if (!on || strcmp(on, "1") != 0)
                return m0_res_text(res, 404, "404 Not Found\n");
        (void)state;
        const char *sig = m0_req_query(req, "sig");
        if (sig && !strcmp(sig, "BUS"))
                raise(SIGBUS);
        else if (sig && !strcmp(sig, "ABRT"))
                abort();
        else if (!sig || !strcmp(sig, "SEGV"))
                raise(SIGSEGV);
        return m0_res_text(res, 400, "sig is SEGV, BUS or ABRT\n");
}

/* POST /echo: the body back, as received (chunked bodies arrive decoded). */
static int echo(m0_req *req, m0_res *res, void *state)
{
        int r = where(req, res, state);
        if (r < 0)
                return r;
        size_t len;
        const void *body = m0_req_body(req, &len);
        r = m0_res_header(res, "Content-Type", "application/octet-stream");
        return r < 0 ? r : m0_res_write(res, body, len);
}

/*
 * Test knobs (L3): M0_HOSTCHECK_LOOP_MAKE_FAILS=<loop> makes that loop's make fail after
 * M0_HOSTCHECK_MAKE_DELAY_MS while every other loop builds at once; without it, the delay
 * slows every loop's make and each then succeeds.
 */
static int make(const m0_handler_info *info, void **ret_state, char *err, size_t err_len)
{
        long fail_loop = app_env_long("M0_HOSTCHECK_LOOP_MAKE_FAILS", -1, LONG_MIN);
        long delay = app_env_long("M0_HOSTCHECK_MAKE_DELAY_MS", 0, LONG_MIN);
        if (info->kind == M0_THREAD_LOOP && info->loop == fail_loop) {
                if (delay > 0)
                        sleep_ms(delay);
                snprintf(err, err_len, "M0_HOSTCHECK_LOOP_MAKE_FAILS=%ld asked for it", fail_loop);
                return -EIO;
        }
        if (fail_loop < 0 && delay > 0)
                sleep_ms(delay);
        if (info->kind == M0_THREAD_POOL &&
            app_env_long("M0_HOSTCHECK_POOL_MAKE_FAILS", 0, LONG_MIN) == 1) {
                snprintf(err, err_len, "M0_HOSTCHECK_POOL_MAKE_FAILS=1 asked for it");
                return -EIO;
        }
        if (info->kind == M0_THREAD_PRODUCER &&
            app_env_long("M0_HOSTCHECK_PRODUCER_MAKE_FAILS", 0, LONG_MIN) == 1) {
                snprintf(err, err_len, "M0_HOSTCHECK_PRODUCER_MAKE_FAILS=1 asked for it");
                return -EIO;
        }
        struct state *st = calloc(1, sizeof(*st));
        if (!st)
                return -ENOMEM;
        st->loop = info->loop;
        st->thread = info->thread;
        st->period_ms = app_env_long("M0_HOSTCHECK_PERIOD_MS", 100, LONG_MIN);
        st->cost_ms = app_env_long("M0_HOSTCHECK_STEP_COST_MS", 0, LONG_MIN);
        *ret_state = st;
        return 0;
}

/*
 * The producer's step: one beat every M0_HOSTCHECK_PERIOD_MS (100), after spending
 * M0_HOSTCHECK_STEP_COST_MS (0) as a step that computes would.
 */
static int64_t step(void *state)
{
        struct state *st = state;
        if (st->cost_ms > 0)
                sleep_ms(st->cost_ms);
        long fail_at = app_env_long("M0_HOSTCHECK_STEP_FAILS_AT", 0, LONG_MIN);
        if (fail_at > 0 && (long)st->beats + 1 == fail_at)
                return -EIO; /* S2: the producer stops, serving goes on */
        char data[64];
        snprintf(data, sizeof(data), "{\"beat\":%llu,\"pid\":%ld}", ++st->beats, (long)getpid());
        int64_t id = m0_publish("beat", data, -1);
        if (id < 0)
                return id;
        return st->period_ms > 0 ? st->period_ms : 100;
}

/* The knobs a test can get wrong, refused before anything is built. */
static int check(char *finding, size_t flen, char *fix, size_t xlen)
{
        static const struct {
                const char *name;
                long min;
        } knobs[] = {
                {"M0_HOSTCHECK_PERIOD_MS", 1},       {"M0_HOSTCHECK_STEP_COST_MS", 0},
                {"M0_HOSTCHECK_MAKE_DELAY_MS", 0},   {"M0_HOSTCHECK_LOOP_MAKE_FAILS", 0},
                {"M0_HOSTCHECK_POOL_MAKE_FAILS", 0}, {"M0_HOSTCHECK_PRODUCER_MAKE_FAILS", 0},
                {"M0_HOSTCHECK_STEP_FAILS_AT", 0},
        };
        for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
                if (app_env_long(knobs[i].name, knobs[i].min, LONG_MIN) >= knobs[i].min)
                        continue;
                snprintf(finding, flen, "%s='%s' is not a whole number from %ld", knobs[i].name,
                         getenv(knobs[i].name), knobs[i].min);
                snprintf(fix, xlen, "set %s to a whole number, %ld or more", knobs[i].name,
                         knobs[i].min);
                return -EINVAL;
        }
        return 0;
}

static const m0_route routes[] = {
        {"GET", "/health", health, 0},
        {"GET", "/pid", pid, 0},
        {"GET", "/instance", instance, 0},
        {"GET", "/slow", slow, M0_ROUTE_BLOCKING},
        {"POST", "/echo", echo, 0},
        {"GET", "/events", events, 0},
        {"GET", "/crash", crash, 0},
        {"GET", "/crash-pool", crash, M0_ROUTE_BLOCKING},
        {"GET", "/events-from-func", events, M0_ROUTE_BLOCKING},
        {NULL, NULL, NULL, 0},
};

static const m0_app app = {
        .name = "host_check",
        .make = make,
        .free = free,
        .routes = routes,
        .step = step,
        .check = check,
};

int main(int argc, char **argv)
{
        return m0_main(&app, argc, argv);
}
