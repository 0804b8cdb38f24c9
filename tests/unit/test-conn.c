/* SPDX-License-Identifier: MIT */
/* test-conn.c: a connection as the loop admits it, and its states under HTTP/1.1: idle between
 * requests, inside a head, closing; its timers firing; the stop (SPEC H1, H2, H7). */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "host-private.h"
#include "unit-h1.h"
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
        m0__host_link(host);
        loop->serve = &host->serve; /* what m0__hctx_prepare hands a loop */
        loop->cfg = &host->cfg;
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
        atomic_fetch_add(&host->serve.conns, 1);
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
        ck_assert_uint_eq(atomic_load(&host->serve.conns), 1);
        close(sv[1]);
}
END_TEST

/* ---- states, over a loop's context (unit-h1.h) ---- */

static int hello(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)state;
        return m0_res_text(res, 200, "hello");
}

static const m0_route routes[] = {
        {"GET", "/hello", hello, 0},
        {NULL, NULL, NULL, 0},
};
static const m0_app app = {.name = "unit", .routes = routes};

static void h1_setup(void)
{
        h1_start(&app,
                 (const char *const[]){"--linger-ms", "0", "--max-keepalive-requests", "3", NULL});
}

#define H "Server: m0\r\n"
#define TEXT "Content-Type: text/plain; charset=utf-8\r\n"
#define HELLO "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n"
#define ANSWER(conn) "HTTP/1.1 200 OK\r\n" H "Content-Length: 5\r\n" conn TEXT "\r\nhello"
#define KA "Keep-Alive: timeout=60\r\n"

/* The one connection of the loop, in whichever timer class it waits. */
static struct m0_conn *the_conn(void)
{
        struct m0_conn *found = NULL;
        for (int cls = M0_TIMER_IDLE; cls < M0_TIMER_N; cls++) {
                struct m0_conn *c =
                        M0__LIST_FIRST(&h1->loop.timers[cls], struct m0_conn, timer.link);
                if (c) {
                        ck_assert_ptr_null(found);
                        found = c;
                }
        }
        ck_assert_ptr_nonnull(found);
        return found;
}

/* H1: answered, the connection waits idle for the next request, owning no input buffer. */
START_TEST(after_an_answer_the_connection_waits_idle)
{
        int fd = h1_client();
        struct m0_conn *c = the_conn();
        ck_assert_uint_eq(c->timer.cls, M0_TIMER_IDLE);
        uint64_t before = h1->loop.now_ms;
        char *out = h1_send(fd, HELLO, NULL);
        ck_assert_str_eq(out, ANSWER(KA));
        free(out);
        ck_assert_ptr_eq(the_conn(), c);
        ck_assert_uint_eq(c->phase, PH_IDLE);
        ck_assert_uint_eq(c->timer.cls, M0_TIMER_IDLE);
        /* idle_timeout_ms from the loop's clock when the answer went out: a turn of the loop
         * between the send and now may have moved the clock on */
        ck_assert_uint_ge(c->timer.deadline, before + 60000);
        ck_assert_uint_le(c->timer.deadline, h1->loop.now_ms + 60000);
        ck_assert_uint_eq(c->nreq, 1);
        ck_assert_ptr_null(c->rbuf);
        ck_assert_uint_eq(c->read_deadline, 0);
        close(fd);
}
END_TEST

/* H2: inside a head, the connection waits on the head's deadline, its bytes kept. */
START_TEST(inside_a_head_the_connection_waits_on_its_deadline)
{
        int fd = h1_client();
        char *out = h1_send(fd, "GET /hello HTTP/1.1\r\nHo", NULL);
        ck_assert_str_eq(out, "");
        free(out);
        struct m0_conn *c = the_conn();
        ck_assert_uint_eq(c->phase, PH_HEAD);
        ck_assert_uint_eq(c->timer.cls, M0_TIMER_HEAD);
        ck_assert_uint_eq(c->read_cls, M0_TIMER_HEAD);
        ck_assert_uint_eq(c->read_deadline, c->timer.deadline);
        ck_assert_ptr_nonnull(c->rbuf);
        out = h1_send(fd, "st: a\r\n\r\n", NULL);
        ck_assert_str_eq(out, ANSWER(KA));
        free(out);
        ck_assert_uint_eq(c->timer.cls, M0_TIMER_IDLE);
        ck_assert_uint_eq(c->read_deadline, 0);
        close(fd);
}
END_TEST

/* H2: the head's deadline passing is 408, and the end of the connection. */
START_TEST(the_head_deadline_firing_is_408_and_close)
{
        int fd = h1_client();
        char *out = h1_send(fd, "GET /hello HTTP/1.1\r\n", NULL);
        ck_assert_str_eq(out, "");
        free(out);
        m0__conn_timer_fire(the_conn());
        h1_turn();
        bool eof;
        out = h1_read(fd, &eof);
        ck_assert_str_eq(out, "HTTP/1.1 408 Request Timeout\r\n" H "Content-Length: 20\r\n"
                              "Connection: close\r\n" TEXT "\r\n408 Request Timeout\n");
        ck_assert(eof);
        ck_assert_uint_eq(atomic_load(&h1->load), 0);
        free(out);
        close(fd);
}
END_TEST

