/* SPDX-License-Identifier: MIT */
/* test-conn.c: a connection as the loop admits it. */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "host.h"
#include "unit.h"

static struct m0_host *host;
static struct m0_hctx *loop;

static void setup(void)
{
        host = calloc(1, sizeof(*host));
        loop = calloc(1, sizeof(*loop));
        ck_assert_ptr_nonnull(host);
        ck_assert_ptr_nonnull(loop);
        host->cfg.idle_timeout_ms = 60000;
        loop->host = host;
        loop->loop.epfd = epoll_create1(EPOLL_CLOEXEC);
        ck_assert_int_ge(loop->loop.epfd, 0);
}

static void teardown(void)
{
        struct m0_conn *c;
        while ((c = M0__LIST_FIRST(&loop->loop.timers[M0_TIMER_IDLE], struct m0_conn, timer.link)))
                m0__conn_close(c);
        m0__conn_reap(loop);
        close(loop->loop.epfd);
        free(loop);
        free(host);
}

/* Admit `fd` as accept does: the loop's load and the host's count are raised first. */
static void admit(int fd)
{
        atomic_fetch_add(&loop->load, 1);
        atomic_fetch_add(&host->conns, 1);
        ck_assert_int_eq(m0__conn_admit(loop, fd), 0);
        ck_assert_ptr_nonnull(loop->loop.timers[M0_TIMER_IDLE].head);
}

START_TEST(tcp_connection_is_admitted_without_nagle)
{
        int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(lfd, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t alen = sizeof(a);
        ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
        ck_assert_int_eq(listen(lfd, 1), 0);
        ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
        int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_eq(connect(cfd, (struct sockaddr *)&a, sizeof(a)), 0);
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        int v = -1;
        socklen_t vlen = sizeof(v);
        ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &vlen), 0);
        ck_assert_int_eq(v, 0); /* the kernel's default, so the assertion below can fail */

        admit(fd);
        v = -1;
        ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &vlen), 0);
        ck_assert_int_eq(v, 1);
        ck_assert_uint_eq(atomic_load(&loop->load), 1);
        close(cfd);
        close(lfd);
}
END_TEST

START_TEST(unix_connection_is_admitted)
{
        int sv[2];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
        admit(sv[0]);
        ck_assert_uint_eq(atomic_load(&loop->load), 1);
        ck_assert_uint_eq(atomic_load(&host->conns), 1);
        close(sv[1]);
}
END_TEST

static Suite *conn_suite(void)
{
        Suite *s = suite_create("conn");
        TCase *tc = tcase_create("admit");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, tcp_connection_is_admitted_without_nagle);
        tcase_add_test(tc, unix_connection_is_admitted);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(conn_suite());
}
