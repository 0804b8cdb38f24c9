/* SPDX-License-Identifier: MIT */
/* test-route.c: the route table compiled and matched (SPEC T1-T3): every refusal, captures and
 * their decoding, the order rule both ways, Allow, and the trie against the slow reference on
 * random tables; files routes' refusals and roots (SF1). */
#include <errno.h>
#include <fcntl.h>

#include "config.h"
#include "request.h"
#include "route.h"
#include "unit.h"

#include "../fuzz/route-ref.h"

static int h1(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)res;
        (void)state;
        return 0;
}

static struct m0_config cfg = {.max_body_bytes = 4096};
static struct m0_router rt;

static int build(const m0_route *routes)
{
        m0_app app = {.name = "t", .routes = routes};
        m0__router_free(&rt);
        return m0__router_build(&rt, &app, &cfg);
}

static void teardown(void)
{
        m0__router_free(&rt);
}

/* The route index `path` goes to for `method`, or -1. */
static int route_of(const char *method, const char *path, struct m0_match *m)
{
        m0__router_match(&rt, method ? m0__method_number(method) : -1, path, strlen(path), m);
        return m->route ? (int)m->route->index : -1;
}

static const char *allow_of(const char *path)
{
        static char out[512];
        struct m0_match m;
        (void)route_of(NULL, path, &m);
        m0__router_allow(&rt, m.allow, out, sizeof(out));
        return out;
}

START_TEST(refusals_name_the_route)
{
        static const struct {
                const char *method, *path;
                unsigned flags;
                const char *err, *fix;
        } rows[] = {
                {"GET", "/a/:id/:id", 0, "the capture name 'id' appears twice",
                 "give each capture of a route its own name"},
                {"GET", "/a/*rest/b", 0, "a '*' capture before the end of the path",
                 "put the '*' capture last: /files/*rest"},
                {"GET", "/a/:", 0, "a ':' capture without a name",
                 "name every capture: /todos/:id, /files/*rest"},
                {"GET", "/a/*", 0, "a '*' capture without a name",
                 "name every capture: /todos/:id, /files/*rest"},
                {"GET", "/a/:i-d", 0, "the capture name 'i-d' holds '-'",
                 "a capture's name is letters, digits and '_'"},
                {"GET", "a", 0, "the path does not begin with '/'", "begin the path with '/'"},
                {"GET", "", 0, "the path does not begin with '/'", "begin the path with '/'"},
                {"GET", "/a?b", 0, "the path holds the byte 0x3f",
                 "a path is visible ASCII without '?' or '#'"},
                {"GET", "/a#b", 0, "the path holds the byte 0x23",
                 "a path is visible ASCII without '?' or '#'"},
                {"GET", "/a b", 0, "the path holds the byte 0x20",
                 "a path is visible ASCII without '?' or '#'"},
                {"GET", "/caf\xc3\xa9", 0, "the path holds the byte 0xc3",
                 "a path is visible ASCII without '?' or '#'"},
                {"get", "/a", 0, "'get' is not a method m0 serves",
                 "use a method m0 serves, in upper case: GET, POST, PUT, PATCH, DELETE, ..."},
                {"CONNECT", "/a", 0, "'CONNECT' is not a method m0 serves",
                 "use a method m0 serves, in upper case: GET, POST, PUT, PATCH, DELETE, ..."},
                {"GET", "/a", 1u << 4, "unknown flags 0x10", "use the M0_ROUTE_* flags only"},
                {"GET", "/a/:id", M0_ROUTE_PREFIX,
                 "M0_ROUTE_PREFIX with a capture as its last segment",
                 "end a prefix route with a literal, or use *name"},
                {"GET", "/a/*rest", M0_ROUTE_PREFIX, "M0_ROUTE_PREFIX with a '*' capture",
                 "drop M0_ROUTE_PREFIX: *name takes the rest already"},
        };
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                m0_route t[] = {{"GET", "/ok", h1, 0},
                                {rows[i].method, rows[i].path, h1, rows[i].flags},
                                {NULL, NULL, NULL, 0}};
                ck_assert_int_eq(build(t), -EINVAL);
                char want[400];
                snprintf(want, sizeof(want), "route 1 (%s %s): %s", rows[i].method, rows[i].path,
                         rows[i].err);
                ck_assert_str_eq(rt.err, want);
                ck_assert_str_eq(rt.fix, rows[i].fix);
                ck_assert_uint_eq(rt.nroutes, 1); /* what compiled before it */
        }
        m0_route nohandler[] = {{NULL, "/a", NULL, 0}, {NULL, NULL, NULL, 0}};
        ck_assert_int_eq(build(nohandler), -EINVAL);
        ck_assert_str_eq(rt.err, "route 0 (* /a): no handler");
        m0_route type[] = {{"POST", "/a", h1, 0, 0, "json"}, {NULL, NULL, NULL, 0}};
        ck_assert_int_eq(build(type), -EINVAL);
        ck_assert_str_eq(rt.err, "route 0 (POST /a): content_type 'json' is not type/subtype");
}
END_TEST

