/* SPDX-License-Identifier: MIT */
/* test-transport.c: the plain transport's operations (LY2): bytes, end of file, -EAGAIN with its
 * want, writev, sendfile, shutdown and close. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport.h"
#include "unit.h"

static int sv[2];
static struct m0_transport t;

static void setup(void)
{
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
        ck_assert_int_eq(m0__transport_open(&t, &m0__transport_plain, sv[0]), 0);
}

static void teardown(void)
{
        if (t.fd >= 0)
                t.ops->close(&t);
        close(sv[1]);
}

START_TEST(plain_has_no_handshake_and_reads_what_came)
{
        ck_assert_str_eq(t.ops->name, "plain");
        ck_assert_ptr_null(t.ops->handshake);
        char b[8];
        ck_assert_int_eq(t.ops->read(&t, b, sizeof(b)), -EAGAIN);
        ck_assert_uint_eq(t.want, M0_WANT_READ);
        ck_assert_int_eq(write(sv[1], "abc", 3), 3);
        ck_assert_int_eq(t.ops->read(&t, b, sizeof(b)), 3);
        ck_assert_int_eq(memcmp(b, "abc", 3), 0);
        ck_assert_int_eq(shutdown(sv[1], SHUT_WR), 0);
        ck_assert_int_eq(t.ops->read(&t, b, sizeof(b)), 0); /* the peer's end of file */
}
END_TEST

START_TEST(plain_writev_sends_every_buffer_in_order_until_full)
{
        struct iovec iov[2] = {{.iov_base = "GET ", .iov_len = 4}, {.iov_base = "/", .iov_len = 1}};
        ck_assert_int_eq(t.ops->writev(&t, iov, 2), 5);
        char b[8];
        ck_assert_int_eq(read(sv[1], b, sizeof(b)), 5);
        ck_assert_int_eq(memcmp(b, "GET /", 5), 0);
        ck_assert_int_eq(m0__transport_write(&t, "x", 1), 1);
        ck_assert_int_eq(read(sv[1], b, sizeof(b)), 1);
        /* fill the socket: the write that cannot go on wants to write */
        static char big[1 << 16];
        ssize_t w;
        while ((w = m0__transport_write(&t, big, sizeof(big))) > 0)
                ;
        ck_assert_int_eq(w, -EAGAIN);
        ck_assert_uint_eq(t.want, M0_WANT_WRITE);
}
END_TEST

START_TEST(plain_sendfile_sends_a_files_bytes_from_its_offset)
{
        char path[] = "/tmp/m0-transport-XXXXXX";
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        unlink(path);
        ck_assert_int_eq(write(fd, "0123456789", 10), 10);
        off_t off = 4;
        ck_assert_int_eq(t.ops->sendfile(&t, fd, &off, 3), 3);
        ck_assert_int_eq(off, 7);
        char b[8];
        ck_assert_int_eq(read(sv[1], b, sizeof(b)), 3);
        ck_assert_int_eq(memcmp(b, "456", 3), 0);
        close(fd);
}
END_TEST

START_TEST(plain_shutdown_ends_the_write_side_and_close_the_descriptor)
{
        ck_assert_int_eq(t.ops->shutdown(&t), 0);
        char b[8];
        ck_assert_int_eq(read(sv[1], b, sizeof(b)), 0);
        ck_assert_int_eq(m0__transport_write(&t, "x", 1), -EPIPE); /* no SIGPIPE */
        int fd = t.fd;
        t.ops->close(&t);
        ck_assert_int_eq(t.fd, -1);
        ck_assert_int_eq(fcntl(fd, F_GETFD), -1);
        ck_assert_int_eq(errno, EBADF);
}
END_TEST

static Suite *transport_suite(void)
{
        Suite *s = suite_create("transport");
        TCase *tc = tcase_create("plain");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, plain_has_no_handshake_and_reads_what_came);
        tcase_add_test(tc, plain_writev_sends_every_buffer_in_order_until_full);
        tcase_add_test(tc, plain_sendfile_sends_a_files_bytes_from_its_offset);
        tcase_add_test(tc, plain_shutdown_ends_the_write_side_and_close_the_descriptor);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(transport_suite());
}
