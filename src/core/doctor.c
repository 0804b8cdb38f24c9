/* SPDX-License-Identifier: MIT */
/* doctor.c: --doctor: what would be served, every check, and the exit code serving would give (D1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <systemd/sd-daemon.h>

#include "caps.h"
#include "config.h"
#include "doctor.h"
#include "host-private.h"
#include "json.h"
#include "fdstore-log.h"

/* A string of any bytes as a JSON value: valid UTF-8 whatever the bytes (D1, D47). */
static json_t *str(const char *s)
{
        return m0__json_string_lossy(s);
}

/* Set o[key] to v, taking v; an object short of memory lacks the member. */
static void set(json_t *o, const char *key, json_t *v)
{
        (void)json_object_set_new(o, key, v);
}

/* The watchdog as serving sees it: sd_watchdog_enabled(), which honours WATCHDOG_PID. Returns
 * the interval, 0 when off, and says which in `detail`. */
static uint64_t watchdog(char *detail, size_t len)
{
        uint64_t usec = 0;
        int r = sd_watchdog_enabled(0, &usec);
        const char *v = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
        if (r > 0)
                snprintf(detail, len, "on: %llu us", (unsigned long long)usec);
        else if (!v)
                snprintf(detail, len, "off (WATCHDOG_USEC unset)");
        else if (r == 0)
                snprintf(detail, len, "off: WATCHDOG_PID=%s is another process", pid ? pid : "");
        else if (pid)
                snprintf(detail, len,
                         "off: sd_watchdog_enabled() refuses WATCHDOG_USEC='%s', WATCHDOG_PID='%s' "
                         "(%s)",
                         v, pid, strerror(-r));
        else
                snprintf(detail, len, "off: sd_watchdog_enabled() refuses WATCHDOG_USEC='%s' (%s)",
                         v, strerror(-r));
        return r > 0 ? usec : 0;
}

struct each {
        FILE *out;
        json_t *config; /* the JSON line's "config", when the knobs go there */
        bool passed;    /* sockets were passed: host and port are the socket's, not ours */
        char host[128], port[16];
};

static void knob_line(void *ud, const char *flag, const char *env, const char *value,
                      enum m0_source src)
{
        struct each *e = ud;
        const char *src_name = m0__source_name(src);
        if (e->passed && !strcmp(flag, "host")) {
                src_name = "socket";
                value = e->host;
        } else if (e->passed && !strcmp(flag, "port")) {
                src_name = "socket";
                value = e->port;
        }
        if (!e->config) {
                fprintf(e->out, "  --%-24s %-28s %-12s (%s)\n", flag, env, value, src_name);
                return;
        }
        json_t *k = json_object();
        set(k, "env", str(env));
        set(k, "value", str(value));
        set(k, "source", json_string(src_name));
        set(e->config, flag, k);
}

/* The capability sets this process holds now, from /proc (the host drops them once serving). */
static void caps(char *eff, char *prm, size_t len)
{
        snprintf(eff, len, "unknown");
        snprintf(prm, len, "unknown");
        FILE *f = fopen("/proc/self/status", "re");
        if (!f)
                return;
        char line[256];
        while (fgets(line, sizeof(line), f)) {
                char *nl = strchr(line, '\n');
                if (nl)
                        *nl = '\0';
                if (!strncmp(line, "CapEff:\t", 8))
                        snprintf(eff, len, "%.20s", line + 8);
                else if (!strncmp(line, "CapPrm:\t", 8))
                        snprintf(prm, len, "%.20s", line + 8);
        }
        fclose(f);
}

/* Host and port of the first passed socket: "127.0.0.1:80", "[::1]:80", or a Unix path. */
static void socket_host_port(const struct m0_sockets *s, char *host, size_t hl, char *port,
                             size_t pl)
{
        snprintf(host, hl, "%s", s->n ? s->v[0].where : "");
        port[0] = '\0';
        for (size_t i = 0; i < s->n; i++) {
                const char *w = s->v[i].where;
                const char *colon = strrchr(w, ':');
                if (s->v[i].family == AF_UNIX || !colon)
                        continue;
                size_t len = (size_t)(colon - w);
                if (w[0] == '[' && len >= 2) {
                        w++;
                        len -= 2;
                }
                snprintf(host, hl, "%.*s", (int)len, w);
                snprintf(port, pl, "%s", colon + 1);
                return;
        }
}