START_TEST(refusals_of_size)
{
        char path[512] = "";
        for (int i = 0; i < 17; i++)
                snprintf(path + strlen(path), sizeof(path) - strlen(path), "/:p%d", i);
        m0_route t[] = {{"GET", path, h1, 0}, {NULL, NULL, NULL, 0}};
        ck_assert_int_eq(build(t), -EINVAL);
        ck_assert_str_eq(rt.fix, "split the route");
        ck_assert_ptr_nonnull(strstr(rt.err, ": more than 16 captures"));
        path[0] = '\0';
        for (int i = 0; i < 65; i++)
                strcat(path, "/a");
        ck_assert_int_eq(build(t), -EINVAL);
        ck_assert_ptr_nonnull(strstr(rt.err, ": more than 64 segments"));
        strcpy(path, "/:");
        memset(path + 2, 'n', 65);
        path[67] = '\0';
        ck_assert_int_eq(build(t), -EINVAL);
        ck_assert_ptr_nonnull(strstr(rt.err, ": a capture name of 65 bytes (64 at most)"));
        /* at the bounds it compiles */
        path[66] = '\0';
        ck_assert_int_eq(build(t), 0);
}
END_TEST

START_TEST(captures_and_the_order_rule)
{
        static const m0_route t[] = {
                {"GET", "/todos", h1, 0},                /* 0 */
                {"GET", "/todos/:id", h1, 0},            /* 1 */
                {"GET", "/todos/export", h1, 0},         /* 2: after the capture */
                {"PUT", "/todos/export", h1, 0},         /* 3 */
                {"GET", "/files/export", h1, 0},         /* 4: before the capture */
                {"GET", "/files/*rest", h1, 0},          /* 5 */
                {"GET", "/u/:a/p/:b", h1, 0},            /* 6 */
                {NULL, "/static/", h1, M0_ROUTE_PREFIX}, /* 7 */
                {"GET", "/", h1, 0},                     /* 8 */
                {NULL, NULL, NULL, 0},
        };
        ck_assert_int_eq(build(t), 0);
        struct m0_match m;
        ck_assert_int_eq(route_of("GET", "/todos", &m), 0);
        ck_assert_int_eq(route_of("HEAD", "/todos", &m), 0);
        ck_assert_int_eq(route_of("GET", "/todos/42", &m), 1);
        ck_assert_uint_eq(m.nparams, 1);
        ck_assert_uint_eq(m.off[0], 7);
        ck_assert_uint_eq(m.len[0], 2);
        ck_assert_int_eq(route_of("GET", "/todos/export", &m), 1);
        ck_assert_int_eq(route_of("PUT", "/todos/export", &m), 3);
        ck_assert_int_eq(route_of("GET", "/files/export", &m), 4);
        ck_assert_uint_eq(m.nparams, 0);
        ck_assert_int_eq(route_of("GET", "/files/export/x", &m), 5);
        ck_assert_uint_eq(m.off[0], 7);
        ck_assert_uint_eq(m.len[0], 8);
        ck_assert_int_eq(route_of("GET", "/files/", &m), 5);
        ck_assert_uint_eq(m.len[0], 0);
        ck_assert_int_eq(route_of("GET", "/files", &m), -1);
        ck_assert(!m.path_known);
        ck_assert_int_eq(route_of("GET", "/u/1/p/22", &m), 6);
        ck_assert_uint_eq(m.nparams, 2);
        ck_assert_uint_eq(m.off[1], 7);
        ck_assert_uint_eq(m.len[1], 2);
        ck_assert_int_eq(route_of("DELETE", "/static/a/b", &m), 7);
        ck_assert_int_eq(route_of("GET", "/static", &m), -1);
        ck_assert_int_eq(route_of("GET", "/", &m), 8);
        ck_assert_int_eq(route_of("GET", "/todos/", &m), -1);
        /* 405's raw material */
        ck_assert_int_eq(route_of("POST", "/todos/export", &m), -1);
        ck_assert(m.path_known);
        ck_assert_str_eq(allow_of("/todos/export"), "GET, HEAD, PUT, OPTIONS");
        ck_assert_str_eq(allow_of("/todos"), "GET, HEAD, OPTIONS");
        ck_assert_str_eq(allow_of("/static/x"), "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS");
        ck_assert_str_eq(allow_of("/nothing"), "OPTIONS");
}
END_TEST

