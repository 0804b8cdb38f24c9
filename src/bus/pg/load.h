/* SPDX-License-Identifier: MIT */
/* load.h: load.c, libm0's side of the PostgreSQL bus's module: bus-pg.so found by its installed
 * path and loaded only when M0_BUS names a database (D210), and the URI's password hidden,
 * which needs no libpq (G1, G6). */
#ifndef M0_PGBUS_LOAD_H
#define M0_PGBUS_LOAD_H

#include <stddef.h>

#include "pgbus.h"

/* The Debian package that installs the module, named by the refusal when it is missing. */
#define M0__PGBUS_PACKAGE "m0-bus-postgresql"

/*
 * The module's table once m0__pgbus_load() returned 0, NULL before. Written once, under the
 * loader's lock, by the coordinator (the checks, the bus's start) before any thread that calls
 * through it (the loops, the metrics thread) is started.
 */
extern const struct m0_pgbus_module *m0__pgbus_mod;

/*
 * Load the module (once: later calls return what the first did): dlopen() of its installed
 * path, `$M0_BUS_PG_MODULE` instead when set (a build tree's tests; ignored in a process that
 * gained privileges, secure_getenv), its table checked against this libm0's version and ABI.
 * 0; or -ENOENT (not there, or not loadable: `err` names the path and the loader's words) or
 * -EPROTO (another version's: `err` says which); the caller names M0__PGBUS_PACKAGE. The
 * coordinator.
 */
int m0__pgbus_load(char *err, size_t err_len);

/* `uri` with any password in it (user:PASSWORD@, password=) shown as ***: for the doctor, the
 * log and STATUS=. Any thread; loads nothing. */
void m0__pgbus_redact(const char *uri, char *out, size_t len);

#endif /* M0_PGBUS_LOAD_H */
