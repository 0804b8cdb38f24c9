/* SPDX-License-Identifier: MIT */
/* test-request.c: what a handler reads of its request: query decoding, headers, accessors. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>

#include "response.h"
#include "route.h"
#include "unit-req.h"

static struct m0_config cfg;

/* "GET /p?<query> HTTP/1.1" with a Host; no '?' at all when query is NULL. */
static void parse_query(struct parsed *p, const char *query)
{
        char head[1024];
        snprintf(head, sizeof(head), "GET /p%s%s HTTP/1.1\r\nHost: h\r\n\r\n", query ? "?" : "",
                 query ? query : "");
        parse_head(p, &cfg, head);
}

static void setup(void)
{
        unit_config(&cfg);
}

START_TEST(accessors)
{
        struct parsed p;
        parse_head(&p, &cfg, "POST /a/b?x=1 HTTP/1.1\r\nHost: h\r\n\r\n");
        p.req.body = "hello";
        p.req.body_len = 5;
        p.req.loop = 3;
        p.req.thread = -1;
        ck_assert_str_eq(m0_req_method(&p.req), "POST");
        ck_assert_str_eq(m0_req_path(&p.req), "/a/b");
        ck_assert_str_eq(m0_req_query_string(&p.req), "x=1");
        size_t blen = 0;
        const void *body = m0_req_body(&p.req, &blen);
        ck_assert_uint_eq(blen, 5);
        ck_assert_bytes(body, blen, "hello", 5);
        ck_assert_int_eq(m0_req_loop(&p.req), 3);
        ck_assert_int_eq(m0_req_thread(&p.req), -1);
        parsed_free(&p);

        parse_query(&p, NULL);
        ck_assert_str_eq(m0_req_query_string(&p.req), "");
        parsed_free(&p);
}
END_TEST

START_TEST(query_decoding)
{
        struct parsed p;
        parse_query(&p, "a=1&b=hello+world&c=%41%42%63&d=%zz&e=%4&f&g=&a=2&h=%&i=100%25"
                        "&na%6De=v&x+y=sp&j=%2b%2B&k=%e2%82%ac&l=a=b");
        m0_req *req = &p.req;
        ck_assert_str_eq(m0_req_query(req, "a"), "1"); /* repeated: the first */
        ck_assert_str_eq(m0_req_query(req, "b"), "hello world");
        ck_assert_str_eq(m0_req_query(req, "c"), "ABc");
        ck_assert_str_eq(m0_req_query(req, "d"), "%zz"); /* malformed escapes stay as they are */
        ck_assert_str_eq(m0_req_query(req, "e"), "%4");
        ck_assert_str_eq(m0_req_query(req, "h"), "%");
        ck_assert_str_eq(m0_req_query(req, "f"), ""); /* no '=': present, empty */
        ck_assert_str_eq(m0_req_query(req, "g"), "");
        ck_assert_str_eq(m0_req_query(req, "i"), "100%");
        ck_assert_str_eq(m0_req_query(req, "name"), "v"); /* names are decoded too */
        ck_assert_ptr_null(m0_req_query(req, "na%6De"));
        ck_assert_str_eq(m0_req_query(req, "x y"), "sp");
        ck_assert_str_eq(m0_req_query(req, "j"), "++");
        ck_assert_str_eq(m0_req_query(req, "k"), "\xe2\x82\xac");
        ck_assert_str_eq(m0_req_query(req, "l"), "a=b"); /* the first '=' splits */
        ck_assert_ptr_null(m0_req_query(req, "zz"));
        ck_assert_ptr_null(m0_req_query(req, ""));
        ck_assert_ptr_null(m0_req_query(req, "A")); /* names are case-sensitive */
        /* the raw string is left alone */
        ck_assert_str_eq(m0_req_query_string(req),
                         "a=1&b=hello+world&c=%41%42%63&d=%zz&e=%4&f&g=&a=2&h=%&i=100%25"
                         "&na%6De=v&x+y=sp&j=%2b%2B&k=%e2%82%ac&l=a=b");
        /* returned strings stay put across later lookups */
        const char *b1 = m0_req_query(req, "b");
        (void)m0_req_query(req, "k");
        (void)m0_req_query(req, "nothing");
        ck_assert_ptr_eq(m0_req_query(req, "b"), b1);
        ck_assert_str_eq(b1, "hello world");
        parsed_free(&p);
}
END_TEST