START_TEST(whole_paths_and_the_trie_agree)
{
        /* /a/b is exact, and a pattern matches it too: the whole-path table must not take it */
        static const m0_route t[] = {
                {"GET", "/a/:x", h1, 0},             /* 0 */
                {"POST", "/a/b", h1, 0},             /* 1 */
                {"GET", "/c/d", h1, 0},              /* 2: exact alone */
                {"GET", "/c/", h1, M0_ROUTE_PREFIX}, /* 3: ... no: this prefix takes /c/d too */
                {"GET", "/e", h1, 0},                /* 4 */
                {NULL, NULL, NULL, 0},
        };
        ck_assert_int_eq(build(t), 0);
        struct m0_match m;
        ck_assert_int_eq(route_of("GET", "/a/b", &m), 0);
        ck_assert_int_eq(route_of("POST", "/a/b", &m), 1);
        ck_assert_int_eq(route_of("DELETE", "/a/b", &m), -1);
        ck_assert_str_eq(allow_of("/a/b"), "GET, HEAD, POST, OPTIONS");
        ck_assert_int_eq(route_of("GET", "/c/d", &m), 2);
        ck_assert_int_eq(route_of("GET", "/c/e", &m), 3);
        ck_assert_int_eq(route_of("GET", "/e", &m), 4);
        ck_assert_int_eq(route_of("GET", "/E", &m), -1);
        /* only /e is found whole; the others need the trie */
        uint32_t whole = 0;
        for (uint32_t i = 0; i <= rt.pmask; i++)
                whole += rt.paths[i].path != NULL;
        ck_assert_uint_eq(whole, 1);
}
END_TEST

