/* SPDX-License-Identifier: MIT */
/* metrics.h: metrics.c and server.c, what operators watch (O1): the counters each loop
 * keeps, their exposition in the Prometheus or the OpenMetrics text format, and the thread that answers
 * GET /metrics on a socket of its own (D79, D80). */
#ifndef M0_METRICS_H
#define M0_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "loop.h"
#include "thread.h"

struct m0_buf;
struct m0_hctx;
struct m0_pgbus;
struct m0_serve;
struct m0_shared;

/*
 * A counter (or a gauge) with one writer: the thread that owns it adds with a relaxed load and
 * store, a plain `add` on the memory with no locked instruction, and any thread reads it with a
 * relaxed load (D80). Two writers would lose counts: each counter names its one writer.
 */
typedef atomic_uint_fast64_t m0_counter;

static inline void m0__count(m0_counter *c, uint64_t n)
{
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                              memory_order_relaxed);
}

/* A gauge of one writer going down: the writer's own value never goes below what it added. */
static inline void m0__uncount(m0_counter *c, uint64_t n)
{
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) - n,
                              memory_order_relaxed);
}

static inline uint64_t m0__counter_read(const m0_counter *c)
{
        return atomic_load_explicit((m0_counter *)c, memory_order_relaxed);
}

/* Monotonic nanoseconds, the clock requests are timed with (D80). */
static inline uint64_t m0__now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Method classes of m0_requests_total (D80): the methods RFC 9110 and RFC 5789 define that an
 * app routes, and `other` for every other token, so a client cannot add series. */
enum m0_method_class {
        M0_METHOD_GET = 0,
        M0_METHOD_HEAD,
        M0_METHOD_POST,
        M0_METHOD_PUT,
        M0_METHOD_PATCH,
        M0_METHOD_DELETE,
        M0_METHOD_OPTIONS,
        M0_METHOD_OTHER,
        M0__METHOD_CLASSES,
};

/* Status classes: 2xx to 5xx (a final status is 200–599, m0_res_status()). */
#define M0__STATUS_CLASSES 4

/* Upper bounds of the duration histograms' buckets in microseconds, +Inf after the last (D80). */
#define M0__BUCKETS 18
extern const uint32_t m0__bucket_us[M0__BUCKETS];

/* The class of method token [m, m + n). */
enum m0_method_class m0__method_class(const char *m, size_t n);

static inline unsigned m0__status_class(int status)
{
        int c = status / 100 - 2;
        return c < 0 ? 0 : c > 3 ? 3 : (unsigned)c;
}

/* The bucket of a duration: the first whose bound is at or above it, M0__BUCKETS for +Inf. */
static inline unsigned m0__bucket_of(uint64_t us)
{
        unsigned i = 0;
        while (i < M0__BUCKETS && us > m0__bucket_us[i])
                i++;
        return i;
}

/* A histogram of durations, per bucket (not cumulative) and their sum, one writer. */
struct m0_histogram {
        m0_counter bucket[M0__BUCKETS + 1];
        m0_counter sum_us;
};

static inline void m0__histogram_note(struct m0_histogram *h, uint64_t us)
{
        m0__count(&h->bucket[m0__bucket_of(us)], 1);
        m0__count(&h->sum_us, us);
}

/*
 * What one loop counts for the metrics, beyond the counters struct m0_hctx always kept: written
 * by the loop's own thread only, and only while the metrics are on (a metrics socket or
 * M0_METRICS), read by the metrics thread at each scrape.
 */
/* The close codes the metrics name (WS1-WS4); any other is counted as "other". */
#define M0__WS_CODES 9
static const uint16_t m0__ws_codes[M0__WS_CODES - 1] = {1000, 1001, 1002, 1006,
                                                        1007, 1008, 1009, 1011};
static inline unsigned m0__ws_code_index(unsigned code)
{
        for (unsigned i = 0; i < M0__WS_CODES - 1; i++)
                if (m0__ws_codes[i] == code)
                        return i;
        return M0__WS_CODES - 1;
}

