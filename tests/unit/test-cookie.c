/* SPDX-License-Identifier: MIT */
/* test-cookie.c: cookies (SPEC Q1): the Cookie fields as m0_req_cookie() reads them, and the
 * Set-Cookie m0_res_cookie() builds or refuses. */
#include <errno.h>

#include "unit-req.h"

static struct m0_config cfg;
static struct m0_res res;

static void setup(void)
{
        unit_config(&cfg);
        unit_res_init(&res);
}

static void teardown(void)
{
        unit_res_free(&res);
}

/* A GET carrying the given header lines ("Cookie: a=b\r\n…"). */
static void parse_cookies(struct parsed *p, const char *lines)
{
        char head[4096];
        snprintf(head, sizeof(head), "GET /c HTTP/1.1\r\nHost: h\r\n%s\r\n", lines);
        parse_head(p, &cfg, head);
}

START_TEST(cookie_pairs)
{
        struct parsed p;
        parse_cookies(&p, "Cookie: sid=abc123; theme=dark;lang=fr ;  empty=; q=\"quoted\"; "
                          "eq=a=b; \t tabbed=\tx\t ;  sid=second\r\n"
                          "Accept: */*\r\n"
                          "cookie: late=1; theme=light\r\n");
        m0_req *req = &p.req;
        ck_assert_str_eq(m0_req_cookie(req, "sid"), "abc123"); /* the first of two */
        ck_assert_str_eq(m0_req_cookie(req, "theme"), "dark");
        ck_assert_str_eq(m0_req_cookie(req, "lang"), "fr");
        ck_assert_str_eq(m0_req_cookie(req, "empty"), "");
        ck_assert_str_eq(m0_req_cookie(req, "q"), "quoted"); /* quotes stripped */
        ck_assert_str_eq(m0_req_cookie(req, "eq"), "a=b");   /* the first '=' splits */
        ck_assert_str_eq(m0_req_cookie(req, "tabbed"), "x");
        ck_assert_str_eq(m0_req_cookie(req, "late"), "1"); /* a second Cookie field is read */
        ck_assert_ptr_null(m0_req_cookie(req, "absent"));
        ck_assert_ptr_null(m0_req_cookie(req, "SID")); /* names are case-sensitive */
        ck_assert_ptr_null(m0_req_cookie(req, ""));
        ck_assert_ptr_null(m0_req_cookie(req, "a b")); /* not a token */
        ck_assert_ptr_null(m0_req_cookie(req, NULL));
        /* the query and the header are left alone; pointers stay put */
        const char *sid = m0_req_cookie(req, "sid");
        (void)m0_req_query(req, "x");
        ck_assert_ptr_eq(m0_req_cookie(req, "sid"), sid);
        ck_assert_str_eq(m0_req_header(req, "Cookie"),
                         "sid=abc123; theme=dark;lang=fr ;  empty=; q=\"quoted\"; eq=a=b; \t "
                         "tabbed=\tx\t ;  sid=second");
        parsed_free(&p);

        parse_cookies(&p, "");
        ck_assert_ptr_null(m0_req_cookie(&p.req, "sid"));
        parsed_free(&p);
}
END_TEST

/* A value outside RFC 6265's octets is no value: the first cookie of that name decides, and a
 * good one after a bad one is not read. Parts that are not pairs are passed over. */
START_TEST(cookie_malformed)
{
        static const char *const bad[] = {
                "v=a b",      "v=a,b",     "v=a\\b",        "v=\"a", "v=a\"",
                "v=\"a\"b\"", "v=\"a b\"", "v=caf\xc3\xa9", "v=\"",  "v=a\"\"b",
        };
        struct parsed p;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char lines[256];
                snprintf(lines, sizeof(lines), "Cookie: k=1; %s; v=good; z=2\r\n", bad[i]);
                parse_cookies(&p, lines);
                ck_assert_msg(m0_req_cookie(&p.req, "v") == NULL, "%s read as '%s'", bad[i],
                              m0_req_cookie(&p.req, "v"));
                ck_assert_str_eq(m0_req_cookie(&p.req, "k"), "1");
                ck_assert_str_eq(m0_req_cookie(&p.req, "z"), "2");
                parsed_free(&p);
        }
        parse_cookies(&p, "Cookie: ; ;novalue; =nameless; ok=1;;\r\n");
        ck_assert_str_eq(m0_req_cookie(&p.req, "ok"), "1");
        ck_assert_ptr_null(m0_req_cookie(&p.req, "novalue"));
        parsed_free(&p);
        /* "" is a value: two quotes around nothing */
        parse_cookies(&p, "Cookie: e=\"\"\r\n");
        ck_assert_str_eq(m0_req_cookie(&p.req, "e"), "");
        parsed_free(&p);
}
END_TEST

