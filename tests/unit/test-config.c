/* SPDX-License-Identifier: MIT */
/* test-config.c: flags over M0_* variables over defaults, usage errors and refusals (SPEC C1–C4). */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "util.h"
#include "unit.h"

/* The host's knobs (SPEC C2, H2, R2, X2), in --help order: flag, variable, default as --help
 * prints it. Knobs added later are checked generically by help_lists_every_knob and
 * each_visits_every_knob. */
static const struct {
        const char *flag, *env, *def;
} knobs[] = {
        {"host", "M0_HOST", "127.0.0.1"},
        {"port", "M0_PORT", "8080"},
        {"threads", "M0_THREADS", "1"},
        {"blocking-threads", "M0_BLOCKING_THREADS", "0"},
        {"workers", "M0_WORKERS", "1"},
        {"max-keepalive-requests", "M0_MAX_KEEPALIVE_REQUESTS", "1000"},
        {"sse-heartbeat-ms", "M0_SSE_HEARTBEAT_MS", "15000"},
        {"app-tick-ms", "M0_APP_TICK_MS", "0"},
        {"access-log", "M0_ACCESS_LOG", "off"},
        {"accept-share", "M0_ACCEPT_SHARE", "on"},
        {"drain-timeout-ms", "M0_DRAIN_TIMEOUT_MS", "5000"},
        {"drain-idle-ms", "M0_DRAIN_IDLE_MS", "100"},
        {"max-head-bytes", "M0_MAX_HEAD_BYTES", "32768"},
        {"max-uri-bytes", "M0_MAX_URI_BYTES", "8192"},
        {"max-header-fields", "M0_MAX_HEADER_FIELDS", "100"},
        {"max-body-bytes", "M0_MAX_BODY_BYTES", "4194304"},
        {"header-timeout-ms", "M0_HEADER_TIMEOUT_MS", "10000"},
        {"body-timeout-ms", "M0_BODY_TIMEOUT_MS", "30000"},
        {"idle-timeout-ms", "M0_IDLE_TIMEOUT_MS", "60000"},
        {"max-connections", "M0_MAX_CONNECTIONS", "10000"},
        {"max-output-bytes", "M0_MAX_OUTPUT_BYTES", "1048576"},
        {"linger-ms", "M0_LINGER_MS", "2000"},
        {"metrics", "M0_METRICS", "off"},
        {"metrics-max-connections", "M0_METRICS_MAX_CONNECTIONS", "8"},
        {"metrics-timeout-ms", "M0_METRICS_TIMEOUT_MS", "5000"},
        {"access-log-queue", "M0_ACCESS_LOG_QUEUE", "4096"},
        {"compress-min-bytes", "M0_COMPRESS_MIN_BYTES", "1024"},
        {"compress-zstd-level", "M0_COMPRESS_ZSTD_LEVEL", "3"},
        {"compress-brotli-level", "M0_COMPRESS_BROTLI_LEVEL", "5"},
        {"compress-gzip-level", "M0_COMPRESS_GZIP_LEVEL", "6"},
        {"files-turn-cache", "M0_FILES_TURN_CACHE", "64"},
};
#define NKNOBS (sizeof(knobs) / sizeof(knobs[0]))

static struct m0_config cfg;
static char err[512];

/* argv and envp are NULL-terminated; argv[0] is added here. */
static enum m0_config_result parse_out(char **args, char **env, FILE *out)
{
        char *argv[32] = {"app"};
        int argc = 1;
        for (char **a = args; a && *a; a++)
                argv[argc++] = *a;
        argv[argc] = NULL;
        char *empty_env[] = {NULL};
        memset(err, 0, sizeof(err));
        return m0__config_parse(&cfg, "app", argc, argv, env ? env : empty_env, out, err,
                                sizeof(err));
}

static enum m0_config_result parse(char **args, char **env)
{
        return parse_out(args, env, NULL);
}

#define ARGS(...) ((char *[]){__VA_ARGS__, NULL})
#define ENV(...) ((char *[]){__VA_ARGS__, NULL})

