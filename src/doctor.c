/* SPDX-License-Identifier: MIT */
/* doctor.c: --doctor: what would be served, every check, and the exit code serving would give (D1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <systemd/sd-daemon.h>

#include "caps.h"
#include "config.h"
#include "doctor.h"
#include "host.h"
#include "store.h"

/* The length of the well-formed UTF-8 sequence at `p` (RFC 3629: no overlong form, no
 * surrogate, nothing past U+10FFFF), or 0. Reads no byte past a NUL. */
static size_t utf8_len(const unsigned char *p)
{
        unsigned char lo = 0x80, hi = 0xbf;
        size_t n;
        if (p[0] < 0x80)
                return 1;
        if (p[0] >= 0xc2 && p[0] <= 0xdf)
                n = 2;
        else if (p[0] >= 0xe0 && p[0] <= 0xef)
                n = 3, lo = p[0] == 0xe0 ? 0xa0 : 0x80, hi = p[0] == 0xed ? 0x9f : 0xbf;
        else if (p[0] >= 0xf0 && p[0] <= 0xf4)
                n = 4, lo = p[0] == 0xf0 ? 0x90 : 0x80, hi = p[0] == 0xf4 ? 0x8f : 0xbf;
        else
                return 0;
        if (p[1] < lo || p[1] > hi)
                return 0;
        for (size_t i = 2; i < n; i++)
                if (p[i] < 0x80 || p[i] > 0xbf)
                        return 0;
        return n;
}

/*
 * A JSON string of `s`, valid JSON and valid UTF-8 whatever the bytes (D1): quote, backslash and
 * control characters escaped, well-formed UTF-8 copied, and each byte that is not part of a
 * well-formed sequence written as \ufffd, the replacement character (D47).
 */
