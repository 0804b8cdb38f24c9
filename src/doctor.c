/* SPDX-License-Identifier: MIT */
/* doctor.c: --doctor: what would be served, every check, and the exit code serving would give (D1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "internal.h"

static void json_str(FILE *out, const char *s)
{
        fputc('"', out);
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if (*p == '"' || *p == '\\')
                        fprintf(out, "\\%c", *p);
                else if (*p < 0x20)
                        fprintf(out, "\\u%04x", *p);
                else
                        fputc(*p, out);
        }
        fputc('"', out);
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

int m0__doctor(struct m0_host *h, const struct m0_check *checks, size_t n, int first, FILE *out)
{
        const struct m0_config *cfg = &h->cfg;
        const m0_app *app = h->app;
        int code = first >= 0 ? M0__EXIT_CONFIG : M0__EXIT_OK;
        unsigned pool = cfg->threads * cfg->blocking_threads;
        unsigned handlers = cfg->threads + pool + (app->step ? 1 : 0);
        const char *wd = getenv("WATCHDOG_USEC");
        char eff[64], prm[64];
        caps(eff, prm, sizeof(eff));

        fprintf(out, "m0 doctor: %s (m0 %s)\n", app->name, m0_version());
        fprintf(out, "configuration (value, source):\n");
        struct each e = {.out = out, .json = false, .first = true, .passed = h->sockets.passed};
        if (e.passed)
                socket_host_port(&h->sockets, e.host, sizeof(e.host), e.port, sizeof(e.port));
        m0__config_each(cfg, knob_line, &e);
        fprintf(out,
                "topology: %u loop%s, %u pool thread%s, %s producer, %u handler%s, %u compute "
                "thread%s\n",
                cfg->threads, cfg->threads == 1 ? "" : "s", pool, pool == 1 ? "" : "s",
                app->step ? "a" : "no", handlers, handlers == 1 ? "" : "s", cfg->compute_threads,
                cfg->compute_threads == 1 ? "" : "s");
        if (app->max_threads)
                fprintf(out, "app limits: max_threads %u\n", app->max_threads);
        else
                fprintf(out, "app limits: max_threads 0 (no limit)\n");
        if (h->sockets.passed)
                for (size_t i = 0; i < h->sockets.n; i++)
                        fprintf(out, "socket: fd %d '%s' %s\n", h->sockets.v[i].fd,
                                h->sockets.v[i].name, h->sockets.v[i].where);
        else
                fprintf(out, "sockets: none passed; serving would bind %s:%u\n", cfg->host,
                        cfg->port);
        fprintf(out, "watchdog: %s\n", wd ? wd : "off (WATCHDOG_USEC unset)");
        fprintf(out, "fd store: %s\n",
                h->sockets.store_fd >= 0 ? "event state passed back (" M0__STORE_NAME ")"
                                         : "no event state passed: ids would start at 1");
        char held[256];
        m0__caps_describe(held, sizeof(held));
        fprintf(out,
                "capabilities: %s (effective %s, permitted %s); serving drops them all after "
                "taking the sockets, and sets no-new-privs\n",
                held, eff, prm);
        for (size_t i = 0; i < n; i++)
                fprintf(out, "check %-24s %s  %s%s%s%s\n", checks[i].name,
                        checks[i].ok ? "ok  " : "FAIL", checks[i].detail, checks[i].ok ? "" : " (",
                        checks[i].fix, checks[i].ok ? "" : ")");
        fprintf(out, "verdict: %s (exit %d)\n", first >= 0 ? "refused" : "would serve", code);

        /* The last line: one JSON object. */
        fprintf(out, "{\"app\":");
        json_str(out, app->name);
        fprintf(out, ",\"version\":");
        json_str(out, m0_version());
        fprintf(out, ",\"config\":{");
        e.json = true;
        e.first = true;
        m0__config_each(cfg, knob_line, &e);
        fprintf(out,
                "},\"topology\":{\"loops\":%u,\"pool_threads\":%u,\"producer\":%s,"
                "\"handlers\":%u},",
                cfg->threads, pool, app->step ? "true" : "false", handlers);
        fprintf(out, "\"app_limits\":{\"max_threads\":%u},", app->max_threads);
        fprintf(out, "\"sockets\":{\"passed\":%s,\"list\":[", h->sockets.passed ? "true" : "false");
        for (size_t i = 0; i < h->sockets.n; i++) {
                fprintf(out, "%s{\"fd\":%d,\"name\":", i ? "," : "", h->sockets.v[i].fd);
                json_str(out, h->sockets.v[i].name);
                fprintf(out, ",\"address\":");
                json_str(out, h->sockets.v[i].where);
                fprintf(out, "}");
        }
        fprintf(out, "]},\"watchdog\":{\"usec\":%s},", wd ? wd : "null");
        fprintf(out, "\"fd_store\":{\"event_state_passed\":%s},",
                h->sockets.store_fd >= 0 ? "true" : "false");
        fprintf(out, "\"capabilities\":{\"held\":");
        json_str(out, held);
        fprintf(out, ",\"dropped_when_serving\":true,\"effective\":");
        json_str(out, eff);
        fprintf(out, ",\"permitted\":");
        json_str(out, prm);
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
        fprintf(out, "],\"exit\":%d}\n", code);
        fflush(out);
        return code;
}
