/* SPDX-License-Identifier: MIT */
/* module.c: bus-pg.so's face: the table libm0 loads (D210), and the two things of libm0 the
 * PostgreSQL bus calls, lent by libm0 at the load since the module does not link it (G1). */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "bus.h"
#include "log.h"
#include "pgbus.h"

/* Set once by init, before any other call of the table; read by the bus thread after. */
static const struct m0_pgbus_host *host;

static void init(const struct m0_pgbus_host *h)
{
        host = h;
}

/* libm0's log, as the module's sources call it: formatted here, written there. The module
 * speaks for no loop. */
void m0__log(int prio, int loop, const char *mid, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        (void)loop;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        host->log(prio, mid, msg);
}

/* The local bus's rule (N1), so that a name one bus takes the other takes too. */
bool m0__channel_ok(const char *s, size_t len)
{
        return host->channel_ok(s, len);
}

/* The one symbol the module exports (its version script, src/bus/pg/module.sym). */
__attribute__((visibility("default"))) const struct m0_pgbus_module m0_bus_pg_module = {
        .abi = M0__PGBUS_MODULE_ABI,
        .version = PACKAGE_VERSION,
        .init = init,
        .uri_check = m0__pgbus_uri_check,
        .probe = m0__pgbus_probe,
        .create = m0__pgbus_new,
        .wait_ready = m0__pgbus_wait_ready,
        .publish = m0__pgbus_publish,
        .replay = m0__pgbus_replay,
        .state = m0__pgbus_state,
        .stats = m0__pgbus_stats,
        .stop = m0__pgbus_stop,
        .free = m0__pgbus_free,
};