static void json_str(FILE *out, const char *s)
{
        fputc('"', out);
        for (const unsigned char *p = (const unsigned char *)s; *p;) {
                size_t n = utf8_len(p);
                if (*p == '"' || *p == '\\')
                        fprintf(out, "\\%c", *p);
                else if (*p < 0x20)
                        fprintf(out, "\\u%04x", *p);
                else if (n == 0)
                        fputs("\\ufffd", out);
                else
                        fwrite(p, 1, n, out);
                p += n ? n : 1;
        }
        fputc('"', out);
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
        bool json;
        bool first;
        bool passed; /* sockets were passed: host and port are the socket's, not ours */
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
        if (!e->json) {
                fprintf(e->out, "  --%-24s %-28s %-12s (%s)\n", flag, env, value, src_name);
                return;
        }
        fprintf(e->out, "%s", e->first ? "" : ",");
        e->first = false;
        json_str(e->out, flag);
        fprintf(e->out, ":{\"env\":");
        json_str(e->out, env);
        fprintf(e->out, ",\"value\":");
        json_str(e->out, value);
        fprintf(e->out, ",\"source\":\"%s\"}", src_name);
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

static void json_routes(const struct m0_host *h, FILE *out)
{
        const struct m0_router *rt = &h->router;
        fprintf(out, "\"routes\":{\"compiled\":%s,\"nodes\":%u,\"dispatch\":%s,\"table\":[",
                rt->err[0] ? "false" : "true", rt->nnodes, h->app->dispatch ? "true" : "false");
        for (uint32_t i = 0; i < rt->nroutes; i++) {
                const struct m0_croute *r = &rt->routes[i];
                fprintf(out, "%s{\"index\":%u,\"method\":", i ? "," : "", i);
                if (r->def->method)
                        json_str(out, r->def->method);
                else
                        fputs("null", out);
                fputs(",\"path\":", out);
                json_str(out, r->def->path);
                fprintf(out, ",\"kind\":\"%s\",\"captures\":[", kind_names[r->kind]);
                for (unsigned k = 0; k < r->nparams; k++) {
                        char name[72];
                        snprintf(name, sizeof(name), "%.*s", r->name_len[k], r->name[k]);
                        fputs(k ? "," : "", out);
                        json_str(out, name);
                }
                fprintf(out, "],\"blocking\":%s,\"max_body_bytes\":%llu,\"content_type\":",
                        r->blocking ? "true" : "false", (unsigned long long)r->max_body);
                if (r->ctype)
                        json_str(out, r->ctype);
                else
                        fputs("null", out);
                fputc('}', out);
        }
        fputs("]},\"cors\":", out);
        const struct m0_cors_c *c = &h->cors;
        if (!c->on) {
                fputs("null,", out);
                return;
        }
        fputs("{\"origins\":[", out);
        for (size_t i = 0; i < c->norigins; i++) {
                fputs(i ? "," : "", out);
                json_str(out, c->origins[i]);
        }
        fprintf(out, "],\"credentials\":%s,\"max_age\":%u,\"expose_headers\":",
                c->credentials ? "true" : "false", c->max_age);
        if (c->expose)
                json_str(out, c->expose);
        else
                fputs("null", out);
        fputs("},", out);
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

static void json_sockets_watchdog(struct m0_host *h, const struct facts *f, FILE *out)
{
        fprintf(out, "\"sockets\":{\"passed\":%s,\"list\":[", h->sockets.passed ? "true" : "false");
        for (size_t i = 0; i < h->sockets.n; i++) {
                fprintf(out, "%s{\"fd\":%d,\"name\":", i ? "," : "", h->sockets.v[i].fd);
                json_str(out, h->sockets.v[i].name);
                fprintf(out, ",\"address\":");
                json_str(out, h->sockets.v[i].where);
                fprintf(out, "}");
        }
        fprintf(out, "]},\"metrics\":{\"passed\":%s,\"listen\":[",
                h->sockets.metrics_passed ? "true" : "false");
        for (size_t i = 0; i < h->sockets.nmetrics; i++) {
                fprintf(out, "%s", i ? "," : "");
                json_str(out, h->sockets.metrics[i].where);
        }
        if (!h->sockets.metrics_passed && h->cfg.metrics.on)
                json_str(out, h->cfg.metrics.text);
        fprintf(out, "]},\"watchdog\":{\"usec\":");
        if (f->wd_usec)
                fprintf(out, "%llu", (unsigned long long)f->wd_usec);
        else
                fprintf(out, "null");
        fprintf(out, ",\"detail\":");
        json_str(out, f->wd);
        fprintf(out, "},");
}

/* The last line: one JSON object. */
static void json_line(struct m0_host *h, const struct facts *f, struct each *e,
                      const struct m0_check *checks, size_t n, FILE *out)
{
        const struct m0_config *cfg = &h->cfg;
        fprintf(out, "{\"app\":");
        json_str(out, h->app->name);
        fprintf(out, ",\"version\":");
        json_str(out, m0_version());
        fprintf(out, ",\"config\":{");
        e->json = true;
        e->first = true;
        m0__config_each(cfg, knob_line, e);
        fprintf(out,
                "},\"topology\":{\"loops\":%u,\"pool_threads\":%u,\"producer\":%s,"
                "\"handlers\":%u},",
                cfg->threads, f->pool, h->app->step ? "true" : "false", f->handlers);
        fprintf(out, "\"app_limits\":{\"max_threads\":%u},", h->app->max_threads);
        json_routes(h, out);
        json_sockets_watchdog(h, f, out);
        fprintf(out, "\"fd_store\":{\"event_state_passed\":%s},",
                h->sockets.store_fd >= 0 ? "true" : "false");
        fprintf(out, "\"capabilities\":{\"held\":");
        json_str(out, f->held);
        fprintf(out, ",\"dropped_when_serving\":true,\"effective\":");
        json_str(out, f->eff);
        fprintf(out, ",\"permitted\":");
        json_str(out, f->prm);
        fprintf(out, "},\"checks\":[");
        for (size_t i = 0; i < n; i++) {
                fprintf(out, "%s{\"name\":", i ? "," : "");
                json_str(out, checks[i].name);
                fprintf(out, ",\"ok\":%s,\"detail\":", checks[i].ok ? "true" : "false");
                json_str(out, checks[i].detail);
                fprintf(out, ",\"fix\":");
                json_str(out, checks[i].fix);
                fprintf(out, "}");
        }
        fprintf(out, "],\"exit\":%d}\n", f->code);
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
        struct each e = {.out = out, .json = false, .first = true, .passed = h->sockets.passed};
        if (e.passed)
                socket_host_port(&h->sockets, e.host, sizeof(e.host), e.port, sizeof(e.port));
        human_lines(h, &f, &e, checks, n, first >= 0, out);
        json_line(h, &f, &e, checks, n, out);
        fflush(out);
        return f.code;
}
