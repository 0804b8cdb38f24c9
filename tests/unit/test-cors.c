/* SPDX-License-Identifier: MIT */
/* test-cors.c: the app's CORS (SPEC Q5): every refusal of its origins, which origin is
 * allowed, and the exact lines of an answer and of a preflight's. */
#include <errno.h>

#include "buf.h"
#include "cors.h"
#include "unit.h"

static struct m0_cors_c c;
static struct m0_buf out;

static void teardown(void)
{
        m0__buf_free(&out);
}

static int build(const char *const *origins, int credentials, const char *expose)
{
        m0_cors def = {.origins = origins, .credentials = credentials, .expose_headers = expose};
        return m0__cors_build(&c, &def);
}

START_TEST(refusals)
{
        static const struct {
                const char *origin;
                const char *err;
        } rows[] = {
                {"null", "the origin 'null' is what sandboxed documents, file: pages and "
                         "redirects send: allowing it allows them all"},
                {"https://app.example/", "the origin 'https://app.example/' cannot match: it "
                                         "has a path (an origin ends after its host and port)"},
                {"https://app.example/x", "the origin 'https://app.example/x' cannot match: it "
                                          "has a path (an origin ends after its host and port)"},
                {"HTTPS://app.example", "the origin 'HTTPS://app.example' cannot match: it does "
                                        "not begin with a lower-case scheme"},
                {"https://App.example", "the origin 'https://App.example' cannot match: it holds "
                                        "a byte browsers never send in an origin (upper case, "
                                        "'@', ...)"},
                {"app.example", "the origin 'app.example' cannot match: it has no \"://\" after "
                                "its scheme"},
                {"https://", "the origin 'https://' cannot match: it has no host"},
                {"https://a:", "the origin 'https://a:' cannot match: its port is not 1 to 5 "
                               "digits"},
                {"https://a:123456", "the origin 'https://a:123456' cannot match: its port is "
                                     "not 1 to 5 digits"},
                {"https://u@a", "the origin 'https://u@a' cannot match: it holds a byte browsers "
                                "never send in an origin (upper case, '@', ...)"},
                {"https://[::1", "the origin 'https://[::1' cannot match: its IPv6 address is not "
                                 "closed by ']'"},
                {"", "the origin '' cannot match: it does not begin with a lower-case scheme"},
        };
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                const char *list[] = {"https://ok.example", rows[i].origin, NULL};
                ck_assert_int_eq(build(list, 0, NULL), -EINVAL);
                ck_assert_str_eq(c.err, rows[i].err);
                ck_assert(!c.on);
                ck_assert_str_ne(c.fix, "");
        }
        const char *none[] = {NULL};
        ck_assert_int_eq(build(none, 0, NULL), -EINVAL);
        ck_assert_str_eq(c.err, "cors names no origin");
        ck_assert_int_eq(build(NULL, 0, NULL), -EINVAL);
        ck_assert_str_eq(c.err, "cors names no origin");
        const char *star[] = {"*", NULL};
        ck_assert_int_eq(build(star, 1, NULL), -EINVAL);
        ck_assert_str_eq(c.err, "credentials with '*': a browser refuses them from every origin, "
                                "and m0 never sends Access-Control-Allow-Credentials with '*'");
        const char *mixed[] = {"https://a.example", "*", NULL};
        ck_assert_int_eq(build(mixed, 0, NULL), -EINVAL);
        ck_assert_str_eq(c.err, "'*' with other origins: '*' already allows every origin");
        const char *one[] = {"https://a.example", NULL};
        ck_assert_int_eq(build(one, 0, "Location, a b"), -EINVAL);
        ck_assert_str_eq(c.err, "expose_headers 'Location, a b' is not a list of header names");
        ck_assert_int_eq(build(one, 0, "Location,"), -EINVAL);
        /* and what is taken */
        const char *good[] = {"https://a.example", "http://localhost:5173", "http://[::1]:8080",
                              "app+x.y-z://h", NULL};
        ck_assert_int_eq(build(good, 1, "Location, ETag"), 0);
        ck_assert(c.on && !c.any && c.credentials);
        ck_assert_uint_eq(c.max_age, 600);
        ck_assert_uint_eq(c.norigins, 4);
        ck_assert_int_eq(m0__cors_build(&c, NULL), 0);
        ck_assert(!c.on);
        ck_assert_str_eq(c.err, "");
}
END_TEST