/* One Set-Cookie per call, its attributes in one order. */
START_TEST(set_cookie_lines)
{
        m0_cookie_attrs a = {.max_age = 3600,
                             .path = "/",
                             .domain = "example.com",
                             .secure = true,
                             .http_only = true,
                             .same_site = M0_SAMESITE_STRICT};
        ck_assert_int_eq(m0_res_cookie(&res, "sid", "v1", &a), 0);
        ck_assert_int_eq(m0_res_cookie(&res, "plain", "", NULL), 0);
        m0_cookie_attrs gone = {.max_age = M0_COOKIE_DELETE, .path = "/app"};
        ck_assert_int_eq(m0_res_cookie(&res, "old", "", &gone), 0);
        m0_cookie_attrs none = {.same_site = M0_SAMESITE_NONE, .secure = true};
        ck_assert_int_eq(m0_res_cookie(&res, "x", "!#$%&'()*+-./:<=>?@[]^_`{|}~", &none), 0);
        m0_cookie_attrs lax = {.same_site = M0_SAMESITE_LAX, .domain = ".Sub-1.example.org"};
        ck_assert_int_eq(m0_res_cookie(&res, "__Host-id", "1",
                                       &(m0_cookie_attrs){.secure = true, .path = "/"}),
                         0);
        ck_assert_int_eq(m0_res_cookie(&res, "__Secure-id", "2", &(m0_cookie_attrs){.secure = 1}),
                         0);
        ck_assert_int_eq(m0_res_cookie(&res, "l", "3", &lax), 0);
        ck_assert_buf_lit(res.head,
                          "Set-Cookie: sid=v1; HttpOnly; SameSite=Strict; Path=/; "
                          "Domain=example.com; Max-Age=3600; Secure\r\n"
                          "Set-Cookie: plain=\r\n"
                          "Set-Cookie: old=; Path=/app; Max-Age=0\r\n"
                          "Set-Cookie: x=!#$%&'()*+-./:<=>?@[]^_`{|}~; SameSite=None; Secure\r\n"
                          "Set-Cookie: __Host-id=1; Path=/; Secure\r\n"
                          "Set-Cookie: __Secure-id=2; Secure\r\n"
                          "Set-Cookie: l=3; SameSite=Lax; Domain=.Sub-1.example.org\r\n");
        ck_assert_uint_eq(res.nheaders, 7);
}
END_TEST

