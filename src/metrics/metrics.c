/* SPDX-License-Identifier: MIT */
/* metrics.c: the exposition of what operators watch (O1) in the Prometheus text format 0.0.4, or
 * the OpenMetrics text format for a scraper that asks for it (AP4), read from each loop's counters
 * without a lock (D79, D80, D116). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "attach.h"
#include "config.h"
#include "hctx.h"
#include "head-checks.h"
#include "metrics.h"
#include "load.h"
#include "tls.h"

/* The histograms' buckets (m0__bucket_us, accesslog.c) as the `le` label shows them: seconds, in their shortest decimal form. */
static const char *const bucket_le[M0__BUCKETS] = {
        "0.000025", "0.00005", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01",
        "0.025",    "0.05",    "0.1",    "0.25",    "0.5",    "1",     "2.5",    "5",     "10",
};

static const char *const method_label[M0__METHOD_CLASSES] = {
        "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other",
};
static const char *const status_label[M0__STATUS_CLASSES] = {"2xx", "3xx", "4xx", "5xx"};

const char *m0__metrics_content_type(enum m0_metrics_format f)
{
        return f == M0_METRICS_OPENMETRICS ? "application/openmetrics-text; version=1.0.0; "
                                             "charset=utf-8"
                                           : "text/plain; version=0.0.4; charset=utf-8";
}

/* A qvalue (RFC 9110 12.4.2: "0" [ "." 0*3DIGIT ] / "1" [ "." 0*3"0" ]) in thousandths, or -1. */
static int qvalue(const char *v, size_t n)
{
        if (n == 0 || (v[0] != '0' && v[0] != '1') || n == 2 || n > 5 || (n > 1 && v[1] != '.'))
                return -1;
        int q = (v[0] - '0') * 1000;
        for (size_t i = 2, scale = 100; i < n; i++, scale /= 10) {
                if (v[i] < '0' || v[i] > '9')
                        return -1;
                q += (v[i] - '0') * (int)scale;
        }
        return q <= 1000 ? q : -1;
}

/* One element of an Accept list: its media range, trimmed, and its q in thousandths (1000 when it
 * has none). -1 when the element has no range or a q that is not a qvalue. */
static int accept_element(const char *p, size_t n, const char **ret_range, size_t *ret_len,
                          int *ret_q)
{
        size_t rn = strcspn(p, ";");
        rn = rn < n ? rn : n;
        *ret_range = p;
        *ret_len = rn;
        m0__http_trim(ret_range, ret_len);
        *ret_q = 1000;
        for (size_t i = rn; i < n;) {
                const char *par = p + i + 1;
                size_t pn = strcspn(par, ";");
                pn = pn < n - i - 1 ? pn : n - i - 1;
                i += pn + 1;
                m0__http_trim(&par, &pn);
                if (pn >= 2 && (par[0] == 'q' || par[0] == 'Q') && par[1] == '=')
                        *ret_q = qvalue(par + 2, pn - 2);
        }
        return *ret_len && *ret_q >= 0 ? 0 : -1;
}

static bool range_is(const char *r, size_t n, const char *lit)
{
        return strlen(lit) == n && strncasecmp(r, lit, n) == 0;
}

enum m0_metrics_format m0__metrics_negotiate(const char *accept)
{
        /* OpenMetrics' q where it is named; text/plain's where the most specific range that
         * covers it says (text/plain, then all text, then all types); -1: none. */
        int om = -1, text = -1, text_rank = 0;
        static const char *const covers_text[] = {"*/*", "text/*", "text/plain"};
        for (const char *p = accept; p && *p;) {
                size_t n = strcspn(p, ",");
                const char *r;
                size_t rn;
                int q;
                if (accept_element(p, n, &r, &rn, &q) == 0) {
                        if (range_is(r, rn, "application/openmetrics-text") && q > om)
                                om = q;
                        for (int k = 0; k < 3; k++)
                                if (range_is(r, rn, covers_text[k]) &&
                                    (k + 1 > text_rank || (k + 1 == text_rank && q > text))) {
                                        text_rank = k + 1;
                                        text = q;
                                }
                }
                p += n + (p[n] == ',');
        }
        return om > 0 && om >= text ? M0_METRICS_OPENMETRICS : M0_METRICS_TEXT_004;
}

/* ---- writing the text: one `struct out` per exposition; the first error sticks ---- */

