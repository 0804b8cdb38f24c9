/* SPDX-License-Identifier: MIT */
/* bench_app: what benches M11 (SPEC WS7) and M12 (SPEC SF5) drive, beside the peers that answer
 * the same paths (contrib/bench/ws-node.js, nginx, h2o):
 *
 *   GET /echo                 a WebSocket that sends every message back as it came
 *   GET /follow?channel=NAME  a WebSocket that follows the channel (WS2's messages)
 *   GET /events?channel=NAME  an event stream that follows the channel (N1)
 *   POST /publish?channel=NAME&n=N   publishes the body N times (default 1) as event "message"
 *   GET /f/NAME               the files of M0_BENCH_WWW (SF1); no route when it is unset
 *   GET /json                 the bytes of the file M0_BENCH_JSON as application/json, which the
 *                             host compresses (SF4); no route when it is unset
 *   GET /health               200
 *
 * Not installed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <m0.h>

static void echo_message(m0_ws *ws, int type, const void *data, size_t len, void *state)
{
        (void)state;
        (void)m0_ws_send(ws, type, data, len);
}

static const m0_ws_callbacks echo_cb = {.on_message = echo_message};

static int echo(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)state;
        return m0_res_websocket(res, &echo_cb, NULL);
}

static int follow(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        const char *ch = m0_req_query(req, "channel");
        int r = m0_res_subscribe(res, ch ? ch : "bench");
        return r < 0 ? r : m0_res_websocket(res, NULL, NULL);
}

static int events(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        const char *ch = m0_req_query(req, "channel");
        return m0_res_subscribe(res, ch ? ch : "bench");
}

static int publish(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        const char *ch = m0_req_query(req, "channel");
        long n = 1;
        int r = m0_req_query(req, "n") ? m0_req_query_int(req, "n", 1, 1000000, &n) : 0;
        if (r < 0)
                return r;
        size_t len;
        const char *body = m0_req_body(req, &len);
        char *data = strndup(body ? body : "", len); /* m0_publish takes a string */
        if (!data)
                return -ENOMEM;
        int64_t id = 0;
        for (long i = 0; i < n && id >= 0; i++)
                id = m0_publish(ch ? ch : "bench", "message", data, 0);
        free(data);
        if (id < 0)
                return (int)id;
        return m0_res_json(res, 200, "{\"id\":%lld}", (long long)id);
}

static char *json_body; /* M0_BENCH_JSON's bytes, read once in main() */
static size_t json_len;

static int json(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)state;
        int r = m0_res_header(res, "Content-Type", "application/json");
        return r < 0 ? r : m0_res_write(res, json_body, json_len);
}

static int health(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)state;
        return m0_res_text(res, 200, "ok\n");
}

#define FIRST_FREE 5 /* the first of the ends main() may fill in */

static m0_route routes[] = {
        M0_ROUTE("GET", "/echo", echo),
        M0_ROUTE("GET", "/follow", follow),
        M0_ROUTE("GET", "/events", events),
        M0_ROUTE("POST", "/publish", publish),
        M0_ROUTE("GET", "/health", health),
        M0_ROUTE_END, /* room for /f/ and /json, else ends */
        M0_ROUTE_END,
        M0_ROUTE_END,
        M0_ROUTE_END,
};

static int read_json(const char *path)
{
        FILE *f = fopen(path, "rb");
        if (!f)
                return -errno;
        int r = 0;
        if (fseek(f, 0, SEEK_END) < 0 || (long)(json_len = (size_t)ftell(f)) < 0 ||
            fseek(f, 0, SEEK_SET) < 0)
                r = -errno;
        else if (!(json_body = malloc(json_len ? json_len : 1)))
                r = -ENOMEM;
        else if (fread(json_body, 1, json_len, f) != json_len)
                r = -EIO;
        fclose(f);
        return r;
}

int main(int argc, char **argv)
{
        const char *www = getenv("M0_BENCH_WWW"), *js = getenv("M0_BENCH_JSON");
        int at = FIRST_FREE;
        if (www && *www)
                routes[at++] = (m0_route)M0_FILES("/f/*rest", www);
        if (js && *js) {
                int r = read_json(js);
                if (r < 0) {
                        fprintf(stderr, "bench_app: M0_BENCH_JSON=%s: %s\n", js, strerror(-r));
                        return 78;
                }
                routes[at++] = (m0_route)M0_ROUTE("GET", "/json", json);
        }
        static const m0_app app = {.name = "bench_app", .routes = routes};
        return m0_main(&app, argc, argv);
}