/* Every refusal is -EINVAL (or -ENOBUFS for a size), and adds nothing. */
START_TEST(set_cookie_refusals)
{
        struct {
                const char *name, *value;
                m0_cookie_attrs a;
                int err;
        } cases[] = {
                {"", "v", {0}, -EINVAL},
                {"a b", "v", {0}, -EINVAL},
                {"a;b", "v", {0}, -EINVAL},
                {"a=b", "v", {0}, -EINVAL},
                {"a\r\nX-Evil", "v", {0}, -EINVAL},
                {"k", "a b", {0}, -EINVAL},
                {"k", "a;b", {0}, -EINVAL},
                {"k", "a,b", {0}, -EINVAL},
                {"k", "\"q\"", {0}, -EINVAL},
                {"k", "a\\b", {0}, -EINVAL},
                {"k", "a\r\nSet-Cookie: evil=1", {0}, -EINVAL},
                {"k", "caf\xc3\xa9", {0}, -EINVAL},
                {"k", "\x7f", {0}, -EINVAL},
                {"k", "v", {.path = "/a; Domain=evil.com"}, -EINVAL},
                {"k", "v", {.path = "/a\r\nX: y"}, -EINVAL},
                {"k", "v", {.path = "/a\x01"}, -EINVAL},
                {"k", "v", {.path = "/\xc3\xa9"}, -EINVAL},
                {"k", "v", {.path = "relative"}, -EINVAL},
                {"k", "v", {.path = ""}, -EINVAL},
                {"k", "v", {.domain = "evil.com; Secure"}, -EINVAL},
                {"k", "v", {.domain = "a b.com"}, -EINVAL},
                {"k", "v", {.domain = ""}, -EINVAL},
                {"k", "v", {.domain = "..."}, -EINVAL},
                {"k", "v", {.domain = "ex\xc3\xa4mple.com"}, -EINVAL},
                {"k", "v", {.same_site = M0_SAMESITE_NONE}, -EINVAL},
                {"k", "v", {.same_site = (m0_same_site)4}, -EINVAL},
                {"k", "v", {.same_site = (m0_same_site)-1}, -EINVAL},
                {"k", "v", {.max_age = -2}, -EINVAL},
                {"__Secure-k", "v", {0}, -EINVAL},
                {"__secure-k", "v", {0}, -EINVAL},
                {"__Host-k", "v", {.secure = true}, -EINVAL},
                {"__Host-k", "v", {.secure = true, .path = "/a"}, -EINVAL},
                {"__Host-k", "v", {.secure = true, .path = "/", .domain = "a.com"}, -EINVAL},
                {"__Host-k", "v", {.path = "/"}, -EINVAL},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                ck_assert_msg(m0_res_cookie(&res, cases[i].name, cases[i].value, &cases[i].a) ==
                                      cases[i].err,
                              "case %zu (%s=%s)", i, cases[i].name, cases[i].value);
        ck_assert_int_eq(m0_res_cookie(&res, NULL, "v", NULL), -EINVAL);
        ck_assert_int_eq(m0_res_cookie(&res, "k", NULL, NULL), -EINVAL);

        /* sizes browsers drop: 4096 bytes of name and value, 1024 of a path or a domain */
        char big[5000];
        memset(big, 'v', sizeof(big));
        big[4096 - 1] = '\0';
        ck_assert_int_eq(m0_res_cookie(&res, "k", big, NULL), 0); /* 1 + 4095 */
        big[4096 - 1] = 'v';
        big[4096] = '\0';
        ck_assert_int_eq(m0_res_cookie(&res, "k", big, NULL), -ENOBUFS);
        big[0] = '/';
        big[1024] = '\0';
        ck_assert_int_eq(m0_res_cookie(&res, "k", "v", &(m0_cookie_attrs){.path = big}), 0);
        big[1024] = 'v';
        big[1025] = '\0';
        ck_assert_int_eq(m0_res_cookie(&res, "k", "v", &(m0_cookie_attrs){.path = big}), -ENOBUFS);
        memset(big, 'd', 1025);
        ck_assert_int_eq(m0_res_cookie(&res, "k", "v", &(m0_cookie_attrs){.domain = big}),
                         -ENOBUFS);
        ck_assert_uint_eq(res.nheaders, 2);
}
END_TEST

/* What m0_res_cookie() writes, m0_req_cookie() reads back. */
START_TEST(round_trip)
{
        static const char value[] = "1.1700003600.5a5a.ff00!#$%&'()*+-./:<=>?@[]^_`{|}~";
        ck_assert_int_eq(m0_res_cookie(&res, "sid", value,
                                       &(m0_cookie_attrs){.path = "/", .http_only = true}),
                         0);
        char lines[512];
        /* "Set-Cookie: " off, the attributes off: what a browser sends back */
        snprintf(lines, sizeof(lines), "Cookie: other=1; %.*s\r\n",
                 (int)(strchr(res.head.data, ';') - res.head.data - 12), res.head.data + 12);
        struct parsed p;
        parse_cookies(&p, lines);
        ck_assert_str_eq(m0_req_cookie(&p.req, "sid"), value);
        parsed_free(&p);
}
END_TEST

static Suite *cookie_suite(void)
{
        Suite *s = suite_create("cookie");
        TCase *tc = tcase_create("cookie");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, cookie_pairs);
        tcase_add_test(tc, cookie_malformed);
        tcase_add_test(tc, set_cookie_lines);
        tcase_add_test(tc, set_cookie_refusals);
        tcase_add_test(tc, round_trip);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(cookie_suite());
}
