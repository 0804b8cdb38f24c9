/* SPDX-License-Identifier: MIT */
/* config.c: every knob as a flag and an M0_* variable, flag over variable over default (C1–C4). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "json.h"
#include "load.h"
#include "util.h"

enum knob_type {
        K_U32, /* decimal, within [min, max] */
        K_U64,
        K_BOOL,    /* 1/0, on/off, yes/no, true/false */
        K_STR,     /* a host name or address */
        K_URI,     /* "local" or a connection URI, up to `max` bytes; shown without a password */
        K_THREADS, /* a count or "auto" */
        K_ACCESS,  /* off, on (or a boolean's other words), journal */
        K_ADDR,    /* off, or HOST:PORT */
        K_PATH,    /* off, or a file's path shorter than `max` bytes; off is kept as "" */
};

struct m0_knob {
        const char *flag; /* without the leading dashes */
        const char *env;
        const char *def;
        enum knob_type type;
        size_t off;
        uint64_t min, max;
        const char *help;
};

#define OFF(f) offsetof(struct m0_config, f)

/* The one table: --help, the doctor and parsing all read it. Order is the order of --help. */
static const struct m0_knob knobs[] = {
        {"host", "M0_HOST", "127.0.0.1", K_STR, OFF(host), 0, 0,
         "address to bind when systemd passed no socket"},
        {"port", "M0_PORT", "8080", K_U32, OFF(port), 0, 65535,
         "port to bind when systemd passed no socket"},
        {"threads", "M0_THREADS", "1", K_THREADS, OFF(threads), 0, 1024,
         "event loops, one thread each; auto = the CPUs this process may use"},
        {"blocking-threads", "M0_BLOCKING_THREADS", "0", K_U32, OFF(blocking_threads), 0, 256,
         "pool threads per loop for blocking routes; 0 = no pool"},
        {"compute-threads", "M0_COMPUTE_THREADS", "auto", K_THREADS, OFF(compute_threads), 0, 1024,
         "host-wide compute pool for m0_parallel_for; auto = the CPUs; 0 = run inline"},
        {"workers", "M0_WORKERS", "1", K_U32, OFF(workers), 0, 1024,
         "forked workers: refused above 1, systemd supervises one process"},
        {"max-keepalive-requests", "M0_MAX_KEEPALIVE_REQUESTS", "1000", K_U32,
         OFF(max_keepalive_requests), 0, UINT32_MAX, "requests per connection; 0 = no cap"},
        {"sse-heartbeat-ms", "M0_SSE_HEARTBEAT_MS", "15000", K_U32, OFF(sse_heartbeat_ms), 0,
         86400000, "heartbeat comment on idle streams; 0 = off"},
        {"app-tick-ms", "M0_APP_TICK_MS", "0", K_U32, OFF(app_tick_ms), 0, 86400000,
         "run the app's tick on each loop this often; 0 = never"},
        {"access-log", "M0_ACCESS_LOG", "off", K_ACCESS, OFF(access_log), 0, 2,
         "on = one log line per request; journal = one journald entry per request; off"},
        {"accept-share", "M0_ACCEPT_SHARE", "on", K_BOOL, OFF(accept_share), 0, 1,
         "place new connections on the least loaded loop; off = bare race"},
        {"drain-timeout-ms", "M0_DRAIN_TIMEOUT_MS", "5000", K_U32, OFF(drain_timeout_ms), 0,
         3600000, "bound on the drain after SIGTERM"},
        {"drain-idle-ms", "M0_DRAIN_IDLE_MS", "100", K_U32, OFF(drain_idle_ms), 0, 60000,
         "at the stop, idle keep-alive connections still answer a request this long"},
        {"max-head-bytes", "M0_MAX_HEAD_BYTES", "32768", K_U32, OFF(max_head_bytes), 256, 1048576,
         "request line and headers (431 past it)"},
        {"max-uri-bytes", "M0_MAX_URI_BYTES", "8192", K_U32, OFF(max_uri_bytes), 16, 1048576,
         "request target (414 past it)"},
        {"max-header-fields", "M0_MAX_HEADER_FIELDS", "100", K_U32, OFF(max_header_fields), 1,
         10000, "header fields per request (431 past it)"},
        {"max-body-bytes", "M0_MAX_BODY_BYTES", "4194304", K_U64, OFF(max_body_bytes), 0,
         UINT64_C(1) << 40, "request body, declared or chunked (413 past it)"},
        {"header-timeout-ms", "M0_HEADER_TIMEOUT_MS", "10000", K_U32, OFF(header_timeout_ms), 1,
         86400000, "time to receive a whole request head (408)"},
        {"body-timeout-ms", "M0_BODY_TIMEOUT_MS", "30000", K_U32, OFF(body_timeout_ms), 1, 86400000,
         "time to receive a whole request body (408)"},
        {"idle-timeout-ms", "M0_IDLE_TIMEOUT_MS", "60000", K_U32, OFF(idle_timeout_ms), 1, 86400000,
         "idle keep-alive connection, or a reader making no progress"},
        {"max-connections", "M0_MAX_CONNECTIONS", "10000", K_U32, OFF(max_connections), 1, 10000000,
         "open connections per process; past it new ones are closed at once"},
        {"max-output-bytes", "M0_MAX_OUTPUT_BYTES", "1048576", K_U32, OFF(max_output_bytes), 4096,
         1073741824, "unsent response bytes per connection before it stops reading"},
        {"channel-frames", "M0_CHANNEL_FRAMES", "4096", K_U32, OFF(channel_frames), 1, 1048576,
         "events a loop holds for its streams until it delivers them; past it they reconnect"},
        {"slice-requests", "M0_SLICE_REQUESTS", "256", K_U32, OFF(slice_requests), 1, 1000000,
         "pipelined requests one connection runs per turn before the loop serves the others"},
        {"turn-budget-ms", "M0_TURN_BUDGET_MS", "10", K_U32, OFF(turn_budget_ms), 1, 10000,
         "a loop's turn serves connections this long; the rest waits for the next, served first"},
        {"turn-items", "M0_TURN_ITEMS", "32", K_U32, OFF(turn_items), 1, 1000000,
         "a turn takes this many items (a connection, a timer, a message, 64 accepts or frames)"},
        {"linger-ms", "M0_LINGER_MS", "2000", K_U32, OFF(linger_ms), 0, 60000,
         "after a last response, read and drop the client's bytes this long before closing"},
        {"bus", "M0_BUS", "local", K_URI, OFF(bus), 0, sizeof(((struct m0_config *)0)->bus),
         "local, or a postgresql:// URI: every host naming that database shares one bus"},
        {"bus-queue", "M0_BUS_QUEUE", "10000", K_U32, OFF(bus_queue), 1, 10000000,
         "events waiting for the database; past it a publish fails with -EAGAIN"},
        {"bus-replay-max", "M0_BUS_REPLAY_MAX", "10000", K_U32, OFF(bus_replay_max), 1, 1000000,
         "events one replay from the database returns at most"},
        {"bus-retain-s", "M0_BUS_RETAIN_S", "86400", K_U32, OFF(bus_retain_s), 0, 315360000,
         "the database keeps events this long; 0 = no age bound"},
        {"bus-retain-rows", "M0_BUS_RETAIN_ROWS", "1000000", K_U64, OFF(bus_retain_rows), 0,
         UINT64_C(1) << 40, "the database keeps the newest this many events; 0 = no bound"},
        {"metrics", "M0_METRICS", "off", K_ADDR, OFF(metrics), 0, 65535,
         "serve GET /metrics on HOST:PORT when no socket named metrics is passed; off = none"},
        {"metrics-max-connections", "M0_METRICS_MAX_CONNECTIONS", "8", K_U32,
         OFF(metrics_max_connections), 1, 1024,
         "connections the metrics port holds at once; past it new ones are closed at once"},
        {"metrics-timeout-ms", "M0_METRICS_TIMEOUT_MS", "5000", K_U32, OFF(metrics_timeout_ms), 1,
         600000, "a metrics connection sends its request and takes its answer within this"},
        {"access-log-queue", "M0_ACCESS_LOG_QUEUE", "4096", K_U32, OFF(access_log_queue), 1,
         1000000, "journal entries a loop keeps while journald is behind; past it, dropped"},
        {"json-max-depth", "M0_JSON_MAX_DEPTH", "64", K_U32, OFF(json_max_depth), 1,
         M0__JSON_DEPTH_MAX, "nesting of a JSON body m0_req_json() reads (400 past it)"},
        {"replay-per-channel", "M0_REPLAY_PER_CHANNEL", "64", K_U32, OFF(replay_per_channel), 1,
         65536, "events each channel keeps for clients reconnecting with Last-Event-ID"},
        {"replay-bytes", "M0_REPLAY_BYTES", "16777216", K_U32, OFF(replay_bytes), 65536, 1073741824,
         "memory for replay, the fd store's copy included; idle channels go first"},
        {"stream-max-channels", "M0_STREAM_MAX_CHANNELS", "16", K_U32, OFF(stream_max_channels), 1,
         1024, "channels one stream may follow (m0_res_subscribe)"},
        {"ws-max-message", "M0_WS_MAX_MESSAGE", "1048576", K_U32, OFF(ws_max_message), 125,
         1073741824, "a WebSocket message's bytes, fragments joined (closed 1009 past it)"},
        {"ws-max-queued", "M0_WS_MAX_QUEUED", "1048576", K_U32, OFF(ws_max_queued), 4096,
         1073741824, "a WebSocket's unsent message bytes; past it a slow client is closed 1008"},
        {"ws-ping-ms", "M0_WS_PING_MS", "30000", K_U32, OFF(ws_ping_ms), 0, 86400000,
         "ping a quiet WebSocket this often; one silent for --idle-timeout-ms is closed; 0 = off"},
        {"sse-retry-ms", "M0_SSE_RETRY_MS", "2000", K_U32, OFF(sse_retry_ms), 0, 86400000,
         "the reconnection delay a stream's first bytes give; 0 = none"},
        {"bus-ready-ms", "M0_BUS_READY_MS", "5000", K_U32, OFF(bus_ready_ms), 0, 600000,
         "the start waits this long for a shared bus's database, then serves without it"},
        {"tls-cert", "M0_TLS_CERT", "off", K_PATH, OFF(tls_cert), 0,
         sizeof(((struct m0_config *)0)->tls_cert),
         "PEM certificate, leaf first, then its chain; loaded and checked at start (TLS)"},
        {"tls-key", "M0_TLS_KEY", "off", K_PATH, OFF(tls_key), 0,
         sizeof(((struct m0_config *)0)->tls_key), "the certificate's private key, PEM"},
        {"tls-port", "M0_TLS_PORT", "0", K_U32, OFF(tls_port), 0, 65535,
         "port for TLS when systemd passed no socket; 0 = none"},
        {"tls-warn-days", "M0_TLS_WARN_DAYS", "14", K_U32, OFF(tls_warn_days), 0, 3650,
         "warn when a certificate expires within this many days"},
        {"tls-ticket-rotate-s", "M0_TLS_TICKET_ROTATE_S", "3600", K_U32, OFF(tls_ticket_rotate_s),
         60, 604800, "a new session ticket key this often; each is kept two periods"},
        {"tls-handshake-timeout-ms", "M0_TLS_HANDSHAKE_TIMEOUT_MS", "10000", K_U32,
         OFF(tls_handshake_timeout_ms), 1, 600000, "a TLS handshake completes within this"},
        {"tls-max-handshakes", "M0_TLS_MAX_HANDSHAKES", "2048", K_U32, OFF(tls_max_handshakes), 1,
         1000000, "TLS handshakes in progress per loop; past it new ones are closed"},
        {"tls-session-cache", "M0_TLS_SESSION_CACHE", "10000", K_U32, OFF(tls_session_cache), 0,
         10000000, "TLS 1.2 sessions kept for resumption by id; 0 = none (tickets still work)"},
        {"tls-hsts-s", "M0_TLS_HSTS_S", "63072000", K_U32, OFF(tls_hsts_s), 0, 2000000000,
         "Strict-Transport-Security max-age of answers over TLS; 0 = none"},
        {"compress-min-bytes", "M0_COMPRESS_MIN_BYTES", "1024", K_U32, OFF(compress_min_bytes), 0,
         1073741824, "an answer's body is compressed from this size on (SF4)"},
        {"compress-zstd-level", "M0_COMPRESS_ZSTD_LEVEL", "3", K_U32, OFF(compress_zstd_level), 1,
         19, "zstd's level for compressed answers"},
        {"compress-brotli-level", "M0_COMPRESS_BROTLI_LEVEL", "5", K_U32,
         OFF(compress_brotli_level), 0, 11, "brotli's level for compressed answers"},
        {"compress-gzip-level", "M0_COMPRESS_GZIP_LEVEL", "6", K_U32, OFF(compress_gzip_level), 1,
         9, "gzip's level for compressed answers"},
        {"files-turn-cache", "M0_FILES_TURN_CACHE", "64", K_U32, OFF(files_turn_cache), 0, 65536,
         "files a loop keeps open until its turn ends (SF5); 0 = none"},
        {"h2-max-streams", "M0_H2_MAX_STREAMS", "100", K_U32, OFF(h2_max_streams), 1, 65536,
         "HTTP/2 streams a client may have open on one connection (SETTINGS)"},
        {"h2-window-bytes", "M0_H2_WINDOW_BYTES", "65535", K_U32, OFF(h2_window_bytes), 1024,
         2147483647, "HTTP/2 flow-control window of each request body (SETTINGS)"},
        {"h2-reset-rate", "M0_H2_RESET_RATE", "100", K_U32, OFF(h2_reset_rate), 1, 1000000,
         "HTTP/2 streams a client may reset per second (as a burst too); past it, GOAWAY"},
};

