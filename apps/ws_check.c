/* SPDX-License-Identifier: MIT */
/* ws_check: the app the WebSocket tests drive (SPEC WS1-WS5): an echo, a close on request, a
 * flood from the loop or from a thread of its own (the output bound), a route with declared
 * origins, one on the pool, channels followed as messages, a burst of messages then a Close, and
 * the count of WebSockets accepted, opened and closed. Not installed. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <m0.h>

/* A text message "close CODE REASON" closes with that code and reason; anything else comes
 * back as it came, text or binary. */
static void echo_message(m0_ws *ws, int type, const void *data, size_t len, void *state)
{
        (void)state;
        char text[160];
        if (type == M0_WS_TEXT && len > 6 && len < sizeof(text) && !memcmp(data, "close ", 6)) {
                memcpy(text, data, len);
                text[len] = '\0';
                char *reason = NULL;
                int code = (int)strtol(text + 6, &reason, 10);
                if (*reason == ' ')
                        reason++;
                int r = m0_ws_close(ws, code, *reason ? reason : NULL);
                if (r < 0) {
                        snprintf(text, sizeof(text), "m0_ws_close: %d", r);
                        (void)m0_ws_send(ws, M0_WS_TEXT, text, strlen(text));
                }
                return;
        }
        (void)m0_ws_send(ws, type, data, len);
}

static void say_close(m0_ws *ws, int code, void *state)
{
        (void)ws;
        m0_log(M0_LOG_INFO, "ws_check: %s closed %d", (const char *)state, code);
}

static const m0_ws_callbacks echo_cb = {.on_message = echo_message, .on_close = say_close};

static int echo(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)state;
        int r = m0_res_websocket(res, &echo_cb, "echo");
        return r < 0 ? r : m0_res_header(res, "X-Ws-Check", "echo");
}

/* The flood: N messages of SIZE bytes, queued on the loop at once, or sent from a thread of the
 * app's own through the mailbox; the first refusal is logged. */
struct flood {
        m0_ws *ws;
        long n, size;
};

static void *flood_run(void *arg)
{
        struct flood *f = arg;
        char *buf = calloc(1, (size_t)f->size);
        int r = buf ? 0 : -ENOMEM;
        long i = 0;
        for (; r == 0 && i < f->n; i++)
                r = m0_ws_send(f->ws, M0_WS_BINARY, buf, (size_t)f->size);
        m0_log(M0_LOG_INFO, "ws_check: flood stopped after %ld sends: %d", i, r);
        free(buf);
        m0_ws_unref(f->ws);
        free(f);
        return NULL;
}

static void flood_open(m0_ws *ws, void *state)
{
        struct flood *f = state;
        f->ws = ws;
        m0_ws_ref(ws);
        if (f->size < 0) {
                f->size = -f->size;
                pthread_t t;
                if (pthread_create(&t, NULL, flood_run, f) == 0) {
                        pthread_detach(t);
                        return;
                }
        }
        flood_run(f);
}

static const m0_ws_callbacks flood_cb = {.on_open = flood_open};

static int flood(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        long n = 0, size = 0;
        int r = m0_req_query_int(req, "n", 1, 1000000, &n);
        if (r == 0)
                r = m0_req_query_int(req, "size", 1, 16 << 20, &size);
        if (r < 0)
                return r;
        struct flood *f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        f->n = n;
        f->size = m0_req_query(req, "thread") ? -size : size;
        r = m0_res_websocket(res, &flood_cb, f);
        if (r < 0)
                free(f);
        return r;
}

/* Channels as messages (WS2): ?channel=NAME, and ?last_event_id= from the host. */
static int follow(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        const char *ch = m0_req_query(req, "channel");
        int r = m0_res_subscribe(res, ch ? ch : "*");
        return r < 0 ? r : m0_res_websocket(res, &echo_cb, "follow");
}

static int publish(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        const char *ch = m0_req_query(req, "channel");
        size_t n;
        const char *body = m0_req_body(req, &n);
        char *data = strndup(body, n); /* the body is bytes; m0_publish takes a string */
        if (!data)
                return -ENOMEM;
        int64_t id = m0_publish(ch ? ch : "test", "message", data, 0);
        free(data);
        if (id < 0)
                return (int)id;
        return m0_res_json(res, 200, "{\"id\":%lld}", (long long)id);
}

