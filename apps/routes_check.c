/* SPDX-License-Identifier: MIT */
/* routes_check: the app the routing tests drive (SPEC T1-T3, Q5, Q6, H8): patterns and their
 * captures, the order rule both ways, per-route body bounds and types, CORS, and routes from
 * the environment for the refusals. Not installed. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <m0.h>

#include "common.h"

/* "name=value" for each capture asked, then the route's tag: what the tests compare. */
static int say(m0_req *req, m0_res *res, const char *tag, const char *const *names)
{
        int r = app_where(req, res);
        if (r == 0)
                r = m0_res_status(res, 200);
        if (r == 0)
                r = m0_res_header(res, "Content-Type", "text/plain; charset=utf-8");
        if (r == 0)
                r = m0_res_printf(res, "%s", tag);
        for (size_t i = 0; r == 0 && names && names[i]; i++) {
                const char *v = m0_req_param(req, names[i]);
                r = m0_res_printf(res, " %s=%s", names[i], v ? v : "(none)");
        }
        if (r == 0 && m0_req_param(req, "nothing-by-that-name"))
                r = m0_res_printf(res, " a capture nobody named");
        return r < 0 ? r : m0_res_printf(res, "\n");
}

#define ROUTE(fn, tag, ...)                                                                        \
        static int fn(m0_req *req, m0_res *res, void *state)                                       \
        {                                                                                          \
                static const char *const names[] = {__VA_ARGS__};                                  \
                (void)state;                                                                       \
                return say(req, res, tag, names);                                                  \
        }

ROUTE(health, "ok", NULL)
ROUTE(todos, "todos", NULL)
ROUTE(todo, "todo", "id", NULL)
ROUTE(todo_delete, "deleted", "id", NULL)
ROUTE(todos_export, "export", NULL)
ROUTE(files_export, "files export", NULL)
ROUTE(files, "files", "rest", NULL)
ROUTE(post, "post", "uid", "pid", NULL)
ROUTE(custom_options, "custom options", NULL)
ROUTE(custom, "custom", NULL)
ROUTE(a_x_b, "a/:x/b", "x", NULL)
ROUTE(a_c_y, "a/c/:y", "y", NULL)
ROUTE(user_prefix, "user prefix", "uid", NULL)
ROUTE(extra, "extra", NULL)

/* The body back, after the route's captures: what the per-route bounds let through. */
static int echo(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        size_t len;
        const void *body = m0_req_body(req, &len);
        const char *id = m0_req_param(req, "id");
        int r = app_where(req, res);
        if (r == 0)
                r = m0_res_header(res, "Content-Type", "application/octet-stream");
        if (r == 0 && id)
                r = m0_res_printf(res, "id=%s ", id);
        return r < 0 ? r : m0_res_write(res, body, len);
}

static int any(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        int r = app_where(req, res);
        return r < 0 ? r : m0_res_json(res, 200, "{\"any\":\"%s\"}\n", m0_req_method(req));
}

static int prefix(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        int r = app_where(req, res);
        return r < 0 ? r : m0_res_json(res, 200, "{\"static\":\"%s\"}\n", m0_req_path(req));
}

static int events(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        int r = app_where(req, res);
        return r < 0 ? r : m0_res_stream(res);
}

/* M0_ROUTESCHECK_DISPATCH=1: what no route's path matches. */
static int dispatch(m0_req *req, m0_res *res, void *state)
{
        (void)state;
        int r = app_where(req, res);
        return r < 0 ? r
                     : m0_res_json(res, 200, "{\"dispatch\":\"%s %s\"}\n", m0_req_method(req),
                                   m0_req_path(req));
}

/* The table the tests read by index: the order is part of what they check (T3). */
static const m0_route base[] = {
        {"GET", "/health", health, 0},
        {"GET", "/todos", todos, 0},
        {"POST", "/todos", echo, 0, 64, "application/json"},
        {"GET", "/todos/:id", todo, 0},
        {"PATCH", "/todos/:id", echo, 0, 64, "application/json"},
        {"DELETE", "/todos/:id", todo_delete, 0},
        /* after /todos/:id: a GET of /todos/export is the capture's; a PUT is this route's */
        {"GET", "/todos/export", todos_export, 0},
        {"PUT", "/todos/export", todos_export, 0},
        /* before the rest capture of /files/: /files/export is this route's */
        {"GET", "/files/export", files_export, 0},
        {"GET", "/files/*rest", files, 0},
        {"GET", "/users/:uid/posts/:pid", post, 0},
        {"POST", "/upload", echo, 0, 16},
        {"PUT", "/upload", echo, 0},
        {"GET", "/static/", prefix, M0_ROUTE_PREFIX},
        {"OPTIONS", "/custom", custom_options, 0},
        {"GET", "/custom", custom, 0},
        {"GET", "/events", events, 0},
        {"GET", "/pool/:id", todo, M0_ROUTE_BLOCKING},
        {NULL, "/any", any, 0},
        {"GET", "/a/:x/b", a_x_b, 0},
        {"GET", "/a/c/:y", a_c_y, 0},
        {"GET", "/u/:uid/", user_prefix, M0_ROUTE_PREFIX},
        {"POST", "/big", echo, 0, 1u << 30},
};
#define NBASE (sizeof(base) / sizeof(base[0]))