/* Knobs that were, and what replaced them: a value for one is refused (78, or 2 for a flag)
 * rather than read with another meaning or ignored (D75). */
static const struct {
        const char *flag, *env, *instead;
} retired[] = {
        {"replay-frames", "M0_REPLAY_FRAMES",
         "replay is kept per channel now: set M0_REPLAY_PER_CHANNEL (events a channel keeps) or "
         "M0_REPLAY_BYTES (the whole store's memory)"},
};

_Static_assert(M0__ARRAY_SIZE(knobs) <= M0__KNOBS_MAX, "raise M0__KNOBS_MAX");

static const struct m0_knob *knob_by_flag(const char *flag, size_t len)
{
        for (size_t i = 0; i < M0__ARRAY_SIZE(knobs); i++)
                if (strlen(knobs[i].flag) == len && memcmp(knobs[i].flag, flag, len) == 0)
                        return &knobs[i];
        return NULL;
}

unsigned m0__cpus_available(void)
{
        unsigned n = 1;
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
                n = (unsigned)CPU_COUNT(&set);
        /* cgroup v2: "max 100000" or "<quota> <period>"; a quota caps the useful loops. */
        FILE *f = fopen("/sys/fs/cgroup/cpu.max", "re");
        if (f) {
                char q[32];
                unsigned long long period;
                if (fscanf(f, "%31s %llu", q, &period) == 2 && strcmp(q, "max") != 0 && period) {
                        unsigned long long quota = strtoull(q, NULL, 10);
                        unsigned cap = (unsigned)((quota + period - 1) / period);
                        if (cap >= 1 && cap < n)
                                n = cap;
                }
                fclose(f);
        }
        return n;
}