/* What the report says beyond the knobs and the checks, gathered once for both its forms. */
struct facts {
        unsigned pool, handlers;
        char wd[200];
        uint64_t wd_usec;
        char eff[64], prm[64], held[256];
        int code;
};

static const char *const kind_names[] = {"exact", "pattern", "prefix"};

/* The compiled table (T3), one line per route in the order they are tried. */
static void human_routes(const struct m0_host *h, FILE *out)
{
        const struct m0_router *rt = &h->router;
        fprintf(out, "routes: %u compiled into %u trie nodes%s; dispatch: %s\n", rt->nroutes,
                rt->nnodes, rt->err[0] ? " (the table is refused, see check routes)" : "",
                h->app->dispatch ? "for paths no route matches" : "none (404)");
        for (uint32_t i = 0; i < rt->nroutes; i++) {
                const struct m0_croute *r = &rt->routes[i];
                fprintf(out, "  route %u: %s %s  %s", i, r->def->method ? r->def->method : "*",
                        r->def->path, kind_names[r->kind]);
                for (unsigned k = 0; k < r->nparams; k++)
                        fprintf(out, "%s%.*s", k ? "," : ", captures ", r->name_len[k], r->name[k]);
                fprintf(out, "%s, body at most %llu bytes", r->blocking ? ", blocking" : "",
                        (unsigned long long)r->max_body);
                if (r->ctype)
                        fprintf(out, ", body of type %s", r->ctype);
                fputc('\n', out);
        }
}

/* A string of the table's, or JSON's null for none. */
static json_t *str_or_null(const char *s)
{
        return s ? str(s) : json_null();
}

static json_t *json_routes(const struct m0_host *h)
{
        const struct m0_router *rt = &h->router;
        json_t *o = json_object(), *table = json_array();
        set(o, "compiled", json_boolean(!rt->err[0]));
        set(o, "nodes", json_integer(rt->nnodes));
        set(o, "dispatch", json_boolean(h->app->dispatch != NULL));
        for (uint32_t i = 0; i < rt->nroutes; i++) {
                const struct m0_croute *r = &rt->routes[i];
                json_t *one = json_object(), *caps = json_array();
                set(one, "index", json_integer(i));
                set(one, "method", str_or_null(r->def->method));
                set(one, "path", str(r->def->path));
                set(one, "kind", json_string(kind_names[r->kind]));
                for (unsigned k = 0; k < r->nparams; k++) {
                        char name[72];
                        snprintf(name, sizeof(name), "%.*s", r->name_len[k], r->name[k]);
                        (void)json_array_append_new(caps, str(name));
                }
                set(one, "captures", caps);
                set(one, "blocking", json_boolean(r->blocking));
                set(one, "max_body_bytes", json_integer((json_int_t)r->max_body));
                set(one, "content_type", str_or_null(r->ctype));
                (void)json_array_append_new(table, one);
        }
        set(o, "table", table);
        return o;
}

static json_t *json_cors(const struct m0_host *h)
{
        const struct m0_cors_c *c = &h->cors;
        if (!c->on)
                return json_null();
        json_t *o = json_object(), *origins = json_array();
        for (size_t i = 0; i < c->norigins; i++)
                (void)json_array_append_new(origins, str(c->origins[i]));
        set(o, "origins", origins);
        set(o, "credentials", json_boolean(c->credentials));
        set(o, "max_age", json_integer(c->max_age));
        set(o, "expose_headers", str_or_null(c->expose));
        return o;
}

/* TL3: one line per certificate (never a key); the `tls` check says why there is none. */
static void tls_line(void *ud, const struct m0_tls_cert *c)
{
        char line[2048];
        m0__tls_describe(c, time(NULL), line, sizeof(line));
        fprintf(ud, "tls: certificate %s\n", line);
}

static void human_tls(struct m0_host *h, FILE *out)
{
        if (h->tls)
                m0__tls_each_cert(h->tls, tls_line, out);
        else
                fprintf(out, "tls: no certificate loaded\n");
}

static void tls_json(void *ud, const struct m0_tls_cert *c)
{
        json_t *one = json_object();
        set(one, "file", str(c->file));
        set(one, "name", c->name[0] ? str(c->name) : json_null());
        set(one, "subject", str(c->subject));
        set(one, "names", str(c->sans));
        set(one, "issuer", str(c->issuer));
        set(one, "key_type", str(c->key_type));
        set(one, "key_bits", json_integer(c->bits));
        set(one, "not_after", json_integer((json_int_t)c->not_after));
        set(one, "chain", json_integer(c->chain_len));
        (void)json_array_append_new(ud, one);
}