START_TEST(decoding)
{
        static const struct {
                const char *in;
                unsigned flags;
                ssize_t len;
                const char *out;
        } rows[] = {
                {"a%20b", M0__PCT_STRICT, 3, "a b"},
                {"a+b", M0__PCT_STRICT, 3, "a+b"},
                {"a+b", M0__PCT_PLUS, 3, "a b"},
                {"caf%C3%a9", M0__PCT_STRICT, 5, "caf\xc3\xa9"},
                {"a%2Fb", M0__PCT_STRICT, 3, "a/b"},
                {"a%2Fb", M0__PCT_STRICT | M0__PCT_NO_SLASH, -EINVAL, NULL},
                {"a%2fb", M0__PCT_STRICT | M0__PCT_NO_SLASH, -EINVAL, NULL},
                {"a%00", M0__PCT_STRICT, -EINVAL, NULL},
                {"a%00", M0__PCT_PLUS, 2, "a\0"}, /* a query keeps it; its index copes */
                {"%zz", M0__PCT_STRICT, -EINVAL, NULL},
                {"%zz", 0, 3, "%zz"},
                {"ab%4", M0__PCT_STRICT, -EINVAL, NULL},
                {"ab%4", 0, 4, "ab%4"},
                {"%", M0__PCT_STRICT, -EINVAL, NULL},
                {".", M0__PCT_STRICT, -EINVAL, NULL},
                {"..", M0__PCT_STRICT, -EINVAL, NULL},
                {"...", M0__PCT_STRICT, 3, "..."},
                {"%2e", M0__PCT_STRICT, -EINVAL, NULL},
                {"a/../b", M0__PCT_STRICT, -EINVAL, NULL},
                {"a/./b", M0__PCT_STRICT, -EINVAL, NULL},
                {"a/..", M0__PCT_STRICT, -EINVAL, NULL},
                {"a%2F..", M0__PCT_STRICT, -EINVAL, NULL},
                {"a/.b/c.", M0__PCT_STRICT, 7, "a/.b/c."},
                {"a//b/", M0__PCT_STRICT, 5, "a//b/"},
                {"", M0__PCT_STRICT, 0, ""},
                {"..", 0, 2, ".."},
                /* D110: a capture never begins with '/', literal or encoded */
                {"/etc/passwd", M0__PCT_STRICT | M0__PCT_RELATIVE, -EINVAL, NULL},
                {"%2Fetc%2Fpasswd", M0__PCT_STRICT | M0__PCT_RELATIVE, -EINVAL, NULL},
                {"%2f%2Froot", M0__PCT_STRICT | M0__PCT_RELATIVE, -EINVAL, NULL},
                {"a//b/", M0__PCT_STRICT | M0__PCT_RELATIVE, 5, "a//b/"},
                {"a%2F%2Fb", M0__PCT_STRICT | M0__PCT_RELATIVE, 4, "a//b"},
                {"", M0__PCT_STRICT | M0__PCT_RELATIVE, 0, ""},
                {"/a", M0__PCT_STRICT, 2, "/a"},
                /* D251: nothing to decode, the same verdicts */
                {"./a", M0__PCT_STRICT, -EINVAL, NULL},
                {"a/.", M0__PCT_STRICT, -EINVAL, NULL},
                {"../", M0__PCT_STRICT, -EINVAL, NULL},
                {"a/../", M0__PCT_STRICT | M0__PCT_RELATIVE, -EINVAL, NULL},
                {".a/..b/b.", M0__PCT_STRICT, 9, ".a/..b/b."},
                {"/", M0__PCT_STRICT, 1, "/"},
                {"/", M0__PCT_STRICT | M0__PCT_RELATIVE, -EINVAL, NULL},
                {"/", 0, 1, "/"},
                {"a+b/.", 0, 5, "a+b/."},
                {"1k.bin", M0__PCT_STRICT | M0__PCT_RELATIVE | M0__PCT_NO_SLASH, 6, "1k.bin"},
        };
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                char out[32];
                size_t n = strlen(rows[i].in);
                ssize_t got = m0__pct_decode(rows[i].in, n, out, rows[i].flags);
                ck_assert_msg(got == rows[i].len, "%s: %zd", rows[i].in, got);
                ck_assert_int_eq(m0__pct_decode(rows[i].in, n, NULL, rows[i].flags), got);
                if (got >= 0)
                        ck_assert_bytes(out, (size_t)got, rows[i].out, (size_t)got);
        }
}
END_TEST