START_TEST(query_empty_parts)
{
        struct parsed p;
        parse_query(&p, NULL);
        ck_assert_ptr_null(m0_req_query(&p.req, "a"));
        parsed_free(&p);

        parse_query(&p, "");
        ck_assert_ptr_null(m0_req_query(&p.req, "a"));
        parsed_free(&p);

        parse_query(&p, "&&a=1&&b=2&");
        ck_assert_str_eq(m0_req_query(&p.req, "a"), "1");
        ck_assert_str_eq(m0_req_query(&p.req, "b"), "2");
        parsed_free(&p);

        parse_query(&p, "a&b&c");
        ck_assert_str_eq(m0_req_query(&p.req, "a"), "");
        ck_assert_str_eq(m0_req_query(&p.req, "c"), "");
        parsed_free(&p);
}
END_TEST

/* A parameter with an empty name ("=x") is one parameter like any other: it must not end the
 * list and hide the parameters after it. */
START_TEST(query_empty_name)
{
        struct parsed p;
        parse_query(&p, "=x&k=v");
        ck_assert_str_eq(m0_req_query(&p.req, "k"), "v");
        parsed_free(&p);

        parse_query(&p, "a=1&=&b=2");
        ck_assert_str_eq(m0_req_query(&p.req, "a"), "1");
        ck_assert_str_eq(m0_req_query(&p.req, "b"), "2");
        parsed_free(&p);
}
END_TEST

/* A decoded NUL (%00) in one parameter must not shift or end the index of the others. */
START_TEST(query_encoded_nul)
{
        struct parsed p;
        parse_query(&p, "x=%00&k=v&y=a%00b&y=later");
        ck_assert_str_eq(m0_req_query(&p.req, "k"), "v");
        /* a value with a NUL in it has no C string: the first of its name reads as absent */
        ck_assert_ptr_null(m0_req_query(&p.req, "x"));
        ck_assert_ptr_null(m0_req_query(&p.req, "y"));
        parsed_free(&p);

        parse_query(&p, "a%00b=1&k=v");
        ck_assert_pstr_eq(m0_req_query(&p.req, "1"), NULL); /* a value is not a name */
        ck_assert_str_eq(m0_req_query(&p.req, "k"), "v");
        parsed_free(&p);
}
END_TEST

/* AP1: a number as the configuration's are (digits alone), and too small apart from too large. */
START_TEST(query_int)
{
        struct parsed p;
        parse_query(&p, "n=42&neg=-7&zero=0&big=99999999999999999999&word=abc&empty=&part=12x"
                        "&out=500&hex=0x10&plus=%2B5&sp=%205&tab=5%09&pls=+5&dup=1&dup=2"
                        "&bad=%zz&u=%C3%28&max=18446744073709551615&bare");
        m0_req *req = &p.req;
        long v = 12345;
        ck_assert_int_eq(m0_req_query_int(req, "n", 0, 100, &v), 0);
        ck_assert_int_eq(v, 42);
        ck_assert_int_eq(m0_req_query_int(req, "zero", 0, 0, &v), 0);
        ck_assert_int_eq(v, 0);
        ck_assert_int_eq(m0_req_query_int(req, "n", 42, 42, &v), 0); /* bounds included */
        ck_assert_int_eq(v, 42);
        ck_assert_int_eq(m0_req_query_int(req, "n", -10, 100, &v), 0);
        ck_assert_int_eq(v, 42);

        v = 12345;
        ck_assert_int_eq(m0_req_query_int(req, "missing", 0, 100, &v), -ENOENT);
        ck_assert_int_eq(m0_req_query_int(req, "word", 0, 100, &v), -EINVAL);
        ck_assert_int_eq(m0_req_query_int(req, "empty", 0, 100, &v), -EINVAL);
        ck_assert_int_eq(m0_req_query_int(req, "bare", 0, 100, &v), -EINVAL);
        ck_assert_int_eq(m0_req_query_int(req, "part", 0, 100, &v), -EINVAL);
        ck_assert_int_eq(m0_req_query_int(req, "hex", 0, 100, &v), -EINVAL);
        /* no sign, no space: "-7", "+5" (escaped or as '+', a space), " 5", "5\t" */
        ck_assert_int_eq(m0_req_query_int(req, "neg", -10, 10, &v), -EINVAL);
        ck_assert_int_eq(m0_req_query_int(req, "plus", 0, 10, &v), -EINVAL);
        ck_assert_int_eq(m0_req_query_int(req, "pls", 0, 10, &v), -EINVAL);
        ck_assert_int_eq(m0_req_query_int(req, "sp", 0, 10, &v), -EINVAL);
        ck_assert_int_eq(m0_req_query_int(req, "tab", 0, 10, &v), -EINVAL);
        /* too large, too small */
        ck_assert_int_eq(m0_req_query_int(req, "out", 0, 100, &v), -ERANGE);
        ck_assert_int_eq(m0_req_query_int(req, "n", 0, 41, &v), -ERANGE);
        ck_assert_int_eq(m0_req_query_int(req, "n", -5, -1, &v), -ERANGE);
        ck_assert_int_eq(m0_req_query_int(req, "big", LONG_MIN, LONG_MAX, &v), -ERANGE);
        ck_assert_int_eq(m0_req_query_int(req, "max", 0, LONG_MAX, &v), -ERANGE);
        ck_assert_int_eq(m0_req_query_int(req, "n", 43, 100, &v), -EDOM);
        ck_assert_int_eq(m0_req_query_int(req, "zero", 1, 100, &v), -EDOM);
        /* what m0_req_query_get() says */
        ck_assert_int_eq(m0_req_query_int(req, "dup", 0, 100, &v), -EEXIST);
        ck_assert_int_eq(m0_req_query_int(req, "bad", 0, 100, &v), -EBADMSG);
        ck_assert_int_eq(m0_req_query_int(req, "u", 0, 100, &v), -EILSEQ);
        ck_assert_int_eq(v, 12345); /* untouched on every failure */
        parsed_free(&p);
}
END_TEST

