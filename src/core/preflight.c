/* SPDX-License-Identifier: MIT */
/* preflight.c: the one list of host checks that both serving and the doctor read (R1, R2). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "accesslog.h"
#include "activation.h"
#include "preflight.h"
#include "host-private.h"
#include "load.h"
#include "util.h"

/* File descriptors the host needs beside its connections: listeners, epoll, mailboxes, logs,
 * and the metrics thread's and the journal access log's when they are on. */
static uint64_t fds_needed(const struct m0_host *h)
{
        const struct m0_config *cfg = &h->cfg;
        uint64_t metrics = h->sockets.nmetrics || cfg->metrics.on
                                   ? (uint64_t)cfg->metrics_max_connections + 3
                                   : 0;
        uint64_t journal = cfg->access_log == M0_ACCESS_JOURNAL ? cfg->threads : 0;
        return (uint64_t)cfg->max_connections + 64 + metrics + journal +
               (uint64_t)cfg->threads * (4 + h->sockets.n) * (1 + cfg->blocking_threads);
}

static void fail(struct m0_check *c, const char *fix, const char *fmt, ...) M0_PRINTF(3, 4);
static void fail(struct m0_check *c, const char *fix, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
        va_end(ap);
        snprintf(c->fix, sizeof(c->fix), "%s", fix);
        c->ok = false;
}

static void pass(struct m0_check *c, const char *fmt, ...) M0_PRINTF(2, 3);
static void pass(struct m0_check *c, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
        va_end(ap);
        c->fix[0] = '\0';
        c->ok = true;
}

/* Name a knob the way it was given: the flag when it came from one, else its variable. */
static const char *knob_named(const struct m0_host *h, const char *flag, const char *env)
{
        static __thread char buf[64];
        if (m0__config_source(&h->cfg, flag) != M0_SRC_FLAG)
                return env;
        snprintf(buf, sizeof(buf), "--%s", flag);
        return buf;
}

static void check_threads_count(struct m0_host *h, struct m0_check *c)
{
        if (h->cfg.threads < 1)
                fail(c, "set --threads (M0_THREADS) to 1 or more, or auto", "%s=%u serves no loop",
                     m0__config_source(&h->cfg, "threads") == M0_SRC_FLAG ? "--threads"
                                                                          : "M0_THREADS",
                     h->cfg.threads);
        else
                pass(c, "%u loop%s", h->cfg.threads, h->cfg.threads == 1 ? "" : "s");
}

static void check_workers(struct m0_host *h, struct m0_check *c)
{
        if (h->cfg.workers > 1)
                fail(c,
                     "systemd supervises this service as one process; set --threads (M0_THREADS)",
                     "M0_WORKERS=%u asks for forked workers", h->cfg.workers);
        else
                pass(c, "one process");
}

static void check_threads_vs_app(struct m0_host *h, struct m0_check *c)
{
        unsigned max = h->app->max_threads;
        if (max && h->cfg.threads > max)
                fail(c, "set --threads (M0_THREADS) to the app's max_threads or fewer",
                     "%s serves at most %u handler%s and %s=%u asks for %u loops", h->app->name,
                     max, max == 1 ? "" : "s", knob_named(h, "threads", "M0_THREADS"),
                     h->cfg.threads, h->cfg.threads);
        else
                pass(c, "%u loop%s within the app's limit (%s)", h->cfg.threads,
                     h->cfg.threads == 1 ? "" : "s", max ? "max_threads set" : "no limit");
}

static void check_blocking_vs_app(struct m0_host *h, struct m0_check *c)
{
        unsigned max = h->app->max_threads;
        uint64_t handlers = (uint64_t)h->cfg.threads * (1 + h->cfg.blocking_threads);
        if (max && h->cfg.blocking_threads > 0 && handlers > max)
                fail(c, "set --blocking-threads (M0_BLOCKING_THREADS) to 0",
                     "%s serves at most %u handler%s and %s=%u needs %llu", h->app->name, max,
                     max == 1 ? "" : "s", knob_named(h, "blocking-threads", "M0_BLOCKING_THREADS"),
                     h->cfg.blocking_threads, (unsigned long long)handlers);
        else
                pass(c, "%llu handler%s", (unsigned long long)handlers, handlers == 1 ? "" : "s");
}