struct out {
        struct m0_buf *b;
        bool om; /* OpenMetrics, else the 0.0.4 text format */
        int err;
};

static void put(struct out *o, const char *s)
{
        if (!o->err)
                o->err = m0__buf_append(o->b, s, strlen(s));
}

static void put_u64(struct out *o, uint64_t v)
{
        char d[24];
        snprintf(d, sizeof(d), "%llu", (unsigned long long)v);
        put(o, d);
}

/* Microseconds as seconds, exactly: "0.000123". */
static void put_seconds(struct out *o, uint64_t us)
{
        char d[32];
        snprintf(d, sizeof(d), "%llu.%06llu", (unsigned long long)(us / 1000000),
                 (unsigned long long)(us % 1000000));
        put(o, d);
}

int m0__metrics_label_value(struct m0_buf *out, const char *v)
{
        int r = 0;
        for (const char *p = v; *p && r == 0; p++) {
                const char *e = *p == '\\'   ? "\\\\"
                                : *p == '"'  ? "\\\""
                                : *p == '\n' ? "\\n"
                                             : NULL;
                r = e ? m0__buf_append(out, e, 2) : m0__buf_append(out, p, 1);
        }
        return r;
}

enum type { COUNTER, GAUGE, HISTOGRAM, INFO, STATESET };

/*
 * A family's HELP, TYPE (and UNIT) lines. OpenMetrics names a counter's family without its
 * `_total` and an info family without its `_info`, which its samples carry; the 0.0.4 format,
 * which knows neither info nor stateset, names the family as its samples and calls both a gauge
 * (D79). `name` is the family's OpenMetrics name.
 */
static void family(struct out *o, const char *name, enum type t, const char *unit, const char *help)
{
        static const char *const om_type[] = {"counter", "gauge", "histogram", "info", "stateset"};
        static const char *const old_type[] = {"counter", "gauge", "histogram", "gauge", "gauge"};
        const char *suffix = o->om ? "" : t == COUNTER ? "_total" : t == INFO ? "_info" : "";
        const char *lines[] = {"# HELP ", "# TYPE "};
        for (int i = 0; i < 2; i++) {
                put(o, lines[i]);
                put(o, name);
                put(o, suffix);
                put(o, " ");
                put(o, i == 0 ? help : o->om ? om_type[t] : old_type[t]);
                put(o, "\n");
        }
        if (o->om && unit) {
                put(o, "# UNIT ");
                put(o, name);
                put(o, " ");
                put(o, unit);
                put(o, "\n");
        }
}

/* One sample: name, suffix, labels (already formatted, without braces; "" for none), value. */
static void sample(struct out *o, const char *name, const char *suffix, const char *labels,
                   uint64_t v)
{
        put(o, name);
        put(o, suffix);
        if (*labels) {
                put(o, "{");
                put(o, labels);
                put(o, "}");
        }
        put(o, " ");
        put_u64(o, v);
        put(o, "\n");
}

/* ---- the families ---- */

/* A family of one unlabelled sample: a uint64_t at `off` in the struct the caller read. */
struct row {
        const char *name;
        enum type t;
        const char *help;
        size_t off;
};

static void rows(struct out *o, const struct row *r, size_t n, const void *base)
{
        for (size_t i = 0; i < n; i++) {
                family(o, r[i].name, r[i].t, NULL, r[i].help);
                sample(o, r[i].name, r[i].t == COUNTER ? "_total" : "", "",
                       *(const uint64_t *)(const void *)((const char *)base + r[i].off));
        }
}

/* Read one counter of each loop: `off` is its offset in struct m0_hctx. */
static uint64_t loop_counter(const struct m0_hctx *l, size_t off)
{
        return m0__counter_read((const m0_counter *)(const void *)((const char *)l + off));
}

#define LOOP_FIELD(f) offsetof(struct m0_hctx, f)

/* A counter or gauge family with one sample per loop, labelled by it. */
static void per_loop(struct out *o, const struct m0_serve *sv, const char *name, enum type t,
                     const char *unit, const char *help, size_t off)
{
        family(o, name, t, unit, help);
        for (int i = 0; i < sv->nloops; i++) {
                char lb[32];
                snprintf(lb, sizeof(lb), "loop=\"%d\"", i);
                sample(o, name, t == COUNTER ? "_total" : "", lb, loop_counter(&sv->loops[i], off));
        }
}