/* AP1: the query's one value, and each failure its own code; the last is what the host answers
 * (400, naming the parameter) when the handler returns it. */
START_TEST(query_get)
{
        struct parsed p;
        parse_query(&p, "a=1&dup=x&dup=y&bare&pct=%zz&nul=a%00b&u=%C3%28&e=%e2%82%ac&sp=a+b");
        m0_req *req = &p.req;
        const char *v = "untouched";
        ck_assert_int_eq(m0_req_query_get(req, "a", &v), 0);
        ck_assert_str_eq(v, "1");
        ck_assert_int_eq(m0_req_query_get(req, "bare", &v), 0);
        ck_assert_str_eq(v, "");
        ck_assert_int_eq(m0_req_query_get(req, "e", &v), 0);
        ck_assert_str_eq(v, "\xe2\x82\xac");
        ck_assert_int_eq(m0_req_query_get(req, "sp", &v), 0);
        ck_assert_str_eq(v, "a b");
        v = "untouched";
        ck_assert_int_eq(m0_req_query_get(req, "missing", &v), -ENOENT);
        ck_assert_str_eq(req->refusal.detail, "the query parameter 'missing' is missing");
        ck_assert_int_eq(m0_req_query_get(req, "dup", &v), -EEXIST);
        ck_assert_str_eq(req->refusal.detail, "the query parameter 'dup' is given more than once");
        ck_assert_int_eq(m0_req_query_get(req, "pct", &v), -EBADMSG);
        ck_assert_int_eq(m0_req_query_get(req, "nul", &v), -EBADMSG);
        ck_assert_int_eq(m0_req_query_get(req, "u", &v), -EILSEQ);
        ck_assert_int_eq(req->refusal.err, -EILSEQ);
        ck_assert_int_eq(req->refusal.status, 400);
        ck_assert_str_eq(req->refusal.detail, "the query parameter 'u' is not UTF-8");
        ck_assert_str_eq(v, "untouched");
        /* the lenient reader is as it was: the first value, bytes as they are */
        ck_assert_str_eq(m0_req_query(req, "dup"), "x");
        ck_assert_str_eq(m0_req_query(req, "pct"), "%zz");
        ck_assert_str_eq(m0_req_query(req, "u"), "\xc3(");
        ck_assert_int_eq(m0_req_query_int(req, "a", 2, 9, &(long){0}), -EDOM);
        ck_assert_str_eq(req->refusal.detail, "the query parameter 'a' must be at least 2");
        ck_assert_int_eq(m0_req_query_int(req, "sp", -5, 9, &(long){0}), -EINVAL);
        ck_assert_str_eq(req->refusal.detail,
                         "the query parameter 'sp' must be a whole number from 0 to 9");
        ck_assert_int_eq(m0_req_query_int(req, "a", 0, 0, &(long){0}), -ERANGE);
        ck_assert_str_eq(req->refusal.detail, "the query parameter 'a' must be at most 0");
        parsed_free(&p);
}
END_TEST

