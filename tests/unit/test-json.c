/* SPDX-License-Identifier: MIT */
/* test-json.c: JSON through jansson (SPEC Q3): m0_req_json()'s media types, refusals, depth
 * bound and ownership; m0_res_json_value(); m0_publish_json(); strings of any bytes (D47). */
#include <errno.h>

#include "bus.h"
#include "json.h"
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

/* A POST of `body` (len bytes) with Content-Type `ct` (NULL: none). */
static void parse_json(struct parsed *p, const char *ct, const void *body, size_t len)
{
        char head[512];
        snprintf(head, sizeof(head),
                 "POST /j HTTP/1.1\r\nHost: h\r\n%s%s%sContent-Length: %zu\r\n\r\n",
                 ct ? "Content-Type: " : "", ct ? ct : "", ct ? "\r\n" : "", len);
        parse_request(p, &cfg, head, body, len);
}

#define LIT(s) s, sizeof(s) - 1

START_TEST(media_types)
{
        static const char *const yes[] = {"application/json", "Application/JSON; charset=utf-8",
                                          "application/json ;charset=UTF-8",
                                          "application/problem+json", "application/vnd.api+JSON"};
        static const char *const no[] = {NULL,          "text/plain",           "application/jsonx",
                                         "text/json",   "application/json-seq", "application/+json",
                                         "application", "application/json x",   "multipart/json"};
        struct parsed p;
        json_t *j;
        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
                parse_json(&p, yes[i], LIT("{}"));
                ck_assert_msg(m0_req_json(&p.req, &j) == 0, "%s", yes[i]);
                parsed_free(&p);
        }
        for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
                parse_json(&p, no[i], LIT("{}"));
                j = (json_t *)&p; /* untouched on failure */
                ck_assert_msg(m0_req_json(&p.req, &j) == -EMEDIUMTYPE, "%s",
                              no[i] ? no[i] : "none");
                ck_assert_ptr_eq(j, (json_t *)&p);
                ck_assert_int_eq(p.req.refusal.err, -EMEDIUMTYPE);
                ck_assert_int_eq(p.req.refusal.status, 415);
                ck_assert_str_eq(p.req.refusal.detail,
                                 "the body must be application/json or a +json type");
                parsed_free(&p);
        }
}
END_TEST

/* A parse error is -EBADMSG, its detail jansson's reason without the client's bytes, with the
 * line and the column. */
START_TEST(parse_errors)
{
        static const struct {
                const char *body;
                size_t len;
                const char *detail;
        } cases[] = {
                {LIT(""), "the body is empty: JSON was expected"},
                {LIT("{"),
                 "the body is not valid JSON: string or '}' expected at line 1, column 1"},
                {LIT("[]x"),
                 "the body is not valid JSON: end of file expected at line 1, column 3"},
                {LIT("[1,\n 2,\n x]"),
                 "the body is not valid JSON: invalid token at line 3, column 2"},
                {LIT("{\"a\":1,\"a\":2}"),
                 "the body is not valid JSON: duplicate object key at line 1, column 10"},
                {LIT("\"a\\u0000\""),
                 "the body is not valid JSON: \\u0000 is not allowed at line 1, column 9"},
                {LIT("\"caf\xe9\""),
                 "the body is not valid JSON: unable to decode byte 0xe9 at line 1, column 4"},
                {LIT("[\"\x01\"]"),
                 "the body is not valid JSON: control character 0x1 at line 1, column 2"},
                {LIT("{'a':1}"), "the body is not valid JSON: string or '}' expected at line 1, "
                                 "column 2"},
                {LIT("[1,]"), "the body is not valid JSON: unexpected token at line 1, column 4"},
                {LIT("\x00"), "the body is not valid JSON: invalid token at line 1, column 1"},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct parsed p;
                json_t *j = NULL;
                parse_json(&p, "application/json", cases[i].body, cases[i].len);
                ck_assert_int_eq(m0_req_json(&p.req, &j), -EBADMSG);
                ck_assert_ptr_null(j);
                ck_assert_int_eq(p.req.refusal.status, 400);
                ck_assert_str_eq(p.req.refusal.detail, cases[i].detail);
                /* the same answer again, parsed once */
                ck_assert_int_eq(m0_req_json(&p.req, &j), -EBADMSG);
                parsed_free(&p);
        }
}
END_TEST

/* `n` nested arrays around `inner`, as one body. */
static char *nested(size_t n, const char *inner, size_t *ret_len)
{
        size_t il = strlen(inner);
        char *b = malloc(2 * n + il);
        ck_assert_ptr_nonnull(b);
        memset(b, '[', n);
        memcpy(b + n, inner, il);
        memset(b + n + il, ']', n);
        *ret_len = 2 * n + il;
        return b;
}