static void requests(struct out *o, const struct m0_serve *sv)
{
        family(o, "m0_requests", COUNTER, NULL,
               "Requests answered, by loop, method and status class; host refusals and streams "
               "included.");
        for (int i = 0; i < sv->nloops; i++)
                for (int m = 0; m < M0__METHOD_CLASSES; m++)
                        for (int s = 0; s < M0__STATUS_CLASSES; s++) {
                                char lb[80];
                                snprintf(lb, sizeof(lb), "loop=\"%d\",method=\"%s\",status=\"%s\"",
                                         i, method_label[m], status_label[s]);
                                sample(o, "m0_requests", "_total", lb,
                                       m0__counter_read(&sv->loops[i].stats.requests[m][s]));
                        }
}

/* A histogram summed over the loops: `off` is the struct m0_histogram's offset in a loop. */
static void histogram(struct out *o, const struct m0_serve *sv, const char *name, const char *help,
                      size_t off)
{
        uint64_t b[M0__BUCKETS + 1] = {0}, sum = 0;
        for (int i = 0; i < sv->nloops; i++) {
                const struct m0_histogram *hg = (const void *)((const char *)&sv->loops[i] + off);
                for (int k = 0; k <= M0__BUCKETS; k++)
                        b[k] += m0__counter_read(&hg->bucket[k]);
                sum += m0__counter_read(&hg->sum_us);
        }
        family(o, name, HISTOGRAM, "seconds", help);
        uint64_t cum = 0;
        for (int k = 0; k <= M0__BUCKETS; k++) {
                char lb[32];
                cum += b[k];
                snprintf(lb, sizeof(lb), "le=\"%s\"", k < M0__BUCKETS ? bucket_le[k] : "+Inf");
                sample(o, name, "_bucket", lb, cum);
        }
        sample(o, name, "_count", "", cum);
        put(o, name);
        put(o, "_sum ");
        put_seconds(o, sum);
        put(o, "\n");
}

static void process(struct out *o, const struct m0_serve *sv)
{
        family(o, "m0_build", INFO, NULL, "The app and the m0 version serving it.");
        struct m0_buf lb = {0};
        int r = m0__buf_append(&lb, "app=\"", 5);
        if (r == 0)
                r = m0__metrics_label_value(&lb, sv->app->name);
        if (r == 0)
                r = m0__buf_printf(&lb, "\",version=\"%s\"", m0_version());
        if (r == 0)
                r = m0__buf_append(&lb, "", 1);
        if (r < 0 && !o->err)
                o->err = r;
        sample(o, "m0_build", "_info", r == 0 ? lb.data : "", 1);
        m0__buf_free(&lb);
        family(o, "m0_loops", GAUGE, NULL, "Event loops serving.");
        sample(o, "m0_loops", "", "", (uint64_t)sv->nloops);
        family(o, "m0_draining", GAUGE, NULL, "1 once the drain (SIGTERM) began.");
        sample(o, "m0_draining", "", "", atomic_load(&sv->stopping) ? 1 : 0);
}

static void connections(struct out *o, const struct m0_serve *sv)
{
        per_loop(o, sv, "m0_connections", GAUGE, NULL, "Connections open.",
                 LOOP_FIELD(stats.conns_open));
        family(o, "m0_connections_accepted", COUNTER, NULL,
               "Connections this loop accepted, kept or handed over.");
        for (int i = 0; i < sv->nloops; i++) {
                char lb[32];
                snprintf(lb, sizeof(lb), "loop=\"%d\"", i);
                sample(o, "m0_connections_accepted", "_total", lb,
                       m0__counter_read(&sv->loops[i].accepted) +
                               m0__counter_read(&sv->loops[i].passed));
        }
        per_loop(o, sv, "m0_connections_passed", COUNTER, NULL,
                 "Connections this loop accepted and handed over to a less loaded loop.",
                 LOOP_FIELD(passed));
        per_loop(o, sv, "m0_connections_received", COUNTER, NULL,
                 "Connections handed over to this loop by another.", LOOP_FIELD(received));
        per_loop(o, sv, "m0_connections_refused", COUNTER, NULL,
                 "Connections closed at once, over the connection limit or with no fd left.",
                 LOOP_FIELD(refused_conns));
        per_loop(o, sv, "m0_received_bytes", COUNTER, "bytes", "Bytes read from connections.",
                 LOOP_FIELD(stats.bytes_in));
        per_loop(o, sv, "m0_sent_bytes", COUNTER, "bytes", "Bytes written to connections.",
                 LOOP_FIELD(stats.bytes_out));
        per_loop(o, sv, "m0_http2_requests", COUNTER, NULL,
                 "Requests HTTP/2 carried (of m0_requests_total; the others came over HTTP/1.1).",
                 LOOP_FIELD(stats.h2_requests));
        per_loop(o, sv, "m0_drain_connections_cut", COUNTER, NULL,
                 "Connections still open when the drain's bound passed, cut.", LOOP_FIELD(cut));
}