START_TEST(bind_and_param)
{
        static const m0_route t[] = {{"GET", "/u/:uid/f/*rest", h1, 0}, {NULL, NULL, NULL, 0}};
        ck_assert_int_eq(build(t), 0);
        m0_req req;
        memset(&req, 0, sizeof(req));
        struct m0_match m;
        const char *path = "/u/a%20b/f/x%2Fy/z";
        ck_assert_int_eq(route_of("GET", path, &m), 0);
        ck_assert_int_eq(m0__req_bind(&req, path, &m), 0);
        ck_assert_str_eq(m0_req_param(&req, "uid"), "a b");
        ck_assert_str_eq(m0_req_param(&req, "rest"), "x/y/z");
        ck_assert_ptr_null(m0_req_param(&req, "ui"));
        ck_assert_ptr_null(m0_req_param(&req, "uidx"));
        ck_assert_ptr_null(m0_req_param(&req, ""));
        /* %2F is taken in *rest, refused in :uid */
        path = "/u/a%2Fb/f/x";
        ck_assert_int_eq(route_of("GET", path, &m), 0);
        ck_assert_int_eq(m0__req_bind(&req, path, &m), -EINVAL);
        ck_assert_int_eq(m0__req_bind(NULL, path, &m), -EINVAL);
        /* *rest never begins with '/', whether the client wrote it or encoded it (D110) */
        static const char *const rooted[] = {"/u/a/f//etc/passwd", "/u/a/f/%2Fetc%2Fpasswd",
                                             "/u/a/f/%2F%2Froot", "/u/a/f/%2f"};
        for (size_t i = 0; i < sizeof(rooted) / sizeof(rooted[0]); i++) {
                ck_assert_int_eq(route_of("GET", rooted[i], &m), 0);
                ck_assert_int_eq(m0__req_bind(&req, rooted[i], &m), -EINVAL);
                ck_assert_int_eq(m0__req_bind(NULL, rooted[i], &m), -EINVAL);
        }
        path = "/u/a/f/x//y";
        ck_assert_int_eq(route_of("GET", path, &m), 0);
        ck_assert_int_eq(m0__req_bind(&req, path, &m), 0);
        ck_assert_str_eq(m0_req_param(&req, "rest"), "x//y");
        /* a route without captures, and dispatch */
        m.route = NULL;
        ck_assert_int_eq(m0__req_bind(&req, path, &m), 0);
        ck_assert_ptr_null(m0_req_param(&req, "uid"));
        m0__buf_free(&req.params);
}
END_TEST

/* Random tables of a few segment atoms, so that paths collide with patterns often. */
static const char *const atoms[] = {"a", "b", "ab", "", ":x", ":y", ":z", "*r", "*s"};
static const char *const pathsegs[] = {"a", "b", "ab", "", "c", "a%2Fb", "ba"};
static const char *const meth[] = {NULL, "GET", "POST", "PUT", "HEAD", "OPTIONS"};

static uint32_t lcg(uint32_t *s)
{
        *s = *s * 1103515245u + 12345u;
        return *s >> 8;
}

START_TEST(random_tables_against_the_reference)
{
        uint32_t seed = 20261130;
        char paths[24][64];
        m0_route t[25];
        size_t tables = 0, queries = 0;
        for (int round = 0; round < 3000; round++) {
                size_t n = 1 + lcg(&seed) % 24;
                for (size_t i = 0; i < n; i++) {
                        size_t segs = 1 + lcg(&seed) % 4;
                        paths[i][0] = '\0';
                        for (size_t k = 0; k < segs; k++) {
                                const char *a = atoms[lcg(&seed) % 9];
                                if (a[0] == '*' && k + 1 < segs)
                                        a = "a";
                                /* a capture's name ends in its position: no duplicates */
                                size_t at = strlen(paths[i]);
                                if (a[0] == ':' || a[0] == '*')
                                        snprintf(paths[i] + at, 64 - at, "/%s%zu", a, k);
                                else
                                        snprintf(paths[i] + at, 64 - at, "/%s", a);
                        }
                        bool prefix = lcg(&seed) % 7 == 0;
                        char *last = strrchr(paths[i], '/');
                        if (prefix && (last[1] == ':' || last[1] == '*'))
                                prefix = false;
                        t[i] = (m0_route){meth[lcg(&seed) % 6], paths[i], h1,
                                          prefix ? M0_ROUTE_PREFIX : 0};
                }
                t[n] = (m0_route){NULL, NULL, NULL, 0};
                ck_assert_msg(build(t) == 0, "%s", rt.err);
                tables++;
                for (int q = 0; q < 40; q++) {
                        char path[64] = "";
                        size_t segs = lcg(&seed) % 5;
                        for (size_t k = 0; k < segs || k == 0; k++)
                                snprintf(path + strlen(path), 64 - strlen(path), "/%s",
                                         pathsegs[lcg(&seed) % 7]);
                        const char *mn = meth[lcg(&seed) % 6];
                        int m = mn ? m0__method_number(mn) : -1;
                        struct m0_match got;
                        struct ref_match want;
                        m0__router_match(&rt, m, path, strlen(path), &got);
                        ref_match(t, n, m, path, strlen(path), &want);
                        const char *d = ref_differs(&got, &want);
                        ck_assert_msg(!d, "round %d, %s %s: %s (trie %d, reference %d)", round,
                                      mn ? mn : "-", path, d,
                                      got.route ? (int)got.route->index : -1, want.route);
                        queries++;
                }
        }
        ck_assert_uint_eq(tables, 3000);
        ck_assert_uint_eq(queries, 120000);
}
END_TEST