START_TEST(defaults)
{
        ck_assert_int_eq(parse(NULL, NULL), M0_CONFIG_SERVE);
        ck_assert_str_eq(cfg.host, "127.0.0.1");
        ck_assert_uint_eq(cfg.port, 8080);
        ck_assert_uint_eq(cfg.threads, 1);
        ck_assert(!cfg.threads_auto);
        ck_assert_uint_eq(cfg.blocking_threads, 0);
        ck_assert_uint_eq(cfg.workers, 1);
        ck_assert_uint_eq(cfg.max_keepalive_requests, 1000);
        ck_assert_uint_eq(cfg.sse_heartbeat_ms, 15000);
        ck_assert_uint_eq(cfg.app_tick_ms, 0);
        ck_assert(!cfg.access_log);
        ck_assert(cfg.accept_share);
        ck_assert_uint_eq(cfg.drain_timeout_ms, 5000);
        ck_assert_uint_eq(cfg.drain_idle_ms, 100);
        ck_assert_uint_eq(cfg.max_head_bytes, 32768);
        ck_assert_uint_eq(cfg.max_uri_bytes, 8192);
        ck_assert_uint_eq(cfg.max_header_fields, 100);
        ck_assert_uint_eq(cfg.max_body_bytes, 4194304);
        ck_assert_uint_eq(cfg.header_timeout_ms, 10000);
        ck_assert_uint_eq(cfg.body_timeout_ms, 30000);
        ck_assert_uint_eq(cfg.idle_timeout_ms, 60000);
        ck_assert_uint_eq(cfg.max_connections, 10000);
        ck_assert_uint_eq(cfg.max_output_bytes, 1048576);
        ck_assert_uint_eq(cfg.linger_ms, 2000);
        ck_assert_uint_eq(cfg.channel_frames, 4096);
        ck_assert_uint_eq(cfg.slice_requests, 256);
        ck_assert_uint_eq(cfg.turn_budget_ms, 10);
        ck_assert(!cfg.doctor);
        for (size_t i = 0; i < NKNOBS; i++)
                ck_assert_int_eq(m0__config_source(&cfg, knobs[i].flag), M0_SRC_DEFAULT);
        ck_assert_str_eq(err, "");
}
END_TEST

START_TEST(flag_beats_env_beats_default)
{
        ck_assert_int_eq(parse(ARGS("--threads", "3"), ENV("M0_THREADS=2")), M0_CONFIG_SERVE);
        ck_assert_uint_eq(cfg.threads, 3);
        ck_assert_int_eq(m0__config_source(&cfg, "threads"), M0_SRC_FLAG);
        ck_assert_str_eq(m0__source_name(m0__config_source(&cfg, "threads")), "flag");

        ck_assert_int_eq(parse(NULL, ENV("M0_THREADS=2")), M0_CONFIG_SERVE);
        ck_assert_uint_eq(cfg.threads, 2);
        ck_assert_int_eq(m0__config_source(&cfg, "threads"), M0_SRC_ENV);
        ck_assert_str_eq(m0__source_name(m0__config_source(&cfg, "threads")), "env");

        ck_assert_int_eq(parse(NULL, ENV("M0_PORT=9000")), M0_CONFIG_SERVE);
        ck_assert_uint_eq(cfg.threads, 1);
        ck_assert_int_eq(m0__config_source(&cfg, "threads"), M0_SRC_DEFAULT);
        ck_assert_str_eq(m0__source_name(m0__config_source(&cfg, "threads")), "default");
        ck_assert_uint_eq(cfg.port, 9000);
        ck_assert_int_eq(m0__config_source(&cfg, "port"), M0_SRC_ENV);

        /* the order on the command line and in the environment does not matter */
        ck_assert_int_eq(parse(ARGS("--port=81"), ENV("M0_PORT=82", "M0_HOST=::1")),
                         M0_CONFIG_SERVE);
        ck_assert_uint_eq(cfg.port, 81);
        ck_assert_str_eq(cfg.host, "::1");
        ck_assert_int_eq(m0__config_source(&cfg, "port"), M0_SRC_FLAG);
        ck_assert_int_eq(m0__config_source(&cfg, "host"), M0_SRC_ENV);
        ck_assert_int_eq(m0__config_source(&cfg, "nonexistent"), M0_SRC_DEFAULT);
}
END_TEST

