/* SPDX-License-Identifier: MIT */
/* test-buf.c: the growable byte buffer (append, printf, reserve bounds) and the clock. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "buf.h"
#include "util.h"
#include "unit.h"

START_TEST(append_to_empty)
{
        struct m0_buf b = {0};
        ck_assert_int_eq(m0__buf_append(&b, "abc", 3), 0);
        ck_assert_uint_eq(b.len, 3);
        ck_assert_uint_eq(b.cap, 256);
        ck_assert_buf_lit(b, "abc");
        ck_assert_int_eq(m0__buf_append(&b, "de", 2), 0);
        ck_assert_buf_lit(b, "abcde");
        ck_assert_uint_eq(b.cap, 256);
        m0__buf_free(&b);
        ck_assert_ptr_null(b.data);
        ck_assert_uint_eq(b.len, 0);
        ck_assert_uint_eq(b.cap, 0);
        m0__buf_free(&b); /* a freed buffer may be freed again */
}
END_TEST

START_TEST(append_nothing)
{
        struct m0_buf b = {0};
        ck_assert_int_eq(m0__buf_append(&b, NULL, 0), 0);
        ck_assert_uint_eq(b.len, 0);
        ck_assert_int_eq(m0__buf_reserve(&b, 0), 0);
        ck_assert_ptr_null(b.data); /* nothing asked, nothing allocated */
        m0__buf_free(&b);
}
END_TEST

START_TEST(append_grows_and_keeps_bytes)
{
        struct m0_buf b = {0};
        unsigned char chunk[37];
        for (int i = 0; i < 200; i++) {
                for (size_t k = 0; k < sizeof(chunk); k++)
                        chunk[k] = (unsigned char)(i * 31 + k);
                ck_assert_int_eq(m0__buf_append(&b, chunk, sizeof(chunk)), 0);
        }
        ck_assert_uint_eq(b.len, 200 * 37);
        ck_assert_uint_eq(b.cap, 8192); /* 256 doubled until 7400 fit */
        unsigned char exp[200 * 37];
        for (int i = 0; i < 200; i++)
                for (size_t k = 0; k < sizeof(chunk); k++)
                        exp[i * 37 + k] = (unsigned char)(i * 31 + k);
        ck_assert_bytes(b.data, b.len, exp, sizeof(exp));
        m0__buf_free(&b);
}
END_TEST

START_TEST(reserve_doubles_from_256)
{
        struct m0_buf b = {0};
        ck_assert_int_eq(m0__buf_reserve(&b, 1), 0);
        ck_assert_uint_eq(b.cap, 256);
        ck_assert_int_eq(m0__buf_reserve(&b, 256), 0);
        ck_assert_uint_eq(b.cap, 256);
        ck_assert_int_eq(m0__buf_reserve(&b, 257), 0);
        ck_assert_uint_eq(b.cap, 512);
        ck_assert_int_eq(m0__buf_append(&b, "x", 1), 0);
        ck_assert_int_eq(m0__buf_reserve(&b, 1000), 0);
        ck_assert_uint_eq(b.cap, 1024); /* 1 + 1000 fits in 1024 */
        ck_assert_uint_eq(b.len, 1);
        ck_assert_int_eq(b.data[0], 'x');
        m0__buf_free(&b);
}
END_TEST

START_TEST(reserve_overflow_is_enomem)
{
        struct m0_buf b = {0};
        ck_assert_int_eq(m0__buf_reserve(&b, SIZE_MAX), -ENOMEM);
        ck_assert_int_eq(m0__buf_reserve(&b, SIZE_MAX / 2 + 1), -ENOMEM);
        ck_assert_ptr_null(b.data);
        ck_assert_uint_eq(b.cap, 0);

        ck_assert_int_eq(m0__buf_append(&b, "hello", 5), 0);
        /* len + extra past SIZE_MAX / 2 is refused before any arithmetic can wrap */
        ck_assert_int_eq(m0__buf_reserve(&b, SIZE_MAX / 2 - 5 + 1), -ENOMEM);
        ck_assert_int_eq(m0__buf_reserve(&b, SIZE_MAX - 2), -ENOMEM);
        ck_assert_int_eq(m0__buf_append(&b, "", SIZE_MAX), -ENOMEM);
        /* a refused reserve leaves the buffer as it was */
        ck_assert_uint_eq(b.cap, 256);
        ck_assert_buf_lit(b, "hello");
        m0__buf_free(&b);
}
END_TEST