START_TEST(allowed)
{
        const char *list[] = {"https://a.example", "http://localhost:5173", NULL};
        ck_assert_int_eq(build(list, 0, NULL), 0);
        ck_assert_str_eq(m0__cors_allowed(&c, "https://a.example", 17), "https://a.example");
        ck_assert_ptr_eq(m0__cors_allowed(&c, "https://a.example", 17), list[0]);
        ck_assert_ptr_null(m0__cors_allowed(&c, "https://a.example", 16));
        ck_assert_ptr_null(m0__cors_allowed(&c, "https://a.examplex", 18));
        ck_assert_ptr_null(m0__cors_allowed(&c, "null", 4));
        ck_assert_ptr_null(m0__cors_allowed(&c, NULL, 0));
        const char *star[] = {"*", NULL};
        ck_assert_int_eq(build(star, 0, NULL), 0);
        ck_assert_str_eq(m0__cors_allowed(&c, "null", 4), "*");
        ck_assert_ptr_null(m0__cors_allowed(&c, NULL, 0)); /* no origin: no cross-origin call */
}
END_TEST

START_TEST(lines)
{
        const char *list[] = {"https://a.example", NULL};
        ck_assert_int_eq(build(list, 1, "Location"), 0);
        ck_assert_int_eq(m0__cors_answer(&c, "https://a.example", 17, &out), 0);
        ck_assert_buf_lit(out, "Vary: Origin\r\n"
                               "Access-Control-Allow-Origin: https://a.example\r\n"
                               "Access-Control-Allow-Credentials: true\r\n"
                               "Access-Control-Expose-Headers: Location\r\n");
        out.len = 0;
        ck_assert_int_eq(m0__cors_answer(&c, "https://b.example", 17, &out), 0);
        ck_assert_buf_lit(out, "Vary: Origin\r\n");
        out.len = 0;
        static const char rh[] = "Content-Type,X-Request-ID ,  x-b";
        ck_assert_int_eq(m0__cors_preflight(&c, "https://a.example", 17, "GET, HEAD, OPTIONS", rh,
                                            sizeof(rh) - 1, &out),
                         0);
        ck_assert_buf_lit(out, "Vary: Origin, Access-Control-Request-Headers\r\n"
                               "Access-Control-Allow-Origin: https://a.example\r\n"
                               "Access-Control-Allow-Credentials: true\r\n"
                               "Access-Control-Allow-Methods: GET, HEAD, OPTIONS\r\n"
                               "Access-Control-Allow-Headers: content-type, x-request-id, x-b\r\n"
                               "Access-Control-Max-Age: 600\r\n");
        out.len = 0;
        static const char bad[] = "x-a, x\"b";
        ck_assert_int_eq(
                m0__cors_preflight(&c, "https://a.example", 17, "GET", bad, sizeof(bad) - 1, &out),
                0);
        ck_assert_ptr_null(strstr(out.data, "Allow-Headers"));
        out.len = 0;
        ck_assert_int_eq(m0__cors_preflight(&c, "https://z.example", 17, "GET", NULL, 0, &out), 0);
        ck_assert_buf_lit(out, "Vary: Origin, Access-Control-Request-Headers\r\n");
        const char *star[] = {"*", NULL};
        m0_cors def = {.origins = star, .max_age = 86400};
        ck_assert_int_eq(m0__cors_build(&c, &def), 0);
        out.len = 0;
        ck_assert_int_eq(m0__cors_answer(&c, NULL, 0, &out), 0);
        ck_assert_buf_lit(out, "Access-Control-Allow-Origin: *\r\n");
        out.len = 0;
        ck_assert_int_eq(m0__cors_preflight(&c, "null", 4, "GET", NULL, 0, &out), 0);
        ck_assert_buf_lit(out, "Vary: Origin, Access-Control-Request-Headers\r\n"
                               "Access-Control-Allow-Origin: *\r\n"
                               "Access-Control-Allow-Methods: GET\r\n"
                               "Access-Control-Max-Age: 86400\r\n");
}
END_TEST

static Suite *cors_suite(void)
{
        Suite *s = suite_create("cors");
        TCase *tc = tcase_create("cors");
        tcase_add_checked_fixture(tc, NULL, teardown);
        tcase_add_test(tc, refusals);
        tcase_add_test(tc, allowed);
        tcase_add_test(tc, lines);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(cors_suite());
}
