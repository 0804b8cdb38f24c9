/* SPDX-License-Identifier: MIT */
/* host_check: the app the host's own tests drive (SPEC A1, N1-N5, and Q1-Q4 under /q/); every
 * answer says where it ran. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
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
                return r; /* the host's 400, naming the bound (AP1) */
        sleep_ms(ms);
        return m0_res_json(res, 200, "{\"slept_ms\":%ld}\n", ms);
}

/* /events: the producer's beats on channel `beat` (S1, N1); x-worker says which loop holds the
 * stream. */
static int events(m0_req *req, m0_res *res, void *state)
{
        int r = where(req, res, state);
        return r < 0 ? r : m0_res_subscribe(res, "beat");
}

/* The answer to a channel the host refused: 400 naming it and why. */
static int refused(m0_res *res, const char *what, const char *channel, int err)
{
        char text[400];
        snprintf(text, sizeof(text), "%s('%.200s'): %s\n", what, channel, strerror(-err));
        return m0_res_text(res, 400, text);
}

/* /follow?channels=a,room:*,...: a stream of those channels, for the tests of N1-N5 (host_check
 * grants every channel: it has nothing to hide); /follow alone: a stream of none. */
static int follow(m0_req *req, m0_res *res, void *state)
{
        int r = where(req, res, state);
        const char *list = m0_req_query(req, "channels");
        if (r < 0 || !list || !*list)
                return r < 0 ? r : m0_res_stream(res);
        char name[256];
        for (const char *p = list;; p++) {
                size_t n = strcspn(p, ",");
                snprintf(name, sizeof(name), "%.*s", (int)(n < 255 ? n : 255), p);
                r = m0_res_subscribe(res, name);
                if (r == -EPERM)
                        return r; /* on the pool: the host answers 409 (P2) */
                if (r < 0)
                        return refused(res, "m0_res_subscribe", name, r);
                p += n;
                if (!*p)
                        return 0;
        }
}

/*
 * POST /publish?channel=C[&n=N][&distinct=1][&transient=1][&event=E]: N events (1) on C, or on
 * C0 .. C<N-1> with distinct=1, data {"i":<i>}; answers the first and last id. 404 unless
 * M0_HOSTCHECK_PUBLISH=1 was set explicitly: it lets any client publish anything. POST
 * /publish-pool is the same on a pool thread (with --blocking-threads), so that a loop's CPU is
 * its deliveries alone.
 */