static void streams(struct out *o, const struct m0_serve *sv)
{
        per_loop(o, sv, "m0_streams", GAUGE, NULL, "Event streams open.",
                 LOOP_FIELD(stats.streams_open));
        static const struct {
                const char *reason;
                size_t off;
        } closed[] = {{"slow", LOOP_FIELD(streams_cut)},
                      {"channel_full", LOOP_FIELD(chan_closed)},
                      {"unread_at_stop", LOOP_FIELD(streams_unread)}};
        family(o, "m0_streams_closed", COUNTER, NULL,
               "Streams the host closed: a backlog past its bound, a full channel, frames "
               "unread at the stop.");
        for (int i = 0; i < sv->nloops; i++)
                for (size_t k = 0; k < sizeof(closed) / sizeof(closed[0]); k++) {
                        char lb[64];
                        snprintf(lb, sizeof(lb), "loop=\"%d\",reason=\"%s\"", i, closed[k].reason);
                        sample(o, "m0_streams_closed", "_total", lb,
                               loop_counter(&sv->loops[i], closed[k].off));
                }
}

/* WebSockets (WS1-WS4): open, messages each way, and how they ended, by close code. */
static void websockets(struct out *o, const struct m0_serve *sv)
{
        per_loop(o, sv, "m0_websockets", GAUGE, NULL, "WebSockets open.",
                 LOOP_FIELD(stats.ws_open));
        per_loop(o, sv, "m0_websocket_messages_received", COUNTER, NULL,
                 "WebSocket messages read whole from clients.", LOOP_FIELD(stats.ws_in));
        per_loop(o, sv, "m0_websocket_messages_sent", COUNTER, NULL,
                 "WebSocket messages queued to clients: the app's and the bus's events.",
                 LOOP_FIELD(stats.ws_out));
        family(o, "m0_websocket_closes", COUNTER, NULL,
               "WebSockets ended, by the close code that ended them (the client's or m0's; "
               "1006: the connection was lost without one).");
        for (int i = 0; i < sv->nloops; i++)
                for (unsigned k = 0; k < M0__WS_CODES; k++) {
                        char lb[64];
                        if (k < M0__WS_CODES - 1)
                                snprintf(lb, sizeof(lb), "loop=\"%d\",code=\"%u\"", i,
                                         (unsigned)m0__ws_codes[k]);
                        else
                                snprintf(lb, sizeof(lb), "loop=\"%d\",code=\"other\"", i);
                        sample(o, "m0_websocket_closes", "_total", lb,
                               m0__counter_read(&sv->loops[i].stats.ws_closed[k]));
                }
}

static void bus(struct out *o, const struct m0_serve *sv)
{
        struct m0_bus_stats bs = {0};
        m0__bus_stats(sv->bus, &bs);
        static const struct row counts[] = {
#define BUS_ROW(n, help, f) {n, COUNTER, help, offsetof(struct m0_bus_stats, f)}
                BUS_ROW("m0_bus_events_published", "Events published on the bus.", published),
                BUS_ROW("m0_bus_events_evicted",
                        "Events replay gave up for newer ones: past a channel's "
                        "M0_REPLAY_PER_CHANNEL, or M0_REPLAY_BYTES.",
                        evicted),
                BUS_ROW("m0_bus_events_transient",
                        "Transient events published: delivered, never kept.", transient),
                BUS_ROW("m0_bus_events_unfollowed",
                        "Events published to a channel no stream followed: delivered to none.",
                        unfollowed),
                BUS_ROW("m0_bus_channels_evicted",
                        "Channels replay gave up whole, the one published to longest ago first, "
                        "to stay within M0_REPLAY_BYTES.",
                        chans_evicted),
                BUS_ROW("m0_bus_events_past_bound",
                        "Events replay gave up of a channel alone past M0_REPLAY_BYTES (also in "
                        "m0_bus_events_evicted).",
                        past_bound),
                BUS_ROW("m0_bus_lease_waits", "Publishes that waited for the id lease (N3).",
                        lease_waits),
#undef BUS_ROW
        };
        rows(o, counts, sizeof(counts) / sizeof(counts[0]), &bs);
        per_loop(o, sv, "m0_bus_events_delivered", COUNTER, NULL,
                 "Event frames written to streams as they were published, one per stream.",
                 LOOP_FIELD(stats.delivered));
        per_loop(o, sv, "m0_bus_events_replayed", COUNTER, NULL,
                 "Event frames replayed to streams reconnecting with Last-Event-ID.",
                 LOOP_FIELD(stats.replayed));
        per_loop(o, sv, "m0_bus_events_dropped", COUNTER, NULL,
                 "Event frames a loop's full channel refused (its streams were closed).",
                 LOOP_FIELD(chan_refused));
}

