/* SPDX-License-Identifier: MIT */
/* unit-h1.h: one loop's HTTP context turned by the test's own thread, over socket pairs: a
 * request's bytes in, the loop turned, the answer's bytes out (the request core's unit tests:
 * test-conn.c, test-dispatch.c, test-llhttp-driver.c). */
#ifndef M0_UNIT_H1_H
#define M0_UNIT_H1_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bus.h"
#include "config.h"
#include "conn.h"
#include "hctx.h"
#include "host-private.h"
#include "unit.h"

static struct m0_host h1_host;
static struct m0_hctx *h1;

/* A host with `app` and the knobs in `argv` (NULL-terminated, after the program's name), one
 * loop context built as a loop thread builds its own; no thread is started. */
static void h1_start(const m0_app *app, const char *const *argv)
{
        char *args[32] = {"unit"};
        int argc = 1;
        for (; argv && argv[argc - 1]; argc++)
                args[argc] = (char *)argv[argc - 1];
        args[argc] = NULL;
        char *envp[] = {NULL};
        char err[256];
        FILE *devnull = fopen("/dev/null", "w");
        memset(&h1_host, 0, sizeof(h1_host));
        ck_assert_int_eq(
                m0__config_parse(&h1_host.cfg, "unit", argc, args, envp, devnull, err, sizeof(err)),
                M0_CONFIG_SERVE);
        fclose(devnull);
        h1_host.app = app;
        ck_assert_int_eq(m0__router_build(&h1_host.router, app, &h1_host.cfg), 0);
        ck_assert_int_eq(m0__cors_build(&h1_host.cors, app->cors), 0);
        h1_host.serve.nloops = 1;
        h1_host.sockets.store_fd = -1;
        h1 = calloc(1, sizeof(*h1));
        ck_assert_ptr_nonnull(h1);
        h1_host.serve.loops = h1;
        ck_assert_int_eq(m0__bus_init(&h1_host.bus, 1, 8, 8, 65536), 0);
        m0__host_link(&h1_host);
        ck_assert_int_eq(m0__hctx_init(h1, &h1_host.serve, 0), 0);
        m0__bus_global = &h1_host.bus;
}

/* Every connection closed, the context and the host freed. */
static void h1_stop(void)
{
        struct m0_conn *c;
        while ((c = M0__LIST_FIRST(&h1->streams, struct m0_conn, slink)))
                m0__conn_close(c);
        m0__conn_cut_all(h1);
        m0__conn_reap(h1);
        ck_assert_uint_eq(atomic_load(&h1->load), 0);
        m0__hctx_destroy(h1);
        free(h1);
        h1 = NULL;
        m0__bus_global = NULL;
        m0__bus_destroy(&h1_host.bus);
        m0__router_free(&h1_host.router);
}

/* A client: the other end of a connection the loop admitted, as accept admits one. */
static int h1_client(void)
{
        int sv[2];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
        atomic_fetch_add(&h1->load, 1);
        atomic_fetch_add(&h1_host.serve.conns, 1);
        ck_assert_int_eq(m0__conn_admit(h1, sv[0]), 0);
        return sv[1];
}

/* Turns of the loop that wait for nothing. */
static void h1_turn(void)
{
        for (int i = 0; i < 4; i++)
                (void)m0__hctx_run_once(h1, 0);
}

/* What the client can read now, NUL-terminated, without the `Date:` line (a clock's); "" when
 * nothing. Sets *eof when the loop closed its side. The caller frees it. */
static char *h1_read(int fd, bool *eof)
{
        size_t cap = 1 << 16, len = 0;
        char *out = malloc(cap + 1);
        ck_assert_ptr_nonnull(out);
        if (eof)
                *eof = false;
        for (;;) {
                if (cap - len < 4096) {
                        cap *= 2;
                        out = realloc(out, cap + 1);
                        ck_assert_ptr_nonnull(out);
                }
                ssize_t n = read(fd, out + len, cap - len);
                if (n == 0 && eof)
                        *eof = true;
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        out[len] = '\0';
        char *d;
        while ((d = strstr(out, "\r\nDate: "))) {
                char *e = strstr(d + 2, "\r\n");
                memmove(d, e, strlen(e) + 1);
        }
        return out;
}

/* Write `bytes`, turn the loop, return what came back (h1_read). */
static char *h1_send(int fd, const char *bytes, bool *eof)
{
        size_t n = strlen(bytes);
        ck_assert_int_eq(write(fd, bytes, n), (ssize_t)n);
        h1_turn();
        return h1_read(fd, eof);
}

#endif /* M0_UNIT_H1_H */