/* An idle connection's deadline passing closes it without a byte. */
START_TEST(the_idle_deadline_firing_closes_without_a_byte)
{
        int fd = h1_client();
        char *out = h1_send(fd, HELLO, NULL);
        free(out);
        m0__conn_timer_fire(the_conn());
        h1_turn();
        bool eof;
        out = h1_read(fd, &eof);
        ck_assert_str_eq(out, "");
        ck_assert(eof);
        ck_assert_uint_eq(atomic_load(&h1->load), 0);
        free(out);
        close(fd);
}
END_TEST

/* H1: `Connection: close` is answered with it, then the connection ends. */
START_TEST(connection_close_is_answered_then_closed)
{
        int fd = h1_client();
        bool eof;
        char *out =
                h1_send(fd, "GET /hello HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", &eof);
        ck_assert_str_eq(out, ANSWER("Connection: close\r\n"));
        ck_assert(eof);
        free(out);
        close(fd);
}
END_TEST

/* H1: the keep-alive cap's last answer says `Connection: close`; what follows is not read. */
START_TEST(the_keepalive_cap_closes_after_its_last_answer)
{
        int fd = h1_client();
        bool eof;
        char *out = h1_send(fd, HELLO HELLO HELLO HELLO, &eof);
        ck_assert_str_eq(out, ANSWER(KA) ANSWER(KA) ANSWER("Connection: close\r\n"));
        ck_assert(eof);
        free(out);
        close(fd);
}
END_TEST

/* H7: HTTP/1.0 closes unless it asks for keep-alive, and is told so when it does. */
START_TEST(http10_closes_unless_it_asks_to_be_kept)
{
        int fd = h1_client();
        bool eof;
        char *out = h1_send(fd, "GET /hello HTTP/1.0\r\n\r\n", &eof);
        ck_assert_str_eq(out, ANSWER("Connection: close\r\n"));
        ck_assert(eof);
        free(out);
        close(fd);
        fd = h1_client();
        out = h1_send(fd, "GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &eof);
        ck_assert_str_eq(out, ANSWER("Connection: keep-alive\r\n" KA));
        ck_assert(!eof);
        free(out);
        close(fd);
}
END_TEST

/* The client's end of file inside a head: closed, nothing answered. */
START_TEST(an_end_of_file_inside_a_head_closes_quietly)
{
        int fd = h1_client();
        char *out = h1_send(fd, "GET /hel", NULL);
        free(out);
        ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
        h1_turn();
        bool eof;
        out = h1_read(fd, &eof);
        ck_assert_str_eq(out, "");
        ck_assert(eof);
        ck_assert_uint_eq(atomic_load(&h1->load), 0);
        free(out);
        close(fd);
}
END_TEST

/* The stop: an idle connection closes after drain_idle_ms; one inside a head gets its answer,
 * then the end. */
START_TEST(the_stop_closes_the_idle_and_answers_the_one_in_flight)
{
        int idle = h1_client();
        char *out = h1_send(idle, HELLO, NULL);
        free(out);
        struct m0_conn *c = the_conn();
        int busy = h1_client();
        out = h1_send(busy, "GET /hello HTTP/1.1\r\nHo", NULL);
        free(out);
        /* as the coordinator stops the loops: the host's flag, then each loop's message */
        atomic_store(&h1_host.serve.stopping, true);
        ck_assert_int_eq(m0__hctx_post_stop(h1), 0);
        h1_turn();
        /* The idle one waits drain_idle_ms for a request already on its way, then closes. */
        ck_assert_uint_eq(c->timer.cls, M0_TIMER_DRAIN);
        bool eof;
        out = h1_read(idle, &eof);
        ck_assert_str_eq(out, "");
        ck_assert(!eof);
        free(out);
        m0__conn_timer_fire(c);
        h1_turn();
        out = h1_read(idle, &eof);
        ck_assert_str_eq(out, "");
        ck_assert(eof);
        free(out);
        out = h1_send(busy, "st: a\r\n\r\n", &eof);
        ck_assert_str_eq(out, ANSWER("Connection: close\r\n"));
        ck_assert(eof);
        free(out);
        ck_assert_uint_eq(atomic_load(&h1->load), 0);
        close(idle);
        close(busy);
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
        tc = tcase_create("states");
        tcase_add_checked_fixture(tc, h1_setup, h1_stop);
        tcase_add_test(tc, after_an_answer_the_connection_waits_idle);
        tcase_add_test(tc, inside_a_head_the_connection_waits_on_its_deadline);
        tcase_add_test(tc, the_head_deadline_firing_is_408_and_close);
        tcase_add_test(tc, the_idle_deadline_firing_closes_without_a_byte);
        tcase_add_test(tc, connection_close_is_answered_then_closed);
        tcase_add_test(tc, the_keepalive_cap_closes_after_its_last_answer);
        tcase_add_test(tc, http10_closes_unless_it_asks_to_be_kept);
        tcase_add_test(tc, an_end_of_file_inside_a_head_closes_quietly);
        tcase_add_test(tc, the_stop_closes_the_idle_and_answers_the_one_in_flight);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(conn_suite());
}