static int publish(m0_req *req, m0_res *res, void *state)
{
        const char *on = getenv("M0_HOSTCHECK_PUBLISH");
        if (!on || strcmp(on, "1") != 0)
                return m0_res_text(res, 404, "404 Not Found\n");
        int r = where(req, res, state);
        const char *channel = m0_req_query(req, "channel");
        const char *event = m0_req_query(req, "event");
        const char *tr = m0_req_query(req, "transient"), *ds = m0_req_query(req, "distinct");
        long n = 1;
        if (r < 0)
                return r;
        int q = m0_req_query_int(req, "n", 0, 10000000, &n);
        if (!channel || (q < 0 && q != -ENOENT))
                return m0_res_text(res, 400, "channel=NAME, n from 0 to 10000000\n");
        unsigned flags = tr && !strcmp(tr, "1") ? M0_PUBLISH_TRANSIENT : 0;
        bool distinct = ds && !strcmp(ds, "1");
        int64_t first = -1, last = -1;
        for (long i = 0; i < n; i++) {
                char name[256], data[32];
                snprintf(name, sizeof(name), distinct ? "%.200s%ld" : "%.200s", channel, i);
                snprintf(data, sizeof(data), "{\"i\":%ld}", i);
                int64_t id = m0_publish(name, event, data, flags);
                if (id < 0)
                        return refused(res, "m0_publish", name, (int)id);
                first = first < 0 ? id : first;
                last = id;
        }
        return m0_res_json(res, 200, "{\"first\":%lld,\"last\":%lld,\"published\":%ld}\n",
                           (long long)first, (long long)last, n);
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

/* ---- cookies, forms, JSON and the host's own answers (SPEC Q1-Q4), for their tests ---- */

/* GET /q/fail: a handler that fails after writing half an answer (Q4: a logged 500). */
static int q_fail(m0_req *req, m0_res *res, void *state)
{
        int r = where(req, res, state);
        if (r == 0)
                r = m0_res_text(res, 200, "half an answer");
        return r < 0 ? r : -EIO;
}

/* POST /q/json (a loop route) and /q/json-pool (a blocking one): the body back as jansson read
 * it, or the host's 415/400 (Q3). */
static int q_json(m0_req *req, m0_res *res, void *state)
{
        json_t *j;
        int r = where(req, res, state);
        if (r == 0)
                r = m0_req_json(req, &j);
        return r < 0 ? r : m0_res_json_value(res, 200, j);
}

/* `v` as {"value": v} (null when NULL). */
static int value_json(m0_res *res, const char *v)
{
        json_t *j = json_pack("{s:s?}", "value", v);
        int r = j ? m0_res_json_value(res, 200, j) : -ENOMEM;
        json_decref(j);
        return r;
}

/* POST /q/form?f=NAME: form field NAME (Q2), null when absent; a field the form gives wrong
 * (twice, malformed, not UTF-8) or a body of another type is the host's 400 or 415 (AP1). */
static int q_form(m0_req *req, m0_res *res, void *state)
{
        const char *f, *v = NULL;
        int r = where(req, res, state);
        if (r == 0)
                r = m0_req_query_get(req, "f", &f);
        if (r == 0)
                r = m0_req_form_get(req, f, &v);
        return r < 0 && r != -ENOENT ? r : value_json(res, v);
}

/* GET /q/cookie?name=NAME: cookie NAME (Q1), and two cookies set on the answer. */
static int q_cookie(m0_req *req, m0_res *res, void *state)
{
        const char *name = m0_req_query(req, "name");
        int r = where(req, res, state);
        if (r == 0)
                r = m0_res_cookie(res, "a", "1",
                                  &(m0_cookie_attrs){.path = "/",
                                                     .http_only = true,
                                                     .same_site = M0_SAMESITE_LAX});
        if (r == 0)
                r = m0_res_cookie(res, "b", "2", &(m0_cookie_attrs){.max_age = 60});
        return r < 0 ? r : value_json(res, name ? m0_req_cookie(req, name) : NULL);
}

/* GET /q/item/:id, and GET /q/file/ with a rest capture: the capture (T1); a bad one is the
 * host's 400 (Q4). POST /q/typed (JSON bodies alone) and /q/small (8 bytes at most) are
 * /health's, or the host's 415 and 413. */
static int q_item(m0_req *req, m0_res *res, void *state)
{
        int r = where(req, res, state);
        const char *id = m0_req_param(req, "id");
        return r < 0 ? r : value_json(res, id ? id : m0_req_param(req, "rest"));
}

/* GET /q/publish: one event whose data is a json_t (Q3), on channel q (/follow?channels=q). */
static int q_publish(m0_req *req, m0_res *res, void *state)
{
        int r = where(req, res, state);
        json_t *data = json_pack("{s:s,s:[i,i]}", "from", "q/publish", "n", 1, 2);
        int64_t id = r < 0 ? r : data ? m0_publish_json("q", "q", data, 0) : -ENOMEM;
        json_decref(data);
        return id < 0 ? (int)id : m0_res_json(res, 200, "{\"id\":%lld}", (long long)id);
}

/* M0_HOSTCHECK_ERRORS: how the host's own answers read. Set by main() before m0_main(). */
static enum { ERRORS_TEXT, ERRORS_JSON, ERRORS_CALLBACK, ERRORS_FAILS, ERRORS_STATUS } errors;

static const char *const errors_names[] = {"text", "json", "callback", "callback-fails",
                                           "callback-status"};

/* The app's error callback (Q4): {"host_check": status, "detail": …, "path": … or null};
 * or, as a test asks, one that fails or changes the status. */
static int app_error(m0_req *req, m0_res *res, int status, const char *detail, void *state)
{
        (void)state;
        if (errors == ERRORS_FAILS)
                return -EIO;
        if (errors == ERRORS_STATUS)
                return m0_res_status(res, 200);
        json_t *j = json_pack("{s:i,s:s,s:s?}", "host_check", status, "detail", detail, "path",
                              req ? m0_req_path(req) : NULL);
        int r = j ? m0_res_json_value(res, status, j) : -ENOMEM;
        json_decref(j);
        return r;
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
        int64_t id = m0_publish("beat", "beat", data, 0);
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
        const char *e = getenv("M0_HOSTCHECK_ERRORS");
        bool known = !e;
        for (size_t i = 0; e && i < sizeof(errors_names) / sizeof(errors_names[0]); i++)
                known = known || strcmp(e, errors_names[i]) == 0;
        if (!known) {
                snprintf(finding, flen, "M0_HOSTCHECK_ERRORS='%s' is not an answer style", e);
                snprintf(fix, xlen,
                         "set M0_HOSTCHECK_ERRORS to text, json, callback, callback-fails or "
                         "callback-status");
                return -EINVAL;
        }
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

/*
 * With M0_HOSTCHECK_BACKFILL=1, a stream that missed events of a channel gets, before the kept
 * ones, one `event: backfill` saying what the host asked and on which thread (AP2); the channel
 * `fail` fails the backfill (-EIO), and the channel `slow` takes 300 ms to backfill.
 */
static int backfill(m0_backfill *bf, const char *channel, uint64_t last_id, uint64_t oldest,
                    void *state)
{
        struct state *st = state;
        if (!strcmp(channel, "fail"))
                return -EIO;
        if (!strcmp(channel, "slow"))
                sleep_ms(300);
        if (m0_backfill_event(bf, "a\nb", "x") != -EINVAL)
                return -EPROTO; /* an event name of two lines is refused */
        char data[160];
        snprintf(data, sizeof(data),
                 "{\"channel\":\"%s\",\"last_id\":%llu,\"oldest\":%llu,\"thread\":%d}", channel,
                 (unsigned long long)last_id, (unsigned long long)oldest, st->thread);
        return m0_backfill_event(bf, "backfill", data);
}

static const m0_route routes[] = {
        {"GET", "/health", health, 0},
        {"GET", "/pid", pid, 0},
        {"GET", "/instance", instance, 0},
        {"GET", "/slow", slow, M0_ROUTE_BLOCKING},
        {"POST", "/echo", echo, 0},
        {"GET", "/events", events, 0},
        {"GET", "/follow", follow, 0},
        {"POST", "/publish", publish, 0},
        {"POST", "/publish-pool", publish, M0_ROUTE_BLOCKING}, /* off the loops (bench M5) */
        {"GET", "/crash", crash, 0},
        {"GET", "/crash-pool", crash, M0_ROUTE_BLOCKING},
        {"GET", "/events-from-func", events, M0_ROUTE_BLOCKING},
        {"GET", "/q/fail", q_fail, 0},
        {"POST", "/q/json", q_json, 0},
        {"POST", "/q/json-pool", q_json, M0_ROUTE_BLOCKING},
        {"POST", "/q/form", q_form, 0},
        {"GET", "/q/cookie", q_cookie, 0},
        {"GET", "/q/publish", q_publish, 0},
        {"GET", "/q/item/:id", q_item, 0},
        {"GET", "/q/file/*rest", q_item, 0},
        {"POST", "/q/typed", health, 0, 0, "application/json"},
        {"POST", "/q/small", health, 0, 8, NULL},
        M0_ROUTE("POST", "/q/form-only", q_form,
                 .content_type = "application/x-www-form-urlencoded"), /* AP1's 415 */
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
        m0_app a = app;
        const char *e = getenv("M0_HOSTCHECK_ERRORS");
        for (size_t i = 0; e && i < sizeof(errors_names) / sizeof(errors_names[0]); i++)
                if (strcmp(e, errors_names[i]) == 0)
                        errors = i;
        const char *bf = getenv("M0_HOSTCHECK_BACKFILL");
        if (bf && !strcmp(bf, "1"))
                a.backfill = backfill;
        if (errors == ERRORS_JSON)
                a.flags |= M0_APP_ERRORS_JSON;
        else if (errors != ERRORS_TEXT)
                a.error = app_error;
        return m0_main(&a, argc, argv);
}
