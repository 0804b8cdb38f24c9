/* SPDX-License-Identifier: MIT */
/* test-metrics.c: the exposition (SPEC O1): method and status classes, buckets, label escaping,
 * the format asked for, every loop's counters summed or labelled exactly, and the database
 * bus's state while one runs. */
#include <errno.h>

#include "bus.h"
#include "host-private.h"
#include "metrics.h"
#include "load.h"
#include "unit.h"

START_TEST(classes_and_buckets)
{
        ck_assert_int_eq(m0__method_class("GET", 3), M0_METHOD_GET);
        ck_assert_int_eq(m0__method_class("HEAD", 4), M0_METHOD_HEAD);
        ck_assert_int_eq(m0__method_class("OPTIONS", 7), M0_METHOD_OPTIONS);
        ck_assert_int_eq(m0__method_class("PATCH", 5), M0_METHOD_PATCH);
        ck_assert_int_eq(m0__method_class("GETX", 4), M0_METHOD_OTHER);
        ck_assert_int_eq(m0__method_class("GET", 2), M0_METHOD_OTHER); /* "GE" */
        ck_assert_int_eq(m0__method_class("get", 3), M0_METHOD_OTHER); /* methods are case-exact */
        ck_assert_int_eq(m0__method_class("", 0), M0_METHOD_OTHER);
        ck_assert_uint_eq(m0__status_class(200), 0);
        ck_assert_uint_eq(m0__status_class(299), 0);
        ck_assert_uint_eq(m0__status_class(308), 1);
        ck_assert_uint_eq(m0__status_class(431), 2);
        ck_assert_uint_eq(m0__status_class(599), 3);
        ck_assert_uint_eq(m0__status_class(100), 0);
        ck_assert_uint_eq(m0__status_class(700), 3);
        ck_assert_uint_eq(m0__bucket_of(0), 0);
        ck_assert_uint_eq(m0__bucket_of(25), 0);
        ck_assert_uint_eq(m0__bucket_of(26), 1);
        ck_assert_uint_eq(m0__bucket_of(60000), 11); /* (50 ms, 100 ms] */
        ck_assert_uint_eq(m0__bucket_of(10000000), M0__BUCKETS - 1);
        ck_assert_uint_eq(m0__bucket_of(10000001), M0__BUCKETS); /* +Inf */
        for (int i = 1; i < M0__BUCKETS; i++)
                ck_assert_uint_lt(m0__bucket_us[i - 1], m0__bucket_us[i]);
}
END_TEST

START_TEST(label_escaping_and_content_types)
{
        struct m0_buf b = {0};
        ck_assert_int_eq(m0__metrics_label_value(&b, "a\"b\\c\nd"), 0);
        ck_assert_bytes(b.data, b.len, "a\\\"b\\\\c\\nd", 10);
        m0__buf_free(&b);
}
END_TEST

/* AP4: the 0.0.4 text format unless OpenMetrics is named, with a q above 0 and at or above what
 * the Accept gives text/plain (its most specific range: text/plain, all text, all types). */