START_TEST(two_hundred_routes)
{
        /* T1: many siblings under one node, and many subtrees; each is found */
        static char paths[200][32];
        static m0_route t[201];
        for (int i = 0; i < 200; i++) {
                snprintf(paths[i], sizeof(paths[i]), i % 2 ? "/x/e%d" : "/api/v%d/items/:id", i);
                t[i] = (m0_route){"GET", paths[i], h1, 0};
        }
        t[200] = (m0_route){NULL, NULL, NULL, 0};
        ck_assert_int_eq(build(t), 0);
        struct m0_match m;
        for (int i = 0; i < 200; i++) {
                char p[40];
                snprintf(p, sizeof(p), i % 2 ? "/x/e%d" : "/api/v%d/items/7", i);
                ck_assert_int_eq(route_of("GET", p, &m), i);
        }
        ck_assert_int_eq(route_of("GET", "/x/e200", &m), -1);
        ck_assert_int_eq(route_of("GET", "/api/v1/items/7", &m), -1);
}
END_TEST

START_TEST(allow_order_and_any)
{
        static const m0_route t[] = {
                {"DELETE", "/r", h1, 0}, {"PROPFIND", "/r", h1, 0}, {"OPTIONS", "/r", h1, 0},
                {"POST", "/r", h1, 0},   {"GET", "/r", h1, 0},      {NULL, NULL, NULL, 0},
        };
        ck_assert_int_eq(build(t), 0);
        ck_assert_str_eq(allow_of("/r"), "GET, HEAD, POST, DELETE, PROPFIND, OPTIONS");
        char out[512];
        m0__router_allow(&rt, rt.methods, out, sizeof(out));
        ck_assert_str_eq(out, "GET, HEAD, POST, DELETE, PROPFIND, OPTIONS");
        m0__router_allow(&rt, M0__M_ANY, out, sizeof(out));
        ck_assert_str_eq(out, "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS");
        /* a short buffer ends at a whole method */
        m0__router_allow(&rt, rt.methods, out, 12);
        ck_assert_str_eq(out, "GET, HEAD");
        ck_assert_int_eq(m0__method_number("M-SEARCH"), HTTP_MSEARCH);
        ck_assert_int_eq(m0__method_number("PRI"), -1);
}
END_TEST

START_TEST(per_route_bounds)
{
        static const m0_route t[] = {
                {"POST", "/small", h1, 0, 16},
                {"POST", "/big", h1, 0, 1u << 20},
                {"POST", "/default", h1, 0, 0, "application/json"},
                {NULL, NULL, NULL, 0},
        };
        ck_assert_int_eq(build(t), 0);
        ck_assert_uint_eq(rt.routes[0].max_body, 16);
        ck_assert_uint_eq(rt.routes[1].max_body, 4096); /* never past --max-body-bytes */
        ck_assert_uint_eq(rt.routes[2].max_body, 4096);
        ck_assert_str_eq(rt.routes[2].ctype, "application/json");
}
END_TEST

/* An app of dispatch alone: nothing to compile, nothing matches, OPTIONS * lists the common
 * methods (found by fuzz-route: the empty table reached qsort() with NULL, which UBSan stops). */