START_TEST(headers)
{
        struct parsed p;
        parse_head(&p, &cfg,
                   "GET / HTTP/1.1\r\n"
                   "Host: example.com\r\n"
                   "X-Multi: first\r\n"
                   "Content-Type:  text/plain \r\n"
                   "x-multi: second\r\n"
                   "\r\n");
        m0_req *req = &p.req;
        ck_assert_uint_eq(m0_req_header_count(req), 4);
        ck_assert_str_eq(m0_req_header(req, "Host"), "example.com");
        ck_assert_str_eq(m0_req_header(req, "host"), "example.com");
        ck_assert_str_eq(m0_req_header(req, "HOST"), "example.com");
        ck_assert_str_eq(m0_req_header(req, "content-TYPE"), "text/plain");
        ck_assert_str_eq(m0_req_header(req, "X-MULTI"), "first"); /* the first of repeats */
        ck_assert_ptr_null(m0_req_header(req, "Accept"));
        ck_assert_ptr_null(m0_req_header(req, "Hos"));
        ck_assert_ptr_null(m0_req_header(req, "Hostx"));
        ck_assert_ptr_null(m0_req_header(req, ""));

        static const char *const names[] = {"Host", "X-Multi", "Content-Type", "x-multi"};
        static const char *const values[] = {"example.com", "first", "text/plain", "second"};
        for (size_t i = 0; i < 4; i++) {
                const char *n = NULL, *v = NULL;
                ck_assert_int_eq(m0_req_header_at(req, i, &n, &v), 0);
                ck_assert_str_eq(n, names[i]);
                ck_assert_str_eq(v, values[i]);
        }
        const char *n = "untouched", *v = "untouched";
        ck_assert_int_eq(m0_req_header_at(req, 4, &n, &v), -ERANGE);
        ck_assert_int_eq(m0_req_header_at(req, SIZE_MAX, &n, &v), -ERANGE);
        ck_assert_str_eq(n, "untouched");
        ck_assert_str_eq(v, "untouched");
        parsed_free(&p);

        parse_head(&p, &cfg, "GET / HTTP/1.0\r\n\r\n");
        ck_assert_uint_eq(m0_req_header_count(&p.req), 0);
        ck_assert_ptr_null(m0_req_header(&p.req, "Host"));
        ck_assert_int_eq(m0_req_header_at(&p.req, 0, &n, &v), -ERANGE);
        parsed_free(&p);
}
END_TEST

/* A POST whose body is `body` (len bytes) with Content-Type `ct` (NULL: none), query `q`. */
static void parse_form(struct parsed *p, const char *ct, const char *q, const void *body,
                       size_t len)
{
        char head[1024];
        snprintf(head, sizeof(head),
                 "POST /f%s%s HTTP/1.1\r\nHost: h\r\n%s%s%sContent-Length: %zu\r\n\r\n",
                 q ? "?" : "", q ? q : "", ct ? "Content-Type: " : "", ct ? ct : "",
                 ct ? "\r\n" : "", len);
        parse_request(p, &cfg, head, body, len);
}

#define FORM "application/x-www-form-urlencoded"
#define LIT(s) s, sizeof(s) - 1