static void check_listen_sockets(struct m0_host *h, struct m0_check *c)
{
        char why[sizeof(c->detail)];
        if (h->sockets_err[0])
                fail(c, "pass listening stream sockets (ListenStream= in the .socket unit)", "%s",
                     h->sockets_err);
        else if (h->sockets.passed)
                pass(c, "%zu socket%s passed by systemd", h->sockets.n,
                     h->sockets.n == 1 ? "" : "s");
        else if (m0__sockets_check_address(h->cfg.host, h->cfg.port, M0__HOST_KNOBS, why,
                                           sizeof(why)) < 0)
                fail(c, M0__LISTEN_FIX, "%s", why);
        else
                pass(c, "none passed; will bind %s:%u", h->cfg.host, h->cfg.port);
}

static void check_limits(struct m0_host *h, struct m0_check *c)
{
        struct rlimit rl;
        uint64_t need = fds_needed(h);
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
                pass(c, "RLIMIT_NOFILE unknown");
                return;
        }
        if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
                if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need) {
                        pass(c, "RLIMIT_NOFILE %llu is raised to %llu at start (hard %llu)",
                             (unsigned long long)rl.rlim_cur, (unsigned long long)need,
                             (unsigned long long)rl.rlim_max);
                        return;
                }
                fail(c, "raise LimitNOFILE= or lower --max-connections (M0_MAX_CONNECTIONS)",
                     "RLIMIT_NOFILE is %llu (hard %llu) and --max-connections (M0_MAX_CONNECTIONS)"
                     "=%u needs %llu",
                     (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
                     h->cfg.max_connections, (unsigned long long)need);
                return;
        }
        pass(c, "RLIMIT_NOFILE %llu covers %llu", (unsigned long long)rl.rlim_cur,
             (unsigned long long)need);
}

int m0__limits_raise(struct m0_host *h)
{
        struct rlimit rl;
        uint64_t need = fds_needed(h);
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return 0;
        if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
                return 0;
        rl.rlim_cur = need;
        return setrlimit(RLIMIT_NOFILE, &rl) < 0 ? -1 : 0;
}

/* G1, G6: M0_BUS's syntax is refused when wrong; whether the database answers is the doctor's
 * to report (a host may start before its database), never a refusal. */
static void check_bus(struct m0_host *h, struct m0_check *c)
{
        const char *uri = h->cfg.bus;
        char err[256], shown[1100];
        if (!strcmp(uri, "local")) {
                pass(c, "local: the in-process bus");
                return;
        }
        m0__pgbus_redact(uri, shown, sizeof(shown));
        /* The module holds libpq: loaded here, when a database is named, and only then (D210). */
        char why[700];
        if (m0__pgbus_load(why, sizeof(why)) < 0) {
                fail(c,
                     "install the package " M0__PGBUS_PACKAGE " of libm0's version, or set "
                     "M0_BUS to local",
                     "%s='%.120s': %s", knob_named(h, "bus", "M0_BUS"), shown, why);
                return;
        }
        if (m0__pgbus_mod->uri_check(uri, err, sizeof(err)) < 0) {
                fail(c,
                     "set M0_BUS to local or a URI such as postgresql:///m0?host=/run/postgresql",
                     "%s='%.120s' is not a PostgreSQL connection URI: %.100s",
                     knob_named(h, "bus", "M0_BUS"), shown, err);
                return;
        }
        if (!h->cfg.doctor) {
                pass(c, "PostgreSQL: %.200s", shown);
                return;
        }
        char detail[600];
        m0__pgbus_mod->probe(uri, 3, detail, sizeof(detail));
        pass(c, "%.500s", detail);
}