START_TEST(printf_small)
{
        struct m0_buf b = {0};
        ck_assert_int_eq(m0__buf_printf(&b, "x=%d %s", 5, "y"), 0);
        ck_assert_buf_lit(b, "x=5 y");
        ck_assert_int_eq(b.data[b.len], '\0');
        ck_assert_int_eq(m0__buf_printf(&b, "%s", ""), 0);
        ck_assert_buf_lit(b, "x=5 y");
        ck_assert_int_eq(m0__buf_printf(&b, "|%03u|", 7u), 0);
        ck_assert_buf_lit(b, "x=5 y|007|");
        m0__buf_free(&b);
}
END_TEST

/* Outputs of every length around the first reserve (64) and the first capacity (256), after
 * prefixes that leave different room; one assertion per case keeps this quick under Check. */
START_TEST(printf_large_every_length)
{
        char src[1201], hashes[300], exp[1500];
        for (size_t i = 0; i < sizeof(src) - 1; i++)
                src[i] = (char)('a' + i % 26);
        src[sizeof(src) - 1] = '\0';
        memset(hashes, '#', sizeof(hashes));
        for (size_t prefix = 0; prefix < 300; prefix += 61) {
                for (int n = 0; n <= 1200; n += (n < 300 ? 1 : 97)) {
                        struct m0_buf b = {0};
                        int ra = m0__buf_append(&b, hashes, prefix);
                        int rp = m0__buf_printf(&b, "%.*s", n, src);
                        size_t elen = prefix + (size_t)n;
                        memcpy(exp, hashes, prefix);
                        memcpy(exp + prefix, src, (size_t)n);
                        bool ok = ra == 0 && rp == 0 && b.len == elen && b.cap >= elen + 1 &&
                                  memcmp(b.data, exp, elen) == 0 && b.data[elen] == '\0';
                        ck_assert_msg(ok, "prefix %zu, %d bytes: append %d, printf %d, len %zu",
                                      prefix, n, ra, rp, b.len);
                        m0__buf_free(&b);
                }
        }
}
END_TEST

START_TEST(printf_large_formatted)
{
        struct m0_buf b = {0};
        ck_assert_int_eq(m0__buf_append(&b, "head:", 5), 0);
        /* 5 + 10 + 500 + 10 = 525 bytes: past the 64-byte guess and the 256-byte capacity */
        ck_assert_int_eq(m0__buf_printf(&b, "%010d%0500d%10s", 42, 7, "end"), 0);
        ck_assert_uint_eq(b.len, 525);
        char exp[525];
        memcpy(exp, "head:0000000042", 15);
        memset(exp + 15, '0', 499);
        exp[514] = '7';
        memcpy(exp + 515, "       end", 10);
        ck_assert_bytes(b.data, b.len, exp, sizeof(exp));
        ck_assert_uint_eq(b.cap, 1024);
        m0__buf_free(&b);
}
END_TEST

START_TEST(now_ms_is_monotonic)
{
        uint64_t t0 = m0__now_ms();
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 20 * 1000 * 1000};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
        uint64_t t1 = m0__now_ms();
        ck_assert_uint_ge(t1 - t0, 20);
        ck_assert_uint_lt(t1 - t0, 10000);
}
END_TEST

static Suite *buf_suite(void)
{
        Suite *s = suite_create("buf");
        TCase *tc = tcase_create("buf");
        tcase_add_test(tc, append_to_empty);
        tcase_add_test(tc, append_nothing);
        tcase_add_test(tc, append_grows_and_keeps_bytes);
        tcase_add_test(tc, reserve_doubles_from_256);
        tcase_add_test(tc, reserve_overflow_is_enomem);
        tcase_add_test(tc, printf_small);
        tcase_add_test(tc, printf_large_every_length);
        tcase_add_test(tc, printf_large_formatted);
        tcase_add_test(tc, now_ms_is_monotonic);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(buf_suite());
}
