/* SPDX-License-Identifier: MIT */
/* fuzz-request.c: libFuzzer harness over a connection's request path: bytes in, in random splits,
 * through a real loop and a real socket pair; the bytes out must be well-formed HTTP/1.1 answers.
 * Its routes read the query, headers, cookies (Q1), form bodies (Q2) and JSON bodies (Q3), and
 * the host's own answers go through an error callback (Q4). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include "bus.h"
#include "config.h"
#include "conn.h"
#include "host-private.h"
#include "hctx.h"

static int echo(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        size_t len;
        const void *body = m0_req_body(req, &len);
        const char *q = m0_req_query(req, "q");
        const char *h = m0_req_header(req, "x-probe");
        long n = 0;
        (void)m0_req_query_int(req, "n", -5, 5, &n);
        int r = m0_res_headerf(res, "x-q", "%zu", q ? strlen(q) : 0);
        if (r == 0 && h)
                r = m0_res_header(res, "x-probe-len", "1");
        if (r == 0)
                r = m0_res_write(res, body, len);
        return r;
}

static int json(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        const char *name = NULL, *value = NULL;
        int r = m0_res_json(res, 200, "{\"path\":");
        if (r == 0)
                r = m0_res_json_string(res, m0_req_path(req));
        for (size_t i = 0; r == 0 && m0_req_header_at(req, i, &name, &value) == 0; i++) {
                r = m0_res_printf(res, ",\"h%zu\":", i);
                if (r == 0)
                        r = m0_res_json_string(res, value);
        }
        return r == 0 ? m0_res_printf(res, "}") : r;
}

/* /cookie: the cookies a request names, each read back and set again (Q1). */
static int cookie(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        static const char *const names[] = {"a", "sid", "__Host-x", "", "a b"};
        int r = 0;
        for (size_t i = 0; r == 0 && i < sizeof(names) / sizeof(names[0]); i++) {
                const char *v = m0_req_cookie(req, names[i]);
                m0_cookie_attrs at = {.path = m0_req_query(req, "path"),
                                      .domain = m0_req_query(req, "domain"),
                                      .same_site = (m0_same_site)(i % 4),
                                      .secure = i & 1,
                                      .max_age = (int64_t)i - 1};
                /* a refusal is the builder's answer to bad input, not a failure */
                if (v && m0_res_cookie(res, names[i], v, &at) == -ENOMEM)
                        r = -ENOMEM;
        }
        return r;
}

/* /form: the fields of a form body (Q2), and the query beside them. */
static int form(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        static const char *const names[] = {"user", "password", "a", "", "x y"};
        int r = 0;
        for (size_t i = 0; r == 0 && i < sizeof(names) / sizeof(names[0]); i++) {
                const char *f = m0_req_form(req, names[i]), *q = m0_req_query(req, names[i]);
                r = m0_res_printf(res, "%zu %zu\n", f ? strlen(f) : 0, q ? strlen(q) : 0);
        }
        return r;
}

/* /jsonbody: the body through m0_req_json() and back out (Q3); its refusals passed on. */
static int jsonbody(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        json_t *j, *again;
        int r = m0_req_json(req, &j);
        if (r < 0)
                return r;
        if (m0_req_json(req, &again) != 0 || again != j)
                __builtin_trap(); /* the same value, owned by the request */
        return m0_res_json_value(res, 200, j);
}

/* The host's own answers through a callback (Q4): JSON for even statuses, a failure (and so the
 * built-in answer) for odd ones. */
static int on_error(m0_req *req, m0_res *res, int status, const char *detail, void *state)
{
        (void)state;
        if (status % 2)
                return -EIO;
        json_t *j =
                json_pack("{s:i,s:s,s:b}", "status", status, "detail", detail, "req", req != NULL);
        int r = j ? m0_res_json_value(res, status, j) : -ENOMEM;
        json_decref(j);
        return r;
}

static int events(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)state;
        return m0_res_stream(res);
}

/* A route's captures, each as its length: decoded, they stay within the path (T1). */
static int params(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        static const char *const names[] = {"id", "rest", "b"};
        int r = 0;
        for (size_t i = 0; r == 0 && i < sizeof(names) / sizeof(names[0]); i++) {
                const char *v = m0_req_param(req, names[i]);
                if (v && strlen(v) > strlen(m0_req_path(req)))
                        __builtin_trap();
                r = m0_res_printf(res, "%s=%zd ", names[i], v ? (ssize_t)strlen(v) : -1);
        }
        return r;
}

static const m0_route routes[] = {
        {NULL, "/echo", echo, 0},
        {"GET", "/json", json, M0_ROUTE_PREFIX},
        {"GET", "/events", events, 0},
        {NULL, "/cookie", cookie, 0},
        {NULL, "/form", form, 0},
        {NULL, "/jsonbody", jsonbody, 0},
        /* T1-T3, Q6: captures both ways of the order rule, a bound and a type of their own */
        {"GET", "/t/:id", params, 0},
        {"GET", "/t/x", json, 0},
        {"PUT", "/t/:id", echo, 0, 64, "application/json"},
        {"POST", "/t", echo, 0, 16},
        {"GET", "/f/exact", json, 0},
        {"GET", "/f/*rest", params, 0},
        {"OPTIONS", "/o/:id/:b", params, 0},
        {NULL, NULL, NULL, 0},
};

