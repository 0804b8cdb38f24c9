/* SPDX-License-Identifier: MIT */
/* test-accept.c: new connections placed on the least loaded loop, handed off, refused (L4, H2). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "accept.h"
#include "conn.h"
#include "host-private.h"
#include "hctx.h"
#include "unit.h"

/* Every wait below is on the kernel's own state (the listener's queue, a socket's end of file);
 * the bound only keeps a failure from hanging. */
#define WAIT_MS 10000
#define MAX_CLIENTS 80

static struct m0_host *host;
static int lfd = -1;
static struct sockaddr_in laddr;
static int clients[MAX_CLIENTS];
static int nclients;

static long ms_since(const struct timespec *t0)
{
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        return (now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

/*
 * A host with `nloops` loops, set up as m0_main() sets them up, as far as accepting reads them:
 * - cfg.accept_share and nloops: whether and over what pick() places;
 * - cfg.max_connections: the process's bound, against host->serve.conns;
 * - cfg.idle_timeout_ms: m0__conn_admit files a kept connection under the idle timer;
 * - cfg.max_header_fields: m0__loop_init allocates each loop's request headers from it;
 * - cfg.turn_items and cfg.turn_budget_ms: the events and messages a turn of
 *   m0__loop_run_once takes, and for how long (D41, D85);
 * - sockets.n stays 0: the loops hold no listener of their own; the test's listener is handed
 *   to m0__accept_ready as a loop hands it its copy.
 * m0__loop_init gives each loop its epoll set, its mailbox and its spare descriptor.
 */
static void setup_host(int nloops, bool share, uint32_t max_connections)
{
        host = calloc(1, sizeof(*host));
        ck_assert_ptr_nonnull(host);
        host->cfg.accept_share = share;
        host->cfg.max_connections = max_connections;
        host->cfg.idle_timeout_ms = 60000;
        host->cfg.max_header_fields = 16;
        host->cfg.turn_items = 64;
        host->cfg.turn_budget_ms = 10;
        host->serve.nloops = nloops;
        host->serve.loops = calloc((size_t)nloops, sizeof(*host->serve.loops));
        ck_assert_ptr_nonnull(host->serve.loops);
        m0__host_link(host);
        for (int i = 0; i < nloops; i++)
                ck_assert_int_eq(m0__hctx_init(&host->serve.loops[i], &host->serve, i), 0);

        /* A listener as activation.c hands them over: non-blocking, so a drained queue is
         * EAGAIN, not a wait. */
        lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(lfd, 0);
        laddr = (struct sockaddr_in){.sin_family = AF_INET,
                                     .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t alen = sizeof(laddr);
        ck_assert_int_eq(bind(lfd, (struct sockaddr *)&laddr, sizeof(laddr)), 0);
        ck_assert_int_eq(listen(lfd, 128), 0);
        ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&laddr, &alen), 0);
        nclients = 0;
}

static void teardown_host(void)
{
        for (int i = 0; i < host->serve.nloops; i++) {
                struct m0_hctx *l = &host->serve.loops[i];
                struct m0_conn *c;
                while ((c = M0__LIST_FIRST(&l->loop.timers[M0_TIMER_IDLE], struct m0_conn,
                                           timer.link)))
                        m0__conn_close(c);
                m0__conn_reap(l);
                m0__hctx_destroy(l); /* closes the hand-offs still in its mailbox */
        }
        free(host->serve.loops);
        free(host);
        for (int k = 0; k < nclients; k++)
                close(clients[k]);
        close(lfd);
}

/* The connections the kernel has completed and nobody has accepted yet. */
static unsigned queued(void)
{
        struct tcp_info ti;
        socklen_t len = sizeof(ti);
        ck_assert_int_eq(getsockopt(lfd, IPPROTO_TCP, TCP_INFO, &ti, &len), 0);
        return ti.tcpi_unacked; /* on a listener: the accept queue's length */
}

/* Connect `n` clients, in order, and wait until all of them are in the listener's queue: a
 * client's connect() can return a moment before the kernel queues its connection. */
static void connect_clients(int n)
{
        ck_assert_int_le(nclients + n, MAX_CLIENTS);
        unsigned want = queued() + (unsigned)n;
        for (int k = 0; k < n; k++) {
                int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                ck_assert_int_ge(fd, 0);
                ck_assert_int_eq(connect(fd, (struct sockaddr *)&laddr, sizeof(laddr)), 0);
                clients[nclients++] = fd;
        }
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (queued() < want && ms_since(&t0) < WAIT_MS)
                sched_yield();
        ck_assert_uint_eq(queued(), want);
}

static int port_of(int fd, bool peer)
{
        struct sockaddr_in a;
        socklen_t alen = sizeof(a);
        int r = peer ? getpeername(fd, (struct sockaddr *)&a, &alen)
                     : getsockname(fd, (struct sockaddr *)&a, &alen);
        ck_assert_int_eq(r, 0);
        return ntohs(a.sin_port);
}

/* The client whose connection `fd` is the server's side of. */
static int client_of(int fd)
{
        int port = port_of(fd, true);
        for (int k = 0; k < nclients; k++)
                if (port_of(clients[k], false) == port)
                        return k;
        ck_abort_msg("fd %d is no client's connection", fd);
        return -1;
}

struct placement {
        int loop[MAX_CLIENTS];    /* where each client's connection is, -1: nowhere */
        bool posted[MAX_CLIENTS]; /* in the loop's mailbox (handed off), not admitted by it */
        int kept[8], mailbox[8];  /* per loop */
};

/* Where every connection is now: admitted by a loop (filed under its idle timer) or handed to
 * one (an M0_MSG_CONN in its mailbox, with the fd). */
static void placement(struct placement *p)
{
        memset(p, 0, sizeof(*p));
        for (int k = 0; k < MAX_CLIENTS; k++)
                p->loop[k] = -1;
        for (int i = 0; i < host->serve.nloops; i++) {
                struct m0_hctx *l = &host->serve.loops[i];
                for (struct m0_conn *c = M0__LIST_FIRST(&l->loop.timers[M0_TIMER_IDLE],
                                                        struct m0_conn, timer.link);
                     c; c = m0__conn_timer_next(c)) {
                        int k = client_of(c->tr.fd);
                        ck_assert_int_eq(p->loop[k], -1);
                        p->loop[k] = i;
                        p->kept[i]++;
                }
                pthread_mutex_lock(&l->loop.mb_lock);
                for (struct m0_msg *m = M0__LIST_FIRST(&l->loop.mb, struct m0_msg, link); m;
                     m = M0__LIST_NEXT(m, struct m0_msg, link)) {
                        ck_assert_ptr_eq(m->handle, m0__accept_handed_over);
                        ck_assert_int_ge(m->fd, 0);
                        int k = client_of(m->fd);
                        ck_assert_int_eq(p->loop[k], -1);
                        p->loop[k] = i;
                        p->posted[k] = true;
                        p->mailbox[i]++;
                }
                pthread_mutex_unlock(&l->loop.mb_lock);
        }
}

static void assert_loads(const unsigned *want)
{
        for (int i = 0; i < host->serve.nloops; i++)
                ck_assert_msg(atomic_load(&host->serve.loops[i].load) == want[i],
                              "loop %d has load %u, expected %u", i,
                              atomic_load(&host->serve.loops[i].load), want[i]);
}

/* Whether the server has closed client k's connection: its end of file, within the bound. */
static bool sees_eof(int k, int timeout_ms)
{
        struct pollfd pf = {.fd = clients[k], .events = POLLIN};
        if (poll(&pf, 1, timeout_ms) != 1)
                return false;
        char ch;
        return recv(clients[k], &ch, 1, MSG_DONTWAIT) == 0;
}

/* ---- one loop ---- */

START_TEST(one_loop_keeps_every_connection)
{
        setup_host(1, true, 100);
        connect_clients(4);
        m0__accept_ready(&host->serve.loops[0], lfd);
        struct placement p;
        placement(&p);
        for (int k = 0; k < 4; k++) {
                ck_assert_int_eq(p.loop[k], 0);
                ck_assert(!p.posted[k]);
        }
        struct m0_hctx *l = &host->serve.loops[0];
        ck_assert_uint_eq(l->accepted, 4);
        ck_assert_uint_eq(l->passed, 0);
        ck_assert_uint_eq(l->refused_conns, 0);
        ck_assert_uint_eq(atomic_load(&l->load), 4);
        ck_assert_uint_eq(atomic_load(&host->serve.conns), 4);
        ck_assert_uint_eq(atomic_load(&host->serve.rotate), 0); /* nothing to choose between */
        ck_assert_uint_eq(queued(), 0);
        teardown_host();
}
END_TEST

/* ---- three loops ---- */

/* Equal loads: a burst rotates over every loop, the accepting one included, each pick seeing
 * the load the one before it raised. */
START_TEST(equal_loads_rotate)
{
        setup_host(3, true, 100);
        connect_clients(6);
        m0__accept_ready(&host->serve.loops[0], lfd);
        struct placement p;
        placement(&p);
        static const int want[] = {0, 1, 2, 0, 1, 2};
        for (int k = 0; k < 6; k++) {
                ck_assert_msg(p.loop[k] == want[k], "connection %d on loop %d, expected %d", k,
                              p.loop[k], want[k]);
                ck_assert(p.posted[k] == (want[k] != 0));
        }
        ck_assert_int_eq(p.kept[0], 2);
        ck_assert_int_eq(p.mailbox[1], 2);
        ck_assert_int_eq(p.mailbox[2], 2);
        ck_assert_uint_eq(host->serve.loops[0].accepted, 2);
        ck_assert_uint_eq(host->serve.loops[0].passed, 4);
        for (int i = 1; i < 3; i++) {
                ck_assert_uint_eq(host->serve.loops[i].accepted, 0);
                ck_assert_uint_eq(host->serve.loops[i].passed, 0);
                ck_assert_uint_eq(host->serve.loops[i].received,
                                  0); /* counted when it takes them */
        }
        /* the targets' loads were raised by the pick, before they saw their mailboxes */
        assert_loads((const unsigned[]){2, 2, 2});
        /* each target was woken once, on its mailbox's empty-to-non-empty edge; the accepting
         * loop not at all */
        for (int i = 0; i < 3; i++) {
                uint64_t v = 0;
                ssize_t r = read(host->serve.loops[i].loop.mb_fd, &v, sizeof(v));
                if (i == 0) {
                        ck_assert_int_eq(r, -1);
                        ck_assert_int_eq(errno, EAGAIN);
                } else {
                        ck_assert_int_eq(r, sizeof(v));
                        ck_assert_uint_eq(v, 1);
                }
        }
        ck_assert_uint_eq(atomic_load(&host->serve.conns), 6);
        ck_assert_uint_eq(atomic_load(&host->serve.rotate), 6);
        teardown_host();
}
END_TEST

/* The rotation is the host's, whichever loop accepts; the accepting loop counts what it kept
 * and what it passed. */
START_TEST(rotation_is_the_hosts_not_the_accepting_loops)
{
        setup_host(3, true, 100);
        connect_clients(4);
        m0__accept_ready(&host->serve.loops[1], lfd);
        struct placement p;
        placement(&p);
        static const int want[] = {0, 1, 2, 0};
        for (int k = 0; k < 4; k++) {
                ck_assert_int_eq(p.loop[k], want[k]);
                ck_assert(p.posted[k] == (want[k] != 1));
        }
        ck_assert_uint_eq(host->serve.loops[1].accepted, 1);
        ck_assert_uint_eq(host->serve.loops[1].passed, 3);
        ck_assert_uint_eq(host->serve.loops[0].passed, 0);
        assert_loads((const unsigned[]){2, 1, 1});
        teardown_host();
}
END_TEST

/*
 * Unequal loads (5, 2, 2): the least loaded wins and ties go to the first loop after the
 * rotation's start. Worked by hand, with the start advancing 0, 1, 2, 0, ...:
 *   start 0: 5 2 2 -> loop 1    start 1: 3 2 5 -> loop 2    start 2: 3 5 3 -> loop 2
 *   start 0: 5 3 4 -> loop 1    start 1: 4 4 5 -> loop 1    start 2: 4 5 5 -> loop 2
 *   start 0: 5 5 5 -> loop 0
 * The second pick going to loop 2 rather than loop 1 is the first one's raise, seen before any
 * loop took its hand-off.
 */
START_TEST(least_loaded_wins)
{
        setup_host(3, true, 100);
        atomic_store(&host->serve.loops[0].load, 5);
        atomic_store(&host->serve.loops[1].load, 2);
        atomic_store(&host->serve.loops[2].load, 2);
        connect_clients(7);
        m0__accept_ready(&host->serve.loops[0], lfd);
        struct placement p;
        placement(&p);
        static const int want[] = {1, 2, 2, 1, 1, 2, 0};
        for (int k = 0; k < 7; k++)
                ck_assert_msg(p.loop[k] == want[k], "connection %d on loop %d, expected %d", k,
                              p.loop[k], want[k]);
        ck_assert(!p.posted[6]);
        ck_assert_uint_eq(host->serve.loops[0].accepted, 1);
        ck_assert_uint_eq(host->serve.loops[0].passed, 6);
        assert_loads((const unsigned[]){6, 5, 5});
        ck_assert_uint_eq(atomic_load(&host->serve.conns), 7);
        teardown_host();
}
END_TEST

/* L4's figure: 32 connections against 4 loops land 8/8/8/8. */
START_TEST(thirty_two_over_four_loops_is_eight_each)
{
        setup_host(4, true, 100);
        connect_clients(32);
        m0__accept_ready(&host->serve.loops[2], lfd);
        struct placement p;
        placement(&p);
        ck_assert_int_eq(p.mailbox[0], 8);
        ck_assert_int_eq(p.mailbox[1], 8);
        ck_assert_int_eq(p.kept[2], 8);
        ck_assert_int_eq(p.mailbox[3], 8);
        assert_loads((const unsigned[]){8, 8, 8, 8});
        ck_assert_uint_eq(host->serve.loops[2].accepted, 8);
        ck_assert_uint_eq(host->serve.loops[2].passed, 24);
        teardown_host();
}
END_TEST

/* The target takes its hand-offs from the mailbox: each is admitted there, and counted. */
START_TEST(handed_off_connections_are_admitted_by_the_target)
{
        setup_host(3, true, 100);
        connect_clients(6);
        m0__accept_ready(&host->serve.loops[0], lfd);
        struct placement before;
        placement(&before);
        for (int i = 1; i < 3; i++)
                ck_assert_int_eq(m0__hctx_run_once(&host->serve.loops[i], 0), 1);
        struct placement after;
        placement(&after);
        for (int k = 0; k < 6; k++) {
                ck_assert_int_eq(after.loop[k], before.loop[k]);
                ck_assert(!after.posted[k]);
        }
        ck_assert_uint_eq(host->serve.loops[1].received, 2);
        ck_assert_uint_eq(host->serve.loops[2].received, 2);
        ck_assert_int_eq(after.kept[1], 2);
        ck_assert_int_eq(after.kept[2], 2);
        assert_loads((const unsigned[]){2, 2, 2}); /* raised once, at the pick */
        teardown_host();
}
END_TEST

/* M0_ACCEPT_SHARE=0: the loop that won the race keeps what it accepted. */
START_TEST(sharing_off_keeps_every_connection_on_the_accepting_loop)
{
        setup_host(3, false, 100);
        connect_clients(5);
        m0__accept_ready(&host->serve.loops[2], lfd);
        struct placement p;
        placement(&p);
        for (int k = 0; k < 5; k++) {
                ck_assert_int_eq(p.loop[k], 2);
                ck_assert(!p.posted[k]);
        }
        ck_assert_int_eq(p.mailbox[0] + p.mailbox[1], 0);
        ck_assert_uint_eq(host->serve.loops[2].accepted, 5);
        ck_assert_uint_eq(host->serve.loops[2].passed, 0);
        assert_loads((const unsigned[]){0, 0, 5});
        ck_assert_uint_eq(atomic_load(&host->serve.rotate), 0);
        teardown_host();
}
END_TEST

/* ---- bounds ---- */

/* H2: past max_connections a new connection is closed at once (its client sees the end of
 * file) and counted; it is placed nowhere and raises no load. */
START_TEST(past_max_connections_is_closed_and_counted)
{
        setup_host(3, true, 2);
        connect_clients(4);
        m0__accept_ready(&host->serve.loops[0], lfd);
        struct placement p;
        placement(&p);
        ck_assert_int_eq(p.loop[0], 0);
        ck_assert_int_eq(p.loop[1], 1);
        ck_assert_int_eq(p.loop[2], -1);
        ck_assert_int_eq(p.loop[3], -1);
        ck_assert(sees_eof(2, WAIT_MS));
        ck_assert(sees_eof(3, WAIT_MS));
        ck_assert(!sees_eof(0, 0));
        ck_assert(!sees_eof(1, 0));
        ck_assert_uint_eq(host->serve.loops[0].refused_conns, 2);
        ck_assert_uint_eq(host->serve.loops[0].accepted, 1);
        ck_assert_uint_eq(host->serve.loops[0].passed, 1);
        ck_assert_uint_eq(atomic_load(&host->serve.conns), 2);
        ck_assert_uint_eq(atomic_load(&host->serve.rotate), 2);
        assert_loads((const unsigned[]){1, 1, 0});
        ck_assert_uint_eq(queued(), 0);

        /* one closes: there is room for one more */
        m0__conn_close(M0__LIST_FIRST(&host->serve.loops[0].loop.timers[M0_TIMER_IDLE],
                                      struct m0_conn, timer.link));
        m0__conn_reap(&host->serve.loops[0]);
        ck_assert_uint_eq(atomic_load(&host->serve.conns), 1);
        connect_clients(2);
        m0__accept_ready(&host->serve.loops[1], lfd);
        placement(&p);
        ck_assert_int_eq(p.loop[4], 2); /* rotation start 2: loads 0 1 0 -> loop 2 */
        ck_assert_int_eq(p.loop[5], -1);
        ck_assert(sees_eof(5, WAIT_MS));
        ck_assert_uint_eq(host->serve.loops[1].refused_conns, 1);
        ck_assert_uint_eq(atomic_load(&host->serve.conns), 2);
        teardown_host();
}
END_TEST

/* A wake-up takes at most 64 connections, so one busy listener cannot starve a loop's
 * connections; the rest wait for the next. */
START_TEST(one_wake_accepts_at_most_64)
{
        setup_host(1, true, 1000);
        connect_clients(70);
        struct m0_hctx *l = &host->serve.loops[0];
        m0__accept_ready(l, lfd);
        ck_assert_uint_eq(l->accepted, 64);
        ck_assert_uint_eq(queued(), 6);
        m0__accept_ready(l, lfd);
        ck_assert_uint_eq(l->accepted, 70);
        ck_assert_uint_eq(queued(), 0);
        m0__accept_ready(l, lfd); /* an empty queue: EAGAIN, nothing changes */
        ck_assert_uint_eq(l->accepted, 70);
        ck_assert_uint_eq(l->refused_conns, 0);
        ck_assert_uint_eq(atomic_load(&host->serve.conns), 70);
        struct placement p;
        placement(&p);
        ck_assert_int_eq(p.kept[0], 70);
        teardown_host();
}
END_TEST

START_TEST(one_wake_accepts_at_most_64_over_three_loops)
{
        setup_host(3, true, 1000);
        connect_clients(70);
        struct m0_hctx *l = &host->serve.loops[0];
        m0__accept_ready(l, lfd);
        ck_assert_uint_eq(l->accepted + l->passed, 64);
        ck_assert_uint_eq(queued(), 6);
        ck_assert_uint_eq(atomic_load(&host->serve.rotate), 64);
        assert_loads((const unsigned[]){22, 21, 21});
        teardown_host();
}
END_TEST

/*
 * H2: out of descriptors (EMFILE), the loop gives up its spare one to take the connection and
 * close it, so the queue moves instead of waking every loop for ever; then takes the spare
 * back. Measured in a child: RLIMIT_NOFILE only goes down for good. The child writes what it
 * saw; the parent's client sees the end of file.
 */
START_TEST(out_of_descriptors_sheds_one_connection)
{
        setup_host(1, true, 100);
        connect_clients(2);
        int pfd[2];
        ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
        struct m0_hctx *l = &host->serve.loops[0];
        int spare = l->reserve_fd;
        ck_assert_int_ge(spare, 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                /* the lowest free descriptor is the limit: nothing more can be opened */
                int first_free = dup(0);
                if (first_free < 0)
                        _exit(100);
                close(first_free);
                struct rlimit rl;
                if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                        _exit(101);
                rl.rlim_cur = (rlim_t)first_free;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        _exit(102);
                if (dup(0) >= 0 || errno != EMFILE)
                        _exit(103);
                m0__accept_ready(l, lfd);
                unsigned long long v[5] = {l->refused_conns, l->accepted,
                                           atomic_load(&host->serve.conns), l->reserve_fd == spare,
                                           atomic_load(&l->load)};
                _exit(write(pfd[1], v, sizeof(v)) == (ssize_t)sizeof(v) ? 0 : 104);
        }
        close(pfd[1]);
        unsigned long long v[5] = {0};
        ssize_t got = read(pfd[0], v, sizeof(v));
        close(pfd[0]);
        int status = 0;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        ck_assert_int_eq(WEXITSTATUS(status), 0);
        ck_assert_int_eq(got, sizeof(v));
        ck_assert_uint_eq(v[0], 1); /* one shed, then the wake-up ends */
        ck_assert_uint_eq(v[1], 0);
        ck_assert_uint_eq(v[2], 0);
        ck_assert_uint_eq(v[3], 1); /* the spare taken back, in the same slot */
        ck_assert_uint_eq(v[4], 0);
        ck_assert(sees_eof(0, WAIT_MS));
        ck_assert_uint_eq(queued(), 1); /* the second waits for the next wake-up */
        teardown_host();
}
END_TEST

static Suite *accept_suite(void)
{
        Suite *s = suite_create("accept");
        TCase *tc = tcase_create("placement");
        tcase_add_test(tc, one_loop_keeps_every_connection);
        tcase_add_test(tc, equal_loads_rotate);
        tcase_add_test(tc, rotation_is_the_hosts_not_the_accepting_loops);
        tcase_add_test(tc, least_loaded_wins);
        tcase_add_test(tc, thirty_two_over_four_loops_is_eight_each);
        tcase_add_test(tc, handed_off_connections_are_admitted_by_the_target);
        tcase_add_test(tc, sharing_off_keeps_every_connection_on_the_accepting_loop);
        suite_add_tcase(s, tc);
        tc = tcase_create("bounds");
        tcase_add_test(tc, past_max_connections_is_closed_and_counted);
        tcase_add_test(tc, one_wake_accepts_at_most_64);
        tcase_add_test(tc, one_wake_accepts_at_most_64_over_three_loops);
        tcase_add_test(tc, out_of_descriptors_sheds_one_connection);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(accept_suite());
}
