/* SPDX-License-Identifier: MIT */
/* load.c: the PostgreSQL bus's module loaded when M0_BUS names a database, so that an app on
 * the local bus maps neither it nor libpq (D210); and the URI's password hidden (G1, G6). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus.h"
#include "log.h"
#include "load.h"

#ifndef M0_PGBUS_MODULE_PATH
#error "M0_PGBUS_MODULE_PATH: the module's installed path, from Makefile.am"
#endif

const struct m0_pgbus_module *m0__pgbus_mod;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int load_err;       /* the first load's result, once tried */
static char load_why[700]; /* ... and its words */
static bool load_tried;

static void host_log(int prio, const char *mid, const char *msg)
{
        m0__log(prio, -1, mid, "%s", msg);
}

static const struct m0_pgbus_host host = {
        .log = host_log,
        .channel_ok = m0__channel_ok,
};

static int load(char *why, size_t len)
{
        const char *path = secure_getenv("M0_BUS_PG_MODULE");
        if (!path || !*path)
                path = M0_PGBUS_MODULE_PATH;
        /* RTLD_LOCAL: libpq's symbols stay the module's; never unloaded (its thread, libpq's
         * and OpenSSL's atexit handlers). */
        void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!dl) {
                const char *e = dlerror();
                snprintf(why, len, "the PostgreSQL bus's module cannot be loaded (%.400s)",
                         e ? e : path);
                return -ENOENT;
        }
        const struct m0_pgbus_module *m = dlsym(dl, "m0_bus_pg_module");
        if (!m) {
                snprintf(why, len, "%.400s is not the PostgreSQL bus's module", path);
                return -ENOENT;
        }
        if (m->abi != M0__PGBUS_MODULE_ABI || !m->version || strcmp(m->version, PACKAGE_VERSION)) {
                snprintf(why, len,
                         "the PostgreSQL bus's module %.300s is version %.40s (interface %u), "
                         "libm0 is %s (interface %u)",
                         path, m->version ? m->version : "?", m->abi, PACKAGE_VERSION,
                         (unsigned)M0__PGBUS_MODULE_ABI);
                return -EPROTO;
        }
        m->init(&host);
        m0__pgbus_mod = m;
        return 0;
}

int m0__pgbus_load(char *err, size_t err_len)
{
        pthread_mutex_lock(&load_lock);
        if (!load_tried) {
                load_err = load(load_why, sizeof(load_why));
                load_tried = true;
        }
        int r = load_err;
        if (r < 0 && err_len)
                snprintf(err, err_len, "%s", load_why);
        pthread_mutex_unlock(&load_lock);
        return r;
}

/* Append bytes to out[*o], keeping a NUL within `len`. */
static void put(char *out, size_t len, size_t *o, const char *s, size_t n)
{
        for (size_t i = 0; i < n && *o + 1 < len; i++)
                out[(*o)++] = s[i];
        out[*o] = '\0';
}

void m0__pgbus_redact(const char *uri, char *out, size_t len)
{
        size_t o = 0;
        if (!len)
                return;
        out[0] = '\0';
        const char *sep = strstr(uri, "://");
        if (!sep) {
                put(out, len, &o, uri, strlen(uri));
                return;
        }
        const char *auth = sep + 3, *auth_end = auth + strcspn(auth, "/?");
        put(out, len, &o, uri, (size_t)(auth - uri));
        const char *at = NULL;
        for (const char *p = auth; p < auth_end; p++)
                if (*p == '@')
                        at = p;
        const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
        if (colon) {
                put(out, len, &o, auth, (size_t)(colon - auth) + 1);
                put(out, len, &o, "***", 3);
                auth = at;
        }
        const char *q = strchr(auth_end, '?');
        put(out, len, &o, auth, (size_t)((q ? q : auth_end + strlen(auth_end)) - auth));
        if (!q)
                return;
        for (const char *p = q; *p;) {
                size_t n = 1 + strcspn(p + 1, "&");
                if (!strncmp(p + 1, "password=", 9)) {
                        put(out, len, &o, p, 10);
                        put(out, len, &o, "***", 3);
                } else {
                        put(out, len, &o, p, n);
                }
                p += n;
        }
}