static void pool(struct out *o, const struct m0_serve *sv)
{
        if (!sv->cfg->blocking_threads)
                return;
        per_loop(o, sv, "m0_pool_queued_jobs", GAUGE, NULL,
                 "Blocking requests waiting for a pool thread.", LOOP_FIELD(pool.depth));
        histogram(o, sv, "m0_pool_job_duration_seconds",
                  "Time a pool thread ran a blocking request's handler.", LOOP_FIELD(stats.job));
}

static void access_log(struct out *o, const struct m0_serve *sv)
{
        if (sv->cfg->access_log != M0_ACCESS_JOURNAL)
                return;
        per_loop(o, sv, "m0_access_log_entries", COUNTER, NULL, "Access log entries journald took.",
                 LOOP_FIELD(stats.journal_sent));
        per_loop(o, sv, "m0_access_log_dropped", COUNTER, NULL,
                 "Access log entries dropped: journald behind past the queue, or not there.",
                 LOOP_FIELD(stats.journal_dropped));
}

static void self(struct out *o, const struct m0_metrics_server *m)
{
        family(o, "m0_metrics_scrapes", COUNTER, NULL, "GET /metrics answered.");
        sample(o, "m0_metrics_scrapes", "_total", "", m0__counter_read(&m->scrapes));
        family(o, "m0_metrics_rejected", COUNTER, NULL,
               "Metrics connections refused: another request, a malformed or slow one, or past "
               "the connection limit.");
        sample(o, "m0_metrics_rejected", "_total", "", m0__counter_read(&m->rejected));
}

int m0__metrics_render_pgbus(struct m0_pgbus *pg, enum m0_metrics_format f, struct m0_buf *out)
{
        struct out o = {.b = out, .om = f == M0_METRICS_OPENMETRICS};
        char state[600];
        m0__pgbus_mod->state(pg, state, sizeof(state));
        struct m0_pgbus_stats st;
        m0__pgbus_mod->stats(pg, &st);
        static const char *const states[] = {"up", "connecting", "reconnecting", "refused"};
        family(&o, "m0_bus_database_state", STATESET, NULL,
               "The database bus's connection: up, connecting, reconnecting or refused.");
        for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
                char lb[64], want[32];
                snprintf(lb, sizeof(lb), "m0_bus_database_state=\"%s\"", states[i]);
                snprintf(want, sizeof(want), "bus: %s", states[i]);
                sample(&o, "m0_bus_database_state", "", lb,
                       strncmp(state, want, strlen(want)) == 0);
        }
        static const struct row pg_rows[] = {
#define ROW(n, t, help, f) {n, t, help, offsetof(struct m0_pgbus_stats, f)}
                ROW("m0_bus_database_queued_events", GAUGE, "Events waiting for the database.",
                    queued),
                ROW("m0_bus_database_events_published", COUNTER, "Events the database committed.",
                    published),
                ROW("m0_bus_database_events_refused", COUNTER,
                    "Publishes refused: the queue was full.", refused),
                ROW("m0_bus_database_events_delivered", COUNTER,
                    "Events read from the database and handed to the loops.", delivered),
                ROW("m0_bus_database_events_lost", COUNTER,
                    "Events deleted by retention before this host read them.", lost),
                ROW("m0_bus_database_reconnects", COUNTER, "Connection attempts after a failure.",
                    reconnects),
                ROW("m0_bus_database_last_event_id", GAUGE, "The last event id delivered.",
                    last_id),
#undef ROW
        };
        rows(&o, pg_rows, sizeof(pg_rows) / sizeof(pg_rows[0]), &st);
        return o.err;
}