/* T1: the route table, compiled before the checks; a bad pattern is named with its route. */
static void check_routes(struct m0_host *h, struct m0_check *c)
{
        const struct m0_router *rt = &h->router;
        char why[128];
        if (rt->err[0])
                fail(c, rt->fix, "%s", rt->err);
        else if (rt->files && rt->mime_err)
                pass(c,
                     "%u route%s compiled; " M0__MIME_TYPES " cannot be read (%s): every file "
                     "is served as " M0__MIME_DEFAULT " (install media-types)",
                     rt->nroutes, rt->nroutes == 1 ? "" : "s",
                     strerror_r(-rt->mime_err, why, sizeof(why)));
        else
                pass(c, "%u route%s compiled into %u trie nodes; the first in table order wins",
                     rt->nroutes, rt->nroutes == 1 ? "" : "s", rt->nnodes);
}

/* Q5: the app's CORS origins. */
static void check_cors(struct m0_host *h, struct m0_check *c)
{
        const struct m0_cors_c *k = &h->cors;
        if (k->err[0])
                fail(c, k->fix, "%s", k->err);
        else if (!k->on)
                pass(c, "off: no Access-Control-* header is sent");
        else if (k->any)
                pass(c, "every origin ('*'), without credentials; preflights kept %u s",
                     k->max_age);
        else
                pass(c, "%zu origin%s%s; preflights kept %u s", k->norigins,
                     k->norigins == 1 ? "" : "s", k->credentials ? ", with credentials" : "",
                     k->max_age);
}

/* O1: where the metrics would be served: passed sockets named metrics win over M0_METRICS, whose
 * address must be one this machine has. */
static void check_metrics(struct m0_host *h, struct m0_check *c)
{
        const struct m0_addr *a = &h->cfg.metrics;
        char why[sizeof(c->detail)];
        size_t n = h->sockets.nmetrics;
        if (h->sockets.metrics_passed)
                pass(c, "%zu socket%s named " M0__METRICS_NAME " passed by systemd%s", n,
                     n == 1 ? "" : "s", a->on ? "; M0_METRICS is not used" : "");
        else if (!a->on)
                pass(c, "off: no socket named " M0__METRICS_NAME " passed, M0_METRICS off");
        else if (m0__sockets_check_address(a->host, a->port, M0__METRICS_KNOB, why, sizeof(why)) <
                 0)
                fail(c, M0__METRICS_FIX, "%s", why);
        else
                pass(c, "GET /metrics on %s (%s)", a->text, knob_named(h, "metrics", "M0_METRICS"));
}

/* O2: an access log to the journal needs a journald that takes datagrams. */
static void check_access_log(struct m0_host *h, struct m0_check *c)
{
        char why[sizeof(c->detail) - 64];
        if (h->cfg.access_log == M0_ACCESS_OFF)
                pass(c, "off");
        else if (h->cfg.access_log == M0_ACCESS_LINE)
                pass(c, "on: one log line per request");
        else if (m0__journal_probe(why, sizeof(why)) < 0)
                fail(c, "run it under systemd-journald, or set M0_ACCESS_LOG to on or off",
                     "%s=journal, but %s", knob_named(h, "access-log", "M0_ACCESS_LOG"), why);
        else
                pass(c, "journal: %s", why);
}

static void count_cert(void *ud, const struct m0_tls_cert *c)
{
        (*(size_t *)ud)++;
}

/*
 * TL1–TL3: with a certificate configured (M0_TLS_CERT and M0_TLS_KEY, or the tls.crt credential)
 * or a TLS socket (M0_TLS_PORT, or a passed socket named https), every certificate and key is read
 * and checked here, before any loop exists, and the context is kept in h->tls.
 */
