/* SPDX-License-Identifier: MIT */
/* ramp: the reference app of the benchmarks (SPEC A2): a tiny route, a view that computes, a slow
 * one; and, for what a large route table costs (M7, T1), routes of no use registered before them. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <m0.h>

#include "common.h"

#define ROWS 4096
#define DIM 256
#define K_MAX 64

/* Each handler builds its own corpus: nothing is shared between threads. */
struct state {
        float *corpus;               /* ROWS × DIM, rows normalised */
        char worker[12], thread[12]; /* x-worker and x-thread, formatted once */
        unsigned loop_max_ms;        /* the longest a handler may run on the loop; 0: no bound */
};

static uint32_t lcg(uint32_t *s)
{
        *s = *s * 1664525u + 1013904223u;
        return *s;
}

static int make(const m0_handler_info *info, void **ret_state, char *err, size_t err_len)
{
        struct state *st = calloc(1, sizeof(*st));
        if (!st)
                return -ENOMEM;
        snprintf(st->worker, sizeof(st->worker), "%d", info->loop);
        snprintf(st->thread, sizeof(st->thread), "%d", info->thread);
        st->loop_max_ms = info->loop_handler_max_ms;
        st->corpus = malloc(sizeof(float) * ROWS * DIM);
        if (!st->corpus) {
                free(st);
                snprintf(err, err_len, "no memory for the %d×%d corpus", ROWS, DIM);
                return -ENOMEM;
        }
        uint32_t seed =
                42; /* the same corpus in every handler: answers do not depend on the loop */
        for (int r = 0; r < ROWS; r++) {
                float *row = st->corpus + (size_t)r * DIM;
                float norm = 0;
                for (int d = 0; d < DIM; d++) {
                        row[d] = (float)(lcg(&seed) >> 8) / (float)(1u << 24) - 0.5f;
                        norm += row[d] * row[d];
                }
                norm = sqrtf(norm);
                for (int d = 0; d < DIM; d++)
                        row[d] /= norm;
        }
        *ret_state = st;
        return 0;
}

static void state_free(void *p)
{
        struct state *st = p;
        if (!st)
                return;
        free(st->corpus);
        free(st);
}

/* Where the answer was made (P3); the handler's state is its thread's, so its strings are too. */
static int where(m0_res *res, const struct state *st)
{
        int r = m0_res_header(res, "x-worker", st->worker);
        return r < 0 ? r : m0_res_header(res, "x-thread", st->thread);
}

static int index_page(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        int r = where(res, state);
        return r < 0 ? r
                     : m0_res_text(res, 200,
                                   "ramp: /x/now, /x/search?sel=1..100&k=1..64, /x/slow?ms=N\n");
}

/*
 * {"now":<seconds>.<milliseconds>}, the digits written by hand: the route is the benchmarks'
 * measure of the host, and printf would cost it more than the host's whole parse does.
 */
static int now(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        static const char pre[] = "{\"now\":";
        char body[48], *end = body + sizeof(body), *p = end;
        *--p = '}';
        long ms = ts.tv_nsec / 1000000L;
        for (int i = 0; i < 3; i++, ms /= 10)
                *--p = (char)('0' + ms % 10);
        *--p = '.';
        unsigned long long sec = (unsigned long long)ts.tv_sec;
        do
                *--p = (char)('0' + sec % 10);
        while (sec /= 10);
        p -= sizeof(pre) - 1;
        memcpy(p, pre, sizeof(pre) - 1);

        int r = where(res, state);
        if (r == 0)
                r = m0_res_status(res, 200);
        if (r == 0)
                r = m0_res_header(res, "Content-Type", "application/json");
        return r < 0 ? r : m0_res_write(res, p, (size_t)(end - p));
}

/*
 * /x/search?sel=S&k=K: score the first S% of the corpus against query row S and answer the
 * K best row ids, best first.
 */
static int search(m0_req *req, m0_res *res, void *state)
{
        struct state *st = state;
        long sel = 25, k = 10;
        int r1 = m0_req_query_int(req, "sel", 1, 100, &sel);
        int r2 = m0_req_query_int(req, "k", 1, K_MAX, &k);
        int r = where(res, state);
        if (r < 0)
                return r;
        if ((r1 < 0 && r1 != -ENOENT) || (r2 < 0 && r2 != -ENOENT))
                return m0_res_json(res, 400, "{\"error\":\"sel is 1..100 and k is 1..64\"}");
        const float *q = st->corpus + (size_t)((sel * 37) % ROWS) * DIM;
        int rows = (int)(ROWS * sel / 100);
        int best[K_MAX];
        float score[K_MAX];
        int n = 0;
        for (int i = 0; i < rows; i++) {
                const float *row = st->corpus + (size_t)i * DIM;
                float s = 0;
                for (int d = 0; d < DIM; d++)
                        s += q[d] * row[d];
                if (n == k && s <= score[n - 1])
                        continue;
                int j = n < k ? n++ : n - 1;
                while (j > 0 && score[j - 1] < s) {
                        score[j] = score[j - 1];
                        best[j] = best[j - 1];
                        j--;
                }
                score[j] = s;
                best[j] = i;
        }
        r = m0_res_json(res, 200, "{\"sel\":%ld,\"k\":%ld,\"ids\":[", sel, k);
        for (int i = 0; r == 0 && i < n; i++)
                r = m0_res_printf(res, "%s%d", i ? "," : "", best[i]);
        return r < 0 ? r : m0_res_printf(res, "]}");
}