/* Q2: a form body read as the query is, '+' and %XX decoded, names decoded too. */
START_TEST(form_decoding)
{
        struct parsed p;
        parse_form(&p, FORM, "a=from-query",
                   LIT("user=admin&password=correct+horse%20battery&empty=&x=%41%2b&na%6De=v"
                       "&a=from-body&l=a=b&k=%e2%82%ac&=nameless"));
        m0_req *req = &p.req;
        ck_assert_str_eq(m0_req_form(req, "user"), "admin");
        ck_assert_str_eq(m0_req_form(req, "password"), "correct horse battery");
        ck_assert_str_eq(m0_req_form(req, "empty"), "");
        ck_assert_str_eq(m0_req_form(req, "x"), "A+");
        ck_assert_str_eq(m0_req_form(req, "name"), "v");
        ck_assert_str_eq(m0_req_form(req, "l"), "a=b");
        ck_assert_str_eq(m0_req_form(req, "k"), "\xe2\x82\xac");
        ck_assert_str_eq(m0_req_form(req, ""), "nameless");
        ck_assert_ptr_null(m0_req_form(req, "absent"));
        ck_assert_ptr_null(m0_req_form(req, "USER"));
        /* the query and the body are read apart, from the one index */
        ck_assert_str_eq(m0_req_form(req, "a"), "from-body");
        ck_assert_str_eq(m0_req_query(req, "a"), "from-query");
        ck_assert_ptr_null(m0_req_query(req, "user"));
        const char *u = m0_req_form(req, "user");
        (void)m0_req_query(req, "zzz");
        (void)m0_req_form(req, "zzz");
        ck_assert_ptr_eq(m0_req_form(req, "user"), u);
        /* the body is left as it was */
        size_t n;
        const char *body = m0_req_body(req, &n);
        ck_assert_bytes(body, 22, "user=admin&password=co", 22);
        parsed_free(&p);
}
END_TEST

/* What a browser's form never sends reads as absent: a name twice, no '=', a malformed
 * escape, a NUL (escaped or raw); the other fields are still read. */
START_TEST(form_refusals)
{
        struct parsed p;
        parse_form(&p, FORM, NULL,
                   LIT("dup=1&dup=2&flag&ok=yes&pct=%zz&short=%4&end=100%&nul=a%00b&raw=a\0b"
                       "&a%00b=hidden&&&last=z"));
        m0_req *req = &p.req;
        ck_assert_ptr_null(m0_req_form(req, "dup"));
        ck_assert_ptr_null(m0_req_form(req, "flag"));
        ck_assert_ptr_null(m0_req_form(req, "pct"));
        ck_assert_ptr_null(m0_req_form(req, "short"));
        ck_assert_ptr_null(m0_req_form(req, "end"));
        ck_assert_ptr_null(m0_req_form(req, "nul"));
        ck_assert_ptr_null(m0_req_form(req, "raw"));
        ck_assert_ptr_null(m0_req_form(req, "a"));
        ck_assert_str_eq(m0_req_form(req, "ok"), "yes");
        ck_assert_str_eq(m0_req_form(req, "last"), "z");
        parsed_free(&p);

        /* a repeat after a bad first one is no second chance */
        parse_form(&p, FORM, NULL, LIT("pw=%zz&pw=good"));
        ck_assert_ptr_null(m0_req_form(&p.req, "pw"));
        parsed_free(&p);

        /* an empty body has no field */
        parse_form(&p, FORM, NULL, "", 0);
        ck_assert_ptr_null(m0_req_form(&p.req, "a"));
        ck_assert_ptr_null(m0_req_form(&p.req, ""));
        parsed_free(&p);
}
END_TEST

/* AP1: a form's one value, and each failure its own code and answer. */
START_TEST(form_get)
{
        struct parsed p;
        parse_form(&p, FORM, "q=1",
                   LIT("user=admin&dup=1&dup=2&flag&pct=%zz&nul=a%00b&u=%C3%28&e=%e2%82%ac"));
        m0_req *req = &p.req;
        const char *v = "untouched";
        ck_assert_int_eq(m0_req_form_get(req, "user", &v), 0);
        ck_assert_str_eq(v, "admin");
        ck_assert_int_eq(m0_req_form_get(req, "e", &v), 0);
        ck_assert_str_eq(v, "\xe2\x82\xac");
        v = "untouched";
        ck_assert_int_eq(m0_req_form_get(req, "q", &v), -ENOENT); /* the query is not the form */
        ck_assert_str_eq(req->refusal.detail, "the form field 'q' is missing");
        ck_assert_int_eq(m0_req_form_get(req, "dup", &v), -EEXIST);
        ck_assert_int_eq(m0_req_form_get(req, "flag", &v), -EBADMSG);
        ck_assert_int_eq(m0_req_form_get(req, "pct", &v), -EBADMSG);
        ck_assert_int_eq(m0_req_form_get(req, "nul", &v), -EBADMSG);
        ck_assert_int_eq(m0_req_form_get(req, "u", &v), -EILSEQ);
        ck_assert_int_eq(req->refusal.status, 400);
        ck_assert_str_eq(req->refusal.detail, "the form field 'u' is not UTF-8");
        ck_assert_str_eq(v, "untouched");
        ck_assert_str_eq(m0_req_form(req, "u"), "\xc3("); /* m0_req_form() is as it was */
        parsed_free(&p);

        parse_form(&p, "application/json", NULL, LIT("user=admin"));
        ck_assert_int_eq(m0_req_form_get(&p.req, "user", &v), -EMEDIUMTYPE);
        ck_assert_int_eq(p.req.refusal.status, 415);
        ck_assert_str_eq(p.req.refusal.detail,
                         "the body must be application/x-www-form-urlencoded");
        ck_assert_str_eq(v, "untouched");
        parsed_free(&p);
}
END_TEST