static void check_tls(struct m0_host *h, struct m0_check *c)
{
        const struct m0_config *cfg = &h->cfg;
        struct m0_tls_opts o = {
                .cert = cfg->tls_cert,
                .key = cfg->tls_key,
                .cred_dir = getenv("CREDENTIALS_DIRECTORY"),
                .ticket_rotate_s = cfg->tls_ticket_rotate_s,
                .session_cache = cfg->tls_session_cache,
                .alpn_h2 = h->serve.h2 != NULL, /* HT1: h2 by ALPN where the host speaks it */
        };
        const char *https = NULL; /* a passed socket named https: TLS is served on it */
        for (size_t i = 0; i < h->sockets.n && !https; i++)
                if (h->sockets.v[i].tls)
                        https = h->sockets.v[i].where;
        if (!m0__tls_configured(&o) && !cfg->tls_port && !https) {
                pass(c, "off: no certificate (M0_TLS_CERT, or the tls.crt credential) and no "
                        "M0_TLS_PORT");
                return;
        }
        if (cfg->tls_port && !h->sockets.passed && cfg->tls_port == cfg->port) {
                fail(c, "give --tls-port (M0_TLS_PORT) a port of its own",
                     "%s=%u is the plain port too (%s)", knob_named(h, "tls-port", "M0_TLS_PORT"),
                     cfg->tls_port, knob_named(h, "port", "M0_PORT"));
                return;
        }
        char err[sizeof(c->detail)], fix[sizeof(c->fix)];
        if (!h->tls && m0__tls_new(&h->tls, &o, err, sizeof(err), fix, sizeof(fix)) < 0) {
                fail(c, fix, "%s", err);
                return;
        }
        size_t n = 0;
        m0__tls_each_cert(h->tls, count_cert, &n);
        if (https)
                pass(c, "%zu certificate%s loaded and checked; TLS on the socket named %s (%s)", n,
                     n == 1 ? "" : "s", M0__TLS_NAME, https);
        else if (cfg->tls_port && !h->sockets.passed)
                pass(c, "%zu certificate%s loaded and checked; TLS on port %u (M0_TLS_PORT)", n,
                     n == 1 ? "" : "s", cfg->tls_port);
        else
                pass(c, "%zu certificate%s loaded and checked; %s", n, n == 1 ? "" : "s",
                     cfg->tls_port ? "M0_TLS_PORT is not used: systemd passed the sockets"
                                   : "no TLS port (M0_TLS_PORT=0)");
}

static const struct {
        const char *name;
        void (*run)(struct m0_host *h, struct m0_check *c);
} checks[] = {
        {"threads-count", check_threads_count},
        {"workers", check_workers},
        {"threads-vs-application", check_threads_vs_app},
        {"blocking-vs-application", check_blocking_vs_app},
        {"listen-sockets", check_listen_sockets},
        {"limits", check_limits},
        {"bus", check_bus},
        {"routes", check_routes},
        {"cors", check_cors},
        {"metrics", check_metrics},
        {"access-log", check_access_log},
        {"tls", check_tls},
};

int m0__checks_run(struct m0_host *h, struct m0_check *out, size_t n_out, size_t *ret_n)
{
        int first = -1;
        size_t n = 0;
        for (size_t i = 0; i < M0__ARRAY_SIZE(checks) && n < n_out; i++, n++) {
                memset(&out[n], 0, sizeof(out[n]));
                out[n].name = checks[i].name;
                checks[i].run(h, &out[n]);
                if (!out[n].ok && first < 0)
                        first = (int)n;
        }
        /* The app's own check comes last, after every host check (R2). */
        if (h->app->check && n < n_out) {
                struct m0_check *c = &out[n];
                memset(c, 0, sizeof(*c));
                c->name = "application";
                c->ok = h->app->check(c->detail, sizeof(c->detail), c->fix, sizeof(c->fix)) >= 0;
                if (c->ok && !c->detail[0])
                        snprintf(c->detail, sizeof(c->detail), "%s accepts this configuration",
                                 h->app->name);
                if (!c->ok && first < 0)
                        first = (int)n;
                n++;
        }
        *ret_n = n;
        return first;
}