/* 1/0, on/off, yes/no, true/false: 1 or 0, else -EINVAL. */
static int parse_bool(const char *v)
{
        if (!strcmp(v, "1") || !strcmp(v, "on") || !strcmp(v, "yes") || !strcmp(v, "true"))
                return 1;
        if (!strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "no") || !strcmp(v, "false"))
                return 0;
        return -EINVAL;
}

/* "off", or HOST:PORT (an IPv6 address as [ADDR]:PORT) with a port up to `max_port`. */
static int parse_addr(struct m0_addr *a, const char *v, uint64_t max_port)
{
        struct m0_addr got = {0};
        size_t n = strlen(v);
        if (n == 0 || n >= sizeof(got.text))
                return -EINVAL;
        memcpy(got.text, v, n + 1);
        if (!strcmp(v, "off")) {
                *a = got;
                return 0;
        }
        const char *colon = v[0] == '[' ? strstr(v, "]:") : strrchr(v, ':');
        const char *host = v[0] == '[' ? v + 1 : v;
        if (!colon || colon == host || (v[0] != '[' && memchr(v, ':', (size_t)(colon - v))))
                return -EINVAL; /* no port, no host, or an IPv6 address without its brackets */
        const char *ps = colon + (v[0] == '[' ? 2 : 1);
        if (*ps < '0' || *ps > '9' || strlen(ps) > 5)
                return -EINVAL;
        char *end;
        unsigned long port = strtoul(ps, &end, 10);
        if (*end)
                return -EINVAL;
        if (port > max_port)
                return -ERANGE;
        memcpy(got.host, host, (size_t)(colon - host));
        got.port = (uint32_t)port;
        got.on = true;
        *a = got;
        return 0;
}

