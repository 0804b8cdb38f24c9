/* SPDX-License-Identifier: MIT */
/* pgbus-drive: drives the PostgreSQL bus module through its interface for the tests and the M6 measurement (SPEC G7, G8). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "log.h"
#include "pgbus.h"
#include "util.h"
#include "pgbus.h"

/*
 * Usage: pgbus-drive --uri URI [--name N] [--queue N] [--replay-max N] [--retain-s S]
 *                    [--retain-rows N] [--retain-every-ms MS] [--start-after ID]
 *                    [--wait-ready MS] [--quiet]
 * Commands, one a line on stdin; answers and events, one a line on stdout:
 *   pub CH EV DATA…                 -> "P 0" or "P -errno"      (EV "-": no event name)
 *   pubn N CH[,CH…] EV PREFIX [RATE] -> "PN accepted=A refused=R"; data PREFIX-1…PREFIX-N, RATE
 *                                     events/s (0: at once), a refused publish is not retried
 *   flood N CH EV [RATE]            -> "PN accepted=N refused=R": data "t=<µs>", retried on
 *                                     -EAGAIN (R counts the retries), RATE as for pubn
 *   pubbig N CH SIZE                -> "PN accepted=A refused=R": N events of SIZE bytes
 *   replay AFTER MAX [PATTERN…]     -> "R id ch ev data" per row, then "RD err=E n=N truncated=T
 *                                     upto=U"
 *   state                           -> "S <state>"        (also printed whenever it changes)
 *   stats                           -> "T name=value…"
 *   lat                             -> "L n=N p50_us=… p99_us=… cpu_us=…" over "t=" events
 *   latreset                        -> "LR": forget the latencies measured so far
 *   quit [FLUSH_MS]                 -> "Q left=N", and the exit
 * Each delivered event: "E id channel event data" (event "-" when none; data's newlines as \n),
 * unless --quiet. A refused schema at --wait-ready exits 78 with "refused: …" on stderr.
 */

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static bool quiet;
static pthread_mutex_t lat_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t *lat;
static size_t nlat, caplat;

static void out(const char *fmt, ...) M0_PRINTF(1, 2);
static void out(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        pthread_mutex_lock(&out_lock);
        vfprintf(stdout, fmt, ap);
        fputc('\n', stdout);
        fflush(stdout);
        pthread_mutex_unlock(&out_lock);
        va_end(ap);
}

static uint64_t now_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void print_event(const char *tag, const struct m0_pgbus_event *ev)
{
        struct m0_buf d = {0};
        for (const char *p = ev->data; *p; p++)
                if (*p == '\n')
                        m0__buf_append(&d, "\\n", 2);
                else
                        m0__buf_append(&d, p, 1);
        m0__buf_append(&d, "", 1);
        out("%s %" PRIu64 " %s %s %s", tag, ev->id, ev->channel, ev->event ? ev->event : "-",
            d.data ? d.data : "");
        m0__buf_free(&d);
}

/* On the bus thread. */
static void deliver(void *ud, const struct m0_pgbus_event *ev)
{
        (void)ud;
        if (!strncmp(ev->data, "t=", 2)) {
                uint64_t t = strtoull(ev->data + 2, NULL, 10), now = now_us();
                pthread_mutex_lock(&lat_lock);
                if (nlat == caplat) {
                        size_t cap = caplat ? caplat * 2 : 4096;
                        uint32_t *p = realloc(lat, cap * sizeof(*lat));
                        if (p) {
                                lat = p;
                                caplat = cap;
                        }
                }
                if (nlat < caplat)
                        lat[nlat++] = (uint32_t)(now > t ? now - t : 0);
                pthread_mutex_unlock(&lat_lock);
        }
        if (!quiet)
                print_event("E", ev);
}

static void state_changed(void *ud, const char *state)
{
        (void)ud;
        out("S %s", state);
}

/* A replay's answer, on the bus thread; the main thread waits for it. */
static pthread_mutex_t rp_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rp_cond = PTHREAD_COND_INITIALIZER;
static bool rp_done;

static void replayed(void *ud, const struct m0_pgbus_replayed *r)
{
        (void)ud;
        for (size_t i = 0; i < r->n; i++)
                print_event("R", &r->ev[i]);
        out("RD err=%d n=%zu truncated=%d upto=%" PRIu64 "%s%s", r->err, r->n, r->truncated,
            r->upto, r->why ? " why=" : "", r->why ? r->why : "");
        pthread_mutex_lock(&rp_lock);
        rp_done = true;
        pthread_cond_signal(&rp_cond);
        pthread_mutex_unlock(&rp_lock);
}

static int cmp_u32(const void *a, const void *b)
{
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
        return x < y ? -1 : x > y;
}

static void sleep_us(uint64_t us)
{
        struct timespec ts = {.tv_sec = (time_t)(us / 1000000u),
                              .tv_nsec = (long)(us % 1000000u) * 1000};
        nanosleep(&ts, NULL);
}

