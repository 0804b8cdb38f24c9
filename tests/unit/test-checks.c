/* SPDX-License-Identifier: MIT */
/* test-checks.c: the host's checks, their order and the first failure named (SPEC R2, R3). */
#include <errno.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accesslog.h"
#include "preflight.h"
#include "host-private.h"
#include "unit.h"

static const char *const names[] = {"threads-count",
                                    "workers",
                                    "threads-vs-application",
                                    "blocking-vs-application",
                                    "listen-sockets",
                                    "limits",
                                    "bus",
                                    "routes",
                                    "cors",
                                    "metrics",
                                    "access-log",
                                    "tls"};
#define NCHECKS (sizeof(names) / sizeof(names[0]))

static struct m0_host host;
static m0_app app;
static struct m0_check checks[M0__CHECKS_MAX];
static size_t nchecks;

static void setup(void)
{
        char *argv[] = {"app", NULL};
        char *envp[] = {NULL};
        char err[256] = "";
        memset(&host, 0, sizeof(host));
        memset(&app, 0, sizeof(app));
        memset(checks, 0xa5, sizeof(checks));
        ck_assert_int_eq(m0__config_parse(&host.cfg, "app", 1, argv, envp, NULL, err, sizeof(err)),
                         M0_CONFIG_SERVE);
        /* a connection limit any test environment's RLIMIT_NOFILE covers */
        host.cfg.max_connections = 16;
        app.name = "t";
        app.max_threads = 0;
        host.app = &app;
}

static int run(void)
{
        nchecks = 0;
        int first = m0__checks_run(&host, checks, M0__CHECKS_MAX, &nchecks);
        ck_assert_uint_eq(nchecks, NCHECKS);
        for (size_t i = 0; i < NCHECKS; i++) {
                ck_assert_str_eq(checks[i].name, names[i]);
                if (checks[i].ok)
                        ck_assert_str_eq(checks[i].fix, "");
                else
                        ck_assert_str_ne(checks[i].fix, "");
                ck_assert_str_ne(checks[i].detail, "");
        }
        return first;
}

START_TEST(all_pass_in_order)
{
        ck_assert_int_eq(run(), -1);
        for (size_t i = 0; i < NCHECKS; i++)
                ck_assert_msg(checks[i].ok, "%s failed: %s", names[i], checks[i].detail);
        ck_assert_str_eq(checks[0].detail, "1 loop");
        ck_assert_str_eq(checks[1].detail, "one process");
        ck_assert_str_eq(checks[2].detail, "1 loop within the app's limit (no limit)");
        ck_assert_str_eq(checks[3].detail, "1 handler");
        ck_assert_str_eq(checks[4].detail, "none passed; will bind 127.0.0.1:8080");
}
END_TEST

START_TEST(threads_count)
{
        host.cfg.threads = 0;
        ck_assert_int_eq(run(), 0);
        ck_assert(!checks[0].ok);
        ck_assert_str_eq(checks[0].detail, "M0_THREADS=0 serves no loop");
        ck_assert_str_eq(checks[0].fix, "set --threads (M0_THREADS) to 1 or more, or auto");
        for (size_t i = 1; i < NCHECKS; i++)
                ck_assert_msg(checks[i].ok, "%s failed: %s", names[i], checks[i].detail);
}
END_TEST

START_TEST(workers)
{
        host.cfg.workers = 2;
        ck_assert_int_eq(run(), 1);
        ck_assert(checks[0].ok);
        ck_assert(!checks[1].ok);
        ck_assert_str_eq(checks[1].detail, "M0_WORKERS=2 asks for forked workers");
        ck_assert_str_eq(checks[1].fix,
                         "systemd supervises this service as one process; set --threads "
                         "(M0_THREADS)");
        ck_assert_ptr_nonnull(strstr(checks[1].fix, "--threads (M0_THREADS)"));
        for (size_t i = 2; i < NCHECKS; i++)
                ck_assert_msg(checks[i].ok, "%s failed: %s", names[i], checks[i].detail);

        /* 0 and 1 are one process */
        host.cfg.workers = 0;
        ck_assert_int_eq(run(), -1);
        host.cfg.workers = 1;
        ck_assert_int_eq(run(), -1);
}
END_TEST