/*
 * /x/slow?ms=N sleeps N ms (100 by default, up to 60000) on the pool. Without a pool it runs on
 * the loop, which holds every connection of the loop while it sleeps: there it sleeps at most
 * the longest a handler may run on a loop (a quarter of the watchdog's interval), and a longer
 * sleep is refused at once, so that it cannot get the process restarted as stuck (W1).
 */
static int slow(m0_req *req, m0_res *res, void *state)
{
        const struct state *st = state;
        long ms = 100;
        int r = m0_req_query_int(req, "ms", 0, 60000, &ms);
        int w = where(res, state);
        if (w < 0)
                return w;
        if (r < 0 && r != -ENOENT)
                return m0_res_json(res, 400, "{\"error\":\"ms is 0..60000\"}");
        if (m0_req_thread(req) < 0 && st->loop_max_ms && ms > (long)st->loop_max_ms)
                return m0_res_json(res, 400,
                                   "{\"error\":\"ms is 0..%u on the loop (a quarter of the "
                                   "watchdog's interval); longer sleeps need the pool "
                                   "(--blocking-threads)\"}",
                                   st->loop_max_ms);
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
        return m0_res_json(res, 200, "{\"slept_ms\":%ld}", ms);
}

static const m0_route routes[] = {
        {"GET", "/x/", index_page, 0},
        {"GET", "/x/now", now, 0},
        {"GET", "/x/search", search, M0_ROUTE_BLOCKING},
        {"GET", "/x/slow", slow, M0_ROUTE_BLOCKING},
        {NULL, NULL, NULL, 0},
};
#define NROUTES (sizeof(routes) / sizeof(routes[0]) - 1)

/* M0_RAMP_EXTRA_ROUTES: at most this many routes before ramp's own. */
#define EXTRA_MAX 10000

static long extra_routes;

/* What every extra route answers: it exists to be passed over, not asked for. */
static int extra(m0_req *req, m0_res *res, void *state)
{
        int r = where(res, state);
        return r < 0 ? r : m0_res_text(res, 200, m0_req_path(req));
}

static int check(char *finding, size_t flen, char *fix, size_t xlen)
{
        if (extra_routes < 0 || extra_routes > EXTRA_MAX) {
                snprintf(finding, flen, "M0_RAMP_EXTRA_ROUTES is not a number from 0 to %d",
                         EXTRA_MAX);
                snprintf(fix, xlen, "set M0_RAMP_EXTRA_ROUTES from 0 to %d, or unset it",
                         EXTRA_MAX);
                return -EINVAL;
        }
        return 0;
}

/*
 * The table: `n` extra routes, then ramp's own, so that each extra one comes first in table
 * order (T3) and a router that tried them in turn would pay for every one on /x/now. They are
 * what an API's table holds: exact paths, one capture, a rest capture, several methods, some
 * beside /x/now under /x/. Their paths live in `*ret_text` until the process ends. NULL: no
 * memory.
 */
static m0_route *table(long n, char **ret_text)
{
        static const char *const methods[] = {"GET", "POST", "GET", "DELETE", "GET", "GET"};
        static const char *const shapes[] = {"/api/v1/r%ld",     "/api/v1/r%ld",
                                             "/api/v1/r%ld/:id", "/api/v1/r%ld/:id",
                                             "/x/e%ld",          "/files/r%ld/*rest"};
        const size_t nshapes = sizeof(shapes) / sizeof(shapes[0]);
        m0_route *t = calloc((size_t)n + NROUTES + 1, sizeof(*t));
        char *text = calloc((size_t)n, 32);
        if (!t || !text) {
                free(t);
                free(text);
                return NULL;
        }
        for (long i = 0; i < n; i++) {
                char *path = text + i * 32;
                snprintf(path, 32, shapes[(size_t)i % nshapes], i / (long)nshapes);
                t[i] = (m0_route){methods[(size_t)i % nshapes], path, extra, 0};
        }
        memcpy(t + n, routes, sizeof(routes));
        *ret_text = text;
        return t;
}

int main(int argc, char **argv)
{
        static m0_app app = {
                .name = "ramp",
                .make = make,
                .free = state_free,
                .routes = routes,
                .check = check,
        };
        extra_routes = app_env_long("M0_RAMP_EXTRA_ROUTES", 0, -1);
        m0_route *t = NULL;
        char *text = NULL;
        if (extra_routes > 0 && extra_routes <= EXTRA_MAX) {
                t = table(extra_routes, &text);
                if (!t) {
                        fprintf(stderr, "ramp: no memory for %ld extra routes\n", extra_routes);
                        return 1;
                }
                app.routes = t;
        }
        int code = m0_main(&app, argc, argv);
        free(t);
        free(text);
        return code;
}