/* Parse `v` into the field of `k`. 0, or -EINVAL (not a value of this type) / -ERANGE. */
static int knob_set(struct m0_config *cfg, const struct m0_knob *k, const char *v)
{
        char *p = (char *)cfg + k->off;
        switch (k->type) {
        case K_STR: {
                size_t n = strlen(v);
                if (n == 0 || n >= sizeof(cfg->host))
                        return -EINVAL;
                memcpy(p, v, n + 1);
                return 0;
        }
        case K_URI: {
                size_t n = strlen(v);
                if (n == 0 || n >= k->max)
                        return -EINVAL;
                memcpy(p, v, n + 1);
                return 0;
        }
        case K_BOOL: {
                int b = parse_bool(v);
                if (b < 0)
                        return b;
                *(bool *)p = b;
                return 0;
        }
        case K_ACCESS: {
                int b = strcmp(v, "journal") ? parse_bool(v) : M0_ACCESS_JOURNAL;
                if (b < 0)
                        return b;
                *(uint32_t *)p = (uint32_t)b;
                return 0;
        }
        case K_ADDR: return parse_addr((struct m0_addr *)(void *)p, v, k->max);
        case K_PATH: {
                size_t n = strlen(v);
                if (n == 0 || n >= k->max)
                        return -EINVAL;
                if (!strcmp(v, "off"))
                        n = 0; /* a file named off is ./off */
                memcpy(p, v, n);
                p[n] = '\0';
                return 0;
        }
        case K_THREADS:
                if (k->off == OFF(threads))
                        cfg->threads_auto = !strcmp(v, "auto");
                if (!strcmp(v, "auto")) {
                        *(uint32_t *)p = m0__cpus_available();
                        return 0;
                }
                __attribute__((fallthrough)); /* a count */
        case K_U32:
        case K_U64: {
                uint64_t x;
                int r = m0__parse_uint(v, &x);
                if (r < 0)
                        return r;
                if (x < k->min || x > k->max)
                        return -ERANGE;
                if (k->type == K_U64)
                        *(uint64_t *)p = x;
                else
                        *(uint32_t *)p = (uint32_t)x;
                return 0;
        }
        }
        return -EINVAL;
}