START_TEST(no_routes)
{
        m0_app app = {.name = "t", .dispatch = h1};
        m0__router_free(&rt);
        ck_assert_int_eq(m0__router_build(&rt, &app, &cfg), 0);
        ck_assert_uint_eq(rt.nroutes, 0);
        struct m0_match m;
        ck_assert_int_eq(route_of("GET", "/", &m), -1);
        ck_assert(!m.path_known);
        char out[512];
        m0__router_allow(&rt, rt.methods, out, sizeof(out));
        ck_assert_str_eq(out, "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS");
}
END_TEST

/* SF1, D200: a files route's refusals, and its root opened at compile time and closed after */
START_TEST(files_routes)
{
        static const struct {
                m0_route r;
                const char *err;
        } rows[] = {
                {{.method = "GET", .path = "/a/*rest", .handler = h1, .files = "/tmp"},
                 "route 0 (GET /a/*rest): a route serves files or runs a handler, not both"},
                {{.method = "POST", .path = "/a/*rest", .files = "/tmp"},
                 "route 0 (POST /a/*rest): files are served to GET and HEAD, on a path without "
                 "M0_ROUTE_PREFIX"},
                {{.method = "GET", .path = "/a", .files = "/tmp", .flags = M0_ROUTE_PREFIX},
                 "route 0 (GET /a): files are served to GET and HEAD, on a path without "
                 "M0_ROUTE_PREFIX"},
                {{.method = "GET", .path = "/a/*rest", .files = "/tmp", .cache_control = "a\nb"},
                 "route 0 (GET /a/*rest): cache_control holds the byte 0x0a"},
                {M0_FILES("/a/*rest", "/nonexistent-m0"),
                 "route 0 (GET /a/*rest): files '/nonexistent-m0': No such file or directory"},
                {M0_FILES("/a/*rest", "/dev/null"),
                 "route 0 (GET /a/*rest): files '/dev/null': Not a directory"},
        };
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                m0_route t[] = {rows[i].r, M0_ROUTE_END};
                ck_assert_int_eq(build(t), -EINVAL);
                ck_assert_str_eq(rt.err, rows[i].err);
        }
        m0_route ok[] = {M0_ROUTE("GET", "/x", h1), M0_FILES("/a/*rest", "/tmp"),
                         M0_FILES("/one", "/etc/passwd"), M0_ROUTE_END};
        ck_assert_int_eq(build(ok), 0);
        ck_assert_int_eq(rt.routes[0].files_root, -1);
        ck_assert_ptr_eq(rt.routes[0].handler, h1);
        int root = rt.routes[1].files_root;
        ck_assert_int_ge(root, 0);
        ck_assert_ptr_null(rt.routes[1].files_name);
        ck_assert_int_ge(rt.routes[2].files_root, 0);
        ck_assert_str_eq(rt.routes[2].files_name, "passwd");
        ck_assert(rt.files);
        struct m0_match m;
        ck_assert_int_eq(route_of("HEAD", "/a/b/c", &m), 1);
        ck_assert_str_eq(allow_of("/a/b"), "GET, HEAD, OPTIONS");
        m0__router_free(&rt);
        ck_assert_int_eq(fcntl(root, F_GETFD), -1); /* closed with the table */
}
END_TEST

static Suite *route_suite(void)
{
        Suite *s = suite_create("route");
        TCase *tc = tcase_create("route");
        tcase_set_timeout(tc, 60);
        tcase_add_checked_fixture(tc, NULL, teardown);
        tcase_add_test(tc, refusals_name_the_route);
        tcase_add_test(tc, refusals_of_size);
        tcase_add_test(tc, captures_and_the_order_rule);
        tcase_add_test(tc, whole_paths_and_the_trie_agree);
        tcase_add_test(tc, decoding);
        tcase_add_test(tc, bind_and_param);
        tcase_add_test(tc, random_tables_against_the_reference);
        tcase_add_test(tc, two_hundred_routes);
        tcase_add_test(tc, allow_order_and_any);
        tcase_add_test(tc, per_route_bounds);
        tcase_add_test(tc, no_routes);
        tcase_add_test(tc, files_routes);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(route_suite());
}