static void tls_expiry(void *ud, const struct m0_tls_cert *c)
{
        struct out *o = ud;
        struct m0_buf lb = {0};
        int r = m0__buf_append(&lb, "file=\"", 6);
        if (r == 0)
                r = m0__metrics_label_value(&lb, c->file);
        if (r == 0)
                r = m0__buf_append(&lb, "\",server_name=\"", 15);
        if (r == 0)
                r = m0__metrics_label_value(&lb, c->name);
        if (r == 0)
                r = m0__buf_append(&lb, "\"", 2); /* the quote and the NUL */
        if (r < 0 && !o->err)
                o->err = r;
        if (r == 0)
                sample(o, "m0_tls_certificate_expiry_timestamp_seconds", "", lb.data,
                       c->not_after > 0 ? (uint64_t)c->not_after : 0);
        m0__buf_free(&lb);
}

/* TL7: the handshakes each loop completed, by version, resumed, and failed, by reason. */
static void tls_handshakes(struct out *o, const struct m0_serve *sv)
{
        static const char *const version[2] = {"TLSv1.2", "TLSv1.3"};
        static const struct {
                const char *reason;
                size_t off;
        } failed[] = {{"error", LOOP_FIELD(tls_failed)},
                      {"timeout", LOOP_FIELD(tls_timedout)},
                      {"busy", LOOP_FIELD(tls_refused)}};
        char lb[64];
        family(o, "m0_tls_handshakes", COUNTER, NULL,
               "TLS handshakes completed, by loop and protocol version.");
        for (int i = 0; i < sv->nloops; i++)
                for (int v = 0; v < 2; v++) {
                        snprintf(lb, sizeof(lb), "loop=\"%d\",version=\"%s\"", i, version[v]);
                        sample(o, "m0_tls_handshakes", "_total", lb,
                               m0__counter_read(&sv->loops[i].tls_done[v]));
                }
        per_loop(o, sv, "m0_tls_handshakes_resumed", COUNTER, NULL,
                 "TLS handshakes that resumed a session (a ticket, or the session cache).",
                 LOOP_FIELD(tls_resumed));
        family(o, "m0_tls_handshakes_failed", COUNTER, NULL,
               "TLS handshakes that did not complete: error (not TLS, a version or cipher "
               "refused, the peer gone), timeout (M0_TLS_HANDSHAKE_TIMEOUT_MS), busy "
               "(M0_TLS_MAX_HANDSHAKES in progress on the loop).");
        for (int i = 0; i < sv->nloops; i++)
                for (size_t k = 0; k < sizeof(failed) / sizeof(failed[0]); k++) {
                        snprintf(lb, sizeof(lb), "loop=\"%d\",reason=\"%s\"", i, failed[k].reason);
                        sample(o, "m0_tls_handshakes_failed", "_total", lb,
                               loop_counter(&sv->loops[i], failed[k].off));
                }
}

/* TL3: when each certificate expires, for an alert ahead of M0_TLS_WARN_DAYS. */
static void tls(struct out *o, const struct m0_serve *sv)
{
        if (!sv->tls)
                return;
        family(o, "m0_tls_certificate_expiry_timestamp_seconds", GAUGE, "seconds",
               "When each TLS certificate expires (notAfter), in seconds since the epoch; "
               "server_name is "
               "the server name it is chosen for, empty for the default.");
        m0__tls_each_cert(sv->tls, tls_expiry, o);
        tls_handshakes(o, sv);
}

int m0__metrics_render(const struct m0_metrics_server *m, enum m0_metrics_format f,
                       struct m0_buf *out)
{
        const struct m0_serve *sv = m->serve;
        struct out o = {.b = out, .om = f == M0_METRICS_OPENMETRICS};
        process(&o, sv);
        requests(&o, sv);
        histogram(&o, sv, "m0_request_duration_seconds",
                  "Time from the read that brought a request's first byte to its answer queued.",
                  LOOP_FIELD(stats.duration));
        connections(&o, sv);
        streams(&o, sv);
        websockets(&o, sv);
        bus(&o, sv);
        pool(&o, sv);
        access_log(&o, sv);
        tls(&o, sv);
        self(&o, m);
        struct m0_pgbus *pg = m->shared ? m->shared->pgbus : NULL;
        if (!o.err && pg)
                o.err = m0__metrics_render_pgbus(pg, f, out);
        if (o.om)
                put(&o, "# EOF\n");
        return o.err;
}