static const char *knob_expect(const struct m0_knob *k, char *buf, size_t len)
{
        switch (k->type) {
        case K_STR: return "a host name or address";
        case K_URI:
                snprintf(buf, len, "local or a URI shorter than %" PRIu64 " bytes", k->max);
                return buf;
        case K_BOOL: return "on or off";
        case K_PATH:
                snprintf(buf, len, "off or a path shorter than %" PRIu64 " bytes", k->max);
                return buf;
        case K_ACCESS: return "off, on or journal";
        case K_ADDR:
                snprintf(buf, len,
                         "off or HOST:PORT with a port up to %" PRIu64 " ([ADDR]:PORT "
                         "for IPv6)",
                         k->max);
                return buf;
        case K_THREADS:
                snprintf(buf, len, "a whole number from %" PRIu64 " to %" PRIu64 ", or auto",
                         k->min, k->max);
                return buf;
        default:
                snprintf(buf, len, "a whole number from %" PRIu64 " to %" PRIu64, k->min, k->max);
                return buf;
        }
}

void m0__config_usage(FILE *out, const char *app_name)
{
        fprintf(out, "usage: %s [--doctor] [--OPTION VALUE | --OPTION=VALUE]...\n", app_name);
        fprintf(out, "       %s --help | --version\n\n", app_name);
        fprintf(out,
                "Serves the %s app over HTTP/1.1 on the sockets systemd passes, or on\n"
                "--host:--port when none is passed. A flag beats its variable, which beats\n"
                "the default.\n\n",
                app_name);
        for (size_t i = 0; i < M0__ARRAY_SIZE(knobs); i++) {
                const struct m0_knob *k = &knobs[i];
                fprintf(out, "  --%-24s %-28s default %s\n      %s\n", k->flag, k->env, k->def,
                        k->help);
        }
        fprintf(out,
                "\n  --doctor  print the configuration and every check, bind nothing, and exit\n"
                "            with the code serving would (last line: one JSON object)\n"
                "  --help    this text\n  --version print the version\n");
}