static const char *const origins[] = {"https://a.example", "http://localhost:8080", NULL};
static const m0_cors cors = {.origins = origins, .credentials = 1, .expose_headers = "Location"};
static const m0_app app = {.name = "fuzz", .routes = routes, .cors = &cors, .error = on_error};
static struct m0_host host;
static struct m0_hctx *loop;

static void setup(void)
{
        char *argv[] = {"fuzz",  "--max-head-bytes",
                        "2048",  "--max-uri-bytes",
                        "512",   "--max-header-fields",
                        "20",    "--max-body-bytes",
                        "4096",  "--max-output-bytes",
                        "16384", "--linger-ms",
                        "0",     NULL};
        char *envp[] = {NULL};
        char err[256];
        FILE *devnull = fopen("/dev/null", "w");
        if (m0__config_parse(&host.cfg, "fuzz", 13, argv, envp, devnull, err, sizeof(err)) !=
            M0_CONFIG_SERVE)
                abort();
        fclose(devnull);
        host.app = &app;
        if (m0__router_build(&host.router, &app, &host.cfg) < 0 ||
            m0__cors_build(&host.cors, app.cors) < 0)
                abort();
        host.serve.nloops = 1;
        host.sockets.store_fd = -1;
        loop = calloc(1, sizeof(*loop));
        host.serve.loops = loop;
        m0__host_link(&host);
        if (!loop || m0__bus_init(&host.bus, 1, 8, 8, 65536) < 0 ||
            m0__hctx_init(loop, &host.serve, 0) < 0)
                abort();
        m0__bus_global = &host.bus;
}

/*
 * Whether out[at..len) is a sequence of whole, well-framed answers (a stream may end it). An
 * answer to HEAD has its length and no body, and the harness does not know which requests were
 * HEAD: where the bytes after a head with a length start another answer, both readings are
 * tried, since a body (an echo's) may itself begin with "HTTP/1.1 ".
 */
static bool framed(const char *out, size_t len, size_t at)
{
        while (at < len) {
                if (len - at < 17 || memcmp(out + at, "HTTP/1.1 ", 9) != 0)
                        return false;
                const char *end = memmem(out + at, len - at, "\r\n\r\n", 4);
                if (!end)
                        return false; /* a head cut short */
                size_t head = (size_t)(end - (out + at)) + 4;
                int status = atoi(out + at + 9);
                if (status < 100 || status > 599)
                        return false;
                if (memmem(out + at, head, "text/event-stream", 17))
                        return true; /* the rest is the stream's */
                const char *cl = memmem(out + at, head, "\r\nContent-Length: ", 18);
                size_t body = 0;
                if (cl)
                        body = strtoul(cl + 18, NULL, 10);
                else if (status >= 200 && status != 204 && status != 304)
                        return false; /* every final answer carries its length (H4) */
                at += head;
                if (body && (at == len || (len - at >= 9 && !memcmp(out + at, "HTTP/1.1 ", 9)))) {
                        if (framed(out, len, at))
                                return true; /* a HEAD's answer: the next one follows at once */
                }
                if (body > len - at)
                        return false; /* a body cut short */
                at += body;
        }
        return true;
}

static void verify(const char *out, size_t len)
{
        if (!framed(out, len, 0))
                __builtin_trap();
}

static void pump(int peer, char **out, size_t *len, size_t *cap)
{
        for (int i = 0; i < 4; i++)
                (void)m0__hctx_run_once(loop, 0);
        for (;;) {
                if (*cap - *len < 65536) {
                        *cap = *cap * 2 + 65536;
                        *out = realloc(*out, *cap);
                        if (!*out)
                                abort();
                }
                ssize_t n = read(peer, *out + *len, *cap - *len);
                if (n <= 0)
                        break;
                *len += (size_t)n;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (!loop)
                setup();
        if (size < 1)
                return 0;
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
                return 0;
        atomic_fetch_add(&loop->load, 1);
        atomic_fetch_add(&host.serve.conns, 1);
        if (m0__conn_admit(loop, sv[0]) < 0) {
                close(sv[1]);
                return 0;
        }
        /* The first byte seeds the split points: the same bytes arrive cut in other places. */
        unsigned seed = data[0];
        const uint8_t *p = data + 1;
        size_t left = size - 1;
        char *out = NULL;
        size_t len = 0, cap = 0;
        while (left) {
                seed = seed * 1103515245u + 12345u;
                size_t chunk = 1 + (seed >> 16) % 97;
                if (chunk > left)
                        chunk = left;
                ssize_t w = write(sv[1], p, chunk);
                if (w > 0) {
                        p += w;
                        left -= (size_t)w;
                }
                pump(sv[1], &out, &len, &cap);
                if (w < 0 && errno != EAGAIN)
                        break;
                if (atomic_load(&loop->load) == 0)
                        break; /* the host closed: what is left would not be read */
        }
        shutdown(sv[1], SHUT_WR);
        for (int i = 0; i < 8 && atomic_load(&loop->load); i++)
                pump(sv[1], &out, &len, &cap);
        verify(out, len);
        /* Whatever is still open (a stream, a head waiting for its timeout) is closed now. */
        struct m0_conn *c;
        while ((c = M0__LIST_FIRST(&loop->streams, struct m0_conn, slink)))
                m0__conn_close(c);
        /* those filed in a timer class, and those on the run queue (the loop's own sources there
         * keep their places, D85) */
        m0__conn_cut_all(loop);
        m0__conn_reap(loop);
        if (atomic_load(&loop->load) != 0)
                __builtin_trap(); /* a connection the loop lost track of */
        close(sv[1]);
        free(out);
        return 0;
}
