/* SPDX-License-Identifier: MIT */
/* test-pgbus.c: the shared bus's text: what may be published, the URI check, the password hidden, libpq's reasons (SPEC G1, G3, G6). */
#include <errno.h>

#include "load.h"
#include "pgbus-private.h"
#include "unit.h"

START_TEST(channel_names)
{
        ck_assert(m0__pgbus_channel_ok("room:1", 6));
        ck_assert(m0__pgbus_channel_ok("~", 1));
        ck_assert(!m0__pgbus_channel_ok("", 0));
        ck_assert(!m0__pgbus_channel_ok("a b", 3));
        ck_assert(!m0__pgbus_channel_ok("caf\xc3\xa9", 5));
        char name[202];
        memset(name, 'x', sizeof(name));
        ck_assert(m0__pgbus_channel_ok(name, 200));
        ck_assert(!m0__pgbus_channel_ok(name, 201));
}
END_TEST

START_TEST(utf8)
{
        ck_assert(m0__pgbus_utf8_ok(""));
        ck_assert(m0__pgbus_utf8_ok("plain"));
        ck_assert(m0__pgbus_utf8_ok("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
        ck_assert(!m0__pgbus_utf8_ok("\xc3"));             /* cut short */
        ck_assert(!m0__pgbus_utf8_ok("\xc0\xaf"));         /* overlong '/' */
        ck_assert(!m0__pgbus_utf8_ok("\xed\xa0\x80"));     /* a surrogate */
        ck_assert(!m0__pgbus_utf8_ok("\xf4\x90\x80\x80")); /* past U+10FFFF */
        ck_assert(!m0__pgbus_utf8_ok("\xff"));
        ck_assert(!m0__pgbus_utf8_ok("a\x80z")); /* a lone continuation byte */
}
END_TEST

START_TEST(uri_check)
{
        char err[256];
        ck_assert_int_eq(
                m0__pgbus_uri_check("postgresql:///m0?host=/run/postgresql", err, sizeof(err)), 0);
        ck_assert_int_eq(m0__pgbus_uri_check("postgres://u@db:5432/m0", err, sizeof(err)), 0);
        ck_assert_int_eq(m0__pgbus_uri_check("host=/run/postgresql", err, sizeof(err)), -EINVAL);
        ck_assert_str_eq(err, "not local and not a postgresql:// URI");
        ck_assert_int_eq(m0__pgbus_uri_check("postgresql://u:secret@[::1/m0", err, sizeof(err)),
                         -EINVAL);
        /* libpq's words, cut before it quotes the URI and its password */
        ck_assert_str_eq(err, "end of string reached when looking for matching \"]\" in IPv6 host "
                              "address");
        ck_assert_int_eq(m0__pgbus_uri_check("postgresql:///m0?nosuch=1", err, sizeof(err)),
                         -EINVAL);
        ck_assert_str_eq(err, "invalid URI query parameter: \"nosuch\"");
}
END_TEST

START_TEST(redact)
{
        char out[256];
        m0__pgbus_redact("postgresql://m0:s3cret@db.example:5432/m0?sslmode=require", out,
                         sizeof(out));
        ck_assert_str_eq(out, "postgresql://m0:***@db.example:5432/m0?sslmode=require");
        m0__pgbus_redact("postgresql:///m0?host=/run/postgresql&password=pw&user=m0", out,
                         sizeof(out));
        ck_assert_str_eq(out, "postgresql:///m0?host=/run/postgresql&password=***&user=m0");
        m0__pgbus_redact("postgresql://m0@db/m0", out, sizeof(out));
        ck_assert_str_eq(out, "postgresql://m0@db/m0");
        m0__pgbus_redact("local", out, sizeof(out));
        ck_assert_str_eq(out, "local");
        m0__pgbus_redact("postgresql://a:b@h/d", out, 12);
        ck_assert_str_eq(out, "postgresql:");
}
END_TEST

START_TEST(reasons)
{
        char out[600];
        m0__pgbus_one_line(out, sizeof(out),
                           "connection to server on socket \"/x/.s.PGSQL.5432\" failed: No such "
                           "file or directory\n\tIs the server running locally?\n");
        ck_assert_str_eq(out, "connection to server on socket \"/x/.s.PGSQL.5432\" failed: No "
                              "such file or directory");
        m0__pgbus_one_line(out, sizeof(out), "FATAL:  terminating connection\n");
        ck_assert_str_eq(out, "FATAL: terminating connection");
        m0__pgbus_one_line(out, sizeof(out), "");
        ck_assert_str_eq(out, "no reason given");
        m0__pgbus_reason_of(out, sizeof(out),
                            "connection to server at \"10.0.0.5\", port 5432 failed: Operation "
                            "not permitted\n");
        ck_assert_str_eq(out,
                         "connection to server at \"10.0.0.5\", port 5432 failed: Operation not "
                         "permitted: the kernel refused the connection (EPERM); under "
                         "m0@.service IPAddressDeny=any refuses it until a drop-in allows the "
                         "database's address (IPAddressAllow=, doc/systemd.md)");
        m0__pgbus_reason_of(out, sizeof(out), "timeout expired\n");
        ck_assert_str_eq(out, "timeout expired");
}
END_TEST

START_TEST(publish_refuses_bad_text)
{
        struct m0_pgbus_options o = {
                .uri = "postgresql:///m0?host=/nonexistent-m0-unit",
                .name = "unit",
                .queue_max = 2,
                .deliver = (m0_pgbus_deliver_fn)abort,
        };
        struct m0_pgbus *b = NULL;
        char err[256];
        ck_assert_int_eq(m0__pgbus_new(&b, &o, err, sizeof(err)), 0);
        ck_assert_int_eq(m0__pgbus_publish(b, "", "e", "d"), -EINVAL);
        ck_assert_int_eq(m0__pgbus_publish(b, "a b", "e", "d"), -EINVAL);
        ck_assert_int_eq(m0__pgbus_publish(b, "c", "two\nlines", "d"), -EINVAL);
        ck_assert_int_eq(m0__pgbus_publish(b, "c", "e", "\xff"), -EINVAL);
        ck_assert_int_eq(m0__pgbus_publish(b, "c", NULL, "one"), 0);
        ck_assert_int_eq(m0__pgbus_publish(b, "c", "e", "two"), 0);
        ck_assert_int_eq(m0__pgbus_publish(b, "c", "e", "three"), -EAGAIN);
        const char *bad[] = {"ok", "a b*"}; /* a prefix that is no channel name */
        ck_assert_int_eq(m0__pgbus_replay(b, 0, bad, 2, 10, NULL, NULL), -EINVAL);
        struct m0_pgbus_stats st;
        m0__pgbus_stats(b, &st);
        ck_assert_uint_eq(st.queued, 2);
        ck_assert_uint_eq(st.refused, 1);
        ck_assert_uint_eq(m0__pgbus_stop(b, 0), 2); /* nothing reached a database */
        ck_assert_int_eq(m0__pgbus_publish(b, "c", "e", "late"), -ESHUTDOWN);
        m0__pgbus_free(b);
        ck_assert_int_eq(
                m0__pgbus_new(&b,
                              &(struct m0_pgbus_options){.uri = "mysql://x", .deliver = o.deliver},
                              err, sizeof(err)),
                -EINVAL);
        ck_assert_str_eq(err, "not local and not a postgresql:// URI");
}
END_TEST

static Suite *pgbus_suite(void)
{
        Suite *s = suite_create("pgbus");
        TCase *tc = tcase_create("text");
        tcase_add_test(tc, channel_names);
        tcase_add_test(tc, utf8);
        tcase_add_test(tc, uri_check);
        tcase_add_test(tc, redact);
        tcase_add_test(tc, reasons);
        tcase_add_test(tc, publish_refuses_bad_text);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(pgbus_suite());
}