/* The burst: N text messages "burst I" (padded with dots to SIZE bytes) then a Close with CODE
 * and "burst done", all in one go, on the loop in on_open or from a thread of the app's own, then
 * "burst queued" logged; ?hold=1 sends nothing, ?fail=1 accepts then fails the handler. Its
 * state is the app's, freed in on_close, which runs once for each WebSocket accepted, opened or
 * not. */
static atomic_long accepted, opened, closed;

struct burst {
        m0_ws *ws;
        long n, code, size;
        bool hold;
};

static void *burst_run(void *arg)
{
        struct burst *b = arg;
        char text[65536];
        for (long i = 0; i < b->n; i++) {
                int len = snprintf(text, sizeof(text), "burst %ld", i);
                if (len < b->size) {
                        memset(text + len, '.', (size_t)(b->size - len));
                        len = (int)b->size;
                }
                if (m0_ws_send(b->ws, M0_WS_TEXT, text, (size_t)len) < 0)
                        m0_log(M0_LOG_INFO, "ws_check: burst send %ld refused", i);
        }
        if (m0_ws_close(b->ws, (int)b->code, "burst done") < 0)
                m0_log(M0_LOG_INFO, "ws_check: burst close refused");
        m0_log(M0_LOG_INFO, "ws_check: burst queued");
        return NULL;
}

static void *burst_thread(void *arg)
{
        struct burst *b = arg; /* the thread's copy: the state may be freed meanwhile */
        burst_run(b);
        m0_ws_unref(b->ws);
        free(b);
        return NULL;
}

static void burst_open(m0_ws *ws, void *state)
{
        struct burst *b = state;
        atomic_fetch_add(&opened, 1);
        b->ws = ws;
        if (b->hold)
                return;
        struct burst *copy = b->n < 0 ? malloc(sizeof(*copy)) : NULL;
        if (b->n < 0)
                b->n = -b->n;
        if (copy) {
                *copy = *b;
                m0_ws_ref(ws);
                pthread_t t;
                if (pthread_create(&t, NULL, burst_thread, copy) == 0) {
                        pthread_detach(t);
                        return;
                }
                m0_ws_unref(ws);
                free(copy);
        }
        burst_run(b);
}

static void burst_close(m0_ws *ws, int code, void *state)
{
        (void)ws;
        atomic_fetch_add(&closed, 1);
        m0_log(M0_LOG_INFO, "ws_check: burst closed %d", code);
        free(state);
}

static const m0_ws_callbacks burst_cb = {.on_open = burst_open, .on_close = burst_close};

static int burst(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        long n = 0, code = 1000, size = 0;
        int r = m0_req_query(req, "n") ? m0_req_query_int(req, "n", 0, 100000, &n) : 0;
        if (r == 0 && m0_req_query(req, "code"))
                r = m0_req_query_int(req, "code", 1000, 4999, &code);
        if (r == 0 && m0_req_query(req, "size"))
                r = m0_req_query_int(req, "size", 0, 65536, &size);
        if (r < 0)
                return r;
        struct burst *b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        b->n = m0_req_query(req, "thread") ? -n : n;
        b->code = code;
        b->size = size;
        b->hold = m0_req_query(req, "hold") != NULL;
        r = m0_res_websocket(res, &burst_cb, b);
        if (r < 0) {
                free(b);
                return r;
        }
        atomic_fetch_add(&accepted, 1);
        return m0_req_query(req, "fail") ? -EIO : 0; /* the state is on_close's from here */
}

static int counts(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)state;
        return m0_res_json(res, 200, "{\"accepted\":%ld,\"opened\":%ld,\"closed\":%ld}",
                           atomic_load(&accepted), atomic_load(&opened), atomic_load(&closed));
}

static const char *const allowed[] = {"https://allowed.example", NULL};

static const m0_route routes[] = {
        M0_ROUTE("GET", "/echo", echo),
        M0_ROUTE("GET", "/flood", flood),
        {.method = "GET", .path = "/origins", .handler = echo, .ws_origins = allowed},
        M0_ROUTE("GET", "/pool", echo, M0_ROUTE_BLOCKING),
        M0_ROUTE("GET", "/follow", follow),
        M0_ROUTE("POST", "/publish", publish),
        M0_ROUTE("GET", "/burst", burst),
        M0_ROUTE("GET", "/counts", counts),
        M0_ROUTE_END,
};

int main(int argc, char **argv)
{
        static const m0_app app = {.name = "ws_check", .routes = routes};
        return m0_main(&app, argc, argv);
}