START_TEST(threads_vs_application)
{
        app.max_threads = 1;
        host.cfg.threads = 2;
        ck_assert_int_eq(run(), 2);
        ck_assert(!checks[2].ok);
        ck_assert_str_eq(checks[2].detail,
                         "t serves at most 1 handler and M0_THREADS=2 asks for 2 loops");
        ck_assert_str_eq(checks[2].fix,
                         "set --threads (M0_THREADS) to the app's max_threads or fewer");
        /* no pool: blocking-vs-application has nothing to say */
        ck_assert(checks[3].ok);
        ck_assert(checks[0].ok && checks[1].ok && checks[4].ok && checks[5].ok);

        host.cfg.threads = 1;
        ck_assert_int_eq(run(), -1);
        ck_assert_str_eq(checks[2].detail, "1 loop within the app's limit (max_threads set)");

        app.max_threads = 4;
        host.cfg.threads = 4;
        ck_assert_int_eq(run(), -1);
        host.cfg.threads = 5;
        ck_assert_int_eq(run(), 2);

        app.max_threads = 0; /* no limit */
        host.cfg.threads = 1024;
        ck_assert_int_eq(run(), -1);
}
END_TEST

START_TEST(blocking_vs_application)
{
        app.max_threads = 1;
        host.cfg.threads = 1;
        host.cfg.blocking_threads = 1;
        ck_assert_int_eq(run(), 3);
        ck_assert(!checks[3].ok);
        ck_assert_str_eq(checks[3].detail,
                         "t serves at most 1 handler and M0_BLOCKING_THREADS=1 needs 2");
        ck_assert_str_eq(checks[3].fix, "set --blocking-threads (M0_BLOCKING_THREADS) to 0");
        ck_assert(checks[0].ok && checks[1].ok && checks[2].ok && checks[4].ok && checks[5].ok);

        /* every loop and pool thread builds a handler: 2 loops × (1 + 2) = 6 */
        app.max_threads = 6;
        host.cfg.threads = 2;
        host.cfg.blocking_threads = 2;
        ck_assert_int_eq(run(), -1);
        ck_assert_str_eq(checks[3].detail, "6 handlers");
        app.max_threads = 5;
        ck_assert_int_eq(run(), 3);

        app.max_threads = 0;
        host.cfg.threads = 8;
        host.cfg.blocking_threads = 16;
        ck_assert_int_eq(run(), -1);
}
END_TEST

START_TEST(first_failure_is_named)
{
        /* every one of the first four fails; the first is the one returned */
        host.cfg.threads = 0;
        host.cfg.workers = 3;
        app.max_threads = 1;
        host.cfg.blocking_threads = 1;
        snprintf(host.sockets_err, sizeof(host.sockets_err), "fd 3 is not a listening socket");
        ck_assert_int_eq(run(), 0);
        ck_assert(!checks[1].ok);
        ck_assert(!checks[4].ok);

        host.cfg.threads = 2;
        ck_assert_int_eq(run(), 1);
        ck_assert(!checks[2].ok);
        ck_assert(!checks[3].ok);

        host.cfg.workers = 1;
        ck_assert_int_eq(run(), 2);
        host.cfg.threads = 1;
        ck_assert_int_eq(run(), 3);
        host.cfg.blocking_threads = 0;
        ck_assert_int_eq(run(), 4);
}
END_TEST