static json_t *json_tls(struct m0_host *h)
{
        json_t *o = json_object(), *list = json_array();
        if (h->tls)
                m0__tls_each_cert(h->tls, tls_json, list);
        set(o, "port", h->cfg.tls_port ? json_integer(h->cfg.tls_port) : json_null());
        set(o, "certificates", list);
        return o;
}

static void human_lines(struct m0_host *h, const struct facts *f, struct each *e,
                        const struct m0_check *checks, size_t n, bool refused, FILE *out)
{
        const struct m0_config *cfg = &h->cfg;
        const m0_app *app = h->app;
        fprintf(out, "m0 doctor: %s (m0 %s)\n", app->name, m0_version());
        fprintf(out, "configuration (value, source):\n");
        m0__config_each(cfg, knob_line, e);
        fprintf(out,
                "topology: %u loop%s, %u pool thread%s, %s producer, %u handler%s, %u compute "
                "thread%s\n",
                cfg->threads, cfg->threads == 1 ? "" : "s", f->pool, f->pool == 1 ? "" : "s",
                app->step ? "a" : "no", f->handlers, f->handlers == 1 ? "" : "s",
                cfg->compute_threads, cfg->compute_threads == 1 ? "" : "s");
        if (app->max_threads)
                fprintf(out, "app limits: max_threads %u\n", app->max_threads);
        else
                fprintf(out, "app limits: max_threads 0 (no limit)\n");
        human_routes(h, out);
        if (h->cors.on)
                fprintf(out, "cors: %zu origin%s%s, preflights kept %u s\n", h->cors.norigins,
                        h->cors.norigins == 1 ? "" : "s",
                        h->cors.credentials ? ", with credentials" : "", h->cors.max_age);
        if (h->sockets.passed)
                for (size_t i = 0; i < h->sockets.n; i++)
                        fprintf(out, "socket: fd %d '%s' %s\n", h->sockets.v[i].fd,
                                h->sockets.v[i].name, h->sockets.v[i].where);
        else
                fprintf(out, "sockets: none passed; serving would bind %s:%u\n", cfg->host,
                        cfg->port);
        if (h->sockets.metrics_passed)
                for (size_t i = 0; i < h->sockets.nmetrics; i++)
                        fprintf(out, "metrics: GET /metrics on fd %d '%s' %s\n",
                                h->sockets.metrics[i].fd, h->sockets.metrics[i].name,
                                h->sockets.metrics[i].where);
        else if (cfg->metrics.on)
                fprintf(out, "metrics: serving would bind %s for GET /metrics\n",
                        cfg->metrics.text);
        else
                fprintf(out, "metrics: off\n");
        human_tls(h, out);
        fprintf(out, "watchdog: %s\n", f->wd);
        fprintf(out, "fd store: %s\n",
                h->sockets.store_fd >= 0 ? "event state passed back (" M0__STORE_NAME ")"
                                         : "no event state passed: ids would start at 1");
        fprintf(out,
                "capabilities: %s (effective %s, permitted %s); serving drops them all after "
                "taking the sockets, and sets no-new-privs\n",
                f->held, f->eff, f->prm);
        for (size_t i = 0; i < n; i++)
                fprintf(out, "check %-24s %s  %s%s%s%s\n", checks[i].name,
                        checks[i].ok ? "ok  " : "FAIL", checks[i].detail, checks[i].ok ? "" : " (",
                        checks[i].fix, checks[i].ok ? "" : ")");
        fprintf(out, "verdict: %s (exit %d)\n", refused ? "refused" : "would serve", f->code);
}

static json_t *json_sockets(struct m0_host *h)
{
        json_t *list = json_array();
        for (size_t i = 0; i < h->sockets.n; i++) {
                json_t *one = json_object();
                set(one, "fd", json_integer(h->sockets.v[i].fd));
                set(one, "name", str(h->sockets.v[i].name));
                set(one, "address", str(h->sockets.v[i].where));
                (void)json_array_append_new(list, one);
        }
        json_t *o = json_object();
        set(o, "passed", json_boolean(h->sockets.passed));
        set(o, "list", list);
        return o;
}