static void cmd_pubn(struct m0_pgbus *b, char *args, bool flood)
{
        char *save = NULL;
        char *ns = strtok_r(args, " ", &save), *chs = strtok_r(NULL, " ", &save);
        char *ev = strtok_r(NULL, " ", &save), *prefix = flood ? NULL : strtok_r(NULL, " ", &save);
        char *rates = strtok_r(NULL, " ", &save);
        if (!ns || !chs || !ev || (!flood && !prefix)) {
                out("PN usage");
                return;
        }
        unsigned long n = strtoul(ns, NULL, 10), rate = rates ? strtoul(rates, NULL, 10) : 0;
        char *chv[64];
        size_t nch = 0;
        for (char *s2 = NULL, *c = strtok_r(chs, ",", &s2); c && nch < 64;
             c = strtok_r(NULL, ",", &s2))
                chv[nch++] = c;
        uint64_t t0 = now_us(), accepted = 0, refused = 0;
        char data[128];
        for (unsigned long i = 1; i <= n; i++) {
                if (rate) {
                        uint64_t due = t0 + (i - 1) * 1000000u / rate, t = now_us();
                        if (due > t)
                                sleep_us(due - t);
                }
                const char *ch = chv[(i - 1) % nch];
                const char *e = strcmp(ev, "-") ? ev : NULL;
                int r;
                for (;;) {
                        if (flood)
                                snprintf(data, sizeof(data), "t=%" PRIu64, now_us());
                        else
                                snprintf(data, sizeof(data), "%s-%lu", prefix, i);
                        r = m0__pgbus_publish(b, ch, e, data);
                        if (r != -EAGAIN || !flood)
                                break;
                        refused++;
                        sleep_us(200);
                }
                if (r == 0)
                        accepted++;
                else if (r == -EAGAIN)
                        refused++;
        }
        out("PN accepted=%" PRIu64 " refused=%" PRIu64, accepted, refused);
}

/* N events of SIZE bytes each on CH: event i's data is "i:" then letters from 'a' + i % 26. */
static void cmd_pubbig(struct m0_pgbus *b, char *args)
{
        char *save = NULL;
        char *ns = strtok_r(args, " ", &save), *ch = strtok_r(NULL, " ", &save);
        char *sizes = strtok_r(NULL, " ", &save);
        if (!ns || !ch || !sizes) {
                out("PN usage");
                return;
        }
        unsigned long n = strtoul(ns, NULL, 10), size = strtoul(sizes, NULL, 10);
        char *data = malloc(size + 32);
        uint64_t accepted = 0, refused = 0;
        for (unsigned long i = 1; data && i <= n; i++) {
                int k = snprintf(data, 32, "%lu:", i);
                for (unsigned long j = (unsigned long)k; j < size; j++)
                        data[j] = (char)('a' + (i + j) % 26);
                data[size > (unsigned long)k ? size : (unsigned long)k] = '\0';
                int r = m0__pgbus_publish(b, ch, "big", data);
                accepted += r == 0;
                refused += r == -EAGAIN;
        }
        free(data);
        out("PN accepted=%" PRIu64 " refused=%" PRIu64, accepted, refused);
}

static void cmd_replay(struct m0_pgbus *b, char *args)
{
        char *save = NULL;
        char *as = strtok_r(args, " ", &save), *ms = strtok_r(NULL, " ", &save);
        if (!as || !ms) {
                out("RD usage");
                return;
        }
        const char *pat[32];
        size_t n = 0;
        for (char *p = strtok_r(NULL, " ", &save); p && n < 32; p = strtok_r(NULL, " ", &save))
                pat[n++] = p;
        pthread_mutex_lock(&rp_lock);
        rp_done = false;
        pthread_mutex_unlock(&rp_lock);
        int r = m0__pgbus_replay(b, strtoull(as, NULL, 10), pat, n, (uint32_t)strtoul(ms, NULL, 10),
                                 replayed, NULL);
        if (r < 0) {
                out("RD err=%d n=0 truncated=0 upto=0", r);
                return;
        }
        pthread_mutex_lock(&rp_lock);
        while (!rp_done)
                pthread_cond_wait(&rp_cond, &rp_lock);
        pthread_mutex_unlock(&rp_lock);
}

static void cmd_stats(struct m0_pgbus *b)
{
        struct m0_pgbus_stats s;
        m0__pgbus_stats(b, &s);
        out("T queued=%" PRIu64 " published=%" PRIu64 " refused=%" PRIu64 " delivered=%" PRIu64
            " lost=%" PRIu64 " last=%" PRIu64 " batches=%" PRIu64 " reconnects=%" PRIu64
            " replays=%" PRIu64 " retain_runs=%" PRIu64 " retain_busy=%" PRIu64
            " retain_batches=%" PRIu64 " retain_deleted=%" PRIu64 " created=%d",
            s.queued, s.published, s.refused, s.delivered, s.lost, s.last_id, s.batches,
            s.reconnects, s.replays, s.retain_runs, s.retain_busy, s.retain_batches,
            s.retain_deleted, s.created);
}

