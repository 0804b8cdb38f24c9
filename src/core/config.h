/* SPDX-License-Identifier: MIT */
/* config.h: config.c, every knob as a flag and an M0_* variable, read once by the coordinator. */
#ifndef M0_CONFIG_H
#define M0_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum m0_source {
        M0_SRC_DEFAULT = 0,
        M0_SRC_ENV,
        M0_SRC_FLAG,
};

#define M0__KNOBS_MAX 64

/* M0_ACCESS_LOG's values (O2). */
enum m0_access_log {
        M0_ACCESS_OFF = 0,
        M0_ACCESS_LINE,    /* on: one log line per request a handler answered */
        M0_ACCESS_JOURNAL, /* journal: one structured journald entry per request (D81) */
};

/* An address knob: "off", or HOST:PORT with an IPv6 address in brackets. */
struct m0_addr {
        char text[272]; /* as given */
        bool on;
        char host[256]; /* without the brackets */
        uint32_t port;
};

/* Every knob of the host. Filled once by m0__config_parse() on the coordinator, read-only after. */
struct m0_config {
        char host[256];
        uint32_t port;
        uint32_t threads; /* resolved: `auto` is turned into a count */
        bool threads_auto;
        uint32_t blocking_threads;
        uint32_t compute_threads;
        uint32_t workers;
        uint32_t max_keepalive_requests;
        uint32_t sse_heartbeat_ms;
        uint32_t app_tick_ms;
        uint32_t access_log; /* an enum m0_access_log */
        bool accept_share;
        uint32_t drain_timeout_ms;
        uint32_t max_head_bytes;
        uint32_t max_uri_bytes;
        uint32_t max_header_fields;
        uint64_t max_body_bytes;
        uint32_t header_timeout_ms;
        uint32_t body_timeout_ms;
        uint32_t idle_timeout_ms;
        uint32_t max_connections;
        uint32_t max_output_bytes;
        uint32_t linger_ms;
        uint32_t drain_idle_ms;
        uint32_t channel_frames;
        uint32_t slice_requests;
        uint32_t turn_budget_ms;
        uint32_t turn_items;
        char bus[1024]; /* "local", or a PostgreSQL URI (G1; src/pgbus.h) */
        uint32_t bus_queue;
        uint32_t bus_replay_max;
        uint32_t bus_retain_s;
        uint64_t bus_retain_rows;
        struct m0_addr metrics; /* O1: where GET /metrics is served when no socket is passed */
        uint32_t metrics_max_connections;
        uint32_t metrics_timeout_ms;
        uint32_t access_log_queue;
        uint32_t json_max_depth;     /* Q3: containers m0_req_json() lets a body nest */
        uint32_t replay_per_channel; /* N4 */
        uint32_t replay_bytes;
        uint32_t stream_max_channels; /* N1 */
        uint32_t sse_retry_ms;        /* H9 */
        uint32_t ws_max_message;      /* WS3: a message's bytes (1009 past it) */
        uint32_t ws_max_queued;       /* WS3: a WebSocket's unsent bytes (1008 past it) */
        uint32_t ws_ping_ms;          /* WS3: pings, 0 = none */
        uint32_t bus_ready_ms;        /* G3: the start's wait for a shared bus's database */
        /* TL1–TL6 (src/tls/): the certificate's and key's files ("" when off), the TLS port (0 =
         * none), and the bounds of the context and the handshakes */
        char tls_cert[512], tls_key[512];
        uint32_t tls_port;
        uint32_t tls_warn_days;
        uint32_t tls_ticket_rotate_s;
        uint32_t tls_handshake_timeout_ms;
        uint32_t tls_max_handshakes;
        uint32_t tls_session_cache;
        uint32_t tls_hsts_s;         /* TL7: an app's answers over TLS carry HSTS (D145) */
        uint32_t compress_min_bytes; /* SF4: the smallest body compressed (D182) */
        uint32_t compress_zstd_level;
        uint32_t compress_brotli_level;
        uint32_t compress_gzip_level;
        uint32_t files_turn_cache; /* SF5: files a loop keeps open for the rest of a turn (D237) */
        /* HT1, HT4 (src/http2/): the SETTINGS m0 sends and the reset rate it takes */
        uint32_t h2_max_streams;
        uint32_t h2_window_bytes;
        uint32_t h2_reset_rate;
        bool doctor;
        unsigned char sources[M0__KNOBS_MAX]; /* enum m0_source per knob, in table order */
};

enum m0_config_result {
        M0_CONFIG_SERVE = 0, /* go on */
        M0_CONFIG_HELP,      /* --help printed; exit 0 */
        M0_CONFIG_VERSION,   /* --version printed; exit 0 */
        M0_CONFIG_USAGE,     /* usage error; exit 2 */
        M0_CONFIG_REFUSED,   /* an environment value did not parse; exit 78 */
};

struct m0_knob;

/*
 * Parse flags (argv) over M0_* variables (envp) over defaults into *cfg. On USAGE/REFUSED,
 * `err` holds the one line naming the problem. `help`/`version` output goes to `out`.
 */
enum m0_config_result m0__config_parse(struct m0_config *cfg, const char *app_name, int argc,
                                       char **argv, char **envp, FILE *out, char *err,
                                       size_t err_len);
/* The usage text, printed with usage errors and --help. */
void m0__config_usage(FILE *out, const char *app_name);
/* Source of the knob whose flag is `flag` ("threads") in the last parse. */
enum m0_source m0__config_source(const struct m0_config *cfg, const char *flag);
const char *m0__source_name(enum m0_source s);
/* CPUs this process may run on: affinity, then cgroup v2 cpu.max quota. At least 1. */
unsigned m0__cpus_available(void);
/* Walk every knob: name (flag without dashes), env variable, rendered value, source. */
void m0__config_each(const struct m0_config *cfg,
                     void (*fn)(void *ud, const char *flag, const char *env, const char *value,
                                enum m0_source src),
                     void *ud);

#endif /* M0_CONFIG_H */