/* What the flags asked for, read before any is applied: usage errors win over env refusals. */
struct flags {
        const char *val[M0__ARRAY_SIZE(knobs)]; /* a knob's value from its flag, or NULL */
        bool help, version;
};

/* One flag, argv[*i] (and its value in argv[*i + 1] when it takes the next argument). */
static enum m0_config_result read_flag(struct m0_config *cfg, struct flags *fl, int argc,
                                       char **argv, int *i, char *err, size_t err_len)
{
        const char *a = argv[*i];
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
                snprintf(err, err_len, "unexpected argument '%s'", a);
                return M0_CONFIG_USAGE;
        }
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        bool *plain = !eq && nlen == 4 && !memcmp(name, "help", 4)      ? &fl->help
                      : !eq && nlen == 7 && !memcmp(name, "version", 7) ? &fl->version
                      : !eq && nlen == 6 && !memcmp(name, "doctor", 6)  ? &cfg->doctor
                                                                        : NULL;
        if (plain) {
                *plain = true;
                return M0_CONFIG_SERVE;
        }
        const struct m0_knob *k = knob_by_flag(name, nlen);
        for (size_t j = 0; !k && j < M0__ARRAY_SIZE(retired); j++) {
                if (strlen(retired[j].flag) != nlen || memcmp(retired[j].flag, name, nlen))
                        continue;
                snprintf(err, err_len, "option '--%s' is no longer read: %s", retired[j].flag,
                         retired[j].instead);
                return M0_CONFIG_USAGE;
        }
        if (!k) {
                snprintf(err, err_len, "unknown option '--%.*s'", (int)nlen, name);
                return M0_CONFIG_USAGE;
        }
        const char *v = eq ? eq + 1 : *i + 1 < argc ? argv[++*i] : NULL;
        if (!v) {
                snprintf(err, err_len, "option '--%s' needs a value", k->flag);
                return M0_CONFIG_USAGE;
        }
        struct m0_config probe = *cfg;
        char expect[96];
        if (knob_set(&probe, k, v) < 0) {
                snprintf(err, err_len, "option '--%s': '%s' is not %s", k->flag, v,
                         knob_expect(k, expect, sizeof(expect)));
                return M0_CONFIG_USAGE;
        }
        fl->val[k - knobs] = v;
        return M0_CONFIG_SERVE;
}

/* The M0_* variables of the knobs no flag set; one that does not parse is a refusal (C4). */
static enum m0_config_result read_env(struct m0_config *cfg, const struct flags *fl, char **envp,
                                      char *err, size_t err_len)
{
        char expect[96];
        for (size_t i = 0; i < M0__ARRAY_SIZE(retired); i++) {
                size_t elen = strlen(retired[i].env);
                for (char **e = envp; e && *e; e++) {
                        if (strncmp(*e, retired[i].env, elen) != 0 || (*e)[elen] != '=')
                                continue;
                        snprintf(err, err_len, "%s is no longer read: %s (unset %s)",
                                 retired[i].env, retired[i].instead, retired[i].env);
                        return M0_CONFIG_REFUSED;
                }
        }
        for (size_t i = 0; i < M0__ARRAY_SIZE(knobs); i++) {
                const struct m0_knob *k = &knobs[i];
                if (fl->val[i])
                        continue; /* the flag wins; its variable is not even read */
                size_t elen = strlen(k->env);
                for (char **e = envp; e && *e; e++) {
                        if (strncmp(*e, k->env, elen) != 0 || (*e)[elen] != '=')
                                continue;
                        const char *v = *e + elen + 1;
                        if (knob_set(cfg, k, v) < 0) {
                                snprintf(err, err_len, "%s='%s' is not %s (set %s or --%s)", k->env,
                                         v, knob_expect(k, expect, sizeof(expect)), k->env,
                                         k->flag);
                                return M0_CONFIG_REFUSED;
                        }
                        cfg->sources[i] = M0_SRC_ENV;
                }
        }
        return M0_CONFIG_SERVE;
}