static void cmd_lat(void)
{
        pthread_mutex_lock(&lat_lock);
        qsort(lat, nlat, sizeof(*lat), cmp_u32);
        uint32_t p50 = nlat ? lat[nlat / 2] : 0, p99 = nlat ? lat[nlat * 99 / 100] : 0;
        size_t n = nlat;
        pthread_mutex_unlock(&lat_lock);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        uint64_t cpu = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
                       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
        out("L n=%zu p50_us=%" PRIu32 " p99_us=%" PRIu32 " cpu_us=%" PRIu64, n, p50, p99, cpu);
}

static int usage(void)
{
        fprintf(stderr, "usage: pgbus-drive --uri URI [--name N] [--queue N] [--replay-max N] "
                        "[--retain-s S] [--retain-rows N] [--retain-every-ms MS] "
                        "[--start-after ID] [--wait-ready MS] [--quiet]\n");
        return 2;
}

int main(int argc, char **argv)
{
        struct m0_pgbus_options o = {
                .name = "drive",
                .queue_max = 10000,
                .replay_max = 10000,
                .retain_s = 0,
                .retain_rows = 0,
                .start_after = M0__PGBUS_FROM_END,
                .deliver = deliver,
                .state_changed = state_changed,
        };
        int wait_ms = -1;
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                if (!strcmp(a, "--quiet")) {
                        quiet = true;
                        continue;
                }
                if (i + 1 >= argc)
                        return usage();
                const char *v = argv[++i];
                if (!strcmp(a, "--uri"))
                        o.uri = v;
                else if (!strcmp(a, "--name"))
                        o.name = v;
                else if (!strcmp(a, "--queue"))
                        o.queue_max = (uint32_t)strtoul(v, NULL, 10);
                else if (!strcmp(a, "--replay-max"))
                        o.replay_max = (uint32_t)strtoul(v, NULL, 10);
                else if (!strcmp(a, "--retain-s"))
                        o.retain_s = (uint32_t)strtoul(v, NULL, 10);
                else if (!strcmp(a, "--retain-rows"))
                        o.retain_rows = strtoull(v, NULL, 10);
                else if (!strcmp(a, "--retain-every-ms"))
                        o.retain_every_ms = (uint32_t)strtoul(v, NULL, 10);
                else if (!strcmp(a, "--start-after"))
                        o.start_after = strtoull(v, NULL, 10);
                else if (!strcmp(a, "--wait-ready"))
                        wait_ms = atoi(v);
                else
                        return usage();
        }
        if (!o.uri)
                return usage();
        m0__log_init("pgbus-drive");
        struct m0_pgbus *b = NULL;
        char err[600];
        if (m0__pgbus_new(&b, &o, err, sizeof(err)) < 0) {
                fprintf(stderr, "refused: M0_BUS: %s\n", err);
                return 78;
        }
        if (wait_ms >= 0) {
                int r = m0__pgbus_wait_ready(b, wait_ms, err, sizeof(err));
                if (r == -EPROTO) {
                        fprintf(stderr, "refused: %s\n", err);
                        m0__pgbus_free(b);
                        return 78;
                }
                out("READY %s", r == 0 ? "ok" : "timeout");
        }
        char line[4096];
        int rc = 0, flush = 0;
        while (fgets(line, sizeof(line), stdin)) {
                line[strcspn(line, "\n")] = '\0';
                char *sp = strchr(line, ' ');
                char *args = sp ? sp + 1 : line + strlen(line);
                if (sp)
                        *sp = '\0';
                if (!strcmp(line, "pub")) {
                        char *save = NULL;
                        char *ch = strtok_r(args, " ", &save), *ev = strtok_r(NULL, " ", &save);
                        char *data = save ? save : (char *)"";
                        if (!ch || !ev) {
                                out("P usage");
                                continue;
                        }
                        out("P %d", m0__pgbus_publish(b, ch, strcmp(ev, "-") ? ev : NULL, data));
                } else if (!strcmp(line, "pubn")) {
                        cmd_pubn(b, args, false);
                } else if (!strcmp(line, "flood")) {
                        cmd_pubn(b, args, true);
                } else if (!strcmp(line, "pubbig")) {
                        cmd_pubbig(b, args);
                } else if (!strcmp(line, "replay")) {
                        cmd_replay(b, args);
                } else if (!strcmp(line, "state")) {
                        char s[700];
                        m0__pgbus_state(b, s, sizeof(s));
                        out("S %s", s);
                } else if (!strcmp(line, "stats")) {
                        cmd_stats(b);
                } else if (!strcmp(line, "lat")) {
                        cmd_lat();
                } else if (!strcmp(line, "latreset")) {
                        pthread_mutex_lock(&lat_lock);
                        nlat = 0;
                        pthread_mutex_unlock(&lat_lock);
                        out("LR");
                } else if (!strcmp(line, "quit")) {
                        flush = atoi(args);
                        break;
                } else if (line[0]) {
                        out("? %s", line);
                }
        }
        uint64_t left = m0__pgbus_stop(b, flush);
        out("Q left=%" PRIu64, left);
        m0__pgbus_free(b);
        free(lat);
        return rc;
}
