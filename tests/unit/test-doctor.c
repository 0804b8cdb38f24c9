/* SPDX-License-Identifier: MIT */
/* test-doctor.c: the doctor's report (doctor.c): its tables of checks and routes, its verdict and
 * the exit serving would give, and the JSON line that says the same (SPEC D1, R2, T3). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "cors.h"
#include "doctor.h"
#include "host-private.h"
#include "route.h"
#include "unit.h"

static int any(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)state;
        return m0_res_text(res, 200, "x");
}

static const m0_route routes[] = {
        {"GET", "/a/:id", any, 0},
        {"POST", "/b", any, M0_ROUTE_BLOCKING, 64, "application/json"},
        {NULL, NULL, NULL, 0},
};
static const m0_app app = {.name = "unit", .routes = routes};
static struct m0_host host;

static void setup(void)
{
        char *argv[] = {"unit", "--threads", "2", "--blocking-threads", "3", NULL};
        char *envp[] = {NULL};
        char err[256];
        FILE *devnull = fopen("/dev/null", "w");
        memset(&host, 0, sizeof(host));
        ck_assert_int_eq(
                m0__config_parse(&host.cfg, "unit", 5, argv, envp, devnull, err, sizeof(err)),
                M0_CONFIG_SERVE);
        fclose(devnull);
        host.app = &app;
        host.sockets.store_fd = -1;
        ck_assert_int_eq(m0__router_build(&host.router, &app, &host.cfg), 0);
        ck_assert_int_eq(m0__cors_build(&host.cors, app.cors), 0);
}

static void teardown(void)
{
        m0__router_free(&host.router);
}

/* The report for `checks`, and what it returns. */
static char *report(const struct m0_check *checks, size_t n, int first, int *code)
{
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        ck_assert_ptr_nonnull(out);
        *code = m0__doctor(&host, checks, n, first, out);
        fclose(out);
        return text;
}

/* The line of `text` that starts with `prefix`, exactly one. */
static char *line(const char *text, const char *prefix)
{
        char *found = NULL;
        for (const char *p = text; p && *p;) {
                const char *e = strchr(p, '\n');
                size_t n = e ? (size_t)(e - p) : strlen(p);
                if (!strncmp(p, prefix, strlen(prefix))) {
                        ck_assert_msg(!found, "two lines start with '%s'", prefix);
                        found = strndup(p, n);
                }
                p = e ? e + 1 : NULL;
        }
        ck_assert_msg(found != NULL, "no line starts with '%s' in:\n%s", prefix, text);
        return found;
}

#define LINE_IS(text, prefix, want)                                                                \
        do {                                                                                       \
                char *l_ = line(text, prefix);                                                     \
                ck_assert_str_eq(l_, want);                                                        \
                free(l_);                                                                          \
        } while (0)

static const struct m0_check two[] = {
        {.name = "sockets", .ok = true, .detail = "none passed: would bind 127.0.0.1:8080"},
        {.name = "bus",
         .ok = false,
         .detail = "M0_BUS='mysql://x' is not a PostgreSQL connection URI",
         .fix = "set M0_BUS to local"},
};

/* R2, D1: a failing check is its row with the fix, the verdict is a refusal and the exit 78. */
START_TEST(a_failing_check_is_a_refusal_with_its_fix)
{
        int code;
        char *text = report(two, 2, 1, &code);
        ck_assert_int_eq(code, 78);
        LINE_IS(text, "check sockets",
                "check sockets                  ok    none passed: would bind 127.0.0.1:8080");
        LINE_IS(text, "check bus",
                "check bus                      FAIL  M0_BUS='mysql://x' is not a PostgreSQL "
                "connection URI (set M0_BUS to local)");
        LINE_IS(text, "verdict:", "verdict: refused (exit 78)");
        free(text);
}
END_TEST

START_TEST(every_check_ok_would_serve)
{
        int code;
        char *text = report(two, 1, -1, &code);
        ck_assert_int_eq(code, 0);
        LINE_IS(text, "verdict:", "verdict: would serve (exit 0)");
        ck_assert_ptr_null(strstr(text, "check bus"));
        free(text);
}
END_TEST

/* T3: the compiled table, in the order routes are tried; the topology the knobs give. */
START_TEST(the_routes_and_the_topology)
{
        int code;
        char *text = report(two, 1, -1, &code);
        char *head = line(text, "routes:");
        ck_assert_msg(!strncmp(head, "routes: 2 compiled into ", 24) &&
                              strstr(head, " trie nodes; dispatch: none (404)"),
                      "%s", head);
        free(head);
        LINE_IS(text, "  route 0:",
                "  route 0: GET /a/:id  pattern, captures id, body at most 4194304 bytes");
        LINE_IS(text, "  route 1:",
                "  route 1: POST /b  exact, blocking, body at most 64 bytes, body of type "
                "application/json");
        LINE_IS(text, "topology:",
                "topology: 2 loops, 6 pool threads, no producer, 8 handlers, 2 compute threads");
        free(text);
}
END_TEST

/* The last line is JSON that says the same: the checks, and the exit. */
START_TEST(the_json_line_says_the_same)
{
        int code;
        char *text = report(two, 2, 1, &code);
        size_t n = strlen(text);
        ck_assert(n > 1 && text[n - 1] == '\n');
        text[n - 1] = '\0';
        const char *last = strrchr(text, '\n');
        ck_assert_ptr_nonnull(last);
        json_error_t err;
        json_t *o = json_loads(last + 1, 0, &err);
        ck_assert_msg(o != NULL, "%s: %s", err.text, last + 1);
        ck_assert_int_eq(json_integer_value(json_object_get(o, "exit")), 78);
        ck_assert_str_eq(json_string_value(json_object_get(o, "app")), "unit");
        json_t *checks = json_object_get(o, "checks");
        ck_assert_uint_eq(json_array_size(checks), 2);
        json_t *bus = json_array_get(checks, 1);
        ck_assert_str_eq(json_string_value(json_object_get(bus, "name")), "bus");
        ck_assert(json_is_false(json_object_get(bus, "ok")));
        ck_assert_str_eq(json_string_value(json_object_get(bus, "fix")), "set M0_BUS to local");
        ck_assert(json_is_true(json_object_get(json_array_get(checks, 0), "ok")));
        json_decref(o);
        free(text);
}
END_TEST

static Suite *doctor_suite(void)
{
        Suite *s = suite_create("doctor");
        TCase *tc = tcase_create("doctor");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, a_failing_check_is_a_refusal_with_its_fix);
        tcase_add_test(tc, every_check_ok_would_serve);
        tcase_add_test(tc, the_routes_and_the_topology);
        tcase_add_test(tc, the_json_line_says_the_same);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(doctor_suite());
}