START_TEST(negotiation)
{
        static const struct {
                const char *accept;
                enum m0_metrics_format want;
        } cases[] = {
                {NULL, M0_METRICS_TEXT_004},
                {"", M0_METRICS_TEXT_004},
                {"*/*", M0_METRICS_TEXT_004}, /* curl's */
                {"text/plain", M0_METRICS_TEXT_004},
                {"TEXT/Plain; version=0.0.4", M0_METRICS_TEXT_004},
                {"application/json", M0_METRICS_TEXT_004},
                {"application/*", M0_METRICS_TEXT_004}, /* OpenMetrics is named, or not asked */
                {"application/openmetrics-text", M0_METRICS_OPENMETRICS},
                {" Application/OpenMetrics-Text ;version=1.0.0 ", M0_METRICS_OPENMETRICS},
                /* Prometheus 2's */
                {"application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                 "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
                 M0_METRICS_OPENMETRICS},
                /* Prometheus 3's, protobuf first */
                {"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
                 "encoding=delimited;q=0.5,application/openmetrics-text;version=1.0.0;q=0.4,"
                 "text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
                 M0_METRICS_OPENMETRICS},
                {"application/openmetrics-text;q=0,text/plain", M0_METRICS_TEXT_004},
                {"application/openmetrics-text;q=0", M0_METRICS_TEXT_004},
                {"application/openmetrics-text;q=0.5,text/plain", M0_METRICS_TEXT_004},
                {"text/plain;q=0.5,application/openmetrics-text", M0_METRICS_OPENMETRICS},
                {"application/openmetrics-text,text/plain", M0_METRICS_OPENMETRICS}, /* a tie */
                {"text/plain, application/openmetrics-text", M0_METRICS_OPENMETRICS},
                {"application/openmetrics-text;q=0.5, */*", M0_METRICS_TEXT_004},
                /* the most specific range says text/plain's q, not the highest */
                {"application/openmetrics-text;q=0.5, text/plain;q=0.2, */*",
                 M0_METRICS_OPENMETRICS},
                {"application/openmetrics-text;q=0.5, text/plain;q=0.8, text/*;q=0.1",
                 M0_METRICS_TEXT_004},
                {"application/openmetrics-text;q=0.001", M0_METRICS_OPENMETRICS},
                {"application/openmetrics-text;Q=1.000", M0_METRICS_OPENMETRICS},
                /* an element whose q is no qvalue is dropped */
                {"application/openmetrics-text;q=2", M0_METRICS_TEXT_004},
                {"application/openmetrics-text;q=1.5", M0_METRICS_TEXT_004},
                {"application/openmetrics-text;q=0.0001", M0_METRICS_TEXT_004},
                {"application/openmetrics-text;q=.5", M0_METRICS_TEXT_004},
                {"application/openmetrics-text;q=", M0_METRICS_TEXT_004},
                {"application/openmetrics-text;q=0.5,text/plain;q=x", M0_METRICS_OPENMETRICS},
                {",,application/openmetrics-text,", M0_METRICS_OPENMETRICS},
                {"application/openmetrics-textx", M0_METRICS_TEXT_004},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                ck_assert_msg(m0__metrics_negotiate(cases[i].accept) == cases[i].want, "Accept: %s",
                              cases[i].accept ? cases[i].accept : "(none)");
        ck_assert_str_eq(m0__metrics_content_type(M0_METRICS_OPENMETRICS),
                         "application/openmetrics-text; version=1.0.0; charset=utf-8");
        ck_assert_str_eq(m0__metrics_content_type(M0_METRICS_TEXT_004),
                         "text/plain; version=0.0.4; charset=utf-8");
}
END_TEST

static struct m0_host *host;
static m0_app app = {.name = "we\"ird"};

/* Two loops as m0__hctx_init() makes them, the bus, no listener: what the exposition reads. */
static void setup(void)
{
        host = calloc(1, sizeof(*host));
        ck_assert_ptr_nonnull(host);
        host->app = &app;
        host->cfg.max_header_fields = 4;
        host->cfg.access_log_queue = 8;
        host->serve.nloops = 2;
        host->serve.loops = calloc(2, sizeof(*host->serve.loops));
        ck_assert_ptr_nonnull(host->serve.loops);
        m0__host_link(host);
        for (int i = 0; i < 2; i++)
                ck_assert_int_eq(m0__hctx_init(&host->serve.loops[i], &host->serve, i), 0);
        ck_assert_int_eq(m0__bus_init(&host->bus, 2, 4, 4, 65536), 0);
}

static void teardown(void)
{
        for (int i = 0; i < host->serve.nloops; i++)
                m0__hctx_destroy(&host->serve.loops[i]);
        m0__bus_destroy(&host->bus);
        free(host->serve.loops);
        free(host);
}

static char *render(enum m0_metrics_format f)
{
        struct m0_buf b = {0};
        ck_assert_int_eq(m0__metrics_render(&host->metrics, f, &b), 0);
        ck_assert_int_eq(m0__buf_append(&b, "", 1), 0);
        return b.data;
}

#define HAS(text, line) ck_assert_msg(strstr(text, "\n" line "\n"), "no line '%s'", line)

START_TEST(every_loop_counted)
{
        struct m0_hctx *l0 = &host->serve.loops[0], *l1 = &host->serve.loops[1];
        m0__count(&l1->stats.requests[M0_METHOD_POST][3], 7);
        m0__count(&l0->stats.requests[M0_METHOD_GET][0], 2);
        m0__histogram_note(&l0->stats.duration, 20);
        m0__histogram_note(&l1->stats.duration, 30);
        m0__histogram_note(&l1->stats.duration, 20000000);
        m0__count(&l0->accepted, 3);
        m0__count(&l0->passed, 4);
        m0__count(&l1->received, 4);
        m0__count(&l1->stats.bytes_in, 1234);
        m0__count(&l0->chan_closed, 5);
        /* five kept events on a channel that keeps four: the first is pushed out (N4) */
        for (int64_t id = 1; id <= 5; id++)
                ck_assert_int_eq(m0__bus_publish(&host->bus, "c", "e", "d", 0), id);
        ck_assert_int_eq(m0__bus_publish(&host->bus, "c", "e", "d", M0_PUBLISH_TRANSIENT), 0);
        char *om = render(M0_METRICS_OPENMETRICS);
        HAS(om, "# TYPE m0_requests counter");
        HAS(om, "m0_requests_total{loop=\"1\",method=\"POST\",status=\"5xx\"} 7");
        HAS(om, "m0_requests_total{loop=\"0\",method=\"GET\",status=\"2xx\"} 2");
        HAS(om, "m0_requests_total{loop=\"1\",method=\"GET\",status=\"2xx\"} 0");
        HAS(om, "# UNIT m0_request_duration_seconds seconds");
        HAS(om, "m0_request_duration_seconds_bucket{le=\"0.000025\"} 1");
        HAS(om, "m0_request_duration_seconds_bucket{le=\"0.00005\"} 2");
        HAS(om, "m0_request_duration_seconds_bucket{le=\"10\"} 2");
        HAS(om, "m0_request_duration_seconds_bucket{le=\"+Inf\"} 3");
        HAS(om, "m0_request_duration_seconds_count 3");
        HAS(om, "m0_request_duration_seconds_sum 20.000050");
        HAS(om, "m0_connections_accepted_total{loop=\"0\"} 7");
        HAS(om, "m0_connections_passed_total{loop=\"0\"} 4");
        HAS(om, "m0_connections_received_total{loop=\"1\"} 4");
        HAS(om, "m0_received_bytes_total{loop=\"1\"} 1234");
        HAS(om, "m0_streams_closed_total{loop=\"0\",reason=\"channel_full\"} 5");
        HAS(om, "m0_bus_events_published_total 5");
        HAS(om, "m0_bus_events_evicted_total 1");
        /* every one of them on a channel no loop follows, the last one transient */
        HAS(om, "# TYPE m0_bus_events_transient counter");
        HAS(om, "m0_bus_events_transient_total 1");
        HAS(om, "m0_bus_events_unfollowed_total 6");
        HAS(om, "m0_bus_channels_evicted_total 0");
        HAS(om, "m0_bus_events_past_bound_total 0");
        HAS(om, "m0_bus_lease_waits_total 0");
        HAS(om, "m0_build_info{app=\"we\\\"ird\",version=\"" PACKAGE_VERSION "\"} 1");
        ck_assert_ptr_null(strstr(om, "m0_pool_")); /* no pool, no pool families */
        ck_assert_ptr_null(strstr(om, "m0_access_log_"));
        ck_assert_ptr_null(strstr(om, "m0_bus_database_"));
        size_t n = strlen(om);
        ck_assert_str_eq(om + n - 7, "\n# EOF\n");
        free(om);

        char *old = render(M0_METRICS_TEXT_004);
        HAS(old, "# TYPE m0_requests_total counter");
        HAS(old, "# TYPE m0_build_info gauge");
        HAS(old, "m0_requests_total{loop=\"1\",method=\"POST\",status=\"5xx\"} 7");
        ck_assert_ptr_null(strstr(old, "# EOF"));
        ck_assert_ptr_null(strstr(old, "# UNIT"));
        free(old);
}
END_TEST

/* G, O1: while a database bus runs, its state is one of the four, as a stateset. Here it can
 * reach no database: connecting, or reconnecting already. The bus is the build's module, loaded
 * as a host loads it (D210). */
START_TEST(database_bus_state)
{
        char why[700];
        ck_assert_int_eq(setenv("M0_BUS_PG_MODULE", M0_TEST_PGBUS_MODULE, 1), 0);
        ck_assert_msg(m0__pgbus_load(why, sizeof(why)) == 0, "%s", why);
        const struct m0_pgbus_module *pg = m0__pgbus_mod;
        struct m0_pgbus_options o = {.uri = "postgresql:///m0?host=/nonexistent-m0-unit",
                                     .name = "unit",
                                     .queue_max = 4,
                                     .deliver = (m0_pgbus_deliver_fn)abort};
        struct m0_pgbus *b = NULL;
        char err[256];
        ck_assert_int_eq(pg->create(&b, &o, err, sizeof(err)), 0);
        ck_assert_int_eq(pg->publish(b, "c", "e", "d"), 0);
        host->shared.pgbus = b;
        char *om = render(M0_METRICS_OPENMETRICS);
        HAS(om, "# TYPE m0_bus_database_state stateset");
        HAS(om, "m0_bus_database_state{m0_bus_database_state=\"up\"} 0");
        HAS(om, "m0_bus_database_state{m0_bus_database_state=\"refused\"} 0");
        bool connecting =
                strstr(om, "\nm0_bus_database_state{m0_bus_database_state=\"connecting\"} "
                           "1\n") != NULL;
        bool reconnecting = strstr(om, "\nm0_bus_database_state{m0_bus_database_state="
                                       "\"reconnecting\"} 1\n") != NULL;
        ck_assert_msg(connecting != reconnecting, "one state of two: %s", om);
        HAS(om, "m0_bus_database_queued_events 1");
        HAS(om, "m0_bus_database_events_published_total 0");
        ck_assert_str_eq(om + strlen(om) - 7, "\n# EOF\n");
        free(om);
        host->shared.pgbus = NULL;
        pg->free(b);
}
END_TEST

static Suite *metrics_suite(void)
{
        Suite *s = suite_create("metrics");
        TCase *tc = tcase_create("metrics");
        tcase_add_test(tc, classes_and_buckets);
        tcase_add_test(tc, label_escaping_and_content_types);
        tcase_add_test(tc, negotiation);
        suite_add_tcase(s, tc);
        TCase *th = tcase_create("host");
        tcase_add_checked_fixture(th, setup, teardown);
        tcase_add_test(th, every_loop_counted);
        tcase_add_test(th, database_bus_state);
        suite_add_tcase(s, th);
        return s;
}

int main(void)
{
        return unit_run(metrics_suite());
}