struct m0_loop_stats {
        m0_counter requests[M0__METHOD_CLASSES][M0__STATUS_CLASSES];
        struct m0_histogram duration;   /* from the read that brought a request's first byte */
        m0_counter bytes_in, bytes_out; /* what read() and send() moved, every connection */
        m0_counter conns_open;          /* a gauge */
        m0_counter streams_open;        /* a gauge */
        m0_counter delivered, replayed; /* event frames written to streams: live, replayed */
        m0_counter ws_open;             /* a gauge: open WebSockets */
        m0_counter ws_in, ws_out;       /* WebSocket messages read whole, and queued to send */
        m0_counter
                ws_closed[M0__WS_CODES]; /* WebSockets ended, by close code (m0__ws_code_index) */
        struct m0_histogram job;         /* pool jobs' run time on their pool thread */
        m0_counter journal_sent, journal_dropped; /* access log entries (M0_ACCESS_LOG=journal) */
        m0_counter h2_requests;                   /* of `requests`, those HTTP/2 carried (HT1) */
};

/* ---- metrics.c: the exposition ---- */

enum m0_metrics_format {
        M0_METRICS_OPENMETRICS = 0, /* application/openmetrics-text; version=1.0.0, when asked */
        M0_METRICS_TEXT_004,        /* text/plain; version=0.0.4: the default (AP4) */
};

/* The content type of each format. */
const char *m0__metrics_content_type(enum m0_metrics_format f);
/* Which format an Accept value asks for (NULL: none sent): OpenMetrics when it names
 * application/openmetrics-text with a q above 0 and at or above what it gives text/plain (by the
 * most specific range covering text/plain), else the 0.0.4 text format, as Prometheus's
 * client libraries answer (AP4, D116). An element whose q is not a qvalue is ignored. */
enum m0_metrics_format m0__metrics_negotiate(const char *accept);
struct m0_metrics_server;
/*
 * Append the whole exposition of what `m` was handed (its `serve` and `shared`) to `out`: every
 * family, each loop's counters summed where the family has no loop label. Reads other threads'
 * counters with relaxed loads only; takes no lock a loop takes. 0 or -ENOMEM. The metrics thread
 * (or a test).
 */
int m0__metrics_render(const struct m0_metrics_server *m, enum m0_metrics_format f,
                       struct m0_buf *out);
/* The database bus's families (G) for `pg`, which is running: its state and counters. */
int m0__metrics_render_pgbus(struct m0_pgbus *pg, enum m0_metrics_format f, struct m0_buf *out);
/* A label value escaped as OpenMetrics wants it: backslash, double quote and line feed. */
int m0__metrics_label_value(struct m0_buf *out, const char *v);

/* ---- server.c: the thread answering GET /metrics ---- */

struct m0_header;
struct m0_mconn;
struct m0_mlisten;

/* The metrics thread's own state; the host holds one, unused when no listener is set up. Its
 * listeners are the host's (struct m0_sockets' `metrics`), which outlive it. It serves on an
 * event loop of evloop/'s (D211): the listeners and connections are its descriptors, each
 * connection's deadline its timer, the stop a message. */
struct m0_metrics_server {
        /* What it reads, handed by the host before it starts (LY4, D240): the loops, the app,
         * the configuration, the sockets, the bus and TLS; the database bus's state. */
        const struct m0_serve *serve;
        const struct m0_shared *shared;
        struct m0_loop loop;
        bool built;   /* `loop` was prepared: m0__metrics_stop() destroys it */
        bool stopped; /* the stop's message was handled (the metrics thread's) */
        struct m0_thread thread;
        struct m0_mlisten *listens; /* one per metrics listener */
        struct m0_mconn *conns;     /* metrics_max_connections slots */
        struct m0_header *fields;   /* a head's fields, max_header_fields (the thread's) */
        size_t nconns;
        m0_counter scrapes;  /* GET /metrics answered 200; the metrics thread writes */
        m0_counter rejected; /* anything else answered, cut at the deadline, or shed at the limit */
};

/* Start the metrics thread on the host's metrics listeners (none: nothing to do). 0 or -errno.
 * The coordinator, once every loop is built. */
int m0__metrics_start(struct m0_metrics_server *m);
/* Stop and join the metrics thread (bounded by a second) and free what it holds. Safe when it
 * never started. The coordinator, after the loops are joined. */
void m0__metrics_stop(struct m0_metrics_server *m);

#endif /* M0_METRICS_H */