START_TEST(flag_forms)
{
        ck_assert_int_eq(parse(ARGS("--port", "1234"), NULL), M0_CONFIG_SERVE);
        ck_assert_uint_eq(cfg.port, 1234);
        ck_assert_int_eq(parse(ARGS("--port=1234"), NULL), M0_CONFIG_SERVE);
        ck_assert_uint_eq(cfg.port, 1234);
        ck_assert_int_eq(parse(ARGS("--host=a=b"), NULL), M0_CONFIG_SERVE);
        ck_assert_str_eq(cfg.host, "a=b"); /* only the first '=' splits */

        ck_assert_int_eq(parse(ARGS("--access-log", "on", "--accept-share=off",
                                    "--max-body-bytes=1099511627776", "--blocking-threads", "4",
                                    "--linger-ms", "0", "--doctor"),
                               NULL),
                         M0_CONFIG_SERVE);
        ck_assert_uint_eq(cfg.access_log, M0_ACCESS_LINE);
        ck_assert(!cfg.accept_share);
        ck_assert_uint_eq(cfg.max_body_bytes, UINT64_C(1) << 40);
        ck_assert_uint_eq(cfg.blocking_threads, 4);
        ck_assert_uint_eq(cfg.linger_ms, 0);
        ck_assert(cfg.doctor);

        /* every spelling of a boolean */
        const char *yes[] = {"1", "on", "yes", "true"}, *no[] = {"0", "off", "no", "false"};
        for (size_t i = 0; i < 4; i++) {
                char a[64], b[64];
                snprintf(a, sizeof(a), "--access-log=%s", yes[i]);
                snprintf(b, sizeof(b), "M0_ACCEPT_SHARE=%s", no[i]);
                ck_assert_int_eq(parse(ARGS(a), ENV(b)), M0_CONFIG_SERVE);
                ck_assert_uint_eq(cfg.access_log, M0_ACCESS_LINE);
                ck_assert(!cfg.accept_share);
        }

        /* the last of a repeated flag wins */
        ck_assert_int_eq(parse(ARGS("--threads", "2", "--threads=5"), NULL), M0_CONFIG_SERVE);
        ck_assert_uint_eq(cfg.threads, 5);
        /* 0 parses (the threads-count check refuses it, not the parser) */
        ck_assert_int_eq(parse(ARGS("--threads=0"), NULL), M0_CONFIG_SERVE);
        ck_assert_uint_eq(cfg.threads, 0);
}
END_TEST

START_TEST(env_matching_is_exact)
{
        /* a longer name or a name without '=' is another variable */
        ck_assert_int_eq(
                parse(NULL, ENV("M0_THREADSX=abc", "M0_THREADS", "XM0_THREADS=7", "M0_PORTS=1")),
                M0_CONFIG_SERVE);
        ck_assert_uint_eq(cfg.threads, 1);
        ck_assert_uint_eq(cfg.port, 8080);
        ck_assert_int_eq(m0__config_source(&cfg, "threads"), M0_SRC_DEFAULT);
}
END_TEST