static int json_of(const char *body, size_t len, unsigned max_depth, char *detail, size_t dl)
{
        struct parsed p;
        json_t *j;
        parse_json(&p, "application/json", body, len);
        p.req.json_max_depth = max_depth;
        int r = m0_req_json(&p.req, &j);
        snprintf(detail, dl, "%s", r < 0 ? p.req.refusal.detail : "");
        parsed_free(&p);
        return r;
}

/* M0_JSON_MAX_DEPTH (64) levels of arrays and objects pass, one more is 400, and so is any
 * depth past jansson's own bound, up to 100,000 levels: no crash, no second parser. */
START_TEST(depth_bound)
{
        static const char deep[] = "the body nests JSON deeper than 64 levels (M0_JSON_MAX_DEPTH)";
        char detail[256];
        size_t len;
        char *b = nested(64, "1", &len);
        ck_assert_int_eq(json_of(b, len, 64, detail, sizeof(detail)), 0);
        free(b);
        b = nested(65, "", &len);
        ck_assert_int_eq(json_of(b, len, 64, detail, sizeof(detail)), -EBADMSG);
        ck_assert_str_eq(detail, deep);
        free(b);
        /* objects count as arrays do, and a deep member anywhere counts */
        char obj[2048] = "[1,{\"a\":[2]},";
        for (int i = 0; i < 63; i++)
                strcat(obj, "{\"k\":");
        strcat(obj, "0");
        for (int i = 0; i < 63; i++)
                strcat(obj, "}");
        strcat(obj, "]");
        ck_assert_int_eq(json_of(obj, strlen(obj), 64, detail, sizeof(detail)), 0);
        ck_assert_int_eq(json_of(obj, strlen(obj), 63, detail, sizeof(detail)), -EBADMSG);
        ck_assert_str_eq(detail, "the body nests JSON deeper than 63 levels (M0_JSON_MAX_DEPTH)");
        /* a scalar has no depth; with a bound of 1, one level only */
        ck_assert_int_eq(json_of(LIT("\"s\""), 1, detail, sizeof(detail)), 0);
        ck_assert_int_eq(json_of(LIT("[1,{}]"), 1, detail, sizeof(detail)), -EBADMSG);
        ck_assert_int_eq(json_of(LIT("[1,2]"), 1, detail, sizeof(detail)), 0);
        /* jansson's bound (2048) and far past it: the same refusal */
        size_t depths[] = {2048, 2049, 100000};
        for (size_t i = 0; i < 3; i++) {
                b = nested(depths[i], "", &len);
                ck_assert_int_eq(json_of(b, len, 64, detail, sizeof(detail)), -EBADMSG);
                ck_assert_str_eq(detail, deep);
                ck_assert_int_eq(json_of(b, len / 2, 64, detail, sizeof(detail)), -EBADMSG);
                free(b);
        }
        b = nested(2048, "", &len);
        ck_assert_int_eq(json_of(b, len, 2048, detail, sizeof(detail)), 0);
        free(b);
}
END_TEST

/* The value is the request's: the same on a second call, freed when the handler returns; a
 * reference the app took outlives it. */
START_TEST(ownership)
{
        struct parsed p;
        json_t *a, *b;
        parse_json(&p, "application/json", LIT(" {\"title\":\"caf\\u00e9\",\"n\":[1,2.5,null]}\n"));
        ck_assert_int_eq(m0_req_json(&p.req, &a), 0);
        ck_assert_int_eq(m0_req_json(&p.req, &b), 0);
        ck_assert_ptr_eq(a, b);
        ck_assert_str_eq(json_string_value(json_object_get(a, "title")), "caf\xc3\xa9");
        ck_assert_int_eq(a->refcount, 1);
        json_t *kept = json_incref(json_object_get(a, "n"));
        m0__req_end(&p.req);
        ck_assert_ptr_null(p.req.json);
        ck_assert(!p.req.scratch);
        ck_assert_int_eq(kept->refcount, 1);
        ck_assert_uint_eq(json_array_size(kept), 3);
        json_decref(kept);
        /* a new request on the same struct parses its own body */
        ck_assert_int_eq(m0_req_json(&p.req, &b), 0);
        parsed_free(&p);
}
END_TEST