enum m0_config_result m0__config_parse(struct m0_config *cfg, const char *app_name, int argc,
                                       char **argv, char **envp, FILE *out, char *err,
                                       size_t err_len)
{
        memset(cfg, 0, sizeof(*cfg));
        for (size_t i = 0; i < M0__ARRAY_SIZE(knobs); i++) {
                cfg->sources[i] = M0_SRC_DEFAULT;
                if (knob_set(cfg, &knobs[i], knobs[i].def) < 0) {
                        snprintf(err, err_len, "internal: default of --%s", knobs[i].flag);
                        return M0_CONFIG_REFUSED;
                }
        }
        struct flags fl = {0};
        for (int i = 1; i < argc; i++) {
                enum m0_config_result r = read_flag(cfg, &fl, argc, argv, &i, err, err_len);
                if (r != M0_CONFIG_SERVE)
                        return r;
        }
        if (fl.help) {
                m0__config_usage(out, app_name);
                return M0_CONFIG_HELP;
        }
        if (fl.version) {
                fprintf(out, "%s (m0) %s\n", app_name, m0_version());
                return M0_CONFIG_VERSION;
        }
        enum m0_config_result r = read_env(cfg, &fl, envp, err, err_len);
        if (r != M0_CONFIG_SERVE)
                return r;
        for (size_t i = 0; i < M0__ARRAY_SIZE(knobs); i++) {
                if (!fl.val[i])
                        continue;
                (void)knob_set(cfg, &knobs[i], fl.val[i]); /* validated above */
                cfg->sources[i] = M0_SRC_FLAG;
        }
        return M0_CONFIG_SERVE;
}

enum m0_source m0__config_source(const struct m0_config *cfg, const char *flag)
{
        const struct m0_knob *k = knob_by_flag(flag, strlen(flag));
        return k ? (enum m0_source)cfg->sources[k - knobs] : M0_SRC_DEFAULT;
}

const char *m0__source_name(enum m0_source s)
{
        switch (s) {
        case M0_SRC_ENV: return "env";
        case M0_SRC_FLAG: return "flag";
        default: return "default";
        }
}

static const char *const access_names[] = {"off", "on", "journal"};

void m0__config_each(const struct m0_config *cfg,
                     void (*fn)(void *ud, const char *flag, const char *env, const char *value,
                                enum m0_source src),
                     void *ud)
{
        char v[1100];
        for (size_t i = 0; i < M0__ARRAY_SIZE(knobs); i++) {
                const struct m0_knob *k = &knobs[i];
                const char *p = (const char *)cfg + k->off;
                switch (k->type) {
                case K_STR: snprintf(v, sizeof(v), "%s", p); break;
                case K_URI: m0__pgbus_redact(p, v, sizeof(v)); break;
                case K_BOOL: snprintf(v, sizeof(v), "%s", *(const bool *)p ? "on" : "off"); break;
                case K_ACCESS:
                        snprintf(v, sizeof(v), "%s", access_names[*(const uint32_t *)p]);
                        break;
                case K_ADDR: snprintf(v, sizeof(v), "%s", ((const struct m0_addr *)p)->text); break;
                case K_PATH: snprintf(v, sizeof(v), "%s", *p ? p : "off"); break;
                case K_U64: snprintf(v, sizeof(v), "%" PRIu64, *(const uint64_t *)p); break;
                default: snprintf(v, sizeof(v), "%" PRIu32, *(const uint32_t *)p); break;
                }
                fn(ud, k->flag, k->env, v, (enum m0_source)cfg->sources[i]);
        }
}