START_TEST(usage_errors)
{
        ck_assert_int_eq(parse(ARGS("--nope"), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err, "unknown option '--nope'");
        ck_assert_int_eq(parse(ARGS("--nope=3"), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err, "unknown option '--nope'");

        ck_assert_int_eq(parse(ARGS("--threads"), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err, "option '--threads' needs a value");

        ck_assert_int_eq(parse(ARGS("--threads", "x"), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err,
                         "option '--threads': 'x' is not a whole number from 0 to 1024, or auto");
        ck_assert_int_eq(parse(ARGS("--threads="), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err,
                         "option '--threads': '' is not a whole number from 0 to 1024, or auto");
        ck_assert_int_eq(parse(ARGS("--threads", "-1"), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err,
                         "option '--threads': '-1' is not a whole number from 0 to 1024, or auto");
        ck_assert_int_eq(parse(ARGS("--threads", "1025"), NULL), M0_CONFIG_USAGE);
        ck_assert_int_eq(parse(ARGS("--port", "65536"), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err, "option '--port': '65536' is not a whole number from 0 to 65535");
        ck_assert_int_eq(parse(ARGS("--port", " 80"), NULL), M0_CONFIG_USAGE);
        ck_assert_int_eq(parse(ARGS("--port", "80 "), NULL), M0_CONFIG_USAGE);
        ck_assert_int_eq(parse(ARGS("--port", "+80"), NULL), M0_CONFIG_USAGE);
        ck_assert_int_eq(parse(ARGS("--max-body-bytes", "1099511627777"), NULL), M0_CONFIG_USAGE);
        ck_assert_int_eq(parse(ARGS("--max-body-bytes", "99999999999999999999999"), NULL),
                         M0_CONFIG_USAGE);
        ck_assert_int_eq(parse(ARGS("--max-head-bytes", "255"), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err, "option '--max-head-bytes': '255' is not a whole number from 256 to "
                              "1048576");
        ck_assert_int_eq(parse(ARGS("--access-log", "maybe"), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err, "option '--access-log': 'maybe' is not off, on or journal");
        ck_assert_int_eq(parse(ARGS("--host="), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err, "option '--host': '' is not a host name or address");
        char longhost[300];
        memset(longhost, 'h', sizeof(longhost) - 1);
        longhost[sizeof(longhost) - 1] = '\0';
        ck_assert_int_eq(parse(ARGS("--host", longhost), NULL), M0_CONFIG_USAGE);

        /* a value that looks like the next flag is still the value, and malformed */
        ck_assert_int_eq(parse(ARGS("--threads", "--port", "80"), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err, "option '--threads': '--port' is not a whole number from 0 to 1024, "
                              "or auto");

        ck_assert_int_eq(parse(ARGS("serve"), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err, "unexpected argument 'serve'");
        ck_assert_int_eq(parse(ARGS("--port", "80", "extra"), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err, "unexpected argument 'extra'");
        ck_assert_int_eq(parse(ARGS("-t"), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err, "unexpected argument '-t'");
        ck_assert_int_eq(parse(ARGS("--"), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err, "unexpected argument '--'");
        ck_assert_int_eq(parse(ARGS("--help=1"), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err, "unknown option '--help'");
}
END_TEST

/* O1, O2: M0_METRICS is off or HOST:PORT; M0_ACCESS_LOG adds journal to on and off. */
START_TEST(metrics_and_access_log)
{
        ck_assert_int_eq(parse(NULL, ENV("M0_ACCESS_LOG=journal")), M0_CONFIG_SERVE);
        ck_assert_uint_eq(cfg.access_log, M0_ACCESS_JOURNAL);
        ck_assert_int_eq(parse(ARGS("--access-log=off"), ENV("M0_ACCESS_LOG=journal")),
                         M0_CONFIG_SERVE);
        ck_assert_uint_eq(cfg.access_log, M0_ACCESS_OFF);
        ck_assert_int_eq(parse(ARGS("--access-log", "Journal"), NULL), M0_CONFIG_USAGE);

        ck_assert_int_eq(parse(NULL, ENV("M0_METRICS=127.0.0.1:9464")), M0_CONFIG_SERVE);
        ck_assert(cfg.metrics.on);
        ck_assert_str_eq(cfg.metrics.host, "127.0.0.1");
        ck_assert_uint_eq(cfg.metrics.port, 9464);
        ck_assert_str_eq(cfg.metrics.text, "127.0.0.1:9464");
        ck_assert_int_eq(parse(ARGS("--metrics", "[::1]:0"), NULL), M0_CONFIG_SERVE);
        ck_assert_str_eq(cfg.metrics.host, "::1");
        ck_assert_uint_eq(cfg.metrics.port, 0);
        ck_assert_int_eq(parse(ARGS("--metrics=localhost:65535"), NULL), M0_CONFIG_SERVE);
        ck_assert_str_eq(cfg.metrics.host, "localhost");
        ck_assert_int_eq(parse(ARGS("--metrics=off"), ENV("M0_METRICS=127.0.0.1:1")),
                         M0_CONFIG_SERVE);
        ck_assert(!cfg.metrics.on);

        /* no port, no host, a port that is not one, an IPv6 address without its brackets */
        const char *bad[] = {"9464",      ":9464",     "host:",  "host:+1", "host:1 ",
                             "::1:9464",  "[::1]9464", "[::1]:", "[]:80",   "host:123456",
                             "host:0x50", "",          "on"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char e[300];
                snprintf(e, sizeof(e), "M0_METRICS=%s", bad[i]);
                ck_assert_msg(parse(NULL, ENV(e)) == M0_CONFIG_REFUSED, "%s was taken", e);
        }
        ck_assert_int_eq(parse(NULL, ENV("M0_METRICS=host:70000")), M0_CONFIG_REFUSED);
        ck_assert_str_eq(err, "M0_METRICS='host:70000' is not off or HOST:PORT with a port up to "
                              "65535 ([ADDR]:PORT for IPv6) (set M0_METRICS or --metrics)");
        ck_assert_int_eq(parse(ARGS("--metrics", "9464"), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err,
                         "option '--metrics': '9464' is not off or HOST:PORT with a port up to "
                         "65535 ([ADDR]:PORT for IPv6)");
        ck_assert_int_eq(parse(NULL, ENV("M0_METRICS_MAX_CONNECTIONS=0")), M0_CONFIG_REFUSED);
        ck_assert_int_eq(parse(NULL, ENV("M0_METRICS_TIMEOUT_MS=0")), M0_CONFIG_REFUSED);
        ck_assert_int_eq(parse(NULL, ENV("M0_ACCESS_LOG_QUEUE=0")), M0_CONFIG_REFUSED);
        ck_assert_int_eq(parse(ARGS("--metrics-max-connections=1024", "--metrics-timeout-ms=1",
                                    "--access-log-queue", "1000000"),
                               NULL),
                         M0_CONFIG_SERVE);
        ck_assert_uint_eq(cfg.metrics_max_connections, 1024);
        ck_assert_uint_eq(cfg.metrics_timeout_ms, 1);
        ck_assert_uint_eq(cfg.access_log_queue, 1000000);
}
END_TEST

START_TEST(usage_beats_refusal_and_help)
{
        /* a flag error is reported before a bad variable is even looked at */
        ck_assert_int_eq(parse(ARGS("--bogus"), ENV("M0_THREADS=abc")), M0_CONFIG_USAGE);
        ck_assert_str_eq(err, "unknown option '--bogus'");
        ck_assert_int_eq(parse(ARGS("--help", "--bogus"), NULL), M0_CONFIG_USAGE);
        ck_assert_str_eq(err, "unknown option '--bogus'");
}
END_TEST

START_TEST(env_refusals)
{
        ck_assert_int_eq(parse(NULL, ENV("M0_THREADS=abc")), M0_CONFIG_REFUSED);
        ck_assert_str_eq(err, "M0_THREADS='abc' is not a whole number from 0 to 1024, or auto "
                              "(set M0_THREADS or --threads)");
        ck_assert_int_eq(parse(NULL, ENV("M0_PORT=70000")), M0_CONFIG_REFUSED);
        ck_assert_str_eq(err,
                         "M0_PORT='70000' is not a whole number from 0 to 65535 (set M0_PORT or "
                         "--port)");
        ck_assert_int_eq(parse(NULL, ENV("M0_ACCESS_LOG=maybe")), M0_CONFIG_REFUSED);
        ck_assert_str_eq(err, "M0_ACCESS_LOG='maybe' is not off, on or journal (set M0_ACCESS_LOG "
                              "or --access-log)");

        /* empty, signed, padded, out of range: refused, never replaced by the default */
        const char *bad[] = {"M0_THREADS=",
                             "M0_THREADS=-1",
                             "M0_THREADS= 2",
                             "M0_THREADS=2 ",
                             "M0_THREADS=0x2",
                             "M0_PORT=65536",
                             "M0_HOST=",
                             "M0_ACCEPT_SHARE=ON ",
                             "M0_MAX_URI_BYTES=15",
                             "M0_MAX_BODY_BYTES=1e6"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char name[64];
                const char *eq = strchr(bad[i], '=');
                snprintf(name, sizeof(name), "%.*s='%s'", (int)(eq - bad[i]), bad[i], eq + 1);
                ck_assert_msg(parse(NULL, ENV((char *)bad[i])) == M0_CONFIG_REFUSED,
                              "%s was not refused", bad[i]);
                ck_assert_msg(strncmp(err, name, strlen(name)) == 0, "err for %s: '%s'", bad[i],
                              err);
        }

        /* the one bad variable among good ones is the one named */
        ck_assert_int_eq(parse(NULL, ENV("M0_PORT=80", "M0_WORKERS=many", "M0_THREADS=2")),
                         M0_CONFIG_REFUSED);
        ck_assert_str_eq(err, "M0_WORKERS='many' is not a whole number from 0 to 1024 (set "
                              "M0_WORKERS or --workers)");
}
END_TEST

START_TEST(flag_shadows_bad_env)
{
        /* the flag wins, so the variable it overrides is never read (documented in config.c) */
        ck_assert_int_eq(parse(ARGS("--threads", "3"), ENV("M0_THREADS=abc")), M0_CONFIG_SERVE);
        ck_assert_uint_eq(cfg.threads, 3);
        ck_assert_int_eq(m0__config_source(&cfg, "threads"), M0_SRC_FLAG);
}
END_TEST

START_TEST(threads_auto)
{
        unsigned n = m0__cpus_available();
        ck_assert_uint_ge(n, 1);
        ck_assert_int_eq(parse(ARGS("--threads", "auto"), NULL), M0_CONFIG_SERVE);
        ck_assert_uint_eq(cfg.threads, n);
        ck_assert(cfg.threads_auto);
        ck_assert_int_eq(m0__config_source(&cfg, "threads"), M0_SRC_FLAG);
        ck_assert_int_eq(parse(NULL, ENV("M0_THREADS=auto")), M0_CONFIG_SERVE);
        ck_assert_uint_eq(cfg.threads, n);
        ck_assert(cfg.threads_auto);
        ck_assert_int_eq(m0__config_source(&cfg, "threads"), M0_SRC_ENV);
        /* a count given over an `auto` variable is a count */
        ck_assert_int_eq(parse(ARGS("--threads=2"), ENV("M0_THREADS=auto")), M0_CONFIG_SERVE);
        ck_assert_uint_eq(cfg.threads, 2);
        ck_assert(!cfg.threads_auto);
        ck_assert_int_eq(parse(ARGS("--port=auto"), NULL), M0_CONFIG_USAGE);
}
END_TEST

START_TEST(cpus_follow_affinity)
{
        cpu_set_t saved, one;
        ck_assert_int_eq(sched_getaffinity(0, sizeof(saved), &saved), 0);
        int first = -1;
        for (int i = 0; i < CPU_SETSIZE && first < 0; i++)
                if (CPU_ISSET(i, &saved))
                        first = i;
        ck_assert_int_ge(first, 0);
        unsigned before = m0__cpus_available();
        ck_assert_uint_le(before, (unsigned)CPU_COUNT(&saved));
        CPU_ZERO(&one);
        CPU_SET(first, &one);
        ck_assert_int_eq(sched_setaffinity(0, sizeof(one), &one), 0);
        unsigned pinned = m0__cpus_available();
        ck_assert_int_eq(parse(ARGS("--threads=auto"), NULL), M0_CONFIG_SERVE);
        unsigned threads = cfg.threads;
        ck_assert_int_eq(sched_setaffinity(0, sizeof(saved), &saved), 0);
        ck_assert_uint_eq(pinned, 1);
        ck_assert_uint_eq(threads, 1);
        ck_assert_uint_eq(m0__cpus_available(), before);
}
END_TEST

static FILE *memout(char **ptr, size_t *len)
{
        FILE *f = open_memstream(ptr, len);
        ck_assert_ptr_nonnull(f);
        return f;
}

/* Every knob m0__config_each reports, as it reports them. */
#define SEEN_MAX 64
struct seen {
        size_t n;
        char flag[SEEN_MAX][64];
        char env[SEEN_MAX][64];
        char value[SEEN_MAX][300];
        enum m0_source src[SEEN_MAX];
};

static void collect(void *ud, const char *flag, const char *env, const char *value,
                    enum m0_source src)
{
        struct seen *s = ud;
        ck_assert_uint_lt(s->n, SEEN_MAX);
        snprintf(s->flag[s->n], sizeof(s->flag[0]), "%s", flag);
        snprintf(s->env[s->n], sizeof(s->env[0]), "%s", env);
        snprintf(s->value[s->n], sizeof(s->value[0]), "%s", value);
        s->src[s->n] = src;
        s->n++;
}

static size_t seen_find(const struct seen *s, const char *flag)
{
        for (size_t i = 0; i < s->n; i++)
                if (!strcmp(s->flag[i], flag))
                        return i;
        ck_abort_msg("m0__config_each did not visit --%s", flag);
        return SIZE_MAX;
}

/* The line of --help that describes --flag, checked to name `env` and end "default <def>". */
static void help_line(const char *text, const char *flag, const char *env, const char *def)
{
        char lead[80], tail[80];
        snprintf(lead, sizeof(lead), "\n  --%s ", flag);
        snprintf(tail, sizeof(tail), " default %s\n", def);
        const char *line = strstr(text, lead);
        ck_assert_msg(line != NULL, "--help does not name --%s", flag);
        line++;
        const char *eol = strchr(line, '\n');
        ck_assert_ptr_nonnull(eol);
        const char *e = strstr(line, env);
        ck_assert_msg(e && e < eol && e[-1] == ' ' && e[strlen(env)] == ' ',
                      "--%s's line does not name %s: '%.*s'", flag, env, (int)(eol - line), line);
        const char *d = strstr(line, tail);
        if (!(d && d + strlen(tail) - 1 == eol)) {
                /* a count whose default is `auto` renders as the CPUs it resolved to */
                d = strstr(line, " default auto\n");
                ck_assert_msg(d && d + strlen(" default auto\n") - 1 == eol &&
                                      def[strspn(def, "0123456789")] == '\0' &&
                                      strtoul(def, NULL, 10) == m0__cpus_available(),
                              "--%s's line does not end '%s': '%.*s'", flag, tail,
                              (int)(eol - line), line);
        }
}

START_TEST(help_lists_every_knob)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = memout(&text, &len);
        /* --help is answered even when a variable would be refused */
        ck_assert_int_eq(parse_out(ARGS("--help"), ENV("M0_THREADS=abc"), f), M0_CONFIG_HELP);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_uint_gt(len, 0);
        ck_assert_uint_eq(strlen(text), len);
        ck_assert_msg(strncmp(text, "usage: app ", 11) == 0, "help starts '%.40s'", text);

        /* the knobs above, with their defaults */
        for (size_t i = 0; i < NKNOBS; i++)
                help_line(text, knobs[i].flag, knobs[i].env, knobs[i].def);

        /* and every knob there is, however many are added: the same table drives both */
        static struct seen s;
        memset(&s, 0, sizeof(s));
        ck_assert_int_eq(parse(NULL, NULL), M0_CONFIG_SERVE);
        m0__config_each(&cfg, collect, &s);
        for (size_t i = 0; i < s.n; i++)
                help_line(text, s.flag[i], s.env[i], s.value[i]);
        size_t lines = 0;
        for (const char *p = strstr(text, "\n  --"); p; p = strstr(p + 1, "\n  --")) {
                const char *eol = strchr(p + 1, '\n');
                const char *m = strstr(p, " M0_");
                if (m && eol && m < eol)
                        lines++;
        }
        ck_assert_uint_eq(lines, s.n);

        ck_assert_ptr_nonnull(strstr(text, "\n  --doctor "));
        ck_assert_ptr_nonnull(strstr(text, "\n  --help "));
        ck_assert_ptr_nonnull(strstr(text, "\n  --version "));
        free(text);

        /* m0__config_usage prints the same text */
        char *usage = NULL;
        size_t ulen = 0;
        f = memout(&usage, &ulen);
        m0__config_usage(f, "app");
        ck_assert_int_eq(fclose(f), 0);
        f = memout(&text, &len);
        ck_assert_int_eq(parse_out(ARGS("--help"), NULL, f), M0_CONFIG_HELP);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_bytes(text, len, usage, ulen);
        free(text);
        free(usage);
}
END_TEST

START_TEST(version)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = memout(&text, &len);
        ck_assert_int_eq(parse_out(ARGS("--version"), NULL, f), M0_CONFIG_VERSION);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_str_eq(m0_version(), PACKAGE_VERSION);
        ck_assert_str_eq(text, "app (m0) " PACKAGE_VERSION "\n");
        free(text);
        /* --help wins over --version when both are given */
        f = memout(&text, &len);
        ck_assert_int_eq(parse_out(ARGS("--version", "--help"), NULL, f), M0_CONFIG_HELP);
        ck_assert_int_eq(fclose(f), 0);
        free(text);
}
END_TEST

START_TEST(each_visits_every_knob)
{
        static struct seen s;
        memset(&s, 0, sizeof(s));
        ck_assert_int_eq(parse(NULL, NULL), M0_CONFIG_SERVE);
        m0__config_each(&cfg, collect, &s);
        ck_assert_uint_ge(s.n, NKNOBS);
        /* the knobs above, in --help order, each with its default */
        size_t prev = 0;
        for (size_t i = 0; i < NKNOBS; i++) {
                size_t k = seen_find(&s, knobs[i].flag);
                ck_assert_msg(i == 0 || k > prev, "--%s is out of order", knobs[i].flag);
                prev = k;
                ck_assert_str_eq(s.env[k], knobs[i].env);
                ck_assert_str_eq(s.value[k], knobs[i].def);
        }
        /* every knob: once, with M0_<FLAG> as its variable, from the default */
        for (size_t i = 0; i < s.n; i++) {
                char env[80] = "M0_";
                size_t o = 3;
                for (const char *c = s.flag[i]; *c && o < sizeof(env) - 1; c++)
                        env[o++] = *c == '-' ? '_' : (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
                env[o] = '\0';
                ck_assert_str_eq(s.env[i], env);
                ck_assert_int_eq(s.src[i], M0_SRC_DEFAULT);
                ck_assert_int_eq(m0__config_source(&cfg, s.flag[i]), M0_SRC_DEFAULT);
                for (size_t j = 0; j < i; j++)
                        ck_assert_str_ne(s.flag[i], s.flag[j]);
        }

        /* values and sources follow a parse */
        size_t n = s.n;
        memset(&s, 0, sizeof(s));
        ck_assert_int_eq(parse(ARGS("--port", "81", "--access-log=yes"),
                               ENV("M0_THREADS=4", "M0_MAX_BODY_BYTES=1099511627776")),
                         M0_CONFIG_SERVE);
        m0__config_each(&cfg, collect, &s);
        ck_assert_uint_eq(s.n, n);
        size_t k = seen_find(&s, "port");
        ck_assert_str_eq(s.value[k], "81");
        ck_assert_int_eq(s.src[k], M0_SRC_FLAG);
        k = seen_find(&s, "threads");
        ck_assert_str_eq(s.value[k], "4");
        ck_assert_int_eq(s.src[k], M0_SRC_ENV);
        k = seen_find(&s, "access-log");
        ck_assert_str_eq(s.value[k], "on");
        ck_assert_int_eq(s.src[k], M0_SRC_FLAG);
        k = seen_find(&s, "max-body-bytes");
        ck_assert_str_eq(s.value[k], "1099511627776");
        ck_assert_int_eq(s.src[k], M0_SRC_ENV);
        k = seen_find(&s, "host");
        ck_assert_str_eq(s.value[k], "127.0.0.1");
        ck_assert_int_eq(s.src[k], M0_SRC_DEFAULT);
}
END_TEST

static Suite *config_suite(void)
{
        Suite *s = suite_create("config");
        TCase *tc = tcase_create("config");
        tcase_add_test(tc, defaults);
        tcase_add_test(tc, flag_beats_env_beats_default);
        tcase_add_test(tc, flag_forms);
        tcase_add_test(tc, env_matching_is_exact);
        tcase_add_test(tc, usage_errors);
        tcase_add_test(tc, usage_beats_refusal_and_help);
        tcase_add_test(tc, metrics_and_access_log);
        tcase_add_test(tc, env_refusals);
        tcase_add_test(tc, flag_shadows_bad_env);
        tcase_add_test(tc, threads_auto);
        tcase_add_test(tc, cpus_follow_affinity);
        tcase_add_test(tc, help_lists_every_knob);
        tcase_add_test(tc, version);
        tcase_add_test(tc, each_visits_every_knob);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return unit_run(config_suite());
}