START_TEST(listen_sockets)
{
        snprintf(host.sockets_err, sizeof(host.sockets_err), "fd 3 is not a listening socket");
        ck_assert_int_eq(run(), 4);
        ck_assert_str_eq(checks[4].detail, "fd 3 is not a listening socket");
        ck_assert_str_eq(checks[4].fix,
                         "pass listening stream sockets (ListenStream= in the .socket unit)");

        host.sockets_err[0] = '\0';
        static struct m0_listener passed[2]; /* two plain ones, neither named https */
        host.sockets.passed = true;
        host.sockets.v = passed;
        host.sockets.n = 2;
        ck_assert_int_eq(run(), -1);
        ck_assert_str_eq(checks[4].detail, "2 sockets passed by systemd");
}
END_TEST

static int hello(m0_req *req, m0_res *res, void *state)
{
        (void)req;
        (void)state;
        return m0_res_text(res, 200, "hello\n");
}

START_TEST(routes_and_cors)
{
        /* T1, Q5: compiled before the checks; what they refuse is the check's finding */
        static const m0_route good[] = {{"GET", "/a/:id", hello, 0}, {NULL, NULL, NULL, 0}};
        app.routes = good;
        ck_assert_int_eq(m0__router_build(&host.router, &app, &host.cfg), 0);
        ck_assert_int_eq(m0__cors_build(&host.cors, NULL), 0);
        ck_assert_int_eq(run(), -1);
        ck_assert_str_eq(checks[7].detail,
                         "1 route compiled into 3 trie nodes; the first in table order wins");
        ck_assert_str_eq(checks[8].detail, "off: no Access-Control-* header is sent");
        m0__router_free(&host.router);

        static const m0_route bad[] = {{"GET", "/a/:id/:id", hello, 0}, {NULL, NULL, NULL, 0}};
        app.routes = bad;
        ck_assert_int_eq(m0__router_build(&host.router, &app, &host.cfg), -EINVAL);
        static const char *const null_origin[] = {"null", NULL};
        static const m0_cors cors = {.origins = null_origin};
        ck_assert_int_eq(m0__cors_build(&host.cors, &cors), -EINVAL);
        ck_assert_int_eq(run(), 7);
        ck_assert(!checks[7].ok && !checks[8].ok);
        ck_assert_str_eq(checks[7].detail,
                         "route 0 (GET /a/:id/:id): the capture name 'id' appears twice");
        ck_assert_str_eq(checks[7].fix, "give each capture of a route its own name");
        ck_assert_str_eq(checks[8].fix, "list the origins that may call the app");
        m0__router_free(&host.router);
}
END_TEST

/* O1: the metrics' address: off, an address of this machine, one it does not have, or a passed
 * socket, which wins over M0_METRICS. */
START_TEST(metrics)
{
        ck_assert_int_eq(run(), -1);
        ck_assert_str_eq(checks[9].detail, "off: no socket named metrics passed, M0_METRICS off");

        host.cfg.metrics = (struct m0_addr){.text = "127.0.0.1:0", .on = true, .host = "127.0.0.1"};
        ck_assert_int_eq(run(), -1);
        ck_assert_str_eq(checks[9].detail, "GET /metrics on 127.0.0.1:0 (M0_METRICS)");

        /* 192.0.2.1 is TEST-NET-1: no machine has it */
        host.cfg.metrics = (struct m0_addr){
                .text = "192.0.2.1:9464", .on = true, .host = "192.0.2.1", .port = 9464};
        ck_assert_int_eq(run(), 9);
        ck_assert_str_eq(checks[9].detail,
                         "cannot listen on 192.0.2.1:9464: Cannot assign requested address");
        ck_assert_str_eq(checks[9].fix, "set --metrics or M0_METRICS to HOST:PORT, or off");

        host.sockets.metrics_passed = true;
        host.sockets.nmetrics = 2;
        ck_assert_int_eq(run(), -1);
        ck_assert_str_eq(checks[9].detail,
                         "2 sockets named metrics passed by systemd; M0_METRICS is not used");
}
END_TEST