/* One route of M0_ROUTESCHECK_EXTRA: "METHOD<TAB>PATH[<TAB>word...]", METHOD "-" for NULL, the
 * words prefix, blocking, nohandler, flags=N, max=N, type=T. Its strings are the environment's. */
static void extra_route(char *line, m0_route *r)
{
        char *save = NULL;
        char *method = strtok_r(line, "\t", &save);
        char *path = strtok_r(NULL, "\t", &save);
        r->method = method && strcmp(method, "-") ? method : NULL;
        r->path = path ? path : "";
        r->handler = extra;
        for (char *w; (w = strtok_r(NULL, "\t", &save));) {
                if (!strcmp(w, "prefix"))
                        r->flags |= M0_ROUTE_PREFIX;
                else if (!strcmp(w, "blocking"))
                        r->flags |= M0_ROUTE_BLOCKING;
                else if (!strcmp(w, "nohandler"))
                        r->handler = NULL;
                else if (!strncmp(w, "flags=", 6))
                        r->flags = (unsigned)strtoul(w + 6, NULL, 0);
                else if (!strncmp(w, "max=", 4))
                        r->max_body_bytes = strtoull(w + 4, NULL, 10);
                else if (!strncmp(w, "type=", 5))
                        r->content_type = w + 5;
        }
}

/* The base table, then one route per line of M0_ROUTESCHECK_EXTRA. */
static m0_route *table(void)
{
        const char *env = getenv("M0_ROUTESCHECK_EXTRA");
        char *extra_text = env ? strdup(env) : NULL;
        size_t n = NBASE + 1;
        for (const char *p = extra_text; p && *p; p++)
                n += *p == '\n';
        n += extra_text && *extra_text ? 1 : 0;
        m0_route *t = calloc(n, sizeof(*t));
        if (!t)
                return NULL;
        memcpy(t, base, sizeof(base));
        size_t i = NBASE;
        char *save = NULL;
        for (char *ln = extra_text ? strtok_r(extra_text, "\n", &save) : NULL; ln;
             ln = strtok_r(NULL, "\n", &save))
                extra_route(ln, &t[i++]);
        return t; /* the strings live until the process ends */
}

/* M0_ROUTESCHECK_CORS: "*" or origins separated by ',' (an empty entry stays one). */
static m0_cors *cors(void)
{
        const char *env = getenv("M0_ROUTESCHECK_CORS");
        if (!env)
                return NULL;
        static m0_cors c;
        char *text = strdup(env);
        size_t n = 2;
        for (const char *p = env; *p; p++)
                n += *p == ',';
        const char **list = calloc(n, sizeof(*list));
        if (!text || !list)
                return NULL;
        size_t i = 0;
        for (char *p = text, *comma; p; p = comma ? comma + 1 : NULL) {
                comma = strchr(p, ',');
                if (comma)
                        *comma = '\0';
                if (*p || comma)
                        list[i++] = p;
        }
        c.origins = strcmp(env, "none") ? list : NULL;
        c.credentials = (int)app_env_long("M0_ROUTESCHECK_CORS_CREDENTIALS", 0, 0);
        c.max_age = (unsigned)app_env_long("M0_ROUTESCHECK_CORS_MAX_AGE", 0, 0);
        c.expose_headers = getenv("M0_ROUTESCHECK_CORS_EXPOSE");
        return &c;
}

int main(int argc, char **argv)
{
        static m0_app app = {.name = "routes_check"};
        app.routes = table();
        app.cors = cors();
        if (app_env_long("M0_ROUTESCHECK_DISPATCH", 0, 0) == 1)
                app.dispatch = dispatch;
        if (!app.routes) {
                fprintf(stderr, "routes_check: no memory for the route table\n");
                return 1;
        }
        return m0_main(&app, argc, argv);
}