/* Where GET /metrics is served (O1): the passed sockets, or the configured address. */
static json_t *json_metrics(struct m0_host *h)
{
        json_t *listen = json_array();
        for (size_t i = 0; i < h->sockets.nmetrics; i++)
                (void)json_array_append_new(listen, str(h->sockets.metrics[i].where));
        if (!h->sockets.metrics_passed && h->cfg.metrics.on)
                (void)json_array_append_new(listen, str(h->cfg.metrics.text));
        json_t *o = json_object();
        set(o, "passed", json_boolean(h->sockets.metrics_passed));
        set(o, "listen", listen);
        return o;
}

static json_t *json_checks(const struct m0_check *checks, size_t n)
{
        json_t *list = json_array();
        for (size_t i = 0; i < n; i++) {
                json_t *one = json_object();
                set(one, "name", str(checks[i].name));
                set(one, "ok", json_boolean(checks[i].ok));
                set(one, "detail", str(checks[i].detail));
                set(one, "fix", str(checks[i].fix));
                (void)json_array_append_new(list, one);
        }
        return list;
}

/* Everything after the configuration, in the line's order. */
static void json_facts(json_t *o, struct m0_host *h, const struct facts *f)
{
        const struct m0_config *cfg = &h->cfg;
        json_t *topo = json_object(), *limits = json_object(), *wd = json_object();
        json_t *store = json_object(), *caps = json_object();
        set(topo, "loops", json_integer(cfg->threads));
        set(topo, "pool_threads", json_integer(f->pool));
        set(topo, "producer", json_boolean(h->app->step != NULL));
        set(topo, "handlers", json_integer(f->handlers));
        set(o, "topology", topo);
        set(limits, "max_threads", json_integer(h->app->max_threads));
        set(o, "app_limits", limits);
        set(o, "routes", json_routes(h));
        set(o, "cors", json_cors(h));
        set(o, "sockets", json_sockets(h));
        set(o, "metrics", json_metrics(h));
        set(o, "tls", json_tls(h));
        set(wd, "usec", f->wd_usec ? json_integer((json_int_t)f->wd_usec) : json_null());
        set(wd, "detail", str(f->wd));
        set(o, "watchdog", wd);
        set(store, "event_state_passed", json_boolean(h->sockets.store_fd >= 0));
        set(o, "fd_store", store);
        set(caps, "held", str(f->held));
        set(caps, "dropped_when_serving", json_true());
        set(caps, "effective", str(f->eff));
        set(caps, "permitted", str(f->prm));
        set(o, "capabilities", caps);
}

/* The last line: one JSON object, written by jansson in the order its members were set. */
static void json_line(struct m0_host *h, const struct facts *f, struct each *e,
                      const struct m0_check *checks, size_t n, FILE *out)
{
        json_t *o = json_object();
        set(o, "app", str(h->app->name));
        set(o, "version", str(m0_version()));
        e->config = json_object();
        m0__config_each(&h->cfg, knob_line, e);
        set(o, "config", e->config);
        e->config = NULL;
        json_facts(o, h, f);
        set(o, "checks", json_checks(checks, n));
        set(o, "exit", json_integer(f->code));
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        /* Short of memory, the line still says what serving would exit with. */
        if (text)
                fprintf(out, "%s\n", text);
        else
                fprintf(out, "{\"exit\":%d}\n", f->code);
        free(text);
}

int m0__doctor(struct m0_host *h, const struct m0_check *checks, size_t n, int first, FILE *out)
{
        const struct m0_config *cfg = &h->cfg;
        struct facts f = {.code = first >= 0 ? M0__EXIT_CONFIG : M0__EXIT_OK};
        f.pool = cfg->threads * cfg->blocking_threads;
        f.handlers = cfg->threads + f.pool + (h->app->step ? 1 : 0);
        f.wd_usec = watchdog(f.wd, sizeof(f.wd));
        caps(f.eff, f.prm, sizeof(f.eff));
        m0__caps_describe(f.held, sizeof(f.held));
        struct each e = {.out = out, .passed = h->sockets.passed};
        if (e.passed)
                socket_host_port(&h->sockets, e.host, sizeof(e.host), e.port, sizeof(e.port));
        human_lines(h, &f, &e, checks, n, first >= 0, out);
        json_line(h, &f, &e, checks, n, out);
        fflush(out);
        return f.code;
}