/* O2: M0_ACCESS_LOG=journal is refused where no journald takes datagrams, named. */
START_TEST(access_log)
{
        ck_assert_int_eq(run(), -1);
        ck_assert_str_eq(checks[10].detail, "off");
        host.cfg.access_log = M0_ACCESS_LINE;
        ck_assert_int_eq(run(), -1);
        ck_assert_str_eq(checks[10].detail, "on: one log line per request");

        host.cfg.access_log = M0_ACCESS_JOURNAL;
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX, .sun_path = M0__JOURNAL_SOCKET};
        ck_assert_int_ge(fd, 0);
        int there = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : errno;
        close(fd);
        char want[300];
        if (there == 0) {
                ck_assert_int_eq(run(), -1);
                ck_assert_str_eq(checks[10].detail,
                                 "journal: journald takes entries at " M0__JOURNAL_SOCKET);
                return;
        }
        ck_assert_int_eq(run(), 10);
        snprintf(want, sizeof(want),
                 "M0_ACCESS_LOG=journal, but journald does not take entries at %s: %s",
                 M0__JOURNAL_SOCKET, strerror(there));
        ck_assert_str_eq(checks[10].detail, want);
        ck_assert_str_eq(checks[10].fix,
                         "run it under systemd-journald, or set M0_ACCESS_LOG to on or off");
}
END_TEST

/* TL1, TL3: off without a certificate or a port; a TLS port that is the plain one, or a
 * certificate that cannot be read, is the check's refusal naming the knob or the file. */
START_TEST(tls)
{
        unsetenv("CREDENTIALS_DIRECTORY");
        ck_assert_int_eq(run(), -1);
        ck_assert_str_eq(checks[11].detail,
                         "off: no certificate (M0_TLS_CERT, or the tls.crt credential) and no "
                         "M0_TLS_PORT");
        host.cfg.tls_port = host.cfg.port;
        ck_assert_int_eq(run(), 11);
        ck_assert_str_eq(checks[11].detail, "M0_TLS_PORT=8080 is the plain port too (M0_PORT)");
        ck_assert_str_eq(checks[11].fix, "give --tls-port (M0_TLS_PORT) a port of its own");
        host.cfg.tls_port = 8443;
        ck_assert_int_eq(run(), 11);
        ck_assert_str_eq(checks[11].detail, "no certificate: neither M0_TLS_CERT nor "
                                            "$CREDENTIALS_DIRECTORY/tls.crt");
        snprintf(host.cfg.tls_cert, sizeof(host.cfg.tls_cert), "/nonexistent-m0-unit/tls.crt");
        snprintf(host.cfg.tls_key, sizeof(host.cfg.tls_key), "/nonexistent-m0-unit/tls.key");
        ck_assert_int_eq(run(), 11);
        ck_assert_str_eq(checks[11].detail, "M0_TLS_CERT=/nonexistent-m0-unit/tls.crt: no such "
                                            "file");
        ck_assert_ptr_null(host.tls);
}
END_TEST

START_TEST(fewer_slots_than_checks)
{
        host.cfg.workers = 2;
        size_t n = 99;
        ck_assert_int_eq(m0__checks_run(&host, checks, 1, &n), -1);
        ck_assert_uint_eq(n, 1);
        ck_assert_str_eq(checks[0].name, "threads-count");
        ck_assert_int_eq(m0__checks_run(&host, checks, 2, &n), 1);
        ck_assert_uint_eq(n, 2);
        ck_assert_int_eq(m0__checks_run(&host, checks, 0, &n), -1);
        ck_assert_uint_eq(n, 0);
}
END_TEST

/*
 * `limits` reads RLIMIT_NOFILE, which only goes down for good: measured in a child so neither
 * the test runner nor the next test sees the lowered limit. The child's status is the count of
 * expectations that failed.
 */