START_TEST(res_json_value)
{
        json_t *v = json_pack("{s:[i,f,s,b,n],s:s}", "a", 1, 2.5, "x\n\"", 1, "b", "\xe2\x98\x83");
        ck_assert_int_eq(m0_res_json_value(&res, 201, v), 0);
        json_decref(v);
        ck_assert_int_eq(res.status, 201);
        ck_assert_buf_lit(res.head, "Content-Type: application/json\r\n");
        ck_assert_buf_lit(res.body,
                          "{\"a\":[1,2.5,\"x\\n\\\"\",true,null],\"b\":\"\xe2\x98\x83\"}");
        m0__res_reset(&res);
        v = json_integer(-7);
        ck_assert_int_eq(m0_res_json_value(&res, 200, v), 0); /* any value, not only containers */
        ck_assert_buf_lit(res.body, "-7");
        ck_assert_int_eq(m0_res_json_value(&res, 700, v), -EINVAL);
        json_decref(v);
        ck_assert_int_eq(m0_res_json_value(&res, 200, NULL), -EINVAL);
        /* a string jansson cannot write leaves nothing behind */
        m0__res_reset(&res);
        v = json_stringn_nocheck("caf\xe9", 4);
        ck_assert_int_eq(m0_res_json_value(&res, 200, v), -EINVAL);
        json_decref(v);
        ck_assert_uint_eq(res.body.len, 0);
        ck_assert_uint_eq(res.head.len, 0);
}
END_TEST

START_TEST(publish_json)
{
        struct m0_bus bus;
        ck_assert_int_eq(m0_publish_json("c", "e", json_true(), 0), -ENOTCONN); /* no host */
        ck_assert_int_eq(m0__bus_init(&bus, 1, 8, 8, 65536), 0);
        m0__bus_global = &bus;
        json_t *v = json_pack("{s:s,s:[i,i]}", "text", "two\nlines", "n", 1, 2);
        ck_assert_int_eq(m0_publish_json("room:1", "created", v, 0), 1);
        ck_assert_int_eq(v->refcount, 1); /* not stolen */
        /* m0_publish()'s channel, event and flags, refused as it refuses them (N1) */
        ck_assert_int_eq(m0_publish_json("room:*", "created", v, 0), -EINVAL);
        ck_assert_int_eq(m0_publish_json(NULL, "created", v, 0), -EINVAL);
        ck_assert_int_eq(m0_publish_json("room:1", "a\nb", v, 0), -EINVAL);
        ck_assert_int_eq(m0_publish_json("room:1", "created", v, 2), -EINVAL);
        /* a transient event takes no id and is not kept */
        ck_assert_int_eq(m0_publish_json("room:1", "progress", v, M0_PUBLISH_TRANSIENT), 0);
        json_decref(v);
        ck_assert_int_eq(m0_publish_json("c", NULL, NULL, 0), -EINVAL);
        v = json_stringn_nocheck("\xff", 1);
        ck_assert_int_eq(m0_publish_json("c", NULL, v, 0), -EINVAL);
        json_decref(v);
        ck_assert_uint_eq(m0__bus_last(&bus), 1);
        /* what replay keeps of the channel: the one kept event, its data one compact line */
        struct m0_rchan *rc = m0__replay_find(&bus.replay, "room:1", 6);
        ck_assert_ptr_nonnull(rc);
        ck_assert_uint_eq(rc->count, 1);
        struct m0_frame *f = rc->ring[rc->head];
        static const char want[] =
                "id: 1\nevent: created\ndata: {\"text\":\"two\\nlines\",\"n\":[1,2]}\n\n";
        ck_assert_bytes(f->bytes + f->start, f->end - f->start, want, sizeof(want) - 1);
        m0__bus_global = NULL;
        m0__bus_destroy(&bus);
}
END_TEST

/* D47: any bytes become a valid string; well-formed UTF-8 is kept. */
START_TEST(lossy_strings)
{
        static const struct {
                const char *in, *out;
        } cases[] = {
                {"plain", "plain"},
                {"caf\xc3\xa9 \xf0\x9f\x98\x80", "caf\xc3\xa9 \xf0\x9f\x98\x80"},
                {"\xff\xfe", "\xef\xbf\xbd\xef\xbf\xbd"},
                {"a\xc3", "a\xef\xbf\xbd"},
                {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* a surrogate */
                {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},                 /* overlong */
                {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
                {"", ""},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                json_t *s = m0__json_string_lossy(cases[i].in);
                ck_assert_ptr_nonnull(s);
                ck_assert_str_eq(json_string_value(s), cases[i].out);
                char *text = json_dumps(s, JSON_ENCODE_ANY);
                ck_assert_ptr_nonnull(text); /* jansson writes it */
                free(text);
                json_decref(s);
        }
}
END_TEST

static Suite *json_suite(void)
{
        Suite *s = suite_create("json");
        TCase *tc = tcase_create("json");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, media_types);
        tcase_add_test(tc, parse_errors);
        tcase_add_test(tc, depth_bound);
        tcase_add_test(tc, ownership);
        tcase_add_test(tc, res_json_value);
        tcase_add_test(tc, publish_json);
        tcase_add_test(tc, lossy_strings);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(json_suite());
}