/* Q2: only a form is read as one; without a Content-Type the body is taken for a form. */
START_TEST(form_content_type)
{
        static const char *const yes[] = {FORM, "Application/X-WWW-Form-URLEncoded",
                                          FORM "; charset=utf-8", FORM " ;charset=utf-8", NULL};
        static const char *const no[] = {"text/plain",
                                         "application/json",
                                         FORM "x",
                                         FORM " x",
                                         "multipart/form-data; boundary=b",
                                         "/",
                                         ""};
        struct parsed p;
        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
                parse_form(&p, yes[i], NULL, LIT("a=1"));
                ck_assert_msg(m0_req_form(&p.req, "a") && !strcmp(m0_req_form(&p.req, "a"), "1"),
                              "Content-Type %s", yes[i] ? yes[i] : "(none)");
                parsed_free(&p);
        }
        for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
                parse_form(&p, no[i], "a=q", LIT("a=1"));
                ck_assert_msg(!m0_req_form(&p.req, "a"), "Content-Type %s", no[i]);
                ck_assert_str_eq(m0_req_query(&p.req, "a"), "q");
                parsed_free(&p);
        }
}
END_TEST

/* The index costs a bounded multiple of the body, whatever its shape, and an index past 64 KiB
 * is not kept for the loop's next request. */
START_TEST(form_index_bounds)
{
        static const char *const unit[] = {"&", "a&", "a=&", "%41=%42&"};
        for (size_t u = 0; u < sizeof(unit) / sizeof(unit[0]); u++) {
                size_t k = strlen(unit[u]), n = (1u << 20) / k * k;
                char *body = malloc(n);
                ck_assert_ptr_nonnull(body);
                for (size_t i = 0; i < n; i += k)
                        memcpy(body + i, unit[u], k);
                struct parsed p;
                parse_form(&p, FORM, NULL, body, n);
                (void)m0_req_form(&p.req, "a");
                ck_assert_msg(p.req.arena.cap <= 5 * n / 2,
                              "%s: %zu bytes of index for %zu of body", unit[u], p.req.arena.cap,
                              n);
                size_t kept = p.req.arena.cap;
                m0__req_end(&p.req);
                ck_assert_uint_eq(p.req.arena.cap, kept > 64 * 1024 ? 0 : kept);
                ck_assert(u == 0 || kept > 64 * 1024); /* only "&&&…" has a small index */
                ck_assert(!p.req.scratch && !p.req.indexed);
                parsed_free(&p);
                free(body);
        }
}
END_TEST

static Suite *request_suite(void)
{
        Suite *s = suite_create("request");
        TCase *tc = tcase_create("request");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, accessors);
        tcase_add_test(tc, query_decoding);
        tcase_add_test(tc, query_empty_parts);
        tcase_add_test(tc, query_empty_name);
        tcase_add_test(tc, query_encoded_nul);
        tcase_add_test(tc, query_int);
        tcase_add_test(tc, query_get);
        tcase_add_test(tc, headers);
        tcase_add_test(tc, form_decoding);
        tcase_add_test(tc, form_refusals);
        tcase_add_test(tc, form_get);
        tcase_add_test(tc, form_content_type);
        tcase_add_test(tc, form_index_bounds);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(request_suite());
}