static void limits_in_child(rlim_t soft, rlim_t hard, int *ret_first, char *detail, size_t dlen)
{
        int pfd[2];
        ck_assert_int_eq(pipe(pfd), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                close(pfd[0]);
                struct rlimit rl = {.rlim_cur = soft, .rlim_max = hard};
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        _exit(100);
                struct m0_check c[M0__CHECKS_MAX];
                size_t n = 0;
                int first = m0__checks_run(&host, c, M0__CHECKS_MAX, &n);
                char msg[600];
                int len = snprintf(msg, sizeof(msg), "%d|%s|%s", first, c[5].detail, c[5].fix);
                if (write(pfd[1], msg, (size_t)len) != len)
                        _exit(101);
                _exit(n == NCHECKS && !strcmp(c[5].name, "limits") ? 0 : 102);
        }
        close(pfd[1]);
        char msg[600] = "";
        size_t got = 0;
        ssize_t r;
        while (got < sizeof(msg) - 1 && (r = read(pfd[0], msg + got, sizeof(msg) - 1 - got)) > 0)
                got += (size_t)r;
        msg[got] = '\0';
        close(pfd[0]);
        int status = 0;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        ck_assert_int_eq(WEXITSTATUS(status), 0);
        char *bar = strchr(msg, '|');
        ck_assert_ptr_nonnull(bar);
        *bar = '\0';
        *ret_first = atoi(msg);
        snprintf(detail, dlen, "%s", bar + 1);
}

START_TEST(limits)
{
        int first = -2;
        char detail[600];

        /* need = max_connections + 64 + threads × (4 + sockets) × (1 + blocking) = 132 */
        host.cfg.max_connections = 64;
        limits_in_child(131, 131, &first, detail, sizeof(detail));
        ck_assert_int_eq(first, 5);
        ck_assert_str_eq(detail, "RLIMIT_NOFILE is 131 (hard 131) and --max-connections "
                                 "(M0_MAX_CONNECTIONS)=64 needs 132|raise LimitNOFILE= or lower "
                                 "--max-connections (M0_MAX_CONNECTIONS)");

        limits_in_child(132, 132, &first, detail, sizeof(detail));
        ck_assert_int_eq(first, -1);
        ck_assert_str_eq(detail, "RLIMIT_NOFILE 132 covers 132|");

        /* a soft limit below the need is fine when the hard one lets the host raise it */
        limits_in_child(100, 132, &first, detail, sizeof(detail));
        ck_assert_int_eq(first, -1);
        ck_assert_str_eq(detail, "RLIMIT_NOFILE 100 is raised to 132 at start (hard 132)|");

        /* loops, sockets and pool threads count: 64 + 64 + 2 × (4 + 1) × (1 + 3) = 168 */
        host.cfg.threads = 2;
        host.cfg.blocking_threads = 3;
        static struct m0_listener one[1]; /* a plain one */
        host.sockets.v = one;
        host.sockets.n = 1;
        limits_in_child(167, 167, &first, detail, sizeof(detail));
        ck_assert_int_eq(first, 5);
        limits_in_child(168, 168, &first, detail, sizeof(detail));
        ck_assert_int_eq(first, -1);
}
END_TEST

static Suite *checks_suite(void)
{
        Suite *s = suite_create("checks");
        TCase *tc = tcase_create("checks");
        tcase_add_checked_fixture(tc, setup, NULL);
        tcase_add_test(tc, all_pass_in_order);
        tcase_add_test(tc, threads_count);
        tcase_add_test(tc, workers);
        tcase_add_test(tc, threads_vs_application);
        tcase_add_test(tc, blocking_vs_application);
        tcase_add_test(tc, first_failure_is_named);
        tcase_add_test(tc, listen_sockets);
        tcase_add_test(tc, routes_and_cors);
        tcase_add_test(tc, metrics);
        tcase_add_test(tc, access_log);
        tcase_add_test(tc, tls);
        tcase_add_test(tc, fewer_slots_than_checks);
        tcase_add_test(tc, limits);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(checks_suite());
}
